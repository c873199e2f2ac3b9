/* lodestar pack: build an index from embeddings in a format people already hold. */
#include "cli.h"

#include <getopt.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char pack_usage[] =
    "usage: lodestar pack [options] IN OUT\n"
    "\n"
    "Build the index OUT from the embeddings in IN. OUT is written to a temporary\n"
    "file that replaces OUT only once complete, so a failed pack leaves OUT as it was.\n"
    "Malformed input is refused with its line or row number.\n"
    "\n"
    "options:\n"
    "  --format FMT   input format: glove, word2vec, word2vec-bin, npy, fvecs\n"
    "                 (default: from the extension: .txt/.vec are word2vec text when\n"
    "                 the first line is \"N D\", else GloVe; .bin, .npy, .fvecs)\n"
    "  --keys FILE    keys for npy/fvecs rows, one per line (default: no keys)\n"
    "  --dtype T      stored element type: f32 (default), f16, bf16, i8\n"
    "  --metric M     metric recorded in the index: cosine (default), dot, l2\n"
    "  --normalize    L2-normalize every row before storing it\n"
    "  --model NAME   metadata \"model\"\n"
    "  --source TEXT  metadata \"source\": where the vectors came from\n"
    "  -h, --help     print this help\n"
    "\n"
    "Progress is shown on stderr when it is a terminal and the input takes more\n"
    "than two seconds.\n";

/* Progress on a terminal: silent for the first two seconds, then at most 5 updates a second. */
typedef struct progress_state {
    bool tty;
    bool shown;
    double start;
    double last;
} progress_state;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_progress(uint64_t done, uint64_t total, void *ctx)
{
    progress_state *p = ctx;
    if (!p->tty)
        return;
    double t = now_seconds();
    if (t - p->start < 2.0 || (t - p->last < 0.2 && done != total))
        return;
    p->last = t;
    p->shown = true;
    double mib = 1024.0 * 1024.0;
    if (total > 0)
        fprintf(stderr, "\rlodestar pack: %3d%% (%.1f of %.1f MiB, %.0f s)",
                (int)((double)done * 100.0 / (double)total), (double)done / mib,
                (double)total / mib, t - p->start);
    else
        fprintf(stderr, "\rlodestar pack: %.1f MiB (%.0f s)", (double)done / mib, t - p->start);
    fflush(stderr);
}

int cli_pack(int argc, char **argv)
{
    enum {
        OPT_FORMAT = 256,
        OPT_KEYS,
        OPT_DTYPE,
        OPT_METRIC,
        OPT_NORMALIZE,
        OPT_MODEL,
        OPT_SOURCE
    };
    static const struct option longopts[] = {
        {"format", required_argument, NULL, OPT_FORMAT},
        {"keys", required_argument, NULL, OPT_KEYS},
        {"dtype", required_argument, NULL, OPT_DTYPE},
        {"metric", required_argument, NULL, OPT_METRIC},
        {"normalize", no_argument, NULL, OPT_NORMALIZE},
        {"model", required_argument, NULL, OPT_MODEL},
        {"source", required_argument, NULL, OPT_SOURCE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *prog = argv[0];
    lds_import_options opts;
    lds_import_options_default(&opts);
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(pack_usage, stdout);
            return CLI_OK;
        case OPT_FORMAT:
            if (lds_import_format_from_name(optarg, &opts.format) != LDS_OK ||
                opts.format == LDS_IMPORT_AUTO)
                return cli_usage_error(prog, "unknown format '%s'", optarg);
            break;
        case OPT_KEYS:
            opts.keys_path = optarg;
            break;
        case OPT_DTYPE:
            if (lds_dtype_from_name(optarg, &opts.dtype) != LDS_OK)
                return cli_usage_error(prog, "unknown dtype '%s' (f32, f16, bf16, i8)", optarg);
            break;
        case OPT_METRIC:
            if (lds_metric_from_name(optarg, &opts.metric) != LDS_OK)
                return cli_usage_error(prog, "unknown metric '%s' (cosine, dot, l2)", optarg);
            break;
        case OPT_NORMALIZE:
            opts.normalize = true;
            break;
        case OPT_MODEL:
            opts.model = optarg;
            break;
        case OPT_SOURCE:
            opts.source = optarg;
            break;
        default:
            fprintf(stderr, "Try '%s --help'.\n", prog);
            return CLI_USAGE;
        }
    }
    if (argc - optind != 2)
        return cli_usage_error(prog, "expected IN and OUT, got %d argument%s", argc - optind,
                               argc - optind == 1 ? "" : "s");
    const char *in = argv[optind];
    const char *out = argv[optind + 1];

    progress_state progress = {.tty = isatty(STDERR_FILENO) == 1, .start = now_seconds()};
    opts.progress = on_progress;
    opts.progress_ctx = &progress;

    lds_import_result res = {.size = sizeof res};
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_import_file(in, out, &opts, &res, &err);
    if (progress.shown)
        fputc('\n', stderr);
    /* Importer messages name a line or row of IN; the writer's name the output path. */
    if (st != LDS_OK)
        return cli_fail(strncmp(err.message, "writer:", 7) == 0 ? NULL : in, st, &err);
    printf("packed %llu rows x %u dims (%s, %s, %s%s) from %s into %s in %.2f s\n",
           (unsigned long long)res.rows, (unsigned)res.dim, lds_import_format_name(res.format),
           lds_dtype_name(opts.dtype), lds_metric_name(opts.metric),
           opts.normalize ? ", normalized" : "", in, out, now_seconds() - progress.start);
    return CLI_OK;
}
