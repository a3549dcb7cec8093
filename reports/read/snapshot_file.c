/* A snapshot file's bytes as a document: the pickle as
 * torch.cuda.memory._dump_snapshot() writes it, or gzipped; what people
 * take for one (a torch.save() file) named as what it is. See
 * snapshot_read.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "reports/read/pickle_read.h"
#include "reports/read/snapshot_read.h"

#define HOW_TO_RECORD                                                                                            \
    "make one with torch.cuda.memory._record_memory_history() before the code to look at and "                 \
    "torch.cuda.memory._dump_snapshot('snapshot.pickle') after it"

static int starts_with(const void *buf, size_t len, const char *magic, size_t n) {
    return len >= n && !memcmp(buf, magic, n);
}

/* The gzip stream (one member or several, as `cat a.gz b.gz` makes)
 * inflated into *out, at most max bytes. 0, or -1 with a message. */
static int gunzip(const unsigned char *in, size_t len, size_t max, unsigned char **out, size_t *out_len, char *err,
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
            if (!starts_with(z.next_in, left, "\x1f\x8b", 2)) {
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

ca_doc *ca_snapshot_unpickle(const void *buf, size_t len, size_t max_bytes, char *err, size_t errlen) {
    if (errlen) err[0] = '\0';
    /* torch.save()'s two formats: a zip archive (since 1.6), or pickles
     * behind a LONG1 magic number 0x1950a86a20f9469cfc6c (before) */
    if (starts_with(buf, len, "PK\x03\x04", 4) || starts_with(buf, len, "PK\x05\x06", 4)) {
        snprintf(err, errlen, "a zip archive, as torch.save() writes (a model or tensors), not a memory snapshot: %s",
                 HOW_TO_RECORD);
        return NULL;
    }
    if (starts_with(buf, len, "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14)) {
        snprintf(err, errlen, "a torch.save() file (its legacy format), not a memory snapshot: %s", HOW_TO_RECORD);
        return NULL;
    }
    if (!starts_with(buf, len, "\x1f\x8b", 2)) return ca_unpickle(buf, len, err, errlen);
    unsigned char *raw;
    size_t n;
    if (gunzip(buf, len, max_bytes, &raw, &n, err, errlen)) return NULL;
    ca_doc *d = NULL;
    if (starts_with(raw, n, "\x1f\x8b", 2) || starts_with(raw, n, "PK\x03\x04", 4))
        snprintf(err, errlen, "gzip: what it holds is compressed again, not a pickle");
    else if (!(d = ca_unpickle(raw, n, err, errlen)) && errlen) {
        char inner[256];
        snprintf(inner, sizeof inner, "%s", err);
        snprintf(err, errlen, "gzip-compressed: %s", inner);
    }
    free(raw);
    return d;
}
