/* The AVX2 search kernel: 8 lanes, FMA (one rounding per multiply-add), F16C
   for binary16. Built with -mavx2 -mfma -mf16c; search.c calls it only where
   __builtin_cpu_supports says the CPU has all three (ADR 0015). */
#include "../format/format_internal.h"

#include <immintrin.h>

#define LDS_K_LANES 8
#define LDS_K_FUSED true
#define LDS_K_NAME  "avx2"
#define LDS_K_SYM   lds__kernel_avx2

#define LDS_K_FMA(a, b, c) ((vf)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#define LDS_K_F16(p)       ((vf)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p))))

#include "kernels_impl.h"
