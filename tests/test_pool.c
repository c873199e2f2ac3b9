/*
 * test_pool.c: the buffer pool's unit tests (cmocka).
 *
 * Built twice (tests/meson.build): 'pool' runs every test; 'pool-stress', built with
 * -DLDS_POOL_TSAN_ONLY, runs only the multi-threaded ones (stress, concurrent double
 * return, thread exit, shared pool creation) so a ThreadSanitizer job can run just those.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lodestar.h"
#include "pool_inline.h"
#include "../pool/pool_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <json-c/json.h>

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#ifdef TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

#define MiB ((size_t)1 << 20)

#include "pool_helpers.h"

static void assert_consistent(lds_pool *p)
{
    lds_pool_stats s = stats_of(p);
    assert_int_equal(s.rents, s.returns + s.leases_current);
}

/* ==== multi-threaded tests (also the TSan suite) ========================== */

/* Two threads (neither the renter) return copies of the same lease at the same instant;
 * exactly one wins at the call here, as the renter does not collect during the race (its
 * next rent comes after both calls); see test_own_and_cross_return_race for the renter. */
typedef struct race_ctx {
    lds_pool *pool;
    pthread_barrier_t start, done;
    lds_lease lease;
    int ok[2];
    int rounds;
} race_ctx;

static race_ctx g_race;

static void *race_thread(void *arg)
{
    int me = (int)(intptr_t)arg;
    for (int r = 0; r < g_race.rounds; r++) {
        pthread_barrier_wait(&g_race.start);
        lds_lease copy = g_race.lease;
        g_race.ok[me] = lds_pool_return(g_race.pool, &copy, 0) == LDS_OK;
        pthread_barrier_wait(&g_race.done);
    }
    return NULL;
}

/* A stale return on one thread while another thread's rents keep giving its slot a new
 * buffer (nothing is pooled: every return frees the buffer and the next rent takes the freed
 * slot again): every stale return is refused, nothing else changes. ThreadSanitizer
 * reported the warm return's plain read of the slot's capacity racing buffer_create's
 * write; the capacity is now a relaxed atomic. */
typedef struct churn {
    lds_pool *pool;
    lds_lease stale;
    _Atomic int stop;
    long tried, refused;
} churn;

static void *stale_returner(void *arg)
{
    churn *c = arg;
    lds_lease own; /* a cache of this thread for the pool: the stale returns take the warm path */
    if (lds_pool_rent(c->pool, 100, &own) != LDS_OK || lds_pool_return(c->pool, &own, 0) != LDS_OK)
        return NULL;
    while (!atomic_load(&c->stop) || c->tried < 1000) {
        lds_lease l = c->stale;
        c->tried++;
        if (lds_pool_return(c->pool, &l, 0) == LDS_E_POOL_REFUSED)
            c->refused++;
    }
    return NULL;
}

static void test_stale_return_while_slot_reused(void **state)
{
    (void)state;
    churn c = {.pool = make_pool(LDS_POOL_CHECK_OFF, 64)}; /* 64 bytes: nothing is pooled */
    lds_lease l;
    assert_int_equal(lds_pool_rent(c.pool, 1000, &l), LDS_OK);
    c.stale = l;
    assert_int_equal(lds_pool_return(c.pool, &l, 0), LDS_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stale_returner, &c), 0);
    for (int i = 0; i < 20000; i++) {
        assert_int_equal(lds_pool_rent(c.pool, 1000, &l), LDS_OK);
        assert_int_equal(lds_pool_return(c.pool, &l, 0), LDS_OK);
    }
    atomic_store(&c.stop, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(c.tried >= 1000);
    assert_int_equal(c.refused, c.tried);
    lds_pool_stats s = stats_of(c.pool);
    assert_int_equal(s.refused_total, (uint64_t)c.tried);
    assert_int_equal(s.rents, 20002); /* and the other thread's own pair */
    assert_int_equal(s.returns, 20002);
    assert_int_equal(s.leases_current, 0);
    lds_pool_free(c.pool);
}

/* Statistics taken while another thread's guard-mode returns fill the quarantine: the
 * quarantine's count is read as an atomic (ThreadSanitizer reported the plain read racing
 * the return's write under guard_lock). */
typedef struct guard_churn {
    lds_pool *pool;
    _Atomic int stop;
    long snapshots;
} guard_churn;

static void *snapshots_elsewhere(void *arg)
{
    guard_churn *g = arg;
    while (!atomic_load(&g->stop) || g->snapshots < 100) {
        lds_pool_stats s;
        lds_pool_stats_init(&s);
        lds_pool_get_stats(g->pool, &s);
        g->snapshots++;
    }
    return NULL;
}

static void test_stats_during_guard_returns(void **state)
{
    (void)state;
    guard_churn g = {.pool = make_pool(LDS_POOL_CHECK_GUARD, 0)};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, snapshots_elsewhere, &g), 0);
    for (int i = 0; i < 500; i++) {
        lds_lease l;
        assert_int_equal(lds_pool_rent(g.pool, 4000, &l), LDS_OK);
        assert_int_equal(lds_pool_return(g.pool, &l, 0), LDS_OK);
    }
    atomic_store(&g.stop, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    lds_pool_stats s = stats_of(g.pool);
    assert_int_equal(s.rents, 500);
    assert_int_equal(s.returns, 500);
    assert_true(s.buffers_retained > 0);
    lds_pool_free(g.pool);
}

static void test_concurrent_double_return(void **state)
{
    (void)state;
    g_race.pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    g_race.rounds = 10000;
    pthread_barrier_init(&g_race.start, NULL, 3);
    pthread_barrier_init(&g_race.done, NULL, 3);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, race_thread, (void *)(intptr_t)i), 0);
    int exactly_one = 0;
    for (int r = 0; r < g_race.rounds; r++) {
        assert_int_equal(lds_pool_rent(g_race.pool, 100 + (size_t)(r % 7) * 1000, &g_race.lease),
                         LDS_OK);
        pthread_barrier_wait(&g_race.start);
        pthread_barrier_wait(&g_race.done);
        exactly_one += g_race.ok[0] + g_race.ok[1] == 1;
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(exactly_one, g_race.rounds);
    lds_pool_stats s = stats_of(g_race.pool);
    assert_int_equal(s.returns, (uint64_t)g_race.rounds);
    assert_int_equal(s.refused[LDS_POOL_REFUSED_STALE], (uint64_t)g_race.rounds);
    assert_int_equal(s.leases_current, 0);
    pthread_barrier_destroy(&g_race.start);
    pthread_barrier_destroy(&g_race.done);
    lds_pool_free(g_race.pool);
}

#define STRESS_THREADS 4
#define STRESS_OPS     250000 /* per thread: 10^6 rent/return pairs in all */

typedef struct stress_arg {
    lds_pool *pool;
    unsigned seed;
    int failures;
} stress_arg;

static void *stress_thread(void *arg)
{
    stress_arg *a = arg;
    lds_lease held[8];
    memset(held, 0, sizeof held);
    uint32_t x = a->seed;
    for (int i = 0; i < STRESS_OPS; i++) {
        x = x * 1664525u + 1013904223u;
        unsigned slot = (x >> 8) & 7u;
        if (held[slot].handle != 0) {
            unsigned char *p = held[slot].ptr;
            if (p[0] != (unsigned char)slot || p[held[slot].length - 1] != (unsigned char)slot)
                a->failures++;
            if (lds_pool_return(a->pool, &held[slot], 0) != LDS_OK)
                a->failures++;
        }
        size_t n = (x >> 12) & 0x3fffu; /* 0 .. 16 KiB */
        if ((x & 0xffu) == 0)
            n = (size_t)((x >> 16) & 3u) * MiB + 1; /* now and then a mapped one */
        if (n == 0)
            n = 1;
        if (lds_pool_rent(a->pool, n, &held[slot]) != LDS_OK) {
            a->failures++;
            continue;
        }
        unsigned char *p = held[slot].ptr;
        p[0] = (unsigned char)slot;
        p[n - 1] = (unsigned char)slot;
    }
    for (int s = 0; s < 8; s++)
        if (held[s].handle != 0 && lds_pool_return(a->pool, &held[s], 0) != LDS_OK)
            a->failures++;
    return NULL;
}

static void run_stress(lds_pool *pool)
{
    pthread_t t[STRESS_THREADS];
    stress_arg args[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; i++) {
        args[i] = (stress_arg){pool, 12345u + (unsigned)i * 7919u, 0};
        assert_int_equal(pthread_create(&t[i], NULL, stress_thread, &args[i]), 0);
    }
    for (int i = 0; i < STRESS_THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(args[i].failures, 0);
    }
}

static void test_stress_threads(void **state)
{
    (void)state;
    lds_pool_options o;
    lds_pool_options_default(&o);
    o.max_retained_bytes = 32 * MiB;
    o.max_per_class = 16;
    lds_pool *pool = NULL;
    assert_int_equal(lds_pool_create(&o, &pool), LDS_OK);
    run_stress(pool);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.rents, (uint64_t)STRESS_THREADS * STRESS_OPS);
    assert_int_equal(s.rents, s.returns + s.leases_current);
    assert_int_equal(s.leases_current, 0);
    assert_int_equal(s.bytes_leased, 0);
    assert_int_equal(s.waste_bytes_current, 0);
    assert_int_equal(s.refused_total, 0);
    assert_int_equal(s.rents, s.hits_thread + s.hits_shared + s.misses_cold + s.misses_exhausted +
                                  s.misses_oversize);
    assert_true(s.bytes_retained <= o.max_retained_bytes);
    assert_true(s.bytes_leased_peak > 0);
    assert_true(s.bytes_leased_peak <= (uint64_t)STRESS_THREADS * 8 * 4 * MiB);
    lds_pool_free(pool);
}

/* ==== cross-thread returns (docs/pool-protocol.md) ======================== */

/* Runs `fn(arg)` on a new thread and waits for it. */
static void on_thread(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
}

typedef struct xret {
    lds_pool *pool;
    lds_lease lease; /* a copy of the renter's lease */
    unsigned flags;
    lds_status got, got_again;
    lds_pool_stats seen; /* this thread's snapshot right after its return */
} xret;

static void *return_elsewhere(void *arg)
{
    xret *x = arg;
    lds_lease copy = x->lease, again = x->lease;
    x->got = lds_pool_return(x->pool, &copy, x->flags);
    x->got_again = lds_pool_return(x->pool, &again, 0);
    lds_pool_stats_init(&x->seen);
    assert_int_equal(lds_pool_get_stats(x->pool, &x->seen), LDS_OK);
    return NULL;
}

/* A lease returned on another thread is accepted there, takes effect when the renting
 * thread collects it (here: its statistics call), and its buffer comes back to the renter's
 * cache; a second return of it on that thread is refused at once. */
static void test_cross_thread_return_collected(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    xret x = {.pool = pool};
    assert_int_equal(lds_pool_rent(pool, 3000, &x.lease), LDS_OK);
    void *ptr = x.lease.ptr;
    on_thread(return_elsewhere, &x);
    assert_int_equal(x.got, LDS_OK);
    assert_int_equal(x.got_again, LDS_E_POOL_REFUSED);
    assert_int_equal(x.seen.returns, 0); /* queued for the renter, not yet collected */
    assert_int_equal(x.seen.leases_current, 1);
    assert_int_equal(x.seen.refused[LDS_POOL_REFUSED_STALE], 1);
    lds_pool_stats s = stats_of(pool); /* collects this thread's list */
    assert_int_equal(s.returns, 1);
    assert_int_equal(s.leases_current, 0);
    assert_int_equal(s.bytes_leased, 0);
    assert_int_equal(s.refused_total, 1);
    /* The renter's own copy is stale now. */
    assert_int_equal(lds_pool_return(pool, &x.lease, 0), LDS_E_POOL_REFUSED);
    lds_lease l;
    assert_int_equal(lds_pool_rent(pool, 3000, &l), LDS_OK);
    assert_ptr_equal(l.ptr, ptr);
    assert_int_equal(stats_of(pool).hits_thread, 1);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    lds_pool_free(pool);
}

/* Returned elsewhere first, then by the renter: the renter's return is refused at once
 * (a claim is queued), and the lease ends once. */
static void test_cross_then_own_return_refused(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    xret x = {.pool = pool};
    assert_int_equal(lds_pool_rent(pool, 100, &x.lease), LDS_OK);
    on_thread(return_elsewhere, &x);
    assert_int_equal(x.got, LDS_OK);
    lds_lease mine = x.lease;
    assert_int_equal(lds_pool_return(pool, &mine, 0), LDS_E_POOL_REFUSED);
    assert_int_equal(mine.handle, x.lease.handle); /* left as it was */
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.returns, 1);
    assert_int_equal(s.refused[LDS_POOL_REFUSED_STALE], 2); /* the copy there, this one here */
    assert_int_equal(s.leases_current, 0);
    lds_pool_free(pool);
}

/* Returned by the renter first: a return elsewhere is refused at once (stale). */
static void test_own_then_cross_return_refused(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    xret x = {.pool = pool};
    assert_int_equal(lds_pool_rent(pool, 100, &x.lease), LDS_OK);
    lds_lease mine = x.lease;
    assert_int_equal(lds_pool_return(pool, &mine, 0), LDS_OK);
    on_thread(return_elsewhere, &x);
    assert_int_equal(x.got, LDS_E_POOL_REFUSED);
    assert_int_equal(x.got_again, LDS_E_POOL_REFUSED);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.returns, 1);
    assert_int_equal(s.refused[LDS_POOL_REFUSED_STALE], 2);
    lds_pool_free(pool);
}

/* Foreign, forged and resized leases are refused at once on a thread that did not rent
 * them, as on the renting one. */
typedef struct xbad {
    lds_pool *pool, *other;
    lds_lease lease, foreign;
    lds_status got[4];
} xbad;

static void *bad_returns_elsewhere(void *arg)
{
    xbad *b = arg;
    lds_lease l = b->lease;
    l.length += 1;
    b->got[0] = lds_pool_return(b->pool, &l, 0); /* wrong size */
    l = b->lease;
    l.ptr = (char *)l.ptr + 64;
    b->got[1] = lds_pool_return(b->pool, &l, 0); /* wrong pointer */
    l = b->lease;
    l.handle += 2 * LDS__POOL_GEN_STEP;
    b->got[2] = lds_pool_return(b->pool, &l, 0); /* forged handle: a later generation */
    l = b->foreign;
    b->got[3] = lds_pool_return(b->pool, &l, 0); /* another pool's lease */
    return NULL;
}

static void test_cross_thread_bad_returns_refused(void **state)
{
    (void)state;
    xbad b = {.pool = make_pool(LDS_POOL_CHECK_OFF, 0), .other = make_pool(LDS_POOL_CHECK_OFF, 0)};
    assert_int_equal(lds_pool_rent(b.pool, 5000, &b.lease), LDS_OK);
    assert_int_equal(lds_pool_rent(b.other, 5000, &b.foreign), LDS_OK);
    on_thread(bad_returns_elsewhere, &b);
    for (int i = 0; i < 4; i++)
        assert_int_equal(b.got[i], LDS_E_POOL_REFUSED);
    lds_pool_stats s = stats_of(b.pool);
    assert_int_equal(s.refused[LDS_POOL_REFUSED_SIZE], 1);
    assert_int_equal(s.refused[LDS_POOL_REFUSED_POINTER], 1);
    /* the forged later generation and the other pool's lease: never given by this pool
     * (its slots' generations start elsewhere, docs/adr/0027) */
    assert_int_equal(s.refused[LDS_POOL_REFUSED_UNKNOWN], 2);
    assert_int_equal(s.refused[LDS_POOL_REFUSED_STALE], 0);
    assert_int_equal(s.returns, 0);
    assert_int_equal(s.leases_current, 1);
    assert_int_equal(lds_pool_return(b.pool, &b.lease, 0), LDS_OK);
    assert_int_equal(lds_pool_return(b.other, &b.foreign, 0), LDS_OK);
    lds_pool_free(b.pool);
    lds_pool_free(b.other);
}

/* LDS_RETURN_CLEAR travels with a cross-thread claim: the buffer is zeroed at collection. */
static void test_cross_thread_clear(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    xret x = {.pool = pool, .flags = LDS_RETURN_CLEAR};
    assert_int_equal(lds_pool_rent(pool, 256, &x.lease), LDS_OK);
    memset(x.lease.ptr, 0xAB, x.lease.capacity);
    on_thread(return_elsewhere, &x);
    assert_int_equal(x.got, LDS_OK);
    lds_lease l;
    assert_int_equal(lds_pool_rent(pool, 256, &l), LDS_OK); /* collects, then reuses */
    assert_ptr_equal(l.ptr, x.lease.ptr);
    for (size_t i = 0; i < l.capacity; i++)
        assert_int_equal(((unsigned char *)l.ptr)[i], 0);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    lds_pool_free(pool);
}

/* A thread exits with a lease out: its cache is abandoned to the pool, a return on another
 * thread is collected at once (under the registry lock), and the buffer is reusable. */
typedef struct xexit {
    lds_pool *pool;
    lds_lease lease;
    uint64_t rents_seen;
} xexit;

static void *rent_and_exit(void *arg)
{
    xexit *e = arg;
    assert_int_equal(lds_pool_rent(e->pool, 70000, &e->lease), LDS_OK);
    return NULL;
}

static void *adopt_thread(void *arg)
{
    xexit *e = arg;
    lds_lease l;
    assert_int_equal(lds_pool_rent(e->pool, 64, &l), LDS_OK);
    assert_int_equal(lds_pool_return(e->pool, &l, 0), LDS_OK);
    return NULL;
}

static void test_exited_renter_hands_on(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    xexit e = {.pool = pool};
    lds_lease l;
    /* This thread's own cache first (else its return would adopt the abandoned one). */
    assert_int_equal(lds_pool_rent(pool, 64, &l), LDS_OK);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    on_thread(rent_and_exit, &e);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.leases_current, 1);
    assert_int_equal(lds_pool_return(pool, &e.lease, 0), LDS_OK);
    s = stats_of(pool);
    assert_int_equal(s.returns, 2);
    assert_int_equal(s.leases_current, 0);
    assert_int_equal(s.buffers_retained, 2); /* 70000 in the shared stack, 64 here */
    assert_int_equal(s.hits_shared, 0);
    /* A new thread adopts the abandoned cache: the counts carry on in it. */
    on_thread(adopt_thread, &e);
    s = stats_of(pool);
    assert_int_equal(s.rents, 3);
    assert_int_equal(s.returns, 3);
    assert_int_equal(lds_pool_rent(pool, 70000, &l), LDS_OK);
    assert_int_equal(stats_of(pool).hits_shared, 1);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    lds_pool_free(pool);
}

/* A lease kept in its own buffer, rented on a thread that has exited, returned here: the
 * claim ends it at once (the renter's cache is abandoned), and in bypass mode the buffer is
 * unmapped then. The lease must be zeroed before the claim, not after it (found by a
 * reviewer, session 5: the write after the claim hit the unmapped buffer, SIGSEGV). A
 * refused claim (the same lease again) leaves the lease as it was. */
typedef struct xself {
    lds_pool *pool;
    lds_lease *self;
} xself;

static void *rent_self_and_exit(void *arg)
{
    xself *x = arg;
    lds_lease l;
    assert_int_equal(lds_pool_rent(x->pool, 4096, &l), LDS_OK);
    memcpy(l.ptr, &l, sizeof l);
    x->self = l.ptr;
    return NULL;
}

static void test_cross_thread_lease_in_its_own_buffer(void **state)
{
    (void)state;
    const lds_pool_check modes[] = {LDS_POOL_CHECK_BYPASS, LDS_POOL_CHECK_OFF};
    for (int m = 0; m < 2; m++) {
        lds_pool *pool = make_pool(modes[m], 0);
        lds_lease mine;
        /* this thread's own cache first (else its return would adopt the abandoned one) */
        assert_int_equal(lds_pool_rent(pool, 64, &mine), LDS_OK);
        xself x = {.pool = pool};
        on_thread(rent_self_and_exit, &x);
        lds_lease copy = *x.self;
        assert_int_equal(lds_pool_return(pool, x.self, 0), LDS_OK);
        /* the same lease again, from a copy: refused, the copy untouched */
        lds_lease again = copy;
        assert_int_equal(lds_pool_return(pool, &again, 0), LDS_E_POOL_REFUSED);
        assert_memory_equal(&again, &copy, sizeof copy);
        assert_int_equal(lds_pool_return(pool, &mine, 0), LDS_OK);
        lds_pool_stats s = stats_of(pool);
        assert_int_equal(s.leases_current, 0);
        assert_int_equal(s.returns, 2);
        assert_int_equal(s.refused_total, 1);
        lds_pool_free(pool);
    }
}

/* The renter and another thread return one lease at the same instant, many times over:
 * exactly one return takes effect each time (the other is refused, at once or at the
 * collection), and no buffer ever has two owners (the renter's next two leases differ). */
typedef struct own_race {
    lds_pool *pool;
    pthread_barrier_t start, done;
    lds_lease lease;
    int ok;
    int rounds;
} own_race;

static own_race g_own;

static void *own_race_thread(void *arg)
{
    (void)arg;
    for (int r = 0; r < g_own.rounds; r++) {
        pthread_barrier_wait(&g_own.start);
        lds_lease copy = g_own.lease;
        g_own.ok = lds_pool_return(g_own.pool, &copy, 0) == LDS_OK;
        pthread_barrier_wait(&g_own.done);
    }
    return NULL;
}

static void test_own_and_cross_return_race(void **state)
{
    (void)state;
    g_own.pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    g_own.rounds = 5000;
    pthread_barrier_init(&g_own.start, NULL, 2);
    pthread_barrier_init(&g_own.done, NULL, 2);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, own_race_thread, NULL), 0);
    int both_ok = 0;
    for (int r = 0; r < g_own.rounds; r++) {
        size_t n = 100 + (size_t)(r % 5) * 700;
        assert_int_equal(lds_pool_rent(g_own.pool, n, &g_own.lease), LDS_OK);
        lds_lease mine = g_own.lease;
        pthread_barrier_wait(&g_own.start);
        int mine_ok = lds_pool_return(g_own.pool, &mine, 0) == LDS_OK;
        pthread_barrier_wait(&g_own.done);
        both_ok += mine_ok && g_own.ok; /* possible: the other one is refused at collection */
        assert_true(mine_ok || g_own.ok);
        lds_lease a, b;
        assert_int_equal(lds_pool_rent(g_own.pool, n, &a), LDS_OK);
        assert_int_equal(lds_pool_rent(g_own.pool, n, &b), LDS_OK);
        assert_ptr_not_equal(a.ptr, b.ptr);
        assert_int_equal(lds_pool_return(g_own.pool, &a, 0), LDS_OK);
        assert_int_equal(lds_pool_return(g_own.pool, &b, 0), LDS_OK);
    }
    pthread_join(t, NULL);
    lds_pool_stats s = stats_of(g_own.pool);
    assert_int_equal(s.returns, (uint64_t)g_own.rounds * 3);
    assert_int_equal(s.refused[LDS_POOL_REFUSED_STALE], (uint64_t)g_own.rounds);
    assert_int_equal(s.refused_total, (uint64_t)g_own.rounds);
    assert_int_equal(s.leases_current, 0);
    print_message("own/cross race: %d of %d rounds both calls got LDS_OK (refused at collection)\n",
                  both_ok, g_own.rounds);
    pthread_barrier_destroy(&g_own.start);
    pthread_barrier_destroy(&g_own.done);
    lds_pool_free(g_own.pool);
}

/* Leases handed between threads: each thread rents, stamps the buffer with the lease's
 * handle, and passes it to the next thread, which checks the stamp and returns it (a
 * cross-thread return). A buffer with two owners would show a foreign stamp. */
#define HANDOFF_THREADS 3
#define HANDOFF_OPS     60000
#define HANDOFF_RING    64

typedef struct handoff_q {
    pthread_mutex_t lock;
    lds_lease ring[HANDOFF_RING];
    unsigned head, count;
} handoff_q;

typedef struct handoff_arg {
    lds_pool *pool;
    handoff_q *in, *out;
    unsigned seed;
    int failures;
} handoff_arg;

static int handoff_take(handoff_q *q, lds_lease *l)
{
    pthread_mutex_lock(&q->lock);
    int got = q->count > 0;
    if (got) {
        *l = q->ring[q->head];
        q->head = (q->head + 1) % HANDOFF_RING;
        q->count--;
    }
    pthread_mutex_unlock(&q->lock);
    return got;
}

static int handoff_give(handoff_q *q, const lds_lease *l)
{
    pthread_mutex_lock(&q->lock);
    int room = q->count < HANDOFF_RING;
    if (room) {
        q->ring[(q->head + q->count) % HANDOFF_RING] = *l;
        q->count++;
    }
    pthread_mutex_unlock(&q->lock);
    return room;
}

static int handoff_check_return(lds_pool *pool, lds_lease *l)
{
    uint64_t head, tail;
    memcpy(&head, l->ptr, sizeof head);
    memcpy(&tail, (char *)l->ptr + l->length - sizeof tail, sizeof tail);
    uint64_t h = l->handle;
    lds_status st = lds_pool_return(pool, l, 0);
    if (head != h || tail != h || st != LDS_OK)
        print_message("handoff: h=%llx head=%llx tail=%llx return %d\n", (unsigned long long)h,
                      (unsigned long long)head, (unsigned long long)tail, (int)st);
    return (head != h) + (tail != h) + (st != LDS_OK);
}

static void *handoff_thread(void *arg)
{
    handoff_arg *a = arg;
    uint32_t x = a->seed;
    lds_lease l;
    for (int i = 0; i < HANDOFF_OPS; i++) {
        x = x * 1664525u + 1013904223u;
        size_t n = 16 + ((x >> 10) & 0x1fffu); /* room for both stamps */
        if (lds_pool_rent(a->pool, n, &l) != LDS_OK) {
            a->failures++;
            continue;
        }
        memcpy(l.ptr, &l.handle, sizeof l.handle);
        memcpy((char *)l.ptr + l.length - sizeof l.handle, &l.handle, sizeof l.handle);
        if (!handoff_give(a->out, &l))
            a->failures += handoff_check_return(a->pool, &l); /* full: return it here */
        if (handoff_take(a->in, &l))
            a->failures += handoff_check_return(a->pool, &l);
    }
    return NULL;
}

static void test_cross_thread_handoff(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    handoff_q q[HANDOFF_THREADS];
    handoff_arg args[HANDOFF_THREADS];
    pthread_t t[HANDOFF_THREADS];
    for (int i = 0; i < HANDOFF_THREADS; i++) {
        memset(&q[i], 0, sizeof q[i]);
        pthread_mutex_init(&q[i].lock, NULL);
    }
    for (int i = 0; i < HANDOFF_THREADS; i++) {
        args[i] = (handoff_arg){pool, &q[i], &q[(i + 1) % HANDOFF_THREADS], 777u + (unsigned)i, 0};
        assert_int_equal(pthread_create(&t[i], NULL, handoff_thread, &args[i]), 0);
    }
    for (int i = 0; i < HANDOFF_THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(args[i].failures, 0);
    }
    lds_lease l; /* what the threads left in the queues, returned here */
    for (int i = 0; i < HANDOFF_THREADS; i++)
        while (handoff_take(&q[i], &l))
            assert_int_equal(handoff_check_return(pool, &l), 0);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.rents, (uint64_t)HANDOFF_THREADS * HANDOFF_OPS);
    assert_int_equal(s.returns, s.rents);
    assert_int_equal(s.leases_current, 0);
    assert_int_equal(s.bytes_leased, 0);
    assert_int_equal(s.refused_total, 0);
    for (int i = 0; i < HANDOFF_THREADS; i++)
        pthread_mutex_destroy(&q[i].lock);
    lds_pool_free(pool);
}

/* A thread's cache goes back to the pool when the thread exits. */
static void *exit_thread(void *arg)
{
    lds_pool *pool = arg;
    lds_lease l[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(lds_pool_rent(pool, 4096, &l[i]), LDS_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(lds_pool_return(pool, &l[i], 0), LDS_OK);
    return NULL;
}

static void test_thread_exit_flushes(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, exit_thread, pool), 0);
    pthread_join(t, NULL);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.rents, 4);
    assert_int_equal(s.returns, 4);
    assert_int_equal(s.buffers_retained, 4);
    assert_int_equal(s.bytes_retained, 4 * 4096);
    /* they are now in the shared stacks: this thread gets them without allocating */
    lds_lease l;
    assert_int_equal(lds_pool_rent(pool, 4096, &l), LDS_OK);
    assert_int_equal(stats_of(pool).hits_shared, 1);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    size_t freed = 0;
    assert_int_equal(lds_pool_trim(pool, LDS_POOL_TRIM_ALL, &freed), LDS_OK);
    assert_int_equal(freed, 4 * 4096);
    assert_int_equal(stats_of(pool).bytes_retained, 0);
    lds_pool_free(pool);
}

static void *shared_thread(void *arg)
{
    lds_pool **out = arg;
    *out = lds_pool_shared();
    lds_lease l;
    if (lds_pool_rent(*out, 333, &l) != LDS_OK || lds_pool_return(NULL, &l, 0) != LDS_OK)
        *out = NULL;
    return NULL;
}

static void test_shared_pool_once(void **state)
{
    (void)state;
    pthread_t t[8];
    lds_pool *got[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&t[i], NULL, shared_thread, &got[i]), 0);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 8; i++) {
        assert_non_null(got[i]);
        assert_ptr_equal(got[i], lds_pool_shared());
    }
    lds_pool_free(lds_pool_shared()); /* ignored for the shared pool */
    assert_consistent(lds_pool_shared());
}

/* fork() while other threads are inside the pool: the child (only the forking thread
 * survives) must be able to use the shared pool and a private pool at once, and the dead
 * threads' cached buffers must come back (trim leaves nothing retained). */
#define FORK_ROUNDS     50
#define FORK_TIMEOUT_MS 10000

typedef struct fork_ctx {
    lds_pool *pool; /* NULL: the shared pool */
    _Atomic int *stop;
    unsigned seed;
} fork_ctx;

static void *fork_hammer(void *arg)
{
    fork_ctx *c = arg;
    uint32_t x = c->seed;
    while (!atomic_load(c->stop)) {
        x = x * 1664525u + 1013904223u;
        size_t n = (x >> 12) & 0x3fffu;
        if ((x & 0x3fu) == 0)
            n = 2 * MiB + 1; /* mapped: munmap and mmap on the slow paths */
        lds_lease l;
        if (lds_pool_rent(c->pool, n, &l) == LDS_OK)
            lds_pool_return(c->pool, &l, 0);
    }
    return NULL;
}

static void *fork_trimmer(void *arg)
{
    fork_ctx *c = arg;
    while (!atomic_load(c->stop)) {
        lds_pool_trim(NULL, LDS_POOL_TRIM_ALL, NULL);
        lds_pool_trim(c->pool, LDS_POOL_TRIM_ALL, NULL);
        lds_pool_stats s;
        lds_pool_stats_init(&s);
        lds_pool_get_stats(c->pool, &s);
    }
    return NULL;
}

/* The child's work; no cmocka here (its state belongs to the parent). 0 = all well. */
static int fork_child(lds_pool *priv)
{
    lds_pool *pools[2] = {NULL, priv};
    for (int i = 0; i < 2; i++) {
        size_t sizes[3] = {100, 4096, 3 * MiB};
        for (int k = 0; k < 3; k++) {
            lds_lease l;
            if (lds_pool_rent(pools[i], sizes[k], &l) != LDS_OK)
                return 1;
            memset(l.ptr, 0x5a, l.length);
            if (lds_pool_return(pools[i], &l, 0) != LDS_OK)
                return 2;
        }
        if (lds_pool_trim(pools[i], LDS_POOL_TRIM_ALL, NULL) != LDS_OK)
            return 3;
        lds_pool_stats s;
        lds_pool_stats_init(&s);
        if (lds_pool_get_stats(pools[i], &s) != LDS_OK)
            return 4;
        if (s.buffers_retained != 0 || s.bytes_retained != 0)
            return 5; /* a dead thread's cache still holds buffers nobody can reach */
    }
    lds_pool *fresh = NULL;
    lds_lease l;
    if (lds_pool_create(NULL, &fresh) != LDS_OK || lds_pool_rent(fresh, 64, &l) != LDS_OK ||
        lds_pool_return(fresh, &l, 0) != LDS_OK)
        return 6;
    lds_pool_free(fresh);
    return 0;
}

/* Waits for `pid` up to FORK_TIMEOUT_MS; its exit status, or -1 if it hung (killed). */
static int wait_child(pid_t pid)
{
    for (int ms = 0; ms < FORK_TIMEOUT_MS; ms++) {
        int st = 0;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        struct timespec d = {0, 1000000};
        nanosleep(&d, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static void test_fork_while_threads_use_pools(void **state)
{
    (void)state;
    /* ThreadSanitizer's deadlock detector holds at most 64 locks per thread (a CHECK in
     * sanitizer_deadlock_detector.h, then a hang), and the fork handler holds every lock of
     * every pool (2 x 163 here). With TSAN_OPTIONS=detect_deadlocks=0 it passes, no race
     * reported; in the tsan suite (LDS_SANITIZE=thread) it is skipped unless that is set. */
    const char *san = getenv("LDS_SANITIZE"), *tsan = getenv("TSAN_OPTIONS");
    if (san && strstr(san, "thread") && !(tsan && strstr(tsan, "detect_deadlocks=0")))
        skip();
    /* AddressSanitizer before LLVM 18 installs no fork handler for its own allocator
     * (llvm-project pull 75290 added it): a child forked while another thread is inside
     * malloc can wait forever on that lock, ours uninvolved. One child of 50 hung 10 s so
     * in a CI run under clang 14; the plain builds run this test in 'pool' and 'pool-stress'. */
    if (san && strstr(san, "address"))
        skip();
    lds_pool *priv = make_pool(LDS_POOL_CHECK_OFF, 0);
    _Atomic int stop = 0;
    fork_ctx ctx[5] = {
        {NULL, &stop, 1}, {NULL, &stop, 2}, {priv, &stop, 3}, {priv, &stop, 4}, {priv, &stop, 5}};
    pthread_t t[5];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, fork_hammer, &ctx[i]), 0);
    assert_int_equal(pthread_create(&t[4], NULL, fork_trimmer, &ctx[4]), 0);
    int hung = 0, failed = 0;
    for (int r = 0; r < FORK_ROUNDS; r++) {
        struct timespec d = {0, 2000000};
        nanosleep(&d, NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            _exit(fork_child(priv));
        int st = wait_child(pid);
        if (st == -1)
            hung++;
        else if (st != 0) {
            fprintf(stderr, "fork round %d: child exited %d\n", r, st);
            failed++;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 5; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(hung, 0);
    assert_int_equal(failed, 0);
    assert_consistent(priv);
    lds_pool_free(priv);
}

#ifndef LDS_POOL_TSAN_ONLY

/* ==== single-threaded tests ============================================== */

static int overlap(const lds_lease *a, const lds_lease *b)
{
    const char *a0 = a->ptr, *b0 = b->ptr;
    return a0 < b0 + b->capacity && b0 < a0 + a->capacity;
}

/* A late writer the sanitizer does not instrument, like a kernel read() or a library built
 * without ASan: it lets the pool's own checks (canary, guard) be tested under ASan too. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((no_sanitize_address, noinline))
#endif
static void
late_write(void *p, char v)
{
    *(volatile char *)p = v;
}

static void test_class_capacity(void **state)
{
    (void)state;
    assert_int_equal(lds_pool_class_capacity(0), 64);
    assert_int_equal(lds_pool_class_capacity(64), 64);
    assert_int_equal(lds_pool_class_capacity(65), 80);
    assert_int_equal(lds_pool_class_capacity(80), 80);
    assert_int_equal(lds_pool_class_capacity(81), 96);
    assert_int_equal(lds_pool_class_capacity(129), 160);
    assert_int_equal(lds_pool_class_capacity(1000), 1024);
    assert_int_equal(lds_pool_class_capacity(MiB), MiB);
    assert_int_equal(lds_pool_class_capacity(MiB + 1), MiB + MiB / 4);
    assert_int_equal(lds_pool_class_capacity(20589008), 20971520);
    assert_int_equal(lds_pool_class_capacity(LDS_POOL_MAX_REQUEST), LDS_POOL_MAX_REQUEST);
    assert_int_equal(lds_pool_class_capacity(LDS_POOL_MAX_REQUEST + 1), 0);
    /* waste <= 25% of the request, everywhere from the minimum class up */
    uint32_t x = 1;
    for (int i = 0; i < 200000; i++) {
        x = x * 1664525u + 1013904223u;
        size_t n = 64 + ((size_t)x << (i % 20)) % ((size_t)1 << 40);
        size_t c = lds_pool_class_capacity(n);
        assert_true(c >= n);
        assert_true((c - n) * 4 <= n);
    }
    for (size_t n = 64; n < 70000; n++) {
        size_t c = lds_pool_class_capacity(n);
        assert_true(c >= n && (c - n) * 4 <= n);
        assert_int_equal(c % 16, 0);
    }
}

static void test_rent_basics(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    size_t sizes[] = {0, 1, 63, 100, 4096, 100000, MiB, 3 * MiB + 5};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        lds_lease l;
        assert_int_equal(lds_pool_rent(pool, sizes[i], &l), LDS_OK);
        assert_non_null(l.ptr);
        assert_int_equal((uintptr_t)l.ptr % 64, 0);
        assert_int_equal(l.length, sizes[i]);
        assert_int_equal(l.capacity, lds_pool_class_capacity(sizes[i]));
        assert_true(l.handle != 0);
        if (sizes[i] >= MiB) /* mapped: page + LDS_POOL_MAP_OFFSET */
            assert_int_equal((uintptr_t)l.ptr % 4096, LDS_POOL_MAP_OFFSET);
        memset(l.ptr, 0x11, l.capacity);
        assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
        assert_null(l.ptr);
        assert_int_equal(l.handle, 0);
    }
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.rents, 8);
    assert_int_equal(s.returns, 8);
    assert_int_equal(s.misses_cold, 6); /* 0, 1 and 63 share class 64 */
    assert_int_equal(s.hits_thread, 2);
    assert_int_equal(s.bytes_requested_total, 0 + 1 + 63 + 100 + 4096 + 100000 + MiB + 3 * MiB + 5);
    lds_lease l;
    assert_int_equal(lds_pool_rent(pool, LDS_POOL_MAX_REQUEST + 1, &l), LDS_E_LIMIT);
    assert_null(l.ptr);
    assert_int_equal(lds_pool_rent(pool, 1, NULL), LDS_E_INVALID_ARG);
    assert_int_equal(lds_pool_return(pool, NULL, 0), LDS_E_INVALID_ARG);
    assert_int_equal(lds_pool_rent(pool, 10, &l), LDS_OK);
    assert_int_equal(lds_pool_return(pool, &l, 4u), LDS_E_INVALID_ARG);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    lds_pool_options bad;
    lds_pool_options_default(&bad);
    bad.fill_on_rent = 256;
    lds_pool *p2 = NULL;
    assert_int_equal(lds_pool_create(&bad, &p2), LDS_E_INVALID_ARG);
    assert_null(p2);
    lds_pool_free(pool);
    lds_pool_free(NULL);
}

static void test_double_return_then_two_rents(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    lds_lease a, copy;
    assert_int_equal(lds_pool_rent(pool, 1000, &a), LDS_OK);
    copy = a;
    assert_int_equal(lds_pool_return(pool, &a, 0), LDS_OK);
    assert_int_equal(lds_pool_return(pool, &copy, 0), LDS_E_POOL_REFUSED);
    assert_int_equal(lds_pool_return(pool, &a, 0), LDS_E_POOL_REFUSED); /* zeroed lease */
    lds_lease x, y;
    assert_int_equal(lds_pool_rent(pool, 1000, &x), LDS_OK);
    assert_int_equal(lds_pool_rent(pool, 1000, &y), LDS_OK);
    assert_ptr_not_equal(x.ptr, y.ptr);
    assert_false(overlap(&x, &y));
    /* the stale copy stays refused although its buffer is leased again */
    assert_int_equal(lds_pool_return(pool, &copy, 0), LDS_E_POOL_REFUSED);
    assert_int_equal(stats_of(pool).refused[LDS_POOL_REFUSED_STALE], 3);
    assert_int_equal(lds_pool_return(pool, &x, 0), LDS_OK);
    assert_int_equal(lds_pool_return(pool, &y, 0), LDS_OK);
    assert_consistent(pool);
    lds_pool_free(pool);
}

static void test_triple_return_four_rents(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    lds_lease a;
    assert_int_equal(lds_pool_rent(pool, 5000, &a), LDS_OK);
    lds_lease c1 = a, c2 = a;
    assert_int_equal(lds_pool_return(pool, &a, 0), LDS_OK);
    assert_int_equal(lds_pool_return(pool, &c1, 0), LDS_E_POOL_REFUSED);
    assert_int_equal(lds_pool_return(pool, &c2, 0), LDS_E_POOL_REFUSED);
    lds_lease r[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(lds_pool_rent(pool, 5000, &r[i]), LDS_OK);
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            assert_false(overlap(&r[i], &r[j]));
    for (int i = 0; i < 4; i++)
        assert_int_equal(lds_pool_return(pool, &r[i], 0), LDS_OK);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.refused_total, 2);
    assert_int_equal(s.returns, 5);
    assert_consistent(pool);
    lds_pool_free(pool);
}

static void test_foreign_and_forged_returns(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    _Alignas(64) static char mine[4096];
    /* handles are generation * LDS__POOL_GEN_STEP + slot index (pool_internal.h) */
    lds_lease foreign = {mine, 100, 112, LDS__POOL_GEN_STEP | 0};
    assert_int_equal(lds_pool_return(pool, &foreign, 0), LDS_E_POOL_REFUSED);
    foreign.handle = 3 * LDS__POOL_GEN_STEP | 999999u;
    assert_int_equal(lds_pool_return(pool, &foreign, 0), LDS_E_POOL_REFUSED);

    lds_lease good;
    assert_int_equal(lds_pool_rent(pool, 100, &good), LDS_OK);
    lds_lease f = good;
    f.ptr = mine;
    assert_int_equal(lds_pool_return(pool, &f, 0), LDS_E_POOL_REFUSED);
    f = good;
    f.ptr = (char *)good.ptr + 64;
    assert_int_equal(lds_pool_return(pool, &f, 0), LDS_E_POOL_REFUSED);
    f = good;
    f.length = 50;
    assert_int_equal(lds_pool_return(pool, &f, 0), LDS_E_POOL_REFUSED);
    f = good;
    f.capacity = 4096;
    assert_int_equal(lds_pool_return(pool, &f, 0), LDS_E_POOL_REFUSED);
    f = good;
    f.handle += 2 * LDS__POOL_GEN_STEP; /* a future generation */
    assert_int_equal(lds_pool_return(pool, &f, 0), LDS_E_POOL_REFUSED);
    f = good;
    f.handle += LDS__POOL_GEN_STEP; /* an even generation never names a lease */
    assert_int_equal(lds_pool_return(pool, &f, 0), LDS_E_POOL_REFUSED);
    f = good;
    f.handle |= LDS__POOL_RETIRED; /* the retired bit never names a lease */
    assert_int_equal(lds_pool_return(pool, &f, 0), LDS_E_POOL_REFUSED);
    f = good;
    f.handle ^= (uint64_t)5 << LDS__POOL_IDX_BITS; /* the live generation, other class bits */
    assert_int_equal(lds_pool_return(pool, &f, 0), LDS_E_POOL_REFUSED);

    lds_pool_stats s = stats_of(pool);
    /* never issued: the future generation too (a slot's generation only grows) */
    assert_int_equal(s.refused[LDS_POOL_REFUSED_UNKNOWN], 6);
    assert_int_equal(s.refused[LDS_POOL_REFUSED_POINTER], 2);
    assert_int_equal(s.refused[LDS_POOL_REFUSED_SIZE], 2);
    assert_int_equal(s.refused[LDS_POOL_REFUSED_STALE], 0);
    assert_int_equal(s.refused_total, 10);
    assert_int_equal(s.returns, 0);
    assert_int_equal(s.leases_current, 1);
    /* nothing was passed on: the real lease still returns, and the caller's memory never
     * comes out of the pool */
    assert_int_equal(lds_pool_return(pool, &good, 0), LDS_OK);
    for (int i = 0; i < 4; i++) {
        lds_lease l;
        assert_int_equal(lds_pool_rent(pool, 100, &l), LDS_OK);
        assert_ptr_not_equal(l.ptr, mine);
        assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    }
    assert_consistent(pool);
    lds_pool_free(pool);
}

/* A slot driven over the old 32-bit wrap point (the test hook sets its generation near
 * 2^32): the handle of its first lease, long returned, must stay refused when the slot's
 * generation passes 2^32, and the live lease of that slot must still return. */
static void test_stale_handle_across_old_wrap(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    lds_lease a, b, c;
    assert_int_equal(lds_pool_rent(pool, 1000, &a), LDS_OK);
    lds_lease stale_a = a;
    assert_int_equal(lds_pool_return(pool, &a, 0), LDS_OK);
    assert_int_equal(lds__pool_test_set_generation(pool, stale_a.handle, (UINT64_C(1) << 32) - 2),
                     LDS_OK);
    assert_int_equal(lds_pool_rent(pool, 1000, &b), LDS_OK);
    assert_ptr_equal(b.ptr, stale_a.ptr); /* the same slot, served by the thread cache */
    lds_lease stale_b = b;
    assert_int_equal(lds_pool_return(pool, &b, 0), LDS_OK);
    assert_int_equal(lds_pool_rent(pool, 1000, &c), LDS_OK);
    assert_ptr_equal(c.ptr, stale_a.ptr);
    assert_true(c.handle != stale_a.handle);
    assert_int_equal(lds_pool_return(pool, &stale_a, 0), LDS_E_POOL_REFUSED);
    assert_int_equal(lds_pool_return(pool, &stale_b, 0), LDS_E_POOL_REFUSED);
    assert_int_equal(lds_pool_return(pool, &c, 0), LDS_OK);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.refused[LDS_POOL_REFUSED_STALE], 2);
    assert_int_equal(s.returns, 3);
    assert_consistent(pool);
    lds_pool_free(pool);
}

/* A stale lease of one pool given to another (seed: a reviewer's repro, session 4): pool
 * A frees the buffer (TRIM_ALL), pool B, made alike, maps the same address into the slot of
 * the same index. When every pool's slots started at generation 0 the handle matched B's
 * live lease and B took it back: its next rent handed the still-leased buffer out again.
 * Now each pool's generations start elsewhere (docs/adr/0027), and the return is refused. */
static void test_lease_of_other_pool_refused(void **state)
{
    (void)state;
    for (int round = 0; round < 2; round++) {
        lds_pool *a = make_pool(LDS_POOL_CHECK_OFF, 0), *b = make_pool(LDS_POOL_CHECK_OFF, 0);
        lds_lease ka, kb, x, y, z;
        assert_int_equal(lds_pool_rent(a, 5000, &ka), LDS_OK); /* slot 0 of each */
        assert_int_equal(lds_pool_rent(b, 5000, &kb), LDS_OK);
        assert_int_equal(ka.handle & LDS__POOL_IDX_MASK, kb.handle & LDS__POOL_IDX_MASK);
        /* the two pools' first generations differ, and by a wide margin */
        uint64_t ga = ka.handle >> LDS__POOL_GEN_SHIFT, gb = kb.handle >> LDS__POOL_GEN_SHIFT;
        assert_true((ga > gb ? ga - gb : gb - ga) > (UINT64_C(1) << 20));
        assert_int_equal(ga & 1, 1);
        size_t big = round ? (size_t)2 << 20 : 5000;
        assert_int_equal(lds_pool_rent(a, big, &x), LDS_OK);
        lds_lease stale = x;
        assert_int_equal(lds_pool_return(a, &x, 0), LDS_OK);
        assert_int_equal(lds_pool_trim(a, LDS_POOL_TRIM_ALL, NULL), LDS_OK);
        assert_int_equal(lds_pool_rent(b, big, &y), LDS_OK);
        assert_int_equal(stale.handle & LDS__POOL_IDX_MASK, y.handle & LDS__POOL_IDX_MASK);
        assert_true(stale.handle != y.handle);
        lds_lease copy = stale;
        assert_int_equal(lds_pool_return(b, &stale, 0), LDS_E_POOL_REFUSED);
        assert_memory_equal(&stale, &copy, sizeof copy); /* left as it was */
        /* B's lease is still B's: its next rent is another buffer, its return works */
        assert_int_equal(lds_pool_rent(b, big, &z), LDS_OK);
        assert_ptr_not_equal(z.ptr, y.ptr);
        assert_int_equal(lds_pool_return(b, &y, 0), LDS_OK);
        assert_int_equal(lds_pool_return(b, &z, 0), LDS_OK);
        assert_int_equal(lds_pool_return(a, &ka, 0), LDS_OK);
        assert_int_equal(lds_pool_return(b, &kb, 0), LDS_OK);
        lds_pool_stats sb = stats_of(b);
        assert_int_equal(sb.refused_total, 1);
        assert_int_equal(sb.rents, 3);
        assert_int_equal(sb.returns, 3);
        assert_int_equal(sb.leases_current, 0);
        assert_consistent(a);
        assert_consistent(b);
        lds_pool_free(a);
        lds_pool_free(b);
    }
}

/* A slot at the end of its generations retires at the return that spends the last one
 * (through the warm return, through the full one, LDS_RETURN_CLEAR, and through the inline
 * pair of bench/pool_inline.h, which hands that return to the call): its buffer is
 * freed, the slot never serves again, and every handle it gave stays refused. */
static void test_slot_retires_before_generation_wraps(void **state)
{
    (void)state;
    for (int way = 0; way < 3; way++) {
        int full = way == 1, inl = way == 2;
        lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
        lds_lease a, b, c;
        assert_int_equal(lds_pool_rent(pool, 1000, &a), LDS_OK);
        lds_lease stale_a = a;
        assert_int_equal(lds_pool_return(pool, &a, 0), LDS_OK);
        /* not while leased, never odd, never at or past the retirement point */
        assert_int_equal(lds__pool_test_set_generation(pool, stale_a.handle, 3), LDS_E_INVALID_ARG);
        assert_int_equal(lds__pool_test_set_generation(pool, stale_a.handle, LDS__POOL_GEN_RETIRE),
                         LDS_E_INVALID_ARG);
        assert_int_equal(
            lds__pool_test_set_generation(pool, stale_a.handle, LDS__POOL_GEN_RETIRE - 2), LDS_OK);
        assert_int_equal(inl ? lds_pool_rent_inline(pool, 1000, &b) : lds_pool_rent(pool, 1000, &b),
                         LDS_OK);
        assert_ptr_equal(b.ptr, stale_a.ptr);
        assert_int_equal(b.handle >> LDS__POOL_GEN_SHIFT, LDS__POOL_GEN_RETIRE - 1);
        assert_int_equal(lds__pool_test_set_generation(pool, b.handle, 2), LDS_E_INVALID_ARG);
        lds_lease stale_b = b;
        lds_pool_stats s0 = stats_of(pool);
        assert_int_equal(s0.slots_retired, 0);
        assert_int_equal(inl ? lds_pool_return_inline(pool, &b, 0)
                             : lds_pool_return(pool, &b, full ? LDS_RETURN_CLEAR : 0),
                         LDS_OK);
        assert_int_equal(b.handle, 0);
        lds_pool_stats s1 = stats_of(pool);
        assert_int_equal(s1.slots_retired, 1);
        assert_int_equal(s1.buffers_retained, 0); /* the buffer went with its slot */
        assert_int_equal(s1.returns, 2);
        /* the retired slot cannot be set back either */
        assert_int_equal(lds__pool_test_set_generation(pool, stale_b.handle, 2), LDS_E_INVALID_ARG);
        /* the next rent of the class is a fresh buffer in another slot */
        assert_int_equal(lds_pool_rent(pool, 1000, &c), LDS_OK);
        assert_true((c.handle & LDS__POOL_IDX_MASK) != (stale_b.handle & LDS__POOL_IDX_MASK));
        /* a fresh slot's first lease: the pool's starting generation + 1, as a's was */
        assert_int_equal(c.handle >> LDS__POOL_GEN_SHIFT, stale_a.handle >> LDS__POOL_GEN_SHIFT);
        assert_int_equal(stats_of(pool).misses_exhausted + stats_of(pool).misses_cold, 2);
        assert_int_equal(lds_pool_return(pool, &stale_a, 0), LDS_E_POOL_REFUSED);
        assert_int_equal(lds_pool_return(pool, &stale_b, 0), LDS_E_POOL_REFUSED);
        assert_int_equal(lds_pool_return(pool, &c, 0), LDS_OK);
        /* the slot is out for good: many more cycles never reach it */
        for (int i = 0; i < 100; i++) {
            lds_lease l;
            assert_int_equal(lds_pool_rent(pool, 1000 + (size_t)(i % 3) * 4096, &l), LDS_OK);
            assert_true((l.handle & LDS__POOL_IDX_MASK) != (stale_b.handle & LDS__POOL_IDX_MASK));
            assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
        }
        lds_pool_stats s2 = stats_of(pool);
        assert_int_equal(s2.refused[LDS_POOL_REFUSED_STALE], 2);
        assert_int_equal(s2.slots_retired, 1);
        assert_consistent(pool);
        lds_pool_free(pool);
    }
}

/* A caller that reads by capacity instead of length sees the poison. */
static void test_poison_past_length(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_POISON, 0);
    for (int round = 0; round < 2; round++) { /* fresh, then reused */
        lds_lease l;
        assert_int_equal(lds_pool_rent(pool, 100, &l), LDS_OK);
        assert_int_equal(l.capacity, 112);
        unsigned char *p = l.ptr;
        memset(p, 'x', l.length);
#ifdef TEST_ASAN
        assert_false(__asan_address_is_poisoned(p + 99));
        for (size_t i = l.length; i < l.capacity; i++)
            assert_true(__asan_address_is_poisoned(p + i));
#else
        for (size_t i = l.length; i < l.capacity; i++)
            assert_int_equal(p[i], LDS_POOL_POISON_BYTE);
#endif
        assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
#ifdef TEST_ASAN
        assert_true(__asan_address_is_poisoned(p));
#else
        assert_int_equal(p[0], LDS_POOL_FREED_BYTE); /* still cached: readable */
#endif
    }
    lds_pool_free(pool);
}

static void test_fill_on_rent_and_clear(void **state)
{
    (void)state;
    lds_pool_options o;
    lds_pool_options_default(&o);
    o.check = LDS_POOL_CHECK_OFF;
    o.fill_on_rent = 0x5A;
    lds_pool *pool = NULL;
    assert_int_equal(lds_pool_create(&o, &pool), LDS_OK);
    lds_lease l;
    assert_int_equal(lds_pool_rent(pool, 3000, &l), LDS_OK);
    for (size_t i = 0; i < l.length; i++)
        assert_int_equal(((unsigned char *)l.ptr)[i], 0x5A);
    memset(l.ptr, 0x77, l.length);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    assert_int_equal(lds_pool_rent(pool, 3000, &l), LDS_OK);
    assert_int_equal(((unsigned char *)l.ptr)[0], 0x5A);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    lds_pool_free(pool);

    /* LDS_RETURN_CLEAR: the same buffer comes back zeroed */
    pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    assert_int_equal(lds_pool_rent(pool, 3000, &l), LDS_OK);
    void *first = l.ptr;
    memset(l.ptr, 0xFF, l.length);
    assert_int_equal(lds_pool_return(pool, &l, LDS_RETURN_CLEAR), LDS_OK);
    assert_int_equal(lds_pool_rent(pool, 3000, &l), LDS_OK);
    assert_ptr_equal(l.ptr, first);
    for (size_t i = 0; i < l.length; i++)
        assert_int_equal(((unsigned char *)l.ptr)[i], 0);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    lds_pool_free(pool);
}

static void test_canary_catches_write_after_return(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_CANARY, 0);
    size_t sizes[] = {256, 2 * MiB};
    for (int i = 0; i < 2; i++) {
        /* no false alarm without a late write */
        lds_lease l;
        assert_int_equal(lds_pool_rent(pool, sizes[i], &l), LDS_OK);
        memset(l.ptr, 1, l.length);
        assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
        assert_int_equal(lds_pool_rent(pool, sizes[i], &l), LDS_OK);
        assert_int_equal(stats_of(pool).canary_failures, (uint64_t)i);
        char *old = l.ptr;
        assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
        late_write(old + (i == 0 ? 8 : 3 * 4096 + 16), 0x42);
        lds_pool_stats before = stats_of(pool);
        lds_lease next;
        assert_int_equal(lds_pool_rent(pool, sizes[i], &next), LDS_OK);
        lds_pool_stats after = stats_of(pool);
        assert_int_equal(after.canary_failures, (uint64_t)i + 1);
        /* the damaged buffer was discarded (freed), and the rent served by a new one */
        assert_int_equal(after.drops, before.drops + 1);
        assert_int_equal(after.misses_cold, before.misses_cold + 1);
        assert_int_equal(after.bytes_retained, before.bytes_retained - next.capacity);
        /* one rent, one hit or miss: the discarded buffer's shared hit is taken back */
        assert_int_equal(after.rents, before.rents + 1);
        assert_int_equal(after.hits_thread + after.hits_shared + after.misses_cold +
                             after.misses_exhausted + after.misses_oversize,
                         after.rents);
        assert_int_equal(lds_pool_return(pool, &next, 0), LDS_OK);
    }
    assert_consistent(pool);
    lds_pool_free(pool);
}

static void test_guard_faults_at_write(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_GUARD, 0);
    lds_lease l;
    assert_int_equal(lds_pool_rent(pool, 1000, &l), LDS_OK);
    memset(l.ptr, 3, l.length);
    char *old = l.ptr;
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL); /* cmocka catches it otherwise */
        late_write(old, 1);
        _exit(0); /* reached only if the write did not fault */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
#ifdef TEST_ASAN
    /* ASan's own SEGV handler reports the fault and exits with an error instead. */
    assert_true((WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) ||
                (WIFEXITED(status) && WEXITSTATUS(status) != 0));
#else
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGSEGV);
#endif
    /* quarantined: the next rent gets another buffer */
    assert_int_equal(lds_pool_rent(pool, 1000, &l), LDS_OK);
    assert_ptr_not_equal(l.ptr, old);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.buffers_retained, 2);
    size_t freed = 0;
    assert_int_equal(lds_pool_trim(pool, LDS_POOL_TRIM_ALL, &freed), LDS_OK);
    assert_int_equal(freed, 2 * 1024);
    lds_pool_free(pool);
}

/* 1 when a write at `p` from a forked child faults (SIGSEGV, or ASan's report of it). */
static int write_faults(void *p)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL); /* cmocka catches it otherwise */
        late_write(p, 1);
        _exit(0); /* reached only if the write did not fault */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        return WTERMSIG(status) == SIGSEGV;
#ifdef TEST_ASAN
    return WIFEXITED(status) && WEXITSTATUS(status) != 0;
#else
    return 0;
#endif
}

/* Standard error, captured between stderr_begin and stderr_end into `buf`. */
typedef struct captured {
    FILE *tmp;
    int saved;
} captured;

static captured stderr_begin(void)
{
    fflush(stderr);
    captured c = {tmpfile(), dup(2)};
    assert_non_null(c.tmp);
    assert_true(c.saved >= 0);
    assert_true(dup2(fileno(c.tmp), 2) == 2);
    return c;
}

static void stderr_end(captured c, char *buf, size_t cap)
{
    fflush(stderr);
    assert_true(dup2(c.saved, 2) == 2);
    close(c.saved);
    rewind(c.tmp);
    size_t n = fread(buf, 1, cap - 1, c.tmp);
    buf[n] = '\0';
    fclose(c.tmp);
}

/* Guard mode when mprotect(PROT_NONE) fails at a return (injected ENOMEM, as at
 * vm.max_map_count): the return succeeds, the buffer is unmapped instead of sitting
 * unprotected in the quarantine (a late write still faults), the failure is counted and
 * reported once per pool on stderr, naming the call and the errno. */
static void test_guard_protect_failure_is_loud(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_GUARD, 0);
    lds_lease l;
    assert_int_equal(lds_pool_rent(pool, 1000, &l), LDS_OK);
    char *old = l.ptr;
    assert_true(stats_of(pool).bytes_mapped > 0);
    char msg[1024];
    lds__os_test_fail(LDS__OS_PROTECT_NONE, ENOMEM, 0, 1);
    captured c = stderr_begin();
    lds_status st = lds_pool_return(pool, &l, 0);
    stderr_end(c, msg, sizeof msg);
    assert_int_equal(st, LDS_OK);
    assert_non_null(strstr(msg, "mprotect(PROT_NONE)"));
    assert_non_null(strstr(msg, "ENOMEM (errno 12)"));
    assert_non_null(strstr(msg, "unmaps the returned buffer"));
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.guard_failures, 1);
    assert_int_equal(s.buffers_retained, 0); /* not in the quarantine, unprotected */
    assert_int_equal(s.bytes_mapped, 0);     /* unmapped instead */
    assert_int_equal(s.returns, 1);
    assert_true(write_faults(old));

    /* the pool goes on guarding; a second failure is counted, not printed again */
    assert_int_equal(lds_pool_rent(pool, 1000, &l), LDS_OK);
    old = l.ptr;
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    assert_true(write_faults(old));
    assert_int_equal(stats_of(pool).buffers_retained, 1);
    assert_int_equal(lds_pool_rent(pool, 1000, &l), LDS_OK);
    lds__os_test_fail(LDS__OS_PROTECT_NONE, EACCES, 0, 1);
    c = stderr_begin();
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    stderr_end(c, msg, sizeof msg);
    assert_string_equal(msg, "");
    s = stats_of(pool);
    assert_int_equal(s.guard_failures, 2);
    assert_int_equal(s.buffers_retained, 1);

    /* mprotect and munmap both refused: the buffer waits in the quarantine (counted and
     * kept, never lost), and leaves it through the normal path */
    assert_int_equal(lds_pool_rent(pool, 1000, &l), LDS_OK);
    lds__os_test_fail(LDS__OS_PROTECT_NONE, ENOMEM, 0, 1);
    lds__os_test_fail(LDS__OS_UNMAP, ENOMEM, 0, 1);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    s = stats_of(pool);
    assert_int_equal(s.guard_failures, 3);
    assert_int_equal(s.buffers_retained, 2);
    size_t freed = 0;
    assert_int_equal(lds_pool_trim(pool, LDS_POOL_TRIM_ALL, &freed), LDS_OK);
    assert_int_equal(freed, 2 * 1024);
    assert_int_equal(stats_of(pool).bytes_mapped, 0);
    assert_consistent(pool);
    lds_pool_free(pool);
}

/* Guard mode when a buffer cannot be made accessible again as it leaves the quarantine:
 * it is unmapped, never handed out (a rent would fault on it), and the failure is counted
 * and reported. */
static void test_guard_unprotect_failure_is_loud(void **state)
{
    (void)state;
    lds_pool_options o;
    lds_pool_options_default(&o);
    o.check = LDS_POOL_CHECK_GUARD;
    o.guard_quarantine = 1;
    lds_pool *pool = NULL;
    assert_int_equal(lds_pool_create(&o, &pool), LDS_OK);
    lds_lease a, b;
    assert_int_equal(lds_pool_rent(pool, 1000, &a), LDS_OK);
    assert_int_equal(lds_pool_rent(pool, 1000, &b), LDS_OK);
    assert_int_equal(lds_pool_return(pool, &a, 0), LDS_OK); /* a: quarantined */
    lds__os_test_fail(LDS__OS_PROTECT_RW, ENOMEM, 0, 1);
    char msg[1024];
    captured c = stderr_begin();
    assert_int_equal(lds_pool_return(pool, &b, 0), LDS_OK); /* b in, a out: not reusable */
    stderr_end(c, msg, sizeof msg);
    assert_non_null(strstr(msg, "mprotect(PROT_READ|PROT_WRITE)"));
    assert_non_null(strstr(msg, "ENOMEM"));
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.guard_failures, 1);
    assert_int_equal(s.buffers_retained, 1); /* b only */
    assert_int_equal(s.trims + s.drops, 0);
    /* the next rent maps a fresh buffer, writable */
    lds_lease l;
    assert_int_equal(lds_pool_rent(pool, 1000, &l), LDS_OK);
    memset(l.ptr, 7, l.length); /* [length, capacity) is ASan-poisoned in checked modes */
    assert_int_equal(stats_of(pool).misses_cold + stats_of(pool).misses_exhausted, 3);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    assert_consistent(pool);
    lds_pool_free(pool);

    /* a new guard mapping whose buffer cannot be made accessible: the rent fails */
    pool = make_pool(LDS_POOL_CHECK_GUARD, 0);
    lds__os_test_fail(LDS__OS_PROTECT_RW, ENOMEM, 0, 1);
    c = stderr_begin();
    lds_status st = lds_pool_rent(pool, 1000, &l);
    stderr_end(c, msg, sizeof msg);
    assert_int_equal(st, LDS_E_NOMEM);
    assert_null(l.ptr);
    assert_non_null(strstr(msg, "mprotect(PROT_READ|PROT_WRITE)"));
    assert_non_null(strstr(msg, "the rent fails with LDS_E_NOMEM"));
    s = stats_of(pool);
    assert_int_equal(s.guard_failures, 1);
    assert_int_equal(s.bytes_mapped, 0);
    assert_int_equal(s.rents, 0);
    /* a failed rent is no miss (it was counted as one): hits + misses == rents */
    assert_int_equal(s.misses_cold + s.misses_exhausted + s.misses_oversize, 0);
    assert_int_equal(lds_pool_rent(pool, 1000, &l), LDS_OK); /* the next one maps */
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    lds_pool_free(pool);
}

/* For real: in a forked child, fill the process's map count up to vm.max_map_count with
 * one-page mappings of alternating protection (which cannot merge). A rent that needs a
 * new mapping then fails with LDS_E_NOMEM, and returning guard-mode leases still protects
 * them (their mappings are fenced by PROT_NONE pages, so no mprotect needs a new map
 * entry): no guard failure, and a late write faults. The child reports by exit code. */
static void test_guard_at_max_map_count(void **state)
{
    (void)state;
    long limit = 0;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (!f || fscanf(f, "%ld", &limit) != 1 || limit <= 0 || limit > 1 << 20) {
        if (f)
            fclose(f);
        skip(); /* unreadable or too large to fill quickly */
    }
    fclose(f);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Nothing here may need a new mapping once the map count is full: no cmocka. */
        signal(SIGSEGV, SIG_DFL);
        lds_pool_options o;
        lds_pool_options_default(&o);
        o.check = LDS_POOL_CHECK_GUARD;
        lds_pool *pool = NULL;
        if (lds_pool_create(&o, &pool) != LDS_OK)
            _exit(10);
        lds_lease l[8], extra;
        for (int i = 0; i < 8; i++)
            if (lds_pool_rent(pool, 4000, &l[i]) != LDS_OK)
                _exit(11);
        long page = sysconf(_SC_PAGESIZE), n = 0;
        while (n < limit + 16 && mmap(NULL, (size_t)page, (n & 1) ? PROT_READ : PROT_NONE,
                                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED)
            n++;
        if (n >= limit + 16)
            _exit(12); /* never reached the limit */
        if (lds_pool_rent(pool, 4000, &extra) != LDS_E_NOMEM)
            _exit(13);
        char *late = l[4].ptr; /* a middle one: its neighbours are leases too */
        for (int i = 0; i < 8; i++)
            if (lds_pool_return(pool, &l[i], 0) != LDS_OK)
                _exit(14);
        lds_pool_stats s;
        lds_pool_stats_init(&s);
        lds_pool_get_stats(pool, &s);
        if (s.guard_failures != 0 || s.buffers_retained != 8)
            _exit(15);
        late_write(late, 1);
        _exit(16); /* the write did not fault */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV))
        print_error("child status %d (exit %d)\n", status,
                    WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
}

static void test_bypass_never_reuses(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_BYPASS, 0);
    for (int i = 0; i < 3; i++) {
        lds_lease l;
        assert_int_equal(lds_pool_rent(pool, 777, &l), LDS_OK);
        assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    }
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.hits_thread + s.hits_shared, 0);
    assert_int_equal(s.misses_oversize, 3);
    assert_int_equal(s.drops, 3);
    assert_int_equal(s.bytes_retained, 0);
    assert_int_equal(s.bytes_mapped, 0);
    lds_pool_free(pool);
}

static void test_env_selects_check_mode(void **state)
{
    (void)state;
    const char *names[] = {"off", "canary", "poison", "guard", "bypass"};
    for (int i = 0; i < 5; i++) {
        setenv(LDS_POOL_CHECK_ENV, names[i], 1);
        lds_pool_options o;
        lds_pool_options_default(&o);
        assert_int_equal(o.check, i);
    }
    setenv(LDS_POOL_CHECK_ENV, "nonsense", 1);
    lds_pool_options o;
    lds_pool_options_default(&o);
    assert_int_equal(o.check, LDS_POOL_CHECK_OFF);
    unsetenv(LDS_POOL_CHECK_ENV);
}

/* Runs lds_pool_options_default in a child with `var`=`value` and stderr captured into
 * `err`; returns the child's exit status: the `check` field (var LDS_POOL_CHECK_ENV) or the
 * `huge_pages` field (otherwise). */
static int env_probe(const char *var, const char *value, char *err, size_t cap)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        setenv(var, value, 1);
        lds_pool_options o;
        lds_pool_options_default(&o);
        _exit(strcmp(var, LDS_POOL_CHECK_ENV) == 0 ? (int)o.check : (int)o.huge_pages);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t k;
    while (n + 1 < cap && (k = read(fd[0], err + n, cap - 1 - n)) > 0)
        n += (size_t)k;
    err[n] = '\0';
    close(fd[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* Option values from the environment: any case; an unknown one warns (one line naming the
 * variable and the accepted values) and the default is used. */
static void test_env_values_case_and_warning(void **state)
{
    (void)state;
    char err[1024];
    assert_int_equal(env_probe(LDS_POOL_CHECK_ENV, "GUARD", err, sizeof err), LDS_POOL_CHECK_GUARD);
    assert_string_equal(err, "");
    assert_int_equal(env_probe(LDS_POOL_CHECK_ENV, "Canary", err, sizeof err),
                     LDS_POOL_CHECK_CANARY);
    assert_string_equal(err, "");
    assert_int_equal(env_probe(LDS_POOL_CHECK_ENV, "garbage", err, sizeof err), LDS_POOL_CHECK_OFF);
    assert_non_null(strstr(err, "LDS_POOL_CHECK"));
    assert_non_null(strstr(err, "garbage"));
    assert_non_null(strstr(err, "off, canary, poison, guard, bypass"));
    assert_non_null(strchr(err, '\n'));
    assert_int_equal(strchr(err, '\n')[1], '\0'); /* one line */
    assert_int_equal(env_probe(LDS_POOL_HUGE_PAGES_ENV, "ON", err, sizeof err),
                     LDS_POOL_HUGE_PAGES_ON);
    assert_string_equal(err, "");
    assert_int_equal(env_probe(LDS_POOL_HUGE_PAGES_ENV, "yes", err, sizeof err),
                     LDS_POOL_DEFAULT_HUGE_PAGES);
    assert_non_null(strstr(err, "LDS_POOL_HUGE_PAGES"));
    assert_non_null(strstr(err, "off, on"));
    assert_int_equal(strchr(err, '\n')[1], '\0');
}

/* Option struct sizes: from LDS_POOL_OPTIONS_SIZE_V1 to sizeof, nothing else; the
 * *_default functions accept NULL. */
static void test_options_size_rules(void **state)
{
    (void)state;
    lds_pool_options_default(NULL); /* a no-op, documented */
    lds_pool_options o;
    lds_pool_options_default(&o);
    assert_int_equal(o.size, sizeof o);
    lds_pool *pool = NULL;
    size_t bad[] = {0,
                    8,
                    16,
                    offsetof(lds_pool_options, max_retained_bytes),
                    LDS_POOL_OPTIONS_SIZE_V1 - 1,
                    sizeof o + 1,
                    sizeof o + 64};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.size = bad[i];
        assert_int_equal(lds_pool_create(&o, &pool), LDS_E_INVALID_ARG);
        assert_null(pool);
    }
    o.size = LDS_POOL_OPTIONS_SIZE_V1;
    assert_int_equal(lds_pool_create(&o, &pool), LDS_OK);
    lds_pool_free(pool);
    o.size = sizeof o;
    assert_int_equal(lds_pool_create(&o, &pool), LDS_OK);
    lds_pool_free(pool);
    lds_pool_stats_init(NULL);
}

static size_t rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld %ld", &pages, &resident), 2);
    fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static void test_burst_then_trim(void **state)
{
    (void)state;
    const size_t cap = 64 * MiB;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, cap);
    enum { N = 24 };
    lds_lease l[N];
    for (int i = 0; i < N; i++) {
        assert_int_equal(lds_pool_rent(pool, 4 * MiB, &l[i]), LDS_OK);
        memset(l[i].ptr, i, l[i].length);
    }
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.bytes_leased, N * 4 * MiB);
    assert_int_equal(s.bytes_leased_peak, N * 4 * MiB);
    for (int i = 0; i < N; i++)
        assert_int_equal(lds_pool_return(pool, &l[i], 0), LDS_OK);
    s = stats_of(pool);
    assert_true(s.bytes_retained <= cap);
    assert_int_equal(s.bytes_retained, 16 * 4 * MiB); /* admitted up to the cap */
    assert_int_equal(s.drops, N - 16);
    size_t before = rss_bytes();
    size_t freed = 0;
    assert_int_equal(lds_pool_trim(pool, LDS_POOL_TRIM_ALL, &freed), LDS_OK);
    size_t after = rss_bytes();
    assert_int_equal(freed, 16 * 4 * MiB);
    s = stats_of(pool);
    assert_int_equal(s.bytes_retained, 0);
    assert_int_equal(s.bytes_mapped, 0);
    assert_int_equal(s.trims, 16);
    assert_int_equal(s.trimmed_bytes, 16 * 4 * MiB);
    assert_true(before > after + 48 * MiB);
    lds_pool_free(pool);
}

static void test_idle_buffers_age_out(void **state)
{
    (void)state;
    lds_pool_options o;
    lds_pool_options_default(&o);
    /* Long enough that a descheduled thread on a loaded machine does not age the buffers
     * out while they are still being returned; the sleeps below are twice as long. */
    o.max_idle_ns = 150000000; /* 150 ms */
    o.thread_cache_count = 0;
    lds_pool *pool = NULL;
    assert_int_equal(lds_pool_create(&o, &pool), LDS_OK);
    lds_lease l[8];
    for (int i = 0; i < 8; i++) {
        assert_int_equal(lds_pool_rent(pool, 2 * MiB, &l[i]), LDS_OK);
        memset(l[i].ptr, 1, l[i].length);
    }
    for (int i = 0; i < 8; i++)
        assert_int_equal(lds_pool_return(pool, &l[i], 0), LDS_OK);
    assert_int_equal(stats_of(pool).bytes_retained, 8 * 2 * MiB);
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    /* the next slow-path call (a miss in another class) trims them */
    lds_lease x;
    assert_int_equal(lds_pool_rent(pool, 100, &x), LDS_OK);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.bytes_retained, 0);
    assert_int_equal(s.trims, 8);
    assert_int_equal(s.bytes_mapped, 0);
    assert_int_equal(lds_pool_return(pool, &x, 0), LDS_OK);
    nanosleep(&ts, NULL);
    size_t freed = 0;
    assert_int_equal(lds_pool_trim(pool, LDS_POOL_TRIM_IDLE, &freed), LDS_OK);
    assert_int_equal(freed, 112);
    lds_pool_free(pool);
}

static void test_many_long_lived_leases(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    enum { N = 5000 };
    lds_lease *l = calloc(N, sizeof *l);
    assert_non_null(l);
    for (int i = 0; i < N; i++) {
        assert_int_equal(lds_pool_rent(pool, 1000, &l[i]), LDS_OK);
        memset(l[i].ptr, i & 0xff, l[i].length);
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(((unsigned char *)l[i].ptr)[999], i & 0xff);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.misses_cold, 1);
    assert_int_equal(s.misses_exhausted, N - 1);
    assert_int_equal(s.leases_current, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(lds_pool_return(pool, &l[i], 0), LDS_OK);
    s = stats_of(pool);
    assert_int_equal(s.leases_current, 0);
    assert_int_equal(s.buffers_retained, LDS_POOL_DEFAULT_MAX_PER_CLASS);
    assert_int_equal(s.drops, N - LDS_POOL_DEFAULT_MAX_PER_CLASS);
    /* and the pool still works, from its cache */
    for (int i = 0; i < 100; i++) {
        assert_int_equal(lds_pool_rent(pool, 1000, &l[i]), LDS_OK);
    }
    for (int i = 0; i < 100; i++)
        assert_int_equal(lds_pool_return(pool, &l[i], 0), LDS_OK);
    assert_int_equal(stats_of(pool).misses_exhausted, N - 1 + 100 - 64);
    free(l);
    assert_consistent(pool);
    lds_pool_free(pool);
}

static void test_giant_buffer_not_pinned(void **state)
{
    (void)state;
    const size_t cap = 64 * MiB;
    lds_pool_options o;
    lds_pool_options_default(&o);
    o.max_retained_bytes = cap;
    o.large_buffers = LDS_POOL_LARGE_BUFFERS_NONE;
    lds_pool *pool = NULL;
    assert_int_equal(lds_pool_create(&o, &pool), LDS_OK);
    /* larger than the cap, large buffers kept: none: never pooled */
    lds_lease g;
    assert_int_equal(lds_pool_rent(pool, 200 * MiB, &g), LDS_OK);
    memset(g.ptr, 1, 8 * MiB);
    assert_int_equal(lds_pool_return(pool, &g, 0), LDS_OK);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.misses_oversize, 1);
    assert_int_equal(s.drops, 1);
    assert_int_equal(s.bytes_retained, 0);
    assert_int_equal(s.bytes_mapped, 0);
    /* within the cap: cached, then evicted when other classes need the room */
    assert_int_equal(lds_pool_rent(pool, 48 * MiB, &g), LDS_OK);
    assert_int_equal(lds_pool_return(pool, &g, 0), LDS_OK);
    assert_int_equal(stats_of(pool).bytes_retained, 48 * MiB);
    lds_lease l[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(lds_pool_rent(pool, 8 * MiB, &l[i]), LDS_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(lds_pool_return(pool, &l[i], 0), LDS_OK);
    s = stats_of(pool);
    assert_true(s.bytes_retained <= cap);
    assert_int_equal(s.bytes_retained, 4 * 8 * MiB);
    assert_int_equal(s.trims, 1);
    assert_int_equal(s.trimmed_bytes, 48 * MiB);
    lds_pool_free(pool);
}

static long minor_faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

/* A warm rent+return is served by the thread cache and faults no page. */
/* The default keeps two buffers above the retention cap (docs/adr/0029): a reload's new
 * payload rents the old one's memory warm; a third at once is freed on return; trimming and
 * the cap on the count hold. */
static void test_large_buffers_kept_for_reload(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 64 * MiB);
    lds_lease a, b, c;
    assert_int_equal(lds_pool_rent(pool, 100 * MiB, &a), LDS_OK);
    memset(a.ptr, 1, 4 * MiB);
    assert_int_equal(lds_pool_rent(pool, 100 * MiB, &b), LDS_OK);
    assert_int_equal(lds_pool_rent(pool, 100 * MiB, &c), LDS_OK); /* a third: not kept */
    void *pa = a.ptr, *pb = b.ptr;
    assert_int_equal(lds_pool_return(pool, &c, 0), LDS_OK);
    assert_int_equal(stats_of(pool).drops, 1);
    /* a reload: the old payload (a) goes back, the next rental gets it */
    assert_int_equal(lds_pool_return(pool, &a, 0), LDS_OK);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.bytes_retained, lds_pool_class_capacity(100 * MiB));
    assert_int_equal(lds_pool_rent(pool, 100 * MiB, &a), LDS_OK);
    assert_ptr_equal(a.ptr, pa);
    assert_int_equal(((unsigned char *)a.ptr)[4 * MiB - 1], 1); /* the same, warm memory */
    assert_int_equal(lds_pool_return(pool, &b, 0), LDS_OK);
    assert_int_equal(lds_pool_rent(pool, 100 * MiB, &b), LDS_OK);
    assert_ptr_equal(b.ptr, pb);
    assert_int_equal(lds_pool_return(pool, &a, 0), LDS_OK);
    assert_int_equal(lds_pool_return(pool, &b, 0), LDS_OK);
    /* small buffers still fit under the cap beside them */
    lds_lease l;
    assert_int_equal(lds_pool_rent(pool, 32 * MiB, &l), LDS_OK);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    s = stats_of(pool);
    assert_int_equal(s.buffers_retained, 3);
    assert_int_equal(s.drops, 1);
    size_t freed = 0;
    assert_int_equal(lds_pool_trim(pool, LDS_POOL_TRIM_ALL, &freed), LDS_OK);
    assert_int_equal(stats_of(pool).bytes_retained, 0);
    assert_int_equal(stats_of(pool).bytes_mapped, 0);
    /* the count is free again: a new large buffer is kept */
    assert_int_equal(lds_pool_rent(pool, 100 * MiB, &a), LDS_OK);
    assert_int_equal(lds_pool_return(pool, &a, 0), LDS_OK);
    assert_int_equal(stats_of(pool).buffers_retained, 1);
    assert_consistent(pool);
    lds_pool_free(pool);
}

static void test_warm_path(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    size_t sizes[] = {64, 4096, 65536, 2 * MiB};
    for (int k = 0; k < 4; k++) {
        lds_lease l;
        assert_int_equal(lds_pool_rent(pool, sizes[k], &l), LDS_OK);
        memset(l.ptr, 1, l.length);
        assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    }
    lds_pool_stats before = stats_of(pool);
    long f0 = minor_faults();
    for (int i = 0; i < 100000; i++) {
        lds_lease l;
        if (lds_pool_rent(pool, sizes[i & 3], &l) != LDS_OK)
            fail();
        ((char *)l.ptr)[l.length - 1] = (char)i;
        if (lds_pool_return(pool, &l, 0) != LDS_OK)
            fail();
    }
    long f1 = minor_faults();
    lds_pool_stats after = stats_of(pool);
    assert_int_equal(after.hits_thread - before.hits_thread, 100000);
    assert_int_equal(after.misses_cold + after.misses_exhausted, 4);
    assert_true(f1 - f0 <= 2); /* cmocka's own bookkeeping at most */
    lds_pool_free(pool);
}

/* The peak of leased bytes is the high-water of what each thread cache held, leased or
 * cached (kept on the slow paths only, docs/adr/0025): exact while everything the thread
 * holds is out on lease, above the true peak by what its cache kept otherwise. */
static void test_peak_bound_one_thread(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    lds_lease l[10];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 10; i++)
            assert_int_equal(lds_pool_rent(pool, 1000, &l[i]), LDS_OK);
        for (int i = 0; i < 10; i++)
            assert_int_equal(lds_pool_return(pool, &l[i], 0), LDS_OK);
    }
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.bytes_leased, 0);
    assert_int_equal(s.bytes_leased_peak, 10 * 1024); /* all ten were out at once */
    /* This thread's cache kept some of the 1 KiB buffers (the rest went to the shared
     * stacks); they count in what it holds while three 1 MiB leases are out. */
    uint64_t kept = atomic_load(&lds__tls_last->n[lds__class_of(1000)]);
    assert_true(kept > 0 && kept < 10);
    for (int i = 0; i < 3; i++)
        assert_int_equal(lds_pool_rent(pool, MiB, &l[i]), LDS_OK);
    s = stats_of(pool);
    assert_int_equal(s.bytes_leased, 3 * MiB);
    assert_int_equal(s.bytes_leased_peak, 3 * MiB + kept * 1024);
    for (int i = 0; i < 3; i++)
        assert_int_equal(lds_pool_return(pool, &l[i], 0), LDS_OK);
    assert_int_equal(stats_of(pool).bytes_leased_peak, 3 * MiB + kept * 1024);
    lds_pool_free(pool);
}

typedef struct turns {
    lds_pool *pool;
    pthread_barrier_t between, after;
    int failed;
} turns;

static void *first_turn(void *arg)
{
    turns *t = arg;
    lds_lease l;
    if (lds_pool_rent(t->pool, MiB, &l) != LDS_OK || lds_pool_return(t->pool, &l, 0) != LDS_OK)
        t->failed = 1;
    pthread_barrier_wait(&t->between);
    pthread_barrier_wait(&t->after); /* alive (its cache its own) until the second is done */
    return NULL;
}

static void *second_turn(void *arg)
{
    turns *t = arg;
    lds_lease l;
    pthread_barrier_wait(&t->between);
    if (lds_pool_rent(t->pool, MiB, &l) != LDS_OK || lds_pool_return(t->pool, &l, 0) != LDS_OK)
        t->failed = 1;
    pthread_barrier_wait(&t->after);
    return NULL;
}

/* Two live threads in turn, each with one 1 MiB lease out at a time and nothing else in its
 * cache: the peak is the sum of the two caches' high-waters, 2 MiB, twice the true peak,
 * within the bound lodestar_pool.h states (threads that rented x the true peak). */
static void test_peak_bound_two_threads(void **state)
{
    (void)state;
    turns t = {.pool = make_pool(LDS_POOL_CHECK_OFF, 0)};
    pthread_barrier_init(&t.between, NULL, 2);
    pthread_barrier_init(&t.after, NULL, 2);
    pthread_t a, b;
    assert_int_equal(pthread_create(&a, NULL, first_turn, &t), 0);
    assert_int_equal(pthread_create(&b, NULL, second_turn, &t), 0);
    assert_int_equal(pthread_join(a, NULL), 0);
    assert_int_equal(pthread_join(b, NULL), 0);
    pthread_barrier_destroy(&t.between);
    pthread_barrier_destroy(&t.after);
    assert_int_equal(t.failed, 0);
    lds_pool_stats s = stats_of(t.pool);
    assert_int_equal(s.rents, 2);
    assert_int_equal(s.bytes_leased, 0);
    assert_int_equal(s.bytes_leased_peak, 2 * MiB);
    lds_pool_free(t.pool);
}

/* The warm rent finds the class of a request up to LDS__POOL_TABLE_MAX bytes in a table:
 * every entry agrees with the computed class, and warm rents of every length up to the
 * table's end and past it get their class's capacity (most of these rents hit the thread
 * cache, so they take the table's path). */
static void test_class_table(void **state)
{
    (void)state;
    for (size_t n = 0; n <= LDS__POOL_TABLE_MAX; n++)
        if (lds__pool_class_small(n) != lds__pool_class(n))
            fail_msg("class table: %zu bytes -> %u, computed %u", n, lds__pool_class_small(n),
                     lds__pool_class(n));
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    for (size_t n = 0; n <= LDS__POOL_TABLE_MAX + 1024; n++) {
        lds_lease l;
        if (lds_pool_rent(pool, n, &l) != LDS_OK)
            fail();
        if (l.capacity != lds_pool_class_capacity(n) || l.length != n)
            fail_msg("rent of %zu bytes: capacity %zu, class capacity %zu", n, l.capacity,
                     lds_pool_class_capacity(n));
        if (lds_pool_return(pool, &l, 0) != LDS_OK)
            fail();
    }
    lds_pool_stats s = stats_of(pool);
    assert_true(s.hits_thread > 15000); /* the table's path was taken */
    assert_int_equal(s.leases_current, 0);
    lds_pool_free(pool);
}

/* The warm return reaches a slot of the first chunk without a bounds check: a forged handle
 * naming a slot never used there, or any slot before the first chunk exists (the thread's
 * cache already does: a trim made it), is refused by cause, not read out of bounds. */
static void test_forged_handle_first_chunk(void **state)
{
    (void)state;
    _Alignas(64) static char mine[256];
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    assert_int_equal(lds_pool_trim(pool, LDS_POOL_TRIM_ALL, NULL), LDS_OK); /* a cache, no slot */
    uint32_t idx[] = {0, 1, 700, LDS__POOL_CHUNK_SLOTS - 1};
    for (int i = 0; i < 4; i++) {
        lds_lease f = {mine, 64, 64, LDS__POOL_GEN_STEP | idx[i]};
        assert_int_equal(lds_pool_return(pool, &f, 0), LDS_E_POOL_REFUSED);
        f.handle = 5 * LDS__POOL_GEN_STEP | idx[i];
        assert_int_equal(lds_pool_return(pool, &f, 0), LDS_E_POOL_REFUSED);
    }
    assert_int_equal(stats_of(pool).refused[LDS_POOL_REFUSED_UNKNOWN], 8);
    /* Now the first chunk exists (slot 0 is a buffer), its other slots are still unused. */
    lds_lease good;
    assert_int_equal(lds_pool_rent(pool, 64, &good), LDS_OK);
    assert_int_equal(good.handle & LDS__POOL_IDX_MASK, 0);
    for (int i = 1; i < 4; i++) {
        lds_lease f = {mine, 64, 64, good.handle - (good.handle & LDS__POOL_IDX_MASK) + idx[i]};
        assert_int_equal(lds_pool_return(pool, &f, 0), LDS_E_POOL_REFUSED);
        f.ptr = good.ptr;
        assert_int_equal(lds_pool_return(pool, &f, 0), LDS_E_POOL_REFUSED);
    }
    assert_int_equal(stats_of(pool).refused[LDS_POOL_REFUSED_UNKNOWN], 14);
    assert_int_equal(lds_pool_return(pool, &good, 0), LDS_OK);
    assert_consistent(pool);
    lds_pool_free(pool);
}

/* The warm return keeps a buffer in the thread's cache only while the cache has room for
 * its class (thread_cache_count) and only if the buffer is pooled: one test of the slot's
 * tc_lim covers both. Six returns of one class: four stay in the thread's cache, two go to
 * the shared stack; a buffer over the retention cap is dropped, never cached. */
static void test_warm_return_cache_limits(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    lds_lease l[6];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 6; i++)
            assert_int_equal(lds_pool_rent(pool, 1000, &l[i]), LDS_OK);
        for (int i = 0; i < 6; i++)
            assert_int_equal(lds_pool_return(pool, &l[i], 0), LDS_OK);
    }
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.misses_cold + s.misses_exhausted, 6);
    assert_int_equal(s.hits_thread, LDS_POOL_DEFAULT_THREAD_CACHE_COUNT);
    assert_int_equal(s.hits_shared, 6 - LDS_POOL_DEFAULT_THREAD_CACHE_COUNT);
    assert_int_equal(s.buffers_retained, 6);
    lds_pool_free(pool);

    pool = make_pool(LDS_POOL_CHECK_OFF, 4096); /* room for one 4 KiB buffer */
    assert_int_equal(lds_pool_rent(pool, 4096, &l[0]), LDS_OK);
    assert_int_equal(lds_pool_rent(pool, 4096, &l[1]), LDS_OK); /* over the cap: not pooled */
    assert_int_equal(lds_pool_return(pool, &l[1], 0), LDS_OK);
    assert_int_equal(lds_pool_return(pool, &l[0], 0), LDS_OK);
    s = stats_of(pool);
    assert_int_equal(s.drops, 1);
    assert_int_equal(s.buffers_retained, 1);
    assert_int_equal(s.bytes_retained, 4096);
    lds_pool_free(pool);
}

static lds_status scoped_user(lds_pool *pool, int fail_early)
{
    LDS_SCOPED_LEASE(buf, pool);
    lds_status st = lds_pool_rent(buf.pool, 4000, &buf.lease);
    if (st != LDS_OK)
        return st;
    memset(buf.lease.ptr, 9, buf.lease.length);
    if (fail_early)
        return LDS_E_IO; /* the lease goes back anyway */
    return lds_pool_return(buf.pool, &buf.lease, 0);
}

static void test_scoped_lease(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    assert_int_equal(scoped_user(pool, 1), LDS_E_IO);
    assert_int_equal(scoped_user(pool, 0), LDS_OK);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.rents, 2);
    assert_int_equal(s.returns, 2);
    assert_int_equal(s.refused_total, 0);
    lds_pool_free(pool);
}

static void test_stats_json(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    lds_lease l;
    assert_int_equal(lds_pool_rent(pool, 100, &l), LDS_OK);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.waste_bytes_current, 12);
    assert_int_equal(s.waste_bytes_total, 12);
    char buf[2048];
    size_t need = 0;
    assert_int_equal(lds_pool_stats_json(&s, buf, sizeof buf, &need), LDS_OK);
    assert_int_equal(strlen(buf), need);
    assert_non_null(strstr(buf, "\"rents\":1,"));
    assert_non_null(strstr(buf, "\"bytes_leased\":112,"));
    assert_non_null(strstr(buf, "\"refused\":{\"stale\":0,"));
    assert_int_equal(buf[0], '{');
    assert_int_equal(buf[need - 1], '}');
    char small[16];
    size_t need2 = 0;
    assert_int_equal(lds_pool_stats_json(&s, small, sizeof small, &need2), LDS_E_LIMIT);
    assert_int_equal(need2, need);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_int_equal(lds_pool_stats_json(&s, NULL, 0, &need2), LDS_E_LIMIT);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    s = stats_of(pool);
    assert_int_equal(s.waste_bytes_current, 0);
    lds_pool_stats tiny = {.size = 4};
    assert_int_equal(lds_pool_get_stats(pool, &tiny), LDS_E_INVALID_ARG);
    assert_int_equal(lds_pool_stats_json(&tiny, buf, sizeof buf, &need), LDS_E_INVALID_ARG);
    lds_pool_free(pool);
}

/* The JSON parses (json-c), holds every field exactly once under its own name, and each
   value is that field's: the struct is filled with a distinct value per field so that a
   name attached to the wrong field, a field left out or a value cut short shows. */
static void test_stats_json_parses(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        size_t at;
    } fields[] = {
#define F(f) {#f, offsetof(lds_pool_stats, f)}
        F(rents),
        F(hits_thread),
        F(hits_shared),
        F(misses_cold),
        F(misses_exhausted),
        F(misses_oversize),
        F(returns),
        F(refused_total),
        F(canary_failures),
        F(drops),
        F(trims),
        F(trimmed_bytes),
        F(leases_current),
        F(bytes_leased),
        F(bytes_leased_peak),
        F(bytes_retained),
        F(buffers_retained),
        F(bytes_resident_estimate),
        F(bytes_mapped),
        F(waste_bytes_total),
        F(waste_bytes_current),
        F(bytes_requested_total),
        F(slots_retired),
        F(guard_failures),
#undef F
    };
    static const char *const refused[] = {"stale", "unknown", "pointer", "size"};
    lds_pool_stats s;
    lds_pool_stats_init(&s);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        uint64_t v = 1000 + i + (i == 3 ? UINT64_C(1) << 62 : 0); /* one beyond 2^53 */
        memcpy((char *)&s + fields[i].at, &v, sizeof v);
    }
    for (int r = 0; r < LDS_POOL_REFUSED_COUNT; r++)
        s.refused[r] = 50 + (uint64_t)r;
    char buf[4096];
    size_t need = 0;
    assert_int_equal(lds_pool_stats_json(&s, buf, sizeof buf, &need), LDS_OK);
    enum json_tokener_error jerr;
    json_object *o = json_tokener_parse_verbose(buf, &jerr);
    if (!o)
        fail_msg("not JSON (%s): %s", json_tokener_error_desc(jerr), buf);
    assert_true(json_object_is_type(o, json_type_object));
    assert_int_equal(json_object_object_length(o), sizeof fields / sizeof fields[0] + 1);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        json_object *v;
        if (!json_object_object_get_ex(o, fields[i].name, &v))
            fail_msg("no \"%s\" in %s", fields[i].name, buf);
        assert_true(json_object_is_type(v, json_type_int));
        uint64_t want;
        memcpy(&want, (const char *)&s + fields[i].at, sizeof want);
        assert_true(json_object_get_uint64(v) == want);
    }
    json_object *r;
    assert_true(json_object_object_get_ex(o, "refused", &r));
    assert_true(json_object_is_type(r, json_type_object));
    assert_int_equal(json_object_object_length(r), LDS_POOL_REFUSED_COUNT);
    for (int k = 0; k < LDS_POOL_REFUSED_COUNT; k++) {
        json_object *v;
        assert_true(json_object_object_get_ex(r, refused[k], &v));
        assert_true(json_object_get_uint64(v) == 50 + (uint64_t)k);
    }
    json_object_put(o);
}

/* A size that ends inside a field leaves that field as it was: only whole fields are
 * written (bytes 16-19 of hits_thread were overwritten with size 20). */
static void test_stats_size_inside_a_field(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    lds_lease l;
    assert_int_equal(lds_pool_rent(pool, 100, &l), LDS_OK);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    unsigned char buf[sizeof(lds_pool_stats)];
    memset(buf, 0xcc, sizeof buf);
    lds_pool_stats *st = (lds_pool_stats *)buf;
    st->size = offsetof(lds_pool_stats, hits_thread) + 4;
    assert_int_equal(lds_pool_get_stats(pool, st), LDS_OK);
    assert_int_equal(st->rents, 1);
    for (size_t i = offsetof(lds_pool_stats, hits_thread); i < sizeof buf; i++)
        assert_int_equal(buf[i], 0xcc);
    lds_pool_free(pool);
}

/* max_retained_bytes 0 is the default, as the options' "zero means the default" says (it
 * used to keep nothing: every return a drop). */
static void test_zero_retention_is_the_default(void **state)
{
    (void)state;
    lds_pool_options o;
    lds_pool_options_default(&o);
    o.max_retained_bytes = 0;
    lds_pool *pool = NULL;
    assert_int_equal(lds_pool_create(&o, &pool), LDS_OK);
    for (int i = 0; i < 3; i++) {
        lds_lease l;
        assert_int_equal(lds_pool_rent(pool, 4096, &l), LDS_OK);
        assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    }
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.drops, 0);
    assert_int_equal(s.misses_oversize, 0);
    assert_int_equal(s.hits_thread, 2);
    assert_int_equal(s.buffers_retained, 1);
    lds_pool_free(pool);
}

/* Bytes of address space of this process (/proc/self/statm, first field). */
static uint64_t vm_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long pages = 0;
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%llu", &pages), 1);
    fclose(f);
    return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Counts no pool can reach are refused, not allocated: max_per_class = UINT32_MAX sized 161
 * class stacks of 16 GiB each at creation. A pool's class stacks are sized by what the
 * class can pool (max_retained_bytes / capacity), so the largest accepted count costs
 * little address space when the retention is small. */
static void test_option_counts_bounded(void **state)
{
    (void)state;
    lds_pool_options o;
    lds_pool *pool = NULL;
    const uint32_t bad[] = {UINT32_MAX, LDS_POOL_MAX_BUFFERS + 1};
    for (int i = 0; i < 2; i++) {
        lds_pool_options_default(&o);
        o.max_per_class = bad[i];
        assert_int_equal(lds_pool_create(&o, &pool), LDS_E_INVALID_ARG);
        assert_null(pool);
        lds_pool_options_default(&o);
        o.guard_quarantine = bad[i];
        assert_int_equal(lds_pool_create(&o, &pool), LDS_E_INVALID_ARG);
        assert_null(pool);
    }
    lds_pool_options_default(&o);
    o.max_per_class = LDS_POOL_MAX_BUFFERS;
    o.guard_quarantine = LDS_POOL_MAX_BUFFERS;
    o.max_retained_bytes = (size_t)1 << 20;
    uint64_t before = vm_bytes();
    assert_int_equal(lds_pool_create(&o, &pool), LDS_OK);
    uint64_t grew = vm_bytes() - before;
    /* the quarantine (16 MiB) and stacks for at most 16,384 64-byte buffers and fewer of
     * each larger class: well under 64 MiB (it was 161 x 16 MiB) */
    assert_true(grew < ((uint64_t)64 << 20));
    enum { N = 300 };
    static lds_lease ls[N];
    for (int i = 0; i < N; i++)
        assert_int_equal(lds_pool_rent(pool, 4096, &ls[i]), LDS_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(lds_pool_return(pool, &ls[i], 0), LDS_OK);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.leases_current, 0);
    assert_true(s.buffers_retained <= 256); /* 1 MiB of 4 KiB buffers */
    assert_true(s.bytes_retained <= ((uint64_t)1 << 20));
    assert_int_equal(s.buffers_retained + s.drops, N);
    assert_consistent(pool);
    lds_pool_free(pool);
}

/* A caller built against an older, shorter lds_pool_stats: the JSON holds the fields its
 * struct has and reads nothing past `size` (heap-allocated so ASan sees an overread). */
static void test_stats_json_short_struct(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    lds_lease l;
    assert_int_equal(lds_pool_rent(pool, 100, &l), LDS_OK);
    size_t sizes[] = {16, offsetof(lds_pool_stats, refused) + 8,
                      offsetof(lds_pool_stats, refused_total)};
    const char *want[] = {"{\"rents\":1}",
                          "{\"rents\":1,\"hits_thread\":0,\"hits_shared\":0,\"misses_cold\":1,"
                          "\"misses_exhausted\":0,\"misses_oversize\":0,\"returns\":0}",
                          "{\"rents\":1,\"hits_thread\":0,\"hits_shared\":0,\"misses_cold\":1,"
                          "\"misses_exhausted\":0,\"misses_oversize\":0,\"returns\":0,"
                          "\"refused\":{\"stale\":0,\"unknown\":0,\"pointer\":0,\"size\":0}}"};
    for (int i = 0; i < 3; i++) {
        lds_pool_stats *s = malloc(sizes[i]);
        assert_non_null(s);
        memset(s, 0, sizes[i]);
        s->size = sizes[i];
        assert_int_equal(lds_pool_get_stats(pool, s), LDS_OK);
        char buf[4096];
        size_t need = 0;
        assert_int_equal(lds_pool_stats_json(s, buf, sizeof buf, &need), LDS_OK);
        assert_string_equal(buf, want[i]);
        assert_int_equal(need, strlen(want[i]));
        free(s);
    }
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    lds_pool_free(pool);
}

/* Kilobytes of AnonHugePages in the mapping that holds `p` (/proc/self/smaps), or -1. */
static long anon_huge_kb(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int inside = 0;
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (inside && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb;
}

/* huge_pages on: a large lease's page base is 2 MiB aligned (the buffer 256 bytes in), the
 * mapping is no larger than without the option, and trimming unmaps all of it. */
static void test_huge_pages_aligned_and_trimmed(void **state)
{
    (void)state;
    lds_pool_options o;
    lds_pool_options_default(&o);
    o.huge_pages = LDS_POOL_HUGE_PAGES_ON;
    lds_pool *pool = NULL;
    assert_int_equal(lds_pool_create(&o, &pool), LDS_OK);
    const size_t len = 20589008, cap = 20 * MiB, page = (size_t)sysconf(_SC_PAGESIZE);
    lds_lease l;
    assert_int_equal(lds_pool_rent(pool, len, &l), LDS_OK);
    assert_int_equal(l.capacity, cap);
    uintptr_t base = (uintptr_t)l.ptr - LDS_POOL_MAP_OFFSET;
    assert_int_equal(base % (2 * MiB), 0);
    memset(l.ptr, 0x5a, l.length);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.bytes_mapped, (LDS_POOL_MAP_OFFSET + cap + page - 1) / page * page);
    print_message("huge pages: lease at %p, AnonHugePages %ld kB\n", l.ptr, anon_huge_kb(l.ptr));
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);

    /* Reused warm: the same buffer comes back. */
    lds_lease again;
    assert_int_equal(lds_pool_rent(pool, len, &again), LDS_OK);
    assert_int_equal((uintptr_t)again.ptr, base + LDS_POOL_MAP_OFFSET);
    assert_int_equal(lds_pool_return(pool, &again, 0), LDS_OK);

    size_t before = rss_bytes();
    size_t freed = 0;
    assert_int_equal(lds_pool_trim(pool, LDS_POOL_TRIM_ALL, &freed), LDS_OK);
    size_t after = rss_bytes();
    assert_int_equal(freed, cap);
    s = stats_of(pool);
    assert_int_equal(s.bytes_mapped, 0);
    assert_int_equal(s.bytes_retained, 0);
    assert_true(before > after + 16 * MiB);

    /* Below LDS_POOL_HUGE_MIN a mapped buffer keeps its ordinary mapping. */
    assert_int_equal(lds_pool_rent(pool, MiB, &l), LDS_OK);
    assert_int_equal(stats_of(pool).bytes_mapped,
                     (LDS_POOL_MAP_OFFSET + MiB + page - 1) / page * page);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    lds_pool_free(pool);

    o.huge_pages = (lds_pool_huge_pages)2;
    assert_int_equal(lds_pool_create(&o, &pool), LDS_E_INVALID_ARG);
}

static void test_env_selects_huge_pages(void **state)
{
    (void)state;
    lds_pool_options o;
    const char *was = getenv(LDS_POOL_HUGE_PAGES_ENV);
    char saved[16] = "";
    if (was)
        snprintf(saved, sizeof saved, "%s", was);
    setenv(LDS_POOL_HUGE_PAGES_ENV, "on", 1);
    lds_pool_options_default(&o);
    assert_int_equal(o.huge_pages, LDS_POOL_HUGE_PAGES_ON);
    setenv(LDS_POOL_HUGE_PAGES_ENV, "off", 1);
    lds_pool_options_default(&o);
    assert_int_equal(o.huge_pages, LDS_POOL_HUGE_PAGES_OFF);
    setenv(LDS_POOL_HUGE_PAGES_ENV, "nonsense", 1);
    lds_pool_options_default(&o);
    assert_int_equal(o.huge_pages, LDS_POOL_DEFAULT_HUGE_PAGES);
    unsetenv(LDS_POOL_HUGE_PAGES_ENV);
    lds_pool_options_default(&o);
    assert_int_equal(o.huge_pages, LDS_POOL_DEFAULT_HUGE_PAGES);
    if (was) /* the suite may run with the variable set: later tests keep it */
        setenv(LDS_POOL_HUGE_PAGES_ENV, saved, 1);
}

#endif /* LDS_POOL_TSAN_ONLY */

int main(void)
{
    const struct CMUnitTest tests[] = {
#ifndef LDS_POOL_TSAN_ONLY
        cmocka_unit_test(test_class_capacity),
        cmocka_unit_test(test_rent_basics),
        cmocka_unit_test(test_double_return_then_two_rents),
        cmocka_unit_test(test_triple_return_four_rents),
        cmocka_unit_test(test_foreign_and_forged_returns),
        cmocka_unit_test(test_stale_handle_across_old_wrap),
        cmocka_unit_test(test_lease_of_other_pool_refused),
        cmocka_unit_test(test_option_counts_bounded),
        cmocka_unit_test(test_slot_retires_before_generation_wraps),
        cmocka_unit_test(test_poison_past_length),
        cmocka_unit_test(test_fill_on_rent_and_clear),
        cmocka_unit_test(test_canary_catches_write_after_return),
        cmocka_unit_test(test_guard_faults_at_write),
        cmocka_unit_test(test_guard_protect_failure_is_loud),
        cmocka_unit_test(test_guard_unprotect_failure_is_loud),
        cmocka_unit_test(test_guard_at_max_map_count),
        cmocka_unit_test(test_bypass_never_reuses),
        cmocka_unit_test(test_env_selects_check_mode),
        cmocka_unit_test(test_options_size_rules),
        cmocka_unit_test(test_env_values_case_and_warning),
        cmocka_unit_test(test_burst_then_trim),
        cmocka_unit_test(test_huge_pages_aligned_and_trimmed),
        cmocka_unit_test(test_env_selects_huge_pages),
        cmocka_unit_test(test_idle_buffers_age_out),
        cmocka_unit_test(test_many_long_lived_leases),
        cmocka_unit_test(test_giant_buffer_not_pinned),
        cmocka_unit_test(test_large_buffers_kept_for_reload),
        cmocka_unit_test(test_warm_path),
        cmocka_unit_test(test_peak_bound_one_thread),
        cmocka_unit_test(test_peak_bound_two_threads),
        cmocka_unit_test(test_class_table),
        cmocka_unit_test(test_forged_handle_first_chunk),
        cmocka_unit_test(test_warm_return_cache_limits),
        cmocka_unit_test(test_scoped_lease),
        cmocka_unit_test(test_stats_json),
        cmocka_unit_test(test_stats_json_parses),
        cmocka_unit_test(test_stats_json_short_struct),
        cmocka_unit_test(test_stats_size_inside_a_field),
        cmocka_unit_test(test_zero_retention_is_the_default),
#endif
        cmocka_unit_test(test_stale_return_while_slot_reused),
        cmocka_unit_test(test_stats_during_guard_returns),
        cmocka_unit_test(test_concurrent_double_return),
        cmocka_unit_test(test_cross_thread_return_collected),
        cmocka_unit_test(test_cross_then_own_return_refused),
        cmocka_unit_test(test_own_then_cross_return_refused),
        cmocka_unit_test(test_cross_thread_bad_returns_refused),
        cmocka_unit_test(test_cross_thread_clear),
        cmocka_unit_test(test_exited_renter_hands_on),
        cmocka_unit_test(test_cross_thread_lease_in_its_own_buffer),
        cmocka_unit_test(test_own_and_cross_return_race),
        cmocka_unit_test(test_cross_thread_handoff),
        cmocka_unit_test(test_stress_threads),
        cmocka_unit_test(test_thread_exit_flushes),
        cmocka_unit_test(test_shared_pool_once),
        cmocka_unit_test(test_fork_while_threads_use_pools),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
