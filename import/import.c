/* lds_import_file, the dispatcher: options and format names, checks of the options,
   detection of the format, the passes over the input (on_duplicate last, i8_scale_auto),
   and the importer of each format (import_text.c, import_binary.c, import_npy.c,
   import_npz.c, import_hdf5.c), which read through reader.c and write through sink.c. */
#include "import_internal.h"

#include <math.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

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

/* One table for both directions, so that a name and its format cannot drift apart. */
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

/* Whether path[0, n) ends in `ext` (case-insensitively) after a non-empty name. */
static bool has_ext_n(const char *path, size_t n, const char *ext)
{
    size_t e = strlen(ext);
    return n > e && strncasecmp(path + n - e, ext, e) == 0 && path[n - e - 1] != '/';
}

/* Picks the format from the extension (a .gz, .zst or .xz after it is looked through:
   the decoder is chosen by magic, not by name), reading the first line of .txt.
   The name decides rather than the bytes because .fvecs and headerless text have no
   magic; lds_import_sniff's guess from the bytes only explains a failure. */
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
            if ((st = lds__imp_reader_fill(in, err)) != LDS_OK)
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

/* Copies r into the caller's result, no more bytes than its size says it has (an
   older caller's struct is smaller), keeping that size. */
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
    /* fastText's .vec is word2vec text (an "N D" line, then rows). */
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

/* The arguments and options of lds_import_file, copied into *o (defaults for
   fields an older caller's smaller struct lacks). */
static lds_status check_args(const char *input_path, const char *output_path,
                             const lds_import_options *options, const lds_import_result *res,
                             lds_import_options *o, lds_error *err)
{
    lds_import_options_default(o);
    if (!input_path || !output_path)
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "path", 0, 0,
                             "input and output paths are required");
    if (res && (res->size < LDS_IMPORT_RESULT_MIN_SIZE || res->size > sizeof *res))
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "result.size", 0, 0,
                             "lds_import_result.size is %zu (accepted: %zu..%zu); set it to "
                             "sizeof(lds_import_result)",
                             res->size, LDS_IMPORT_RESULT_MIN_SIZE, sizeof *res);
    if (options) {
        if (options->size < LDS_IMPORT_OPTIONS_MIN_SIZE || options->size > sizeof *o)
            return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.size", 0, 0,
                                 "lds_import_options.size is %zu (accepted: %zu..%zu); set it "
                                 "with lds_import_options_default",
                                 options->size, LDS_IMPORT_OPTIONS_MIN_SIZE, sizeof *o);
        memcpy(o, options, options->size);
        o->size = sizeof *o;
    }
    if (o->limits.size < LDS_LIMITS_MIN_SIZE || o->limits.size > sizeof o->limits)
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.limits", 0, 0,
                             "lds_import_options: limits.size is %zu (accepted: %zu..%zu); set "
                             "it with lds_limits_default",
                             o->limits.size, LDS_LIMITS_MIN_SIZE, sizeof o->limits);
    if (lds_dtype_size(o->dtype) == 0)
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.dtype", 0, 0, "unknown dtype %d",
                             (int)o->dtype);
    if (!lds_metric_name(o->metric))
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.metric", 0, 0, "unknown metric %d",
                             (int)o->metric);
    if (!(isfinite(o->i8_scale) && o->i8_scale >= 0.0f))
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.i8_scale", 0, 0,
                             "options.i8_scale is %g; it must be finite and >= 0 (0: the default "
                             "1/127)",
                             (double)o->i8_scale);
    if (!lds_import_format_name(o->format))
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.format", 0, 0, "unknown format %d",
                             (int)o->format);
    return LDS_OK;
}

/* Opens the input (detecting its format when asked), the keys file and the ids
   file. *max_line bounds a text line of the input, *key_line one of the keys file. */
static lds_status open_inputs(lds__imp_ctx *c, const char *input_path, lds_import_format *format,
                              size_t *max_line, size_t *key_line, lds_error *err)
{
    const lds_import_options *o = c->opts;
    /* A text line holds a key, then at most max_dim numbers and separators: the
       bound lets the reader refuse a runaway line instead of buffering all of it. */
    uint64_t max_line64;
    uint64_t key_part = o->limits.max_key_bytes > UINT32_MAX ? UINT32_MAX : o->limits.max_key_bytes;
    if (__builtin_mul_overflow(o->limits.max_dim, LDS__IMP_MAX_TOKEN + 2, &max_line64) ||
        __builtin_add_overflow(max_line64, key_part + 2, &max_line64))
        max_line64 = UINT64_MAX;
    *max_line = max_line64 > SIZE_MAX / 4 ? SIZE_MAX / 4 : (size_t)max_line64;
    *key_line = (size_t)key_part + 1;
    lds_status st = open_input(c, input_path, *max_line, err);
    if (st != LDS_OK)
        return st;
    *format = o->format;
    if (*format == LDS_IMPORT_AUTO && (st = detect(input_path, &c->in, format, err)) != LDS_OK)
        return st;
    if (o->keys_path) {
        /* The text formats carry a key on every line; a second source would
           leave no rule for which one wins. */
        if (*format != LDS_IMPORT_NPY && *format != LDS_IMPORT_FVECS && *format != LDS_IMPORT_NPZ &&
            *format != LDS_IMPORT_HDF5)
            return lds__imp_fail(
                err, LDS_E_INVALID_ARG, "options.keys_path", 0, 0,
                "keys_path is for .npy, .npz, .fvecs and HDF5 input; %s input has its own keys",
                lds_import_format_name(*format));
        st = lds__imp_reader_open(&c->keys, o->keys_path, "keys_path", *key_line, err);
        if (st != LDS_OK)
            return st;
    }
    /* An id line is at most 20 digits and a CR; longer ones are read to say why. */
    if (o->ids_path)
        return lds__imp_reader_open(&c->ids, o->ids_path, "ids_path", 4096, err);
    return LDS_OK;
}

/* Replacing an input with the index would destroy it: compare identities,
   which sees through other spellings, symbolic links and hard links. */
static lds_status check_output_is_new(const lds__imp_ctx *c, const char *input_path,
                                      const char *output_path, lds_error *err)
{
    const lds_import_options *o = c->opts;
    struct stat ost;
    if (stat(output_path, &ost) != 0)
        return LDS_OK;
    const lds__imp_reader *same = NULL;
    if (ost.st_dev == c->in.dev && ost.st_ino == c->in.ino)
        same = &c->in;
    else if (o->keys_path && ost.st_dev == c->keys.dev && ost.st_ino == c->keys.ino)
        same = &c->keys;
    else if (o->ids_path && ost.st_dev == c->ids.dev && ost.st_ino == c->ids.ino)
        same = &c->ids;
    if (!same)
        return LDS_OK;
    return lds__imp_fail(err, LDS_E_INVALID_ARG, "output_path", 0, 0,
                         "the output %s is the same file as the %s %s; writing the index "
                         "would destroy it",
                         output_path,
                         same == &c->in     ? "input"
                         : same == &c->keys ? "keys file"
                                            : "ids file",
                         same == &c->in     ? input_path
                         : same == &c->keys ? o->keys_path
                                            : o->ids_path);
}

/* The passes before the writing one, each over the input from its start:
   on_duplicate last finds the rows to skip, i8_scale_auto the scale (over the
   rows kept, which is why a scale taken with on_duplicate first needs the
   duplicate pass too: the rows first will skip must set no scale). */
static lds_status run_prepasses(lds__imp_ctx *c, lds_import_format format, const char *input_path,
                                size_t max_line, size_t key_line, lds_import_options *o,
                                lds_error *err)
{
    bool keyed = format != LDS_IMPORT_NPY && format != LDS_IMPORT_FVECS &&
                 format != LDS_IMPORT_NPZ && format != LDS_IMPORT_HDF5;
    bool need_scale = o->i8_scale_auto && o->dtype == LDS_DTYPE_I8;
    bool need_last = (o->on_duplicate == LDS_IMPORT_DUP_LAST ||
                      (o->on_duplicate == LDS_IMPORT_DUP_FIRST && need_scale)) &&
                     (keyed || o->keys_path);
    if ((need_last || need_scale) && c->in.file_size == UINT64_MAX)
        return need_scale ? lds__imp_fail(err, LDS_E_INVALID_ARG, "options.i8_scale_auto", 0, 0,
                                          "i8_scale_auto reads the input twice, so it must be a "
                                          "regular file, not a pipe or standard input; give the "
                                          "scale instead")
                          : lds__imp_fail(err, LDS_E_INVALID_ARG, "options.on_duplicate", 0, 0,
                                          "on_duplicate last reads the input twice, so it must be "
                                          "a regular file, not a pipe or standard input");
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0 ? !need_last : !need_scale)
            continue;
        c->sink.dup_scan = pass == 0;
        c->sink.scan = pass == 1;
        lds_status st = run_format(c, format, err);
        if (st != LDS_OK)
            return st;
        if (pass == 0)
            lds__imp_last_done(&c->sink);
        if (pass == 1 && c->sink.max_abs > 0.0)
            o->i8_scale = (float)(c->sink.max_abs / 127.0);
        if ((st = reopen_inputs(c, input_path, max_line, key_line, err)) != LDS_OK)
            return st;
    }
    return LDS_OK;
}

/* What lds_import_file reports of a finished import. */
static void report(const lds__imp_ctx *c, lds_import_format format, lds_import_result *res)
{
    const lds_import_options *o = c->opts;
    lds_import_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    r.rows = c->sink.rows - c->sink.skipped;
    r.duplicates_skipped = c->sink.skipped;
    r.i8_scale = o->dtype == LDS_DTYPE_I8 ? c->sink.i8_scale : 0.0f;
    r.dim = c->sink.dim;
    r.format = format;
    r.input_bytes = c->in.file_size == UINT64_MAX ? c->in.raw_read : c->in.file_size;
    r.has_keys = c->sink.with_keys;
    r.metric = c->sink.metric_set ? c->sink.metric : o->metric;
    r.has_ids = o->ids_path != NULL;
    result_write(res, &r);
}

lds_status lds_import_file(const char *input_path, const char *output_path,
                           const lds_import_options *options, lds_import_result *res,
                           lds_error *err)
{
    lds_import_options o;
    lds_status st = check_args(input_path, output_path, options, res, &o, err);
    if (st != LDS_OK)
        return st;
    lds__imp_ctx c;
    memset(&c, 0, sizeof c);
    c.opts = &o;
    c.in.fd = -1;
    c.keys.fd = -1;
    c.ids.fd = -1;
    c.input_path = input_path;
    c.sink.opts = &o;
    c.sink.output_path = output_path;
    /* Numbers are parsed in the C locale whatever the caller's is: under a locale
       with a decimal comma, strtod would stop at the "." of 0.5. */
    c.c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (c.c_locale == (locale_t)0) {
        st = lds__imp_fail(err, LDS_E_NOMEM, NULL, 0, 0, "cannot create the C locale");
        goto out;
    }
    lds_import_format format;
    size_t max_line, key_line;
    if ((st = open_inputs(&c, input_path, &format, &max_line, &key_line, err)) != LDS_OK ||
        (st = check_output_is_new(&c, input_path, output_path, err)) != LDS_OK)
        goto out;
    /* The ids file's lines are counted first, so a row past them is refused at once. */
    uint64_t id_lines = 0;
    if (o.ids_path &&
        (st = lds__imp_lines_count(&c.ids, o.limits.max_rows, &id_lines, err)) != LDS_OK)
        goto out;
    if ((st = run_prepasses(&c, format, input_path, max_line, key_line, &o, err)) != LDS_OK)
        goto out;
    if (o.ids_path) {
        c.sink.ids = &c.ids;
        c.sink.id_lines = id_lines;
    }
    if ((st = run_format(&c, format, err)) != LDS_OK ||
        (st = lds__imp_ids_finish(&c.sink, err)) != LDS_OK)
        goto out;
    if ((st = lds_writer_finish(c.sink.writer, err)) != LDS_OK) {
        /* A forced chunk layout refused once the vectors' length is known: what was read is
           reported, so a caller can say it in its own terms (rows x dim x element size)
           without reading the writer's message. */
        if (st == LDS_E_INVALID_ARG && err != NULL && err->size > offsetof(lds_error, field) &&
            err->field != NULL && strcmp(err->field, "lds_writer_options.layout") == 0)
            report(&c, format, res);
        goto out;
    }
    lds__imp_reader_progress_done(&c.in);
    report(&c, format, res);
out:
    lds__imp_sink_free(&c.sink);
    lds__imp_reader_close(&c.in);
    lds__imp_reader_close(&c.keys);
    lds__imp_reader_close(&c.ids);
    if (c.c_locale != (locale_t)0)
        freelocale(c.c_locale);
    return st;
}
