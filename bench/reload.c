/*
 * reload (a diagnostic): a service that reloads its index. Each cycle loads
 * the file into a new index and frees the previous one; 100 cycles per
 * strategy, interleaved. Time and page faults per cycle, RSS across cycles.
 * Strategies: the loader's pooled path (adopt and copy) and a plain malloc
 * of the payload (what a loader without a pool would do).
 */
#include "bench.h"

#include "lodestar.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum kind { R_ADOPT, R_COPY, R_MALLOC, R_COUNT };

static const char *const kind_names[R_COUNT] = {"pooled adopt", "pooled copy",
                                                "plain malloc + parse (borrow, free on release)"};

typedef struct rl_ctx {
    enum kind kind;
    const char *path;
    lds_pool *pool;
    lds_index *current;
} rl_ctx;

static int run(void *p, uint64_t ops, uint64_t *elapsed)
{
    rl_ctx *c = p;
    (void)ops;
    (void)elapsed;
    lds_index *next = NULL;
    lds_status st;
    if (c->kind == R_MALLOC) {
        st = bench_load_malloc(c->path, &next);
    } else {
        lds_load_options lo;
        lds_load_options_default(&lo);
        lo.pool = c->pool;
        lo.ownership = c->kind == R_ADOPT ? LDS_OWN_ADOPT : LDS_OWN_COPY;
        st = lds_load_path(c->path, &lo, &next, NULL, NULL);
    }
    if (st != LDS_OK) {
        fprintf(stderr, "reload: %s: %s\n", c->path, lds_status_name(st));
        return -1;
    }
    lds_index_free(c->current);
    c->current = next;
    return 0;
}

/* --mode adopt|copy|malloc: one strategy alone in this process; prints one line. */
static int reload_alone(const bench_opts *o, enum kind kind)
{
    rl_ctx c = {kind, o->index_path, NULL, NULL};
    if (kind != R_MALLOC && lds_pool_create(NULL, &c.pool) != LDS_OK)
        return -1;
    int cycles = o->cycles ? o->cycles : 100;
    uint64_t rss_first = 0, rss_max = 0, rss_last = 0, f_first = 0, f_late = 0;
    double *ms = calloc((size_t)cycles, sizeof *ms);
    int rc = ms ? 0 : -1;
    for (int i = 0; i < cycles && rc == 0; i++) {
        uint64_t f0 = bench_minflt(), t0 = bench_now_ns();
        rc = run(&c, 1, NULL);
        uint64_t t1 = bench_now_ns(), f1 = bench_minflt();
        ms[i] = (double)(t1 - t0) / 1e6;
        rss_last = bench_rss();
        if (i == 0) {
            rss_first = rss_last;
            f_first = f1 - f0;
        }
        if (i >= cycles / 2)
            f_late += f1 - f0;
        if (rss_last > rss_max)
            rss_max = rss_last;
    }
    if (rc == 0) {
        double sorted_mid = 0;
        for (int i = 0; i < cycles; i++) {
            int below = 0;
            for (int j = 0; j < cycles; j++)
                below += ms[j] < ms[i];
            if (below == cycles / 2)
                sorted_mid = ms[i];
        }
        printf("first_ms=%.4f median_ms=%.4f first_faults=%llu late_faults=%.1f rss_first=%llu "
               "rss_last=%llu rss_max=%llu\n",
               ms[0], sorted_mid, (unsigned long long)f_first,
               (double)f_late / (double)(cycles - cycles / 2), (unsigned long long)rss_first,
               (unsigned long long)rss_last, (unsigned long long)rss_max);
    }
    free(ms);
    lds_index_free(c.current);
    lds_pool_free(c.pool);
    return rc;
}

/* Runs `--mode NAME` in a fresh process of this program and adds its line as a row. */
static int alone_row(const bench_opts *o, bench_report *rep, const char *path, int cycles,
                     enum kind kind)
{
    static const char *const modes[R_COUNT] = {"adopt", "copy", "malloc"};
    char cmd[4400];
    if (strchr(path, '\'')) {
        fprintf(stderr, "reload: the index path may not contain a single quote\n");
        return -1;
    }
    snprintf(cmd, sizeof cmd, "'/proc/%d/exe' reload --mode %s --cycles %d --index '%s'",
             (int)getpid(), modes[kind], cycles, path);
    (void)o;
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[512] = "";
    if (!fgets(line, sizeof line, p))
        line[0] = '\0';
    int st = pclose(p);
    double first_ms, median_ms, late;
    unsigned long long first_f, rss_first, rss_last, rss_max;
    if (st != 0 ||
        sscanf(line,
               "first_ms=%lf median_ms=%lf first_faults=%llu late_faults=%lf "
               "rss_first=%llu rss_last=%llu rss_max=%llu",
               &first_ms, &median_ms, &first_f, &late, &rss_first, &rss_last, &rss_max) != 7) {
        fprintf(stderr, "reload: child for %s failed: %s\n", modes[kind], line);
        return -1;
    }
    bench_row *row = bench_row_new(rep, kind_names[kind], "ms/cycle");
    bench_row_set(row, "first cycle", "first_ms", BENCH_NUM, first_ms);
    bench_row_set(row, "first cycle", "first_faults", BENCH_COUNT, (double)first_f);
    bench_row_set(row, "later cycles", "median_ms", BENCH_NUM, median_ms);
    bench_row_set(row, "later cycles", "faults_2nd_half", BENCH_NUM, late);
    bench_row_set(row, "residency", "rss_first", BENCH_BYTES, (double)rss_first);
    bench_row_set(row, "residency", "rss_last", BENCH_BYTES, (double)rss_last);
    bench_row_set(row, "residency", "rss_max", BENCH_BYTES, (double)rss_max);
    return 0;
}

int bench_reload(const bench_opts *o)
{
    if (o->mode) {
        static const char *const modes[R_COUNT] = {"adopt", "copy", "malloc"};
        for (int k = 0; k < R_COUNT; k++)
            if (strcmp(o->mode, modes[k]) == 0 && o->index_path)
                return reload_alone(o, (enum kind)k);
        fprintf(stderr, "reload: --mode adopt|copy|malloc needs --index FILE\n");
        return -1;
    }
    uint64_t rows = o->rows ? o->rows : (o->dry ? 200 : 10000);
    uint32_t dim = o->dim ? o->dim : (o->dry ? 16 : 512);
    int cycles = o->cycles ? o->cycles : (o->dry ? 2 : 100);
    char ref[4096];
    const char *path = o->index_path;
    if (!path) {
        if (bench_reference_index(bench_work_dir(o), rows, dim, false, ref, sizeof ref) != 0)
            return -1;
        path = ref;
    }
    bench_report *rep = bench_report_new(o);
    rl_ctx ctx[R_COUNT];
    bench_alt alts[R_COUNT];
    memset(ctx, 0, sizeof ctx);
    if (!rep)
        return -1;
    bench_param(rep, "file", path);
    char buf[256];
    snprintf(buf, sizeof buf,
             "%d cycles per strategy, interleaved; a cycle = load the file, then free the "
             "previous index; no warm-up (the first cycles are the point)",
             cycles);
    bench_param(rep, "cycles", buf);
    bench_param(rep, "note",
                "RSS is the whole process's: all strategies' live indexes and retained "
                "buffers together");
    bench_table(rep, "reload cycles", true);
    int rc = 0;
    for (int k = 0; k < R_COUNT && rc == 0; k++) {
        ctx[k].kind = (enum kind)k;
        ctx[k].path = path;
        if (k != R_MALLOC && lds_pool_create(NULL, &ctx[k].pool) != LDS_OK)
            rc = -1;
        alts[k] = (bench_alt){.name = kind_names[k],
                              .scale = BENCH_MS,
                              .unit = "ms/cycle",
                              .run = run,
                              .ctx = &ctx[k],
                              .ops = 1,
                              .row = bench_row_new(rep, kind_names[k], "ms/cycle")};
    }
    if (rc == 0)
        rc = bench_interleave(alts, R_COUNT, 0, cycles);
    for (int k = 0; rc == 0 && k < R_COUNT; k++) {
        bench_row *row = alts[k].row;
        size_t n = bench_row_count(row);
        bench_row_set(row, "first cycle", "first_ms", BENCH_NUM, bench_row_at(row, 0));
        bench_row_set(row, "first cycle", "first_faults", BENCH_COUNT, bench_row_faults_at(row, 0));
        double later = 0;
        for (size_t i = n / 2; i < n; i++)
            later += bench_row_faults_at(row, i);
        bench_row_set(row, "later cycles", "faults_2nd_half", BENCH_NUM,
                      n > 1 ? later / (double)(n - n / 2) : 0);
        bench_row_set(row, "residency", "rss_first", BENCH_BYTES, (double)bench_row_rss_at(row, 0));
        bench_row_set(row, "residency", "rss_last", BENCH_BYTES,
                      (double)bench_row_rss_at(row, n ? n - 1 : 0));
        bench_row_set(row, "residency", "rss_max", BENCH_BYTES, (double)bench_row_rss_max(row));
        if (ctx[k].pool) {
            lds_pool_stats st;
            lds_pool_stats_init(&st);
            lds_pool_get_stats(ctx[k].pool, &st);
            bench_row_set(row, "residency", "pool_retained", BENCH_BYTES,
                          (double)st.bytes_retained);
        }
    }
    if (rc == 0) {
        bench_note(rep, "faults/op = median minor faults per cycle; faults 2nd half = mean over "
                        "the second half of the cycles");
        bench_table(rep, "each strategy alone in a fresh process (RSS is that strategy's own)",
                    false);
        for (int k = 0; k < R_COUNT && rc == 0; k++)
            rc = alone_row(o, rep, path, cycles, (enum kind)k);
    }
    if (rc == 0)
        rc = bench_report_finish(rep);
    for (int k = 0; k < R_COUNT; k++) {
        lds_index_free(ctx[k].current);
        lds_pool_free(ctx[k].pool);
    }
    bench_report_free(rep);
    return rc;
}
