/* Element conversions and table sizing. */
#include "format_internal.h"

#include <xxhash.h>

float lds_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu;
    uint32_t m = h & 0x3FFu;
    if (e == 0) {
        if (m == 0)
            return lds__bits_f32(sign);
        uint32_t e32 = 113; /* 127 - 15 + 1: the exponent of the smallest f16 normal */
        while (!(m & 0x400u)) {
            m <<= 1;
            e32--;
        }
        return lds__bits_f32(sign | (e32 << 23) | ((m & 0x3FFu) << 13));
    }
    if (e == 31)
        return lds__bits_f32(sign | 0x7F800000u | (m << 13));
    return lds__bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t lds_f32_to_f16(float f)
{
    uint32_t u = lds__f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    int32_t e = (int32_t)((u >> 23) & 0xFFu);
    uint32_t m = u & 0x7FFFFFu;
    if (e == 255)
        return (uint16_t)(sign | 0x7C00u | (m ? (0x200u | (m >> 13)) : 0));
    int32_t E = e - 127 + 15;
    if (E >= 31)
        return (uint16_t)(sign | 0x7C00u);
    if (E <= 0) {
        if (E < -10)
            return (uint16_t)sign;
        uint32_t M = m | 0x800000u;
        uint32_t shift = (uint32_t)(14 - E);
        uint32_t q = M >> shift;
        uint32_t rem = M & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    uint32_t q = ((uint32_t)E << 10) | (m >> 13);
    uint32_t rem = m & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u)))
        q++; /* a carry into the exponent is the correct result, up to infinity */
    return (uint16_t)(sign | q);
}

float lds_bf16_to_f32(uint16_t b)
{
    return lds__bits_f32((uint32_t)b << 16);
}

uint16_t lds_f32_to_bf16(float f)
{
    uint32_t u = lds__f32_bits(f);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu))
        return (uint16_t)((u >> 16) | 0x40u);
    uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)((u + rounding) >> 16);
}

void lds__row_to_f32(const uint8_t *src, lds_dtype dtype, float scale, uint32_t dim, float *out)
{
    switch (dtype) {
    case LDS_DTYPE_F32:
        for (uint32_t i = 0; i < dim; i++)
            out[i] = lds__bits_f32(lds__ld32(src + 4 * (size_t)i));
        break;
    case LDS_DTYPE_F16:
        for (uint32_t i = 0; i < dim; i++)
            out[i] = lds_f16_to_f32(lds__ld16(src + 2 * (size_t)i));
        break;
    case LDS_DTYPE_BF16:
        for (uint32_t i = 0; i < dim; i++)
            out[i] = lds_bf16_to_f32(lds__ld16(src + 2 * (size_t)i));
        break;
    case LDS_DTYPE_I8:
        for (uint32_t i = 0; i < dim; i++)
            out[i] = (float)(int8_t)src[i] * scale;
        break;
    }
}

