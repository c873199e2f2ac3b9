/*
 * Internals shared by the importers (import/import_*.c) and the dispatcher
 * (import.c): the error helper and the buffered reader (reader.c) over the
 * decoders (decode.c), number parsing (numbers.c), the keys file (keys.c), the
 * --on-duplicate last table (last.c), and the sink that checks keys and ids and
 * feeds the writer (sink.c). Not installed; nothing outside import/ uses it.
 */
#ifndef LDS_IMPORT_INTERNAL_H
#define LDS_IMPORT_INTERNAL_H

#include "lds_common.h"
#include "lodestar_core.h"
#include "lodestar_import.h"
#include "lodestar_index.h"

#include <locale.h>
#include <stdarg.h>
#include <sys/types.h>

/* Bytes read from the input per read(2) call; the reader's smallest buffer. */
#define LDS__IMP_CHUNK ((size_t)64 * 1024)
/* Progress is reported at most once per this many input bytes. */
#define LDS__IMP_PROGRESS_STEP ((uint64_t)1 << 20)
/* Longest accepted number token in a text line, used to bound a line's length. */
#define LDS__IMP_MAX_TOKEN 64
/* Largest .npy header accepted (NumPy writes a few hundred bytes). */
#define LDS__IMP_MAX_NPY_HEADER ((size_t)1 << 20)

/* How the reader's bytes are encoded on disk (detected by magic, import/decode.c). */
typedef enum lds__imp_codec {
    LDS__CODEC_NONE = 0,
    LDS__CODEC_GZIP,    /* RFC 1952, members concatenated as gzip writes them */
    LDS__CODEC_ZSTD,    /* RFC 8878 frames */
    LDS__CODEC_XZ,      /* .xz streams (liblzma) */
    LDS__CODEC_DEFLATE, /* raw RFC 1951, an .npz entry of method 8 */
} lds__imp_codec;

/* A file read in chunks. `buf[pos, len)` are read but unconsumed bytes, and
   `base` is the file offset of buf[0]; len < cap always (room for a NUL). */
typedef struct lds__imp_reader {
    int fd;
    const char *field; /* "line"/"row" for the input, "keys_path" for the keys file */
    unsigned char *buf;
    size_t cap, pos, len;
    size_t max_line; /* a longer line is LDS_E_LIMIT */
    uint64_t base;
    uint64_t size; /* file size; UINT64_MAX when not a regular file */
    dev_t dev;     /* identity of the open file, to refuse it as the output */
    ino_t ino;
    bool eof;
    void (*progress)(uint64_t done, uint64_t total, void *ctx);
    void *progress_ctx;
    uint64_t next_report;
    /* Where the bytes come from (import/decode.c): the file as it is, or a decoder over
       it. Offsets (base, pos) count decoded bytes; the file's own are below. */
    lds__imp_codec codec;
    void *dec;           /* the decoder's state, NULL for LDS__CODEC_NONE */
    unsigned char *zbuf; /* undecoded bytes read from fd: zbuf[zpos, zlen) */
    size_t zpos, zlen;
    bool zeof;            /* fd (or raw_left) is exhausted */
    bool dec_end;         /* the decoder reached the end of its last stream */
    uint64_t raw_left;    /* bytes of fd still to read (an .npz entry); UINT64_MAX: to EOF */
    uint64_t raw_read;    /* bytes read from fd so far */
    uint64_t file_base;   /* file offset of decoded byte 0 when not decoded (an .npz entry) */
    uint64_t file_size;   /* the file's own size; UINT64_MAX when not a regular file */
    uint64_t max_decoded; /* decoded bytes allowed (options.max_decoded_bytes) */
    /* An .npz entry's check (import_npz.c): with crc_on, the CRC-32 (zlib's crc32) and the
       count of every byte lds__imp_source_read hands out since the last restart. */
    bool crc_on;
    uint32_t crc;
    uint64_t delivered;
} lds__imp_reader;

/* The key checks and the writer at the end of every importer (the writer,
   opened with unique_keys, refuses a repeated key). */
typedef struct lds__imp_sink {
    const lds_import_options *opts;
    const char *output_path;
    lds_writer *writer;
    uint32_t dim;
    float i8_scale; /* the scale the writer was opened with */
    bool with_keys;
    uint64_t rows;          /* input rows taken, skipped ones included */
    uint64_t skipped;       /* rows skipped as repeated keys (LDS_IMPORT_DUP_FIRST) */
    bool scan;              /* first pass of i8_scale_auto: no writer, max |x| only */
    double max_abs;         /* the scan's result */
    uint64_t line_base;     /* line (or row number) of row r is r + line_base */
    const char *line_field; /* "line", "row" or "keys_path" */
    /* options.ids_path: the ids file (NULL without one) and its line count. */
    lds__imp_reader *ids;
    uint64_t id_lines;
    /* LDS_IMPORT_DUP_LAST. The first pass (dup_scan: no writer) records each distinct key's
       last row in `last`; `superseded` then has bit r set for an input row r whose key
       comes again later, and the writing pass skips those rows. */
    bool dup_scan;
    struct lds__imp_last *last;
    uint64_t *superseded;     /* one bit per input row, NULL when none */
    uint64_t superseded_rows; /* rows the bitmap covers */
    /* A metric the input declares (HDF5's "distance", options.metric_from_input). */
    bool metric_set;
    lds_metric metric;
} lds__imp_sink;

/* Everything one import call works with. */
typedef struct lds__imp_ctx {
    const lds_import_options *opts;
    lds__imp_reader in;
    lds__imp_reader keys; /* open when opts->keys_path is set */
    lds__imp_sink sink;
    locale_t c_locale;
    lds__imp_reader ids;    /* open when opts->ids_path is set */
    const char *input_path; /* as the caller gave it (the HDF5 importer opens it by name) */
} lds__imp_ctx;

/* Fills `err` (when it is non-NULL and large enough for each field) and returns `status`. */
lds_status lds__imp_fail(lds_error *err, lds_status status, const char *field, uint64_t offset,
                         uint64_t line, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* How messages name a place of `field`: "line", "row", or "keys file line". */
const char *lds__imp_noun(const char *field);

lds_status lds__imp_reader_open(lds__imp_reader *r, const char *path, const char *field,
                                size_t max_line, lds_error *err);
void lds__imp_reader_close(lds__imp_reader *r);
/* File offset of the next unconsumed byte. */
uint64_t lds__imp_reader_offset(const lds__imp_reader *r);
/* Next line, without its LF or CRLF and NUL-terminated, in the reader's buffer
   (writable, valid until the next call). At end of input *line is NULL. */
lds_status lds__imp_reader_line(lds__imp_reader *r, uint64_t lineno, char **line, size_t *len,
                                uint64_t *offset, lds_error *err);
/* Up to `n` bytes into `dst`; *got < n only at end of input. */
lds_status lds__imp_reader_read(lds__imp_reader *r, void *dst, size_t n, size_t *got,
                                lds_error *err);
/* Moves the unconsumed bytes to the front, grows the buffer if it is full (a long line),
   and reads once more; sets eof at the end of the input. */
lds_status lds__imp_reader_fill(lds__imp_reader *r, lds_error *err);
/* Skips a UTF-8 byte-order mark (EF BB BF) if the file starts with one; a no-op
   anywhere but at the very start. Offsets stay file offsets. */
lds_status lds__imp_reader_skip_bom(lds__imp_reader *r, lds_error *err);
/* Next byte without consuming it, or -1 at end of input. */
lds_status lds__imp_reader_peek(lds__imp_reader *r, int *byte, lds_error *err);
/* Looks at the first bytes of the input: gzip, zstd or xz magic switches the reader to
   that decoder (then size is UINT64_MAX, and offsets count decoded bytes). */
lds_status lds__imp_reader_detect(lds__imp_reader *r, lds_error *err);
/* Restarts the reader on fd[offset, offset + length) decoded by `codec` (NONE or DEFLATE):
   an .npz entry. */
lds_status lds__imp_reader_restart(lds__imp_reader *r, uint64_t offset, uint64_t length,
                                   lds__imp_codec codec, lds_error *err);
/* The decoder layer (import/decode.c): up to cap decoded bytes into dst; *n == 0 only at
   the end of the input. */
lds_status lds__imp_source_read(lds__imp_reader *r, unsigned char *dst, size_t cap, size_t *n,
                                lds_error *err);
lds_status lds__imp_codec_start(lds__imp_reader *r, lds__imp_codec codec, lds_error *err);
void lds__imp_codec_end(lds__imp_reader *r);
const char *lds__imp_codec_name(lds__imp_codec codec);
/* Reports progress done == total at the end of a successful import. */
void lds__imp_reader_progress_done(lds__imp_reader *r);

/* Opens the writer for rows of `dim` elements and sets the metadata. */
lds_status lds__imp_sink_open(lds__imp_sink *s, uint32_t dim, bool with_keys, lds_error *err);
/* Checks the key (length, UTF-8, uniqueness) and the row count, then adds the
   row. `offset` is the file offset of the row (or of its key's line). */
/* The writer's side of the one key table of a pack (ADR 0010): after lds_writer_add_row
   refused a row with LDS_E_DUP_KEY, the earlier row that holds the key (format/writer.c). */
uint64_t lds__writer_dup_row(const lds_writer *w);

/* Rounds `v` once to what the index stores (binary32, or straight to float16, bfloat16 or
   the i8 grid of the scale), returned as the binary32 the writer then stores exactly.
   With `normalize` set the writer rounds after normalising, so v is only made binary32. */
float lds__imp_narrow(const lds__imp_sink *s, double v);

lds_status lds__imp_sink_row(lds__imp_sink *s, const float *vec, const char *key, size_t key_len,
                             uint64_t offset, lds_error *err);

/* Parses a decimal token `tok[0, len)` that is followed by a byte which is not
   part of any number (a separator or NUL); the whole token must be consumed
   and the value finite. `element` is the token's 0-based index in its row, `offset`
   its file offset (the one offset the message names). */
lds_status lds__imp_parse_float(lds__imp_ctx *c, const char *tok, size_t len, float *out,
                                const char *field, uint64_t line, uint64_t offset, size_t element,
                                lds_error *err);
/* Most bytes of an input token that a message quotes. */
#define LDS__IMP_SHOWN 40
/* Quotes tok[0, len) for a message into buf (cap >= 4 * LDS__IMP_SHOWN + 8): at most
   LDS__IMP_SHOWN bytes, each byte outside printable ASCII as \xNN, a backslash or double
   quote after a backslash, "..." when cut. Returns buf. */
const char *lds__imp_quote(char *buf, size_t cap, const char *tok, size_t len);
/* Parses a non-negative decimal integer made only of digits. false on any other text or overflow.
 */
bool lds__imp_parse_u64(const char *tok, size_t len, uint64_t *out);
/* True if s[0, n) is exactly two non-negative decimal integers separated by
   spaces or tabs (the word2vec text and binary header). */
bool lds__imp_is_w2v_header(const char *s, size_t n, uint64_t *rows, uint64_t *dim);
/* Whether s[0, n) is two blank-separated runs of decimal digits (the shape of
   a word2vec header, whatever their values); points tok/tlen at them. */
bool lds__imp_w2v_header_shape(const char *s, size_t n, const char *tok[2], size_t tlen[2]);

/* Keys file for .npy/.fvecs: counts its lines (then rewinds), and reads key r. */
lds_status lds__imp_keys_count(lds__imp_ctx *c, uint64_t *lines, lds_error *err);
lds_status lds__imp_keys_next(lds__imp_ctx *c, uint64_t row, const char **key, size_t *len,
                              lds_error *err);

/* The importers, one per format. The caller has opened c->in and, when
   keys_path is set, c->keys; each importer opens the sink and finishes it. */
lds_status lds__import_text(lds__imp_ctx *c, bool w2v_header, lds_error *err);
lds_status lds__import_w2v_binary(lds__imp_ctx *c, lds_error *err);
lds_status lds__import_npy(lds__imp_ctx *c, lds_error *err);
lds_status lds__import_fvecs(lds__imp_ctx *c, lds_error *err);
/* Reads the .npy stream of c->in (a file, a decoded file, or an .npz entry); `what`
   names it in messages (".npy", or ".npz entry"). */
lds_status lds__import_npy_stream(lds__imp_ctx *c, const char *what, lds_error *err);
/* pread(2) of exactly n bytes, retrying EINTR and short reads; 0 or the errno (EIO at end). */
int lds__imp_pread(int fd, void *buf, size_t n, uint64_t off);
/* An .npz: finds the entry (options.array, or the only one) and reads it as .npy. */
lds_status lds__import_npz(lds__imp_ctx *c, lds_error *err);

/* Counts the lines of a regular file `r` (the keys or the ids file), then rewinds it
   and skips a BOM. At most max_rows + 1 lines are counted; a file that grows past the
   size it had when opened is refused. */
lds_status lds__imp_lines_count(lds__imp_reader *r, uint64_t max_rows, uint64_t *lines,
                                lds_error *err);
/* The first pass of LDS_IMPORT_DUP_LAST (last.c): lds__imp_last_note records input row
   `row` holding `key` (its earlier row, or under LDS_IMPORT_DUP_FIRST this one, becomes
   superseded); lds__imp_last_done frees the key table after the pass, keeping the bitmap
   that lds__imp_superseded reads; lds__imp_last_free frees both. */
lds_status lds__imp_last_note(lds__imp_sink *s, const char *key, size_t len, uint64_t row,
                              uint64_t offset, lds_error *err);
bool lds__imp_superseded(const lds__imp_sink *s, uint64_t row);
void lds__imp_last_done(lds__imp_sink *s);
void lds__imp_last_free(lds__imp_sink *s);
/* After the last row (sink.c): the ids file must hold exactly one line per input row. */
lds_status lds__imp_ids_finish(lds__imp_sink *s, lds_error *err);
/* Frees what the sink holds (the writer, unfinished, removes its temporary file). */
void lds__imp_sink_free(lds__imp_sink *s);
/* An HDF5 dataset (import/import_hdf5.c; LDS_E_UNSUPPORTED when built without libhdf5). */
lds_status lds__import_hdf5(lds__imp_ctx *c, lds_error *err);

/* Little-endian loads. */
static inline uint32_t lds__imp_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint16_t lds__imp_le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

#endif /* LDS_IMPORT_INTERNAL_H */
