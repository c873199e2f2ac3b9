/*
 * pool-cost (a diagnostic): what does renting cost against allocating the same
 * payload, priced on the operation a user pays for?
 *
 * The default tables price the whole operation (seed 000's lesson): each op
 * acquires a buffer of the logical length, fills exactly that length with a
 * deterministic pattern, hands a view of exactly that length to a consumer that
 * reads every byte into a checksum, and ends the lease. The checksums of each
 * batch are checked against the pattern's, so no strategy wins by doing less.
 * Strategies: allocate (malloc, uninitialized, then free), rent, rent + clear
 * on return, and owner (the lease is handed to the consumer, which returns it:
 * the C analogue of IMemoryOwner). Consumers: the same thread (a call), or a
 * consumer thread reached over a queue, where the lease ends only when that
 * consumer is done (for owner, the consumer ends it itself, so the producer
 * goes on to the next op at once, up to 4 ops in flight). Columns: bytes
 * allocated per op, counted (the allocate strategy's malloc calls, the pool's
 * misses times the class capacity: the bytes each asks of an allocator or of
 * the kernel), the first op after an empty pool or heap, faults, RSS and time.
 *
 * --acquire prints the earlier tables instead, which price acquisition only:
 * the stack (small sizes only), malloc (never calloc: the read path does not
 * zero, so the rival is not charged a memset), rent, rent with clear-on-return,
 * and mmap per call, every strategy touching each page of its buffer the same
 * way, as the read path would. Three separate column groups, never inferred from
 * each other: allocation (bytes requested, capacity), residency (bytes kept
 * after the free or return, RSS) and time (with page faults beside it).
 *
 * Both end with the rounding waste of the pool's size classes.
 */
#include "bench.h"

#include "lodestar.h"
#include "observe.h"

#include <dlfcn.h>

#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STACK_MAX ((size_t)65536)
#define PC_MAX_SAMPLES 256

/* The "(huge pages)" strategies run from LDS_POOL_HUGE_MIN up: a pool with huge_pages on,
 * and a mapping per call aligned and advised the way that pool does it (docs/adr/0009). */
enum strategy {
    S_STACK,
    S_MALLOC,
    S_RENT,
    S_RENT_HUGE,
    S_RENT_CLEAR,
    S_MMAP,
    S_MMAP_HUGE,
    S_COUNT
};

static const char *const strategy_names[S_COUNT] = {"stack",
                                                    "malloc",
                                                    "rent",
                                                    "rent (huge pages)",
                                                    "rent + clear on return",
                                                    "mmap per call",
                                                    "mmap per call (huge pages)"};

typedef struct pc_ctx {
    enum strategy s;
    size_t size;
    bool full_touch;
    lds_pool *pool;
    size_t capacity; /* observed at the last op */
    /* Where each sample's time went, one entry per call of run() (warm-up rounds first):
     * process CPU time (ns, all threads, user + kernel), involuntary context switches (the
     * scheduler took the CPU away: time off the CPU) and ops. Wall time far above CPU time is time spent waiting for
     * a CPU, which no fault count shows. */
    size_t n_acct;
    double cpu_ns[PC_MAX_SAMPLES], invol[PC_MAX_SAMPLES];
    uint64_t acct_ops[PC_MAX_SAMPLES];
} pc_ctx;

#define HUGE_PAGE ((size_t)2 << 20)

/* A mapping of `bytes` (a page multiple) starting on a 2 MiB boundary, advised
 * MADV_HUGEPAGE: over-map by 2 MiB less a page, unmap the slack on both sides. */
static void *map_huge(size_t bytes)
{
    size_t slack = HUGE_PAGE - bench_page_size();
    char *raw =
        mmap(NULL, bytes + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *base = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    size_t head = (size_t)(base - raw);
    if (head)
        munmap(raw, head);
    if (slack - head)
        munmap(base + bytes, slack - head);
    madvise(base, bytes, MADV_HUGEPAGE);
    return base;
}

static void touch(const pc_ctx *c, void *p)
{
    if (c->full_touch)
        memset(p, 0x5A, c->size);
    else
        bench_touch_pages(p, c->size);
    bench_escape(p);
}

static void stack_op(const pc_ctx *c)
{
    unsigned char buf[STACK_MAX];
    touch(c, buf);
}

typedef struct pc_clock {
    double cpu_ns, invol;
} pc_clock;

static pc_clock pc_clock_now(void)
{
    pc_clock k = {0, 0};
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0)
        k.cpu_ns = (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        k.invol = (double)ru.ru_nivcsw;
    return k;
}

static int run_ops(pc_ctx *c, uint64_t ops);

static int run(void *p, uint64_t ops, uint64_t *elapsed)
{
    pc_ctx *c = p;
    (void)elapsed;
    pc_clock k0 = pc_clock_now();
    int rc = run_ops(c, ops);
    pc_clock k1 = pc_clock_now();
    if (c->n_acct < PC_MAX_SAMPLES) {
        c->cpu_ns[c->n_acct] = k1.cpu_ns - k0.cpu_ns;
        c->invol[c->n_acct] = k1.invol - k0.invol;
        c->acct_ops[c->n_acct] = ops;
        c->n_acct++;
    }
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median over the measured samples (warm-up ones skipped) of v[i] / ops[i] / div. */
static double pc_median_per_op(const pc_ctx *c, const double *v, size_t skip, double div)
{
    double t[PC_MAX_SAMPLES];
    size_t m = 0;
    for (size_t i = skip; i < c->n_acct; i++)
        t[m++] = v[i] / (double)c->acct_ops[i] / div;
    if (m == 0)
        return 0;
    qsort(t, m, sizeof t[0], cmp_double);
    return m % 2 ? t[m / 2] : (t[m / 2 - 1] + t[m / 2]) / 2;
}

/* The "where the time went" columns of a row: median CPU time per op (same unit as the
 * time), the share of the wall time spent off the CPU (waiting to run: the machine's other
 * work) and involuntary context switches per op. A slow median with 0 faults reads here as
 * CPU time (the touch itself, syscalls, or a hypervisor's stall, which the guest counts as
 * its own CPU time) or time off the CPU (another process ran). */
static void pc_where(bench_row *row, const pc_ctx *c, size_t skip, bench_scale scale)
{
    double div = scale == BENCH_MS ? 1e6 : scale == BENCH_US ? 1e3 : 1;
    double off[PC_MAX_SAMPLES];
    size_t m = 0;
    for (size_t i = skip; i < c->n_acct && i - skip < bench_row_count(row); i++) {
        double wall = bench_row_at(row, i - skip) * div * (double)c->acct_ops[i];
        double o = wall > 0 ? 100.0 * (wall - c->cpu_ns[i]) / wall : 0;
        off[m++] = o < 0 ? 0 : o;
    }
    qsort(off, m, sizeof off[0], cmp_double);
    double off_med = m == 0 ? 0 : m % 2 ? off[m / 2] : (off[m / 2 - 1] + off[m / 2]) / 2;
    bench_row_set(row, "where the time went", "cpu", BENCH_NUM,
                  pc_median_per_op(c, c->cpu_ns, skip, div));
    bench_row_set(row, "where the time went", "off_cpu_pct", BENCH_PCT, off_med);
    bench_row_set(row, "where the time went", "preempted_per_op", BENCH_NUM,
                  pc_median_per_op(c, c->invol, skip, 1));
}

static int run_ops(pc_ctx *c, uint64_t ops)
{
    size_t page = bench_page_size();
    for (uint64_t i = 0; i < ops; i++) {
        switch (c->s) {
        case S_STACK:
            stack_op(c);
            c->capacity = c->size;
            break;
        case S_MALLOC: {
            void *b = malloc(c->size);
            if (!b)
                return -1;
            touch(c, b);
            c->capacity = malloc_usable_size(b);
            free(b);
            break;
        }
        case S_RENT:
        case S_RENT_HUGE:
        case S_RENT_CLEAR: {
            lds_lease l;
            if (lds_pool_rent(c->pool, c->size, &l) != LDS_OK) {
                fprintf(stderr, "pool-cost: rent of %zu bytes failed\n", c->size);
                return -1;
            }
            touch(c, l.ptr);
            c->capacity = l.capacity;
            if (lds_pool_return(c->pool, &l, c->s == S_RENT_CLEAR ? LDS_RETURN_CLEAR : 0) !=
                LDS_OK) {
                fprintf(stderr, "pool-cost: return refused\n");
                return -1;
            }
            break;
        }
        case S_MMAP: {
            void *b =
                mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (b == MAP_FAILED)
                return -1;
            touch(c, b);
            c->capacity = (c->size + page - 1) / page * page;
            munmap(b, c->size);
            break;
        }
        case S_MMAP_HUGE: {
            size_t bytes = (c->size + page - 1) / page * page;
            void *b = map_huge(bytes);
            if (!b)
                return -1;
            touch(c, b);
            c->capacity = bytes;
            munmap(b, bytes);
            break;
        }
        case S_COUNT:
            return -1;
        }
    }
    return 0;
}

static uint64_t ops_for(const bench_opts *o, size_t size)
{
    if (o->dry)
        return size <= STACK_MAX ? 20 : 1;
    if (size <= STACK_MAX)
        return 2000;
    if (size <= ((size_t)1 << 20))
        return 200;
    if (size <= ((size_t)32 << 20))
        return 4;
    return 1;
}

static int iters_for(const bench_opts *o, size_t size)
{
    if (size >= ((size_t)512 << 20))
        return bench_iters(o, 5);
    if (size >= ((size_t)64 << 20))
        return bench_iters(o, 9);
    return bench_iters(o, 15);
}

/* Bytes the allocator keeps free in its arenas after a free (glibc only). */
static double allocator_free_bytes(void)
{
    if (strcmp(bench_allocator_name(), "glibc") != 0)
        return -1;
    struct mallinfo2 mi = mallinfo2();
    return (double)mi.fordblks;
}

static void waste_table(bench_report *rep, const size_t *sizes, size_t n)
{
    bench_table(rep, "rounding waste of the size classes (capacity handed out for a request)",
                false);
    static const size_t notable[] = {64,       100,       1000,     4097,
                                     65537,    1000000,   1048577,  20589008,
                                     33554433, 100000000, 1u << 30, (1u << 30) + 1};
    size_t all[BENCH_MAX_SIZES + 16];
    size_t m = 0;
    for (size_t i = 0; i < sizeof notable / sizeof notable[0]; i++)
        all[m++] = notable[i];
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t j = 0; j < m; j++)
            dup = dup || all[j] == sizes[i];
        if (!dup)
            all[m++] = sizes[i];
    }
    for (size_t i = 1; i < m; i++)
        for (size_t j = i; j > 0 && all[j - 1] > all[j]; j--) {
            size_t t = all[j];
            all[j] = all[j - 1];
            all[j - 1] = t;
        }
    for (size_t i = 0; i < m; i++) {
        char name[48];
        snprintf(name, sizeof name, "%zu", all[i]);
        bench_row *row = bench_row_new(rep, name, "");
        size_t cap = lds_pool_class_capacity(all[i]);
        size_t pow2 = 1;
        while (pow2 < all[i])
            pow2 <<= 1;
        bench_row_set(row, "pool", "capacity", BENCH_COUNT, (double)cap);
        bench_row_set(row, "pool", "waste", BENCH_BYTES, (double)(cap - all[i]));
        bench_row_set(row, "pool", "waste_pct", BENCH_PCT,
                      100.0 * (double)(cap - all[i]) / (double)all[i]);
        bench_row_set(row, "power of two (as .NET ArrayPool)", "pow2_capacity", BENCH_COUNT,
                      (double)pow2);
        bench_row_set(row, "power of two (as .NET ArrayPool)", "pow2_waste_pct", BENCH_PCT,
                      100.0 * (double)(pow2 - all[i]) / (double)all[i]);
    }
    /* The worst case sits just above a class boundary: scan every boundary + 1. */
    double worst = 0;
    size_t worst_at = 0;
    for (size_t b = 64; b <= ((size_t)1 << 30); b = lds_pool_class_capacity(b + 1)) {
        size_t req = b + 1, cap = lds_pool_class_capacity(req);
        double w = 100.0 * (double)(cap - req) / (double)req;
        if (w > worst) {
            worst = w;
            worst_at = req;
        }
    }
    bench_note(rep,
               "worst rounding over every class boundary from 64 B to 1 GiB: %.2f%% (at a "
               "request of %zu bytes); power-of-two rounding reaches ~100%%",
               worst, worst_at);
    bench_note(rep,
               "20,589,008 bytes: the pool gives %zu (%.2f%% waste); power-of-two rounding "
               "(.NET ArrayPool) gives 33,554,432 (%.2f%%)",
               lds_pool_class_capacity(20589008),
               100.0 * (double)(lds_pool_class_capacity(20589008) - 20589008) / 20589008.0,
               100.0 * (33554432.0 - 20589008.0) / 20589008.0);
    bench_note(rep, "a mapped lease only makes touched pages resident, so above the mmap "
                    "threshold rounding costs address space, not memory");
}

static int acquire_cost(const bench_opts *o)
{
    static const size_t defaults[] = {64, 1024, 4096, 65536, 1 << 20, 20589008, 128u << 20};
    static const size_t full[] = {64,       256,       1024,       4096,     16384,
                                  65536,    262144,    1u << 20,   4u << 20, 16u << 20,
                                  20589008, 64u << 20, 256u << 20, 1u << 30};
    static const size_t dry[] = {64, 4096, 1u << 20};
    const size_t *sizes = defaults;
    size_t n = sizeof defaults / sizeof defaults[0];
    if (o->full) {
        sizes = full;
        n = sizeof full / sizeof full[0];
    }
    if (o->dry) {
        sizes = dry;
        n = sizeof dry / sizeof dry[0];
    }
    if (o->n_sizes) {
        sizes = o->sizes;
        n = o->n_sizes;
    }
    bool full_touch = o->touch && strcmp(o->touch, "full") == 0;

    bench_report *rep = bench_report_new(o);
    lds_pool *pool = NULL, *hpool = NULL;
    lds_pool_options ho;
    lds_pool_options_default(&ho);
    ho.huge_pages = LDS_POOL_HUGE_PAGES_ON;
    if (!rep || lds_pool_create(NULL, &pool) != LDS_OK || lds_pool_create(&ho, &hpool) != LDS_OK) {
        lds_pool_free(pool);
        bench_report_free(rep);
        return -1;
    }
    bench_param(rep, "pool",
                "private pool, default options; rent (huge pages): another with huge_pages on");
    bench_param(rep, "touch",
                full_touch ? "every byte written (memset), as a read() filling the buffer"
                           : "one byte written per page (and the last byte), the same for every "
                             "strategy");
    bench_param(rep, "residency",
                "retained = bytes the strategy keeps after free/return (pool: bytes_retained; "
                "malloc: glibc mallinfo2 fordblks, '-' for other allocators); RSS = process "
                "resident bytes after the sample");
    bench_param(rep, "where the time went",
                "cpu = process CPU time per op (same unit as the time), off cpu = share of the "
                "wall time not on a CPU (another process ran), preempted = involuntary context "
                "switches per op; medians over the rounds. A slow row with 0 faults and cpu near "
                "its time did the work itself: on a shadow-paging hypervisor (PVM) that includes "
                "faults the guest never sees (docs/adr/0044)");

    int rc = 0;
    for (size_t si = 0; si < n && rc == 0; si++) {
        size_t size = sizes[si];
        char title[128], size_s[32];
        bench_fmt_bytes((double)size, size_s, sizeof size_s);
        snprintf(title, sizeof title, "%s (%zu bytes)", size_s, size);
        bench_table(rep, title, true);
        /* Start each size from an empty pool, so that "retained" is this size's alone. */
        lds_pool_trim(pool, LDS_POOL_TRIM_ALL, NULL);
        lds_pool_trim(hpool, LDS_POOL_TRIM_ALL, NULL);
        if (strcmp(bench_allocator_name(), "glibc") == 0)
            malloc_trim(0);
        pc_ctx ctx[S_COUNT];
        bench_alt alts[S_COUNT];
        size_t k = 0;
        for (int s = 0; s < S_COUNT; s++) {
            if (s == S_STACK && size > STACK_MAX)
                continue;
            if ((s == S_RENT_HUGE || s == S_MMAP_HUGE) && size < LDS_POOL_HUGE_MIN)
                continue;
            ctx[k] =
                (pc_ctx){.s = (enum strategy)s,
                         .size = size,
                         .full_touch = full_touch,
                         .pool = s == S_RENT_HUGE ? hpool : pool};
            bench_scale scale = size >= ((size_t)32 << 20)   ? BENCH_MS
                                : size >= ((size_t)64 << 10) ? BENCH_US
                                                             : BENCH_NS_PER_OP;
            const char *unit = scale == BENCH_MS ? "ms/op" : scale == BENCH_US ? "us/op" : "ns/op";
            alts[k] = (bench_alt){.name = strategy_names[s],
                                  .scale = scale,
                                  .unit = unit,
                                  .run = run,
                                  .ctx = &ctx[k],
                                  .ops = ops_for(o, size),
                                  .row = bench_row_new(rep, strategy_names[s], unit)};
            k++;
        }
        int warm = bench_warmup(o, 2);
        rc = bench_interleave(alts, k, warm, iters_for(o, size));
        if (rc != 0)
            break;
        lds_pool_stats st, hst;
        lds_pool_stats_init(&st);
        lds_pool_get_stats(pool, &st);
        lds_pool_stats_init(&hst);
        lds_pool_get_stats(hpool, &hst);
        double malloc_free = allocator_free_bytes();
        size_t best = 0;
        for (size_t i = 0; i < k; i++) {
            bench_row *row = alts[i].row;
            bench_row_set(row, "allocation", "requested", BENCH_BYTES, (double)size);
            bench_row_set(row, "allocation", "capacity", BENCH_BYTES, (double)ctx[i].capacity);
            double retained = -1;
            if (ctx[i].s == S_RENT || ctx[i].s == S_RENT_CLEAR)
                retained = (double)st.bytes_retained;
            else if (ctx[i].s == S_RENT_HUGE)
                retained = (double)hst.bytes_retained;
            else if (ctx[i].s == S_MALLOC)
                retained = malloc_free;
            else
                retained = 0;
            bench_row_set(row, "residency", "retained", BENCH_BYTES, retained);
            bench_row_set(row, "residency", "rss", BENCH_BYTES, (double)bench_row_rss_max(row));
            pc_where(row, &ctx[i], (size_t)warm, alts[i].scale);
            if (bench_row_median(row) < bench_row_median(alts[best].row))
                best = i;
        }
        double rent = 0, mal = 0, stack = 0;
        for (size_t i = 0; i < k; i++) {
            if (ctx[i].s == S_RENT)
                rent = bench_row_median(alts[i].row);
            if (ctx[i].s == S_MALLOC)
                mal = bench_row_median(alts[i].row);
            if (ctx[i].s == S_STACK)
                stack = bench_row_median(alts[i].row);
        }
        bench_note(rep, "fastest: %s", strategy_names[ctx[best].s]);
        if (mal < rent)
            bench_note(rep,
                       "plain malloc wins at this size: %.3g vs %.3g %s for rent (rent is "
                       "%.2fx slower)",
                       mal, rent, alts[0].unit, rent / mal);
        else
            bench_note(rep, "rent wins over malloc at this size: %.2fx faster", mal / rent);
        if (stack > 0 && stack < rent)
            bench_note(rep,
                       "the stack wins too (%.3g %s, %.2fx faster than rent) when the buffer "
                       "does not outlive the call",
                       stack, alts[0].unit, rent / stack);
        bench_note(rep,
                   "pool after: %llu bytes retained, %llu mapped, %llu drops (retention cap "
                   "%zu MiB)",
                   (unsigned long long)st.bytes_retained, (unsigned long long)st.bytes_mapped,
                   (unsigned long long)st.drops, LDS_POOL_DEFAULT_MAX_RETAINED_BYTES >> 20);
        for (size_t i = 0; i < k; i++) {
            enum strategy base = ctx[i].s == S_RENT_HUGE   ? S_RENT
                                 : ctx[i].s == S_MMAP_HUGE ? S_MMAP
                                                           : S_COUNT;
            for (size_t j = 0; base != S_COUNT && j < k; j++) {
                if (ctx[j].s != base)
                    continue;
                double hm = bench_row_median(alts[i].row), bm = bench_row_median(alts[j].row);
                double hx = 0, bx = 0;
                for (size_t r = 0; r < bench_row_count(alts[i].row); r++)
                    hx = bench_row_at(alts[i].row, r) > hx ? bench_row_at(alts[i].row, r) : hx;
                for (size_t r = 0; r < bench_row_count(alts[j].row); r++)
                    bx = bench_row_at(alts[j].row, r) > bx ? bench_row_at(alts[j].row, r) : bx;
                bench_note(rep,
                           "%s vs 4 KiB pages: median %.2fx, worst %.2fx (4 KiB / huge; above 1 "
                           "the huge pages win), faults %.0f vs %.0f per op",
                           strategy_names[ctx[i].s], hm > 0 ? bm / hm : 0, hx > 0 ? bx / hx : 0,
                           bench_row_faults(alts[i].row), bench_row_faults(alts[j].row));
            }
        }
    }
    if (rc == 0)
        waste_table(rep, sizes, n);
    if (rc == 0)
        rc = bench_report_finish(rep);
    lds_pool_free(pool);
    lds_pool_free(hpool);
    bench_report_free(rep);
    return rc;
}

/* ==== --retouch: a retained buffer touched again after an interval ==== */

/* What a retained buffer (a pool's, or malloc's top of heap) costs to touch again after the
 * program did something else for a while: 1 s asleep, or 1 s mapping, touching and unmapping
 * 128 MiB elsewhere (as "mmap per call" does, and as any allocation-heavy neighbour does).
 * Timed, and faults and CPU counted, around the touch alone: the wait is outside the window.
 * On a shadow-paging hypervisor (PVM) the churn makes the hypervisor drop its shadow entries
 * for the idle buffer, and the touch refaults them in the hypervisor: CPU time, no fault the
 * guest counts (docs/adr/0044). */
#define RT_WAIT_NS 1000000000ull
#define RT_CHURN_BYTES ((size_t)128 << 20)

typedef struct rt_ctx {
    bool huge, churn;
    size_t bytes;
    char *buf;
    size_t n;
    double cpu_ns[PC_MAX_SAMPLES], faults[PC_MAX_SAMPLES];
} rt_ctx;

static int rt_wait(const rt_ctx *c)
{
    uint64_t t0 = bench_now_ns();
    if (!c->churn) {
        struct timespec ts = {(time_t)(RT_WAIT_NS / 1000000000ull),
                              (long)(RT_WAIT_NS % 1000000000ull)};
        nanosleep(&ts, NULL);
        return 0;
    }
    while (bench_now_ns() - t0 < RT_WAIT_NS) {
        char *q = mmap(NULL, RT_CHURN_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (q == MAP_FAILED)
            return -1;
        bench_touch_pages(q, RT_CHURN_BYTES);
        munmap(q, RT_CHURN_BYTES);
    }
    return 0;
}

static int rt_run(void *p, uint64_t ops, uint64_t *own)
{
    rt_ctx *c = p;
    for (uint64_t i = 0; i < ops; i++) {
        if (rt_wait(c) != 0)
            return -1;
        pc_clock k0 = pc_clock_now();
        uint64_t f0 = bench_minflt(), t0 = bench_now_ns();
        bench_touch_pages(c->buf, c->bytes);
        bench_escape(c->buf);
        uint64_t t1 = bench_now_ns(), f1 = bench_minflt();
        pc_clock k1 = pc_clock_now();
        *own += t1 - t0;
        if (c->n < PC_MAX_SAMPLES) {
            c->cpu_ns[c->n] = k1.cpu_ns - k0.cpu_ns;
            c->faults[c->n] = (double)(f1 - f0);
            c->n++;
        }
    }
    return 0;
}

static double rt_median(const double *v, size_t from, size_t to)
{
    double t[PC_MAX_SAMPLES];
    size_t m = 0;
    for (size_t i = from; i < to; i++)
        t[m++] = v[i];
    if (m == 0)
        return 0;
    qsort(t, m, sizeof t[0], cmp_double);
    return m % 2 ? t[m / 2] : (t[m / 2 - 1] + t[m / 2]) / 2;
}

static int retouch_cost(const bench_opts *o)
{
    size_t size = o->n_sizes ? o->sizes[0] : 20589008;
    size_t page = bench_page_size();
    size_t bytes = (size + page - 1) / page * page;
    bench_report *rep = bench_report_new(o);
    if (!rep)
        return -1;
    char title[160], size_s[32];
    bench_fmt_bytes((double)size, size_s, sizeof size_s);
    snprintf(title, sizeof title, "re-touch a retained %s buffer (one byte a page) after 1 s", size_s);
    bench_table(rep, title, true);
    bench_param(rep, "retouch",
                "the buffer is mapped and touched once, then each op waits 1 s (asleep, or "
                "mapping, touching and unmapping 128 MiB elsewhere in a loop) and touches it "
                "again; time, CPU and faults are of the touch alone");
    static const char *const names[4] = {
        "after 1 s asleep, 4 KiB pages", "after 1 s of churn elsewhere, 4 KiB pages",
        "after 1 s asleep, huge pages", "after 1 s of churn elsewhere, huge pages"};
    rt_ctx ctx[4];
    bench_alt alts[4];
    int rc = 0;
    for (int i = 0; i < 4; i++) {
        ctx[i] = (rt_ctx){.huge = i >= 2, .churn = i % 2 == 1, .bytes = bytes};
        if (ctx[i].huge) {
            ctx[i].buf = map_huge(bytes);
        } else {
            void *b = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                           0);
            ctx[i].buf = b == MAP_FAILED ? NULL : b;
#ifdef MADV_NOHUGEPAGE
            if (ctx[i].buf)
                madvise(ctx[i].buf, bytes, MADV_NOHUGEPAGE);
#endif
        }
        if (!ctx[i].buf)
            rc = -1;
        else
            bench_touch_pages(ctx[i].buf, bytes);
        alts[i] = (bench_alt){.name = names[i],
                              .scale = BENCH_MS,
                              .unit = "ms/op",
                              .run = rt_run,
                              .ctx = &ctx[i],
                              .ops = 1,
                              .row = bench_row_new(rep, names[i], "ms/op")};
    }
    int warm = bench_warmup(o, 1);
    if (rc == 0)
        rc = bench_interleave(alts, 4, warm, bench_iters(o, 5));
    for (int i = 0; rc == 0 && i < 4; i++) {
        size_t from = (size_t)warm < ctx[i].n ? (size_t)warm : ctx[i].n;
        bench_row_set(alts[i].row, "the touch alone", "cpu_ms", BENCH_NUM,
                      rt_median(ctx[i].cpu_ns, from, ctx[i].n) / 1e6);
        bench_row_set(alts[i].row, "the touch alone", "faults_counted", BENCH_NUM,
                      rt_median(ctx[i].faults, from, ctx[i].n));
        bench_row_set(alts[i].row, "the touch alone", "us_per_page", BENCH_NUM,
                      bench_row_median(alts[i].row) * 1e3 / (double)(bytes / page));
    }
    if (rc == 0) {
        bench_note(rep, "time = wall time of the touch alone; cpu = process CPU time of it; a "
                        "churned row far above its asleep row with 0 faults counted and cpu near "
                        "its time is work the guest kernel never saw: a hypervisor refaulting "
                        "its own page tables (docs/adr/0044)");
        rc = bench_report_finish(rep);
    }
    for (int i = 0; i < 4; i++)
        if (ctx[i].buf)
            munmap(ctx[i].buf, bytes);
    bench_report_free(rep);
    return rc;
}

/* ==== the whole operation: fill, consume every byte, checksum, end the lease ==== */

enum wstrategy { W_ALLOC, W_RENT, W_RENT_CLEAR, W_OWNER, W_COUNT };
enum wconsumer { C_SYNC, C_THREAD, C_YIELD, C_COUNT };

static const char *const wstrategy_names[W_COUNT] = {"allocate (malloc, uninitialized)", "rent",
                                                     "rent + clear on return",
                                                     "owner (consumer returns)"};
static const char *const wconsumer_names[C_COUNT] = {"same thread", "consumer thread",
                                                     "same thread, yields per chunk"};
/* The names --strategy and --consumer take (main.c checks them against these). */
static const char *const wstrategy_keys[W_COUNT] = {"allocate", "rent", "rent-clear", "owner"};
static const char *const wconsumer_keys[C_COUNT] = {"same", "thread", "yield"};

/* The yielding consumer reads its view in chunks of this many bytes (a multiple of 8),
 * calling sched_yield() before each, as a consumer awaiting each chunk gives way. */
#define YIELD_CHUNK ((size_t)64 << 10)

#define QUEUE_DEPTH 4

/* An owning handle: the lease and the pool it goes back to. Whoever holds it ends it. */
typedef struct owner {
    lds_pool *pool;
    lds_lease lease;
    unsigned flags;
} owner;

typedef struct work {
    const unsigned char *view; /* exactly `len` bytes */
    size_t len;
    bool owned; /* the consumer returns `own` when done */
    owner own;
} work;

/* The consumer thread and its queue (one per consumer-thread row). */
typedef struct consumer {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    work q[QUEUE_DEPTH];
    uint64_t submitted, completed; /* under lock */
    uint64_t sum;                  /* checksums of completed ops, under lock */
    uint64_t return_failures;
    bool stop;
} consumer;

typedef struct wctx {
    enum wstrategy s;
    enum wconsumer cm;
    size_t size;
    uint64_t seed;
    uint64_t expect; /* the checksum of one op's view */
    lds_pool *pool;
    consumer *cons;
    uint64_t sum;          /* same-thread checksums of the current batch */
    uint64_t bytes_malloc; /* bytes the allocate strategy asked of malloc */
    uint64_t mallocs;
    uint64_t obs_bytes;  /* observed: bytes asked of malloc & co. + anonymous mmap bytes */
    uint64_t obs_allocs; /* observed: allocation calls + anonymous mmaps */
    bool bad;            /* a checksum or a return failed */
} wctx;

/* The interposer's reader, or NULL when liblds-bench-observe.so is not loaded. */
static lds_bench_observed_fn observed_fn(void)
{
    static lds_bench_observed_fn fn;
    static bool looked;
    if (!looked) {
        void *sym = dlsym(RTLD_DEFAULT, "lds_bench_observed");
        memcpy(&fn, &sym, sizeof fn);
        looked = true;
    }
    return fn;
}

#define PATTERN_STEP 0x9E3779B97F4A7C15ull

static void fill(unsigned char *p, size_t n, uint64_t seed)
{
    size_t words = n / 8;
    uint64_t *w = (uint64_t *)(void *)p;
    for (size_t j = 0; j < words; j++)
        w[j] = seed + (uint64_t)j * PATTERN_STEP;
    for (size_t j = words * 8; j < n; j++)
        p[j] = (unsigned char)(seed + j);
}

/* Reads every byte of the view. */
static uint64_t checksum(const unsigned char *p, size_t n)
{
    size_t words = n / 8;
    const uint64_t *w = (const uint64_t *)(const void *)p;
    uint64_t s = 0, x = 0;
    for (size_t j = 0; j < words; j++) {
        s += w[j];
        x ^= w[j];
    }
    for (size_t j = words * 8; j < n; j++)
        s += (uint64_t)p[j] << (8 * (j & 7));
    return s ^ ((x << 17) | (x >> 47));
}

/* checksum()'s value, read in YIELD_CHUNK pieces with a sched_yield() before each. */
static uint64_t checksum_yielding(const unsigned char *p, size_t n)
{
    size_t words = n / 8;
    const uint64_t *w = (const uint64_t *)(const void *)p;
    uint64_t s = 0, x = 0;
    for (size_t at = 0; at < words || at == 0; at += YIELD_CHUNK / 8) {
        sched_yield();
        size_t end = words - at < YIELD_CHUNK / 8 ? words : at + YIELD_CHUNK / 8;
        for (size_t j = at; j < end; j++) {
            s += w[j];
            x ^= w[j];
        }
        if (words == 0)
            break;
    }
    for (size_t j = words * 8; j < n; j++)
        s += (uint64_t)p[j] << (8 * (j & 7));
    return s ^ ((x << 17) | (x >> 47));
}

static uint64_t consume(enum wconsumer cm, const unsigned char *p, size_t n)
{
    return cm == C_YIELD ? checksum_yielding(p, n) : checksum(p, n);
}

static void *consumer_main(void *arg)
{
    consumer *c = arg;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->stop && c->completed == c->submitted)
            pthread_cond_wait(&c->cond, &c->lock);
        if (c->completed == c->submitted && c->stop)
            break;
        work w = c->q[c->completed % QUEUE_DEPTH];
        pthread_mutex_unlock(&c->lock);
        uint64_t h = checksum(w.view, w.len);
        bool failed = w.owned && lds_pool_return(w.own.pool, &w.own.lease, w.own.flags) != LDS_OK;
        pthread_mutex_lock(&c->lock);
        c->sum += h;
        c->return_failures += failed;
        c->completed++;
        pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* Queues one op; waits while the queue is full. */
static void consumer_submit(consumer *c, const work *w)
{
    pthread_mutex_lock(&c->lock);
    while (c->submitted - c->completed == QUEUE_DEPTH)
        pthread_cond_wait(&c->cond, &c->lock);
    c->q[c->submitted % QUEUE_DEPTH] = *w;
    c->submitted++;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

/* Waits until every queued op is done. */
static void consumer_drain(consumer *c)
{
    pthread_mutex_lock(&c->lock);
    while (c->completed != c->submitted)
        pthread_cond_wait(&c->cond, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

static int consumer_start(consumer *c)
{
    memset(c, 0, sizeof *c);
    if (pthread_mutex_init(&c->lock, NULL) != 0)
        return -1;
    if (pthread_cond_init(&c->cond, NULL) != 0) {
        pthread_mutex_destroy(&c->lock);
        return -1;
    }
    if (pthread_create(&c->thread, NULL, consumer_main, c) != 0) {
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->lock);
        return -1;
    }
    return 0;
}

static void consumer_stop(consumer *c)
{
    pthread_mutex_lock(&c->lock);
    c->stop = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
}

/* The same-thread consumer of an owning handle: reads the view, then ends the lease. */
static uint64_t consume_owned(enum wconsumer cm, owner *own, size_t len, bool *failed)
{
    uint64_t h = consume(cm, own->lease.ptr, len);
    *failed = lds_pool_return(own->pool, &own->lease, own->flags) != LDS_OK;
    return h;
}

/* One op's view and who ends it; the lease ends in `finish` unless the consumer owns it. */
static int whole_op(wctx *c)
{
    unsigned char *p = NULL;
    owner own = {c->pool, {0}, c->s == W_RENT_CLEAR ? LDS_RETURN_CLEAR : 0};
    if (c->s == W_ALLOC) {
        p = malloc(c->size);
        if (!p)
            return -1;
        c->bytes_malloc += c->size;
        c->mallocs++;
    } else {
        if (lds_pool_rent(c->pool, c->size, &own.lease) != LDS_OK) {
            fprintf(stderr, "pool-cost: rent of %zu bytes failed\n", c->size);
            return -1;
        }
        p = own.lease.ptr;
    }
    fill(p, c->size, c->seed);
    if (c->cm != C_THREAD) {
        bool failed = false;
        if (c->s == W_OWNER)
            c->sum += consume_owned(c->cm, &own, c->size, &failed);
        else
            c->sum += consume(c->cm, p, c->size);
        c->bad |= failed;
    } else {
        work w = {p, c->size, c->s == W_OWNER, own};
        consumer_submit(c->cons, &w);
        if (c->s != W_OWNER)
            consumer_drain(c->cons); /* the lease ends only when the consumer is done */
    }
    if (c->s == W_ALLOC)
        free(p);
    else if (c->s != W_OWNER && lds_pool_return(c->pool, &own.lease, own.flags) != LDS_OK)
        c->bad = true;
    return 0;
}

static int whole_run(void *p, uint64_t ops, uint64_t *elapsed)
{
    wctx *c = p;
    (void)elapsed;
    c->sum = 0;
    uint64_t before = 0;
    if (c->cm == C_THREAD) {
        pthread_mutex_lock(&c->cons->lock);
        before = c->cons->sum;
        pthread_mutex_unlock(&c->cons->lock);
    }
    lds_bench_observed_fn obs = observed_fn();
    uint64_t o0[LDS_OBS_COUNT] = {0}, o1[LDS_OBS_COUNT] = {0};
    if (obs)
        obs(o0);
    for (uint64_t i = 0; i < ops; i++)
        if (whole_op(c) != 0)
            return -1;
    uint64_t got = c->sum;
    if (c->cm == C_THREAD)
        consumer_drain(c->cons);
    /* Between the two reads only this row runs: other rows' consumer threads are idle. */
    if (obs) {
        obs(o1);
        c->obs_bytes += o1[LDS_OBS_ALLOC_BYTES] - o0[LDS_OBS_ALLOC_BYTES] + o1[LDS_OBS_MMAP_BYTES] -
                        o0[LDS_OBS_MMAP_BYTES];
        c->obs_allocs +=
            o1[LDS_OBS_ALLOCS] - o0[LDS_OBS_ALLOCS] + o1[LDS_OBS_MMAPS] - o0[LDS_OBS_MMAPS];
    }
    if (c->cm == C_THREAD) {
        pthread_mutex_lock(&c->cons->lock);
        got = c->cons->sum - before;
        c->bad |= c->cons->return_failures != 0;
        pthread_mutex_unlock(&c->cons->lock);
    }
    if (got != c->expect * ops || c->bad) {
        fprintf(stderr, "pool-cost: %s, %s at %zu bytes: %s\n", wstrategy_names[c->s],
                wconsumer_names[c->cm], c->size,
                c->bad ? "a return was refused" : "the batch's checksum is wrong");
        return -1;
    }
    return 0;
}

static uint64_t whole_ops_for(const bench_opts *o, size_t size)
{
    if (o->dry)
        return size <= STACK_MAX ? 20 : 1;
    if (size <= 4096)
        return 1000;
    if (size <= STACK_MAX)
        return 200;
    if (size <= ((size_t)1 << 20))
        return 20;
    if (size <= ((size_t)32 << 20))
        return 2;
    return 1;
}

static uint64_t pool_allocations(lds_pool *pool)
{
    lds_pool_stats st;
    lds_pool_stats_init(&st);
    lds_pool_get_stats(pool, &st);
    return st.misses_cold + st.misses_exhausted + st.misses_oversize;
}

static uint64_t pool_retained(lds_pool *pool)
{
    lds_pool_stats st;
    lds_pool_stats_init(&st);
    lds_pool_get_stats(pool, &st);
    return st.bytes_retained;
}

#define WALT (W_COUNT * C_COUNT)

bool bench_pool_cost_key(bool consumer, const char *v)
{
    const char *const *keys = consumer ? wconsumer_keys : wstrategy_keys;
    int n = consumer ? C_COUNT : W_COUNT;
    for (int i = 0; i < n; i++)
        if (strcmp(v, keys[i]) == 0)
            return true;
    return false;
}

/* The cases (strategy x consumer) that --strategy and --consumer leave in, in order. */
static int selected_cases(const bench_opts *o, int idx[WALT])
{
    int k = 0;
    for (int i = 0; i < WALT; i++) {
        if (o->strategy && strcmp(o->strategy, wstrategy_keys[i / C_COUNT]) != 0)
            continue;
        if (o->consumer && strcmp(o->consumer, wconsumer_keys[i % C_COUNT]) != 0)
            continue;
        idx[k++] = i;
    }
    return k;
}

/* Observed and counted bytes per op beside each other: agree when they differ by at most
 * 1% of the larger or 1 byte per op. */
static void set_alloc_columns(bench_row *row, double counted, double observed)
{
    bench_row_set(row, "allocated per op", "bytes_allocated_per_op", BENCH_NUM, counted);
    if (observed < 0) {
        bench_row_text(row, "allocated per op", "observed_bytes_per_op", "-");
        return;
    }
    bench_row_set(row, "allocated per op", "observed_bytes_per_op", BENCH_NUM, observed);
    double d = observed - counted, big = observed > counted ? observed : counted;
    char flag[64];
    if (d <= 0.01 * big + 1 && -d <= 0.01 * big + 1)
        snprintf(flag, sizeof flag, "agree");
    else
        snprintf(flag, sizeof flag, "DIFFER %+.0f B/op", d);
    bench_row_text(row, "allocated per op", "observed_vs_counted", flag);
}

static void set_residency_columns(bench_row *row, double pool, double allocator, double rss)
{
    bench_row_set(row, "residency", "pool_retained", BENCH_BYTES, pool);
    bench_row_set(row, "residency", "allocator_kept", BENCH_BYTES, allocator);
    bench_row_set(row, "residency", "rss", BENCH_BYTES, rss);
}

/* Free bytes glibc's malloc keeps in its arenas (mallinfo2 fordblks, which includes the top
 * chunk that keepcost reports); -1 under another allocator. */
static double allocator_kept(void)
{
    return allocator_free_bytes();
}

#define CHILD_ENV         "LDS_POOL_COST_CHILD_OUT"
#define OBSERVE_TRIED_ENV "LDS_POOL_COST_OBSERVE_TRIED"
#define OBSERVE_LIB       "liblds-bench-observe.so"

/* Sets LD_PRELOAD to the interposer beside this program (in this process's environment, for
 * an exec to follow). False where it cannot apply: a sanitizer build, another preloaded
 * library (an allocator the interposer would bypass), or no library beside the program. */
static bool preload_observer(void)
{
#ifdef BENCH_SANITIZED
    return false;
#else
    const char *pre = getenv("LD_PRELOAD");
    if (pre && *pre)
        return strstr(pre, OBSERVE_LIB) != NULL;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - sizeof OBSERVE_LIB - 1);
    if (n <= 0)
        return false;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return false;
    strcpy(slash + 1, OBSERVE_LIB);
    if (access(exe, R_OK) != 0)
        return false;
    return setenv("LD_PRELOAD", exe, 1) == 0;
#endif
}

/* --processes N: each case (strategy x consumer x size) runs as its own process through the
 * single-case mode, N times, the cases alternating; each child writes its process averages to
 * a file named by CHILD_ENV. The parent's rows hold one sample per process, so their median,
 * min and max are the median and range of the process averages (seed 000's table). */
static int whole_cost_processes(const bench_opts *o, const size_t *sizes, size_t n)
{
    int idx[WALT];
    int k = selected_cases(o, idx);
    bench_report *rep = bench_report_new(o);
    if (!rep || n > BENCH_MAX_SIZES)
        return -1;
    static bench_row *rows[BENCH_MAX_SIZES][WALT];
    /* means over the processes: counted, observed, pool retained, allocator kept, RSS */
    static double sums[BENCH_MAX_SIZES][WALT][5];
    static int seen_obs[BENCH_MAX_SIZES][WALT];
    memset(sums, 0, sizeof sums);
    memset(seen_obs, 0, sizeof seen_obs);
    bool observing = preload_observer();
    char procs[96];
    snprintf(procs, sizeof procs, "each case its own process, %d per case, one sample each",
             o->processes);
    bench_param(rep, "processes", procs);
    bench_param(rep, "columns",
                "time: median and range of the process averages; allocated per op and "
                "residency: the mean over the processes");
    bench_param(rep, "observed",
                observing ? "liblds-bench-observe.so preloaded in each child: malloc & co. "
                            "bytes asked + anonymous mmap bytes, whole process"
                          : "not available (sanitizer build, another LD_PRELOAD, or the library "
                            "is missing)");
    for (size_t si = 0; si < n; si++) {
        char title[200], size_s[32];
        bench_fmt_bytes((double)sizes[si], size_s, sizeof size_s);
        snprintf(title, sizeof title,
                 "%s (%zu bytes): fill, consume every byte, checksum, end; median and range "
                 "of %d process averages",
                 size_s, sizes[si], o->processes);
        bench_table(rep, title, true);
        bench_scale scale = sizes[si] >= ((size_t)32 << 20)   ? BENCH_MS
                            : sizes[si] >= ((size_t)64 << 10) ? BENCH_US
                                                              : BENCH_NS_PER_OP;
        const char *unit = scale == BENCH_MS ? "ms/op" : scale == BENCH_US ? "us/op" : "ns/op";
        for (int j = 0; j < k; j++) {
            char name[96];
            snprintf(name, sizeof name, "%s, %s", wstrategy_names[idx[j] / C_COUNT],
                     wconsumer_names[idx[j] % C_COUNT]);
            rows[si][idx[j]] = bench_row_new(rep, name, unit);
        }
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/lodestar-pool-cost-%ld.tsv", bench_work_dir(o), (long)getpid());
    /* the same arguments less --processes, --json, --plot, --size, --strategy, --consumer,
     * plus one case's --strategy, --consumer and --size */
    char **args = calloc((size_t)o->argc + 8, sizeof *args);
    int rc = args ? 0 : -1;
    int base = 0;
    for (int i = 0; rc == 0 && i < o->argc; i++) {
        const char *a = o->argv[i];
        if (i > 0 && (strcmp(a, "--processes") == 0 || strcmp(a, "--json") == 0 ||
                      strcmp(a, "--plot") == 0 || strcmp(a, "--size") == 0 ||
                      strcmp(a, "--strategy") == 0 || strcmp(a, "--consumer") == 0)) {
            i++;
            continue;
        }
        args[base++] = o->argv[i];
    }
    for (int p = 0; rc == 0 && p < o->processes; p++) {
        for (size_t si = 0; rc == 0 && si < n; si++) {
            for (int j = 0; rc == 0 && j < k; j++) {
                char size_arg[32];
                snprintf(size_arg, sizeof size_arg, "%zu", sizes[si]);
                int a = base;
                args[a++] = "--strategy";
                args[a++] = (char *)wstrategy_keys[idx[j] / C_COUNT];
                args[a++] = "--consumer";
                args[a++] = (char *)wconsumer_keys[idx[j] % C_COUNT];
                args[a++] = "--size";
                args[a++] = size_arg;
                args[a] = NULL;
                fflush(stdout);
                pid_t pid = fork();
                if (pid < 0) {
                    rc = -1;
                    break;
                }
                if (pid == 0) {
                    setenv(CHILD_ENV, path, 1);
                    execv("/proc/self/exe", args);
                    _exit(127);
                }
                int status = 0;
                if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
                    WEXITSTATUS(status) != 0) {
                    fprintf(stderr, "pool-cost: process %d of %d (%s, %s, %zu bytes) failed\n",
                            p + 1, o->processes, args[base + 1], args[base + 3], sizes[si]);
                    rc = -1;
                    break;
                }
                FILE *f = fopen(path, "r");
                if (!f) {
                    rc = -1;
                    break;
                }
                size_t size;
                int alt;
                double avg, faults, v[5];
                while (fscanf(f, "%zu\t%d\t%lg\t%lg\t%lg\t%lg\t%lg\t%lg\t%lg\n", &size, &alt, &avg,
                              &faults, &v[0], &v[1], &v[2], &v[3], &v[4]) == 9) {
                    if (size != sizes[si] || alt != idx[j])
                        continue;
                    bench_row_sample(rows[si][alt], avg, faults, (uint64_t)v[4]);
                    for (int c = 0; c < 5; c++)
                        sums[si][alt][c] += v[c] / (double)o->processes;
                    seen_obs[si][alt] += v[1] >= 0;
                }
                fclose(f);
            }
        }
    }
    unlink(path);
    free(args);
    for (size_t si = 0; rc == 0 && si < n; si++)
        for (int j = 0; j < k; j++) {
            int i = idx[j];
            set_alloc_columns(rows[si][i], sums[si][i][0],
                              seen_obs[si][i] == o->processes ? sums[si][i][1] : -1);
            set_residency_columns(rows[si][i], sums[si][i][2], sums[si][i][3], sums[si][i][4]);
        }
    if (rc == 0)
        rc = bench_report_finish(rep);
    bench_report_free(rep);
    return rc;
}

static double row_mean(const bench_row *row)
{
    size_t c = bench_row_count(row);
    double s = 0;
    for (size_t r = 0; r < c; r++)
        s += bench_row_at(row, r);
    return c ? s / (double)c : 0;
}

static int whole_cost(const bench_opts *o)
{
    static const size_t defaults[] = {64, 4096, 65536, 1 << 20, 20589008, 128u << 20};
    static const size_t full[] = {64,       256,       1024,       4096,     16384,
                                  65536,    262144,    1u << 20,   4u << 20, 16u << 20,
                                  20589008, 64u << 20, 256u << 20, 1u << 30};
    static const size_t dry[] = {64, 4096, 1u << 20};
    const size_t *sizes = o->full ? full : o->dry ? dry : defaults;
    size_t n = o->full  ? sizeof full / sizeof full[0]
               : o->dry ? sizeof dry / sizeof dry[0]
                        : sizeof defaults / sizeof defaults[0];
    if (o->n_sizes) {
        sizes = o->sizes;
        n = o->n_sizes;
    }
    if (o->processes > 0)
        return whole_cost_processes(o, sizes, n);
    const char *child_path = getenv(CHILD_ENV);
    /* --observe: run again with the interposer preloaded (once; a child of --processes
     * already has it). */
    if (o->observe && !observed_fn() && !getenv(OBSERVE_TRIED_ENV)) {
        setenv(OBSERVE_TRIED_ENV, "1", 1);
        if (preload_observer()) {
            fflush(stdout);
            execv("/proc/self/exe", o->argv);
            perror("pool-cost: re-running with the interposer");
            return -1;
        }
    }
    FILE *child_out = NULL;
    if (child_path && *child_path) {
        child_out = fopen(child_path, "w");
        if (!child_out) {
            perror(child_path);
            return -1;
        }
    }
    int idx[WALT];
    int k = selected_cases(o, idx);
    bench_report *rep = bench_report_new(o);
    lds_pool *pools[WALT] = {0};
    consumer cons[WALT];
    bool started[WALT] = {0};
    int rc = rep && k > 0 ? 0 : -1;
    for (int j = 0; j < k && rc == 0; j++) {
        int i = idx[j];
        rc = lds_pool_create(NULL, &pools[i]) == LDS_OK ? 0 : -1;
        if (rc == 0 && i % C_COUNT == C_THREAD) {
            rc = consumer_start(&cons[i]);
            started[i] = rc == 0;
        }
    }
    if (rep) {
        bench_param(rep, "operation",
                    "acquire, fill the logical length with a pattern, hand exactly that view "
                    "to the consumer, which reads every byte into a checksum (checked per "
                    "batch), end the lease");
        bench_param(rep, "consumers",
                    "same thread: a call; consumer thread: over a queue of 4, the lease ends "
                    "when the consumer is done (owner: the consumer returns it); yields per "
                    "chunk: a call that reads 64 KiB chunks with sched_yield() before each");
        bench_param(rep, "pools", "one private pool per row, default options");
        bench_param(rep, "allocated/op",
                    "counted: malloc'd bytes (allocate), pool misses x class capacity (rent, "
                    "owner); observed: bytes asked of malloc & co. + anonymous mmap bytes "
                    "seen by liblds-bench-observe.so during the row's batches, every thread "
                    "(--observe; '-' when not loaded); first op = the first after an empty "
                    "pool / malloc_trim");
        bench_param(rep, "residency",
                    "after the size's rounds: pool_retained = the row's pool bytes_retained; "
                    "allocator_kept = glibc mallinfo2 fordblks (free bytes in the arenas, top "
                    "chunk included), for the whole process; rss = the row's highest RSS");
    }
    for (size_t si = 0; si < n && rc == 0; si++) {
        size_t size = sizes[si];
        char title[160], size_s[32];
        bench_fmt_bytes((double)size, size_s, sizeof size_s);
        snprintf(title, sizeof title, "%s (%zu bytes): fill, consume every byte, checksum, end",
                 size_s, size);
        bench_table(rep, title, true);
        wctx ctx[WALT];
        bench_alt alts[WALT];
        uint64_t seed = 0x1d5ull + size;
        unsigned char *ref = malloc(size);
        if (!ref) {
            rc = -1;
            break;
        }
        fill(ref, size, seed);
        uint64_t expect = checksum(ref, size);
        free(ref);
        bench_scale scale = size >= ((size_t)32 << 20)   ? BENCH_MS
                            : size >= ((size_t)64 << 10) ? BENCH_US
                                                         : BENCH_NS_PER_OP;
        const char *unit = scale == BENCH_MS ? "ms/op" : scale == BENCH_US ? "us/op" : "ns/op";
        double first_us[WALT];
        uint64_t alloc0[WALT];
        for (int j = 0; j < k; j++) {
            int i = idx[j];
            lds_pool_trim(pools[i], LDS_POOL_TRIM_ALL, NULL);
            ctx[j] = (wctx){.s = (enum wstrategy)(i / C_COUNT),
                            .cm = (enum wconsumer)(i % C_COUNT),
                            .size = size,
                            .seed = seed,
                            .expect = expect,
                            .pool = pools[i],
                            .cons = started[i] ? &cons[i] : NULL};
            char name[96];
            snprintf(name, sizeof name, "%s, %s", wstrategy_names[ctx[j].s],
                     wconsumer_names[ctx[j].cm]);
            alts[j] = (bench_alt){.name = wstrategy_names[ctx[j].s],
                                  .scale = scale,
                                  .unit = unit,
                                  .run = whole_run,
                                  .ctx = &ctx[j],
                                  .ops = whole_ops_for(o, size),
                                  .row = bench_row_new(rep, name, unit)};
        }
        /* First use: one op each from an empty pool and a trimmed heap. */
        for (int j = 0; j < k && rc == 0; j++) {
            if (strcmp(bench_allocator_name(), "glibc") == 0)
                malloc_trim(0);
            uint64_t t0 = bench_now_ns();
            rc = whole_run(&ctx[j], 1, NULL);
            first_us[j] = (double)(bench_now_ns() - t0) / 1e3;
        }
        for (int j = 0; j < k; j++) {
            alloc0[j] = pool_allocations(ctx[j].pool);
            ctx[j].bytes_malloc = ctx[j].mallocs = ctx[j].obs_bytes = ctx[j].obs_allocs = 0;
        }
        if (rc == 0)
            rc = bench_interleave(alts, (size_t)k, bench_warmup(o, 2), iters_for(o, size));
        if (rc != 0)
            break;
        double kept = allocator_kept();
        double bpo[WALT], obpo[WALT], m[WALT] = {0};
        for (int j = 0; j < k; j++) {
            bench_row *row = alts[j].row;
            /* ops run since the counters were zeroed: warm-up and measured rounds */
            uint64_t ops = alts[j].ops * (uint64_t)(bench_warmup(o, 2) + iters_for(o, size));
            uint64_t misses = pool_allocations(ctx[j].pool) - alloc0[j];
            double bytes = ctx[j].s == W_ALLOC
                               ? (double)ctx[j].bytes_malloc
                               : (double)misses * (double)lds_pool_class_capacity(size);
            double allocs = ctx[j].s == W_ALLOC ? (double)ctx[j].mallocs : (double)misses;
            bpo[j] = ops ? bytes / (double)ops : 0;
            obpo[j] = observed_fn() && ops ? (double)ctx[j].obs_bytes / (double)ops : -1;
            set_alloc_columns(row, bpo[j], obpo[j]);
            bench_row_set(row, "allocated per op", "allocations_per_op", BENCH_NUM,
                          ops ? allocs / (double)ops : 0);
            if (obpo[j] >= 0)
                bench_row_set(row, "allocated per op", "observed_allocations_per_op", BENCH_NUM,
                              (double)ctx[j].obs_allocs / (double)ops);
            bench_row_set(row, "first use", "first_op_us", BENCH_NUM, first_us[j]);
            set_residency_columns(row, (double)pool_retained(ctx[j].pool), kept,
                                  (double)bench_row_rss_max(row));
            m[j] = bench_row_median(row);
        }
        for (int cm = 0; cm < C_COUNT; cm++) {
            double med[W_COUNT] = {0};
            int have = 0;
            for (int j = 0; j < k; j++)
                if (ctx[j].cm == (enum wconsumer)cm) {
                    med[ctx[j].s] = m[j];
                    have++;
                }
            double rent = med[W_RENT];
            if (have == W_COUNT)
                bench_note(rep,
                           "%s: allocate / rent %.2fx, rent + clear / rent %.2fx, owner / rent "
                           "%.2fx (medians; above 1 the rent is faster)",
                           wconsumer_names[cm], rent > 0 ? med[W_ALLOC] / rent : 0,
                           rent > 0 ? med[W_RENT_CLEAR] / rent : 0,
                           rent > 0 ? med[W_OWNER] / rent : 0);
        }
        bench_note(rep, "checksums checked after each batch of %llu ops: all agree",
                   (unsigned long long)alts[0].ops);
        if (child_out) {
            for (int j = 0; j < k; j++) {
                const bench_row *row = alts[j].row;
                fprintf(child_out, "%zu\t%d\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\n",
                        size, idx[j], row_mean(row), bench_row_faults(row), bpo[j], obpo[j],
                        (double)pool_retained(ctx[j].pool), kept, (double)bench_row_rss_max(row));
            }
        }
    }
    if (rc == 0 && !child_out && k == WALT)
        waste_table(rep, sizes, n);
    if (rc == 0 && !child_out)
        rc = bench_report_finish(rep);
    if (child_out && fclose(child_out) != 0)
        rc = -1;
    for (int i = 0; i < WALT; i++) {
        if (started[i])
            consumer_stop(&cons[i]);
        lds_pool_free(pools[i]);
    }
    bench_report_free(rep);
    return rc;
}

int bench_pool_cost(const bench_opts *o)
{
    if (o->retouch)
        return retouch_cost(o);
    return o->acquire ? acquire_cost(o) : whole_cost(o);
}
