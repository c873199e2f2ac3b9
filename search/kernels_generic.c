/* The portable search kernel: 8 lanes in GCC/Clang vector extensions, a
   separate multiply and add (built with -ffp-contract=off), f16 converted one
   element at a time. Runs on any CPU; kept tested by forcing it (ADR 0015). */
#include "../format/format_internal.h"

#define LDS_K_LANES 8
#define LDS_K_FUSED false
#define LDS_K_NAME  "generic"
#define LDS_K_SYM   lds__kernel_generic

static inline float generic_f16_at(const uint8_t *p, unsigned i)
{
    return lds_f16_to_f32(lds__ld16(p + 2 * i));
}

#define LDS_K_FMA(a, b, c) ((a) * (b) + (c))
#define LDS_K_F16(p)                                                                               \
    ((vf){generic_f16_at(p, 0), generic_f16_at(p, 1), generic_f16_at(p, 2), generic_f16_at(p, 3),  \
          generic_f16_at(p, 4), generic_f16_at(p, 5), generic_f16_at(p, 6), generic_f16_at(p, 7)})

#include "kernels_impl.h"
