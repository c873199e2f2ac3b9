/* The harness: the interleaved runner, clocks, counters and the machine line. The rows they
 * fill and the tables, JSON and plots made of them are in report.c. */
#include "bench.h"

#include "lodestar.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

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

uint64_t bench_file_resident(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return UINT64_MAX;
    struct stat st;
    uint64_t cold = UINT64_MAX;
    int fr = fstat(fd, &st); /* st is set only on success */
    if (fr != 0 || st.st_size <= 0) {
        close(fd);
        return fr == 0 && st.st_size == 0 ? 0 : UINT64_MAX;
    }
    size_t n = (size_t)st.st_size, page = bench_page_size(), pages = (n + page - 1) / page;
    void *m = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
    unsigned char *vec = malloc(pages);
    if (m != MAP_FAILED && vec != NULL && mincore(m, n, vec) == 0) {
        cold = 0;
        static unsigned char buf[1u << 20];
        for (size_t i = 0; i < pages;) {
            if (vec[i] & 1) {
                i++;
                continue;
            }
            size_t j = i;
            while (j < pages && !(vec[j] & 1) && (j - i) * page < sizeof buf)
                j++;
            size_t off = i * page, len = (j - i) * page;
            if (off + len > n)
                len = n - off;
            if (pread(fd, buf, len, (off_t)off) < 0)
                break;
            cold += len;
            i = j;
        }
    }
    if (m != MAP_FAILED)
        munmap(m, n);
    free(vec);
    close(fd);
    return cold;
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

const char *bench_host_facts(void)
{
    machine_probe();
    return host_facts;
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

/* ---- the plain-allocation baseline ------------------------------------ */

static void release_free(void *p)
{
    free(p);
}

static int read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        size_t want = n - got > LDS_DEFAULT_CHUNK_BYTES ? LDS_DEFAULT_CHUNK_BYTES : n - got;
        ssize_t r = read(fd, (unsigned char *)buf + got, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

lds_status bench_load_malloc(const char *path, lds_index **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return LDS_E_IO;
    unsigned char head[LDS_HEADER_SIZE];
    lds_header h;
    lds_status st = LDS_E_IO;
    void *payload = NULL;
    if (read_full(fd, head, sizeof head) != 0)
        goto done;
    if ((st = lds_header_decode(head, sizeof head, &h, NULL)) != LDS_OK)
        goto done;
    st = LDS_E_NOMEM;
    if (!(payload = malloc(h.payload_length ? h.payload_length : 1)))
        goto done;
    st = LDS_E_IO;
    if (read_full(fd, payload, h.payload_length) != 0)
        goto done;
    lds_parse_options po;
    lds_parse_options_default(&po);
    po.release = release_free;
    po.release_ctx = payload;
    po.header = &h; /* format 1.1: the chunk table */
    if ((st = lds_index_from_payload(payload, h.payload_length, &po, out, NULL)) == LDS_OK)
        payload = NULL; /* the index owns it now */
done:
    free(payload);
    close(fd);
    return st;
}
