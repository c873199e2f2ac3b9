/*
 * buffers.c: size classes, the slot table, and buffers (allocation, mapping, release).
 * See pool_internal.h for the layout and docs/adr/0002 for the measured choices (mapping
 * threshold, mapped-buffer offset).
 */
#include "pool_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RLX memory_order_relaxed

/* ==== size classes ======================================================== */

/* lds__pool_class as a constant expression, for the table: m = max(n, 64) - 1, k its top
 * bit (5..13 for n <= LDS__POOL_TABLE_MAX), class 4k + (m >> (k - 2)) - 27. */
#define TAB_M(n) ((n) > LDS_POOL_MIN_CLASS ? (n)-1 : LDS_POOL_MIN_CLASS - 1)
#define TAB_K(m)                                                                                   \
    ((m) >= 8192   ? 13                                                                            \
     : (m) >= 4096 ? 12                                                                            \
     : (m) >= 2048 ? 11                                                                            \
     : (m) >= 1024 ? 10                                                                            \
     : (m) >= 512  ? 9                                                                             \
     : (m) >= 256  ? 8                                                                             \
     : (m) >= 128  ? 7                                                                             \
     : (m) >= 64   ? 6                                                                             \
                   : 5)
#define TAB_CLS(m)  (4u * TAB_K(m) + ((m) >> (TAB_K(m) - 2)) - (4u * LDS__POOL_MIN_SHIFT + 3u))
#define TAB_E(i)    (uint8_t) TAB_CLS(TAB_M((size_t)(i)*16u)),
#define TAB_E4(i)   TAB_E(i) TAB_E((i) + 1) TAB_E((i) + 2) TAB_E((i) + 3)
#define TAB_E16(i)  TAB_E4(i) TAB_E4((i) + 4) TAB_E4((i) + 8) TAB_E4((i) + 12)
#define TAB_E64(i)  TAB_E16(i) TAB_E16((i) + 16) TAB_E16((i) + 32) TAB_E16((i) + 48)
#define TAB_E256(i) TAB_E64(i) TAB_E64((i) + 64) TAB_E64((i) + 128) TAB_E64((i) + 192)
_Static_assert(LDS__POOL_TABLE_MAX == 1024 * 16, "the table below has 1024 + 1 entries");

/* Entry i: the class of a request of 16 (i - 1) + 1 .. 16 i bytes (entry 0: 0 bytes).
 * tests/test_pool.c compares every entry with lds__pool_class. */
const uint8_t lds__pool_class_table[LDS__POOL_TABLE_MAX / 16 + 1] = {
    TAB_E256(0) TAB_E256(256) TAB_E256(512) TAB_E256(768) TAB_E(1024)};

uint32_t lds__class_of(size_t min_bytes)
{
    return lds__pool_class(min_bytes);
}

size_t lds__class_capacity(uint32_t cls)
{
    if (cls == 0)
        return LDS_POOL_MIN_CLASS;
    uint32_t j = cls - 1;
    unsigned k = LDS__POOL_MIN_SHIFT + j / 4;
    return (size_t)(5u + j % 4) << (k - 2);
}

size_t lds_pool_class_capacity(size_t min_bytes)
{
    if (min_bytes > LDS_POOL_MAX_REQUEST)
        return 0;
    return lds__class_capacity(lds__class_of(min_bytes));
}

/* ==== slots =============================================================== */

lds__slot lds__no_slots[LDS__POOL_CHUNK_SLOTS];

static uint32_t slot_alloc(lds_pool *pool)
{
    uint32_t idx = LDS__POOL_NO_SLOT;
    pthread_mutex_lock(&pool->slot_lock);
    if (pool->free_slots != LDS__POOL_NO_SLOT) {
        idx = pool->free_slots;
        pool->free_slots = lds__slot_at(pool, idx)->next_free;
    } else {
        uint32_t n = atomic_load_explicit(&pool->slot_count, RLX);
        uint32_t c = n >> LDS__POOL_CHUNK_SHIFT;
        if (c < LDS__POOL_MAX_CHUNKS) {
            lds__slot *chunk = atomic_load_explicit(&pool->chunks[c], RLX);
            if (!chunk) {
                chunk = aligned_alloc(64, LDS__POOL_CHUNK_SLOTS * sizeof *chunk);
                if (chunk) {
                    memset(chunk, 0, LDS__POOL_CHUNK_SLOTS * sizeof *chunk);
                    atomic_store_explicit(&pool->chunks[c], chunk, memory_order_release);
                    if (c == 0)
                        atomic_store_explicit(&pool->chunk0, chunk, memory_order_release);
                }
            }
            if (chunk) {
                idx = n;
                /* A new slot: the pool's first generation (even, docs/adr/0027). A slot from
                 * the free list keeps its word, so its generation goes on growing from where
                 * its last buffer left it. */
                atomic_store_explicit(&chunk[n & (LDS__POOL_CHUNK_SLOTS - 1)].word,
                                      pool->gen_start << LDS__POOL_GEN_SHIFT | n, RLX);
                atomic_store_explicit(&pool->slot_count, n + 1, memory_order_release);
            }
        }
    }
    pthread_mutex_unlock(&pool->slot_lock);
    return idx;
}

static void slot_release(lds_pool *pool, uint32_t idx, lds__slot *s)
{
    pthread_mutex_lock(&pool->slot_lock);
    s->next_free = pool->free_slots;
    pool->free_slots = idx;
    pthread_mutex_unlock(&pool->slot_lock);
}

/* ==== buffers ============================================================= */

static int use_map(const lds_pool *pool, size_t cap)
{
    return cap >= pool->opts.mmap_threshold || pool->opts.check == LDS_POOL_CHECK_GUARD ||
           pool->opts.check == LDS_POOL_CHECK_BYPASS;
}

/* Reports a failed system call of the pool on stderr, once per pool (`guard_failures`
 * and `bytes_mapped` in the statistics keep the count). */
__attribute__((noinline, cold)) void lds__os_failed(lds_pool *pool, const char *call, int err,
                                                    size_t bytes, const char *outcome)
{
    if (atomic_exchange_explicit(&pool->os_warned, 1, RLX))
        return;
    fprintf(stderr,
            "lodestar: pool: %s of %zu bytes failed: %s (errno %d)%s; %s (reported once per "
            "pool)\n",
            call, bytes, lds__os_errno_name(err), err,
            err == ENOMEM ? ", e.g. vm.max_map_count reached" : "", outcome);
}

/* Allocates a buffer of class `cls` into a fresh slot; the slot's generation is even. */
uint32_t lds__buffer_create(lds_pool *pool, uint32_t cls, int pooled)
{
    size_t cap = lds__class_capacity(cls);
    uint32_t idx = slot_alloc(pool);
    if (idx == LDS__POOL_NO_SLOT)
        return idx;
    lds__slot *s = lds__slot_at(pool, idx);
    void *base;
    char *ptr;
    size_t bytes;
    int mapped = use_map(pool, cap);
    uint8_t pages = LDS__PAGES_SMALL;
    if (mapped) {
        size_t page = lds__page_size();
        bytes = (LDS_POOL_MAP_OFFSET + cap + page - 1) / page * page;
        /* Huge pages: the mapping starts on a huge-page boundary, the buffer 256 bytes in
         * (LDS_POOL_MAP_OFFSET keeps read() fast); the tail past the last whole huge page
         * stays in 4 KiB pages. A failed map is the rent's LDS_E_NOMEM. */
        if (pool->opts.check == LDS_POOL_CHECK_GUARD) {
            /* Fenced by a PROT_NONE page on each side, so that the return's mprotect
             * never splits a map entry (see lds__map_guarded). */
            int protect_failed = 0;
            int err = lds__map_guarded(bytes, &base, &protect_failed);
            if (err && protect_failed) {
                lds__count(&pool->guard_failures, 1);
                lds__os_failed(pool, "mprotect(PROT_READ|PROT_WRITE)", err, bytes,
                               "guard mode could not map a new buffer: the rent fails with "
                               "LDS_E_NOMEM");
            }
            bytes += 2 * page;
            ptr = base ? (char *)base + page + LDS_POOL_MAP_OFFSET : NULL;
        } else {
            if (pool->opts.huge_pages == LDS_POOL_HUGE_PAGES_ON && cap >= LDS_POOL_HUGE_MIN &&
                cap >= lds__huge_page_size())
                (void)lds__map_huge(bytes, &base, &pages);
            else
                (void)lds__map(bytes, &base);
            ptr = base ? (char *)base + LDS_POOL_MAP_OFFSET : NULL;
        }
    } else {
        bytes = (cap + 63u) & ~(size_t)63u;
        base = aligned_alloc(64, bytes);
        ptr = base;
    }
    if (!base) {
        slot_release(pool, idx, s);
        return LDS__POOL_NO_SLOT;
    }
    s->cls = (uint8_t)cls;
    atomic_store_explicit(&s->cap, cap, RLX);
    s->base = base;
    s->alloc_bytes = bytes;
    s->mapped = (uint8_t)mapped;
    s->pooled = (uint8_t)pooled;
    s->tc_lim = pooled ? pool->tc_limit[cls] : 0;
    s->idle_since = 0;
    s->armed = 0;
    s->pages = pages;
    /* The word takes the class (the slot is not leased: its generation is even, and no
     * handle of this buffer exists yet); the generation goes on from where it was. */
    uint64_t w = atomic_load_explicit(&s->word, RLX);
    w = (w & ~LDS__POOL_CLS_MASK) | (uint64_t)cls << LDS__POOL_IDX_BITS;
    s->gen_base = w >> LDS__POOL_GEN_SHIFT;
    atomic_store_explicit(&s->word, w, RLX);
    atomic_store_explicit(&s->length, 0, RLX);
    atomic_store_explicit(&s->ptr, (uintptr_t)ptr, memory_order_release);
    if (mapped)
        lds__count(&pool->bytes_mapped, bytes);
    atomic_fetch_add_explicit(&pool->classes[cls].live, 1, RLX);
    return idx;
}

/* Unmaps (or frees) the memory of slot `s`. 0, or the errno of a failed munmap: then the
 * mapping stays, counted in bytes_mapped, and is reported. */
int lds__buffer_release_memory(lds_pool *pool, lds__slot *s)
{
    lds__asan_unpoison(s->base, s->alloc_bytes);
    if (!s->mapped) {
        free(s->base);
        return 0;
    }
    int err = lds__unmap(s->base, s->alloc_bytes);
    if (err) {
        lds__os_failed(pool, "munmap", err, s->alloc_bytes, "the mapping stays in place");
        return err;
    }
    atomic_fetch_sub_explicit(&pool->bytes_mapped, s->alloc_bytes, RLX);
    return 0;
}

/* Forgets the buffer of slot `idx`, whose memory is released, and gives the slot back,
 * unless the slot is retired: then it is never used again. */
void lds__buffer_forget(lds_pool *pool, uint32_t idx)
{
    lds__slot *s = lds__slot_at(pool, idx);
    size_t cap = lds__class_capacity(s->cls);
    lds__class *c = &pool->classes[s->cls];
    atomic_fetch_sub_explicit(&c->live, 1, RLX);
    if (s->pooled == 2) {
        atomic_fetch_sub_explicit(&pool->large_pooled, 1, RLX);
    } else if (s->pooled) {
        atomic_fetch_sub_explicit(&c->pooled, 1, RLX);
        atomic_fetch_sub_explicit(&pool->pooled_bytes, cap, RLX);
    }
    s->base = NULL;
    /* The buffer's rents are folded into the pool's (statistics read the live slots' from
     * their generations, under the same lock, so a rent is counted once). */
    uint64_t w = atomic_load_explicit(&s->word, RLX);
    uint64_t rents = ((w >> LDS__POOL_GEN_SHIFT) - s->gen_base + 1) / 2;
    pthread_mutex_lock(&pool->slot_lock);
    pool->rents_done += rents;
    pool->rented_bytes_done += rents * cap;
    atomic_store_explicit(&s->ptr, 0, RLX);
    if (w & LDS__POOL_RETIRED) {
        lds__count(&pool->slots_retired, 1);
    } else {
        s->next_free = pool->free_slots;
        pool->free_slots = idx;
    }
    pthread_mutex_unlock(&pool->slot_lock);
}

/* Frees the buffer held by slot `idx` (which the caller owns: cached or just returned)
 * and gives the slot back, unless the slot is retired: then it is never used again. */
void lds__buffer_destroy(lds_pool *pool, uint32_t idx)
{
    (void)lds__buffer_release_memory(pool, lds__slot_at(pool, idx));
    lds__buffer_forget(pool, idx);
}

void lds__trimmed(lds_pool *pool, size_t cap, size_t *freed)
{
    lds__count(&pool->trims, 1);
    lds__count(&pool->trimmed_bytes, cap);
    if (freed)
        *freed += cap;
}

int lds__pool_lease_pages(lds_pool *pool, const lds_lease *lease)
{
    if (pool == NULL || lease == NULL || lease->ptr == NULL)
        return LDS__PAGES_SMALL;
    lds__slot *s = lds__slot_at(pool, (uint32_t)(lease->handle & LDS__POOL_IDX_MASK));
    return s != NULL && atomic_load_explicit(&s->ptr, RLX) == (uintptr_t)lease->ptr
               ? s->pages
               : LDS__PAGES_SMALL;
}
