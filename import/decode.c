/* The reader's byte source: the file as it is, or gzip (zlib), zstd or xz (liblzma)
   decoded as it is read, detected by magic. Memory is bounded by the decoders' own
   limits (zstd's default window cap of 2^27 bytes, xz's memlimit below) plus one chunk
   of undecoded bytes; the decoded total is bounded by options.max_decoded_bytes and by
   RATIO below, so a small file that decodes to terabytes (a "bomb") is refused early,
   never read to its end (ADR 0018). */
#include "import_internal.h"

#include <errno.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

/* Beyond the first RATIO_FREE decoded bytes, a stream may decode to at most RATIO times
   the compressed bytes read so far: embeddings (floats, decimal text) compress 1.1 to 4
   times, a bomb of zeros 1,000 (deflate's most) to 100,000 times (zstd, xz). */
#define RATIO      4096u
#define RATIO_FREE ((uint64_t)64 << 20)

/* Memory an .xz stream may ask of liblzma (xz -9e needs 674 MiB to compress, 65 MiB to
   decode); a stream that needs more is LDS_E_LIMIT. */
#define XZ_MEMLIMIT ((uint64_t)256 << 20)

typedef struct decoder {
    z_stream z;
    ZSTD_DStream *zs;
    lzma_stream xz;
    size_t zstd_hint; /* ZSTD_decompressStream's last return: 0 at a frame's end */
    uint64_t decoded;
} decoder;

const char *lds__imp_codec_name(lds__imp_codec codec)
{
    switch (codec) {
    case LDS__CODEC_GZIP:
        return "gzip";
    case LDS__CODEC_ZSTD:
        return "zstd";
    case LDS__CODEC_XZ:
        return "xz";
    case LDS__CODEC_DEFLATE:
        return "deflate";
    case LDS__CODEC_NONE:
        break;
    }
    return "plain";
}

/* File offset of the next undecoded byte (for messages about the compressed bytes). */
static uint64_t raw_offset(const lds__imp_reader *r)
{
    return r->file_base + r->raw_read - (r->zlen - r->zpos);
}

static lds_status dec_fail(lds__imp_reader *r, lds_error *err, lds_status st, const char *what,
                           const char *detail)
{
    uint64_t at = raw_offset(r);
    return lds__imp_fail(err, st, "compressed", at, 0,
                         "compressed byte %llu: the %s input %s%s%s%s", (unsigned long long)at,
                         lds__imp_codec_name(r->codec), what, detail ? " (" : "",
                         detail ? detail : "", detail ? ")" : "");
}

/* Reads from fd at most `cap` bytes, never past raw_left. */
static lds_status raw_read(lds__imp_reader *r, unsigned char *dst, size_t cap, size_t *n,
                           lds_error *err)
{
    if (r->raw_left < cap)
        cap = (size_t)r->raw_left;
    *n = 0;
    if (cap == 0)
        return LDS_OK;
    int e = lds__os_read(r->fd, dst, cap, n);
    if (e != 0) {
        errno = e;
        return lds__imp_fail(err, LDS_E_IO, r->field, r->file_base + r->raw_read, 0,
                             "read failed at byte %llu: %s",
                             (unsigned long long)(r->file_base + r->raw_read), strerror(e));
    }
    r->raw_read += *n;
    if (r->raw_left != UINT64_MAX)
        r->raw_left -= *n;
    return LDS_OK;
}

lds_status lds__imp_codec_start(lds__imp_reader *r, lds__imp_codec codec, lds_error *err)
{
    lds__imp_codec_end(r);
    r->codec = codec;
    r->dec_end = false;
    if (codec == LDS__CODEC_NONE)
        return LDS_OK;
    decoder *d = calloc(1, sizeof *d);
    if (!r->zbuf)
        r->zbuf = malloc(LDS__IMP_CHUNK);
    if (!d || !r->zbuf) {
        free(d);
        return lds__imp_fail(err, LDS_E_NOMEM, "compressed", 0, 0, "out of memory (decoder)");
    }
    r->dec = d;
    bool ok = true;
    switch (codec) {
    case LDS__CODEC_GZIP:
    case LDS__CODEC_DEFLATE:
        /* 15 + 16: a gzip wrapper; -15: raw deflate (an .npz entry). */
        ok = inflateInit2(&d->z, codec == LDS__CODEC_GZIP ? 15 + 16 : -15) == Z_OK;
        break;
    case LDS__CODEC_ZSTD:
        d->zs = ZSTD_createDStream();
        ok = d->zs && !ZSTD_isError(ZSTD_initDStream(d->zs));
        break;
    case LDS__CODEC_XZ: {
        lzma_stream init = LZMA_STREAM_INIT;
        d->xz = init;
        ok = lzma_stream_decoder(&d->xz, XZ_MEMLIMIT, LZMA_CONCATENATED) == LZMA_OK;
        break;
    }
    case LDS__CODEC_NONE:
        break;
    }
    if (!ok) {
        lds__imp_codec_end(r);
        r->codec = codec;
        return lds__imp_fail(err, LDS_E_NOMEM, "compressed", 0, 0, "cannot start the %s decoder",
                             lds__imp_codec_name(codec));
    }
    return LDS_OK;
}

void lds__imp_codec_end(lds__imp_reader *r)
{
    decoder *d = r->dec;
    if (d) {
        if (r->codec == LDS__CODEC_GZIP || r->codec == LDS__CODEC_DEFLATE)
            inflateEnd(&d->z);
        else if (r->codec == LDS__CODEC_ZSTD)
            ZSTD_freeDStream(d->zs);
        else if (r->codec == LDS__CODEC_XZ)
            lzma_end(&d->xz);
        free(d);
    }
    r->dec = NULL;
    r->codec = LDS__CODEC_NONE;
}

/* Refills zbuf when it is empty; sets zeof at the end of the file (or entry). */
static lds_status refill(lds__imp_reader *r, lds_error *err)
{
    if (r->zpos < r->zlen || r->zeof)
        return LDS_OK;
    size_t n;
    lds_status st = raw_read(r, r->zbuf, LDS__IMP_CHUNK, &n, err);
    if (st != LDS_OK)
        return st;
    r->zpos = 0;
    r->zlen = n;
    if (n == 0)
        r->zeof = true;
    return LDS_OK;
}

/* One decoder step from zbuf into dst; *made bytes out, *ended at a stream's end. */
static lds_status step(lds__imp_reader *r, unsigned char *dst, size_t cap, size_t *made,
                       bool *ended, lds_error *err)
{
    decoder *d = r->dec;
    size_t avail = r->zlen - r->zpos;
    *ended = false;
    *made = 0;
    if (r->codec == LDS__CODEC_GZIP || r->codec == LDS__CODEC_DEFLATE) {
        uInt in_n = avail > UINT32_MAX ? UINT32_MAX : (uInt)avail;
        uInt out_n = cap > UINT32_MAX ? UINT32_MAX : (uInt)cap;
        d->z.next_in = r->zbuf + r->zpos;
        d->z.avail_in = in_n;
        d->z.next_out = dst;
        d->z.avail_out = out_n;
        int rc = inflate(&d->z, Z_NO_FLUSH);
        r->zpos += in_n - d->z.avail_in;
        *made = out_n - d->z.avail_out;
        if (rc == Z_STREAM_END)
            *ended = true;
        else if (rc == Z_MEM_ERROR)
            return dec_fail(r, err, LDS_E_NOMEM, "needs more memory than there is", NULL);
        else if (rc != Z_OK && rc != Z_BUF_ERROR)
            return dec_fail(r, err, LDS_E_PARSE, "is corrupt", d->z.msg ? d->z.msg : "zlib");
        return LDS_OK;
    }
    if (r->codec == LDS__CODEC_ZSTD) {
        ZSTD_inBuffer in = {r->zbuf + r->zpos, avail, 0};
        ZSTD_outBuffer out = {dst, cap, 0};
        size_t rc = ZSTD_decompressStream(d->zs, &out, &in);
        r->zpos += in.pos;
        *made = out.pos;
        if (ZSTD_isError(rc)) {
            ZSTD_ErrorCode code = ZSTD_getErrorCode(rc);
            return dec_fail(r, err,
                            code == ZSTD_error_frameParameter_windowTooLarge ? LDS_E_LIMIT
                                                                             : LDS_E_PARSE,
                            "is corrupt or needs too large a window", ZSTD_getErrorName(rc));
        }
        d->zstd_hint = rc;
        return LDS_OK;
    }
    d->xz.next_in = r->zbuf + r->zpos;
    d->xz.avail_in = avail;
    d->xz.next_out = dst;
    d->xz.avail_out = cap;
    lzma_ret rc = lzma_code(&d->xz, r->zeof ? LZMA_FINISH : LZMA_RUN);
    r->zpos += avail - d->xz.avail_in;
    *made = cap - d->xz.avail_out;
    if (rc == LZMA_STREAM_END)
        *ended = true;
    else if (rc == LZMA_MEMLIMIT_ERROR)
        return dec_fail(r, err, LDS_E_LIMIT, "needs more than the 256 MiB decoder limit", NULL);
    else if (rc == LZMA_MEM_ERROR)
        return dec_fail(r, err, LDS_E_NOMEM, "needs more memory than there is", NULL);
    else if (rc == LZMA_BUF_ERROR)
        return dec_fail(r, err, LDS_E_TRUNCATED, "ends inside its stream", NULL);
    else if (rc != LZMA_OK)
        return dec_fail(r, err, LDS_E_PARSE, "is corrupt",
                        rc == LZMA_FORMAT_ERROR ? "not .xz" : "liblzma");
    return LDS_OK;
}

/* Adds what the source handed out to the entry's CRC-32 and count (an .npz entry). */
static void checked(lds__imp_reader *r, const unsigned char *dst, size_t n)
{
    if (!r->crc_on || n == 0)
        return;
    r->crc = (uint32_t)crc32_z(r->crc, dst, n);
    r->delivered += n;
}

static lds_status decoded_read(lds__imp_reader *r, unsigned char *dst, size_t cap, size_t *n,
                               lds_error *err);

lds_status lds__imp_source_read(lds__imp_reader *r, unsigned char *dst, size_t cap, size_t *n,
                                lds_error *err)
{
    lds_status st = r->codec == LDS__CODEC_NONE ? raw_read(r, dst, cap, n, err)
                                                : decoded_read(r, dst, cap, n, err);
    if (st == LDS_OK)
        checked(r, dst, *n);
    return st;
}

static lds_status decoded_read(lds__imp_reader *r, unsigned char *dst, size_t cap, size_t *n,
                               lds_error *err)
{
    decoder *d = r->dec;
    *n = 0;
    while (!r->dec_end) {
        lds_status st = refill(r, err);
        if (st != LDS_OK)
            return st;
        bool in_empty = r->zpos == r->zlen;
        if (in_empty && r->zeof) {
            bool complete = r->codec == LDS__CODEC_ZSTD && d->zstd_hint == 0 && d->decoded > 0;
            if (r->codec == LDS__CODEC_XZ) {
                /* LZMA_FINISH tells a stream end from a cut one. */
                size_t made;
                bool ended;
                if ((st = step(r, dst, cap, &made, &ended, err)) != LDS_OK)
                    return st;
                if (made > 0 || ended) {
                    r->dec_end = ended;
                    *n = made;
                    goto count;
                }
            }
            if (!complete)
                return dec_fail(r, err, LDS_E_TRUNCATED, "ends inside its stream", NULL);
            r->dec_end = true;
            break;
        }
        size_t made, before = r->zpos;
        bool ended;
        if ((st = step(r, dst, cap, &made, &ended, err)) != LDS_OK)
            return st;
        if (ended) {
            if (r->codec == LDS__CODEC_GZIP) {
                /* gzip writes one member per input file; `cat a.gz b.gz` is one input. */
                if ((st = refill(r, err)) != LDS_OK)
                    return st;
                if (r->zpos == r->zlen)
                    r->dec_end = true;
                else if (r->zbuf[r->zpos] != 0x1f)
                    return dec_fail(r, err, LDS_E_TRAILING,
                                    "has bytes after its last member that are not gzip", NULL);
                else if (inflateReset(&d->z) != Z_OK)
                    return dec_fail(r, err, LDS_E_PARSE, "is corrupt", "inflateReset");
            } else {
                r->dec_end = true; /* xz concatenates by itself; deflate is one stream */
            }
        }
        if (made > 0) {
            *n = made;
            goto count;
        }
        /* Neither input taken nor output made: a decoder that cannot go on. */
        if (!ended && r->zpos == before && !in_empty)
            return dec_fail(r, err, LDS_E_PARSE, "makes no progress", NULL);
    }
    return LDS_OK;
count:
    if (d->decoded + *n > r->max_decoded) {
        char limit[48];
        snprintf(limit, sizeof limit, "max_decoded_bytes = %llu",
                 (unsigned long long)r->max_decoded);
        return dec_fail(r, err, LDS_E_LIMIT, "decodes to more bytes than allowed", limit);
    }
    d->decoded += *n;
    if (d->decoded > RATIO_FREE && d->decoded / RATIO > r->raw_read) {
        char why[96];
        snprintf(why, sizeof why, "%llu bytes from %llu: more than %u to 1",
                 (unsigned long long)d->decoded, (unsigned long long)r->raw_read, RATIO);
        return dec_fail(r, err, LDS_E_LIMIT, "expands like a decompression bomb", why);
    }
    return LDS_OK;
}
