/*
 * lodestar_pool.h: the buffer pool (pool/).
 *
 * A pool hands out uninitialized byte buffers ("leases") and takes them back
 * for reuse. Requests are rounded up to a size class: powers of two, each
 * doubling split in four, so a lease's capacity is at most 1.25x its length
 * (for requests of at least LDS_POOL_MIN_CLASS bytes), and a cached buffer is
 * only ever handed out for requests of its own class. Buffers of at least
 * `mmap_threshold` bytes are mapped by the pool itself (only touched pages
 * become resident, trimming unmaps them); smaller ones come from aligned
 * malloc. Every buffer is 64-byte aligned.
 *
 * Each thread keeps a small cache per pool in front of per-class shared
 * stacks, so a warm rent+return on one thread takes no lock, no locked (atomic
 * read-modify-write) instruction, makes no system call and faults no page. Every
 * lease carries a generation; a double return, a stale handle or a pointer or size
 * the pool never gave is refused with LDS_E_POOL_REFUSED and counted, never reused.
 *
 * Returns on another thread (docs/pool-protocol.md, docs/adr/0017). A lease belongs
 * to the thread that rented it. Returned on another thread, it is checked there
 * (pointer, size, handle) and queued for the renting thread, which ends it at its next
 * lds_pool_rent, lds_pool_trim or lds_pool_get_stats on that pool, at a return that
 * takes the slow path, or at its exit; until then it counts as leased (leases_current,
 * bytes_leased) and its buffer is neither reused nor freed, and the checked modes'
 * treatment of a returned buffer (canary, poison fill, guard quarantine) waits for it
 * too. A thread that rents a large buffer, hands it to another thread and then makes
 * no further call on the pool keeps it until it exits: let it call
 * lds_pool_trim(pool, LDS_POOL_TRIM_IDLE, NULL) now and then. A thread that exits
 * hands its leases to the pool: their returns are then ended at once.
 *
 * Thread safety: every function taking an lds_pool * may be called from any
 * number of threads at once, except lds_pool_free (no other call on that pool
 * may run or follow). The pool knows nothing of the index format.
 *
 * fork(): a child of a multi-threaded process may use every pool the parent had (pthread_atfork
 * handlers hold the pool's locks across the fork). The buffers cached by the threads that do
 * not exist in the child go back to the shared stacks; leases those threads held stay counted
 * as out and are never reused by the child. Under ThreadSanitizer, a fork() while pools exist
 * needs TSAN_OPTIONS=detect_deadlocks=0: the fork handler holds every pool lock at once (about
 * 163 per pool) and TSan's deadlock detector tracks at most 64 held locks, after which it stops
 * the process with an internal CHECK.
 */
#ifndef LODESTAR_POOL_H
#define LODESTAR_POOL_H

#include "lodestar_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== pool =============================================================== */

/** A buffer pool; opaque. Create with lds_pool_create or use lds_pool_shared(). */
typedef struct lds_pool lds_pool;

/**
 * A lease: one rented buffer.
 * - ptr:      start of the buffer, 64-byte aligned; contents uninitialized.
 * - length:   bytes requested (the `min_bytes` given to lds_pool_rent).
 * - capacity: bytes usable at ptr; capacity >= length, and capacity <=
 *             1.25 * length when length >= LDS_POOL_MIN_CLASS.
 * - handle:   opaque identity of the lease (slot index and generation);
 *             0 never names a live lease. No two leases of a pool ever get the same
 *             handle, so a stale handle is never honoured, for the life of the pool: a
 *             slot's generation only grows, and a slot retires (its buffer freed, the
 *             slot never used again; counted in `slots_retired`) after 3 x 2^30 to
 *             2^32 leases, before its generation could wrap (docs/adr/0011, 0025, 0027).
 *             A handle does not name its pool. Each pool's slots count their
 *             generations from a start of their own (the first n pools made in a process
 *             start at least 0.45 x 2^31 / n generations apart), so a lease given
 *             to another pool is refused unless, at that moment, the other pool's slot
 *             of the same index is out on lease at exactly that generation (one lease in
 *             its life, reached only after the slot has run through the generations
 *             between the two starts) with a buffer at the same address. That rare case
 *             is not detected: it would take a pool tag in the handle, an ABI change
 *             (docs/adr/0027).
 * The caller owns the buffer until it passes the lease, unchanged, to
 * lds_pool_return. Slice data by the bytes actually written, never by capacity.
 */
typedef struct lds_lease {
    void *ptr;
    size_t length;
    size_t capacity;
    uint64_t handle;
} lds_lease;

/** Checked modes. Each makes one kind of misuse loud; OFF is the fast default. */
typedef enum lds_pool_check {
    /** No checks beyond the always-on generation check. Built with AddressSanitizer, a
     *  buffer is poisoned from its return to its next rent in every mode (a late access is
     *  reported); in the checked modes [length, capacity) is also poisoned at rent. */
    LDS_POOL_CHECK_OFF = 0,
    /** Canary words are written over a returned buffer and verified at its next rent; a
     *  mismatch (a write after return) is counted in `canary_failures` and that buffer is
     *  discarded (freed, never handed out again), the rent is served by a fresh buffer. */
    LDS_POOL_CHECK_CANARY,
    /** At rent, bytes [length, capacity) are filled with LDS_POOL_POISON_BYTE (and
     *  ASan-poisoned when built with ASan); at return the whole buffer is filled with
     *  LDS_POOL_FREED_BYTE. A caller that reads by capacity sees the pattern. */
    LDS_POOL_CHECK_POISON,
    /** Every buffer is mapped by the pool; at return its pages are made PROT_NONE and it
     *  waits in a FIFO quarantine of `guard_quarantine` buffers before being reused, so a
     *  late read or write faults (SIGSEGV) at the access. Each buffer's mapping is fenced
     *  by a PROT_NONE page on each side (2 pages more of address space, none resident), so
     *  that protecting it at return never splits a map entry and cannot fail at
     *  vm.max_map_count; there, a rent that must map a new buffer fails with LDS_E_NOMEM.
     *  (`huge_pages` does not apply to these mappings.)
     *  The guard never turns off in silence: when an mprotect fails all the same (another
     *  errno), at return the buffer is unmapped instead of quarantined (a late access still
     *  faults, until the kernel maps something else at that address; should the munmap
     *  fail too, the buffer waits in the quarantine unprotected); at the quarantine's exit
     *  it is unmapped, never handed out; when mapping a new buffer, the rent fails with
     *  LDS_E_NOMEM. Each failure is counted in `guard_failures`; the first one of a pool
     *  prints one line on stderr naming the call and the errno. A return always succeeds
     *  (the lease did end). */
    LDS_POOL_CHECK_GUARD,
    /** No reuse at all: every rent allocates, every return frees. */
    LDS_POOL_CHECK_BYPASS
} lds_pool_check;

/** Smallest size class, bytes; smaller requests get a lease of this capacity. */
#define LDS_POOL_MIN_CLASS ((size_t)64)
/** Largest request a pool accepts, bytes (2^46); larger is LDS_E_LIMIT. */
#define LDS_POOL_MAX_REQUEST (((size_t)1) << 46)
/** Byte written over [length, capacity) at rent in LDS_POOL_CHECK_POISON mode. */
#define LDS_POOL_POISON_BYTE 0xA5
/** Byte written over the whole buffer at return in LDS_POOL_CHECK_POISON mode. */
#define LDS_POOL_FREED_BYTE 0xDD
/** Offset of a mapped buffer from its page start, bytes (chosen by measurement: read()
 *  into page+16 runs at half speed; see docs/adr). Multiple of 64. */
#define LDS_POOL_MAP_OFFSET ((size_t)256)
/** Name of the environment variable read by lds_pool_options_default: "off", "canary",
 *  "poison", "guard" or "bypass", in any case. Unset or empty: the default (off). Any other
 *  value: one warning line on stderr naming the variable and the accepted values, and the
 *  default is used (a typo never silently turns checking off, nor aborts the program). */
#define LDS_POOL_CHECK_ENV "LDS_POOL_CHECK"

/**
 * Transparent huge pages for mapped buffers (docs/adr/0029, which superseded 0009).
 *
 * ON: a mapped buffer whose capacity is at least LDS_POOL_HUGE_MIN gets a mapping whose
 * start is aligned to the kernel's huge-page size (2 MiB on x86-64; the buffer stays at
 * start + LDS_POOL_MAP_OFFSET) and is advised with madvise(MADV_HUGEPAGE), so the kernel may
 * back it with 2 MiB pages: 512x fewer page faults when it is first written. Measured here
 * (THP enabled=madvise, defrag=madvise; docs/measurements/heap-warmth-huge-pages.txt): a
 * fresh process's first load of a 245.7 MiB index, median 54-57 ms instead of 154-157 ms,
 * but worst 334-478 ms instead of 201-235 ms (1 load in 21); 1 GiB fills after a 4 KiB-page
 * buffer was freed ran 2-2.7x slower (pool-cost-huge-pages.txt). A lease also commits memory
 * 2 MiB at a time: a buffer written only in part may hold up to 2 MiB more resident than
 * with 4 KiB pages. Warm (reused) leases fault nothing either way. The advice is a hint: where the
 * kernel has no THP, or THP is "never", nothing changes. Only the mapping's alignment differs; it
 * is no larger (the slack taken to align it is unmapped at once), so bytes_mapped is unchanged.
 *
 * ON is the default (LDS_POOL_DEFAULT_HUGE_PAGES, docs/adr/0029). OFF: 4 KiB pages.
 * Where THP is "never" the mapping is not advised, and where madvise fails the buffer keeps
 * 4 KiB pages; a load says so in lds_load_info.huge_pages_fallback.
 */
typedef enum lds_pool_huge_pages {
    LDS_POOL_HUGE_PAGES_OFF = 0,
    LDS_POOL_HUGE_PAGES_ON = 1
} lds_pool_huge_pages;

/** Smallest capacity, bytes, a huge-page buffer may have (one 2 MiB huge page); smaller
 *  mapped buffers keep 4 KiB pages whatever the option says. */
#define LDS_POOL_HUGE_MIN ((size_t)2 << 20)
/** Name of the environment variable read by lds_pool_options_default: "off" or "on", in any
 *  case (sets `huge_pages`). Unset or empty: the default; any other value: one warning line on
 *  stderr naming the variable and the accepted values, and the default is used. */
#define LDS_POOL_HUGE_PAGES_ENV "LDS_POOL_HUGE_PAGES"

/**
 * Options of a private pool. Start from lds_pool_options_default(), then set fields.
 * Sizes are bytes, ages nanoseconds. Zero in a count or size field means "use the
 * default" (listed per field).
 */
typedef struct lds_pool_options {
    size_t size; /* sizeof(lds_pool_options) */
    /** Checked mode; default LDS_POOL_CHECK_OFF, or the value of the environment variable
     *  LDS_POOL_CHECK_ENV when it names a mode (read by lds_pool_options_default). */
    lds_pool_check check;
    /** -1 (default): rents leave contents as they are. 0..255: this byte is written over
     *  the whole capacity at every rent (tests use it to make stale bytes visible). */
    int fill_on_rent;
    /** Cap on bytes of buffers the pool keeps for reuse (cached in shared stacks and thread
     *  caches, plus pooled buffers out on lease); buffers beyond it are freed on return
     *  (counted as drops). Default (and 0) 256 MiB; to keep nothing, use
     *  LDS_POOL_CHECK_BYPASS. */
    size_t max_retained_bytes;
    /** Cap on pooled buffers per size class. Default 64; at most LDS_POOL_MAX_BUFFERS. */
    uint32_t max_per_class;
    /** Buffers per size class a thread caches without locking (0 disables thread caches;
     *  default 4, fewer for large classes: the cache holds at most `thread_cache_bytes`
     *  per class). At most 16: a larger value is taken as 16. */
    uint32_t thread_cache_count;
    /** Bytes a thread may cache per size class. Default 64 MiB. */
    size_t thread_cache_bytes;
    /** Requests of at least this many bytes are mapped with mmap by the pool; smaller ones
     *  come from aligned malloc. Default 1 MiB (measured, see docs/adr). */
    size_t mmap_threshold;
    /** A buffer idle in a shared stack for longer than this is freed when the pool next
     *  takes its slow path (a miss, a flush, a trim). 0 = default 30 s; UINT64_MAX = never. */
    uint64_t max_idle_ns;
    /** Buffers held in the guard-mode quarantine. Default 64; at most LDS_POOL_MAX_BUFFERS. */
    uint32_t guard_quarantine;
    /** Transparent huge pages for mapped buffers of at least LDS_POOL_HUGE_MIN bytes (see
     *  lds_pool_huge_pages). Default LDS_POOL_DEFAULT_HUGE_PAGES, or the value of the
     *  environment variable LDS_POOL_HUGE_PAGES_ENV (read by lds_pool_options_default). */
    lds_pool_huge_pages huge_pages;
    /** Buffers larger than max_retained_bytes and of at least LDS_POOL_LARGE_MIN bytes (large
     *  buffers) the pool keeps for reuse (counted out on lease and cached; beyond the count
     *  they are freed on return, as before), so that a reload
     *  of a payload above the cap rents warm memory: two covers a reloading service's old
     *  and new payloads (docs/adr/0029). They do not count against max_retained_bytes; the
     *  idle age and lds_pool_trim free them like any cached buffer. 0 = default
     *  (LDS_POOL_DEFAULT_LARGE_BUFFERS); LDS_POOL_LARGE_BUFFERS_NONE keeps none; at most
     *  LDS_POOL_MAX_BUFFERS otherwise. */
    uint32_t large_buffers;
} lds_pool_options;

/** Smallest capacity, bytes, of a large buffer (lds_pool_options.large_buffers): below it a
 *  buffer above max_retained_bytes is freed on return, as before. */
#define LDS_POOL_LARGE_MIN ((size_t)64 << 20)
/** lds_pool_options.large_buffers: keep no buffer above max_retained_bytes. */
#define LDS_POOL_LARGE_BUFFERS_NONE UINT32_MAX

/** Smallest `size` lds_pool_create accepts: sizeof(lds_pool_options) as first released
 *  (fields through guard_quarantine, padded to 64; huge_pages later took that padding, so
 *  sizeof is 64 still). A struct of this size whose tail padding is not zero (not started
 *  from lds_pool_options_default or memset) may carry a huge_pages value. */
#define LDS_POOL_OPTIONS_SIZE_V1 ((size_t)64)

/** Most buffers a pool holds at once (the size of its slot table, 2^22): the largest
 *  max_per_class and guard_quarantine lds_pool_create accepts. */
#define LDS_POOL_MAX_BUFFERS ((uint32_t)1 << 22)

/** Default option values (see each field). */
#define LDS_POOL_DEFAULT_MAX_RETAINED_BYTES (((size_t)256) << 20)
#define LDS_POOL_DEFAULT_MAX_PER_CLASS      64u
#define LDS_POOL_DEFAULT_THREAD_CACHE_COUNT 4u
#define LDS_POOL_DEFAULT_THREAD_CACHE_BYTES (((size_t)64) << 20)
#define LDS_POOL_DEFAULT_MMAP_THRESHOLD     (((size_t)1) << 20)
#define LDS_POOL_DEFAULT_MAX_IDLE_NS        (UINT64_C(30) * 1000000000u)
#define LDS_POOL_DEFAULT_GUARD_QUARANTINE   64u
/** On (docs/adr/0029, superseding 0009): a fresh 2 GiB load faults once per 2 MiB instead of
 *  once per 4 KiB page; where a page fault costs tens of microseconds (a VM) that is most of
 *  the load's time. */
#define LDS_POOL_DEFAULT_HUGE_PAGES    LDS_POOL_HUGE_PAGES_ON
#define LDS_POOL_DEFAULT_LARGE_BUFFERS 2u

/**
 * Fills `opts` with the defaults (size = sizeof(lds_pool_options)), then sets `check` from the
 * environment variable LDS_POOL_CHECK_ENV if it holds a mode name, and `huge_pages` from
 * LDS_POOL_HUGE_PAGES_ENV if it holds "off" or "on" (names compared ignoring case; an unknown
 * value prints one warning line to stderr, at each call, and leaves the default).
 * `opts` NULL: nothing is done (as every *_default). Thread-safe.
 */
LDS_API void lds_pool_options_default(lds_pool_options *opts);

/**
 * Creates a private pool.
 * - opts: NULL for defaults; otherwise `opts->size` must be set: from
 *   LDS_POOL_OPTIONS_SIZE_V1 (an older header's struct; fields past it take defaults) to
 *   sizeof(lds_pool_options).
 * - out:  receives the pool, owned by the caller; release with lds_pool_free.
 * Returns LDS_OK; LDS_E_INVALID_ARG (out NULL, opts->size below LDS_POOL_OPTIONS_SIZE_V1
 * or above sizeof(lds_pool_options), check, fill_on_rent or huge_pages out of range,
 * max_per_class or guard_quarantine above LDS_POOL_MAX_BUFFERS); LDS_E_NOMEM. On failure
 * *out is set to NULL. What the pool allocates at creation is bounded whatever the
 * options: each class's stack has room for min(max_per_class, max_retained_bytes / the
 * class's capacity) buffers (at least one), the quarantine for guard_quarantine.
 */
LDS_API lds_status lds_pool_create(const lds_pool_options *opts, lds_pool **out);

/**
 * Frees a private pool and every buffer it caches. Leases still out become invalid:
 * their memory is released too, so return (or stop using) every lease first.
 * NULL is accepted; the shared pool is ignored (it lives until process exit).
 * Not thread-safe with respect to other calls on the same pool.
 */
LDS_API void lds_pool_free(lds_pool *pool);

/**
 * The process-wide shared pool, created on first call with lds_pool_options_default()
 * (so LDS_POOL_CHECK_ENV and LDS_POOL_HUGE_PAGES_ENV apply). Never NULL unless memory is
 * exhausted at the first call (then NULL, and the next call tries again). Thread-safe; the
 * caller does not own it.
 */
LDS_API lds_pool *lds_pool_shared(void);

/**
 * Rents a buffer of at least `min_bytes` bytes.
 * - pool: a pool, or NULL for lds_pool_shared().
 * - min_bytes: requested length in bytes; 0 is allowed (capacity LDS_POOL_MIN_CLASS).
 * - out: receives the lease; ptr 64-byte aligned, capacity = lds_pool_class_capacity(
 *   min_bytes); contents uninitialized unless `fill_on_rent` is set.
 * Returns LDS_OK; LDS_E_INVALID_ARG (out NULL); LDS_E_LIMIT (min_bytes >
 * LDS_POOL_MAX_REQUEST); LDS_E_NOMEM (allocation or mapping failed). On failure *out is
 * zeroed and nothing needs returning. Thread-safe.
 */
LDS_API lds_status lds_pool_rent(lds_pool *pool, size_t min_bytes, lds_lease *out);

/** Flag of lds_pool_return: zero [0, capacity) before the buffer is reused. */
#define LDS_RETURN_CLEAR 1u

/**
 * Ends a lease. `lease` must be exactly what lds_pool_rent gave (same pool, ptr, length,
 * capacity, handle); `flags` is 0 or LDS_RETURN_CLEAR.
 * Returns LDS_OK and zeroes *lease; or LDS_E_POOL_REFUSED when the lease is not live
 * (double return, stale handle), names a pointer the pool never gave, or its length or
 * capacity were altered: the refusal is counted by cause in the statistics, the buffer is
 * not touched, and *lease is left as it was. LDS_E_INVALID_ARG for lease NULL or
 * unknown flags; LDS_E_NOMEM when pool is NULL and the shared pool cannot be made.
 * *lease is zeroed before the buffer can be reused or freed, so a lease may be kept inside
 * its own buffer (a refused one is written back as it was). Thread-safe.
 *
 * What is refused at the call, and what later. On the renting thread every misuse is
 * refused at the call. On another thread (the lease is then queued for the renting
 * thread, see the top of this header): a pointer, size or handle the pool never gave, a
 * lease whose return already took effect, and a second return of a lease whose return
 * is queued (from any thread, the renting one included) are refused at the call; a
 * return that races with the lease's end elsewhere may get LDS_OK and is then refused,
 * and counted in refused[LDS_POOL_REFUSED_STALE], when the renting thread collects it.
 * Under every interleaving a lease ends once: its buffer never has two owners, and
 * after the renting thread has collected, returns + refused_total counts each call once.
 */
LDS_API lds_status lds_pool_return(lds_pool *pool, lds_lease *lease, unsigned flags);

/**
 * Capacity, in bytes, of the size class a request of `min_bytes` rounds up to:
 * max(LDS_POOL_MIN_CLASS, the least of 2^k * {1, 1.25, 1.5, 1.75} that is >= min_bytes).
 * For example 20,589,008 rounds to 20,971,520 (20 MiB, 1.019x). Returns 0 when
 * min_bytes > LDS_POOL_MAX_REQUEST. Pure; thread-safe.
 */
LDS_API size_t lds_pool_class_capacity(size_t min_bytes);

/** Ways to give memory back, for lds_pool_trim. */
typedef enum lds_pool_trim_mode {
    /** Free every cached buffer: the shared stacks and the calling thread's cache now;
     *  other threads' caches at their next call on this pool (or their exit). */
    LDS_POOL_TRIM_ALL = 0,
    /** Free only cached buffers idle for longer than the pool's `max_idle_ns`. */
    LDS_POOL_TRIM_IDLE = 1
} lds_pool_trim_mode;

/**
 * Gives cached memory back to the system (free for malloc'd buffers, munmap for mapped
 * ones); buffers out on lease are not affected. `freed_bytes` (may be NULL) receives the
 * capacity bytes freed by this call. pool NULL means the shared pool.
 * Returns LDS_OK, or LDS_E_INVALID_ARG for an unknown mode. Thread-safe.
 */
LDS_API lds_status lds_pool_trim(lds_pool *pool, lds_pool_trim_mode mode, size_t *freed_bytes);

/* ==== pool statistics ==================================================== */

/** Causes of a refused return, indexes of lds_pool_stats.refused. */
typedef enum lds_pool_refusal {
    LDS_POOL_REFUSED_STALE = 0,   /* handle's lease already returned (double or stale return;
                                     also a zeroed lease, as a return or failed rent leaves) */
    LDS_POOL_REFUSED_UNKNOWN = 1, /* handle never given by this pool: no such slot, or a
                                     generation its slot has not reached or never had (a
                                     forged handle; another pool's lease, unless the slot
                                     has already passed that generation: then it counts
                                     as stale; docs/adr/0027) */
    LDS_POOL_REFUSED_POINTER = 2, /* ptr differs from the one given with this handle */
    LDS_POOL_REFUSED_SIZE = 3,    /* length or capacity differ from the ones given */
    LDS_POOL_REFUSED_COUNT = 4
} lds_pool_refusal;

/**
 * A snapshot of a pool's counters. Counters are cumulative since creation unless marked
 * "current". Byte figures count capacities unless noted. Taken without stopping other
 * threads, so a snapshot under concurrent use is approximate (each counter is exact, the
 * set is not one instant); with the pool quiescent, rents == returns + leases_current.
 */
typedef struct lds_pool_stats {
    size_t size;               /* sizeof(lds_pool_stats); set by the caller (lds_pool_stats_init) */
    uint64_t rents;            /* successful rents */
    uint64_t hits_thread;      /* rents served by the calling thread's cache */
    uint64_t hits_shared;      /* rents served by the shared per-class stacks */
    uint64_t misses_cold;      /* rents that allocated: no buffer of the class existed */
    uint64_t misses_exhausted; /* allocated: all buffers of the class were out on lease
                                  or in other threads' caches */
    uint64_t misses_oversize;  /* allocated: over the retention cap (or bypass mode), so
                                  the buffer is never pooled */
    uint64_t returns;          /* successful returns */
    uint64_t refused[LDS_POOL_REFUSED_COUNT]; /* refused returns by cause */
    uint64_t refused_total;                   /* sum of refused[] */
    uint64_t canary_failures;                 /* canary mode: writes after return caught at rent */
    uint64_t drops;                   /* returned buffers freed instead of kept (caps, bypass) */
    uint64_t trims;                   /* buffers freed by trimming (explicit, idle age, evicted) */
    uint64_t trimmed_bytes;           /* bytes freed by those trims */
    uint64_t leases_current;          /* current: leases out */
    uint64_t bytes_leased;            /* current: capacity bytes out on lease */
    uint64_t bytes_leased_peak;       /* an upper bound of the high-water of bytes_leased: the
                                         sum over thread caches of each one's own high-water
                                         of the bytes it held, out on lease or kept in it
                                         (high-waters of different moments). Never below the
                                         true peak; at most (threads that rented) x the true
                                         peak, plus what each cache kept beside its leases at
                                         its own high-water (at most thread_cache_bytes per
                                         class it used). Exact when one thread rents and its
                                         cache holds nothing else at the peak (a burst of
                                         leases from a cold pool; a trim does not lower a
                                         high-water). Kept on the slow
                                         paths only: a warm rent or return moves a buffer
                                         between a cache and its leases (docs/adr/0025). */
    uint64_t bytes_retained;          /* current: bytes cached for reuse, all threads */
    uint64_t buffers_retained;        /* current: buffers cached for reuse */
    uint64_t bytes_resident_estimate; /* current: upper bound of resident bytes held by the
                                       pool: leased + retained, mapped pages counted whole */
    uint64_t bytes_mapped;            /* current: bytes of address space mapped by the pool */
    uint64_t waste_bytes_total;       /* cumulative sum of (capacity - length) over rents */
    uint64_t waste_bytes_current;     /* current: (capacity - length) over leases out */
    uint64_t bytes_requested_total;   /* cumulative sum of lengths rented */
    uint64_t slots_retired;           /* slots whose generation was spent (see lds_lease) and
                                         that will never name a lease again (see lds_lease) */
    uint64_t guard_failures;          /* guard mode: mprotect calls that failed (see
                                         LDS_POOL_CHECK_GUARD for what the pool did) */
} lds_pool_stats;

/** Zeroes `stats` and sets its size. NULL is ignored. */
LDS_API void lds_pool_stats_init(lds_pool_stats *stats);

/**
 * Takes a snapshot of `pool`'s statistics (NULL = shared pool) into `out`, whose `size`
 * the caller has set (lds_pool_stats_init); only fields that fit are written. Unlike the
 * options, a larger `size` (a newer header's struct) is accepted: the fields this library
 * knows are written, the rest left as they were, and `out->size` becomes
 * sizeof(lds_pool_stats) as this library knows it.
 * Returns LDS_OK or LDS_E_INVALID_ARG (out NULL or size below offsetof(lds_pool_stats,
 * hits_thread): no counter fits). Thread-safe.
 * Cost: rents, returns, leases and their bytes are read off the slots' generations (the
 * warm path counts only the lengths rented), so a snapshot walks every slot the pool has
 * used (the slot table's high-water, which a trim does not lower) under its slot lock
 * (about 5 ns per buffer: 0.29-0.41 ms with 65,536 buffers, `lodestar-bench capacity`, on
 * the 2-vCPU EPYC of docs/adr/0025), during which buffers are neither created nor freed.
 * Take it for reports and tests, not on every request. Numbers taken while other threads
 * rent are not one instant: a lease in flight may show in one counter and not yet in
 * another (differences are clamped at 0, never wrapped).
 */
LDS_API lds_status lds_pool_get_stats(lds_pool *pool, lds_pool_stats *out);

/**
 * Writes `stats` as one JSON object (keys = the field names, in struct order; refused as an
 * object keyed "stale", "unknown", "pointer", "size") into `buf` of `cap` bytes,
 * NUL-terminated. Only the fields that lie wholly within `stats->size` bytes are written (a
 * struct from an older header yields fewer keys; nothing past `size` is read).
 * `needed` (may be NULL) receives the length without the NUL. buf may be NULL when cap is
 * 0 (to ask the length). Returns LDS_OK; LDS_E_LIMIT when cap is too small (buf then holds
 * a truncated, NUL-terminated prefix if cap > 0); LDS_E_INVALID_ARG for stats NULL or
 * `stats->size` too small to hold any counter (less than offsetof(lds_pool_stats,
 * hits_thread), the same rule as lds_pool_get_stats).
 */
LDS_API lds_status lds_pool_stats_json(const lds_pool_stats *stats, char *buf, size_t cap,
                                       size_t *needed);

/* ==== scoped leases ====================================================== */

#if defined(__GNUC__) || defined(__clang__)
/** Cleanup handler of LDS_SCOPED_LEASE: returns a live lease to its pool. */
typedef struct lds_scoped_lease {
    lds_lease lease;
    lds_pool *pool;
} lds_scoped_lease;

/** Returns `s->lease` to `s->pool` if it is live (handle != 0); used by LDS_SCOPED_LEASE. */
LDS_API void lds_scoped_lease_end(lds_scoped_lease *s);

/**
 * Declares `name`, an lds_scoped_lease bound to `pool` (NULL = shared) with no lease
 * yet; rent into it with lds_pool_rent(name.pool, n, &name.lease). When `name` leaves
 * scope (including by an early return) its lease, if still live, is returned.
 * Returning it by hand earlier is fine (the return zeroes the handle).
 * The pool must outlive the scope: do not lds_pool_free it before `name` leaves scope
 * (the cleanup would return the lease to a freed pool).
 * Handing the lease to another thread: copy `name.lease` out and set `name.lease.handle`
 * to 0 (the cleanup then does nothing); the receiver returns its copy with
 * lds_pool_return, as a cross-thread return. Without that, the scope's end returns the
 * lease under the receiver's feet (its own return is then refused, at the call or at
 * collection, and the buffer may already be another lease's).
 * GCC and Clang only (the cleanup attribute).
 */
#define LDS_SCOPED_LEASE(name, pool_)                                                              \
    lds_scoped_lease name                                                                          \
        __attribute__((cleanup(lds_scoped_lease_end))) = {{NULL, 0, 0, 0}, (pool_)}
#endif

#ifdef __cplusplus
}
#endif

#endif /* LODESTAR_POOL_H */
