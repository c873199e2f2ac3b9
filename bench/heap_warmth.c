/*
 * heap-warmth (a diagnostic): what are warm pages worth? A fresh process's
 * first load against the same load in a process that has already loaded (and
 * freed) the index a few times, each in its own process. The parent runs the
 * children interleaved (fresh, warm, fresh, warm, ...) and collects the time
 * and page faults each child measured around its last load. bench/env/heap-warmth.sh
 * adds hyperfine's view of the whole processes.
 *
 * Child mode: --mode child --loads N --index FILE: loads (and frees) FILE N
 * times with the defaults (shared pool) and prints "last_ns=... last_faults=...
 * first_ns=... first_faults=..." on stdout. N = 0 only opens nothing and exits
 * (the process-start baseline for hyperfine).
 */
#include "bench.h"

#include "lodestar.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int child(const bench_opts *o)
{
    if (!o->index_path) {
        fprintf(stderr, "heap-warmth: --mode child needs --index FILE\n");
        return -1;
    }
    uint64_t first_ns = 0, first_f = 0, last_ns = 0, last_f = 0;
    for (int i = 0; i < o->loads; i++) {
        lds_index *idx = NULL;
        lds_error err;
        lds_error_init(&err);
        uint64_t f0 = bench_minflt(), t0 = bench_now_ns();
        lds_status st = lds_load_path(o->index_path, NULL, &idx, NULL, &err);
        uint64_t t1 = bench_now_ns(), f1 = bench_minflt();
        if (st != LDS_OK) {
            fprintf(stderr, "heap-warmth: %s: %s\n", o->index_path, err.message);
            return -1;
        }
        bench_escape(lds_index_row(idx, 0));
        lds_index_free(idx);
        if (i == 0) {
            first_ns = t1 - t0;
            first_f = f1 - f0;
        }
        last_ns = t1 - t0;
        last_f = f1 - f0;
    }
    printf("last_ns=%llu last_faults=%llu first_ns=%llu first_faults=%llu rss=%llu\n",
           (unsigned long long)last_ns, (unsigned long long)last_f, (unsigned long long)first_ns,
           (unsigned long long)first_f, (unsigned long long)bench_rss());
    return 0;
}

typedef struct hw_ctx {
    const char *index;
    int loads;
    const char *huge; /* LDS_POOL_HUGE_PAGES_ENV in the child: "off" or "on" */
    double faults;    /* of the last child */
} hw_ctx;

static int spawn(hw_ctx *c, uint64_t *elapsed)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    char loads[16];
    snprintf(loads, sizeof loads, "%d", c->loads);
    const char *argv[] = {"lodestar-bench", "heap-warmth", "--mode", "child", "--loads", loads,
                          "--index",        c->index,      NULL};
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        /* Set either way, so a variable in the parent's environment cannot relabel a row. */
        setenv(LDS_POOL_HUGE_PAGES_ENV, c->huge, 1);
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv("/proc/self/exe", (char *const *)(uintptr_t)argv);
        _exit(127);
    }
    close(fds[1]);
    char out[512];
    size_t got = 0;
    ssize_t n;
    while (got < sizeof out - 1 && (n = read(fds[0], out + got, sizeof out - 1 - got)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        got += (size_t)n;
    }
    out[got] = '\0';
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    unsigned long long ns = 0, faults = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        sscanf(out, "last_ns=%llu last_faults=%llu", &ns, &faults) != 2) {
        fprintf(stderr, "heap-warmth: child failed: %s\n", out);
        return -1;
    }
    *elapsed = ns ? ns : 1;
    c->faults = (double)faults;
    return 0;
}

int bench_heap_warmth(const bench_opts *o)
{
    if (o->mode && strcmp(o->mode, "child") == 0)
        return child(o);
    if (o->mode) {
        fprintf(stderr, "heap-warmth: unknown --mode %s (only 'child')\n", o->mode);
        return -1;
    }
    uint64_t rows = o->rows ? o->rows : (o->dry ? 200 : 10000);
    uint32_t dim = o->dim ? o->dim : (o->dry ? 16 : 512);
    char ref[4096];
    const char *path = o->index_path;
    if (!path) {
        if (bench_reference_index(bench_work_dir(o), rows, dim, false, ref, sizeof ref) != 0)
            return -1;
        path = ref;
    }
    int warm_loads = o->loads ? o->loads : (o->dry ? 2 : 6);
    bench_report *rep = bench_report_new(o);
    if (!rep)
        return -1;
    bench_param(rep, "file", path);
    bench_param(rep, "loads", "lds_load_path with default options (shared pool), then free");
    char title[160];
    snprintf(title, sizeof title,
             "one load per process: fresh process vs a process after %d earlier loads",
             warm_loads - 1);
    bench_table(rep, title, true);
    /* Each with 4 KiB pages and with transparent huge pages (the pool's huge_pages option,
       set through LDS_POOL_HUGE_PAGES_ENV in the child; docs/adr/0009). */
    enum { NV = 4 };
    hw_ctx ctx[NV] = {{path, 1, "off", 0},
                      {path, 1, "on", 0},
                      {path, warm_loads, "off", 0},
                      {path, warm_loads, "on", 0}};
    char warm_name[96], warm_huge[96];
    snprintf(warm_name, sizeof warm_name, "warmed process: load %d", warm_loads);
    snprintf(warm_huge, sizeof warm_huge, "warmed process: load %d (huge pages)", warm_loads);
    bench_row *rows_[NV] = {bench_row_new(rep, "fresh process: first load", "ms"),
                            bench_row_new(rep, "fresh process: first load (huge pages)", "ms"),
                            bench_row_new(rep, warm_name, "ms"),
                            bench_row_new(rep, warm_huge, "ms")};
    /* Interleaved like bench_interleave, but the time and faults are the child's own,
       measured around its last load, not the parent's. */
    int rc = 0;
    int iters = bench_iters(o, 21), warm = bench_warmup(o, 2);
    for (int round = 0; round < warm + iters && rc == 0; round++) {
        for (int k = 0; k < NV && rc == 0; k++) {
            uint64_t ns = 0;
            rc = spawn(&ctx[k], &ns);
            if (rc == 0 && round >= warm)
                bench_row_sample(rows_[k], (double)ns / 1e6, ctx[k].faults, 0);
        }
    }
    if (rc == 0) {
        double fresh = bench_row_median(rows_[0]), warmed = bench_row_median(rows_[2]);
        double fresh_h = bench_row_median(rows_[1]), warmed_h = bench_row_median(rows_[3]);
        for (int k = 0; k < NV; k++) {
            double w = k % 2 ? warmed_h : warmed;
            if (k < 2)
                bench_row_set(rows_[k], "ratio", "vs_warmed", BENCH_RATIO,
                              w > 0 ? bench_row_median(rows_[k]) / w : 0);
            bench_row_text(rows_[k], "pages", "pages", k % 2 ? "huge" : "4 KiB");
        }
        bench_note(rep, "faults/op = the child's minor faults during that load; a fresh process "
                        "faults in every page of the payload buffer");
        bench_note(rep, "warm pages are worth %.2f ms per load here (%.2fx)", fresh - warmed,
                   warmed > 0 ? fresh / warmed : 0);
        double max4 = 0, maxh = 0;
        for (size_t i = 0; i < bench_row_count(rows_[0]); i++)
            max4 = bench_row_at(rows_[0], i) > max4 ? bench_row_at(rows_[0], i) : max4;
        for (size_t i = 0; i < bench_row_count(rows_[1]); i++)
            maxh = bench_row_at(rows_[1], i) > maxh ? bench_row_at(rows_[1], i) : maxh;
        bench_note(rep,
                   "first load, huge pages vs 4 KiB: median %.3g vs %.3g ms (4 KiB / huge "
                   "%.2fx), worst %.3g vs %.3g ms (%.2fx)",
                   fresh_h, fresh, fresh_h > 0 ? fresh / fresh_h : 0, maxh, max4,
                   maxh > 0 ? max4 / maxh : 0);
        rc = bench_report_finish(rep);
    }
    bench_report_free(rep);
    return rc;
}
