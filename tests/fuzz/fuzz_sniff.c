/* Fuzz target: lds_import_sniff (lodestar_import.h), the file-kind guess behind the errors
 * that say what to do. Input: the head of a file, copied to a buffer of exactly its size
 * (so that a sanitizer sees any read past it). A kind is one of the documented strings,
 * and the format it names is the one documented with it. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *b = malloc(size ? size : 1);
    if (!b)
        return 0;
    memcpy(b, data, size);
    lds_import_format f = LDS_IMPORT_FASTTEXT; /* a value the call must overwrite */
    const char *kind = lds_import_sniff(size ? b : NULL, size, &f);
    static const struct {
        const char *kind;
        lds_import_format format;
    } known[] = {
        {"a lodestar index", LDS_IMPORT_AUTO},
        {"a lodestar shard manifest (JSON)", LDS_IMPORT_AUTO},
        {"an .npy file", LDS_IMPORT_NPY},
        {"a zip file (.npz)", LDS_IMPORT_NPZ},
        {"a gzip-compressed file", LDS_IMPORT_AUTO},
        {"a zstd-compressed file", LDS_IMPORT_AUTO},
        {"an xz-compressed file", LDS_IMPORT_AUTO},
        {"an HDF5 file", LDS_IMPORT_HDF5},
        {"a word2vec text file", LDS_IMPORT_W2V_TEXT},
        {"a GloVe text file", LDS_IMPORT_GLOVE},
    };
    bool ok = kind == NULL && f == LDS_IMPORT_AUTO;
    for (size_t i = 0; kind && i < sizeof known / sizeof known[0]; i++)
        if (strcmp(kind, known[i].kind) == 0 && f == known[i].format)
            ok = true;
    if (!ok || lds_import_sniff(size ? b : NULL, size, NULL) != kind)
        abort();
    free(b);
    return 0;
}
