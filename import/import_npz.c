/* NumPy .npz: a zip file (PKWARE APPNOTE 6.3) of .npy entries, stored (method 0, np.savez)
   or deflated (method 8, np.savez_compressed), with zip64 fields as numpy writes them.
   The central directory is read by offset from the end; one entry is then read as .npy. */
#include "import_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EOCD_SIG     0x06054b50u /* APPNOTE 4.3.16 end of central directory */
#define EOCD_SIZE    22
#define Z64_LOC_SIG  0x07064b50u /* 4.3.15 zip64 end of central directory locator */
#define Z64_EOCD_SIG 0x06064b50u /* 4.3.14 zip64 end of central directory record */
#define CDH_SIG      0x02014b50u /* 4.3.12 central directory header */
#define LFH_SIG      0x04034b50u /* 4.3.7 local file header */
#define MAX_CD_BYTES ((uint64_t)16 << 20)
#define MAX_COMMENT  65535u

static uint64_t le64(const unsigned char *p)
{
    return (uint64_t)lds__imp_le32(p) | (uint64_t)lds__imp_le32(p + 4) << 32;
}

static lds_status zfail(lds_error *err, lds_status st, uint64_t at, const char *what)
{
    return lds__imp_fail(err, st, "npz", at, 0, "byte %llu: .npz: %s", (unsigned long long)at,
                         what);
}

static lds_status zread(int fd, void *buf, size_t n, uint64_t off, lds_error *err)
{
    int e = lds__imp_pread(fd, buf, n, off);
    if (e == EIO)
        return zfail(err, LDS_E_TRUNCATED, off, "the file ends inside a zip record");
    if (e != 0) {
        errno = e;
        return lds__imp_fail(err, LDS_E_IO, "npz", off, 0, "read failed at byte %llu: %s",
                             (unsigned long long)off, strerror(e));
    }
    return LDS_OK;
}

/* One central-directory entry. */
typedef struct entry {
    const char *name;
    size_t name_len;
    unsigned method, flags;
    uint32_t crc;
    uint64_t csize, usize, local;
    uint64_t at;                 /* offset of its central header */
    uint64_t csize_at, usize_at; /* offsets of its two size fields (in zip64 extra when there) */
} entry;

/* A refusal about entry `e`: names the entry, the field and the byte. */
static lds_status efail(lds_error *err, lds_status st, const entry *e, const char *field,
                        uint64_t at, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static lds_status efail(lds_error *err, lds_status st, const entry *e, const char *field,
                        uint64_t at, const char *fmt, ...)
{
    char what[200], q[4 * LDS__IMP_SHOWN + 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return lds__imp_fail(err, st, field, at, 0, "byte %llu: .npz entry '%s': %s",
                         (unsigned long long)at, lds__imp_quote(q, sizeof q, e->name, e->name_len),
                         what);
}

/* Whether the entry is the array named `want` ("x" or "x.npy"). */
static bool is_named(const entry *e, const char *want)
{
    size_t n = strlen(want);
    if (e->name_len == n && memcmp(e->name, want, n) == 0)
        return true;
    return e->name_len == n + 4 && memcmp(e->name, want, n) == 0 &&
           memcmp(e->name + n, ".npy", 4) == 0;
}

/* Zip64 extended information (APPNOTE 4.5.3) in the extra fields x[0, xlen) at file offset
   x_at: the 64-bit values of the fields set to all ones, in the order usize, csize, local
   (a local header holds no local). `at` names the record in messages. */
static lds_status zip64_fields(const unsigned char *x, size_t xlen, uint64_t x_at, uint64_t at,
                               uint64_t *fields[3], uint64_t *fields_at[3], lds_error *err)
{
    const unsigned char *x0 = x, *xend = x + xlen;
    while (xend - x >= 4) {
        unsigned id = lds__imp_le16(x), sz = lds__imp_le16(x + 2);
        if ((size_t)(xend - x - 4) < sz)
            return zfail(err, LDS_E_PARSE, at, "an extra field runs past its header");
        if (id == 0x0001) {
            const unsigned char *v = x + 4, *vend = v + sz;
            for (int k = 0; k < 3; k++) {
                if (!fields[k] || *fields[k] != 0xFFFFFFFFu)
                    continue;
                if (vend - v < 8)
                    return zfail(err, LDS_E_PARSE, at, "a zip64 extra field is too short");
                *fields[k] = le64(v);
                if (fields_at[k])
                    *fields_at[k] = x_at + (uint64_t)(v - x0);
                v += 8;
            }
        }
        x += 4 + sz;
    }
    return LDS_OK;
}

/* Parses the central header at cd[i, cd_len); *next is the offset of the following one. */
static lds_status parse_entry(const unsigned char *cd, size_t cd_len, size_t i, uint64_t cd_off,
                              entry *e, size_t *next, lds_error *err)
{
    uint64_t at = cd_off + i;
    if (cd_len - i < 46 || lds__imp_le32(cd + i) != CDH_SIG)
        return zfail(err, LDS_E_PARSE, at, "expected a central directory header");
    const unsigned char *h = cd + i;
    e->flags = lds__imp_le16(h + 8);
    e->method = lds__imp_le16(h + 10);
    e->crc = lds__imp_le32(h + 16);
    e->csize = lds__imp_le32(h + 20);
    e->usize = lds__imp_le32(h + 24);
    e->csize_at = at + 20;
    e->usize_at = at + 24;
    size_t nlen = lds__imp_le16(h + 28), xlen = lds__imp_le16(h + 30), clen = lds__imp_le16(h + 32);
    e->local = lds__imp_le32(h + 42);
    e->at = at;
    if (cd_len - i - 46 < nlen + xlen + clen)
        return zfail(err, LDS_E_PARSE, at, "a central directory header runs past the directory");
    e->name = (const char *)h + 46;
    e->name_len = nlen;
    uint64_t *fields[3] = {&e->usize, &e->csize, &e->local};
    uint64_t *fields_at[3] = {&e->usize_at, &e->csize_at, NULL};
    lds_status st = zip64_fields(h + 46 + nlen, xlen, at + 46 + nlen, at, fields, fields_at, err);
    if (st != LDS_OK)
        return st;
    *next = i + 46 + nlen + xlen + clen;
    return LDS_OK;
}

/* Reads the local header of `e` (APPNOTE 4.3.7) and checks it against the central directory:
   the same method and name and, unless flag bit 3 defers them to a data descriptor, the same
   CRC-32 and sizes. *data is the offset of the entry's data. */
static lds_status check_local(int fd, uint64_t fsize, const entry *e, uint64_t *data,
                              lds_error *err)
{
    unsigned char lfh[30];
    lds_status st = LDS_OK;
    if (e->local > fsize - 30 || (st = zread(fd, lfh, 30, e->local, err)) != LDS_OK ||
        lds__imp_le32(lfh) != LFH_SIG) {
        if (st == LDS_OK)
            st = efail(err, LDS_E_PARSE, e, "npz.local_header", e->local,
                       "expected a local file header where the central directory (byte %llu) "
                       "puts it",
                       (unsigned long long)e->at);
        return st;
    }
    unsigned flags = lds__imp_le16(lfh + 6), method = lds__imp_le16(lfh + 8);
    if (method != e->method)
        return efail(err, LDS_E_PARSE, e, "npz.method", e->local + 8,
                     "the local header says method %u, the central directory (byte %llu) %u",
                     method, (unsigned long long)(e->at + 10), e->method);
    size_t nlen = lds__imp_le16(lfh + 26), xlen = lds__imp_le16(lfh + 28);
    if (nlen + xlen > fsize - e->local - 30)
        return efail(err, LDS_E_TRUNCATED, e, "npz.local_header", e->local,
                     "the local header's name and extra fields run past the file");
    unsigned char *nx = malloc(nlen + xlen + 1);
    if (!nx)
        return lds__imp_fail(err, LDS_E_NOMEM, "npz", e->local, 0, "out of memory (zip header)");
    if ((st = zread(fd, nx, nlen + xlen, e->local + 30, err)) != LDS_OK)
        goto out;
    if (nlen != e->name_len || memcmp(nx, e->name, nlen) != 0) {
        char q[4 * LDS__IMP_SHOWN + 8];
        st = efail(err, LDS_E_PARSE, e, "npz.name", e->local + 30, "the local header names it '%s'",
                   lds__imp_quote(q, sizeof q, (const char *)nx, nlen));
        goto out;
    }
    if (!(flags & 8u)) {
        uint32_t crc = lds__imp_le32(lfh + 14);
        uint64_t csize = lds__imp_le32(lfh + 18), usize = lds__imp_le32(lfh + 22);
        uint64_t csize_at = e->local + 18, usize_at = e->local + 22;
        uint64_t *fields[3] = {&usize, &csize, NULL};
        uint64_t *fields_at[3] = {&usize_at, &csize_at, NULL};
        if ((st = zip64_fields(nx + nlen, xlen, e->local + 30 + nlen, e->local, fields, fields_at,
                               err)) != LDS_OK)
            goto out;
        if (crc != e->crc)
            st = efail(err, LDS_E_PARSE, e, "npz.crc32", e->local + 14,
                       "the local header's CRC-32 is %08x, the central directory's (byte %llu) "
                       "%08x",
                       crc, (unsigned long long)(e->at + 16), e->crc);
        else if (csize != e->csize)
            st = efail(err, LDS_E_PARSE, e, "npz.compressed_size", csize_at,
                       "the local header's compressed size is %llu, the central directory's "
                       "(byte %llu) %llu",
                       (unsigned long long)csize, (unsigned long long)e->csize_at,
                       (unsigned long long)e->csize);
        else if (usize != e->usize)
            st = efail(err, LDS_E_PARSE, e, "npz.uncompressed_size", usize_at,
                       "the local header's uncompressed size is %llu, the central directory's "
                       "(byte %llu) %llu",
                       (unsigned long long)usize, (unsigned long long)e->usize_at,
                       (unsigned long long)e->usize);
        if (st != LDS_OK)
            goto out;
    }
    *data = e->local + 30 + nlen + xlen;
out:
    free(nx);
    return st;
}

/* Reads what is left of the entry (the columns of a Fortran-order array were read by
   offset), at most `most` more bytes: false when it stopped there. */
static bool drain(lds__imp_reader *in, uint64_t most, lds_status *st, lds_error *err)
{
    unsigned char rest[4096];
    size_t got;
    uint64_t start = in->delivered;
    do {
        if (in->delivered - start > most)
            return false;
        *st = lds__imp_reader_read(in, rest, sizeof rest, &got, err);
    } while (*st == LDS_OK && got == sizeof rest);
    return true;
}

static lds_status crc_fail(lds_error *err, const entry *e, uint64_t data, uint32_t crc)
{
    return efail(err, LDS_E_CHECKSUM, e, "npz.crc32", e->at + 16,
                 "its data (bytes %llu to %llu) has CRC-32 %08x, the central directory declares "
                 "%08x: the entry is damaged",
                 (unsigned long long)data, (unsigned long long)(data + e->csize), crc, e->crc);
}

/* After the array was read from the entry at `data`: reads the rest, then checks what the
   entry decoded to against the central directory: no bytes after the end of a deflate
   stream inside the compressed size, the uncompressed size, the CRC-32 (APPNOTE 4.4.7-9). */
static lds_status check_read(lds__imp_reader *in, const entry *e, uint64_t data, lds_error *err)
{
    lds_status st = LDS_OK;
    drain(in, UINT64_MAX, &st, err);
    if (st != LDS_OK)
        return st;
    if (e->method == 8) {
        uint64_t left = (in->zlen - in->zpos) + in->raw_left;
        if (left > 0)
            return efail(err, LDS_E_TRAILING, e, "npz.compressed_size", data + e->csize - left,
                         "%llu bytes after the end of its deflate stream, inside its compressed "
                         "size of %llu (byte %llu)",
                         (unsigned long long)left, (unsigned long long)e->csize,
                         (unsigned long long)e->csize_at);
    }
    if (in->delivered != e->usize)
        return efail(err, LDS_E_LENGTH_MISMATCH, e, "npz.uncompressed_size", e->usize_at,
                     "the uncompressed size declares %llu bytes, but the entry's data (byte "
                     "%llu) %s %llu",
                     (unsigned long long)e->usize, (unsigned long long)data,
                     e->method == 8 ? "decodes to" : "holds", (unsigned long long)in->delivered);
    if (in->crc != e->crc)
        return crc_fail(err, e, data, in->crc);
    return LDS_OK;
}

/* Whether the .npy reader's refusal `st` came from a damaged entry: after a refusal that
   bad bytes can cause, the rest of the entry (at most DIAG_MOST bytes more) is read for its
   CRC-32, and a mismatch is the refusal reported (the cause, as numpy reports it). */
#define DIAG_MOST ((uint64_t)64 << 20)
static bool damaged(lds__imp_reader *in, const entry *e, lds_status st)
{
    if (st != LDS_E_BAD_VALUE && st != LDS_E_TRAILING && st != LDS_E_TRUNCATED &&
        st != LDS_E_PARSE && st != LDS_E_UNSUPPORTED && st != LDS_E_LIMIT)
        return false;
    lds_status rest = LDS_OK;
    return drain(in, DIAG_MOST, &rest, NULL) && rest == LDS_OK && in->crc != e->crc;
}

/* Whether the refusal `st` is the decoder stopping at the entry's declared uncompressed
   size (set as its max_decoded, below the options' own `max_before`). */
static bool past_declared(const lds__imp_reader *in, const entry *e, uint64_t max_before,
                          lds_status st, const lds_error *err)
{
    return st == LDS_E_LIMIT && e->method == 8 && e->usize < max_before &&
           in->max_decoded == e->usize && err && err->field &&
           strcmp(err->field, "compressed") == 0;
}

/* Puts ".npz entry 'NAME' (data at byte N): " before a message about the entry's contents
   (the .npy reader's and the decoder's messages do not know the entry). */
static void name_entry(lds_error *err, const entry *e, uint64_t data)
{
    if (!err || err->size < offsetof(lds_error, message) + sizeof err->message || !err->field)
        return;
    const char *f = err->field;
    if (strcmp(f, "row") != 0 && strcmp(f, "compressed") != 0 && strncmp(f, "npy.", 4) != 0)
        return; /* the keys file, the ids file, the writer */
    char q[4 * LDS__IMP_SHOWN + 8], pre[4 * LDS__IMP_SHOWN + 64], text[sizeof err->message];
    int n = snprintf(pre, sizeof pre, ".npz entry '%s' (data at byte %llu): ",
                     lds__imp_quote(q, sizeof q, e->name, e->name_len), (unsigned long long)data);
    size_t plen = n < 0 ? 0 : (size_t)n < sizeof pre ? (size_t)n : sizeof pre - 1;
    if (plen >= sizeof err->message)
        return;
    size_t tlen = strnlen(err->message, sizeof err->message - 1);
    memcpy(text, err->message, tlen);
    if (plen + tlen >= sizeof err->message)
        tlen = sizeof err->message - 1 - plen;
    memcpy(err->message, pre, plen);
    memcpy(err->message + plen, text, tlen);
    err->message[plen + tlen] = '\0';
}

/* Where the central directory is: the end record (and, when a field is saturated,
   the zip64 one it points to) gives its offset, size and entry count; *eocd_at is
   the end record's offset, for messages. */
typedef struct zip_dir {
    uint64_t eocd_at, count, cd_size, cd_off;
} zip_dir;

static lds_status find_directory(int fd, uint64_t fsize, zip_dir *z, lds_error *err)
{
    /* The end record is the last 22 bytes, or fewer than 64 KiB of comment before that. */
    size_t tail = (size_t)(fsize < EOCD_SIZE + MAX_COMMENT ? fsize : EOCD_SIZE + MAX_COMMENT);
    uint64_t tail_off = fsize - tail;
    unsigned char *buf = malloc(tail);
    if (!buf)
        return lds__imp_fail(err, LDS_E_NOMEM, "npz", 0, 0, "out of memory (zip directory)");
    lds_status st = zread(fd, buf, tail, tail_off, err);
    if (st != LDS_OK) {
        free(buf);
        return st;
    }
    /* Searched from the end, and the comment length must reach the file's end
       exactly: a signature inside a comment is not taken for the record. */
    size_t eo = SIZE_MAX;
    for (size_t i = tail - EOCD_SIZE + 1; i-- > 0;)
        if (lds__imp_le32(buf + i) == EOCD_SIG && lds__imp_le16(buf + i + 20) == tail - i - 22) {
            eo = i;
            break;
        }
    if (eo == SIZE_MAX) {
        free(buf);
        return zfail(err, LDS_E_PARSE, fsize,
                     "no end of central directory record (not a zip file)");
    }
    z->eocd_at = tail_off + eo;
    z->count = lds__imp_le16(buf + eo + 10);
    z->cd_size = lds__imp_le32(buf + eo + 12);
    z->cd_off = lds__imp_le32(buf + eo + 16);
    free(buf);
    /* numpy writes zip64 records for large arrays: a saturated field means "see the
       zip64 end record". */
    if (z->count == 0xFFFF || z->cd_size == 0xFFFFFFFFu || z->cd_off == 0xFFFFFFFFu) {
        unsigned char loc[20], z64[56];
        uint64_t eocd_at = z->eocd_at;
        if (eocd_at < 20 || (st = zread(fd, loc, 20, eocd_at - 20, err)) != LDS_OK ||
            lds__imp_le32(loc) != Z64_LOC_SIG)
            return zfail(err, LDS_E_PARSE, eocd_at, "zip64 fields but no zip64 locator");
        uint64_t z64_at = le64(loc + 8);
        if (z64_at > fsize - 56 || (st = zread(fd, z64, 56, z64_at, err)) != LDS_OK ||
            lds__imp_le32(z64) != Z64_EOCD_SIG)
            return st == LDS_OK
                       ? zfail(err, LDS_E_PARSE, z64_at, "no zip64 end of central directory record")
                       : st;
        z->count = le64(z64 + 32);
        z->cd_size = le64(z64 + 40);
        z->cd_off = le64(z64 + 48);
    }
    if (z->cd_off > fsize || z->cd_size > fsize - z->cd_off)
        return zfail(err, LDS_E_TRUNCATED, z->eocd_at, "the central directory runs past the file");
    if (z->cd_size > MAX_CD_BYTES)
        return zfail(err, LDS_E_LIMIT, z->eocd_at, "central directory above 16 MiB");
    return LDS_OK;
}

/* Reads the central directory and picks the entry to import: the one named by
   options.array, or the only one. Every entry is parsed (and so checked), and
   their names are listed in the message when the choice fails. The directory is
   left in *cdp for the caller to free: an entry's name points into it. */
static lds_status pick_entry(lds__imp_ctx *c, const zip_dir *z, unsigned char **cdp, entry *pick,
                             lds_error *err)
{
    unsigned char *cd = *cdp = malloc(z->cd_size ? (size_t)z->cd_size : 1);
    if (!cd)
        return lds__imp_fail(err, LDS_E_NOMEM, "npz", 0, 0, "out of memory (zip directory)");
    lds_status st = zread(c->in.fd, cd, (size_t)z->cd_size, z->cd_off, err);
    const char *want = c->opts->array;
    entry e;
    memset(pick, 0, sizeof *pick);
    memset(&e, 0, sizeof e);
    bool found = false;
    uint64_t seen = 0;
    char names[160] = "";
    size_t i = 0;
    for (uint64_t k = 0; st == LDS_OK && k < z->count; k++) {
        size_t next = 0;
        if ((st = parse_entry(cd, (size_t)z->cd_size, i, z->cd_off, &e, &next, err)) != LDS_OK)
            break;
        i = next;
        seen++;
        size_t used = strlen(names);
        if (used + e.name_len + 8 < sizeof names) {
            char q[4 * LDS__IMP_SHOWN + 8];
            snprintf(names + used, sizeof names - used, "%s'%s'", used ? ", " : "",
                     lds__imp_quote(q, sizeof q, e.name, e.name_len));
        }
        if (want ? is_named(&e, want) : true) {
            /* Two entries of one name would make the choice depend on the order. */
            if (want && found) {
                st = efail(err, LDS_E_PARSE, &e, "npz.name", e.at + 46,
                           "a second entry with the array's name");
                break;
            }
            if (!found)
                *pick = e;
            found = true;
        }
    }
    if (st != LDS_OK)
        return st;
    if (seen == 0)
        return zfail(err, LDS_E_PARSE, z->cd_off, "the file holds no arrays");
    if (!want && seen > 1)
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.array", 0, 0,
                             ".npz holds %llu arrays (%s); name one (--array NAME)",
                             (unsigned long long)seen, names);
    if (!found) {
        char q[4 * LDS__IMP_SHOWN + 8];
        return lds__imp_fail(err, LDS_E_INVALID_ARG, "options.array", 0, 0,
                             ".npz has no array '%s' (it holds %s)",
                             lds__imp_quote(q, sizeof q, want, strlen(want)), names);
    }
    return LDS_OK;
}

/* The picked entry's flags, method, local header and sizes; *data is the file
   offset of its data. */
static lds_status check_pick(int fd, uint64_t fsize, const entry *pick, uint64_t *data,
                             lds_error *err)
{
    if (pick->flags & 1u)
        return efail(err, LDS_E_UNSUPPORTED, pick, "npz.flags", pick->at + 8, "it is encrypted");
    if (pick->method != 0 && pick->method != 8)
        return efail(err, LDS_E_UNSUPPORTED, pick, "npz.method", pick->at + 10,
                     "compression method %u is neither stored (0) nor deflate (8)", pick->method);
    lds_status st = check_local(fd, fsize, pick, data, err);
    if (st != LDS_OK)
        return st;
    if (*data > fsize || pick->csize > fsize - *data)
        return efail(
            err, LDS_E_TRUNCATED, pick, "npz.compressed_size", pick->csize_at,
            "its %llu bytes of data at byte %llu run past the end of the file (%llu bytes)",
            (unsigned long long)pick->csize, (unsigned long long)*data, (unsigned long long)fsize);
    if (pick->method == 0 && pick->csize != pick->usize)
        return efail(err, LDS_E_PARSE, pick, "npz.uncompressed_size", pick->usize_at,
                     "a stored entry whose sizes differ (compressed %llu, uncompressed %llu)",
                     (unsigned long long)pick->csize, (unsigned long long)pick->usize);
    return LDS_OK;
}

/* Imports the picked entry's .npy, decoded through the reader, and checks what was
   read against the entry's sizes and CRC-32; an error from the .npy importer is
   restated as the entry's fault where the entry is what lied. */
static lds_status read_entry(lds__imp_ctx *c, const entry *pick, uint64_t data, lds_error *err)
{
    lds__imp_reader *in = &c->in;
    lds_status st = lds__imp_reader_restart(
        in, data, pick->csize, pick->method == 0 ? LDS__CODEC_NONE : LDS__CODEC_DEFLATE, err);
    if (st != LDS_OK)
        return st;
    in->crc_on = true;
    /* A deflate entry decodes to no more than its declared uncompressed size: a lying size
       stops the decoder there (a 1 MB entry declaring 4,000 bytes once wrote a gigabyte
       before its CRC-32 was compared), not at max_decoded_bytes. */
    uint64_t max_before = in->max_decoded;
    if (pick->method == 8 && pick->usize < in->max_decoded)
        in->max_decoded = pick->usize;
    if ((st = lds__import_npy_stream(c, ".npz entry", err)) != LDS_OK) {
        if (past_declared(in, pick, max_before, st, err))
            st = efail(err, LDS_E_LENGTH_MISMATCH, pick, "npz.uncompressed_size", pick->usize_at,
                       "the uncompressed size declares %llu bytes, but the entry's data (byte "
                       "%llu) decodes to more",
                       (unsigned long long)pick->usize, (unsigned long long)data);
        else if (damaged(in, pick, st))
            st = crc_fail(err, pick, data, in->crc);
        else
            name_entry(err, pick, data);
        return st;
    }
    st = check_read(in, pick, data, err);
    if (st != LDS_OK && past_declared(in, pick, max_before, st, err))
        st = efail(err, LDS_E_LENGTH_MISMATCH, pick, "npz.uncompressed_size", pick->usize_at,
                   "the uncompressed size declares %llu bytes, but the entry's data (byte %llu) "
                   "decodes to more",
                   (unsigned long long)pick->usize, (unsigned long long)data);
    return st;
}

/* NumPy .npz: a zip of .npy entries, stored or deflated; one is imported. The
   directory is at the file's end, so the input must be a regular file. */
lds_status lds__import_npz(lds__imp_ctx *c, lds_error *err)
{
    lds__imp_reader *in = &c->in;
    uint64_t fsize = in->file_size;
    if (fsize == UINT64_MAX || in->codec != LDS__CODEC_NONE)
        return lds__imp_fail(err, LDS_E_UNSUPPORTED, "npz", 0, 0,
                             ".npz input must be an uncompressed regular file (its directory is "
                             "at its end)");
    if (fsize < EOCD_SIZE)
        return zfail(err, LDS_E_PARSE, 0, "too short for a zip file");
    zip_dir z = {0, 0, 0, 0}; /* gcc -O3 cannot prove find_directory sets it */
    entry pick;
    unsigned char *cd = NULL; /* the central directory, which pick.name points into */
    uint64_t data = 0;
    lds_status st;
    if ((st = find_directory(in->fd, fsize, &z, err)) == LDS_OK &&
        (st = pick_entry(c, &z, &cd, &pick, err)) == LDS_OK &&
        (st = check_pick(in->fd, fsize, &pick, &data, err)) == LDS_OK)
        st = read_entry(c, &pick, data, err);
    free(cd);
    return st;
}
