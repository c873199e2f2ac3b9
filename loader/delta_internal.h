/*
 * Delta loads (docs/adr/0047): a load from a regular file that reuses the chunks of a
 * previous payload whose XXH3-64 and length match the new file's chunk table, and reads
 * only the others. Used by the live index (live/live.c). Not installed.
 */
#ifndef LDS_DELTA_INTERNAL_H
#define LDS_DELTA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lodestar_load.h"
#include "lodestar_pool.h"

/* The previous payload a delta load reuses from: a whole format 1.1 payload (chunk table
 * included, at payload + table_offset) that stays valid and unchanged for the whole load.
 * It is only read. */
typedef struct lds__delta_base {
    const unsigned char *payload;
    uint64_t length;       /* payload_length */
    uint64_t table_offset; /* D: the chunk table's payload offset */
    uint64_t chunk_count;
    uint32_t chunk_bytes;
    bool verified; /* its chunks were verified against its table when it was loaded */
} lds__delta_base;

/* A standby (docs/adr/0050): a rental of the live index's own pool that held a generation
 * nobody pins any more, kept by the live index instead of returned, with what it holds.
 * Nobody else can rent or see it, so its bytes are those verified when that generation
 * loaded. A delta load may write the new generation into it: chunks the standby already
 * holds at the same offset (same XXH3-64 and length) are kept, not copied nor read. */
/* Scratch a delta load plans in: a copy of the new chunk table and the plan, 16 bytes per
 * chunk (8.6 MB at 540,000 chunks), kept by a live index across its reloads. A fresh
 * allocation of that size is a fresh mapping once the file grows past the last one (the
 * appended pattern: about 2,100 first-touch faults a reload at 2 GiB, tens of microseconds
 * each in a VM; docs/adr/0055). Grown to a quarter above the need, never shrunk; freed by
 * lds__delta_scratch_free. One load at a time (a live index's reloads are serialized). */
typedef struct lds__delta_scratch {
    unsigned char *table;
    size_t table_cap; /* bytes */
    int64_t *from;
    size_t from_cap; /* entries */
} lds__delta_scratch;

/* Frees what *s holds and empties it. */
void lds__delta_scratch_free(lds__delta_scratch *s);

typedef struct lds__delta_standby {
    lds__delta_scratch *scratch; /* may be NULL: the load allocates and frees its own */
    lds_pool *pool;      /* the pool `lease` is from */
    lds_lease lease;     /* lease.ptr == NULL: no standby */
    bool has_table;      /* `held` describes the bytes at lease.ptr (payload at 0) */
    lds__delta_base held;
    bool taken;          /* set by lds__load_delta when it took the lease (the new index, or
                            on failure the pool, has it now: the caller must not return it) */
} lds__delta_standby;

/* Benchmarks and the live option delta_rehash_kept: true hashes each kept chunk again
 * (an XXH3 pass over the kept bytes) and reads any that does not match. */
extern bool lds__delta_rehash_kept;

/* Takes the pool rental out of an index that adopted one (a pooled load, LDS_OWN_ADOPT)
 * and frees the index without returning it: *pool and *lease then own the rental. false,
 * with the index untouched, when the index holds no rental. */
bool lds__index_take_lease(lds_index *idx, lds_pool **pool, lds_lease *lease);

/* Fills *out from an index whose payload stays where the loader put it (LDS_OWN_ADOPT of
 * a rental, a mapping or borrowed memory) and that has a chunk table; false otherwise
 * (format 1.0, or the parser copied what it keeps). */
bool lds__delta_base_of(const lds_index *idx, lds__delta_base *out);

/* Loads the file at `path` (fd < 0) or `fd` (at its current position) as lds_load_path /
 * lds_load_fd do, reusing the chunks of `base` (may be NULL). When a delta cannot be used
 * (base NULL, a source that is not an uncompressed regular file, use_mmap, verification
 * off, format 1.0, another chunk size, a header that does not decode), nothing is rented,
 * *fallback is set, `why` receives the reason, and LDS_OK is returned with *out NULL: the
 * caller runs the full load. Otherwise the load's own status, as a full load's. */
lds_status lds__load_delta(const char *path, int fd, const lds_load_options *opts,
                           const lds__delta_base *base, lds_index **out, lds_load_info *info,
                           lds_error *err, bool *fallback, char *why, size_t why_n);

/* lds__load_delta over HTTP(S) or s3:// (docs/adr/0053): the header is fetched with a
 * Range request, then the chunk table; chunks of `base` whose XXH3-64 and length match
 * the new table are copied (and hashed again), the others are fetched as coalesced Range
 * requests (options.url_connections at a time, 0: LDS__URL_AUTO_CONNECTIONS) and verified
 * as each completes; every request carries If-Range and every answer must carry the
 * header's validator (a file replaced meanwhile is refused: LDS_E_IO, field http.etag).
 * Falls back (as lds__load_delta: *fallback, `why`, nothing rented, LDS_OK) when base is
 * NULL, verification is off, the server does not answer the header's Range with a 206
 * and a validator, or the file is zstd, format 1.0, of another chunk size, or its length
 * disagrees with its header. info.bytes_read counts the body bytes transferred. */
lds_status lds__load_delta_url(const char *url, const lds_load_options *opts,
                               const lds__delta_base *base, lds_index **out, lds_load_info *info,
                               lds_error *err, bool *fallback, char *why, size_t why_n);

/* Where one delta reload's time went (docs/adr/0055), in nanoseconds of CLOCK_MONOTONIC.
 * The loader fills table_ns through parse_ns; a live index adds keys_ns, swap_ns and
 * total_ns (lds__live_phases). The phases do not overlap: their sum is at most total_ns. */
typedef struct lds__delta_phases {
    uint64_t table_ns; /* open, header, chunk table read and checked against the header */
    uint64_t plan_ns;  /* the plan: each chunk matched against the base and the standby */
    uint64_t rent_ns;  /* the standby taken or a rental made */
    uint64_t fill_ns;  /* chunks kept, copied (and hashed again), read and verified */
    uint64_t parse_ns; /* the payload parsed into the index (lds_index_from_payload) */
    uint64_t keys_ns;  /* live: the key table handed on (lds__index_keys_from) */
    uint64_t swap_ns;  /* live: swap, retire, collect, free and the spare trim */
    uint64_t total_ns; /* live: the whole lds_live_reload_* call */
    bool delta;        /* the loader phases are a delta's (false: a full load or fallback) */
    bool keys_spare;   /* live: the key table was built into the spare key table's slots */
    bool keys_extended; /* live: the serving generation's key table was extended in place */
    /* Inside fill, summed over its readers (so up to readers x fill_ns): copying chunks from
       the serving generation and hashing them again (timed by streaks of copied chunks: the
       count of the chunks between is in it); reading chunks from the source; verifying the
       chunks read against the new table (each timed by batches of runs). */
    uint64_t fill_copy_ns, fill_read_ns, fill_verify_ns;
} lds__delta_phases;

/* The phases of the last reload of `live` that succeeded or failed (zeros before any), as
 * the struct, or (for benchmarks, which do not include this header) as up to `n` values in
 * the struct's order: table, plan, rent, fill, parse, keys, swap, total (ns), delta (0/1),
 * keys_spare (0/1), keys_extended (0/1), fill_copy, fill_read, fill_verify (ns). */
struct lds_live;
void lds__live_phases(struct lds_live *live, lds__delta_phases *out);
void lds__live_phases_ns(struct lds_live *live, uint64_t *out, size_t n);

/* Tests only: the live index's kept plan scratch (lds__delta_scratch). */
const lds__delta_scratch *lds__live_scratch(struct lds_live *live);

/* Benchmarks only (a what-if of docs/adr/0055's third-session amendment): faults in the
 * whole pages of the standby's first `length` bytes (at most its capacity) with
 * MADV_POPULATE_WRITE, which leaves their contents as they are, so the next delta reload
 * finds them resident; under the live index's mutex (the standby cannot be replaced
 * meanwhile). Returns the bytes covered, 0 when there is no standby or the kernel lacks
 * MADV_POPULATE_WRITE (Linux 5.14). Never called by the library itself. */
size_t lds__live_populate_standby(struct lds_live *live, size_t length);

/* As lds__load_delta, writing into `standby` (may be NULL; ignored unless its lease is
 * from the options' pool and its capacity holds the new payload) instead of a fresh
 * rental. When it is used, standby->taken is set: on success the new index owns the
 * rental, on failure it went back to the pool (its contents are then unknown). `phases`
 * (may be NULL) receives table_ns through parse_ns and delta = true when no fallback. */
lds_status lds__load_delta_into(const char *path, int fd, const lds_load_options *opts,
                                const lds__delta_base *base, lds__delta_standby *standby,
                                lds_index **out, lds_load_info *info, lds_error *err,
                                bool *fallback, char *why, size_t why_n,
                                lds__delta_phases *phases);

/* Benchmarks only (lodestar-bench delta): false skips hashing each copied chunk again
 * (it is then trusted on its XXH3-64 and length match alone), to price the re-hash. */
extern bool lds__delta_rehash;

/* Tests only: called with each reused chunk's number right after it was copied (the test
 * changes the copy, as a 64-bit collision or a corrupted previous buffer would). */
extern void (*lds__delta_copy_hook)(uint64_t chunk, unsigned char *p, size_t n);

/* Tests only: called with each kept chunk's number and bytes in the standby before it is
 * counted kept (the test changes them, as a stray write into the standby would). */
extern void (*lds__delta_keep_hook)(uint64_t chunk, unsigned char *p, size_t n);

/* Tests only: true makes the delta fill read every run with pread, as when liburing is
 * absent or io_uring_setup fails at run time (the fallback path). Set it before a load. */
extern bool lds__delta_uring_off;

/* Tests only: called on the reading thread with each batched (io_uring) read's payload
 * offset and result (bytes, or -errno) before the result is used; the test changes *res
 * (a short read, -EINTR, -EIO) to exercise the re-read of that run with pread. */
extern void (*lds__delta_uring_res_hook)(uint64_t s, int *res);

/* Tests only: the runs a reader must have brought to its flushes in one load before it sets
 * up its io_uring (default DELTA_RING_AFTER, 24: those first runs, and all of a smaller
 * delta's, are read with pread, paying no ring set-up); tests lower it to 1 to send a few runs
 * through the ring. Set it before a load. */
extern unsigned lds__delta_uring_min_runs;

/* Tests only: called on the reading thread with each wait for a batched read's completion
 * (k: 0, or -errno such as -ETIME); the test sets *k = -ETIME to make the reads look stuck,
 * so the flush cancels them and fails the reload with LDS_E_IO naming the chunk. */
extern void (*lds__delta_uring_wait_hook)(int *k);

/* Tests and benchmarks: how many runs were read through io_uring since the process began
 * (0 when liburing is absent or io_uring is unavailable). */
extern _Atomic uint64_t lds__delta_uring_runs;

/* Tests: whether this build has liburing and io_uring_setup succeeds here (a ring of 4
 * entries set up and torn down). Thread-safe. */
bool lds__delta_uring_available(void);

/* Tests only: when non-NULL, each delta plan adds the slots its search for moved chunks
 * looked at (one probe per base chunk and collision; linear in the chunks however often a
 * checksum repeats). */
extern uint64_t *lds__delta_plan_probes;

#endif /* LDS_DELTA_INTERNAL_H */
