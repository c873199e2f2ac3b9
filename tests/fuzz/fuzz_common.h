/*
 * Shared by the fuzz targets. Each target defines LLVMFuzzerTestOneInput; built
 * with libFuzzer (-Dfuzz=true) that is all, built without it (the default) it is
 * linked with fuzz_replay.c, whose main() replays a corpus.
 */
#ifndef LDS_FUZZ_COMMON_H
#define LDS_FUZZ_COMMON_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "lodestar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A cursor over the fuzz input, for targets that take control bytes first. */
typedef struct fz_input {
    const uint8_t *p;
    size_t n;
} fz_input;

static inline uint8_t fz_byte(fz_input *in)
{
    if (in->n == 0)
        return 0;
    uint8_t b = in->p[0];
    in->p++;
    in->n--;
    return b;
}

/* Rewrites the header check value (bytes 56..63) so that mutations of the
 * header fields reach the checks after it. */
static inline void fz_fix_header(uint8_t *b, size_t n)
{
    if (n < LDS_HEADER_SIZE)
        return;
    uint64_t h = XXH3_64bits(b, 56);
    for (int i = 0; i < 8; i++)
        b[56 + i] = (uint8_t)(h >> (8 * i));
}

/* Rewrites the payload checksum (its last 8 bytes), so that structural
 * mutations reach the section checks rather than stopping at P2. */
static inline void fz_fix_checksum(uint8_t *payload, size_t n)
{
    if (n < LDS_CHECKSUM_SIZE)
        return;
    uint64_t h = XXH3_64bits(payload, n - LDS_CHECKSUM_SIZE);
    for (int i = 0; i < 8; i++)
        payload[n - LDS_CHECKSUM_SIZE + (size_t)i] = (uint8_t)(h >> (8 * i));
}

/* Touches every accessor of a parsed index, so that any inconsistency the
 * parser let through shows up as a sanitizer report. */
static inline void fz_exercise_index(const lds_index *idx)
{
    uint64_t rows = lds_index_rows(idx);
    uint32_t dim = lds_index_dim(idx);
    size_t esize = lds_dtype_size(lds_index_dtype(idx));
    if (dim == 0 || esize == 0 || lds_index_metric(idx) == 0)
        abort();
    (void)lds_index_i8_scale(idx);
    (void)lds_index_normalized(idx);
    (void)lds_index_payload_bytes(idx);
    (void)lds_index_checksum(idx);
    /* Repeated keys under KEYS_UNIQUE are found by the key table (ADR 0010). */
    lds_error kerr;
    lds_error_init(&kerr);
    lds_status kst = lds_index_check_keys(idx, &kerr);
    if (kst != LDS_OK && (kst != LDS_E_DUP_KEY || kerr.status != kst || kerr.field == NULL ||
                          !lds_index_keys_unique(idx)))
        abort();
    float *vec = malloc((size_t)dim * sizeof(float));
    if (!vec)
        return;
    uint64_t limit = rows < 64 ? rows : 64;
    volatile uint8_t sink = 0;
    for (uint64_t r = 0; r < limit; r++) {
        const uint8_t *row = lds_index_row(idx, r);
        if (!row)
            abort();
        for (size_t i = 0; i < (size_t)dim * esize; i++)
            sink ^= row[i];
        if (lds_index_row_f32(idx, r, vec, dim) != LDS_OK)
            abort();
        uint64_t id, found;
        if (lds_index_has_ids(idx)) {
            if (lds_index_id(idx, r, &id) != LDS_OK || lds_index_find_id(idx, id, &found) != LDS_OK)
                abort();
            if (found > r)
                abort();
        }
        const char *key;
        size_t len;
        if (lds_index_has_keys(idx)) {
            if (lds_index_key(idx, r, &key, &len) != LDS_OK)
                abort();
            for (size_t i = 0; i < len; i++)
                sink ^= (uint8_t)key[i];
            lds_status fst = lds_index_find_key(idx, key, len, &found);
            if (fst != kst || (fst == LDS_OK && found > r))
                abort();
        }
    }
    if (lds_index_row(idx, rows) != NULL)
        abort();
    uint64_t none;
    (void)lds_index_find_key(idx, "\xff", 1, &none);
    (void)lds_index_find_id(idx, UINT64_MAX, &none);
    size_t metas = lds_index_meta_count(idx);
    for (size_t i = 0; i < metas; i++) {
        const char *k, *v;
        if (lds_index_meta_at(idx, i, &k, &v) != LDS_OK || lds_index_meta(idx, k) == NULL)
            abort();
        sink ^= (uint8_t)(strlen(k) + strlen(v));
    }
    if (rows > 0 && rows <= 4096 && (uint64_t)rows * dim <= (1u << 20)) {
        for (uint32_t i = 0; i < dim; i++)
            vec[i] = (float)(i % 7) - 3.0f;
        lds_hit hits[8];
        size_t n_hits = 0;
        lds_status st = lds_index_search(idx, vec, dim, 8, hits, &n_hits, NULL);
        if (st == LDS_OK) {
            if (n_hits > 8 || n_hits > rows)
                abort();
            for (size_t i = 0; i < n_hits; i++)
                if (hits[i].row >= rows)
                    abort();
        }
    }
    (void)sink;
    free(vec);
}

/* A private directory on tmpfs when there is one (the writer fsyncs). */
static inline const char *fz_tmpdir(void)
{
    static char dir[64];
    if (dir[0] == 0) {
        struct stat sb;
        const char *base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof dir, "%s/lds-fuzz-XXXXXX", base);
        if (!mkdtemp(dir))
            abort();
    }
    return dir;
}

/* Writes `data` to an anonymous memory file; returns its fd, and its path in
 * `path` (a /proc/self/fd link the importers can open). */
static inline int fz_memfile(const uint8_t *data, size_t size, char *path, size_t cap)
{
    int fd = memfd_create("lds-fuzz-input", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0)
            abort();
        off += (size_t)w;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

#endif /* LDS_FUZZ_COMMON_H */
