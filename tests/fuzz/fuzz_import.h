/*
 * The importer fuzz targets (fuzz_import_*.c): each defines FZ_FORMATS, the formats
 * its input may be read as, and includes this. Input: one control byte (bits 0-1 pick
 * the format from FZ_FORMATS; bit 2, for .npy and .fvecs: also give a keys file with
 * (ctl >> 3) lines), then the file. The file goes to a memory file; the index goes to
 * a private tmpfs directory, and when the import succeeds it is loaded back and must
 * agree with the import result.
 */
#ifndef LDS_FUZZ_IMPORT_H
#define LDS_FUZZ_IMPORT_H

#include "fuzz_common.h"

static const lds_import_format fz_formats[] = {FZ_FORMATS};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in = {data, size};
    uint8_t ctl = fz_byte(&in);
    lds_import_format fmt = fz_formats[(ctl & 3u) % (sizeof fz_formats / sizeof fz_formats[0])];
    char in_path[64], keys_path[64], out_path[128];
    int fd = fz_memfile(in.p, in.n, in_path, sizeof in_path);
    int kfd = -1;
    lds_import_options o;
    lds_import_options_default(&o);
    o.format = fmt;
    o.limits.max_dim = 4096;
    o.limits.max_rows = 1u << 16;
    o.limits.max_key_bytes = 64;
    o.max_decoded_bytes = 1u << 24; /* a compressed input decodes to at most 16 MiB */
    if ((ctl & 4) && (fmt == LDS_IMPORT_NPY || fmt == LDS_IMPORT_NPZ || fmt == LDS_IMPORT_FVECS)) {
        char keys[32 * 8];
        size_t kn = 0;
        for (unsigned i = 0; i < (unsigned)(ctl >> 3); i++)
            kn += (size_t)snprintf(keys + kn, sizeof keys - kn, "k%u\n", i);
        kfd = fz_memfile((const uint8_t *)keys, kn, keys_path, sizeof keys_path);
        o.keys_path = keys_path;
    }
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
            lds_index_has_keys(idx) != res.has_keys || res.format != fmt)
            abort();
        fz_exercise_index(idx);
        lds_index_free(idx);
        unlink(out_path);
    } else {
        if (err.status != st || err.message[0] == 0)
            abort();
        if (access(out_path, F_OK) == 0)
            abort(); /* a refused import leaves nothing at the output path */
    }
    close(fd);
    if (kfd >= 0)
        close(kfd);
    return 0;
}

#endif /* LDS_FUZZ_IMPORT_H */
