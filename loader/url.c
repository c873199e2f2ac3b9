/*
 * The HTTP(S) transport of lds_load_url, through libcurl's multi interface:
 * the loader pulls (lds__url_read), libcurl pushes (the body callback), so a
 * read runs the transfer until the callback has put bytes into the reader's
 * buffer. What arrives beyond that buffer waits in the spill, at most
 * LDS__URL_SPILL_MAX bytes (2 MiB, eight of libcurl's largest deliveries); a
 * delivery that does not fit pauses the transfer until the reader asks again,
 * so memory stays bounded however fast the server sends. Dropped transfers are
 * resumed with Range + If-Range (docs/adr/0019-http-source.md).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_parse.h"
#include "load_internal.h"

void lds_url_options_default(lds_url_options *opts)
{
    if (opts == NULL)
        return;
    memset(opts, 0, sizeof *opts);
    opts->size = sizeof *opts;
    opts->connect_timeout_ms = LDS_URL_DEFAULT_CONNECT_TIMEOUT_MS;
    opts->low_speed_time_s = LDS_URL_DEFAULT_LOW_SPEED_TIME_S;
    opts->low_speed_bytes = 1;
    opts->max_redirects = LDS_URL_DEFAULT_MAX_REDIRECTS;
    opts->max_resumes = LDS_URL_DEFAULT_MAX_RESUMES;
    opts->use_netrc = true;
}

/* Appends `n` bytes of `s` to buf[*len], keeping room for the NUL; cuts what does not fit. */
static void put(char *buf, size_t cap, size_t *len, const char *s, size_t n)
{
    size_t room = cap - 1 - *len;
    if (n > room)
        n = room;
    memcpy(buf + *len, s, n);
    *len += n;
}

/* Query (and fragment) parameters whose values are credentials: AWS SigV4 and SigV2
 * presigned URLs, Google Cloud Storage signed URLs, OAuth 2.0 bearer tokens in a query (RFC
 * 6750 section 2.3) or fragment (RFC 6749 section 4.2.2), Azure SAS, API keys. */
static const char *const secret_params[] = {
    "X-Amz-Signature",
    "X-Amz-Credential",
    "X-Amz-Security-Token",
    "Signature",
    "AWSAccessKeyId",
    "X-Goog-Signature",
    "X-Goog-Credential",
    "access_token",
    "id_token",
    "refresh_token",
    "client_secret",
    "sig",
    "token",
    "api_key",
    "apikey",
    "key",
    "password",
    "pass",
    "pwd",
    "code",        /* an OAuth 2.0 authorization code (RFC 6749 section 4.1.2) */
    "Policy",      /* CloudFront signed URLs: Policy, Signature, Key-Pair-Id */
    "Key-Pair-Id",
};

/* Words that make any parameter name holding them (any case) a credential's: a name nobody
 * listed above (secret, auth, Authorization, jwt, x-api-key, session, my_token...) is
 * redacted by what it says it is rather than shown. */
static const char *const secret_words[] = {
    "secret", "token", "passw", "signature", "credential", "auth", "session", "apikey",
    "api_key", "api-key", "jwt",
};

/* Whether `word` occurs in d[0, n), any case. */
static bool has_word(const char *d, size_t n, const char *word)
{
    size_t w = strlen(word);
    for (size_t i = 0; i + w <= n; i++)
        if (strncasecmp(d + i, word, w) == 0)
            return true;
    return false;
}

static int hex_value(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Whether a parameter's name (n bytes, percent-decoded first: X%2DAmz%2DSignature is
 * X-Amz-Signature to a server) names a credential. */
static bool secret_param(const char *name, size_t n)
{
    char d[128];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k == sizeof d)
            return true; /* a name of 128 bytes or more: its value is hidden, to be safe */
        int hi, lo;
        if (name[i] == '%' && i + 2 < n && (hi = hex_value(name[i + 1])) >= 0 &&
            (lo = hex_value(name[i + 2])) >= 0) {
            d[k++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            d[k++] = name[i];
        }
    }
    for (size_t i = 0; i < sizeof secret_params / sizeof secret_params[0]; i++)
        if (strlen(secret_params[i]) == k && strncasecmp(d, secret_params[i], k) == 0)
            return true;
    for (size_t i = 0; i < sizeof secret_words / sizeof secret_words[0]; i++)
        if (has_word(d, k, secret_words[i]))
            return true;
    return false;
}

/* URLs inside parameter values are redacted too, nested up to this deep (a redirect's
 * "?next=https://u:pw@h/?token=T" inside another's): a value deeper than that which holds a
 * URL is replaced whole. */
#define LDS__URL_NEST_MAX 4

/* Percent-decodings applied to a parameter's value before it is looked at; a value that still
 * holds a "%XX" after that many is REDACTED whole (docs/adr/0034, amendment
 * 2026-12-03 (b)). */
#define LDS__URL_DECODE_MAX 3

static void redact_into(char *buf, size_t cap, size_t *len, const char *url, int depth);
static void put_rest(char *buf, size_t cap, size_t *len, const char *p, int depth);

/* Whether c is a slash as a browser reads one after a special scheme: '/' or a backslash (the
 * WHATWG URL standard's "special authority slashes" state takes one for a slash, so
 * "https:\\u:pw@h" and a JSON-escaped "https:\/\/u:pw@h" both reach host h as user u). */
static bool is_slash(char c)
{
    return c == '/' || c == '\\';
}

/* Whether url[0, n) names a special scheme of the WHATWG URL standard (http, https, ws,
   wss, ftp, file), or s3, in any case. */
static bool special_scheme(const char *url, size_t n)
{
    static const char *const names[] = {"http", "https", "ws", "wss", "ftp", "file", "s3"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && strncasecmp(url, names[i], n) == 0)
            return true;
    return false;
}

/* Where a URL ("scheme:/...", "scheme:\\...", or "//host..." at the start) begins in s, or
 * NULL. */
static const char *nested_url(const char *s)
{
    static const char scheme[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-";
    if (is_slash(s[0]) && is_slash(s[1]))
        return s;
    for (const char *c = s; *c != '\0'; c++) {
        bool letter = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z');
        if (!letter || (c > s && strchr(scheme, c[-1]) != NULL))
            continue;
        size_t n = strspn(c, scheme);
        if (c[n] == ':' && is_slash(c[n + 1]))
            return c;
    }
    return NULL;
}

/* Writes the value `s` (NUL-terminated) with what it holds of a URL redacted: a URL in it
 * from its start on, else a query or fragment of a relative one ("/p?token=T"). */
static void put_value_text(char *buf, size_t cap, size_t *len, const char *s, int depth)
{
    const char *u = nested_url(s);
    if (u != NULL) {
        put(buf, cap, len, s, (size_t)(u - s));
        if (is_slash(u[0])) {
            /* "//u:pw@h/x": given a scheme to be read as a URL, which is then left out */
            size_t n = strlen(u);
            char *t = malloc(n + 3), *r = malloc(n + 3);
            if (t == NULL || r == NULL) {
                put(buf, cap, len, "REDACTED", 8);
            } else {
                memcpy(t, "x:", 2);
                memcpy(t + 2, u, n + 1);
                size_t rl = 0;
                redact_into(r, n + 3, &rl, t, depth);
                r[rl] = '\0';
                put(buf, cap, len, r + 2, rl - 2);
            }
            free(t);
            free(r);
        } else {
            redact_into(buf, cap, len, u, depth);
        }
    } else if (strpbrk(s, "?#;") != NULL) {
        put_rest(buf, cap, len, s, depth);
    } else {
        put(buf, cap, len, s, strlen(s));
    }
}

/* Writes a parameter's value v[0, n) (or a pair without '=') with the credentials of any URL
 * inside it redacted (found by a tester: "?next=https://u:secret@x/y" showed secret). A
 * percent-encoded value is decoded first, up to LDS__URL_DECODE_MAX times over; when the
 * decoded text holds anything to redact, or would still decode once more (encoded four or
 * more times: what it holds is unknown, so it fails closed), the whole value is written as
 * REDACTED. */
static void put_value(char *buf, size_t cap, size_t *len, const char *v, size_t n, int depth)
{
    if (n == 0 || (memchr(v, ':', n) == NULL && memchr(v, '%', n) == NULL &&
                   memchr(v, '?', n) == NULL && memchr(v, '#', n) == NULL &&
                   memchr(v, '/', n) == NULL && memchr(v, '\\', n) == NULL &&
                   memchr(v, ';', n) == NULL)) {
        put(buf, cap, len, v, n); /* no URL, no query, nothing encoded: as it is */
        return;
    }
    char *d = malloc(n + 1);
    size_t tcap = 9 * n + 64; /* each pair's value at worst REDACTED (8) */
    char *t = malloc(tcap);
    if (d == NULL || t == NULL || depth >= LDS__URL_NEST_MAX) {
        free(d);
        free(t);
        bool url = false; /* too deep: a value holding a URL is hidden whole */
        for (size_t i = 0; i + 1 < n && !url; i++)
            url = (v[i] == ':' && is_slash(v[i + 1])) || v[i] == '%' || v[i] == '@';
        if (url)
            put(buf, cap, len, "REDACTED", 8);
        else
            put(buf, cap, len, v, n);
        return;
    }
    memcpy(d, v, n);
    d[n] = '\0';
    bool encoded = false, changed = true;
    for (int round = 0; round <= LDS__URL_DECODE_MAX && changed; round++) {
        size_t k = 0;
        changed = false;
        for (size_t i = 0; d[i] != '\0'; i++) {
            int hi, lo;
            if (d[i] == '%' && (hi = hex_value(d[i + 1])) >= 0 && (lo = hex_value(d[i + 2])) >= 0 &&
                (hi | lo) != 0) {
                d[k++] = (char)(hi * 16 + lo);
                i += 2;
                changed = true;
            } else {
                d[k++] = d[i];
            }
        }
        d[k] = '\0';
        if (changed && round == LDS__URL_DECODE_MAX) {
            /* still encoded after the limit: what it holds is unknown, so it fails closed */
            put(buf, cap, len, "REDACTED", 8);
            free(d);
            free(t);
            return;
        }
        encoded |= changed;
    }
    if (!encoded) {
        put_value_text(buf, cap, len, d, depth);
    } else {
        size_t tl = 0;
        put_value_text(t, tcap, &tl, d, depth);
        t[tl] = '\0';
        if (strcmp(t, d) != 0)
            put(buf, cap, len, "REDACTED", 8);
        else
            put(buf, cap, len, v, n);
    }
    free(d);
    free(t);
}

/* Copies name=value pairs from *p up to the first byte of `stop` (or the end), separated
 * by '&', with a credential's value replaced by REDACTED and any other value's URL redacted
 * (put_value); advances *p. */
static void put_pairs(char *buf, size_t cap, size_t *len, const char **p, const char *stop,
                      int depth)
{
    const char *q = *p;
    char seps[8] = "&";
    strncat(seps, stop, sizeof seps - 2);
    while (*q != '\0' && !strchr(stop, *q)) {
        size_t pair = strcspn(q, seps);
        const char *eq = memchr(q, '=', pair);
        if (eq != NULL && secret_param(q, (size_t)(eq - q))) {
            put(buf, cap, len, q, (size_t)(eq - q) + 1);
            put(buf, cap, len, "REDACTED", 8);
        } else if (eq != NULL) {
            put(buf, cap, len, q, (size_t)(eq - q) + 1);
            put_value(buf, cap, len, eq + 1, pair - (size_t)(eq - q) - 1, depth + 1);
        } else {
            put_value(buf, cap, len, q, pair, depth + 1);
        }
        q += pair;
        if (*q == '&') {
            put(buf, cap, len, "&", 1);
            q++;
        }
    }
    *p = q;
}

/* Whether the path parameter value v[0, m), which a slash ends, begins a URL that runs on
 * past that slash ("https:" of ";next=https://u:pw@x/y", or "" of ";next=//u:pw@x"); `rest`
 * bytes from v on are the rest of the path. */
static bool value_runs_on(const char *v, size_t m, size_t rest)
{
    char *c = malloc(rest + 1);
    if (c == NULL)
        return true; /* unknown: the rest of the path is taken as the value */
    memcpy(c, v, rest);
    c[rest] = '\0';
    const char *u = nested_url(c);
    bool yes = u != NULL && (size_t)(u - c) <= m;
    free(c);
    return yes;
}

/* Copies the path p[0, n) with its path parameters (";name=value" in a segment, RFC 3986
 * section 3.3: a Java servlet's ";jsessionid=") read as a query's pairs are (found by a
 * tester: "/app;jsessionid=S/x" showed S): a credential's value (secret_param) is REDACTED,
 * any other value is written through put_value. A value ends at the next ';', slash or the
 * path's end; one that begins a URL runs on to the path's end. */
static void put_path(char *buf, size_t cap, size_t *len, const char *p, size_t n, int depth)
{
    size_t i = 0;
    while (i < n) {
        const char *semi = memchr(p + i, ';', n - i);
        size_t k = semi != NULL ? (size_t)(semi - p) : n;
        put(buf, cap, len, p + i, k - i);
        if (k == n)
            return;
        put(buf, cap, len, ";", 1);
        i = k + 1;
        size_t e = i, eq;
        while (e < n && p[e] != ';' && !is_slash(p[e]))
            e++;
        for (eq = i; eq < e && p[eq] != '='; eq++)
            ;
        if (eq < e && secret_param(p + i, eq - i)) {
            put(buf, cap, len, p + i, eq - i + 1);
            put(buf, cap, len, "REDACTED", 8);
            i = e;
            continue;
        }
        size_t v = eq < e ? eq + 1 : i;
        put(buf, cap, len, p + i, v - i);
        if (e < n && is_slash(p[e]) && value_runs_on(p + v, e - v, n - v))
            e = n;
        put_value(buf, cap, len, p + v, e - v, depth + 1);
        i = e;
    }
}

/* The path from p, up to the query; then the query's and the fragment's pairs. */
static void put_rest(char *buf, size_t cap, size_t *len, const char *p, int depth)
{
    size_t n = strcspn(p, "?#");
    put_path(buf, cap, len, p, n, depth);
    p += n;
    if (*p == '?') {
        put(buf, cap, len, "?", 1);
        p++;
        put_pairs(buf, cap, len, &p, "#", depth);
    }
    if (*p == '#') {
        put(buf, cap, len, "#", 1);
        p++;
        put_pairs(buf, cap, len, &p, "", depth);
    }
    put(buf, cap, len, p, strlen(p));
}

char *lds_url_redact(const char *url, char *buf, size_t cap)
{
    if (buf == NULL || cap == 0)
        return buf;
    if (url == NULL)
        url = "(null)";
    size_t len = 0;
    redact_into(buf, cap, &len, url, 0);
    buf[len] = '\0';
    return buf;
}

/* lds_url_redact's work, appended at buf[*len] (not NUL-terminated), `depth` URLs deep. */
static void redact_into(char *buf, size_t cap, size_t *len, const char *url, int depth)
{
    const char *p = url;
    /* The authority follows "scheme:" and its slashes: "://" as a URL has it, or one slash
       too few or many, as a mistyped argument has it ("http:/user:pw@h/x" must not show pw
       either). Without a scheme and a slash it is not a URL: copied as is. */
    size_t sl = strspn(url, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-");
    const char *auth = NULL;
    if (sl > 0 && url[sl] == ':' && is_slash(url[sl + 1]) &&
        ((url[0] >= 'a' && url[0] <= 'z') || (url[0] >= 'A' && url[0] <= 'Z')))
        auth = url + sl + 1 + strspn(url + sl + 1, "/\\");
    /* A special scheme's authority needs no slash at all (WHATWG URL standard: "http:u:pw@h/x"
       is http://u:pw@h/x); other schemes ("mailto:u@x", "a:b") are not URLs here. */
    if (auth == NULL && sl > 0 && url[sl] == ':' && special_scheme(url, sl))
        auth = url + sl + 1;
    if (auth == NULL) {
        put(buf, cap, len, url, strlen(url));
        return;
    }
    /* The authority ends at the first slash (is_slash), '?' or '#'; its last '@' ends
       user:password. */
    size_t alen = strcspn(auth, "/\\?#");
    const char *at = NULL;
    for (size_t i = 0; i < alen; i++)
        if (auth[i] == '@')
            at = auth + i;
    if (at == NULL) {
        /* A user name or password with a raw '/', '?' or '#' (which a URL must
           percent-encode) ends the authority early: "u:SEC/RET@h", "u:pa?ss@h", "us?er:pw@h",
           "u:1234/pw@h" (digits that look like a port). Up to the first '=' or '&' (where a
           query's pairs begin: "?t=10:00&mail=a@b" holds no credentials), the last '@' that
           follows a ':' ends the user's part. A valid URL with a port and an '@' in its path
           ("http://h:8080/a@b") is shown from that '@' on: hiding too much of a rare URL is
           the safe side of showing a password. */
        bool colon = false;
        for (const char *c = auth; *c != '\0' && *c != '=' && *c != '&'; c++) {
            if (*c == ':')
                colon = true;
            else if (*c == '@' && colon)
                at = c;
        }
    }
    put(buf, cap, len, url, (size_t)(auth - url));
    p = at != NULL ? at + 1 : auth;
    put_rest(buf, cap, len, p, depth);
}

/* Room for the URL in messages (lds_error.message is 256 bytes). */
#define LDS__URL_SHOWN_MAX 120

static bool scheme_is(const char *url, const char *scheme)
{
    size_t n = strlen(scheme);
    if (strncasecmp(url, scheme, n) != 0)
        return false;
    return strncmp(url + n, "://", 3) == 0;
}

/* opts->url, checked, or the defaults. */
static lds_status url_options(const lds_load_options *opts, lds_url_options *uo, lds_error *err)
{
    lds_url_options_default(uo);
    if (opts->url == NULL)
        return LDS_OK;
    if (opts->url->size < LDS_URL_OPTIONS_MIN_SIZE || opts->url->size > sizeof *uo)
        return lds__load_fail(err, LDS_E_INVALID_ARG, "url.size", 0, 0, NULL,
                              "lds_url_options.size is %zu (accepted: %zu..%zu); set it with "
                              "lds_url_options_default",
                              opts->url->size, LDS_URL_OPTIONS_MIN_SIZE, sizeof *uo);
    memcpy(uo, opts->url, opts->url->size);
    return LDS_OK;
}

#if LDS_HAVE_CURL

#include <pthread.h>

#include <curl/curl.h>

/* libcurl's buffer for one receive, so also the most one body callback delivers. */
#define LDS__URL_BUFFER ((long)256 << 10)
/* Bytes held for the next reads beyond the reader's buffer before the transfer pauses
 * (pausing makes libcurl copy the delivery into an allocation of its own; with one
 * delivery of spill, GloVe from loopback took 45.3k page faults, with this 39.4k). */
#define LDS__URL_SPILL_MAX ((size_t)8 * (size_t)LDS__URL_BUFFER)
/* How long one wait for the network lasts before cancellation and the deadline are
 * checked (the bound on a Ctrl-C's latency through a cancel callback, docs/adr/0034). */
#define LDS__URL_POLL_MS 50

struct lds__url {
    CURLM *multi;
    CURL *easy;
    bool attached; /* easy is in multi */
    struct curl_slist *headers;
    lds_url_options uo;
    const lds_load_options *opts;
    char shown[LDS__URL_SHOWN_MAX];
    char errbuf[CURL_ERROR_SIZE];
    bool https;
    /* S3 (docs/adr/0042): requests signed with AWS Signature V4; an error response's body
     * is read for its <Code> and <Message> instead of being dropped. */
    bool s3;
    char *token_header; /* "x-amz-security-token: ..." (AWS_SESSION_TOKEN), or NULL */
    bool signed_v4;     /* requests are signed (every handle: see sigv4_options) */
    bool error_body;    /* the response is an error whose body is being kept */
    char errbody[2048];
    size_t errbody_len;

    /* The response in progress (reset at each status line). */
    lds__http_headers h;
    bool body_started; /* its first body byte has been checked and taken */
    long status;

    /* The first response: the whole body's length and its validator. */
    bool have_first;
    bool have_length;
    uint64_t length;
    char v_etag[160];
    char v_last_modified[64];
    bool accept_ranges; /* the first response said Accept-Ranges: bytes */
    /* lds__url_open_head: the first request asks for bytes 0..head_bytes-1 only; a 206
     * to it (head_partial) gives the whole length from its Content-Range. */
    uint64_t head_bytes;
    bool head_partial;

    uint64_t deadline_ns; /* lds__now_ns() past which the transfer stops; 0 = none */
    uint64_t received;    /* body bytes taken, across resumptions */
    uint64_t resume_at;
    uint32_t resumes;

    /* Where the body callback puts bytes during a read. */
    unsigned char *dst;
    size_t dst_cap;
    size_t dst_len;
    unsigned char *spill;
    size_t spill_cap;
    size_t spill_len;
    size_t spill_pos;
    bool paused;

    bool done; /* the transfer ended; result says how */
    CURLcode result;
    lds_status refused; /* set by a callback that stopped the transfer */
    lds_error *err;     /* the current read's, for the callbacks */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result = CURLE_FAILED_INIT;

static void curl_init(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

bool lds_url_supported(void)
{
    return true;
}

static lds_status url_fail(lds__url *u, lds_error *err, lds_status st, const char *field,
                           const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static lds_status url_fail(lds__url *u, lds_error *err, lds_status st, const char *field,
                           const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    /* The offset is the body byte reached; a refusal of the whole transfer has none. */
    return lds__error_fill(err, st, field, u->received, false, 0, 0, NULL, "GET %s: %s", u->shown,
                           what);
}

static size_t on_header(char *line, size_t size, size_t n, void *ctx)
{
    lds__url *u = ctx;
    size_t len = size * n;
    (void)lds__http_header_line(&u->h, line, len);
    return len;
}

/* The validator If-Range may carry: a strong ETag, else Last-Modified. */
static bool strong_etag(const char *etag)
{
    return etag[0] == '"';
}

/* Checks a response before its first body byte is taken. */
static lds_status check_response(lds__url *u)
{
    long code = 0;
    curl_easy_getinfo(u->easy, CURLINFO_RESPONSE_CODE, &code);
    u->status = code;
    const lds__http_headers *h = &u->h;
    if (h->content_encoding[0] != '\0' && strcasecmp(h->content_encoding, "identity") != 0)
        return url_fail(u, u->err, LDS_E_UNSUPPORTED, "http.content_encoding",
                        "the response is sent with Content-Encoding %s, which lodestar does "
                        "not decode (the declared length counts the index's own bytes)",
                        h->content_encoding);
    curl_off_t cl = -1;
    curl_easy_getinfo(u->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
    /* libcurl holds the body to the length it took; it must be the one the fields say. */
    if (cl >= 0 &&
        (h->bad_content_length || !h->have_content_length || h->content_length != (uint64_t)cl))
        return url_fail(u, u->err, LDS_E_IO, "http.content_length",
                        "the Content-Length fields are malformed or disagree (libcurl took %lld)",
                        (long long)cl);
    if (!u->have_first && u->head_bytes > 0 && code == 206) {
        uint64_t first = 0, last = 0, total = 0;
        bool total_known = false;
        bool ok =
            lds__http_parse_content_range(h->content_range, &first, &last, &total, &total_known);
        uint64_t want = total < u->head_bytes ? total : u->head_bytes;
        if (!ok || !total_known || first != 0 || last + 1 != want ||
            (cl >= 0 && (uint64_t)cl != want))
            return url_fail(u, u->err, LDS_E_IO, "http.content_range",
                            "Content-Range '%s' is not the first %llu bytes asked",
                            h->content_range, (unsigned long long)u->head_bytes);
        u->have_first = true;
        u->head_partial = true;
        u->have_length = true;
        u->length = total;
        memcpy(u->v_etag, h->etag, sizeof u->v_etag);
        memcpy(u->v_last_modified, h->last_modified, sizeof u->v_last_modified);
        u->accept_ranges = true; /* a 206 is the proof */
        return LDS_OK;
    }
    if (!u->have_first) {
        if (code < 200 || code > 299 || code == 206)
            return url_fail(u, u->err, LDS_E_IO, "http.status",
                            "HTTP %ld is not an answer with the file (after 0 bytes)%s", code,
                            code >= 300 && code < 400 ? "; redirects are not followed" : "");
        u->have_first = true;
        u->have_length = cl >= 0;
        u->length = cl >= 0 ? (uint64_t)cl : 0;
        memcpy(u->v_etag, h->etag, sizeof u->v_etag);
        memcpy(u->v_last_modified, h->last_modified, sizeof u->v_last_modified);
        u->accept_ranges = strcasecmp(h->accept_ranges, "bytes") == 0;
        return LDS_OK;
    }
    /* A resumption: the same file, from the byte reached. */
    if (code != 206)
        return url_fail(u, u->err, LDS_E_IO, "http.status",
                        "HTTP %ld to a Range request from byte %llu: the file changed on the "
                        "server or ranges are not served; not spliced",
                        code, (unsigned long long)u->resume_at);
    if (strong_etag(u->v_etag) ? strcmp(h->etag, u->v_etag) != 0
                               : strcmp(h->last_modified, u->v_last_modified) != 0)
        return url_fail(u, u->err, LDS_E_IO,
                        strong_etag(u->v_etag) ? "http.etag" : "http.last_modified",
                        "the file changed on the server during the transfer (%s %s, then %s); "
                        "not spliced",
                        strong_etag(u->v_etag) ? "ETag" : "Last-Modified",
                        strong_etag(u->v_etag) ? u->v_etag : u->v_last_modified,
                        strong_etag(u->v_etag) ? h->etag : h->last_modified);
    uint64_t first = 0, last = 0, total = 0;
    bool total_known = false;
    bool ok = lds__http_parse_content_range(h->content_range, &first, &last, &total, &total_known);
    if (ok && !total_known)
        ok = !u->have_length;
    if (!ok || first != u->resume_at || (u->have_length && total != u->length))
        return url_fail(u, u->err, LDS_E_IO, "http.content_range",
                        "Content-Range '%s' does not continue byte %llu of %llu", h->content_range,
                        (unsigned long long)u->resume_at, (unsigned long long)u->length);
    return LDS_OK;
}

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    lds__url *u = ctx;
    size_t len = size * n;
    if (!u->body_started && u->s3) {
        long code = 0;
        curl_easy_getinfo(u->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 400) {
            u->status = code;
            u->error_body = true;
            u->body_started = true;
        }
    }
    if (u->error_body) {
        size_t room = sizeof u->errbody - 1 - u->errbody_len;
        size_t take = len < room ? len : room;
        memcpy(u->errbody + u->errbody_len, p, take);
        u->errbody_len += take;
        u->errbody[u->errbody_len] = '\0';
        return len;
    }
    if (!u->body_started) {
        lds_status st = check_response(u);
        if (st != LDS_OK) {
            u->refused = st;
            return 0; /* libcurl ends the transfer (CURLE_WRITE_ERROR) */
        }
        u->body_started = true;
    }
    if (len == 0)
        return 0;
    size_t take = 0;
    if (u->dst != NULL && u->spill_pos == u->spill_len) {
        /* In order: into the reader's buffer first, the rest into the spill. */
        size_t room = u->dst_cap - u->dst_len;
        take = len < room ? len : room;
        memcpy(u->dst + u->dst_len, p, take);
        u->dst_len += take;
        u->spill_pos = u->spill_len = 0;
    }
    size_t rest = len - take;
    if (rest > 0) {
        if (u->spill_pos == u->spill_len)
            u->spill_pos = u->spill_len = 0;
        if (take == 0 && u->spill_len + rest > LDS__URL_SPILL_MAX) {
            /* Full: libcurl keeps this delivery (in a buffer of its own) until the next
             * read. Only a delivery of which nothing was taken may be refused. */
            u->paused = true;
            return CURL_WRITEFUNC_PAUSE;
        }
        if (u->spill_len + rest > u->spill_cap) {
            size_t cap =
                u->spill_len + rest > LDS__URL_SPILL_MAX ? u->spill_len + rest : LDS__URL_SPILL_MAX;
            unsigned char *s = realloc(u->spill, cap);
            if (s == NULL) {
                u->refused = url_fail(u, u->err, LDS_E_NOMEM, "http", "cannot hold %zu bytes", cap);
                return 0;
            }
            u->spill = s;
            u->spill_cap = cap;
        }
        memcpy(u->spill + u->spill_len, p + take, rest);
        u->spill_len += rest;
    }
    u->received += len;
    return len;
}

/* The request's own header fields (the session token of a signed S3 request), then
 * `extra` (NULL: none; then an empty list is NULL too). NULL when out of memory. */
static struct curl_slist *headers_with(const lds__url *u, const char *extra)
{
    struct curl_slist *l = NULL, *t;
    if (u->signed_v4) {
        /* Required by S3 on every SigV4 request, and not added by libcurl 7.88: the
         * SHA-256 of the empty body of a GET (the hash libcurl signs for it). */
        if ((l = curl_slist_append(NULL, "x-amz-content-sha256: "
                                         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991"
                                         "b7852b855")) == NULL)
            return NULL;
    }
    if (u->token_header != NULL) {
        if ((t = curl_slist_append(l, u->token_header)) == NULL) {
            curl_slist_free_all(l);
            return NULL;
        }
        l = t;
    }
    if (extra != NULL) {
        if ((t = curl_slist_append(l, extra)) == NULL) {
            curl_slist_free_all(l);
            return NULL;
        }
        l = t;
    }
    return l;
}

static lds_status set_options(lds__url *u, const char *url)
{
    CURL *e = u->easy;
    CURLcode r = CURLE_OK;
#define SET(opt, val)                                                                              \
    do {                                                                                           \
        if (r == CURLE_OK)                                                                         \
            r = curl_easy_setopt(e, opt, val);                                                     \
    } while (0)
    SET(CURLOPT_URL, url);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    /* Never from https down to http. */
    SET(CURLOPT_REDIR_PROTOCOLS_STR, u->https ? "https" : "http,https");
    SET(CURLOPT_FOLLOWLOCATION, u->uo.max_redirects > 0 ? 1L : 0L);
    SET(CURLOPT_MAXREDIRS, (long)u->uo.max_redirects);
    SET(CURLOPT_FAILONERROR, u->s3 ? 0L : 1L);
    /* An S3 key is a name, not a path: "a/../b" is its own object, sent as written (libcurl
       would otherwise collapse dot segments and fetch another key, outside the bucket). */
    if (u->s3)
        SET(CURLOPT_PATH_AS_IS, 1L);
    SET(CURLOPT_HTTP_CONTENT_DECODING, 0L);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_ERRORBUFFER, u->errbuf);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, u);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, u);
    SET(CURLOPT_BUFFERSIZE, LDS__URL_BUFFER);
    SET(CURLOPT_USERAGENT, "lodestar/" LDS_VERSION_STRING);
    SET(CURLOPT_CONNECTTIMEOUT_MS, (long)u->uo.connect_timeout_ms);
    if (u->uo.low_speed_time_s > 0) {
        SET(CURLOPT_LOW_SPEED_TIME, (long)u->uo.low_speed_time_s);
        SET(CURLOPT_LOW_SPEED_LIMIT, (long)u->uo.low_speed_bytes);
    }
    SET(CURLOPT_SSL_VERIFYPEER, 1L);
    SET(CURLOPT_SSL_VERIFYHOST, 2L);
    if (u->uo.ca_file != NULL)
        SET(CURLOPT_CAINFO, u->uo.ca_file);
    if (u->uo.userpwd != NULL)
        SET(CURLOPT_USERPWD, u->uo.userpwd);
    else if (u->uo.use_netrc)
        SET(CURLOPT_NETRC, (long)CURL_NETRC_OPTIONAL);
#undef SET
    return r == CURLE_OK ? LDS_OK : LDS_E_UNSUPPORTED;
}

static lds_status attach(lds__url *u, lds_error *err)
{
    u->body_started = false;
    u->done = false;
    u->errbuf[0] = '\0';
    CURLMcode mc = curl_multi_add_handle(u->multi, u->easy);
    if (mc != CURLM_OK)
        return url_fail(u, err, LDS_E_IO, "http", "libcurl: %s", curl_multi_strerror(mc));
    u->attached = true;
    return LDS_OK;
}

/* ==== S3 (docs/adr/0042) ==================================================== */

/* An environment variable's value, NULL when unset or empty. */
static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

static const char *s3_region(void)
{
    const char *r = env("AWS_REGION");
    if (r == NULL)
        r = env("AWS_DEFAULT_REGION");
    return r != NULL ? r : "us-east-1";
}

/* The endpoint of S3-compatible stores (path-style), NULL for AWS's own. */
static const char *s3_endpoint(void)
{
    const char *e = env("AWS_ENDPOINT_URL_S3");
    return e != NULL ? e : env("AWS_ENDPOINT_URL");
}

/* s3://BUCKET/KEY as the http(s) URL of the object, malloc'd: ENDPOINT/BUCKET/KEY with
 * AWS_ENDPOINT_URL(_S3), else https://BUCKET.s3.REGION.amazonaws.com/KEY; the key
 * percent-encoded but for its '/' and RFC 3986's unreserved characters. NULL, with `err`
 * filled, when the URL names no bucket or no key, or out of memory. */
static char *s3_http_url(const char *url, const char *shown, lds_error *err)
{
    const char *bucket = url + 5;
    size_t blen = strcspn(bucket, "/?#");
    if (blen == 0 || bucket[blen] != '/' || bucket[blen + 1] == '\0') {
        lds__load_fail(err, LDS_E_INVALID_ARG, "url", 0, 0, NULL,
                       "%s: an s3:// URL names a bucket and a key (s3://BUCKET/KEY)", shown);
        return NULL;
    }
    /* One sentence on what is wrong with the bucket field (found by a tester: for
       "s3://u:pw@b/k" the message named "s3://b/k", credentials redacted, and blamed a bucket
       name that looked right). user:password or a port ahead of the bucket is said as such,
       never shown; the name is shown only when it holds no ':' or '@' (then it is what the
       redacted URL shows too). */
    const char *at = NULL;
    for (size_t i = 0; i < blen; i++)
        if (bucket[i] == '@')
            at = bucket + i;
    if (at != NULL || memchr(bucket, ':', blen) != NULL) {
        lds__load_fail(err, LDS_E_INVALID_ARG, "url.bucket", 0, 0, NULL,
                       "%s: the bucket field of an s3:// URL holds the bucket name only, no "
                       "user, password or port (credentials come from AWS_ACCESS_KEY_ID and "
                       "AWS_SECRET_ACCESS_KEY, an endpoint from AWS_ENDPOINT_URL)",
                       shown);
        return NULL;
    }
    for (size_t i = 0; i < blen; i++)
        if (!isalnum((unsigned char)bucket[i]) && bucket[i] != '-' && bucket[i] != '.' &&
            bucket[i] != '_') {
            char c[8];
            unsigned char b = (unsigned char)bucket[i];
            snprintf(c, sizeof c, b > 0x20 && b < 0x7f ? "'%c'" : "byte %02x", b);
            lds__load_fail(err, LDS_E_INVALID_ARG, "url.bucket", 0, 0, NULL,
                           "%s: the bucket name \"%.*s\" has %s, which S3 does not allow "
                           "(letters, digits, '.', '-' and '_' only)",
                           shown, (int)(blen < 63 ? blen : 63), bucket, c);
            return NULL;
        }
    const char *key = bucket + blen + 1;
    const char *endpoint = s3_endpoint();
    const char *region = s3_region();
    size_t elen = endpoint != NULL ? strlen(endpoint) : 0;
    while (elen > 0 && endpoint[elen - 1] == '/')
        elen--;
    size_t cap = elen + strlen(region) + blen + 3 * strlen(key) + 64;
    char *out = malloc(cap);
    if (out == NULL) {
        lds__load_fail(err, LDS_E_NOMEM, "url", 0, 0, NULL, "out of memory");
        return NULL;
    }
    int n = endpoint != NULL
                ? snprintf(out, cap, "%.*s/%.*s/", (int)elen, endpoint, (int)blen, bucket)
                : snprintf(out, cap, "https://%.*s.s3.%s.amazonaws.com/", (int)blen, bucket,
                           region);
    size_t o = n > 0 ? (size_t)n : 0;
    for (const char *k = key; *k != '\0'; k++) {
        unsigned char c = (unsigned char)*k;
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, cap - o, "%%%02X", c);
    }
    out[o] = '\0';
    return out;
}

/* Whether an http(s) URL is an S3 object to sign: AWS's own host, or under the endpoint
 * override; never a presigned URL (its query carries the signature). */
static bool s3_host(const char *url)
{
    if (strstr(url, "X-Amz-Signature=") != NULL || strstr(url, "x-amz-signature=") != NULL)
        return false;
    const char *endpoint = s3_endpoint();
    if (endpoint != NULL) {
        size_t n = strlen(endpoint);
        while (n > 0 && endpoint[n - 1] == '/')
            n--;
        if (n > 0 && strncasecmp(url, endpoint, n) == 0 &&
            (url[n] == '/' || url[n] == '\0'))
            return true;
    }
    const char *auth = strstr(url, "://");
    if (auth == NULL)
        return false;
    auth += 3;
    size_t alen = strcspn(auth, "/?#");
    const char *at = memchr(auth, '@', alen);
    if (at != NULL) {
        alen -= (size_t)(at + 1 - auth);
        auth = at + 1;
    }
    const char *colon = memchr(auth, ':', alen);
    if (colon != NULL)
        alen = (size_t)(colon - auth);
    static const char aws[] = ".amazonaws.com";
    return alen > sizeof aws - 1 && strncasecmp(auth + alen - (sizeof aws - 1), aws,
                                                sizeof aws - 1) == 0;
}

/* The signing options of one handle. Set on each range's handle too: with libcurl 7.88
 * a curl_easy_duphandle copy of a signing handle sends signatures S3 servers refuse
 * (found with tests/http_fault_server.py's sigv4 mode). */
static CURLcode sigv4_options(CURL *e)
{
    char sigv4[128];
    snprintf(sigv4, sizeof sigv4, "aws:amz:%s:s3", s3_region());
    CURLcode r = curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sigv4);
    if (r == CURLE_OK)
        r = curl_easy_setopt(e, CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
    if (r == CURLE_OK)
        r = curl_easy_setopt(e, CURLOPT_USERNAME, env("AWS_ACCESS_KEY_ID"));
    if (r == CURLE_OK)
        r = curl_easy_setopt(e, CURLOPT_PASSWORD, env("AWS_SECRET_ACCESS_KEY"));
    return r;
}

/* Signs every request of `u` with AWS Signature V4 (libcurl's CURLOPT_AWS_SIGV4, which
 * adds x-amz-date; x-amz-content-sha256 is ours), the credentials from the environment;
 * the session token as x-amz-security-token. Nothing when neither the key id nor the
 * secret is set (an anonymous request, for public buckets); LDS_E_INVALID_ARG when only one
 * of them is. */
static lds_status s3_sign(lds__url *u, lds_error *err)
{
    const char *id = env("AWS_ACCESS_KEY_ID");
    const char *secret = env("AWS_SECRET_ACCESS_KEY");
    const char *token = env("AWS_SESSION_TOKEN");
    if (id == NULL && secret == NULL)
        return LDS_OK;
    /* Half a credential is a mistake, not a wish for an anonymous request: sending the
       request unsigned would hide it behind the server's "access denied". */
    if (id == NULL || secret == NULL)
        return url_fail(u, err, LDS_E_INVALID_ARG,
                        id == NULL ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                        "%s is set but %s is not: cannot sign the request",
                        id == NULL ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID",
                        id == NULL ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY");
    CURLcode r = sigv4_options(u->easy);
    if (r != CURLE_OK)
        return url_fail(u, err, LDS_E_UNSUPPORTED, "url",
                        "this libcurl cannot sign requests with AWS Signature V4 (7.75 or "
                        "later needed): %s",
                        curl_easy_strerror(r));
    u->signed_v4 = true;
    if (token != NULL) {
        size_t n = strlen(token) + 32;
        u->token_header = malloc(n);
        if (u->token_header == NULL)
            return url_fail(u, err, LDS_E_NOMEM, "url", "out of memory");
        snprintf(u->token_header, n, "x-amz-security-token: %s", token);
    }
    u->headers = headers_with(u, NULL);
    if (u->headers == NULL ||
        curl_easy_setopt(u->easy, CURLOPT_HTTPHEADER, u->headers) != CURLE_OK)
        return url_fail(u, err, LDS_E_NOMEM, "url", "out of memory");
    return LDS_OK;
}

static lds_status url_open(const char *url, const lds_load_options *opts, uint64_t head_bytes,
                           lds__url **out, lds_error *err)
{
    *out = NULL;
    char shown[LDS__URL_SHOWN_MAX];
    lds_url_redact(url, shown, sizeof shown);
    lds_url_options uo;
    lds_status st = url_options(opts, &uo, err);
    if (st != LDS_OK)
        return st;
    bool s3 = scheme_is(url, "s3");
    char *object = NULL;
    if (s3) {
        if ((object = s3_http_url(url, shown, err)) == NULL)
            return err != NULL ? err->status : LDS_E_INVALID_ARG;
    }
    const char *http_url = s3 ? object : url;
    bool https = scheme_is(http_url, "https");
    if (!https && !scheme_is(http_url, "http")) {
        free(object);
        return lds__load_fail(err, LDS_E_INVALID_ARG, "url", 0, 0, NULL,
                              "%s: not an http://, https:// or s3:// URL%s", shown,
                              s3 ? " (AWS_ENDPOINT_URL is not http:// or https://)" : "");
    }
    bool sign = s3 || s3_host(http_url);
    pthread_once(&curl_once, curl_init);
    if (curl_init_result != CURLE_OK) {
        free(object);
        return lds__load_fail(err, LDS_E_IO, "url", 0, 0, NULL, "libcurl failed to start: %s",
                              curl_easy_strerror(curl_init_result));
    }
    lds__url *u = calloc(1, sizeof *u);
    if (u == NULL) {
        free(object);
        return lds__load_fail(err, LDS_E_NOMEM, "url", 0, 0, NULL, "out of memory");
    }
    u->s3 = sign;
    url = http_url;
    memcpy(u->shown, shown, sizeof shown);
    u->uo = uo;
    if (uo.timeout_ms != 0)
        u->deadline_ns = lds__now_ns() + (uint64_t)uo.timeout_ms * 1000000u;
    u->opts = opts;
    u->https = https;
    u->multi = curl_multi_init();
    u->easy = curl_easy_init();
    if (u->multi == NULL || u->easy == NULL) {
        lds__url_close(u);
        return lds__load_fail(err, LDS_E_NOMEM, "url", 0, 0, NULL,
                              "cannot create the libcurl handles");
    }
    st = set_options(u, url);
    free(object); /* libcurl keeps its own copy of the URL */
    if (st != LDS_OK) {
        lds__url_close(u);
        return lds__load_fail(err, st, "url", 0, 0, NULL,
                              "this libcurl lacks an option lodestar needs (it needs 7.85 or "
                              "later, with http and https)");
    }
    if (sign && (st = s3_sign(u, err)) != LDS_OK) {
        lds__url_close(u);
        return st;
    }
    if (head_bytes > 0) {
        char range[48];
        snprintf(range, sizeof range, "0-%llu", (unsigned long long)(head_bytes - 1));
        u->head_bytes = head_bytes;
        if (curl_easy_setopt(u->easy, CURLOPT_RANGE, range) != CURLE_OK) {
            lds__url_close(u);
            return lds__load_fail(err, LDS_E_NOMEM, "url", 0, 0, NULL, "out of memory");
        }
    }
    st = attach(u, err);
    if (st != LDS_OK) {
        lds__url_close(u);
        return st;
    }
    *out = u;
    return LDS_OK;
}

lds_status lds__url_open(const char *url, const lds_load_options *opts, lds__url **out,
                         lds_error *err)
{
    return url_open(url, opts, 0, out, err);
}

lds_status lds__url_open_head(const char *url, const lds_load_options *opts, uint64_t head_bytes,
                              lds__url **out, lds_error *err)
{
    return url_open(url, opts, head_bytes > 0 ? head_bytes : 1, out, err);
}

bool lds__url_head_partial(const lds__url *u)
{
    return u != NULL && u->head_partial;
}

void lds__url_close(lds__url *u)
{
    if (u == NULL)
        return;
    if (u->attached)
        curl_multi_remove_handle(u->multi, u->easy);
    curl_easy_cleanup(u->easy);
    curl_multi_cleanup(u->multi);
    curl_slist_free_all(u->headers);
    free(u->token_header);
    free(u->spill);
    free(u);
}

/* After a transfer that ended in error: resume it, or say why not. */
static lds_status resume_or_fail(lds__url *u, lds_error *err)
{
    CURLcode r = u->result;
    long code = 0;
    curl_easy_getinfo(u->easy, CURLINFO_RESPONSE_CODE, &code);
    if (code != 0)
        u->status = code;
    const char *why = u->errbuf[0] != '\0' ? u->errbuf : curl_easy_strerror(r);
    if (r == CURLE_UNSUPPORTED_PROTOCOL)
        /* The URL's own scheme was checked: this is a redirect's. */
        return url_fail(u, err, LDS_E_IO, "http",
                        "a redirect to %s is refused (%s) after %llu bytes",
                        u->https ? "http or another scheme (an https URL stays https)"
                                 : "a scheme other than http or https",
                        why, (unsigned long long)u->received);
    if (r == CURLE_HTTP_RETURNED_ERROR)
        return url_fail(u, err, LDS_E_IO, "http.status", "HTTP %ld after %llu bytes", code,
                        (unsigned long long)u->received);
    bool dropped = r == CURLE_PARTIAL_FILE || r == CURLE_RECV_ERROR ||
                   r == CURLE_OPERATION_TIMEDOUT || r == CURLE_GOT_NOTHING ||
                   r == CURLE_HTTP2_STREAM || r == CURLE_HTTP2;
    bool validator = strong_etag(u->v_etag) || u->v_last_modified[0] != '\0';
    if (!dropped || u->received == 0 || !validator || u->resumes >= u->uo.max_resumes ||
        u->head_bytes > 0) /* a head is asked again whole by the caller's full load */
        return url_fail(u, err, LDS_E_IO, "http", "%s after %llu bytes%s", why,
                        (unsigned long long)u->received,
                        !dropped || u->received == 0 ? ""
                        : !validator                 ? " (not resumed: no ETag or Last-Modified)"
                        : u->uo.max_resumes == 0     ? " (resumption is off)"
                                                     : " (resumptions exhausted)");
    curl_multi_remove_handle(u->multi, u->easy);
    u->attached = false;
    char range[48], if_range[200];
    snprintf(range, sizeof range, "%llu-", (unsigned long long)u->received);
    snprintf(if_range, sizeof if_range, "If-Range: %s",
             strong_etag(u->v_etag) ? u->v_etag : u->v_last_modified);
    curl_slist_free_all(u->headers);
    u->headers = headers_with(u, if_range);
    if (u->headers == NULL)
        return url_fail(u, err, LDS_E_NOMEM, "http", "out of memory");
    CURLcode s = curl_easy_setopt(u->easy, CURLOPT_RANGE, range);
    if (s == CURLE_OK)
        s = curl_easy_setopt(u->easy, CURLOPT_HTTPHEADER, u->headers);
    if (s != CURLE_OK)
        return url_fail(u, err, LDS_E_IO, "http", "libcurl: %s", curl_easy_strerror(s));
    u->resume_at = u->received;
    u->resumes++;
    return attach(u, err);
}

/* The text of <Tag>...</Tag> in an S3 error body, cut to cap (control bytes dropped). */
static void xml_field(const char *body, const char *tag, char *out, size_t cap)
{
    char open[40], close[40];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    out[0] = '\0';
    const char *a = strstr(body, open);
    if (a == NULL)
        return;
    a += strlen(open);
    const char *b = strstr(a, close);
    size_t n = b != NULL ? (size_t)(b - a) : strlen(a), o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++)
        if ((unsigned char)a[i] >= 0x20 && a[i] != 0x7f)
            out[o++] = a[i];
    out[o] = '\0';
}

/* An S3 error response, named by the server's own Code and Message (never its other
 * fields: a SignatureDoesNotMatch body echoes the access key id and the string signed). */
static lds_status s3_error(lds__url *u, lds_error *err)
{
    char code[64], message[120];
    xml_field(u->errbody, "Code", code, sizeof code);
    xml_field(u->errbody, "Message", message, sizeof message);
    return url_fail(u, err, LDS_E_IO, "http.status", "HTTP %ld%s%s%s%s after %llu bytes", u->status,
                    code[0] ? " " : "", code, message[0] ? ": " : "", message,
                    (unsigned long long)u->received);
}

static bool cancelled(const lds__url *u)
{
    return u->opts->cancel != NULL && u->opts->cancel(u->opts->callback_ctx);
}

lds_status lds__url_read(lds__url *u, void *buf, size_t cap, size_t *got, lds_error *err)
{
    *got = 0;
    if (u->spill_pos < u->spill_len) {
        size_t n = u->spill_len - u->spill_pos;
        if (n > cap)
            n = cap;
        memcpy(buf, u->spill + u->spill_pos, n);
        u->spill_pos += n;
        *got = n;
        return LDS_OK;
    }
    u->dst = buf;
    u->dst_cap = cap;
    u->dst_len = 0;
    u->err = err;
    lds_status st = LDS_OK;
    for (;;) {
        if (u->paused) {
            /* libcurl hands the data it kept to on_body before this returns. */
            u->paused = false;
            CURLcode r = curl_easy_pause(u->easy, CURLPAUSE_CONT);
            if (r != CURLE_OK && u->refused == LDS_OK) {
                st = url_fail(u, err, LDS_E_IO, "http", "libcurl: %s", curl_easy_strerror(r));
                break;
            }
        }
        if (u->refused != LDS_OK) {
            st = u->refused;
            break;
        }
        if (u->dst_len > 0)
            break;
        if (u->done && u->error_body) {
            st = s3_error(u, err);
            break;
        }
        if (u->done) {
            /* A response without a body byte (a 3xx not followed, an empty 200) is
             * checked at its end. */
            if (u->result == CURLE_OK && !u->body_started) {
                st = check_response(u);
                u->body_started = true;
                if (st != LDS_OK)
                    break;
            }
            if (u->result == CURLE_OK)
                break; /* end of the body */
            st = resume_or_fail(u, err);
            if (st != LDS_OK)
                break;
            continue;
        }
        if (cancelled(u)) {
            st = url_fail(u, err, LDS_E_CANCELLED, "http", "cancelled after %llu bytes",
                          (unsigned long long)u->received);
            break;
        }
        int wait_ms = LDS__URL_POLL_MS;
        if (u->deadline_ns != 0) {
            uint64_t now = lds__now_ns();
            if (now >= u->deadline_ns) {
                char of[48] = "";
                if (u->have_length)
                    snprintf(of, sizeof of, " of %llu", (unsigned long long)u->length);
                st = url_fail(u, err, LDS_E_TIMEOUT, "http.timeout",
                              "deadline of %u ms passed after %llu%s bytes received",
                              u->uo.timeout_ms, (unsigned long long)u->received, of);
                break;
            }
            uint64_t left_ms = (u->deadline_ns - now + 999999u) / 1000000u;
            if (left_ms < (uint64_t)wait_ms)
                wait_ms = (int)left_ms;
        }
        int running = 0;
        CURLMcode mc = curl_multi_perform(u->multi, &running);
        if (mc != CURLM_OK) {
            st = url_fail(u, err, LDS_E_IO, "http", "libcurl: %s", curl_multi_strerror(mc));
            break;
        }
        int left = 0;
        CURLMsg *m;
        while ((m = curl_multi_info_read(u->multi, &left)) != NULL) {
            if (m->msg == CURLMSG_DONE) {
                u->done = true;
                u->result = m->data.result;
            }
        }
        if (!u->done && u->dst_len == 0 && u->refused == LDS_OK && !u->paused)
            (void)curl_multi_poll(u->multi, NULL, 0, wait_ms, NULL);
    }
    *got = u->dst_len;
    u->dst = NULL;
    u->err = NULL;
    return st;
}

bool lds__url_length(const lds__url *u, uint64_t *length)
{
    *length = u->length;
    return u->have_length;
}

const char *lds__url_shown(const lds__url *u)
{
    return u->shown;
}

int lds__url_status(const lds__url *u)
{
    return u == NULL ? 0 : (int)u->status;
}

uint32_t lds__url_resumes(const lds__url *u)
{
    return u == NULL ? 0 : u->resumes;
}

/* ==== Parallel ranged fetch (docs/adr/0041) ====================================== */

/* One transfer of lds__url_fetch_ranges: a range of the body, written where it belongs. */
typedef struct range_xfer {
    lds__url *u;
    lds__url_fetch *f;
    CURL *easy;
    bool attached;
    struct curl_slist *headers;
    size_t unit;       /* index into f->ranges */
    uint64_t at;       /* next body byte this transfer writes */
    uint64_t end;      /* one past the range's last byte */
    uint32_t resumes;  /* of this range */
    bool body_started; /* the response was checked at its first body byte */
    lds__http_headers h;
    char errbuf[CURL_ERROR_SIZE];
} range_xfer;

/* The fetch's one failure, first come: later ones are dropped (every transfer stops). */
static lds_status range_fail(range_xfer *x, lds_status st, const char *field, const char *fmt,
                             ...) __attribute__((format(printf, 4, 5)));

static lds_status range_fail(range_xfer *x, lds_status st, const char *field, const char *fmt, ...)
{
    lds__url_fetch *f = x->f;
    if (f->failed != LDS_OK)
        return f->failed;
    const lds__url_range *r = &f->ranges[x->unit];
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    f->failed = lds__error_fill(f->err, st, field, x->at, false, 0, 0, NULL,
                                "GET %s: range %llu-%llu: %s", x->u->shown,
                                (unsigned long long)r->offset,
                                (unsigned long long)(r->offset + r->length - 1), what);
    return f->failed;
}

static size_t on_range_header(char *line, size_t size, size_t n, void *ctx)
{
    range_xfer *x = ctx;
    size_t len = size * n;
    (void)lds__http_header_line(&x->h, line, len);
    return len;
}

/* A range's response, before its first body byte: 206, the first response's validator,
 * exactly the bytes asked (Content-Range and Content-Length), no Content-Encoding. */
static lds_status check_range_response(range_xfer *x)
{
    lds__url *u = x->u;
    const lds__http_headers *h = &x->h;
    long code = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    u->status = code;
    if (code != 200 && code != 206)
        return range_fail(x, LDS_E_IO, "http.status", "HTTP %ld to a Range request", code);
    bool strong = strong_etag(u->v_etag);
    bool same = strong ? strcmp(h->etag, u->v_etag) == 0
                       : strcmp(h->last_modified, u->v_last_modified) == 0;
    if (!same)
        return range_fail(x, LDS_E_IO, strong ? "http.etag" : "http.last_modified",
                          "the file changed on the server during the transfer (%s %s, then %s)",
                          strong ? "ETag" : "Last-Modified",
                          strong ? u->v_etag : u->v_last_modified,
                          strong ? h->etag : h->last_modified);
    if (code == 200) {
        /* The same file, whole: the server ignores Range. The caller reads the first
         * response as one stream instead. */
        x->f->no_ranges = true;
        return range_fail(x, LDS_E_UNSUPPORTED, "http.status",
                          "HTTP 200 to a Range request: the server ignores ranges");
    }
    if (code != 206)
        return range_fail(x, LDS_E_IO, "http.status", "HTTP %ld to a Range request", code);
    if (h->content_encoding[0] != '\0' && strcasecmp(h->content_encoding, "identity") != 0)
        return range_fail(x, LDS_E_UNSUPPORTED, "http.content_encoding",
                          "the range is sent with Content-Encoding %s", h->content_encoding);
    uint64_t first = 0, last = 0, total = 0;
    bool total_known = false;
    bool ok = lds__http_parse_content_range(h->content_range, &first, &last, &total, &total_known);
    if (!ok || !total_known || first != x->at || last + 1 != x->end || total != u->length)
        return range_fail(x, LDS_E_IO, "http.content_range",
                          "Content-Range '%s' is not the bytes asked (%llu-%llu/%llu)",
                          h->content_range, (unsigned long long)x->at,
                          (unsigned long long)(x->end - 1), (unsigned long long)u->length);
    curl_off_t cl = -1;
    curl_easy_getinfo(x->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
    if (cl < 0 || h->bad_content_length || (uint64_t)cl != x->end - x->at)
        return range_fail(x, LDS_E_IO, "http.content_length",
                          "Content-Length %lld for a range of %llu bytes", (long long)cl,
                          (unsigned long long)(x->end - x->at));
    return LDS_OK;
}

static size_t on_range_body(char *p, size_t size, size_t n, void *ctx)
{
    range_xfer *x = ctx;
    size_t len = size * n;
    if (x->f->failed != LDS_OK)
        return 0;
    if (!x->body_started) {
        if (check_range_response(x) != LDS_OK)
            return 0; /* libcurl ends the transfer (CURLE_WRITE_ERROR) */
        x->body_started = true;
    }
    if (len > x->end - x->at) {
        range_fail(x, LDS_E_IO, "http", "more bytes than the range holds");
        return 0;
    }
    memcpy(x->f->dst + (x->at - x->f->dst_at), p, len);
    x->at += len;
    x->f->received += len;
    return len;
}

/* Asks for x->at..x->end-1, If-Range the first response's validator. */
static lds_status range_issue(range_xfer *x, CURLM *multi)
{
    char range[48], if_range[200];
    snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)x->at,
             (unsigned long long)(x->end - 1));
    snprintf(if_range, sizeof if_range, "If-Range: %s",
             strong_etag(x->u->v_etag) ? x->u->v_etag : x->u->v_last_modified);
    curl_slist_free_all(x->headers);
    x->headers = headers_with(x->u, if_range);
    if (x->headers == NULL)
        return range_fail(x, LDS_E_NOMEM, "http", "out of memory");
    CURLcode s = curl_easy_setopt(x->easy, CURLOPT_RANGE, range);
    if (s == CURLE_OK)
        s = curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->headers);
    if (s != CURLE_OK)
        return range_fail(x, LDS_E_IO, "http", "libcurl: %s", curl_easy_strerror(s));
    lds__http_headers_reset(&x->h);
    x->body_started = false;
    x->errbuf[0] = '\0';
    CURLMcode mc = curl_multi_add_handle(multi, x->easy);
    if (mc != CURLM_OK)
        return range_fail(x, LDS_E_IO, "http", "libcurl: %s", curl_multi_strerror(mc));
    x->attached = true;
    return LDS_OK;
}

static lds_status range_start(range_xfer *x, CURLM *multi, size_t unit)
{
    const lds__url_range *r = &x->f->ranges[unit];
    x->unit = unit;
    x->at = r->offset;
    x->end = r->offset + r->length;
    x->resumes = 0;
    return range_issue(x, multi);
}

/* A transfer ended: the range is complete, resumed from the byte reached, or the fetch
 * fails naming it. */
static lds_status range_ended(range_xfer *x, CURLM *multi, CURLcode r, bool *complete)
{
    lds__url *u = x->u;
    *complete = false;
    if (x->f->failed != LDS_OK)
        return x->f->failed;
    if (r == CURLE_OK && x->at == x->end) {
        *complete = true;
        return LDS_OK;
    }
    /* A response without a body byte (a 416, an error without a body) is checked now, so
       that its status is named rather than retried as a drop. */
    if (r == CURLE_OK && !x->body_started && check_range_response(x) != LDS_OK)
        return x->f->failed;
    long code = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    if (code != 0)
        u->status = code;
    const char *why = x->errbuf[0] != '\0' ? x->errbuf : curl_easy_strerror(r);
    if (r == CURLE_HTTP_RETURNED_ERROR)
        return range_fail(x, LDS_E_IO, "http.status", "HTTP %ld", code);
    bool dropped = r == CURLE_OK || r == CURLE_PARTIAL_FILE || r == CURLE_RECV_ERROR ||
                   r == CURLE_OPERATION_TIMEDOUT || r == CURLE_GOT_NOTHING ||
                   r == CURLE_HTTP2_STREAM || r == CURLE_HTTP2;
    if (!dropped || x->resumes >= u->uo.max_resumes)
        return range_fail(x, LDS_E_IO, "http", "%s after %llu of its bytes%s",
                          r == CURLE_OK ? "the response ended early" : why,
                          (unsigned long long)(x->at - x->f->ranges[x->unit].offset),
                          !dropped                 ? ""
                          : u->uo.max_resumes == 0 ? " (resumption is off)"
                                                   : " (resumptions exhausted)");
    x->resumes++;
    x->f->resumes++;
    return range_issue(x, multi);
}

static void range_xfer_free(range_xfer *x, CURLM *multi)
{
    if (x->attached)
        curl_multi_remove_handle(multi, x->easy);
    x->attached = false;
    if (x->easy != NULL)
        curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
}

bool lds__url_ranges_ok(const lds__url *u)
{
    return u != NULL && u->have_first && u->have_length && (u->status == 200 || u->head_partial) &&
           u->accept_ranges && u->resumes == 0 &&
           (strong_etag(u->v_etag) || u->v_last_modified[0] != '\0');
}

lds_status lds__url_fetch_ranges(lds__url *u, lds__url_fetch *f, lds_error *err)
{
    f->err = err;
    f->failed = LDS_OK;
    f->no_ranges = false;
    f->received = 0;
    f->resumes = 0;
    f->connections_used = 0;
    if (f->count == 0)
        return LDS_OK;
    unsigned k = f->connections == 0 ? 1 : f->connections;
    if (k > LDS__URL_CONNECTIONS_MAX)
        k = LDS__URL_CONNECTIONS_MAX;
    if (k > f->count)
        k = (unsigned)f->count;
    range_xfer xs[LDS__URL_CONNECTIONS_MAX];
    memset(xs, 0, sizeof xs);
    CURLM *multi = curl_multi_init();
    if (multi == NULL)
        return url_fail(u, err, LDS_E_NOMEM, "http", "cannot create the libcurl handles");
    lds_status st = LDS_OK;
    size_t next = 0, complete = 0;
    for (unsigned i = 0; i < k && st == LDS_OK; i++) {
        range_xfer *x = &xs[i];
        x->u = u;
        x->f = f;
        x->easy = curl_easy_duphandle(u->easy);
        CURLcode r = x->easy == NULL ? CURLE_OUT_OF_MEMORY : CURLE_OK;
#define SET(opt, val)                                                                              \
    do {                                                                                           \
        if (r == CURLE_OK)                                                                         \
            r = curl_easy_setopt(x->easy, opt, val);                                               \
    } while (0)
        SET(CURLOPT_WRITEFUNCTION, on_range_body);
        SET(CURLOPT_WRITEDATA, x);
        SET(CURLOPT_HEADERFUNCTION, on_range_header);
        SET(CURLOPT_HEADERDATA, x);
        SET(CURLOPT_ERRORBUFFER, x->errbuf);
        SET(CURLOPT_PRIVATE, (char *)x);
#undef SET
        if (r == CURLE_OK && u->signed_v4)
            r = sigv4_options(x->easy);
        if (r != CURLE_OK) {
            st = url_fail(u, err, LDS_E_NOMEM, "http", "cannot create the libcurl handles");
            break;
        }
        st = range_start(x, multi, next++);
    }
    f->connections_used = k;
    /* cancel and progress (callbacks into the caller, Python's among them) are called once
       a MiB has arrived or 50 ms have passed, not at every wake-up of the loop. */
    uint64_t asked_at = 0, asked_ns = 0;
    while (st == LDS_OK && f->failed == LDS_OK && complete < f->count) {
        uint64_t now_ns = lds__now_ns();
        bool ask = f->received - asked_at >= ((uint64_t)1 << 20) || asked_ns == 0 ||
                   now_ns - asked_ns >= (uint64_t)LDS__URL_POLL_MS * 1000000u;
        if (ask) {
            asked_at = f->received;
            asked_ns = now_ns;
            if (u->opts->progress != NULL)
                u->opts->progress(f->received, f->total, u->opts->callback_ctx);
        }
        if (ask && cancelled(u)) {
            st = url_fail(u, err, LDS_E_CANCELLED, "http",
                          "cancelled after %llu bytes, %zu of %zu ranges complete",
                          (unsigned long long)f->received, complete, f->count);
            break;
        }
        int wait_ms = LDS__URL_POLL_MS;
        if (u->deadline_ns != 0) {
            uint64_t now = lds__now_ns();
            if (now >= u->deadline_ns) {
                /* Name the range that is furthest behind. */
                range_xfer *slow = NULL;
                for (unsigned i = 0; i < k; i++)
                    if (xs[i].attached &&
                        (slow == NULL || xs[i].end - xs[i].at > slow->end - slow->at))
                        slow = &xs[i];
                if (slow != NULL)
                    st = range_fail(slow, LDS_E_TIMEOUT, "http.timeout",
                                    "deadline of %u ms passed with %llu of its bytes to come "
                                    "(%llu of %llu bytes received)",
                                    u->uo.timeout_ms, (unsigned long long)(slow->end - slow->at),
                                    (unsigned long long)f->received,
                                    (unsigned long long)u->length);
                else
                    st = url_fail(u, err, LDS_E_TIMEOUT, "http.timeout",
                                  "deadline of %u ms passed", u->uo.timeout_ms);
                break;
            }
            uint64_t left_ms = (u->deadline_ns - now + 999999u) / 1000000u;
            if (left_ms < (uint64_t)wait_ms)
                wait_ms = (int)left_ms;
        }
        int running = 0;
        CURLMcode mc = curl_multi_perform(multi, &running);
        if (mc != CURLM_OK) {
            st = url_fail(u, err, LDS_E_IO, "http", "libcurl: %s", curl_multi_strerror(mc));
            break;
        }
        int left = 0;
        CURLMsg *m;
        while (st == LDS_OK && (m = curl_multi_info_read(multi, &left)) != NULL) {
            if (m->msg != CURLMSG_DONE)
                continue;
            range_xfer *x = NULL;
            CURLcode r = m->data.result;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            curl_multi_remove_handle(multi, x->easy);
            x->attached = false;
            bool done = false;
            st = range_ended(x, multi, r, &done);
            if (st != LDS_OK || !done)
                continue;
            complete++;
            if (f->done != NULL)
                st = f->done(f->done_ctx, x->unit, err);
            if (st == LDS_OK && f->failed == LDS_OK && next < f->count)
                st = range_start(x, multi, next++);
        }
        if (st == LDS_OK && f->failed != LDS_OK)
            st = f->failed;
        if (st != LDS_OK)
            break;
        if (complete < f->count)
            (void)curl_multi_poll(multi, NULL, 0, wait_ms, NULL);
    }
    /* Every transfer stops here; no callback runs after this. */
    for (unsigned i = 0; i < k; i++)
        range_xfer_free(&xs[i], multi);
    curl_multi_cleanup(multi);
    u->resumes += f->resumes;
    if (st == LDS_OK && u->opts->progress != NULL)
        u->opts->progress(f->received, f->total, u->opts->callback_ctx);
    return st;
}

#else /* !LDS_HAVE_CURL */

struct lds__url {
    int unused;
};

bool lds_url_supported(void)
{
    return false;
}

lds_status lds__url_open(const char *url, const lds_load_options *opts, lds__url **out,
                         lds_error *err)
{
    *out = NULL;
    lds_url_options uo;
    lds_status st = url_options(opts, &uo, err);
    if (st != LDS_OK)
        return st;
    char shown[LDS__URL_SHOWN_MAX];
    lds_url_redact(url, shown, sizeof shown);
    if (!scheme_is(url, "https") && !scheme_is(url, "http") && !scheme_is(url, "s3"))
        return lds__load_fail(err, LDS_E_INVALID_ARG, "url", 0, 0, NULL,
                              "%s: not an http://, https:// or s3:// URL", shown);
    return lds__load_fail(err, LDS_E_UNSUPPORTED, "url", 0, 0, NULL,
                          "%s: this liblodestar was built without libcurl (meson -Dcurl=disabled "
                          "or libcurl missing), so it cannot load from a URL",
                          shown);
}

lds_status lds__url_open_head(const char *url, const lds_load_options *opts, uint64_t head_bytes,
                              lds__url **out, lds_error *err)
{
    (void)head_bytes;
    return lds__url_open(url, opts, out, err);
}

bool lds__url_head_partial(const lds__url *u)
{
    (void)u;
    return false;
}

void lds__url_close(lds__url *u)
{
    (void)u;
}

lds_status lds__url_read(lds__url *u, void *buf, size_t cap, size_t *got, lds_error *err)
{
    (void)u;
    (void)buf;
    (void)cap;
    *got = 0;
    return lds__load_fail(err, LDS_E_UNSUPPORTED, "url", 0, 0, NULL, "built without libcurl");
}

bool lds__url_length(const lds__url *u, uint64_t *length)
{
    (void)u;
    *length = 0;
    return false;
}

const char *lds__url_shown(const lds__url *u)
{
    (void)u;
    return "";
}

int lds__url_status(const lds__url *u)
{
    (void)u;
    return 0;
}

uint32_t lds__url_resumes(const lds__url *u)
{
    (void)u;
    return 0;
}

bool lds__url_ranges_ok(const lds__url *u)
{
    (void)u;
    return false;
}

lds_status lds__url_fetch_ranges(lds__url *u, lds__url_fetch *f, lds_error *err)
{
    (void)u;
    (void)f;
    return lds__load_fail(err, LDS_E_UNSUPPORTED, "url", 0, 0, NULL, "built without libcurl");
}

#endif
