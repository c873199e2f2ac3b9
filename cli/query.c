/* lodestar get and lodestar similar: look a key up, and find its nearest neighbours (the
 * analogy of similar --positive/--negative is analogy.c, called from here). */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
    "       lodestar similar [options] --vector X,Y,... FILE\n"
    "       lodestar similar [options] --vector-file F FILE\n"
    "       lodestar similar [options] --queries F FILE\n"
    "       lodestar similar [options] --positive K1,K2 [--negative K3] FILE\n"
    "\n"
    "Print the k nearest neighbours of KEY's vector (or row N's), best first,\n"
    "leaving out the row itself, or of a given vector (dim numbers separated by\n"
    "commas and/or white space). Exact search under the index's metric:\n"
    "cosine and dot print similarity (higher is nearer), l2 prints squared\n"
    "Euclidean distance (lower is nearer). Without keys in the index the key\n"
    "column is left out; keys are escaped as in 'lodestar get'. In JSON a score\n"
    "that is NaN (a row holding NaN ranks last) or +/-infinite (a dot product\n"
    "past the float range) is null: JSON has no literal for them; the table\n"
    "prints nan, inf, -inf. Scores are printed as the shortest decimal that\n"
    "reads back as the same float (0.8, 1e+38, 1e-07), as in JSON. FILE may be\n"
    "an http:// or https:// URL.\n"
    "\n"
    "With --queries, F holds one query per line: a key of the index, or else a\n"
    "vector; each prints one line of JSON (the object --json prints, compact,\n"
    "with \"query\": the line number), in order. A line that is neither stops the\n"
    "run with exit status 1, naming the line.\n"
    "\n"
    "With --positive and --negative (either alone, or both), gensim's most_similar:\n"
    "each key's vector divided by its length, the mean of these with weight +1\n"
    "(positive) or -1 (negative) divided by its length, and the rows nearest to it\n"
    "by cosine similarity, the given keys left out (king,woman minus man: queen).\n"
    "The index must be a cosine index with keys; every key that is missing is named\n"
    "(exit status 1), and a key in both lists is a usage error.\n"
    "\n"
    "options:\n"
    "  -k N        number of neighbours, 1 to 100000 (default 10)\n"
    "  --row N     select row N (0-based) instead of a key\n"
    "  --vector V  search for the vector V (\"0.1,0.2,...\")\n"
    "  --vector-file F  search for the vector in file F\n"
    "  --queries F one query per line of F (- for standard input; a file or a\n"
    "              pipe of at most 64 MiB, as is --vector-file)\n"
    "  --positive K1,K2,...  keys to add (comma-separated; may be repeated)\n"
    "  --negative K1,K2,...  keys to subtract (comma-separated; may be repeated)\n"
    "  --threads N scan with at most N threads (default 0: one per core)\n"
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
    const char *vector;      /* --vector text, or NULL */
    const char *vector_file; /* --vector-file, or NULL */
    const char *queries;     /* --queries file, or NULL */
    unsigned threads;
    char **positive, **negative; /* --positive/--negative arguments (argc room each) */
    size_t n_positive, n_negative;
} query_args;

static void query_args_free(query_args *a)
{
    free(a->positive);
    free(a->negative);
    a->positive = a->negative = NULL;
}

/* Parses argv into `a` (set up by parse_query_args); returns -1 to go on, or an exit code. */
static int parse_query_options(int argc, char **argv, const char *usage, bool with_k, query_args *a)
{
    enum {
        OPT_ROW = 256,
        OPT_JSON,
        OPT_MMAP,
        OPT_NO_MMAP,
        OPT_MAX_PAYLOAD,
        OPT_VECTOR,
        OPT_VECTOR_FILE,
        OPT_QUERIES,
        OPT_THREADS,
        OPT_POSITIVE,
        OPT_NEGATIVE
    };
    static const struct option longopts[] = {
        {"vector", required_argument, NULL, OPT_VECTOR},
        {"vector-file", required_argument, NULL, OPT_VECTOR_FILE},
        {"queries", required_argument, NULL, OPT_QUERIES},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"positive", required_argument, NULL, OPT_POSITIVE},
        {"negative", required_argument, NULL, OPT_NEGATIVE},
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
    int c;
    while ((c = getopt_long(argc, argv, with_k ? ":hk:" : ":h", longopts, NULL)) != -1) {
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
        case OPT_POSITIVE:
        case OPT_NEGATIVE:
            if (!with_k)
                return cli_usage_error(prog, "unrecognized option '--%s'",
                                       c == OPT_POSITIVE ? "positive" : "negative");
            if (c == OPT_POSITIVE)
                a->positive[a->n_positive++] = optarg;
            else
                a->negative[a->n_negative++] = optarg;
            break;
        case OPT_VECTOR:
        case OPT_VECTOR_FILE:
        case OPT_QUERIES:
        case OPT_THREADS:
            if (!with_k)
                return cli_usage_error(prog, "unrecognized option '--%s'",
                                       c == OPT_VECTOR        ? "vector"
                                       : c == OPT_VECTOR_FILE ? "vector-file"
                                       : c == OPT_QUERIES     ? "queries"
                                                              : "threads");
            if (c == OPT_VECTOR)
                a->vector = optarg;
            else if (c == OPT_VECTOR_FILE)
                a->vector_file = optarg;
            else if (c == OPT_QUERIES)
                a->queries = optarg;
            else {
                uint64_t t;
                if (!cli_parse_u64(optarg, &t) || t > 1024)
                    return cli_usage_error(
                        prog, "--threads wants a number from 0 to 1024, not '%s'", optarg);
                a->threads = (unsigned)t;
            }
            break;
        default:
            return cli_option_error(prog, c, argv);
        }
    }
    bool keys = a->n_positive + a->n_negative > 0;
    int sources = a->has_row + !!a->vector + !!a->vector_file + !!a->queries + keys;
    if (sources > 1)
        return cli_usage_error(prog, "give one of --row, --vector, --vector-file, --queries "
                                     "and --positive/--negative");
    int want = sources ? 1 : 2;
    if (argc - optind != want)
        return cli_usage_error(prog, !sources     ? "expected FILE and KEY"
                                     : a->has_row ? "expected FILE (with --row)"
                                     : keys       ? "expected FILE (with --positive/--negative)"
                                                  : "expected FILE (with a vector or --queries)");
    cli_set_source(&a->req, argv[optind]);
    a->key = sources ? NULL : argv[optind + 1];
    return -1;
}

/* Parses argv into `a`; returns -1 to go on (then query_args_free(a) when done), or an
   exit code (nothing to free). */
static int parse_query_args(int argc, char **argv, const char *usage, bool with_k, query_args *a)
{
    *a = (query_args){.req = {.mmap = -1}, .k = 10};
    if (with_k) {
        /* --positive/--negative may repeat: at most one per argument. */
        a->positive = calloc((size_t)argc, sizeof *a->positive);
        a->negative = calloc((size_t)argc, sizeof *a->negative);
        if (!a->positive || !a->negative) {
            query_args_free(a);
            return cli_failf("out of memory");
        }
    }
    int rc = parse_query_options(argc, argv, usage, with_k, a);
    if (rc >= 0)
        query_args_free(a);
    return rc;
}

/* Reports a key lookup that failed for another reason than a missing key (st is neither
   LDS_OK nor LDS_E_NOT_FOUND) with its detail; returns false. */
static bool key_lookup_failed(const lds_index *idx, const char *file, lds_status st)
{
    /* LDS_E_DUP_KEY: the check says which rows repeat a key (ADR 0010). */
    lds_error err;
    lds_error_init(&err);
    bool detail = st == LDS_E_DUP_KEY && lds_index_check_keys(idx, &err) == st;
    cli_fail(file, st, detail ? &err : NULL);
    return false;
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
    if (st != LDS_OK)
        return key_lookup_failed(idx, a->req.file, st);
    return true;
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

static bool is_zero(const float *v, uint32_t dim)
{
    for (uint32_t i = 0; i < dim; i++)
        if (v[i] != 0.0f)
            return false;
    return true;
}

/* Checks a query taken from `row` of the index (a key's or --row's) before the search: a
   non-finite element is the index's fault, and a zero row under cosine has no
   similarity; either is reported naming the row (and, with `line`, the --queries line).
   Returns false after printing the error. */
static bool row_query_usable(const lds_index *idx, const char *file, uint64_t line, uint64_t row,
                             const float *vec, uint32_t dim)
{
    char where[48] = "";
    if (line)
        snprintf(where, sizeof where, "line %" PRIu64 ": ", line);
    double qq = 0.0;
    for (uint32_t i = 0; i < dim; i++) {
        if (!isfinite(vec[i])) {
            size_t es = lds_index_dtype(idx) == LDS_DTYPE_F32  ? 4
                        : lds_index_dtype(idx) == LDS_DTYPE_I8 ? 1
                                                               : 2;
            /* Vectors start the payload (format.md §3), which starts at byte 64. */
            uint64_t at = LDS_HEADER_SIZE +
                          (uint64_t)((const char *)lds_index_row(idx, row) -
                                     (const char *)lds_index_row(idx, 0)) +
                          (uint64_t)i * es;
            cli_failf("%s: %srow %" PRIu64 " of the index holds a non-finite element %" PRIu32
                      " (at byte %" PRIu64 ")",
                      file, where, row, i, at);
            return false;
        }
        qq += (double)vec[i] * vec[i];
    }
    if (lds_index_metric(idx) == LDS_METRIC_COSINE && qq == 0.0) {
        cli_failf("%s: %srow %" PRIu64 " of the index is zero, which has no cosine similarity",
                  file, where, row);
        return false;
    }
    return true;
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
        json_object_object_add(o, "key", cli_json_key(idx, row));
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

/* Writes "element N '<token>' <what>" into why[0, cap), the token's bytes as they are
   (at most 40; a NUL among them too: the printer escapes them); returns its length. */
static size_t say_element(char *why, size_t cap, size_t n, const char *tok, size_t w,
                          const char *what)
{
    int k = snprintf(why, cap, "element %zu '", n);
    size_t len = k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap - 1;
    size_t t = w < 40 ? w : 40;
    if (t > cap - 1 - len)
        t = cap - 1 - len;
    memcpy(why + len, tok, t);
    len += t;
    k = snprintf(why + len, cap - len, "' %s", what);
    len += k < 0 ? 0 : (size_t)k < cap - len ? (size_t)k : cap - len - 1;
    return len;
}

static bool is_vector_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Parses a vector of exactly `dim` finite numbers separated by commas and/or white
   space from text[0, len) (an empty element, between two commas or before the first
   or after the last, is refused); on failure writes the reason to why[0, cap) and its
   length (it may quote input bytes, a NUL among them) to *why_len. Elements count
   from 0. */
static bool parse_vector(const char *text, size_t len, uint32_t dim, float *out, char *why,
                         size_t cap, size_t *why_len)
{
    size_t n = 0, i = 0;
    bool comma = true; /* a comma (or the start) since the last element */
    bool any_comma = false;
    for (;;) {
        while (i < len && is_vector_space(text[i]))
            i++;
        if (i < len && text[i] == ',') {
            if (comma) {
                int k = snprintf(why, cap,
                                 "element %zu is empty (two commas, or a comma "
                                 "with no number before it)",
                                 n);
                *why_len = k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap - 1;
                return false;
            }
            comma = any_comma = true;
            i++;
            continue;
        }
        if (i == len) {
            if (comma && any_comma) {
                int k = snprintf(why, cap, "element %zu is empty (a comma ends the vector)", n);
                *why_len = k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap - 1;
                return false;
            }
            break;
        }
        size_t j = i;
        while (j < len && text[j] != ',' && !is_vector_space(text[j]))
            j++;
        char num[64];
        size_t w = j - i;
        char *end = NULL;
        float x = 0;
        if (w < sizeof num) {
            memcpy(num, text + i, w);
            num[w] = '\0';
            x = strtof(num, &end);
        }
        if (w >= sizeof num || end != num + w || strpbrk(num, "xXnN")) {
            *why_len = say_element(why, cap, n, text + i, w, "is not a finite decimal number");
            return false;
        }
        if (!isfinite(x)) {
            *why_len = say_element(why, cap, n, text + i, w,
                                   "is out of float32's range (largest 3.40282347e+38)");
            return false;
        }
        if (n < dim)
            out[n] = x;
        n++;
        comma = false;
        i = j;
    }
    if (n != dim) {
        int k = snprintf(why, cap, "%zu numbers, the index has dim %" PRIu32, n, dim);
        *why_len = k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap - 1;
        return false;
    }
    return true;
}

/* The most bytes --queries or --vector-file reads. */
#define TEXT_FILE_MAX ((size_t)64 << 20)

/* Reads the whole of `path` ("-": standard input), a regular file or a pipe of at most
   TEXT_FILE_MAX bytes, into a NUL-terminated buffer; on failure returns NULL with the
   reason in why[0, cap) (never "Success": a device such as /dev/zero is refused, an
   endless stream stops at the bound). */
static char *read_text_file(const char *path, size_t *len, char *why, size_t cap)
{
    bool std = strcmp(path, "-") == 0;
    FILE *f = std ? stdin : fopen(path, "rb");
    if (!f) {
        snprintf(why, cap, "cannot read: %s", strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        snprintf(why, cap, "cannot read: %s", strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode) && !S_ISFIFO(sb.st_mode) && !S_ISSOCK(sb.st_mode)) {
        snprintf(why, cap, "not a regular file or a pipe (a device or a directory)");
        goto fail;
    }
    if (S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > TEXT_FILE_MAX) {
        snprintf(why, cap, "%" PRIu64 " bytes, more than the %zu (64 MiB) read",
                 (uint64_t)sb.st_size, TEXT_FILE_MAX);
        goto fail;
    }
    size_t bufcap = 4096, n = 0;
    char *buf = malloc(bufcap);
    while (buf) {
        if (n + 1 == bufcap) {
            if (n == TEXT_FILE_MAX) {
                if (fgetc(f) == EOF)
                    break; /* exactly the most */
                snprintf(why, cap, "more than %zu bytes (64 MiB), the most read", TEXT_FILE_MAX);
                free(buf);
                goto fail;
            }
            size_t next = bufcap * 2 > TEXT_FILE_MAX + 1 ? TEXT_FILE_MAX + 1 : bufcap * 2;
            char *nb = realloc(buf, next);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            bufcap = next;
        }
        size_t got = fread(buf + n, 1, bufcap - 1 - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (!buf) {
        snprintf(why, cap, "out of memory");
        goto fail;
    }
    if (ferror(f)) {
        snprintf(why, cap, "cannot read: %s", strerror(errno));
        free(buf);
        goto fail;
    }
    if (!std)
        fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
fail:
    if (!std)
        fclose(f);
    return NULL;
}

/* One query of a run: its vector and the row it came from (UINT64_MAX: none). */
typedef struct query {
    uint64_t row;
    uint64_t line; /* 1-based line of --queries, 0 otherwise */
} query;

/* The neighbours of one query as the JSON object of --json. */
static json_object *similar_json(const lds_index *idx, const query *q, const lds_hit *hits,
                                 size_t kept)
{
    json_object *o = json_object_new_object();
    if (q->line)
        json_object_object_add(o, "query", json_object_new_uint64(q->line));
    bool has_row = q->row != UINT64_MAX;
    json_object_object_add(o, "key", has_row ? cli_json_key(idx, q->row) : NULL);
    json_object_object_add(o, "row", has_row ? json_object_new_uint64(q->row) : NULL);
    json_object_object_add(o, "metric",
                           json_object_new_string(lds_metric_name(lds_index_metric(idx))));
    json_object *list = json_object_new_array_ext((int)kept);
    for (size_t i = 0; i < kept; i++) {
        json_object *h = json_object_new_object();
        json_object_object_add(h, "key", cli_json_key(idx, hits[i].row));
        json_object_object_add(h, "row", json_object_new_uint64(hits[i].row));
        json_object_object_add(h, "score", json_float(hits[i].score));
        json_object_array_add(list, h);
    }
    json_object_object_add(o, "neighbours", list);
    return o;
}

/* Leaves out the query's own row; returns how many of hits[0, n) are kept (<= k). */
static size_t drop_self(lds_hit *hits, size_t n, uint64_t self, uint64_t k)
{
    size_t kept = 0;
    for (size_t i = 0; i < n && kept < k; i++)
        if (hits[i].row != self)
            hits[kept++] = hits[i];
    return kept;
}

/* Queries per lds_index_search_batch call of --queries (bounds the memory). */
#define QUERY_CHUNK 256

/* --queries: one JSON line per line of the file, searched QUERY_CHUNK at a time. */
static int similar_queries(const query_args *a, const lds_index *idx)
{
    size_t len = 0;
    char rwhy[160];
    char *text = read_text_file(a->queries, &len, rwhy, sizeof rwhy);
    if (!text)
        return cli_failf("%s: %s", a->queries, rwhy);
    uint32_t dim = lds_index_dim(idx);
    size_t want = (size_t)a->k + 1;
    float *vecs = malloc(sizeof(float) * dim * QUERY_CHUNK);
    lds_hit *hits = malloc(sizeof(lds_hit) * want * QUERY_CHUNK);
    size_t *nh = malloc(sizeof(size_t) * QUERY_CHUNK);
    query *qs = malloc(sizeof(query) * QUERY_CHUNK);
    int rc = CLI_OK;
    if (!vecs || !hits || !nh || !qs) {
        rc = cli_failf("out of memory");
        goto done;
    }
    lds_search_options so;
    lds_search_options_default(&so);
    so.threads = a->threads;
    size_t pos = 0, nq = 0;
    uint64_t line = 0;
    bool bad = false;
    while (rc == CLI_OK && (pos < len || nq > 0)) {
        if (pos < len) {
            size_t end = pos;
            while (end < len && text[end] != '\n')
                end++;
            size_t n = end - pos;
            if (n > 0 && text[pos + n - 1] == '\r')
                n--;
            const char *l = text + pos;
            pos = end < len ? end + 1 : end;
            line++;
            if (n == 0)
                continue;
            uint64_t row = UINT64_MAX;
            char why[128];
            size_t why_len = 0;
            lds_status kst =
                lds_index_has_keys(idx) ? lds_index_find_key(idx, l, n, &row) : LDS_E_NOT_FOUND;
            bool is_key = kst == LDS_OK;
            if (kst != LDS_OK && kst != LDS_E_NOT_FOUND) {
                /* A broken key table (a repeat under the unique flag) is not "not a key". */
                key_lookup_failed(idx, a->req.file, kst);
                bad = true;
                pos = len;
            } else if (is_key) {
                lds_index_row_f32(idx, row, vecs + nq * dim, dim);
                if (!row_query_usable(idx, a->req.file, line, row, vecs + nq * dim, dim)) {
                    bad = true;
                    pos = len;
                }
            }
            if (bad) {
                /* reported above */
            } else if (!is_key &&
                       !parse_vector(l, n, dim, vecs + nq * dim, why, sizeof why, &why_len)) {
                fputs("lodestar: ", stderr);
                cli_put_escaped(stderr, a->queries, strlen(a->queries));
                fprintf(stderr, ": line %" PRIu64 ": ", line);
                if (lds_index_has_keys(idx)) {
                    fputs("not a key of the index ('", stderr);
                    cli_put_escaped(stderr, l, n < 60 ? n : 60);
                    fputs("'), nor a vector: ", stderr);
                }
                cli_put_escaped(stderr, why, why_len); /* it quotes the line's bytes */
                fputc('\n', stderr);
                bad = true; /* the lines before it are still answered */
                pos = len;
            } else if (!is_key && is_zero(vecs + nq * dim, dim) &&
                       lds_index_metric(idx) == LDS_METRIC_COSINE) {
                /* Named by its line here: the search would count within its chunk. */
                fputs("lodestar: ", stderr);
                cli_put_escaped(stderr, a->queries, strlen(a->queries));
                fprintf(stderr, ": line %" PRIu64 ": a zero query has no cosine similarity\n",
                        line);
                bad = true;
                pos = len;
            } else {
                qs[nq++] = (query){row, line};
            }
            if (nq < QUERY_CHUNK && pos < len)
                continue;
            if (nq == 0)
                break;
        }
        lds_error err;
        lds_error_init(&err);
        lds_status st = lds_index_search_batch(idx, vecs, nq, dim, want, &so, hits, nh, &err);
        if (st != LDS_OK) {
            rc = cli_fail(a->req.file, st, &err);
            break;
        }
        for (size_t j = 0; j < nq && rc == CLI_OK; j++) {
            lds_hit *h = hits + j * want;
            size_t kept = drop_self(h, nh[j], qs[j].row, a->k);
            json_object *o = similar_json(idx, &qs[j], h, kept);
            const char *t = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                                  JSON_C_TO_STRING_NOSLASHESCAPE);
            if (t)
                printf("%s\n", t);
            else
                rc = cli_failf("out of memory");
            json_object_put(o);
        }
        nq = 0;
    }
    if (bad && rc == CLI_OK)
        rc = CLI_FAIL;
done:
    free(text);
    free(vecs);
    free(hits);
    free(nh);
    free(qs);
    return rc;
}

int cli_similar(int argc, char **argv)
{
    query_args a;
    int rc = parse_query_args(argc, argv, similar_usage, true, &a);
    if (rc >= 0)
        return rc;
    lds_index *idx = NULL;
    uint64_t row = UINT64_MAX;
    float *vec = NULL;
    lds_hit *hits = NULL;
    char *vtext = NULL;
    if (a.n_positive + a.n_negative > 0) {
        cli_analogy *an = NULL;
        rc = cli_analogy_parse(argv[0], a.positive, a.n_positive, a.negative, a.n_negative, &an);
        if (rc >= 0)
            goto done;
        lds_load_info info;
        rc = cli_load(&a.req, &idx, &info);
        if (rc == CLI_OK)
            rc = cli_analogy_run(an, idx, a.req.file, a.k, a.threads, a.json);
        cli_analogy_free(an);
        goto done;
    }
    if (a.queries || a.vector || a.vector_file) {
        lds_load_info info;
        rc = cli_load(&a.req, &idx, &info);
        if (rc != CLI_OK)
            goto done;
        if (a.queries) {
            rc = similar_queries(&a, idx);
            goto done;
        }
        const char *what = a.vector ? "--vector" : a.vector_file;
        size_t len = 0;
        if (a.vector_file) {
            char rwhy[160];
            vtext = read_text_file(a.vector_file, &len, rwhy, sizeof rwhy);
            if (!vtext) {
                rc = cli_failf("%s: %s", a.vector_file, rwhy);
                goto done;
            }
        }
        const char *text = a.vector ? a.vector : vtext;
        if (a.vector)
            len = strlen(a.vector);
        uint32_t dim = lds_index_dim(idx);
        vec = malloc(sizeof(float) * dim);
        char why[128];
        size_t why_len = 0;
        if (!vec) {
            rc = cli_failf("out of memory");
            goto done;
        }
        if (!parse_vector(text, len, dim, vec, why, sizeof why, &why_len)) {
            fputs("lodestar: ", stderr);
            cli_put_escaped(stderr, what, strlen(what));
            fputs(": ", stderr);
            cli_put_escaped(stderr, why, why_len);
            fputc('\n', stderr);
            rc = CLI_FAIL;
            goto done;
        }
    } else {
        rc = load_row(&a, &idx, &row, &vec);
        if (rc >= 0)
            goto done;
        if (!row_query_usable(idx, a.req.file, 0, row, vec, lds_index_dim(idx))) {
            rc = CLI_FAIL;
            goto done;
        }
    }
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
    lds_search_options so;
    lds_search_options_default(&so);
    so.threads = a.threads;
    lds_status st =
        lds_index_search_batch(idx, vec, 1, lds_index_dim(idx), want, &so, hits, &n, &err);
    if (st != LDS_OK) {
        rc = cli_fail(a.req.file, st, &err);
        goto done;
    }
    size_t kept = drop_self(hits, n, row, a.k);
    const char *metric = lds_metric_name(lds_index_metric(idx));
    rc = CLI_OK;
    if (a.json) {
        query q = {row, 0};
        rc = print_json(similar_json(idx, &q, hits, kept));
    } else {
        bool keys = lds_index_has_keys(idx);
        int sw, rw;
        cli_hit_widths(hits, kept, 10, 8, &sw, &rw);
        printf("%4s  %-*s %*s%s\n", "rank", sw,
               lds_index_metric(idx) == LDS_METRIC_L2 ? "distance" : metric, rw, "row",
               keys ? "  key" : "");
        for (size_t i = 0; i < kept; i++) {
            /* The shortest decimal that reads back as the score, as JSON has it: "%f" wrote
               a dot product of 1e38 as 39 digits, and 1e-7 as 0.000000. */
            char score[32];
            cli_format_float(score, sizeof score, hits[i].score);
            printf("%4zu  %-*s %*" PRIu64, i + 1, sw, score, rw, hits[i].row);
            if (keys) {
                fputs("  ", stdout);
                print_key(idx, hits[i].row);
            }
            fputc('\n', stdout);
        }
    }
done:
    free(vtext);
    free(hits);
    free(vec);
    lds_index_free(idx);
    query_args_free(&a);
    return rc;
}
