/* Where a process under cudalloc publishes its live figures, and how a reader
 * tells that process from a later one with the same PID: shared by the
 * preload that writes the file (preload/live.c) and the tool that reads it
 * (tools/status.c), so both always agree. */
#ifndef CA_LIVE_FILE_H
#define CA_LIVE_FILE_H
#include <stddef.h>

/* The status folder of user uid whose process has XDG_RUNTIME_DIR=xdg (NULL
 * or "" when unset): xdg/cudalloc when xdg is an absolute path to a folder of
 * that user, else /tmp/cudalloc-UID. */
void ca_live_dir(const char *xdg, unsigned uid, char *buf, size_t n);

/* Field 22 of /proc/PID/stat (pid 0: this process), the clock tick it
 * started at; 0 when unreadable. */
unsigned long long ca_proc_start_ticks(long pid);

#endif
