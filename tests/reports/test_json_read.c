/* reports/json_read: RFC 8259 documents read back exactly (what
 * reports/json writes among them), and everything else refused with the line
 * and column, never a crash. */
#include "helpers.h"

#include <math.h>
#include <stdint.h>

#include "reports/write/json.h"
#include "reports/read/json_read.h"

static ca_doc *parse(const char *s, char *err, size_t errlen) {
    size_t n = strlen(s);
    char *copy = malloc(n ? n : 1); /* no terminator: a read past the end shows under ASan */
    memcpy(copy, s, n);
    ca_doc *d = ca_json_parse(copy, n, err, errlen);
    free(copy);
    return d;
}

START_TEST(values) {
    char err[256];
    ca_doc *d = parse(" {\"a\": [1, -2, 0, 9223372036854775807, -9223372036854775808, 9223372036854775808,"
                      " 1.5, -0.25e2, 1E3, true, false, null],\n \"s\": \"q\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\xe6\xbc\xa2\","
                      " \"e\": {}, \"l\": [], \"a\": \"last\"} ",
                      err, sizeof err);
    ck_assert_msg(d != NULL, "%s", err);
    const ca_val *r = ca_doc_root(d);
    ck_assert_str_eq(ca_val_str(ca_val_get(r, "a")), "last"); /* a repeated key: the last one */
    const ca_val *a = ca_val_value_at(r, 0);
    ck_assert_uint_eq(ca_val_len(a), 12);
    int64_t i;
    double f;
    int b;
    ck_assert(ca_val_int(ca_val_item(a, 0), &i) && i == 1);
    ck_assert(ca_val_int(ca_val_item(a, 1), &i) && i == -2);
    ck_assert(ca_val_int(ca_val_item(a, 3), &i) && i == INT64_MAX);
    ck_assert(ca_val_int(ca_val_item(a, 4), &i) && i == INT64_MIN);
    ck_assert_int_eq(ca_val_item(a, 5)->kind, CA_VAL_FLOAT); /* beyond int64: a float */
    ck_assert(ca_val_num(ca_val_item(a, 5), &f) && f == 9223372036854775808.0);
    ck_assert(ca_val_num(ca_val_item(a, 6), &f) && f == 1.5);
    ck_assert(ca_val_num(ca_val_item(a, 7), &f) && f == -25.0);
    ck_assert(ca_val_num(ca_val_item(a, 8), &f) && f == 1000.0 && ca_val_item(a, 8)->kind == CA_VAL_FLOAT);
    ck_assert(ca_val_bool(ca_val_item(a, 9), &b) && b == 1);
    ck_assert(ca_val_bool(ca_val_item(a, 10), &b) && b == 0);
    ck_assert_int_eq(ca_val_item(a, 11)->kind, CA_VAL_NONE);
    ck_assert_str_eq(ca_val_str(ca_val_get(r, "s")), "q\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80\xe6\xbc\xa2");
    ck_assert_int_eq(ca_val_get(r, "e")->kind, CA_VAL_DICT);
    ck_assert_uint_eq(ca_val_len(ca_val_get(r, "l")), 0);
    ca_doc_free(d);
    /* a bare scalar is a document too; \u0000 is kept */
    d = parse("\"a\\u0000b\"", err, sizeof err);
    ck_assert_msg(d != NULL, "%s", err);
    ck_assert_uint_eq(ca_doc_root(d)->s.len, 3);
    ca_doc_free(d);
}
END_TEST

/* What reports/json writes reads back as written. */
START_TEST(round_trip_with_writer) {
    ca_json *j = ca_json_new_buf(1);
    ca_json_obj_begin(j);
    ca_json_kv_str(j, "text", "tab\there \xe2\x80\xa8 line sep, bad \xff byte");
    ca_json_kv_int(j, "neg", -42);
    ca_json_kv_uint(j, "big", UINT64_C(1) << 62);
    ca_json_kv_double(j, "third", 1.0 / 3.0);
    ca_json_kv_double(j, "nan", NAN);
    ca_json_key(j, "list");
    ca_json_arr_begin(j);
    for (int i = 0; i < 100; i++) ca_json_int(j, i);
    ca_json_arr_end(j);
    ca_json_obj_end(j);
    ck_assert_int_eq(ca_json_finish(j), 0);
    size_t len;
    const char *text = ca_json_data(j, &len);
    char err[256];
    ca_doc *d = ca_json_parse(text, len, err, sizeof err);
    ck_assert_msg(d != NULL, "%s in:\n%s", err, text);
    const ca_val *r = ca_doc_root(d);
    ck_assert_str_eq(ca_val_str(ca_val_get(r, "text")), "tab\there \xe2\x80\xa8 line sep, bad \xef\xbf\xbd byte");
    int64_t i;
    double f;
    ck_assert(ca_val_int(ca_val_get(r, "neg"), &i) && i == -42);
    ck_assert(ca_val_int(ca_val_get(r, "big"), &i) && i == INT64_C(1) << 62);
    ck_assert(ca_val_num(ca_val_get(r, "third"), &f) && f == 1.0 / 3.0);
    ck_assert_int_eq(ca_val_get(r, "nan")->kind, CA_VAL_NONE);
    ck_assert_uint_eq(ca_val_len(ca_val_get(r, "list")), 100);
    ca_doc_free(d);
    ca_json_free(j);
}
END_TEST

static const struct {
    const char *text, *msg;
} BAD[] = {
    {"", "line 1, column 1: expected a value, found the end of the input"},
    {"   ", "expected a value"},
    {"{", "line 1, column 2: expected a key string, found the end of the input"},
    {"[1,]", "line 1, column 4: expected a value, found ']'"},
    {"{\"a\":1,}", "expected a key string, found '}'"},
    {"{'a': 1}", "expected a key string, found '''"},
    {"{\"a\" 1}", "expected ':' after a key, found '1'"},
    {"[1 2]", "expected ',' or ']', found '2'"},
    {"[1]\n[2]", "line 2, column 1: '[' after the value"},
    {"01", "leading zero"},
    {"-", "expected a digit, found the end of the input"},
    {"1.", "expected a digit after '.'"},
    {"1e+", "expected a digit in the exponent"},
    {"NaN", "expected a value, found 'N'"},
    {"nul", "expected a value, found 'n'"},
    {"truex", "'x' after the value"},
    {"\"abc", "unterminated string"},
    {"\"a\tb\"", "raw control character 0x09"},
    {"\"\\x\"", "unknown escape \\'x'"},
    {"\"\\u12\"", "\\u needs four hex digits"},
    {"\"\\ud800\"", "high surrogate \\uD800 without its low half"},
    {"\"\\udc00\"", "lone low surrogate \\uDC00"},
    {"\"\xff\"", "invalid UTF-8 in a string"},
    {"\"\xc0\xaf\"", "invalid UTF-8"},
    {"// c\n1", "expected a value, found '/'"},
    {"\xef\xbb\xbf{}", "expected a value, found byte 0xef"},
};

START_TEST(malformed) {
    char err[256];
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        ca_doc *d = parse(BAD[i].text, err, sizeof err);
        ck_assert_msg(d == NULL, "accepted: %s", BAD[i].text);
        ck_assert_msg(strstr(err, BAD[i].msg) != NULL, "'%s': message '%s' lacks '%s'", BAD[i].text, err, BAD[i].msg);
    }
}
END_TEST

START_TEST(depth_limit) {
    char err[256];
    size_t n = CA_JSON_MAX_DEPTH;
    char *ok = malloc(2 * n + 1), *deep = malloc(2 * n + 3);
    for (size_t i = 0; i < n; i++) ok[i] = '[', ok[n + i] = ']';
    ok[2 * n] = '\0';
    ca_doc *d = parse(ok, err, sizeof err);
    ck_assert_msg(d != NULL, "%zu levels: %s", n, err);
    ca_doc_free(d);
    for (size_t i = 0; i <= n; i++) deep[i] = '[', deep[n + 1 + i] = ']';
    deep[2 * n + 2] = '\0';
    ck_assert_ptr_null(parse(deep, err, sizeof err));
    ck_assert_msg(strstr(err, "nested deeper than 256") != NULL, "%s", err);
    free(ok);
    free(deep);
    /* a million opening brackets: refused at the limit, no stack overflow */
    char *many = malloc(1000001);
    memset(many, '[', 1000000);
    many[1000000] = '\0';
    ck_assert_ptr_null(parse(many, err, sizeof err));
    free(many);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("json_read");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, values);
    tcase_add_test(tc, round_trip_with_writer);
    tcase_add_test(tc, malformed);
    tcase_add_test(tc, depth_limit);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)
