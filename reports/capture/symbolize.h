/* Turning return addresses into {function, file, line}: only when a report
 * is written, never on the allocation path.
 *
 * Every address gets its module and, where the module exports one, a symbol
 * name from the dynamic loader (dladdr). Then, per module, one `addr2line -f
 * -C` process is given all of that module's addresses at once (so a report
 * costs one process per module, not one per frame) and answers with the
 * function (demangled), file and line from the debug information. All
 * addr2line runs of one resolve share a deadline; a module not done by then
 * keeps the dladdr answer. The child gets the environment without
 * LD_PRELOAD and the injection paths, so cudalloc does not load into it.
 *
 * Measured (tests/reports/tracking/test_report): resolving a Check test
 * binary's frames costs one addr2line start, about 10-30 ms. */
#ifndef CA_SYMBOLIZE_H
#define CA_SYMBOLIZE_H
#include <stddef.h>
#include <stdint.h>

typedef struct ca_frame {
    uintptr_t ip;
    const char *function; /* never NULL: "??" when unknown */
    const char *file;     /* never NULL: "??" when unknown */
    unsigned line;        /* 0 when unknown */
    const char *module;   /* path of the object, "??" when unknown */
} ca_frame;

typedef struct ca_symtab ca_symtab;

ca_symtab *ca_symtab_new(void);
void ca_symtab_free(ca_symtab *s);

/* Adds a return address to resolve (duplicates are fine). 0, or -1 out of memory. */
int ca_symtab_add(ca_symtab *s, uintptr_t ip);

/* Resolves everything added. use_addr2line 0: dladdr only. timeout_ms bounds
 * all addr2line runs together. Returns the modules addr2line answered for. */
int ca_symtab_resolve(ca_symtab *s, int use_addr2line, int timeout_ms);

/* The frame of an added address (after resolve); NULL if it was never added. */
const ca_frame *ca_symtab_get(const ca_symtab *s, uintptr_t ip);

/* Is this one of cudalloc's own frames (function ca_* or cudalloc_*)? Used to
 * drop the leading frames of a stack captured in a statically linked program. */
int ca_frame_is_own(const ca_frame *f);

#endif
