/* Internal helpers shared by the files of format/ (not installed). */
#ifndef LDS_FORMAT_INTERNAL_H
#define LDS_FORMAT_INTERNAL_H

#include "lodestar.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <xxhash.h>

/* Table flags (format.md §4.2). */
#define LDS__TF_HAS_IDS        0x1u
#define LDS__TF_HAS_KEYS       0x2u
#define LDS__TF_KEYS_UNIQUE    0x4u
#define LDS__TF_NORMALIZED     0x8u
#define LDS__TF_KEYS_OFFSETS32 0x10u
#define LDS__TF_KNOWN          0x1Fu
#define LDS__MUST_UNDERSTAND   0xFFFFu

/* Section kinds (format.md §3). */
#define LDS__KIND_VECTORS  1u
#define LDS__KIND_IDS      2u
#define LDS__KIND_KEYS     3u
#define LDS__KIND_METADATA 4u
#define LDS__KIND_OPTIONAL 0x80000000u

#define LDS__TABLE_HEAD   32u
#define LDS__ENTRY_SIZE   24u
#define LDS__FOOTER_MAGIC "LDSTABLE"
#define LDS__TAIL         (LDS_FOOTER_SIZE + LDS_CHECKSUM_SIZE)

static inline uint16_t lds__ld16(const void *p)
{
    const uint8_t *b = (const uint8_t *)p;
    return (uint16_t)(b[0] | (b[1] << 8));
}

static inline uint32_t lds__ld32(const void *p)
{
    const uint8_t *b = (const uint8_t *)p;
    return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}

static inline uint64_t lds__ld64(const void *p)
{
    const uint8_t *b = (const uint8_t *)p;
    return (uint64_t)lds__ld32(b) | ((uint64_t)lds__ld32(b + 4) << 32);
}

static inline void lds__st16(void *p, uint16_t v)
{
    uint8_t *b = (uint8_t *)p;
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
}

static inline void lds__st32(void *p, uint32_t v)
{
    uint8_t *b = (uint8_t *)p;
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static inline void lds__st64(void *p, uint64_t v)
{
    uint8_t *b = (uint8_t *)p;
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static inline float lds__bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t lds__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline uint64_t lds__align64(uint64_t x)
{
    return (x + 63u) & ~(uint64_t)63u;
}

/*
 * Records a refusal in `err` (if non-NULL), writing only the fields that fit in
 * err->size, and returns `status`. The message is the formatted text followed
 * by " (at byte OFFSET)" when `field` is non-NULL.
 */
lds_status lds__fail(lds_error *err, lds_status status, const char *field, uint64_t offset,
                     const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* As lds__fail, and sets sys_errno to `errnum` (a failed system call). */
lds_status lds__fail_errno(lds_error *err, lds_status status, int errnum, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Bytes of the longest prefix of s[0, n) that holds only ASCII (< 0x80). */
size_t lds__ascii_prefix(const uint8_t *s, size_t n);

/* Strict UTF-8 check (format.md §3.5). Returns true if s[0, n) is valid; else
   false and the index of the first bad byte in *bad and a reason in *why. */
bool lds__utf8_valid(const uint8_t *s, size_t n, size_t *bad, const char **why);

/* Converts one stored row (dim elements of dtype, any alignment) to float32. */
void lds__row_to_f32(const uint8_t *src, lds_dtype dtype, float scale, uint32_t dim, float *out);

/* Capacity of the key and id tables (slots of 8 bytes, 0 = empty; an id slot
   holds row + 1, a key slot see lds__key_slot): a power of two >= 2 * n, at
   least 16. Returns 0 if it overflows. */
uint64_t lds__table_capacity(uint64_t n);

/* The index (parse.c builds it, index.c reads it). */
struct lds_index {
    const uint8_t *vectors;
    const uint8_t *ids;
    const uint8_t *key_offsets;
    const uint8_t *key_bytes;
    uint64_t rows;
    uint32_t dim;
    lds_dtype dtype;
    lds_metric metric;
    float i8_scale;
    uint32_t flags;
    unsigned key_width;
    size_t row_bytes;
    uint64_t payload_length;
    uint64_t checksum;
    bool checksum_verified;
    /* Here, in padding: a struct one word larger changed glibc's heap layout in
       lodestar-bench load enough to keep 20-60 MiB more resident. */
    uint8_t key_row_bits; /* 32..63, see lds__key_slot */

    void *owned; /* copy mode: the block holding [0, table_offset) */
    void (*release)(void *ctx);
    void *release_ctx;

    size_t meta_count;
    const char **meta; /* 2 * meta_count pointers: key, value, ... */
    char *meta_arena;

    uint64_t *key_slots; /* see lds__key_slot */
    uint64_t key_mask;

    pthread_mutex_t id_lock;
    _Atomic(uint64_t *) id_slots;
    uint64_t id_mask;

    _Atomic(double *) inv_norms; /* 1 / |row|, built by the first cosine search (search.c) */
};

/* Bytes [offset of row's key, end) of `row` (the index has keys). */
static inline void lds__index_key_span(const struct lds_index *idx, uint64_t row, uint64_t *start,
                                       uint64_t *end)
{
    if (idx->key_width == 4) {
        *start = lds__ld32(idx->key_offsets + row * 4);
        *end = lds__ld32(idx->key_offsets + (row + 1) * 4);
    } else {
        *start = lds__ld64(idx->key_offsets + row * 8);
        *end = lds__ld64(idx->key_offsets + (row + 1) * 8);
    }
}

/* Bytes lds__key_hash_over may read from the start of a key, whatever its length. */
#define LDS__KEY_HASH_READ 16

/*
 * The hash of the key tables (in memory only, never stored). Keys of up to 16
 * bytes, most keys in practice, take one 64x64->128 multiply and no branch on
 * the length (words of random lengths would mispredict: XXH3 takes 1.6 ms for
 * GloVe's 341,479 words, this 0.9 ms); longer keys take
 * XXH3-64. It reads max(len, 16) bytes at `key`: the parser passes keys that
 * lie inside the payload at least 16 bytes before its end; lds__key_hash
 * (util.c) reads exactly `len` bytes and gives the same value.
 */
static inline uint64_t lds__key_hash_over(const void *key, size_t len)
{
    if (len > LDS__KEY_HASH_READ)
        return XXH3_64bits(key, len);
    __extension__ typedef unsigned __int128 u128;
    uint64_t lo, hi;
    memcpy(&lo, key, 8);
    memcpy(&hi, (const uint8_t *)key + 8, 8);
    size_t nlo = len < 8 ? len : 8, nhi = len - nlo;
    /* Keep the key's bytes only; two shifts of at most 32 (one of 64 is undefined). */
    lo &= ~(~(uint64_t)0 << (4 * nlo) << (4 * nlo));
    hi &= ~(~(uint64_t)0 << (4 * nhi) << (4 * nhi));
    u128 m = (u128)(lo ^ UINT64_C(0xa0761d6478bd642f)) *
             (hi ^ UINT64_C(0xe7037ed1a0b428db) ^ ((uint64_t)len << 56));
    return (uint64_t)m ^ (uint64_t)(m >> 64);
}

/* As lds__key_hash_over, reading exactly `len` bytes at `key`. */
uint64_t lds__key_hash(const void *key, size_t len);

/*
 * A slot of the index's key table: 0 = empty, else the row in the low
 * `row_bits` bits and, above them, a tag taken from the top bits of the key's
 * hash (never 0). Probing compares tags first, so a collision rarely costs a
 * look at another key's offsets and bytes. row_bits is 32 unless rows exceed
 * 2^32 (possible only with a raised max_rows).
 */
static inline unsigned lds__key_row_bits(uint64_t rows)
{
    unsigned bits = 32;
    while (bits < 63 && rows > ((uint64_t)1 << bits))
        bits++;
    return bits;
}

static inline uint64_t lds__key_slot(uint64_t hash, unsigned row_bits, uint64_t row)
{
    uint64_t tag = hash >> row_bits;
    return ((tag ? tag : 1) << row_bits) | row;
}

/* Whether `slot` (non-empty) may hold a key of hash `hash`. */
static inline bool lds__key_slot_tag_is(uint64_t slot, uint64_t hash, unsigned row_bits)
{
    return (slot >> row_bits) == (lds__key_slot(hash, row_bits, 0) >> row_bits);
}

static inline uint64_t lds__key_slot_row(uint64_t slot, unsigned row_bits)
{
    return slot & (((uint64_t)1 << row_bits) - 1);
}

#endif /* LDS_FORMAT_INTERNAL_H */
