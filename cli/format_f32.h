/* The C++ shim behind cli_format_float (cli/format_f32.cpp, std::to_chars). Pure C. */
#ifndef LDS_CLI_FORMAT_F32_H
#define LDS_CLI_FORMAT_F32_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes finite x into buf[0, cap) as the shortest scientific decimal that reads back as
   x (std::to_chars's rule: "d[.ddd]e(+|-)XX", a leading '-' for negative values and -0),
   NUL-terminated; returns its length, or -1 when cap is too small (32 bytes always fit).
   Never allocates or throws; safe from any thread. */
int cli_f32_scientific(char *buf, size_t cap, float x);

#ifdef __cplusplus
}
#endif

#endif
