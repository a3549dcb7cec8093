/* What reports call things: a call site by the frame of the program's own
 * code it runs in, a finding by what it is and where (its root). */
#include <string.h>

#include "reports/capture/frame_kind.h"
#include "reports/capture/named_frames.h"
#include "reports/write/report_internal.h"

#define AUTOGRAD_THREAD "PyTorch's autograd engine (C++ thread, no Python frames)"
#define CXX_ONLY "PyTorch's C++ code (no Python frames)"

static ca_frame_kind kind(const ca_frame *f) { return ca_frame_kind_of(f->function, f->file, f->module); }

static int python(const ca_frame *f) { return ca_ip_is_named(f->ip) && ca_frame_is_python(f->file, f->module); }

/* Which of a site's frames fr[0..n) names it. With Python frames: the
 * innermost Python frame of the program's own code (PyTorch's Python
 * layers and the standard library passed over), else the innermost Python
 * frame. Without: the innermost frame that is not the runtime's (PyTorch's
 * and the allocator's C++, the C library, CUDA). -1 when there is none: a
 * stack of the runtime alone, which ca_report_site_label describes. */
static long label_index(const ca_frame *const *fr, size_t n) {
    long first_python = -1;
    for (size_t i = 0; i < n; i++) {
        if (!python(fr[i])) continue;
        if (kind(fr[i]) == CA_FRAME_PROGRAM) return (long)i;
        if (first_python < 0) first_python = (long)i;
    }
    if (first_python >= 0) return first_python;
    for (size_t i = 0; i < n; i++)
        if (kind(fr[i]) != CA_FRAME_RUNTIME) return (long)i;
    return -1;
}

/* What a stack of the runtime alone is. */
static const char *runtime_stack(const ca_frame *const *fr, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ca_frame_pass(fr[i]->function, fr[i]->file) == CA_PASS_BACKWARD) return AUTOGRAD_THREAD;
    return CXX_ONLY;
}

static void frame_name(const ca_frame *f, char *buf, size_t n) {
    if (f->line) snprintf(buf, n, "%s (%s:%u)", f->function, f->file, f->line);
    else snprintf(buf, n, "%s (%s)", f->function, f->module);
}

void ca_report_site_label(const ca_report_ctx *c, uint32_t site, char *buf, size_t n) {
    if (c->snap.site_mode == CA_SITES_SIZE) {
        const uintptr_t *ips;
        char b[32];
        if (ca_stacks_get(c->snap.stacks, site, &ips) == 1)
            snprintf(buf, n, "allocations of %s (%llu B)", ca_report_bytes((double)ips[0], b, sizeof b),
                     (unsigned long long)ips[0]);
        else
            snprintf(buf, n, "unknown call site");
        return;
    }
    const ca_frame *fr[CA_STACK_MAX_FRAMES];
    size_t nf = ca_report_frames(c, site, fr, CA_STACK_MAX_FRAMES);
    long i = label_index(fr, nf);
    if (i >= 0) frame_name(fr[i], buf, n);
    else if (nf) snprintf(buf, n, "%s", runtime_stack(fr, nf));
    else snprintf(buf, n, "unknown call site");
}

void ca_report_finding_root(const ca_report_ctx *c, size_t i, char *buf, size_t n) {
    *buf = 0;
    if (i >= c->n_findings || !c->findings[i].has_root) return;
    uintptr_t ip = c->findings[i].root_ip;
    const ca_frame *f = c->sym ? ca_symtab_get(c->sym, ip) : NULL;
    if (!f) {
        snprintf(buf, n, "0x%llx", (unsigned long long)ip);
        return;
    }
    if (kind(f) == CA_FRAME_RUNTIME) { /* the sites share no frame of the program's */
        const ca_frame *fr[CA_STACK_MAX_FRAMES];
        size_t nf = ca_report_frames(c, c->leaks[c->findings[i].first].site, fr, CA_STACK_MAX_FRAMES);
        if (label_index(fr, nf) < 0) {
            snprintf(buf, n, "%s", runtime_stack(fr, nf));
            return;
        }
    }
    frame_name(f, buf, n);
}

/* The frame a site's label frame is called from, in the program's own
 * code: the next frame outward of the program's (Python when the label is),
 * NULL when there is none. */
static const ca_frame *caller(const ca_frame *const *fr, size_t n, long at) {
    for (size_t i = (size_t)at + 1; i < n; i++)
        if (kind(fr[i]) == CA_FRAME_PROGRAM && python(fr[i]) == python(fr[at])) return fr[i];
    return NULL;
}

void ca_report_finding_title(const ca_report_ctx *c, size_t i, char *buf, size_t n) {
    *buf = 0;
    if (i >= c->n_findings) return;
    const ca_finding *f = &c->findings[i];
    char label[1024], root[512];
    int by_size = c->snap.site_mode == CA_SITES_SIZE;
    ca_report_site_label(c, c->leaks[f->first].site, label, sizeof label);
    ca_report_finding_root(c, i, root, sizeof root);
    if (!by_size && f->kind != CA_FINDING_TOGETHER) {
        /* The allocating function is often a helper: name its caller too. */
        const ca_frame *fr[CA_STACK_MAX_FRAMES];
        size_t nf = ca_report_frames(c, c->leaks[f->first].site, fr, CA_STACK_MAX_FRAMES);
        long at = label_index(fr, nf);
        const ca_frame *by = at >= 0 ? caller(fr, nf, at) : NULL;
        if (by) {
            size_t len = strlen(label);
            char name[512];
            frame_name(by, name, sizeof name);
            snprintf(label + len, sizeof label - len, " called from %s", name);
        }
    }
    switch (f->kind) {
    case CA_FINDING_BUFFER:
        snprintf(buf, n, "a buffer (%s%s) is made again larger every iteration", by_size ? "" : "from ", label);
        break;
    case CA_FINDING_SITE:
        snprintf(buf, n, "%s%s are kept", by_size ? "" : "allocations from ", label);
        break;
    case CA_FINDING_TOGETHER:
        if (*root && f->retained_graph)
            snprintf(buf, n, "a forward pass run under %s is kept alive (%zu call sites)", root, f->n_sites);
        else if (*root)
            snprintf(buf, n, "%zu call sites under %s keep allocations", f->n_sites, root);
        else
            snprintf(buf, n, "%zu %s grow together%s", f->n_sites, by_size ? "allocation sizes" : "call sites",
                     f->retained_graph ? " (a retained graph?)" : "");
        break;
    }
}
