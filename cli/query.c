/* lodestar get and lodestar similar: look a key up, and find its nearest neighbours. */
#include "cli.h"

#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char get_usage[] =
    "usage: lodestar get [options] FILE KEY\n"
    "       lodestar get [options] --row N FILE\n"
    "\n"
    "Print the key (if the index has keys), row number, id (if the index has\n"
    "ids) and vector of KEY, or of row N. Vector elements are printed as float32\n"
    "in the shortest decimal form that reads back exactly. In text, bytes of a\n"
    "key that are not printable are escaped (\\xNN, and \\\\ for a backslash); in\n"
    "JSON a missing key or id is null, and so is a NaN or infinite element.\n"
    "FILE may be an http:// or https:// URL.\n"
    "\n"
    "options:\n"
    "  --row N     select row N (0-based) instead of a key\n"
    "  --json      print one JSON object instead of text\n"
    "  --mmap      map the file instead of reading it (regular files only)\n"
    "              do not truncate or rewrite it in place while in use\n"
    "  --no-mmap   read the file into a pooled buffer (the default)\n"
    "  -h, --help  print this help\n";
/* followed by cli_print_max_payload_help() */

static const char similar_usage[] =
    "usage: lodestar similar [options] FILE KEY\n"
    "       lodestar similar [options] --row N FILE\n"
    "\n"
    "Print the k nearest neighbours of KEY's vector (or row N's), best first,\n"
    "leaving out the row itself. Exact search under the index's metric:\n"
    "cosine and dot print similarity (higher is nearer), l2 prints squared\n"
    "Euclidean distance (lower is nearer). Without keys in the index the key\n"
    "column is left out; keys are escaped as in 'lodestar get'. In JSON a NaN\n"
    "score (a row holding NaN ranks last) is null. FILE may be an http:// or\n"
    "https:// URL.\n"
    "\n"
    "options:\n"
    "  -k N        number of neighbours, 1 to 100000 (default 10)\n"
    "  --row N     select row N (0-based) instead of a key\n"
    "  --json      print one JSON object instead of text\n"
    "  --mmap      map the file instead of reading it (regular files only)\n"
    "              do not truncate or rewrite it in place while in use\n"
    "  --no-mmap   read the file into a pooled buffer (the default)\n"
    "  -h, --help  print this help\n";
/* followed by cli_print_max_payload_help() */

/* Options and arguments common to get and similar. */
typedef struct query_args {
    cli_load_request req;
    const char *key; /* NULL when a row was given */
    bool has_row;
    uint64_t row;
    bool json;
    uint64_t k;
} query_args;

/* Parses argv into `a`; returns -1 to go on, or an exit code. */
static int parse_query_args(int argc, char **argv, const char *usage, bool with_k, query_args *a)
{
    enum { OPT_ROW = 256, OPT_JSON, OPT_MMAP, OPT_NO_MMAP, OPT_MAX_PAYLOAD };
    static const struct option longopts[] = {
        {"row", required_argument, NULL, OPT_ROW},
        {"json", no_argument, NULL, OPT_JSON},
        {"mmap", no_argument, NULL, OPT_MMAP},
        {"no-mmap", no_argument, NULL, OPT_NO_MMAP},
        {"max-payload", required_argument, NULL, OPT_MAX_PAYLOAD},
        {"k", required_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *prog = argv[0];
    *a = (query_args){.req = {.mmap = -1}, .k = 10};
    int c;
    while ((c = getopt_long(argc, argv, with_k ? "hk:" : "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(usage, stdout);
            cli_print_max_payload_help(stdout);
            return CLI_OK;
        case OPT_ROW:
            if (!cli_parse_u64(optarg, &a->row))
                return cli_usage_error(prog, "--row wants a row number, not '%s'", optarg);
            a->has_row = true;
            break;
        case OPT_JSON:
            a->json = true;
            break;
        case OPT_MMAP:
            a->req.mmap = 1;
            break;
        case OPT_NO_MMAP:
            a->req.mmap = 0;
            break;
        case OPT_MAX_PAYLOAD:
            if (cli_parse_max_payload(prog, optarg, &a->req) >= 0)
                return CLI_USAGE;
            break;
        case 'k':
            if (!with_k)
                return cli_usage_error(prog, "unrecognized option '--k'");
            if (!cli_parse_u64(optarg, &a->k) || a->k == 0 || a->k > 100000)
                return cli_usage_error(prog, "-k wants a number from 1 to 100000, not '%s'",
                                       optarg);
            break;
        default:
            fprintf(stderr, "Try '%s --help'.\n", prog);
            return CLI_USAGE;
        }
    }
    int want = a->has_row ? 1 : 2;
    if (argc - optind != want)
        return cli_usage_error(prog,
                               a->has_row ? "expected FILE (with --row)" : "expected FILE and KEY");
    cli_set_source(&a->req, argv[optind]);
    a->key = a->has_row ? NULL : argv[optind + 1];
    return -1;
}

/* Resolves the key or row of `a` to a row of `idx`; prints the error and returns false if none. */
static bool resolve_row(const lds_index *idx, const query_args *a, uint64_t *row)
{
    if (a->has_row) {
        if (a->row >= lds_index_rows(idx)) {
            cli_failf("%s: row %" PRIu64 " is out of range (the index has %" PRIu64 " rows)",
                      a->req.file, a->row, lds_index_rows(idx));
            return false;
        }
        *row = a->row;
        return true;
    }
    if (!lds_index_has_keys(idx)) {
        cli_failf("%s: the index has no keys; select a row with --row N", a->req.file);
        return false;
    }
    lds_status st = lds_index_find_key(idx, a->key, strlen(a->key), row);
    if (st == LDS_E_NOT_FOUND) {
        /* The key is echoed escaped: it may hold bytes that would drive the terminal. */
        fprintf(stderr, "lodestar: %s: key '", a->req.file);
        cli_put_escaped(stderr, a->key, strlen(a->key));
        fputs("' not found\n", stderr);
        return false;
    }
    if (st != LDS_OK) {
        /* LDS_E_DUP_KEY: the check says which rows repeat a key (ADR 0010). */
        lds_error err;
        lds_error_init(&err);
        bool detail = st == LDS_E_DUP_KEY && lds_index_check_keys(idx, &err) == st;
        cli_fail(a->req.file, st, detail ? &err : NULL);
        return false;
    }
    return true;
}

/* The key of `row` as a json string, or JSON null without keys. */
static json_object *json_key(const lds_index *idx, uint64_t row)
{
    const char *key = NULL;
    size_t len = 0;
    if (lds_index_key(idx, row, &key, &len) != LDS_OK)
        return NULL;
    return json_object_new_string_len(key, (int)len);
}

/* Prints the key of `row`, escaped; nothing without keys. */
static void print_key(const lds_index *idx, uint64_t row)
{
    const char *key = NULL;
    size_t len = 0;
    if (lds_index_key(idx, row, &key, &len) == LDS_OK)
        cli_put_escaped(stdout, key, len);
}

/* A float as JSON: its shortest round-trip text, or null if it is NaN or infinite (JSON
   has no literal for those). */
static json_object *json_float(float x)
{
    if (!isfinite(x))
        return NULL;
    char buf[40];
    cli_format_float(buf, sizeof buf, x);
    /* The shortest round-trip text, not json-c's own %.17g rendering. */
    return json_object_new_double_s(x, buf);
}

static int print_json(json_object *o)
{
    const char *text = json_object_to_json_string_ext(
        o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    int rc = text ? CLI_OK : cli_failf("out of memory");
    if (text)
        printf("%s\n", text);
    json_object_put(o);
    return rc;
}

/* Loads the index and the row's vector as f32; returns -1 to go on, or an exit code. */
static int load_row(const query_args *a, lds_index **idx, uint64_t *row, float **vec)
{
    lds_load_info info;
    int rc = cli_load(&a->req, idx, &info);
    if (rc != CLI_OK)
        return rc;
    if (!resolve_row(*idx, a, row))
        return CLI_FAIL;
    uint32_t dim = lds_index_dim(*idx);
    *vec = malloc(sizeof(float) * dim);
    if (!*vec)
        return cli_failf("out of memory");
    lds_status st = lds_index_row_f32(*idx, *row, *vec, dim);
    if (st != LDS_OK)
        return cli_fail(a->req.file, st, NULL);
    return -1;
}

int cli_get(int argc, char **argv)
{
    query_args a;
    int rc = parse_query_args(argc, argv, get_usage, false, &a);
    if (rc >= 0)
        return rc;
    lds_index *idx = NULL;
    uint64_t row = 0;
    float *vec = NULL;
    rc = load_row(&a, &idx, &row, &vec);
    if (rc >= 0)
        goto done;
    uint32_t dim = lds_index_dim(idx);
    uint64_t id = 0;
    bool has_id = lds_index_id(idx, row, &id) == LDS_OK;
    rc = CLI_OK;
    if (a.json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "key", json_key(idx, row));
        json_object_object_add(o, "row", json_object_new_uint64(row));
        json_object_object_add(o, "id", has_id ? json_object_new_uint64(id) : NULL);
        json_object_object_add(o, "dim", json_object_new_uint64(dim));
        json_object *v = json_object_new_array_ext((int)dim);
        for (uint32_t i = 0; i < dim; i++)
            json_object_array_add(v, json_float(vec[i]));
        json_object_object_add(o, "vector", v);
        rc = print_json(o);
    } else {
        /* Without keys there is no key line (as without ids there is no id line). */
        if (lds_index_has_keys(idx)) {
            fputs("key:    ", stdout);
            print_key(idx, row);
            fputc('\n', stdout);
        }
        printf("row:    %" PRIu64 "\n", row);
        if (has_id)
            printf("id:     %" PRIu64 "\n", id);
        printf("dim:    %" PRIu32 "\n", dim);
        fputs("vector:", stdout);
        for (uint32_t i = 0; i < dim; i++) {
            fputc(' ', stdout);
            cli_print_float(stdout, vec[i]);
        }
        fputc('\n', stdout);
    }
done:
    free(vec);
    lds_index_free(idx);
    return rc;
}

int cli_similar(int argc, char **argv)
{
    query_args a;
    int rc = parse_query_args(argc, argv, similar_usage, true, &a);
    if (rc >= 0)
        return rc;
    lds_index *idx = NULL;
    uint64_t row = 0;
    float *vec = NULL;
    lds_hit *hits = NULL;
    rc = load_row(&a, &idx, &row, &vec);
    if (rc >= 0)
        goto done;
    /* One more than asked, since the row itself is usually its own nearest neighbour. */
    size_t want = (size_t)a.k + 1;
    hits = malloc(sizeof *hits * want);
    if (!hits) {
        rc = cli_failf("out of memory");
        goto done;
    }
    size_t n = 0;
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_index_search(idx, vec, lds_index_dim(idx), want, hits, &n, &err);
    if (st != LDS_OK) {
        rc = cli_fail(a.req.file, st, &err);
        goto done;
    }
    size_t kept = 0;
    for (size_t i = 0; i < n && kept < a.k; i++)
        if (hits[i].row != row)
            hits[kept++] = hits[i];
    const char *metric = lds_metric_name(lds_index_metric(idx));
    rc = CLI_OK;
    if (a.json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "key", json_key(idx, row));
        json_object_object_add(o, "row", json_object_new_uint64(row));
        json_object_object_add(o, "metric", json_object_new_string(metric));
        json_object *list = json_object_new_array_ext((int)kept);
        for (size_t i = 0; i < kept; i++) {
            json_object *h = json_object_new_object();
            json_object_object_add(h, "key", json_key(idx, hits[i].row));
            json_object_object_add(h, "row", json_object_new_uint64(hits[i].row));
            json_object_object_add(h, "score", json_float(hits[i].score));
            json_object_array_add(list, h);
        }
        json_object_object_add(o, "neighbours", list);
        rc = print_json(o);
    } else {
        bool keys = lds_index_has_keys(idx);
        printf("%4s  %-10s %8s%s\n", "rank",
               lds_index_metric(idx) == LDS_METRIC_L2 ? "distance" : metric, "row",
               keys ? "  key" : "");
        for (size_t i = 0; i < kept; i++) {
            printf("%4zu  %-10.6f %8" PRIu64, i + 1, (double)hits[i].score, hits[i].row);
            if (keys) {
                fputs("  ", stdout);
                print_key(idx, hits[i].row);
            }
            fputc('\n', stdout);
        }
    }
done:
    free(hits);
    free(vec);
    lds_index_free(idx);
    return rc;
}
