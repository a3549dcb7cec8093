/* A report path prefix ("runs/r%r-%p" writes runs/r0-1234.txt, .json, ...):
 * checked once, where it is given (CUDALLOC_CONF, CUDALLOC_REPORT, the
 * launcher's --report), so a bad one is refused at start, not at exit. */
#ifndef CA_PREFIX_H
#define CA_PREFIX_H

#include <stddef.h>

/* 0 if tmpl is a usable prefix: not empty, every % one of %p (pid), %r (rank),
 * %% (a '%'), and a file name after the last '/'. Otherwise -1 and one line
 * in err saying what is wrong and what is accepted (without a source name:
 * the caller puts "CUDALLOC_CONF: " or "--report: " before it). */
int ca_prefix_check(const char *tmpl, char *err, size_t errlen);

#endif
