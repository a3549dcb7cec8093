/* A small strict JSON reader (RFC 8259) into a document of values
 * (value.h), for reading cudalloc's own JSON reports back.
 *
 * Strict: one value and only whitespace around it; no comments, trailing
 * commas, single quotes, NaN or leading zeros; strings must be valid UTF-8
 * without raw control characters, and \u escapes must pair their
 * surrogates. Numbers without a fraction or exponent that fit int64 are
 * CA_VAL_INT, the others CA_VAL_FLOAT (read whatever the locale). Nesting
 * deeper than CA_JSON_MAX_DEPTH is refused, so the reader's recursion and
 * any walk of what it returns stay bounded. A repeated key is kept;
 * ca_val_get() finds the last one, as most JSON readers do. */
#ifndef CA_JSON_READ_H
#define CA_JSON_READ_H
#include <stddef.h>

#include "reports/read/value.h"

#define CA_JSON_MAX_DEPTH 256

/* The document read from buf[0..len), or NULL with "line L, column C: what
 * is wrong" in err (always terminated when errlen > 0). */
ca_doc *ca_json_parse(const char *buf, size_t len, char *err, size_t errlen);

#endif
