/* The error helper of every importer, and the buffered reader over a file descriptor
   (lines, bytes, a byte-order mark, a peek) whose bytes come from decode.c. */
#include "import_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

lds_status lds__imp_fail(lds_error *err, lds_status status, const char *field, uint64_t offset,
                         uint64_t line, const char *fmt, ...)
{
    /* Importer messages say where in their own words (line, row, byte). */
    int e = status == LDS_E_IO ? errno : 0;
    va_list ap;
    va_start(ap, fmt);
    lds_status st = lds__error_vfill(err, status, field, offset, false, line, e, NULL, fmt, ap);
    va_end(ap);
    return st;
}

const char *lds__imp_noun(const char *field)
{
    if (strcmp(field, "ids_path") == 0)
        return "ids file line";
    return strcmp(field, "keys_path") == 0 ? "keys file line" : field;
}

lds_status lds__imp_reader_open(lds__imp_reader *r, const char *path, const char *field,
                                size_t max_line, lds_error *err)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->field = field;
    r->max_line = max_line;
    /* The keys and ids files are read twice (their lines are counted first) and a device
       or a pipe may never end: each must be a regular file, checked before a byte is read
       (and opened without waiting for a FIFO's writer). */
    bool ids = strcmp(field, "ids_path") == 0;
    bool keys = ids || strcmp(field, "keys_path") == 0;
    const char *what = ids ? "the ids file " : keys ? "the keys file " : "";
    int e = lds__os_open(path, O_RDONLY | (keys ? O_NONBLOCK : 0), &r->fd);
    if (e != 0) {
        errno = e;
        return lds__imp_fail(err, LDS_E_IO, field, 0, 0, "cannot open %s%s: %s", what, path,
                             strerror(e));
    }
    struct stat st;
    if ((e = lds__os_fstat(r->fd, &st)) != 0) {
        errno = e;
        return lds__imp_fail(err, LDS_E_IO, field, 0, 0, "cannot stat %s%s: %s", what, path,
                             strerror(e));
    }
    if (keys && !S_ISREG(st.st_mode))
        return lds__imp_fail(err, LDS_E_INVALID_ARG, field, 0, 0,
                             "%s%s is %s; it must be a regular file", what, path,
                             lds__file_kind(st.st_mode));
    if (S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        return lds__imp_fail(err, LDS_E_IO, field, 0, 0, "%s is a directory", path);
    }
    r->size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : UINT64_MAX;
    r->dev = st.st_dev;
    r->ino = st.st_ino;
    r->cap = LDS__IMP_CHUNK;
    r->buf = malloc(r->cap);
    if (!r->buf)
        return lds__imp_fail(err, LDS_E_NOMEM, field, 0, 0, "out of memory (read buffer)");
    r->next_report = LDS__IMP_PROGRESS_STEP;
    r->raw_left = UINT64_MAX;
    r->file_size = r->size;
    r->max_decoded = UINT64_MAX;
    return LDS_OK;
}

lds_status lds__imp_reader_detect(lds__imp_reader *r, lds_error *err)
{
    while (r->len < 6 && !r->eof) {
        lds_status st = lds__imp_reader_fill(r, err);
        if (st != LDS_OK)
            return st;
    }
    const unsigned char *b = r->buf;
    lds__imp_codec codec = LDS__CODEC_NONE;
    if (r->len >= 2 && b[0] == 0x1f && b[1] == 0x8b)
        codec = LDS__CODEC_GZIP; /* RFC 1952 2.3.1 ID1 ID2 */
    else if (lds__is_zstd(b, r->len))
        codec = LDS__CODEC_ZSTD;
    else if (r->len >= 6 && memcmp(b,
                                   "\xFD"
                                   "7zXZ\0",
                                   6) == 0)
        codec = LDS__CODEC_XZ; /* .xz file format 2.1.1.1 header magic */
    if (codec == LDS__CODEC_NONE)
        return LDS_OK;
    lds_status st = lds__imp_codec_start(r, codec, err);
    if (st != LDS_OK)
        return st;
    /* The bytes already read are the decoder's first input. */
    memcpy(r->zbuf, r->buf, r->len);
    r->zpos = 0;
    r->zlen = r->len;
    r->zeof = r->eof;
    r->pos = r->len = 0;
    r->base = 0;
    r->eof = false;
    r->size = UINT64_MAX;
    return LDS_OK;
}

lds_status lds__imp_reader_restart(lds__imp_reader *r, uint64_t offset, uint64_t length,
                                   lds__imp_codec codec, lds_error *err)
{
    if (offset > (uint64_t)INT64_MAX || lseek(r->fd, (off_t)offset, SEEK_SET) < 0)
        return lds__imp_fail(err, LDS_E_IO, r->field, offset, 0, "cannot seek to byte %llu: %s",
                             (unsigned long long)offset, strerror(errno));
    lds_status st = lds__imp_codec_start(r, codec, err);
    if (st != LDS_OK)
        return st;
    r->pos = r->len = 0;
    r->base = 0;
    r->eof = false;
    r->zpos = r->zlen = 0;
    r->zeof = false;
    r->raw_left = length;
    r->raw_read = 0;
    r->file_base = offset;
    r->size = codec == LDS__CODEC_NONE ? length : UINT64_MAX;
    r->crc_on = false;
    r->crc = 0;
    r->delivered = 0;
    return LDS_OK;
}

void lds__imp_reader_close(lds__imp_reader *r)
{
    if (r->fd >= 0)
        close(r->fd);
    lds__imp_codec_end(r);
    free(r->zbuf);
    free(r->buf);
    memset(r, 0, sizeof *r);
    r->fd = -1;
}

uint64_t lds__imp_reader_offset(const lds__imp_reader *r)
{
    return r->base + r->pos;
}

/* Moves the unconsumed bytes to the front, grows the buffer if it is full
   (a long line), and reads once more. Sets eof at the end of the file. */
lds_status lds__imp_reader_fill(lds__imp_reader *r, lds_error *err)
{
    if (r->eof)
        return LDS_OK;
    if (r->pos > 0) {
        memmove(r->buf, r->buf + r->pos, r->len - r->pos);
        r->base += r->pos;
        r->len -= r->pos;
        r->pos = 0;
    }
    if (r->len + 1 >= r->cap) {
        size_t cap = r->cap * 2;
        unsigned char *p = realloc(r->buf, cap);
        if (!p)
            return lds__imp_fail(err, LDS_E_NOMEM, r->field, r->base, 0,
                                 "out of memory (line buffer of %zu bytes)", cap);
        r->buf = p;
        r->cap = cap;
    }
    size_t n = 0;
    lds_status st = lds__imp_source_read(r, r->buf + r->len, r->cap - 1 - r->len, &n, err);
    if (st != LDS_OK)
        return st;
    if (n == 0)
        r->eof = true;
    r->len += n;
    /* Progress counts the file's bytes (compressed ones when it is compressed). */
    uint64_t done = r->raw_read;
    if (r->progress && done >= r->next_report) {
        r->progress(done, r->file_size == UINT64_MAX ? 0 : r->file_size, r->progress_ctx);
        r->next_report = done + LDS__IMP_PROGRESS_STEP;
    }
    return LDS_OK;
}

void lds__imp_reader_progress_done(lds__imp_reader *r)
{
    uint64_t done = r->raw_read;
    if (r->progress)
        r->progress(done, r->file_size == UINT64_MAX ? done : r->file_size, r->progress_ctx);
}

lds_status lds__imp_reader_line(lds__imp_reader *r, uint64_t lineno, char **line, size_t *len,
                                uint64_t *offset, lds_error *err)
{
    size_t scanned = 0; /* bytes after pos already known to hold no LF */
    size_t end;
    bool had_lf = false;
    for (;;) {
        unsigned char *nl = memchr(r->buf + r->pos + scanned, '\n', r->len - r->pos - scanned);
        if (nl) {
            end = (size_t)(nl - r->buf);
            had_lf = true;
            break;
        }
        scanned = r->len - r->pos;
        if (scanned > r->max_line || r->eof) {
            end = r->len;
            break;
        }
        lds_status st = lds__imp_reader_fill(r, err);
        if (st != LDS_OK)
            return st;
    }
    size_t n = end - r->pos;
    *offset = r->base + r->pos;
    if (n > r->max_line)
        return lds__imp_fail(err, LDS_E_LIMIT, r->field, *offset, lineno,
                             "%s %llu (byte %llu): longer than %zu bytes, the most that %s",
                             lds__imp_noun(r->field), (unsigned long long)lineno,
                             (unsigned long long)*offset, r->max_line,
                             strcmp(r->field, "ids_path") == 0 ? "an id line may hold"
                                                               : "max_dim and max_key_bytes allow");
    if (n == 0 && !had_lf) {
        *line = NULL; /* end of input */
        *len = 0;
        return LDS_OK;
    }
    *line = (char *)r->buf + r->pos;
    if (n > 0 && (*line)[n - 1] == '\r')
        n--;
    (*line)[n] = '\0';
    *len = n;
    r->pos = had_lf ? end + 1 : end;
    return LDS_OK;
}

lds_status lds__imp_reader_read(lds__imp_reader *r, void *dst, size_t n, size_t *got,
                                lds_error *err)
{
    unsigned char *out = dst;
    size_t done = 0;
    while (done < n) {
        if (r->pos == r->len) {
            if (r->eof)
                break;
            lds_status st = lds__imp_reader_fill(r, err);
            if (st != LDS_OK)
                return st;
            continue;
        }
        size_t k = r->len - r->pos;
        if (k > n - done)
            k = n - done;
        memcpy(out + done, r->buf + r->pos, k);
        r->pos += k;
        done += k;
    }
    *got = done;
    return LDS_OK;
}

lds_status lds__imp_reader_skip_bom(lds__imp_reader *r, lds_error *err)
{
    if (r->base != 0 || r->pos != 0)
        return LDS_OK;
    while (r->len < 3 && !r->eof) {
        lds_status st = lds__imp_reader_fill(r, err);
        if (st != LDS_OK)
            return st;
    }
    if (r->len >= 3 && memcmp(r->buf, "\xEF\xBB\xBF", 3) == 0)
        r->pos = 3;
    return LDS_OK;
}

lds_status lds__imp_reader_peek(lds__imp_reader *r, int *byte, lds_error *err)
{
    while (r->pos == r->len && !r->eof) {
        lds_status st = lds__imp_reader_fill(r, err);
        if (st != LDS_OK)
            return st;
    }
    *byte = r->pos < r->len ? r->buf[r->pos] : -1;
    return LDS_OK;
}
