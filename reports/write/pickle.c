#include "reports/write/pickle.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "reports/write/utf8.h"

/* Opcodes, named as in Python's pickletools. */
enum {
    OP_MARK = '(', OP_STOP = '.', OP_BININT = 'J', OP_BININT1 = 'K', OP_BININT2 = 'M',
    OP_NONE = 'N', OP_BINUNICODE = 'X', OP_BINFLOAT = 'G', OP_EMPTY_LIST = ']',
    OP_APPENDS = 'e', OP_BINGET = 'h', OP_LONG_BINGET = 'j', OP_EMPTY_DICT = '}',
    OP_SETITEMS = 'u', OP_PROTO = 0x80, OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89,
    OP_LONG1 = 0x8a, OP_SHORT_BINUNICODE = 0x8c, OP_MEMOIZE = 0x94, OP_TUPLE2 = 0x86,
};

#define BATCH 1000             /* Python's _BATCHSIZE; keeps JS spread args small */
#define FLUSH_AT (64 * 1024)   /* FILE* mode: staging buffer size */
#define MAX_DEPTH 4096
#define MEMO_MIN_LEN 2         /* shorter strings cost less than a BINGET */
#define MEMO_MAX_LEN 4096      /* long unique texts are not worth keeping */
#define MEMO_MAX_ENTRIES (1u << 20)
#define MEMO_MAX_BYTES (32u << 20)

enum { K_LIST, K_DICT };

struct frame {
    unsigned char kind;
    unsigned char marked;      /* a MARK is open for the current batch */
    unsigned char want_value;  /* dict: a key was written, its value is due */
    unsigned batch;            /* items (pairs) in the open batch */
};

struct memo_ent {
    uint64_t hash;
    char *s;                   /* NULL: empty slot */
    uint32_t len, idx;
};

struct ca_pkl {
    FILE *f;
    unsigned char *buf;
    size_t len, cap;
    struct frame *stack;
    size_t depth, stack_cap;
    int top_done, finished;
    struct memo_ent *memo;
    size_t memo_cap, memo_used, memo_bytes;
    uint32_t memo_next;
    size_t js_inexact;
    int failed;
    char err[200];
};

static int fail(ca_pkl *p, const char *fmt, ...)
{
    if (!p->failed) {
        p->failed = 1;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err, sizeof p->err, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int flush(ca_pkl *p)
{
    if (!p->f || p->len == 0)
        return 0;
    errno = 0;
    if (fwrite(p->buf, 1, p->len, p->f) != p->len)
        return fail(p, "pickle: write failed: %s", strerror(errno ? errno : EIO));
    p->len = 0;
    return 0;
}

static int reserve(ca_pkl *p, size_t extra)
{
    if (p->f && p->len + extra > FLUSH_AT && flush(p))
        return -1;
    if (p->len + extra <= p->cap)
        return 0;
    size_t cap = p->cap ? p->cap : 4096;
    while (cap < p->len + extra) {
        if (cap > SIZE_MAX / 2)
            return fail(p, "pickle: output too large");
        cap *= 2;
    }
    unsigned char *nb = realloc(p->buf, cap);
    if (!nb)
        return fail(p, "pickle: out of memory");
    p->buf = nb;
    p->cap = cap;
    return 0;
}

static int put(ca_pkl *p, const void *data, size_t n)
{
    if (reserve(p, n))
        return -1;
    memcpy(p->buf + p->len, data, n);
    p->len += n;
    return 0;
}

static int put1(ca_pkl *p, unsigned char c) { return put(p, &c, 1); }

static int put_le(ca_pkl *p, unsigned char op, uint64_t v, int nbytes)
{
    unsigned char b[9];
    b[0] = op;
    for (int i = 0; i < nbytes; i++)
        b[1 + i] = (unsigned char)(v >> (8 * i));
    return put(p, b, 1 + (size_t)nbytes);
}

static ca_pkl *create(FILE *f)
{
    ca_pkl *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->f = f;
    unsigned char proto[2] = {OP_PROTO, 4};
    put(p, proto, 2);
    return p;
}

ca_pkl *ca_pkl_new_file(FILE *f)
{
    return f ? create(f) : NULL;
}

ca_pkl *ca_pkl_new_buf(void) { return create(NULL); }

void ca_pkl_free(ca_pkl *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->memo_cap; i++)
        free(p->memo[i].s);
    free(p->memo);
    free(p->stack);
    free(p->buf);
    free(p);
}

const char *ca_pkl_error(const ca_pkl *p)
{
    if (!p)
        return "pickle: no writer (out of memory or no FILE*)";
    return p->failed ? p->err : NULL;
}

const unsigned char *ca_pkl_data(const ca_pkl *p, size_t *len)
{
    if (!p || p->f) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = p->len;
    return p->buf;
}

size_t ca_pkl_js_inexact(const ca_pkl *p) { return p ? p->js_inexact : 0; }

/* ---- nesting ---- */

/* Called before any value or key: checks that one may go here and opens
 * the batch MARK lazily, so empty containers cost one byte. */
static int begin_item(ca_pkl *p, int is_key)
{
    if (!p)
        return -1;
    if (p->failed)
        return -1;
    if (p->finished)
        return fail(p, "pickle: write after finish");
    if (p->depth == 0) {
        if (is_key)
            return fail(p, "pickle: key outside a dict");
        if (p->top_done)
            return fail(p, "pickle: second top-level value");
        return 0;
    }
    struct frame *fr = &p->stack[p->depth - 1];
    if (fr->kind == K_DICT) {
        if (is_key && fr->want_value)
            return fail(p, "pickle: dict key where a value is due");
        if (!is_key && !fr->want_value)
            return fail(p, "pickle: dict value without a key");
        if (!is_key)
            return 0;   /* the key already opened the batch */
    } else if (is_key) {
        return fail(p, "pickle: key inside a list");
    }
    if (!fr->marked) {
        if (put1(p, OP_MARK))
            return -1;
        fr->marked = 1;
    }
    return 0;
}

/* Called after a complete value: counts it and closes a full batch. */
static int end_item(ca_pkl *p)
{
    if (p->depth == 0) {
        p->top_done = 1;
        return 0;
    }
    struct frame *fr = &p->stack[p->depth - 1];
    if (fr->kind == K_DICT)
        fr->want_value = 0;
    if (++fr->batch >= BATCH) {
        if (put1(p, fr->kind == K_DICT ? OP_SETITEMS : OP_APPENDS))
            return -1;
        fr->batch = 0;
        fr->marked = 0;
    }
    return 0;
}

static int open_container(ca_pkl *p, int kind)
{
    if (begin_item(p, 0))
        return -1;
    if (p->depth >= MAX_DEPTH)
        return fail(p, "pickle: nesting deeper than %d", MAX_DEPTH);
    if (p->depth == p->stack_cap) {
        size_t cap = p->stack_cap ? p->stack_cap * 2 : 16;
        struct frame *ns = realloc(p->stack, cap * sizeof *ns);
        if (!ns)
            return fail(p, "pickle: out of memory");
        p->stack = ns;
        p->stack_cap = cap;
    }
    if (put1(p, kind == K_DICT ? OP_EMPTY_DICT : OP_EMPTY_LIST))
        return -1;
    p->stack[p->depth++] = (struct frame){.kind = (unsigned char)kind};
    return 0;
}

static int close_container(ca_pkl *p, int kind)
{
    if (!p || p->failed)
        return -1;
    const char *what = kind == K_DICT ? "dict" : "list";
    if (p->depth == 0)
        return fail(p, "pickle: %s end without a begin", what);
    struct frame *fr = &p->stack[p->depth - 1];
    if (fr->kind != kind)
        return fail(p, "pickle: %s end inside a %s", what, fr->kind == K_DICT ? "dict" : "list");
    if (fr->want_value)
        return fail(p, "pickle: dict ends after a key with no value");
    if (fr->marked && put1(p, kind == K_DICT ? OP_SETITEMS : OP_APPENDS))
        return -1;
    p->depth--;
    return end_item(p);
}

int ca_pkl_dict_begin(ca_pkl *p) { return open_container(p, K_DICT); }
int ca_pkl_dict_end(ca_pkl *p) { return close_container(p, K_DICT); }
int ca_pkl_list_begin(ca_pkl *p) { return open_container(p, K_LIST); }
int ca_pkl_list_end(ca_pkl *p) { return close_container(p, K_LIST); }

/* ---- strings, written once and then fetched from the memo ---- */

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static struct memo_ent *memo_slot(ca_pkl *p, uint64_t h, const char *s, size_t n)
{
    size_t mask = p->memo_cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        struct memo_ent *e = &p->memo[i];
        if (!e->s || (e->hash == h && e->len == n && memcmp(e->s, s, n) == 0))
            return e;
    }
}

/* Room for one more entry; 0 if the memo is full or cannot grow (the string
 * is then simply written out again, which is still a valid pickle). */
static int memo_room(ca_pkl *p, size_t n)
{
    if (p->memo_used >= MEMO_MAX_ENTRIES || p->memo_bytes + n > MEMO_MAX_BYTES)
        return 0;
    if ((p->memo_used + 1) * 2 <= p->memo_cap)
        return 1;
    size_t cap = p->memo_cap ? p->memo_cap * 2 : 256;
    struct memo_ent *nt = calloc(cap, sizeof *nt);
    if (!nt)
        return 0;
    struct memo_ent *old = p->memo;
    size_t old_cap = p->memo_cap;
    p->memo = nt;
    p->memo_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].s)
            *memo_slot(p, old[i].hash, old[i].s, old[i].len) = old[i];
    free(old);
    return 1;
}

static int write_text(ca_pkl *p, const unsigned char *s, size_t n)
{
    size_t clean = ca_utf8_clean_len(s, n);
    if (clean > UINT32_MAX)
        return fail(p, "pickle: string longer than 4 GiB");
    if (clean < 256) {
        unsigned char h[2] = {OP_SHORT_BINUNICODE, (unsigned char)clean};
        if (put(p, h, 2))
            return -1;
    } else if (put_le(p, OP_BINUNICODE, clean, 4)) {
        return -1;
    }
    if (clean == n)
        return put(p, s, n);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = ca_utf8_decode(s + i, n - i, &cp);
        unsigned char enc[4];
        if (k == 1 && s[i] >= 0x80) {
            if (put(p, enc, ca_utf8_encode(CA_UTF8_REPLACEMENT, enc)))
                return -1;
        } else if (put(p, s + i, k)) {
            return -1;
        }
        i += k;
    }
    return 0;
}

static int write_string(ca_pkl *p, const char *s, size_t n)
{
    if (n < MEMO_MIN_LEN || n > MEMO_MAX_LEN)
        return write_text(p, (const unsigned char *)s, n);
    uint64_t h = fnv1a(s, n);
    if (p->memo_cap) {
        struct memo_ent *e = memo_slot(p, h, s, n);
        if (e->s) {
            if (e->idx < 256) {
                unsigned char g[2] = {OP_BINGET, (unsigned char)e->idx};
                return put(p, g, 2);
            }
            return put_le(p, OP_LONG_BINGET, e->idx, 4);
        }
    }
    if (write_text(p, (const unsigned char *)s, n))
        return -1;
    char *copy;
    if (!memo_room(p, n) || !(copy = malloc(n ? n : 1)))
        return 0;
    memcpy(copy, s, n);
    struct memo_ent *e = memo_slot(p, h, s, n);
    *e = (struct memo_ent){.hash = h, .s = copy, .len = (uint32_t)n, .idx = p->memo_next++};
    p->memo_used++;
    p->memo_bytes += n;
    /* MEMOIZE stores the top of stack at the next index, in Python
     * (memo[len(memo)]) and in MemoryViz.js (memo[memo_id++]) alike. */
    return put1(p, OP_MEMOIZE);
}

int ca_pkl_key(ca_pkl *p, const char *k)
{
    if (begin_item(p, 1))
        return -1;
    if (!k)
        return fail(p, "pickle: NULL dict key");
    if (write_string(p, k, strlen(k)))
        return -1;
    p->stack[p->depth - 1].want_value = 1;
    return 0;
}

int ca_pkl_strn(ca_pkl *p, const char *s, size_t n)
{
    if (begin_item(p, 0))
        return -1;
    if (!s && n)
        return fail(p, "pickle: NULL string with length %zu", n);
    if (write_string(p, s ? s : "", n))
        return -1;
    return end_item(p);
}

int ca_pkl_str(ca_pkl *p, const char *s)
{
    return s ? ca_pkl_strn(p, s, strlen(s)) : ca_pkl_none(p);
}

/* ---- scalars ---- */

/* The opcode of one integer, with no item bookkeeping. */
static int put_int(ca_pkl *p, int64_t v)
{
    int r;
    if (v >= 0 && v < 256) {
        r = put_le(p, OP_BININT1, (uint64_t)v, 1);
    } else if (v >= 0 && v < 65536) {
        r = put_le(p, OP_BININT2, (uint64_t)v, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        r = put_le(p, OP_BININT, (uint64_t)v, 4);
    } else {
        /* LONG1: the fewest little-endian two's-complement bytes whose sign
         * extension gives v back (MemoryViz sign-extends to 64 bits). */
        int n = 1;
        while (n < 8) {
            int64_t lo = -((int64_t)1 << (8 * n - 1));
            int64_t hi = ((int64_t)1 << (8 * n - 1)) - 1;
            if (v >= lo && v <= hi)
                break;
            n++;
        }
        unsigned char b[10];
        b[0] = OP_LONG1;
        b[1] = (unsigned char)n;
        for (int i = 0; i < n; i++)
            b[2 + i] = (unsigned char)((uint64_t)v >> (8 * i));
        r = put(p, b, 2 + (size_t)n);
        if (v > ((int64_t)1 << 53) || v < -((int64_t)1 << 53))
            p->js_inexact++;
    }
    return r;
}

int ca_pkl_int(ca_pkl *p, int64_t v)
{
    if (begin_item(p, 0))
        return -1;
    return put_int(p, v) ? -1 : end_item(p);
}

int ca_pkl_int_pair(ca_pkl *p, int64_t a, int64_t b)
{
    if (begin_item(p, 0))
        return -1;
    return put_int(p, a) || put_int(p, b) || put1(p, OP_TUPLE2) ? -1 : end_item(p);
}

int ca_pkl_uint(ca_pkl *p, uint64_t v)
{
    if (v > (uint64_t)INT64_MAX) {
        if (begin_item(p, 0))
            return -1;
        return fail(p, "pickle: integer %llu is 2^63 or more; memory_viz cannot read it",
                    (unsigned long long)v);
    }
    return ca_pkl_int(p, (int64_t)v);
}

int ca_pkl_float(ca_pkl *p, double v)
{
    if (begin_item(p, 0))
        return -1;
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    unsigned char b[9];
    b[0] = OP_BINFLOAT;
    for (int i = 0; i < 8; i++)
        b[1 + i] = (unsigned char)(bits >> (56 - 8 * i));   /* big-endian */
    return put(p, b, 9) ? -1 : end_item(p);
}

int ca_pkl_bool(ca_pkl *p, int v)
{
    if (begin_item(p, 0))
        return -1;
    return put1(p, v ? OP_NEWTRUE : OP_NEWFALSE) ? -1 : end_item(p);
}

int ca_pkl_none(ca_pkl *p)
{
    if (begin_item(p, 0))
        return -1;
    return put1(p, OP_NONE) ? -1 : end_item(p);
}

int ca_pkl_kv_str(ca_pkl *p, const char *k, const char *v)
{
    return ca_pkl_key(p, k) ? -1 : ca_pkl_str(p, v);
}
int ca_pkl_kv_int(ca_pkl *p, const char *k, int64_t v)
{
    return ca_pkl_key(p, k) ? -1 : ca_pkl_int(p, v);
}
int ca_pkl_kv_uint(ca_pkl *p, const char *k, uint64_t v)
{
    return ca_pkl_key(p, k) ? -1 : ca_pkl_uint(p, v);
}
int ca_pkl_kv_float(ca_pkl *p, const char *k, double v)
{
    return ca_pkl_key(p, k) ? -1 : ca_pkl_float(p, v);
}
int ca_pkl_kv_bool(ca_pkl *p, const char *k, int v)
{
    return ca_pkl_key(p, k) ? -1 : ca_pkl_bool(p, v);
}

int ca_pkl_finish(ca_pkl *p)
{
    if (!p || p->failed)
        return -1;
    if (p->finished)
        return fail(p, "pickle: finished twice");
    if (p->depth)
        return fail(p, "pickle: finish with %zu container(s) still open", p->depth);
    if (!p->top_done)
        return fail(p, "pickle: finish with no value written");
    if (put1(p, OP_STOP) || flush(p))
        return -1;
    p->finished = 1;
    errno = 0;
    if (p->f && fflush(p->f) != 0)
        return fail(p, "pickle: write failed: %s", strerror(errno ? errno : EIO));
    return 0;
}
