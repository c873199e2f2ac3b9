/*
 * lodestar_import.h: importers from the formats users already hold.
 *
 * One call, lds_import_file(), reads an embedding file in one of five common
 * formats and writes a lodestar index with the writer of lodestar_index.h.
 * Input is read in fixed-size buffered chunks and rows are handed to the
 * writer one at a time, so the importer's own memory is bounded by one input
 * line (text formats) or one row (binary formats), plus the keys it has seen
 * (to refuse duplicates), never by a size the input declares.
 *
 * Formats (the grammar each accepts is given at lds_import_format):
 *   GloVe text, word2vec text (and fastText .vec), word2vec binary, NumPy .npy
 *   and .npz, and .fvecs; each may be gzip, zstd or xz compressed.
 */
#ifndef LODESTAR_IMPORT_H
#define LODESTAR_IMPORT_H

#include "lodestar_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== importing ========================================================== */

/**
 * Input formats. Every importer keeps the rows in file order, refuses a key
 * seen before (LDS_E_DUP_KEY naming both lines), and refuses any number that
 * is not finite (NaN, infinity, or a decimal that overflows binary32).
 *
 * - LDS_IMPORT_GLOVE: UTF-8 text, one row per line: a key, then D numbers, all
 *   separated by single or repeated spaces or tabs. D is taken from the first
 *   line; every later line must have exactly D numbers. Trailing whitespace
 *   and a CR before the LF are accepted; an empty line is refused except at
 *   the very end of the file. Numbers are C-locale decimal (strtof grammar
 *   without its hexadecimal form; the whole token must be consumed; a NUL
 *   byte is refused by its offset), each rounded once, to nearest, straight to
 *   binary32 (fast_float when the build has it, else strtof_l: the same floats,
 *   docs/adr/0022).
 * - LDS_IMPORT_W2V_TEXT: a first line "N D" (two decimal integers), then
 *   exactly N lines in the GloVe grammar with D numbers each. Fewer lines is
 *   LDS_E_TRUNCATED; a non-blank line after the N-th is LDS_E_TRAILING.
 * - LDS_IMPORT_W2V_BINARY: a first line "N D\n", then N rows, each: the key
 *   (bytes up to a space; leading newlines are skipped), one space, then D
 *   little-endian binary32 values, then an optional newline.
 * - LDS_IMPORT_NPY: NumPy format versions 1.0, 2.0 and 3.0; descr '<f2',
 *   '>f2', '<f4', '>f4', '<f8', '>f8', '|i1', '|u1' (or '<'/'>' for the
 *   one-byte types); float64 is rounded once, to nearest even, straight to the
 *   stored dtype (binary32, binary16, bfloat16 or the i8 grid; with normalize,
 *   to binary32, then the writer rounds after normalising); a float64 that
 *   rounds beyond binary32 is LDS_E_BAD_VALUE. fortran_order True is read
 *   column by column by offset (an uncompressed regular file or a stored .npz
 *   entry; else LDS_E_UNSUPPORTED); shape (N, D); the data must fill the rest
 *   of the file (or the decoded stream) exactly. No keys unless
 *   options.keys_path is given.
 * - LDS_IMPORT_NPZ: a NumPy .npz (zip, zip64 fields as numpy writes them) of
 *   .npy entries, stored or deflated; options.array names the entry ("x" or
 *   "x.npy"), or the file must hold exactly one (LDS_E_INVALID_ARG, field
 *   "options.array", listing the names). Offsets in errors about the array
 *   count from the entry's first byte. Must be a regular file. The entry read
 *   is checked against its zip records (PKWARE APPNOTE 4.3.7, 4.3.12, 4.4):
 *   the CRC-32 of its data (LDS_E_CHECKSUM, field "npz.crc32"), its uncompressed
 *   size (LDS_E_LENGTH_MISMATCH, "npz.uncompressed_size"), no bytes after its
 *   deflate stream inside the compressed size (LDS_E_TRAILING,
 *   "npz.compressed_size"), and a local header whose method, name, CRC-32 and
 *   sizes agree with the central directory (LDS_E_PARSE, "npz.method",
 *   "npz.name", ...); each refusal names the entry and the byte of the field.
 * - LDS_IMPORT_FASTTEXT: fastText .vec, which is word2vec text.
 *
 * GloVe and word2vec text: once D is known (the first row, or the header), a
 * line of more than D + 1 fields holds a key with spaces (glove.840B's ". . .")
 * when the field before its last D is not a decimal number: the key is the line
 * up to that field's end, spaces kept. Otherwise the line is refused as having
 * too many numbers.
 *
 * Every format may be compressed with gzip (members concatenated), zstd or xz:
 * the magic bytes at the start of the input choose the decoder, whatever the
 * file's name (see max_decoded_bytes for the bounds).
 * - LDS_IMPORT_FVECS: rows of (int32 little-endian d, then d binary32); every
 *   row has the same d > 0, and the file is a whole number of rows. No keys
 *   unless options.keys_path is given.
 *
 * Text input (GloVe, word2vec text, and the keys file of keys_path) may start
 * with a UTF-8 byte-order mark (EF BB BF): it is skipped, never made part of
 * the first key or header; byte offsets in errors still count it. A BOM
 * anywhere else is an ordinary part of a key.
 *
 * - LDS_IMPORT_HDF5: the 2-D dataset options.dataset (default "train") of an
 *   HDF5 file as ann-benchmarks writes them (datasets train, test, neighbors,
 *   distances; root attribute "distance"), read through libhdf5 when the
 *   library was built with it (else LDS_E_UNSUPPORTED, field "format"). The
 *   dataset's class must be float of 4 or 8 bytes, either byte order (float64
 *   is rounded once to the stored dtype, as for .npy); another class or size,
 *   or a rank other than 2, is LDS_E_UNSUPPORTED naming the dataset; its
 *   declared extent N x D is checked against limits and max_decoded_bytes
 *   before a row is read, and so is a chunked, filtered dataset's work: every
 *   chunk its extent touches, at the chunk's full size (LDS_E_LIMIT, field
 *   "hdf5.chunk"). Each chunk is then decoded once (the chunk cache holds one
 *   row of chunks: memory of about one row of chunks, as libhdf5 needs to
 *   decode one; ADR 0036). libhdf5's own error printing is silenced and its
 *   errors come back as LDS_E_IO (or LDS_E_PARSE when the file is not HDF5)
 *   naming the dataset and HDF5's innermost message. Must be a regular file,
 *   not compressed outside HDF5. libhdf5 parses the file: see ADR 0023 for the
 *   trust this assumes of crafted files. Calls are serialised process-wide.
 *
 * Imported indexes carry ids only with options.ids_path (any format); they
 * carry keys for the text and word2vec formats, and for .npy/.npz/.fvecs with
 * keys_path.
 */
typedef enum lds_import_format {
    LDS_IMPORT_AUTO = 0,   /* detect from the extension, see lds_import_file */
    LDS_IMPORT_GLOVE,      /* "glove" */
    LDS_IMPORT_W2V_TEXT,   /* "word2vec" */
    LDS_IMPORT_W2V_BINARY, /* "word2vec-bin" */
    LDS_IMPORT_NPY,        /* "npy" */
    LDS_IMPORT_FVECS,      /* "fvecs" */
    LDS_IMPORT_NPZ,        /* "npz": one .npy array of a NumPy .npz (zip) file */
    LDS_IMPORT_FASTTEXT,   /* "fasttext": fastText .vec, word2vec text with its header */
    LDS_IMPORT_HDF5        /* "hdf5": one 2-D dataset of an HDF5 file (ann-benchmarks) */
} lds_import_format;

/** What a key seen on an earlier row does (lds_import_options.on_duplicate). */
typedef enum lds_import_dup {
    LDS_IMPORT_DUP_ERROR = 0, /* LDS_E_DUP_KEY naming both places (default) */
    LDS_IMPORT_DUP_FIRST,     /* the later row is skipped: the first vector stays */
    LDS_IMPORT_DUP_LAST       /* the earlier rows are skipped: the last vector stays, in its
                                 own place (a first pass over the input; see on_duplicate) */
} lds_import_dup;

/** Default of lds_import_options.max_decoded_bytes: 64 GiB. */
#define LDS_IMPORT_DEFAULT_MAX_DECODED (UINT64_C(64) << 30)
/** Default of lds_import_options.max_idle_bytes: 1 MiB. */
#define LDS_IMPORT_DEFAULT_MAX_IDLE (UINT64_C(1) << 20)

/**
 * Options of lds_import_file. Initialise with lds_import_options_default();
 * `size` must be sizeof(lds_import_options) or the size of an older, shorter
 * version of this struct, at least LDS_IMPORT_OPTIONS_MIN_SIZE (the struct
 * before i8_scale); any other is LDS_E_INVALID_ARG (rule: "Struct sizes" in
 * lodestar.h). Strings are borrowed for the duration of the call.
 */
typedef struct lds_import_options {
    size_t size;
    /** Input format; default LDS_IMPORT_AUTO. */
    lds_import_format format;
    /**
     * NPY, NPZ and FVECS only (LDS_E_INVALID_ARG with another format): a UTF-8
     * text file with one key per line (LF or CRLF; the last line may lack its
     * newline). Its line count must equal the row count (checked before any
     * row is written). NULL (default): the index has no keys.
     */
    const char *keys_path;
    /** Stored element type; default LDS_DTYPE_F32. The writer converts. */
    lds_dtype dtype;
    /** Metric recorded in the index; default LDS_METRIC_COSINE. */
    lds_metric metric;
    /** L2-normalize every row before storing; default false. A row of zeros
        is then refused (LDS_E_BAD_VALUE naming its line or row). */
    bool normalize;
    /** Metadata "model"; NULL (default): not set. */
    const char *model;
    /** Metadata "source"; NULL (default): not set. */
    const char *source;
    /**
     * Called with input bytes consumed so far and the input file's size,
     * about every MiB and once more at the end (done == total) on success.
     * Called on the importing thread. NULL (default): no calls.
     */
    void (*progress)(uint64_t done, uint64_t total, void *ctx);
    /** Passed to `progress` unchanged. */
    void *progress_ctx;
    /**
     * max_dim (D), max_rows (N) and max_key_bytes (one key) are enforced as
     * the input is read (LDS_E_LIMIT); default lds_limits_default().
     */
    lds_limits limits;
    /**
     * LDS_DTYPE_I8 only: the scale of the stored values (value = stored i8 *
     * i8_scale), so the representable range is [-127 * i8_scale, 127 *
     * i8_scale]. 0 (default): the writer's default, 1/127 (range [-1, 1]).
     * A value outside the range is refused (LDS_E_BAD_VALUE naming the line
     * or row, the key, the element, the value and the scale), never clamped.
     * To pick one: i8_scale = max |x| / 127 over the whole input (after
     * normalisation when `normalize` is set, where 1/127 always fits).
     * Must be finite and >= 0 (LDS_E_INVALID_ARG otherwise); ignored for
     * other dtypes. Added after `limits`: callers built against an older,
     * shorter struct get the default.
     */
    float i8_scale;
    /**
     * LDS_DTYPE_I8 only: choose i8_scale = max |x| / 127 over the input (after
     * normalisation), read in a first pass; the input must then be a file that can be
     * opened twice (not standard input: LDS_E_INVALID_ARG). Default false.
     */
    bool i8_scale_auto;
    /**
     * Compressed input (gzip, zstd or xz, detected by their magic bytes for every format;
     * an .npz entry of method deflate): the most bytes it may decode to, LDS_E_LIMIT
     * beyond, so a small file that expands without end is refused after this many bytes
     * of work and with the importer's usual bounded memory. 0 (default):
     * LDS_IMPORT_DEFAULT_MAX_DECODED. Independently, past the first 64 MiB a stream may
     * not decode to more than 4096 times the compressed bytes read so far (LDS_E_LIMIT,
     * "expands like a decompression bomb"; ADR 0018). Offsets in messages about a
     * compressed input count decoded bytes, except those of field "compressed", which
     * count the file's own.
     */
    uint64_t max_decoded_bytes;
    /** LDS_IMPORT_NPZ: the array to read, "name" or "name.npy" as np.savez names it.
        NULL (default): the file must hold exactly one array. */
    const char *array;
    /**
     * A repeated key: refused (default), the first row kept and the later skipped, or
     * (LDS_IMPORT_DUP_LAST) the last row kept and every earlier one skipped; skipped rows
     * are counted in lds_import_result.duplicates_skipped, and the kept rows stay in
     * input order. LAST reads the input twice: a first pass records, per distinct key,
     * its last row (memory: the distinct keys' bytes plus about 32 bytes per distinct key
     * and one bit per row, freed before the second pass; time linear in the input), so
     * the input must be a regular file (compressed is fine), not a pipe or standard
     * input (LDS_E_INVALID_ARG, field "options.on_duplicate").
     */
    lds_import_dup on_duplicate;
    /** LDS_IMPORT_GLOVE: D, the numbers per row, so that even the first line's key may
        hold spaces; 0 (default): D is the first line's field count less one. Above
        limits.max_dim: LDS_E_LIMIT. Ignored by the other formats. */
    uint64_t dim;
    /**
     * Every format: a text file with one id per line, the id of input row r on line
     * r + 1 (a row skipped as a repeated key takes its id with it): an unsigned 64-bit
     * decimal integer, digits only (no sign, no spaces; LF or CRLF; the last line may
     * lack its newline; a UTF-8 BOM is skipped). Its line count must equal the input's
     * rows (LDS_E_LENGTH_MISMATCH); a blank line or another character is LDS_E_PARSE,
     * a value above 2^64 - 1 LDS_E_OVERFLOW, each naming the line and byte (field
     * "ids_path"). Ids need not be unique (format.md 3.2). Must be a regular file, and
     * one that grows while it is read is refused (LDS_E_IO). NULL (default): no ids.
     */
    const char *ids_path;
    /**
     * LDS_IMPORT_HDF5: the dataset to read, a path inside the file ("train", or
     * "group/name"). NULL (default): "train", the ann-benchmarks layout.
     */
    const char *dataset;
    /**
     * true: a format that declares its metric sets it (HDF5: the root attribute
     * "distance" of ann-benchmarks files, angular -> cosine, euclidean -> l2, dot or ip
     * -> dot; another value is LDS_E_UNSUPPORTED naming it), and `metric` is used only
     * when the file declares none. false (default): `metric` always. The metric used
     * is reported in lds_import_result.metric.
     */
    bool metric_from_input;
    /**
     * The most bytes of input (decoded bytes, for a compressed one) that may follow a row
     * without making another: blank lines of a text format (accepted only at the end of
     * the input; one between rows is LDS_E_PARSE), line ends and spaces after a word2vec
     * binary file's rows. Beyond it: LDS_E_LIMIT at once, naming the line (or byte) where
     * the run began, so a small compressed file of blank lines is refused after this many
     * bytes rather than decoded to its end (ADR 0036). 0 (default):
     * LDS_IMPORT_DEFAULT_MAX_IDLE. Added after `metric_from_input`: callers built against
     * a shorter struct get the default.
     */
    uint64_t max_idle_bytes;
    /**
     * The output's chunk table and layout, as lds_writer_options.chunk_bytes and
     * lds_writer_options.layout say (0, the defaults: 4 KiB chunks, LDS_LAYOUT_AUTO);
     * a bad value is the writer's LDS_E_INVALID_ARG before a row is read. Added after
     * `max_idle_bytes`: callers built against a shorter struct get the defaults.
     */
    uint32_t chunk_bytes;
    uint32_t layout; /**< an lds_layout value (lodestar_index.h) */
} lds_import_options;

/** Smallest lds_import_options.size accepted: the struct as first shipped. */
#define LDS_IMPORT_OPTIONS_MIN_SIZE offsetof(lds_import_options, i8_scale)

/** Fills `o` with the defaults documented on each field (size included). NULL ok. */
LDS_API void lds_import_options_default(lds_import_options *o);

/** What lds_import_file produced. Set `size = sizeof(lds_import_result)` before the
    call; any other size is LDS_E_INVALID_ARG ("Struct sizes" in lodestar.h). */
typedef struct lds_import_result {
    size_t size;
    /** Rows written. */
    uint64_t rows;
    /** Elements per row. */
    uint32_t dim;
    /** The format actually read (never LDS_IMPORT_AUTO). */
    lds_import_format format;
    /** Bytes of the input file. */
    uint64_t input_bytes;
    /** True when the index carries keys. */
    bool has_keys;
    /** Input rows skipped as repeated keys (LDS_IMPORT_DUP_FIRST). */
    uint64_t duplicates_skipped;
    /** LDS_DTYPE_I8: the scale stored (chosen from the data with i8_scale_auto); else 0. */
    float i8_scale;
    /** The metric recorded in the index (see lds_import_options.metric_from_input). */
    lds_metric metric;
    /** True when the index carries ids (lds_import_options.ids_path). */
    bool has_ids;
} lds_import_result;

/** Smallest lds_import_result.size accepted (see "Struct sizes" in lodestar.h): the
    struct before duplicates_skipped; a shorter-sized caller gets the fields that fit. */
#define LDS_IMPORT_RESULT_MIN_SIZE offsetof(lds_import_result, duplicates_skipped)

/**
 * Reads `input_path` in `options->format` and writes a lodestar index to
 * `output_path` atomically (lds_writer_open_path: a temporary file renamed
 * over `output_path` only after the last byte is written and synced), so a
 * failed or interrupted import never leaves a partial file at `output_path`.
 *
 * `input_path` may name a FIFO or character device for the text, word2vec
 * binary, .npy (C order) and .fvecs formats, and any compressed input (then
 * the checks against the file size become checks while reading, and progress
 * reports a total of 0); an .npz, a Fortran-order .npy, the keys file and
 * input read twice (i8_scale_auto) must be regular files.
 *
 * With LDS_IMPORT_AUTO the format follows the extension, case-insensitively,
 * after a final ".gz", ".zst", ".zstd" or ".xz" is set aside; ".npz" is NPZ;
 * ".txt" and ".vec" are word2vec text if the first line is exactly two
 * runs of decimal digits ("N D"; one too large for 64 bits is then refused,
 * LDS_E_LIMIT, rather than read as a GloVe key), else GloVe; ".bin" is word2vec
 * binary; ".npy" and ".fvecs" as named. Any other extension is
 * LDS_E_UNSUPPORTED.
 *
 * `options` NULL means defaults. `res` (may be NULL) is written on success,
 * and on one refusal only: a forced chunk layout whose chunks outweigh the
 * vectors (LDS_E_INVALID_ARG, field "lds_writer_options.layout", refused by
 * lds_writer_finish once the vectors' length is known), where it says what was
 * read: the vectors would have taken rows x dim x lds_dtype_size(dtype) bytes.
 * `err` (may be NULL) receives the detail of a refusal: `line` is the
 * 1-based line of a text input (or of the keys file, then `field` is
 * "keys_path") or the 1-based record number (row + 1) of a binary input;
 * `offset` is the byte offset in that file of the offending token, line or
 * row; `field` names the part at fault ("line", "row", "header", "npy.shape",
 * "fvecs.d", ...). The message names one place: "line L (byte B): element E"
 * or "row R (byte B)", lines from 1, rows and elements from 0, with any input
 * bytes it quotes escaped (\xNN) outside printable ASCII.
 *
 * Returns:
 * - LDS_OK: the index is at `output_path`.
 * - LDS_E_INVALID_ARG: a NULL path, a bad option value or size, keys_path
 *   with a format that has its own keys; on_duplicate LDS_IMPORT_DUP_LAST or
 *   i8_scale_auto on input that is not a regular file; an HDF5 dataset that is
 *   missing or a group (field "options.dataset"); an ids file that is not a
 *   regular file; `output_path` naming the same file
 *   as `input_path` or keys_path (same device and inode, so another spelling,
 *   a symbolic link or a hard link is caught), refused before anything is
 *   written; `output_path` not a regular file (see lds_writer_open_path).
 * - LDS_E_UNSUPPORTED: undetectable format; an .npy dtype not listed above, a
 *   Fortran-order array in a compressed input, a version other than
 *   1.0/2.0/3.0; an encrypted .npz entry or one of a method other than 0 or 8;
 *   i8_scale_auto on input that is not a regular file is LDS_E_INVALID_ARG.
 * - LDS_E_LIMIT also: compressed input beyond max_decoded_bytes or the 4096:1
 *   ratio (field "compressed"); an .xz stream needing over 256 MiB to decode.
 * - LDS_E_IO: opening or reading an input failed (sys_errno set), or any
 *   writer I/O error.
 * - LDS_E_PARSE: malformed input: a bad number or integer, a row of the wrong
 *   width, an empty line or key, a malformed header, rows that disagree on d.
 * - LDS_E_BAD_VALUE: a number that is not finite; a zero or negative D; with
 *   `normalize`, a row of zeros; with LDS_DTYPE_I8, a value outside +-127 *
 *   i8_scale; with LDS_DTYPE_F16 or LDS_DTYPE_BF16, a value that would round
 *   to infinity (|x| >= 65520 for f16).
 * - LDS_E_BAD_UTF8: a key that is not valid UTF-8.
 * - LDS_E_DUP_KEY: a key seen on an earlier line or row (both are named).
 * - LDS_E_LIMIT: D, N or a key beyond `options->limits`.
 * - LDS_E_TRUNCATED: the input ends before a row or before the N rows its
 *   header promises (the .npy and word2vec binary checks happen against the
 *   file size before any row is read).
 * - LDS_E_TRAILING: bytes after the last promised row.
 * - LDS_E_LENGTH_MISMATCH: the keys file's or the ids file's line count
 *   differs from N (field "keys_path" or "ids_path"); an .npz entry's data
 *   that is not the size its zip records declare.
 * - LDS_E_CHECKSUM: an .npz entry whose data has another CRC-32 than its zip
 *   records declare.
 * - LDS_E_OVERFLOW: declared sizes whose product overflows 64 bits.
 * - LDS_E_NOMEM: allocation failed.
 * - Any status of lds_writer_add_row / lds_writer_finish, passed through.
 *
 * Thread safety: calls on distinct paths may run concurrently; the importer
 * keeps no global state and parses numbers in its own C locale.
 */
LDS_API lds_status lds_import_file(const char *input_path, const char *output_path,
                                   const lds_import_options *options, lds_import_result *res,
                                   lds_error *err);

/**
 * The format's name: "auto", "glove", "word2vec", "word2vec-bin", "npy",
 * "fvecs", "npz", "fasttext", "hdf5" (one name per format, the one `lodestar pack --format` takes);
 * a static string, or NULL for an unknown value.
 */
LDS_API const char *lds_import_format_name(lds_import_format format);

/**
 * Parses a name printed by lds_import_format_name (exactly; no aliases).
 * LDS_E_INVALID_ARG for NULL arguments,
 * LDS_E_BAD_VALUE for an unknown name (then `*out` is unchanged).
 */
LDS_API lds_status lds_import_format_from_name(const char *name, lds_import_format *out);

/**
 * What a file is, from its first bytes, so that a refusal can say what to do with it
 * (`lodestar info glove.txt`: "a GloVe text file: convert it with lodestar pack").
 * head: the file's first `len` bytes (64 tell every binary kind; a text kind is judged on
 * the complete lines and tokens among them, so 1 KiB judges text better); NULL with len 0
 * recognises nothing.
 *
 * Returns a static, NUL-terminated description with its article, or NULL when nothing
 * is recognised: "a lodestar index", "a lodestar shard manifest (JSON)", "an .npy file",
 * "a zip file (.npz)", "a gzip-compressed file", "a zstd-compressed file", "an
 * xz-compressed file", "an HDF5 file", "a word2vec text file", "a GloVe text file".
 * *format (optional, may be NULL) receives the lds_import_format that packs it:
 * LDS_IMPORT_NPY, LDS_IMPORT_NPZ, LDS_IMPORT_HDF5, LDS_IMPORT_W2V_TEXT or
 * LDS_IMPORT_GLOVE; LDS_IMPORT_AUTO for the compressed kinds (pack looks through them
 * and decides on what they hold), a lodestar index or manifest, and NULL.
 * Magics: lodestar (docs/format.md), NumPy format ("\x93NUMPY"), zip local file header
 * ("PK\3\4"), gzip (RFC 1952), zstd frame or skippable frame (RFC 8878 sections
 * 3.1.1 and 3.1.2), xz (.xz file format 1.1.0),
 * HDF5 superblock signature ("\x89HDF\r\n\x1a\n", at offset 0). word2vec text: a first
 * line of two decimal integers; GloVe text: a first line of a key and then numbers only
 * (at least one). Reads nothing outside head[0, len); pure; safe from any thread.
 */
LDS_API const char *lds_import_sniff(const void *head, size_t len, lds_import_format *format);

#ifdef __cplusplus
}
#endif

#endif /* LODESTAR_IMPORT_H */
