/* A snapshot file's bytes as a document: the pickle as
 * torch.cuda.memory._dump_snapshot() writes it, or gzipped; what people
 * take for one (a torch.save() file) named as what it is. See
 * snapshot_read.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/read/pickle_read.h"
#include "reports/read/snapshot_read.h"
#include "util/gunzip.h"

#define HOW_TO_RECORD                                                                                            \
    "make one with torch.cuda.memory._record_memory_history() before the code to look at and "                 \
    "torch.cuda.memory._dump_snapshot('snapshot.pickle') after it"

static long gz_read(void *g, unsigned char *dst, size_t n) { return ca_gz_read(g, dst, n); }
static const char *gz_error(void *g) { return ca_gz_error(g); }

static int starts_with(const void *buf, size_t len, const char *magic, size_t n) {
    return len >= n && !memcmp(buf, magic, n);
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
    /* Inflated as it is read, a piece at a time: refused at the first byte
     * that cannot be a snapshot's, never inflated whole first. */
    size_t most = ca_gz_most(len) < max_bytes ? ca_gz_most(len) : max_bytes;
    unsigned char head[4];
    ca_gz *g = ca_gz_open(buf, len, most);
    long n = g ? ca_gz_read(g, head, sizeof head) : -1;
    ca_gz_close(g);
    ca_doc *d = NULL;
    if (n >= 2 && (starts_with(head, (size_t)n, "\x1f\x8b", 2) || starts_with(head, (size_t)n, "PK\x03\x04", 4)))
        snprintf(err, errlen, "gzip: what it holds is compressed again, not a pickle");
    else if (!(g = ca_gz_open(buf, len, most)))
        snprintf(err, errlen, "out of memory");
    else if (!(d = ca_unpickle_stream(&(ca_pickle_source){gz_read, gz_error, g}, err, errlen)) && errlen &&
             strncmp(err, "gzip: ", 6)) {
        char inner[256];
        snprintf(inner, sizeof inner, "%s", err);
        snprintf(err, errlen, "gzip-compressed: %s", inner);
    }
    ca_gz_close(g);
    return d;
}
