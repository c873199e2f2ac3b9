/* lodestar diff OLD NEW: the chunks a delta reload from OLD to NEW reads (docs/adr/0047). */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>
#include <zstd.h>

static const char diff_usage[] =
    "usage: lodestar diff [--json] OLD NEW\n"
    "\n"
    "Print the chunks of the index file NEW that a delta reload of a live index\n"
    "serving OLD would read from NEW (lds_live_reload_path, docs/adr/0047): the\n"
    "chunks whose XXH3-64 and length match no chunk of OLD, as payload byte ranges\n"
    "(consecutive chunks on one line), then the bytes such a reload reads (those\n"
    "chunks and NEW's chunk table) and copies from OLD. Only the two headers and\n"
    "chunk tables are read, each table checked against its header; the chunks' own\n"
    "bytes are verified by the reload. OLD may be compressed (zstd): it is\n"
    "decompressed, as a stream, to read its header and chunk table, since a live\n"
    "index serving it holds it decompressed. When a delta cannot be used (either\n"
    "file format 1.0, NEW compressed, or another chunk size) it says why and that\n"
    "the reload reads all of NEW.\n"
    "\n"
    "options:\n"
    "  --json   one JSON object: chunk_bytes, chunks, payload_bytes, delta (false\n"
    "           when a delta cannot be used, with \"why\"), read (a list of\n"
    "           [first chunk, last chunk, first payload byte, end byte]),\n"
    "           chunks_read, bytes_read, bytes_copied; without a delta the reload\n"
    "           reads NEW whole, not by chunks: chunks_read is null (\"why\" says\n"
    "           why), bytes_read NEW's payload (null for a compressed NEW)\n"
    "\n"
    "Exit status: 0 (whether or not the files differ), 1 failure (a file cannot be\n"
    "read, or its header or chunk table is corrupt), 2 usage error.\n";

typedef struct dfile {
    const char *path;
    lds_header h;
    bool chunked;
    unsigned char *table; /* 8 x chunk_count bytes, checked */
    const char *why;      /* why it cannot take part in a delta; NULL: it can */
    bool compressed;      /* a zstd frame: no header to read before decompressing */
    bool old;             /* OLD (may be compressed: read through zstd) */
} dfile;

/* OLD compressed with zstd: its header and chunk table, read by decompressing it as a
   stream (whole, if need be: the table ends the payload), keeping only those bytes. A live
   index serving OLD holds it decompressed and plans a delta from it like any other (found
   by a tester: diff said a zstd OLD could not give a delta, and the live index made one).
   NEW cannot be compressed: a delta reads NEW's chunks at their offsets. */
static int read_zstd_dfile(dfile *f, int fd, uint64_t start)
{
    ZSTD_DCtx *z = ZSTD_createDCtx();
    size_t in_cap = ZSTD_DStreamInSize(), out_cap = ZSTD_DStreamOutSize();
    unsigned char *in = malloc(in_cap), *out = malloc(out_cap);
    unsigned char hb[LDS_HEADER_SIZE];
    int rc = CLI_OK;
    if (!z || !in || !out) {
        rc = cli_failf("%s: no memory to decompress it", f->path);
        goto done;
    }
    /* decompressed bytes seen; compressed bytes read (from the zstd frame, past any skippable
       frames before it: they end a frame that decompresses to nothing) */
    uint64_t pos = 0, off = start;
    uint64_t t0 = 0, tn = 0; /* the table's decompressed byte range, once the header is read */
    bool have_header = false, frame_open = false, table_done = false;
    for (;;) {
        ssize_t r = pread(fd, in, in_cap, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = cli_failf("%s: %s", f->path, strerror(errno));
            goto done;
        }
        if (r == 0)
            break;
        ZSTD_inBuffer ib = {in, (size_t)r, 0};
        while (ib.pos < ib.size) {
            ZSTD_outBuffer ob = {out, out_cap, 0};
            size_t before = ib.pos;
            size_t left = ZSTD_decompressStream(z, &ob, &ib);
            if (ZSTD_isError(left)) {
                rc = cli_failf("%s: zstd: %s (at compressed byte %" PRIu64 ")", f->path,
                               ZSTD_getErrorName(left), off + ib.pos);
                goto done;
            }
            if (ob.pos == 0 && ib.pos == before) { /* an output buffer of a whole block */
                rc = cli_failf("%s: zstd made no progress at compressed byte %" PRIu64, f->path,
                               off + ib.pos);
                goto done;
            }
            frame_open = left != 0;
            for (size_t i = 0; i < ob.pos;) {
                uint64_t at = pos + i;
                if (!have_header) {
                    size_t n = ob.pos - i < LDS_HEADER_SIZE - at ? ob.pos - i
                                                                 : (size_t)(LDS_HEADER_SIZE - at);
                    memcpy(hb + at, out + i, n);
                    i += n;
                    if (at + n < LDS_HEADER_SIZE)
                        continue;
                    have_header = true;
                    lds_error err;
                    lds_error_init(&err);
                    if (lds_header_decode(hb, sizeof hb, &f->h, &err) != LDS_OK) {
                        rc = cli_failf("%s: %s (decompressed)", f->path, err.message);
                        goto done;
                    }
                    if (!lds_header_chunked(&f->h)) {
                        f->why = "is format 1.0 (no chunk table)";
                        goto done;
                    }
                    if (f->h.chunk_count > SIZE_MAX / 8 - 1) {
                        rc = cli_failf("%s: %" PRIu64 " chunks", f->path, f->h.chunk_count);
                        goto done;
                    }
                    t0 = LDS_HEADER_SIZE + f->h.chunk_table_offset;
                    tn = f->h.chunk_count * 8;
                    f->table = malloc((size_t)tn + 1);
                    if (!f->table) {
                        rc = cli_failf("%s: no memory for a %" PRIu64 "-byte chunk table",
                                       f->path, tn);
                        goto done;
                    }
                    continue;
                }
                /* the part of [at, pos + ob.pos) inside the table's range */
                uint64_t end = pos + ob.pos;
                uint64_t s = at > t0 ? at : t0, e = end < t0 + tn ? end : t0 + tn;
                if (s < e)
                    memcpy(f->table + (s - t0), out + (s - pos), (size_t)(e - s));
                i = ob.pos;
                if (end >= t0 + tn && !table_done) {
                    size_t n = (size_t)tn;
                    lds_error err;
                    lds_error_init(&err);
                    lds_status st = lds_chunk_table_check(&f->h, f->table, n, &err);
                    if (st != LDS_OK) {
                        rc = cli_fail(f->path, st, &err);
                        goto done;
                    }
                    table_done = true; /* the frame's end is still to be checked */
                }
            }
            pos += ob.pos;
            if (!frame_open) {
                /* The loader reads one frame holding exactly the header and the payload,
                   and refuses bytes after it (found by a tester: diff planned a delta from
                   files of several frames, or with bytes after the frame, that no live
                   index can load). */
                uint64_t want = LDS_HEADER_SIZE + (have_header ? f->h.payload_length : 0);
                if (!table_done || pos != want) {
                    rc = cli_failf("%s: its zstd frame ends after %" PRIu64 " decompressed bytes, "
                                   "%s %" PRIu64 " (a compressed index is one frame, as the "
                                   "loader reads it)",
                                   f->path, pos, pos < want ? "short of" : "past",
                                   want);
                    goto done;
                }
                bool more = ib.pos < ib.size;
                if (!more) {
                    unsigned char b;
                    ssize_t r2;
                    do
                        r2 = pread(fd, &b, 1, (off_t)(off + ib.size));
                    while (r2 < 0 && errno == EINTR);
                    more = r2 != 0;
                }
                if (more) {
                    rc = cli_failf("%s: bytes follow its zstd frame at compressed byte %" PRIu64
                                   " (the loader refuses them)",
                                   f->path, off + ib.pos);
                    goto done;
                }
                f->chunked = true;
                goto done;
            }
        }
        off += (uint64_t)r;
    }
    rc = cli_failf("%s: its zstd stream ends%s after %" PRIu64 " decompressed bytes, before its "
                   "%s",
                   f->path, frame_open ? " inside a frame" : "", pos,
                   have_header ? (table_done ? "frame's end" : "chunk table") : "header");
done:
    free(in);
    free(out);
    ZSTD_freeDCtx(z);
    return rc;
}

static uint64_t ld64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static int read_at(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? errno : -1;
        got += (size_t)r;
    }
    return 0;
}

static int open_dfile(dfile *f)
{
    int fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO: no wait */
    if (fd < 0)
        return cli_failf("%s: cannot open: %s", f->path, strerror(errno));
    /* diff reads the header and the chunk table at their offsets: a regular file only
       (a directory, a pipe or a device said as such, not as a short header) */
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return cli_failf("%s: %s", f->path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return cli_failf("%s: %s", f->path,
                         S_ISDIR(sb.st_mode)
                             ? "is a directory, not an index file"
                             : "is not a regular file (diff reads the header and the chunk "
                               "table at their offsets: save a pipe's index to a file first)");
    }
    unsigned char hb[LDS_HEADER_SIZE];
    int rc = CLI_OK;
    lds_error err;
    lds_error_init(&err);
    if (read_at(fd, hb, sizeof hb, 0) != 0) {
        rc = cli_failf("%s: cannot read its %d-byte header", f->path, LDS_HEADER_SIZE);
    } else if ((hb[0] == 0x28 && hb[1] == 0xB5 && hb[2] == 0x2F && hb[3] == 0xFD) ||
               ((hb[0] & 0xF0) == 0x50 && hb[1] == 0x2A && hb[2] == 0x4D && hb[3] == 0x18)) {
        /* a zstd frame, or a skippable frame (RFC 8878 section 3.1.2) before one */
        f->compressed = true;
        int64_t start = cli_zstd_frame_at(fd, (uint64_t)sb.st_size);
        if (start < 0)
            rc = cli_failf("%s: its skippable zstd frames (RFC 8878 section 3.1.2) are not "
                           "followed by a zstd frame inside the file (at most 16 are read)",
                           f->path);
        else if (f->old)
            rc = read_zstd_dfile(f, fd, (uint64_t)start);
        else
            f->why = "is compressed (zstd): a delta reads NEW's chunks at their offsets";
    } else {
        lds_status st = lds_header_decode(hb, sizeof hb, &f->h, &err);
        if (st != LDS_OK) {
            rc = cli_failf("%s: %s", f->path, err.message);
        } else if (!lds_header_chunked(&f->h)) {
            f->why = "is format 1.0 (no chunk table)";
        } else if (f->h.chunk_count > SIZE_MAX / 8) {
            rc = cli_failf("%s: %" PRIu64 " chunks", f->path, f->h.chunk_count);
        } else {
            size_t n = (size_t)f->h.chunk_count * 8;
            f->table = malloc(n + 1);
            if (!f->table)
                rc = cli_failf("%s: no memory for a %zu-byte chunk table", f->path, n);
            else if (read_at(fd, f->table, n, LDS_HEADER_SIZE + f->h.chunk_table_offset) != 0)
                rc = cli_failf("%s: cannot read its chunk table (%zu bytes at byte %" PRIu64 ")",
                               f->path, n, LDS_HEADER_SIZE + f->h.chunk_table_offset);
            else if ((st = lds_chunk_table_check(&f->h, f->table, n, &err)) != LDS_OK)
                rc = cli_fail(f->path, st, &err);
            else
                f->chunked = true;
        }
    }
    close(fd);
    return rc;
}

static uint64_t chunk_len(const lds_header *h, uint64_t k)
{
    uint64_t s = 0, e = 0;
    lds_chunk_range(h, k, &s, &e);
    return e - s;
}

/* Per chunk of b: found in a (same position first, then anywhere), as the reload does. */
static bool *matched_chunks(const dfile *a, const dfile *b)
{
    uint64_t n = b->h.chunk_count, m = a->h.chunk_count;
    bool *hit = calloc((size_t)n + 1, 1);
    uint64_t cap = 16;
    while (cap < m * 2)
        cap <<= 1;
    uint64_t *slot = malloc((size_t)cap * sizeof *slot);
    if (!hit || !slot) {
        free(hit);
        free(slot);
        return NULL;
    }
    for (uint64_t i = 0; i < cap; i++)
        slot[i] = UINT64_MAX;
    /* One slot per distinct (checksum, length): a checksum repeated D times (zero-filled
       rows) would otherwise make one run of D slots that every insert and lookup landing in
       it walks, chunks x D steps for a file of one repeated chunk. */
    for (uint64_t k = 0; k < m; k++) {
        uint64_t sum = ld64(a->table + k * 8), len = chunk_len(&a->h, k);
        uint64_t i = sum & (cap - 1);
        while (slot[i] != UINT64_MAX &&
               !(ld64(a->table + slot[i] * 8) == sum && chunk_len(&a->h, slot[i]) == len))
            i = (i + 1) & (cap - 1);
        if (slot[i] == UINT64_MAX)
            slot[i] = k;
    }
    for (uint64_t k = 0; k < n; k++) {
        uint64_t want = ld64(b->table + k * 8), len = chunk_len(&b->h, k);
        if (k < m && ld64(a->table + k * 8) == want && chunk_len(&a->h, k) == len) {
            hit[k] = true;
            continue;
        }
        for (uint64_t i = want & (cap - 1); slot[i] != UINT64_MAX && !hit[k];
             i = (i + 1) & (cap - 1))
            hit[k] = ld64(a->table + slot[i] * 8) == want && chunk_len(&a->h, slot[i]) == len;
    }
    free(slot);
    return hit;
}

int cli_diff(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *prog = argv[0];
    bool as_json = false;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(diff_usage, stdout);
            return cli_close_stdout(CLI_OK);
        case 'j':
            as_json = true;
            break;
        default:
            return cli_option_error(prog, c, argv);
        }
    }
    if (argc - optind != 2)
        return cli_usage_error(prog, "expected OLD NEW, got %d arguments", argc - optind);
    dfile a = {.path = argv[optind], .old = true}, b = {.path = argv[optind + 1]};
    /* diff reads two local files; a URL was reported as "No such file or directory"
       (found by a tester). A delta over HTTP is planned by lds_live_reload_url_delta. */
    for (int i = 0; i < 2; i++) {
        const char *p = i == 0 ? a.path : b.path;
        if (cli_is_url(p)) {
            char shown[512];
            return cli_usage_error(prog,
                                   "%s (%s) is a URL: diff compares two local files; download "
                                   "them first (a live index plans a delta over HTTP itself, "
                                   "lds_live_reload_url_delta)",
                                   i == 0 ? "OLD" : "NEW", lds_url_redact(p, shown, sizeof shown));
        }
    }
    int rc = open_dfile(&a);
    if (rc == CLI_OK)
        rc = open_dfile(&b);
    if (rc != CLI_OK) {
        free(a.table);
        free(b.table);
        return rc;
    }
    char whybuf[160];
    const char *why = NULL;
    if (a.why) {
        snprintf(whybuf, sizeof whybuf, "OLD %s", a.why);
        why = whybuf;
    } else if (b.why) {
        snprintf(whybuf, sizeof whybuf, "NEW %s", b.why);
        why = whybuf;
    } else if (a.h.chunk_bytes != b.h.chunk_bytes) {
        snprintf(whybuf, sizeof whybuf, "the chunk size changed (OLD %" PRIu32 ", NEW %" PRIu32 ")",
                 a.h.chunk_bytes, b.h.chunk_bytes);
        why = whybuf;
    }
    uint64_t payload = b.h.payload_length;
    bool *hit = why ? NULL : matched_chunks(&a, &b);
    if (!why && !hit) {
        free(a.table);
        free(b.table);
        return cli_failf("no memory to compare %" PRIu64 " chunks", b.h.chunk_count);
    }
    uint64_t n = why ? 0 : b.h.chunk_count, chunks_read = 0, bytes_read = 0;
    json_object *jo = as_json ? json_object_new_object() : NULL;
    json_object *jr = as_json ? json_object_new_array() : NULL;
    for (uint64_t k = 0; k < n;) {
        if (hit[k]) {
            k++;
            continue;
        }
        uint64_t k2 = k;
        while (k2 + 1 < n && !hit[k2 + 1])
            k2++;
        uint64_t s, e, s2, e2;
        lds_chunk_range(&b.h, k, &s, &e);
        lds_chunk_range(&b.h, k2, &s2, &e2);
        chunks_read += k2 - k + 1;
        bytes_read += e2 - s;
        if (jr) {
            json_object *run = json_object_new_array();
            json_object_array_add(run, json_object_new_int64((int64_t)k));
            json_object_array_add(run, json_object_new_int64((int64_t)k2));
            json_object_array_add(run, json_object_new_int64((int64_t)s));
            json_object_array_add(run, json_object_new_int64((int64_t)e2));
            json_object_array_add(jr, run);
        } else if (k2 == k) {
            printf("chunk %" PRIu64 "  payload bytes %" PRIu64 "..%" PRIu64 "  (%" PRIu64
                   " bytes)\n",
                   k, s, e2 - 1, e2 - s);
        } else {
            printf("chunks %" PRIu64 "..%" PRIu64 "  payload bytes %" PRIu64 "..%" PRIu64
                   "  (%" PRIu64 " bytes)\n",
                   k, k2, s, e2 - 1, e2 - s);
        }
        k = k2 + 1;
    }
    uint64_t table = why ? 0 : b.h.chunk_count * 8;
    uint64_t total_read = why ? payload : bytes_read + table;
    uint64_t copied = why ? 0 : payload - total_read;
    if (jo) {
        json_object_object_add(jo, "chunk_bytes", json_object_new_int64(b.h.chunk_bytes));
        json_object_object_add(jo, "chunks", json_object_new_int64((int64_t)b.h.chunk_count));
        /* a zstd NEW: its payload length is known only once decompressed (null, not 0) */
        json_object_object_add(jo, "payload_bytes",
                               b.compressed ? NULL : json_object_new_int64((int64_t)payload));
        json_object_object_add(jo, "delta", json_object_new_boolean(!why));
        if (why)
            json_object_object_add(jo, "why", json_object_new_string(why));
        json_object_object_add(jo, "read", jr);
        /* Without a delta nothing is read by chunks: null, not a 0 beside a whole payload. */
        json_object_object_add(jo, "chunks_read",
                               why ? NULL : json_object_new_int64((int64_t)chunks_read));
        json_object_object_add(jo, "bytes_read",
                               b.compressed ? NULL : json_object_new_int64((int64_t)total_read));
        json_object_object_add(jo, "bytes_copied", json_object_new_int64((int64_t)copied));
        puts(json_object_to_json_string_ext(jo, JSON_C_TO_STRING_PLAIN));
        json_object_put(jo);
    } else if (why && b.compressed) {
        printf("no delta: %s; a reload reads and decompresses all of NEW\n", why);
    } else if (why) {
        printf("no delta: %s; a reload reads all %" PRIu64 " payload bytes of NEW\n", why,
               payload);
    } else {
        printf("read %" PRIu64 " of %" PRIu64 " chunks (%" PRIu32 " bytes each): %" PRIu64
               " bytes with the %" PRIu64 "-byte chunk table, %.2f%% of the %" PRIu64
               "-byte payload; %" PRIu64 " bytes copied from OLD\n",
               chunks_read, b.h.chunk_count, b.h.chunk_bytes, total_read, table,
               payload ? 100.0 * (double)total_read / (double)payload : 0.0, payload, copied);
    }
    free(hit);
    free(a.table);
    free(b.table);
    return cli_close_stdout(CLI_OK);
}
