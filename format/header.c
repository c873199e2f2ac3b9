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
    if (h->flags & LDS_HEADER_CHUNKED) {
        lds__st64(b + 24, h->chunk_table_offset);
        lds__st64(b + 32, h->chunk_count);
        lds__st64(b + 40, h->chunk_table_hash);
        lds__st32(b + 48, h->chunk_bytes);
    }
    lds__st64(b + CHECK_AT, XXH3_64bits(b, CHECK_AT));
    return LDS_OK;
}

/* Rules H1-H6 and, for a CHUNKED header, C1-C4 (format.md §6), in that order: the
   first failure is reported, so a damaged file names the earliest field that is wrong
   rather than a consequence of it (a bad check value before a strange version). */
lds_status lds_header_decode(const void *bytes, size_t n, lds_header *out, lds_error *err)
{
    LDS__FAIL_IF_MSG(!bytes || !out, err, LDS_E_INVALID_ARG, NULL, 0,
                     "lds_header_decode: NULL argument");
    const uint8_t *b = (const uint8_t *)bytes;
    /* H1 */
    LDS__FAIL_IF(n < LDS_HEADER_SIZE, err, LDS_E_TRUNCATED, "header", n,
                 "%zu bytes, fewer than the %d-byte header", n, LDS_HEADER_SIZE);
    /* H2: the bytes are printed because a text-mode transfer (CR LF, 0x1a) changes
       exactly the ones the magic was chosen to expose (format.md §2.1). */
    LDS__FAIL_IF(memcmp(b, LDS_MAGIC, LDS_MAGIC_SIZE) != 0, err, LDS_E_BAD_MAGIC, "header.magic", 0,
                 "%02x %02x %02x %02x %02x %02x %02x %02x is not "
                 "89 4c 44 53 0d 0a 1a 0a (not a lodestar file, or damaged by a "
                 "text-mode transfer)",
                 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
    /* H3 before any field is read: past this point a surprising value is the
       writer's intent, not a flipped bit. */
    uint64_t stored = lds__ld64(b + CHECK_AT);
    uint64_t computed = XXH3_64bits(b, CHECK_AT);
    LDS__FAIL_IF(stored != computed, err, LDS_E_HEADER_CHECK, "header.check", CHECK_AT,
                 "stored %016llx, computed %016llx over bytes 0..55", (unsigned long long)stored,
                 (unsigned long long)computed);
    memset(out, 0, sizeof *out);
    out->major = lds__ld16(b + 8);
    out->minor = lds__ld16(b + 10);
    out->flags = lds__ld32(b + 12);
    out->payload_length = lds__ld64(b + 16);
    /* H4 */
    LDS__FAIL_IF(out->major != LDS_FORMAT_MAJOR, err, LDS_E_VERSION, "header.major", 8,
                 "%u is not %d, the major version this library reads", (unsigned)out->major,
                 LDS_FORMAT_MAJOR);
    /* H5: a later minor that sets a bit we do not know is most likely a newer
       writer, so the message says what to do before it says what is wrong. */
    uint32_t unknown = out->flags & LDS__MUST_UNDERSTAND &
                       ~(uint32_t)(LDS_HEADER_CHUNKED | LDS_HEADER_CHUNK_ALIGNED);
    LDS__FAIL_IF_MSG(unknown && out->minor > LDS_FORMAT_MINOR, err, LDS_E_UNSUPPORTED,
                     "header.flags", 12,
                     "format 1.%u: upgrade lodestar (header.flags %08x sets must-understand "
                     "bits of a format this library, which reads 1.0 to 1.%d, does not know)",
                     (unsigned)out->minor, (unsigned)out->flags, LDS_FORMAT_MINOR);
    /* H5 */
    LDS__FAIL_IF(unknown, err, LDS_E_UNSUPPORTED, "header.flags", 12,
                 "%08x sets must-understand bits this library does not know", (unsigned)out->flags);
    /* A1: sections aligned to chunks need chunks (format.md §4.4). */
    LDS__FAIL_IF((out->flags & LDS_HEADER_CHUNK_ALIGNED) && !(out->flags & LDS_HEADER_CHUNKED), err,
                 LDS_E_BAD_VALUE, "header.flags", 12,
                 "%08x sets CHUNK_ALIGNED (bit 1) without CHUNKED (bit 0)", (unsigned)out->flags);
    /* H6: zero reserved bytes are what lets a later minor give them a meaning that
       an older reader cannot silently misread. */
    bool chunked = (out->flags & LDS_HEADER_CHUNKED) != 0;
    for (size_t i = chunked ? 52 : 24; i < CHECK_AT; i++)
        LDS__FAIL_IF(b[i] != 0, err, LDS_E_BAD_VALUE, "header.reserved", i,
                     "byte %zu is %02x, reserved bytes must be zero", i, b[i]);
    if (!chunked)
        return LDS_OK;
    out->chunk_table_offset = lds__ld64(b + 24);
    out->chunk_count = lds__ld64(b + 32);
    out->chunk_table_hash = lds__ld64(b + 40);
    out->chunk_bytes = lds__ld32(b + 48);
    uint32_t cb = out->chunk_bytes;
    /* C1: a power of two, so a chunk's index is a shift of its offset. */
    LDS__FAIL_IF(
        cb == 0 || (cb & (cb - 1)) != 0 || cb < LDS_MIN_CHUNK_BYTES || cb > LDS_MAX_CHUNK_BYTES,
        err, LDS_E_BAD_VALUE, "header.chunk_bytes", 48, "%u is not a power of two from %u to %u",
        (unsigned)cb, (unsigned)LDS_MIN_CHUNK_BYTES, (unsigned)LDS_MAX_CHUNK_BYTES);
    /* C2: the table sits at the payload's end, so its place needs the length. */
    uint64_t L = out->payload_length;
    LDS__FAIL_IF(L == LDS_LENGTH_UNKNOWN, err, LDS_E_BAD_VALUE, "header.payload_length", 16,
                 "unknown, but a chunked (1.1) payload must declare its length");
    /* C3 */
    uint64_t cn = out->chunk_count, tl;
    LDS__FAIL_IF(__builtin_mul_overflow(cn, (uint64_t)8, &tl), err, LDS_E_OVERFLOW,
                 "header.chunk_count", 32, "%llu entries of 8 bytes overflow 64 bits",
                 (unsigned long long)cn);
    /* C4: the table fills the payload from chunk_table_offset to its end, and the
       chunks cover exactly the bytes before it; checked here, before a byte of the
       payload is read, so a loader can size its per-chunk state from the header. */
    uint64_t D = out->chunk_table_offset;
    LDS__FAIL_IF(D > L || tl > L - D, err, LDS_E_BAD_SECTION, "header.chunk_table_offset", 24,
                 "a table of %llu entries at payload offset %llu runs past the payload end %llu",
                 (unsigned long long)cn, (unsigned long long)D, (unsigned long long)L);
    /* C4 */
    LDS__FAIL_IF(D + tl != L, err, LDS_E_BAD_SECTION, "header.chunk_table_offset", 24,
                 "a table of %llu entries at payload offset %llu ends at %llu, but the payload "
                 "length is %llu",
                 (unsigned long long)cn, (unsigned long long)D, (unsigned long long)(D + tl),
                 (unsigned long long)L);
    /* C4 */
    LDS__FAIL_IF(D < LDS__TAIL, err, LDS_E_BAD_SECTION, "header.chunk_table_offset", 24,
                 "%llu bytes before the table cannot hold the %d-byte footer and checksum",
                 (unsigned long long)D, LDS__TAIL);
    /* C4 */
    uint64_t want = D / cb + (D % cb != 0);
    LDS__FAIL_IF(cn != want, err, LDS_E_BAD_SECTION, "header.chunk_count", 32,
                 "%llu, but %llu bytes in chunks of %u need %llu", (unsigned long long)cn,
                 (unsigned long long)D, (unsigned)cb, (unsigned long long)want);
    return LDS_OK;
}
