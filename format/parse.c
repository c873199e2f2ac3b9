/* The payload parser: validates a payload (format.md §6) and builds an index. */
#include "format_internal.h"

#include <math.h>
#include <stdlib.h>
#include <xxhash.h>
#if LDS_HAVE_XXH3_DISPATCH
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#define lds__xxh3 XXH3_64bits_dispatch
#else
#define lds__xxh3 XXH3_64bits
#endif

typedef struct section {
    bool present;
    unsigned i;      /* table entry index */
    uint64_t entry;  /* payload offset of the table entry */
    uint64_t offset; /* payload offset of the section */
    uint64_t length;
} section;

typedef struct parser {
    const uint8_t *p;
    uint64_t length;
    uint64_t base;
    lds_limits limits;
    lds_error *err;
    uint64_t table;
    uint64_t rows;
    uint32_t dim;
    uint32_t flags;
    lds_dtype dtype;
    uint16_t metric;     /* table.metric, read once */
    uint32_t scale_bits; /* table.i8_scale, read once */
    bool copy_offsets;   /* lds_parse_options.copy_key_offsets */
    uint64_t align;      /* where sections start: 64, or chunk_bytes (CHUNK_ALIGNED, §4.4) */
    uint64_t keys_gap;   /* CHUNK_ALIGNED: zero bytes between the key offsets and bytes */
    section vectors, ids, keys, meta;
} parser;

void (*lds__parse_test_hook)(const char *where);

void lds_parse_options_default(lds_parse_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    lds_limits_default(&o->limits);
    o->verify_checksum = true;
    o->base_offset = LDS_HEADER_SIZE;
}

static void index_destroy(lds_index *idx)
{
    if (!idx)
        return;
    free(idx->owned);
    free(idx->meta);
    free(idx->meta_arena);
    if (idx->keys_share == NULL ||
        atomic_fetch_sub_explicit(&idx->keys_share->refs, 1, memory_order_acq_rel) == 1) {
        lds__hashtab_free(&idx->keys);
        free(idx->keys_share);
    }
    pthread_mutex_destroy(&idx->key_lock);
    lds__hashtab *ids = atomic_load(&idx->ids_table);
    lds__hashtab_free(ids);
    free(ids);
    free(atomic_load(&idx->inv_norms));
    pthread_mutex_destroy(&idx->id_lock);
    free(idx);
}

static void index_destroy_cb(void *idx)
{
    index_destroy((lds_index *)idx);
}

void lds_index_free(lds_index *idx)
{
    if (!idx)
        return;
    void (*release)(void *) = idx->release;
    void *ctx = idx->release_ctx;
    index_destroy(idx);
    if (release)
        release(ctx);
}

#define AT(ps, x) ((ps)->base + (x))

/* F1-F4: the footer at payload offset F = L - 40, and where it puts the table. */
static lds_status check_footer(parser *ps, uint64_t *table_length)
{
    const uint8_t *p = ps->p;
    uint64_t F = ps->length - LDS__TAIL;
    lds_error *err = ps->err;

    /* F1 */
    LDS__FAIL_IF(memcmp(p + F + 24, LDS__FOOTER_MAGIC, 8) != 0, err, LDS_E_BAD_SECTION,
                 "footer.magic", AT(ps, F + 24),
                 "the 8 bytes before the checksum are not \"LDSTABLE\"");
    /* F2 */
    LDS__FAIL_IF(lds__ld64(p + F + 16) != 0, err, LDS_E_BAD_SECTION, "footer.reserved",
                 AT(ps, F + 16), "%016llx, must be zero",
                 (unsigned long long)lds__ld64(p + F + 16));
    uint64_t T = lds__ld64(p + F);
    /* F3 */
    LDS__FAIL_IF(T > F, err, LDS_E_BAD_SECTION, "footer.table_offset", AT(ps, F),
                 "%llu is past the footer at payload offset %llu", (unsigned long long)T,
                 (unsigned long long)F);
    /* F3 */
    LDS__FAIL_IF(T % 64 != 0, err, LDS_E_BAD_SECTION, "footer.table_offset", AT(ps, F),
                 "%llu is not a multiple of 64", (unsigned long long)T);
    uint64_t tl = lds__ld64(p + F + 8);
    /* F4 */
    LDS__FAIL_IF(tl < LDS__TABLE_HEAD, err, LDS_E_BAD_SECTION, "footer.table_length", AT(ps, F + 8),
                 "%llu is shorter than the 32-byte table head", (unsigned long long)tl);
    /* F4 */
    LDS__FAIL_IF(tl != F - T, err, LDS_E_BAD_SECTION, "footer.table_length", AT(ps, F + 8),
                 "%llu, but the table runs from %llu to the footer at %llu (%llu bytes)",
                 (unsigned long long)tl, (unsigned long long)T, (unsigned long long)F,
                 (unsigned long long)(F - T));
    ps->table = T;
    *table_length = tl;
    return LDS_OK;
}

/* T1-T11: the table's 32-byte head at payload offset ps->table, whose length
   the footer gives as `tl`; the entries' count and size go to *count_out, *es_out. */
static lds_status check_table_head(parser *ps, uint64_t tl, uint32_t *count_out, uint32_t *es_out)
{
    uint64_t T = ps->table;
    lds_error *err = ps->err;
    const uint8_t *t = ps->p + T;
    ps->rows = lds__ld64(t);
    /* T1 */
    LDS__FAIL_IF(ps->rows > ps->limits.max_rows, err, LDS_E_LIMIT, "table.rows", AT(ps, T),
                 "%llu is above max_rows %llu", (unsigned long long)ps->rows,
                 (unsigned long long)ps->limits.max_rows);
    ps->dim = lds__ld32(t + 8);
    /* T2 */
    LDS__FAIL_IF(ps->dim == 0, err, LDS_E_BAD_VALUE, "table.dim", AT(ps, T + 8),
                 "0, a row needs at least one element");
    /* T3 */
    LDS__FAIL_IF(ps->dim > ps->limits.max_dim, err, LDS_E_LIMIT, "table.dim", AT(ps, T + 8),
                 "%u is above max_dim %llu", (unsigned)ps->dim,
                 (unsigned long long)ps->limits.max_dim);
    uint16_t dtype = lds__ld16(t + 12);
    ps->dtype = (lds_dtype)dtype;
    /* T4 */
    LDS__FAIL_IF(lds_dtype_size(ps->dtype) == 0, err, LDS_E_BAD_VALUE, "table.dtype",
                 AT(ps, T + 12), "%u is not a known element type", (unsigned)dtype);
    uint16_t metric = lds__ld16(t + 14);
    ps->metric = metric;
    /* T5 */
    LDS__FAIL_IF(!lds_metric_name((lds_metric)metric), err, LDS_E_BAD_VALUE, "table.metric",
                 AT(ps, T + 14), "%u is not a known metric", (unsigned)metric);
    uint32_t scale_bits = lds__ld32(t + 16);
    ps->scale_bits = scale_bits;
    float scale = lds__bits_f32(scale_bits);
    /* T6 */
    LDS__FAIL_IF(ps->dtype == LDS_DTYPE_I8 ? !(isfinite(scale) && scale > 0.0f) : scale_bits != 0,
                 err, LDS_E_BAD_VALUE, "table.i8_scale", AT(ps, T + 16), "%g (bits %08x) %s",
                 (double)scale, (unsigned)scale_bits,
                 ps->dtype == LDS_DTYPE_I8 ? "must be finite and above 0"
                                           : "must be zero for a dtype other than i8");
    ps->flags = lds__ld32(t + 20);
    /* T7 */
    LDS__FAIL_IF(ps->flags & LDS__MUST_UNDERSTAND & ~LDS__TF_KNOWN, err, LDS_E_UNSUPPORTED,
                 "table.flags", AT(ps, T + 20),
                 "%08x sets must-understand bits this library does not know", (unsigned)ps->flags);
    /* T8 */
    LDS__FAIL_IF((ps->flags & (LDS__TF_KEYS_UNIQUE | LDS__TF_KEYS_OFFSETS32)) &&
                     !(ps->flags & LDS__TF_HAS_KEYS),
                 err, LDS_E_BAD_VALUE, "table.flags", AT(ps, T + 20),
                 "%08x sets KEYS_UNIQUE or KEYS_OFFSETS32 without HAS_KEYS", (unsigned)ps->flags);
    uint32_t count = lds__ld32(t + 24);
    /* T9 */
    LDS__FAIL_IF(count == 0, err, LDS_E_BAD_SECTION, "table.section_count", AT(ps, T + 24),
                 "0, the vectors section is required");
    uint32_t es = lds__ld32(t + 28);
    /* T10 */
    LDS__FAIL_IF(es < LDS__ENTRY_SIZE || es % 8 != 0, err, LDS_E_BAD_SECTION, "table.entry_size",
                 AT(ps, T + 28), "%u must be at least 24 and a multiple of 8", (unsigned)es);
    uint64_t need = LDS__TABLE_HEAD + (uint64_t)count * es; /* < 2^64: both factors < 2^32 */
    /* T11 */
    LDS__FAIL_IF(need != tl, err, LDS_E_BAD_SECTION, "table.section_count", AT(ps, T + 24),
                 "%u entries of %u bytes need a %llu-byte table, but table_length is %llu",
                 (unsigned)count, (unsigned)es, (unsigned long long)need, (unsigned long long)tl);
    *count_out = count;
    *es_out = es;
    return LDS_OK;
}

/* S1-S7: section entry i at payload offset E. Its section must start at the end
   of the one before (*prev_end_io) rounded up to 64; it is recorded when its
   kind is one of the four, and *prev_end_io moves to its end. */
static lds_status check_entry(parser *ps, uint32_t i, uint64_t E, uint64_t *prev_end_io)
{
    const uint8_t *p = ps->p;
    uint64_t T = ps->table;
    uint64_t prev_end = *prev_end_io;
    lds_error *err = ps->err;
    uint32_t kind = lds__ld32(p + E);
    uint32_t eflags = lds__ld32(p + E + 4);
    uint64_t off = lds__ld64(p + E + 8);
    uint64_t len = lds__ld64(p + E + 16);
    section *slot = NULL;
    switch (kind) {
    case LDS__KIND_VECTORS:
        slot = &ps->vectors;
        break;
    case LDS__KIND_IDS:
        slot = &ps->ids;
        break;
    case LDS__KIND_KEYS:
        slot = &ps->keys;
        break;
    case LDS__KIND_METADATA:
        slot = &ps->meta;
        break;
    default:
        break;
    }
    /* S1 */
    LDS__FAIL_IF_MSG(
        i == 0 && kind != LDS__KIND_VECTORS, err, LDS_E_BAD_SECTION, "section.kind", AT(ps, E),
        "section[0].kind: %u, the first section must be the vectors (kind 1)", (unsigned)kind);
    /* S1 */
    LDS__FAIL_IF_MSG(slot && slot->present, err, LDS_E_BAD_SECTION, "section.kind", AT(ps, E),
                     "section[%u].kind: %u repeats section[%u]", (unsigned)i, (unsigned)kind,
                     slot->i);
    /* S2 */
    LDS__FAIL_IF_MSG(!slot && !(kind & LDS__KIND_OPTIONAL), err, LDS_E_UNSUPPORTED, "section.kind",
                     AT(ps, E), "section[%u].kind: %u is unknown and not marked optional",
                     (unsigned)i, (unsigned)kind);
    /* S3 */
    LDS__FAIL_IF_MSG(eflags & LDS__MUST_UNDERSTAND, err, LDS_E_UNSUPPORTED, "section.flags",
                     AT(ps, E + 4),
                     "section[%u].flags: %08x sets must-understand bits this library does "
                     "not know",
                     (unsigned)i, (unsigned)eflags);
    /* S4 */
    LDS__FAIL_IF_MSG(off > T, err, LDS_E_BAD_SECTION, "section.offset", AT(ps, E + 8),
                     "section[%u].offset: %llu is past the section area end %llu", (unsigned)i,
                     (unsigned long long)off, (unsigned long long)T);
    uint64_t expected = lds__align_up(prev_end, ps->align);
    /* S5 */
    LDS__FAIL_IF_MSG(i == 0 && off != 0, err, LDS_E_BAD_SECTION, "section.offset", AT(ps, E + 8),
                     "section[0].offset: %llu, the vectors must start at payload offset 0",
                     (unsigned long long)off);
    /* S5 */
    LDS__FAIL_IF_MSG(off < prev_end, err, LDS_E_BAD_SECTION, "section.offset", AT(ps, E + 8),
                     "section[%u].offset: %llu overlaps section[%u], which ends at %llu",
                     (unsigned)i, (unsigned long long)off, (unsigned)(i - 1),
                     (unsigned long long)prev_end);
    /* S5 */
    LDS__FAIL_IF_MSG(off != expected, err, LDS_E_BAD_SECTION, "section.offset", AT(ps, E + 8),
                     "section[%u].offset: %llu must be %llu, the end of section[%u] rounded "
                     "up to %llu (no unexplained bytes)",
                     (unsigned)i, (unsigned long long)off, (unsigned long long)expected,
                     (unsigned)(i - 1), (unsigned long long)ps->align);
    /* S6 */
    LDS__FAIL_IF_MSG(len > T - off, err, LDS_E_BAD_SECTION, "section.length", AT(ps, E + 16),
                     "section[%u].length: %llu runs past the section area end %llu (the "
                     "section starts at %llu)",
                     (unsigned)i, (unsigned long long)len, (unsigned long long)T,
                     (unsigned long long)off);
    uint64_t end = off + len;
    /* The padding runs to the next section's start, or to the table after the last
       section (at align64 of its end, S8): a chunk-aligned rounding may pass T. */
    uint64_t pad_end = lds__align_up(end, ps->align);
    if (pad_end > T)
        pad_end = T; /* align64(end) <= T: T is a multiple of 64 */
    /* S7 */
    for (uint64_t b = end; b < pad_end; b++)
        LDS__FAIL_IF_MSG(p[b] != 0, err, LDS_E_BAD_SECTION, "section.padding", AT(ps, b),
                         "section[%u].padding: byte %02x after the section, padding must be "
                         "zero",
                         (unsigned)i, p[b]);
    if (slot) {
        slot->present = true;
        slot->i = i;
        slot->entry = E;
        slot->offset = off;
        slot->length = len;
    }
    *prev_end_io = end;
    return LDS_OK;
}

/* The footer (F1-F4), the table head (T1-T11), each section entry (S1-S7),
   then what the entries must make together (S8, S9). */
static lds_status check_footer_and_table(parser *ps)
{
    uint64_t tl = 0;
    uint32_t count = 0, es = 0;
    lds_status st = check_footer(ps, &tl);
    if (st == LDS_OK)
        st = check_table_head(ps, tl, &count, &es);
    if (st != LDS_OK)
        return st;
    uint64_t T = ps->table, F = ps->length - LDS__TAIL;
    lds_error *err = ps->err;
    uint64_t prev_end = 0;
    for (uint32_t i = 0; i < count; i++)
        if ((st = check_entry(ps, i, T + LDS__TABLE_HEAD + (uint64_t)i * es, &prev_end)) != LDS_OK)
            return st;
    /* S8 */
    LDS__FAIL_IF(lds__align64(prev_end) != T, err, LDS_E_BAD_SECTION, "footer.table_offset",
                 AT(ps, F), "%llu leaves bytes %llu..%llu after section[%u] unexplained",
                 (unsigned long long)T, (unsigned long long)lds__align64(prev_end),
                 (unsigned long long)(T - 1), (unsigned)(count - 1));
    bool has_ids = ps->flags & LDS__TF_HAS_IDS, has_keys = ps->flags & LDS__TF_HAS_KEYS;
    /* S9 */
    LDS__FAIL_IF(has_ids != ps->ids.present, err, LDS_E_BAD_SECTION, "table.flags", AT(ps, T + 20),
                 "%s",
                 has_ids ? "HAS_IDS is set but there is no ids section"
                         : "HAS_IDS is clear but there is an ids section");
    /* S9 */
    LDS__FAIL_IF(has_keys != ps->keys.present, err, LDS_E_BAD_SECTION, "table.flags",
                 AT(ps, T + 20), "%s",
                 has_keys ? "HAS_KEYS is set but there is no keys section"
                          : "HAS_KEYS is clear but there is a keys section");
    return LDS_OK;
}
static lds_status check_sized(parser *ps, const section *s, uint64_t per_row, const char *what)
{
    uint64_t need;
    /* I1 (V1 is checked before, with rows x dim) */
    LDS__FAIL_IF(__builtin_mul_overflow(ps->rows, per_row, &need), ps->err, LDS_E_OVERFLOW,
                 "table.rows", AT(ps, ps->table), "%llu rows of %llu bytes of %s overflow 64 bits",
                 (unsigned long long)ps->rows, (unsigned long long)per_row, what);
    /* V2, I2 */
    LDS__FAIL_IF_MSG(need != s->length, ps->err, LDS_E_BAD_SECTION, "section.length",
                     AT(ps, s->entry + 16),
                     "section[%u].length: %llu, but %llu rows of %llu bytes of %s need %llu", s->i,
                     (unsigned long long)s->length, (unsigned long long)ps->rows,
                     (unsigned long long)per_row, what, (unsigned long long)need);
    return LDS_OK;
}

static uint64_t key_off(const uint8_t *offs, unsigned w, uint64_t r)
{
    return w == 4 ? lds__ld32(offs + r * 4) : lds__ld64(offs + r * 8);
}

/* K3-K5 without branches: whether every offset passes. If not, the loop of
   check_keys finds and reports the first fault. (Non-decreasing offsets that
   end at blen never exceed it.) */
static bool offsets_ok(const uint8_t *offs, unsigned w, uint64_t rows, uint64_t blen,
                       uint64_t max_key)
{
    bool bad = key_off(offs, w, 0) != 0 || key_off(offs, w, rows) != blen;
    uint64_t prev = 0;
    if (w == 4) {
        for (uint64_t r = 1; r <= rows; r++) {
            uint64_t o = lds__ld32(offs + r * 4);
            bad |= (o < prev) | (o - prev > max_key);
            prev = o;
        }
    } else {
        for (uint64_t r = 1; r <= rows; r++) {
            uint64_t o = lds__ld64(offs + r * 8);
            bad |= (o < prev) | (o - prev > max_key);
            prev = o;
        }
    }
    return !bad;
}

static lds_status check_keys(parser *ps, lds_index *idx)
{
    const section *s = &ps->keys;
    unsigned w = (ps->flags & LDS__TF_KEYS_OFFSETS32) ? 4 : 8;
    uint64_t n, offs_len;
    /* K1 */
    LDS__FAIL_IF(__builtin_add_overflow(ps->rows, 1, &n) || __builtin_mul_overflow(n, w, &offs_len),
                 ps->err, LDS_E_OVERFLOW, "table.rows", AT(ps, ps->table),
                 "%llu + 1 key offsets of %u bytes overflow 64 bits", (unsigned long long)ps->rows,
                 w);
    /* K2 */
    LDS__FAIL_IF_MSG(
        offs_len > s->length, ps->err, LDS_E_BAD_SECTION, "section.length", AT(ps, s->entry + 16),
        "section[%u].length: %llu, fewer than the %llu bytes of %llu key offsets", s->i,
        (unsigned long long)s->length, (unsigned long long)offs_len, (unsigned long long)n);
    /* K8: in a CHUNK_ALIGNED file the key bytes start on the chunk boundary at or
       after the offsets' end (format.md §4.4), the bytes between them zero. */
    uint64_t offs_end = s->offset + offs_len; /* <= T: K2 */
    uint64_t gap = lds__align_up(offs_end, ps->align == 64 ? 1 : ps->align) - offs_end;
    LDS__FAIL_IF_MSG(gap > s->length - offs_len, ps->err, LDS_E_BAD_SECTION, "section.length",
                     AT(ps, s->entry + 16),
                     "section[%u].length: %llu ends before the key bytes, which start at the "
                     "chunk boundary %llu after the %llu bytes of key offsets",
                     s->i, (unsigned long long)s->length, (unsigned long long)(offs_end + gap),
                     (unsigned long long)offs_len);
    for (uint64_t b = offs_end; b < offs_end + gap; b++)
        LDS__FAIL_IF_MSG(ps->p[b] != 0, ps->err, LDS_E_BAD_SECTION, "keys.padding", AT(ps, b),
                         "keys.padding: byte %02x between the key offsets and the key bytes, "
                         "padding must be zero",
                         ps->p[b]);
    ps->keys_gap = gap;
    const uint8_t *offs = ps->p + s->offset;
    const uint8_t *bytes = offs + offs_len + gap;
    if (ps->copy_offsets) {
        /* Validate a copy and keep only the copy (idx->owned until the caller moves it),
           so a payload rewritten underneath cannot change an offset after its check. */
        uint8_t *copy = (uint8_t *)malloc(offs_len > 0 ? (size_t)offs_len : 1);
        LDS__FAIL_IF_MSG(!copy, ps->err, LDS_E_NOMEM, NULL, 0,
                         "no memory to copy %llu bytes of key offsets",
                         (unsigned long long)offs_len);
        memcpy(copy, offs, (size_t)offs_len);
        idx->owned = copy;
        offs = copy;
    }
    uint64_t blen = s->length - offs_len - gap;
    uint64_t bytes_at = s->offset + offs_len + gap;
    /* The loop that names the first fault runs only when there is one. */
    bool ok = offsets_ok(offs, w, ps->rows, blen, ps->limits.max_key_bytes);
    uint64_t prev = 0;
    for (uint64_t r = ok ? ps->rows + 1 : 0; r <= ps->rows; r++) {
        uint64_t o = key_off(offs, w, r);
        uint64_t at = AT(ps, s->offset + r * w);
        /* K3 */
        LDS__FAIL_IF_MSG(r == 0 && o != 0, ps->err, LDS_E_BAD_SECTION, "keys.offset", at,
                         "keys.offset[0]: %llu, must be 0", (unsigned long long)o);
        /* K3 */
        LDS__FAIL_IF_MSG(o < prev, ps->err, LDS_E_BAD_SECTION, "keys.offset", at,
                         "keys.offset[%llu]: %llu is less than keys.offset[%llu] %llu",
                         (unsigned long long)r, (unsigned long long)o, (unsigned long long)(r - 1),
                         (unsigned long long)prev);
        /* K3 */
        LDS__FAIL_IF_MSG(o > blen, ps->err, LDS_E_BAD_SECTION, "keys.offset", at,
                         "keys.offset[%llu]: %llu is past the key bytes end %llu",
                         (unsigned long long)r, (unsigned long long)o, (unsigned long long)blen);
        /* K4 */
        LDS__FAIL_IF_MSG(
            r > 0 && o - prev > ps->limits.max_key_bytes, ps->err, LDS_E_LIMIT, "keys.offset", at,
            "keys.offset[%llu]: the key of row %llu is %llu bytes, above "
            "max_key_bytes %llu",
            (unsigned long long)r, (unsigned long long)(r - 1), (unsigned long long)(o - prev),
            (unsigned long long)ps->limits.max_key_bytes);
        /* K5 */
        LDS__FAIL_IF_MSG(r == ps->rows && o != blen, ps->err, LDS_E_BAD_SECTION, "keys.offset", at,
                         "keys.offset[%llu]: %llu, must equal the key bytes length %llu",
                         (unsigned long long)r, (unsigned long long)o, (unsigned long long)blen);
        prev = o;
    }
    if (lds__parse_test_hook)
        lds__parse_test_hook("keys.offset checked");
    /* K6. A key of ASCII bytes only is valid whatever the key boundaries, so
       one scan of the whole bytes area finds the keys that need the full check. */
    uint64_t r = 0;
    for (uint64_t pos = 0;;) {
        pos += lds__ascii_prefix(bytes + pos, (size_t)(blen - pos));
        if (pos == blen)
            break;
        /* The key holding byte `pos`: the lowest row >= r whose end is above pos. */
        uint64_t hi = ps->rows - 1;
        while (r < hi) {
            uint64_t mid = r + (hi - r) / 2;
            if (key_off(offs, w, mid + 1) > pos)
                hi = mid;
            else
                r = mid + 1;
        }
        uint64_t a = key_off(offs, w, r), b = key_off(offs, w, r + 1);
        size_t bad;
        const char *why;
        /* K6 */
        LDS__FAIL_IF(!lds__utf8_valid(bytes + a, (size_t)(b - a), &bad, &why), ps->err,
                     LDS_E_BAD_UTF8, "keys.bytes", AT(ps, bytes_at + a + bad),
                     "the key of row %llu is not valid UTF-8 (%s)", (unsigned long long)r, why);
        pos = b;
    }
    /* K7 (keys unique where KEYS_UNIQUE says so) is checked where the key
       table is built: at the first lookup or lds_index_check_keys (ADR 0010). */
    idx->key_bytes_at = AT(ps, bytes_at);
    idx->key_width = w;
    return LDS_OK;
}

static lds_status check_text(parser *ps, uint64_t at, uint32_t n, const char *field,
                             const char *what, unsigned j)
{
    const uint8_t *s = ps->p + at;
    size_t bad;
    const char *why;
    /* M5 */
    LDS__FAIL_IF_MSG(!lds__utf8_valid(s, n, &bad, &why), ps->err, LDS_E_BAD_UTF8, field,
                     AT(ps, at + bad), "metadata[%u].%s: not valid UTF-8 (%s)", j, what, why);
    const void *nul = memchr(s, 0, n);
    /* M6 */
    LDS__FAIL_IF_MSG(nul, ps->err, LDS_E_BAD_VALUE, field,
                     AT(ps, at + (uint64_t)((const uint8_t *)nul - s)),
                     "metadata[%u].%s: holds a NUL byte", j, what);
    return LDS_OK;
}

/* A metadata key against the one at payload offset `at` (its length precedes it). */
typedef struct meta_probe {
    const uint8_t *p, *key;
    uint32_t len;
} meta_probe;

static bool meta_probe_eq(const void *ctx, uint64_t at)
{
    const meta_probe *m = (const meta_probe *)ctx;
    return lds__ld32(m->p + at - 4) == m->len && memcmp(m->p + at, m->key, m->len) == 0;
}

static bool text_is(const uint8_t *s, uint32_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

/* M3-M4: the length field at payload offset `at` of entry j's key (part 0) or
   value (part 1), and its bytes, inside the section that ends at `end`. */
static lds_status meta_length(parser *ps, unsigned j, int part, uint64_t at, uint64_t end,
                              uint32_t *n_out)
{
    const char *field = part ? "metadata.value_length" : "metadata.key_length";
    const char *name = part ? "value_length" : "key_length";
    /* M3 */
    LDS__FAIL_IF_MSG(end - at < 4, ps->err, LDS_E_BAD_SECTION, field, AT(ps, at),
                     "metadata[%u].%s: runs past the section end %llu", j, name,
                     (unsigned long long)end);
    uint32_t n = lds__ld32(ps->p + at);
    /* M4 */
    LDS__FAIL_IF_MSG(part == 0 && n == 0, ps->err, LDS_E_BAD_VALUE, field, AT(ps, at),
                     "metadata[%u].key_length: 0, keys must not be empty", j);
    /* M3 */
    LDS__FAIL_IF_MSG(n > end - at - 4, ps->err, LDS_E_BAD_SECTION, field, AT(ps, at),
                     "metadata[%u].%s: %u bytes run past the section end %llu", j, name,
                     (unsigned)n, (unsigned long long)end);
    *n_out = n;
    return LDS_OK;
}

/* M3-M8 for metadata entry j, which starts `*pos` bytes into the section: moves
   *pos past it, adds its NUL-terminated strings' bytes to *arena and its key to
   `names`. */
static lds_status check_meta_entry(parser *ps, lds__hashtab *names, unsigned j, uint64_t *pos,
                                   uint64_t *arena)
{
    const uint8_t *p = ps->p;
    uint64_t off = ps->meta.offset, end = off + ps->meta.length;
    uint32_t kl = 0, vl = 0; /* set by meta_length on LDS_OK; gcc -O3 cannot see it */
    lds_status st = meta_length(ps, j, 0, off + *pos, end, &kl);
    if (st != LDS_OK)
        return st;
    uint64_t kat = off + *pos + 4;
    *pos += 4 + (uint64_t)kl;
    if ((st = meta_length(ps, j, 1, off + *pos, end, &vl)) != LDS_OK)
        return st;
    uint64_t vat = off + *pos + 4;
    *pos += 4 + (uint64_t)vl;
    if ((st = check_text(ps, kat, kl, "metadata.key", "key", j)) != LDS_OK ||
        (st = check_text(ps, vat, vl, "metadata.value", "value", j)) != LDS_OK)
        return st;
    /* A "row" of this table is the payload offset of a key. */
    meta_probe mp = {p, p + kat, kl};
    /* M7 */
    LDS__FAIL_IF_MSG(lds__hashtab_insert(names, lds__hash_key(names->hk, p + kat, kl), kat,
                                         meta_probe_eq, &mp) != UINT64_MAX,
                     ps->err, LDS_E_BAD_VALUE, "metadata.key", AT(ps, kat),
                     "metadata[%u].key: \"%.*s\" appears twice", j, (int)(kl > 64 ? 64 : kl),
                     (const char *)(p + kat));
    const char *metric_name = lds_metric_name((lds_metric)ps->metric);
    bool normalized = ps->flags & LDS__TF_NORMALIZED;
    /* M8 */
    LDS__FAIL_IF_MSG(text_is(p + kat, kl, "metric") && !text_is(p + vat, vl, metric_name), ps->err,
                     LDS_E_BAD_VALUE, "metadata.value", AT(ps, vat),
                     "metadata[%u].value: metric \"%.*s\" disagrees with table.metric %s", j,
                     (int)(vl > 64 ? 64 : vl), (const char *)(p + vat), metric_name);
    /* M8 */
    LDS__FAIL_IF_MSG(
        text_is(p + kat, kl, "normalized") && !text_is(p + vat, vl, normalized ? "true" : "false"),
        ps->err, LDS_E_BAD_VALUE, "metadata.value", AT(ps, vat),
        "metadata[%u].value: normalized \"%.*s\" disagrees with the table's "
        "NORMALIZED flag (%s)",
        j, (int)(vl > 64 ? 64 : vl), (const char *)(p + vat), normalized ? "true" : "false");
    *arena += (uint64_t)kl + vl + 2;
    return LDS_OK;
}

static lds_status check_meta(parser *ps, lds_index *idx)
{
    const section *s = &ps->meta;
    const uint8_t *p = ps->p;
    uint64_t off = s->offset, len = s->length;
    /* M1 */
    LDS__FAIL_IF_MSG(len > ps->limits.max_metadata_bytes, ps->err, LDS_E_LIMIT, "section.length",
                     AT(ps, s->entry + 16),
                     "section[%u].length: metadata of %llu bytes is above max_metadata_bytes "
                     "%llu",
                     s->i, (unsigned long long)len,
                     (unsigned long long)ps->limits.max_metadata_bytes);
    /* M2 */
    LDS__FAIL_IF(len < 4, ps->err, LDS_E_BAD_SECTION, "metadata.count", AT(ps, off),
                 "the %llu-byte section cannot hold its 4-byte count", (unsigned long long)len);
    uint32_t count = lds__ld32(p + off);
    /* M2 */
    LDS__FAIL_IF((uint64_t)count * 8 > len - 4, ps->err, LDS_E_BAD_SECTION, "metadata.count",
                 AT(ps, off), "%u entries cannot fit in %llu bytes", (unsigned)count,
                 (unsigned long long)len);
    lds__hashtab names;
    LDS__FAIL_IF_MSG(lds__hashtab_init(&names, count, off + len) != LDS_OK, ps->err, LDS_E_NOMEM,
                     NULL, 0, "no memory for %u metadata entries", (unsigned)count);
    lds_status st = LDS_OK;
    uint64_t pos = 4, arena = 0;
    for (uint32_t j = 0; j < count && st == LDS_OK; j++)
        st = check_meta_entry(ps, &names, (unsigned)j, &pos, &arena);
    lds__hashtab_free(&names);
    if (st != LDS_OK)
        return st;
    /* M9 */
    LDS__FAIL_IF_MSG(pos != len, ps->err, LDS_E_BAD_SECTION, "section.length",
                     AT(ps, s->entry + 16),
                     "section[%u].length: %llu, but the metadata entries end after %llu bytes",
                     s->i, (unsigned long long)len, (unsigned long long)pos);

    /* Valid: copy into NUL-terminated strings. arena <= len + 2 * count. */
    if (count > 0) {
        idx->meta = (const char **)calloc((size_t)count * 2, sizeof(char *));
        idx->meta_arena = (char *)malloc((size_t)arena);
        LDS__FAIL_IF_MSG(!idx->meta || !idx->meta_arena, ps->err, LDS_E_NOMEM, NULL, 0,
                         "no memory for %llu bytes of metadata", (unsigned long long)arena);
    }
    char *a = idx->meta_arena;
    uint64_t left = arena;
    pos = off + 4;
    for (uint32_t j = 0; j < count; j++) {
        for (int part = 0; part < 2; part++) {
            /* Lengths are read again here: bound them by what was checked, so a
               payload rewritten since (a shared mapping) cannot overrun the arena. */
            uint32_t n = lds__ld32(p + pos);
            /* no rule of format.md: a payload that changed after M3 passed */
            LDS__FAIL_IF_MSG((uint64_t)n + 1 > left || pos + 4 + (uint64_t)n > off + len, ps->err,
                             LDS_E_BAD_SECTION, "metadata.count", AT(ps, pos),
                             "metadata[%u]: the section changed while it was parsed", (unsigned)j);
            left -= (uint64_t)n + 1;
            memcpy(a, p + pos + 4, n);
            a[n] = '\0';
            idx->meta[2 * j + (unsigned)part] = a;
            a += n + 1;
            pos += 4 + (uint64_t)n;
        }
    }
    idx->meta_count = count;
    return LDS_OK;
}

/* Copies the caller's options over the defaults, refusing sizes outside the
   rule of lodestar.h ("Struct sizes") rather than falling back to defaults. */
static lds_status load_options(const lds_parse_options *in, lds_parse_options *o, lds_limits *lim,
                               lds_error *err)
{
    lds_parse_options_default(o);
    /* no rule of format.md: the API's struct-size rule */
    LDS__FAIL_IF_MSG(in && (in->size < LDS_PARSE_OPTIONS_MIN_SIZE || in->size > sizeof *in), err,
                     LDS_E_INVALID_ARG, "lds_parse_options.size", 0,
                     "lds_parse_options.size is %zu (accepted: %zu..%zu); set it with "
                     "lds_parse_options_default",
                     in->size, LDS_PARSE_OPTIONS_MIN_SIZE, sizeof *in);
    if (in)
        memcpy(o, in, in->size);
    /* no rule of format.md: the API's struct-size rule */
    LDS__FAIL_IF_MSG(o->limits.size < LDS_LIMITS_MIN_SIZE || o->limits.size > sizeof *lim, err,
                     LDS_E_INVALID_ARG, "limits.size", 0,
                     "lds_parse_options: limits.size is %zu (accepted: %zu..%zu); set it with "
                     "lds_limits_default",
                     o->limits.size, LDS_LIMITS_MIN_SIZE, sizeof *lim);
    lds_limits_default(lim);
    memcpy(lim, &o->limits, o->limits.size);
    lim->size = sizeof *lim;
    return LDS_OK;
}

/* P0-P2: the payload's length and its checksum (format 1.0) or chunks (1.1, whose
   chunks cover the 1.0 payload [0, D): ps->length becomes D). Sets *stored to the
   checksum the payload carries and *verified when it was compared. */
static lds_status check_payload(parser *ps, const lds_parse_options *o, uint64_t *stored,
                                bool *verified)
{
    lds_error *err = ps->err;
    uint64_t L = ps->length;
    const lds_header *hd = o->header;
    bool chunked = lds_header_chunked(hd);
    *verified = false;
    ps->align = chunked && (hd->flags & LDS_HEADER_CHUNK_ALIGNED) ? hd->chunk_bytes : 64;
    if (chunked) {
        /* Format 1.1 (format.md §2.5): the chunks cover the 1.0 payload [0, D), the
           table fills [D, L); the header's geometry passed C1-C4 when it was decoded. */
        /* P0 */
        LDS__FAIL_IF(L != hd->payload_length, err,
                     L < hd->payload_length ? LDS_E_TRUNCATED : LDS_E_TRAILING, "payload",
                     AT(ps, L), "%llu bytes, but the header declares %llu", (unsigned long long)L,
                     (unsigned long long)hd->payload_length);
        /* A loader that hashed the chunks as they arrived says so (chunks_verified),
           and the bytes are not read a second time. */
        if (o->verify_checksum && !o->chunks_verified) {
            lds_status cst = lds_payload_verify_chunks(hd, ps->p, (size_t)L, o->verify_threads,
                                                       NULL, NULL, NULL, err);
            if (cst != LDS_OK) {
                lds__error_rebase(err, ps->base - LDS_HEADER_SIZE);
                return cst;
            }
        }
        *verified = o->verify_checksum;
        ps->length = L = hd->chunk_table_offset;
    } else {
        /* P1 */
        LDS__FAIL_IF(L < LDS__TAIL, err, LDS_E_TRUNCATED, "payload", AT(ps, L),
                     "%llu bytes cannot hold the %d-byte footer and checksum",
                     (unsigned long long)L, LDS__TAIL);
    }
    *stored = lds__ld64(ps->p + L - LDS_CHECKSUM_SIZE);
    if (o->verify_checksum && !chunked) {
        /* The stream loader hashes while it reads (has_precomputed_hash), so a
           payload of gigabytes is not read twice. */
        uint64_t h = o->has_precomputed_hash ? o->precomputed_hash
                                             : lds__xxh3(ps->p, (size_t)(L - LDS_CHECKSUM_SIZE));
        /* P2 */
        LDS__FAIL_IF(h != *stored, err, LDS_E_CHECKSUM, "checksum", AT(ps, L - LDS_CHECKSUM_SIZE),
                     "stored %016llx, computed %016llx over payload bytes 0..%llu%s",
                     (unsigned long long)*stored, (unsigned long long)h,
                     (unsigned long long)(L - LDS_CHECKSUM_SIZE - 1),
                     o->has_precomputed_hash ? " while reading" : "");
        *verified = true;
    }
    return LDS_OK;
}

/* A zeroed index with its locks and lazy tables ready. */
static lds_status index_new(lds_index **out, lds_error *err)
{
    lds_index *idx = (lds_index *)calloc(1, sizeof *idx);
    LDS__FAIL_IF_MSG(!idx, err, LDS_E_NOMEM, NULL, 0, "no memory for the index");
    if (pthread_mutex_init(&idx->id_lock, NULL) != 0) {
        free(idx);
        return lds__fail(err, LDS_E_NOMEM, NULL, 0, "cannot initialize the id table lock");
    }
    if (pthread_mutex_init(&idx->key_lock, NULL) != 0) {
        pthread_mutex_destroy(&idx->id_lock);
        free(idx);
        return lds__fail(err, LDS_E_NOMEM, NULL, 0, "cannot initialize the key table lock");
    }
    atomic_init(&idx->ids_table, NULL);
    atomic_init(&idx->key_state, 0);
    atomic_init(&idx->inv_norms, NULL);
    *out = idx;
    return LDS_OK;
}

/* Points the index at its sections: in the payload (borrowed), or in a copy of
   [0, table_offset) when o->copy. The key offsets are the validated copy that
   check_keys left in idx->owned when copy_key_offsets asked for one: bytes a
   caller may still change must not be trusted twice. */
static lds_status index_place(const parser *ps, const lds_parse_options *o, lds_index *idx)
{
    const uint8_t *base = ps->p;
    uint8_t *offs_copy = ps->copy_offsets && ps->keys.present ? (uint8_t *)idx->owned : NULL;
    uint64_t offs_len = ps->keys.present ? (ps->rows + 1) * idx->key_width : 0;
    if (o->copy && ps->table > 0) {
        uint64_t cap = ps->table; /* a multiple of 64, as aligned_alloc requires */
        idx->owned = aligned_alloc(64, (size_t)cap);
        if (!idx->owned) {
            free(offs_copy);
            return lds__fail(ps->err, LDS_E_NOMEM, NULL, 0, "no memory to copy %llu payload bytes",
                             (unsigned long long)cap);
        }
        memcpy(idx->owned, ps->p, (size_t)ps->table);
        base = (const uint8_t *)idx->owned;
        if (offs_copy) { /* the offsets as validated, not as they may read now */
            memcpy((uint8_t *)idx->owned + ps->keys.offset, offs_copy, (size_t)offs_len);
            free(offs_copy);
            offs_copy = NULL;
        }
    }
    idx->vectors = base;
    idx->ids = ps->ids.present ? base + ps->ids.offset : NULL;
    if (ps->keys.present) {
        idx->key_offsets = offs_copy ? offs_copy : base + ps->keys.offset;
        idx->key_bytes = base + ps->keys.offset + offs_len + ps->keys_gap;
    }
    return LDS_OK;
}

lds_status lds_index_from_payload(const void *payload, size_t length, const lds_parse_options *opts,
                                  lds_index **out, lds_error *err)
{
    /* no rule of format.md: the API's arguments */
    LDS__FAIL_IF_MSG(!out, err, LDS_E_INVALID_ARG, NULL, 0, "lds_index_from_payload: out is NULL");
    *out = NULL;
    LDS__FAIL_IF_MSG(!payload && length > 0, err, LDS_E_INVALID_ARG, NULL, 0,
                     "lds_index_from_payload: payload is NULL");
    lds_parse_options o;
    parser ps;
    memset(&ps, 0, sizeof ps);
    lds_status st = load_options(opts, &o, &ps.limits, err);
    if (st != LDS_OK)
        return st;
    ps.p = (const uint8_t *)payload;
    ps.length = length;
    ps.base = o.base_offset;
    ps.copy_offsets = o.copy_key_offsets;
    ps.err = err;
    uint64_t stored = 0;
    bool verified = false;
    if ((st = check_payload(&ps, &o, &stored, &verified)) != LDS_OK ||
        (st = check_footer_and_table(&ps)) != LDS_OK)
        return st;
    size_t esize = lds_dtype_size(ps.dtype);
    uint64_t row_bytes = (uint64_t)ps.dim * esize;
    uint64_t vec_bytes;
    /* V1 (row_bytes < 2^64: dim < 2^32, esize <= 8) */
    LDS__FAIL_IF(__builtin_mul_overflow(ps.rows, row_bytes, &vec_bytes), err, LDS_E_OVERFLOW,
                 "table.rows", AT(&ps, ps.table),
                 "%llu rows x %u dims x %zu bytes overflow 64 bits", (unsigned long long)ps.rows,
                 (unsigned)ps.dim, esize);
    if ((st = check_sized(&ps, &ps.vectors, row_bytes, "vectors")) != LDS_OK)
        return st;
    if (ps.ids.present && (st = check_sized(&ps, &ps.ids, 8, "ids")) != LDS_OK)
        return st;

    lds_index *idx = NULL;
    if ((st = index_new(&idx, err)) != LDS_OK)
        return st;
    /* A fault inside a loader's recovery window (a mapped file truncated underneath)
       jumps out of the parse: the index built so far is freed there. */
    lds__fault_set_cleanup(index_destroy_cb, idx);
    if (ps.keys.present)
        st = check_keys(&ps, idx);
    if (st == LDS_OK && ps.meta.present)
        st = check_meta(&ps, idx);
    if (st == LDS_OK)
        st = index_place(&ps, &o, idx);
    if (st != LDS_OK) {
        lds__fault_set_cleanup(NULL, NULL);
        index_destroy(idx);
        return st;
    }
    const lds_header *hd = o.header;
    bool chunked = lds_header_chunked(hd);
    idx->rows = ps.rows;
    idx->dim = ps.dim;
    idx->dtype = ps.dtype;
    idx->metric = (lds_metric)ps.metric;
    idx->i8_scale = lds__bits_f32(ps.scale_bits);
    idx->flags = ps.flags;
    idx->row_bytes = (size_t)row_bytes;
    idx->payload_length = length;
    idx->chunk_bytes = chunked ? hd->chunk_bytes : 0;
    idx->chunk_count = chunked ? hd->chunk_count : 0;
    idx->chunk_aligned = ps.align > 64;
    idx->checksum = stored;
    idx->checksum_verified = verified;
    /* A copy owes the caller nothing: its payload can be released at once. */
    if (!o.copy) {
        idx->release = o.release;
        idx->release_ctx = o.release_ctx;
    }
    lds__fault_set_cleanup(NULL, NULL);
    *out = idx;
    return LDS_OK;
}
