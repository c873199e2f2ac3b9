/*
 * Fuzz target: zstd-compressed input through the loader. Input: one control byte,
 * then the body.
 *   bit 0 clear: the body is the raw source (a zstd frame, mutated directly), loaded
 *                from memory (lds_load_memory) and from a memory file (lds_load_fd).
 *   bit 0 set:   the body is a lodestar file; bit 1 rewrites its header check and
 *                checksum; it is compressed here (bit 2: without the content size in
 *                the frame header, so the loader must find the length itself) and
 *                loaded, so mutations explore the decoded side.
 *   bit 3:       LDS_OWN_COPY.
 */
#include <zstd.h>

#include "fuzz_common.h"

static void fz_load_all(const uint8_t *src, size_t n, bool copy_own)
{
    lds_load_options o;
    lds_load_options_default(&o);
    o.max_payload_bytes = (uint64_t)4 << 20;
    o.ownership = copy_own ? LDS_OWN_COPY : LDS_OWN_ADOPT;
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_load_memory(src, n, copy_own, &o, &idx, NULL, &err);
    if (st == LDS_OK) {
        fz_exercise_index(idx);
        lds_index_free(idx);
    } else if (idx != NULL || err.status != st || err.message[0] == 0) {
        abort();
    }
    char path[64];
    int fd = fz_memfile(src, n, path, sizeof path);
    if (lseek(fd, 0, SEEK_SET) != 0)
        abort();
    lds_status st2 = lds_load_fd(fd, &o, &idx, NULL, &err);
    close(fd);
    if (st2 == LDS_OK) {
        fz_exercise_index(idx);
        lds_index_free(idx);
    } else if (idx != NULL || err.status != st2) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in = {data, size};
    uint8_t ctl = fz_byte(&in);
    if (!(ctl & 1)) {
        uint8_t *raw = malloc(in.n ? in.n : 1);
        if (!raw)
            return 0;
        memcpy(raw, in.p, in.n);
        fz_load_all(raw, in.n, (ctl & 8) != 0);
        free(raw);
        return 0;
    }
    uint8_t *plain = malloc(in.n ? in.n : 1);
    if (!plain)
        return 0;
    memcpy(plain, in.p, in.n);
    if ((ctl & 2) && in.n >= LDS_HEADER_SIZE) {
        fz_fix_header(plain, in.n);
        fz_fix_checksum(plain + LDS_HEADER_SIZE, in.n - LDS_HEADER_SIZE);
    }
    size_t cap = ZSTD_compressBound(in.n);
    uint8_t *z = malloc(cap);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    if (!z || !cc)
        abort();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 1);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, (ctl & 4) ? 0 : 1);
    size_t zn;
    if (ctl & 4) {
        /* Streamed without a pledged size: the frame header carries no content size. */
        ZSTD_outBuffer out = {z, cap, 0};
        ZSTD_inBuffer src = {plain, in.n, 0};
        size_t r = ZSTD_compressStream2(cc, &out, &src, ZSTD_e_end);
        if (ZSTD_isError(r) || r != 0)
            abort();
        zn = out.pos;
    } else {
        zn = ZSTD_compress2(cc, z, cap, plain, in.n);
        if (ZSTD_isError(zn))
            abort();
    }
    ZSTD_freeCCtx(cc);
    fz_load_all(z, zn, (ctl & 8) != 0);
    free(z);
    free(plain);
    return 0;
}
