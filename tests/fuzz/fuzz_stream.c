/*
 * Fuzz target: the stream loader, lds_load_callback, behind a read callback whose
 * short reads, retries and errors the input chooses. Input:
 *   byte 0   control: bit 0 rewrite the header check value and the payload checksum;
 *            bit 1 LDS_OWN_COPY (else adopt); bit 2 a private pool that fills every
 *            rental with a sentinel; bit 3 hash in the parser instead of while reading;
 *            bit 4 skip checksum verification; bits 5-7 chunk size (0 = default)
 *   byte 1   k, the length of the read schedule (0..31 used)
 *   k bytes  the schedule, cycled: 0xFF = fail with LDS_E_IO, 0xFE = LDS_READ_RETRY,
 *            otherwise deliver at most (b + 1) bytes
 *   rest     the stream (a lodestar file, or a zstd frame of one)
 * Afterwards a private pool must have every rental back (docs/design.md invariant 4).
 */
#include "fuzz_common.h"

typedef struct fz_stream {
    const uint8_t *sched;
    size_t sched_n, sched_i;
    const uint8_t *p;
    size_t n, pos;
    int errors;
} fz_stream;

static lds_status fz_read(void *ctx, void *buf, size_t cap, size_t *got)
{
    fz_stream *s = ctx;
    if (cap == 0)
        abort(); /* the contract promises cap >= 1 */
    size_t want = cap;
    if (s->sched_n > 0) {
        uint8_t b = s->sched[s->sched_i++ % s->sched_n];
        if (b == 0xFF && s->errors++ < 1)
            return LDS_E_IO;
        if (b == 0xFE && s->sched_i < 4096) {
            *got = LDS_READ_RETRY;
            return LDS_OK;
        }
        if ((size_t)b + 1 < want)
            want = (size_t)b + 1;
    }
    if (want > s->n - s->pos)
        want = s->n - s->pos;
    memcpy(buf, s->p + s->pos, want);
    s->pos += want;
    *got = want;
    return LDS_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in = {data, size};
    uint8_t ctl = fz_byte(&in);
    size_t k = fz_byte(&in) & 31u;
    if (k > in.n)
        k = in.n;
    fz_stream s = {.sched = in.p, .sched_n = k};
    in.p += k;
    in.n -= k;
    uint8_t *copy = malloc(in.n ? in.n : 1);
    if (!copy)
        return 0;
    memcpy(copy, in.p, in.n);
    if ((ctl & 1) && in.n >= LDS_HEADER_SIZE) {
        fz_fix_header(copy, in.n);
        fz_fix_checksum(copy + LDS_HEADER_SIZE, in.n - LDS_HEADER_SIZE);
    }
    s.p = copy;
    s.n = in.n;

    lds_pool *pool = NULL;
    if (ctl & 4) {
        lds_pool_options po;
        lds_pool_options_default(&po);
        po.fill_on_rent = 0xCC;
        if (lds_pool_create(&po, &pool) != LDS_OK)
            abort();
    }
    lds_load_options o;
    lds_load_options_default(&o);
    o.pool = pool;
    o.max_payload_bytes = (uint64_t)4 << 20; /* fill_on_rent touches every rented byte */
    o.ownership = (ctl & 2) ? LDS_OWN_COPY : LDS_OWN_ADOPT;
    o.hash_while_reading = (ctl & 8) == 0;
    o.verify_checksum = (ctl & 16) == 0;
    o.chunk_bytes = (size_t)(ctl >> 5) * 13;
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_load_callback(fz_read, &s, &o, &idx, &info, &err);
    if (st == LDS_OK) {
        if (!idx || info.payload_bytes != lds_index_payload_bytes(idx))
            abort();
        fz_exercise_index(idx);
        lds_index_free(idx);
    } else if (idx != NULL || err.status != st || err.message[0] == 0) {
        abort();
    }
    if (pool) {
        lds_pool_stats ps;
        lds_pool_stats_init(&ps);
        if (lds_pool_get_stats(pool, &ps) != LDS_OK || ps.rents != ps.returns ||
            ps.leases_current != 0 || ps.refused_total != 0)
            abort();
        lds_pool_free(pool);
    }
    free(copy);
    return 0;
}
