/* NumPy .npy (format versions 1.0, 2.0, 3.0): a 2-D array of float16, float32, float64,
   int8 or uint8, either byte order, C or Fortran order. */
#include "import_internal.h"

#include <errno.h>
#include <math.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAGIC      "\x93NUMPY"
#define NPY_MAGIC_SIZE 6
/* Dimensions the shape parser keeps; a longer shape is refused as not 2-D. */
#define NPY_MAX_NDIM 8

/* The three entries of an .npy header dict. */
typedef struct npy_header {
    char descr[16]; /* the first bytes of 'descr', for messages; descr_len is its length */
    size_t descr_len;
    char kind;       /* 'f', 'i' or 'u' when 'descr' is one of the accepted ones, else 0 */
    size_t esize;    /* bytes per element */
    bool big_endian; /* '>' */
    bool fortran_order;
    size_t ndim;
    uint64_t shape[NPY_MAX_NDIM];
} npy_header;

/* A cursor over the header text; `base` is the file offset of text[0]. */
typedef struct cursor {
    const char *text;
    size_t len, i;
    uint64_t base;
    lds_error *err;
} cursor;

static lds_status bad(cursor *c, lds_status st, const char *what)
{
    return lds__imp_fail(c->err, st, "npy.header", c->base + c->i, 0, "byte %llu: .npy header: %s",
                         (unsigned long long)(c->base + c->i), what);
}

static void skip_ws(cursor *c)
{
    while (c->i < c->len && (c->text[c->i] == ' ' || c->text[c->i] == '\t' ||
                             c->text[c->i] == '\n' || c->text[c->i] == '\r'))
        c->i++;
}

static bool eat(cursor *c, char ch)
{
    skip_ws(c);
    if (c->i < c->len && c->text[c->i] == ch) {
        c->i++;
        return true;
    }
    return false;
}

static bool eat_word(cursor *c, const char *word)
{
    size_t n = strlen(word);
    skip_ws(c);
    if (c->len - c->i >= n && memcmp(c->text + c->i, word, n) == 0) {
        c->i += n;
        return true;
    }
    return false;
}

/* A Python string literal in single or double quotes, without escapes. */
static bool string(cursor *c, const char **s, size_t *n)
{
    skip_ws(c);
    if (c->i >= c->len || (c->text[c->i] != '\'' && c->text[c->i] != '"'))
        return false;
    char q = c->text[c->i++];
    size_t start = c->i;
    while (c->i < c->len && c->text[c->i] != q) {
        if (c->text[c->i] == '\\')
            return false;
        c->i++;
    }
    if (c->i >= c->len)
        return false;
    *s = c->text + start;
    *n = c->i - start;
    c->i++;
    return true;
}

static lds_status parse_shape(cursor *c, npy_header *h)
{
    if (!eat(c, '('))
        return bad(c, LDS_E_PARSE, "'shape' is not a tuple");
    h->ndim = 0;
    for (;;) {
        if (eat(c, ')'))
            return LDS_OK;
        skip_ws(c);
        size_t start = c->i;
        while (c->i < c->len && c->text[c->i] >= '0' && c->text[c->i] <= '9')
            c->i++;
        uint64_t v;
        if (!lds__imp_parse_u64(c->text + start, c->i - start, &v)) {
            c->i = start;
            return bad(c, LDS_E_PARSE, "a 'shape' entry is not a non-negative integer");
        }
        if (c->i < c->len && c->text[c->i] == 'L') /* written by Python 2 */
            c->i++;
        if (h->ndim == NPY_MAX_NDIM)
            return bad(c, LDS_E_UNSUPPORTED, "'shape' has too many dimensions; expected (N, D)");
        h->shape[h->ndim++] = v;
        if (!eat(c, ',')) {
            if (eat(c, ')'))
                return LDS_OK;
            return bad(c, LDS_E_PARSE, "expected ',' or ')' in 'shape'");
        }
    }
}

/* Parses the header dict: exactly the keys 'descr', 'fortran_order', 'shape'. */
static lds_status parse_header(cursor *c, npy_header *h)
{
    bool seen[3] = {false, false, false};
    if (!eat(c, '{'))
        return bad(c, LDS_E_PARSE, "expected '{'");
    for (;;) {
        if (eat(c, '}'))
            break;
        const char *key;
        size_t klen;
        size_t key_at = c->i;
        if (!string(c, &key, &klen))
            return bad(c, LDS_E_PARSE, "expected a quoted key");
        int which = -1;
        if (klen == 5 && memcmp(key, "descr", 5) == 0)
            which = 0;
        else if (klen == 13 && memcmp(key, "fortran_order", 13) == 0)
            which = 1;
        else if (klen == 5 && memcmp(key, "shape", 5) == 0)
            which = 2;
        if (which < 0 || seen[which]) {
            c->i = key_at;
            return bad(c, LDS_E_PARSE,
                       which < 0 ? "unknown key (expected descr, fortran_order, shape)"
                                 : "repeated key");
        }
        seen[which] = true;
        if (!eat(c, ':'))
            return bad(c, LDS_E_PARSE, "expected ':'");
        lds_status st = LDS_OK;
        if (which == 0) {
            const char *s;
            size_t n;
            skip_ws(c);
            if (c->i < c->len && c->text[c->i] == '[')
                return bad(c, LDS_E_UNSUPPORTED, "structured dtypes are not supported");
            if (!string(c, &s, &n))
                return bad(c, LDS_E_PARSE, "'descr' is not a string");
            /* Compared by length, as numpy's dtype() does: '<f4\x00junk' is no '<f4'.
               Accepted: [<>]f2, [<>]f4, [<>]f8, and [|<>]i1, [|<>]u1. */
            h->kind = 0;
            if (n == 3 && (s[0] == '<' || s[0] == '>' || s[0] == '|')) {
                char k = s[1], w = s[2];
                bool one = w == '1' && (k == 'i' || k == 'u');
                bool flt = k == 'f' && (w == '2' || w == '4' || w == '8') && s[0] != '|';
                if (one || flt) {
                    h->kind = k;
                    h->esize = (size_t)(w - '0');
                    h->big_endian = s[0] == '>';
                }
            }
            h->descr_len = n;
            if (n >= sizeof h->descr)
                n = sizeof h->descr - 1;
            memcpy(h->descr, s, n);
            h->descr[n] = '\0';
        } else if (which == 1) {
            if (eat_word(c, "True"))
                h->fortran_order = true;
            else if (eat_word(c, "False"))
                h->fortran_order = false;
            else
                return bad(c, LDS_E_PARSE, "'fortran_order' is neither True nor False");
        } else if ((st = parse_shape(c, h)) != LDS_OK) {
            return st;
        }
        if (!eat(c, ',')) {
            if (eat(c, '}'))
                break;
            return bad(c, LDS_E_PARSE, "expected ',' or '}'");
        }
    }
    skip_ws(c);
    if (c->i != c->len)
        return bad(c, LDS_E_PARSE, "text after the closing '}'");
    if (!seen[0] || !seen[1] || !seen[2])
        return bad(c, LDS_E_PARSE,
                   !seen[0]   ? "no 'descr'"
                   : !seen[1] ? "no 'fortran_order'"
                              : "no 'shape'");
    return LDS_OK;
}

/* Element k of a raw row as a double (exact for every accepted dtype). */
static double element(const unsigned char *p, const npy_header *h)
{
    unsigned char b[8];
    size_t n = h->esize;
    for (size_t i = 0; i < n; i++)
        b[i] = h->big_endian ? p[n - 1 - i] : p[i];
    switch (h->kind) {
    case 'i':
        return (double)(int8_t)b[0];
    case 'u':
        return (double)b[0];
    default:
        break;
    }
    if (n == 2)
        return (double)lds_f16_to_f32(lds__imp_le16(b));
    if (n == 4) {
        uint32_t bits = lds__imp_le32(b);
        float f;
        memcpy(&f, &bits, sizeof f);
        return (double)f;
    }
    uint64_t bits = (uint64_t)lds__imp_le32(b) | (uint64_t)lds__imp_le32(b + 4) << 32;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

int lds__imp_pread(int fd, void *buf, size_t n, uint64_t off)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t k = pread(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return errno;
        if (k == 0)
            return EIO;
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

/* Bytes of columns the Fortran-order reader holds at once (a block of rows). */
#define NPY_F_BLOCK ((size_t)4 << 20)

/* What the header says about the data, once checked against the limits and the file. */
typedef struct npy_layout {
    npy_header h;
    size_t prefix;     /* bytes of magic, version and header length: 10 (1.0) or 12 */
    uint64_t data_off; /* file offset of the first element */
    uint64_t rows, dim;
    bool by_column; /* Fortran order with more than one row and column */
} npy_layout;

/* The magic, the version and the header length: sets *prefix (the bytes they take)
   and *hlen. The length is checked against the file and the limit before the
   header is read, because it sizes an allocation. */
static lds_status read_prefix(lds__imp_reader *in, const char *what, size_t *prefix, uint64_t *hlen,
                              lds_error *err)
{
    unsigned char pre[12];
    size_t got;
    lds_status st = lds__imp_reader_read(in, pre, 10, &got, err);
    if (st != LDS_OK)
        return st;
    if (got < 8 || memcmp(pre, NPY_MAGIC, NPY_MAGIC_SIZE) != 0)
        return lds__imp_fail(err, LDS_E_PARSE, "npy.magic", 0, 0,
                             "byte 0: not an %s file (no \\x93NUMPY magic)", what);
    unsigned major = pre[6], minor = pre[7];
    /* 2.0 widens the header length to 4 bytes, 3.0 makes the header UTF-8; the
       data that follows is the same in all three. */
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        return lds__imp_fail(err, LDS_E_UNSUPPORTED, "npy.version", 6, 0,
                             "byte 6: .npy format version %u.%u; 1.0, 2.0 and 3.0 are supported",
                             major, minor);
    *prefix = major == 1 ? 10 : 12;
    if (major > 1) {
        size_t more;
        if ((st = lds__imp_reader_read(in, pre + 10, 2, &more, err)) != LDS_OK)
            return st;
        got += more;
    }
    if (got < *prefix)
        return lds__imp_fail(err, LDS_E_TRUNCATED, "npy.header_len", 8, 0,
                             "byte 8: the file ends inside the header length");
    *hlen = major == 1 ? lds__imp_le16(pre + 8) : lds__imp_le32(pre + 8);
    if (in->size != UINT64_MAX && *hlen > in->size - *prefix)
        return lds__imp_fail(err, LDS_E_TRUNCATED, "npy.header_len", 8, 0,
                             "byte 8: the header length %llu runs past the end of the file "
                             "(%llu bytes)",
                             (unsigned long long)*hlen, (unsigned long long)in->size);
    if (*hlen > LDS__IMP_MAX_NPY_HEADER)
        return lds__imp_fail(err, LDS_E_LIMIT, "npy.header_len", 8, 0,
                             "byte 8: header length %llu is above %zu bytes",
                             (unsigned long long)*hlen, LDS__IMP_MAX_NPY_HEADER);
    return LDS_OK;
}

/* The header dict of `hlen` bytes after the prefix, read whole and parsed into *h;
   the text is freed here, since *h keeps copies of what messages need. */
static lds_status read_header(lds__imp_reader *in, size_t prefix, uint64_t hlen, npy_header *h,
                              lds_error *err)
{
    char *text = malloc((size_t)hlen + 1);
    if (!text)
        return lds__imp_fail(err, LDS_E_NOMEM, "npy.header", prefix, 0, "out of memory (header)");
    size_t got;
    lds_status st = lds__imp_reader_read(in, text, (size_t)hlen, &got, err);
    if (st == LDS_OK && got < hlen)
        st = lds__imp_fail(err, LDS_E_TRUNCATED, "npy.header", prefix + got, 0,
                           "byte %llu: the file ends inside the header",
                           (unsigned long long)(prefix + got));
    if (st == LDS_OK) {
        text[hlen] = '\0';
        memset(h, 0, sizeof *h);
        cursor cur = {text, (size_t)hlen, 0, prefix, err};
        st = parse_header(&cur, h);
    }
    free(text);
    return st;
}

/* The dtype and shape of l->h against what lodestar stores and the limits, the
   data's size against the file's (a sized input), the order against the input
   (a Fortran-order array needs offsets), and the keys file's line count against
   the rows: all before the first row, so a bad file writes nothing. */
static lds_status check_layout(lds__imp_ctx *c, const char *what, npy_layout *l, lds_error *err)
{
    const npy_header *h = &l->h;
    const lds_limits *lim = &c->opts->limits;
    lds__imp_reader *in = &c->in;
    bool sized = in->size != UINT64_MAX;
    unsigned long long at = (unsigned long long)l->prefix;
    char descr[4 * LDS__IMP_SHOWN + 8];
    lds__imp_quote(descr, sizeof descr, h->descr,
                   h->descr_len < sizeof h->descr ? h->descr_len : sizeof h->descr - 1);
    if (!h->kind)
        return lds__imp_fail(err, LDS_E_UNSUPPORTED, "npy.descr", l->prefix, 0,
                             "byte %llu: .npy dtype '%s%s'; supported: float16, float32, float64 "
                             "(either byte order), int8 and uint8 (convert with "
                             "arr.astype('<f4'))",
                             at, descr, h->descr_len >= sizeof h->descr ? "..." : "");
    if (h->ndim != 2)
        return lds__imp_fail(err, LDS_E_UNSUPPORTED, "npy.shape", l->prefix, 0,
                             "byte %llu: .npy array of %zu dimensions; expected shape (N, D)", at,
                             h->ndim);
    uint64_t rows = l->rows = h->shape[0], dim = l->dim = h->shape[1];
    if (dim == 0)
        return lds__imp_fail(err, LDS_E_BAD_VALUE, "npy.shape", l->prefix, 0,
                             "byte %llu: shape (%llu, 0): D must be at least 1", at,
                             (unsigned long long)rows);
    if (dim > lim->max_dim || dim > UINT32_MAX)
        return lds__imp_fail(err, LDS_E_LIMIT, "npy.shape", l->prefix, 0,
                             "byte %llu: shape (%llu, %llu): D is above max_dim = %llu", at,
                             (unsigned long long)rows, (unsigned long long)dim,
                             (unsigned long long)lim->max_dim);
    if (rows > lim->max_rows)
        return lds__imp_fail(err, LDS_E_LIMIT, "npy.shape", l->prefix, 0,
                             "byte %llu: shape (%llu, %llu): N is above max_rows = %llu", at,
                             (unsigned long long)rows, (unsigned long long)dim,
                             (unsigned long long)lim->max_rows);
    uint64_t data;
    if (__builtin_mul_overflow(rows, dim, &data) || __builtin_mul_overflow(data, h->esize, &data))
        return lds__imp_fail(err, LDS_E_OVERFLOW, "npy.shape", l->prefix, 0,
                             "byte %llu: shape (%llu, %llu) of %s: the data size overflows 64 bits",
                             at, (unsigned long long)rows, (unsigned long long)dim, h->descr);
    /* Exact, not at least: a file longer than its shape is as suspect as a shorter
       one (a wrong shape, or two arrays concatenated). */
    if (sized && data != in->size - l->data_off) {
        uint64_t have = in->size - l->data_off;
        return lds__imp_fail(
            err, data > have ? LDS_E_TRUNCATED : LDS_E_TRAILING, "npy.shape", l->data_off, 0,
            "byte %llu: the header declares shape (%llu, %llu) of %s, %llu bytes "
            "of data, but the file holds %llu after the header",
            (unsigned long long)l->data_off, (unsigned long long)rows, (unsigned long long)dim,
            descr, (unsigned long long)data, (unsigned long long)have);
    }
    /* Fortran order stores column after column: rows are gathered from D places of the
       file, which needs the bytes by offset, not a decoded stream. */
    l->by_column = h->fortran_order && dim > 1 && rows > 1;
    if (l->by_column && (in->codec != LDS__CODEC_NONE || !sized))
        return lds__imp_fail(err, LDS_E_UNSUPPORTED, "npy.fortran_order", l->prefix, 0,
                             "byte %llu: a Fortran-order %s is read by column offsets, so it must "
                             "be an uncompressed regular file (or a stored .npz entry); save a "
                             "C-order array (np.ascontiguousarray) or decompress it first",
                             at, what);
    if (c->keys.fd >= 0) {
        uint64_t lines;
        lds_status st = lds__imp_keys_count(c, &lines, err);
        if (st != LDS_OK)
            return st;
        if (lines != rows)
            return lds__imp_fail(err, LDS_E_LENGTH_MISMATCH, "keys_path", 0, 0,
                                 "the keys file has %llu lines but the %s array has %llu rows",
                                 (unsigned long long)lines, what, (unsigned long long)rows);
    }
    return LDS_OK;
}

/* Rows [r, r + nb) of a Fortran-order array into `block`, column after column:
   column k of those rows lies at data_off + (k * N + r) * esize, so one pread per
   column fills the block, and a block of 4 MiB keeps the reads large. */
static lds_status read_column_block(const lds__imp_reader *in, const npy_layout *l,
                                    unsigned char *block, uint64_t r, size_t nb, lds_error *err)
{
    size_t esize = l->h.esize;
    for (size_t k = 0; k < (size_t)l->dim; k++) {
        uint64_t at = in->file_base + l->data_off + ((uint64_t)k * l->rows + r) * esize;
        int e = lds__imp_pread(in->fd, block + k * nb * esize, nb * esize, at);
        if (e != 0) {
            errno = e;
            /* lds__imp_pread reports an early end of file as EIO: the file shrank
               after it was sized. */
            return lds__imp_fail(err, e == EIO ? LDS_E_TRUNCATED : LDS_E_IO, "row", at, r + 1,
                                 "column %zu (byte %llu): %s", k, (unsigned long long)at,
                                 e == EIO ? "the file ends inside the column" : strerror(e));
        }
    }
    return LDS_OK;
}

/* Row r's raw elements as floats into vec; each must be finite and within binary32
   (a float64 beyond it would be stored as infinity). `row_off` is the row's file
   offset in C order, for messages. */
static lds_status convert_row(lds__imp_sink *s, const npy_layout *l, const unsigned char *raw,
                              uint64_t r, uint64_t row_off, float *vec, lds_error *err)
{
    size_t esize = l->h.esize;
    for (size_t k = 0; k < (size_t)l->dim; k++) {
        double v = element(raw + esize * k, &l->h);
        uint64_t at =
            l->by_column ? l->data_off + ((uint64_t)k * l->rows + r) * esize : row_off + esize * k;
        if (!isfinite(v))
            return lds__imp_fail(err, LDS_E_BAD_VALUE, "row", at, r + 1,
                                 "row %llu (byte %llu): element %zu is %s, not a finite number",
                                 (unsigned long long)r, (unsigned long long)at, k,
                                 isnan(v) ? "NaN" : "infinite");
        if (fabs(v) >= 0x1.ffffffp127) /* rounds to infinity in binary32 */
            return lds__imp_fail(err, LDS_E_BAD_VALUE, "row", at, r + 1,
                                 "row %llu (byte %llu): element %zu is %g, beyond binary32",
                                 (unsigned long long)r, (unsigned long long)at, k, v);
        vec[k] = lds__imp_narrow(s, v);
    }
    return LDS_OK;
}

/* Reads, converts and writes every row; an unsized stream must end after the last
   one. The buffers are allocated here, after the header proved the shape. */
static lds_status import_rows(lds__imp_ctx *c, const char *what, const npy_layout *l,
                              lds_error *err)
{
    lds__imp_reader *in = &c->in;
    lds__imp_sink *s = &c->sink;
    bool with_keys = c->keys.fd >= 0;
    uint64_t rows = l->rows, dim = l->dim;
    size_t row_bytes = (size_t)dim * l->h.esize;
    size_t block_rows = 0;
    uint64_t block_first = 0, block_end = 0;
    unsigned char *raw = malloc(row_bytes), *block = NULL;
    float *vec = malloc((size_t)dim * sizeof *vec);
    lds_status st = LDS_OK;
    if (l->by_column) {
        block_rows = NPY_F_BLOCK / row_bytes;
        if (block_rows == 0)
            block_rows = 1;
        if (block_rows > rows)
            block_rows = (size_t)rows;
        block = malloc(block_rows * row_bytes);
    }
    if (!raw || !vec || (l->by_column && !block)) {
        st = lds__imp_fail(err, LDS_E_NOMEM, "row", l->data_off, 1, "out of memory (one row)");
        goto out;
    }
    if ((st = lds__imp_sink_open(s, (uint32_t)dim, with_keys, err)) != LDS_OK)
        goto out;
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t row_off = l->by_column ? l->data_off + r * l->h.esize : lds__imp_reader_offset(in);
        if (l->by_column) {
            if (r >= block_end) {
                size_t nb = (size_t)(rows - r < block_rows ? rows - r : block_rows);
                if ((st = read_column_block(in, l, block, r, nb, err)) != LDS_OK)
                    goto out;
                block_first = r;
                block_end = r + nb;
            }
            size_t nb = (size_t)(block_end - block_first), j = (size_t)(r - block_first);
            for (size_t k = 0; k < (size_t)dim; k++)
                memcpy(raw + k * l->h.esize, block + (k * nb + j) * l->h.esize, l->h.esize);
        } else {
            size_t got;
            if ((st = lds__imp_reader_read(in, raw, row_bytes, &got, err)) != LDS_OK)
                goto out;
            if (got < row_bytes) {
                st = lds__imp_fail(err, LDS_E_TRUNCATED, "row", row_off + got, r + 1,
                                   "row %llu (byte %llu): the %s ends inside the row",
                                   (unsigned long long)r, (unsigned long long)row_off, what);
                goto out;
            }
        }
        if ((st = convert_row(s, l, raw, r, row_off, vec, err)) != LDS_OK)
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
    /* A sized file's length was checked against the shape; a stream is checked here. */
    if (in->size == UINT64_MAX && !l->by_column) {
        int next;
        if ((st = lds__imp_reader_peek(in, &next, err)) != LDS_OK)
            goto out;
        if (next != -1) {
            uint64_t at = lds__imp_reader_offset(in);
            st = lds__imp_fail(err, LDS_E_TRAILING, "npy.shape", at, 0,
                               "byte %llu: data after the %llu rows that shape (%llu, %llu) "
                               "declares",
                               (unsigned long long)at, (unsigned long long)rows,
                               (unsigned long long)rows, (unsigned long long)dim);
            goto out;
        }
    }
out:
    free(raw);
    free(block);
    free(vec);
    return st;
}

/* The .npy importer over c->in, which may be a stream (no size) or an .npz entry;
   `what` names the container in messages (".npy", or the .npz entry). */
lds_status lds__import_npy_stream(lds__imp_ctx *c, const char *what, lds_error *err)
{
    bool with_keys = c->keys.fd >= 0;
    /* Errors name the row by its line in the keys file when there is one, so that
       the user can find it there; else by row number from 1. */
    c->sink.line_field = with_keys ? "keys_path" : "row";
    c->sink.line_base = 1;
    npy_layout l;
    memset(&l, 0, sizeof l);
    uint64_t hlen = 0;
    lds_status st = read_prefix(&c->in, what, &l.prefix, &hlen, err);
    if (st == LDS_OK)
        st = read_header(&c->in, l.prefix, hlen, &l.h, err);
    if (st == LDS_OK) {
        l.data_off = l.prefix + hlen;
        st = check_layout(c, what, &l, err);
    }
    if (st == LDS_OK)
        st = import_rows(c, what, &l, err);
    return st;
}

lds_status lds__import_npy(lds__imp_ctx *c, lds_error *err)
{
    return lds__import_npy_stream(c, ".npy", err);
}
