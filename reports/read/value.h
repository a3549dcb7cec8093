/* Plain values read from a file: what the pickle reader (pickle_read.h)
 * and the JSON reader (json_read.h) build, and what the code that
 * understands a format (a PyTorch snapshot, a cudalloc JSON report) walks.
 *
 * A document owns every value in it and frees them all at once. Values may
 * be shared (a pickle's memo hands the same list out twice) and, in a
 * hostile pickle, even contain themselves: walk known paths, or bound the
 * depth of any generic walk. Values are read-only once the reader returns.
 *
 *     const ca_val *root = ca_doc_root(doc);
 *     const ca_val *segs = ca_val_get(root, "segments");     NULL: no such key
 *     for (size_t i = 0; i < ca_val_len(segs); i++) {
 *         const ca_val *seg = ca_val_item(segs, i);
 *         int64_t addr;
 *         if (ca_val_int(ca_val_get(seg, "address"), &addr)) ...
 *     }
 */
#ifndef CA_VALUE_H
#define CA_VALUE_H
#include <stddef.h>
#include <stdint.h>

typedef enum {
    CA_VAL_NONE,   /* None, null */
    CA_VAL_BOOL,
    CA_VAL_INT,    /* fits int64 */
    CA_VAL_BIGINT, /* an integer beyond int64 (its value is not kept); big_negative says its sign */
    CA_VAL_FLOAT,
    CA_VAL_STR,    /* the bytes as written (UTF-8 from Python and JSON), NUL-terminated */
    CA_VAL_BYTES,
    CA_VAL_LIST,
    CA_VAL_TUPLE,
    CA_VAL_SET,    /* set and frozenset */
    CA_VAL_DICT,   /* pairs in the order written; a repeated key: the last one counts */
} ca_val_kind;

typedef struct ca_val ca_val;
struct ca_val {
    ca_val_kind kind;
    union {
        int b;                                  /* BOOL */
        int64_t i;                              /* INT */
        int big_negative;                       /* BIGINT */
        double f;                               /* FLOAT */
        struct { const char *p; size_t len; } s; /* STR, BYTES (may hold NULs) */
        struct { ca_val **v; size_t n, cap; } seq; /* LIST/TUPLE/SET: n items;
                                                      DICT: n pairs, v[2k] key, v[2k+1] value */
    };
};

typedef struct ca_doc ca_doc;

/* ---- reading ---- */

const ca_val *ca_doc_root(const ca_doc *d);
/* How many distinct dicts the document holds. A pickle may name one object
 * many times (its memo): a reader that visits more dicts than this is led
 * round the same ones, and can bound its work by the file, not its claims. */
size_t ca_doc_dicts(const ca_doc *d);
void ca_doc_free(ca_doc *d);

/* "dict", "list", "int", ... for messages ("found a list"). */
const char *ca_val_kind_name(ca_val_kind k);

/* The value of the last pair whose key is the string `key`; NULL when v is
 * not a dict or has no such key. */
const ca_val *ca_val_get(const ca_val *v, const char *key);
/* Items of a list, tuple or set; pairs of a dict; 0 for anything else or NULL. */
size_t ca_val_len(const ca_val *v);
/* Item i of a list, tuple or set; NULL when out of range or not one of those. */
const ca_val *ca_val_item(const ca_val *v, size_t i);
/* Key and value of pair i of a dict (NULL when out of range). */
const ca_val *ca_val_key_at(const ca_val *v, size_t i);
const ca_val *ca_val_value_at(const ca_val *v, size_t i);

/* Typed reads: 1 and *out set when v is of that kind (an int is also read
 * as a double by ca_val_num; a bool is not an int), else 0. */
int ca_val_int(const ca_val *v, int64_t *out);
int ca_val_num(const ca_val *v, double *out);
int ca_val_bool(const ca_val *v, int *out);
const char *ca_val_str(const ca_val *v); /* NULL unless a str */
int ca_val_is_seq(const ca_val *v);      /* list or tuple */

/* ---- building (the readers) ---- */

ca_doc *ca_doc_new(void);
void ca_doc_set_root(ca_doc *d, ca_val *root);
/* A new value of kind k (scalars zeroed, containers empty); NULL out of memory.
 * NONE, and BOOL through ca_doc_bool, are shared singletons. */
ca_val *ca_doc_new_val(ca_doc *d, ca_val_kind k);
ca_val *ca_doc_bool(ca_doc *d, int v);
/* STR or BYTES holding a copy of p[0..len) (NUL added). */
ca_val *ca_doc_new_str(ca_doc *d, ca_val_kind k, const char *p, size_t len);
/* Appends an item to a list, tuple or set; a pair to a dict. 0, or -1 out
 * of memory or when the container is not of that kind. */
int ca_val_push(ca_val *seq, ca_val *item);
int ca_val_put(ca_val *dict, ca_val *key, ca_val *value);

#endif
