/* lodestar export: an index back to the formats people use; lodestar keys: its keys. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const char export_usage[] =
    "usage: lodestar export [options] IN OUT\n"
    "\n"
    "Write the vectors (and keys) of the index IN to OUT in a format other tools read.\n"
    "OUT is written to a temporary file that replaces OUT only once complete. Values\n"
    "stored as f16, bf16 or i8 are widened to float32 exactly; text formats print each\n"
    "float in the shortest decimal that reads back as the same float32, so packing the\n"
    "output again gives the same vectors bit for bit.\n"
    "\n"
    "options:\n"
    "  --format FMT    npy, fvecs, glove, word2vec (text with its \"N D\" header),\n"
    "                  word2vec-bin (default: from OUT's extension: .npy, .fvecs,\n"
    "                  .bin is word2vec-bin, .vec word2vec, .txt glove)\n"
    "  --dtype T       npy only: f32 (default) or f16 (f16 rounds wider values)\n"
    "  --keys-out FILE npy and fvecs: also write the keys, one per line\n"
    "  --max-payload SIZE  as for info\n"
    "  --timeout SECONDS, --quiet  as for every command (lodestar --help)\n"
    "  -h, --help      print this help\n"
    "\n"
    "glove, word2vec and word2vec-bin need an index with keys; a key that holds a tab,\n"
    "CR or LF, or starts or ends with a space (word2vec-bin: any space) is refused,\n"
    "naming its row, since the text could not be read back as the same key.\n";

static const char keys_usage[] = "usage: lodestar keys [options] FILE\n"
                                 "\n"
                                 "Print the keys of the index FILE, one per line, in row "
                                 "order, escaped as\nin every other text output (\\xNN, \\\\).\n"
                                 "\n"
                                 "options:\n"
                                 "  --max-payload SIZE  as for info\n"
                                 "  --timeout SECONDS, --quiet  as for every command\n"
                                 "  -h, --help          print this help\n";

typedef enum { X_NPY, X_FVECS, X_GLOVE, X_W2V, X_W2V_BIN } xformat;

static const struct {
    const char *name;
    xformat f;
} xformats[] = {{"npy", X_NPY},
                {"fvecs", X_FVECS},
                {"glove", X_GLOVE},
                {"word2vec", X_W2V},
                {"word2vec-bin", X_W2V_BIN}};

/* Whether s ends in ext, case aside (a .NPY from a Windows tool names the same
   format). */
static bool ends_with(const char *s, const char *ext)
{
    size_t n = strlen(s), e = strlen(ext);
    return n > e && strcasecmp(s + n - e, ext) == 0;
}

/* A file written beside its final name and renamed over it once complete. */
typedef struct atomic_file {
    char path[4096];
    char tmp[4096 + 64];
    int slot; /* cli_temp_create's registration */
    FILE *f;
} atomic_file;

/* Opens a temporary file beside path's target (a link at path is followed,
   cli_output_target), registered for removal on a signal; a large stdio buffer,
   since rows are written a few bytes at a time. */
static int atomic_open(atomic_file *a, const char *path)
{
    a->f = NULL;
    int rc = cli_output_target(path, a->path, sizeof a->path);
    if (rc != CLI_OK)
        return rc;
    int fd = cli_temp_create(a->path, a->tmp, sizeof a->tmp, &a->slot);
    if (fd < 0)
        return cli_failf("cannot create a temporary file beside %s: %s", path, strerror(errno));
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        close(fd);
        unlink(a->tmp);
        cli_temp_forget(a->slot);
        return cli_failf("%s: %s", a->tmp, strerror(errno));
    }
    setvbuf(a->f, NULL, _IOFBF, 1 << 20);
    return CLI_OK;
}

/* Completes (ok) or abandons the file. Completing syncs before the rename, so a
   crash leaves either the old file or the whole new one; abandoning removes the
   temporary and leaves whatever was at the target untouched. */
static int atomic_close(atomic_file *a, bool ok)
{
    if (!a->f)
        return ok ? CLI_OK : CLI_FAIL;
    int rc = CLI_OK;
    if (ok && (fflush(a->f) != 0 || ferror(a->f) || fsync(fileno(a->f)) != 0))
        rc = cli_failf("writing %s: %s", a->path, strerror(errno));
    if (fclose(a->f) != 0 && ok && rc == CLI_OK)
        rc = cli_failf("writing %s: %s", a->path, strerror(errno));
    a->f = NULL;
    if (ok && rc == CLI_OK && rename(a->tmp, a->path) != 0)
        rc = cli_failf("cannot rename %s to %s: %s", a->tmp, a->path, strerror(errno));
    if (!ok || rc != CLI_OK)
        unlink(a->tmp);
    cli_temp_forget(a->slot);
    return ok ? rc : CLI_FAIL;
}

/* Little-endian whatever the host: the formats are defined that way. */
static void put_le32(FILE *f, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    fwrite(b, 1, 4, f);
}

static void put_f32(FILE *f, float x)
{
    uint32_t v;
    memcpy(&v, &x, sizeof v);
    put_le32(f, v);
}

/* The .npy format 1.0 header (numpy's own layout: the dict padded with spaces so the
   data starts at a multiple of 64, then LF). */
static void put_npy_header(FILE *f, const char *descr, uint64_t rows, uint32_t dim)
{
    char dict[128];
    int n =
        snprintf(dict, sizeof dict,
                 "{'descr': '%s', 'fortran_order': False, 'shape': (%" PRIu64 ", %" PRIu32 "), }",
                 descr, rows, dim);
    size_t total = ((10 + (size_t)n + 1 + 63) / 64) * 64;
    size_t hlen = total - 10;
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    unsigned char hl[2] = {(unsigned char)hlen, (unsigned char)(hlen >> 8)};
    fwrite(hl, 1, 2, f);
    fwrite(dict, 1, (size_t)n, f);
    for (size_t i = (size_t)n; i + 1 < hlen; i++)
        fputc(' ', f);
    fputc('\n', f);
}

/* Why key k cannot be written in format x, or NULL. */
static const char *key_refusal(const char *k, size_t n, xformat x)
{
    /* Each refusal is a key the format would write but pack would read back as
       something else, so an export that succeeds always packs back the same. */
    if (n == 0)
        return "is empty";
    for (size_t i = 0; i < n; i++) {
        if (k[i] == '\n' || k[i] == '\r' || k[i] == '\t')
            return "holds a tab, CR or LF";
        if (k[i] == ' ' && x == X_W2V_BIN)
            return "holds a space, which ends a word2vec binary key";
    }
    if (k[0] == ' ' || k[n - 1] == ' ')
        return "starts or ends with a space";
    /* pack reads a spaced key back only if its last word is not a number. */
    const char *sp = memrchr(k, ' ', n);
    if (sp) {
        char word[64];
        size_t w = n - (size_t)(sp + 1 - k);
        if (w < sizeof word) {
            memcpy(word, sp + 1, w);
            word[w] = '\0';
            char *end = NULL;
            (void)strtod(word, &end);
            if (end == word + w)
                return "ends in a number after a space, which would be read back as part of "
                       "the vector";
        }
    }
    return NULL;
}

/* What export was asked for: the parsed options and operands. */
typedef struct export_args {
    xformat x;
    bool f16;             /* --dtype f16 (npy only) */
    const char *keys_out; /* --keys-out, or NULL */
    const char *out;
    cli_load_request req;
} export_args;

/* Parses argv into *a, naming the format from OUT's extension when --format is not
   given, and refuses the combinations no format can write; returns -1 to go on,
   or an exit code (CLI_OK after --help). */
static int parse_export_args(int argc, char **argv, export_args *a)
{
    enum { OPT_FORMAT = 256, OPT_DTYPE, OPT_KEYS_OUT, OPT_MAX_PAYLOAD };
    static const struct option longopts[] = {
        {"format", required_argument, NULL, OPT_FORMAT},
        {"dtype", required_argument, NULL, OPT_DTYPE},
        {"keys-out", required_argument, NULL, OPT_KEYS_OUT},
        {"max-payload", required_argument, NULL, OPT_MAX_PAYLOAD},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *prog = argv[0];
    int fmt = -1;
    *a = (export_args){.req = {.mmap = -1}};
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(export_usage, stdout);
            return CLI_OK;
        case OPT_FORMAT:
            for (size_t i = 0; i < sizeof xformats / sizeof xformats[0]; i++)
                if (strcmp(optarg, xformats[i].name) == 0)
                    fmt = (int)xformats[i].f;
            if (fmt < 0)
                return cli_usage_error(prog,
                                       "unknown format '%s' (npy, fvecs, glove, word2vec, "
                                       "word2vec-bin)",
                                       optarg);
            break;
        case OPT_DTYPE:
            if (strcmp(optarg, "f32") != 0 && strcmp(optarg, "f16") != 0)
                return cli_usage_error(prog, "--dtype is f32 or f16, not '%s'", optarg);
            a->f16 = strcmp(optarg, "f16") == 0;
            break;
        case OPT_KEYS_OUT:
            a->keys_out = optarg;
            break;
        case OPT_MAX_PAYLOAD: {
            int rc = cli_parse_max_payload(prog, optarg, &a->req);
            if (rc >= 0)
                return rc;
            break;
        }
        default:
            return cli_option_error(prog, c, argv);
        }
    }
    if (argc - optind != 2)
        return cli_usage_error(prog, "expected IN and OUT, got %d argument%s", argc - optind,
                               argc - optind == 1 ? "" : "s");
    cli_set_source(&a->req, argv[optind]);
    const char *out = a->out = argv[optind + 1];
    if (fmt < 0) {
        if (ends_with(out, ".npy"))
            fmt = X_NPY;
        else if (ends_with(out, ".fvecs"))
            fmt = X_FVECS;
        else if (ends_with(out, ".bin"))
            fmt = X_W2V_BIN;
        else if (ends_with(out, ".vec"))
            fmt = X_W2V;
        else if (ends_with(out, ".txt"))
            fmt = X_GLOVE;
        else
            return cli_usage_error(prog,
                                   "%s: cannot tell the format from the extension; name it "
                                   "with --format FMT",
                                   out);
    }
    xformat x = a->x = (xformat)fmt;
    if (a->f16 && x != X_NPY)
        return cli_usage_error(prog, "--dtype is for --format npy");
    if (a->keys_out && x != X_NPY && x != X_FVECS)
        return cli_usage_error(prog, "--keys-out is for npy and fvecs; text formats carry "
                                     "their keys");
    /* OUT is renamed into place when complete, which standard output cannot be. */
    if (strcmp(out, "-") == 0)
        return cli_usage_error(prog, "export writes a file; OUT - is not supported");
    return -1;
}

/* A text format needs a key on every row, each one it can hold: every key is
   checked before OUT is created, so a refusal leaves nothing half written. */
static int check_keys_fit(const lds_index *idx, const char *file, xformat x)
{
    if (!lds_index_has_keys(idx))
        return cli_failf("%s has no keys; %s needs one per row (export to npy or fvecs "
                         "instead)",
                         file, xformats[x].name);
    uint64_t rows = lds_index_rows(idx);
    for (uint64_t r = 0; r < rows; r++) {
        const char *k;
        size_t n;
        lds_index_key(idx, r, &k, &n);
        const char *why = key_refusal(k, n, x);
        if (why) {
            fprintf(stderr, "lodestar: %s: row %" PRIu64 ": the key \"", file, r);
            cli_put_escaped(stderr, k, n);
            fprintf(stderr, "\" %s; %s cannot hold it\n", why, xformats[x].name);
            return CLI_FAIL;
        }
    }
    return CLI_OK;
}

/* Opens OUT (and --keys-out) as temporary files beside them and refuses outputs
   that are one another or the input. */
static int open_outputs(const export_args *a, atomic_file *af, atomic_file *kf)
{
    int rc;
    if ((rc = atomic_open(af, a->out)) != CLI_OK)
        return rc;
    if (a->keys_out && (rc = atomic_open(kf, a->keys_out)) != CLI_OK)
        return rc;
    /* OUT, --keys-out and IN are three files: one renamed over another loses it.
       Identities, not names, so that links and other spellings are caught. */
    struct stat in_st, out_st;
    bool in_file = stat(a->req.file, &in_st) == 0;
    if (a->keys_out && strcmp(af->path, kf->path) == 0)
        return cli_failf("--keys-out %s is OUT itself", a->keys_out);
    for (int i = 0; i < (a->keys_out ? 2 : 1) && in_file; i++) {
        const atomic_file *o = i ? kf : af;
        if (stat(o->path, &out_st) == 0 && out_st.st_dev == in_st.st_dev &&
            out_st.st_ino == in_st.st_ino)
            return cli_failf("%s %s is the input %s", i ? "--keys-out" : "OUT", o->path,
                             a->req.file);
    }
    return CLI_OK;
}

/* One row of `dim` floats (and its key k[0, kn) for the text and word2vec
   formats) in format x. Write errors are left to the stream's error flag, which
   atomic_close checks once. */
static void put_row(FILE *f, xformat x, bool f16, const float *vec, uint32_t dim, const char *k,
                    size_t kn)
{
    char num[48];
    switch (x) {
    case X_NPY:
        for (uint32_t i = 0; i < dim; i++) {
            if (f16) {
                uint16_t h = lds_f32_to_f16(vec[i]);
                unsigned char b[2] = {(unsigned char)h, (unsigned char)(h >> 8)};
                fwrite(b, 1, 2, f);
            } else {
                put_f32(f, vec[i]);
            }
        }
        break;
    case X_FVECS:
        put_le32(f, dim);
        for (uint32_t i = 0; i < dim; i++)
            put_f32(f, vec[i]);
        break;
    case X_GLOVE:
    case X_W2V:
        fwrite(k, 1, kn, f);
        for (uint32_t i = 0; i < dim; i++) {
            cli_format_float(num, sizeof num, vec[i]);
            fputc(' ', f);
            fputs(num, f);
        }
        fputc('\n', f);
        break;
    case X_W2V_BIN:
        fwrite(k, 1, kn, f);
        fputc(' ', f);
        for (uint32_t i = 0; i < dim; i++)
            put_f32(f, vec[i]);
        fputc('\n', f);
        break;
    }
}

int cli_export(int argc, char **argv)
{
    export_args a;
    int rc = parse_export_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    xformat x = a.x;
    lds_index *idx = NULL;
    lds_load_info info;
    if ((rc = cli_load(&a.req, &idx, &info)) != CLI_OK)
        return rc;
    uint64_t rows = lds_index_rows(idx);
    uint32_t dim = lds_index_dim(idx);
    bool keyed = lds_index_has_keys(idx);
    /* Rows go out as f32 (lds_index_row_f32) whatever the stored dtype: every
       target format but npy's f16 holds 32-bit floats. */
    float *vec = malloc((size_t)dim * sizeof *vec);
    atomic_file af = {0}, kf = {0};
    if (!vec) {
        rc = cli_failf("out of memory");
        goto done;
    }
    if (x != X_NPY && x != X_FVECS && (rc = check_keys_fit(idx, a.req.file, x)) != CLI_OK)
        goto done;
    if (a.keys_out && !keyed) {
        rc = cli_failf("%s has no keys for --keys-out", a.req.file);
        goto done;
    }
    if ((rc = open_outputs(&a, &af, &kf)) != CLI_OK)
        goto done;
    FILE *f = af.f;
    if (x == X_NPY)
        put_npy_header(f, a.f16 ? "<f2" : "<f4", rows, dim);
    else if (x == X_W2V || x == X_W2V_BIN)
        fprintf(f, "%" PRIu64 " %" PRIu32 "\n", rows, dim);
    char what[300];
    snprintf(what, sizeof what, "lodestar export: %.280s", a.out);
    cli_progress prog_line;
    cli_progress_start(&prog_line, what);
    for (uint64_t r = 0; r < rows; r++) {
        if ((r & 1023) == 0) /* a clock read per row would cost more than the row */
            cli_progress_update(&prog_line, r, rows);
        lds_status st = lds_index_row_f32(idx, r, vec, dim);
        if (st != LDS_OK) {
            rc = cli_fail(a.req.file, st, NULL);
            goto done;
        }
        const char *k = NULL;
        size_t kn = 0;
        if (keyed)
            lds_index_key(idx, r, &k, &kn);
        put_row(f, x, a.f16, vec, dim, k, kn);
        if (kf.f) {
            fwrite(k, 1, kn, kf.f);
            fputc('\n', kf.f);
        }
    }
    cli_progress_end(&prog_line);
    /* OUT is renamed into place first; --keys-out only if OUT made it. */
    rc = atomic_close(&af, true);
    if (kf.f)
        rc = atomic_close(&kf, rc == CLI_OK) == CLI_OK ? rc : CLI_FAIL;
    if (rc == CLI_OK)
        printf("exported %" PRIu64 " rows x %" PRIu32 " dims (%s) from %s into %s\n", rows, dim,
               xformats[x].name, a.req.file, a.out);
done:
    if (af.f)
        atomic_close(&af, false);
    if (kf.f)
        atomic_close(&kf, false);
    free(vec);
    lds_index_free(idx);
    return rc;
}

int cli_keys(int argc, char **argv)
{
    enum { OPT_MAX_PAYLOAD = 256 };
    static const struct option longopts[] = {
        {"max-payload", required_argument, NULL, OPT_MAX_PAYLOAD},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *prog = argv[0];
    cli_load_request req = {.mmap = -1};
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(keys_usage, stdout);
            return CLI_OK;
        case OPT_MAX_PAYLOAD: {
            int rc = cli_parse_max_payload(prog, optarg, &req);
            if (rc >= 0)
                return rc;
            break;
        }
        default:
            return cli_option_error(prog, c, argv);
        }
    }
    if (argc - optind != 1)
        return cli_usage_error(prog, "expected FILE, got %d arguments", argc - optind);
    cli_set_source(&req, argv[optind]);
    lds_index *idx = NULL;
    lds_load_info info;
    int rc = cli_load(&req, &idx, &info);
    if (rc != CLI_OK)
        return rc;
    if (!lds_index_has_keys(idx)) {
        rc = cli_failf("%s has no keys", req.file);
    } else {
        for (uint64_t r = 0; r < lds_index_rows(idx); r++) {
            const char *k;
            size_t n;
            lds_index_key(idx, r, &k, &n);
            cli_put_escaped(stdout, k, n);
            fputc('\n', stdout);
        }
    }
    lds_index_free(idx);
    return rc;
}
