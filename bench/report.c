/* The report: rows of samples, and their text tables, JSON summary and gnuplot script.
 * The runner, clocks and machine facts that feed it are in harness.c. */
#include "bench.h"

#include "lodestar.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define MAX_EXTRAS 48
#define MAX_TABLES 32
#define MAX_NOTES  128
#define MAX_PARAMS 24

typedef struct extra {
    char group[48];
    char key[40];
    bench_kind kind;
    double value;
    char text[64];
} extra;

struct bench_row {
    char name[96];
    char unit[24];
    int table;
    double *v;     /* samples, in unit */
    double *f;     /* minor faults per op, per sample */
    uint64_t *rss; /* resident bytes after each sample */
    size_t n, cap;
    extra ex[MAX_EXTRAS];
    size_t n_ex;
};

typedef struct table {
    char title[160];
    bool show_time;
} table;

typedef struct note {
    int table;
    char text[2048]; /* the longest note (live's, about 1 KB) whole */
} note;

struct bench_report {
    const bench_opts *opts;
    table tables[MAX_TABLES];
    int n_tables;
    bench_row **rows;
    size_t n_rows, cap_rows;
    note notes[MAX_NOTES];
    size_t n_notes;
    char param_key[MAX_PARAMS][32];
    char param_val[MAX_PARAMS][320];
    size_t n_params;
};

/* ---- reports ------------------------------------------------------------ */

bench_report *bench_report_new(const bench_opts *opts)
{
    bench_report *rep = calloc(1, sizeof *rep);
    if (!rep)
        return NULL;
    rep->opts = opts;
    return rep;
}

void bench_report_free(bench_report *rep)
{
    if (!rep)
        return;
    for (size_t i = 0; i < rep->n_rows; i++) {
        free(rep->rows[i]->v);
        free(rep->rows[i]->f);
        free(rep->rows[i]->rss);
        free(rep->rows[i]);
    }
    free(rep->rows);
    free(rep);
}

void bench_table(bench_report *rep, const char *title, bool show_time)
{
    if (rep->n_tables >= MAX_TABLES)
        return;
    table *t = &rep->tables[rep->n_tables++];
    snprintf(t->title, sizeof t->title, "%s", title);
    t->show_time = show_time;
}

bench_row *bench_row_new(bench_report *rep, const char *name, const char *unit)
{
    if (rep->n_tables == 0)
        bench_table(rep, rep->opts->subcommand, true);
    if (rep->n_rows == rep->cap_rows) {
        size_t cap = rep->cap_rows ? rep->cap_rows * 2 : 16;
        bench_row **rows = realloc(rep->rows, cap * sizeof *rows);
        if (!rows)
            abort();
        rep->rows = rows;
        rep->cap_rows = cap;
    }
    bench_row *row = calloc(1, sizeof *row);
    if (!row)
        abort();
    snprintf(row->name, sizeof row->name, "%s", name);
    snprintf(row->unit, sizeof row->unit, "%s", unit ? unit : "");
    row->table = rep->n_tables - 1;
    rep->rows[rep->n_rows++] = row;
    return row;
}

void bench_row_sample(bench_row *row, double value, double faults_per_op, uint64_t rss)
{
    if (row->n == row->cap) {
        size_t cap = row->cap ? row->cap * 2 : 16;
        double *v = realloc(row->v, cap * sizeof *v);
        double *f = realloc(row->f, cap * sizeof *f);
        uint64_t *r = realloc(row->rss, cap * sizeof *r);
        if (!v || !f || !r)
            abort();
        row->v = v;
        row->f = f;
        row->rss = r;
        row->cap = cap;
    }
    row->v[row->n] = value;
    row->f[row->n] = faults_per_op;
    row->rss[row->n] = rss;
    row->n++;
}

static extra *row_extra(bench_row *row, const char *group, const char *key)
{
    for (size_t i = 0; i < row->n_ex; i++)
        if (strcmp(row->ex[i].key, key) == 0)
            return &row->ex[i];
    if (row->n_ex == MAX_EXTRAS)
        return NULL;
    extra *e = &row->ex[row->n_ex++];
    memset(e, 0, sizeof *e);
    snprintf(e->group, sizeof e->group, "%s", group);
    snprintf(e->key, sizeof e->key, "%s", key);
    return e;
}

void bench_row_set(bench_row *row, const char *group, const char *key, bench_kind kind,
                   double value)
{
    extra *e = row_extra(row, group, key);
    if (!e)
        return;
    e->kind = kind;
    e->value = value;
}

void bench_row_text(bench_row *row, const char *group, const char *key, const char *text)
{
    extra *e = row_extra(row, group, key);
    if (!e)
        return;
    e->kind = BENCH_TEXT;
    snprintf(e->text, sizeof e->text, "%s", text);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(const double *v, size_t n)
{
    if (n == 0)
        return 0;
    double *c = malloc(n * sizeof *c);
    if (!c)
        abort();
    memcpy(c, v, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_double);
    double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    free(c);
    return m;
}

double bench_row_median(const bench_row *row)
{
    return median_of(row->v, row->n);
}

double bench_row_min(const bench_row *row)
{
    double m = row->n ? row->v[0] : 0;
    for (size_t i = 1; i < row->n; i++)
        if (row->v[i] < m)
            m = row->v[i];
    return m;
}

static double row_max(const bench_row *row)
{
    double m = row->n ? row->v[0] : 0;
    for (size_t i = 1; i < row->n; i++)
        if (row->v[i] > m)
            m = row->v[i];
    return m;
}

double bench_row_faults(const bench_row *row)
{
    return median_of(row->f, row->n);
}

uint64_t bench_row_rss_max(const bench_row *row)
{
    uint64_t m = 0;
    for (size_t i = 0; i < row->n; i++)
        if (row->rss[i] > m)
            m = row->rss[i];
    return m;
}

size_t bench_row_count(const bench_row *row)
{
    return row->n;
}

double bench_row_at(const bench_row *row, size_t i)
{
    return i < row->n ? row->v[i] : 0;
}

double bench_row_faults_at(const bench_row *row, size_t i)
{
    return i < row->n ? row->f[i] : 0;
}

uint64_t bench_row_rss_at(const bench_row *row, size_t i)
{
    return i < row->n ? row->rss[i] : 0;
}

void bench_note(bench_report *rep, const char *fmt, ...)
{
    if (rep->n_notes == MAX_NOTES)
        return;
    note *n = &rep->notes[rep->n_notes++];
    n->table = rep->n_tables - 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->text, sizeof n->text, fmt, ap);
    va_end(ap);
}

void bench_param(bench_report *rep, const char *key, const char *value)
{
    if (rep->n_params == MAX_PARAMS)
        return;
    snprintf(rep->param_key[rep->n_params], sizeof rep->param_key[0], "%s", key);
    snprintf(rep->param_val[rep->n_params], sizeof rep->param_val[0], "%s", value);
    rep->n_params++;
}

/* ---- text output -------------------------------------------------------- */

static void fmt_time(double v, char *buf, size_t cap)
{
    double a = v < 0 ? -v : v;
    if (a == 0)
        snprintf(buf, cap, "0");
    else if (a < 10)
        snprintf(buf, cap, "%.3g", v);
    else if (a < 1000)
        snprintf(buf, cap, "%.1f", v);
    else
        snprintf(buf, cap, "%.0f", v);
}

/* 20589008 -> "20,589,008" */
static void fmt_grouped(uint64_t v, char *buf, size_t cap)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
    size_t o = 0;
    for (int i = 0; i < n && o + 2 < cap; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
}

static void fmt_extra(const extra *e, char *buf, size_t cap)
{
    char tmp[48];
    switch (e->kind) {
    case BENCH_BYTES:
        if (e->value < 0)
            snprintf(buf, cap, "-");
        else if (e->value < 1024)
            snprintf(buf, cap, "%.0f B", e->value);
        else if (strcmp(e->group, "allocation") == 0 &&
                 strchr(bench_fmt_bytes(e->value, tmp, sizeof tmp), '.'))
            fmt_grouped((uint64_t)e->value, buf, cap);
        else
            snprintf(buf, cap, "%s", bench_fmt_bytes(e->value, tmp, sizeof tmp));
        break;
    case BENCH_COUNT:
        snprintf(buf, cap, "%.0f", e->value);
        break;
    case BENCH_NUM:
        fmt_time(e->value, buf, cap);
        break;
    case BENCH_RATIO:
        snprintf(buf, cap, "%.2fx", e->value);
        break;
    case BENCH_PCT:
        snprintf(buf, cap, "%.1f%%", e->value);
        break;
    case BENCH_TEXT:
        snprintf(buf, cap, "%s", e->text);
        break;
    }
}

#define MAX_COLS (MAX_EXTRAS + 8)

typedef struct column {
    char group[48];
    char label[40];
    size_t width;
} column;

static void label_of(const char *key, char *out, size_t cap)
{
    snprintf(out, cap, "%s", key);
    for (char *c = out; *c; c++)
        if (*c == '_')
            *c = ' ';
}

static void cell(const bench_row *row, size_t col, size_t n_extra_cols, const column *cols,
                 char *buf, size_t cap)
{
    buf[0] = '\0';
    if (col < n_extra_cols) {
        for (size_t i = 0; i < row->n_ex; i++) {
            char lab[40];
            label_of(row->ex[i].key, lab, sizeof lab);
            if (strcmp(lab, cols[col].label) == 0 && strcmp(row->ex[i].group, cols[col].group) == 0)
                fmt_extra(&row->ex[i], buf, cap);
        }
        return;
    }
    size_t k = col - n_extra_cols;
    switch (k) {
    case 0:
        fmt_time(bench_row_median(row), buf, cap);
        break;
    case 1:
        fmt_time(bench_row_min(row), buf, cap);
        break;
    case 2:
        fmt_time(row_max(row), buf, cap);
        break;
    case 3: {
        double f = bench_row_faults(row);
        if (f == 0 || f >= 10)
            snprintf(buf, cap, "%.0f", f);
        else
            snprintf(buf, cap, "%.3f", f);
        break;
    }
    default:
        break;
    }
}

static void print_table(const bench_report *rep, int ti)
{
    const table *t = &rep->tables[ti];
    column cols[MAX_COLS];
    size_t n_cols = 0;
    size_t name_w = 4, unit_w = 4;

    for (size_t r = 0; r < rep->n_rows; r++) {
        const bench_row *row = rep->rows[r];
        if (row->table != ti)
            continue;
        if (strlen(row->name) > name_w)
            name_w = strlen(row->name);
        if (strlen(row->unit) > unit_w)
            unit_w = strlen(row->unit);
        for (size_t i = 0; i < row->n_ex; i++) {
            char lab[40];
            label_of(row->ex[i].key, lab, sizeof lab);
            size_t c;
            for (c = 0; c < n_cols; c++)
                if (strcmp(cols[c].label, lab) == 0 && strcmp(cols[c].group, row->ex[i].group) == 0)
                    break;
            if (c == n_cols && n_cols < MAX_EXTRAS) {
                /* keep columns of one group together */
                size_t at = n_cols;
                for (size_t g = n_cols; g > 0; g--)
                    if (strcmp(cols[g - 1].group, row->ex[i].group) == 0) {
                        at = g;
                        break;
                    }
                memmove(&cols[at + 1], &cols[at], (n_cols - at) * sizeof cols[0]);
                snprintf(cols[at].group, sizeof cols[at].group, "%s", row->ex[i].group);
                snprintf(cols[at].label, sizeof cols[at].label, "%s", lab);
                cols[at].width = 0;
                n_cols++;
            }
        }
    }
    size_t n_extra_cols = n_cols;
    if (t->show_time) {
        static const char *labels[] = {"median", "min", "max", "faults/op"};
        for (size_t k = 0; k < 4; k++) {
            snprintf(cols[n_cols].group, sizeof cols[n_cols].group, "time");
            snprintf(cols[n_cols].label, sizeof cols[n_cols].label, "%s", labels[k]);
            cols[n_cols].width = 0;
            n_cols++;
        }
    }
    for (size_t c = 0; c < n_cols; c++) {
        cols[c].width = strlen(cols[c].label);
        for (size_t r = 0; r < rep->n_rows; r++) {
            if (rep->rows[r]->table != ti)
                continue;
            char buf[96];
            cell(rep->rows[r], c, n_extra_cols, cols, buf, sizeof buf);
            if (strlen(buf) > cols[c].width)
                cols[c].width = strlen(buf);
        }
    }
    /* Group widths: a group's heading spans its columns. */
    printf("\n%s\n", t->title);
    printf("%-*s  %-*s", (int)name_w, "", t->show_time ? (int)unit_w : 0, "");
    for (size_t c = 0; c < n_cols;) {
        size_t span = 0, e = c;
        while (e < n_cols && strcmp(cols[e].group, cols[c].group) == 0) {
            span += cols[e].width + (e > c ? 2 : 0);
            e++;
        }
        size_t hl = strlen(cols[c].group);
        printf(" | %s", cols[c].group);
        if (span > hl) {
            putchar(' ');
            for (size_t i = hl + 1; i < span; i++)
                putchar('-');
        }
        c = e;
    }
    printf("\n%-*s  %-*s", (int)name_w, "name", t->show_time ? (int)unit_w : 0,
           t->show_time ? "unit" : "");
    for (size_t c = 0; c < n_cols; c++) {
        bool first = c == 0 || strcmp(cols[c].group, cols[c - 1].group) != 0;
        printf("%s%*s", first ? " | " : "  ", (int)cols[c].width, cols[c].label);
    }
    printf("\n");
    for (size_t r = 0; r < rep->n_rows; r++) {
        const bench_row *row = rep->rows[r];
        if (row->table != ti)
            continue;
        printf("%-*s  %-*s", (int)name_w, row->name, t->show_time ? (int)unit_w : 0,
               t->show_time ? row->unit : "");
        for (size_t c = 0; c < n_cols; c++) {
            char buf[96];
            cell(row, c, n_extra_cols, cols, buf, sizeof buf);
            bool first = c == 0 || strcmp(cols[c].group, cols[c - 1].group) != 0;
            printf("%s%*s", first ? " | " : "  ", (int)cols[c].width, buf);
        }
        printf("\n");
    }
    for (size_t i = 0; i < rep->n_notes; i++)
        if (rep->notes[i].table == ti)
            printf("  %s\n", rep->notes[i].text);
}

/* ---- JSON ------------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v)
{
    if (v != v || v > 1e300 || v < -1e300)
        fprintf(f, "null");
    else
        fprintf(f, "%.17g", v);
}

static int write_json(const bench_report *rep, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "lodestar-bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "{\n  \"subcommand\": ");
    json_str(f, rep->opts->subcommand);
    fprintf(f, ",\n  \"lodestar_version\": ");
    json_str(f, lds_version());
    fprintf(f, ",\n  \"dry\": %s,\n  \"machine\": {\"cpu\": ", rep->opts->dry ? "true" : "false");
    json_str(f, bench_cpu_model());
    fprintf(f, ", \"cpus\": %ld, \"kernel\": ", sysconf(_SC_NPROCESSORS_ONLN));
    json_str(f, bench_kernel());
    fprintf(f, ", \"host\": ");
    json_str(f, bench_host_facts());
    fprintf(f, ", \"page_size\": %zu, \"allocator\": ", bench_page_size());
    json_str(f, bench_allocator_name());
    fprintf(f, ", \"allocator_version\": ");
    json_str(f, bench_allocator_version());
    fprintf(f, ", \"libc\": ");
    json_str(f, gnu_get_libc_version());
    const char *thr = getenv("MALLOC_MMAP_THRESHOLD_");
    fprintf(f, ", \"malloc_mmap_threshold\": ");
    if (thr)
        json_str(f, thr);
    else
        fprintf(f, "null");
    fprintf(f, ", \"build\": ");
    json_str(f, bench_build_type());
    fprintf(f, "},\n  \"params\": {");
    for (size_t i = 0; i < rep->n_params; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_str(f, rep->param_key[i]);
        fprintf(f, ": ");
        json_str(f, rep->param_val[i]);
    }
    fprintf(f, "},\n  \"rows\": [");
    for (size_t r = 0; r < rep->n_rows; r++) {
        const bench_row *row = rep->rows[r];
        fprintf(f, "%s\n    {\"table\": ", r ? "," : "");
        json_str(f, rep->tables[row->table].title);
        fprintf(f, ", \"name\": ");
        json_str(f, row->name);
        fprintf(f, ", \"unit\": ");
        json_str(f, row->unit);
        fprintf(f, ", \"median\": ");
        json_num(f, bench_row_median(row));
        fprintf(f, ", \"min\": ");
        json_num(f, bench_row_min(row));
        fprintf(f, ", \"max\": ");
        json_num(f, row_max(row));
        fprintf(f, ", \"page_faults\": ");
        json_num(f, bench_row_faults(row));
        fprintf(f, ", \"rss_max\": %llu", (unsigned long long)bench_row_rss_max(row));
        for (size_t i = 0; i < row->n_ex; i++) {
            fprintf(f, ", ");
            json_str(f, row->ex[i].key);
            fprintf(f, ": ");
            if (row->ex[i].kind == BENCH_TEXT)
                json_str(f, row->ex[i].text);
            else
                json_num(f, row->ex[i].value);
        }
        fprintf(f, ",\n     \"samples\": [");
        for (size_t i = 0; i < row->n; i++) {
            fprintf(f, "%s", i ? ", " : "");
            json_num(f, row->v[i]);
        }
        fprintf(f, "],\n     \"page_fault_samples\": [");
        for (size_t i = 0; i < row->n; i++) {
            fprintf(f, "%s", i ? ", " : "");
            json_num(f, row->f[i]);
        }
        fprintf(f, "],\n     \"rss_samples\": [");
        for (size_t i = 0; i < row->n; i++)
            fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)row->rss[i]);
        fprintf(f, "]}");
    }
    fprintf(f, "\n  ],\n  \"notes\": [");
    for (size_t i = 0; i < rep->n_notes; i++) {
        fprintf(f, "%s\n    ", i ? "," : "");
        json_str(f, rep->notes[i].text);
    }
    fprintf(f, "\n  ]\n}\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "lodestar-bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- plot ------------------------------------------------------------- */

static void gp_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if (*s == '_')
            fputs("\\\\", f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static int write_plot(const bench_report *rep, const char *path)
{
    char data_path[] = "/tmp/lodestar-bench-plot-XXXXXX";
    int fd = mkstemp(data_path);
    if (fd < 0) {
        fprintf(stderr, "lodestar-bench: mkstemp: %s\n", strerror(errno));
        return -1;
    }
    FILE *d = fdopen(fd, "w");
    if (!d) {
        close(fd);
        unlink(data_path);
        return -1;
    }
    int panels = 0;
    int first_block[MAX_TABLES], n_blocks[MAX_TABLES];
    int block = 0;
    for (int ti = 0; ti < rep->n_tables; ti++) {
        first_block[ti] = block;
        n_blocks[ti] = 0;
        for (size_t r = 0; r < rep->n_rows; r++) {
            const bench_row *row = rep->rows[r];
            if (row->table != ti || row->n == 0)
                continue;
            for (size_t i = 0; i < row->n; i++)
                fprintf(d, "%d %.9g\n", n_blocks[ti] + 1, row->v[i]);
            fprintf(d, "\n\n");
            n_blocks[ti]++;
            block++;
        }
        if (n_blocks[ti])
            panels++;
    }
    fclose(d);
    if (panels == 0) {
        unlink(data_path);
        fprintf(stderr, "lodestar-bench: nothing to plot\n");
        return 0;
    }
    FILE *g = popen("gnuplot", "w");
    if (!g) {
        unlink(data_path);
        fprintf(stderr, "lodestar-bench: cannot run gnuplot (install gnuplot-nox)\n");
        return -1;
    }
    int width = 1100;
    fprintf(g, "set terminal pngcairo size %d,%d font 'sans,9'\nset output ", width, 420 * panels);
    gp_str(g, path);
    fprintf(g,
            "\nset multiplot layout %d,1\nset style fill solid 0.3\nset grid ytics\n"
            "set key off\nset xtics rotate by -25\nset bmargin 6\n",
            panels);
    for (int ti = 0; ti < rep->n_tables; ti++) {
        if (!n_blocks[ti])
            continue;
        double lo = 0, hi = 0;
        bool any = false;
        char unit[24] = "";
        fprintf(g, "set xtics (");
        int k = 0;
        for (size_t r = 0; r < rep->n_rows; r++) {
            const bench_row *row = rep->rows[r];
            if (row->table != ti || row->n == 0)
                continue;
            fprintf(g, "%s", k ? ", " : "");
            gp_str(g, row->name);
            fprintf(g, " %d", k + 1);
            k++;
            snprintf(unit, sizeof unit, "%s", row->unit);
            for (size_t i = 0; i < row->n; i++) {
                if (!any || row->v[i] < lo)
                    lo = row->v[i];
                if (!any || row->v[i] > hi)
                    hi = row->v[i];
                any = true;
            }
        }
        fprintf(g, ")\nset title ");
        gp_str(g, rep->tables[ti].title);
        fprintf(g, "\nset ylabel ");
        gp_str(g, unit);
        if (lo > 0 && hi / lo > 30)
            fprintf(g, "\nset logscale y\n");
        else
            fprintf(g, "\nunset logscale y\n");
        fprintf(g, "set xrange [0.5:%d.5]\nplot for [i=%d:%d] ", n_blocks[ti], first_block[ti],
                first_block[ti] + n_blocks[ti] - 1);
        gp_str(g, data_path);
        fprintf(g, " index i using 1:2 with boxplot lc i+1, for [i=%d:%d] ", first_block[ti],
                first_block[ti] + n_blocks[ti] - 1);
        gp_str(g, data_path);
        fprintf(g, " index i using ($1+0.25):2 with points pt 7 ps 0.4 lc i+1\n");
    }
    fprintf(g, "unset multiplot\n");
    int rc = pclose(g);
    unlink(data_path);
    if (rc != 0) {
        fprintf(stderr, "lodestar-bench: gnuplot failed (status %d)\n", rc);
        return -1;
    }
    return 0;
}

int bench_report_write_json(const bench_report *rep)
{
    return rep->opts->json_path ? write_json(rep, rep->opts->json_path) : 0;
}

int bench_report_finish(bench_report *rep)
{
    printf("lodestar-bench %s%s\n", rep->opts->subcommand, rep->opts->dry ? " (dry run)" : "");
    printf("machine: %s\n", bench_machine_line());
    char load[64] = "";
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (!fgets(load, sizeof load, la))
            load[0] = '\0';
        fclose(la);
        load[strcspn(load, "\n")] = '\0';
        printf("load average at start of output: %s\n", load);
    }
    for (size_t i = 0; i < rep->n_params; i++)
        printf("%s: %s\n", rep->param_key[i], rep->param_val[i]);
    for (int t = 0; t < rep->n_tables; t++)
        print_table(rep, t);
    fflush(stdout);
    int rc = 0;
    if (rep->opts->json_path && write_json(rep, rep->opts->json_path) != 0)
        rc = -1;
    if (rep->opts->plot_path && write_plot(rep, rep->opts->plot_path) != 0)
        rc = -1;
    return rc;
}
