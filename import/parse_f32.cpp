// fast_float::from_chars behind the C function of parse_f32.h. Compiled without exceptions
// or RTTI; from_chars is noexcept and keeps its big-integer fallback on the stack.
#include "parse_f32.h"

#include <fast_float/fast_float.h>

#include <cmath>

extern "C" int lds__parse_f32_fast(const char *tok, size_t len, float *out)
{
    if (len == 0)
        return 0;
    const char *end = tok + len;
    float v = 0.0f;
    fast_float::from_chars_result r = fast_float::from_chars(tok, end, v);
    // inf and nan parse here too (and overflow gives an infinity): all left to the caller,
    // which refuses them with its own message.
    if (r.ec != std::errc() || r.ptr != end || !std::isfinite(v))
        return 0;
    *out = v;
    return 1;
}

extern "C" const char *lds__parse_f32_prefix(const char *first, const char *last, float *out)
{
    if (first == last)
        return nullptr;
    float v = 0.0f;
    fast_float::from_chars_result r = fast_float::from_chars(first, last, v);
    if (r.ec != std::errc() || !std::isfinite(v))
        return nullptr;
    *out = v;
    return r.ptr;
}
