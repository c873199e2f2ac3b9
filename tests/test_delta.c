/*
 * Delta reloads of a live index (docs/adr/0047): the new generation is every byte a full
 * load of the same file gives; a copy whose bytes are not the ones the new table names is
 * never served; a corrupt chunk that must be read fails the reload and the current
 * generation keeps serving; format 1.0 and another chunk size fall back to a full load;
 * readers pinned on g during a delta reload read g intact (guard mode, forked child).
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lodestar.h"
#include "../loader/delta_internal.h"
#include "../format/format_internal.h"

#define ROWS  4096
#define DIM   32 /* 128-byte rows: 32 per 4 KiB chunk */
#define CHUNK 4096u

static char tmpdir[64];

static const char *tmp_path(const char *name)
{
    static char path[8][160];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, sizeof path[0], "%s/%s", tmpdir, name);
    return p;
}

/* Element d of row r at version v (a row "changed" has another version). */
static float value_of(unsigned v, uint64_t r, uint32_t d)
{
    /* mixed, so that no changed chunk equals another chunk by accident */
    uint64_t x = (r * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)d << 40) ^ ((uint64_t)v << 56);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return (float)(x % 10007) / 1000.0f - 5.0f;
}

/* Writes `rows` rows, row r at version ver[r] (NULL: all 0), with ids (fixed size: an
 * update in place moves nothing), chunk size `chunk` (LDS_CHUNKS_NONE: format 1.0). */
/* As write_gen, with rows [zero_from, zero_to) all zero (whole chunks that are all the same,
 * as an index with zero-filled rows has). */
static const char *write_rows(const char *name, uint64_t rows, const unsigned *ver, uint32_t chunk,
                              uint64_t zero_from, uint64_t zero_to)
{
    const char *path = tmp_path(name);
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = DIM;
    wo.with_ids = true;
    wo.chunk_bytes = chunk;
    lds_writer *w = NULL;
    assert_int_equal(lds_writer_open_path(path, &wo, &w, NULL), LDS_OK);
    float v[DIM];
    for (uint64_t r = 0; r < rows; r++) {
        for (uint32_t d = 0; d < DIM; d++)
            v[d] = r >= zero_from && r < zero_to ? 0.0f : value_of(ver ? ver[r] : 0, r, d);
        assert_int_equal(lds_writer_add_row(w, v, DIM, 1000 + r, NULL, 0, NULL), LDS_OK);
    }
    assert_int_equal(lds_writer_finish(w, NULL), LDS_OK);
    lds_writer_free(w);
    return path;
}

static const char *write_gen(const char *name, uint64_t rows, const unsigned *ver, uint32_t chunk)
{
    return write_rows(name, rows, ver, chunk, 0, 0);
}

static lds_load_options opts_for(lds_pool *pool, unsigned threads)
{
    lds_load_options o;
    lds_load_options_default(&o);
    o.pool = pool;
    o.ownership = LDS_OWN_ADOPT;
    o.read_threads = threads;
    return o;
}

static lds_pool *new_pool(void)
{
    lds_pool_options po;
    lds_pool_options_default(&po);
    po.thread_cache_count = 0;
    lds_pool *pool = NULL;
    assert_int_equal(lds_pool_create(&po, &pool), LDS_OK);
    return pool;
}

static lds_live *new_live(void)
{
    lds_live *live = NULL;
    assert_int_equal(lds_live_create(NULL, &live, NULL), LDS_OK);
    return live;
}

static lds_live_stats stats_of(lds_live *live)
{
    lds_live_stats s;
    lds_live_stats_init(&s);
    assert_int_equal(lds_live_get_stats(live, &s), LDS_OK);
    return s;
}

/* Every payload byte of the pinned generation equals a full load's of `path`. */
static void assert_same_as_full(lds_live *live, const char *path, lds_pool *pool)
{
    lds_index *full = NULL;
    lds_load_options o = opts_for(pool, 1);
    assert_int_equal(lds_load_path(path, &o, &full, NULL, NULL), LDS_OK);
    lds_pin pin;
    assert_int_equal(lds_live_pin(live, &pin), LDS_OK);
    lds__delta_base a, b;
    assert_true(lds__delta_base_of(pin.index, &a));
    assert_true(lds__delta_base_of(full, &b));
    assert_int_equal(a.length, b.length);
    assert_int_equal(memcmp(a.payload, b.payload, (size_t)a.length), 0);
    assert_int_equal(lds_index_checksum(pin.index), lds_index_checksum(full));
    lds_live_unpin(live, &pin);
    lds_index_free(full);
}

/* The chunk numbers in [0, n) whose table entries differ between the two files (same
 * chunk size, both 1.1), by reading the tables with plain stdio. */
static uint64_t differing_chunks(const char *pa, const char *pb, uint64_t *list, uint64_t cap)
{
    lds_header ha, hb;
    unsigned char h[LDS_HEADER_SIZE];
    FILE *fa = fopen(pa, "rb"), *fb = fopen(pb, "rb");
    assert_int_equal(fread(h, 1, sizeof h, fa), sizeof h);
    assert_int_equal(lds_header_decode(h, sizeof h, &ha, NULL), LDS_OK);
    assert_int_equal(fread(h, 1, sizeof h, fb), sizeof h);
    assert_int_equal(lds_header_decode(h, sizeof h, &hb, NULL), LDS_OK);
    uint64_t n = 0;
    for (uint64_t k = 0; k < hb.chunk_count; k++) {
        uint64_t x = 0, y = 0;
        fseeko(fb, (off_t)(LDS_HEADER_SIZE + hb.chunk_table_offset + k * 8), SEEK_SET);
        assert_int_equal(fread(&y, 8, 1, fb), 1);
        if (k < ha.chunk_count) {
            fseeko(fa, (off_t)(LDS_HEADER_SIZE + ha.chunk_table_offset + k * 8), SEEK_SET);
            assert_int_equal(fread(&x, 8, 1, fa), 1);
        }
        if (k >= ha.chunk_count || x != y) {
            if (n < cap)
                list[n] = k;
            n++;
        }
    }
    fclose(fa);
    fclose(fb);
    return n;
}

static int setup_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lds-delta-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Rows 5, 100..163 and 2000 changed in place: the chunks holding them (row r is payload
 * bytes 128 r..128 r + 127, chunk 128 r / 4096 = r / 32), those holding their ids
 * (8 bytes each, from the ids section's start) and the last chunk (the section table,
 * footer and checksum) are read; every other chunk is copied; 1 and 4 readers. */
static void test_delta_equals_full_load(void **state)
{
    (void)state;
    static unsigned ver[ROWS];
    memset(ver, 0, sizeof ver);
    const char *pa = write_gen("a.ldsi", ROWS, NULL, CHUNK);
    ver[5] = ver[2000] = 1;
    for (int r = 100; r < 164; r++)
        ver[r] = 1;
    const char *pb = write_gen("b.ldsi", ROWS, ver, CHUNK);
    /* Hand count: vectors are 4096 x 128 = 524288 bytes = chunks 0..127; rows 5 -> chunk 0,
       100..163 -> chunks 3, 4, 5 (rows 96..191), 2000 -> chunk 62. Ids start at 524288
       (chunk 128): the ids section is 32768 bytes = chunks 128..135, and an id never
       changed (1000 + r), so none of them differ. The section table, footer and checksum
       sit in chunk 136, the last, which differs (the checksum changed). */
    uint64_t list[16];
    uint64_t n = differing_chunks(pa, pb, list, 16);
    uint64_t want[] = {0, 3, 4, 5, 62, 136};
    assert_int_equal(n, 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(list[i], want[i]);
    for (unsigned threads = 1; threads <= 4; threads += 3) {
        lds_pool *pool = new_pool();
        lds_live *live = new_live();
        lds_load_options o = opts_for(pool, threads);
        lds_load_info info;
        lds_load_info_init(&info);
        /* first reload: nothing to reuse, a full load, and says why */
        assert_int_equal(lds_live_reload_path_delta(live, pa, true, &o, NULL, &info, NULL), LDS_OK);
        assert_true(info.delta_fallback);
        assert_int_equal(info.bytes_read, info.payload_bytes);
        lds_live_stats s = stats_of(live);
        assert_non_null(strstr(s.delta_fallback_reason, "no format 1.1 payload"));
        lds_load_info_init(&info);
        lds_error err;
        lds_error_init(&err);
        assert_int_equal(lds_live_reload_path_delta(live, pb, true, &o, NULL, &info, &err), LDS_OK);
        assert_false(info.delta_fallback);
        assert_int_equal(info.chunks_read, 6);
        assert_int_equal(info.chunks_copied, 137 - 6);
        assert_int_equal(info.chunks_shared, 0);
        assert_int_equal(info.bytes_read + info.bytes_copied, info.payload_bytes);
        uint64_t last = info.payload_bytes - 137 * 8 - 136 * CHUNK; /* the short last chunk */
        assert_int_equal(info.bytes_read, 5 * CHUNK + last + 137 * 8);
        assert_true(info.checksum_verified);
        s = stats_of(live);
        assert_string_equal(s.delta_fallback_reason, "");
        assert_int_equal(s.last_load.chunks_copied, 131);
        assert_same_as_full(live, pb, pool);
        /* back to a: the same 6 chunks again */
        lds_load_info_init(&info);
        assert_int_equal(lds_live_reload_path_delta(live, pa, true, &o, NULL, &info, NULL), LDS_OK);
        assert_int_equal(info.chunks_read, 6);
        assert_same_as_full(live, pa, pool);
        /* delta off for this call: a full load, no fallback */
        lds_load_info_init(&info);
        assert_int_equal(lds_live_reload_path_delta(live, pb, false, &o, NULL, &info, NULL),
                         LDS_OK);
        assert_false(info.delta_fallback);
        assert_int_equal(info.bytes_read, info.payload_bytes);
        assert_int_equal(info.chunks_read, 137);
        assert_int_equal(info.bytes_copied, 0);
        assert_same_as_full(live, pb, pool);
        assert_int_equal(lds_live_close(live, NULL), LDS_OK);
        lds_pool_free(pool);
    }
}

/* Appended rows: every vectors chunk before the first appended row is copied; the ids
 * section moved (it follows the vectors), so its chunks are read (format.md §2.5). */
static void test_delta_appended_rows(void **state)
{
    (void)state;
    const char *pa = write_gen("a.ldsi", ROWS, NULL, CHUNK);
    const char *pb = write_gen("b.ldsi", ROWS + 64, NULL, CHUNK);
    lds_pool *pool = new_pool();
    lds_live *live = new_live();
    lds_load_options o = opts_for(pool, 2);
    assert_int_equal(lds_live_reload_path_delta(live, pa, true, &o, NULL, NULL, NULL), LDS_OK);
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path_delta(live, pb, true, &o, NULL, &info, NULL), LDS_OK);
    assert_false(info.delta_fallback);
    /* vectors: 4160 rows = 532480 bytes = chunks 0..129 (0..127 unchanged); ids 33280 bytes
       from 532480: chunks 130..138 (138 partly), the table in chunk 138 or 139 */
    assert_true(info.chunks_copied >= 128);
    assert_same_as_full(live, pb, pool);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    lds_pool_free(pool);
}

/* A new file whose changed chunks all have one checksum (1,024 zero-filled chunks the serving
 * generation does not hold): the plan's search for moved chunks stays linear (a table keyed
 * per chunk made a probe walk every copy: about 560,000 probes here, and chunks x copies at
 * scale, a denial of service by a crafted or merely zero-filled file); the result is still
 * a full load's. Then a file holding those zero chunks is the base: every copy is matched to
 * the lowest base chunk with that checksum. */
static void test_delta_plan_linear_in_repeated_chunks(void **state)
{
    (void)state;
    enum { R = 65536 }; /* 2,048 vector chunks; rows [16384, 49152): 1,024 equal chunks */
    const char *pa = write_gen("za.ldsi", R, NULL, CHUNK);
    const char *pz = write_rows("zz.ldsi", R, NULL, CHUNK, 16384, 49152);
    const char *py = write_rows("zy.ldsi", R, NULL, CHUNK, 16384, 49184); /* one more zero chunk */
    lds_pool *pool = new_pool();
    lds_live *live = new_live();
    lds_load_options o = opts_for(pool, 2);
    assert_int_equal(lds_live_reload_path_delta(live, pa, true, &o, NULL, NULL, NULL), LDS_OK);
    uint64_t probes = 0;
    lds__delta_plan_probes = &probes;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path_delta(live, pz, true, &o, NULL, &info, NULL), LDS_OK);
    assert_false(info.delta_fallback);
    assert_true(info.chunks_read >= 1024);
    uint64_t chunks = info.payload_bytes / CHUNK + 1;
    assert_true(probes > 0);
    assert_true(probes <= 4 * chunks);
    assert_same_as_full(live, pz, pool);
    /* Now the zero chunks are in the base: the new one's 1,025 zero chunks are all copied
       from base chunk 512 (the first zero chunk), none read. */
    probes = 0;
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path_delta(live, py, true, &o, NULL, &info, NULL), LDS_OK);
    lds__delta_plan_probes = NULL;
    assert_false(info.delta_fallback);
    assert_true(info.chunks_read <= 2); /* the changed table chunk(s) only */
    assert_true(probes <= 4 * chunks);
    assert_same_as_full(live, py, pool);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    lds_pool_free(pool);
}

static lds_live *new_delta_live(void);

/* As write_gen, all rows at version 0, with the key "k<row>" on every row. */
/* Row r's key in write_keyed_seed's file of `seed`: "k<r>" for seed 0, else "o<seed>-<r>". */
static int key_for(uint64_t seed, uint64_t r, char *key, size_t cap)
{
    return seed == 0 ? snprintf(key, cap, "k%llu", (unsigned long long)r)
                     : snprintf(key, cap, "o%llu-%llu", (unsigned long long)seed,
                                (unsigned long long)r);
}

static const char *write_keyed_seed(const char *name, uint64_t rows, uint64_t seed)
{
    const char *path = tmp_path(name);
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = DIM;
    wo.with_keys = true;
    wo.chunk_bytes = CHUNK;
    lds_writer *w = NULL;
    assert_int_equal(lds_writer_open_path(path, &wo, &w, NULL), LDS_OK);
    float v[DIM];
    char key[32];
    for (uint64_t r = 0; r < rows; r++) {
        for (uint32_t d = 0; d < DIM; d++)
            v[d] = value_of(0, r, d);
        int n = key_for(seed, r, key, sizeof key);
        assert_int_equal(lds_writer_add_row(w, v, DIM, 0, key, (size_t)n, NULL), LDS_OK);
    }
    assert_int_equal(lds_writer_finish(w, NULL), LDS_OK);
    lds_writer_free(w);
    return path;
}

static const char *write_keyed(const char *name, uint64_t rows)
{
    return write_keyed_seed(name, rows, 0);
}

/* Finds every key of rows [0, rows) of write_keyed_seed's `seed` in the pinned generation
 * when `lookup`; then the inserts into its key table so far (0: not built). */
static uint64_t key_table_of_seed(lds_live *live, uint64_t rows, bool lookup, uint64_t seed)
{
    lds_pin pin;
    assert_int_equal(lds_live_pin(live, &pin), LDS_OK);
    lds__probe_stats s;
    for (uint64_t r = 0; lookup && r < rows; r++) {
        char key[32];
        int n = key_for(seed, r, key, sizeof key);
        uint64_t row = UINT64_MAX;
        assert_int_equal(lds_index_find_key(pin.index, key, (size_t)n, &row), LDS_OK);
        assert_int_equal(row, r);
    }
    lds__index_key_probe_stats(pin.index, &s);
    lds_live_unpin(live, &pin);
    return s.inserts;
}

static uint64_t key_table_of(lds_live *live, uint64_t rows, bool lookup)
{
    return key_table_of_seed(live, rows, lookup, 0);
}

/* docs/adr/0050: once the serving generation has its key table, a reload gives the new
 * one its table before the swap (a copy plus the appended rows, delta or full reload), so
 * no reader builds it under its pin; while no key was looked up, it stays lazy. Before,
 * every new generation's table was built by its first lookup. */
static void test_reload_hands_on_key_table(void **state)
{
    (void)state;
    const char *pa = write_keyed("ka.ldsi", ROWS);
    const char *pb = write_keyed("kb.ldsi", ROWS + 64);
    lds_live *live = new_delta_live();
    lds_load_options o = opts_for(NULL, 2);
    assert_int_equal(lds_live_reload_path(live, pa, &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(key_table_of(live, ROWS, false), 0);
    assert_int_equal(lds_live_reload_path(live, pa, &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(key_table_of(live, ROWS, false), 0); /* nobody looked: still lazy */
    assert_int_equal(key_table_of(live, ROWS, true), ROWS);
    assert_int_equal(lds_live_reload_path(live, pb, &o, NULL, NULL, NULL), LDS_OK); /* delta */
    assert_int_equal(key_table_of(live, ROWS + 64, false), ROWS + 64);
    assert_int_equal(key_table_of(live, ROWS + 64, true), ROWS + 64);
    assert_int_equal(lds_live_reload_path_delta(live, pa, false, &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(key_table_of(live, ROWS, false), ROWS); /* fewer rows: built */
    assert_int_equal(key_table_of(live, ROWS, true), ROWS);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
}

/* docs/adr/0055: rows appended at each reload extend the serving generation's key table in
 * place (no copy, no second table); every key, kept and appended, is found at its row after
 * each reload. Fewer rows build a table afresh, and the next appended reload extends that
 * one; a reload whose keys differ builds into the spare (the slots of the last table freed
 * with no other holder), kept between reloads and released by lds_live_close (ASan reports
 * a leak otherwise). */
static void test_reload_extends_keys(void **state)
{
    (void)state;
    enum { R = 3000 };
    const char *p[4];
    char names[4][16];
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof names[i], "sp%d.ldsi", i);
        p[i] = write_keyed(names[i], R + 64u * (unsigned)i);
    }
    assert_int_equal(lds__table_capacity(R), lds__table_capacity(R + 192)); /* one capacity */
    lds_live *live = new_delta_live();
    lds_load_options o = opts_for(NULL, 2);
    assert_int_equal(lds_live_reload_path(live, p[0], &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(key_table_of(live, R, true), R); /* built by the lookups */
    lds__delta_phases ph;
    for (int i = 1; i < 4; i++) {
        uint64_t rows = R + 64u * (unsigned)i;
        assert_int_equal(lds_live_reload_path(live, p[i], &o, NULL, NULL, NULL), LDS_OK);
        lds__live_phases(live, &ph);
        assert_true(ph.keys_extended);
        assert_false(ph.keys_spare);
        uint64_t flat[11];
        lds__live_phases_ns(live, flat, 11);
        assert_int_equal(flat[10], 1);
        assert_int_equal(key_table_of(live, rows, false), rows); /* handed on */
        assert_int_equal(key_table_of(live, rows, true), rows);  /* every key at its row */
    }
    /* Fewer rows: built afresh (the extended table's holders are freed with their
     * generations; its last holder leaves it as the spare); then appended rows extend the
     * new table. */
    assert_int_equal(lds_live_reload_path_delta(live, p[0], false, &o, NULL, NULL, NULL), LDS_OK);
    lds__live_phases(live, &ph);
    assert_false(ph.keys_extended);
    assert_int_equal(key_table_of(live, R, true), R);
    assert_int_equal(lds_live_reload_path_delta(live, p[1], false, &o, NULL, NULL, NULL), LDS_OK);
    lds__live_phases(live, &ph);
    assert_true(ph.keys_extended);
    assert_int_equal(key_table_of(live, R + 64, true), R + 64);
    /* Other keys, the same capacity: built into the spare the fewer-rows reload left. */
    const char *po = write_keyed_seed("other.ldsi", R + 64, 7);
    assert_int_equal(lds_live_reload_path_delta(live, po, false, &o, NULL, NULL, NULL), LDS_OK);
    lds__live_phases(live, &ph);
    assert_false(ph.keys_extended);
    assert_true(ph.keys_spare);
    assert_int_equal(key_table_of_seed(live, R + 64, true, 7), R + 64);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
}

/* The default is a full reload: a file damaged on disk in a chunk equal to a serving one
 * is refused (a delta would copy that chunk and succeed: found by a tester and by the slow
 * suite's Dask test); lds_live_options.delta turns delta reloads on for the plain calls. */
static void test_delta_is_opt_in(void **state)
{
    (void)state;
    const char *pa = write_gen("a.ldsi", ROWS, NULL, CHUNK);
    static char pd[4096];
    snprintf(pd, sizeof pd, "%s", write_gen("d.ldsi", ROWS, NULL, CHUNK)); /* a's bytes */
    int fd = open(pd, O_RDWR);
    assert_true(fd >= 0);
    unsigned char b;
    assert_int_equal(pread(fd, &b, 1, LDS_HEADER_SIZE + 100), 1); /* chunk 0, a row's byte */
    b ^= 1;
    assert_int_equal(pwrite(fd, &b, 1, LDS_HEADER_SIZE + 100), 1);
    close(fd);
    lds_pool *pool = new_pool();
    lds_load_options o = opts_for(pool, 2);
    lds_load_info info;
    /* defaults: full, the damage found */
    lds_live *live = new_live();
    assert_int_equal(lds_live_reload_path(live, pa, &o, NULL, NULL, NULL), LDS_OK);
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path(live, pd, &o, NULL, &info, NULL), LDS_E_CHECKSUM);
    assert_int_equal(info.bytes_copied, 0);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    /* opted in: the damaged chunk equals the serving one, is copied, and the bytes served
       are a's, which the new table names */
    lds_live_options lo;
    lds_live_options_default(&lo);
    lo.delta = true;
    assert_int_equal(lds_live_create(&lo, &live, NULL), LDS_OK);
    assert_int_equal(lds_live_reload_path(live, pa, &o, NULL, NULL, NULL), LDS_OK);
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path(live, pd, &o, NULL, &info, NULL), LDS_OK);
    assert_false(info.delta_fallback);
    assert_true(info.chunks_copied > 0);
    assert_same_as_full(live, pa, pool);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    lds_pool_free(pool);
}

/* A copy whose bytes are not the ones its (matching) checksum names, as a 64-bit collision
 * or a base changed in memory would give: hashed again after the copy, found different,
 * read from the file instead. The generation served is the file's, byte for byte. */
static uint64_t g_spoil = UINT64_MAX;
static void spoil_copy(uint64_t chunk, unsigned char *p, size_t n)
{
    if (chunk == g_spoil && n > 100)
        p[100] ^= 0x01;
}

static void test_delta_copy_that_differs_is_read(void **state)
{
    (void)state;
    static unsigned ver[ROWS];
    memset(ver, 0, sizeof ver);
    const char *pa = write_gen("a.ldsi", ROWS, NULL, CHUNK);
    ver[40] = 1; /* chunk 1 */
    const char *pb = write_gen("b.ldsi", ROWS, ver, CHUNK);
    lds_pool *pool = new_pool();
    lds_live *live = new_live();
    lds_load_options o = opts_for(pool, 1);
    assert_int_equal(lds_live_reload_path_delta(live, pa, true, &o, NULL, NULL, NULL), LDS_OK);
    g_spoil = 7;
    lds__delta_copy_hook = spoil_copy;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path_delta(live, pb, true, &o, NULL, &info, NULL), LDS_OK);
    lds__delta_copy_hook = NULL;
    assert_int_equal(info.chunks_read, 3); /* 1, the last, and 7 read again */
    assert_int_equal(info.chunks_copied, 137 - 3);
    assert_same_as_full(live, pb, pool);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    lds_pool_free(pool);
}

static void flip_byte(const char *path, off_t at)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    unsigned char b;
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 0x40;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

/* A corrupt chunk the delta must read fails the reload (LDS_E_CHECKSUM naming the chunk)
 * and generation 1 keeps serving, rentals back; a corrupt byte in a chunk the delta
 * copies is never read: the generation holds the bytes the new table names (the old
 * chunk's), which is what a full load of the intact file gives (ADR 0047). */
static void test_delta_corrupt_chunk_keeps_serving(void **state)
{
    (void)state;
    static unsigned ver[ROWS];
    memset(ver, 0, sizeof ver);
    const char *pa = write_gen("a.ldsi", ROWS, NULL, CHUNK);
    ver[40] = 1; /* chunk 1 */
    const char *pb = write_gen("b.ldsi", ROWS, ver, CHUNK);
    char intact[200];
    snprintf(intact, sizeof intact, "%s/b-intact.ldsi", tmpdir);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cp %s %s", pb, intact);
    assert_int_equal(system(cmd), 0);
    flip_byte(pb, LDS_HEADER_SIZE + 1 * CHUNK + 77);
    lds_pool *pool = new_pool();
    lds_live *live = new_live();
    lds_load_options o = opts_for(pool, 2);
    uint64_t gen = 0;
    assert_int_equal(lds_live_reload_path_delta(live, pa, true, &o, &gen, NULL, NULL), LDS_OK);
    lds_error err;
    lds_error_init(&err);
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path_delta(live, pb, true, &o, NULL, &info, &err),
                     LDS_E_CHECKSUM);
    assert_false(info.delta_fallback);
    assert_string_equal(err.field, "chunk");
    assert_int_equal(err.offset, LDS_HEADER_SIZE + CHUNK);
    assert_non_null(strstr(err.message, "checksum of chunk 1 (payload bytes 4096..8191)"));
    lds_live_stats s = stats_of(live);
    assert_int_equal(s.generation, gen);
    assert_int_equal(s.reloads_failed, 1);
    assert_same_as_full(live, pa, pool);
    lds_pool_stats ps;
    lds_pool_stats_init(&ps);
    assert_int_equal(lds_pool_get_stats(pool, &ps), LDS_OK);
    assert_int_equal(ps.leases_current, 1); /* generation 1's rental only */
    /* now the flip in chunk 9, which the delta copies: not read, the intact bytes served */
    flip_byte(pb, LDS_HEADER_SIZE + 1 * CHUNK + 77); /* restore chunk 1 */
    flip_byte(pb, LDS_HEADER_SIZE + 9 * CHUNK + 5);
    assert_int_equal(lds_live_reload_path_delta(live, pb, true, &o, NULL, NULL, NULL), LDS_OK);
    assert_same_as_full(live, intact, pool);
    lds_index *full = NULL;
    assert_int_equal(lds_load_path(pb, &o, &full, NULL, NULL), LDS_E_CHECKSUM);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    lds_pool_free(pool);
}

/* The library's default, restored by the tests that lower lds__delta_uring_min_runs. */
#define MIN_RUNS_DEFAULT 24u

/* The delta fill's batched reads (io_uring, docs/adr/0055 amendment of 2026-12-03) and its
 * pread fallback (forced by lds__delta_uring_off, as when liburing is absent or
 * io_uring_setup fails) both give what a full load gives; the batched path is taken when
 * io_uring is available here, the fallback never touches it. */
static void test_delta_uring_and_fallback_equal_full(void **state)
{
    (void)state;
    static unsigned ver[ROWS];
    memset(ver, 0, sizeof ver);
    const char *pa = write_gen("a.ldsi", ROWS, NULL, CHUNK);
    for (int r = 0; r < ROWS; r += 97) /* scattered rows: many separate runs */
        ver[r] = 1;
    const char *pb = write_gen("b.ldsi", ROWS, ver, CHUNK);
    lds__delta_uring_min_runs = 1; /* ~40 runs, fewer than a full batch: ring them anyway */
    for (int off = 0; off <= 1; off++) {
        lds__delta_uring_off = off == 1;
        lds_pool *pool = new_pool();
        lds_live *live = new_live();
        lds_load_options o = opts_for(pool, 2);
        assert_int_equal(lds_live_reload_path_delta(live, pa, true, &o, NULL, NULL, NULL), LDS_OK);
        uint64_t before = atomic_load(&lds__delta_uring_runs);
        lds_load_info info;
        lds_load_info_init(&info);
        assert_int_equal(lds_live_reload_path_delta(live, pb, true, &o, NULL, &info, NULL), LDS_OK);
        assert_false(info.delta_fallback);
        assert_true(info.chunks_read > 40);
        assert_true(info.chunks_copied > 0);
        uint64_t runs = atomic_load(&lds__delta_uring_runs) - before;
        if (off == 1 || !lds__delta_uring_available())
            assert_int_equal(runs, 0);
        else
            assert_true(runs > 40); /* > DELTA_BATCH/2: several batches over 2 readers */
        assert_same_as_full(live, pb, pool);
        assert_int_equal(lds_live_reload_path_delta(live, pa, true, &o, NULL, NULL, NULL), LDS_OK);
        assert_same_as_full(live, pa, pool);
        assert_int_equal(lds_live_close(live, NULL), LDS_OK);
        lds_pool_free(pool);
    }
    lds__delta_uring_off = false;
    lds__delta_uring_min_runs = MIN_RUNS_DEFAULT;
}

static _Atomic int g_uring_calls;
/* The first batched read comes back short, the second interrupted, the third failed: each
 * run is read again with pread (which continues, retries, or names the failure). */
static void spoil_uring_res(uint64_t s, int *res)
{
    (void)s;
    int n = atomic_fetch_add(&g_uring_calls, 1);
    if (n == 0 && *res > 1)
        *res /= 2;
    else if (n == 1)
        *res = -EINTR;
    else if (n == 2)
        *res = -EIO;
}

static void test_delta_uring_short_read_reread(void **state)
{
    (void)state;
    if (!lds__delta_uring_available())
        skip();
    static unsigned ver[ROWS];
    memset(ver, 0, sizeof ver);
    const char *pa = write_gen("a.ldsi", ROWS, NULL, CHUNK);
    for (int r = 3; r < ROWS; r += 211)
        ver[r] = 1;
    const char *pb = write_gen("b.ldsi", ROWS, ver, CHUNK);
    lds_pool *pool = new_pool();
    lds_live *live = new_live();
    lds_load_options o = opts_for(pool, 1);
    assert_int_equal(lds_live_reload_path_delta(live, pa, true, &o, NULL, NULL, NULL), LDS_OK);
    atomic_store(&g_uring_calls, 0);
    lds__delta_uring_res_hook = spoil_uring_res;
    lds__delta_uring_min_runs = 1;
    lds_load_info info;
    lds_load_info_init(&info);
    lds_status st = lds_live_reload_path_delta(live, pb, true, &o, NULL, &info, NULL);
    lds__delta_uring_res_hook = NULL;
    lds__delta_uring_min_runs = MIN_RUNS_DEFAULT;
    assert_int_equal(st, LDS_OK);
    assert_true(atomic_load(&g_uring_calls) > 3);
    assert_same_as_full(live, pb, pool);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    lds_pool_free(pool);
}

/* A corrupt chunk read through io_uring, and again through the pread fallback: the same
 * LDS_E_CHECKSUM naming the chunk, generation 1 serving (test_delta_corrupt_chunk_keeps_serving). */
static void test_delta_uring_corrupt_chunk(void **state)
{
    uint64_t before = atomic_load(&lds__delta_uring_runs);
    lds__delta_uring_min_runs = 1; /* one run: ring it anyway */
    test_delta_corrupt_chunk_keeps_serving(state);
    lds__delta_uring_min_runs = MIN_RUNS_DEFAULT;
    if (lds__delta_uring_available())
        assert_true(atomic_load(&lds__delta_uring_runs) > before);
    lds__delta_uring_off = true;
    before = atomic_load(&lds__delta_uring_runs);
    test_delta_corrupt_chunk_keeps_serving(state);
    lds__delta_uring_off = false;
    assert_int_equal(atomic_load(&lds__delta_uring_runs), before);
}

/* A tiny delta (a few runs, fewer than 24 per reader) is read with pread: no reader sets up
 * a ring (io_uring_queue_init cost more than the reads it saved, 0.28-0.55 ms -> 0.53-0.92
 * ms at 20k-100k rows); a delta of 64 single-chunk runs (every other chunk changed) sets
 * one up once its reader has met 24 runs and reads its later runs through it. Both equal a
 * full load. */
static void test_delta_uring_tiny_delta_no_ring(void **state)
{
    (void)state;
    static unsigned ver[ROWS];
    memset(ver, 0, sizeof ver);
    const char *pa = write_gen("a.ldsi", ROWS, NULL, CHUNK);
    for (int i = 0; i < 5; i++) /* 5 rows in 5 separate chunks (0, 16, 32, 48, 64) */
        ver[5 + i * 16 * 32] = 1;
    const char *pb = write_gen("b.ldsi", ROWS, ver, CHUNK);
    memset(ver, 0, sizeof ver);
    for (int r = 3; r < ROWS; r += 2 * 32) /* every other chunk: 64 runs */
        ver[r] = 2;
    const char *pc = write_gen("c.ldsi", ROWS, ver, CHUNK);
    lds_pool *pool = new_pool();
    lds_live *live = new_live();
    lds_load_options o = opts_for(pool, 1);
    assert_int_equal(lds_live_reload_path_delta(live, pa, true, &o, NULL, NULL, NULL), LDS_OK);
    uint64_t before = atomic_load(&lds__delta_uring_runs);
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path_delta(live, pb, true, &o, NULL, &info, NULL), LDS_OK);
    assert_false(info.delta_fallback);
    assert_true(info.chunks_read >= 5 && info.chunks_read < 16); /* and the table's */
    assert_int_equal(atomic_load(&lds__delta_uring_runs) - before, 0);
    assert_same_as_full(live, pb, pool);
    assert_int_equal(lds_live_reload_path_delta(live, pa, true, &o, NULL, NULL, NULL), LDS_OK);
    before = atomic_load(&lds__delta_uring_runs);
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path_delta(live, pc, true, &o, NULL, &info, NULL), LDS_OK);
    assert_true(info.chunks_read >= 64);
    if (lds__delta_uring_available())
        assert_true(atomic_load(&lds__delta_uring_runs) - before >= 1);
    assert_same_as_full(live, pc, pool);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    lds_pool_free(pool);
}

static _Atomic int g_wait_calls;
static void stall_uring_wait(int *k)
{
    atomic_fetch_add(&g_wait_calls, 1);
    *k = -ETIME;
}

/* Batched reads that never complete (every wait times out) are waited for a bounded
 * number of slices, then cancelled and reaped: the reload fails with LDS_E_IO naming the
 * chunk, generation 1 keeps serving, and the next reload (reads completing) succeeds. */
static void test_delta_uring_stuck_read_cancelled(void **state)
{
    (void)state;
    if (!lds__delta_uring_available())
        skip();
    static unsigned ver[ROWS];
    memset(ver, 0, sizeof ver);
    const char *pa = write_gen("a.ldsi", ROWS, NULL, CHUNK);
    ver[40] = 1; /* chunk 1 */
    const char *pb = write_gen("b.ldsi", ROWS, ver, CHUNK);
    lds_pool *pool = new_pool();
    lds_live *live = new_live();
    lds_load_options o = opts_for(pool, 1);
    uint64_t gen = 0;
    assert_int_equal(lds_live_reload_path_delta(live, pa, true, &o, &gen, NULL, NULL), LDS_OK);
    lds__delta_uring_min_runs = 1;
    lds__delta_uring_wait_hook = stall_uring_wait;
    atomic_store(&g_wait_calls, 0);
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_live_reload_path_delta(live, pb, true, &o, NULL, NULL, &err);
    lds__delta_uring_wait_hook = NULL;
    assert_int_equal(st, LDS_E_IO);
    assert_int_equal(atomic_load(&g_wait_calls), 30);
    assert_string_equal(err.field, "chunk");
    assert_int_equal(err.offset, LDS_HEADER_SIZE + CHUNK);
    assert_non_null(strstr(err.message, "chunk 1 (payload bytes 4096..8191)"));
    assert_non_null(strstr(err.message, "did not complete"));
    lds_live_stats s = stats_of(live);
    assert_int_equal(s.generation, gen);
    assert_same_as_full(live, pa, pool);
    assert_int_equal(lds_live_reload_path_delta(live, pb, true, &o, NULL, NULL, NULL), LDS_OK);
    lds__delta_uring_min_runs = MIN_RUNS_DEFAULT;
    assert_same_as_full(live, pb, pool);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    lds_pool_free(pool);
}

typedef struct feed_arg {
    const char *path;
    int fd;
} feed_arg;

static void *feed_pipe(void *p)
{
    feed_arg *a = p;
    int in = open(a->path, O_RDONLY);
    char buf[65536];
    ssize_t r;
    while (in >= 0 && (r = read(in, buf, sizeof buf)) > 0)
        if (write(a->fd, buf, (size_t)r) != r)
            break;
    if (in >= 0)
        close(in);
    close(a->fd);
    return NULL;
}

/* ==== the standby (docs/adr/0050) ==== */

/* A live index with delta reloads on and its own pool (the standby is kept only there). */
static lds_live *new_delta_live(void)
{
    lds_live_options lo;
    lds_live_options_default(&lo);
    lo.delta = true;
    lds_live *live = NULL;
    assert_int_equal(lds_live_create(&lo, &live, NULL), LDS_OK);
    return live;
}

static size_t live_leases(lds_live *live)
{
    lds_pool_stats ps;
    lds_pool_stats_init(&ps);
    assert_int_equal(lds_pool_get_stats(lds_live_pool(live), &ps), LDS_OK);
    return (size_t)ps.leases_current;
}

/* Generation 1 (A) is freed at the swap to 2 (B) and its buffer kept as the standby; the
 * reload to C writes into it, keeping every chunk A and C share at the same offset (no
 * copy, no read), copying chunk 1 from B and reading chunk 62 and the last; then back to
 * A into B's old buffer. Every byte equals a full load's; two rentals at a time. */
static void test_delta_standby_keeps(void **state)
{
    (void)state;
    static unsigned ver[ROWS];
    memset(ver, 0, sizeof ver);
    const char *pa = write_gen("a.ldsi", ROWS, NULL, CHUNK);
    ver[40] = 1; /* chunk 1 */
    const char *pb = write_gen("b.ldsi", ROWS, ver, CHUNK);
    ver[2000] = 1; /* chunk 62 */
    const char *pc = write_gen("c.ldsi", ROWS, ver, CHUNK);
    lds_pool *check = new_pool();
    lds_live *live = new_delta_live();
    lds_load_options o = opts_for(NULL, 2);
    lds_load_info info;
    assert_int_equal(lds_live_reload_path(live, pa, &o, NULL, NULL, NULL), LDS_OK);
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path(live, pb, &o, NULL, &info, NULL), LDS_OK);
    assert_int_equal(info.chunks_shared, 0); /* no standby yet: a fresh rental */
    assert_int_equal(info.chunks_read, 2);
    assert_int_equal(live_leases(live), 2); /* B serving, A's buffer the standby */
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path(live, pc, &o, NULL, &info, NULL), LDS_OK);
    assert_false(info.delta_fallback);
    assert_int_equal(info.chunks_read, 2);   /* 62 and the last */
    assert_int_equal(info.chunks_copied, 1); /* 1, from B */
    assert_int_equal(info.chunks_shared, 137 - 3);
    assert_int_equal(info.bytes_shared, (137 - 3) * (uint64_t)CHUNK);
    assert_same_as_full(live, pc, check);
    assert_int_equal(live_leases(live), 2);
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path(live, pa, &o, NULL, &info, NULL), LDS_OK);
    assert_int_equal(info.chunks_read, 2);   /* 1 (B and C hold row 40 changed), the last */
    assert_int_equal(info.chunks_copied, 0);
    assert_int_equal(info.chunks_shared, 137 - 2); /* 62 too: B holds it as A does */
    assert_same_as_full(live, pa, check);
    assert_int_equal(live_leases(live), 2);
    /* a full reload gives the standby back to the pool first, then rents it warm */
    assert_int_equal(lds_live_reload_path_delta(live, pc, false, &o, NULL, NULL, NULL), LDS_OK);
    assert_same_as_full(live, pc, check);
    assert_int_equal(live_leases(live), 2);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    lds_pool_free(check);
}

/* Writes ROWS keyed rows ("k<r>"); row `dup` (when < ROWS) repeats row 0's key, under
 * KEYS_UNIQUE all the same (lds__writer_claim_unique): K7 fails in that file. */
static const char *write_dupkeyed(const char *name, uint64_t rows, uint64_t dup, unsigned v)
{
    const char *path = tmp_path(name);
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = DIM;
    wo.with_keys = true;
    wo.chunk_bytes = CHUNK;
    lds_writer *w = NULL;
    lds__writer_claim_unique = true;
    assert_int_equal(lds_writer_open_path(path, &wo, &w, NULL), LDS_OK);
    float vec[DIM];
    char key[32];
    for (uint64_t r = 0; r < rows; r++) {
        for (uint32_t d = 0; d < DIM; d++)
            vec[d] = value_of(v, r, d);
        int kl = snprintf(key, sizeof key, "k%llu", (unsigned long long)(r == dup ? 0 : r));
        assert_int_equal(lds_writer_add_row(w, vec, DIM, 0, key, (size_t)kl, NULL), LDS_OK);
    }
    assert_int_equal(lds_writer_finish(w, NULL), LDS_OK);
    lds_writer_free(w);
    lds__writer_claim_unique = false;
    return path;
}

/* Every key of the serving generation finds its row ("k<r>" -> r, rows of `rows`). */
static void assert_keys_serve(lds_live *live, uint64_t rows)
{
    lds_pin pin;
    assert_int_equal(lds_live_pin(live, &pin), LDS_OK);
    const lds_index *idx = pin.index;
    assert_int_equal(lds_index_rows(idx), rows);
    char key[32];
    for (uint64_t r = 0; r < rows; r++) {
        int kl = snprintf(key, sizeof key, "k%llu", (unsigned long long)r);
        uint64_t got = UINT64_MAX;
        assert_int_equal(lds_index_find_key(idx, key, (size_t)kl, &got), LDS_OK);
        assert_int_equal(got, r);
    }
    lds_live_unpin(live, &pin);
}

/* A reload whose keys repeat under KEYS_UNIQUE (K7) is refused once the key table built or
 * handed on before the swap has found the repeat: LDS_E_DUP_KEY naming keys.bytes and both
 * rows, the serving generation keeps serving every key, and the stats count a failure.
 * Before, the file was swapped in and every lookup failed with LDS_E_DUP_KEY. Each way the
 * table is made: extended in place (rows appended, the repeat among them), shared (the same
 * keys), and built (other keys, delta on and off). */
static void test_reload_refuses_repeated_keys(void **state)
{
    (void)state;
    const char *good = write_dupkeyed("dkg.ldsi", ROWS, UINT64_MAX, 0);
    const char *app = write_dupkeyed("dka.ldsi", ROWS + 100, ROWS + 50, 0); /* appended */
    const char *mid = write_dupkeyed("dkm.ldsi", ROWS, 1234, 1);             /* built */
    const char *good2 = write_dupkeyed("dkg2.ldsi", ROWS + 100, UINT64_MAX, 2);
    for (int delta = 0; delta < 2; delta++) {
        lds_live *live = NULL;
        lds_live_options lo;
        lds_live_options_default(&lo);
        lo.delta = delta == 1;
        assert_int_equal(lds_live_create(&lo, &live, NULL), LDS_OK);
        assert_int_equal(lds_live_reload_path(live, good, NULL, NULL, NULL, NULL), LDS_OK);
        assert_keys_serve(live, ROWS); /* builds the serving table: the next reload hands on */
        const char *bad[] = {app, mid, app};
        for (int i = 0; i < 3; i++) {
            lds_error err;
            lds_error_init(&err);
            uint64_t gen = 99;
            assert_int_equal(lds_live_reload_path(live, bad[i], NULL, &gen, NULL, &err),
                             LDS_E_DUP_KEY);
            assert_int_equal(gen, 99);
            assert_int_equal(err.status, LDS_E_DUP_KEY);
            assert_string_equal(err.field, "keys.bytes");
            char want[96];
            snprintf(want, sizeof want, "the key of row %llu repeats the key of row 0",
                     (unsigned long long)(bad[i] == app ? ROWS + 50 : 1234));
            assert_non_null(strstr(err.message, want));
            assert_keys_serve(live, ROWS);
            lds_live_stats st = stats_of(live);
            assert_int_equal(st.reloads_failed, (uint64_t)i + 1);
            assert_int_equal(st.generation, 1);
        }
        /* a good file after the refusals: swapped in, its keys served */
        assert_int_equal(lds_live_reload_path(live, good2, NULL, NULL, NULL, NULL), LDS_OK);
        assert_keys_serve(live, ROWS + 100);
        assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    }
}

/* docs/adr/0055: the plan's scratch (the table copy and the plan) is kept by the live index
 * across reloads: reloads of files that grow by less than a quarter reuse it (no fresh
 * mapping to fault in), a file that outgrows it gets a larger one, a smaller file reuses
 * the larger; every reload equals a full load of its file. */
static void test_delta_scratch_kept_across_reloads(void **state)
{
    (void)state;
    const char *p0 = write_gen("s0.ldsi", ROWS, NULL, CHUNK);
    const char *p1 = write_gen("s1.ldsi", ROWS + 64, NULL, CHUNK);     /* appended */
    const char *p2 = write_gen("s2.ldsi", ROWS + 128, NULL, CHUNK);    /* appended */
    const char *p3 = write_gen("s3.ldsi", 2 * ROWS, NULL, CHUNK);      /* outgrows it */
    lds_pool *check = new_pool();
    lds_live *live = new_delta_live();
    lds_load_options o = opts_for(NULL, 2);
    lds_load_info info;
    assert_int_equal(lds_live_reload_path(live, p0, &o, NULL, NULL, NULL), LDS_OK);
    const lds__delta_scratch *scr = lds__live_scratch(live);
    assert_null(scr->table); /* no delta yet */
    const char *seq[] = {p1, p2, p1, p3, p0, p3};
    const unsigned char *first = NULL;
    size_t first_cap = 0;
    for (int i = 0; i < 6; i++) {
        lds_load_info_init(&info);
        assert_int_equal(lds_live_reload_path(live, seq[i], &o, NULL, &info, NULL), LDS_OK);
        assert_false(info.delta_fallback);
        assert_same_as_full(live, seq[i], check);
        assert_non_null(scr->table);
        if (i == 0) {
            first = scr->table;
            first_cap = scr->table_cap;
            /* a quarter above the need of s1 */
            uint64_t chunks = (info.payload_bytes + CHUNK - 1) / CHUNK;
            assert_true(first_cap >= chunks * 8 + chunks * 2);
        } else if (i < 3) {
            assert_ptr_equal(scr->table, first); /* kept: s2 is 64 rows longer */
            assert_int_equal(scr->table_cap, first_cap);
        } else {
            assert_true(scr->table_cap > first_cap); /* s3 outgrew it; s0 reuses the larger */
            assert_true(scr->from_cap * 8 == scr->table_cap);
        }
    }
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    lds_pool_free(check);
}

/* docs/adr/0055: each reload's phase times are filled, a delta's loader phases only for a
 * delta, and the phases sum to at most the whole reload, which the caller's clock bounds. */
/* The benchmarks' what-if (lds__live_populate_standby) faults the standby's pages in without
 * changing a byte: the next delta reload keeps its chunks (not hashed again) and serves
 * what a full load serves; with no standby it does nothing. */
static void test_populate_standby_keeps_contents(void **state)
{
    (void)state;
    static unsigned ver[ROWS + 256];
    memset(ver, 0, sizeof ver);
    const char *p0 = write_gen("q0.ldsi", ROWS, ver, CHUNK);
    ver[7] = 1;
    const char *p1 = write_gen("q1.ldsi", ROWS + 256, ver, CHUNK); /* grows */
    lds_pool *check = new_pool();
    lds_live *live = new_delta_live();
    lds_load_options o = opts_for(NULL, 2);
    assert_int_equal(lds__live_populate_standby(live, 1u << 20), 0); /* no standby */
    assert_int_equal(lds_live_reload_path(live, p0, &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(lds_live_reload_path(live, p1, &o, NULL, NULL, NULL), LDS_OK);
    /* the standby now holds p0's verified payload; fault in past its end, as p1 needs */
    size_t want = (size_t)(ROWS + 256) * DIM * sizeof(float) * 2;
    size_t got = lds__live_populate_standby(live, want);
    if (got == 0) {
        lds_live_close(live, NULL);
        lds_pool_free(check);
        skip(); /* a kernel without MADV_POPULATE_WRITE */
    }
    assert_true(got > 0 && got <= want);
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path(live, p1, &o, NULL, &info, NULL), LDS_OK);
    assert_false(info.delta_fallback);
    assert_true(info.bytes_shared > 0); /* p0's chunks kept from the populated standby */
    assert_same_as_full(live, p1, check);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    lds_pool_free(check);
}

static void test_delta_phases(void **state)
{
    (void)state;
    static unsigned ver[ROWS];
    memset(ver, 0, sizeof ver);
    const char *pa = write_gen("pa.ldsi", ROWS, NULL, CHUNK);
    ver[40] = 1;
    const char *pb = write_gen("pb.ldsi", ROWS, ver, CHUNK);
    lds_live *live = new_delta_live();
    lds_load_options o = opts_for(NULL, 2);
    lds__delta_phases ph;
    lds__live_phases(live, &ph);
    assert_int_equal(ph.total_ns, 0); /* no reload yet */
    assert_int_equal(lds_live_reload_path(live, pa, &o, NULL, NULL, NULL), LDS_OK);
    lds__live_phases(live, &ph);
    assert_false(ph.delta); /* nothing to reuse: the full load */
    assert_int_equal(ph.fill_ns + ph.plan_ns + ph.table_ns + ph.parse_ns, 0);
    assert_true(ph.total_ns > 0);
    const char *files[] = {pb, pa, pb};
    for (int i = 0; i < 3; i++) {
        uint64_t t0 = lds__now_ns();
        assert_int_equal(lds_live_reload_path(live, files[i], &o, NULL, NULL, NULL), LDS_OK);
        uint64_t t1 = lds__now_ns();
        lds__live_phases(live, &ph);
        assert_true(ph.delta);
        assert_true(ph.table_ns > 0);
        assert_true(ph.plan_ns > 0);
        assert_true(ph.fill_ns > 0);
        assert_true(ph.parse_ns > 0);
        uint64_t sum = ph.table_ns + ph.plan_ns + ph.rent_ns + ph.fill_ns + ph.parse_ns +
                       ph.keys_ns + ph.swap_ns;
        assert_true(sum <= ph.total_ns);
        assert_true(ph.total_ns <= t1 - t0);
        /* the fill's parts: the first delta has no standby: row 40's chunk is read and
           verified, the rest copied from the serving generation and hashed again; later
           ones find the same file's bytes in the standby (two generations back): all kept,
           nothing copied or read. Summed over at most 2 readers. */
        if (i == 0) {
            assert_true(ph.fill_read_ns > 0);
            assert_true(ph.fill_verify_ns > 0);
            assert_true(ph.fill_copy_ns > 0);
        } else {
            assert_int_equal(ph.fill_copy_ns + ph.fill_read_ns + ph.fill_verify_ns, 0);
        }
        assert_true(ph.fill_copy_ns + ph.fill_read_ns + ph.fill_verify_ns <= 2 * ph.fill_ns);
        uint64_t flat[14];
        lds__live_phases_ns(live, flat, 14);
        assert_int_equal(flat[1], ph.plan_ns);
        assert_int_equal(flat[7], ph.total_ns);
        assert_int_equal(flat[8], 1);
        assert_int_equal(flat[11], ph.fill_copy_ns);
        assert_int_equal(flat[12], ph.fill_read_ns);
        assert_int_equal(flat[13], ph.fill_verify_ns);
    }
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
}

/* A kept chunk changed in the standby (a stray write): with lds__delta_rehash_kept the
 * change is found and the chunk read; the generation served is the file's. */
static uint64_t g_spoil_kept = UINT64_MAX;
static void spoil_kept(uint64_t chunk, unsigned char *p, size_t n)
{
    if (chunk == g_spoil_kept && n > 100)
        p[100] ^= 0x01;
}

static void test_delta_standby_rehash_kept(void **state)
{
    (void)state;
    static unsigned ver[ROWS];
    memset(ver, 0, sizeof ver);
    const char *pa = write_gen("a.ldsi", ROWS, NULL, CHUNK);
    ver[40] = 1;
    const char *pb = write_gen("b.ldsi", ROWS, ver, CHUNK);
    lds_pool *check = new_pool();
    lds_live *live = new_delta_live();
    lds_load_options o = opts_for(NULL, 1);
    assert_int_equal(lds_live_reload_path(live, pa, &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(lds_live_reload_path(live, pb, &o, NULL, NULL, NULL), LDS_OK);
    g_spoil_kept = 9;
    lds__delta_keep_hook = spoil_kept;
    lds__delta_rehash_kept = true;
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path(live, pa, &o, NULL, &info, NULL), LDS_OK);
    lds__delta_keep_hook = NULL;
    lds__delta_rehash_kept = false;
    /* the standby holds A whole: every chunk kept but 9, spoiled, found, read */
    assert_int_equal(info.chunks_read, 1);
    assert_int_equal(info.chunks_shared, 137 - 1);
    assert_same_as_full(live, pa, check);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    lds_pool_free(check);
}

/* A delta into the standby that fails (a corrupt chunk it must read) returns the standby's
 * rental to the pool (its contents are unknown now) and the serving generation keeps
 * serving; the next reload rents afresh and is the file's, byte for byte. */
static void test_delta_standby_failed_reload(void **state)
{
    (void)state;
    static unsigned ver[ROWS];
    memset(ver, 0, sizeof ver);
    const char *pa = write_gen("a.ldsi", ROWS, NULL, CHUNK);
    ver[40] = 1;
    const char *pb = write_gen("b.ldsi", ROWS, ver, CHUNK);
    ver[2000] = 1;
    const char *pc = write_gen("c.ldsi", ROWS, ver, CHUNK);
    lds_pool *check = new_pool();
    lds_live *live = new_delta_live();
    lds_load_options o = opts_for(NULL, 2);
    uint64_t gen = 0;
    assert_int_equal(lds_live_reload_path(live, pa, &o, NULL, NULL, NULL), LDS_OK);
    assert_int_equal(lds_live_reload_path(live, pb, &o, &gen, NULL, NULL), LDS_OK);
    assert_int_equal(live_leases(live), 2);
    flip_byte(pc, LDS_HEADER_SIZE + 62 * CHUNK + 7);
    lds_error err;
    lds_error_init(&err);
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path(live, pc, &o, NULL, &info, &err), LDS_E_CHECKSUM);
    assert_false(info.delta_fallback);
    assert_non_null(strstr(err.message, "checksum of chunk 62"));
    assert_int_equal(stats_of(live).generation, gen);
    assert_same_as_full(live, pb, check);
    assert_int_equal(live_leases(live), 1); /* the standby went back; B's rental only */
    flip_byte(pc, LDS_HEADER_SIZE + 62 * CHUNK + 7);
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path(live, pc, &o, NULL, &info, NULL), LDS_OK);
    assert_int_equal(info.chunks_shared, 0); /* nothing is kept from a failed standby */
    assert_same_as_full(live, pc, check);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    lds_pool_free(check);
}

/* A retired generation still pinned is not a standby: the reload rents afresh, and the
 * pinned generation reads intact; after its last unpin its buffer is the standby. */
static void test_delta_standby_waits_for_pins(void **state)
{
    (void)state;
    static unsigned ver[ROWS];
    memset(ver, 0, sizeof ver);
    const char *pa = write_gen("a.ldsi", ROWS, NULL, CHUNK);
    ver[40] = 1;
    const char *pb = write_gen("b.ldsi", ROWS, ver, CHUNK);
    lds_pool *check = new_pool();
    lds_live *live = new_delta_live();
    lds_load_options o = opts_for(NULL, 1);
    assert_int_equal(lds_live_reload_path(live, pa, &o, NULL, NULL, NULL), LDS_OK);
    lds_pin pin;
    assert_int_equal(lds_live_pin(live, &pin), LDS_OK); /* on A */
    lds__delta_base before;
    assert_true(lds__delta_base_of(pin.index, &before));
    unsigned char *copy = malloc((size_t)before.length);
    memcpy(copy, before.payload, (size_t)before.length);
    assert_int_equal(lds_live_reload_path(live, pb, &o, NULL, NULL, NULL), LDS_OK);
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path(live, pa, &o, NULL, &info, NULL), LDS_OK);
    assert_int_equal(info.chunks_shared, 0); /* A pinned: no standby */
    assert_int_equal(memcmp(copy, before.payload, (size_t)before.length), 0);
    assert_int_equal(live_leases(live), 3);
    lds_live_unpin(live, &pin); /* A's generation goes; its buffer is the standby now */
    free(copy);
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path(live, pb, &o, NULL, &info, NULL), LDS_OK);
    assert_int_equal(info.chunks_shared, 137 - 2);
    assert_same_as_full(live, pb, check);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    lds_pool_free(check);
}

/* Format 1.0 and another chunk size fall back to a full load, and say why. */
static void test_delta_falls_back(void **state)
{
    (void)state;
    const char *pa = write_gen("a.ldsi", ROWS, NULL, CHUNK);
    const char *p10 = write_gen("b10.ldsi", ROWS, NULL, LDS_CHUNKS_NONE);
    const char *p8k = write_gen("b8k.ldsi", ROWS, NULL, 2 * CHUNK);
    lds_pool *pool = new_pool();
    lds_live *live = new_live();
    lds_load_options o = opts_for(pool, 1);
    struct {
        const char *path, *why;
    } cases[] = {{p10, "format 1.0"},
                 {p8k, "chunk size changed (8192 bytes, the current "
                       "generation's 4096)"}};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(lds_live_reload_path_delta(live, pa, true, &o, NULL, NULL, NULL), LDS_OK);
        lds_load_info info;
        lds_load_info_init(&info);
        assert_int_equal(
            lds_live_reload_path_delta(live, cases[i].path, true, &o, NULL, &info, NULL), LDS_OK);
        assert_true(info.delta_fallback);
        assert_int_equal(info.bytes_read, info.payload_bytes);
        assert_int_equal(info.bytes_copied, 0);
        lds_live_stats s = stats_of(live);
        assert_true(s.last_load.delta_fallback);
        assert_non_null(strstr(s.delta_fallback_reason, cases[i].why));
        char json[4096];
        assert_int_equal(lds_live_stats_json(&s, json, sizeof json, NULL), LDS_OK);
        assert_non_null(strstr(json, "\"delta_fallback\":true"));
        assert_non_null(strstr(json, cases[i].why));
    }
    /* from a 1.0 generation to a 1.1 file: nothing to reuse */
    lds_load_info info;
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_path_delta(live, pa, true, &o, NULL, &info, NULL), LDS_OK);
    assert_true(info.delta_fallback);
    /* a pipe cannot be read at offsets (fed by a thread: no fork under TSan) */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    feed_arg fa = {pa, fds[1]};
    pthread_t feeder;
    assert_int_equal(pthread_create(&feeder, NULL, feed_pipe, &fa), 0);
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_fd_delta(live, fds[0], true, &o, NULL, &info, NULL), LDS_OK);
    close(fds[0]);
    pthread_join(feeder, NULL);
    assert_true(info.delta_fallback);
    assert_non_null(strstr(stats_of(live).delta_fallback_reason, "not a regular file"));
    /* an fd of a regular file: a delta, and the position after the payload */
    int fd = open(pa, O_RDONLY);
    lds_load_info_init(&info);
    assert_int_equal(lds_live_reload_fd_delta(live, fd, true, &o, NULL, &info, NULL), LDS_OK);
    assert_false(info.delta_fallback);
    assert_int_equal(info.bytes_copied, info.payload_bytes - info.bytes_read);
    struct stat st;
    fstat(fd, &st);
    assert_int_equal(lseek(fd, 0, SEEK_CUR), st.st_size);
    close(fd);
    assert_int_equal(lds_live_close(live, NULL), LDS_OK);
    lds_pool_free(pool);
}

/* Under LDS_POOL_CHECK=guard (a returned buffer is PROT_NONE), a child pins generation 1,
 * delta-reloads generation 2 from it, reads every row of 1 through its pin (intact), then
 * of 2; after the unpin, a read of 1 faults (its rental went back). */
static int guard_child(const char *pa, const char *pb, const unsigned *ver, bool late)
{
    setenv(LDS_POOL_CHECK_ENV, "guard", 1);
    lds_pool_options po;
    lds_pool_options_default(&po);
    if (po.check != LDS_POOL_CHECK_GUARD)
        return 3;
    lds_pool *pool = NULL;
    lds_live *live = NULL;
    if (lds_pool_create(&po, &pool) != LDS_OK || lds_live_create(NULL, &live, NULL) != LDS_OK)
        return 4;
    lds_load_options o = opts_for(pool, 2);
    lds_pin p1, p2;
    lds_load_info info;
    lds_load_info_init(&info);
    if (lds_live_reload_path_delta(live, pa, true, &o, NULL, NULL, NULL) != LDS_OK ||
        lds_live_pin(live, &p1) != LDS_OK ||
        lds_live_reload_path_delta(live, pb, true, &o, NULL, &info, NULL) != LDS_OK ||
        lds_live_pin(live, &p2) != LDS_OK)
        return 5;
    if (info.delta_fallback || info.chunks_copied == 0)
        return 6;
    for (uint64_t r = 0; r < ROWS; r++) {
        const float *a = lds_index_row(p1.index, r), *b = lds_index_row(p2.index, r);
        for (uint32_t d = 0; d < DIM; d++)
            if (a[d] != value_of(0, r, d) || b[d] != value_of(ver[r], r, d))
                return 7;
    }
    const volatile float *first = lds_index_row(p1.index, 0);
    lds_live_unpin(live, &p1);
    if (late) {
        signal(SIGSEGV, SIG_DFL);
        float x = first[0];
        (void)x;
        return 8;
    }
    lds_live_unpin(live, &p2);
    lds_live_free(live);
    lds_pool_free(pool);
    return 0;
}

static void test_delta_guard_mode_child(void **state)
{
    (void)state;
#if defined(__SANITIZE_THREAD__)
    skip(); /* fork of a threaded process: TSan's own deadlock detector trips in the child */
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    skip();
#endif
#endif
    static unsigned ver[ROWS];
    memset(ver, 0, sizeof ver);
    const char *pa = write_gen("a.ldsi", ROWS, NULL, CHUNK);
    for (int r = 0; r < ROWS; r += 97)
        ver[r] = 2;
    const char *pb = write_gen("b.ldsi", ROWS, ver, CHUNK);
    for (int late = 0; late < 2; late++) {
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            _exit(guard_child(pa, pb, ver, late));
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (!late) {
            assert_true(WIFEXITED(status));
            assert_int_equal(WEXITSTATUS(status), 0);
        } else {
            /* killed by SIGSEGV (or ASan's report): never a clean read of freed memory */
            assert_false(WIFEXITED(status) &&
                         (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 8));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delta_equals_full_load),
        cmocka_unit_test(test_delta_appended_rows),
        cmocka_unit_test(test_delta_plan_linear_in_repeated_chunks),
        cmocka_unit_test(test_reload_hands_on_key_table),
        cmocka_unit_test(test_delta_is_opt_in),
        cmocka_unit_test(test_delta_copy_that_differs_is_read),
        cmocka_unit_test(test_delta_corrupt_chunk_keeps_serving),
        cmocka_unit_test(test_delta_falls_back),
        cmocka_unit_test(test_delta_standby_keeps),
        cmocka_unit_test(test_delta_phases),
        cmocka_unit_test(test_reload_extends_keys),
        cmocka_unit_test(test_delta_standby_rehash_kept),
        cmocka_unit_test(test_delta_standby_failed_reload),
        cmocka_unit_test(test_delta_standby_waits_for_pins),
        cmocka_unit_test(test_delta_guard_mode_child),
        cmocka_unit_test(test_delta_uring_and_fallback_equal_full),
        cmocka_unit_test(test_delta_scratch_kept_across_reloads),
        cmocka_unit_test(test_populate_standby_keeps_contents),
        cmocka_unit_test(test_reload_refuses_repeated_keys),
        cmocka_unit_test(test_delta_uring_short_read_reread),
        cmocka_unit_test(test_delta_uring_corrupt_chunk),
        cmocka_unit_test(test_delta_uring_tiny_delta_no_ring),
        cmocka_unit_test(test_delta_uring_stuck_read_cancelled),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
