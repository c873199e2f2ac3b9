/*
 * tcache.c: thread caches (creation, adoption, flushing, abandonment at thread exit) and
 * the cross-thread return protocol (claims, remote-return lists, collection;
 * docs/pool-protocol.md).
 */
#include "pool_internal.h"

#include <stdlib.h>
#include <string.h>

#define RLX memory_order_relaxed

static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;

/* The calling thread's caches, one per pool it used. Heap-allocated so the pthread key
 * destructor can flush them whatever the order in which the thread's TLS is torn down. */
typedef struct tls_root {
    lds__tcache *list;
} tls_root;

static _Thread_local tls_root *tls_self __attribute__((tls_model("initial-exec")));
lds__tcache lds__tc_none;
_Thread_local lds__tcache *lds__pool_tls_v1 __attribute__((tls_model("initial-exec"))) =
    &lds__tc_none;
#ifdef LDS__ASAN
_Thread_local lds__tcache *lds__tls_last __attribute__((tls_model("initial-exec"))) = &lds__tc_none;
#endif

/* ==== thread caches ======================================================= */

static void tc_destructor(void *arg);

static void key_init(void)
{
    pthread_key_create(&g_key, tc_destructor);
}

/* Moves every buffer of `tc` to the shared stacks (or frees it when there is no room). */
void lds__tc_flush(lds__tcache *tc, int destroy, size_t *freed)
{
    lds_pool *pool = tc->pool;
    uint64_t now = lds__now_ns();
    for (uint32_t c = 0; c < LDS__POOL_CLASSES; c++) {
        size_t cap = lds__class_capacity(c);
        uint8_t n = atomic_load_explicit(&tc->n[c], RLX);
        while (n > 0) {
            uint32_t idx = lds__slot_idx(tc->items[c][--n]);
            atomic_store_explicit(&tc->n[c], n, RLX);
            lds__held_sub(tc, cap);
            if (destroy) {
                lds__buffer_destroy(pool, idx);
                lds__trimmed(pool, cap, freed);
            } else {
                lds__shared_push(pool, idx, now);
            }
        }
    }
}

/* Abandons `tc`, whose thread is gone (its exit, or a forked child's other threads):
 * its cached buffers go to the shared stacks, then its remote-return list is collected.
 * The cache stays with its pool (a slot's `owner` may name it) until a new thread adopts
 * it or the pool is freed. Under lds__g_lock. `abandoned` is set before the list is taken
 * (both sequentially consistent), and a pusher reads it after its push (remote_push): so
 * either this collection sees the push, or the pusher sees the flag and collects. */
void lds__tc_abandon(lds__tcache *tc)
{
    lds__tc_flush(tc, 0, NULL);
    atomic_store(&tc->abandoned, 1);
    lds__remote_collect(tc->pool, tc, NULL);
}

/* Thread exit: every cache of the thread is abandoned to its pool (or freed, when its
 * pool is gone). */
static void tc_destructor(void *arg)
{
    tls_root *root = arg;
    pthread_mutex_lock(&lds__g_lock);
    lds__tcache *tc = root->list;
    while (tc) {
        lds__tcache *next = tc->next_in_thread;
        if (!tc->dead) {
            tc->next_in_thread = NULL;
            tc->owner = NULL;
            lds__tc_abandon(tc);
        } else {
            free(tc);
        }
        tc = next;
    }
    pthread_mutex_unlock(&lds__g_lock);
    free(root);
    tls_self = NULL;
    lds__tls_last = &lds__tc_none;
}

static lds__tcache *tc_slow(lds_pool *pool)
{
    if (!tls_self) {
        pthread_once(&g_key_once, key_init);
        tls_self = calloc(1, sizeof *tls_self);
        if (!tls_self)
            return NULL;
        pthread_setspecific(g_key, tls_self);
    }
    lds__tcache *found = NULL;
    pthread_mutex_lock(&lds__g_lock);
    for (lds__tcache **pp = &tls_self->list; *pp;) {
        lds__tcache *tc = *pp;
        if (tc->dead) {
            *pp = tc->next_in_thread;
            if (lds__tls_last == tc)
                lds__tls_last = &lds__tc_none;
            free(tc);
            continue;
        }
        if (tc->pool_id == pool->id)
            found = tc;
        pp = &tc->next_in_thread;
    }
    int adopted = 0;
    if (!found) {
        /* A cache abandoned by an exited thread is taken over, with its leases. */
        for (lds__tcache *tc = pool->tcaches; tc; tc = tc->next_in_pool) {
            if (atomic_load_explicit(&tc->abandoned, RLX)) {
                found = tc;
                atomic_store(&tc->abandoned, 0);
                tc->owner = tls_self;
                tc->stamp = atomic_load_explicit(&pool->stamp, memory_order_acquire) &
                            ~(uint64_t)LDS__POOL_STAMP_SLOW;
                tc->next_in_thread = tls_self->list;
                tls_self->list = tc;
                adopted = 1;
                break;
            }
        }
    }
    if (!found) {
        /* Whole cache lines of its own: nothing another thread writes shares them. */
        found = aligned_alloc(64, sizeof *found);
        if (found) {
            memset(found, 0, sizeof *found);
            found->pool = pool;
            found->pool_id = pool->id;
            found->owner = tls_self;
            found->stamp = atomic_load_explicit(&pool->stamp, memory_order_acquire) &
                           ~(uint64_t)LDS__POOL_STAMP_SLOW;
            found->next_in_thread = tls_self->list;
            tls_self->list = found;
            found->next_in_pool = pool->tcaches;
            if (pool->tcaches)
                pool->tcaches->prev_in_pool = found;
            pool->tcaches = found;
        }
    }
    pthread_mutex_unlock(&lds__g_lock);
    if (found)
        lds__tls_last = found;
    if (adopted)
        lds__remote_collect(pool, found, found); /* pushed since its last collection */
    return found;
}

lds__tcache *lds__tc_get(lds_pool *pool)
{
    lds__tcache *tc = lds__tls_last;
    if (tc->pool_id == pool->id)
        return tc;
    return tc_slow(pool);
}

/* The calling thread's cache for `pool`, emptied first if the pool was trimmed since the
 * cache last looked (its stamp changed); NULL when out of memory. */
lds__tcache *lds__tc_sync(lds_pool *pool)
{
    lds__tcache *tc = lds__tc_get(pool);
    if (!tc)
        return NULL;
    uint64_t st =
        atomic_load_explicit(&pool->stamp, memory_order_acquire) & ~(uint64_t)LDS__POOL_STAMP_SLOW;
    if (st != tc->stamp) {
        tc->stamp = st;
        lds__tc_flush(tc, 1, NULL);
    }
    return tc;
}

/* ==== cross-thread returns ================================================ */

/* The protocol (docs/pool-protocol.md has the argument):
 * - the word of a leased slot is written only by its owner cache's thread (an abandoned
 *   cache's: whoever holds lds__g_lock), and only after reading it equal to the lease's
 *   handle, so each lease ends once;
 * - another thread claims a lease by moving the slot's `remote` from 0 to the handle (or
 *   from a stale, smaller handle to it) and, when it was 0, pushes the slot on the owner's
 *   list; the owner collects the list and ends each claimed lease that is still live.
 * `r` is the handle | LDS__POOL_CLAIM_CLEAR; `owner` was read after the slot's word was
 * read equal to the handle. LDS_OK (the claim is queued) or LDS_E_POOL_REFUSED. */
static void remote_push(lds_pool *pool, lds__tcache *owner, lds__slot *s, int locked);

lds_status lds__remote_claim(lds_pool *pool, lds__tcache *owner, lds__slot *s, uint64_t r,
                             int locked)
{
    uint64_t h = r & ~LDS__POOL_CLAIM_CLEAR;
    uint64_t cur = atomic_load_explicit(&s->remote, memory_order_acquire);
    for (;;) {
        uint64_t c = cur & ~LDS__POOL_CLAIM_CLEAR;
        /* c == h: another thread's return of this lease is queued (a double return);
         * c > h: a later lease of the slot is, so this one has ended (a stale handle). */
        if (c >= h && cur != 0)
            return lds__refuse(pool, LDS_POOL_REFUSED_STALE);
        if (atomic_compare_exchange_weak_explicit(&s->remote, &cur, r, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            if (cur == 0)
                remote_push(pool, owner, s, locked);
            else /* the slot was queued with a stale claim: it is refused in its place */
                (void)lds__refuse(pool, LDS_POOL_REFUSED_STALE);
            return LDS_OK;
        }
    }
}

/* Collects the remote-return list of abandoned cache `tc`, if it is still abandoned. */
static void collect_abandoned(lds_pool *pool, lds__tcache *tc, int locked)
{
    if (!locked)
        pthread_mutex_lock(&lds__g_lock);
    if (atomic_load_explicit(&tc->abandoned, RLX) && !tc->dead)
        lds__remote_collect(pool, tc, NULL);
    if (!locked)
        pthread_mutex_unlock(&lds__g_lock);
}

static void remote_push(lds_pool *pool, lds__tcache *owner, lds__slot *s, int locked)
{
    uint32_t link = lds__slot_idx(s) + 1;
    uint32_t head = atomic_load_explicit(&owner->remote_head, RLX);
    do {
        atomic_store_explicit(&s->remote_next, head, RLX);
    } while (!atomic_compare_exchange_weak_explicit(&owner->remote_head, &head, link,
                                                    memory_order_seq_cst, RLX));
    /* Read after the push (both sequentially consistent; see tc_abandon). */
    if (atomic_load(&owner->abandoned))
        collect_abandoned(pool, owner, locked);
}

/* Takes the whole remote-return list of `tc` and ends each claimed lease that is still
 * live and `tc`'s: the buffer is recycled into `cache` (tc itself, or NULL for an
 * abandoned cache: then to the shared stacks) and the return tallied in tc. A claim of a
 * lease no longer live is refused (counted) here; one of a live lease of another cache
 * (its claim took the place of a stale one) is passed on to that cache. Called by tc's
 * thread, or under lds__g_lock for an abandoned tc. */
void lds__remote_collect(lds_pool *pool, lds__tcache *tc, lds__tcache *cache)
{
    uint32_t link = atomic_exchange_explicit(&tc->remote_head, 0, memory_order_seq_cst);
    while (link != 0) {
        lds__slot *s = lds__slot_at(pool, link - 1);
        link = atomic_load_explicit(&s->remote_next, RLX);
        /* After this exchange another thread may claim (and push) the slot again: its
         * link was read before. */
        uint64_t r = atomic_exchange_explicit(&s->remote, 0, memory_order_acq_rel);
        uint64_t h = r & ~LDS__POOL_CLAIM_CLEAR;
        if (atomic_load_explicit(&s->word, memory_order_acquire) != h) {
            (void)lds__refuse(pool, LDS_POOL_REFUSED_STALE); /* ended before it was collected */
            continue;
        }
        lds__tcache *owner = atomic_load_explicit(&s->owner, RLX);
        if (owner != tc) {
            (void)lds__remote_claim(pool, owner, s, r, cache == NULL);
            continue;
        }
        atomic_store_explicit(&s->word, h + LDS__POOL_GEN_STEP, memory_order_release);
        (void)lds__recycle(pool, tc, cache, s, (r & LDS__POOL_CLAIM_CLEAR) ? LDS_RETURN_CLEAR : 0);
    }
}

void lds__pool_collect_mine(lds_pool *pool)
{
    lds__tcache *tc = lds__tls_last;
    if (tc->pool_id != pool->id) {
        tc = NULL;
        for (lds__tcache *t = tls_self ? tls_self->list : NULL; t; t = t->next_in_thread)
            if (!t->dead && t->pool_id == pool->id)
                tc = t;
    }
    if (tc && atomic_load_explicit(&tc->remote_head, RLX) != 0)
        lds__remote_collect(pool, tc, tc);
}

void lds__tc_abandon_others(lds_pool *pool)
{
    for (lds__tcache *tc = pool->tcaches; tc; tc = tc->next_in_pool) {
        if ((tls_self == NULL || tc->owner != tls_self) &&
            !atomic_load_explicit(&tc->abandoned, RLX)) {
            tc->owner = NULL;
            lds__tc_abandon(tc);
        }
    }
}
