/* HDF5 import and libhdf5's chunk cache (issue 24 item 4): a chunked, filtered dataset is
   decoded a whole chunk at a time, so the importer must decode each chunk once however
   large it is, and must refuse before decoding when the chunks the extent touches exceed
   max_decoded_bytes. The files are written here with a pass-through filter that counts its
   decodes (HDF5 sets filter ids 256-511 aside for testing), registered in this process,
   where lds_import_file's libhdf5 runs it too: the count is the work, exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hdf5.h>
#include <unistd.h>

#include "lodestar.h"

#define COUNTING_FILTER 256

static unsigned long decodes;
static char tmpdir[64];
static char h5_path[128], out_path[128];

static size_t counting(unsigned int flags, size_t nparams, const unsigned int params[],
                       size_t nbytes, size_t *buf_size, void **buf)
{
    (void)nparams;
    (void)params;
    (void)buf_size;
    (void)buf;
    if (flags & H5Z_FLAG_REVERSE)
        decodes++;
    return nbytes;
}

static const H5Z_class2_t counting_class = {
    H5Z_CLASS_T_VERS, COUNTING_FILTER, 1, 1, "lodestar test: counts decodes", NULL, NULL, counting,
};

static float value(uint64_t r, uint64_t k)
{
    return (float)((r * 131 + k * 7) % 1000) / 8.0f - 60.0f;
}

/* Writes dataset "train" of rows x dim float32 in chunks of c0 x c1 through the counting
   filter; `maxrows` 0: fixed extent, else H5S_UNLIMITED rows. */
static void write_file(hsize_t rows, hsize_t dim, hsize_t c0, hsize_t c1, bool unlimited)
{
    hsize_t dims[2] = {rows, dim}, maxdims[2] = {unlimited ? H5S_UNLIMITED : rows, dim};
    hsize_t chunk[2] = {c0, c1};
    float *data = malloc((size_t)(rows * dim) * sizeof *data);
    assert_non_null(data);
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t k = 0; k < dim; k++)
            data[r * dim + k] = value(r, k);
    hid_t file = H5Fcreate(h5_path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(2, dims, maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    assert_true(file >= 0 && space >= 0 && dcpl >= 0);
    assert_true(H5Pset_chunk(dcpl, 2, chunk) >= 0);
    assert_true(H5Pset_filter(dcpl, COUNTING_FILTER, H5Z_FLAG_MANDATORY, 0, NULL) >= 0);
    hid_t ds = H5Dcreate2(file, "train", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    assert_true(ds >= 0);
    assert_true(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    assert_true(H5Fclose(file) >= 0);
    free(data);
}

/* Imports the file; returns the status and leaves the decode count in `decodes`. */
static lds_status import(uint64_t max_decoded, lds_error *err)
{
    lds_import_options o;
    lds_import_options_default(&o);
    o.format = LDS_IMPORT_HDF5;
    o.max_decoded_bytes = max_decoded;
    lds_import_result res = {.size = sizeof res};
    lds_error_init(err);
    unlink(out_path);
    decodes = 0;
    return lds_import_file(h5_path, out_path, &o, &res, err);
}

/* The index at out_path holds value(r, k) in every row. */
static void check_values(uint64_t rows, uint64_t dim)
{
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    if (lds_load_path(out_path, NULL, &idx, NULL, &err) != LDS_OK)
        fail_msg("load: %s", err.message);
    assert_int_equal(lds_index_rows(idx), rows);
    assert_int_equal(lds_index_dim(idx), dim);
    float *v = malloc((size_t)dim * sizeof *v);
    assert_non_null(v);
    for (uint64_t r = 0; r < rows; r += rows / 7 + 1)
        for (uint64_t k = 0; k < dim; k++) {
            assert_int_equal(lds_index_row_f32(idx, r, v, (size_t)dim), LDS_OK);
            if (v[k] != value(r, k))
                fail_msg("row %llu element %llu: %g, want %g", (unsigned long long)r,
                         (unsigned long long)k, (double)v[k], (double)value(r, k));
        }
    free(v);
    lds_index_free(idx);
}

static void expect_decodes(hsize_t rows, hsize_t dim, hsize_t c0, hsize_t c1, unsigned long want)
{
    write_file(rows, dim, c0, c1, false);
    lds_error err;
    lds_status st = import(0, &err);
    if (st != LDS_OK)
        fail_msg("import: %s: %s", lds_status_name(st), err.message);
    if (decodes != want)
        fail_msg("%llu x %llu in chunks of %llu x %llu: %lu chunk decodes, want %lu (one per "
                 "chunk)",
                 (unsigned long long)rows, (unsigned long long)dim, (unsigned long long)c0,
                 (unsigned long long)c1, decodes, want);
    check_values(rows, dim);
}

/* Chunks of 2.5 MiB, above libhdf5's 1 MiB cache: read in 1 MiB blocks of rows they were
   decoded once per block that touched them (6 decodes for 2 chunks). */
static void test_big_chunks_decoded_once(void **state)
{
    (void)state;
    expect_decodes(20000, 64, 10000, 64, 2);
}

/* Two chunks across the columns, each under 1 MiB but not both: every block read
   alternated between them, evicting one for the other. */
static void test_chunks_across_decoded_once(void **state)
{
    (void)state;
    expect_decodes(20000, 64, 5000, 32, 8);
}

/* Small chunks and a partial last chunk row: still once each. */
static void test_small_chunks_decoded_once(void **state)
{
    (void)state;
    expect_decodes(20001, 64, 100, 64, 201);
    expect_decodes(3000, 100, 2999, 7, 2 * 15);
}

/* A chunk far larger than the extent (an extendible dataset): reading 4 rows decodes 32 MiB.
   Refused before any decode when that is above max_decoded_bytes, read otherwise. */
static void test_chunk_work_bounded(void **state)
{
    (void)state;
    write_file(4, 8, (hsize_t)1 << 20, 8, true);
    lds_error err;
    assert_int_equal(import((uint64_t)16 << 20, &err), LDS_E_LIMIT);
    assert_string_equal(err.field, "hdf5.chunk");
    if (!strstr(err.message, "decodes 1 chunks of 33554432 bytes, above max_decoded_bytes = "
                             "16777216"))
        fail_msg("message: %s", err.message);
    assert_int_equal(decodes, 0);
    assert_int_equal(access(out_path, F_OK), -1);
    assert_int_equal(import((uint64_t)64 << 20, &err), LDS_OK);
    assert_int_equal(decodes, 1);
    check_values(4, 8);
}

static int setup(void **state)
{
    (void)state;
    strcpy(tmpdir, "/tmp/lds-hdf5-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(h5_path, sizeof h5_path, "%s/chunks.h5", tmpdir);
    snprintf(out_path, sizeof out_path, "%s/out.ldsi", tmpdir);
    return H5Zregister(&counting_class) < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(h5_path);
    unlink(out_path);
    rmdir(tmpdir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_big_chunks_decoded_once),
        cmocka_unit_test(test_chunks_across_decoded_once),
        cmocka_unit_test(test_small_chunks_decoded_once),
        cmocka_unit_test(test_chunk_work_bounded),
    };
    return cmocka_run_group_tests_name("import-hdf5", tests, setup, teardown);
}
