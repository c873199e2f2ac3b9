/*
 * pool_inline.h: the pool's warm rent and return, inline in the caller: an experiment of
 * bench/ and tests/, NOT an installed header (it was include/lodestar_pool_inline.h until
 * docs/adr/0037). It reads the pool's private layout, whose two variables liblodestar does
 * not export, so only a program that links the pool statically can use it: lodestar-bench
 * (rent-return's inline rows) and tests/test_pool_inline.c, test_pool.c. The layout it
 * declares is checked field by field against the pool's own structures where it is
 * compiled (bench/pool_inline_layout.c, built into both).
 *
 * lds_pool_rent_inline and lds_pool_return_inline do what lds_pool_rent and lds_pool_return
 * do, with the same checks, refusals, statistics and thread-safety (lodestar_pool.h), and
 * the same result for every input. They differ in where the work runs: a thread-cache hit
 * on rent, and on return the end of a lease this thread rented whose row has room, run in
 * the caller's own code, without a call into the pool; everything else (the shared pool,
 * NULL arguments, flags, checked modes, misses, full caches, other threads' leases, a trim
 * since this thread last looked, anything that fails a check) calls lds_pool_rent or
 * lds_pool_return, which decide it exactly as they always do. The checks of the inline
 * return are the pool's: the handle's generation must be odd and equal to the slot's
 * word, the slot's owner must be this thread's cache, the pointer, capacity and length must
 * be the slot's, and no claim by another thread may be queued on it; only then is the lease
 * ended, with a plain store (docs/pool-protocol.md, rule 2).
 *
 * A pool built with AddressSanitizer points the variable this header reads at a cache that
 * matches no pool (its warm path poisons buffers, which the inline code cannot do), so every
 * inline operation is the call there: never wrong, only slower. docs/adr/0026 has the
 * measurements of the pair, 0037 why it left the installed API.
 *
 * A program built with ThreadSanitizer needs the pool built with it too: a buffer passes
 * between threads through the pool's own atomics, which uninstrumented code hides from TSan.
 *
 * Requires GCC or Clang on x86-64 or AArch64 (the __atomic builtins and the initial-exec
 * TLS model); elsewhere, or with LDS_POOL_NO_INLINE defined, both functions are plain calls
 * of lds_pool_rent and lds_pool_return. C11 or later (it declares a _Thread_local); C only
 * (from C++ the header compiles to the plain calls).
 */
#ifndef LDS_BENCH_POOL_INLINE_H
#define LDS_BENCH_POOL_INLINE_H

#include "lodestar_pool.h"

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__)) &&                          \
    !defined(LDS_POOL_NO_INLINE) && !defined(__cplusplus)

/** The layout these inline functions read, checked in bench/pool_inline_layout.c. */
#define LDS_POOL_INLINE_LAYOUT 1

/* Layout 1. Not API: names, sizes and offsets change with LDS_POOL_INLINE_LAYOUT. */
#define LDS__V1_CLASSES     161
#define LDS__V1_TC_MAX      16
#define LDS__V1_TABLE_MAX   16384u
#define LDS__V1_CHUNK_SLOTS 1024u
#define LDS__V1_IDX_BITS    22
#define LDS__V1_IDX_MASK    ((UINT64_C(1) << LDS__V1_IDX_BITS) - 1)
#define LDS__V1_GEN_STEP    (UINT64_C(1) << 30)

typedef struct __attribute__((aligned(64))) lds__v1_slot {
    uint64_t word;     /* generation << 30 | class << 22 | index; odd generation: leased */
    uintptr_t ptr;     /* the buffer */
    size_t length;     /* the current lease's length */
    size_t cap;        /* the class's capacity */
    const void *owner; /* the thread cache of the current lease */
    uint64_t remote;   /* nonzero: another thread's return of it is queued */
    uint32_t remote_next;
    uint8_t cls, pooled, mapped, armed;
    uint8_t tc_lim; /* buffers of its class a thread cache keeps; 0: not pooled */
    unsigned char lds__slow[64] __attribute__((aligned(64)));
} lds__v1_slot;

typedef struct lds__v1_tcache {
    uint64_t stamp;     /* the pool's stamp when this cache last looked */
    uint64_t requested; /* sum of lengths rented */
    uint8_t n[LDS__V1_CLASSES];
    lds__v1_slot *items[LDS__V1_CLASSES][LDS__V1_TC_MAX];
    uint32_t remote_head __attribute__((aligned(64))); /* nonzero: returns to collect */
} lds__v1_tcache;

typedef struct lds__v1_pool {
    uint64_t id;          /* frozen: offset 0 */
    uint64_t stamp;       /* frozen: offset 8, never 0 */
    lds__v1_slot *chunk0; /* the first 1,024 slots */
} lds__v1_pool;

struct lds__tcache;
/* The calling thread's most recently used thread cache (never NULL). */
extern _Thread_local struct lds__tcache *lds__pool_tls_v1
    __attribute__((tls_model("initial-exec")));
/* The size class of a request of up to LDS__V1_TABLE_MAX bytes, per 16 bytes. */
extern const uint8_t lds__pool_class_table_v1[LDS__V1_TABLE_MAX / 16 + 1];

/* A test build counts the calls the inline functions make (tests/test_pool_inline.c). */
#ifdef LDS__POOL_INLINE_COUNT_CALLS
#define LDS__V1_CALLED() ((void)(LDS__POOL_INLINE_COUNT_CALLS++))
#else
#define LDS__V1_CALLED() ((void)0)
#endif

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LDS__V1_TSAN 1
#endif
#endif

/* One writer: a plain add (one instruction on x86-64), seen as an atomic by TSan. */
static inline void lds__v1_tally(uint64_t *c, uint64_t v)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) && !defined(LDS__V1_TSAN)
    __asm__ __volatile__("addq %1, %0" : "+m"(*c) : "er"(v));
#else
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
#endif
}

/**
 * lds_pool_rent, inline for a thread-cache hit of a request of up to 16 KiB on a pool
 * (not NULL) in the default mode; any other case is the call. Same contract, errors and
 * thread safety as lds_pool_rent.
 */
static inline lds_status lds_pool_rent_inline(lds_pool *pool, size_t min_bytes, lds_lease *out)
{
    lds__v1_tcache *tc = (lds__v1_tcache *)lds__pool_tls_v1;
    const lds__v1_pool *p = (const lds__v1_pool *)(const void *)pool;
    if (__builtin_expect(!pool || !out || min_bytes > LDS__V1_TABLE_MAX, 0))
        goto call;
    if (__builtin_expect(((tc->stamp ^ __atomic_load_n(&p->stamp, __ATOMIC_ACQUIRE)) |
                          __atomic_load_n(&tc->remote_head, __ATOMIC_RELAXED)) != 0,
                         0))
        goto call;
    {
        unsigned cls = lds__pool_class_table_v1[(min_bytes + 15) >> 4];
        size_t n = __atomic_load_n(&tc->n[cls], __ATOMIC_RELAXED);
        if (__builtin_expect(n == 0, 0))
            goto call;
        lds__v1_slot *s = tc->items[cls][n - 1];
        __atomic_store_n(&tc->n[cls], (uint8_t)(n - 1), __ATOMIC_RELAXED);
        void *ptr = (void *)__atomic_load_n(&s->ptr, __ATOMIC_RELAXED);
        lds__v1_tally(&tc->requested, min_bytes);
        /* The slot names this cache already: only its length and word change. */
        uint64_t w = __atomic_load_n(&s->word, __ATOMIC_RELAXED) + LDS__V1_GEN_STEP;
        __atomic_store_n(&s->length, min_bytes, __ATOMIC_RELAXED);
        __atomic_store_n(&s->word, w, __ATOMIC_RELEASE);
        out->ptr = ptr;
        out->length = min_bytes;
        out->capacity = __atomic_load_n(&s->cap, __ATOMIC_RELAXED);
        out->handle = w;
        return LDS_OK;
    }
call:
    LDS__V1_CALLED();
    return lds_pool_rent(pool, min_bytes, out);
}

/**
 * lds_pool_return, inline for a lease this thread rented from `pool` (not NULL) in the
 * default mode, with flags 0, whose slot is among the pool's first 1,024 and whose class
 * row has room; any other case, and anything a check finds amiss, is the call (which
 * refuses it by cause). Same contract, errors and thread safety as lds_pool_return.
 */
static inline lds_status lds_pool_return_inline(lds_pool *pool, lds_lease *lease, unsigned flags)
{
    lds__v1_tcache *tc = (lds__v1_tcache *)lds__pool_tls_v1;
    const lds__v1_pool *p = (const lds__v1_pool *)(const void *)pool;
    if (__builtin_expect(!pool || !lease || flags != 0 ||
                             tc->stamp != __atomic_load_n(&p->stamp, __ATOMIC_ACQUIRE),
                         0))
        goto call;
    {
        uint64_t h = lease->handle;
        /* The slot of the first chunk with the handle's low 10 index bits: no bounds test,
         * since a handle of a slot past the first chunk differs from that slot's word in
         * its index bits, and goes to the call at the word test below. */
        lds__v1_slot *s = __atomic_load_n(&p->chunk0, __ATOMIC_ACQUIRE) +
                          (h & (LDS__V1_CHUNK_SLOTS - 1));
        /* One test for two: the handle's generation is odd (then `next` has the step bit
         * clear), and this return does not spend the slot's last generation (then `next`
         * has bit 63 clear). A handle with bit 63 set that passes it matches no word: a
         * live word has bit 63 clear, a retired one is even. */
        uint64_t next = h + LDS__V1_GEN_STEP;
        if (__builtin_expect(
                (next & (LDS__V1_GEN_STEP | UINT64_C(1) << 63)) != 0 ||
                    __atomic_load_n(&s->word, __ATOMIC_ACQUIRE) != h ||
                    __atomic_load_n(&s->owner, __ATOMIC_RELAXED) != (void *)tc ||
                    __atomic_load_n(&s->ptr, __ATOMIC_RELAXED) != (uintptr_t)lease->ptr ||
                    __atomic_load_n(&s->cap, __ATOMIC_RELAXED) != lease->capacity ||
                    __atomic_load_n(&s->length, __ATOMIC_RELAXED) != lease->length ||
                    __atomic_load_n(&s->remote, __ATOMIC_RELAXED) != 0,
                0))
            goto call;
        unsigned cls = (unsigned)(h >> LDS__V1_IDX_BITS) & 0xffu;
        size_t n = __atomic_load_n(&tc->n[cls], __ATOMIC_RELAXED);
        /* A full row or a buffer not pooled: the call (before anything is stored, so it
         * sees the lease as it was). */
        if (__builtin_expect(n >= s->tc_lim, 0))
            goto call;
        __atomic_store_n(&s->word, next, __ATOMIC_RELEASE);
        memset(lease, 0, sizeof *lease);
        tc->items[cls][n] = s;
        __atomic_store_n(&tc->n[cls], (uint8_t)(n + 1), __ATOMIC_RELAXED);
        return LDS_OK;
    }
call:
    LDS__V1_CALLED();
    return lds_pool_return(pool, lease, flags);
}

#else /* no inline path here: the calls themselves */

static inline lds_status lds_pool_rent_inline(lds_pool *pool, size_t min_bytes, lds_lease *out)
{
    return lds_pool_rent(pool, min_bytes, out);
}

static inline lds_status lds_pool_return_inline(lds_pool *pool, lds_lease *lease, unsigned flags)
{
    return lds_pool_return(pool, lease, flags);
}

#endif

#ifdef __cplusplus
}
#endif

#endif /* LDS_BENCH_POOL_INLINE_H */
