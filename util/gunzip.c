/* One inflate stream, reset at each member's end, inflated a piece at a time
 * into the caller's buffer: a reader that refuses at the first bad byte never
 * inflates the rest, and a bomb is refused at the most allowed, not at the
 * memory's end. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "util/gunzip.h"

struct ca_gz {
    z_stream z;
    const unsigned char *in;
    size_t len, max, out; /* out: bytes inflated so far */
    int done;             /* 1: the end reached; -1: failed (err says why) */
    char err[200];
};

int ca_is_gzip(const void *buf, size_t len) {
    return len >= 2 && ((const unsigned char *)buf)[0] == 0x1f && ((const unsigned char *)buf)[1] == 0x8b;
}

ca_gz *ca_gz_open(const unsigned char *in, size_t len, size_t max) {
    ca_gz *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    if (inflateInit2(&g->z, 16 + MAX_WBITS) != Z_OK) {
        free(g);
        return NULL;
    }
    g->in = in, g->len = len, g->max = max;
    g->z.next_in = (unsigned char *)in;
    return g;
}

static long failed(ca_gz *g, const char *why) {
    if (g->done != -1) snprintf(g->err, sizeof g->err, "gzip: %s", why);
    g->done = -1;
    return -1;
}

long ca_gz_read(ca_gz *g, unsigned char *dst, size_t n) {
    size_t got = 0;
    while (got < n && !g->done) {
        if (g->out == g->max) {
            char why[120];
            snprintf(why, sizeof why, "it inflates past %zu bytes, the most read from %zu compressed (a bomb?)", g->max,
                     g->len);
            return failed(g, why);
        }
        size_t left = g->len - (size_t)(g->z.next_in - g->in), room = n - got;
        if (room > g->max - g->out) room = g->max - g->out;
        g->z.avail_in = left > UINT_MAX ? UINT_MAX : (unsigned)left;
        g->z.next_out = dst + got;
        g->z.avail_out = room > UINT_MAX ? UINT_MAX : (unsigned)room;
        unsigned before = g->z.avail_out;
        int rc = inflate(&g->z, Z_NO_FLUSH);
        got += before - g->z.avail_out;
        g->out += before - g->z.avail_out;
        if (rc == Z_STREAM_END) { /* another member, or the end */
            left = g->len - (size_t)(g->z.next_in - g->in);
            if (!left) {
                g->done = 1;
            } else if (!ca_is_gzip(g->z.next_in, left)) {
                char why[120];
                snprintf(why, sizeof why, "%zu bytes after the compressed data", left);
                return failed(g, why);
            } else if (inflateReset(&g->z) != Z_OK) {
                return failed(g, "cannot restart zlib");
            }
        } else if (rc == Z_BUF_ERROR && g->z.avail_out) { /* wants more input: there is none */
            return failed(g, "the compressed data is cut short (truncated)");
        } else if (rc == Z_MEM_ERROR) {
            return failed(g, "out of memory inflating it");
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            return failed(g, g->z.msg ? g->z.msg : "corrupt data");
        }
    }
    return g->done == -1 ? -1 : (long)got;
}

const char *ca_gz_error(const ca_gz *g) { return g->err; }

size_t ca_gz_most(size_t compressed) {
    size_t floor = (size_t)16 << 20;
    return compressed > (SIZE_MAX - floor) / 32 ? SIZE_MAX : 32 * compressed + floor;
}

void ca_gz_close(ca_gz *g) {
    if (!g) return;
    inflateEnd(&g->z);
    free(g);
}

int ca_gunzip(const unsigned char *in, size_t len, size_t max, unsigned char **out, size_t *out_len, char *err,
              size_t errlen) {
    ca_gz *g = ca_gz_open(in, len, max);
    size_t cap = len < (SIZE_MAX / 4) ? 4 * len + 4096 : len, n = 0;
    if (cap > max) cap = max ? max : 1;
    unsigned char *buf = g ? malloc(cap) : NULL;
    long got = buf ? 0 : -1;
    while (buf) {
        if (n == cap) {
            if (cap == max) { /* full: the end must come now */
                unsigned char more;
                got = ca_gz_read(g, &more, 1);
                break;
            }
            size_t grow = cap > max - cap ? max : 2 * cap;
            unsigned char *bigger = realloc(buf, grow);
            if (!bigger) {
                got = -1;
                break;
            }
            buf = bigger, cap = grow;
        }
        if ((got = ca_gz_read(g, buf + n, cap - n)) <= 0) break;
        n += (size_t)got;
    }
    if (got < 0 || !buf) {
        snprintf(err, errlen, "%s", g && buf && *ca_gz_error(g) ? ca_gz_error(g) : "gzip: out of memory inflating it");
        free(buf);
        ca_gz_close(g);
        return -1;
    }
    ca_gz_close(g);
    *out = buf;
    *out_len = n;
    return 0;
}
