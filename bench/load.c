/*
 * load: every load path side by side on one file, page cache warm, against a
 * bare read() of the same bytes into a warm aligned buffer (the physical
 * limit). Pooled copy vs pooled adopt; the checksum hashed while reading vs a
 * second pass; mapped; growable (a stream that does not know its length).
 */
#include "bench.h"

#include "lodestar.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GLOVE_PATH       ".cache/glove/glove-100d.ldsi"
#define MAX_FREE_SAMPLES 512

enum kind { K_BARE, K_LOAD, K_GROWABLE };

typedef struct ld_ctx {
    enum kind kind;
    const char *path;
    lds_load_options lo;
    unsigned char *buf; /* bare read: a warm buffer */
    size_t buf_cap;
    lds_load_info info;
    double free_us[MAX_FREE_SAMPLES];
    size_t n_free;
} ld_ctx;

static int bare_read(ld_ctx *c)
{
    int fd = open(c->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    for (;;) {
        size_t want = c->buf_cap - got;
        if (want > LDS_DEFAULT_CHUNK_BYTES)
            want = LDS_DEFAULT_CHUNK_BYTES;
        if (want == 0)
            break;
        ssize_t n = read(fd, c->buf + got, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    bench_escape(c->buf);
    return got == c->buf_cap ? 0 : -1;
}

static lds_status read_fd(void *ctx, void *buf, size_t cap, size_t *got)
{
    int fd = *(int *)ctx;
    ssize_t n = read(fd, buf, cap);
    if (n < 0) {
        if (errno == EINTR) {
            *got = LDS_READ_RETRY;
            return LDS_OK;
        }
        return LDS_E_IO;
    }
    *got = (size_t)n;
    return LDS_OK;
}

static int run(void *p, uint64_t ops, uint64_t *elapsed)
{
    ld_ctx *c = p;
    (void)ops;
    if (c->kind == K_BARE)
        return bare_read(c);
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    lds_load_info_init(&c->info);
    lds_status st;
    uint64_t t0 = bench_now_ns();
    if (c->kind == K_GROWABLE) {
        int fd = open(c->path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return -1;
        st = lds_load_callback(read_fd, &fd, &c->lo, &idx, &c->info, &err);
        close(fd);
    } else {
        st = lds_load_path(c->path, &c->lo, &idx, &c->info, &err);
    }
    uint64_t t1 = bench_now_ns();
    if (st != LDS_OK) {
        fprintf(stderr, "load: %s: %s: %s\n", c->path, lds_status_name(st), err.message);
        return -1;
    }
    bench_escape(lds_index_row(idx, 0));
    lds_index_free(idx);
    uint64_t t2 = bench_now_ns();
    *elapsed = t1 - t0;
    if (c->n_free < MAX_FREE_SAMPLES)
        c->free_us[c->n_free++] = (double)(t2 - t1) / 1e3;
    return 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct variant {
    const char *name;
    enum kind kind;
    lds_ownership own;
    bool verify, while_reading, mmap, populate;
} variant;

static const variant variants[] = {
    {"bare read() into a warm aligned buffer", K_BARE, LDS_OWN_DEFAULT, false, false, false, false},
    {"pooled adopt, hash while reading", K_LOAD, LDS_OWN_ADOPT, true, true, false, false},
    {"pooled copy, hash while reading", K_LOAD, LDS_OWN_COPY, true, true, false, false},
    {"pooled adopt, two-pass hash", K_LOAD, LDS_OWN_ADOPT, true, false, false, false},
    {"pooled copy, two-pass hash", K_LOAD, LDS_OWN_COPY, true, false, false, false},
    {"pooled adopt, unverified", K_LOAD, LDS_OWN_ADOPT, false, false, false, false},
    {"mapped, verified", K_LOAD, LDS_OWN_ADOPT, true, false, true, false},
    {"mapped + populate, verified", K_LOAD, LDS_OWN_ADOPT, true, false, true, true},
    {"growable (unknown length), adopt", K_GROWABLE, LDS_OWN_ADOPT, true, true, false, false},
};
#define N_VARIANTS (sizeof variants / sizeof variants[0])

static int load_table(const bench_opts *o, bench_report *rep, const char *title, const char *path)
{
    char unknown[4200];
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "load: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (bench_unknown_length_copy(path, bench_work_dir(o), unknown, sizeof unknown) != 0)
        return -1;
    lds_pool *pool = NULL;
    if (lds_pool_create(NULL, &pool) != LDS_OK)
        return -1;
    ld_ctx *ctx = calloc(N_VARIANTS, sizeof *ctx);
    bench_alt alts[N_VARIANTS];
    void *raw = NULL;
    size_t file_bytes = (size_t)sb.st_size;
    if (!ctx || posix_memalign(&raw, 4096, file_bytes + LDS_POOL_MAP_OFFSET + 4096) != 0) {
        free(ctx);
        lds_pool_free(pool);
        return -1;
    }
    memset(raw, 0, file_bytes + LDS_POOL_MAP_OFFSET); /* warm: every page resident */
    bench_table(rep, title, true);
    for (size_t i = 0; i < N_VARIANTS; i++) {
        const variant *v = &variants[i];
        ld_ctx *c = &ctx[i];
        c->kind = v->kind;
        c->path = v->kind == K_GROWABLE ? unknown : path;
        c->buf = (unsigned char *)raw + LDS_POOL_MAP_OFFSET;
        c->buf_cap = file_bytes;
        lds_load_options_default(&c->lo);
        c->lo.pool = pool;
        c->lo.ownership = v->own;
        c->lo.verify_checksum = v->verify;
        c->lo.hash_while_reading = v->while_reading;
        c->lo.use_mmap = v->mmap;
        c->lo.populate = v->populate;
        alts[i] = (bench_alt){.name = v->name,
                              .scale = BENCH_MS,
                              .unit = "ms",
                              .run = run,
                              .ctx = c,
                              .ops = 1,
                              .row = bench_row_new(rep, v->name, "ms")};
    }
    int rc = bench_interleave(alts, N_VARIANTS, bench_warmup(o, 3), bench_iters(o, 21));
    if (rc == 0) {
        double bare = bench_row_median(alts[0].row);
        for (size_t i = 0; i < N_VARIANTS; i++) {
            ld_ctx *c = &ctx[i];
            bench_row *row = alts[i].row;
            double ms = bench_row_median(row);
            uint64_t bytes = c->kind == K_BARE ? file_bytes : c->info.payload_bytes;
            if (c->kind == K_BARE) {
                bench_row_text(row, "load", "path", "read()");
            } else {
                bench_row_text(row, "load", "path", lds_load_path_name(c->info.path));
                bench_row_text(row, "load", "checksum",
                               !c->info.checksum_verified     ? "not verified"
                               : c->info.hashed_while_reading ? "while reading"
                                                              : "second pass");
            }
            bench_row_set(row, "allocation", "bytes", BENCH_BYTES, (double)bytes);
            bench_row_set(row, "allocation", "capacity", BENCH_BYTES,
                          c->kind == K_BARE ? (double)file_bytes : (double)c->info.capacity_bytes);
            bench_row_set(row, "speed", "GB_per_s", BENCH_NUM,
                          ms > 0 ? (double)bytes / (ms * 1e6) : 0);
            bench_row_set(row, "speed", "vs_bare_read", BENCH_RATIO, ms > 0 ? bare / ms : 0);
            if (c->n_free) {
                qsort(c->free_us, c->n_free, sizeof c->free_us[0], cmp_d);
                bench_row_set(row, "speed", "free_us", BENCH_NUM, c->free_us[c->n_free / 2]);
            }
            bench_row_set(row, "residency", "rss_max", BENCH_BYTES, (double)bench_row_rss_max(row));
        }
        double verified = bench_row_median(alts[1].row);
        bench_note(rep,
                   "verified pooled load (adopt, hashed while reading) runs at %.2fx the speed of "
                   "the bare read (target >= 0.85x)",
                   verified > 0 ? bare / verified : 0);
        bench_note(rep,
                   "copy vs adopt: %.2fx (copy median / adopt median); two-pass vs while reading "
                   "(adopt): %.2fx",
                   bench_row_median(alts[2].row) / verified,
                   bench_row_median(alts[3].row) / verified);
        bench_note(rep, "time = the load call; free_us = lds_index_free afterwards (adopt "
                        "returns the rental there)");
        lds_pool_stats st;
        lds_pool_stats_init(&st);
        lds_pool_get_stats(pool, &st);
        bench_note(rep,
                   "pool: %llu rents (%llu thread-cache hits, %llu shared hits, %llu cold misses), "
                   "%llu bytes retained",
                   (unsigned long long)st.rents, (unsigned long long)st.hits_thread,
                   (unsigned long long)st.hits_shared, (unsigned long long)st.misses_cold,
                   (unsigned long long)st.bytes_retained);
    }
    free(raw);
    free(ctx);
    lds_pool_free(pool);
    return rc;
}

int bench_load(const bench_opts *o)
{
    uint64_t rows = o->rows ? o->rows : (o->dry ? 200 : 10000);
    uint32_t dim = o->dim ? o->dim : (o->dry ? 16 : 512);
    char ref[4096];
    if (bench_reference_index(bench_work_dir(o), rows, dim, false, ref, sizeof ref) != 0)
        return -1;
    bench_report *rep = bench_report_new(o);
    if (!rep)
        return -1;
    bench_param(rep, "page cache", "warm: every file is read in the warm-up rounds first");
    bench_param(rep, "pool", "a private pool with default options per table");
    char title[4400];
    struct stat sb;
    stat(ref, &sb);
    snprintf(title, sizeof title, "reference index: %llu rows x %u f32 with keys, %lld-byte file",
             (unsigned long long)rows, dim, (long long)sb.st_size);
    int rc = load_table(o, rep, title, ref);
    if (rc == 0 && o->index_path) {
        snprintf(title, sizeof title, "%s", o->index_path);
        rc = load_table(o, rep, title, o->index_path);
    }
    if (rc == 0 && !o->dry && !o->index_path) {
        if (stat(GLOVE_PATH, &sb) == 0) {
            snprintf(title, sizeof title, "GloVe: %s, %lld-byte file", GLOVE_PATH,
                     (long long)sb.st_size);
            rc = load_table(o, rep, title, GLOVE_PATH);
        } else {
            bench_param(rep, "GloVe", GLOVE_PATH " not found: table skipped");
        }
    }
    if (rc == 0)
        rc = bench_report_finish(rep);
    bench_report_free(rep);
    return rc;
}
