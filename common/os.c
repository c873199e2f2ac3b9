/*
 * The clock, the page size, the zstd magic and the OS calls (lds_common.h).
 * Each OS wrapper returns 0 or the errno value, so a caller never reads a
 * global that a later call (a free, a close) may have changed.
 */
#include "lds_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

uint64_t lds__now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * UINT64_C(1000000000) + (uint64_t)t.tv_nsec;
}

size_t lds__page_size(void)
{
    static _Atomic size_t cached;
    size_t pg = atomic_load_explicit(&cached, memory_order_relaxed);
    if (pg == 0) {
        long v = sysconf(_SC_PAGESIZE);
        pg = v > 0 ? (size_t)v : 4096;
        atomic_store_explicit(&cached, pg, memory_order_relaxed);
    }
    return pg;
}

size_t lds__page_round(size_t n)
{
    size_t pg = lds__page_size();
    return n > SIZE_MAX - pg ? n : (n + pg - 1) / pg * pg;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

bool lds__is_zstd_skippable(const void *b, size_t n)
{
    return n >= LDS__ZSTD_MAGIC_SIZE &&
           (le32(b) & LDS__ZSTD_SKIPPABLE_MASK) == LDS__ZSTD_SKIPPABLE_MAGIC;
}

bool lds__is_zstd(const void *b, size_t n)
{
    return (n >= LDS__ZSTD_MAGIC_SIZE && le32(b) == LDS__ZSTD_MAGIC) ||
           lds__is_zstd_skippable(b, n);
}

int lds__os_open(const char *path, int flags, int *fd)
{
    int f;
    do
        f = open(path, flags | O_CLOEXEC);
    while (f < 0 && errno == EINTR);
    if (f < 0)
        return errno;
    *fd = f;
    return 0;
}

int lds__os_read(int fd, void *buf, size_t n, size_t *got)
{
    ssize_t r;
    do
        r = read(fd, buf, n);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return errno;
    *got = (size_t)r;
    return 0;
}

int lds__os_fstat(int fd, struct stat *st)
{
    return fstat(fd, st) == 0 ? 0 : errno;
}

const char *lds__file_kind(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISFIFO(m) ? "a FIFO (pipe)"
           : S_ISSOCK(m) ? "a socket"
           : S_ISLNK(m)  ? "a symbolic link"
                         : "not a regular file";
}

int lds__os_regular_size(int fd, uint64_t *size)
{
    struct stat st;
    int e = lds__os_fstat(fd, &st);
    if (e != 0)
        return e;
    if (!S_ISREG(st.st_mode))
        return ENOTSUP;
    *size = (uint64_t)st.st_size;
    return 0;
}

int lds__os_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off, void **out)
{
    void *p = mmap(addr, len, prot, flags, fd, off);
    if (p == MAP_FAILED)
        return errno;
    *out = p;
    return 0;
}

int lds__os_mremap(void *old, size_t old_len, size_t new_len, int flags, void **out)
{
    void *p = mremap(old, old_len, new_len, flags);
    if (p == MAP_FAILED)
        return errno;
    *out = p;
    return 0;
}

int lds__os_munmap(void *addr, size_t len)
{
    return munmap(addr, len) == 0 ? 0 : errno;
}
