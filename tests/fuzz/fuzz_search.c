/* Fuzz target: the search entry points' argument checks and results
 * (lds_index_search, lds_index_search_batch, lds_search_options). Input: 8 control
 * bytes, then row data and queries as raw floats:
 *   0: dtype (bits 0-1) and metric (bits 2-3);  1: dim - 1 (mod 40);
 *   2: rows (mod 200);  3: queries (mod 20);  4: k (values above 200 stand for
 *   huge ones); 5: threads (bits 0-3), options (bits 4-5: NULL, the default
 *   size, the first layout, a bad size), the query pointer one float past an
 *   aligned one (bit 6), a dim mismatch (bit 7); 6: kernel (an index into
 *   lds_search_kernels, past it an unknown name); 7: NULL arguments (bits 0-2).
 * Rows are the input's bytes as small finite values (the writer refuses others);
 * queries are the input's floats as they come (NaN, infinities, zeros).
 * Checked: a failure is one of the documented statuses with a message and
 * writes nothing; a success gives min(k, rows) hits per query, rows in range
 * and distinct, best first (NaN last), and batch hits equal to one query at a
 * time, bit for bit. */
#include "fuzz_common.h"

#include <math.h>

static bool ranks_before(lds_hit a, lds_hit b, bool lower)
{
    if (isnan(a.score) != isnan(b.score))
        return isnan(b.score);
    if (!isnan(a.score) && a.score != b.score)
        return lower ? a.score < b.score : a.score > b.score;
    return a.row < b.row;
}

/* The index over *mem (the caller frees it after the index). */
static lds_index *make_index(lds_dtype dt, lds_metric mt, uint32_t dim, uint32_t rows,
                             fz_input *in, char **memp)
{
    char *mem = NULL;
    size_t memn = 0;
    FILE *f = open_memstream(&mem, &memn);
    if (!f)
        return NULL;
    lds_writer_options o;
    lds_writer_options_default(&o);
    o.dim = dim;
    o.dtype = dt;
    o.metric = mt;
    o.chunk_bytes = LDS_CHUNKS_NONE;
    lds_writer *w = NULL;
    float row[64];
    bool ok = lds_writer_open_file(f, &o, &w, NULL) == LDS_OK;
    for (uint32_t r = 0; ok && r < rows; r++) {
        for (uint32_t i = 0; i < dim; i++)
            row[i] = ((float)fz_byte(in) - 128.0f) / 128.0f;
        ok = lds_writer_add_row(w, row, dim, r, NULL, 0, NULL) == LDS_OK;
    }
    ok = ok && lds_writer_finish(w, NULL) == LDS_OK;
    lds_writer_free(w);
    fclose(f);
    lds_index *idx = NULL;
    if (ok && memn > LDS_HEADER_SIZE &&
        lds_index_from_payload(mem + LDS_HEADER_SIZE, memn - LDS_HEADER_SIZE, NULL, &idx, NULL) !=
            LDS_OK)
        abort(); /* the writer's own output must parse */
    if (!idx) {
        free(mem);
        return NULL;
    }
    *memp = mem;
    return idx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in = {data, size};
    uint8_t c[8];
    for (int i = 0; i < 8; i++)
        c[i] = fz_byte(&in);
    static const lds_dtype dts[] = {LDS_DTYPE_F32, LDS_DTYPE_F16, LDS_DTYPE_BF16, LDS_DTYPE_I8};
    static const lds_metric mts[] = {LDS_METRIC_COSINE, LDS_METRIC_DOT, LDS_METRIC_L2,
                                     LDS_METRIC_DOT};
    const lds_metric mt = mts[(c[0] >> 2) & 3];
    const uint32_t dim = 1 + c[1] % 40, rows = c[2] % 200;
    const size_t nq = c[3] % 20;
    const size_t k = c[4] <= 200 ? c[4] : c[4] == 255 ? SIZE_MAX / 2 : (size_t)c[4] << 20;
    char *mem = NULL;
    lds_index *idx = make_index(dts[c[0] & 3], mt, dim, rows, &in, &mem);
    if (!idx)
        return 0;
    const bool lower = mt == LDS_METRIC_L2;
    const size_t qdim = (c[5] & 0x80) ? dim + 1 : dim;
    float *qmem = calloc(nq * qdim + 2, sizeof(float));
    if (!qmem)
        abort();
    float *q = (c[5] & 0x40) ? qmem + 1 : qmem;
    for (size_t i = 0; i < nq * qdim && in.n >= 4; i++) {
        memcpy(&q[i], in.p, 4);
        in.p += 4;
        in.n -= 4;
    }
    lds_search_options o;
    lds_search_options_default(&o);
    o.threads = c[5] & 15;
    const char *names[8];
    size_t nk = lds_search_kernels(names, 8);
    o.kernel = c[6] < nk ? names[c[6]] : c[6] == 200 ? "no-such-kernel" : NULL;
    const int om = (c[5] >> 4) & 3;
    if (om == 2)
        o.size = LDS_SEARCH_OPTIONS_MIN_SIZE;
    if (om == 3)
        o.size = LDS_SEARCH_OPTIONS_MIN_SIZE - 1;
    const size_t kk = k < 512 ? k : 512; /* room for what a success can write */
    const size_t want = k < rows ? k : rows;
    lds_hit *h = malloc((nq ? nq : 1) * (kk ? kk : 1) * sizeof(lds_hit));
    size_t *n = malloc((nq ? nq : 1) * sizeof(size_t));
    lds_hit *one = malloc((kk ? kk : 1) * sizeof(lds_hit));
    if (!h || !n || !one)
        abort();
    for (size_t j = 0; j < nq; j++)
        n[j] = 777;
    lds_error err;
    lds_error_init(&err);
    /* Huge k with real queries would need huge buffers (query j's hits start at j x k):
       only with a NULL argument or a dim mismatch, which fail first. */
    const bool huge = k > 512 && nq > 0;
    lds_status st = LDS_OK;
    if (!huge || (c[7] & 7) || qdim != dim)
        st = lds_index_search_batch((c[7] & 1) ? NULL : idx, (c[7] & 2) ? NULL : q, nq, qdim, k,
                                    om == 0 ? NULL : &o, (c[7] & 4) ? NULL : h, n, &err);
    if (st != LDS_OK) {
        if ((st != LDS_E_INVALID_ARG && st != LDS_E_BAD_VALUE && st != LDS_E_UNSUPPORTED) ||
            err.status != st || err.message[0] == 0)
            abort();
        for (size_t j = 0; j < nq; j++)
            if (n[j] != 777)
                abort(); /* nothing written on failure */
    } else if (!(c[7] & 7) && qdim == dim && !huge) {
        for (size_t j = 0; j < nq; j++) {
            if (n[j] != want)
                abort();
            const lds_hit *hj = h + j * k;
            for (size_t i = 0; i < want; i++) {
                if (hj[i].row >= rows)
                    abort();
                if (i > 0 && !ranks_before(hj[i - 1], hj[i], lower))
                    abort(); /* strictly ordered: also no row twice */
            }
            size_t n1 = 0;
            if (lds_index_search(idx, q + j * dim, dim, k, one, &n1, NULL) != LDS_OK ||
                n1 != want)
                abort();
            /* lds_index_search uses the automatic kernel: compare where o picks it too,
               or where every kernel gives the same bits (i8 under dot and cosine). */
            bool same_kernel = om == 0 || om == 2 || !o.kernel ||
                               strcmp(o.kernel, names[0]) == 0 ||
                               (lds_index_dtype(idx) == LDS_DTYPE_I8 && mt != LDS_METRIC_L2);
            if (same_kernel)
                for (size_t i = 0; i < want; i++)
                    if (one[i].row != hj[i].row ||
                        memcmp(&one[i].score, &hj[i].score, sizeof(float)) != 0)
                        abort();
        }
    }
    free(h);
    free(n);
    free(one);
    free(qmem);
    lds_index_free(idx);
    free(mem);
    return 0;
}
