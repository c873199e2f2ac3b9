/*
 * pool-cost (a diagnostic): what does renting cost against allocating the same
 * payload? Strategies per size: the stack (small sizes only), malloc (never
 * calloc: the read path does not zero, so the rival is not charged a memset),
 * rent, rent with clear-on-return, and mmap per call. Every strategy touches
 * every page of its buffer the same way, as the read path would.
 *
 * Three separate column groups, never inferred from each other: allocation
 * (bytes requested, capacity), residency (bytes kept after the free or return,
 * RSS) and time (with page faults beside it). A second table reports the
 * rounding waste of the pool's size classes.
 */
#include "bench.h"

#include "lodestar.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define STACK_MAX ((size_t)65536)

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

static int run(void *p, uint64_t ops, uint64_t *elapsed)
{
    pc_ctx *c = p;
    size_t page = bench_page_size();
    (void)elapsed;
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

int bench_pool_cost(const bench_opts *o)
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
                (pc_ctx){(enum strategy)s, size, full_touch, s == S_RENT_HUGE ? hpool : pool, 0};
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
        rc = bench_interleave(alts, k, bench_warmup(o, 2), iters_for(o, size));
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
