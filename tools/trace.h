/* RMM-style allocation logs (CSV), as RMM's logging_resource_adaptor writes
 * them and its replay benchmark reads them:
 *
 *   Thread,Time,Action,Pointer,Size,Stream
 *   1,0,allocate,0x7f0000000000,15360000,0x0
 *   1,5,free,0x7f0000000000,15360000,0x0
 *
 * Actions: `allocate`, `free`, `allocate failure`, and cudalloc's own
 * `iteration` (an iteration boundary; Size carries the iteration number, Pointer
 * is ignored). Pointer is an identifier, not an address; Thread, Pointer and
 * Stream are hex (0x...) or decimal; Size is decimal bytes (on `free` rows it may
 * be 0, else it must equal the allocation's size); each is any value that fits
 * in 64 bits, read exactly (a larger one is an error); Time is kept as opaque text
 * (RMM writes a clock time, converted traces an index) and is not read. CRLF,
 * blank lines and blanks around fields are tolerated. A bad row is an error,
 * except the last line when no newline ends it and it is not a whole row: the
 * tail of a log whose writer was killed (RMM's documentation warns the tail
 * is lost so). That line is left out and named (cut_line); the rows before
 * it are read.
 *
 * Each allocation gets a dense id: the id most recently given up by a free,
 * else a new one, so n_ids is the most allocations live at once and a replay
 * can keep its pointers in an array of n_ids entries instead of a hash table. */
#ifndef CA_TRACE_H
#define CA_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    CA_TRACE_ALLOC,
    CA_TRACE_FREE,
    CA_TRACE_ALLOC_FAIL, /* an allocation that failed when recorded */
    CA_TRACE_ITERATION,  /* replay ignores it; reports use it */
    CA_TRACE_KINDS
} ca_trace_kind;

#define CA_TRACE_NO_ID UINT32_MAX /* id of ALLOC_FAIL and ITERATION ops */

typedef struct ca_trace_op {
    uint64_t ptr;    /* the Pointer column (an identifier) */
    uint64_t size;   /* bytes; on FREE the allocation's size; on ITERATION its number */
    uint64_t stream;
    uint64_t thread;
    uint32_t id;     /* dense index, < n_ids; CA_TRACE_NO_ID when not an allocation */
    uint32_t line;   /* line in the file, for messages */
    ca_trace_kind kind;
} ca_trace_op;

typedef struct ca_trace {
    ca_trace_op *ops;
    size_t n_ops;
    uint32_t n_ids;                  /* ids in use: the most allocations live at once */
    size_t count[CA_TRACE_KINDS];    /* ops of each kind */
    uint64_t peak_live_bytes;        /* sum of live allocation sizes, at its highest
                                        (UINT64_MAX when it passed 2^64 - 1) */
    size_t live_at_end;              /* allocations never freed */
    uint32_t cut_line;               /* the last line, cut short and left out; 0 none */
    char cut_why[160];               /* what is wrong with it, as an error would say */
} ca_trace;

/* Parse a whole file (plain or gzipped: trace.csv.gz) or a buffer (plain; name
 * used in messages). 0 on success, with
 * *out filled (free it with ca_trace_free). -1 on error, with *out empty and
 * "NAME:LINE: what is wrong" in err (always terminated when errlen > 0).
 * Never exits, never crashes on bad input. */
int ca_trace_parse_file(const char *path, ca_trace *out, char *err, size_t errlen);
int ca_trace_parse_buffer(const char *name, const char *buf, size_t len, ca_trace *out,
                          char *err, size_t errlen);
void ca_trace_free(ca_trace *t);
/* One line on f when the last line was cut short (cut_line): "TOOL: NAME:LINE:
 * warning: ..."; nothing otherwise. */
void ca_trace_warn_cut(const ca_trace *t, const char *tool, const char *name, FILE *f);

/* The granule to replay t with on a device of `capacity` bytes (0: without
 * limit): a device's 2 MiB, unless the trace's live bytes at their peak (as
 * much as such a device can hold) would fill more granules than 4 per row
 * (65536 at least); then the smallest power of two that keeps to that, so
 * that a replay's time and memory follow the file's rows, never the sizes it
 * names (issue 30: 64 rows of a TiB took 2.4 GiB and 12 s). */
size_t ca_trace_granule(const ca_trace *t, size_t capacity);
/* One line on f when that granule is not 2 MiB: "TOOL: NAME: note: ..."; nothing otherwise. */
void ca_trace_warn_granule(const ca_trace *t, size_t capacity, const char *tool, const char *name, FILE *f);

const char *ca_trace_kind_name(ca_trace_kind k); /* "allocate", "free", ... */

#endif
