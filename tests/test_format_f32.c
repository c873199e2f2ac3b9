/*
 * The CLI's float output (cli/util.c cli_format_float: std::to_chars's shortest digits
 * through cli/format_f32.cpp when the build has C++, snprintf and strtof otherwise). Every
 * printed float must read back (strtof) as the same float32 bit for bit, in the shortest
 * digits, laid out as before the change (the old loop of "%.*g" rounds, kept here as the
 * reference): so `lodestar export` writes the same text it wrote, only faster.
 *
 * - every number of the 20k-row GloVe sample (2,000,000);
 * - every binade's first, second, middle and last two significands and a pseudo-random one,
 *   both signs (the float32 neighbours of tests/test_parse_f32.c's midpoints), subnormals;
 * - a stride through all 2^32 bit patterns;
 * - the special spellings: nan, inf, -0, 50, 100, 3e+15, 1e-45.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zstd.h>

#include "cli.h"

#ifndef LDS_GLOVE_SAMPLE
#error "LDS_GLOVE_SAMPLE must name data/glove-100d-20k.txt.zst"
#endif

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

/* The layout before std::to_chars: the first of 1..9 significant digits that reads back,
   by "%.*g", then a positive exponent written plain where that is not longer. */
static void old_format(char *buf, size_t cap, float x)
{
    if (isnan(x)) {
        snprintf(buf, cap, "nan");
        return;
    }
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, cap, "%.*g", digits, (double)x);
        if (strtof(buf, NULL) != x)
            continue;
        const char *e = strchr(buf, 'e');
        if (e && e[1] == '+') {
            char digs[16];
            size_t nd = 0, neg = buf[0] == '-';
            for (const char *c = buf + neg; c < e && nd < sizeof digs; c++)
                if (*c != '.')
                    digs[nd++] = *c;
            int exp10 = atoi(e + 2);
            size_t plain = neg + (size_t)exp10 + 1;
            if ((size_t)exp10 + 1 >= nd && plain <= strlen(buf) && plain < cap) {
                size_t o = 0;
                if (neg)
                    buf[o++] = '-';
                for (size_t i = 0; i < (size_t)exp10 + 1; i++)
                    buf[o++] = i < nd ? digs[i] : '0';
                buf[o] = '\0';
            }
        }
        return;
    }
}

static size_t differing; /* same length, other digits: a tie std::to_chars breaks otherwise */
static size_t shorter;   /* fewer digits than the old loop found */

/* x printed reads back as x, bit for bit, in no more characters than before. */
static void check_one(float x)
{
    char got[40], old[40];
    cli_format_float(got, sizeof got, x);
    old_format(old, sizeof old, x);
    if (isnan(x)) {
        assert_string_equal(got, "nan");
        return;
    }
    char *end = NULL;
    float back = strtof(got, &end);
    if (bits_of(back) != bits_of(x) || *end != '\0' || strlen(got) > strlen(old)) {
        fprintf(stderr, "0x%08x: printed %s (old %s), read back 0x%08x\n", bits_of(x), got, old,
                bits_of(back));
        fail();
    }
    if (strcmp(got, old) != 0) {
        /* Only where the shortest digits lie on the wider side of a power of two, which
           the old loop's correctly rounded candidates could miss: one digit fewer. */
        if (strlen(got) == strlen(old))
            differing++;
        else
            shorter++;
        if (differing + shorter <= 5)
            fprintf(stderr, "0x%08x: %s (before: %s)\n", bits_of(x), got, old);
    }
}

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

static void test_glove_sample(void **state)
{
    (void)state;
    size_t len;
    char *text = read_zst(LDS_GLOVE_SAMPLE, &len);
    size_t numbers = 0;
    for (char *line = text; line < text + len;) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        if (!nl)
            nl = text + len;
        *nl = '\0';
        char *tok = strchr(line, ' '); /* after the key */
        while (tok && *tok) {
            char *end;
            float x = strtof(tok + 1, &end);
            assert_true(end > tok + 1);
            check_one(x);
            numbers++;
            tok = end;
        }
        line = nl + 1;
    }
    assert_int_equal(numbers, 20000u * 100u);
    free(text);
}

static void test_binades(void **state)
{
    (void)state;
    const uint32_t mants[] = {0, 1, 2, 0x400000, 0x7ffffe, 0x7fffff};
    uint64_t lcg = 0x2545F4914F6CDD1Dull;
    size_t n = 0;
    for (uint32_t e = 0; e < 255; e++) {
        lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
        for (size_t m = 0; m <= sizeof mants / sizeof mants[0]; m++) {
            uint32_t mant = m < sizeof mants / sizeof mants[0] ? mants[m] : (uint32_t)(lcg >> 41);
            for (uint32_t sign = 0; sign < 2; sign++) {
                uint32_t a = sign << 31 | e << 23 | mant;
                check_one(float_of(a));
                if ((a & 0x7fffffffu) < 0x7f7fffffu)
                    check_one(float_of(a + 1)); /* its upper neighbour */
                n += 2;
            }
        }
    }
    assert_true(n > 3000);
}

static void test_stride_through_all_floats(void **state)
{
    (void)state;
    /* 524,353 patterns: a prime stride visits every exponent and many significands. */
    for (uint64_t u = 0; u <= 0xffffffffull; u += 8191) {
        float x = float_of((uint32_t)u);
        if (!isinf(x))
            check_one(x);
    }
    fprintf(stderr,
            "%zu floats printed in other digits of the same length as before, %zu shorter\n",
            differing, shorter);
}

static void test_spellings(void **state)
{
    (void)state;
    struct {
        float x;
        const char *want;
    } cases[] = {
        {NAN, "nan"},
        {-NAN, "nan"},
        {INFINITY, "inf"},
        {-INFINITY, "-inf"},
        {0.0f, "0"},
        {-0.0f, "-0"},
        {50.0f, "50"},
        {100.0f, "100"},
        {3e15f, "3e+15"},
        {1e-45f, "1e-45"},
        {0.5f, "0.5"},
        {-0.038194f, "-0.038194"},
        {1e-4f, "0.0001"},
        {1.5e-5f, "1.5e-05"},
        {123456.0f, "123456"},
        {FLT_MAX, "3.4028235e+38"},
        {16777216.0f, "16777216"},
        {1e16f, "1e+16"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char got[40];
        cli_format_float(got, sizeof got, cases[i].x);
        assert_string_equal(got, cases[i].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spellings),
        cmocka_unit_test(test_binades),
        cmocka_unit_test(test_glove_sample),
        cmocka_unit_test(test_stride_through_all_floats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
