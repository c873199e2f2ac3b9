/* The generated reference index the load benchmarks read. */
#include "bench.h"

#include "lodestar.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A reused file must still parse and have the asked-for shape. */
static bool usable(const char *path, uint64_t rows, uint32_t dim)
{
    lds_index *idx = NULL;
    lds_load_options lo;
    lds_load_options_default(&lo);
    lo.use_mmap = true;
    if (lds_load_path(path, &lo, &idx, NULL, NULL) != LDS_OK)
        return false;
    bool ok = lds_index_rows(idx) == rows && lds_index_dim(idx) == dim;
    lds_index_free(idx);
    return ok;
}

int bench_write_index(const char *path, uint64_t rows, uint32_t dim, bool with_keys)
{
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = dim;
    wo.dtype = LDS_DTYPE_F32;
    wo.metric = LDS_METRIC_COSINE;
    wo.with_keys = with_keys;
    wo.unique_keys = with_keys;
    lds_writer *w = NULL;
    lds_error err;
    lds_error_init(&err);
    float *vec = malloc((size_t)dim * sizeof *vec);
    if (!vec)
        return -1;
    lds_status st = lds_writer_open_path(path, &wo, &w, &err);
    uint64_t state = 0x9E3779B97F4A7C15u;
    for (uint64_t r = 0; st == LDS_OK && r < rows; r++) {
        for (uint32_t d = 0; d < dim; d++) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            vec[d] = (float)((double)(state >> 11) / 9007199254740992.0 - 0.5);
        }
        char key[32];
        int kl = with_keys ? snprintf(key, sizeof key, "word%llu", (unsigned long long)r) : 0;
        st = lds_writer_add_row(w, vec, dim, r, with_keys ? key : NULL, (size_t)kl, &err);
    }
    if (st == LDS_OK)
        st = lds_writer_set_meta(w, "model", "lodestar-bench reference", &err);
    if (st == LDS_OK)
        st = lds_writer_finish(w, &err);
    lds_writer_free(w);
    free(vec);
    if (st != LDS_OK) {
        fprintf(stderr, "lodestar-bench: writing %s failed: %s (%s)\n", path, lds_status_name(st),
                err.message);
        return -1;
    }
    return 0;
}

/* Rewrites the index `src` as a packed format 1.0 file `dst` (no chunk table, sections at
 * align64), row by row through the library's writer: the same vectors (f32 sources are
 * copied exactly), ids, keys and metadata. For a chunk-aligned (1.2) source, whose section
 * offsets only a chunked header explains (docs/format.md §4.4), before it is stripped to an
 * unknown length. Returns 0, or -1 with a message on stderr. */
static int write_packed_1_0(const char *src, const char *dst)
{
    lds_load_options lo;
    lds_load_options_default(&lo);
    lds_index *idx = NULL;
    lds_writer *w = NULL;
    lds_error err;
    lds_error_init(&err);
    float *vec = NULL;
    lds_status st = lds_load_path(src, &lo, &idx, NULL, &err);
    if (st == LDS_OK) {
        lds_writer_options wo;
        lds_writer_options_default(&wo);
        wo.dim = lds_index_dim(idx);
        wo.dtype = lds_index_dtype(idx);
        wo.metric = lds_index_metric(idx);
        wo.i8_scale = lds_index_i8_scale(idx);
        wo.with_ids = lds_index_has_ids(idx);
        wo.with_keys = lds_index_has_keys(idx);
        wo.unique_keys = wo.with_keys && lds_index_keys_unique(idx);
        wo.chunk_bytes = LDS_CHUNKS_NONE;
        wo.layout = LDS_LAYOUT_PACKED;
        vec = malloc((size_t)wo.dim * sizeof *vec);
        st = vec ? lds_writer_open_path(dst, &wo, &w, &err) : LDS_E_NOMEM;
        for (uint64_t r = 0; st == LDS_OK && r < lds_index_rows(idx); r++) {
            uint64_t id = 0;
            const char *key = NULL;
            size_t kl = 0;
            st = lds_index_row_f32(idx, r, vec, wo.dim);
            if (st == LDS_OK && wo.with_ids)
                st = lds_index_id(idx, r, &id);
            if (st == LDS_OK && wo.with_keys)
                st = lds_index_key(idx, r, &key, &kl);
            if (st == LDS_OK)
                st = lds_writer_add_row(w, vec, wo.dim, id, key, kl, &err);
        }
        for (size_t i = 0; st == LDS_OK && i < lds_index_meta_count(idx); i++) {
            const char *k = NULL, *v = NULL;
            st = lds_index_meta_at(idx, i, &k, &v);
            if (st == LDS_OK)
                st = lds_writer_set_meta(w, k, v, &err);
            if (st == LDS_E_INVALID_ARG) /* a key the writer writes from its options ("metric") */
                st = LDS_OK;
        }
        if (st == LDS_OK)
            st = lds_writer_finish(w, &err);
    }
    lds_writer_free(w);
    lds_index_free(idx);
    free(vec);
    if (st != LDS_OK) {
        fprintf(stderr, "lodestar-bench: rewriting %s as a packed 1.0 file failed: %s (%s)\n", src,
                lds_status_name(st), err.message);
        return -1;
    }
    return 0;
}

/* Copies `src` to `dst` with the header's declared length replaced by "unknown"; of a
 * format 1.1 file, the 1.0 payload only (a header of unknown length cannot name a chunk
 * table: docs/format.md §2.5). */
static int write_unknown_length(const char *src, const char *dst)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", dst);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = -1;
    if (in < 0 || out < 0)
        goto done;
    static unsigned char buf[1 << 20];
    ssize_t n;
    bool first = true;
    /* A chunk-aligned (1.2) source: its packed 1.0 rewrite is what is stripped. */
    n = pread(in, buf, LDS_HEADER_SIZE, 0);
    lds_header h0;
    if (n == LDS_HEADER_SIZE && lds_header_decode(buf, (size_t)n, &h0, NULL) == LDS_OK &&
        (h0.flags & LDS_HEADER_CHUNK_ALIGNED)) {
        char packed[4300];
        snprintf(packed, sizeof packed, "%s.packed", dst);
        close(in);
        in = -1;
        if (write_packed_1_0(src, packed) != 0)
            goto done;
        in = open(packed, O_RDONLY | O_CLOEXEC);
        (void)unlink(packed); /* read through the open descriptor */
        if (in < 0)
            goto done;
    }
    uint64_t left = UINT64_MAX; /* bytes still to copy */
    while (left > 0 && (n = read(in, buf, sizeof buf)) > 0) {
        if (first) {
            lds_header h;
            if (n < LDS_HEADER_SIZE || lds_header_decode(buf, (size_t)n, &h, NULL) != LDS_OK)
                goto done;
            if (lds_header_chunked(&h))
                left = LDS_HEADER_SIZE + h.chunk_table_offset;
            lds_header u = {.major = h.major, .payload_length = LDS_LENGTH_UNKNOWN};
            if (lds_header_encode(&u, buf) != LDS_OK)
                goto done;
            first = false;
        }
        if ((uint64_t)n > left)
            n = (ssize_t)left;
        if (write(out, buf, (size_t)n) != n)
            goto done;
        left -= (uint64_t)n;
    }
    if (left == 0)
        n = 0;
    if (n == 0 && rename(tmp, dst) == 0)
        rc = 0;
done:
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    if (rc != 0) {
        fprintf(stderr, "lodestar-bench: writing %s failed: %s\n", dst, strerror(errno));
        unlink(tmp);
    }
    return rc;
}

int bench_reference_index(const char *dir, uint64_t rows, uint32_t dim, bool unknown_length,
                          char *out, size_t cap)
{
    char known[4096];
    snprintf(known, sizeof known, "%s/lodestar-bench-ref-%llux%u.ldsi", dir,
             (unsigned long long)rows, dim);
    if (!usable(known, rows, dim)) {
        fprintf(stderr, "lodestar-bench: writing reference index %s (%llu x %u f32, keys)\n", known,
                (unsigned long long)rows, dim);
        if (bench_write_index(known, rows, dim, true) != 0)
            return -1;
    }
    if (!unknown_length) {
        snprintf(out, cap, "%s", known);
        return 0;
    }
    snprintf(out, cap, "%s/lodestar-bench-ref-%llux%u-unknown-length.ldsi", dir,
             (unsigned long long)rows, dim);
    struct stat a, b;
    if (stat(out, &b) == 0 && stat(known, &a) == 0 && a.st_size == b.st_size &&
        b.st_mtime >= a.st_mtime)
        return 0;
    return write_unknown_length(known, out);
}

int bench_unknown_length_copy(const char *src, const char *dir, char *out, size_t cap)
{
    const char *base = strrchr(src, '/');
    base = base ? base + 1 : src;
    snprintf(out, cap, "%s/lodestar-bench-unknown-length-%s", dir, base);
    struct stat a, b;
    if (stat(out, &b) == 0 && stat(src, &a) == 0 && a.st_size == b.st_size &&
        b.st_mtime >= a.st_mtime)
        return 0;
    return write_unknown_length(src, out);
}
