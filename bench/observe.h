/*
 * The counts of liblds-bench-observe.so (bench/observe.c), read with
 * dlsym(RTLD_DEFAULT, "lds_bench_observed"): void lds_bench_observed(uint64_t out[LDS_OBS_COUNT]).
 * Totals since the process started, over every thread.
 */
#ifndef LDS_BENCH_OBSERVE_H
#define LDS_BENCH_OBSERVE_H

#include <stdint.h>

enum lds_obs_count {
    LDS_OBS_ALLOCS, /* successful malloc/calloc/realloc/memalign/aligned_alloc/posix_memalign */
    LDS_OBS_ALLOC_BYTES,  /* bytes those calls asked for */
    LDS_OBS_USABLE_IN,    /* usable bytes they handed out (malloc_usable_size) */
    LDS_OBS_FREES,        /* blocks given back (free of non-NULL, realloc's old block) */
    LDS_OBS_USABLE_OUT,   /* usable bytes of those blocks */
    LDS_OBS_MMAPS,        /* anonymous mmap calls that succeeded */
    LDS_OBS_MMAP_BYTES,   /* their lengths */
    LDS_OBS_MUNMAPS,      /* munmap calls that succeeded (any mapping) */
    LDS_OBS_MUNMAP_BYTES, /* their lengths */
    LDS_OBS_COUNT
};

typedef void (*lds_bench_observed_fn)(uint64_t out[LDS_OBS_COUNT]);

#endif
