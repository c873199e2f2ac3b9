/* The one error filler (lds_common.h): every part's refusals go through it. */
#include "lds_common.h"

#include <stdio.h>
#include <string.h>

#define FITS(err, member) ((err)->size >= offsetof(lds_error, member) + sizeof((err)->member))

static const char cut_mark[] = "...";

/*
 * Writes the message into err->message[0, room): the formatted text, then the
 * " (at byte N)" ending when `at_byte`. What does not fit is cut from the text
 * (marked "..."), so the ending, and with it the offset, survives.
 */
static void write_message(char *msg, size_t room, bool at_byte, uint64_t offset, const char *fmt,
                          va_list ap)
{
    char tail[40] = "";
    size_t tail_len = 0;
    if (at_byte) {
        int t = snprintf(tail, sizeof tail, " (at byte %llu)", (unsigned long long)offset);
        tail_len = t > 0 ? (size_t)t : 0;
    }
    if (tail_len + sizeof cut_mark > room) {
        /* No room for the ending: the text alone, cut if need be. */
        tail_len = 0;
        tail[0] = '\0';
    }
    size_t text_room = room - tail_len; /* >= 1 */
    int n = vsnprintf(msg, text_room, fmt, ap);
    size_t len = n < 0 ? 0 : (size_t)n;
    if (n < 0)
        msg[0] = '\0';
    if (len >= text_room) {
        len = text_room - 1;
        if (text_room >= sizeof cut_mark)
            memcpy(msg + text_room - sizeof cut_mark, cut_mark, sizeof cut_mark);
    }
    memcpy(msg + len, tail, tail_len + 1);
}

lds_status lds__error_vfill(lds_error *err, lds_status status, const char *field, uint64_t offset,
                            bool at_byte, uint64_t line, int sys_errno, const char *zstd_error,
                            const char *fmt, va_list ap)
{
    if (!err || err->size < LDS_ERROR_MIN_SIZE || err->size > sizeof *err)
        return status; /* out of range: written never, not in part */
    if (FITS(err, status))
        err->status = status;
    if (FITS(err, field))
        err->field = field;
    if (FITS(err, offset))
        err->offset = offset;
    if (FITS(err, line))
        err->line = line;
    if (FITS(err, sys_errno))
        err->sys_errno = sys_errno;
    if (FITS(err, zstd_error))
        err->zstd_error = zstd_error;
    if (err->size > offsetof(lds_error, message)) {
        size_t room = err->size - offsetof(lds_error, message);
        if (room > sizeof err->message)
            room = sizeof err->message;
        write_message(err->message, room, at_byte, offset, fmt, ap);
    }
    return status;
}

lds_status lds__error_fill(lds_error *err, lds_status status, const char *field, uint64_t offset,
                           bool at_byte, uint64_t line, int sys_errno, const char *zstd_error,
                           const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lds_status st =
        lds__error_vfill(err, status, field, offset, at_byte, line, sys_errno, zstd_error, fmt, ap);
    va_end(ap);
    return st;
}

lds_status lds__fail(lds_error *err, lds_status status, const char *field, uint64_t offset,
                     const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lds_status st =
        lds__error_vfill(err, status, field, offset, field != NULL, 0, 0, NULL, fmt, ap);
    va_end(ap);
    return st;
}

lds_status lds__fail_errno(lds_error *err, lds_status status, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lds_status st = lds__error_vfill(err, status, NULL, 0, false, 0, errnum, NULL, fmt, ap);
    va_end(ap);
    return st;
}

static lds_status rebase_fmt(char *msg, size_t room, uint64_t offset, const char *fmt, ...)
    LDS__PRINTF(4, 5);

static lds_status rebase_fmt(char *msg, size_t room, uint64_t offset, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    write_message(msg, room, true, offset, fmt, ap);
    va_end(ap);
    return LDS_OK;
}

void lds__error_rebase(lds_error *err, uint64_t delta)
{
    if (!err || err->size < LDS_ERROR_MIN_SIZE || err->size > sizeof *err || delta == 0 ||
        !FITS(err, offset))
        return;
    uint64_t old = err->offset;
    err->offset = old + delta;
    if (err->size <= offsetof(lds_error, message))
        return;
    size_t room = err->size - offsetof(lds_error, message);
    if (room > sizeof err->message)
        room = sizeof err->message;
    char tail[40];
    int t = snprintf(tail, sizeof tail, " (at byte %llu)", (unsigned long long)old);
    size_t len = strnlen(err->message, room);
    if (t <= 0 || (size_t)t > len || memcmp(err->message + len - (size_t)t, tail, (size_t)t) != 0)
        return; /* the message names no offset (or has no room for one) */
    char text[sizeof err->message];
    memcpy(text, err->message, len - (size_t)t);
    text[len - (size_t)t] = '\0';
    (void)rebase_fmt(err->message, room, err->offset, "%s", text);
}
