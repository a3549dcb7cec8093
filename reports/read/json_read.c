/* The JSON reader: recursive descent, bounded depth; see json_read.h. */
#define _GNU_SOURCE
#include "reports/read/json_read.h"

#include <errno.h>
#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/write/utf8.h"

typedef struct jr {
    const char *p;
    size_t len, pos;
    ca_doc *doc;
    char *buf; /* string being decoded */
    size_t buf_cap;
    char *err;
    size_t errlen;
    int failed;
} jr;

__attribute__((format(printf, 2, 3))) static ca_val *fail(jr *r, const char *fmt, ...) {
    if (r->failed) return NULL;
    r->failed = 1;
    if (!r->errlen) return NULL;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < r->pos && i < r->len; i++) {
        if (r->p[i] == '\n') line++, col = 1;
        else col++;
    }
    int n = snprintf(r->err, r->errlen, "line %zu, column %zu: ", line, col);
    if (n >= 0 && (size_t)n < r->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return NULL;
}

static void skip_ws(jr *r) {
    while (r->pos < r->len && (r->p[r->pos] == ' ' || r->p[r->pos] == '\t' || r->p[r->pos] == '\n' || r->p[r->pos] == '\r'))
        r->pos++;
}

static int peek(jr *r) { return r->pos < r->len ? (unsigned char)r->p[r->pos] : -1; }

static const char *what(int c) {
    static char b[24];
    if (c < 0) return "the end of the input";
    if (c >= 0x20 && c < 0x7f) snprintf(b, sizeof b, "'%c'", c);
    else snprintf(b, sizeof b, "byte 0x%02x", c);
    return b;
}

static int put(jr *r, size_t *n, const void *s, size_t k) {
    if (*n + k + 1 > r->buf_cap) {
        size_t cap = r->buf_cap ? r->buf_cap : 64;
        while (cap < *n + k + 1) cap *= 2;
        char *b = realloc(r->buf, cap);
        if (!b) return -1;
        r->buf = b;
        r->buf_cap = cap;
    }
    memcpy(r->buf + *n, s, k);
    *n += k;
    return 0;
}

static int hex4(jr *r, uint32_t *out) {
    if (r->len - r->pos < 4) return fail(r, "\\u needs four hex digits"), -1;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = r->p[r->pos + i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return fail(r, "\\u needs four hex digits"), -1;
        v = v << 4 | (uint32_t)d;
    }
    r->pos += 4;
    *out = v;
    return 0;
}

static ca_val *string(jr *r) {
    r->pos++; /* the opening quote */
    size_t n = 0;
    for (;;) {
        if (r->pos >= r->len) return fail(r, "unterminated string");
        unsigned char c = (unsigned char)r->p[r->pos];
        if (c == '"') break;
        if (c < 0x20) return fail(r, "raw control character 0x%02x in a string (escape it)", c);
        if (c == '\\') {
            r->pos++;
            int e = peek(r);
            const char *simple = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
            const char *k = e > 0 ? strchr(simple, e) : NULL;
            if (k && *k) {
                r->pos++;
                if (put(r, &n, to + (k - simple), 1)) return fail(r, "out of memory");
                continue;
            }
            if (e != 'u') return fail(r, "unknown escape \\%s", e < 0 ? "" : what(e));
            r->pos++;
            uint32_t cp;
            if (hex4(r, &cp)) return NULL;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(r, "lone low surrogate \\u%04X", cp);
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (r->len - r->pos < 2 || r->p[r->pos] != '\\' || r->p[r->pos + 1] != 'u')
                    return fail(r, "high surrogate \\u%04X without its low half", cp);
                r->pos += 2;
                if (hex4(r, &lo)) return NULL;
                if (lo < 0xDC00 || lo > 0xDFFF) return fail(r, "high surrogate \\u%04X without its low half", cp);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            unsigned char u[4];
            if (put(r, &n, u, ca_utf8_encode(cp, u))) return fail(r, "out of memory");
            continue;
        }
        uint32_t cp;
        size_t k = ca_utf8_decode((const unsigned char *)r->p + r->pos, r->len - r->pos, &cp);
        if (cp == CA_UTF8_REPLACEMENT && k == 1 && c >= 0x80) return fail(r, "invalid UTF-8 in a string");
        if (put(r, &n, r->p + r->pos, k)) return fail(r, "out of memory");
        r->pos += k;
    }
    r->pos++;
    ca_val *v = ca_doc_new_str(r->doc, CA_VAL_STR, r->buf ? r->buf : "", n);
    return v ? v : fail(r, "out of memory");
}

static locale_t c_locale(void) {
    static locale_t loc;
    if (!loc) loc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    return loc;
}

static int digits(jr *r) {
    size_t start = r->pos;
    while (r->pos < r->len && r->p[r->pos] >= '0' && r->p[r->pos] <= '9') r->pos++;
    return r->pos > start;
}

static ca_val *number(jr *r) {
    size_t start = r->pos;
    int integral = 1;
    if (peek(r) == '-') r->pos++;
    if (peek(r) == '0') {
        r->pos++;
        if (peek(r) >= '0' && peek(r) <= '9') return fail(r, "leading zero in a number");
    } else if (!digits(r)) {
        return fail(r, "expected a digit, found %s", what(peek(r)));
    }
    if (peek(r) == '.') {
        integral = 0;
        r->pos++;
        if (!digits(r)) return fail(r, "expected a digit after '.', found %s", what(peek(r)));
    }
    if (peek(r) == 'e' || peek(r) == 'E') {
        integral = 0;
        r->pos++;
        if (peek(r) == '+' || peek(r) == '-') r->pos++;
        if (!digits(r)) return fail(r, "expected a digit in the exponent, found %s", what(peek(r)));
    }
    char tmp[64], *text = tmp, *end;
    size_t n = r->pos - start;
    if (n >= sizeof tmp && !(text = malloc(n + 1))) return fail(r, "out of memory");
    memcpy(text, r->p + start, n);
    text[n] = '\0';
    ca_val *v = NULL;
    errno = 0;
    long long i = integral ? strtoll(text, &end, 10) : 0;
    if (integral && errno == 0) {
        if ((v = ca_doc_new_val(r->doc, CA_VAL_INT))) v->i = i;
    } else {
        locale_t loc = c_locale();
        double d = loc ? strtod_l(text, &end, loc) : strtod(text, &end);
        if ((v = ca_doc_new_val(r->doc, CA_VAL_FLOAT))) v->f = d;
    }
    if (text != tmp) free(text);
    return v ? v : fail(r, "out of memory");
}

static ca_val *word(jr *r, const char *w, ca_val *v) {
    size_t n = strlen(w);
    if (r->len - r->pos < n || memcmp(r->p + r->pos, w, n)) return fail(r, "expected a value, found %s", what(peek(r)));
    r->pos += n;
    return v;
}

static ca_val *value(jr *r, int depth) {
    skip_ws(r);
    int c = peek(r);
    if (c == '{' || c == '[') {
        if (depth >= CA_JSON_MAX_DEPTH) return fail(r, "nested deeper than %d", CA_JSON_MAX_DEPTH);
        int obj = c == '{';
        ca_val *v = ca_doc_new_val(r->doc, obj ? CA_VAL_DICT : CA_VAL_LIST);
        if (!v) return fail(r, "out of memory");
        r->pos++;
        skip_ws(r);
        if (peek(r) == (obj ? '}' : ']')) {
            r->pos++;
            return v;
        }
        for (;;) {
            ca_val *k = NULL;
            if (obj) {
                skip_ws(r);
                if (peek(r) != '"') return fail(r, "expected a key string, found %s", what(peek(r)));
                if (!(k = string(r))) return NULL;
                skip_ws(r);
                if (peek(r) != ':') return fail(r, "expected ':' after a key, found %s", what(peek(r)));
                r->pos++;
            }
            ca_val *item = value(r, depth + 1);
            if (!item) return NULL;
            if (obj ? ca_val_put(v, k, item) : ca_val_push(v, item)) return fail(r, "out of memory");
            skip_ws(r);
            c = peek(r);
            r->pos++;
            if (c == ',') continue;
            if (c == (obj ? '}' : ']')) return v;
            r->pos--;
            return fail(r, "expected ',' or '%c', found %s", obj ? '}' : ']', what(c));
        }
    }
    if (c == '"') return string(r);
    if (c == '-' || (c >= '0' && c <= '9')) return number(r);
    if (c == 't') return word(r, "true", ca_doc_bool(r->doc, 1));
    if (c == 'f') return word(r, "false", ca_doc_bool(r->doc, 0));
    if (c == 'n') return word(r, "null", ca_doc_new_val(r->doc, CA_VAL_NONE));
    return fail(r, "expected a value, found %s", what(c));
}

ca_doc *ca_json_parse(const char *buf, size_t len, char *err, size_t errlen) {
    jr r = {.p = buf, .len = len, .err = err, .errlen = errlen};
    if (errlen) err[0] = '\0';
    if (!(r.doc = ca_doc_new())) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ca_val *root = value(&r, 0);
    if (root) {
        skip_ws(&r);
        if (r.pos < r.len) fail(&r, "%s after the value", what(peek(&r)));
        else ca_doc_set_root(r.doc, root);
    }
    free(r.buf);
    if (r.failed) {
        ca_doc_free(r.doc);
        return NULL;
    }
    return r.doc;
}
