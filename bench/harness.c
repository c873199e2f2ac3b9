/* The harness: interleaved sampling, counters, tables, JSON and plots. */
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
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#ifndef BENCH_BUILDTYPE
#define BENCH_BUILDTYPE "unknown"
#endif

#define MAX_EXTRAS 32
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
    char text[320];
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

/* ---- clocks and counters ---------------------------------------------- */

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_minflt(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_minflt;
}

size_t bench_page_size(void)
{
    static size_t page;
    if (!page) {
        long p = sysconf(_SC_PAGESIZE);
        page = p > 0 ? (size_t)p : 4096;
    }
    return page;
}

uint64_t bench_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long total = 0, resident = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &total, &resident) != 2)
        resident = 0;
    fclose(f);
    return (uint64_t)resident * bench_page_size();
}

void bench_touch_pages(void *p, size_t n)
{
    volatile unsigned char *b = p;
    size_t page = bench_page_size();
    if (n == 0)
        return;
    for (size_t i = 0; i < n; i += page)
        b[i] = (unsigned char)i;
    b[n - 1] = 1;
}

int bench_parse_size(const char *s, size_t *out)
{
    /* The same rule as the lodestar program's sizes (cli_parse_size): digits, then
       optionally K, M, G or T (either case, powers of 1024), optionally followed by "iB". */
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K':
        shift = 10;
        break;
    case 'M':
        shift = 20;
        break;
    case 'G':
        shift = 30;
        break;
    case 'T':
        shift = 40;
        break;
    default:
        break;
    }
    if (shift) {
        end++;
        if (end[0] == 'i' && end[1] == 'B')
            end += 2;
    }
    if (*end != '\0' || v > (SIZE_MAX >> shift))
        return -1;
    *out = (size_t)v << shift;
    return 0;
}

const char *bench_fmt_bytes(double bytes, char *buf, size_t cap)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double v = bytes < 0 ? -bytes : bytes;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (bytes < 0)
        v = -v;
    if (u == 0)
        snprintf(buf, cap, "%.0f B", v);
    else if (v == (double)(long long)v)
        snprintf(buf, cap, "%.0f %s", v, units[u]);
    else
        snprintf(buf, cap, "%.*f %s", v < 10 ? 2 : (v < 100 ? 1 : 0), v, units[u]);
    return buf;
}

/* ---- machine ------------------------------------------------------------ */

static char cpu_model[128];
static char kernel[160];
static char host_facts[256]; /* hypervisor, THP mode, proactive reclaim: machine_facts() */
static char alloc_name[32];
static char alloc_version[64];

/* The bracketed word of a sysfs mode file ("always [madvise] never" -> "madvise"), or "-". */
static void sysfs_mode(const char *path, char *out, size_t n)
{
    snprintf(out, n, "-");
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char buf[256];
    if (fgets(buf, sizeof buf, f)) {
        char *a = strchr(buf, '['), *b = a ? strchr(a, ']') : NULL;
        if (a && b) {
            *b = '\0';
            snprintf(out, n, "%.*s", (int)(n - 1), a + 1);
        } else {
            buf[strcspn(buf, "\n")] = '\0';
            snprintf(out, n, "%.*s", (int)(n - 1), buf);
        }
    }
    fclose(f);
}

/* The machine facts a ratio depends on beyond the CPU: the hypervisor (CPUID leaf 0x40000000's
 * signature when /proc/cpuinfo has the hypervisor flag, as systemd-detect-virt --vm reads it;
 * Xen's /sys/hypervisor/type; the kernel log may name another, e.g. "PVM" under "bhyve"),
 * the THP mode (enabled/defrag), and proactive reclaim: DAMON contexts that are on with their
 * schemes' actions, and whether there is swap. One short string, same on every line. */
static void machine_facts(void)
{
    char virt[64] = "none";
    bool flag = false;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[4096];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "flags", 5) == 0) {
                flag = strstr(line, " hypervisor") != NULL;
                break;
            }
        fclose(f);
    }
    if (flag) {
        snprintf(virt, sizeof virt, "unnamed");
#if defined(__x86_64__) || defined(__i386__)
        unsigned a, b, c, d;
        __cpuid(0x40000000, a, b, c, d);
        char sig[13];
        memcpy(sig, &b, 4);
        memcpy(sig + 4, &c, 4);
        memcpy(sig + 8, &d, 4);
        sig[12] = '\0';
        static const char *const known[][2] = {{"KVMKVMKVM", "kvm"},
                                                 {"Microsoft Hv", "hyper-v"},
                                                 {"VMwareVMware", "vmware"},
                                                 {"XenVMMXenVMM", "xen"},
                                                 {"TCGTCGTCGTCG", "qemu-tcg"},
                                                 {"ACRNACRNACRN", "acrn"},
                                                 {"bhyve bhyve ", "bhyve"}};
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strncmp(sig, known[i][0], strlen(known[i][0])) == 0)
                snprintf(virt, sizeof virt, "%s", known[i][1]);
#endif
    }
    FILE *x = fopen("/sys/hypervisor/type", "r");
    if (x) {
        char t[32];
        if (fgets(t, sizeof t, x)) {
            t[strcspn(t, "\n")] = '\0';
            snprintf(virt, sizeof virt, "%s", t);
        }
        fclose(x);
    }
    char thp[24], defrag[24];
    sysfs_mode("/sys/kernel/mm/transparent_hugepage/enabled", thp, sizeof thp);
    sysfs_mode("/sys/kernel/mm/transparent_hugepage/defrag", defrag, sizeof defrag);
    char damon[96] = "off";
    size_t on = 0;
    for (int k = 0; k < 8; k++) {
        char path[128], st[16] = "";
        snprintf(path, sizeof path, "/sys/kernel/mm/damon/admin/kdamonds/%d/state", k);
        FILE *d = fopen(path, "r");
        if (!d)
            break;
        if (!fgets(st, sizeof st, d))
            st[0] = '\0';
        fclose(d);
        if (strncmp(st, "on", 2) != 0)
            continue;
        char act[32] = "";
        snprintf(path, sizeof path,
                 "/sys/kernel/mm/damon/admin/kdamonds/%d/contexts/0/schemes/0/action", k);
        if ((d = fopen(path, "r")) != NULL) {
            if (!fgets(act, sizeof act, d))
                act[0] = '\0';
            fclose(d);
            act[strcspn(act, "\n")] = '\0';
        }
        size_t len = on ? strlen(damon) : 0;
        snprintf(damon + len, sizeof damon - len, "%s%s", on ? "+" : "on: ",
                 act[0] ? act : "monitor only");
        on++;
    }
    long long swap_kb = -1;
    FILE *m = fopen("/proc/meminfo", "r");
    if (m) {
        char line[256];
        while (fgets(line, sizeof line, m))
            if (sscanf(line, "SwapTotal: %lld kB", &swap_kb) == 1)
                break;
        fclose(m);
    }
    char swap[32];
    if (swap_kb == 0)
        snprintf(swap, sizeof swap, "none");
    else if (swap_kb > 0)
        snprintf(swap, sizeof swap, "%lld MiB", swap_kb / 1024);
    else
        snprintf(swap, sizeof swap, "-");
    snprintf(host_facts, sizeof host_facts,
             "hypervisor %s | THP %s, defrag %s | DAMON %s, swap %s", virt, thp, defrag, damon,
             swap);
}

static void machine_probe(void)
{
    if (cpu_model[0])
        return;
    snprintf(cpu_model, sizeof cpu_model, "unknown cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c) {
                    c++;
                    while (*c == ' ')
                        c++;
                    c[strcspn(c, "\n")] = '\0';
                    snprintf(cpu_model, sizeof cpu_model, "%s", c);
                }
                break;
            }
        }
        fclose(f);
    }
    machine_facts();
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(kernel, sizeof kernel, "%s %s", u.sysname, u.release);
    else
        snprintf(kernel, sizeof kernel, "unknown");

    /* The allocator is the library that the process's malloc resolves to (LD_PRELOAD puts
       one ahead of glibc). Not "is it mapped": rent-return dlopen()s mimalloc and tcmalloc
       locally for their own rows, which leaves malloc as it was. */
    snprintf(alloc_name, sizeof alloc_name, "glibc");
    snprintf(alloc_version, sizeof alloc_version, "%s", gnu_get_libc_version());
    void *malloc_sym = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info where;
    if (malloc_sym && dladdr(malloc_sym, &where) && where.dli_fname) {
        static const char *const libs[] = {"jemalloc", "mimalloc", "tcmalloc"};
        for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
            if (strstr(where.dli_fname, libs[i]))
                snprintf(alloc_name, sizeof alloc_name, "%s", libs[i]);
    }
    if (strcmp(alloc_name, "jemalloc") == 0) {
        typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
        mallctl_fn mallctl = (mallctl_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "mallctl");
        const char *ver = NULL;
        size_t len = sizeof ver;
        if (mallctl && mallctl("version", (void *)&ver, &len, NULL, 0) == 0 && ver)
            snprintf(alloc_version, sizeof alloc_version, "%s", ver);
        else
            snprintf(alloc_version, sizeof alloc_version, "unknown");
    } else if (strcmp(alloc_name, "tcmalloc") == 0) {
        typedef const char *(*tc_version_fn)(int *, int *, const char **);
        tc_version_fn tc_version = (tc_version_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "tc_version");
        int major = 0, minor = 0;
        const char *patch = NULL, *s = tc_version ? tc_version(&major, &minor, &patch) : NULL;
        snprintf(alloc_version, sizeof alloc_version, "%s", s ? s : "unknown");
    } else if (strcmp(alloc_name, "mimalloc") == 0) {
        typedef int (*mi_version_fn)(void);
        mi_version_fn mi_version = (mi_version_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "mi_version");
        if (mi_version) {
            int v = mi_version();
            snprintf(alloc_version, sizeof alloc_version, "%d.%d.%d", v / 100, (v / 10) % 10,
                     v % 10);
        } else {
            snprintf(alloc_version, sizeof alloc_version, "unknown");
        }
    }
}

const char *bench_allocator_name(void)
{
    machine_probe();
    return alloc_name;
}

const char *bench_allocator_version(void)
{
    machine_probe();
    return alloc_version;
}

const char *bench_machine_line(void)
{
    static char line[1024];
    machine_probe();
    const char *mmap_threshold = getenv("MALLOC_MMAP_THRESHOLD_");
    char extra_env[96] = "";
    if (mmap_threshold)
        snprintf(extra_env, sizeof extra_env, " (MALLOC_MMAP_THRESHOLD_=%s)", mmap_threshold);
    snprintf(line, sizeof line, "%s, %ld cpus | %s | %s %s%s | lodestar %s (%s build) | %s",
             cpu_model, sysconf(_SC_NPROCESSORS_ONLN), kernel, alloc_name, alloc_version,
             extra_env, lds_version(), BENCH_BUILDTYPE, host_facts);
    return line;
}

int bench_iters(const bench_opts *o, int normal)
{
    if (o->iterations > 0)
        return o->iterations;
    return o->dry ? 2 : normal;
}

int bench_warmup(const bench_opts *o, int normal)
{
    if (o->warmup >= 0)
        return o->warmup;
    return o->dry ? 1 : normal;
}

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
    machine_probe();
    fprintf(f, "{\n  \"subcommand\": ");
    json_str(f, rep->opts->subcommand);
    fprintf(f, ",\n  \"lodestar_version\": ");
    json_str(f, lds_version());
    fprintf(f, ",\n  \"dry\": %s,\n  \"machine\": {\"cpu\": ", rep->opts->dry ? "true" : "false");
    json_str(f, cpu_model);
    fprintf(f, ", \"cpus\": %ld, \"kernel\": ", sysconf(_SC_NPROCESSORS_ONLN));
    json_str(f, kernel);
    fprintf(f, ", \"host\": ");
    json_str(f, host_facts);
    fprintf(f, ", \"page_size\": %zu, \"allocator\": ", bench_page_size());
    json_str(f, alloc_name);
    fprintf(f, ", \"allocator_version\": ");
    json_str(f, alloc_version);
    fprintf(f, ", \"libc\": ");
    json_str(f, gnu_get_libc_version());
    const char *thr = getenv("MALLOC_MMAP_THRESHOLD_");
    fprintf(f, ", \"malloc_mmap_threshold\": ");
    if (thr)
        json_str(f, thr);
    else
        fprintf(f, "null");
    fprintf(f, ", \"build\": ");
    json_str(f, BENCH_BUILDTYPE);
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

/* ---- the interleaved runner ------------------------------------------- */

int bench_interleave(bench_alt *alts, size_t n, int warmup, int iters)
{
    for (int round = 0; round < warmup + iters; round++) {
        for (size_t a = 0; a < n; a++) {
            bench_alt *alt = &alts[a];
            uint64_t ops = alt->ops ? alt->ops : 1;
            uint64_t own = 0;
            uint64_t f0 = bench_minflt();
            uint64_t t0 = bench_now_ns();
            int rc = alt->run(alt->ctx, ops, &own);
            uint64_t t1 = bench_now_ns();
            uint64_t f1 = bench_minflt();
            if (rc != 0)
                return -1;
            if (round < warmup)
                continue;
            double ns = (double)(own ? own : t1 - t0);
            double v = 0;
            switch (alt->scale) {
            case BENCH_NS_PER_OP:
                v = ns / (double)ops;
                break;
            case BENCH_US:
                v = ns / 1e3 / (double)ops;
                break;
            case BENCH_MS:
                v = ns / 1e6 / (double)ops;
                break;
            case BENCH_MOPS:
                v = ns > 0 ? (double)ops / ns * 1e3 : 0;
                break;
            }
            bench_row_sample(alt->row, v, (double)(f1 - f0) / (double)ops, bench_rss());
        }
    }
    return 0;
}

const char *bench_work_dir(const bench_opts *o)
{
    if (o->work_dir)
        return o->work_dir;
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}
