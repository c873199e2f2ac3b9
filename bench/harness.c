/* The harness: the interleaved runner, clocks, counters and the machine line. The rows they
 * fill and the tables, JSON and plots made of them are in report.c. */
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

#ifndef BENCH_BUILDTYPE
#define BENCH_BUILDTYPE "unknown"
#endif

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
static char alloc_name[32];
static char alloc_version[64];

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

const char *bench_cpu_model(void)
{
    machine_probe();
    return cpu_model;
}

const char *bench_kernel(void)
{
    machine_probe();
    return kernel;
}

const char *bench_build_type(void)
{
    return BENCH_BUILDTYPE;
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
    snprintf(line, sizeof line, "%s, %ld cpus | %s | %s %s%s | lodestar %s (%s build)", cpu_model,
             sysconf(_SC_NPROCESSORS_ONLN), kernel, alloc_name, alloc_version, extra_env,
             lds_version(), BENCH_BUILDTYPE);
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
