/*
 * The shard manifest (lodestar_manifest.h): read through the loader's byte
 * source (a file descriptor, or libcurl for a URL), parsed by json-c with a
 * depth limit, and checked rule by rule. The rules MF1..MF17 are docs/format.md
 * section 9; each check below cites its rule. Why here, and the limits:
 * docs/adr/0033-one-manifest-reader.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "hashtab.h"
#include "load_internal.h"
#include "lodestar_manifest.h"

#define MANIFEST_FORMAT "lodestar-shards"
#define NO_ENTRY        SIZE_MAX

typedef struct mshard {
    char *file;
    char *location;
    uint64_t first_row, rows, payload_bytes, checksum;
} mshard;

struct lds_manifest {
    char *where; /* as given: resolves "file" (MF10) */
    lds_manifest_info info;
    mshard *shards;
};

/* What a loaded shard is, as far as an entry can disagree with it. */
typedef struct shard_facts {
    bool verified, has_ids, has_keys;
    uint32_t dim;
    lds_dtype dtype;
    lds_metric metric;
    uint64_t rows, payload_bytes, checksum;
} shard_facts;

void lds_manifest_options_default(lds_manifest_options *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    opts->size = sizeof *opts;
    opts->max_bytes = LDS_MANIFEST_MAX_BYTES;
}

void lds_manifest_info_init(lds_manifest_info *info)
{
    if (info) {
        memset(info, 0, sizeof *info);
        info->size = sizeof *info;
    }
}

void lds_manifest_shard_init(lds_manifest_shard *shard)
{
    if (shard) {
        memset(shard, 0, sizeof *shard);
        shard->size = sizeof *shard;
    }
}

void lds_manifest_verify_stats_init(lds_manifest_verify_stats *stats)
{
    if (stats) {
        memset(stats, 0, sizeof *stats);
        stats->size = sizeof *stats;
    }
}

static bool is_url(const char *s)
{
    return strncasecmp(s, "http://", 7) == 0 || strncasecmp(s, "https://", 8) == 0 ||
           strncasecmp(s, "s3://", 5) == 0;
}

/* Writes `s` (n bytes) into out[cap] for a message: control characters (C0, DEL,
   and C1 as UTF-8 0xC2 0x80..0x9F) and backslashes escaped as \xNN, cut with
   "..." past cap. A name from the file never reaches a terminal raw. */
static void escape(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char tmp[16];
        size_t len;
        if (c < 0x20 || c == 0x7f || c == '\\') {
            len = (size_t)snprintf(tmp, sizeof tmp, "\\x%02x", c);
        } else if (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 &&
                   (unsigned char)s[i + 1] <= 0x9f) {
            len = (size_t)snprintf(tmp, sizeof tmp, "\\xc2\\x%02x", (unsigned char)s[++i]);
        } else {
            tmp[0] = (char)c;
            len = 1;
        }
        if (o + len + 4 > cap) {
            if (cap >= 4) {
                memcpy(out + (o < cap - 4 ? o : cap - 4), "...", 4);
                return;
            }
            break;
        }
        memcpy(out + o, tmp, len);
        o += len;
    }
    if (cap)
        out[o < cap ? o : cap - 1] = '\0';
}

/* The manifest's location as messages show it: without user:password, escaped. */
static void shown_name(const char *where, char *out, size_t cap)
{
    char red[512];
    lds_url_redact(where ? where : "manifest.json", red, sizeof red);
    escape(red, strlen(red), out, cap);
}

/* Reading and parsing */

typedef struct vctx {
    char shown[160];
    lds_error *err;
} vctx;

/* A refusal of a field: "SHOWN: NAME: what", NAME being the field, or
   shards[i].field for an entry. `field` is the static name for lds_error.field;
   line = entry + 1 (0 for the whole). */
__attribute__((format(printf, 5, 6))) static lds_status
bad(vctx *v, lds_status st, const char *field, size_t entry, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char name[48];
    if (entry == NO_ENTRY)
        snprintf(name, sizeof name, "%s", field);
    else if (strncmp(field, "shards[].", 9) == 0)
        snprintf(name, sizeof name, "shards[%zu].%s", entry, field + 9);
    else
        snprintf(name, sizeof name, "shards[%zu]", entry);
    return lds__error_fill(v->err, st, field, 0, false, entry == NO_ENTRY ? 0 : (uint64_t)entry + 1,
                           0, NULL, "%s: %s: %s", v->shown, name, what);
}

/* A refusal at a byte of the text (syntax, limits): " (at byte N)" ends it. */
__attribute__((format(printf, 5, 6))) static lds_status
bad_at(vctx *v, lds_status st, const char *field, uint64_t offset, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return lds__error_fill(v->err, st, field, offset, true, 0, 0, NULL, "%s: %s", v->shown, what);
}

/* One pass over the text outside strings. MF2: every number is a non-negative
   integer of at most LDS_MANIFEST_MAX_NUMBER_CHARS digits (json-c would turn
   5,000 digits into a double, or 2^64 into 2^64 - 1, without a word). MF1:
   nothing but JSON's punctuation, numbers and words, which json-c's strict
   mode does not quite hold to. */
/* The value of the 4 hex digits at t[i..i+4), or -1 (json-c reports bad escapes itself). */
static long hex4(const char *t, size_t i, size_t n)
{
    if (n < 4 || i > n - 4)
        return -1;
    long x = 0;
    for (size_t k = i; k < i + 4; k++) {
        char c = t[k];
        int d = c >= '0' && c <= '9' ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        x = x * 16 + d;
    }
    return x;
}

static lds_status scan_text(vctx *v, const char *t, size_t n)
{
    bool in_string = false;
    int depth = 0;       /* arrays and objects open outside strings */
    bool closed = false; /* the outermost array or object has ended */
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        if (in_string) {
            if (c == '\\' && i + 1 < n && t[i + 1] == 'u') {
                /* MF1: a \u escape of a UTF-16 surrogate must be a high one followed by a
                   low one; json-c turns a lone one into U+FFFD, a name nobody wrote. */
                long u = hex4(t, i + 2, n);
                if (u >= 0xDC00 && u <= 0xDFFF)
                    return bad_at(v, LDS_E_BAD_UTF8, "manifest", i,
                                  "a lone UTF-16 low surrogate \\u%04lx in a string (MF1)", u);
                if (u >= 0xD800 && u <= 0xDBFF) {
                    long lo = i + 7 < n && t[i + 6] == '\\' && t[i + 7] == 'u' ? hex4(t, i + 8, n)
                                                                          : -1;
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return bad_at(v, LDS_E_BAD_UTF8, "manifest", i,
                                      "a UTF-16 high surrogate \\u%04lx not followed by a low "
                                      "one in a string (MF1)",
                                      u);
                    i += 6; /* the pair's first escape; the second is skipped below */
                }
                i++;
            } else if (c == '\\') {
                i++;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        if (closed && !strchr(" \t\r\n", c))
            /* MF1: nothing but white space after the value (json-c would stop earlier, at
               the first thing it cannot take, and name that instead) */
            return bad_at(v, LDS_E_PARSE, "manifest", i, "bytes after the JSON object (MF1)");
        if (c == '{' || c == '[')
            depth++;
        else if ((c == '}' || c == ']') && --depth == 0)
            closed = true;
        if (c == '"') {
            in_string = true;
            continue;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            /* MF1: JSON's three words only (json-c alone takes NaN, Infinity...). */
            size_t w = i;
            while (w < n && ((t[w] >= 'a' && t[w] <= 'z') || (t[w] >= 'A' && t[w] <= 'Z')))
                w++;
            if (!((w - i == 4 && (!memcmp(t + i, "true", 4) || !memcmp(t + i, "null", 4))) ||
                  (w - i == 5 && !memcmp(t + i, "false", 5))))
                return bad_at(v, LDS_E_PARSE, "manifest", i,
                              "not JSON: a word other than true, false and null (MF1)");
            i = w - 1;
            continue;
        }
        if (c != '-' && (c < '0' || c > '9')) {
            /* MF1: json-c alone takes 'single quotes' and comments. */
            if (!strchr(" \t\r\n{}[],:", c) || c == '\0')
                return bad_at(v, LDS_E_PARSE, "manifest", i,
                              "not JSON: unexpected byte 0x%02x (MF1)", (unsigned char)c);
            continue;
        }
        size_t start = i, digits = 0;
        bool other = false;
        while (i < n && ((t[i] >= '0' && t[i] <= '9') || strchr("-+.eE", t[i]) != NULL) &&
               t[i] != '\0') {
            if (t[i] >= '0' && t[i] <= '9')
                digits++;
            else
                other = true;
            i++;
        }
        if (other)
            return bad_at(v, LDS_E_BAD_VALUE, "manifest", start,
                          "a number that is not a non-negative integer (MF2)");
        if (digits > LDS_MANIFEST_MAX_NUMBER_CHARS)
            return bad_at(v, LDS_E_LIMIT, "manifest", start,
                          "a number of more than %d digits (MF2)", LDS_MANIFEST_MAX_NUMBER_CHARS);
        /* json-c keeps 2^64 and above as 2^64 - 1, without a word: refused here. */
        if (digits == 20 && memcmp(t + start, "18446744073709551615", 20) > 0)
            return bad_at(v, LDS_E_BAD_VALUE, "manifest", start, "a number above 2^64 - 1 (MF2)");
        i--;
    }
    return LDS_OK;
}

/* One JSON text, an object, nothing but white space after it (MF1), parsed
   with the depth limit (MF2). */
static lds_status parse_json(vctx *v, const char *text, size_t n, json_object **out)
{
    *out = NULL;
    if (n > INT_MAX)
        return bad_at(v, LDS_E_LIMIT, "manifest", INT_MAX, "more than %d bytes (MF2)", INT_MAX);
    lds_status st = scan_text(v, text, n);
    if (st != LDS_OK)
        return st;
    json_tokener *tok = json_tokener_new_ex(LDS_MANIFEST_MAX_DEPTH);
    if (!tok)
        return lds__error_fill(v->err, LDS_E_NOMEM, "manifest", 0, false, 0, 0, NULL,
                               "%s: out of memory for the JSON parser", v->shown);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS |
                                    JSON_TOKENER_VALIDATE_UTF8);
    json_object *o = json_tokener_parse_ex(tok, text, (int)n);
    enum json_tokener_error je = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!o || je != json_tokener_success) {
        json_object_put(o);
        if (je == json_tokener_error_depth)
            return bad_at(v, LDS_E_LIMIT, "manifest", end,
                          "JSON nested deeper than %d arrays and objects (MF2)",
                          LDS_MANIFEST_MAX_DEPTH);
        if (je == json_tokener_error_parse_utf8_string)
            return bad_at(v, LDS_E_BAD_UTF8, "manifest", end, "not UTF-8 text (MF1)");
        if (je == json_tokener_continue || je == json_tokener_success)
            return bad_at(v, LDS_E_PARSE, "manifest", n, "the text ends inside a JSON value (MF1)");
        return bad_at(v, LDS_E_PARSE, "manifest", end, "not JSON: %s (MF1)",
                      json_tokener_error_desc(je));
    }
    while (end < n &&
           (text[end] == ' ' || text[end] == '\t' || text[end] == '\r' || text[end] == '\n'))
        end++;
    if (end < n) {
        json_object_put(o);
        return bad_at(v, LDS_E_PARSE, "manifest", end, "bytes after the JSON object (MF1)");
    }
    if (!json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return bad_at(v, LDS_E_PARSE, "manifest", 0, "the JSON value is not an object (MF1)");
    }
    *out = o;
    return LDS_OK;
}

static json_object *member(json_object *o, const char *name)
{
    json_object *m = NULL;
    return json_object_object_get_ex(o, name, &m) ? m : NULL;
}

/* A whole number 0..2^64-1 (MF2 left no other kind of number). */
static lds_status get_u64(vctx *v, json_object *o, const char *name, const char *field,
                          size_t entry, const char *rule, uint64_t *out)
{
    json_object *m = member(o, name);
    if (!m || !json_object_is_type(m, json_type_int))
        return bad(v, LDS_E_BAD_VALUE, field, entry, "%s, expected an integer (%s)",
                   m ? "of another type" : "missing", rule);
    errno = 0;
    uint64_t x = json_object_get_uint64(m);
    if (errno != 0 || json_object_get_int64(m) < 0)
        return bad(v, LDS_E_BAD_VALUE, field, entry, "above 2^64 - 1 (%s)", rule);
    *out = x;
    return LDS_OK;
}

/* A string without NUL; `len` receives its length. */
static lds_status get_string(vctx *v, json_object *o, const char *name, const char *field,
                             size_t entry, const char *rule, const char **out, size_t *len)
{
    json_object *m = member(o, name);
    if (!m || !json_object_is_type(m, json_type_string))
        return bad(v, LDS_E_BAD_VALUE, field, entry, "%s, expected a string (%s)",
                   m ? "of another type" : "missing", rule);
    *out = json_object_get_string(m);
    *len = (size_t)json_object_get_string_len(m);
    if (strlen(*out) != *len)
        return bad(v, LDS_E_BAD_VALUE, field, entry, "contains a NUL character (%s)", rule);
    return LDS_OK;
}

static lds_status get_bool(vctx *v, json_object *o, const char *name, const char *rule, bool *out)
{
    json_object *m = member(o, name);
    if (!m || !json_object_is_type(m, json_type_boolean))
        return bad(v, LDS_E_BAD_VALUE, name, NO_ENTRY, "%s, expected true or false (%s)",
                   m ? "of another type" : "missing", rule);
    *out = json_object_get_boolean(m);
    return LDS_OK;
}

/* MF9: no control character (C0, DEL, C1); the text is UTF-8 already (MF1). */
static bool has_control(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return true;
        if (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] <= 0x9f)
            return true;
    }
    return false;
}

/* MF10: `file` resolved against the manifest's location `where`. */
static char *resolve(const char *where, const char *file, size_t flen)
{
    if (is_url(file))
        return strdup(file);
    if (where && is_url(where)) {
        const char *auth = strstr(where, "://") + 3;
        size_t path = (size_t)(auth - where) + strcspn(auth, "/?#");
        size_t plen = strcspn(where + path, "?#");
        size_t base = path;
        for (size_t i = path; i < path + plen; i++)
            if (where[i] == '/')
                base = i + 1;
        bool slash = base > path;
        char *out = malloc(base + 1 + 3 * flen + 1);
        if (!out)
            return NULL;
        memcpy(out, where, base);
        size_t o = base;
        if (!slash)
            out[o++] = '/';
        static const char keep[] = "-._~!$&'()*+,;=:@";
        for (size_t i = 0; i < flen; i++) {
            unsigned char c = (unsigned char)file[i];
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                strchr(keep, c) != NULL) {
                out[o++] = (char)c;
            } else {
                snprintf(out + o, 4, "%%%02X", c);
                o += 3;
            }
        }
        out[o] = '\0';
        return out;
    }
    const char *slash = where ? strrchr(where, '/') : NULL;
    size_t dlen = slash ? (size_t)(slash - where) + 1 : 0;
    char *out = malloc(dlen + flen + 1);
    if (!out)
        return NULL;
    if (dlen)
        memcpy(out, where, dlen);
    memcpy(out + dlen, file, flen + 1);
    return out;
}

static lds_status check_entry(vctx *v, lds_manifest *m, json_object *e, size_t i, uint64_t *next)
{
    mshard *s = &m->shards[i];
    s->payload_bytes = LDS_MANIFEST_NO_PAYLOAD_BYTES;
    if (!json_object_is_type(e, json_type_object))
        return bad(v, LDS_E_BAD_VALUE, "shards[]", i, "not an object (MF7)");
    const char *file, *sum;
    size_t flen, slen;
    lds_status st = get_string(v, e, "file", "shards[].file", i, "MF8", &file, &flen);
    if (st != LDS_OK)
        return st;
    /* Shown with a URL's credentials hidden (lds_url_redact), as every other message does:
       a manifest may name its shards by URL, user:password included. */
    char esc[96], shown[96];
    lds_url_redact(file, shown, sizeof shown);
    escape(shown, strlen(shown), esc, sizeof esc);
    if (flen == 0 || flen > LDS_MANIFEST_MAX_FILE_BYTES) /* MF9 */
        return bad(v, LDS_E_BAD_VALUE, "shards[].file", i, "%zu bytes, expected 1 to %u (MF9)",
                   flen, LDS_MANIFEST_MAX_FILE_BYTES);
    if (has_control(file, flen)) /* MF9 */
        return bad(v, LDS_E_BAD_VALUE, "shards[].file", i,
                   "\"%s\" contains a control character (MF9)", esc);
    if (!is_url(file) && (strchr(file, '/') || !strcmp(file, ".") || !strcmp(file, ".."))) {
        return bad(v, LDS_E_BAD_VALUE, "shards[].file", i,
                   "\"%s\" is neither a file name in the manifest's directory nor an http(s) "
                   "URL (MF8)",
                   esc);
    }
    if ((st = get_u64(v, e, "first_row", "shards[].first_row", i, "MF11", &s->first_row)) ||
        (st = get_u64(v, e, "rows", "shards[].rows", i, "MF11", &s->rows)))
        return st;
    if ((st = get_string(v, e, "checksum", "shards[].checksum", i, "MF12", &sum, &slen)))
        return st;
    bool hex = slen == 16;
    for (size_t k = 0; hex && k < slen; k++)
        hex = strchr("0123456789abcdefABCDEF", sum[k]) != NULL;
    if (!hex) /* MF12 */
        return bad(v, LDS_E_BAD_VALUE, "shards[].checksum", i,
                   "expected 16 hexadecimal digits (MF12)");
    s->checksum = strtoull(sum, NULL, 16);
    if (member(e, "payload_bytes") && (st = get_u64(v, e, "payload_bytes", "shards[].payload_bytes",
                                                    i, "MF12", &s->payload_bytes)))
        return st;
    if (s->payload_bytes == LDS_MANIFEST_NO_PAYLOAD_BYTES) /* MF12: reserved for "absent" */
        if (member(e, "payload_bytes"))
            return bad(v, LDS_E_BAD_VALUE, "shards[].payload_bytes", i,
                       "2^64 - 1 is no payload's size (MF12)");
    /* MF11: each shard's rows follow the one before's, from row 0, no gap, no overlap. */
    if (s->first_row < *next)
        return bad(v, LDS_E_BAD_VALUE, "shards[].first_row", i,
                   "%" PRIu64 " overlaps the rows before it, which end at %" PRIu64 " (MF11)",
                   s->first_row, *next);
    if (s->first_row > *next)
        return bad(v, LDS_E_BAD_VALUE, "shards[].first_row", i,
                   "%" PRIu64 " leaves rows %" PRIu64 " .. %" PRIu64 " in no shard (MF11)",
                   s->first_row, *next, s->first_row - 1);
    if (s->rows > m->info.rows - *next) /* MF13 */
        return bad(v, LDS_E_BAD_VALUE, "shards[].rows", i,
                   "%" PRIu64 " goes past the manifest's %" PRIu64 " rows (MF13)", s->rows,
                   m->info.rows);
    *next = s->first_row + s->rows;
    s->file = strndup(file, flen);
    s->location = resolve(m->where, file, flen);
    if (!s->file || !s->location)
        return lds__error_fill(v->err, LDS_E_NOMEM, "shards[]", 0, false, (uint64_t)i + 1, 0, NULL,
                               "%s: out of memory", v->shown);
    return LDS_OK;
}

static lds_status check_manifest(vctx *v, lds_manifest *m, json_object *o)
{
    const char *s;
    size_t len;
    lds_status st = get_string(v, o, "format", "format", NO_ENTRY, "MF3", &s, &len);
    if (st != LDS_OK)
        return st;
    if (strcmp(s, MANIFEST_FORMAT) != 0) { /* MF3 */
        char esc[64];
        escape(s, len, esc, sizeof esc);
        return bad(v, LDS_E_BAD_VALUE, "format", NO_ENTRY,
                   "\"%s\", expected \"" MANIFEST_FORMAT "\" (MF3)", esc);
    }
    uint64_t version, dim;
    if ((st = get_u64(v, o, "version", "version", NO_ENTRY, "MF4", &version)))
        return st;
    if (version != 1) /* MF4 */
        return bad(v, LDS_E_VERSION, "version", NO_ENTRY,
                   "%" PRIu64 ", and this library reads version 1 only (MF4)", version);
    m->info.version = 1;
    if ((st = get_u64(v, o, "rows", "rows", NO_ENTRY, "MF13", &m->info.rows)) ||
        (st = get_u64(v, o, "dim", "dim", NO_ENTRY, "MF5", &dim)))
        return st;
    if (dim == 0 || dim > UINT32_MAX) /* MF5 */
        return bad(v, LDS_E_BAD_VALUE, "dim", NO_ENTRY, "%" PRIu64 ", expected 1 to 2^32 - 1 (MF5)",
                   dim);
    m->info.dim = (uint32_t)dim;
    if ((st = get_string(v, o, "dtype", "dtype", NO_ENTRY, "MF5", &s, &len)))
        return st;
    if (lds_dtype_from_name(s, &m->info.dtype) != LDS_OK) { /* MF5 */
        char esc[64];
        escape(s, len, esc, sizeof esc);
        return bad(v, LDS_E_BAD_VALUE, "dtype", NO_ENTRY,
                   "\"%s\", expected f32, f16, bf16 or i8 (MF5)", esc);
    }
    if ((st = get_string(v, o, "metric", "metric", NO_ENTRY, "MF5", &s, &len)))
        return st;
    if (lds_metric_from_name(s, &m->info.metric) != LDS_OK) { /* MF5 */
        char esc[64];
        escape(s, len, esc, sizeof esc);
        return bad(v, LDS_E_BAD_VALUE, "metric", NO_ENTRY,
                   "\"%s\", expected cosine, dot or l2 (MF5)", esc);
    }
    if ((st = get_bool(v, o, "has_ids", "MF6", &m->info.has_ids)) ||
        (st = get_bool(v, o, "has_keys", "MF6", &m->info.has_keys)))
        return st;
    json_object *arr = member(o, "shards");
    if (!arr || !json_object_is_type(arr, json_type_array)) /* MF7 */
        return bad(v, LDS_E_BAD_VALUE, "shards", NO_ENTRY, "%s, expected an array (MF7)",
                   arr ? "of another type" : "missing");
    size_t n = json_object_array_length(arr);
    if (n == 0) /* MF7 */
        return bad(v, LDS_E_BAD_VALUE, "shards", NO_ENTRY, "empty (MF7)");
    if (n > LDS_MANIFEST_MAX_SHARDS) /* MF7 */
        return bad(v, LDS_E_LIMIT, "shards", NO_ENTRY, "%zu entries, more than %u (MF7)", n,
                   LDS_MANIFEST_MAX_SHARDS);
    m->shards = calloc(n, sizeof *m->shards);
    if (!m->shards)
        return lds__error_fill(v->err, LDS_E_NOMEM, "shards", 0, false, 0, 0, NULL,
                               "%s: out of memory for %zu entries", v->shown, n);
    m->info.shards = n;
    uint64_t next = 0;
    for (size_t i = 0; i < n; i++)
        if ((st = check_entry(v, m, json_object_array_get_idx(arr, i), i, &next)))
            return st;
    if (next != m->info.rows) /* MF13 */
        return bad(v, LDS_E_BAD_VALUE, "rows", NO_ENTRY,
                   "%" PRIu64 ", but the shards cover %" PRIu64 " rows (MF13)", m->info.rows, next);
    return LDS_OK;
}

static lds_status options_of(const lds_manifest_options *opts, lds_manifest_options *o,
                             lds_error *err)
{
    lds_manifest_options_default(o);
    if (!opts)
        return LDS_OK;
    if (opts->size < LDS_MANIFEST_OPTIONS_MIN_SIZE || opts->size > sizeof *o)
        return lds__error_fill(err, LDS_E_INVALID_ARG, "manifest_options.size", 0, false, 0, 0,
                               NULL, "lds_manifest_options.size is %zu, expected %zu", opts->size,
                               sizeof *o);
    memcpy(o, opts, opts->size);
    if (o->max_bytes == 0)
        o->max_bytes = LDS_MANIFEST_MAX_BYTES;
    return LDS_OK;
}

lds_status lds_manifest_parse(const void *text, size_t n, const char *where,
                              const lds_manifest_options *opts, lds_manifest **out, lds_error *err)
{
    if (out)
        *out = NULL;
    if (!out || (!text && n > 0))
        return lds__error_fill(err, LDS_E_INVALID_ARG, NULL, 0, false, 0, 0, NULL,
                               "lds_manifest_parse: NULL %s", out ? "text" : "out");
    lds_manifest_options o;
    lds_status st = options_of(opts, &o, err);
    if (st != LDS_OK)
        return st;
    vctx v = {.err = err};
    shown_name(where, v.shown, sizeof v.shown);
    if (n > o.max_bytes) /* MF2 */
        return bad_at(&v, LDS_E_LIMIT, "manifest", o.max_bytes,
                      "more than the manifest limit of %" PRIu64 " bytes (MF2)", o.max_bytes);
    lds_manifest *m = calloc(1, sizeof *m);
    /* MF10: without `where`, names resolve against the current directory. */
    if (!m || (where && !(m->where = strdup(where)))) {
        free(m);
        return lds__error_fill(err, LDS_E_NOMEM, "manifest", 0, false, 0, 0, NULL,
                               "%s: out of memory", v.shown);
    }
    m->info.size = sizeof m->info;
    json_object *j = NULL;
    st = parse_json(&v, text ? text : "", n, &j);
    if (st == LDS_OK)
        st = check_manifest(&v, m, j);
    json_object_put(j);
    if (st != LDS_OK) {
        lds_manifest_free(m);
        return st;
    }
    *out = m;
    return LDS_OK;
}

/* Reads the whole source into a buffer, at most `max` bytes (MF2). */
static lds_status read_all(vctx *v, lds__source *src, uint64_t max, char **text, size_t *n)
{
    size_t cap = 0, len = 0;
    char *buf = NULL;
    for (;;) {
        if (len == cap) {
            if ((uint64_t)len > max) {
                free(buf);
                return bad_at(v, LDS_E_LIMIT, "manifest", max,
                              "more than the manifest limit of %" PRIu64 " bytes (MF2)", max);
            }
            size_t grow = cap ? cap * 2 : 4096;
            if ((uint64_t)grow > max + 1)
                grow = (size_t)max + 1;
            char *nb = realloc(buf, grow);
            if (!nb) {
                free(buf);
                return lds__error_fill(v->err, LDS_E_NOMEM, "manifest", 0, false, 0, 0, NULL,
                                       "%s: out of memory for %zu bytes", v->shown, grow);
            }
            buf = nb;
            cap = grow;
        }
        size_t got = 0;
        lds_status st = lds__source_read(src, buf + len, cap - len, &got, v->err);
        if (st != LDS_OK) {
            free(buf);
            return st;
        }
        if (got == 0)
            break;
        len += got;
    }
    if ((uint64_t)len > max) {
        free(buf);
        return bad_at(v, LDS_E_LIMIT, "manifest", max,
                      "more than the manifest limit of %" PRIu64 " bytes (MF2)", max);
    }
    *text = buf;
    *n = len;
    return LDS_OK;
}

lds_status lds_manifest_read(const char *where, const lds_manifest_options *opts,
                             lds_manifest **out, lds_error *err)
{
    if (out)
        *out = NULL;
    if (!where || !out)
        return lds__error_fill(err, LDS_E_INVALID_ARG, NULL, 0, false, 0, 0, NULL,
                               "lds_manifest_read: NULL %s", where ? "out" : "where");
    lds_manifest_options o;
    lds_status st = options_of(opts, &o, err);
    if (st != LDS_OK)
        return st;
    vctx v = {.err = err};
    shown_name(where, v.shown, sizeof v.shown);
    lds_load_options lo;
    lds_load_options_default(&lo);
    const lds_load_options *load = o.load ? o.load : &lo;
    lds__source src;
    char *text = NULL;
    size_t n = 0;
    if (is_url(where)) {
        /* Through libcurl, as lds_load_url: user:password is HTTP authentication. */
        lds__url *u = NULL;
        if ((st = lds__url_open(where, load, &u, err)) != LDS_OK)
            return st;
        lds__source_init(&src, LDS__SRC_URL, load);
        src.url = u;
        st = read_all(&v, &src, o.max_bytes, &text, &n);
        lds__source_close(&src);
        lds__url_close(u);
    } else {
        int fd = open(where, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return lds__error_fill(err, LDS_E_IO, "manifest", 0, false, 0, errno, NULL, "%s: %s",
                                   v.shown, strerror(errno));
        struct stat sb;
        if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            close(fd);
            return lds__error_fill(err, LDS_E_IO, "manifest", 0, false, 0, EISDIR, NULL, "%s: %s",
                                   v.shown, strerror(EISDIR));
        }
        if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > o.max_bytes) {
            close(fd);
            return bad_at(&v, LDS_E_LIMIT, "manifest", o.max_bytes,
                          "%lld bytes, more than the manifest limit of %" PRIu64 " (MF2)",
                          (long long)sb.st_size, o.max_bytes);
        }
        lds__source_init(&src, LDS__SRC_FD, load);
        src.fd = fd;
        st = read_all(&v, &src, o.max_bytes, &text, &n);
        lds__source_close(&src);
        close(fd);
    }
    if (st == LDS_OK)
        st = lds_manifest_parse(text, n, where, &o, out, err);
    free(text);
    return st;
}

void lds_manifest_free(lds_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; m->shards && i < m->info.shards; i++) {
        free(m->shards[i].file);
        free(m->shards[i].location);
    }
    free(m->shards);
    free(m->where);
    free(m);
}

lds_status lds_manifest_get_info(const lds_manifest *m, lds_manifest_info *info)
{
    if (!m || !info || info->size < LDS_MANIFEST_INFO_MIN_SIZE || info->size > sizeof *info)
        return LDS_E_INVALID_ARG;
    *info = m->info;
    return LDS_OK;
}

lds_status lds_manifest_get_shard(const lds_manifest *m, size_t i, lds_manifest_shard *shard)
{
    if (!m || !shard || i >= m->info.shards || shard->size < LDS_MANIFEST_SHARD_MIN_SIZE ||
        shard->size > sizeof *shard)
        return LDS_E_INVALID_ARG;
    const mshard *s = &m->shards[i];
    shard->file = s->file;
    shard->location = s->location;
    shard->first_row = s->first_row;
    shard->rows = s->rows;
    shard->payload_bytes = s->payload_bytes;
    shard->checksum = s->checksum;
    return LDS_OK;
}

/* Checking shards */

static void facts_of(const lds_index *idx, shard_facts *f)
{
    f->verified = lds_index_checksum_verified(idx);
    f->has_ids = lds_index_has_ids(idx);
    f->has_keys = lds_index_has_keys(idx);
    f->dim = lds_index_dim(idx);
    f->dtype = lds_index_dtype(idx);
    f->metric = lds_index_metric(idx);
    f->rows = lds_index_rows(idx);
    f->payload_bytes = lds_index_payload_bytes(idx);
    f->checksum = lds_index_checksum(idx);
}

/* MF14..MF16: a loaded shard's facts against entry i. */
static lds_status compare(const lds_manifest_info *info, const lds_manifest_shard *s, size_t i,
                          const shard_facts *f, lds_error *err)
{
    char name[96] = "";
    if (s->file) {
        char red[512];
        lds_url_redact(s->file, red, sizeof red);
        escape(red, strlen(red), name, sizeof name);
    }
#define MISMATCH(st, field, what, ffmt, fv, mv)                                                    \
    lds__error_fill(err, st, field, 0, false, (uint64_t)i + 1, 0, NULL,                            \
                    "shards[%zu] (%s): %s differs from the manifest's (file " ffmt                 \
                    ", manifest " ffmt ")",                                                        \
                    i, name, what, fv, mv)
    if (!f->verified) /* MF14 */
        return lds__error_fill(
            err, LDS_E_CHECKSUM, "shards[].checksum", 0, false, (uint64_t)i + 1, 0, NULL,
            "shards[%zu] (%s): the payload checksum was not verified (MF14)", i, name);
    if (f->checksum != s->checksum) /* MF14 */
        return MISMATCH(LDS_E_CHECKSUM, "shards[].checksum", "checksum", "%016" PRIx64, f->checksum,
                        s->checksum);
    if (f->rows != s->rows) /* MF15 */
        return MISMATCH(LDS_E_BAD_VALUE, "shards[].rows", "row count", "%" PRIu64, f->rows,
                        s->rows);
    if (f->dim != info->dim) /* MF15 */
        return MISMATCH(LDS_E_BAD_VALUE, "dim", "dim", "%" PRIu32, f->dim, info->dim);
    if (f->dtype != info->dtype) /* MF15 */
        return MISMATCH(LDS_E_BAD_VALUE, "dtype", "dtype", "%s", lds_dtype_name(f->dtype),
                        lds_dtype_name(info->dtype));
    if (f->metric != info->metric) /* MF15 */
        return MISMATCH(LDS_E_BAD_VALUE, "metric", "metric", "%s", lds_metric_name(f->metric),
                        lds_metric_name(info->metric));
    if (f->has_ids != info->has_ids) /* MF16 */
        return MISMATCH(LDS_E_BAD_VALUE, "has_ids", "ids presence", "%s",
                        f->has_ids ? "ids" : "no ids", info->has_ids ? "ids" : "no ids");
    if (f->has_keys != info->has_keys) /* MF16 */
        return MISMATCH(LDS_E_BAD_VALUE, "has_keys", "keys presence", "%s",
                        f->has_keys ? "keys" : "no keys", info->has_keys ? "keys" : "no keys");
    if (s->payload_bytes != LDS_MANIFEST_NO_PAYLOAD_BYTES &&
        f->payload_bytes != s->payload_bytes) /* MF16 */
        return MISMATCH(LDS_E_BAD_VALUE, "shards[].payload_bytes", "payload_bytes", "%" PRIu64,
                        f->payload_bytes, s->payload_bytes);
#undef MISMATCH
    return LDS_OK;
}

lds_status lds_manifest_check_index(const lds_manifest_info *info, const lds_manifest_shard *shard,
                                    size_t i, const lds_index *index, lds_error *err)
{
    if (!info || !shard || !index || info->size < LDS_MANIFEST_INFO_MIN_SIZE ||
        info->size > sizeof *info || shard->size < LDS_MANIFEST_SHARD_MIN_SIZE ||
        shard->size > sizeof *shard)
        return lds__error_fill(err, LDS_E_INVALID_ARG, NULL, 0, false, 0, 0, NULL,
                               "lds_manifest_check_index: NULL argument or bad struct size");
    shard_facts f;
    facts_of(index, &f);
    return compare(info, shard, i, &f, err);
}

/* One distinct location during lds_manifest_verify (MF17). */
typedef struct location {
    size_t first, last; /* entries naming it */
    bool loaded;
    lds_status status;  /* of its load */
    lds_error *failure; /* the load's detail when status != LDS_OK, until `last` */
    shard_facts facts;
} location;

/* Entry -> distinct location, through a keyed open-addressing table (no
   attacker-chosen names can pile up in one probe run: common/hashtab.h). */
static lds_status group(const lds_manifest *m, size_t *loc_of, location **locs, size_t *nlocs)
{
    size_t n = m->info.shards, cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    size_t *table = calloc(cap, sizeof *table); /* distinct number + 1; 0 = empty */
    location *l = calloc(n, sizeof *l);
    if (!table || !l) {
        free(table);
        free(l);
        return LDS_E_NOMEM;
    }
    const lds__hashkey *hk = lds__hashkey_get();
    size_t d = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = m->shards[i].location;
        size_t len = strlen(s);
        size_t h = (size_t)lds__hash_key(hk, s, len) & (cap - 1);
        for (;; h = (h + 1) & (cap - 1)) {
            if (table[h] == 0) {
                table[h] = ++d;
                l[d - 1].first = i;
                break;
            }
            if (strcmp(m->shards[l[table[h] - 1].first].location, s) == 0)
                break;
        }
        loc_of[i] = table[h] - 1;
        l[table[h] - 1].last = i;
    }
    free(table);
    *locs = l;
    *nlocs = d;
    return LDS_OK;
}

/* Loads a location once: its facts, or the status and detail of its failure. */
static void load_location(const lds_manifest *m, size_t i, location *l, const lds_load_options *lo,
                          lds_manifest_verify_stats *stats)
{
    const mshard *s = &m->shards[i];
    lds_index *idx = NULL;
    lds_load_info info;
    lds_load_info_init(&info);
    lds_error e;
    lds_error_init(&e);
    lds_status st = is_url(s->location) ? lds_load_url(s->location, lo, &idx, &info, &e)
                                        : lds_load_path(s->location, lo, &idx, &info, &e);
    stats->loads++;
    stats->stream_bytes += info.stream_bytes;
    if (st == LDS_OK) {
        st = lds_index_check_keys(idx, &e);
        facts_of(idx, &l->facts);
        lds_index_free(idx);
    }
    l->loaded = true;
    l->status = st;
    if (st != LDS_OK) {
        l->failure = malloc(sizeof *l->failure);
        if (l->failure)
            *l->failure = e;
    }
}

lds_status lds_manifest_verify(const lds_manifest *m, const lds_load_options *opts,
                               lds_manifest_verify_fn each, void *ctx,
                               lds_manifest_verify_stats *stats, lds_error *err)
{
    lds_manifest_verify_stats own;
    lds_manifest_verify_stats_init(&own);
    if (!m || (stats &&
               (stats->size < LDS_MANIFEST_VERIFY_STATS_MIN_SIZE || stats->size > sizeof *stats)))
        return lds__error_fill(err, LDS_E_INVALID_ARG, NULL, 0, false, 0, 0, NULL,
                               "lds_manifest_verify: NULL manifest or bad stats size");
    lds_load_options lo;
    lds_load_options_default(&lo);
    if (opts) {
        if (opts->size < LDS_LOAD_OPTIONS_MIN_SIZE || opts->size > sizeof lo)
            return lds__error_fill(err, LDS_E_INVALID_ARG, "load_options.size", 0, false, 0, 0,
                                   NULL, "lds_load_options.size is %zu", opts->size);
        memcpy(&lo, opts, opts->size);
        lo.size = sizeof lo;
    }
    lo.verify_checksum = true; /* MF14 */
    size_t n = m->info.shards, nlocs = 0;
    size_t *loc_of = malloc(n * sizeof *loc_of);
    location *locs = NULL;
    if (!loc_of || group(m, loc_of, &locs, &nlocs) != LDS_OK) {
        free(loc_of);
        return lds__error_fill(err, LDS_E_NOMEM, NULL, 0, false, 0, 0, NULL,
                               "lds_manifest_verify: out of memory for %zu entries", n);
    }
    lds_status first = LDS_OK;
    for (size_t i = 0; i < n; i++) {
        if (lo.cancel && lo.cancel(lo.callback_ctx)) {
            first = lds__error_fill(err, LDS_E_CANCELLED, NULL, 0, false, (uint64_t)i + 1, 0, NULL,
                                    "verification cancelled at shards[%zu]", i);
            break;
        }
        location *l = &locs[loc_of[i]];
        if (!l->loaded) /* MF17: once per distinct location */
            load_location(m, i, l, &lo, &own);
        lds_error e;
        lds_error_init(&e);
        lds_status st = l->status;
        if (st != LDS_OK) {
            char name[96], red[512];
            lds_url_redact(m->shards[i].file, red, sizeof red);
            escape(red, strlen(red), name, sizeof name);
            lds_error *f = l->failure;
            lds__error_fill(&e, st, f ? f->field : NULL, f ? f->offset : 0, false, (uint64_t)i + 1,
                            f ? f->sys_errno : 0, f ? f->zstd_error : NULL,
                            "shards[%zu] (%s) failed verification: %s", i, name,
                            f ? f->message : "out of memory for the load's detail");
        } else {
            lds_manifest_shard s;
            lds_manifest_shard_init(&s);
            lds_manifest_get_shard(m, i, &s);
            st = compare(&m->info, &s, i, &l->facts, &e);
        }
        own.entries++;
        if (st != LDS_OK) {
            own.failed++;
            if (first == LDS_OK) {
                first = st;
                lds__error_fill(err, st, e.field, e.offset, false, e.line, e.sys_errno,
                                e.zstd_error, "%s", e.message);
            }
        }
        if (each)
            each(ctx, i, st, st == LDS_OK ? NULL : &e);
        if (i == l->last) {
            free(l->failure);
            l->failure = NULL;
        }
    }
    for (size_t d = 0; d < nlocs; d++)
        free(locs[d].failure);
    free(locs);
    free(loc_of);
    if (stats) {
        size_t sz = stats->size;
        memcpy(stats, &own, sz);
        stats->size = sz;
    }
    return first;
}
