/* lds_import_sniff: what a file is, from its first bytes (include/lodestar_import.h). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lds_common.h"
#include "lodestar_import.h"
#include "lodestar_index.h"

static bool starts(const unsigned char *h, size_t len, const char *magic, size_t n)
{
    return len >= n && memcmp(h, magic, n) == 0;
}

/* Whether t[0, n) is a C-locale decimal number: [-+]digits[.digits][(e|E)[-+]digits],
   or .digits; nan and inf are not what a GloVe writer prints. */
static bool is_number(const unsigned char *t, size_t n)
{
    size_t i = 0, digits = 0;
    if (i < n && (t[i] == '-' || t[i] == '+'))
        i++;
    for (; i < n && t[i] >= '0' && t[i] <= '9'; i++)
        digits++;
    if (i < n && t[i] == '.')
        for (i++; i < n && t[i] >= '0' && t[i] <= '9'; i++)
            digits++;
    if (digits == 0)
        return false;
    if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        size_t e = 0;
        i++;
        if (i < n && (t[i] == '-' || t[i] == '+'))
            i++;
        for (; i < n && t[i] >= '0' && t[i] <= '9'; i++)
            e++;
        if (e == 0)
            return false;
    }
    return i == n;
}

/* The first line's tokens (separated by spaces or tabs), judged as text: word2vec's
   "N D" header, or GloVe's key then numbers. Only complete tokens count: the last one
   counts only when the line ends (LF or CR) inside head. */
static const char *sniff_text(const unsigned char *h, size_t len, lds_import_format *format)
{
    size_t end = 0;
    while (end < len && h[end] != '\n' && h[end] != '\r') {
        if (h[end] < 0x20 && h[end] != '\t')
            return NULL; /* a control byte: not text */
        end++;
    }
    bool complete = end < len;
    size_t tokens = 0, numbers = 0;
    bool first_number = false;
    bool all_numbers_after_key = true;
    for (size_t i = 0; i < end;) {
        while (i < end && (h[i] == ' ' || h[i] == '\t'))
            i++;
        size_t s = i;
        while (i < end && h[i] != ' ' && h[i] != '\t')
            i++;
        if (i == s)
            break;
        if (i == end && !complete)
            break; /* cut off by the end of head */
        bool num = is_number(h + s, i - s);
        if (tokens == 0)
            first_number = num;
        else if (num)
            numbers++;
        else
            all_numbers_after_key = false;
        tokens++;
    }
    if (tokens == 2 && first_number && numbers == 1 && complete) {
        bool integers = true;
        for (size_t i = 0; i < end; i++)
            if (!(h[i] >= '0' && h[i] <= '9') && h[i] != ' ' && h[i] != '\t')
                integers = false;
        if (integers) {
            *format = LDS_IMPORT_W2V_TEXT;
            return "a word2vec text file";
        }
    }
    if (tokens >= 2 && numbers >= 1 && all_numbers_after_key) {
        *format = LDS_IMPORT_GLOVE;
        return "a GloVe text file";
    }
    return NULL;
}

/* Whether the JSON text in head names the manifest format "lodestar-shards". */
static bool is_manifest(const unsigned char *h, size_t len)
{
    size_t i = 0;
    while (i < len && (h[i] == ' ' || h[i] == '\t' || h[i] == '\n' || h[i] == '\r'))
        i++;
    if (i == len || h[i] != '{')
        return false;
    static const char needle[] = "\"lodestar-shards\"";
    size_t n = sizeof needle - 1;
    for (; i + n <= len; i++)
        if (memcmp(h + i, needle, n) == 0)
            return true;
    return false;
}

const char *lds_import_sniff(const void *head, size_t len, lds_import_format *format)
{
    lds_import_format dummy;
    if (!format)
        format = &dummy;
    *format = LDS_IMPORT_AUTO;
    const unsigned char *h = head;
    if (!h || len == 0)
        return NULL;
    if (starts(h, len, LDS_MAGIC, LDS_MAGIC_SIZE))
        return "a lodestar index";
    if (starts(h, len, "\x93NUMPY", 6)) {
        *format = LDS_IMPORT_NPY;
        return "an .npy file";
    }
    if (starts(h, len, "PK\x03\x04", 4)) {
        *format = LDS_IMPORT_NPZ;
        return "a zip file (.npz)";
    }
    if (starts(h, len, "\x89HDF\r\n\x1a\n", 8)) {
        *format = LDS_IMPORT_HDF5;
        return "an HDF5 file";
    }
    if (starts(h, len, "\x1f\x8b", 2))
        return "a gzip-compressed file";
    if (lds__is_zstd(h, len)) /* a zstd frame, or a skippable frame (RFC 8878 3.1.2) first */
        return "a zstd-compressed file";
    if (starts(h, len,
               "\xfd"
               "7zXZ\x00",
               6))
        return "an xz-compressed file";
    if (is_manifest(h, len))
        return "a lodestar shard manifest (JSON)";
    return sniff_text(h, len, format);
}
