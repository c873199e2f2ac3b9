/*
 * chunk-sizes: the evidence for format 1.1's chunk size (ADR 0031). Over one payload
 * in memory (pseudo-random bytes, every page touched first), interleaved:
 *  1. XXH3-64 of the whole payload as one hash (format 1.0's checksum) against the
 *     same bytes hashed chunk by chunk, for chunk sizes from 4 KiB to 64 MiB, one thread;
 *  2. lds_payload_verify_chunks (the mapped path's and the parser's verification) on 1
 *     and on 2 threads (or --threads N) for 4, 8 and 16 MiB chunks, with a real table
 *     and header, against the one-thread whole-payload hash.
 * The table size (8 bytes per chunk) and the chunk count of each size are printed.
 */
#include "bench.h"

#include "lodestar.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <xxhash.h>
#if LDS_HAVE_XXH3_DISPATCH /* the library's XXH3, so that the rows compare like with like */
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#define cs_xxh3 XXH3_64bits_dispatch
#else
#define cs_xxh3 XXH3_64bits
#endif

typedef struct cs_ctx {
    const unsigned char *p;
    size_t covered;          /* bytes the chunks cover */
    size_t chunk;            /* 0: one hash of everything */
    lds_header h;            /* verify rows: the chunked header */
    const unsigned char *pl; /* verify rows: payload (covered bytes, then the table) */
    unsigned threads;
} cs_ctx;

static int run_hash(void *arg, uint64_t ops, uint64_t *elapsed)
{
    (void)elapsed;
    const cs_ctx *c = arg;
    uint64_t acc = 0;
    for (uint64_t i = 0; i < ops; i++) {
        if (c->chunk == 0) {
            acc ^= cs_xxh3(c->p, c->covered);
            continue;
        }
        for (size_t s = 0; s < c->covered; s += c->chunk) {
            size_t n = c->covered - s < c->chunk ? c->covered - s : c->chunk;
            acc ^= cs_xxh3(c->p + s, n);
        }
    }
    bench_escape(&acc);
    return 0;
}

static int run_verify(void *arg, uint64_t ops, uint64_t *elapsed)
{
    (void)elapsed;
    const cs_ctx *c = arg;
    for (uint64_t i = 0; i < ops; i++) {
        uint64_t bad = 0;
        lds_error err;
        lds_error_init(&err);
        if (lds_payload_verify_chunks(&c->h, c->pl, (size_t)c->h.payload_length, c->threads, NULL,
                                      NULL, &bad, &err) != LDS_OK) {
            fprintf(stderr, "chunk-sizes: %s\n", err.message);
            return -1;
        }
    }
    return 0;
}

/* A payload of `covered` bytes followed by room for the table of the smallest chunk. */
static unsigned char *make_payload(size_t covered, size_t *map_bytes)
{
    size_t table_max = 8 * (covered / ((size_t)4 << 10) + 2);
    *map_bytes = covered + table_max;
    unsigned char *p =
        mmap(NULL, *map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "chunk-sizes: mmap of %zu bytes: %s\n", *map_bytes, strerror(errno));
        return NULL;
    }
    uint64_t state = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i + 8 <= covered; i += 8) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        memcpy(p + i, &state, 8);
    }
    return p;
}

/* Each verify row owns a copy of the payload with its own table after it. */
static unsigned char *chunked_copy(const unsigned char *src, size_t covered, size_t chunk,
                                   lds_header *h, size_t *map_bytes)
{
    uint64_t n = (covered + chunk - 1) / chunk;
    *map_bytes = covered + 8 * n;
    unsigned char *p =
        mmap(NULL, *map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    memcpy(p, src, covered);
    for (uint64_t k = 0; k < n; k++) {
        size_t s = (size_t)k * chunk, len = covered - s < chunk ? covered - s : chunk;
        uint64_t v = XXH3_64bits(p + s, len);
        for (int i = 0; i < 8; i++)
            p[covered + 8 * k + (size_t)i] = (unsigned char)(v >> (8 * i));
    }
    memset(h, 0, sizeof *h);
    h->major = 1;
    h->minor = 1;
    h->flags = LDS_HEADER_CHUNKED;
    h->chunk_bytes = (uint32_t)chunk;
    h->chunk_count = n;
    h->chunk_table_offset = covered;
    h->payload_length = covered + 8 * n;
    h->chunk_table_hash = XXH3_64bits(p + covered, 8 * n);
    return p;
}

int bench_chunk_sizes(const bench_opts *o)
{
    size_t covered = o->n_sizes ? o->sizes[0] : o->dry ? (size_t)4 << 20 : (size_t)1 << 30;
    unsigned tmax = o->threads > 0 ? (unsigned)o->threads : 2;
    /* 4, 16 and 64 KiB: the delta reload's granularity (ADR 0048) */
    static const size_t hash_sizes[] = {(size_t)4 << 10,  (size_t)16 << 10, (size_t)64 << 10,
                                        (size_t)1 << 20,  (size_t)4 << 20,  (size_t)8 << 20,
                                        (size_t)16 << 20, (size_t)64 << 20};
    static const size_t verify_sizes[] = {(size_t)4 << 20, (size_t)8 << 20, (size_t)16 << 20};
    enum { NH = sizeof hash_sizes / sizeof hash_sizes[0] };
    enum { NV = sizeof verify_sizes / sizeof verify_sizes[0] };
    size_t base_bytes;
    unsigned char *base = make_payload(covered, &base_bytes);
    if (!base)
        return 1;
    bench_report *rep = bench_report_new(o);
    char sz[32], title[200];
    bench_fmt_bytes((double)covered, sz, sizeof sz);
    int rc = 1;

    /* 1. Hash throughput per chunk size, one thread. */
    snprintf(title, sizeof title, "XXH3-64 over a %s payload in memory, one thread", sz);
    bench_table(rep, title, true);
    cs_ctx hc[NH + 1];
    bench_alt ha[NH + 1];
    char hn[NH + 1][64];
    for (size_t i = 0; i <= NH; i++) {
        hc[i] = (cs_ctx){.p = base, .covered = covered, .chunk = i == 0 ? 0 : hash_sizes[i - 1]};
        if (i == 0)
            snprintf(hn[i], sizeof hn[i], "one hash of the payload (1.0)");
        else
            snprintf(hn[i], sizeof hn[i], "chunks of %zu %s",
                     hash_sizes[i - 1] >= ((size_t)1 << 20) ? hash_sizes[i - 1] >> 20
                                                            : hash_sizes[i - 1] >> 10,
                     hash_sizes[i - 1] >= ((size_t)1 << 20) ? "MiB" : "KiB");
        ha[i] = (bench_alt){.name = hn[i],
                            .scale = BENCH_MS,
                            .unit = "ms/payload",
                            .run = run_hash,
                            .ctx = &hc[i],
                            .ops = 1,
                            .row = bench_row_new(rep, hn[i], "ms/payload")};
    }
    if (bench_interleave(ha, NH + 1, bench_warmup(o, 2), bench_iters(o, 11)) != 0)
        goto out;
    double whole = bench_row_median(ha[0].row);
    for (size_t i = 0; i <= NH; i++) {
        double med = bench_row_median(ha[i].row);
        size_t ch = hc[i].chunk ? hc[i].chunk : covered;
        uint64_t n = (covered + ch - 1) / ch;
        bench_row_set(ha[i].row, "chunks", "count", BENCH_COUNT, (double)n);
        bench_row_set(ha[i].row, "chunks", "table_bytes", BENCH_BYTES, hc[i].chunk ? 8.0 * n : 0);
        bench_row_set(ha[i].row, "speed", "GB_per_s", BENCH_NUM,
                      med > 0 ? (double)covered / med / 1e6 : 0);
        bench_row_set(ha[i].row, "speed", "vs_one_hash", BENCH_RATIO, med > 0 ? whole / med : 0);
    }

    /* 2. Verification on 1..tmax threads (lds_payload_verify_chunks). */
    snprintf(title, sizeof title,
             "lds_payload_verify_chunks over a %s payload: table, then every chunk", sz);
    bench_table(rep, title, true);
    enum { MAXT = 8 };
    if (tmax > MAXT)
        tmax = MAXT;
    size_t nalt = 1 + NV * tmax;
    cs_ctx vc[1 + NV * MAXT];
    bench_alt va[1 + NV * MAXT];
    char vn[1 + NV * MAXT][64];
    unsigned char *copies[NV];
    size_t copy_bytes[NV];
    memset(copies, 0, sizeof copies);
    vc[0] = (cs_ctx){.p = base, .covered = covered, .chunk = 0};
    snprintf(vn[0], sizeof vn[0], "one hash of the payload (1.0), 1 thread");
    va[0] = (bench_alt){.name = vn[0],
                        .scale = BENCH_MS,
                        .unit = "ms/payload",
                        .run = run_hash,
                        .ctx = &vc[0],
                        .ops = 1,
                        .row = bench_row_new(rep, vn[0], "ms/payload")};
    for (size_t v = 0; v < NV; v++) {
        lds_header h;
        copies[v] = chunked_copy(base, covered, verify_sizes[v], &h, &copy_bytes[v]);
        if (!copies[v]) {
            fprintf(stderr, "chunk-sizes: no memory for a %s copy\n", sz);
            goto out2;
        }
        for (unsigned t = 1; t <= tmax; t++) {
            size_t i = 1 + v * tmax + (t - 1);
            vc[i] = (cs_ctx){.h = h, .pl = copies[v], .threads = t};
            snprintf(vn[i], sizeof vn[i], "%zu MiB chunks, %u thread%s", verify_sizes[v] >> 20, t,
                     t == 1 ? "" : "s");
            va[i] = (bench_alt){.name = vn[i],
                                .scale = BENCH_MS,
                                .unit = "ms/payload",
                                .run = run_verify,
                                .ctx = &vc[i],
                                .ops = 1,
                                .row = bench_row_new(rep, vn[i], "ms/payload")};
        }
    }
    if (bench_interleave(va, nalt, bench_warmup(o, 2), bench_iters(o, 11)) != 0)
        goto out2;
    whole = bench_row_median(va[0].row);
    for (size_t i = 1; i < nalt; i++) {
        double med = bench_row_median(va[i].row);
        size_t one = 1 + ((i - 1) / tmax) * tmax; /* the same chunk size on 1 thread */
        bench_row_set(va[i].row, "chunks", "count", BENCH_COUNT, (double)vc[i].h.chunk_count);
        bench_row_set(va[i].row, "speed", "GB_per_s", BENCH_NUM,
                      med > 0 ? (double)covered / med / 1e6 : 0);
        bench_row_set(va[i].row, "speed", "vs_one_hash", BENCH_RATIO, med > 0 ? whole / med : 0);
        bench_row_set(va[i].row, "speed", "vs_1_thread", BENCH_RATIO,
                      med > 0 ? bench_row_median(va[one].row) / med : 0);
    }
    bench_note(rep, "vs_one_hash = the 1.0 checksum's median / this median (above 1: faster)");
    rc = 0;
out2:
    for (size_t v = 0; v < NV; v++)
        if (copies[v])
            munmap(copies[v], copy_bytes[v]);
out:
    if (rc == 0)
        rc = bench_report_finish(rep) == 0 ? 0 : 1;
    bench_report_free(rep);
    munmap(base, base_bytes);
    return rc;
}
