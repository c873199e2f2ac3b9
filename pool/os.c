/*
 * os.c: the pool's boundary with the operating system and the sanitizers.
 * Mappings, page protection and AddressSanitizer's manual poisoning
 * (compiled in only when the build uses ASan). Every call that can fail returns 0 or
 * the errno of its failure (never -1 with errno to read after); see pool_internal.h.
 * The fault-injection hook (lds__os_test_fail) lets tests make the next calls of one
 * kind fail with a chosen errno, without involving the kernel.
 */
#include "pool_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef LDS__ASAN
#include <sanitizer/asan_interface.h>
#endif

/* ==== fault injection (tests) ============================================= */

static _Atomic uint32_t g_fail_skip[LDS__OS_OPS], g_fail_count[LDS__OS_OPS];
static _Atomic int g_fail_err[LDS__OS_OPS];

void lds__os_test_fail(lds__os_op op, int err, uint32_t skip, uint32_t count)
{
    if ((unsigned)op >= LDS__OS_OPS)
        return;
    atomic_store(&g_fail_err[op], err);
    atomic_store(&g_fail_skip[op], skip);
    atomic_store(&g_fail_count[op], count);
}

/* The errno to fail this call of `op` with, or 0 to make the call. One relaxed load when
 * nothing is armed (every caller is a slow path: a mapping or a protection change). */
static int injected(lds__os_op op)
{
    if (__builtin_expect(atomic_load_explicit(&g_fail_count[op], memory_order_relaxed) == 0, 1))
        return 0;
    uint32_t skip = atomic_load(&g_fail_skip[op]);
    while (skip > 0)
        if (atomic_compare_exchange_weak(&g_fail_skip[op], &skip, skip - 1))
            return 0;
    uint32_t n = atomic_load(&g_fail_count[op]);
    while (n > 0)
        if (atomic_compare_exchange_weak(&g_fail_count[op], &n, n - 1))
            return atomic_load(&g_fail_err[op]);
    return 0;
}

const char *lds__os_errno_name(int err)
{
    switch (err) {
    case ENOMEM:
        return "ENOMEM";
    case EACCES:
        return "EACCES";
    case EINVAL:
        return "EINVAL";
    case EFAULT:
        return "EFAULT";
    case EPERM:
        return "EPERM";
    case EAGAIN:
        return "EAGAIN";
    default:
        return "errno";
    }
}

/* ==== the system ========================================================== */

/* errno after a failed call, never 0 (a caller tells failure from success by it). */
static int last_errno(void)
{
    return errno ? errno : EIO;
}

int lds__map(size_t bytes, void **out)
{
    *out = NULL;
    int err = injected(LDS__OS_MAP);
    if (err)
        return err;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return last_errno();
    *out = p;
    return 0;
}

size_t lds__huge_page_size(void)
{
    static _Atomic size_t cached;
    size_t h = atomic_load_explicit(&cached, memory_order_relaxed);
    if (h == 0) {
        unsigned long long v = 0;
        FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "re");
        if (f) {
            if (fscanf(f, "%llu", &v) != 1)
                v = 0;
            fclose(f);
        }
        /* A power of two of at least a page, else x86-64's 2 MiB. */
        h = v >= lds__page_size() && (v & (v - 1)) == 0 ? (size_t)v : LDS_POOL_HUGE_MIN;
        atomic_store_explicit(&cached, h, memory_order_relaxed);
    }
    return h;
}

int lds__thp_mode(void)
{
    static _Atomic int cached = -1;
    int m = atomic_load_explicit(&cached, memory_order_relaxed);
    if (m < 0) {
        /* "always [madvise] never": the bracketed word is the mode. No file: no THP. */
        char line[128] = {0};
        m = 0;
        FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
        if (f) {
            if (fgets(line, sizeof line, f) != NULL)
                m = strstr(line, "[always]") ? 2 : strstr(line, "[madvise]") ? 1 : 0;
            fclose(f);
        }
        atomic_store_explicit(&cached, m, memory_order_relaxed);
    }
    return m;
}

int lds__map_huge(size_t bytes, void **out, uint8_t *pages)
{
    /* Over-map by one huge page less a page, then unmap the slack on both sides: the kernel
     * places anonymous mappings on page boundaries only. */
    *out = NULL;
    size_t huge = lds__huge_page_size(), page = lds__page_size();
    size_t slack = huge - page;
    if (bytes > SIZE_MAX - slack)
        return ENOMEM;
    void *rawp;
    int err = lds__map(bytes + slack, &rawp);
    if (err)
        return err;
    char *raw = rawp;
    uintptr_t at = ((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1);
    char *base = (char *)at;
    size_t head = (size_t)(base - raw), tail = slack - head;
    /* Trimming the ends of one mapping splits nothing, so it cannot fail for want of a map
     * entry; should it fail all the same, the slack stays mapped, unused (and unaccounted),
     * and the buffer is still good. */
    if (head)
        (void)lds__unmap(raw, head);
    if (tail)
        (void)lds__unmap(base + bytes, tail);
    /* Advice only: THP "never", or a refusal (EINVAL where the kernel has no THP), leaves
     * 4 KiB pages, and says so. */
    *pages = LDS__PAGES_FALLBACK;
#ifdef MADV_HUGEPAGE
    if (lds__thp_mode() != 0) {
        err = injected(LDS__OS_MADVISE);
        if (err == 0 && madvise(base, bytes, MADV_HUGEPAGE) == 0)
            *pages = LDS__PAGES_HUGE;
    }
#endif
    *out = base;
    return 0;
}

int lds__map_guarded(size_t bytes, void **out, int *protect_failed)
{
    *out = NULL;
    *protect_failed = 0;
    size_t page = lds__page_size();
    if (bytes > SIZE_MAX - 2 * page)
        return ENOMEM;
    int err = injected(LDS__OS_MAP);
    if (err)
        return err;
    size_t total = page + bytes + page;
    char *base = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return last_errno();
    err = lds__protect(base + page, bytes, 1);
    if (err) {
        *protect_failed = 1;
        /* The whole fresh mapping goes (at worst it shrinks a PROT_NONE neighbour it merged
         * with: no split, so no map entry is needed). */
        (void)munmap(base, total);
        return err;
    }
    *out = base;
    return 0;
}

int lds__unmap(void *base, size_t bytes)
{
    int err = injected(LDS__OS_UNMAP);
    if (err)
        return err;
    return munmap(base, bytes) == 0 ? 0 : last_errno();
}

int lds__protect(void *base, size_t bytes, int accessible)
{
    int err = injected(accessible ? LDS__OS_PROTECT_RW : LDS__OS_PROTECT_NONE);
    if (err)
        return err;
    return mprotect(base, bytes, accessible ? PROT_READ | PROT_WRITE : PROT_NONE) == 0
               ? 0
               : last_errno();
}

#ifdef LDS__ASAN
void lds__asan_poison(const void *p, size_t n)
{
    ASAN_POISON_MEMORY_REGION(p, n);
}
void lds__asan_unpoison(const void *p, size_t n)
{
    ASAN_UNPOISON_MEMORY_REGION(p, n);
}
int lds__asan_is_poisoned(const void *p)
{
    return __asan_address_is_poisoned(p);
}
#endif
