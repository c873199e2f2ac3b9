/*
 * live (nightly): the service reload loop under query load (lodestar_live.h).
 *
 * T query threads run queries without pause on whatever generation they pin,
 * while one reloader thread reloads every R ms. A query: pin; look a random
 * row's key up (lds_index_find_key); check that row's every element against
 * what the pinned generation must hold; exact top-10 by dot product over the
 * 128 rows from it, read from the pinned payload; unpin. A row that differs
 * (a freed or half-swapped generation) counts as a wrong result.
 *
 * Generations differ in content: generation g is variant g mod 3 of the base
 * index, every element of variant s being base + s (so consecutive generations
 * differ in every element; variant 0 equals the base). The base is the --index file (f32, with
 * keys: the GloVe index) or a generated 40,000 x 256 f32 index with keys (41 MB).
 *
 * Strategies, interleaved in rounds in this process (each round runs every
 * strategy for its share of the cycles, on a fresh live index; each strategy's
 * pool persists across rounds, as a service's would):
 *   pooled-adopt  lds_live_reload_path, LDS_OWN_ADOPT, a private pool
 *   pooled-copy   the same with LDS_OWN_COPY
 *   malloc        read into malloc'd memory, parse (borrow, free on release),
 *                 lds_live_install_take: the allocation baseline
 *   mapped        lds_live_reload_path with use_mmap, LDS_OWN_ADOPT
 *   pooled-adopt-tcache  pooled-adopt with the pool's thread caches on (the pool's
 *                 default): a generation freed by a reader's last unpin goes back into
 *                 that reader's thread cache, where the reloader's next rent cannot see
 *                 it. The other pooled strategies use thread_cache_count = 0, which
 *                 lodestar_live.h recommends for a live index's pool.
 */
#include "bench.h"

#include "lodestar.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

enum strat { S_ADOPT, S_COPY, S_MALLOC, S_MAPPED, S_ADOPT_TC, S_COUNT };
static const char *const strat_names[S_COUNT] = {"pooled-adopt", "pooled-copy", "malloc", "mapped",
                                                 "pooled-adopt-tcache"};

#define VARIANTS    3
#define BLOCK       128
#define TOPK        10
#define MAX_QUERY   (1u << 21) /* per reader per phase */
#define MAX_RELOADS 4096

typedef struct query_rec {
    uint64_t start, dur;
} query_rec;

typedef struct live_bench live_bench;

typedef struct reader {
    live_bench *lb;
    pthread_t t;
    uint64_t seed;
    query_rec *q;
    size_t nq;
    uint64_t wrong;
    uint64_t unpin_max_ns, unpin_slow; /* slowest unpin; unpins over 1 ms */
} reader;

struct live_bench {
    const lds_index *base; /* the variants' base, for the expected values */
    uint64_t rows;
    uint32_t dim;
    char variant[VARIANTS][4200];
    lds_live *live;
    _Atomic bool stop;
    lds_pool *pool[S_COUNT];
};

/* ---- the variants ---- */

static int write_variant(const lds_index *base, const char *path, uint32_t s)
{
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = lds_index_dim(base);
    wo.metric = lds_index_metric(base);
    wo.with_keys = true;
    wo.unique_keys = lds_index_keys_unique(base);
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.part", path);
    lds_writer *w = NULL;
    lds_error err;
    lds_error_init(&err);
    float *v = malloc(wo.dim * sizeof *v);
    lds_status st = v ? lds_writer_open_path(tmp, &wo, &w, &err) : LDS_E_NOMEM;
    for (uint64_t r = 0; st == LDS_OK && r < lds_index_rows(base); r++) {
        const float *b = lds_index_row(base, r);
        for (uint32_t d = 0; d < wo.dim; d++)
            v[d] = b[d] + (float)s;
        const char *key;
        size_t kl;
        st = lds_index_key(base, r, &key, &kl);
        if (st == LDS_OK)
            st = lds_writer_add_row(w, v, wo.dim, 0, key, kl, &err);
    }
    if (st == LDS_OK)
        st = lds_writer_finish(w, &err);
    lds_writer_free(w);
    free(v);
    if (st != LDS_OK || rename(tmp, path) != 0) {
        fprintf(stderr, "live: writing %s failed: %s %s\n", path, lds_status_name(st), err.message);
        return -1;
    }
    return 0;
}

/* Writes (once; reused when present with the same size) variant s of `base`. */
static int variant_path(const lds_index *base, const char *dir, const char *tag, uint32_t s,
                        char *out, size_t cap)
{
    snprintf(out, cap, "%s/lodestar-live-%s-v%u.ldsi", dir, tag, s);
    lds_index *idx = NULL;
    lds_load_options lo;
    lds_load_options_default(&lo);
    lo.use_mmap = true;
    lo.verify_checksum = false;
    if (lds_load_path(out, &lo, &idx, NULL, NULL) == LDS_OK) {
        bool same = lds_index_rows(idx) == lds_index_rows(base) &&
                    lds_index_dim(idx) == lds_index_dim(base);
        const float *a = lds_index_row(idx, lds_index_rows(idx) - 1);
        const float *b = lds_index_row(base, lds_index_rows(base) - 1);
        same = same && a && b && a[0] == b[0] + (float)s;
        lds_index_free(idx);
        if (same)
            return 0;
    }
    fprintf(stderr, "live: writing variant %u of the base index: %s\n", s, out);
    return write_variant(base, out, s);
}

/* ---- queries ---- */

static uint64_t rng(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* One query on the pinned generation; returns 1 if its result is wrong. */
static int query(const live_bench *lb, const lds_pin *pin, uint64_t *x)
{
    uint64_t r = rng(x) % lb->rows;
    const char *key;
    size_t kl;
    if (lds_index_key(lb->base, r, &key, &kl) != LDS_OK)
        return 1;
    uint64_t at = UINT64_MAX;
    if (lds_index_find_key(pin->index, key, kl, &at) != LDS_OK || at >= lb->rows)
        return 1;
    const char *k2;
    size_t kl2;
    if (lds_index_key(pin->index, at, &k2, &kl2) != LDS_OK || kl2 != kl || memcmp(k2, key, kl))
        return 1;
    float s = (float)(pin->generation % VARIANTS);
    const float *q = lds_index_row(pin->index, at);
    const float *b = lds_index_row(lb->base, at);
    int bad = 0;
    for (uint32_t d = 0; d < lb->dim; d++)
        bad |= q[d] != b[d] + s;
    /* exact top-k by dot product over BLOCK rows of the pinned payload */
    float best[TOPK];
    for (int i = 0; i < TOPK; i++)
        best[i] = -1e30f;
    uint64_t end = at + BLOCK < lb->rows ? at + BLOCK : lb->rows;
    for (uint64_t row = at; row < end; row++) {
        const float *v = lds_index_row(pin->index, row);
        float dot = 0;
        for (uint32_t d = 0; d < lb->dim; d++)
            dot += q[d] * v[d];
        if (dot > best[TOPK - 1]) {
            int i = TOPK - 1;
            while (i > 0 && best[i - 1] < dot) {
                best[i] = best[i - 1];
                i--;
            }
            best[i] = dot;
        }
    }
    bench_escape(best);
    return bad;
}

static void *reader_main(void *p)
{
    reader *rd = p;
    live_bench *lb = rd->lb;
    uint64_t x = rd->seed;
    while (!atomic_load_explicit(&lb->stop, memory_order_relaxed)) {
        uint64_t t0 = bench_now_ns();
        lds_pin pin;
        if (lds_live_pin(lb->live, &pin) != LDS_OK) {
            rd->wrong++;
            continue;
        }
        rd->wrong += (uint64_t)query(lb, &pin, &x);
        uint64_t u0 = bench_now_ns();
        lds_live_unpin(lb->live, &pin); /* frees a retired generation if this was its last pin */
        uint64_t t1 = bench_now_ns();
        if (t1 - u0 > rd->unpin_max_ns)
            rd->unpin_max_ns = t1 - u0;
        rd->unpin_slow += t1 - u0 > 1000000u;
        if (rd->nq < MAX_QUERY)
            rd->q[rd->nq++] = (query_rec){t0, t1 - t0};
    }
    return NULL;
}

/* ---- reloads ---- */

static uint64_t thread_minflt(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return (uint64_t)ru.ru_minflt;
}

static void release_free(void *p)
{
    free(p);
}

static int read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        size_t want = n - got > LDS_DEFAULT_CHUNK_BYTES ? LDS_DEFAULT_CHUNK_BYTES : n - got;
        ssize_t r = read(fd, (unsigned char *)buf + got, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

static uint64_t g_rss_peak; /* reloader thread only */

static void sample_rss(uint64_t done, uint64_t total, void *ctx)
{
    (void)ctx;
    if (done == total) { /* loaded, not yet swapped: current + new are both here */
        uint64_t rss = bench_rss();
        if (rss > g_rss_peak)
            g_rss_peak = rss;
    }
}

static lds_status reload_malloc(live_bench *lb, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return LDS_E_IO;
    unsigned char head[LDS_HEADER_SIZE];
    lds_header h;
    lds_status st = LDS_E_IO;
    void *payload = NULL;
    lds_index *idx = NULL;
    if (read_full(fd, head, sizeof head) != 0)
        goto done;
    if ((st = lds_header_decode(head, sizeof head, &h, NULL)) != LDS_OK)
        goto done;
    st = LDS_E_NOMEM;
    if (!(payload = malloc(h.payload_length ? h.payload_length : 1)))
        goto done;
    st = LDS_E_IO;
    if (read_full(fd, payload, h.payload_length) != 0)
        goto done;
    lds_parse_options po;
    lds_parse_options_default(&po);
    po.release = release_free;
    po.release_ctx = payload;
    po.header = &h; /* format 1.1: the chunk table */
    if ((st = lds_index_from_payload(payload, h.payload_length, &po, &idx, NULL)) != LDS_OK)
        goto done;
    payload = NULL; /* the index owns it */
    sample_rss(1, 1, NULL);
    if ((st = lds_live_install_take(lb->live, idx, NULL, NULL)) != LDS_OK)
        lds_index_free(idx);
done:
    free(payload);
    close(fd);
    return st;
}

static lds_status reload_once(live_bench *lb, enum strat s, uint64_t gen)
{
    const char *path = lb->variant[gen % VARIANTS];
    if (s == S_MALLOC)
        return reload_malloc(lb, path);
    lds_load_options lo;
    lds_load_options_default(&lo);
    lo.pool = lb->pool[s];
    lo.ownership = s == S_COPY ? LDS_OWN_COPY : LDS_OWN_ADOPT;
    lo.use_mmap = s == S_MAPPED;
    lo.progress = sample_rss;
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_live_reload_path(lb->live, path, &lo, NULL, NULL, &err);
    if (st != LDS_OK)
        fprintf(stderr, "live: reload %s: %s\n", path, err.message);
    return st;
}

/* ---- per strategy, accumulated over rounds ---- */

typedef struct acc {
    double *in_us, *during_us; /* query latencies outside / during reload windows */
    size_t n_in, n_during, cap_in, cap_during;
    double reload_ms[MAX_RELOADS];
    double faults[MAX_RELOADS];
    size_t n_reloads;
    uint64_t wrong, max_retired, unpin_max_ns, unpin_slow;
    double peak_over;
} acc;

static int push(double **v, size_t *n, size_t *cap, double x)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 65536;
        double *p = realloc(*v, c * sizeof *p);
        if (!p)
            return -1;
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_d);
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i];
}

/* One phase: a fresh live index, `threads` readers, `cycles` reloads every `period_ms`. */
static int phase(live_bench *lb, enum strat s, int threads, int cycles, int period_ms, acc *a,
                 uint64_t payload)
{
    /* the live index numbers its generations from 1; generation g loads variant g % 3 */
    uint64_t g = 0;
    uint64_t *gen = &g;
    /* Other strategies' retained buffers sit idle through this phase: they are in both the
     * baseline and the peak. This strategy's retained buffers are its own memory: they are
     * taken out of the baseline, so the peak counts them. */
    uint64_t own = 0;
    if (lb->pool[s]) {
        lds_pool_stats ps;
        lds_pool_stats_init(&ps);
        lds_pool_get_stats(lb->pool[s], &ps);
        own = ps.bytes_retained;
    }
    uint64_t rss_base = bench_rss();
    rss_base = rss_base > own ? rss_base - own : 0;
    g_rss_peak = 0;
    if (lds_live_create(NULL, &lb->live, NULL) != LDS_OK || reload_once(lb, s, ++*gen) != LDS_OK)
        return -1;
    atomic_store(&lb->stop, false);
    reader rd[64];
    uint64_t win[MAX_RELOADS][2];
    int rc = 0, nt = 0;
    for (; nt < threads; nt++) {
        rd[nt] = (reader){lb, 0, 0x9E3779B97F4A7C15u * (uint64_t)(nt + 1) + *gen, NULL, 0, 0, 0, 0};
        rd[nt].q = malloc(MAX_QUERY * sizeof *rd[nt].q);
        if (!rd[nt].q || pthread_create(&rd[nt].t, NULL, reader_main, &rd[nt]) != 0) {
            free(rd[nt].q);
            rc = -1;
            break;
        }
    }
    int done = 0;
    for (; rc == 0 && done < cycles && a->n_reloads < MAX_RELOADS; done++) {
        usleep((useconds_t)period_ms * 1000u);
        uint64_t f0 = thread_minflt(), t0 = bench_now_ns();
        if (reload_once(lb, s, ++*gen) != LDS_OK)
            rc = -1;
        uint64_t t1 = bench_now_ns(), f1 = thread_minflt();
        uint64_t rss = bench_rss();
        if (rss > g_rss_peak)
            g_rss_peak = rss;
        win[done][0] = t0;
        win[done][1] = t1;
        a->reload_ms[a->n_reloads] = (double)(t1 - t0) / 1e6;
        a->faults[a->n_reloads++] = (double)(f1 - f0);
    }
    usleep((useconds_t)period_ms * 1000u);
    atomic_store(&lb->stop, true);
    for (int i = 0; i < nt; i++) {
        pthread_join(rd[i].t, NULL);
        a->wrong += rd[i].wrong;
        a->unpin_slow += rd[i].unpin_slow;
        if (rd[i].unpin_max_ns > a->unpin_max_ns)
            a->unpin_max_ns = rd[i].unpin_max_ns;
        for (size_t j = 0; j < rd[i].nq; j++) {
            uint64_t q0 = rd[i].q[j].start, q1 = q0 + rd[i].q[j].dur;
            bool during = false;
            for (int w = 0; w < done && !during; w++)
                during = q0 < win[w][1] && q1 > win[w][0];
            double us = (double)rd[i].q[j].dur / 1e3;
            if (during ? push(&a->during_us, &a->n_during, &a->cap_during, us)
                       : push(&a->in_us, &a->n_in, &a->cap_in, us))
                rc = -1;
        }
        free(rd[i].q);
    }
    lds_live_stats ls;
    lds_live_stats_init(&ls);
    lds_live_get_stats(lb->live, &ls);
    if (ls.retired_pinned_peak > a->max_retired)
        a->max_retired = ls.retired_pinned_peak;
    lds_live_free(lb->live);
    lb->live = NULL;
    double over =
        payload ? (double)(g_rss_peak > rss_base ? g_rss_peak - rss_base : 0) / (double)payload : 0;
    if (over > a->peak_over)
        a->peak_over = over;
    return rc;
}

static void add_row(bench_report *rep, enum strat s, acc *a, uint64_t payload, size_t page,
                    lds_pool *pool)
{
    bench_row *row = bench_row_new(rep, strat_names[s], "ms/reload");
    for (size_t i = 0; i < a->n_reloads; i++)
        bench_row_sample(row, a->reload_ms[i], a->faults[i], 0);
    double faults = pct(a->faults, a->n_reloads, 0.5);
    uint64_t pages = (payload + page - 1) / page;
    double p99_in = pct(a->in_us, a->n_in, 0.99), p99_dur = pct(a->during_us, a->n_during, 0.99);
    bench_row_text(row, "strategy", "strategy", strat_names[s]);
    bench_row_set(row, "reload", "reload_ms", BENCH_NUM, pct(a->reload_ms, a->n_reloads, 0.5));
    bench_row_set(row, "reload", "faults_per_reload", BENCH_NUM, faults);
    bench_row_set(row, "reload", "payload_pages", BENCH_COUNT, (double)pages);
    bench_row_set(row, "reload", "faults_pct_of_pages", BENCH_PCT,
                  pages ? 100.0 * faults / (double)pages : 0);
    bench_row_set(row, "queries outside reloads", "queries", BENCH_COUNT, (double)a->n_in);
    bench_row_set(row, "queries outside reloads", "p50_us", BENCH_NUM, pct(a->in_us, a->n_in, 0.5));
    bench_row_set(row, "queries outside reloads", "p99_us", BENCH_NUM, p99_in);
    bench_row_set(row, "queries outside reloads", "max_us", BENCH_NUM,
                  a->n_in ? a->in_us[a->n_in - 1] : 0);
    bench_row_set(row, "queries during reloads", "queries_during", BENCH_COUNT,
                  (double)a->n_during);
    bench_row_set(row, "queries during reloads", "p50_during_reload_us", BENCH_NUM,
                  pct(a->during_us, a->n_during, 0.5));
    bench_row_set(row, "queries during reloads", "p99_during_reload_us", BENCH_NUM, p99_dur);
    bench_row_set(row, "queries during reloads", "max_during_reload_us", BENCH_NUM,
                  a->n_during ? a->during_us[a->n_during - 1] : 0);
    bench_row_set(row, "queries during reloads", "p99_ratio", BENCH_RATIO,
                  p99_in > 0 ? p99_dur / p99_in : 0);
    bench_row_set(row, "memory", "peak_rss_over_payload", BENCH_RATIO, a->peak_over);
    bench_row_set(row, "memory", "max_retired_pinned", BENCH_COUNT, (double)a->max_retired);
    bench_row_set(row, "memory", "wrong_results", BENCH_COUNT, (double)a->wrong);
    bench_row_set(row, "unpin", "unpin_max_us", BENCH_NUM, (double)a->unpin_max_ns / 1e3);
    bench_row_set(row, "unpin", "unpins_over_1ms", BENCH_COUNT, (double)a->unpin_slow);
    if (pool) {
        lds_pool_stats ps;
        lds_pool_stats_init(&ps);
        lds_pool_get_stats(pool, &ps);
        bench_row_set(row, "pool", "rents", BENCH_COUNT, (double)ps.rents);
        bench_row_set(row, "pool", "warm_rents", BENCH_COUNT,
                      (double)(ps.hits_thread + ps.hits_shared));
    }
}

int bench_live(const bench_opts *o)
{
    const char *dir = bench_work_dir(o);
    uint64_t rows = o->rows ? o->rows : (o->dry ? 2000 : 40000);
    uint32_t dim = o->dim ? o->dim : (o->dry ? 32 : 256);
    int cycles = o->cycles ? o->cycles : (o->dry ? 2 : 12);
    int rounds = o->dry ? 1 : 3;
    int period_ms = o->interval_ms ? o->interval_ms : o->dry ? 5 : (o->index_path ? 250 : 120);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = o->threads ? o->threads : (ncpu > 2 ? (int)ncpu - 1 : 1);
    if (threads > 64)
        threads = 64;
    char basepath[4096], tag[64];
    const char *bp = o->index_path;
    if (!bp) {
        if (bench_reference_index(dir, rows, dim, false, basepath, sizeof basepath) != 0)
            return -1;
        bp = basepath;
        snprintf(tag, sizeof tag, "ref-%llux%u", (unsigned long long)rows, dim);
    } else {
        const char *slash = strrchr(bp, '/');
        snprintf(tag, sizeof tag, "%.40s", slash ? slash + 1 : bp);
    }
    live_bench lb;
    memset(&lb, 0, sizeof lb);
    lds_index *base = NULL;
    lds_load_options lo;
    lds_load_options_default(&lo);
    lo.use_mmap = true;
    lds_error err;
    lds_error_init(&err);
    if (lds_load_path(bp, &lo, &base, NULL, &err) != LDS_OK) {
        fprintf(stderr, "live: %s: %s\n", bp, err.message);
        return -1;
    }
    if (lds_index_dtype(base) != LDS_DTYPE_F32 || !lds_index_has_keys(base)) {
        fprintf(stderr, "live: %s: the base index must be f32 with keys\n", bp);
        lds_index_free(base);
        return -1;
    }
    lb.base = base;
    lb.rows = lds_index_rows(base);
    lb.dim = lds_index_dim(base);
    int rc = 0;
    for (uint32_t v = 0; v < VARIANTS && rc == 0; v++)
        rc = variant_path(base, dir, tag, v, lb.variant[v], sizeof lb.variant[v]);
    /* the base is mapped: read it all once, so its pages are resident before any RSS baseline */
    float sink = 0;
    for (uint64_t r = 0; rc == 0 && r < lb.rows; r++)
        sink += *(const float *)lds_index_row(base, r);
    bench_escape(&sink);
    uint64_t payload = lds_index_payload_bytes(base);
    bench_report *rep = rc == 0 ? bench_report_new(o) : NULL;
    for (int k = 0; rc == 0 && k < S_COUNT; k++) {
        lds_pool_options po;
        lds_pool_options_default(&po);
        if (k != S_ADOPT_TC)
            po.thread_cache_count = 0;
        /* current + loading + the retired ones must fit the retention cap, else every
         * rent past it is "oversize" and never pooled (lodestar_live.h, "Which pool") */
        size_t need = (LDS_LIVE_DEFAULT_MAX_RETIRED + 2) * lds_pool_class_capacity(payload);
        if (need > po.max_retained_bytes)
            po.max_retained_bytes = need;
        if (k != S_MALLOC && lds_pool_create(&po, &lb.pool[k]) != LDS_OK)
            rc = -1;
    }
    acc a[S_COUNT];
    memset(a, 0, sizeof a);
    if (rc == 0 && rep) {
        char buf[512];
        bench_param(rep, "base", bp);
        snprintf(buf, sizeof buf,
                 "%llu rows x %u f32, %llu payload bytes; generation g = variant g %% 3 (base + "
                 "g %% 3 in every element)",
                 (unsigned long long)lb.rows, lb.dim, (unsigned long long)payload);
        bench_param(rep, "index", buf);
        snprintf(buf, sizeof buf,
                 "%d query threads + 1 reloader on %ld CPUs (shared with other work: timings are "
                 "noisy); a reload every %d ms; %d rounds x %d strategies x %d reloads each, "
                 "interleaved",
                 threads, ncpu, period_ms, rounds, S_COUNT, cycles / rounds ? cycles / rounds : 1);
        bench_param(rep, "load", buf);
        bench_param(rep, "query",
                    "pin; find_key of a random row's key; check that row's every "
                    "element; exact top-10 by dot over the 128 rows from it; unpin");
        int per = cycles / rounds ? cycles / rounds : 1;
        for (int r = 0; rc == 0 && r < rounds; r++)
            for (int k = 0; rc == 0 && k < S_COUNT; k++)
                rc = phase(&lb, (enum strat)k, threads, per, period_ms, &a[k], payload);
    }
    if (rc == 0 && rep) {
        bench_table(rep, "reload loop under query load", true);
        for (int k = 0; k < S_COUNT; k++)
            add_row(rep, (enum strat)k, &a[k], payload, bench_page_size(), lb.pool[k]);
        bench_note(rep, "time columns: reload ms (median/min/max over every reload); faults = "
                        "minor faults of the reloader thread per reload (median); peak RSS over "
                        "payload = (peak process RSS in a phase - (RSS before it - this "
                        "strategy's retained pool bytes)) / payload bytes; pooled strategies "
                        "use thread_cache_count = 0 except pooled-adopt-tcache");
        rc = bench_report_finish(rep);
    }
    for (int k = 0; k < S_COUNT; k++) {
        free(a[k].in_us);
        free(a[k].during_us);
        lds_pool_free(lb.pool[k]);
    }
    bench_report_free(rep);
    lds_index_free(base);
    return rc;
}
