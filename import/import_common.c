/* lds_import_file and what every importer shares: options, the buffered
   reader, number parsing, the keys file, and the sink that feeds the writer. */
#include "import_internal.h"
#include "parse_f32.h"

#include "../format/hashtab.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

void lds_import_options_default(lds_import_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->format = LDS_IMPORT_AUTO;
    o->dtype = LDS_DTYPE_F32;
    o->metric = LDS_METRIC_COSINE;
    lds_limits_default(&o->limits);
}

static const struct {
    lds_import_format format;
    const char *name;
} format_names[] = {
    {LDS_IMPORT_AUTO, "auto"},         {LDS_IMPORT_GLOVE, "glove"},
    {LDS_IMPORT_W2V_TEXT, "word2vec"}, {LDS_IMPORT_W2V_BINARY, "word2vec-bin"},
    {LDS_IMPORT_NPY, "npy"},           {LDS_IMPORT_FVECS, "fvecs"},
    {LDS_IMPORT_NPZ, "npz"},           {LDS_IMPORT_FASTTEXT, "fasttext"},
    {LDS_IMPORT_HDF5, "hdf5"},
};

const char *lds_import_format_name(lds_import_format format)
{
    for (size_t i = 0; i < sizeof format_names / sizeof format_names[0]; i++)
        if (format_names[i].format == format)
            return format_names[i].name;
    return NULL;
}

lds_status lds_import_format_from_name(const char *name, lds_import_format *out)
{
    if (!name || !out)
        return LDS_E_INVALID_ARG;
    for (size_t i = 0; i < sizeof format_names / sizeof format_names[0]; i++) {
        if (strcmp(format_names[i].name, name) == 0) {
            *out = format_names[i].format;
            return LDS_OK;
        }
    }
    return LDS_E_BAD_VALUE;
}

lds_status lds__imp_fail(lds_error *err, lds_status status, const char *field, uint64_t offset,
                         uint64_t line, const char *fmt, ...)
{
    /* Importer messages say where in their own words (line, row, byte). */
    int e = status == LDS_E_IO ? errno : 0;
    va_list ap;
    va_start(ap, fmt);
    lds_status st = lds__error_vfill(err, status, field, offset, false, line, e, NULL, fmt, ap);
    va_end(ap);
    return st;
}

const char *lds__imp_noun(const char *field)
{
    if (strcmp(field, "ids_path") == 0)
        return "ids file line";
    return strcmp(field, "keys_path") == 0 ? "keys file line" : field;
}

/* ---- the reader --------------------------------------------------------- */

static lds_status reader_fill(lds__imp_reader *r, lds_error *err);

lds_status lds__imp_reader_open(lds__imp_reader *r, const char *path, const char *field,
                                size_t max_line, lds_error *err)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->field = field;
    r->max_line = max_line;
    /* The keys and ids files are read twice (their lines are counted first) and a device
       or a pipe may never end: each must be a regular file, checked before a byte is read
       (and opened without waiting for a FIFO's writer). */
    bool ids = strcmp(field, "ids_path") == 0;
    bool keys = ids || strcmp(field, "keys_path") == 0;
    const char *what = ids ? "the ids file " : keys ? "the keys file " : "";
    int e = lds__os_open(path, O_RDONLY | (keys ? O_NONBLOCK : 0), &r->fd);
    if (e != 0) {
        errno = e;
        return lds__imp_fail(err, LDS_E_IO, field, 0, 0, "cannot open %s%s: %s", what, path,
                             strerror(e));
    }
    struct stat st;
    if ((e = lds__os_fstat(r->fd, &st)) != 0) {
        errno = e;
        return lds__imp_fail(err, LDS_E_IO, field, 0, 0, "cannot stat %s%s: %s", what, path,
                             strerror(e));
    }
    if (keys && !S_ISREG(st.st_mode))
        return lds__imp_fail(err, LDS_E_INVALID_ARG, field, 0, 0,
                             "%s%s is %s; it must be a regular file", what, path,
                             lds__file_kind(st.st_mode));
    if (S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        return lds__imp_fail(err, LDS_E_IO, field, 0, 0, "%s is a directory", path);
    }
    r->size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : UINT64_MAX;
    r->dev = st.st_dev;
    r->ino = st.st_ino;
    r->cap = LDS__IMP_CHUNK;
    r->buf = malloc(r->cap);
    if (!r->buf)
        return lds__imp_fail(err, LDS_E_NOMEM, field, 0, 0, "out of memory (read buffer)");
    r->next_report = LDS__IMP_PROGRESS_STEP;
    r->raw_left = UINT64_MAX;
    r->file_size = r->size;
    r->max_decoded = UINT64_MAX;
    return LDS_OK;
}

lds_status lds__imp_reader_detect(lds__imp_reader *r, lds_error *err)
{
    while (r->len < 6 && !r->eof) {
        lds_status st = reader_fill(r, err);
        if (st != LDS_OK)
            return st;
    }
    const unsigned char *b = r->buf;
    lds__imp_codec codec = LDS__CODEC_NONE;
    if (r->len >= 2 && b[0] == 0x1f && b[1] == 0x8b)
        codec = LDS__CODEC_GZIP; /* RFC 1952 2.3.1 ID1 ID2 */
    else if (lds__is_zstd(b, r->len))
        codec = LDS__CODEC_ZSTD;
    else if (r->len >= 6 && memcmp(b,
                                   "\xFD"
                                   "7zXZ\0",
                                   6) == 0)
        codec = LDS__CODEC_XZ; /* .xz file format 2.1.1.1 header magic */
    if (codec == LDS__CODEC_NONE)
        return LDS_OK;
    lds_status st = lds__imp_codec_start(r, codec, err);
    if (st != LDS_OK)
        return st;
    /* The bytes already read are the decoder's first input. */
    memcpy(r->zbuf, r->buf, r->len);
    r->zpos = 0;
    r->zlen = r->len;
    r->zeof = r->eof;
    r->pos = r->len = 0;
    r->base = 0;
    r->eof = false;
    r->size = UINT64_MAX;
    return LDS_OK;
}

lds_status lds__imp_reader_restart(lds__imp_reader *r, uint64_t offset, uint64_t length,
                                   lds__imp_codec codec, lds_error *err)
{
    if (offset > (uint64_t)INT64_MAX || lseek(r->fd, (off_t)offset, SEEK_SET) < 0)
        return lds__imp_fail(err, LDS_E_IO, r->field, offset, 0, "cannot seek to byte %llu: %s",
                             (unsigned long long)offset, strerror(errno));
    lds_status st = lds__imp_codec_start(r, codec, err);
    if (st != LDS_OK)
        return st;
    r->pos = r->len = 0;
    r->base = 0;
    r->eof = false;
    r->zpos = r->zlen = 0;
    r->zeof = false;
    r->raw_left = length;
    r->raw_read = 0;
    r->file_base = offset;
    r->size = codec == LDS__CODEC_NONE ? length : UINT64_MAX;
    r->crc_on = false;
    r->crc = 0;
    r->delivered = 0;
    return LDS_OK;
}

void lds__imp_reader_close(lds__imp_reader *r)
{
    if (r->fd >= 0)
        close(r->fd);
    lds__imp_codec_end(r);
    free(r->zbuf);
    free(r->buf);
    memset(r, 0, sizeof *r);
    r->fd = -1;
}

uint64_t lds__imp_reader_offset(const lds__imp_reader *r)
{
    return r->base + r->pos;
}

/* Moves the unconsumed bytes to the front, grows the buffer if it is full
   (a long line), and reads once more. Sets eof at the end of the file. */
static lds_status reader_fill(lds__imp_reader *r, lds_error *err)
{
    if (r->eof)
        return LDS_OK;
    if (r->pos > 0) {
        memmove(r->buf, r->buf + r->pos, r->len - r->pos);
        r->base += r->pos;
        r->len -= r->pos;
        r->pos = 0;
    }
    if (r->len + 1 >= r->cap) {
        size_t cap = r->cap * 2;
        unsigned char *p = realloc(r->buf, cap);
        if (!p)
            return lds__imp_fail(err, LDS_E_NOMEM, r->field, r->base, 0,
                                 "out of memory (line buffer of %zu bytes)", cap);
        r->buf = p;
        r->cap = cap;
    }
    size_t n = 0;
    lds_status st = lds__imp_source_read(r, r->buf + r->len, r->cap - 1 - r->len, &n, err);
    if (st != LDS_OK)
        return st;
    if (n == 0)
        r->eof = true;
    r->len += n;
    /* Progress counts the file's bytes (compressed ones when it is compressed). */
    uint64_t done = r->raw_read;
    if (r->progress && done >= r->next_report) {
        r->progress(done, r->file_size == UINT64_MAX ? 0 : r->file_size, r->progress_ctx);
        r->next_report = done + LDS__IMP_PROGRESS_STEP;
    }
    return LDS_OK;
}

void lds__imp_reader_progress_done(lds__imp_reader *r)
{
    uint64_t done = r->raw_read;
    if (r->progress)
        r->progress(done, r->file_size == UINT64_MAX ? done : r->file_size, r->progress_ctx);
}

lds_status lds__imp_reader_line(lds__imp_reader *r, uint64_t lineno, char **line, size_t *len,
                                uint64_t *offset, lds_error *err)
{
    size_t scanned = 0; /* bytes after pos already known to hold no LF */
    size_t end;
    bool had_lf = false;
    for (;;) {
        unsigned char *nl = memchr(r->buf + r->pos + scanned, '\n', r->len - r->pos - scanned);
        if (nl) {
            end = (size_t)(nl - r->buf);
            had_lf = true;
            break;
        }
        scanned = r->len - r->pos;
        if (scanned > r->max_line || r->eof) {
            end = r->len;
            break;
        }
        lds_status st = reader_fill(r, err);
        if (st != LDS_OK)
            return st;
    }
    size_t n = end - r->pos;
    *offset = r->base + r->pos;
    if (n > r->max_line)
        return lds__imp_fail(err, LDS_E_LIMIT, r->field, *offset, lineno,
                             "%s %llu (byte %llu): longer than %zu bytes, the most that %s",
                             lds__imp_noun(r->field), (unsigned long long)lineno,
                             (unsigned long long)*offset, r->max_line,
                             strcmp(r->field, "ids_path") == 0 ? "an id line may hold"
                                                               : "max_dim and max_key_bytes allow");
    if (n == 0 && !had_lf) {
        *line = NULL; /* end of input */
        *len = 0;
        return LDS_OK;
    }
    *line = (char *)r->buf + r->pos;
    if (n > 0 && (*line)[n - 1] == '\r')
        n--;
    (*line)[n] = '\0';
    *len = n;
    r->pos = had_lf ? end + 1 : end;
    return LDS_OK;
}

lds_status lds__imp_reader_read(lds__imp_reader *r, void *dst, size_t n, size_t *got,
                                lds_error *err)
{
    unsigned char *out = dst;
    size_t done = 0;
    while (done < n) {
        if (r->pos == r->len) {
            if (r->eof)
                break;
            lds_status st = reader_fill(r, err);
            if (st != LDS_OK)
                return st;
            continue;
        }
        size_t k = r->len - r->pos;
        if (k > n - done)
            k = n - done;
        memcpy(out + done, r->buf + r->pos, k);
        r->pos += k;
        done += k;
    }
    *got = done;
    return LDS_OK;
}

lds_status lds__imp_reader_skip_bom(lds__imp_reader *r, lds_error *err)
{
    if (r->base != 0 || r->pos != 0)
        return LDS_OK;
    while (r->len < 3 && !r->eof) {
        lds_status st = reader_fill(r, err);
        if (st != LDS_OK)
            return st;
    }
    if (r->len >= 3 && memcmp(r->buf, "\xEF\xBB\xBF", 3) == 0)
        r->pos = 3;
    return LDS_OK;
}

lds_status lds__imp_reader_peek(lds__imp_reader *r, int *byte, lds_error *err)
{
    while (r->pos == r->len && !r->eof) {
        lds_status st = reader_fill(r, err);
        if (st != LDS_OK)
            return st;
    }
    *byte = r->pos < r->len ? r->buf[r->pos] : -1;
    return LDS_OK;
}

/* ---- numbers ------------------------------------------------------------ */

/* Writes tok[0, len) into buf (cap >= 4 * LDS__IMP_SHOWN + 8) as a message quotes it: at
   most LDS__IMP_SHOWN bytes, with each byte outside printable ASCII written \xNN and a
   backslash or double quote preceded by a backslash, so that a token of binary (a file
   given in the wrong format) cannot drive the terminal of whoever reads the message. */
const char *lds__imp_quote(char *buf, size_t cap, const char *tok, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < len && i < LDS__IMP_SHOWN && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)tok[i];
        if (ch == '\\' || ch == '"') {
            buf[o++] = '\\';
            buf[o++] = (char)ch;
        } else if (ch >= 0x20 && ch < 0x7f) {
            buf[o++] = (char)ch;
        } else {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[ch >> 4];
            buf[o++] = hex[ch & 15];
        }
    }
    if (len > LDS__IMP_SHOWN && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

lds_status lds__imp_parse_float(lds__imp_ctx *c, const char *tok, size_t len, float *out,
                                const char *field, uint64_t line, uint64_t offset, size_t element,
                                lds_error *err)
{
#if LDS_HAVE_FAST_FLOAT
    /* The common token, a plain finite decimal, takes the fast parser (ADR 0022): the same
       correctly rounded float as strtof_l. Everything else (a sign '+', inf, nan, hex, a
       bad or partial token, overflow) falls through to the rules below, unchanged. */
    if (lds__parse_f32_fast(tok, len, out))
        return LDS_OK;
#endif
    char shown[4 * LDS__IMP_SHOWN + 8];
    const char *nul = memchr(tok, '\0', len);
    if (nul) {
        uint64_t at = offset + (uint64_t)(nul - tok);
        return lds__imp_fail(
            err, LDS_E_PARSE, field, at, line, "%s %llu (byte %llu): element %zu holds a NUL byte",
            lds__imp_noun(field), (unsigned long long)line, (unsigned long long)at, element);
    }
    /* Space and tab separate the numbers; strtof would also skip a leading \v, \f, \r or
       \n, which a line can still hold inside a token. */
    if (len > 0 && (tok[0] == '\v' || tok[0] == '\f' || tok[0] == '\r' || tok[0] == '\n'))
        return lds__imp_fail(err, LDS_E_PARSE, field, offset, line,
                             "%s %llu (byte %llu): element %zu, \"%s\", starts with a control "
                             "character (only space and tab separate numbers)",
                             lds__imp_noun(field), (unsigned long long)line,
                             (unsigned long long)offset, element,
                             lds__imp_quote(shown, sizeof shown, tok, len));
    /* strtof also reads C99 hexadecimal floats; these formats are decimal. */
    if (memchr(tok, 'x', len) || memchr(tok, 'X', len))
        return lds__imp_fail(err, LDS_E_PARSE, field, offset, line,
                             "%s %llu (byte %llu): element %zu, \"%s\", is not a decimal number "
                             "(hexadecimal is refused)",
                             lds__imp_noun(field), (unsigned long long)line,
                             (unsigned long long)offset, element,
                             lds__imp_quote(shown, sizeof shown, tok, len));
    char *end = NULL;
    errno = 0;
    float v = strtof_l(tok, &end, c->c_locale);
    if (end != tok + len || len == 0)
        return lds__imp_fail(err, LDS_E_PARSE, field, offset, line,
                             "%s %llu (byte %llu): element %zu, \"%s\", is not a decimal number",
                             lds__imp_noun(field), (unsigned long long)line,
                             (unsigned long long)offset, element,
                             lds__imp_quote(shown, sizeof shown, tok, len));
    if (!isfinite(v))
        return lds__imp_fail(err, LDS_E_BAD_VALUE, field, offset, line,
                             "%s %llu (byte %llu): element %zu, \"%s\", is not a finite float32 "
                             "(NaN, infinity and values beyond 3.4e38 are refused)",
                             lds__imp_noun(field), (unsigned long long)line,
                             (unsigned long long)offset, element,
                             lds__imp_quote(shown, sizeof shown, tok, len));
    *out = v;
    return LDS_OK;
}

bool lds__imp_parse_u64(const char *tok, size_t len, uint64_t *out)
{
    if (len == 0)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (tok[i] < '0' || tok[i] > '9')
            return false;
        if (__builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, (uint64_t)(tok[i] - '0'), &v))
            return false;
    }
    *out = v;
    return true;
}

bool lds__imp_is_w2v_header(const char *s, size_t n, uint64_t *rows, uint64_t *dim)
{
    const char *tok[2];
    size_t tlen[2];
    if (!lds__imp_w2v_header_shape(s, n, tok, tlen))
        return false;
    uint64_t a, b;
    if (!lds__imp_parse_u64(tok[0], tlen[0], &a) || !lds__imp_parse_u64(tok[1], tlen[1], &b))
        return false;
    *rows = a;
    *dim = b;
    return true;
}

bool lds__imp_w2v_header_shape(const char *s, size_t n, const char *tok[2], size_t tlen[2])
{
    size_t count = 0, i = 0;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i == n)
            break;
        size_t start = i;
        while (i < n && s[i] != ' ' && s[i] != '\t')
            i++;
        if (count == 2)
            return false;
        tok[count] = s + start;
        tlen[count] = i - start;
        for (size_t k = start; k < i; k++)
            if (s[k] < '0' || s[k] > '9')
                return false;
        count++;
    }
    return count == 2;
}

/* ---- the keys file ------------------------------------------------------ */

lds_status lds__imp_keys_count(lds__imp_ctx *c, uint64_t *lines, lds_error *err)
{
    return lds__imp_lines_count(&c->keys, c->opts->limits.max_rows, lines, err);
}

lds_status lds__imp_lines_count(lds__imp_reader *r, uint64_t max_rows, uint64_t *lines,
                                lds_error *err)
{
    const char *what = strcmp(r->field, "ids_path") == 0 ? "ids" : "keys";
    uint64_t count = 0;
    int last = -1;
    for (;;) {
        if (r->pos == r->len) {
            if (r->eof)
                break;
            lds_status st = reader_fill(r, err);
            if (st != LDS_OK)
                return st;
            continue;
        }
        for (size_t i = r->pos; i < r->len; i++)
            count += r->buf[i] == '\n';
        last = r->buf[r->len - 1];
        r->pos = r->len;
        /* Bounded whatever the file does: never past the size it had when opened (it
           grows: refused), nor past one line more than max_rows. */
        if (r->base + r->len > r->size)
            return lds__error_fill(err, LDS_E_IO, r->field, r->size, false, 0, 0, NULL,
                                   "the %s file grew past its size of %llu bytes while its "
                                   "lines were counted",
                                   what, (unsigned long long)r->size);
        if (count > max_rows)
            return lds__imp_fail(err, LDS_E_LIMIT, r->field, r->base + r->len, 0,
                                 "the %s file holds more than max_rows = %llu lines", what,
                                 (unsigned long long)max_rows);
    }
    if (last != -1 && last != '\n')
        count++;
    if (lseek(r->fd, 0, SEEK_SET) != 0)
        return lds__imp_fail(err, LDS_E_IO, r->field, 0, 0, "cannot rewind the %s file: %s", what,
                             strerror(errno));
    r->pos = r->len = 0;
    r->base = 0;
    r->eof = false;
    *lines = count;
    return lds__imp_reader_skip_bom(r, err);
}

lds_status lds__imp_keys_next(lds__imp_ctx *c, uint64_t row, const char **key, size_t *len,
                              lds_error *err)
{
    char *line;
    uint64_t off;
    lds_status st = lds__imp_reader_line(&c->keys, row + 1, &line, len, &off, err);
    if (st != LDS_OK)
        return st;
    if (!line)
        return lds__imp_fail(err, LDS_E_LENGTH_MISMATCH, "keys_path", off, row + 1,
                             "keys file line %llu: the keys file ended before row %llu",
                             (unsigned long long)(row + 1), (unsigned long long)row);
    *key = line;
    return LDS_OK;
}

/* ---- --on-duplicate last ------------------------------------------------ */

/* The first pass's table: each distinct key once (bytes[offs[i], offs[i + 1])), with the
   last input row that held it; the hash table maps a key to its index i. */
struct lds__imp_last {
    lds__hashtab tab;
    char *bytes;
    size_t len, cap;
    uint64_t *offs; /* n + 1 entries */
    uint64_t *row;  /* n entries */
    uint64_t n, cap_offs, cap_row;
};

typedef struct last_probe {
    const struct lds__imp_last *l;
    const char *key;
    size_t len;
} last_probe;

static bool last_eq(const void *ctx, uint64_t i)
{
    const last_probe *p = ctx;
    uint64_t a = p->l->offs[i], b = p->l->offs[i + 1];
    return b - a == p->len && memcmp(p->l->bytes + a, p->key, p->len) == 0;
}

static uint64_t last_rehash(const void *ctx, uint64_t i)
{
    const struct lds__imp_last *l = ctx;
    return lds__hash_key(l->tab.hk, l->bytes + l->offs[i], (size_t)(l->offs[i + 1] - l->offs[i]));
}

/* Grows *p (of *cap elements of `size` bytes) to hold at least `need`, doubling. */
static bool grow_array(void **p, uint64_t *cap, uint64_t need, size_t size)
{
    if (need <= *cap)
        return true;
    uint64_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    if (c > SIZE_MAX / size)
        return false;
    void *q = realloc(*p, (size_t)c * size);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

void lds__imp_last_free(lds__imp_sink *s)
{
    struct lds__imp_last *l = s->last;
    if (l) {
        lds__hashtab_free(&l->tab);
        free(l->bytes);
        free(l->offs);
        free(l->row);
        free(l);
    }
    s->last = NULL;
    free(s->superseded);
    s->superseded = NULL;
    s->superseded_rows = 0;
}

static bool is_superseded(const lds__imp_sink *s, uint64_t row)
{
    return row < s->superseded_rows && (s->superseded[row / 64] >> (row % 64) & 1);
}

/* The first pass of LDS_IMPORT_DUP_LAST, for input row `row` holding `key`: if the key
   was seen, its previous row is marked superseded; the key's last row becomes `row`.
   Under LDS_IMPORT_DUP_FIRST (the pass then runs so that i8_scale_auto's scale is taken
   over the kept rows only) the repeat itself is marked instead.
   One keyed-hash probe per row, so linear time whatever the repeats. */
static lds_status last_note(lds__imp_sink *s, const char *key, size_t len, uint64_t row,
                            uint64_t offset, lds_error *err)
{
    struct lds__imp_last *l = s->last;
    if (!l) {
        l = calloc(1, sizeof *l);
        if (!l || lds__hashtab_init(&l->tab, 512, s->opts->limits.max_rows) != LDS_OK) {
            free(l);
            return lds__imp_fail(err, LDS_E_NOMEM, s->line_field, offset, 0,
                                 "out of memory (the table of last rows)");
        }
        s->last = l;
    }
    /* The bitmap covers every row seen, so the writing pass can test any of them. */
    uint64_t words = s->superseded_rows / 64, need = row / 64 + 1;
    if (need > words) {
        uint64_t cap = words;
        if (!grow_array((void **)&s->superseded, &cap, need, sizeof(uint64_t)))
            return lds__imp_fail(err, LDS_E_NOMEM, s->line_field, offset, 0,
                                 "out of memory (the bitmap of superseded rows)");
        memset(s->superseded + words, 0, (size_t)(cap - words) * sizeof(uint64_t));
        s->superseded_rows = cap * 64;
    }
    last_probe p = {l, key, len};
    uint64_t h = lds__hash_key(l->tab.hk, key, len);
    uint64_t cap_bytes = l->cap;
    if (!grow_array((void **)&l->offs, &l->cap_offs, l->n + 2, sizeof(uint64_t)) ||
        !grow_array((void **)&l->row, &l->cap_row, l->n + 1, sizeof(uint64_t)) ||
        !lds__hashtab_reserve(&l->tab, l->n + 1, last_rehash, l) ||
        !grow_array((void **)&l->bytes, &cap_bytes, (uint64_t)l->len + len, 1))
        return lds__imp_fail(err, LDS_E_NOMEM, s->line_field, offset, 0,
                             "out of memory (the table of last rows, %llu keys)",
                             (unsigned long long)l->n);
    l->cap = (size_t)cap_bytes;
    if (l->n == 0)
        l->offs[0] = 0;
    uint64_t found = lds__hashtab_insert(&l->tab, h, l->n, last_eq, &p);
    if (found != UINT64_MAX) {
        if (s->opts->on_duplicate == LDS_IMPORT_DUP_FIRST) {
            /* first (the pass runs for i8_scale_auto): this later row is the one skipped */
            s->superseded[row / 64] |= (uint64_t)1 << (row % 64);
            return LDS_OK;
        }
        uint64_t prev = l->row[found];
        s->superseded[prev / 64] |= (uint64_t)1 << (prev % 64);
        l->row[found] = row;
        return LDS_OK;
    }
    memcpy(l->bytes + l->len, key, len);
    l->len += len;
    l->row[l->n] = row;
    l->offs[l->n + 1] = l->len;
    l->n++;
    return LDS_OK;
}

/* After the first pass: the key table is not needed, only the bitmap. */
static void last_done(lds__imp_sink *s)
{
    struct lds__imp_last *l = s->last;
    if (!l)
        return;
    lds__hashtab_free(&l->tab);
    free(l->bytes);
    free(l->offs);
    free(l->row);
    free(l);
    s->last = NULL;
}

/* ---- the ids file ------------------------------------------------------- */

/* The id of input row s->rows, from line s->rows + 1 of the ids file. */
static lds_status sink_next_id(lds__imp_sink *s, uint64_t offset, uint64_t *id, lds_error *err)
{
    uint64_t lineno = s->rows + 1;
    if (s->rows >= s->id_lines)
        return lds__imp_fail(err, LDS_E_LENGTH_MISMATCH, "ids_path", s->ids->size, lineno,
                             "the ids file has %llu lines, fewer than the input's rows: "
                             "%s %llu (byte %llu) has no id",
                             (unsigned long long)s->id_lines, lds__imp_noun(s->line_field),
                             (unsigned long long)(strcmp(s->line_field, "row") == 0
                                                      ? s->rows
                                                      : s->rows + s->line_base),
                             (unsigned long long)offset);
    char *line;
    size_t len;
    uint64_t off;
    lds_status st = lds__imp_reader_line(s->ids, lineno, &line, &len, &off, err);
    if (st != LDS_OK)
        return st;
    if (!line)
        return lds__error_fill(err, LDS_E_IO, "ids_path", off, false, lineno, 0, NULL,
                               "ids file line %llu (byte %llu): the ids file ended before the "
                               "%llu lines counted in it (it changed while being read)",
                               (unsigned long long)lineno, (unsigned long long)off,
                               (unsigned long long)s->id_lines);
    if (len == 0)
        return lds__imp_fail(err, LDS_E_PARSE, "ids_path", off, lineno,
                             "ids file line %llu (byte %llu): empty line; every row needs an id",
                             (unsigned long long)lineno, (unsigned long long)off);
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)line[i];
        if (ch < '0' || ch > '9') {
            char shown[4 * LDS__IMP_SHOWN + 8];
            return lds__imp_fail(err, LDS_E_PARSE, "ids_path", off + i, lineno,
                                 "ids file line %llu (byte %llu): \"%s\" is not an unsigned "
                                 "decimal integer (digits only)",
                                 (unsigned long long)lineno, (unsigned long long)(off + i),
                                 lds__imp_quote(shown, sizeof shown, line, len));
        }
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, ch - '0', &v)) {
            char shown[4 * LDS__IMP_SHOWN + 8];
            return lds__imp_fail(err, LDS_E_OVERFLOW, "ids_path", off, lineno,
                                 "ids file line %llu (byte %llu): %s is above 2^64 - 1 = "
                                 "18446744073709551615",
                                 (unsigned long long)lineno, (unsigned long long)off,
                                 lds__imp_quote(shown, sizeof shown, line, len));
        }
    }
    *id = v;
    return LDS_OK;
}

/* After the last input row: the ids file must hold exactly one line per row, and
   nothing more than the lines counted when it was opened. */
static lds_status ids_finish(lds__imp_sink *s, lds_error *err)
{
    if (!s->ids)
        return LDS_OK;
    if (s->rows != s->id_lines)
        return lds__imp_fail(err, LDS_E_LENGTH_MISMATCH, "ids_path", lds__imp_reader_offset(s->ids),
                             s->rows + 1, "the ids file has %llu lines but the input has %llu rows",
                             (unsigned long long)s->id_lines, (unsigned long long)s->rows);
    char *line;
    size_t len;
    uint64_t off;
    lds_status st = lds__imp_reader_line(s->ids, s->rows + 1, &line, &len, &off, err);
    if (st != LDS_OK)
        return st;
    if (line)
        return lds__error_fill(err, LDS_E_IO, "ids_path", off, false, s->rows + 1, 0, NULL,
                               "ids file line %llu (byte %llu): the ids file grew while being "
                               "read (it had %llu lines)",
                               (unsigned long long)(s->rows + 1), (unsigned long long)off,
                               (unsigned long long)s->id_lines);
    return LDS_OK;
}

/* ---- the sink ----------------------------------------------------------- */

lds_status lds__imp_sink_open(lds__imp_sink *s, uint32_t dim, bool with_keys, lds_error *err)
{
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = dim;
    wo.dtype = s->opts->dtype;
    wo.metric = s->metric_set ? s->metric : s->opts->metric;
    wo.normalize = s->opts->normalize;
    if (s->opts->i8_scale > 0.0f)
        wo.i8_scale = s->opts->i8_scale;
    s->i8_scale = wo.i8_scale;
    wo.with_ids = s->ids != NULL;
    wo.with_keys = with_keys;
    wo.unique_keys = with_keys;
    s->dim = dim;
    s->with_keys = with_keys;
    if (s->scan || s->dup_scan) {
        s->i8_scale = 0.0f; /* lds__imp_narrow: binary32 only */
        return LDS_OK;
    }
    lds_status st = lds_writer_open_path(s->output_path, &wo, &s->writer, err);
    if (st != LDS_OK)
        return st;
    if (s->opts->model && (st = lds_writer_set_meta(s->writer, "model", s->opts->model, err)))
        return st;
    if (s->opts->source && (st = lds_writer_set_meta(s->writer, "source", s->opts->source, err)))
        return st;
    return LDS_OK;
}

/* v rounded to nearest, ties to even, to a binary format of p significand bits whose
   smallest normal exponent is emin (so subnormals keep fewer bits), exponent unbounded. */
static double round_to_format(double v, int p, int emin)
{
    if (v == 0.0 || !isfinite(v))
        return v;
    int e;
    (void)frexp(v, &e); /* |v| = m 2^e, 0.5 <= m < 1: the leading bit is 2^(e-1) */
    int lead = e - 1 < emin ? emin : e - 1;
    int q = lead - (p - 1); /* exponent of the last kept bit */
    return ldexp(nearbyint(ldexp(v, -q)), q);
}

float lds__imp_narrow(const lds__imp_sink *s, double v)
{
    if (s->opts->normalize)
        return (float)v;
    switch (s->opts->dtype) {
    case LDS_DTYPE_F16:
        return (float)round_to_format(v, 11, -14); /* IEEE binary16 */
    case LDS_DTYPE_BF16:
        return (float)round_to_format(v, 8, -126);
    case LDS_DTYPE_I8: {
        /* The writer stores rintf(x / scale); give it q * scale for the q of v itself. */
        double scale = (double)s->i8_scale;
        if (!(scale > 0.0))
            return (float)v;
        double q = nearbyint(v / scale);
        if (fabs(q) > 127.0)
            return (float)v; /* the writer refuses it, naming the value */
        return (float)(q * scale);
    }
    default:
        return (float)v;
    }
}

/* The part of a writer's message that says what is wrong with a row, without the
   "writer: row N" (and " (key "K")") in front and the " (at byte N)" behind; a message
   of another shape is returned whole. The returned text is cut in place. */
static const char *writer_detail(char *msg, const char *key, size_t key_len, bool with_keys)
{
    char *m = msg;
    if (strncmp(m, "writer: ", 8) == 0)
        m += 8;
    if (strncmp(m, "row ", 4) == 0 && m[4] >= '0' && m[4] <= '9') {
        char *p = m + 4;
        while (*p >= '0' && *p <= '9')
            p++;
        size_t shown = key_len > 64 ? 64 : key_len;
        if (with_keys && strncmp(p, " (key \"", 7) == 0 && strlen(p) >= 7 + shown + 2 &&
            memcmp(p + 7, key, shown) == 0 && strncmp(p + 7 + shown, "\")", 2) == 0)
            p += 7 + shown + 2;
        if (p[0] == ':' && p[1] == ' ')
            m = p + 2;
        else if (p[0] == ' ')
            m = p + 1;
    }
    char *at = strstr(m, " (at byte ");
    if (at && at[strspn(at + 10, "0123456789") + 10] == ')' &&
        at[strspn(at + 10, "0123456789") + 11] == '\0')
        *at = '\0';
    return m;
}

lds_status lds__imp_sink_row(lds__imp_sink *s, const float *vec, const char *key, size_t key_len,
                             uint64_t offset, lds_error *err)
{
    const lds_limits *lim = &s->opts->limits;
    uint64_t line = s->rows + s->line_base;
    const char *f = s->line_field;
    const char *nf = lds__imp_noun(f);
    /* Messages number lines from 1 and rows from 0 (README, "Numbering"); err->line
       keeps the 1-based line or record number. */
    bool by_row = strcmp(f, "row") == 0;
    uint64_t shown = by_row ? s->rows : line;
    if (s->rows >= lim->max_rows)
        return lds__imp_fail(err, LDS_E_LIMIT, f, offset, line,
                             "%s %llu (byte %llu): more than max_rows = %llu rows", nf,
                             (unsigned long long)shown, (unsigned long long)offset,
                             (unsigned long long)lim->max_rows);
    if (s->with_keys) {
        size_t bad;
        if (key_len == 0)
            return lds__imp_fail(err, LDS_E_PARSE, f, offset, line,
                                 "%s %llu (byte %llu): empty key", nf, (unsigned long long)shown,
                                 (unsigned long long)offset);
        if (key_len > lim->max_key_bytes)
            return lds__imp_fail(err, LDS_E_LIMIT, f, offset, line,
                                 "%s %llu (byte %llu): key of %zu bytes, above max_key_bytes = "
                                 "%llu",
                                 nf, (unsigned long long)shown, (unsigned long long)offset, key_len,
                                 (unsigned long long)lim->max_key_bytes);
        const char *why;
        if (!lds__utf8_valid((const uint8_t *)key, key_len, &bad, &why))
            return lds__imp_fail(err, LDS_E_BAD_UTF8, f, offset + bad, line,
                                 "%s %llu (byte %llu): key is not valid UTF-8 (%s at byte %zu "
                                 "of the key)",
                                 nf, (unsigned long long)shown, (unsigned long long)(offset + bad),
                                 why, bad + 1);
    }
    if (s->dup_scan) {
        /* on_duplicate last's first pass: only each key's last row. */
        if (s->with_keys) {
            lds_status st = last_note(s, key, key_len, s->rows, offset, err);
            if (st != LDS_OK)
                return st;
        }
        s->rows++;
        return LDS_OK;
    }
    if (s->scan && is_superseded(s, s->rows)) {
        s->rows++; /* a row the writing pass skips sets no scale */
        return LDS_OK;
    }
    if (s->scan) {
        /* i8_scale_auto's first pass: the largest |x| the writer will see. */
        double ss = 0.0, m = 0.0;
        for (uint32_t k = 0; k < s->dim; k++) {
            ss += (double)vec[k] * (double)vec[k];
            if (fabs((double)vec[k]) > m)
                m = fabs((double)vec[k]);
        }
        if (s->opts->normalize && ss > 0.0)
            m /= sqrt(ss);
        if (m > s->max_abs)
            s->max_abs = m;
        s->rows++;
        return LDS_OK;
    }
    /* The writer refuses a repeated key (unique_keys): one key table in the
       pack, not a second copy of every key here (ADR 0010). */
    uint64_t id = 0;
    if (s->ids) {
        lds_status st = sink_next_id(s, offset, &id, err);
        if (st != LDS_OK)
            return st;
    }
    if (is_superseded(s, s->rows)) {
        /* on_duplicate last: this key comes again on a later row, which is kept. */
        s->rows++;
        s->skipped++;
        return LDS_OK;
    }
    bool skip_dup = s->with_keys && s->opts->on_duplicate == LDS_IMPORT_DUP_FIRST;
    lds_error scratch;
    lds_error_init(&scratch);
    lds_status st = lds_writer_add_row(s->writer, vec, s->dim, id, key, s->with_keys ? key_len : 0,
                                       skip_dup && err ? &scratch : err);
    if (skip_dup && st == LDS_E_DUP_KEY) {
        s->rows++;
        s->skipped++;
        return LDS_OK;
    }
    if (skip_dup && st != LDS_OK && err) {
        size_t keep = err->size, n = keep < sizeof scratch ? keep : sizeof scratch;
        memcpy(err, &scratch, n);
        err->size = keep;
    }
    if (st == LDS_E_DUP_KEY) {
        /* Rows reach the writer in input order, so its row r is our row r. */
        uint64_t other = lds__writer_dup_row(s->writer);
        char quoted[4 * LDS__IMP_SHOWN + 8];
        return lds__imp_fail(err, LDS_E_DUP_KEY, f, offset, line,
                             "%s %llu (byte %llu): duplicate key \"%s\", first seen on %s %llu", nf,
                             (unsigned long long)shown, (unsigned long long)offset,
                             lds__imp_quote(quoted, sizeof quoted, key, key_len), nf,
                             (unsigned long long)(by_row ? other : other + s->line_base));
    }
    if (st == LDS_E_BAD_VALUE && err && err->size >= sizeof *err) {
        /* A value the writer refuses (i8 range, a zero row under normalize): one place
           per message, the input's line or row and its byte, so the writer's own
           "row N", the key it names and its "(at byte 0)" are dropped. */
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", writer_detail(err->message, key, key_len, s->with_keys));
        return lds__imp_fail(err, st, f, offset, line, "%s %llu (byte %llu): %s", nf,
                             (unsigned long long)shown, (unsigned long long)offset, why);
    }
    if (st != LDS_OK)
        return st;
    s->rows++;
    return LDS_OK;
}

static void sink_free(lds__imp_sink *s)
{
    lds__imp_last_free(s);
    lds_writer_free(s->writer);
    memset(s, 0, sizeof *s);
}

/* ---- lds_import_file ---------------------------------------------------- */

/* Whether path[0, n) ends in `ext` (case-insensitively) after a non-empty name. */
static bool has_ext_n(const char *path, size_t n, const char *ext)
{
    size_t e = strlen(ext);
    return n > e && strncasecmp(path + n - e, ext, e) == 0 && path[n - e - 1] != '/';
}

/* Picks the format from the extension (a .gz, .zst or .xz after it is looked through:
   the decoder is chosen by magic, not by name), reading the first line of .txt. */
static lds_status detect(const char *path, lds__imp_reader *in, lds_import_format *out,
                         lds_error *err)
{
    size_t n = strlen(path);
    static const char *const packed[] = {".gz", ".zst", ".zstd", ".xz"};
    for (size_t i = 0; i < sizeof packed / sizeof packed[0]; i++)
        if (has_ext_n(path, n, packed[i])) {
            n -= strlen(packed[i]);
            break;
        }
#define has_ext(p, e) has_ext_n(p, n, e)
    if (has_ext(path, ".npy")) {
        *out = LDS_IMPORT_NPY;
    } else if (has_ext(path, ".fvecs")) {
        *out = LDS_IMPORT_FVECS;
    } else if (has_ext(path, ".npz")) {
        *out = LDS_IMPORT_NPZ;
    } else if (has_ext(path, ".hdf5") || has_ext(path, ".h5")) {
        *out = LDS_IMPORT_HDF5;
    } else if (has_ext(path, ".bin")) {
        *out = LDS_IMPORT_W2V_BINARY;
    } else if (has_ext(path, ".txt") || has_ext(path, ".vec")) {
        /* A "N D" header is short: look for it in the first chunk only. */
        lds_status st = lds__imp_reader_skip_bom(in, err);
        if (st != LDS_OK)
            return st;
        while (!in->eof && in->len + 1 < in->cap &&
               !memchr(in->buf + in->pos, '\n', in->len - in->pos))
            if ((st = reader_fill(in, err)) != LDS_OK)
                return st;
        const char *first = (const char *)in->buf + in->pos;
        const char *nl = memchr(first, '\n', in->len - in->pos);
        size_t n = nl ? (size_t)(nl - first) : in->len - in->pos;
        if (n > 0 && first[n - 1] == '\r')
            n--;
        /* Two runs of digits are a header even if they overflow: read_w2v_header
           refuses that by name, where GloVe would take the first for a key. */
        const char *tok[2];
        size_t tlen[2];
        *out =
            lds__imp_w2v_header_shape(first, n, tok, tlen) ? LDS_IMPORT_W2V_TEXT : LDS_IMPORT_GLOVE;
    } else {
        return lds__imp_fail(err, LDS_E_UNSUPPORTED, "format", 0, 0,
                             "cannot tell the format of %s from its extension (known: .txt, "
                             ".vec, .bin, .npy, .npz, .fvecs, each optionally followed by .gz, "
                             ".zst or .xz; .hdf5, .h5); name the format",
                             path);
    }
    return LDS_OK;
#undef has_ext
}

static void result_write(lds_import_result *res, const lds_import_result *r)
{
    if (!res)
        return;
    size_t n = res->size < sizeof *r ? res->size : sizeof *r;
    size_t keep = res->size;
    memcpy(res, r, n);
    res->size = keep;
}

/* Opens the input and looks through its compression: gzip, zstd and xz are decoded
   whatever the format (an .npz is a zip of .npy entries, opened by its own importer). */
static lds_status open_input(lds__imp_ctx *c, const char *path, size_t max_line, lds_error *err)
{
    const lds_import_options *o = c->opts;
    lds_status st = lds__imp_reader_open(&c->in, path, "line", max_line, err);
    if (st != LDS_OK)
        return st;
    c->in.progress = o->progress;
    c->in.progress_ctx = o->progress_ctx;
    c->in.max_decoded =
        o->max_decoded_bytes ? o->max_decoded_bytes : LDS_IMPORT_DEFAULT_MAX_DECODED;
    return lds__imp_reader_detect(&c->in, err);
}

/* Opens the input (and the keys file) again from the start for the next pass; the sink
   keeps only what the passes carry forward (the superseded rows). */
static lds_status reopen_inputs(lds__imp_ctx *c, const char *path, size_t max_line, size_t key_line,
                                lds_error *err)
{
    lds__imp_reader_close(&c->in);
    lds__imp_reader_close(&c->keys);
    uint64_t *superseded = c->sink.superseded, superseded_rows = c->sink.superseded_rows;
    const char *output_path = c->sink.output_path;
    const lds_import_options *o = c->opts;
    memset(&c->sink, 0, sizeof c->sink);
    c->sink.opts = o;
    c->sink.output_path = output_path;
    c->sink.superseded = superseded;
    c->sink.superseded_rows = superseded_rows;
    lds_status st = open_input(c, path, max_line, err);
    if (st == LDS_OK && o->keys_path)
        st = lds__imp_reader_open(&c->keys, o->keys_path, "keys_path", key_line, err);
    return st;
}

/* Runs the importer of `format` over c->in into c->sink. */
static lds_status run_format(lds__imp_ctx *c, lds_import_format format, lds_error *err)
{
    lds_status st = LDS_E_INVALID_ARG;
    switch (format) {
    case LDS_IMPORT_GLOVE:
        st = lds__import_text(c, false, err);
        break;
    case LDS_IMPORT_W2V_TEXT:
    case LDS_IMPORT_FASTTEXT:
        st = lds__import_text(c, true, err);
        break;
    case LDS_IMPORT_NPZ:
        st = lds__import_npz(c, err);
        break;
    case LDS_IMPORT_W2V_BINARY:
        st = lds__import_w2v_binary(c, err);
        break;
    case LDS_IMPORT_NPY:
        st = lds__import_npy(c, err);
        break;
    case LDS_IMPORT_FVECS:
        st = lds__import_fvecs(c, err);
        break;
    case LDS_IMPORT_HDF5:
        st = lds__import_hdf5(c, err);
        break;
    case LDS_IMPORT_AUTO:
        st = LDS_E_INVALID_ARG;
        break;
    }
    return st;
}

lds_status lds_import_file(const char *input_path, const char *output_path,
                           const lds_import_options *options, lds_import_result *res,
                           lds_error *err)
{
    lds_import_options o;
    lds_import_options_default(&o);
    if (!input_path || !output_path)
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "path", 0, 0,
                             "input and output paths are required");
    if (res && (res->size < LDS_IMPORT_RESULT_MIN_SIZE || res->size > sizeof *res))
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "result.size", 0, 0,
                             "lds_import_result.size is %zu (accepted: %zu..%zu); set it to "
                             "sizeof(lds_import_result)",
                             res->size, LDS_IMPORT_RESULT_MIN_SIZE, sizeof *res);
    if (options) {
        if (options->size < LDS_IMPORT_OPTIONS_MIN_SIZE || options->size > sizeof o)
            return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.size", 0, 0,
                                 "lds_import_options.size is %zu (accepted: %zu..%zu); set it "
                                 "with lds_import_options_default",
                                 options->size, LDS_IMPORT_OPTIONS_MIN_SIZE, sizeof o);
        memcpy(&o, options, options->size);
        o.size = sizeof o;
    }
    if (o.limits.size < LDS_LIMITS_MIN_SIZE || o.limits.size > sizeof o.limits)
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.limits", 0, 0,
                             "lds_import_options: limits.size is %zu (accepted: %zu..%zu); set "
                             "it with lds_limits_default",
                             o.limits.size, LDS_LIMITS_MIN_SIZE, sizeof o.limits);
    if (lds_dtype_size(o.dtype) == 0)
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.dtype", 0, 0, "unknown dtype %d",
                             (int)o.dtype);
    if (!lds_metric_name(o.metric))
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.metric", 0, 0, "unknown metric %d",
                             (int)o.metric);
    if (!(isfinite(o.i8_scale) && o.i8_scale >= 0.0f))
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.i8_scale", 0, 0,
                             "options.i8_scale is %g; it must be finite and >= 0 (0: the default "
                             "1/127)",
                             (double)o.i8_scale);
    if (!lds_import_format_name(o.format))
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.format", 0, 0, "unknown format %d",
                             (int)o.format);

    lds__imp_ctx c;
    memset(&c, 0, sizeof c);
    c.opts = &o;
    c.in.fd = -1;
    c.keys.fd = -1;
    c.ids.fd = -1;
    c.input_path = input_path;
    c.sink.opts = &o;
    c.sink.output_path = output_path;
    lds_status st = LDS_OK;
    c.c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (c.c_locale == (locale_t)0) {
        st = lds__imp_fail(err, LDS_E_NOMEM, NULL, 0, 0, "cannot create the C locale");
        goto out;
    }

    /* A text line holds a key, then at most max_dim numbers and separators. */
    uint64_t max_line64;
    uint64_t key_part = o.limits.max_key_bytes > UINT32_MAX ? UINT32_MAX : o.limits.max_key_bytes;
    if (__builtin_mul_overflow(o.limits.max_dim, LDS__IMP_MAX_TOKEN + 2, &max_line64) ||
        __builtin_add_overflow(max_line64, key_part + 2, &max_line64))
        max_line64 = UINT64_MAX;
    size_t max_line = max_line64 > SIZE_MAX / 4 ? SIZE_MAX / 4 : (size_t)max_line64;
    if ((st = open_input(&c, input_path, max_line, err)) != LDS_OK)
        goto out;

    lds_import_format format = o.format;
    if (format == LDS_IMPORT_AUTO && (st = detect(input_path, &c.in, &format, err)) != LDS_OK)
        goto out;
    if (o.keys_path) {
        if (format != LDS_IMPORT_NPY && format != LDS_IMPORT_FVECS && format != LDS_IMPORT_NPZ &&
            format != LDS_IMPORT_HDF5) {
            st = lds__imp_fail(
                err, LDS_E_INVALID_ARG, "options.keys_path", 0, 0,
                "keys_path is for .npy, .npz, .fvecs and HDF5 input; %s input has its own keys",
                lds_import_format_name(format));
            goto out;
        }
        size_t key_line = (size_t)key_part + 1;
        st = lds__imp_reader_open(&c.keys, o.keys_path, "keys_path", key_line, err);
        if (st != LDS_OK)
            goto out;
    }
    /* An id line is at most 20 digits and a CR; longer ones are read to say why. */
    if (o.ids_path &&
        (st = lds__imp_reader_open(&c.ids, o.ids_path, "ids_path", 4096, err)) != LDS_OK)
        goto out;

    /* Replacing an input with the index would destroy it: compare identities,
       which sees through other spellings, symbolic links and hard links. */
    struct stat ost;
    if (stat(output_path, &ost) == 0) {
        const lds__imp_reader *same = NULL;
        if (ost.st_dev == c.in.dev && ost.st_ino == c.in.ino)
            same = &c.in;
        else if (o.keys_path && ost.st_dev == c.keys.dev && ost.st_ino == c.keys.ino)
            same = &c.keys;
        else if (o.ids_path && ost.st_dev == c.ids.dev && ost.st_ino == c.ids.ino)
            same = &c.ids;
        if (same) {
            st = lds__imp_fail(err, LDS_E_INVALID_ARG, "output_path", 0, 0,
                               "the output %s is the same file as the %s %s; writing the index "
                               "would destroy it",
                               output_path,
                               same == &c.in     ? "input"
                               : same == &c.keys ? "keys file"
                                                 : "ids file",
                               same == &c.in     ? input_path
                               : same == &c.keys ? o.keys_path
                                                 : o.ids_path);
            goto out;
        }
    }

    /* The ids file's lines are counted first, so a row past them is refused at once. */
    uint64_t id_lines = 0;
    if (o.ids_path &&
        (st = lds__imp_lines_count(&c.ids, o.limits.max_rows, &id_lines, err)) != LDS_OK)
        goto out;
    /* Passes before the writing one, each over the input from its start: on_duplicate
       last finds the rows to skip, i8_scale_auto the scale (over the rows kept). */
    bool keyed = format != LDS_IMPORT_NPY && format != LDS_IMPORT_FVECS &&
                 format != LDS_IMPORT_NPZ && format != LDS_IMPORT_HDF5;
    bool need_scale = o.i8_scale_auto && o.dtype == LDS_DTYPE_I8;
    /* the duplicate pass: for last always; for first when a scale is taken, so that the
       rows first will skip set no scale */
    bool need_last = (o.on_duplicate == LDS_IMPORT_DUP_LAST ||
                      (o.on_duplicate == LDS_IMPORT_DUP_FIRST && need_scale)) &&
                     (keyed || o.keys_path);
    if ((need_last || need_scale) && c.in.file_size == UINT64_MAX) {
        st = need_scale ? lds__imp_fail(err, LDS_E_INVALID_ARG, "options.i8_scale_auto", 0, 0,
                                        "i8_scale_auto reads the input twice, so it must be a "
                                        "regular file, not a pipe or standard input; give the "
                                        "scale instead")
                        : lds__imp_fail(err, LDS_E_INVALID_ARG, "options.on_duplicate", 0, 0,
                                        "on_duplicate last reads the input twice, so it must be "
                                        "a regular file, not a pipe or standard input");
        goto out;
    }
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0 ? !need_last : !need_scale)
            continue;
        c.sink.dup_scan = pass == 0;
        c.sink.scan = pass == 1;
        if ((st = run_format(&c, format, err)) != LDS_OK)
            goto out;
        if (pass == 0)
            last_done(&c.sink);
        if (pass == 1 && c.sink.max_abs > 0.0)
            o.i8_scale = (float)(c.sink.max_abs / 127.0);
        if ((st = reopen_inputs(&c, input_path, max_line, (size_t)key_part + 1, err)) != LDS_OK)
            goto out;
    }
    if (o.ids_path) {
        c.sink.ids = &c.ids;
        c.sink.id_lines = id_lines;
    }
    st = run_format(&c, format, err);
    if (st != LDS_OK)
        goto out;
    if ((st = ids_finish(&c.sink, err)) != LDS_OK)
        goto out;
    st = lds_writer_finish(c.sink.writer, err);
    if (st != LDS_OK)
        goto out;
    lds__imp_reader_progress_done(&c.in);
    lds_import_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    r.rows = c.sink.rows - c.sink.skipped;
    r.duplicates_skipped = c.sink.skipped;
    r.i8_scale = o.dtype == LDS_DTYPE_I8 ? c.sink.i8_scale : 0.0f;
    r.dim = c.sink.dim;
    r.format = format;
    r.input_bytes = c.in.file_size == UINT64_MAX ? c.in.raw_read : c.in.file_size;
    r.has_keys = c.sink.with_keys;
    r.metric = c.sink.metric_set ? c.sink.metric : o.metric;
    r.has_ids = o.ids_path != NULL;
    result_write(res, &r);

out:
    sink_free(&c.sink);
    lds__imp_reader_close(&c.in);
    lds__imp_reader_close(&c.keys);
    lds__imp_reader_close(&c.ids);
    if (c.c_locale != (locale_t)0)
        freelocale(c.c_locale);
    return st;
}
