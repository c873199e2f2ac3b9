/*
 * The mapped load path (use_mmap) while the file changes underneath: truncated
 * while it is validated, truncated after the parse, key offsets rewritten in
 * place after the parser checked them. Each load runs in a forked child, so a
 * signal death shows as a failed test, not a dead test runner; test hooks stop
 * the load at the named points, so nothing here is a race.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "../format/format_internal.h"
#include "../loader/load_internal.h"
#include "lodestar.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROWS 20000
#define DIM  16

static char path[64];

static void key_of(uint64_t r, char *buf, size_t n)
{
    snprintf(buf, n, "key-%06llu", (unsigned long long)r);
}

/* Format 1.0 unless `chunk` (1.1 with that chunk size): most tests walk the 1.0 layout. */
static void write_index_chunked(const char *to, uint32_t chunk)
{
    lds_writer_options o;
    lds_writer_options_default(&o);
    o.chunk_bytes = chunk ? chunk : LDS_CHUNKS_NONE;
    o.dim = DIM;
    o.with_keys = true;
    o.unique_keys = true;
    lds_writer *w = NULL;
    assert_int_equal(lds_writer_open_path(to, &o, &w, NULL), LDS_OK);
    float v[DIM];
    for (uint64_t r = 0; r < ROWS; r++) {
        for (int d = 0; d < DIM; d++)
            v[d] = (float)(r % 97) + (float)d / 8.0f;
        char k[32];
        key_of(r, k, sizeof k);
        assert_int_equal(lds_writer_add_row(w, v, DIM, 0, k, strlen(k), NULL), LDS_OK);
    }
    assert_int_equal(lds_writer_finish(w, NULL), LDS_OK);
    lds_writer_free(w);
}

static void write_index(void)
{
    write_index_chunked(path, 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(path, sizeof path, "/tmp/lds-mapped-%ld.ldsi", (long)getpid());
    write_index();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    return 0;
}

/* File offset and width of the key offsets (format.md §4: footer, table, entries). */
static void key_offsets_at(uint64_t *at, unsigned *width, uint64_t *count)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    uint8_t foot[LDS__TAIL];
    uint64_t L = (uint64_t)st.st_size - LDS_HEADER_SIZE;
    assert_int_equal(pread(fd, foot, sizeof foot, (off_t)(st.st_size - LDS__TAIL)),
                     (ssize_t)sizeof foot);
    uint64_t T = lds__ld64(foot), tl = lds__ld64(foot + 8);
    uint8_t *table = malloc(tl);
    assert_non_null(table);
    assert_int_equal(pread(fd, table, tl, (off_t)(LDS_HEADER_SIZE + T)), (ssize_t)tl);
    uint32_t n = lds__ld32(table + 24), es = lds__ld32(table + 28);
    *width = (lds__ld32(table + 20) & LDS__TF_KEYS_OFFSETS32) ? 4 : 8;
    *count = lds__ld64(table) + 1;
    *at = 0;
    for (uint32_t i = 0; i < n; i++)
        if (lds__ld32(table + 32 + i * es) == LDS__KIND_KEYS)
            *at = LDS_HEADER_SIZE + lds__ld64(table + 32 + i * es + 8);
    assert_true(*at > 0 && *at < LDS_HEADER_SIZE + L);
    free(table);
    close(fd);
}

/* ---- hooks (run inside the child) ---------------------------------------- */

static off_t truncate_to;

static void truncate_at_mapped(int fd, const char *stage)
{
    (void)fd;
    if (strcmp(stage, "mapped") == 0 && truncate(path, truncate_to) != 0)
        _exit(90);
}

static void truncate_at_parsed(int fd, const char *stage)
{
    (void)fd;
    if (strcmp(stage, "parsed") == 0 && truncate(path, truncate_to) != 0)
        _exit(91);
}

/* Format 1.1: cut the file after its chunk table was checked, while the threads hash. */
static void truncate_at_table_checked(const char *where)
{
    if (strcmp(where, "chunk table checked") == 0 && truncate(path, truncate_to) != 0)
        _exit(92);
}

/* Every key offset but the first becomes one far past the payload. */
static void rewrite_offsets(const char *where)
{
    if (strcmp(where, "keys.offset checked") != 0)
        return;
    uint64_t at, count;
    unsigned w;
    key_offsets_at(&at, &w, &count);
    size_t n = (size_t)(count - 1) * w;
    uint8_t *junk = malloc(n);
    if (!junk)
        _exit(92);
    memset(junk, 0xF7, n);
    int fd = open(path, O_WRONLY);
    if (fd < 0 || pwrite(fd, junk, n, (off_t)(at + w)) != (ssize_t)n)
        _exit(93);
    close(fd);
    free(junk);
}

/* ---- the child ------------------------------------------------------------ */

typedef struct outcome {
    int signal; /* the child's death, 0 if it exited */
    int exit_code;
    lds_status status;
    enum lds_load_path load_path;
    char field[32];
    uint64_t offset;
    char message[256];
    char key5[32];      /* lds_index_key of row 5 after a successful load */
    uint64_t found_row; /* lds_index_find_key("key-012345") */
} outcome;

static outcome load_in_child(void (*load_hook)(int, const char *), void (*parse_hook)(const char *),
                             lds_ownership own)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        alarm(60);
        /* cmocka's handlers would catch a fault and run the remaining tests in the child. */
        signal(SIGBUS, SIG_DFL);
        signal(SIGSEGV, SIG_DFL);
        lds__load_mapped_hook = load_hook;
        lds__parse_test_hook = parse_hook;
        lds_load_options o;
        lds_load_options_default(&o);
        o.use_mmap = true;
        o.ownership = own;
        lds_load_info info;
        lds_load_info_init(&info);
        lds_error err;
        lds_error_init(&err);
        lds_index *idx = NULL;
        outcome r;
        memset(&r, 0, sizeof r);
        r.status = lds_load_path(path, &o, &idx, &info, &err);
        r.load_path = info.path;
        snprintf(r.field, sizeof r.field, "%s", err.field ? err.field : "");
        memcpy(r.message, err.message, sizeof r.message);
        r.offset = err.offset;
        r.found_row = UINT64_MAX;
        if (r.status == LDS_OK) {
            const char *k;
            size_t kl;
            if (lds_index_key(idx, 5, &k, &kl) == LDS_OK && kl < sizeof r.key5)
                memcpy(r.key5, k, kl);
            (void)lds_index_find_key(idx, "key-012345", 10, &r.found_row);
        }
        lds_index_free(idx);
        ssize_t wr = write(fds[1], &r, sizeof r);
        _exit(wr == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fds[1]);
    outcome r;
    memset(&r, 0, sizeof r);
    ssize_t got = read(fds[0], &r, sizeof r);
    close(fds[0]);
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    if (WIFSIGNALED(ws)) {
        memset(&r, 0, sizeof r);
        r.signal = WTERMSIG(ws);
    } else if (got != (ssize_t)sizeof r) {
        memset(&r, 0, sizeof r);
        r.exit_code = WEXITSTATUS(ws);
    }
    return r;
}

static void assert_no_signal(const outcome *r, const char *what)
{
    if (r->signal)
        fail_msg("%s: the load died of signal %d (%s)", what, r->signal, strsignal(r->signal));
    if (r->exit_code)
        fail_msg("%s: the child exited %d", what, r->exit_code);
}

/* ---- tests ---------------------------------------------------------------- */

/* Truncated after the mmap, before a byte is read: the parse runs into the pages
   past the new end (SIGBUS before the fix, in 25 of 40 racing runs). */
static void test_truncated_while_validated(void **state)
{
    (void)state;
    const off_t sizes[] = {4096, 100, 0};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        write_index();
        truncate_to = sizes[i];
        outcome r = load_in_child(truncate_at_mapped, NULL, LDS_OWN_ADOPT);
        assert_no_signal(&r, "truncated while validated");
        assert_int_equal(r.status, LDS_E_TRUNCATED);
        assert_int_equal(r.load_path, LDS_LOAD_MAPPED);
        assert_string_equal(r.field, "file");
        assert_non_null(strstr(r.message, path));
        assert_non_null(strstr(r.message, "shrank"));
        /* The byte it faulted on lies past the new end, and the message names it. */
        assert_true(r.offset >= (uint64_t)sizes[i]);
        char at[48];
        snprintf(at, sizeof at, "(at byte %llu)", (unsigned long long)r.offset);
        assert_non_null(strstr(r.message, at));
    }
    write_index();
}

/* Format 1.1 mapped: the parser's threads verify the chunks; a flipped byte names
   its chunk; a file cut short while the threads hash it ends the load as the 1.0
   file does (each thread reads inside its own fault window). */
static void test_chunked_mapped(void **state)
{
    (void)state;
    /* First, in children, before this process maps anything itself (the children set
       SIG_DFL, and the loader installs its handler once per process). */
    const off_t sizes[] = {4096, 300000, 100};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        write_index_chunked(path, 65536);
        truncate_to = sizes[i];
        /* Before the table is read (the calling thread faults), and after it was
           checked (the verifying threads fault, each in its own window). */
        outcome r = load_in_child(truncate_at_mapped, NULL, LDS_OWN_ADOPT);
        assert_no_signal(&r, "chunked, truncated while validated");
        assert_int_equal(r.status, LDS_E_TRUNCATED);
        write_index_chunked(path, 65536);
        r = load_in_child(NULL, truncate_at_table_checked, LDS_OWN_ADOPT);
        assert_no_signal(&r, "chunked, truncated while the chunks are hashed");
        assert_int_equal(r.status, LDS_E_TRUNCATED);
        assert_string_equal(r.field, "file");
        assert_non_null(strstr(r.message, "shrank"));
        assert_true(r.offset >= (uint64_t)sizes[i]);
    }
    write_index_chunked(path, 65536);
    for (int own = 0; own < 2; own++) {
        lds_load_options o;
        lds_load_options_default(&o);
        o.use_mmap = true;
        o.ownership = own ? LDS_OWN_COPY : LDS_OWN_ADOPT;
        lds_load_info info;
        lds_load_info_init(&info);
        lds_index *idx = NULL;
        lds_error err;
        lds_error_init(&err);
        assert_int_equal(lds_load_path(path, &o, &idx, &info, &err), LDS_OK);
        assert_int_equal(info.path, LDS_LOAD_MAPPED);
        assert_true(info.checksum_verified);
        assert_int_equal(lds_index_chunk_bytes(idx), 65536);
        assert_true(lds_index_chunk_count(idx) > 10);
        assert_int_equal(lds_index_rows(idx), ROWS);
        uint64_t row = 0;
        assert_int_equal(lds_index_find_key(idx, "key-000005", 10, &row), LDS_OK);
        assert_int_equal(row, 5);
        lds_index_free(idx);
    }
    /* A byte of chunk 7 flipped. */
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    unsigned char c;
    off_t at = LDS_HEADER_SIZE + 7 * 65536 + 1000;
    assert_int_equal(pread(fd, &c, 1, at), 1);
    c ^= 0x20;
    assert_int_equal(pwrite(fd, &c, 1, at), 1);
    close(fd);
    lds_load_options o;
    lds_load_options_default(&o);
    o.use_mmap = true;
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_load_path(path, &o, &idx, NULL, &err), LDS_E_CHECKSUM);
    assert_null(idx);
    assert_string_equal(err.field, "chunk");
    assert_int_equal(err.offset, LDS_HEADER_SIZE + 7 * 65536);
    assert_non_null(strstr(err.message, "checksum of chunk 7 (payload bytes 458752..524287)"));
    write_index();
}

/* Truncated after a successful parse: the pages the index borrows are gone, so
   the load is refused instead of returning an index whose first access dies. */
static void test_truncated_after_parse(void **state)
{
    (void)state;
    for (int own = 0; own < 2; own++) {
        write_index();
        truncate_to = 8192;
        outcome r = load_in_child(truncate_at_parsed, NULL, own ? LDS_OWN_COPY : LDS_OWN_ADOPT);
        assert_no_signal(&r, "truncated after parse");
        if (own == 0) {
            assert_int_equal(r.status, LDS_E_TRUNCATED);
            assert_non_null(strstr(r.message, "shrank"));
            assert_non_null(strstr(r.message, "to 8192 bytes"));
        } else {
            /* The copy holds every byte it needs: the file no longer matters. */
            assert_int_equal(r.status, LDS_OK);
            assert_string_equal(r.key5, "key-000005");
        }
    }
    write_index();
}

/* Key offsets rewritten in place after the parser validated them (SIGSEGV
   before the fix, in 19 of 60 racing runs): the index uses the offsets it
   checked, so the keys read back as written. */
static void test_offsets_rewritten_after_check(void **state)
{
    (void)state;
    for (int own = 0; own < 2; own++) {
        write_index();
        outcome r = load_in_child(NULL, rewrite_offsets, own ? LDS_OWN_COPY : LDS_OWN_ADOPT);
        assert_no_signal(&r, own ? "offsets rewritten (copy)" : "offsets rewritten (adopt)");
        if (r.status != LDS_OK)
            fail_msg("offsets rewritten: %s: %s", lds_status_name(r.status), r.message);
        assert_string_equal(r.key5, "key-000005");
        assert_int_equal(r.found_row, 12345);
    }
    write_index();
}

/* A fault outside a load still ends the process as before: the handler the
   loader installs passes it on to the one that was there, or to the default. */
static void test_faults_outside_a_load_pass_through(void **state)
{
    (void)state;
    write_index();
    for (int with_handler = 0; with_handler < 2; with_handler++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            alarm(60);
            /* cmocka's own handler is there: replace it with the default or with ours. */
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = with_handler ? _exit : SIG_DFL; /* _exit(SIGSEGV) */
            sigemptyset(&sa.sa_mask);
            sigaction(SIGSEGV, &sa, NULL);
            lds_load_options o;
            lds_load_options_default(&o);
            o.use_mmap = true;
            lds_index *idx = NULL;
            if (lds_load_path(path, &o, &idx, NULL, NULL) != LDS_OK)
                _exit(2);
            lds_index_free(idx);
            volatile unsigned char *ro =
                mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            ro[0] = 1; /* SIGSEGV, outside any load */
            _exit(3);
        }
        int ws = 0;
        assert_int_equal(waitpid(pid, &ws, 0), pid);
        if (with_handler) {
            assert_true(WIFEXITED(ws));
            assert_int_equal(WEXITSTATUS(ws), SIGSEGV);
        } else {
            assert_true(WIFSIGNALED(ws));
            assert_int_equal(WTERMSIG(ws), SIGSEGV);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncated_while_validated),
        cmocka_unit_test(test_truncated_after_parse),
        cmocka_unit_test(test_offsets_rewritten_after_check),
        cmocka_unit_test(test_faults_outside_a_load_pass_through),
        cmocka_unit_test(test_chunked_mapped), /* last: it maps in this process */
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
