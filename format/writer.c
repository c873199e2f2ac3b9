/* The writer: streams rows, then ids, keys, metadata, table, footer, checksum. */
#include "format_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* An fd writer's own buffer: a row of a few hundred bytes would otherwise cost a
   write(2) each; a FILE* writer has stdio's instead. */
#define BUF_SIZE (64 * 1024)
/* A path writer's temporary file is DIR/.NAME + this + PID- + 6 random characters. */
#define LDS__TMP_INFIX ".lds-tmp-"

/* LDS__FAIL_IF_MSG for the writer's own checks: its messages start "writer: " and
   carry no file offset (the file is the one being made, not a bad input). */
#define WRITER_FAIL_IF(cond, err, status, field, ...)                                              \
    LDS__FAIL_IF_MSG(cond, err, status, field, 0, "writer: " __VA_ARGS__)

typedef enum { W_OPEN, W_DONE, W_FAILED } wstate;

typedef struct meta_entry {
    char *key;
    char *value;
} meta_entry;

struct lds_writer {
    lds_writer_options o;
    int fd;     /* -1 for a FILE* output */
    FILE *f;    /* NULL for an fd output */
    char *path; /* path writers: the final name and the temporary one */
    char *tmp;
    bool seekable;
    off_t start; /* position of the header in the output */
    uint8_t *buf;
    size_t buf_len;
    XXH3_state_t *hash;
    uint64_t payload; /* payload bytes written so far */
    /* Format 1.1 (format.md §2.5): the chunk being hashed and the hashes of those
       before it; chunk_bytes 0 writes 1.0. */
    uint32_t chunk_bytes;
    uint64_t align; /* where sections after the vectors start: 64 or chunk_bytes (§4.4) */
    XXH3_state_t *chash;
    uint64_t chunk_fill;
    uint64_t *chunks;
    size_t n_chunks, chunks_cap;
    wstate state;

    uint64_t rows;
    size_t row_bytes;
    uint8_t *row_out;
    float *row_tmp;

    uint64_t *ids;
    size_t ids_cap;

    uint8_t *kbytes;
    size_t kb_len, kb_cap;
    uint64_t *koffs; /* rows + 1 entries when keys are on */
    size_t koffs_cap;
    lds__hashtab keys; /* unique_keys: the row of each key */
    uint64_t dup_row;  /* the row a key refused with LDS_E_DUP_KEY repeats */

    meta_entry *meta;
    size_t meta_n, meta_cap;
    uint64_t meta_user_bytes;
};

void lds_writer_options_default(lds_writer_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->dtype = LDS_DTYPE_F32;
    o->metric = LDS_METRIC_COSINE;
    o->i8_scale = 1.0f / 127.0f;
}

/* Every write error ends the writer (W_FAILED): the output is missing bytes the
   table would describe, so no later call may produce a file from it. */
static lds_status io_fail(lds_writer *w, lds_error *err, const char *what)
{
    int e = errno;
    w->state = W_FAILED;
    return lds__fail_errno(err, LDS_E_IO, e, "writer: %s: %s", what, strerror(e));
}

/* write(2) until all n bytes are out: a pipe or socket takes part of a buffer at a
   time, and a signal may interrupt it (EINTR) without losing anything. */
static bool write_all_fd(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        if (k == 0) { /* no progress and no error: retrying would spin forever */
            errno = EIO;
            return false;
        }
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* Writes out an fd writer's buffer (a FILE* writer has none of its own). */
static bool flush_buf(lds_writer *w)
{
    if (w->fd < 0 || w->buf_len == 0)
        return true;
    bool ok = write_all_fd(w->fd, w->buf, w->buf_len);
    w->buf_len = 0;
    return ok;
}

/* Output bytes that the payload checksum does not cover (the header and the
   checksum itself); payload bytes go through put_payload. */
static bool put(lds_writer *w, const void *data, size_t n)
{
    const uint8_t *p = (const uint8_t *)data;
    if (w->f)
        return n == 0 || fwrite(p, 1, n, w->f) == n;
    while (n > 0) {
        size_t room = BUF_SIZE - w->buf_len;
        size_t k = n < room ? n : room;
        memcpy(w->buf + w->buf_len, p, k);
        w->buf_len += k;
        p += k;
        n -= k;
        if (w->buf_len == BUF_SIZE && !flush_buf(w))
            return false;
    }
    return true;
}

/* Ends the chunk being hashed: its XXH3-64 joins the table. */
static bool chunk_close(lds_writer *w)
{
    if (w->n_chunks == w->chunks_cap) {
        size_t cap = w->chunks_cap ? w->chunks_cap * 2 : 64;
        uint64_t *p = (uint64_t *)realloc(w->chunks, cap * sizeof *p);
        if (!p) {
            errno = ENOMEM;
            return false;
        }
        w->chunks = p;
        w->chunks_cap = cap;
    }
    w->chunks[w->n_chunks++] = XXH3_64bits_digest(w->chash);
    XXH3_64bits_reset(w->chash);
    w->chunk_fill = 0;
    return true;
}

/* Feeds payload bytes to the chunk hashes (1.1). */
static bool chunk_feed(lds_writer *w, const uint8_t *p, size_t n)
{
    while (w->chunk_bytes && n > 0) {
        size_t k = w->chunk_bytes - w->chunk_fill;
        if (k > n)
            k = n;
        XXH3_64bits_update(w->chash, p, k);
        w->chunk_fill += k;
        p += k;
        n -= k;
        if (w->chunk_fill == w->chunk_bytes && !chunk_close(w))
            return false;
    }
    return true;
}

/* Payload bytes: hashed for the checksum and the chunk table as they pass, so
   the writer never reads back what it wrote. */
static bool put_payload(lds_writer *w, const void *data, size_t n)
{
    if (n == 0)
        return true;
    XXH3_64bits_update(w->hash, data, n);
    w->payload += n;
    return chunk_feed(w, (const uint8_t *)data, n) && put(w, data, n);
}

/* Zeros up to the next multiple of `a` (format.md §4.1: sections start at multiples
   of 64, or of the chunk size in a CHUNK_ALIGNED file, §4.4; S5 and S7 check it and a
   mapped reader relies on it). */
static bool pad_to(lds_writer *w, uint64_t a)
{
    static const uint8_t zeros[4096];
    uint64_t n = lds__align_up(w->payload, a) - w->payload;
    while (n > 0) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        if (!put_payload(w, zeros, k))
            return false;
        n -= k;
    }
    return true;
}

static bool pad64(lds_writer *w)
{
    return pad_to(w, 64);
}

/* Where the sections after the vectors start (format.md §4.4): on chunk boundaries
   when the file will be chunked (a seekable output) and the layout asks for it, or
   LDS_LAYOUT_AUTO finds the vectors at least LDS_LAYOUT_AUTO_MIN_CHUNKS chunks long;
   else at multiples of 64. Decided at finish, when the vectors' length is known. */
static uint64_t section_align(const lds_writer *w)
{
    if (!w->chunk_bytes || !w->seekable || w->o.layout == LDS_LAYOUT_PACKED)
        return 64;
    if (w->o.layout == LDS_LAYOUT_CHUNK_ALIGNED)
        return w->chunk_bytes;
    return w->payload >= (uint64_t)LDS_LAYOUT_AUTO_MIN_CHUNKS * w->chunk_bytes ? w->chunk_bytes
                                                                               : 64;
}

/* Frees everything; a path writer that did not finish removes its temporary
   file, so an abandoned write leaves the target as it was. */
static void writer_destroy(lds_writer *w)
{
    if (w->tmp) {
        if (w->state != W_DONE) {
            if (w->fd >= 0)
                close(w->fd);
            unlink(w->tmp);
        }
    }
    for (size_t i = 0; i < w->meta_n; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->meta);
    lds__hashtab_free(&w->keys);
    free(w->koffs);
    free(w->kbytes);
    free(w->ids);
    free(w->row_tmp);
    free(w->row_out);
    if (w->hash)
        XXH3_freeState(w->hash);
    if (w->chash)
        XXH3_freeState(w->chash);
    free(w->chunks);
    free(w->buf);
    free(w->tmp);
    free(w->path);
    free(w);
}

void lds_writer_free(lds_writer *w)
{
    if (w)
        writer_destroy(w);
}

/* Checks the options and allocates a writer with no output yet; the open_*
   functions attach one. Options are checked here, before a byte is written,
   so that a bad one never leaves a partial file. */
static lds_status writer_new(const lds_writer_options *in, lds_writer **out, lds_error *err)
{
    WRITER_FAIL_IF(!out, err, LDS_E_INVALID_ARG, NULL, "out is NULL");
    *out = NULL;
    WRITER_FAIL_IF(!in, err, LDS_E_INVALID_ARG, NULL,
                   "options missing; use lds_writer_options_default");
    WRITER_FAIL_IF(in->size < LDS_WRITER_OPTIONS_MIN_SIZE || in->size > sizeof *in, err,
                   LDS_E_INVALID_ARG, "lds_writer_options.size",
                   "lds_writer_options.size is %zu (accepted: %zu..%zu); set it "
                   "with lds_writer_options_default",
                   in->size, LDS_WRITER_OPTIONS_MIN_SIZE, sizeof *in);
    lds_writer_options o;
    lds_writer_options_default(&o);
    memcpy(&o, in, in->size < sizeof o ? in->size : sizeof o);
    o.size = sizeof o;
    /* T2, T3: the writer refuses what a reader with default limits would */
    WRITER_FAIL_IF(o.dim == 0 || o.dim > LDS_DEFAULT_MAX_DIM, err, LDS_E_INVALID_ARG, NULL,
                   "dim %u is not in 1..%llu", (unsigned)o.dim,
                   (unsigned long long)LDS_DEFAULT_MAX_DIM);
    /* T4 */
    WRITER_FAIL_IF(lds_dtype_size(o.dtype) == 0, err, LDS_E_INVALID_ARG, NULL, "unknown dtype %d",
                   (int)o.dtype);
    /* T5 */
    WRITER_FAIL_IF(!lds_metric_name(o.metric), err, LDS_E_INVALID_ARG, NULL, "unknown metric %d",
                   (int)o.metric);
    /* T6 */
    WRITER_FAIL_IF(o.dtype == LDS_DTYPE_I8 && !(isfinite(o.i8_scale) && o.i8_scale > 0.0f), err,
                   LDS_E_INVALID_ARG, NULL, "i8_scale %g must be finite and above 0",
                   (double)o.i8_scale);
    /* T8 */
    WRITER_FAIL_IF(o.unique_keys && !o.with_keys, err, LDS_E_INVALID_ARG, NULL,
                   "unique_keys needs with_keys");
    uint32_t cb = o.chunk_bytes == 0 ? LDS_DEFAULT_FILE_CHUNK_BYTES : o.chunk_bytes;
    /* C1 (0 asks for the default) */
    WRITER_FAIL_IF(cb != LDS_CHUNKS_NONE && ((cb & (cb - 1)) != 0 || cb < LDS_MIN_CHUNK_BYTES ||
                                             cb > LDS_MAX_CHUNK_BYTES),
                   err, LDS_E_INVALID_ARG, "lds_writer_options.chunk_bytes",
                   "chunk_bytes %u is not 0, LDS_CHUNKS_NONE or a power of two "
                   "from %u to %u",
                   (unsigned)o.chunk_bytes, (unsigned)LDS_MIN_CHUNK_BYTES,
                   (unsigned)LDS_MAX_CHUNK_BYTES);
    WRITER_FAIL_IF(o.layout != LDS_LAYOUT_AUTO && o.layout != LDS_LAYOUT_PACKED &&
                       o.layout != LDS_LAYOUT_CHUNK_ALIGNED,
                   err, LDS_E_INVALID_ARG, "lds_writer_options.layout",
                   "layout %d is not LDS_LAYOUT_AUTO, LDS_LAYOUT_PACKED or "
                   "LDS_LAYOUT_CHUNK_ALIGNED",
                   (int)o.layout);
    lds_writer *w = (lds_writer *)calloc(1, sizeof *w);
    WRITER_FAIL_IF(!w, err, LDS_E_NOMEM, NULL, "no memory");
    w->o = o;
    w->fd = -1;
    w->row_bytes = (size_t)o.dim * lds_dtype_size(o.dtype);
    w->row_out = (uint8_t *)malloc(w->row_bytes);
    w->row_tmp = (float *)malloc((size_t)o.dim * sizeof(float));
    w->hash = XXH3_createState();
    w->chunk_bytes = cb == LDS_CHUNKS_NONE ? 0 : cb;
    if (w->chunk_bytes) {
        w->chash = XXH3_createState();
        if (w->chash)
            XXH3_64bits_reset(w->chash);
    }
    if (o.with_keys) {
        w->koffs_cap = 1024;
        w->koffs = (uint64_t *)malloc(w->koffs_cap * sizeof(uint64_t));
        if (w->koffs)
            w->koffs[0] = 0;
    }
    bool keys_ok =
        !o.unique_keys || lds__hashtab_init(&w->keys, 512, LDS_DEFAULT_MAX_ROWS) == LDS_OK;
    if (!w->row_out || !w->row_tmp || !w->hash || (w->chunk_bytes && !w->chash) ||
        (o.with_keys && !w->koffs) || !keys_ok) {
        writer_destroy(w);
        return lds__fail(err, LDS_E_NOMEM, NULL, 0, "writer: no memory");
    }
    XXH3_64bits_reset(w->hash);
    *out = w;
    return LDS_OK;
}

/* The header of a 1.0 payload (also the placeholder written at open). */
static void write_header(uint64_t payload_length, uint8_t *hdr)
{
    lds_header h;
    memset(&h, 0, sizeof h);
    h.major = LDS_FORMAT_MAJOR;
    h.payload_length = payload_length;
    lds_header_encode(&h, hdr);
}

/* Writes the placeholder header (length unknown) that finish rewrites. */
static lds_status writer_start(lds_writer *w, lds_error *err)
{
    uint8_t hdr[LDS_HEADER_SIZE];
    write_header(LDS_LENGTH_UNKNOWN, hdr);
    if (w->fd >= 0) {
        w->buf = (uint8_t *)malloc(BUF_SIZE);
        WRITER_FAIL_IF(!w->buf, err, LDS_E_NOMEM, NULL, "no memory");
    }
    /* Written through at once, so that an output that cannot be written (a
       read-only or closed fd) is refused here rather than at finish. */
    if (!put(w, hdr, sizeof hdr) || !flush_buf(w) || (w->f && fflush(w->f) != 0)) {
        int e = errno;
        char what[64];
        if (w->tmp)
            snprintf(what, sizeof what, "writing the header");
        else if (w->f)
            snprintf(what, sizeof what, "writing the header to the FILE (fd %d)", fileno(w->f));
        else
            snprintf(what, sizeof what, "writing the header to fd %d", w->fd);
        errno = e;
        return io_fail(w, err, what);
    }
    return LDS_OK;
}

lds_status lds_writer_open_fd(int fd, const lds_writer_options *opts, lds_writer **out,
                              lds_error *err)
{
    WRITER_FAIL_IF(!out, err, LDS_E_INVALID_ARG, NULL, "out is NULL");
    *out = NULL;
    WRITER_FAIL_IF(fd < 0, err, LDS_E_INVALID_ARG, NULL, "fd %d is not valid", fd);
    lds_writer *w;
    lds_status st = writer_new(opts, &w, err);
    if (st != LDS_OK)
        return st;
    w->fd = fd;
    off_t pos = lseek(fd, 0, SEEK_CUR);
    int fl = fcntl(fd, F_GETFL);
    /* Seekable means the header can be rewritten at finish; with O_APPEND, Linux
       pwrite ignores the offset and would append the header instead. A pipe or
       socket stays 1.0 with an unknown length (format.md §2.3). */
    w->seekable = pos >= 0 && fl >= 0 && !(fl & O_APPEND);
    w->start = pos >= 0 ? pos : 0;
    if ((st = writer_start(w, err)) != LDS_OK) {
        writer_destroy(w);
        return st;
    }
    *out = w;
    return LDS_OK;
}

lds_status lds_writer_open_file(FILE *f, const lds_writer_options *opts, lds_writer **out,
                                lds_error *err)
{
    WRITER_FAIL_IF(!out, err, LDS_E_INVALID_ARG, NULL, "out is NULL");
    *out = NULL;
    WRITER_FAIL_IF(!f, err, LDS_E_INVALID_ARG, NULL, "FILE is NULL");
    lds_writer *w;
    lds_status st = writer_new(opts, &w, err);
    if (st != LDS_OK)
        return st;
    w->f = f;
    off_t pos = ftello(f);
    int fd = fileno(f);
    int fl = fd >= 0 ? fcntl(fd, F_GETFL) : 0;
    w->seekable = pos >= 0 && fl >= 0 && !(fl & O_APPEND) && fseeko(f, pos, SEEK_SET) == 0;
    w->start = pos >= 0 ? pos : 0;
    if ((st = writer_start(w, err)) != LDS_OK) {
        writer_destroy(w);
        return st;
    }
    *out = w;
    return LDS_OK;
}

/* Decides where a path writer renames its file: `path` itself when nothing is
   there or a regular file is; the link's target when `path` is a symbolic link
   to a regular file (so the link survives, as with most tools that save files).
   Anything else is refused before a byte is written. `*target` is malloc'd. */
static lds_status resolve_target(const char *path, char **target, lds_error *err)
{
    struct stat st;
    *target = NULL;
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT)
            return lds__fail_errno(err, LDS_E_IO, errno, "writer: cannot stat %s: %s", path,
                                   strerror(errno));
        *target = strdup(path);
    } else if (S_ISREG(st.st_mode)) {
        *target = strdup(path);
    } else if (S_ISLNK(st.st_mode)) {
        char *real = realpath(path, NULL);
        if (!real) {
            WRITER_FAIL_IF(errno == ENOENT || errno == ENOTDIR || errno == ELOOP, err,
                           LDS_E_INVALID_ARG, "path",
                           "%s is a symbolic link whose target cannot be reached "
                           "(%s); refusing to write through it",
                           path, strerror(errno));
            return lds__fail_errno(err, LDS_E_IO, errno, "writer: cannot resolve %s: %s", path,
                                   strerror(errno));
        }
        if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
            lds_status bad = lds__fail(err, LDS_E_INVALID_ARG, "path", 0,
                                       "writer: %s is a symbolic link to %s, which is %s; only a "
                                       "regular file is replaced",
                                       path, real, lds__file_kind(st.st_mode));
            free(real);
            return bad;
        }
        *target = real;
    } else {
        return lds__fail(err, LDS_E_INVALID_ARG, "path", 0,
                         "writer: %s is %s; only a regular file is replaced", path,
                         lds__file_kind(st.st_mode));
    }
    WRITER_FAIL_IF(!*target, err, LDS_E_NOMEM, NULL, "no memory");
    return LDS_OK;
}

lds_status lds_writer_open_path(const char *path, const lds_writer_options *opts, lds_writer **out,
                                lds_error *err)
{
    WRITER_FAIL_IF(!out, err, LDS_E_INVALID_ARG, NULL, "out is NULL");
    *out = NULL;
    WRITER_FAIL_IF(!path || !*path, err, LDS_E_INVALID_ARG, NULL, "path is NULL or empty");
    lds_writer *w;
    lds_status st = writer_new(opts, &w, err);
    if (st != LDS_OK)
        return st;
    if ((st = resolve_target(path, &w->path, err)) != LDS_OK) {
        writer_destroy(w);
        return st;
    }
    path = w->path;
    /* DIR/.NAME.lds-tmp-PID-XXXXXX: hidden, beside the target (rename never crosses a
       file system), recognisable as ours if a killed writer leaves it behind, and the
       PID says whose (the CLI removes its own on SIGINT/SIGTERM/SIGHUP: ADR 0034). */
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path + 1) : 0;
    const char *base = path + dir_len;
    long pid = (long)getpid();
    size_t cap = strlen(path) + sizeof "..lds-tmp--XXXXXX" + 24;
    w->tmp = (char *)malloc(cap);
    if (!w->tmp) {
        writer_destroy(w);
        return lds__fail(err, LDS_E_NOMEM, NULL, 0, "writer: no memory");
    }
    /* Not mkstemp: it creates mode 0600, and the renamed file should get 0666 less
       the umask like any new file. O_EXCL makes a collision a retry, never a
       shared file. */
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    uint64_t now = lds__now_ns();
    uint64_t seed = now ^ (now << 20) ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)w;
    for (int attempt = 0; attempt < 100; attempt++) {
        seed = seed * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        char suffix[7];
        for (int i = 0; i < 6; i++)
            suffix[i] = alphabet[(seed >> (10 + 5 * i)) % 36];
        suffix[6] = '\0';
        snprintf(w->tmp, cap, "%.*s.%s" LDS__TMP_INFIX "%ld-%s", dir_len, path, base, pid, suffix);
        w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (w->fd >= 0 || errno != EEXIST)
            break;
    }
    if (w->fd < 0) {
        int e = errno;
        free(w->tmp);
        w->tmp = NULL; /* nothing to remove */
        st = lds__fail_errno(err, LDS_E_IO, e, "writer: cannot create a temporary file for %s: %s",
                             path, strerror(e));
        writer_destroy(w); /* frees `path` */
        return st;
    }
    w->seekable = true;
    w->start = 0;
    if ((st = writer_start(w, err)) != LDS_OK) {
        writer_destroy(w);
        return st;
    }
    *out = w;
    return LDS_OK;
}

/* Refuses a call on a finished or failed writer (LDS_E_STATE), so a caller that
   ignored an error cannot go on to produce a file. */
static lds_status check_open(lds_writer *w, lds_error *err)
{
    WRITER_FAIL_IF(!w, err, LDS_E_INVALID_ARG, NULL, "NULL writer");
    LDS__FAIL_IF_MSG(w->state != W_OPEN, err, LDS_E_STATE, NULL, 0,
                     w->state == W_DONE ? "writer: already finished"
                                        : "writer: an earlier write failed");
    return LDS_OK;
}

/* Doubles *cap until it holds `need` elements of `elem` bytes; false (nothing
   changed) on overflow or no memory. */
static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / elem)
            return false;
        nc *= 2;
    }
    void *q = realloc(*p, nc * elem);
    if (!q)
        return false;
    *p = q;
    *cap = nc;
    return true;
}

/* A key being added, against the key of a row already written. */
typedef struct key_probe {
    const lds_writer *w;
    const char *key;
    size_t len;
} key_probe;

/* Whether the key of `row`, already written, equals the key being added. */
static bool key_probe_eq(const void *ctx, uint64_t row)
{
    const key_probe *k = (const key_probe *)ctx;
    uint64_t a = k->w->koffs[row], b = k->w->koffs[row + 1];
    return b - a == k->len && memcmp(k->w->kbytes + a, k->key, k->len) == 0;
}

/* A written row's key hash, for the table to place its rows again when it grows:
   its 8-byte slots hold a row and a few bits of the hash, not the whole hash. */
static uint64_t key_rehash(const void *ctx, uint64_t row)
{
    const lds_writer *w = (const lds_writer *)ctx;
    uint64_t a = w->koffs[row], b = w->koffs[row + 1];
    return lds__hash_key(w->keys.hk, w->kbytes + a, (size_t)(b - a));
}

void lds__writer_key_probe_stats(const lds_writer *w, lds__probe_stats *out)
{
    lds__hashtab_stats(w && w->o.unique_keys ? &w->keys : NULL, out);
}

uint64_t lds__writer_dup_row(const lds_writer *w)
{
    return w ? w->dup_row : 0;
}

/* x (dim floats, already normalized when asked) into w->row_out in the stored
   dtype, little-endian. */
static void encode_row(lds_writer *w, const float *x)
{
    uint8_t *o = w->row_out;
    uint32_t dim = w->o.dim;
    switch (w->o.dtype) {
    case LDS_DTYPE_F32:
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* The stored bytes are the floats' own on a little-endian host (a copy; ADR 0022). */
        memcpy(o, x, (size_t)dim * sizeof *x);
#else
        for (uint32_t i = 0; i < dim; i++)
            lds__st32(o + 4 * (size_t)i, lds__f32_bits(x[i]));
#endif
        break;
    case LDS_DTYPE_F16:
        for (uint32_t i = 0; i < dim; i++)
            lds__st16(o + 2 * (size_t)i, lds_f32_to_f16(x[i]));
        break;
    case LDS_DTYPE_BF16:
        for (uint32_t i = 0; i < dim; i++)
            lds__st16(o + 2 * (size_t)i, lds_f32_to_bf16(x[i]));
        break;
    case LDS_DTYPE_I8:
        /* check_i8_range has proved every quotient rounds into [-127, 127]. */
        for (uint32_t i = 0; i < dim; i++)
            o[i] = (uint8_t)(int8_t)rintf(x[i] / w->o.i8_scale);
        break;
    }
}

/* Refuses an i8 row holding a value the scale cannot represent: one whose
   quotient x / scale rounds beyond +-127. Clamping it would lose data silently. */
static lds_status check_i8_range(const lds_writer *w, const float *x, const char *key,
                                 size_t key_len, lds_error *err)
{
    float scale = w->o.i8_scale;
    for (uint32_t i = 0; i < w->o.dim; i++) {
        float q = rintf(x[i] / scale);
        if (q >= -127.0f && q <= 127.0f)
            continue;
        char named[96] = "";
        if (w->o.with_keys)
            snprintf(named, sizeof named, " (key \"%.*s\")", (int)(key_len > 64 ? 64 : key_len),
                     key);
        return lds__fail(err, LDS_E_BAD_VALUE, "i8_scale", 0,
                         "writer: row %llu%s element %u is %g%s, outside the i8 range +-%g "
                         "(127 x i8_scale %g); pick i8_scale >= max |x| / 127",
                         (unsigned long long)w->rows, named, (unsigned)i, (double)x[i],
                         w->o.normalize ? " after normalization" : "", 127.0 * scale,
                         (double)scale);
    }
    return LDS_OK;
}

/* Refuses an encoded f16 or bf16 row in which a finite value became infinity:
   storing +-inf silently would poison every later search (as clamping would
   lose data), so it is refused like an i8 value outside its range. */
static lds_status check_half_range(const lds_writer *w, const float *x, const char *key,
                                   size_t key_len, lds_error *err)
{
    uint16_t inf = w->o.dtype == LDS_DTYPE_F16 ? 0x7c00u : 0x7f80u;
    for (uint32_t i = 0; i < w->o.dim; i++) {
        if ((lds__ld16(w->row_out + 2 * (size_t)i) & inf) != inf)
            continue;
        char named[96] = "";
        if (w->o.with_keys)
            snprintf(named, sizeof named, " (key \"%.*s\")", (int)(key_len > 64 ? 64 : key_len),
                     key);
        return lds__fail(err, LDS_E_BAD_VALUE, "dtype", 0,
                         "writer: row %llu%s element %u is %g%s, beyond the finite range of "
                         "%s (+-%g); it would be stored as infinity",
                         (unsigned long long)w->rows, named, (unsigned)i, (double)x[i],
                         w->o.normalize ? " after normalization" : "", lds_dtype_name(w->o.dtype),
                         w->o.dtype == LDS_DTYPE_F16 ? 65504.0 : (double)lds_bf16_to_f32(0x7f7fu));
    }
    return LDS_OK;
}

/* K4, K6 and K7 for the key of the row being added; a NULL key of length 0 is the
   empty key (*key becomes ""). *key_hash is set when keys are unique, for the
   insert that follows once the row is written. */
static lds_status check_key(lds_writer *w, const char **keyp, size_t key_len, uint64_t *key_hash,
                            lds_error *err)
{
    const char *key = *keyp;
    WRITER_FAIL_IF(!key && key_len > 0, err, LDS_E_INVALID_ARG, NULL, "row %llu: key is NULL",
                   (unsigned long long)w->rows);
    if (!key)
        key = *keyp = "";
    /* K4 */
    WRITER_FAIL_IF(key_len > LDS_DEFAULT_MAX_KEY_BYTES, err, LDS_E_LIMIT, NULL,
                   "row %llu: the key is %zu bytes, above %llu", (unsigned long long)w->rows,
                   key_len, (unsigned long long)LDS_DEFAULT_MAX_KEY_BYTES);
    size_t bad;
    const char *why;
    /* K6 */
    WRITER_FAIL_IF(!lds__utf8_valid((const uint8_t *)key, key_len, &bad, &why), err, LDS_E_BAD_UTF8,
                   NULL, "row %llu: the key is not valid UTF-8 at byte %zu (%s)",
                   (unsigned long long)w->rows, bad, why);
    if (!w->o.unique_keys)
        return LDS_OK;
    key_probe k = {w, key, key_len};
    *key_hash = lds__hash_key(w->keys.hk, key, key_len);
    /* K7: found as the row is added, so the row named is the later one */
    WRITER_FAIL_IF(lds__hashtab_find(&w->keys, *key_hash, key_probe_eq, &k, &w->dup_row), err,
                   LDS_E_DUP_KEY, NULL, "row %llu: key \"%.*s\" repeats row %llu",
                   (unsigned long long)w->rows, (int)(key_len > 64 ? 64 : key_len), key,
                   (unsigned long long)w->dup_row);
    return LDS_OK;
}

/* Reserves the room a row's id, key and key-table slot take, before a byte of the
   row is written: a refusal then leaves no partial row behind. */
static bool reserve_row(lds_writer *w, size_t key_len)
{
    bool ok = true;
    if (w->o.with_ids)
        ok = grow((void **)&w->ids, &w->ids_cap, (size_t)w->rows + 1, sizeof(uint64_t));
    if (ok && w->o.with_keys)
        ok = grow((void **)&w->koffs, &w->koffs_cap, (size_t)w->rows + 2, sizeof(uint64_t)) &&
             grow((void **)&w->kbytes, &w->kb_cap, w->kb_len + key_len, 1);
    if (ok && w->o.unique_keys)
        ok = lds__hashtab_reserve(&w->keys, w->rows + 1, key_rehash, w);
    return ok;
}

bool lds__writer_claim_unique = false;

lds_status lds_writer_add_row(lds_writer *w, const float *vec, size_t dim, uint64_t id,
                              const char *key, size_t key_len, lds_error *err)
{
    lds_status st = check_open(w, err);
    if (st != LDS_OK)
        return st;
    WRITER_FAIL_IF(!vec || dim != w->o.dim, err, LDS_E_INVALID_ARG, NULL,
                   "row %llu has %zu elements, the writer %u%s", (unsigned long long)w->rows,
                   vec ? dim : 0, (unsigned)w->o.dim, vec ? "" : " (vec is NULL)");
    /* T1 */
    WRITER_FAIL_IF(w->rows >= LDS_DEFAULT_MAX_ROWS, err, LDS_E_LIMIT, NULL, "more than %llu rows",
                   (unsigned long long)LDS_DEFAULT_MAX_ROWS);
    double ss = 0.0;
    uint64_t key_hash = 0;
    /* One pass over the exponent fields (vectorised), the first bad element looked for
       only when there is one; the norm only when it is used (ADR 0022). */
    uint32_t nonfinite = 0;
    for (size_t i = 0; i < dim; i++)
        nonfinite |= (uint32_t)((lds__f32_bits(vec[i]) & 0x7f800000u) == 0x7f800000u);
    for (size_t i = 0; nonfinite && i < dim; i++)
        WRITER_FAIL_IF(!isfinite(vec[i]), err, LDS_E_BAD_VALUE, NULL,
                       "row %llu element %zu is %g, not a finite number",
                       (unsigned long long)w->rows, i, (double)vec[i]);
    if (w->o.normalize)
        for (size_t i = 0; i < dim; i++)
            ss += (double)vec[i] * vec[i];
    if (w->o.with_keys && (st = check_key(w, &key, key_len, &key_hash, err)) != LDS_OK)
        return st;
    /* A zero row has no direction: storing it under the normalized flag would be a lie. */
    WRITER_FAIL_IF(w->o.normalize && !(ss > 0.0 && isfinite(ss)), err, LDS_E_BAD_VALUE, "normalize",
                   "row %llu: cannot normalize a row whose L2 norm is %g",
                   (unsigned long long)w->rows, sqrt(ss));
    if (!reserve_row(w, key_len)) {
        w->state = W_FAILED;
        return lds__fail(err, LDS_E_NOMEM, NULL, 0, "writer: no memory at row %llu",
                         (unsigned long long)w->rows);
    }

    const float *x = vec;
    if (w->o.normalize) {
        double n = sqrt(ss);
        for (size_t i = 0; i < dim; i++)
            w->row_tmp[i] = (float)(vec[i] / n);
        x = w->row_tmp;
    }
    /* i8 is checked before encoding (the quotient is what overflows); f16 and bf16
       after, because only the encoded bits say whether a value became infinity. */
    if (w->o.dtype == LDS_DTYPE_I8 && (st = check_i8_range(w, x, key, key_len, err)) != LDS_OK)
        return st;
    encode_row(w, x);
    if ((w->o.dtype == LDS_DTYPE_F16 || w->o.dtype == LDS_DTYPE_BF16) &&
        (st = check_half_range(w, x, key, key_len, err)) != LDS_OK)
        return st;
    if (!put_payload(w, w->row_out, w->row_bytes))
        return io_fail(w, err, "writing a row");

    if (w->o.with_ids)
        w->ids[w->rows] = id;
    if (w->o.with_keys) {
        if (key_len > 0)
            memcpy(w->kbytes + w->kb_len, key, key_len);
        w->kb_len += key_len;
        w->koffs[w->rows + 1] = w->kb_len;
        if (w->o.unique_keys) {
            key_probe k = {w, key, key_len};
            lds__hashtab_insert(&w->keys, key_hash, w->rows, key_probe_eq, &k);
        }
    }
    w->rows++;
    return LDS_OK;
}

/* Bytes a metadata entry takes in the section (two lengths and two strings). */
static uint64_t entry_bytes(const char *k, const char *v)
{
    return 8 + (uint64_t)strlen(k) + strlen(v);
}

/* Bytes of the count and the two entries written from the options. */
static uint64_t auto_meta_bytes(const lds_writer *w)
{
    return 4 + entry_bytes("metric", lds_metric_name(w->o.metric)) +
           entry_bytes("normalized", w->o.normalize ? "true" : "false");
}

lds_status lds_writer_set_meta(lds_writer *w, const char *key, const char *value, lds_error *err)
{
    lds_status st = check_open(w, err);
    if (st != LDS_OK)
        return st;
    /* M4 (and M6 holds by construction: a C string has no NUL inside) */
    WRITER_FAIL_IF(!key || !*key || !value, err, LDS_E_INVALID_ARG, NULL,
                   "metadata key and value must be non-NULL, the key non-empty");
    /* M8: the two entries are written from the options, so they cannot disagree with the table */
    WRITER_FAIL_IF(strcmp(key, "metric") == 0 || strcmp(key, "normalized") == 0, err,
                   LDS_E_INVALID_ARG, NULL, "metadata \"%s\" is written from the options", key);
    size_t bad;
    const char *why;
    /* M5 */
    WRITER_FAIL_IF(!lds__utf8_valid((const uint8_t *)key, strlen(key), &bad, &why), err,
                   LDS_E_BAD_UTF8, NULL, "metadata key is not valid UTF-8 at byte %zu (%s)", bad,
                   why);
    /* M5 */
    WRITER_FAIL_IF(!lds__utf8_valid((const uint8_t *)value, strlen(value), &bad, &why), err,
                   LDS_E_BAD_UTF8, NULL,
                   "metadata \"%s\" value is not valid UTF-8 at byte %zu (%s)", key, bad, why);
    size_t at = w->meta_n;
    for (size_t i = 0; i < w->meta_n; i++)
        if (strcmp(w->meta[i].key, key) == 0)
            at = i;
    uint64_t total = auto_meta_bytes(w) + w->meta_user_bytes + entry_bytes(key, value);
    if (at < w->meta_n)
        total -= entry_bytes(w->meta[at].key, w->meta[at].value);
    /* M1: counted with the two automatic entries, as a reader counts them */
    WRITER_FAIL_IF(total > LDS_DEFAULT_MAX_METADATA_BYTES, err, LDS_E_LIMIT, NULL,
                   "metadata would be %llu bytes, above %llu", (unsigned long long)total,
                   (unsigned long long)LDS_DEFAULT_MAX_METADATA_BYTES);
    char *v = strdup(value);
    char *k = at < w->meta_n ? NULL : strdup(key);
    if (!v || (at == w->meta_n &&
               (!k || !grow((void **)&w->meta, &w->meta_cap, w->meta_n + 1, sizeof(meta_entry))))) {
        free(v);
        free(k);
        return lds__fail(err, LDS_E_NOMEM, NULL, 0, "writer: no memory for metadata");
    }
    if (at < w->meta_n) {
        w->meta_user_bytes -= entry_bytes(w->meta[at].key, w->meta[at].value);
        free(w->meta[at].value);
        w->meta[at].value = v;
    } else {
        w->meta[at].key = k;
        w->meta[at].value = v;
        w->meta_n++;
    }
    w->meta_user_bytes += entry_bytes(key, value);
    return LDS_OK;
}

uint64_t lds_writer_rows(const lds_writer *w)
{
    return w ? w->rows : 0;
}

/* n values as little-endian integers of `width` bytes (4: key offsets that fit),
   through a small buffer rather than a put per value. */
static bool put_u64s(lds_writer *w, const uint64_t *v, uint64_t n, unsigned width)
{
    uint8_t chunk[512];
    size_t used = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (width == 4)
            lds__st32(chunk + used, (uint32_t)v[i]);
        else
            lds__st64(chunk + used, v[i]);
        used += width;
        if (used == sizeof chunk) {
            if (!put_payload(w, chunk, used))
                return false;
            used = 0;
        }
    }
    return put_payload(w, chunk, used);
}

/* A metadata string: a 4-byte length, then its bytes (no NUL). */
static bool put_string(lds_writer *w, const char *s)
{
    uint8_t len[4];
    size_t n = strlen(s);
    lds__st32(len, (uint32_t)n);
    return put_payload(w, len, 4) && put_payload(w, s, n);
}

/* fsync of the directory that holds `path`: a rename is durable only once its
   directory is on disk. */
static bool fsync_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir)
        return false;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0)
        return false;
    bool ok = fsync(fd) == 0 || errno == EINVAL; /* some file systems cannot sync directories */
    close(fd);
    return ok;
}

/* One entry of the section table as the writer fills it in. */
typedef struct section_out {
    uint32_t kind;
    uint64_t offset, length;
} section_out;

/* Writes the sections after the rows (ids, keys, metadata: format.md §3), each
   padded to 64 so that S5's offsets follow; the vectors' entry is sec[0]. Returns
   the number of entries and the table flags they imply, or 0 on a write failure
   (errno set by the write). */
static unsigned write_sections(lds_writer *w, section_out sec[4], uint32_t *flags_out,
                               const char **what)
{
    unsigned ns = 0;
    uint32_t flags = 0;
    sec[ns].kind = LDS__KIND_VECTORS;
    sec[ns].offset = 0;
    sec[ns++].length = w->payload;
    uint64_t a = w->align = section_align(w);
    *what = "writing padding";
    if (!pad_to(w, a))
        return 0;
    if (w->o.with_ids) {
        flags |= LDS__TF_HAS_IDS;
        sec[ns].kind = LDS__KIND_IDS;
        sec[ns].offset = w->payload;
        *what = "writing the ids";
        if (!put_u64s(w, w->ids, w->rows, 8) || !pad_to(w, a))
            return 0;
        sec[ns].length = w->rows * 8;
        ns++;
    }
    if (w->o.with_keys) {
        /* 32-bit offsets halve the offsets' bytes whenever the key bytes allow it,
           which is nearly always; the flag tells the reader which width it got. */
        unsigned width = w->kb_len <= UINT32_MAX ? 4 : 8;
        flags |= LDS__TF_HAS_KEYS | (width == 4 ? LDS__TF_KEYS_OFFSETS32 : 0) |
                 (w->o.unique_keys || lds__writer_claim_unique ? LDS__TF_KEYS_UNIQUE : 0);
        sec[ns].kind = LDS__KIND_KEYS;
        sec[ns].offset = w->payload;
        *what = "writing the keys";
        /* CHUNK_ALIGNED: the key bytes start on a chunk boundary too (rule K8), so
           offsets growing by an append move them by whole chunks. */
        if (!put_u64s(w, w->koffs, w->rows + 1, width) || !pad_to(w, a == 64 ? 1 : a) ||
            !put_payload(w, w->kbytes, w->kb_len))
            return 0;
        sec[ns].length = w->payload - sec[ns].offset;
        ns++;
        *what = "writing padding";
        if (!pad_to(w, a))
            return 0;
    }
    if (w->o.normalize)
        flags |= LDS__TF_NORMALIZED;
    /* metric and normalized come first and from the options, so that M8 (they agree
       with the table) holds for every file this writer makes. */
    sec[ns].kind = LDS__KIND_METADATA;
    sec[ns].offset = w->payload;
    uint8_t count[4];
    lds__st32(count, (uint32_t)(w->meta_n + 2));
    bool ok = put_payload(w, count, 4) && put_string(w, "metric") &&
              put_string(w, lds_metric_name(w->o.metric)) && put_string(w, "normalized") &&
              put_string(w, w->o.normalize ? "true" : "false");
    for (size_t i = 0; ok && i < w->meta_n; i++)
        ok = put_string(w, w->meta[i].key) && put_string(w, w->meta[i].value);
    sec[ns].length = w->payload - sec[ns].offset;
    ns++;
    *what = "writing the metadata";
    if (!ok || !pad64(w))
        return 0;
    *flags_out = flags;
    return ns;
}

/* Writes the section table and the footer (format.md §4.2, §4.3): the table is
   last so that the writer can stream rows without knowing how many will come. */
static bool write_table(lds_writer *w, const section_out *sec, unsigned ns, uint32_t flags)
{
    uint8_t table[LDS__TABLE_HEAD + 4 * LDS__ENTRY_SIZE];
    memset(table, 0, sizeof table);
    uint64_t table_offset = w->payload;
    lds__st64(table, w->rows);
    lds__st32(table + 8, w->o.dim);
    lds__st16(table + 12, (uint16_t)w->o.dtype);
    lds__st16(table + 14, (uint16_t)w->o.metric);
    lds__st32(table + 16, w->o.dtype == LDS_DTYPE_I8 ? lds__f32_bits(w->o.i8_scale) : 0);
    lds__st32(table + 20, flags);
    lds__st32(table + 24, ns);
    lds__st32(table + 28, LDS__ENTRY_SIZE);
    for (unsigned i = 0; i < ns; i++) {
        uint8_t *e = table + LDS__TABLE_HEAD + i * LDS__ENTRY_SIZE;
        lds__st32(e, sec[i].kind);
        lds__st64(e + 8, sec[i].offset);
        lds__st64(e + 16, sec[i].length);
    }
    size_t table_len = LDS__TABLE_HEAD + ns * LDS__ENTRY_SIZE;
    uint8_t footer[LDS_FOOTER_SIZE];
    memset(footer, 0, sizeof footer);
    lds__st64(footer, table_offset);
    lds__st64(footer + 8, table_len);
    memcpy(footer + 24, LDS__FOOTER_MAGIC, 8);
    return put_payload(w, table, table_len) && put_payload(w, footer, sizeof footer);
}

/* Writes the checksum and, for a 1.1 file, the chunk table after it; fills in the
   header that describes what was written. */
static lds_status write_tail(lds_writer *w, lds_header *h, lds_error *err)
{
    uint8_t sum[LDS_CHECKSUM_SIZE];
    lds__st64(sum, XXH3_64bits_digest(w->hash));
    w->payload += LDS_CHECKSUM_SIZE;
    if (!put(w, sum, sizeof sum))
        return io_fail(w, err, "writing the checksum");
    /* Format 1.1 needs the header rewritten with the table's place and hash: only
       a seekable output gets it (format.md §2.5); the others stay 1.0. */
    memset(h, 0, sizeof *h);
    h->major = LDS_FORMAT_MAJOR;
    if (w->chunk_bytes && w->seekable) {
        /* The checksum is covered by the last chunk (C4: chunks cover [0, D)). */
        if (!chunk_feed(w, sum, sizeof sum) || (w->chunk_fill > 0 && !chunk_close(w)))
            return io_fail(w, err, "hashing the chunks");
        h->minor = w->align > 64 ? 2 : 1;
        h->flags = LDS_HEADER_CHUNKED | (w->align > 64 ? LDS_HEADER_CHUNK_ALIGNED : 0);
        h->chunk_bytes = w->chunk_bytes;
        h->chunk_table_offset = w->payload;
        h->chunk_count = w->n_chunks;
        uint8_t e[8];
        XXH3_64bits_reset(w->chash);
        for (size_t i = 0; i < w->n_chunks; i++) {
            lds__st64(e, w->chunks[i]);
            XXH3_64bits_update(w->chash, e, sizeof e);
            if (!put(w, e, sizeof e))
                return io_fail(w, err, "writing the chunk table");
        }
        h->chunk_table_hash = XXH3_64bits_digest(w->chash);
        w->payload += 8 * (uint64_t)w->n_chunks;
    }
    h->payload_length = w->payload;
    if (!flush_buf(w))
        return io_fail(w, err, "writing the checksum");
    return LDS_OK;
}

/* Replaces the placeholder header (length unknown) written at open with the real
   one; pwrite leaves an fd's position at the end, where a caller expects it. */
static lds_status rewrite_header(lds_writer *w, const lds_header *h, lds_error *err)
{
    uint8_t hdr[LDS_HEADER_SIZE];
    lds_header_encode(h, hdr);
    if (w->f) {
        off_t end = w->start + (off_t)LDS_HEADER_SIZE + (off_t)w->payload;
        if (fflush(w->f) != 0 || fseeko(w->f, w->start, SEEK_SET) != 0 ||
            fwrite(hdr, 1, sizeof hdr, w->f) != sizeof hdr || fseeko(w->f, end, SEEK_SET) != 0)
            return io_fail(w, err, "rewriting the header");
        return LDS_OK;
    }
    size_t done = 0;
    while (done < sizeof hdr) {
        ssize_t k = pwrite(w->fd, hdr + done, sizeof hdr - done, w->start + (off_t)done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return io_fail(w, err, "rewriting the header");
        done += (size_t)k;
    }
    return LDS_OK;
}

/* A path writer's last step: the temporary file is synced before it is renamed
   over the target, so a crash leaves either the old file or the whole new one,
   and the directory is synced so that the rename itself survives a crash. */
static lds_status commit_path(lds_writer *w, lds_error *err)
{
    if (fsync(w->fd) != 0)
        return io_fail(w, err, "fsync of the temporary file");
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0)
        return io_fail(w, err, "closing the temporary file");
    if (rename(w->tmp, w->path) != 0)
        return io_fail(w, err, "renaming the temporary file");
    /* Done from here on: the file is in place, and the destructor must not remove it. */
    w->state = W_DONE;
    if (!fsync_dir_of(w->path))
        return lds__fail_errno(err, LDS_E_IO, errno,
                               "writer: %s is in place, but fsync of its directory failed: %s",
                               w->path, strerror(errno));
    return LDS_OK;
}

lds_status lds_writer_finish(lds_writer *w, lds_error *err)
{
    lds_status st = check_open(w, err);
    if (st != LDS_OK)
        return st;
    /* A forced chunk layout pads each section after the vectors to a chunk boundary:
       with chunks longer than the vectors, that is up to four chunks of zeros around a
       smaller payload (--chunk-bytes 1G on a small input wrote 3 GiB; found by a
       tester). Refused here, when the vectors' length is first known, once a chunk is
       over 16 MiB (small chunks pad little whatever the payload: tests pack 0 rows so). */
    if (w->chunk_bytes && w->seekable && w->o.layout == LDS_LAYOUT_CHUNK_ALIGNED &&
        w->chunk_bytes > (16u << 20) && w->payload < w->chunk_bytes) {
        w->state = W_FAILED;
        return lds__fail(err, LDS_E_INVALID_ARG, "lds_writer_options.layout", 0,
                         "lds_writer_options.layout: writer: LDS_LAYOUT_CHUNK_ALIGNED pads every "
                         "section to a chunk of %u bytes (over 16 MiB), longer than the %llu "
                         "bytes of vectors; "
                         "use smaller chunks or LDS_LAYOUT_AUTO (packed below %u chunks)",
                         w->chunk_bytes, (unsigned long long)w->payload,
                         LDS_LAYOUT_AUTO_MIN_CHUNKS);
    }
    section_out sec[4];
    uint32_t flags = 0;
    const char *what = "";
    unsigned ns = write_sections(w, sec, &flags, &what);
    if (ns == 0)
        return io_fail(w, err, what);
    if (!write_table(w, sec, ns, flags))
        return io_fail(w, err, "writing the section table");
    lds_header h;
    if ((st = write_tail(w, &h, err)) != LDS_OK)
        return st;
    if (w->seekable && (st = rewrite_header(w, &h, err)) != LDS_OK)
        return st;
    if (w->f && fflush(w->f) != 0)
        return io_fail(w, err, "flushing the stream");
    if (w->tmp && (st = commit_path(w, err)) != LDS_OK)
        return st;
    w->state = W_DONE;
    return LDS_OK;
}
