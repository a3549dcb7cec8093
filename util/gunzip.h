/* gzip streams inflated in memory (zlib): a PyTorch snapshot people keep
 * as snapshot.pickle.gz, an RMM trace as trace.csv.gz. Link with -lz. */
#ifndef CA_GUNZIP_H
#define CA_GUNZIP_H
#include <stddef.h>

/* Whether buf starts with gzip's magic bytes (0x1f 0x8b). */
int ca_is_gzip(const void *buf, size_t len);

/* The gzip stream in[0..len) (one member or several, as `cat a.gz b.gz`
 * makes) inflated into *out (malloc'd), at most max bytes. 0, or -1 with a
 * message starting "gzip: " in err. */
int ca_gunzip(const unsigned char *in, size_t len, size_t max, unsigned char **out, size_t *out_len, char *err,
              size_t errlen);

#endif
