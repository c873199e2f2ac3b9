/* LDS_IMPORT_HDF5: one 2-D float dataset of an HDF5 file, as ann-benchmarks writes them
   (datasets train, test, neighbors, distances; root attribute "distance"), read through
   libhdf5 when the build has it (meson option hdf5). libhdf5 parses the file; ADR 0023
   says what that trusts. */
#include "import_internal.h"

#include <string.h>

#if LDS_HAVE_HDF5

#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>

/* libhdf5's error-printing switch is per thread only in its thread-safe builds, and the
   library is not re-entrant in the others: every call of ours holds this lock. */
static pthread_mutex_t hdf5_lock = PTHREAD_MUTEX_INITIALIZER;

/* Bytes of the dataset read per H5Dread (a block of whole rows, at least one). */
#define HDF5_BLOCK ((size_t)1 << 20)

/* libhdf5's innermost error description, made printable, then its stack cleared. */
typedef struct h5_msg {
    char text[200];
} h5_msg;

static herr_t innermost(unsigned n, const H5E_error2_t *e, void *ctx)
{
    h5_msg *m = ctx;
    (void)n;
    if (m->text[0] || !e->desc || !e->desc[0])
        return 0; /* the first described entry only */
    size_t o = 0;
    for (const char *p = e->desc; *p && o + 1 < sizeof m->text; p++)
        m->text[o++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
    m->text[o] = '\0';
    return 0;
}

static const char *h5_error(h5_msg *m)
{
    m->text[0] = '\0';
    /* Upward: the most specific error first (where libhdf5 detected it). */
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, m);
    H5Eclear2(H5E_DEFAULT);
    if (!m->text[0])
        snprintf(m->text, sizeof m->text, "no detail from libhdf5");
    return m->text;
}

static const char *class_name(H5T_class_t c)
{
    switch (c) {
    case H5T_INTEGER:
        return "integers";
    case H5T_FLOAT:
        return "floats";
    case H5T_STRING:
        return "strings";
    case H5T_BITFIELD:
        return "bit fields";
    case H5T_OPAQUE:
        return "opaque data";
    case H5T_COMPOUND:
        return "compound records";
    case H5T_REFERENCE:
        return "references";
    case H5T_ENUM:
        return "enums";
    case H5T_VLEN:
        return "variable-length sequences";
    case H5T_ARRAY:
        return "arrays";
    default:
        return "values of an unknown class";
    }
}

/* The names of the root group's links, for a message: "a, b, c" (cut to fit). */
static void root_names(hid_t file, char *buf, size_t cap)
{
    buf[0] = '\0';
    H5G_info_t gi;
    if (H5Gget_info(file, &gi) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return;
    }
    size_t o = 0;
    for (hsize_t i = 0; i < gi.nlinks && i < 32; i++) {
        char name[64];
        ssize_t n = H5Lget_name_by_idx(file, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                                       H5P_DEFAULT);
        if (n < 0) {
            H5Eclear2(H5E_DEFAULT);
            break;
        }
        for (char *p = name; *p; p++)
            if (*p < 0x20 || *p >= 0x7f)
                *p = '?';
        int w = snprintf(buf + o, cap - o, "%s%s%s", o ? ", " : "", name,
                         (size_t)n >= sizeof name ? "..." : "");
        if (w < 0 || (size_t)w >= cap - o) {
            buf[o] = '\0';
            break;
        }
        o += (size_t)w;
    }
}

/* The metric named by the root attribute "distance", if there is one (*found false if
   not). ann-benchmarks writes it as a variable-length or fixed-length string. */
static lds_status read_distance(hid_t file, bool *found, lds_metric *metric, lds_error *err)
{
    h5_msg m;
    *found = false;
    htri_t has = H5Aexists(file, "distance");
    if (has < 0)
        return lds__imp_fail(err, LDS_E_IO, "hdf5.distance", 0, 0,
                             "libhdf5 cannot look for the attribute \"distance\": %s",
                             h5_error(&m));
    if (has == 0)
        return LDS_OK;
    lds_status st = LDS_OK;
    char text[64] = "";
    hid_t attr, type = -1, space = -1, mem = -1;
    if ((attr = H5Aopen(file, "distance", H5P_DEFAULT)) < 0 || (type = H5Aget_type(attr)) < 0 ||
        (space = H5Aget_space(attr)) < 0) {
        st = lds__imp_fail(err, LDS_E_IO, "hdf5.distance", 0, 0,
                           "libhdf5 cannot open the attribute \"distance\": %s", h5_error(&m));
        goto out;
    }
    if (H5Tget_class(type) != H5T_STRING || H5Sget_simple_extent_npoints(space) != 1) {
        st = lds__imp_fail(err, LDS_E_UNSUPPORTED, "hdf5.distance", 0, 0,
                           "the attribute \"distance\" is not one string (it holds %s); give "
                           "the metric",
                           class_name(H5Tget_class(type)));
        goto out;
    }
    htri_t var = -1;
    if ((mem = H5Tcopy(H5T_C_S1)) < 0 || (var = H5Tis_variable_str(type)) < 0) {
        st = lds__imp_fail(err, LDS_E_IO, "hdf5.distance", 0, 0,
                           "libhdf5 cannot read the attribute \"distance\": %s", h5_error(&m));
        goto out;
    }
    /* The same character set as stored: libhdf5 converts no ASCII to UTF-8 or back. */
    H5T_cset_t cset = H5Tget_cset(type);
    if (cset < 0 || H5Tset_cset(mem, cset) < 0) {
        st = lds__imp_fail(err, LDS_E_IO, "hdf5.distance", 0, 0,
                           "libhdf5 cannot read the attribute \"distance\": %s", h5_error(&m));
        goto out;
    }
    if (var) {
        char *s = NULL;
        if (H5Tset_size(mem, H5T_VARIABLE) < 0 || H5Aread(attr, mem, &s) < 0) {
            st = lds__imp_fail(err, LDS_E_IO, "hdf5.distance", 0, 0,
                               "libhdf5 cannot read the attribute \"distance\": %s", h5_error(&m));
            goto out;
        }
        if (s)
            snprintf(text, sizeof text, "%s", s);
        H5free_memory(s);
    } else {
        size_t n = H5Tget_size(type);
        if (n == 0 || n >= sizeof text) {
            st = lds__imp_fail(err, LDS_E_UNSUPPORTED, "hdf5.distance", 0, 0,
                               "the attribute \"distance\" is a string of %zu bytes; no metric "
                               "has such a name, give the metric",
                               n);
            goto out;
        }
        if (H5Tset_size(mem, sizeof text) < 0 || H5Tset_strpad(mem, H5T_STR_NULLTERM) < 0 ||
            H5Aread(attr, mem, text) < 0) {
            st = lds__imp_fail(err, LDS_E_IO, "hdf5.distance", 0, 0,
                               "libhdf5 cannot read the attribute \"distance\": %s", h5_error(&m));
            goto out;
        }
        text[sizeof text - 1] = '\0';
    }
    if (strcmp(text, "angular") == 0 || strcmp(text, "cosine") == 0) {
        *metric = LDS_METRIC_COSINE;
    } else if (strcmp(text, "euclidean") == 0 || strcmp(text, "l2") == 0) {
        *metric = LDS_METRIC_L2;
    } else if (strcmp(text, "dot") == 0 || strcmp(text, "ip") == 0) {
        *metric = LDS_METRIC_DOT;
    } else {
        char shown[4 * LDS__IMP_SHOWN + 8];
        st = lds__imp_fail(err, LDS_E_UNSUPPORTED, "hdf5.distance", 0, 0,
                           "the attribute distance = \"%s\" names no lodestar metric (angular, "
                           "euclidean, dot or ip are known); give the metric",
                           lds__imp_quote(shown, sizeof shown, text, strlen(text)));
        goto out;
    }
    *found = true;
out:
    if (mem >= 0)
        H5Tclose(mem);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (attr >= 0)
        H5Aclose(attr);
    return st;
}

/* Everything that holds an HDF5 identifier, closed in one place. */
typedef struct h5_state {
    hid_t file, ds, type, space, dcpl, mspace;
    unsigned char *block;
    float *vec;
} h5_state;

/* A chunked, filtered dataset is decoded a whole chunk at a time, and libhdf5 keeps decoded
   chunks in a per-dataset cache of 1 MiB by default: a larger chunk would be decoded again
   for every block of rows read from it (70 times the work for chunks of 50 MB). So the work
   is bounded first: every chunk the extent touches, at its full size (a chunk may be far
   larger than the extent), must fit max_decoded_bytes, checked before any is decoded; then
   the dataset is reopened with a cache that holds one row of chunks (the chunks across the
   columns), and blocks of rows either hold whole rows of chunks or stay inside one, so each
   chunk is decoded once. *block_rows is adjusted; *chunk_rows is the chunk's row count (0
   when the dataset is not chunked and filtered). */
static lds_status plan_chunks(h5_state *h, const char *name, const char *qname, int filters,
                              uint64_t rows, uint64_t dim, size_t esize, uint64_t max_decoded,
                              size_t *block_rows, uint64_t *chunk_rows, lds_error *err)
{
    h5_msg m;
    *chunk_rows = 0;
    if (filters <= 0 || H5Pget_layout(h->dcpl) != H5D_CHUNKED || rows == 0)
        return LDS_OK;
    hsize_t cd[2] = {0, 0};
    if (H5Pget_chunk(h->dcpl, 2, cd) != 2 || cd[0] == 0 || cd[1] == 0)
        return lds__imp_fail(err, LDS_E_IO, "hdf5.chunk", 0, 0,
                             "libhdf5 cannot give the chunk shape of dataset \"%s\": %s", qname,
                             h5_error(&m));
    uint64_t down = (rows - 1) / cd[0] + 1, across = (dim - 1) / cd[1] + 1;
    uint64_t chunk_bytes, row_of_chunks, work;
    if (__builtin_mul_overflow((uint64_t)cd[0], (uint64_t)cd[1], &chunk_bytes) ||
        __builtin_mul_overflow(chunk_bytes, (uint64_t)esize, &chunk_bytes) ||
        __builtin_mul_overflow(chunk_bytes, across, &row_of_chunks) ||
        __builtin_mul_overflow(row_of_chunks, down, &work) || work > max_decoded)
        return lds__imp_fail(err, LDS_E_LIMIT, "hdf5.chunk", 0, 0,
                             "dataset \"%s\" is stored in chunks of %llu x %llu: reading its "
                             "%llu x %llu elements decodes %llu chunks of %llu bytes, above "
                             "max_decoded_bytes = %llu",
                             qname, (unsigned long long)cd[0], (unsigned long long)cd[1],
                             (unsigned long long)rows, (unsigned long long)dim,
                             (unsigned long long)(down * across), (unsigned long long)chunk_bytes,
                             (unsigned long long)max_decoded);
    *chunk_rows = cd[0];
    if (cd[0] <= *block_rows) {
        *block_rows -= *block_rows % cd[0]; /* whole rows of chunks: each decoded once */
        return LDS_OK;
    }
    /* Slots for the chunks of one row of chunks, whose indices are consecutive. */
    size_t slots = across > 1000000 ? 1000003 : (size_t)across * 2 + 101;
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (dapl < 0 || H5Pset_chunk_cache(dapl, slots, (size_t)row_of_chunks, 1.0) < 0) {
        if (dapl >= 0)
            H5Pclose(dapl);
        return lds__imp_fail(err, LDS_E_IO, "hdf5.chunk", 0, 0,
                             "libhdf5 cannot size the chunk cache of dataset \"%s\": %s", qname,
                             h5_error(&m));
    }
    H5Dclose(h->ds);
    h->ds = H5Dopen2(h->file, name, dapl);
    H5Pclose(dapl);
    if (h->ds < 0)
        return lds__imp_fail(err, LDS_E_IO, "hdf5", 0, 0, "libhdf5 cannot open dataset \"%s\": %s",
                             qname, h5_error(&m));
    return LDS_OK;
}

/* Opens the file at c->input_path with libhdf5 into h->file and proves it is the
   file the importer opened and checked first. */
static lds_status open_file(lds__imp_ctx *c, h5_state *h, lds_error *err)
{
    const char *path = c->input_path;
    h5_msg m;
    htri_t is = H5Fis_hdf5(path);
    if (is == 0)
        return lds__imp_fail(err, LDS_E_PARSE, "hdf5", 0, 0,
                             "not an HDF5 file (no HDF5 signature at byte 0, 512, 1024, ...)");
    if (is < 0)
        return lds__imp_fail(err, LDS_E_IO, "hdf5", 0, 0, "libhdf5 cannot read the file: %s",
                             h5_error(&m));
    /* Closing the file closes whatever is still open in it, even after an error. */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0)
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    h->file = H5Fopen(path, H5F_ACC_RDONLY, fapl >= 0 ? fapl : H5P_DEFAULT);
    /* Every libhdf5 call clears its error stack: read it before the next one. */
    if (h->file < 0)
        h5_error(&m);
    if (fapl >= 0)
        H5Pclose(fapl);
    if (h->file < 0)
        return lds__imp_fail(err, LDS_E_IO, "hdf5", 0, 0, "libhdf5 cannot open the file: %s",
                             m.text);
    /* libhdf5 opened the path again: it must still be the file checked and opened first. */
    int *fdp = NULL;
    struct stat fst;
    if (H5Fget_vfd_handle(h->file, H5P_DEFAULT, (void **)&fdp) < 0 || !fdp ||
        fstat(*fdp, &fst) != 0 || fst.st_dev != c->in.dev || fst.st_ino != c->in.ino) {
        H5Eclear2(H5E_DEFAULT);
        errno = ESTALE;
        return lds__imp_fail(err, LDS_E_IO, "hdf5", 0, 0,
                             "the file libhdf5 opened is not the one opened first (it was "
                             "replaced meanwhile)");
    }
    return LDS_OK;
}

/* Opens dataset `name` (quoted for messages as `qname`) into h->ds, with its type,
   space and creation properties; a missing name lists what the root holds. */
static lds_status open_dataset(h5_state *h, const char *name, const char *qname, lds_error *err)
{
    h5_msg m;
    htri_t exists = H5Lexists(h->file, name, H5P_DEFAULT);
    if (exists < 0 && !strchr(name, '/'))
        return lds__imp_fail(err, LDS_E_IO, "hdf5", 0, 0,
                             "libhdf5 cannot look for dataset \"%s\": %s", qname, h5_error(&m));
    if (exists <= 0) {
        /* (A path whose group is missing is an error to libhdf5, not "no".) */
        H5Eclear2(H5E_DEFAULT);
        char names[256];
        root_names(h->file, names, sizeof names);
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.dataset", 0, 0,
                             "no dataset \"%s\" in the file (its root holds: %s)", qname,
                             names[0] ? names : "nothing");
    }
    h->ds = H5Dopen2(h->file, name, H5P_DEFAULT);
    if (h->ds < 0) {
        h5_error(&m);
        /* A group is the caller's mistake; anything else is the file's. */
        hid_t g = H5Gopen2(h->file, name, H5P_DEFAULT);
        if (g >= 0) {
            H5Gclose(g);
            return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.dataset", 0, 0,
                                 "\"%s\" is a group, not a dataset", qname);
        }
        H5Eclear2(H5E_DEFAULT);
        return lds__imp_fail(err, LDS_E_IO, "hdf5", 0, 0, "libhdf5 cannot open dataset \"%s\": %s",
                             qname, m.text);
    }
    if ((h->type = H5Dget_type(h->ds)) < 0 || (h->space = H5Dget_space(h->ds)) < 0 ||
        (h->dcpl = H5Dget_create_plist(h->ds)) < 0)
        return lds__imp_fail(err, LDS_E_IO, "hdf5", 0, 0,
                             "libhdf5 cannot describe dataset \"%s\": %s", qname, h5_error(&m));
    return LDS_OK;
}

/* A dataset's element type and shape, as check_shape proved them. */
typedef struct h5_shape {
    uint64_t rows, dim;
    size_t esize;         /* 4 or 8 */
    uint64_t bytes;       /* rows x dim x esize */
    uint64_t max_decoded; /* the bound on decoded bytes in force */
    int filters;          /* the dataset's filters (compression) */
} h5_shape;

/* The element type, rank, shape, limits and stored size of the open dataset,
   all checked before a row is read. */
static lds_status check_shape(const lds_import_options *o, const h5_state *h, const char *qname,
                              h5_shape *sh, lds_error *err)
{
    H5T_class_t cls = H5Tget_class(h->type);
    size_t esize = sh->esize = H5Tget_size(h->type);
    if (cls != H5T_FLOAT || (esize != 4 && esize != 8))
        return lds__imp_fail(err, LDS_E_UNSUPPORTED, "hdf5.dtype", 0, 0,
                             "dataset \"%s\" holds %s of %zu bytes; lodestar reads 4- and "
                             "8-byte floats",
                             qname, class_name(cls), esize);
    int rank = H5Sget_simple_extent_ndims(h->space);
    hsize_t dims[2] = {0, 0};
    if (rank != 2 || H5Sget_simple_extent_dims(h->space, dims, NULL) != 2) {
        H5Eclear2(H5E_DEFAULT);
        return lds__imp_fail(err, LDS_E_UNSUPPORTED, "hdf5.shape", 0, 0,
                             "dataset \"%s\" has rank %d; lodestar reads a 2-D dataset (N rows "
                             "x D columns)",
                             qname, rank);
    }
    uint64_t rows = sh->rows = dims[0], dim = sh->dim = dims[1];
    if (dim == 0)
        return lds__imp_fail(err, LDS_E_BAD_VALUE, "hdf5.shape", 0, 0,
                             "dataset \"%s\" has shape (%llu, 0): rows of no elements", qname,
                             (unsigned long long)rows);
    if (dim > o->limits.max_dim)
        return lds__imp_fail(err, LDS_E_LIMIT, "hdf5.shape", 0, 0,
                             "dataset \"%s\" has D = %llu, above max_dim = %llu", qname,
                             (unsigned long long)dim, (unsigned long long)o->limits.max_dim);
    if (rows > o->limits.max_rows)
        return lds__imp_fail(err, LDS_E_LIMIT, "hdf5.shape", 0, 0,
                             "dataset \"%s\" has N = %llu, above max_rows = %llu", qname,
                             (unsigned long long)rows, (unsigned long long)o->limits.max_rows);
    uint64_t bytes;
    if (__builtin_mul_overflow(rows, dim * esize, &bytes))
        return lds__imp_fail(err, LDS_E_OVERFLOW, "hdf5.shape", 0, 0,
                             "dataset \"%s\": %llu x %llu elements overflow 64 bits", qname,
                             (unsigned long long)rows, (unsigned long long)dim);
    sh->bytes = bytes;
    /* A compressed dataset can declare far more than the file holds: the bound on
       decoded bytes is what stops a small file from asking for terabytes. */
    uint64_t max_decoded = sh->max_decoded =
        o->max_decoded_bytes ? o->max_decoded_bytes : LDS_IMPORT_DEFAULT_MAX_DECODED;
    if (bytes > max_decoded)
        return lds__imp_fail(err, LDS_E_LIMIT, "hdf5.shape", 0, 0,
                             "dataset \"%s\" declares %llu x %llu x %zu = %llu bytes, above "
                             "max_decoded_bytes = %llu",
                             qname, (unsigned long long)rows, (unsigned long long)dim, esize,
                             (unsigned long long)bytes, (unsigned long long)max_decoded);
    /* Without filters the stored bytes are the data itself: fewer than the extent
       declares would read as fill values where chunks are missing. */
    sh->filters = H5Pget_nfilters(h->dcpl);
    if (sh->filters == 0) {
        hsize_t stored = H5Dget_storage_size(h->ds);
        if (stored < bytes)
            return lds__imp_fail(err, LDS_E_TRUNCATED, "hdf5.shape", 0, 0,
                                 "dataset \"%s\" stores %llu bytes, fewer than the %llu its "
                                 "shape (%llu, %llu) declares",
                                 qname, (unsigned long long)stored, (unsigned long long)bytes,
                                 (unsigned long long)rows, (unsigned long long)dim);
    }
    return LDS_OK;
}

/* Reads the dataset in blocks of block_rows rows (each inside one row of chunks
   of chunk_rows rows, when chunked) and hands every row to the sink; float64
   elements are narrowed, each checked to fit binary32. */
static lds_status read_rows(lds__imp_ctx *c, h5_state *h, const char *qname, const h5_shape *sh,
                            size_t block_rows, uint64_t chunk_rows, lds_error *err)
{
    lds__imp_sink *s = &c->sink;
    bool with_keys = c->keys.fd >= 0;
    uint64_t rows = sh->rows, dim = sh->dim;
    size_t esize = sh->esize, row_bytes = (size_t)dim * esize;
    h5_msg m;
    lds_status st;
    hid_t memtype = esize == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
    for (uint64_t r = 0, nb = 0; r < rows; r += nb) {
        nb = rows - r < block_rows ? rows - r : block_rows;
        /* A block stays inside one row of chunks: the cache holds that row (plan_chunks). */
        if (chunk_rows > block_rows && nb > chunk_rows - r % chunk_rows)
            nb = chunk_rows - r % chunk_rows;
        hsize_t start[2] = {r, 0}, count[2] = {nb, dim};
        if (h->mspace >= 0)
            H5Sclose(h->mspace);
        h->mspace = H5Screate_simple(2, count, NULL);
        if (h->mspace < 0 ||
            H5Sselect_hyperslab(h->space, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
            H5Dread(h->ds, memtype, h->mspace, h->space, H5P_DEFAULT, h->block) < 0)
            return lds__imp_fail(err, LDS_E_IO, "row", r * row_bytes, r + 1,
                                 "row %llu (byte %llu of dataset \"%s\"): libhdf5 cannot read "
                                 "rows %llu..%llu: %s",
                                 (unsigned long long)r, (unsigned long long)(r * row_bytes), qname,
                                 (unsigned long long)r, (unsigned long long)(r + nb - 1),
                                 h5_error(&m));
        for (hsize_t j = 0; j < nb; j++) {
            uint64_t row = r + j, at = row * row_bytes;
            const float *vec;
            if (esize == 4) {
                vec = (const float *)(h->block + j * row_bytes);
            } else {
                const double *d = (const double *)(h->block + j * row_bytes);
                for (size_t k = 0; k < (size_t)dim; k++) {
                    double v = d[k];
                    if (!isfinite(v) || fabs(v) >= 0x1.ffffffp127)
                        return lds__imp_fail(
                            err, LDS_E_BAD_VALUE, "row", at + 8 * k, row + 1,
                            "row %llu (byte %llu of dataset \"%s\"): element %zu is %g, not a "
                            "finite binary32",
                            (unsigned long long)row, (unsigned long long)(at + 8 * k), qname, k, v);
                    h->vec[k] = lds__imp_narrow(s, v);
                }
                vec = h->vec;
            }
            const char *key = NULL;
            size_t klen = 0;
            uint64_t key_off = at;
            if (with_keys) {
                key_off = lds__imp_reader_offset(&c->keys);
                if ((st = lds__imp_keys_next(c, row, &key, &klen, err)) != LDS_OK)
                    return st;
            }
            if ((st = lds__imp_sink_row(s, vec, key, klen, key_off, err)) != LDS_OK)
                return st;
        }
    }
    return LDS_OK;
}

static lds_status read_dataset(lds__imp_ctx *c, const char *name, h5_state *h, lds_error *err)
{
    const lds_import_options *o = c->opts;
    lds__imp_sink *s = &c->sink;
    char shown[4 * LDS__IMP_SHOWN + 8];
    const char *qname = lds__imp_quote(shown, sizeof shown, name, strlen(name));
    h5_shape sh;
    memset(&sh, 0, sizeof sh); /* gcc -O3 cannot prove check_shape sets it */
    lds_status st;
    if ((st = open_file(c, h, err)) != LDS_OK ||
        (st = open_dataset(h, name, qname, err)) != LDS_OK ||
        (st = check_shape(o, h, qname, &sh, err)) != LDS_OK)
        return st;
    uint64_t rows = sh.rows, dim = sh.dim;
    size_t row_bytes = (size_t)dim * sh.esize;
    size_t block_rows = HDF5_BLOCK / row_bytes;
    if (block_rows == 0)
        block_rows = 1;
    uint64_t chunk_rows = 0;
    if ((st = plan_chunks(h, name, qname, sh.filters, rows, dim, sh.esize, sh.max_decoded,
                          &block_rows, &chunk_rows, err)) != LDS_OK)
        return st;
    bool found = false;
    lds_metric metric = LDS_METRIC_COSINE;
    if (o->metric_from_input) {
        st = read_distance(h->file, &found, &metric, err);
        if (st != LDS_OK)
            return st;
        if (found) {
            s->metric_set = true;
            s->metric = metric;
        }
    }
    bool with_keys = c->keys.fd >= 0;
    s->line_field = with_keys ? "keys_path" : "row";
    s->line_base = 1;
    if (with_keys) {
        uint64_t lines;
        if ((st = lds__imp_keys_count(c, &lines, err)) != LDS_OK)
            return st;
        if (lines != rows)
            return lds__imp_fail(err, LDS_E_LENGTH_MISMATCH, "keys_path", 0, 0,
                                 "the keys file has %llu lines but dataset \"%s\" has %llu rows",
                                 (unsigned long long)lines, qname, (unsigned long long)rows);
    }
    if (block_rows > rows)
        block_rows = (size_t)rows;
    h->block = malloc(block_rows ? block_rows * row_bytes : 1);
    h->vec = malloc((size_t)dim * sizeof *h->vec);
    if (!h->block || !h->vec)
        return lds__imp_fail(err, LDS_E_NOMEM, "row", 0, 1, "out of memory (a block of rows)");
    if ((st = lds__imp_sink_open(s, (uint32_t)dim, with_keys, err)) != LDS_OK)
        return st;
    return read_rows(c, h, qname, &sh, block_rows, chunk_rows, err);
}

lds_status lds__import_hdf5(lds__imp_ctx *c, lds_error *err)
{
    const char *name = c->opts->dataset ? c->opts->dataset : "train";
    if (c->in.codec != LDS__CODEC_NONE)
        return lds__imp_fail(err, LDS_E_UNSUPPORTED, "hdf5", 0, 0,
                             "the input is %s-compressed; libhdf5 reads the HDF5 file itself "
                             "(its datasets may be compressed inside it): decompress it first",
                             lds__imp_codec_name(c->in.codec));
    if (c->in.file_size == UINT64_MAX)
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "input_path", 0, 0,
                             "HDF5 input must be a regular file (libhdf5 seeks in it), not a "
                             "pipe or standard input");
    pthread_mutex_lock(&hdf5_lock);
    H5E_auto2_t old_func = NULL;
    void *old_data = NULL;
    /* libhdf5 prints its error stack to stderr by default: silenced for our calls, its
       errors come back in our messages, and the caller's setting is restored. */
    H5Eget_auto2(H5E_DEFAULT, &old_func, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    h5_state h = {-1, -1, -1, -1, -1, -1, NULL, NULL};
    lds_status st = read_dataset(c, name, &h, err);
    if (h.mspace >= 0)
        H5Sclose(h.mspace);
    if (h.dcpl >= 0)
        H5Pclose(h.dcpl);
    if (h.space >= 0)
        H5Sclose(h.space);
    if (h.type >= 0)
        H5Tclose(h.type);
    if (h.ds >= 0)
        H5Dclose(h.ds);
    if (h.file >= 0)
        H5Fclose(h.file);
    H5Eclear2(H5E_DEFAULT);
    H5Eset_auto2(H5E_DEFAULT, old_func, old_data);
    pthread_mutex_unlock(&hdf5_lock);
    free(h.block);
    free(h.vec);
    return st;
}

#else /* !LDS_HAVE_HDF5 */

lds_status lds__import_hdf5(lds__imp_ctx *c, lds_error *err)
{
    (void)c;
    return lds__imp_fail(err, LDS_E_UNSUPPORTED, "hdf5", 0, 0,
                         "this lodestar was built without HDF5 support (libhdf5; meson "
                         "option -Dhdf5=enabled), so HDF5 input cannot be read");
}

#endif
