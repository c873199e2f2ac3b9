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
    "  --timeout SECONDS, --quiet  as for every command (lodestar --help)\n"
    "  -h, --help          print this help\n";

#define MANIFEST_FORMAT "lodestar-shards"
/* A shard's staging name: OUTDIR/.shard-NNNN.ldsi.lds-tmp-PID-staged (the program's
   temporary-file pattern, cli.h). */
#define STAGED_NAME "%s/.shard-%04" PRIu64 ".ldsi" CLI_TEMP_INFIX "%ld-staged"

/* Writes `text` to a temporary file beside `given` (beside the regular file a link there
   names: cli_output_target), fsynced; fills path[PATH_MAX] with where it is to be renamed
   and tmp[PATH_MAX + 64] with the temporary's name (registered for removal on a signal:
   cli_temp_create). The caller renames it. */
static int write_prepared(const char *given, const char *text, char *path, char *tmp)
{
    int rc = cli_output_target(given, path, PATH_MAX);
    if (rc != CLI_OK)
        return rc;
    int slot;
    int fd = cli_temp_create(path, tmp, PATH_MAX + 64, &slot);
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

/* What split was asked for: exactly one of the three bounds, IN and OUTDIR. */
typedef struct split_args {
    uint64_t nshards, max_rows, max_bytes;
    cli_load_request req;
    const char *outdir;
} split_args;

/* Parses argv into *a; returns -1 to go on, or an exit code (CLI_OK after --help). */
static int parse_split_args(int argc, char **argv, split_args *a)
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
    int bounds = 0;
    *a = (split_args){.req = {.mmap = -1}};
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(split_usage, stdout);
            return CLI_OK;
        case OPT_SHARDS:
            if (!cli_parse_u64(optarg, &a->nshards) || a->nshards == 0 || a->nshards > MAX_SHARDS)
                return cli_usage_error(prog, "--shards is 1 .. 65536, not '%s'", optarg);
            bounds++;
            break;
        case OPT_MAX_ROWS:
            if (!cli_parse_u64(optarg, &a->max_rows) || a->max_rows == 0)
                return cli_usage_error(prog, "--max-rows is a row count >= 1, not '%s'", optarg);
            bounds++;
            break;
        case OPT_MAX_BYTES:
            if (!cli_parse_size(optarg, &a->max_bytes) || a->max_bytes == 0)
                return cli_usage_error(prog,
                                       "--max-bytes wants a size in bytes >= 1 with an optional "
                                       "suffix K, M, G or T, not '%s'",
                                       optarg);
            bounds++;
            break;
        case OPT_MAX_PAYLOAD: {
            int rc = cli_parse_max_payload(prog, optarg, &a->req);
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
    cli_set_source(&a->req, argv[optind]);
    a->outdir = argv[optind + 1];
    return -1;
}

/* Decides the shards' row counts from the bound given: *counts (malloc'd, NULL
   when out of memory: the caller says so) and *nshards. Refuses an index whose
   unique keys repeat, and one too small or too large for the bound. */
static int plan_shards(const lds_index *idx, const split_args *a, uint64_t **counts,
                       uint64_t *nshards)
{
    uint64_t rows = lds_index_rows(idx);
    const char *file = a->req.file;
    *nshards = a->nshards;
    /* Keys declared unique that repeat would pass into shards each unique alone: refused
       as verify refuses IN. */
    lds_error kerr;
    lds_error_init(&kerr);
    lds_status kst = lds_index_has_keys(idx) ? lds_index_check_keys(idx, &kerr) : LDS_OK;
    if (kst != LDS_OK)
        return cli_fail(file, kst, &kerr);
    if (rows == 0)
        return cli_failf("%s has no rows to split", file);
    if (*nshards > rows)
        return cli_failf("%s has %" PRIu64 " rows, fewer than --shards %" PRIu64, file, rows,
                         *nshards);
    if (a->max_rows) {
        *nshards = rows / a->max_rows + (rows % a->max_rows != 0);
        if (*nshards > MAX_SHARDS)
            return cli_failf("--max-rows %" PRIu64 " needs %" PRIu64 " shards for %" PRIu64
                             " rows, more than %u",
                             a->max_rows, *nshards, rows, MAX_SHARDS);
    }
    if (a->max_bytes)
        return plan_max_bytes(idx, a->max_bytes, counts, nshards);
    if ((*counts = malloc(*nshards * sizeof **counts)) != NULL)
        equal_split(rows, *nshards, *counts);
    return CLI_OK;
}

/* The manifest's fields that describe IN as a whole, with an empty "shards"
   array (*arr) for stage_shard to fill. */
static json_object *manifest_new(const lds_index *idx, json_object **arr)
{
    json_object *man = json_object_new_object();
    json_object_object_add(man, "format", json_object_new_string(MANIFEST_FORMAT));
    json_object_object_add(man, "version", json_object_new_int(1));
    json_object_object_add(man, "rows", json_object_new_uint64(lds_index_rows(idx)));
    json_object_object_add(man, "dim", json_object_new_uint64(lds_index_dim(idx)));
    json_object_object_add(man, "dtype",
                           json_object_new_string(lds_dtype_name(lds_index_dtype(idx))));
    json_object_object_add(man, "metric",
                           json_object_new_string(lds_metric_name(lds_index_metric(idx))));
    json_object_object_add(man, "has_ids", json_object_new_boolean(lds_index_has_ids(idx)));
    json_object_object_add(man, "has_keys", json_object_new_boolean(lds_index_has_keys(idx)));
    *arr = json_object_new_array();
    json_object_object_add(man, "shards", *arr);
    return man;
}

/* Writes shard s (rows [first, first + n)) under its staging name, reads it back
   and adds its manifest entry to `arr`. *staged becomes s + 1 once the staging
   name is known, so the caller removes it on failure. */
static int stage_shard(const lds_index *idx, const split_args *a, uint64_t s, uint64_t first,
                       uint64_t n, float *vec, json_object *arr, uint64_t *staged)
{
    const char *outdir = a->outdir;
    char name[32], path[PATH_MAX];
    snprintf(name, sizeof name, "shard-%04" PRIu64 ".ldsi", s);
    if ((size_t)snprintf(path, sizeof path, STAGED_NAME, outdir, s, (long)getpid()) >= sizeof path)
        return cli_failf("%s: path too long", outdir);
    *staged = s + 1;
    /* Removed first: the writer writes through a symbolic link, and a leftover under
       this name (a killed split whose PID came round again) must not redirect it. */
    if (unlink(path) != 0 && errno != ENOENT)
        return cli_failf("cannot remove %s: %s", path, strerror(errno));
    int rc = write_shard(idx, a->req.file, path, first, n, vec);
    if (rc != CLI_OK)
        return rc;
    /* The checksum as a reader sees it: load the shard back, fully verified. */
    cli_load_request sreq = {.file = path, .mmap = 0};
    lds_index *sh = NULL;
    lds_load_info info;
    if ((rc = cli_load(&sreq, &sh, &info)) != CLI_OK)
        return rc;
    if (a->max_bytes && lds_index_payload_bytes(sh) > a->max_bytes - LDS_HEADER_SIZE) {
        rc = cli_failf("%s: %" PRIu64 " bytes, above --max-bytes %" PRIu64
                       " (the size plan and the writer disagree: a bug)",
                       path, LDS_HEADER_SIZE + lds_index_payload_bytes(sh), a->max_bytes);
        lds_index_free(sh);
        return rc;
    }
    char sum[17];
    snprintf(sum, sizeof sum, "%016" PRIx64, lds_index_checksum(sh));
    json_object *o = json_object_new_object();
    json_object_object_add(o, "file", json_object_new_string(name));
    json_object_object_add(o, "first_row", json_object_new_uint64(first));
    json_object_object_add(o, "rows", json_object_new_uint64(lds_index_rows(sh)));
    json_object_object_add(o, "payload_bytes", json_object_new_uint64(lds_index_payload_bytes(sh)));
    json_object_object_add(o, "checksum", json_object_new_string(sum));
    json_object_array_add(arr, o);
    lds_index_free(sh);
    return CLI_OK;
}

/* Serialises the manifest, checks it with the library's reader and writes it to a
   temporary file (mtmp) to be renamed to mfinal; mtmp is left empty when there is
   nothing to remove. */
static int stage_manifest(json_object *man, const char *mpath, char *mfinal, char *mtmp)
{
    const char *text = json_object_to_json_string_ext(man, JSON_C_TO_STRING_PRETTY |
                                                               JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t tl = strlen(text);
    char *withnl = malloc(tl + 2);
    if (!withnl)
        return cli_failf("out of memory");
    memcpy(withnl, text, tl);
    memcpy(withnl + tl, "\n", 2);
    /* What is written is what every reader accepts: the library's reader (docs/format.md
       section 9) checks it before anything is renamed into place. */
    lds_manifest *check = NULL;
    lds_error merr;
    lds_error_init(&merr);
    lds_status mst = lds_manifest_parse(withnl, tl + 1, mpath, NULL, &check, &merr);
    lds_manifest_free(check);
    if (mst != LDS_OK) {
        free(withnl);
        return cli_fail(NULL, mst, &merr);
    }
    int rc = write_prepared(mpath, withnl, mfinal, mtmp);
    free(withnl);
    if (rc != CLI_OK)
        mtmp[0] = '\0'; /* write_prepared removed it */
    return rc;
}

/* Renames the staged shards into place, then the manifest last: a reader that
   finds the new manifest finds every shard it names. *staged becomes 0 once the
   shards are in place; mtmp is emptied once the manifest is. */
static int publish(const char *outdir, uint64_t nshards, char *mtmp, const char *mfinal,
                   uint64_t *staged)
{
    int rc = CLI_OK;
    for (uint64_t s = 0; s < nshards && rc == CLI_OK; s++) {
        char from[PATH_MAX], to[PATH_MAX];
        snprintf(from, sizeof from, STAGED_NAME, outdir, s, (long)getpid());
        snprintf(to, sizeof to, "%s/shard-%04" PRIu64 ".ldsi", outdir, s);
        if (rename(from, to) != 0)
            rc = cli_failf("cannot rename %s to %s: %s", from, to, strerror(errno));
    }
    if (rc != CLI_OK)
        return rc;
    *staged = 0;
    if (rename(mtmp, mfinal) != 0)
        return cli_failf("cannot rename %s to %s: %s", mtmp, mfinal, strerror(errno));
    mtmp[0] = '\0';
    return CLI_OK;
}

/* Shards of an earlier split beyond this one's count are in no manifest now (IN
   itself is never removed, whatever its name). */
static void remove_stale_shards(const char *outdir, uint64_t nshards, bool in_known,
                                const struct stat *in_st)
{
    for (uint64_t s = nshards; s < MAX_SHARDS; s++) {
        char old[PATH_MAX];
        struct stat st;
        snprintf(old, sizeof old, "%s/shard-%04" PRIu64 ".ldsi", outdir, s);
        if (lstat(old, &st) != 0)
            break;
        if (in_known && st.st_dev == in_st->st_dev && st.st_ino == in_st->st_ino)
            continue;
        unlink(old);
    }
}

int cli_split(int argc, char **argv)
{
    split_args a;
    int rc = parse_split_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    const char *outdir = a.outdir;
    if (mkdir(outdir, 0777) != 0 && errno != EEXIST)
        return cli_failf("cannot create %s: %s", outdir, strerror(errno));
    lds_index *idx = NULL;
    lds_load_info info;
    if ((rc = cli_load(&a.req, &idx, &info)) != CLI_OK)
        return rc;
    uint64_t rows = lds_index_rows(idx);
    float *vec = NULL;
    uint64_t *counts = NULL, nshards = 0;
    uint64_t staged = 0; /* shards written under their staging names, removed on failure */
    json_object *man = NULL;
    char mtmp[PATH_MAX + 64] = "";
    /* IN's identity before anything is written, so that a shard name it holds is
       known as IN's whatever the renames below do. */
    struct stat in_st;
    bool in_known = stat(a.req.file, &in_st) == 0;
    if ((rc = plan_shards(idx, &a, &counts, &nshards)) != CLI_OK)
        goto done;
    vec = malloc((size_t)lds_index_dim(idx) * sizeof *vec);
    if (!vec || !counts) {
        rc = cli_failf("out of memory");
        goto done;
    }
    json_object *arr;
    man = manifest_new(idx, &arr);
    uint64_t first = 0;
    /* Every shard is written under a staging name first (STAGED_NAME) and renamed into
       place only once all are written and read back, so a split that fails leaves a split
       already in OUTDIR as it was; on a signal, every temporary name of this process in
       OUTDIR goes (cli_temp_add_folder). */
    cli_temp_add_folder(outdir);
    char what[300];
    snprintf(what, sizeof what, "lodestar split: %.280s", outdir);
    cli_progress prog_line;
    cli_progress_start(&prog_line, what);
    for (uint64_t s = 0; s < nshards; s++) {
        /* IN's payload bytes in the shards written so far, pro rata of their rows. */
        uint64_t payload = lds_index_payload_bytes(idx);
        cli_progress_update(&prog_line, (uint64_t)((double)payload * (double)first / (double)rows),
                            payload);
        if ((rc = stage_shard(idx, &a, s, first, counts[s], vec, arr, &staged)) != CLI_OK)
            goto done;
        first += counts[s];
    }
    cli_progress_end(&prog_line);
    char mpath[PATH_MAX], mfinal[PATH_MAX];
    if ((size_t)snprintf(mpath, sizeof mpath, "%s/manifest.json", outdir) >= sizeof mpath) {
        rc = cli_failf("%s: path too long", outdir);
        goto done;
    }
    if ((rc = stage_manifest(man, mpath, mfinal, mtmp)) != CLI_OK ||
        (rc = publish(outdir, nshards, mtmp, mfinal, &staged)) != CLI_OK)
        goto done;
    remove_stale_shards(outdir, nshards, in_known, &in_st);
    printf("split %" PRIu64 " rows of %s into %" PRIu64 " shards; manifest %s\n", rows, a.req.file,
           nshards, mpath);
done:
    if (mtmp[0])
        unlink(mtmp);
    for (uint64_t s = 0; s < staged; s++) {
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, STAGED_NAME, outdir, s, (long)getpid());
        unlink(tmp);
    }
    json_object_put(man);
    free(counts);
    free(vec);
    lds_index_free(idx);
    return rc;
}

/* ---- lodestar verify MANIFEST ------------------------------------------ */

typedef struct verify_ctx {
    const lds_manifest *m;
    const char *shown; /* the manifest, without credentials */
} verify_ctx;

/* One line per entry: ok on standard output, the refusal on standard error. */
static void verify_each(void *ctx, size_t i, lds_status status, const lds_error *err)
{
    const verify_ctx *v = ctx;
    if (status != LDS_OK) {
        cli_fail(v->shown, status, err);
        return;
    }
    lds_manifest_shard s;
    lds_manifest_shard_init(&s);
    lds_manifest_get_shard(v->m, i, &s);
    char shown[4096];
    lds_url_redact(s.file, shown, sizeof shown);
    char line[PATH_MAX + 128];
    int ln = snprintf(line, sizeof line,
                      "%s: ok: rows [%" PRIu64 ", %" PRIu64 "), checksum %016" PRIx64 " verified",
                      shown, s.first_row, s.first_row + s.rows, s.checksum);
    cli_put_escaped(stdout, line,
                    ln < 0                      ? 0
                    : (size_t)ln >= sizeof line ? sizeof line - 1
                                                : (size_t)ln);
    fputc('\n', stdout);
}

/* The manifest read and checked by the library (lds_manifest_read: the rules of
   docs/format.md section 9), then every shard file loaded once and compared
   (lds_manifest_verify). `mpath` is a path or an http(s) URL. */
int cli_verify_manifest(const char *mpath)
{
    char shown[4096];
    lds_url_redact(mpath, shown, sizeof shown);
    lds_error err;
    lds_error_init(&err);
    lds_manifest *m = NULL;
    lds_load_options lo;
    lds_load_options_default(&lo);
    /* --timeout bounds the manifest's download as it bounds every load (docs/adr/0034). */
    lds_url_options uo;
    lds_url_options_default(&uo);
    uo.timeout_ms = cli_timeout_ms;
    lo.url = &uo;
    lo.url_connections = cli_url_connections;
    lds_manifest_options mo;
    lds_manifest_options_default(&mo);
    mo.load = &lo;
    lds_status st = lds_manifest_read(mpath, &mo, &m, &err);
    if (st != LDS_OK)
        return cli_fail(NULL, st, &err);
    lds_manifest_info info;
    lds_manifest_info_init(&info);
    lds_manifest_get_info(m, &info);
    /* Read, not mapped: every byte goes through the checksum as it arrives. */
    lo.use_mmap = false;
    lo.max_payload_bytes = cli_default_max_payload();
    verify_ctx v = {m, shown};
    lds_error_init(&err);
    st = lds_manifest_verify(m, &lo, verify_each, &v, NULL, &err);
    int rc = CLI_FAIL;
    if (st == LDS_OK) {
        printf("%s: ok: %zu shards, %" PRIu64 " rows\n", shown, info.shards, info.rows);
        rc = CLI_OK;
    } else if (st == LDS_E_CANCELLED || st == LDS_E_NOMEM || st == LDS_E_INVALID_ARG) {
        cli_fail(shown, st, &err);
    }
    lds_manifest_free(m);
    return rc;
}
