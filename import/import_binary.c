/* word2vec binary and .fvecs: rows of little-endian float32 with a key or a width in front. */
#include "import_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Decodes `dim` little-endian float32 from `raw` into `vec`, refusing any that
   is not finite. `off` is the file offset of raw[0]. */
static lds_status decode_f32(const unsigned char *raw, float *vec, size_t dim, uint64_t row,
                             uint64_t off, lds_error *err)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* The common row: copied whole, then one pass over the exponent fields (a loop the
       compiler vectorises); only a row holding a NaN or an infinity takes the loop below,
       which names the element. */
    memcpy(vec, raw, dim * sizeof *vec);
    uint32_t bad = 0;
    for (size_t k = 0; k < dim; k++) {
        uint32_t bits;
        memcpy(&bits, raw + 4 * k, sizeof bits);
        bad |= (uint32_t)((bits & 0x7f800000u) == 0x7f800000u);
    }
    if (!bad)
        return LDS_OK;
#endif
    for (size_t k = 0; k < dim; k++) {
        uint32_t bits = lds__imp_le32(raw + 4 * k);
        float v;
        memcpy(&v, &bits, sizeof v);
        if (!isfinite(v))
            return lds__imp_fail(err, LDS_E_BAD_VALUE, "row", off + 4 * k, row,
                                 "row %llu (byte %llu): element %zu is %s, not a finite number",
                                 (unsigned long long)(row - 1), (unsigned long long)(off + 4 * k),
                                 k, isnan(v) ? "NaN" : "infinite");
        vec[k] = v;
    }
    return LDS_OK;
}

/* Reads one byte that the caller has peeked. */
static lds_status take_byte(lds__imp_reader *r, lds_error *err)
{
    unsigned char b;
    size_t got;
    return lds__imp_reader_read(r, &b, 1, &got, err);
}

/* The first line, "N D": checked against the limits and, for a sized input,
   against the bytes that follow it, before anything is allocated. */
static lds_status read_w2v_bin_header(lds__imp_ctx *c, uint64_t *rows, uint64_t *dim,
                                      lds_error *err)
{
    lds__imp_reader *in = &c->in;
    const lds_limits *lim = &c->opts->limits;
    char *line;
    size_t len;
    uint64_t off;
    lds_status st = lds__imp_reader_line(in, 1, &line, &len, &off, err);
    if (st != LDS_OK)
        return st;
    if (!line || !lds__imp_is_w2v_header(line, len, rows, dim))
        return lds__imp_fail(err, LDS_E_PARSE, "header", 0, 1,
                             "byte 0: expected the word2vec header \"N D\" (two non-negative "
                             "integers) on the first line");
    if (*dim == 0)
        return lds__imp_fail(err, LDS_E_BAD_VALUE, "header", 0, 1,
                             "byte 0: the header declares D = 0 dimensions");
    if (*dim > lim->max_dim || *dim > UINT32_MAX)
        return lds__imp_fail(err, LDS_E_LIMIT, "header", 0, 1,
                             "byte 0: D = %llu is above max_dim = %llu", (unsigned long long)*dim,
                             (unsigned long long)lim->max_dim);
    if (*rows > lim->max_rows)
        return lds__imp_fail(err, LDS_E_LIMIT, "header", 0, 1,
                             "byte 0: N = %llu is above max_rows = %llu", (unsigned long long)*rows,
                             (unsigned long long)lim->max_rows);
    size_t row_bytes = (size_t)*dim * 4;
    uint64_t here = lds__imp_reader_offset(in);
    if (in->size != UINT64_MAX) {
        /* Each row is at least a 1-byte key, a space and its floats. */
        uint64_t need;
        if (__builtin_mul_overflow((uint64_t)row_bytes + 2, *rows, &need) || need > in->size - here)
            return lds__imp_fail(err, LDS_E_TRUNCATED, "header", 0, 1,
                                 "byte 0: the header promises %llu rows of %llu float32, more "
                                 "than the %llu bytes that follow it",
                                 (unsigned long long)*rows, (unsigned long long)*dim,
                                 (unsigned long long)(in->size - here));
    }
    return LDS_OK;
}

/* A growing key buffer, reused from row to row. */
typedef struct key_buf {
    char *p;
    size_t len, cap;
} key_buf;

/* Row r's key: the bytes up to its space, after any line ends the previous row
   left (writers differ on whether a row ends in '\n'). *row_off is the row's
   first byte. A key may hold any byte but the space, so it has no other end. */
static lds_status read_w2v_key(lds__imp_ctx *c, uint64_t r, uint64_t rows, key_buf *k,
                               uint64_t *row_off, lds_error *err)
{
    lds__imp_reader *in = &c->in;
    const lds_limits *lim = &c->opts->limits;
    uint64_t row = r + 1;
    int b;
    lds_status st;
    for (;;) {
        if ((st = lds__imp_reader_peek(in, &b, err)) != LDS_OK)
            return st;
        if (b != '\n')
            break;
        if ((st = take_byte(in, err)) != LDS_OK)
            return st;
    }
    *row_off = lds__imp_reader_offset(in);
    k->len = 0;
    for (;;) {
        if ((st = lds__imp_reader_peek(in, &b, err)) != LDS_OK)
            return st;
        if (b < 0)
            return lds__imp_fail(err, LDS_E_TRUNCATED, "row", lds__imp_reader_offset(in), row,
                                 "row %llu (byte %llu): the file ends inside the key; the "
                                 "header promises %llu rows",
                                 (unsigned long long)(row - 1), (unsigned long long)*row_off,
                                 (unsigned long long)rows);
        if ((st = take_byte(in, err)) != LDS_OK)
            return st;
        if (b == ' ')
            return LDS_OK;
        if (k->len >= lim->max_key_bytes)
            return lds__imp_fail(err, LDS_E_LIMIT, "row", *row_off, row,
                                 "row %llu (byte %llu): key longer than max_key_bytes = %llu",
                                 (unsigned long long)(row - 1), (unsigned long long)*row_off,
                                 (unsigned long long)lim->max_key_bytes);
        if (k->len == k->cap) {
            size_t cap = k->cap ? k->cap * 2 : 64;
            char *p = realloc(k->p, cap);
            if (!p)
                return lds__imp_fail(err, LDS_E_NOMEM, "row", *row_off, row, "out of memory (key)");
            k->p = p;
            k->cap = cap;
        }
        k->p[k->len++] = (char)b;
    }
}

/* After the last row only line ends and spaces may follow, at most max_idle_bytes:
   a bound, so a small compressed file cannot decode to endless whitespace. */
static lds_status check_w2v_tail(lds__imp_ctx *c, uint64_t rows, lds_error *err)
{
    lds__imp_reader *in = &c->in;
    uint64_t tail = lds__imp_reader_offset(in);
    uint64_t max_idle =
        c->opts->max_idle_bytes ? c->opts->max_idle_bytes : LDS_IMPORT_DEFAULT_MAX_IDLE;
    for (;;) {
        int b;
        lds_status st = lds__imp_reader_peek(in, &b, err);
        if (st != LDS_OK)
            return st;
        if (b < 0)
            return LDS_OK;
        if (lds__imp_reader_offset(in) - tail >= max_idle)
            return lds__imp_fail(err, LDS_E_LIMIT, "row", tail, rows + 1,
                                 "byte %llu: line ends and spaces after the %llu rows run on for "
                                 "more than max_idle_bytes = %llu bytes",
                                 (unsigned long long)tail, (unsigned long long)rows,
                                 (unsigned long long)max_idle);
        if (b != '\n' && b != '\r' && b != ' ' && b != '\t') {
            uint64_t at = lds__imp_reader_offset(in);
            return lds__imp_fail(err, LDS_E_TRAILING, "row", at, rows + 1,
                                 "byte %llu: data after the %llu rows the header declares",
                                 (unsigned long long)at, (unsigned long long)rows);
        }
        if ((st = take_byte(in, err)) != LDS_OK)
            return st;
    }
}

/* word2vec binary: the header line "N D", then N rows of a key, a space and D
   little-endian float32. */
lds_status lds__import_w2v_binary(lds__imp_ctx *c, lds_error *err)
{
    lds__imp_reader *in = &c->in;
    lds__imp_sink *s = &c->sink;
    s->line_field = "row";
    s->line_base = 1;
    uint64_t rows, dim;
    lds_status st = read_w2v_bin_header(c, &rows, &dim, err);
    if (st != LDS_OK)
        return st;
    size_t row_bytes = (size_t)dim * 4;
    uint64_t here = lds__imp_reader_offset(in);
    unsigned char *raw = malloc(row_bytes);
    float *vec = malloc((size_t)dim * sizeof *vec);
    key_buf key = {NULL, 0, 0};
    if (!raw || !vec) {
        st = lds__imp_fail(err, LDS_E_NOMEM, "row", here, 1, "out of memory (one row)");
        goto out;
    }
    if ((st = lds__imp_sink_open(s, (uint32_t)dim, true, err)) != LDS_OK)
        goto out;
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t row = r + 1, row_off;
        if ((st = read_w2v_key(c, r, rows, &key, &row_off, err)) != LDS_OK)
            goto out;
        uint64_t data_off = lds__imp_reader_offset(in);
        size_t got;
        if ((st = lds__imp_reader_read(in, raw, row_bytes, &got, err)) != LDS_OK)
            goto out;
        if (got < row_bytes) {
            st = lds__imp_fail(err, LDS_E_TRUNCATED, "row", data_off + got, row,
                               "row %llu (byte %llu): the file ends after %zu of the row's %zu "
                               "bytes; the header promises %llu rows",
                               (unsigned long long)(row - 1), (unsigned long long)row_off, got,
                               row_bytes, (unsigned long long)rows);
            goto out;
        }
        if ((st = decode_f32(raw, vec, (size_t)dim, row, data_off, err)) != LDS_OK ||
            (st = lds__imp_sink_row(s, vec, key.p, key.len, row_off, err)) != LDS_OK)
            goto out;
    }
    st = check_w2v_tail(c, rows, err);
out:
    free(raw);
    free(vec);
    free(key.p);
    return st;
}

/* Reads a little-endian int32 row width; *got < 4 only at the end of input. */
static lds_status read_width(lds__imp_reader *in, int32_t *d, size_t *got, lds_error *err)
{
    unsigned char b[4];
    lds_status st = lds__imp_reader_read(in, b, 4, got, err);
    uint32_t u = lds__imp_le32(b);
    memcpy(d, &u, sizeof *d);
    return st;
}

/* Row 0's width d, which fixes D for the file: checked against the limits and,
   for a sized input, the bytes that follow it. */
static lds_status read_fvecs_dim(lds__imp_ctx *c, int32_t *d0, lds_error *err)
{
    lds__imp_reader *in = &c->in;
    const lds_limits *lim = &c->opts->limits;
    size_t got;
    lds_status st = read_width(in, d0, &got, err);
    if (st != LDS_OK)
        return st;
    if (got == 0)
        return lds__imp_fail(err, LDS_E_PARSE, "fvecs.d", 0, 1,
                             "row 0 (byte 0): the file is empty, so it has no dimension");
    if (got < 4)
        return lds__imp_fail(err, LDS_E_TRUNCATED, "fvecs.d", 0, 1,
                             "row 0 (byte 0): the file ends inside the row's width");
    if (*d0 <= 0)
        return lds__imp_fail(err, LDS_E_BAD_VALUE, "fvecs.d", 0, 1,
                             "row 0 (byte 0): d = %ld; a row's dimension must be positive",
                             (long)*d0);
    if ((uint64_t)*d0 > lim->max_dim)
        return lds__imp_fail(err, LDS_E_LIMIT, "fvecs.d", 0, 1,
                             "row 0 (byte 0): d = %ld is above max_dim = %llu", (long)*d0,
                             (unsigned long long)lim->max_dim);
    size_t dim = (size_t)*d0, data_bytes = dim * 4;
    if (in->size != UINT64_MAX && data_bytes > in->size - 4)
        return lds__imp_fail(err, LDS_E_TRUNCATED, "fvecs.d", 0, 1,
                             "row 0 (byte 0): d = %zu needs %zu bytes of floats, but the file has "
                             "%llu after the width",
                             dim, data_bytes, (unsigned long long)(in->size - 4));
    return LDS_OK;
}

/* Row r's width (row 0's was read by read_fvecs_dim): every row repeats it, and
   one that differs is a damaged or concatenated file. *end is set at a clean end
   of the input, which .fvecs has no other way to say. */
static lds_status read_fvecs_width(lds__imp_reader *in, uint64_t r, uint64_t row_off, int32_t d0,
                                   bool *end, lds_error *err)
{
    uint64_t row = r + 1;
    int32_t d;
    size_t got;
    *end = false;
    lds_status st = read_width(in, &d, &got, err);
    if (st != LDS_OK)
        return st;
    if (got == 0) {
        *end = true;
        return LDS_OK;
    }
    if (got < 4)
        return lds__imp_fail(err, LDS_E_TRUNCATED, "fvecs.d", row_off, row,
                             "row %llu (byte %llu): the file ends inside the row's width",
                             (unsigned long long)(row - 1), (unsigned long long)row_off);
    if (d != d0)
        return lds__imp_fail(err, LDS_E_PARSE, "fvecs.d", row_off, row,
                             "row %llu (byte %llu): d = %ld, but row 0 has d = %ld",
                             (unsigned long long)(row - 1), (unsigned long long)row_off, (long)d,
                             (long)d0);
    return LDS_OK;
}

/* .fvecs (the TEXMEX SIFT and GIST sets' format): rows of a little-endian int32 width d and
   d float32, no header; keys, when given, come from a keys file. */
lds_status lds__import_fvecs(lds__imp_ctx *c, lds_error *err)
{
    lds__imp_reader *in = &c->in;
    lds__imp_sink *s = &c->sink;
    const lds_limits *lim = &c->opts->limits;
    bool with_keys = c->keys.fd >= 0;
    s->line_field = with_keys ? "keys_path" : "row";
    s->line_base = 1;
    int32_t d0;
    size_t got;
    lds_status st = read_fvecs_dim(c, &d0, err);
    if (st != LDS_OK)
        return st;
    size_t dim = (size_t)d0;
    size_t data_bytes = dim * 4;
    uint64_t row_bytes = 4 + (uint64_t)data_bytes;
    /* A file that is a whole number of rows tells N before any row is read. */
    bool whole = in->size != UINT64_MAX && in->size % row_bytes == 0;
    uint64_t n = whole ? in->size / row_bytes : 0;
    if (whole && n > lim->max_rows)
        return lds__imp_fail(err, LDS_E_LIMIT, "fvecs.d", 0, 1,
                             "the file holds %llu rows of d = %zu, above max_rows = %llu",
                             (unsigned long long)n, dim, (unsigned long long)lim->max_rows);
    uint64_t key_lines = 0;
    if (with_keys) {
        if ((st = lds__imp_keys_count(c, &key_lines, err)) != LDS_OK)
            return st;
        if (whole && key_lines != n)
            return lds__imp_fail(err, LDS_E_LENGTH_MISMATCH, "keys_path", 0, 0,
                                 "the keys file has %llu lines but the .fvecs file has %llu rows",
                                 (unsigned long long)key_lines, (unsigned long long)n);
    }

    unsigned char *raw = malloc(data_bytes);
    float *vec = malloc(dim * sizeof *vec);
    if (!raw || !vec) {
        st = lds__imp_fail(err, LDS_E_NOMEM, "row", 0, 1, "out of memory (one row)");
        goto out;
    }
    if ((st = lds__imp_sink_open(s, (uint32_t)dim, with_keys, err)) != LDS_OK)
        goto out;
    for (uint64_t r = 0;; r++) {
        uint64_t row = r + 1;
        uint64_t row_off = lds__imp_reader_offset(in) - (r == 0 ? 4 : 0);
        if (r > 0) {
            bool end;
            if ((st = read_fvecs_width(in, r, row_off, d0, &end, err)) != LDS_OK)
                goto out;
            if (end)
                break;
        }
        if ((st = lds__imp_reader_read(in, raw, data_bytes, &got, err)) != LDS_OK)
            goto out;
        if (got < data_bytes) {
            st = lds__imp_fail(err, LDS_E_TRUNCATED, "row", row_off + 4 + got, row,
                               "row %llu (byte %llu): the file ends after %zu of the row's %zu "
                               "bytes of floats",
                               (unsigned long long)(row - 1), (unsigned long long)row_off, got,
                               data_bytes);
            goto out;
        }
        if ((st = decode_f32(raw, vec, dim, row, row_off + 4, err)) != LDS_OK)
            goto out;
        const char *key = NULL;
        size_t klen = 0;
        uint64_t key_off = row_off;
        if (with_keys) {
            key_off = lds__imp_reader_offset(&c->keys);
            if ((st = lds__imp_keys_next(c, r, &key, &klen, err)) != LDS_OK)
                goto out;
        }
        if ((st = lds__imp_sink_row(s, vec, key, klen, key_off, err)) != LDS_OK)
            goto out;
    }
    /* An unsized input (a pipe) learns N only at its end. */
    if (with_keys && key_lines != s->rows)
        st = lds__imp_fail(err, LDS_E_LENGTH_MISMATCH, "keys_path", 0, 0,
                           "the keys file has %llu lines but the .fvecs file has %llu rows",
                           (unsigned long long)key_lines, (unsigned long long)s->rows);
out:
    free(raw);
    free(vec);
    return st;
}
