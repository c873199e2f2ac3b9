/* The index: accessors, key and id lookup (search is in search.c). */
#include "format_internal.h"

#include <math.h>
#include <stdlib.h>

uint64_t lds_index_rows(const lds_index *idx)
{
    return idx ? idx->rows : 0;
}

uint32_t lds_index_dim(const lds_index *idx)
{
    return idx ? idx->dim : 0;
}

lds_dtype lds_index_dtype(const lds_index *idx)
{
    return idx ? idx->dtype : (lds_dtype)0;
}

lds_metric lds_index_metric(const lds_index *idx)
{
    return idx ? idx->metric : (lds_metric)0;
}

float lds_index_i8_scale(const lds_index *idx)
{
    return idx && idx->dtype == LDS_DTYPE_I8 ? idx->i8_scale : 0.0f;
}

bool lds_index_normalized(const lds_index *idx)
{
    return idx && (idx->flags & LDS__TF_NORMALIZED);
}

bool lds_index_has_ids(const lds_index *idx)
{
    return idx && idx->ids;
}

bool lds_index_has_keys(const lds_index *idx)
{
    return idx && idx->key_offsets;
}

bool lds_index_keys_unique(const lds_index *idx)
{
    return idx && (idx->flags & LDS__TF_KEYS_UNIQUE);
}

uint64_t lds_index_payload_bytes(const lds_index *idx)
{
    return idx ? idx->payload_length : 0;
}

uint64_t lds_index_checksum(const lds_index *idx)
{
    return idx ? idx->checksum : 0;
}

bool lds_index_checksum_verified(const lds_index *idx)
{
    return idx && idx->checksum_verified;
}

uint32_t lds_index_chunk_bytes(const lds_index *idx)
{
    return idx ? idx->chunk_bytes : 0;
}

uint64_t lds_index_chunk_count(const lds_index *idx)
{
    return idx ? idx->chunk_count : 0;
}

bool lds_index_chunk_aligned(const lds_index *idx)
{
    return idx && idx->chunk_aligned;
}

const void *lds_index_row(const lds_index *idx, uint64_t row)
{
    if (!idx || row >= idx->rows)
        return NULL;
    /* No overflow: the parser proved rows x row_bytes fits the payload (V1, V2). */
    return idx->vectors + row * idx->row_bytes;
}

lds_status lds_index_row_f32(const lds_index *idx, uint64_t row, float *out, size_t out_len)
{
    if (!idx || !out || row >= idx->rows || out_len < idx->dim)
        return LDS_E_INVALID_ARG;
    lds__row_to_f32(idx->vectors + row * idx->row_bytes, idx->dtype, idx->i8_scale, idx->dim, out);
    return LDS_OK;
}

lds_status lds_index_id(const lds_index *idx, uint64_t row, uint64_t *id)
{
    if (!idx || !id)
        return LDS_E_INVALID_ARG;
    /* A file without ids is not the caller's mistake: a different status lets a
       caller fall back to row numbers without parsing a message. */
    if (!idx->ids)
        return LDS_E_UNSUPPORTED;
    if (row >= idx->rows)
        return LDS_E_INVALID_ARG;
    *id = lds__ld64(idx->ids + row * 8);
    return LDS_OK;
}

const void *lds_index_ids(const lds_index *idx)
{
    return idx ? idx->ids : NULL;
}

lds_status lds_index_key(const lds_index *idx, uint64_t row, const char **key, size_t *len)
{
    if (!idx || !key || !len)
        return LDS_E_INVALID_ARG;
    if (!idx->key_offsets)
        return LDS_E_UNSUPPORTED;
    if (row >= idx->rows)
        return LDS_E_INVALID_ARG;
    uint64_t a, b;
    lds__index_key_span(idx, row, &a, &b);
    *key = (const char *)idx->key_bytes + a;
    *len = (size_t)(b - a);
    return LDS_OK;
}

/* A key looked up in the index's key table. */
typedef struct key_query {
    const lds_index *idx;
    const char *key;
    size_t len;
} key_query;

static bool key_query_eq(const void *ctx, uint64_t row)
{
    const key_query *q = (const key_query *)ctx;
    if (row >= q->idx->rows)
        return false; /* a later generation's row in a table extended in place (ADR 0055) */
    uint64_t a, b;
    lds__index_key_span(q->idx, row, &a, &b);
    return b - a == q->len && memcmp(q->idx->key_bytes + a, q->key, q->len) == 0;
}

/* Inserts the keys of rows [from, idx->rows) into the key table `t`, rows in order, and
   checks K7 on the way: *state goes from 1 to 2 at the first repeat under KEYS_UNIQUE (the
   lowest row keeps a repeated key). Keys are hashed AHEAD rows before they are inserted and
   their slots prefetched, so the cache misses of consecutive rows overlap. */
static void insert_keys(lds_index *idx, lds__hashtab *t, uint64_t from, int *state)
{
    const lds__hashkey *hk = t->hk;
    const uint8_t *bytes = idx->key_bytes;
    uint64_t blen = idx->key_width == 4 ? lds__ld32(idx->key_offsets + idx->rows * 4)
                                        : lds__ld64(idx->key_offsets + idx->rows * 8);
    key_query q = {idx, NULL, 0};
    enum { AHEAD = 32 };
    uint64_t ahead[AHEAD];
    for (uint64_t i = from; i < idx->rows + AHEAD; i++) {
        if (i >= from + AHEAD) {
            uint64_t row = i - AHEAD, ka, kb;
            lds__index_key_span(idx, row, &ka, &kb);
            q.key = (const char *)bytes + ka;
            q.len = (size_t)(kb - ka);
            uint64_t o = lds__hashtab_insert(t, ahead[i % AHEAD], row, key_query_eq, &q);
            if (o != UINT64_MAX && *state == 1 && (idx->flags & LDS__TF_KEYS_UNIQUE)) {
                *state = 2;
                idx->key_dup = row;
                idx->key_dup_of = o;
            }
        }
        if (i < idx->rows) {
            uint64_t a, b;
            lds__index_key_span(idx, i, &a, &b);
            /* 16-byte reads stay inside the key bytes (the copy mode's block ends there). */
            uint64_t h = a + LDS__KEY_HASH_READ <= blen
                             ? lds__hash_key_over(hk, bytes + a, (size_t)(b - a))
                             : lds__hash_key(hk, bytes + a, (size_t)(b - a));
            ahead[i % AHEAD] = h;
            lds__hashtab_prefetch(t, h);
        }
    }
}

/* The share record of a table holding the keys of `rows` rows, one holder (NULL without
   memory: the table is then neither shared nor extended). */
static lds__keys_share *new_share(uint64_t rows)
{
    lds__keys_share *r = malloc(sizeof *r);
    if (r) {
        atomic_init(&r->refs, 1);
        atomic_init(&r->rows, rows);
    }
    return r;
}

/* The key table and K7 of every row. The hash is keyed (ADR 0010): keys chosen offline
   cannot crowd one part of the table. Called with key_lock held and key_state 0. With
   `spare` (may be NULL) of the capacity and row width a fresh table has, its slots are
   cleared and used (warm pages, no faults; *spare is emptied); *used says so. */
static lds_status build_key_table(lds_index *idx, lds__hashtab *spare, bool *used)
{
    if (used)
        *used = false;
    if (spare && spare->slots && spare->mask + 1 == lds__table_capacity(idx->rows) &&
        spare->row_bits == lds__hashtab_row_bits(idx->rows)) {
        memset(spare->slots, 0, (size_t)(spare->mask + 1) * sizeof *spare->slots);
        idx->keys = (lds__hashtab){.slots = spare->slots,
                                   .mask = spare->mask,
                                   .row_bits = spare->row_bits,
                                   .hk = spare->hk};
        memset(spare, 0, sizeof *spare);
        if (used)
            *used = true;
    } else if (lds__hashtab_init(&idx->keys, idx->rows, idx->rows) != LDS_OK) {
        return LDS_E_NOMEM;
    }
    int state = 1;
    insert_keys(idx, &idx->keys, 0, &state);
    idx->keys_share = new_share(idx->rows);
    atomic_store_explicit(&idx->key_state, state, memory_order_release);
    return LDS_OK;
}

/* True if p points into idx's payload. */
static bool in_payload(const lds_index *idx, const uint8_t *p)
{
    uintptr_t v = (uintptr_t)idx->vectors;
    return (uintptr_t)p >= v && (uintptr_t)p - v < idx->payload_length;
}

/* True if bytes [a, a + n) of x's payload equal bytes [b, b + n) of y's. The whole chunks
   of the range are compared by their entries in the two chunk tables when both payloads'
   chunks were verified against them and the range sits at the same phase of a chunk in
   both (the two ends are compared byte for byte); a 1% delta then compares a few KiB instead
   of every key (docs/adr/0055). Else memcmp. */
static bool same_bytes(const lds_index *x, const uint8_t *a, const lds_index *y, const uint8_t *b,
                       size_t n)
{
    uint64_t cb = x->chunk_bytes;
    uint64_t xt = x->payload_length - x->chunk_count * 8, yt = y->payload_length - y->chunk_count * 8;
    if (cb == 0 || cb != y->chunk_bytes || !x->checksum_verified || !y->checksum_verified ||
        x->owned != NULL || y->owned != NULL || (uintptr_t)a < (uintptr_t)x->vectors ||
        (uintptr_t)b < (uintptr_t)y->vectors)
        return memcmp(a, b, n) == 0;
    uint64_t ao = (uint64_t)((uintptr_t)a - (uintptr_t)x->vectors);
    uint64_t bo = (uint64_t)((uintptr_t)b - (uintptr_t)y->vectors);
    if (ao + n > xt || bo + n > yt || ao % cb != bo % cb)
        return memcmp(a, b, n) == 0;
    uint64_t head = (cb - ao % cb) % cb;
    if (head >= n)
        return memcmp(a, b, n) == 0;
    uint64_t full = (n - head) / cb;
    const uint8_t *xtab = x->vectors + xt, *ytab = y->vectors + yt;
    uint64_t xk = (ao + head) / cb, yk = (bo + head) / cb;
    for (uint64_t i = 0; i < full; i++)
        if (lds__ld64(xtab + (xk + i) * 8) != lds__ld64(ytab + (yk + i) * 8))
            return false; /* verified chunks with other checksums hold other bytes */
    uint64_t tail = head + full * cb;
    return memcmp(a, b, (size_t)head) == 0 && memcmp(a + tail, b + tail, (size_t)(n - tail)) == 0;
}

/* True if rows [0, prev->rows) of `idx` have the keys of `prev`, byte for byte: the same
   offsets (same width) and the same key bytes. */
static bool keys_extend(const lds_index *idx, const lds_index *prev)
{
    if (idx->rows < prev->rows || idx->key_width != prev->key_width ||
        (idx->flags & LDS__TF_KEYS_UNIQUE) != (prev->flags & LDS__TF_KEYS_UNIQUE))
        return false;
    size_t w = idx->key_width;
    /* A mapped load copies the key offsets out of its payload (the file may change under
       the mapping). Its key bytes stay in the mapping: a file rewritten in place shows its
       new bytes through the old generation's mapping too, so the two compare equal while
       prev's table holds the hashes of the keys prev loaded. A mapped generation on either
       side therefore never hands its table on: idx builds its own. */
    if (!in_payload(idx, idx->key_offsets) || !in_payload(prev, prev->key_offsets))
        return false;
    if (!same_bytes(idx, idx->key_offsets, prev, prev->key_offsets, (size_t)(prev->rows + 1) * w))
        return false;
    uint64_t end = w == 4 ? lds__ld32(prev->key_offsets + prev->rows * 4)
                          : lds__ld64(prev->key_offsets + prev->rows * 8);
    return same_bytes(idx, idx->key_bytes, prev, prev->key_bytes, (size_t)end);
}

int lds__index_keys_from(lds_index *idx, const lds_index *prev, lds__hashtab *spare)
{
    if (!idx || !prev || !idx->key_offsets || !prev->key_offsets)
        return LDS__KEYS_LAZY;
    int pstate = atomic_load_explicit(&((lds_index *)prev)->key_state, memory_order_acquire);
    if (pstate == 0)
        return LDS__KEYS_LAZY; /* nobody looked a key up: neither will we */
    int how = LDS__KEYS_LAZY;
    pthread_mutex_lock(&idx->key_lock);
    lds__keys_share *sh = prev->keys_share;
    if (atomic_load_explicit(&idx->key_state, memory_order_relaxed) != 0) {
        how = LDS__KEYS_HAD;
    } else if (sh != NULL && lds__table_capacity(idx->rows) == prev->keys.mask + 1 &&
               lds__hashtab_row_bits(idx->rows) == prev->keys.row_bits && keys_extend(idx, prev)) {
        uint64_t at = prev->rows;
        if (idx->rows == prev->rows) {
            /* The same keys row for row: prev's table is idx's as it stands (entries of
               rows past idx's, left by a generation extending it, are skipped by idx's
               lookups as by prev's; docs/adr/0055). */
            how = LDS__KEYS_SHARED;
        } else if (atomic_compare_exchange_strong_explicit(&sh->rows, &at, LDS__KEYS_EXTENDING,
                                                           memory_order_acq_rel,
                                                           memory_order_relaxed)) {
            /* Rows appended, and the table holds exactly prev's rows: insert idx's rows
               after them into the same slots. Each insert only fills an empty slot (one
               atomic store; entries never move), so prev's lookups meanwhile find exactly
               their keys and skip the new rows. K7 is carried on: the first repeat found
               among the new rows is idx's verdict, as a lazy build of idx finds it. */
            idx->keys = prev->keys;
            int state = pstate;
            if (state == 2) {
                idx->key_dup = prev->key_dup;
                idx->key_dup_of = prev->key_dup_of;
            }
            insert_keys(idx, &idx->keys, prev->rows, &state);
            atomic_store_explicit(&sh->rows, idx->rows, memory_order_release);
            pstate = state;
            how = LDS__KEYS_EXTENDED;
        }
        if (how != LDS__KEYS_LAZY) {
            atomic_fetch_add_explicit(&sh->refs, 1, memory_order_relaxed);
            if (how == LDS__KEYS_SHARED)
                idx->keys = prev->keys;
            idx->keys_share = sh;
            if (how == LDS__KEYS_SHARED && pstate == 2) {
                idx->key_dup = prev->key_dup;
                idx->key_dup_of = prev->key_dup_of;
            }
            atomic_store_explicit(&idx->key_state, pstate, memory_order_release);
        }
    }
    /* Else (other keys, fewer rows, another capacity, a mapped generation, or a table whose
       watermark is not prev's row count): a full build, into the spare when it fits. */
    bool used = false;
    if (how == LDS__KEYS_LAZY && build_key_table(idx, spare, &used) == LDS_OK)
        how = used ? LDS__KEYS_BUILT_SPARE : LDS__KEYS_BUILT;
    pthread_mutex_unlock(&idx->key_lock);
    return how;
}

bool lds__index_take_keys(lds_index *idx, lds__hashtab *out)
{
    if (!idx || !out || idx->keys.slots == NULL || idx->keys_share == NULL ||
        atomic_load_explicit(&idx->key_state, memory_order_acquire) == 0 ||
        atomic_load_explicit(&idx->keys_share->refs, memory_order_acquire) != 1)
        return false;
    *out = idx->keys;
    memset(&idx->keys, 0, sizeof idx->keys);
    return true;
}

/* Builds the key table once (thread-safe); LDS_E_DUP_KEY if K7 fails. */
static lds_status keys_ready(const lds_index *cidx)
{
    lds_index *idx = (lds_index *)cidx; /* the lazy tables are all a const index mutates */
    /* Checked once without the lock: after the first build every lookup is one
       acquire load; only the threads that race the build wait on the mutex. */
    int state = atomic_load_explicit(&idx->key_state, memory_order_acquire);
    if (state == 0) {
        pthread_mutex_lock(&idx->key_lock);
        lds_status st = LDS_OK;
        state = atomic_load_explicit(&idx->key_state, memory_order_relaxed);
        if (state == 0 && (st = build_key_table(idx, NULL, NULL)) == LDS_OK)
            state = atomic_load_explicit(&idx->key_state, memory_order_relaxed);
        pthread_mutex_unlock(&idx->key_lock);
        if (st != LDS_OK)
            return st;
    }
    return state == 2 ? LDS_E_DUP_KEY : LDS_OK;
}

lds_status lds_index_check_keys(const lds_index *idx, lds_error *err)
{
    LDS__FAIL_IF_MSG(!idx, err, LDS_E_INVALID_ARG, NULL, 0, "lds_index_check_keys: idx is NULL");
    if (!idx->key_offsets)
        return LDS_OK;
    lds_status st = keys_ready(idx);
    LDS__FAIL_IF_MSG(st == LDS_E_NOMEM, err, LDS_E_NOMEM, NULL, 0,
                     "no memory for the key table of %llu rows", (unsigned long long)idx->rows);
    /* K7, checked here rather than by the parser: the table costs memory per row,
       which a load that never looks a key up should not pay (ADR 0010). */
    if (st == LDS_E_DUP_KEY) {
        uint64_t a, b;
        lds__index_key_span(idx, idx->key_dup, &a, &b);
        return lds__fail(err, LDS_E_DUP_KEY, "keys.bytes", idx->key_bytes_at + a,
                         "keys.bytes: the key of row %llu repeats the key of row %llu",
                         (unsigned long long)idx->key_dup, (unsigned long long)idx->key_dup_of);
    }
    return st;
}

lds_status lds_index_find_key(const lds_index *idx, const char *key, size_t len, uint64_t *row)
{
    if (!idx || !row || (!key && len > 0))
        return LDS_E_INVALID_ARG;
    if (!idx->key_offsets)
        return LDS_E_UNSUPPORTED;
    lds_status st = keys_ready(idx);
    if (st != LDS_OK)
        return st;
    if (!key)
        key = ""; /* (NULL, 0) is the empty key, which a row may hold */
    key_query q = {idx, key, len};
    uint64_t h = lds__hash_key(idx->keys.hk, key, len);
    return lds__hashtab_find(&idx->keys, h, key_query_eq, &q, row) ? LDS_OK : LDS_E_NOT_FOUND;
}

/* An id looked up in (or inserted into) the id table. */
typedef struct id_query {
    const uint8_t *ids;
    uint64_t id;
} id_query;

static bool id_query_eq(const void *ctx, uint64_t row)
{
    const id_query *q = (const id_query *)ctx;
    return lds__ld64(q->ids + row * 8) == q->id;
}

/* The id table, rows in order (the lowest row keeps a repeated id), with the
   slots of later rows prefetched as in the parser's key table. */
static lds__hashtab *build_id_table(const lds_index *idx)
{
    lds__hashtab *t = (lds__hashtab *)malloc(sizeof *t);
    if (!t)
        return NULL;
    if (lds__hashtab_init(t, idx->rows, idx->rows) != LDS_OK) {
        free(t);
        return NULL;
    }
    enum { AHEAD = 32 };
    uint64_t ahead[AHEAD];
    id_query q = {idx->ids, 0};
    for (uint64_t i = 0; i < idx->rows + AHEAD; i++) {
        if (i >= AHEAD) {
            uint64_t row = i - AHEAD;
            q.id = lds__ld64(idx->ids + row * 8);
            lds__hashtab_insert(t, ahead[i % AHEAD], row, id_query_eq, &q);
        }
        if (i < idx->rows) {
            uint64_t h = lds__hash_id(t->hk, lds__ld64(idx->ids + i * 8));
            ahead[i % AHEAD] = h;
            lds__hashtab_prefetch(t, h);
        }
    }
    return t;
}

lds_status lds_index_find_id(const lds_index *cidx, uint64_t id, uint64_t *row)
{
    if (!cidx || !row)
        return LDS_E_INVALID_ARG;
    if (!cidx->ids)
        return LDS_E_UNSUPPORTED;
    /* The lazily built table is the only state a const index mutates. */
    lds_index *idx = (lds_index *)cidx;
    lds__hashtab *t = atomic_load_explicit(&idx->ids_table, memory_order_acquire);
    if (!t) {
        pthread_mutex_lock(&idx->id_lock);
        t = atomic_load_explicit(&idx->ids_table, memory_order_relaxed);
        if (!t) {
            t = build_id_table(idx);
            atomic_store_explicit(&idx->ids_table, t, memory_order_release);
        }
        pthread_mutex_unlock(&idx->id_lock);
        if (!t)
            return LDS_E_NOMEM;
    }
    id_query q = {idx->ids, id};
    return lds__hashtab_find(t, lds__hash_id(t->hk, id), id_query_eq, &q, row) ? LDS_OK
                                                                               : LDS_E_NOT_FOUND;
}

void lds__index_key_probe_stats(const lds_index *idx, lds__probe_stats *out)
{
    bool built = idx && atomic_load(&((lds_index *)idx)->key_state) != 0;
    lds__hashtab_stats(built ? &idx->keys : NULL, out);
}

void lds__index_id_probe_stats(const lds_index *idx, lds__probe_stats *out)
{
    lds__hashtab_stats(idx ? atomic_load(&((lds_index *)idx)->ids_table) : NULL, out);
}

size_t lds_index_meta_count(const lds_index *idx)
{
    return idx ? idx->meta_count : 0;
}

lds_status lds_index_meta_at(const lds_index *idx, size_t i, const char **key, const char **value)
{
    if (!idx || !key || !value)
        return LDS_E_INVALID_ARG;
    if (i >= idx->meta_count)
        return LDS_E_NOT_FOUND;
    *key = idx->meta[2 * i];
    *value = idx->meta[2 * i + 1];
    return LDS_OK;
}

/* A linear scan: metadata holds a handful of entries (M1 bounds its bytes), fewer
   than a hash table would need to pay for itself. */
const char *lds_index_meta(const lds_index *idx, const char *key)
{
    if (!idx || !key)
        return NULL;
    for (size_t i = 0; i < idx->meta_count; i++)
        if (strcmp(idx->meta[2 * i], key) == 0)
            return idx->meta[2 * i + 1];
    return NULL;
}
