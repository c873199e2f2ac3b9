/*
 * The HTTP response header fields lds_load_url relies on, parsed without libcurl (pure
 * functions: loader/http_parse.c), so that tests/fuzz/fuzz_http_headers.c can drive them.
 * Not installed.
 */
#ifndef LDS_HTTP_PARSE_H
#define LDS_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The fields of one response, each value trimmed and cut to its buffer (NUL-terminated). */
typedef struct lds__http_headers {
    char etag[160];
    char last_modified[64];
    char content_encoding[64];
    char content_range[96];
    char accept_ranges[32];   /* "bytes" when the server serves byte ranges */
    bool have_content_length; /* a Content-Length field came */
    bool bad_content_length;  /* one was not a decimal number below 2^63, or two disagreed */
    uint64_t content_length;
} lds__http_headers;

/* Clears every field (a new response begins). */
void lds__http_headers_reset(lds__http_headers *h);

/* Takes one header line as libcurl delivers it ("Name: value\r\n", `n` bytes, not
 * NUL-terminated, any bytes). A status line ("HTTP/...") starts a new response: the fields
 * are reset and true is returned; any other line returns false. Names are matched
 * case-insensitively (RFC 9110 section 5.1); unknown fields are ignored. */
bool lds__http_header_line(lds__http_headers *h, const char *line, size_t n);

/* Parses a Content-Length value: decimal digits only, below 2^63 (RFC 9110 section 8.6). */
bool lds__http_parse_length(const char *s, size_t n, uint64_t *out);

/* Parses a Content-Range value "bytes FIRST-LAST/TOTAL" or "bytes FIRST-LAST/ *" (RFC 9110
 * section 14.4; no space before '*'): true when well formed with FIRST <= LAST and, with a
 * total, LAST < TOTAL; *total_known is false for '*'. */
bool lds__http_parse_content_range(const char *s, uint64_t *first, uint64_t *last, uint64_t *total,
                                   bool *total_known);

#endif /* LDS_HTTP_PARSE_H */
