/*
 * lodestar_manifest.h: the shard manifest (loader/manifest.c).
 *
 * `lodestar split` writes manifest.json beside the shards it writes: which
 * files hold which rows of the unsplit index, and what each file must be
 * (rows, checksum, payload bytes). This is the one reader of that file: the
 * CLI (`lodestar verify MANIFEST`) and the Python package (open_shards,
 * search_shards, Shards, lodestar.dask) all read manifests through it. The
 * format and every rule it checks (MF1..MF17) are docs/format.md section 9; the
 * limits and why the reader is in C are docs/adr/0033-one-manifest-reader.md.
 *
 *   lds_manifest_read(path or URL) -> lds_manifest (immutable, validated)
 *   lds_manifest_get_info / lds_manifest_get_shard -> plain views of it
 *   lds_manifest_verify: every shard file loaded once, verified, compared
 *   lds_manifest_check_index: one loaded shard compared with its entry
 *
 * Thread safety: a manifest never changes after lds_manifest_read returns;
 * any number of threads may call the getters, lds_manifest_check_index and
 * lds_manifest_verify on it at once. lds_manifest_free must not race with
 * any of them.
 */
#ifndef LODESTAR_MANIFEST_H
#define LODESTAR_MANIFEST_H

#include "lodestar_core.h"
#include "lodestar_index.h"
#include "lodestar_load.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lds_index lds_index;

/** A validated manifest (opaque); free with lds_manifest_free. */
typedef struct lds_manifest lds_manifest;

/** Default of lds_manifest_options.max_bytes: 64 MiB (MF2). */
#define LDS_MANIFEST_MAX_BYTES (UINT64_C(64) << 20)
/** Deepest nesting of JSON arrays and objects accepted (MF2): the manifest
 *  object, "shards", an entry, and room for values of later minor versions. */
#define LDS_MANIFEST_MAX_DEPTH 8
/** Longest JSON number accepted, in characters (MF2): 20 digits hold any
 *  unsigned 64-bit integer; no field of the manifest holds anything else. */
#define LDS_MANIFEST_MAX_NUMBER_CHARS 20
/** Most entries in "shards" (MF7). */
#define LDS_MANIFEST_MAX_SHARDS (1u << 20)
/** Longest shard "file" accepted, bytes (MF9). */
#define LDS_MANIFEST_MAX_FILE_BYTES 4095u
/** lds_manifest_shard.payload_bytes of an entry without "payload_bytes" (MF12). */
#define LDS_MANIFEST_NO_PAYLOAD_BYTES UINT64_MAX

/**
 * Options of lds_manifest_read (NULL = defaults). Start from
 * lds_manifest_options_default(); `size` follows "Struct sizes" in
 * lodestar_core.h (LDS_MANIFEST_OPTIONS_MIN_SIZE..sizeof, else
 * LDS_E_INVALID_ARG, field "manifest_options.size").
 */
typedef struct lds_manifest_options {
    size_t size; /* sizeof(lds_manifest_options) */
    /** Largest manifest accepted, bytes; a longer file or response is
     *  LDS_E_LIMIT (field "manifest", at the first byte past the limit).
     *  0 = LDS_MANIFEST_MAX_BYTES, the default; larger values are used as
     *  given (the whole text is held in memory while it is parsed). */
    uint64_t max_bytes;
    /** For a manifest at an http(s) URL: the options of the transfer (url:
     *  timeouts, CA file, credentials; cancel and callback_ctx), borrowed for
     *  the call. NULL = lds_load_options_default. The payload options
     *  (pool, ownership, mmap...) play no part in reading a manifest. */
    const lds_load_options *load;
} lds_manifest_options;

/** Smallest lds_manifest_options.size accepted: the struct as first shipped. */
#define LDS_MANIFEST_OPTIONS_MIN_SIZE sizeof(lds_manifest_options)

/** Fills `opts` with the defaults documented on each field (size included). */
LDS_API void lds_manifest_options_default(lds_manifest_options *opts);

/**
 * What a manifest says of the whole (lds_manifest_get_info). Set `size`
 * (lds_manifest_info_init does); sizes LDS_MANIFEST_INFO_MIN_SIZE..sizeof.
 */
typedef struct lds_manifest_info {
    size_t size;       /* sizeof(lds_manifest_info) */
    uint32_t version;  /* "version": 1 (MF4) */
    uint32_t dim;      /* "dim": elements per row, >= 1 (MF5) */
    uint64_t rows;     /* "rows": rows of the unsplit index, the shards' sum (MF13) */
    lds_dtype dtype;   /* "dtype" (MF5) */
    lds_metric metric; /* "metric" (MF5) */
    bool has_ids;      /* "has_ids": every shard has ids, or none (MF6) */
    bool has_keys;     /* "has_keys": every shard has keys, or none (MF6) */
    size_t shards;     /* entries in "shards", 1..LDS_MANIFEST_MAX_SHARDS (MF7) */
} lds_manifest_info;

/** Smallest lds_manifest_info.size accepted. */
#define LDS_MANIFEST_INFO_MIN_SIZE sizeof(lds_manifest_info)

/** Sets `info->size` and clears the rest. `info` may be NULL. */
LDS_API void lds_manifest_info_init(lds_manifest_info *info);

/**
 * One entry of "shards" (lds_manifest_get_shard). Set `size`
 * (lds_manifest_shard_init does); sizes LDS_MANIFEST_SHARD_MIN_SIZE..sizeof.
 * The strings belong to the manifest and live until lds_manifest_free.
 */
typedef struct lds_manifest_shard {
    size_t size; /* sizeof(lds_manifest_shard) */
    /** "file" as written: a file name beside the manifest or an http(s) URL
     *  (MF8, MF9); NUL-terminated UTF-8 without control characters. */
    const char *file;
    /** Where the shard is loaded from: "file" resolved against the manifest's
     *  own location (MF10): DIR/file for a manifest read from a path, the
     *  manifest URL's directory with "file" percent-encoded appended for a
     *  manifest read from a URL (its user:password kept, so the shard is
     *  fetched with the manifest's credentials), or "file" itself when it
     *  is a URL. May hold a password: show it through lds_url_redact. */
    const char *location;
    uint64_t first_row;     /* global row of the shard's row 0 (MF11) */
    uint64_t rows;          /* rows in the shard file (MF11) */
    uint64_t payload_bytes; /* the file's payload bytes, or LDS_MANIFEST_NO_PAYLOAD_BYTES (MF12) */
    uint64_t checksum;      /* the file's payload checksum, XXH3-64 (MF12) */
} lds_manifest_shard;

/** Smallest lds_manifest_shard.size accepted. */
#define LDS_MANIFEST_SHARD_MIN_SIZE sizeof(lds_manifest_shard)

/** Sets `shard->size` and clears the rest. `shard` may be NULL. */
LDS_API void lds_manifest_shard_init(lds_manifest_shard *shard);

/**
 * Reads and validates the manifest at `where`: a path, or an http:// or
 * https:// URL fetched as lds_load_url fetches an index (libcurl: the URL's
 * user:password is sent as HTTP authentication, never resolved as a host
 * name; opts->load->url sets timeouts and credentials). The text is read
 * through the loader's byte source, at most opts->max_bytes, and checked
 * against every rule of docs/format.md section 9 (MF1..MF17) before anything
 * is returned; no shard file is opened (see lds_manifest_verify).
 *
 * - where: NUL-terminated; borrowed. Kept in the manifest to resolve "file".
 * - out:   receives the manifest (free with lds_manifest_free); NULL on failure.
 * - err:   optional. field names the rule's field ("format", "version",
 *          "shards[].first_row", ...); the message names the entry by index
 *          (shards[17].rows) and lds_error.line is that index + 1 (0 for
 *          fields of the whole); syntax and limit errors give the byte
 *          offset in the text (lds_error.offset, " (at byte N)"). Names from
 *          the file are shown with control characters escaped (\xNN), and
 *          URLs without user:password.
 *
 * Statuses: LDS_E_INVALID_ARG (NULL where/out, bad opts size), LDS_E_IO
 * (open/read failed, HTTP errors: as lds_load_url), LDS_E_UNSUPPORTED (a URL
 * without libcurl), LDS_E_LIMIT (longer than max_bytes, nesting deeper than
 * LDS_MANIFEST_MAX_DEPTH, a number longer than LDS_MANIFEST_MAX_NUMBER_CHARS,
 * more than LDS_MANIFEST_MAX_SHARDS entries), LDS_E_PARSE (not JSON, not an
 * object, bytes after it), LDS_E_BAD_UTF8, LDS_E_VERSION ("version" not 1),
 * LDS_E_BAD_VALUE (a field missing, of the wrong type or out of its range;
 * rows that do not follow each other), LDS_E_CANCELLED, LDS_E_NOMEM.
 * Thread-safe.
 */
LDS_API lds_status lds_manifest_read(const char *where, const lds_manifest_options *opts,
                                     lds_manifest **out, lds_error *err);

/**
 * As lds_manifest_read, from `n` bytes of manifest text at `text` (borrowed
 * for the call). `where` is the location the text came from (a path or a
 * URL), used only to resolve "file" (MF10) and in messages; NULL means
 * "manifest.json" in the current directory. Statuses as lds_manifest_read
 * without the transport's; LDS_E_LIMIT for `n` above opts->max_bytes.
 */
LDS_API lds_status lds_manifest_parse(const void *text, size_t n, const char *where,
                                      const lds_manifest_options *opts, lds_manifest **out,
                                      lds_error *err);

/** Frees a manifest and its strings. NULL is accepted. */
LDS_API void lds_manifest_free(lds_manifest *m);

/** Fills `info`. LDS_E_INVALID_ARG for NULL or a bad info->size (unchanged then). */
LDS_API lds_status lds_manifest_get_info(const lds_manifest *m, lds_manifest_info *info);

/** Fills `shard` with entry `i` (0-based). LDS_E_INVALID_ARG for NULL, a bad
 *  shard->size or `i` >= the entries (`shard` unchanged then). */
LDS_API lds_status lds_manifest_get_shard(const lds_manifest *m, size_t i,
                                          lds_manifest_shard *shard);

/**
 * Checks a loaded shard against its entry (MF14..MF16): the payload checksum
 * was verified by the load and equals shard->checksum; rows, dim, dtype,
 * metric, ids and keys presence, and payload_bytes (when the entry has it)
 * equal the manifest's. `info` and `shard` need not come from an
 * lds_manifest (a process that received them from elsewhere fills them
 * itself; shard->file may be NULL); `i` is the entry's index, for messages.
 *
 * LDS_OK, or LDS_E_CHECKSUM (field "shards[].checksum": not verified, or a
 * different value) or LDS_E_BAD_VALUE (field "shards[].rows", "dim",
 * "dtype", "metric", "has_ids", "has_keys" or "shards[].payload_bytes"),
 * the message giving the file's value and the manifest's; LDS_E_INVALID_ARG
 * for NULL arguments or bad struct sizes. Reads only; thread-safe.
 */
LDS_API lds_status lds_manifest_check_index(const lds_manifest_info *info,
                                            const lds_manifest_shard *shard, size_t i,
                                            const lds_index *index, lds_error *err);

/**
 * Called by lds_manifest_verify once per entry, in entry order: entry `i`
 * and its outcome (`err` is NULL when `status` is LDS_OK, else the detail,
 * valid during the call only).
 */
typedef void (*lds_manifest_verify_fn)(void *ctx, size_t i, lds_status status,
                                       const lds_error *err);

/**
 * What lds_manifest_verify did (optional). Set `size` (lds_manifest_verify_stats_init
 * does); sizes LDS_MANIFEST_VERIFY_STATS_MIN_SIZE..sizeof.
 */
typedef struct lds_manifest_verify_stats {
    size_t size;           /* sizeof(lds_manifest_verify_stats) */
    uint64_t entries;      /* entries checked */
    uint64_t loads;        /* shard files loaded: one per distinct location (MF17) */
    uint64_t failed;       /* entries whose status was not LDS_OK */
    uint64_t stream_bytes; /* bytes read from the shard files, all loads together */
} lds_manifest_verify_stats;

/** Smallest lds_manifest_verify_stats.size accepted. */
#define LDS_MANIFEST_VERIFY_STATS_MIN_SIZE sizeof(lds_manifest_verify_stats)

/** Sets `stats->size` and clears the rest. `stats` may be NULL. */
LDS_API void lds_manifest_verify_stats_init(lds_manifest_verify_stats *stats);

/**
 * Checks every shard of `m` against the manifest: each distinct location is
 * loaded once (lds_load_path or lds_load_url with `opts`, the checksum
 * verified whatever opts says, not mapped), its repeated keys under
 * KEYS_UNIQUE refused (lds_index_check_keys), and every entry naming it
 * compared as lds_manifest_check_index does (MF17). The work is linear:
 * entries are matched to locations through a keyed hash table, and a shard
 * file referenced by many entries is read once, whatever their number.
 * Entries are visited in order; a location is loaded at its first entry and
 * the index freed at once, keeping only what the entries are compared with
 * (about 64 bytes a location), so one shard is held in memory at a time.
 *
 * - opts: NULL = lds_load_options_default (URL options, cancel, limits).
 * - each: optional, see lds_manifest_verify_fn; `ctx` is passed to it.
 * - stats: optional, see lds_manifest_verify_stats.
 * - err: the first failing entry's detail.
 *
 * Returns LDS_OK when every entry passed; else the first failing entry's
 * status (every entry is still visited): the load's status for a shard that
 * failed to load (LDS_E_IO, LDS_E_CHECKSUM, ...), LDS_E_DUP_KEY, or
 * lds_manifest_check_index's. LDS_E_INVALID_ARG for NULL m or bad sizes,
 * LDS_E_NOMEM, LDS_E_CANCELLED (opts->cancel: stops at once). Thread-safe.
 */
LDS_API lds_status lds_manifest_verify(const lds_manifest *m, const lds_load_options *opts,
                                       lds_manifest_verify_fn each, void *ctx,
                                       lds_manifest_verify_stats *stats, lds_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LODESTAR_MANIFEST_H */
