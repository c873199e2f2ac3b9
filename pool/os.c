/*
 * os.c: the pool's boundary with the operating system and the sanitizers.
 * Mappings, page protection and AddressSanitizer's manual poisoning
 * (compiled in only when the build uses ASan).
 */
#include "pool_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef LDS__ASAN
#include <sanitizer/asan_interface.h>
#endif

void *lds__map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
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

void *lds__map_huge(size_t bytes)
{
    /* Over-map by one huge page less a page, then unmap the slack on both sides: the kernel
     * places anonymous mappings on page boundaries only. */
    size_t huge = lds__huge_page_size(), page = lds__page_size();
    size_t slack = huge - page;
    if (bytes > SIZE_MAX - slack)
        return NULL;
    char *raw = lds__map(bytes + slack);
    if (!raw)
        return NULL;
    uintptr_t at = ((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1);
    char *base = (char *)at;
    size_t head = (size_t)(base - raw), tail = slack - head;
    if (head)
        munmap(raw, head);
    if (tail)
        munmap(base + bytes, tail);
#ifdef MADV_HUGEPAGE
    /* Advice only: EINVAL where the kernel has no THP leaves 4 KiB pages. */
    (void)madvise(base, bytes, MADV_HUGEPAGE);
#endif
    return base;
}

void lds__unmap(void *base, size_t bytes)
{
    munmap(base, bytes);
}

int lds__protect(void *base, size_t bytes, int accessible)
{
    return mprotect(base, bytes, accessible ? PROT_READ | PROT_WRITE : PROT_NONE);
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
