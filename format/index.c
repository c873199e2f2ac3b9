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

const void *lds_index_row(const lds_index *idx, uint64_t row)
{
    if (!idx || row >= idx->rows)
        return NULL;
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
    if (!idx->ids)
        return LDS_E_UNSUPPORTED;
    if (row >= idx->rows)
        return LDS_E_INVALID_ARG;
    *id = lds__ld64(idx->ids + row * 8);
    return LDS_OK;
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

lds_status lds_index_find_key(const lds_index *idx, const char *key, size_t len, uint64_t *row)
{
    if (!idx || !row || (!key && len > 0))
        return LDS_E_INVALID_ARG;
    if (!idx->key_offsets)
        return LDS_E_UNSUPPORTED;
    if (!key)
        key = "";
    uint64_t h = lds__key_hash(key, len);
    unsigned rb = idx->key_row_bits;
    for (uint64_t j = h & idx->key_mask;; j = (j + 1) & idx->key_mask) {
        uint64_t v = idx->key_slots[j];
        if (v == 0)
            return LDS_E_NOT_FOUND;
        if (!lds__key_slot_tag_is(v, h, rb))
            continue;
        uint64_t r = lds__key_slot_row(v, rb), a, b;
        lds__index_key_span(idx, r, &a, &b);
        if (b - a == len && memcmp(idx->key_bytes + a, key, len) == 0) {
            *row = r;
            return LDS_OK;
        }
    }
}

static uint64_t id_hash(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

static uint64_t *build_id_table(const lds_index *idx, uint64_t *mask_out)
{
    uint64_t cap = lds__table_capacity(idx->rows);
    if (cap == 0 || cap > SIZE_MAX / sizeof(uint64_t))
        return NULL;
    uint64_t *slots = (uint64_t *)calloc((size_t)cap, sizeof(uint64_t));
    if (!slots)
        return NULL;
    uint64_t mask = cap - 1;
    for (uint64_t r = 0; r < idx->rows; r++) {
        uint64_t id = lds__ld64(idx->ids + r * 8);
        for (uint64_t j = id_hash(id) & mask;; j = (j + 1) & mask) {
            if (slots[j] == 0) {
                slots[j] = r + 1;
                break;
            }
            if (lds__ld64(idx->ids + (slots[j] - 1) * 8) == id)
                break; /* the lowest row keeps the id */
        }
    }
    *mask_out = mask;
    return slots;
}

lds_status lds_index_find_id(const lds_index *cidx, uint64_t id, uint64_t *row)
{
    if (!cidx || !row)
        return LDS_E_INVALID_ARG;
    if (!cidx->ids)
        return LDS_E_UNSUPPORTED;
    /* The lazily built table is the only state a const index mutates. */
    lds_index *idx = (lds_index *)cidx;
    uint64_t *slots = atomic_load_explicit(&idx->id_slots, memory_order_acquire);
    if (!slots) {
        pthread_mutex_lock(&idx->id_lock);
        slots = atomic_load_explicit(&idx->id_slots, memory_order_relaxed);
        if (!slots) {
            slots = build_id_table(idx, &idx->id_mask);
            atomic_store_explicit(&idx->id_slots, slots, memory_order_release);
        }
        pthread_mutex_unlock(&idx->id_lock);
        if (!slots)
            return LDS_E_NOMEM;
    }
    uint64_t mask = idx->id_mask;
    for (uint64_t j = id_hash(id) & mask;; j = (j + 1) & mask) {
        uint64_t v = slots[j];
        if (v == 0)
            return LDS_E_NOT_FOUND;
        if (lds__ld64(idx->ids + (v - 1) * 8) == id) {
            *row = v - 1;
            return LDS_OK;
        }
    }
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

const char *lds_index_meta(const lds_index *idx, const char *key)
{
    if (!idx || !key)
        return NULL;
    for (size_t i = 0; i < idx->meta_count; i++)
        if (strcmp(idx->meta[2 * i], key) == 0)
            return idx->meta[2 * i + 1];
    return NULL;
}
