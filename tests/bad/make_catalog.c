/*
 * Writes the catalog of bad inputs (tests/bad/): each file is named
 * NAME.STATUS.EXT, where STATUS is the lds_status name the input must produce
 * (a few pinned edge cases are named OK). The expected status comes from the
 * rules of docs/format.md §6 (and, for the loader and the importers, from the
 * contracts in lodestar_load.h and lodestar_import.h), worked out here for each
 * case, never from running the library. A ".nolimits" before the status asks the
 * replay test (test_bad.c) to raise every parser limit to its maximum.
 *
 * The catalog is committed; regenerate it with
 *   ninja -C BUILD tests/bad/make_catalog && BUILD/tests/bad/make_catalog tests/bad
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>
#include <zlib.h>
#include <zstd.h>

#include "lodestar.h"

static const char *dir;
static unsigned written;

static void put(const char *name, lds_status st, const char *ext, const void *b, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.%s.%s", dir, name, st == LDS_OK ? "OK" : lds_status_name(st),
             ext);
    FILE *f = fopen(path, "wb");
    if (!f || (n > 0 && fwrite(b, 1, n, f) != n) || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    written++;
}

static void putf(lds_status st, const char *ext, const void *b, size_t n, const char *fmt, ...)
{
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    put(name, st, ext, b, n);
}

static void st64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void st32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void st16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static uint64_t ld64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Rewrites the header check value and the payload checksum after an edit, so
 * that the edit is what the reader refuses. */
static void fix(uint8_t *b, size_t n)
{
    st64(b + 56, XXH3_64bits(b, 56));
    st64(b + n - 8, XXH3_64bits(b + 64, n - 64 - 8));
}

/* Format 1.1 (format.md §2.5): after an edit, rewrites the inner checksum, every
 * chunk hash, the table's hash in the header and the header check value. */
static void fix11(uint8_t *b)
{
    uint64_t D = ld64(b + 24), cn = ld64(b + 32), cb = (uint32_t)ld64(b + 48);
    uint8_t *p = b + 64;
    st64(p + D - 8, XXH3_64bits(p, D - 8));
    for (uint64_t k = 0; k < cn; k++) {
        uint64_t e = (k + 1) * cb < D ? (k + 1) * cb : D;
        st64(p + D + 8 * k, XXH3_64bits(p + k * cb, e - k * cb));
    }
    st64(b + 40, XXH3_64bits(p + D, 8 * cn));
    st64(b + 56, XXH3_64bits(b, 56));
}

static uint32_t chunk_bytes = LDS_CHUNKS_NONE; /* the writer's choice for make_index */

/* A small valid index from the writer: `rows` rows of dim 4 (f32, cosine); with
 * `full`, ids, unique keys and a "model" metadata entry too. Format 1.0 unless
 * chunk_bytes says otherwise (the 1.0 cases predate 1.1 and keep their bytes). */
static size_t make_index_dim(bool full, bool unique, const char *const *keys, uint32_t rows,
                             uint32_t dim, uint8_t **out);
static size_t make_index(bool full, bool unique, const char *const *keys, uint32_t rows,
                         uint8_t **out)
{
    return make_index_dim(full, unique, keys, rows, 4, out);
}

static size_t make_index_dim(bool full, bool unique, const char *const *keys, uint32_t rows,
                             uint32_t dim, uint8_t **out)
{
    char path[256];
    snprintf(path, sizeof path, "%s/.make_catalog.tmp", dir);
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = dim;
    wo.chunk_bytes = chunk_bytes;
    wo.with_ids = full;
    wo.with_keys = keys != NULL;
    wo.unique_keys = unique;
    lds_writer *w;
    lds_error err;
    lds_error_init(&err);
    if (lds_writer_open_path(path, &wo, &w, &err) != LDS_OK)
        goto fail;
    if (full && lds_writer_set_meta(w, "model", "seed", &err) != LDS_OK)
        goto fail;
    for (uint32_t r = 0; r < rows; r++) {
        float v[64] = {(float)r + 1, -0.5f, 0.25f * (float)r, 2};
        for (uint32_t d = 4; d < dim && d < 64; d++)
            v[d] = (float)((r * 7 + d) % 13) / 4.0f;
        const char *k = keys ? keys[r] : NULL;
        if (lds_writer_add_row(w, v, dim, 1000 + r, k, k ? strlen(k) : 0, &err) != LDS_OK)
            goto fail;
    }
    if (lds_writer_finish(w, &err) != LDS_OK)
        goto fail;
    lds_writer_free(w);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    rewind(f);
    *out = malloc(n + 64);
    if (!*out || fread(*out, 1, n, f) != n)
        abort();
    fclose(f);
    unlink(path);
    return n;
fail:
    fprintf(stderr, "make_catalog: writer: %s\n", err.message);
    exit(1);
}

static const char *const abc[] = {"alpha", "beta", "gamma"};

/* Layout of the full index, read back from its footer and table. */
typedef struct layout {
    size_t n;  /* file bytes */
    size_t T;  /* payload offset of the table */
    size_t F;  /* payload offset of the footer */
    size_t tf; /* file offset of the table: 64 + T */
    unsigned count;
} layout;

static layout layout_of(const uint8_t *b, size_t n)
{
    layout l = {.n = n};
    l.F = n - 64 - 40;
    l.T = (size_t)ld64(b + 64 + l.F);
    l.tf = 64 + l.T;
    l.count = b[l.tf + 24];
    return l;
}

/* Expected status of flipping bit `bit` of table byte `rel` (offset from the table
 * start) in the full index, checksum rewritten: format.md §6, rules T1-T11, S1-S9,
 * V/I/K/M. The index has rows 3, dim 4, f32, cosine, flags HAS_IDS | HAS_KEYS |
 * KEYS_UNIQUE | KEYS_OFFSETS32, entries vectors, ids, keys, metadata (metric and
 * normalized first, as the writer writes them). */
static lds_status table_flip_status(size_t rel, unsigned bit)
{
    if (rel < 8) { /* rows: T1 above max_rows, else V2 (length no longer rows*dim*4) */
        unsigned gb = (unsigned)rel * 8 + bit;
        uint64_t r = 3 ^ (UINT64_C(1) << gb);
        return r > LDS_DEFAULT_MAX_ROWS ? LDS_E_LIMIT : LDS_E_BAD_SECTION;
    }
    if (rel < 12) { /* dim: T2 zero, T3 above max_dim, else V2 */
        uint32_t d = 4u ^ (1u << ((rel - 8) * 8 + bit));
        return d == 0 ? LDS_E_BAD_VALUE : d > LDS_DEFAULT_MAX_DIM ? LDS_E_LIMIT : LDS_E_BAD_SECTION;
    }
    if (rel < 14) { /* dtype: only 1^2 = 3 (bf16) is known, and then V2 fails */
        uint16_t t = (uint16_t)(1u ^ (1u << ((rel - 12) * 8 + bit)));
        return t == 3 ? LDS_E_BAD_SECTION : LDS_E_BAD_VALUE;
    }
    if (rel < 16) /* metric: unknown (T5) or l2, which metadata "metric" contradicts (M8) */
        return LDS_E_BAD_VALUE;
    if (rel < 20) /* i8_scale of an f32 index must be all zero bits (T6) */
        return LDS_E_BAD_VALUE;
    if (rel < 24) { /* flags */
        unsigned gb = (unsigned)(rel - 20) * 8 + bit;
        switch (gb) {
        case 0: /* HAS_IDS cleared while an ids section exists: S9 */
            return LDS_E_BAD_SECTION;
        case 1: /* HAS_KEYS cleared, KEYS_UNIQUE left alone: T8 */
            return LDS_E_BAD_VALUE;
        case 2: /* KEYS_UNIQUE cleared: only a promise withdrawn, still valid */
            return LDS_OK;
        case 3: /* NORMALIZED set; metadata normalized "false" disagrees: M8 */
            return LDS_E_BAD_VALUE;
        case 4: /* KEYS_OFFSETS32 cleared: 8-byte offsets no longer fit: K2 */
            return LDS_E_BAD_SECTION;
        default: /* bits 5-15 must be understood (T7); 16-31 may be ignored */
            return gb < 16 ? LDS_E_UNSUPPORTED : LDS_OK;
        }
    }
    if (rel < 32) /* section_count (T9/T11) and entry_size (T10/T11) */
        return LDS_E_BAD_SECTION;
    size_t e = (rel - 32) / 24, f = (rel - 32) % 24;
    unsigned gb = (unsigned)(f % 8) * 8 + bit;
    if (f < 4) { /* kind */
        static const uint32_t kinds[] = {1, 2, 3, 4};
        uint32_t k = kinds[e] ^ (1u << ((unsigned)f * 8 + bit));
        if (e == 0 || (k >= 1 && k <= 4)) /* S1: entry 0 not vectors, or a repeated kind */
            return LDS_E_BAD_SECTION;
        if (!(k & 0x80000000u)) /* S2: unknown and not optional */
            return LDS_E_UNSUPPORTED;
        /* An optional unknown kind is skipped: without the ids or keys section S9
           fails; without the metadata the index is still valid. */
        return e == 3 ? LDS_OK : LDS_E_BAD_SECTION;
    }
    if (f < 8) /* entry flags: S3 for bits 0-15, bits 16-31 ignored */
        return ((f - 4) * 8 + bit) < 16 ? LDS_E_UNSUPPORTED : LDS_OK;
    (void)gb;
    /* offset (S4/S5) and length (S6/S7/S8 or V2, I2, K2-K5) */
    return LDS_E_BAD_SECTION;
}

static void index_cases(void)
{
    uint8_t *b;
    size_t n = make_index(true, true, abc, 3, &b);
    layout l = layout_of(b, n);
    if (l.count != 4 || b[l.tf + 20] != 0x17) {
        fprintf(stderr, "make_catalog: the writer's layout changed; revisit the oracle\n");
        exit(1);
    }
    uint8_t *c = malloc(n + 64);

    /* Single-bit flips in the header, check value not rewritten: H2, then H3. */
    for (size_t i = 0; i < 64; i++) {
        memcpy(c, b, n);
        c[i] ^= (uint8_t)(1u << (i % 8));
        putf(i < 8 ? LDS_E_BAD_MAGIC : LDS_E_HEADER_CHECK, "ldsi", c, n, "flip-header-%02zu-bit%zu",
             i, i % 8);
    }
    /* Single-bit flips in the table (every bit of the flags word, one bit per other
       byte) with the checksum rewritten, so each reaches its own rule. */
    size_t tl = 32 + 24 * (size_t)l.count;
    for (size_t rel = 0; rel < tl; rel++) {
        for (unsigned bit = 0; bit < 8; bit++) {
            bool all = rel == 20 || rel == 21 || (rel == 22 && bit == 0);
            if (!all && bit != rel % 8)
                continue;
            memcpy(c, b, n);
            c[l.tf + rel] ^= (uint8_t)(1u << bit);
            fix(c, n);
            putf(table_flip_status(rel, bit), "ldsi", c, n, "flip-table-%03zu-bit%u", rel, bit);
        }
    }
    /* The footer, checksum rewritten: F1-F4 (every field yields E_BAD_SECTION). */
    for (size_t rel = 0; rel < 32; rel++) {
        memcpy(c, b, n);
        c[64 + l.F + rel] ^= (uint8_t)(1u << (rel % 8));
        fix(c, n);
        putf(LDS_E_BAD_SECTION, "ldsi", c, n, "flip-footer-%02zu-bit%zu", rel, rel % 8);
    }
    /* Flips the checksum catches (P2): in the vectors, the table, the checksum. */
    const size_t at[] = {64, 64 + 17, 64 + 64, l.tf, l.tf + 40, n - 40, n - 8, n - 1};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        memcpy(c, b, n);
        c[at[i]] ^= 0x10;
        putf(LDS_E_CHECKSUM, "ldsi", c, n, "flip-unfixed-%04zu", at[i]);
    }

    /* Header fields (check value rewritten): H4, H5, H6. */
    static const uint16_t majors[] = {0, 2, 0xFFFF};
    for (size_t i = 0; i < 3; i++) {
        memcpy(c, b, n);
        st16(c + 8, majors[i]);
        fix(c, n);
        putf(LDS_E_VERSION, "ldsi", c, n, "major-%u", majors[i]);
    }
    memcpy(c, b, n);
    st16(c + 10, 7); /* a later minor of major 1 is read */
    fix(c, n);
    put("minor-7", LDS_OK, "ldsi", c, n);
    /* Bit 0 is CHUNKED since 1.1: set alone, its chunk size is 0 (C1). */
    memcpy(c, b, n);
    st32(c + 12, 1);
    fix(c, n);
    put("header-flag-bit0-no-chunk-fields", LDS_E_BAD_VALUE, "ldsi", c, n);
    /* Bit 1 is CHUNK_ALIGNED since 1.2: without CHUNKED it is refused (A1). */
    memcpy(c, b, n);
    st32(c + 12, 2);
    fix(c, n);
    put("header-flag-bit1-no-chunked", LDS_E_BAD_VALUE, "ldsi", c, n);
    memcpy(c, b, n);
    st32(c + 12, 4);
    fix(c, n);
    put("header-flag-bit2", LDS_E_UNSUPPORTED, "ldsi", c, n);
    memcpy(c, b, n);
    st32(c + 12, 1u << 16);
    fix(c, n);
    put("header-flag-bit16", LDS_OK, "ldsi", c, n);
    memcpy(c, b, n);
    c[40] = 1;
    fix(c, n);
    put("header-reserved-40", LDS_E_BAD_VALUE, "ldsi", c, n);
    /* Transfer damage: CR LF -> LF, and the top bit stripped. */
    memcpy(c, b, 4);
    memcpy(c + 4, b + 5, n - 5);
    put("text-mode-crlf-to-lf", LDS_E_BAD_MAGIC, "ldsi", c, n - 1);
    memcpy(c, b, n);
    c[0] &= 0x7F;
    put("seven-bit-channel", LDS_E_BAD_MAGIC, "ldsi", c, n);
    static const char text[] =
        "king 1 0 0 0\nqueen 0 1 0 0\nprince 0 0 1 0\nroyal 0.5 0.5 0.5 0.5\n"
        "apple 0 0 0 1\n";
    put("not-an-index", LDS_E_BAD_MAGIC, "ldsi", text, sizeof text - 1);
    put("empty", LDS_E_TRUNCATED, "ldsi", "", 0);

    /* Declared lengths (check value rewritten). A stream has no other length, so it
       reads up to the declared one (lodestar_load.h; docs/design.md invariant 2). */
    const struct {
        const char *name;
        uint64_t len;
        lds_status st;
    } lens[] = {
        {"length-0", 0, LDS_E_TRAILING},            /* the payload's bytes follow it */
        {"length-minus-1", n - 65, LDS_E_TRAILING}, /* one byte left over */
        {"length-plus-1", n - 63, LDS_E_TRUNCATED},
        {"length-32gib", UINT64_C(32) << 30, LDS_E_TRUNCATED}, /* a lie below the limit */
        {"length-1tib", UINT64_C(1) << 40, LDS_E_LIMIT},       /* above max_payload_bytes */
        {"length-2pow63", UINT64_C(1) << 63, LDS_E_LIMIT},
        {"length-2pow64-2", UINT64_MAX - 1, LDS_E_LIMIT},
        {"length-unknown", UINT64_MAX, LDS_OK}, /* 2^64-1: read to the end */
    };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        memcpy(c, b, n);
        st64(c + 16, lens[i].len);
        fix(c, n);
        put(lens[i].name, lens[i].st, "ldsi", c, n);
    }
    /* Unknown length with bytes after the real payload: they become part of it, so
       the last 8 bytes are not the checksum (P2). */
    memcpy(c, b, n);
    st64(c + 16, UINT64_MAX);
    fix(c, n);
    memcpy(c + n, "trailing", 8);
    put("length-unknown-trailing-bytes", LDS_E_CHECKSUM, "ldsi", c, n + 8);
    /* A payload too short for a footer and checksum: P1. */
    memcpy(c, b, 64);
    st64(c + 16, 39);
    fix(c, 64 + 39);
    put("payload-39-bytes", LDS_E_TRUNCATED, "ldsi", c, 64 + 39);

    /* Table fields set to hostile values, checksum rewritten. */
    size_t T = l.tf;
    const struct {
        const char *name;
        size_t at;
        int width;
        uint64_t v;
        lds_status st;
        const char *tag;
    } sets[] = {
        {"dim-0", T + 8, 4, 0, LDS_E_BAD_VALUE, ""},                                   /* T2 */
        {"dim-65537", T + 8, 4, 65537, LDS_E_LIMIT, ""},                               /* T3 */
        {"dim-2pow32-1", T + 8, 4, UINT32_MAX, LDS_E_LIMIT, ""},                       /* T3 */
        {"dim-2pow32-1", T + 8, 4, UINT32_MAX, LDS_E_BAD_SECTION, ".nolimits"},        /* V2 */
        {"rows-2pow32-plus-1", T, 8, (UINT64_C(1) << 32) + 1, LDS_E_LIMIT, ""},        /* T1 */
        {"rows-2pow62-x-dim-4", T, 8, UINT64_C(1) << 62, LDS_E_OVERFLOW, ".nolimits"}, /* V1 */
        {"rows-2pow64-1", T, 8, UINT64_MAX, LDS_E_OVERFLOW, ".nolimits"},              /* V1 */
        {"rows-2pow64-1", T, 8, UINT64_MAX, LDS_E_LIMIT, ""},                          /* T1 */
        {"dtype-0", T + 12, 2, 0, LDS_E_BAD_VALUE, ""},
        {"dtype-5", T + 12, 2, 5, LDS_E_BAD_VALUE, ""},
        {"metric-4", T + 14, 2, 4, LDS_E_BAD_VALUE, ""},
        {"section-count-0", T + 24, 4, 0, LDS_E_BAD_SECTION, ""},
        {"section-count-2pow32-1", T + 24, 4, UINT32_MAX, LDS_E_BAD_SECTION, ""},
        {"entry-size-2pow32-8", T + 28, 4, UINT32_MAX - 7, LDS_E_BAD_SECTION, ""},
        /* Section offsets: overlapping the vectors, past the table, unaligned. */
        {"ids-offset-overlapping", T + 32 + 24 + 8, 8, 32, LDS_E_BAD_SECTION, ""},
        {"ids-offset-0", T + 32 + 24 + 8, 8, 0, LDS_E_BAD_SECTION, ""},
        {"ids-offset-past-table", T + 32 + 24 + 8, 8, UINT64_C(1) << 40, LDS_E_BAD_SECTION, ""},
        {"ids-offset-2pow64-1", T + 32 + 24 + 8, 8, UINT64_MAX, LDS_E_BAD_SECTION, ""},
        {"ids-offset-unaligned", T + 32 + 24 + 8, 8, 72, LDS_E_BAD_SECTION, ""},
        {"keys-offset-gap", T + 32 + 48 + 8, 8, 192, LDS_E_BAD_SECTION, ""},
        {"vectors-length-2pow64-1", T + 32 + 16, 8, UINT64_MAX, LDS_E_BAD_SECTION, ""},
        {"vectors-offset-64", T + 32 + 8, 8, 64, LDS_E_BAD_SECTION, ""},
        {"metadata-length-0", T + 32 + 72 + 16, 8, 0, LDS_E_BAD_SECTION, ""},
        {"footer-table-offset-unaligned", 64 + l.F, 8, l.T + 8, LDS_E_BAD_SECTION, ""},
        {"footer-table-offset-past-footer", 64 + l.F, 8, l.F + 64, LDS_E_BAD_SECTION, ""},
        {"footer-table-length-2pow64-1", 64 + l.F + 8, 8, UINT64_MAX, LDS_E_BAD_SECTION, ""},
        {"footer-table-length-0", 64 + l.F + 8, 8, 0, LDS_E_BAD_SECTION, ""},
    };
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        memcpy(c, b, n);
        if (sets[i].width == 8)
            st64(c + sets[i].at, sets[i].v);
        else if (sets[i].width == 4)
            st32(c + sets[i].at, (uint32_t)sets[i].v);
        else
            st16(c + sets[i].at, (uint16_t)sets[i].v);
        fix(c, n);
        putf(sets[i].st, "ldsi", c, n, "%s%s", sets[i].name, sets[i].tag);
    }

    /* Keys: offsets, UTF-8 (K3-K6). Key bytes "alphabetagamma" follow 4 offsets. */
    uint64_t kp = ld64(b + T + 32 + 48 + 8); /* payload offset of the keys section */
    size_t kb = 64 + (size_t)kp + 16;        /* file offset of the key bytes */
    const struct {
        const char *name;
        size_t at;
        const char *bytes;
        lds_status st;
    } keys[] = {
        {"key-byte-ff", kb + 1, "\xff", LDS_E_BAD_UTF8},
        {"key-overlong-slash", kb + 1, "\xc0\xaf", LDS_E_BAD_UTF8},
        {"key-surrogate", kb + 0, "\xed\xa0\x80", LDS_E_BAD_UTF8},
        {"key-above-10ffff", kb + 0, "\xf4\x90\x80\x80", LDS_E_BAD_UTF8},
        {"key-truncated-sequence", kb + 4, "\xe2", LDS_E_BAD_UTF8}, /* "alph" + a lead byte */
        {"key-stray-continuation", kb + 5, "\x80", LDS_E_BAD_UTF8},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        memcpy(c, b, n);
        memcpy(c + keys[i].at, keys[i].bytes, strlen(keys[i].bytes));
        fix(c, n);
        put(keys[i].name, keys[i].st, "ldsi", c, n);
    }
    /* Offsets that decrease, that start above 0, and that end short (K3, K5). */
    memcpy(c, b, n);
    st32(c + kb - 16 + 8, 3);
    fix(c, n);
    put("key-offsets-decreasing", LDS_E_BAD_SECTION, "ldsi", c, n);
    memcpy(c, b, n);
    st32(c + kb - 16, 1);
    fix(c, n);
    put("key-offsets-start-1", LDS_E_BAD_SECTION, "ldsi", c, n);
    memcpy(c, b, n);
    st32(c + kb - 16 + 12, 13);
    fix(c, n);
    put("key-offsets-end-short", LDS_E_BAD_SECTION, "ldsi", c, n);
    memcpy(c, b, n);
    st32(c + kb - 16 + 12, UINT32_MAX);
    fix(c, n);
    put("key-offsets-end-2pow32-1", LDS_E_BAD_SECTION, "ldsi", c, n);
    free(b);

    /* Duplicate keys: written without the uniqueness promise, then promised (K7). */
    static const char *const dup[] = {"alpha", "beta", "alpha"};
    n = make_index(true, false, dup, 3, &b);
    l = layout_of(b, n);
    memcpy(c, b, n);
    put("keys-duplicate-not-promised", LDS_OK, "ldsi", c, n);
    c[l.tf + 20] |= 0x04;
    fix(c, n);
    put("keys-duplicate", LDS_E_DUP_KEY, "ldsi", c, n);
    free(b);

    /* Metadata (M1-M9): the writer puts metric, normalized, then model=seed. */
    n = make_index(true, true, abc, 3, &b);
    l = layout_of(b, n);
    size_t mp = 64 + (size_t)ld64(b + l.tf + 32 + 72 + 8); /* file offset of the section */
    /* Entries: [4 count][4 "metric"(6)][4 "cosine"(6)][4 "normalized"(10)][4 "false"(5)]
       [4 "model"(5)][4 "seed"(4)] */
    size_t model_key = mp + 4 + 20 + 23 + 4, seed_val = model_key + 5 + 4;
    const struct {
        const char *name;
        size_t at;
        const char *bytes;
        size_t len;
        lds_status st;
    } metas[] = {
        {"meta-value-nul", seed_val + 1, "\0", 1, LDS_E_BAD_VALUE},                      /* M6 */
        {"meta-value-bad-utf8", seed_val, "\xfe", 1, LDS_E_BAD_UTF8},                    /* M5 */
        {"meta-key-bad-utf8", model_key, "\xc1", 1, LDS_E_BAD_UTF8},                     /* M5 */
        {"meta-metric-nul", mp + 4 + 10 + 4, "dot\0\0\0", 6, LDS_E_BAD_VALUE},           /* M6 */
        {"meta-metric-unknown-word", mp + 4 + 10 + 4, "cosinx", 6, LDS_E_BAD_VALUE},     /* M8 */
        {"meta-normalized-true", mp + 4 + 20 + 4 + 10 + 4, "true ", 5, LDS_E_BAD_VALUE}, /* M8 */
        {"meta-key-length-0", mp + 4, "\0\0\0\0", 4, LDS_E_BAD_VALUE},                   /* M4 */
        {"meta-key-length-huge", mp + 4, "\xff\xff\xff\x7f", 4, LDS_E_BAD_SECTION},      /* M3 */
        {"meta-count-huge", mp, "\xff\xff\xff\xff", 4, LDS_E_BAD_SECTION},               /* M2 */
        {"meta-count-2", mp, "\x02\0\0\0", 4, LDS_E_BAD_SECTION},                        /* M9 */
        {"meta-count-4", mp, "\x04\0\0\0", 4, LDS_E_BAD_SECTION},                        /* M3 */
    };
    for (size_t i = 0; i < sizeof metas / sizeof metas[0]; i++) {
        memcpy(c, b, n);
        memcpy(c + metas[i].at, metas[i].bytes, metas[i].len);
        fix(c, n);
        put(metas[i].name, metas[i].st, "ldsi", c, n);
    }
    /* "model" renamed to "metric": the key repeats (M7). */
    memcpy(c, b, n);
    memcpy(c + model_key - 4, "\x06\0\0\0metric\x03\0\0\0xyz", 17);
    fix(c, n);
    put("meta-key-repeated-metric", LDS_E_BAD_VALUE, "ldsi", c, n);
    free(b);

    /* The truncation series: the smallest index with keys, cut at every byte. As a
       stream, a cut inside the header is H1, after it the payload falls short of the
       declared length; both are E_TRUNCATED. */
    static const char *const ab[] = {"a", "b"};
    n = make_index(false, true, ab, 2, &b);
    for (size_t cut = 0; cut < n; cut++)
        putf(LDS_E_TRUNCATED, "ldsi", b, cut, "truncated-at-%04zu", cut);
    put("truncation-base", LDS_OK, "ldsi", b, n);
    free(b);
    free(c);
}

/* Format 1.1: the chunk table (format.md §2.5, rules C1-C6). The index: 40 rows of
 * dim 64 with ids, unique keys and metadata, in 1 KiB chunks (12 of them). */
static void chunk_cases(void)
{
    static const char *const keys40[40] = {"k00", "k01", "k02", "k03", "k04", "k05", "k06", "k07",
                                           "k08", "k09", "k10", "k11", "k12", "k13", "k14", "k15",
                                           "k16", "k17", "k18", "k19", "k20", "k21", "k22", "k23",
                                           "k24", "k25", "k26", "k27", "k28", "k29", "k30", "k31",
                                           "k32", "k33", "k34", "k35", "k36", "k37", "k38", "k39"};
    uint8_t *b;
    chunk_bytes = 1024;
    size_t n = make_index_dim(true, true, keys40, 40, 64, &b);
    chunk_bytes = LDS_CHUNKS_NONE;
    uint64_t D = ld64(b + 24), cn = ld64(b + 32), L = ld64(b + 16);
    if ((ld64(b + 8) >> 32) != 1 || cn != (D + 1023) / 1024 || cn < 10 || L != n - 64) {
        fprintf(stderr, "make_catalog: the writer's 1.1 layout changed; revisit the oracle\n");
        exit(1);
    }
    uint8_t *c = malloc(n + 64);
    put("chunked-valid", LDS_OK, "ldsi", b, n);
    /* Header fields (C1-C4), header check rewritten. */
    const struct {
        const char *name;
        size_t at;
        int width;
        uint64_t v;
        lds_status st;
    } sets[] = {
        {"chunk-size-0", 48, 4, 0, LDS_E_BAD_VALUE},                         /* C1 */
        {"chunk-size-3000", 48, 4, 3000, LDS_E_BAD_VALUE},                   /* C1: not 2^k */
        {"chunk-size-512", 48, 4, 512, LDS_E_BAD_VALUE},                     /* C1: below 1 KiB */
        {"chunk-size-2pow31", 48, 4, UINT32_C(1) << 31, LDS_E_BAD_VALUE},    /* C1: above 1 GiB */
        {"chunk-count-2pow61", 32, 8, UINT64_C(1) << 61, LDS_E_OVERFLOW},    /* C3 */
        {"chunk-count-2pow64-1", 32, 8, UINT64_MAX, LDS_E_OVERFLOW},         /* C3 */
        {"chunk-count-2pow60", 32, 8, UINT64_C(1) << 60, LDS_E_BAD_SECTION}, /* C4: past the end */
        {"chunk-table-past-the-end", 24, 8, L, LDS_E_BAD_SECTION},           /* C4 */
        {"chunk-table-offset-2pow64-1", 24, 8, UINT64_MAX, LDS_E_BAD_SECTION},  /* C4 */
        {"chunk-table-disagrees-with-length", 24, 8, D - 8, LDS_E_BAD_SECTION}, /* C4 */
        {"chunk-table-offset-0", 24, 8, 0, LDS_E_BAD_SECTION},                  /* C4 */
        {"chunked-length-unknown", 16, 8, UINT64_MAX, LDS_E_BAD_VALUE},         /* C2 */
        {"chunked-reserved-52", 52, 1, 1, LDS_E_BAD_VALUE},                     /* H6 */
    };
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        memcpy(c, b, n);
        if (sets[i].width == 8)
            st64(c + sets[i].at, sets[i].v);
        else if (sets[i].width == 4)
            st32(c + sets[i].at, (uint32_t)sets[i].v);
        else
            c[sets[i].at] = (uint8_t)sets[i].v;
        st64(c + 56, XXH3_64bits(c, 56));
        put(sets[i].name, sets[i].st, "ldsi", c, n);
    }
    /* C4: a count that does not cover the bytes before the table (offset and count
       moved together so that the table still ends the payload). */
    memcpy(c, b, n);
    st64(c + 24, D + 8);
    st64(c + 32, cn - 1);
    st64(c + 56, XXH3_64bits(c, 56));
    put("chunk-count-short", LDS_E_BAD_SECTION, "ldsi", c, n);
    /* A later minor with a must-understand bit this library lacks (H5: "upgrade"). */
    memcpy(c, b, n);
    st16(c + 10, 3);
    st32(c + 12, 5);
    st64(c + 56, XXH3_64bits(c, 56));
    put("format-1.3-must-understand", LDS_E_UNSUPPORTED, "ldsi", c, n);

    /* C5: a flipped table byte (first, inside, last), and the header's table hash. */
    const size_t tat[] = {0, 8 * 5 + 3, 8 * (size_t)cn - 1};
    for (size_t i = 0; i < sizeof tat / sizeof tat[0]; i++) {
        memcpy(c, b, n);
        c[64 + D + tat[i]] ^= 0x04;
        putf(LDS_E_CHECKSUM, "ldsi", c, n, "chunk-table-flip-%03zu", tat[i]);
    }
    memcpy(c, b, n);
    c[40] ^= 0x01;
    st64(c + 56, XXH3_64bits(c, 56));
    put("chunk-table-hash-wrong", LDS_E_CHECKSUM, "ldsi", c, n);
    /* C6: a flipped byte in chunk k (vectors, ids, the last chunk's table and footer,
       the inner checksum), nothing rewritten. */
    const size_t cat[] = {0, 3 * 1024 + 100, 10 * 1024 + 7, D - 40, D - 1};
    for (size_t i = 0; i < sizeof cat / sizeof cat[0]; i++) {
        memcpy(c, b, n);
        c[64 + cat[i]] ^= 0x10;
        putf(LDS_E_CHECKSUM, "ldsi", c, n, "chunk-%02zu-flip-%05zu", cat[i] / 1024, cat[i]);
    }
    /* The chunks and table rewritten after an edit: the 1.0 rules still run inside
       (here the footer's magic, F1), and the inner checksum is not what refuses it. */
    memcpy(c, b, n);
    c[64 + D - 40 + 24] ^= 0x01;
    fix11(c);
    put("chunked-footer-magic", LDS_E_BAD_SECTION, "ldsi", c, n);
    /* Cut short, and one byte more than declared. */
    put("chunked-cut-8", LDS_E_TRUNCATED, "ldsi", b, n - 8);
    memcpy(c, b, n);
    c[n] = 0;
    put("chunked-one-byte-more", LDS_E_TRAILING, "ldsi", c, n + 1);
    free(b);
    free(c);
}

/* A zstd frame by hand: magic, a frame header with an 8-byte content size `fcs`
   (not single-segment, window 1 MiB), then `n` bytes in one raw block, the last one
   if `last` (else the frame is cut after it). */
static size_t zstd_frame(uint8_t *z, uint64_t fcs, const uint8_t *data, size_t n, bool last)
{
    size_t o = 0;
    st32(z, 0xFD2FB528u);
    o += 4;
    z[o++] = 0xC0;               /* FCS_flag 3 (8 bytes), no checksum, no dictionary */
    z[o++] = (uint8_t)(10 << 3); /* window descriptor: 2^(10 + 10) = 1 MiB */
    st64(z + o, fcs);
    o += 8;
    uint32_t bh = (uint32_t)n << 3 | (last ? 1u : 0u); /* block type 0: raw */
    z[o++] = (uint8_t)bh;
    z[o++] = (uint8_t)(bh >> 8);
    z[o++] = (uint8_t)(bh >> 16);
    memcpy(z + o, data, n);
    return o + n;
}

static void zstd_cases(void)
{
    uint8_t *b;
    size_t n = make_index(true, true, abc, 3, &b);
    uint8_t *z = malloc(2 * n + 256);
    size_t zn = ZSTD_compress(z, 2 * n + 256, b, n, 3);
    if (ZSTD_isError(zn))
        abort();
    put("zstd-valid", LDS_OK, "zst", z, zn);
    /* The frame cut short: the source ends inside the frame. */
    put("zstd-cut-in-frame", LDS_E_TRUNCATED, "zst", z, zn - 3);
    memcpy(z + zn, "\x00", 1);
    put("zstd-trailing-byte", LDS_E_TRAILING, "zst", z, zn + 1);
    uint8_t *y = malloc(n + 64);
    size_t yn = zstd_frame(y, n, b, n, true);
    put("zstd-raw-valid", LDS_OK, "zst", y, yn);
    y[14] |= 0x06; /* block type 3: reserved, a corrupt frame */
    put("zstd-reserved-block", LDS_E_ZSTD, "zst", y, yn);
    /* Content sizes that lie. The header inside declares the same lie, so only the
       limit or the real end of the data can catch it. The frames stop after their one
       block, as a sender that claims more than it sends would; a complete frame would
       end in a last block, where zstd itself finds the sizes disagree. */
    uint8_t *h = malloc(n);
    memcpy(h, b, n);
    st64(h + 16, UINT64_C(1000000000000) - 64);
    fix(h, n);
    yn = zstd_frame(y, UINT64_C(1000000000000), h, n, false);
    put("zstd-claims-1tb", LDS_E_LIMIT, "zst", y, yn); /* above max_payload_bytes */
    memcpy(h, b, n);
    st64(h + 16, (UINT64_C(32) << 30) - 64);
    fix(h, n);
    yn = zstd_frame(y, UINT64_C(32) << 30, h, n, false);
    put("zstd-claims-32gib", LDS_E_TRUNCATED, "zst", y, yn); /* below it: read, then short */
    yn = zstd_frame(y, UINT64_C(32) << 30, h, n, true);
    put("zstd-claims-32gib-complete-frame", LDS_E_ZSTD, "zst", y, yn);
    /* The frame's content size disagrees with the header's declared length. */
    yn = zstd_frame(y, n + 1, b, n, false);
    put("zstd-content-size-disagrees", LDS_E_LENGTH_MISMATCH, "zst", y, yn);
    free(h);
    free(y);
    free(z);
    free(b);
}

/* Importer inputs, refused by lds_import_file (lodestar_import.h). */
static void npy(const char *name, lds_status st, const char *dict, const void *data, size_t n)
{
    uint8_t buf[512];
    size_t dl = strlen(dict), hl = ((10 + dl + 1 + 63) / 64) * 64 - 10;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    st16(buf + 8, (uint16_t)hl);
    memset(buf + 10, ' ', hl);
    memcpy(buf + 10, dict, dl);
    buf[10 + hl - 1] = '\n';
    memcpy(buf + 10 + hl, data, n);
    put(name, st, "npy", buf, 10 + hl + n);
}

static void import_cases(void)
{
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    npy("npy-valid", LDS_OK, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", v,
        sizeof v);
    npy("npy-declares-4gib", LDS_E_TRUNCATED,
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824, 1), }", v, sizeof v);
    npy("npy-declares-2pow40-rows", LDS_E_LIMIT,
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1), }", v, sizeof v);
    npy("npy-shape-2pow32-by-2pow32", LDS_E_LIMIT,
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", v,
        sizeof v);
    npy("npy-one-byte-more", LDS_E_TRAILING,
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 7), }", v, 29);
    npy("npy-complex64", LDS_E_UNSUPPORTED,
        "{'descr': '<c8', 'fortran_order': False, 'shape': (1, 4), }", v, sizeof v);
    npy("npy-fortran-valid", LDS_OK, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 4), }",
        v, sizeof v);
    npy("npy-f8-one-row-short", LDS_E_TRUNCATED,
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 4), }", v, sizeof v);
    npy("npy-shape-1d", LDS_E_UNSUPPORTED,
        "{'descr': '<f4', 'fortran_order': False, 'shape': (8,), }", v, sizeof v);
    npy("npy-dict-unterminated", LDS_E_PARSE, "{'descr': '<f4', 'fortran_order': False, 'sha", v,
        sizeof v);
    put("npy-magic-only", LDS_E_PARSE, "npy", "\x93NUMPY", 6); /* a malformed header */
    float nanrow[4] = {1, 2, __builtin_nanf(""), 4};
    npy("npy-nan", LDS_E_BAD_VALUE, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), }",
        nanrow, sizeof nanrow);

    static const char w2v_bin_short[] = "3 2\nab \x00\x00\x80\x3f\x00\x00\x00\x40\n"
                                        "cd \x00\x00\x80\x3f\x00\x00\x00\x40\n";
    put("w2v-binary-promises-3-rows-holds-2", LDS_E_TRUNCATED, "bin", w2v_bin_short,
        sizeof w2v_bin_short - 1);
    static const char w2v_bin_huge[] = "4000000000 300\nab \x00\x00\x80\x3f\n";
    put("w2v-binary-promises-4e9-rows", LDS_E_TRUNCATED, "bin", w2v_bin_huge,
        sizeof w2v_bin_huge - 1);
    static const char w2v_bin_dim0[] = "1 0\nab \n";
    put("w2v-binary-dim-0", LDS_E_BAD_VALUE, "bin", w2v_bin_dim0, sizeof w2v_bin_dim0 - 1);
    static const char w2v_bin_header[] = "three 2\n";
    put("w2v-binary-bad-header", LDS_E_PARSE, "bin", w2v_bin_header, sizeof w2v_bin_header - 1);

    static const char w2v_txt_short[] = "3 2\nab 1 2\ncd 3 4\n";
    put("w2v-text-promises-3-rows-holds-2", LDS_E_TRUNCATED, "txt", w2v_txt_short,
        sizeof w2v_txt_short - 1);
    static const char w2v_txt_more[] = "1 2\nab 1 2\ncd 3 4\n";
    put("w2v-text-holds-more-rows", LDS_E_TRAILING, "txt", w2v_txt_more, sizeof w2v_txt_more - 1);

    static const char glove_short[] = "king 1 0 0 0\nqueen 0.8 0.6 0\napple 0 0 0 1\n";
    put("glove-one-number-too-few", LDS_E_PARSE, "txt", glove_short, sizeof glove_short - 1);
    static const char glove_long[] = "king 1 0 0 0\nqueen 0.8 0.6 0 0 1\n";
    put("glove-one-number-too-many", LDS_E_PARSE, "txt", glove_long, sizeof glove_long - 1);
    static const char glove_nan[] = "king 1 0 nan 0\n";
    put("glove-nan", LDS_E_BAD_VALUE, "txt", glove_nan, sizeof glove_nan - 1);
    static const char glove_inf[] = "king 1 0 1e39 0\n";
    put("glove-overflowing-number", LDS_E_BAD_VALUE, "txt", glove_inf, sizeof glove_inf - 1);
    static const char glove_word[] = "king 1 0 zero 0\n";
    put("glove-word-for-number", LDS_E_PARSE, "txt", glove_word, sizeof glove_word - 1);
    static const char glove_dup[] = "king 1 0\nqueen 0 1\nking 1 1\n";
    put("glove-duplicate-key", LDS_E_DUP_KEY, "txt", glove_dup, sizeof glove_dup - 1);
    static const char glove_utf8[] = "k\xc3\x28ng 1 0\n";
    put("glove-key-bad-utf8", LDS_E_BAD_UTF8, "txt", glove_utf8, sizeof glove_utf8 - 1);
    static const char glove_empty_line[] = "king 1 0\n\nqueen 0 1\n";
    put("glove-empty-line", LDS_E_PARSE, "txt", glove_empty_line, sizeof glove_empty_line - 1);

    uint8_t fv[64];
    int32_t d4 = 4, d3 = 3, d0 = 0, dneg = -1;
    memcpy(fv, &d4, 4);
    memcpy(fv + 4, v, 16);
    memcpy(fv + 20, &d3, 4);
    memcpy(fv + 24, v, 12);
    put("fvecs-rows-disagree-on-width", LDS_E_PARSE, "fvecs", fv, 36);
    memcpy(fv + 20, &d4, 4);
    memcpy(fv + 24, v, 16);
    put("fvecs-valid", LDS_OK, "fvecs", fv, 40);
    put("fvecs-partial-row", LDS_E_TRUNCATED, "fvecs", fv, 39);
    memcpy(fv, &d0, 4);
    put("fvecs-d-0", LDS_E_BAD_VALUE, "fvecs", fv, 40);
    memcpy(fv, &dneg, 4);
    put("fvecs-d-negative", LDS_E_BAD_VALUE, "fvecs", fv, 40);
}

/* .npz cases: a zip of one .npy entry "v.npy" (APPNOTE 4.3.7, 4.3.12, 4.3.16), each record
   written here so one field can disagree. The rules: an entry's CRC-32 and both sizes are
   those of its data, a deflate stream ends where its compressed size does, and the local
   header agrees with the central directory (lodestar_import.h, docs/format.md). */
typedef struct npz_case {
    unsigned method, level;
    uint32_t crc_xor;       /* into both headers' CRC-32 */
    uint32_t usize;         /* both headers' uncompressed size; 0: the true one */
    size_t after;           /* junk bytes after the compressed data, inside its size */
    unsigned local_method;  /* 0xFFFF: the central directory's */
    const char *local_name; /* NULL: "v.npy" */
    uint32_t local_crc_xor; /* into the local header's CRC-32 only */
    size_t flip;            /* data byte (from the .npy's start) to flip, 0: none */
} npz_case;

static void npz(const char *name, lds_status st, npz_case k)
{
    static const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }";
    uint8_t npyb[256], data[512], out[1024];
    size_t dl = strlen(dict), hl = ((10 + dl + 1 + 63) / 64) * 64 - 10, nn = 10 + hl + 64;
    memcpy(npyb, "\x93NUMPY\x01\x00", 8);
    st16(npyb + 8, (uint16_t)hl);
    memset(npyb + 10, ' ', hl);
    memcpy(npyb + 10, dict, dl);
    npyb[10 + hl - 1] = '\n';
    for (int i = 0; i < 16; i++) {
        float f = (float)i * 0.25f - 1.5f;
        memcpy(npyb + 10 + hl + 4 * i, &f, 4);
    }
    uint32_t crc = (uint32_t)crc32(0, npyb, (uInt)nn) ^ k.crc_xor;
    size_t dn = nn, skip = 0;
    if (k.method == 8) {
        z_stream z;
        memset(&z, 0, sizeof z);
        if (deflateInit2(&z, (int)k.level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            exit(1);
        z.next_in = npyb;
        z.avail_in = (uInt)nn;
        z.next_out = data;
        z.avail_out = sizeof data;
        if (deflate(&z, Z_FINISH) != Z_STREAM_END)
            exit(1);
        dn = z.total_out;
        deflateEnd(&z);
        skip = 5; /* a level-0 stream's one stored block header */
    } else {
        memcpy(data, npyb, nn);
    }
    if (k.flip)
        data[skip + k.flip] ^= 0x01;
    memset(data + dn, 'J', k.after);
    dn += k.after;
    uint32_t usize = k.usize ? k.usize : (uint32_t)nn;
    const char *lname = k.local_name ? k.local_name : "v.npy";
    size_t ln = strlen(lname), o = 0;
    st32(out, 0x04034b50u); /* local file header */
    st16(out + 4, 20);
    st16(out + 6, 0);
    st16(out + 8, (uint16_t)(k.local_method == 0xFFFF ? k.method : k.local_method));
    st32(out + 10, 0);
    st32(out + 14, crc ^ k.local_crc_xor);
    st32(out + 18, (uint32_t)dn);
    st32(out + 22, usize);
    st16(out + 26, (uint16_t)ln);
    st16(out + 28, 0);
    memcpy(out + 30, lname, ln);
    o = 30 + ln;
    memcpy(out + o, data, dn);
    o += dn;
    size_t cd = o;
    memset(out + o, 0, 46);
    st32(out + o, 0x02014b50u); /* central directory header */
    st16(out + o + 4, 20);
    st16(out + o + 6, 20);
    st16(out + o + 10, (uint16_t)k.method);
    st32(out + o + 16, crc);
    st32(out + o + 20, (uint32_t)dn);
    st32(out + o + 24, usize);
    st16(out + o + 28, 5);
    memcpy(out + o + 46, "v.npy", 5);
    o += 51;
    memset(out + o, 0, 22);
    st32(out + o, 0x06054b50u); /* end of central directory */
    st16(out + o + 8, 1);
    st16(out + o + 10, 1);
    st32(out + o + 12, 51);
    st32(out + o + 16, (uint32_t)cd);
    o += 22;
    put(name, st, "npz", out, o);
}

static void npz_cases(void)
{
    const npz_case stored = {.local_method = 0xFFFF}, deflated = {8, 6, .local_method = 0xFFFF};
    npz_case k;
    npz("npz-stored-valid", LDS_OK, stored);
    npz("npz-deflate-valid", LDS_OK, deflated);
    k = stored;
    k.flip = 128 + 16 + 1; /* row 1, element 0: a different finite float */
    npz("npz-stored-byte-flipped", LDS_E_CHECKSUM, k);
    k = deflated;
    k.level = 0;
    k.flip = 128 + 16 + 1;
    npz("npz-deflate-stored-block-byte-flipped", LDS_E_CHECKSUM, k);
    k = stored;
    k.crc_xor = 1;
    npz("npz-stored-crc-wrong", LDS_E_CHECKSUM, k);
    k = deflated;
    k.usize = 10;
    npz("npz-deflate-usize-10", LDS_E_LENGTH_MISMATCH, k);
    k.usize = 1u << 31;
    npz("npz-deflate-usize-2pow31", LDS_E_LENGTH_MISMATCH, k);
    k = deflated;
    k.after = 3;
    npz("npz-deflate-bytes-after-stream", LDS_E_TRAILING, k);
    k = stored;
    k.local_method = 8;
    npz("npz-local-method-disagrees", LDS_E_PARSE, k);
    k = stored;
    k.local_name = "w.npy";
    npz("npz-local-name-disagrees", LDS_E_PARSE, k);
    k = deflated;
    k.local_crc_xor = 0x100;
    npz("npz-local-crc-disagrees", LDS_E_PARSE, k);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CATALOG_DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    index_cases();
    chunk_cases();
    zstd_cases();
    import_cases();
    npz_cases();
    printf("make_catalog: %u files in %s\n", written, dir);
    return 0;
}
