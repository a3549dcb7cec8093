/* A fake device for the allocator's unit tests: the count backend plus
 * events and fences whose progress the test sets (fences 1..passed are done),
 * counting what the allocator asked, and a spy on unmaps. */
#ifndef CA_TESTS_FAKE_DEVICE_H
#define CA_TESTS_FAKE_DEVICE_H
#include <check.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/backend.h"

#define UNNAMEABLE ((ca_stream)0xbad1) /* a stream another thread owns: waits on it fail */

static struct fake {
    uint64_t recorded, passed; /* fences 1..recorded exist; 1..passed are done */
    int records, queries, waits, destroys, stream_waits, done_records;
    int fail_record;           /* fence_record (and fence_record_done) fails */
    int fail_wait;             /* fence_wait cannot wait */
    int fail_sync;             /* stream_sync cannot wait */
    int ordered;               /* fence_record answers 0: later work is ordered after it */
    uintptr_t unmapped[4096];  /* granule addresses unmapped, in order */
    int n_unmapped;
    size_t granule;
    int (*unmap)(void *self, uintptr_t addr, size_t size);
} fk;

static int f_record(void *self, ca_fence *f) {
    fk.records++;
    if (fk.fail_record) return CA_ERR_BACKEND;
    *f = fk.ordered ? 0 : ++fk.recorded;
    return CA_OK;
}
static int f_record_done(void *self, ca_fence *f) {
    fk.done_records++;
    if (fk.fail_record) return CA_ERR_BACKEND;
    *f = ++fk.recorded;
    return CA_OK;
}
static int f_query(void *self, ca_fence f) {
    fk.queries++;
    return f <= fk.passed;
}
static int f_wait(void *self, ca_fence f) {
    fk.waits++;
    if (fk.fail_wait) return 0;
    if (fk.passed < f) fk.passed = f;
    return 1;
}
static void f_destroy(void *self, ca_fence f) { fk.destroys++; }
static int e_record(void *self, ca_stream s, ca_event *ev) {
    *ev = 1;
    return CA_OK;
}
static int s_wait(void *self, ca_stream s, ca_event ev) {
    fk.stream_waits++;
    return s == UNNAMEABLE ? CA_ERR_INVALID : CA_OK;
}
static void e_destroy(void *self, ca_event ev) {}
static int s_sync(void *self, ca_stream s) { return fk.fail_sync ? CA_ERR_BACKEND : CA_OK; }
static int spy_unmap(void *self, uintptr_t addr, size_t size) {
    for (size_t off = 0; off < size && fk.n_unmapped < 4096; off += fk.granule) fk.unmapped[fk.n_unmapped++] = addr + off;
    return fk.unmap(self, addr, size);
}

/* be with the fake's events and fences (and, with `done`, fence_record_done
 * and stream_sync: what unmapping memory freed with work behind it needs);
 * the spy on its unmaps in any case. The fake starts from zero. */
static inline ca_backend *fake_device(ca_backend *be, int fences, int done) {
    ck_assert_ptr_nonnull(be);
    memset(&fk, 0, sizeof fk);
    fk.granule = be->granule;
    fk.unmap = be->unmap;
    be->unmap = spy_unmap;
    if (fences) {
        be->fence_record = f_record;
        be->fence_query = f_query;
        be->fence_wait = f_wait;
        be->fence_destroy = f_destroy;
        be->event_record = e_record;
        be->stream_wait = s_wait;
        be->event_destroy = e_destroy;
    }
    if (done) {
        be->fence_record_done = f_record_done;
        be->stream_sync = s_sync;
    }
    return be;
}
#endif
