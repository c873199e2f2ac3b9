/* Fuzz target: format 1.1's chunk table (docs/format.md §2.5, rules C1-C6): the header's
 * chunk fields, lds_payload_verify_chunks against lds_chunk_verify chunk by chunk, then
 * the parser given the header. Input: one control byte (bit 0: rewrite the chunk hashes,
 * the table hash and the header check so that mutations reach the later rules; bit 1:
 * copy mode; bit 2: one verification thread instead of the default; bit 3: skip
 * verification), then a whole file (header and payload). */
#include "fuzz_common.h"

static uint64_t ld64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void st64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Rewrites every hash the header's chunk geometry implies, where it fits the input. */
static void reseal(uint8_t *b, size_t n)
{
    if (n < LDS_HEADER_SIZE)
        return;
    uint64_t D = ld64(b + 24), cn = ld64(b + 32), L = n - LDS_HEADER_SIZE;
    uint32_t cb = (uint32_t)ld64(b + 48);
    if ((b[12] & 1) && cb >= LDS_MIN_CHUNK_BYTES && cb <= LDS_MAX_CHUNK_BYTES &&
        (cb & (cb - 1)) == 0 && D >= 8 && D <= L && cn <= (L - D) / 8 && cn == (D + cb - 1) / cb) {
        uint8_t *p = b + LDS_HEADER_SIZE;
        st64(p + D - 8, XXH3_64bits(p, D - 8));
        for (uint64_t k = 0; k < cn; k++) {
            uint64_t e = (k + 1) * cb < D ? (k + 1) * cb : D;
            st64(p + D + 8 * k, XXH3_64bits(p + k * cb, e - k * cb));
        }
        st64(b + 40, XXH3_64bits(p + D, 8 * cn));
    }
    fz_fix_header(b, n);
}

static void count_bad(void *ctx, const lds_bad_chunk *b)
{
    uint64_t *n = (uint64_t *)ctx;
    if (b->stored == b->computed || b->end <= b->start)
        abort();
    (*n)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in = {data, size};
    uint8_t ctl = fz_byte(&in);
    uint8_t *block = malloc(in.n + 1);
    if (!block)
        return 0;
    uint8_t *b = block + 1; /* an odd address: nothing may need alignment */
    memcpy(b, in.p, in.n);
    if (ctl & 1)
        reseal(b, in.n);
    lds_header h;
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_header_decode(b, in.n, &h, &err);
    if (st != LDS_OK) {
        if (err.status != st || err.field == NULL || err.message[0] == 0)
            abort();
        free(block);
        return 0;
    }
    const uint8_t *p = b + LDS_HEADER_SIZE;
    size_t pn = in.n - LDS_HEADER_SIZE;
    if (lds_header_chunked(&h) && pn == h.payload_length) {
        uint64_t seen = 0, n_bad = 0;
        lds_error_init(&err);
        st =
            lds_payload_verify_chunks(&h, p, pn, (ctl & 4) ? 1 : 0, count_bad, &seen, &n_bad, &err);
        if (seen != n_bad || (st == LDS_OK) != (n_bad == 0 && st == LDS_OK))
            abort();
        const uint8_t *table = p + h.chunk_table_offset;
        if (lds_chunk_table_check(&h, table, (size_t)(8 * h.chunk_count), NULL) == LDS_OK) {
            uint64_t bad = 0;
            for (uint64_t k = 0; k < h.chunk_count; k++) {
                uint64_t s, e;
                if (lds_chunk_range(&h, k, &s, &e) != LDS_OK || e <= s || e > h.chunk_table_offset)
                    abort();
                lds_status cs = lds_chunk_verify(&h, table, k, p + s, (size_t)(e - s), &err);
                if (cs != LDS_OK && cs != LDS_E_CHECKSUM)
                    abort();
                bad += cs == LDS_E_CHECKSUM;
            }
            if (bad != n_bad)
                abort();
        } else if (st == LDS_OK) {
            abort();
        }
    }
    lds_parse_options o;
    lds_parse_options_default(&o);
    o.header = &h;
    o.copy = (ctl & 2) != 0;
    o.verify_threads = (ctl & 4) ? 1 : 0;
    o.verify_checksum = (ctl & 8) == 0;
    lds_index *idx = NULL;
    lds_error_init(&err);
    st = lds_index_from_payload(p, pn, &o, &idx, &err);
    if (st == LDS_OK) {
        if (!idx)
            abort();
        if (lds_header_chunked(&h) && lds_index_chunk_count(idx) != h.chunk_count)
            abort();
        fz_exercise_index(idx);
        lds_index_free(idx);
    } else if (idx != NULL || err.status != st || err.message[0] == 0 ||
               (st != LDS_E_NOMEM && err.field == NULL)) {
        abort();
    }
    free(block);
    return 0;
}
