/* The pickle reader: a stack machine over the opcodes of plain data; see
 * pickle_read.h. Python's pickle.py (_Unpickler) is the reference for what
 * each opcode does; the stack above the last MARK is all an opcode may
 * touch, as there (its metastack). */
#include "reports/read/pickle_read.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A snapshot's strings are names, paths and settings: a longer one is no
 * snapshot's, and refused at its length, before its bytes are read. */
#define MAX_STRING ((uint64_t)16 << 20)
#define PIECE ((size_t)64 << 10) /* what a stream's window is refilled by */

typedef struct rd {
    const unsigned char *p; /* the input, or a window on a stream: */
    size_t len, pos, op_at; /* op_at: offset of the opcode being read, from the input's start */
    const ca_pickle_source *src; /* the stream; NULL: p[0..len) is all of it */
    unsigned char *win;     /* its window: p = win, bytes [base, base + len) of the stream */
    size_t base, win_cap;
    unsigned char op;
    ca_doc *doc;
    ca_val **stack;
    size_t n, cap;
    size_t *marks;
    size_t n_marks, cap_marks;
    ca_val **memo;
    size_t memo_cap, memo_count; /* slots allocated; slots set (Python's len(memo)) */
    char *err;
    size_t errlen;
    int failed;
} rd;

static const char *op_name(unsigned char op) {
    static const struct {
        unsigned char code;
        const char *name;
    } names[] = {
        {'I', "INT"}, {'J', "BININT"}, {'K', "BININT1"}, {'M', "BININT2"}, {'L', "LONG"},
        {0x8a, "LONG1"}, {0x8b, "LONG4"}, {'S', "STRING"}, {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"},
        {'B', "BINBYTES"}, {'C', "SHORT_BINBYTES"}, {0x8e, "BINBYTES8"}, {0x96, "BYTEARRAY8"},
        {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"}, {'N', "NONE"}, {0x88, "NEWTRUE"},
        {0x89, "NEWFALSE"}, {'V', "UNICODE"}, {0x8c, "SHORT_BINUNICODE"}, {'X', "BINUNICODE"},
        {0x8d, "BINUNICODE8"}, {'F', "FLOAT"}, {'G', "BINFLOAT"}, {']', "EMPTY_LIST"}, {'a', "APPEND"},
        {'e', "APPENDS"}, {'l', "LIST"}, {')', "EMPTY_TUPLE"}, {'t', "TUPLE"}, {0x85, "TUPLE1"},
        {0x86, "TUPLE2"}, {0x87, "TUPLE3"}, {'}', "EMPTY_DICT"}, {'d', "DICT"}, {'s', "SETITEM"},
        {'u', "SETITEMS"}, {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {'0', "POP"},
        {'2', "DUP"}, {'(', "MARK"}, {'1', "POP_MARK"}, {'g', "GET"}, {'h', "BINGET"}, {'j', "LONG_BINGET"},
        {'p', "PUT"}, {'q', "BINPUT"}, {'r', "LONG_BINPUT"}, {0x94, "MEMOIZE"}, {0x82, "EXT1"},
        {0x83, "EXT2"}, {0x84, "EXT4"}, {'c', "GLOBAL"}, {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"},
        {'b', "BUILD"}, {'i', "INST"}, {'o', "OBJ"}, {0x81, "NEWOBJ"}, {0x92, "NEWOBJ_EX"},
        {0x80, "PROTO"}, {'.', "STOP"}, {0x95, "FRAME"}, {'P', "PERSID"}, {'Q', "BINPERSID"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].code == op) return names[i].name;
    return NULL;
}

__attribute__((format(printf, 2, 3))) static int fail(rd *r, const char *fmt, ...) {
    if (r->failed) return -1;
    r->failed = 1;
    if (!r->errlen) return -1;
    const char *name = op_name(r->op);
    int n = name ? snprintf(r->err, r->errlen, "offset %zu: %s: ", r->op_at, name)
                 : snprintf(r->err, r->errlen, "offset %zu: ", r->op_at);
    if (n >= 0 && (size_t)n < r->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int oom(rd *r) { return fail(r, "out of memory"); }

/* ---- input ---- */

/* A stream's window holding n bytes from pos on, as far as the stream has
 * them: what was read goes, the rest moves to the front, more is inflated. */
static int refill(rd *r, size_t n) {
    if (r->pos) {
        memmove(r->win, r->win + r->pos, r->len - r->pos);
        r->base += r->pos, r->len -= r->pos, r->pos = 0;
    }
    size_t want = n > PIECE ? n : PIECE;
    if (want > r->win_cap) {
        unsigned char *w = realloc(r->win, want);
        if (!w) return oom(r);
        r->p = r->win = w, r->win_cap = want;
    }
    while (r->len < n) {
        long got = r->src->read(r->src->ctx, r->win + r->len, r->win_cap - r->len);
        if (got < 0) { /* the stream's own message: no opcode is at fault */
            if (!r->failed && r->errlen) snprintf(r->err, r->errlen, "%s", r->src->error(r->src->ctx));
            r->failed = 1;
            return -1;
        }
        if (!got) break; /* the end: need() says what is missing */
        r->len += (size_t)got;
    }
    return 0;
}

static int need(rd *r, size_t n) {
    if (r->len - r->pos >= n) return 0;
    if (r->src && refill(r, n)) return -1;
    if (r->len - r->pos >= n) return 0;
    return fail(r, "truncated: needs %zu byte%s, %zu left", n, n == 1 ? "" : "s", r->len - r->pos);
}

/* Whether a byte is left (a stream's window refilled first). */
static int more(rd *r) {
    if (r->pos < r->len) return 1;
    return r->src && !refill(r, 1) && r->pos < r->len;
}

static uint64_t le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n; i-- > 0;) v = v << 8 | p[i];
    return v;
}

/* An n-byte little-endian unsigned argument (n = 1, 2, 4 or 8). */
static int arg(rd *r, int n, uint64_t *v) {
    if (need(r, (size_t)n)) return -1;
    *v = le(r->p + r->pos, n);
    r->pos += (size_t)n;
    return 0;
}

/* ---- the stack ---- */

static size_t base(const rd *r) { return r->n_marks ? r->marks[r->n_marks - 1] : 0; }

static int push(rd *r, ca_val *v) {
    if (!v) return oom(r);
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        ca_val **s = realloc(r->stack, cap * sizeof *s);
        if (!s) return oom(r);
        r->stack = s;
        r->cap = cap;
    }
    r->stack[r->n++] = v;
    return 0;
}

/* The top value (above the last MARK), or NULL with an error. */
static ca_val *top(rd *r, size_t depth) {
    if (r->n - base(r) <= depth) {
        fail(r, "stack underflow: needs %zu value%s%s", depth + 1, depth ? "s" : "",
             r->n_marks ? " above the MARK" : "");
        return NULL;
    }
    return r->stack[r->n - 1 - depth];
}

static ca_val *pop(rd *r) {
    ca_val *v = top(r, 0);
    if (v) r->n--;
    return v;
}

/* Ends the innermost MARK: the values above it are stack[*from .. r->n). */
static int pop_mark(rd *r, size_t *from) {
    if (!r->n_marks) return fail(r, "no MARK before it");
    *from = r->marks[--r->n_marks];
    return 0;
}

static int hashable(rd *r, const ca_val *k) {
    if (k->kind == CA_VAL_LIST || k->kind == CA_VAL_DICT || (k->kind == CA_VAL_SET))
        return fail(r, "a %s cannot be a dict key or set item (unhashable)", ca_val_kind_name(k->kind));
    return 0;
}

/* ---- values ---- */

static int push_str(rd *r, ca_val_kind k, int len_bytes) {
    uint64_t n;
    if (arg(r, len_bytes, &n)) return -1;
    if (n > MAX_STRING)
        return fail(r, "%llu bytes: longer than any string a snapshot holds (16 MiB at most)", (unsigned long long)n);
    if (need(r, (size_t)n)) return -1;
    ca_val *v = ca_doc_new_str(r->doc, k, (const char *)r->p + r->pos, (size_t)n);
    r->pos += (size_t)n;
    return push(r, v);
}

/* LONG1 / LONG4: little-endian two's complement of n bytes. */
static int push_long(rd *r, int len_bytes) {
    uint64_t n64;
    if (arg(r, len_bytes, &n64)) return -1;
    if (len_bytes == 4 && n64 >= UINT64_C(1) << 31) return fail(r, "negative length");
    if (n64 > MAX_STRING)
        return fail(r, "a number of %llu bytes: longer than any a snapshot holds", (unsigned long long)n64);
    if (need(r, (size_t)n64)) return -1;
    size_t n = (size_t)n64;
    const unsigned char *b = r->p + r->pos;
    r->pos += n;
    ca_val *v;
    int neg = n && (b[n - 1] & 0x80);
    /* Bytes beyond the 8th that only extend the sign change nothing. */
    size_t used = n;
    while (used > 8 && b[used - 1] == (neg ? 0xff : 0x00)) used--;
    if (used <= 8 && (used < 8 || ((b[7] & 0x80) != 0) == neg)) {
        uint64_t u = le(b, (int)used);
        if (neg && used < 8) u |= ~UINT64_C(0) << (8 * used);
        v = ca_doc_new_val(r->doc, CA_VAL_INT);
        if (v) v->i = (int64_t)u;
    } else {
        v = ca_doc_new_val(r->doc, CA_VAL_BIGINT);
        if (v) v->big_negative = neg;
    }
    return push(r, v);
}

static int push_int(rd *r, int64_t i) {
    ca_val *v = ca_doc_new_val(r->doc, CA_VAL_INT);
    if (v) v->i = i;
    return push(r, v);
}

static int binfloat(rd *r) {
    if (need(r, 8)) return -1;
    uint64_t u = 0;
    for (int i = 0; i < 8; i++) u = u << 8 | r->p[r->pos + i]; /* big-endian */
    r->pos += 8;
    double d;
    memcpy(&d, &u, sizeof d);
    ca_val *v = ca_doc_new_val(r->doc, CA_VAL_FLOAT);
    if (v) v->f = d;
    return push(r, v);
}

/* A tuple (or list, or frozenset) of stack[from .. r->n), which it replaces. */
static int collect(rd *r, ca_val_kind k, size_t from) {
    ca_val *t = ca_doc_new_val(r->doc, k);
    if (!t) return oom(r);
    for (size_t i = from; i < r->n; i++) {
        if (k == CA_VAL_SET && hashable(r, r->stack[i])) return -1;
        if (ca_val_push(t, r->stack[i])) return oom(r);
    }
    r->n = from;
    return push(r, t);
}

static int tuple_n(rd *r, size_t k) {
    if (r->n - base(r) < k) return fail(r, "stack underflow: needs %zu values", k);
    return collect(r, CA_VAL_TUPLE, r->n - k);
}

/* APPENDS, SETITEMS, ADDITEMS and DICT: the values above the MARK go into
 * the container below it (DICT: into a new dict). */
static int fill(rd *r, ca_val_kind want, int new_dict) {
    size_t from = 0;
    if (pop_mark(r, &from)) return -1;
    ca_val *c;
    if (new_dict) {
        c = ca_doc_new_val(r->doc, CA_VAL_DICT);
        if (!c) return oom(r);
    } else {
        if (from == base(r)) return fail(r, "no %s below the MARK", ca_val_kind_name(want));
        c = r->stack[from - 1];
        if (c->kind != want)
            return fail(r, "adds to a %s, not a %s", ca_val_kind_name(c->kind), ca_val_kind_name(want));
    }
    size_t items = r->n - from;
    if (want == CA_VAL_DICT && items % 2) return fail(r, "odd number of values (%zu) for key-value pairs", items);
    for (size_t i = from; i < r->n; i += want == CA_VAL_DICT ? 2 : 1) {
        int bad = want == CA_VAL_LIST ? ca_val_push(c, r->stack[i])
                  : want == CA_VAL_SET ? (hashable(r, r->stack[i]) ? -2 : ca_val_push(c, r->stack[i]))
                                       : (hashable(r, r->stack[i]) ? -2 : ca_val_put(c, r->stack[i], r->stack[i + 1]));
        if (bad == -2) return -1;
        if (bad) return oom(r);
    }
    r->n = from;
    return new_dict ? push(r, c) : 0;
}

/* ---- the memo ---- */

static int memo_put(rd *r, uint64_t idx) {
    ca_val *v = top(r, 0);
    if (!v) return -1;
    /* Every entry costs at least one byte of input: a larger index is no pickle's. */
    if (idx > r->base + r->len)
        return fail(r, "memo index %llu out of range for %zu bytes of input", (unsigned long long)idx, r->base + r->len);
    if (idx >= r->memo_cap) {
        size_t cap = r->memo_cap ? r->memo_cap : 64;
        while (cap <= idx) cap *= 2;
        ca_val **m = realloc(r->memo, cap * sizeof *m);
        if (!m) return oom(r);
        memset(m + r->memo_cap, 0, (cap - r->memo_cap) * sizeof *m);
        r->memo = m;
        r->memo_cap = cap;
    }
    if (!r->memo[idx]) r->memo_count++;
    r->memo[idx] = v;
    return 0;
}

static int memo_get(rd *r, uint64_t idx) {
    if (idx >= r->memo_cap || !r->memo[idx]) return fail(r, "memo entry %llu was never stored", (unsigned long long)idx);
    return push(r, r->memo[idx]);
}

/* ---- the machine ---- */

static int step(rd *r, int *stop) {
    uint64_t a;
    size_t from = 0;
    ca_val *v;
    switch (r->op) {
    case 0x80: /* PROTO */
        if (arg(r, 1, &a)) return -1;
        if (a < 2 || a > 5) return fail(r, "protocol %llu: only 2 to 5 are read", (unsigned long long)a);
        return 0;
    case 0x95: /* FRAME: a length, then opcodes as usual */
        if (arg(r, 8, &a)) return -1;
        if (!r->src && a > r->len - r->pos) /* (a stream's end is not known yet: need() finds it cut short) */
            return fail(r, "truncated: a frame of %llu bytes, %zu left", (unsigned long long)a, r->len - r->pos);
        return 0;
    case '.': *stop = 1; return 0;
    case '(':
        if (r->n_marks == r->cap_marks) {
            size_t cap = r->cap_marks ? 2 * r->cap_marks : 16;
            size_t *m = realloc(r->marks, cap * sizeof *m);
            if (!m) return oom(r);
            r->marks = m;
            r->cap_marks = cap;
        }
        r->marks[r->n_marks++] = r->n;
        return 0;
    case '0': return pop(r) ? 0 : -1;
    case '1': if (pop_mark(r, &from)) return -1; r->n = from; return 0;
    case '2': return (v = top(r, 0)) ? push(r, v) : -1;
    case '}': return push(r, ca_doc_new_val(r->doc, CA_VAL_DICT));
    case ']': return push(r, ca_doc_new_val(r->doc, CA_VAL_LIST));
    case ')': return push(r, ca_doc_new_val(r->doc, CA_VAL_TUPLE));
    case 0x8f: return push(r, ca_doc_new_val(r->doc, CA_VAL_SET));
    case 't': return pop_mark(r, &from) ? -1 : collect(r, CA_VAL_TUPLE, from);
    case 'l': return pop_mark(r, &from) ? -1 : collect(r, CA_VAL_LIST, from);
    case 0x91: return pop_mark(r, &from) ? -1 : collect(r, CA_VAL_SET, from);
    case 0x85: return tuple_n(r, 1);
    case 0x86: return tuple_n(r, 2);
    case 0x87: return tuple_n(r, 3);
    case 'd': return fill(r, CA_VAL_DICT, 1);
    case 'e': return fill(r, CA_VAL_LIST, 0);
    case 'u': return fill(r, CA_VAL_DICT, 0);
    case 0x90: return fill(r, CA_VAL_SET, 0);
    case 'a': {
        ca_val *item = top(r, 0), *list = item ? top(r, 1) : NULL;
        if (!list) return -1;
        if (list->kind != CA_VAL_LIST) return fail(r, "appends to a %s, not a list", ca_val_kind_name(list->kind));
        if (ca_val_push(list, item)) return oom(r);
        r->n--;
        return 0;
    }
    case 's': {
        ca_val *val = top(r, 0), *key = val ? top(r, 1) : NULL, *dict = key ? top(r, 2) : NULL;
        if (!dict) return -1;
        if (dict->kind != CA_VAL_DICT) return fail(r, "sets an item of a %s, not a dict", ca_val_kind_name(dict->kind));
        if (hashable(r, key)) return -1;
        if (ca_val_put(dict, key, val)) return oom(r);
        r->n -= 2;
        return 0;
    }
    case 'N': return push(r, ca_doc_new_val(r->doc, CA_VAL_NONE));
    case 0x88: return push(r, ca_doc_bool(r->doc, 1));
    case 0x89: return push(r, ca_doc_bool(r->doc, 0));
    case 'J': return arg(r, 4, &a) ? -1 : push_int(r, (int32_t)(uint32_t)a);
    case 'K': return arg(r, 1, &a) ? -1 : push_int(r, (int64_t)a);
    case 'M': return arg(r, 2, &a) ? -1 : push_int(r, (int64_t)a);
    case 0x8a: return push_long(r, 1);
    case 0x8b: return push_long(r, 4);
    case 'G': return binfloat(r);
    case 0x8c: return push_str(r, CA_VAL_STR, 1);
    case 'X': return push_str(r, CA_VAL_STR, 4);
    case 0x8d: return push_str(r, CA_VAL_STR, 8);
    case 'C': return push_str(r, CA_VAL_BYTES, 1);
    case 'B': return push_str(r, CA_VAL_BYTES, 4);
    case 0x8e: case 0x96: return push_str(r, CA_VAL_BYTES, 8);
    case 0x94: return memo_put(r, r->memo_count);
    case 'q': return arg(r, 1, &a) ? -1 : memo_put(r, a);
    case 'r': return arg(r, 4, &a) ? -1 : memo_put(r, a);
    case 'h': return arg(r, 1, &a) ? -1 : memo_get(r, a);
    case 'j': return arg(r, 4, &a) ? -1 : memo_get(r, a);
    case 'c': case 0x93: case 'R': case 'b': case 'i': case 'o': case 0x81: case 0x92:
    case 0x82: case 0x83: case 0x84: case 'P': case 'Q': case 0x97: case 0x98:
        return fail(r, "refused: it would import, call or build an object; a snapshot holds only "
                       "dicts, lists, tuples, strings, numbers, bools and None");
    default:
        if (op_name(r->op))
            return fail(r, "not read: Python's pickler writes it only at protocols 0 and 1");
        return fail(r, "unknown opcode 0x%02x", r->op);
    }
}

/* The machine over r's input, from its first byte to STOP. */
static ca_doc *run(rd *r) {
    if (r->errlen) r->err[0] = '\0';
    if (!more(r)) {
        if (!r->failed) snprintf(r->err, r->errlen, "empty: no pickle");
        return NULL;
    }
    if (r->p[r->pos] != 0x80) {
        snprintf(r->err, r->errlen, "offset 0: byte 0x%02x: not a pickle of protocol 2 or later (those start with "
                                    "PROTO, byte 0x80)", r->p[r->pos]);
        return NULL;
    }
    if (!(r->doc = ca_doc_new())) {
        snprintf(r->err, r->errlen, "out of memory");
        return NULL;
    }
    int stop = 0;
    while (!stop && !r->failed) {
        r->op_at = r->base + r->pos;
        if (!more(r)) {
            r->op = 0;
            fail(r, "truncated: the input ends before STOP");
            break;
        }
        r->op = r->p[r->pos++];
        step(r, &stop);
    }
    if (!r->failed) {
        if (r->n_marks) fail(r, "a MARK is still open");
        else if (r->n != 1) fail(r, "%zu values left on the stack, wanted 1", r->n);
        else if (more(r)) fail(r, "%zu bytes after STOP%s", r->len - r->pos, r->src ? " (at least)" : "");
    }
    if (!r->failed) ca_doc_set_root(r->doc, r->stack[0]);
    free(r->stack);
    free(r->marks);
    free(r->memo);
    if (r->failed) {
        ca_doc_free(r->doc);
        return NULL;
    }
    return r->doc;
}

ca_doc *ca_unpickle(const void *buf, size_t len, char *err, size_t errlen) {
    rd r = {.p = buf, .len = len, .err = err, .errlen = errlen};
    return run(&r);
}

ca_doc *ca_unpickle_stream(const ca_pickle_source *src, char *err, size_t errlen) {
    rd r = {.src = src, .err = err, .errlen = errlen};
    ca_doc *d = run(&r);
    free(r.win); /* however run ended */
    return d;
}
