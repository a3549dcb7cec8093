/* Safe creation of report files.
 *
 * A report is written to a fresh temporary file in the destination
 * directory and renamed over the final name only once it is completely
 * written, so a reader never sees half a report and a crash leaves the
 * previous one in place. The temporary file is created with
 * O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600 (whatever the umask), under a name
 * that holds a random secret of this process, so nobody can plant files at
 * the names in advance; a symlink or file at a name makes that name fail
 * (the next one is tried), never redirects the write. rename() replaces a
 * symlink at the final name by the report; the symlink's target is not
 * touched. No fsync: reports are diagnostics, and a file the kernel has not
 * yet written back is still complete to readers.
 *
 * A full disk or the file size limit (ENOSPC, EDQUOT, EFBIG on a write, the
 * flush or the close) fails the commit: the temporary file goes, a previous
 * report stays. Between open and commit/abort SIGXFSZ is blocked in the
 * calling thread (and one the writes caused is discarded), so going over
 * `ulimit -f` loses the report, not the program: open, write and commit in
 * one thread.
 *
 * Every failure comes with a one-line message (no newline) in the caller's
 * buffer, meant to be printed once. */
#ifndef CA_FILEOUT_H
#define CA_FILEOUT_H
#include <stddef.h>
#include <stdio.h>

#define CA_OUT_ERRLEN 512

/* Expands a report path template: %p -> pid, %r -> rank (environment RANK,
 * else LOCAL_RANK, else 0; a value that is not a plain non-negative number
 * is ignored, so it cannot inject path components), %% -> %. Any other
 * '%' sequence is an error. Returns a malloc'd path, or NULL with err set. */
char *ca_path_expand(const char *tmpl, char *err, size_t errlen);

/* The rank %r stands for, as a number: RANK, else LOCAL_RANK; -1 when
 * neither is a plain non-negative number (then %r expands to 0). */
int ca_rank_env(void);

typedef struct ca_out ca_out;

/* Creates the temporary file next to final_path. NULL with err set on
 * failure (directory missing or not writable, name too long, ...). */
ca_out *ca_out_open(const char *final_path, char *err, size_t errlen);
/* ca_path_expand() then ca_out_open(). */
ca_out *ca_out_open_template(const char *tmpl, char *err, size_t errlen);

/* Where to write; owned by the ca_out (do not fclose it). */
FILE *ca_out_file(ca_out *o);
/* The final path (after expansion). */
const char *ca_out_path(const ca_out *o);

/* Flushes and closes the file, checking every step, then renames it over
 * the final path. On any failure the temporary file is removed and err set.
 * Frees o either way. 0 on success. */
int ca_out_commit(ca_out *o, char *err, size_t errlen);
/* Discards the temporary file and frees o. */
void ca_out_abort(ca_out *o);

/* The i-th temporary name tried for final_path by this process (i from 0),
 * written to buf: ".BASE.PID.SECRET.tmp" in the same directory. Exposed so
 * tests can plant files at those names. Returns 0, or -1 if it does not fit. */
int ca_out_tmp_name(const char *final_path, unsigned i, char *buf, size_t len);

#endif
