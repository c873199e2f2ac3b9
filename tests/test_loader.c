/*
 * Tests of the stream loader (loader/): each pins an invariant of docs/design.md
 * ("Invariants") or a promise of lodestar_load.h. Index files are made by the
 * writer in the test itself.
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <zstd.h>

#include "lodestar.h"
#include "../loader/load_internal.h"

static char tmpdir[64];

/* ==== helpers ============================================================ */

typedef struct bytes {
    unsigned char *p;
    size_t n;
} bytes;

typedef struct cfg {
    uint64_t rows;
    uint32_t dim;
    lds_dtype dtype;
    bool ids;
    bool keys;
    size_t key_pad; /* extra bytes per key */
    uint32_t chunk; /* 0: format 1.0 (most tests edit its declared length); else 1.1 chunks */
} cfg;

/* Writes an index with the writer into a temporary FILE and returns its bytes. */
static bytes make_index(const cfg *c)
{
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = c->dim;
    wo.dtype = c->dtype ? c->dtype : LDS_DTYPE_F32;
    wo.with_ids = c->ids;
    wo.with_keys = c->keys;
    wo.chunk_bytes = c->chunk ? c->chunk : LDS_CHUNKS_NONE;
    FILE *f = tmpfile();
    assert_non_null(f);
    lds_writer *w = NULL;
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_writer_open_file(f, &wo, &w, &err), LDS_OK);
    assert_int_equal(lds_writer_set_meta(w, "model", "loader-test", &err), LDS_OK);
    float *v = malloc(sizeof(float) * c->dim);
    assert_non_null(v);
    char key[256];
    for (uint64_t r = 0; r < c->rows; r++) {
        for (uint32_t d = 0; d < c->dim; d++)
            v[d] = (float)((r * 31 + d * 7) % 97) / 13.0f - 3.0f;
        int kl = snprintf(key, sizeof key, "row-%llu", (unsigned long long)r);
        for (size_t i = 0; i < c->key_pad && (size_t)kl < sizeof key - 1; i++)
            key[kl++] = 'x';
        assert_int_equal(lds_writer_add_row(w, v, c->dim, r * 1000 + 5, key, (size_t)kl, &err),
                         LDS_OK);
    }
    free(v);
    assert_int_equal(lds_writer_finish(w, &err), LDS_OK);
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

static bytes copy_bytes(const bytes *b)
{
    bytes c = {malloc(b->n ? b->n : 1), b->n};
    assert_non_null(c.p);
    memcpy(c.p, b->p, b->n);
    return c;
}

static uint64_t payload_len(const bytes *b)
{
    return (uint64_t)b->n - LDS_HEADER_SIZE;
}

/* Rewrites the declared payload length in the header (keeping it valid). */
static void set_declared(bytes *b, uint64_t length)
{
    lds_header h;
    assert_int_equal(lds_header_decode(b->p, b->n, &h, NULL), LDS_OK);
    h.payload_length = length;
    assert_int_equal(lds_header_encode(&h, b->p), LDS_OK);
}

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
    static char path[160];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return path;
}

static void write_all(int fd, const void *p, size_t n)
{
    const unsigned char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(99);
        c += w;
        n -= (size_t)w;
    }
}

static void reap(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
}

/* A private pool whose rentals are larger than asked (size classes) and
 * pre-filled with a sentinel, so reading by capacity would change results. */
static lds_pool *sentinel_pool(void)
{
    lds_pool_options po;
    lds_pool_options_default(&po);
    po.check = LDS_POOL_CHECK_OFF;
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

/* Nothing leased, and every rent came back. */
static void assert_pool_clear(lds_pool *pool)
{
    lds_pool_stats s = pool_stats(pool);
    assert_int_equal(s.leases_current, 0);
    assert_int_equal(s.rents, s.returns);
    assert_int_equal(s.refused_total, 0);
}

static lds_load_options opts_for(lds_pool *pool)
{
    lds_load_options o;
    lds_load_options_default(&o);
    o.pool = pool;
    return o;
}

/* The reference: the payload parsed from an exact-size buffer of its own. */
static lds_index *reference(const bytes *b)
{
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    size_t n = (size_t)payload_len(b);
    unsigned char *exact = malloc(n);
    assert_non_null(exact);
    memcpy(exact, b->p + LDS_HEADER_SIZE, n);
    lds_header h;
    assert_int_equal(lds_header_decode(b->p, b->n, &h, NULL), LDS_OK);
    lds_parse_options po;
    lds_parse_options_default(&po);
    po.copy = true;
    po.header = &h; /* format 1.1: the chunk table */
    assert_int_equal(lds_index_from_payload(exact, n, &po, &idx, &err), LDS_OK);
    free(exact);
    return idx;
}

static void assert_same_index(const lds_index *a, const lds_index *b)
{
    assert_int_equal(lds_index_rows(a), lds_index_rows(b));
    assert_int_equal(lds_index_dim(a), lds_index_dim(b));
    assert_int_equal(lds_index_dtype(a), lds_index_dtype(b));
    assert_int_equal(lds_index_metric(a), lds_index_metric(b));
    assert_int_equal(lds_index_has_ids(a), lds_index_has_ids(b));
    assert_int_equal(lds_index_has_keys(a), lds_index_has_keys(b));
    assert_int_equal(lds_index_payload_bytes(a), lds_index_payload_bytes(b));
    assert_int_equal(lds_index_checksum(a), lds_index_checksum(b));
    size_t row_bytes = lds_index_dim(a) * lds_dtype_size(lds_index_dtype(a));
    for (uint64_t r = 0; r < lds_index_rows(a); r++) {
        assert_memory_equal(lds_index_row(a, r), lds_index_row(b, r), row_bytes);
        if (lds_index_has_ids(a)) {
            uint64_t ia = 0, ib = 1;
            assert_int_equal(lds_index_id(a, r, &ia), LDS_OK);
            assert_int_equal(lds_index_id(b, r, &ib), LDS_OK);
            assert_int_equal(ia, ib);
        }
        if (lds_index_has_keys(a)) {
            const char *ka, *kb;
            size_t la, lb;
            assert_int_equal(lds_index_key(a, r, &ka, &la), LDS_OK);
            assert_int_equal(lds_index_key(b, r, &kb, &lb), LDS_OK);
            assert_int_equal(la, lb);
            assert_memory_equal(ka, kb, la);
        }
    }
    assert_int_equal(lds_index_meta_count(a), lds_index_meta_count(b));
    for (size_t i = 0; i < lds_index_meta_count(a); i++) {
        const char *ka, *va, *kb, *vb;
        assert_int_equal(lds_index_meta_at(a, i, &ka, &va), LDS_OK);
        assert_int_equal(lds_index_meta_at(b, i, &kb, &vb), LDS_OK);
        assert_string_equal(ka, kb);
        assert_string_equal(va, vb);
    }
}

/* A read callback over memory: at most `max_read` bytes per call, and
 * LDS_READ_RETRY on every other call when `retry_every_other`. */
typedef struct mem_reader {
    const unsigned char *p;
    size_t n;
    size_t pos;
    size_t max_read;
    bool retry_every_other;
    unsigned calls;
    unsigned retries;
    bool fail_io;
} mem_reader;

static lds_status mem_read(void *ctx, void *buf, size_t cap, size_t *got)
{
    mem_reader *m = ctx;
    m->calls++;
    if (m->retry_every_other && m->calls % 2 == 1) {
        m->retries++;
        *got = LDS_READ_RETRY;
        return LDS_OK;
    }
    if (m->fail_io && m->pos > 100) {
        errno = EPIPE;
        return LDS_E_IO;
    }
    size_t k = m->n - m->pos;
    if (k > cap)
        k = cap;
    if (m->max_read != 0 && k > m->max_read)
        k = m->max_read;
    memcpy(buf, m->p + m->pos, k);
    m->pos += k;
    *got = k;
    return LDS_OK;
}

static mem_reader reader_over(const bytes *b)
{
    mem_reader m = {.p = b->p, .n = b->n};
    return m;
}

/* ==== PooledPayload: slice by bytes read (invariant 1) ================== */

/* Payload sizes: the smallest valid (an empty index), one row, odd sizes, the
 * reachable sizes closest below and above a page, and several MiB. (Sections
 * are 64-byte aligned, so exactly 4095 or 4097 cannot be produced.) */
static void sizes_for_test(cfg *out, size_t *count)
{
    size_t k = 0;
    out[k++] = (cfg){.rows = 0, .dim = 4};
    out[k++] = (cfg){.rows = 1, .dim = 1};
    out[k++] = (cfg){.rows = 7, .dim = 3, .keys = true, .key_pad = 1};
    out[k++] = (cfg){.rows = 13, .dim = 5, .dtype = LDS_DTYPE_F16, .ids = true};
    /* Closest below and above 4096: found by stepping rows. */
    cfg below = {0}, above = {0};
    uint64_t best_below = 0, best_above = UINT64_MAX;
    for (uint64_t r = 1; r < 120; r++) {
        cfg c = {.rows = r, .dim = 9, .keys = true};
        bytes b = make_index(&c);
        uint64_t len = payload_len(&b);
        if (len < 4096 && len > best_below) {
            best_below = len;
            below = c;
        }
        if (len > 4096 && len < best_above) {
            best_above = len;
            above = c;
        }
        free(b.p);
    }
    assert_true(best_below > 4096 - 128);
    assert_true(best_above < 4096 + 128);
    out[k++] = below;
    out[k++] = above;
    out[k++] = (cfg){.rows = 3000, .dim = 256, .keys = true, .ids = true}; /* ~3.1 MiB */
    *count = k;
}

static void test_pooled_payload_matches_exact_buffer(void **state)
{
    (void)state;
    cfg cs[16];
    size_t count = 0;
    sizes_for_test(cs, &count);
    lds_pool *pool = sentinel_pool();
    for (size_t i = 0; i < count; i++) {
        bytes b = make_index(&cs[i]);
        lds_index *ref = reference(&b);
        const char *path = tmp_path("pooled.lds");
        write_file(path, b.p, b.n);
        for (int own = LDS_OWN_COPY; own <= LDS_OWN_ADOPT; own++) {
            lds_load_options o = opts_for(pool);
            o.ownership = (lds_ownership)own;
            lds_index *idx = NULL;
            lds_load_info info;
            lds_load_info_init(&info);
            lds_error err;
            lds_error_init(&err);
            assert_int_equal(lds_load_path(path, &o, &idx, &info, &err), LDS_OK);
            assert_int_equal(info.path, LDS_LOAD_POOLED);
            assert_int_equal(info.ownership, own);
            assert_int_equal(info.payload_bytes, payload_len(&b));
            assert_int_equal(info.declared_bytes, payload_len(&b));
            assert_int_equal(info.stream_bytes, b.n);
            assert_true(info.capacity_bytes >= info.payload_bytes);
            assert_true(info.checksum_verified);
            assert_true(info.hashed_while_reading);
            assert_false(info.compressed);
            assert_same_index(idx, ref);
            assert_int_equal(pool_stats(pool).leases_current, own == LDS_OWN_ADOPT ? 1 : 0);
            lds_index_free(idx);
            assert_pool_clear(pool);
        }
        /* The same through a stream (no size known to cross-check). */
        mem_reader m = reader_over(&b);
        lds_load_options o = opts_for(pool);
        lds_index *idx = NULL;
        assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, NULL), LDS_OK);
        assert_same_index(idx, ref);
        lds_index_free(idx);
        assert_pool_clear(pool);
        lds_index_free(ref);
        free(b.p);
    }
    /* The rentals really were larger than asked for most sizes. */
    lds_pool_stats s = pool_stats(pool);
    assert_true(s.waste_bytes_total > 0);
    lds_pool_free(pool);
}

/* ==== streams: short reads, EINTR, pipes, stdin ========================= */

static void test_one_byte_per_read(void **state)
{
    (void)state;
    cfg c = {.rows = 20, .dim = 6, .keys = true};
    bytes b = make_index(&c);
    lds_index *ref = reference(&b);
    lds_pool *pool = sentinel_pool();
    mem_reader m = reader_over(&b);
    m.max_read = 1;
    lds_load_options o = opts_for(pool);
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, &info, NULL), LDS_OK);
    assert_int_equal(info.path, LDS_LOAD_POOLED);
    assert_true(m.calls >= b.n);
    assert_same_index(idx, ref);
    lds_index_free(idx);
    lds_index_free(ref);
    assert_pool_clear(pool);
    lds_pool_free(pool);
    free(b.p);
}

static void test_callback_retry_every_other_call(void **state)
{
    (void)state;
    cfg c = {.rows = 50, .dim = 8, .ids = true};
    bytes b = make_index(&c);
    lds_index *ref = reference(&b);
    lds_pool *pool = sentinel_pool();
    mem_reader m = reader_over(&b);
    m.max_read = 100;
    m.retry_every_other = true;
    lds_load_options o = opts_for(pool);
    lds_index *idx = NULL;
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, NULL), LDS_OK);
    assert_true(m.retries > 10);
    assert_same_index(idx, ref);
    lds_index_free(idx);
    lds_index_free(ref);
    assert_pool_clear(pool);

    /* A callback error is returned as is, with errno, and the rental goes back. */
    m = reader_over(&b);
    m.fail_io = true;
    m.max_read = 64;
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, &err), LDS_E_IO);
    assert_null(idx);
    assert_int_equal(err.sys_errno, EPIPE);
    assert_pool_clear(pool);
    lds_pool_free(pool);
    free(b.p);
}

/* Feeds `b` into a new pipe from a child process, `piece` bytes at a time with
 * `pause_us` between pieces; returns the read end. */
static int pipe_from_child(const bytes *b, size_t piece, unsigned pause_us, pid_t *pid)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    *pid = fork();
    assert_true(*pid >= 0);
    if (*pid == 0) {
        close(p[0]);
        for (size_t at = 0; at < b->n; at += piece) {
            write_all(p[1], b->p + at, b->n - at < piece ? b->n - at : piece);
            if (pause_us)
                usleep(pause_us);
        }
        _exit(0);
    }
    close(p[1]);
    return p[0];
}

static void test_pipe_fed_by_another_process(void **state)
{
    (void)state;
    cfg c = {.rows = 2000, .dim = 64, .keys = true};
    bytes b = make_index(&c);
    lds_index *ref = reference(&b);
    lds_pool *pool = sentinel_pool();
    pid_t pid;
    int fd = pipe_from_child(&b, 7777, 0, &pid);
    lds_load_options o = opts_for(pool);
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_load_fd(fd, &o, &idx, &info, NULL), LDS_OK);
    close(fd);
    reap(pid);
    assert_int_equal(info.path, LDS_LOAD_POOLED);
    assert_int_equal(info.stream_bytes, b.n);
    assert_same_index(idx, ref);
    lds_index_free(idx);
    lds_index_free(ref);
    assert_pool_clear(pool);
    lds_pool_free(pool);
    free(b.p);
}

static volatile sig_atomic_t alarms;
static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

/* This program's read(2): the system call itself (libc's wrapper does no more), counting
   the calls on `eintr_fd` that a signal interrupted, so that the EINTR test can show that
   the loader really saw read() fail with EINTR and went on, rather than only that a timer
   fired somewhere. The loader's objects are linked statically into this executable, so
   their read() is this one. */
static volatile int eintr_fd = -1;
static volatile long eintr_seen;

ssize_t read(int fd, void *buf, size_t n)
{
    long r = syscall(SYS_read, fd, buf, n);
    if (r < 0 && errno == EINTR && fd == eintr_fd)
        eintr_seen++;
    return (ssize_t)r;
}

/* Real EINTR: a timer signal without SA_RESTART interrupts the blocked read(). */
static void test_fd_read_retries_real_eintr(void **state)
{
    (void)state;
    cfg c = {.rows = 300, .dim = 16};
    bytes b = make_index(&c);
    lds_index *ref = reference(&b);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
    pid_t pid;
    int fd = pipe_from_child(&b, 2048, 3000, &pid);
    alarms = 0;
    eintr_seen = 0;
    eintr_fd = fd;
    struct itimerval it = {{0, 500}, {0, 500}};
    assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
    lds_index *idx = NULL;
    lds_status st = lds_load_fd(fd, NULL, &idx, NULL, NULL);
    struct itimerval stop = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &stop, NULL);
    eintr_fd = -1;
    sigaction(SIGALRM, &old, NULL);
    close(fd);
    reap(pid);
    assert_int_equal(st, LDS_OK);
    assert_true(alarms > 0);
    /* The loader's read() on the pipe returned EINTR at least once, and the load is whole. */
    if (eintr_seen == 0)
        fail_msg("no read() of the loader returned EINTR (%d alarms)", (int)alarms);
    assert_same_index(idx, ref);
    lds_index_free(idx);
    lds_index_free(ref);
    free(b.p);
}

/* Result a forked child sends back. */
typedef struct child_result {
    int status;
    int path;
    uint64_t rows;
    uint64_t payload_bytes;
    long hwm_growth_kb;
} child_result;

static child_result run_child(void (*body)(int result_fd, void *arg), void *arg)
{
    int r[2];
    assert_int_equal(pipe(r), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(r[0]);
        body(r[1], arg);
        _exit(0);
    }
    close(r[1]);
    child_result res;
    memset(&res, 0xff, sizeof res);
    size_t got = 0;
    while (got < sizeof res) {
        ssize_t n = read(r[0], (char *)&res + got, sizeof res - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(r[0]);
    reap(pid);
    assert_int_equal(got, sizeof res);
    return res;
}

typedef struct stdin_arg {
    const bytes *b;
    bool use_file;
} stdin_arg;

static void stdin_body(int result_fd, void *argp)
{
    stdin_arg *arg = argp;
    int p[2];
    if (pipe(p) != 0)
        _exit(98);
    pid_t w = fork();
    if (w == 0) {
        close(p[0]);
        write_all(p[1], arg->b->p, arg->b->n);
        _exit(0);
    }
    close(p[1]);
    if (dup2(p[0], STDIN_FILENO) < 0)
        _exit(97);
    close(p[0]);
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    child_result res = {0};
    res.status = arg->use_file ? (int)lds_load_file(stdin, NULL, &idx, &info, NULL)
                               : (int)lds_load_fd(STDIN_FILENO, NULL, &idx, &info, NULL);
    res.path = info.path;
    res.rows = idx ? lds_index_rows(idx) : 0;
    res.payload_bytes = info.payload_bytes;
    lds_index_free(idx);
    reap(w);
    write_all(result_fd, &res, sizeof res);
}

static void test_stdin(void **state)
{
    (void)state;
    cfg c = {.rows = 123, .dim = 10, .keys = true};
    bytes b = make_index(&c);
    for (int use_file = 0; use_file <= 1; use_file++) {
        stdin_arg arg = {&b, use_file != 0};
        child_result res = run_child(stdin_body, &arg);
        assert_int_equal(res.status, LDS_OK);
        assert_int_equal(res.path, LDS_LOAD_POOLED);
        assert_int_equal(res.rows, 123);
        assert_int_equal(res.payload_bytes, payload_len(&b));
    }
    free(b.p);
}

/* ==== bounded reads: truncation, lengths, limits (invariants 2, 4, 7) === */

static void test_every_prefix_refused(void **state)
{
    (void)state;
    cfg c = {.rows = 3, .dim = 2, .keys = true, .ids = true};
    bytes b = make_index(&c);
    lds_pool *pool = sentinel_pool();
    lds_load_options o = opts_for(pool);
    const char *path = tmp_path("prefix.lds");
    for (size_t k = 0; k < b.n; k++) {
        lds_index *idx = NULL;
        lds_error err;

        /* A stream: always truncated, naming declared and received counts. */
        bytes pre = {b.p, k};
        mem_reader m = reader_over(&pre);
        lds_error_init(&err);
        assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, &err), LDS_E_TRUNCATED);
        assert_null(idx);
        assert_int_equal(err.status, LDS_E_TRUNCATED);
        if (k >= LDS_HEADER_SIZE) {
            char want[64];
            snprintf(want, sizeof want, "%zu of the %llu", k - LDS_HEADER_SIZE,
                     (unsigned long long)payload_len(&b));
            assert_non_null(strstr(err.message, want));
            assert_int_equal(err.offset, k);
        }
        assert_pool_clear(pool);

        /* A regular file: the size disagrees with the header. */
        write_file(path, b.p, k);
        lds_error_init(&err);
        lds_status want = k < LDS_HEADER_SIZE ? LDS_E_TRUNCATED : LDS_E_LENGTH_MISMATCH;
        assert_int_equal(lds_load_path(path, &o, &idx, NULL, &err), want);
        assert_null(idx);
        assert_pool_clear(pool);

        /* Memory. */
        lds_error_init(&err);
        assert_int_equal(lds_load_memory(b.p, k, false, &o, &idx, NULL, &err), want);
        assert_null(idx);
    }
    assert_int_equal(pool_stats(pool).rents, b.n - LDS_HEADER_SIZE);
    assert_pool_clear(pool);
    lds_pool_free(pool);
    free(b.p);
}

static void test_declared_length_disagrees(void **state)
{
    (void)state;
    cfg c = {.rows = 40, .dim = 4, .keys = true};
    bytes orig = make_index(&c);
    uint64_t len = payload_len(&orig);
    lds_pool *pool = sentinel_pool();
    lds_load_options o = opts_for(pool);
    const char *path = tmp_path("declared.lds");
    uint64_t lies[2] = {len + 64, len - 64};
    for (int i = 0; i < 2; i++) {
        bytes b = copy_bytes(&orig);
        set_declared(&b, lies[i]);
        lds_index *idx = NULL;
        lds_error err;

        /* File: both numbers named, refused before renting. */
        uint64_t rents = pool_stats(pool).rents;
        write_file(path, b.p, b.n);
        lds_error_init(&err);
        assert_int_equal(lds_load_path(path, &o, &idx, NULL, &err), LDS_E_LENGTH_MISMATCH);
        assert_string_equal(err.field, "header.payload_length");
        assert_int_equal(err.offset, 16);
        char n1[32], n2[32];
        snprintf(n1, sizeof n1, "%llu", (unsigned long long)lies[i]);
        snprintf(n2, sizeof n2, "%llu", (unsigned long long)len);
        assert_non_null(strstr(err.message, n1));
        assert_non_null(strstr(err.message, n2));
        assert_int_equal(pool_stats(pool).rents, rents);

        /* Stream: larger = truncated, smaller = trailing bytes. */
        mem_reader m = reader_over(&b);
        lds_error_init(&err);
        lds_status want = i == 0 ? LDS_E_TRUNCATED : LDS_E_TRAILING;
        assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, &err), want);
        assert_null(idx);
        if (i == 0) {
            assert_non_null(strstr(err.message, n1));
            assert_non_null(strstr(err.message, n2));
        } else {
            assert_int_equal(err.offset, LDS_HEADER_SIZE + lies[i]);
        }
        assert_pool_clear(pool);
        free(b.p);
    }
    /* Trailing bytes after a correct payload, in a stream and a file. */
    bytes t = {malloc(orig.n + 3), orig.n + 3};
    memcpy(t.p, orig.p, orig.n);
    memcpy(t.p + orig.n, "xyz", 3);
    mem_reader m = reader_over(&t);
    lds_index *idx = NULL;
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, NULL), LDS_E_TRAILING);
    write_file(path, t.p, t.n);
    assert_int_equal(lds_load_path(path, &o, &idx, NULL, NULL), LDS_E_LENGTH_MISMATCH);
    assert_null(idx);
    assert_pool_clear(pool);
    free(t.p);
    lds_pool_free(pool);
    free(orig.p);
}

static void test_max_payload_refused_before_renting(void **state)
{
    (void)state;
    cfg c = {.rows = 40, .dim = 4};
    bytes b = make_index(&c);
    lds_pool *pool = sentinel_pool();
    lds_load_options o = opts_for(pool);
    o.max_payload_bytes = payload_len(&b) - 1;
    const char *path = tmp_path("max.lds");
    write_file(path, b.p, b.n);
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_load_path(path, &o, &idx, NULL, &err), LDS_E_LIMIT);
    assert_string_equal(err.field, "header.payload_length");
    assert_int_equal(pool_stats(pool).rents, 0);

    /* Unknown length: the growable path stops at the cap. */
    bytes u = copy_bytes(&b);
    set_declared(&u, LDS_LENGTH_UNKNOWN);
    mem_reader m = reader_over(&u);
    lds_error_init(&err);
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, &err), LDS_E_LIMIT);
    assert_null(idx);
    assert_int_equal(pool_stats(pool).rents, 0);
    /* At exactly the cap it loads. */
    o.max_payload_bytes = payload_len(&b);
    m = reader_over(&u);
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, &info, NULL), LDS_OK);
    assert_int_equal(info.path, LDS_LOAD_GROWABLE);
    lds_index_free(idx);
    assert_int_equal(pool_stats(pool).rents, 0);
    /* The default is documented: 64 GiB. */
    lds_load_options d;
    lds_load_options_default(&d);
    assert_int_equal(d.max_payload_bytes, UINT64_C(64) << 30);
    free(u.p);
    lds_pool_free(pool);
    free(b.p);
}

static long vm_hwm_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

typedef struct lie_arg {
    const bytes *b;
    uint64_t declared;
    size_t sent; /* bytes of payload actually sent */
    bool private_pool;
} lie_arg;

static void lie_body(int result_fd, void *argp)
{
    lie_arg *arg = argp;
    unsigned char hdr[LDS_HEADER_SIZE];
    memcpy(hdr, arg->b->p, sizeof hdr);
    lds_header h;
    lds_header_decode(hdr, sizeof hdr, &h, NULL);
    h.payload_length = arg->declared;
    lds_header_encode(&h, hdr);
    lds_pool *pool = NULL;
    if (arg->private_pool)
        lds_pool_create(NULL, &pool);

    int fd = open("/proc/self/clear_refs", O_WRONLY);
    if (fd >= 0) {
        (void)!write(fd, "5", 1); /* reset VmHWM to the current RSS */
        close(fd);
    }
    long before = vm_hwm_kb();
    int p[2];
    if (pipe(p) != 0)
        _exit(98);
    pid_t w = fork();
    if (w == 0) {
        close(p[0]);
        write_all(p[1], hdr, sizeof hdr);
        static unsigned char chunk[65536];
        memset(chunk, 0x5a, sizeof chunk);
        for (size_t at = 0; at < arg->sent; at += sizeof chunk)
            write_all(p[1], chunk, arg->sent - at < sizeof chunk ? arg->sent - at : sizeof chunk);
        _exit(0);
    }
    close(p[1]);
    lds_load_options o;
    lds_load_options_default(&o);
    o.pool = pool;
    o.max_payload_bytes = UINT64_C(2) << 40;
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    child_result res = {0};
    res.status = (int)lds_load_fd(p[0], &o, &idx, &info, NULL);
    res.path = info.path;
    res.payload_bytes = info.payload_bytes;
    res.hwm_growth_kb = vm_hwm_kb() - before;
    close(p[0]);
    reap(w);
    lds_pool_stats s;
    lds_pool_stats_init(&s);
    lds_pool_get_stats(pool, &s);
    if (s.leases_current != 0)
        res.status = -1;
    write_all(result_fd, &res, sizeof res);
}

/* Invariant 6: a lying declared length costs no more resident memory than
 * the bytes delivered. Measured in a fresh child (peak RSS reset). */
#if defined(__SANITIZE_ADDRESS__)
#define LDS_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LDS_TEST_ASAN 1
#endif
#endif

/* Peak RSS growth allowed for 1 MiB sent: 64 MiB. AddressSanitizer builds
 * also pay the shadow of the rental (capacity / 8), which the pool writes
 * when it poisons a returned buffer: that is the sanitizer's cost, not the
 * loader's, so it is added only there. */
static long rss_bound_kb(uint64_t declared, int path)
{
    long kb = 64 * 1024;
#ifdef LDS_TEST_ASAN
    if (path == LDS_LOAD_POOLED)
        kb += (long)(declared / 8 / 1024);
#else
    (void)declared;
    (void)path;
#endif
    return kb;
}

static void test_lying_length_costs_only_bytes_sent(void **state)
{
    (void)state;
    if (vm_hwm_kb() < 0)
        skip();
    cfg c = {.rows = 1, .dim = 1};
    bytes b = make_index(&c);
    size_t sent = (size_t)1 << 20;
    /* 2 GiB: the pool can map it (lazily), so the pooled path runs. */
    lie_arg a1 = {&b, UINT64_C(2) << 30, sent, true};
    child_result r1 = run_child(lie_body, &a1);
    assert_int_equal(r1.status, LDS_E_TRUNCATED);
    assert_int_equal(r1.path, LDS_LOAD_POOLED);
    assert_int_equal(r1.payload_bytes, sent);
    assert_true(r1.hwm_growth_kb >= 0);
    assert_true(r1.hwm_growth_kb < rss_bound_kb(a1.declared, r1.path));
    /* 1 TiB, through the shared pool: pooled if the pool can map it, else the
     * growable path bounded by the declared length; cheap either way. */
    lie_arg a2 = {&b, UINT64_C(1) << 40, sent, false};
    child_result r2 = run_child(lie_body, &a2);
    assert_int_equal(r2.status, LDS_E_TRUNCATED);
    assert_true(r2.path == LDS_LOAD_POOLED || r2.path == LDS_LOAD_GROWABLE);
    assert_int_equal(r2.payload_bytes, sent);
    assert_true(r2.hwm_growth_kb < rss_bound_kb(a2.declared, r2.path));
    print_message("lying length: 2 GiB declared/1 MiB sent: %s, peak RSS +%ld KiB; "
                  "1 TiB declared: %s, +%ld KiB\n",
                  lds_load_path_name((enum lds_load_path)r1.path), r1.hwm_growth_kb,
                  lds_load_path_name((enum lds_load_path)r2.path), r2.hwm_growth_kb);
    free(b.p);
}

/* ==== zstd ================================================================ */

static bytes zstd_frame(const bytes *b, bool content_size)
{
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    assert_non_null(cc);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, content_size ? 1 : 0);
    if (content_size)
        ZSTD_CCtx_setPledgedSrcSize(cc, b->n);
    size_t cap = ZSTD_compressBound(b->n) + 64;
    bytes z = {malloc(cap), 0};
    assert_non_null(z.p);
    ZSTD_outBuffer out = {z.p, cap, 0};
    /* Streamed in pieces, so the size is known only if pledged. */
    size_t piece = 1000;
    for (size_t at = 0; at < b->n; at += piece) {
        size_t n = b->n - at < piece ? b->n - at : piece;
        ZSTD_inBuffer in = {b->p + at, n, 0};
        while (in.pos < in.size)
            assert_false(ZSTD_isError(ZSTD_compressStream2(cc, &out, &in, ZSTD_e_continue)));
    }
    ZSTD_inBuffer none = {NULL, 0, 0};
    size_t left;
    do {
        left = ZSTD_compressStream2(cc, &out, &none, ZSTD_e_end);
        assert_false(ZSTD_isError(left));
    } while (left != 0);
    ZSTD_freeCCtx(cc);
    z.n = out.pos;
    unsigned long long fcs = ZSTD_getFrameContentSize(z.p, z.n);
    if (content_size)
        assert_int_equal(fcs, b->n);
    else
        assert_true(fcs == ZSTD_CONTENTSIZE_UNKNOWN);
    return z;
}

static void test_zstd_with_content_size_is_pooled(void **state)
{
    (void)state;
    cfg c = {.rows = 500, .dim = 32, .keys = true};
    bytes b = make_index(&c);
    lds_index *ref = reference(&b);
    bytes z = zstd_frame(&b, true);
    lds_pool *pool = sentinel_pool();
    lds_load_options o = opts_for(pool);
    const char *path = tmp_path("c.lds.zst");
    write_file(path, z.p, z.n);
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_load_path(path, &o, &idx, &info, NULL), LDS_OK);
    assert_int_equal(info.path, LDS_LOAD_POOLED);
    assert_true(info.compressed);
    assert_true(info.checksum_verified);
    assert_int_equal(info.stream_bytes, z.n);
    assert_int_equal(info.payload_bytes, payload_len(&b));
    assert_same_index(idx, ref);
    lds_index_free(idx);
    assert_pool_clear(pool);

    /* With use_mmap a compressed file still takes the read path (no fallback). */
    o.use_mmap = true;
    lds_load_info_init(&info);
    assert_int_equal(lds_load_path(path, &o, &idx, &info, NULL), LDS_OK);
    assert_int_equal(info.path, LDS_LOAD_POOLED);
    assert_false(info.mmap_fallback);
    lds_index_free(idx);
    assert_pool_clear(pool);

    /* One byte at a time through a callback. */
    mem_reader m = reader_over(&z);
    m.max_read = 1;
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, NULL), LDS_OK);
    assert_same_index(idx, ref);
    lds_index_free(idx);
    assert_pool_clear(pool);

    /* Data after the frame is an error, not left unread. */
    bytes t = {malloc(z.n + 1), z.n + 1};
    memcpy(t.p, z.p, z.n);
    t.p[z.n] = 0;
    m = reader_over(&t);
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, &err), LDS_E_TRAILING);
    assert_string_equal(err.field, "zstd.frame_end");
    assert_int_equal(err.offset, z.n);
    assert_pool_clear(pool);
    /* A frame cut short. */
    m = reader_over(&z);
    m.n = z.n - 5;
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, NULL), LDS_E_TRUNCATED);
    assert_pool_clear(pool);
    free(t.p);
    lds_pool_free(pool);
    lds_index_free(ref);
    free(z.p);
    free(b.p);
}

/* `z` after skippable frames (RFC 8878 section 3.1.2) of the given content sizes, magics
 * 0x184D2A50 + i; each frame's content is bytes of 0xA5. */
static bytes skippable_then(const bytes *z, const uint32_t *sizes, size_t frames)
{
    size_t n = z->n;
    for (size_t i = 0; i < frames; i++)
        n += 8 + sizes[i];
    bytes t = {malloc(n), n};
    assert_non_null(t.p);
    size_t at = 0;
    for (size_t i = 0; i < frames; i++) {
        uint32_t magic = 0x184D2A50u + (uint32_t)(i % 16);
        for (int k = 0; k < 4; k++) {
            t.p[at + (size_t)k] = (unsigned char)(magic >> (8 * k));
            t.p[at + 4 + (size_t)k] = (unsigned char)(sizes[i] >> (8 * k));
        }
        memset(t.p + at + 8, 0xA5, sizes[i]);
        at += 8 + sizes[i];
    }
    memcpy(t.p + at, z->p, z->n);
    return t;
}

/* Found by a tester: a compressed index that begins with a skippable frame (as zstd writes
 * them for metadata; RFC 8878 section 3.1.2) was refused as "not a lodestar file" (BAD_MAGIC
 * on header.magic). It loads from a path (mapped or not), memory and a callback; skippable
 * frames past the limits, or declared longer than the input, or followed by something other
 * than a zstd frame, are refused naming the field and offset. */
static void test_zstd_after_skippable_frames(void **state)
{
    (void)state;
    cfg c = {.rows = 300, .dim = 16, .keys = true};
    bytes b = make_index(&c);
    lds_index *ref = reference(&b);
    bytes z = zstd_frame(&b, true);
    lds_pool *pool = sentinel_pool();
    lds_load_options o = opts_for(pool);
    static const uint32_t sizes[] = {5, 0, 10000};
    bytes t = skippable_then(&z, sizes, 3);
    const char *path = tmp_path("skip.lds.zst");
    write_file(path, t.p, t.n);
    lds_index *idx = NULL;
    lds_load_info info;
    lds_error err;
    for (int mapped = 0; mapped < 2; mapped++) {
        o.use_mmap = mapped == 1;
        lds_load_info_init(&info);
        lds_error_init(&err);
        assert_int_equal(lds_load_path(path, &o, &idx, &info, &err), LDS_OK);
        assert_int_equal(info.path, LDS_LOAD_POOLED);
        assert_true(info.compressed);
        assert_true(info.checksum_verified);
        assert_int_equal(info.payload_bytes, payload_len(&b));
        assert_same_index(idx, ref);
        lds_index_free(idx);
        assert_pool_clear(pool);
    }
    o.use_mmap = false;
    assert_int_equal(lds_load_memory(t.p, t.n, false, &o, &idx, NULL, NULL), LDS_OK);
    assert_same_index(idx, ref);
    lds_index_free(idx);
    mem_reader m = reader_over(&t);
    m.max_read = 7;
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, NULL), LDS_OK);
    assert_same_index(idx, ref);
    lds_index_free(idx);
    assert_pool_clear(pool);

    /* 16 skippable frames are read through; a 17th is LDS_E_LIMIT. */
    uint32_t many[17] = {0};
    bytes t16 = skippable_then(&z, many, 16), t17 = skippable_then(&z, many, 17);
    assert_int_equal(lds_load_memory(t16.p, t16.n, false, &o, &idx, NULL, NULL), LDS_OK);
    lds_index_free(idx);
    lds_error_init(&err);
    assert_int_equal(lds_load_memory(t17.p, t17.n, false, &o, &idx, NULL, &err), LDS_E_LIMIT);
    assert_string_equal(err.field, "zstd.skippable_frame");
    assert_int_equal(err.offset, 16 * 8);
    /* One declaring more than LDS__ZSTD_SKIP_BYTES_MAX (64 MiB): refused from its header. */
    uint32_t big = (64u << 20) + 1;
    lds_error_init(&err);
    unsigned char hb[8] = {0x5F, 0x2A, 0x4D, 0x18};
    memcpy(hb + 4, &big, 4); /* little-endian host (x86-64, aarch64) */
    assert_int_equal(lds_load_memory(hb, sizeof hb, false, &o, &idx, NULL, &err), LDS_E_LIMIT);
    assert_string_equal(err.field, "zstd.skippable_frame.size");
    assert_int_equal(err.offset, 4);
    /* One that runs past the input's end. */
    bytes cut = {t.p, 8 + 5 + 8 + 100};
    lds_error_init(&err);
    assert_int_equal(lds_load_memory(cut.p, cut.n, false, &o, &idx, NULL, &err), LDS_E_TRUNCATED);
    assert_string_equal(err.field, "zstd.skippable_frame.size");
    assert_int_equal(err.offset, 21 + 4); /* the third frame, 10000 bytes declared */
    /* Followed by an uncompressed index, or by nothing. */
    bytes raw = skippable_then(&b, sizes, 1);
    lds_error_init(&err);
    assert_int_equal(lds_load_memory(raw.p, raw.n, false, &o, &idx, NULL, &err), LDS_E_ZSTD);
    assert_string_equal(err.field, "zstd.frame");
    assert_int_equal(err.offset, 13);
    lds_error_init(&err);
    assert_int_equal(lds_load_memory(t.p, 13, false, &o, &idx, NULL, &err), LDS_E_TRUNCATED);
    assert_string_equal(err.field, "zstd.frame");
    assert_pool_clear(pool);
    free(raw.p);
    free(t16.p);
    free(t17.p);
    free(t.p);
    lds_pool_free(pool);
    lds_index_free(ref);
    free(z.p);
    free(b.p);
}

static void test_zstd_without_content_size(void **state)
{
    (void)state;
    cfg c = {.rows = 3000, .dim = 128, .keys = true}; /* ~1.6 MiB: several growth steps */
    bytes b = make_index(&c);
    lds_index *ref = reference(&b);
    lds_pool *pool = sentinel_pool();
    lds_load_options o = opts_for(pool);
    o.chunk_bytes = 10000;

    /* The header knows the length: pooled. */
    bytes z = zstd_frame(&b, false);
    mem_reader m = reader_over(&z);
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, &info, NULL), LDS_OK);
    assert_int_equal(info.path, LDS_LOAD_POOLED);
    assert_same_index(idx, ref);
    lds_index_free(idx);
    assert_pool_clear(pool);
    uint64_t rents = pool_stats(pool).rents;
    free(z.p);

    /* Nobody knows the length: growable, never pooled. */
    bytes u = copy_bytes(&b);
    set_declared(&u, LDS_LENGTH_UNKNOWN);
    z = zstd_frame(&u, false);
    const char *path = tmp_path("u.lds.zst");
    write_file(path, z.p, z.n);
    for (int own = LDS_OWN_COPY; own <= LDS_OWN_ADOPT; own++) {
        o.ownership = (lds_ownership)own;
        lds_load_info_init(&info);
        assert_int_equal(lds_load_path(path, &o, &idx, &info, NULL), LDS_OK);
        assert_int_equal(info.path, LDS_LOAD_GROWABLE);
        assert_int_equal(info.declared_bytes, LDS_LENGTH_UNKNOWN);
        assert_true(info.compressed);
        assert_true(info.checksum_verified);
        assert_true(info.hashed_while_reading);
        /* Never more than the growth bound ahead of the bytes received. */
        assert_true(info.capacity_bytes >= info.payload_bytes);
        assert_true(info.capacity_bytes - info.payload_bytes < 4096);
        assert_same_index(idx, ref);
        lds_index_free(idx);
    }
    assert_int_equal(pool_stats(pool).rents, rents);

    /* Uncompressed, unknown length, through a pipe: growable too. */
    pid_t pid;
    int fd = pipe_from_child(&u, 4096, 0, &pid);
    lds_load_info_init(&info);
    assert_int_equal(lds_load_fd(fd, &o, &idx, &info, NULL), LDS_OK);
    close(fd);
    reap(pid);
    assert_int_equal(info.path, LDS_LOAD_GROWABLE);
    assert_same_index(idx, ref);
    lds_index_free(idx);
    assert_int_equal(pool_stats(pool).rents, rents);

    /* Unknown in the header, known to the file: pooled, exact length. */
    const char *upath = tmp_path("u.lds");
    write_file(upath, u.p, u.n);
    lds_load_info_init(&info);
    assert_int_equal(lds_load_path(upath, &o, &idx, &info, NULL), LDS_OK);
    assert_int_equal(info.path, LDS_LOAD_POOLED);
    assert_int_equal(info.declared_bytes, payload_len(&b));
    lds_index_free(idx);
    assert_pool_clear(pool);

    free(z.p);
    free(u.p);
    lds_pool_free(pool);
    lds_index_free(ref);
    free(b.p);
}

static void test_zstd_corrupt_frame(void **state)
{
    (void)state;
    cfg c = {.rows = 400, .dim = 16, .keys = true};
    bytes b = make_index(&c);
    bytes z = zstd_frame(&b, true);
    lds_pool *pool = sentinel_pool();
    lds_load_options o = opts_for(pool);
    int seen_zstd = 0;
    for (size_t at = 20; at < z.n; at += z.n / 17 + 1) {
        bytes bad = copy_bytes(&z);
        bad.p[at] ^= 0x5a;
        mem_reader m = reader_over(&bad);
        lds_index *idx = NULL;
        lds_error err;
        lds_error_init(&err);
        lds_status st = lds_load_callback(mem_read, &m, &o, &idx, NULL, &err);
        assert_int_not_equal(st, LDS_OK);
        assert_null(idx);
        if (st == LDS_E_ZSTD) {
            seen_zstd++;
            assert_non_null(err.zstd_error);
            assert_non_null(strstr(err.message, err.zstd_error));
        }
        assert_pool_clear(pool);
        free(bad.p);
    }
    assert_true(seen_zstd > 0);
    /* A broken frame header. */
    bytes bad = copy_bytes(&z);
    bad.p[4] = 0xff;
    mem_reader m = reader_over(&bad);
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, &err), LDS_E_ZSTD);
    assert_pool_clear(pool);
    free(bad.p);
    lds_pool_free(pool);
    free(z.p);
    free(b.p);
}

/* Adds `delta` to the frame content size field of a zstd frame. */
static void bump_frame_content_size(bytes *z, int delta)
{
    unsigned fhd = z->p[4];
    unsigned fcs_flag = fhd >> 6, single = (fhd >> 5) & 1, did = fhd & 3;
    size_t did_size[4] = {0, 1, 2, 4};
    size_t fcs_size[4] = {single ? 1u : 0u, 2, 4, 8};
    size_t at = 4 + 1 + (single ? 0 : 1) + did_size[did];
    size_t n = fcs_size[fcs_flag];
    assert_true(n >= 2);
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)z->p[at + i] << (8 * i);
    v = (uint64_t)((int64_t)v + delta);
    for (size_t i = 0; i < n; i++)
        z->p[at + i] = (unsigned char)(v >> (8 * i));
}

static void test_zstd_lying_content_size(void **state)
{
    (void)state;
    /* Several zstd blocks (128 KiB each), so the header comes out of the decoder
       before the frame's end, where zstd checks the content size itself. */
    cfg c = {.rows = 2000, .dim = 64};
    bytes b = make_index(&c);
    lds_pool *pool = sentinel_pool();
    lds_load_options o = opts_for(pool);
    int deltas[2] = {+100, -100};
    for (int i = 0; i < 2; i++) {
        bytes z = zstd_frame(&b, true);
        bump_frame_content_size(&z, deltas[i]);
        assert_int_equal(ZSTD_getFrameContentSize(z.p, z.n), b.n + (uint64_t)(int64_t)deltas[i]);
        mem_reader m = reader_over(&z);
        lds_index *idx = NULL;
        lds_error err;
        lds_error_init(&err);
        lds_status st = lds_load_callback(mem_read, &m, &o, &idx, NULL, &err);
        assert_null(idx);
        if (deltas[i] > 0 || st == LDS_E_LENGTH_MISMATCH) {
            /* Cross-checked against the header, before renting: both numbers named. */
            assert_int_equal(st, LDS_E_LENGTH_MISMATCH);
            char n1[32];
            snprintf(n1, sizeof n1, "%llu",
                     (unsigned long long)(b.n + (uint64_t)(int64_t)deltas[i]));
            assert_non_null(strstr(err.message, n1));
        } else {
            /* A frame whose window is its (too small) content size fails in the
               decoder itself, before the header is even out. */
            assert_int_equal(st, LDS_E_ZSTD);
            assert_non_null(err.zstd_error);
        }
        assert_int_equal(pool_stats(pool).rents, 0);
        free(z.p);
    }
    /* Header and frame lie together (header unknown, frame says more): the
     * decoder's own end-of-frame check or truncation catches it. */
    bytes u = copy_bytes(&b);
    set_declared(&u, LDS_LENGTH_UNKNOWN);
    bytes z = zstd_frame(&u, true);
    bump_frame_content_size(&z, +100);
    mem_reader m = reader_over(&z);
    lds_index *idx = NULL;
    lds_status st = lds_load_callback(mem_read, &m, &o, &idx, NULL, NULL);
    assert_true(st == LDS_E_ZSTD || st == LDS_E_TRUNCATED);
    assert_pool_clear(pool);
    free(z.p);
    free(u.p);
    lds_pool_free(pool);
    free(b.p);
}

/* A frame whose content size claims more than max_payload_bytes is refused from its
 * frame header, whether the whole frame arrives in one read or a byte at a time. */
static void test_zstd_claim_above_max_is_refused_from_the_frame_header(void **state)
{
    (void)state;
    cfg c = {.rows = 4, .dim = 8, .keys = true}; /* one zstd block */
    bytes b = make_index(&c);
    lds_pool *pool = sentinel_pool();
    lds_load_options o = opts_for(pool);
    o.max_payload_bytes = b.n - LDS_HEADER_SIZE + 50; /* the real payload fits */
    bytes z = zstd_frame(&b, true);
    bump_frame_content_size(&z, +100); /* the claim does not */
    for (int one_byte = 0; one_byte <= 1; one_byte++) {
        mem_reader m = reader_over(&z);
        m.max_read = one_byte ? 1 : 0;
        lds_index *idx = NULL;
        lds_error err;
        lds_error_init(&err);
        assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, &err), LDS_E_LIMIT);
        assert_null(idx);
        assert_string_equal(err.field, "zstd.frame_content_size");
        char claim[32];
        snprintf(claim, sizeof claim, "%llu", (unsigned long long)(b.n + 100));
        assert_non_null(strstr(err.message, claim));
        assert_int_equal(pool_stats(pool).rents, 0);
    }
    free(z.p);
    lds_pool_free(pool);
    free(b.p);
}

/* ==== memory path (invariant 3) ========================================== */

static void test_memory_path_never_touches_the_pool(void **state)
{
    (void)state;
    cfg c = {.rows = 200, .dim = 12, .keys = true, .ids = true};
    bytes b = make_index(&c);
    lds_index *ref = reference(&b);
    lds_pool *pool = sentinel_pool();
    lds_load_options o = opts_for(pool);
    lds_pool_stats shared0 = pool_stats(NULL);
    for (int copy = 0; copy <= 1; copy++) {
        lds_index *idx = NULL;
        lds_load_info info;
        lds_load_info_init(&info);
        assert_int_equal(lds_load_memory(b.p, b.n, copy != 0, &o, &idx, &info, NULL), LDS_OK);
        assert_int_equal(info.path, LDS_LOAD_MEMORY);
        assert_true(info.checksum_verified);
        assert_same_index(idx, ref);
        /* Borrowing is zero-copy: rows point into the caller's bytes. */
        const unsigned char *row0 = lds_index_row(idx, 0);
        bool inside = row0 >= b.p && row0 < b.p + b.n;
        assert_int_equal(inside, copy == 0);
        lds_index_free(idx);
    }
    /* A compressed image is decoded into the loader's own buffer. */
    bytes z = zstd_frame(&b, true);
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_load_memory(z.p, z.n, false, &o, &idx, &info, NULL), LDS_OK);
    assert_int_equal(info.path, LDS_LOAD_MEMORY);
    assert_true(info.compressed);
    assert_same_index(idx, ref);
    lds_index_free(idx);
    /* Failures too. */
    assert_int_equal(lds_load_memory(b.p, b.n - 1, false, &o, &idx, NULL, NULL),
                     LDS_E_LENGTH_MISMATCH);
    lds_pool_stats s = pool_stats(pool);
    assert_int_equal(s.rents, 0);
    assert_int_equal(s.returns, 0);
    lds_pool_stats shared1 = pool_stats(NULL);
    assert_int_equal(shared1.rents, shared0.rents);
    assert_int_equal(shared1.returns, shared0.returns);
    free(z.p);
    lds_pool_free(pool);
    lds_index_free(ref);
    free(b.p);
}

/* ==== cancellation and progress (invariant 4) ============================ */

typedef struct cb_state {
    unsigned cancel_calls;
    unsigned cancel_at;
    unsigned progress_calls;
    uint64_t last_done;
    uint64_t last_total;
    bool monotone;
} cb_state;

static bool cancel_cb(void *ctx)
{
    cb_state *s = ctx;
    return ++s->cancel_calls == s->cancel_at;
}

static void progress_cb(uint64_t done, uint64_t total, void *ctx)
{
    cb_state *s = ctx;
    if (done < s->last_done)
        s->monotone = false;
    s->progress_calls++;
    s->last_done = done;
    s->last_total = total;
}

static void test_cancel_returns_the_rental(void **state)
{
    (void)state;
    cfg c = {.rows = 1000, .dim = 32};
    bytes b = make_index(&c);
    const char *path = tmp_path("cancel.lds");
    write_file(path, b.p, b.n);
    lds_pool *pool = sentinel_pool();
    lds_load_options o = opts_for(pool);
    o.chunk_bytes = 4096;
    o.cancel = cancel_cb;
    o.progress = progress_cb;
    /* The first poll comes before the rental (nothing read yet), then one per chunk: the
       4th poll is the one before the third chunk. */
    cb_state s = {.cancel_at = 4, .monotone = true};
    o.callback_ctx = &s;
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_load_path(path, &o, &idx, NULL, &err), LDS_E_CANCELLED);
    assert_null(idx);
    assert_int_equal(err.offset, LDS_HEADER_SIZE + 2 * 4096);
    assert_int_equal(s.progress_calls, 2);
    assert_int_equal(pool_stats(pool).rents, 1);
    assert_pool_clear(pool);

    /* Never cancelled: progress runs to the declared total. */
    s = (cb_state){.cancel_at = 0, .monotone = true};
    assert_int_equal(lds_load_path(path, &o, &idx, NULL, NULL), LDS_OK);
    assert_true(s.monotone);
    assert_int_equal(s.last_done, payload_len(&b));
    assert_int_equal(s.last_total, payload_len(&b));
    assert_true(s.progress_calls >= payload_len(&b) / 4096);
    lds_index_free(idx);
    assert_pool_clear(pool);

    /* Cancelled while a callback keeps asking for a retry. */
    mem_reader m = reader_over(&b);
    m.retry_every_other = true;
    s = (cb_state){.cancel_at = 5, .monotone = true};
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, NULL), LDS_E_CANCELLED);
    assert_pool_clear(pool);
    lds_pool_free(pool);
    free(b.p);
}

static bool always_cancelled(void *ctx)
{
    unsigned *calls = ctx;
    (*calls)++;
    return true;
}

/* A load cancelled before it starts rents nothing: no rental taken and handed back, on
   the path, fd and callback transports alike. */
static void test_precancelled_load_rents_nothing(void **state)
{
    (void)state;
    cfg c = {.rows = 300, .dim = 16};
    bytes b = make_index(&c);
    const char *path = tmp_path("precancel.lds");
    write_file(path, b.p, b.n);
    lds_pool *pool = sentinel_pool();
    lds_load_options o = opts_for(pool);
    unsigned calls = 0;
    o.cancel = always_cancelled;
    o.callback_ctx = &calls;
    for (int how = 0; how < 3; how++) {
        lds_index *idx = NULL;
        lds_error err;
        lds_error_init(&err);
        lds_status st;
        mem_reader m = reader_over(&b);
        int fd = -1;
        if (how == 0) {
            st = lds_load_path(path, &o, &idx, NULL, &err);
        } else if (how == 1) {
            fd = open(path, O_RDONLY);
            assert_true(fd >= 0);
            st = lds_load_fd(fd, &o, &idx, NULL, &err);
            close(fd);
        } else {
            st = lds_load_callback(mem_read, &m, &o, &idx, NULL, &err);
        }
        assert_int_equal(st, LDS_E_CANCELLED);
        assert_null(idx);
        lds_pool_stats ps = pool_stats(pool);
        assert_int_equal(ps.rents, 0);
        assert_int_equal(ps.returns, 0);
        assert_int_equal(ps.leases_current, 0);
    }
    assert_true(calls >= 3);
    lds_pool_free(pool);
    free(b.p);
}

/* A cancel that comes while a read from a silent pipe waits, with nothing to interrupt the
   read: a flag set by another thread, or a SIGINT handled after cancel's last answer but before
   read() blocked. The load asks cancel again at least every 100 ms and stops (ADR 0051); before,
   it waited for the writer (here: a watchdog closing the pipe after 3 s, then TRUNCATED). */
typedef struct late_cancel {
    struct timespec t0;
    unsigned calls;
} late_cancel;

static double ms_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

static bool cancel_after_200_ms(void *ctx)
{
    late_cancel *l = ctx;
    l->calls++;
    return ms_since(&l->t0) >= 200;
}

typedef struct pipe_watchdog {
    int fd;
    _Atomic int done;
    bool closed;
} pipe_watchdog;

static void *close_pipe_after_3_s(void *arg)
{
    pipe_watchdog *w = arg;
    for (int i = 0; i < 60 && !w->done; i++)
        usleep(50 * 1000);
    if (!w->done) {
        close(w->fd);
        w->closed = true;
    }
    return NULL;
}

static void test_cancel_while_a_pipe_read_waits(void **state)
{
    (void)state;
    cfg c = {.rows = 1000, .dim = 32};
    bytes b = make_index(&c);
    int p[2];
    assert_int_equal(pipe(p), 0);
    size_t first = LDS_HEADER_SIZE + 32768; /* the header and some payload, then silence */
    assert_true(b.n > first + 4096);
    assert_int_equal(write(p[1], b.p, first), (ssize_t)first);
    lds_pool *pool = sentinel_pool();
    lds_load_options o = opts_for(pool);
    late_cancel l = {0};
    clock_gettime(CLOCK_MONOTONIC, &l.t0);
    o.cancel = cancel_after_200_ms;
    o.callback_ctx = &l;
    pipe_watchdog w = {.fd = p[1]};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, close_pipe_after_3_s, &w), 0);
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_load_fd(p[0], &o, &idx, NULL, &err);
    double ms = ms_since(&l.t0);
    w.done = 1;
    pthread_join(th, NULL);
    if (!w.closed)
        close(p[1]);
    close(p[0]);
    print_message("load from a silent pipe: status %d after %.0f ms, %u cancel calls\n", (int)st,
                  ms, l.calls);
    assert_int_equal(st, LDS_E_CANCELLED);
    assert_null(idx);
    assert_true(ms < 2000);
    assert_true(l.calls >= 2);
    assert_int_equal(pool_stats(pool).rents, 1); /* the payload's rental, returned */
    assert_pool_clear(pool);
    lds_pool_free(pool);
    free(b.p);
}

/* The ordering of a cancellation, not only its end: the read callback (the consumer of the
   loader's buffer) is held at a gate after its first chunk; the test requests the cancel and
   sees that the load has not returned, that the rental is still out and that nothing has
   been returned; then it opens the gate and sees the load end cancelled with exactly one
   return. */
typedef struct gate_reader {
    mem_reader m;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool at_gate;  /* the reader is waiting (set by the reader) */
    bool open;     /* the test let it go on */
    bool cancel;   /* the cancel flag the loader polls */
    bool returned; /* the load call returned */
    lds_status st;
    lds_index *idx;
    lds_load_options o;
} gate_reader;

static lds_status gate_read(void *ctx, void *buf, size_t cap, size_t *got)
{
    gate_reader *g = ctx;
    if (g->m.pos > 0) { /* after the first chunk, wait at the gate once */
        pthread_mutex_lock(&g->lock);
        if (!g->open) {
            g->at_gate = true;
            pthread_cond_broadcast(&g->cond);
            while (!g->open)
                pthread_cond_wait(&g->cond, &g->lock);
        }
        pthread_mutex_unlock(&g->lock);
    }
    return mem_read(&g->m, buf, cap, got);
}

static bool gate_cancel(void *ctx)
{
    gate_reader *g = ctx;
    pthread_mutex_lock(&g->lock);
    bool c = g->cancel;
    pthread_mutex_unlock(&g->lock);
    return c;
}

static void *gate_load(void *arg)
{
    gate_reader *g = arg;
    lds_index *idx = NULL;
    lds_status st = lds_load_callback(gate_read, g, &g->o, &idx, NULL, NULL);
    pthread_mutex_lock(&g->lock);
    g->st = st;
    g->idx = idx;
    g->returned = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

static void test_cancel_ordering_at_a_gate(void **state)
{
    (void)state;
    cfg c = {.rows = 1000, .dim = 32};
    bytes b = make_index(&c);
    lds_pool *pool = sentinel_pool();
    gate_reader g;
    memset(&g, 0, sizeof g);
    g.m = reader_over(&b);
    g.m.max_read = 4096;
    assert_int_equal(pthread_mutex_init(&g.lock, NULL), 0);
    assert_int_equal(pthread_cond_init(&g.cond, NULL), 0);
    g.o = opts_for(pool);
    g.o.chunk_bytes = 4096;
    g.o.hash_thread = false;
    g.o.cancel = gate_cancel;
    g.o.callback_ctx = &g;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, gate_load, &g), 0);

    pthread_mutex_lock(&g.lock);
    while (!g.at_gate)
        pthread_cond_wait(&g.cond, &g.lock);
    g.cancel = true; /* requested while the consumer is held */
    bool returned = g.returned;
    pthread_mutex_unlock(&g.lock);
    assert_false(returned);
    lds_pool_stats ps = pool_stats(pool);
    assert_int_equal(ps.rents, 1);
    assert_int_equal(ps.leases_current, 1);
    assert_int_equal(ps.returns, 0);
    /* Still held: nothing moves while the gate is shut. */
    usleep(20000);
    pthread_mutex_lock(&g.lock);
    returned = g.returned;
    pthread_mutex_unlock(&g.lock);
    assert_false(returned);
    assert_int_equal(pool_stats(pool).returns, 0);

    pthread_mutex_lock(&g.lock);
    g.open = true;
    pthread_cond_broadcast(&g.cond);
    pthread_mutex_unlock(&g.lock);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(g.returned);
    assert_int_equal(g.st, LDS_E_CANCELLED);
    assert_null(g.idx);
    ps = pool_stats(pool);
    assert_int_equal(ps.rents, 1);
    assert_int_equal(ps.returns, 1);
    assert_int_equal(ps.leases_current, 0);
    pthread_cond_destroy(&g.cond);
    pthread_mutex_destroy(&g.lock);
    lds_pool_free(pool);
    free(b.p);
}

/* ==== checksum, ownership, fd offsets, errors ============================ */

static void test_checksum_both_ways(void **state)
{
    (void)state;
    cfg c = {.rows = 64, .dim = 16};
    bytes b = make_index(&c);
    lds_pool *pool = sentinel_pool();
    const char *path = tmp_path("sum.lds");
    write_file(path, b.p, b.n);
    for (int pass = 0; pass <= 1; pass++) {
        lds_load_options o = opts_for(pool);
        o.hash_while_reading = pass == 0;
        lds_index *idx = NULL;
        lds_load_info info;
        lds_load_info_init(&info);
        assert_int_equal(lds_load_path(path, &o, &idx, &info, NULL), LDS_OK);
        assert_true(info.checksum_verified);
        assert_int_equal(info.hashed_while_reading, pass == 0);
        lds_index_free(idx);
    }
    /* One flipped payload byte is caught either way, and the rental returned. */
    bytes bad = copy_bytes(&b);
    bad.p[LDS_HEADER_SIZE + 10] ^= 1;
    write_file(path, bad.p, bad.n);
    for (int pass = 0; pass <= 1; pass++) {
        lds_load_options o = opts_for(pool);
        o.hash_while_reading = pass == 0;
        lds_index *idx = NULL;
        assert_int_equal(lds_load_path(path, &o, &idx, NULL, NULL), LDS_E_CHECKSUM);
        assert_null(idx);
        assert_pool_clear(pool);
    }
    /* verify_checksum off: loads, and says it did not verify. */
    lds_load_options o = opts_for(pool);
    o.verify_checksum = false;
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_load_path(path, &o, &idx, &info, NULL), LDS_OK);
    assert_false(info.checksum_verified);
    lds_index_free(idx);
    assert_pool_clear(pool);
    free(bad.p);
    lds_pool_free(pool);
    free(b.p);
}

/* hash_thread: the checksum hashed on a second thread gives the same index; a
   flipped byte in the first or the last chunk is caught; a cancelled or a
   truncated load stops the thread before the rental goes back. */
/* Format 1.1 through every read path: the same index as the 1.0 file of the same rows,
 * each chunk hashed while reading (or by the parser), a flipped byte named by its chunk. */
typedef struct chunk_case {
    const char *name;
    int how; /* 0 path, 1 callback of 1000-byte reads, 2 zstd path, 3 memory, 4 mapped */
    bool while_reading;
} chunk_case;

static lds_status load_how(const chunk_case *cc, const bytes *b, lds_load_options *o,
                           lds_index **idx, lds_load_info *info, lds_error *err)
{
    const char *path = tmp_path("chunked.lds");
    o->hash_while_reading = cc->while_reading;
    o->use_mmap = cc->how == 4;
    if (cc->how == 1) {
        mem_reader m = reader_over(b);
        m.max_read = 1000;
        return lds_load_callback(mem_read, &m, o, idx, info, err);
    }
    if (cc->how == 2) {
        bytes z = zstd_frame(b, true);
        write_file(path, z.p, z.n);
        free(z.p);
    } else if (cc->how != 3) {
        write_file(path, b->p, b->n);
    }
    if (cc->how == 3)
        return lds_load_memory(b->p, b->n, false, o, idx, info, err);
    return lds_load_path(path, o, idx, info, err);
}

static void test_chunked_file_every_path(void **state)
{
    (void)state;
    cfg c10 = {.rows = 300, .dim = 24, .ids = true, .keys = true};
    cfg c11 = c10;
    c11.chunk = 4096;
    bytes b10 = make_index(&c10), b11 = make_index(&c11);
    lds_header h;
    assert_int_equal(lds_header_decode(b11.p, b11.n, &h, NULL), LDS_OK);
    assert_true(lds_header_chunked(&h));
    assert_true(h.chunk_count >= 8);
    /* The 1.1 reference (the parser given the header) holds the 1.0 file's index. */
    lds_index *ref = reference(&b11), *ref10 = reference(&b10);
    assert_true(lds_index_checksum(ref) == lds_index_checksum(ref10));
    assert_int_equal(lds_index_payload_bytes(ref),
                     lds_index_payload_bytes(ref10) + 8 * h.chunk_count);
    for (uint64_t r = 0; r < lds_index_rows(ref10); r++)
        assert_memory_equal(lds_index_row(ref, r), lds_index_row(ref10, r), 24 * 4);
    lds_index_free(ref10);
    lds_pool *pool = sentinel_pool();
    const chunk_case cases[] = {
        {"path", 0, true},     {"path, parser hashes", 0, false},
        {"callback", 1, true}, {"zstd", 2, true},
        {"memory", 3, true},   {"mapped", 4, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lds_load_options o = opts_for(pool);
        lds_index *idx = NULL;
        lds_load_info info;
        lds_load_info_init(&info);
        lds_error err;
        lds_error_init(&err);
        lds_status st = load_how(&cases[i], &b11, &o, &idx, &info, &err);
        if (st != LDS_OK)
            print_error("%s: %s\n", cases[i].name, err.message);
        assert_int_equal(st, LDS_OK);
        assert_true(info.checksum_verified);
        /* The stream paths hash while reading; memory and mapped leave it to the parser. */
        assert_int_equal(info.hashed_while_reading, cases[i].while_reading && cases[i].how < 3);
        assert_same_index(ref, idx);
        assert_int_equal(lds_index_chunk_count(idx), h.chunk_count);
        assert_true(lds_index_checksum(idx) == lds_index_checksum(ref));
        lds_index_free(idx);
    }
    /* A flipped byte in chunk 5, then in the last chunk (the section table). */
    const uint64_t ks[] = {5, h.chunk_count - 1};
    for (size_t j = 0; j < 2; j++) {
        uint64_t s0, e0;
        assert_int_equal(lds_chunk_range(&h, ks[j], &s0, &e0), LDS_OK);
        bytes bad = copy_bytes(&b11);
        bad.p[LDS_HEADER_SIZE + e0 - 3] ^= 0x01;
        char want[96];
        snprintf(want, sizeof want, "checksum of chunk %llu (payload bytes %llu..%llu): stored ",
                 (unsigned long long)ks[j], (unsigned long long)s0, (unsigned long long)(e0 - 1));
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            lds_load_options o = opts_for(pool);
            uint64_t rents = pool_stats(pool).rents, returns = pool_stats(pool).returns;
            lds_index *idx = NULL;
            lds_error err;
            lds_error_init(&err);
            assert_int_equal(load_how(&cases[i], &bad, &o, &idx, NULL, &err), LDS_E_CHECKSUM);
            assert_null(idx);
            if (!strstr(err.message, want))
                print_error("%s: %s\n", cases[i].name, err.message);
            assert_non_null(strstr(err.message, want));
            assert_string_equal(err.field, "chunk");
            assert_int_equal(err.offset, LDS_HEADER_SIZE + s0);
            assert_int_equal(pool_stats(pool).rents - rents, pool_stats(pool).returns - returns);
        }
        free(bad.p);
    }
    /* A table cut short by a stream that ends early: truncated, not a checksum. */
    mem_reader m = reader_over(&b11);
    m.n -= 8;
    lds_load_options o = opts_for(pool);
    lds_index *idx = NULL;
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, NULL), LDS_E_TRUNCATED);
    lds_index_free(ref);
    lds_pool_free(pool);
    free(b10.p);
    free(b11.p);
}

static void test_hash_thread(void **state)
{
    (void)state;
    cfg c = {.rows = 1000, .dim = 32};
    bytes b = make_index(&c);
    lds_pool *pool = sentinel_pool();
    const char *path = tmp_path("thread.lds");
    write_file(path, b.p, b.n);
    lds_load_options o = opts_for(pool);
    o.chunk_bytes = 4096;
    o.hash_thread = true;
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_load_path(path, &o, &idx, &info, NULL), LDS_OK);
    assert_true(info.checksum_verified);
    assert_true(info.hashed_while_reading);
    assert_true(info.hashed_on_thread);
    assert_int_equal(lds_index_rows(idx), 1000);
    lds_index_free(idx);
    assert_pool_clear(pool);

    /* Fewer than 4 chunks: no thread. */
    o.chunk_bytes = b.n;
    lds_load_info_init(&info);
    assert_int_equal(lds_load_path(path, &o, &idx, &info, NULL), LDS_OK);
    assert_false(info.hashed_on_thread);
    assert_true(info.checksum_verified);
    lds_index_free(idx);
    o.chunk_bytes = 4096;

    size_t flips[] = {LDS_HEADER_SIZE + 10, b.n - LDS_CHECKSUM_SIZE - 1};
    for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
        bytes bad = copy_bytes(&b);
        bad.p[flips[i]] ^= 1;
        write_file(path, bad.p, bad.n);
        lds_error err;
        lds_error_init(&err);
        assert_int_equal(lds_load_path(path, &o, &idx, NULL, &err), LDS_E_CHECKSUM);
        assert_null(idx);
        assert_pool_clear(pool);
        free(bad.p);
    }
    write_file(path, b.p, b.n);

    cb_state s = {.cancel_at = 6, .monotone = true};
    o.cancel = cancel_cb;
    o.callback_ctx = &s;
    assert_int_equal(lds_load_path(path, &o, &idx, NULL, NULL), LDS_E_CANCELLED);
    assert_null(idx);
    assert_pool_clear(pool);
    o.cancel = NULL;

    /* A stream that ends early (the callback path, declared length kept). */
    mem_reader m = reader_over(&b);
    m.n = b.n - 5000;
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, NULL), LDS_E_TRUNCATED);
    assert_null(idx);
    assert_pool_clear(pool);
    lds_pool_free(pool);
    free(b.p);
}

static void test_default_ownership_is_adopt(void **state)
{
    (void)state;
    assert_int_equal(lds_load_default_ownership(), LDS_OWN_ADOPT);
    cfg c = {.rows = 10, .dim = 4};
    bytes b = make_index(&c);
    lds_pool *pool = sentinel_pool();
    mem_reader m = reader_over(&b);
    lds_load_options o = opts_for(pool);
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, &info, NULL), LDS_OK);
    assert_int_equal(info.ownership, LDS_OWN_ADOPT);
    assert_int_equal(pool_stats(pool).leases_current, 1);
    lds_index_free(idx);
    assert_pool_clear(pool);
    assert_string_equal(lds_load_path_name(LDS_LOAD_POOLED), "pooled");
    assert_string_equal(lds_load_path_name(LDS_LOAD_GROWABLE), "growable");
    assert_string_equal(lds_load_path_name(LDS_LOAD_MAPPED), "mapped");
    assert_string_equal(lds_load_path_name(LDS_LOAD_MEMORY), "memory");
    assert_string_equal(lds_load_path_name((enum lds_load_path)0), "none");
    lds_pool_free(pool);
    free(b.p);
}

static void test_fd_at_an_offset_and_file(void **state)
{
    (void)state;
    cfg c = {.rows = 30, .dim = 5, .keys = true};
    bytes b = make_index(&c);
    lds_index *ref = reference(&b);
    const char *path = tmp_path("offset.lds");
    bytes pre = {malloc(b.n + 100), b.n + 100};
    memset(pre.p, 'j', 100);
    memcpy(pre.p + 100, b.p, b.n);
    write_file(path, pre.p, pre.n);
    lds_pool *pool = sentinel_pool();
    lds_load_options o = opts_for(pool);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(lseek(fd, 100, SEEK_SET), 100);
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_load_fd(fd, &o, &idx, &info, NULL), LDS_OK);
    assert_int_equal(info.path, LDS_LOAD_POOLED);
    assert_int_equal(lseek(fd, 0, SEEK_CUR), (off_t)pre.n);
    assert_same_index(idx, ref);
    lds_index_free(idx);
    /* Mapped at an offset: the position is left where it was. */
    o.use_mmap = true;
    assert_int_equal(lseek(fd, 100, SEEK_SET), 100);
    lds_load_info_init(&info);
    assert_int_equal(lds_load_fd(fd, &o, &idx, &info, NULL), LDS_OK);
    assert_int_equal(info.path, LDS_LOAD_MAPPED);
    assert_int_equal(lseek(fd, 0, SEEK_CUR), 100);
    assert_same_index(idx, ref);
    lds_index_free(idx);
    close(fd);
    o.use_mmap = false;

    /* FILE*: a regular file at an offset, and an fmemopen stream (no fd). */
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseeko(f, 100, SEEK_SET), 0);
    lds_load_info_init(&info);
    assert_int_equal(lds_load_file(f, &o, &idx, &info, NULL), LDS_OK);
    assert_int_equal(info.path, LDS_LOAD_POOLED);
    assert_same_index(idx, ref);
    lds_index_free(idx);
    fclose(f);
    f = fmemopen(b.p, b.n, "rb");
    assert_non_null(f);
    assert_int_equal(lds_load_file(f, &o, &idx, NULL, NULL), LDS_OK);
    assert_same_index(idx, ref);
    lds_index_free(idx);
    fclose(f);
    assert_pool_clear(pool);

    /* Errors carry errno and the field. */
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_load_path(tmp_path("missing.lds"), &o, &idx, NULL, &err), LDS_E_IO);
    assert_int_equal(err.sys_errno, ENOENT);
    assert_string_equal(err.field, "path");
    lds_error_init(&err);
    assert_int_equal(lds_load_fd(-1, &o, &idx, NULL, &err), LDS_E_INVALID_ARG);
    lds_error_init(&err);
    assert_int_equal(lds_load_path(path, &o, NULL, NULL, &err), LDS_E_INVALID_ARG);
    lds_load_options bad = o;
    bad.size = 0;
    assert_int_equal(lds_load_path(path, &bad, &idx, NULL, NULL), LDS_E_INVALID_ARG);
    /* The struct-size rule of lodestar.h: garbage sizes are refused by name. */
    size_t bad_sizes[] = {7, 16, LDS_LOAD_OPTIONS_MIN_SIZE - 1, sizeof bad + 1};
    for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
        bad.size = bad_sizes[i];
        lds_error_init(&err);
        assert_int_equal(lds_load_path(path, &bad, &idx, NULL, &err), LDS_E_INVALID_ARG);
        assert_non_null(strstr(err.message, "lds_load_options.size"));
    }
    /* An older, shorter struct is accepted; a hand-built limits of size 0 is not. */
    bad = o;
    bad.size = LDS_LOAD_OPTIONS_MIN_SIZE;
    assert_int_equal(lds_load_memory(b.p, b.n, true, &bad, &idx, NULL, NULL), LDS_OK);
    lds_index_free(idx);
    bad = o;
    bad.limits.size = 0;
    bad.limits.max_dim = 1;
    lds_error_init(&err);
    assert_int_equal(lds_load_path(path, &bad, &idx, NULL, &err), LDS_E_INVALID_ARG);
    assert_string_equal(err.field, "limits.size");
    assert_null(idx);
    lds_load_info_init(&info);
    info.size = 16;
    lds_error_init(&err);
    assert_int_equal(lds_load_path(path, &o, &idx, &info, &err), LDS_E_INVALID_ARG);
    assert_non_null(strstr(err.message, "lds_load_info.size"));
    info.size = LDS_LOAD_INFO_MIN_SIZE;
    assert_int_equal(lds_load_memory(b.p, b.n, true, &o, &idx, &info, NULL), LDS_OK);
    assert_int_equal(info.size, LDS_LOAD_INFO_MIN_SIZE);
    lds_index_free(idx);
    /* The header's own errors, at the stream offset. */
    bytes junk = copy_bytes(&b);
    junk.p[0] = 'X';
    lds_error_init(&err);
    mem_reader m = reader_over(&junk);
    assert_int_equal(lds_load_callback(mem_read, &m, &o, &idx, NULL, &err), LDS_E_BAD_MAGIC);
    assert_null(idx);
    assert_pool_clear(pool);
    free(junk.p);
    lds_pool_free(pool);
    free(pre.p);
    lds_index_free(ref);
    free(b.p);
}

/* ==== mapped path ========================================================= */

static void *refuse_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
    (void)addr;
    (void)length;
    (void)prot;
    (void)flags;
    (void)fd;
    (void)offset;
    errno = ENODEV;
    return MAP_FAILED;
}

static void test_mapped_path_and_fallback(void **state)
{
    (void)state;
    cfg c = {.rows = 700, .dim = 24, .keys = true, .ids = true};
    bytes b = make_index(&c);
    lds_index *ref = reference(&b);
    const char *path = tmp_path("mapped.lds");
    write_file(path, b.p, b.n);
    lds_pool *pool = sentinel_pool();
    for (int populate = 0; populate <= 1; populate++) {
        for (int own = LDS_OWN_COPY; own <= LDS_OWN_ADOPT; own++) {
            lds_load_options o = opts_for(pool);
            o.use_mmap = true;
            o.populate = populate != 0;
            o.ownership = (lds_ownership)own;
            lds_index *idx = NULL;
            lds_load_info info;
            lds_load_info_init(&info);
            assert_int_equal(lds_load_path(path, &o, &idx, &info, NULL), LDS_OK);
            assert_int_equal(info.path, LDS_LOAD_MAPPED);
            assert_false(info.mmap_fallback);
            assert_true(info.checksum_verified);
            assert_same_index(idx, ref);
            lds_index_free(idx);
        }
    }
    assert_int_equal(pool_stats(pool).rents, 0);

    /* Mapping refused (as on some network file systems): the read path runs. */
    lds__load_mmap = refuse_mmap;
    lds_load_options o = opts_for(pool);
    o.use_mmap = true;
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    lds_status st = lds_load_path(path, &o, &idx, &info, NULL);
    lds__load_mmap = mmap;
    assert_int_equal(st, LDS_OK);
    assert_int_equal(info.path, LDS_LOAD_POOLED);
    assert_true(info.mmap_fallback);
    assert_same_index(idx, ref);
    lds_index_free(idx);
    assert_pool_clear(pool);

    /* A mapped file of the wrong size is refused like a read one. */
    write_file(path, b.p, b.n - 1);
    assert_int_equal(lds_load_path(path, &o, &idx, NULL, NULL), LDS_E_LENGTH_MISMATCH);
    bytes bad = copy_bytes(&b);
    bad.p[b.n - 20] ^= 1;
    write_file(path, bad.p, bad.n);
    assert_int_equal(lds_load_path(path, &o, &idx, NULL, NULL), LDS_E_CHECKSUM);
    assert_null(idx);
    free(bad.p);
    lds_pool_free(pool);
    lds_index_free(ref);
    free(b.p);
}

/* ==== main ================================================================= */

static int setup_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lds-loader-XXXXXX");
    return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* lds_url_redact replaces the value of every signed-URL or token query parameter, each
 * name in any case, and keeps the other parameters, the fragment and the order. */
static void test_url_redact_query_secrets(void **state)
{
    (void)state;
    static const char *const names[] = {
        "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token", "access_token", "sig",
        "token",           "x-amz-signature",  "ACCESS_TOKEN",         "Sig",          "TOKEN",
    };
    char url[256], want[256], b[256];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(url, sizeof url, "https://h.example/x.ldsi?a=1&%s=S3CR3T%%2Fv&b=2#frag", names[i]);
        snprintf(want, sizeof want, "https://h.example/x.ldsi?a=1&%s=REDACTED&b=2#frag", names[i]);
        assert_string_equal(lds_url_redact(url, b, sizeof b), want);
        assert_null(strstr(b, "S3CR3T"));
        /* First and only parameter, no fragment, with user:password too. */
        snprintf(url, sizeof url, "http://u:pw@h/x?%s=S3CR3T", names[i]);
        snprintf(want, sizeof want, "http://h/x?%s=REDACTED", names[i]);
        assert_string_equal(lds_url_redact(url, b, sizeof b), want);
    }
    /* A name holding a credential's word is one (tokens, my_token); "sig" and "key" only
       as whole names; a parameter without '=' has no value to hide. */
    assert_string_equal(lds_url_redact("http://h/x?mysig=1&tokens=2&token&sig=", b, sizeof b),
                        "http://h/x?mysig=1&tokens=REDACTED&token&sig=REDACTED");
    /* Found by a tester: names outside the old list were shown (issue 26 item 4). */
    assert_string_equal(
        lds_url_redact("http://h/x?secret=S1&auth=A&Authorization=A1&jwt=J1&x-api-key=K4&pwd=P3"
                       "&pass=P2&session=S3&code=C1&Policy=P1&Key-Pair-Id=K&monkey=1&n=2",
                       b, sizeof b),
        "http://h/x?secret=REDACTED&auth=REDACTED&Authorization=REDACTED&jwt=REDACTED"
        "&x-api-key=REDACTED&pwd=REDACTED&pass=REDACTED&session=REDACTED&code=REDACTED"
        "&Policy=REDACTED&Key-Pair-Id=REDACTED&monkey=1&n=2");
    assert_null(strstr(b, "S1"));
    /* A secret in the path is not a parameter; one in the fragment is (an OAuth implicit
       grant's access_token travels there). */
    assert_string_equal(lds_url_redact("http://h/token=1#sig=2", b, sizeof b),
                        "http://h/token=1#sig=REDACTED");
    /* Found in review: SigV2 and Google signed URLs, API keys, percent-encoded names, a
       fragment's token, a password with a raw '/' that ends the authority early. */
    static const struct {
        const char *in, *out;
    } more[] = {
        {"http://h/x?Signature=S2&AWSAccessKeyId=A1&Expires=9",
         "http://h/x?Signature=REDACTED&AWSAccessKeyId=REDACTED&Expires=9"},
        {"https://h/x?X-Goog-Signature=G&X-Goog-Credential=C",
         "https://h/x?X-Goog-Signature=REDACTED&X-Goog-Credential=REDACTED"},
        {"http://h/x?api_key=K&key=K2", "http://h/x?api_key=REDACTED&key=REDACTED"},
        {"http://h/x?X%2DAmz%2DSignature=S", "http://h/x?X%2DAmz%2DSignature=REDACTED"},
        {"http://h/x.ldsi#access_token=FRAG&x=1", "http://h/x.ldsi#access_token=REDACTED&x=1"},
        {"http://user:SEC/RETPW@host/x.ldsi", "http://host/x.ldsi"},
        /* a raw '?' or '#' in the password (found by a tester: shown whole before) */
        {"http://u:pa?ssW0RD@h/x", "http://h/x"},
        {"http://u:pa#ssW0RD@h/x?sig=S", "http://h/x?sig=REDACTED"},
        {"s3://AKID:pa?ss@b/k", "s3://b/k"},
        {"http://u:p/a?s#s@h/x", "http://h/x"},
        {"http://u:SEC/RET@host/x?mail=a@b", "http://host/x?mail=a@b"},
        /* a raw '?', '#' or '/' in the user name, digits then a raw '/' in the password (found
           by a tester: shown whole before) */
        {"http://us?er:S3CRET@127.0.0.1:1/x", "http://127.0.0.1:1/x"},
        {"http://us#er:S3CRET@h/x", "http://h/x"},
        {"http://us/er:S3CRET@h/x", "http://h/x"},
        {"http://u:1234/S3CRET@127.0.0.1:1/x", "http://127.0.0.1:1/x"},
        {"http://u:1234?S3CRET@h/x", "http://h/x"},
        {"http://u:1234#S3CRET@h/x", "http://h/x"},
        /* a port and an '@' in the path: the shape of a password of digits and a raw '/'
           (below), so shown from the '@' on (the safe side) */
        {"http://h:8080/a@b", "http://b"},
        {"http://h/p@q?t=10:00&mail=a@b", "http://h/p@q?t=10:00&mail=a@b"},
        /* a mistyped scheme (one slash) still hides the password (found by a tester) */
        {"http:/user:pw@h/x?token=T", "http:/h/x?token=REDACTED"},
        {"s3:///u:pw@b/k", "s3:///b/k"},
        {"C:/data/x.ldsi", "C:/data/x.ldsi"},
        {"relative/a:b@c", "relative/a:b@c"},
        /* a URL inside a parameter's value keeps none of its secrets (found by a tester:
           "?next=https://u:secret@x/y" showed secret): raw, redacted in place */
        {"https://h/p?next=https://u:secret@x/y", "https://h/p?next=https://x/y"},
        {"https://h/p?a=1&next=https://u:secret@x/y?token=T&b=2#f",
         "https://h/p?a=1&next=https://x/y?token=REDACTED&b=2#f"},
        {"https://h/p?next=http://x/y?sig=S1", "https://h/p?next=http://x/y?sig=REDACTED"},
        {"https://h/p#next=s3://AKID:secret@b/k", "https://h/p#next=s3://b/k"},
        {"https://h/p?go=see+https://u:secret@x/", "https://h/p?go=see+https://x/"},
        {"https://h/p?next=//u:secret@x/y", "https://h/p?next=//x/y"},
        {"https://h/p?next=/login?token=T", "https://h/p?next=/login?token=REDACTED"},
        /* a pair without '=' holding one reads as a password with a raw '?' (above): shown
           from its '@' on, the safe side */
        {"https://h/p?https://u:secret@x/y", "https://x/y"},
        {"https://h/p?a=1&https://u:secret@x/y", "https://h/p?a=1&https://x/y"},
        /* nested twice over */
        {"https://h/p?next=https://x/y?then=https://u:secret@z/w",
         "https://h/p?next=https://x/y?then=https://z/w"},
        /* percent-encoded (once or twice, any case): the value hidden whole */
        {"https://h/p?next=https%3A%2F%2Fu%3Asecret%40x%2Fy&n=1", "https://h/p?next=REDACTED&n=1"},
        {"https://h/p?next=https%3a%2f%2fu%3asecret%40x%2fy", "https://h/p?next=REDACTED"},
        {"https://h/p?next=https%253A%252F%252Fu%253Asecret%2540x", "https://h/p?next=REDACTED"},
        {"https://h/p?next=https%3A%2F%2Fx%2Fy%3Ftoken%3DT", "https://h/p?next=REDACTED"},
        {"https://h/p?next=https://u%3Asecret@x/y", "https://h/p?next=REDACTED"},
        /* encoded values holding nothing to hide, and ordinary ones, are shown */
        {"https://h/p?next=https%3A%2F%2Fx%2Fy&q=100%25&t=10:00&path=a/b",
         "https://h/p?next=https%3A%2F%2Fx%2Fy&q=100%25&t=10:00&path=a/b"},
        {"https://h/p?next=https://x/y", "https://h/p?next=https://x/y"},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        assert_string_equal(lds_url_redact(more[i].in, b, sizeof b), more[i].out);
    /* Nested deeper than four URLs: a value that still holds one is hidden whole. */
    char deep[512] = "https://h/p", want_deep[512];
    for (int i = 0; i < 6; i++)
        strcat(deep, "?n=https://h/p");
    strcat(deep, "?n=https://u:secret@x/");
    assert_null(strstr(lds_url_redact(deep, b, sizeof b), "secret"));
    snprintf(want_deep, sizeof want_deep, "%s",
             "https://h/p?n=https://h/p?n=https://h/p?n=https://h/p?n=REDACTED");
    assert_string_equal(b, want_deep);
    /* Cut short: never a byte of the secret. */
    char small[24];
    assert_string_equal(lds_url_redact("http://h/x?sig=ABCDEFGHIJKLMNOP", small, sizeof small),
                        "http://h/x?sig=REDACTED");
    char tiny[18];
    assert_string_equal(lds_url_redact("http://h/x?sig=ABCDEFGHIJKLMNOP", tiny, sizeof tiny),
                        "http://h/x?sig=RE");
}

/* Found by a tester (issue of 2026-12-03): lds_url_redact showed a secret in a path
 * parameter, in a URL written with backslashes inside a parameter's value, and in a value
 * percent-encoded four or more times. Each case below leaked before (docs/adr/0034,
 * amendment of 2026-12-03). */
static void test_url_redact_path_params_backslashes_deep_encoding(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        /* a special scheme without slashes (WHATWG): the authority is still one */
        {"http:u:pw@h/x", "http:h/x"},
        {"HTTPS:u:pw@h", "HTTPS:h"},
        {"mailto:u@x", "mailto:u@x"},
        {"a:b@c", "a:b@c"},
        /* path parameters with a credential's name: the value hidden, the path kept */
        {"https://h/app;jsessionid=SECRET/x?y=1", "https://h/app;jsessionid=REDACTED/x?y=1"},
        {"https://h/p;token=SECRET", "https://h/p;token=REDACTED"},
        {"https://h/a;v=2;sig=SECRET;w=3/b.ldsi", "https://h/a;v=2;sig=REDACTED;w=3/b.ldsi"},
        {"https://u:pw@h/p;X-Amz-Signature=SECRET#f", "https://h/p;X-Amz-Signature=REDACTED#f"},
        /* a URL in a path parameter's value (it runs on to the path's end) */
        {"https://h/p;next=https://u:SECRET@x/y?a=1", "https://h/p;next=https://x/y?a=1"},
        {"https://h/p;next=//u:SECRET@x/y", "https://h/p;next=//x/y"},
        {"https://h/p;next=https%3A%2F%2Fu%3ASECRET%40x", "https://h/p;next=REDACTED"},
        /* ... and in a nested URL's path */
        {"https://h/?next=https://x/app;jsessionid=SECRET",
         "https://h/?next=https://x/app;jsessionid=REDACTED"},
        {"https://h/?next=/app;token=SECRET/x", "https://h/?next=/app;token=REDACTED/x"},
        /* backslashes for slashes (WHATWG URL: special authority slashes) */
        {"https://h/?next=https:\\\\u:SECRET@x/y", "https://h/?next=https:\\\\x/y"},
        {"https://h/?next=https:\\/\\/u:SECRET@x", "https://h/?next=https:\\/\\/x"},
        {"https://h/?next=\\\\u:SECRET@x/y", "https://h/?next=\\\\x/y"},
        {"https:\\\\u:SECRET@h/x", "https:\\\\h/x"},
        /* encoded four and five times: still decodable after three decodes, hidden whole */
        {"https://h/p?next=https%2525253A%2525252F%2525252Fu%2525253ASECRET%25252540x&n=1",
         "https://h/p?next=REDACTED&n=1"},
        {"https://h/p?next=https%252525253A%252525252F%252525252Fu%252525253ASECRET%2525252540x",
         "https://h/p?next=REDACTED"},
        {"https://h/p?q=100%25252525", "https://h/p?q=REDACTED"},
    };
    char b[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_string_equal(lds_url_redact(cases[i].in, b, sizeof b), cases[i].out);
        assert_null(strstr(b, "SECRET"));
    }
    /* Unchanged: ordinary path parameters, backslashes in a Windows path, values encoded
       up to three times that hold nothing to hide. */
    static const char *const same[] = {
        "https://h/a;v=2/b;type=i.ldsi?x=1",
        "https://h/a;/b;;c",
        "C:\\data\\x.ldsi",
        "https://h/p?q=100%252525&r=a%2Fb",
        "https://h/p?next=https:\\\\x/y",
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        assert_string_equal(lds_url_redact(same[i], b, sizeof b), same[i]);
}

/* lds_url_redact drops user:password from the authority only, and cuts safely. */
static void test_url_redact(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(lds_url_redact("https://u:p@h.example/x.ldsi", b, sizeof b),
                        "https://h.example/x.ldsi");
    assert_string_equal(lds_url_redact("http://u@h:8080/a?b=c@d", b, sizeof b),
                        "http://h:8080/a?b=c@d");
    /* An '@' after the authority is not a credential. */
    assert_string_equal(lds_url_redact("http://h/p@q", b, sizeof b), "http://h/p@q");
    /* The last '@' of the authority ends the credentials (a password holding '@'). */
    assert_string_equal(lds_url_redact("http://u:p@ss@h/", b, sizeof b), "http://h/");
    assert_string_equal(lds_url_redact("not a url", b, sizeof b), "not a url");
    assert_string_equal(lds_url_redact(NULL, b, sizeof b), "(null)");
    char small[12];
    assert_string_equal(lds_url_redact("http://user:secret@host/x", small, sizeof small),
                        "http://host");
    assert_string_equal(lds_url_redact("http://user:secret@host/x", b, 8), "http://");
    assert_null(lds_url_redact("x", NULL, 0));
    /* A scheme other than http(s) is refused before any transfer. */
    lds_index *idx = (lds_index *)1;
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_load_url("ftp://u:pw@h/x", NULL, &idx, NULL, &err), LDS_E_INVALID_ARG);
    assert_null(idx);
    assert_non_null(strstr(err.message, "ftp://h/x"));
    assert_null(strstr(err.message, "pw"));
    assert_int_equal(lds_load_url(NULL, NULL, &idx, NULL, &err), LDS_E_INVALID_ARG);
    lds_url_options uo;
    lds_url_options_default(&uo);
    uo.size = 3;
    lds_load_options o;
    lds_load_options_default(&o);
    o.url = &uo;
    lds_status st = lds_load_url("http://127.0.0.1:1/x", &o, &idx, NULL, &err);
    assert_int_equal(st, LDS_E_INVALID_ARG);
    assert_string_equal(err.field, "url.size");
}

/* Found by a tester: "s3://u:pw@bad_bucket!/k" was refused as "s3://bad_bucket!/k: the
 * bucket name has a character S3 does not allow", and "s3://u:pw@goodbucket/k" the same way
 * under a bucket name that looked right: user:password (or a port) in the bucket field is
 * said as such, a bad character is named with the bucket, field "url.bucket", before any
 * request, and no credential is shown. */
static void test_s3_url_bucket_field_messages(void **state)
{
    (void)state;
    if (!lds_url_supported())
        skip();
    static const struct {
        const char *url, *says;
    } cases[] = {
        {"s3://u:pw@bad_bucket!/k", "s3://bad_bucket!/k: the bucket field of an s3:// URL holds "
                                    "the bucket name only, no user, password or port"},
        {"s3://u:pw@goodbucket/k", "s3://goodbucket/k: the bucket field of an s3:// URL holds "
                                   "the bucket name only"},
        {"s3://AKIDpw:pw/x@b/k", "s3://b/k: the bucket field of an s3:// URL holds"},
        {"s3://b:9000/k", "s3://b:9000/k: the bucket field of an s3:// URL holds"},
        {"s3://bad_bucket!/k", "s3://bad_bucket!/k: the bucket name \"bad_bucket!\" has '!', "
                               "which S3 does not allow (letters, digits, '.', '-' and '_' "
                               "only)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lds_index *idx = (lds_index *)1;
        lds_error err;
        lds_error_init(&err);
        assert_int_equal(lds_load_url(cases[i].url, NULL, &idx, NULL, &err), LDS_E_INVALID_ARG);
        assert_null(idx);
        assert_string_equal(err.field, "url.bucket");
        assert_ptr_equal(strstr(err.message, cases[i].says), err.message);
        assert_null(strstr(err.message, "pw"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pooled_payload_matches_exact_buffer),
        cmocka_unit_test(test_one_byte_per_read),
        cmocka_unit_test(test_callback_retry_every_other_call),
        cmocka_unit_test(test_pipe_fed_by_another_process),
        cmocka_unit_test(test_fd_read_retries_real_eintr),
        cmocka_unit_test(test_stdin),
        cmocka_unit_test(test_every_prefix_refused),
        cmocka_unit_test(test_declared_length_disagrees),
        cmocka_unit_test(test_max_payload_refused_before_renting),
        cmocka_unit_test(test_lying_length_costs_only_bytes_sent),
        cmocka_unit_test(test_zstd_with_content_size_is_pooled),
        cmocka_unit_test(test_zstd_after_skippable_frames),
        cmocka_unit_test(test_zstd_without_content_size),
        cmocka_unit_test(test_zstd_corrupt_frame),
        cmocka_unit_test(test_zstd_lying_content_size),
        cmocka_unit_test(test_zstd_claim_above_max_is_refused_from_the_frame_header),
        cmocka_unit_test(test_memory_path_never_touches_the_pool),
        cmocka_unit_test(test_cancel_returns_the_rental),
        cmocka_unit_test(test_precancelled_load_rents_nothing),
        cmocka_unit_test(test_cancel_while_a_pipe_read_waits),
        cmocka_unit_test(test_cancel_ordering_at_a_gate),
        cmocka_unit_test(test_hash_thread),
        cmocka_unit_test(test_chunked_file_every_path),
        cmocka_unit_test(test_checksum_both_ways),
        cmocka_unit_test(test_default_ownership_is_adopt),
        cmocka_unit_test(test_fd_at_an_offset_and_file),
        cmocka_unit_test(test_mapped_path_and_fallback),
        cmocka_unit_test(test_url_redact),
        cmocka_unit_test(test_url_redact_query_secrets),
        cmocka_unit_test(test_s3_url_bucket_field_messages),
        cmocka_unit_test(test_url_redact_path_params_backslashes_deep_encoding),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
