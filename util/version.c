/* The version string, from the build's generated ca_version.h (see the
 * Makefile: it changes only when the version or the commit does). */
#include "util/version.h"

#include <stdio.h>
#include <string.h>

#include "ca_version.h"

const char *ca_version(void) { return CA_VERSION; }

const char *ca_library_file(void) { return "libcudalloc.so." CA_SOVERSION; }

void ca_print_version(const char *prog) {
    if (!strcmp(prog, "cudalloc")) printf("cudalloc %s\n", CA_VERSION);
    else printf("%s (cudalloc) %s\n", prog, CA_VERSION);
}
