/* The one UTF-8 validator (lds_common.h). */
#include "lds_common.h"

#include <string.h>

size_t lds__ascii_prefix(const uint8_t *s, size_t n)
{
    const uint64_t high = UINT64_C(0x8080808080808080);
    size_t i = 0;
    for (; n - i >= 32; i += 32) {
        uint64_t w[4];
        memcpy(w, s + i, sizeof w);
        if ((w[0] | w[1] | w[2] | w[3]) & high)
            break;
    }
    for (; n - i >= 8; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, sizeof w);
        if (w & high)
            break;
    }
    while (i < n && s[i] < 0x80)
        i++;
    return i;
}

bool lds__utf8_valid(const uint8_t *s, size_t n, size_t *bad, const char **why)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i += lds__ascii_prefix(s + i, n - i);
            continue;
        }
        size_t need;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c < 0xC0) {
            *bad = i;
            *why = "stray continuation byte";
            return false;
        } else if (c < 0xC2) {
            *bad = i;
            *why = "overlong encoding";
            return false;
        } else if (c < 0xE0) {
            need = 1;
        } else if (c < 0xF0) {
            need = 2;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c < 0xF5) {
            need = 3;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else {
            *bad = i;
            *why = "byte never valid in UTF-8";
            return false;
        }
        if (n - i - 1 < need) {
            *bad = i;
            *why = "truncated sequence";
            return false;
        }
        uint8_t c1 = s[i + 1];
        if (c1 < lo || c1 > hi) {
            *bad = i + 1;
            if (c1 >= 0x80 && c1 <= 0xBF)
                *why = (c == 0xED)   ? "surrogate code point"
                       : (c == 0xF4) ? "code point above U+10FFFF"
                                     : "overlong encoding";
            else
                *why = "missing continuation byte";
            return false;
        }
        for (size_t k = 2; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                *bad = i + k;
                *why = "missing continuation byte";
                return false;
            }
        }
        i += need + 1;
    }
    return true;
}
