/*
 * lodestar_index.h: the on-disk format, the payload parser, the index and the writer.
 *
 * A lodestar file is a fixed 64-byte header followed by the payload. The payload
 * holds the sections (vectors first, at payload offset 0), a section table, a
 * fixed footer that locates the table, and last an 8-byte XXH3-64 checksum of
 * every payload byte before it. The normative description is docs/format.md; the
 * section numbers quoted below (e.g. "format.md §4") refer to it.
 *
 * Thread safety: an lds_index is immutable once parsed; every accessor, lookup
 * and search may be called from any number of threads at once. A writer is used
 * by one thread at a time.
 */
#ifndef LODESTAR_INDEX_H
#define LODESTAR_INDEX_H

/* The parser's whole dependency (docs/design.md, "The parts"): never the pool or loader. */
#include "lodestar_core.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== header ============================================================= */

/** Bytes of the fixed header; the payload starts at file offset 64 (format.md §2). */
#define LDS_HEADER_SIZE 64
/** The declared payload length that means "unknown" (a writer streaming to a pipe). */
#define LDS_LENGTH_UNKNOWN UINT64_MAX
/** Bytes of the payload checksum, the last 8 bytes of the payload (format.md §5). */
#define LDS_CHECKSUM_SIZE 8
/** Bytes of the footer that precedes the checksum (format.md §4.3). */
#define LDS_FOOTER_SIZE 32
/** Length of the smallest well-formed payload: an empty vectors section, a table
    with one entry, the footer and the checksum (format.md §4). */
#define LDS_MIN_PAYLOAD_SIZE 96
/** Bytes of the magic at file offset 0 (format.md §2.1). */
#define LDS_MAGIC_SIZE 8
/** The magic: 0x89 'L' 'D' 'S' CR LF ^Z LF, as a string literal of 8 bytes. */
#define LDS_MAGIC "\x89LDS\r\n\x1a\n"
/** The format major version this library reads and writes. */
#define LDS_FORMAT_MAJOR 1
/** The latest format minor version this library reads and writes (it reads 1.0 to 1.2,
    and any later minor that sets no must-understand header flag it does not know); it
    writes 1.2 or 1.1 by default (lds_writer_options.layout), 1.0 when asked or to a pipe. */
#define LDS_FORMAT_MINOR 2

/** Header flag bit 0, CHUNKED (format 1.1, format.md §2.5): the payload ends in a chunk
    table and header bytes 24..55 describe it. A must-understand bit: a 1.0 reader refuses
    the file at header.flags (rule H5) before it reads a payload byte. */
#define LDS_HEADER_CHUNKED 0x1u
/** Header flag bit 1, CHUNK_ALIGNED (format 1.2, format.md §4.4): with LDS_HEADER_CHUNKED
    only; every section after the vectors, and the key bytes within the keys section,
    start on a chunk boundary (a multiple of chunk_bytes), the gaps zero. A must-understand
    bit: a 1.1 reader refuses the file at header.flags with "format 1.2: upgrade lodestar"
    (rule H5) before it reads a payload byte. */
#define LDS_HEADER_CHUNK_ALIGNED 0x2u
/** Smallest and largest chunk size a 1.1 file may declare (rule C1): powers of two. */
#define LDS_MIN_CHUNK_BYTES ((uint32_t)1 << 10)
#define LDS_MAX_CHUNK_BYTES ((uint32_t)1 << 30)
/** The writer's chunk size: 4 KiB (ADR 0048, amending ADR 0031's 4 MiB: delta reloads read
    whole chunks, and 4 KiB hashes as fast as 4 MiB). */
#define LDS_DEFAULT_FILE_CHUNK_BYTES ((uint32_t)4 << 10)
/** lds_writer_options.chunk_bytes value that writes format 1.0 (one payload checksum). */
#define LDS_CHUNKS_NONE UINT32_MAX

/**
 * The decoded fields of the fixed header (format.md §2). Rules H1-H6 and C1-C4 of
 * format.md §6.
 * - major, minor: format version; the decoder refuses a major other than 1.
 * - flags: header flags; bits 0-15 must be understood (1.1 defines bit 0,
 *   LDS_HEADER_CHUNKED, 1.2 bit 1, LDS_HEADER_CHUNK_ALIGNED, which needs bit 0; any
 *   other set one is refused), bits 16-31 may be ignored.
 * - payload_length: declared bytes after the header, or LDS_LENGTH_UNKNOWN.
 *   It comes from an untrusted source: check it against your own limit.
 * - chunk_*: zero unless flags has LDS_HEADER_CHUNKED (format 1.1, §2.5). Then the
 *   payload's first chunk_table_offset bytes (a 1.0 payload: sections, table,
 *   footer, checksum) are covered by chunk_count chunks of chunk_bytes bytes
 *   (the last one shorter when it must), chunk k being payload bytes
 *   [k x chunk_bytes, min((k + 1) x chunk_bytes, chunk_table_offset)); the chunk
 *   table, chunk_count little-endian XXH3-64 values, fills the payload from
 *   chunk_table_offset to its end; chunk_table_hash is the XXH3-64 of the table.
 *   lds_header_decode has checked the geometry (C1-C4), not the table or chunks.
 */
typedef struct lds_header {
    uint16_t major, minor;
    uint32_t flags;
    uint64_t payload_length;
    uint64_t chunk_table_offset;
    uint64_t chunk_count;
    uint64_t chunk_table_hash;
    uint32_t chunk_bytes;
} lds_header;

/**
 * Decodes and checks the header in `bytes[0, n)`.
 *
 * Checks, in this order: n >= LDS_HEADER_SIZE (else LDS_E_TRUNCATED); the magic
 * (LDS_E_BAD_MAGIC, which is also what text-mode or 7-bit transfer damage
 * yields); the header check value at bytes 56..63 (LDS_E_HEADER_CHECK); the
 * major version (LDS_E_VERSION); unknown must-understand flag bits
 * (LDS_E_UNSUPPORTED; when the header's minor is above LDS_FORMAT_MINOR the
 * message begins "format 1.M: upgrade lodestar"); LDS_HEADER_CHUNK_ALIGNED only
 * with LDS_HEADER_CHUNKED (rule A1, LDS_E_BAD_VALUE at header.flags); reserved bytes zero: 24..55
 * without LDS_HEADER_CHUNKED, 52..55 with it (LDS_E_BAD_VALUE); with
 * LDS_HEADER_CHUNKED, rules C1-C4 of format.md §6: the chunk size
 * (LDS_E_BAD_VALUE), a known payload length (LDS_E_BAD_VALUE), the chunk count
 * (LDS_E_OVERFLOW when 8 x count overflows) and the table's place against the
 * payload length and the count (LDS_E_BAD_SECTION).
 * LDS_E_INVALID_ARG if `bytes` or `out` is NULL.
 * Error offsets are relative to `bytes` (the file start).
 * On failure `*out` is unspecified. Reads at most 64 bytes. Thread-safe.
 */
LDS_API lds_status lds_header_decode(const void *bytes, size_t n, lds_header *out, lds_error *err);

/**
 * Encodes `h` into the 64 bytes at `out`: the magic, the fields (the chunk_*
 * fields only when flags has LDS_HEADER_CHUNKED), zero reserved bytes and the
 * header check value. Never fails for a non-NULL `h` and `out`
 * (LDS_E_INVALID_ARG otherwise); does not validate the field values.
 */
LDS_API lds_status lds_header_encode(const lds_header *h, void *out);

/* ==== the chunk table (format 1.1) ======================================== */

/*
 * Per-chunk verification for readers that read a 1.1 payload in pieces (the
 * loader's readers, one thread or several). The order: lds_header_decode; read
 * the table (payload bytes [chunk_table_offset, payload_length), i.e. file
 * offset 64 + chunk_table_offset for a file whose header is at offset 0), before
 * or after the chunks, and check it with lds_chunk_table_check (rule C5); then,
 * as each chunk's bytes are complete, lds_chunk_verify (rule C6), from any
 * thread. Error offsets are file offsets with the header at 0 (rebase them for
 * a header elsewhere).
 */

/** True when `h` (decoded by lds_header_decode) declares a chunk table (format 1.1). */
LDS_API bool lds_header_chunked(const lds_header *h);

/**
 * Payload offsets of chunk `k`: [*start, *end), end - start <= chunk_bytes.
 * LDS_E_INVALID_ARG when `h` is not chunked, k >= chunk_count or a pointer is NULL.
 */
LDS_API lds_status lds_chunk_range(const lds_header *h, uint64_t k, uint64_t *start,
                                   uint64_t *end);

/**
 * Checks the chunk table `table[0, n)` against the header (rule C5): n must be
 * 8 x chunk_count (else LDS_E_BAD_SECTION, field "chunk_table") and its XXH3-64
 * equal chunk_table_hash (else LDS_E_CHECKSUM: "chunk table: stored hash ...
 * (header), computed ..."). `table` may sit anywhere (read by pread before the
 * payload, or in the payload buffer). LDS_E_INVALID_ARG for NULL arguments or
 * an unchunked header. Reads `table` only; thread-safe.
 */
LDS_API lds_status lds_chunk_table_check(const lds_header *h, const void *table, size_t n,
                                         lds_error *err);

/**
 * Verifies chunk `k` (rule C6): hashes `chunk[0, n)` (the chunk's bytes, n the
 * length lds_chunk_range gives, else LDS_E_INVALID_ARG) with XXH3-64 and
 * compares it with entry k of `table` (checked by lds_chunk_table_check).
 * LDS_E_CHECKSUM names field "chunk" at the chunk's first byte: "checksum
 * of chunk 17 (payload bytes 285212672..301989887): stored ..., computed ...".
 * Reads its arguments only; call it from any number of threads at once.
 */
LDS_API lds_status lds_chunk_verify(const lds_header *h, const void *table, uint64_t k,
                                    const void *chunk, size_t n, lds_error *err);

/** What lds_payload_verify_chunks reports for one bad chunk. */
typedef struct lds_bad_chunk {
    uint64_t chunk;        /* its number */
    uint64_t start, end;   /* payload offsets [start, end) */
    uint64_t stored;       /* the table's XXH3-64 */
    uint64_t computed;     /* the bytes' XXH3-64 */
} lds_bad_chunk;

/**
 * Checks a whole 1.1 payload `payload[0, length)` (length = h->payload_length):
 * the table (C5), then every chunk (C6) on up to `threads` threads (0 = one per
 * online core, at most 8, and at most one per chunk); calls `bad(ctx, &b)` for
 * each bad chunk, in chunk order, on the calling thread, after all were hashed.
 * `*n_bad` (may be NULL) receives the number of bad chunks. Returns LDS_OK, the
 * table's status, LDS_E_CHECKSUM naming the first bad chunk, LDS_E_TRUNCATED if
 * length differs from the declared one, LDS_E_INVALID_ARG (NULL arguments, an
 * unchunked header), LDS_E_NOMEM. Thread-safe; `bad` may be NULL.
 */
LDS_API lds_status lds_payload_verify_chunks(const lds_header *h, const void *payload,
                                             size_t length, unsigned threads,
                                             void (*bad)(void *ctx, const lds_bad_chunk *b),
                                             void *ctx, uint64_t *n_bad, lds_error *err);

/* ==== parsing ============================================================ */

/**
 * Options of lds_index_from_payload. Initialize with lds_parse_options_default.
 * - limits: checked before any declared size is trusted (LDS_E_LIMIT).
 * - verify_checksum: default true. When false the checksum (1.1: the chunks
 *   and their table) is read but not compared; every structural check still runs, so no input can make the
 *   parser read out of bounds.
 * - has_precomputed_hash / precomputed_hash: the caller already hashed
 *   payload[0, length - 8) (XXH3-64, seed 0) while reading it; the parser
 *   compares that value with the stored checksum instead of hashing again
 *   (a mismatch is LDS_E_CHECKSUM whose message says "computed ... while reading"). Used
 *   only when verify_checksum is true; ignored (nothing compared) otherwise.
 * - copy: false (default): the index borrows `payload`, which must stay valid
 *   and unchanged until lds_index_free; true: the index copies the sections it
 *   keeps into its own 64-byte-aligned memory and never touches `payload` again.
 * - release / release_ctx: borrow mode only: called exactly once by
 *   lds_index_free (after the index stops using `payload`); never called when
 *   parsing fails, and ignored in copy mode.
 * - base_offset: file offset of payload[0], added to every error offset;
 *   default LDS_HEADER_SIZE.
 * - copy_key_offsets: default false. The key offsets are validated, then read
 *   again by every key lookup. With this set the parser copies them first
 *   ((rows + 1) x 4 or 8 bytes of its own), validates the copy and the index
 *   uses only the copy, so bytes of `payload` that another party rewrites
 *   while or after it is parsed (a shared file mapping) cannot send a key
 *   read outside the payload; other changed bytes then read as changed data
 *   (vectors, ids, key text), never out of bounds. The loader sets it on
 *   its mapped path. Added after base_offset: an older, shorter struct gets
 *   the default.
 * - header: the file's header as lds_header_decode returned it (borrowed for
 *   the call), or NULL (the default). Required for a format 1.1 payload
 *   (lds_header_chunked): the parser then checks `length` against the declared
 *   payload length (LDS_E_TRUNCATED / LDS_E_TRAILING), the chunk table against
 *   the header (C5) and, when verify_checksum, every chunk (C6), and parses the
 *   1.0 payload in [0, chunk_table_offset). Without it a 1.1 payload reads as
 *   a 1.0 one and fails (its last 40 bytes are no footer).
 * - chunks_verified: 1.1 only: the caller has checked the table and every
 *   chunk against `header` while reading (lds_chunk_table_check,
 *   lds_chunk_verify), so the parser does not hash them again.
 * - verify_threads: 1.1 only: threads that hash the chunks when the parser
 *   does (0, the default: one per online core, at most 8; 1: none started).
 * - size: sizeof(lds_parse_options), set by the default function, or an older
 *   size of at least LDS_PARSE_OPTIONS_MIN_SIZE; any other value is
 *   LDS_E_INVALID_ARG (rule: "Struct sizes" in lodestar_core.h), as is
 *   limits.size outside its range.
 */
typedef struct lds_parse_options {
    size_t size;
    lds_limits limits;
    bool verify_checksum;
    bool has_precomputed_hash;
    uint64_t precomputed_hash;
    bool copy;
    void (*release)(void *ctx);
    void *release_ctx;
    uint64_t base_offset;
    bool copy_key_offsets;
    const lds_header *header;
    bool chunks_verified;
    unsigned verify_threads;
} lds_parse_options;

/** Smallest lds_parse_options.size accepted (see "Struct sizes" in lodestar.h): the
    struct before copy_key_offsets. */
#define LDS_PARSE_OPTIONS_MIN_SIZE (offsetof(lds_parse_options, base_offset) + sizeof(uint64_t))

/** Fills `o` with the defaults described at lds_parse_options. NULL is ignored. */
LDS_API void lds_parse_options_default(lds_parse_options *o);

/** An index: rows of vectors with optional ids, keys and metadata. Opaque. */
typedef struct lds_index lds_index;

/**
 * Parses and validates the payload in `payload[0, length)` (the bytes after
 * the header; `length` is the number of bytes actually read, not a capacity)
 * and returns a new index in `*out`. `opts` may be NULL for the defaults.
 *
 * Everything is validated before use, in the order of format.md §6: the
 * checksum, the footer, the table, each section's place and length, the
 * vector/id/key sizes, the keys (offsets, UTF-8, uniqueness) and the metadata.
 * The payload may sit at any address (no alignment is required); rows are
 * 64-byte aligned in memory when payload is.
 *
 * Returns LDS_OK, or: LDS_E_INVALID_ARG (NULL payload with length > 0, NULL out,
 * bad options), LDS_E_TRUNCATED (shorter than a footer and checksum),
 * LDS_E_CHECKSUM, LDS_E_BAD_SECTION (footer, table or section layout),
 * LDS_E_BAD_VALUE (dtype, metric, scale, dim, flags, metadata values),
 * LDS_E_UNSUPPORTED (an unknown must-understand kind or flag), LDS_E_LIMIT,
 * LDS_E_OVERFLOW, LDS_E_BAD_UTF8, LDS_E_NOMEM. On failure `*out`
 * is NULL, nothing is allocated, and `release` is not called; `err` names the
 * field and the file offset (base_offset + payload offset) of the fault.
 *
 * Cost: one pass over the payload for the checksum (unless precomputed or
 * disabled; XXH3 through libxxhash's AVX2/AVX-512 dispatch where it exists),
 * one over the key offsets, one over the key bytes for UTF-8 (ASCII 32 bytes
 * at a time; only keys holding other bytes are decoded); a copy of the
 * sections in copy mode. Repeated keys under KEYS_UNIQUE (format.md K7) are
 * found where the key table is built, after the load: at the first
 * lds_index_find_key or lds_index_check_keys (ADR 0010); call the latter to
 * check an index in full, as `lodestar verify` does.
 * Thread-safe (reads `payload` only).
 */
LDS_API lds_status lds_index_from_payload(const void *payload, size_t length,
                                          const lds_parse_options *opts, lds_index **out,
                                          lds_error *err);

/* ==== the index ========================================================== */

/*
 * A NULL index: every accessor below returns its zero (0, false, NULL, or
 * (lds_dtype)0 / (lds_metric)0) and every status-returning call returns
 * LDS_E_INVALID_ARG; none crashes.
 */

/** Frees the index and, in borrow mode, calls the release callback once. NULL is ok. */
LDS_API void lds_index_free(lds_index *idx);

/** Number of rows. */
LDS_API uint64_t lds_index_rows(const lds_index *idx);
/** Elements per row (>= 1). */
LDS_API uint32_t lds_index_dim(const lds_index *idx);
/** Element type of the stored rows. */
LDS_API lds_dtype lds_index_dtype(const lds_index *idx);
/** Metric from the section table (the typed field; metadata "metric" agrees). */
LDS_API lds_metric lds_index_metric(const lds_index *idx);
/** For LDS_DTYPE_I8: value = stored i8 * scale (> 0, finite). 0 for other dtypes. */
LDS_API float lds_index_i8_scale(const lds_index *idx);
/** The file's "normalized" flag: rows were L2-normalized by the writer. Not verified. */
LDS_API bool lds_index_normalized(const lds_index *idx);
/** Whether each row has a u64 id. */
LDS_API bool lds_index_has_ids(const lds_index *idx);
/** Whether each row has a UTF-8 key. */
LDS_API bool lds_index_has_keys(const lds_index *idx);
/** Whether the file declares that keys are unique (checked by
    lds_index_check_keys or the first lds_index_find_key, not by the load). */
LDS_API bool lds_index_keys_unique(const lds_index *idx);
/** Payload length in bytes, checksum included (the `length` given to the parser). */
LDS_API uint64_t lds_index_payload_bytes(const lds_index *idx);
/** The stored XXH3-64 checksum of the payload (format 1.1: of the 1.0 payload the
    chunks cover, so a 1.0 and a 1.1 file of the same data give the same value). */
LDS_API uint64_t lds_index_checksum(const lds_index *idx);
/** Format 1.1: bytes per chunk of the payload's chunk table; 0 for a 1.0 index. */
LDS_API uint32_t lds_index_chunk_bytes(const lds_index *idx);
/** Format 1.1: number of chunks in the chunk table; 0 for a 1.0 index. */
LDS_API uint64_t lds_index_chunk_count(const lds_index *idx);
/** Whether the file lays its sections, and its key bytes, on chunk boundaries (format 1.2,
    header flag LDS_HEADER_CHUNK_ALIGNED, format.md §4.4). false for 1.0 and 1.1 files. */
LDS_API bool lds_index_chunk_aligned(const lds_index *idx);
/** Whether the parser compared the checksum: true exactly when verify_checksum was
    set (by hashing, or against a precomputed hash); a precomputed hash given with
    verify_checksum false is ignored and this is false. */
LDS_API bool lds_index_checksum_verified(const lds_index *idx);

/**
 * The stored bytes of `row`: dim * lds_dtype_size(dtype) bytes, little-endian
 * elements, borrowed from the index (valid until lds_index_free). The pointer
 * is aligned only as far as the payload was: load elements with memcpy.
 * NULL if `row` >= rows or `idx` is NULL.
 */
LDS_API const void *lds_index_row(const lds_index *idx, uint64_t row);

/**
 * Converts `row` to float32 into `out[0, dim)`: f16 and bf16 exactly (format.md
 * §3.1), i8 as i8 * scale. LDS_E_INVALID_ARG if `row` is out of range, `out` is
 * NULL or `out_len` < dim (elements); `out` is untouched then.
 */
LDS_API lds_status lds_index_row_f32(const lds_index *idx, uint64_t row, float *out,
                                     size_t out_len);

/** Writes the id of `row` to `*id`. LDS_E_UNSUPPORTED if the index has no ids,
    LDS_E_INVALID_ARG if `row` is out of range or `id` is NULL. */
LDS_API lds_status lds_index_id(const lds_index *idx, uint64_t row, uint64_t *id);

/**
 * The whole ids section: rows ids of 8 bytes each, little-endian u64, row order
 * (format.md §3.2), borrowed from the index (valid until lds_index_free). Aligned
 * only as far as the payload was: load with memcpy. NULL if the index has no ids
 * or `idx` is NULL. Lets a binding view every id at once without a copy.
 */
LDS_API const void *lds_index_ids(const lds_index *idx);

/**
 * Points `*key` at the key bytes of `row` and sets `*len` (bytes). The bytes
 * are valid UTF-8, borrowed from the index, and not NUL-terminated.
 * LDS_E_UNSUPPORTED if the index has no keys, LDS_E_INVALID_ARG if `row` is
 * out of range or an out-pointer is NULL.
 */
LDS_API lds_status lds_index_key(const lds_index *idx, uint64_t row, const char **key, size_t *len);

/**
 * Finds the row whose key is `key[0, len)` (bytes, no terminator needed). When
 * keys are not unique the lowest such row is returned.
 * The key table is built by the first call (or by lds_index_check_keys;
 * thread-safe: concurrent first callers wait for one builder), which also
 * checks K7: one keyed hash per key (two multiplies for keys of up to 16
 * bytes, XXH3 with a per-process secret above; ADR 0010) and one 8-byte slot
 * (row and a hash tag) per table entry, with a power-of-two table of at least
 * 2 x rows entries (16 to 32 bytes per row), freed with the index. For
 * example, the 341,479 GloVe words take an 8 MiB table and about 5 ms, most of
 * it cache misses into the table. A generation a live index swaps in has its
 * table already when the one it replaces had built one (the reloader builds or
 * copies it before the swap; lodestar_live.h). A lookup is one hash plus an expected O(1)
 * probes whatever the keys (they cannot be chosen to collide: the hash key is
 * drawn per process); a probe reads another key only when its tag matches.
 * LDS_E_NOT_FOUND if absent, LDS_E_UNSUPPORTED if the index has no keys,
 * LDS_E_DUP_KEY (every call) if the index declares unique keys but a key
 * repeats (lds_index_check_keys says which), LDS_E_NOMEM if the table cannot
 * be built (a later call tries again), LDS_E_INVALID_ARG for NULL `row` or
 * NULL `key` with len > 0. Thread-safe.
 */
LDS_API lds_status lds_index_find_key(const lds_index *idx, const char *key, size_t len,
                                      uint64_t *row);

/**
 * Checks what the load leaves to the key table: that no key repeats when the
 * index declares its keys unique (format.md K7), building the table of
 * lds_index_find_key if no lookup has yet. Returns LDS_OK (also for an index
 * without keys, or whose keys are not declared unique), LDS_E_DUP_KEY with
 * `err` naming field "keys.bytes" and the file offset of the first repeat (in
 * row order) and both rows, LDS_E_NOMEM, or LDS_E_INVALID_ARG for a NULL
 * index. Thread-safe; the result is the same on every call.
 */
LDS_API lds_status lds_index_check_keys(const lds_index *idx, lds_error *err);

/**
 * Finds the row whose id is `id` (the lowest such row if ids repeat).
 * The id table is built lazily by the first call (thread-safe: concurrent
 * first callers wait for one builder): O(rows) time once, and one 8-byte slot
 * per entry in a power-of-two table of at least 2 x rows entries (16 to 32
 * bytes per row), freed with the index. Later lookups are expected O(1).
 * LDS_E_NOT_FOUND if absent, LDS_E_UNSUPPORTED if the index has no ids,
 * LDS_E_NOMEM if the table cannot be built, LDS_E_INVALID_ARG for NULL `row`.
 */
LDS_API lds_status lds_index_find_id(const lds_index *idx, uint64_t id, uint64_t *row);

/** Number of metadata entries (format.md §3.4). */
LDS_API size_t lds_index_meta_count(const lds_index *idx);

/**
 * Entry `i` (file order) as NUL-terminated UTF-8 strings owned by the index.
 * LDS_E_NOT_FOUND if i >= lds_index_meta_count, LDS_E_INVALID_ARG for NULL out-pointers.
 */
LDS_API lds_status lds_index_meta_at(const lds_index *idx, size_t i, const char **key,
                                     const char **value);

/** The value of metadata `key` (NUL-terminated, owned by the index), or NULL if absent. */
LDS_API const char *lds_index_meta(const lds_index *idx, const char *key);

/** One search result: a row and its score under the index's metric. */
typedef struct lds_hit {
    uint64_t row;
    float score;
} lds_hit;

/**
 * Exact top-k by brute force over every row, under the index's metric:
 * cosine: dot(q, r) / (|q| |r|) (0 for a zero row), higher first;
 * dot: dot(q, r), higher first; l2: squared Euclidean distance, lower first.
 *
 * Accuracy. Rows are read straight from the payload by a kernel chosen once
 * for the CPU (AVX-512 F/BW/VL with VNNI and BF16, with VNNI, without it,
 * AVX2 + FMA + F16C, or portable C; ADR 0032, ADR 0043, ADR 0056),
 * each element converted exactly as lds_index_row_f32 does (i8: i8 x scale),
 * and every (query, row) pair summed in float32 as one sequential chain over
 * the dimension, d = 0, 1, ..., dim - 1 (a multiply-add per element, fused on
 * AVX2 and AVX-512). With u = 2^-24, g(n) = n u / (1 - n u) and the exact sums
 * taken over the float32 values of q and r, whenever no partial sum overflows:
 * - dot:    |score - dot(q, r)|      <= g(dim) sum_i |q_i r_i|
 * - l2:     |score - |q - r|^2|      <= g(dim + 2) |q - r|^2
 * - cosine: |score - cos(q, r)|      <= g(dim + 3)   (absolute; |cos| <= 1)
 * Under cosine no sum overflows: the unit query is scaled by a power of two,
 * 2^-s, so that the longest finite row's sum stays below 2^126, and each row's
 * 1 / |r| (in double) by 2^s: a row longer than float32's range (3e38s) has a
 * finite cosine through every kernel and dtype; s is 0 for rows that fit.
 * For dim = 100 the cosine bound is about 103 u = 6.1e-6; for dim = 768, about
 * 4.6e-5 (worst cases: a chain's typical error grows as sqrt(dim) u; tests/
 * test_format.c checks these against a double-precision reference through
 * every kernel the CPU runs). Every pair is computed in that one order, so a
 * row's score does not depend on the call (single, batch), the batch size,
 * the thread count or the row's place; the two fused kernels (AVX2, AVX-512)
 * give the same bits, the portable one may differ from them in the last bits.
 * i8 indexes under dot and cosine take a native integer path instead (ADR
 * 0043): the query (under cosine, each element times 1 / sqrt(sum_d q_d^2),
 * both computed in double, rounded to float32) is quantized to int16 in double
 * arithmetic: qscale = (double)max_d |q_d| / Qmax, one division in double of
 * the largest float32 |q_d| (0 for a zero query), and Q_d = (double)q_d /
 * qscale rounded to nearest, ties to even, clamped to [-Qmax, Qmax], with
 * Qmax = min(32767, floor((2^31 - 1) / (128 dim))) (every partial sum fits
 * int32: 32767 up to dim 512, 16,777 at dim 1000, 255 at dim 65,536);
 * S = sum_d Q_d R_d over the stored integers R
 * is exact (int32 lanes, any order), and the score is
 * (float)((double)S * ((double)qscale * i8_scale)), under cosine
 * (float)(((double)S * ((double)qscale * i8_scale)) * (1 / |r|)), each
 * product rounded in double. Against the exact sums over q and r_d =
 * (float)(R_d x i8_scale):
 * - dot:    |score - dot(q, r)|      <= (qscale / 2) sum_i |r_i| + 2^-22 sum_i |q_i r_i|
 * - cosine: |score - cos(q, r)|      <= (qscale / 2) sum_i |r_i| / |r| + 2^-21
 *   (<= sqrt(dim) / (2 Qmax) + 2^-21: 1.5e-4 at dim 100 in the worst case, the
 *   query's rounding; the rows' own i8 rounding, 1/254 of a unit row's
 *   largest element with the default scale, is far larger).
 * Every kernel and every path gives the same bits for these scores. i8 under
 * l2 keeps the float32 chain above.
 * bf16 indexes under dot and cosine take vdpbf16ps's arithmetic instead (ADR
 * 0056): the query (under cosine, scaled to unit length in float32 first) is
 * rounded to bf16, to nearest, ties to even; then for each pair of elements
 * (2p, 2p + 1), p = 0, 1, ..., the odd one first, acc = acc + q_d r_d with
 * one rounding (FMA), denormal inputs read as zero and a result below 2^-126
 * after rounding flushed to zero (an odd dim adds a zero element 2p + 1 last);
 * cosine then multiplies by 1 / |r| in double and rounds to float once, and
 * a NaN score is the default NaN. Against the exact sums over the float32 q
 * (unit length under cosine) and the stored r, with n = dim + 1:
 * - dot:    |score - dot(q, r)|   <= (2^-8 + g(n) (1 + 2^-8)) sum_i |q_i r_i| + n 2^-126
 * - cosine: |score - cos(q, r)|   <= 2^-8 + g(n + 3) (1 + 2^-8) + n 2^-126 / |r|
 *   (2^-8, the query's rounding, is 3.9e-3: the rows' own bf16 rounding is as
 *   large; recall@10 on 20,000 GloVe rows moved from 0.9979 to 0.9975).
 * The AVX512_BF16 kernel runs vdpbf16ps; the others compute the same steps
 * (a multiply-add chain where no element is a denormal, infinite, NaN, below
 * 2^-50 or at or above 2^61, the steps one by one otherwise) and give the same
 * bits. bf16 under l2 keeps the float32 chain above.
 * Rows are ranked by the float `score`: rows whose exact scores differ but
 * round to the same float tie, and ties keep the lower row first. A NaN score
 * (a row holding NaN, or an infinite row under cosine) ranks after every
 * number.
 *
 * Cosine needs every row's norm: the first cosine search of an index computes
 * them (in double, one pass over the rows, about as long as one search) and
 * keeps 1 / |row| in 8 bytes per row until lds_index_free; concurrent first
 * searches wait for one builder.
 *
 * `query` holds `dim` floats (any alignment), which must equal the index's
 * dim; `hits` has room for k entries; `*n_hits` receives min(k, rows), hits
 * ordered best first. This is lds_index_search_batch with nq = 1 and default
 * options: it uses threads when the index is large enough to gain from them.
 * Cost: O(rows x dim) time, O(k x threads + dim) extra memory.
 * Returns LDS_OK; LDS_E_INVALID_ARG (NULL pointers, dim mismatch); LDS_E_BAD_VALUE
 * (a non-finite query element, or a zero query under cosine); LDS_E_NOMEM.
 * k = 0 gives *n_hits = 0. Thread-safe.
 */
LDS_API lds_status lds_index_search(const lds_index *idx, const float *query, size_t dim, size_t k,
                                    lds_hit *hits, size_t *n_hits, lds_error *err);

/**
 * Options of lds_index_search_batch (size rule: "Struct sizes" in lodestar.h).
 * - size: sizeof(lds_search_options), from LDS_SEARCH_OPTIONS_MIN_SIZE.
 * - threads: the most threads to scan with; 0 (the default) means one per
 *   online core, each given at least 2^23 (8 Mi) row-elements x queries of a
 *   query chunk of up to 256 (GloVe's 341,479 x 100 gets 4 threads for one query); an
 *   explicit count is also capped, at 65,536 per thread, and by rows / 4.
 *   Threads are started per call (ADR 0015). Results are identical for
 *   every thread count.
 * - kernel: NULL or "" (the default) for the automatic choice; else the name
 *   of a kernel this CPU runs (lds_search_kernels), for benchmarks and tests.
 *   Added in 0.1.0's second layout: a caller with the first layout (size
 *   without this field) gets the automatic choice.
 */
typedef struct lds_search_options {
    size_t size;
    unsigned threads;
    const char *kernel;
} lds_search_options;

/** Smallest lds_search_options.size accepted (the first shipped layout: size, threads). */
#define LDS_SEARCH_OPTIONS_MIN_SIZE (offsetof(lds_search_options, threads) + sizeof(unsigned))

/** Fills `opts` with the defaults (size included; threads 0). NULL is a no-op. */
LDS_API void lds_search_options_default(lds_search_options *opts);

/**
 * Exact top-k for each of `nq` queries in one pass over the rows, with the
 * scores, ranking and accuracy of lds_index_search: hits[j * k, j * k +
 * n_hits[j]) are query j's, exactly what lds_index_search gives for it.
 * - queries: nq x dim floats, row-major (any alignment); dim must equal the
 *   index's dim.
 * - hits: room for nq x k entries, row-major; query j's start at j * k.
 * - n_hits: nq entries, each set to min(k, rows).
 * - opts: NULL for the defaults (lds_search_options_default).
 * The rows are scanned in blocks of 64, each packed transposed (as f32; i8
 * under dot and cosine as int16 pairs) and
 * scored against up to 256 queries (at most 128 KiB of them) while it is in
 * cache, by register tiles of queries x rows (ADR 0032); a score reaches its
 * query's top-k heap only when it beats the heap's worst (no nq x rows score
 * matrix). Threads split the rows; their heaps are merged under the strict
 * order (NaN last, score, row), so the result does not depend on the split.
 * Cost: O(nq x rows x dim) time, O(threads x (min(nq, 256) x (k + 65) + 64 x
 * (dim + 4)) + nq x dim) extra memory.
 * Returns LDS_OK (nq = 0 writes nothing); LDS_E_INVALID_ARG (NULL `idx`, NULL
 * `queries`, `n_hits` or, with k > 0, `hits` when nq > 0; dim mismatch; nq x k
 * or nq x dim overflowing; a bad opts->size, field "lds_search_options.size");
 * LDS_E_BAD_VALUE (a non-finite element, or a zero query under cosine: the
 * message names the query and element); LDS_E_NOMEM. Nothing is written to
 * hits or n_hits on failure. Thread-safe.
 */
LDS_API lds_status lds_index_search_batch(const lds_index *idx, const float *queries, size_t nq,
                                          size_t dim, size_t k, const lds_search_options *opts,
                                          lds_hit *hits, size_t *n_hits, lds_error *err);

/**
 * The search kernels this CPU runs, in the order "avx512bf16", "avx512vnni",
 * "avx512", "avx2", "generic", each where it is built and the CPU supports it.
 * Unless LDS_SEARCH_KERNEL or lds_search_options.kernel names one, searches use
 * the fastest of the SIMD ones in a probe timed once per process at its first
 * search (about 2 ms), chosen apart for i8 under dot and cosine, for bf16 under
 * dot and cosine, and for every other search (ADR 0054, ADR 0056); every SIMD
 * kernel gives the same bits ("avx512vnni" is "avx512" with vpdpwssd for i8,
 * ADR 0043; "avx512bf16" is "avx512vnni" with vdpbf16ps for bf16 under dot and
 * cosine, which the others emulate bit for bit, ADR 0056). Writes up to `cap` static names to `names` (NULL with
 * cap 0 to count) and returns how many there are. Thread-safe.
 */
LDS_API size_t lds_search_kernels(const char **names, size_t cap);

/* ==== element conversions ================================================ */

/** IEEE binary16 bits to float, exactly (subnormals, infinities, NaN payloads kept). */
LDS_API float lds_f16_to_f32(uint16_t h);
/** float to IEEE binary16 bits, round to nearest, ties to even; overflow gives
    infinity (the writer refuses such values instead), NaN stays a quiet NaN. */
LDS_API uint16_t lds_f32_to_f16(float f);
/** bfloat16 bits to float, exactly. */
LDS_API float lds_bf16_to_f32(uint16_t b);
/** float to bfloat16 bits, round to nearest, ties to even; NaN stays a quiet NaN. */
LDS_API uint16_t lds_f32_to_bf16(float f);

/* ==== writing ============================================================ */

/** A writer that streams rows into a new index. Opaque; one thread at a time. */
typedef struct lds_writer lds_writer;

/**
 * Options of the writer. Initialize with lds_writer_options_default.
 * - size: sizeof(lds_writer_options), set by the default function. Any size
 *   outside [LDS_WRITER_OPTIONS_MIN_SIZE, sizeof] is LDS_E_INVALID_ARG naming
 *   "lds_writer_options.size" (rule: "Struct sizes" in lodestar.h).
 * - dim: elements per row, 1 .. LDS_DEFAULT_MAX_DIM. Required (default 0 is refused).
 * - dtype: stored element type; default LDS_DTYPE_F32. For LDS_DTYPE_F16
 *   and LDS_DTYPE_BF16 a finite value that would round to infinity (|x| >=
 *   65520 for f16, beyond about 3.39e38 for bf16) is refused by add_row
 *   (LDS_E_BAD_VALUE), never stored as infinity (format.md §3.1).
 * - metric: default LDS_METRIC_COSINE; written to the table and as metadata "metric".
 * - normalize: L2-normalize each row before storing it; sets the normalized
 *   flag and metadata normalized=true. A row whose norm is zero is refused by
 *   add_row (LDS_E_BAD_VALUE), since it cannot be made unit length.
 * - with_ids: every row carries a u64 id (add_row's `id`).
 * - with_keys: every row carries a UTF-8 key (add_row's `key`).
 * - unique_keys: with_keys only: add_row refuses a repeated key (LDS_E_DUP_KEY)
 *   and the file declares its keys unique.
 * - i8_scale: LDS_DTYPE_I8 only: stored = round-half-even(x / scale), so the
 *   representable range is [-127 * scale, 127 * scale]; a value whose quotient
 *   rounds beyond +-127 is refused by add_row (LDS_E_BAD_VALUE), never clamped.
 *   Must be finite and > 0; default 1/127 (range [-1, 1], which holds every
 *   normalized row). To pick one: max |x| / 127 over all rows (format.md §3.1).
 * - chunk_bytes: 0 (the default): format 1.1 with LDS_DEFAULT_FILE_CHUNK_BYTES
 *   chunks; a power of two in [LDS_MIN_CHUNK_BYTES, LDS_MAX_CHUNK_BYTES]: 1.1
 *   with that chunk size; LDS_CHUNKS_NONE: format 1.0 (one payload checksum).
 *   A writer whose output cannot seek back (a pipe) writes 1.0 whatever this
 *   says, since a 1.1 header names the chunk table's hash (format.md §2.5).
 *   Added after i8_scale: an older, shorter struct gets the default.
 * - layout: where the sections after the vectors start (format.md §4.4, ADR 0052).
 *   LDS_LAYOUT_AUTO (0, the default): on chunk boundaries (format 1.2) when the file is
 *   chunked and its vectors section is at least LDS_LAYOUT_AUTO_MIN_CHUNKS chunks long,
 *   else packed; LDS_LAYOUT_PACKED: at multiples of 64 (format 1.1 or 1.0);
 *   LDS_LAYOUT_CHUNK_ALIGNED: on chunk boundaries whatever the size, except that
 *   lds_writer_finish refuses it (LDS_E_INVALID_ARG naming "lds_writer_options.layout",
 *   nothing written at the path) when chunks are over 16 MiB and the vectors shorter
 *   than one: the padding would be up to four such chunks of zeros around a smaller
 *   payload. Without a chunk
 *   table (chunk_bytes LDS_CHUNKS_NONE, or an output that cannot seek back) the
 *   layout is packed whatever this says. Any other value is LDS_E_INVALID_ARG naming
 *   "lds_writer_options.layout". Added after chunk_bytes.
 */
typedef enum lds_layout {
    LDS_LAYOUT_AUTO = 0,
    LDS_LAYOUT_PACKED = 1,
    LDS_LAYOUT_CHUNK_ALIGNED = 2
} lds_layout;

/** LDS_LAYOUT_AUTO aligns sections to chunks when the vectors fill at least this many
    chunks (1 MiB at 4 KiB chunks): the padding, at most 4 chunks, is then at most 1.6%
    of the payload (ADR 0052). */
#define LDS_LAYOUT_AUTO_MIN_CHUNKS 256u

typedef struct lds_writer_options {
    size_t size;
    uint32_t dim;
    lds_dtype dtype;
    lds_metric metric;
    bool normalize;
    bool with_ids;
    bool with_keys;
    bool unique_keys;
    float i8_scale;
    uint32_t chunk_bytes;
    lds_layout layout;
} lds_writer_options;

/** Smallest lds_writer_options.size accepted (see "Struct sizes" in lodestar.h): the
    struct before chunk_bytes. */
#define LDS_WRITER_OPTIONS_MIN_SIZE (offsetof(lds_writer_options, i8_scale) + sizeof(float))

/** Fills `o` with the defaults described at lds_writer_options. NULL is ignored. */
LDS_API void lds_writer_options_default(lds_writer_options *o);

/**
 * Opens a writer to `path`, atomically: bytes go to a new temporary file in the
 * same directory, named ".NAME.lds-tmp-PID-XXXXXX" for a `path` whose last
 * component is NAME, PID the writing process's id in decimal and XXXXXX six
 * random characters [a-z0-9] (hidden, recognisable by the ".lds-tmp-" infix,
 * and the PID says which process wrote it; docs/adr/0034);
 * lds_writer_finish fsyncs it, renames it over `path` and fsyncs the
 * directory. A writer freed before finishing, or a failed one, removes the
 * temporary file; a process killed or crashing mid-write leaves any existing
 * file at `path` untouched but cannot remove its temporary file: such a
 * ".NAME.lds-tmp-PID-XXXXXX" may be deleted once no writer to NAME is running.
 * The library never deletes another writer's temporary file.
 *
 * What may be at `path`: nothing, or a regular file (replaced at finish). A
 * symbolic link is written through, as most programs that save files do: the
 * link is resolved (realpath) once, here, and the temporary file is made in
 * the target's directory and renamed over the target, so the link stays and
 * points at the new index; a link whose target is missing, or is not a regular
 * file, is refused. Anything else (a directory, a device such as /dev/null, a
 * FIFO, a socket) is refused with LDS_E_INVALID_ARG naming the path and its
 * type, before any file is created. To write to a device or a pipe, open it
 * and use lds_writer_open_fd. (The check and the rename are not one atomic
 * step: a file put at `path` in between is replaced.)
 *
 * Returns LDS_OK, LDS_E_INVALID_ARG (NULL argument, bad options, `path` not
 * a regular file or a link to one), LDS_E_IO (sys_errno set), LDS_E_NOMEM;
 * `*out` is NULL on failure (unless `out` itself is NULL). Every argument is
 * checked before any side effect: a refused call creates no file.
 */
LDS_API lds_status lds_writer_open_path(const char *path, const lds_writer_options *opts,
                                        lds_writer **out, lds_error *err);

/**
 * Opens a writer to the file descriptor `fd`, which stays owned by the caller
 * (never closed). If `fd` is seekable (lseek works and O_APPEND is not set) the
 * header is rewritten at finish with the real payload length; otherwise (a
 * pipe, a socket) the header declares LDS_LENGTH_UNKNOWN. The file is written
 * from the fd's current position. The 64-byte header (declaring
 * LDS_LENGTH_UNKNOWN) is written here, at once, so an fd that cannot be
 * written (read-only, closed) is LDS_E_IO naming the fd, with sys_errno set.
 * Statuses as lds_writer_open_path.
 */
LDS_API lds_status lds_writer_open_fd(int fd, const lds_writer_options *opts, lds_writer **out,
                                      lds_error *err);

/**
 * Opens a writer to the stdio stream `f`, which stays owned by the caller
 * (never closed; flushed at finish). If ftello/fseeko work on it, the header is
 * rewritten at finish with the real length, else it declares LDS_LENGTH_UNKNOWN.
 * The header is written and fflush'ed here, so a stream that cannot be written
 * is LDS_E_IO at once. Statuses as lds_writer_open_path.
 */
LDS_API lds_status lds_writer_open_file(FILE *f, const lds_writer_options *opts, lds_writer **out,
                                        lds_error *err);

/**
 * Appends one row: `vec` holds `dim` finite floats (dim must equal the
 * writer's). `id` is used when with_ids, else ignored. `key[0, key_len)` is
 * used when with_keys (valid UTF-8, at most LDS_DEFAULT_MAX_KEY_BYTES bytes,
 * no terminator needed), else ignored. The row's vector is encoded and
 * buffered (in the writer's 64 KiB buffer for path and fd outputs, in the
 * stream's own buffer for a FILE*) and reaches the output whenever the buffer
 * fills; the id and key are kept in memory until finish. So an output error
 * may surface as LDS_E_IO from a later add_row or from finish.
 * Returns LDS_OK; LDS_E_INVALID_ARG (NULL vec, dim mismatch, NULL key with
 * key_len > 0); LDS_E_BAD_VALUE (a NaN or infinite element; for LDS_DTYPE_I8
 * an element, after normalization when on, outside +-127 * i8_scale: the
 * message names the row, the key, the element, the value and the scale;
 * field "i8_scale"; for LDS_DTYPE_F16 / LDS_DTYPE_BF16 an element that would
 * round to infinity: the message names the row, the key, the element, the
 * value and the dtype, field "dtype"; with normalize, an all-zero row: field
 * "normalize");
 * LDS_E_BAD_UTF8;
 * LDS_E_LIMIT (key too long, too many rows); LDS_E_DUP_KEY (unique_keys);
 * LDS_E_IO; LDS_E_NOMEM; LDS_E_STATE (finished, or an earlier I/O failure).
 * A refused row is not added, and the writer stays usable unless the status
 * is LDS_E_IO or LDS_E_NOMEM.
 */
LDS_API lds_status lds_writer_add_row(lds_writer *w, const float *vec, size_t dim, uint64_t id,
                                      const char *key, size_t key_len, lds_error *err);

/**
 * Sets metadata `key` to `value` (NUL-terminated UTF-8; a repeated key replaces
 * its value, keeping its place). "metric" and "normalized" are written from
 * the options and refused here (LDS_E_INVALID_ARG). Known keys: "model",
 * "source" (format.md §3.4). Returns LDS_OK; LDS_E_INVALID_ARG (NULL or empty
 * key); LDS_E_BAD_UTF8; LDS_E_LIMIT (metadata above LDS_DEFAULT_MAX_METADATA_BYTES);
 * LDS_E_NOMEM; LDS_E_STATE.
 */
LDS_API lds_status lds_writer_set_meta(lds_writer *w, const char *key, const char *value,
                                       lds_error *err);

/** Rows added so far; 0 for NULL. */
LDS_API uint64_t lds_writer_rows(const lds_writer *w);

/**
 * Writes the ids, keys, metadata, section table, footer and checksum, and, when
 * the output is seekable and chunk_bytes asks for format 1.1, the chunk table
 * (format.md §2.5); rewrites the header when the output is seekable, flushes, and for a path writer
 * fsyncs, renames and fsyncs the directory. Returns LDS_OK, LDS_E_IO,
 * LDS_E_NOMEM or LDS_E_STATE (already finished or failed). After it the writer
 * accepts only lds_writer_free.
 */
LDS_API lds_status lds_writer_finish(lds_writer *w, lds_error *err);

/**
 * Frees the writer. NULL is ok. If it was not finished, the output is
 * discarded: a path writer removes its temporary file (nothing appears at
 * `path`). An fd or FILE* output is left holding a partial stream that no
 * loader accepts: the 64-byte header declaring LDS_LENGTH_UNKNOWN (written by
 * open), then whatever row bytes had already left the writer's buffer (for a
 * FILE*, they may still sit in the stream's buffer until the caller flushes
 * it); rows still in the writer's buffer are dropped, and no ids, keys,
 * table, footer or checksum are written. With fewer than 64 KiB of rows that
 * is exactly the header (loading it is LDS_E_TRUNCATED). The fd or FILE* is
 * not closed, rewound or truncated.
 */
LDS_API void lds_writer_free(lds_writer *w);

#ifdef __cplusplus
}
#endif

#endif /* LODESTAR_INDEX_H */
