/*
 * pool.c: rent and return (the warm path and its full paths), trimming, fork handling,
 * options, creation and the shared pool. The other jobs live beside it: buffers.c (size
 * classes, slots, buffers), checks.c (checked modes, guard quarantine), shared.c (shared
 * stacks, retention, idle trimming), tcache.c (thread caches, cross-thread returns),
 * stats.c (statistics), os.c (system calls). See pool_internal.h for the layout.
 */
#include "pool_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

pthread_mutex_t lds__g_lock = PTHREAD_MUTEX_INITIALIZER;

static _Atomic uint64_t g_next_pool_id = 1;
static _Atomic uint64_t g_next_stamp = 1;
static _Atomic(lds_pool *) g_shared;
static pthread_mutex_t g_shared_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
static lds_pool *g_pools; /* the registry of live pools, under lds__g_lock */

#define RLX         memory_order_relaxed
#define LIKELY(x)   __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The cause of refusing handle `h` (odd generation, never retired) whose slot's word is
 * `w` != h. A slot's generation only grows, from its pool's gen_start: a handle whose
 * generation is ahead of the slot's, or below the pool's start, or the slot's own with
 * other class bits, was never given by this pool (a forged handle, or another pool's
 * lease: docs/adr/0027), so it is unknown; any other generation is counted as given and
 * ended (stale), which another pool's lease is too once the slot has passed its
 * generation: the handle cannot tell. */
__attribute__((cold)) static lds_pool_refusal mismatch_cause(const lds_pool *pool, uint64_t w,
                                                             uint64_t h)
{
    uint64_t hg = h >> LDS__POOL_GEN_SHIFT, wg = w >> LDS__POOL_GEN_SHIFT;
    if (((w ^ h) & ~LDS__POOL_CLS_MASK) == 0 || hg > wg || hg < pool->gen_start)
        return LDS_POOL_REFUSED_UNKNOWN;
    return LDS_POOL_REFUSED_STALE;
}

/* ==== rent and return ===================================================== */

/* The warm path is lds_pool_rent and lds_pool_return themselves: a thread-cache hit on
 * rent, a thread-cache push on return of a lease this thread rented, on a pool in the
 * default mode. It reads the thread's cache, the pool's stamp, one slot and one cache row,
 * does no atomic read-modify-write (the renting thread alone ends its leases, with a plain
 * store: docs/pool-protocol.md), and leaves everything else (the shared pool, errors,
 * refusals, trims, checked modes, misses, full caches, other threads' leases, collecting
 * returns queued by other threads) to the out-of-line functions, which keep the whole
 * logic. */

/* One comparison: `tc` belongs to `pool`, has seen the pool's last trim, and the pool is
 * in the default mode (see LDS__POOL_STAMP_SLOW). */
static inline int stamp_ok(const lds__tcache *tc, lds_pool *pool)
{
    return tc->stamp == atomic_load_explicit(&pool->stamp, memory_order_acquire);
}

/* Hands out slot `s` (owned by the caller: just taken from a cache or created) as a lease
 * of cache `tc`, whose owner it already names (see lease_out). Its generation becomes odd;
 * plain stores suffice, no other thread can end a lease the slot does not have yet (a
 * racing stale return is refused, at once or when collected: see remote_collect). The
 * word is stored last (release), so a thread that reads the new word reads the slot's
 * owner and length. A cached slot's generation is below LDS__POOL_GEN_RETIRE (a slot
 * retires at the return that reaches it), so the handle never has LDS__POOL_RETIRED set. */
static inline void lease_out_owned(lds__slot *s, void *p, size_t len, size_t cap, lds_lease *out)
{
    uint64_t w = atomic_load_explicit(&s->word, RLX) + LDS__POOL_GEN_STEP;
    atomic_store_explicit(&s->length, len, RLX);
    atomic_store_explicit(&s->word, w, memory_order_release);
    out->ptr = p;
    out->length = len;
    out->capacity = cap;
    out->handle = w;
}

/* The same for a slot that may not name `tc` as its owner yet (the full path: a slot from
 * the shared stacks or a new buffer). A slot in a cache's items always names that cache,
 * so the warm rent skips this store: every slot enters a cache's items on its owner's
 * return (lds__recycle), and `owner` changes only here. */
static inline void lease_out(lds__tcache *tc, lds__slot *s, void *p, size_t len, lds_lease *out)
{
    atomic_store_explicit(&s->owner, tc, RLX);
    lease_out_owned(s, p, len, atomic_load_explicit(&s->cap, RLX), out);
}

__attribute__((noinline, cold)) lds_status lds__refuse(lds_pool *pool, lds_pool_refusal why)
{
    lds__count(&pool->refused[why], 1);
    return LDS_E_POOL_REFUSED;
}

/* ==== rent and return ===================================================== */

__attribute__((noinline, cold)) static lds_status rent_full(lds_pool *pool, size_t min_bytes,
                                                            lds_lease *out)
{
    if (!out)
        return LDS_E_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (min_bytes > LDS_POOL_MAX_REQUEST)
        return LDS_E_LIMIT;
    if (!pool && !(pool = lds_pool_shared()))
        return LDS_E_NOMEM;
    lds__tcache *tc = lds__tc_sync(pool);
    if (!tc)
        return LDS_E_NOMEM;
    if (atomic_load_explicit(&tc->remote_head, RLX) != 0)
        lds__remote_collect(pool, tc, tc);
    uint32_t cls = lds__pool_class(min_bytes);
    size_t cap = lds__class_capacity(cls);
    uint32_t idx;
    lds__slot *s;
    char *p;
    int hit;
    _Atomic uint64_t *kind = NULL; /* a buffer not from this cache: its hit or miss */
    for (;;) {
        uint8_t n = atomic_load_explicit(&tc->n[cls], RLX);
        hit = n > 0;
        if (hit) {
            s = tc->items[cls][n - 1];
            idx = lds__slot_idx(s);
            atomic_store_explicit(&tc->n[cls], (uint8_t)(n - 1), RLX);
        } else {
            idx = lds__rent_slow(pool, tc, cls, cap, &kind);
            if (idx == LDS__POOL_NO_SLOT)
                return LDS_E_NOMEM;
            s = lds__slot_at(pool, idx);
            lds__held_add(tc, cap);
        }
        p = (char *)atomic_load_explicit(&s->ptr, RLX);
        if (lds__on_rent(pool, idx, p, min_bytes, cap))
            break;
        lds__count(&pool->canary_failures, 1);
        lds__count(&pool->drops, 1);
        lds__held_sub(tc, cap);
        lds__buffer_destroy(pool, idx);
    }
    if (!hit) {
        lds__count(kind, 1);
        lds__tally_add(&tc->misses[cls], 1);
    }
    lds__tally_add(&tc->requested, min_bytes);
    lease_out(tc, s, p, min_bytes, out);
    return LDS_OK;
}

lds_status lds_pool_rent(lds_pool *pool, size_t min_bytes, lds_lease *out)
{
    lds__tcache *tc = lds__tls_last; /* never NULL: lds__tc_none matches no pool's stamp */
    if (UNLIKELY(!pool)) {
        pool = atomic_load_explicit(&g_shared, memory_order_acquire);
        if (UNLIKELY(!pool))
            return rent_full(NULL, min_bytes, out);
    }
    /* One branch for three conditions: the cache is this pool's and has seen its last trim,
     * the pool is in the default mode, no cross-thread return waits to be collected. */
    if (UNLIKELY(!out || ((tc->stamp ^ atomic_load_explicit(&pool->stamp, memory_order_acquire)) |
                          atomic_load_explicit(&tc->remote_head, RLX)) != 0))
        return rent_full(pool, min_bytes, out);
    uint32_t cls;
    if (LIKELY(min_bytes <= LDS__POOL_TABLE_MAX)) {
        cls = lds__pool_class_small(min_bytes);
    } else {
        if (UNLIKELY(min_bytes > LDS_POOL_MAX_REQUEST))
            return rent_full(pool, min_bytes, out);
        cls = lds__pool_class(min_bytes);
    }
    size_t n = atomic_load_explicit(&tc->n[cls], RLX);
    if (UNLIKELY(n == 0))
        return rent_full(pool, min_bytes, out);
    lds__slot *s = tc->items[cls][n - 1];
    atomic_store_explicit(&tc->n[cls], (uint8_t)(n - 1), RLX);
    void *p = (void *)atomic_load_explicit(&s->ptr, RLX);
    size_t cap = atomic_load_explicit(&s->cap, RLX);
    lds__asan_unpoison(p, cap);
    /* The one counter of the warm path; the rent itself is counted by the generation. */
    lds__tally_add(&tc->requested, min_bytes);
    lease_out_owned(s, p, min_bytes, cap, out);
    return LDS_OK;
}

/* Keeps or frees the buffer of slot `s`, whose lease of cache `holder` has just ended.
 * `tc` is the calling thread's cache for `pool` (then tc == holder), or NULL (an abandoned
 * cache's lease: the buffer goes to the shared stacks). Unless the buffer stays in tc's
 * items, it leaves what `holder` holds. */
__attribute__((noinline)) lds_status lds__recycle(lds_pool *pool, lds__tcache *holder,
                                                  lds__tcache *tc, lds__slot *s, unsigned flags)
{
    uint32_t idx = lds__slot_idx(s), cls = s->cls;
    size_t cap = atomic_load_explicit(&s->cap, RLX);
    char *p = (char *)atomic_load_explicit(&s->ptr, RLX);
    lds_pool_check mode = pool->opts.check;
    int retired = (atomic_load_explicit(&s->word, RLX) & LDS__POOL_RETIRED) != 0;
    uint8_t n = tc ? atomic_load_explicit(&tc->n[cls], RLX) : 0;
    int to_cache =
        tc && s->pooled && n < pool->tc_limit[cls] && mode == LDS_POOL_CHECK_OFF && !retired;
    if (!to_cache)
        lds__held_sub(holder, cap);
    if (retired) {
        /* Its generation is spent: the buffer goes, the slot stays out of use for good. */
        lds__buffer_destroy(pool, idx);
        return LDS_OK;
    }
    if (!s->pooled || mode == LDS_POOL_CHECK_BYPASS) {
        lds__buffer_destroy(pool, idx);
        lds__count(&pool->drops, 1);
        return LDS_OK;
    }
    lds__asan_unpoison(p, cap);
    if (flags & LDS_RETURN_CLEAR)
        memset(p, 0, cap);
    if (mode == LDS_POOL_CHECK_CANARY) {
        lds__canary_apply(pool, idx, p, cap, 1, NULL);
        s->armed = 1;
    } else if (mode == LDS_POOL_CHECK_POISON)
        memset(p, LDS_POOL_FREED_BYTE, cap);
    lds__asan_poison(p, cap);

    if (mode == LDS_POOL_CHECK_GUARD) {
        idx = lds__quarantine_push(pool, idx);
        if (idx == LDS__POOL_NO_SLOT)
            return LDS_OK;
    } else if (to_cache) {
        tc->items[cls][n] = s;
        atomic_store_explicit(&tc->n[cls], (uint8_t)(n + 1), RLX);
        return LDS_OK;
    }
    lds__maybe_age(pool);
    lds__shared_push(pool, idx, lds__now_ns());
    return LDS_OK;
}

__attribute__((noinline, cold)) static lds_status return_full(lds_pool *pool, lds_lease *lease,
                                                              unsigned flags)
{
    if (!lease || (flags & ~LDS_RETURN_CLEAR) != 0)
        return LDS_E_INVALID_ARG;
    if (!pool && !(pool = lds_pool_shared()))
        return LDS_E_NOMEM;
    uint64_t h = lease->handle;
    uint32_t idx = (uint32_t)(h & LDS__POOL_IDX_MASK);
    if (h == 0)
        return lds__refuse(pool, LDS_POOL_REFUSED_STALE); /* zeroed by an earlier return */
    lds__slot *s = lds__slot_at(pool, idx);
    /* Never a handle: an even generation, or one with the retired bit. */
    if (!s || (h & LDS__POOL_GEN_STEP) == 0 || (h & LDS__POOL_RETIRED))
        return lds__refuse(pool, LDS_POOL_REFUSED_UNKNOWN);
    uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
    if (w != h)
        return lds__refuse(pool, mismatch_cause(pool, w, h));
    if (atomic_load_explicit(&s->ptr, RLX) != (uintptr_t)lease->ptr || lease->ptr == NULL)
        return lds__refuse(pool, LDS_POOL_REFUSED_POINTER);
    if (lease->capacity != atomic_load_explicit(&s->cap, RLX) ||
        lease->length != atomic_load_explicit(&s->length, RLX))
        return lds__refuse(pool, LDS_POOL_REFUSED_SIZE);
    /* Read after the word: the owner of lease h (lease_out stores it first). */
    lds__tcache *owner = atomic_load_explicit(&s->owner, RLX);
    lds__tcache *tc = lds__tc_sync(pool);
    if (tc && atomic_load_explicit(&tc->remote_head, RLX) != 0)
        lds__remote_collect(pool, tc, tc);
    if (!tc || owner != tc) {
        /* Another thread's lease: claimed here, ended when its owner collects it, which may
         * be at once (an exited owner's) or on its thread at any moment after the claim, so
         * the lease is zeroed before it: it may live in its own buffer. A refused claim
         * leaves it as it was. */
        lds_lease keep = *lease;
        memset(lease, 0, sizeof *lease);
        lds_status st = lds__remote_claim(
            pool, owner, s, h | ((flags & LDS_RETURN_CLEAR) ? LDS__POOL_CLAIM_CLEAR : 0), 0);
        if (st != LDS_OK)
            *lease = keep;
        return st;
    }
    /* Our own lease; the collection above may just have ended it (claimed elsewhere). */
    if (atomic_load_explicit(&s->word, RLX) != h ||
        (atomic_load_explicit(&s->remote, memory_order_acquire) & ~LDS__POOL_CLAIM_CLEAR) == h)
        return lds__refuse(pool,
                           LDS_POOL_REFUSED_STALE); /* another thread's return of it is queued */
    atomic_store_explicit(&s->word, h + LDS__POOL_GEN_STEP, memory_order_release);
    memset(lease, 0, sizeof *lease);
    return lds__recycle(pool, tc, tc, s, flags);
}

lds_status lds_pool_return(lds_pool *pool, lds_lease *lease, unsigned flags)
{
    lds__tcache *tc = lds__tls_last; /* never NULL: lds__tc_none matches no pool's stamp */
    if (UNLIKELY(!pool)) {
        pool = atomic_load_explicit(&g_shared, memory_order_acquire);
        if (UNLIKELY(!pool))
            return return_full(NULL, lease, flags);
    }
    if (UNLIKELY(!lease || flags != 0 || !stamp_ok(tc, pool)))
        return return_full(pool, lease, flags);
    uint64_t h = lease->handle;
    uint32_t idx = (uint32_t)(h & LDS__POOL_IDX_MASK);
    /* A slot of the first chunk needs no bounds check: chunk0 has all of its slots (zeroed
     * until used, lds__no_slots before the chunk exists), and a slot never used has a zero
     * word, which matches no handle below. The first chunk's address does not depend on
     * the handle, so it can be loaded ahead of it. */
    lds__slot *s;
    if (LIKELY(idx < LDS__POOL_CHUNK_SLOTS)) {
        s = atomic_load_explicit(&pool->chunk0, memory_order_acquire) + idx;
    } else {
        s = lds__slot_at(pool, idx);
        if (UNLIKELY(!s))
            return return_full(pool, lease, flags);
    }
    /* Anything amiss (an even generation: h == 0, or a cached or retired slot's word;
     * another cache's lease; a claimed return queued on the slot) is sorted out, and
     * refused by cause, on the full path. */
    void *p = lease->ptr;
    size_t len = lease->length, cap = atomic_load_explicit(&s->cap, RLX);
    if (UNLIKELY((h & LDS__POOL_GEN_STEP) == 0 ||
                 atomic_load_explicit(&s->word, memory_order_acquire) != h ||
                 atomic_load_explicit(&s->owner, RLX) != tc ||
                 atomic_load_explicit(&s->ptr, RLX) != (uintptr_t)p || lease->capacity != cap ||
                 atomic_load_explicit(&s->length, RLX) != len ||
                 atomic_load_explicit(&s->remote, RLX) != 0))
        return return_full(pool, lease, flags);
    /* Only this thread ends its leases: a plain store, no read-modify-write. A return of
     * this lease racing on another thread has claimed it, or will; its claim is refused
     * when this thread collects it (the word has moved on). The return is counted by the
     * generation, nothing else (stats.c). */
    uint64_t next = h + LDS__POOL_GEN_STEP;
    atomic_store_explicit(&s->word, next, memory_order_release);
    /* The class from the handle (equal to the word, so to the slot's class): the row's
     * address does not wait for a load from the slot. */
    uint32_t cls = lds__handle_cls(h);
    memset(lease, 0, sizeof *lease);
    size_t n = atomic_load_explicit(&tc->n[cls], RLX);
    /* tc_lim is 0 for a slot that is not pooled; a slot whose generation this return spent
     * (LDS__POOL_RETIRED) retires in recycle. */
    if (UNLIKELY(n >= s->tc_lim || (next & LDS__POOL_RETIRED)))
        return lds__recycle(pool, tc, tc, s, 0);
    lds__asan_poison(p, cap);
    tc->items[cls][n] = s;
    atomic_store_explicit(&tc->n[cls], (uint8_t)(n + 1), RLX);
    return LDS_OK;
}

void lds_scoped_lease_end(lds_scoped_lease *s)
{
    if (s && s->lease.handle != 0)
        lds_pool_return(s->pool, &s->lease, 0);
}

/* ==== trimming ============================================================ */

/* A stamp no pool has had (see LDS__POOL_STAMP_SLOW). */
static uint64_t fresh_stamp(const lds_pool *pool)
{
    int slow = pool->opts.check != LDS_POOL_CHECK_OFF || pool->opts.fill_on_rent >= 0;
    return (atomic_fetch_add_explicit(&g_next_stamp, 1, RLX) << 1) |
           (slow ? LDS__POOL_STAMP_SLOW : 0u);
}

lds_status lds_pool_trim(lds_pool *pool, lds_pool_trim_mode mode, size_t *freed_bytes)
{
    size_t freed = 0;
    if (freed_bytes)
        *freed_bytes = 0;
    if (mode != LDS_POOL_TRIM_ALL && mode != LDS_POOL_TRIM_IDLE)
        return LDS_E_INVALID_ARG;
    if (!pool && !(pool = lds_pool_shared()))
        return LDS_E_NOMEM;
    if (mode == LDS_POOL_TRIM_IDLE) {
        lds__pool_collect_mine(pool);
        lds__trim_idle(pool, lds__now_ns(), &freed);
    } else {
        /* Other threads empty their caches at their next call (they see the new epoch);
         * the calling thread's cache is emptied here. */
        uint64_t st = fresh_stamp(pool);
        atomic_store_explicit(&pool->stamp, st, memory_order_release);
        lds__tcache *tc = lds__tc_get(pool);
        if (tc) {
            tc->stamp = st & ~(uint64_t)LDS__POOL_STAMP_SLOW;
            if (atomic_load_explicit(&tc->remote_head, RLX) != 0)
                lds__remote_collect(pool, tc, tc);
            lds__tc_flush(tc, 1, &freed);
        }
        for (uint32_t c = 0; c < LDS__POOL_CLASSES; c++) {
            uint32_t idx;
            while ((idx = lds__shared_pop(pool, c)) != LDS__POOL_NO_SLOT) {
                lds__buffer_destroy(pool, idx);
                lds__trimmed(pool, lds__class_capacity(c), &freed);
            }
        }
        lds__quarantine_drain(pool, &freed);
    }
    if (freed_bytes)
        *freed_bytes = freed;
    return LDS_OK;
}

/* For the live index (live/live.c): frees every buffer cached in the shared stacks
 * except at most `keep` of the class of `min_bytes`; the calling thread's cross-thread
 * returns are collected first (so a generation a reader freed counts as cached). Thread
 * caches are left alone: the live index's pool has none. Returns the bytes freed. */
size_t lds__pool_keep_spares(lds_pool *pool, size_t min_bytes, uint32_t keep)
{
    size_t freed = 0;
    if (!pool)
        return 0;
    lds__pool_collect_mine(pool);
    uint32_t keep_cls = min_bytes <= LDS_POOL_MAX_REQUEST ? lds__pool_class(min_bytes) : UINT32_MAX;
    for (uint32_t c = 0; c < LDS__POOL_CLASSES; c++) {
        uint32_t limit = c == keep_cls ? keep : 0;
        for (;;) {
            lds__class *k = &pool->classes[c];
            pthread_mutex_lock(&k->lock);
            uint32_t n = k->count;
            pthread_mutex_unlock(&k->lock);
            if (n <= limit)
                break;
            uint32_t idx = lds__shared_pop(pool, c);
            if (idx == LDS__POOL_NO_SLOT)
                break;
            lds__buffer_destroy(pool, idx);
            lds__trimmed(pool, lds__class_capacity(c), &freed);
        }
    }
    return freed;
}

/* ==== fork ================================================================ */

/* fork() in a multi-threaded process copies only the calling thread: a lock another thread
 * held at that instant would stay held in the child forever. So the prepare handler takes
 * every lock of the pool, in the order of pool_internal.h, and both sides release them
 * after; no other thread is then inside a locked section when the process is copied. The
 * lock-free warm path needs nothing: a dead thread's cache is at worst one push or pop
 * short of consistent (see fork_child). */
static void fork_prepare(void)
{
    pthread_mutex_lock(&g_shared_lock);
    pthread_mutex_lock(&lds__g_lock);
    for (lds_pool *p = g_pools; p; p = p->next_live) {
        for (uint32_t c = 0; c < LDS__POOL_CLASSES; c++)
            pthread_mutex_lock(&p->classes[c].lock);
        pthread_mutex_lock(&p->guard_lock);
        pthread_mutex_lock(&p->slot_lock);
    }
}

static void fork_release(void)
{
    for (lds_pool *p = g_pools; p; p = p->next_live) {
        pthread_mutex_unlock(&p->slot_lock);
        pthread_mutex_unlock(&p->guard_lock);
        for (uint32_t c = LDS__POOL_CLASSES; c-- > 0;)
            pthread_mutex_unlock(&p->classes[c].lock);
    }
    pthread_mutex_unlock(&lds__g_lock);
    pthread_mutex_unlock(&g_shared_lock);
}

/* In the child only the forking thread lives on. The other threads' caches would keep
 * their buffers forever (and count them as retained): their buffers are valid memory in
 * the child, so each such cache is handled as at a thread's exit: it is abandoned (its
 * buffers go to the shared stacks, or are freed when there is no room; its remote-return
 * list is collected; a new thread of the child may adopt it). A thread caught inside a
 * warm rent or return leaves its cache at most one entry short: a buffer it had popped
 * (or not yet pushed) is then in no list and stays unused in the child; a buffer it was
 * about to pop is still listed, and goes to the shared stacks, never to two owners, since
 * that thread never runs again. A thread caught inside a collection of its remote list
 * leaves the leases of the part it had taken out, and never ended. Its leases stay
 * counted as out; returned in the child, they are collected from the abandoned cache.
 * The forking thread's own caches (owner == tls_self) are kept. */
static void fork_child(void)
{
    fork_release();
    pthread_mutex_lock(&lds__g_lock);
    for (lds_pool *p = g_pools; p; p = p->next_live)
        lds__tc_abandon_others(p);
    pthread_mutex_unlock(&lds__g_lock);
}

static void atfork_init(void)
{
    pthread_atfork(fork_prepare, fork_release, fork_child);
}

/* ==== creation ============================================================ */

_Static_assert(offsetof(lds_pool_options, guard_quarantine) + sizeof(uint32_t) <=
                       LDS_POOL_OPTIONS_SIZE_V1 &&
                   LDS_POOL_OPTIONS_SIZE_V1 <= sizeof(lds_pool_options),
               "the first released options layout ends within LDS_POOL_OPTIONS_SIZE_V1");

/* The index in `names` of environment variable `var`'s value, compared ignoring case; -1
 * when unset or empty, or, with one warning line on stderr, when it names none of them (a
 * bad option value warns and the default stays, as in mimalloc: a typo must not pass
 * unnoticed, nor abort a program). */
static int env_choice(const char *var, const char *const *names, int n, const char *accepted)
{
    const char *env = getenv(var);
    if (!env || !*env)
        return -1;
    for (int i = 0; i < n; i++)
        if (strcasecmp(env, names[i]) == 0)
            return i;
    fprintf(stderr, "lodestar: warning: %s=\"%.64s\" is not one of %s; using the default\n", var,
            env, accepted);
    return -1;
}

void lds_pool_options_default(lds_pool_options *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    opts->size = sizeof *opts;
    opts->check = LDS_POOL_CHECK_OFF;
    opts->fill_on_rent = -1;
    opts->max_retained_bytes = LDS_POOL_DEFAULT_MAX_RETAINED_BYTES;
    opts->max_per_class = LDS_POOL_DEFAULT_MAX_PER_CLASS;
    opts->thread_cache_count = LDS_POOL_DEFAULT_THREAD_CACHE_COUNT;
    opts->thread_cache_bytes = LDS_POOL_DEFAULT_THREAD_CACHE_BYTES;
    opts->mmap_threshold = LDS_POOL_DEFAULT_MMAP_THRESHOLD;
    opts->max_idle_ns = LDS_POOL_DEFAULT_MAX_IDLE_NS;
    opts->guard_quarantine = LDS_POOL_DEFAULT_GUARD_QUARANTINE;
    opts->huge_pages = LDS_POOL_DEFAULT_HUGE_PAGES;
    opts->large_buffers = LDS_POOL_DEFAULT_LARGE_BUFFERS;
    static const char *const checks[] = {"off", "canary", "poison", "guard", "bypass"};
    static const char *const huges[] = {"off", "on"};
    int v = env_choice(LDS_POOL_CHECK_ENV, checks, 5, "off, canary, poison, guard, bypass");
    if (v >= 0)
        opts->check = (lds_pool_check)v;
    v = env_choice(LDS_POOL_HUGE_PAGES_ENV, huges, 2, "off, on");
    if (v >= 0)
        opts->huge_pages = (lds_pool_huge_pages)v;
}

lds_status lds_pool_create(const lds_pool_options *opts, lds_pool **out)
{
    if (!out)
        return LDS_E_INVALID_ARG;
    *out = NULL;
    /* Before any lock of ours is held (see pool_internal.h, lock order). */
    pthread_once(&g_atfork_once, atfork_init);
    lds_pool_options o;
    lds_pool_options_default(&o);
    if (opts) {
        if (opts->size < LDS_POOL_OPTIONS_SIZE_V1 || opts->size > sizeof o)
            return LDS_E_INVALID_ARG;
        memcpy(&o, opts, opts->size);
        o.size = sizeof o;
    }
    if ((unsigned)o.check > LDS_POOL_CHECK_BYPASS || o.fill_on_rent < -1 || o.fill_on_rent > 255 ||
        (unsigned)o.huge_pages > LDS_POOL_HUGE_PAGES_ON)
        return LDS_E_INVALID_ARG;
    /* Counts no pool could reach (it has LDS_POOL_MAX_BUFFERS slots) would only size the
     * stacks and the quarantine below: refused, not allocated. */
    if (o.max_per_class > LDS_POOL_MAX_BUFFERS || o.guard_quarantine > LDS_POOL_MAX_BUFFERS ||
        (o.large_buffers > LDS_POOL_MAX_BUFFERS && o.large_buffers != LDS_POOL_LARGE_BUFFERS_NONE))
        return LDS_E_INVALID_ARG;
    if (o.max_retained_bytes == 0) /* "zero means the default" (it used to mean: keep nothing) */
        o.max_retained_bytes = LDS_POOL_DEFAULT_MAX_RETAINED_BYTES;
    if (o.max_per_class == 0)
        o.max_per_class = LDS_POOL_DEFAULT_MAX_PER_CLASS;
    if (o.thread_cache_bytes == 0)
        o.thread_cache_bytes = LDS_POOL_DEFAULT_THREAD_CACHE_BYTES;
    if (o.mmap_threshold == 0)
        o.mmap_threshold = LDS_POOL_DEFAULT_MMAP_THRESHOLD;
    if (o.max_idle_ns == 0)
        o.max_idle_ns = LDS_POOL_DEFAULT_MAX_IDLE_NS;
    if (o.guard_quarantine == 0)
        o.guard_quarantine = LDS_POOL_DEFAULT_GUARD_QUARANTINE;
    if (o.large_buffers == 0)
        o.large_buffers = LDS_POOL_DEFAULT_LARGE_BUFFERS;
    else if (o.large_buffers == LDS_POOL_LARGE_BUFFERS_NONE)
        o.large_buffers = 0;
    if (o.thread_cache_count > LDS__POOL_TC_MAX)
        o.thread_cache_count = LDS__POOL_TC_MAX;

    lds_pool *pool = aligned_alloc(64, (sizeof *pool + 63u) & ~(size_t)63u);
    if (!pool)
        return LDS_E_NOMEM;
    memset(pool, 0, sizeof *pool);
    pool->opts = o;
    pool->id = atomic_fetch_add(&g_next_pool_id, 1);
    pool->gen_start = lds__pool_gen_start(pool->id);
    atomic_store_explicit(&pool->stamp, fresh_stamp(pool), RLX);
    pool->canary_key = UINT64_C(0x9E3779B97F4A7C15) ^ ((uint64_t)(uintptr_t)pool << 7);
    pool->free_slots = LDS__POOL_NO_SLOT;
    atomic_store_explicit(&pool->chunk0, lds__no_slots, RLX);
    pthread_mutex_init(&pool->slot_lock, NULL);
    pthread_mutex_init(&pool->guard_lock, NULL);
    int ok = 1;
    for (uint32_t c = 0; c < LDS__POOL_CLASSES; c++) {
        size_t cap = lds__class_capacity(c);
        size_t n = o.thread_cache_bytes / cap;
        pool->tc_limit[c] = (uint8_t)(n < o.thread_cache_count ? n : o.thread_cache_count);
        pthread_mutex_init(&pool->classes[c].lock, NULL);
        /* A class never pools more than max_retained_bytes / cap buffers (admit). */
        size_t room = o.max_retained_bytes / cap;
        room = room < o.max_per_class ? room : o.max_per_class;
        /* Above the cap, the large buffers kept (admit_large) may all be of this class. */
        if (cap > o.max_retained_bytes && cap >= LDS_POOL_LARGE_MIN)
            room = o.large_buffers;
        pool->classes[c].room = room ? (uint32_t)room : 1u;
        pool->classes[c].stack = malloc(pool->classes[c].room * sizeof(uint32_t));
        ok = ok && pool->classes[c].stack != NULL;
    }
    pool->quarantine = malloc(o.guard_quarantine * sizeof(uint32_t));
    if (!ok || !pool->quarantine) {
        lds_pool_free(pool);
        return LDS_E_NOMEM;
    }
    pthread_mutex_lock(&lds__g_lock);
    pool->next_live = g_pools;
    if (g_pools)
        g_pools->prev_live = pool;
    g_pools = pool;
    pool->registered = 1;
    pthread_mutex_unlock(&lds__g_lock);
    *out = pool;
    return LDS_OK;
}

void lds_pool_free(lds_pool *pool)
{
    if (!pool || pool->is_shared)
        return;
    pthread_mutex_lock(&lds__g_lock);
    /* A live thread's cache is freed by that thread (tc_slow, its exit); an abandoned one,
     * which no thread lists, here. */
    for (lds__tcache *tc = pool->tcaches, *next; tc; tc = next) {
        next = tc->next_in_pool;
        if (atomic_load_explicit(&tc->abandoned, RLX))
            free(tc);
        else
            tc->dead = 1;
    }
    pool->tcaches = NULL;
    if (pool->registered) {
        if (pool->prev_live)
            pool->prev_live->next_live = pool->next_live;
        else
            g_pools = pool->next_live;
        if (pool->next_live)
            pool->next_live->prev_live = pool->prev_live;
    }
    pthread_mutex_unlock(&lds__g_lock);
    if (lds__tls_last->pool_id == pool->id)
        lds__tls_last = &lds__tc_none;
    /* Every slot that still holds a buffer (cached, quarantined or leased) is freed. */
    uint32_t n = atomic_load_explicit(&pool->slot_count, RLX);
    for (uint32_t i = 0; i < n; i++) {
        lds__slot *s = lds__slot_at(pool, i);
        if (s && atomic_load_explicit(&s->ptr, RLX) != 0)
            (void)lds__buffer_release_memory(pool, s); /* munmap needs no access to the pages */
    }
    for (uint32_t c = 0; c < LDS__POOL_MAX_CHUNKS; c++)
        free(atomic_load_explicit(&pool->chunks[c], RLX));
    for (uint32_t c = 0; c < LDS__POOL_CLASSES; c++) {
        pthread_mutex_destroy(&pool->classes[c].lock);
        free(pool->classes[c].stack);
    }
    free(pool->quarantine);
    pthread_mutex_destroy(&pool->slot_lock);
    pthread_mutex_destroy(&pool->guard_lock);
    free(pool);
}

lds_pool *lds_pool_shared(void)
{
    lds_pool *p = atomic_load_explicit(&g_shared, memory_order_acquire);
    if (__builtin_expect(p != NULL, 1))
        return p;
    pthread_once(&g_atfork_once, atfork_init); /* not under g_shared_lock: see lds_pool_create */
    pthread_mutex_lock(&g_shared_lock);
    p = atomic_load_explicit(&g_shared, memory_order_acquire);
    if (!p && lds_pool_create(NULL, &p) == LDS_OK) {
        p->is_shared = 1;
        atomic_store_explicit(&g_shared, p, memory_order_release);
    }
    pthread_mutex_unlock(&g_shared_lock);
    return p;
}

/* ==== test hooks ========================================================== */

lds_status lds__pool_test_set_generation(lds_pool *pool, uint64_t handle, uint64_t gen)
{
    lds__slot *s = pool ? lds__slot_at(pool, (uint32_t)(handle & LDS__POOL_IDX_MASK)) : NULL;
    if (!s || (gen & 1u) || gen >= LDS__POOL_GEN_RETIRE ||
        (atomic_load_explicit(&s->word, RLX) & (LDS__POOL_GEN_STEP | LDS__POOL_RETIRED)))
        return LDS_E_INVALID_ARG;
    /* The buffer's rents so far are kept (its generation base moves with it). */
    uint64_t w = atomic_load_explicit(&s->word, RLX);
    s->gen_base += gen - (w >> LDS__POOL_GEN_SHIFT);
    atomic_store_explicit(&s->word, gen << LDS__POOL_GEN_SHIFT | (w & (LDS__POOL_GEN_STEP - 1)),
                          RLX);
    return LDS_OK;
}
