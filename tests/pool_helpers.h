/*
 * pool_helpers.h: the pool tests' two helpers (test_pool.c, test_pool_inline.c), after
 * cmocka.h and a lodestar pool header: a private pool in a checked mode, and a statistics
 * snapshot, each asserting its call succeeded.
 */
#ifndef LDS_TEST_POOL_HELPERS_H
#define LDS_TEST_POOL_HELPERS_H

/* A private pool in mode `check`; `max_retained` bytes of retention (0: the default). */
static inline lds_pool *make_pool(lds_pool_check check, size_t max_retained)
{
    lds_pool_options o;
    lds_pool_options_default(&o);
    o.check = check;
    if (max_retained)
        o.max_retained_bytes = max_retained;
    lds_pool *p = NULL;
    assert_int_equal(lds_pool_create(&o, &p), LDS_OK);
    assert_non_null(p);
    return p;
}

static inline lds_pool_stats stats_of(lds_pool *p)
{
    lds_pool_stats s;
    lds_pool_stats_init(&s);
    assert_int_equal(lds_pool_get_stats(p, &s), LDS_OK);
    return s;
}

#endif
