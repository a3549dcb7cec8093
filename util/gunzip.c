/* One inflate stream, reset at each member's end; the buffer doubles up to
 * max, so a bomb is refused at max bytes, not at the memory's end. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "util/gunzip.h"

int ca_is_gzip(const void *buf, size_t len) {
    return len >= 2 && ((const unsigned char *)buf)[0] == 0x1f && ((const unsigned char *)buf)[1] == 0x8b;
}

int ca_gunzip(const unsigned char *in, size_t len, size_t max, unsigned char **out, size_t *out_len, char *err,
                  size_t errlen) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
        snprintf(err, errlen, "gzip: cannot start zlib");
        return -1;
    }
    size_t cap = len < (SIZE_MAX / 4) ? 4 * len + 4096 : len, n = 0;
    if (cap > max) cap = max ? max : 1;
    unsigned char *buf = malloc(cap);
    int rc = buf ? Z_OK : Z_MEM_ERROR;
    z.next_in = (unsigned char *)in;
    while (rc == Z_OK) {
        size_t left = len - (size_t)(z.next_in - in);
        if (n == cap) {
            if (cap >= max) {
                snprintf(err, errlen, "gzip: it inflates past %zu bytes, the most read", max);
                rc = Z_DATA_ERROR;
                break;
            }
            size_t grow = cap > max - cap ? max : 2 * cap;
            unsigned char *g = realloc(buf, grow);
            if (!g) { rc = Z_MEM_ERROR; break; }
            buf = g;
            cap = grow;
        }
        z.avail_in = left > UINT_MAX ? UINT_MAX : (unsigned)left;
        z.next_out = buf + n;
        z.avail_out = cap - n > UINT_MAX ? UINT_MAX : (unsigned)(cap - n);
        unsigned before = z.avail_out;
        rc = inflate(&z, Z_NO_FLUSH);
        n += before - z.avail_out;
        if (rc == Z_STREAM_END) { /* another member, or the end */
            left = len - (size_t)(z.next_in - in);
            if (!left) break;
            if (!ca_is_gzip(z.next_in, left)) {
                snprintf(err, errlen, "gzip: %zu bytes after the compressed data", left);
                rc = Z_DATA_ERROR;
                break;
            }
            rc = inflateReset(&z);
        } else if (rc == Z_BUF_ERROR && z.avail_out) { /* wants more input: there is none */
            snprintf(err, errlen, "gzip: the compressed data is cut short (truncated)");
            rc = Z_DATA_ERROR;
        }
    }
    if (rc == Z_MEM_ERROR) snprintf(err, errlen, "gzip: out of memory inflating it");
    else if (rc != Z_STREAM_END && !*err) snprintf(err, errlen, "gzip: %s", z.msg ? z.msg : "corrupt data");
    inflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(buf);
        return -1;
    }
    *out = buf;
    *out_len = n;
    return 0;
}
