/*
 * url_client: loads one URL with lds_load_url (public API only) from a pool of
 * its own and prints what happened, one "name value" pair a line, for
 * tests/test_url.py:
 *
 *   url_client [--file PATH] [--max-payload N] [--low-speed S] [--resumes N]
 *              [--redirects N] [--cancel-after N] [--chunk N] [--userpwd U:P]
 *              [--ca-file PEM] [--live FILE [--delta]] [--timeout MS] [--connections K] URL
 *
 * --file also loads PATH from disk and prints "same 1" when both indexes hold
 * the same rows, dim, payload bytes and verified checksum (XXH3-64 of every
 * payload byte). --cancel-after N cancels once N payload bytes have arrived.
 * url_client --write PATH ROWS DIM CHUNK writes a test index instead (write_index).
 * --connections K sets lds_load_options.url_connections (printed back as "connections",
 * the count used).
 * --live FILE makes a live index serving FILE (generation 1), reloads it from
 * URL with lds_live_reload_url and prints "live_status", "live_generation" and
 * "live_rows" (what a pin sees afterwards), instead of the plain load; with
 * --delta, lds_live_reload_url_delta (and "bytes_read", "bytes_copied", "chunks_read",
 * "chunks_copied", "delta_fallback", "delta_why"; with --file, "same 1" when the serving
 * generation holds that file's rows and checksum). url_client --write ... ROW changes
 * one row of the written index.
 * The process always prints "status", "message", "field", "rents", "returns",
 * "leases" and "peak_rss_kb"; exit 0 whatever the status (the test judges).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "lodestar.h"

typedef struct cancel_ctx {
    uint64_t after;
    uint64_t done;
} cancel_ctx;

static bool want_cancel(void *ctx)
{
    cancel_ctx *c = ctx;
    return c->after != 0 && c->done >= c->after;
}

static void progress(uint64_t done, uint64_t total, void *ctx)
{
    (void)total;
    ((cancel_ctx *)ctx)->done = done;
}

static void print_pool(lds_pool *pool)
{
    lds_pool_stats ps;
    lds_pool_stats_init(&ps);
    lds_pool_get_stats(pool, &ps);
    printf("rents %" PRIu64 "\nreturns %" PRIu64 "\nleases %" PRIu64 "\n", ps.rents, ps.returns,
           ps.leases_current);
}

/* --live: generation 1 from `file`, then a reload from `url` (--delta: a delta reload,
 * lds_live_reload_url_delta); what a pin sees after; with `same_as` (--file), whether
 * the serving index holds that file's payload. */
static int live_reload(const char *file, const char *url, const lds_load_options *opts,
                       lds_pool *pool, bool delta, const char *same_as)
{
    lds_live *live = NULL;
    lds_error err;
    lds_error_init(&err);
    lds_load_options po = *opts;
    po.use_mmap = false; /* a rented generation 1: a delta can copy from it */
    if (lds_live_create(NULL, &live, &err) != LDS_OK ||
        lds_live_reload_path(live, file, &po, NULL, NULL, &err) != LDS_OK) {
        fprintf(stderr, "url_client: %s\n", err.message);
        return 1;
    }
    uint64_t gen = 0;
    lds_load_info info;
    lds_load_info_init(&info);
    lds_status st = lds_live_reload_url_delta(live, url, delta, opts, &gen, &info, &err);
    lds_pin pin;
    if (lds_live_pin(live, &pin) != LDS_OK)
        return 1;
    printf("live_status %s\n", lds_status_name(st));
    printf("message %s\n", st == LDS_OK ? "" : err.message);
    printf("field %s\n", st != LDS_OK && err.field != NULL ? err.field : "");
    printf("live_generation %" PRIu64 "\n", pin.generation);
    printf("live_rows %" PRIu64 "\n", lds_index_rows(pin.index));
    printf("bytes_read %" PRIu64 "\nbytes_copied %" PRIu64 "\n", info.bytes_read,
           info.bytes_copied);
    printf("chunks_read %" PRIu32 "\nchunks_copied %" PRIu32 "\n", info.chunks_read,
           info.chunks_copied);
    printf("payload_bytes %" PRIu64 "\n", info.payload_bytes);
    printf("delta_fallback %d\n", info.delta_fallback ? 1 : 0);
    lds_live_stats ls;
    lds_live_stats_init(&ls);
    lds_live_get_stats(live, &ls);
    printf("delta_why %s\n", ls.delta_fallback_reason);
    if (same_as != NULL) {
        lds_load_options fo;
        lds_load_options_default(&fo);
        lds_index *ref = NULL;
        lds_status fs = lds_load_path(same_as, &fo, &ref, NULL, NULL);
        size_t n = lds_index_payload_bytes(ref);
        bool same = fs == LDS_OK && n == lds_index_payload_bytes(pin.index) &&
                    lds_index_checksum(ref) == lds_index_checksum(pin.index) &&
                    lds_index_rows(ref) == lds_index_rows(pin.index);
        for (uint64_t r = 0; same && r < lds_index_rows(ref); r++)
            same = memcmp(lds_index_row(ref, r), lds_index_row(pin.index, r),
                          lds_index_dim(ref) * sizeof(float)) == 0;
        printf("same %d\n", same ? 1 : 0);
        lds_index_free(ref);
    }
    lds_live_unpin(live, &pin);
    lds_live_free(live);
    print_pool(pool);
    lds_pool_free(pool);
    return 0;
}

/* --write PATH ROWS DIM CHUNK [ROW]: a pseudo-random f32 index with keys "w<row>", in format
 * 1.1 with CHUNK-byte chunks (LDS_CHUNKS_NONE for 1.0), for the ranged-fetch cases; with ROW,
 * that row's first value is 1 more (the delta cases). */
static int write_index(const char *path, uint64_t rows, uint32_t dim, uint32_t chunk,
                       uint64_t changed)
{
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = dim;
    wo.with_keys = true;
    wo.chunk_bytes = chunk;
    lds_writer *w = NULL;
    lds_error err;
    lds_error_init(&err);
    float *vec = malloc((size_t)dim * sizeof *vec);
    if (vec == NULL)
        return 1;
    lds_status st = lds_writer_open_path(path, &wo, &w, &err);
    uint64_t x = 0x243F6A8885A308D3u;
    for (uint64_t r = 0; st == LDS_OK && r < rows; r++) {
        for (uint32_t d = 0; d < dim; d++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            vec[d] = (float)((double)(x >> 11) / 9007199254740992.0 - 0.5);
        }
        if (r == changed)
            vec[0] += 1.0f; /* the same file but this row: one chunk differs */
        char key[32];
        int kl = snprintf(key, sizeof key, "w%llu", (unsigned long long)r);
        st = lds_writer_add_row(w, vec, dim, r, key, (size_t)kl, &err);
    }
    if (st == LDS_OK)
        st = lds_writer_finish(w, &err);
    lds_writer_free(w);
    free(vec);
    if (st != LDS_OK)
        fprintf(stderr, "url_client: writing %s: %s\n", path, err.message);
    return st == LDS_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "--write") == 0)
        return write_index(argv[2], strtoull(argv[3], NULL, 10), (uint32_t)strtoul(argv[4], NULL, 10),
                           (uint32_t)strtoul(argv[5], NULL, 10),
                           argc == 7 ? strtoull(argv[6], NULL, 10) : UINT64_MAX);
    lds_load_options opts;
    lds_load_options_default(&opts);
    lds_url_options uo;
    lds_url_options_default(&uo);
    opts.url = &uo;
    cancel_ctx cc = {0, 0};
    const char *file = NULL, *url = NULL, *live_file = NULL;
    bool delta = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strncmp(a, "--", 2) == 0 && v == NULL) {
            fprintf(stderr, "url_client: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--delta") == 0) {
            delta = true;
            continue;
        }
        if (strcmp(a, "--file") == 0)
            file = v;
        else if (strcmp(a, "--live") == 0)
            live_file = v;
        else if (strcmp(a, "--max-payload") == 0)
            opts.max_payload_bytes = strtoull(v, NULL, 10);
        else if (strcmp(a, "--low-speed") == 0)
            uo.low_speed_time_s = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--timeout") == 0)
            uo.timeout_ms = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--resumes") == 0)
            uo.max_resumes = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--redirects") == 0)
            uo.max_redirects = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--cancel-after") == 0)
            cc.after = strtoull(v, NULL, 10);
        else if (strcmp(a, "--connections") == 0)
            opts.url_connections = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--chunk") == 0)
            opts.chunk_bytes = (size_t)strtoull(v, NULL, 10);
        else if (strcmp(a, "--ca-file") == 0)
            uo.ca_file = v;
        else if (strcmp(a, "--userpwd") == 0)
            uo.userpwd = v;
        else {
            url = a;
            continue;
        }
        i++;
    }
    if (url == NULL) {
        fprintf(stderr, "usage: url_client [options] URL\n");
        return 2;
    }
    lds_pool *pool = NULL;
    if (lds_pool_create(NULL, &pool) != LDS_OK)
        return 1;
    opts.pool = pool;
    opts.cancel = want_cancel;
    opts.progress = progress;
    opts.callback_ctx = &cc;

    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    lds_error err;
    lds_error_init(&err);
    if (live_file != NULL)
        return live_reload(live_file, url, &opts, pool, delta, file);
    lds_status st = lds_load_url(url, &opts, &idx, &info, &err);
    printf("status %s\n", lds_status_name(st));
    printf("message %s\n", st == LDS_OK ? "" : err.message);
    printf("field %s\n", st != LDS_OK && err.field != NULL ? err.field : "");
    printf("path %s\n", lds_load_path_name(info.path));
    printf("compressed %d\n", info.compressed ? 1 : 0);
    printf("http_status %d\n", info.http_status);
    printf("resumes %" PRIu32 "\n", info.resumes);
    printf("connections %" PRIu32 "\n", info.url_connections);
    printf("hashed_while_reading %d\n", info.hashed_while_reading ? 1 : 0);
    printf("payload_bytes %" PRIu64 "\n", info.payload_bytes);
    printf("capacity_bytes %" PRIu64 "\n", info.capacity_bytes);
    if (st == LDS_OK) {
        printf("rows %" PRIu64 "\n", lds_index_rows(idx));
        printf("checksum %016" PRIx64 "\n", lds_index_checksum(idx));
        printf("verified %d\n", lds_index_checksum_verified(idx) ? 1 : 0);
    }
    if (st == LDS_OK && file != NULL) {
        lds_load_options fo;
        lds_load_options_default(&fo);
        lds_index *ref = NULL;
        lds_status fs = lds_load_path(file, &fo, &ref, NULL, NULL);
        bool same = fs == LDS_OK && lds_index_rows(ref) == lds_index_rows(idx) &&
                    lds_index_dim(ref) == lds_index_dim(idx) &&
                    lds_index_payload_bytes(ref) == lds_index_payload_bytes(idx) &&
                    lds_index_checksum(ref) == lds_index_checksum(idx) &&
                    lds_index_checksum_verified(ref) && lds_index_checksum_verified(idx);
        printf("same %d\n", same ? 1 : 0);
        lds_index_free(ref);
    }
    lds_index_free(idx);
    print_pool(pool);
    lds_pool_free(pool);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("peak_rss_kb %ld\n", ru.ru_maxrss);
    return 0;
}
