/*
 * Tests of the live index (live/, include/lodestar_live.h): a pinned generation
 * survives reloads intact and is freed exactly at its last unpin (pool
 * statistics), also under the guard-mode pool in a forked child; failed and
 * refused reloads leave the current generation serving with nothing leaked;
 * racing reloads; the retired bound; a mapped generation across a
 * replace-by-rename; statistics and JSON. Built with -DLDS_LIVE_STRESS_ONLY it
 * runs the multi-reader stress test alone (suite 'tsan').
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lodestar.h"

#if defined(__SANITIZE_ADDRESS__)
#define LDS_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LDS_TEST_ASAN 1
#endif
#endif

static char tmpdir[64];

/* ==== helpers ============================================================ */

typedef struct bytes {
    unsigned char *p;
    size_t n;
} bytes;

#define ROWS 300
#define DIM  16

/* Element d of row r in the generation made with `seed`. */
static float value_of(uint64_t seed, uint64_t r, uint32_t d)
{
    return (float)((r * 31 + d * 7 + seed * 13) % 97) / 13.0f - 3.0f;
}

static int key_of(uint64_t seed, uint64_t r, char *key, size_t cap)
{
    return snprintf(key, cap, "s%llu-row-%llu", (unsigned long long)seed, (unsigned long long)r);
}

/* An index of ROWS x DIM f32 with keys, whose content depends on `seed`. */
static bytes make_index(uint64_t seed, bool keys)
{
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = DIM;
    wo.with_keys = keys;
    FILE *f = tmpfile();
    assert_non_null(f);
    lds_writer *w = NULL;
    assert_int_equal(lds_writer_open_file(f, &wo, &w, NULL), LDS_OK);
    float v[DIM];
    char key[64];
    for (uint64_t r = 0; r < ROWS; r++) {
        for (uint32_t d = 0; d < DIM; d++)
            v[d] = value_of(seed, r, d);
        int kl = key_of(seed, r, key, sizeof key);
        assert_int_equal(lds_writer_add_row(w, v, DIM, 0, key, (size_t)kl, NULL), LDS_OK);
    }
    assert_int_equal(lds_writer_finish(w, NULL), LDS_OK);
    lds_writer_free(w);
    bytes b;
    assert_int_equal(fseeko(f, 0, SEEK_END), 0);
    b.n = (size_t)ftello(f);
    b.p = malloc(b.n);
    assert_non_null(b.p);
    rewind(f);
    assert_int_equal(fread(b.p, 1, b.n, f), b.n);
    fclose(f);
    return b;
}

#ifndef LDS_LIVE_STRESS_ONLY
static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n > 0)
        assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static const char *tmp_path(const char *name)
{
    static char path[4][160];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", tmpdir, name);
    return p;
}

/* Writes generation `seed` to `name` in the test directory; returns its path. */
static const char *gen_file(const char *name, uint64_t seed)
{
    const char *path = tmp_path(name);
    bytes b = make_index(seed, true);
    write_file(path, b.p, b.n);
    free(b.p);
    return path;
}

#endif

/* A private pool whose rentals are larger than asked (size classes round up) and
 * pre-filled with a sentinel, so reading past the payload changes results. */
static lds_pool *sentinel_pool(lds_pool_check check)
{
    lds_pool_options po;
    lds_pool_options_default(&po);
    po.check = check;
    po.fill_on_rent = 0xA5;
    lds_pool *pool = NULL;
    assert_int_equal(lds_pool_create(&po, &pool), LDS_OK);
    return pool;
}

static lds_pool_stats pool_stats(lds_pool *pool)
{
    lds_pool_stats s;
    lds_pool_stats_init(&s);
    assert_int_equal(lds_pool_get_stats(pool, &s), LDS_OK);
    return s;
}

static lds_live_stats live_stats(lds_live *live)
{
    lds_live_stats s;
    lds_live_stats_init(&s);
    assert_int_equal(lds_live_get_stats(live, &s), LDS_OK);
    return s;
}

static lds_load_options adopt_from(lds_pool *pool)
{
    lds_load_options o;
    lds_load_options_default(&o);
    o.pool = pool;
    o.ownership = LDS_OWN_ADOPT;
    return o;
}

static lds_live *new_live(uint32_t max_retired)
{
    lds_live_options lo;
    lds_live_options_default(&lo);
    lo.max_retired = max_retired;
    lds_live *live = NULL;
    assert_int_equal(lds_live_create(&lo, &live, NULL), LDS_OK);
    return live;
}

#ifndef LDS_LIVE_STRESS_ONLY
/* Number of rows of `idx` whose vector or key differs from generation `seed`:
 * every element of every row, and every key found at its row. */
static uint64_t wrong_rows(const lds_index *idx, uint64_t seed)
{
    uint64_t wrong = 0;
    if (lds_index_rows(idx) != ROWS || lds_index_dim(idx) != DIM)
        return ROWS;
    char key[64];
    for (uint64_t r = 0; r < ROWS; r++) {
        const float *row = lds_index_row(idx, r);
        bool bad = row == NULL;
        for (uint32_t d = 0; !bad && d < DIM; d++)
            bad = row[d] != value_of(seed, r, d);
        uint64_t at = UINT64_MAX;
        int kl = key_of(seed, r, key, sizeof key);
        bad = bad || lds_index_find_key(idx, key, (size_t)kl, &at) != LDS_OK || at != r;
        wrong += bad;
    }
    return wrong;
}

#endif

static int setup_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lds-live-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

#ifndef LDS_LIVE_STRESS_ONLY

/* ==== pinning across a reload ============================================ */

/* The scenario of the guard-mode child and of the plain test: pin gen 1, reload
 * gen 2, read gen 1 whole, unpin; the rental of gen 1 comes back at the unpin. */
static void pin_reload_unpin(lds_pool *pool, const char *p1, const char *p2)
{
    lds_live *live = new_live(0);
    lds_load_options o = adopt_from(pool);
    uint64_t gen = 0;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path(live, p1, &o, &gen, &info, NULL), LDS_OK);
    assert_int_equal(gen, 1);
    assert_int_equal(info.path, LDS_LOAD_POOLED);
    assert_true(info.capacity_bytes > info.payload_bytes); /* larger than asked: sentinel */

    lds_pin pin1;
    assert_int_equal(lds_live_pin(live, &pin1), LDS_OK);
    assert_int_equal(pin1.generation, 1);
    assert_int_equal(pool_stats(pool).rents, 1);

    assert_int_equal(lds_live_reload_path(live, p2, &o, &gen, NULL, NULL), LDS_OK);
    assert_int_equal(gen, 2);
    lds_pool_stats ps = pool_stats(pool);
    assert_int_equal(ps.rents, 2);
    assert_int_equal(ps.returns, 0); /* gen 1 is pinned: its rental is still out */
    lds_live_stats ls = live_stats(live);
    assert_int_equal(ls.generation, 2);
    assert_int_equal(ls.retired_pinned, 1);
    assert_int_equal(ls.pins_on_retired, 1);
    assert_int_equal(ls.bytes_retired, info.capacity_bytes);

    /* A new pin gets gen 2; the old pin still reads gen 1, every byte of it. */
    lds_pin pin2;
    assert_int_equal(lds_live_pin(live, &pin2), LDS_OK);
    assert_int_equal(pin2.generation, 2);
    assert_int_equal(wrong_rows(pin1.index, 1), 0);
    assert_int_equal(wrong_rows(pin2.index, 2), 0);
    assert_int_equal(pool_stats(pool).returns, 0);

    lds_live_unpin(live, &pin1);
    assert_null(pin1.index);
    ps = pool_stats(pool);
    assert_int_equal(ps.returns, 1); /* exactly at the unpin */
    assert_int_equal(ps.leases_current, 1);
    ls = live_stats(live);
    assert_int_equal(ls.retired_pinned, 0);
    assert_int_equal(ls.pins_on_retired, 0);
    assert_int_equal(ls.bytes_retired, 0);
    assert_int_equal(ls.generations_freed, 1);
    lds_live_unpin(live, &pin1); /* zeroed: ignored */
    assert_int_equal(pool_stats(pool).returns, 1);

    lds_live_unpin(live, &pin2);
    assert_int_equal(pool_stats(pool).returns, 1); /* current: never freed by an unpin */
    lds_live_free(live);
    ps = pool_stats(pool);
    assert_int_equal(ps.rents, ps.returns);
    assert_int_equal(ps.leases_current, 0);
    assert_int_equal(ps.refused_total, 0);
}

static void test_pinned_generation_survives_and_returns_at_unpin(void **state)
{
    (void)state;
    const char *p1 = gen_file("g1.ldsi", 1), *p2 = gen_file("g2.ldsi", 2);
    lds_pool *pool = sentinel_pool(LDS_POOL_CHECK_OFF);
    pin_reload_unpin(pool, p1, p2);
    lds_pool_free(pool);
}

/* A retired generation nobody pins is freed at the swap itself. */
static void test_unpinned_generation_freed_at_swap(void **state)
{
    (void)state;
    const char *p1 = gen_file("g1.ldsi", 1), *p2 = gen_file("g2.ldsi", 2);
    lds_pool *pool = sentinel_pool(LDS_POOL_CHECK_OFF);
    lds_live *live = new_live(0);
    lds_load_options o = adopt_from(pool);
    assert_int_equal(lds_live_reload_path(live, p1, &o, NULL, NULL, NULL), LDS_OK);
    lds_pin pin;
    assert_int_equal(lds_live_pin(live, &pin), LDS_OK);
    lds_live_unpin(live, &pin);
    assert_int_equal(lds_live_reload_path(live, p2, &o, NULL, NULL, NULL), LDS_OK);
    lds_pool_stats ps = pool_stats(pool);
    assert_int_equal(ps.returns, 1);
    assert_int_equal(live_stats(live).generations_freed, 1);
    /* and the next reload rents that warm buffer back (same class) */
    assert_int_equal(lds_live_reload_path(live, p1, &o, NULL, NULL, NULL), LDS_OK);
    ps = pool_stats(pool);
    assert_int_equal(ps.misses_cold + ps.misses_exhausted, 2);
    assert_int_equal(ps.rents, 3);
    lds_live_free(live);
    lds_pool_free(pool);
}

typedef struct child_arg {
    const char *p1, *p2;
} child_arg;

static void on_segv(int sig)
{
    (void)sig;
    _exit(42);
}

/* The forked child of the guard test: `late` reads gen 1 after its unpin. */
static int guard_child(const child_arg *a, bool late)
{
    setenv(LDS_POOL_CHECK_ENV, "guard", 1);
    lds_pool_options po;
    lds_pool_options_default(&po);
    if (po.check != LDS_POOL_CHECK_GUARD)
        return 3;
    lds_pool *pool = NULL;
    if (lds_pool_create(&po, &pool) != LDS_OK)
        return 4;
    lds_live *live = NULL;
    if (lds_live_create(NULL, &live, NULL) != LDS_OK)
        return 5;
    lds_load_options o = adopt_from(pool);
    lds_pin pin1;
    if (lds_live_reload_path(live, a->p1, &o, NULL, NULL, NULL) != LDS_OK ||
        lds_live_pin(live, &pin1) != LDS_OK ||
        lds_live_reload_path(live, a->p2, &o, NULL, NULL, NULL) != LDS_OK)
        return 6;
    /* every byte of the retired generation, read after the swap: would fault if returned */
    if (wrong_rows(pin1.index, 1) != 0)
        return 7;
    const volatile float *first = lds_index_row(pin1.index, 0);
    lds_live_unpin(live, &pin1);
    if (late) {
        signal(SIGSEGV, on_segv);
        float x = first[0]; /* returned at the unpin: PROT_NONE now */
        (void)x;
        return 8;
    }
    lds_live_free(live);
    lds_pool_free(pool);
    return 0;
}

static int run_guard_child(const child_arg *a, bool late)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(guard_child(a, late));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

/* Under LDS_POOL_CHECK=guard a returned buffer is PROT_NONE: the child reading
 * gen 1 after the swap does not fault; one reading it after its unpin does
 * (which shows the check is real and the rental went back at the unpin). */
static void test_guard_mode_child(void **state)
{
    (void)state;
    child_arg a = {gen_file("g1.ldsi", 1), gen_file("g2.ldsi", 2)};
    int status = run_guard_child(&a, false);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
#ifndef LDS_TEST_ASAN
    status = run_guard_child(&a, true);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 42);
#else
    /* ASan reports the late read as use-after-poison before any SIGSEGV */
    status = run_guard_child(&a, true);
    assert_false(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 8));
#endif
}

/* ==== failed and refused reloads ========================================= */

static bool always_cancel(void *ctx)
{
    (void)ctx;
    return true;
}

/* Gen 1 serving, pool holding its one rental, and nothing else out. */
static void assert_serving_gen1(lds_live *live, lds_pool *pool)
{
    lds_pin pin;
    assert_int_equal(lds_live_pin(live, &pin), LDS_OK);
    assert_int_equal(pin.generation, 1);
    assert_int_equal(wrong_rows(pin.index, 1), 0);
    lds_live_unpin(live, &pin);
    lds_pool_stats ps = pool_stats(pool);
    assert_int_equal(ps.leases_current, 1);
    assert_int_equal(ps.rents, ps.returns + 1);
    assert_int_equal(ps.refused_total, 0);
}

static void test_failed_reloads_keep_serving(void **state)
{
    (void)state;
    const char *p1 = gen_file("g1.ldsi", 1);
    bytes b = make_index(2, true);
    const char *trunc = tmp_path("trunc.ldsi"), *flip = tmp_path("flip.ldsi");
    const char *good = tmp_path("g2.ldsi");
    write_file(trunc, b.p, b.n - 100);
    write_file(good, b.p, b.n);
    b.p[LDS_HEADER_SIZE + 10] ^= 0x40;
    write_file(flip, b.p, b.n);
    free(b.p);

    lds_pool *pool = sentinel_pool(LDS_POOL_CHECK_OFF);
    lds_live *live = new_live(0);
    lds_load_options o = adopt_from(pool);
    assert_int_equal(lds_live_reload_path(live, p1, &o, NULL, NULL, NULL), LDS_OK);
    lds_pin held;
    assert_int_equal(lds_live_pin(live, &held), LDS_OK); /* a reader inside a query throughout */

    struct {
        const char *path;
        int what; /* 0 plain, 1 cancel, 2 limit */
        lds_status want;
    } cases[] = {
        {trunc, 0, LDS_E_LENGTH_MISMATCH}, /* a regular file: its size disagrees */
        {flip, 0, LDS_E_CHECKSUM},
        {good, 1, LDS_E_CANCELLED},
        {good, 2, LDS_E_LIMIT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lds_load_options co = o;
        if (cases[i].what == 1)
            co.cancel = always_cancel;
        if (cases[i].what == 2)
            co.max_payload_bytes = 1000;
        lds_error err;
        lds_error_init(&err);
        uint64_t gen = 77;
        assert_int_equal(lds_live_reload_path(live, cases[i].path, &co, &gen, NULL, &err),
                         cases[i].want);
        assert_int_equal(err.status, cases[i].want);
        assert_int_equal(gen, 77);
        assert_serving_gen1(live, pool);
        lds_live_stats ls = live_stats(live);
        assert_int_equal(ls.reloads_failed, i + 1);
        assert_int_equal(ls.reloads_done, 1);
        assert_int_equal(ls.last_status, cases[i].want);
        assert_int_equal(ls.retired_pinned, 0);
    }
    /* a stream that ends early (a pipe-like source: no size to cross-check) is TRUNCATED */
    FILE *f = fopen(trunc, "rb");
    assert_non_null(f);
    assert_int_equal(setvbuf(f, NULL, _IONBF, 0), 0);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    bytes t = {NULL, 0};
    {
        struct stat st;
        assert_int_equal(stat(trunc, &st), 0);
        t.n = (size_t)st.st_size;
        t.p = malloc(t.n);
        assert_non_null(t.p);
        assert_int_equal(fread(t.p, 1, t.n, f), t.n);
    }
    fclose(f);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        size_t off = 0;
        while (off < t.n) {
            ssize_t w = write(fds[1], t.p + off, t.n - off);
            if (w <= 0)
                _exit(1);
            off += (size_t)w;
        }
        _exit(0);
    }
    close(fds[1]);
    assert_int_equal(lds_live_reload_fd(live, fds[0], &o, NULL, NULL, NULL), LDS_E_TRUNCATED);
    close(fds[0]);
    waitpid(pid, NULL, 0);
    free(t.p);
    assert_serving_gen1(live, pool);
    assert_int_equal(live_stats(live).last_status, LDS_E_TRUNCATED);

    /* then a good one swaps, and the held pin keeps gen 1 until released */
    assert_int_equal(lds_live_reload_path(live, good, &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(wrong_rows(held.index, 1), 0);
    lds_live_unpin(live, &held);
    lds_live_free(live);
    lds_pool_stats ps = pool_stats(pool);
    assert_int_equal(ps.rents, ps.returns);
    assert_int_equal(ps.leases_current, 0);
    lds_pool_free(pool);
}

/* The bound: with max_retired 2 and two retired generations pinned, a reload is
 * refused with LDS_E_LIMIT before renting; releasing one pin lets the next through. */
static void test_retired_bound_refuses(void **state)
{
    (void)state;
    const char *p1 = gen_file("g1.ldsi", 1), *p2 = gen_file("g2.ldsi", 2);
    const char *p3 = gen_file("g3.ldsi", 3);
    lds_pool *pool = sentinel_pool(LDS_POOL_CHECK_OFF);
    lds_live *live = new_live(2);
    lds_load_options o = adopt_from(pool);
    lds_pin a, b;
    assert_int_equal(lds_live_reload_path(live, p1, &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(lds_live_pin(live, &a), LDS_OK);
    assert_int_equal(lds_live_reload_path(live, p2, &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(lds_live_pin(live, &b), LDS_OK);
    assert_int_equal(lds_live_reload_path(live, p3, &o, NULL, NULL, NULL), LDS_OK);
    lds_live_stats ls = live_stats(live);
    assert_int_equal(ls.retired_pinned, 2);
    assert_int_equal(ls.pins_on_retired, 2);
    uint64_t rents = pool_stats(pool).rents;
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_live_reload_path(live, p1, &o, NULL, NULL, &err), LDS_E_LIMIT);
    assert_string_equal(err.field, "live.max_retired");
    assert_int_equal(pool_stats(pool).rents, rents); /* refused before renting */
    ls = live_stats(live);
    assert_int_equal(ls.reloads_refused, 1);
    assert_int_equal(ls.reloads_failed, 0);
    assert_int_equal(ls.generation, 3);
    assert_int_equal(wrong_rows(a.index, 1), 0);
    assert_int_equal(wrong_rows(b.index, 2), 0);
    lds_live_unpin(live, &a);
    assert_int_equal(lds_live_reload_path(live, p1, &o, NULL, NULL, NULL), LDS_OK);
    ls = live_stats(live);
    assert_int_equal(ls.generation, 4);
    assert_int_equal(ls.retired_pinned, 1); /* gen 3 freed at the swap, gen 2 pinned */
    assert_int_equal(ls.retired_pinned_peak, 2);
    lds_live_unpin(live, &b);
    lds_live_free(live);
    lds_pool_stats ps = pool_stats(pool);
    assert_int_equal(ps.rents, ps.returns);
    lds_pool_free(pool);
}

/* retired_pinned_peak counts generations kept by a pin, not one freed at its own swap:
 * with one pin held on gen 1 through two reloads, gen 2 is freed as gen 3 swaps in,
 * so the peak is 1 (it read 2 while the peak was taken before the scan). */
static void test_retired_peak_counts_pinned_only(void **state)
{
    (void)state;
    const char *p1 = gen_file("k1.ldsi", 1), *p2 = gen_file("k2.ldsi", 2);
    const char *p3 = gen_file("k3.ldsi", 3);
    lds_pool *pool = sentinel_pool(LDS_POOL_CHECK_OFF);
    lds_live *live = new_live(4);
    lds_load_options o = adopt_from(pool);
    lds_pin a;
    assert_int_equal(lds_live_reload_path(live, p1, &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(lds_live_pin(live, &a), LDS_OK);
    assert_int_equal(lds_live_reload_path(live, p2, &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(lds_live_reload_path(live, p3, &o, NULL, NULL, NULL), LDS_OK);
    lds_live_stats ls = live_stats(live);
    assert_int_equal(ls.generation, 3);
    assert_int_equal(ls.retired_pinned, 1);
    assert_int_equal(ls.generations_freed, 1);
    assert_int_equal(ls.retired_pinned_peak, 1);
    assert_int_equal(wrong_rows(a.index, 1), 0);
    lds_live_unpin(live, &a);
    ls = live_stats(live);
    assert_int_equal(ls.retired_pinned, 0);
    assert_int_equal(ls.retired_pinned_peak, 1);
    lds_live_free(live);
    lds_pool_stats ps = pool_stats(pool);
    assert_int_equal(ps.rents, ps.returns);
    lds_pool_free(pool);
}

/* ==== racing reloads ===================================================== */

typedef struct race {
    pthread_mutex_t m;
    pthread_cond_t c;
    bool in_reload, other_done;
    lds_live *live;
    const char *path;
    lds_load_options o;
    lds_status st;
} race;

/* cancel callback of the first reload: holds it inside the load until the
 * second reload has been tried. */
static bool hold_until_other(void *ctx)
{
    race *r = ctx;
    pthread_mutex_lock(&r->m);
    r->in_reload = true;
    pthread_cond_broadcast(&r->c);
    while (!r->other_done)
        pthread_cond_wait(&r->c, &r->m);
    pthread_mutex_unlock(&r->m);
    return false;
}

static void *first_reload(void *p)
{
    race *r = p;
    r->st = lds_live_reload_path(r->live, r->path, &r->o, NULL, NULL, NULL);
    return NULL;
}

static void test_concurrent_reload_refused(void **state)
{
    (void)state;
    const char *p1 = gen_file("g1.ldsi", 1), *p2 = gen_file("g2.ldsi", 2);
    lds_pool *pool = sentinel_pool(LDS_POOL_CHECK_OFF);
    race r = {PTHREAD_MUTEX_INITIALIZER,
              PTHREAD_COND_INITIALIZER,
              false,
              false,
              new_live(0),
              p2,
              adopt_from(pool),
              LDS_E_IO};
    lds_load_options o = r.o;
    assert_int_equal(lds_live_reload_path(r.live, p1, &o, NULL, NULL, NULL), LDS_OK);
    r.o.cancel = hold_until_other;
    r.o.callback_ctx = &r;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, first_reload, &r), 0);
    pthread_mutex_lock(&r.m);
    while (!r.in_reload)
        pthread_cond_wait(&r.c, &r.m);
    pthread_mutex_unlock(&r.m);
    lds_error err;
    lds_error_init(&err);
    uint64_t rents = pool_stats(pool).rents;
    assert_int_equal(lds_live_reload_path(r.live, p1, &o, NULL, NULL, &err), LDS_E_STATE);
    assert_string_equal(err.field, "live.reload");
    assert_int_equal(pool_stats(pool).rents, rents); /* nothing read, nothing rented */
    lds_pin pin;                                     /* gen 1 serves meanwhile */
    assert_int_equal(lds_live_pin(r.live, &pin), LDS_OK);
    assert_int_equal(pin.generation, 1);
    lds_live_unpin(r.live, &pin);
    pthread_mutex_lock(&r.m);
    r.other_done = true;
    pthread_cond_broadcast(&r.c);
    pthread_mutex_unlock(&r.m);
    pthread_join(t, NULL);
    assert_int_equal(r.st, LDS_OK);
    lds_live_stats ls = live_stats(r.live);
    assert_int_equal(ls.generation, 2);
    assert_int_equal(ls.reloads_done, 2);
    assert_int_equal(ls.reloads_refused, 1);
    lds_live_free(r.live);
    lds_pool_stats ps = pool_stats(pool);
    assert_int_equal(ps.rents, ps.returns);
    lds_pool_free(pool);
}

typedef struct racer {
    lds_live *live;
    const bytes *b;
    lds_pool *pool;
    int ok, refused, other;
} racer;

static void *racing_reloads(void *p)
{
    racer *r = p;
    lds_load_options o = adopt_from(r->pool);
    for (int i = 0; i < 40; i++) {
        FILE *f = fmemopen(r->b->p, r->b->n, "rb");
        if (!f) {
            r->other++;
            continue;
        }
        lds_status st = lds_live_reload_file(r->live, f, &o, NULL, NULL, NULL);
        fclose(f);
        if (st == LDS_OK)
            r->ok++;
        else if (st == LDS_E_STATE)
            r->refused++;
        else
            r->other++;
    }
    return NULL;
}

/* Two threads reloading at once, free-running: every call either swaps or is
 * refused; the generation counts the swaps; nothing leaks. */
static void test_racing_reloads(void **state)
{
    (void)state;
    bytes b = make_index(1, true);
    lds_pool *pool = sentinel_pool(LDS_POOL_CHECK_OFF);
    lds_live *live = new_live(0);
    racer r[2] = {{live, &b, pool, 0, 0, 0}, {live, &b, pool, 0, 0, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, racing_reloads, &r[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(r[0].other + r[1].other, 0);
    assert_int_equal(r[0].ok + r[0].refused + r[1].ok + r[1].refused, 80);
    lds_live_stats ls = live_stats(live);
    assert_int_equal(ls.generation, (uint64_t)(r[0].ok + r[1].ok));
    assert_int_equal(ls.reloads_refused, (uint64_t)(r[0].refused + r[1].refused));
    assert_int_equal(ls.retired_pinned, 0);
    lds_pool_stats ps = pool_stats(pool);
    assert_int_equal(ps.leases_current, 1);
    lds_live_free(live);
    ps = pool_stats(pool);
    assert_int_equal(ps.rents, ps.returns);
    lds_pool_free(pool);
    free(b.p);
}

/* ==== mapped generations ================================================= */

static int mapped_deleted(const char *path)
{
    FILE *f = fopen("/proc/self/maps", "r");
    assert_non_null(f);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, path) != NULL && strstr(line, "(deleted)") != NULL;
    fclose(f);
    return n;
}

static void write_with_writer(const char *path, uint64_t seed)
{
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = DIM;
    wo.with_keys = true;
    lds_writer *w = NULL;
    assert_int_equal(lds_writer_open_path(path, &wo, &w, NULL), LDS_OK);
    float v[DIM];
    char key[64];
    for (uint64_t r = 0; r < ROWS; r++) {
        for (uint32_t d = 0; d < DIM; d++)
            v[d] = value_of(seed, r, d);
        int kl = key_of(seed, r, key, sizeof key);
        assert_int_equal(lds_writer_add_row(w, v, DIM, 0, key, (size_t)kl, NULL), LDS_OK);
    }
    assert_int_equal(lds_writer_finish(w, NULL), LDS_OK); /* renames over `path` */
    lds_writer_free(w);
}

/* A pinned mapped generation across a replace-by-rename: the old inode stays
 * mapped (shown as "(deleted)" in /proc/self/maps) and reads gen 1 intact; its
 * mapping goes at the last unpin. */
static void test_mapped_generation_across_rename(void **state)
{
    (void)state;
    const char *path = tmp_path("mapped.ldsi");
    write_with_writer(path, 1);
    lds_live *live = new_live(0);
    lds_load_options o;
    lds_load_options_default(&o);
    o.use_mmap = true;
    o.ownership = LDS_OWN_ADOPT;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path(live, path, &o, NULL, &info, NULL), LDS_OK);
    assert_int_equal(info.path, LDS_LOAD_MAPPED);
    lds_pin pin1;
    assert_int_equal(lds_live_pin(live, &pin1), LDS_OK);
    assert_int_equal(mapped_deleted(path), 0);

    write_with_writer(path, 2);
    assert_true(mapped_deleted(path) > 0); /* the old inode, now nameless, still mapped */
    assert_int_equal(wrong_rows(pin1.index, 1), 0);
    assert_int_equal(lds_live_reload_path(live, path, &o, NULL, &info, NULL), LDS_OK);
    assert_int_equal(info.path, LDS_LOAD_MAPPED);
    lds_pin pin2;
    assert_int_equal(lds_live_pin(live, &pin2), LDS_OK);
    assert_int_equal(pin2.generation, 2);
    assert_int_equal(wrong_rows(pin2.index, 2), 0);
    assert_int_equal(wrong_rows(pin1.index, 1), 0);
    assert_true(live_stats(live).bytes_retired > 0);
    lds_live_unpin(live, &pin1);
    assert_int_equal(mapped_deleted(path), 0); /* unmapped at the last unpin */
    lds_live_unpin(live, &pin2);
    lds_live_free(live);
}

/* A mapped generation whose file is rewritten in place (documented as unsafe for that
 * generation) must not hand its key table on: the old mapping shows the new bytes, so its
 * keys compare equal to the new file's while its table holds the old keys' hashes. The
 * next reload builds its own table and finds every new key (before the fix it shared the
 * stale table and found none). */
static void test_mapped_rewritten_in_place_builds_keys(void **state)
{
    (void)state;
    const char *path = tmp_path("inplace.ldsi");
    const char *next = tmp_path("inplace-next.ldsi");
    write_with_writer(path, 1);
    write_with_writer(next, 2); /* the same lengths: keys "s1-row-N" and "s2-row-N" */
    lds_live *live = new_live(0);
    lds_load_options o;
    lds_load_options_default(&o);
    o.use_mmap = true;
    o.ownership = LDS_OWN_ADOPT;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path(live, path, &o, NULL, &info, NULL), LDS_OK);
    assert_int_equal(info.path, LDS_LOAD_MAPPED);
    lds_pin pin;
    assert_int_equal(lds_live_pin(live, &pin), LDS_OK);
    assert_int_equal(wrong_rows(pin.index, 1), 0); /* builds generation 1's key table */
    lds_live_unpin(live, &pin);

    /* Rewrite `path` in place (same inode, same length) with generation 2's bytes. */
    FILE *f = fopen(next, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    char *buf = malloc((size_t)n);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, n);
    assert_int_equal(pwrite(fd, buf, (size_t)n, 0), n);
    close(fd);
    free(buf);

    assert_int_equal(lds_live_reload_path(live, path, &o, NULL, &info, NULL), LDS_OK);
    assert_int_equal(info.path, LDS_LOAD_MAPPED);
    assert_int_equal(lds_live_pin(live, &pin), LDS_OK);
    assert_int_equal(pin.generation, 2);
    assert_int_equal(wrong_rows(pin.index, 2), 0);
    uint64_t at = 0;
    assert_int_equal(lds_index_find_key(pin.index, "s1-row-5", 8, &at), LDS_E_NOT_FOUND);
    lds_live_unpin(live, &pin);
    lds_live_free(live);
    unlink(next);
}

/* ==== pins: many, counted, handed between threads ======================== */

static void test_many_pins_on_one_thread(void **state)
{
    (void)state;
    const char *p1 = gen_file("g1.ldsi", 1), *p2 = gen_file("g2.ldsi", 2);
    lds_pool *pool = sentinel_pool(LDS_POOL_CHECK_OFF);
    lds_live *live = new_live(0);
    lds_load_options o = adopt_from(pool);
    assert_int_equal(lds_live_reload_path(live, p1, &o, NULL, NULL, NULL), LDS_OK);
    lds_pin pins[20];
    for (int i = 0; i < 20; i++) { /* more than a thread's slots: the rest are counted */
        assert_int_equal(lds_live_pin(live, &pins[i]), LDS_OK);
        assert_int_equal(pins[i].generation, 1);
    }
    assert_int_equal(lds_live_reload_path(live, p2, &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(live_stats(live).pins_on_retired, 20);
    for (int i = 0; i < 20; i++) { /* release in an order mixing slots and counted pins */
        int k = (i * 7) % 20;
        assert_int_equal(pool_stats(pool).returns, 0);
        assert_int_equal(wrong_rows(pins[k].index, 1), 0);
        lds_live_unpin(live, &pins[k]);
    }
    assert_int_equal(pool_stats(pool).returns, 1);
    assert_int_equal(live_stats(live).pins_on_retired, 0);
    lds_live_free(live);
    lds_pool_free(pool);
}

/* ==== closing while pinned ================================================ */

/* lds_live_close with pins held (in slots, counted beyond a thread's slots, on a retired
 * generation) refuses with LDS_E_STATE naming them per generation, and the live index stays
 * open: the pinned rows still read right, a reload still works; after the last unpin it
 * closes and both generations are back in the pool. Before, freeing a live index while
 * pinned freed the generation under the pin (ASan: use-after-free in lds_index_rows). */
static void test_close_while_pinned_refuses(void **state)
{
    (void)state;
    const char *p1 = gen_file("g1.ldsi", 1), *p2 = gen_file("g2.ldsi", 2);
    lds_pool *pool = sentinel_pool(LDS_POOL_CHECK_OFF);
    lds_live *live = new_live(0);
    lds_load_options o = adopt_from(pool);
    assert_int_equal(lds_live_reload_path(live, p1, &o, NULL, NULL, NULL), LDS_OK);
    lds_pin pins[8], late;
    for (int i = 0; i < 8; i++) /* 6 in the thread's slots, 2 counted */
        assert_int_equal(lds_live_pin(live, &pins[i]), LDS_OK);
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_live_close(live, &err), LDS_E_STATE);
    assert_int_equal(err.status, LDS_E_STATE);
    assert_string_equal(err.field, "live.pins");
    assert_non_null(strstr(err.message, "8 pins still held (generation 1: 8 pins)"));
    assert_int_equal(wrong_rows(pins[0].index, 1), 0);
    assert_int_equal(wrong_rows(pins[7].index, 1), 0);
    /* still open: a reload retires generation 1 under its pins */
    assert_int_equal(lds_live_reload_path(live, p2, &o, NULL, NULL, NULL), LDS_OK);
    for (int i = 0; i < 5; i++)
        lds_live_unpin(live, &pins[i]);
    assert_int_equal(lds_live_pin(live, &late), LDS_OK);
    assert_int_equal(late.generation, 2);
    lds_error_init(&err);
    assert_int_equal(lds_live_close(live, &err), LDS_E_STATE);
    assert_non_null(
        strstr(err.message, "4 pins still held (generation 2: 1 pin, generation 1: 3 pins)"));
    assert_int_equal(wrong_rows(pins[7].index, 1), 0);
    assert_int_equal(wrong_rows(late.index, 2), 0);
    assert_int_equal(pool_stats(pool).returns, 0);
    for (int i = 5; i < 8; i++)
        lds_live_unpin(live, &pins[i]);
    assert_int_equal(pool_stats(pool).returns, 1); /* generation 1 at its last unpin */
    lds_error_init(&err);
    assert_int_equal(lds_live_close(live, &err), LDS_E_STATE);
    assert_non_null(strstr(err.message, "1 pin still held (generation 2: 1 pin)"));
    lds_live_unpin(live, &late);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    assert_int_equal(pool_stats(pool).returns, 2);
    assert_int_equal(lds_live_close(NULL, NULL), LDS_OK);
    lds_pool_free(pool);
}

/* lds_live_free with a pin held aborts, after a line on stderr naming the pins (in a
 * forked child); before, it freed the pinned generation and returned. */
static void test_free_while_pinned_aborts(void **state)
{
    (void)state;
    const char *p1 = gen_file("g1.ldsi", 1);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        lds_live *live = NULL;
        lds_pin pin;
        if (lds_live_create(NULL, &live, NULL) != LDS_OK ||
            lds_live_reload_path(live, p1, NULL, NULL, NULL, NULL) != LDS_OK ||
            lds_live_pin(live, &pin) != LDS_OK)
            _exit(3);
        lds_live_free(live);
        _exit(lds_index_rows(pin.index) == ROWS ? 0 : 4);
    }
    close(fds[1]);
    char out[1024];
    size_t n = 0;
    ssize_t got;
    while (n < sizeof out - 1 && (got = read(fds[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)got;
    out[n] = '\0';
    close(fds[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGABRT);
    assert_non_null(strstr(out, "lds_live_free: 1 pin still held (generation 1: 1 pin)"));
}

typedef struct handoff {
    lds_live *live;
    lds_pin pin;
} handoff;

static void *pin_on_thread(void *p)
{
    handoff *h = p;
    if (lds_live_pin(h->live, &h->pin) != LDS_OK)
        h->pin.index = NULL;
    return NULL;
}

static void *unpin_on_thread(void *p)
{
    handoff *h = p;
    lds_live_unpin(h->live, &h->pin);
    return NULL;
}

/* A pin taken on one thread (which then exits) and released on another. */
static void test_pin_released_on_another_thread(void **state)
{
    (void)state;
    const char *p1 = gen_file("g1.ldsi", 1), *p2 = gen_file("g2.ldsi", 2);
    lds_pool *pool = sentinel_pool(LDS_POOL_CHECK_OFF);
    handoff h = {new_live(0), {0}};
    lds_load_options o = adopt_from(pool);
    assert_int_equal(lds_live_reload_path(h.live, p1, &o, NULL, NULL, NULL), LDS_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, pin_on_thread, &h), 0);
    pthread_join(t, NULL);
    assert_non_null(h.pin.index);
    assert_int_equal(lds_live_reload_path(h.live, p2, &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(live_stats(h.live).pins_on_retired, 1);
    assert_int_equal(pool_stats(pool).returns, 0);
    lds_live_unpin(h.live, &h.pin);
    assert_int_equal(pool_stats(pool).returns, 1);
    /* a second thread adopts the exited thread's record */
    assert_int_equal(pthread_create(&t, NULL, pin_on_thread, &h), 0);
    pthread_join(t, NULL);
    assert_int_equal(h.pin.generation, 2);
    lds_live_unpin(h.live, &h.pin);
    lds_live_free(h.live);
    lds_pool_free(pool);
}

/* ==== the live index's own pool (docs/adr/0049) ========================== */

static uint64_t misses(lds_pool_stats s)
{
    return s.misses_cold + s.misses_exhausted + s.misses_oversize;
}

/* Reloads naming no pool rent from lds_live_pool: the first two rent fresh buffers, every
 * later one rents warm, and between reloads the pool keeps exactly one spare. */
static void test_own_pool_rents_warm_and_keeps_one_spare(void **state)
{
    (void)state;
    const char *p1 = gen_file("own1.ldsi", 1), *p2 = gen_file("own2.ldsi", 2);
    lds_live *live = new_live(2);
    lds_pool *own = lds_live_pool(live);
    assert_non_null(own);
    assert_null(lds_live_pool(NULL));
    uint64_t shared_rents = pool_stats(lds_pool_shared()).rents;
    for (int i = 0; i < 6; i++)
        assert_int_equal(lds_live_reload_path(live, i % 2 ? p2 : p1, NULL, NULL, NULL, NULL),
                         LDS_OK);
    lds_pool_stats s = pool_stats(own);
    assert_int_equal(s.rents, 6);
    assert_int_equal(misses(s), 2);
    assert_int_equal(s.hits_shared, 4);
    assert_int_equal(s.leases_current, 1);   /* the serving generation */
    assert_int_equal(s.buffers_retained, 1); /* the spare */
    assert_int_equal(s.drops, 0);
    assert_int_equal(pool_stats(lds_pool_shared()).rents, shared_rents);
    /* options that name no pool: the same */
    lds_load_options o = adopt_from(NULL);
    assert_int_equal(lds_live_reload_path(live, p1, &o, NULL, NULL, NULL), LDS_OK);
    s = pool_stats(own);
    assert_int_equal(s.rents, 7);
    assert_int_equal(s.hits_shared, 5);
    lds_pin pin;
    assert_int_equal(lds_live_pin(live, &pin), LDS_OK);
    assert_int_equal(wrong_rows(pin.index, 1), 0);
    lds_live_unpin(live, &pin);
    /* a pool named in the options is the one rented from */
    lds_pool *mine = sentinel_pool(LDS_POOL_CHECK_OFF);
    o = adopt_from(mine);
    assert_int_equal(lds_live_reload_path(live, p2, &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(pool_stats(mine).rents, 1);
    assert_int_equal(pool_stats(own).rents, 7);
    lds_live_free(live);
    lds_pool_free(mine);
}

/* A reload while a retired generation is still pinned rents a third buffer (room for
 * 2 + max_retired, never "oversize"); the spare is then given back at once, since the
 * pinned generation's buffer comes back at its last unpin and serves as the next spare:
 * never more than one payload beside the generations in use. */
static void test_own_pool_frees_the_surplus_of_an_overlap(void **state)
{
    (void)state;
    const char *p1 = gen_file("ov1.ldsi", 1), *p2 = gen_file("ov2.ldsi", 2),
               *p3 = gen_file("ov3.ldsi", 3);
    lds_live *live = new_live(2);
    lds_pool *own = lds_live_pool(live);
    assert_int_equal(lds_live_reload_path(live, p1, NULL, NULL, NULL, NULL), LDS_OK);
    lds_pin pin;
    assert_int_equal(lds_live_pin(live, &pin), LDS_OK);
    assert_int_equal(lds_live_reload_path(live, p2, NULL, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(lds_live_reload_path(live, p3, NULL, NULL, NULL, NULL), LDS_OK);
    lds_pool_stats s = pool_stats(own);
    assert_int_equal(misses(s), 3);
    assert_int_equal(s.misses_oversize, 0);
    assert_int_equal(s.leases_current, 2); /* generation 1 (pinned) and 3 */
    /* generation 2's buffer, freed at the swap, is not kept: generation 1's comes back */
    assert_int_equal(s.buffers_retained, 0);
    assert_int_equal(s.trims, 1);
    assert_int_equal(s.drops, 0);
    assert_int_equal(wrong_rows(pin.index, 1), 0);
    lds_live_unpin(live, &pin);
    s = pool_stats(own);
    assert_int_equal(s.buffers_retained, 1); /* the spare: generation 1's */
    assert_int_equal(lds_live_reload_path(live, p1, NULL, NULL, NULL, NULL), LDS_OK);
    s = pool_stats(own);
    assert_int_equal(s.trims, 1);
    assert_int_equal(s.hits_shared, 1);
    assert_int_equal(s.leases_current, 1);
    assert_int_equal(s.buffers_retained, 1);
    assert_int_equal(s.bytes_retained, s.bytes_leased); /* one spare of the payload's class */
    assert_int_equal(lds_live_pin(live, &pin), LDS_OK);
    assert_int_equal(wrong_rows(pin.index, 1), 0);
    lds_live_unpin(live, &pin);
    lds_live_free(live);
}

/* A generation whose last pin is released on another thread goes back through the
 * reloader's thread (the pool's cross-thread return) and its buffer is rented warm. */
static void test_own_pool_reuses_a_buffer_a_reader_freed(void **state)
{
    (void)state;
    const char *p1 = gen_file("rd1.ldsi", 1), *p2 = gen_file("rd2.ldsi", 2);
    handoff h = {new_live(2), {0}};
    lds_pool *own = lds_live_pool(h.live);
    assert_int_equal(lds_live_reload_path(h.live, p1, NULL, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(lds_live_pin(h.live, &h.pin), LDS_OK);
    assert_int_equal(lds_live_reload_path(h.live, p2, NULL, NULL, NULL, NULL), LDS_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, unpin_on_thread, &h), 0);
    pthread_join(t, NULL);
    assert_int_equal(live_stats(h.live).generations_freed, 1);
    assert_int_equal(lds_live_reload_path(h.live, p1, NULL, NULL, NULL, NULL), LDS_OK);
    lds_pool_stats s = pool_stats(own);
    assert_int_equal(misses(s), 2);
    assert_int_equal(s.hits_shared, 1);
    assert_int_equal(s.leases_current, 1);
    assert_int_equal(s.buffers_retained, 1);
    lds_live_free(h.live);
}

/* Test hook in live/live.c: the number of thread records a live holds. */
size_t lds__live_test_records(lds_live *live);

#define MANY_LIVES 7 /* more than a thread's cache of records (4 entries) */

static void *pin_in_every_live(void *p)
{
    lds_live **lives = p;
    for (int i = 0; i < MANY_LIVES; i++) {
        lds_pin pin;
        if (lds_live_pin(lives[i], &pin) != LDS_OK || pin.generation != 1)
            return (void *)1;
        lds_live_unpin(lives[i], &pin);
    }
    return NULL;
}

/* A thread that pinned in more lives than its record cache holds gives every record
 * back at exit, so threads that come and go reuse them: 20 threads in turn leave one
 * record per live. Before, the records that fell out of the cache stayed owned by the
 * exited thread, and each live ended with 20 records (one per thread). */
static void test_thread_exit_returns_records_in_many_lives(void **state)
{
    (void)state;
    const char *p1 = gen_file("m1.ldsi", 1);
    lds_live *lives[MANY_LIVES];
    lds_load_options o;
    lds_load_options_default(&o);
    for (int i = 0; i < MANY_LIVES; i++) {
        lives[i] = new_live(0);
        assert_int_equal(lds_live_reload_path(lives[i], p1, &o, NULL, NULL, NULL), LDS_OK);
    }
    for (int t = 0; t < 20; t++) {
        pthread_t th;
        void *bad = NULL;
        assert_int_equal(pthread_create(&th, NULL, pin_in_every_live, lives), 0);
        pthread_join(th, &bad);
        assert_null(bad);
    }
    for (int i = 0; i < MANY_LIVES; i++) {
        assert_int_equal(lds__live_test_records(lives[i]), 1);
        lds_live_free(lives[i]);
    }
}

/* ==== arguments, install, statistics ===================================== */

static void release_free(void *p)
{
    free(p);
}

static void test_arguments_and_install(void **state)
{
    (void)state;
    lds_live *live = NULL;
    lds_live_options lo;
    lds_live_options_default(&lo);
    assert_int_equal(lo.max_retired, LDS_LIVE_DEFAULT_MAX_RETIRED);
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_live_create(NULL, NULL, &err), LDS_E_INVALID_ARG);
    lo.size = 3;
    assert_int_equal(lds_live_create(&lo, &live, &err), LDS_E_INVALID_ARG);
    assert_string_equal(err.field, "lds_live_options.size");
    assert_null(live);
    lds_live_options_default(&lo);
    lo.max_retired = LDS_LIVE_MAX_RETIRED_LIMIT + 1;
    assert_int_equal(lds_live_create(&lo, &live, &err), LDS_E_INVALID_ARG);
    assert_string_equal(err.field, "lds_live_options.max_retired");

    assert_int_equal(lds_live_create(NULL, &live, NULL), LDS_OK);
    lds_pin pin;
    assert_int_equal(lds_live_pin(live, &pin), LDS_E_STATE); /* nothing loaded yet */
    assert_null(pin.index);
    lds_live_unpin(live, &pin); /* ignored */
    assert_int_equal(lds_live_pin(NULL, &pin), LDS_E_INVALID_ARG);
    assert_int_equal(lds_live_pin(live, NULL), LDS_E_INVALID_ARG);
    assert_int_equal(lds_live_install_take(live, NULL, NULL, NULL), LDS_E_INVALID_ARG);

    /* install an index parsed from the caller's own malloc'd payload */
    bytes b = make_index(5, true);
    size_t plen = b.n - LDS_HEADER_SIZE;
    void *payload = malloc(plen);
    assert_non_null(payload);
    memcpy(payload, b.p + LDS_HEADER_SIZE, plen);
    lds_header hd;
    assert_int_equal(lds_header_decode(b.p, b.n, &hd, NULL), LDS_OK);
    lds_parse_options po;
    lds_parse_options_default(&po);
    po.release = release_free;
    po.release_ctx = payload;
    po.header = &hd; /* format 1.1: the chunk table */
    lds_index *idx = NULL;
    assert_int_equal(lds_index_from_payload(payload, plen, &po, &idx, NULL), LDS_OK);
    uint64_t gen = 0;
    assert_int_equal(lds_live_install_take(live, idx, &gen, NULL), LDS_OK);
    assert_int_equal(gen, 1);
    assert_int_equal(lds_live_pin(live, &pin), LDS_OK);
    assert_int_equal(wrong_rows(pin.index, 5), 0);
    lds_live_unpin(live, &pin);
    /* and a memory reload (copy) on top: gen 2, the installed one freed at the swap */
    assert_int_equal(lds_live_reload_memory(live, b.p, b.n, true, NULL, &gen, NULL, NULL), LDS_OK);
    assert_int_equal(gen, 2);
    lds_live_stats ls = live_stats(live);
    assert_int_equal(ls.generations_freed, 1);
    assert_int_equal(ls.last_load.path, LDS_LOAD_MEMORY);
    assert_int_equal(ls.bytes_current, plen);
    lds_live_free(live);
    lds_live_free(NULL);
    free(b.p);
}

static void test_stats_json(void **state)
{
    (void)state;
    const char *p1 = gen_file("g1.ldsi", 1);
    bytes b = make_index(2, true);
    b.p[LDS_HEADER_SIZE + 10] ^= 1;
    lds_live *live = new_live(0);
    lds_pool *pool = sentinel_pool(LDS_POOL_CHECK_OFF);
    lds_load_options o = adopt_from(pool);
    assert_int_equal(lds_live_reload_path(live, p1, &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(lds_live_reload_memory(live, b.p, b.n, false, &o, NULL, NULL, NULL),
                     LDS_E_CHECKSUM);
    lds_live_stats s = live_stats(live);
    char buf[2048];
    size_t need = 0;
    assert_int_equal(lds_live_stats_json(&s, buf, sizeof buf, &need), LDS_OK);
    assert_int_equal(need, strlen(buf));
    assert_non_null(strstr(buf, "{\"generation\":1,\"reloads_done\":1,\"reloads_failed\":1,"));
    assert_non_null(strstr(buf, "\"last_status\":\"E_CHECKSUM\""));
    assert_non_null(strstr(buf, "\"last_load\":{\"path\":\"memory\""));
    assert_int_equal(buf[need - 1], '}');
    char small[16];
    assert_int_equal(lds_live_stats_json(&s, small, sizeof small, NULL), LDS_E_LIMIT);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_int_equal(lds_live_stats_json(&s, NULL, 0, &need), LDS_E_LIMIT);
    assert_int_equal(need, strlen(buf));
    s.size = 8;
    assert_int_equal(lds_live_stats_json(&s, buf, sizeof buf, NULL), LDS_E_INVALID_ARG);
    assert_int_equal(lds_live_get_stats(live, &s), LDS_E_INVALID_ARG);
    lds_live_free(live);
    lds_pool_free(pool);
    free(b.p);
}

#endif /* LDS_LIVE_STRESS_ONLY */

/* ==== stress: readers and a reloader ===================================== */

#define STRESS_READERS 3
#define STRESS_CYCLES  150

typedef struct stress {
    lds_live *live;
    _Atomic bool stop;
    _Atomic uint64_t wrong, pins, max_seen;
} stress;

static void *stress_reader(void *p)
{
    stress *s = p;
    uint64_t x = (uint64_t)(uintptr_t)&x;
    while (!atomic_load(&s->stop)) {
        lds_pin pin;
        if (lds_live_pin(s->live, &pin) != LDS_OK) {
            atomic_fetch_add(&s->wrong, 1);
            continue;
        }
        /* generation g was made with seed g: check a few rows, a key and a search */
        uint64_t seed = pin.generation;
        for (int i = 0; i < 4; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            uint64_t r = (x >> 33) % ROWS;
            const float *row = lds_index_row(pin.index, r);
            char key[64];
            int kl = key_of(seed, r, key, sizeof key);
            uint64_t at = UINT64_MAX;
            bool bad =
                !row || lds_index_find_key(pin.index, key, (size_t)kl, &at) != LDS_OK || at != r;
            for (uint32_t d = 0; !bad && d < DIM; d++)
                bad = row[d] != value_of(seed, r, d);
            if (bad)
                atomic_fetch_add(&s->wrong, 1);
        }
        uint64_t seen = atomic_load(&s->max_seen);
        while (seed > seen && !atomic_compare_exchange_weak(&s->max_seen, &seen, seed)) {
        }
        atomic_fetch_add(&s->pins, 1);
        lds_live_unpin(s->live, &pin);
    }
    return NULL;
}

typedef struct mem_reader {
    const bytes *b;
    size_t pos;
} mem_reader;

static lds_status mem_read(void *ctx, void *buf, size_t cap, size_t *got)
{
    mem_reader *m = ctx;
    size_t n = m->b->n - m->pos < cap ? m->b->n - m->pos : cap;
    memcpy(buf, m->b->p + m->pos, n);
    m->pos += n;
    *got = n;
    return LDS_OK;
}

static void test_stress_readers_and_reloader(void **state)
{
    (void)state;
    bytes gens[8];
    for (int i = 0; i < 8; i++)
        gens[i] = make_index((uint64_t)i, true);
    lds_pool *pool = sentinel_pool(LDS_POOL_CHECK_OFF);
    stress s = {new_live(LDS_LIVE_MAX_RETIRED_LIMIT), false, 0, 0, 0};
    lds_load_options o = adopt_from(pool);
    o.chunk_bytes = 4096; /* several chunks per load: longer reload windows */
    mem_reader m0 = {&gens[1], 0};
    assert_int_equal(lds_live_reload_callback(s.live, mem_read, &m0, &o, NULL, NULL, NULL), LDS_OK);
    pthread_t t[STRESS_READERS];
    for (int i = 0; i < STRESS_READERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, stress_reader, &s), 0);
    for (uint64_t g = 2; g <= STRESS_CYCLES; g++) {
        mem_reader m = {&gens[g % 8], 0};
        uint64_t got = 0;
        lds_status st;
        /* the seed of generation g must be g: make gens[g % 8] carry seed g */
        free(gens[g % 8].p);
        gens[g % 8] = make_index(g, true);
        while ((st = lds_live_reload_callback(s.live, mem_read, &m, &o, &got, NULL, NULL)) ==
               LDS_E_LIMIT)
            m.pos = 0; /* readers still hold the bound: try again */
        assert_int_equal(st, LDS_OK);
        assert_int_equal(got, g);
    }
    atomic_store(&s.stop, true);
    for (int i = 0; i < STRESS_READERS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&s.wrong), 0);
    assert_true(atomic_load(&s.pins) > 0);
    lds_live_stats ls = live_stats(s.live);
    assert_int_equal(ls.generation, STRESS_CYCLES);
    assert_int_equal(ls.retired_pinned, 0);
    assert_int_equal(ls.generations_freed, STRESS_CYCLES - 1);
    lds_pool_stats ps = pool_stats(pool);
    assert_int_equal(ps.leases_current, 1);
    assert_int_equal(ps.rents, ps.returns + 1);
    lds_live_free(s.live);
    ps = pool_stats(pool);
    assert_int_equal(ps.rents, ps.returns);
    lds_pool_free(pool);
    for (int i = 0; i < 8; i++)
        free(gens[i].p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#ifndef LDS_LIVE_STRESS_ONLY
        cmocka_unit_test(test_pinned_generation_survives_and_returns_at_unpin),
        cmocka_unit_test(test_unpinned_generation_freed_at_swap),
        cmocka_unit_test(test_guard_mode_child),
        cmocka_unit_test(test_failed_reloads_keep_serving),
        cmocka_unit_test(test_retired_bound_refuses),
        cmocka_unit_test(test_retired_peak_counts_pinned_only),
        cmocka_unit_test(test_concurrent_reload_refused),
        cmocka_unit_test(test_racing_reloads),
        cmocka_unit_test(test_mapped_generation_across_rename),
        cmocka_unit_test(test_mapped_rewritten_in_place_builds_keys),
        cmocka_unit_test(test_many_pins_on_one_thread),
        cmocka_unit_test(test_pin_released_on_another_thread),
        cmocka_unit_test(test_close_while_pinned_refuses),
        cmocka_unit_test(test_free_while_pinned_aborts),
        cmocka_unit_test(test_thread_exit_returns_records_in_many_lives),
        cmocka_unit_test(test_arguments_and_install),
        cmocka_unit_test(test_stats_json),
        cmocka_unit_test(test_own_pool_rents_warm_and_keeps_one_spare),
        cmocka_unit_test(test_own_pool_frees_the_surplus_of_an_overlap),
        cmocka_unit_test(test_own_pool_reuses_a_buffer_a_reader_freed),
#endif
        cmocka_unit_test(test_stress_readers_and_reloader),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
