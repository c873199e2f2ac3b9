/*
 * Tests of the parallel reads of a regular file (loader/parallel.c, docs/adr/0030) and of
 * the huge-page fallback a load reports (docs/adr/0029): the same index as one reader for
 * 1..8 readers over sizes that are multiples of neither the range nor the reader count;
 * short reads and EINTR on chosen readers; a file truncated or grown under a reader; an
 * I/O error; cancellation at a gate and at random points (the rental returned once, after
 * the last reader ended); the per-range verify hook; madvise refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lodestar.h"
#include "../loader/load_internal.h"
#include "../pool/pool_internal.h"

static char tmpdir[64];

static const char *tmp_path(const char *name)
{
    static char path[160];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return path;
}

/* Writes an index of `rows` x `dim` f32 with keys (and ids when `ids`) to `path`: format
 * 1.1 with chunks of `chunk` bytes, or 1.0 for LDS_CHUNKS_NONE. */
static void write_index_chunked(const char *path, uint64_t rows, uint32_t dim, bool ids,
                                uint32_t chunk)
{
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.chunk_bytes = chunk;
    wo.dim = dim;
    wo.dtype = LDS_DTYPE_F32;
    wo.with_ids = ids;
    wo.with_keys = true;
    lds_writer *w = NULL;
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_writer_open_path(path, &wo, &w, &err), LDS_OK);
    float *v = malloc(sizeof(float) * dim);
    assert_non_null(v);
    char key[32];
    for (uint64_t r = 0; r < rows; r++) {
        for (uint32_t d = 0; d < dim; d++)
            v[d] = (float)((r * 31 + d * 7) % 97) / 13.0f - 3.0f;
        int kl = snprintf(key, sizeof key, "row-%llu", (unsigned long long)r);
        assert_int_equal(lds_writer_add_row(w, v, dim, r * 3 + 1, key, (size_t)kl, &err), LDS_OK);
    }
    free(v);
    assert_int_equal(lds_writer_finish(w, &err), LDS_OK);
    lds_writer_free(w);
}

/* Format 1.0 (one payload checksum, hashed in order while the readers read). */
static void write_index(const char *path, uint64_t rows, uint32_t dim, bool ids)
{
    write_index_chunked(path, rows, dim, ids, LDS_CHUNKS_NONE);
}

static uint64_t payload_of(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (uint64_t)st.st_size - LDS_HEADER_SIZE;
}

static lds_pool *private_pool(void)
{
    lds_pool_options po;
    lds_pool_options_default(&po);
    po.fill_on_rent = 0xA5; /* stale bytes would show */
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

static void assert_pool_clear(lds_pool *pool)
{
    lds_pool_stats s = pool_stats(pool);
    assert_int_equal(s.leases_current, 0);
    assert_int_equal(s.rents, s.returns);
}

static lds_load_options opts(lds_pool *pool, unsigned threads, size_t range)
{
    lds_load_options o;
    lds_load_options_default(&o);
    o.pool = pool;
    o.read_threads = threads;
    o.chunk_bytes = range;
    return o;
}

static void assert_same_index(const lds_index *a, const lds_index *b)
{
    assert_int_equal(lds_index_rows(a), lds_index_rows(b));
    assert_int_equal(lds_index_dim(a), lds_index_dim(b));
    assert_int_equal(lds_index_payload_bytes(a), lds_index_payload_bytes(b));
    assert_int_equal(lds_index_checksum(a), lds_index_checksum(b));
    size_t row_bytes = lds_index_dim(a) * sizeof(float);
    for (uint64_t r = 0; r < lds_index_rows(a); r++) {
        assert_memory_equal(lds_index_row(a, r), lds_index_row(b, r), row_bytes);
        uint64_t ia = 0, ib = 1;
        assert_int_equal(lds_index_id(a, r, &ia), lds_index_id(b, r, &ib));
        if (lds_index_has_ids(a))
            assert_int_equal(ia, ib);
        const char *ka, *kb;
        size_t la, lb;
        assert_int_equal(lds_index_key(a, r, &ka, &la), LDS_OK);
        assert_int_equal(lds_index_key(b, r, &kb, &lb), LDS_OK);
        assert_int_equal(la, lb);
        assert_memory_equal(ka, kb, la);
    }
}

/* ==== the pread hook ====================================================== */

/* What the hook does; every field is read by reader threads, so under `lock`. Triggers by
 * file offset happen under whichever reader reads there. */
typedef struct hook_plan {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned short_on;   /* bit k: reader k gets at most 1000 bytes a call */
    unsigned eintr_on;   /* bit k: reader k gets EINTR on every other call */
    unsigned calls[64];  /* per reader */
    unsigned eintrs;     /* EINTRs handed out */
    const char *file;    /* the file the triggers change (the loader's fd is read-only) */
    off_t truncate_from; /* > 0: the first read at or past it truncates the file first */
    off_t truncate_to;
    off_t grow_from; /* > 0: the first read at or past it appends bytes first */
    off_t eio_at;    /* > 0: a read starting here fails with EIO */
    bool gate;       /* a reader other than 0 waits at the gate on its first read;
                        reader 0 reads slowly until then */
    bool at_gate, open;
    bool done_once;
} hook_plan;

static hook_plan plan;
static ssize_t (*plain_pread)(int, void *, size_t, off_t, unsigned);

static void plan_reset(void)
{
    pthread_mutex_lock(&plan.lock);
    memset(plan.calls, 0, sizeof plan.calls);
    plan.short_on = plan.eintr_on = 0;
    plan.eintrs = 0;
    plan.truncate_from = plan.truncate_to = plan.grow_from = plan.eio_at = 0;
    plan.gate = plan.at_gate = plan.open = plan.done_once = false;
    pthread_mutex_unlock(&plan.lock);
}

static ssize_t hooked_pread(int fd, void *buf, size_t n, off_t off, unsigned reader)
{
    pthread_mutex_lock(&plan.lock);
    unsigned call = plan.calls[reader & 63]++;
    bool eintr = (plan.eintr_on >> reader & 1) && call % 2 == 0;
    if (eintr)
        plan.eintrs++;
    if ((plan.short_on >> reader & 1) && n > 1000)
        n = 1000;
    if (plan.truncate_from > 0 && off >= plan.truncate_from && !plan.done_once) {
        plan.done_once = true;
        if (truncate(plan.file, plan.truncate_to) != 0)
            abort();
    }
    if (plan.grow_from > 0 && off >= plan.grow_from && !plan.done_once) {
        plan.done_once = true;
        int w = open(plan.file, O_WRONLY | O_APPEND);
        if (w < 0 || write(w, "extra", 5) != 5)
            abort();
        close(w);
    }
    bool eio = plan.eio_at > 0 && off == plan.eio_at;
    if (plan.gate && reader != 0 && !plan.at_gate) {
        plan.at_gate = true;
        pthread_cond_broadcast(&plan.cond);
        while (!plan.open)
            pthread_cond_wait(&plan.cond, &plan.lock);
    }
    bool slow = plan.gate && reader == 0 && !plan.at_gate;
    pthread_mutex_unlock(&plan.lock);
    if (slow)
        usleep(2000);
    if (eintr) {
        errno = EINTR;
        return -1;
    }
    if (eio) {
        errno = EIO;
        return -1;
    }
    return plain_pread(fd, buf, n, off, reader);
}

/* ==== tests =============================================================== */

/* 1..8 readers, ranges that divide neither the payload nor by the reader count: the same
 * index as one reader, checksum hashed while reading (or by the parser), every rental back. */
static void test_parallel_same_index(void **state)
{
    (void)state;
    const char *path = tmp_path("same.ldsi");
    write_index(path, 3001, 37, true); /* payload 3001 * 148 + keys + ids: odd */
    uint64_t payload = payload_of(path);
    lds_pool *pool = private_pool();
    lds_index *ref = NULL;
    lds_load_options o1 = opts(pool, 1, 0);
    assert_int_equal(lds_load_path(path, &o1, &ref, NULL, NULL), LDS_OK);
    static const size_t ranges[] = {4096 + 64, 7919, 65536, 1u << 20};
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        for (unsigned t = 1; t <= 8; t++) {
            for (int twopass = 0; twopass < 2; twopass++) {
                lds_load_options o = opts(pool, t, ranges[r]);
                o.hash_while_reading = !twopass;
                lds_index *idx = NULL;
                lds_load_info info;
                lds_load_info_init(&info);
                lds_error err;
                lds_error_init(&err);
                assert_int_equal(lds_load_path(path, &o, &idx, &info, &err), LDS_OK);
                size_t nr = (size_t)((payload + ranges[r] - 1) / ranges[r]);
                unsigned want = t == 1 ? 1 : (t < nr ? t : (unsigned)nr);
                assert_int_equal(info.read_threads, want);
                assert_int_equal(info.payload_bytes, payload);
                assert_true(info.checksum_verified);
                assert_int_equal(info.hashed_while_reading, !twopass);
                assert_int_equal(info.path, LDS_LOAD_POOLED);
                assert_same_index(idx, ref);
                lds_index_free(idx);
            }
        }
    }
    lds_index_free(ref);
    assert_pool_clear(pool);
    lds_pool_free(pool);
}

/* Through an fd at an offset (two indexes' worth of bytes before it): the readers start
 * at the header's position, and the fd ends positioned after the index, as with one. */
static void test_parallel_fd_at_offset(void **state)
{
    (void)state;
    const char *path = tmp_path("offset.ldsi");
    write_index(path, 2000, 16, false);
    uint64_t size = payload_of(path) + LDS_HEADER_SIZE;
    unsigned char *bytes = malloc(size + 777);
    assert_non_null(bytes);
    memset(bytes, 0x5A, 777);
    int in = open(path, O_RDONLY);
    assert_true(in >= 0);
    assert_int_equal(pread(in, bytes + 777, size, 0), (ssize_t)size);
    close(in);
    const char *shifted = tmp_path("shifted.ldsi");
    int fd = open(shifted, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, size + 777), (ssize_t)(size + 777));
    free(bytes);
    assert_int_equal(lseek(fd, 777, SEEK_SET), 777);
    lds_pool *pool = private_pool();
    lds_load_options o = opts(pool, 3, 8192);
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_load_fd(fd, &o, &idx, &info, NULL), LDS_OK);
    assert_int_equal(info.read_threads, 3);
    assert_int_equal(lseek(fd, 0, SEEK_CUR), (off_t)(777 + size));
    assert_true(info.checksum_verified);
    lds_index_free(idx);
    close(fd);
    assert_pool_clear(pool);
    lds_pool_free(pool);
}

/* Short reads and EINTR on chosen readers change nothing. */
static void test_parallel_short_reads_and_eintr(void **state)
{
    (void)state;
    const char *path = tmp_path("short.ldsi");
    write_index(path, 2500, 24, true);
    lds_pool *pool = private_pool();
    lds_index *ref = NULL;
    lds_load_options o1 = opts(pool, 1, 0);
    assert_int_equal(lds_load_path(path, &o1, &ref, NULL, NULL), LDS_OK);
    lds__load_pread = hooked_pread;
    for (unsigned t = 2; t <= 6; t++) {
        plan_reset();
        plan.short_on = 1u << 0 | 1u << 1 | 1u << (t - 1); /* which readers run is the
                                                              scheduler's: EINTR for all */
        plan.eintr_on = 0xFFu;
        lds_load_options o = opts(pool, t, 12345);
        lds_index *idx = NULL;
        lds_load_info info;
        lds_load_info_init(&info);
        assert_int_equal(lds_load_path(path, &o, &idx, &info, NULL), LDS_OK);
        assert_int_equal(info.read_threads, t);
        assert_true(plan.eintrs > 0);
        assert_same_index(idx, ref);
        lds_index_free(idx);
    }
    lds__load_pread = plain_pread;
    lds_index_free(ref);
    assert_pool_clear(pool);
    lds_pool_free(pool);
}

/* The file is truncated under the reader of the third range: LDS_E_TRUNCATED at the cut (the lowest
 * failure whichever reader met which), as one reader would say; every rental back. */
static void test_parallel_truncated_under_a_reader(void **state)
{
    (void)state;
    const char *path = tmp_path("trunc.ldsi");
    lds_pool *pool = private_pool();
    lds__load_pread = hooked_pread;
    for (unsigned t = 3; t <= 8; t++) {
        write_index(path, 3000, 20, false);
        uint64_t payload = payload_of(path);
        uint64_t cut = payload / 2 + t * 1001; /* payload bytes kept */
        plan_reset();
        plan.file = path;
        plan.truncate_from = (off_t)(LDS_HEADER_SIZE + 2 * 5000); /* the third range */
        plan.truncate_to = (off_t)(LDS_HEADER_SIZE + cut);
        lds_load_options o = opts(pool, t, 5000);
        lds_index *idx = NULL;
        lds_error err;
        lds_error_init(&err);
        assert_int_equal(lds_load_path(path, &o, &idx, NULL, &err), LDS_E_TRUNCATED);
        assert_null(idx);
        assert_string_equal(err.field, "payload");
        assert_int_equal(err.offset, LDS_HEADER_SIZE + cut);
        char want[160];
        snprintf(want, sizeof want,
                 "the input ended after %llu of the %llu declared payload bytes (at byte %llu)",
                 (unsigned long long)cut, (unsigned long long)payload,
                 (unsigned long long)(LDS_HEADER_SIZE + cut));
        assert_string_equal(err.message, want);
        assert_pool_clear(pool);
        assert_int_equal(pool_stats(pool).rents, t - 2);
    }
    lds__load_pread = plain_pread;
    lds_pool_free(pool);
}

/* Grown while read: the bytes after the payload are refused as with one reader. */
static void test_parallel_grown_while_read(void **state)
{
    (void)state;
    const char *path = tmp_path("grow.ldsi");
    write_index(path, 3000, 20, false);
    uint64_t payload = payload_of(path);
    lds_pool *pool = private_pool();
    lds__load_pread = hooked_pread;
    plan_reset();
    plan.file = path;
    plan.grow_from = (off_t)(LDS_HEADER_SIZE + 6000);
    lds_load_options o = opts(pool, 4, 6000);
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_load_path(path, &o, &idx, NULL, &err), LDS_E_TRAILING);
    assert_string_equal(err.field, "payload.end");
    assert_int_equal(err.offset, LDS_HEADER_SIZE + payload);
    lds__load_pread = plain_pread;
    assert_pool_clear(pool);
    lds_pool_free(pool);
}

/* An I/O error at the eighth range: LDS_E_IO, field "stream" (its offset counts the
 * source's bytes, header included, as the single reader's does), the errno. */
static void test_parallel_io_error(void **state)
{
    (void)state;
    const char *path = tmp_path("eio.ldsi");
    write_index(path, 3000, 20, false);
    lds_pool *pool = private_pool();
    lds__load_pread = hooked_pread;
    plan_reset();
    plan.eio_at = (off_t)(LDS_HEADER_SIZE + 7 * 4096);
    lds_load_options o = opts(pool, 3, 4096);
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_load_path(path, &o, &idx, NULL, &err), LDS_E_IO);
    assert_string_equal(err.field, "stream");
    assert_int_equal(err.sys_errno, EIO);
    assert_int_equal(err.offset, LDS_HEADER_SIZE + 7 * 4096); /* stream bytes */
    assert_non_null(strstr(err.message, "read failed after"));
    lds__load_pread = plain_pread;
    assert_pool_clear(pool);
    lds_pool_free(pool);
}

/* An lds_error smaller than today's gets the same status, field and offset. */
static void test_parallel_error_into_old_struct(void **state)
{
    (void)state;
    const char *path = tmp_path("olderr.ldsi");
    write_index(path, 3000, 20, false);
    lds_pool *pool = private_pool();
    lds__load_pread = hooked_pread;
    plan_reset();
    plan.eio_at = (off_t)(LDS_HEADER_SIZE + 5 * 4096);
    lds_load_options o = opts(pool, 4, 4096);
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    err.size = offsetof(lds_error, message) + 40;
    assert_int_equal(lds_load_path(path, &o, &idx, NULL, &err), LDS_E_IO);
    assert_int_equal(err.status, LDS_E_IO);
    assert_string_equal(err.field, "stream");
    assert_true(strlen(err.message) < 40);
    assert_non_null(strstr(err.message, "(at byte"));
    lds__load_pread = plain_pread;
    assert_pool_clear(pool);
    lds_pool_free(pool);
}

/* Cancellation while a reader other than the calling thread is held at a gate: the load does not
 * return, nor the rental go back, until that reader has ended; then LDS_E_CANCELLED, one return. */
typedef struct gate_load {
    const char *path;
    lds_load_options o;
    lds_status st;
    lds_index *idx;
    _Atomic bool cancel;
    _Atomic bool returned;
} gate_load;

static bool gate_cancel(void *ctx)
{
    return atomic_load(&((gate_load *)ctx)->cancel);
}

static void *gate_main(void *arg)
{
    gate_load *g = arg;
    g->st = lds_load_path(g->path, &g->o, &g->idx, NULL, NULL);
    atomic_store(&g->returned, true);
    return NULL;
}

static void test_parallel_cancel_at_a_gate(void **state)
{
    (void)state;
    const char *path = tmp_path("gate.ldsi");
    write_index(path, 4000, 20, false);
    lds_pool *pool = private_pool();
    lds__load_pread = hooked_pread;
    plan_reset();
    plan.gate = true;
    gate_load g = {.path = path};
    g.o = opts(pool, 4, 4096);
    g.o.cancel = gate_cancel;
    g.o.callback_ctx = &g;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, gate_main, &g), 0);
    pthread_mutex_lock(&plan.lock);
    while (!plan.at_gate)
        pthread_cond_wait(&plan.cond, &plan.lock);
    pthread_mutex_unlock(&plan.lock);
    atomic_store(&g.cancel, true); /* asked while that reader holds its range */
    usleep(150000);                /* the calling thread polls every 50 ms */
    assert_false(atomic_load(&g.returned));
    lds_pool_stats ps = pool_stats(pool);
    assert_int_equal(ps.rents, 1);
    assert_int_equal(ps.leases_current, 1);
    assert_int_equal(ps.returns, 0);
    pthread_mutex_lock(&plan.lock);
    plan.open = true;
    pthread_cond_broadcast(&plan.cond);
    pthread_mutex_unlock(&plan.lock);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(g.st, LDS_E_CANCELLED);
    assert_null(g.idx);
    ps = pool_stats(pool);
    assert_int_equal(ps.rents, 1);
    assert_int_equal(ps.returns, 1);
    assert_int_equal(ps.leases_current, 0);
    lds__load_pread = plain_pread;
    lds_pool_free(pool);
}

/* Cancelled after a random number of checks, with 2..8 readers: cancelled (or done, when
 * the reads outran it), one rental, one return, field "payload". */
typedef struct count_cancel {
    unsigned calls, at;
} count_cancel;

static bool count_cancel_cb(void *ctx)
{
    count_cancel *c = ctx;
    return ++c->calls >= c->at;
}

static void test_parallel_cancel_at_random_points(void **state)
{
    (void)state;
    const char *path = tmp_path("rand.ldsi");
    write_index(path, 6000, 20, false);
    lds_pool *pool = private_pool();
    uint64_t seed = 0x2545F4914F6CDD1Du;
    unsigned cancelled = 0;
    uint64_t rented = 0;
    for (int i = 0; i < 60; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        count_cancel cc = {.at = 1 + (unsigned)(seed % 40)};
        lds_load_options o = opts(pool, 2 + (unsigned)(seed >> 8) % 7, 2048 + (seed >> 16) % 3000);
        o.cancel = count_cancel_cb;
        o.callback_ctx = &cc;
        lds_index *idx = NULL;
        lds_error err;
        lds_error_init(&err);
        lds_status st = lds_load_path(path, &o, &idx, NULL, &err);
        if (st == LDS_E_CANCELLED) {
            cancelled++;
            assert_null(idx);
            assert_string_equal(err.field, "payload");
        } else {
            assert_int_equal(st, LDS_OK);
            lds_index_free(idx);
        }
        /* cancelled at the first check (before the payload): nothing rented */
        rented += cc.at > 1;
        lds_pool_stats ps = pool_stats(pool);
        assert_int_equal(ps.rents, rented);
        assert_int_equal(ps.returns, rented);
        assert_int_equal(ps.leases_current, 0);
    }
    assert_true(cancelled > 0);
    lds_pool_free(pool);
}

/* The verify hook: called once per range on the reader that read it, ranges aligned and
 * covering the payload; of two failing ranges the lower one is reported. */
typedef struct verify_log {
    _Atomic unsigned calls;
    _Atomic uint64_t bytes;
    size_t range;
    size_t fail_a, fail_b; /* ranges that fail (SIZE_MAX: none) */
    bool misaligned;
} verify_log;

static lds_status verify_cb(void *ctx, size_t offset, const unsigned char *p, size_t n,
                            lds_error *err)
{
    verify_log *v = ctx;
    (void)p;
    atomic_fetch_add(&v->calls, 1);
    atomic_fetch_add(&v->bytes, n);
    if (offset % v->range != 0)
        v->misaligned = true;
    size_t i = offset / v->range;
    if (i == v->fail_a || i == v->fail_b)
        return lds__load_fail(err, LDS_E_CHECKSUM, "chunk", LDS_HEADER_SIZE + offset, 0, NULL,
                              "checksum of chunk %zu", i);
    return LDS_OK;
}

static void test_parallel_verify_hook(void **state)
{
    (void)state;
    const char *path = tmp_path("verify.ldsi");
    write_index(path, 5000, 30, false);
    uint64_t payload = payload_of(path);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    unsigned char *dst = malloc(payload);
    assert_non_null(dst);
    lds_load_options lo;
    lds_load_options_default(&lo);
    for (unsigned t = 1; t <= 8; t++) {
        verify_log v = {.range = 16384, .fail_a = SIZE_MAX, .fail_b = SIZE_MAX};
        lds__pread_job j = {.fd = fd,
                            .file_at = LDS_HEADER_SIZE,
                            .payload_at = LDS_HEADER_SIZE,
                            .stream_at = LDS_HEADER_SIZE,
                            .dst = dst,
                            .length = (size_t)payload,
                            .range = v.range,
                            .threads = t,
                            .hash = true,
                            .verify = verify_cb,
                            .verify_ctx = &v,
                            .opts = &lo};
        assert_int_equal(lds__pread_payload(&j, NULL), LDS_OK);
        assert_int_equal(atomic_load(&v.calls), (payload + v.range - 1) / v.range);
        assert_int_equal(atomic_load(&v.bytes), payload);
        assert_false(v.misaligned);
        assert_true(j.hashed);
        /* the whole-payload hash equals XXH3 of [0, length - 8) */
        lds_index *idx = NULL;
        lds_load_options o1 = lo;
        o1.read_threads = 1;
        assert_int_equal(lds_load_path(path, &o1, &idx, NULL, NULL), LDS_OK);
        assert_int_equal(j.hash_value, lds_index_checksum(idx));
        lds_index_free(idx);

        v = (verify_log){.range = 16384, .fail_a = 9, .fail_b = 3};
        j.verify_ctx = &v;
        lds_error err;
        lds_error_init(&err);
        assert_int_equal(lds__pread_payload(&j, &err), LDS_E_CHECKSUM);
        assert_int_equal(err.offset, LDS_HEADER_SIZE + 3 * 16384);
        assert_string_equal(err.field, "chunk");
    }
    free(dst);
    close(fd);
}

/* Format 1.1 under 1..8 readers: the same index as format 1.0 (and as one reader), every
 * chunk verified on the reader that read it (the parser hashes nothing again); a byte
 * flipped in chunk k is named as chunk k, whichever reader read it; every rental back. */
static void test_parallel_chunked(void **state)
{
    (void)state;
    const char *p10 = tmp_path("v10.ldsi"), *p11 = tmp_path("v11.ldsi");
    write_index(p10, 3001, 37, true);
    write_index_chunked(p11, 3001, 37, true, 4096);
    lds_pool *pool = private_pool();
    lds_index *ref = NULL;
    lds_load_options o1 = opts(pool, 1, 0);
    assert_int_equal(lds_load_path(p10, &o1, &ref, NULL, NULL), LDS_OK);
    for (unsigned t = 1; t <= 8; t++) {
        lds_load_options o = opts(pool, t, 0);
        lds_index *idx = NULL;
        lds_load_info info;
        lds_load_info_init(&info);
        lds_error err;
        lds_error_init(&err);
        assert_int_equal(lds_load_path(p11, &o, &idx, &info, &err), LDS_OK);
        assert_int_equal(info.read_threads, t);
        assert_true(info.checksum_verified);
        assert_true(info.hashed_while_reading);
        assert_int_equal(lds_index_chunk_bytes(idx), 4096);
        assert_int_equal(lds_index_rows(idx), lds_index_rows(ref));
        for (uint64_t r = 0; r < lds_index_rows(ref); r += 7)
            assert_memory_equal(lds_index_row(idx, r), lds_index_row(ref, r), 37 * sizeof(float));
        lds_index_free(idx);
    }
    /* a byte flipped in chunk 17 */
    int fd = open(p11, O_RDWR);
    assert_true(fd >= 0);
    off_t at = LDS_HEADER_SIZE + 17 * 4096 + 1234;
    unsigned char byte;
    assert_int_equal(pread(fd, &byte, 1, at), 1);
    byte ^= 0x40;
    assert_int_equal(pwrite(fd, &byte, 1, at), 1);
    close(fd);
    for (unsigned t = 1; t <= 8; t++) {
        lds_load_options o = opts(pool, t, 0);
        lds_index *idx = NULL;
        lds_error err;
        lds_error_init(&err);
        assert_int_equal(lds_load_path(p11, &o, &idx, NULL, &err), LDS_E_CHECKSUM);
        assert_null(idx);
        assert_string_equal(err.field, "chunk");
        assert_int_equal(err.offset, LDS_HEADER_SIZE + 17 * 4096);
        assert_non_null(strstr(err.message, "checksum of chunk 17 (payload bytes 69632..73727)"));
    }
    lds_index_free(ref);
    assert_pool_clear(pool);
    lds_pool_free(pool);
}

/* Format 1.1 chunks hashed piece by piece as they are read (ADR 0040's alternative,
 * lds__load_piece_override): chunks of 64 KiB read in pieces of 1,000 and 4,096 bytes
 * (neither divides the chunk; the payload is no multiple of the chunk, so the last range
 * holds the short last chunk and the table), with short reads and EINTR on some readers:
 * the same index as format 1.0 under 1..8 readers, as with each chunk read whole (the
 * default); a byte flipped in the first, a middle or the last chunk is named as that
 * chunk, in the same words. */
static void test_parallel_chunked_pieces(void **state)
{
    (void)state;
    const char *p10 = tmp_path("p10.ldsi"), *p11 = tmp_path("p11.ldsi");
    write_index(p10, 9001, 37, true); /* 1,332,148 payload bytes: 21 chunks, the last short */
    write_index_chunked(p11, 9001, 37, true, 65536);
    lds_pool *pool = private_pool();
    lds_index *ref = NULL;
    lds_load_options o1 = opts(pool, 1, 0);
    assert_int_equal(lds_load_path(p10, &o1, &ref, NULL, NULL), LDS_OK);
    static const size_t pieces[] = {1000, 4096};
    for (size_t v = 0; v < 2; v++)
        for (size_t q = 0; q < 2; q++)
            for (unsigned t = 1; t <= 8; t++) {
                plan_reset();
                plan.short_on = t > 2 ? 0x2u : 0;
                plan.eintr_on = t > 3 ? 0x5u : 0;
                lds__load_pread = hooked_pread;
                lds__load_piece_override = v == 0 ? 0 : pieces[q];
                lds_load_options o = opts(pool, t, 0);
                lds_index *idx = NULL;
                lds_load_info info;
                lds_load_info_init(&info);
                assert_int_equal(lds_load_path(p11, &o, &idx, &info, NULL), LDS_OK);
                lds__load_pread = plain_pread;
                lds__load_piece_override = 0;
                assert_int_equal(info.read_threads, t);
                assert_true(info.checksum_verified);
                assert_same_index(idx, ref);
                lds_index_free(idx);
            }
    static const unsigned bad[] = {0, 9, 20};
    for (size_t b = 0; b < 3; b++) {
        int fd = open(p11, O_RDWR);
        assert_true(fd >= 0);
        off_t at = LDS_HEADER_SIZE + (off_t)bad[b] * 65536 + 777;
        unsigned char byte;
        assert_int_equal(pread(fd, &byte, 1, at), 1);
        byte ^= 0x40;
        assert_int_equal(pwrite(fd, &byte, 1, at), 1);
        /* the message of a chunk read whole and hashed once (the default) */
        lds_load_options ow = opts(pool, 2, 0);
        lds_index *none = NULL;
        lds_error whole;
        lds_error_init(&whole);
        assert_int_equal(lds_load_path(p11, &ow, &none, NULL, &whole), LDS_E_CHECKSUM);
        lds__load_piece_override = 1000;
        for (unsigned t = 1; t <= 8; t++) {
            lds_load_options o = opts(pool, t, 0);
            lds_index *idx = NULL;
            lds_error err;
            lds_error_init(&err);
            assert_int_equal(lds_load_path(p11, &o, &idx, NULL, &err), LDS_E_CHECKSUM);
            assert_null(idx);
            assert_string_equal(err.field, "chunk");
            assert_int_equal(err.offset, LDS_HEADER_SIZE + (uint64_t)bad[b] * 65536);
            char want[48];
            snprintf(want, sizeof want, "checksum of chunk %u (", bad[b]);
            assert_non_null(strstr(err.message, want));
            assert_string_equal(err.message, whole.message);
        }
        lds__load_piece_override = 0;
        byte ^= 0x40; /* mended for the next */
        assert_int_equal(pwrite(fd, &byte, 1, at), 1);
        close(fd);
    }
    lds_index_free(ref);
    assert_pool_clear(pool);
    lds_pool_free(pool);
}

/* madvise(MADV_HUGEPAGE) refused: the load succeeds on 4 KiB pages and says so; not
 * refused, it reports huge pages (where THP is not "never"). */
static void test_madvise_refused_falls_back(void **state)
{
    (void)state;
    const char *path = tmp_path("huge.ldsi");
    write_index(path, 20000, 32, false); /* 2.6 MB payload: a huge-page class */
    for (int refuse = 0; refuse < 2; refuse++) {
        lds_pool *pool = private_pool(); /* fresh: the rental is a new mapping */
        if (refuse)
            lds__os_test_fail(LDS__OS_MADVISE, EINVAL, 0, 1);
        lds_load_options o = opts(pool, 0, 0);
        lds_index *idx = NULL;
        lds_load_info info;
        lds_load_info_init(&info);
        assert_int_equal(lds_load_path(path, &o, &idx, &info, NULL), LDS_OK);
        assert_true(info.checksum_verified);
        if (refuse || lds__thp_mode() == 0) {
            assert_false(info.huge_pages);
            assert_true(info.huge_pages_fallback);
        } else {
            assert_true(info.huge_pages);
            assert_false(info.huge_pages_fallback);
        }
        lds_index_free(idx);
        lds__os_test_fail(LDS__OS_MADVISE, 0, 0, 0);
        assert_pool_clear(pool);
        lds_pool_free(pool);
    }
    /* huge pages off: neither */
    lds_pool_options po;
    lds_pool_options_default(&po);
    po.huge_pages = LDS_POOL_HUGE_PAGES_OFF;
    lds_pool *pool = NULL;
    assert_int_equal(lds_pool_create(&po, &pool), LDS_OK);
    lds_load_options o = opts(pool, 0, 0);
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_load_path(path, &o, &idx, &info, NULL), LDS_OK);
    assert_false(info.huge_pages);
    assert_false(info.huge_pages_fallback);
    lds_index_free(idx);
    lds_pool_free(pool);
}

/* Streams keep one reader whatever read_threads says: a FILE*, a pipe. */
static void test_streams_keep_one_reader(void **state)
{
    (void)state;
    const char *path = tmp_path("stream.ldsi");
    write_index(path, 3000, 20, false);
    lds_pool *pool = private_pool();
    lds_load_options o = opts(pool, 8, 4096);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_load_file(f, &o, &idx, &info, NULL), LDS_OK);
    assert_int_equal(info.read_threads, 1);
    lds_index_free(idx);
    fclose(f);
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        int in = open(path, O_RDONLY);
        char buf[65536];
        ssize_t n;
        while ((n = read(in, buf, sizeof buf)) > 0)
            if (write(p[1], buf, (size_t)n) != n)
                _exit(1);
        _exit(0);
    }
    close(p[1]);
    lds_load_info_init(&info);
    assert_int_equal(lds_load_fd(p[0], &o, &idx, &info, NULL), LDS_OK);
    assert_int_equal(info.read_threads, 1);
    lds_index_free(idx);
    close(p[0]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    assert_pool_clear(pool);
    lds_pool_free(pool);
}

static int setup(void **state)
{
    (void)state;
    plain_pread = lds__load_pread;
    pthread_mutex_init(&plan.lock, NULL);
    pthread_cond_init(&plan.cond, NULL);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lds-parallel-XXXXXX");
    return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parallel_same_index),
        cmocka_unit_test(test_parallel_fd_at_offset),
        cmocka_unit_test(test_parallel_short_reads_and_eintr),
        cmocka_unit_test(test_parallel_truncated_under_a_reader),
        cmocka_unit_test(test_parallel_grown_while_read),
        cmocka_unit_test(test_parallel_io_error),
        cmocka_unit_test(test_parallel_error_into_old_struct),
        cmocka_unit_test(test_parallel_cancel_at_a_gate),
        cmocka_unit_test(test_parallel_cancel_at_random_points),
        cmocka_unit_test(test_parallel_verify_hook),
        cmocka_unit_test(test_parallel_chunked),
        cmocka_unit_test(test_parallel_chunked_pieces),
        cmocka_unit_test(test_madvise_refused_falls_back),
        cmocka_unit_test(test_streams_keep_one_reader),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
