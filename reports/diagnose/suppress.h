/* Suppressions: call sites whose memory is known (a cache kept on purpose, a
 * library's pool) and is not reported as a leak or as memory still live,
 * valgrind's --suppressions habit. The reports count what they left out.
 *
 * A file of patterns, one a line; blank lines and lines starting with '#'
 * are skipped. A pattern is a glob (fnmatch: * ? [...]) matched against
 * each frame of a call site; "fun:GLOB" matches the function only,
 * "src:GLOB" the source as "file:line" (a bare file name matches it too),
 * "obj:GLOB" the module (the shared object, or "python"), a bare GLOB any
 * of them. A site is suppressed when any of its frames matches any pattern. */
#ifndef CA_SUPPRESS_H
#define CA_SUPPRESS_H
#include <stddef.h>

#include "reports/capture/symbolize.h"

typedef struct ca_suppressions {
    char **pattern;
    size_t n;
} ca_suppressions;

/* Reads the file. 0, or -1 with "PATH: why" (line number included for a bad
 * line) in err; *out is empty then. */
int ca_suppressions_load(const char *path, ca_suppressions *out, char *err, size_t errlen);
/* Does any of the n frames match a pattern? */
int ca_suppressions_match(const ca_suppressions *s, const ca_frame *const *frames, size_t n);
void ca_suppressions_free(ca_suppressions *s);

#endif
