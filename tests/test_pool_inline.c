/*
 * The inline warm pair of bench/pool_inline.h (an experiment, not installed: docs/adr/0037),
 * with the pool linked statically (its thread-cache variable is not exported from
 * liblodestar): the same results, refusals and statistics as lds_pool_rent/lds_pool_return
 * for every case, the warm pair without any call into the pool, and every other case through
 * the call. Under AddressSanitizer the variable it reads points at a cache that matches no
 * pool, so every inline operation is the call; the results are the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static unsigned long g_calls; /* calls the inline functions made into the library */
#define LDS__POOL_INLINE_COUNT_CALLS g_calls
#include "pool_inline.h"

#include <pthread.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define LIB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LIB_ASAN 1
#endif
#endif
#ifdef LIB_ASAN
static const int inline_on = 0;
#else
static const int inline_on = 1;
#endif

#include "pool_helpers.h"

/* The warm pair runs without a call, and counts as the library's pair does. */
static void test_inline_warm_pair(void **state)
{
    (void)state;
    assert_int_equal(LDS_POOL_INLINE_LAYOUT, 1);
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    const size_t sizes[] = {1, 200, 1000, 4096, 16384}; /* five classes */
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        lds_lease l;
        assert_int_equal(lds_pool_rent_inline(pool, sizes[k], &l), LDS_OK); /* cold: a call */
        assert_int_equal(lds_pool_return_inline(pool, &l, 0), LDS_OK);
        g_calls = 0;
        void *first = NULL;
        for (int i = 0; i < 1000; i++) {
            assert_int_equal(lds_pool_rent_inline(pool, sizes[k], &l), LDS_OK);
            assert_int_equal(l.length, sizes[k]);
            assert_true(l.capacity >= sizes[k]);
            assert_int_equal((uintptr_t)l.ptr % 64, 0);
            if (!first)
                first = l.ptr;
            assert_ptr_equal(l.ptr, first); /* the same buffer, warm */
            memset(l.ptr, 0xa5, l.length);
            assert_int_equal(lds_pool_return_inline(pool, &l, 0), LDS_OK);
            assert_int_equal(l.handle, 0); /* zeroed, as lds_pool_return does */
            assert_null(l.ptr);
        }
        assert_int_equal(g_calls, inline_on ? 0 : 2000);
    }
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.rents, 5 * 1001);
    assert_int_equal(s.returns, 5 * 1001);
    assert_int_equal(s.leases_current, 0);
    assert_int_equal(s.hits_thread, 5 * 1000);
    assert_int_equal(s.bytes_requested_total, 1001 * (1 + 200 + 1000 + 4096 + 16384));
    assert_int_equal(s.refused_total, 0);
    lds_pool_free(pool);
}

/* Above 16 KiB the rent is the call; the return stays inline. Mixed with the library's own
 * functions in both directions. */
static void test_inline_mixed_and_large(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    lds_lease l;
    assert_int_equal(lds_pool_rent(pool, 1 << 20, &l), LDS_OK);
    assert_int_equal(lds_pool_return_inline(pool, &l, 0), LDS_OK);
    g_calls = 0;
    assert_int_equal(lds_pool_rent_inline(pool, 1 << 20, &l), LDS_OK);
    assert_int_equal(g_calls, 1);
    assert_int_equal(lds_pool_return_inline(pool, &l, 0), LDS_OK);
    assert_int_equal(g_calls, inline_on ? 1 : 2);
    assert_int_equal(lds_pool_rent_inline(pool, 100, &l), LDS_OK);
    assert_int_equal(lds_pool_return(pool, &l, 0), LDS_OK);
    assert_int_equal(lds_pool_rent(pool, 100, &l), LDS_OK);
    assert_int_equal(lds_pool_return_inline(pool, &l, 0), LDS_OK);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.rents, 4);
    assert_int_equal(s.returns, 4);
    lds_pool_free(pool);
}

/* Every misuse the library refuses is refused through the inline return, by the same cause,
 * and the lease it concerns is still the caller's to return. */
static void test_inline_refusals(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    lds_pool *other = make_pool(LDS_POOL_CHECK_OFF, 0);
    lds_lease l, copy, bad, foreign;
    /* warm both, so that the checks below are the inline path's */
    assert_int_equal(lds_pool_rent_inline(pool, 500, &l), LDS_OK);
    assert_int_equal(lds_pool_return_inline(pool, &l, 0), LDS_OK);

    /* double return: the second finds its lease zeroed */
    assert_int_equal(lds_pool_rent_inline(pool, 500, &l), LDS_OK);
    copy = l;
    assert_int_equal(lds_pool_return_inline(pool, &l, 0), LDS_OK);
    assert_int_equal(lds_pool_return_inline(pool, &l, 0), LDS_E_POOL_REFUSED);
    assert_int_equal(stats_of(pool).refused[LDS_POOL_REFUSED_STALE], 1);
    /* a stale copy, while the same buffer is leased again under a new generation */
    assert_int_equal(lds_pool_rent_inline(pool, 500, &l), LDS_OK);
    assert_ptr_equal(l.ptr, copy.ptr);
    assert_int_equal(lds_pool_return_inline(pool, &copy, 0), LDS_E_POOL_REFUSED);
    assert_int_equal(stats_of(pool).refused[LDS_POOL_REFUSED_STALE], 2);
    /* wrong length, wrong capacity, wrong pointer */
    bad = l;
    bad.length += 1;
    assert_int_equal(lds_pool_return_inline(pool, &bad, 0), LDS_E_POOL_REFUSED);
    bad = l;
    bad.capacity -= 64;
    assert_int_equal(lds_pool_return_inline(pool, &bad, 0), LDS_E_POOL_REFUSED);
    assert_int_equal(stats_of(pool).refused[LDS_POOL_REFUSED_SIZE], 2);
    bad = l;
    bad.ptr = (char *)bad.ptr + 64;
    assert_int_equal(lds_pool_return_inline(pool, &bad, 0), LDS_E_POOL_REFUSED);
    assert_int_equal(stats_of(pool).refused[LDS_POOL_REFUSED_POINTER], 1);
    /* the word of a cached slot (an even generation) with the pointer and sizes of its last
     * lease: every other field matches (a cached slot names this cache), so only the
     * generation's parity refuses it; taken, it would hand the buffer out twice */
    lds_lease spare, again;
    assert_int_equal(lds_pool_rent_inline(pool, 500, &spare), LDS_OK);
    bad = spare;
    bad.handle += LDS__V1_GEN_STEP;
    assert_int_equal(lds_pool_return_inline(pool, &spare, 0), LDS_OK);
    assert_int_equal(lds_pool_return_inline(pool, &bad, 0), LDS_E_POOL_REFUSED);
    assert_int_equal(stats_of(pool).refused[LDS_POOL_REFUSED_UNKNOWN], 1);
    assert_int_equal(lds_pool_rent_inline(pool, 500, &spare), LDS_OK);
    assert_int_equal(lds_pool_rent_inline(pool, 500, &again), LDS_OK);
    assert_ptr_not_equal(spare.ptr, again.ptr); /* the cached buffer went out once */
    assert_ptr_not_equal(spare.ptr, l.ptr);
    assert_ptr_not_equal(again.ptr, l.ptr);
    assert_int_equal(lds_pool_return_inline(pool, &again, 0), LDS_OK);
    assert_int_equal(lds_pool_return_inline(pool, &spare, 0), LDS_OK);
    /* a later generation */
    bad = l;
    bad.handle += 2 * LDS__V1_GEN_STEP;
    assert_int_equal(lds_pool_return_inline(pool, &bad, 0), LDS_E_POOL_REFUSED);
    assert_int_equal(stats_of(pool).refused[LDS_POOL_REFUSED_UNKNOWN], 2); /* never given */
    /* another pool's lease: its generation is not one this pool's slots have had */
    assert_int_equal(lds_pool_rent_inline(other, 500, &foreign), LDS_OK);
    bad = foreign;
    assert_int_equal(lds_pool_return_inline(pool, &bad, 0), LDS_E_POOL_REFUSED);
    assert_int_equal(stats_of(pool).refused[LDS_POOL_REFUSED_UNKNOWN], 3);
    assert_int_equal(stats_of(pool).refused[LDS_POOL_REFUSED_STALE], 2);
    assert_int_equal(stats_of(pool).refused_total, 8);
    /* flags: LDS_RETURN_CLEAR is the call, and clears */
    memset(l.ptr, 0x5a, l.capacity);
    void *p = l.ptr;
    size_t cap = l.capacity;
    assert_int_equal(lds_pool_return_inline(pool, &l, LDS_RETURN_CLEAR), LDS_OK);
    assert_int_equal(lds_pool_rent_inline(pool, 500, &l), LDS_OK);
    assert_ptr_equal(l.ptr, p);
    for (size_t i = 0; i < cap; i++)
        assert_int_equal(((unsigned char *)l.ptr)[i], 0);
    assert_int_equal(lds_pool_return_inline(pool, &l, 0), LDS_OK);
    assert_int_equal(lds_pool_return_inline(other, &foreign, 0), LDS_OK);
    /* NULL arguments are the library's errors */
    assert_int_equal(lds_pool_rent_inline(pool, 10, NULL), LDS_E_INVALID_ARG);
    assert_int_equal(lds_pool_return_inline(pool, NULL, 0), LDS_E_INVALID_ARG);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.leases_current, 0);
    assert_int_equal(s.rents, s.returns);
    lds_pool_free(pool);
    lds_pool_free(other);
}

typedef struct xret {
    lds_pool *pool;
    lds_lease lease;
    lds_status got;
} xret;

static void *return_elsewhere(void *arg)
{
    xret *x = arg;
    x->got = lds_pool_return_inline(x->pool, &x->lease, 0);
    return NULL;
}

/* A lease returned inline on another thread is claimed there and ended by its owner; the
 * owner's own return of it afterwards is refused. */
static void test_inline_cross_thread(void **state)
{
    (void)state;
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    xret x = {.pool = pool};
    assert_int_equal(lds_pool_rent_inline(pool, 4096, &x.lease), LDS_OK);
    assert_int_equal(lds_pool_return_inline(pool, &x.lease, 0), LDS_OK);
    assert_int_equal(lds_pool_rent_inline(pool, 4096, &x.lease), LDS_OK);
    lds_lease mine = x.lease;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, return_elsewhere, &x), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(x.got, LDS_OK);
    assert_int_equal(lds_pool_return_inline(pool, &mine, 0), LDS_E_POOL_REFUSED);
    /* the next rent here collects the claimed return and serves the same buffer */
    lds_lease again;
    assert_int_equal(lds_pool_rent_inline(pool, 4096, &again), LDS_OK);
    assert_ptr_equal(again.ptr, mine.ptr);
    assert_int_equal(lds_pool_return_inline(pool, &again, 0), LDS_OK);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.rents, 3);
    assert_int_equal(s.returns, 3);
    assert_int_equal(s.refused[LDS_POOL_REFUSED_STALE], 1);
    lds_pool_free(pool);
}

/* A checked mode, a trim and a full cache each send the inline functions to the call. */
static void test_inline_falls_back(void **state)
{
    (void)state;
    lds_pool *canary = make_pool(LDS_POOL_CHECK_CANARY, 0);
    lds_lease l;
    assert_int_equal(lds_pool_rent_inline(canary, 256, &l), LDS_OK);
    assert_int_equal(lds_pool_return_inline(canary, &l, 0), LDS_OK);
    g_calls = 0;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(lds_pool_rent_inline(canary, 256, &l), LDS_OK);
        ((char *)l.ptr)[0] = 1;
        assert_int_equal(lds_pool_return_inline(canary, &l, 0), LDS_OK);
    }
    assert_int_equal(g_calls, 20);
    assert_int_equal(stats_of(canary).canary_failures, 0);
    lds_pool_free(canary);

    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    assert_int_equal(lds_pool_rent_inline(pool, 256, &l), LDS_OK);
    assert_int_equal(lds_pool_return_inline(pool, &l, 0), LDS_OK);
    assert_int_equal(lds_pool_trim(pool, LDS_POOL_TRIM_ALL, NULL), LDS_OK);
    g_calls = 0;
    assert_int_equal(lds_pool_rent_inline(pool, 256, &l), LDS_OK); /* the trim: a call */
    assert_int_equal(g_calls, 1);
    assert_int_equal(lds_pool_return_inline(pool, &l, 0), LDS_OK);
    assert_int_equal(lds_pool_rent_inline(pool, 256, &l), LDS_OK);
    assert_int_equal(lds_pool_return_inline(pool, &l, 0), LDS_OK);
    assert_int_equal(g_calls, inline_on ? 1 : 4);

    /* more leases of one class than a thread cache keeps: the returns past its row go to
     * the shared stacks through the call */
    enum { N = 40 };
    lds_lease ls[N];
    for (int i = 0; i < N; i++)
        assert_int_equal(lds_pool_rent_inline(pool, 256, &ls[i]), LDS_OK);
    g_calls = 0;
    for (int i = 0; i < N; i++)
        assert_int_equal(lds_pool_return_inline(pool, &ls[i], 0), LDS_OK);
    if (inline_on)
        assert_true(g_calls > 0 && g_calls < (unsigned long)N);
    else
        assert_int_equal(g_calls, N);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.leases_current, 0);
    assert_int_equal(s.rents, s.returns);
    assert_int_equal(s.buffers_retained, N);
    lds_pool_free(pool);
}

/* Leases past the pool's first 1,024 slots return through the call, found by the word test
 * alone (the inline return has no bounds test, docs/adr/0028); a forged handle whose low
 * index bits name a live slot of the first chunk, but whose index is past it, is refused by
 * the library and ends nothing; leases moved through the call come back exactly as the
 * call left them. */
static void test_inline_past_first_chunk(void **state)
{
    (void)state;
    enum { N = 1100 };
    static lds_lease ls[N];
    lds_pool *pool = make_pool(LDS_POOL_CHECK_OFF, 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(lds_pool_rent_inline(pool, 100, &ls[i]), LDS_OK);
        assert_int_equal(ls[i].length, 100);
        assert_int_equal(ls[i].capacity, 112);
        assert_int_not_equal(ls[i].handle, 0);
    }
    int far = -1, near = -1;
    for (int i = 0; i < N; i++) {
        uint64_t idx = ls[i].handle & LDS__V1_IDX_MASK;
        if (idx >= LDS__V1_CHUNK_SLOTS && far < 0)
            far = i;
        if (idx < LDS__V1_CHUNK_SLOTS && near < 0 &&
            idx + LDS__V1_CHUNK_SLOTS < N)
            near = i;
    }
    assert_true(far >= 0 && near >= 0);
    /* a forged handle: the near lease with the index of a slot past the first chunk */
    lds_lease forged = ls[near];
    forged.handle |= LDS__V1_CHUNK_SLOTS;
    lds_lease before = forged;
    g_calls = 0;
    assert_int_equal(lds_pool_return_inline(pool, &forged, 0), LDS_E_POOL_REFUSED);
    assert_int_equal(g_calls, 1);
    assert_memory_equal(&forged, &before, sizeof before); /* left as it was */
    assert_int_equal(stats_of(pool).refused_total, 1);
    /* a lease past the first chunk: the call, zeroed as the call zeroes */
    g_calls = 0;
    assert_int_equal(lds_pool_return_inline(pool, &ls[far], 0), LDS_OK);
    assert_int_equal(g_calls, 1);
    assert_null(ls[far].ptr);
    assert_int_equal(ls[far].length, 0);
    assert_int_equal(ls[far].capacity, 0);
    assert_int_equal(ls[far].handle, 0);
    /* and a second return of it: the call again, refused, the zeroed lease untouched */
    assert_int_equal(lds_pool_return_inline(pool, &ls[far], 0), LDS_E_POOL_REFUSED);
    assert_int_equal(ls[far].handle, 0);
    for (int i = 0; i < N; i++)
        if (i != far)
            assert_int_equal(lds_pool_return_inline(pool, &ls[i], 0), LDS_OK);
    lds_pool_stats s = stats_of(pool);
    assert_int_equal(s.rents, N);
    assert_int_equal(s.returns, N);
    assert_int_equal(s.leases_current, 0);
    assert_int_equal(s.refused_total, 2);
    lds_pool_free(pool);
}

/* A lease kept in its own buffer (an intrusive header) returned through the inline function
 * when the return is the call: the caller's lease is cleared before the buffer goes, as the
 * library clears it. Found by a reviewer (session 5): a fallback that worked on a copy of
 * the lease wrote the zeroed lease back after the call, into a buffer the call had unmapped
 * (bypass mode, or a buffer dropped past the retention cap: SIGSEGV) or armed with a
 * canary (canary failures). */
static void test_inline_lease_in_its_own_buffer(void **state)
{
    (void)state;
    const lds_pool_check modes[] = {LDS_POOL_CHECK_BYPASS, LDS_POOL_CHECK_CANARY,
                                    LDS_POOL_CHECK_GUARD, LDS_POOL_CHECK_OFF};
    for (int m = 0; m < 4; m++) {
        /* default mode: a cap of one buffer, so the second buffer out is dropped (unmapped) */
        lds_pool *pool = make_pool(modes[m], modes[m] == LDS_POOL_CHECK_OFF ? (2u << 20) : 0);
        lds_lease keep;
        if (modes[m] == LDS_POOL_CHECK_OFF)
            assert_int_equal(lds_pool_rent_inline(pool, 2u << 20, &keep), LDS_OK);
        for (int i = 0; i < 3; i++) {
            lds_lease l;
            assert_int_equal(lds_pool_rent_inline(pool, 2u << 20, &l), LDS_OK);
            lds_lease *self = (lds_lease *)l.ptr;
            *self = l;
            assert_int_equal(lds_pool_return_inline(pool, self, 0), LDS_OK);
        }
        if (modes[m] == LDS_POOL_CHECK_OFF)
            assert_int_equal(lds_pool_return_inline(pool, &keep, 0), LDS_OK);
        lds_pool_stats s = stats_of(pool);
        assert_int_equal(s.canary_failures, 0);
        assert_int_equal(s.returns, s.rents);
        assert_int_equal(s.refused_total, 0);
        if (modes[m] == LDS_POOL_CHECK_OFF)
            assert_int_equal(s.drops, 3);
        lds_pool_free(pool);
    }
}

/* The renter's own (double) return of a lease kept in its own buffer, after another thread
 * returned a copy of it: the library collects that return during the call, which ends the
 * lease and lets the buffer go, then refuses this one without writing. Found by a reviewer
 * (session 5): a fallback that worked on a copy of the lease wrote it back after the call,
 * into the buffer just unmapped (bypass, guard: SIGSEGV) or canaried (a false canary
 * failure); the fallback now hands the library the caller's lease itself. */
static lds_lease g_copy;
static lds_status g_copy_got;

static void *return_copy(void *arg)
{
    g_copy_got = lds_pool_return_inline((lds_pool *)arg, &g_copy, 0);
    return NULL;
}

static void test_inline_double_return_of_self_held_lease(void **state)
{
    (void)state;
    const lds_pool_check modes[] = {LDS_POOL_CHECK_BYPASS, LDS_POOL_CHECK_GUARD,
                                    LDS_POOL_CHECK_CANARY, LDS_POOL_CHECK_OFF};
    for (int m = 0; m < 4; m++) {
        lds_pool *pool = make_pool(modes[m], 0);
        lds_lease l;
        assert_int_equal(lds_pool_rent_inline(pool, 100, &l), LDS_OK);
        lds_lease *self = (lds_lease *)l.ptr;
        *self = l;
        g_copy = l;
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, return_copy, pool), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(g_copy_got, LDS_OK);
        assert_int_equal(lds_pool_return_inline(pool, self, 0), LDS_E_POOL_REFUSED);
        lds_pool_stats s = stats_of(pool);
        assert_int_equal(s.rents, 1);
        assert_int_equal(s.returns, 1);
        assert_int_equal(s.leases_current, 0);
        assert_int_equal(s.refused[LDS_POOL_REFUSED_STALE], 1);
        assert_int_equal(s.canary_failures, 0);
        if (modes[m] == LDS_POOL_CHECK_CANARY) { /* the next rent checks the canary */
            assert_int_equal(lds_pool_rent_inline(pool, 100, &l), LDS_OK);
            assert_int_equal(stats_of(pool).canary_failures, 0);
            assert_int_equal(lds_pool_return_inline(pool, &l, 0), LDS_OK);
        }
        lds_pool_free(pool);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inline_warm_pair),  cmocka_unit_test(test_inline_mixed_and_large),
        cmocka_unit_test(test_inline_refusals),   cmocka_unit_test(test_inline_cross_thread),
        cmocka_unit_test(test_inline_falls_back), cmocka_unit_test(test_inline_past_first_chunk),
        cmocka_unit_test(test_inline_lease_in_its_own_buffer),
        cmocka_unit_test(test_inline_double_return_of_self_held_lease),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
