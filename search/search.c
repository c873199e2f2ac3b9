/* Exact top-k search: kernel choice, cosine norms, blocked and threaded scans,
   fused per-query top-k. Design and measurements: ADR 0015. */
#include "../format/format_internal.h"
#include "search_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ==== kernel choice ====================================================== */

static const lds__kernel *const kernel_list[] = {
#if defined(LDS_HAVE_KERNEL_AVX512BF16)
    &lds__kernel_avx512bf16,
#endif
#if defined(LDS_HAVE_KERNEL_AVX512VNNI)
    &lds__kernel_avx512vnni,
#endif
#if defined(LDS_HAVE_KERNEL_AVX512)
    &lds__kernel_avx512,
#endif
#if defined(LDS_HAVE_KERNEL_AVX2)
    &lds__kernel_avx2,
#endif
    &lds__kernel_generic,
};
#define KERNEL_COUNT (sizeof kernel_list / sizeof kernel_list[0])

size_t lds__search_kernel_count(void)
{
    return KERNEL_COUNT;
}

const lds__kernel *lds__search_kernel_at(size_t i)
{
    return i < KERNEL_COUNT ? kernel_list[i] : NULL;
}

#if defined(LDS_HAVE_KERNEL_AVX2) || defined(LDS_HAVE_KERNEL_AVX512BF16)
#include <cpuid.h>
#endif

#if defined(LDS_HAVE_KERNEL_AVX512BF16)
/* CPUID.(7, 1):EAX bit 5, AVX512_BF16 (older compilers' __builtin_cpu_supports lack it). */
static bool cpu_has_avx512bf16(void)
{
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}
#endif

#if defined(LDS_HAVE_KERNEL_AVX2)

/* CPUID.1:ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c"). */
static bool cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

bool lds__search_kernel_runs(size_t i)
{
    if (i >= KERNEL_COUNT)
        return false;
#if defined(LDS_HAVE_KERNEL_AVX512BF16)
    if (kernel_list[i] == &lds__kernel_avx512bf16)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
               cpu_has_avx512bf16();
#endif
#if defined(LDS_HAVE_KERNEL_AVX512VNNI)
    if (kernel_list[i] == &lds__kernel_avx512vnni)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#endif
#if defined(LDS_HAVE_KERNEL_AVX512)
    if (kernel_list[i] == &lds__kernel_avx512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl");
#endif
#if defined(LDS_HAVE_KERNEL_AVX2)
    if (kernel_list[i] == &lds__kernel_avx2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
#endif
    return true;
}

/* The kernel in use per class of search: [0] float (f32, f16, and bf16 and i8
   under l2: the f32 chain), [1] native i8 (i8 under dot and cosine, ADR 0043),
   [2] native bf16 (bf16 under dot and cosine, ADR 0056). auto_kernel holds what
   the probe chose, for lds__search_kernel_force(NULL). */
#define NCLASS 3
static _Atomic(const lds__kernel *) current_kernel[NCLASS];
static const lds__kernel *auto_kernel[NCLASS];
static double auto_times[NCLASS][KERNEL_COUNT]; /* what the first-use probe measured, ns */
static double probe_cost_ms;
static pthread_once_t kernel_once = PTHREAD_ONCE_INIT;
static void kernel_init(void);

static const lds__kernel *kernel_named(const char *name)
{
    for (size_t i = 0; i < KERNEL_COUNT; i++)
        if (strcmp(kernel_list[i]->name, name) == 0 && lds__search_kernel_runs(i))
            return kernel_list[i];
    return NULL;
}

static double thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The probe's work, in cache (ADR 0054): PROBE_DIM x LDS__PANEL generated rows
   (f32, or i8 for the native class), one query alone 8 times (the single-query
   path) and a micro-tile of 6 queries 4 times (the batch path). */
#define PROBE_DIM    100
#define PROBE_Q      6
#define PROBE_ROUNDS 7

typedef struct probe_data {
    float rows[LDS__PANEL * PROBE_DIM];
    int8_t rows_i8[LDS__PANEL * PROBE_DIM];
    uint16_t rows_bf16[LDS__PANEL * PROBE_DIM];
    uint32_t qb[PROBE_Q * LDS__BF16_PAIRS(PROBE_DIM)];
    float q[PROBE_Q * PROBE_DIM];
    int32_t qi[PROBE_Q * LDS__I8_PAIRS(PROBE_DIM)];
    double qc[PROBE_Q];
    float thr[PROBE_Q];
    float out[PROBE_Q * LDS__PANEL];
    uint64_t mask[PROBE_Q];
    float panel[LDS__PANEL * (PROBE_DIM + 4)] __attribute__((aligned(64)));
} probe_data;

static void probe_fill(probe_data *p)
{
    uint32_t x = 0x9E3779B9u; /* xorshift: the same data in every process */
    for (size_t i = 0; i < LDS__PANEL * PROBE_DIM; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        p->rows[i] = (float)((int32_t)(x % 2001u) - 1000) / 1000.0f;
        p->rows_i8[i] = (int8_t)((int32_t)(x % 255u) - 127);
        p->rows_bf16[i] = lds__bf16_round(p->rows[i]);
    }
    for (size_t i = 0; i < PROBE_Q * PROBE_DIM; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        p->q[i] = (float)((int32_t)(x % 2001u) - 1000) / 1000.0f;
    }
    for (size_t j = 0; j < PROBE_Q; j++) {
        p->qc[j] = lds__i8_quantize(p->q + j * PROBE_DIM, PROBE_DIM,
                                    p->qi + j * LDS__I8_PAIRS(PROBE_DIM)) / 127.0;
        p->thr[j] = INFINITY; /* scores only: no candidate, as in most blocks of a scan */
    }
    lds__bf16_query(p->q, PROBE_Q, PROBE_DIM, PROBE_DIM, p->qb, LDS__BF16_PAIRS(PROBE_DIM));
}

static double probe_once(const lds__kernel *k, int cls, probe_data *p)
{
    const bool native_i8 = cls == 1, native_bf16 = cls == 2;
    lds__block_args a = {
        .q = p->q,
        .qstride = PROBE_DIM,
        .rows = native_i8     ? (const uint8_t *)p->rows_i8
                : native_bf16 ? (const uint8_t *)p->rows_bf16
                              : (const uint8_t *)p->rows,
        .row_bytes = native_i8     ? PROBE_DIM
                     : native_bf16 ? PROBE_DIM * 2
                                   : PROBE_DIM * sizeof(float),
        .nr = LDS__PANEL,
        .dim = PROBE_DIM,
        .dtype = native_i8 ? LDS_DTYPE_I8 : native_bf16 ? LDS_DTYPE_BF16 : LDS_DTYPE_F32,
        .scale = 1.0f / 127.0f,
        .thr = p->thr,
        .out = p->out,
        .mask = p->mask,
        .panel = p->panel,
        .qi = native_i8 ? p->qi : NULL,
        .qistride = LDS__I8_PAIRS(PROBE_DIM),
        .qc = native_i8 ? p->qc : NULL,
        .qb = native_bf16 ? p->qb : NULL,
        .qbstride = LDS__BF16_PAIRS(PROBE_DIM),
    };
    double t0 = thread_cpu_ns();
    a.nq = 1;
    for (int r = 0; r < 8; r++)
        k->block(&a);
    a.nq = PROBE_Q;
    for (int r = 0; r < 4; r++)
        k->block(&a);
    return thread_cpu_ns() - t0;
}

/* The fastest of the fused (SIMD) kernels this CPU runs for one class, by the
   least thread CPU time of PROBE_ROUNDS interleaved rounds; generic only where no
   SIMD kernel runs. times[i] gets kernel i's least time in ns (0: not probed). */
static const lds__kernel *probe_class(int cls, probe_data *p, double *times)
{
    for (size_t i = 0; i < KERNEL_COUNT; i++)
        times[i] = 0.0;
    for (int round = 0; round < PROBE_ROUNDS; round++)
        for (size_t n = 0; n < KERNEL_COUNT; n++) {
            size_t i = (n + (size_t)round) % KERNEL_COUNT; /* rotate the order */
            if (!kernel_list[i]->fused || !lds__search_kernel_runs(i))
                continue;
            double ns = probe_once(kernel_list[i], cls, p);
            if (times[i] == 0.0 || ns < times[i])
                times[i] = ns;
        }
    const lds__kernel *best = &lds__kernel_generic;
    double best_ns = 0.0;
    for (size_t i = 0; i < KERNEL_COUNT; i++)
        if (times[i] > 0.0 && (best_ns == 0.0 || times[i] < best_ns))
            best = kernel_list[i], best_ns = times[i];
    return best;
}

double lds__search_kernel_probe(int cls, double *times, size_t cap)
{
    probe_data *p = (probe_data *)aligned_alloc(64, sizeof(probe_data));
    if (!p)
        return -1.0;
    probe_fill(p);
    double t[KERNEL_COUNT];
    const lds__kernel *k = probe_class(cls, p, t);
    free(p);
    for (size_t i = 0; i < cap && i < KERNEL_COUNT; i++)
        times[i] = t[i];
    for (size_t i = 0; i < KERNEL_COUNT; i++)
        if (kernel_list[i] == k)
            return (double)i;
    return -1.0;
}

double lds__search_probe_cost_ms(void)
{
    return probe_cost_ms;
}

size_t lds__search_probe_times(int cls, double *times, size_t cap)
{
    pthread_once(&kernel_once, kernel_init);
    for (size_t i = 0; i < cap && i < KERNEL_COUNT; i++)
        times[i] = cls >= 0 && cls < NCLASS ? auto_times[cls][i] : 0.0;
    return KERNEL_COUNT;
}

/* The environment is read once: LDS_SEARCH_KERNEL names a kernel; an unknown
   or unrunnable name warns once on stderr and the automatic choice applies.
   The automatic choice is measured here, once per process (ADR 0054). */
static void kernel_init(void)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    probe_data *p = (probe_data *)aligned_alloc(64, sizeof(probe_data));
    double times[KERNEL_COUNT];
    for (int c = 0; c < NCLASS; c++) {
        auto_kernel[c] = NULL;
        if (p) {
            if (c == 0)
                probe_fill(p);
            auto_kernel[c] = probe_class(c, p, times);
            for (size_t i = 0; i < KERNEL_COUNT; i++)
                auto_times[c][i] = times[i];
        }
        if (!auto_kernel[c]) /* no memory for the probe: the first kernel that runs */
            for (size_t i = KERNEL_COUNT; i-- > 0;)
                if (lds__search_kernel_runs(i))
                    auto_kernel[c] = kernel_list[i];
    }
    free(p);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    probe_cost_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;

    const lds__kernel *k = NULL;
    const char *env = getenv("LDS_SEARCH_KERNEL");
    if (env && *env) {
        k = kernel_named(env);
        if (!k) {
            fprintf(stderr, "lodestar: LDS_SEARCH_KERNEL=%s is not a kernel this CPU runs (", env);
            for (size_t i = 0; i < KERNEL_COUNT; i++)
                if (lds__search_kernel_runs(i))
                    fprintf(stderr, "%s%s", i ? ", " : "", kernel_list[i]->name);
            fprintf(stderr, "); using the automatic choice\n");
        }
    }
    for (int c = 0; c < NCLASS; c++)
        atomic_store(&current_kernel[c], k ? k : auto_kernel[c]);
}

const lds__kernel *lds__search_kernel_for(int cls)
{
    pthread_once(&kernel_once, kernel_init);
    return atomic_load_explicit(&current_kernel[cls >= 0 && cls < NCLASS ? cls : 0],
                                memory_order_relaxed);
}

const lds__kernel *lds__search_kernel(void)
{
    return lds__search_kernel_for(LDS__CLASS_F32);
}

size_t lds_search_kernels(const char **names, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < KERNEL_COUNT; i++)
        if (lds__search_kernel_runs(i)) {
            if (names && n < cap)
                names[n] = kernel_list[i]->name;
            n++;
        }
    return n;
}

bool lds__search_kernel_force(const char *name)
{
    pthread_once(&kernel_once, kernel_init);
    const lds__kernel *k = name ? kernel_named(name) : NULL;
    if (name && !k)
        return false;
    for (int c = 0; c < NCLASS; c++)
        atomic_store(&current_kernel[c], k ? k : auto_kernel[c]);
    return true;
}

/* ==== native i8 queries (ADR 0043) ====================================== */

uint32_t lds__i8_qmax(uint32_t dim)
{
    /* Every partial sum of |Q_d R_d| (|R_d| <= 128) stays below 2^31. */
    uint64_t m = (uint64_t)INT32_MAX / (128u * (uint64_t)(dim ? dim : 1));
    return m > 32767 ? 32767u : (uint32_t)m;
}

double lds__i8_quantize(const float *q, uint32_t dim, int32_t *pairs)
{
    const uint32_t qmax = lds__i8_qmax(dim);
    float amax = 0.0f;
    for (uint32_t d = 0; d < dim; d++)
        amax = fabsf(q[d]) > amax ? fabsf(q[d]) : amax;
    const double qscale = amax > 0.0f && qmax > 0 ? (double)amax / qmax : 0.0;
    const size_t np = LDS__I8_PAIRS(dim);
    for (size_t c = 0; c < np / 2; c++) {
        int32_t v[4];
        for (uint32_t b = 0; b < 4; b++) {
            size_t d = 4 * c + b;
            double x = d < dim && qscale > 0.0 ? nearbyint((double)q[d] / qscale) : 0.0;
            x = x > qmax ? qmax : x < -(double)qmax ? -(double)qmax : x;
            v[b] = (int32_t)x;
        }
        pairs[2 * c] = (int32_t)((uint32_t)(uint16_t)v[0] | (uint32_t)(uint16_t)v[2] << 16);
        pairs[2 * c + 1] = (int32_t)((uint32_t)(uint16_t)v[1] | (uint32_t)(uint16_t)v[3] << 16);
    }
    return qscale;
}

/* ==== native bf16 queries (ADR 0056) ==================================== */

bool lds__bf16_query(float *q, size_t nq, uint32_t dim, size_t qs, uint32_t *qb, size_t qbs)
{
    bool exotic = false;
    for (size_t j = 0; j < nq; j++) {
        float *x = q + j * qs;
        uint32_t *w = qb + j * qbs;
        for (size_t p = 0; p < LDS__BF16_PAIRS(dim); p++)
            w[p] = 0;
        for (uint32_t d = 0; d < dim; d++) {
            const uint16_t b = lds__bf16_round(x[d]);
            exotic |= lds__bf16_exotic(b);
            w[d / 2] |= (uint32_t)b << (16 * (d & 1));
            x[d] = lds__bits_f32((uint32_t)b << 16);
        }
    }
    return exotic;
}

/* ==== cosine norms ======================================================= */

/* One lock for every index's one-time build: builds are rare and short. */
static pthread_mutex_t norm_lock = PTHREAD_MUTEX_INITIALIZER;

/* The cosine scale table: inv[r] = 2^s / |row r| in double for every row (0 for a zero row
   or an infinite norm, NaN for a row holding NaN), |row| summed in double from the exact
   f32 values; then inv[rows] = 2^-s, the factor the unit query is scaled by.

   The kernels sum row x unit query in float32, a sum bounded by |row|: a row longer than
   float32's range (3e38s: |row| up to sqrt(dim) x FLT_MAX) made that sum +-inf, and its
   cosine too (found by a tester). So when the longest finite row passes 2^126 the query is
   scaled down by the power of two s that brings it under, and the row's factor up by as
   much: exact in binary arithmetic, the same for every kernel and dtype (the bf16 query
   and the i8 quantization take the scaled query), and s = 0, nothing changed, for any
   index whose rows fit (every one before this). */
#define LDS__NORM_ROOM 126 /* |row| x 2^-s <= 2^126: two binades below FLT_MAX */

static double *build_inv_norms(const lds_index *idx)
{
    if (idx->rows > SIZE_MAX / sizeof(double) - 1)
        return NULL;
    double *inv = (double *)malloc((size_t)(idx->rows + 1) * sizeof(double));
    float *row = (float *)malloc((size_t)idx->dim * sizeof(float));
    if (!inv || !row) {
        free(inv);
        free(row);
        return NULL;
    }
    double longest = 0.0;
    for (uint64_t r = 0; r < idx->rows; r++) {
        lds__row_to_f32(idx->vectors + r * idx->row_bytes, idx->dtype, idx->i8_scale, idx->dim,
                        row);
        double s[4] = {0, 0, 0, 0};
        uint32_t i = 0;
        for (; i + 4 <= idx->dim; i += 4)
            for (int l = 0; l < 4; l++)
                s[l] += (double)row[i + (uint32_t)l] * row[i + (uint32_t)l];
        for (; i < idx->dim; i++)
            s[0] += (double)row[i] * row[i];
        double n = sqrt((s[0] + s[1]) + (s[2] + s[3]));
        inv[r] = n == 0.0 ? 0.0 : 1.0 / n;
        if (isfinite(n) && n > longest)
            longest = n;
    }
    free(row);
    int e = 0;
    frexp(longest, &e); /* longest < 2^e */
    int shift = e > LDS__NORM_ROOM ? e - LDS__NORM_ROOM : 0;
    if (shift > 0)
        for (uint64_t r = 0; r < idx->rows; r++)
            inv[r] = ldexp(inv[r], shift);
    inv[idx->rows] = ldexp(1.0, -shift);
    return inv;
}

/* The index's inverse norms, built by the first caller (others wait). */
static const double *inv_norms(const lds_index *cidx)
{
    lds_index *idx = (lds_index *)cidx; /* the lazily built table mutates a const index */
    double *inv = atomic_load_explicit(&idx->inv_norms, memory_order_acquire);
    if (inv)
        return inv;
    pthread_mutex_lock(&norm_lock);
    inv = atomic_load_explicit(&idx->inv_norms, memory_order_relaxed);
    if (!inv) {
        inv = build_inv_norms(idx);
        atomic_store_explicit(&idx->inv_norms, inv, memory_order_release);
    }
    pthread_mutex_unlock(&norm_lock);
    return inv;
}

/* ==== top-k ============================================================== */

/* Whether hit `a` ranks after hit `b`: NaN last, then by score, then by row. */
static inline bool ranks_after(const lds_hit *a, const lds_hit *b, bool lower_better)
{
    bool an = isnan(a->score), bn = isnan(b->score);
    if (an != bn)
        return an;
    if (!an && a->score != b->score)
        return lower_better ? a->score > b->score : a->score < b->score;
    return a->row > b->row;
}

/* The heap keeps the hit that ranks last at its root. */
static void sift_down(lds_hit *h, size_t n, size_t i, bool lower_better)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && ranks_after(&h[l], &h[m], lower_better))
            m = l;
        if (r < n && ranks_after(&h[r], &h[m], lower_better))
            m = r;
        if (m == i)
            return;
        lds_hit t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void sift_up(lds_hit *h, size_t i, bool lower_better)
{
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!ranks_after(&h[i], &h[parent], lower_better))
            return;
        lds_hit t = h[i];
        h[i] = h[parent];
        h[parent] = t;
        i = parent;
    }
}

/* Offers `c` to the heap h[0, *n) of capacity `want`. */
static inline void heap_offer(lds_hit *h, size_t *n, size_t want, lds_hit c, bool lower)
{
    if (*n < want) {
        h[*n] = c;
        sift_up(h, *n, lower);
        (*n)++;
    } else if (ranks_after(&h[0], &c, lower)) {
        h[0] = c;
        sift_down(h, *n, 0, lower);
    }
}

/* Sorts the heap h[0, n) best first. */
static void heap_sort(lds_hit *h, size_t n, bool lower)
{
    for (size_t end = n; end > 1; end--) {
        lds_hit t = h[0];
        h[0] = h[end - 1];
        h[end - 1] = t;
        sift_down(h, end - 1, 0, lower);
    }
}

/* ==== the scan =========================================================== */

/* One thread's share: rows [r0, r1) against the queries of one chunk. */
typedef struct scan_job {
    const lds_index *idx;
    const lds__kernel *kernel;
    const float *q; /* nq x qs */
    size_t qs, nq;
    const double *inv; /* cosine: 1 / |row|, else NULL */
    uint64_t r0, r1;
    size_t want;
    bool lower, l2;
    lds_hit *heaps;  /* nq x want */
    size_t *counts;  /* nq */
    float *scores;   /* nq x LDS__PANEL */
    uint64_t *masks; /* nq */
    float *thr;      /* nq */
    float *panel;    /* LDS__PANEL x (dim + 4), 64-byte aligned */
    const int32_t *qi; /* native i8: nq x LDS__I8_PAIRS(dim), else NULL */
    const double *qc;  /* native i8: nq */
    const uint32_t *qb; /* native bf16: nq x LDS__BF16_PAIRS(dim), else NULL */
    bool qb_exotic;
} scan_job;

static void scan(scan_job *jb)
{
    const lds_index *idx = jb->idx;
    const bool lower = jb->lower;
    for (size_t j = 0; j < jb->nq; j++) {
        jb->counts[j] = 0;
        jb->thr[j] = NAN;
    }
    double inv_pad[LDS__PANEL];
    lds__block_args a = {
        .q = jb->q,
        .qstride = jb->qs,
        .nq = jb->nq,
        .row_bytes = idx->row_bytes,
        .dim = idx->dim,
        .dtype = idx->dtype,
        .scale = idx->i8_scale,
        .l2 = jb->l2,
        .lower = lower,
        .thr = jb->thr,
        .out = jb->scores,
        .mask = jb->masks,
        .panel = jb->panel,
        .qi = jb->qi,
        .qistride = LDS__I8_PAIRS(idx->dim),
        .qc = jb->qc,
        .qb = jb->qb,
        .qbstride = LDS__BF16_PAIRS(idx->dim),
        .qb_exotic = jb->qb_exotic,
    };
    for (uint64_t b = jb->r0; b < jb->r1; b += LDS__PANEL) {
        size_t nr = (size_t)(jb->r1 - b < LDS__PANEL ? jb->r1 - b : LDS__PANEL);
        a.rows = idx->vectors + b * idx->row_bytes;
        a.nr = nr;
        a.inv = NULL;
        if (jb->inv) {
            a.inv = jb->inv + b;
            if (nr < LDS__PANEL) { /* the kernel reads whole vectors of rows */
                memset(inv_pad, 0, sizeof inv_pad);
                memcpy(inv_pad, jb->inv + b, nr * sizeof(double));
                a.inv = inv_pad;
            }
        }
        jb->kernel->block(&a);
        for (size_t j = 0; j < jb->nq; j++) {
            uint64_t m = jb->masks[j];
            if (!m)
                continue;
            const float *s = jb->scores + j * LDS__PANEL;
            lds_hit *h = jb->heaps + j * jb->want;
            size_t n = jb->counts[j];
            do {
                unsigned i = (unsigned)__builtin_ctzll(m);
                m &= m - 1;
                /* Rows arrive in increasing order, so once the heap is full a
                   score that is not strictly better (NaN included) loses. */
                if (n == jb->want && !isnan(h[0].score) &&
                    !(lower ? s[i] < h[0].score : s[i] > h[0].score))
                    continue;
                heap_offer(h, &n, jb->want, (lds_hit){b + i, s[i]}, lower);
            } while (m);
            jb->counts[j] = n;
            /* The kernel's filter: only scores better than the root may enter. */
            jb->thr[j] = n == jb->want && !isnan(h[0].score) ? h[0].score : NAN;
        }
    }
}

static void *scan_thread(void *p)
{
    scan(p);
    return NULL;
}

static unsigned online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1u : n > 256 ? 256u : (unsigned)n;
}

void lds_search_options_default(lds_search_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->threads = 0;
}

/* Scanned elements (rows x dim x queries) each thread must have at least: when the
   caller asks for threads, and when it leaves the count to us (threads = 0). Starting a
   thread costs tens of microseconds on an idle machine and milliseconds on a loaded one
   (compare_faiss.py extras, ADR 0015), so the automatic count wants ~8 Mi elements each. */
#define WORK_PER_THREAD      ((uint64_t)1 << 16)
#define WORK_PER_AUTO_THREAD ((uint64_t)1 << 23)
/* Cap on the hits of the per-thread heaps of one query chunk, all threads together. */
#define HEAP_HITS_CAP ((size_t)1 << 22)

static lds_status search_impl(const char *fn, const lds_index *idx, const float *queries, size_t nq,
                              size_t dim, size_t k, const lds_search_options *opts, lds_hit *hits,
                              size_t *n_hits, lds_error *err)
{
    if (!idx || (nq > 0 && (!queries || !n_hits || (!hits && k > 0))))
        return lds__fail(err, LDS_E_INVALID_ARG, NULL, 0, "%s: NULL argument", fn);
    lds_search_options o;
    lds_search_options_default(&o);
    if (opts) {
        if (opts->size < LDS_SEARCH_OPTIONS_MIN_SIZE || opts->size > sizeof o)
            return lds__fail(err, LDS_E_INVALID_ARG, "lds_search_options.size", 0,
                             "%s: lds_search_options.size is %zu, not %zu to %zu", fn, opts->size,
                             (size_t)LDS_SEARCH_OPTIONS_MIN_SIZE, sizeof o);
        memcpy(&o, opts, opts->size);
    }
    if (dim != idx->dim)
        return lds__fail(err, LDS_E_INVALID_ARG, NULL, 0,
                         "%s: the query has %zu elements, the index %u", fn, dim,
                         (unsigned)idx->dim);
    size_t total;
    if (__builtin_mul_overflow(nq, k, &total) || __builtin_mul_overflow(nq, dim, &total))
        return lds__fail(err, LDS_E_INVALID_ARG, NULL, 0, "%s: nq x k or nq x dim overflows", fn);
    const bool cosine = idx->metric == LDS_METRIC_COSINE;
    for (size_t j = 0; j < nq; j++) {
        double qq = 0.0;
        for (size_t i = 0; i < dim; i++) {
            float x = queries[j * dim + i];
            if (!isfinite(x)) {
                if (nq == 1)
                    return lds__fail(err, LDS_E_BAD_VALUE, NULL, 0,
                                     "query element %zu is not finite", i);
                return lds__fail(err, LDS_E_BAD_VALUE, NULL, 0,
                                 "query %zu element %zu is not finite", j, i);
            }
            qq += (double)x * x;
        }
        if (cosine && qq == 0.0) {
            if (nq == 1)
                return lds__fail(err, LDS_E_BAD_VALUE, NULL, 0,
                                 "a zero query has no cosine similarity");
            return lds__fail(err, LDS_E_BAD_VALUE, NULL, 0,
                             "query %zu is zero, which has no cosine similarity", j);
        }
    }
    /* i8 under dot and cosine: the integer kernels (ADR 0043); bf16 under dot and
       cosine: vdpbf16ps's arithmetic with the query rounded to bf16 (ADR 0056). */
    const bool native_i8 = idx->dtype == LDS_DTYPE_I8 && idx->metric != LDS_METRIC_L2 &&
                           lds__i8_qmax((uint32_t)dim) > 0;
    const bool native_bf16 = idx->dtype == LDS_DTYPE_BF16 && idx->metric != LDS_METRIC_L2;
    const lds__kernel *kern = lds__search_kernel_for(
        native_i8 ? LDS__CLASS_I8 : native_bf16 ? LDS__CLASS_BF16 : LDS__CLASS_F32);
    if (opts && opts->size >= offsetof(lds_search_options, kernel) + sizeof(const char *) &&
        o.kernel && *o.kernel && !(kern = kernel_named(o.kernel)))
        return lds__fail(err, LDS_E_UNSUPPORTED, "lds_search_options.kernel", 0,
                         "%s: lds_search_options.kernel \"%s\" is not a kernel this CPU runs "
                         "(lds_search_kernels lists them)",
                         fn, o.kernel);
    const size_t want = k < idx->rows ? k : (size_t)idx->rows;
    if (want == 0) {
        for (size_t j = 0; j < nq; j++)
            n_hits[j] = 0;
        return LDS_OK;
    }
    const double *inv = NULL;
    if (cosine && !(inv = inv_norms(idx)))
        return lds__fail(err, LDS_E_NOMEM, NULL, 0, "%s: no memory for the row norms", fn);

    /* Query chunks bound the heaps and keep the chunk's queries in L2 (128 KiB,
       up to 256 queries) while each packed block of rows is scored against all of
       them; threads split the rows of each chunk. */
    size_t qc_max = (size_t)131072 / ((size_t)dim * sizeof(float));
    qc_max = qc_max < 1 ? 1 : qc_max > 256 ? 256 : qc_max;
    size_t qc = nq < qc_max ? nq : qc_max;
    while (qc > 1 && qc * want > HEAP_HITS_CAP / 4)
        qc /= 2;
    uint64_t work = idx->rows * (uint64_t)dim * qc;
    unsigned t = o.threads ? o.threads : online_cores();
    if (t > 64)
        t = 64;
    uint64_t min_work = o.threads ? WORK_PER_THREAD : WORK_PER_AUTO_THREAD;
    if ((uint64_t)t > work / min_work)
        t = (unsigned)(work / min_work > 0 ? work / min_work : 1);
    if ((uint64_t)t > idx->rows / 4)
        t = (unsigned)(idx->rows / 4 > 0 ? idx->rows / 4 : 1);
    if (t > 1 && (size_t)t * qc * want > HEAP_HITS_CAP)
        t = (unsigned)(HEAP_HITS_CAP / (qc * want) > 0 ? HEAP_HITS_CAP / (qc * want) : 1);

    const size_t qs = dim;
    /* A multiple of 16 floats (64-byte panels), room for the native i8 pairs too. */
    const size_t panel_floats = (size_t)LDS__PANEL * (dim + 4);
    const size_t npairs = LDS__I8_PAIRS(dim), nbpairs = LDS__BF16_PAIRS(dim);
    float *qbuf = (float *)malloc(qc * qs * sizeof(float));
    int32_t *qibuf = native_i8 ? (int32_t *)malloc(qc * npairs * sizeof(int32_t)) : NULL;
    double *qcbuf = native_i8 ? (double *)malloc(qc * sizeof(double)) : NULL;
    uint32_t *qbbuf = native_bf16 ? (uint32_t *)malloc(qc * nbpairs * sizeof(uint32_t)) : NULL;
    lds_hit *heaps = (lds_hit *)malloc((size_t)t * qc * want * sizeof(lds_hit));
    size_t *counts = (size_t *)malloc((size_t)t * qc * sizeof(size_t));
    float *sbuf = (float *)malloc((size_t)t * qc * (LDS__PANEL + 1) * sizeof(float));
    uint64_t *masks = (uint64_t *)malloc((size_t)t * qc * sizeof(uint64_t));
    float *panels = (float *)aligned_alloc(64, (size_t)t * panel_floats * sizeof(float));
    scan_job *jobs = (scan_job *)malloc(t * sizeof(scan_job));
    pthread_t *tids = (pthread_t *)malloc(t * sizeof(pthread_t));
    bool *started = (bool *)malloc(t * sizeof(bool));
    if (!qbuf || !heaps || !counts || !sbuf || !masks || !panels || !jobs || !tids || !started ||
        (native_i8 && (!qibuf || !qcbuf)) || (native_bf16 && !qbbuf)) {
        free(qbuf);
        free(qbbuf);
        free(qibuf);
        free(qcbuf);
        free(heaps);
        free(counts);
        free(sbuf);
        free(masks);
        free(panels);
        free(jobs);
        free(tids);
        free(started);
        return lds__fail(err, LDS_E_NOMEM, NULL, 0, "%s: no memory", fn);
    }
    const bool lower = idx->metric == LDS_METRIC_L2;
    for (size_t j0 = 0; j0 < nq; j0 += qc) {
        size_t n = nq - j0 < qc ? nq - j0 : qc;
        bool qb_exotic = false;
        for (size_t j = 0; j < n; j++) {
            const float *src = queries + (j0 + j) * dim;
            float *dst = qbuf + j * qs;
            if (cosine) {
                /* The query is scaled to unit length (times inv[rows], 2^-s: see
                   build_inv_norms), so the kernel's sum is bounded by |row| 2^-s and a
                   cosine is that sum times 2^s / |row|. */
                double qq = 0.0;
                for (size_t i = 0; i < dim; i++)
                    qq += (double)src[i] * src[i];
                double s = inv[idx->rows] / sqrt(qq);
                for (size_t i = 0; i < dim; i++)
                    dst[i] = (float)(src[i] * s);
            } else {
                memcpy(dst, src, dim * sizeof(float));
            }
            if (native_i8)
                qcbuf[j] = lds__i8_quantize(dst, (uint32_t)dim, qibuf + j * npairs) *
                           (double)idx->i8_scale;
            if (native_bf16)
                qb_exotic |=
                    lds__bf16_query(dst, 1, (uint32_t)dim, qs, qbbuf + j * nbpairs, nbpairs);
        }
        uint64_t per = (idx->rows + t - 1) / t;
        per = (per + LDS__PANEL - 1) & ~(uint64_t)(LDS__PANEL - 1);
        for (unsigned w = 0; w < t; w++) {
            uint64_t r0 = per * w < idx->rows ? per * w : idx->rows;
            uint64_t r1 = per * (w + 1) < idx->rows ? per * (w + 1) : idx->rows;
            jobs[w] = (scan_job){
                .idx = idx,
                .kernel = kern,
                .q = qbuf,
                .qs = qs,
                .nq = n,
                .inv = inv,
                .r0 = r0,
                .r1 = r1,
                .want = want,
                .lower = lower,
                .l2 = idx->metric == LDS_METRIC_L2,
                .heaps = heaps + (size_t)w * qc * want,
                .counts = counts + (size_t)w * qc,
                .scores = sbuf + (size_t)w * qc * (LDS__PANEL + 1),
                .masks = masks + (size_t)w * qc,
                .thr = sbuf + (size_t)w * qc * (LDS__PANEL + 1) + qc * LDS__PANEL,
                .panel = panels + (size_t)w * panel_floats,
                .qi = qibuf,
                .qc = qcbuf,
                .qb = qbbuf,
                .qb_exotic = qb_exotic,
            };
        }
        for (unsigned w = 1; w < t; w++)
            started[w] = pthread_create(&tids[w], NULL, scan_thread, &jobs[w]) == 0;
        scan(&jobs[0]);
        for (unsigned w = 1; w < t; w++) {
            if (started[w])
                pthread_join(tids[w], NULL);
            else
                scan(&jobs[w]); /* no thread: the same share, here */
        }
        /* Merge: the top `want` of the union of the threads' top `want`s under
           the strict order (NaN last, score, row) is the same set whatever the
           split, and the final sort makes the order the same too. */
        for (size_t j = 0; j < n; j++) {
            lds_hit *out = hits + (j0 + j) * k;
            size_t m = 0;
            for (unsigned w = 0; w < t; w++) {
                const lds_hit *h = jobs[w].heaps + j * want;
                for (size_t i = 0; i < jobs[w].counts[j]; i++)
                    heap_offer(out, &m, want, h[i], lower);
            }
            heap_sort(out, m, lower);
            n_hits[j0 + j] = m;
        }
    }
    free(qbuf);
    free(qibuf);
    free(qcbuf);
    free(qbbuf);
    free(heaps);
    free(counts);
    free(sbuf);
    free(masks);
    free(panels);
    free(jobs);
    free(tids);
    free(started);
    return LDS_OK;
}

lds_status lds_index_search(const lds_index *idx, const float *query, size_t dim, size_t k,
                            lds_hit *hits, size_t *n_hits, lds_error *err)
{
    if (!n_hits)
        return lds__fail(err, LDS_E_INVALID_ARG, NULL, 0, "lds_index_search: NULL argument");
    return search_impl("lds_index_search", idx, query, 1, dim, k, NULL, hits, n_hits, err);
}

lds_status lds_index_search_batch(const lds_index *idx, const float *queries, size_t nq, size_t dim,
                                  size_t k, const lds_search_options *opts, lds_hit *hits,
                                  size_t *n_hits, lds_error *err)
{
    return search_impl("lds_index_search_batch", idx, queries, nq, dim, k, opts, hits, n_hits, err);
}
