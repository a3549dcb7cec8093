/* Quoting outside bytes for one-line messages: control bytes escaped, long
 * values cut with "...", never past the buffer. */
#include <check.h>
#include <string.h>

#include "tests/check_run.h"
#include "util/quote.h"

static const char *q(const char *s, size_t n, size_t max)
{
    static char buf[CA_QUOTE_BUF(64)];
    return ca_quote(s, n, max, buf, sizeof buf);
}

START_TEST(plain_text_passes)
{
    ck_assert_str_eq(q("allocate", 8, 40), "allocate");
    ck_assert_str_eq(q("", 0, 40), "");
    ck_assert_str_eq(q("héllo", strlen("héllo"), 40), "héllo"); /* UTF-8 as is */
    ck_assert_str_eq(q("abcdef", 3, 40), "abc");                /* n bytes, not to the NUL */
}
END_TEST

START_TEST(control_bytes_are_escaped)
{
    ck_assert_str_eq(q("a\rb", 3, 40), "a\\x0db");
    ck_assert_str_eq(q("line\n", 5, 40), "line\\x0a");
    ck_assert_str_eq(q("t\tx\x7f", 4, 40), "t\\x09x\\x7f");
    ck_assert_str_eq(q("a\0b", 3, 40), "a\\x00b");
    ck_assert_str_eq(q("back\\slash", 10, 40), "back\\\\slash"); /* so \x0d cannot be faked */
}
END_TEST

START_TEST(long_values_are_cut)
{
    ck_assert_str_eq(q("abcdefgh", 8, 4), "abcd...");
    ck_assert_str_eq(q("abcd", 4, 4), "abcd");
    ck_assert_str_eq(q("\n\n\n\n\n", 5, 2), "\\x0a\\x0a...");
    /* a buffer too small for the text: cut where it runs out, terminated */
    char small[10];
    memset(small, 'x', sizeof small);
    ca_quote("0123456789abcdef", 16, 100, small, 8);
    ck_assert_str_eq(small, "0123...");
    ck_assert_int_eq(small[8], 'x');
    ca_quote("\r\r\r\r", 4, 100, small, 8);
    ck_assert_str_eq(small, "\\x0d...");
    ca_quote("abc", 3, 100, small, 1);
    ck_assert_str_eq(small, "");
    /* CA_QUOTE_BUF(max) is enough for any max bytes */
    char worst[CA_QUOTE_BUF(3)];
    ck_assert_str_eq(ca_quote("\x01\x02\x03", 3, 3, worst, sizeof worst), "\\x01\\x02\\x03");
    ck_assert_str_eq(ca_quote("\x01\x02\x03\x04", 4, 3, worst, sizeof worst), "\\x01\\x02\\x03...");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("quote");
    TCase *tc = tcase_create("quote");
    tcase_add_test(tc, plain_text_passes);
    tcase_add_test(tc, control_bytes_are_escaped);
    tcase_add_test(tc, long_values_are_cut);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
