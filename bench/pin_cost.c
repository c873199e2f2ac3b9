/*
 * pin-cost (a diagnostic): what one pin+unpin of a reader costs, for the
 * reclamation schemes the live index could use (docs/adr/0013):
 * - lodestar's lds_live_pin/unpin (per-thread hazard slots, the chosen one);
 * - one shared atomic reference count (what every reader would write);
 * - a pthread rwlock read side;
 * - liburcu's read-side critical section, memb and bp flavours (rcu_read_lock,
 *   rcu_dereference, rcu_read_unlock), when built with liburcu;
 * - Concurrency Kit's epoch section (ck_epoch_begin/end) and its hazard pointer
 *   (ck_hp_set_fence, re-check, clear), when built with libck.
 * Each "pin" reads one byte of the pinned object. Measured with the reader alone
 * (uncontended) and with a second thread pinning the same object at once (the
 * shared-line cost shows there). Interleaved rounds, ns per pin+unpin.
 */
#include "bench.h"

#include "lodestar.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef BENCH_HAVE_URCU
#define _LGPL_SOURCE
#include <urcu/urcu-bp.h>
#include <urcu/urcu-memb.h>
#endif
#ifdef BENCH_HAVE_CK
#include <ck_epoch.h>
#include <ck_hp.h>
#endif

enum cand {
    C_LIVE,
    C_SHARED,
    C_RWLOCK,
#ifdef BENCH_HAVE_URCU
    C_URCU_MEMB,
    C_URCU_BP,
#endif
#ifdef BENCH_HAVE_CK
    C_CK_EPOCH,
    C_CK_HP,
#endif
    C_COUNT
};

static const char *const cand_names[C_COUNT] = {
    "lodestar lds_live_pin/unpin (hazard slots)",
    "shared atomic refcount",
    "pthread_rwlock read side",
#ifdef BENCH_HAVE_URCU
    "liburcu memb rcu_read_lock/unlock",
    "liburcu bp rcu_read_lock/unlock",
#endif
#ifdef BENCH_HAVE_CK
    "libck ck_epoch_begin/end",
    "libck ck_hp_set_fence + re-check, ck_hp_set NULL",
#endif
};

typedef struct shared_obj {
    _Alignas(64) _Atomic uint64_t refs;
    _Alignas(64) unsigned char *_Atomic ptr;
} shared_obj;

static shared_obj g_obj;
/* liburcu's rcu_dereference takes a plain pointer (clang refuses it an _Atomic one). */
static unsigned char *g_rcu_ptr;
static lds_live *g_live;
static pthread_rwlock_t g_rw = PTHREAD_RWLOCK_INITIALIZER;
#ifdef BENCH_HAVE_CK
static ck_epoch_t g_epoch;
static ck_hp_t g_hp;
static void hp_destroy(void *p)
{
    (void)p;
}
#endif

typedef struct pc_ctx {
    enum cand cand;
    int threads; /* 1 or 2 */
} pc_ctx;

typedef struct thread_state {
#ifdef BENCH_HAVE_CK
    ck_epoch_record_t *rec;
    ck_hp_record_t *hp;
    void *hp_slots[1];
#endif
    int registered;
} thread_state;

static _Thread_local thread_state ts;

static void thread_setup(enum cand c)
{
#ifdef BENCH_HAVE_URCU
    if (c == C_URCU_MEMB && !(ts.registered & 1)) {
        urcu_memb_register_thread();
        ts.registered |= 1;
    }
#endif
#ifdef BENCH_HAVE_CK
    if (c == C_CK_EPOCH && !ts.rec) {
        ts.rec = calloc(1, sizeof *ts.rec);
        ck_epoch_register(&g_epoch, ts.rec, NULL);
    }
    if (c == C_CK_HP && !ts.hp) {
        ts.hp = calloc(1, sizeof *ts.hp);
        ck_hp_register(&g_hp, ts.hp, ts.hp_slots);
    }
#endif
    (void)c;
}

static void thread_teardown(void)
{
#ifdef BENCH_HAVE_URCU
    if (ts.registered & 1)
        urcu_memb_unregister_thread();
#endif
#ifdef BENCH_HAVE_CK
    if (ts.rec)
        ck_epoch_unregister(ts.rec); /* the records stay allocated: ck may reuse them */
    if (ts.hp)
        ck_hp_unregister(ts.hp);
#endif
}

/* `n` pins of candidate `c`, each reading one byte of the pinned object. */
static unsigned loop(enum cand c, uint64_t n)
{
    unsigned sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        switch (c) {
        case C_LIVE: {
            lds_pin pin;
            if (lds_live_pin(g_live, &pin) == LDS_OK) {
                sum += (unsigned)lds_index_rows(pin.index);
                lds_live_unpin(g_live, &pin);
            }
            break;
        }
        case C_SHARED: {
            atomic_fetch_add_explicit(&g_obj.refs, 1, memory_order_acquire);
            sum += *atomic_load_explicit(&g_obj.ptr, memory_order_acquire);
            atomic_fetch_sub_explicit(&g_obj.refs, 1, memory_order_release);
            break;
        }
        case C_RWLOCK:
            pthread_rwlock_rdlock(&g_rw);
            sum += *atomic_load_explicit(&g_obj.ptr, memory_order_relaxed);
            pthread_rwlock_unlock(&g_rw);
            break;
#ifdef BENCH_HAVE_URCU
        case C_URCU_MEMB:
            urcu_memb_read_lock();
            sum += *(unsigned char *)rcu_dereference(g_rcu_ptr);
            urcu_memb_read_unlock();
            break;
        case C_URCU_BP:
            urcu_bp_read_lock();
            sum += *(unsigned char *)rcu_dereference(g_rcu_ptr);
            urcu_bp_read_unlock();
            break;
#endif
#ifdef BENCH_HAVE_CK
        case C_CK_EPOCH: {
            ck_epoch_section_t s;
            ck_epoch_begin(ts.rec, &s);
            sum += *atomic_load_explicit(&g_obj.ptr, memory_order_acquire);
            ck_epoch_end(ts.rec, &s);
            break;
        }
        case C_CK_HP: {
            unsigned char *p;
            do {
                p = atomic_load_explicit(&g_obj.ptr, memory_order_acquire);
                ck_hp_set_fence(ts.hp, 0, p);
            } while (p != atomic_load_explicit(&g_obj.ptr, memory_order_acquire));
            sum += *p;
            ck_hp_set(ts.hp, 0, NULL);
            break;
        }
#endif
        default:
            break;
        }
    }
    return sum;
}

typedef struct helper {
    enum cand cand;
    _Atomic int state; /* 0 starting, 1 running, 2 stop */
    pthread_t t;
} helper;

static void *helper_main(void *p)
{
    helper *h = p;
    thread_setup(h->cand);
    atomic_store(&h->state, 1);
    unsigned sum = 0;
    while (atomic_load_explicit(&h->state, memory_order_relaxed) == 1)
        sum += loop(h->cand, 256);
    bench_escape(&sum);
    thread_teardown();
    return NULL;
}

static int run(void *p, uint64_t ops, uint64_t *elapsed)
{
    pc_ctx *c = p;
    helper h = {c->cand, 0, 0};
    if (c->threads > 1) {
        if (pthread_create(&h.t, NULL, helper_main, &h) != 0)
            return -1;
        while (atomic_load(&h.state) == 0) {
        }
    }
    thread_setup(c->cand);
    uint64_t t0 = bench_now_ns();
    unsigned sum = loop(c->cand, ops);
    *elapsed = bench_now_ns() - t0;
    bench_escape(&sum);
    if (c->threads > 1) {
        atomic_store(&h.state, 2);
        pthread_join(h.t, NULL);
    }
    return 0;
}

int bench_pin_cost(const bench_opts *o)
{
    static unsigned char byte = 7;
    atomic_store(&g_obj.ptr, &byte);
    g_rcu_ptr = &byte;
#ifdef BENCH_HAVE_CK
    ck_epoch_init(&g_epoch);
    ck_hp_init(&g_hp, 1, 64, hp_destroy);
#endif
    /* A live index over a tiny generated index, so lds_live_pin has a generation. */
    char ref[4096];
    if (bench_reference_index(bench_work_dir(o), 64, 8, false, ref, sizeof ref) != 0)
        return -1;
    if (lds_live_create(NULL, &g_live, NULL) != LDS_OK ||
        lds_live_reload_path(g_live, ref, NULL, NULL, NULL, NULL) != LDS_OK) {
        fprintf(stderr, "pin-cost: cannot load %s into a live index\n", ref);
        return -1;
    }
    bench_report *rep = bench_report_new(o);
    if (!rep)
        return -1;
    uint64_t ops = o->dry ? 1000 : 2000000;
    int iters = bench_iters(o, 15), warm = bench_warmup(o, 2);
    char buf[256];
    snprintf(buf, sizeof buf,
             "%llu pin+unpin pairs per sample, each reading one byte of the pinned object; "
             "%d rounds interleaved after %d warm-up",
             (unsigned long long)ops, iters, warm);
    bench_param(rep, "work", buf);
#ifndef BENCH_HAVE_URCU
    bench_param(rep, "liburcu",
                "not built in (liburcu-dev missing at configure time, or a sanitizer build)");
#endif
#ifndef BENCH_HAVE_CK
    bench_param(rep, "libck", "not built in (libck-dev missing at configure time)");
#endif
    int rc = 0;
    pc_ctx ctx[2][C_COUNT];
    bench_alt alts[C_COUNT];
    for (int th = 1; th <= 2 && rc == 0; th++) {
        bench_table(rep,
                    th == 1 ? "one reader alone (uncontended)"
                            : "two readers pinning the same object at once (2 vCPUs, shared)",
                    true);
        for (int k = 0; k < C_COUNT; k++) {
            ctx[th - 1][k] = (pc_ctx){(enum cand)k, th};
            alts[k] = (bench_alt){.name = cand_names[k],
                                  .scale = BENCH_NS_PER_OP,
                                  .unit = "ns/pin+unpin",
                                  .run = run,
                                  .ctx = &ctx[th - 1][k],
                                  .ops = ops,
                                  .row = bench_row_new(rep, cand_names[k], "ns/pin+unpin")};
        }
        rc = bench_interleave(alts, C_COUNT, warm, iters);
        for (int k = 0; rc == 0 && k < C_COUNT; k++)
            bench_row_set(alts[k].row, "vs lodestar", "ratio", BENCH_RATIO,
                          bench_row_median(alts[k].row) / bench_row_median(alts[0].row));
    }
    if (rc == 0) {
        bench_note(rep, "RCU and epoch sections are per thread and end on the thread that began "
                        "them; a pin of lodestar may be released on another thread, and frees its "
                        "generation exactly at the last unpin (docs/adr/0013)");
        rc = bench_report_finish(rep);
    }
    thread_teardown();
    bench_report_free(rep);
    lds_live_free(g_live);
    g_live = NULL;
    return rc;
}
