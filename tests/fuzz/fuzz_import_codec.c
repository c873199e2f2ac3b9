/*
 * Fuzz target: the importers' decoder layer (import/decode.c: gzip and xz, detected by
 * magic) and the readers above it. Input: one control byte, then the body.
 *   bits 0-1: the format the input is read as: GloVe, word2vec text, .npy, word2vec binary.
 *   bits 2-3: 0: the body is the compressed file itself, mutated directly (headers,
 *             members, blocks, trailers); 1: the body is compressed here with gzip; 2: with
 *             xz; 3: gzip as two members (the body cut in half), so that mutations explore
 *             the decoded side.
 *   bit 4:    (bits 2-3 not 0) the compressed file is cut short by (ctl >> 5) + 1 bytes;
 *   bits 5-6: without bit 4, what follows the compressed file: nothing, a zero byte, a gzip
 *             magic without a member, or a copy of the file (concatenated streams).
 * The import runs with max_decoded_bytes of 1 MiB and max_idle_bytes of 4 KiB, so that
 * bombs end quickly; a success is loaded back and must agree with the import's result, and
 * a refusal must leave nothing at the output path.
 */
#include <lzma.h>
#include <zlib.h>

#include "fuzz_common.h"

static const lds_import_format formats[4] = {LDS_IMPORT_GLOVE, LDS_IMPORT_W2V_TEXT, LDS_IMPORT_NPY,
                                             LDS_IMPORT_W2V_BINARY};

/* gzip (RFC 1952) of src[0, n) appended to out at *o; false when it does not fit. */
static bool gzip_member(const uint8_t *src, size_t n, uint8_t *out, size_t cap, size_t *o)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        abort();
    z.next_in = (Bytef *)(uintptr_t)src;
    z.avail_in = (uInt)n;
    z.next_out = out + *o;
    z.avail_out = (uInt)(cap - *o);
    int rc = deflate(&z, Z_FINISH);
    *o += z.total_out;
    deflateEnd(&z);
    return rc == Z_STREAM_END;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in = {data, size};
    uint8_t ctl = fz_byte(&in);
    unsigned how = (ctl >> 2) & 3u;
    size_t cap = 2 * in.n + 256, n = 0;
    uint8_t *file = malloc(2 * cap + 8);
    if (!file)
        return 0;
    if (how == 0) {
        memcpy(file, in.p, in.n);
        n = in.n;
    } else if (how == 2) {
        if (lzma_easy_buffer_encode(0, LZMA_CHECK_CRC64, NULL, in.p, in.n, file, &n, cap) !=
            LZMA_OK)
            abort();
    } else {
        size_t half = how == 3 ? in.n / 2 : in.n;
        if (!gzip_member(in.p, half, file, cap, &n) ||
            (how == 3 && !gzip_member(in.p + half, in.n - half, file, cap, &n)))
            abort();
    }
    if (how != 0 && (ctl & 16)) {
        size_t cut = (size_t)(ctl >> 5) + 1;
        n = n > cut ? n - cut : 0;
    } else if (how != 0) {
        unsigned tail = (ctl >> 5) & 3u;
        if (tail == 1) {
            file[n++] = 0;
        } else if (tail == 2) {
            file[n++] = 0x1f;
            file[n++] = 0x8b;
        } else if (tail == 3) {
            memcpy(file + n, file, n);
            n *= 2;
        }
    }

    char in_path[64], out_path[128];
    int fd = fz_memfile(file, n, in_path, sizeof in_path);
    free(file);
    lds_import_options o;
    lds_import_options_default(&o);
    o.format = formats[ctl & 3u];
    o.limits.max_dim = 4096;
    o.limits.max_rows = 1u << 16;
    o.limits.max_key_bytes = 64;
    o.max_decoded_bytes = 1u << 20;
    o.max_idle_bytes = 4096;
    snprintf(out_path, sizeof out_path, "%s/out.ldsi", fz_tmpdir());
    lds_import_result res = {.size = sizeof res};
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_import_file(in_path, out_path, &o, &res, &err);
    if (st == LDS_OK) {
        lds_index *idx = NULL;
        if (lds_load_path(out_path, NULL, &idx, NULL, NULL) != LDS_OK)
            abort();
        if (lds_index_rows(idx) != res.rows || lds_index_dim(idx) != res.dim ||
            res.format != o.format)
            abort();
        fz_exercise_index(idx);
        lds_index_free(idx);
        unlink(out_path);
    } else if (err.status != st || err.message[0] == 0 || access(out_path, F_OK) == 0) {
        abort();
    }
    close(fd);
    return 0;
}
