/*
 * pool_internal.h: the pool's private structures, shared by the files of pool/ only.
 *
 * Layout: every buffer the pool has allocated owns one *slot* (its allocation,
 * size class and generation). A slot's handle word is (generation << 30 | class << 22 |
 * slot index), and a lease's handle is the word while leased; the generation is odd while
 * leased and even while cached. The generation only grows: a slot whose generation reaches
 * 2^33 (after 2^32 rent/return cycles) is retired, its buffer freed and the slot never used
 * again, so no handle word repeats in the life of a pool (docs/adr/0011, docs/adr/0025).
 * Free buffers sit in a per-thread cache (slot pointers; no lock) or a per-class
 * shared stack (slot indices; one mutex per class).
 *
 * Ownership (docs/adr/0017, docs/pool-protocol.md): a leased slot records the thread
 * cache that rented it (`owner`), and only that cache's thread ends the lease, with a
 * plain load and store of the word (no read-modify-write), so a same-thread warm pair
 * has no locked instruction. A return on another thread *claims* the lease (a
 * compare-and-swap of the slot's `remote` word from 0 to the handle) and pushes the slot
 * on the owner's remote-return list (a lock-free stack of slot indices); the owner
 * collects the list at its next rent, return slow path, trim or statistics snapshot, or
 * its exit, and ends each claimed lease then, if it is still live (else the claim is
 * refused and counted). A cache whose thread has exited is *abandoned*: it stays with
 * the pool, its list is collected under lds__g_lock by whoever pushes to it, and a new
 * thread adopts it.
 *
 * The warm pair (pool.c: lds_pool_rent, lds_pool_return; the same inline in
 * bench/pool_inline.h, whose layout bench/pool_inline_layout.c checks) is a cache pop and a cache push
 * guarded by one comparison of stamps (LDS__POOL_STAMP_SLOW). It counts only the length
 * rented: rents, returns and leases out are read off the slots' generations when a
 * snapshot is taken (stats.c, docs/adr/0025). What keeps it short (docs/adr/0021, 0025):
 * the thread's cache pointer is never NULL (lds__tc_none), small requests find their class
 * in a table, the one counter is one add, a warm rent does not store the owner (a slot in
 * a cache's items names that cache), the return finds its row from the handle's class
 * bits, the first chunk of slots is reached without a bounds check (lds_pool.chunk0), and
 * a slot's tc_lim folds the "pooled" and "cache full" tests.
 */
#ifndef LDS_POOL_INTERNAL_H
#define LDS_POOL_INTERNAL_H

#include "lds_common.h"
#include "lodestar_pool.h"

#include <pthread.h>
#include <stdatomic.h>

/* Size classes: class 0 is LDS_POOL_MIN_CLASS (2^6); then 4 per doubling up to 2^46. */
#define LDS__POOL_MIN_SHIFT 6
#define LDS__POOL_MAX_SHIFT 46
#define LDS__POOL_CLASSES   (1 + (LDS__POOL_MAX_SHIFT - LDS__POOL_MIN_SHIFT) * 4)

/* Slot table: chunks of slots allocated on demand, never moved while the pool lives. */
#define LDS__POOL_CHUNK_SHIFT 10
#define LDS__POOL_CHUNK_SLOTS (1u << LDS__POOL_CHUNK_SHIFT)
#define LDS__POOL_MAX_CHUNKS  4096u
#define LDS__POOL_NO_SLOT     UINT32_MAX

/* Handle words: bits 0-21 the slot index, bits 22-29 the size class of the slot's buffer,
 * bits 30-63 the generation. GEN_STEP is one generation (and the "leased" bit); RETIRED,
 * the generation's top bit, is set only in the word of a retired slot, never in a handle
 * (docs/adr/0011). The class bits let the warm return find its thread-cache row from the
 * handle alone, without waiting for a load from the slot (docs/adr/0025); they change only
 * while the slot holds no buffer, never within a lease. */
#define LDS__POOL_IDX_BITS  22
#define LDS__POOL_IDX_MASK  ((UINT64_C(1) << LDS__POOL_IDX_BITS) - 1)
#define LDS__POOL_CLS_BITS  8
#define LDS__POOL_CLS_MASK  (((UINT64_C(1) << LDS__POOL_CLS_BITS) - 1) << LDS__POOL_IDX_BITS)
#define LDS__POOL_GEN_SHIFT (LDS__POOL_IDX_BITS + LDS__POOL_CLS_BITS)
#define LDS__POOL_GEN_STEP  (UINT64_C(1) << LDS__POOL_GEN_SHIFT)
#define LDS__POOL_RETIRED   (UINT64_C(1) << 63)
/* The generation at which a slot retires: 2^33. A slot starts at its pool's gen_start (even,
 * below LDS__POOL_GEN_START_MAX), so it retires at the return of its lease number
 * (2^33 - gen_start) / 2: at least 3 x 2^30 leases, at most 2^32. */
#define LDS__POOL_GEN_RETIRE    (UINT64_C(1) << (63 - LDS__POOL_GEN_SHIFT))
#define LDS__POOL_GEN_START_MAX (UINT64_C(1) << 31)
_Static_assert(LDS__POOL_CLASSES <= (1 << LDS__POOL_CLS_BITS), "a class fits in a handle");

/* The generation the slots of the pool numbered `id` start at: an even number below
 * LDS__POOL_GEN_START_MAX. Consecutive ids land far apart (a Weyl sequence by the golden
 * ratio, the most evenly spread there is): the first n pools of a process start at least
 * 0.45 x 2^31 / n apart (computed for n up to 100,000; 10,791,102 for a hundred pools).
 * This makes another pool's lease rare to match, not impossible: a busy slot runs through
 * the generations above its start (docs/adr/0027). */
static inline uint64_t lds__pool_gen_start(uint64_t id)
{
    return ((id * UINT64_C(0x9E3779B97F4A7C15)) >> 33) & ~UINT64_C(1);
}

/* The size class named by a handle or slot word. */
static inline uint32_t lds__handle_cls(uint64_t h)
{
    return (uint32_t)((h & LDS__POOL_CLS_MASK) >> LDS__POOL_IDX_BITS);
}
_Static_assert((uint64_t)LDS__POOL_MAX_CHUNKS *LDS__POOL_CHUNK_SLOTS <= LDS__POOL_IDX_MASK + 1,
               "every slot index fits in a handle's index bits");

/* Most buffers one thread caches per class (the option is clamped to this). */
#define LDS__POOL_TC_MAX 16
/* In a slot's `remote` claim word: the claimed return asked for LDS_RETURN_CLEAR. Bit 63 of a
 * handle is never set (LDS__POOL_RETIRED), so the claim carries the flag beside the handle. */
#define LDS__POOL_CLAIM_CLEAR (UINT64_C(1) << 63)

struct lds__tcache;

typedef struct lds__slot {
    /* First cache line: read on every warm rent and return. */
    _Atomic uint64_t word; /* generation << 30 | class << 22 | index; generation odd: leased, even:
                              cached or unused; LDS__POOL_RETIRED set: retired. Written
                              only by the lease's owner (or the slow paths, while no
                              lease is out) */
    _Atomic uintptr_t ptr; /* the lease pointer; 0 when the slot holds no buffer */
    _Atomic size_t length; /* requested length of the current lease */
    _Atomic size_t cap;    /* capacity of the size class; fixed while the slot holds a buffer
                              (atomic: a stale return on another thread may read it while the
                              slot takes a new buffer; every access is a relaxed load or store) */
    _Atomic(struct lds__tcache *) owner; /* the cache that rented the current lease */
    _Atomic uint64_t remote;             /* 0, or the handle (| LDS__POOL_CLAIM_CLEAR) of a claimed
                                            return from another thread: then the slot is on one
                                            remote-return list (or being collected from it) */
    _Atomic uint32_t remote_next;        /* remote-return list link: index + 1, 0 ends the list */
    uint8_t cls;                         /* size class; fixed while the slot holds a buffer */
    uint8_t pooled; /* 1: counted against the retention caps; 2: a large buffer, counted in
                       large_pooled (docs/adr/0029); 0: freed on return */
    uint8_t mapped; /* from mmap (else malloc) */
    uint8_t armed;  /* canary words written at return, to verify at rent */
    uint8_t tc_lim; /* buffers of its class a thread cache keeps (the pool's tc_limit[cls]),
                       0 when not pooled: the warm return's one test for both (fixed while
                       the slot holds a buffer) */
    /* Second cache line: slow paths only. */
    void *base __attribute__((aligned(64))); /* allocation start (mapping or malloc block) */
    size_t alloc_bytes;                      /* bytes mapped or allocated at base */
    uint64_t idle_since; /* ns (CLOCK_MONOTONIC) when pushed to a shared stack */
    uint64_t gen_base;   /* the generation when the slot took its buffer: the buffer has been
                            rented (gen - gen_base + 1) / 2 times (statistics, stats.c) */
    uint32_t next_free;  /* free-slot list link */
    uint8_t pages;       /* LDS__PAGES_*: how the mapping is backed (pool/os.c) */
} __attribute__((aligned(64))) lds__slot; /* two cache lines of its own: no false sharing */

_Static_assert(sizeof(lds__slot) == 128, "a slot is two cache lines");
_Static_assert(LDS__POOL_CLASSES <= 256, "a class fits in a byte");
_Static_assert((uint64_t)LDS__POOL_MAX_CHUNKS *LDS__POOL_CHUNK_SLOTS == LDS_POOL_MAX_BUFFERS,
               "a pool's slot table holds LDS_POOL_MAX_BUFFERS buffers");

typedef struct lds__class {
    pthread_mutex_t lock;
    uint32_t *stack; /* cached slot indices; [0] is the oldest */
    uint32_t count;
    uint32_t room;           /* the stack's size: min(max_per_class, max_retained_bytes / capacity),
                                at least 1; never less than the class's pooled buffers can be */
    _Atomic uint32_t live;   /* buffers of this class that exist (leased, cached, quarantined) */
    _Atomic uint32_t pooled; /* of which counted against the caps */
} __attribute__((aligned(64))) lds__class;

/* A thread's cache for one pool. Only the owning thread writes it (an abandoned cache's,
 * whoever holds lds__g_lock); statistics read the counters (relaxed atomics: plain moves
 * on x86). The warm pair counts only `requested`; misses and what the cache holds are
 * counted on the slow paths. Allocated on its own cache lines. A cache lives as long as its
 * pool: at its thread's exit it is abandoned (emptied, kept), then adopted by a new thread. */
typedef struct lds__tcache {
    /* The warm path touches these: the stamp, `requested`, one class's `n` and items row.
     * Nothing else is counted there: rents, returns and leased bytes are read off the
     * slots' generations when statistics are taken (stats.c, docs/adr/0025). */
    uint64_t stamp; /* the pool's stamp (without LDS__POOL_STAMP_SLOW) when last synced */
    _Atomic uint64_t requested; /* sum of lengths rented */
    _Atomic uint8_t n[LDS__POOL_CLASSES];
    lds__slot *items[LDS__POOL_CLASSES][LDS__POOL_TC_MAX]; /* every slot here has owner == this
                                                              cache, so a warm rent need not
                                                              store it */
    /* Written by other threads: a line of its own. */
    _Atomic uint32_t remote_head __attribute__((aligned(64))); /* remote-return list: slot
                                                                   index + 1, 0 when empty */
    _Atomic int abandoned; /* its thread exited (set and cleared under lds__g_lock) */
    /* Slow paths only. */
    lds_pool *pool __attribute__((aligned(64)));
    _Atomic uint64_t misses[LDS__POOL_CLASSES]; /* rents by this thread not served from this
                                                   cache's items on the warm path's terms
                                                   (shared stacks, new buffers) */
    _Atomic uint64_t held;     /* capacity bytes of the buffers this cache holds: its leases
                                  out (claimed or not) and its cached buffers; changes on the
                                  slow paths only (a warm rent or return moves a buffer
                                  between the two) */
    _Atomic uint64_t held_top; /* high-water of `held` */
    uint64_t pool_id;
    const void *owner; /* the owning thread's cache list (tcache.c), to tell its caches apart
                          from other threads' in a forked child */
    struct lds__tcache *next_in_thread;
    struct lds__tcache *next_in_pool, *prev_in_pool; /* under lds__g_lock */
    int dead;                                        /* pool freed; under lds__g_lock */
} __attribute__((aligned(64))) lds__tcache;

/* pool->stamp: a value drawn from a process-wide counter at creation and at every
 * LDS_POOL_TRIM_ALL, so one comparison with a thread cache's stamp says "this cache
 * belongs to this pool and has seen its latest trim". The low bit marks pools whose
 * rents or returns always take the full path (a checked mode, fill_on_rent). */
#define LDS__POOL_STAMP_SLOW 1u

struct lds_pool {
    uint64_t id;
    _Atomic uint64_t stamp; /* see LDS__POOL_STAMP_SLOW */
    /* The warm return's way to a slot of the first chunk (indices below
     * LDS__POOL_CHUNK_SLOTS) without a bounds load: chunks[0] once it exists, before that
     * lds__no_slots, a chunk of zeroed slots that is never written (a zero word names no
     * lease, so a return that finds it goes to the full path). Next to `stamp`: one line. */
    _Atomic(lds__slot *) chunk0;
    lds_pool_options opts;
    int is_shared;
    uint64_t canary_key;
    uint8_t tc_limit[LDS__POOL_CLASSES];

    lds__class classes[LDS__POOL_CLASSES];
    _Atomic uint64_t shared_bytes, shared_count; /* cached in shared stacks */

    pthread_mutex_t slot_lock;
    _Atomic(lds__slot *) chunks[LDS__POOL_MAX_CHUNKS];
    _Atomic uint32_t slot_count; /* slots handed out so far (bump allocator) */
    uint32_t free_slots;         /* free-slot list head, under slot_lock */
    uint64_t rents_done;         /* rents of buffers that are gone (folded from their slots'
                                    generations when freed), under slot_lock */
    uint64_t rented_bytes_done;  /* their capacity bytes, rents x capacity, under slot_lock */
    uint64_t gen_start;          /* the generation every new slot of this pool starts at: even,
                                    below 2^31, different for pools made one after another
                                    (lds__pool_gen_start), so that a handle of one pool matches
                                    a slot of another only while that slot is out at exactly
                                    that generation (docs/adr/0027) */

    _Atomic uint64_t pooled_bytes; /* capacity of pooled buffers; <= max_retained_bytes */
    _Atomic uint32_t large_pooled; /* buffers above max_retained_bytes kept (pooled == 2);
                                      <= opts.large_buffers */
    _Atomic uint64_t bytes_mapped;
    _Atomic uint64_t next_age_check;

    pthread_mutex_t guard_lock; /* the guard-mode quarantine ring */
    uint32_t *quarantine;
    uint32_t q_head;
    _Atomic uint32_t q_count; /* under guard_lock; statistics read it without the lock */
    _Atomic uint64_t q_bytes;

    _Atomic uint64_t hits_shared, misses_cold, misses_exhausted, misses_oversize;
    _Atomic uint64_t refused[LDS_POOL_REFUSED_COUNT];
    _Atomic uint64_t canary_failures, drops, trims, trimmed_bytes;
    _Atomic uint64_t slots_retired, guard_failures;
    _Atomic int os_warned; /* a failed system call was reported on stderr (once per pool) */

    lds__tcache *tcaches;                   /* every cache, live or abandoned; under lds__g_lock */
    struct lds_pool *next_live, *prev_live; /* registry of live pools, under lds__g_lock */
    int registered;                         /* linked in the registry */
};

/* Guards every thread-cache list (per pool and per thread), `retired`, and the registry
 * of live pools (which the fork handlers walk).
 *
 * Lock order. A path that holds two of the pool's locks at once takes them in this order,
 * and the fork handlers (pool.c: fork_prepare) take all of them in it:
 *   1. the shared-pool creation lock (pool.c: g_shared_lock; held while the shared pool is
 *      created, which takes lds__g_lock to register it);
 *   2. lds__g_lock (held around tc_flush and buffer_destroy by the thread-exit destructor
 *      and the fork child handler, so it comes before every lock of a pool);
 *   3. then, pool by pool in registry order, each pool's per-class locks in class order,
 *      its guard_lock, its slot_lock.
 * Within one pool no path holds two of its locks at once (a class lock, guard_lock and
 * slot_lock are each released before the next is taken), and no path holds locks of two
 * pools, so the order in 3 is free; it is fixed only so that the fork handler's is one.
 * pthread_atfork is registered (pool.c: atfork_once) only while none of these is held:
 * glibc runs the prepare handlers under its own atfork lock, which pthread_atfork takes. */
extern pthread_mutex_t lds__g_lock;

/* os.c: the operating-system boundary. Every call that can fail returns 0 or the errno of
 * its failure (a positive value; errno itself is not to be read after), and writes its
 * result through an out-parameter; none prints. */
/* Maps `bytes` of private anonymous memory, readable and writable, into *out (NULL on
 * failure). */
int lds__map(size_t bytes, void **out);
/* The kernel's transparent huge-page size (sysfs hpage_pmd_size; 2 MiB if unreadable). */
size_t lds__huge_page_size(void);
/* As lds__map, the mapping starting on a lds__huge_page_size() boundary and advised
 * MADV_HUGEPAGE; it is `bytes` long (the alignment slack is unmapped), so
 * lds__unmap(base, bytes) frees it. `*pages`: LDS__PAGES_HUGE, or LDS__PAGES_FALLBACK when
 * THP is "never" (then not advised) or madvise failed (the mapping is good all the same). */
int lds__map_huge(size_t bytes, void **out, uint8_t *pages);

/* How a buffer's pages are backed (lds__slot.pages; lds__pool_lease_pages). */
enum {
    LDS__PAGES_SMALL = 0,    /* 4 KiB pages: huge pages off, or below the threshold */
    LDS__PAGES_HUGE = 1,     /* 2 MiB-aligned and advised MADV_HUGEPAGE */
    LDS__PAGES_FALLBACK = 2, /* huge pages wanted; THP "never" or madvise failed: 4 KiB */
};
/* The kernel's THP mode, read once from /sys/kernel/mm/transparent_hugepage/enabled:
 * 0 never (or no THP), 1 madvise, 2 always. */
int lds__thp_mode(void);
/* LDS__PAGES_* of the buffer behind `lease` (LDS__PAGES_SMALL for an unknown lease); the
 * loader reports it in lds_load_info (declared again in loader/load_internal.h). */
int lds__pool_lease_pages(lds_pool *pool, const lds_lease *lease);
/* Guard mode's mapping: one PROT_NONE page, `bytes` readable and writable, one PROT_NONE
 * page; *out is the mapping's start (the accessible part begins one page in) and
 * lds__unmap(*out, bytes + 2 pages) frees it. The accessible part is thus a map entry of
 * its own, which no neighbour can merge with, so making all of it PROT_NONE later never
 * splits an entry: it cannot fail for want of one (ENOMEM at vm.max_map_count); here, at
 * the mapping's creation, it can, and that errno is returned, with *protect_failed set to
 * tell it from mmap's (nothing stays mapped). */
int lds__map_guarded(size_t bytes, void **out, int *protect_failed);
int lds__unmap(void *base, size_t bytes);
/* Makes [base, base + bytes) readable and writable (accessible != 0) or PROT_NONE. */
int lds__protect(void *base, size_t bytes, int accessible);
/* A short name for the errno values these calls return ("ENOMEM"; "errno" if unlisted). */
const char *lds__os_errno_name(int err);

/* Test hook (fault injection): after `skip` more calls of `op` succeed, the next `count`
 * calls fail with `err` without reaching the kernel; count 0 disarms. Thread-safe. */
typedef enum lds__os_op {
    LDS__OS_MAP = 0,
    LDS__OS_UNMAP,
    LDS__OS_PROTECT_NONE, /* lds__protect(.., 0) */
    LDS__OS_PROTECT_RW,   /* lds__protect(.., 1) */
    LDS__OS_MADVISE,      /* madvise(MADV_HUGEPAGE) in lds__map_huge */
    LDS__OS_OPS
} lds__os_op;
void lds__os_test_fail(lds__os_op op, int err, uint32_t skip, uint32_t count);

#if defined(__SANITIZE_ADDRESS__)
#define LDS__ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LDS__ASAN 1
#endif
#endif

/* AddressSanitizer's manual poisoning (os.c); without ASan, nothing, inline, so the warm
 * path carries no call. */
#ifdef LDS__ASAN
void lds__asan_poison(const void *p, size_t n);
void lds__asan_unpoison(const void *p, size_t n);
int lds__asan_is_poisoned(const void *p);
#else
static inline void lds__asan_poison(const void *p, size_t n)
{
    (void)p;
    (void)n;
}
static inline void lds__asan_unpoison(const void *p, size_t n)
{
    (void)p;
    (void)n;
}
static inline int lds__asan_is_poisoned(const void *p)
{
    (void)p;
    return 0;
}
#endif

/* ==== shared by the files of pool/ ===================================================== */

#if defined(__SANITIZE_THREAD__)
#define LDS__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LDS__TSAN 1
#endif
#endif

/* A counter with one writer (a thread cache's, see lds__tcache), read by snapshots on other
 * threads with relaxed loads. On x86-64 the update is one non-locked `add` to memory: an
 * aligned 8-byte write that no reader sees torn, and the one writer makes read-modify-write
 * atomicity unnecessary. C11 has no single-instruction form of a relaxed load + store
 * (compilers emit three instructions), so the asm spells it; the operand is the atomic
 * object itself, so the compiler orders it with the other accesses to it. Under TSan, and
 * elsewhere, the portable relaxed load and store. */
#if defined(__x86_64__) && !defined(LDS__TSAN) && (defined(__GNUC__) || defined(__clang__))
static inline void lds__tally_add(_Atomic uint64_t *c, uint64_t v)
{
    __asm__ __volatile__("addq %1, %0" : "+m"(*c) : "er"(v));
}
static inline void lds__tally_sub(_Atomic uint64_t *c, uint64_t v)
{
    __asm__ __volatile__("subq %1, %0" : "+m"(*c) : "er"(v));
}
#else
static inline void lds__tally_add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                          memory_order_relaxed);
}
static inline void lds__tally_sub(_Atomic uint64_t *c, uint64_t v)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) - v,
                          memory_order_relaxed);
}
#endif

static inline void lds__count(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* Branch-free: requests up to the minimum class count as the minimum class; then, with
 * m = request - 1 and 2^k <= m < 2^(k+1), the class is 4 per doubling above 2^6 plus the
 * two bits of m below its top bit. Valid for min_bytes <= LDS_POOL_MAX_REQUEST. */
static inline uint32_t lds__pool_class(size_t min_bytes)
{
    uint64_t m = (min_bytes > LDS_POOL_MIN_CLASS ? (uint64_t)min_bytes : LDS_POOL_MIN_CLASS) - 1;
    unsigned k = 63u - (unsigned)__builtin_clzll(m);
    return 4u * k + (uint32_t)(m >> (k - 2)) - (4u * LDS__POOL_MIN_SHIFT + 3u);
}

/* Requests up to this many bytes find their class in a table (lds__pool_class_small): every
 * class boundary up to it is a multiple of 16 (the finest step, 16 bytes, lies between 64
 * and 128), so the table has one entry per 16 bytes. */
#define LDS__POOL_TABLE_MAX   ((size_t)16384)
#define lds__pool_class_table lds__pool_class_table_v1 /* also read by bench/pool_inline.h */
extern const uint8_t lds__pool_class_table[LDS__POOL_TABLE_MAX / 16 + 1];

/* lds__pool_class(min_bytes) for min_bytes <= LDS__POOL_TABLE_MAX: one add, one shift, one
 * byte load (the class computation costs a dozen instructions). */
static inline uint32_t lds__pool_class_small(size_t min_bytes)
{
    return lds__pool_class_table[(min_bytes + 15) >> 4];
}

/* The slot's index, the low bits of its handle word (which never change). */
static inline uint32_t lds__slot_idx(const lds__slot *s)
{
    return (uint32_t)(atomic_load_explicit(&s->word, memory_order_relaxed) & LDS__POOL_IDX_MASK);
}

static inline lds__slot *lds__slot_at(lds_pool *pool, uint32_t idx)
{
    if (idx >= atomic_load_explicit(&pool->slot_count, memory_order_acquire))
        return NULL;
    lds__slot *chunk =
        atomic_load_explicit(&pool->chunks[idx >> LDS__POOL_CHUNK_SHIFT], memory_order_acquire);
    return chunk ? &chunk[idx & (LDS__POOL_CHUNK_SLOTS - 1)] : NULL;
}

/* What a cache holds (`held`) and its high-water: slow paths only, one writer. */
static inline void lds__held_add(lds__tcache *tc, size_t cap)
{
    uint64_t now = atomic_load_explicit(&tc->held, memory_order_relaxed) + cap;
    atomic_store_explicit(&tc->held, now, memory_order_relaxed);
    if (now > atomic_load_explicit(&tc->held_top, memory_order_relaxed))
        atomic_store_explicit(&tc->held_top, now, memory_order_relaxed);
}
static inline void lds__held_sub(lds__tcache *tc, size_t cap)
{
    lds__tally_sub(&tc->held, cap);
}

/* The calling thread's most recently used cache (tcache.c); the warm path's only TLS. Never
 * NULL: a thread that has none points at lds__tc_none, a cache of no pool (pool_id 0, stamp
 * 0: no pool has either), never written, so the warm path's stamp comparison alone sends
 * such a thread to the full path. Not exported from liblodestar (docs/adr/0037); with the
 * class table it is read by the inline experiment of bench/pool_inline.h in programs that
 * link the pool statically (layout 1, checked in bench/pool_inline_layout.c); in a build
 * with AddressSanitizer the one it reads stays at lds__tc_none (the inline code cannot
 * poison), and the pool's own is a separate variable. */
extern _Thread_local struct lds__tcache *lds__pool_tls_v1
    __attribute__((tls_model("initial-exec")));
#ifdef LDS__ASAN
extern _Thread_local lds__tcache *lds__tls_last __attribute__((tls_model("initial-exec")));
#else
#define lds__tls_last lds__pool_tls_v1
#endif
extern lds__tcache lds__tc_none;
/* The stand-in for a pool's first chunk before it exists (see lds_pool.chunk0). */
extern lds__slot lds__no_slots[LDS__POOL_CHUNK_SLOTS];

/* buffers.c */
void lds__os_failed(lds_pool *pool, const char *call, int err, size_t bytes, const char *outcome);
uint32_t lds__buffer_create(lds_pool *pool, uint32_t cls, int pooled);
int lds__buffer_release_memory(lds_pool *pool, lds__slot *s);
void lds__buffer_forget(lds_pool *pool, uint32_t idx);
void lds__buffer_destroy(lds_pool *pool, uint32_t idx);
void lds__trimmed(lds_pool *pool, size_t cap, size_t *freed);
/* checks.c */
void lds__canary_apply(const lds_pool *pool, uint32_t idx, char *p, size_t cap, int write,
                       int *bad);
int lds__on_rent(lds_pool *pool, uint32_t idx, char *p, size_t len, size_t cap);
uint32_t lds__quarantine_push(lds_pool *pool, uint32_t idx);
void lds__quarantine_drain(lds_pool *pool, size_t *freed);
/* shared.c */
void lds__shared_push(lds_pool *pool, uint32_t idx, uint64_t now);
uint32_t lds__shared_pop(lds_pool *pool, uint32_t cls);
void lds__trim_idle(lds_pool *pool, uint64_t now, size_t *freed);
void lds__maybe_age(lds_pool *pool);
/* A buffer of class `cls` from the shared stacks or new, or LDS__POOL_NO_SLOT. `*kind` is
 * the counter the rent belongs to (hits_shared or a misses_*); the caller counts it once,
 * when the rent succeeds with that buffer (a canary failure discards it and rents again; a
 * failed rent counts nothing), so hits + misses == rents. */
uint32_t lds__rent_slow(lds_pool *pool, lds__tcache *tc, uint32_t cls, size_t cap,
                        _Atomic uint64_t **kind);
/* tcache.c */
void lds__tc_flush(lds__tcache *tc, int destroy, size_t *freed);
void lds__tc_abandon(lds__tcache *tc);
/* Abandons every cache of `pool` not owned by the calling thread (a forked child). */
void lds__tc_abandon_others(lds_pool *pool);
lds__tcache *lds__tc_get(lds_pool *pool);
lds__tcache *lds__tc_sync(lds_pool *pool);
lds_status lds__remote_claim(lds_pool *pool, lds__tcache *owner, lds__slot *s, uint64_t r,
                             int locked);
void lds__remote_collect(lds_pool *pool, lds__tcache *tc, lds__tcache *cache);
/* pool.c */
lds_status lds__refuse(lds_pool *pool, lds_pool_refusal why);
lds_status lds__recycle(lds_pool *pool, lds__tcache *holder, lds__tcache *tc, lds__slot *s,
                        unsigned flags);

/* buffers.c and tcache.c helpers used by stats.c */
size_t lds__class_capacity(uint32_t cls);
uint32_t lds__class_of(size_t min_bytes);
/* Collects the calling thread's remote-return list for `pool`, if it has a cache there
 * (statistics call it first, so a snapshot shows this thread's cross-thread returns). */
void lds__pool_collect_mine(lds_pool *pool);

/* Frees the shared stacks' cached buffers but at most `keep` of the class of `min_bytes`,
 * after collecting the calling thread's cross-thread returns; thread caches are not
 * touched. Returns the capacity bytes freed. For live/live.c: a live index's own pool keeps
 * one spare payload buffer between reloads (docs/adr/0049). */
size_t lds__pool_keep_spares(lds_pool *pool, size_t min_bytes, uint32_t keep);

/* Test hook: sets the generation of the slot named by `handle` (its index bits) to `gen`,
 * so a test can take a slot to the edge without 2^32 real cycles. The slot must exist and
 * not be leased or retired; `gen` must be even (cached) and below LDS__POOL_GEN_RETIRE.
 * LDS_OK, or LDS_E_INVALID_ARG. Not thread-safe (the caller owns the cached slot). */
lds_status lds__pool_test_set_generation(lds_pool *pool, uint64_t handle, uint64_t gen);

#endif /* LDS_POOL_INTERNAL_H */
