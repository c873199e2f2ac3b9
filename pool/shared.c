/*
 * shared.c: the per-class shared stacks, retention caps and eviction, idle trimming, and
 * the slow path of a rent (shared stack, else a new buffer).
 */
#include "pool_internal.h"

#include <string.h>

#define RLX memory_order_relaxed

/* ==== shared stacks, retention, idle trimming ============================= */

void lds__shared_push(lds_pool *pool, uint32_t idx, uint64_t now)
{
    lds__slot *s = lds__slot_at(pool, idx);
    lds__class *c = &pool->classes[s->cls];
    size_t cap = lds__class_capacity(s->cls);
    s->idle_since = now;
    pthread_mutex_lock(&c->lock);
    int room = c->count < c->room;
    if (room) {
        c->stack[c->count++] = idx;
        lds__count(&pool->shared_bytes, cap);
        lds__count(&pool->shared_count, 1);
    }
    pthread_mutex_unlock(&c->lock);
    if (!room) {
        lds__buffer_destroy(pool, idx);
        lds__count(&pool->drops, 1);
    }
}

uint32_t lds__shared_pop(lds_pool *pool, uint32_t cls)
{
    lds__class *c = &pool->classes[cls];
    uint32_t idx = LDS__POOL_NO_SLOT;
    pthread_mutex_lock(&c->lock);
    if (c->count > 0) {
        idx = c->stack[--c->count];
        atomic_fetch_sub_explicit(&pool->shared_bytes, lds__class_capacity(cls), RLX);
        atomic_fetch_sub_explicit(&pool->shared_count, 1, RLX);
    }
    pthread_mutex_unlock(&c->lock);
    return idx;
}

/* Pops the oldest buffer of class `cls` if it has been idle since before `cutoff`. */
static uint32_t shared_pop_idle(lds_pool *pool, uint32_t cls, uint64_t cutoff)
{
    lds__class *c = &pool->classes[cls];
    uint32_t idx = LDS__POOL_NO_SLOT;
    pthread_mutex_lock(&c->lock);
    if (c->count > 0 && lds__slot_at(pool, c->stack[0])->idle_since < cutoff) {
        idx = c->stack[0];
        memmove(c->stack, c->stack + 1, (c->count - 1) * sizeof *c->stack);
        c->count--;
        atomic_fetch_sub_explicit(&pool->shared_bytes, lds__class_capacity(cls), RLX);
        atomic_fetch_sub_explicit(&pool->shared_count, 1, RLX);
    }
    pthread_mutex_unlock(&c->lock);
    return idx;
}

void lds__trim_idle(lds_pool *pool, uint64_t now, size_t *freed)
{
    if (pool->opts.max_idle_ns == UINT64_MAX || now < pool->opts.max_idle_ns)
        return;
    uint64_t cutoff = now - pool->opts.max_idle_ns;
    for (uint32_t c = 0; c < LDS__POOL_CLASSES; c++) {
        uint32_t idx;
        while ((idx = shared_pop_idle(pool, c, cutoff)) != LDS__POOL_NO_SLOT) {
            lds__buffer_destroy(pool, idx);
            lds__trimmed(pool, lds__class_capacity(c), freed);
        }
    }
}

/* Slow-path hook: trims idle buffers at most every max_idle_ns / 4. */
void lds__maybe_age(lds_pool *pool)
{
    if (pool->opts.max_idle_ns == UINT64_MAX)
        return;
    uint64_t now = lds__now_ns();
    uint64_t next = atomic_load_explicit(&pool->next_age_check, RLX);
    if (now < next)
        return;
    uint64_t step = pool->opts.max_idle_ns / 4 + 1;
    if (!atomic_compare_exchange_strong_explicit(&pool->next_age_check, &next, now + step, RLX,
                                                 RLX))
        return;
    lds__trim_idle(pool, now, NULL);
}

/* Frees cached buffers (own thread cache first, then shared stacks, largest classes
 * first) until `need` more bytes fit under max_retained_bytes. */
static void evict_for(lds_pool *pool, lds__tcache *tc, size_t need)
{
    size_t max = pool->opts.max_retained_bytes;
    for (uint32_t c = LDS__POOL_CLASSES; c-- > 0;) {
        size_t cap = lds__class_capacity(c);
        if (cap > max && cap >= LDS_POOL_LARGE_MIN)
            continue; /* large buffers (admit_large) do not count against the cap */
        while (atomic_load_explicit(&pool->pooled_bytes, RLX) + need > max) {
            uint32_t idx = LDS__POOL_NO_SLOT;
            uint8_t n = tc ? atomic_load_explicit(&tc->n[c], RLX) : 0;
            if (n > 0) {
                idx = lds__slot_idx(tc->items[c][n - 1]);
                atomic_store_explicit(&tc->n[c], (uint8_t)(n - 1), RLX);
                lds__held_sub(tc, cap);
            } else {
                idx = lds__shared_pop(pool, c);
            }
            if (idx == LDS__POOL_NO_SLOT)
                break;
            lds__buffer_destroy(pool, idx);
            lds__trimmed(pool, cap, NULL);
        }
        if (atomic_load_explicit(&pool->pooled_bytes, RLX) + need <= max)
            return;
    }
}

/* Decides at birth whether a new buffer counts against the retention caps (and so is
 * kept on return) or is freed on return. */
static int admit(lds_pool *pool, lds__tcache *tc, uint32_t cls, size_t cap)
{
    lds__class *c = &pool->classes[cls];
    uint32_t n = atomic_load_explicit(&c->pooled, RLX);
    do {
        if (n >= pool->opts.max_per_class)
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(&c->pooled, &n, n + 1, RLX, RLX));
    size_t max = pool->opts.max_retained_bytes;
    for (int attempt = 0; attempt < 2; attempt++) {
        uint64_t b = atomic_load_explicit(&pool->pooled_bytes, RLX);
        while (b + cap <= max) {
            if (atomic_compare_exchange_weak_explicit(&pool->pooled_bytes, &b, b + cap, RLX, RLX))
                return 1;
        }
        if (attempt == 0)
            evict_for(pool, tc, cap);
    }
    atomic_fetch_sub_explicit(&c->pooled, 1, RLX);
    return 0;
}

/* A buffer above max_retained_bytes is kept (2) while fewer than `large_buffers` such
 * buffers are, else freed on return (0). */
static int admit_large(lds_pool *pool)
{
    uint32_t n = atomic_load_explicit(&pool->large_pooled, RLX);
    do {
        if (n >= pool->opts.large_buffers)
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(&pool->large_pooled, &n, n + 1, RLX, RLX));
    return 2;
}

uint32_t lds__rent_slow(lds_pool *pool, lds__tcache *tc, uint32_t cls, size_t cap,
                        _Atomic uint64_t **kind)
{
    lds__maybe_age(pool);
    if (pool->opts.check != LDS_POOL_CHECK_BYPASS) {
        uint32_t idx = lds__shared_pop(pool, cls);
        if (idx != LDS__POOL_NO_SLOT) {
            *kind = &pool->hits_shared;
            return idx;
        }
    }
    int pooled = 0;
    _Atomic uint64_t *miss;
    if (cap > pool->opts.max_retained_bytes || pool->opts.check == LDS_POOL_CHECK_BYPASS) {
        miss = &pool->misses_oversize;
        if (pool->opts.check != LDS_POOL_CHECK_BYPASS && cap >= LDS_POOL_LARGE_MIN)
            pooled = admit_large(pool);
    } else {
        miss = atomic_load_explicit(&pool->classes[cls].live, RLX) == 0 ? &pool->misses_cold
                                                                        : &pool->misses_exhausted;
        pooled = admit(pool, tc, cls, cap);
    }
    uint32_t idx = lds__buffer_create(pool, cls, pooled);
    if (idx == LDS__POOL_NO_SLOT) {
        if (pooled == 2) {
            atomic_fetch_sub_explicit(&pool->large_pooled, 1, RLX);
        } else if (pooled) {
            atomic_fetch_sub_explicit(&pool->classes[cls].pooled, 1, RLX);
            atomic_fetch_sub_explicit(&pool->pooled_bytes, cap, RLX);
        }
        return idx;
    }
    *kind = miss;
    return idx;
}
