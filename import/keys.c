/* The keys file of .npy, .npz, .fvecs and HDF5 input (one key per line), and the line
   count of the keys and ids files. */
#include "import_internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

lds_status lds__imp_keys_count(lds__imp_ctx *c, uint64_t *lines, lds_error *err)
{
    return lds__imp_lines_count(&c->keys, c->opts->limits.max_rows, lines, err);
}

lds_status lds__imp_lines_count(lds__imp_reader *r, uint64_t max_rows, uint64_t *lines,
                                lds_error *err)
{
    const char *what = strcmp(r->field, "ids_path") == 0 ? "ids" : "keys";
    uint64_t count = 0;
    int last = -1;
    for (;;) {
        if (r->pos == r->len) {
            if (r->eof)
                break;
            lds_status st = lds__imp_reader_fill(r, err);
            if (st != LDS_OK)
                return st;
            continue;
        }
        for (size_t i = r->pos; i < r->len; i++)
            count += r->buf[i] == '\n';
        last = r->buf[r->len - 1];
        r->pos = r->len;
        /* Bounded whatever the file does: never past the size it had when opened (it
           grows: refused), nor past one line more than max_rows. */
        if (r->base + r->len > r->size)
            return lds__error_fill(err, LDS_E_IO, r->field, r->size, false, 0, 0, NULL,
                                   "the %s file grew past its size of %llu bytes while its "
                                   "lines were counted",
                                   what, (unsigned long long)r->size);
        if (count > max_rows)
            return lds__imp_fail(err, LDS_E_LIMIT, r->field, r->base + r->len, 0,
                                 "the %s file holds more than max_rows = %llu lines", what,
                                 (unsigned long long)max_rows);
    }
    if (last != -1 && last != '\n')
        count++;
    if (lseek(r->fd, 0, SEEK_SET) != 0)
        return lds__imp_fail(err, LDS_E_IO, r->field, 0, 0, "cannot rewind the %s file: %s", what,
                             strerror(errno));
    r->pos = r->len = 0;
    r->base = 0;
    r->eof = false;
    *lines = count;
    return lds__imp_reader_skip_bom(r, err);
}

lds_status lds__imp_keys_next(lds__imp_ctx *c, uint64_t row, const char **key, size_t *len,
                              lds_error *err)
{
    char *line;
    uint64_t off;
    lds_status st = lds__imp_reader_line(&c->keys, row + 1, &line, len, &off, err);
    if (st != LDS_OK)
        return st;
    if (!line)
        return lds__imp_fail(err, LDS_E_LENGTH_MISMATCH, "keys_path", off, row + 1,
                             "keys file line %llu: the keys file ended before row %llu",
                             (unsigned long long)(row + 1), (unsigned long long)row);
    *key = line;
    return LDS_OK;
}
