/*
 * The observed allocation counter (bench/observe.c) counts a known set of calls exactly.
 * Run with LD_PRELOAD=liblds-bench-observe.so (tests/meson.build); fails without it.
 * Nothing is printed between the two reads of the counts, so stdio cannot allocate there.
 */
#include "../bench/observe.h"

#include <dlfcn.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static void *volatile sink[8]; /* the calls cannot be elided: the pointers escape */

int main(void)
{
    void *sym = dlsym(RTLD_DEFAULT, "lds_bench_observed");
    if (!sym) {
        fprintf(stderr, "observe-probe: lds_bench_observed not found (not preloaded?)\n");
        return 1;
    }
    lds_bench_observed_fn obs;
    memcpy(&obs, &sym, sizeof obs);
    uint64_t a[LDS_OBS_COUNT], b[LDS_OBS_COUNT];
    void *pm = NULL;
    obs(a);
    sink[0] = malloc(100);
    sink[1] = calloc(10, 30);         /* 300 */
    sink[2] = realloc(sink[0], 5000); /* 5000; the 100-byte block is given back */
    sink[3] = aligned_alloc(64, 640);
    int pr = posix_memalign(&pm, 4096, 1000);
    sink[4] = pm;
    sink[5] = malloc((size_t)4 << 20); /* above glibc's mmap threshold: malloc, not mmap */
    sink[6] = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int mr = sink[6] == MAP_FAILED ? -1 : munmap(sink[6], 3 * 4096);
    free(sink[1]);
    free(sink[2]);
    free(sink[3]);
    free(sink[4]);
    free(sink[5]);
    free(NULL); /* not counted */
    obs(b);
    uint64_t d[LDS_OBS_COUNT];
    for (int i = 0; i < LDS_OBS_COUNT; i++)
        d[i] = b[i] - a[i];
    /* expected: 6 allocations of 100 + 300 + 5000 + 640 + 1000 + 4 MiB bytes; 6 blocks given
     * back (realloc's old one and five frees); 1 anonymous mmap and 1 munmap of 12 KiB each;
     * usable bytes given back equal those handed out */
    uint64_t want_bytes = 100 + 300 + 5000 + 640 + 1000 + ((uint64_t)4 << 20);
    struct {
        int k;
        uint64_t want;
        const char *name;
    } checks[] = {{LDS_OBS_ALLOCS, 6, "allocations"},
                  {LDS_OBS_ALLOC_BYTES, want_bytes, "bytes asked"},
                  {LDS_OBS_FREES, 6, "blocks given back"},
                  {LDS_OBS_MMAPS, 1, "anonymous mmaps"},
                  {LDS_OBS_MMAP_BYTES, 3 * 4096, "mmap bytes"},
                  {LDS_OBS_MUNMAPS, 1, "munmaps"},
                  {LDS_OBS_MUNMAP_BYTES, 3 * 4096, "munmap bytes"},
                  {LDS_OBS_USABLE_OUT, d[LDS_OBS_USABLE_IN], "usable bytes back = out"}};
    int bad = pr != 0 || mr != 0;
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        bool ok = d[checks[i].k] == checks[i].want;
        printf("%s %s: %llu (want %llu)\n", ok ? "ok" : "FAIL", checks[i].name,
               (unsigned long long)d[checks[i].k], (unsigned long long)checks[i].want);
        bad |= !ok;
    }
    bool usable_ok = d[LDS_OBS_USABLE_IN] >= want_bytes;
    printf("%s usable bytes handed out >= asked: %llu\n", usable_ok ? "ok" : "FAIL",
           (unsigned long long)d[LDS_OBS_USABLE_IN]);
    return bad || !usable_ok ? 1 : 0;
}
