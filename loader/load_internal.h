/*
 * Internal declarations of the loader: the byte source (raw transports and the
 * zstd decoding layer above them) and the error helper. Not installed.
 */
#ifndef LDS_LOAD_INTERNAL_H
#define LDS_LOAD_INTERNAL_H

#include <stdarg.h>
#include <sys/types.h>

#include <zstd.h>

#include "lds_common.h"
#include "lodestar.h"

/* Bytes fed to ZSTD_getFrameContentSize: enough for any frame header
 * (ZSTD_FRAMEHEADERSIZE_MAX, which zstd.h exposes only to static linkers). */
#define LDS__ZSTD_HEADER_MAX 18

enum lds__source_kind {
    LDS__SRC_FD = 1,
    LDS__SRC_FILE,
    LDS__SRC_CALLBACK,
    LDS__SRC_MEMORY,
    LDS__SRC_URL
};

/* An HTTP(S) transfer (loader/url.c); opaque outside it. */
typedef struct lds__url lds__url;

/*
 * A byte source: one raw transport, a few bytes peeked ahead of the reader
 * (to recognise zstd before the header is read), and, when the input is a
 * zstd frame, the decoder that turns the raw bytes into the logical stream.
 * Every read of the logical stream goes through lds__source_read.
 */
typedef struct lds__source {
    enum lds__source_kind kind;
    int fd;
    FILE *file;
    lds_read_fn fn;
    void *fn_ctx;
    const unsigned char *mem;
    size_t mem_len;
    size_t mem_pos;
    lds__url *url;

    const lds_load_options *opts; /* for cancellation while retrying EINTR */
    int fd_waits; /* LDS__SRC_FD: 0 not asked yet, 1 a regular file or block device, 2 a
                     pipe, socket or terminal (a read may wait: cancel is asked while it does) */
    bool raw_eof;                 /* the transport has reported its end */
    uint64_t raw_bytes;           /* bytes taken from the transport */
    uint64_t out_bytes;           /* bytes handed out of the logical stream */

    unsigned char peek[LDS_HEADER_SIZE]; /* raw bytes read ahead, served first */
    size_t peek_len;
    size_t peek_pos;

    bool compressed;
    unsigned long long frame_content_size; /* ZSTD_CONTENTSIZE_UNKNOWN if absent */
    ZSTD_DCtx *dctx;
    unsigned char *zin; /* compressed input buffer */
    size_t zin_cap;
    size_t zin_len;
    size_t zin_pos;
    bool frame_done; /* ZSTD_decompressStream returned 0: frame complete and flushed */
} lds__source;

/* Sets up `src` over the given transport; nothing is read yet. */
void lds__source_init(lds__source *src, enum lds__source_kind kind, const lds_load_options *opts);

/* Skippable frames (RFC 8878 §3.1.2) before the zstd frame: at most this many, holding at most
 * this many bytes together, are read through (docs/adr/0018, amendment 2026-12-03). */
#define LDS__ZSTD_SKIP_FRAMES_MAX 16
#define LDS__ZSTD_SKIP_BYTES_MAX  ((uint64_t)64 << 20)

/* Reads ahead up to LDS_HEADER_SIZE raw bytes and, if they start with the zstd
 * magic, switches the source to decoding (src->compressed, frame_content_size).
 * Skippable frames the input starts with are read through first (LDS_E_TRUNCATED
 * for one the input ends inside, LDS_E_LIMIT past LDS__ZSTD_SKIP_FRAMES_MAX or
 * LDS__ZSTD_SKIP_BYTES_MAX, LDS_E_ZSTD when no zstd frame follows them).
 * LDS_E_ZSTD if the frame header is invalid, LDS_E_NOMEM, transport errors. */
lds_status lds__source_open(lds__source *src, lds_error *err);

/* Releases the decoder; the transport itself is the caller's. */
void lds__source_close(lds__source *src);

/* One read of at most `cap` (>= 1) bytes of the logical stream; `*got` = 0 at
 * its end (end of transport, or end of the zstd frame). Short counts happen. */
lds_status lds__source_read(lds__source *src, void *buf, size_t cap, size_t *got, lds_error *err);

/* Reads until `want` bytes or the end; `*got` tells how many arrived. */
lds_status lds__source_read_full(lds__source *src, void *buf, size_t want, size_t *got,
                                 lds_error *err);

/* Succeeds if the logical stream and, for zstd, the transport after the frame
 * hold no more bytes; LDS_E_TRAILING otherwise (`what` names the boundary). */
lds_status lds__source_expect_end(lds__source *src, lds_error *err);

/* Starts the transfer of `url` (nothing is received yet): LDS_E_INVALID_ARG for
 * a scheme other than http(s) or a bad opts->url, LDS_E_UNSUPPORTED without
 * libcurl, LDS_E_NOMEM. `*out` is NULL on failure. */
lds_status lds__url_open(const char *url, const lds_load_options *opts, lds__url **out,
                         lds_error *err);

/* lds__url_open whose first request asks for the body's bytes 0..head_bytes-1 only
 * (Range; head_bytes 0 is taken as 1). A 206 to it gives the whole body's length from
 * its Content-Range (lds__url_length), its validator, and lds__url_head_partial true;
 * lds__url_read then returns those bytes and ends. A server that ignores the Range
 * answers 200 with the whole body (head_partial false), read as lds__url_open's. A
 * head dropped mid-body is not resumed. */
lds_status lds__url_open_head(const char *url, const lds_load_options *opts, uint64_t head_bytes,
                              lds__url **out, lds_error *err);

/* Whether the first response was a 206 to lds__url_open_head's Range request. */
bool lds__url_head_partial(const lds__url *u);

/* Ends the transfer and frees everything; NULL is accepted. */
void lds__url_close(lds__url *u);

/* One read of the response body: at least one byte, or `*got` = 0 at its end.
 * Resumes a dropped transfer (max_resumes); checks options.cancel while waiting. */
lds_status lds__url_read(lds__url *u, void *buf, size_t cap, size_t *got, lds_error *err);

/* The Content-Length of the whole body, once the first body byte has arrived:
 * false when the response has none. */
bool lds__url_length(const lds__url *u, uint64_t *length);

/* The URL without credentials, for messages. */
const char *lds__url_shown(const lds__url *u);

/* Last HTTP status (0 if none) and resumptions made, for lds_load_info. */
int lds__url_status(const lds__url *u);
uint32_t lds__url_resumes(const lds__url *u);

/* ==== parallel ranged fetch (loader/url.c, docs/adr/0041) ================== */

/* Most concurrent transfers of one fetch (options.url_connections above it is taken as
 * this). */
#define LDS__URL_CONNECTIONS_MAX 16u
/* The automatic rule (url_connections 0): LDS__URL_AUTO_CONNECTIONS transfers for a
 * payload of LDS__URL_AUTO_MIN_BYTES and up, one below (docs/adr/0041 has the figures). */
#define LDS__URL_AUTO_CONNECTIONS 4u
#define LDS__URL_AUTO_MIN_BYTES ((uint64_t)16 << 20)
/* Bytes per Range request: about a quarter of one connection's share, within these
 * bounds (the lower one a power of two; a format 1.1 range is whole chunks). */
#define LDS__URL_RANGE_MIN ((size_t)64 << 10)
#define LDS__URL_RANGE_MAX ((size_t)8 << 20)

/* Body bytes [offset, offset + length) of the URL's response. */
typedef struct lds__url_range {
    uint64_t offset;
    uint64_t length;
} lds__url_range;

/* Called on the fetching thread when range `index` is complete in dst (every byte
 * written, none to come); a failure written to `err` stops the fetch. */
typedef lds_status (*lds__url_range_fn)(void *ctx, size_t index, lds_error *err);

typedef struct lds__url_fetch {
    unsigned char *dst;           /* body byte b lands at dst[b - dst_at] */
    uint64_t dst_at;
    const lds__url_range *ranges; /* disjoint, each inside the body and >= dst_at */
    size_t count;                 /* fetched in this order, `connections` at a time */
    unsigned connections;         /* 1..LDS__URL_CONNECTIONS_MAX (0 is taken as 1) */
    lds__url_range_fn done;       /* NULL: none */
    void *done_ctx;
    uint64_t total; /* for options.progress: the bytes of all ranges */
    /* results */
    unsigned connections_used;
    uint32_t resumes;  /* dropped ranges resumed (also added to lds__url_resumes) */
    uint64_t received; /* body bytes written */
    bool no_ranges;    /* a Range request was answered 200 with the same validator: the
                          server ignores ranges (the status is LDS_E_UNSUPPORTED) */
    /* internal */
    lds_status failed;
    lds_error *err;
} lds__url_fetch;

/* Whether the first response (status 200, its body not read past the spill) allows a
 * ranged fetch: a Content-Length, Accept-Ranges: bytes, and a strong ETag or a
 * Last-Modified to validate every range with (If-Range, and compared on each 206). */
bool lds__url_ranges_ok(const lds__url *u);

/* Fetches f->ranges of the URL's body with up to f->connections concurrent Range requests
 * (libcurl multi, one transfer per range, each writing into its place in f->dst: no
 * intermediate buffer), on the calling thread. The first response's transfer is left as
 * it is (not read), so that a caller can still read it as one stream after no_ranges.
 * Each 206 must carry the first response's validator, exactly the Content-Range and
 * Content-Length asked and no Content-Encoding; a range dropped mid-body is asked again
 * from its byte reached (If-Range; at most url.max_resumes times per range). cancel and
 * the deadline are checked at least every 50 ms. One failure stops every transfer; its
 * message names the range and the redacted URL. Every transfer has been removed and no
 * callback runs once this returns, on every path. */
lds_status lds__url_fetch_ranges(lds__url *u, lds__url_fetch *f, lds_error *err);

/* lds__error_vfill (lds_common.h), with " (at byte OFFSET)" when `field` is
 * set and the status is not LDS_E_INVALID_ARG. */
lds_status lds__load_fail(lds_error *err, lds_status status, const char *field, uint64_t offset,
                          int sys_errno, const char *zstd_error, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* The mmap the loader calls; tests replace it to simulate a refusal (ENODEV). */
extern void *(*lds__load_mmap)(void *addr, size_t length, int prot, int flags, int fd,
                               off_t offset);

/* Tests only: called on the mapped path with the file's fd at "mapped" (the file
 * is mapped, nothing read yet) and "parsed" (the parse succeeded, the file's size
 * not yet checked again), to change the file underneath. */
extern void (*lds__load_mapped_hook)(int fd, const char *stage);

/* ==== parallel reads (loader/parallel.c, docs/adr/0030) ==================== */

/* Most readers of one load (options.read_threads above it is taken as this). */
#define LDS__READ_THREADS_MAX 64u
/* The automatic rule (read_threads 0): one reader per online CPU, at most this many, and
 * at most one per LDS__READ_BYTES_PER_THREAD of payload (so small payloads keep one). */
#define LDS__READ_THREADS_AUTO_MAX 8u
#define LDS__READ_BYTES_PER_THREAD ((size_t)128 << 20)
/* Bytes per range when options.chunk_bytes is 0 (a multiple of the 2 MiB huge page, so
 * that two readers never fault the same huge page). */
#define LDS__READ_RANGE_DEFAULT ((size_t)8 << 20)

/* Checks one completed range (payload bytes [offset, offset + n), at p) on the reader
 * thread that read it: format 1.1's per-chunk checksum. LDS_OK, or a failure written to
 * `err` (its offset counts from the stream start). Called concurrently from several
 * readers, for disjoint ranges; ranges start on multiples of the job's `range`. */
typedef lds_status (*lds__range_verify_fn)(void *ctx, size_t offset, const unsigned char *p,
                                           size_t n, lds_error *err);

/* Fills one range (payload bytes [offset, offset + n), at p) entirely in place of the
 * job's own read and verify: the delta reload's copies and reads (loader/load.c). Same
 * contract as lds__range_verify_fn; `reader` is the reader's number (0 = calling thread). */
typedef lds_status (*lds__range_fill_fn)(void *ctx, unsigned reader, size_t offset,
                                         unsigned char *p, size_t n, lds_error *err);

/* As lds__range_verify_fn, given the range's XXH3-64 as the reader computed it, piece by
 * piece right after each pread (docs/adr/0040): it compares, and names a bad chunk. */
typedef lds_status (*lds__range_hashed_fn)(void *ctx, size_t offset, const unsigned char *p,
                                           size_t n, uint64_t computed, lds_error *err);

typedef struct lds__pread_job {
    int fd;
    uint64_t file_at;            /* file offset of payload byte 0 */
    uint64_t payload_at;         /* stream offset of payload byte 0 (messages: "payload") */
    uint64_t stream_at;          /* source bytes before payload byte 0 (messages: "stream") */
    unsigned char *dst;          /* the rental: `length` bytes */
    size_t length;               /* declared payload length, > 0 */
    size_t range;                /* bytes per range, > 0 */
    unsigned threads;            /* readers wanted, 1..LDS__READ_THREADS_MAX */
    bool hash;                   /* XXH3-64 of [0, length - 8), in order, on the calling thread */
    lds__range_verify_fn verify; /* NULL: none */
    /* With `verify`: when set and `piece` > 0, a reader preads a range `piece` bytes at a
     * time and hashes each piece at once, while it is in the cache, then calls this with
     * the range's XXH3-64 instead of `verify` (which is kept for a reader whose hash state
     * could not be allocated). */
    lds__range_hashed_fn verify_hashed;
    size_t piece;
    size_t hash_end; /* piece hashing covers payload bytes below this (the chunk table's) */
    void *verify_ctx;
    lds__range_fill_fn fill; /* non-NULL: fills each range instead of reading it (verify unused) */
    void *fill_ctx;
    const lds_load_options *opts; /* cancel, progress, callback_ctx */
    /* results */
    unsigned threads_used;
    bool hashed;
    uint64_t hash_value;
} lds__pread_job;

/* Reads the payload with job->threads readers (the calling thread is one). Every reader
 * has ended when it returns. LDS_E_TRUNCATED (the file ended early), LDS_E_IO,
 * LDS_E_CANCELLED, a verify hook's failure, LDS_E_NOMEM: the one at the lowest offset. */
lds_status lds__pread_payload(lds__pread_job *job, lds_error *err);

/* Bench and test hook: when nonzero (and below the chunk), every parallel read of a
 * format 1.1 file preads each chunk in pieces of this many bytes, hashing each at once;
 * 0, the default, reads each chunk whole and then hashes it (ADR 0040). */
extern size_t lds__load_piece_override;

/* The automatic reader count for a payload of `length` bytes. */
unsigned lds__read_threads_auto(size_t length);

/* The pread every reader calls (`reader`: 0 for the calling thread); tests replace it to
 * return short reads, EINTR or errors on chosen readers, or to hold one at a gate. */
extern ssize_t (*lds__load_pread)(int fd, void *buf, size_t n, off_t off, unsigned reader);

/* How the rental behind `lease` is backed (pool/buffers.c): 0 4 KiB pages, 1 advised for
 * huge pages, 2 huge pages wanted but not given (THP "never" or madvise refused). */
int lds__pool_lease_pages(lds_pool *pool, const lds_lease *lease);

#endif /* LDS_LOAD_INTERNAL_H */
