/*
 * The load paths (docs/design.md "The stream load, step by step"): header, cross-checks and limits,
 * then the pooled, growable, mapped or memory path, then the parser, with every
 * rental, mapping and buffer released exactly once whatever happens.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>
#if LDS_HAVE_URING
#include <liburing.h>
#endif
#if LDS_HAVE_XXH3_DISPATCH
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#define lds__xxh3_update XXH3_64bits_update_dispatch
#define lds__xxh3        XXH3_64bits_dispatch
#else
#define lds__xxh3_update XXH3_64bits_update
#define lds__xxh3        XXH3_64bits
#endif

#include "load_internal.h"
#include "delta_internal.h"
#include "format_internal.h"

/* The ownership LDS_OWN_DEFAULT resolves to: the one place that names it.
 * Adopt until the ownership ADR's measurements say otherwise. */
#define LDS__DEFAULT_OWNERSHIP LDS_OWN_ADOPT

/* Default of options.hash_thread (see docs/measurements/load.txt). */
#define LDS__DEFAULT_HASH_THREAD false

/* Growable path: first capacity, and the most it ever holds beyond the bytes
 * received (doubling below that, then steps of this size). */
#define LDS__GROW_MIN       ((size_t)64 << 10)
#define LDS__GROW_AHEAD_MAX ((size_t)64 << 20)
/* Largest single read asked of a source. */
#define LDS__CHUNK_MAX ((size_t)1 << 30)

void lds_load_options_default(lds_load_options *opts)
{
    if (opts == NULL)
        return;
    memset(opts, 0, sizeof *opts);
    opts->size = sizeof *opts;
    opts->pool = NULL;
    opts->max_payload_bytes = LDS_DEFAULT_MAX_PAYLOAD_BYTES;
    lds_limits_default(&opts->limits);
    opts->ownership = LDS_OWN_DEFAULT;
    opts->use_mmap = false;
    opts->populate = false;
    opts->verify_checksum = true;
    opts->hash_while_reading = true;
    opts->hash_thread = LDS__DEFAULT_HASH_THREAD;
    opts->chunk_bytes = LDS_DEFAULT_CHUNK_BYTES;
}

void lds_load_info_init(lds_load_info *info)
{
    if (info == NULL)
        return;
    memset(info, 0, sizeof *info);
    info->size = sizeof *info;
}

lds_ownership lds_load_default_ownership(void)
{
    return LDS__DEFAULT_OWNERSHIP;
}

const char *lds_load_path_name(enum lds_load_path path)
{
    switch (path) {
    case LDS_LOAD_POOLED:
        return "pooled";
    case LDS_LOAD_GROWABLE:
        return "growable";
    case LDS_LOAD_MAPPED:
        return "mapped";
    case LDS_LOAD_MEMORY:
        return "memory";
    }
    return "none";
}

/* What holds the payload bytes and how to let them go. */
enum hold_kind { HOLD_NONE = 0, HOLD_LEASE, HOLD_MAP };
typedef struct hold {
    enum hold_kind kind;
    lds_pool *pool;
    lds_lease lease;
    void *map;
    size_t map_len;
} hold;

static void hold_release(hold *h)
{
    if (h->kind == HOLD_LEASE)
        (void)lds_pool_return(h->pool, &h->lease, 0);
    else if (h->kind == HOLD_MAP)
        (void)lds__os_munmap(h->map, h->map_len);
    h->kind = HOLD_NONE;
}

/* The parser's release callback in adopt mode: called once by lds_index_free. */
static void hold_release_cb(void *ctx)
{
    hold_release(ctx);
    free(ctx);
}

/* State of one load call. */
typedef struct load_ctx {
    lds_load_options o;
    lds_ownership own;
    lds_load_info info;
    lds_error *err;
    lds_index **out;
    uint64_t t0_ns;
    uint64_t base; /* stream offset of the header, for error offsets */
    size_t chunk;
    const char *name;     /* the path, for messages; NULL for an fd */
    int fd;               /* the mapped path's file */
    bool mapped;          /* the payload is a file mapping others may change */
    void *pending_kept;   /* parse()'s holder while the parser runs, for a fault */
    lds_header hdr;       /* as decoded (format 1.1: the chunk geometry) */
    bool chunks_verified; /* 1.1: the read loop checked the table and every chunk */
    bool delta;           /* a delta load (lds__load_delta) counted bytes and chunks itself */
    lds__delta_phases *phases; /* a delta load's phase times, or NULL */
} load_ctx;

#define now_ns lds__now_ns

static bool info_size_ok(const lds_load_info *info)
{
    return info->size >= LDS_LOAD_INFO_MIN_SIZE && info->size <= sizeof *info;
}

static lds_status begin(load_ctx *c, const lds_load_options *opts, lds_index **out,
                        lds_load_info *info, lds_error *err)
{
    memset(c, 0, sizeof *c);
    c->info.size = sizeof c->info;
    c->err = err;
    c->out = out;
    c->t0_ns = now_ns();
    lds_load_options_default(&c->o);
    if (out != NULL)
        *out = NULL;
    if (info != NULL && !info_size_ok(info))
        return lds__load_fail(err, LDS_E_INVALID_ARG, "info.size", 0, 0, NULL,
                              "lds_load_info.size is %zu (accepted: %zu..%zu); set it with "
                              "lds_load_info_init",
                              info->size, LDS_LOAD_INFO_MIN_SIZE, sizeof(lds_load_info));
    if (opts != NULL) {
        if (opts->size < LDS_LOAD_OPTIONS_MIN_SIZE || opts->size > sizeof(lds_load_options))
            return lds__load_fail(err, LDS_E_INVALID_ARG, "options.size", 0, 0, NULL,
                                  "lds_load_options.size is %zu (accepted: %zu..%zu); set it "
                                  "with lds_load_options_default",
                                  opts->size, LDS_LOAD_OPTIONS_MIN_SIZE, sizeof(lds_load_options));
        memcpy(&c->o, opts, opts->size);
        c->o.size = sizeof c->o;
        if (c->o.limits.size < LDS_LIMITS_MIN_SIZE || c->o.limits.size > sizeof(lds_limits))
            return lds__load_fail(err, LDS_E_INVALID_ARG, "limits.size", 0, 0, NULL,
                                  "lds_load_options: limits.size is %zu (accepted: %zu..%zu); "
                                  "set it with lds_limits_default",
                                  c->o.limits.size, LDS_LIMITS_MIN_SIZE, sizeof(lds_limits));
    }
    if (out == NULL)
        return lds__load_fail(err, LDS_E_INVALID_ARG, "out", 0, 0, NULL,
                              "the index out-pointer is NULL");
    if (c->o.ownership != LDS_OWN_DEFAULT && c->o.ownership != LDS_OWN_COPY &&
        c->o.ownership != LDS_OWN_ADOPT)
        return lds__load_fail(err, LDS_E_INVALID_ARG, "options.ownership", 0, 0, NULL,
                              "unknown ownership %d", (int)c->o.ownership);
    c->own = c->o.ownership == LDS_OWN_DEFAULT ? LDS__DEFAULT_OWNERSHIP : c->o.ownership;
    c->info.ownership = c->own;
    c->chunk = c->o.chunk_bytes == 0 ? LDS_DEFAULT_CHUNK_BYTES : c->o.chunk_bytes;
    if (c->chunk > LDS__CHUNK_MAX)
        c->chunk = LDS__CHUNK_MAX;
    return LDS_OK;
}

static lds_status finish(load_ctx *c, lds_status st, lds_load_info *info)
{
    c->info.elapsed_ns = now_ns() - c->t0_ns;
    if (!c->delta) {
        /* A full load reads every payload byte it received (every chunk, once all came). */
        c->info.bytes_read = c->info.payload_bytes;
        c->info.chunks_read = lds_header_chunked(&c->hdr) &&
                                      c->info.payload_bytes == c->hdr.payload_length &&
                                      c->hdr.chunk_count <= UINT32_MAX
                                  ? (uint32_t)c->hdr.chunk_count
                                  : 0;
    }
    if (st != LDS_OK && c->out != NULL && *c->out != NULL) {
        lds_index_free(*c->out);
        *c->out = NULL;
    }
    if (info != NULL && info_size_ok(info)) {
        size_t n = info->size;
        c->info.size = n;
        memcpy(info, &c->info, n);
    }
    return st;
}

static bool cancelled(const load_ctx *c)
{
    return c->o.cancel != NULL && c->o.cancel(c->o.callback_ctx);
}

/* Cross-checks the declared length against a transport's; picks the length
 * to load (LDS_LENGTH_UNKNOWN if neither knows) and applies max_payload_bytes. */
static lds_status choose_length(load_ctx *c, uint64_t declared, bool t_known, uint64_t t_len,
                                const char *t_name, uint64_t t_value, uint64_t *length)
{
    if (declared != LDS_LENGTH_UNKNOWN && t_known && declared != t_len)
        return lds__load_fail(c->err, LDS_E_LENGTH_MISMATCH, "header.payload_length", c->base + 16,
                              0, NULL,
                              "the header (at offset %llu) declares a payload of %llu bytes, "
                              "but the %s of %llu bytes implies %llu",
                              (unsigned long long)c->base, (unsigned long long)declared, t_name,
                              (unsigned long long)t_value, (unsigned long long)t_len);
    uint64_t len = declared != LDS_LENGTH_UNKNOWN ? declared : t_known ? t_len : LDS_LENGTH_UNKNOWN;
    if (len != LDS_LENGTH_UNKNOWN && (len > c->o.max_payload_bytes || len > SIZE_MAX))
        return lds__load_fail(
            c->err, LDS_E_LIMIT, "header.payload_length", c->base + 16, 0, NULL,
            "the payload length %llu exceeds max_payload_bytes (%llu)", (unsigned long long)len,
            (unsigned long long)(c->o.max_payload_bytes < SIZE_MAX ? c->o.max_payload_bytes
                                                                   : (uint64_t)SIZE_MAX));
    *length = len;
    c->info.declared_bytes = len;
    return LDS_OK;
}

/* Decodes the header; error offsets (field and message) count from the stream start. */
static lds_status decode_header(load_ctx *c, const unsigned char *bytes, size_t n, lds_header *h)
{
    if (n < LDS_HEADER_SIZE)
        return lds__load_fail(c->err, LDS_E_TRUNCATED, "header", c->base + n, 0, NULL,
                              "the input ended inside the %d-byte header after %zu bytes",
                              LDS_HEADER_SIZE, n);
    lds_status st = lds_header_decode(bytes, n, h, c->err);
    if (st != LDS_OK)
        lds__error_rebase(c->err, c->base);
    else
        c->hdr = *h;
    return st;
}

/* Hands the payload to the parser under the chosen ownership; releases `h`
 * unless the new index now owns it. */
static lds_status parse(load_ctx *c, const void *payload, size_t length, hold *h, bool precomputed,
                        uint64_t hash)
{
    lds_parse_options po;
    lds_parse_options_default(&po);
    po.limits = c->o.limits;
    po.verify_checksum = c->o.verify_checksum;
    po.has_precomputed_hash = c->o.verify_checksum && precomputed;
    po.precomputed_hash = hash;
    po.base_offset = c->base + LDS_HEADER_SIZE;
    po.header = &c->hdr;
    po.chunks_verified = c->chunks_verified;
    hold *kept = NULL;
    if (c->own == LDS_OWN_ADOPT && h->kind != HOLD_NONE) {
        kept = malloc(sizeof *kept);
        if (kept == NULL) {
            hold_release(h);
            return lds__load_fail(c->err, LDS_E_NOMEM, "payload", po.base_offset, 0, NULL,
                                  "cannot allocate the payload holder");
        }
        *kept = *h;
        po.release = hold_release_cb;
        po.release_ctx = kept;
    }
    po.copy = c->own == LDS_OWN_COPY;
    po.copy_key_offsets = c->mapped;
    c->pending_kept = kept;
    lds_status st = lds_index_from_payload(payload, length, &po, c->out, c->err);
    c->pending_kept = NULL;
    if (st != LDS_OK || kept == NULL) {
        free(kept);
        hold_release(h);
    }
    h->kind = HOLD_NONE;
    if (st == LDS_OK) {
        c->info.checksum_verified = lds_index_checksum_verified(*c->out);
        c->info.hashed_while_reading = po.has_precomputed_hash || c->chunks_verified;
    }
    return st;
}

/* The buffer the read loop fills: a rental, or the growable mapping. */
typedef struct payload_buf {
    unsigned char *ptr;
    size_t cap;
    bool growable;
    hold h;
} payload_buf;

#define page_round lds__page_round

/* Grows the growable buffer past `received` (which equals its capacity),
 * geometrically but never more than LDS__GROW_AHEAD_MAX ahead, nor past `bound`. */
static lds_status grow(load_ctx *c, payload_buf *b, size_t received, size_t bound)
{
    size_t want = b->cap == 0 ? LDS__GROW_MIN : (b->cap > SIZE_MAX / 2 ? SIZE_MAX : b->cap * 2);
    if (want - received > LDS__GROW_AHEAD_MAX)
        want = received + LDS__GROW_AHEAD_MAX;
    if (want > bound)
        want = bound;
    want = page_round(want);
    void *p = NULL;
    int e = b->ptr == NULL ? lds__os_mmap(NULL, want, PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &p)
                           : lds__os_mremap(b->ptr, b->cap, want, MREMAP_MAYMOVE, &p);
    if (e != 0)
        return lds__load_fail(c->err, LDS_E_NOMEM, "payload", c->base + LDS_HEADER_SIZE + received,
                              e, NULL, "cannot grow the payload buffer from %zu to %zu bytes",
                              b->cap, want);
    b->ptr = p;
    b->cap = want;
    b->h.kind = HOLD_MAP;
    b->h.map = p;
    b->h.map_len = want;
    return LDS_OK;
}

/*
 * The checksum on a second thread (options.hash_thread): the hasher hashes the
 * bytes the read loop has published while the next chunk is being read. The
 * buffer never moves (pooled path only), the reader writes only past what it
 * published, and every hand-over goes through the mutex.
 */
typedef struct hasher {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    const unsigned char *ptr;
    size_t ready;  /* bytes the hasher may hash: [0, ready) */
    bool finished; /* ready is final */
    bool stop;     /* abandon (error or cancellation) */
    XXH3_state_t *hs;
} hasher;

static void *hasher_main(void *arg)
{
    hasher *t = arg;
    size_t done = 0;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        while (!t->stop && !t->finished && t->ready == done)
            pthread_cond_wait(&t->cond, &t->lock);
        if (t->stop || (t->finished && t->ready == done))
            break;
        size_t to = t->ready;
        pthread_mutex_unlock(&t->lock);
        lds__xxh3_update(t->hs, t->ptr + done, to - done);
        done = to;
        pthread_mutex_lock(&t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

static bool hasher_start(hasher *t, const unsigned char *ptr, XXH3_state_t *hs)
{
    memset(t, 0, sizeof *t);
    t->ptr = ptr;
    t->hs = hs;
    if (pthread_mutex_init(&t->lock, NULL) != 0)
        return false;
    if (pthread_cond_init(&t->cond, NULL) != 0) {
        pthread_mutex_destroy(&t->lock);
        return false;
    }
    if (pthread_create(&t->thread, NULL, hasher_main, t) != 0) {
        pthread_cond_destroy(&t->cond);
        pthread_mutex_destroy(&t->lock);
        return false;
    }
    return true;
}

static void hasher_publish(hasher *t, size_t ready, bool finished, bool stop)
{
    pthread_mutex_lock(&t->lock);
    t->ready = ready;
    t->finished = finished;
    t->stop = stop;
    pthread_cond_signal(&t->cond);
    pthread_mutex_unlock(&t->lock);
}

/* Waits for the hasher to end (after it hashed everything, unless stopped). */
static void hasher_join(hasher *t)
{
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->lock);
}

/* A little-endian 64-bit word (a chunk table entry). lds__ld64's shifted byte form compiles
   to one load; the byte loop this replaced did not (gcc 12: eight loads, shifts and ors per
   entry, most of the delta plan's time over a 2 GiB file's 524,288 entries). */
static inline uint64_t lds__ld64_le(const unsigned char *b)
{
    return lds__ld64(b);
}

/* Format 1.1 in the single reader: each chunk hashed piece by piece as its bytes
 * arrive (while they are in cache, as the 1.0 checksum is), its digest kept. */
typedef struct chunk_hashes {
    bool on;
    uint64_t next;      /* chunks [0, next) are hashed */
    uint64_t done;      /* payload bytes hashed so far */
    uint64_t *computed; /* chunk_count entries */
    XXH3_state_t *hs;   /* the chunk `next`, begun */
} chunk_hashes;

static void hash_chunks_done(load_ctx *c, chunk_hashes *ch, const unsigned char *p, size_t received)
{
    uint64_t s, e;
    while (ch->next < c->hdr.chunk_count && lds_chunk_range(&c->hdr, ch->next, &s, &e) == LDS_OK &&
           ch->done < received) {
        uint64_t to = e < received ? e : received;
        lds__xxh3_update(ch->hs, p + ch->done, (size_t)(to - ch->done));
        ch->done = to;
        if (to < e)
            return;
        ch->computed[ch->next++] = XXH3_64bits_digest(ch->hs);
        XXH3_64bits_reset(ch->hs);
    }
}

/* The table (the payload's last 8 x chunk_count bytes, all read) against the header,
 * then each chunk's hash against it: lds_chunk_verify names the first bad one. */
static lds_status verify_chunks(load_ctx *c, const chunk_hashes *ch, const unsigned char *p)
{
    const lds_header *h = &c->hdr;
    const unsigned char *table = p + h->chunk_table_offset;
    lds_status st = lds_chunk_table_check(h, table, (size_t)(h->chunk_count * 8), c->err);
    for (uint64_t k = 0; st == LDS_OK && k < h->chunk_count; k++) {
        uint64_t s, e;
        if (k >= ch->next || lds_chunk_range(h, k, &s, &e) != LDS_OK)
            st = lds__load_fail(c->err, LDS_E_TRUNCATED, "payload", c->base + LDS_HEADER_SIZE, 0,
                                NULL, "chunk %llu was not read", (unsigned long long)k);
        else if (ch->computed[k] != lds__ld64_le(table + k * 8))
            st = lds_chunk_verify(h, table, k, p + s, (size_t)(e - s), c->err);
    }
    if (st != LDS_OK) {
        lds__error_rebase(c->err, c->base);
        return st;
    }
    c->chunks_verified = true;
    return LDS_OK;
}

/*
 * The read loop: bounded by the known length (or, unknown, by max_payload_bytes),
 * never by the capacity; chunked; each chunk hashed right after it arrives
 * (here, or on the hasher thread while the next chunk is read), lagging 8
 * bytes behind so that the stored checksum is never hashed.
 */
static lds_status read_payload(load_ctx *c, lds__source *src, payload_buf *b, uint64_t length,
                               size_t *received_out, bool *hashed, uint64_t *hash)
{
    bool known = length != LDS_LENGTH_UNKNOWN;
    size_t limit = known                               ? (size_t)length
                   : c->o.max_payload_bytes < SIZE_MAX ? (size_t)c->o.max_payload_bytes
                                                       : SIZE_MAX;
    bool hashing = c->o.verify_checksum && c->o.hash_while_reading;
    /* Format 1.1: each chunk is hashed as soon as its last byte arrives, and the
       hashes compared once the table (the payload's end) is in (verify_chunks). */
    chunk_hashes ch = {0};
    if (hashing && lds_header_chunked(&c->hdr) && known) {
        hashing = false;
        ch.on = true;
        ch.computed = malloc((size_t)c->hdr.chunk_count * sizeof(uint64_t) + 1);
        ch.hs = XXH3_createState();
        if (ch.computed == NULL || ch.hs == NULL) {
            free(ch.computed);
            XXH3_freeState(ch.hs);
            return lds__load_fail(c->err, LDS_E_NOMEM, "payload", c->base + LDS_HEADER_SIZE, 0,
                                  NULL, "cannot allocate %llu chunk hashes",
                                  (unsigned long long)c->hdr.chunk_count);
        }
        XXH3_64bits_reset(ch.hs);
    }
    XXH3_state_t *hs = NULL;
    if (hashing) {
        hs = XXH3_createState();
        if (hs == NULL)
            return lds__load_fail(c->err, LDS_E_NOMEM, "payload", c->base + LDS_HEADER_SIZE, 0,
                                  NULL, "cannot allocate the hash state");
        XXH3_64bits_reset(hs);
    }
    /* Worth a thread only when the buffer is fixed and holds several chunks. */
    hasher th;
    bool threaded = hashing && c->o.hash_thread && !b->growable && b->cap >= limit &&
                    limit / 4 >= c->chunk && hasher_start(&th, b->ptr, hs);
    c->info.hashed_on_thread = threaded;
    c->info.read_threads = 1;
    lds_status st = LDS_OK;
    size_t received = 0, done_hash = 0;
    uint64_t payload_at = c->base + LDS_HEADER_SIZE;
    while (received < limit) {
        if (cancelled(c)) {
            st = lds__load_fail(c->err, LDS_E_CANCELLED, "payload", payload_at + received, 0, NULL,
                                "cancelled after %zu payload bytes", received);
            goto out;
        }
        if (received == b->cap) {
            st = b->growable
                     ? grow(c, b, received, limit)
                     : lds__load_fail(c->err, LDS_E_NOMEM, "payload", payload_at, 0, NULL,
                                      "the rental holds %zu bytes, %zu needed", b->cap, limit);
            if (st != LDS_OK)
                goto out;
        }
        size_t n = c->chunk;
        if (n > b->cap - received)
            n = b->cap - received;
        if (n > limit - received)
            n = limit - received;
        size_t got = 0;
        st = lds__source_read(src, b->ptr + received, n, &got, c->err);
        if (st != LDS_OK)
            goto out;
        if (got == 0)
            break;
        received += got;
        c->info.payload_bytes = received;
        if (ch.on)
            hash_chunks_done(c, &ch, b->ptr, received);
        if (hashing && received > LDS_CHECKSUM_SIZE + done_hash) {
            size_t to = received - LDS_CHECKSUM_SIZE;
            if (threaded)
                hasher_publish(&th, to, false, false);
            else
                lds__xxh3_update(hs, b->ptr + done_hash, to - done_hash);
            done_hash = to;
        }
        if (c->o.progress != NULL)
            c->o.progress(received, known ? length : LDS_LENGTH_UNKNOWN, c->o.callback_ctx);
    }
    if (known && received < length) {
        st = lds__load_fail(c->err, LDS_E_TRUNCATED, "payload", payload_at + received, 0, NULL,
                            "the input ended after %zu of the %llu declared payload bytes",
                            received, (unsigned long long)length);
        goto out;
    }
    if (!known && received == limit) {
        unsigned char probe;
        size_t got = 0;
        st = lds__source_read(src, &probe, 1, &got, c->err);
        if (st == LDS_OK && got != 0)
            st = lds__load_fail(c->err, LDS_E_LIMIT, "payload", payload_at + received, 0, NULL,
                                "the payload exceeds max_payload_bytes (%zu bytes)", limit);
        if (st != LDS_OK)
            goto out;
    }
    st = lds__source_expect_end(src, c->err);
    if (st != LDS_OK)
        goto out;
    if (threaded) {
        hasher_publish(&th, done_hash, true, false);
        hasher_join(&th);
        threaded = false;
    }
    if (ch.on && (st = verify_chunks(c, &ch, b->ptr)) != LDS_OK)
        goto out;
    *received_out = received;
    *hashed = hashing && received >= LDS_CHECKSUM_SIZE;
    *hash = *hashed ? XXH3_64bits_digest(hs) : 0;
out:
    free(ch.computed);
    if (ch.hs != NULL)
        XXH3_freeState(ch.hs);
    if (threaded) {
        /* Stop it before the caller lets the buffer go. */
        hasher_publish(&th, done_hash, true, true);
        hasher_join(&th);
    }
    XXH3_freeState(hs);
    return st;
}

/* What the transport knows about the input, found before reading. */
typedef struct transport {
    bool has_size; /* a regular file: its size and our position in it */
    uint64_t size;
    uint64_t pos;
    bool no_pool;  /* memory path: decode into our own buffer, never rent */
    lds__url *url; /* an HTTP(S) body: Content-Length, once the body began */
} transport;

/* An uncompressed HTTP body's Content-Length against the declared length, before
 * renting: a shorter body cannot hold the payload (truncated), a longer one holds
 * bytes after it (trailing). Both numbers are named. */
static lds_status check_content_length(load_ctx *c, const transport *t, uint64_t declared,
                                       bool *known, uint64_t *implied)
{
    uint64_t cl = 0;
    *known = lds__url_length(t->url, &cl);
    *implied = cl >= LDS_HEADER_SIZE ? cl - LDS_HEADER_SIZE : 0;
    if (!*known || declared == LDS_LENGTH_UNKNOWN || declared == *implied)
        return LDS_OK;
    bool shorter = cl < LDS_HEADER_SIZE || *implied < declared;
    return lds__load_fail(
        c->err, shorter ? LDS_E_TRUNCATED : LDS_E_TRAILING, "http.content_length", 16, 0, NULL,
        "%s: Content-Length %llu %s the %d-byte header and the %llu payload "
        "bytes it declares (%llu)",
        lds__url_shown(t->url), (unsigned long long)cl, shorter ? "is short of" : "exceeds",
        LDS_HEADER_SIZE, (unsigned long long)declared,
        (unsigned long long)(declared + LDS_HEADER_SIZE));
}

/* Readers for this load: several only for a rental filled from a regular file read
 * through an fd, uncompressed, whose position is right after the header. */
static unsigned read_threads_for(const load_ctx *c, const lds__source *src, const transport *t,
                                 const payload_buf *b, uint64_t length)
{
    if (c->o.read_threads == 1 || src->kind != LDS__SRC_FD || src->compressed || !t->has_size ||
        b->h.kind != HOLD_LEASE || length == LDS_LENGTH_UNKNOWN || length == 0 ||
        src->peek_pos != src->peek_len || b->cap < length)
        return 1;
    unsigned n = c->o.read_threads == 0 ? lds__read_threads_auto((size_t)length)
                 : c->o.read_threads > LDS__READ_THREADS_MAX ? LDS__READ_THREADS_MAX
                                                             : c->o.read_threads;
    if (n <= 1)
        return 1;
    off_t at = lseek(src->fd, 0, SEEK_CUR);
    if (at < 0 || (uint64_t)at != t->pos + LDS_HEADER_SIZE)
        return 1;
    return n;
}

/* The payload read by `threads` readers (loader/parallel.c); then, as the read loop does,
 * the check that nothing follows it, through the source at the payload's end. */
/* Format 1.1 under several readers: the table is read and checked first (a copy of its
 * own), then each chunk is verified by the reader that completed it (ranges are chunks). */
typedef struct chunk_check {
    const lds_header *h;
    const unsigned char *table; /* checked with lds_chunk_table_check */
    uint64_t base;              /* stream offset of the header, for error offsets */
} chunk_check;

static lds_status verify_range_chunk(void *ctx, size_t offset, const unsigned char *p, size_t n,
                                     lds_error *err)
{
    const chunk_check *cc = ctx;
    uint64_t cb = cc->h->chunk_bytes;
    if (offset % cb != 0)
        return lds__load_fail(err, LDS_E_INVALID_ARG, "chunk", cc->base + LDS_HEADER_SIZE + offset,
                              0, NULL, "range %zu+%zu does not start a chunk", offset, n);
    /* Ranges are whole chunks (one, or several small ones); the table's own bytes are
       checked against the copy at the end. */
    for (uint64_t k = offset / cb; k < cc->h->chunk_count; k++) {
        uint64_t s, e;
        if (lds_chunk_range(cc->h, k, &s, &e) != LDS_OK || s >= offset + n)
            break;
        if (e > offset + n)
            return lds__load_fail(err, LDS_E_INVALID_ARG, "chunk",
                                  cc->base + LDS_HEADER_SIZE + offset, 0, NULL,
                                  "range %zu+%zu ends inside chunk %llu", offset, n,
                                  (unsigned long long)k);
        const unsigned char *q = p + (s - offset);
        if (lds__xxh3(q, (size_t)(e - s)) == lds__ld64_le(cc->table + k * 8))
            continue;
        lds_status st = lds_chunk_verify(cc->h, cc->table, k, q, (size_t)(e - s), err);
        if (st != LDS_OK)
            lds__error_rebase(err, cc->base);
        return st;
    }
    return LDS_OK;
}

/* Bytes per parallel range of a 1.1 payload: whole chunks, each verified where it was
 * read; one chunk, or several small ones up to 8 MiB (a pread per 4 KiB chunk would cost
 * more than its hashing), a power of two, but small enough that each reader gets about
 * four ranges. */
static size_t chunk_range(const lds_header *h, size_t length, unsigned threads)
{
    size_t cb = h->chunk_bytes;
    if (cb >= LDS__READ_RANGE_DEFAULT)
        return cb;
    size_t want = length / ((size_t)(threads > 0 ? threads : 1) * 4), r = cb;
    while (r * 2 <= want && r * 2 <= LDS__READ_RANGE_DEFAULT)
        r *= 2;
    return r;
}

/* verify_range_chunk for a range its reader hashed piece by piece: `computed` is the
 * XXH3-64 of the range's bytes below the chunk table (the job's hash_end), i.e. of its
 * chunk; the table's own bytes are compared with the copy read first, at the end. */
static lds_status verify_range_hashed(void *ctx, size_t offset, const unsigned char *p, size_t n,
                                      uint64_t computed, lds_error *err)
{
    const chunk_check *cc = ctx;
    uint64_t k = offset / cc->h->chunk_bytes, s, e;
    if (k >= cc->h->chunk_count || lds_chunk_range(cc->h, k, &s, &e) != LDS_OK)
        return LDS_OK;
    /* `computed` is one chunk's hash only when the range is that one chunk (or it and the
       table after it); a range of several small chunks (ADR 0048) is checked chunk by chunk */
    if (s != offset || (e != offset + n && e != cc->h->chunk_table_offset))
        return verify_range_chunk(ctx, offset, p, n, err); /* names the bad range */
    uint64_t stored = lds__ld64_le(cc->table + k * 8);
    if (computed == stored)
        return LDS_OK;
    /* As lds_chunk_verify words it (format/chunks.c), from the hash already computed. */
    return lds__load_fail(err, LDS_E_CHECKSUM, "chunk", cc->base + LDS_HEADER_SIZE + s, 0, NULL,
                          "checksum of chunk %llu (payload bytes %llu..%llu): stored %016llx, "
                          "computed %016llx",
                          (unsigned long long)k, (unsigned long long)s, (unsigned long long)(e - 1),
                          (unsigned long long)stored, (unsigned long long)computed);
}

/* Reads the chunk table (payload bytes [chunk_table_offset, length)) into `out`. */
static lds_status read_table(load_ctx *c, int fd, uint64_t file_at, size_t length,
                             unsigned char *out, size_t n)
{
    size_t got = 0;
    uint64_t at = c->hdr.chunk_table_offset;
    while (got < n) {
        ssize_t r = pread(fd, out + got, n - got, (off_t)(file_at + at + got));
        if (r > 0) {
            got += (size_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            return lds__load_fail(c->err, LDS_E_TRUNCATED, "payload",
                                  c->base + LDS_HEADER_SIZE + at + got, 0, NULL,
                                  "the input ended after %llu of the %zu declared payload bytes",
                                  (unsigned long long)(at + got), length);
        return lds__load_fail(c->err, LDS_E_IO, "chunk_table", c->base + LDS_HEADER_SIZE + at + got,
                              errno, NULL, "read of the chunk table failed: %s", strerror(errno));
    }
    lds_status st = lds_chunk_table_check(&c->hdr, out, n, c->err);
    if (st != LDS_OK)
        lds__error_rebase(c->err, c->base);
    return st;
}

/* The payload read by `threads` readers (loader/parallel.c); then, as the read loop does,
 * the check that nothing follows it, through the source at the payload's end. */
static lds_status read_parallel(load_ctx *c, lds__source *src, const transport *t, payload_buf *b,
                                size_t length, unsigned threads, size_t *received, bool *hashed,
                                uint64_t *hash)
{
    bool verifying = c->o.verify_checksum && c->o.hash_while_reading;
    bool chunked = verifying && lds_header_chunked(&c->hdr);
    lds__pread_job j = {
        .fd = src->fd,
        .file_at = t->pos + LDS_HEADER_SIZE,
        .payload_at = c->base + LDS_HEADER_SIZE,
        .stream_at = src->raw_bytes,
        .dst = b->ptr,
        .length = length,
        .range = c->o.chunk_bytes != 0 ? c->chunk : LDS__READ_RANGE_DEFAULT,
        .threads = threads,
        .hash = verifying && !chunked,
        .verify = NULL,
        .opts = &c->o,
    };
    unsigned char *table = NULL;
    size_t table_n = chunked ? (size_t)c->hdr.chunk_count * 8 : 0;
    chunk_check cc = {.h = &c->hdr, .base = c->base};
    if (chunked) {
        table = malloc(table_n + 1);
        if (table == NULL)
            return lds__load_fail(c->err, LDS_E_NOMEM, "chunk_table", c->base + LDS_HEADER_SIZE, 0,
                                  NULL, "cannot allocate the %zu-byte chunk table", table_n);
        lds_status st = read_table(c, src->fd, j.file_at, length, table, table_n);
        if (st != LDS_OK) {
            free(table);
            return st;
        }
        cc.table = table;
        j.range = chunk_range(&c->hdr, length, threads);
        j.verify = verify_range_chunk;
        j.verify_hashed = verify_range_hashed;
        /* Each chunk read whole, then hashed (ADR 0040 measured 1 MiB pieces hashed as
         * read: no faster here); the piece scheme stays for benches and tests. */
        j.piece = lds__load_piece_override;
        j.hash_end = (size_t)c->hdr.chunk_table_offset;
        j.verify_ctx = &cc;
    }
    lds_status st = lds__pread_payload(&j, c->err);
    c->info.read_threads = j.threads_used;
    if (st == LDS_OK && chunked && memcmp(b->ptr + c->hdr.chunk_table_offset, table, table_n) != 0)
        st = lds__load_fail(c->err, LDS_E_CHECKSUM, "chunk_table",
                            c->base + LDS_HEADER_SIZE + c->hdr.chunk_table_offset, 0, NULL,
                            "the chunk table changed while the file was read");
    free(table);
    if (st != LDS_OK)
        return st;
    c->chunks_verified = chunked;
    c->info.payload_bytes = length;
    uint64_t end = t->pos + LDS_HEADER_SIZE + length;
    if (lseek(src->fd, (off_t)end, SEEK_SET) < 0)
        return lds__load_fail(c->err, LDS_E_IO, "stream", src->raw_bytes + length, errno, NULL,
                              "cannot seek past the payload: %s", strerror(errno));
    src->raw_bytes += length;
    src->out_bytes += length;
    st = lds__source_expect_end(src, c->err);
    if (st != LDS_OK)
        return st;
    *received = length;
    *hashed = j.hashed;
    *hash = j.hash_value;
    return LDS_OK;
}

/* ==== the ranged fetch of an HTTP(S) body (docs/adr/0041) ==================== */

/* The automatic connection count (url_connections 0) for a payload of `length` bytes. */
static unsigned url_connections_auto(uint64_t length)
{
    if (length < LDS__URL_AUTO_MIN_BYTES)
        return 1;
    return LDS__URL_AUTO_CONNECTIONS;
}

/* Connections for this URL load: several only for an uncompressed body of known length
 * read into a rental, whose first response allows ranges. */
static unsigned url_connections_for(const load_ctx *c, const lds__source *src, const transport *t,
                                    const payload_buf *b, uint64_t length)
{
    if (t->url == NULL || src->compressed || b->h.kind != HOLD_LEASE ||
        length == LDS_LENGTH_UNKNOWN || length == 0 || b->cap < length ||
        src->peek_pos != src->peek_len || c->o.url_connections == 1)
        return 1;
    unsigned k = c->o.url_connections == 0                         ? url_connections_auto(length)
                 : c->o.url_connections > LDS__URL_CONNECTIONS_MAX ? LDS__URL_CONNECTIONS_MAX
                                                                    : c->o.url_connections;
    if (k <= 1 || !lds__url_ranges_ok(t->url))
        return 1;
    return k;
}

/* Format 1.1 under ranges: the table is fetched first and checked against the header;
 * each range (whole chunks) is verified as it completes, or when the table arrives. */
typedef struct range_check {
    load_ctx *c;
    const unsigned char *payload;
    const lds__url_range *ranges;
    size_t count;
    size_t table_unit; /* the range holding the chunk table; SIZE_MAX: not verifying */
    bool table_ok;
    bool *pending; /* completed before the table came */
} range_check;

static lds_status verify_range(range_check *rc, size_t unit, lds_error *err)
{
    const lds_header *h = &rc->c->hdr;
    const unsigned char *table = rc->payload + h->chunk_table_offset;
    uint64_t s0 = rc->ranges[unit].offset - LDS_HEADER_SIZE;
    uint64_t e0 = s0 + rc->ranges[unit].length;
    for (uint64_t k = s0 / h->chunk_bytes; k < h->chunk_count; k++) {
        uint64_t s, e;
        if (lds_chunk_range(h, k, &s, &e) != LDS_OK || s >= e0)
            break;
        if (lds__xxh3(rc->payload + s, (size_t)(e - s)) != lds__ld64_le(table + k * 8))
            return lds_chunk_verify(h, table, k, rc->payload + s, (size_t)(e - s), err);
    }
    return LDS_OK;
}

static lds_status range_done(void *ctx, size_t unit, lds_error *err)
{
    range_check *rc = ctx;
    if (rc->table_unit == SIZE_MAX)
        return LDS_OK;
    const lds_header *h = &rc->c->hdr;
    if (unit != rc->table_unit) {
        if (!rc->table_ok) {
            rc->pending[unit] = true;
            return LDS_OK;
        }
        return verify_range(rc, unit, err);
    }
    lds_status st = lds_chunk_table_check(h, rc->payload + h->chunk_table_offset,
                                          (size_t)(h->chunk_count * 8), err);
    if (st != LDS_OK)
        return st;
    rc->table_ok = true;
    for (size_t i = 0; i < rc->count; i++)
        if (rc->pending[i] && (st = verify_range(rc, i, err)) != LDS_OK)
            return st;
    return LDS_OK;
}

/* The payload fetched by `k` concurrent Range requests straight into the rental. On
 * *fallback (the server answered a range with the whole file) nothing is taken: the
 * caller reads the first response as one stream. */
static lds_status read_ranges(load_ctx *c, lds__source *src, const transport *t, payload_buf *b,
                              size_t length, unsigned k, size_t *received, bool *fallback)
{
    *fallback = false;
    bool chunked = c->o.verify_checksum && c->o.hash_while_reading &&
                   lds_header_chunked(&c->hdr) && c->hdr.chunk_table_offset < length;
    /* A range is about a quarter of one connection's share, 64 KiB to 8 MiB; with chunks,
       whole chunks (at least one). */
    size_t unit = length / ((size_t)k * 4);
    unit = unit < LDS__URL_RANGE_MIN ? LDS__URL_RANGE_MIN
           : unit > LDS__URL_RANGE_MAX ? LDS__URL_RANGE_MAX
                                       : unit & ~(LDS__URL_RANGE_MIN - 1);
    size_t body_end = chunked ? (size_t)c->hdr.chunk_table_offset : length;
    if (chunked) {
        size_t cb = c->hdr.chunk_bytes;
        unit = unit <= cb ? cb : unit / cb * cb;
    }
    size_t count = (body_end + unit - 1) / unit + (chunked ? 1 : 0);
    lds__url_range *ranges = calloc(count, sizeof *ranges);
    bool *pending = calloc(count, sizeof *pending);
    if (ranges == NULL || pending == NULL) {
        free(ranges);
        free(pending);
        return lds__load_fail(c->err, LDS_E_NOMEM, "payload", c->base + LDS_HEADER_SIZE, 0, NULL,
                              "cannot allocate %zu ranges", count);
    }
    size_t n = 0;
    for (size_t at = 0; at < body_end; at += unit, n++) {
        ranges[n].offset = LDS_HEADER_SIZE + at;
        ranges[n].length = body_end - at < unit ? body_end - at : unit;
    }
    range_check rc = {.c = c, .payload = b->ptr, .ranges = ranges, .table_unit = SIZE_MAX,
                      .pending = pending};
    if (chunked) {
        /* The table last in the array, fetched first: move it to the front. */
        memmove(ranges + 1, ranges, n * sizeof *ranges);
        ranges[0].offset = LDS_HEADER_SIZE + body_end;
        ranges[0].length = length - body_end;
        n++;
        rc.table_unit = 0;
    }
    rc.count = n;
    lds__url_fetch f = {
        .dst = b->ptr,
        .dst_at = LDS_HEADER_SIZE,
        .ranges = ranges,
        .count = n,
        .connections = k,
        .done = range_done,
        .done_ctx = &rc,
        .total = length,
    };
    lds_status st = lds__url_fetch_ranges(t->url, &f, c->err);
    c->info.url_connections = f.connections_used;
    free(ranges);
    free(pending);
    if (st != LDS_OK) {
        *fallback = f.no_ranges;
        return st;
    }
    c->chunks_verified = chunked;
    c->info.payload_bytes = length;
    c->info.read_threads = 1;
    /* The Content-Length (header + payload, checked before renting) ends the body. */
    src->raw_bytes += length;
    src->out_bytes += length;
    *received = length;
    return LDS_OK;
}

static lds_status load_stream(load_ctx *c, lds__source *src, const transport *t)
{
    c->base = t->has_size ? t->pos : 0;
    lds_status st = lds__source_open(src, c->err);
    c->info.compressed = src->compressed;
    if (st != LDS_OK)
        return st;
    if (src->compressed)
        c->base = 0; /* offsets now count decoded bytes */
    if (src->compressed && src->frame_content_size != ZSTD_CONTENTSIZE_UNKNOWN &&
        src->frame_content_size > LDS_HEADER_SIZE &&
        src->frame_content_size - LDS_HEADER_SIZE > c->o.max_payload_bytes)
        /* Refused from the frame header alone, before decoding a byte: otherwise whether
         * the decoder's own end-of-frame check or ours fires first would depend on how
         * much of the frame one read delivered. */
        return lds__load_fail(c->err, LDS_E_LIMIT, "zstd.frame_content_size", 0, 0, NULL,
                              "the zstd frame declares %llu bytes of content, above "
                              "max_payload_bytes (%llu) plus the %d-byte header",
                              (unsigned long long)src->frame_content_size,
                              (unsigned long long)c->o.max_payload_bytes, LDS_HEADER_SIZE);

    unsigned char hdr[LDS_HEADER_SIZE];
    size_t got = 0;
    st = lds__source_read_full(src, hdr, sizeof hdr, &got, c->err);
    if (st != LDS_OK)
        return st;
    lds_header h;
    st = decode_header(c, hdr, got, &h);
    if (st != LDS_OK)
        return st;

    uint64_t length = LDS_LENGTH_UNKNOWN;
    if (src->compressed && src->frame_content_size != ZSTD_CONTENTSIZE_UNKNOWN) {
        uint64_t fcs = src->frame_content_size;
        st = choose_length(c, h.payload_length, true,
                           fcs >= LDS_HEADER_SIZE ? fcs - LDS_HEADER_SIZE : 0,
                           "zstd frame content size", fcs, &length);
        if (st == LDS_OK && fcs < LDS_HEADER_SIZE)
            st = lds__load_fail(c->err, LDS_E_LENGTH_MISMATCH, "zstd.frame_content_size", 0, 0,
                                NULL, "the zstd frame content size %llu is below the header size",
                                (unsigned long long)fcs);
    } else if (!src->compressed && t->url != NULL) {
        bool known = false;
        uint64_t implied = 0;
        st = check_content_length(c, t, h.payload_length, &known, &implied);
        if (st == LDS_OK)
            st = choose_length(c, h.payload_length, known, implied, "Content-Length",
                               implied + LDS_HEADER_SIZE, &length);
    } else if (!src->compressed && t->has_size) {
        uint64_t need = t->pos + LDS_HEADER_SIZE;
        st = choose_length(c, h.payload_length, true, t->size >= need ? t->size - need : 0,
                           "file size", t->size, &length);
    } else {
        st = choose_length(c, h.payload_length, false, 0, NULL, 0, &length);
    }
    if (st != LDS_OK)
        return st;

    /* Cancelled before the payload: stop here, so that a load cancelled before it began
     * never rents (a rental taken only to be handed back would warm the pool's counters
     * and, for a new size class, map memory for nothing). */
    if (cancelled(c))
        return lds__load_fail(c->err, LDS_E_CANCELLED, "payload", c->base + LDS_HEADER_SIZE, 0,
                              NULL, "cancelled before the payload was read");

    payload_buf b = {0};
    if (t->no_pool) {
        b.growable = true;
        c->info.path = LDS_LOAD_MEMORY;
    } else if (length != LDS_LENGTH_UNKNOWN) {
        lds_pool *pool = c->o.pool != NULL ? c->o.pool : lds_pool_shared();
        lds_lease lease;
        st = lds_pool_rent(pool, length > 0 ? (size_t)length : 1, &lease);
        if (st == LDS_OK) {
            b.ptr = lease.ptr;
            b.cap = lease.capacity;
            b.h.kind = HOLD_LEASE;
            b.h.pool = pool;
            b.h.lease = lease;
            c->info.path = LDS_LOAD_POOLED;
        } else if (st == LDS_E_NOMEM) {
            /* A length the pool cannot back (a lie, most likely): grow as bytes arrive. */
            b.growable = true;
            c->info.path = LDS_LOAD_GROWABLE;
        } else {
            return lds__load_fail(c->err, st, "payload", c->base + LDS_HEADER_SIZE, 0, NULL,
                                  "the pool refused a rental of %llu bytes: %s",
                                  (unsigned long long)length, lds_strerror(st));
        }
    } else {
        b.growable = true;
        c->info.path = LDS_LOAD_GROWABLE;
    }

    size_t received = 0;
    bool hashed = false;
    uint64_t hash = 0;
    if (b.h.kind == HOLD_LEASE) {
        int pages = lds__pool_lease_pages(b.h.pool, &b.h.lease);
        c->info.huge_pages = pages == 1;
        c->info.huge_pages_fallback = pages == 2;
    }
    unsigned threads = read_threads_for(c, src, t, &b, length);
    unsigned connections = url_connections_for(c, src, t, &b, length);
    bool fallback = false;
    if (connections > 1)
        st = read_ranges(c, src, t, &b, (size_t)length, connections, &received, &fallback);
    else if (threads > 1)
        st = read_parallel(c, src, t, &b, (size_t)length, threads, &received, &hashed, &hash);
    if (fallback) {
        /* The server ignores ranges: the first response, as one stream. */
        c->info.url_connections = 1;
    }
    if ((connections <= 1 && threads <= 1) || fallback)
        st = read_payload(c, src, &b, length, &received, &hashed, &hash);
    c->info.capacity_bytes = b.cap;
    c->info.stream_bytes = src->raw_bytes;
    if (st != LDS_OK) {
        hold_release(&b.h);
        return st;
    }
    if (b.growable && b.ptr != NULL) {
        /* Give back the address space beyond the payload (in place, never moves). */
        size_t keep = page_round(received > 0 ? received : 1);
        void *same;
        if (keep < b.cap && lds__os_mremap(b.ptr, b.cap, keep, 0, &same) == 0) {
            b.cap = keep;
            b.h.map_len = keep;
            c->info.capacity_bytes = keep;
        }
    }
    return parse(c, b.ptr, received, &b.h, hashed, hash);
}

void (*lds__load_mapped_hook)(int fd, const char *stage);

/* How messages name the mapped file. */
static const char *file_name(const load_ctx *c, char *buf, size_t n)
{
    if (c->name != NULL)
        return c->name;
    snprintf(buf, n, "fd %d", c->fd);
    return buf;
}

/* The mapped path after the mmap: header, cross-checks, parse. Every read of
 * the mapping happens here, inside the caller's fault window. */
static lds_status mapped_parse(load_ctx *c, unsigned char *p, size_t size, const transport *t,
                               bool *fall_back)
{
    hold h = {.kind = HOLD_MAP, .map = p, .map_len = size};
    if (lds__load_mapped_hook != NULL)
        lds__load_mapped_hook(c->fd, "mapped");
    const unsigned char *at = p + t->pos;
    size_t n = size - (size_t)t->pos;
    if (lds__is_zstd(at, n)) {
        hold_release(&h);
        *fall_back = true;
        return LDS_OK;
    }
    c->base = t->pos;
    c->info.path = LDS_LOAD_MAPPED;
    c->info.stream_bytes = n;
    c->info.capacity_bytes = size;
    lds_header hd;
    lds_status st = decode_header(c, at, n, &hd);
    uint64_t length = 0;
    if (st == LDS_OK)
        st = choose_length(c, hd.payload_length, true, n - LDS_HEADER_SIZE, "file size", t->size,
                           &length);
    if (st == LDS_OK && cancelled(c))
        st = lds__load_fail(c->err, LDS_E_CANCELLED, "payload", c->base + LDS_HEADER_SIZE, 0, NULL,
                            "cancelled before parsing the mapped payload");
    if (st != LDS_OK) {
        hold_release(&h);
        return st;
    }
    c->info.payload_bytes = length;
    if (c->o.progress != NULL)
        c->o.progress(length, length, c->o.callback_ctx);
    c->mapped = true;
    return parse(c, at + LDS_HEADER_SIZE, (size_t)length, &h, false, 0);
}

/* A SIGBUS or SIGSEGV while the mapping was read: the file shrank or changed underneath. */
static lds_status mapped_fault(load_ctx *c, const lds__fault_window *w, unsigned char *p,
                               size_t size)
{
    if (w->cleanup != NULL)
        w->cleanup(w->cleanup_arg); /* the index the parser was building */
    free(c->pending_kept);
    c->pending_kept = NULL;
    (void)lds__os_munmap(p, size);
    uintptr_t a = (uintptr_t)w->addr, lo = (uintptr_t)p;
    uint64_t at = a >= lo && a - lo < size ? (uint64_t)(a - lo) : 0; /* file offset */
    uint64_t now = 0;
    bool known = lds__os_regular_size(c->fd, &now) == 0;
    char buf[32];
    const char *name = file_name(c, buf, sizeof buf);
    c->info.path = LDS_LOAD_MAPPED;
    bool in_map = a >= lo && a - lo < size; /* else the offset is unknown: none printed */
    if (w->sig == SIGBUS || (known && now < size))
        return lds__error_fill(c->err, LDS_E_TRUNCATED, "file", at, in_map, 0, 0, NULL,
                               "%s shrank from %zu to %llu bytes while it was mapped and "
                               "validated (%s reading it)",
                               name, size, (unsigned long long)now,
                               w->sig == SIGBUS ? "SIGBUS" : "SIGSEGV");
    return lds__error_fill(c->err, LDS_E_IO, "file", at, in_map, 0, 0, NULL,
                           "%s changed while it was mapped and validated (SIGSEGV reading it)",
                           name);
}

/* The mapped path. Sets *fall_back (and returns LDS_OK) when the read path
 * must run instead: the mapping failed, or the file is compressed. The header
 * and the parse run inside a fault window, so a file truncated or rewritten
 * underneath ends the load with an error instead of the process; the parser
 * copies the key offsets it validates (copy_key_offsets), and the file's size
 * is checked again after the parse. Accesses after the load are not covered
 * (the hazard documented at lds_load_options.use_mmap). */
static lds_status load_mapped(load_ctx *c, int fd, const transport *t, bool *fall_back)
{
    *fall_back = false;
    if (t->size > SIZE_MAX || t->size == 0 || t->pos >= t->size) {
        *fall_back = true;
        return LDS_OK;
    }
    size_t size = (size_t)t->size;
    int flags = MAP_PRIVATE | (c->o.populate ? MAP_POPULATE : 0);
    unsigned char *p = lds__load_mmap(NULL, size, PROT_READ, flags, fd, 0);
    if (p == MAP_FAILED) {
        c->info.mmap_fallback = true;
        *fall_back = true;
        return LDS_OK;
    }
    c->fd = fd;
    lds__fault_window w;
    bool guarded = lds__fault_install();
    if (guarded && sigsetjmp(w.jb, 1) != 0)
        return mapped_fault(c, &w, p, size);
    if (guarded)
        lds__fault_enter(&w);
    lds_status st = mapped_parse(c, p, size, t, fall_back);
    if (guarded)
        lds__fault_leave(&w);
    if (st != LDS_OK || *fall_back)
        return st;
    if (lds__load_mapped_hook != NULL)
        lds__load_mapped_hook(fd, "parsed");
    /* A shrink the parse did not run into leaves the pages an adopting index borrows
     * faulting later (a copy no longer needs the file). */
    uint64_t now;
    if (c->own == LDS_OWN_ADOPT && lds__os_regular_size(fd, &now) == 0 && now < t->size) {
        lds_index_free(*c->out);
        *c->out = NULL;
        char buf[32];
        return lds__load_fail(c->err, LDS_E_TRUNCATED, "file", now, 0, NULL,
                              "%s shrank from %llu to %llu bytes while it was being loaded",
                              file_name(c, buf, sizeof buf), (unsigned long long)t->size,
                              (unsigned long long)now);
    }
    return LDS_OK;
}

/* Position and size of a regular file behind `fd`, if it is one. */
static void probe_fd(int fd, off_t pos, transport *t)
{
    uint64_t size;
    if (fd >= 0 && pos >= 0 && lds__os_regular_size(fd, &size) == 0) {
        t->has_size = true;
        t->size = size;
        t->pos = (uint64_t)pos;
    }
}

static lds_status load_fd(load_ctx *c, int fd)
{
    transport t = {0};
    probe_fd(fd, lseek(fd, 0, SEEK_CUR), &t);
    if (t.has_size && c->o.use_mmap) {
        bool fall_back = false;
        lds_status st = load_mapped(c, fd, &t, &fall_back);
        if (!fall_back)
            return st;
    }
    lds__source src;
    lds__source_init(&src, LDS__SRC_FD, &c->o);
    src.fd = fd;
    lds_status st = load_stream(c, &src, &t);
    lds__source_close(&src);
    return st;
}

lds_status lds_load_path(const char *path, const lds_load_options *opts, lds_index **out,
                         lds_load_info *info, lds_error *err)
{
    load_ctx c;
    lds_status st = begin(&c, opts, out, info, err);
    if (st == LDS_OK && path == NULL)
        st = lds__load_fail(err, LDS_E_INVALID_ARG, "path", 0, 0, NULL, "the path is NULL");
    if (st != LDS_OK)
        return finish(&c, st, info);
    int fd = -1;
    int e = lds__os_open(path, O_RDONLY, &fd);
    if (e != 0) {
        /* a path that reads as a URL ("http:u:pw@h/x") is named without its password,
           redacted whole before the message cuts it */
        char shown[200];
        lds_url_redact(path, shown, sizeof shown);
        return finish(&c,
                      lds__load_fail(err, LDS_E_IO, "path", 0, e, NULL, "cannot open %s: %s", shown,
                                     strerror(e)),
                      info);
    }
    c.name = path;
    st = load_fd(&c, fd);
    close(fd);
    return finish(&c, st, info);
}

lds_status lds_load_fd(int fd, const lds_load_options *opts, lds_index **out, lds_load_info *info,
                       lds_error *err)
{
    load_ctx c;
    lds_status st = begin(&c, opts, out, info, err);
    if (st == LDS_OK && fd < 0)
        st = lds__load_fail(err, LDS_E_INVALID_ARG, "fd", 0, 0, NULL, "fd %d is not valid", fd);
    if (st == LDS_OK)
        st = load_fd(&c, fd);
    return finish(&c, st, info);
}

lds_status lds_load_file(FILE *f, const lds_load_options *opts, lds_index **out,
                         lds_load_info *info, lds_error *err)
{
    load_ctx c;
    lds_status st = begin(&c, opts, out, info, err);
    if (st == LDS_OK && f == NULL)
        st = lds__load_fail(err, LDS_E_INVALID_ARG, "file", 0, 0, NULL, "the FILE* is NULL");
    if (st != LDS_OK)
        return finish(&c, st, info);
    transport t = {0};
    probe_fd(fileno(f), ftello(f), &t);
    lds__source src;
    lds__source_init(&src, LDS__SRC_FILE, &c.o);
    src.file = f;
    st = load_stream(&c, &src, &t);
    lds__source_close(&src);
    return finish(&c, st, info);
}

lds_status lds_load_callback(lds_read_fn read, void *ctx, const lds_load_options *opts,
                             lds_index **out, lds_load_info *info, lds_error *err)
{
    load_ctx c;
    lds_status st = begin(&c, opts, out, info, err);
    if (st == LDS_OK && read == NULL)
        st =
            lds__load_fail(err, LDS_E_INVALID_ARG, "read", 0, 0, NULL, "the read callback is NULL");
    if (st != LDS_OK)
        return finish(&c, st, info);
    transport t = {0};
    lds__source src;
    lds__source_init(&src, LDS__SRC_CALLBACK, &c.o);
    src.fn = read;
    src.fn_ctx = ctx;
    st = load_stream(&c, &src, &t);
    lds__source_close(&src);
    return finish(&c, st, info);
}

lds_status lds_load_memory(const void *bytes, size_t n, bool copy, const lds_load_options *opts,
                           lds_index **out, lds_load_info *info, lds_error *err)
{
    load_ctx c;
    lds_status st = begin(&c, opts, out, info, err);
    if (st == LDS_OK && bytes == NULL && n > 0)
        st = lds__load_fail(err, LDS_E_INVALID_ARG, "bytes", 0, 0, NULL,
                            "NULL bytes with a length of %zu", n);
    if (st != LDS_OK)
        return finish(&c, st, info);
    const unsigned char *b = bytes;
    if (lds__is_zstd(b, n)) {
        /* A zstd frame: decode into a buffer of our own, never a rental. */
        transport t = {.no_pool = true};
        lds__source src;
        lds__source_init(&src, LDS__SRC_MEMORY, &c.o);
        src.mem = b;
        src.mem_len = n;
        st = load_stream(&c, &src, &t);
        lds__source_close(&src);
        return finish(&c, st, info);
    }
    c.info.path = LDS_LOAD_MEMORY;
    c.info.stream_bytes = n;
    c.info.capacity_bytes = n;
    c.own = copy ? LDS_OWN_COPY : LDS_OWN_ADOPT;
    c.info.ownership = c.own;
    lds_header h;
    st = decode_header(&c, b, n, &h);
    uint64_t length = 0;
    if (st == LDS_OK)
        st = choose_length(&c, h.payload_length, true, n - LDS_HEADER_SIZE, "memory size", n,
                           &length);
    if (st == LDS_OK && cancelled(&c))
        st = lds__load_fail(err, LDS_E_CANCELLED, "payload", LDS_HEADER_SIZE, 0, NULL,
                            "cancelled before parsing");
    if (st != LDS_OK)
        return finish(&c, st, info);
    c.info.payload_bytes = length;
    hold none = {.kind = HOLD_NONE};
    st = parse(&c, b + LDS_HEADER_SIZE, (size_t)length, &none, false, 0);
    return finish(&c, st, info);
}

/* Makes a failure's message name the URL ("GET URL: ..."), as the transport's own do,
 * keeping the status, field, offset and the rest of the detail. */
static void name_the_url(lds_error *err, lds_status st, const char *shown)
{
    if (err == NULL || err->size < sizeof *err || err->status != st ||
        strncmp(err->message, "GET ", 4) == 0)
        return;
    char text[sizeof err->message];
    memcpy(text, err->message, sizeof text);
    char tail[48];
    snprintf(tail, sizeof tail, " (at byte %llu)", (unsigned long long)err->offset);
    size_t n = strlen(text), t = strlen(tail);
    bool at_byte = n >= t && strcmp(text + n - t, tail) == 0;
    if (at_byte)
        text[n - t] = '\0';
    (void)lds__error_fill(err, st, err->field, err->offset, at_byte, err->line, err->sys_errno,
                          err->zstd_error, "GET %s: %s", shown, text);
}

lds_status lds_load_url(const char *url, const lds_load_options *opts, lds_index **out,
                        lds_load_info *info, lds_error *err)
{
    load_ctx c;
    lds_status st = begin(&c, opts, out, info, err);
    if (st == LDS_OK && url == NULL)
        st = lds__load_fail(err, LDS_E_INVALID_ARG, "url", 0, 0, NULL, "the URL is NULL");
    if (st != LDS_OK)
        return finish(&c, st, info);
    lds__url *u = NULL;
    st = lds__url_open(url, &c.o, &u, err);
    if (st != LDS_OK)
        return finish(&c, st, info);
    transport t = {.url = u};
    lds__source src;
    lds__source_init(&src, LDS__SRC_URL, &c.o);
    src.url = u;
    st = load_stream(&c, &src, &t);
    lds__source_close(&src);
    if (c.info.url_connections == 0 && c.info.read_threads > 0)
        c.info.url_connections = 1;
    c.info.http_status = lds__url_status(u);
    c.info.resumes = lds__url_resumes(u);
    if (st != LDS_OK)
        name_the_url(err, st, lds__url_shown(u));
    lds__url_close(u);
    return finish(&c, st, info);
}

/* ==== delta loads (docs/adr/0047) ========================================= */

void (*lds__delta_copy_hook)(uint64_t chunk, unsigned char *p, size_t n);
bool lds__delta_rehash = true;
bool lds__delta_rehash_kept = false;
void (*lds__delta_keep_hook)(uint64_t chunk, unsigned char *p, size_t n);

bool lds__index_take_lease(lds_index *idx, lds_pool **pool, lds_lease *lease)
{
    if (idx == NULL || idx->release != hold_release_cb || idx->release_ctx == NULL)
        return false;
    hold *h = idx->release_ctx;
    if (h->kind != HOLD_LEASE)
        return false;
    *pool = h->pool;
    *lease = h->lease;
    h->kind = HOLD_NONE;
    free(h);
    idx->release = NULL;
    idx->release_ctx = NULL;
    lds_index_free(idx);
    return true;
}

bool lds__delta_base_of(const lds_index *idx, lds__delta_base *out)
{
    memset(out, 0, sizeof *out);
    if (idx == NULL || idx->owned != NULL || idx->vectors == NULL || idx->chunk_bytes == 0 ||
        idx->chunk_count == 0 || idx->chunk_count > (idx->payload_length / 8))
        return false;
    out->payload = idx->vectors; /* payload offset 0: the vectors section is the first */
    out->length = idx->payload_length;
    out->table_offset = idx->payload_length - idx->chunk_count * 8;
    out->chunk_count = idx->chunk_count;
    out->chunk_bytes = idx->chunk_bytes;
    out->verified = idx->checksum_verified;
    return true;
}

#define DELTA_READ (-1)
#define DELTA_KEEP (-2)

/* One delta load's plan and counters, shared by its readers. */
typedef struct delta_job {
    load_ctx *c;
    const lds_header *h;        /* the new file's */
    const unsigned char *table; /* the new file's chunk table, checked against h */
    const lds__delta_base *base;
    /* per new chunk: the base chunk holding its bytes, DELTA_READ: read it, or DELTA_KEEP:
       the buffer written (a standby) holds it at its offset already */
    const int64_t *from;
    int fd;
    uint64_t file_at; /* file offset of payload byte 0 */
    _Atomic uint64_t bytes_read, bytes_copied, chunks_read, chunks_copied;
    _Atomic uint64_t bytes_kept, chunks_kept;
    /* time inside the fill, summed over readers (lds__delta_phases.fill_copy_ns ...) */
    _Atomic uint64_t copy_ns, read_ns, verify_ns;
    /* per reader: its io_uring, set up at its first read run (NULL: not yet, or none:
       ring_failed); each reader touches only its own; freed by delta_rings_free once every
       reader has ended */
    struct delta_ring *ring[LDS__READ_THREADS_MAX];
    bool ring_failed[LDS__READ_THREADS_MAX];
    /* per reader: the runs it has read so far in this load (until its ring is set up) */
    uint64_t runs_seen[LDS__READ_THREADS_MAX];
} delta_job;

/* Runs of chunks to read that one reader queues before it reads them all at once: one
 * io_uring submission (docs/adr/0055, amendment of 2026-12-03), or one pread each. */
#define DELTA_BATCH 64u

typedef struct delta_run {
    uint64_t k, k2; /* chunks [k, k2) */
    uint64_t s, e;  /* their payload bytes */
    bool whole;     /* the batched read returned all of [s, e) */
    bool back;      /* its batched read completed (delta_ring_read) */
} delta_run;

bool lds__delta_uring_off = false;
void (*lds__delta_uring_res_hook)(uint64_t s, int *res);
_Atomic uint64_t lds__delta_uring_runs;

#if LDS_HAVE_URING
struct delta_ring {
    struct io_uring ring;
};
#else
struct delta_ring {
    int unused;
};
#endif

#if LDS_HAVE_URING
/* The reader's ring, set up on first use; NULL when io_uring is unavailable (no liburing at
 * build time, io_uring_setup failing at run time: ENOSYS, EPERM under seccomp or
 * io_uring_disabled, ENOMEM) or turned off by the test switch: then runs are pread. */
static struct delta_ring *delta_ring_of(delta_job *d, unsigned reader)
{
    if (reader >= LDS__READ_THREADS_MAX || lds__delta_uring_off || d->ring_failed[reader])
        return NULL;
    if (d->ring[reader] == NULL) {
        struct delta_ring *r = malloc(sizeof *r);
        if (r == NULL || io_uring_queue_init(DELTA_BATCH, &r->ring, 0) < 0) {
            free(r);
            d->ring_failed[reader] = true;
            return NULL;
        }
        d->ring[reader] = r;
    }
    return d->ring[reader];
}
#endif

/* Drops reader's ring (after a failed submission left entries queued in it). */
static void delta_ring_drop(delta_job *d, unsigned reader)
{
#if LDS_HAVE_URING
    if (d->ring[reader] != NULL) {
        io_uring_queue_exit(&d->ring[reader]->ring);
        free(d->ring[reader]);
        d->ring[reader] = NULL;
    }
    d->ring_failed[reader] = true;
#else
    (void)d;
    (void)reader;
#endif
}

bool lds__delta_uring_available(void)
{
#if LDS_HAVE_URING
    struct io_uring r;
    if (io_uring_queue_init(4, &r, 0) < 0)
        return false;
    io_uring_queue_exit(&r);
    return true;
#else
    return false;
#endif
}

static void delta_rings_free(delta_job *d)
{
    for (unsigned i = 0; i < LDS__READ_THREADS_MAX; i++)
        if (d->ring[i] != NULL)
            delta_ring_drop(d, i);
}

/* A reader sets up its ring only once its flushes in this load have brought this many runs:
 * a delta of fewer runs is read with pread and never pays io_uring_queue_init and exit
 * (73 us median, 175 us p90 for 64 entries on this VM, docs/adr/0055 amendment of
 * 2026-12-03, second session), about what 24 preads cost over 24 batched reads (~3 us a run
 * saved); once set up, the ring serves the reader's later flushes. Tests lower it. */
#define DELTA_RING_AFTER 24u
unsigned lds__delta_uring_min_runs = DELTA_RING_AFTER;
void (*lds__delta_uring_wait_hook)(int *k);

/* How long a flush waits for its submitted reads before it cancels them: DELTA_WAIT_SLICES
 * waits of one second each (an EINTR also spends a slice), so a read that never completes
 * (a stuck device, a hung network file system) fails the reload instead of hanging it. */
#define DELTA_WAIT_SLICES 30u

/* Reads the queued runs through the reader's ring: every submitted read is reaped before
 * this returns (none is left in flight into the buffer); a run whose read did not return
 * all its bytes (short, EINTR/EAGAIN, an error, or never submitted) keeps whole false, to
 * be read again with delta_pread, which continues, retries, or names the failure. Reads
 * not completed within DELTA_WAIT_SLICES seconds are cancelled and waited for (the buffer
 * cannot be given back while the kernel may still write into it; a cancelled read of a
 * regular file ends promptly), the ring is dropped, and LDS_E_IO names the first run's
 * chunk that had not completed. */
static lds_status delta_ring_read(delta_job *d, unsigned reader, delta_run *runs, size_t n,
                                  size_t offset, unsigned char *p, lds_error *err)
{
    for (size_t i = 0; i < n; i++)
        runs[i].whole = false;
#if LDS_HAVE_URING
    if (reader < LDS__READ_THREADS_MAX && d->ring[reader] == NULL) {
        d->runs_seen[reader] += n;
        if (d->runs_seen[reader] < lds__delta_uring_min_runs)
            return LDS_OK;
    }
    struct delta_ring *dr = delta_ring_of(d, reader);
    if (dr == NULL)
        return LDS_OK;
    struct io_uring *r = &dr->ring;
    size_t queued = 0;
    for (; queued < n; queued++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(r);
        if (sqe == NULL)
            break;
        uint64_t len = runs[queued].e - runs[queued].s;
        if (len > (1u << 30)) /* one read returns at most 2 GiB - 4 KiB: pread the rest */
            len = 1u << 30;
        io_uring_prep_read(sqe, d->fd, p + (runs[queued].s - offset), (unsigned)len,
                           d->file_at + runs[queued].s);
        io_uring_sqe_set_data64(sqe, queued);
    }
    size_t submitted = 0;
    bool broken = false;
    for (unsigned tries = 0; submitted < queued;) {
        int k = io_uring_submit(r);
        if (k > 0) {
            submitted += (size_t)k;
            continue;
        }
        if ((k == -EINTR || k == -EAGAIN || k == -EBUSY) && ++tries < 1000)
            continue;
        broken = true; /* entries may remain queued: this ring is not used again */
        break;
    }
    size_t reaped = 0;
    bool stuck = false;
    for (size_t i = 0; i < n; i++)
        runs[i].back = false;
    for (unsigned slices = 0; reaped < submitted;) {
        struct io_uring_cqe *cqe;
        struct __kernel_timespec ts = {.tv_sec = 1, .tv_nsec = 0};
        int k = io_uring_wait_cqe_timeout(r, &cqe, &ts);
        if (lds__delta_uring_wait_hook != NULL)
            lds__delta_uring_wait_hook(&k);
        if (k < 0) {
            if ((k == -EINTR || k == -ETIME || k == -EAGAIN) && ++slices < DELTA_WAIT_SLICES)
                continue;
            stuck = true;
            break;
        }
        uint64_t i = io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(r, cqe);
        reaped++;
        if (i >= n)
            continue;
        runs[i].back = true;
        if (lds__delta_uring_res_hook != NULL)
            lds__delta_uring_res_hook(runs[i].s, &res);
        runs[i].whole = res >= 0 && (uint64_t)res == runs[i].e - runs[i].s;
    }
    lds_status st = LDS_OK;
    if (stuck) {
        size_t first = 0;
        while (first + 1 < submitted && runs[first].back)
            first++;
        st = lds__load_fail(err, LDS_E_IO, "chunk",
                            d->c->base + LDS_HEADER_SIZE + runs[first].s, 0, NULL,
                            "the read of chunk %llu (payload bytes %llu..%llu) through io_uring "
                            "did not complete within %u s: cancelled",
                            (unsigned long long)runs[first].k, (unsigned long long)runs[first].s,
                            (unsigned long long)(runs[first].e - 1), DELTA_WAIT_SLICES);
        /* Cancel every read of this file on the ring, then wait for each outstanding one
           (and the cancel's own completion): the buffer cannot be released while the
           kernel may still write into it. */
        size_t more = submitted - reaped;
        struct io_uring_sqe *sqe = io_uring_get_sqe(r);
        if (sqe != NULL) {
            io_uring_prep_cancel_fd(sqe, d->fd, IORING_ASYNC_CANCEL_ALL);
            io_uring_sqe_set_data64(sqe, UINT64_MAX);
            if (io_uring_submit(r) == 1)
                more++;
        }
        while (more > 0) {
            struct io_uring_cqe *cqe;
            int k = io_uring_wait_cqe(r, &cqe);
            if (k == -EINTR || k == -EAGAIN)
                continue;
            if (k < 0)
                break; /* the ring itself failed: nothing more completes on it */
            io_uring_cqe_seen(r, cqe);
            more--;
        }
    }
    atomic_fetch_add(&lds__delta_uring_runs, submitted);
    if (stuck || broken || queued < n)
        delta_ring_drop(d, reader);
    return st;
#else
    (void)d;
    (void)reader;
    (void)offset;
    (void)p;
    (void)err;
    return LDS_OK;
#endif
}

/* Reads payload bytes [s, e) into p, whole (short reads continue, EINTR retries). */
static lds_status delta_pread(delta_job *d, unsigned reader, uint64_t s, uint64_t e,
                              unsigned char *p, lds_error *err)
{
    uint64_t got = 0, n = e - s;
    while (got < n) {
        ssize_t r = lds__load_pread(d->fd, p + got, (size_t)(n - got),
                                    (off_t)(d->file_at + s + got), reader);
        if (r > 0) {
            got += (uint64_t)r;
            continue;
        }
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r == 0)
            return lds__load_fail(err, LDS_E_TRUNCATED, "payload",
                                  d->c->base + LDS_HEADER_SIZE + s + got, 0, NULL,
                                  "the input ended after %llu of the %llu declared payload bytes",
                                  (unsigned long long)(s + got),
                                  (unsigned long long)d->h->payload_length);
        int e2 = errno;
        return lds__load_fail(err, LDS_E_IO, "stream", d->c->base + LDS_HEADER_SIZE + s + got, e2,
                              NULL, "read failed at payload byte %llu: %s",
                              (unsigned long long)(s + got), strerror(e2));
    }
    return LDS_OK;
}

/* Reads the queued runs (batched through io_uring where the reader has a ring, a run not
 * read whole there, or every run without one, by delta_pread) and verifies every chunk of
 * them against the new table, in payload order: the first failure is the one reported. */
static lds_status delta_flush(delta_job *d, unsigned reader, delta_run *runs, size_t *queued,
                              size_t offset, unsigned char *p, lds_error *err)
{
    const lds_header *h = d->h;
    size_t n = *queued;
    *queued = 0;
    /* Timed as two parts with three clock reads a batch (three a run cost about a tenth
       of a 4 KiB read): every read first, then every verify, in payload order. A verify
       failure before a failed read is the one reported, as run by run. */
    uint64_t t0 = lds__now_ns();
    lds_status st = delta_ring_read(d, reader, runs, n, offset, p, err);
    size_t got = 0; /* runs [0, got) are read whole */
    for (; st == LDS_OK && got < n; got++)
        if (!runs[got].whole)
            st = delta_pread(d, reader, runs[got].s, runs[got].e, p + (runs[got].s - offset), err);
    if (st != LDS_OK && got > 0)
        got--; /* the run whose read failed */
    uint64_t t1 = lds__now_ns();
    for (size_t i = 0; i < got; i++) {
        for (uint64_t j = runs[i].k; j < runs[i].k2; j++) {
            uint64_t js, je;
            lds_chunk_range(h, j, &js, &je);
            unsigned char *jq = p + (js - offset);
            if (lds__xxh3(jq, (size_t)(je - js)) != lds__ld64_le(d->table + j * 8)) {
                lds_status vst = lds_chunk_verify(h, d->table, j, jq, (size_t)(je - js), err);
                if (vst != LDS_OK) {
                    lds__error_rebase(err, d->c->base);
                    st = vst;
                    i = got; /* the first failure in payload order */
                    break;
                }
            }
        }
    }
    uint64_t t2 = lds__now_ns();
    atomic_fetch_add(&d->read_ns, t1 - t0);
    atomic_fetch_add(&d->verify_ns, t2 - t1);
    return st;
}

/* Fills one range of whole chunks: a reused chunk is copied from the base and hashed again
 * (a copy whose hash is not the new table's entry is read from the file instead); runs of
 * the other chunks are queued, DELTA_BATCH at a time, and read by delta_flush (one io_uring
 * submission, or one pread each) and verified against the new table; the table's own bytes
 * come from the checked copy. */
static lds_status delta_fill(void *ctx, unsigned reader, size_t offset, unsigned char *p, size_t n,
                             lds_error *err)
{
    delta_job *d = ctx;
    const lds_header *h = d->h;
    uint64_t cb = h->chunk_bytes, end = offset + n;
    uint64_t read_b = 0, copy_b = 0, read_k = 0, copy_k = 0, keep_b = 0, keep_k = 0;
    /* copy_ns: the time of each streak of copied chunks (from its first copy, copy_t0, to
       the next chunk that is not one), so two clock reads a streak, not a chunk */
    uint64_t copy_ns = 0, copy_t0 = 0;
#define END_COPY_STREAK()                                                                          \
    do {                                                                                           \
        if (copy_t0 != 0) {                                                                        \
            copy_ns += lds__now_ns() - copy_t0;                                                    \
            copy_t0 = 0;                                                                           \
        }                                                                                          \
    } while (0)
    lds_status st = LDS_OK;
    delta_run runs[DELTA_BATCH];
    size_t queued = 0;
    uint64_t k = offset / cb;
    while (st == LDS_OK && k < h->chunk_count) {
        uint64_t s, e;
        if (lds_chunk_range(h, k, &s, &e) != LDS_OK || s >= end)
            break;
        unsigned char *q = p + (s - offset);
        if (d->from[k] < 0)
            END_COPY_STREAK();
        if (d->from[k] == DELTA_KEEP && lds__delta_keep_hook == NULL && !lds__delta_rehash_kept) {
            /* A run of kept chunks: nothing to do but count them. */
            uint64_t k2 = k + 1;
            while (k2 < h->chunk_count && d->from[k2] == DELTA_KEEP && k2 * cb < end)
                k2++;
            uint64_t e2 = k2 * cb < h->chunk_table_offset ? k2 * cb : h->chunk_table_offset;
            keep_b += e2 - s;
            keep_k += k2 - k;
            k = k2;
            continue;
        }
        uint64_t want = lds__ld64_le(d->table + k * 8);
        if (d->from[k] == DELTA_KEEP) {
            if (lds__delta_keep_hook != NULL)
                lds__delta_keep_hook(k, q, (size_t)(e - s));
            if (!lds__delta_rehash_kept || lds__xxh3(q, (size_t)(e - s)) == want) {
                keep_b += e - s;
                keep_k++;
                k++;
                continue;
            }
            /* The standby changed in memory since it was verified: read the chunk. */
        } else if (d->from[k] >= 0) {
            if (copy_t0 == 0)
                copy_t0 = lds__now_ns();
            memcpy(q, d->base->payload + (uint64_t)d->from[k] * cb, (size_t)(e - s));
            if (lds__delta_copy_hook != NULL)
                lds__delta_copy_hook(k, q, (size_t)(e - s));
            if (!lds__delta_rehash || lds__xxh3(q, (size_t)(e - s)) == want) {
                copy_b += e - s;
                copy_k++;
                k++;
                continue;
            }
            /* Not the bytes the table names (a 64-bit collision, or the base changed in
               memory): never served; read this chunk from the file like a changed one. */
            END_COPY_STREAK();
        }
        uint64_t k2 = k + 1, e2 = e;
        for (uint64_t s2, ee; k2 < h->chunk_count && d->from[k2] == DELTA_READ &&
                              lds_chunk_range(h, k2, &s2, &ee) == LDS_OK && s2 < end;
             k2++)
            e2 = ee;
        runs[queued++] = (delta_run){.k = k, .k2 = k2, .s = s, .e = e2};
        if (queued == DELTA_BATCH)
            st = delta_flush(d, reader, runs, &queued, offset, p, err);
        read_b += e2 - s;
        read_k += k2 - k;
        k = k2;
    }
    END_COPY_STREAK();
#undef END_COPY_STREAK
    if (st == LDS_OK && queued > 0)
        st = delta_flush(d, reader, runs, &queued, offset, p, err);
    if (st == LDS_OK && end > h->chunk_table_offset) {
        uint64_t from = offset > h->chunk_table_offset ? offset : h->chunk_table_offset;
        memcpy(p + (from - offset), d->table + (from - h->chunk_table_offset),
               (size_t)(end - from));
    }
    atomic_fetch_add(&d->bytes_read, read_b);
    atomic_fetch_add(&d->bytes_copied, copy_b);
    atomic_fetch_add(&d->chunks_read, read_k);
    atomic_fetch_add(&d->chunks_copied, copy_k);
    atomic_fetch_add(&d->bytes_kept, keep_b);
    atomic_fetch_add(&d->chunks_kept, keep_k);
    atomic_fetch_add(&d->copy_ns, copy_ns);
    return st;
}

/* The length of chunk k of a payload whose chunks end at `end` (its table's offset, C2). */
static inline uint64_t chunk_len(uint64_t k, uint64_t cb, uint64_t end)
{
    uint64_t s = k * cb;
    return s + cb < end ? cb : end - s;
}

/* An unmatched chunk of the new file: its checksum, length and number (delta_plan). */
typedef struct delta_miss {
    uint64_t sum, len, k;
    int64_t next; /* the next chunk of its group (equal checksum and length); -1: the last */
} delta_miss;

/* Where a (checksum, length) group's probe starts: the checksum (XXH3-64: its low bits are
   as good as any) with the length mixed in. */
static inline uint64_t delta_miss_home(uint64_t sum, uint64_t len)
{
    return sum ^ (len * UINT64_C(0x9E3779B97F4A7C15));
}

uint64_t *lds__delta_plan_probes;

/* One new chunk's first match (delta_plan): kept from the standby's table `ot` (NULL: no
   standby) at the same place, else the base's chunk at the same place; returns 1 when it
   is neither (DELTA_READ for now). */
static inline uint64_t plan_chunk(uint64_t k, uint64_t cb, uint64_t end, const unsigned char *table,
                                  const lds__delta_base *o, const unsigned char *ot,
                                  uint64_t n_keep, const lds__delta_base *b,
                                  const unsigned char *bt, uint64_t n_same, int64_t *from)
{
    uint64_t want = lds__ld64_le(table + k * 8), len = chunk_len(k, cb, end);
    if (k < n_keep && lds__ld64_le(ot + k * 8) == want && chunk_len(k, cb, o->table_offset) == len)
        from[k] = DELTA_KEEP;
    else if (k < n_same && lds__ld64_le(bt + k * 8) == want &&
             chunk_len(k, cb, b->table_offset) == len)
        from[k] = (int64_t)k;
    else {
        from[k] = DELTA_READ;
        return 1;
    }
    return 0;
}

/* The plan, one entry per new chunk (docs/adr/0055): DELTA_KEEP when the standby `sb` (may be
 * NULL) holds it at its own offset with the same XXH3-64 and length (its chunks were verified
 * when its generation loaded, docs/adr/0050; a kept chunk costs nothing, so it wins); else
 * the base chunk with the same XXH3-64 and length: the same position first (an update in
 * place), else the lowest-numbered base chunk anywhere (a whole chunk moved by a multiple of
 * the chunk size); else DELTA_READ. One pass over the tables; the chunks left unmatched (few,
 * for a small delta) are sorted into groups of equal checksum and length, and a small
 * open-addressing table of the groups is probed by one sequential pass over the base's
 * table, instead of a table of every base chunk. */
static lds_status delta_plan(load_ctx *c, const lds_header *h, const unsigned char *table,
                             const lds__delta_base *b, const lds__delta_standby *sb, int64_t *from,
                             uint64_t *unmatched)
{
    const unsigned char *bt = b->payload + b->table_offset;
    const lds__delta_base *o = sb != NULL ? &sb->held : NULL;
    if (o != NULL && (!sb->has_table || !o->verified || o->chunk_bytes != h->chunk_bytes))
        o = NULL;
    const unsigned char *ot = o != NULL ? o->payload + o->table_offset : NULL;
    uint64_t cb = h->chunk_bytes, end = h->chunk_table_offset, miss = 0;
    uint64_t n_keep = o != NULL ? (o->chunk_count < h->chunk_count ? o->chunk_count : h->chunk_count)
                                : 0;
    uint64_t n_same = b->chunk_count < h->chunk_count ? b->chunk_count : h->chunk_count;
    uint64_t k = 0;
    if (o != NULL) {
        /* Chunks whole in both files (length cb in each) are compared as raw table words,
           eight at a time: equal little-endian words are equal checksums, and a block of
           eight equal entries (most blocks of a small delta) is eight kept chunks. */
        uint64_t whole = end / cb, whole_o = o->table_offset / cb;
        uint64_t lim = n_keep < whole ? n_keep : whole;
        lim = lim < whole_o ? lim : whole_o;
        while (k + 8 <= lim) {
            uint64_t a[8], x[8], diff = 0;
            memcpy(a, table + k * 8, sizeof a);
            memcpy(x, ot + k * 8, sizeof x);
            for (int j = 0; j < 8; j++)
                diff |= a[j] ^ x[j];
            if (diff == 0) {
                for (int j = 0; j < 8; j++)
                    from[k + (uint64_t)j] = DELTA_KEEP;
                k += 8;
                continue;
            }
            for (uint64_t k8 = k + 8; k < k8; k++)
                miss += plan_chunk(k, cb, end, table, o, ot, n_keep, b, bt, n_same, from);
        }
    }
    for (; k < h->chunk_count; k++)
        miss += plan_chunk(k, cb, end, table, o, ot, n_keep, b, bt, n_same, from);
    if (miss > 0 && b->chunk_count > 0) {
        /* The unmatched chunks form one group per distinct (checksum, length), each a list
           headed in a small open-addressing table of the groups (at most half full), which
           is probed once per base chunk. The first base chunk of a group's checksum and
           length takes the whole group (the lowest base chunk wins), which is then done.
           Linear in the chunks whatever repeats: a table keyed per chunk let a probe walk
           every copy of a checksum repeated D times (zero-filled rows, or a crafted file):
           chunks x D steps. (The groups were first made by sorting the chunks: qsort's
           comparisons were most of a changed-1% plan, 41,700 chunks.) */
        delta_miss *u = malloc((size_t)miss * sizeof *u);
        uint64_t cap = 16;
        while (cap < miss * 2)
            cap <<= 1;
        int64_t *slot = u != NULL ? malloc((size_t)cap * sizeof *slot) : NULL;
        /* A filter of 16 bits per group in front of the table: most base chunks match no
           group (a changed row's new checksum is nowhere in the base), and the filter (128
           KiB for 40,000 groups) answers them from the cache where the table would miss. */
        uint64_t fbits = 4096;
        while (fbits < miss * 16)
            fbits <<= 1;
        uint64_t *filter = slot != NULL ? calloc((size_t)(fbits / 64), sizeof *filter) : NULL;
        if (filter == NULL) {
            free(slot);
            free(u);
            return lds__load_fail(c->err, LDS_E_NOMEM, "chunk_table", 0, 0, NULL,
                                  "no memory for the delta's table of %llu chunks",
                                  (unsigned long long)miss);
        }
        for (uint64_t i = 0; i < cap; i++)
            slot[i] = -1;
        uint64_t m = 0;
        for (uint64_t k = 0; k < h->chunk_count; k++) {
            if (from[k] != DELTA_READ)
                continue;
            delta_miss *x = &u[m];
            *x = (delta_miss){lds__ld64_le(table + k * 8), chunk_len(k, cb, end), k, -1};
            uint64_t home = delta_miss_home(x->sum, x->len), i = home & (cap - 1);
            for (; slot[i] >= 0; i = (i + 1) & (cap - 1)) {
                delta_miss *g = &u[slot[i]];
                if (g->sum == x->sum && g->len == x->len)
                    break; /* its group's head: x joins the list after it */
            }
            if (slot[i] >= 0) {
                x->next = u[slot[i]].next;
                u[slot[i]].next = (int64_t)m;
            } else {
                slot[i] = (int64_t)m;
                filter[(home & (fbits - 1)) >> 6] |= UINT64_C(1) << (home & 63);
            }
            m++;
        }
        uint64_t left = miss, probes = 0;
        for (uint64_t bk = 0; bk < b->chunk_count && left > 0; bk++) {
            uint64_t got = lds__ld64_le(bt + bk * 8), blen = chunk_len(bk, cb, b->table_offset);
            uint64_t home = delta_miss_home(got, blen);
            if (!((filter[(home & (fbits - 1)) >> 6] >> (home & 63)) & 1))
                continue;
            for (uint64_t i = home & (cap - 1); slot[i] != -1;
                 i = (i + 1) & (cap - 1)) {
                probes++;
                int64_t g = slot[i] >= 0 ? slot[i] : -slot[i] - 2; /* done: -(g + 2) */
                if (u[g].sum != got || u[g].len != blen)
                    continue;
                if (slot[i] >= 0) {
                    for (int64_t j = g; j >= 0; j = u[j].next) {
                        from[u[j].k] = (int64_t)bk;
                        left--;
                    }
                    slot[i] = -(int64_t)g - 2;
                }
                break;
            }
        }
        if (lds__delta_plan_probes != NULL)
            *lds__delta_plan_probes += probes;
        free(filter);
        free(slot);
        free(u);
        miss = left;
    }
    *unmatched = miss;
    return LDS_OK;
}

static void delta_why(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void delta_why(char *why, size_t n, const char *fmt, ...)
{
    if (why == NULL || n == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
}

void lds__delta_scratch_free(lds__delta_scratch *s)
{
    free(s->table);
    free(s->from);
    memset(s, 0, sizeof *s);
}

/* Makes *s hold a table copy and a plan of `chunks` entries; false (nothing freed) when
 * memory runs out. */
static bool delta_scratch_reserve(lds__delta_scratch *s, size_t chunks)
{
    if (chunks > (SIZE_MAX - 1) / 10)
        return false;
    if (s->table_cap >= chunks * 8 + 1 && s->from_cap >= chunks + 1)
        return true;
    size_t want = chunks + chunks / 4 + 1;
    unsigned char *t = malloc(want * 8);
    int64_t *f = t != NULL ? malloc(want * sizeof *f) : NULL;
    if (f == NULL) {
        free(t);
        return false;
    }
    lds__delta_scratch_free(s);
    s->table = t;
    s->table_cap = want * 8;
    s->from = f;
    s->from_cap = want;
    return true;
}

/* The delta load proper on an open regular file; *fallback when it cannot be used. */
static lds_status load_delta_fd(load_ctx *c, int fd, const lds__delta_base *b,
                                lds__delta_standby *sb, bool *fallback, char *why, size_t why_n)
{
#define FALL_BACK(...)                                                                             \
    do {                                                                                           \
        delta_why(why, why_n, __VA_ARGS__);                                                        \
        *fallback = true;                                                                          \
        return LDS_OK;                                                                             \
    } while (0)
    if (b == NULL || b->payload == NULL)
        FALL_BACK("the current generation keeps no format 1.1 payload to reuse");
    if (c->o.use_mmap)
        FALL_BACK("use_mmap: a mapped load reads nothing to save");
    if (!c->o.verify_checksum)
        FALL_BACK("verify_checksum is off: chunks are matched by their verified checksums");
    transport t = {0};
    probe_fd(fd, lseek(fd, 0, SEEK_CUR), &t);
    if (!t.has_size)
        FALL_BACK("the source is not a regular file that can be read at offsets");
    unsigned char hb[LDS_HEADER_SIZE];
    ssize_t r;
    do
        r = pread(fd, hb, sizeof hb, (off_t)t.pos);
    while (r < 0 && errno == EINTR);
    if (r != (ssize_t)sizeof hb)
        FALL_BACK("the header could not be read at offset %llu", (unsigned long long)t.pos);
    if (lds__is_zstd(hb, sizeof hb))
        FALL_BACK("the file is compressed (zstd)");
    lds_header h;
    lds_error herr;
    lds_error_init(&herr);
    if (lds_header_decode(hb, sizeof hb, &h, &herr) != LDS_OK)
        FALL_BACK("the header does not decode (the full load reports it)");
    if (!lds_header_chunked(&h))
        FALL_BACK("format 1.0: the file has no chunk table");
    if (h.chunk_bytes != b->chunk_bytes)
        FALL_BACK("the chunk size changed (%lu bytes, the current generation's %lu)",
                  (unsigned long)h.chunk_bytes, (unsigned long)b->chunk_bytes);
    uint64_t need = t.pos + LDS_HEADER_SIZE;
    if (t.size < need || t.size - need != h.payload_length || h.payload_length > SIZE_MAX ||
        h.payload_length > c->o.max_payload_bytes)
        FALL_BACK("the file's size or the payload limit disagrees with the header (the full "
                  "load reports it)");
    c->delta = true;
    c->base = t.pos;
    c->hdr = h;
    c->info.declared_bytes = h.payload_length;
    if (cancelled(c))
        return lds__load_fail(c->err, LDS_E_CANCELLED, "payload", c->base + LDS_HEADER_SIZE, 0,
                              NULL, "cancelled before the payload was read");
    size_t length = (size_t)h.payload_length;
    size_t table_n = (size_t)h.chunk_count * 8;
    lds__delta_scratch *scr = sb != NULL ? sb->scratch : NULL;
    unsigned char *table;
    int64_t *from;
    if (scr != NULL) {
        table = delta_scratch_reserve(scr, (size_t)h.chunk_count) ? scr->table : NULL;
        from = scr->from;
    } else {
        table = malloc(table_n + 1);
        from = malloc((size_t)h.chunk_count * sizeof *from + 1);
    }
    if (table == NULL || from == NULL) {
        if (scr == NULL) {
            free(table);
            free(from);
        }
        return lds__load_fail(c->err, LDS_E_NOMEM, "chunk_table", c->base + LDS_HEADER_SIZE, 0,
                              NULL, "cannot allocate the %zu-byte chunk table", table_n);
    }
    uint64_t file_at = t.pos + LDS_HEADER_SIZE;
    lds__delta_phases ph = {.delta = true};
    uint64_t t0;
    lds_status st = read_table(c, fd, file_at, length, table, table_n);
    uint64_t t1 = now_ns();
    ph.table_ns = t1 - c->t0_ns;
    uint64_t unmatched = 0;
    payload_buf pb = {0};
    lds_pool *pool = c->o.pool != NULL ? c->o.pool : lds_pool_shared();
    bool into_standby = st == LDS_OK && sb != NULL && sb->lease.ptr != NULL && sb->pool == pool &&
                        sb->lease.capacity >= length && !sb->taken;
    if (st == LDS_OK)
        st = delta_plan(c, &h, table, b, into_standby ? sb : NULL, from, &unmatched);
    into_standby = into_standby && st == LDS_OK;
    t0 = now_ns();
    ph.plan_ns = t0 - t1;
    if (into_standby) {
        sb->taken = true; /* from here on pb.h returns it on failure, or the index owns it */
        pb.ptr = sb->lease.ptr;
        pb.cap = sb->lease.capacity;
        pb.h = (hold){.kind = HOLD_LEASE, .pool = pool, .lease = sb->lease};
        c->info.path = LDS_LOAD_POOLED;
        int pages = lds__pool_lease_pages(pool, &sb->lease);
        c->info.huge_pages = pages == 1;
        c->info.huge_pages_fallback = pages == 2;
    } else if (st == LDS_OK) {
        lds_lease lease;
        st = lds_pool_rent(pool, length, &lease);
        if (st == LDS_OK) {
            pb.ptr = lease.ptr;
            pb.cap = lease.capacity;
            pb.h = (hold){.kind = HOLD_LEASE, .pool = pool, .lease = lease};
            c->info.path = LDS_LOAD_POOLED;
            int pages = lds__pool_lease_pages(pool, &lease);
            c->info.huge_pages = pages == 1;
            c->info.huge_pages_fallback = pages == 2;
        } else {
            st = lds__load_fail(c->err, st, "payload", c->base + LDS_HEADER_SIZE, 0, NULL,
                                "the pool refused a rental of %zu bytes: %s", length,
                                lds_strerror(st));
        }
    }
    delta_job d = {.c = c, .h = &h, .table = table, .base = b, .from = from, .fd = fd,
                   .file_at = file_at};
    t1 = now_ns();
    ph.rent_ns = t1 - t0;
    if (st == LDS_OK) {
        unsigned threads = c->o.read_threads == 0 ? lds__read_threads_auto(length)
                           : c->o.read_threads > LDS__READ_THREADS_MAX ? LDS__READ_THREADS_MAX
                                                                       : c->o.read_threads;
        lds__pread_job j = {
            .fd = fd,
            .file_at = file_at,
            .payload_at = c->base + LDS_HEADER_SIZE,
            .stream_at = LDS_HEADER_SIZE,
            .dst = pb.ptr,
            .length = length,
            .range = chunk_range(&h, length, threads),
            .threads = threads,
            .fill = delta_fill,
            .fill_ctx = &d,
            .opts = &c->o,
        };
        st = lds__pread_payload(&j, c->err);
        c->info.read_threads = j.threads_used;
    }
    delta_rings_free(&d); /* every reader has ended */
    t0 = now_ns();
    ph.fill_ns = t0 - t1;
    ph.fill_copy_ns = atomic_load(&d.copy_ns);
    ph.fill_read_ns = atomic_load(&d.read_ns);
    ph.fill_verify_ns = atomic_load(&d.verify_ns);
    c->info.capacity_bytes = pb.cap;
    c->info.bytes_read = atomic_load(&d.bytes_read) + table_n;
    c->info.bytes_copied = atomic_load(&d.bytes_copied);
    c->info.chunks_read = (uint32_t)atomic_load(&d.chunks_read);
    c->info.chunks_copied = (uint32_t)atomic_load(&d.chunks_copied);
    c->info.bytes_shared = atomic_load(&d.bytes_kept);
    c->info.chunks_shared = (uint32_t)atomic_load(&d.chunks_kept);
    c->info.stream_bytes = LDS_HEADER_SIZE + c->info.bytes_read;
    if (scr == NULL) {
        free(table);
        free(from);
    }
    if (st != LDS_OK) {
        hold_release(&pb.h);
        if (c->phases != NULL)
            *c->phases = ph;
        return st;
    }
    c->info.payload_bytes = length;
    c->chunks_verified = true;
    (void)lseek(fd, (off_t)(file_at + length), SEEK_SET);
    st = parse(c, pb.ptr, length, &pb.h, false, 0);
    ph.parse_ns = now_ns() - t0;
    if (c->phases != NULL)
        *c->phases = ph;
    return st;
#undef FALL_BACK
}

lds_status lds__load_delta(const char *path, int fd, const lds_load_options *opts,
                           const lds__delta_base *base, lds_index **out, lds_load_info *info,
                           lds_error *err, bool *fallback, char *why, size_t why_n)
{
    return lds__load_delta_into(path, fd, opts, base, NULL, out, info, err, fallback, why, why_n,
                                NULL);
}

lds_status lds__load_delta_into(const char *path, int fd, const lds_load_options *opts,
                                const lds__delta_base *base, lds__delta_standby *standby,
                                lds_index **out, lds_load_info *info, lds_error *err,
                                bool *fallback, char *why, size_t why_n,
                                lds__delta_phases *phases)
{
    *fallback = false;
    if (phases != NULL)
        memset(phases, 0, sizeof *phases);
    if (why != NULL && why_n > 0)
        why[0] = '\0';
    load_ctx c;
    lds_status st = begin(&c, opts, out, info, err);
    if (st != LDS_OK)
        return finish(&c, st, info);
    int own_fd = -1;
    if (path != NULL) {
        int e = lds__os_open(path, O_RDONLY, &own_fd);
        if (e != 0) {
            /* The full load opens it again and reports the failure as lds_load_path does. */
            delta_why(why, why_n, "cannot open %s: %s", path, strerror(e));
            *fallback = true;
            return LDS_OK;
        }
        fd = own_fd;
        c.name = path;
    }
    c.phases = phases;
    st = load_delta_fd(&c, fd, base, standby, fallback, why, why_n);
    if (own_fd >= 0)
        close(own_fd);
    if (*fallback)
        return LDS_OK; /* nothing rented, nothing written: the caller's full load reports */
    return finish(&c, st, info);
}

/* ==== delta loads over HTTP(S) (docs/adr/0053) ============================ */

/* A delta over HTTP: the ranges of the chunks fetched, each verified as it completes. */
typedef struct delta_url_check {
    load_ctx *c;
    const lds_header *h;
    const unsigned char *table; /* the new chunk table, checked against h */
    const unsigned char *payload;
    const lds__url_range *ranges; /* whole chunks each */
} delta_url_check;

static lds_status delta_url_done(void *ctx, size_t unit, lds_error *err)
{
    delta_url_check *dc = ctx;
    const lds_header *h = dc->h;
    uint64_t s0 = dc->ranges[unit].offset - LDS_HEADER_SIZE;
    uint64_t e0 = s0 + dc->ranges[unit].length;
    for (uint64_t k = s0 / h->chunk_bytes; k < h->chunk_count; k++) {
        uint64_t s, e;
        if (lds_chunk_range(h, k, &s, &e) != LDS_OK || s >= e0)
            break;
        if (lds__xxh3(dc->payload + s, (size_t)(e - s)) != lds__ld64_le(dc->table + k * 8))
            return lds_chunk_verify(h, dc->table, k, dc->payload + s, (size_t)(e - s), err);
    }
    return LDS_OK;
}

/* Reads the first response's bytes (the head asked for) into hb; *got how many came. */
static lds_status delta_url_head(lds__url *u, unsigned char *hb, size_t n, size_t *got,
                                 lds_error *err)
{
    *got = 0;
    for (;;) {
        size_t r = 0;
        lds_status st = lds__url_read(u, hb + *got, n - *got, &r, err);
        if (st != LDS_OK)
            return st;
        *got += r;
        if (r == 0 || *got == n)
            return LDS_OK;
    }
}

/* The delta load proper from an opened URL whose first request asked for the header only
 * (lds__url_open_head); *fallback (nothing rented) when it cannot be used. */
static lds_status load_delta_url(load_ctx *c, lds__url *u, const lds__delta_base *b,
                                 bool *fallback, char *why, size_t why_n)
{
#define FALL_BACK(...)                                                                             \
    do {                                                                                           \
        delta_why(why, why_n, __VA_ARGS__);                                                        \
        *fallback = true;                                                                          \
        return LDS_OK;                                                                             \
    } while (0)
    if (b == NULL || b->payload == NULL)
        FALL_BACK("the current generation keeps no format 1.1 payload to reuse");
    if (!c->o.verify_checksum)
        FALL_BACK("verify_checksum is off: chunks are matched by their verified checksums");
    unsigned char hb[LDS_HEADER_SIZE];
    size_t got = 0;
    lds_error herr;
    lds_error_init(&herr);
    if (delta_url_head(u, hb, sizeof hb, &got, &herr) != LDS_OK)
        FALL_BACK("the header's Range request failed: %s", herr.message);
    if (!lds__url_head_partial(u))
        FALL_BACK("the server answered the header's Range request with HTTP %d and the whole "
                  "file: it does not serve ranges",
                  lds__url_status(u));
    if (!lds__url_ranges_ok(u))
        FALL_BACK("the response carries no strong ETag or Last-Modified to validate ranges by");
    if (lds__is_zstd(hb, got))
        FALL_BACK("the file is compressed (zstd)");
    lds_header h;
    if (got != sizeof hb || lds_header_decode(hb, got, &h, &herr) != LDS_OK)
        FALL_BACK("the header does not decode (the full load reports it)");
    if (!lds_header_chunked(&h))
        FALL_BACK("format 1.0: the file has no chunk table");
    if (h.chunk_bytes != b->chunk_bytes)
        FALL_BACK("the chunk size changed (%lu bytes, the current generation's %lu)",
                  (unsigned long)h.chunk_bytes, (unsigned long)b->chunk_bytes);
    uint64_t total = 0;
    if (!lds__url_length(u, &total) || total < LDS_HEADER_SIZE ||
        total - LDS_HEADER_SIZE != h.payload_length || h.payload_length > SIZE_MAX ||
        h.payload_length > c->o.max_payload_bytes)
        FALL_BACK("the file's length (Content-Range) or the payload limit disagrees with the "
                  "header (the full load reports it)");
    c->delta = true;
    c->base = 0;
    c->hdr = h;
    c->info.declared_bytes = h.payload_length;
    c->info.path = LDS_LOAD_POOLED;
    if (cancelled(c))
        return lds__load_fail(c->err, LDS_E_CANCELLED, "payload", LDS_HEADER_SIZE, 0, NULL,
                              "cancelled before the payload was fetched");
    size_t length = (size_t)h.payload_length;
    size_t table_n = (size_t)h.chunk_count * 8;
    unsigned char *table = malloc(table_n + 1);
    int64_t *from = malloc((size_t)h.chunk_count * sizeof *from + 1);
    /* At most one range per chunk (runs of chunks split at LDS__URL_RANGE_MAX). */
    lds__url_range *ranges = malloc((size_t)h.chunk_count * sizeof *ranges + 1);
    if (table == NULL || from == NULL || ranges == NULL) {
        free(table);
        free(from);
        free(ranges);
        return lds__load_fail(c->err, LDS_E_NOMEM, "chunk_table", LDS_HEADER_SIZE, 0, NULL,
                              "cannot allocate the %zu-byte chunk table", table_n);
    }
    uint64_t sent = LDS_HEADER_SIZE;
    lds__url_range tr = {.offset = LDS_HEADER_SIZE + h.chunk_table_offset, .length = table_n};
    lds__url_fetch tf = {.dst = table, .dst_at = tr.offset, .ranges = &tr, .count = 1,
                         .connections = 1, .total = table_n};
    lds_status st = lds__url_fetch_ranges(u, &tf, c->err);
    sent += tf.received;
    if (st != LDS_OK && tf.no_ranges) {
        free(table);
        free(from);
        free(ranges);
        c->delta = false;
        FALL_BACK("the server answered the chunk table's Range request with the whole file");
    }
    if (st == LDS_OK) {
        st = lds_chunk_table_check(&h, table, table_n, c->err);
        if (st != LDS_OK)
            lds__error_rebase(c->err, 0);
    }
    uint64_t unmatched = 0;
    if (st == LDS_OK)
        st = delta_plan(c, &h, table, b, NULL, from, &unmatched);
    payload_buf pb = {0};
    lds_pool *pool = c->o.pool != NULL ? c->o.pool : lds_pool_shared();
    if (st == LDS_OK) {
        lds_lease lease;
        st = lds_pool_rent(pool, length, &lease);
        if (st == LDS_OK) {
            pb.ptr = lease.ptr;
            pb.cap = lease.capacity;
            pb.h = (hold){.kind = HOLD_LEASE, .pool = pool, .lease = lease};
            int pages = lds__pool_lease_pages(pool, &lease);
            c->info.huge_pages = pages == 1;
            c->info.huge_pages_fallback = pages == 2;
        } else {
            st = lds__load_fail(c->err, st, "payload", LDS_HEADER_SIZE, 0, NULL,
                                "the pool refused a rental of %zu bytes: %s", length,
                                lds_strerror(st));
        }
    }
    /* The chunks held: copied from the current generation and hashed again (a copy that
       is not the bytes the new table names is fetched instead, as a changed chunk). */
    uint64_t cb = h.chunk_bytes, copy_b = 0, copy_k = 0, fetch_b = 0, fetch_k = 0;
    size_t n = 0;
    for (uint64_t k = 0; st == LDS_OK && k < h.chunk_count; k++) {
        if (from[k] < 0)
            continue;
        uint64_t s, e;
        lds_chunk_range(&h, k, &s, &e);
        unsigned char *q = pb.ptr + s;
        memcpy(q, b->payload + (uint64_t)from[k] * cb, (size_t)(e - s));
        if (lds__delta_copy_hook != NULL)
            lds__delta_copy_hook(k, q, (size_t)(e - s));
        if (lds__delta_rehash && lds__xxh3(q, (size_t)(e - s)) != lds__ld64_le(table + k * 8)) {
            from[k] = -1;
            continue;
        }
        copy_b += e - s;
        copy_k++;
    }
    /* The others: runs of adjacent chunks, one Range request each (at most
       LDS__URL_RANGE_MAX bytes, whole chunks). */
    for (uint64_t k = 0; st == LDS_OK && k < h.chunk_count;) {
        if (from[k] >= 0) {
            k++;
            continue;
        }
        uint64_t s, e, k2 = k + 1;
        lds_chunk_range(&h, k, &s, &e);
        for (uint64_t s2, e2; k2 < h.chunk_count && from[k2] < 0 &&
                              lds_chunk_range(&h, k2, &s2, &e2) == LDS_OK &&
                              e2 - s <= LDS__URL_RANGE_MAX;
             k2++)
            e = e2;
        ranges[n].offset = LDS_HEADER_SIZE + s;
        ranges[n].length = e - s;
        n++;
        fetch_b += e - s;
        fetch_k += k2 - k;
        k = k2;
    }
    if (st == LDS_OK && cancelled(c))
        st = lds__load_fail(c->err, LDS_E_CANCELLED, "payload", LDS_HEADER_SIZE, 0, NULL,
                            "cancelled before the changed chunks were fetched");
    if (st == LDS_OK && n > 0) {
        unsigned k = c->o.url_connections == 0 ? LDS__URL_AUTO_CONNECTIONS
                     : c->o.url_connections > LDS__URL_CONNECTIONS_MAX ? LDS__URL_CONNECTIONS_MAX
                                                                        : c->o.url_connections;
        delta_url_check dc = {.c = c, .h = &h, .table = table, .payload = pb.ptr,
                              .ranges = ranges};
        lds__url_fetch f = {.dst = pb.ptr, .dst_at = LDS_HEADER_SIZE, .ranges = ranges,
                            .count = n, .connections = k, .done = delta_url_done,
                            .done_ctx = &dc, .total = fetch_b};
        st = lds__url_fetch_ranges(u, &f, c->err);
        sent += f.received;
        c->info.url_connections = f.connections_used;
    }
    if (st == LDS_OK)
        memcpy(pb.ptr + h.chunk_table_offset, table, table_n);
    c->info.capacity_bytes = pb.cap;
    c->info.bytes_read = sent; /* transferred: the header, the table and the ranges */
    c->info.bytes_copied = copy_b;
    c->info.chunks_read = (uint32_t)fetch_k;
    c->info.chunks_copied = (uint32_t)copy_k;
    c->info.stream_bytes = sent;
    c->info.read_threads = 1;
    free(table);
    free(from);
    free(ranges);
    if (st != LDS_OK) {
        hold_release(&pb.h);
        return st;
    }
    c->info.payload_bytes = length;
    c->chunks_verified = true;
    return parse(c, pb.ptr, length, &pb.h, false, 0);
#undef FALL_BACK
}

lds_status lds__load_delta_url(const char *url, const lds_load_options *opts,
                               const lds__delta_base *base, lds_index **out, lds_load_info *info,
                               lds_error *err, bool *fallback, char *why, size_t why_n)
{
    *fallback = false;
    if (why != NULL && why_n > 0)
        why[0] = '\0';
    load_ctx c;
    lds_status st = begin(&c, opts, out, info, err);
    if (st == LDS_OK && url == NULL)
        st = lds__load_fail(err, LDS_E_INVALID_ARG, "url", 0, 0, NULL, "the URL is NULL");
    if (st != LDS_OK)
        return finish(&c, st, info);
    if (base == NULL || base->payload == NULL) {
        delta_why(why, why_n, "the current generation keeps no format 1.1 payload to reuse");
        *fallback = true;
        return LDS_OK;
    }
    lds__url *u = NULL;
    st = lds__url_open_head(url, &c.o, LDS_HEADER_SIZE, &u, err);
    if (st != LDS_OK)
        return finish(&c, st, info); /* a bad URL or no libcurl: the full load says the same */
    st = load_delta_url(&c, u, base, fallback, why, why_n);
    c.info.http_status = lds__url_status(u);
    c.info.resumes = lds__url_resumes(u);
    if (st != LDS_OK)
        name_the_url(err, st, lds__url_shown(u));
    lds__url_close(u);
    if (*fallback)
        return LDS_OK;
    return finish(&c, st, info);
}
