/*
 * live (nightly): the service reload loop under query load (lodestar_live.h).
 *
 * T query threads run queries without pause on whatever generation they pin,
 * while one reloader thread reloads every R ms. A query: pin; look a random
 * row's key up (lds_index_find_key); check that row's every element (a hash of
 * them) against what the pinned generation's file holds; exact top-10 by dot
 * product over the 128 rows from it, read from the pinned payload; unpin. A row
 * that differs (a freed or half-swapped generation) counts as a wrong result.
 *
 * The files (live_bench, "steps"): the base is the --index file (f32, with keys:
 * GloVe) or a generated --rows x --dim f32 index with keys (bench_write_index;
 * default 40,000 x 256, 41 MB). With no update pattern, step i holds base + i mod 3
 * in every element, so consecutive generations differ everywhere. With --changed,
 * --clustered or --appended PCT, step i differs from step i - 1 in PCT of the rows
 * only (updated in place at random, in runs of >= 64 rows, or appended), and each
 * timed reload is followed by a full reload of the same file (full_reload_ms): the
 * figure a delta reload is measured against. Before every timed reload its file is made
 * resident in the page cache (bench_file_resident: pages a DAMON pageout scheme evicted
 * since the file was last read are read back, untimed; cold_bytes_warmed counts them), so
 * both are warm reloads, as issue 32's targets are.
 *
 * Strategies, interleaved in rounds in this process (each round runs every
 * strategy for its share of the cycles, on a fresh live index):
 *   pooled-adopt  lds_live_reload_path, LDS_OWN_ADOPT, no pool named: the live
 *                 index's own pool (lds_live_pool, docs/adr/0049)
 *   pooled-adopt-sized  the same from a private pool sized by hand as
 *                 lodestar_live.h said before 0049 (thread caches off, cap of
 *                 (2 + max_retired) payloads), kept across rounds
 *   pooled-adopt-shared  the same from lds_pool_shared() (what a reload naming no
 *                 pool rented from before 0049); the shared pool is trimmed after each
 *                 phase, so each phase starts from a cold pool as a fresh process would
 *   pooled-copy   pooled-adopt with LDS_OWN_COPY
 *   malloc        read into malloc'd memory, parse (borrow, free on release),
 *                 lds_live_install_take: the allocation baseline
 *   mapped        lds_live_reload_path with use_mmap, LDS_OWN_ADOPT
 *   pooled-adopt-tcache  pooled-adopt-sized with the pool's thread caches on (the
 *                 pool's default): a generation freed by a reader's last unpin goes
 *                 back into that reader's thread cache, where the reloader's next rent
 *                 cannot see it.
 * --strategy LIST runs some of them (a 2 GiB index: one or two at a time).
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
#include <sys/stat.h>
#include <unistd.h>

enum strat { S_ADOPT, S_SIZED, S_SHARED, S_COPY, S_MALLOC, S_MAPPED, S_ADOPT_TC, S_COUNT };
static const char *const strat_names[S_COUNT] = {
    "pooled-adopt", "pooled-adopt-sized", "pooled-adopt-shared", "pooled-copy",
    "malloc",       "mapped",             "pooled-adopt-tcache"};

#define VARIANTS    3
#define BLOCK       128
#define TOPK        10
#define MAX_QUERY   (1u << 21) /* per reader per phase */
#define MAX_RELOADS 4096
#define MAX_GEN     (2 * MAX_RELOADS + 2) /* generations of one phase's live index */
#define RUN_ROWS    64                    /* --clustered: rows per run, at least */

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
    _Atomic int tid;                   /* its thread id, once it runs (task_minflt) */
} reader;

/* The files reloaded, by *step*: a phase loads step 0 (untimed), then steps 1, 2, ...
 * Step i's file: the base's rows, those in the set S (--changed, --clustered; every row
 * when no pattern is given) holding base + (i mod 3), then i x `appended` rows added at the
 * end (--appended). So consecutive steps differ in exactly S's rows plus the new tail, and
 * step 0 is the base itself. */
struct live_bench {
    const lds_index *base; /* mapped; its keys are read by the queries */
    uint64_t rows0;        /* the base's rows */
    uint32_t dim;
    bool pattern;       /* --changed, --clustered or --appended given */
    uint8_t *in_s;      /* bitmap of S over the base's rows; NULL = every row */
    uint64_t n_s;       /* rows in S */
    uint64_t appended;  /* rows appended per step */
    int steps;          /* steps of a phase (0 .. steps - 1) */
    int n_files;        /* distinct files: steps with --appended, else VARIANTS */
    char (*file)[4200]; /* n_files paths */
    uint64_t *hash[VARIANTS]; /* row_hash of row r of variant s, r < rows0 */
    uint64_t *hash_app;       /* row_hash of appended row rows0 + j */
    /* generation -> step it loaded; written before the reload that makes it, read by the
     * readers after they pin it (the swap orders the two) */
    int gen_step[MAX_GEN];
    /* The timed reloads are delta reloads (docs/adr/0047) when this is set (--delta on, the
     * default); the interleaved full reloads never are. */
    bool delta;
    lds_live *live;
    _Atomic bool stop;
    lds_pool *pool[S_COUNT]; /* the bench's own pools (S_SIZED, S_ADOPT_TC); NULL = none */
};

/* ---- the files ---- */

static uint64_t rng(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static uint64_t row_hash(const float *v, uint32_t dim)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (uint32_t d = 0; d < dim; d++) {
        uint32_t b;
        memcpy(&b, &v[d], sizeof b);
        h = (h ^ b) * 0x100000001b3u;
    }
    return h ^ (h >> 29);
}

static bool in_s(const live_bench *lb, uint64_t r)
{
    return !lb->in_s || (lb->in_s[r >> 3] >> (r & 7) & 1);
}

static uint64_t step_rows(const live_bench *lb, int step)
{
    return lb->rows0 + (uint64_t)step * lb->appended;
}

static int step_file(const live_bench *lb, int step)
{
    return lb->appended ? step : step % VARIANTS;
}

/* Row r of step `step` into v. */
static void expected_row(const live_bench *lb, int step, uint64_t r, float *v)
{
    if (r < lb->rows0) {
        const float *b = lds_index_row(lb->base, r);
        float s = in_s(lb, r) ? (float)(step % VARIANTS) : 0.0f;
        for (uint32_t d = 0; d < lb->dim; d++)
            v[d] = b[d] + s;
    } else {
        const float *b = lds_index_row(lb->base, (r - lb->rows0) % lb->rows0);
        for (uint32_t d = 0; d < lb->dim; d++)
            v[d] = b[d] + 0.5f;
    }
}

static uint64_t expected_hash(const live_bench *lb, int step, uint64_t r)
{
    if (r >= lb->rows0)
        return lb->hash_app[r - lb->rows0];
    return lb->hash[in_s(lb, r) ? step % VARIANTS : 0][r];
}

/* Row r's key in every step: the base's, or for an appended row its source row's key
 * followed by "#r". Returns its length (0: none). */
static size_t expected_key(const live_bench *lb, uint64_t r, char *buf, size_t cap)
{
    const char *key;
    size_t kl;
    if (lds_index_key(lb->base, r < lb->rows0 ? r : (r - lb->rows0) % lb->rows0, &key, &kl) !=
            LDS_OK ||
        kl + 24 > cap)
        return 0;
    memcpy(buf, key, kl);
    if (r >= lb->rows0)
        kl += (size_t)snprintf(buf + kl, cap - kl, "#%llu", (unsigned long long)r);
    return kl;
}

static int write_step(const live_bench *lb, const char *path, int step)
{
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = lb->dim;
    wo.metric = lds_index_metric(lb->base);
    wo.with_keys = true;
    wo.unique_keys = lds_index_keys_unique(lb->base);
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.part", path);
    lds_writer *w = NULL;
    lds_error err;
    lds_error_init(&err);
    float *v = malloc(wo.dim * sizeof *v);
    lds_status st = v ? lds_writer_open_path(tmp, &wo, &w, &err) : LDS_E_NOMEM;
    uint64_t rows = step_rows(lb, step);
    for (uint64_t r = 0; st == LDS_OK && r < rows; r++) {
        expected_row(lb, step, r, v);
        char key[512];
        size_t kl = expected_key(lb, r, key, sizeof key);
        st = kl ? lds_writer_add_row(w, v, wo.dim, 0, key, kl, &err) : LDS_E_BAD_VALUE;
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

/* Step `step`'s file: the base for step 0, else written once (reused when present with the
 * right rows and contents at its last row and its first changed row). */
static int step_path(live_bench *lb, const char *base_path, const char *dir, const char *tag,
                     int step)
{
    char *out = lb->file[step_file(lb, step)];
    if (step == 0) {
        snprintf(out, sizeof lb->file[0], "%s", base_path);
        return 0;
    }
    snprintf(out, sizeof lb->file[0], "%s/lodestar-live-%s-s%d.ldsi", dir, tag, step);
    lds_index *idx = NULL;
    lds_load_options lo;
    lds_load_options_default(&lo);
    lo.use_mmap = true;
    lo.verify_checksum = false;
    if (lds_load_path(out, &lo, &idx, NULL, NULL) == LDS_OK) {
        uint64_t rows = step_rows(lb, step), first = 0;
        while (first < lb->rows0 && !in_s(lb, first))
            first++;
        bool same = lds_index_rows(idx) == rows && lds_index_dim(idx) == lb->dim &&
                    row_hash(lds_index_row(idx, rows - 1), lb->dim) ==
                        expected_hash(lb, step, rows - 1) &&
                    (first == lb->rows0 || row_hash(lds_index_row(idx, first), lb->dim) ==
                                               expected_hash(lb, step, first));
        lds_index_free(idx);
        if (same)
            return 0;
    }
    fprintf(stderr, "live: writing step %d's file: %s\n", step, out);
    return write_step(lb, out, step);
}

/* S, the rows updated in place: --changed PCT at random, --clustered PCT in runs of
 * RUN_ROWS (runs may touch or overlap: longer runs). 0 on success. */
static int make_pattern(live_bench *lb, const bench_opts *o)
{
    lb->pattern = o->changed_pct > 0 || o->clustered_pct > 0 || o->appended_pct > 0;
    lb->delta = o->delta == 0;
    lb->appended =
        o->appended_pct > 0 ? (uint64_t)((double)lb->rows0 * o->appended_pct / 100.0 + 0.5) : 0;
    if (o->appended_pct > 0 && lb->appended == 0)
        lb->appended = 1;
    if (!lb->pattern) {
        lb->n_s = lb->rows0;
        return 0;
    }
    lb->in_s = calloc(lb->rows0 / 8 + 1, 1);
    if (!lb->in_s)
        return -1;
    uint64_t x = 0x243F6A8885A308D3u;
    uint64_t want = (uint64_t)((double)lb->rows0 * o->changed_pct / 100.0 + 0.5);
    for (uint64_t got = 0; got < want && got < lb->rows0;) {
        uint64_t r = rng(&x) % lb->rows0;
        if (!in_s(lb, r)) {
            lb->in_s[r >> 3] |= (uint8_t)(1u << (r & 7));
            got++;
        }
    }
    uint64_t more = (uint64_t)((double)lb->rows0 * o->clustered_pct / 100.0 + 0.5);
    uint64_t runs = (more + RUN_ROWS - 1) / RUN_ROWS;
    for (uint64_t k = 0; k < runs && lb->rows0 >= RUN_ROWS; k++) {
        uint64_t at = rng(&x) % (lb->rows0 - RUN_ROWS + 1);
        for (uint64_t r = at; r < at + RUN_ROWS; r++)
            lb->in_s[r >> 3] |= (uint8_t)(1u << (r & 7));
    }
    for (uint64_t r = 0; r < lb->rows0; r++)
        lb->n_s += in_s(lb, r);
    return 0;
}

/* The expected rows' hashes, from the base. */
static int make_hashes(live_bench *lb)
{
    float *v = malloc(lb->dim * sizeof *v);
    for (int s = 0; s < VARIANTS; s++)
        lb->hash[s] = malloc(lb->rows0 * sizeof *lb->hash[s]);
    uint64_t n_app = (uint64_t)(lb->steps - 1) * lb->appended;
    lb->hash_app = malloc((n_app ? n_app : 1) * sizeof *lb->hash_app);
    if (!v || !lb->hash[0] || !lb->hash[1] || !lb->hash[2] || !lb->hash_app) {
        free(v);
        return -1;
    }
    for (uint64_t r = 0; r < lb->rows0; r++)
        for (int s = 0; s < VARIANTS; s++) {
            if (s > 0 && !in_s(lb, r)) {
                lb->hash[s][r] = lb->hash[0][r];
                continue;
            }
            expected_row(lb, s, r, v);
            lb->hash[s][r] = row_hash(v, lb->dim);
        }
    for (uint64_t j = 0; j < n_app; j++) {
        expected_row(lb, 0, lb->rows0 + j, v);
        lb->hash_app[j] = row_hash(v, lb->dim);
    }
    free(v);
    return 0;
}

/* ---- queries ---- */

/* One query on the pinned generation; returns 1 if its result is wrong. */
static int query(const live_bench *lb, const lds_pin *pin, uint64_t *x)
{
    if (pin->generation >= MAX_GEN)
        return 1;
    int step = lb->gen_step[pin->generation];
    uint64_t rows = step_rows(lb, step);
    if (lds_index_rows(pin->index) != rows)
        return 1;
    uint64_t r = rng(x) % rows;
    char key[512];
    size_t kl = expected_key(lb, r, key, sizeof key);
    uint64_t at = UINT64_MAX;
    if (!kl || lds_index_find_key(pin->index, key, kl, &at) != LDS_OK || at != r)
        return 1;
    const char *k2;
    size_t kl2;
    if (lds_index_key(pin->index, at, &k2, &kl2) != LDS_OK || kl2 != kl || memcmp(k2, key, kl))
        return 1;
    const float *q = lds_index_row(pin->index, at);
    int bad = row_hash(q, lb->dim) != expected_hash(lb, step, at);
    /* exact top-k by dot product over BLOCK rows of the pinned payload */
    float best[TOPK];
    for (int i = 0; i < TOPK; i++)
        best[i] = -1e30f;
    uint64_t end = at + BLOCK < rows ? at + BLOCK : rows;
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
    atomic_store(&rd->tid, (int)gettid());
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

/* Minor faults of the whole process, ended threads included (a reload's reader threads). */
static uint64_t process_minflt(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_minflt;
}

/* Minor faults of thread `tid` of this process (field 10 of /proc/self/task/TID/stat, after
   the command's closing parenthesis); 0 when it cannot be read. */
static uint64_t task_minflt(int tid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = tid > 0 ? fopen(path, "r") : NULL;
    if (f == NULL)
        return 0;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    const char *q = strrchr(line, ')');
    unsigned long long v = 0;
    if (q == NULL || sscanf(q + 1, " %*c %*d %*d %*d %*d %*d %*u %llu", &v) != 1)
        return 0;
    return (uint64_t)v;
}

/* The query threads' minor faults, summed: taken out of the process's to count a reload's. */
static uint64_t queries_minflt(reader *rd, int n)
{
    uint64_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += task_minflt(atomic_load(&rd[i].tid));
    return sum;
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
    lds_index *idx = NULL;
    lds_status st = bench_load_malloc(path, &idx);
    if (st != LDS_OK)
        return st;
    sample_rss(1, 1, NULL);
    if ((st = lds_live_install_take(lb->live, idx, NULL, NULL)) != LDS_OK)
        lds_index_free(idx);
    return st;
}

static bool g_trace; /* LODESTAR_BENCH_LIVE_TRACE set: RSS and each reload's phases on stderr */

/* Reads back the pages of step's file that left the page cache, before a timed reload;
 * returns the bytes read (traced when any). */
static uint64_t warm_file(live_bench *lb, int step)
{
    const char *path = lb->file[step_file(lb, step)];
    uint64_t cold = bench_file_resident(path);
    if (cold == UINT64_MAX)
        return 0;
    if (g_trace && cold > 0)
        fprintf(stderr, "live trace: step %2d: %.1f MiB of %s were not in the page cache: read "
                        "back before the timed reload\n", step, (double)cold / 1048576.0, path);
    return cold;
}

static lds_status reload_once(live_bench *lb, enum strat s, int step, bool delta)
{
    const char *path = lb->file[step_file(lb, step)];
    if (s == S_MALLOC)
        return reload_malloc(lb, path);
    lds_load_options lo;
    lds_load_options_default(&lo);
    lo.pool = s == S_SHARED ? lds_pool_shared() : lb->pool[s]; /* NULL: the live's own */
    lo.ownership = s == S_COPY ? LDS_OWN_COPY : LDS_OWN_ADOPT;
    lo.use_mmap = s == S_MAPPED;
    lo.progress = sample_rss;
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_live_reload_path_delta(lb->live, path, delta, &lo, NULL, NULL, &err);
    if (st != LDS_OK)
        fprintf(stderr, "live: reload %s: %s\n", path, err.message);
    return st;
}

/* ---- per strategy, accumulated over rounds ---- */

/* The phases of a reload (lds__live_phases, docs/adr/0055), as columns "<name>_ms". */
#define N_PHASES 8
static const char *const phase_names[N_PHASES] = {"table", "plan", "rent", "fill",
                                                  "parse", "keys", "swap", "other"};

/* live/live.c (loader/delta_internal.h): table, plan, rent, fill, parse, keys, swap, total. */
extern void lds__live_phases_ns(lds_live *live, uint64_t *out, size_t n);
/* loader/: hash copied chunks again (ADR 0047); LODESTAR_BENCH_LIVE_NO_REHASH=1 turns it off
   to measure what the re-hash costs (a what-if for ADR 0055; never the library's default). */
extern bool lds__delta_rehash;
/* loader/delta_internal.h: true reads every delta run with pread (the io_uring fallback) */
extern bool lds__delta_uring_off;
/* live/live.c (loader/delta_internal.h): the standby's pages faulted in ahead.
   LODESTAR_BENCH_LIVE_POPULATE_STANDBY=1 calls it, untimed, before each timed delta reload
   with the new file's payload length: a what-if that takes the first touch of the bytes a
   growing file adds (fresh memory) out of the delta reload (ADR 0055, third session); the
   full reload after it still grows its own buffer. Never the library's behaviour. */
extern size_t lds__live_populate_standby(lds_live *live, size_t length);
static bool g_populate_standby;

static void phases_ms(lds_live *live, double *ms)
{
    uint64_t v[N_PHASES] = {0};
    lds__live_phases_ns(live, v, N_PHASES);
    uint64_t sum = 0, total = v[N_PHASES - 1];
    for (int i = 0; i < N_PHASES - 1; i++)
        sum += v[i];
    v[N_PHASES - 1] = total > sum ? total - sum : 0; /* before the load, a fallback's load */
    for (int i = 0; i < N_PHASES; i++)
        ms[i] = (double)v[i] / 1e6;
}

/* The fill's parts, summed over its readers (lds__live_phases_ns values 11-13): copy (with
   the re-hash), read, verify; in ms. */
#define N_FILL_PARTS 3
static const char *const fill_part_names[N_FILL_PARTS] = {"fill_copy", "fill_read",
                                                          "fill_verify"};

static void fill_parts_ms(lds_live *live, double *ms)
{
    uint64_t v[11 + N_FILL_PARTS] = {0};
    lds__live_phases_ns(live, v, 11 + N_FILL_PARTS);
    for (int i = 0; i < N_FILL_PARTS; i++)
        ms[i] = (double)v[11 + i] / 1e6;
}

typedef struct acc {
    double *in_us, *during_us; /* query latencies outside / during reload windows */
    size_t n_in, n_during, cap_in, cap_during;
    double reload_ms[MAX_RELOADS];
    double faults[MAX_RELOADS];
    double faults3[MAX_RELOADS]; /* of the reloads from each live index's third on */
    double bytes_read[MAX_RELOADS], bytes_shared[MAX_RELOADS], bytes_copied[MAX_RELOADS];
    double full_ms[MAX_RELOADS];
    double phase_ms[N_PHASES][MAX_RELOADS]; /* lds__live_phases of each timed reload */
    double part_ms[N_FILL_PARTS][MAX_RELOADS]; /* the fill's parts (fill_parts_ms) */
    size_t n_reloads, n_faults3, n_full;
    uint64_t wrong, max_retired, unpin_max_ns, unpin_slow;
    uint64_t own_rents, own_warm; /* the live index's own pool, summed over phases */
    uint64_t cold_bytes; /* bytes of the reloads' files read back into the page cache first */
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
    /* interpolated between the two nearest ranks: the median of an even count is the mean
       of the middle two (rounding to a rank gave the larger, the max of two samples) */
    double at = p * (double)(n - 1);
    size_t lo = (size_t)at, hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (at - (double)lo);
}


static void trace_rss(const char *what, enum strat s, int step, uint64_t base, uint64_t payload)
{
    if (g_trace)
        fprintf(stderr, "live trace: %-20s %-12s step %2d: RSS - baseline = %.3fx payload\n",
                strat_names[s], what, step,
                payload ? (double)((int64_t)bench_rss() - (int64_t)base) / (double)payload : 0);
}

/* One phase: a fresh live index, `threads` readers; step 0 loaded, then steps 1 .. per, one
 * every `period_ms`, each followed (with a pattern) by a full reload of the same file. */
static int phase(live_bench *lb, enum strat s, int threads, int per, int period_ms, acc *a,
                 uint64_t payload)
{
    /* Other strategies' retained buffers sit idle through this phase: they are in both the
     * baseline and the peak. This strategy's retained buffers are its own memory: they are
     * taken out of the baseline, so the peak counts them. */
    uint64_t own = 0;
    if (lb->pool[s]) {
        lds_pool_stats ps;
        lds_pool_stats_init(&ps);
        lds_pool_get_stats(lb->pool[s], &ps);
        /* resident, not capacity: a retained buffer holds the pages a payload touched (whole
         * 2 MiB pages with huge pages), not its class's capacity (up to 1.25x the payload;
         * subtracting the capacity overstated the peak by up to 0.25x per buffer) */
        uint64_t res = (payload + (2u << 20) - 1) / (2u << 20) * (2u << 20);
        own = ps.buffers_retained * res;
        if (own > ps.bytes_retained)
            own = ps.bytes_retained;
    }
    uint64_t rss_base = bench_rss();
    rss_base = rss_base > own ? rss_base - own : 0;
    g_rss_peak = 0;
    uint64_t gen = 1; /* the next generation's number: the live index counts from 1 */
    lb->gen_step[gen] = 0;
    if (lds_live_create(NULL, &lb->live, NULL) != LDS_OK || reload_once(lb, s, 0, false) != LDS_OK)
        return -1;
    gen++;
    trace_rss("loaded", s, 0, rss_base, payload);
    atomic_store(&lb->stop, false);
    reader rd[64];
    uint64_t win[2 * MAX_RELOADS][2];
    int nwin = 0;
    int rc = 0, nt = 0;
    for (; nt < threads; nt++) {
        rd[nt] = (reader){lb, 0, 0x9E3779B97F4A7C15u * (uint64_t)(nt + 1) + a->n_reloads,
                          NULL, 0, 0, 0, 0, 0};
        rd[nt].q = malloc(MAX_QUERY * sizeof *rd[nt].q);
        if (!rd[nt].q || pthread_create(&rd[nt].t, NULL, reader_main, &rd[nt]) != 0) {
            free(rd[nt].q);
            rc = -1;
            break;
        }
    }
    /* The peak is taken per reload over the larger of the two payloads it holds (the serving
       one's and the new one's): with --appended every step's file is larger than the last,
       and the base's payload would count the growth as overhead (2.18x at 12 steps of 1%,
       where the two payloads alone are 2.23x the base's). */
    uint64_t held = payload;
    double peak_over = g_rss_peak > rss_base && payload
                           ? (double)(g_rss_peak - rss_base) / (double)payload
                           : 0;
    for (int step = 1; rc == 0 && step <= per && a->n_reloads < MAX_RELOADS; step++) {
        usleep((useconds_t)period_ms * 1000u);
        lb->gen_step[gen] = step;
        /* page cache warm, as the targets say: pages evicted since the file was last read
           (DAMON's pageout here) are read back first, outside the timed reload */
        a->cold_bytes += warm_file(lb, step);
        if (g_populate_standby && lb->delta) {
            struct stat st;
            if (stat(lb->file[step_file(lb, step)], &st) == 0 && st.st_size > 64)
                (void)lds__live_populate_standby(lb->live, (size_t)st.st_size - 64);
        }
        g_rss_peak = bench_rss();
        /* the reload's faults: the process's minus the query threads' (the reloader's own
           and its reader threads', which end with the load) */
        uint64_t q0 = queries_minflt(rd, nt), f0 = process_minflt(), t0 = bench_now_ns();
        if (reload_once(lb, s, step, lb->delta) != LDS_OK)
            rc = -1;
        uint64_t t1 = bench_now_ns(), f1 = process_minflt(), q1 = queries_minflt(rd, nt);
        f1 -= q1 - q0 < f1 - f0 ? q1 - q0 : f1 - f0;
        gen++;
        uint64_t rss = bench_rss();
        if (rss > g_rss_peak)
            g_rss_peak = rss;
        win[nwin][0] = t0;
        win[nwin++][1] = t1;
        lds_live_stats ls;
        lds_live_stats_init(&ls);
        lds_live_get_stats(lb->live, &ls);
        uint64_t now = ls.last_load.payload_bytes ? ls.last_load.payload_bytes : held;
        uint64_t den = now > held ? now : held;
        if (den && g_rss_peak > rss_base && (double)(g_rss_peak - rss_base) / (double)den > peak_over)
            peak_over = (double)(g_rss_peak - rss_base) / (double)den;
        held = now;
        trace_rss("reloaded", s, step, rss_base, held);
        size_t k = a->n_reloads++;
        a->reload_ms[k] = (double)(t1 - t0) / 1e6;
        a->faults[k] = (double)(f1 - f0);
        a->bytes_read[k] = (double)ls.last_load.bytes_read;
        a->bytes_shared[k] = (double)ls.last_load.bytes_shared;
        a->bytes_copied[k] = (double)ls.last_load.bytes_copied;
        double ms[N_PHASES], sub[N_FILL_PARTS];
        phases_ms(lb->live, ms);
        fill_parts_ms(lb->live, sub);
        for (int i = 0; i < N_PHASES; i++)
            a->phase_ms[i][k] = ms[i];
        for (int i = 0; i < N_FILL_PARTS; i++)
            a->part_ms[i][k] = sub[i];
        if (g_trace)
            fprintf(stderr,
                    "live trace: %-20s reload       step %2d: %.1f ms (table %.2f plan %.2f rent "
                    "%.2f fill %.2f [copy %.2f read %.2f verify %.2f] parse %.2f keys %.2f swap "
                    "%.2f other %.2f) read %.1f MiB kept %.1f MiB copied %.1f MiB, %.0f faults\n",
                    strat_names[s], step, a->reload_ms[k], ms[0], ms[1], ms[2], ms[3], sub[0],
                    sub[1], sub[2], ms[4], ms[5], ms[6], ms[7], a->bytes_read[k] / 1048576.0,
                    a->bytes_shared[k] / 1048576.0, a->bytes_copied[k] / 1048576.0, a->faults[k]);
        if (ls.reloads_done >= 3)
            a->faults3[a->n_faults3++] = a->faults[k];
        if (rc == 0 && lb->pattern) {
            /* the same file again, in full: what the reload above would cost without delta */
            usleep((useconds_t)period_ms * 1000u / 4u);
            lb->gen_step[gen] = step;
            a->cold_bytes += warm_file(lb, step);
            g_rss_peak = bench_rss();
            uint64_t u0 = bench_now_ns();
            if (reload_once(lb, s, step, false) != LDS_OK)
                rc = -1;
            uint64_t u1 = bench_now_ns();
            gen++;
            win[nwin][0] = u0;
            win[nwin++][1] = u1;
            a->full_ms[a->n_full++] = (double)(u1 - u0) / 1e6;
            rss = bench_rss();
            if (rss > g_rss_peak)
                g_rss_peak = rss;
            if (held && g_rss_peak > rss_base &&
                (double)(g_rss_peak - rss_base) / (double)held > peak_over)
                peak_over = (double)(g_rss_peak - rss_base) / (double)held;
            trace_rss("full reload", s, step, rss_base, held);
        }
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
            for (int w = 0; w < nwin && !during; w++)
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
    if ((s == S_ADOPT || s == S_COPY)) {
        lds_pool_stats ps;
        lds_pool_stats_init(&ps);
        lds_pool_get_stats(lds_live_pool(lb->live), &ps);
        a->own_rents += ps.rents;
        a->own_warm += ps.hits_thread + ps.hits_shared;
    }
    lds_live_free(lb->live);
    lb->live = NULL;
    if (s == S_SHARED)
        lds_pool_trim(lds_pool_shared(), LDS_POOL_TRIM_ALL, NULL);
    if (peak_over > a->peak_over)
        a->peak_over = peak_over;
    return rc;
}

static void add_row(bench_report *rep, enum strat s, acc *a, uint64_t payload, size_t page,
                    lds_pool *pool)
{
    bench_row *row = bench_row_new(rep, strat_names[s], "ms/reload");
    for (size_t i = 0; i < a->n_reloads; i++)
        bench_row_sample(row, a->reload_ms[i], a->faults[i], 0);
    double faults = pct(a->faults, a->n_reloads, 0.5);
    double faults3 = pct(a->faults3, a->n_faults3, 0.5);
    uint64_t pages = (payload + page - 1) / page;
    double p99_in = pct(a->in_us, a->n_in, 0.99), p99_dur = pct(a->during_us, a->n_during, 0.99);
    double reload_ms = pct(a->reload_ms, a->n_reloads, 0.5);
    double full_ms = a->n_full ? pct(a->full_ms, a->n_full, 0.5) : reload_ms;
    bench_row_text(row, "strategy", "strategy", strat_names[s]);
    bench_row_set(row, "reload", "reload_ms", BENCH_NUM, reload_ms);
    bench_row_set(row, "reload", "full_reload_ms", BENCH_NUM, full_ms);
    bench_row_set(row, "reload", "cold_bytes_warmed", BENCH_BYTES, (double)a->cold_bytes);
    bench_row_set(row, "reload", "reload_over_full", BENCH_RATIO, full_ms > 0 ? reload_ms / full_ms : 0);
    bench_row_set(row, "reload", "faults_per_reload", BENCH_NUM, faults);
    bench_row_set(row, "reload", "payload_pages", BENCH_COUNT, (double)pages);
    bench_row_set(row, "reload", "faults_pct_of_pages", BENCH_PCT,
                  pages ? 100.0 * faults / (double)pages : 0);
    bench_row_set(row, "reload", "faults_from_third_pct", BENCH_PCT,
                  pages ? 100.0 * faults3 / (double)pages : 0);
    bench_row_set(row, "reload", "bytes_read_per_reload", BENCH_BYTES,
                  pct(a->bytes_read, a->n_reloads, 0.5));
    bench_row_set(row, "reload", "bytes_shared_per_reload", BENCH_BYTES,
                  pct(a->bytes_shared, a->n_reloads, 0.5));
    bench_row_set(row, "reload", "bytes_copied_per_reload", BENCH_BYTES,
                  pct(a->bytes_copied, a->n_reloads, 0.5));
    for (int i = 0; i < N_PHASES; i++) {
        char col[32];
        snprintf(col, sizeof col, "%s_ms", phase_names[i]);
        bench_row_set(row, "reload phases (median ms)", col, BENCH_NUM,
                      pct(a->phase_ms[i], a->n_reloads, 0.5));
    }
    for (int i = 0; i < N_FILL_PARTS; i++) {
        char col[32];
        snprintf(col, sizeof col, "%s_ms", fill_part_names[i]);
        bench_row_set(row, "fill parts (median ms, summed over readers)", col, BENCH_NUM,
                      pct(a->part_ms[i], a->n_reloads, 0.5));
    }
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
    uint64_t rents = a->own_rents, warm = a->own_warm;
    if (pool) {
        lds_pool_stats ps;
        lds_pool_stats_init(&ps);
        lds_pool_get_stats(pool, &ps);
        rents = ps.rents;
        warm = ps.hits_thread + ps.hits_shared;
    }
    if (rents) {
        bench_row_set(row, "pool", "rents", BENCH_COUNT, (double)rents);
        bench_row_set(row, "pool", "warm_rents", BENCH_COUNT, (double)warm);
    }
}

/* --strategy LIST: which to run; all when NULL. -1 on an unknown name. */
static int pick_strategies(const char *list, bool on[S_COUNT])
{
    for (int k = 0; k < S_COUNT; k++)
        on[k] = !list;
    for (const char *p = list; p && *p;) {
        size_t n = strcspn(p, ",");
        int k = 0;
        while (k < S_COUNT && !(strlen(strat_names[k]) == n && strncmp(p, strat_names[k], n) == 0))
            k++;
        if (k == S_COUNT) {
            fprintf(stderr, "live: unknown strategy '%.*s' (pooled-adopt, pooled-adopt-sized, "
                            "pooled-adopt-shared, pooled-copy, malloc, mapped, "
                            "pooled-adopt-tcache)\n",
                    (int)n, p);
            return -1;
        }
        on[k] = true;
        p += n + (p[n] == ',');
    }
    return 0;
}

int bench_live(const bench_opts *o)
{
    g_trace = getenv("LODESTAR_BENCH_LIVE_TRACE") != NULL;
    if (getenv("LODESTAR_BENCH_LIVE_NO_REHASH") != NULL)
        lds__delta_rehash = false;
    g_populate_standby = getenv("LODESTAR_BENCH_LIVE_POPULATE_STANDBY") != NULL;
    /* LODESTAR_BENCH_DELTA_PREAD set: the delta fill's pread path, to price io_uring */
    lds__delta_uring_off = getenv("LODESTAR_BENCH_DELTA_PREAD") != NULL;
    bool on[S_COUNT];
    if (pick_strategies(o->strategy, on) != 0)
        return -1;
    const char *dir = bench_work_dir(o);
    uint64_t rows = o->rows ? o->rows : (o->dry ? 2000 : 40000);
    uint32_t dim = o->dim ? o->dim : (o->dry ? 32 : 256);
    int cycles = o->cycles ? o->cycles : (o->dry ? 2 : 12);
    int rounds = o->dry ? 1 : 3;
    int per = cycles / rounds ? cycles / rounds : 1;
    int period_ms = o->interval_ms ? o->interval_ms : o->dry ? 5 : (o->index_path ? 250 : 120);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = o->threads ? o->threads : (ncpu > 2 ? (int)ncpu - 1 : 1);
    if (threads > 64)
        threads = 64;
    char basepath[4096], tag[160];
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
    size_t tl = strlen(tag);
    snprintf(tag + tl, sizeof tag - tl, "-c%g-k%g-a%g", o->changed_pct, o->clustered_pct,
             o->appended_pct);
    live_bench *lbp = calloc(1, sizeof *lbp);
    if (!lbp)
        return -1;
    live_bench lb_init = {0};
    *lbp = lb_init;
    live_bench *lb = lbp;
    lds_index *base = NULL;
    lds_load_options lo;
    lds_load_options_default(&lo);
    lo.use_mmap = true;
    lds_error err;
    lds_error_init(&err);
    if (lds_load_path(bp, &lo, &base, NULL, &err) != LDS_OK) {
        fprintf(stderr, "live: %s: %s\n", bp, err.message);
        free(lb);
        return -1;
    }
    if (lds_index_dtype(base) != LDS_DTYPE_F32 || !lds_index_has_keys(base)) {
        fprintf(stderr, "live: %s: the base index must be f32 with keys\n", bp);
        lds_index_free(base);
        free(lb);
        return -1;
    }
    lb->base = base;
    lb->rows0 = lds_index_rows(base);
    lb->dim = lds_index_dim(base);
    lb->steps = per + 1;
    int rc = make_pattern(lb, o);
    lb->n_files = lb->appended ? lb->steps : VARIANTS;
    lb->file = calloc((size_t)lb->n_files, sizeof *lb->file);
    if (rc == 0 && (!lb->file || make_hashes(lb) != 0))
        rc = -1;
    for (int st = 0; st < lb->steps && st < (lb->appended ? lb->steps : VARIANTS) && rc == 0; st++)
        rc = step_path(lb, bp, dir, tag, st);
    /* Map the base afresh: its vectors were read above (hashes, files) and would stay
     * resident in this mapping; the queries read only its keys, touched here once, so that
     * they are resident before any RSS baseline. */
    lds_index_free(base);
    base = NULL;
    if (rc == 0 && lds_load_path(bp, &lo, &base, NULL, &err) != LDS_OK)
        rc = -1;
    lb->base = base;
    unsigned sink = 0;
    for (uint64_t r = 0; rc == 0 && r < lb->rows0; r++) {
        const char *key;
        size_t kl;
        if (lds_index_key(base, r, &key, &kl) == LDS_OK && kl)
            sink += (unsigned char)key[0];
    }
    bench_escape(&sink);
    uint64_t payload = base ? lds_index_payload_bytes(base) : 0;
    bench_report *rep = rc == 0 ? bench_report_new(o) : NULL;
    for (int k = 0; rc == 0 && k < S_COUNT; k++) {
        if (!on[k] || (k != S_SIZED && k != S_ADOPT_TC))
            continue; /* pooled-adopt and pooled-copy: the live index's own pool */
        lds_pool_options po;
        lds_pool_options_default(&po);
        if (k != S_ADOPT_TC)
            po.thread_cache_count = 0;
        /* current + loading + the retired ones must fit the retention cap, else every
         * rent past it is "oversize" and never pooled (the hand-sizing lodestar_live.h
         * described before the live index had its own pool) */
        size_t need = (LDS_LIVE_DEFAULT_MAX_RETIRED + 2) *
                      lds_pool_class_capacity(payload + lb->appended * (size_t)per * lb->dim * 4);
        if (need > po.max_retained_bytes)
            po.max_retained_bytes = need;
        if (lds_pool_create(&po, &lb->pool[k]) != LDS_OK)
            rc = -1;
    }
    acc *a = calloc(S_COUNT, sizeof *a);
    if (!a)
        rc = -1;
    if (rc == 0 && rep) {
        char buf[1024];
        bench_param(rep, "base", bp);
        if (!lb->pattern)
            snprintf(buf, sizeof buf,
                     "%llu rows x %u f32, %llu payload bytes; step i = base + i %% 3 in every "
                     "element (every reload changes every row)",
                     (unsigned long long)lb->rows0, lb->dim, (unsigned long long)payload);
        else
            snprintf(buf, sizeof buf,
                     "%llu rows x %u f32, %llu payload bytes; each reload's file: %llu rows "
                     "(%.2f%%) updated in place (--changed %g, --clustered %g: runs of >= %d), "
                     "%llu rows appended (--appended %g); a full reload of the same file after "
                     "each (full_reload_ms)",
                     (unsigned long long)lb->rows0, lb->dim, (unsigned long long)payload,
                     (unsigned long long)lb->n_s, 100.0 * (double)lb->n_s / (double)lb->rows0,
                     o->changed_pct, o->clustered_pct, RUN_ROWS,
                     (unsigned long long)lb->appended, o->appended_pct);
        bench_param(rep, "index", buf);
        int n_on = 0;
        for (int k = 0; k < S_COUNT; k++)
            n_on += on[k];
        snprintf(buf, sizeof buf,
                 "%d query threads + 1 reloader on %ld CPUs (shared with other work: timings are "
                 "noisy); a reload every %d ms; %d rounds x %d strategies x %d reloads each, "
                 "interleaved; delta %s",
                 threads, ncpu, period_ms, rounds, n_on, per, lb->delta ? "on" : "off");
        bench_param(rep, "load", buf);
        bench_param(rep, "query",
                    "pin; find_key of a random row's key; check that row (hash of its every "
                    "element) against the pinned generation's file; exact top-10 by dot over the "
                    "128 rows from it; unpin");
        for (int r = 0; rc == 0 && r < rounds; r++)
            for (int k = 0; rc == 0 && k < S_COUNT; k++)
                if (on[k])
                    rc = phase(lb, (enum strat)k, threads, per, period_ms, &a[k], payload);
    }
    if (rc == 0 && rep) {
        bench_table(rep, "reload loop under query load", true);
        for (int k = 0; k < S_COUNT; k++)
            if (on[k])
                add_row(rep, (enum strat)k, &a[k], payload, bench_page_size(), lb->pool[k]);
        bench_note(rep, "time columns: reload ms (median/min/max over every timed reload); faults = "
                        "minor faults of the reload per reload: the reloader's and its reader "
                        "threads' (the process's minus the query threads'; median; "
                        "faults_from_third_pct: over each live index's third reload and later); "
                        "peak RSS over payload = the largest over the phase's reloads of (peak process "
                        "RSS during the reload - (RSS before the phase - this strategy's retained "
                        "pool bytes)) / the larger payload the reload holds (the serving one's or "
                        "the new one's: they grow with --appended); pooled-adopt and "
                        "pooled-copy rent from the live index's own pool (lds_live_pool), "
                        "pooled-adopt-sized from a private pool sized by hand (thread caches "
                        "off, cap (2 + max_retired) payloads; its retained buffers are taken "
                        "out of the baseline as resident payloads), pooled-adopt-shared from "
                        "lds_pool_shared() (trimmed after each phase), pooled-adopt-tcache the "
                        "sized pool with thread caches on; bytes_* from lds_load_info of each "
                        "reload");
        rc = bench_report_finish(rep);
    }
    for (int k = 0; a && k < S_COUNT; k++) {
        free(a[k].in_us);
        free(a[k].during_us);
    }
    for (int k = 0; k < S_COUNT; k++)
        lds_pool_free(lb->pool[k]);
    free(a);
    bench_report_free(rep);
    lds_index_free(base);
    for (int s = 0; s < VARIANTS; s++)
        free(lb->hash[s]);
    free(lb->hash_app);
    free(lb->in_s);
    free(lb->file);
    free(lb);
    return rc;
}
