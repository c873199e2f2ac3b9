/* Fuzz target: the HTTP response header fields lds_load_url reads (loader/http_parse.h):
 * Content-Length, Content-Range, ETag, Last-Modified, Content-Encoding. Input: header
 * lines separated by '\n' (each handed over with its '\n', as libcurl does), status lines
 * included. Checks: every value is NUL-terminated within its buffer, a Content-Range that
 * parses is ordered, a Content-Length that parses prints back to its digits. */
#include "fuzz_common.h"

#include "../../loader/http_parse.h"

static void check_string(const char *s, size_t cap)
{
    if (memchr(s, '\0', cap) == NULL)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lds__http_headers h;
    lds__http_headers_reset(&h);
    const char *p = (const char *)data;
    size_t left = size;
    while (left > 0) {
        const char *nl = memchr(p, '\n', left);
        size_t n = nl ? (size_t)(nl - p) + 1 : left;
        /* A copy of exactly n bytes: the parser must not read past the line. */
        char *line = malloc(n ? n : 1);
        if (!line)
            return 0;
        memcpy(line, p, n);
        bool status = lds__http_header_line(&h, line, n);
        if (status && (h.etag[0] || h.content_range[0] || h.have_content_length))
            abort(); /* a status line starts a response afresh */
        free(line);
        p += n;
        left -= n;
    }
    check_string(h.etag, sizeof h.etag);
    check_string(h.last_modified, sizeof h.last_modified);
    check_string(h.content_encoding, sizeof h.content_encoding);
    check_string(h.content_range, sizeof h.content_range);
    if (h.have_content_length && !h.bad_content_length && (h.content_length >> 63))
        abort();
    uint64_t first = 0, last = 0, total = 0;
    bool known = false;
    if (lds__http_parse_content_range(h.content_range, &first, &last, &total, &known)) {
        if (first > last || (known && last >= total) || strncmp(h.content_range, "bytes ", 6))
            abort();
        char again[96];
        if (known)
            snprintf(again, sizeof again, "bytes %llu-%llu/%llu", (unsigned long long)first,
                     (unsigned long long)last, (unsigned long long)total);
        else
            snprintf(again, sizeof again, "bytes %llu-%llu/*", (unsigned long long)first,
                     (unsigned long long)last);
        /* Digits may carry leading zeros; without them the text is the same. */
        if (strcmp(again, h.content_range) != 0 && !strstr(h.content_range, "0"))
            abort();
    }
    /* The length parser on the raw input as one value. */
    uint64_t v = 0;
    if (lds__http_parse_length((const char *)data, size, &v)) {
        char again[24];
        snprintf(again, sizeof again, "%llu", (unsigned long long)v);
        size_t z = 0;
        while (z + 1 < size && data[z] == '0')
            z++;
        if (strlen(again) != size - z || memcmp(again, data + z, size - z) != 0)
            abort();
    }
    return 0;
}
