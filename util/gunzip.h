/* gzip streams inflated in memory (zlib): a PyTorch snapshot people keep
 * as snapshot.pickle.gz, an RMM trace as trace.csv.gz. Link with -lz. */
#ifndef CA_GUNZIP_H
#define CA_GUNZIP_H
#include <stddef.h>

/* Whether buf starts with gzip's magic bytes (0x1f 0x8b). */
int ca_is_gzip(const void *buf, size_t len);

/* A gzip stream in[0..len) (one member or several) inflated a piece at a
 * time, at most max bytes in all: a reader that finds a bad byte stops there
 * without inflating the rest. ca_gz_read fills dst[0..n) and returns n, fewer
 * only at the end (0: nothing more), or -1 with ca_gz_error's message
 * ("gzip: ..."). NULL from ca_gz_open: out of memory. */
typedef struct ca_gz ca_gz;
ca_gz *ca_gz_open(const unsigned char *in, size_t len, size_t max);
long ca_gz_read(ca_gz *g, unsigned char *dst, size_t n);
const char *ca_gz_error(const ca_gz *g);
void ca_gz_close(ca_gz *g);

/* The most a gzip file of `compressed` bytes is inflated to when read:
 * 32 times that, and 16 MiB more. Snapshots and traces compress 10 to 25
 * times; a file that inflates further is a bomb, refused at that size, so
 * that the work of reading it follows the file handed over. */
size_t ca_gz_most(size_t compressed);

/* The gzip stream in[0..len) (one member or several, as `cat a.gz b.gz`
 * makes) inflated into *out (malloc'd), at most max bytes. 0, or -1 with a
 * message starting "gzip: " in err. */
int ca_gunzip(const unsigned char *in, size_t len, size_t max, unsigned char **out, size_t *out_len, char *err,
              size_t errlen);

#endif
