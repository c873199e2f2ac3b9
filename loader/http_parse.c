/* HTTP response header fields for lds_load_url (loader/http_parse.h). */
#include "http_parse.h"

#include <string.h>
#include <strings.h>

void lds__http_headers_reset(lds__http_headers *h)
{
    memset(h, 0, sizeof *h);
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* The value of `line` if it is "name: value" (trimmed), else NULL. */
static const char *field_value(const char *line, size_t n, const char *name, size_t *vlen)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return NULL;
    const char *v = line + k + 1;
    const char *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && is_space(end[-1]))
        end--;
    *vlen = (size_t)(end - v);
    return v;
}

static bool take(const char *line, size_t n, const char *name, char *dst, size_t cap)
{
    size_t len = 0;
    const char *v = field_value(line, n, name, &len);
    if (v == NULL)
        return false;
    if (len > cap - 1)
        len = cap - 1;
    memcpy(dst, v, len);
    dst[len] = '\0';
    return true;
}

bool lds__http_parse_length(const char *s, size_t n, uint64_t *out)
{
    if (n == 0 || n > 19)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v >> 63)
        return false;
    *out = v;
    return true;
}

bool lds__http_header_line(lds__http_headers *h, const char *line, size_t n)
{
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* A new response (after a redirect, a 100 Continue, a resumption). */
        lds__http_headers_reset(h);
        return true;
    }
    size_t len = 0;
    const char *v = field_value(line, n, "Content-Length", &len);
    if (v != NULL) {
        uint64_t cl = 0;
        if (!lds__http_parse_length(v, len, &cl) ||
            (h->have_content_length && cl != h->content_length))
            h->bad_content_length = true;
        else
            h->content_length = cl;
        h->have_content_length = true;
        return false;
    }
    if (!take(line, n, "ETag", h->etag, sizeof h->etag) &&
        !take(line, n, "Last-Modified", h->last_modified, sizeof h->last_modified) &&
        !take(line, n, "Content-Encoding", h->content_encoding, sizeof h->content_encoding) &&
        !take(line, n, "Content-Range", h->content_range, sizeof h->content_range))
        (void)take(line, n, "Accept-Ranges", h->accept_ranges, sizeof h->accept_ranges);
    return false;
}

/* Reads decimal digits at *p (1 to 19, below 2^63) into *out and moves *p past them. */
static bool number(const char **p, uint64_t *out)
{
    const char *s = *p;
    size_t n = 0;
    while (s[n] >= '0' && s[n] <= '9')
        n++;
    if (!lds__http_parse_length(s, n, out))
        return false;
    *p = s + n;
    return true;
}

bool lds__http_parse_content_range(const char *s, uint64_t *first, uint64_t *last, uint64_t *total,
                                   bool *total_known)
{
    if (strncmp(s, "bytes ", 6) != 0)
        return false;
    const char *p = s + 6;
    if (!number(&p, first) || *p++ != '-' || !number(&p, last) || *p++ != '/')
        return false;
    if (p[0] == '*' && p[1] == '\0') {
        *total_known = false;
        *total = 0;
        return *first <= *last;
    }
    if (!number(&p, total) || *p != '\0')
        return false;
    *total_known = true;
    return *first <= *last && *last < *total;
}
