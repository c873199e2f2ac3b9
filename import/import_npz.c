/* NumPy .npz: a zip file (PKWARE APPNOTE 6.3) of .npy entries, stored (method 0, np.savez)
   or deflated (method 8, np.savez_compressed), with zip64 fields as numpy writes them.
   The central directory is read by offset from the end; one entry is then read as .npy. */
#include "import_internal.h"

#include <errno.h>
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
    uint64_t csize, usize, local;
    uint64_t at; /* offset of its central header */
} entry;

/* Whether the entry is the array named `want` ("x" or "x.npy"). */
static bool is_named(const entry *e, const char *want)
{
    size_t n = strlen(want);
    if (e->name_len == n && memcmp(e->name, want, n) == 0)
        return true;
    return e->name_len == n + 4 && memcmp(e->name, want, n) == 0 &&
           memcmp(e->name + n, ".npy", 4) == 0;
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
    e->csize = lds__imp_le32(h + 20);
    e->usize = lds__imp_le32(h + 24);
    size_t nlen = lds__imp_le16(h + 28), xlen = lds__imp_le16(h + 30), clen = lds__imp_le16(h + 32);
    e->local = lds__imp_le32(h + 42);
    e->at = at;
    if (cd_len - i - 46 < nlen + xlen + clen)
        return zfail(err, LDS_E_PARSE, at, "a central directory header runs past the directory");
    e->name = (const char *)h + 46;
    e->name_len = nlen;
    /* Zip64 extended information (4.5.3): the 64-bit values of the fields set to all ones,
       in the order usize, csize, local. */
    const unsigned char *x = h + 46 + nlen, *xend = x + xlen;
    while (xend - x >= 4) {
        unsigned id = lds__imp_le16(x), sz = lds__imp_le16(x + 2);
        if ((size_t)(xend - x - 4) < sz)
            return zfail(err, LDS_E_PARSE, at, "an extra field runs past its header");
        if (id == 0x0001) {
            const unsigned char *v = x + 4, *vend = v + sz;
            uint64_t *fields[3] = {&e->usize, &e->csize, &e->local};
            for (int k = 0; k < 3; k++) {
                if (*fields[k] != 0xFFFFFFFFu)
                    continue;
                if (vend - v < 8)
                    return zfail(err, LDS_E_PARSE, at, "a zip64 extra field is too short");
                *fields[k] = le64(v);
                v += 8;
            }
        }
        x += 4 + sz;
    }
    *next = i + 46 + nlen + xlen + clen;
    return LDS_OK;
}

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
    /* The end record is the last 22 bytes, or fewer than 64 KiB of comment before that. */
    size_t tail = (size_t)(fsize < EOCD_SIZE + MAX_COMMENT ? fsize : EOCD_SIZE + MAX_COMMENT);
    uint64_t tail_off = fsize - tail;
    unsigned char *buf = malloc(tail);
    unsigned char *cd = NULL;
    if (!buf)
        return lds__imp_fail(err, LDS_E_NOMEM, "npz", 0, 0, "out of memory (zip directory)");
    lds_status st = zread(in->fd, buf, tail, tail_off, err);
    if (st != LDS_OK)
        goto out;
    size_t eo = SIZE_MAX;
    for (size_t i = tail - EOCD_SIZE + 1; i-- > 0;)
        if (lds__imp_le32(buf + i) == EOCD_SIG && lds__imp_le16(buf + i + 20) == tail - i - 22) {
            eo = i;
            break;
        }
    if (eo == SIZE_MAX) {
        st = zfail(err, LDS_E_PARSE, fsize, "no end of central directory record (not a zip file)");
        goto out;
    }
    uint64_t eocd_at = tail_off + eo;
    uint64_t count = lds__imp_le16(buf + eo + 10);
    uint64_t cd_size = lds__imp_le32(buf + eo + 12);
    uint64_t cd_off = lds__imp_le32(buf + eo + 16);
    if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu) {
        unsigned char loc[20], z64[56];
        if (eocd_at < 20 || (st = zread(in->fd, loc, 20, eocd_at - 20, err)) != LDS_OK ||
            lds__imp_le32(loc) != Z64_LOC_SIG) {
            st = zfail(err, LDS_E_PARSE, eocd_at, "zip64 fields but no zip64 locator");
            goto out;
        }
        uint64_t z64_at = le64(loc + 8);
        if (z64_at > fsize - 56 || (st = zread(in->fd, z64, 56, z64_at, err)) != LDS_OK ||
            lds__imp_le32(z64) != Z64_EOCD_SIG) {
            if (st == LDS_OK)
                st = zfail(err, LDS_E_PARSE, z64_at, "no zip64 end of central directory record");
            goto out;
        }
        count = le64(z64 + 32);
        cd_size = le64(z64 + 40);
        cd_off = le64(z64 + 48);
    }
    if (cd_off > fsize || cd_size > fsize - cd_off) {
        st = zfail(err, LDS_E_TRUNCATED, eocd_at, "the central directory runs past the file");
        goto out;
    }
    if (cd_size > MAX_CD_BYTES) {
        st = zfail(err, LDS_E_LIMIT, eocd_at, "central directory above 16 MiB");
        goto out;
    }
    cd = malloc(cd_size ? (size_t)cd_size : 1);
    if (!cd) {
        st = lds__imp_fail(err, LDS_E_NOMEM, "npz", 0, 0, "out of memory (zip directory)");
        goto out;
    }
    if ((st = zread(in->fd, cd, (size_t)cd_size, cd_off, err)) != LDS_OK)
        goto out;
    const char *want = c->opts->array;
    entry pick, e;
    memset(&pick, 0, sizeof pick);
    memset(&e, 0, sizeof e);
    bool found = false;
    uint64_t seen = 0;
    char names[160] = "";
    size_t i = 0;
    for (uint64_t k = 0; k < count; k++) {
        size_t next = 0;
        if ((st = parse_entry(cd, (size_t)cd_size, i, cd_off, &e, &next, err)) != LDS_OK)
            goto out;
        i = next;
        seen++;
        size_t used = strlen(names);
        if (used + e.name_len + 8 < sizeof names) {
            char q[4 * LDS__IMP_SHOWN + 8];
            snprintf(names + used, sizeof names - used, "%s'%s'", used ? ", " : "",
                     lds__imp_quote(q, sizeof q, e.name, e.name_len));
        }
        if (want ? is_named(&e, want) : true) {
            if (want && found) {
                st = zfail(err, LDS_E_PARSE, e.at, "two entries have the array's name");
                goto out;
            }
            if (!found)
                pick = e;
            found = true;
        }
    }
    if (seen == 0) {
        st = zfail(err, LDS_E_PARSE, cd_off, "the file holds no arrays");
        goto out;
    }
    if (!want && seen > 1) {
        st = lds__imp_fail(err, LDS_E_INVALID_ARG, "options.array", 0, 0,
                           ".npz holds %llu arrays (%s); name one (--array NAME)",
                           (unsigned long long)seen, names);
        goto out;
    }
    if (!found) {
        char q[4 * LDS__IMP_SHOWN + 8];
        st = lds__imp_fail(err, LDS_E_INVALID_ARG, "options.array", 0, 0,
                           ".npz has no array '%s' (it holds %s)",
                           lds__imp_quote(q, sizeof q, want, strlen(want)), names);
        goto out;
    }
    if (pick.flags & 1u) {
        st = zfail(err, LDS_E_UNSUPPORTED, pick.at, "the entry is encrypted");
        goto out;
    }
    if (pick.method != 0 && pick.method != 8) {
        st = zfail(err, LDS_E_UNSUPPORTED, pick.at,
                   "the entry's compression method is neither stored (0) nor deflate (8)");
        goto out;
    }
    unsigned char lfh[30];
    if (pick.local > fsize - 30 || (st = zread(in->fd, lfh, 30, pick.local, err)) != LDS_OK ||
        lds__imp_le32(lfh) != LFH_SIG) {
        if (st == LDS_OK)
            st = zfail(err, LDS_E_PARSE, pick.local, "expected a local file header");
        goto out;
    }
    uint64_t data = pick.local + 30 + lds__imp_le16(lfh + 26) + lds__imp_le16(lfh + 28);
    if (data > fsize || pick.csize > fsize - data) {
        st = zfail(err, LDS_E_TRUNCATED, pick.local, "the entry's data runs past the file");
        goto out;
    }
    if (pick.method == 0 && pick.csize != pick.usize) {
        st = zfail(err, LDS_E_PARSE, pick.at, "a stored entry whose two sizes differ");
        goto out;
    }
    st = lds__imp_reader_restart(in, data, pick.csize,
                                 pick.method == 0 ? LDS__CODEC_NONE : LDS__CODEC_DEFLATE, err);
    if (st == LDS_OK)
        st = lds__import_npy_stream(c, ".npz entry", err);
out:
    free(buf);
    free(cd);
    return st;
}
