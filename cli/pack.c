/* lodestar pack: build an index from embeddings in a format people already hold. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char pack_usage[] =
    "usage: lodestar pack [options] IN OUT\n"
    "\n"
    "Build the index OUT from the embeddings in IN. OUT is written to a temporary\n"
    "file that replaces OUT only once complete, so a failed pack leaves OUT as it was.\n"
    "Malformed input is refused with its line (1-based) or row (0-based) number.\n"
    "IN - reads standard input (name the format with --format; npz, hdf5, a\n"
    "Fortran-order npy, --i8-scale auto and --on-duplicate last need a regular file,\n"
    "so redirect one rather than pipe it); OUT - writes the index to standard\n"
    "output once it is complete, and the summary line to standard error.\n"
    "\n"
    "options:\n"
    "  --format FMT   input format: glove, word2vec, fasttext, word2vec-bin, npy,\n"
    "                 npz, fvecs, hdf5 (default: from the extension: .txt/.vec are\n"
    "                 word2vec text when the first line is \"N D\", else GloVe; .bin,\n"
    "                 .npy, .npz, .fvecs, .hdf5/.h5; a .gz, .zst or .xz after it is\n"
    "                 looked through)\n"
    "                 gzip, zstd and xz input is decoded whatever its name\n"
    "  --array NAME   npz: the array to read (default: the only one)\n"
    "  --dataset NAME hdf5: the 2-D float dataset to read (default: train, as in\n"
    "                 ann-benchmarks files); without --metric, the file's \"distance\"\n"
    "                 attribute sets it (angular: cosine, euclidean: l2, dot/ip: dot).\n"
    "                 HDF5 files are parsed by libhdf5, which a corrupt or crafted file\n"
    "                 can crash: pack only HDF5 files from sources you trust\n"
    "  --dim D        glove: D numbers per line, so that the first line's key may\n"
    "                 hold spaces too (default: the first line's field count - 1)\n"
    "  --keys FILE    keys for npy/npz/fvecs/hdf5 rows, one per line (default: no\n"
    "                 keys); text formats carry their own keys\n"
    "  --ids FILE     a 64-bit id per input row, one unsigned decimal per line (any\n"
    "                 format; a regular file of exactly as many lines as rows)\n"
    "  --on-duplicate error|first|last\n"
    "                 a key seen before: refused, naming both lines (default), the\n"
    "                 later row skipped, or the earlier rows skipped (last: a first\n"
    "                 pass over IN finds each key's last row, so IN must be a file,\n"
    "                 not standard input)\n"
    "  --max-decoded SIZE\n"
    "                 the most bytes a compressed input may decode to (default 64G)\n"
    "  --max-idle SIZE\n"
    "                 the most bytes after a row that make no row: blank lines,\n"
    "                 accepted only at the end of IN (default 1M)\n"
    "  --dtype T      stored element type: f32 (default), f16, bf16, i8\n"
    "  --i8-scale S   with --dtype i8: value = stored int8 x S, so values must lie\n"
    "                 in [-127 S, 127 S]; a value outside is refused, naming its\n"
    "                 row (default 1/127, i.e. [-1, 1], which fits --normalize;\n"
    "                 otherwise use S = max |x| / 127); auto: that S, from a first\n"
    "                 pass over IN (a file, not standard input)\n"
    "  --metric M     metric recorded in the index: cosine (default), dot, l2\n"
    "  --normalize    L2-normalize every row before storing it\n"
    "  --model NAME   metadata \"model\"\n"
    "  --source TEXT  metadata \"source\": where the vectors came from\n"
    "  --chunk-bytes SIZE\n"
    "                 the chunk table's chunk size: a power of two from 1K to 1G\n"
    "                 (default 4K: delta reloads read whole chunks, docs/adr/0048),\n"
    "                 or 0 for format 1.0 (one payload checksum, no chunk table)\n"
    "  --layout auto|packed|chunks\n"
    "                 where the sections after the vectors start: on chunk\n"
    "                 boundaries (format 1.2), so that appended rows change only\n"
    "                 the sections' tails; auto (default) does so when the vectors\n"
    "                 fill at least 256 chunks; packed: multiples of 64 (1.1);\n"
    "                 chunks: always (refused with --chunk-bytes 0, or chunks over\n"
    "                 16M longer than the vectors: padding outweighing the index)\n"
    "  --quiet        no progress line (shown on a terminal for work over a second)\n"
    "  -h, --help     print this help\n"
    "\n"
    "Progress is shown on stderr when it is a terminal and the input takes more\n"
    "than two seconds.\n";

/* CLOCK_MONOTONIC in seconds, for the summary's time: the wall clock may jump. */
static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Copies the finished index at `path` to standard output. It goes through a file
   so that a failed pack writes nothing there, and so that the index gets what only
   a seekable output gets from the writer: its length in the header and the format
   1.1 chunk table. */
static int copy_to_stdout(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cli_failf("%s: %s", path, strerror(errno));
    char buf[1 << 16];
    int rc = CLI_OK;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = cli_failf("reading %s: %s", path, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n) {
            rc = cli_failf("writing standard output: %s", strerror(errno));
            break;
        }
    }
    close(fd);
    return rc;
}

/* Whether `kind` (lds_import_sniff's format of IN) contradicts the format asked for: a
   file of another known kind, which would fail there as unparseable numbers or a bad
   header. GloVe and word2vec text are close enough to leave to the importer's message. */
static bool other_kind(lds_import_format asked, lds_import_format kind, const char *what)
{
    if (asked == LDS_IMPORT_AUTO || !what)
        return false;
    if (strcmp(what, "a lodestar index") == 0)
        return true;
    bool asked_text =
        asked == LDS_IMPORT_GLOVE || asked == LDS_IMPORT_W2V_TEXT || asked == LDS_IMPORT_FASTTEXT;
    bool kind_text = kind == LDS_IMPORT_GLOVE || kind == LDS_IMPORT_W2V_TEXT;
    return kind != LDS_IMPORT_AUTO && kind != asked && !(asked_text && kind_text);
}

/* Reports a failed import: the importer's messages name a line or row of IN, the writer's
   (which start "writer: ") concern OUT; an input the options do not fit is a usage error. */
static int pack_failed(const char *prog, const char *in, const char *keys, const char *ids,
                       const char *out, const lds_import_options *opts,
                       const lds_import_result *res, lds_status st, const lds_error *err)
{
    const char *field = err->status == st ? err->field : NULL;
    lds_import_format asked = opts->format;
    uint32_t chunk_bytes = opts->chunk_bytes;
    /* --format names one kind, the file's magic another: say so instead of the parse error
       the wrong reader met (`pack a.npy out --format glove`). */
    lds_import_format kind = LDS_IMPORT_AUTO;
    const char *what = st == LDS_OK ? NULL : cli_sniff_path(in, &kind);
    if (other_kind(asked, kind, what)) {
        fputs("lodestar: ", stderr);
        cli_put_escaped(stderr, in, strlen(in));
        if (kind == LDS_IMPORT_AUTO)
            fprintf(stderr, " is %s already, not %s input: nothing to pack\n", what,
                    lds_import_format_name(asked));
        else
            fprintf(stderr, " is %s, not %s input: pack it with --format %s\n", what,
                    lds_import_format_name(asked), lds_import_format_name(kind));
        return CLI_FAIL;
    }
    if (st == LDS_E_UNSUPPORTED && field && strcmp(field, "format") == 0)
        return cli_usage_error(
            prog,
            "%s: the format cannot be told from the extension; name it with "
            "--format FMT (glove, word2vec, fasttext, word2vec-bin, npy, npz, fvecs, hdf5)",
            in);
    if (st == LDS_E_INVALID_ARG && field && strcmp(field, "options.array") == 0)
        return cli_usage_error(prog, "%s: %s", in, err->message);
    if (st == LDS_E_INVALID_ARG && field && strcmp(field, "options.i8_scale_auto") == 0)
        return cli_usage_error(prog,
                               "--i8-scale auto reads IN twice; %s cannot be read twice: "
                               "give the scale",
                               in);
    if (st == LDS_E_INVALID_ARG && field && strcmp(field, "options.keys_path") == 0)
        return cli_usage_error(prog,
                               "--keys is for npy, npz, fvecs and hdf5 input; %s is text, whose "
                               "lines carry their own keys: drop --keys",
                               in);
    if (st == LDS_E_INVALID_ARG && field && strcmp(field, "options.on_duplicate") == 0)
        return cli_usage_error(prog,
                               "--on-duplicate last reads IN twice; %s cannot be read twice: "
                               "pack from a file, or use --on-duplicate first",
                               in);
    if (st == LDS_E_INVALID_ARG && field && strcmp(field, "options.dataset") == 0)
        return cli_usage_error(prog, "%s: %s; name one with --dataset NAME", in, err->message);
    /* The writer refuses a forced chunk layout whose chunks (over 16 MiB) outweigh the
       vectors in its own terms (lds_writer_options.layout, LDS_LAYOUT_CHUNK_ALIGNED);
       said here in pack's: the options, and what to give instead. The vectors' bytes come
       from the result lds_import_file reports on this refusal (rows x dim x element size),
       not from the writer's message. */
    if (st == LDS_E_INVALID_ARG && field && strcmp(field, "lds_writer_options.layout") == 0) {
        bool known = res->format != LDS_IMPORT_AUTO; /* reported: never AUTO */
        unsigned long long payload =
            known ? (unsigned long long)res->rows * res->dim * lds_dtype_size(opts->dtype) : 0;
        fputs("lodestar: ", stderr);
        cli_put_escaped(stderr, out, strlen(out));
        unsigned shift = chunk_bytes % (1u << 30) == 0   ? 30
                         : chunk_bytes % (1u << 20) == 0 ? 20
                                                         : 10;
        fprintf(stderr, ": --layout chunks pads every section to a chunk of --chunk-bytes %u%c",
                (unsigned)(chunk_bytes >> shift),
                shift == 30   ? 'G'
                : shift == 20 ? 'M'
                              : 'K');
        if (known)
            fprintf(stderr, ", longer than the %llu bytes of vectors", payload);
        fputs("; use --layout auto (the default) or packed, or --chunk-bytes 16M or smaller\n",
              stderr);
        return CLI_FAIL;
    }
    if (err->status == st && strncmp(err->message, "writer: ", 8) == 0)
        return cli_fail(out, st, err);
    /* A fault of the keys file is named by the keys file, not by IN; so is the ids file's. */
    if (keys && field && strcmp(field, "keys_path") == 0)
        return cli_fail(keys, st, err);
    if (ids && field && strcmp(field, "ids_path") == 0)
        return cli_fail(ids, st, err);
    cli_fail(in, st, err);
    if (st == LDS_E_BAD_VALUE && err->status == st && strstr(err->message, "i8_scale"))
        fputs("lodestar: choose the scale with --i8-scale S (S >= max |x| / 127), or use "
              "--normalize\n",
              stderr);
    return CLI_FAIL;
}

/* Parses pack's options into *opts (set to the defaults here); returns -1 to go on
   with argv[optind..], or an exit code (CLI_OK after --help). */
static int parse_pack_options(int argc, char **argv, lds_import_options *opts)
{
    enum {
        OPT_FORMAT = 256,
        OPT_KEYS,
        OPT_DTYPE,
        OPT_METRIC,
        OPT_NORMALIZE,
        OPT_MODEL,
        OPT_SOURCE,
        OPT_I8_SCALE,
        OPT_ARRAY,
        OPT_ON_DUP,
        OPT_MAX_DECODED,
        OPT_MAX_IDLE,
        OPT_DIM,
        OPT_IDS,
        OPT_DATASET,
        OPT_CHUNK_BYTES,
        OPT_LAYOUT
    };
    static const struct option longopts[] = {
        {"format", required_argument, NULL, OPT_FORMAT},
        {"keys", required_argument, NULL, OPT_KEYS},
        {"dtype", required_argument, NULL, OPT_DTYPE},
        {"metric", required_argument, NULL, OPT_METRIC},
        {"normalize", no_argument, NULL, OPT_NORMALIZE},
        {"model", required_argument, NULL, OPT_MODEL},
        {"source", required_argument, NULL, OPT_SOURCE},
        {"i8-scale", required_argument, NULL, OPT_I8_SCALE},
        {"array", required_argument, NULL, OPT_ARRAY},
        {"on-duplicate", required_argument, NULL, OPT_ON_DUP},
        {"max-decoded", required_argument, NULL, OPT_MAX_DECODED},
        {"max-idle", required_argument, NULL, OPT_MAX_IDLE},
        {"dim", required_argument, NULL, OPT_DIM},
        {"ids", required_argument, NULL, OPT_IDS},
        {"dataset", required_argument, NULL, OPT_DATASET},
        {"chunk-bytes", required_argument, NULL, OPT_CHUNK_BYTES},
        {"layout", required_argument, NULL, OPT_LAYOUT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *prog = argv[0];
    lds_import_options_default(opts);
    /* Without --metric, a format that declares one (HDF5's "distance") sets it. */
    opts->metric_from_input = true;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(pack_usage, stdout);
            return CLI_OK;
        case OPT_FORMAT:
            if (lds_import_format_from_name(optarg, &opts->format) != LDS_OK ||
                opts->format == LDS_IMPORT_AUTO)
                return cli_usage_error(prog,
                                       "unknown format '%s' (glove, word2vec, fasttext, "
                                       "word2vec-bin, npy, npz, fvecs, hdf5)",
                                       optarg);
            break;
        case OPT_KEYS:
            opts->keys_path = optarg;
            break;
        case OPT_DTYPE:
            if (lds_dtype_from_name(optarg, &opts->dtype) != LDS_OK)
                return cli_usage_error(prog, "unknown dtype '%s' (f32, f16, bf16, i8)", optarg);
            break;
        case OPT_METRIC:
            if (lds_metric_from_name(optarg, &opts->metric) != LDS_OK)
                return cli_usage_error(prog, "unknown metric '%s' (cosine, dot, l2)", optarg);
            opts->metric_from_input = false;
            break;
        case OPT_IDS:
            opts->ids_path = optarg;
            break;
        case OPT_DATASET:
            opts->dataset = optarg;
            break;
        case OPT_NORMALIZE:
            opts->normalize = true;
            break;
        case OPT_MODEL:
            opts->model = optarg;
            break;
        case OPT_SOURCE:
            opts->source = optarg;
            break;
        case OPT_ARRAY:
            opts->array = optarg;
            break;
        case OPT_ON_DUP:
            if (strcmp(optarg, "error") == 0)
                opts->on_duplicate = LDS_IMPORT_DUP_ERROR;
            else if (strcmp(optarg, "first") == 0)
                opts->on_duplicate = LDS_IMPORT_DUP_FIRST;
            else if (strcmp(optarg, "last") == 0)
                opts->on_duplicate = LDS_IMPORT_DUP_LAST;
            else
                return cli_usage_error(prog, "--on-duplicate is error, first or last, not '%s'",
                                       optarg);
            break;
        case OPT_DIM:
            if (!cli_parse_u64(optarg, &opts->dim) || opts->dim == 0)
                return cli_usage_error(prog, "--dim wants a whole number above 0, not '%s'",
                                       optarg);
            break;
        case OPT_MAX_DECODED:
            if (!cli_parse_size(optarg, &opts->max_decoded_bytes))
                return cli_usage_error(prog, "--max-decoded wants a size (64G, 100M), not '%s'",
                                       optarg);
            break;
        case OPT_CHUNK_BYTES: {
            uint64_t cb = 0;
            /* "0" (format 1.0, no chunk table) is not a size: cli_parse_size refuses zero. */
            bool none = strcmp(optarg, "0") == 0;
            if ((!none && !cli_parse_size(optarg, &cb)) ||
                (cb != 0 &&
                 (cb < LDS_MIN_CHUNK_BYTES || cb > LDS_MAX_CHUNK_BYTES || (cb & (cb - 1)) != 0)))
                return cli_usage_error(prog,
                                       "--chunk-bytes wants 0 or a power of two from 1K to 1G "
                                       "(4K, 64K), not '%s'",
                                       optarg);
            opts->chunk_bytes = cb == 0 ? LDS_CHUNKS_NONE : (uint32_t)cb;
            break;
        }
        case OPT_LAYOUT:
            if (strcmp(optarg, "auto") == 0)
                opts->layout = LDS_LAYOUT_AUTO;
            else if (strcmp(optarg, "packed") == 0)
                opts->layout = LDS_LAYOUT_PACKED;
            else if (strcmp(optarg, "chunks") == 0)
                opts->layout = LDS_LAYOUT_CHUNK_ALIGNED;
            else
                return cli_usage_error(prog, "--layout is auto, packed or chunks, not '%s'",
                                       optarg);
            break;
        case OPT_MAX_IDLE:
            if (!cli_parse_size(optarg, &opts->max_idle_bytes) || opts->max_idle_bytes == 0)
                return cli_usage_error(prog, "--max-idle wants a size above 0 (1M, 64K), not '%s'",
                                       optarg);
            break;
        case OPT_I8_SCALE: {
            if (strcmp(optarg, "auto") == 0) {
                opts->i8_scale_auto = true;
                break;
            }
            char *end = NULL;
            errno = 0;
            float scale = strtof(optarg, &end);
            if (end == optarg || *end != '\0' || errno != 0 || !isfinite(scale) || scale <= 0)
                return cli_usage_error(prog, "--i8-scale wants a finite number above 0, not '%s'",
                                       optarg);
            opts->i8_scale = scale;
            break;
        }
        default:
            return cli_option_error(prog, c, argv);
        }
    }
    /* "chunks" asks for sections on chunk boundaries, 0 for no chunks at all: the file
       would silently be format 1.0, so the contradiction is refused. */
    if (opts->layout == LDS_LAYOUT_CHUNK_ALIGNED && opts->chunk_bytes == LDS_CHUNKS_NONE)
        return cli_usage_error(prog, "--layout chunks aligns sections to chunks and "
                                     "--chunk-bytes 0 writes none (format 1.0): give a chunk "
                                     "size (4K is the default) or drop --layout chunks");
    return -1;
}

/* Where pack reads and writes: the names messages use (in, out) and the paths the
   importer opens (in_path, out_path), which differ for "-". */
typedef struct pack_io {
    const char *in, *out, *in_path, *out_path;
    bool to_stdout;
    char tmp_dir[4096], tmp_out[4096 + 16];
} pack_io;

/* Checks IN and OUT and prepares them; returns -1 to go on, or an exit code. */
static int pack_paths(int argc, char **argv, const lds_import_options *opts, pack_io *io)
{
    const char *prog = argv[0];
    if (argc - optind != 2)
        return cli_usage_error(prog, "expected IN and OUT, got %d argument%s", argc - optind,
                               argc - optind == 1 ? "" : "s");
    const char *in = argv[optind];
    const char *out = argv[optind + 1];
    if ((opts->i8_scale != 0 || opts->i8_scale_auto) && opts->dtype != LDS_DTYPE_I8)
        return cli_usage_error(prog, "--i8-scale is for --dtype i8");
    /* "-": standard input or output. The importer reads a path, so IN - is the process's
       own descriptor 0 by name; OUT - is a temporary file copied out once complete. */
    const char *in_path = in, *out_path = out;
    bool to_stdout = strcmp(out, "-") == 0;
    if (strcmp(in, "-") == 0) {
        if (opts->format == LDS_IMPORT_AUTO)
            return cli_usage_error(prog, "reading standard input needs --format FMT (glove, "
                                         "word2vec, fasttext, word2vec-bin, npy, fvecs)");
        if (opts->format == LDS_IMPORT_HDF5)
            return cli_usage_error(prog, "--format hdf5 reads a file that libhdf5 seeks in, not "
                                         "standard input: give its path");
        if (isatty(STDIN_FILENO))
            return cli_failf("standard input is a terminal; redirect or pipe the embeddings "
                             "into it");
        in = "(standard input)";
        in_path = "/dev/stdin";
    }
    char *tmp_dir = io->tmp_dir, *tmp_out = io->tmp_out;
    if (to_stdout) {
        if (isatty(STDOUT_FILENO))
            return cli_failf("standard output is a terminal; redirect the index to a file or "
                             "a pipe");
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp)
            tmp = "/tmp";
        if ((size_t)snprintf(tmp_dir, sizeof io->tmp_dir, "%s/lodestar-pack-XXXXXX", tmp) >=
                sizeof io->tmp_dir ||
            !mkdtemp(tmp_dir))
            return cli_failf("cannot create a temporary folder in %s: %s", tmp, strerror(errno));
        snprintf(tmp_out, sizeof io->tmp_out, "%s/out.ldsi", tmp_dir);
        out = "(standard output)";
        out_path = tmp_out;
        cli_temp_add_dir(tmp_dir);
        cli_temp_add_file(tmp_out);
    }
    /* The library writer's temporary file beside OUT (or beside the file a link at OUT
       names), removed on a signal. */
    cli_temp_add_writer(out_path);
    char *real_out = realpath(out_path, NULL);
    if (real_out != NULL && strcmp(real_out, out_path) != 0)
        cli_temp_add_writer(real_out);
    free(real_out);
    io->in = in;
    io->out = out;
    io->in_path = in_path;
    io->out_path = out_path;
    io->to_stdout = to_stdout;
    return -1;
}

/* The lines pack prints once the index is complete. */
static void print_summary(FILE *sum, const lds_import_options *opts, const lds_import_result *res,
                          const pack_io *io, double seconds)
{
    fprintf(sum, "packed %llu rows x %u dims (%s, %s, %s%s) from %s into %s in %.2f s\n",
            (unsigned long long)res->rows, (unsigned)res->dim, lds_import_format_name(res->format),
            lds_dtype_name(opts->dtype), lds_metric_name(res->metric),
            opts->normalize ? ", normalized" : "", io->in, io->out, seconds);
    if (res->duplicates_skipped > 0)
        fprintf(sum, "skipped %llu rows whose key %s (--on-duplicate %s)\n",
                (unsigned long long)res->duplicates_skipped,
                opts->on_duplicate == LDS_IMPORT_DUP_LAST ? "comes again later" : "was seen before",
                opts->on_duplicate == LDS_IMPORT_DUP_LAST ? "last" : "first");
    /* A scale the user did not choose is printed, so a later pack can pass it back
       with --i8-scale and quantize new rows the same way. */
    if (opts->i8_scale_auto) {
        char scale[48];
        cli_format_float(scale, sizeof scale, res->i8_scale);
        fprintf(sum, "i8 scale %s (max |x| / 127)\n", scale);
    }
}

int cli_pack(int argc, char **argv)
{
    const char *prog = argv[0];
    lds_import_options opts;
    int rc = parse_pack_options(argc, argv, &opts);
    if (rc >= 0)
        return rc;
    pack_io io;
    if ((rc = pack_paths(argc, argv, &opts, &io)) >= 0)
        return rc;
    double start = now_seconds();
    cli_progress progress;
    cli_progress_start(&progress, "lodestar pack");
    opts.progress = cli_progress_callback;
    opts.progress_ctx = &progress;

    lds_import_result res = {.size = sizeof res};
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_import_file(io.in_path, io.out_path, &opts, &res, &err);
    cli_progress_end(&progress);
    rc = st == LDS_OK ? CLI_OK
                      : pack_failed(prog, io.in, opts.keys_path, opts.ids_path, io.out, &opts,
                                    &res, st, &err);
    if (rc == CLI_OK && io.to_stdout)
        rc = copy_to_stdout(io.out_path);
    if (io.to_stdout) {
        unlink(io.out_path);
        rmdir(io.tmp_dir);
    }
    if (rc != CLI_OK)
        return rc;
    /* With the index on standard output, the summary goes to standard error. */
    print_summary(io.to_stdout ? stderr : stdout, &opts, &res, &io, now_seconds() - start);
    return CLI_OK;
}
