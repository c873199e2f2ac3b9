/* The AVX2 search kernel: 8 rows per vector, micro-tiles of 6 queries x 16
   rows (12 accumulators of 16 registers), FMA, the panel packed by 8 x 8
   transposes, F16C for binary16. Built with -mavx2 -mfma -mf16c; search.c
   calls it only where the CPU has all three (ADR 0032). */
#include "../format/format_internal.h"
#include "search_internal.h"

#include <immintrin.h>
#include <string.h>

#define LDS_K_LANES    8
#define LDS_K_SUB_VECS 2
#define LDS_K_MAX_Q    6
#define LDS_K_FUSED    true
#define LDS_K_NAME     "avx2"
#define LDS_K_SYM      lds__kernel_avx2

#define LDS_K_FMA(a, b, c) ((vf)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#define LDS_K_MASK_GT(a, b)                                                                        \
    ((uint64_t)(unsigned)_mm256_movemask_ps(_mm256_cmp_ps((__m256)(a), (__m256)(b), _CMP_GT_OQ)))
/* Native i8 (ADR 0043): int16 pairs by 16-bit shifts, pmaddwd + add. */
#define LDS_K_SPLIT(x, e, o)                                                                       \
    (*(e) = (vi)_mm256_srai_epi16(_mm256_slli_epi16((__m256i)(x), 8), 8),                         \
     *(o) = (vi)_mm256_srai_epi16((__m256i)(x), 8))
#define LDS_K_MADD(acc, a, b)                                                                      \
    ((vi)_mm256_add_epi32((__m256i)(acc), _mm256_madd_epi16((__m256i)(a), (__m256i)(b))))

/* 8 elements of dt at p (w of them; the rest zero) as f32, as lds__row_to_f32. */
static inline __attribute__((always_inline)) __m256 avx2_load(const uint8_t *p, size_t w,
                                                              lds_dtype dt, float scale)
{
    uint8_t buf[32];
    if (dt == LDS__DT_RAW) { /* w bytes */
        if (w < 32) {
            memset(buf, 0, sizeof buf);
            memcpy(buf, p, w);
            p = buf;
        }
        return _mm256_loadu_ps((const float *)(const void *)p);
    }
    if (w < 8) {
        size_t es = dt == LDS_DTYPE_F32 ? 4 : dt == LDS_DTYPE_I8 ? 1 : 2;
        memset(buf, 0, sizeof buf);
        memcpy(buf, p, w * es);
        p = buf;
    }
    switch (dt) {
    case LDS_DTYPE_F32:
        return _mm256_loadu_ps((const float *)(const void *)p);
    case LDS_DTYPE_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
    case LDS_DTYPE_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)), 16));
    default:
        return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                                 _mm_loadl_epi64((const __m128i *)(const void *)p))),
                             _mm256_set1_ps(scale));
    }
}

/* Rows [0, gn) x columns [0, w) of src as cols[c] = column c (8 x 8 transpose). */
static inline __attribute__((always_inline)) void avx2_transpose(const uint8_t *src, size_t rb,
                                                                 size_t gn, size_t w, lds_dtype dt,
                                                                 float scale, __m256 *cols)
{
    __m256 r[8];
#pragma GCC unroll 16
    for (size_t m = 0; m < 8; m++) {
        /* The same bytes of the next block of rows, a block ahead of the loads. */
        _mm_prefetch((const char *)(src + m * rb + LDS__PANEL * rb), _MM_HINT_T0);
        r[m] = m < gn ? avx2_load(src + m * rb, w, dt, scale) : _mm256_setzero_ps();
    }
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    cols[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    cols[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    cols[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    cols[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    cols[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    cols[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    cols[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    cols[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}
#define LDS_K_TRANSPOSE(src, rb, gn, w, dt, scale, cols)                                           \
    avx2_transpose(src, rb, gn, w, dt, scale, (__m256 *)(void *)(cols))

#include "kernels_impl.h"
