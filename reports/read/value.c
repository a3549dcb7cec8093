/* Documents of plain values; see value.h. Values live in chunks owned by the
 * document, so shared or cyclic values are freed exactly once. */
#include "reports/read/value.h"

#include <stdlib.h>
#include <string.h>

#define NODE_CHUNK 4096
#define TEXT_CHUNK (64 * 1024)

typedef struct node_chunk {
    struct node_chunk *next;
    size_t used;
    ca_val v[NODE_CHUNK];
} node_chunk;

typedef struct text_chunk {
    struct text_chunk *next;
    size_t used, cap;
    char t[];
} text_chunk;

struct ca_doc {
    node_chunk *nodes;
    text_chunk *text;
    ca_val *root;
    ca_val none, yes, no;
    size_t dicts; /* distinct dicts made: what a reader may visit, counted once */
};

ca_doc *ca_doc_new(void) {
    ca_doc *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->none.kind = CA_VAL_NONE;
    d->yes.kind = d->no.kind = CA_VAL_BOOL;
    d->yes.b = 1;
    d->root = &d->none;
    return d;
}

static int is_container(ca_val_kind k) {
    return k == CA_VAL_LIST || k == CA_VAL_TUPLE || k == CA_VAL_SET || k == CA_VAL_DICT;
}

void ca_doc_free(ca_doc *d) {
    if (!d) return;
    while (d->nodes) {
        node_chunk *c = d->nodes;
        d->nodes = c->next;
        for (size_t i = 0; i < c->used; i++)
            if (is_container(c->v[i].kind)) free(c->v[i].seq.v);
        free(c);
    }
    while (d->text) {
        text_chunk *c = d->text;
        d->text = c->next;
        free(c);
    }
    free(d);
}

const ca_val *ca_doc_root(const ca_doc *d) { return d ? d->root : NULL; }
size_t ca_doc_dicts(const ca_doc *d) { return d ? d->dicts : 0; }
void ca_doc_set_root(ca_doc *d, ca_val *root) { d->root = root ? root : &d->none; }

ca_val *ca_doc_new_val(ca_doc *d, ca_val_kind k) {
    if (k == CA_VAL_NONE) return &d->none;
    if (!d->nodes || d->nodes->used == NODE_CHUNK) {
        node_chunk *c = malloc(sizeof *c);
        if (!c) return NULL;
        c->next = d->nodes;
        c->used = 0;
        d->nodes = c;
    }
    ca_val *v = &d->nodes->v[d->nodes->used++];
    memset(v, 0, sizeof *v);
    v->kind = k;
    d->dicts += k == CA_VAL_DICT;
    return v;
}

ca_val *ca_doc_bool(ca_doc *d, int v) { return v ? &d->yes : &d->no; }

static char *text_alloc(ca_doc *d, size_t n) {
    if (!d->text || d->text->cap - d->text->used < n) {
        size_t cap = n > TEXT_CHUNK / 4 ? n : TEXT_CHUNK;
        text_chunk *c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->used = 0;
        c->cap = cap;
        if (d->text && cap != TEXT_CHUNK) { /* a big one: keep filling the current chunk */
            c->next = d->text->next;
            d->text->next = c;
        } else {
            c->next = d->text;
            d->text = c;
        }
        c->used = n;
        return c->t;
    }
    char *p = d->text->t + d->text->used;
    d->text->used += n;
    return p;
}

ca_val *ca_doc_new_str(ca_doc *d, ca_val_kind k, const char *p, size_t len) {
    if (len >= SIZE_MAX / 2) return NULL;
    ca_val *v = ca_doc_new_val(d, k);
    char *t = v ? text_alloc(d, len + 1) : NULL;
    if (!t) return NULL;
    if (len) memcpy(t, p, len);
    t[len] = '\0';
    v->s.p = t;
    v->s.len = len;
    return v;
}

/* Room for `more` pointers after the `used` ones. */
static int reserve(ca_val *c, size_t used, size_t more) {
    if (used + more <= c->seq.cap) return 0;
    size_t cap = c->seq.cap ? 2 * c->seq.cap : 8;
    while (cap < used + more) cap *= 2;
    ca_val **v = realloc(c->seq.v, cap * sizeof *v);
    if (!v) return -1;
    c->seq.v = v;
    c->seq.cap = cap;
    return 0;
}

int ca_val_push(ca_val *c, ca_val *item) {
    if (!c || !is_container(c->kind) || c->kind == CA_VAL_DICT || reserve(c, c->seq.n, 1)) return -1;
    c->seq.v[c->seq.n++] = item;
    return 0;
}

int ca_val_put(ca_val *c, ca_val *key, ca_val *value) {
    if (!c || c->kind != CA_VAL_DICT || reserve(c, 2 * c->seq.n, 2)) return -1;
    c->seq.v[2 * c->seq.n] = key;
    c->seq.v[2 * c->seq.n + 1] = value;
    c->seq.n++;
    return 0;
}

const char *ca_val_kind_name(ca_val_kind k) {
    static const char *const names[] = {"None", "bool", "int", "int", "float", "str",
                                        "bytes", "list", "tuple", "set", "dict"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "value";
}

const ca_val *ca_val_get(const ca_val *v, const char *key) {
    if (!v || v->kind != CA_VAL_DICT || !key) return NULL;
    size_t len = strlen(key);
    for (size_t i = v->seq.n; i-- > 0;) {
        const ca_val *k = v->seq.v[2 * i];
        if (k->kind == CA_VAL_STR && k->s.len == len && !memcmp(k->s.p, key, len)) return v->seq.v[2 * i + 1];
    }
    return NULL;
}

size_t ca_val_len(const ca_val *v) { return v && is_container(v->kind) ? v->seq.n : 0; }

const ca_val *ca_val_item(const ca_val *v, size_t i) {
    if (!v || !is_container(v->kind) || v->kind == CA_VAL_DICT || i >= v->seq.n) return NULL;
    return v->seq.v[i];
}

const ca_val *ca_val_key_at(const ca_val *v, size_t i) {
    return v && v->kind == CA_VAL_DICT && i < v->seq.n ? v->seq.v[2 * i] : NULL;
}

const ca_val *ca_val_value_at(const ca_val *v, size_t i) {
    return v && v->kind == CA_VAL_DICT && i < v->seq.n ? v->seq.v[2 * i + 1] : NULL;
}

int ca_val_int(const ca_val *v, int64_t *out) {
    if (!v || v->kind != CA_VAL_INT) return 0;
    *out = v->i;
    return 1;
}

int ca_val_num(const ca_val *v, double *out) {
    if (v && v->kind == CA_VAL_INT) *out = (double)v->i;
    else if (v && v->kind == CA_VAL_FLOAT) *out = v->f;
    else return 0;
    return 1;
}

int ca_val_bool(const ca_val *v, int *out) {
    if (!v || v->kind != CA_VAL_BOOL) return 0;
    *out = v->b;
    return 1;
}

const char *ca_val_str(const ca_val *v) { return v && v->kind == CA_VAL_STR ? v->s.p : NULL; }
int ca_val_is_seq(const ca_val *v) { return v && (v->kind == CA_VAL_LIST || v->kind == CA_VAL_TUPLE); }
