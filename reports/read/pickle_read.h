/* A reader for Python pickles of plain data: what torch.cuda.memory.
 * _dump_snapshot() writes (pickle.dump of dicts, lists, tuples, str, int,
 * float, bool, None), by Python's pickler at protocols 2 to 5 or by
 * PyTorch's C++ pickler. No Python is involved.
 *
 * A small stack machine builds a document of values (value.h) with the
 * memo (MEMOIZE, BINPUT/LONG_BINPUT, BINGET/LONG_BINGET). Opcodes read:
 *   PROTO (2..5), FRAME, STOP, MARK, POP, POP_MARK, DUP,
 *   EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE, EMPTY_SET, TUPLE, TUPLE1..3, DICT,
 *   LIST, FROZENSET, APPEND, APPENDS, SETITEM, SETITEMS, ADDITEMS,
 *   NONE, NEWTRUE, NEWFALSE, BININT, BININT1, BININT2, LONG1, LONG4, BINFLOAT,
 *   SHORT_BINUNICODE, BINUNICODE, BINUNICODE8, SHORT_BINBYTES, BINBYTES,
 *   BINBYTES8, BYTEARRAY8 (read as bytes).
 * Anything else is refused with its name and offset: nothing that imports,
 * calls or builds an object (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ,
 * NEWOBJ, NEWOBJ_EX, EXT1..4, PERSID, BINPERSID, NEXT_BUFFER,
 * READONLY_BUFFER) is ever executed, and the text opcodes of protocols 0 and
 * 1 are not read (a protocol 2+ pickle starts with PROTO, byte 0x80).
 *
 * Strict where Python's pickler never strays: exactly one value on the stack
 * and no open MARK at STOP, nothing after STOP. Every length is checked
 * against the bytes left, memo indices against the input's size, so
 * malformed input gets a message, never a crash, and the memory used stays
 * within a small multiple of the input (an opcode makes at most one value).
 * A string (or number) longer than 16 MiB is no snapshot's: refused at its
 * length. */
#ifndef CA_PICKLE_READ_H
#define CA_PICKLE_READ_H
#include <stddef.h>

#include "reports/read/value.h"

/* The document read from buf[0..len), or NULL with "offset N: what is
 * wrong" (or "out of memory ...") in err, always terminated when errlen > 0. */
ca_doc *ca_unpickle(const void *buf, size_t len, char *err, size_t errlen);
/* The same read from a stream (a gzip file as it inflates) a piece at a time:
 * a byte that cannot be a snapshot's pickle is refused without reading the
 * rest (issue 30: a 2 MB gzip of zeros was inflated to 2 GiB first). read
 * fills dst[0..n) and returns n, fewer only at the end, or -1; then error
 * says why (the message given as it is). */
typedef struct ca_pickle_source {
    long (*read)(void *ctx, unsigned char *dst, size_t n);
    const char *(*error)(void *ctx);
    void *ctx;
} ca_pickle_source;
ca_doc *ca_unpickle_stream(const ca_pickle_source *src, char *err, size_t errlen);

#endif
