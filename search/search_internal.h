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
} lds__block_args;

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

/* Quantizes the f32 query q[0, dim) for the native i8 kernels: qscale =
   max |q_d| / lds__i8_qmax(dim) (0 for a zero query), Q_d = q_d / qscale
   rounded to nearest (ties to even), written as LDS__I8_PAIRS(dim) dwords to
   `pairs`. Returns qscale. */
double lds__i8_quantize(const float *q, uint32_t dim, int32_t *pairs);

typedef void lds__block_fn(const lds__block_args *a);

typedef struct lds__kernel {
    const char *name; /* "generic", "avx2", "avx512", "avx512vnni" */
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
   and lds__search_kernel_for(true) for native i8 (i8 under dot and cosine). The
   automatic choice is measured once per process at first use (ADR 0054): the
   fused kernel this CPU runs with the least thread CPU time on a probe in cache
   (lds__search_kernel_probe), per class; LDS_SEARCH_KERNEL or
   lds__search_kernel_force override it. Thread-safe. */
const lds__kernel *lds__search_kernel(void);
const lds__kernel *lds__search_kernel_for(bool native_i8);

/* Runs the dispatcher's probe again for one class (native i8 or the f32 chain):
   times[i] (i < cap) gets kernel i's least thread CPU time in ns over the probe's
   rounds (0 for a kernel not probed: generic, or one this CPU lacks). Returns the
   index of the fastest kernel, or -1 without memory. For tests and benchmarks. */
double lds__search_kernel_probe(bool native_i8, double *times, size_t cap);

/* Wall milliseconds the first-use probe took in this process (0 before it ran). */
double lds__search_probe_cost_ms(void);

/* What the first-use probe measured for one class (running it if it has not run):
   times[i] (i < cap) gets kernel i's least thread CPU time in ns, 0 for a kernel not
   probed; the automatic choice is the kernel of the least nonzero time (generic when
   none). Returns the number of kernels. Thread-safe. */
size_t lds__search_probe_times(bool native_i8, double *times, size_t cap);

#endif
