/* --on-duplicate last: the first pass's table of each distinct key's last row (a keyed
   hash table, common/hashtab.h) and the bitmap of superseded rows the writing pass skips. */
#include "import_internal.h"

#include "hashtab.h"

#include <stdlib.h>
#include <string.h>

/* The first pass's table: each distinct key once (bytes[offs[i], offs[i + 1])), with the
   last input row that held it; the hash table maps a key to its index i. */
struct lds__imp_last {
    lds__hashtab tab;
    char *bytes;
    size_t len, cap;
    uint64_t *offs; /* n + 1 entries */
    uint64_t *row;  /* n entries */
    uint64_t n, cap_offs, cap_row;
};

typedef struct last_probe {
    const struct lds__imp_last *l;
    const char *key;
    size_t len;
} last_probe;

static bool last_eq(const void *ctx, uint64_t i)
{
    const last_probe *p = ctx;
    uint64_t a = p->l->offs[i], b = p->l->offs[i + 1];
    return b - a == p->len && memcmp(p->l->bytes + a, p->key, p->len) == 0;
}

static uint64_t last_rehash(const void *ctx, uint64_t i)
{
    const struct lds__imp_last *l = ctx;
    return lds__hash_key(l->tab.hk, l->bytes + l->offs[i], (size_t)(l->offs[i + 1] - l->offs[i]));
}

/* Grows *p (of *cap elements of `size` bytes) to hold at least `need`, doubling. */
static bool grow_array(void **p, uint64_t *cap, uint64_t need, size_t size)
{
    if (need <= *cap)
        return true;
    uint64_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    if (c > SIZE_MAX / size)
        return false;
    void *q = realloc(*p, (size_t)c * size);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

void lds__imp_last_free(lds__imp_sink *s)
{
    struct lds__imp_last *l = s->last;
    if (l) {
        lds__hashtab_free(&l->tab);
        free(l->bytes);
        free(l->offs);
        free(l->row);
        free(l);
    }
    s->last = NULL;
    free(s->superseded);
    s->superseded = NULL;
    s->superseded_rows = 0;
}

bool lds__imp_superseded(const lds__imp_sink *s, uint64_t row)
{
    return row < s->superseded_rows && (s->superseded[row / 64] >> (row % 64) & 1);
}

/* The first pass of LDS_IMPORT_DUP_LAST, for input row `row` holding `key`: if the key
   was seen, its previous row is marked superseded; the key's last row becomes `row`.
   Under LDS_IMPORT_DUP_FIRST (the pass then runs so that i8_scale_auto's scale is taken
   over the kept rows only) the repeat itself is marked instead.
   One keyed-hash probe per row, so linear time whatever the repeats. */
lds_status lds__imp_last_note(lds__imp_sink *s, const char *key, size_t len, uint64_t row,
                              uint64_t offset, lds_error *err)
{
    struct lds__imp_last *l = s->last;
    if (!l) {
        l = calloc(1, sizeof *l);
        if (!l || lds__hashtab_init(&l->tab, 512, s->opts->limits.max_rows) != LDS_OK) {
            free(l);
            return lds__imp_fail(err, LDS_E_NOMEM, s->line_field, offset, 0,
                                 "out of memory (the table of last rows)");
        }
        s->last = l;
    }
    /* The bitmap covers every row seen, so the writing pass can test any of them. */
    uint64_t words = s->superseded_rows / 64, need = row / 64 + 1;
    if (need > words) {
        uint64_t cap = words;
        if (!grow_array((void **)&s->superseded, &cap, need, sizeof(uint64_t)))
            return lds__imp_fail(err, LDS_E_NOMEM, s->line_field, offset, 0,
                                 "out of memory (the bitmap of superseded rows)");
        memset(s->superseded + words, 0, (size_t)(cap - words) * sizeof(uint64_t));
        s->superseded_rows = cap * 64;
    }
    last_probe p = {l, key, len};
    uint64_t h = lds__hash_key(l->tab.hk, key, len);
    uint64_t cap_bytes = l->cap;
    if (!grow_array((void **)&l->offs, &l->cap_offs, l->n + 2, sizeof(uint64_t)) ||
        !grow_array((void **)&l->row, &l->cap_row, l->n + 1, sizeof(uint64_t)) ||
        !lds__hashtab_reserve(&l->tab, l->n + 1, last_rehash, l) ||
        !grow_array((void **)&l->bytes, &cap_bytes, (uint64_t)l->len + len, 1))
        return lds__imp_fail(err, LDS_E_NOMEM, s->line_field, offset, 0,
                             "out of memory (the table of last rows, %llu keys)",
                             (unsigned long long)l->n);
    l->cap = (size_t)cap_bytes;
    if (l->n == 0)
        l->offs[0] = 0;
    uint64_t found = lds__hashtab_insert(&l->tab, h, l->n, last_eq, &p);
    if (found != UINT64_MAX) {
        if (s->opts->on_duplicate == LDS_IMPORT_DUP_FIRST) {
            /* first (the pass runs for i8_scale_auto): this later row is the one skipped */
            s->superseded[row / 64] |= (uint64_t)1 << (row % 64);
            return LDS_OK;
        }
        uint64_t prev = l->row[found];
        s->superseded[prev / 64] |= (uint64_t)1 << (prev % 64);
        l->row[found] = row;
        return LDS_OK;
    }
    memcpy(l->bytes + l->len, key, len);
    l->len += len;
    l->row[l->n] = row;
    l->offs[l->n + 1] = l->len;
    l->n++;
    return LDS_OK;
}

/* After the first pass: the key table is not needed, only the bitmap. */
void lds__imp_last_done(lds__imp_sink *s)
{
    struct lds__imp_last *l = s->last;
    if (!l)
        return;
    lds__hashtab_free(&l->tab);
    free(l->bytes);
    free(l->offs);
    free(l->row);
    free(l);
    s->last = NULL;
}
