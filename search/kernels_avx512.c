/* The AVX-512 search kernel: 16 rows per vector, micro-tiles of 6 queries x
   64 rows (24 accumulators of 32 registers), FMA with the query broadcast from
   memory, the panel packed by 16 x 16 transposes from masked loads, candidate
   bits by one compare into a mask register. Built with -mavx512f -mavx512bw
   -mavx512vl; search.c calls it only where the CPU has all three (ADR 0032). */
#include "../format/format_internal.h"
#include "search_internal.h"

#include <immintrin.h>

#define LDS_K_LANES    16
#define LDS_K_SUB_VECS 4
#define LDS_K_MAX_Q    6
#define LDS_K_FUSED    true
#define LDS_K_SINGLE   1
#if defined(LDS_K_BF16)
/* Built a third time with -mavx512vnni -mavx512bf16: the vnni kernel, and the
   native bf16 path's pairs by one vdpbf16ps (ADR 0056). */
#define LDS_K_NAME "avx512bf16"
#define LDS_K_SYM  lds__kernel_avx512bf16
#define LDS_K_DPBF16(acc, r, q)                                                                    \
    ((vf)_mm512_dpbf16_ps((__m512)(acc), (__m512bh)(__m512i)(r), (__m512bh)(__m512i)(q)))
#elif defined(LDS_K_VNNI)
/* Built a second time with -mavx512vnni: the same kernel, the native i8 path's
   multiply-add of pairs by one vpdpwssd (ADR 0043). */
#define LDS_K_NAME "avx512vnni"
#define LDS_K_SYM  lds__kernel_avx512vnni
#else
#define LDS_K_NAME "avx512"
#define LDS_K_SYM  lds__kernel_avx512
#endif

#define LDS_K_FMA(a, b, c)  ((vf)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#define LDS_K_MASK_GT(a, b) ((uint64_t)_mm512_cmp_ps_mask((__m512)(a), (__m512)(b), _CMP_GT_OQ))
/* Native i8 (ADR 0043): int16 pairs by 16-bit shifts, pmaddwd + add. */
#define LDS_K_SPLIT(x, e, o)                                                                       \
    (*(e) = (vi)_mm512_srai_epi16(_mm512_slli_epi16((__m512i)(x), 8), 8),                         \
     *(o) = (vi)_mm512_srai_epi16((__m512i)(x), 8))
#if defined(LDS_K_VNNI)
#define LDS_K_MADD(acc, a, b)                                                                      \
    ((vi)_mm512_dpwssd_epi32((__m512i)(acc), (__m512i)(a), (__m512i)(b)))
#else
#define LDS_K_MADD(acc, a, b)                                                                      \
    ((vi)_mm512_add_epi32((__m512i)(acc), _mm512_madd_epi16((__m512i)(a), (__m512i)(b))))
#endif

/* finish_i8's (float)((double)S * c) [* inv[row]] by halves of 8 doubles in zmm
   registers: the generic 16-double vector spilled every half to the stack, a
   third of the native i8 kernel's time at batch 100 (ADR 0043). The same
   roundings (exact conversion, one per product, nearest to float). */
static inline __attribute__((always_inline)) __m512 avx512_i8_scale(__m512i s, double c,
                                                                    const double *w)
{
    const __m512d cv = _mm512_set1_pd(c);
    __m512d lo = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(s)), cv);
    __m512d hi = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(s, 1)), cv);
    if (w) {
        lo = _mm512_mul_pd(lo, _mm512_loadu_pd(w));
        hi = _mm512_mul_pd(hi, _mm512_loadu_pd(w + 8));
    }
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo))),
                                               _mm256_castps_pd(_mm512_cvtpd_ps(hi)), 1));
}
#define LDS_K_I8_SCALE(s, c, w) ((vf)avx512_i8_scale((__m512i)(s), (c), (w)))

/* 16 elements of dt at p (w of them, by a masked load; the rest zero) as f32. */
static inline __attribute__((always_inline)) __m512 avx512_load(const uint8_t *p, size_t w,
                                                                lds_dtype dt, float scale)
{
    if (dt == LDS__DT_RAW) /* w bytes */
        return _mm512_castsi512_ps(
            _mm512_maskz_loadu_epi8(w >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << w) - 1, p));
    __mmask16 k = (__mmask16)(w >= 16 ? 0xFFFFu : (1u << w) - 1);
    switch (dt) {
    case LDS_DTYPE_F32:
        return _mm512_maskz_loadu_ps(k, p);
    case LDS_DTYPE_F16:
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p));
    case LDS_DTYPE_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, p)), 16));
    default:
        return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, p))),
                             _mm512_set1_ps(scale));
    }
}

/* Rows [0, gn) x columns [0, w) of src as cols[c] = column c (16 x 16 transpose: pairs
   of rows, then quads by 64-bit halves, then 128-bit lanes). */
static inline __attribute__((always_inline)) void avx512_transpose(const uint8_t *src, size_t rb,
                                                                   size_t gn, size_t w,
                                                                   lds_dtype dt, float scale,
                                                                   __m512 *cols)
{
    __m512 r[16], t[16], u[16];
#pragma GCC unroll 16
    for (size_t m = 0; m < 16; m++) {
        /* The same bytes of the next block of rows, a block ahead of the loads. */
        _mm_prefetch((const char *)(src + m * rb + LDS__PANEL * rb), _MM_HINT_T0);
        r[m] = m < gn ? avx512_load(src + m * rb, w, dt, scale) : _mm512_setzero_ps();
    }
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 4; i++) {
        __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
        __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
        u[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
        u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    /* u[4i + c], 128-bit lane L: column 4L + c of rows 4i .. 4i + 3. */
#pragma GCC unroll 16
    for (int c = 0; c < 4; c++) {
        __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44);
        __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
        __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44);
        __m512 v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
        cols[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        cols[4 + c] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
        cols[8 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        cols[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
    }
}
#define LDS_K_TRANSPOSE(src, rb, gn, w, dt, scale, cols)                                           \
    avx512_transpose(src, rb, gn, w, dt, scale, (__m512 *)(void *)(cols))

#include "kernels_impl.h"

#if defined(LDS_K_BF16)
void lds__dpbf16_hw(float *acc, const uint32_t *a, const uint32_t *b, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = (__mmask16)(n - i >= 16 ? 0xFFFFu : (1u << (n - i)) - 1);
        __m512 r = _mm512_dpbf16_ps(_mm512_maskz_loadu_ps(k, acc + i),
                                    (__m512bh)_mm512_maskz_loadu_epi32(k, a + i),
                                    (__m512bh)_mm512_maskz_loadu_epi32(k, b + i));
        _mm512_mask_storeu_ps(acc + i, k, r);
    }
}
#endif
