/* Fuzz target: the payload parser, lds_index_from_payload, then every accessor of the
 * index it returns. Input: one control byte (bit 0: rewrite the checksum so that
 * structural mutations get past it; bit 1: copy mode; bit 2: skip verification;
 * bit 3: small limits), then the payload. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in = {data, size};
    uint8_t ctl = fz_byte(&in);
    /* An exact-size copy at an odd address: the parser must not need alignment. */
    uint8_t *block = malloc(in.n + 1);
    if (!block)
        return 0;
    uint8_t *p = block + 1;
    memcpy(p, in.p, in.n);
    if (ctl & 1)
        fz_fix_checksum(p, in.n);
    lds_parse_options o;
    lds_parse_options_default(&o);
    o.copy = (ctl & 2) != 0;
    o.verify_checksum = (ctl & 4) == 0;
    if (ctl & 8) {
        o.limits.max_dim = 16;
        o.limits.max_rows = 64;
        o.limits.max_key_bytes = 8;
        o.limits.max_metadata_bytes = 128;
    }
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_index_from_payload(p, in.n, &o, &idx, &err);
    if (st == LDS_OK) {
        if (!idx)
            abort();
        if (o.copy)
            memset(p, 0xA5, in.n); /* copy mode must not look at the payload again */
        fz_exercise_index(idx);
        lds_index_free(idx);
    } else if (idx != NULL || err.status != st || err.message[0] == 0 ||
               (st != LDS_E_NOMEM && err.field == NULL)) {
        abort();
    }
    free(block);
    return 0;
}
