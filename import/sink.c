/* The sink at the end of every importer: the ids file, one id per row; the rounding of
   values to the stored dtype; the key checks and the writer. */
#include "import_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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
lds_status lds__imp_ids_finish(lds__imp_sink *s, lds_error *err)
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
    wo.chunk_bytes = s->opts->chunk_bytes;
    wo.layout = s->opts->layout;
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

/* How a row is named in messages: its 1-based line (or record) number for
   err->line, and the number shown, which counts rows from 0 when the field is
   "row" (README, "Numbering"). */
typedef struct row_name {
    const char *f, *nf; /* the field, and its noun in messages */
    uint64_t line, shown;
    bool by_row;
} row_name;

/* max_rows and the key's rules (non-empty, max_key_bytes, UTF-8) for the row
   being added, checked on every pass so each pass fails alike. */
static lds_status check_row(const lds__imp_sink *s, const row_name *n, const char *key,
                            size_t key_len, uint64_t offset, lds_error *err)
{
    const lds_limits *lim = &s->opts->limits;
    const char *f = n->f, *nf = n->nf;
    uint64_t line = n->line, shown = n->shown;
    if (s->rows >= lim->max_rows)
        return lds__imp_fail(err, LDS_E_LIMIT, f, offset, line,
                             "%s %llu (byte %llu): more than max_rows = %llu rows", nf,
                             (unsigned long long)shown, (unsigned long long)offset,
                             (unsigned long long)lim->max_rows);
    if (!s->with_keys)
        return LDS_OK;
    size_t bad;
    if (key_len == 0)
        return lds__imp_fail(err, LDS_E_PARSE, f, offset, line, "%s %llu (byte %llu): empty key",
                             nf, (unsigned long long)shown, (unsigned long long)offset);
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
                             nf, (unsigned long long)shown, (unsigned long long)(offset + bad), why,
                             bad + 1);
    return LDS_OK;
}

/* i8_scale_auto's first pass: the largest |x| the writer will see (after the
   normalization it will apply), so the scale maps it to 127. */
static void scan_row(lds__imp_sink *s, const float *vec)
{
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
}

/* The writing pass: hands the row to the writer and restates its refusals in the
   input's terms (line or row, byte offset). *skipped is set for a repeated key
   that on_duplicate first drops. */
static lds_status write_row(lds__imp_sink *s, const row_name *n, const float *vec, uint64_t id,
                            const char *key, size_t key_len, uint64_t offset, bool *skipped,
                            lds_error *err)
{
    bool skip_dup = s->with_keys && s->opts->on_duplicate == LDS_IMPORT_DUP_FIRST;
    lds_error scratch;
    lds_error_init(&scratch);
    *skipped = false;
    /* With on_duplicate first the writer's refusal is expected: it goes to a
       scratch error, so the caller's is left as it was. */
    lds_status st = lds_writer_add_row(s->writer, vec, s->dim, id, key, s->with_keys ? key_len : 0,
                                       skip_dup && err ? &scratch : err);
    if (skip_dup && st == LDS_E_DUP_KEY) {
        *skipped = true;
        return LDS_OK;
    }
    if (skip_dup && st != LDS_OK && err) {
        size_t keep = err->size, nb = keep < sizeof scratch ? keep : sizeof scratch;
        memcpy(err, &scratch, nb);
        err->size = keep;
    }
    if (st == LDS_E_DUP_KEY) {
        /* Rows reach the writer in input order, so its row r is our row r. */
        uint64_t other = lds__writer_dup_row(s->writer);
        char quoted[4 * LDS__IMP_SHOWN + 8];
        return lds__imp_fail(err, LDS_E_DUP_KEY, n->f, offset, n->line,
                             "%s %llu (byte %llu): duplicate key \"%s\", first seen on %s %llu",
                             n->nf, (unsigned long long)n->shown, (unsigned long long)offset,
                             lds__imp_quote(quoted, sizeof quoted, key, key_len), n->nf,
                             (unsigned long long)(n->by_row ? other : other + s->line_base));
    }
    if (st == LDS_E_BAD_VALUE && err && err->size >= sizeof *err) {
        /* A value the writer refuses (i8 range, a zero row under normalize): one place
           per message, the input's line or row and its byte, so the writer's own
           "row N", the key it names and its "(at byte 0)" are dropped. */
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", writer_detail(err->message, key, key_len, s->with_keys));
        return lds__imp_fail(err, st, n->f, offset, n->line, "%s %llu (byte %llu): %s", n->nf,
                             (unsigned long long)n->shown, (unsigned long long)offset, why);
    }
    return st;
}

lds_status lds__imp_sink_row(lds__imp_sink *s, const float *vec, const char *key, size_t key_len,
                             uint64_t offset, lds_error *err)
{
    row_name n;
    n.f = s->line_field;
    n.nf = lds__imp_noun(n.f);
    n.line = s->rows + s->line_base;
    /* Messages number lines from 1 and rows from 0 (README, "Numbering"); err->line
       keeps the 1-based line or record number. */
    n.by_row = strcmp(n.f, "row") == 0;
    n.shown = n.by_row ? s->rows : n.line;
    lds_status st = check_row(s, &n, key, key_len, offset, err);
    if (st != LDS_OK)
        return st;
    if (s->dup_scan) {
        /* on_duplicate last's first pass: only each key's last row. */
        if (s->with_keys &&
            (st = lds__imp_last_note(s, key, key_len, s->rows, offset, err)) != LDS_OK)
            return st;
        s->rows++;
        return LDS_OK;
    }
    if (s->scan) {
        if (!lds__imp_superseded(s, s->rows)) /* a row the writing pass skips sets no scale */
            scan_row(s, vec);
        s->rows++;
        return LDS_OK;
    }
    /* The writer refuses a repeated key (unique_keys): one key table in the
       pack, not a second copy of every key here (ADR 0010). */
    uint64_t id = 0;
    if (s->ids && (st = sink_next_id(s, offset, &id, err)) != LDS_OK)
        return st;
    if (lds__imp_superseded(s, s->rows)) {
        /* on_duplicate last: this key comes again on a later row, which is kept. */
        s->rows++;
        s->skipped++;
        return LDS_OK;
    }
    bool skipped;
    if ((st = write_row(s, &n, vec, id, key, key_len, offset, &skipped, err)) != LDS_OK)
        return st;
    s->rows++;
    if (skipped)
        s->skipped++;
    return LDS_OK;
}

void lds__imp_sink_free(lds__imp_sink *s)
{
    lds__imp_last_free(s);
    lds_writer_free(s->writer);
    memset(s, 0, sizeof *s);
}
