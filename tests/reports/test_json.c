/* reports/json: output parses with Python's json module to the values
 * written, escaping covers every control character and bad UTF-8, doubles
 * round-trip, non-finite doubles become null, and misuse is an error. */
#include "helpers.h"

#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>

#include "reports/write/json.h"

static void check_json(const char *text, const char *expected_py)
{
    const char *dir = scratch();
    char *file = path_in(dir, "out.json");
    write_file(file, text, strlen(text));
    char *script;
    ck_assert(asprintf(&script,
                       "import json, math, subprocess, sys\n"
                       "raw = open(sys.argv[1], encoding='utf-8', errors='strict').read()\n"
                       "got = json.loads(raw)\n"
                       "r = subprocess.run([sys.executable, '-m', 'json.tool', sys.argv[1]], capture_output=True)\n"
                       "if r.returncode: sys.exit('json.tool: ' + r.stderr.decode())\n"
                       "%s\n"
                       "if got != EXPECTED: sys.exit('got %%r\\nexpected %%r' %% (got, EXPECTED))\n"
                       "print('OK')\n",
                       expected_py) > 0);
    ck_python_ok(dir, script, file);
    free(script);
    free(file);
    scratch_cleanup();
}

static void build_sample(ca_json *j)
{
    ca_json_obj_begin(j);
    ca_json_kv_str(j, "plain", "hello");
    ca_json_key(j, "escapes");
    ca_json_arr_begin(j);
    ca_json_str(j, "quote\" backslash\\ slash/");
    ca_json_str(j, "\b\f\n\r\t");
    char ctl[33];
    for (int i = 1; i < 32; i++)
        ctl[i - 1] = (char)i;
    ctl[31] = 0x7f;
    ctl[32] = '\0';
    ca_json_str(j, ctl);
    ca_json_strn(j, "nul\0inside", 10);
    ca_json_str(j, "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80");
    ca_json_str(j, "bad\xff\xc3(\xed\xa0\x80!");
    ca_json_str(j, "line\xe2\x80\xa8sep\xe2\x80\xa9par");
    ca_json_str(j, "</script>");
    ca_json_arr_end(j);
    ca_json_key(j, "ke\"y\n");
    ca_json_int(j, 1);
    ca_json_key(j, "ints");
    ca_json_arr_begin(j);
    ca_json_int(j, 0);
    ca_json_int(j, -1);
    ca_json_int(j, INT64_MIN);
    ca_json_int(j, INT64_MAX);
    ca_json_uint(j, UINT64_MAX);
    ca_json_uint(j, UINT64_C(0x7f1234567000));
    ca_json_arr_end(j);
    ca_json_key(j, "doubles");
    ca_json_arr_begin(j);
    ca_json_double(j, 0.1);
    ca_json_double(j, 1.0 / 3.0);
    ca_json_double(j, 1e300);
    ca_json_double(j, -2.5e-310);
    ca_json_double(j, DBL_MAX);
    ca_json_double(j, 5e-324);
    ca_json_double(j, 42.0);
    ca_json_double(j, -0.0);
    ca_json_double(j, 123456789012345678.0);
    ca_json_arr_end(j);
    ca_json_key(j, "nonfinite");
    ca_json_arr_begin(j);
    ca_json_double(j, NAN);
    ca_json_double(j, INFINITY);
    ca_json_double(j, -INFINITY);
    ca_json_arr_end(j);
    ca_json_kv_bool(j, "t", 1);
    ca_json_kv_bool(j, "f", 0);
    ca_json_key(j, "n");
    ca_json_null(j);
    ca_json_kv_str(j, "null_str", NULL);
    ca_json_key(j, "empty_obj");
    ca_json_obj_begin(j);
    ca_json_obj_end(j);
    ca_json_key(j, "empty_arr");
    ca_json_arr_begin(j);
    ca_json_arr_end(j);
    ca_json_key(j, "nested");
    ca_json_arr_begin(j);
    ca_json_obj_begin(j);
    ca_json_kv_int(j, "a", 1);
    ca_json_key(j, "b");
    ca_json_arr_begin(j);
    ca_json_arr_begin(j);
    ca_json_arr_end(j);
    ca_json_double(j, 2.5);
    ca_json_arr_end(j);
    ca_json_obj_end(j);
    ca_json_arr_end(j);
    ca_json_kv_double(j, "kvd", 0.5);
    ca_json_kv_uint(j, "kvu", 7);
    ca_json_obj_end(j);
}

static const char *const SAMPLE_PY =
    "EXPECTED = {\n"
    " 'plain': 'hello',\n"
    " 'escapes': ['quote\" backslash\\\\ slash/', '\\b\\f\\n\\r\\t',\n"
    "             ''.join(chr(i) for i in range(1, 32)) + '\\x7f', 'nul\\x00inside',\n"
    "             'h\\u00e9llo \\u20ac \\U0001F600', 'bad\\ufffd\\ufffd(\\ufffd\\ufffd\\ufffd!',\n"
    "             'line\\u2028sep\\u2029par', '</script>'],\n"
    " 'ke\"y\\n': 1,\n"
    " 'ints': [0, -1, -2**63, 2**63-1, 2**64-1, 0x7f1234567000],\n"
    " 'doubles': [0.1, 1/3, 1e300, -2.5e-310, 1.7976931348623157e308, 5e-324, 42.0, -0.0,\n"
    "             123456789012345678.0],\n"
    " 'nonfinite': [None, None, None],\n"
    " 't': True, 'f': False, 'n': None, 'null_str': None,\n"
    " 'empty_obj': {}, 'empty_arr': [], 'nested': [{'a': 1, 'b': [[], 2.5]}],\n"
    " 'kvd': 0.5, 'kvu': 7,\n"
    "}\n"
    "for x in got['doubles']:\n"
    "    if not isinstance(x, float): sys.exit('double written as int: %r' % x)\n"
    "if math.copysign(1, got['doubles'][7]) != -1: sys.exit('-0.0 lost its sign')\n"
    "if '\\\\u2028' not in raw: sys.exit('U+2028 not escaped')\n";

START_TEST(compact_round_trip)
{
    ca_json *j = ca_json_new_buf(0);
    build_sample(j);
    ck_assert_int_eq(ca_json_finish(j), 0);
    size_t len;
    const char *text = ca_json_data(j, &len);
    ck_assert_uint_eq(strlen(text), len);
    ck_assert_ptr_null(strchr(text, '\n') == text + len - 1 ? NULL : strchr(text, '\n'));
    ck_assert_ptr_nonnull(strstr(text, "\"plain\":\"hello\",\"escapes\":["));
    ck_assert_ptr_nonnull(strstr(text, "\\u001f"));
    ck_assert_ptr_nonnull(strstr(text, "\"nonfinite\":[null,null,null]"));
    ck_assert_ptr_nonnull(strstr(text, "42.0"));
    check_json(text, SAMPLE_PY);
    ca_json_free(j);
}
END_TEST

START_TEST(pretty_round_trip)
{
    ca_json *j = ca_json_new_buf(1);
    build_sample(j);
    ck_assert_int_eq(ca_json_finish(j), 0);
    const char *text = ca_json_data(j, NULL);
    ck_assert_ptr_nonnull(strstr(text, "{\n  \"plain\": \"hello\",\n  \"escapes\": [\n    \"quote"));
    ck_assert_ptr_nonnull(strstr(text, "\"empty_obj\": {},"));
    ck_assert_ptr_nonnull(strstr(text, "\"empty_arr\": [],"));
    check_json(text, SAMPLE_PY);
    ca_json_free(j);
}
END_TEST

/* A host program that switched to a decimal-comma locale must not turn
 * 0.5 into "0,5". */
START_TEST(locale_independent)
{
    static const char *const locales[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "ru_RU.UTF-8", NULL};
    const char *set = NULL;
    for (int i = 0; locales[i] && !set; i++)
        set = setlocale(LC_NUMERIC, locales[i]);
    const char *dir = NULL;
    if (!set && system("command -v localedef >/dev/null 2>&1") == 0) {
        /* Build one where the system has none installed. */
        dir = scratch();
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "localedef -i de_DE -f UTF-8 '%s/de_DE.UTF-8' >/dev/null 2>&1", dir);
        if (system(cmd) == 0) {
            setenv("LOCPATH", dir, 1);
            set = setlocale(LC_NUMERIC, "de_DE.UTF-8");
        }
    }
    if (set) {
        char probe[16];
        snprintf(probe, sizeof probe, "%.1f", 0.5);
        ck_assert_msg(strcmp(probe, "0,5") == 0, "locale %s gives %s", set, probe);
    }
    ca_json *j = ca_json_new_buf(0);
    ca_json_arr_begin(j);
    ca_json_double(j, 0.5);
    ca_json_double(j, 1234.25);
    ca_json_arr_end(j);
    ck_assert_int_eq(ca_json_finish(j), 0);
    ck_assert_str_eq(ca_json_data(j, NULL), "[0.5,1234.25]\n");
    ca_json_free(j);
    setlocale(LC_NUMERIC, "C");
    if (dir)
        scratch_cleanup();
    if (!set)
        fprintf(stderr, "note: no decimal-comma locale installed; checked in C locale only\n");
}
END_TEST

START_TEST(file_mode_large)
{
    const char *dir = scratch();
    char *file = path_in(dir, "big.json");
    FILE *f = fopen(file, "w");
    ca_json *j = ca_json_new_file(f, 1);
    ck_assert_ptr_null(ca_json_data(j, NULL));
    ca_json_arr_begin(j);
    for (int i = 0; i < 20000; i++) {
        ca_json_obj_begin(j);
        ca_json_kv_int(j, "i", i);
        ca_json_kv_str(j, "s", "text \"with\" escapes\n");
        ca_json_obj_end(j);
    }
    ca_json_arr_end(j);
    ck_assert_int_eq(ca_json_finish(j), 0);
    ck_assert_int_eq(fclose(f), 0);
    ca_json_free(j);
    ck_python_ok(dir,
                 "import json, sys\n"
                 "v = json.load(open(sys.argv[1]))\n"
                 "assert v == [{'i': i, 's': 'text \"with\" escapes\\n'} for i in range(20000)]\n"
                 "print('OK')\n",
                 file);
    free(file);
    scratch_cleanup();
}
END_TEST

static void expect_error(ca_json *j, const char *fragment)
{
    const char *e = ca_json_error(j);
    ck_assert_msg(e != NULL, "expected an error containing '%s'", fragment);
    ck_assert_msg(strstr(e, fragment) != NULL, "error '%s' lacks '%s'", e, fragment);
    ck_assert_int_eq(ca_json_null(j), -1);
    ck_assert_int_eq(ca_json_finish(j), -1);
    ca_json_free(j);
}

START_TEST(misuse_is_an_error)
{
    ca_json *j;

    j = ca_json_new_buf(0);
    ca_json_obj_begin(j);
    ck_assert_int_eq(ca_json_arr_end(j), -1);
    expect_error(j, "array end inside an object");

    j = ca_json_new_buf(0);
    ck_assert_int_eq(ca_json_obj_end(j), -1);
    expect_error(j, "without a begin");

    j = ca_json_new_buf(0);
    ca_json_obj_begin(j);
    ck_assert_int_eq(ca_json_int(j, 1), -1);
    expect_error(j, "value without a key");

    j = ca_json_new_buf(0);
    ca_json_obj_begin(j);
    ca_json_key(j, "a");
    ck_assert_int_eq(ca_json_key(j, "b"), -1);
    expect_error(j, "key where a value is due");

    j = ca_json_new_buf(0);
    ca_json_obj_begin(j);
    ca_json_key(j, "a");
    ck_assert_int_eq(ca_json_obj_end(j), -1);
    expect_error(j, "key with no value");

    j = ca_json_new_buf(0);
    ca_json_arr_begin(j);
    ck_assert_int_eq(ca_json_key(j, "a"), -1);
    expect_error(j, "key inside an array");

    j = ca_json_new_buf(0);
    ca_json_arr_begin(j);
    ck_assert_int_eq(ca_json_finish(j), -1);
    expect_error(j, "still open");

    j = ca_json_new_buf(0);
    ca_json_null(j);
    ck_assert_int_eq(ca_json_null(j), -1);
    expect_error(j, "second top-level value");

    j = ca_json_new_buf(0);
    ck_assert_int_eq(ca_json_finish(j), -1);
    expect_error(j, "no value written");

    ck_assert_int_eq(ca_json_null(NULL), -1);
    ck_assert_ptr_nonnull(ca_json_error(NULL));
    ca_json_free(NULL);
}
END_TEST

static Suite *json_suite(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, compact_round_trip);
    tcase_add_test(tc, pretty_round_trip);
    tcase_add_test(tc, locale_independent);
    tcase_add_test(tc, file_mode_large);
    tcase_add_test(tc, misuse_is_an_error);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(json_suite)
