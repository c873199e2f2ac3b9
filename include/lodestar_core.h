/*
 * lodestar_core.h: what every part of lodestar shares: the export macro, the
 * version, the status codes, the error detail, the element types and metrics,
 * and the parser limits. The parser (format/) depends on this header and on
 * lodestar_index.h only, never on the pool's or the loader's header
 * (docs/design.md, "The parts"; tests/check_includes.py checks it).
 *
 * Users include lodestar.h, which includes this header and every sibling; the
 * conventions below hold for all of them.
 *
 * Conventions: every fallible call returns an lds_status and writes results
 * through out-parameters; an optional lds_error receives the detail. Borrowing
 * is the default; a function that takes ownership says so. Every *_free
 * accepts NULL. All multi-byte integers on disk are little-endian. The format
 * itself is specified in docs/format.md.
 *
 * Struct sizes (the one rule for every public struct that starts with
 * `size_t size`: lds_error, lds_limits, lds_parse_options, lds_writer_options,
 * lds_load_options, lds_load_info, lds_import_options, lds_import_result,
 * lds_live_options, lds_live_stats):
 * the caller sets `size` to sizeof the struct it was compiled with (the
 * matching _default or _init function does). The library accepts any size
 * from LDS_<STRUCT>_MIN_SIZE (the struct as this library first shipped it,
 * never less than `size` plus the first field) up to its current sizeof. An
 * older, smaller size is accepted: input fields past it take their defaults
 * and output fields past it are not written. A size below the minimum or
 * above sizeof (garbage, or a newer header than the library) is
 * LDS_E_INVALID_ARG with a message naming the struct (field "<name>.size"),
 * never silently replaced by the defaults. lds_error is the one exception in
 * effect: a refusal cannot be described in the struct meant to describe it,
 * so an lds_error whose size is out of range is simply never written (the
 * call still returns its status).
 */
#ifndef LODESTAR_CORE_H
#define LODESTAR_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LDS_BUILDING_LIBRARY) && defined(__GNUC__)
#define LDS_API __attribute__((visibility("default")))
#else
#define LDS_API
#endif

/* ==== version ============================================================ */

#define LDS_VERSION_MAJOR  0
#define LDS_VERSION_MINOR  1
#define LDS_VERSION_PATCH  0
#define LDS_VERSION_STRING "0.1.0"

/** The library's version as "MAJOR.MINOR.PATCH"; a static string. */
LDS_API const char *lds_version(void);

/* ==== status codes ======================================================= */

/*
 * One list generates the enum, lds_strerror() and lds_status_name().
 * The numeric values are pinned: never renumber or reuse one.
 */
#define LDS_STATUS_LIST(X)                                                                         \
    X(OK, 0, "success")                                                                            \
    X(E_INVALID_ARG, 1, "invalid argument")                                                        \
    X(E_NOMEM, 2, "out of memory")                                                                 \
    X(E_IO, 3, "input/output error")                                                               \
    X(E_BAD_MAGIC, 4, "not a lodestar index (bad magic)")                                          \
    X(E_VERSION, 5, "unsupported format major version")                                            \
    X(E_HEADER_CHECK, 6, "header check value mismatch")                                            \
    X(E_TRUNCATED, 7, "input ended before the declared length")                                    \
    X(E_TRAILING, 8, "bytes after the end of the payload")                                         \
    X(E_BAD_SECTION, 9, "invalid section table")                                                   \
    X(E_CHECKSUM, 10, "payload checksum mismatch")                                                 \
    X(E_LIMIT, 11, "a configured limit was exceeded")                                              \
    X(E_OVERFLOW, 12, "declared sizes overflow")                                                   \
    X(E_BAD_UTF8, 13, "key is not valid UTF-8")                                                    \
    X(E_DUP_KEY, 14, "duplicate key")                                                              \
    X(E_BAD_VALUE, 15, "invalid field value")                                                      \
    X(E_LENGTH_MISMATCH, 16, "declared length disagrees with the transport")                       \
    X(E_ZSTD, 17, "zstd decompression error")                                                      \
    X(E_CANCELLED, 18, "cancelled")                                                                \
    X(E_NOT_FOUND, 19, "not found")                                                                \
    X(E_PARSE, 20, "malformed input")                                                              \
    X(E_POOL_REFUSED, 21, "the pool refused the return")                                           \
    X(E_UNSUPPORTED, 22, "unsupported operation")                                                  \
    X(E_STATE, 23, "call not valid in the object's current state")                                 \
    X(E_TIMEOUT, 24, "the deadline passed")

typedef enum lds_status {
#define LDS__STATUS_ENUM(name, value, text) LDS_##name = value,
    LDS_STATUS_LIST(LDS__STATUS_ENUM)
#undef LDS__STATUS_ENUM
} lds_status;

/** A sentence describing `status`; a static string, never NULL. */
LDS_API const char *lds_strerror(lds_status status);

/** The status's name without prefix, e.g. "E_TRUNCATED"; static, never NULL. */
LDS_API const char *lds_status_name(lds_status status);

/* ==== error detail ======================================================= */

/**
 * Detail of a refusal. Every fallible call accepts an optional `lds_error *`
 * (NULL to ignore). Before use, the caller sets `size = sizeof(lds_error)`
 * (lds_error_init does it); the library writes only the fields that fit
 * (size rule: "Struct sizes" at the top of this header).
 *
 * On success the struct is left untouched. On failure:
 * - status:  the same status the call returned;
 * - field:   a static string naming the field at fault ("header.magic",
 *            "section[2].offset", "row 17", ...) or NULL;
 * - offset:  byte offset of that field from the start of the file or stream
 *            (importers: of the offending token, line or row);
 * - line:    1-based line (text input) or record number, row + 1 (binary
 *            input), 0 if not applicable; messages themselves count lines
 *            from 1 and rows and elements from 0 (docs/cli.md, "Numbering");
 * - sys_errno: errno of a failed system call, else 0;
 * - zstd_error: zstd's error name (ZSTD_getErrorName) or NULL;
 * - message: a human sentence naming the field and, when there is one, ending
 *            " (at byte OFFSET)" with the same OFFSET as `offset` (one byte
 *            offset per message). Always NUL-terminated within the bytes that
 *            `size` covers, even when `size` ends inside the array; text that
 *            does not fit is cut and marked "..." before that ending.
 */
typedef struct lds_error {
    size_t size;
    lds_status status;
    const char *field;
    uint64_t offset;
    uint64_t line;
    int sys_errno;
    const char *zstd_error;
    char message[256];
} lds_error;

/** Smallest lds_error.size accepted (size and status); see "Struct sizes" above. */
#define LDS_ERROR_MIN_SIZE offsetof(lds_error, field)

/** Sets `err->size` and clears the rest. `err` may be NULL. */
LDS_API void lds_error_init(lds_error *err);

/* ==== element types and metrics ========================================= */

/** Element type of the stored vectors. Values are the on-disk codes. */
typedef enum lds_dtype {
    LDS_DTYPE_F32 = 1,  /* IEEE 754 binary32, little-endian */
    LDS_DTYPE_F16 = 2,  /* IEEE 754 binary16, little-endian */
    LDS_DTYPE_BF16 = 3, /* bfloat16: the high 16 bits of a binary32, little-endian */
    LDS_DTYPE_I8 = 4    /* signed 8-bit; value = i8 * scale (see docs/format.md) */
} lds_dtype;

/** Similarity metric the index is meant to be searched with. On-disk codes. */
typedef enum lds_metric {
    LDS_METRIC_COSINE = 1, /* higher is nearer */
    LDS_METRIC_DOT = 2,    /* higher is nearer */
    LDS_METRIC_L2 = 3      /* squared Euclidean distance; lower is nearer */
} lds_metric;

/** Bytes per element of `dtype`, or 0 for an unknown code. */
LDS_API size_t lds_dtype_size(lds_dtype dtype);
/** "f32", "f16", "bf16", "i8", or NULL for an unknown code. */
LDS_API const char *lds_dtype_name(lds_dtype dtype);
/** Parses a dtype name as printed by lds_dtype_name. LDS_E_BAD_VALUE if unknown,
    LDS_E_INVALID_ARG if `name` or `out` is NULL; `*out` is unchanged on failure. */
LDS_API lds_status lds_dtype_from_name(const char *name, lds_dtype *out);
/** "cosine", "dot", "l2", or NULL for an unknown code. */
LDS_API const char *lds_metric_name(lds_metric metric);
/** Parses a metric name as printed by lds_metric_name. LDS_E_BAD_VALUE if unknown,
    LDS_E_INVALID_ARG if `name` or `out` is NULL; `*out` is unchanged on failure. */
LDS_API lds_status lds_metric_from_name(const char *name, lds_metric *out);

/* ==== parser limits ====================================================== */

/**
 * Limits the parser enforces before it trusts any declared size. Every limit
 * is checked before memory is allocated or a pointer is formed; exceeding one
 * is LDS_E_LIMIT naming the field. Start from lds_limits_default(). Where
 * limits sit inside an options struct, their `size` follows "Struct sizes"
 * above: 0 (a hand-built struct) is LDS_E_INVALID_ARG naming "limits.size",
 * never replaced by the defaults, so tightened limits cannot be lost.
 */
typedef struct lds_limits {
    size_t size;                 /* sizeof(lds_limits) */
    uint64_t max_dim;            /* elements per row; default 65,536 */
    uint64_t max_rows;           /* rows; default 2^32 */
    uint64_t max_key_bytes;      /* bytes of one key, without terminator; default 4,096 */
    uint64_t max_metadata_bytes; /* bytes of the whole metadata section; default 1 MiB */
} lds_limits;

#define LDS_DEFAULT_MAX_DIM            UINT64_C(65536)
#define LDS_DEFAULT_MAX_ROWS           (UINT64_C(1) << 32)
#define LDS_DEFAULT_MAX_KEY_BYTES      UINT64_C(4096)
#define LDS_DEFAULT_MAX_METADATA_BYTES (UINT64_C(1) << 20)

/** Smallest lds_limits.size accepted: the whole struct (see "Struct sizes"). */
#define LDS_LIMITS_MIN_SIZE sizeof(lds_limits)

/** Fills `limits` with the defaults above (size included). */
LDS_API void lds_limits_default(lds_limits *limits);

#ifdef __cplusplus
}
#endif

#endif /* LODESTAR_CORE_H */
