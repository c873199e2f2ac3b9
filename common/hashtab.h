/*
 * The keyed hash and the one hash table of lodestar (common/, ADR 0010; not installed), behind
 * format/'s key and id tables, the writer's unique keys and import/'s duplicate-key table.
 *
 * Every in-memory table filled from input (the parser's key table, the
 * index's id table, the writer's unique-key table, the metadata check) hashes
 * with a key drawn once per process from getrandom(2). Nothing hashed here is
 * ever stored in a file, so the key never leaves the process: keys or ids
 * chosen offline cannot be aimed at a window of a table (hash flooding).
 *
 * The table is open addressing with linear probing over 8-byte slots, at most
 * half full. A slot is 0 (empty) or holds a row in its low `row_bits` bits and,
 * above them, a tag taken from the top bits of the hash (never 0): probing
 * compares tags first, so a collision rarely costs a look at another row's key.
 * What a row's key is (bytes in a payload, an id, a key in the writer's
 * buffer) stays with the caller, which passes an equality callback; the probe
 * functions are inline so that the callback is inlined at each call site.
 */
#ifndef LDS_HASHTAB_H
#define LDS_HASHTAB_H

#include "lodestar_core.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <xxhash.h>

/* Bytes of XXH3 secret in the process key (at least XXH3_SECRET_SIZE_MIN, 136). */
#define LDS__HASH_XXH_SECRET 192

/* Capacity of the hash tables (slots of 8 bytes): a power of two >= 2 * n, at least 16.
   Returns 0 if it overflows. */
uint64_t lds__table_capacity(uint64_t n);

/* The process's hash key: random, drawn once, never written anywhere. */
typedef struct lds__hashkey {
    uint64_t k[4];
    unsigned char xxh[LDS__HASH_XXH_SECRET];
} lds__hashkey;

/* The process key, drawn on first use (getrandom, else /dev/urandom, else the
   clock and addresses: see hashtab.c). Thread-safe; never fails. */
const lds__hashkey *lds__hashkey_get(void);

/* Bytes lds__hash_key_over may read from the start of a key, whatever its length. */
#define LDS__KEY_HASH_READ 16

__extension__ typedef unsigned __int128 lds__u128;

/* Two keyed 64x64->128 multiplies (the construction of wyhash's short-input
   path): words (lo, hi) of a key of `len` bytes, or an id as (id, 0, 8). */
static inline uint64_t lds__hash_words(const lds__hashkey *hk, uint64_t lo, uint64_t hi,
                                       uint64_t len)
{
    lds__u128 m = (lds__u128)(lo ^ hk->k[0]) * (hi ^ hk->k[1]);
    lds__u128 r = (lds__u128)((uint64_t)m ^ hk->k[2] ^ len) * ((uint64_t)(m >> 64) ^ hk->k[3]);
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/*
 * The keyed hash of a key of `len` bytes. Keys of up to 16 bytes, most keys in
 * practice, take two multiplies and no branch on the length (words of random
 * lengths would mispredict); longer ones XXH3-64 with the process's secret.
 * It reads max(len, 16) bytes at `key`: the parser passes keys that lie inside
 * the payload at least 16 bytes before its end; lds__hash_key reads exactly
 * `len` bytes and gives the same value.
 */
static inline uint64_t lds__hash_key_over(const lds__hashkey *hk, const void *key, size_t len)
{
    if (len > LDS__KEY_HASH_READ)
        return XXH3_64bits_withSecret(key, len, hk->xxh, sizeof hk->xxh);
    uint64_t lo, hi;
    memcpy(&lo, key, 8);
    memcpy(&hi, (const uint8_t *)key + 8, 8);
    size_t nlo = len < 8 ? len : 8, nhi = len - nlo;
    /* Keep the key's bytes only; two shifts of at most 32 (one of 64 is undefined). */
    lo &= ~(~(uint64_t)0 << (4 * nlo) << (4 * nlo));
    hi &= ~(~(uint64_t)0 << (4 * nhi) << (4 * nhi));
    return lds__hash_words(hk, lo, hi, len);
}

/* As lds__hash_key_over, reading exactly `len` bytes at `key`. */
uint64_t lds__hash_key(const lds__hashkey *hk, const void *key, size_t len);

/* The keyed hash of a 64-bit id. */
static inline uint64_t lds__hash_id(const lds__hashkey *hk, uint64_t id)
{
    return lds__hash_words(hk, id, 0, 8);
}

/* Probe counts of a table (the test hook of ADR 0010: counts, not times). */
typedef struct lds__probe_stats {
    uint64_t inserts;     /* rows inserted or found equal, rehashing included */
    uint64_t probes;      /* slots looked at by those inserts */
    uint64_t longest;     /* most slots one insert looked at */
    uint64_t longest_run; /* longest run of full slots: what a miss may walk */
    uint64_t capacity;    /* slots */
} lds__probe_stats;

typedef struct lds__hashtab {
    uint64_t *slots; /* capacity = mask + 1 slots, a power of two */
    uint64_t mask;
    uint64_t count;  /* full slots */
    uint64_t probes; /* see lds__probe_stats */
    uint64_t inserts;
    uint32_t longest; /* saturates at UINT32_MAX */
    uint8_t row_bits; /* 32..63: bits of a slot that hold the row */
    const lds__hashkey *hk;
} lds__hashtab;

/* Compares the row of a full slot with the item being looked up or inserted
   (which `ctx` describes). */
typedef bool (*lds__hashtab_eq)(const void *ctx, uint64_t row);
/* The hash of the item of `row` (to rehash when the table grows). */
typedef uint64_t (*lds__hashtab_rehash)(const void *ctx, uint64_t row);

/*
 * Makes an empty table for up to `n` rows (lds__table_capacity(n) slots) whose
 * rows are below `max_rows` (which sets row_bits). LDS_E_NOMEM when the slots
 * cannot be had; then `t` holds nothing to free. Not thread-safe.
 */
lds_status lds__hashtab_init(lds__hashtab *t, uint64_t n, uint64_t max_rows);
/* The row_bits lds__hashtab_init gives a table whose rows are below `max_rows`. */
uint8_t lds__hashtab_row_bits(uint64_t max_rows);
/* Frees the slots; `t` may be zeroed or freed already. */
void lds__hashtab_free(lds__hashtab *t);
/* Grows `t` (doubling, rehashing every row with `rehash`) so that it holds
   `n` rows at most half full. false if out of memory (t is unchanged). */
bool lds__hashtab_reserve(lds__hashtab *t, uint64_t n, lds__hashtab_rehash rehash, const void *ctx);
/* The probe counts of `t` (longest_run by a scan of the slots). */
void lds__hashtab_stats(const lds__hashtab *t, lds__probe_stats *out);

static inline uint64_t lds__hashtab_tag(const lds__hashtab *t, uint64_t h)
{
    uint64_t tag = h >> t->row_bits;
    return (tag ? tag : 1) << t->row_bits;
}

static inline uint64_t lds__hashtab_row(const lds__hashtab *t, uint64_t slot)
{
    return slot & (((uint64_t)1 << t->row_bits) - 1);
}

static inline void lds__hashtab_prefetch(const lds__hashtab *t, uint64_t h)
{
    __builtin_prefetch(&t->slots[h & t->mask], 1);
}

/* Looks for the item of hash `h`: true and its row in *row if a full slot's
   row is equal under `eq`. Reads only (threads may look up concurrently, and one thread
   may insert meanwhile: each slot is read as one atomic word, and an insert only fills an
   empty slot, so a lookup sees a slot empty or full, never torn; docs/adr/0055). */
static inline bool lds__hashtab_find(const lds__hashtab *t, uint64_t h, lds__hashtab_eq eq,
                                     const void *ctx, uint64_t *row)
{
    uint64_t tag = lds__hashtab_tag(t, h), high = ~(((uint64_t)1 << t->row_bits) - 1);
    for (uint64_t j = h & t->mask;; j = (j + 1) & t->mask) {
        uint64_t v = __atomic_load_n(&t->slots[j], __ATOMIC_RELAXED);
        if (v == 0)
            return false;
        if ((v & high) == tag && eq(ctx, v & ~high)) {
            *row = v & ~high;
            return true;
        }
    }
}

/*
 * Inserts `row` as the item of hash `h` unless a row equal under `eq` is
 * already there. Returns UINT64_MAX if inserted, else the row found (which
 * keeps the slot: the first row inserted keeps a repeated item). The caller
 * keeps the table at most half full (lds__hashtab_init's n, or
 * lds__hashtab_reserve) so that an empty slot is always reached.
 */
static inline uint64_t lds__hashtab_insert(lds__hashtab *t, uint64_t h, uint64_t row,
                                           lds__hashtab_eq eq, const void *ctx)
{
    uint64_t tag = lds__hashtab_tag(t, h), high = ~(((uint64_t)1 << t->row_bits) - 1);
    uint64_t n = 1, found = UINT64_MAX;
    for (uint64_t j = h & t->mask;; j = (j + 1) & t->mask, n++) {
        uint64_t v = __atomic_load_n(&t->slots[j], __ATOMIC_RELAXED);
        if (v == 0) {
            /* One atomic word: lookups may run meanwhile (lds__hashtab_find). */
            __atomic_store_n(&t->slots[j], tag | row, __ATOMIC_RELAXED);
            t->count++;
            break;
        }
        if ((v & high) == tag && eq(ctx, v & ~high)) {
            found = v & ~high;
            break;
        }
    }
    t->inserts++;
    t->probes += n;
    if (n > t->longest)
        t->longest = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    return found;
}

#endif /* LDS_HASHTAB_H */
