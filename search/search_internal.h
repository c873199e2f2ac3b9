/* Internal interface of the search kernels (search.c and kernels_*.c; not installed). */
#ifndef LDS_SEARCH_INTERNAL_H
#define LDS_SEARCH_INTERNAL_H

#include "lodestar_core.h"
#include "lodestar_index.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Queries are copied into buffers whose rows are padded with zeros to a
   multiple of this many floats (the widest kernel's lanes), 64-byte aligned. */
#define LDS__QPAD 16

/*
 * One kernel: raw scores of `nq` queries against `nr` consecutive stored rows.
 * Query j is q[j * qstride, j * qstride + dim), zero-padded up to a multiple of
 * LDS__QPAD, 64-byte aligned. Row i is rows + i * row_bytes (any alignment),
 * `dim` elements of `dtype` (i8 elements are converted as i8 * scale, exactly
 * as lds__row_to_f32 does). Writes out[j * out_stride + i] = sum of q * r
 * (l2 false) or sum of (q - r)^2 (l2 true). `end` is the end of the stored
 * vectors: a row's last partial chunk is read whole (and its extra lanes
 * cleared) when it lies before `end`, copied otherwise.
 *
 * Every (query, row) pair is summed in one fixed order whatever nq and nr are
 * (lane l of `lanes` accumulates elements l, l + lanes, ...; the tail is
 * zero-padded; then a fixed halving tree), so one-at-a-time, batched and
 * threaded searches agree to the bit. ADR 0015.
 */
typedef void lds__score_fn(const float *q, size_t qstride, size_t nq, const uint8_t *rows,
                           size_t row_bytes, size_t nr, uint32_t dim, lds_dtype dtype, float scale,
                           bool l2, float *out, size_t out_stride, const uint8_t *end);

typedef struct lds__kernel {
    const char *name; /* "generic", "avx2", "avx512" */
    unsigned lanes;   /* accumulator lanes per (query, row) pair */
    bool fused;       /* multiply-add rounds once (FMA) */
    lds__score_fn *scores;
} lds__kernel;

extern const lds__kernel lds__kernel_generic;
#if defined(LDS_HAVE_KERNEL_AVX2)
extern const lds__kernel lds__kernel_avx2;
#endif
#if defined(LDS_HAVE_KERNEL_AVX512)
extern const lds__kernel lds__kernel_avx512;
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

/* The kernel searches use now. */
const lds__kernel *lds__search_kernel(void);

#endif
