/* lodestar split: one index into N shard indexes and a manifest; lodestar verify MANIFEST. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const char split_usage[] =
    "usage: lodestar split [options] IN OUTDIR (--shards N | --max-rows N | --max-bytes SIZE)\n"
    "\n"
    "Split the index IN into indexes OUTDIR/shard-0000.ldsi ... covering its rows in\n"
    "order (the first shards take one row more when their number does not divide the\n"
    "rows), each with IN's dtype, metric, i8 scale, ids, keys and metadata. Last, "
    "OUTDIR/manifest.json\n"
    "is written (a temporary file renamed into place): the shards' files, their row\n"
    "ranges (first_row, rows: global row = first_row + row within the shard), whether\n"
    "they carry ids and keys, and each shard's checksum. 'lodestar verify\n"
    "OUTDIR/manifest.json' checks every shard against it. OUTDIR is created if missing.\n"
    "Shards are written under staging names and renamed into place only when all are\n"
    "written, so a split that fails leaves a split already in OUTDIR as it was; shard\n"
    "files of an earlier split beyond the new count are removed once the manifest is.\n"
    "The normalized flag is not carried: rows are copied as stored, never renormalized.\n"
    "\n"
    "options:\n"
    "  --shards N          number of shards, 1 .. 65536 and at most the rows\n"
    "  --max-rows N        as few shards as hold at most N rows each (equal split as above)\n"
    "  --max-bytes SIZE    as few shards as keep every shard FILE at most SIZE bytes (suffix\n"
    "                      K, M, G or T); the equal row split when it fits, else the split\n"
    "                      in row order whose largest file is smallest. Refused when one\n"
    "                      row's shard alone is larger. Exactly one of the three is given.\n"
    "  --max-payload SIZE  as for info\n"
    "  -h, --help          print this help\n";

#define MANIFEST_FORMAT    "lodestar-shards"
#define MANIFEST_MAX_BYTES (64 << 20)

/* Writes `text` to a temporary file beside `given` (beside the regular file a link there
   names: cli_output_target), fsynced; fills path[PATH_MAX] with where it is to be renamed
   and tmp[PATH_MAX + 32] with the temporary's name. The caller renames it. */
static int write_prepared(const char *given, const char *text, char *path, char *tmp)
{
    int rc = cli_output_target(given, path, PATH_MAX);
    if (rc != CLI_OK)
        return rc;
    if ((size_t)snprintf(tmp, PATH_MAX + 32, "%s.tmp-XXXXXX", path) >= PATH_MAX + 32)
        return cli_failf("%s: path too long", path);
    int fd = cli_create_temp(tmp, path);
    if (fd < 0)
        return cli_failf("cannot create a temporary file beside %s: %s", path, strerror(errno));
    size_t n = strlen(text), done = 0;
    while (done < n) {
        ssize_t w = write(fd, text + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return cli_failf("writing %s: %s", tmp, strerror(e));
        }
        done += (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return cli_failf("writing %s: %s", tmp, strerror(e));
    }
    return CLI_OK;
}

/* ---- shard sizes, for --max-bytes --------------------------------------- */

/* What a shard's file size depends on. The layout is docs/format.md's, as
   format/writer.c writes it: header, then 64-aligned sections (vectors, ids, keys:
   offsets of 4 bytes, or 8 when the key bytes pass 4 GiB, then the bytes; metadata),
   the section table, footer and checksum. cli_split checks every file it writes
   against the bound, so a drift between the two is an error, never an oversize shard. */
typedef struct {
    uint64_t row_bytes; /* dim x dtype size */
    bool ids;
    const uint64_t *key_prefix; /* key bytes of rows [0, r) at [r]; NULL without keys */
    uint64_t meta_bytes;        /* the metadata section before padding */
} shard_sizer;

static uint64_t pad64(uint64_t x)
{
    return (x + 63) & ~(uint64_t)63;
}

/* The file size of the shard holding rows [first, first + n). */
static uint64_t shard_file_bytes(const shard_sizer *z, uint64_t first, uint64_t n)
{
    uint64_t p = pad64(n * z->row_bytes);
    unsigned sections = 2; /* vectors, metadata */
    if (z->ids) {
        p += pad64(8 * n);
        sections++;
    }
    if (z->key_prefix) {
        uint64_t kb = z->key_prefix[first + n] - z->key_prefix[first];
        p += pad64((kb <= UINT32_MAX ? 4 : 8) * (n + 1) + kb);
        sections++;
    }
    p += pad64(z->meta_bytes);
    p += 32 + 24 * (uint64_t)sections + LDS_FOOTER_SIZE + LDS_CHECKSUM_SIZE;
    /* Format 1.1: the writer's chunk table, 8 bytes per chunk (format.md §2.5). */
    p += 8 * ((p + LDS_DEFAULT_FILE_CHUNK_BYTES - 1) / LDS_DEFAULT_FILE_CHUNK_BYTES);
    return LDS_HEADER_SIZE + p;
}

/* The most rows from `first` (at least 1) whose shard fits in `bound` bytes; the
   caller has checked that every single row fits. Binary search: the size only grows
   with n. */
static uint64_t rows_that_fit(const shard_sizer *z, uint64_t first, uint64_t left, uint64_t bound)
{
    uint64_t lo = 1, hi = left;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2;
        if (shard_file_bytes(z, first, mid) <= bound)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Shards needed to cover `rows` in order, each filled to `bound`; stops counting past
   `cap`. Rows per shard go to counts[] when it is not NULL (room for `cap`). */
static uint64_t greedy_split(const shard_sizer *z, uint64_t rows, uint64_t bound, uint64_t cap,
                             uint64_t *counts)
{
    uint64_t n = 0;
    for (uint64_t first = 0; first < rows && n <= cap; n++) {
        uint64_t take = rows_that_fit(z, first, rows - first, bound);
        if (counts && n < cap)
            counts[n] = take;
        first += take;
    }
    return n;
}

static void equal_split(uint64_t rows, uint64_t nshards, uint64_t *counts)
{
    for (uint64_t s = 0; s < nshards; s++)
        counts[s] = rows / nshards + (s < rows % nshards ? 1 : 0);
}

#define MAX_SHARDS 65536u

/* --max-bytes: fills *counts (malloc'd) and *nshards, or fails naming the row that
   cannot fit. The fewest shards (greedy filling in row order is optimal for that);
   among splits into that many, the equal row split if every file fits, else the one
   whose largest file is smallest (binary search on the bound, greedy at each). */
static int plan_max_bytes(const lds_index *idx, uint64_t bound, uint64_t **counts,
                          uint64_t *nshards)
{
    uint64_t rows = lds_index_rows(idx);
    shard_sizer z = {
        .row_bytes = (uint64_t)lds_index_dim(idx) * lds_dtype_size(lds_index_dtype(idx)),
        .ids = lds_index_has_ids(idx),
    };
    const char *metric = lds_metric_name(lds_index_metric(idx));
    z.meta_bytes = 4 + (4 + 6) + (4 + strlen(metric)) + (4 + 10) + (4 + 5);
    for (size_t i = 0; i < lds_index_meta_count(idx); i++) {
        const char *k, *v;
        if (lds_index_meta_at(idx, i, &k, &v) != LDS_OK || strcmp(k, "metric") == 0 ||
            strcmp(k, "normalized") == 0)
            continue; /* as write_shard */
        z.meta_bytes += 8 + strlen(k) + strlen(v);
    }
    uint64_t *prefix = NULL;
    if (lds_index_has_keys(idx)) {
        if (rows >= SIZE_MAX / sizeof *prefix || !(prefix = malloc((rows + 1) * sizeof *prefix)))
            return cli_failf("out of memory");
        prefix[0] = 0;
        for (uint64_t r = 0; r < rows; r++) {
            const char *key = NULL;
            size_t kn = 0;
            lds_index_key(idx, r, &key, &kn);
            prefix[r + 1] = prefix[r] + kn;
        }
        z.key_prefix = prefix;
    }
    int rc = CLI_OK;
    uint64_t biggest = 0, at = 0;
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t b = shard_file_bytes(&z, r, 1);
        if (b > biggest) {
            biggest = b;
            at = r;
        }
        if (!prefix)
            break; /* without keys every row is alike */
    }
    if (biggest > bound) {
        rc = cli_failf("--max-bytes %" PRIu64 " is too small: the shard holding row %" PRIu64
                       " alone is %" PRIu64 " bytes",
                       bound, at, biggest);
        goto done;
    }
    uint64_t n = greedy_split(&z, rows, bound, MAX_SHARDS, NULL);
    if (n > MAX_SHARDS) {
        rc = cli_failf("--max-bytes %" PRIu64 " needs more than %u shards", bound, MAX_SHARDS);
        goto done;
    }
    if (!(*counts = malloc(n * sizeof **counts))) {
        rc = cli_failf("out of memory");
        goto done;
    }
    *nshards = n;
    equal_split(rows, n, *counts);
    uint64_t first = 0;
    bool fits = true;
    for (uint64_t s = 0; s < n && fits; first += (*counts)[s++])
        fits = shard_file_bytes(&z, first, (*counts)[s]) <= bound;
    if (!fits) {
        uint64_t lo = biggest, hi = bound; /* the smallest bound that still needs n shards */
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (greedy_split(&z, rows, mid, n, NULL) <= n)
                hi = mid;
            else
                lo = mid + 1;
        }
        greedy_split(&z, rows, lo, n, *counts);
    }
done:
    free(prefix);
    return rc;
}

/* Writes rows [first, first + rows) of `idx` to `path`. */
static int write_shard(const lds_index *idx, const char *in, const char *path, uint64_t first,
                       uint64_t rows, float *vec)
{
    uint32_t dim = lds_index_dim(idx);
    lds_writer_options o;
    lds_writer_options_default(&o);
    o.dim = dim;
    o.dtype = lds_index_dtype(idx);
    o.metric = lds_index_metric(idx);
    o.with_ids = lds_index_has_ids(idx);
    o.with_keys = lds_index_has_keys(idx);
    o.unique_keys = o.with_keys && lds_index_keys_unique(idx);
    if (o.dtype == LDS_DTYPE_I8)
        o.i8_scale = lds_index_i8_scale(idx);
    lds_error err;
    lds_error_init(&err);
    lds_writer *w = NULL;
    lds_status st = lds_writer_open_path(path, &o, &w, &err);
    if (st != LDS_OK)
        return cli_fail(path, st, &err);
    for (size_t i = 0; i < lds_index_meta_count(idx); i++) {
        const char *k, *v;
        if (lds_index_meta_at(idx, i, &k, &v) != LDS_OK)
            continue;
        if (strcmp(k, "metric") == 0 || strcmp(k, "normalized") == 0)
            continue; /* written from the options */
        if ((st = lds_writer_set_meta(w, k, v, &err)) != LDS_OK)
            goto fail;
    }
    for (uint64_t r = first; r < first + rows; r++) {
        if ((st = lds_index_row_f32(idx, r, vec, dim)) != LDS_OK) {
            lds_writer_free(w);
            return cli_fail(in, st, NULL);
        }
        uint64_t id = 0;
        const char *key = NULL;
        size_t kn = 0;
        if (o.with_ids)
            lds_index_id(idx, r, &id);
        if (o.with_keys)
            lds_index_key(idx, r, &key, &kn);
        if ((st = lds_writer_add_row(w, vec, dim, id, key, kn, &err)) != LDS_OK)
            goto fail;
    }
    if ((st = lds_writer_finish(w, &err)) != LDS_OK)
        goto fail;
    lds_writer_free(w);
    return CLI_OK;
fail:
    lds_writer_free(w);
    return cli_fail(path, st, &err);
}

int cli_split(int argc, char **argv)
{
    enum { OPT_SHARDS = 256, OPT_MAX_PAYLOAD, OPT_MAX_ROWS, OPT_MAX_BYTES };
    static const struct option longopts[] = {
        {"shards", required_argument, NULL, OPT_SHARDS},
        {"max-rows", required_argument, NULL, OPT_MAX_ROWS},
        {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
        {"max-payload", required_argument, NULL, OPT_MAX_PAYLOAD},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *prog = argv[0];
    uint64_t nshards = 0, max_rows = 0, max_bytes = 0;
    uint64_t staged = 0; /* shards written under their staging names, removed on failure */
    int bounds = 0;
    cli_load_request req = {.mmap = -1};
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(split_usage, stdout);
            return CLI_OK;
        case OPT_SHARDS:
            if (!cli_parse_u64(optarg, &nshards) || nshards == 0 || nshards > MAX_SHARDS)
                return cli_usage_error(prog, "--shards is 1 .. 65536, not '%s'", optarg);
            bounds++;
            break;
        case OPT_MAX_ROWS:
            if (!cli_parse_u64(optarg, &max_rows) || max_rows == 0)
                return cli_usage_error(prog, "--max-rows is a row count >= 1, not '%s'", optarg);
            bounds++;
            break;
        case OPT_MAX_BYTES:
            if (!cli_parse_size(optarg, &max_bytes) || max_bytes == 0)
                return cli_usage_error(prog,
                                       "--max-bytes wants a size in bytes >= 1 with an optional "
                                       "suffix K, M, G or T, not '%s'",
                                       optarg);
            bounds++;
            break;
        case OPT_MAX_PAYLOAD: {
            int rc = cli_parse_max_payload(prog, optarg, &req);
            if (rc >= 0)
                return rc;
            break;
        }
        default:
            return cli_option_error(prog, c, argv);
        }
    }
    if (argc - optind != 2)
        return cli_usage_error(prog, "expected IN and OUTDIR, got %d argument%s", argc - optind,
                               argc - optind == 1 ? "" : "s");
    if (bounds != 1)
        return cli_usage_error(prog, bounds ? "--shards, --max-rows and --max-bytes exclude "
                                              "each other: give one"
                                            : "one of --shards N, --max-rows N, --max-bytes "
                                              "SIZE is required");
    cli_set_source(&req, argv[optind]);
    const char *outdir = argv[optind + 1];
    if (mkdir(outdir, 0777) != 0 && errno != EEXIST)
        return cli_failf("cannot create %s: %s", outdir, strerror(errno));
    lds_index *idx = NULL;
    lds_load_info info;
    int rc = cli_load(&req, &idx, &info);
    if (rc != CLI_OK)
        return rc;
    uint64_t rows = lds_index_rows(idx);
    float *vec = NULL;
    uint64_t *counts = NULL;
    json_object *man = NULL;
    char mtmp[PATH_MAX + 32] = "";
    struct stat in_st;
    bool in_known = stat(req.file, &in_st) == 0;
    /* Keys declared unique that repeat would pass into shards each unique alone: refused
       as verify refuses IN. */
    lds_error kerr;
    lds_error_init(&kerr);
    lds_status kst = lds_index_has_keys(idx) ? lds_index_check_keys(idx, &kerr) : LDS_OK;
    if (kst != LDS_OK) {
        rc = cli_fail(req.file, kst, &kerr);
        goto done;
    }
    if (rows == 0) {
        rc = cli_failf("%s has no rows to split", req.file);
        goto done;
    }
    if (nshards > rows) {
        rc = cli_failf("%s has %" PRIu64 " rows, fewer than --shards %" PRIu64, req.file, rows,
                       nshards);
        goto done;
    }
    if (max_rows) {
        nshards = rows / max_rows + (rows % max_rows != 0);
        if (nshards > MAX_SHARDS) {
            rc = cli_failf("--max-rows %" PRIu64 " needs %" PRIu64 " shards for %" PRIu64
                           " rows, more than %u",
                           max_rows, nshards, rows, MAX_SHARDS);
            goto done;
        }
    }
    if (max_bytes) {
        if ((rc = plan_max_bytes(idx, max_bytes, &counts, &nshards)) != CLI_OK)
            goto done;
    } else if ((counts = malloc(nshards * sizeof *counts)) != NULL) {
        equal_split(rows, nshards, counts);
    }
    vec = malloc((size_t)lds_index_dim(idx) * sizeof *vec);
    if (!vec || !counts) {
        rc = cli_failf("out of memory");
        goto done;
    }
    man = json_object_new_object();
    json_object_object_add(man, "format", json_object_new_string(MANIFEST_FORMAT));
    json_object_object_add(man, "version", json_object_new_int(1));
    json_object_object_add(man, "rows", json_object_new_uint64(rows));
    json_object_object_add(man, "dim", json_object_new_uint64(lds_index_dim(idx)));
    json_object_object_add(man, "dtype",
                           json_object_new_string(lds_dtype_name(lds_index_dtype(idx))));
    json_object_object_add(man, "metric",
                           json_object_new_string(lds_metric_name(lds_index_metric(idx))));
    json_object_object_add(man, "has_ids", json_object_new_boolean(lds_index_has_ids(idx)));
    json_object_object_add(man, "has_keys", json_object_new_boolean(lds_index_has_keys(idx)));
    json_object *arr = json_object_new_array();
    json_object_object_add(man, "shards", arr);
    uint64_t first = 0;
    /* Every shard is written under a staging name first (.shard-NNNN.ldsi.split-tmp) and
       renamed into place only once all are written and read back, so a split that fails
       leaves a split already in OUTDIR as it was. */
    for (uint64_t s = 0; s < nshards; s++) {
        uint64_t n = counts[s];
        char name[32], path[PATH_MAX];
        snprintf(name, sizeof name, "shard-%04" PRIu64 ".ldsi", s);
        if ((size_t)snprintf(path, sizeof path, "%s/.%s.split-tmp", outdir, name) >= sizeof path) {
            rc = cli_failf("%s: path too long", outdir);
            goto done;
        }
        staged = s + 1;
        if (unlink(path) != 0 && errno != ENOENT) {
            rc = cli_failf("cannot remove %s: %s", path, strerror(errno));
            goto done;
        }
        if ((rc = write_shard(idx, req.file, path, first, n, vec)) != CLI_OK)
            goto done;
        /* The checksum as a reader sees it: load the shard back, fully verified. */
        cli_load_request sreq = {.file = path, .mmap = 0};
        lds_index *sh = NULL;
        if ((rc = cli_load(&sreq, &sh, &info)) != CLI_OK)
            goto done;
        if (max_bytes && lds_index_payload_bytes(sh) > max_bytes - LDS_HEADER_SIZE) {
            rc = cli_failf("%s: %" PRIu64 " bytes, above --max-bytes %" PRIu64
                           " (the size plan and the writer disagree: a bug)",
                           path, LDS_HEADER_SIZE + lds_index_payload_bytes(sh), max_bytes);
            lds_index_free(sh);
            goto done;
        }
        char sum[17];
        snprintf(sum, sizeof sum, "%016" PRIx64, lds_index_checksum(sh));
        json_object *o = json_object_new_object();
        json_object_object_add(o, "file", json_object_new_string(name));
        json_object_object_add(o, "first_row", json_object_new_uint64(first));
        json_object_object_add(o, "rows", json_object_new_uint64(lds_index_rows(sh)));
        json_object_object_add(o, "payload_bytes",
                               json_object_new_uint64(lds_index_payload_bytes(sh)));
        json_object_object_add(o, "checksum", json_object_new_string(sum));
        json_object_array_add(arr, o);
        lds_index_free(sh);
        first += n;
    }
    char mpath[PATH_MAX];
    if ((size_t)snprintf(mpath, sizeof mpath, "%s/manifest.json", outdir) >= sizeof mpath) {
        rc = cli_failf("%s: path too long", outdir);
        goto done;
    }
    const char *text = json_object_to_json_string_ext(man, JSON_C_TO_STRING_PRETTY |
                                                               JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t tl = strlen(text);
    char *withnl = malloc(tl + 2);
    if (!withnl) {
        rc = cli_failf("out of memory");
        goto done;
    }
    memcpy(withnl, text, tl);
    memcpy(withnl + tl, "\n", 2);
    char mfinal[PATH_MAX];
    rc = write_prepared(mpath, withnl, mfinal, mtmp);
    free(withnl);
    if (rc != CLI_OK)
        mtmp[0] = '\0'; /* write_prepared removed it */
    for (uint64_t s = 0; s < nshards && rc == CLI_OK; s++) {
        char from[PATH_MAX], to[PATH_MAX];
        snprintf(from, sizeof from, "%s/.shard-%04" PRIu64 ".ldsi.split-tmp", outdir, s);
        snprintf(to, sizeof to, "%s/shard-%04" PRIu64 ".ldsi", outdir, s);
        if (rename(from, to) != 0)
            rc = cli_failf("cannot rename %s to %s: %s", from, to, strerror(errno));
    }
    if (rc == CLI_OK)
        staged = 0;
    if (rc == CLI_OK) {
        if (rename(mtmp, mfinal) != 0)
            rc = cli_failf("cannot rename %s to %s: %s", mtmp, mfinal, strerror(errno));
        else
            mtmp[0] = '\0';
    }
    /* Shards of an earlier split beyond this one's count are in no manifest now (IN
       itself is never removed, whatever its name). */
    for (uint64_t s = nshards; rc == CLI_OK && s < MAX_SHARDS; s++) {
        char old[PATH_MAX];
        struct stat st;
        snprintf(old, sizeof old, "%s/shard-%04" PRIu64 ".ldsi", outdir, s);
        if (lstat(old, &st) != 0)
            break;
        if (in_known && st.st_dev == in_st.st_dev && st.st_ino == in_st.st_ino)
            continue;
        unlink(old);
    }
    if (rc == CLI_OK)
        printf("split %" PRIu64 " rows of %s into %" PRIu64 " shards; manifest %s\n", rows,
               req.file, nshards, mpath);
done:
    if (mtmp[0])
        unlink(mtmp);
    for (uint64_t s = 0; s < staged; s++) {
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s/.shard-%04" PRIu64 ".ldsi.split-tmp", outdir, s);
        unlink(tmp);
    }
    json_object_put(man);
    free(counts);
    free(vec);
    lds_index_free(idx);
    return rc;
}

/* ---- lodestar verify MANIFEST ------------------------------------------ */

static json_object *field(json_object *o, const char *name, json_type t)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, name, &v) || !json_object_is_type(v, t))
        return NULL;
    return v;
}

/* A whole non-negative JSON integer field, or false. */
static bool field_u64(json_object *o, const char *name, uint64_t *out)
{
    json_object *v = field(o, name, json_type_int);
    if (!v)
        return false;
    /* json-c keeps a number above INT64_MAX as unsigned; get_int64 would clamp it. */
    if (json_object_get_int64(v) < 0)
        return false;
    errno = 0;
    uint64_t x = json_object_get_uint64(v);
    if (errno != 0)
        return false;
    *out = x;
    return true;
}

/* Reads and parses a manifest: one JSON object, nothing but white space after it, at
   most MANIFEST_MAX_BYTES; a syntax error names its byte. NULL (with a message) if not. */
static json_object *read_manifest_json(const char *mpath)
{
    FILE *f = fopen(mpath, "rb");
    if (!f) {
        cli_failf("%s: %s", mpath, strerror(errno));
        return NULL;
    }
    char *text = malloc((size_t)MANIFEST_MAX_BYTES + 1);
    size_t n = text ? fread(text, 1, (size_t)MANIFEST_MAX_BYTES + 1, f) : 0;
    int bad_read = ferror(f);
    fclose(f);
    if (!text || bad_read || n > (size_t)MANIFEST_MAX_BYTES) {
        if (!text)
            cli_failf("out of memory");
        else if (bad_read)
            cli_failf("%s: cannot read it", mpath);
        else
            cli_failf("%s: more than a manifest's limit of %d bytes", mpath, MANIFEST_MAX_BYTES);
        free(text);
        return NULL;
    }
    json_tokener *tok = json_tokener_new();
    json_object *man = NULL;
    if (tok) {
        man = json_tokener_parse_ex(tok, text, (int)n);
        enum json_tokener_error je = json_tokener_get_error(tok);
        size_t end = json_tokener_get_parse_end(tok);
        if (!man || je != json_tokener_success) {
            cli_failf("%s: not a JSON manifest: %s at byte %zu", mpath,
                      je == json_tokener_continue ? "the text ends inside a value"
                                                  : json_tokener_error_desc(je),
                      end);
            json_object_put(man);
            man = NULL;
        } else {
            while (end < n && strchr(" \t\r\n", text[end]) && text[end])
                end++;
            if (end < n) {
                cli_failf("%s: bytes after the manifest's JSON object, from byte %zu", mpath, end);
                json_object_put(man);
                man = NULL;
            } else if (!json_object_is_type(man, json_type_object)) {
                cli_failf("%s: not a JSON manifest: the top level is not an object", mpath);
                json_object_put(man);
                man = NULL;
            }
        }
        json_tokener_free(tok);
    } else {
        cli_failf("out of memory");
    }
    free(text);
    return man;
}

/* A shard named by an http:// or https:// URL rather than by a file beside the manifest. */
static bool manifest_url(const char *file)
{
    return strncasecmp(file, "http://", 7) == 0 || strncasecmp(file, "https://", 8) == 0;
}

int cli_verify_manifest(const char *mpath)
{
    /* A manifest is small (about 150 bytes a shard); a larger file is not one. */
    struct stat sb;
    if (stat(mpath, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > MANIFEST_MAX_BYTES)
        return cli_failf("%s: %lld bytes, more than a manifest's limit of %d", mpath,
                         (long long)sb.st_size, MANIFEST_MAX_BYTES);
    json_object *man = read_manifest_json(mpath);
    if (!man)
        return CLI_FAIL;
    int rc = CLI_FAIL;
    lds_index *sh = NULL;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", mpath);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    json_object *fmt = field(man, "format", json_type_string);
    json_object *arr = field(man, "shards", json_type_array);
    json_object *dtype_o = field(man, "dtype", json_type_string);
    json_object *metric_o = field(man, "metric", json_type_string);
    json_object *ids_o = field(man, "has_ids", json_type_boolean);
    json_object *keys_o = field(man, "has_keys", json_type_boolean);
    uint64_t total = 0, dim = 0;
    if (!fmt || strcmp(json_object_get_string(fmt), MANIFEST_FORMAT) != 0) {
        cli_failf("%s: field \"format\": expected \"" MANIFEST_FORMAT "\"", mpath);
        goto done;
    }
    uint64_t version = 0;
    if (!field_u64(man, "version", &version) || version != 1) {
        cli_failf("%s: field \"version\": expected 1, the only version this program reads",
                  mpath);
        goto done;
    }
    if (!field_u64(man, "rows", &total) || !field_u64(man, "dim", &dim) || !arr || !dtype_o ||
        !metric_o || !ids_o || !keys_o) {
        cli_failf("%s: a field among \"rows\", \"dim\", \"dtype\", \"metric\", \"has_ids\", "
                  "\"has_keys\", \"shards\" is missing or of the wrong type",
                  mpath);
        goto done;
    }
    size_t n = json_object_array_length(arr);
    if (n == 0) {
        cli_failf("%s: field \"shards\": empty", mpath);
        goto done;
    }
    uint64_t next = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(arr, i);
        json_object *file_o = s ? field(s, "file", json_type_string) : NULL;
        json_object *sum_o = s ? field(s, "checksum", json_type_string) : NULL;
        uint64_t first = 0, rows = 0;
        if (!file_o || !sum_o || !field_u64(s, "first_row", &first) ||
            !field_u64(s, "rows", &rows)) {
            cli_failf("%s: shards[%zu]: \"file\", \"first_row\", \"rows\" or \"checksum\" is "
                      "missing or of the wrong type",
                      mpath, i);
            goto done;
        }
        const char *file = json_object_get_string(file_o);
        if (strlen(file) != (size_t)json_object_get_string_len(file_o)) {
            cli_failf("%s: shards[%zu].file: contains a NUL character", mpath, i);
            goto done;
        }
        if (!manifest_url(file) &&
            (file[0] == '\0' || strchr(file, '/') || strcmp(file, "..") == 0)) {
            cli_failf("%s: shards[%zu].file: \"%s\" is neither a file name in the manifest's "
                      "directory nor an http(s) URL",
                      mpath, i, file);
            goto done;
        }
        if (first < next) {
            cli_failf("%s: shards[%zu].first_row: %" PRIu64 " overlaps the rows before it "
                      "(which end at %" PRIu64 ")",
                      mpath, i, first, next);
            goto done;
        }
        if (first > next) {
            cli_failf("%s: shards[%zu].first_row: %" PRIu64 " leaves rows %" PRIu64 " .. %" PRIu64
                      " in no shard",
                      mpath, i, first, next, first - 1);
            goto done;
        }
        if (rows > total - next) {
            cli_failf("%s: shards[%zu].rows: %" PRIu64 " goes past the manifest's %" PRIu64 " rows",
                      mpath, i, rows, total);
            goto done;
        }
        next = first + rows;
    }
    if (next != total) {
        cli_failf("%s: field \"rows\": %" PRIu64 ", but the shards cover %" PRIu64 " rows", mpath,
                  total, next);
        goto done;
    }
    /* The ranges are sound; now every shard file, each fully verified. */
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(arr, i);
        const char *file = json_object_get_string(field(s, "file", json_type_string));
        const char *want = json_object_get_string(field(s, "checksum", json_type_string));
        uint64_t first = 0, rows = 0;
        field_u64(s, "first_row", &first);
        field_u64(s, "rows", &rows);
        char path[PATH_MAX];
        cli_load_request req = {.file = path, .mmap = 0};
        if (manifest_url(file)) {
            cli_set_source(&req, file);
            file = req.file; /* shown without credentials */
        } else if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >= sizeof path) {
            cli_failf("%s: path too long", dir);
            bad++;
            continue;
        }
        lds_load_info info;
        if (cli_load(&req, &sh, &info) != CLI_OK) {
            cli_failf("%s: shards[%zu] (%s) failed verification", mpath, i, file);
            bad++;
            continue;
        }
        char got[17];
        snprintf(got, sizeof got, "%016" PRIx64, lds_index_checksum(sh));
        /* What differs, with the file's value and the manifest's. */
        const char *why = NULL;
        uint64_t pb = 0;
        char fv[32] = "", mv[32] = "";
        const char *fs = fv, *ms = mv;
        if (!lds_index_checksum_verified(sh)) {
            why = "the checksum was not verified";
        } else if (strcasecmp(got, want) != 0) {
            why = "checksum differs from the manifest's";
            fs = got;
            ms = want;
        } else if (lds_index_rows(sh) != rows) {
            why = "row count differs from the manifest's";
            snprintf(fv, sizeof fv, "%" PRIu64, lds_index_rows(sh));
            snprintf(mv, sizeof mv, "%" PRIu64, rows);
        } else if (lds_index_dim(sh) != dim) {
            why = "dim differs from the manifest's";
            snprintf(fv, sizeof fv, "%" PRIu32, lds_index_dim(sh));
            snprintf(mv, sizeof mv, "%" PRIu64, (uint64_t)dim);
        } else if (strcmp(lds_dtype_name(lds_index_dtype(sh)), json_object_get_string(dtype_o))) {
            why = "dtype differs from the manifest's";
            fs = lds_dtype_name(lds_index_dtype(sh));
            ms = json_object_get_string(dtype_o);
        } else if (strcmp(lds_metric_name(lds_index_metric(sh)),
                          json_object_get_string(metric_o))) {
            why = "metric differs from the manifest's";
            fs = lds_metric_name(lds_index_metric(sh));
            ms = json_object_get_string(metric_o);
        } else if (lds_index_has_ids(sh) != json_object_get_boolean(ids_o)) {
            why = "ids presence differs from the manifest's";
            fs = lds_index_has_ids(sh) ? "has ids" : "no ids";
            ms = json_object_get_boolean(ids_o) ? "has ids" : "no ids";
        } else if (field(s, "payload_bytes", json_type_int) &&
                   (!field_u64(s, "payload_bytes", &pb) || pb != lds_index_payload_bytes(sh))) {
            why = "payload_bytes differs from the manifest's";
            snprintf(fv, sizeof fv, "%" PRIu64, lds_index_payload_bytes(sh));
            snprintf(mv, sizeof mv, "%" PRIu64, pb);
        } else if (lds_index_has_keys(sh) != json_object_get_boolean(keys_o)) {
            why = "keys presence differs from the manifest's";
            fs = lds_index_has_keys(sh) ? "has keys" : "no keys";
            ms = json_object_get_boolean(keys_o) ? "has keys" : "no keys";
        }
        if (why && *fs) {
            cli_failf("%s: shards[%zu] (%s): %s (file %s, manifest %s)", mpath, i, file, why, fs,
                      ms);
            bad++;
        } else if (why) {
            cli_failf("%s: shards[%zu] (%s): %s", mpath, i, file, why);
            bad++;
        } else {
            char line[PATH_MAX + 128];
            int ln = snprintf(line, sizeof line,
                              "%s: ok: rows [%" PRIu64 ", %" PRIu64 "), checksum %s verified",
                              file, first, first + rows, got);
            cli_put_escaped(stdout, line,
                            ln < 0 ? 0 : (size_t)ln >= sizeof line ? sizeof line - 1 : (size_t)ln);
            fputc('\n', stdout);
        }
        lds_index_free(sh);
        sh = NULL;
    }
    if (bad == 0) {
        printf("%s: ok: %zu shards, %" PRIu64 " rows\n", mpath, n, total);
        rc = CLI_OK;
    }
done:
    lds_index_free(sh);
    json_object_put(man);
    return rc;
}
