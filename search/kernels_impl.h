/*
 * The body of one search kernel, included once per instruction set by
 * kernels_<isa>.c after it defines:
 *   LDS_K_LANES          float lanes of one vector (8 or 16)
 *   LDS_K_FMA(a, b, c)   a * b + c on vf values (one rounding where the ISA fuses)
 *   LDS_K_SUB_VECS       vectors of rows per micro-tile (LDS__PANEL / LDS_K_LANES or less)
 *   LDS_K_MAX_Q          queries per micro-tile (accumulators: LDS_K_MAX_Q x LDS_K_SUB_VECS)
 *   LDS_K_TRANSPOSE(...) optional: LDS_K_LANES rows x LDS_K_LANES columns transposed in
 *                        registers (see pack); without it the panel is packed one element
 *                        at a time
 *   LDS_K_SINGLE         optional, with LDS_K_TRANSPOSE: a query alone skips the panel
 *                        (its accumulators and a transpose fit the registers: AVX-512)
 *   LDS_K_MASK_GT(a, b)   optional: the lanes where a > b (ordered) as bits
 *   LDS_K_NAME, LDS_K_SYM the kernel's name (a string) and its symbol
 *   LDS_K_FUSED          whether LDS_K_FMA rounds once
 * See search_internal.h for the contract and ADR 0032 for the design.
 *
 * The design in one paragraph. A block of up to LDS__PANEL rows is packed
 * transposed into a panel (panel[d * LDS__PANEL + i] = element d of row i, as
 * f32, converted exactly as lds__row_to_f32 does). A micro-tile then holds
 * LDS_K_MAX_Q queries x LDS_K_SUB_VECS vectors of rows in registers: for each
 * d in order it loads the rows' element d (one vector per LDS_K_LANES rows),
 * broadcasts each query's q[d], and adds the product into the accumulator of
 * each (query, row) pair. Every pair is therefore the sequential sum
 * acc = q[0] r[0]; acc = q[d] r[d] + acc for d = 1 .. dim - 1, whatever the
 * tile, the number of queries, the row's place in the block or the thread:
 * batch, single and threaded searches give the same bits, and so do two
 * kernels that both fuse (avx2, avx512).
 */
#include "search_internal.h"

#include <math.h>
#include <string.h>

#define LDS_K_NVEC (LDS__PANEL / LDS_K_LANES)

typedef float vf __attribute__((vector_size(LDS_K_LANES * 4)));
typedef double vd __attribute__((vector_size(LDS_K_LANES * 8)));
typedef int32_t vi __attribute__((vector_size(LDS_K_LANES * 4)));
typedef uint32_t vu __attribute__((vector_size(LDS_K_LANES * 4)));

#define LDS_K_INLINE static inline __attribute__((always_inline))

/* x in every lane. */
LDS_K_INLINE vf splat(float x)
{
    vf v;
    for (unsigned l = 0; l < LDS_K_LANES; l++)
        v[l] = x;
    return v;
}

/* One element of `dt` at p as f32, exactly as lds__row_to_f32. */
LDS_K_INLINE float elem(const uint8_t *p, lds_dtype dt, float scale)
{
    switch (dt) {
    case LDS_DTYPE_F32:
        return lds__bits_f32(lds__ld32(p));
    case LDS_DTYPE_F16:
        return lds_f16_to_f32(lds__ld16(p));
    case LDS_DTYPE_BF16:
        return lds_bf16_to_f32(lds__ld16(p));
    default:
        return (float)(int8_t)p[0] * scale;
    }
}

LDS_K_INLINE size_t esize(lds_dtype dt)
{
    return dt == LDS_DTYPE_F32 ? 4 : dt == LDS_DTYPE_I8 ? 1 : 2;
}

/* Packs rows [0, nr) of the block, transposed, into the panel; lanes of rows
   past nr in a partly used vector of rows are zero (vectors wholly past nr are
   left as they are: their scores are never read). */
LDS_K_INLINE void pack(const uint8_t *rows, size_t rb, size_t nr, uint32_t dim, lds_dtype dt,
                       float scale, float *panel)
{
    const size_t es = esize(dt);
    for (size_t g = 0; g < nr; g += LDS_K_LANES) {
        size_t gn = nr - g < LDS_K_LANES ? nr - g : LDS_K_LANES;
#if defined(LDS_K_TRANSPOSE)
        /* LDS_K_TRANSPOSE(src, rb, gn, w, dt, scale, cols): rows [0, gn) (the rest zero),
           columns [0, w) of src, w <= LANES, as cols[c] = column c of those rows. */
        for (uint32_t c = 0; c < dim; c += LDS_K_LANES) {
            size_t w = dim - c < LDS_K_LANES ? dim - c : LDS_K_LANES;
            vf cols[LDS_K_LANES];
            LDS_K_TRANSPOSE(rows + g * rb + c * es, rb, gn, w, dt, scale, cols);
            float *dst = panel + (size_t)c * LDS__PANEL + g;
#pragma GCC unroll 16
            for (size_t i = 0; i < LDS_K_LANES; i++)
                if (i < w)
                    memcpy(dst + i * LDS__PANEL, &cols[i], sizeof cols[i]);
        }
#else
        for (uint32_t c = 0; c < dim; c++) {
            float *dst = panel + (size_t)c * LDS__PANEL + g;
            for (size_t m = 0; m < gn; m++)
                dst[m] = elem(rows + (g + m) * rb + c * es, dt, scale);
            for (size_t m = gn; m < LDS_K_LANES; m++)
                dst[m] = 0.0f;
        }
#endif
    }
}

LDS_K_INLINE uint64_t mask_gt(vf a, vf b)
{
#if defined(LDS_K_MASK_GT)
    return LDS_K_MASK_GT(a, b);
#else
    vi m = a > b; /* false where either is NaN */
    uint64_t bits = 0;
    for (unsigned l = 0; l < LDS_K_LANES; l++)
        bits |= (uint64_t)(m[l] != 0) << l;
    return bits;
#endif
}

/* One vector of a query's scores, rows [lane0, lane0 + LANES) of the block: the store
   and the candidate bits. */
LDS_K_INLINE void emit(vf s, size_t lane0, float thr, bool lower, uint64_t valid, float *out,
                       uint64_t *mask)
{
    memcpy(out + lane0, &s, sizeof s);
    const vf t = splat(thr);
    uint64_t bits = isnan(thr) ? ~(uint64_t)0 : lower ? mask_gt(t, s) : mask_gt(s, t);
    *mask |= (bits << lane0) & valid;
}

/* The same with cosine scaling first. */
LDS_K_INLINE void finish(vf s, size_t lane0, const double *inv, float thr, bool lower,
                         uint64_t valid, float *out, uint64_t *mask)
{
    if (inv) {
        /* (float)((double)score * inv[row]): one rounding, as a scalar would. */
        vd w;
        memcpy(&w, inv + lane0, sizeof w);
        s = __builtin_convertvector(__builtin_convertvector(s, vd) * w, vf);
    }
    emit(s, lane0, thr, lower, valid, out, mask);
}

/* An exact int32 sum of the native i8 path (ADR 0043): (float)((double)S * c), or
   under cosine (float)(((double)S * c) * inv[row]). */
LDS_K_INLINE void finish_i8(vi s, size_t lane0, double c, const double *inv, float thr, bool lower,
                            uint64_t valid, float *out, uint64_t *mask)
{
#if defined(LDS_K_I8_SCALE)
    /* LDS_K_I8_SCALE(s, c, w): the same arithmetic in registers (w: inv + lane0 or NULL). */
    emit(LDS_K_I8_SCALE(s, c, inv ? inv + lane0 : NULL), lane0, thr, lower, valid, out, mask);
#else
    vd d = __builtin_convertvector(s, vd) * ((vd){0} + c);
    if (inv) {
        vd w;
        memcpy(&w, inv + lane0, sizeof w);
        d = d * w;
    }
    emit(__builtin_convertvector(d, vf), lane0, thr, lower, valid, out, mask);
#endif
}

/* Scores of QT queries x SV vectors of rows, starting at vector s0 of the
   panel, then cosine scaling, the candidate bits and the stores. QT, SV and l2
   are constants at every call. */
LDS_K_INLINE void tile(const float *q, size_t qs, int QT, const float *panel, size_t s0, int SV,
                       uint32_t dim, bool l2, const double *inv, const float *thr, bool lower,
                       uint64_t valid, float *out, uint64_t *mask)
{
    vf acc[LDS_K_MAX_Q][LDS_K_SUB_VECS];
    /* Every loop over j and v is unrolled, so the accumulators live in registers. */
#pragma GCC unroll 8
    for (int j = 0; j < QT; j++)
#pragma GCC unroll 8
        for (int v = 0; v < SV; v++)
            acc[j][v] = (vf){0};
    const float *p = panel + s0 * LDS_K_LANES;
    for (uint32_t d = 0; d < dim; d++, p += LDS__PANEL) {
        vf r[LDS_K_SUB_VECS];
#pragma GCC unroll 8
        for (int v = 0; v < SV; v++)
            memcpy(&r[v], p + v * LDS_K_LANES, sizeof r[v]);
#pragma GCC unroll 8
        for (int j = 0; j < QT; j++) {
            const vf qv = splat(q[(size_t)j * qs + d]);
#pragma GCC unroll 8
            for (int v = 0; v < SV; v++) {
                if (l2) {
                    vf t = qv - r[v];
                    acc[j][v] = LDS_K_FMA(t, t, acc[j][v]);
                } else {
                    acc[j][v] = LDS_K_FMA(qv, r[v], acc[j][v]);
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < QT; j++)
#pragma GCC unroll 8
        for (int v = 0; v < SV; v++)
            finish(acc[j][v], (s0 + (size_t)v) * LDS_K_LANES, inv, thr[j], lower, valid,
                   out + (size_t)j * LDS__PANEL, mask + j);
}

/* Every query against the panel's vectors [0, nvec), in micro-tiles. */
LDS_K_INLINE void panel_body(const float *q, size_t qs, size_t nq, const float *panel, size_t nvec,
                             uint32_t dim, bool l2, const double *inv, const float *thr, bool lower,
                             uint64_t valid, float *out, uint64_t *mask)
{
    for (size_t s0 = 0; s0 < nvec; s0 += LDS_K_SUB_VECS) {
        size_t j = 0;
#define LDS_K_TILES(SV)                                                                            \
    for (; j + LDS_K_MAX_Q <= nq; j += LDS_K_MAX_Q)                                                \
        tile(q + j * qs, qs, LDS_K_MAX_Q, panel, s0, SV, dim, l2, inv, thr + j, lower, valid,      \
             out + j * LDS__PANEL, mask + j);                                                      \
    switch (nq - j) {                                                                              \
    case 1:                                                                                        \
        tile(q + j * qs, qs, 1, panel, s0, SV, dim, l2, inv, thr + j, lower, valid,                \
             out + j * LDS__PANEL, mask + j);                                                      \
        break;                                                                                     \
    case 2:                                                                                        \
        tile(q + j * qs, qs, 2, panel, s0, SV, dim, l2, inv, thr + j, lower, valid,                \
             out + j * LDS__PANEL, mask + j);                                                      \
        break;                                                                                     \
    case 3:                                                                                        \
        tile(q + j * qs, qs, 3, panel, s0, SV, dim, l2, inv, thr + j, lower, valid,                \
             out + j * LDS__PANEL, mask + j);                                                      \
        break;                                                                                     \
    case 4:                                                                                        \
        tile(q + j * qs, qs, 4 < LDS_K_MAX_Q ? 4 : 1, panel, s0, SV, dim, l2, inv, thr + j, lower, \
             valid, out + j * LDS__PANEL, mask + j);                                               \
        break;                                                                                     \
    case 5:                                                                                        \
        tile(q + j * qs, qs, 5 < LDS_K_MAX_Q ? 5 : 1, panel, s0, SV, dim, l2, inv, thr + j, lower, \
             valid, out + j * LDS__PANEL, mask + j);                                               \
        break;                                                                                     \
    default:                                                                                       \
        break;                                                                                     \
    }
        if (nvec - s0 >= LDS_K_SUB_VECS) {
            LDS_K_TILES(LDS_K_SUB_VECS)
        } else {
            /* The block's last vectors: one at a time. */
            for (size_t s = s0; s < nvec; s++) {
                size_t j = 0;
                for (; j < nq; j++)
                    tile(q + j * qs, qs, 1, panel, s, 1, dim, l2, inv, thr + j, lower, valid,
                         out + j * LDS__PANEL, mask + j);
            }
        }
#undef LDS_K_TILES
    }
}

#if defined(LDS_K_TRANSPOSE) && defined(LDS_K_SINGLE)
/* One query: each LANES x LANES block of rows is transposed in registers and fed
   straight into its rows' FMA chains (no panel). Element d of every row still
   enters its chain in order d = 0, 1, ..., so the scores are the tiles' bits. */
LDS_K_INLINE void single_body(const lds__block_args *a, lds_dtype dt, bool l2, uint64_t valid)
{
    const size_t es = esize(dt), nr = a->nr, rb = a->row_bytes;
    const size_t nvec = (nr + LDS_K_LANES - 1) / LDS_K_LANES;
    const float *q = a->q;
    vf acc[LDS_K_NVEC];
#pragma GCC unroll 8
    for (size_t v = 0; v < LDS_K_NVEC; v++)
        acc[v] = (vf){0};
    for (uint32_t c = 0; c < a->dim; c += LDS_K_LANES) {
        const size_t w = a->dim - c < LDS_K_LANES ? a->dim - c : LDS_K_LANES;
#pragma GCC unroll 8
        for (size_t v = 0; v < LDS_K_NVEC; v++) {
            if (v >= nvec)
                break;
            const size_t g = v * LDS_K_LANES, gn = nr - g < LDS_K_LANES ? nr - g : LDS_K_LANES;
            vf cols[LDS_K_LANES];
            LDS_K_TRANSPOSE(a->rows + g * rb + c * es, rb, gn, w, dt, a->scale, cols);
#pragma GCC unroll 16
            for (size_t i = 0; i < LDS_K_LANES; i++) {
                if (i >= w)
                    break;
                const vf qv = splat(q[c + i]);
                if (l2) {
                    vf t = qv - cols[i];
                    acc[v] = LDS_K_FMA(t, t, acc[v]);
                } else {
                    acc[v] = LDS_K_FMA(qv, cols[i], acc[v]);
                }
            }
        }
    }
    a->mask[0] = 0;
#pragma GCC unroll 8
    for (size_t v = 0; v < LDS_K_NVEC; v++)
        if (v < nvec)
            finish(acc[v], v * LDS_K_LANES, a->inv, a->thr[0], a->lower, valid, a->out, a->mask);
}
#endif

/* ==== native i8 under dot and cosine (ADR 0043) ============================
 * The query arrives quantized to int16 (search_internal.h, lds__i8_quantize);
 * each (query, row) pair is the exact int32 sum S of Q_d x R_d, in any order
 * (every partial sum is bounded by lds__i8_qmax), so every kernel and every
 * path gives the same S and, through finish_i8, the same bits. The rows are
 * read four bytes at a time (a quad: elements 4c .. 4c + 3) and split into the
 * int16 pairs (r[4c], r[4c + 2]) and (r[4c + 1], r[4c + 3]) that match the
 * query's dwords; a pair of products is summed into an int32 lane by one
 * multiply-add of pairs (pmaddwd, vpdpwssd).
 */

/* LDS_K_TRANSPOSE mode for raw bytes: w counts bytes (up to 4 x LANES), the
   columns are quads; bytes past w are zero. */
#define LDS_K_RAW LDS__DT_RAW

LDS_K_INLINE vi splat_i(int32_t x)
{
    return (vi){0} + x; /* one broadcast (a loop over lanes compiles to one per lane) */
}

/* The bytes (b0, b1, b2, b3) of each lane as the int16 pairs e = (b0, b2) and
   o = (b1, b3), sign-extended, low half first. */
LDS_K_INLINE void split_quad(vu x, vi *e, vi *o)
{
#if defined(LDS_K_SPLIT)
    LDS_K_SPLIT(x, e, o);
#else
    vi b0 = (vi)(x << 24) >> 24, b1 = (vi)(x << 16) >> 24, b2 = (vi)(x << 8) >> 24,
       b3 = (vi)x >> 24;
    *e = (vi)(((vu)b0 & 0xFFFFu) | ((vu)b2 << 16));
    *o = (vi)(((vu)b1 & 0xFFFFu) | ((vu)b3 << 16));
#endif
}

/* acc + the two int16 x int16 products of each lane's pairs (exact: the caller
   bounds every sum below 2^31). */
LDS_K_INLINE vi madd(vi acc, vi a, vi b)
{
#if defined(LDS_K_MADD)
    return LDS_K_MADD(acc, a, b);
#else
    vi al = (vi)((vu)a << 16) >> 16, ah = a >> 16;
    vi bl = (vi)((vu)b << 16) >> 16, bh = b >> 16;
    return acc + al * bl + ah * bh;
#endif
}

#if !defined(LDS_K_TRANSPOSE)
/* Quad c of a row of `dim` bytes, zero past dim. */
LDS_K_INLINE uint32_t quad_at(const uint8_t *row, uint32_t dim, uint32_t c)
{
    uint32_t x = 0;
    for (uint32_t b = 0; b < 4 && 4 * c + b < dim; b++)
        x |= (uint32_t)row[4 * c + b] << (8 * b);
    return x;
}
#endif

/* Packs rows [0, nr) as pairs: panel[(2c) x LDS__PANEL + i] = e of row i's quad c,
   panel[(2c + 1) x LDS__PANEL + i] = its o (rows past nr in a used vector: zero). */
LDS_K_INLINE void pack_i8(const uint8_t *rows, size_t rb, size_t nr, uint32_t dim, int32_t *panel)
{
    const uint32_t nquad = (dim + 3) / 4;
    for (size_t g = 0; g < nr; g += LDS_K_LANES) {
        size_t gn = nr - g < LDS_K_LANES ? nr - g : LDS_K_LANES;
#if defined(LDS_K_TRANSPOSE)
        for (uint32_t c = 0; c < nquad; c += LDS_K_LANES) {
            size_t wb = dim - 4 * c < 4 * LDS_K_LANES ? dim - 4 * c : 4 * LDS_K_LANES;
            vf cols[LDS_K_LANES];
            LDS_K_TRANSPOSE(rows + g * rb + 4 * (size_t)c, rb, gn, wb, LDS_K_RAW, 0.0f, cols);
            int32_t *dst = panel + (size_t)2 * c * LDS__PANEL + g;
#pragma GCC unroll 16
            for (uint32_t i = 0; i < LDS_K_LANES; i++)
                if (c + i < nquad) {
                    vu x;
                    vi e, o;
                    memcpy(&x, &cols[i], sizeof x);
                    split_quad(x, &e, &o);
                    memcpy(dst + (size_t)2 * i * LDS__PANEL, &e, sizeof e);
                    memcpy(dst + (size_t)(2 * i + 1) * LDS__PANEL, &o, sizeof o);
                }
        }
#else
        for (uint32_t c = 0; c < nquad; c++) {
            vu x;
            for (size_t m = 0; m < LDS_K_LANES; m++)
                x[m] = m < gn ? quad_at(rows + (g + m) * rb, dim, c) : 0;
            vi e, o;
            split_quad(x, &e, &o);
            int32_t *dst = panel + (size_t)2 * c * LDS__PANEL + g;
            memcpy(dst, &e, sizeof e);
            memcpy(dst + LDS__PANEL, &o, sizeof o);
        }
#endif
    }
}

/* tile() for the pair panel: QT queries x SV vectors of rows from vector s0. */
LDS_K_INLINE void tile_i8(const int32_t *qi, size_t qis, int QT, const int32_t *panel, size_t s0,
                          int SV, size_t npairs, const double *qc, const double *inv,
                          const float *thr, bool lower, uint64_t valid, float *out,
                          uint64_t *mask)
{
    vi acc[LDS_K_MAX_Q][LDS_K_SUB_VECS];
#pragma GCC unroll 8
    for (int j = 0; j < QT; j++)
#pragma GCC unroll 8
        for (int v = 0; v < SV; v++)
            acc[j][v] = (vi){0};
    const int32_t *p = panel + s0 * LDS_K_LANES;
    for (size_t d = 0; d < npairs; d++, p += LDS__PANEL) {
        vi r[LDS_K_SUB_VECS];
#pragma GCC unroll 8
        for (int v = 0; v < SV; v++)
            memcpy(&r[v], p + v * LDS_K_LANES, sizeof r[v]);
#pragma GCC unroll 8
        for (int j = 0; j < QT; j++) {
            const vi qv = splat_i(qi[(size_t)j * qis + d]);
#pragma GCC unroll 8
            for (int v = 0; v < SV; v++)
                acc[j][v] = madd(acc[j][v], r[v], qv);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < QT; j++)
#pragma GCC unroll 8
        for (int v = 0; v < SV; v++)
            finish_i8(acc[j][v], (s0 + (size_t)v) * LDS_K_LANES, qc[j], inv, thr[j], lower, valid,
                      out + (size_t)j * LDS__PANEL, mask + j);
}

LDS_K_INLINE void panel_body_i8(const lds__block_args *a, const int32_t *panel, size_t nvec,
                                uint64_t valid)
{
    const size_t nq = a->nq, qis = a->qistride, np = LDS__I8_PAIRS(a->dim);
    for (size_t s0 = 0; s0 < nvec; s0 += LDS_K_SUB_VECS) {
        size_t j = 0;
#define LDS_K_TI(QT, SV)                                                                           \
    tile_i8(a->qi + j * qis, qis, QT, panel, s0, SV, np, a->qc + j, a->inv, a->thr + j, a->lower,   \
            valid, a->out + j * LDS__PANEL, a->mask + j)
        if (nvec - s0 >= LDS_K_SUB_VECS) {
            for (; j + LDS_K_MAX_Q <= nq; j += LDS_K_MAX_Q)
                LDS_K_TI(LDS_K_MAX_Q, LDS_K_SUB_VECS);
            switch (nq - j) {
            case 1:
                LDS_K_TI(1, LDS_K_SUB_VECS);
                break;
            case 2:
                LDS_K_TI(2, LDS_K_SUB_VECS);
                break;
            case 3:
                LDS_K_TI(3, LDS_K_SUB_VECS);
                break;
            case 4:
                LDS_K_TI(4 < LDS_K_MAX_Q ? 4 : 1, LDS_K_SUB_VECS);
                break;
            case 5:
                LDS_K_TI(5 < LDS_K_MAX_Q ? 5 : 1, LDS_K_SUB_VECS);
                break;
            default:
                break;
            }
        } else {
            for (size_t s = s0; s < nvec; s++)
                for (j = 0; j < nq; j++)
                    tile_i8(a->qi + j * qis, qis, 1, panel, s, 1, np, a->qc + j, a->inv,
                            a->thr + j, a->lower, valid, a->out + j * LDS__PANEL, a->mask + j);
        }
#undef LDS_K_TI
    }
}

#if defined(LDS_K_TRANSPOSE) && defined(LDS_K_SINGLE)
/* One query, no panel: each LANES x LANES block of quads transposed in registers,
   split and summed straight into its rows' accumulators. */
LDS_K_INLINE void single_body_i8(const lds__block_args *a, uint64_t valid)
{
    const size_t nr = a->nr, rb = a->row_bytes;
    const size_t nvec = (nr + LDS_K_LANES - 1) / LDS_K_LANES;
    const uint32_t dim = a->dim, nquad = (dim + 3) / 4;
    const int32_t *qi = a->qi;
    vi acc[LDS_K_NVEC];
#pragma GCC unroll 8
    for (size_t v = 0; v < LDS_K_NVEC; v++)
        acc[v] = (vi){0};
    for (uint32_t c = 0; c < nquad; c += LDS_K_LANES) {
        const size_t wb = dim - 4 * c < 4 * LDS_K_LANES ? dim - 4 * c : 4 * LDS_K_LANES;
#pragma GCC unroll 8
        for (size_t v = 0; v < LDS_K_NVEC; v++) {
            if (v >= nvec)
                break;
            const size_t g = v * LDS_K_LANES, gn = nr - g < LDS_K_LANES ? nr - g : LDS_K_LANES;
            vf cols[LDS_K_LANES];
            LDS_K_TRANSPOSE(a->rows + g * rb + 4 * (size_t)c, rb, gn, wb, LDS_K_RAW, 0.0f, cols);
#pragma GCC unroll 16
            for (uint32_t i = 0; i < LDS_K_LANES; i++) {
                if (c + i >= nquad)
                    break;
                vu x;
                vi e, o;
                memcpy(&x, &cols[i], sizeof x);
                split_quad(x, &e, &o);
                acc[v] = madd(acc[v], e, splat_i(qi[2 * (c + i)]));
                acc[v] = madd(acc[v], o, splat_i(qi[2 * (c + i) + 1]));
            }
        }
    }
    a->mask[0] = 0;
#pragma GCC unroll 8
    for (size_t v = 0; v < LDS_K_NVEC; v++)
        if (v < nvec)
            finish_i8(acc[v], v * LDS_K_LANES, a->qc[0], a->inv, a->thr[0], a->lower, valid,
                      a->out, a->mask);
}
#endif

static void b_i8_native(const lds__block_args *a)
{
    const uint64_t valid = a->nr >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << a->nr) - 1;
#if defined(LDS_K_TRANSPOSE) && defined(LDS_K_SINGLE)
    if (a->nq == 1) {
        single_body_i8(a, valid);
        return;
    }
#endif
    int32_t *panel = (int32_t *)(void *)a->panel;
    pack_i8(a->rows, a->row_bytes, a->nr, a->dim, panel);
    for (size_t j = 0; j < a->nq; j++)
        a->mask[j] = 0;
    panel_body_i8(a, panel, (a->nr + LDS_K_LANES - 1) / LDS_K_LANES, valid);
}

/* ==== native bf16 under dot and cosine (ADR 0056) ==========================
 * Each (query, row) pair is the chain acc = lds__bf16_step(acc, R_p, Q_p) over
 * the dwords p = 0, 1, ..., LDS__BF16_PAIRS(dim) - 1 of the row and the query
 * rounded to bf16 (the high, odd element first, then the low one; an odd dim's
 * last dword has a zero high element): vdpbf16ps's arithmetic. With
 * LDS_K_DPBF16 (AVX512_BF16) the panel holds the rows' dwords and one
 * instruction does a step for 16 rows. Without it, when no element of the
 * block's rows or of the queries is exotic (lds__bf16_exotic), the f32 panel
 * and a multiply-add per element in that order give the same bits (no product
 * rounds, no partial sum comes near the flush range); otherwise the block goes
 * through the scalar definition. NaN scores are the default NaN in every kernel.
 */

/* finish() for the native bf16 path: cosine scaling, then any NaN as the default NaN. */
LDS_K_INLINE void finish_bf16(vf s, size_t lane0, const double *inv, float thr, bool lower,
                              uint64_t valid, float *out, uint64_t *mask)
{
    if (inv) {
        vd w;
        memcpy(&w, inv + lane0, sizeof w);
        s = __builtin_convertvector(__builtin_convertvector(s, vd) * w, vf);
    }
    const vi nan = s != s;
    s = (vf)(((vi)s & ~nan) | ((vi)splat(NAN) & nan));
    emit(s, lane0, thr, lower, valid, out, mask);
}

#if defined(LDS_K_DPBF16)
/* Packs rows [0, nr) as dwords of pairs: panel[p x LDS__PANEL + i] = dword p of
   row i (the high half zero past an odd dim; rows past nr in a used vector: zero). */
LDS_K_INLINE void pack_bf16(const uint8_t *rows, size_t rb, size_t nr, uint32_t dim,
                            uint32_t *panel)
{
    const size_t np = LDS__BF16_PAIRS(dim), nb = 2 * (size_t)dim;
    for (size_t g = 0; g < nr; g += LDS_K_LANES) {
        size_t gn = nr - g < LDS_K_LANES ? nr - g : LDS_K_LANES;
        for (size_t c = 0; c < np; c += LDS_K_LANES) {
            size_t wb = nb - 4 * c < 4 * LDS_K_LANES ? nb - 4 * c : 4 * LDS_K_LANES;
            vf cols[LDS_K_LANES];
            LDS_K_TRANSPOSE(rows + g * rb + 4 * c, rb, gn, wb, LDS_K_RAW, 0.0f, cols);
            uint32_t *dst = panel + c * LDS__PANEL + g;
#pragma GCC unroll 16
            for (size_t i = 0; i < LDS_K_LANES; i++)
                if (c + i < np)
                    memcpy(dst + i * LDS__PANEL, &cols[i], sizeof cols[i]);
        }
    }
}

/* QT queries x SV vectors of rows from vector s0, one vdpbf16ps per dword. */
LDS_K_INLINE void tile_bf16(const lds__block_args *a, size_t j0, int QT, const void *panelv,
                            size_t s0, int SV, uint64_t valid)
{
    const uint32_t *panel = (const uint32_t *)panelv;
    const size_t np = LDS__BF16_PAIRS(a->dim), qbs = a->qbstride;
    const uint32_t *qb = a->qb + j0 * qbs;
    vf acc[LDS_K_MAX_Q][LDS_K_SUB_VECS];
#pragma GCC unroll 8
    for (int j = 0; j < QT; j++)
#pragma GCC unroll 8
        for (int v = 0; v < SV; v++)
            acc[j][v] = (vf){0};
    const uint32_t *p = panel + s0 * LDS_K_LANES;
    for (size_t d = 0; d < np; d++, p += LDS__PANEL) {
        vi r[LDS_K_SUB_VECS];
#pragma GCC unroll 8
        for (int v = 0; v < SV; v++)
            memcpy(&r[v], p + v * LDS_K_LANES, sizeof r[v]);
#pragma GCC unroll 8
        for (int j = 0; j < QT; j++) {
            const vi qv = splat_i((int32_t)qb[(size_t)j * qbs + d]);
#pragma GCC unroll 8
            for (int v = 0; v < SV; v++)
                acc[j][v] = LDS_K_DPBF16(acc[j][v], r[v], qv);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < QT; j++)
#pragma GCC unroll 8
        for (int v = 0; v < SV; v++)
            finish_bf16(acc[j][v], (s0 + (size_t)v) * LDS_K_LANES, a->inv, a->thr[j0 + (size_t)j],
                        a->lower, valid, a->out + (j0 + (size_t)j) * LDS__PANEL,
                        a->mask + j0 + j);
}
#else
/* Whether any element of rows [0, nr) is exotic (lds__bf16_exotic), a vector of
   halves at a time (the rows' bytes run on where row_bytes is 2 dim). */
typedef uint16_t vh __attribute__((vector_size(LDS_K_LANES * 4)));
#define LDS_K_NH (LDS_K_LANES * 2)

LDS_K_INLINE unsigned bf16_span_exotic(const uint8_t *p, size_t n)
{
    size_t i = 0;
    vh bad = (vh){0};
    for (; i + LDS_K_NH <= n; i += LDS_K_NH) {
        vh b;
        memcpy(&b, p + 2 * i, sizeof b);
        const vh e = (b >> 7) & 0xFF, m = b & 0x7F;
        /* e == 0 with a nonzero m (denormal), or e outside [77, 187] for a nonzero e */
        bad |= (vh)((e == 0) & (m != 0)) | (vh)((e != 0) & ((vh)(e - 77) > 110));
    }
    unsigned any = 0;
    for (unsigned l = 0; l < LDS_K_NH; l++)
        any |= bad[l];
    for (; i < n; i++)
        any |= lds__bf16_exotic(lds__ld16(p + 2 * i));
    return any;
}

LDS_K_INLINE bool bf16_rows_exotic(const uint8_t *rows, size_t rb, size_t nr, uint32_t dim)
{
    if (rb == 2 * (size_t)dim)
        return bf16_span_exotic(rows, nr * dim) != 0;
    unsigned any = 0;
    for (size_t i = 0; i < nr; i++)
        any |= bf16_span_exotic(rows + i * rb, dim);
    return any != 0;
}

/* The scalar definition, for a block with an exotic element. */
static void bf16_block_exact(const lds__block_args *a, uint64_t valid)
{
    const size_t np = LDS__BF16_PAIRS(a->dim);
    for (size_t j = 0; j < a->nq; j++) {
        const uint32_t *qb = a->qb + j * a->qbstride;
        const float t = a->thr[j];
        uint64_t m = 0;
        for (size_t i = 0; i < a->nr; i++) {
            const uint8_t *row = a->rows + i * a->row_bytes;
            float acc = 0.0f;
            for (size_t p = 0; p < np; p++) {
                uint32_t r = lds__ld16(row + 4 * p);
                if (2 * p + 1 < a->dim)
                    r |= (uint32_t)lds__ld16(row + 4 * p + 2) << 16;
                acc = lds__bf16_step(acc, r, qb[p]);
            }
            float s = a->inv ? (float)((double)acc * a->inv[i]) : acc;
            if (isnan(s))
                s = NAN;
            a->out[j * LDS__PANEL + i] = s;
            if (isnan(t) || (a->lower ? t > s : s > t))
                m |= (uint64_t)1 << i;
        }
        a->mask[j] = m & valid;
    }
}

/* QT queries x SV vectors of rows from vector s0 of the f32 panel: a multiply-add
   per element, the high element of each pair first (exact in the fast range). */
LDS_K_INLINE void tile_bf16(const lds__block_args *a, size_t j0, int QT, const void *panelv,
                            size_t s0, int SV, uint64_t valid)
{
    const float *panel = (const float *)panelv;
    const uint32_t dim = a->dim;
    const size_t qs = a->qstride;
    const float *q = a->q + j0 * qs;
    vf acc[LDS_K_MAX_Q][LDS_K_SUB_VECS];
#pragma GCC unroll 8
    for (int j = 0; j < QT; j++)
#pragma GCC unroll 8
        for (int v = 0; v < SV; v++)
            acc[j][v] = (vf){0};
    const float *p = panel + s0 * LDS_K_LANES;
    uint32_t d = 0;
    for (; d + 1 < dim; d += 2) {
        vf hi[LDS_K_SUB_VECS], lo[LDS_K_SUB_VECS];
#pragma GCC unroll 8
        for (int v = 0; v < SV; v++) {
            memcpy(&hi[v], p + (size_t)(d + 1) * LDS__PANEL + v * LDS_K_LANES, sizeof hi[v]);
            memcpy(&lo[v], p + (size_t)d * LDS__PANEL + v * LDS_K_LANES, sizeof lo[v]);
        }
#pragma GCC unroll 8
        for (int j = 0; j < QT; j++) {
            const vf qh = splat(q[(size_t)j * qs + d + 1]), ql = splat(q[(size_t)j * qs + d]);
#pragma GCC unroll 8
            for (int v = 0; v < SV; v++) {
                acc[j][v] = LDS_K_FMA(qh, hi[v], acc[j][v]);
                acc[j][v] = LDS_K_FMA(ql, lo[v], acc[j][v]);
            }
        }
    }
    if (d < dim) { /* an odd dim: the zero high element (-0 + 0 is +0), then the last */
        vf lo[LDS_K_SUB_VECS];
#pragma GCC unroll 8
        for (int v = 0; v < SV; v++)
            memcpy(&lo[v], p + (size_t)d * LDS__PANEL + v * LDS_K_LANES, sizeof lo[v]);
#pragma GCC unroll 8
        for (int j = 0; j < QT; j++) {
            const vf ql = splat(q[(size_t)j * qs + d]);
#pragma GCC unroll 8
            for (int v = 0; v < SV; v++)
                acc[j][v] = LDS_K_FMA(ql, lo[v], acc[j][v] + (vf){0});
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < QT; j++)
#pragma GCC unroll 8
        for (int v = 0; v < SV; v++)
            finish_bf16(acc[j][v], (s0 + (size_t)v) * LDS_K_LANES, a->inv, a->thr[j0 + (size_t)j],
                        a->lower, valid, a->out + (j0 + (size_t)j) * LDS__PANEL,
                        a->mask + j0 + j);
}
#endif

LDS_K_INLINE void panel_body_bf16(const lds__block_args *a, const void *panel, size_t nvec,
                                  uint64_t valid)
{
    const size_t nq = a->nq;
    for (size_t s0 = 0; s0 < nvec; s0 += LDS_K_SUB_VECS) {
        size_t j = 0;
        if (nvec - s0 >= LDS_K_SUB_VECS) {
            for (; j + LDS_K_MAX_Q <= nq; j += LDS_K_MAX_Q)
                tile_bf16(a, j, LDS_K_MAX_Q, panel, s0, LDS_K_SUB_VECS, valid);
            switch (nq - j) {
            case 1:
                tile_bf16(a, j, 1, panel, s0, LDS_K_SUB_VECS, valid);
                break;
            case 2:
                tile_bf16(a, j, 2, panel, s0, LDS_K_SUB_VECS, valid);
                break;
            case 3:
                tile_bf16(a, j, 3, panel, s0, LDS_K_SUB_VECS, valid);
                break;
            case 4:
                tile_bf16(a, j, 4 < LDS_K_MAX_Q ? 4 : 1, panel, s0, LDS_K_SUB_VECS, valid);
                break;
            case 5:
                tile_bf16(a, j, 5 < LDS_K_MAX_Q ? 5 : 1, panel, s0, LDS_K_SUB_VECS, valid);
                break;
            default:
                break;
            }
        } else {
            for (size_t s = s0; s < nvec; s++)
                for (j = 0; j < nq; j++)
                    tile_bf16(a, j, 1, panel, s, 1, valid);
        }
    }
}

#if defined(LDS_K_DPBF16) && defined(LDS_K_SINGLE)
/* One query, no panel: each LANES x LANES block of dwords transposed in registers
   and fed straight into its rows' vdpbf16ps chains (the tiles' bits). */
LDS_K_INLINE void single_body_bf16(const lds__block_args *a, uint64_t valid)
{
    const size_t nr = a->nr, rb = a->row_bytes;
    const size_t nvec = (nr + LDS_K_LANES - 1) / LDS_K_LANES;
    const size_t np = LDS__BF16_PAIRS(a->dim), nb = 2 * (size_t)a->dim;
    const uint32_t *qb = a->qb;
    vf acc[LDS_K_NVEC];
#pragma GCC unroll 8
    for (size_t v = 0; v < LDS_K_NVEC; v++)
        acc[v] = (vf){0};
    for (size_t c = 0; c < np; c += LDS_K_LANES) {
        const size_t wb = nb - 4 * c < 4 * LDS_K_LANES ? nb - 4 * c : 4 * LDS_K_LANES;
#pragma GCC unroll 8
        for (size_t v = 0; v < LDS_K_NVEC; v++) {
            if (v >= nvec)
                break;
            const size_t g = v * LDS_K_LANES, gn = nr - g < LDS_K_LANES ? nr - g : LDS_K_LANES;
            vf cols[LDS_K_LANES];
            LDS_K_TRANSPOSE(a->rows + g * rb + 4 * c, rb, gn, wb, LDS_K_RAW, 0.0f, cols);
#pragma GCC unroll 16
            for (size_t i = 0; i < LDS_K_LANES; i++) {
                if (c + i >= np)
                    break;
                acc[v] = LDS_K_DPBF16(acc[v], (vi)cols[i], splat_i((int32_t)qb[c + i]));
            }
        }
    }
    a->mask[0] = 0;
#pragma GCC unroll 8
    for (size_t v = 0; v < LDS_K_NVEC; v++)
        if (v < nvec)
            finish_bf16(acc[v], v * LDS_K_LANES, a->inv, a->thr[0], a->lower, valid, a->out,
                        a->mask);
}
#endif

static void b_bf16_native(const lds__block_args *a)
{
    const uint64_t valid = a->nr >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << a->nr) - 1;
    const size_t nvec = (a->nr + LDS_K_LANES - 1) / LDS_K_LANES;
#if defined(LDS_K_DPBF16)
#if defined(LDS_K_SINGLE)
    if (a->nq == 1) {
        single_body_bf16(a, valid);
        return;
    }
#endif
    uint32_t *panel = (uint32_t *)(void *)a->panel;
    pack_bf16(a->rows, a->row_bytes, a->nr, a->dim, panel);
#else
    if (a->qb_exotic || bf16_rows_exotic(a->rows, a->row_bytes, a->nr, a->dim)) {
        bf16_block_exact(a, valid);
        return;
    }
    float *panel = a->panel;
    pack(a->rows, a->row_bytes, a->nr, a->dim, LDS_DTYPE_BF16, 0.0f, panel);
#endif
    for (size_t j = 0; j < a->nq; j++)
        a->mask[j] = 0;
    panel_body_bf16(a, panel, nvec, valid);
}

LDS_K_INLINE void block_body(const lds__block_args *a, lds_dtype dt, bool l2)
{
    const uint64_t valid = a->nr >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << a->nr) - 1;
#if defined(LDS_K_TRANSPOSE) && defined(LDS_K_SINGLE)
    if (a->nq == 1) {
        single_body(a, dt, l2, valid);
        return;
    }
#endif
    pack(a->rows, a->row_bytes, a->nr, a->dim, dt, a->scale, a->panel);
    const size_t nvec = (a->nr + LDS_K_LANES - 1) / LDS_K_LANES;
    for (size_t j = 0; j < a->nq; j++)
        a->mask[j] = 0;
    panel_body(a->q, a->qstride, a->nq, a->panel, nvec, a->dim, l2, a->inv, a->thr, a->lower, valid,
               a->out, a->mask);
}

#define LDS_K_SPEC(NAME, DT, L2)                                                                   \
    static void NAME(const lds__block_args *a)                                                     \
    {                                                                                              \
        block_body(a, DT, L2);                                                                     \
    }
LDS_K_SPEC(b_f32_dot, LDS_DTYPE_F32, false)
LDS_K_SPEC(b_f32_l2, LDS_DTYPE_F32, true)
LDS_K_SPEC(b_f16_dot, LDS_DTYPE_F16, false)
LDS_K_SPEC(b_f16_l2, LDS_DTYPE_F16, true)
LDS_K_SPEC(b_bf16_dot, LDS_DTYPE_BF16, false)
LDS_K_SPEC(b_bf16_l2, LDS_DTYPE_BF16, true)
LDS_K_SPEC(b_i8_dot, LDS_DTYPE_I8, false)
LDS_K_SPEC(b_i8_l2, LDS_DTYPE_I8, true)

static void block(const lds__block_args *a)
{
    switch (a->dtype) {
    case LDS_DTYPE_F32:
        (a->l2 ? b_f32_l2 : b_f32_dot)(a);
        break;
    case LDS_DTYPE_F16:
        (a->l2 ? b_f16_l2 : b_f16_dot)(a);
        break;
    case LDS_DTYPE_BF16:
        if (a->qb)
            b_bf16_native(a);
        else
            (a->l2 ? b_bf16_l2 : b_bf16_dot)(a);
        break;
    case LDS_DTYPE_I8:
        if (a->qi)
            b_i8_native(a);
        else
            (a->l2 ? b_i8_l2 : b_i8_dot)(a);
        break;
    }
}

const lds__kernel LDS_K_SYM = {LDS_K_NAME, LDS_K_LANES, LDS_K_FUSED, block};
