/* Fuzz target: the fixed header decoder, lds_header_decode (format.md §2). Input: one
 * control byte (bit 0: rewrite the check value first), then the header bytes. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in = {data, size};
    uint8_t ctl = fz_byte(&in);
    uint8_t *b = malloc(in.n ? in.n : 1);
    if (!b)
        return 0;
    memcpy(b, in.p, in.n);
    if (ctl & 1)
        fz_fix_header(b, in.n);
    lds_header h;
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_header_decode(b, in.n, &h, &err);
    if (st == LDS_OK) {
        /* A decoded header re-encodes to the same 64 bytes. */
        uint8_t again[LDS_HEADER_SIZE];
        if (h.major != LDS_FORMAT_MAJOR || lds_header_encode(&h, again) != LDS_OK ||
            memcmp(again, b, LDS_HEADER_SIZE) != 0)
            abort();
    } else if (err.status != st || err.field == NULL || err.message[0] == 0 ||
               err.offset > LDS_HEADER_SIZE) {
        abort();
    }
    free(b);
    return 0;
}
