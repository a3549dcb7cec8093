/* The preload's messages; see log.h. */
#include "preload/log.h"

#include <stdarg.h>
#include <stdio.h>

void ca_warn(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cudalloc: %s\n", buf);
}
