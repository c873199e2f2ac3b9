/* The fixed 64-byte header (format.md §2). */
#include "format_internal.h"

#include <xxhash.h>

#define CHECK_AT 56

lds_status lds_header_encode(const lds_header *h, void *out)
{
    if (!h || !out)
        return LDS_E_INVALID_ARG;
    uint8_t *b = (uint8_t *)out;
    memset(b, 0, LDS_HEADER_SIZE);
    memcpy(b, LDS_MAGIC, LDS_MAGIC_SIZE);
    lds__st16(b + 8, h->major);
    lds__st16(b + 10, h->minor);
    lds__st32(b + 12, h->flags);
    lds__st64(b + 16, h->payload_length);
    lds__st64(b + CHECK_AT, XXH3_64bits(b, CHECK_AT));
    return LDS_OK;
}

lds_status lds_header_decode(const void *bytes, size_t n, lds_header *out, lds_error *err)
{
    if (!bytes || !out)
        return lds__fail(err, LDS_E_INVALID_ARG, NULL, 0, "lds_header_decode: NULL argument");
    const uint8_t *b = (const uint8_t *)bytes;
    if (n < LDS_HEADER_SIZE)
        return lds__fail(err, LDS_E_TRUNCATED, "header", n,
                         "header: %zu bytes, fewer than the %d-byte header", n, LDS_HEADER_SIZE);
    if (memcmp(b, LDS_MAGIC, LDS_MAGIC_SIZE) != 0)
        return lds__fail(err, LDS_E_BAD_MAGIC, "header.magic", 0,
                         "header.magic: %02x %02x %02x %02x %02x %02x %02x %02x is not "
                         "89 4c 44 53 0d 0a 1a 0a (not a lodestar file, or damaged by a "
                         "text-mode transfer)",
                         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
    uint64_t stored = lds__ld64(b + CHECK_AT);
    uint64_t computed = XXH3_64bits(b, CHECK_AT);
    if (stored != computed)
        return lds__fail(err, LDS_E_HEADER_CHECK, "header.check", CHECK_AT,
                         "header.check: stored %016llx, computed %016llx over bytes 0..55",
                         (unsigned long long)stored, (unsigned long long)computed);
    out->major = lds__ld16(b + 8);
    out->minor = lds__ld16(b + 10);
    out->flags = lds__ld32(b + 12);
    out->payload_length = lds__ld64(b + 16);
    if (out->major != LDS_FORMAT_MAJOR)
        return lds__fail(err, LDS_E_VERSION, "header.major", 8,
                         "header.major: %u is not %d, the major version this library reads",
                         (unsigned)out->major, LDS_FORMAT_MAJOR);
    if (out->flags & LDS__MUST_UNDERSTAND)
        return lds__fail(err, LDS_E_UNSUPPORTED, "header.flags", 12,
                         "header.flags: %08x sets must-understand bits this library does not know",
                         (unsigned)out->flags);
    for (size_t i = 24; i < CHECK_AT; i++)
        if (b[i] != 0)
            return lds__fail(err, LDS_E_BAD_VALUE, "header.reserved", i,
                             "header.reserved: byte %zu is %02x, reserved bytes must be zero", i,
                             b[i]);
    return LDS_OK;
}
