/* A shared object holding the allocator and the tracker, as libcudalloc.so
 * does: its own frames must not show in the call sites it reports. */
#include "allocator/allocator.h"
#include "reports/write/report.h"
#include "reports/track/tracker.h"
#include "util/export.h"

static ca_allocator *A;
static ca_tracker *T;

CA_EXPORT void *probe_alloc(size_t n) {
    if (!A) {
        ca_allocator_new(ca_backend_count_new(0, 2 << 20), NULL, &A);
        T = ca_tracker_new(NULL);
        ca_tracker_attach(T, A);
    }
    void *p = NULL;
    ca_malloc(A, n, 0, &p, NULL);
    return p;
}

CA_EXPORT void probe_step(void) { ca_tracker_step(T, CA_ITER_EXPLICIT); }

CA_EXPORT int probe_report(const char *prefix) {
    ca_report_options o;
    ca_report_options_default(&o);
    o.formats = CA_REPORT_JSON;
    return ca_report_write(T, A, prefix, &o);
}
