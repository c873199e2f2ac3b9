/* contention: rent+return throughput at 1..N threads (default 1, 2, 4, 8, 16, 32), and the ratio
 * to one thread, with the cores this process may run on stated: counts above them show what
 * time-slicing those cores costs, not how the pool scales. */
#include "bench.h"

#include "lodestar.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum variant { V_POOL, V_POOL_SHARED_ONLY, V_MALLOC, V_COUNT };

static const char *const variant_names[V_COUNT] = {
    "pool (thread cache)", "pool (no thread cache: shared stacks)", "malloc+free"};

/* Three sizes in rotation, so the shared stacks of more than one class are hit. */
static const size_t mix[] = {256, 4096, 65536};
#define MIX (sizeof mix / sizeof mix[0])

typedef struct ct_ctx {
    enum variant v;
    lds_pool *pool;
    int threads;
    uint64_t per_thread;
    pthread_barrier_t start;
    int failed;
    uint64_t t_start[256], t_end[256];
    int next_slot;
    pthread_mutex_t lock;
} ct_ctx;

static void *worker(void *p)
{
    ct_ctx *c = p;
    pthread_mutex_lock(&c->lock);
    int slot = c->next_slot++;
    pthread_mutex_unlock(&c->lock);
    pthread_barrier_wait(&c->start);
    c->t_start[slot] = bench_now_ns();
    for (uint64_t i = 0; i < c->per_thread; i++) {
        size_t size = mix[i % MIX];
        if (c->v == V_MALLOC) {
            void *b = malloc(size);
            if (!b) {
                c->failed = 1;
                break;
            }
            bench_escape(b);
            free(b);
            continue;
        }
        lds_lease lease;
        if (lds_pool_rent(c->pool, size, &lease) != LDS_OK) {
            c->failed = 1;
            break;
        }
        bench_escape(lease.ptr);
        if (lds_pool_return(c->pool, &lease, 0) != LDS_OK) {
            c->failed = 1;
            break;
        }
    }
    c->t_end[slot] = bench_now_ns();
    return NULL;
}

static int run(void *p, uint64_t ops, uint64_t *elapsed)
{
    ct_ctx *c = p;
    pthread_t tids[256];
    c->per_thread = ops / (uint64_t)c->threads;
    c->failed = 0;
    c->next_slot = 0;
    if (pthread_barrier_init(&c->start, NULL, (unsigned)c->threads + 1) != 0)
        return -1;
    int started = 0;
    for (; started < c->threads; started++)
        if (pthread_create(&tids[started], NULL, worker, c) != 0)
            break;
    if (started < c->threads) {
        fprintf(stderr, "contention: pthread_create failed\n");
        abort();
    }
    pthread_barrier_wait(&c->start);
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    /* Wall time from the first thread's start to the last one's end, as the threads saw it
       (the main thread may be scheduled late). */
    uint64_t t0 = c->t_start[0], t1 = c->t_end[0];
    for (int i = 1; i < started; i++) {
        if (c->t_start[i] < t0)
            t0 = c->t_start[i];
        if (c->t_end[i] > t1)
            t1 = c->t_end[i];
    }
    *elapsed = t1 > t0 ? t1 - t0 : 1;
    pthread_barrier_destroy(&c->start);
    if (c->failed) {
        fprintf(stderr, "contention: a rent or return failed\n");
        return -1;
    }
    return 0;
}

/* The cores this process may run on: sched_getaffinity's mask (a cgroup or taskset can make it
   smaller than the online count); the online count if the call fails. */
static long usable_cpus(long online)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return online;
    long n = CPU_COUNT(&set);
    return n > 0 ? n : online;
}

/* A sample's pairs over all threads: per_core for each usable core in use, rounded down to a
   multiple of the thread count (each thread does ops / threads). */
static uint64_t ops_for(uint64_t per_core, int threads, long usable)
{
    uint64_t busy = (uint64_t)(threads < usable ? threads : usable);
    uint64_t per_thread = per_core * busy / (uint64_t)threads;
    return (per_thread ? per_thread : 1) * (uint64_t)threads;
}

int bench_contention(const bench_opts *o)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    long usable = usable_cpus(ncpu);
    int max_threads = o->threads ? o->threads : 32;
    if (o->dry && !o->threads)
        max_threads = 2;
    int counts[16], n_counts = 0;
    for (int t = 1; t <= max_threads && n_counts < 16; t *= 2)
        counts[n_counts++] = t;
    if (counts[n_counts - 1] != max_threads && n_counts < 16)
        counts[n_counts++] = max_threads;

    bench_report *rep = bench_report_new(o);
    lds_pool *pools[V_COUNT] = {0};
    if (!rep)
        return -1;
    lds_pool_options po;
    lds_pool_options_default(&po);
    if (lds_pool_create(&po, &pools[V_POOL]) != LDS_OK)
        goto fail;
    po.thread_cache_count = 0;
    if (lds_pool_create(&po, &pools[V_POOL_SHARED_ONLY]) != LDS_OK)
        goto fail;

    char buf[160];
    snprintf(buf, sizeof buf,
             "%ld online cpus (sysconf), %ld usable by this process (sched_getaffinity)", ncpu,
             usable);
    bench_param(rep, "cores", buf);
    snprintf(buf, sizeof buf, "thread counts 1..%d", max_threads);
    bench_param(rep, "threads", buf);
    bench_param(rep, "sizes", "256 B, 4 KiB, 64 KiB in rotation; each thread rents and returns");
    bench_param(rep, "target", ">= 1.8x the one-thread throughput at 2 threads");
    bench_table(rep, "rent+return throughput by thread count (total over all threads)", true);

    int n_alts = n_counts * V_COUNT;
    bench_alt *alts = calloc((size_t)n_alts, sizeof *alts);
    ct_ctx *ctx = calloc((size_t)n_alts, sizeof *ctx);
    if (!alts || !ctx) {
        free(alts);
        free(ctx);
        goto fail;
    }
    /* Each sample does 500,000 pairs per usable core in use: at or below the core count
       that is 500,000 per thread; above it the same total is split over the threads, so an
       oversubscribed sample takes about as long as a fully used one instead of growing with
       the thread count. */
    uint64_t per_core = o->dry ? 2000 : 500000;
    for (int v = 0; v < V_COUNT; v++)
        for (int i = 0; i < n_counts; i++) {
            int k = v * n_counts + i;
            ctx[k].v = (enum variant)v;
            ctx[k].pool = pools[v];
            ctx[k].threads = counts[i];
            pthread_mutex_init(&ctx[k].lock, NULL);
            snprintf(buf, sizeof buf, "%s, %d thread%s", variant_names[v], counts[i],
                     counts[i] > 1 ? "s" : "");
            alts[k] = (bench_alt){.name = variant_names[v],
                                  .scale = BENCH_MOPS,
                                  .unit = "Mpairs/s",
                                  .run = run,
                                  .ctx = &ctx[k],
                                  .ops = ops_for(per_core, counts[i], usable),
                                  .row = bench_row_new(rep, buf, "Mpairs/s")};
        }
    /* Interleave across thread counts: every round runs each (variant, count) once. */
    int rc = bench_interleave(alts, (size_t)n_alts, bench_warmup(o, 2), bench_iters(o, 11));
    for (int v = 0; rc == 0 && v < V_COUNT; v++) {
        double base = bench_row_median(alts[v * n_counts].row);
        for (int i = 0; i < n_counts; i++) {
            bench_row *row = alts[v * n_counts + i].row;
            bench_row_set(row, "scaling", "threads", BENCH_COUNT, counts[i]);
            bench_row_set(row, "scaling", "ratio_to_1_thread", BENCH_RATIO,
                          base > 0 ? bench_row_median(row) / base : 0);
        }
    }
    if (rc == 0 && n_counts > 1) {
        double r = bench_row_median(alts[1].row) / bench_row_median(alts[0].row);
        bench_note(rep, "pool at 2 threads: %.2fx the one-thread throughput (target >= 1.8x)%s", r,
                   usable < 2 ? "; fewer than 2 cpus, the target cannot be met here" : "");
    }
    if (rc == 0) {
        bench_note(rep,
                   "on %ld usable core%s, scaling past %ld worker%s shows only oversubscription "
                   "(threads time-sliced on the same cores), not how the pool scales",
                   usable, usable == 1 ? "" : "s", usable, usable == 1 ? "" : "s");
        bench_note(rep,
                   "on a loaded machine more threads also win a larger share of the cores "
                   "from other processes: a ratio above 1 past %ld worker%s is that share, "
                   "not scaling (the load average is printed above)",
                   usable, usable == 1 ? "" : "s");
    }
    if (rc == 0)
        rc = bench_report_finish(rep);
    free(alts);
    free(ctx);
    for (int v = 0; v < V_COUNT; v++)
        lds_pool_free(pools[v]);
    bench_report_free(rep);
    return rc;
fail:
    for (int v = 0; v < V_COUNT; v++)
        lds_pool_free(pools[v]);
    bench_report_free(rep);
    return -1;
}
