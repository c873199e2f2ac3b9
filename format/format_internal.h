/* Internal helpers shared by the files of format/ (not installed). */
#ifndef LDS_FORMAT_INTERNAL_H
#define LDS_FORMAT_INTERNAL_H

#include "hashtab.h"
#include "lds_common.h"
#include "lodestar_core.h"
#include "lodestar_index.h"

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

/* x rounded up to a multiple of `a`, a power of two (64, or a chunk size of a
   CHUNK_ALIGNED file: format.md §4.4); x is a payload offset, far below 2^64 - a. */
static inline uint64_t lds__align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) & ~(a - 1);
}

/* Tests only: called by the parser at named points ("keys.offset checked": the key
   offsets are validated, the keys not yet read), to change the payload underneath. */
extern void (*lds__parse_test_hook)(const char *where);

/* Tests only: true makes a writer without unique_keys set KEYS_UNIQUE all the same, as a
   foreign or crafted file whose keys repeat may (K7 is then the reader's to find). */
extern bool lds__writer_claim_unique;

/* Threads that verify `chunks` chunks when `asked` were asked (0: one per online
   core, at most 8; never more than the chunks). */
unsigned lds__verify_threads(unsigned asked, uint64_t chunks);

/* Converts one stored row (dim elements of dtype, any alignment) to float32. */
void lds__row_to_f32(const uint8_t *src, lds_dtype dtype, float scale, uint32_t dim, float *out);

/* What the generations sharing one key table share besides its slots (docs/adr/0055):
   `refs` counts the indexes holding the slots; `rows` is the watermark: the table holds
   the keys of rows [0, rows), inserted in row order. A later generation with more rows
   whose first `rows` rows hold the same keys extends the table in place (claiming it by
   moving `rows` from its predecessor's count to LDS__KEYS_EXTENDING, then to its own
   count): entries never move once inserted (linear probing), each slot is written and read
   as one atomic word, and an index's lookups skip rows at or past its own row count, so
   an older generation looking keys up meanwhile sees exactly its keys. */
typedef struct lds__keys_share {
    _Atomic(uint64_t) refs;
    _Atomic(uint64_t) rows;
} lds__keys_share;
#define LDS__KEYS_EXTENDING UINT64_MAX

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
    uint32_t chunk_bytes; /* format 1.1: the chunk size; 0 for 1.0 */
    uint64_t chunk_count; /* format 1.1: chunks in the table */
    bool chunk_aligned;   /* format 1.2: sections on chunk boundaries (CHUNK_ALIGNED) */
    uint64_t checksum;
    bool checksum_verified;

    void *owned; /* copy mode: the block holding [0, table_offset) */
    void (*release)(void *ctx);
    void *release_ctx;

    size_t meta_count;
    const char **meta; /* 2 * meta_count pointers: key, value, ... */
    char *meta_arena;

    /* The key table, built at the first lookup (ADR 0010): key_state is 0
       before, 1 after, 2 after if keys repeat under KEYS_UNIQUE (K7: rows
       key_dup repeats the key of key_dup_of). */
    pthread_mutex_t key_lock;
    _Atomic(int) key_state;
    lds__hashtab keys;     /* row of each key (the lowest row of a repeated one) */
    /* Non-NULL: keys.slots may be shared with other generations whose rows
       [0, their rows) hold the same keys (lds__index_keys_from, docs/adr/0055); the last
       index to drop its reference frees them. */
    lds__keys_share *keys_share;
    uint64_t key_bytes_at; /* file offset of the key bytes, for K7's message */
    uint64_t key_dup, key_dup_of;

    pthread_mutex_t id_lock;
    _Atomic(lds__hashtab *) ids_table; /* built at the first lds_index_find_id */

    _Atomic(double *) inv_norms; /* 1 / |row|, built by the first cosine search (search.c) */
};

/* Test hooks (ADR 0010): the probe counts of the index's key table, of its id
   table (zeros before the first lds_index_find_id), and of a writer's
   unique-key table (zeros without unique_keys). */
void lds__index_key_probe_stats(const lds_index *idx, lds__probe_stats *out);
void lds__index_id_probe_stats(const lds_index *idx, lds__probe_stats *out);
void lds__writer_key_probe_stats(const lds_writer *w, lds__probe_stats *out);
/* After lds_writer_add_row refused a row with LDS_E_DUP_KEY: the row that
   holds the key already (the importer names its input line). */
uint64_t lds__writer_dup_row(const lds_writer *w);

/* What lds__index_keys_from did. */
enum {
    LDS__KEYS_LAZY = 0, /* nothing: prev never built its table, an index has no keys, or no
                           memory (the table is built at the first lookup, as before) */
    LDS__KEYS_EXTENDED, /* prev's table shared and the rows after prev's inserted in place */
    LDS__KEYS_BUILT,    /* built from every row */
    LDS__KEYS_HAD,      /* idx had its table already */
    LDS__KEYS_SHARED,   /* prev's table shared (the same keys, row for row): no copy */
    LDS__KEYS_BUILT_SPARE, /* as BUILT, into the spare's slots (no fresh mapping) */
};
/* Gives `idx` its key table now, before any reader sees it, when `prev` (the generation
   `idx` replaces) has built one (docs/adr/0050, 0055). If rows [0, prev->rows) of `idx`
   hold prev's keys byte for byte (offsets and key bytes) and the table keeps its capacity
   and row width: prev's table itself, shared (reference-counted through keys_share), when
   idx has no rows after prev's; extended in place with idx's rows after prev's when it has
   (prev's lookups skip those rows; only when the table's watermark is prev's row count, so
   no entry of a generation that is not in idx's line is in it). Else a full build. Section
   ranges whose whole chunks have the same XXH3-64 in both verified chunk tables count as
   equal without a byte compare (docs/adr/0055). A mapped generation (use_mmap: its key
   offsets copied out of the mapping, its key bytes still in it) on either side gets a full
   build: a file rewritten in place shows its new keys through the old mapping too, while
   the old table holds the old keys' hashes. Lookups and K7 then behave exactly as after a
   lazy build. Returns an LDS__KEYS_* value; LDS__KEYS_LAZY also when the slots cannot be
   had (no error: the first lookup builds it). `prev` is only read (its table's slots
   written only where empty, atomically) and may be looked up in concurrently; no other
   thread may use `idx` meanwhile.
   `spare` (may be NULL; docs/adr/0055): slots a freed generation left (lds__index_take_keys).
   A full build goes into them when their capacity and row width are a fresh table's: they
   become idx's (the result is LDS__KEYS_BUILT_SPARE) and *spare is emptied; else *spare is
   left as it was and the caller still owns it. */
int lds__index_keys_from(lds_index *idx, const lds_index *prev, lds__hashtab *spare);

/* Moves `idx`'s key table into *out (the caller then owns the slots: lds__hashtab_free)
   when idx built or was handed one and is its only holder (not shared with another
   generation); the index then frees no slots. For an index about to be freed, that no
   reader can reach (a retired generation with no pins). False, *out untouched, otherwise.
   Not thread-safe against lookups in `idx`. */
bool lds__index_take_keys(lds_index *idx, lds__hashtab *out);

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

#endif /* LDS_FORMAT_INTERNAL_H */
