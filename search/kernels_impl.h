/*
 * The body of one search kernel, included once per instruction set by
 * kernels_<isa>.c after it defines:
 *   LDS_K_LANES       accumulator lanes (8 or 16)
 *   LDS_K_FMA(a,b,c)  a * b + c on vf values
 *   LDS_K_F16(p)      LDS_K_LANES binary16 values at p (any alignment) as a vf
 *   LDS_K_NAME        the kernel's name (a string) and LDS_K_SYM its symbol
 * See search_internal.h for the contract and ADR 0015 for the design.
 */
#include "search_internal.h"

#include <string.h>

#define LDS_K_BYTES (LDS_K_LANES * 4)

typedef float vf __attribute__((vector_size(LDS_K_BYTES)));
typedef uint32_t vu __attribute__((vector_size(LDS_K_BYTES)));
typedef uint16_t vh __attribute__((vector_size(LDS_K_LANES * 2)));
typedef int8_t vb __attribute__((vector_size(LDS_K_LANES)));

#define LDS_K_INLINE static inline __attribute__((always_inline))

/* LDS_K_LANES elements of `dt` at p as floats, converted exactly as lds__row_to_f32. */
LDS_K_INLINE vf load_chunk(const uint8_t *p, lds_dtype dt, float scale)
{
    vf v;
    if (dt == LDS_DTYPE_F32) {
        memcpy(&v, p, sizeof v);
    } else if (dt == LDS_DTYPE_F16) {
        v = LDS_K_F16(p);
    } else if (dt == LDS_DTYPE_BF16) {
        vh h;
        memcpy(&h, p, sizeof h);
        vu u = __builtin_convertvector(h, vu) << 16;
        memcpy(&v, &u, sizeof v);
    } else {
        vb b;
        memcpy(&b, p, sizeof b);
        v = __builtin_convertvector(b, vf) * scale;
    }
    return v;
}

/* The fixed halving tree: lanes [0, w) += lanes [w, 2w) for w = LANES/2 .. 1. */
LDS_K_INLINE float hsum(vf v)
{
    for (unsigned w = LDS_K_LANES / 2; w >= 1; w /= 2)
        for (unsigned i = 0; i < w; i++)
            v[i] = v[i] + v[i + w];
    return v[0];
}

LDS_K_INLINE size_t esize(lds_dtype dt)
{
    return dt == LDS_DTYPE_F32 ? 4 : dt == LDS_DTYPE_I8 ? 1 : 2;
}

/* Lanes [0, rem) all ones, the rest zero: &lane_mask[LDS_K_LANES - rem]. */
static const uint32_t lane_mask[2 * LDS_K_LANES] = {
    UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX,
#if LDS_K_LANES == 16
    UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX,
#endif
};

LDS_K_INLINE vf step(vf acc, vf qv, vf rv, bool l2)
{
    if (l2) {
        vf d = qv - rv;
        return LDS_K_FMA(d, d, acc);
    }
    return LDS_K_FMA(qv, rv, acc);
}

/* QT queries x RT rows; QT, RT, dt and l2 are constants at every call. The
   row tail (dim % LANES elements) is loaded whole when the chunk ends before
   `end` (the end of the vectors) and its extra lanes cleared, else copied. */
LDS_K_INLINE void tile(const float *q, size_t qs, int QT, const uint8_t *r, size_t rb, int RT,
                       uint32_t dim, lds_dtype dt, float scale, bool l2, float *out, size_t os,
                       const uint8_t *end)
{
    vf acc[3][4];
    for (int j = 0; j < QT; j++)
        for (int m = 0; m < RT; m++)
            acc[j][m] = (vf){0};
    const size_t es = esize(dt), cb = LDS_K_LANES * es, full = dim / LDS_K_LANES;
    const size_t rem = dim % LDS_K_LANES;
    for (size_t c = 0; c < full; c++) {
        for (int m = 0; m < RT; m++) {
            vf rv = load_chunk(r + (size_t)m * rb + c * cb, dt, scale);
            for (int j = 0; j < QT; j++) {
                vf qv;
                memcpy(&qv, q + (size_t)j * qs + c * LDS_K_LANES, sizeof qv);
                acc[j][m] = step(acc[j][m], qv, rv, l2);
            }
        }
    }
    if (rem) {
        vu mask;
        memcpy(&mask, lane_mask + (LDS_K_LANES - rem), sizeof mask);
        for (int m = 0; m < RT; m++) {
            const uint8_t *p = r + (size_t)m * rb + full * cb;
            vf rv;
            if ((size_t)(end - p) >= cb) {
                rv = load_chunk(p, dt, scale);
            } else {
                uint8_t buf[LDS_K_BYTES] = {0};
                memcpy(buf, p, rem * es);
                rv = load_chunk(buf, dt, scale);
            }
            vu bits;
            memcpy(&bits, &rv, sizeof bits);
            bits &= mask; /* whatever the next row holds (NaN too) becomes +0 */
            memcpy(&rv, &bits, sizeof rv);
            for (int j = 0; j < QT; j++) {
                vf qv;
                memcpy(&qv, q + (size_t)j * qs + full * LDS_K_LANES, sizeof qv);
                acc[j][m] = step(acc[j][m], qv, rv, l2);
            }
        }
    }
    for (int j = 0; j < QT; j++)
        for (int m = 0; m < RT; m++)
            out[(size_t)j * os + (size_t)m] = hsum(acc[j][m]);
}

LDS_K_INLINE void scores_body(const float *q, size_t qs, size_t nq, const uint8_t *rows, size_t rb,
                              size_t nr, uint32_t dim, lds_dtype dt, float scale, bool l2,
                              float *out, size_t os, const uint8_t *end)
{
    size_t j = 0;
    for (; j + 3 <= nq; j += 3) {
        size_t i = 0;
        for (; i + 4 <= nr; i += 4)
            tile(q + j * qs, qs, 3, rows + i * rb, rb, 4, dim, dt, scale, l2, out + j * os + i, os,
                 end);
        for (; i < nr; i++)
            tile(q + j * qs, qs, 3, rows + i * rb, rb, 1, dim, dt, scale, l2, out + j * os + i, os,
                 end);
    }
    if (nq - j == 2) {
        size_t i = 0;
        for (; i + 4 <= nr; i += 4)
            tile(q + j * qs, qs, 2, rows + i * rb, rb, 4, dim, dt, scale, l2, out + j * os + i, os,
                 end);
        for (; i < nr; i++)
            tile(q + j * qs, qs, 2, rows + i * rb, rb, 1, dim, dt, scale, l2, out + j * os + i, os,
                 end);
    } else if (nq - j == 1) {
        size_t i = 0;
        for (; i + 4 <= nr; i += 4)
            tile(q + j * qs, qs, 1, rows + i * rb, rb, 4, dim, dt, scale, l2, out + j * os + i, os,
                 end);
        for (; i < nr; i++)
            tile(q + j * qs, qs, 1, rows + i * rb, rb, 1, dim, dt, scale, l2, out + j * os + i, os,
                 end);
    }
}

#define LDS_K_SPEC(NAME, DT, L2)                                                                   \
    static void NAME(const float *q, size_t qs, size_t nq, const uint8_t *rows, size_t rb,         \
                     size_t nr, uint32_t dim, float scale, float *out, size_t os,                  \
                     const uint8_t *end)                                                           \
    {                                                                                              \
        scores_body(q, qs, nq, rows, rb, nr, dim, DT, scale, L2, out, os, end);                    \
    }
LDS_K_SPEC(s_f32_dot, LDS_DTYPE_F32, false)
LDS_K_SPEC(s_f32_l2, LDS_DTYPE_F32, true)
LDS_K_SPEC(s_f16_dot, LDS_DTYPE_F16, false)
LDS_K_SPEC(s_f16_l2, LDS_DTYPE_F16, true)
LDS_K_SPEC(s_bf16_dot, LDS_DTYPE_BF16, false)
LDS_K_SPEC(s_bf16_l2, LDS_DTYPE_BF16, true)
LDS_K_SPEC(s_i8_dot, LDS_DTYPE_I8, false)
LDS_K_SPEC(s_i8_l2, LDS_DTYPE_I8, true)

static void scores(const float *q, size_t qs, size_t nq, const uint8_t *rows, size_t rb, size_t nr,
                   uint32_t dim, lds_dtype dt, float scale, bool l2, float *out, size_t os,
                   const uint8_t *end)
{
    switch (dt) {
    case LDS_DTYPE_F32:
        (l2 ? s_f32_l2 : s_f32_dot)(q, qs, nq, rows, rb, nr, dim, scale, out, os, end);
        break;
    case LDS_DTYPE_F16:
        (l2 ? s_f16_l2 : s_f16_dot)(q, qs, nq, rows, rb, nr, dim, scale, out, os, end);
        break;
    case LDS_DTYPE_BF16:
        (l2 ? s_bf16_l2 : s_bf16_dot)(q, qs, nq, rows, rb, nr, dim, scale, out, os, end);
        break;
    case LDS_DTYPE_I8:
        (l2 ? s_i8_l2 : s_i8_dot)(q, qs, nq, rows, rb, nr, dim, scale, out, os, end);
        break;
    }
}

const lds__kernel LDS_K_SYM = {LDS_K_NAME, LDS_K_LANES, LDS_K_FUSED, scores};
