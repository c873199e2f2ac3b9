/*
 * The fast decimal-to-float32 parser behind the text importers (import/parse_f32.cpp, a C
 * shim over fast_float::from_chars). Pure C; not installed. Built only when the build finds
 * fast_float (LDS_HAVE_FAST_FLOAT=1); without it lds__imp_parse_float uses strtof_l alone.
 */
#ifndef LDS_IMPORT_PARSE_F32_H
#define LDS_IMPORT_PARSE_F32_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parses tok[0, len) as a C-locale decimal number, rounded once (to nearest, ties to even)
   straight to binary32. Writes *out and returns 1 only when the whole token is one decimal
   number of the form [-]digits[.digits][(e|E)[+|-]digits] (at least one digit before the
   exponent) whose value is finite in binary32; returns 0 otherwise, *out untouched: a
   leading '+', inf, nan, hexadecimal, a partial token, an empty one and overflow all return
   0, and the caller decides on them (strtof_l's grammar is a superset of this one, so what
   returns 1 here strtof_l reads whole, to the same float). Never allocates, never throws,
   reads nothing outside tok[0, len); safe from any thread. */
int lds__parse_f32_fast(const char *tok, size_t len, float *out);

/* The same parse of the longest number at the start of [first, last): returns the end of
   the characters it read, or NULL (*out untouched) where lds__parse_f32_fast would return
   0 for them. The caller checks what follows (a text line's separator): a number followed
   by a separator is then the token lds__parse_f32_fast reads whole, to the same float. */
const char *lds__parse_f32_prefix(const char *first, const char *last, float *out);

#ifdef __cplusplus
}
#endif

#endif /* LDS_IMPORT_PARSE_F32_H */
