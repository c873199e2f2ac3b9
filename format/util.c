/* Error detail, UTF-8 validation, element conversions and table sizing. */
#include "format_internal.h"

#include <stdio.h>
#include <xxhash.h>

#define LDS__FITS(err, member) ((err)->size >= offsetof(lds_error, member) + sizeof((err)->member))

static lds_status vfail(lds_error *err, lds_status status, const char *field, uint64_t offset,
                        int errnum, const char *fmt, va_list ap)
{
    if (!err || err->size < LDS_ERROR_MIN_SIZE || err->size > sizeof *err)
        return status; /* out of range: written never, not in part */
    if (LDS__FITS(err, status))
        err->status = status;
    if (LDS__FITS(err, field))
        err->field = field;
    if (LDS__FITS(err, offset))
        err->offset = offset;
    if (LDS__FITS(err, line))
        err->line = 0;
    if (LDS__FITS(err, sys_errno))
        err->sys_errno = errnum;
    if (LDS__FITS(err, zstd_error))
        err->zstd_error = NULL;
    if (LDS__FITS(err, message)) {
        int n = vsnprintf(err->message, sizeof err->message, fmt, ap);
        if (field && n >= 0 && (size_t)n < sizeof err->message)
            snprintf(err->message + n, sizeof err->message - (size_t)n, " (at byte %llu)",
                     (unsigned long long)offset);
    }
    return status;
}

lds_status lds__fail(lds_error *err, lds_status status, const char *field, uint64_t offset,
                     const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lds_status st = vfail(err, status, field, offset, 0, fmt, ap);
    va_end(ap);
    return st;
}

lds_status lds__fail_errno(lds_error *err, lds_status status, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lds_status st = vfail(err, status, NULL, 0, errnum, fmt, ap);
    va_end(ap);
    return st;
}

size_t lds__ascii_prefix(const uint8_t *s, size_t n)
{
    const uint64_t high = UINT64_C(0x8080808080808080);
    size_t i = 0;
    for (; n - i >= 32; i += 32) {
        uint64_t w[4];
        memcpy(w, s + i, sizeof w);
        if ((w[0] | w[1] | w[2] | w[3]) & high)
            break;
    }
    for (; n - i >= 8; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, sizeof w);
        if (w & high)
            break;
    }
    while (i < n && s[i] < 0x80)
        i++;
    return i;
}

bool lds__utf8_valid(const uint8_t *s, size_t n, size_t *bad, const char **why)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i += lds__ascii_prefix(s + i, n - i);
            continue;
        }
        size_t need;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c < 0xC0) {
            *bad = i;
            *why = "stray continuation byte";
            return false;
        } else if (c < 0xC2) {
            *bad = i;
            *why = "overlong encoding";
            return false;
        } else if (c < 0xE0) {
            need = 1;
        } else if (c < 0xF0) {
            need = 2;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c < 0xF5) {
            need = 3;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else {
            *bad = i;
            *why = "byte never valid in UTF-8";
            return false;
        }
        if (n - i - 1 < need) {
            *bad = i;
            *why = "truncated sequence";
            return false;
        }
        uint8_t c1 = s[i + 1];
        if (c1 < lo || c1 > hi) {
            *bad = i + 1;
            if (c1 >= 0x80 && c1 <= 0xBF)
                *why = (c == 0xED)   ? "surrogate code point"
                       : (c == 0xF4) ? "code point above U+10FFFF"
                                     : "overlong encoding";
            else
                *why = "missing continuation byte";
            return false;
        }
        for (size_t k = 2; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                *bad = i + k;
                *why = "missing continuation byte";
                return false;
            }
        }
        i += need + 1;
    }
    return true;
}

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

uint64_t lds__table_capacity(uint64_t n)
{
    uint64_t cap = 16;
    while (cap / 2 < n) {
        if (cap > (UINT64_MAX >> 4))
            return 0;
        cap <<= 1;
    }
    return cap;
}
