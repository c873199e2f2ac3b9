/*
 * Tests of common/: the one error filler (NUL-terminated in any room, cuts
 * marked, the offset in the message equal to err->offset), through the filler
 * itself and through each part that fills errors (parser, loader, importer),
 * the UTF-8 validator, the page size and the zstd magic.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "../common/lds_common.h"
#include "lodestar.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MSG_AT offsetof(lds_error, message)

/* An lds_error of `size` bytes inside a buffer whose other bytes are 0xAA, so a
   write past `size` shows. */
typedef struct sized_error {
    unsigned char raw[sizeof(lds_error) + 64];
    lds_error *e;
    size_t size;
} sized_error;

static void sized_init(sized_error *s, size_t size)
{
    memset(s->raw, 0xAA, sizeof s->raw);
    s->e = (lds_error *)(void *)s->raw;
    s->size = size;
    memset(s->raw, 0, size < sizeof(lds_error) ? size : sizeof(lds_error));
    s->e->size = size;
}

/* Nothing written at or after byte `size` of the struct. */
static void assert_untouched_after(const sized_error *s)
{
    for (size_t i = s->size; i < sizeof s->raw; i++)
        if (s->raw[i] != 0xAA)
            fail_msg("byte %zu written, past lds_error.size %zu", i, s->size);
}

/* The message is NUL-terminated inside the room that `size` leaves it. */
static size_t message_len(const sized_error *s)
{
    size_t room = s->size - MSG_AT;
    if (room > sizeof s->e->message)
        room = sizeof s->e->message;
    size_t n = strnlen(s->e->message, room);
    if (n == room)
        fail_msg("message not NUL-terminated within its %zu-byte room (size %zu)", room, s->size);
    return n;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

static int count_of(const char *s, const char *needle)
{
    int k = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        k++;
    return k;
}

/* ---- the filler itself --------------------------------------------------- */

static void test_fill_every_room(void **state)
{
    (void)state;
    char longtext[400];
    memset(longtext, 'x', sizeof longtext - 1);
    longtext[sizeof longtext - 1] = '\0';
    for (size_t size = LDS_ERROR_MIN_SIZE; size <= sizeof(lds_error); size++) {
        for (int longer = 0; longer < 2; longer++) {
            sized_error s;
            sized_init(&s, size);
            lds_status st =
                lds__error_fill(s.e, LDS_E_BAD_SECTION, "section.offset", 123456, true, 7, 0, NULL,
                                "section[1].offset: %s", longer ? longtext : "bad");
            assert_int_equal(st, LDS_E_BAD_SECTION);
            assert_untouched_after(&s);
            assert_int_equal(s.e->status, LDS_E_BAD_SECTION);
            if (size >= offsetof(lds_error, offset) + sizeof(uint64_t))
                assert_int_equal(s.e->offset, 123456);
            if (size >= offsetof(lds_error, line) + sizeof(uint64_t))
                assert_int_equal(s.e->line, 7);
            if (size <= MSG_AT)
                continue;
            size_t room = size - MSG_AT, n = message_len(&s);
            const char *tail = " (at byte 123456)";
            if (room >= strlen(tail) + 4) {
                if (!ends_with(s.e->message, tail))
                    fail_msg("size %zu: \"%s\" lost its offset", size, s.e->message);
                assert_int_equal(count_of(s.e->message, "(at byte "), 1);
            }
            bool fits =
                strlen("section[1].offset: ") + (longer ? strlen(longtext) : 3) + strlen(tail) <
                room;
            if (!fits && room >= 4 && strstr(s.e->message, "...") == NULL)
                fail_msg("size %zu: a cut message is not marked: \"%s\"", size, s.e->message);
            if (!fits)
                assert_int_equal(n, (room > sizeof s.e->message ? sizeof s.e->message : room) - 1);
            if (fits)
                assert_string_equal(s.e->message, "section[1].offset: bad (at byte 123456)");
        }
    }
}

static void test_fill_refuses_bad_sizes(void **state)
{
    (void)state;
    sized_error s;
    sized_init(&s, LDS_ERROR_MIN_SIZE - 1);
    lds__fail(s.e, LDS_E_PARSE, "x", 1, "text");
    assert_int_equal(s.e->size, LDS_ERROR_MIN_SIZE - 1);
    for (size_t i = sizeof s.e->size; i < sizeof s.raw; i++)
        if (s.raw[i] != 0 && s.raw[i] != 0xAA)
            fail_msg("byte %zu written under a too-small size", i);
    lds_error e;
    lds_error_init(&e);
    e.size = sizeof e + 1;
    assert_int_equal(lds__fail(&e, LDS_E_PARSE, "x", 1, "text"), LDS_E_PARSE);
    assert_int_equal(e.status, LDS_OK);
    assert_int_equal(e.message[0], '\0');
    assert_int_equal(lds__fail(NULL, LDS_E_PARSE, "x", 1, "text"), LDS_E_PARSE);
}

static void test_rebase_keeps_one_offset(void **state)
{
    (void)state;
    lds_error e;
    lds_error_init(&e);
    lds__fail(&e, LDS_E_BAD_MAGIC, "header.magic", 0, "header.magic: wrong");
    lds__error_rebase(&e, 10);
    assert_int_equal(e.offset, 10);
    assert_string_equal(e.message, "header.magic: wrong (at byte 10)");
    /* No ending, nothing to rewrite (an argument error names no byte). */
    lds__fail(&e, LDS_E_INVALID_ARG, NULL, 0, "no field");
    lds__error_rebase(&e, 10);
    assert_string_equal(e.message, "no field");
}

/* ---- through the parts: what callers see ---------------------------------- */

/* The parser used to write no message at all into an lds_error shorter than the whole struct. */
static void test_parser_short_error(void **state)
{
    (void)state;
    unsigned char payload[16] = {0};
    sized_error s;
    sized_init(&s, MSG_AT + 48);
    lds_index *idx = NULL;
    assert_int_equal(lds_index_from_payload(payload, sizeof payload, NULL, &idx, s.e),
                     LDS_E_TRUNCATED);
    assert_untouched_after(&s);
    size_t n = message_len(&s);
    assert_true(n > 0);
    assert_true(strncmp(s.e->message, "payload:", 8) == 0);
    assert_non_null(strstr(s.e->message, "..."));
    assert_true(ends_with(s.e->message, " (at byte 80)")); /* base 64 + 16 bytes */
    assert_int_equal(s.e->offset, 80);
}

/* The importer used to copy a cut message without its NUL. */
static void test_importer_short_error(void **state)
{
    (void)state;
    const char *in = "/nonexistent/dir/in.txt", *out = "/nonexistent/dir/out.ldsi";
    lds_error full;
    lds_error_init(&full);
    assert_int_equal(lds_import_file(in, out, NULL, NULL, &full), LDS_E_IO);
    size_t full_len = strlen(full.message);
    assert_true(full_len > 20);
    for (size_t room = 1; room <= full_len + 1; room++) {
        sized_error s;
        sized_init(&s, MSG_AT + room);
        assert_int_equal(lds_import_file(in, out, NULL, NULL, s.e), LDS_E_IO);
        assert_untouched_after(&s);
        size_t n = message_len(&s);
        if (room == full_len + 1) {
            assert_string_equal(s.e->message, full.message);
        } else if (room >= 4) { /* cut: the start of the message, then "..." */
            assert_int_equal(n, room - 1);
            assert_memory_equal(s.e->message, full.message, room - 4);
            assert_string_equal(s.e->message + room - 4, "...");
        }
    }
}

/* The loader used to cut the " (at byte N)" ending off a short message. */
static void test_loader_short_error_keeps_offset(void **state)
{
    (void)state;
    unsigned char bytes[10] = {0x89, 'L', 'D', 'S'};
    sized_error s;
    sized_init(&s, MSG_AT + 24);
    lds_index *idx = NULL;
    assert_int_equal(lds_load_memory(bytes, sizeof bytes, true, NULL, &idx, NULL, s.e),
                     LDS_E_TRUNCATED);
    assert_untouched_after(&s);
    (void)message_len(&s);
    assert_int_equal(s.e->offset, 10);
    if (!ends_with(s.e->message, " (at byte 10)"))
        fail_msg("\"%s\" lost its offset", s.e->message);
}

/* A stream positioned at byte 10: the offset field and the message agree (the
   message used to say "at byte 0" while offset was 10). */
static void test_stream_offset_agrees_with_message(void **state)
{
    (void)state;
    char path[] = "/tmp/lds-common-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unsigned char junk[10 + 64];
    memset(junk, 'j', sizeof junk); /* 10 bytes skipped, then a header with a wrong magic */
    assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    assert_int_equal(lseek(fd, 10, SEEK_SET), 10);
    lds_error e;
    lds_error_init(&e);
    lds_index *idx = NULL;
    assert_int_equal(lds_load_fd(fd, NULL, &idx, NULL, &e), LDS_E_BAD_MAGIC);
    assert_int_equal(e.offset, 10);
    if (!ends_with(e.message, " (at byte 10)"))
        fail_msg("offset 10, message \"%s\"", e.message);
    assert_int_equal(count_of(e.message, "(at byte "), 1);
    close(fd);
    unlink(path);
}

/* ---- the other basics ---------------------------------------------------- */

static void test_utf8(void **state)
{
    (void)state;
    size_t bad = 99;
    const char *why = NULL;
    assert_true(lds__utf8_valid((const uint8_t *)"h\xC3\xA9llo \xF0\x9F\x98\x80", 11, &bad, &why));
    struct {
        const char *s;
        size_t n, bad;
        const char *why;
    } cases[] = {
        {"a\x80", 2, 1, "stray continuation byte"},
        {"\xC0\xAF", 2, 0, "overlong encoding"},
        {"\xE0\x80\xAF", 3, 1, "overlong encoding"},
        {"\xED\xA0\x80", 3, 1, "surrogate code point"},
        {"\xF4\x90\x80\x80", 4, 1, "code point above U+10FFFF"},
        {"\xE2\x82", 2, 0, "truncated sequence"},
        {"\xE2\x28\xA1", 3, 1, "missing continuation byte"},
        {"\xFF", 1, 0, "byte never valid in UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_false(lds__utf8_valid((const uint8_t *)cases[i].s, cases[i].n, &bad, &why));
        assert_int_equal(bad, cases[i].bad);
        assert_string_equal(why, cases[i].why);
    }
}

static void test_page_and_zstd(void **state)
{
    (void)state;
    size_t pg = lds__page_size();
    assert_int_equal(pg, (size_t)sysconf(_SC_PAGESIZE));
    assert_int_equal(lds__page_round(1), pg);
    assert_int_equal(lds__page_round(pg), pg);
    assert_int_equal(lds__page_round(SIZE_MAX), SIZE_MAX);
    const unsigned char z[] = {0x28, 0xB5, 0x2F, 0xFD, 0x00};
    assert_true(lds__is_zstd(z, 4));
    assert_false(lds__is_zstd(z, 3));
    assert_false(lds__is_zstd("\x89LDS", 4));
    assert_false(lds__is_zstd_skippable(z, 4));
    /* A skippable frame's 16 magics (RFC 8878 section 3.1.2) start zstd data too. */
    assert_true(lds__is_zstd("\x50\x2A\x4D\x18", 4));
    assert_true(lds__is_zstd_skippable("\x5F\x2A\x4D\x18", 4));
    assert_false(lds__is_zstd_skippable("\x5F\x2A\x4D\x18", 3));
    assert_false(lds__is_zstd("\x60\x2A\x4D\x18", 4));
    assert_false(lds__is_zstd("\x4F\x2A\x4D\x18", 4));
    uint64_t a = lds__now_ns(), b = lds__now_ns();
    assert_true(b >= a);
    int fd = -1;
    assert_int_equal(lds__os_open("/nonexistent/x", O_RDONLY, &fd), ENOENT);
    assert_int_equal(fd, -1);
    uint64_t size;
    assert_int_equal(lds__os_open("/dev/null", O_RDONLY, &fd), 0);
    assert_int_equal(lds__os_regular_size(fd, &size), ENOTSUP);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_every_room),
        cmocka_unit_test(test_fill_refuses_bad_sizes),
        cmocka_unit_test(test_rebase_keeps_one_offset),
        cmocka_unit_test(test_parser_short_error),
        cmocka_unit_test(test_importer_short_error),
        cmocka_unit_test(test_loader_short_error_keeps_offset),
        cmocka_unit_test(test_stream_offset_agrees_with_message),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_page_and_zstd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
