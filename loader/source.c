/*
 * Byte sources: the raw transports (fd, FILE*, read callback, memory) and the
 * zstd decoding layer that turns a compressed transport into the logical
 * stream the loader reads (header, then payload).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "load_internal.h"

void *(*lds__load_mmap)(void *addr, size_t length, int prot, int flags, int fd,
                        off_t offset) = mmap;

lds_status lds__load_fail(lds_error *err, lds_status status, const char *field, uint64_t offset,
                          int sys_errno, const char *zstd_error, const char *fmt, ...)
{
    /* A refusal of the input names the byte it is about; a bad argument has none. */
    va_list ap;
    va_start(ap, fmt);
    lds_status st =
        lds__error_vfill(err, status, field, offset, field != NULL && status != LDS_E_INVALID_ARG,
                         0, sys_errno, zstd_error, fmt, ap);
    va_end(ap);
    return st;
}

void lds__source_init(lds__source *src, enum lds__source_kind kind, const lds_load_options *opts)
{
    memset(src, 0, sizeof *src);
    src->kind = kind;
    src->fd = -1;
    src->opts = opts;
    src->frame_content_size = ZSTD_CONTENTSIZE_UNKNOWN;
}

static bool cancelled(const lds__source *src)
{
    return src->opts != NULL && src->opts->cancel != NULL &&
           src->opts->cancel(src->opts->callback_ctx);
}

/* How long a read from a pipe or socket waits before cancel is asked again (ADR 0051): a
 * cancel hook answered by another thread, or a SIGINT handled after cancel's last answer
 * but before read() blocked (or taken by another thread), gets no EINTR in this thread. */
#define LDS__FD_CANCEL_WAIT_MS 100

/* Whether a read of src's fd may wait for data (a pipe, socket or terminal), asked once. */
static bool fd_may_wait(lds__source *src)
{
    if (src->fd_waits == 0) {
        struct stat st;
        src->fd_waits = fstat(src->fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))
                            ? 1
                            : 2;
    }
    return src->fd_waits == 2;
}

/* One read from the transport itself, retrying interruptions (EINTR, or an
 * lds_read_fn's LDS_READ_RETRY) until a byte, the end or an error comes. */
static lds_status transport_read(lds__source *src, void *buf, size_t cap, size_t *got,
                                 lds_error *err)
{
    *got = 0;
    for (;;) {
        switch (src->kind) {
        case LDS__SRC_FD: {
            if (src->opts != NULL && src->opts->cancel != NULL && fd_may_wait(src)) {
                /* Wait for data at most LDS__FD_CANCEL_WAIT_MS, then ask cancel again. */
                struct pollfd p = {.fd = src->fd, .events = POLLIN};
                int r = poll(&p, 1, LDS__FD_CANCEL_WAIT_MS);
                if (r == 0 || (r < 0 && errno == EINTR))
                    break;
            }
            ssize_t n = read(src->fd, buf, cap);
            if (n >= 0) {
                *got = (size_t)n;
                return LDS_OK;
            }
            if (errno != EINTR && errno != EAGAIN)
                return lds__load_fail(err, LDS_E_IO, "stream", src->raw_bytes, errno, NULL,
                                      "read failed after %llu bytes: %s",
                                      (unsigned long long)src->raw_bytes, strerror(errno));
            /* EAGAIN: a non-blocking fd with nothing yet; wait (briefly, so that
               cancellation is still checked) for it to become readable. */
            if (errno == EAGAIN) {
                struct pollfd p = {.fd = src->fd, .events = POLLIN};
                (void)poll(&p, 1, 100);
            }
            break;
        }
        case LDS__SRC_FILE: {
            errno = 0;
            size_t n = fread(buf, 1, cap, src->file);
            if (ferror(src->file)) {
                int e = errno;
                clearerr(src->file);
                if (e != EINTR && e != EAGAIN)
                    return lds__load_fail(err, LDS_E_IO, "stream", src->raw_bytes, e, NULL,
                                          "fread failed after %llu bytes: %s",
                                          (unsigned long long)src->raw_bytes, strerror(e));
                if (n == 0)
                    break;
            }
            *got = n;
            return LDS_OK;
        }
        case LDS__SRC_CALLBACK: {
            size_t n = 0;
            errno = 0;
            lds_status st = src->fn(src->fn_ctx, buf, cap, &n);
            if (st != LDS_OK) {
                int e = errno;
                return lds__load_fail(err, st, "stream", src->raw_bytes, e, NULL,
                                      "read callback failed after %llu bytes: %s",
                                      (unsigned long long)src->raw_bytes, lds_strerror(st));
            }
            if (n == LDS_READ_RETRY)
                break;
            if (n > cap)
                return lds__load_fail(err, LDS_E_INVALID_ARG, "stream", src->raw_bytes, 0, NULL,
                                      "read callback reported %zu bytes for a %zu-byte buffer", n,
                                      cap);
            *got = n;
            return LDS_OK;
        }
        case LDS__SRC_URL:
            return lds__url_read(src->url, buf, cap, got, err);
        case LDS__SRC_MEMORY: {
            size_t n = src->mem_len - src->mem_pos;
            if (n > cap)
                n = cap;
            memcpy(buf, src->mem + src->mem_pos, n);
            src->mem_pos += n;
            *got = n;
            return LDS_OK;
        }
        }
        if (cancelled(src))
            return lds__load_fail(err, LDS_E_CANCELLED, "stream", src->raw_bytes, 0, NULL,
                                  "cancelled after %llu bytes", (unsigned long long)src->raw_bytes);
    }
}

/* A read of the raw byte sequence: peeked bytes first, then the transport. */
static lds_status raw_read(lds__source *src, void *buf, size_t cap, size_t *got, lds_error *err)
{
    *got = 0;
    if (src->peek_pos < src->peek_len) {
        size_t n = src->peek_len - src->peek_pos;
        if (n > cap)
            n = cap;
        memcpy(buf, src->peek + src->peek_pos, n);
        src->peek_pos += n;
        *got = n;
        return LDS_OK;
    }
    if (src->raw_eof)
        return LDS_OK;
    lds_status st = transport_read(src, buf, cap, got, err);
    if (st != LDS_OK)
        return st;
    if (*got == 0)
        src->raw_eof = true;
    src->raw_bytes += *got;
    return LDS_OK;
}

/* Moves the peeked bytes not yet read to the front of src->peek and tops it up from the
 * transport, as far as the transport has bytes; returns how many it holds in *have. */
static lds_status peek_fill(lds__source *src, size_t *have, lds_error *err)
{
    size_t n = src->peek_len - src->peek_pos;
    memmove(src->peek, src->peek + src->peek_pos, n);
    src->peek_len = src->peek_pos = 0; /* raw_read reads the transport, not the peek */
    while (n < sizeof src->peek) {
        size_t got = 0;
        lds_status st = raw_read(src, src->peek + n, sizeof src->peek - n, &got, err);
        if (st != LDS_OK)
            return st;
        if (got == 0)
            break;
        n += got;
    }
    src->peek_len = *have = n;
    return LDS_OK;
}

/* Reads through the skippable frames (RFC 8878 §3.1.2) that the input starts with, at most
 * LDS__ZSTD_SKIP_FRAMES_MAX of them holding LDS__ZSTD_SKIP_BYTES_MAX bytes together; a frame
 * that declares more than the input holds is LDS_E_TRUNCATED, more frames or bytes than those
 * limits LDS_E_LIMIT. On return the peek holds what follows them. */
static lds_status skip_skippable(lds__source *src, size_t *have, lds_error *err)
{
    uint64_t skipped = 0;
    for (unsigned frames = 0; lds__is_zstd_skippable(src->peek, *have); frames++) {
        uint64_t at = src->raw_bytes - *have; /* the frame's compressed offset */
        if (*have < LDS__ZSTD_SKIPPABLE_HEADER)
            return lds__load_fail(err, LDS_E_TRUNCATED, "zstd.skippable_frame", at, 0, NULL,
                                  "the input ends inside the header of the skippable frame at "
                                  "compressed byte %llu",
                                  (unsigned long long)at);
        if (frames == LDS__ZSTD_SKIP_FRAMES_MAX)
            return lds__load_fail(err, LDS_E_LIMIT, "zstd.skippable_frame", at, 0, NULL,
                                  "more than %d skippable frames before the zstd frame",
                                  LDS__ZSTD_SKIP_FRAMES_MAX);
        const unsigned char *p = src->peek;
        uint64_t size =
            (uint64_t)p[4] | (uint64_t)p[5] << 8 | (uint64_t)p[6] << 16 | (uint64_t)p[7] << 24;
        if (size > LDS__ZSTD_SKIP_BYTES_MAX - skipped)
            return lds__load_fail(err, LDS_E_LIMIT, "zstd.skippable_frame.size", at + 4, 0, NULL,
                                  "the skippable frame at compressed byte %llu declares %llu "
                                  "bytes; at most %llu bytes of skippable frames are read "
                                  "before the zstd frame",
                                  (unsigned long long)at, (unsigned long long)size,
                                  (unsigned long long)LDS__ZSTD_SKIP_BYTES_MAX);
        skipped += size;
        uint64_t left = LDS__ZSTD_SKIPPABLE_HEADER + size;
        size_t from_peek = left < *have ? (size_t)left : *have;
        src->peek_pos = from_peek;
        left -= from_peek;
        while (left > 0) {
            unsigned char scratch[4096];
            size_t got = 0;
            lds_status st = raw_read(
                src, scratch, left < sizeof scratch ? (size_t)left : sizeof scratch, &got, err);
            if (st != LDS_OK)
                return st;
            if (got == 0)
                return lds__load_fail(
                    err, LDS_E_TRUNCATED, "zstd.skippable_frame.size", at + 4, 0, NULL,
                    "the skippable frame at compressed byte %llu declares %llu bytes, but the "
                    "input ends %llu bytes short of them",
                    (unsigned long long)at, (unsigned long long)size, (unsigned long long)left);
            left -= got;
        }
        lds_status st = peek_fill(src, have, err);
        if (st != LDS_OK)
            return st;
        if (!lds__is_zstd(src->peek, *have))
            return lds__load_fail(err, *have == 0 ? LDS_E_TRUNCATED : LDS_E_ZSTD, "zstd.frame",
                                  src->raw_bytes - *have, 0, NULL,
                                  "%s the skippable frame at compressed byte %llu",
                                  *have == 0 ? "no zstd frame follows (the input ends after)"
                                             : "not a zstd frame after",
                                  (unsigned long long)at);
    }
    return LDS_OK;
}

lds_status lds__source_open(lds__source *src, lds_error *err)
{
    size_t have = 0;
    lds_status st = peek_fill(src, &have, err);
    if (st != LDS_OK)
        return st;
    if (!lds__is_zstd(src->peek, have))
        return LDS_OK;
    st = skip_skippable(src, &have, err);
    if (st != LDS_OK)
        return st;

    src->compressed = true;
    unsigned long long fcs = ZSTD_getFrameContentSize(src->peek, have);
    if (fcs == ZSTD_CONTENTSIZE_ERROR)
        return lds__load_fail(err, LDS_E_ZSTD, "zstd.frame_header", 0, 0, NULL,
                              "invalid or incomplete zstd frame header in the first %zu bytes",
                              have);
    src->frame_content_size = fcs;
    src->dctx = ZSTD_createDCtx();
    src->zin_cap = ZSTD_DStreamInSize();
    src->zin = malloc(src->zin_cap);
    if (src->dctx == NULL || src->zin == NULL)
        return lds__load_fail(err, LDS_E_NOMEM, "zstd", 0, 0, NULL,
                              "cannot allocate the zstd decoder");
    /* The peeked bytes are the start of the frame: hand them to the decoder. */
    memcpy(src->zin, src->peek, have);
    src->zin_len = have;
    src->peek_len = src->peek_pos = 0;
    return LDS_OK;
}

void lds__source_close(lds__source *src)
{
    ZSTD_freeDCtx(src->dctx);
    src->dctx = NULL;
    free(src->zin);
    src->zin = NULL;
}

static lds_status zstd_read(lds__source *src, void *buf, size_t cap, size_t *got, lds_error *err)
{
    ZSTD_outBuffer out = {buf, cap, 0};
    while (out.pos == 0 && !src->frame_done) {
        if (src->zin_pos == src->zin_len && !src->raw_eof) {
            size_t n = 0;
            lds_status st = raw_read(src, src->zin, src->zin_cap, &n, err);
            if (st != LDS_OK)
                return st;
            src->zin_len = n;
            src->zin_pos = 0;
        }
        ZSTD_inBuffer in = {src->zin, src->zin_len, src->zin_pos};
        size_t r = ZSTD_decompressStream(src->dctx, &out, &in);
        src->zin_pos = in.pos;
        if (ZSTD_isError(r))
            return lds__load_fail(
                err, LDS_E_ZSTD, "zstd.frame", src->raw_bytes, 0, ZSTD_getErrorName(r),
                "zstd decoding failed near compressed byte %llu "
                "(decoded byte %llu): %s",
                (unsigned long long)src->raw_bytes, (unsigned long long)(src->out_bytes + out.pos),
                ZSTD_getErrorName(r));
        if (r == 0) {
            src->frame_done = true;
            break;
        }
        /* No progress possible: the transport ended inside the frame. */
        if (out.pos == 0 && in.pos == in.size && src->raw_eof)
            return lds__load_fail(err, LDS_E_TRUNCATED, "zstd.frame", src->raw_bytes, 0, NULL,
                                  "the input ended inside the zstd frame after %llu compressed "
                                  "bytes (%llu decoded)",
                                  (unsigned long long)src->raw_bytes,
                                  (unsigned long long)src->out_bytes);
    }
    *got = out.pos;
    return LDS_OK;
}

lds_status lds__source_read(lds__source *src, void *buf, size_t cap, size_t *got, lds_error *err)
{
    lds_status st =
        src->compressed ? zstd_read(src, buf, cap, got, err) : raw_read(src, buf, cap, got, err);
    if (st == LDS_OK)
        src->out_bytes += *got;
    return st;
}

lds_status lds__source_read_full(lds__source *src, void *buf, size_t want, size_t *got,
                                 lds_error *err)
{
    size_t have = 0;
    while (have < want) {
        size_t n = 0;
        lds_status st = lds__source_read(src, (unsigned char *)buf + have, want - have, &n, err);
        if (st != LDS_OK) {
            *got = have;
            return st;
        }
        if (n == 0)
            break;
        have += n;
    }
    *got = have;
    return LDS_OK;
}

lds_status lds__source_expect_end(lds__source *src, lds_error *err)
{
    unsigned char probe;
    size_t n = 0;
    uint64_t end = src->out_bytes;
    lds_status st = lds__source_read(src, &probe, 1, &n, err);
    if (st != LDS_OK)
        return st;
    if (n != 0)
        return lds__load_fail(err, LDS_E_TRAILING, "payload.end", end, 0, NULL,
                              "bytes follow the payload, which ends at stream offset %llu",
                              (unsigned long long)end);
    if (!src->compressed)
        return LDS_OK;
    /* One frame only: nothing may follow it in the transport. */
    uint64_t frame_end = src->raw_bytes - (src->zin_len - src->zin_pos);
    if (src->zin_pos < src->zin_len)
        n = 1;
    else {
        st = raw_read(src, &probe, 1, &n, err);
        if (st != LDS_OK)
            return st;
    }
    if (n != 0)
        return lds__load_fail(err, LDS_E_TRAILING, "zstd.frame_end", frame_end, 0, NULL,
                              "bytes follow the zstd frame, which ends at compressed offset %llu",
                              (unsigned long long)frame_end);
    return LDS_OK;
}
