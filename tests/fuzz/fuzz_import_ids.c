/*
 * Fuzz target: the ids file (lds_import_options.ids_path). Input: one control byte, then
 * the ids file.
 *   bits 0-2: the rows of the GloVe input written here ("kR R -1" on line R + 1), 0 to 7;
 *   bit 3:    row 5's key is row 2's ("k2"), when there are 6 rows or more;
 *   bits 4-5: on_duplicate: error, first, last (a first pass), or first;
 *   bit 6:    dtype i8 with i8_scale_auto (one more pass over the input).
 * On success the index's ids must be those a reading of the file here gives, by the rules
 * of lodestar_import.h (digits only, LF or CRLF, the last line's newline optional, a UTF-8
 * BOM skipped, one line per input row): row r of the index holds the id of the r-th row kept.
 * A file those rules refuse must be refused, leaving nothing at the output path.
 */
#include "fuzz_common.h"

#define MAX_ROWS 8

/* The ids of ids[0, n) by the header's rules; false when they refuse the file. */
static bool reference(const uint8_t *p, size_t n, uint64_t *ids, size_t *count)
{
    if (n >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) {
        p += 3;
        n -= 3;
    }
    *count = 0;
    size_t i = 0;
    while (i < n) {
        size_t end = i;
        while (end < n && p[end] != '\n')
            end++;
        size_t len = end - i;
        if (len > 4096)
            return false; /* the importer's longest id line */
        if (len > 0 && p[i + len - 1] == '\r')
            len--;
        if (len == 0 || *count == MAX_ROWS)
            return false;
        uint64_t v = 0;
        for (size_t k = i; k < i + len; k++) {
            if (p[k] < '0' || p[k] > '9' || __builtin_mul_overflow(v, 10, &v) ||
                __builtin_add_overflow(v, (uint64_t)(p[k] - '0'), &v))
                return false;
        }
        ids[(*count)++] = v;
        i = end + 1;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in = {data, size};
    uint8_t ctl = fz_byte(&in);
    size_t rows = ctl & 7u;
    bool repeat = (ctl & 8) && rows >= 6;
    static const lds_import_dup dups[4] = {LDS_IMPORT_DUP_ERROR, LDS_IMPORT_DUP_FIRST,
                                           LDS_IMPORT_DUP_LAST, LDS_IMPORT_DUP_FIRST};
    lds_import_dup dup = dups[(ctl >> 4) & 3u];

    char text[MAX_ROWS * 24];
    size_t tn = 0;
    for (size_t r = 0; r < rows; r++)
        tn += (size_t)snprintf(text + tn, sizeof text - tn, "k%zu %zu -1\n",
                               repeat && r == 5 ? (size_t)2 : r, r);
    char in_path[64], ids_path[64], out_path[128];
    int fd = fz_memfile((const uint8_t *)text, tn, in_path, sizeof in_path);
    int ifd = fz_memfile(in.p, in.n, ids_path, sizeof ids_path);

    lds_import_options o;
    lds_import_options_default(&o);
    o.format = LDS_IMPORT_GLOVE;
    o.ids_path = ids_path;
    o.on_duplicate = dup;
    if (ctl & 64) {
        o.dtype = LDS_DTYPE_I8;
        o.i8_scale_auto = true;
    }
    snprintf(out_path, sizeof out_path, "%s/out.ldsi", fz_tmpdir());
    lds_import_result res = {.size = sizeof res};
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_import_file(in_path, out_path, &o, &res, &err);

    uint64_t want[MAX_ROWS];
    size_t lines = 0;
    bool valid = reference(in.p, in.n, want, &lines) && lines == rows && rows > 0 &&
                 !(repeat && dup == LDS_IMPORT_DUP_ERROR);
    if (st == LDS_OK) {
        if (!valid)
            abort(); /* accepted an ids file the rules refuse */
        size_t skipped = repeat ? (dup == LDS_IMPORT_DUP_LAST ? 2 : 5) : SIZE_MAX;
        lds_index *idx = NULL;
        if (lds_load_path(out_path, NULL, &idx, NULL, NULL) != LDS_OK || !lds_index_has_ids(idx))
            abort();
        if (lds_index_rows(idx) != rows - (repeat ? 1 : 0) || res.rows != lds_index_rows(idx))
            abort();
        uint64_t row = 0;
        for (size_t r = 0; r < rows; r++) {
            if (r == skipped)
                continue;
            uint64_t id;
            if (lds_index_id(idx, row, &id) != LDS_OK || id != want[r])
                abort();
            row++;
        }
        fz_exercise_index(idx);
        lds_index_free(idx);
        unlink(out_path);
    } else {
        if (valid)
            abort(); /* refused an ids file the rules accept */
        if (err.status != st || err.message[0] == 0 || access(out_path, F_OK) == 0)
            abort();
    }
    close(fd);
    close(ifd);
    return 0;
}
