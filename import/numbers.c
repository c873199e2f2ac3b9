/* Number parsing of the text formats (decimal floats through fast_float or strtof_l,
   integers, the word2vec header) and the quoting of input tokens in messages. */
#include "import_internal.h"
#include "parse_f32.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Writes tok[0, len) into buf (cap >= 4 * LDS__IMP_SHOWN + 8) as a message quotes it: at
   most LDS__IMP_SHOWN bytes, with each byte outside printable ASCII written \xNN and a
   backslash or double quote preceded by a backslash, so that a token of binary (a file
   given in the wrong format) cannot drive the terminal of whoever reads the message. */
const char *lds__imp_quote(char *buf, size_t cap, const char *tok, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < len && i < LDS__IMP_SHOWN && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)tok[i];
        if (ch == '\\' || ch == '"') {
            buf[o++] = '\\';
            buf[o++] = (char)ch;
        } else if (ch >= 0x20 && ch < 0x7f) {
            buf[o++] = (char)ch;
        } else {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[ch >> 4];
            buf[o++] = hex[ch & 15];
        }
    }
    if (len > LDS__IMP_SHOWN && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

lds_status lds__imp_parse_float(lds__imp_ctx *c, const char *tok, size_t len, float *out,
                                const char *field, uint64_t line, uint64_t offset, size_t element,
                                lds_error *err)
{
#if LDS_HAVE_FAST_FLOAT
    /* The common token, a plain finite decimal, takes the fast parser (ADR 0022): the same
       correctly rounded float as strtof_l. Everything else (a sign '+', inf, nan, hex, a
       bad or partial token, overflow) falls through to the rules below, unchanged. */
    if (lds__parse_f32_fast(tok, len, out))
        return LDS_OK;
#endif
    char shown[4 * LDS__IMP_SHOWN + 8];
    const char *nul = memchr(tok, '\0', len);
    if (nul) {
        uint64_t at = offset + (uint64_t)(nul - tok);
        return lds__imp_fail(
            err, LDS_E_PARSE, field, at, line, "%s %llu (byte %llu): element %zu holds a NUL byte",
            lds__imp_noun(field), (unsigned long long)line, (unsigned long long)at, element);
    }
    /* Space and tab separate the numbers; strtof would also skip a leading \v, \f, \r or
       \n, which a line can still hold inside a token. */
    if (len > 0 && (tok[0] == '\v' || tok[0] == '\f' || tok[0] == '\r' || tok[0] == '\n'))
        return lds__imp_fail(err, LDS_E_PARSE, field, offset, line,
                             "%s %llu (byte %llu): element %zu, \"%s\", starts with a control "
                             "character (only space and tab separate numbers)",
                             lds__imp_noun(field), (unsigned long long)line,
                             (unsigned long long)offset, element,
                             lds__imp_quote(shown, sizeof shown, tok, len));
    /* strtof also reads C99 hexadecimal floats; these formats are decimal. */
    if (memchr(tok, 'x', len) || memchr(tok, 'X', len))
        return lds__imp_fail(err, LDS_E_PARSE, field, offset, line,
                             "%s %llu (byte %llu): element %zu, \"%s\", is not a decimal number "
                             "(hexadecimal is refused)",
                             lds__imp_noun(field), (unsigned long long)line,
                             (unsigned long long)offset, element,
                             lds__imp_quote(shown, sizeof shown, tok, len));
    char *end = NULL;
    errno = 0;
    float v = strtof_l(tok, &end, c->c_locale);
    if (end != tok + len || len == 0)
        return lds__imp_fail(err, LDS_E_PARSE, field, offset, line,
                             "%s %llu (byte %llu): element %zu, \"%s\", is not a decimal number",
                             lds__imp_noun(field), (unsigned long long)line,
                             (unsigned long long)offset, element,
                             lds__imp_quote(shown, sizeof shown, tok, len));
    if (!isfinite(v))
        return lds__imp_fail(err, LDS_E_BAD_VALUE, field, offset, line,
                             "%s %llu (byte %llu): element %zu, \"%s\", is not a finite float32 "
                             "(NaN, infinity and values beyond 3.4e38 are refused)",
                             lds__imp_noun(field), (unsigned long long)line,
                             (unsigned long long)offset, element,
                             lds__imp_quote(shown, sizeof shown, tok, len));
    *out = v;
    return LDS_OK;
}

bool lds__imp_parse_u64(const char *tok, size_t len, uint64_t *out)
{
    if (len == 0)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (tok[i] < '0' || tok[i] > '9')
            return false;
        if (__builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, (uint64_t)(tok[i] - '0'), &v))
            return false;
    }
    *out = v;
    return true;
}

bool lds__imp_is_w2v_header(const char *s, size_t n, uint64_t *rows, uint64_t *dim)
{
    const char *tok[2];
    size_t tlen[2];
    if (!lds__imp_w2v_header_shape(s, n, tok, tlen))
        return false;
    uint64_t a, b;
    if (!lds__imp_parse_u64(tok[0], tlen[0], &a) || !lds__imp_parse_u64(tok[1], tlen[1], &b))
        return false;
    *rows = a;
    *dim = b;
    return true;
}

bool lds__imp_w2v_header_shape(const char *s, size_t n, const char *tok[2], size_t tlen[2])
{
    size_t count = 0, i = 0;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i == n)
            break;
        size_t start = i;
        while (i < n && s[i] != ' ' && s[i] != '\t')
            i++;
        if (count == 2)
            return false;
        tok[count] = s + start;
        tlen[count] = i - start;
        for (size_t k = start; k < i; k++)
            if (s[k] < '0' || s[k] > '9')
                return false;
        count++;
    }
    return count == 2;
}
