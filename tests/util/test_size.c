/* Size parsing and printing: every accepted form, every rejected one, limits. */
#include <check.h>

#include "tests/check_run.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/size.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define TiB ((size_t)1 << 40)

static size_t parse_ok(const char *s)
{
    size_t v = 12345;
    ck_assert_msg(ca_parse_size(s, &v) == 0, "'%s' should parse", s);
    return v;
}

START_TEST(plain_bytes)
{
    ck_assert_uint_eq(parse_ok("0"), 0);
    ck_assert_uint_eq(parse_ok("1"), 1);
    ck_assert_uint_eq(parse_ok("4096"), 4096);
    ck_assert_uint_eq(parse_ok("007"), 7);
    ck_assert_uint_eq(parse_ok("512B"), 512);
    ck_assert_uint_eq(parse_ok("512 b"), 512);
    ck_assert_uint_eq(parse_ok("18446744073709551615"), SIZE_MAX);
}
END_TEST

START_TEST(units_are_powers_of_1024)
{
    static const struct { const char *s; size_t v; } cases[] = {
        {"1K", KiB},         {"1k", KiB},          {"1KB", KiB},        {"1kb", KiB},
        {"1KiB", KiB},       {"1kib", KiB},        {"3M", 3 * MiB},     {"3MB", 3 * MiB},
        {"3MiB", 3 * MiB},   {"8G", 8 * GiB},      {"8GB", 8 * GiB},    {"8GiB", 8 * GiB},
        {"8gib", 8 * GiB},   {"2T", 2 * TiB},      {"2TB", 2 * TiB},    {"2TiB", 2 * TiB},
        {"80 GB", 80 * GiB}, {"  16GiB  ", 16 * GiB}, {"\t1 MiB\n", MiB}, {"1 GiB\r\n", GiB},
        {"0GiB", 0},         {"16777215TiB", (size_t)16777215 << 40},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(parse_ok(cases[i].s) == cases[i].v, "'%s'", cases[i].s);
}
END_TEST

START_TEST(fractions_need_a_unit)
{
    ck_assert_uint_eq(parse_ok("1.5GiB"), GiB + GiB / 2);
    ck_assert_uint_eq(parse_ok("0.5 KiB"), 512);
    ck_assert_uint_eq(parse_ok("1.25M"), MiB + MiB / 4);
    ck_assert_uint_eq(parse_ok("0.1KiB"), 102); /* 102.4 rounds down */
    ck_assert_uint_eq(parse_ok("2.000GB"), 2 * GiB);
    ck_assert_uint_eq(parse_ok("0.0000000000000000000000001TiB"), 0); /* long fractions ok */
    ck_assert_uint_eq(parse_ok("1.9999999999999999999999999K"), 2047);
    size_t v = 77;
    ck_assert_int_eq(ca_parse_size("1.5", &v), -1); /* half a byte */
    ck_assert_int_eq(ca_parse_size("1.5B", &v), -1);
    ck_assert_uint_eq(v, 77);
}
END_TEST

START_TEST(garbage_is_rejected)
{
    static const char *const bad[] = {
        "",       "   ",     "\t",      "-1",      "-1GiB",    "+5",      "GiB",    "K",
        "1 2",    "1GiB 2",  "1GiBx",   "1 G iB",  "1Gi",      "1GIBB",   "1ZiB",   "1YB",
        "1e9",    "0x10",    "1,024",   "1_000",   ".5GiB",    "1.GiB",   "1..5G",  "1.5.5G",
        "one",    "1 bytes", "12abc",   "1 KiB,",  "1\x01",    "１",      "1 - 2",  "--1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t v = 99;
        ck_assert_msg(ca_parse_size(bad[i], &v) == -1, "'%s' should be rejected", bad[i]);
        ck_assert_uint_eq(v, 99); /* untouched */
    }
    size_t v;
    ck_assert_int_eq(ca_parse_size(NULL, &v), -1);
    ck_assert_int_eq(ca_parse_size("1", NULL), -1);
}
END_TEST

START_TEST(overflow_is_rejected)
{
    static const char *const bad[] = {
        "18446744073709551616",          /* SIZE_MAX + 1 */
        "99999999999999999999999999999", /* far beyond */
        "16777216TiB",                   /* 2^64 exactly */
        "17179869184GiB",
        "340282366920938463463374607431768211461", /* 2^128 + 5: must not wrap to 5 */
        "340282366920938463463374607431768211461K",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t v = 5;
        ck_assert_msg(ca_parse_size(bad[i], &v) == -1, "'%s' should overflow", bad[i]);
        ck_assert_uint_eq(v, 5);
    }
    /* Just below 2^64 fits; 16777216 TiB (2^64) does not. */
    ck_assert_uint_eq(parse_ok("16777215.5TiB"), ((size_t)16777215 << 40) + (TiB / 2));
    ck_assert_uint_eq(parse_ok("16777215.9999999999999TiB"), SIZE_MAX); /* rounded down */
}
END_TEST

static const char *fmt(size_t v)
{
    static char buf[CA_SIZE_BUF];
    return ca_format_size(v, buf, sizeof buf);
}

/* Counts (release_after, --timeline=N): digits only, up to 10^15. */
START_TEST(counts) {
    size_t v = 7;
    ck_assert_int_eq(ca_parse_count("0", &v), 0);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(ca_parse_count("10000", &v), 0);
    ck_assert_uint_eq(v, 10000);
    ck_assert_int_eq(ca_parse_count("1000000000000000", &v), 0);
    ck_assert_uint_eq(v, 1000000000000000u);
    static const char *bad[] = {"", " 1", "1 ", "+1", "-1", "1k", "1.0", "0x10", "1000000000000001",
                                "99999999999999999999999999"};
    v = 7;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(ca_parse_count(bad[i], &v) == -1 && v == 7, "'%s' should be rejected", bad[i]);
    ck_assert_int_eq(ca_parse_count(NULL, &v), -1);
}
END_TEST

START_TEST(format)
{
    ck_assert_str_eq(fmt(0), "0 B");
    ck_assert_str_eq(fmt(1), "1 B");
    ck_assert_str_eq(fmt(1023), "1023 B");
    ck_assert_str_eq(fmt(1024), "1.00 KiB");
    ck_assert_str_eq(fmt(1536), "1.50 KiB");
    ck_assert_str_eq(fmt(GiB + GiB / 2), "1.50 GiB");
    ck_assert_str_eq(fmt(16021 * MiB), "15.65 GiB");
    ck_assert_str_eq(fmt(MiB - 1), "1.00 MiB");       /* 1023.999 KiB rounds up a unit */
    ck_assert_str_eq(fmt(1023 * KiB), "1023.00 KiB");
    ck_assert_str_eq(fmt(1023 * KiB + 1018), "1023.99 KiB");
    ck_assert_str_eq(fmt(3 * TiB), "3.00 TiB");
    ck_assert_str_eq(fmt((size_t)5 << 50), "5.00 PiB");
    ck_assert_str_eq(fmt(SIZE_MAX), "16.00 EiB");
    ck_assert_str_eq(fmt(303680000), "289.61 MiB");

    char small[6];
    ck_assert_str_eq(ca_format_size(GiB, small, sizeof small), "1.00 "); /* truncated, ended */
    ck_assert_ptr_null(ca_format_size(GiB, NULL, 10));
    char one[1] = {'x'};
    ca_format_size(GiB, one, 0); /* n == 0: nothing written */
    ck_assert_int_eq(one[0], 'x');
}
END_TEST

/* What format prints, parse reads back (to the precision printed). */
START_TEST(round_trip)
{
    size_t vals[] = {0, 1, 1000, 4096, 3 * MiB, 80 * GiB, GiB + GiB / 4, 7 * TiB, (size_t)5 << 50,
                     (size_t)3 << 60};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        ck_assert_uint_eq(parse_ok(fmt(vals[i])), vals[i]);
    /* Found by fuzzing (tests/fuzz/corpus/size/max): sizes of a PiB and up
     * printed in units the parser did not know. Now P and E parse too. */
    ck_assert_uint_eq(parse_ok("5.00 PiB"), (size_t)5 << 50);
    ck_assert_uint_eq(parse_ok("1p"), (size_t)1 << 50);
    ck_assert_uint_eq(parse_ok("2PB"), (size_t)2 << 50);
    ck_assert_uint_eq(parse_ok("15.99 EiB"), ((size_t)15 << 60) + (size_t)(((unsigned __int128)99 << 60) / 100));
    ck_assert_uint_eq(parse_ok("1E"), (size_t)1 << 60);
    ck_assert_uint_eq(parse_ok("3eb"), (size_t)3 << 60);
    size_t v = 7;
    ck_assert_int_eq(ca_parse_size("16EiB", &v), -1); /* 2^64 */
    ck_assert_int_eq(ca_parse_size(fmt(SIZE_MAX), &v), -1); /* "16.00 EiB": rounded up past the top */
    ck_assert_uint_eq(v, 7);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("size");
    TCase *tc = tcase_create("size");
    tcase_add_test(tc, plain_bytes);
    tcase_add_test(tc, units_are_powers_of_1024);
    tcase_add_test(tc, fractions_need_a_unit);
    tcase_add_test(tc, garbage_is_rejected);
    tcase_add_test(tc, overflow_is_rejected);
    tcase_add_test(tc, format);
    tcase_add_test(tc, round_trip);
    tcase_add_test(tc, counts);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
