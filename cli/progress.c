/* The progress line of the `lodestar` program (cli.h: cli_progress_*). */
#include "cli.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

bool cli_quiet = false;
uint32_t cli_timeout_ms = CLI_DEFAULT_TIMEOUT_MS;
uint32_t cli_url_connections = 0;

/* The line starts after this long, and is redrawn at most this often. */
#define CLI_PROGRESS_AFTER_S 1.0
#define CLI_PROGRESS_EVERY_S 0.2

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cli_progress_start(cli_progress *p, const char *what)
{
    memset(p, 0, sizeof *p);
    p->what = what;
    p->on = !cli_quiet && isatty(STDERR_FILENO) == 1;
    p->start = p->last = now_seconds();
}

void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total)
{
    if (!p->on)
        return;
    double t = now_seconds();
    if (t - p->start < CLI_PROGRESS_AFTER_S ||
        (t - p->last < CLI_PROGRESS_EVERY_S && done != total))
        return;
    p->last = t;
    p->shown = true;
    char d[32], n[32];
    cli_format_size(d, sizeof d, done);
    if (total != 0 && total != UINT64_MAX && done <= total) {
        cli_format_size(n, sizeof n, total);
        fprintf(stderr, "\r\033[K%s: %3d%% (%s of %s, %.0f s)", p->what,
                (int)((double)done * 100.0 / (double)total), d, n, t - p->start);
    } else {
        fprintf(stderr, "\r\033[K%s: %s (%.0f s)", p->what, d, t - p->start);
    }
    fflush(stderr);
}

void cli_progress_callback(uint64_t done, uint64_t total, void *ctx)
{
    cli_progress_update(ctx, done, total);
}

void cli_progress_end(cli_progress *p)
{
    if (p->shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    p->shown = false;
}

double cli_progress_seconds(const cli_progress *p)
{
    return now_seconds() - p->start;
}
