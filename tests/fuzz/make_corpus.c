/*
 * Writes the seed corpora of the fuzz targets: small valid inputs (a few hundred
 * bytes each) made with the library's own writer, plus a few hand-written importer
 * files. The seeds are committed; run this only to regenerate them:
 *   ninja -C BUILD tests/fuzz/make_corpus && BUILD/tests/fuzz/make_corpus tests/fuzz/corpus
 * Each seed starts with the control bytes its target expects (see fuzz_<target>.c).
 */
#include <errno.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include "fuzz_common.h"

static const char *root;

static void put(const char *target, const char *name, const void *ctl, size_t nctl,
                const void *body, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, target);
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
    snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(ctl, 1, nctl, f) != nctl || fwrite(body, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

typedef struct spec {
    const char *name;
    uint32_t rows, dim;
    lds_dtype dtype;
    lds_metric metric;
    bool ids, keys, unique, normalize, meta;
    uint32_t chunk;    /* 0: format 1.0 (the seeds before 1.1 keep their bytes); else 1.1 */
    lds_layout layout; /* LDS_LAYOUT_CHUNK_ALIGNED: format 1.2 (sections on chunk boundaries) */
} spec;

/* Writes the index of `s` and returns the whole file in *out (malloc'd). */
static size_t make_index(const spec *s, uint8_t **out)
{
    char path[256];
    snprintf(path, sizeof path, "%s/seed.ldsi", fz_tmpdir());
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = s->dim;
    wo.dtype = s->dtype;
    wo.metric = s->metric;
    wo.with_ids = s->ids;
    wo.with_keys = s->keys;
    wo.unique_keys = s->unique;
    wo.normalize = s->normalize;
    wo.chunk_bytes = s->chunk ? s->chunk : LDS_CHUNKS_NONE;
    wo.layout = s->layout;
    lds_writer *w;
    lds_error err;
    lds_error_init(&err);
    if (lds_writer_open_path(path, &wo, &w, &err) != LDS_OK)
        goto fail;
    if (s->meta && (lds_writer_set_meta(w, "model", "seed", &err) != LDS_OK ||
                    lds_writer_set_meta(w, "source", "make_corpus", &err) != LDS_OK))
        goto fail;
    float v[64];
    for (uint32_t r = 0; r < s->rows; r++) {
        for (uint32_t i = 0; i < s->dim; i++)
            v[i] = (float)((int)((r * 7 + i * 3) % 11) - 5) / 4.0f;
        char key[16];
        int kl = snprintf(key, sizeof key, r % 3 == 2 ? "k\xc3\xa9%u" : "key%u", r);
        if (lds_writer_add_row(w, v, s->dim, 1000 + r, s->keys ? key : NULL,
                               s->keys ? (size_t)kl : 0, &err) != LDS_OK)
            goto fail;
    }
    if (lds_writer_finish(w, &err) != LDS_OK)
        goto fail;
    lds_writer_free(w);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    rewind(f);
    *out = malloc(n);
    if (fread(*out, 1, n, f) != n)
        abort();
    fclose(f);
    unlink(path);
    return n;
fail:
    fprintf(stderr, "%s: %s\n", s->name, err.message);
    exit(1);
}

/* Format 1.1 seeds (fuzz_chunks: control byte, then the whole file; and the loader). */
static void chunk_seeds(void)
{
    static const spec specs[] = {
        {"chunked-f32-all", 40, 16, LDS_DTYPE_F32, LDS_METRIC_DOT, true, true, true, false, true,
         1024, LDS_LAYOUT_AUTO},
        {"chunked-one", 2, 4, LDS_DTYPE_F16, LDS_METRIC_L2, false, true, false, false, false, 1024,
         LDS_LAYOUT_AUTO},
        {"chunked-empty", 0, 4, LDS_DTYPE_F32, LDS_METRIC_COSINE, false, false, false, false, false,
         1024, LDS_LAYOUT_AUTO},
        /* format 1.2: every section and the key bytes on a 1 KiB boundary, zero between */
        {"aligned-f32-all", 40, 16, LDS_DTYPE_F32, LDS_METRIC_DOT, true, true, true, false, true,
         1024, LDS_LAYOUT_CHUNK_ALIGNED},
        {"aligned-one", 1, 4, LDS_DTYPE_F16, LDS_METRIC_L2, true, true, false, false, false, 1024,
         LDS_LAYOUT_CHUNK_ALIGNED},
        {"aligned-empty", 0, 4, LDS_DTYPE_F32, LDS_METRIC_COSINE, false, true, false, false, false,
         1024, LDS_LAYOUT_CHUNK_ALIGNED},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        uint8_t *b;
        size_t n = make_index(&specs[i], &b);
        const uint8_t ctl[] = {0, 1, 6};
        char name[64];
        for (size_t c = 0; c < sizeof ctl; c++) {
            snprintf(name, sizeof name, "%s.%u", specs[i].name, (unsigned)ctl[c]);
            put("chunks", name, &ctl[c], 1, b, n);
        }
        const uint8_t plain[2] = {0, 0};
        put("stream", specs[i].name, plain, 2, b, n);
        put("header", specs[i].name, &plain[0], 1, b, LDS_HEADER_SIZE);
        free(b);
    }
}

static void index_seeds(void)
{
    static const spec specs[] = {
        {"f32-plain", 3, 4, LDS_DTYPE_F32, LDS_METRIC_COSINE, false, false, false, false, false, 0,
         LDS_LAYOUT_AUTO},
        {"f32-all", 4, 4, LDS_DTYPE_F32, LDS_METRIC_DOT, true, true, true, false, true, 0,
         LDS_LAYOUT_AUTO},
        {"f16-keys", 5, 3, LDS_DTYPE_F16, LDS_METRIC_L2, false, true, false, false, false, 0,
         LDS_LAYOUT_AUTO},
        {"bf16-ids", 3, 8, LDS_DTYPE_BF16, LDS_METRIC_COSINE, true, false, false, true, false, 0,
         LDS_LAYOUT_AUTO},
        {"i8-unique", 6, 2, LDS_DTYPE_I8, LDS_METRIC_COSINE, false, true, true, true, true, 0,
         LDS_LAYOUT_AUTO},
        {"empty", 0, 4, LDS_DTYPE_F32, LDS_METRIC_COSINE, false, false, false, false, false, 0,
         LDS_LAYOUT_AUTO},
        {"empty-keys", 0, 1, LDS_DTYPE_F32, LDS_METRIC_L2, true, true, true, false, true, 0,
         LDS_LAYOUT_AUTO},
    };
    const uint8_t zero = 0, one = 1;
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        const spec *s = &specs[i];
        uint8_t *b;
        size_t n = make_index(s, &b);
        put("header", s->name, &zero, 1, b, LDS_HEADER_SIZE);
        put("payload", s->name, &zero, 1, b + LDS_HEADER_SIZE, n - LDS_HEADER_SIZE);
        const uint8_t plain[2] = {0, 0};
        put("stream", s->name, plain, 2, b, n);
        put("zstd", s->name, &one, 1, b, n);
        size_t cap = ZSTD_compressBound(n);
        uint8_t *z = malloc(cap);
        size_t zn = ZSTD_compress(z, cap, b, n, 3);
        if (ZSTD_isError(zn))
            abort();
        char name[64];
        snprintf(name, sizeof name, "%s.zst", s->name);
        put("zstd", name, &zero, 1, z, zn);
        if (i < 3) {
            /* The same file behind reads of 1, 7 and 3 bytes, a retry, and a small chunk. */
            const uint8_t sched[] = {0x20 | 1, 4, 0, 6, 0xFE, 2};
            snprintf(name, sizeof name, "%s.short-reads", s->name);
            put("stream", name, sched, sizeof sched, b, n);
            const uint8_t zctl[2] = {0, 0};
            snprintf(name, sizeof name, "%s.zst", s->name);
            put("stream", name, zctl, 2, z, zn);
        }
        free(z);
        free(b);
    }
    /* A header declaring an unknown length. */
    uint8_t h[LDS_HEADER_SIZE];
    lds_header hd = {.major = LDS_FORMAT_MAJOR, .payload_length = LDS_LENGTH_UNKNOWN};
    lds_header_encode(&hd, h);
    put("header", "length-unknown", &zero, 1, h, sizeof h);
}

static void text_seeds(void)
{
    const uint8_t glove = 0, w2v = 1;
    const char g1[] = "king 1 0 0 0\nqueen 0.8 0.6 0 0\n\xc3\xa9t\xc3\xa9 -1e-3 2.5 3 4\n";
    const char g2[] = "a\t1.5\t-2\r\nb 3 4  \n";
    const char w1[] = "3 4\nking 1 0 0 0\nqueen 0.8 0.6 0 0\nprince 0.6 0 0.8 0\n";
    const char w2[] = "1 2\nx 1e3 -7\n\n";
    put("import_text", "glove-basic", &glove, 1, g1, sizeof g1 - 1);
    put("import_text", "glove-tabs-crlf", &glove, 1, g2, sizeof g2 - 1);
    put("import_text", "w2v-basic", &w2v, 1, w1, sizeof w1 - 1);
    put("import_text", "w2v-blank-end", &w2v, 1, w2, sizeof w2 - 1);

    /* word2vec binary: "N D\n", then key, space, D floats, newline. */
    uint8_t bin[256];
    size_t n = (size_t)snprintf((char *)bin, sizeof bin, "3 2\n");
    const char *keys[] = {"king", "queen", "\xc3\xa9t\xc3\xa9"};
    for (int r = 0; r < 3; r++) {
        n += (size_t)snprintf((char *)bin + n, sizeof bin - n, "%s ", keys[r]);
        float v[2] = {(float)r, -0.5f * (float)r};
        memcpy(bin + n, v, sizeof v);
        n += sizeof v;
        if (r != 1)
            bin[n++] = '\n';
    }
    put("import_w2v_binary", "basic", &glove, 1, bin, n);

    /* .fvecs: rows of (int32 d, d floats). */
    uint8_t fv[3 * 20];
    for (int r = 0; r < 3; r++) {
        int32_t d = 4;
        memcpy(fv + r * 20, &d, 4);
        float v[4] = {(float)r, 1, -2, 0.25f};
        memcpy(fv + r * 20 + 4, v, sizeof v);
    }
    const uint8_t keys3 = 4 | (3 << 3), keys2 = 4 | (2 << 3);
    put("import_fvecs", "basic", &glove, 1, fv, sizeof fv);
    put("import_fvecs", "keys", &keys3, 1, fv, sizeof fv);
    put("import_fvecs", "keys-short", &keys2, 1, fv, sizeof fv);

    /* .npy versions 1.0 (f4 and f2), 2.0 and 3.0. */
    static const struct {
        const char *name;
        int major;
        const char *descr;
        size_t esize;
    } npys[] = {{"v1-f4", 1, "<f4", 4},
                {"v1-f2", 1, "<f2", 2},
                {"v2-f4", 2, "<f4", 4},
                {"v3-f2", 3, "<f2", 2}};
    for (size_t i = 0; i < sizeof npys / sizeof npys[0]; i++) {
        char dict[128];
        int dl =
            snprintf(dict, sizeof dict,
                     "{'descr': '%s', 'fortran_order': False, 'shape': (3, 2), }", npys[i].descr);
        size_t pre = npys[i].major == 1 ? 10 : 12;
        size_t hl = ((pre + (size_t)dl + 1 + 63) / 64) * 64 - pre;
        uint8_t buf[256];
        memcpy(buf, "\x93NUMPY", 6);
        buf[6] = (uint8_t)npys[i].major;
        buf[7] = 0;
        if (npys[i].major == 1) {
            buf[8] = (uint8_t)hl;
            buf[9] = (uint8_t)(hl >> 8);
        } else {
            uint32_t l = (uint32_t)hl;
            memcpy(buf + 8, &l, 4);
        }
        memset(buf + pre, ' ', hl);
        memcpy(buf + pre, dict, (size_t)dl);
        buf[pre + hl - 1] = '\n';
        size_t m = pre + hl;
        for (int e = 0; e < 6; e++) {
            if (npys[i].esize == 4) {
                float f = (float)e - 2.5f;
                memcpy(buf + m, &f, 4);
            } else {
                uint16_t h = lds_f32_to_f16((float)e - 2.5f);
                memcpy(buf + m, &h, 2);
            }
            m += npys[i].esize;
        }
        put("import_npy", npys[i].name, &glove, 1, buf, m);
        if (i == 0)
            put("import_npy", "v1-f4-keys", &keys3, 1, buf, m);
    }
}

/* fuzz_import_codec: plain bodies compressed by the target, and compressed files as they
   are (gzip and xz made here), cut or followed by bytes; fuzz_import_ids: ids files. */
static void codec_and_ids_seeds(void)
{
    const char glove[] = "king 1 0 0 0\nqueen 0.8 0.6 0 0\n\xc3\xa9t\xc3\xa9 -1e-3 2.5 3 4\n";
    const char w2v[] = "2 3\nking 1 0 0\nqueen 0.8 0.6 0\n\n";
    uint8_t c;
    c = 0 | 1 << 2;
    put("import_codec", "gzip-glove", &c, 1, glove, sizeof glove - 1);
    c = 1 | 2 << 2;
    put("import_codec", "xz-w2v", &c, 1, w2v, sizeof w2v - 1);
    c = 0 | 3 << 2;
    put("import_codec", "gzip-two-members-glove", &c, 1, glove, sizeof glove - 1);
    c = 0 | 1 << 2 | 16 | 3 << 5;
    put("import_codec", "gzip-cut-4", &c, 1, glove, sizeof glove - 1);
    c = 1 | 1 << 2 | 3 << 5;
    put("import_codec", "gzip-concatenated-copy", &c, 1, w2v, sizeof w2v - 1);
    c = 0 | 2 << 2 | 2 << 5;
    put("import_codec", "xz-then-gzip-magic", &c, 1, glove, sizeof glove - 1);
    char blank[64 + 6000];
    memcpy(blank, "a 1 2\n", 6);
    memset(blank + 6, '\n', sizeof blank - 6);
    c = 0 | 1 << 2;
    put("import_codec", "gzip-blank-lines", &c, 1, blank, sizeof blank);

    /* Compressed files as they are (bits 2-3 clear). */
    uint8_t z[512];
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        exit(1);
    zs.next_in = (Bytef *)(uintptr_t)glove;
    zs.avail_in = sizeof glove - 1;
    zs.next_out = z;
    zs.avail_out = sizeof z;
    if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
        exit(1);
    c = 0;
    put("import_codec", "raw-gzip-glove", &c, 1, z, zs.total_out);
    deflateEnd(&zs);
    size_t zn = 0;
    if (lzma_easy_buffer_encode(0, LZMA_CHECK_CRC32, NULL, (const uint8_t *)w2v, sizeof w2v - 1, z,
                                &zn, sizeof z) != LZMA_OK)
        exit(1);
    c = 1;
    put("import_codec", "raw-xz-w2v", &c, 1, z, zn);

    c = 3;
    put("import_ids", "three", &c, 1, "7\n8\n9\n", 6);
    c = 2;
    put("import_ids", "bom-crlf-max-no-final-newline", &c, 1,
        "\xEF\xBB\xBF"
        "18446744073709551615\r\n0",
        25);
    c = 2;
    put("import_ids", "not-a-digit", &c, 1, "1\nx\n", 4);
    c = 6 | 8 | 2 << 4;
    put("import_ids", "repeat-last", &c, 1, "10\n11\n12\n13\n14\n15\n", 18);
    c = 7 | 8 | 1 << 4 | 64;
    put("import_ids", "repeat-first-i8-auto", &c, 1, "0\n1\n2\n3\n4\n5\n6\n", 14);
}

/* fuzz_search: 8 control bytes (fuzz_search.c), then row bytes and query floats. */
static void search_seeds(void)
{
    static const struct {
        const char *name;
        uint8_t ctl[8];
    } seeds[] = {
        {"f32-cosine", {0x00, 16, 70, 3, 10, 0x10, 0, 0}},
        {"f16-dot-threads", {0x05, 32, 150, 7, 5, 0x13, 0, 0}},
        {"bf16-l2-k-rows", {0x0A, 3, 65, 2, 65, 0x12, 1, 0}},
        {"i8-dot-every-row", {0x07, 39, 130, 13, 140, 0x52, 0, 0}},
        {"i8-cosine-first-layout", {0x03, 7, 64, 1, 7, 0x21, 2, 0}},
        {"bad-size", {0x00, 4, 10, 2, 3, 0x30, 0, 0}},
        {"unknown-kernel", {0x04, 4, 10, 2, 3, 0x10, 200, 0}},
        {"dim-mismatch", {0x04, 4, 10, 2, 3, 0x90, 0, 0}},
        {"null-hits-huge-k", {0x04, 4, 10, 2, 255, 0x10, 0, 4}},
    };
    uint8_t body[8192];
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (uint8_t)(i * 37 + 11);
    /* The queries (after the rows' bytes) as small floats: 0x3F in every fourth byte. */
    for (size_t i = 3; i < sizeof body; i += 4)
        body[i] = 0x3F;
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        put("search", seeds[i].name, seeds[i].ctl, 8, body, sizeof body);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    root = argv[1];
    index_seeds();
    chunk_seeds();
    text_seeds();
    codec_and_ids_seeds();
    search_seeds();
    rmdir(fz_tmpdir());
    return 0;
}
