/* lds_import_file and what every importer shares: options, the buffered
   reader, number parsing, the keys file, and the sink that feeds the writer. */
#include "import_internal.h"

#include "format_internal.h"

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
    {LDS_IMPORT_AUTO, "auto"},
    {LDS_IMPORT_GLOVE, "glove"},
    {LDS_IMPORT_W2V_TEXT, "word2vec"},
    {LDS_IMPORT_W2V_BINARY, "word2vec-binary"},
    {LDS_IMPORT_NPY, "npy"},
    {LDS_IMPORT_FVECS, "fvecs"},
    {LDS_IMPORT_W2V_TEXT, "w2v"},
    {LDS_IMPORT_W2V_BINARY, "w2v-binary"},
    {LDS_IMPORT_W2V_BINARY, "word2vec-bin"},
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
    if (!err || err->size < LDS_ERROR_MIN_SIZE || err->size > sizeof *err)
        return status;
    lds_error e;
    memset(&e, 0, sizeof e);
    e.size = err->size;
    e.status = status;
    e.field = field;
    e.offset = offset;
    e.line = line;
    e.sys_errno = status == LDS_E_IO ? errno : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    memcpy(err, &e, err->size < sizeof e ? err->size : sizeof e);
    return status;
}

const char *lds__imp_noun(const char *field)
{
    return strcmp(field, "keys_path") == 0 ? "keys file line" : field;
}

/* ---- the reader --------------------------------------------------------- */

lds_status lds__imp_reader_open(lds__imp_reader *r, const char *path, const char *field,
                                size_t max_line, lds_error *err)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->field = field;
    r->max_line = max_line;
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0)
        return lds__imp_fail(err, LDS_E_IO, field, 0, 0, "cannot open %s: %s", path,
                             strerror(errno));
    struct stat st;
    if (fstat(r->fd, &st) != 0)
        return lds__imp_fail(err, LDS_E_IO, field, 0, 0, "cannot stat %s: %s", path,
                             strerror(errno));
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
    return LDS_OK;
}

void lds__imp_reader_close(lds__imp_reader *r)
{
    if (r->fd >= 0)
        close(r->fd);
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
    ssize_t n;
    do
        n = read(r->fd, r->buf + r->len, r->cap - 1 - r->len);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return lds__imp_fail(err, LDS_E_IO, r->field, r->base + r->len, 0,
                             "read failed at byte %llu: %s", (unsigned long long)(r->base + r->len),
                             strerror(errno));
    if (n == 0)
        r->eof = true;
    r->len += (size_t)n;
    uint64_t done = r->base + r->len;
    if (r->progress && done >= r->next_report) {
        r->progress(done, r->size == UINT64_MAX ? 0 : r->size, r->progress_ctx);
        r->next_report = done + LDS__IMP_PROGRESS_STEP;
    }
    return LDS_OK;
}

void lds__imp_reader_progress_done(lds__imp_reader *r)
{
    uint64_t done = r->base + r->len;
    if (r->progress)
        r->progress(done, r->size == UINT64_MAX ? done : r->size, r->progress_ctx);
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
                             "%s %llu (byte %llu): longer than %zu bytes, the most that "
                             "max_dim and max_key_bytes allow",
                             lds__imp_noun(r->field), (unsigned long long)lineno,
                             (unsigned long long)*offset, r->max_line);
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

lds_status lds__imp_parse_float(lds__imp_ctx *c, const char *tok, size_t len, float *out,
                                const char *field, uint64_t line, uint64_t offset, size_t column,
                                lds_error *err)
{
    int shown = len > 40 ? 40 : (int)len;
    const char *nul = memchr(tok, '\0', len);
    if (nul)
        return lds__imp_fail(err, LDS_E_PARSE, field, offset + (uint64_t)(nul - tok), line,
                             "%s %llu (byte %llu): number %zu holds a NUL byte (at byte %llu)",
                             lds__imp_noun(field), (unsigned long long)line,
                             (unsigned long long)offset, column,
                             (unsigned long long)(offset + (uint64_t)(nul - tok)));
    /* strtof also reads C99 hexadecimal floats; these formats are decimal. */
    if (memchr(tok, 'x', len) || memchr(tok, 'X', len))
        return lds__imp_fail(err, LDS_E_PARSE, field, offset, line,
                             "%s %llu (byte %llu): number %zu, \"%.*s\", is not a decimal number "
                             "(hexadecimal is refused)",
                             lds__imp_noun(field), (unsigned long long)line,
                             (unsigned long long)offset, column, shown, tok);
    char *end = NULL;
    errno = 0;
    float v = strtof_l(tok, &end, c->c_locale);
    if (end != tok + len || len == 0)
        return lds__imp_fail(err, LDS_E_PARSE, field, offset, line,
                             "%s %llu (byte %llu): number %zu, \"%.*s\", is not a decimal number",
                             lds__imp_noun(field), (unsigned long long)line,
                             (unsigned long long)offset, column, shown, tok);
    if (!isfinite(v))
        return lds__imp_fail(err, LDS_E_BAD_VALUE, field, offset, line,
                             "%s %llu (byte %llu): number %zu, \"%.*s\", is not a finite float32 "
                             "(NaN, infinity and values beyond 3.4e38 are refused)",
                             lds__imp_noun(field), (unsigned long long)line,
                             (unsigned long long)offset, column, shown, tok);
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
    lds__imp_reader *r = &c->keys;
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
    }
    if (last != -1 && last != '\n')
        count++;
    if (lseek(r->fd, 0, SEEK_SET) != 0)
        return lds__imp_fail(err, LDS_E_IO, "keys_path", 0, 0, "cannot rewind the keys file: %s",
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
                             (unsigned long long)(row + 1), (unsigned long long)(row + 1));
    *key = line;
    return LDS_OK;
}

/* ---- the sink ----------------------------------------------------------- */

/* Checks UTF-8 as RFC 3629 defines it: no overlong forms, no surrogates, nothing above U+10FFFF. */
static bool utf8_valid(const unsigned char *s, size_t n, size_t *bad)
{
    size_t i = 0;
    while (i < n) {
        unsigned char b = s[i];
        size_t k;
        uint32_t cp, min;
        if (b < 0x80) {
            i++;
            continue;
        } else if ((b & 0xE0) == 0xC0) {
            k = 1, cp = b & 0x1F, min = 0x80;
        } else if ((b & 0xF0) == 0xE0) {
            k = 2, cp = b & 0x0F, min = 0x800;
        } else if ((b & 0xF8) == 0xF0) {
            k = 3, cp = b & 0x07, min = 0x10000;
        } else {
            *bad = i;
            return false;
        }
        if (n - i <= k) {
            *bad = i;
            return false;
        }
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) {
                *bad = i;
                return false;
            }
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            *bad = i;
            return false;
        }
        i += k + 1;
    }
    return true;
}

lds_status lds__imp_sink_open(lds__imp_sink *s, uint32_t dim, bool with_keys, lds_error *err)
{
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = dim;
    wo.dtype = s->opts->dtype;
    wo.metric = s->opts->metric;
    wo.normalize = s->opts->normalize;
    if (s->opts->i8_scale > 0.0f)
        wo.i8_scale = s->opts->i8_scale;
    wo.with_ids = false;
    wo.with_keys = with_keys;
    wo.unique_keys = with_keys;
    s->dim = dim;
    s->with_keys = with_keys;
    lds_status st = lds_writer_open_path(s->output_path, &wo, &s->writer, err);
    if (st != LDS_OK)
        return st;
    if (s->opts->model && (st = lds_writer_set_meta(s->writer, "model", s->opts->model, err)))
        return st;
    if (s->opts->source && (st = lds_writer_set_meta(s->writer, "source", s->opts->source, err)))
        return st;
    return LDS_OK;
}

lds_status lds__imp_sink_row(lds__imp_sink *s, const float *vec, const char *key, size_t key_len,
                             uint64_t offset, lds_error *err)
{
    const lds_limits *lim = &s->opts->limits;
    uint64_t line = s->rows + s->line_base;
    const char *f = s->line_field;
    const char *nf = lds__imp_noun(f);
    if (s->rows >= lim->max_rows)
        return lds__imp_fail(err, LDS_E_LIMIT, f, offset, line,
                             "%s %llu (byte %llu): more than max_rows = %llu rows", nf,
                             (unsigned long long)line, (unsigned long long)offset,
                             (unsigned long long)lim->max_rows);
    if (s->with_keys) {
        size_t bad;
        if (key_len == 0)
            return lds__imp_fail(err, LDS_E_PARSE, f, offset, line,
                                 "%s %llu (byte %llu): empty key", nf, (unsigned long long)line,
                                 (unsigned long long)offset);
        if (key_len > lim->max_key_bytes)
            return lds__imp_fail(err, LDS_E_LIMIT, f, offset, line,
                                 "%s %llu (byte %llu): key of %zu bytes, above max_key_bytes = "
                                 "%llu",
                                 nf, (unsigned long long)line, (unsigned long long)offset, key_len,
                                 (unsigned long long)lim->max_key_bytes);
        if (!utf8_valid((const unsigned char *)key, key_len, &bad))
            return lds__imp_fail(err, LDS_E_BAD_UTF8, f, offset + bad, line,
                                 "%s %llu (byte %llu): key is not valid UTF-8 (byte %zu of the "
                                 "key)",
                                 nf, (unsigned long long)line, (unsigned long long)(offset + bad),
                                 bad + 1);
    }
    /* The writer refuses a repeated key (unique_keys): one key table in the
       pack, not a second copy of every key here (ADR 0010). */
    lds_status st =
        lds_writer_add_row(s->writer, vec, s->dim, 0, key, s->with_keys ? key_len : 0, err);
    if (st == LDS_E_DUP_KEY) {
        /* Rows reach the writer in input order, so its row r is our row r. */
        uint64_t other = lds__writer_dup_row(s->writer);
        int shown = key_len > 60 ? 60 : (int)key_len;
        return lds__imp_fail(err, LDS_E_DUP_KEY, f, offset, line,
                             "%s %llu (byte %llu): duplicate key \"%.*s\", first seen on %s %llu",
                             nf, (unsigned long long)line, (unsigned long long)offset, shown, key,
                             nf, (unsigned long long)(other + s->line_base));
    }
    if (st == LDS_E_BAD_VALUE && err && err->size >= sizeof *err) {
        /* A value the writer refuses (i8 range, a zero row under normalize):
           name the input's line or row rather than the writer's row number. */
        char why[sizeof err->message];
        const char *w = strncmp(err->message, "writer: ", 8) == 0 ? err->message + 8 : err->message;
        snprintf(why, sizeof why, "%s", w);
        return lds__imp_fail(err, st, f, offset, line, "%s %llu (byte %llu): %s", nf,
                             (unsigned long long)line, (unsigned long long)offset, why);
    }
    if (st != LDS_OK)
        return st;
    s->rows++;
    return LDS_OK;
}

static void sink_free(lds__imp_sink *s)
{
    lds_writer_free(s->writer);
    memset(s, 0, sizeof *s);
}

/* ---- lds_import_file ---------------------------------------------------- */

static bool has_ext(const char *path, const char *ext)
{
    size_t n = strlen(path), e = strlen(ext);
    return n > e && strcasecmp(path + n - e, ext) == 0 && path[n - e - 1] != '/';
}

/* Picks the format from the extension, reading the first line of .txt/.vec. */
static lds_status detect(const char *path, lds__imp_reader *in, lds_import_format *out,
                         lds_error *err)
{
    if (has_ext(path, ".npy")) {
        *out = LDS_IMPORT_NPY;
    } else if (has_ext(path, ".fvecs")) {
        *out = LDS_IMPORT_FVECS;
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
                             ".vec, .bin, .npy, .fvecs); name the format",
                             path);
    }
    return LDS_OK;
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
    st = lds__imp_reader_open(&c.in, input_path, "line", max_line, err);
    if (st != LDS_OK)
        goto out;
    c.in.progress = o.progress;
    c.in.progress_ctx = o.progress_ctx;

    lds_import_format format = o.format;
    if (format == LDS_IMPORT_AUTO && (st = detect(input_path, &c.in, &format, err)) != LDS_OK)
        goto out;
    if (o.keys_path) {
        if (format != LDS_IMPORT_NPY && format != LDS_IMPORT_FVECS) {
            st = lds__imp_fail(err, LDS_E_INVALID_ARG, "options.keys_path", 0, 0,
                               "keys_path is for .npy and .fvecs input; %s input has its own keys",
                               lds_import_format_name(format));
            goto out;
        }
        size_t key_line = (size_t)key_part + 1;
        st = lds__imp_reader_open(&c.keys, o.keys_path, "keys_path", key_line, err);
        if (st != LDS_OK)
            goto out;
    }

    /* Replacing an input with the index would destroy it: compare identities,
       which sees through other spellings, symbolic links and hard links. */
    struct stat ost;
    if (stat(output_path, &ost) == 0) {
        const lds__imp_reader *same = NULL;
        if (ost.st_dev == c.in.dev && ost.st_ino == c.in.ino)
            same = &c.in;
        else if (o.keys_path && ost.st_dev == c.keys.dev && ost.st_ino == c.keys.ino)
            same = &c.keys;
        if (same) {
            st = lds__imp_fail(err, LDS_E_INVALID_ARG, "output_path", 0, 0,
                               "the output %s is the same file as the %s %s; writing the index "
                               "would destroy it",
                               output_path, same == &c.in ? "input" : "keys file",
                               same == &c.in ? input_path : o.keys_path);
            goto out;
        }
    }

    switch (format) {
    case LDS_IMPORT_GLOVE:
        st = lds__import_text(&c, false, err);
        break;
    case LDS_IMPORT_W2V_TEXT:
        st = lds__import_text(&c, true, err);
        break;
    case LDS_IMPORT_W2V_BINARY:
        st = lds__import_w2v_binary(&c, err);
        break;
    case LDS_IMPORT_NPY:
        st = lds__import_npy(&c, err);
        break;
    case LDS_IMPORT_FVECS:
        st = lds__import_fvecs(&c, err);
        break;
    case LDS_IMPORT_AUTO:
        st = LDS_E_INVALID_ARG;
        break;
    }
    if (st != LDS_OK)
        goto out;
    st = lds_writer_finish(c.sink.writer, err);
    if (st != LDS_OK)
        goto out;
    lds__imp_reader_progress_done(&c.in);
    lds_import_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    r.rows = c.sink.rows;
    r.dim = c.sink.dim;
    r.format = format;
    r.input_bytes = c.in.size == UINT64_MAX ? lds__imp_reader_offset(&c.in) : c.in.size;
    r.has_keys = c.sink.with_keys;
    result_write(res, &r);

out:
    sink_free(&c.sink);
    lds__imp_reader_close(&c.in);
    lds__imp_reader_close(&c.keys);
    if (c.c_locale != (locale_t)0)
        freelocale(c.c_locale);
    return st;
}
