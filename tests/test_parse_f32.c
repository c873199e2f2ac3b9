/*
 * The text importers' number parser (ADR 0022): fast_float behind import/parse_f32.cpp when
 * the build has it, strtof_l otherwise. Both must round every decimal once, to nearest with
 * ties to even, straight to float32, and accept exactly the tokens they accepted before.
 *
 * - boundary set: for float32 neighbours a < b across every binade, subnormals and the top
 *   (b = infinity), the exact decimal of (a + b) / 2 and decimals just above and just below
 *   it; the expected float follows from the construction alone (no reference parser), and
 *   the set is checked to catch double rounding through a double;
 * - the whole 20k-row GloVe sample, every number bit-identical to strtof_l;
 * - acceptance: what the fast parser must leave to the old rules (a sign '+', inf, nan,
 *   hex, overflow, partial tokens);
 * - lds_import_file on a GloVe text of the boundary set, whichever parser was built.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include "lodestar.h"
#include "parse_f32.h"

#ifndef LDS_GLOVE_SAMPLE
#error "LDS_GLOVE_SAMPLE must name data/glove-100d-20k.txt.zst"
#endif
#ifndef LDS_HAVE_FAST_FLOAT
#error "LDS_HAVE_FAST_FLOAT must be 0 or 1"
#endif

static locale_t c_locale;

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* strtof_l as the importer called it before ADR 0022: true when it reads tok whole and the
   value is finite. */
static bool ref_parse(const char *tok, float *out)
{
    char *end = NULL;
    float v = strtof_l(tok, &end, c_locale);
    if (*tok == '\0' || *end != '\0' || !isfinite(v))
        return false;
    *out = v;
    return true;
}

/* ---- the boundary set --------------------------------------------------- */

typedef struct {
    char text[256];
    bool finite;   /* the correctly rounded value is a finite float32 */
    uint32_t want; /* its bits when finite */
} bcase;

/* The exact decimal of x (a double) in scientific notation without trailing zeros
   in the significand: glibc prints every digit exactly when asked for enough. */
static void exact_decimal(double x, char *out, size_t cap)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%.160e", x);
    char *e = strchr(buf, 'e');
    assert_non_null(e);
    char *last = e - 1;
    while (*last == '0')
        last--;
    if (*last == '.')
        last--;
    size_t n = (size_t)(last - buf + 1);
    assert_true(n + strlen(e) < cap);
    memcpy(out, buf, n);
    strcpy(out + n, e);
}

/* Inserts `digits` after the significand's last digit of a string from exact_decimal. */
static void append_digits(char *s, size_t cap, const char *digits)
{
    char *e = strchr(s, 'e');
    char tail[16];
    snprintf(tail, sizeof tail, "%s", e);
    size_t n = (size_t)(e - s);
    if (!strchr(s, '.') || strchr(s, '.') > e) {
        /* "5e+00": a point before the new digits */
        assert_true(n + 1 < cap);
        s[n++] = '.';
    }
    assert_true(n + strlen(digits) + strlen(tail) < cap);
    strcpy(s + n, digits);
    strcat(s, tail);
}

/* s with its significand's last nonzero digit decreased by one and 9s after it: a decimal
   just below the value of s (its last digit is never 0, exact_decimal trimmed those). */
static void just_below(char *s, size_t cap)
{
    char *e = strchr(s, 'e');
    char *d = e - 1;
    assert_true(*d >= '1' && *d <= '9');
    (*d)--;
    append_digits(s, cap, "99999999999999999999");
}

/* Adds the three cases of the midpoint between a and its upper neighbour. */
static size_t add_midpoint(bcase *c, size_t n, uint32_t a_bits, bool negative)
{
    float a = float_of(a_bits);
    uint32_t b_bits = a_bits + 1; /* the next float32 up (0x7f800000: infinity) */
    bool b_finite = b_bits < 0x7f800000u;
    double b = b_finite ? (double)float_of(b_bits) : ldexp(1.0, 128);
    double mid = ((double)a + b) / 2; /* exact: 25 significant bits */
    char text[240];
    exact_decimal(mid, text, sizeof text);
    uint32_t sign = negative ? 0x80000000u : 0;
    uint32_t even = (a_bits & 1) == 0 ? a_bits : b_bits;
    const char *minus = negative ? "-" : "";
    /* exactly halfway: ties to even */
    snprintf(c[n].text, sizeof c[n].text, "%s%s", minus, text);
    c[n].finite = even != 0x7f800000u;
    c[n].want = even | sign;
    n++;
    /* a hair above: b */
    char above[240];
    snprintf(above, sizeof above, "%s", text);
    append_digits(above, sizeof above, "00000000000000000000001");
    snprintf(c[n].text, sizeof c[n].text, "%s%s", minus, above);
    c[n].finite = b_finite;
    c[n].want = b_bits | sign;
    n++;
    /* a hair below: a */
    char below[240];
    snprintf(below, sizeof below, "%s", text);
    just_below(below, sizeof below);
    snprintf(c[n].text, sizeof c[n].text, "%s%s", minus, below);
    c[n].finite = true;
    c[n].want = a_bits | sign;
    n++;
    return n;
}

#define MAX_CASES 12000

/* Every binade's first, second, middle and last two significands, the subnormals' ends,
   and pseudo-random ones (a fixed LCG), each positive and negative. */
static size_t boundary_set(bcase *c)
{
    size_t n = 0;
    const uint32_t mants[] = {0, 1, 2, 0x400000, 0x7ffffe, 0x7fffff};
    uint64_t lcg = 0x2545F4914F6CDD1Dull;
    for (uint32_t e = 0; e < 255; e++) {
        for (size_t m = 0; m < sizeof mants / sizeof mants[0]; m++)
            for (int neg = 0; neg < 2; neg++)
                n = add_midpoint(c, n, e << 23 | mants[m], neg);
        lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
        n = add_midpoint(c, n, e << 23 | (uint32_t)(lcg >> 41), false);
        assert_true(n + 40 < MAX_CASES);
    }
    return n;
}

static void test_boundary_set_by_construction(void **state)
{
    (void)state;
    bcase *c = calloc(MAX_CASES, sizeof *c);
    assert_non_null(c);
    size_t n = boundary_set(c);
    assert_true(n > 4000);
    size_t long_mantissas = 0, double_rounding_misses = 0, subnormal = 0, overflow = 0;
    for (size_t i = 0; i < n; i++) {
        const char *t = c[i].text;
        size_t digits = 0;
        for (const char *p = t; *p && *p != 'e'; p++)
            digits += *p >= '0' && *p <= '9';
        long_mantissas += digits > 19;
        float r = 0.0f;
        bool ok = ref_parse(t, &r);
        if (!c[i].finite) {
            overflow++;
            assert_false(ok);
        } else {
            if (!ok || bits_of(r) != c[i].want)
                fail_msg("strtof_l(\"%s\") = %08x, want %08x", t, bits_of(r), c[i].want);
            subnormal += (c[i].want & 0x7f800000u) == 0;
            /* The set is worth having only if rounding through a double gets some wrong. */
            double_rounding_misses += bits_of((float)strtod_l(t, NULL, c_locale)) != c[i].want;
        }
#if LDS_HAVE_FAST_FLOAT
        float f = 0.0f;
        int got = lds__parse_f32_fast(t, strlen(t), &f);
        if (got != (int)c[i].finite || (got && bits_of(f) != c[i].want))
            fail_msg("fast(\"%s\") = %d, %08x; want %d, %08x", t, got, bits_of(f), c[i].finite,
                     c[i].want);
#endif
    }
    /* Every "above" and "below" case has more than 19 digits; over a thousand of them are
       wrong if the decimal goes through a double first. */
    assert_true(long_mantissas > n / 2);
    assert_true(double_rounding_misses > 1000);
    assert_true(subnormal >= 30);
    assert_int_equal(overflow, 2 * 2); /* +-FLT_MAX's midpoint and above it */
    print_message("%zu cases, %zu with over 19 digits, %zu subnormal or zero, %zu wrong when "
                  "rounded through a double\n",
                  n, long_mantissas, subnormal, double_rounding_misses);
    free(c);
}

/* ---- the whole GloVe sample --------------------------------------------- */

#if LDS_HAVE_FAST_FLOAT
static char *read_zst(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    ZSTD_DStream *ds = ZSTD_createDStream();
    assert_non_null(ds);
    size_t cap = (size_t)32 << 20, n = 0;
    char *out = malloc(cap + 1);
    assert_non_null(out);
    unsigned char in[1 << 16];
    size_t got;
    while ((got = fread(in, 1, sizeof in, f)) > 0) {
        ZSTD_inBuffer ib = {in, got, 0};
        while (ib.pos < ib.size) {
            if (n == cap) {
                cap *= 2;
                out = realloc(out, cap + 1);
                assert_non_null(out);
            }
            ZSTD_outBuffer ob = {out + n, cap - n, 0};
            size_t r = ZSTD_decompressStream(ds, &ob, &ib);
            assert_false(ZSTD_isError(r));
            n += ob.pos;
        }
    }
    fclose(f);
    ZSTD_freeDStream(ds);
    out[n] = '\0';
    *len = n;
    return out;
}
#endif

static void test_glove_sample_identical(void **state)
{
    (void)state;
#if !LDS_HAVE_FAST_FLOAT
    skip(); /* strtof_l alone: nothing to compare */
#else
    size_t len;
    char *text = read_zst(LDS_GLOVE_SAMPLE, &len);
    size_t numbers = 0, lines = 0;
    char *p = text, *end = text + len;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *eol = nl ? nl : end;
        *eol = '\0';
        char *q = strchr(p, ' '); /* the key is the first field */
        assert_non_null(q);
        lines++;
        while (q < eol) {
            while (*q == ' ')
                q++;
            char *t = q;
            while (*q && *q != ' ')
                q++;
            char saved = *q;
            *q = '\0';
            float want = 0.0f, got = 0.0f;
            assert_true(ref_parse(t, &want));
            if (!lds__parse_f32_fast(t, (size_t)(q - t), &got) || bits_of(got) != bits_of(want))
                fail_msg("line %zu: \"%s\": fast %08x, strtof_l %08x", lines, t, bits_of(got),
                         bits_of(want));
            numbers++;
            *q = saved;
        }
        p = eol + 1;
    }
    assert_int_equal(lines, 20000);
    assert_int_equal(numbers, 20000 * 100);
    free(text);
#endif
}

/* ---- acceptance --------------------------------------------------------- */

static void test_acceptance(void **state)
{
    (void)state;
    /* strtof_l accepts these whole (a sign '+' included); the fast parser reads each the
       same or leaves it to the old path, never differently. */
    static const char *const whole[] = {
        "0",
        "-0",
        "1.",
        ".5",
        "-.5",
        "1E5",
        "1e+05",
        "1e-5",
        "00001",
        "+1.5",
        "+.5",
        "1e-50",
        "-1e-50",
        "3.4028234e38",
        "1e-45",
        "7e-46",
        "0.000000000000000000000000000000000000000000001",
        "123456789012345678901234567890",
        "-0.0000000000000000000000000000000000000000000007",
    };
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
        float want = 0.0f;
        assert_true(ref_parse(whole[i], &want));
#if LDS_HAVE_FAST_FLOAT
        float got = 0.0f;
        if (lds__parse_f32_fast(whole[i], strlen(whole[i]), &got) && bits_of(got) != bits_of(want))
            fail_msg("\"%s\": fast %08x, strtof_l %08x", whole[i], bits_of(got), bits_of(want));
#endif
    }
#if LDS_HAVE_FAST_FLOAT
    /* Plain decimals take the fast path (its grammar is C++ from_chars', '-' only). */
    static const char *const fast[] = {"0", "-0", "1.", ".5", "-.5", "1E5", "1e+05", "1e-50"};
    for (size_t i = 0; i < sizeof fast / sizeof fast[0]; i++) {
        float got;
        assert_int_equal(lds__parse_f32_fast(fast[i], strlen(fast[i]), &got), 1);
    }
    /* Left to the old rules, which refuse or accept them by name. */
    static const char *const slow[] = {
        "+1",     "+.5",  "inf",    "-inf",   "infinity",     "nan", "NaN",
        "nan(1)", "0x10", "-0x1p3", "0X1P-2", "1e",           "1e+", "1.5.",
        "",       "-",    ".",      " 1",     "1 ",           "1,5", "\v3",
        "2x",     "1e39", "-1e39",  "3.5e38", "3.4028236e38",
    };
    for (size_t i = 0; i < sizeof slow / sizeof slow[0]; i++) {
        float got = 42.0f;
        if (lds__parse_f32_fast(slow[i], strlen(slow[i]), &got) != 0)
            fail_msg("fast parser took \"%s\" as %g", slow[i], (double)got);
        assert_true(got == 42.0f); /* untouched */
    }
    /* Only tok[0, len) is read: the digits after it are not part of the number. */
    float got;
    assert_int_equal(lds__parse_f32_fast("1.25999", 4, &got), 1);
    assert_true(got == 1.25f);
    assert_int_equal(lds__parse_f32_fast("1\0"
                                         "5",
                                         3, &got),
                     0); /* a NUL inside */
#endif
}

/* ---- through lds_import_file -------------------------------------------- */

/* Packs the GloVe text at `path` (rows x dim expected) and returns its vectors, row-major. */
static float *import_rows(const char *path, size_t rows, size_t dim)
{
    char out[] = "/tmp/lds-parse-f32-XXXXXX.ldsi";
    int fd3 = mkstemps(out, 5);
    assert_true(fd3 >= 0);
    close(fd3);
    unlink(out);
    lds_import_options o;
    lds_import_options_default(&o);
    o.format = LDS_IMPORT_GLOVE;
    lds_import_result res = {.size = sizeof res};
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_import_file(path, out, &o, &res, &err);
    if (st != LDS_OK)
        fail_msg("import: %s: %s", lds_status_name(st), err.message);
    assert_int_equal(res.rows, rows);
    assert_int_equal(res.dim, dim);

    FILE *x = fopen(out, "rb");
    assert_non_null(x);
    fseek(x, 0, SEEK_END);
    size_t size = (size_t)ftell(x);
    rewind(x);
    unsigned char *bytes = malloc(size);
    assert_int_equal(fread(bytes, 1, size, x), size);
    fclose(x);
    lds_header h;
    assert_int_equal(lds_header_decode(bytes, size, &h, &err), LDS_OK);
    lds_parse_options po;
    lds_parse_options_default(&po);
    po.header = &h; /* format 1.1: the chunk table */
    lds_index *idx = NULL;
    assert_int_equal(
        lds_index_from_payload(bytes + LDS_HEADER_SIZE, size - LDS_HEADER_SIZE, &po, &idx, &err),
        LDS_OK);
    float *v = malloc(rows * dim * sizeof *v);
    assert_non_null(v);
    for (size_t rr = 0; rr < rows; rr++)
        assert_int_equal(lds_index_row_f32(idx, rr, v + rr * dim, dim), LDS_OK);
    lds_index_free(idx);
    free(bytes);
    unlink(out);
    return v;
}

static void test_import_rounds_once(void **state)
{
    (void)state;
    bcase *c = calloc(MAX_CASES, sizeof *c);
    assert_non_null(c);
    size_t n = boundary_set(c), dim = 64, finite = 0;
    for (size_t i = 0; i < n; i++)
        finite += c[i].finite;
    size_t rows = finite / dim; /* whole rows of the finite cases, in order */
    uint32_t *want = malloc(rows * dim * sizeof *want);
    assert_non_null(want);
    char out_txt[] = "/tmp/lds-parse-f32-XXXXXX.txt";
    int fd = mkstemps(out_txt, 4);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    size_t used = 0;
    for (size_t i = 0; i < n && used < rows * dim; i++) {
        if (!c[i].finite)
            continue;
        if (used % dim == 0)
            fprintf(f, "%sw%zu", used ? "\n" : "", used / dim);
        fprintf(f, " %s", c[i].text);
        want[used++] = c[i].want;
    }
    fputc('\n', f);
    assert_int_equal(fclose(f), 0);

    float *v = import_rows(out_txt, rows, dim);
    for (size_t rr = 0; rr < rows; rr++)
        for (size_t k = 0; k < dim; k++)
            if (bits_of(v[rr * dim + k]) != want[rr * dim + k])
                fail_msg("row %zu element %zu: stored %08x, want %08x", rr, k,
                         bits_of(v[rr * dim + k]), want[rr * dim + k]);
    free(v);
    free(want);
    free(c);
    unlink(out_txt);
}

/* The one-pass line reader and the long way agree: separators of every kind, tokens the
   fast parser leaves to strtof_l ('+'), CRLF and trailing blanks, lines of either path. */
static void test_import_mixed_lines(void **state)
{
    (void)state;
    static const char text[] = "a 1.5 -2 .5\n"
                               "b\t+1.5\t\t1.\t-0\r\n"
                               "c  3e-2   +4 5 \t\n"
                               "d 1e-50 -1e-50 7.0064923216240861e-46\n";
    const uint32_t want[] = {bits_of(1.5f),  bits_of(-2.0f),
                             bits_of(0.5f),  bits_of(1.5f),
                             bits_of(1.0f),  0x80000000u,
                             bits_of(3e-2f), bits_of(4.0f),
                             bits_of(5.0f),  0,
                             0x80000000u,    1};
    char path[] = "/tmp/lds-parse-f32-XXXXXX.txt";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    float *v = import_rows(path, 4, 3);
    for (size_t i = 0; i < 12; i++)
        if (bits_of(v[i]) != want[i])
            fail_msg("element %zu: stored %08x, want %08x", i, bits_of(v[i]), want[i]);
    free(v);
    unlink(path);

    /* A number must end at a separator: "1.5-2" is one token, not 1.5 and -2. */
    static const char bad[] = "a 1 2 3\nb 1.5-2 3\n";
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bad, sizeof bad - 1), (ssize_t)(sizeof bad - 1));
    close(fd);
    char out[] = "/tmp/lds-parse-f32-XXXXXX.ldsi";
    fd = mkstemps(out, 5);
    assert_true(fd >= 0);
    close(fd);
    unlink(out);
    lds_import_options o;
    lds_import_options_default(&o);
    o.format = LDS_IMPORT_GLOVE;
    lds_error err;
    lds_error_init(&err);
    assert_int_equal(lds_import_file(path, out, &o, NULL, &err), LDS_E_PARSE);
    assert_int_equal(err.line, 2);
    assert_non_null(strstr(err.message, "expected 3 numbers, found 2"));
    unlink(path);
}

int main(void)
{
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (c_locale == (locale_t)0)
        return 1;
    printf("# number parser: %s\n", LDS_HAVE_FAST_FLOAT ? "fast_float" : "strtof_l");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boundary_set_by_construction),
        cmocka_unit_test(test_acceptance),
        cmocka_unit_test(test_glove_sample_identical),
        cmocka_unit_test(test_import_rounds_once),
        cmocka_unit_test(test_import_mixed_lines),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    freelocale(c_locale);
    return rc;
}
