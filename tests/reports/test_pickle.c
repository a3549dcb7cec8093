/* reports/pickle: what it writes loads in real Python as the structure that
 * was built, uses only opcodes MemoryViz.js knows, and bad nesting is an
 * error, never a malformed file. */
#include "helpers.h"

#include <stdint.h>

#include "reports/write/pickle.h"

/* Checker shared by the tests: loads argv[1], compares it with EXPECTED
 * (defined by each test's script), and checks the opcode stream. */
static const char *const CHECK_PRELUDE =
    "import math, pickle, pickletools, sys\n"
    "data = open(sys.argv[1], 'rb').read()\n"
    "# opcodes torch/utils/viz/MemoryViz.js unpickle() implements\n"
    "VIEWER = {'PROTO','APPEND','APPENDS','LIST','TUPLE','NEWFALSE','NEWTRUE','NONE',\n"
    "  'BINGET','BININT','BININT1','BININT2','EMPTY_DICT','EMPTY_LIST','FRAME','LONG1',\n"
    "  'LONG_BINGET','MARK','MEMOIZE','BINPUT','LONG_BINPUT','SETITEMS','SETITEM','DICT',\n"
    "  'SHORT_BINUNICODE','BINUNICODE','STOP','EMPTY_TUPLE','TUPLE1','TUPLE2','TUPLE3',\n"
    "  'BINFLOAT'}\n"
    "used = set()\n"
    "for op, arg, pos in pickletools.genops(data):\n"
    "    used.add(op.name)\n"
    "    if op.name == 'PROTO' and not 2 <= arg <= 4:\n"
    "        sys.exit('protocol %r outside 2..4' % arg)\n"
    "    if op.name == 'LONG1' and not -2**63 <= arg < 2**63:\n"
    "        sys.exit('LONG1 longer than 8 bytes at %d' % pos)\n"
    "    if op.name in ('APPENDS', 'SETITEMS'):\n"
    "        pass\n"
    "bad = used - VIEWER\n"
    "if bad: sys.exit('opcodes memory_viz cannot read: %s' % sorted(bad))\n"
    "got = pickle.loads(data)\n"
    "def same(a, b, path='root'):\n"
    "    if type(a) is not type(b): sys.exit('%s: type %s != %s (%r vs %r)' % (path, type(a), type(b), a, b))\n"
    "    if isinstance(a, dict):\n"
    "        if list(a.keys()) != list(b.keys()): sys.exit('%s: keys %r != %r' % (path, list(a)[:20], list(b)[:20]))\n"
    "        for k in a: same(a[k], b[k], path + '[%r]' % k)\n"
    "    elif isinstance(a, list):\n"
    "        if len(a) != len(b): sys.exit('%s: len %d != %d' % (path, len(a), len(b)))\n"
    "        for i, (x, y) in enumerate(zip(a, b)): same(x, y, path + '[%d]' % i)\n"
    "    elif isinstance(a, float) and math.isnan(a):\n"
    "        if not math.isnan(b): sys.exit('%s: nan != %r' % (path, b))\n"
    "    elif a != b: sys.exit('%s: %r != %r' % (path, a, b))\n";

static char *check_script(const char *expected_py)
{
    char *s;
    ck_assert(asprintf(&s, "%s%s\nsame(got, EXPECTED)\nprint('OK', sorted(used))\n", CHECK_PRELUDE,
                       expected_py) > 0);
    return s;
}

static void check_buffer(ca_pkl *p, const char *expected_py)
{
    ck_assert_msg(ca_pkl_error(p) == NULL, "writer error: %s", ca_pkl_error(p));
    size_t len;
    const unsigned char *d = ca_pkl_data(p, &len);
    const char *dir = scratch();
    char *file = path_in(dir, "out.pkl");
    write_file(file, d, len);
    char *script = check_script(expected_py);
    ck_python_ok(dir, script, file);
    free(script);
    free(file);
    scratch_cleanup();
}

START_TEST(scalars_and_nesting)
{
    ca_pkl *p = ca_pkl_new_buf();
    ck_assert(p);
    ck_assert_int_eq(ca_pkl_dict_begin(p), 0);
    ca_pkl_key(p, "ints");
    ca_pkl_list_begin(p);
    static const int64_t ints[] = {
        0, 1, 255, 256, 65535, 65536, -1, -255, -256, -65536, INT32_MAX, (int64_t)INT32_MAX + 1,
        INT32_MIN, (int64_t)INT32_MIN - 1, 0x7f1234567000LL, (1LL << 53) + 1, INT64_MAX, INT64_MIN,
        -(1LL << 40), 1LL << 55,
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        ck_assert_int_eq(ca_pkl_int(p, ints[i]), 0);
    ca_pkl_uint(p, UINT64_C(0x7fffffffffffffff));
    ca_pkl_uint(p, UINT64_C(0x00007f0000001000));
    ca_pkl_list_end(p);
    ca_pkl_kv_float(p, "pi", 3.141592653589793);
    ca_pkl_key(p, "floats");
    ca_pkl_list_begin(p);
    static const double fl[] = {0.0, -0.0, 0.1, -2.5e300, 5e-324, 1.0 / 0.0, -1.0 / 0.0};
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++)
        ca_pkl_float(p, fl[i]);
    ca_pkl_float(p, 0.0 / 0.0);
    ca_pkl_list_end(p);
    ca_pkl_kv_bool(p, "yes", 1);
    ca_pkl_kv_bool(p, "no", 0);
    ca_pkl_key(p, "nothing");
    ca_pkl_none(p);
    ca_pkl_kv_str(p, "null_str", NULL);
    ca_pkl_key(p, "unicode");
    ca_pkl_list_begin(p);
    ca_pkl_str(p, "h\xc3\xa9llo");                   /* héllo */
    ca_pkl_str(p, "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"); /* 日本語 */
    ca_pkl_str(p, "\xf0\x9f\x98\x80");               /* U+1F600 */
    ca_pkl_str(p, "bad\xff\xfe" "end");              /* invalid bytes */
    ca_pkl_str(p, "\xed\xa0\x80");                   /* a UTF-16 surrogate */
    ca_pkl_str(p, "\xc0\xaf");                       /* overlong '/' */
    ca_pkl_str(p, "\xe6\x97");                       /* truncated */
    ca_pkl_strn(p, "a\0b", 3);
    ca_pkl_str(p, "");
    ca_pkl_list_end(p);
    ca_pkl_key(p, "empty_list");
    ca_pkl_list_begin(p);
    ca_pkl_list_end(p);
    ca_pkl_key(p, "empty_dict");
    ca_pkl_dict_begin(p);
    ca_pkl_dict_end(p);
    ca_pkl_key(p, "nested");
    ca_pkl_list_begin(p);
    ca_pkl_list_begin(p);
    ca_pkl_dict_begin(p);
    ca_pkl_kv_int(p, "x", 1);
    ca_pkl_key(p, "y");
    ca_pkl_list_begin(p);
    ca_pkl_int(p, 2);
    ca_pkl_list_end(p);
    ca_pkl_dict_end(p);
    ca_pkl_list_end(p);
    ca_pkl_list_end(p);
    ck_assert_int_eq(ca_pkl_dict_end(p), 0);
    ck_assert_int_eq(ca_pkl_finish(p), 0);
    ck_assert_uint_eq(ca_pkl_js_inexact(p), 5); /* 2^53+1, INT64_MAX, INT64_MIN, 2^55, 0x7fff..ff */

    check_buffer(p,
        "EXPECTED = {\n"
        " 'ints': [0, 1, 255, 256, 65535, 65536, -1, -255, -256, -65536, 2**31-1, 2**31,\n"
        "          -2**31, -2**31-1, 0x7f1234567000, 2**53+1, 2**63-1, -2**63, -2**40, 2**55,\n"
        "          2**63-1, 0x7f0000001000],\n"
        " 'pi': 3.141592653589793,\n"
        " 'floats': [0.0, -0.0, 0.1, -2.5e300, 5e-324, float('inf'), float('-inf'), float('nan')],\n"
        " 'yes': True, 'no': False, 'nothing': None, 'null_str': None,\n"
        " 'unicode': ['h\\u00e9llo', '\\u65e5\\u672c\\u8a9e', '\\U0001F600', 'bad\\ufffd\\ufffdend',\n"
        "             '\\ufffd\\ufffd\\ufffd', '\\ufffd\\ufffd', '\\ufffd\\ufffd', 'a\\x00b', ''],\n"
        " 'empty_list': [], 'empty_dict': {},\n"
        " 'nested': [[{'x': 1, 'y': [2]}]],\n"
        "}\n"
        "import struct\n"
        "if struct.pack('>d', got['floats'][1]) != struct.pack('>d', -0.0): sys.exit('-0.0 lost its sign')\n");
    ca_pkl_free(p);
}
END_TEST

/* A pair of ints is a tuple in Python (PyTorch's segment_pool_id), in a
 * list, as a dict value, and across a batch boundary. */
START_TEST(int_pairs_are_tuples)
{
    ca_pkl *p = ca_pkl_new_buf();
    ca_pkl_dict_begin(p);
    ca_pkl_key(p, "segment_pool_id");
    ck_assert_int_eq(ca_pkl_int_pair(p, 0, 0), 0);
    ca_pkl_key(p, "pairs");
    ca_pkl_list_begin(p);
    for (int i = 0; i < 1001; i++)
        ck_assert_int_eq(ca_pkl_int_pair(p, i, -(int64_t)i * 100000), 0);
    ck_assert_int_eq(ca_pkl_int_pair(p, INT64_MIN, 0x7f0000001000LL), 0);
    ca_pkl_list_end(p);
    ca_pkl_dict_end(p);
    ck_assert_int_eq(ca_pkl_finish(p), 0);
    check_buffer(p,
        "EXPECTED = {'segment_pool_id': (0, 0),\n"
        "            'pairs': [(i, -i * 100000) for i in range(1001)] + [(-2**63, 0x7f0000001000)]}\n"
        "assert 'TUPLE2' in used, used\n");
    ca_pkl_free(p);
}
END_TEST

/* Past 1000 items a batch closes and a new MARK opens; past 256 memo
 * entries BINGET gives way to LONG_BINGET; past 255 bytes a string needs
 * BINUNICODE. */
START_TEST(batches_memo_and_long_strings)
{
    ca_pkl *p = ca_pkl_new_buf();
    ca_pkl_dict_begin(p);
    ca_pkl_key(p, "big_list");
    ca_pkl_list_begin(p);
    for (int i = 0; i < 2500; i++)
        ca_pkl_int(p, i * 1000003LL);
    ca_pkl_list_end(p);
    ca_pkl_key(p, "big_dict");
    ca_pkl_dict_begin(p);
    for (int i = 0; i < 1500; i++) {
        char k[32];
        snprintf(k, sizeof k, "key%04d", i);
        ca_pkl_kv_int(p, k, i);
    }
    ca_pkl_dict_end(p);
    ca_pkl_key(p, "repeats");
    ca_pkl_list_begin(p);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 400; i++) {
            char s[32];
            snprintf(s, sizeof s, "file_%d.py", i);
            ca_pkl_str(p, s);
        }
    ca_pkl_str(p, "key0001");   /* memoized early: a one-byte BINGET */
    ca_pkl_list_end(p);
    char lng[700];
    memset(lng, 'x', sizeof lng - 1);
    lng[sizeof lng - 1] = '\0';
    ca_pkl_key(p, "long");
    ca_pkl_list_begin(p);
    lng[255] = '\0';
    ca_pkl_str(p, lng);   /* 255: still SHORT_BINUNICODE */
    lng[255] = 'x';
    lng[256] = '\0';
    ca_pkl_str(p, lng);   /* 256: BINUNICODE */
    lng[256] = 'x';
    ca_pkl_str(p, lng);   /* 699 */
    lng[254] = '\xe9';    /* 254 bytes of text + a bad byte -> 257 bytes once cleaned */
    lng[255] = '\0';
    ca_pkl_str(p, lng);
    ca_pkl_list_end(p);
    ca_pkl_dict_end(p);
    ck_assert_int_eq(ca_pkl_finish(p), 0);

    check_buffer(p,
        "EXPECTED = {\n"
        " 'big_list': [i * 1000003 for i in range(2500)],\n"
        " 'big_dict': {'key%04d' % i: i for i in range(1500)},\n"
        " 'repeats': ['file_%d.py' % i for i in range(400)] * 3 + ['key0001'],\n"
        " 'long': ['x' * 255, 'x' * 256, 'x' * 699, 'x' * 254 + '\\ufffd'],\n"
        "}\n"
        "for need in ('LONG_BINGET', 'BINGET', 'MEMOIZE', 'BINUNICODE', 'SHORT_BINUNICODE'):\n"
        "    if need not in used: sys.exit(need + ' not exercised')\n"
        "marks = sum(1 for op, a, p in pickletools.genops(data) if op.name == 'MARK')\n"
        "if marks < 3 + 2 + 2: sys.exit('lists/dicts were not batched: %d MARKs' % marks)\n"
        "if len(data) > 120000: sys.exit('repeated strings not memoized: %d bytes' % len(data))\n");
    ca_pkl_free(p);
}
END_TEST

/* The snapshot shape of reports/SNAPSHOT.md, written through a FILE*
 * (crossing the 64 KiB flush threshold) and checked field by field. */
START_TEST(snapshot_shape_via_file)
{
    const char *dir = scratch();
    char *file = path_in(dir, "snap.pickle");
    FILE *f = fopen(file, "wb");
    ck_assert(f);
    ca_pkl *p = ca_pkl_new_file(f);
    ck_assert(p);
    ck_assert_ptr_null(ca_pkl_data(p, NULL));
    const uint64_t base = UINT64_C(0x7f3a00000000);
    ca_pkl_dict_begin(p);
    ca_pkl_key(p, "segments");
    ca_pkl_list_begin(p);
    ca_pkl_dict_begin(p);
    ca_pkl_kv_int(p, "device", 0);
    ca_pkl_kv_uint(p, "address", base);
    ca_pkl_kv_uint(p, "total_size", 4 << 20);
    ca_pkl_kv_int(p, "stream", 0);
    ca_pkl_kv_str(p, "segment_type", "large");
    ca_pkl_kv_uint(p, "allocated_size", 2 << 20);
    ca_pkl_kv_uint(p, "active_size", 3 << 20);
    ca_pkl_kv_uint(p, "requested_size", (2 << 20) - 100);
    ca_pkl_kv_bool(p, "is_expandable", 1);
    ca_pkl_key(p, "frames");
    ca_pkl_list_begin(p);
    ca_pkl_list_end(p);
    ca_pkl_key(p, "blocks");
    ca_pkl_list_begin(p);
    static const char *const states[] = {"active_allocated", "active_pending_free", "inactive"};
    for (int b = 0; b < 3; b++) {
        ca_pkl_dict_begin(p);
        ca_pkl_kv_uint(p, "address", base + (uint64_t)b * (1 << 20));
        ca_pkl_kv_uint(p, "size", b == 2 ? 2 << 20 : 1 << 20);
        ca_pkl_kv_uint(p, "requested_size", b == 2 ? 0 : (1 << 20) - 50 * (b == 0));
        ca_pkl_kv_str(p, "state", states[b]);
        ca_pkl_key(p, "frames");
        ca_pkl_list_begin(p);
        if (b == 0) {
            ca_pkl_dict_begin(p);
            ca_pkl_kv_str(p, "filename", "train.py");
            ca_pkl_kv_int(p, "line", 42);
            ca_pkl_kv_str(p, "name", "forward");
            ca_pkl_dict_end(p);
        }
        ca_pkl_list_end(p);
        ca_pkl_dict_end(p);
    }
    ca_pkl_list_end(p);
    ca_pkl_dict_end(p);
    ca_pkl_list_end(p);
    ca_pkl_key(p, "device_traces");
    ca_pkl_list_begin(p);
    ca_pkl_list_begin(p);
    for (int i = 0; i < 3000; i++) {   /* large enough to cross the flush size */
        ca_pkl_dict_begin(p);
        ca_pkl_kv_str(p, "action", i % 2 ? "free_completed" : "alloc");
        ca_pkl_kv_uint(p, "addr", base + (uint64_t)(i / 2) * 512);
        ca_pkl_kv_uint(p, "size", 512);
        ca_pkl_kv_int(p, "stream", 0);
        ca_pkl_kv_int(p, "time_us", 1700000000000000LL + i);
        ca_pkl_key(p, "frames");
        ca_pkl_list_begin(p);
        ca_pkl_dict_begin(p);
        ca_pkl_kv_str(p, "filename", "/home/user/project/model/layers/attention.py");
        ca_pkl_kv_int(p, "line", 100 + i % 7);
        ca_pkl_kv_str(p, "name", "scaled_dot_product");
        ca_pkl_dict_end(p);
        ca_pkl_list_end(p);
        ca_pkl_dict_end(p);
    }
    ca_pkl_dict_begin(p);
    ca_pkl_kv_str(p, "action", "oom");
    ca_pkl_kv_uint(p, "device_free", 1 << 20);
    ca_pkl_kv_uint(p, "size", 1ULL << 33);
    ca_pkl_kv_int(p, "stream", 0);
    ca_pkl_kv_int(p, "time_us", 1700000000009999LL);
    ca_pkl_key(p, "frames");
    ca_pkl_list_begin(p);
    ca_pkl_list_end(p);
    ca_pkl_dict_end(p);
    ca_pkl_list_end(p);
    ca_pkl_list_end(p);
    ca_pkl_key(p, "allocator_settings");
    ca_pkl_dict_begin(p);
    ca_pkl_kv_str(p, "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True");
    ca_pkl_kv_int(p, "max_split_size", -1);
    ca_pkl_kv_float(p, "garbage_collection_threshold", 0.0);
    ca_pkl_kv_bool(p, "expandable_segments", 1);
    ca_pkl_key(p, "roundup_power2_divisions");
    ca_pkl_dict_begin(p);
    ca_pkl_dict_end(p);
    ca_pkl_dict_end(p);
    ca_pkl_dict_end(p);
    ck_assert_int_eq(ca_pkl_finish(p), 0);
    ck_assert_int_eq(fclose(f), 0);
    ca_pkl_free(p);

    char *script = check_script(
        "s = got\n"
        "assert set(s) == {'segments', 'device_traces', 'allocator_settings'}, list(s)\n"
        "seg = s['segments'][0]\n"
        "assert seg['address'] == 0x7f3a00000000 and seg['device'] == 0, seg\n"
        "addr = seg['address']\n"
        "for b in seg['blocks']:\n"
        "    assert b['address'] == addr; addr += b['size']\n"
        "    assert b['state'] in ('active_allocated', 'active_pending_free', 'inactive')\n"
        "assert addr == seg['address'] + seg['total_size']\n"
        "assert seg['blocks'][0]['frames'] == [{'filename': 'train.py', 'line': 42, 'name': 'forward'}]\n"
        "tr = s['device_traces'][0]\n"
        "assert len(tr) == 3001 and tr[-1]['action'] == 'oom' and tr[-1]['size'] == 2**33\n"
        "assert tr[5]['frames'][0]['filename'].endswith('attention.py')\n"
        "assert s['allocator_settings']['expandable_segments'] is True\n"
        "EXPECTED = got\n");
    ck_python_ok(dir, script, file);
    free(script);
    free(file);
    scratch_cleanup();
}
END_TEST

static const char *buf_last_byte_is_stop(ca_pkl *p)
{
    size_t len;
    const unsigned char *d = ca_pkl_data(p, &len);
    return len && d[len - 1] == '.' ? "STOP" : "no STOP";
}

static void expect_error(ca_pkl *p, const char *fragment)
{
    const char *e = ca_pkl_error(p);
    ck_assert_msg(e != NULL, "expected an error containing '%s'", fragment);
    ck_assert_msg(strstr(e, fragment) != NULL, "error '%s' lacks '%s'", e, fragment);
    /* sticky: everything after fails, finish writes no STOP */
    ck_assert_int_eq(ca_pkl_int(p, 1), -1);
    ck_assert_int_eq(ca_pkl_finish(p), -1);
    ck_assert_str_eq(buf_last_byte_is_stop(p), "no STOP");
    ck_assert_str_eq(ca_pkl_error(p), e);
    ca_pkl_free(p);
}

START_TEST(nesting_errors)
{
    ca_pkl *p;

    p = ca_pkl_new_buf();
    ca_pkl_dict_begin(p);
    ck_assert_int_eq(ca_pkl_list_end(p), -1);
    expect_error(p, "list end inside a dict");

    p = ca_pkl_new_buf();
    ck_assert_int_eq(ca_pkl_dict_end(p), -1);
    expect_error(p, "without a begin");

    p = ca_pkl_new_buf();
    ca_pkl_list_begin(p);
    ca_pkl_dict_begin(p);
    ck_assert_int_eq(ca_pkl_finish(p), -1);
    expect_error(p, "2 container(s) still open");

    p = ca_pkl_new_buf();
    ca_pkl_dict_begin(p);
    ck_assert_int_eq(ca_pkl_int(p, 5), -1);
    expect_error(p, "value without a key");

    p = ca_pkl_new_buf();
    ca_pkl_dict_begin(p);
    ca_pkl_key(p, "a");
    ck_assert_int_eq(ca_pkl_key(p, "b"), -1);
    expect_error(p, "key where a value is due");

    p = ca_pkl_new_buf();
    ca_pkl_dict_begin(p);
    ca_pkl_key(p, "a");
    ck_assert_int_eq(ca_pkl_dict_end(p), -1);
    expect_error(p, "after a key with no value");

    p = ca_pkl_new_buf();
    ca_pkl_list_begin(p);
    ck_assert_int_eq(ca_pkl_key(p, "k"), -1);
    expect_error(p, "key inside a list");

    p = ca_pkl_new_buf();
    ck_assert_int_eq(ca_pkl_key(p, "k"), -1);
    expect_error(p, "key outside a dict");

    p = ca_pkl_new_buf();
    ca_pkl_int(p, 1);
    ck_assert_int_eq(ca_pkl_int(p, 2), -1);
    expect_error(p, "second top-level value");

    p = ca_pkl_new_buf();
    ck_assert_int_eq(ca_pkl_finish(p), -1);
    expect_error(p, "no value written");

    p = ca_pkl_new_buf();
    ca_pkl_list_begin(p);
    ck_assert_int_eq(ca_pkl_uint(p, UINT64_C(1) << 63), -1);
    expect_error(p, "memory_viz cannot read it");

    p = ca_pkl_new_buf();
    ca_pkl_list_begin(p);
    ck_assert_int_eq(ca_pkl_strn(p, NULL, 3), -1);
    expect_error(p, "NULL string");

    p = ca_pkl_new_buf();
    ca_pkl_int(p, 7);
    ck_assert_int_eq(ca_pkl_finish(p), 0);
    ck_assert_str_eq(buf_last_byte_is_stop(p), "STOP");
    ck_assert_int_eq(ca_pkl_int(p, 1), -1);
    ck_assert_ptr_nonnull(strstr(ca_pkl_error(p), "after finish"));
    ca_pkl_free(p);

    /* NULL writer: calls fail, nothing crashes */
    ck_assert_int_eq(ca_pkl_int(NULL, 1), -1);
    ck_assert_int_eq(ca_pkl_list_end(NULL), -1);
    ck_assert_int_eq(ca_pkl_finish(NULL), -1);
    ck_assert_ptr_nonnull(ca_pkl_error(NULL));
    ck_assert_ptr_null(ca_pkl_new_file(NULL));
    ca_pkl_free(NULL);
}
END_TEST

START_TEST(write_failure_is_reported)
{
    FILE *f = fopen("/dev/full", "wb");
    if (!f)
        return;   /* no /dev/full here: nothing to test */
    ca_pkl *p = ca_pkl_new_file(f);
    ca_pkl_list_begin(p);
    char s[200];
    int rc = 0;
    for (int i = 0; i < 5000 && rc == 0; i++) {
        snprintf(s, sizeof s, "%0150d", i);   /* distinct, so no memo hits */
        rc = ca_pkl_str(p, s);
    }
    if (rc == 0)
        ca_pkl_list_end(p), rc = ca_pkl_finish(p);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(ca_pkl_error(p), "write failed"));
    ca_pkl_free(p);
    fclose(f);
}
END_TEST

static Suite *pickle_suite(void)
{
    Suite *s = suite_create("pickle");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, scalars_and_nesting);
    tcase_add_test(tc, batches_memo_and_long_strings);
    tcase_add_test(tc, int_pairs_are_tuples);
    tcase_add_test(tc, snapshot_shape_via_file);
    tcase_add_test(tc, nesting_errors);
    tcase_add_test(tc, write_failure_is_reported);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(pickle_suite)
