/* The shortest round-trip digits of a float32 for the CLI's text output (cli/util.c
 * cli_format_float), from std::to_chars (C++17, libstdc++ 11 and later: Ryu-based, no
 * allocation, no locale). Built only when meson finds a C++ compiler (CLI_HAVE_TO_CHARS=1);
 * without one, cli/util.c finds the same digits with snprintf and strtof. */
#include <charconv>
#include <cstddef>

#include "format_f32.h"

int cli_f32_scientific(char *buf, size_t cap, float x)
{
    if (cap < 2)
        return -1;
    /* chars_format::scientific without a precision: the fewest significant digits that
       read back as x (ties between candidates broken towards the exact value). */
    std::to_chars_result r = std::to_chars(buf, buf + cap - 1, x, std::chars_format::scientific);
    if (r.ec != std::errc())
        return -1;
    *r.ptr = '\0';
    return static_cast<int>(r.ptr - buf);
}
