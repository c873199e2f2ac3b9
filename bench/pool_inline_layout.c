/*
 * pool_inline_layout.c: the layout that pool_inline.h reads (LDS_POOL_INLINE_LAYOUT 1), checked
 * field by field against the pool's own structures at build time, in every program that
 * compiles the experiment (lodestar-bench, test_pool_inline, test_pool). A change of the
 * pool that breaks one of these checks must change pool_inline.h with it (docs/adr/0037;
 * the pool no longer keeps old names for programs built against an older layout).
 */
#include "pool_inline.h"

#include "../pool/pool_internal.h"

#include <stddef.h>

#if defined(LDS_POOL_INLINE_LAYOUT)

#define SAME(a, b, f)                                                                              \
    _Static_assert(offsetof(a, f) == offsetof(b, f) && sizeof(((a *)0)->f) == sizeof(((b *)0)->f), \
                   #f " is where pool_inline.h reads it")

SAME(lds__slot, lds__v1_slot, word);
SAME(lds__slot, lds__v1_slot, ptr);
SAME(lds__slot, lds__v1_slot, length);
SAME(lds__slot, lds__v1_slot, cap);
SAME(lds__slot, lds__v1_slot, owner);
SAME(lds__slot, lds__v1_slot, remote);
SAME(lds__slot, lds__v1_slot, tc_lim);
_Static_assert(sizeof(lds__slot) == sizeof(lds__v1_slot), "slot stride");

SAME(lds__tcache, lds__v1_tcache, stamp);
SAME(lds__tcache, lds__v1_tcache, requested);
SAME(lds__tcache, lds__v1_tcache, n);
SAME(lds__tcache, lds__v1_tcache, items);
SAME(lds__tcache, lds__v1_tcache, remote_head);

SAME(struct lds_pool, lds__v1_pool, id);
SAME(struct lds_pool, lds__v1_pool, stamp);
SAME(struct lds_pool, lds__v1_pool, chunk0);
_Static_assert(offsetof(lds__v1_pool, id) == 0 && offsetof(lds__v1_pool, stamp) == 8,
               "the frozen fields of every layout");

_Static_assert(LDS__V1_CLASSES == LDS__POOL_CLASSES, "classes");
_Static_assert(LDS__V1_TC_MAX == LDS__POOL_TC_MAX, "thread-cache row");
_Static_assert(LDS__V1_TABLE_MAX == LDS__POOL_TABLE_MAX, "class table");
_Static_assert(LDS__V1_CHUNK_SLOTS == LDS__POOL_CHUNK_SLOTS, "first chunk");
_Static_assert(LDS__V1_IDX_BITS == LDS__POOL_IDX_BITS && LDS__V1_IDX_MASK == LDS__POOL_IDX_MASK,
               "index bits");
_Static_assert(LDS__V1_GEN_STEP == LDS__POOL_GEN_STEP && LDS__POOL_CLS_BITS == 8 &&
                   LDS__POOL_RETIRED == UINT64_C(1) << 63,
               "class and generation bits");
_Static_assert(LDS__POOL_STAMP_SLOW == 1u, "a pool in a checked mode never matches a cache");

#endif

/* The layout this program was built with (0: none on this target); keeps the file a
 * translation unit where the checks compile away. */
#ifdef LDS_POOL_INLINE_LAYOUT
const int lds__pool_inline_layout = LDS_POOL_INLINE_LAYOUT;
#else
const int lds__pool_inline_layout = 0;
#endif
