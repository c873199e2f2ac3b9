/*
 * lodestar_live.h: the live index (live/), for services that reload.
 *
 * A live index holds the current *generation* of an index and hands it to
 * readers, while a reloader swaps new generations in:
 *
 *   readers:  lds_live_pin -> pin.index (never freed while pinned) -> query
 *             -> lds_live_unpin
 *   reloader: lds_live_reload_* loads generation g+1 with the ordinary loader
 *             (lodestar_load.h: pooled, verified, zstd included)
 *             -> only once it loaded and validated completely is it swapped
 *                in, atomically: a pin taken after the swap gets g+1
 *             -> g is *retired*; it is freed (with LDS_OWN_ADOPT: its rental
 *                goes back to the pool, or its mapping is unmapped) by the
 *                call that releases its last pin, inside lds_live_unpin, or
 *                at the swap itself when nobody pins it
 *             -> on any failure g keeps serving; the reload reports the
 *                status and detail of the load, and nothing is lost
 *
 * Pinning is on every query's path. A pin writes only the calling thread's
 * own record (a cache line no other thread writes on the uncontended path);
 * no counter shared by the readers is touched (docs/adr/0013 has the scheme
 * and its cost beside liburcu and libck).
 *
 * Rules a caller can rely on:
 * - Two reloads at once: the second is REFUSED at once with LDS_E_STATE
 *   (field "live.reload"), never queued; it loads nothing. Serialize your own
 *   reload triggers, or retry.
 * - Bounded memory: at most `max_retired` retired generations may be waiting
 *   for their last pin. A reload started while that many wait is REFUSED at
 *   once with LDS_E_LIMIT (field "live.max_retired") before anything is read
 *   or rented; it never waits for a reader. So memory holds at most the
 *   current generation, the one loading and `max_retired` retired ones.
 * - Refused reloads count in reloads_refused, failed loads in reloads_failed;
 *   neither changes the generation.
 *
 * Which pool: a reload whose options name no pool (opts NULL, or opts->pool
 * NULL: the loader's default, the shared pool) rents from the live index's
 * own pool (lds_live_pool), made by lds_live_create for this loop
 * (docs/adr/0049, which amends 0014):
 * - thread caches off: a retired generation is freed by the reader that
 *   releases its last pin; its buffer goes back where the reloader's next rent
 *   finds it (not into that reader's thread cache);
 * - room for (2 + max_retired) buffers of a size class, whatever the shared
 *   pool's retention cap (256 MiB), and no idle age: the third reload of a
 *   2 GiB index rents warm, also when reloads are hours apart;
 * - between reloads it keeps ONE spare buffer of the serving generation's
 *   class and frees the rest (a buffer made while a retired generation was
 *   still pinned, or of a class the payload has left), at the start and the
 *   end of each reload; at the end, while a retired generation is still
 *   pinned, it keeps none (that generation's buffer comes back at its last
 *   unpin and is the spare): resident memory stays at two payloads plus the
 *   retired generations still pinned, not (2 + max_retired) payloads. A
 *   reload that starts while a retired generation is still pinned rents a
 *   fresh buffer (it faults its pages in once).
 * Huge pages and LDS_POOL_CHECK apply to it as to any pool. A generation a
 * reader frees is queued for the thread that rented its buffer and reaches
 * the pool at that thread's next reload (lodestar_pool.h, returns on another
 * thread): reload from one thread to find it there. A
 * caller that names a pool in the options gets that pool, as before (size it
 * as above: thread_cache_count = 0, max_retained_bytes at least (2 +
 * max_retired) x lds_pool_class_capacity(payload bytes)).
 *
 * Mapped generations (lds_load_options.use_mmap, LDS_OWN_ADOPT): a pinned
 * generation keeps its mapping of the file's inode. Replacing the file by
 * rename (a new file renamed over the old path, as lds_writer_open_path does)
 * is safe: the next reload maps the new inode, and the old one, now without
 * a name, stays mapped, readable and unchanged until the last pin of its
 * generation is released (its blocks are freed by the file system then, not
 * at the rename). Truncating or rewriting the file in place is NOT safe for
 * a mapped generation (SIGBUS or changed bytes; see use_mmap in
 * lodestar_load.h); use LDS_OWN_COPY, or rename.
 *
 * Thread safety: every function may be called from any number of threads at
 * once on the same live index, except lds_live_close and lds_live_free (no
 * other call on it may run or follow; they refuse, or abort, while a pin is
 * held).
 */
#ifndef LODESTAR_LIVE_H
#define LODESTAR_LIVE_H

#include <stdio.h>

#include "lodestar.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== live index ========================================================= */

/** A live index; opaque. Create with lds_live_create. */
typedef struct lds_live lds_live;

/** Default of lds_live_options.max_retired. */
#define LDS_LIVE_DEFAULT_MAX_RETIRED 2u
/** Largest lds_live_options.max_retired accepted. */
#define LDS_LIVE_MAX_RETIRED_LIMIT 64u

/**
 * Options of lds_live_create. Start from lds_live_options_default (size set).
 * Sizes from LDS_LIVE_OPTIONS_MIN_SIZE to sizeof are accepted ("Struct sizes"
 * in lodestar.h).
 */
typedef struct lds_live_options {
    size_t size; /* sizeof(lds_live_options) */
    /** Retired generations that may wait for their last pin, 1 ..
     *  LDS_LIVE_MAX_RETIRED_LIMIT; 0 = LDS_LIVE_DEFAULT_MAX_RETIRED. A reload
     *  beyond it is refused (LDS_E_LIMIT), see the rules at the top. */
    uint32_t max_retired;
    /** true: lds_live_reload_path and lds_live_reload_fd are delta reloads
     *  (lds_live_reload_path_delta with delta = true); false (default): they load and
     *  verify in full. Opt-in because a delta reload verifies what it serves, not the
     *  file: a chunk damaged on disk whose table entry equals a serving chunk's is
     *  copied, never read, and the reload succeeds where a full one refuses the file
     *  (docs/adr/0047). */
    bool delta;
} lds_live_options;

/** Smallest lds_live_options.size accepted: the struct as first shipped. */
#define LDS_LIVE_OPTIONS_MIN_SIZE sizeof(lds_live_options)

/** Fills `opts` with the defaults (size included). NULL is ignored. */
LDS_API void lds_live_options_default(lds_live_options *opts);

/**
 * Creates an empty live index (generation 0: nothing to pin until the first
 * successful reload). `opts` NULL = defaults. `*out` receives it, owned by the
 * caller (lds_live_close or lds_live_free). Returns LDS_OK; LDS_E_INVALID_ARG (out NULL, bad
 * size, max_retired above the limit; field named in `err`); LDS_E_NOMEM.
 * On failure *out is NULL.
 */
LDS_API lds_status lds_live_create(const lds_live_options *opts, lds_live **out, lds_error *err);

/**
 * Frees the live index, its current generation and every retired one, if no
 * pin is held. NULL is accepted (LDS_OK). Returns LDS_OK (freed);
 * LDS_E_STATE (field "live.pins"): a pin is still held on some generation
 * (the message gives how many, per generation); nothing is freed, the live
 * index stays open and serving, and the call may be repeated once the pins
 * are released. Pins are counted from the readers' records, so this adds
 * nothing to lds_live_pin's cost. No other call on `live` may run
 * concurrently, nor follow a success. The pools its generations rented from
 * must still exist.
 */
LDS_API lds_status lds_live_close(lds_live *live, lds_error *err);

/**
 * lds_live_close for callers that know every pin was released: frees the live
 * index and every generation. NULL is accepted. A pin still held is a caller
 * error that would leave the pin pointing at freed memory: instead, the
 * process is aborted (abort(3)) after a line on stderr naming the pins held
 * per generation. No other call on `live` may run concurrently or follow.
 * The pools its generations rented from must still exist.
 */
LDS_API void lds_live_free(lds_live *live);

/**
 * A pin: the reader's hold on one generation. Filled by lds_live_pin; its
 * fields are read-only for the caller.
 * - index:      the pinned generation's index; valid until lds_live_unpin.
 *               Borrowed: never free it. Searching it from several threads
 *               at once is fine (lds_index_search is thread-safe).
 * - generation: its number (1 for the first successful reload, then +1 per
 *               successful reload).
 * - internal_:  the library's; leave it alone.
 * A pin may be released by another thread than the one that took it (a
 * request handed between threads). Copying the struct does not make a
 * second pin: release exactly one copy, exactly once.
 */
typedef struct lds_pin {
    const lds_index *index;
    uint64_t generation;
    void *internal_[2];
} lds_pin;

/**
 * Pins the current generation into `*pin`.
 * Cost: a lookup of the thread's record (thread-local, one per thread per
 * live index, made at the thread's first pin), one store to it, two loads of
 * the current generation and a compiler barrier between (a full fence where
 * the kernel lacks membarrier(2)); no lock, no system call, no write to
 * memory shared by the readers. About 15 ns with the unpin (docs/adr/0013).
 * Each thread has 6 such slots per live index; a thread holding more pins at
 * once gets the rest through a mutex and a per-generation counter (correct,
 * slower).
 * Returns LDS_OK; LDS_E_INVALID_ARG (live or pin NULL); LDS_E_STATE (no
 * generation loaded yet). On failure pin->index is NULL and there is nothing
 * to release.
 */
LDS_API lds_status lds_live_pin(lds_live *live, lds_pin *pin);

/**
 * Releases `pin` (from any thread) and zeroes it. A pin whose index is NULL
 * (zeroed, or a failed pin) is ignored, so a double unpin of the same struct
 * is harmless. If the pin was the last one on a retired generation, that
 * generation is freed here, before this returns: its rental is back in the
 * pool (LDS_OWN_ADOPT) when lds_live_unpin returns. `live` must be the live
 * index the pin came from.
 */
LDS_API void lds_live_unpin(lds_live *live, lds_pin *pin);

/*
 * The reloads. Each loads a new generation exactly as the lds_load_* call
 * of the same name does (same `opts`, `info`, `err`, same statuses, same
 * ownership rules: with LDS_OWN_ADOPT the rental stays with the generation
 * until it is freed), then swaps it in. In addition:
 * - LDS_E_STATE (field "live.reload"): another reload is running; refused,
 *   nothing read.
 * - LDS_E_LIMIT (field "live.max_retired"): max_retired retired generations
 *   still wait for their last pin; refused, nothing read.
 * - LDS_E_DUP_KEY (field "keys.bytes", the offset of the repeated key, the
 *   message naming both rows): the new file sets KEYS_UNIQUE and two of its
 *   rows have the same key (format.md K7), found when a serving generation's
 *   key table was in use and the new one was built or handed on before the
 *   swap (the reloads that do so); refused after the load, so that a lookup
 *   never fails for a file it would reject. While no lookup has built a key
 *   table, K7 stays lazy (ADR 0010): the first lookup reports it.
 * - `generation` (may be NULL) receives the new generation's number on
 *   success; it is left alone on failure.
 * On failure the current generation is unchanged and keeps serving, and
 * every buffer the failed load rented is back in its pool.
 * The stats' last_status and last_load record every reload that loaded
 * (successful or failed), not the refused ones.
 */

/** Reloads from the file at `path` (lds_load_path): a delta reload when the live index
 *  was created with lds_live_options.delta (lds_live_reload_path_delta), else in full. */
LDS_API lds_status lds_live_reload_path(lds_live *live, const char *path,
                                        const lds_load_options *opts, uint64_t *generation,
                                        lds_load_info *info, lds_error *err);

/** Reloads from `fd` at its current position (lds_load_fd); the fd stays open. A delta
 *  reload when the live index was created with lds_live_options.delta
 *  (lds_live_reload_fd_delta), else in full. */
LDS_API lds_status lds_live_reload_fd(lds_live *live, int fd, const lds_load_options *opts,
                                      uint64_t *generation, lds_load_info *info, lds_error *err);

/**
 * Delta reloads (docs/adr/0047). With `delta` true, the new file's chunk table
 * (format 1.1, format.md §2.5) is read first (pread; checked against the new
 * header), and compared with the current generation's: each new chunk whose
 * XXH3-64 and length equal a chunk of the current generation's payload is
 * copied from it (any position; the same position is tried first), and hashed
 * again after the copy (a copy whose hash is not the new entry is read from the
 * file instead: bytes the new table does not name are never served); every
 * other chunk is read from the file (runs of them with one pread, by the
 * parallel readers of lds_load_options.read_threads, which also share the
 * copies) and verified against the new table. So the new generation holds
 * exactly the bytes a full load of the file would, verified as a full load
 * verifies them; the current generation is only read, stays pinned by the
 * reload and keeps serving. lds_load_info reports bytes_read (the chunks read
 * plus the table), bytes_copied, chunks_read and chunks_copied.
 *
 * The standby (docs/adr/0050): once a delta reload was asked (or with
 * lds_live_options.delta), a generation of the live index's own pool that is
 * freed (retired, its last pin gone) keeps its buffer as the standby, with its
 * chunk table, instead of returning it to the pool; nobody else can rent or see
 * it. A delta reload whose opts name no pool writes the new generation into the
 * standby when it is large enough: chunks the standby holds at their own offset
 * with the same XXH3-64 and length (verified when its generation loaded) are
 * kept with no work (bytes_shared, chunks_shared), the others copied or read as
 * above. A failed delta returns the standby to the pool (its contents unknown);
 * any other reload, lds_live_close and lds_live_free return it first.
 *
 * A delta cannot be used (delta_fallback is set in `info`, the reason is kept
 * in lds_live_stats.delta_fallback_reason, and the reload runs as a full one,
 * with the full load's statuses) when: no generation is current, or the
 * current one keeps no 1.1 payload to copy from (format 1.0, LDS_OWN_COPY, a
 * mapped generation, one given to lds_live_install_take); opts->use_mmap; opts->verify_checksum is off; the source
 * is not an uncompressed regular file (a pipe, a zstd file); the new file is
 * format 1.0 or has another chunk size; its header does not decode or its size
 * disagrees (the full load then reports the error). With `delta` false these
 * are lds_live_reload_path and lds_live_reload_fd loading in full.
 * Otherwise the statuses, ownership and rules are those of the reloads above;
 * the rental comes from opts->pool as a full load's does.
 */
LDS_API lds_status lds_live_reload_path_delta(lds_live *live, const char *path, bool delta,
                                              const lds_load_options *opts, uint64_t *generation,
                                              lds_load_info *info, lds_error *err);

/** lds_live_reload_path_delta on `fd` at its current position; the fd stays open, its
 *  position is after the payload on success. */
LDS_API lds_status lds_live_reload_fd_delta(lds_live *live, int fd, bool delta,
                                            const lds_load_options *opts, uint64_t *generation,
                                            lds_load_info *info, lds_error *err);

/** Reloads from the stdio stream `f` (lds_load_file); `f` stays open. */
LDS_API lds_status lds_live_reload_file(lds_live *live, FILE *f, const lds_load_options *opts,
                                        uint64_t *generation, lds_load_info *info, lds_error *err);

/** Reloads from caller memory (lds_load_memory): with copy == false the
 *  bytes must stay valid until the generation is freed (after its last pin,
 *  or lds_live_free). */
LDS_API lds_status lds_live_reload_memory(lds_live *live, const void *bytes, size_t n, bool copy,
                                          const lds_load_options *opts, uint64_t *generation,
                                          lds_load_info *info, lds_error *err);

/** Reloads from an http:// or https:// URL (lds_load_url: Content-Length
    cross-checked before anything is rented, resumption, opts->url for the
    transfer's settings). A server that fails, lies about the length or drops
    the connection for good leaves the current generation serving.
    LDS_E_UNSUPPORTED when the library was built without libcurl. A delta
    reload (lds_live_reload_url_delta) when the live index was created with
    lds_live_options.delta. */
LDS_API lds_status lds_live_reload_url(lds_live *live, const char *url,
                                       const lds_load_options *opts, uint64_t *generation,
                                       lds_load_info *info, lds_error *err);

/**
 * lds_live_reload_url with a delta (docs/adr/0053): with `delta` true and a
 * format 1.1 file, only the chunks the current generation does not hold are
 * fetched. The header is asked with a Range request, then the chunk table
 * (checked against the header); chunks matched as lds_live_reload_path_delta
 * matches them are copied from the current generation and hashed again; the
 * others are fetched as Range requests of runs of adjacent chunks
 * (opts->url_connections at a time; 0: 4), written straight into the rental and
 * verified against the new table as each completes. Every request carries
 * If-Range with the header response's ETag (else Last-Modified) and every
 * answer must carry it: a file replaced on the server during the reload fails
 * it (LDS_E_IO, field "http.etag"), as a chunk whose bytes are not the table's
 * does (LDS_E_CHECKSUM, field "chunk"); the current generation keeps serving
 * and the rental is returned. lds_load_info.bytes_read counts the body bytes
 * transferred (header, table and ranges), bytes_copied and chunks_* as for a
 * path delta. Falls back to the full lds_load_url (delta_fallback set, the
 * reason in lds_live_stats.delta_fallback_reason, with credentials redacted)
 * when: no generation is current or it keeps no 1.1 payload; verify_checksum
 * is off; the server answers the header's Range with 200 (no ranges) or gives
 * no validator; the file is zstd, format 1.0, of another chunk size, or its
 * length disagrees with its header. `delta` false: lds_load_url in full.
 * Same statuses, ownership and thread rules as lds_live_reload_url.
 */
LDS_API lds_status lds_live_reload_url_delta(lds_live *live, const char *url, bool delta,
                                             const lds_load_options *opts, uint64_t *generation,
                                             lds_load_info *info, lds_error *err);

/** Reloads from a user read callback (lds_load_callback). */
LDS_API lds_status lds_live_reload_callback(lds_live *live, lds_read_fn read, void *ctx,
                                            const lds_load_options *opts, uint64_t *generation,
                                            lds_load_info *info, lds_error *err);

/**
 * Installs an index the caller built or loaded (lds_index_from_payload with
 * its own release, say) as the next generation; the same refusals as the
 * reloads (LDS_E_STATE, LDS_E_LIMIT), and LDS_E_INVALID_ARG for NULL
 * arguments. On LDS_OK the live index owns `idx` (freed after its last pin
 * once retired); on any failure the caller still owns it. Counts as a
 * reload in the stats; last_load is left unchanged.
 */
LDS_API lds_status lds_live_install_take(lds_live *live, lds_index *idx, uint64_t *generation,
                                         lds_error *err);

/**
 * The live index's own pool: reloads whose options name no pool rent from it
 * (see "Which pool" at the top). Borrowed, owned by the live index and freed
 * with it; NULL when live is NULL. For lds_pool_get_stats (warm rents:
 * hits_shared; fresh ones: misses_*) and lds_pool_trim (LDS_POOL_TRIM_ALL
 * gives back the spare; the next reload then rents afresh). Do not rent from
 * it yourself. Thread-safe.
 */
LDS_API lds_pool *lds_live_pool(lds_live *live);

/* ==== live statistics ==================================================== */

/**
 * A snapshot of a live index (lds_live_get_stats). "current" fields are the
 * state now, the others cumulative since creation. Taken under the live
 * index's mutex, so the set is consistent with respect to reloads and
 * retirements; pins taken or released meanwhile may or may not be counted.
 */
typedef struct lds_live_stats {
    size_t size;                  /* sizeof(lds_live_stats); set by lds_live_stats_init */
    uint64_t generation;          /* current: number of the serving generation; 0 = none */
    uint64_t reloads_done;        /* reloads that swapped a generation in */
    uint64_t reloads_failed;      /* reloads whose load failed (current kept) */
    uint64_t reloads_refused;     /* reloads refused before loading (busy, max_retired) */
    uint64_t retired_pinned;      /* current: retired generations not yet freed (pinned) */
    uint64_t retired_pinned_peak; /* high-water of retired_pinned */
    uint64_t pins_on_retired;     /* current: pins outstanding on those generations */
    uint64_t bytes_retired;       /* current: bytes held by those generations (see below) */
    uint64_t bytes_current;       /* current: bytes held by the serving generation */
    uint64_t generations_freed;   /* generations freed (retired, then last pin released) */
    lds_status last_status;       /* status of the last reload that loaded (LDS_OK if none) */
    lds_load_info last_load;      /* that reload's lds_load_info (size set; zero if none) */
    /** Why the last delta reload that loaded fell back to a full load (its
     *  last_load.delta_fallback); "" when it did not, or when none was asked.
     *  NUL-terminated. */
    char delta_fallback_reason[128];
} lds_live_stats;
/* Bytes held by a generation: the capacity of its buffer (lds_load_info.capacity_bytes)
 * when it kept it (LDS_OWN_ADOPT: a rental, a mapping or a growable buffer), else its
 * payload length (the parser's copies), and lds_index_payload_bytes for install_take. */

/** Smallest lds_live_stats.size accepted: the struct as first shipped. */
#define LDS_LIVE_STATS_MIN_SIZE sizeof(lds_live_stats)

/** Zeroes `stats` and sets its size (and last_load's). NULL is ignored. */
LDS_API void lds_live_stats_init(lds_live_stats *stats);

/**
 * Takes a snapshot into `out`, whose size the caller set (lds_live_stats_init).
 * Returns LDS_OK or LDS_E_INVALID_ARG (live or out NULL, size out of range).
 * Thread-safe; takes the live index's mutex and walks every thread's record.
 */
LDS_API lds_status lds_live_get_stats(lds_live *live, lds_live_stats *out);

/**
 * Writes `stats` as one JSON object into `buf` of `cap` bytes, NUL-terminated:
 * the fields by name in struct order, last_status as its name ("OK",
 * "E_CHECKSUM", ...) under "last_status", last_load as an object of its fields
 * ("path" as lds_load_path_name, "ownership" as "copy"/"adopt", booleans as
 * true/false). `needed` (may be NULL) receives the length without the NUL; buf
 * may be NULL when cap is 0. Returns LDS_OK; LDS_E_LIMIT when cap is too small
 * (buf holds a truncated, NUL-terminated prefix if cap > 0); LDS_E_INVALID_ARG
 * (stats NULL, size out of range).
 */
LDS_API lds_status lds_live_stats_json(const lds_live_stats *stats, char *buf, size_t cap,
                                       size_t *needed);

#ifdef __cplusplus
}
#endif

#endif /* LODESTAR_LIVE_H */
