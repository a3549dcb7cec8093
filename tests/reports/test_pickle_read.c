/* reports/pickle_read: what Python's pickler writes at protocols 2 to 5
 * reads back as the same values (compared through one canonical text made
 * by Python and by C), the memo shares values, and malformed or hostile
 * input is refused with its offset, never a crash. */
#include "helpers.h"

#include <stdint.h>

#include "reports/read/pickle_read.h"

/* ---- a canonical text of a value, the same as canon() in Python below ---- */

typedef struct text {
    char *p;
    size_t n, cap;
} text;

static void put(text *t, const char *s, size_t n) {
    if (t->n + n + 1 > t->cap) {
        t->cap = (t->n + n + 1) * 2;
        t->p = realloc(t->p, t->cap);
        ck_assert(t->p != NULL);
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = '\0';
}
static void puts_(text *t, const char *s) { put(t, s, strlen(s)); }

static void hex(text *t, const char *s, size_t n) {
    char b[3];
    for (size_t i = 0; i < n; i++) {
        snprintf(b, sizeof b, "%02x", (unsigned char)s[i]);
        put(t, b, 2);
    }
}

static void canon(text *t, const ca_val *v, int depth) {
    char b[64];
    ck_assert_msg(depth < 100, "value nested deeper than any test builds");
    switch (v->kind) {
    case CA_VAL_NONE: puts_(t, "None"); break;
    case CA_VAL_BOOL: puts_(t, v->b ? "True" : "False"); break;
    case CA_VAL_INT: snprintf(b, sizeof b, "%lld", (long long)v->i); puts_(t, b); break;
    case CA_VAL_BIGINT: puts_(t, v->big_negative ? "big-" : "big+"); break;
    case CA_VAL_FLOAT: snprintf(b, sizeof b, "%.17g", v->f); puts_(t, b); break;
    case CA_VAL_STR: puts_(t, "s:"); hex(t, v->s.p, v->s.len); break;
    case CA_VAL_BYTES: puts_(t, "b:"); hex(t, v->s.p, v->s.len); break;
    case CA_VAL_LIST:
    case CA_VAL_TUPLE:
    case CA_VAL_SET:
        puts_(t, v->kind == CA_VAL_LIST ? "[" : v->kind == CA_VAL_TUPLE ? "(" : "<");
        for (size_t i = 0; i < ca_val_len(v); i++) {
            if (i) puts_(t, ",");
            canon(t, ca_val_item(v, i), depth + 1);
        }
        puts_(t, v->kind == CA_VAL_LIST ? "]" : v->kind == CA_VAL_TUPLE ? ")" : ">");
        break;
    case CA_VAL_DICT:
        puts_(t, "{");
        for (size_t i = 0; i < ca_val_len(v); i++) {
            if (i) puts_(t, ",");
            canon(t, ca_val_key_at(v, i), depth + 1);
            puts_(t, ":");
            canon(t, ca_val_value_at(v, i), depth + 1);
        }
        puts_(t, "}");
        break;
    }
}

static const char *PY_CANON =
    "import pickle, sys\n"
    "def canon(v):\n"
    "    if v is None: return 'None'\n"
    "    if v is True: return 'True'\n"
    "    if v is False: return 'False'\n"
    "    if isinstance(v, int): return str(v) if -2**63 <= v < 2**63 else ('big-' if v < 0 else 'big+')\n"
    "    if isinstance(v, float): return '%.17g' % v\n"
    "    if isinstance(v, str): return 's:' + v.encode('utf-8', 'surrogatepass').hex()\n"
    "    if isinstance(v, (bytes, bytearray)): return 'b:' + bytes(v).hex()\n"
    "    if isinstance(v, list): return '[' + ','.join(canon(x) for x in v) + ']'\n"
    "    if isinstance(v, tuple): return '(' + ','.join(canon(x) for x in v) + ')'\n"
    "    if isinstance(v, (set, frozenset)): return '<' + ','.join(canon(x) for x in v) + '>'\n"
    "    if isinstance(v, dict): return '{' + ','.join(canon(k) + ':' + canon(x) for k, x in v.items()) + '}'\n"
    "    raise TypeError(type(v))\n"
    "shared = [1, 'shared', (2, 3)]\n"
    "OBJ = {\n"
    "  'none': None, 'true': True, 'false': False,\n"
    "  'ints': [0, 1, 255, 256, 65535, 65536, -1, -129, 2**31 - 1, -2**31, 2**31, 2**32, 2**53 + 1,\n"
    "           2**63 - 1, -2**63, 2**63, 2**64, -2**63 - 1, 10**40, -10**40],\n"
    "  'floats': [0.0, -0.0, 1.5, -2.25e-300, 1e308, 3.141592653589793, float('inf'), -float('inf')],\n"
    "  'strs': ['', 'a', 'caf\\u00e9', '\\u6f22\\u5b57', '\\U0001F600', 'x' * 300, 'nul\\x00inside'],\n"
    "  'bytes': [b'', b'\\x00\\xff', b'y' * 300],\n"
    "  'tuples': [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), ((),)],\n"

    "  'nested': {'a': shared, 'b': shared, 'c': [shared, {'d': shared}]},\n"
    "  'long_list': list(range(2500)),\n"
    "  'big_dict': {str(i): i for i in range(1200)},\n"
    "  (1, 'tuple key'): 'x', 5: 'int key',\n"
    "}\n"
    "# protocol 2 writes bytes, and 2 and 3 write sets, through a GLOBAL and REDUCE (refused);\n"
    "# bytearray is plain data only at protocol 5\n"
    "def obj(proto):\n"
    "    o = dict(OBJ)\n"
    "    if proto < 3: del o['bytes']\n"
    "    if proto >= 4: o['sets'] = [set(), {7}, frozenset({'f'})]\n"
    "    if proto >= 5: o['bytearray'] = bytearray(b'ba')\n"
    "    return o\n";

/* Writes OBJ at `proto` to DIR/p<proto>.pkl and its canonical text to
 * DIR/p<proto>.txt. */
static void python_pickle(const char *dir, int proto) {
    char *script;
    ck_assert(asprintf(&script,
                       "%s"
                       "d = sys.argv[1]\n"
                       "open(d + '/p%d.pkl', 'wb').write(pickle.dumps(obj(%d), protocol=%d))\n"
                       "open(d + '/p%d.txt', 'w').write(canon(obj(%d)))\n"
                       "print('OK')\n",
                       PY_CANON, proto, proto, proto, proto, proto) > 0);
    ck_python_ok(dir, script, dir);
    free(script);
}

static ca_doc *read_path(const char *path, char *err, size_t errlen) {
    size_t len;
    char *buf = read_file(path, &len);
    ca_doc *d = ca_unpickle(buf, len, err, errlen);
    free(buf);
    return d;
}

/* A stream handing out at most `piece` bytes a call, counting what it gave. */
typedef struct dribble {
    const char *p;
    size_t len, at, piece;
} dribble;

static long dribble_read(void *ctx, unsigned char *dst, size_t n) {
    dribble *d = ctx;
    size_t k = d->len - d->at < n ? d->len - d->at : n;
    if (k > d->piece) k = d->piece; /* fewer than asked: the reader must ask again */
    memcpy(dst, d->p + d->at, k);
    d->at += k;
    return (long)k;
}

static const char *dribble_error(void *ctx) { return "never"; }

static ca_doc *read_stream(dribble *src, char *err, size_t errlen) {
    return ca_unpickle_stream(&(ca_pickle_source){dribble_read, dribble_error, src}, err, errlen);
}

START_TEST(python_protocols) {
    const char *dir = scratch();
    int proto = _i; /* 2..5 */
    python_pickle(dir, proto);
    char pkl[4200], txt[4200], err[256];
    snprintf(pkl, sizeof pkl, "%s/p%d.pkl", dir, proto);
    snprintf(txt, sizeof txt, "%s/p%d.txt", dir, proto);
    ca_doc *d = read_path(pkl, err, sizeof err);
    ck_assert_msg(d != NULL, "protocol %d: %s", proto, err);
    text t = {0};
    canon(&t, ca_doc_root(d), 0);
    char *want = read_file(txt, NULL);
    ck_assert_msg(!strcmp(t.p, want), "protocol %d differs:\n C: %.300s\nPy: %.300s", proto, t.p, want);
    /* The same read as a stream, a few bytes at a time. */
    size_t len;
    char *bytes = read_file(pkl, &len);
    dribble src = {bytes, len, 0, 3};
    ca_doc *streamed = read_stream(&src, err, sizeof err);
    ck_assert_msg(streamed != NULL, "protocol %d as a stream: %s", proto, err);
    text ts = {0};
    canon(&ts, ca_doc_root(streamed), 0);
    ck_assert_msg(!strcmp(ts.p, want), "protocol %d as a stream differs:\n C: %.300s\nPy: %.300s", proto, ts.p, want);
    free(ts.p);
    ca_doc_free(streamed);
    free(bytes);
    /* The memo hands out the very same list. */
    const ca_val *nested = ca_val_get(ca_doc_root(d), "nested");
    ck_assert_ptr_nonnull(ca_val_get(nested, "a"));
    ck_assert_ptr_eq(ca_val_get(nested, "a"), ca_val_get(nested, "b"));
    free(t.p);
    free(want);
    ca_doc_free(d);
    scratch_cleanup();
}
END_TEST

/* Every proper prefix of a real pickle is refused, with a message. */
START_TEST(truncated_prefixes) {
    const char *dir = scratch();
    python_pickle(dir, 4);
    char pkl[4200], err[256];
    snprintf(pkl, sizeof pkl, "%s/p4.pkl", dir);
    size_t len;
    char *buf = read_file(pkl, &len);
    for (size_t n = 0; n < len; n++) {
        char *copy = malloc(n ? n : 1); /* exactly n bytes: ASan sees any read past them */
        memcpy(copy, buf, n);
        ca_doc *d = ca_unpickle(copy, n, err, sizeof err);
        ck_assert_msg(d == NULL, "a prefix of %zu of %zu bytes was accepted", n, len);
        ck_assert_msg(err[0] != '\0', "no message for a prefix of %zu bytes", n);
        dribble src = {copy, n, 0, 5};
        ck_assert_msg(read_stream(&src, err, sizeof err) == NULL && err[0], "streamed prefix of %zu bytes", n);
        free(copy);
    }
    free(buf);
    scratch_cleanup();
}
END_TEST

static ca_doc *read_bytes(const char *b, size_t n, char *err, size_t errlen) {
    char *copy = malloc(n ? n : 1);
    memcpy(copy, b, n);
    ca_doc *d = ca_unpickle(copy, n, err, errlen);
    free(copy);
    return d;
}
#define READ(lit, err) read_bytes((lit), sizeof(lit) - 1, (err), sizeof(err))

/* Opcodes Python's pickler rarely writes today but other picklers (and
 * older versions) do: BINPUT/LONG_BINPUT with explicit slots, DICT, LIST,
 * TUPLE with MARK, DUP, POP, POP_MARK, FRAME, LONG4, BYTEARRAY8. */
START_TEST(explicit_opcodes) {
    char err[256];
    text t = {0};
    /* {'k': [1, 1], 'm': (2, 'k')} built with MARK ... DICT, BINPUT 5 and BINGET 5 */
    static const char a[] = "\x80\x02(X\x01\x00\x00\x00kq\x05(K\x01\x32l" /* MARK 'k' PUT5 MARK 1 DUP LIST */
                            "X\x01\x00\x00\x00m(K\x02h\x05tdh\x05\x30.";    /* 'm' MARK 2 GET5 TUPLE DICT GET5 POP STOP */
    ca_doc *d = READ(a, err);
    ck_assert_msg(d != NULL, "%s", err);
    canon(&t, ca_doc_root(d), 0);
    ck_assert_str_eq(t.p, "{s:6b:[1,1],s:6d:(2,s:6b)}");
    ca_doc_free(d);
    /* POP_MARK drops what follows the MARK; LONG_BINPUT / LONG_BINGET; FRAME; LONG4; BYTEARRAY8 */
    static const char b[] = "\x80\x05\x95\x20\x00\x00\x00\x00\x00\x00\x00"
                            "](K\x07K\x08\x31\x8b\x02\x00\x00\x00\xff\x7fr\x28\x00\x00\x00"
                            "aj\x28\x00\x00\x00" "a\x96\x01\x00\x00\x00\x00\x00\x00\x00za.";
    t.n = 0;
    d = READ(b, err);
    ck_assert_msg(d != NULL, "%s", err);
    canon(&t, ca_doc_root(d), 0);
    ck_assert_str_eq(t.p, "[32767,32767,b:7a]");
    ca_doc_free(d);
    free(t.p);
}
END_TEST

/* A list holding itself: read, and freed once. */
START_TEST(cycle) {
    char err[256];
    static const char a[] = "\x80\x04]\x94(h\x00h\x00\x65."; /* EMPTY_LIST MEMOIZE MARK GET0 GET0 APPENDS STOP */
    ca_doc *d = READ(a, err);
    ck_assert_msg(d != NULL, "%s", err);
    const ca_val *r = ca_doc_root(d);
    ck_assert_uint_eq(ca_val_len(r), 2);
    ck_assert_ptr_eq(ca_val_item(r, 0), r);
    ca_doc_free(d);
}
END_TEST

static const struct {
    const char *name, *bytes;
    size_t len;
    const char *msg;
} BAD[] = {
#define B(name, lit, msg) {name, lit, sizeof(lit) - 1, msg}
    B("empty", "", "empty"),
    B("protocol 0 text", "(dp0\n.", "offset 0: byte 0x28: not a pickle of protocol 2 or later"),
    B("json", "{\"a\": 1}", "not a pickle"),
    B("protocol 6", "\x80\x06N.", "offset 0: PROTO: protocol 6"),
    B("GLOBAL", "\x80\x02\x63os\nsystem\n.", "offset 2: GLOBAL: refused"),
    B("STACK_GLOBAL", "\x80\x04\x8c\x02os\x8c\x06system\x93.", "STACK_GLOBAL: refused"),
    B("REDUCE", "\x80\x02N)R.", "offset 4: REDUCE: refused"),
    B("BUILD", "\x80\x02}}b.", "BUILD: refused"),
    B("NEWOBJ", "\x80\x02N)\x81.", "NEWOBJ: refused"),
    B("PERSID", "\x80\x02Pid\n.", "PERSID: refused"),
    B("NEXT_BUFFER", "\x80\x05\x97.", "NEXT_BUFFER: refused"),
    B("text INT", "\x80\x02I1\n.", "INT: not read"),
    B("SHORT_BINSTRING", "\x80\x02U\x01" "a.", "SHORT_BINSTRING: not read"),
    B("unknown opcode", "\x80\x02\xff.", "unknown opcode 0xff"),
    B("no STOP", "\x80\x02N", "truncated: the input ends before STOP"),
    B("string past the end", "\x80\x02X\xff\x00\x00\x00" "ab.", "BINUNICODE: truncated: needs 255 bytes"),
    B("huge BINUNICODE8", "\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff.", "longer than any string a snapshot holds"),
    B("17 MiB BINUNICODE", "\x80\x04X\x00\x00\x10\x01.", "BINUNICODE: 17825792 bytes: longer than any string"),
    B("huge FRAME", "\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\x7fN.", "FRAME: truncated: a frame of"),
    B("negative LONG4", "\x80\x02\x8b\xff\xff\xff\xff.", "LONG4: negative length"),
    B("two values at STOP", "\x80\x02NN.", "2 values left on the stack"),
    B("nothing at STOP", "\x80\x02.", "0 values left"),
    B("open MARK at STOP", "\x80\x02(N.", "a MARK is still open"),
    B("bytes after STOP", "\x80\x02N.N", "1 bytes after STOP"),
    B("APPEND to a dict", "\x80\x02}Na.", "APPEND: appends to a dict, not a list"),
    B("APPEND on empty", "\x80\x02" "a.", "APPEND: stack underflow"),
    B("APPEND across MARK", "\x80\x02](Na.", "stack underflow: needs 2 values above the MARK"),
    B("SETITEM on a list", "\x80\x02]NNs.", "SETITEM: sets an item of a list, not a dict"),
    B("SETITEMS odd", "\x80\x02}(Nu.", "odd number of values"),
    B("SETITEMS no MARK", "\x80\x02}NNu.", "SETITEMS: no MARK"),
    B("unhashable key", "\x80\x02}]Ns.", "a list cannot be a dict key"),
    B("TUPLE2 short", "\x80\x02N\x86.", "TUPLE2: stack underflow"),
    B("memo never stored", "\x80\x02h\x03.", "BINGET: memo entry 3 was never stored"),
    B("memo index too large", "\x80\x02Nr\xff\xff\xff\x7f.", "LONG_BINPUT: memo index 2147483647 out of range"),
    B("MEMOIZE on empty", "\x80\x04\x94.", "MEMOIZE: stack underflow"),
    B("POP_MARK without MARK", "\x80\x02N1.", "POP_MARK: no MARK"),
    B("ADDITEMS to a list", "\x80\x04](N\x90.", "ADDITEMS: adds to a list, not a set"),
#undef B
};

START_TEST(malformed) {
    char err[256];
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        ca_doc *d = read_bytes(BAD[i].bytes, BAD[i].len, err, sizeof err);
        ck_assert_msg(d == NULL, "%s: accepted", BAD[i].name);
        ck_assert_msg(strstr(err, BAD[i].msg) != NULL, "%s: message '%s' lacks '%s'", BAD[i].name, err, BAD[i].msg);
        ck_assert_msg(!strchr(err, '\n'), "%s: message spans lines", BAD[i].name);
    }
    /* a tiny err buffer is still terminated */
    char small[8];
    ck_assert_ptr_null(read_bytes("\x80\x02\x63", 3, small, sizeof small));
    ck_assert_uint_lt(strlen(small), sizeof small);
}
END_TEST

/* A stream is refused at its first bad byte, never read to its end (issue
 * 30: a gzip of zeros was inflated whole first), and a stream's failure is
 * told as it is. */
START_TEST(stream_refused_early) {
    static char zeros[1 << 20];
    char err[256];
    dribble src = {zeros, sizeof zeros, 0, 4096};
    ck_assert_ptr_null(read_stream(&src, err, sizeof err));
    ck_assert_msg(strstr(err, "offset 0: byte 0x00: not a pickle"), "%s", err);
    ck_assert_uint_le(src.at, 65536); /* one piece read, no more */
    memcpy(zeros, "\x80\x04}", 3); /* a pickle's start, then zeros: opcode 0x00 */
    src = (dribble){zeros, sizeof zeros, 0, 4096};
    ck_assert_ptr_null(read_stream(&src, err, sizeof err));
    ck_assert_msg(strstr(err, "offset 3: unknown opcode 0x00"), "%s", err);
    ck_assert_uint_le(src.at, 65536);
    memcpy(zeros, "\x80\x04}\x8d\x00\x00\x00\x00\x01\x00\x00\x00", 12); /* a string of 4 GiB */
    src = (dribble){zeros, sizeof zeros, 0, 4096};
    ck_assert_ptr_null(read_stream(&src, err, sizeof err));
    ck_assert_msg(strstr(err, "offset 3: BINUNICODE8: 4294967296 bytes: longer than any string"), "%s", err);
    ck_assert_uint_le(src.at, 65536);
    memset(zeros, 0, 12);
}
END_TEST

static long broken_read(void *ctx, unsigned char *dst, size_t n) {
    if (n) dst[0] = 0x80;
    return *(int *)ctx ? -1 : (*(int *)ctx = 1, 1);
}
static const char *broken_error(void *ctx) { return "gzip: the compressed data is cut short (truncated)"; }

START_TEST(stream_failure_told) {
    int calls = 0;
    char err[256];
    ck_assert_ptr_null(ca_unpickle_stream(&(ca_pickle_source){broken_read, broken_error, &calls}, err, sizeof err));
    ck_assert_str_eq(err, "gzip: the compressed data is cut short (truncated)");
}
END_TEST

/* Random damage to a real pickle: accepted or refused, never a crash
 * (the sanitizer build checks every read). */
START_TEST(mutations) {
    const char *dir = scratch();
    python_pickle(dir, 4);
    char pkl[4200], err[256];
    snprintf(pkl, sizeof pkl, "%s/p4.pkl", dir);
    size_t len;
    char *buf = read_file(pkl, &len);
    uint64_t x = 88172645463325252ull;
    size_t accepted = 0;
    for (int round = 0; round < 3000; round++) {
        char *m = malloc(len);
        memcpy(m, buf, len);
        for (int k = 0; k < 1 + round % 4; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            m[x % len] = (char)(x >> 32);
        }
        ca_doc *d = ca_unpickle(m, len, err, sizeof err);
        if (d) accepted++;
        else ck_assert(err[0] != '\0');
        ca_doc_free(d);
        free(m);
    }
    ck_assert_uint_lt(accepted, 3000); /* the damage is noticed at least sometimes */
    free(buf);
    scratch_cleanup();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("pickle_read");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, python_protocols, 2, 6);
    tcase_add_test(tc, truncated_prefixes);
    tcase_add_test(tc, explicit_opcodes);
    tcase_add_test(tc, cycle);
    tcase_add_test(tc, malformed);
    tcase_add_test(tc, mutations);
    tcase_add_test(tc, stream_refused_early);
    tcase_add_test(tc, stream_failure_told);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)
