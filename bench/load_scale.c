/*
 * lodestar-bench load-scale: gigabyte loads against the read floor and numpy.load
 * (docs/adr/0029, 0030). For each size it writes a vectors-only index, the same with keys,
 * and a .npy of the same vectors; then times, interleaved, each alternative in a fresh
 * process (one load per process) and warm (repeated loads in one process, the first
 * dropped): bare read() into a pre-touched buffer (the floor), the pooled verified load
 * with 1..T readers and huge pages on/off, the mapped verified load, and numpy.load
 * (bench/compare/load_numpy.py). Each row: wall time, CPU time, page faults, peak RSS, and the
 * median as a ratio to the floor and to numpy.load. With --mode cold, a cold-cache table
 * too: before each sample the file's pages are dropped from the page cache with
 * posix_fadvise(POSIX_FADV_DONTNEED) (that file only, so other users of the machine keep
 * theirs).
 */
#include "bench.h"

#include "lodestar.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* loader/load_internal.h's hook (the bench links the parts statically): nonzero makes
 * the parallel readers pread each format 1.1 chunk in pieces of that many bytes, each
 * hashed at once. */
extern size_t lds__load_piece_override;

/* One measurement: what a child prints per load. */
typedef struct sample {
    double wall_ms, cpu_ms, faults, rss_mib, sys_ms;
} sample;

static double cpu_ms_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* The kernel's share of cpu_ms_now: with the fault count it tells a slow fault (this VM's
 * host repopulating memory its free page reporting took back) from more faults. */
static double sys_ms_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_stime.tv_sec * 1e3 + (double)ru.ru_stime.tv_usec / 1e3;
}

static double peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static int populate_child(const char *kind, const char *path);

/* ==== the child: one kind of load, `reps` times, one line each ============ */

/* kind: floor | pooled:T:huge[:pieces] | mapped. ":pieces": each format 1.1 chunk read
 * and hashed in 1 MiB pieces (the alternative ADR 0040 measured). */
static int child(const char *kind, const char *path, int reps)
{
    if (strncmp(kind, "populate:", 9) == 0)
        return populate_child(kind + 9, path);
    int threads = 1;
    char huge[8] = "on", how[8] = "";
    bool floor = strcmp(kind, "floor") == 0, mapped = strcmp(kind, "mapped") == 0;
    if (!floor && !mapped && sscanf(kind, "pooled:%d:%7[^:]:%7s", &threads, huge, how) < 2) {
        fprintf(stderr, "load-scale: unknown child kind %s\n", kind);
        return 2;
    }
    if (strcmp(how, "pieces") == 0)
        lds__load_piece_override = (size_t)1 << 20;
    unsigned char *buf = NULL;
    size_t size = 0;
    if (floor) {
        struct stat st;
        if (stat(path, &st) != 0)
            return 1;
        size = (size_t)st.st_size;
        buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED)
            return 1;
        memset(buf, 1, size); /* pre-touched: the floor pays no fault */
    }
    for (int r = 0; r < reps; r++) {
        double c0 = cpu_ms_now(), k0 = sys_ms_now();
        uint64_t f0 = bench_minflt(), t0 = bench_now_ns();
        if (floor) {
            int fd = open(path, O_RDONLY);
            size_t got = 0;
            while (fd >= 0 && got < size) {
                ssize_t n = read(fd, buf + got, size - got < (1u << 30) ? size - got : 1u << 30);
                if (n <= 0)
                    break;
                got += (size_t)n;
            }
            if (fd >= 0)
                close(fd);
            if (got != size)
                return 1;
        } else {
            lds_load_options o;
            lds_load_options_default(&o);
            o.use_mmap = mapped;
            o.read_threads = (uint32_t)threads;
            lds_index *idx = NULL;
            lds_error err;
            lds_error_init(&err);
            if (lds_load_path(path, &o, &idx, NULL, &err) != LDS_OK ||
                !lds_index_checksum_verified(idx)) {
                fprintf(stderr, "load-scale: %s: %s\n", path, err.message);
                return 1;
            }
            /* the mapped path verifies by reading every page; both are verified */
            lds_index_free(idx);
        }
        uint64_t t1 = bench_now_ns(), f1 = bench_minflt();
        printf("%.3f %.3f %" PRIu64 " %.1f %.3f\n", (double)(t1 - t0) / 1e6, cpu_ms_now() - c0,
               f1 - f0, peak_rss_mib(), sys_ms_now() - k0);
        fflush(stdout);
    }
    return 0;
}

/* ==== populate strategies (diagnostic, --mode populate) ===================== */

/* A 2 MiB-aligned anonymous buffer advised MADV_HUGEPAGE (as the pool maps one). */
static unsigned char *huge_buffer(size_t size, bool populate)
{
    size_t huge = (size_t)2 << 20;
    size_t len = size + huge;
    unsigned char *raw = mmap(NULL, len, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0), -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    unsigned char *p = (unsigned char *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
    /* With THP "madvise", MAP_POPULATE faults the mapping in before the advice exists:
     * 4 KiB pages (the strategy as an application can use it). */
    (void)madvise(p, size, MADV_HUGEPAGE);
    return p;
}

typedef struct pop_reader {
    int fd;
    unsigned char *dst;
    size_t from, to;
    bool prefault;
    pthread_t t;
    int failed;
} pop_reader;

static void *pop_main(void *arg)
{
    pop_reader *r = arg;
#ifdef MADV_POPULATE_WRITE
    if (r->prefault && r->to > r->from) {
        uintptr_t a = (uintptr_t)(r->dst + r->from) & ~(uintptr_t)4095;
        (void)madvise((void *)a, (size_t)((uintptr_t)(r->dst + r->to) - a), MADV_POPULATE_WRITE);
    }
#endif
    size_t at = r->from;
    while (at < r->to) {
        ssize_t n = pread(r->fd, r->dst + at, r->to - at, (off_t)at);
        if (n <= 0) {
            r->failed = 1;
            break;
        }
        at += (size_t)n;
    }
    return NULL;
}

/* kind: first-write:T | map-populate:T | prefault:T (MADV_POPULATE_WRITE per reader) */
static int populate_child(const char *kind, const char *path)
{
    char how[32];
    int threads = 1;
    if (sscanf(kind, "%31[^:]:%d", how, &threads) != 2 || threads < 1 || threads > 8)
        return 2;
    struct stat st;
    if (stat(path, &st) != 0)
        return 1;
    size_t size = (size_t)st.st_size;
    double c0 = cpu_ms_now(), k0 = sys_ms_now();
    uint64_t f0 = bench_minflt(), t0 = bench_now_ns();
    unsigned char *buf = huge_buffer(size, strcmp(how, "map-populate") == 0);
    int fd = open(path, O_RDONLY);
    if (buf == NULL || fd < 0)
        return 1;
    pop_reader r[8];
    size_t per = (size / (size_t)threads + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
    for (int k = 0; k < threads; k++) {
        size_t from = (size_t)k * per < size ? (size_t)k * per : size;
        size_t to = from + per < size ? from + per : size;
        r[k] = (pop_reader){
            .fd = fd, .dst = buf, .from = from, .to = to, .prefault = strcmp(how, "prefault") == 0};
        if (k > 0)
            pthread_create(&r[k].t, NULL, pop_main, &r[k]);
    }
    pop_main(&r[0]);
    for (int k = 1; k < threads; k++)
        pthread_join(r[k].t, NULL);
    close(fd);
    uint64_t t1 = bench_now_ns(), f1 = bench_minflt();
    for (int k = 0; k < threads; k++)
        if (r[k].failed)
            return 1;
    printf("%.3f %.3f %" PRIu64 " %.1f %.3f\n", (double)(t1 - t0) / 1e6, cpu_ms_now() - c0, f1 - f0,
           peak_rss_mib(), sys_ms_now() - k0);
    return 0;
}

/* ==== the parent ========================================================== */

typedef struct alt {
    char name[64];
    char kind[32];  /* the child's kind, or "numpy" */
    char huge[4];   /* LDS_POOL_HUGE_PAGES in the child */
    int file;       /* 0: vectors only, 1: with keys, 2: the .npy */
    bench_row *row; /* fresh, warm or cold */
    sample s[64];
    size_t n;
} alt;

/* Runs one child and collects `reps` lines; 0 on success. */
static int run_child(const bench_opts *o, const alt *a, const char *path, int reps, sample *out)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    char rs[16];
    snprintf(rs, sizeof rs, "%d", reps);
    char mode[48];
    snprintf(mode, sizeof mode, "child:%s", a->kind);
    const char *script = getenv("LDS_BENCH_NUMPY_SCRIPT");
    if (script == NULL)
        script = "bench/compare/load_numpy.py";
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setenv(LDS_POOL_HUGE_PAGES_ENV, a->huge, 1);
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        if (strcmp(a->kind, "numpy") == 0) {
            /* argv[0] is the full path: given a bare "python3", CPython looks it up on PATH to
             * find its prefix, and under a pyenv python3 first on PATH (as when adr-check runs
             * under it) took pyenv's library, which has no numpy. */
            execl("/usr/bin/python3", "/usr/bin/python3", script, path, rs, (char *)NULL);
        } else {
            const char *argv[] = {"lodestar-bench", "load-scale", "--mode", mode, "--loads", rs,
                                  "--index",        path,         NULL};
            execv("/proc/self/exe", (char *const *)(uintptr_t)argv);
        }
        _exit(127);
    }
    (void)o;
    close(fds[1]);
    FILE *f = fdopen(fds[0], "r");
    int got = 0;
    while (f != NULL && got < reps &&
           fscanf(f, "%lf %lf %lf %lf %lf", &out[got].wall_ms, &out[got].cpu_ms, &out[got].faults,
                  &out[got].rss_mib, &out[got].sys_ms) == 5)
        got++;
    if (f != NULL)
        fclose(f);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got != reps) {
        fprintf(stderr, "load-scale: %s on %s failed (status %d, %d of %d lines)\n", a->name, path,
                status, got, reps);
        return -1;
    }
    return 0;
}

static void drop_cached(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

/* The .npy of an index's vectors: format 1.0, '<f4', C order. */
static int write_npy(const char *path, const char *index)
{
    lds_load_options o;
    lds_load_options_default(&o);
    o.use_mmap = true;
    o.verify_checksum = false;
    lds_index *idx = NULL;
    if (lds_load_path(index, &o, &idx, NULL, NULL) != LDS_OK)
        return -1;
    uint64_t rows = lds_index_rows(idx);
    uint32_t dim = lds_index_dim(idx);
    char hdr[128];
    int n = snprintf(hdr, sizeof hdr,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (%" PRIu64 ", %u), }", rows,
                     dim);
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    int rc = f ? 0 : -1;
    if (f) {
        unsigned short hl = (unsigned short)(n + pad + 1);
        fwrite("\x93NUMPY\x01\x00", 1, 8, f);
        fputc(hl & 0xFF, f);
        fputc(hl >> 8, f);
        fwrite(hdr, 1, (size_t)n, f);
        for (size_t i = 0; i < pad; i++)
            fputc(' ', f);
        fputc('\n', f);
        for (uint64_t r = 0; r < rows && rc == 0; r++)
            if (fwrite(lds_index_row(idx, r), sizeof(float), dim, f) != dim)
                rc = -1;
        if (fclose(f) != 0)
            rc = -1;
    }
    lds_index_free(idx);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(const alt *a, size_t field)
{
    double v[64];
    for (size_t i = 0; i < a->n; i++)
        v[i] = ((const double *)&a->s[i])[field];
    qsort(v, a->n, sizeof v[0], cmp_double);
    return a->n == 0 ? 0 : a->n % 2 ? v[a->n / 2] : (v[a->n / 2 - 1] + v[a->n / 2]) / 2;
}

static bool file_ok(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && st.st_size > 0;
}

static bool numpy_available(void)
{
    const char *script = getenv("LDS_BENCH_NUMPY_SCRIPT");
    if (script == NULL)
        script = "bench/compare/load_numpy.py";
    return access(script, R_OK) == 0 &&
           system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

/* One table: the alternatives, `rounds` interleaved rounds, `reps` loads per process
 * (warm: the first dropped), cold: the file dropped from the page cache before each. */
static int measure(const bench_opts *o, bench_report *rep, alt *alts, size_t n, char paths[3][512],
                   int rounds, int reps, bool cold)
{
    for (int r = 0; r < rounds; r++) {
        /* The order rotates each round: which row runs right after another's exit (and
         * draws the memory it freed, or memory the host took back meanwhile) changes. */
        for (size_t ii = 0; ii < n; ii++) {
            size_t i = (ii + (size_t)r) % n;
            sample s[16];
            const char *path = paths[alts[i].file];
            if (cold)
                drop_cached(path);
            if (run_child(o, &alts[i], path, reps, s) != 0)
                return -1;
            for (int k = reps > 1 ? 1 : 0; k < reps && alts[i].n < 64; k++)
                alts[i].s[alts[i].n++] = s[k];
        }
    }
    double floor = 0, numpy = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(alts[i].kind, "floor") == 0 && alts[i].file == 0)
            floor = median_of(&alts[i], 0);
        if (strcmp(alts[i].kind, "numpy") == 0)
            numpy = median_of(&alts[i], 0);
    }
    for (size_t i = 0; i < n; i++) {
        alt *a = &alts[i];
        a->row = bench_row_new(rep, a->name, "ms");
        for (size_t k = 0; k < a->n; k++)
            bench_row_sample(a->row, a->s[k].wall_ms, a->s[k].faults,
                             (uint64_t)(a->s[k].rss_mib * 1048576.0));
        double wall = median_of(a, 0);
        bench_row_set(a->row, "cost", "cpu ms", BENCH_NUM, median_of(a, 1));
        bench_row_set(a->row, "cost", "kernel ms", BENCH_NUM, median_of(a, 4));
        bench_row_set(a->row, "cost", "peak rss MiB", BENCH_NUM, median_of(a, 3));
        if (floor > 0)
            bench_row_set(a->row, "ratio", "vs floor", BENCH_RATIO, wall / floor);
        if (numpy > 0)
            bench_row_set(a->row, "ratio", "vs numpy", BENCH_RATIO, wall / numpy);
    }
    return 0;
}

/* The alternatives of one table; `fresh` adds the huge-pages-off rows (a warm reload
 * rents warm memory either way). Returns the count. */
static size_t alternatives(alt *alts, int max_threads, bool numpy, bool fresh, bool cold)
{
    size_t n = 0;
#define ADD(NAME, KIND, HUGE, FILE)                                                                \
    do {                                                                                           \
        memset(&alts[n], 0, sizeof alts[n]);                                                       \
        snprintf(alts[n].name, sizeof alts[n].name, "%s", NAME);                                   \
        snprintf(alts[n].kind, sizeof alts[n].kind, "%s", KIND);                                   \
        snprintf(alts[n].huge, sizeof alts[n].huge, "%s", HUGE);                                   \
        alts[n].file = FILE;                                                                       \
        n++;                                                                                       \
    } while (0)
    ADD(cold ? "floor: read() (cat)" : "floor: read() into touched buffer", "floor", "on", 0);
    char name[64], kind[32];
    for (int t = 1; t <= max_threads; t++) {
        snprintf(name, sizeof name, "pooled verified, %d reader%s", t, t == 1 ? "" : "s");
        snprintf(kind, sizeof kind, "pooled:%d:on", t);
        ADD(name, kind, "on", 0);
        if (!fresh && !cold && t == max_threads && t > 1) {
            /* ADR 0040: chunks hashed in 1 MiB pieces as read, interleaved with the default */
            snprintf(name, sizeof name, "pooled verified, %d readers, 1 MiB pieces", t);
            snprintf(kind, sizeof kind, "pooled:%d:on:pieces", t);
            ADD(name, kind, "on", 0);
        }
        if (fresh && !cold && (t == 1 || t == max_threads)) {
            snprintf(name, sizeof name, "pooled verified, %d reader%s, 4 KiB pages", t,
                     t == 1 ? "" : "s");
            snprintf(kind, sizeof kind, "pooled:%d:off", t);
            ADD(name, kind, "off", 0);
        }
    }
    ADD("pooled verified, automatic", "pooled:0:on", "on", 0);
    if (!cold) {
        ADD("pooled verified, automatic, keys", "pooled:0:on", "on", 1);
        ADD("mapped verified", "mapped", "on", 0);
    }
    if (numpy)
        ADD("numpy.load (same vectors)", "numpy", "on", 2);
#undef ADD
    return n;
}

int bench_load_scale(const bench_opts *o)
{
    if (o->mode != NULL && strncmp(o->mode, "child:", 6) == 0)
        return child(o->mode + 6, o->index_path, o->loads > 0 ? o->loads : 1);
    static const size_t default_sizes[] = {(size_t)256 << 20, (size_t)1 << 30};
    size_t sizes[BENCH_MAX_SIZES];
    size_t n_sizes = 0;
    if (o->dry) { /* tiny whatever --size says: the suite's dry runs stay quick */
        sizes[n_sizes++] = (size_t)4 << 20;
    } else if (o->n_sizes > 0) {
        memcpy(sizes, o->sizes, o->n_sizes * sizeof sizes[0]);
        n_sizes = o->n_sizes;
    } else {
        memcpy(sizes, default_sizes, sizeof default_sizes);
        n_sizes = 2;
        if (o->full)
            sizes[n_sizes++] = (size_t)4 << 30;
    }
    uint32_t dim = o->dim ? o->dim : 128;
    const char *dir = o->work_dir ? o->work_dir : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int max_threads = o->threads > 0 ? o->threads : ncpu > 1 ? (int)ncpu : 2;
    if (max_threads > 8)
        max_threads = 8;
    int rounds = bench_iters(o, 5);
    bool cold = o->mode != NULL && strcmp(o->mode, "cold") == 0;
    bool populate_only = o->mode != NULL && strcmp(o->mode, "populate") == 0;
    bool numpy = numpy_available();
    bench_report *rep = bench_report_new(o);
    if (!rep)
        return 1;
    char load[96];
    double l1 = 0, l5 = 0, l15 = 0;
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf %lf %lf", &l1, &l5, &l15) != 3)
            l1 = l5 = l15 = 0;
        fclose(la);
    }
    snprintf(load, sizeof load, "%.2f %.2f %.2f (at the start)", l1, l5, l15);
    bench_param(rep, "load average", load);
    char thp[64] = "unknown";
    FILE *tf = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (tf) {
        if (fgets(thp, sizeof thp, tf) != NULL)
            thp[strcspn(thp, "\n")] = '\0';
        fclose(tf);
    }
    bench_param(rep, "transparent huge pages", thp);
    int rc = 0;
    for (size_t si = 0; si < n_sizes && rc == 0; si++) {
        uint64_t rows = sizes[si] / ((size_t)dim * sizeof(float));
        if (rows == 0)
            rows = 1;
        char paths[3][512];
        snprintf(paths[0], sizeof paths[0], "%s/lds-scale-%" PRIu64 "x%u.ldsi", dir, rows, dim);
        snprintf(paths[2], sizeof paths[2], "%s/lds-scale-%" PRIu64 "x%u.npy", dir, rows, dim);
        if (!file_ok(paths[0]) && bench_write_index(paths[0], rows, dim, false) != 0)
            rc = 1;
        /* with keys: the reference index of that shape (refindex.c), reused when present */
        if (rc == 0 && bench_reference_index(dir, rows, dim, false, paths[1], sizeof paths[1]) != 0)
            rc = 1;
        if (rc == 0 && numpy && !file_ok(paths[2]) && write_npy(paths[2], paths[0]) != 0)
            rc = 1;
        if (rc != 0) {
            fprintf(stderr, "load-scale: cannot write the indexes in %s\n", dir);
            break;
        }
        char title[200], buf[32];
        alt alts[24];
        size_t n = alternatives(alts, max_threads, numpy, true, false);
        snprintf(title, sizeof title,
                 "%s payload (%" PRIu64 " x %u f32): one load per fresh process, %d rounds",
                 bench_fmt_bytes((double)sizes[si], buf, sizeof buf), rows, dim, rounds);
        if (!populate_only) {
            bench_table(rep, title, true);
            rc = measure(o, rep, alts, n, paths, rounds, 1, false);
        }
        if (rc == 0 && !populate_only) {
            n = alternatives(alts, max_threads, numpy, false, false);
            snprintf(title, sizeof title,
                     "%s payload: warm, %d loads per process (the first dropped), %d processes",
                     bench_fmt_bytes((double)sizes[si], buf, sizeof buf), o->dry ? 2 : 4,
                     o->dry ? 1 : 2);
            bench_table(rep, title, true);
            rc = measure(o, rep, alts, n, paths, o->dry ? 1 : 2, o->dry ? 2 : 4, false);
        }
        if (rc == 0 && o->mode != NULL && strcmp(o->mode, "populate") == 0) {
            n = 0;
            static const char *const hows[] = {"first-write", "map-populate", "prefault"};
            static const char *const labels[] = {"fault on first write (pread into it)",
                                                 "MAP_POPULATE, then pread",
                                                 "MADV_POPULATE_WRITE per reader, then pread"};
            for (int h = 0; h < 3; h++)
                for (int t = 1; t <= max_threads; t++) {
                    memset(&alts[n], 0, sizeof alts[n]);
                    snprintf(alts[n].name, sizeof alts[n].name, "%s, %d reader%s", labels[h], t,
                             t == 1 ? "" : "s");
                    snprintf(alts[n].kind, sizeof alts[n].kind, "populate:%s:%d", hows[h], t);
                    snprintf(alts[n].huge, sizeof alts[n].huge, "on");
                    n++;
                }
            snprintf(title, sizeof title,
                     "%s file: populate strategies of a fresh 2 MiB-aligned MADV_HUGEPAGE "
                     "buffer read by 1..T threads (fresh process each), %d rounds",
                     bench_fmt_bytes((double)sizes[si], buf, sizeof buf), rounds);
            bench_table(rep, title, true);
            rc = measure(o, rep, alts, n, paths, rounds, 1, false);
        }
        if (rc == 0 && cold) {
            n = alternatives(alts, max_threads, numpy, true, true);
            snprintf(title, sizeof title,
                     "%s payload: cold page cache (the file's pages dropped with "
                     "posix_fadvise DONTNEED before each process), %d rounds",
                     bench_fmt_bytes((double)sizes[si], buf, sizeof buf), rounds);
            bench_table(rep, title, true);
            rc = measure(o, rep, alts, n, paths, rounds, 1, true);
        }
    }
    if (!numpy)
        bench_note(rep, "numpy.load rows skipped: /usr/bin/python3 with numpy, or "
                        "bench/compare/load_numpy.py (run from the repository's top), not found");
    int frc = bench_report_finish(rep);
    bench_report_free(rep);
    return rc != 0 ? 1 : frc;
}
