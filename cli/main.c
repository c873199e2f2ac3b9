/* The `lodestar` program: pack, export, keys, info, get, similar, verify, split, diff. */
#include "cli.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char usage_text[] =
    "usage: lodestar [--help] [--version] COMMAND [ARGS]\n"
    "\n"
    "Build, inspect and query lodestar embedding indexes.\n"
    "\n"
    "commands:\n"
    "  pack     build an index from GloVe, word2vec, fastText, .npy, .npz, .fvecs or\n"
    "           HDF5 embeddings (gzip, zstd or xz compressed too, HDF5 excepted)\n"
    "  export   write an index back out as .npy, .fvecs, GloVe or word2vec\n"
    "  keys     print the keys of an index, one per line\n"
    "  info     load an index and print its shape, metadata and how it was loaded\n"
    "  get      print the row, id and vector of a key\n"
    "  similar  print the nearest neighbours of a key, a vector, or of keys\n"
    "           added and subtracted (gensim's most_similar)\n"
    "  verify   validate an index completely, checksum included (or a split's\n"
    "           manifest.json and every shard it names)\n"
    "  split    split an index into N shard indexes and a manifest\n"
    "  diff     print the chunks of NEW a delta reload from OLD would read\n"
    "\n"
    "Run 'lodestar COMMAND --help' for the options of a command.\n"
    "\n"
    "options of every command:\n"
    "  --timeout SECONDS  give up a load from an http(s):// URL that has not ended after\n"
    "                     SECONDS (default 3600; 0: never), whatever its rate\n"
    "  --url-connections N  fetch an http(s):// index with N concurrent Range requests\n"
    "                     (0: automatic, the default; 1: one stream; at most 16)\n"
    "  --quiet            no progress line (shown on a terminal's standard error only,\n"
    "                     for work that takes more than a second)\n"
    "\n"
    "Files are written as DIR/.NAME.lds-tmp-PID-XXXXXX beside DIR/NAME and renamed\n"
    "over it once complete; on SIGINT, SIGTERM or SIGHUP they are removed. One left by\n"
    "a killed process (SIGKILL) may be deleted once process PID is gone.\n"
    "Exit status: 0 success, 1 failure, 2 usage error.\n";

/* Takes --quiet, --url-connections N and --timeout SECONDS (or --timeout=SECONDS) out of the command's
   arguments (argv[1..argc), up to a "--"); returns the new argc, or -1 after a usage error
   naming `prog`. */
static int take_common_options(const char *prog, int argc, char **argv)
{
    int out = 1;
    bool rest = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (rest || strcmp(a, "--") == 0) {
            rest = true;
            argv[out++] = argv[i];
            continue;
        }
        if (strcmp(a, "--quiet") == 0) {
            cli_quiet = true;
            continue;
        }
        const char *v = NULL;
        if (strcmp(a, "--url-connections") == 0 || strncmp(a, "--url-connections=", 18) == 0) {
            const char *n = a[17] == '=' ? a + 18 : i + 1 < argc ? argv[++i] : NULL;
            uint64_t k = 0;
            if (n == NULL || !cli_parse_u64(n, &k) || k > 16) {
                cli_usage_error(prog, "--url-connections wants a count from 0 (automatic) to 16");
                return -1;
            }
            cli_url_connections = (uint32_t)k;
            continue;
        }
        if (strcmp(a, "--timeout") == 0) {
            if (i + 1 >= argc) {
                cli_usage_error(prog, "--timeout wants a number of seconds");
                return -1;
            }
            v = argv[++i];
        } else if (strncmp(a, "--timeout=", 10) == 0) {
            v = a + 10;
        } else {
            argv[out++] = argv[i];
            continue;
        }
        uint64_t s = 0;
        if (!cli_parse_u64(v, &s) || s > UINT32_MAX / 1000u) {
            cli_usage_error(prog,
                            "--timeout wants a whole number of seconds from 0 (none) to "
                            "%u, not '%s'",
                            UINT32_MAX / 1000u, v);
            return -1;
        }
        cli_timeout_ms = (uint32_t)s * 1000u;
    }
    argv[out] = NULL;
    return out;
}

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"pack", cli_pack},     {"info", cli_info},     {"get", cli_get},   {"similar", cli_similar},
    {"verify", cli_verify}, {"export", cli_export}, {"keys", cli_keys}, {"split", cli_split},
    {"diff", cli_diff},
};

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    /* getopt names argv[0] in its messages: "lodestar", not the path it was run by. */
    static char self[] = "lodestar";
    if (argc > 0)
        argv[0] = self;
    opterr = 0; /* every getopt message is ours, escaped (cli_option_error) */
    int c;
    /* "+": stop at the first non-option, the command name. */
    while ((c = getopt_long(argc, argv, "+:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(usage_text, stdout);
            return cli_close_stdout(CLI_OK);
        case 'V':
            printf("lodestar %s (library %s)\n", LDS_VERSION_STRING, lds_version());
            return cli_close_stdout(CLI_OK);
        default:
            cli_option_error("lodestar", c, argv);
            fputc('\n', stderr);
            fputs(usage_text, stderr);
            return CLI_USAGE;
        }
    }
    if (optind >= argc) {
        fputs("lodestar: missing command\n\n", stderr);
        fputs(usage_text, stderr);
        return CLI_USAGE;
    }
    const char *name = argv[optind];
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(commands[i].name, name) != 0)
            continue;
        /* The command sees its own argv, whose argv[0] getopt uses in its messages. */
        static char prog[64];
        snprintf(prog, sizeof prog, "lodestar %s", name);
        char **sub_argv = argv + optind;
        sub_argv[0] = prog;
        int sub_argc = take_common_options(prog, argc - (int)(sub_argv - argv), sub_argv);
        if (sub_argc < 0)
            return CLI_USAGE;
        cli_temp_init();
        optind = 0; /* glibc: rescan from the start with fresh state */
        return cli_close_stdout(commands[i].run(sub_argc, sub_argv));
    }
    fputs("lodestar: unknown command '", stderr);
    cli_put_escaped(stderr, name, strlen(name));
    fputs("'\n\n", stderr);
    fputs(usage_text, stderr);
    return CLI_USAGE;
}
