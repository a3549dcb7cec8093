/* Streaming Python pickle encoder for PyTorch memory snapshots (the schema
 * cudalloc writes is in reports/SNAPSHOT.md).
 *
 * Emits only opcodes that PyTorch's memory_viz reader
 * (torch/utils/viz/MemoryViz.js, unpickle()) understands, with the same
 * framing-free protocol-4 shape Python's own pickler gives a snapshot:
 *   PROTO 4, EMPTY_DICT, EMPTY_LIST, MARK, SETITEMS, APPENDS (batches of
 *   1000, as Python batches them), SHORT_BINUNICODE, BINUNICODE, MEMOIZE,
 *   BINGET, LONG_BINGET (repeated strings are written once), BININT1,
 *   BININT2, BININT, LONG1 (at most 8 bytes), BINFLOAT, NEWTRUE, NEWFALSE,
 *   NONE, TUPLE2 (a pair of ints, as PyTorch's segment_pool_id), STOP.
 *
 * Usage: create, build exactly one top-level value with the begin/end and
 * value calls, then ca_pkl_finish(). Errors (unbalanced nesting, a value
 * where a dict key is due, a second top-level value, I/O failure, out of
 * memory) are sticky: the first one is kept, later calls do nothing and
 * return -1, and ca_pkl_error() says what went wrong. A writer in error
 * never emits STOP, so a half-written file cannot load as a valid snapshot.
 *
 * In FILE* mode output is flushed as it grows, so a writer that fails part
 * way leaves a truncated file: write through ca_out (fileout.h) and call
 * ca_out_abort() when ca_pkl_finish() fails.
 *
 *     ca_pkl *p = ca_pkl_new_file(ca_out_file(out));
 *     ca_pkl_dict_begin(p);
 *     ca_pkl_kv_uint(p, "address", seg_addr);
 *     ca_pkl_key(p, "blocks");
 *     ca_pkl_list_begin(p);  ...  ca_pkl_list_end(p);
 *     ca_pkl_dict_end(p);
 *     if (ca_pkl_finish(p)) { warn once: ca_pkl_error(p); ca_out_abort(out); }
 *     else ca_out_commit(out, err, sizeof err);
 *     ca_pkl_free(p);
 *
 * Integers: any int64, and uint64 up to INT64_MAX. Larger uint64 values are
 * refused: they need a 9-byte LONG1, which older MemoryViz.js throws on and
 * newer turns into a BigInt that breaks its address arithmetic. MemoryViz
 * reads LONG1 through Number(), exact up to 2^53; ca_pkl_js_inexact() counts
 * the integers written beyond that (real device addresses stay far below). */
#ifndef CA_PICKLE_H
#define CA_PICKLE_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ca_pkl ca_pkl;

/* Writes to f (not closed by ca_pkl_free; the caller checks and closes it). */
ca_pkl *ca_pkl_new_file(FILE *f);
/* Accumulates into a growable memory buffer, read with ca_pkl_data(). */
ca_pkl *ca_pkl_new_buf(void);
void ca_pkl_free(ca_pkl *p);

int ca_pkl_dict_begin(ca_pkl *p);
int ca_pkl_dict_end(ca_pkl *p);
int ca_pkl_list_begin(ca_pkl *p);
int ca_pkl_list_end(ca_pkl *p);

/* Dict keys are strings; invalid UTF-8 is replaced by U+FFFD. */
int ca_pkl_key(ca_pkl *p, const char *k);

/* Values: at top level, in a list, or after a key in a dict. */
int ca_pkl_str(ca_pkl *p, const char *s);            /* NULL writes None */
int ca_pkl_strn(ca_pkl *p, const char *s, size_t n); /* may hold NULs */
int ca_pkl_int(ca_pkl *p, int64_t v);
int ca_pkl_uint(ca_pkl *p, uint64_t v);
int ca_pkl_float(ca_pkl *p, double v);
int ca_pkl_bool(ca_pkl *p, int v);
int ca_pkl_none(ca_pkl *p);
/* The tuple (a, b): Python reads a tuple, MemoryViz a two-element array. */
int ca_pkl_int_pair(ca_pkl *p, int64_t a, int64_t b);

/* key + value in one call, for the many flat fields of a snapshot. */
int ca_pkl_kv_str(ca_pkl *p, const char *k, const char *v);
int ca_pkl_kv_int(ca_pkl *p, const char *k, int64_t v);
int ca_pkl_kv_uint(ca_pkl *p, const char *k, uint64_t v);
int ca_pkl_kv_float(ca_pkl *p, const char *k, double v);
int ca_pkl_kv_bool(ca_pkl *p, const char *k, int v);

/* Checks that exactly one complete value was written, emits STOP and
 * flushes (to the FILE*, which stays open). 0 on success. */
int ca_pkl_finish(ca_pkl *p);

/* NULL while no error has happened, else a one-line message. */
const char *ca_pkl_error(const ca_pkl *p);
/* Bytes produced so far (buffer mode; NULL for a FILE* writer). */
const unsigned char *ca_pkl_data(const ca_pkl *p, size_t *len);
/* Integers written whose magnitude exceeds 2^53 (inexact in JavaScript). */
size_t ca_pkl_js_inexact(const ca_pkl *p);

#endif
