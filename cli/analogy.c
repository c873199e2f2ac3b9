/* The analogy query of lodestar similar --positive/--negative (the command itself, its
 * options and the plain similar query are in query.c, which calls this file; this file calls
 * nothing of query.c): gensim's most_similar arithmetic on keys.
 *
 * As KeyedVectors.most_similar (gensim 4) computes it: every given key's vector is
 * divided by its L2 norm, the unit vectors are averaged with weight +1 (positive) or -1
 * (negative), the mean is divided by its norm, and the rows are ranked by cosine
 * similarity to it, the given keys' own rows left out. Here the norms and the mean are
 * taken in double and the query rounded once to float32; the ranking is the index's exact
 * cosine search (lds_index_search_batch). */
#include "cli.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One key of --positive or --negative: key[0, len), a piece of an argv string. */
typedef struct analogy_key {
    const char *key;
    size_t len;
    bool positive;
    uint64_t row; /* set once the index is loaded */
} analogy_key;

struct cli_analogy {
    analogy_key *keys;
    size_t n;
};

void cli_analogy_free(cli_analogy *an)
{
    if (!an)
        return;
    free(an->keys);
    free(an);
}

/* Prints "'key'" escaped. */
static void put_quoted(FILE *f, const analogy_key *k)
{
    fputc('\'', f);
    cli_put_escaped(f, k->key, k->len);
    fputc('\'', f);
}

static int compare_keys(const void *a, const void *b)
{
    const analogy_key *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->key, y->key, n);
    if (c != 0)
        return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

int cli_analogy_parse(const char *prog, char *const *pos, size_t npos, char *const *neg,
                      size_t nneg, cli_analogy **out)
{
    *out = NULL;
    size_t n = 0;
    for (size_t list = 0; list < 2; list++)
        for (size_t i = 0; i < (list ? nneg : npos); i++) {
            const char *s = list ? neg[i] : pos[i];
            n++;
            for (; *s; s++)
                n += *s == ',';
        }
    cli_analogy *an = calloc(1, sizeof *an);
    analogy_key *sorted = NULL;
    if (!an || !(an->keys = calloc(n ? n : 1, sizeof *an->keys))) {
        cli_analogy_free(an);
        return cli_failf("out of memory");
    }
    for (size_t list = 0; list < 2; list++)
        for (size_t i = 0; i < (list ? nneg : npos); i++) {
            const char *s = list ? neg[i] : pos[i];
            const char *opt = list ? "--negative" : "--positive";
            for (size_t piece = 0;; piece++) {
                const char *comma = strchr(s, ',');
                size_t len = comma ? (size_t)(comma - s) : strlen(s);
                if (len == 0) {
                    cli_analogy_free(an);
                    return cli_usage_error(prog,
                                           "%s: key %zu of '%s' is empty (keys are separated "
                                           "by single commas)",
                                           opt, piece + 1, list ? neg[i] : pos[i]);
                }
                an->keys[an->n++] = (analogy_key){s, len, list == 0, 0};
                if (!comma)
                    break;
                s = comma + 1;
            }
        }
    /* A key in both lists would cancel itself out: say which (sorted, so O(n log n)). */
    sorted = malloc(sizeof *sorted * an->n);
    if (!sorted) {
        cli_analogy_free(an);
        return cli_failf("out of memory");
    }
    memcpy(sorted, an->keys, sizeof *sorted * an->n);
    qsort(sorted, an->n, sizeof *sorted, compare_keys);
    for (size_t i = 0; i + 1 < an->n; i++) {
        size_t j = i + 1;
        while (j < an->n && compare_keys(&sorted[i], &sorted[j]) == 0) {
            if (sorted[j].positive != sorted[i].positive) {
                fprintf(stderr, "%s: key ", prog);
                put_quoted(stderr, &sorted[i]);
                fprintf(stderr, " is in both --positive and --negative\nTry '%s --help'.\n", prog);
                free(sorted);
                cli_analogy_free(an);
                return CLI_USAGE;
            }
            j++;
        }
    }
    free(sorted);
    *out = an;
    return -1;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Finds every key's row; reports all the keys that are missing at once. */
static int find_rows(cli_analogy *an, const lds_index *idx, const char *file)
{
    if (!lds_index_has_keys(idx))
        return cli_failf("%s: the index has no keys, so --positive/--negative cannot name rows",
                         file);
    size_t missing = 0;
    for (size_t i = 0; i < an->n; i++) {
        analogy_key *k = &an->keys[i];
        lds_status st = lds_index_find_key(idx, k->key, k->len, &k->row);
        if (st == LDS_E_NOT_FOUND) {
            if (missing++ == 0) {
                fputs("lodestar: ", stderr);
                cli_put_escaped(stderr, file, strlen(file));
                fputs(": not in the index: ", stderr);
            } else {
                fputs(", ", stderr);
            }
            put_quoted(stderr, k);
            continue;
        }
        if (st != LDS_OK) {
            if (missing)
                fputc('\n', stderr);
            /* A repeated key under the unique flag: the check names both rows. */
            lds_error err;
            lds_error_init(&err);
            bool detail = st == LDS_E_DUP_KEY && lds_index_check_keys(idx, &err) == st;
            return cli_fail(file, st, detail ? &err : NULL);
        }
    }
    if (missing) {
        fprintf(stderr, " (%zu of %zu key%s)\n", missing, an->n, an->n == 1 ? "" : "s");
        return CLI_FAIL;
    }
    return CLI_OK;
}

/* The unit-normalized, weighted mean of the keys' unit vectors, into q[0, dim). */
static int mean_query(const cli_analogy *an, const lds_index *idx, const char *file, float *q,
                      float *row, double *acc)
{
    uint32_t dim = lds_index_dim(idx);
    memset(acc, 0, sizeof *acc * dim);
    for (size_t i = 0; i < an->n; i++) {
        const analogy_key *k = &an->keys[i];
        lds_status st = lds_index_row_f32(idx, k->row, row, dim);
        if (st != LDS_OK)
            return cli_fail(file, st, NULL);
        double nn = 0.0;
        for (uint32_t j = 0; j < dim; j++)
            nn += (double)row[j] * row[j];
        if (!isfinite(nn) || nn == 0.0) {
            fputs("lodestar: ", stderr);
            cli_put_escaped(stderr, file, strlen(file));
            fputs(": key ", stderr);
            put_quoted(stderr, k);
            fprintf(stderr, " (row %" PRIu64 ") %s\n", k->row,
                    nn == 0.0 ? "is a zero vector, which has no direction"
                              : "holds a non-finite element");
            return CLI_FAIL;
        }
        double w = (k->positive ? 1.0 : -1.0) / sqrt(nn);
        for (uint32_t j = 0; j < dim; j++)
            acc[j] += w * row[j];
    }
    /* gensim divides by the total weight first; the normalization below makes that moot. */
    double mm = 0.0;
    for (uint32_t j = 0; j < dim; j++)
        mm += acc[j] * acc[j];
    if (mm == 0.0)
        return cli_failf("%s: the keys' weighted mean is the zero vector, which has no "
                         "cosine similarity",
                         file);
    double inv = 1.0 / sqrt(mm);
    for (uint32_t j = 0; j < dim; j++)
        q[j] = (float)(acc[j] * inv);
    return CLI_OK;
}

static int print_analogy_json(const cli_analogy *an, const lds_index *idx, const lds_hit *hits,
                              size_t kept)
{
    json_object *o = json_object_new_object();
    json_object *lists[2] = {json_object_new_array(), json_object_new_array()};
    for (size_t i = 0; i < an->n; i++)
        json_object_array_add(lists[an->keys[i].positive ? 0 : 1],
                              json_object_new_string_len(an->keys[i].key, (int)an->keys[i].len));
    json_object_object_add(o, "positive", lists[0]);
    json_object_object_add(o, "negative", lists[1]);
    json_object_object_add(o, "metric", json_object_new_string("cosine"));
    json_object *list = json_object_new_array_ext((int)kept);
    for (size_t i = 0; i < kept; i++) {
        json_object *h = json_object_new_object();
        json_object_object_add(h, "key", cli_json_key(idx, hits[i].row));
        json_object_object_add(h, "row", json_object_new_uint64(hits[i].row));
        char buf[40];
        cli_format_float(buf, sizeof buf, hits[i].score);
        json_object_object_add(
            h, "score",
            isfinite(hits[i].score) ? json_object_new_double_s(hits[i].score, buf) : NULL);
        json_object_array_add(list, h);
    }
    json_object_object_add(o, "neighbours", list);
    const char *text = json_object_to_json_string_ext(
        o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    int rc = text ? CLI_OK : cli_failf("out of memory");
    if (text)
        printf("%s\n", text);
    json_object_put(o);
    return rc;
}

int cli_analogy_run(cli_analogy *an, const lds_index *idx, const char *file, uint64_t k,
                    unsigned threads, bool json)
{
    if (lds_index_metric(idx) != LDS_METRIC_COSINE)
        return cli_failf("%s: --positive/--negative rank by cosine similarity (gensim's "
                         "most_similar), but the index's metric is %s",
                         file, lds_metric_name(lds_index_metric(idx)));
    int rc = find_rows(an, idx, file);
    if (rc != CLI_OK)
        return rc;
    uint32_t dim = lds_index_dim(idx);
    /* The given keys' rows, sorted and distinct: left out of the results. */
    uint64_t *self = malloc(sizeof *self * an->n);
    float *q = malloc(sizeof *q * dim);
    float *row = malloc(sizeof *row * dim);
    double *acc = malloc(sizeof *acc * dim);
    lds_hit *hits = NULL;
    if (!self || !q || !row || !acc) {
        rc = cli_failf("out of memory");
        goto done;
    }
    size_t nself = 0;
    for (size_t i = 0; i < an->n; i++)
        self[i] = an->keys[i].row;
    qsort(self, an->n, sizeof *self, compare_u64);
    for (size_t i = 0; i < an->n; i++)
        if (nself == 0 || self[nself - 1] != self[i])
            self[nself++] = self[i];
    rc = mean_query(an, idx, file, q, row, acc);
    if (rc != CLI_OK)
        goto done;
    /* Enough hits that k remain once the given rows are dropped. */
    size_t want = (size_t)k + nself;
    hits = malloc(sizeof *hits * want);
    if (!hits) {
        rc = cli_failf("out of memory");
        goto done;
    }
    lds_search_options so;
    lds_search_options_default(&so);
    so.threads = threads;
    lds_error err;
    lds_error_init(&err);
    size_t n = 0;
    lds_status st = lds_index_search_batch(idx, q, 1, dim, want, &so, hits, &n, &err);
    if (st != LDS_OK) {
        rc = cli_fail(file, st, &err);
        goto done;
    }
    size_t kept = 0;
    for (size_t i = 0; i < n && kept < k; i++)
        if (!bsearch(&hits[i].row, self, nself, sizeof *self, compare_u64))
            hits[kept++] = hits[i];
    if (json) {
        rc = print_analogy_json(an, idx, hits, kept);
    } else {
        /* The table of `lodestar similar KEY`. */
        int sw, rw;
        cli_hit_widths(hits, kept, 10, 8, &sw, &rw);
        printf("%4s  %-*s %*s  key\n", "rank", sw, "cosine", rw, "row");
        for (size_t i = 0; i < kept; i++) {
            char score[32]; /* as query.c: the shortest decimal that reads back */
            cli_format_float(score, sizeof score, hits[i].score);
            printf("%4zu  %-*s %*" PRIu64 "  ", i + 1, sw, score, rw, hits[i].row);
            const char *key = NULL;
            size_t len = 0;
            if (lds_index_key(idx, hits[i].row, &key, &len) == LDS_OK)
                cli_put_escaped(stdout, key, len);
            fputc('\n', stdout);
        }
    }
done:
    free(self);
    free(q);
    free(row);
    free(acc);
    free(hits);
    return rc;
}
