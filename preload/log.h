/* The preload's messages on stderr, each one line prefixed "cudalloc: ".
 * Safe from any thread; not from a signal handler (stdio). */
#ifndef CA_PRELOAD_LOG_H
#define CA_PRELOAD_LOG_H

/* One message, one line (the caller exits after it when it must). */
void ca_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
