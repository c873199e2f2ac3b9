/*
 * pool.c: size classes, slots and generations, thread caches, shared stacks,
 * retention, checked modes and trimming. See pool_internal.h for the layout and
 * docs/adr for the measured choices (mapping threshold, mapped-buffer offset).
 */
#include "pool_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

pthread_mutex_t lds__g_lock = PTHREAD_MUTEX_INITIALIZER;

static _Atomic uint64_t g_next_pool_id = 1;
static _Atomic uint64_t g_next_stamp = 1;
static _Atomic(lds_pool *) g_shared;
static pthread_mutex_t g_shared_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
static lds_pool *g_pools; /* the registry of live pools, under lds__g_lock */

/* The calling thread's caches, one per pool it used. Heap-allocated so the pthread key
 * destructor can flush them whatever the order in which the thread's TLS is torn down. */
typedef struct tls_root {
    lds__tcache *list;
} tls_root;

static _Thread_local tls_root *tls_self __attribute__((tls_model("initial-exec")));
static _Thread_local lds__tcache *tls_last __attribute__((tls_model("initial-exec")));

#define RLX         memory_order_relaxed
#define LIKELY(x)   __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

static inline void tally_add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_store_explicit(c, atomic_load_explicit(c, RLX) + v, RLX);
}

static inline void count(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, RLX);
}

/* ==== size classes ======================================================== */

/* Branch-free: requests up to the minimum class count as the minimum class; then, with
 * m = request - 1 and 2^k <= m < 2^(k+1), the class is 4 per doubling above 2^6 plus the
 * two bits of m below its top bit. Valid for min_bytes <= LDS_POOL_MAX_REQUEST. */
static inline uint32_t class_of(size_t min_bytes)
{
    uint64_t m = (min_bytes > LDS_POOL_MIN_CLASS ? (uint64_t)min_bytes : LDS_POOL_MIN_CLASS) - 1;
    unsigned k = 63u - (unsigned)__builtin_clzll(m);
    return 4u * k + (uint32_t)(m >> (k - 2)) - (4u * LDS__POOL_MIN_SHIFT + 3u);
}

uint32_t lds__class_of(size_t min_bytes)
{
    return class_of(min_bytes);
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

/* The slot's index, the low bits of its handle word (which never change). */
static inline uint32_t slot_idx(const lds__slot *s)
{
    return (uint32_t)(atomic_load_explicit(&s->word, RLX) & LDS__POOL_IDX_MASK);
}

static inline lds__slot *slot_at(lds_pool *pool, uint32_t idx)
{
    if (idx >= atomic_load_explicit(&pool->slot_count, memory_order_acquire))
        return NULL;
    lds__slot *chunk =
        atomic_load_explicit(&pool->chunks[idx >> LDS__POOL_CHUNK_SHIFT], memory_order_acquire);
    return chunk ? &chunk[idx & (LDS__POOL_CHUNK_SLOTS - 1)] : NULL;
}

static uint32_t slot_alloc(lds_pool *pool)
{
    uint32_t idx = LDS__POOL_NO_SLOT;
    pthread_mutex_lock(&pool->slot_lock);
    if (pool->free_slots != LDS__POOL_NO_SLOT) {
        idx = pool->free_slots;
        pool->free_slots = slot_at(pool, idx)->next_free;
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
                }
            }
            if (chunk) {
                idx = n;
                /* A new slot: generation 0. A slot from the free list keeps its word, so its
                 * generation goes on growing from where its last buffer left it. */
                atomic_store_explicit(&chunk[n & (LDS__POOL_CHUNK_SLOTS - 1)].word, n, RLX);
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
__attribute__((noinline, cold)) static void os_failed(lds_pool *pool, const char *call, int err,
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
static uint32_t buffer_create(lds_pool *pool, uint32_t cls, int pooled)
{
    size_t cap = lds__class_capacity(cls);
    uint32_t idx = slot_alloc(pool);
    if (idx == LDS__POOL_NO_SLOT)
        return idx;
    lds__slot *s = slot_at(pool, idx);
    void *base;
    char *ptr;
    size_t bytes;
    int mapped = use_map(pool, cap);
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
                count(&pool->guard_failures, 1);
                os_failed(pool, "mprotect(PROT_READ|PROT_WRITE)", err, bytes,
                          "guard mode could not map a new buffer: the rent fails with "
                          "LDS_E_NOMEM");
            }
            bytes += 2 * page;
            ptr = base ? (char *)base + page + LDS_POOL_MAP_OFFSET : NULL;
        } else {
            if (pool->opts.huge_pages == LDS_POOL_HUGE_PAGES_ON && cap >= LDS_POOL_HUGE_MIN &&
                cap >= lds__huge_page_size())
                (void)lds__map_huge(bytes, &base);
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
    s->cap = cap;
    s->base = base;
    s->alloc_bytes = bytes;
    s->mapped = (uint8_t)mapped;
    s->pooled = (uint8_t)pooled;
    s->idle_since = 0;
    s->armed = 0;
    atomic_store_explicit(&s->length, 0, RLX);
    atomic_store_explicit(&s->ptr, (uintptr_t)ptr, memory_order_release);
    if (mapped)
        count(&pool->bytes_mapped, bytes);
    atomic_fetch_add_explicit(&pool->classes[cls].live, 1, RLX);
    return idx;
}

/* Unmaps (or frees) the memory of slot `s`. 0, or the errno of a failed munmap: then the
 * mapping stays, counted in bytes_mapped, and is reported. */
static int buffer_release_memory(lds_pool *pool, lds__slot *s)
{
    lds__asan_unpoison(s->base, s->alloc_bytes);
    if (!s->mapped) {
        free(s->base);
        return 0;
    }
    int err = lds__unmap(s->base, s->alloc_bytes);
    if (err) {
        os_failed(pool, "munmap", err, s->alloc_bytes, "the mapping stays in place");
        return err;
    }
    atomic_fetch_sub_explicit(&pool->bytes_mapped, s->alloc_bytes, RLX);
    return 0;
}

/* Forgets the buffer of slot `idx`, whose memory is released, and gives the slot back,
 * unless the slot is retired: then it is never used again. */
static void buffer_forget(lds_pool *pool, uint32_t idx)
{
    lds__slot *s = slot_at(pool, idx);
    size_t cap = lds__class_capacity(s->cls);
    lds__class *c = &pool->classes[s->cls];
    atomic_fetch_sub_explicit(&c->live, 1, RLX);
    if (s->pooled) {
        atomic_fetch_sub_explicit(&c->pooled, 1, RLX);
        atomic_fetch_sub_explicit(&pool->pooled_bytes, cap, RLX);
    }
    s->base = NULL;
    atomic_store_explicit(&s->ptr, 0, RLX);
    if (atomic_load_explicit(&s->word, RLX) & LDS__POOL_RETIRED)
        count(&pool->slots_retired, 1);
    else
        slot_release(pool, idx, s);
}

/* Frees the buffer held by slot `idx` (which the caller owns: cached or just returned)
 * and gives the slot back, unless the slot is retired: then it is never used again. */
static void buffer_destroy(lds_pool *pool, uint32_t idx)
{
    (void)buffer_release_memory(pool, slot_at(pool, idx));
    buffer_forget(pool, idx);
}

static void trimmed(lds_pool *pool, size_t cap, size_t *freed)
{
    count(&pool->trims, 1);
    count(&pool->trimmed_bytes, cap);
    if (freed)
        *freed += cap;
}

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
static void canary_apply(const lds_pool *pool, uint32_t idx, char *p, size_t cap, int write,
                         int *bad)
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
static int on_rent(lds_pool *pool, uint32_t idx, char *p, size_t len, size_t cap)
{
    lds__slot *s = slot_at(pool, idx);
    lds__asan_unpoison(p, cap);
    if (s->armed) {
        int bad = 0;
        s->armed = 0;
        canary_apply(pool, idx, p, cap, 0, &bad);
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

/* ==== thread caches ======================================================= */

static void shared_push(lds_pool *pool, uint32_t idx, uint64_t now);

static void tc_destructor(void *arg);

static void key_init(void)
{
    pthread_key_create(&g_key, tc_destructor);
}

/* Moves every buffer of `tc` to the shared stacks (or frees it when there is no room). */
static void tc_flush(lds__tcache *tc, int destroy, size_t *freed)
{
    lds_pool *pool = tc->pool;
    uint64_t now = lds__now_ns();
    for (uint32_t c = 0; c < LDS__POOL_CLASSES; c++) {
        size_t cap = lds__class_capacity(c);
        uint8_t n = atomic_load_explicit(&tc->n[c], RLX);
        while (n > 0) {
            uint32_t idx = slot_idx(tc->items[c][--n]);
            atomic_store_explicit(&tc->n[c], n, RLX);
            if (destroy) {
                buffer_destroy(pool, idx);
                trimmed(pool, cap, freed);
            } else {
                shared_push(pool, idx, now);
            }
        }
    }
}

static void remote_collect(lds_pool *pool, lds__tcache *tc, lds__tcache *cache);

/* Abandons `tc`, whose thread is gone (its exit, or a forked child's other threads):
 * its cached buffers go to the shared stacks, then its remote-return list is collected.
 * The cache stays with its pool (a slot's `owner` may name it) until a new thread adopts
 * it or the pool is freed. Under lds__g_lock. `abandoned` is set before the list is taken
 * (both sequentially consistent), and a pusher reads it after its push (remote_push): so
 * either this collection sees the push, or the pusher sees the flag and collects. */
static void tc_abandon(lds__tcache *tc)
{
    tc_flush(tc, 0, NULL);
    atomic_store(&tc->abandoned, 1);
    remote_collect(tc->pool, tc, NULL);
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
            tc_abandon(tc);
        } else {
            free(tc);
        }
        tc = next;
    }
    pthread_mutex_unlock(&lds__g_lock);
    free(root);
    tls_self = NULL;
    tls_last = NULL;
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
            if (tls_last == tc)
                tls_last = NULL;
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
        tls_last = found;
    if (adopted)
        remote_collect(pool, found, found); /* pushed since its last collection */
    return found;
}

static lds__tcache *tc_get(lds_pool *pool)
{
    lds__tcache *tc = tls_last;
    if (tc != NULL && tc->pool_id == pool->id)
        return tc;
    return tc_slow(pool);
}

/* The calling thread's cache for `pool`, emptied first if the pool was trimmed since the
 * cache last looked (its stamp changed); NULL when out of memory. */
static lds__tcache *tc_sync(lds_pool *pool)
{
    lds__tcache *tc = tc_get(pool);
    if (!tc)
        return NULL;
    uint64_t st =
        atomic_load_explicit(&pool->stamp, memory_order_acquire) & ~(uint64_t)LDS__POOL_STAMP_SLOW;
    if (st != tc->stamp) {
        tc->stamp = st;
        tc_flush(tc, 1, NULL);
    }
    return tc;
}

/* ==== shared stacks, retention, idle trimming ============================= */

static void shared_push(lds_pool *pool, uint32_t idx, uint64_t now)
{
    lds__slot *s = slot_at(pool, idx);
    lds__class *c = &pool->classes[s->cls];
    size_t cap = lds__class_capacity(s->cls);
    s->idle_since = now;
    pthread_mutex_lock(&c->lock);
    int room = c->count < pool->opts.max_per_class;
    if (room) {
        c->stack[c->count++] = idx;
        count(&pool->shared_bytes, cap);
        count(&pool->shared_count, 1);
    }
    pthread_mutex_unlock(&c->lock);
    if (!room) {
        buffer_destroy(pool, idx);
        count(&pool->drops, 1);
    }
}

static uint32_t shared_pop(lds_pool *pool, uint32_t cls)
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
    if (c->count > 0 && slot_at(pool, c->stack[0])->idle_since < cutoff) {
        idx = c->stack[0];
        memmove(c->stack, c->stack + 1, (c->count - 1) * sizeof *c->stack);
        c->count--;
        atomic_fetch_sub_explicit(&pool->shared_bytes, lds__class_capacity(cls), RLX);
        atomic_fetch_sub_explicit(&pool->shared_count, 1, RLX);
    }
    pthread_mutex_unlock(&c->lock);
    return idx;
}

static void trim_idle(lds_pool *pool, uint64_t now, size_t *freed)
{
    if (pool->opts.max_idle_ns == UINT64_MAX || now < pool->opts.max_idle_ns)
        return;
    uint64_t cutoff = now - pool->opts.max_idle_ns;
    for (uint32_t c = 0; c < LDS__POOL_CLASSES; c++) {
        uint32_t idx;
        while ((idx = shared_pop_idle(pool, c, cutoff)) != LDS__POOL_NO_SLOT) {
            buffer_destroy(pool, idx);
            trimmed(pool, lds__class_capacity(c), freed);
        }
    }
}

/* Slow-path hook: trims idle buffers at most every max_idle_ns / 4. */
static void maybe_age(lds_pool *pool)
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
    trim_idle(pool, now, NULL);
}

/* Frees cached buffers (own thread cache first, then shared stacks, largest classes
 * first) until `need` more bytes fit under max_retained_bytes. */
static void evict_for(lds_pool *pool, lds__tcache *tc, size_t need)
{
    size_t max = pool->opts.max_retained_bytes;
    for (uint32_t c = LDS__POOL_CLASSES; c-- > 0;) {
        size_t cap = lds__class_capacity(c);
        while (atomic_load_explicit(&pool->pooled_bytes, RLX) + need > max) {
            uint32_t idx = LDS__POOL_NO_SLOT;
            uint8_t n = tc ? atomic_load_explicit(&tc->n[c], RLX) : 0;
            if (n > 0) {
                idx = slot_idx(tc->items[c][n - 1]);
                atomic_store_explicit(&tc->n[c], (uint8_t)(n - 1), RLX);
            } else {
                idx = shared_pop(pool, c);
            }
            if (idx == LDS__POOL_NO_SLOT)
                break;
            buffer_destroy(pool, idx);
            trimmed(pool, cap, NULL);
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

static uint32_t rent_slow(lds_pool *pool, lds__tcache *tc, uint32_t cls, size_t cap)
{
    maybe_age(pool);
    if (pool->opts.check != LDS_POOL_CHECK_BYPASS) {
        uint32_t idx = shared_pop(pool, cls);
        if (idx != LDS__POOL_NO_SLOT) {
            count(&pool->hits_shared, 1);
            return idx;
        }
    }
    int pooled = 0;
    if (cap > pool->opts.max_retained_bytes || pool->opts.check == LDS_POOL_CHECK_BYPASS) {
        count(&pool->misses_oversize, 1);
    } else {
        if (atomic_load_explicit(&pool->classes[cls].live, RLX) == 0)
            count(&pool->misses_cold, 1);
        else
            count(&pool->misses_exhausted, 1);
        pooled = admit(pool, tc, cls, cap);
    }
    uint32_t idx = buffer_create(pool, cls, pooled);
    if (idx == LDS__POOL_NO_SLOT && pooled) {
        atomic_fetch_sub_explicit(&pool->classes[cls].pooled, 1, RLX);
        atomic_fetch_sub_explicit(&pool->pooled_bytes, cap, RLX);
    }
    return idx;
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
static uint32_t quarantine_push(lds_pool *pool, uint32_t idx)
{
    lds__slot *s = slot_at(pool, idx);
    size_t cap = lds__class_capacity(s->cls);
    int err = lds__protect(s->base, s->alloc_bytes, 0);
    if (err) {
        count(&pool->guard_failures, 1);
        os_failed(pool, "mprotect(PROT_NONE)", err, s->alloc_bytes,
                  "guard mode unmaps the returned buffer instead of quarantining it");
        if (buffer_release_memory(pool, s) == 0) {
            buffer_forget(pool, idx);
            return LDS__POOL_NO_SLOT;
        }
    }
    uint32_t out = LDS__POOL_NO_SLOT;
    uint32_t qn = pool->opts.guard_quarantine;
    pthread_mutex_lock(&pool->guard_lock);
    if (pool->q_count == qn) {
        out = pool->quarantine[pool->q_head];
        pool->q_head = (pool->q_head + 1) % qn;
        pool->q_count--;
    }
    pool->quarantine[(pool->q_head + pool->q_count) % qn] = idx;
    pool->q_count++;
    count(&pool->q_bytes, cap);
    if (out != LDS__POOL_NO_SLOT)
        atomic_fetch_sub_explicit(&pool->q_bytes, lds__class_capacity(slot_at(pool, out)->cls),
                                  RLX);
    pthread_mutex_unlock(&pool->guard_lock);
    if (out != LDS__POOL_NO_SLOT) {
        lds__slot *o = slot_at(pool, out);
        err = lds__protect(o->base, o->alloc_bytes, 1);
        if (err) {
            count(&pool->guard_failures, 1);
            os_failed(pool, "mprotect(PROT_READ|PROT_WRITE)", err, o->alloc_bytes,
                      "guard mode unmaps the buffer leaving the quarantine instead of reusing it");
            buffer_destroy(pool, out);
            out = LDS__POOL_NO_SLOT;
        }
    }
    return out;
}

static void quarantine_drain(lds_pool *pool, size_t *freed)
{
    for (;;) {
        uint32_t idx = LDS__POOL_NO_SLOT;
        pthread_mutex_lock(&pool->guard_lock);
        if (pool->q_count > 0) {
            idx = pool->quarantine[pool->q_head];
            pool->q_head = (pool->q_head + 1) % pool->opts.guard_quarantine;
            pool->q_count--;
            atomic_fetch_sub_explicit(&pool->q_bytes, lds__class_capacity(slot_at(pool, idx)->cls),
                                      RLX);
        }
        pthread_mutex_unlock(&pool->guard_lock);
        if (idx == LDS__POOL_NO_SLOT)
            return;
        size_t cap = lds__class_capacity(slot_at(pool, idx)->cls);
        buffer_destroy(pool, idx);
        trimmed(pool, cap, freed);
    }
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

/* Leased bytes and their high-water, in the renting cache: plain loads and stores (one
 * writer), no shared cache line. */
static inline void tally_out(lds__tcache *tc, size_t cap, size_t len)
{
    tally_add(&tc->requested, len);
    uint64_t now = atomic_load_explicit(&tc->leased, RLX) + cap;
    atomic_store_explicit(&tc->leased, now, RLX);
    if (now > atomic_load_explicit(&tc->leased_top, RLX))
        atomic_store_explicit(&tc->leased_top, now, RLX);
}

static inline void tally_in(lds__tcache *tc, uint32_t cls, size_t cap, size_t len)
{
    tally_add(&tc->in[cls], 1);
    tally_add(&tc->len_in, len);
    atomic_store_explicit(&tc->leased, atomic_load_explicit(&tc->leased, RLX) - cap, RLX);
}

/* Hands out slot `s` (owned by the caller: just taken from a cache or created) as a lease
 * of cache `tc`. Its generation becomes odd; plain stores suffice, no other thread can end
 * a lease the slot does not have yet (a racing stale return is refused, at once or when
 * collected: see remote_collect). `owner` is stored before the word (release), so a thread
 * that reads the new word reads this owner. A cached slot's generation is below
 * LDS__POOL_GEN_RETIRE (a slot retires at the return that reaches it), so the handle never
 * has LDS__POOL_RETIRED set. */
static inline void lease_out(lds__tcache *tc, lds__slot *s, void *p, size_t len, lds_lease *out)
{
    uint64_t w = atomic_load_explicit(&s->word, RLX) + LDS__POOL_GEN_STEP;
    atomic_store_explicit(&s->owner, tc, RLX);
    atomic_store_explicit(&s->length, len, RLX);
    atomic_store_explicit(&s->word, w, memory_order_release);
    out->ptr = p;
    out->length = len;
    out->capacity = s->cap;
    out->handle = w;
}

__attribute__((noinline, cold)) static lds_status refuse(lds_pool *pool, lds_pool_refusal why)
{
    count(&pool->refused[why], 1);
    return LDS_E_POOL_REFUSED;
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
static lds_status recycle(lds_pool *pool, lds__tcache *tc, lds__slot *s, unsigned flags);

static lds_status remote_claim(lds_pool *pool, lds__tcache *owner, lds__slot *s, uint64_t r,
                               int locked)
{
    uint64_t h = r & ~LDS__POOL_CLAIM_CLEAR;
    uint64_t cur = atomic_load_explicit(&s->remote, memory_order_acquire);
    for (;;) {
        uint64_t c = cur & ~LDS__POOL_CLAIM_CLEAR;
        /* c == h: another thread's return of this lease is queued (a double return);
         * c > h: a later lease of the slot is, so this one has ended (a stale handle). */
        if (c >= h && cur != 0)
            return refuse(pool, LDS_POOL_REFUSED_STALE);
        if (atomic_compare_exchange_weak_explicit(&s->remote, &cur, r, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            if (cur == 0)
                remote_push(pool, owner, s, locked);
            else /* the slot was queued with a stale claim: it is refused in its place */
                (void)refuse(pool, LDS_POOL_REFUSED_STALE);
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
        remote_collect(pool, tc, NULL);
    if (!locked)
        pthread_mutex_unlock(&lds__g_lock);
}

static void remote_push(lds_pool *pool, lds__tcache *owner, lds__slot *s, int locked)
{
    uint32_t link = slot_idx(s) + 1;
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
static void remote_collect(lds_pool *pool, lds__tcache *tc, lds__tcache *cache)
{
    uint32_t link = atomic_exchange_explicit(&tc->remote_head, 0, memory_order_seq_cst);
    while (link != 0) {
        lds__slot *s = slot_at(pool, link - 1);
        link = atomic_load_explicit(&s->remote_next, RLX);
        /* After this exchange another thread may claim (and push) the slot again: its
         * link was read before. */
        uint64_t r = atomic_exchange_explicit(&s->remote, 0, memory_order_acq_rel);
        uint64_t h = r & ~LDS__POOL_CLAIM_CLEAR;
        if (atomic_load_explicit(&s->word, memory_order_acquire) != h) {
            (void)refuse(pool, LDS_POOL_REFUSED_STALE); /* ended before it was collected */
            continue;
        }
        lds__tcache *owner = atomic_load_explicit(&s->owner, RLX);
        if (owner != tc) {
            (void)remote_claim(pool, owner, s, r, cache == NULL);
            continue;
        }
        atomic_store_explicit(&s->word, h + LDS__POOL_GEN_STEP, memory_order_release);
        tally_in(tc, s->cls, s->cap, atomic_load_explicit(&s->length, RLX));
        (void)recycle(pool, cache, s, (r & LDS__POOL_CLAIM_CLEAR) ? LDS_RETURN_CLEAR : 0);
    }
}

void lds__pool_collect_mine(lds_pool *pool)
{
    lds__tcache *tc = tls_last;
    if (!tc || tc->pool_id != pool->id) {
        tc = NULL;
        for (lds__tcache *t = tls_self ? tls_self->list : NULL; t; t = t->next_in_thread)
            if (!t->dead && t->pool_id == pool->id)
                tc = t;
    }
    if (tc && atomic_load_explicit(&tc->remote_head, RLX) != 0)
        remote_collect(pool, tc, tc);
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
    lds__tcache *tc = tc_sync(pool);
    if (!tc)
        return LDS_E_NOMEM;
    if (atomic_load_explicit(&tc->remote_head, RLX) != 0)
        remote_collect(pool, tc, tc);
    uint32_t cls = class_of(min_bytes);
    size_t cap = lds__class_capacity(cls);
    uint32_t idx;
    lds__slot *s;
    char *p;
    int hit;
    for (;;) {
        uint8_t n = atomic_load_explicit(&tc->n[cls], RLX);
        hit = n > 0;
        if (hit) {
            s = tc->items[cls][n - 1];
            idx = slot_idx(s);
            atomic_store_explicit(&tc->n[cls], (uint8_t)(n - 1), RLX);
        } else {
            idx = rent_slow(pool, tc, cls, cap);
            if (idx == LDS__POOL_NO_SLOT)
                return LDS_E_NOMEM;
            s = slot_at(pool, idx);
        }
        p = (char *)atomic_load_explicit(&s->ptr, RLX);
        if (on_rent(pool, idx, p, min_bytes, cap))
            break;
        count(&pool->canary_failures, 1);
        count(&pool->drops, 1);
        buffer_destroy(pool, idx);
    }
    tally_add(hit ? &tc->hits[cls] : &tc->misses[cls], 1);
    tally_out(tc, cap, min_bytes);
    lease_out(tc, s, p, min_bytes, out);
    return LDS_OK;
}

lds_status lds_pool_rent(lds_pool *pool, size_t min_bytes, lds_lease *out)
{
    lds__tcache *tc = tls_last;
    if (UNLIKELY(!pool))
        pool = atomic_load_explicit(&g_shared, memory_order_acquire);
    if (UNLIKELY(!tc || !pool || !out || min_bytes > LDS_POOL_MAX_REQUEST || !stamp_ok(tc, pool) ||
                 atomic_load_explicit(&tc->remote_head, RLX) != 0))
        return rent_full(pool, min_bytes, out);
    uint32_t cls = class_of(min_bytes);
    uint8_t n = atomic_load_explicit(&tc->n[cls], RLX);
    if (UNLIKELY(n == 0))
        return rent_full(pool, min_bytes, out);
    lds__slot *s = tc->items[cls][n - 1];
    atomic_store_explicit(&tc->n[cls], (uint8_t)(n - 1), RLX);
    void *p = (void *)atomic_load_explicit(&s->ptr, RLX);
    lds__asan_unpoison(p, s->cap);
    tally_add(&tc->hits[cls], 1);
    tally_out(tc, s->cap, min_bytes);
    lease_out(tc, s, p, min_bytes, out);
    return LDS_OK;
}

/* Keeps or frees the buffer of slot `s`, whose lease this thread has just ended (and
 * tallied). `tc` is the calling thread's cache for `pool`, or NULL (an abandoned cache's
 * lease: the buffer goes to the shared stacks). */
__attribute__((noinline)) static lds_status recycle(lds_pool *pool, lds__tcache *tc, lds__slot *s,
                                                    unsigned flags)
{
    uint32_t idx = slot_idx(s), cls = s->cls;
    size_t cap = s->cap;
    char *p = (char *)atomic_load_explicit(&s->ptr, RLX);
    lds_pool_check mode = pool->opts.check;
    if (atomic_load_explicit(&s->word, RLX) & LDS__POOL_RETIRED) {
        /* Its generation is spent: the buffer goes, the slot stays out of use for good. */
        buffer_destroy(pool, idx);
        return LDS_OK;
    }
    if (!s->pooled || mode == LDS_POOL_CHECK_BYPASS) {
        buffer_destroy(pool, idx);
        count(&pool->drops, 1);
        return LDS_OK;
    }
    lds__asan_unpoison(p, cap);
    if (flags & LDS_RETURN_CLEAR)
        memset(p, 0, cap);
    if (mode == LDS_POOL_CHECK_CANARY) {
        canary_apply(pool, idx, p, cap, 1, NULL);
        s->armed = 1;
    } else if (mode == LDS_POOL_CHECK_POISON)
        memset(p, LDS_POOL_FREED_BYTE, cap);
    lds__asan_poison(p, cap);

    uint8_t n = tc ? atomic_load_explicit(&tc->n[cls], RLX) : 0;
    if (mode == LDS_POOL_CHECK_GUARD) {
        idx = quarantine_push(pool, idx);
        if (idx == LDS__POOL_NO_SLOT)
            return LDS_OK;
    } else if (tc && n < pool->tc_limit[cls] && mode == LDS_POOL_CHECK_OFF) {
        tc->items[cls][n] = s;
        atomic_store_explicit(&tc->n[cls], (uint8_t)(n + 1), RLX);
        return LDS_OK;
    }
    maybe_age(pool);
    shared_push(pool, idx, lds__now_ns());
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
        return refuse(pool, LDS_POOL_REFUSED_STALE); /* zeroed by an earlier return */
    lds__slot *s = slot_at(pool, idx);
    /* Never a handle: an even generation, or one with the retired bit. */
    if (!s || (h & LDS__POOL_GEN_STEP) == 0 || (h & LDS__POOL_RETIRED))
        return refuse(pool, LDS_POOL_REFUSED_UNKNOWN);
    if (atomic_load_explicit(&s->word, memory_order_acquire) != h)
        return refuse(pool, LDS_POOL_REFUSED_STALE);
    if (atomic_load_explicit(&s->ptr, RLX) != (uintptr_t)lease->ptr || lease->ptr == NULL)
        return refuse(pool, LDS_POOL_REFUSED_POINTER);
    if (lease->capacity != s->cap || lease->length != atomic_load_explicit(&s->length, RLX))
        return refuse(pool, LDS_POOL_REFUSED_SIZE);
    /* Read after the word: the owner of lease h (lease_out stores it first). */
    lds__tcache *owner = atomic_load_explicit(&s->owner, RLX);
    lds__tcache *tc = tc_sync(pool);
    if (tc && atomic_load_explicit(&tc->remote_head, RLX) != 0)
        remote_collect(pool, tc, tc);
    if (!tc || owner != tc) {
        /* Another thread's lease: claimed here, ended when its owner collects it. */
        lds_status st = remote_claim(
            pool, owner, s, h | ((flags & LDS_RETURN_CLEAR) ? LDS__POOL_CLAIM_CLEAR : 0), 0);
        if (st == LDS_OK)
            memset(lease, 0, sizeof *lease);
        return st;
    }
    /* Our own lease; the collection above may just have ended it (claimed elsewhere). */
    if (atomic_load_explicit(&s->word, RLX) != h ||
        (atomic_load_explicit(&s->remote, memory_order_acquire) & ~LDS__POOL_CLAIM_CLEAR) == h)
        return refuse(pool, LDS_POOL_REFUSED_STALE); /* another thread's return of it is queued */
    atomic_store_explicit(&s->word, h + LDS__POOL_GEN_STEP, memory_order_release);
    tally_in(tc, s->cls, s->cap, lease->length);
    memset(lease, 0, sizeof *lease);
    return recycle(pool, tc, s, flags);
}

lds_status lds_pool_return(lds_pool *pool, lds_lease *lease, unsigned flags)
{
    lds__tcache *tc = tls_last;
    if (UNLIKELY(!pool))
        pool = atomic_load_explicit(&g_shared, memory_order_acquire);
    if (UNLIKELY(!tc || !pool || !lease || flags != 0 || !stamp_ok(tc, pool)))
        return return_full(pool, lease, flags);
    uint64_t h = lease->handle;
    uint32_t idx = (uint32_t)(h & LDS__POOL_IDX_MASK);
    if (UNLIKELY(idx >= atomic_load_explicit(&pool->slot_count, memory_order_acquire)))
        return return_full(pool, lease, flags);
    /* The first chunk's address does not depend on the handle, so it can be loaded
     * ahead of it: one dependent load fewer on the way to the slot. */
    lds__slot *s;
    if (LIKELY(idx < LDS__POOL_CHUNK_SLOTS)) {
        s = atomic_load_explicit(&pool->chunks[0], memory_order_acquire) + idx;
    } else {
        lds__slot *chunk =
            atomic_load_explicit(&pool->chunks[idx >> LDS__POOL_CHUNK_SHIFT], memory_order_acquire);
        if (UNLIKELY(!chunk))
            return return_full(pool, lease, flags);
        s = &chunk[idx & (LDS__POOL_CHUNK_SLOTS - 1)];
    }
    /* Anything amiss (an even generation: h == 0, or a cached or retired slot's word;
     * another cache's lease; a claimed return queued on the slot) is sorted out, and
     * refused by cause, on the full path. */
    void *p = lease->ptr;
    size_t len = lease->length, cap = s->cap;
    if (UNLIKELY((h & LDS__POOL_GEN_STEP) == 0 ||
                 atomic_load_explicit(&s->word, memory_order_acquire) != h ||
                 atomic_load_explicit(&s->owner, RLX) != tc ||
                 atomic_load_explicit(&s->ptr, RLX) != (uintptr_t)p || lease->capacity != cap ||
                 atomic_load_explicit(&s->length, RLX) != len ||
                 atomic_load_explicit(&s->remote, RLX) != 0))
        return return_full(pool, lease, flags);
    /* Only this thread ends its leases: a plain store, no read-modify-write. A return of
     * this lease racing on another thread has claimed it, or will; its claim is refused
     * when this thread collects it (the word has moved on). */
    uint64_t next = h + LDS__POOL_GEN_STEP;
    atomic_store_explicit(&s->word, next, memory_order_release);
    uint32_t cls = s->cls;
    tally_in(tc, cls, cap, len);
    memset(lease, 0, sizeof *lease);
    uint8_t n = atomic_load_explicit(&tc->n[cls], RLX);
    /* A slot whose generation this return spent (LDS__POOL_RETIRED) retires in recycle. */
    if (UNLIKELY(!s->pooled || n >= pool->tc_limit[cls] || (next & LDS__POOL_RETIRED)))
        return recycle(pool, tc, s, 0);
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
        trim_idle(pool, lds__now_ns(), &freed);
    } else {
        /* Other threads empty their caches at their next call (they see the new epoch);
         * the calling thread's cache is emptied here. */
        uint64_t st = fresh_stamp(pool);
        atomic_store_explicit(&pool->stamp, st, memory_order_release);
        lds__tcache *tc = tc_get(pool);
        if (tc) {
            tc->stamp = st & ~(uint64_t)LDS__POOL_STAMP_SLOW;
            if (atomic_load_explicit(&tc->remote_head, RLX) != 0)
                remote_collect(pool, tc, tc);
            tc_flush(tc, 1, &freed);
        }
        for (uint32_t c = 0; c < LDS__POOL_CLASSES; c++) {
            uint32_t idx;
            while ((idx = shared_pop(pool, c)) != LDS__POOL_NO_SLOT) {
                buffer_destroy(pool, idx);
                trimmed(pool, lds__class_capacity(c), &freed);
            }
        }
        quarantine_drain(pool, &freed);
    }
    if (freed_bytes)
        *freed_bytes = freed;
    return LDS_OK;
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
    for (lds_pool *p = g_pools; p; p = p->next_live) {
        lds__tcache *tc = p->tcaches;
        while (tc) {
            lds__tcache *next = tc->next_in_pool;
            if ((tls_self == NULL || tc->owner != tls_self) &&
                !atomic_load_explicit(&tc->abandoned, RLX)) {
                tc->owner = NULL;
                tc_abandon(tc);
            }
            tc = next;
        }
    }
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
    if (o.thread_cache_count > LDS__POOL_TC_MAX)
        o.thread_cache_count = LDS__POOL_TC_MAX;

    lds_pool *pool = aligned_alloc(64, (sizeof *pool + 63u) & ~(size_t)63u);
    if (!pool)
        return LDS_E_NOMEM;
    memset(pool, 0, sizeof *pool);
    pool->opts = o;
    pool->id = atomic_fetch_add(&g_next_pool_id, 1);
    atomic_store_explicit(&pool->stamp, fresh_stamp(pool), RLX);
    pool->canary_key = UINT64_C(0x9E3779B97F4A7C15) ^ ((uint64_t)(uintptr_t)pool << 7);
    pool->free_slots = LDS__POOL_NO_SLOT;
    pthread_mutex_init(&pool->slot_lock, NULL);
    pthread_mutex_init(&pool->guard_lock, NULL);
    int ok = 1;
    for (uint32_t c = 0; c < LDS__POOL_CLASSES; c++) {
        size_t cap = lds__class_capacity(c);
        size_t n = o.thread_cache_bytes / cap;
        pool->tc_limit[c] = (uint8_t)(n < o.thread_cache_count ? n : o.thread_cache_count);
        pthread_mutex_init(&pool->classes[c].lock, NULL);
        pool->classes[c].stack = malloc(o.max_per_class * sizeof(uint32_t));
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
    if (tls_last && tls_last->pool_id == pool->id)
        tls_last = NULL;
    /* Every slot that still holds a buffer (cached, quarantined or leased) is freed. */
    uint32_t n = atomic_load_explicit(&pool->slot_count, RLX);
    for (uint32_t i = 0; i < n; i++) {
        lds__slot *s = slot_at(pool, i);
        if (s && atomic_load_explicit(&s->ptr, RLX) != 0)
            (void)buffer_release_memory(pool, s); /* munmap needs no access to the pages */
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
    lds__slot *s = pool ? slot_at(pool, (uint32_t)(handle & LDS__POOL_IDX_MASK)) : NULL;
    if (!s || (gen & 1u) || gen >= LDS__POOL_GEN_RETIRE ||
        (atomic_load_explicit(&s->word, RLX) & (LDS__POOL_GEN_STEP | LDS__POOL_RETIRED)))
        return LDS_E_INVALID_ARG;
    atomic_store_explicit(&s->word, gen << LDS__POOL_IDX_BITS | (handle & LDS__POOL_IDX_MASK), RLX);
    return LDS_OK;
}
