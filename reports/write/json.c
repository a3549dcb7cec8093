#include "reports/write/json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "reports/write/fmt.h"
#include "reports/write/utf8.h"

#define FLUSH_AT (64 * 1024)
#define MAX_DEPTH 4096

enum { K_ARR, K_OBJ };

struct frame {
    unsigned char kind, want_value;
    size_t count;
};

struct ca_json {
    FILE *f;
    int pretty;
    char *buf;
    size_t len, cap;
    struct frame *stack;
    size_t depth, stack_cap;
    int top_done, finished, failed;
    char err[200];
};

static int fail(ca_json *j, const char *fmt, ...)
{
    if (!j->failed) {
        j->failed = 1;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->err, sizeof j->err, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int flush(ca_json *j)
{
    if (!j->f || j->len == 0)
        return 0;
    errno = 0;
    if (fwrite(j->buf, 1, j->len, j->f) != j->len)
        return fail(j, "json: write failed: %s", strerror(errno ? errno : EIO));
    j->len = 0;
    return 0;
}

/* Keeps one spare byte so the buffer can always be NUL-terminated. */
static int reserve(ca_json *j, size_t extra)
{
    if (j->f && j->len + extra > FLUSH_AT && flush(j))
        return -1;
    if (j->len + extra + 1 <= j->cap)
        return 0;
    size_t cap = j->cap ? j->cap : 4096;
    while (cap < j->len + extra + 1) {
        if (cap > SIZE_MAX / 2)
            return fail(j, "json: output too large");
        cap *= 2;
    }
    char *nb = realloc(j->buf, cap);
    if (!nb)
        return fail(j, "json: out of memory");
    j->buf = nb;
    j->cap = cap;
    return 0;
}

static int put(ca_json *j, const char *s, size_t n)
{
    if (reserve(j, n))
        return -1;
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
    return 0;
}

static int puts_(ca_json *j, const char *s) { return put(j, s, strlen(s)); }

static ca_json *create(FILE *f, int pretty)
{
    ca_json *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->f = f;
    j->pretty = pretty;
    reserve(j, 0);
    return j;
}

ca_json *ca_json_new_file(FILE *f, int pretty) { return f ? create(f, pretty) : NULL; }
ca_json *ca_json_new_buf(int pretty) { return create(NULL, pretty); }

void ca_json_free(ca_json *j)
{
    if (!j)
        return;
    free(j->stack);
    free(j->buf);
    free(j);
}

const char *ca_json_error(const ca_json *j)
{
    if (!j)
        return "json: no writer (out of memory or no FILE*)";
    return j->failed ? j->err : NULL;
}

const char *ca_json_data(const ca_json *j, size_t *len)
{
    if (!j || j->f) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = j->len;
    return j->buf ? j->buf : "";
}

static int newline_indent(ca_json *j, size_t depth)
{
    if (!j->pretty)
        return 0;
    if (reserve(j, 1 + 2 * depth))
        return -1;
    j->buf[j->len++] = '\n';
    memset(j->buf + j->len, ' ', 2 * depth);
    j->len += 2 * depth;
    j->buf[j->len] = '\0';
    return 0;
}

/* Separator and indentation before a value (or key); checks placement. */
static int begin_item(ca_json *j, int is_key)
{
    if (!j || j->failed)
        return -1;
    if (j->finished)
        return fail(j, "json: write after finish");
    if (j->depth == 0) {
        if (is_key)
            return fail(j, "json: key outside an object");
        if (j->top_done)
            return fail(j, "json: second top-level value");
        return 0;
    }
    struct frame *fr = &j->stack[j->depth - 1];
    if (fr->kind == K_OBJ) {
        if (!is_key && !fr->want_value)
            return fail(j, "json: object value without a key");
        if (is_key && fr->want_value)
            return fail(j, "json: object key where a value is due");
        if (!is_key)
            return 0;   /* the key already wrote separator and indent */
    } else if (is_key) {
        return fail(j, "json: key inside an array");
    }
    if (fr->count && put(j, ",", 1))
        return -1;
    return newline_indent(j, j->depth);
}

static int end_item(ca_json *j)
{
    if (j->depth == 0) {
        j->top_done = 1;
        return 0;
    }
    struct frame *fr = &j->stack[j->depth - 1];
    fr->want_value = 0;
    fr->count++;
    return 0;
}

static int open_container(ca_json *j, int kind)
{
    if (begin_item(j, 0))
        return -1;
    if (j->depth >= MAX_DEPTH)
        return fail(j, "json: nesting deeper than %d", MAX_DEPTH);
    if (j->depth == j->stack_cap) {
        size_t cap = j->stack_cap ? j->stack_cap * 2 : 16;
        struct frame *ns = realloc(j->stack, cap * sizeof *ns);
        if (!ns)
            return fail(j, "json: out of memory");
        j->stack = ns;
        j->stack_cap = cap;
    }
    if (put(j, kind == K_OBJ ? "{" : "[", 1))
        return -1;
    j->stack[j->depth++] = (struct frame){.kind = (unsigned char)kind};
    return 0;
}

static int close_container(ca_json *j, int kind)
{
    if (!j || j->failed)
        return -1;
    const char *what = kind == K_OBJ ? "object" : "array";
    if (j->depth == 0)
        return fail(j, "json: %s end without a begin", what);
    struct frame *fr = &j->stack[j->depth - 1];
    if (fr->kind != kind)
        return fail(j, "json: %s end inside an %s", what, fr->kind == K_OBJ ? "object" : "array");
    if (fr->want_value)
        return fail(j, "json: object ends after a key with no value");
    j->depth--;
    if (fr->count && newline_indent(j, j->depth))
        return -1;
    if (put(j, kind == K_OBJ ? "}" : "]", 1))
        return -1;
    return end_item(j);
}

int ca_json_obj_begin(ca_json *j) { return open_container(j, K_OBJ); }
int ca_json_obj_end(ca_json *j) { return close_container(j, K_OBJ); }
int ca_json_arr_begin(ca_json *j) { return open_container(j, K_ARR); }
int ca_json_arr_end(ca_json *j) { return close_container(j, K_ARR); }

static int write_string(ca_json *j, const char *str, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    if (put(j, "\"", 1))
        return -1;
    size_t run = 0;   /* bytes copied verbatim, flushed in one put */
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = ca_utf8_decode(s + i, n - i, &cp);
        char esc[8];
        const char *rep = NULL;
        size_t rep_len = 0;
        if (cp == '"') {
            rep = "\\\"";
        } else if (cp == '\\') {
            rep = "\\\\";
        } else if (cp < 0x20) {
            switch (cp) {
            case '\b': rep = "\\b"; break;
            case '\f': rep = "\\f"; break;
            case '\n': rep = "\\n"; break;
            case '\r': rep = "\\r"; break;
            case '\t': rep = "\\t"; break;
            default:
                memcpy(esc, "\\u00", 4);
                esc[4] = hex[cp >> 4];
                esc[5] = hex[cp & 15];
                rep = esc;
                rep_len = 6;
            }
        } else if (cp == 0x2028 || cp == 0x2029) {
            rep = cp == 0x2028 ? "\\u2028" : "\\u2029";
        } else if (k == 1 && s[i] >= 0x80) {
            rep = "\xEF\xBF\xBD";   /* U+FFFD for an invalid byte */
        }
        if (rep) {
            if (run && put(j, (const char *)s + i - run, run))
                return -1;
            run = 0;
            if (put(j, rep, rep_len ? rep_len : strlen(rep)))
                return -1;
        } else {
            run += k;
        }
        i += k;
    }
    if (run && put(j, (const char *)s + n - run, run))
        return -1;
    return put(j, "\"", 1);
}

int ca_json_keyn(ca_json *j, const char *k, size_t n)
{
    if (begin_item(j, 1))
        return -1;
    if (!k)
        return fail(j, "json: NULL object key");
    if (write_string(j, k, n) || put(j, j->pretty ? ": " : ":", j->pretty ? 2 : 1))
        return -1;
    j->stack[j->depth - 1].want_value = 1;
    return 0;
}

int ca_json_key(ca_json *j, const char *k)
{
    return ca_json_keyn(j, k, k ? strlen(k) : 0);
}

int ca_json_strn(ca_json *j, const char *s, size_t n)
{
    if (begin_item(j, 0))
        return -1;
    if (!s && n)
        return fail(j, "json: NULL string with length %zu", n);
    return write_string(j, s ? s : "", n) ? -1 : end_item(j);
}

int ca_json_str(ca_json *j, const char *s)
{
    return s ? ca_json_strn(j, s, strlen(s)) : ca_json_null(j);
}

static int raw_value(ca_json *j, const char *text)
{
    if (begin_item(j, 0))
        return -1;
    return puts_(j, text) ? -1 : end_item(j);
}

int ca_json_int(ca_json *j, int64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRId64, v);
    return raw_value(j, b);
}

int ca_json_uint(ca_json *j, uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, v);
    return raw_value(j, b);
}

int ca_json_double(ca_json *j, double v)
{
    char b[40];
    int n = ca_fmt_double(b, sizeof b - 2, v);
    if (n < 0)
        return raw_value(j, "null");
    /* Keep it a float for readers that type numbers (Python's json). */
    if (!strpbrk(b, ".eE"))
        memcpy(b + n, ".0", 3);
    return raw_value(j, b);
}

int ca_json_bool(ca_json *j, int v) { return raw_value(j, v ? "true" : "false"); }
int ca_json_null(ca_json *j) { return raw_value(j, "null"); }

int ca_json_kv_str(ca_json *j, const char *k, const char *v)
{
    return ca_json_key(j, k) ? -1 : ca_json_str(j, v);
}
int ca_json_kv_int(ca_json *j, const char *k, int64_t v)
{
    return ca_json_key(j, k) ? -1 : ca_json_int(j, v);
}
int ca_json_kv_uint(ca_json *j, const char *k, uint64_t v)
{
    return ca_json_key(j, k) ? -1 : ca_json_uint(j, v);
}
int ca_json_kv_double(ca_json *j, const char *k, double v)
{
    return ca_json_key(j, k) ? -1 : ca_json_double(j, v);
}
int ca_json_kv_bool(ca_json *j, const char *k, int v)
{
    return ca_json_key(j, k) ? -1 : ca_json_bool(j, v);
}

int ca_json_finish(ca_json *j)
{
    if (!j || j->failed)
        return -1;
    if (j->finished)
        return fail(j, "json: finished twice");
    if (j->depth)
        return fail(j, "json: finish with %zu container(s) still open", j->depth);
    if (!j->top_done)
        return fail(j, "json: finish with no value written");
    if (put(j, "\n", 1) || flush(j))
        return -1;
    j->finished = 1;
    errno = 0;
    if (j->f && fflush(j->f) != 0)
        return fail(j, "json: write failed: %s", strerror(errno ? errno : EIO));
    return 0;
}
