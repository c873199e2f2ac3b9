/* Helpers shared by the subcommands: errors, number parsing, loading, floats. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_fail(const char *what, lds_status status, const lds_error *err)
{
    const char *detail =
        (err && err->status == status && err->message[0]) ? err->message : lds_strerror(status);
    if (what)
        fprintf(stderr, "lodestar: %s: %s\n", what, detail);
    else
        fprintf(stderr, "lodestar: %s\n", detail);
    return CLI_FAIL;
}

int cli_failf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("lodestar: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return CLI_FAIL;
}

int cli_usage_error(const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry '%s --help'.\n", prog);
    va_end(ap);
    return CLI_USAGE;
}

bool cli_parse_u64(const char *text, uint64_t *out)
{
    if (!text || *text < '0' || *text > '9')
        return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = (uint64_t)v;
    return true;
}

lds_status cli_load(const cli_load_request *req, lds_index **out, lds_load_info *info,
                    lds_error *err)
{
    lds_load_options opts;
    lds_load_options_default(&opts);
    opts.verify_checksum = true;
    if (req->mmap >= 0)
        opts.use_mmap = req->mmap != 0;
    lds_load_info_init(info);
    if (strcmp(req->file, "-") == 0) {
        if (isatty(STDIN_FILENO)) {
            if (err) {
                err->status = LDS_E_INVALID_ARG;
                snprintf(err->message, sizeof err->message,
                         "standard input is a terminal; redirect or pipe an index into it");
            }
            return LDS_E_INVALID_ARG;
        }
        return lds_load_fd(STDIN_FILENO, &opts, out, info, err);
    }
    return lds_load_path(req->file, &opts, out, info, err);
}

void cli_format_float(char *buf, size_t cap, float x)
{
    /* FLT_DECIMAL_DIG (9) digits always round-trip; fewer usually do. */
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, cap, "%.*g", digits, (double)x);
        if (strtof(buf, NULL) == x)
            return;
    }
}

void cli_print_float(FILE *f, float x)
{
    char buf[40];
    cli_format_float(buf, sizeof buf, x);
    fputs(buf, f);
}

int cli_close_stdout(int code)
{
    /* A full disk or a closed pipe shows up here, not at printf. */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (code == CLI_OK)
            cli_failf("writing standard output: %s", strerror(errno));
        return code == CLI_OK ? CLI_FAIL : code;
    }
    return code;
}
