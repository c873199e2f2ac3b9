/*
 * lodestar_load.h: the stream loader (loader/).
 *
 * Loads an index from a path, a file descriptor, a FILE*, caller memory or a
 * user read callback. Input compressed with zstd is recognised by its magic
 * number (after up to 16 skippable frames, RFC 8878 section 3.1.2, holding at
 * most 64 MiB; ADR 0018) and decoded on the fly. The format is docs/format.md; the choices
 * behind the paths are the ADRs in docs/adr/ (0006 growable, 0007 mapped);
 * in short:
 *
 *   read the 64-byte header -> declared payload length
 *   cross-check it against the transport (regular file size, zstd frame
 *   content size) and against options.max_payload_bytes, before renting
 *   known length   -> POOLED: rent an uninitialized buffer, read exactly that
 *                     many bytes, hashing each chunk as it arrives
 *   unknown length -> GROWABLE: a buffer of the loader's own, grown as bytes
 *                     arrive, capped by options.max_payload_bytes
 *   regular file + options.use_mmap -> MAPPED: the index borrows a mapping
 *   caller memory  -> MEMORY: never rents
 *   -> lds_index_from_payload -> index; the rental returned exactly once.
 *
 * Thread safety: every function here may be called from several threads at
 * once on different sources; the pool they rent from is thread-safe.
 */
#ifndef LODESTAR_LOAD_H
#define LODESTAR_LOAD_H

#include <stdio.h>

#include "lodestar_core.h"
#include "lodestar_index.h"
#include "lodestar_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque types owned by the sibling headers; repeating a typedef is valid C11
 * and C++, and keeps this header usable whatever the include order. */
typedef struct lds_pool lds_pool;
typedef struct lds_index lds_index;
typedef struct lds_url_options lds_url_options;

/* ==== loading ============================================================ */

/**
 * The way a load obtained the payload bytes (lds_load_info.path).
 *
 * Only the enum tag is declared, not a typedef, because `lds_load_path` is
 * also the name of the load-from-path function (as with `struct stat` and
 * stat()): write `enum lds_load_path`.
 */
enum lds_load_path {
    LDS_LOAD_POOLED = 1, /* declared length; buffer rented from the pool */
    LDS_LOAD_GROWABLE,   /* unknown length; the loader's own buffer, grown as bytes arrive */
    LDS_LOAD_MAPPED,     /* regular file mapped read-only; the index borrows the mapping */
    LDS_LOAD_MEMORY      /* caller memory, borrowed or copied; never pooled */
};

/**
 * Who holds the payload bytes once the parser has succeeded.
 *
 * - LDS_OWN_COPY:  the parser copies what the index keeps; the rental (or
 *                  mapping, or growable buffer) is released before the load
 *                  returns.
 * - LDS_OWN_ADOPT: the index borrows the payload and keeps the rental (or
 *                  mapping, or buffer) until lds_index_free, which releases
 *                  it exactly once.
 * - LDS_OWN_DEFAULT: whichever lds_load_default_ownership() returns.
 */
typedef enum lds_ownership { LDS_OWN_DEFAULT = 0, LDS_OWN_COPY, LDS_OWN_ADOPT } lds_ownership;

/** Default of lds_load_options.max_payload_bytes: 64 GiB (2^36 bytes). */
#define LDS_DEFAULT_MAX_PAYLOAD_BYTES (UINT64_C(1) << 36)
/** Default of lds_load_options.chunk_bytes: 1 MiB per read call. */
#define LDS_DEFAULT_CHUNK_BYTES ((size_t)1 << 20)

/**
 * Options of every lds_load_* call. Start from lds_load_options_default();
 * set `size = sizeof(lds_load_options)` (the default does). Passing NULL
 * anywhere an options pointer is taken means the defaults. Sizes from
 * LDS_LOAD_OPTIONS_MIN_SIZE (the struct before hash_thread) to sizeof are
 * accepted; any other is LDS_E_INVALID_ARG (rule: "Struct sizes" in
 * lodestar.h), as is limits.size outside its range ("limits.size").
 */
typedef struct lds_load_options {
    size_t size; /* sizeof(lds_load_options) */
    /** Pool to rent the payload buffer from; NULL (default) = lds_pool_shared().
     *  Borrowed: it must outlive every index loaded with LDS_OWN_ADOPT. */
    lds_pool *pool;
    /** Largest payload (bytes after the 64-byte header, decompressed) accepted;
     *  a larger declared length is LDS_E_LIMIT before anything is rented, and the
     *  growable path never grows past it. Default LDS_DEFAULT_MAX_PAYLOAD_BYTES. */
    uint64_t max_payload_bytes;
    /** Limits handed to the parser; default lds_limits_default(). */
    lds_limits limits;
    /** Ownership after the parse; default LDS_OWN_DEFAULT (see lds_ownership). */
    lds_ownership ownership;
    /** lds_load_path / lds_load_fd on an uncompressed regular file: map it instead
     *  of reading it (LDS_LOAD_MAPPED). If mapping fails the load falls back to the
     *  read path and sets lds_load_info.mmap_fallback. Default false.
     *  During the load, a file truncated or rewritten underneath is an error,
     *  not a crash: the header and the parse run inside a recovery window for
     *  SIGBUS/SIGSEGV (LDS_E_TRUNCATED, field "file", naming the file and its
     *  sizes; LDS_E_IO for another fault), the parser keeps its own copy of the
     *  key offsets it validated (lds_parse_options.copy_key_offsets), and with
     *  LDS_OWN_ADOPT the file's size is checked again after the parse. To do
     *  that the library installs, once per process, a handler for SIGBUS and
     *  SIGSEGV that passes every fault outside such a window to the handler
     *  installed before it (or the default action); a handler installed later
     *  that does not pass faults on disables the window (docs/adr/0012).
     *  After the load, while a mapped index lives (LDS_OWN_ADOPT), the file
     *  must still not be truncated or rewritten in place: truncation makes a
     *  later access die of SIGBUS, and a rewrite shows through the private
     *  mapping (pages never written are the file's pages), so vectors, ids and
     *  key text may read as changed bytes (never outside the mapping).
     *  Replace files by writing a new one and renaming it over the old (as
     *  lds_writer_open_path does), or load with LDS_OWN_COPY, which unmaps
     *  before the load returns (docs/adr/0007-mapped-path.md). */
    bool use_mmap;
    /** With use_mmap: ask the kernel to pre-fault the mapping (MAP_POPULATE).
     *  Default false. */
    bool populate;
    /** Verify the payload checksum (XXH3-64); for a format 1.1 file, the chunk
     *  table against the header and every chunk against the table (ADR 0031).
     *  Default true. */
    bool verify_checksum;
    /** With verify_checksum on the read paths: hash each chunk right after it is
     *  read, while it is in cache, and give the parser the result (true, default);
     *  false leaves the hashing to the parser, a second pass over the payload.
     *  Both exist so that the benchmark can price them. */
    bool hash_while_reading;
    /** Called once after the header, before the payload's buffer is rented (a load
     *  cancelled then rents nothing), and before each chunk is read (never during a
     *  read); returning true stops the load with LDS_E_CANCELLED, every rental
     *  returned first. NULL (default) = never cancelled. While a read from a
     *  pipe, socket or terminal fd (blocking or O_NONBLOCK) waits for data, cancel
     *  is called at least every 100 ms (the fd is polled; a regular file's reads
     *  do not wait), so a flag set by another thread stops the load without a
     *  signal. */
    bool (*cancel)(void *ctx);
    /** Called after each chunk with the payload bytes received so far and the
     *  declared payload length (LDS_LENGTH_UNKNOWN on the growable path).
     *  NULL (default) = no report. */
    void (*progress)(uint64_t done, uint64_t total, void *ctx);
    /** Passed to cancel and progress. */
    void *callback_ctx;
    /** Bytes asked of the source per read call (also the hashing and cancel
     *  granularity). 0 = LDS_DEFAULT_CHUNK_BYTES; at most 1 GiB is used. */
    size_t chunk_bytes;
    /** With hash_while_reading on the pooled path: hash on a second thread, one
     *  chunk behind the reads, so that hashing overlaps the next read instead of
     *  following it. The thread lives for the one call and is joined before it
     *  returns (and before the rental goes back on any failure or cancellation).
     *  Used only when the payload spans at least 4 chunks, and not for a format
     *  1.1 file (its chunks are hashed as they are read). Default: see
     *  lds_load_options_default (off: docs/measurements/load.txt has the figures). */
    bool hash_thread;
    /** lds_load_url only: the HTTP(S) options (borrowed for the call); NULL
     *  (default) = lds_url_options_default. Ignored by the other sources. */
    const lds_url_options *url;
    /** lds_load_path / lds_load_fd on an uncompressed regular file, pooled path: the
     *  number of threads that read the payload, each pread()ing disjoint ranges straight
     *  into the rental (docs/adr/0030). 0 (default) = automatic: one per online CPU, at
     *  most 8, and at most one per 128 MiB of payload (so payloads under 256 MiB keep one
     *  reader); 1 = one reader (the read loop above); larger values are capped at 64.
     *  Streams, pipes, FILE*, zstd, callbacks and URLs always have one reader. With
     *  several, ranges are chunk_bytes long (0: 8 MiB); cancel, progress and the format
     *  1.0 checksum (hash_while_reading) run on the calling thread, which reads too, and
     *  every error is reported as with one reader (the one at the lowest offset). All
     *  readers have ended before the call returns, on every path. hash_thread is not
     *  used. lds_load_info.read_threads tells how many read. */
    uint32_t read_threads;
    /** lds_load_url only: the number of concurrent HTTP(S) connections that fetch the
     *  payload, each with Range requests written straight into its slice of the rental
     *  (docs/adr/0041). Used when the first response is a 200 with a Content-Length,
     *  Accept-Ranges: bytes and a strong ETag or a Last-Modified (every range is asked
     *  If-Range that validator and must come back 206 with it and with exactly the
     *  Content-Range asked), the body is not zstd and the payload is rented; otherwise,
     *  or when a range is answered 200 (the server ignores ranges), the first response is
     *  read as one stream. With a format 1.1 file the chunk table is fetched first and
     *  each range (whole chunks) is verified as it completes. A range dropped mid-body is
     *  asked again from its byte reached (url.max_resumes times per range). Errors name
     *  the range and the URL (redacted); on any failure, cancellation or deadline every
     *  transfer is stopped before the rental goes back. 0 (default) = automatic: 4 for a
     *  payload of 16 MiB and up, else 1; 1 = one stream; larger values are capped at 16.
     *  lds_load_info.url_connections tells how many were used. */
    uint32_t url_connections;
} lds_load_options;

/** Smallest lds_load_options.size accepted: the struct as first shipped. */
#define LDS_LOAD_OPTIONS_MIN_SIZE offsetof(lds_load_options, hash_thread)

/** Fills `opts` with the defaults documented on each field (size included). */
LDS_API void lds_load_options_default(lds_load_options *opts);

/**
 * What a load did. Pass NULL if not wanted; otherwise set `size =
 * sizeof(lds_load_info)` (lds_load_info_init does it). It is written on
 * success and, as far as the load got, on failure. Sizes from
 * LDS_LOAD_INFO_MIN_SIZE to sizeof are accepted (fields past `size` are not
 * written); any other is LDS_E_INVALID_ARG ("Struct sizes" in lodestar.h).
 */
typedef struct lds_load_info {
    size_t size;               /* sizeof(lds_load_info) */
    enum lds_load_path path;   /* 0 if the load failed before choosing one */
    lds_ownership ownership;   /* COPY or ADOPT, resolved (never DEFAULT) */
    bool compressed;           /* the source was a zstd frame */
    bool checksum_verified;    /* the payload checksum was checked and matched */
    bool hashed_while_reading; /* the checksum was computed chunk by chunk while reading */
    bool mmap_fallback;        /* use_mmap was asked, mapping failed, the read path ran */
    uint64_t payload_bytes;    /* payload bytes received (after the header, decompressed) */
    uint64_t declared_bytes;   /* declared payload length, LDS_LENGTH_UNKNOWN if none */
    uint64_t stream_bytes;     /* bytes taken from the source (compressed bytes for zstd) */
    uint64_t capacity_bytes;   /* capacity of the buffer that held the payload */
    uint64_t elapsed_ns;       /* wall time of the whole call (CLOCK_MONOTONIC) */
    bool hashed_on_thread;     /* the checksum was computed on a second thread (hash_thread) */
    /* lds_load_url only (0 elsewhere): */
    int http_status;  /* status code of the last HTTP response, 0 if none came */
    uint32_t resumes; /* Range requests that resumed a dropped transfer */
    /* The payload's reading (docs/adr/0029, 0030): */
    uint32_t read_threads;    /* threads that read the payload (0 when none was read) */
    bool huge_pages;          /* the rental is advised for transparent huge pages */
    bool huge_pages_fallback; /* huge pages were wanted for the rental, but THP is "never"
                                 or madvise failed: 4 KiB pages (docs/adr/0029) */
    /* Delta reloads (lds_live_reload_*, docs/adr/0047): payload bytes and chunks by how
       they reached the new generation. A full load reads everything: bytes_read =
       payload_bytes, the others 0. */
    uint64_t bytes_read;    /* read from the source */
    uint64_t bytes_shared;  /* kept in place: a live index's standby buffer (the generation
                               before the serving one, docs/adr/0050) already held them at
                               their offset, so they were neither copied nor read */
    uint64_t bytes_copied;  /* copied from the previous generation's buffer */
    uint32_t chunks_read, chunks_shared, chunks_copied;
    bool delta_fallback;    /* a delta reload was asked and could not be used: full load */
    uint32_t url_connections; /* lds_load_url: connections that fetched the payload
                                 (1: one stream; 0 when none was read; docs/adr/0041) */
} lds_load_info;

/** Smallest lds_load_info.size accepted: the struct as first shipped. */
#define LDS_LOAD_INFO_MIN_SIZE offsetof(lds_load_info, hashed_on_thread)

/** Sets `info->size` and clears the rest. `info` may be NULL. */
LDS_API void lds_load_info_init(lds_load_info *info);

/**
 * The ownership LDS_OWN_DEFAULT resolves to: LDS_OWN_ADOPT in this version,
 * pending the measurements of the ownership ADR (docs/adr/).
 */
LDS_API lds_ownership lds_load_default_ownership(void);

/** "pooled", "growable", "mapped", "memory", or "none" for any other value. */
LDS_API const char *lds_load_path_name(enum lds_load_path path);

/**
 * User read callback for lds_load_callback.
 *
 * Reads at most `cap` bytes (cap >= 1) into `buf` and stores the count in
 * `*got`. Returns LDS_OK with:
 * - `*got` in [1, cap]: that many bytes were read (short reads are fine);
 * - `*got == 0`: end of stream;
 * - `*got == LDS_READ_RETRY`: interrupted before any byte (the EINTR case);
 *   the loader checks for cancellation and calls again at once, with no
 *   sleep and no bound: a callback that always answers LDS_READ_RETRY spins
 *   forever unless options.cancel stops it. Such a callback should wait for
 *   data itself (poll) before answering.
 * Any other status stops the load and is returned as is (LDS_E_IO is the
 * natural one; errno as it stands right after the call is reported in
 * lds_error.sys_errno).
 */
typedef lds_status (*lds_read_fn)(void *ctx, void *buf, size_t cap, size_t *got);

/** Value of `*got` by which an lds_read_fn asks to be called again. */
#define LDS_READ_RETRY SIZE_MAX

/*
 * Common tail of the lds_load_* calls:
 *
 * - opts: NULL = defaults.
 * - out:  receives the index on success (free it with lds_index_free); set to
 *         NULL on failure.
 * - info: optional; see lds_load_info.
 * - err:  optional detail (status, message, field, offset in the stream,
 *         errno, zstd error name).
 *
 * Statuses common to all of them:
 * - LDS_E_INVALID_ARG: NULL out or source, bad option struct size.
 * - LDS_E_IO (with sys_errno), or a callback's own status: the source failed.
 * - LDS_E_TRUNCATED: the stream ended inside the header or before the declared
 *   payload length; the message names the declared and received counts.
 * - LDS_E_TRAILING: bytes after the payload (or after the zstd frame).
 * - LDS_E_LENGTH_MISMATCH: the declared length disagrees with the regular
 *   file's size (which must be position + 64 + length) or with the zstd
 *   frame's content size (which must be 64 + length); both numbers are named.
 * - LDS_E_LIMIT: declared (or received, on the growable path) payload above
 *   max_payload_bytes; also any parser limit.
 * - LDS_E_ZSTD (with zstd_error): the compressed stream is corrupt.
 * - LDS_E_CANCELLED: options.cancel returned true.
 * - LDS_E_NOMEM: a buffer could not be obtained.
 * - any header or parser status (LDS_E_BAD_MAGIC, LDS_E_VERSION,
 *   LDS_E_HEADER_CHECK, LDS_E_CHECKSUM, LDS_E_BAD_SECTION, ...).
 * Whatever the status, every buffer rented or mapped by the call has been
 * returned or unmapped unless it now belongs to the returned index.
 *
 * Data after the end: for an uncompressed source the loader reads one more
 * byte after the payload, so a pipe is read until its writer closes it. A
 * zstd source must hold exactly one frame: any byte after the frame is
 * LDS_E_TRAILING too, not left unread.
 *
 * Length sources: the header's declared length is used when known; when it
 * is LDS_LENGTH_UNKNOWN and the transport knows the length (a regular file's
 * size, a zstd frame content size) that length is used, still on the pooled
 * path; only when nobody knows does the growable path run. If the pool
 * refuses the rental (LDS_E_NOMEM) for a declared length, the growable path
 * runs instead, bounded by the declared length.
 */

/**
 * Loads the index file at `path` (opened read-only, O_CLOEXEC, closed before
 * returning, also on failure). Regular files are cross-checked against
 * their size and may be mapped (options.use_mmap). LDS_E_IO with sys_errno
 * if the file cannot be opened.
 */
LDS_API lds_status lds_load_path(const char *path, const lds_load_options *opts, lds_index **out,
                                 lds_load_info *info, lds_error *err);

/**
 * Loads from `fd` starting at its current position; the fd is not closed. On
 * return the position is after the bytes consumed (unspecified on failure,
 * and unchanged after a successful mapped load). Pipes, sockets and
 * terminals are read until end of stream; EINTR and short reads are retried.
 */
LDS_API lds_status lds_load_fd(int fd, const lds_load_options *opts, lds_index **out,
                               lds_load_info *info, lds_error *err);

/**
 * Loads from `f` starting at its current position, through fread (so bytes
 * the FILE has buffered are honoured); `f` is not closed. If `f` is backed by
 * a regular file, the size cross-check applies. Never mapped.
 */
LDS_API lds_status lds_load_file(FILE *f, const lds_load_options *opts, lds_index **out,
                                 lds_load_info *info, lds_error *err);

/**
 * Loads from `n` bytes of caller memory holding a whole file (header and
 * payload, or a zstd frame of them). Never rents from a pool and never hands
 * `bytes` to anyone.
 * - copy == false: the index borrows `bytes`, which must stay valid and
 *   unchanged until lds_index_free.
 * - copy == true: the index copies what it keeps; `bytes` may go at once.
 * `copy` decides, and options.ownership is ignored for uncompressed bytes;
 * lds_load_info.ownership reports COPY or ADOPT accordingly.
 * A zstd frame is decoded into a buffer of the loader's own (malloc), which
 * the index keeps (or copies from, per options.ownership). `n` must equal
 * 64 + the declared length (LDS_E_LENGTH_MISMATCH otherwise; LDS_E_TRUNCATED
 * if shorter than the header).
 */
LDS_API lds_status lds_load_memory(const void *bytes, size_t n, bool copy,
                                   const lds_load_options *opts, lds_index **out,
                                   lds_load_info *info, lds_error *err);

/**
 * Loads from a user read callback (see lds_read_fn); `ctx` is passed to it.
 * The callback is called from this thread only, never after this returns.
 */
LDS_API lds_status lds_load_callback(lds_read_fn read, void *ctx, const lds_load_options *opts,
                                     lds_index **out, lds_load_info *info, lds_error *err);

/* ==== loading from a URL ================================================ */

/** Default of lds_url_options.connect_timeout_ms: 10 s. */
#define LDS_URL_DEFAULT_CONNECT_TIMEOUT_MS 10000u
/** Default of lds_url_options.low_speed_time_s: 30 s. */
#define LDS_URL_DEFAULT_LOW_SPEED_TIME_S 30u
/** Default of lds_url_options.max_redirects. */
#define LDS_URL_DEFAULT_MAX_REDIRECTS 5u
/** Default of lds_url_options.max_resumes. */
#define LDS_URL_DEFAULT_MAX_RESUMES 3u

/**
 * Options of lds_load_url (lds_load_options.url). Start from
 * lds_url_options_default(); `size` follows "Struct sizes" in lodestar.h
 * (LDS_URL_OPTIONS_MIN_SIZE..sizeof, else LDS_E_INVALID_ARG "url.size").
 * Strings are borrowed for the call.
 */
typedef struct lds_url_options {
    size_t size; /* sizeof(lds_url_options) */
    /** Time allowed to connect (TCP and TLS), milliseconds; 0 = libcurl's own
     *  default (300 s). Default LDS_URL_DEFAULT_CONNECT_TIMEOUT_MS. */
    uint32_t connect_timeout_ms;
    /** A transfer slower than low_speed_bytes per second for this many
     *  seconds is dropped (then resumed, see max_resumes); 0 = never.
     *  Default LDS_URL_DEFAULT_LOW_SPEED_TIME_S. */
    uint32_t low_speed_time_s;
    /** See low_speed_time_s; default 1 byte per second (a stalled server). */
    uint32_t low_speed_bytes;
    /** Redirects followed (301, 302, 303, 307, 308); one more is LDS_E_IO.
     *  0 = none: a 3xx answer is LDS_E_IO. An https URL is never redirected
     *  to http (LDS_E_IO). Default LDS_URL_DEFAULT_MAX_REDIRECTS. */
    uint32_t max_redirects;
    /** Times a transfer dropped after body bytes arrived is resumed with a
     *  Range request from the byte reached. A resumption needs a validator
     *  from the first response (a strong ETag, else Last-Modified), sent as
     *  If-Range; a 206 answer must carry the same validator and a
     *  Content-Range starting at that byte, else the load fails (LDS_E_IO)
     *  rather than splice two versions of the file. Default
     *  LDS_URL_DEFAULT_MAX_RESUMES; 0 = never resume. */
    uint32_t max_resumes;
    /** PEM file of the certificate authorities that verify the server; NULL
     *  (default) = the system's store. TLS peer and host verification is
     *  always on. */
    const char *ca_file;
    /** "user:password" for HTTP authentication; NULL (default) = the URL's own
     *  user:password, else ~/.netrc (when use_netrc). Never printed: messages
     *  and lodestar's output show URLs through lds_url_redact. */
    const char *userpwd;
    /** Look up credentials in ~/.netrc (or $NETRC) when the URL has none.
     *  Default true. */
    bool use_netrc;
    /** Overall deadline, milliseconds: the whole transfer (connection,
     *  redirects, resumptions, every body byte) must end within this long of
     *  the lds_load_url call's start, whatever the rate (a server sending 2
     *  bytes a second never trips the low-speed limit). Checked at least every
     *  50 ms while waiting for the network; past it the load stops with
     *  LDS_E_TIMEOUT, field "http.timeout", the message naming the URL
     *  (lds_url_redact) and the body bytes received, every rental returned.
     *  0 (default) = none. The CLI's --timeout sets it (default there 3600 s:
     *  docs/adr/0034). */
    uint32_t timeout_ms;
} lds_url_options;

/** Smallest lds_url_options.size accepted: the struct as first shipped. */
#define LDS_URL_OPTIONS_MIN_SIZE offsetof(lds_url_options, timeout_ms)

/** Fills `opts` with the defaults documented on each field (size included). */
LDS_API void lds_url_options_default(lds_url_options *opts);

/** True when this library was built with libcurl (meson -Dcurl=enabled, or
 *  auto with libcurl found), that is when lds_load_url can load anything. */
LDS_API bool lds_url_supported(void);

/**
 * Writes `url` without its secrets into `buf` of `cap` bytes, NUL-terminated,
 * cut if it does not fit: the "user:password@" part of the authority is
 * removed (also when a raw '/', '?' or '#' in the password ends the authority
 * early: "u:SEC/RET@h", and when the scheme has one slash too few or many:
 * "http:/u:pw@h"), and the value of every query or fragment parameter
 * named X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token, Signature,
 * AWSAccessKeyId, X-Goog-Signature, X-Goog-Credential, access_token, id_token,
 * refresh_token, client_secret, sig, token, api_key, apikey, key, password,
 * pass, pwd, code, Policy or Key-Pair-Id, or whose name holds one of the words
 * secret, token, passw, signature, credential, auth, session, apikey, api_key,
 * api-key or jwt (names matched case-insensitively after percent-decoding; a
 * name of 128 bytes or more too) is replaced by "REDACTED" (AWS SigV4 and
 * SigV2 presigned URLs, Google Cloud Storage and CloudFront signed URLs, OAuth
 * 2.0 tokens and codes in a query or fragment, RFC 6750 section 2.3 and RFC
 * 6749 sections 4.1.2 and 4.2.2, Azure SAS signatures, API keys). A URL inside
 * any other parameter's value (a redirect's "?next=https://u:pw@h/y?token=T",
 * "//u:pw@h", "/login?token=T") is redacted the same way in place, nested up to
 * four deep (deeper, a value holding a URL is REDACTED whole); a value that is
 * percent-encoded (up to three times over) and holds anything to redact once
 * decoded is REDACTED whole, and so is one still encoded after three decodes.
 * Path parameters (";name=value" in a segment, RFC 3986 section 3.3:
 * "/app;jsessionid=S/x") are read as query pairs are. A backslash counts as a
 * slash after a scheme and in an authority ("https:\\u:pw@h", "https:\/\/u:pw@h",
 * as browsers read them: WHATWG URL standard). A secret under another name is
 * shown. Returns `buf`.
 * Anything that is not a URL ("scheme:/...") is copied unchanged. Never fails;
 * `url` NULL is written as "(null)". Thread-safe.
 */
LDS_API char *lds_url_redact(const char *url, char *buf, size_t cap);

/**
 * Loads the index at an http://, https:// or s3:// `url` through libcurl, streaming
 * it into the pooled buffer with the invariants of every other source (see
 * the common tail above); a zstd body is decoded on the fly. The transfer:
 *
 * - Connections: a server that allows ranges is asked for the payload with
 *   options.url_connections concurrent Range requests (see that field; ADR 0041).
 * - S3: s3://BUCKET/KEY is ENDPOINT/BUCKET/KEY with AWS_ENDPOINT_URL_S3 or
 *   AWS_ENDPOINT_URL set (path-style), else https://BUCKET.s3.REGION.amazonaws.com/KEY.
 *   Those, and http(s) URLs under that endpoint or on *.amazonaws.com (not presigned),
 *   are signed with AWS Signature V4 (libcurl's CURLOPT_AWS_SIGV4) when
 *   AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are set; AWS_SESSION_TOKEN is sent as
 *   x-amz-security-token; REGION is AWS_REGION, AWS_DEFAULT_REGION or us-east-1. An S3
 *   error is LDS_E_IO, field "http.status", naming the server's Code and Message only.
 *   The credentials are read from the environment at each call and never shown.
 *   LDS_E_INVALID_ARG for an s3:// URL without a bucket or key (ADR 0042).
 * - Length: the response's Content-Length, when present, is the transport's
 *   length. It is cross-checked against the header's declared length after
 *   the first 64 bytes and before anything is rented: a Content-Length below
 *   64 + declared is LDS_E_TRUNCATED, above it LDS_E_TRAILING, field
 *   "http.content_length", both numbers named. A header that leaves the
 *   length unknown takes Content-Length - 64 (still pooled). No
 *   Content-Length (chunked or close-delimited) and no declared length is
 *   the growable path, bounded by max_payload_bytes. For a zstd body the
 *   Content-Length counts compressed bytes: the frame content size is the
 *   cross-check, and libcurl holds the body to its Content-Length.
 * - Fields: the header fields read (Content-Length, Content-Range, ETag,
 *   Last-Modified, Content-Encoding) are parsed strictly; Content-Length fields
 *   that are malformed or disagree with each other or with the length libcurl
 *   holds the body to are LDS_E_IO, field "http.content_length".
 * - Encoding: no Accept-Encoding is sent and nothing is decoded by HTTP; a
 *   response with a Content-Encoding other than identity is
 *   LDS_E_UNSUPPORTED, field "http.content_encoding" (its bytes are not the
 *   index's, and its length is not the declared one).
 * - Errors: an HTTP status of 400 or more, a 3xx not followed, too many
 *   redirects, a connect or low-speed timeout, or a transfer that cannot be
 *   resumed are LDS_E_IO, field "http", the message naming the URL (without
 *   credentials), the HTTP status or libcurl's error, and the body bytes
 *   received. options.url (lds_url_options) sets the timeouts, redirects,
 *   resumption, CA file and credentials.
 * - Cancellation: options.cancel is called before each chunk and at least
 *   every 50 ms while waiting for the network; progress as for any source.
 * - Deadline: lds_url_options.timeout_ms bounds the whole call's transfer
 *   (LDS_E_TIMEOUT, field "http.timeout").
 * - Other statuses: LDS_E_TIMEOUT (the deadline above), LDS_E_INVALID_ARG (url NULL, a scheme other than http,
 *   https or s3, options.url->size), LDS_E_UNSUPPORTED (built without libcurl:
 *   lds_url_supported() is false), and those of the common tail.
 *
 * lds_load_info.http_status, .resumes and .url_connections report the last response's
 * status, the resumptions made and the connections that fetched. Thread-safe (each call has its own libcurl
 * handles; libcurl's global init runs once).
 */
LDS_API lds_status lds_load_url(const char *url, const lds_load_options *opts, lds_index **out,
                                lds_load_info *info, lds_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LODESTAR_LOAD_H */
