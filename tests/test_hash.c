/*
 * Tests of the keyed hash tables (common/hashtab.h, ADR 0010): hash flooding.
 *
 * The attacker's model is the hash this library used before ADR 0010, copied
 * here: an unseeded multiply for short keys, and the SplitMix64 finalizer (a
 * public bijection) for ids. The tests build, from that model, keys whose old
 * hash lands in a small window of the table and ids whose old hash is a
 * multiple of the table's capacity (slot 0), then assert on the probe counts
 * the tables keep (counts, not times) that the longest probe stays within a
 * small multiple of what random keys get: for the parser's key table (the
 * verify of such an index), the writer's unique-key table (the pack path:
 * the importer has no table of its own) and the id table of
 * lds_index_find_id. Under the old hash each of these fails (and takes
 * seconds: the probes grow with the square of the rows).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "../format/format_internal.h"
#include "lodestar.h"

enum { N = 200000 };

/* The longest insert probe random keys get here is about 20 (200,000 rows in
   2^19 slots, 38% full; the writer's rehash at 50%: up to 46 in 120 runs); a
   flooded table's is in the tens of thousands. */
#define LONGEST_BOUND 96
/* Mean probes per insert at this load: about 1.3. */
#define MEAN_BOUND 2.0

/* ---- the attacker's model: the hashes before ADR 0010 ----------------------- */

static uint64_t old_key_hash(const void *key, size_t len)
{
    uint8_t b[16] = {0};
    memcpy(b, key, len < 16 ? len : 16);
    uint64_t lo, hi;
    memcpy(&lo, b, 8);
    memcpy(&hi, b + 8, 8);
    __extension__ typedef unsigned __int128 u128;
    u128 m = (u128)(lo ^ UINT64_C(0xa0761d6478bd642f)) *
             (hi ^ UINT64_C(0xe7037ed1a0b428db) ^ ((uint64_t)len << 56));
    return (uint64_t)m ^ (uint64_t)(m >> 64);
}

static uint64_t old_id_hash(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

static uint64_t unxorshift(uint64_t y, unsigned s)
{
    uint64_t x = y;
    for (unsigned k = s; k < 64; k += s)
        x = y ^ (x >> s);
    return x;
}

static uint64_t mul_inverse(uint64_t c)
{
    uint64_t inv = c; /* right to 3 bits for odd c; each step doubles them */
    for (int i = 0; i < 5; i++)
        inv *= 2 - c * inv;
    return inv;
}

/* The id whose old hash is `h`: the finalizer undone step by step. */
static uint64_t old_id_preimage(uint64_t h)
{
    uint64_t x = unxorshift(h, 31);
    x *= mul_inverse(UINT64_C(0x94d049bb133111eb));
    x = unxorshift(x, 27);
    x *= mul_inverse(UINT64_C(0xbf58476d1ce4e5b9));
    return unxorshift(x, 30);
}

/* ---- inputs ---------------------------------------------------------------------- */

typedef struct keyset {
    char (*key)[9];
    uint64_t n;
} keyset;

/* An 8-letter ASCII key spelling c in base 64 (letters, digits, '-', '_'). */
static void spell(uint64_t c, char out[9])
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    for (int i = 0; i < 8; i++, c >>= 6)
        out[i] = abc[c & 63];
    out[8] = '\0';
}

/* n distinct keys; with `window`, only those whose old hash modulo the
   capacity of an n-row table is below it (the keys an attacker would pick). */
static keyset make_keys(uint64_t n, uint64_t window)
{
    keyset k = {calloc(n, sizeof *k.key), 0};
    assert_non_null(k.key);
    uint64_t mask = lds__table_capacity(n) - 1;
    for (uint64_t c = 0; k.n < n; c++) {
        char s[9];
        /* A bijection of [0, 2^48): distinct keys that look random to the old hash. */
        spell(c * UINT64_C(0x9E3779B97F4A7C15) & ((UINT64_C(1) << 48) - 1), s);
        if (window && (old_key_hash(s, 8) & mask) >= window)
            continue;
        memcpy(k.key[k.n++], s, 9);
    }
    return k;
}

static char tmpdir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lds-test-hash-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char p[128];
    snprintf(p, sizeof p, "%s/index.ldsi", tmpdir);
    unlink(p);
    return rmdir(tmpdir);
}

typedef struct bytes {
    uint8_t *p;
    size_t n;
} bytes;

static bytes read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    bytes b = {malloc((size_t)n), (size_t)n};
    assert_non_null(b.p);
    assert_int_equal(fread(b.p, 1, b.n, f), b.n);
    fclose(f);
    return b;
}

/* Writes an index of k's keys (or of ids, one a row) and returns its bytes.
   With `stats`, the writer has unique_keys on and *stats gets its probe counts. */
static bytes write_index(const keyset *k, const uint64_t *ids, uint64_t rows,
                         lds__probe_stats *stats)
{
    char path[128];
    snprintf(path, sizeof path, "%s/index.ldsi", tmpdir);
    lds_writer_options o;
    lds_writer_options_default(&o);
    o.dim = 1;
    o.metric = LDS_METRIC_L2;
    o.with_keys = k != NULL;
    o.unique_keys = stats != NULL;
    o.with_ids = ids != NULL;
    lds_writer *w = NULL;
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_writer_open_path(path, &o, &w, &err), LDS_OK);
    for (uint64_t r = 0; r < rows; r++) {
        float v = (float)r;
        lds_status st =
            lds_writer_add_row(w, &v, 1, ids ? ids[r] : 0, k ? k->key[r] : NULL, k ? 8 : 0, &err);
        if (st != LDS_OK)
            fail_msg("row %llu: %s", (unsigned long long)r, err.message);
    }
    if (stats)
        lds__writer_key_probe_stats(w, stats);
    assert_int_equal(lds_writer_finish(w, &err), LDS_OK);
    lds_writer_free(w);
    return read_file(path);
}

static lds_index *parse(const bytes *b)
{
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    lds_header h;
    assert_int_equal(lds_header_decode(b->p, b->n, &h, NULL), LDS_OK);
    lds_parse_options po;
    lds_parse_options_default(&po);
    po.header = &h; /* format 1.1: the chunk table */
    lds_status st =
        lds_index_from_payload(b->p + LDS_HEADER_SIZE, b->n - LDS_HEADER_SIZE, &po, &idx, &err);
    if (st != LDS_OK)
        fail_msg("parse: %s", err.message);
    return idx;
}

static void expect_bounded(const char *what, const lds__probe_stats *s, uint64_t rows)
{
    print_message("%s: %llu inserts, %llu probes (%.2f each), longest %llu, longest run %llu "
                  "of %llu slots\n",
                  what, (unsigned long long)s->inserts, (unsigned long long)s->probes,
                  s->inserts ? (double)s->probes / (double)s->inserts : 0.0,
                  (unsigned long long)s->longest, (unsigned long long)s->longest_run,
                  (unsigned long long)s->capacity);
    assert_true(s->inserts >= rows);
    assert_true(s->longest <= LONGEST_BOUND);
    assert_true((double)s->probes <= MEAN_BOUND * (double)s->inserts);
    assert_true(s->longest_run <= 2 * LONGEST_BOUND);
}

/* ---- tests ------------------------------------------------------------------------ */

/* The attacker's model is right: the chosen keys and ids do flood the old hash. */
static void test_inputs_flood_the_old_hash(void **state)
{
    (void)state;
    uint64_t mask = lds__table_capacity(N) - 1;
    keyset k = make_keys(N, 2048);
    for (uint64_t r = 0; r < k.n; r++)
        assert_true((old_key_hash(k.key[r], 8) & mask) < 2048);
    for (uint64_t r = 1; r < k.n; r++)
        assert_true(memcmp(k.key[r - 1], k.key[r], 8) != 0);
    for (uint64_t i = 0; i < 1000; i++)
        assert_true(old_id_hash(old_id_preimage(i << 20)) == i << 20);
    free(k.key);
}

/* Parser: an index of 200,000 keys aimed at 2,048 slots of the old table. */
static void test_parser_key_table_resists_flooding(void **state)
{
    (void)state;
    keyset k = make_keys(N, 2048);
    bytes b = write_index(&k, NULL, N, NULL);
    lds_index *idx = parse(&b);
    lds__probe_stats s;
    lds__index_key_probe_stats(idx, &s);
    assert_int_equal(s.inserts, 0); /* built at the first lookup, or the check */
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_index_check_keys(idx, &err), LDS_OK); /* as lodestar verify */
    lds__index_key_probe_stats(idx, &s);
    expect_bounded("parser, keys aimed at the old hash", &s, N);
    for (uint64_t r = 0; r < N; r += 997) {
        uint64_t row = UINT64_MAX;
        assert_int_equal(lds_index_find_key(idx, k.key[r], 8, &row), LDS_OK);
        assert_int_equal(row, r);
    }
    uint64_t row;
    assert_int_equal(lds_index_find_key(idx, "not-there", 9, &row), LDS_E_NOT_FOUND);
    lds_index_free(idx);
    free(b.p);

    /* The same bound holds for ordinary keys: it is not loose. */
    keyset plain = make_keys(N, 0);
    b = write_index(&plain, NULL, N, NULL);
    idx = parse(&b);
    assert_int_equal(lds_index_find_key(idx, plain.key[7], 8, &row), LDS_OK);
    assert_int_equal(row, 7);
    lds__index_key_probe_stats(idx, &s);
    expect_bounded("parser, ordinary keys", &s, N);
    lds_index_free(idx);
    free(b.p);
    free(plain.key);
    free(k.key);
}

/* Writer (and so pack): the unique-key table on the same keys. */
static void test_writer_key_table_resists_flooding(void **state)
{
    (void)state;
    keyset k = make_keys(N, 2048);
    lds__probe_stats s;
    bytes b = write_index(&k, NULL, N, &s);
    expect_bounded("writer, keys aimed at the old hash", &s, N);
    /* The file is whole: the parser (KEYS_UNIQUE set) finds every key. */
    lds_index *idx = parse(&b);
    assert_true(lds_index_keys_unique(idx));
    uint64_t row = 0;
    assert_int_equal(lds_index_find_key(idx, k.key[N - 1], 8, &row), LDS_OK);
    assert_int_equal(row, N - 1);
    lds_index_free(idx);
    free(b.p);
    free(k.key);
}

/* ---- the key table a reload hands on (lds__index_keys_from, docs/adr/0050) ---------- */

/* Parses the index of k's first `rows` keys (no KEYS_UNIQUE in the file: with `unique`,
   the flag is set on the parsed index, so that repeats can be written). */
static lds_index *keyed(const keyset *k, uint64_t rows, bool unique, bytes *b)
{
    *b = write_index(k, NULL, rows, NULL);
    lds_index *idx = parse(b);
    if (unique)
        idx->flags |= LDS__TF_KEYS_UNIQUE;
    return idx;
}

/* `got` (given its table by lds__index_keys_from) behaves as `fresh` (a lazy build of
   the same file): every key finds the same row, a missing key is missing, K7's verdict
   and message are the same, and so are the table's counts. */
static void expect_same_keys(const keyset *k, lds_index *got, lds_index *fresh)
{
    lds_error eg, ef;
    lds_error_init(&eg);
    lds_error_init(&ef);
    lds_status sg = lds_index_check_keys(got, &eg), sf = lds_index_check_keys(fresh, &ef);
    assert_int_equal(sg, sf);
    if (sf != LDS_OK) {
        assert_int_equal(eg.offset, ef.offset);
        assert_string_equal(eg.message, ef.message);
        assert_int_equal(got->key_dup, fresh->key_dup);
        assert_int_equal(got->key_dup_of, fresh->key_dup_of);
        return;
    }
    for (uint64_t r = 0; r < fresh->rows; r++) {
        uint64_t a = UINT64_MAX, b = UINT64_MAX;
        assert_int_equal(lds_index_find_key(got, k->key[r], 8, &a), LDS_OK);
        assert_int_equal(lds_index_find_key(fresh, k->key[r], 8, &b), LDS_OK);
        assert_int_equal(a, b);
        assert_true(a <= r);
    }
    uint64_t row;
    assert_int_equal(lds_index_find_key(got, k->key[k->n - 1], 8, &row), LDS_E_NOT_FOUND);
    lds__probe_stats s1, s2;
    lds__index_key_probe_stats(got, &s1);
    lds__index_key_probe_stats(fresh, &s2);
    assert_int_equal(s1.capacity, s2.capacity);
    assert_int_equal(s1.inserts, s2.inserts);
    assert_int_equal(s1.longest_run, s2.longest_run);
}

/* `prev` (rows [0, rows0) of kp, its table built; the table since shared with or extended
   by a later generation holding rows [0, rows1) of kn) answers as a fresh build of its own
   file: every key of both key sets finds the same row or none, and K7's verdict is the
   same. An extension in place must not show prev the rows appended after its own. */
static void expect_prev_keys(const keyset *kp, uint64_t rows0, const keyset *kn, uint64_t rows1,
                             bool unique, lds_index *prev)
{
    bytes bf;
    lds_index *fresh = keyed(kp, rows0, unique, &bf);
    assert_int_equal(lds_index_check_keys(prev, NULL), lds_index_check_keys(fresh, NULL));
    const keyset *sets[2] = {kp, kn};
    uint64_t upto[2] = {rows0, rows1 < kn->n ? rows1 : kn->n};
    for (int i = 0; i < 2; i++)
        for (uint64_t r = 0; r < upto[i]; r++) {
            uint64_t a = UINT64_MAX, b = UINT64_MAX;
            lds_status sa = lds_index_find_key(prev, sets[i]->key[r], 8, &a);
            lds_status sb = lds_index_find_key(fresh, sets[i]->key[r], 8, &b);
            assert_int_equal(sa, sb);
            assert_int_equal(a, b);
            if (sa == LDS_OK)
                assert_true(a < rows0);
        }
    lds_index_free(fresh);
    free(bf.p);
}

/* One reload: `prev` of rows [0, rows0) of kp (its table built when `built`), the new
   index of rows [0, rows1) of kn; asserts what lds__index_keys_from did and that the
   result behaves as a fresh build. */
static void reload_keys(const keyset *kp, uint64_t rows0, const keyset *kn, uint64_t rows1,
                        bool unique, bool built, int expect)
{
    bytes bp, bn, bf;
    lds_index *prev = keyed(kp, rows0, unique, &bp);
    if (built)
        (void)lds_index_check_keys(prev, NULL);
    lds_index *idx = keyed(kn, rows1, unique, &bn);
    lds_index *fresh = keyed(kn, rows1, unique, &bf);
    assert_int_equal(lds__index_keys_from(idx, prev, NULL), expect);
    lds__probe_stats s;
    lds__index_key_probe_stats(idx, &s);
    assert_int_equal(s.inserts == 0, expect == LDS__KEYS_LAZY);
    if (built)
        expect_prev_keys(kp, rows0, kn, rows1, unique, prev);
    lds_index_free(prev); /* the new table owes prev nothing */
    free(bp.p);
    expect_same_keys(kn, idx, fresh);
    lds_index_free(idx);
    lds_index_free(fresh);
    free(bn.p);
    free(bf.p);
}

static keyset copy_keys(const keyset *k)
{
    keyset c = {malloc(k->n * sizeof *k->key), k->n};
    assert_non_null(c.key);
    memcpy(c.key, k->key, k->n * sizeof *k->key);
    return c;
}

/* The table extended in place with the appended rows, or shared, or a full build, each
   exactly a fresh build's for the new index, while the old one still answers as its own
   fresh build: the same keys plus rows (extended), the same file (shared), one key changed
   (build), rows appended past the table's capacity (build), rows removed (build), a repeat
   among the appended rows or among the kept ones (K7: the same rows named), and no table
   before (lazy, as before). */
static void test_reload_hands_on_key_table(void **state)
{
    (void)state;
    enum { R0 = 100000, R1 = 101000 }; /* both in 2^18 slots */
    keyset k = make_keys(R1 + 1, 0);   /* the last: a key no index holds */
    reload_keys(&k, R0, &k, R1, false, true, LDS__KEYS_EXTENDED);
    reload_keys(&k, R0, &k, R0, false, true, LDS__KEYS_SHARED); /* the same file again */
    reload_keys(&k, R0, &k, R1, false, false, LDS__KEYS_LAZY);
    reload_keys(&k, 65536, &k, 65600, false, true, LDS__KEYS_BUILT); /* 2^17 -> 2^18 slots */
    reload_keys(&k, R1, &k, R0, false, true, LDS__KEYS_BUILT);        /* rows removed */

    keyset changed = copy_keys(&k);
    memcpy(changed.key[500], "changed!", 9);
    reload_keys(&k, R0, &changed, R1, false, true, LDS__KEYS_BUILT);

    keyset dup = copy_keys(&k); /* rows 100500 and 100700 repeat 300 and 100100 */
    memcpy(dup.key[100500], k.key[300], 9);
    memcpy(dup.key[100700], k.key[100100], 9);
    reload_keys(&k, R0, &dup, R1, true, true, LDS__KEYS_EXTENDED);
    reload_keys(&k, R0, &dup, R1, false, true, LDS__KEYS_EXTENDED); /* no K7: lowest row wins */

    keyset dup0 = copy_keys(&dup); /* and row 70 repeats row 10: prev fails K7 already */
    memcpy(dup0.key[70], k.key[10], 9);
    reload_keys(&dup0, R0, &dup0, R1, true, true, LDS__KEYS_EXTENDED);
    free(dup0.key);
    free(dup.key);
    free(changed.key);
    free(k.key);
}

/* The same keys row for row: the new generation shares the old one's table (no copy,
   docs/adr/0055), which lives on after the old one is freed, through a chain of
   generations freed in either order; a table failing K7 is shared with its verdict. */
static void test_reload_shares_key_table(void **state)
{
    (void)state;
    enum { R0 = 100000 };
    keyset k = make_keys(R0 + 1, 0);
    bytes ba, bb, bc, bf;
    lds_index *a = keyed(&k, R0, false, &ba);
    assert_int_equal(lds_index_check_keys(a, NULL), LDS_OK);
    lds_index *b = keyed(&k, R0, false, &bb);
    assert_int_equal(lds__index_keys_from(b, a, NULL), LDS__KEYS_SHARED);
    assert_ptr_equal(b->keys.slots, a->keys.slots);
    assert_ptr_equal(b->keys_share, a->keys_share);
    assert_int_equal(atomic_load(&b->keys_share->refs), 2);
    lds_index_free(a); /* b keeps the table */
    free(ba.p);
    assert_int_equal(atomic_load(&b->keys_share->refs), 1);
    lds_index *c = keyed(&k, R0, false, &bc);
    assert_int_equal(lds__index_keys_from(c, b, NULL), LDS__KEYS_SHARED);
    lds_index *fresh = keyed(&k, R0, false, &bf);
    expect_same_keys(&k, b, fresh);
    lds_index_free(b);
    free(bb.p);
    expect_same_keys(&k, c, fresh);
    lds_index_free(c); /* the last reference: ASan reports a leak or a double free */
    free(bc.p);
    lds_index_free(fresh);
    free(bf.p);

    /* prev fails K7 (row 70 repeats row 10): the shared table keeps the verdict. */
    keyset dup = copy_keys(&k);
    memcpy(dup.key[70], k.key[10], 9);
    reload_keys(&dup, R0, &dup, R0, true, true, LDS__KEYS_SHARED);
    free(dup.key);
    free(k.key);
}

/* docs/adr/0055: rows appended generation after generation extend one table in place (the
   same slots, no copy); each generation, old or new, answers as a fresh build of its own
   file. A generation with the same rows as one whose table a later generation extended
   shares it and still sees only its rows; a second extension from the older generation (the
   table's watermark is past its rows: an abandoned line) builds afresh, as do fewer rows;
   a table without its share record (no memory) is never extended. */
static void test_reload_extends_key_table_in_place(void **state)
{
    (void)state;
    enum { R0 = 100000, R1 = 100500, R2 = 101000 }; /* all in 2^18 slots */
    keyset k = make_keys(R2 + 1, 0);
    bytes ba, bb, bc, bs, bx, bf;
    lds_index *a = keyed(&k, R0, false, &ba);
    assert_int_equal(lds_index_check_keys(a, NULL), LDS_OK);
    lds_index *b = keyed(&k, R1, false, &bb);
    assert_int_equal(lds__index_keys_from(b, a, NULL), LDS__KEYS_EXTENDED);
    assert_ptr_equal(b->keys.slots, a->keys.slots);
    assert_ptr_equal(b->keys_share, a->keys_share);
    assert_int_equal(atomic_load(&a->keys_share->refs), 2);
    assert_int_equal(atomic_load(&a->keys_share->rows), R1);
    lds_index *c = keyed(&k, R2, false, &bc);
    assert_int_equal(lds__index_keys_from(c, b, NULL), LDS__KEYS_EXTENDED);
    assert_ptr_equal(c->keys.slots, a->keys.slots);
    assert_int_equal(atomic_load(&a->keys_share->rows), R2);
    expect_prev_keys(&k, R0, &k, R2, false, a); /* a sees none of b's or c's rows */
    expect_prev_keys(&k, R1, &k, R2, false, b);
    lds_index *fresh = keyed(&k, R2, false, &bf);
    expect_same_keys(&k, c, fresh);
    lds_index_free(fresh);
    free(bf.p);

    /* The same rows as a: shared, although the table holds rows up to R2. */
    lds_index *s = keyed(&k, R0, false, &bs);
    assert_int_equal(lds__index_keys_from(s, a, NULL), LDS__KEYS_SHARED);
    expect_prev_keys(&k, R0, &k, R2, false, s);
    /* Appending to a again: the watermark is c's, not a's: built. */
    lds_index *x = keyed(&k, R1, false, &bx);
    assert_int_equal(lds__index_keys_from(x, a, NULL), LDS__KEYS_BUILT);
    assert_true(x->keys.slots != a->keys.slots);
    fresh = keyed(&k, R1, false, &bf);
    expect_same_keys(&k, x, fresh);
    lds_index_free(fresh);
    free(bf.p);
    lds_index_free(x);
    free(bx.p);

    /* The holders go in any order; the last frees the slots (ASan: no leak, no double free). */
    lds_index_free(b);
    free(bb.p);
    lds_index_free(a);
    free(ba.p);
    assert_int_equal(atomic_load(&c->keys_share->refs), 2);
    lds_index_free(s);
    free(bs.p);
    assert_int_equal(atomic_load(&c->keys_share->refs), 1);
    fresh = keyed(&k, R2, false, &bf);
    expect_same_keys(&k, c, fresh);
    lds_index_free(fresh);
    free(bf.p);
    lds_index_free(c);
    free(bc.p);

    /* Without a share record (as when malloc failed at the build): never extended. */
    lds_index *p = keyed(&k, R0, false, &ba);
    assert_int_equal(lds_index_check_keys(p, NULL), LDS_OK);
    free(p->keys_share);
    p->keys_share = NULL;
    lds_index *q = keyed(&k, R1, false, &bb);
    assert_int_equal(lds__index_keys_from(q, p, NULL), LDS__KEYS_BUILT);
    lds_index_free(q);
    free(bb.p);
    lds_index_free(p);
    free(ba.p);
    free(k.key);
}

/* A reader of the old generation during an extension in place (docs/adr/0055): until told
   to stop, it looks up every kept row's key (found at its row) and every appended row's key
   (not found: past its rows), while another thread inserts the appended rows into the same
   slots. Run under ThreadSanitizer in suite tsan. */
typedef struct old_reader {
    const lds_index *idx;
    const keyset *k;
    uint64_t rows, upto;
    _Atomic(int) stop;
    uint64_t failures, passes;
} old_reader;

static void *read_old_generation(void *p)
{
    old_reader *o = (old_reader *)p;
    do {
        for (uint64_t r = 0; r < o->upto; r += 7) {
            uint64_t row = UINT64_MAX;
            lds_status st = lds_index_find_key(o->idx, o->k->key[r], 8, &row);
            if (r < o->rows ? st != LDS_OK || row != r : st != LDS_E_NOT_FOUND)
                o->failures++;
        }
        o->passes++;
    } while (!atomic_load(&o->stop));
    return NULL;
}

static void test_extension_under_concurrent_lookups(void **state)
{
    (void)state;
    enum { R0 = 100000, R1 = 120000 }; /* both in 2^18 slots */
    keyset k = make_keys(R1, 0);
    bytes ba, bb;
    lds_index *a = keyed(&k, R0, false, &ba);
    assert_int_equal(lds_index_check_keys(a, NULL), LDS_OK);
    lds_index *b = keyed(&k, R1, false, &bb);
    old_reader o = {.idx = a, .k = &k, .rows = R0, .upto = R1};
    atomic_init(&o.stop, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, read_old_generation, &o), 0);
    assert_int_equal(lds__index_keys_from(b, a, NULL), LDS__KEYS_EXTENDED);
    atomic_store(&o.stop, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(o.failures, 0);
    assert_true(o.passes >= 1);
    for (uint64_t r = 0; r < R1; r += 3) {
        uint64_t row = UINT64_MAX;
        assert_int_equal(lds_index_find_key(b, k.key[r], 8, &row), LDS_OK);
        assert_int_equal(row, r);
    }
    lds_index_free(a);
    free(ba.p);
    lds_index_free(b);
    free(bb.p);
    free(k.key);
}

/* docs/adr/0055: the slots of a freed generation's table (lds__index_take_keys) take the
   next full build (other keys) when their capacity and row width fit: the same memory,
   cleared, every key found as in a fresh build, K7's repeat named. A table shared with
   another generation is not taken; a spare of another capacity is left to the caller and a
   fresh table made. */
static void test_reload_builds_into_spare_keys(void **state)
{
    (void)state;
    enum { R0 = 100000, R1 = 100500 }; /* both in 2^18 slots */
    keyset k = make_keys(R1 + 1, 0);
    keyset other = copy_keys(&k); /* other keys (a bit of each first byte flipped): a build */
    for (uint64_t r = 0; r < other.n; r++)
        other.key[r][0] ^= 1;
    keyset dup = copy_keys(&other);      /* row 100200 repeats row 300 */
    memcpy(dup.key[100200], other.key[300], 9);
    for (int unique = 0; unique < 2; unique++) {
        bytes ba, bb, bc, bf, bs;
        lds_index *a = keyed(&k, R0, unique, &ba);
        assert_int_equal(lds_index_check_keys(a, NULL), LDS_OK);
        lds_index *shared = keyed(&k, R0, unique, &bs);
        assert_int_equal(lds__index_keys_from(shared, a, NULL), LDS__KEYS_SHARED);
        lds__hashtab spare = {0};
        assert_false(lds__index_take_keys(a, &spare)); /* two holders */
        assert_null(spare.slots);
        lds_index_free(shared);
        free(bs.p);
        assert_true(lds__index_take_keys(a, &spare)); /* a retires */
        uint64_t *mem = spare.slots;
        assert_non_null(mem);
        assert_null(a->keys.slots);
        lds_index_free(a); /* frees no slots: ASan reports a double free otherwise */
        free(ba.p);
        lds_index *b = keyed(&k, R0, unique, &bb);
        assert_int_equal(lds_index_check_keys(b, NULL), LDS_OK);
        lds_index *c = keyed(&dup, R1, unique, &bc);
        assert_int_equal(lds__index_keys_from(c, b, &spare), LDS__KEYS_BUILT_SPARE);
        assert_null(spare.slots); /* c's now */
        assert_ptr_equal(c->keys.slots, mem);
        lds_index_free(b);
        free(bb.p);
        lds_index *fresh = keyed(&dup, R1, unique, &bf);
        expect_same_keys(&dup, c, fresh);
        lds_error e;
        lds_error_init(&e);
        assert_int_equal(lds_index_check_keys(c, &e), unique ? LDS_E_DUP_KEY : LDS_OK);
        if (unique) {
            assert_int_equal(c->key_dup, 100200);
            assert_int_equal(c->key_dup_of, 300);
        }
        lds_index_free(c);
        free(bc.p);
        lds_index_free(fresh);
        free(bf.p);
    }

    /* A spare of 2^17 slots does not fit a build of 2^18: left to the caller. */
    bytes bs, bp, bn;
    lds_index *small = keyed(&k, 60000, false, &bs);
    assert_int_equal(lds_index_check_keys(small, NULL), LDS_OK);
    lds__hashtab spare = {0};
    assert_true(lds__index_take_keys(small, &spare));
    lds_index_free(small);
    free(bs.p);
    lds_index *prev = keyed(&k, R0, false, &bp);
    assert_int_equal(lds_index_check_keys(prev, NULL), LDS_OK);
    lds_index *idx = keyed(&other, R1, false, &bn);
    uint64_t *mem = spare.slots;
    assert_int_equal(lds__index_keys_from(idx, prev, &spare), LDS__KEYS_BUILT);
    assert_ptr_equal(spare.slots, mem);
    lds__hashtab_free(&spare);
    lds_index_free(prev);
    free(bp.p);
    lds_index_free(idx);
    free(bn.p);
    free(dup.key);
    free(other.key);
    free(k.key);
}

/* lds_index_find_id: 200,000 ids whose old hash is a multiple of 2^20. */
static void test_id_table_resists_flooding(void **state)
{
    (void)state;
    uint64_t *ids = malloc(N * sizeof *ids);
    assert_non_null(ids);
    for (uint64_t i = 0; i < N; i++)
        ids[i] = old_id_preimage(i << 20);
    bytes b = write_index(NULL, ids, N, NULL);
    lds_index *idx = parse(&b);
    lds__probe_stats s;
    lds__index_id_probe_stats(idx, &s);
    assert_int_equal(s.inserts, 0); /* built at the first lookup */
    uint64_t row = UINT64_MAX;
    assert_int_equal(lds_index_find_id(idx, ids[12345], &row), LDS_OK);
    assert_int_equal(row, 12345);
    lds__index_id_probe_stats(idx, &s);
    expect_bounded("id table, ids aimed at slot 0 of the old hash", &s, N);
    for (uint64_t i = 0; i < N; i += 991) {
        assert_int_equal(lds_index_find_id(idx, ids[i], &row), LDS_OK);
        assert_int_equal(row, i);
    }
    /* A miss walks at most one run of full slots. */
    assert_int_equal(lds_index_find_id(idx, old_id_preimage((uint64_t)N << 20), &row),
                     LDS_E_NOT_FOUND);
    lds_index_free(idx);
    free(b.p);
    free(ids);
}

/* Threads that make the first key lookups at once share one table build. */
typedef struct finder {
    const lds_index *idx;
    const keyset *k;
    int failures;
} finder;

static void *find_keys(void *p)
{
    finder *f = (finder *)p;
    for (uint64_t r = 0; r < f->k->n; r += 37) {
        uint64_t row = UINT64_MAX;
        if (lds_index_find_key(f->idx, f->k->key[r], 8, &row) != LDS_OK || row != r)
            f->failures++;
    }
    return NULL;
}

static void test_lazy_key_table_is_thread_safe(void **state)
{
    (void)state;
    keyset k = make_keys(20000, 0);
    bytes b = write_index(&k, NULL, k.n, NULL);
    lds_index *idx = parse(&b);
    enum { T = 4 };
    pthread_t th[T];
    finder f[T];
    for (int i = 0; i < T; i++) {
        f[i] = (finder){idx, &k, 0};
        assert_int_equal(pthread_create(&th[i], NULL, find_keys, &f[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(f[i].failures, 0);
    }
    lds__probe_stats s;
    lds__index_key_probe_stats(idx, &s);
    assert_int_equal(s.inserts, k.n); /* built once */
    lds_index_free(idx);
    free(b.p);
    free(k.key);
}

/* The table itself: a repeat keeps the first row, growth keeps every row. */
typedef struct u64_probe {
    const uint64_t *items;
    uint64_t item;
} u64_probe;

static bool u64_eq(const void *ctx, uint64_t row)
{
    const u64_probe *p = (const u64_probe *)ctx;
    return p->items[row] == p->item;
}

static uint64_t u64_rehash(const void *ctx, uint64_t row)
{
    const u64_probe *p = (const u64_probe *)ctx;
    return lds__hash_id(lds__hashkey_get(), p->items[row]);
}

static void test_table_semantics(void **state)
{
    (void)state;
    enum { M = 5000 };
    static uint64_t items[M];
    for (uint64_t i = 0; i < M; i++)
        items[i] = i % 1000 * 7919; /* each item five times */
    lds__hashtab t;
    assert_int_equal(lds__hashtab_init(&t, 8, M), LDS_OK);
    assert_int_equal(t.mask + 1, 16);
    u64_probe p = {items, 0};
    const lds__hashkey *hk = lds__hashkey_get();
    for (uint64_t r = 0; r < M; r++) {
        assert_true(lds__hashtab_reserve(&t, t.count + 1, u64_rehash, &p));
        p.item = items[r];
        uint64_t got = lds__hashtab_insert(&t, lds__hash_id(hk, items[r]), r, u64_eq, &p);
        assert_int_equal(got, r < 1000 ? UINT64_MAX : r % 1000);
    }
    assert_int_equal(t.count, 1000);
    assert_true(t.mask + 1 >= 2000);
    for (uint64_t r = 0; r < 1000; r++) {
        p.item = items[r];
        uint64_t row = UINT64_MAX;
        assert_true(lds__hashtab_find(&t, lds__hash_id(hk, items[r]), u64_eq, &p, &row));
        assert_int_equal(row, r);
    }
    p.item = 1;
    uint64_t row;
    assert_false(lds__hashtab_find(&t, lds__hash_id(hk, 1), u64_eq, &p, &row));
    lds__probe_stats s;
    lds__hashtab_stats(&t, &s);
    assert_int_equal(s.capacity, t.mask + 1);
    assert_true(s.longest_run >= 1 && s.longest_run <= s.capacity / 2);
    lds__hashtab_free(&t);
}

/* The transparent huge-page mode, 0 never (or none), 1 madvise, 2 always. */
static int thp_mode(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = "";
    if (!f)
        return 0;
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    fclose(f);
    return strstr(line, "[always]") ? 2 : strstr(line, "[madvise]") ? 1 : 0;
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* A table of 2 MiB and more lies on 2 MiB pages: filling a 16 MiB table (a 1M-key index's)
   faults a few times, not once per 4 KiB page (4,096 before; ADR 0050's key table handed on
   at each reload paid 16,384 of them at 4M keys). Smaller tables are calloc'd as before. */
static void test_large_table_on_huge_pages(void **state)
{
    (void)state;
    enum { N = 1 << 20 };
    static uint64_t items[N];
    for (uint64_t r = 0; r < N; r++)
        items[r] = r * 2654435761u; /* touched before the count starts */
    lds__hashtab t;
    long before = minor_faults();
    assert_int_equal(lds__hashtab_init(&t, N, N), LDS_OK);
    uint64_t cap = t.mask + 1;
    assert_int_equal(cap, (uint64_t)2 * N);
    assert_int_equal((uintptr_t)t.slots % ((uintptr_t)2 << 20), 0);
    for (uint64_t i = 0; i < cap; i++)
        assert_int_equal(t.slots[i], 0); /* zeroed as calloc's were */
    u64_probe g = {items, 0};
    const lds__hashkey *hk = lds__hashkey_get();
    for (uint64_t r = 0; r < N; r++) {
        g.item = items[r];
        (void)lds__hashtab_insert(&t, lds__hash_id(hk, g.item), r, u64_eq, &g);
    }
    long faults = minor_faults() - before;
    assert_int_equal(t.count, N);
    /* the table grows through reserve onto the same kind of mapping, and frees it */
    assert_true(lds__hashtab_reserve(&t, (uint64_t)2 * N, u64_rehash, &g));
    assert_int_equal(t.mask + 1, (uint64_t)4 * N);
    assert_int_equal((uintptr_t)t.slots % ((uintptr_t)2 << 20), 0);
    uint64_t row = UINT64_MAX;
    g.item = items[12345];
    assert_true(lds__hashtab_find(&t, lds__hash_id(hk, g.item), u64_eq, &g, &row));
    assert_int_equal(row, 12345);
    lds__hashtab_free(&t);
    if (thp_mode() == 0) {
        print_message("transparent huge pages are off: %ld faults, not checked\n", faults);
        return;
    }
    /* ThreadSanitizer faults its shadow of every page touched (8,284 faults here), ASan
       its own: the count is the table's only in a plain build (scripts/test.sh exports
       LDS_SANITIZE to the sanitizer stages). */
    if (getenv("LDS_SANITIZE")) {
        print_message("under %s: %ld faults, not checked\n", getenv("LDS_SANITIZE"), faults);
        return;
    }
    print_message("16 MiB table filled with %ld minor faults (4 KiB pages: 4,096)\n", faults);
    assert_true(faults < 1024);
}

/* lds__hash_key (exact reads) agrees with lds__hash_key_over (16-byte reads). */
static void test_hash_key_forms_agree(void **state)
{
    (void)state;
    const lds__hashkey *hk = lds__hashkey_get();
    uint8_t buf[64 + LDS__KEY_HASH_READ];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 37 + 11);
    for (size_t len = 0; len <= 64; len++)
        assert_true(lds__hash_key(hk, buf, len) == lds__hash_key_over(hk, buf, len));
    /* Length is part of the hash: "a" and "a\0" differ. */
    assert_true(lds__hash_key(hk, "a", 1) != lds__hash_key(hk, "a\0", 2));
}

static const char *self_exe;

static uint64_t hash_in_child(void)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' --print-hash", self_exe);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    unsigned long long v = 0;
    assert_int_equal(fscanf(p, "%llx", &v), 1);
    assert_int_equal(pclose(p), 0);
    return v;
}

/* The key is drawn per process: two processes hash one key differently. */
static void test_key_is_per_process(void **state)
{
    (void)state;
    uint64_t a = hash_in_child(), b = hash_in_child();
    uint64_t here = lds__hash_key(lds__hashkey_get(), "king", 4);
    assert_true(a != b);
    assert_true(a != here && b != here);
    assert_true(here != old_key_hash("king", 4));
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--print-hash") == 0) {
        printf("%016llx\n", (unsigned long long)lds__hash_key(lds__hashkey_get(), "king", 4));
        return 0;
    }
    self_exe = argv[0];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inputs_flood_the_old_hash),
        cmocka_unit_test(test_parser_key_table_resists_flooding),
        cmocka_unit_test(test_writer_key_table_resists_flooding),
        cmocka_unit_test(test_id_table_resists_flooding),
        cmocka_unit_test(test_lazy_key_table_is_thread_safe),
        cmocka_unit_test(test_table_semantics),
        cmocka_unit_test(test_large_table_on_huge_pages),
        cmocka_unit_test(test_reload_hands_on_key_table),
        cmocka_unit_test(test_reload_shares_key_table),
        cmocka_unit_test(test_reload_extends_key_table_in_place),
        cmocka_unit_test(test_reload_builds_into_spare_keys),
        cmocka_unit_test(test_extension_under_concurrent_lookups),
        cmocka_unit_test(test_hash_key_forms_agree),
        cmocka_unit_test(test_key_is_per_process),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
