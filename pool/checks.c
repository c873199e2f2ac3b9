/*
 * checks.c: the checked modes: canary words, poison fills at rent, and guard mode's
 * quarantine of PROT_NONE buffers (lodestar_pool.h, lds_pool_check).
 */
#include "pool_internal.h"

#include <string.h>

#define RLX memory_order_relaxed

/* ==== checked modes ======================================================= */

static inline uint64_t canary_word(const lds_pool *pool, uint32_t idx, size_t at)
{
    return pool->canary_key ^ ((uint64_t)idx << 32) ^ (uint64_t)at;
}

/* Canary words cover the whole of a small buffer; for larger ones, the first 64 bytes of
 * every 4 KiB and the last 64 bytes (a full fill would fault in every page of a map). */
#define CANARY_STRIDE 4096u
#define CANARY_SPAN   64u

static void canary_words(const lds_pool *pool, uint32_t idx, char *p, size_t from, size_t to,
                         int write, int *bad)
{
    for (size_t w = from; w + 8 <= to; w += 8) {
        uint64_t v = canary_word(pool, idx, w);
        if (write) {
            memcpy(p + w, &v, 8);
        } else {
            uint64_t got;
            memcpy(&got, p + w, 8);
            if (got != v)
                *bad = 1;
        }
    }
}

/* Writes (write = 1) or verifies the canary words of a buffer; sets *bad on a mismatch. */
void lds__canary_apply(const lds_pool *pool, uint32_t idx, char *p, size_t cap, int write, int *bad)
{
    if (cap <= CANARY_STRIDE) {
        canary_words(pool, idx, p, 0, cap, write, bad);
        return;
    }
    for (size_t at = 0; at < cap; at += CANARY_STRIDE)
        canary_words(pool, idx, p, at, at + CANARY_SPAN, write, bad);
    canary_words(pool, idx, p, cap - CANARY_SPAN, cap, write, bad);
}

/* Prepares a cached buffer for handing out. Returns 0 if it must be discarded. */
int lds__on_rent(lds_pool *pool, uint32_t idx, char *p, size_t len, size_t cap)
{
    lds__slot *s = lds__slot_at(pool, idx);
    lds__asan_unpoison(p, cap);
    if (s->armed) {
        int bad = 0;
        s->armed = 0;
        lds__canary_apply(pool, idx, p, cap, 0, &bad);
        if (bad)
            return 0;
    }
    if (pool->opts.fill_on_rent >= 0)
        memset(p, pool->opts.fill_on_rent, cap);
    if (pool->opts.check == LDS_POOL_CHECK_POISON)
        memset(p + len, LDS_POOL_POISON_BYTE, cap - len);
    /* [length, capacity) is usable by contract; only a checked mode makes it off-limits. */
    if (pool->opts.check != LDS_POOL_CHECK_OFF)
        lds__asan_poison(p + len, cap - len);
    return 1;
}

/* ==== guard quarantine ==================================================== */

/* Protects a returned buffer and queues it; returns the slot that leaves the quarantine
 * (made accessible again), or LDS__POOL_NO_SLOT.
 *
 * The buffer's accessible part is a map entry of its own (lds__map_guarded), so making it
 * PROT_NONE splits nothing and cannot fail at vm.max_map_count. Should mprotect fail all
 * the same, the guard never goes off in silence: the failure is counted in guard_failures
 * and reported on stderr (once per pool), and the buffer is unmapped instead of
 * quarantined, so a late access still faults (unless the kernel maps something else there
 * in the meantime). Should the munmap fail as well, the buffer waits in the quarantine
 * unprotected: reported, never lost. Making a buffer accessible again at the quarantine's
 * exit may need a split (its PROT_NONE entry has merged with its fences and neighbours):
 * when that fails, the buffer is unmapped, never handed out. */
uint32_t lds__quarantine_push(lds_pool *pool, uint32_t idx)
{
    lds__slot *s = lds__slot_at(pool, idx);
    size_t cap = lds__class_capacity(s->cls);
    int err = lds__protect(s->base, s->alloc_bytes, 0);
    if (err) {
        lds__count(&pool->guard_failures, 1);
        lds__os_failed(pool, "mprotect(PROT_NONE)", err, s->alloc_bytes,
                       "guard mode unmaps the returned buffer instead of quarantining it");
        if (lds__buffer_release_memory(pool, s) == 0) {
            lds__buffer_forget(pool, idx);
            return LDS__POOL_NO_SLOT;
        }
    }
    uint32_t out = LDS__POOL_NO_SLOT;
    uint32_t qn = pool->opts.guard_quarantine;
    pthread_mutex_lock(&pool->guard_lock);
    uint32_t qc = atomic_load_explicit(&pool->q_count, RLX); /* written under guard_lock */
    if (qc == qn) {
        out = pool->quarantine[pool->q_head];
        pool->q_head = (pool->q_head + 1) % qn;
        qc--;
    }
    pool->quarantine[(pool->q_head + qc) % qn] = idx;
    atomic_store_explicit(&pool->q_count, qc + 1, RLX);
    lds__count(&pool->q_bytes, cap);
    if (out != LDS__POOL_NO_SLOT)
        atomic_fetch_sub_explicit(&pool->q_bytes, lds__class_capacity(lds__slot_at(pool, out)->cls),
                                  RLX);
    pthread_mutex_unlock(&pool->guard_lock);
    if (out != LDS__POOL_NO_SLOT) {
        lds__slot *o = lds__slot_at(pool, out);
        err = lds__protect(o->base, o->alloc_bytes, 1);
        if (err) {
            lds__count(&pool->guard_failures, 1);
            lds__os_failed(
                pool, "mprotect(PROT_READ|PROT_WRITE)", err, o->alloc_bytes,
                "guard mode unmaps the buffer leaving the quarantine instead of reusing it");
            lds__buffer_destroy(pool, out);
            out = LDS__POOL_NO_SLOT;
        }
    }
    return out;
}

void lds__quarantine_drain(lds_pool *pool, size_t *freed)
{
    for (;;) {
        uint32_t idx = LDS__POOL_NO_SLOT;
        pthread_mutex_lock(&pool->guard_lock);
        uint32_t qc = atomic_load_explicit(&pool->q_count, RLX);
        if (qc > 0) {
            idx = pool->quarantine[pool->q_head];
            pool->q_head = (pool->q_head + 1) % pool->opts.guard_quarantine;
            atomic_store_explicit(&pool->q_count, qc - 1, RLX);
            atomic_fetch_sub_explicit(&pool->q_bytes,
                                      lds__class_capacity(lds__slot_at(pool, idx)->cls), RLX);
        }
        pthread_mutex_unlock(&pool->guard_lock);
        if (idx == LDS__POOL_NO_SLOT)
            return;
        size_t cap = lds__class_capacity(lds__slot_at(pool, idx)->cls);
        lds__buffer_destroy(pool, idx);
        lds__trimmed(pool, cap, freed);
    }
}
