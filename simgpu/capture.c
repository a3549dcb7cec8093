/* Stream capture, as CUDA documents it (simgpu/README.md names where).
 *
 * A capture sequence begins on one stream (cuStreamBeginCapture) and ends
 * there (cuStreamEndCapture), which hands out the graph of what was captured.
 * Work issued to a capturing stream is not run: it becomes nodes of the graph
 * (graph.c). A stream that waits on an event recorded in the capture joins it;
 * the origin must wait on the joined streams' work again before the end.
 *
 * What capture forbids:
 *   - potentially unsafe calls (allocation, frees, synchronous copies, event,
 *     stream and context queries and synchronizes) from a thread that the
 *     capture modes prohibit (cuThreadExchangeStreamCaptureMode): they answer
 *     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the captures that
 *     prohibit the thread;
 *   - in any mode, calls that necessarily conflict with a capture: querying or
 *     synchronizing a capturing stream, its context, or an event last recorded
 *     in a capture (CUDA_ERROR_CAPTURED_EVENT), and any use of the legacy
 *     stream while a blocking stream of its context captures
 *     (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT).
 * An invalidated capture answers CUDA_ERROR_STREAM_CAPTURE_INVALIDATED to work
 * issued to its streams, and its end returns no graph. */
#include <stdlib.h>
#include <string.h>

#include "simgpu/sim.h"

/* The calling thread's mode; CU_STREAM_CAPTURE_MODE_GLOBAL (0) by default. */
static __thread CUstreamCaptureMode tl_mode;

/* Capture states of per-thread default streams, by thread and context. */
struct ptds_state {
    pthread_t thread;
    struct ca_sim_cstate cs;
    struct ptds_state *next;
};
static struct ptds_state *ptds_states;

static int is_legacy(const struct ca_sim_stream_ref *ref)
{
    return !ref->obj && ref->handle != CU_STREAM_PER_THREAD;
}

static struct ca_sim_cstate *cstate(const struct ca_sim_stream_ref *ref, int create)
{
    if (ref->obj) {
        struct ca_sim_cstate *cs = &ref->obj->cs;
        cs->ctx = ref->obj->ctx;
        cs->handle = ref->handle;
        cs->blocking = !(ref->obj->flags & CU_STREAM_NON_BLOCKING);
        return cs;
    }
    if (is_legacy(ref))
        return NULL;
    pthread_t self = pthread_self();
    for (struct ptds_state *p = ptds_states; p; p = p->next)
        if (p->cs.ctx == ref->ctx && pthread_equal(p->thread, self))
            return &p->cs;
    if (!create)
        return NULL;
    struct ptds_state *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->thread = self;
    p->cs.ctx = ref->ctx;
    p->cs.handle = CU_STREAM_PER_THREAD;
    p->cs.blocking = 1; /* the per-thread stream and the legacy stream wait for each other */
    p->next = ptds_states;
    ptds_states = p;
    return &p->cs;
}

struct ca_sim_cstate *ca_sim_cstate_of(const struct ca_sim_stream_ref *ref)
{
    return cstate(ref, 0);
}

struct ca_sim_capture *ca_sim_capture_find(unsigned long long id)
{
    for (struct ca_sim_capture *c = ca_sim.captures; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

void ca_sim_capture_invalidate(struct ca_sim_capture *c)
{
    if (!c->invalidated)
        ca_sim.n.captures_invalidated++;
    c->invalidated = 1;
}

static int set_deps(struct ca_sim_cstate *cs, struct CUgraphNode_st *const *deps, size_t n)
{
    if (n > cs->deps_cap) {
        struct CUgraphNode_st **d = realloc(cs->deps, n * sizeof *d);
        CUgraphEdgeData *e = realloc(cs->edges, n * sizeof *e);
        if (d)
            cs->deps = d;
        if (e)
            cs->edges = e;
        if (!d || !e)
            return -1;
        cs->deps_cap = n;
    }
    if (n)
        memmove(cs->deps, deps, n * sizeof *deps);
    cs->ndeps = n;
    return 0;
}

static int add_deps(struct ca_sim_cstate *cs, struct CUgraphNode_st *const *deps, size_t n)
{
    size_t total = cs->ndeps;
    struct CUgraphNode_st **all = malloc((total + n + 1) * sizeof *all);
    if (!all)
        return -1;
    if (total)
        memcpy(all, cs->deps, total * sizeof *all);
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < total && all[j] != deps[i])
            j++;
        if (j == total)
            all[total++] = deps[i];
    }
    int rc = set_deps(cs, all, total);
    free(all);
    return rc;
}

static void join(struct ca_sim_capture *c, struct ca_sim_cstate *cs)
{
    cs->cap = c;
    cs->ndeps = 0;
    cs->next_member = c->members;
    c->members = cs;
}

static void leave(struct ca_sim_cstate *cs)
{
    struct ca_sim_capture *c = cs->cap;
    if (!c)
        return;
    for (struct ca_sim_cstate **m = &c->members; *m; m = &(*m)->next_member)
        if (*m == cs) {
            *m = cs->next_member;
            break;
        }
    cs->cap = NULL;
    cs->ndeps = 0;
    cs->next_member = NULL;
}

/* The sequence ends: its streams leave it; the graph goes to the caller or away. */
static void end(struct ca_sim_capture *c, int keep_graph)
{
    while (c->members)
        leave(c->members);
    for (struct ca_sim_capture **p = &ca_sim.captures; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    if (!keep_graph)
        ca_sim_graph_release(c->graph);
    free(c);
}

/* cuThreadExchangeStreamCaptureMode's rule for one capture and this thread. */
static int prohibits(const struct ca_sim_capture *c)
{
    if (tl_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return 0;
    if (pthread_equal(c->thread, pthread_self()))
        return c->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    return tl_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
}

static CUresult refuse(CUresult r)
{
    ca_sim.n.capture_refusals++;
    return r;
}

CUresult ca_sim_capture_unsafe(void)
{
    int hit = 0;
    for (struct ca_sim_capture *c = ca_sim.captures; c; c = c->next)
        if (prohibits(c)) {
            ca_sim_capture_invalidate(c);
            hit = 1;
        }
    return hit ? refuse(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) : CUDA_SUCCESS;
}

/* Captures with a stream of ctx in them (blocking ones only, or any);
 * invalidated when asked. */
static int capturing_in(struct CUctx_st *ctx, int blocking_only, int invalidate)
{
    int found = 0;
    for (struct ca_sim_capture *c = ca_sim.captures; c; c = c->next)
        for (struct ca_sim_cstate *m = c->members; m; m = m->next_member)
            if ((!ctx || m->ctx == ctx) && (!blocking_only || m->blocking)) {
                found = 1;
                if (invalidate)
                    ca_sim_capture_invalidate(c);
                break;
            }
    return found;
}

int ca_sim_ctx_capturing(struct CUctx_st *ctx, int invalidate)
{
    return capturing_in(ctx, 0, invalidate);
}

/* The legacy stream waits for every blocking stream: while one captures, any
 * use of it would depend on the capture. */
static CUresult legacy_use(const struct ca_sim_stream_ref *ref)
{
    if (is_legacy(ref) && capturing_in(ref->ctx, 1, 1))
        return refuse(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    return CUDA_SUCCESS;
}

CUresult ca_sim_capture_issue(const struct ca_sim_stream_ref *ref, struct ca_sim_cstate **out)
{
    *out = NULL;
    CUresult r = legacy_use(ref);
    struct ca_sim_cstate *cs = r == CUDA_SUCCESS ? cstate(ref, 0) : NULL;
    if (!cs || !cs->cap)
        return r;
    if (cs->cap->invalidated)
        return refuse(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    *out = cs;
    return CUDA_SUCCESS;
}

CUresult ca_sim_capture_sync_stream(const struct ca_sim_stream_ref *ref)
{
    CUresult r = legacy_use(ref);
    if (r != CUDA_SUCCESS)
        return r;
    struct ca_sim_cstate *cs = cstate(ref, 0);
    if (cs && cs->cap) {
        ca_sim_capture_invalidate(cs->cap);
        return refuse(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    }
    return ca_sim_capture_unsafe();
}

CUresult ca_sim_capture_sync_ctx(struct CUctx_st *ctx)
{
    if (capturing_in(ctx, 0, 1))
        return refuse(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    return ca_sim_capture_unsafe();
}

CUresult ca_sim_capture_sync_event(struct CUevent_st *e)
{
    if (e->captured) {
        struct ca_sim_capture *c = ca_sim_capture_find(e->captured);
        if (c)
            ca_sim_capture_invalidate(c);
        return refuse(CUDA_ERROR_CAPTURED_EVENT);
    }
    return ca_sim_capture_unsafe();
}

/* The event stands for the capturing stream's nodes now: a stream that waits
 * on it depends on them (joining the capture if it is not in it). */
CUresult ca_sim_capture_record(struct CUevent_st *e, struct ca_sim_cstate *cs)
{
    struct CUgraphNode_st **deps = NULL;
    if (cs->ndeps && !(deps = malloc(cs->ndeps * sizeof *deps)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (cs->ndeps)
        memcpy(deps, cs->deps, cs->ndeps * sizeof *deps);
    free(e->deps);
    e->deps = deps;
    e->ndeps = cs->ndeps;
    e->captured = cs->cap->id;
    return CUDA_SUCCESS;
}

CUresult ca_sim_capture_wait(const struct ca_sim_stream_ref *ref, struct CUevent_st *e, unsigned flags, int *done)
{
    struct ca_sim_cstate *cs;
    *done = 0;
    CUresult r = ca_sim_capture_issue(ref, &cs);
    if (r != CUDA_SUCCESS)
        return r;
    struct ca_sim_capture *ec = e->captured ? ca_sim_capture_find(e->captured) : NULL;
    if (cs) {
        *done = 1;
        if (flags & CU_EVENT_WAIT_EXTERNAL) { /* an event wait node */
            struct CUgraphNode_st *n = ca_sim_graph_capture_node(cs, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
            if (!n)
                return CUDA_ERROR_OUT_OF_MEMORY;
            n->u.event = e->self;
            return CUDA_SUCCESS;
        }
        if (ec == cs->cap) /* a join inside the capture */
            return add_deps(cs, e->deps, e->ndeps) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        ca_sim_capture_invalidate(cs->cap);
        if (ec) {
            ca_sim_capture_invalidate(ec);
            return refuse(CUDA_ERROR_STREAM_CAPTURE_MERGE);
        }
        return refuse(CUDA_ERROR_STREAM_CAPTURE_ISOLATION); /* work from outside the capture */
    }
    if (!e->captured)
        return CUDA_SUCCESS; /* an ordinary wait */
    *done = 1;
    if (!ec)
        return refuse(CUDA_ERROR_CAPTURED_EVENT); /* its capture is over */
    if (is_legacy(ref)) {
        ca_sim_capture_invalidate(ec);
        return refuse(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    }
    if (ec->invalidated)
        return refuse(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    if (!(cs = cstate(ref, 1)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    join(ec, cs);
    return set_deps(cs, e->deps, e->ndeps) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

void ca_sim_capture_stream_gone(struct ca_sim_cstate *cs)
{
    struct ca_sim_capture *c = cs->cap;
    if (c && c->origin == cs) {
        end(c, 0); /* nothing can end it any more */
    } else if (c) {
        ca_sim_capture_invalidate(c);
        leave(cs);
    }
    free(cs->deps);
    free(cs->edges);
    cs->deps = NULL;
    cs->edges = NULL;
    cs->deps_cap = 0;
}

void ca_sim_captures_drop_ctx(struct CUctx_st *ctx)
{
    for (struct ca_sim_capture *c = ca_sim.captures, *next; c; c = next) {
        next = c->next;
        if (c->origin->ctx == ctx)
            end(c, 0);
    }
    for (struct ca_sim_capture *c = ca_sim.captures; c; c = c->next)
        for (struct ca_sim_cstate *m = c->members, *next; m; m = next) {
            next = m->next_member;
            if (m->ctx == ctx) {
                ca_sim_capture_invalidate(c);
                leave(m);
            }
        }
    for (struct ptds_state **p = &ptds_states; *p;) {
        struct ptds_state *s = *p;
        if (s->cs.ctx == ctx) {
            *p = s->next;
            free(s->cs.deps);
            free(s->cs.edges);
            free(s);
        } else {
            p = &s->next;
        }
    }
}

/* ---- the API ---- */

static CUresult begin(CUstream s, CUstreamCaptureMode mode)
{
    struct ca_sim_stream_ref ref;
    ca_sim_lock();
    CUresult r = ca_sim_stream_resolve(s, &ref);
    struct ca_sim_cstate *cs = NULL;
    if (r == CUDA_SUCCESS && is_legacy(&ref))
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* "may not be initiated if stream is CU_STREAM_LEGACY" */
    else if (r == CUDA_SUCCESS && (unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && !(cs = cstate(&ref, 1)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else if (r == CUDA_SUCCESS && cs->cap)
        r = CUDA_ERROR_ILLEGAL_STATE; /* "only if the stream is not already in capture mode" */
    struct ca_sim_capture *c = NULL;
    if (r == CUDA_SUCCESS && (!(c = calloc(1, sizeof *c)) || !(c->graph = ca_sim_graph_new(ref.ctx)))) {
        free(c);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        c->id = ++ca_sim.next_capture_id;
        c->mode = mode;
        c->thread = pthread_self();
        c->origin = cs;
        join(c, cs);
        c->next = ca_sim.captures;
        ca_sim.captures = c;
        ca_sim.n.captures++;
    }
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    return begin(s, mode);
}

CA_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode)
{
    return begin(ca_sim_ptsz(s), mode);
}

/* CUDA 10.0's entry, from before modes: the default one, global. */
CA_EXPORT CUresult cuStreamBeginCapture(CUstream s)
{
    return begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CA_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream s)
{
    return begin(ca_sim_ptsz(s), CU_STREAM_CAPTURE_MODE_GLOBAL);
}

/* Whether node `want` is one of `from` or comes before one of them. */
static int reaches(struct CUgraphNode_st *const *from, size_t n, const struct CUgraphNode_st *want, int depth)
{
    for (size_t i = 0; i < n; i++) {
        if (from[i] == want)
            return 1;
        if (depth < 10000 && reaches(from[i]->deps, from[i]->ndeps, want, depth + 1))
            return 1;
    }
    return 0;
}

/* A joined stream whose last work the origin does not wait for is a fork
 * that was never joined back. */
static int unjoined(const struct ca_sim_capture *c)
{
    for (const struct ca_sim_cstate *m = c->members; m; m = m->next_member) {
        if (m == c->origin)
            continue;
        for (size_t i = 0; i < m->ndeps; i++)
            if (!reaches(c->origin->deps, c->origin->ndeps, m->deps[i], 0))
                return 1;
    }
    return 0;
}

static CUresult end_capture(CUstream s, CUgraph *phGraph)
{
    struct ca_sim_stream_ref ref;
    ca_sim_lock();
    CUresult r = ca_sim_stream_resolve(s, &ref);
    struct ca_sim_cstate *cs = r == CUDA_SUCCESS ? cstate(&ref, 0) : NULL;
    struct ca_sim_capture *c = cs ? cs->cap : NULL;
    if (r == CUDA_SUCCESS && !phGraph)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && !c)
        r = CUDA_ERROR_ILLEGAL_STATE;
    else if (r == CUDA_SUCCESS && c->origin != cs)
        r = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    else if (r == CUDA_SUCCESS && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self()))
        r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    if (r == CUDA_SUCCESS) {
        r = c->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
          : unjoined(c)    ? CUDA_ERROR_STREAM_CAPTURE_UNJOINED
                           : CUDA_SUCCESS;
        *phGraph = r == CUDA_SUCCESS ? (CUgraph)c->graph : NULL;
        end(c, r == CUDA_SUCCESS);
    }
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *phGraph)
{
    return end_capture(s, phGraph);
}

CA_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *phGraph)
{
    return end_capture(ca_sim_ptsz(s), phGraph);
}

/* Status, and what cuStreamGetCaptureInfo adds; the legacy stream answers
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT while a blocking stream captures,
 * without invalidating it. */
static CUresult info(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
                     const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
    struct ca_sim_stream_ref ref;
    ca_sim_lock();
    CUresult r = ca_sim_stream_resolve(s, &ref);
    if (r == CUDA_SUCCESS && (!status || (edges && !deps)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && is_legacy(&ref) && capturing_in(ref.ctx, 1, 0))
        r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    if (r == CUDA_SUCCESS) {
        struct ca_sim_cstate *cs = cstate(&ref, 0);
        struct ca_sim_capture *c = cs ? cs->cap : NULL;
        *status = !c ? CU_STREAM_CAPTURE_STATUS_NONE
                : c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                 : CU_STREAM_CAPTURE_STATUS_ACTIVE;
        if (*status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
            if (id)
                *id = c->id;
            if (graph)
                *graph = (CUgraph)c->graph;
            if (deps)
                *deps = (const CUgraphNode *)cs->deps;
            if (edges) {
                if (cs->ndeps)
                    memset(cs->edges, 0, cs->ndeps * sizeof *cs->edges);
                *edges = cs->ndeps ? cs->edges : NULL;
            }
            if (ndeps)
                *ndeps = cs->ndeps;
        }
    }
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    CA_SIM_FAIL("cuStreamIsCapturing");
    return info(s, status, NULL, NULL, NULL, NULL, NULL);
}

CA_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *status)
{
    CA_SIM_FAIL("cuStreamIsCapturing");
    return info(ca_sim_ptsz(s), status, NULL, NULL, NULL, NULL, NULL);
}

CA_EXPORT CUresult cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id)
{
    return info(s, status, id, NULL, NULL, NULL, NULL);
}

CA_EXPORT CUresult cuStreamGetCaptureInfo_ptsz(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id)
{
    return info(ca_sim_ptsz(s), status, id, NULL, NULL, NULL, NULL);
}

CA_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                             CUgraph *graph, const CUgraphNode **deps, size_t *ndeps)
{
    return info(s, status, id, graph, deps, NULL, ndeps);
}

CA_EXPORT CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                                  CUgraph *graph, const CUgraphNode **deps, size_t *ndeps)
{
    return info(ca_sim_ptsz(s), status, id, graph, deps, NULL, ndeps);
}

CA_EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                             CUgraph *graph, const CUgraphNode **deps,
                                             const CUgraphEdgeData **edges, size_t *ndeps)
{
    return info(s, status, id, graph, deps, edges, ndeps);
}

CA_EXPORT CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                                  CUgraph *graph, const CUgraphNode **deps,
                                                  const CUgraphEdgeData **edges, size_t *ndeps)
{
    return info(ca_sim_ptsz(s), status, id, graph, deps, edges, ndeps);
}

CA_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = tl_mode;
    tl_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}
