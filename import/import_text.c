/* GloVe text and word2vec text: a key, then D decimal numbers, per line. */
#include "import_internal.h"
#include "parse_f32.h"

#include <stdlib.h>
#include <string.h>

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* Whether tok[0, n) reads whole as a decimal number (C locale). */
static bool looks_numeric(lds__imp_ctx *c, const char *tok, size_t n)
{
    char buf[LDS__IMP_MAX_TOKEN + 1];
    if (n == 0 || n > LDS__IMP_MAX_TOKEN)
        return false;
    memcpy(buf, tok, n);
    buf[n] = '\0';
    char *end = NULL;
    (void)strtod_l(buf, &end, c->c_locale);
    return end == buf + n;
}

/* Number of separator-delimited tokens in line[from, len). */
static size_t count_tokens(const char *line, size_t from, size_t len)
{
    size_t n = 0, i = from;
    while (i < len) {
        while (i < len && is_space(line[i]))
            i++;
        if (i == len)
            break;
        n++;
        while (i < len && !is_space(line[i]))
            i++;
    }
    return n;
}

/* The common line, parsed in one pass: a key, then exactly `dim` numbers that the fast
   parser takes (ADR 0022), separated by spaces and tabs. Fills vec and *klen and returns
   true; false on anything else (a key with spaces, a count off, a number the fast parser
   leaves to lds__imp_parse_float's rules, a NUL), and the caller parses the line again
   the long way, which refuses or accepts it as before. */
static bool fast_line(lds__imp_ctx *c, const char *line, size_t len, size_t dim, float *vec,
                      size_t *klen)
{
    const char *p = line, *end = line + len;
    if (p == end || is_space(*p))
        return false;
    while (p < end && !is_space(*p))
        p++;
    *klen = (size_t)(p - line);
    for (size_t k = 0; k < dim; k++) {
        if (p == end)
            return false;
        do
            p++;
        while (p < end && is_space(*p));
        if (p == end)
            return false;
#if LDS_HAVE_FAST_FLOAT
        (void)c;
        const char *q = lds__parse_f32_prefix(p, end, &vec[k]);
        if (!q || (q < end && !is_space(*q)))
            return false;
#else
        const char *q = p;
        while (q < end && !is_space(*q))
            q++;
        if (lds__imp_parse_float(c, p, (size_t)(q - p), &vec[k], "line", 0, 0, k, NULL) != LDS_OK)
            return false;
#endif
        p = q;
    }
    while (p < end && is_space(*p))
        p++;
    return p == end;
}

/* Reads the word2vec "N D" header on line 1 and checks it against the limits. */
static lds_status read_w2v_header(lds__imp_ctx *c, uint64_t *rows, uint64_t *dim, lds_error *err)
{
    char *line;
    size_t len;
    uint64_t off;
    lds_status st = lds__imp_reader_line(&c->in, 1, &line, &len, &off, err);
    if (st != LDS_OK)
        return st;
    if (!line)
        return lds__imp_fail(err, LDS_E_PARSE, "header", 0, 1,
                             "line 1 (byte 0): the input is empty; word2vec text starts with "
                             "\"N D\"");
    const char *tok[2];
    size_t tlen[2];
    if (lds__imp_w2v_header_shape(line, len, tok, tlen) &&
        !lds__imp_is_w2v_header(line, len, rows, dim)) {
        int which = lds__imp_parse_u64(tok[0], tlen[0], rows) ? 1 : 0;
        char quoted[4 * LDS__IMP_SHOWN + 8];
        return lds__imp_fail(err, LDS_E_LIMIT, "header", 0, 1,
                             "line 1 (byte 0): the word2vec header's %s = %s does not fit in "
                             "64 bits",
                             which == 0 ? "N" : "D",
                             lds__imp_quote(quoted, sizeof quoted, tok[which], tlen[which]));
    }
    char found[4 * LDS__IMP_SHOWN + 8];
    if (!lds__imp_is_w2v_header(line, len, rows, dim))
        return lds__imp_fail(err, LDS_E_PARSE, "header", 0, 1,
                             "line 1 (byte 0): expected the word2vec header \"N D\" (two "
                             "non-negative integers), found \"%s\"",
                             lds__imp_quote(found, sizeof found, line, len));
    const lds_limits *lim = &c->opts->limits;
    if (*dim == 0)
        return lds__imp_fail(err, LDS_E_BAD_VALUE, "header", 0, 1,
                             "line 1 (byte 0): the header declares D = 0 dimensions");
    if (*dim > lim->max_dim || *dim > UINT32_MAX)
        return lds__imp_fail(err, LDS_E_LIMIT, "header", 0, 1,
                             "line 1 (byte 0): D = %llu is above max_dim = %llu",
                             (unsigned long long)*dim, (unsigned long long)lim->max_dim);
    if (*rows > lim->max_rows)
        return lds__imp_fail(err, LDS_E_LIMIT, "header", 0, 1,
                             "line 1 (byte 0): N = %llu is above max_rows = %llu",
                             (unsigned long long)*rows, (unsigned long long)lim->max_rows);
    /* No check of N against the file's size here: a file too short for N rows is named
       at its first malformed row, or at its end ("ends after R rows"), by line. Reading
       it costs no more than its size, as for any other input. */
    return LDS_OK;
}

/* The key of a line of `ntok` fields that fast_line did not take: sets *klen to its
   bytes and returns how many numbers follow it. Once D is known (dim > 0), a line
   of more fields holds a key with spaces in it (GloVe 840B has such keys): the
   last D fields are the vector and everything before them the key, provided the
   field just before the vector is not a number (then the line has a number too
   many, which the caller refuses). */
static uint64_t split_key(lds__imp_ctx *c, const char *line, size_t len, size_t ntok, uint64_t dim,
                          size_t *klen)
{
    size_t k = 0;
    while (k < len && !is_space(line[k]))
        k++;
    *klen = k;
    uint64_t found = ntok - 1;
    if (dim == 0 || found <= dim)
        return found;
    size_t i = 0, last_start = 0, last_end = 0;
    for (uint64_t t = 0; t < ntok - dim; t++) {
        while (is_space(line[i]))
            i++;
        last_start = i;
        while (i < len && !is_space(line[i]))
            i++;
        last_end = i;
    }
    if (looks_numeric(c, line + last_start, last_end - last_start))
        return found;
    *klen = last_end;
    return dim;
}

/* GloVe has no header: the first row's `found` numbers fix D. Allocates *vec and
   opens the sink for that width. */
static lds_status first_row(lds__imp_ctx *c, uint64_t found, uint64_t lineno, uint64_t off,
                            float **vec, lds_error *err)
{
    const lds_limits *lim = &c->opts->limits;
    if (found == 0)
        return lds__imp_fail(err, LDS_E_PARSE, "line", off, lineno,
                             "line %llu (byte %llu): a key and no numbers",
                             (unsigned long long)lineno, (unsigned long long)off);
    if (found > lim->max_dim || found > UINT32_MAX)
        return lds__imp_fail(err, LDS_E_LIMIT, "line", off, lineno,
                             "line %llu (byte %llu): %llu numbers, above max_dim = %llu",
                             (unsigned long long)lineno, (unsigned long long)off,
                             (unsigned long long)found, (unsigned long long)lim->max_dim);
    *vec = malloc((size_t)found * sizeof **vec);
    if (!*vec)
        return lds__imp_fail(err, LDS_E_NOMEM, "line", off, lineno, "out of memory (one row)");
    return lds__imp_sink_open(&c->sink, (uint32_t)found, true, err);
}

/* The `dim` numbers after the key (line[0, klen)) into vec, each error naming its
   line, byte and element. */
static lds_status parse_numbers(lds__imp_ctx *c, const char *line, size_t len, size_t klen,
                                size_t dim, uint64_t lineno, uint64_t off, float *vec,
                                lds_error *err)
{
    size_t i = klen;
    for (size_t k = 0; k < dim; k++) {
        while (is_space(line[i]))
            i++;
        size_t start = i;
        while (i < len && !is_space(line[i]))
            i++;
        lds_status st = lds__imp_parse_float(c, line + start, i - start, &vec[k], "line", lineno,
                                             off + start, k, err);
        if (st != LDS_OK)
            return st;
    }
    return LDS_OK;
}

/* GloVe, word2vec and fastText text: a key and D numbers per line, separated by
   spaces or tabs; word2vec's first line ("N D") when w2v_header. Most lines go
   through fast_line; the rest (keys with spaces, blank lines, errors) through the
   general path below, which also finds what is wrong with a line. */
lds_status lds__import_text(lds__imp_ctx *c, bool w2v_header, lds_error *err)
{
    lds__imp_sink *s = &c->sink;
    const lds_limits *lim = &c->opts->limits;
    s->line_field = "line";
    s->line_base = w2v_header ? 2 : 1;
    uint64_t declared = 0, dim = 0;
    uint64_t lineno = 0;
    float *vec = NULL;
    lds_status st = lds__imp_reader_skip_bom(&c->in, err);
    if (st != LDS_OK)
        return st;
    if (w2v_header) {
        if ((st = read_w2v_header(c, &declared, &dim, err)) != LDS_OK)
            return st;
        lineno = 1;
        vec = malloc((size_t)dim * sizeof *vec);
        if (!vec)
            return lds__imp_fail(err, LDS_E_NOMEM, "header", 0, 1, "out of memory (one row)");
        if ((st = lds__imp_sink_open(s, (uint32_t)dim, true, err)) != LDS_OK)
            goto out;
    }
    if (!w2v_header && c->opts->dim > 0) {
        /* D given: every line, the first too, may have a key with spaces. */
        dim = c->opts->dim;
        if (dim > lim->max_dim || dim > UINT32_MAX)
            return lds__imp_fail(err, LDS_E_LIMIT, "options.dim", 0, 0,
                                 "dim = %llu is above max_dim = %llu", (unsigned long long)dim,
                                 (unsigned long long)lim->max_dim);
        vec = malloc((size_t)dim * sizeof *vec);
        if (!vec)
            return lds__imp_fail(err, LDS_E_NOMEM, "line", 0, 1, "out of memory (one row)");
        if ((st = lds__imp_sink_open(s, (uint32_t)dim, true, err)) != LDS_OK)
            goto out;
    }
    uint64_t blank_line = 0, blank_off = 0; /* first blank line not yet followed by a row */
    uint64_t max_idle =
        c->opts->max_idle_bytes ? c->opts->max_idle_bytes : LDS_IMPORT_DEFAULT_MAX_IDLE;
    for (;;) {
        char *line;
        size_t len;
        uint64_t off;
        lineno++;
        if ((st = lds__imp_reader_line(&c->in, lineno, &line, &len, &off, err)) != LDS_OK)
            goto out;
        if (!line)
            break;
        size_t klen = 0;
        if (vec && blank_line == 0 && !(w2v_header && s->rows == declared) &&
            fast_line(c, line, len, (size_t)dim, vec, &klen)) {
            if ((st = lds__imp_sink_row(s, vec, line, klen, off, err)) != LDS_OK)
                goto out;
            continue;
        }
        size_t ntok = count_tokens(line, 0, len);
        if (ntok == 0) {
            if (blank_line == 0) {
                blank_line = lineno;
                blank_off = off;
            }
            /* Blank lines are accepted only at the end, so a long run of them (a small
               compressed file that decodes to nothing else) is refused once it passes the
               bound, not decoded to its end. */
            if (lds__imp_reader_offset(&c->in) - blank_off > max_idle) {
                st = lds__imp_fail(err, LDS_E_LIMIT, "line", blank_off, blank_line,
                                   "line %llu (byte %llu): blank lines run on for more than "
                                   "max_idle_bytes = %llu bytes; blank lines are accepted only "
                                   "at the end of the input",
                                   (unsigned long long)blank_line, (unsigned long long)blank_off,
                                   (unsigned long long)max_idle);
                goto out;
            }
            continue;
        }
        if (blank_line != 0) {
            st = lds__imp_fail(err, LDS_E_PARSE, "line", blank_off, blank_line,
                               "line %llu (byte %llu): empty line between rows",
                               (unsigned long long)blank_line, (unsigned long long)blank_off);
            goto out;
        }
        if (w2v_header && s->rows == declared) {
            st = lds__imp_fail(err, LDS_E_TRAILING, "line", off, lineno,
                               "line %llu (byte %llu): a row after the %llu rows the header "
                               "(line 1) declares",
                               (unsigned long long)lineno, (unsigned long long)off,
                               (unsigned long long)declared);
            goto out;
        }
        if (is_space(line[0])) {
            st = lds__imp_fail(err, LDS_E_PARSE, "line", off, lineno,
                               "line %llu (byte %llu): the line starts with whitespace, so its "
                               "key is empty",
                               (unsigned long long)lineno, (unsigned long long)off);
            goto out;
        }
        uint64_t found = split_key(c, line, len, ntok, vec ? dim : 0, &klen);
        if (!vec) {
            if ((st = first_row(c, found, lineno, off, &vec, err)) != LDS_OK)
                goto out;
            dim = found;
        }
        if (found != dim) {
            st = lds__imp_fail(err, LDS_E_PARSE, "line", off, lineno,
                               "line %llu (byte %llu): expected %llu numbers, found %llu",
                               (unsigned long long)lineno, (unsigned long long)off,
                               (unsigned long long)dim, (unsigned long long)found);
            goto out;
        }
        if ((st = parse_numbers(c, line, len, klen, (size_t)dim, lineno, off, vec, err)) !=
                LDS_OK ||
            (st = lds__imp_sink_row(s, vec, line, klen, off, err)) != LDS_OK)
            goto out;
    }
    if (!vec) {
        st = lds__imp_fail(err, LDS_E_PARSE, "line", 0, 1,
                           "line 1 (byte 0): the input holds no rows");
    } else if (w2v_header && s->rows < declared) {
        uint64_t end = lds__imp_reader_offset(&c->in);
        st = lds__imp_fail(err, LDS_E_TRUNCATED, "line", end, s->rows + 2,
                           "line %llu (byte %llu): the file ends after %llu rows, but the header "
                           "(line 1) promises %llu",
                           (unsigned long long)(s->rows + 2), (unsigned long long)end,
                           (unsigned long long)s->rows, (unsigned long long)declared);
    }
out:
    free(vec);
    return st;
}
