/* The AVX-512 search kernel: 16 lanes, FMA, binary16 through vcvtph2ps.
   Built with -mavx512f; search.c calls it only where __builtin_cpu_supports
   says the CPU has AVX-512F (ADR 0015). */
#include "../format/format_internal.h"

#include <immintrin.h>

#define LDS_K_LANES 16
#define LDS_K_FUSED true
#define LDS_K_NAME  "avx512"
#define LDS_K_SYM   lds__kernel_avx512

#define LDS_K_FMA(a, b, c) ((vf)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#define LDS_K_F16(p)       ((vf)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p))))

#include "kernels_impl.h"
