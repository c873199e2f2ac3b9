/*
 * delta: delta reloads of a live index against full reloads (docs/adr/0047, 0048, 0052).
 * For each chunk size (--size LIST, default 4 KiB, 64 KiB and 4 MiB) and each section
 * layout (packed: sections at multiples of 64; aligned: on chunk boundaries, format 1.2),
 * a generated index of --rows x --dim f32 rows with ids and 14-byte keys (base), and new
 * builds of it: 1% of rows changed in place at random, 1% changed in runs of 64
 * consecutive rows (clustered), 1% of rows appended, 1% of keys changed to keys of the
 * same length, one key (the middle row's) made one byte longer, the middle row deleted,
 * one metadata value changed (same length). Interleaved per round: a full reload of the
 * base (delta off), then for each pattern the base reloaded (untimed) and the pattern's
 * file delta-reloaded (timed). Rows report ms per reload, bytes and chunks read, and
 * bytes read as a share of the payload.
 * Page cache warm (every file read once first); the live index's pool keeps its rentals.
 */
#include "bench.h"

#include "lodestar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xxhash.h>

/* loader/load.c: false skips the re-hash of copied chunks (this benchmark prices it). */
extern bool lds__delta_rehash;

enum {
    P_FULL,
    P_CHANGED,
    P_CLUSTERED,
    P_APPENDED,
    P_KEYS_SAME,
    P_KEY_LONGER,
    P_DELETED,
    P_META,
    P_CLUSTERED_TRUST,
    P_COUNT
};
static const char *const p_names[P_COUNT] = {
    "full",        "changed 1%",      "clustered 1%",
    "appended 1%", "keys edited 1%",  "key longer",
    "row deleted", "metadata edited", "clustered 1% no re-hash"};
/* the file each alternative reloads */
static const int p_file[P_COUNT] = {P_FULL,       P_CHANGED, P_CLUSTERED, P_APPENDED, P_KEYS_SAME,
                                    P_KEY_LONGER, P_DELETED, P_META,      P_CLUSTERED};
#define P_FILES 8

/* Element values of row r at version v: a mixed hash (no two rows alike). */
static void row_of(uint64_t r, unsigned v, uint32_t dim, float *out)
{
    uint64_t x = r * 0x9E3779B97F4A7C15ull + (uint64_t)v * 0xD1B54A32D192ED03ull + 1;
    for (uint32_t d = 0; d < dim; d++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out[d] = (float)((double)(x >> 11) / 9007199254740992.0 - 0.5);
    }
}

/* One build: its rows (base row r, or r + 1 from `deleted` on), the rows whose vector
   changed (`changed`, NULL: none) or whose key changed to one of the same length
   (`rekeyed`), the row whose key grows a byte (`longer`, UINT64_MAX: none), and the
   metadata "source" value. */
typedef struct gen_spec {
    uint64_t rows;
    const unsigned char *changed, *rekeyed;
    uint64_t longer, deleted;
    const char *source;
} gen_spec;

static int write_gen(const char *path, uint32_t dim, uint32_t chunk, lds_layout layout,
                     const gen_spec *g)
{
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = dim;
    wo.with_ids = true;
    wo.with_keys = true;
    wo.chunk_bytes = chunk;
    wo.layout = layout;
    lds_writer *w = NULL;
    lds_error err;
    lds_error_init(&err);
    float *v = malloc((size_t)dim * sizeof *v);
    lds_status st = v ? lds_writer_open_path(path, &wo, &w, &err) : LDS_E_NOMEM;
    if (st == LDS_OK)
        st = lds_writer_set_meta(w, "source", g->source, &err);
    for (uint64_t i = 0; st == LDS_OK && i < g->rows; i++) {
        uint64_t r = i >= g->deleted ? i + 1 : i;
        row_of(r, g->changed && g->changed[r] ? 1 : 0, dim, v);
        char key[32];
        int kl =
            snprintf(key, sizeof key, "%s-%010llu%s", g->rekeyed && g->rekeyed[r] ? "DOC" : "doc",
                     (unsigned long long)r, r == g->longer ? "+" : "");
        st = lds_writer_add_row(w, v, dim, 1000000 + r, key, (size_t)kl, &err);
    }
    if (st == LDS_OK)
        st = lds_writer_finish(w, &err);
    lds_writer_free(w);
    free(v);
    if (st != LDS_OK)
        fprintf(stderr, "delta: writing %s: %s\n", path, err.message);
    return st == LDS_OK ? 0 : -1;
}

typedef struct dl_ctx {
    int pattern;
    lds_live *live;
    const char *base, *file;
    lds_load_options lo;
    lds_load_info last;
} dl_ctx;

static int run(void *arg, uint64_t ops, uint64_t *elapsed)
{
    dl_ctx *c = arg;
    uint64_t total = 0;
    for (uint64_t i = 0; i < ops; i++) {
        lds_error err;
        lds_error_init(&err);
        lds_status st = LDS_OK;
        if (c->pattern != P_FULL)
            st = lds_live_reload_path_delta(c->live, c->base, true, &c->lo, NULL, NULL, &err);
        lds_load_info_init(&c->last);
        lds__delta_rehash = c->pattern != P_CLUSTERED_TRUST;
        uint64_t t0 = bench_now_ns();
        if (st == LDS_OK)
            st = lds_live_reload_path_delta(c->live, c->file, c->pattern != P_FULL, &c->lo, NULL,
                                            &c->last, &err);
        total += bench_now_ns() - t0;
        lds__delta_rehash = true;
        if (st != LDS_OK) {
            fprintf(stderr, "delta: reload of %s: %s\n", c->file, err.message);
            return -1;
        }
        if (c->pattern != P_FULL && c->last.delta_fallback) {
            fprintf(stderr, "delta: reload of %s fell back to a full load\n", c->file);
            return -1;
        }
    }
    *elapsed = total;
    return 0;
}

static void warm(const char *path)
{
    FILE *f = fopen(path, "rb");
    static char buf[1 << 20];
    while (f && fread(buf, 1, sizeof buf, f) > 0) {
    }
    if (f)
        fclose(f);
}

/* ---- what sharing would cost: a memfd's resident pages mapped into a new range ---- */

enum { S_COPY, S_COPY_HASH, S_MAP, S_MAP_POPULATE, S_PIECES, S_COUNT };
static const char *const s_names[S_COUNT] = {
    "memcpy (reuse by copy)", "memcpy + XXH3 (copy, re-hashed)", "memfd mmap + read each page",
    "memfd mmap MAP_POPULATE + read each page", "memfd 64 KiB pieces MAP_FIXED|MAP_POPULATE"};

typedef struct sh_ctx {
    int kind;
    int fd;                /* memfd holding `n` resident bytes */
    unsigned char *src;    /* a shared mapping of it, resident */
    unsigned char *dst;    /* a warm private buffer of n bytes */
    size_t n;
} sh_ctx;

static int sh_run(void *arg, uint64_t ops, uint64_t *elapsed)
{
    (void)elapsed;
    sh_ctx *c = arg;
    size_t page = bench_page_size();
    for (uint64_t i = 0; i < ops; i++) {
        uint64_t acc = 0;
        if (c->kind == S_COPY || c->kind == S_COPY_HASH) {
            for (size_t off = 0; off < c->n; off += (size_t)4 << 20) {
                size_t k = c->n - off < ((size_t)4 << 20) ? c->n - off : (size_t)4 << 20;
                memcpy(c->dst + off, c->src + off, k);
                if (c->kind == S_COPY_HASH)
                    acc ^= XXH3_64bits(c->dst + off, k);
            }
            bench_escape(&acc);
            continue;
        }
        unsigned char *m;
        if (c->kind == S_PIECES) {
            /* a reserved range, then 64 KiB pieces mapped from the memfd in reverse file
               order (so the kernel cannot merge them): one mapping per piece */
            size_t piece = (size_t)64 << 10, np = c->n / piece;
            m = mmap(NULL, np * piece, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED)
                return -1;
            for (size_t p = 0; p < np; p++)
                if (mmap(m + p * piece, piece, PROT_READ, MAP_SHARED | MAP_FIXED | MAP_POPULATE,
                         c->fd, (off_t)((np - 1 - p) * piece)) == MAP_FAILED) {
                    perror("delta: mmap MAP_FIXED");
                    munmap(m, np * piece);
                    return -1;
                }
            for (size_t off = 0; off < np * piece; off += page)
                acc += m[off];
            munmap(m, np * piece);
            bench_escape(&acc);
            continue;
        }
        m = mmap(NULL, c->n, PROT_READ,
                 MAP_SHARED | (c->kind == S_MAP_POPULATE ? MAP_POPULATE : 0), c->fd, 0);
        if (m == MAP_FAILED)
            return -1;
        for (size_t off = 0; off < c->n; off += page)
            acc += m[off];
        munmap(m, c->n);
        bench_escape(&acc);
    }
    return 0;
}

static int sharing_table(const bench_opts *o, bench_report *rep, size_t n)
{
    n &= ~(((size_t)64 << 10) - 1);
    char title[128], human[32];
    snprintf(title, sizeof title, "sharing: %s of resident memfd pages (shmem THP \"never\" "
             "here: 4 KiB pages)", bench_fmt_bytes((double)n, human, sizeof human));
    bench_table(rep, title, true);
    int fd = memfd_create("lodestar-bench-delta", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)n) != 0) {
        perror("delta: memfd");
        return -1;
    }
    unsigned char *src = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    unsigned char *dst = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (src == MAP_FAILED || dst == MAP_FAILED) {
        close(fd);
        return -1;
    }
    for (size_t i = 0; i < n; i += 64)
        src[i] = (unsigned char)(i >> 6);
    memset(dst, 1, n);
    sh_ctx ctx[S_COUNT];
    bench_alt alts[S_COUNT];
    for (int k = 0; k < S_COUNT; k++) {
        ctx[k] = (sh_ctx){.kind = k, .fd = fd, .src = src, .dst = dst, .n = n};
        alts[k] = (bench_alt){.name = s_names[k], .scale = BENCH_MS, .unit = "ms/op",
                              .run = sh_run, .ctx = &ctx[k], .ops = 1,
                              .row = bench_row_new(rep, s_names[k], "ms/op")};
    }
    int rc = bench_interleave(alts, S_COUNT, 1, bench_iters(o, o->dry ? 2 : 5));
    munmap(src, n);
    munmap(dst, n);
    close(fd);
    return rc;
}

int bench_delta(const bench_opts *o)
{
    uint64_t rows = o->rows ? o->rows : (o->dry ? 4096 : 1000000);
    uint32_t dim = o->dim ? o->dim : (o->dry ? 32 : 128);
    int iters = bench_iters(o, o->dry ? 2 : 5);
    size_t def[] = {4096, 65536, (size_t)4 << 20};
    const size_t *sizes = o->n_sizes ? o->sizes : def;
    size_t n_sizes = o->n_sizes ? o->n_sizes : 3;
    bench_report *rep = bench_report_new(o);
    if (!rep)
        return -1;
    char buf[512];
    snprintf(buf, sizeof buf,
             "%llu rows x %u f32 (%u-byte rows) with ids and 14-byte keys; changed: 1%% of "
             "rows at random; clustered: 1%% in runs of 64 rows; appended: 1%% more rows at "
             "the end; keys edited: 1%% of keys at random, same length; key longer: the "
             "middle row's key one byte longer; row deleted: the middle row; metadata "
             "edited: one value, same length; tables: sections packed (64) or aligned to "
             "chunks (format 1.2)",
             (unsigned long long)rows, dim, dim * 4);
    bench_param(rep, "index", buf);
    bench_param(rep, "order",
                "per round: full reload of the base, then per pattern the base reloaded "
                "(untimed) and the pattern's file delta-reloaded (timed); page cache warm");
    unsigned char *chg[P_FILES] = {0};
    uint64_t rows_of[P_FILES] = {rows, rows, rows, rows + rows / 100, rows, rows, rows - 1, rows};
    chg[P_CHANGED] = calloc(rows, 1);
    chg[P_CLUSTERED] = calloc(rows, 1);
    if (!chg[P_CHANGED] || !chg[P_CLUSTERED])
        return -1;
    gen_spec spec[P_FILES];
    for (int p = 0; p < P_FILES; p++)
        spec[p] = (gen_spec){.rows = rows_of[p], .longer = UINT64_MAX, .deleted = UINT64_MAX,
                             .source = "build 1"};
    spec[P_CHANGED].changed = chg[P_CHANGED];
    spec[P_CLUSTERED].changed = chg[P_CLUSTERED];
    spec[P_KEYS_SAME].rekeyed = chg[P_CHANGED];
    spec[P_KEY_LONGER].longer = rows / 2;
    spec[P_DELETED].deleted = rows / 2;
    spec[P_META].source = "build 2";
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (uint64_t n = 0; n < rows / 100;) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint64_t r = s % rows;
        n += !chg[P_CHANGED][r];
        chg[P_CHANGED][r] = 1;
    }
    for (uint64_t n = 0; n + 64 <= rows / 100 + 63 && rows >= 64;) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint64_t r = s % (rows - 63);
        bool clear = true;
        for (int i = 0; i < 64; i++)
            clear = clear && !chg[P_CLUSTERED][r + (uint64_t)i];
        if (!clear)
            continue;
        memset(chg[P_CLUSTERED] + r, 1, 64);
        n += 64;
    }
    int rc = 0;
    const char *dir = bench_work_dir(o);
    for (size_t ti = 0; ti < 2 * n_sizes && rc == 0; ti++) {
        size_t si = ti / 2;
        lds_layout layout = ti % 2 ? LDS_LAYOUT_CHUNK_ALIGNED : LDS_LAYOUT_PACKED;
        uint32_t chunk = (uint32_t)sizes[si];
        char path[P_FILES][4200], title[128], human[32];
        for (int p = 0; p < P_FILES && rc == 0; p++) {
            snprintf(path[p], sizeof path[p], "%s/lodestar-bench-delta-%d-%u.ldsi", dir, p, chunk);
            rc = write_gen(path[p], dim, chunk, layout, &spec[p]);
            warm(path[p]);
        }
        lds_pool *pool = NULL;
        lds_live *live = NULL;
        lds_pool_options po;
        lds_pool_options_default(&po);
        po.thread_cache_count = 0;
        po.max_retained_bytes =
            4 * lds_pool_class_capacity((size_t)(rows_of[P_APPENDED] * (dim * 4 + 26) * 11 / 10));
        if (rc == 0 && (lds_pool_create(&po, &pool) != LDS_OK ||
                        lds_live_create(NULL, &live, NULL) != LDS_OK))
            rc = -1;
        /* the packed tables keep the titles they had before the aligned layout (the
           Holds-if lines of ADRs 0047 and 0048 name them) */
        snprintf(title, sizeof title, "chunk %s%s",
                 bench_fmt_bytes((double)chunk, human, sizeof human),
                 layout == LDS_LAYOUT_PACKED ? "" : " aligned");
        bench_table(rep, title, true);
        dl_ctx ctx[P_COUNT];
        bench_alt alts[P_COUNT];
        for (int p = 0; p < P_COUNT && rc == 0; p++) {
            ctx[p] = (dl_ctx){.pattern = p, .live = live, .base = path[P_FULL],
                              .file = path[p_file[p]]};
            lds_load_options_default(&ctx[p].lo);
            ctx[p].lo.pool = pool;
            ctx[p].lo.ownership = LDS_OWN_ADOPT;
            alts[p] = (bench_alt){.name = p_names[p],
                                  .scale = BENCH_MS,
                                  .unit = "ms/reload",
                                  .run = run,
                                  .ctx = &ctx[p],
                                  .ops = 1,
                                  .row = bench_row_new(rep, p_names[p], "ms/reload")};
        }
        if (rc == 0)
            rc = lds_live_reload_path_delta(live, path[P_FULL], false, NULL, NULL, NULL, NULL) ==
                         LDS_OK
                     ? 0
                     : -1;
        if (rc == 0)
            rc = bench_interleave(alts, P_COUNT, 1, iters);
        double full_ms = rc == 0 ? bench_row_median(alts[P_FULL].row) : 0;
        for (int p = 0; p < P_COUNT && rc == 0; p++) {
            bench_row *row = alts[p].row;
            const lds_load_info *li = &ctx[p].last;
            bench_row_set(row, "read", "bytes_read", BENCH_BYTES, (double)li->bytes_read);
            bench_row_set(row, "read", "read_pct", BENCH_PCT,
                          100.0 * (double)li->bytes_read / (double)li->payload_bytes);
            bench_row_set(row, "read", "chunks_read", BENCH_COUNT, (double)li->chunks_read);
            bench_row_set(row, "read", "chunks", BENCH_COUNT,
                          (double)(li->chunks_read + li->chunks_copied + li->chunks_shared));
            bench_row_set(row, "time", "over_full", BENCH_RATIO,
                          full_ms > 0 ? bench_row_median(row) / full_ms : 0);
            bench_row_set(row, "time", "payload", BENCH_BYTES, (double)li->payload_bytes);
        }
        if (live && lds_live_close(live, NULL) != LDS_OK)
            rc = -1;
        lds_pool_free(pool);
        for (int p = 0; p < P_FILES; p++)
            unlink(path[p]);
    }
    free(chg[P_CHANGED]);
    free(chg[P_CLUSTERED]);
    if (rc == 0)
        rc = sharing_table(o, rep, (size_t)(rows * (dim * 4 + 8)));
    int fin = bench_report_finish(rep);
    return rc == 0 ? fin : rc;
}
