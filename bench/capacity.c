/*
 * capacity: does the number of retained buffers change the cost of the pool?
 * For C retained buffers (--counts; default seed 003's points 32, 256, 4,096 and 65,536) of
 * one size class: warm rent+return, renting C buffers from an empty pool, draining then
 * refilling C buffers per operation, and drain + refill as one pass over the whole capacity
 * (rent all C, then return all C, timed together, as seed 003 reports it), each beside malloc;
 * and the cost of a statistics snapshot (lds_pool_get_stats) with C buffers in the pool, which
 * walks every slot (docs/adr/0025).
 */
#include "bench.h"

#include "lodestar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_SIZE ((size_t)1024)

typedef struct cap_ctx {
    size_t count;
    lds_pool *pool; /* the pool holding `count` retained buffers */
    lds_pool_options po;
    lds_lease *leases;
    void **ptrs;
} cap_ctx;

static int run_stats(void *p, uint64_t ops, uint64_t *elapsed)
{
    cap_ctx *c = p;
    (void)elapsed;
    for (uint64_t i = 0; i < ops; i++) {
        lds_pool_stats st;
        lds_pool_stats_init(&st);
        if (lds_pool_get_stats(c->pool, &st) != LDS_OK || st.buffers_retained != c->count) {
            fprintf(stderr, "capacity: statistics snapshot failed or counted %llu of %zu\n",
                    (unsigned long long)st.buffers_retained, c->count);
            return -1;
        }
    }
    return 0;
}

static int rent_all(lds_pool *pool, lds_lease *leases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (lds_pool_rent(pool, BUF_SIZE, &leases[i]) != LDS_OK) {
            fprintf(stderr, "capacity: rent %zu of %zu failed\n", i, n);
            return -1;
        }
    return 0;
}

static int return_all(lds_pool *pool, lds_lease *leases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (lds_pool_return(pool, &leases[i], 0) != LDS_OK) {
            fprintf(stderr, "capacity: return %zu of %zu refused\n", i, n);
            return -1;
        }
    return 0;
}

static int run_warm(void *p, uint64_t ops, uint64_t *elapsed)
{
    cap_ctx *c = p;
    (void)elapsed;
    for (uint64_t i = 0; i < ops; i++) {
        lds_lease l;
        if (lds_pool_rent(c->pool, BUF_SIZE, &l) != LDS_OK)
            return -1;
        bench_escape(l.ptr);
        if (lds_pool_return(c->pool, &l, 0) != LDS_OK)
            return -1;
    }
    return 0;
}

/* A new pool each time: every rent is a cold miss. Timed: the rents only. */
static int run_empty(void *p, uint64_t ops, uint64_t *elapsed)
{
    cap_ctx *c = p;
    lds_pool *fresh = NULL;
    (void)ops;
    if (lds_pool_create(&c->po, &fresh) != LDS_OK)
        return -1;
    uint64_t t0 = bench_now_ns();
    int rc = rent_all(fresh, c->leases, c->count);
    *elapsed = bench_now_ns() - t0;
    if (rc == 0)
        rc = return_all(fresh, c->leases, c->count);
    lds_pool_free(fresh);
    return rc;
}

static int run_drain(void *p, uint64_t ops, uint64_t *elapsed)
{
    cap_ctx *c = p;
    (void)ops;
    uint64_t t0 = bench_now_ns();
    int rc = rent_all(c->pool, c->leases, c->count);
    *elapsed = bench_now_ns() - t0;
    return rc == 0 ? return_all(c->pool, c->leases, c->count) : rc;
}

static int run_refill(void *p, uint64_t ops, uint64_t *elapsed)
{
    cap_ctx *c = p;
    (void)ops;
    if (rent_all(c->pool, c->leases, c->count) != 0)
        return -1;
    uint64_t t0 = bench_now_ns();
    int rc = return_all(c->pool, c->leases, c->count);
    *elapsed = bench_now_ns() - t0;
    return rc;
}

/* Drain and refill as one pass: rent every retained buffer, then return them all. */
static int run_pass(void *p, uint64_t ops, uint64_t *elapsed)
{
    cap_ctx *c = p;
    (void)ops;
    uint64_t t0 = bench_now_ns();
    int rc = rent_all(c->pool, c->leases, c->count);
    if (rc == 0)
        rc = return_all(c->pool, c->leases, c->count);
    *elapsed = bench_now_ns() - t0;
    return rc;
}

/* The pass's baseline: malloc C buffers, then free them all, timed together. */
static int run_malloc_pass(void *p, uint64_t ops, uint64_t *elapsed)
{
    cap_ctx *c = p;
    (void)ops;
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < c->count; i++) {
        c->ptrs[i] = malloc(BUF_SIZE);
        if (!c->ptrs[i]) {
            while (i > 0)
                free(c->ptrs[--i]);
            return -1;
        }
        bench_escape(c->ptrs[i]);
    }
    for (size_t i = 0; i < c->count; i++)
        free(c->ptrs[i]);
    *elapsed = bench_now_ns() - t0;
    return 0;
}

/* Baseline: malloc C buffers, then free them. Timed: the mallocs. */
static int run_malloc(void *p, uint64_t ops, uint64_t *elapsed)
{
    cap_ctx *c = p;
    (void)ops;
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < c->count; i++) {
        c->ptrs[i] = malloc(BUF_SIZE);
        if (!c->ptrs[i])
            return -1;
        bench_escape(c->ptrs[i]);
    }
    *elapsed = bench_now_ns() - t0;
    for (size_t i = 0; i < c->count; i++)
        free(c->ptrs[i]);
    return 0;
}

int bench_capacity(const bench_opts *o)
{
    static const size_t counts_full[] = {32, 256, 4096, 65536};
    static const size_t counts_dry[] = {32, 256};
    const size_t *counts = o->dry ? counts_dry : counts_full;
    size_t n_counts = o->dry ? 2 : sizeof counts_full / sizeof counts_full[0];
    if (o->n_counts) {
        counts = o->counts;
        n_counts = o->n_counts;
    }

    bench_report *rep = bench_report_new(o);
    if (!rep)
        return -1;
    char buf[160];
    snprintf(buf, sizeof buf, "%zu B (one size class); pool caps raised to hold every buffer",
             BUF_SIZE);
    bench_param(rep, "buffer", buf);
    int rc = 0;
    for (size_t ci = 0; ci < n_counts && rc == 0; ci++) {
        cap_ctx c;
        memset(&c, 0, sizeof c);
        c.count = counts[ci];
        lds_pool_options_default(&c.po);
        c.po.max_per_class = (uint32_t)c.count;
        c.po.max_retained_bytes = c.count * lds_pool_class_capacity(BUF_SIZE) * 2;
        c.po.max_idle_ns = UINT64_MAX;
        c.leases = calloc(c.count, sizeof *c.leases);
        c.ptrs = calloc(c.count, sizeof *c.ptrs);
        if (!c.leases || !c.ptrs || lds_pool_create(&c.po, &c.pool) != LDS_OK) {
            free(c.leases);
            free(c.ptrs);
            rc = -1;
            break;
        }
        /* Fill the pool with `count` buffers. */
        rc = rent_all(c.pool, c.leases, c.count);
        if (rc == 0)
            rc = return_all(c.pool, c.leases, c.count);

        snprintf(buf, sizeof buf, "%zu retained buffers of %zu B", c.count, BUF_SIZE);
        bench_table(rep, buf, true);
        enum { N_ALTS = 8 };
        bench_alt alts[N_ALTS];
        const char *names[N_ALTS] = {"warm rent+return",
                                     "rent from an empty pool",
                                     "drain (rent all retained)",
                                     "refill (return all)",
                                     "malloc (baseline for rent from empty)",
                                     "drain and refill (one pass over the capacity)",
                                     "malloc and free all (baseline for the pass)",
                                     "statistics snapshot (lds_pool_get_stats)"};
        int (*fns[N_ALTS])(void *, uint64_t, uint64_t *) = {run_warm,        run_empty,  run_drain,
                                                            run_refill,      run_malloc, run_pass,
                                                            run_malloc_pass, run_stats};
        const char *units[N_ALTS] = {"ns/pair",   "ns/rent", "ns/rent", "ns/return",
                                     "ns/malloc", "us/pass", "us/pass", "us/snapshot"};
        for (int k = 0; k < N_ALTS; k++)
            alts[k] = (bench_alt){.name = names[k],
                                  .scale = k >= 5 ? BENCH_US : BENCH_NS_PER_OP,
                                  .unit = units[k],
                                  .run = fns[k],
                                  .ctx = &c,
                                  .ops = k == 0   ? (o->dry ? 1000 : 200000)
                                         : k == 7 ? 20
                                         : k >= 5 ? 1
                                                  : c.count,
                                  .row = bench_row_new(rep, names[k], units[k])};
        if (rc == 0)
            rc = bench_interleave(alts, N_ALTS, bench_warmup(o, 2),
                                  bench_iters(o, c.count > 4096 ? 9 : 15));
        if (rc == 0) {
            lds_pool_stats st;
            lds_pool_stats_init(&st);
            lds_pool_get_stats(c.pool, &st);
            uint64_t misses = st.misses_cold + st.misses_exhausted + st.misses_oversize;
            bench_row_set(alts[0].row, "pool", "retained", BENCH_COUNT,
                          (double)st.buffers_retained);
            bench_row_set(alts[0].row, "pool", "retained_bytes", BENCH_BYTES,
                          (double)st.bytes_retained);
            bench_row_set(alts[0].row, "pool", "misses", BENCH_COUNT, (double)misses);
            bench_row_set(alts[0].row, "pool", "drops", BENCH_COUNT, (double)st.drops);
            for (int k = 5; k < N_ALTS; k++)
                bench_row_set(alts[k].row, k == 7 ? "snapshot" : "pass", "ns_per_buffer", BENCH_NUM,
                              bench_row_median(alts[k].row) * 1e3 / (double)c.count);
            bench_row_set(alts[5].row, "pass", "vs_malloc", BENCH_RATIO,
                          bench_row_median(alts[6].row) / bench_row_median(alts[5].row));
            bench_note(
                rep,
                "pool after the run: %llu buffers retained, %llu rents, %llu thread-cache "
                "hits, %llu shared hits, %llu misses (cold %llu, exhausted %llu), %llu drops",
                (unsigned long long)st.buffers_retained, (unsigned long long)st.rents,
                (unsigned long long)st.hits_thread, (unsigned long long)st.hits_shared,
                (unsigned long long)misses, (unsigned long long)st.misses_cold,
                (unsigned long long)st.misses_exhausted, (unsigned long long)st.drops);
        }
        lds_pool_free(c.pool);
        free(c.leases);
        free(c.ptrs);
    }
    if (rc == 0)
        rc = bench_report_finish(rep);
    bench_report_free(rep);
    return rc;
}
