/* Internal interface of the search kernels (search.c and kernels_*.c; not installed). */
#ifndef LDS_SEARCH_INTERNAL_H
#define LDS_SEARCH_INTERNAL_H

#include "lodestar_core.h"
#include "lodestar_index.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Rows per block: a kernel packs up to this many rows at a time (bits of a uint64_t). */
#define LDS__PANEL 64

/*
 * One call of a kernel: the scores of `nq` queries against `nr` (1 to
 * LDS__PANEL) consecutive stored rows, and which of them may enter each
 * query's top-k.
 * - q: query j is q[j * qstride, j * qstride + dim) (f32, any alignment;
 *   scaled to unit length under cosine).
 * - rows: row i is rows + i * row_bytes (any alignment), `dim` elements of
 *   `dtype`, each converted exactly as lds__row_to_f32 does (i8: i8 * scale).
 * - l2: sum of (q - r)^2, else sum of q * r.
 * - inv: NULL, or (cosine) inv[0, ceil(nr / lanes) * lanes): each score is
 *   multiplied by inv[i] in double and rounded to f32 once.
 * - thr[j], lower: lane i is a candidate of query j when its score is better
 *   than thr[j] (lower: score < thr[j], else score > thr[j]; a NaN score never
 *   is) or when thr[j] is NaN (take every row).
 * - out[j * LDS__PANEL + i]: the scores; mask[j]: bit i set when row i is a
 *   candidate of query j (rows past nr never are).
 * - panel: scratch of LDS__PANEL x dim floats, 64-byte aligned.
 *
 * Every (query, row) pair is the sequential sum over d = 0 .. dim - 1 in that
 * order (a * b + acc, fused where the kernel is), whatever nq and nr are, so
 * one-at-a-time, batched and threaded searches agree to the bit; the fused
 * kernels (avx2, avx512) agree with each other too. ADR 0032.
 */
typedef struct lds__block_args {
    const float *q;
    size_t qstride, nq;
    const uint8_t *rows;
    size_t row_bytes, nr;
    uint32_t dim;
    lds_dtype dtype;
    float scale;
    bool l2, lower;
    const double *inv;
    const float *thr;
    float *out;
    uint64_t *mask;
    float *panel;
    /* i8 rows under dot or cosine (ADR 0043): NULL, or the queries quantized to
       int16 (lds__i8_quantize), query j at qi + j * qistride as LDS__I8_PAIRS(dim)
       dwords, and qc[j] = its qscale x the index's i8 scale. Then every score is
       (float)((double)S * qc[j]) (cosine: (float)(((double)S * qc[j]) * inv[i]))
       with S the exact integer sum of Q_d x R_d, and q, scale are not read. The
       panel then holds the rows as int16 pairs (LDS__I8_PAIRS(dim) x LDS__PANEL
       dwords). */
    const int32_t *qi;
    size_t qistride;
    const double *qc;
    /* bf16 rows under dot and cosine (ADR 0056): NULL, or the queries rounded to
       bf16 (lds__bf16_round), query j at qb + j * qbstride as LDS__BF16_PAIRS(dim)
       dwords, dword p = element 2p in the low half, 2p + 1 in the high half (0 past
       dim); q then holds the same rounded values as f32. Every (query, row) pair is
       the chain of lds__bf16_step over p = 0, 1, ... (vdpbf16ps's arithmetic), in
       every kernel. qb_exotic: some query element lies outside the fast range
       (lds__bf16_exotic). */
    const uint32_t *qb;
    size_t qbstride;
    bool qb_exotic;
} lds__block_args;

/* Dwords of a bf16 query or row: (dim + 1) / 2. */
#define LDS__BF16_PAIRS(dim) (((size_t)(dim) + 1) / 2)

/* f32 -> bf16, round to nearest, ties to even (NaN stays a quiet NaN). */
static inline uint16_t lds__bf16_round(float x)
{
    uint32_t u;
    __builtin_memcpy(&u, &x, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* Whether a bf16 value is outside the range where the kernels without
   AVX512_BF16 may skip vdpbf16ps's flushing: a denormal, inf or NaN, or a nonzero
   magnitude below 2^-50 or at or above 2^61 (exponent field outside [77, 187]).
   Inside it every product is exact in f32 and every nonzero partial sum is at
   least 2^-114 in magnitude, so a plain multiply-add chain (fused or not) gives
   vdpbf16ps's bits (ADR 0056). */
static inline bool lds__bf16_exotic(uint16_t b)
{
    const unsigned e = (b >> 7) & 0xFFu;
    return e == 0 ? (b & 0x7Fu) != 0 : (e < 77 || e > 187);
}

/* The f32 value of a bf16 with denormals as zero of the same sign (vdpbf16ps's
   DAZ on its inputs). */
static inline float lds__bf16_daz(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    if ((u & 0x7F800000u) == 0)
        u &= 0x80000000u;
    float x;
    __builtin_memcpy(&x, &u, 4);
    return x;
}

/* One fused step of vdpbf16ps as this library defines it (and as the CPU was
   tested to compute it, tests/test_format.c): acc (denormal as zero) + a * b with a single
   rounding to nearest even, a and b bf16 with denormals as zero, and a result
   that is below 2^-126 in magnitude after rounding to 24 bits with an unbounded
   exponent (x86's tininess after rounding) flushed to zero of its sign. */
static inline float lds__bf16_fma_ftz(float acc, float a, float b)
{
    uint32_t ua;
    __builtin_memcpy(&ua, &acc, 4);
    if ((ua & 0x7F800000u) == 0) { /* DAZ on the accumulator too */
        ua &= 0x80000000u;
        __builtin_memcpy(&acc, &ua, 4);
    }
    const double p = (double)a * (double)b; /* exact: two 8-bit significands */
    float r = __builtin_fmaf(a, b, acc);
    uint32_t u;
    __builtin_memcpy(&u, &r, 4);
    const uint32_t mag = u & 0x7FFFFFFFu;
    if (mag < 0x00800000u) {
        u &= 0x80000000u;
    } else if (mag == 0x00800000u) {
        /* Tininess after rounding to 24 bits with an unbounded exponent: the
           result stays 2^-126 when the exact sum is at least 2^-126 - 2^-151
           (the tie goes to 2^-126, the even one); fmaf rounds to the denormal
           grid instead. The exact sum is s + e (TwoSum, all exact in double). */
        const double s = (double)acc + p, bb = s - (double)acc;
        const double e = ((double)acc - (s - bb)) + (p - bb);
        const double d = __builtin_fabs(s) - (0x1p-126 - 0x1p-151), ee = s < 0.0 ? -e : e;
        if (d < -ee)
            u &= 0x80000000u;
    }
    __builtin_memcpy(&r, &u, 4);
    return r;
}

/* acc + the products of one dword of pairs: the high (odd) element first, then
   the low one, each a step of lds__bf16_fma_ftz (Intel SDM, VDPBF16PS). */
static inline float lds__bf16_step(float acc, uint32_t r, uint32_t q)
{
    acc = lds__bf16_fma_ftz(acc, lds__bf16_daz((uint16_t)(r >> 16)),
                            lds__bf16_daz((uint16_t)(q >> 16)));
    return lds__bf16_fma_ftz(acc, lds__bf16_daz((uint16_t)r), lds__bf16_daz((uint16_t)q));
}

/* The kernels' transposer mode for raw bytes (the native i8 path's quads). */
#define LDS__DT_RAW ((lds_dtype)0x52)

/* Dwords of a quantized query: quad c (elements 4c .. 4c + 3) is the int16 pair
   (Q[4c], Q[4c + 2]) in dword 2c (low half first) and (Q[4c + 1], Q[4c + 3]) in
   dword 2c + 1; elements past dim are zero. */
#define LDS__I8_PAIRS(dim) (2 * (((size_t)(dim) + 3) / 4))

/* The largest |Q_d| for an i8 index of `dim` elements: 32767, or less where
   dim x 128 x 32767 would overflow int32 (dim > 512), so that every partial
   sum of an int32 accumulator is exact; 0 past dim 2^24 / 2^7 (no native path). */
uint32_t lds__i8_qmax(uint32_t dim);

/* Quantizes the f32 query q[0, dim) for the native i8 kernels, in double:
   qscale = (double)max |q_d| / lds__i8_qmax(dim) (0 for a zero query),
   Q_d = (double)q_d / qscale rounded to nearest (ties to even) and clamped to
   [-qmax, qmax], written as LDS__I8_PAIRS(dim) dwords to `pairs`. Returns
   qscale (a double: lodestar_index.h states the same steps). */
double lds__i8_quantize(const float *q, uint32_t dim, int32_t *pairs);

typedef void lds__block_fn(const lds__block_args *a);

typedef struct lds__kernel {
    const char *name; /* "generic", "avx2", "avx512", "avx512vnni", "avx512bf16" */
    unsigned lanes;   /* rows per vector */
    bool fused;       /* multiply-add rounds once (FMA) */
    lds__block_fn *block;
} lds__kernel;

extern const lds__kernel lds__kernel_generic;
#if defined(LDS_HAVE_KERNEL_AVX2)
extern const lds__kernel lds__kernel_avx2;
#endif
#if defined(LDS_HAVE_KERNEL_AVX512)
extern const lds__kernel lds__kernel_avx512;
#endif
#if defined(LDS_HAVE_KERNEL_AVX512VNNI)
extern const lds__kernel lds__kernel_avx512vnni;
#endif
#if defined(LDS_HAVE_KERNEL_AVX512BF16)
extern const lds__kernel lds__kernel_avx512bf16;
/* acc[i] = vdpbf16ps(acc[i], a[i], b[i]) for i < n, on the CPU (tests only; call
   only where lds__search_kernel_runs says the avx512bf16 kernel runs). */
void lds__dpbf16_hw(float *acc, const uint32_t *a, const uint32_t *b, size_t n);
#endif

/* Rounds queries q[j * qs, j * qs + dim) (j < nq) to bf16 in place (each element
   replaced by its bf16 value as f32) and writes them as LDS__BF16_PAIRS(dim)
   dwords at qb + j * qbs. Returns whether any element is exotic
   (lds__bf16_exotic). ADR 0056. */
bool lds__bf16_query(float *q, size_t nq, uint32_t dim, size_t qs, uint32_t *qb, size_t qbs);

/* Classes of search, each with its own kernel choice (ADR 0054, 0056). */
#define LDS__CLASS_F32  0 /* f32, f16; bf16 and i8 under l2: the f32 chain */
#define LDS__CLASS_I8   1 /* i8 under dot and cosine (ADR 0043) */
#define LDS__CLASS_BF16 2 /* bf16 under dot and cosine (ADR 0056) */

/* The kernels built into this library, best first, and whether this CPU runs
   kernel i. */
size_t lds__search_kernel_count(void);
const lds__kernel *lds__search_kernel_at(size_t i);
bool lds__search_kernel_runs(size_t i);

/* Forces the kernel named `name` for every later search in the process (NULL:
   back to the automatic choice). Returns false, changing nothing, if no such
   kernel is built or this CPU cannot run it. For tests and benchmarks; the
   environment variable LDS_SEARCH_KERNEL, read once, does the same. */
bool lds__search_kernel_force(const char *name);

/* The kernel searches use now: for the f32 chain (f32, f16, bf16, i8 under l2),
   and lds__search_kernel_for(cls) for a class (LDS__CLASS_*). The
   automatic choice is measured once per process at first use (ADR 0054): the
   fused kernel this CPU runs with the least thread CPU time on a probe in cache
   (lds__search_kernel_probe), per class; LDS_SEARCH_KERNEL or
   lds__search_kernel_force override it. Thread-safe. */
const lds__kernel *lds__search_kernel(void);
const lds__kernel *lds__search_kernel_for(int cls);

/* Runs the dispatcher's probe again for one class (LDS__CLASS_*):
   times[i] (i < cap) gets kernel i's least thread CPU time in ns over the probe's
   rounds (0 for a kernel not probed: generic, or one this CPU lacks). Returns the
   index of the fastest kernel, or -1 without memory. For tests and benchmarks. */
double lds__search_kernel_probe(int cls, double *times, size_t cap);

/* Wall milliseconds the first-use probe took in this process (0 before it ran). */
double lds__search_probe_cost_ms(void);

/* What the first-use probe measured for one class (running it if it has not run):
   times[i] (i < cap) gets kernel i's least thread CPU time in ns, 0 for a kernel not
   probed; the automatic choice is the kernel of the least nonzero time (generic when
   none). Returns the number of kernels. Thread-safe. */
size_t lds__search_probe_times(int cls, double *times, size_t cap);

#endif
