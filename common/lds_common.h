/*
 * One of each basic, shared by every part of the library (format/, import/,
 * loader/, pool/ may use it; it depends on no part): the error filler, the
 * UTF-8 validator, the monotonic clock, the page size, the zstd frame magic
 * and the OS calls, which return an errno value instead of setting errno.
 * Not installed.
 */
#ifndef LDS_COMMON_H
#define LDS_COMMON_H

#include "lodestar_core.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#if defined(__GNUC__)
#define LDS__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define LDS__PRINTF(f, a)
#endif

/* ==== the error filler =================================================== */

/*
 * Writes a refusal into `err` and returns `status`. The one behaviour of every
 * part:
 * - err NULL, or err->size outside [LDS_ERROR_MIN_SIZE, sizeof(lds_error)]:
 *   nothing is written ("Struct sizes", lodestar_core.h);
 * - each member is written only if it lies wholly inside err->size;
 * - the message is written if err->size reaches past its first byte, into the
 *   room that is there (at most sizeof message), always NUL-terminated; text
 *   that does not fit ends in "..." (when the room holds at least 4 bytes);
 * - with `at_byte`, the message ends " (at byte OFFSET)" with the same OFFSET
 *   as err->offset; a truncated message drops text, never that ending (unless
 *   the room cannot hold it). A message then names one byte offset only: the
 *   caller's text must not name another.
 * `line` is the 1-based line (or row) or 0, `sys_errno` the errno of a failed
 * call or 0, `zstd_error` a static string or NULL.
 */
lds_status lds__error_vfill(lds_error *err, lds_status status, const char *field, uint64_t offset,
                            bool at_byte, uint64_t line, int sys_errno, const char *zstd_error,
                            const char *fmt, va_list ap) LDS__PRINTF(9, 0);

/* As lds__error_vfill with a variable argument list. */
lds_status lds__error_fill(lds_error *err, lds_status status, const char *field, uint64_t offset,
                           bool at_byte, uint64_t line, int sys_errno, const char *zstd_error,
                           const char *fmt, ...) LDS__PRINTF(9, 10);

/* Adds `delta` to err->offset (when it fits) and rewrites the message's
   " (at byte OFFSET)" ending to match: for an offset a callee counted from a
   point that lies `delta` bytes into the caller's input. */
void lds__error_rebase(lds_error *err, uint64_t delta);

/* The parser's and writer's form: " (at byte OFFSET)" whenever `field` is non-NULL. */
lds_status lds__fail(lds_error *err, lds_status status, const char *field, uint64_t offset,
                     const char *fmt, ...) LDS__PRINTF(5, 6);

/*
 * One-line checks (zstd's RETURN_ERROR_IF habit): a parser says each rule as
 *     LDS__FAIL_IF(cond, err, status, "table.dim", at, "%u is above max_dim", dim);
 * When `cond` holds, the enclosing function returns lds__fail(err, status, field,
 * at, ...) with the message "FIELD: " followed by the caller's text, so the call
 * site does not repeat the field. `field` must be a string literal: it is pasted
 * into the format, so the printf check covers the whole message. The variadic
 * part is the format and its arguments; nothing in it is evaluated unless `cond`
 * holds.
 */
#define LDS__FAIL_IF(cond, err, status, field, offset, ...)                                        \
    do {                                                                                           \
        if (cond)                                                                                  \
            return lds__fail((err), (status), field, (offset), field ": " __VA_ARGS__);            \
    } while (0)

/* As LDS__FAIL_IF where the message names more than the field (an element,
   "section[2].kind: ..." for the field "section.kind"): the text is given whole. */
#define LDS__FAIL_IF_MSG(cond, err, status, field, offset, ...)                                    \
    do {                                                                                           \
        if (cond)                                                                                  \
            return lds__fail((err), (status), (field), (offset), __VA_ARGS__);                     \
    } while (0)

/* As lds__fail with no field or offset, and sys_errno = `errnum` (a failed system call). */
lds_status lds__fail_errno(lds_error *err, lds_status status, int errnum, const char *fmt, ...)
    LDS__PRINTF(4, 5);

/* ==== UTF-8 ============================================================== */

/* Bytes of the longest prefix of s[0, n) that holds only ASCII (< 0x80). */
size_t lds__ascii_prefix(const uint8_t *s, size_t n);

/* Strict UTF-8 as RFC 3629 defines it (format.md §3.5: no overlong forms, no
   surrogates, nothing above U+10FFFF). Returns true if s[0, n) is valid; else
   false, the index of the first bad byte in *bad and a reason in *why. */
bool lds__utf8_valid(const uint8_t *s, size_t n, size_t *bad, const char **why);

/* ==== time, pages, zstd ================================================== */

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t lds__now_ns(void);

/* The system page size in bytes, read once (sysconf) and cached; 4096 if unknown. */
size_t lds__page_size(void);

/* `n` rounded up to a multiple of the page size; `n` itself if that would overflow. */
size_t lds__page_round(size_t n);

/* A zstd frame starts with these 4 bytes (RFC 8878 §3.1.1, little-endian 0xFD2FB528). */
#define LDS__ZSTD_MAGIC      0xFD2FB528u
#define LDS__ZSTD_MAGIC_SIZE 4

/* A skippable frame (RFC 8878 §3.1.2) starts with one of the 16 magics 0x184D2A50..0x184D2A5F
 * (little-endian), then the size of its content in 4 little-endian bytes; a decoder skips it. */
#define LDS__ZSTD_SKIPPABLE_MAGIC  0x184D2A50u
#define LDS__ZSTD_SKIPPABLE_MASK   0xFFFFFFF0u
#define LDS__ZSTD_SKIPPABLE_HEADER 8

/* Whether b[0, n) starts zstd data: a zstd frame's magic, or a skippable frame's (that a
 * compressed index may begin with, found by a tester: such a file was called not a lodestar
 * file). */
bool lds__is_zstd(const void *b, size_t n);

/* Whether b[0, n) starts with a skippable frame's magic (RFC 8878 §3.1.2). */
bool lds__is_zstd_skippable(const void *b, size_t n);

/* ==== fault recovery ==================================================== */

/*
 * A thread-local recovery point for SIGBUS and SIGSEGV, for code that reads a
 * file mapping another process may truncate or rewrite. Use:
 *
 *     lds__fault_window w;
 *     if (!lds__fault_install()) ... (no window: go on unprotected)
 *     if (sigsetjmp(w.jb, 1) != 0) {  // a fault: w.sig, w.addr; window closed
 *         if (w.cleanup) w.cleanup(w.cleanup_arg);
 *         ...report...
 *     }
 *     lds__fault_enter(&w);
 *     ...reads of the mapping...
 *     lds__fault_leave(&w);
 *
 * The handler is installed once per process (lds__fault_install), for both
 * signals; a fault on a thread with no open window goes to the handler found
 * there before (or the default action). Code run inside the window registers
 * what a jump out of it must free with lds__fault_set_cleanup (a no-op when
 * no window is open). Variables of the function that called sigsetjmp and
 * changed after it must be volatile to be read after a fault.
 */
#include <setjmp.h>

typedef struct lds__fault_window {
    sigjmp_buf jb;
    struct lds__fault_window *prev;
    void (*volatile cleanup)(void *);
    void *volatile cleanup_arg;
    volatile int sig;    /* SIGBUS or SIGSEGV after a fault */
    void *volatile addr; /* the faulting address (si_addr) */
} lds__fault_window;

/* Installs the process-wide handler once; false if sigaction refused. */
bool lds__fault_install(void);
void lds__fault_enter(lds__fault_window *w);
void lds__fault_leave(lds__fault_window *w);
/* What a fault in the current window must free (replaces the previous one); NULL clears. */
void lds__fault_set_cleanup(void (*fn)(void *), void *arg);

/* ==== OS calls =========================================================== */

/* What a file that is not a regular one is, for messages: "a directory", "a FIFO (pipe)", ...
 * (the writer's output rule and the importers' input checks). */
const char *lds__file_kind(mode_t m);

/* Each returns 0 on success, else the errno value (errno itself is left as the
   call left it). EINTR is retried where noted. */

/* open(2) with O_CLOEXEC added; retries EINTR. */
int lds__os_open(const char *path, int flags, int *fd);
/* One read(2) of at most `n` bytes; retries EINTR; *got = 0 at end of file. */
int lds__os_read(int fd, void *buf, size_t n, size_t *got);
/* fstat(2). */
int lds__os_fstat(int fd, struct stat *st);
/* The file's size if `fd` is a regular file: 0 and *size, else ENOTSUP
   (anything else: fstat's errno). */
int lds__os_regular_size(int fd, uint64_t *size);
/* mmap(2); *out is the mapping. */
int lds__os_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off, void **out);
/* mremap(2) (Linux); *out is the mapping, moved only with MREMAP_MAYMOVE in `flags`. */
int lds__os_mremap(void *old, size_t old_len, size_t new_len, int flags, void **out);
/* munmap(2). */
int lds__os_munmap(void *addr, size_t len);

#endif /* LDS_COMMON_H */
