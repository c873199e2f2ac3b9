/*
 * lodestar-bench search: exact top-k search per dtype, metric, batch size,
 * thread count and kernel, interleaved in one process (ADR 0032).
 *
 * The vectors are an index's rows (--index FILE, read as f32) or rows x dim
 * generated unit-length rows (default 341,479 x 100, GloVe's shape). For each
 * dtype and metric they are written to a temporary index in --dir and loaded
 * (pooled); every round then runs every row once (batch 1: 8 calls of one
 * query; batch B > 1: one call of B queries), in a rotating order, and the
 * table gives the median (min-max) of wall ms per query, CPU ms per query (the
 * process's, all threads), GFLOP/s (2 x rows x dim per query, over wall time)
 * and the rows' bytes read per second against glibc memchr over 512 MiB (one
 * thread, measured before and after), the memory's read rate on this machine.
 */
#include "bench.h"

#include "lodestar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_LIST 16

typedef struct config {
    int dt, mt; /* index into the dtype / metric lists */
    size_t batch;
    unsigned threads;
    const char *kernel;
    double *wall, *cpu; /* ms per query, one per round */
    double *faults;     /* minor page faults per query, one per round */
    int n;
} config;

static double now_ms(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    double *c = malloc((size_t)n * sizeof *c);
    if (!c)
        return NAN;
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    free(c);
    return m;
}

static double vmin(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

static double vmax(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* Splits a comma-separated list in place; returns the count (0 on too many). */
static int split(char *s, char **out, int cap)
{
    int n = 0;
    for (char *t = strtok(s, ","); t; t = strtok(NULL, ",")) {
        if (n == cap)
            return 0;
        out[n++] = t;
    }
    return n;
}

/* memchr over 512 MiB (64 MiB with --dry) for a byte that is not there: GB/s. */
static double memchr_gbps(bool dry)
{
    size_t n = dry ? (size_t)64 << 20 : (size_t)512 << 20;
    unsigned char *p = malloc(n);
    if (!p)
        return NAN;
    memset(p, 1, n);
    double best = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = now_ms(CLOCK_MONOTONIC);
        bench_escape(memchr(p, 0, n));
        double t = now_ms(CLOCK_MONOTONIC) - t0;
        double g = (double)n / (t * 1e6);
        best = g > best ? g : best;
    }
    free(p);
    return best;
}

static const char *load_average(char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (!fgets(buf, (int)cap, f))
            buf[0] = '\0';
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

static int parse_dtype(const char *s, lds_dtype *d)
{
    static const struct {
        const char *n;
        lds_dtype d;
    } t[] = {{"f32", LDS_DTYPE_F32},
             {"f16", LDS_DTYPE_F16},
             {"bf16", LDS_DTYPE_BF16},
             {"i8", LDS_DTYPE_I8}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(s, t[i].n) == 0) {
            *d = t[i].d;
            return 0;
        }
    return -1;
}

static int parse_metric(const char *s, lds_metric *m)
{
    if (strcmp(s, "dot") == 0)
        *m = LDS_METRIC_DOT;
    else if (strcmp(s, "cosine") == 0)
        *m = LDS_METRIC_COSINE;
    else if (strcmp(s, "l2") == 0)
        *m = LDS_METRIC_L2;
    else
        return -1;
    return 0;
}

/* Writes the vectors as an index of dtype/metric at `path` and loads it. */
static lds_index *make_index(const char *path, const float *vec, uint64_t rows, uint32_t dim,
                             lds_dtype dt, lds_metric mt)
{
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = dim;
    wo.dtype = dt;
    wo.metric = mt;
    if (dt == LDS_DTYPE_I8) {
        float mx = 0;
        for (size_t i = 0; i < (size_t)rows * dim; i++)
            mx = fabsf(vec[i]) > mx ? fabsf(vec[i]) : mx;
        wo.i8_scale = mx > 0 ? mx / 127.0f : 1.0f;
    }
    lds_writer *w = NULL;
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_writer_open_path(path, &wo, &w, &err);
    for (uint64_t r = 0; st == LDS_OK && r < rows; r++)
        st = lds_writer_add_row(w, vec + r * dim, dim, 0, NULL, 0, &err);
    if (st == LDS_OK)
        st = lds_writer_finish(w, &err);
    lds_writer_free(w);
    lds_index *idx = NULL;
    if (st == LDS_OK)
        st = lds_load_path(path, NULL, &idx, NULL, &err);
    unlink(path);
    if (st != LDS_OK) {
        fprintf(stderr, "lodestar-bench search: %s: %s\n", path, err.message);
        return NULL;
    }
    return idx;
}

int bench_search(const bench_opts *o)
{
    char dts[256], mts[256], bs[256], ks[256];
    snprintf(dts, sizeof dts, "%s", o->dtypes ? o->dtypes : "f32,f16,bf16,i8");
    snprintf(mts, sizeof mts, "%s", o->metrics ? o->metrics : "dot");
    snprintf(bs, sizeof bs, "%s", o->batches ? o->batches : o->dry ? "1,8" : "1,8,100,1000");
    const char *avail[8];
    size_t n_avail = lds_search_kernels(avail, 8);
    if (o->kernels) {
        snprintf(ks, sizeof ks, "%s", o->kernels);
    } else {
        ks[0] = '\0';
        for (size_t i = 0; i < n_avail; i++)
            snprintf(ks + strlen(ks), sizeof ks - strlen(ks), "%s%s", i ? "," : "", avail[i]);
    }
    char *dt_s[MAX_LIST], *mt_s[MAX_LIST], *b_s[MAX_LIST], *k_s[MAX_LIST];
    int ndt = split(dts, dt_s, MAX_LIST), nmt = split(mts, mt_s, MAX_LIST);
    int nb = split(bs, b_s, MAX_LIST), nk = split(ks, k_s, MAX_LIST);
    lds_dtype dtv[MAX_LIST];
    lds_metric mtv[MAX_LIST];
    size_t bv[MAX_LIST];
    if (!ndt || !nmt || !nb || !nk) {
        fprintf(stderr, "lodestar-bench search: an empty or too long list\n");
        return 2;
    }
    for (int i = 0; i < ndt; i++)
        if (parse_dtype(dt_s[i], &dtv[i])) {
            fprintf(stderr, "lodestar-bench search: unknown dtype '%s' (f32, f16, bf16, i8)\n",
                    dt_s[i]);
            return 2;
        }
    for (int i = 0; i < nmt; i++)
        if (parse_metric(mt_s[i], &mtv[i])) {
            fprintf(stderr, "lodestar-bench search: unknown metric '%s' (dot, cosine, l2)\n",
                    mt_s[i]);
            return 2;
        }
    size_t bmax = 8; /* batch 1 runs 8 queries */
    for (int i = 0; i < nb; i++) {
        char *end;
        unsigned long long b = strtoull(b_s[i], &end, 10);
        if (*end || b < 1 || b > 100000) {
            fprintf(stderr, "lodestar-bench search: bad batch size '%s'\n", b_s[i]);
            return 2;
        }
        bv[i] = (size_t)b;
        bmax = bv[i] > bmax ? bv[i] : bmax;
    }
    for (int i = 0; i < nk; i++) {
        bool ok = false;
        for (size_t j = 0; j < n_avail; j++)
            ok |= strcmp(k_s[i], avail[j]) == 0;
        if (!ok) {
            fprintf(stderr, "lodestar-bench search: kernel '%s' is not one this CPU runs\n",
                    k_s[i]);
            return 2;
        }
    }
    unsigned tmax = o->threads ? (unsigned)o->threads : 2;
    unsigned tv[2] = {1, tmax};
    int nt = tmax > 1 ? 2 : 1;

    /* The vectors, as f32. */
    uint64_t rows = o->rows ? o->rows : o->dry ? 20000 : 341479;
    uint32_t dim = o->dim ? o->dim : 100;
    float *vec = NULL;
    char source[512];
    if (o->index_path) {
        lds_index *src = NULL;
        lds_error err;
        lds_error_init(&err);
        if (lds_load_path(o->index_path, NULL, &src, NULL, &err) != LDS_OK) {
            fprintf(stderr, "lodestar-bench search: %s: %s\n", o->index_path, err.message);
            return 1;
        }
        rows = lds_index_rows(src);
        dim = lds_index_dim(src);
        vec = malloc((size_t)rows * dim * sizeof *vec);
        for (uint64_t r = 0; vec && r < rows; r++)
            lds_index_row_f32(src, r, vec + r * dim, dim);
        lds_index_free(src);
        snprintf(source, sizeof source, "%s (%llu x %u)", o->index_path, (unsigned long long)rows,
                 dim);
    } else {
        vec = malloc((size_t)rows * dim * sizeof *vec);
        uint64_t s = 0x9E3779B97F4A7C15u;
        for (uint64_t r = 0; vec && r < rows; r++) {
            double nn = 0;
            float *v = vec + r * dim;
            for (uint32_t d = 0; d < dim; d++) {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                v[d] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
                nn += (double)v[d] * v[d];
            }
            for (uint32_t d = 0; d < dim && nn > 0; d++)
                v[d] = (float)(v[d] / sqrt(nn));
        }
        snprintf(source, sizeof source, "generated %llu x %u unit rows", (unsigned long long)rows,
                 dim);
    }
    if (!vec) {
        fprintf(stderr, "lodestar-bench search: no memory for the vectors\n");
        return 1;
    }
    /* Queries: rows spread over the index. */
    float *q = malloc(bmax * dim * sizeof *q);
    if (!q)
        return 1;
    for (size_t j = 0; j < bmax; j++)
        memcpy(q + j * dim, vec + (j * 7919 % rows) * dim, dim * sizeof *q);

    lds_index *idx[MAX_LIST][MAX_LIST] = {{NULL}};
    char path[1024];
    snprintf(path, sizeof path, "%s/lodestar-bench-search-%ld.ldsi", bench_work_dir(o),
             (long)getpid());
    for (int d = 0; d < ndt; d++)
        for (int m = 0; m < nmt; m++)
            if (!(idx[d][m] = make_index(path, vec, rows, dim, dtv[d], mtv[m])))
                return 1;
    free(vec);

    const size_t k = 10;
    int iters = bench_iters(o, 5), warm = bench_warmup(o, 1);
    int nconf = ndt * nmt * nb * nt * nk;
    config *cf = calloc((size_t)nconf, sizeof *cf);
    lds_hit *hits = malloc(bmax * k * sizeof *hits);
    size_t *nh = malloc(bmax * sizeof *nh);
    if (!cf || !hits || !nh)
        return 1;
    int c = 0;
    for (int d = 0; d < ndt; d++)
        for (int m = 0; m < nmt; m++)
            for (int b = 0; b < nb; b++)
                for (int t = 0; t < nt; t++)
                    for (int kk = 0; kk < nk; kk++) {
                        cf[c] = (config){d, m, bv[b], tv[t], k_s[kk], NULL, NULL, NULL, 0};
                        cf[c].wall = calloc((size_t)iters, sizeof(double));
                        cf[c].cpu = calloc((size_t)iters, sizeof(double));
                        cf[c].faults = calloc((size_t)iters, sizeof(double));
                        if (!cf[c].wall || !cf[c].cpu || !cf[c].faults)
                            return 1;
                        c++;
                    }
    char la0[64], la1[64];
    load_average(la0, sizeof la0);
    double bw0 = memchr_gbps(o->dry);
    for (int it = 0; it < warm + iters; it++) {
        for (int i = 0; i < nconf; i++) {
            config *x = &cf[(i + it) % nconf]; /* rotate the order each round */
            lds_index *ix = idx[x->dt][x->mt];
            lds_search_options so;
            lds_search_options_default(&so);
            so.threads = x->threads;
            so.kernel = x->kernel;
            size_t calls = x->batch == 1 ? 8 : 1, nq = x->batch == 1 ? 1 : x->batch;
            uint64_t f0 = bench_minflt();
            double w0 = now_ms(CLOCK_MONOTONIC), c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
            for (size_t call = 0; call < calls; call++) {
                lds_error err;
                lds_error_init(&err);
                if (lds_index_search_batch(ix, q + call * dim, nq, dim, k, &so, hits, nh, &err) !=
                    LDS_OK) {
                    fprintf(stderr, "lodestar-bench search: %s\n", err.message);
                    return 1;
                }
            }
            double w = now_ms(CLOCK_MONOTONIC) - w0, cpu = now_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
            uint64_t f1 = bench_minflt();
            if (it >= warm) {
                x->wall[x->n] = w / (double)(calls * nq);
                x->cpu[x->n] = cpu / (double)(calls * nq);
                x->faults[x->n] = (double)(f1 - f0) / (double)(calls * nq);
                x->n++;
            }
        }
    }
    double bw1 = memchr_gbps(o->dry);
    load_average(la1, sizeof la1);
    double bw = bw0 > bw1 ? bw0 : bw1;

    printf("lodestar-bench search: exact top-%zu, %s\n", k, source);
    printf("machine: %s\n", bench_machine_line());
    printf("load average: %s at start, %s at end\n", la0, la1);
    printf("read bandwidth (memchr, 1 thread, best of 3): %.1f GB/s before, %.1f after\n", bw0,
           bw1);
    printf("rounds: %d measured after %d warm-up, configurations interleaved in a rotating "
           "order; batch 1 = 8 calls of one query\n\n",
           iters, warm);
    /* --json: the same rows through the harness's report (samples: wall ms per query per
       round), written without a second table on stdout. */
    bench_report *rep = o->json_path ? bench_report_new(o) : NULL;
    if (rep) {
        char v[64];
        bench_param(rep, "source", source);
        bench_param(rep, "load_average_start", la0);
        bench_param(rep, "load_average_end", la1);
        snprintf(v, sizeof v, "%.2f", bw0);
        bench_param(rep, "memchr_gbps_before", v);
        snprintf(v, sizeof v, "%.2f", bw1);
        bench_param(rep, "memchr_gbps_after", v);
        snprintf(v, sizeof v, "%d measured, %d warm-up", iters, warm);
        bench_param(rep, "rounds", v);
        char title[128];
        snprintf(title, sizeof title, "exact top-%zu, wall ms per query", k);
        bench_table(rep, title, true);
    }
    printf("%-5s %-6s %5s %3s %-8s %27s %9s %8s %7s %6s\n", "dtype", "metric", "batch", "thr",
           "kernel", "wall ms/query med (min-max)", "cpu ms/q", "GFLOP/s", "GB/s", "%bw");
    for (int i = 0; i < nconf; i++) {
        config *x = &cf[i];
        lds_index *ix = idx[x->dt][x->mt];
        double mw = median(x->wall, x->n), mc = median(x->cpu, x->n);
        double flop = 2.0 * (double)lds_index_rows(ix) * dim;
        /* Rows are read once per query chunk of up to 256 queries (128 KiB). */
        size_t qc = (size_t)131072 / ((size_t)dim * 4);
        qc = qc < 1 ? 1 : qc > 256 ? 256 : qc;
        double passes = (double)((x->batch + qc - 1) / qc);
        double bytes = (double)lds_index_payload_bytes(ix) * passes / (double)x->batch;
        double gbs = bytes / (mw * 1e6);
        char range[64];
        snprintf(range, sizeof range, "%.3f (%.3f-%.3f)", mw, vmin(x->wall, x->n),
                 vmax(x->wall, x->n));
        printf("%-5s %-6s %5zu %3u %-8s %27s %9.3f %8.1f %7.2f %5.0f%%\n", dt_s[x->dt], mt_s[x->mt],
               x->batch, x->threads, x->kernel, range, mc, flop / (mw * 1e6), gbs,
               100.0 * gbs / bw);
        if (rep) {
            char name[160];
            snprintf(name, sizeof name, "%s %s batch %zu threads %u %s", dt_s[x->dt], mt_s[x->mt],
                     x->batch, x->threads, x->kernel);
            bench_row *row = bench_row_new(rep, name, "ms/query");
            if (!row)
                return 1;
            for (int r = 0; r < x->n; r++)
                bench_row_sample(row, x->wall[r], x->faults[r], 0);
            bench_row_text(row, "", "dtype", dt_s[x->dt]);
            bench_row_text(row, "", "metric", mt_s[x->mt]);
            bench_row_set(row, "", "batch", BENCH_COUNT, (double)x->batch);
            bench_row_set(row, "", "threads", BENCH_COUNT, x->threads);
            bench_row_text(row, "", "kernel", x->kernel);
            bench_row_set(row, "", "cpu_ms_per_query", BENCH_NUM, mc);
            bench_row_set(row, "", "gflops", BENCH_NUM, flop / (mw * 1e6));
            bench_row_set(row, "", "gbps", BENCH_NUM, gbs);
            bench_row_set(row, "", "pct_read_bandwidth", BENCH_PCT, 100.0 * gbs / bw);
        }
    }
    int rc = 0;
    if (rep) {
        rc = bench_report_write_json(rep) ? 1 : 0;
        bench_report_free(rep);
    }
    for (int i = 0; i < nconf; i++) {
        free(cf[i].wall);
        free(cf[i].cpu);
        free(cf[i].faults);
    }
    free(cf);
    free(hits);
    free(nh);
    free(q);
    for (int d = 0; d < ndt; d++)
        for (int m = 0; m < nmt; m++)
            lds_index_free(idx[d][m]);
    return rc;
}
