/*
 * liblds-bench-observe.so: the observed allocation counter of pool-cost (docs/adr/0039).
 *
 * Loaded with LD_PRELOAD, it sits at the allocator boundary of the whole process and counts
 * every call to malloc, calloc, realloc, aligned_alloc, posix_memalign, memalign, valloc and
 * free, from any thread and any library (the queue to a consumer thread, the thread's own
 * allocations, the harness), with the bytes asked for and the usable bytes handed out and
 * given back, and every anonymous mmap and every munmap with their bytes. The calls go on to
 * glibc's own entry points (__libc_malloc ...), so the counter works where glibc is the
 * allocator; under another preloaded allocator it is not loaded (pool-cost says so).
 *
 * A program reads the counts with dlsym(RTLD_DEFAULT, "lds_bench_observed"), so it runs
 * without the library too. Counters are relaxed atomics: exact totals, no ordering promise
 * between two counters read while other threads allocate.
 */
#include "observe.h"

#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);

static _Atomic uint64_t counts[LDS_OBS_COUNT];

#define ADD(k, v) atomic_fetch_add_explicit(&counts[k], (uint64_t)(v), memory_order_relaxed)

static void took(void *p, size_t asked)
{
    if (!p)
        return;
    ADD(LDS_OBS_ALLOCS, 1);
    ADD(LDS_OBS_ALLOC_BYTES, asked);
    ADD(LDS_OBS_USABLE_IN, malloc_usable_size(p));
}

static void gave(void *p)
{
    if (!p)
        return;
    ADD(LDS_OBS_FREES, 1);
    ADD(LDS_OBS_USABLE_OUT, malloc_usable_size(p));
}

__attribute__((visibility("default"))) void *malloc(size_t n)
{
    void *p = __libc_malloc(n);
    took(p, n);
    return p;
}

__attribute__((visibility("default"))) void *calloc(size_t n, size_t m)
{
    void *p = __libc_calloc(n, m);
    took(p, n * m); /* glibc refused an overflowing product: p is NULL then */
    return p;
}

__attribute__((visibility("default"))) void *realloc(void *old, size_t n)
{
    size_t before = old ? malloc_usable_size(old) : 0;
    void *p = __libc_realloc(old, n);
    if (old && (p || n == 0)) { /* the old block is gone (moved, resized or freed) */
        ADD(LDS_OBS_FREES, 1);
        ADD(LDS_OBS_USABLE_OUT, before);
    }
    took(p, n);
    return p;
}

__attribute__((visibility("default"))) void free(void *p)
{
    gave(p);
    __libc_free(p);
}

__attribute__((visibility("default"))) void *memalign(size_t align, size_t n)
{
    void *p = __libc_memalign(align, n);
    took(p, n);
    return p;
}

__attribute__((visibility("default"))) void *aligned_alloc(size_t align, size_t n)
{
    return memalign(align, n);
}

__attribute__((visibility("default"))) void *valloc(size_t n)
{
    return memalign((size_t)sysconf(_SC_PAGESIZE), n);
}

__attribute__((visibility("default"))) int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    void *p = __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    took(p, n);
    *out = p;
    return 0;
}

/* mmap and munmap go to the kernel directly: glibc's malloc maps its large chunks through
 * its own internal entry point, so what arrives here is what the program (the pool) maps. */
__attribute__((visibility("default"))) void *mmap(void *addr, size_t len, int prot, int flags,
                                                  int fd, off_t off)
{
    long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    if (r < 0 && r > -4096) {
        errno = (int)-r;
        return MAP_FAILED;
    }
    if (flags & MAP_ANONYMOUS) {
        ADD(LDS_OBS_MMAPS, 1);
        ADD(LDS_OBS_MMAP_BYTES, len);
    }
    return (void *)r;
}

__attribute__((visibility("default"))) int munmap(void *addr, size_t len)
{
    long r = syscall(SYS_munmap, addr, len);
    if (r < 0) {
        errno = (int)-r;
        return -1;
    }
    ADD(LDS_OBS_MUNMAPS, 1);
    ADD(LDS_OBS_MUNMAP_BYTES, len);
    return 0;
}

__attribute__((visibility("default"))) void lds_bench_observed(uint64_t out[LDS_OBS_COUNT])
{
    for (int i = 0; i < LDS_OBS_COUNT; i++)
        out[i] = atomic_load_explicit(&counts[i], memory_order_relaxed);
}
