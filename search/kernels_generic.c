/* The portable search kernel: 8 lanes in GCC/Clang vector extensions, a
   separate multiply and add (built with -ffp-contract=off), the panel packed
   one element at a time. Runs on any CPU; kept tested by forcing it (ADR 0032). */
#include "../format/format_internal.h"

#define LDS_K_LANES    8
#define LDS_K_SUB_VECS 2
#define LDS_K_MAX_Q    4
#define LDS_K_FUSED    false
#define LDS_K_NAME     "generic"
#define LDS_K_SYM      lds__kernel_generic

#define LDS_K_FMA(a, b, c) ((a) * (b) + (c))

#include "kernels_impl.h"
