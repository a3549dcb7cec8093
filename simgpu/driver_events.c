/* Events, with two ways of testing code that must not reuse memory before
 * the device is done with it: with CUDALLOC_SIM_LATE_EVENTS=N a recorded event
 * answers CUDA_ERROR_NOT_READY to its first N queries; an event behind a held
 * stream (stream_hold.c) answers it until the hold is released. Either
 * completes at once on any synchronize that covers it (event, stream,
 * context). Otherwise events complete at record, as work here is done when
 * issued. */
#include <stdlib.h>
#include <time.h>

#include "simgpu/sim.h"

struct CUevent_st *ca_sim_find_event(CUevent e)
{
    struct CUevent_st *ev;
    HASH_FIND_PTR(ca_sim.events, &e, ev);
    return ev;
}

/* Whether synchronizing the stream `ref` waits for event e. The legacy stream
 * also waits for blocking streams and the per-thread ones, as on a GPU. */
static int covers(const struct ca_sim_stream_ref *ref, const struct CUevent_st *e)
{
    if (!e->recorded || e->ctx != ref->ctx)
        return 0;
    if (ref->handle == CU_STREAM_PER_THREAD)
        return e->stream == CU_STREAM_PER_THREAD && pthread_equal(e->thread, pthread_self());
    if (ref->obj)
        return e->stream == ref->handle;
    if (e->stream == NULL || e->stream == CU_STREAM_PER_THREAD)
        return 1;
    struct CUstream_st *st = ca_sim_find_stream(e->stream);
    return st && !(st->flags & CU_STREAM_NON_BLOCKING);
}

/* The stream's work ran, and the held work it depends on with it (a GPU's
 * synchronize would wait for that). */
void ca_sim_events_complete_stream(const struct ca_sim_stream_ref *ref)
{
    int ran = 0;
    struct CUevent_st *e, *tmp;
    HASH_ITER(hh, ca_sim.events, e, tmp) {
        if (covers(ref, e)) {
            e->late_left = 0;
            ran |= ca_sim_hold_run(e->held_by, CA_SIM_ALL_WORK);
        }
    }
    ran |= ca_sim_hold_run(ca_sim_hold_for_record(ref), CA_SIM_ALL_WORK);
    ca_sim_hold_clear_stream(ref);
    ca_sim.n.held_waits += (unsigned)ran;
}

int ca_sim_events_pending_query(const struct ca_sim_stream_ref *ref)
{
    int pending = 0;
    struct CUevent_st *e, *tmp;
    HASH_ITER(hh, ca_sim.events, e, tmp) {
        if (covers(ref, e) && e->late_left) {
            e->late_left--;
            pending = 1;
        }
        if (covers(ref, e) && e->held_by)
            pending = 1;
    }
    return pending || ca_sim_hold_for_record(ref);
}

void ca_sim_events_complete_ctx(struct CUctx_st *ctx)
{
    int ran = ca_sim_holds_run_ctx(ctx);
    struct CUevent_st *e, *tmp;
    HASH_ITER(hh, ca_sim.events, e, tmp) {
        if (e->ctx == ctx) {
            e->late_left = 0;
            ran |= ca_sim_hold_run(e->held_by, CA_SIM_ALL_WORK);
        }
    }
    ca_sim.n.held_waits += (unsigned)ran;
    struct CUstream_st *st, *stmp;
    HASH_ITER(hh, ca_sim.streams, st, stmp) {
        if (st->ctx == ctx)
            st->behind = NULL;
    }
    ctx->legacy_behind = ctx->ptds_behind = NULL;
}

void ca_sim_events_drop_ctx(struct CUctx_st *ctx)
{
    struct CUevent_st *e, *tmp;
    HASH_ITER(hh, ca_sim.events, e, tmp) {
        if (e->ctx == ctx) {
            HASH_DEL(ca_sim.events, e);
            free(e->deps);
            free(e);
        }
    }
}

CA_EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int flags)
{
    CA_SIM_FAIL("cuEventCreate");
    const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    struct CUctx_st *ctx;
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    if (r == CUDA_SUCCESS && (!phEvent || (flags & ~known) ||
                              ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING))))
        r = CUDA_ERROR_INVALID_VALUE;
    struct CUevent_st *e = NULL;
    if (r == CUDA_SUCCESS && !(e = calloc(1, sizeof *e)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        e->self = e;
        e->ctx = ctx;
        e->flags = flags;
        HASH_ADD_PTR(ca_sim.events, self, e);
        *phEvent = e;
    }
    ca_sim_unlock();
    return r;
}

void ca_sim_event_record_now(struct CUevent_st *e, const struct ca_sim_stream_ref *ref)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->recorded = 1;
    e->late_left = ca_sim.late_events;
    e->held_by = ca_sim_hold_for_record(ref);
    e->stream = ref->handle;
    e->thread = pthread_self();
    e->ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    e->seq = ++ca_sim.records;
    e->captured = 0;
    free(e->deps);
    e->deps = NULL;
    e->ndeps = 0;
}

/* On a capturing stream nothing runs: the event stands for the capture's
 * work so far (capture.c); with CU_EVENT_RECORD_EXTERNAL it becomes an event
 * record node instead, which records it when the graph runs. */
static CUresult record(CUevent hEvent, CUstream s, unsigned flags)
{
    CA_SIM_FAIL("cuEventRecord");
    struct ca_sim_stream_ref ref;
    struct ca_sim_cstate *cs = NULL;
    ca_sim_lock();
    CUresult r = ca_sim_check_init();
    struct CUevent_st *e = r == CUDA_SUCCESS ? ca_sim_find_event(hEvent) : NULL;
    if (r == CUDA_SUCCESS && !e)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS && (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = ca_sim_stream_resolve(s, &ref);
    if (r == CUDA_SUCCESS && ref.ctx != e->ctx)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_issue(&ref, &cs);
    if (r == CUDA_SUCCESS && (flags & CU_EVENT_RECORD_EXTERNAL) && !cs)
        r = CUDA_ERROR_INVALID_VALUE; /* "invalid outside of stream capture" */
    if (r == CUDA_SUCCESS && cs && (flags & CU_EVENT_RECORD_EXTERNAL)) {
        struct CUgraphNode_st *n = ca_sim_graph_capture_node(cs, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
        if (n)
            n->u.event = hEvent;
        else
            r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (r == CUDA_SUCCESS && cs) {
        r = ca_sim_capture_record(e, cs);
    } else if (r == CUDA_SUCCESS) {
        ca_sim_event_record_now(e, &ref);
    }
    if (r == CUDA_SUCCESS)
        ca_sim.n.event_records++;
    ca_sim_unlock();
    return r;
}

/* All the context's work now, one event (CUDA 12.5): complete when every
 * stream of the context has run what it had; refused, invalidating them,
 * while a stream of the context captures (cuCtxRecordEvent's note). */
CA_EXPORT CUresult cuCtxRecordEvent(CUcontext hCtx, CUevent hEvent)
{
    CA_SIM_FAIL("cuCtxRecordEvent");
    ca_sim_lock();
    CUresult r = ca_sim_check_init();
    int known = 0;
    for (int d = 0; r == CUDA_SUCCESS && d < ca_sim.ndev; d++)
        known |= hCtx == &ca_sim.dev[d].primary && hCtx->refcount > 0;
    struct CUevent_st *e = NULL;
    if (r == CUDA_SUCCESS && !known)
        r = CUDA_ERROR_INVALID_CONTEXT;
    else if (r == CUDA_SUCCESS && (!(e = ca_sim_find_event(hEvent)) || e->ctx != hCtx))
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (r == CUDA_SUCCESS && ca_sim_ctx_capturing(hCtx, 1)) {
        ca_sim.n.capture_refusals++;
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (r == CUDA_SUCCESS) {
        struct ca_sim_stream_ref ref = {.ctx = hCtx};
        ca_sim_event_record_now(e, &ref);
        e->stream = CA_SIM_WHOLE_CONTEXT; /* no stream's synchronize covers it: the context's does */
        e->held_by = ca_sim_hold_for_context(hCtx);
        ca_sim.n.ctx_records++;
    }
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream s)
{
    return record(hEvent, s, 0);
}

CA_EXPORT CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream s, unsigned int flags)
{
    return record(hEvent, s, flags);
}

CA_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream s, unsigned int flags)
{
    return record(hEvent, ca_sim_ptsz(s), flags);
}

CA_EXPORT CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream s)
{
    return cuEventRecord(hEvent, ca_sim_ptsz(s));
}

/* An event never recorded counts as complete, as in CUDA. A query is a
 * potentially unsafe call during capture (capture.c). */
CA_EXPORT CUresult cuEventQuery(CUevent hEvent)
{
    CA_SIM_FAIL("cuEventQuery");
    ca_sim_lock();
    CUresult r = ca_sim_check_init();
    struct CUevent_st *e = r == CUDA_SUCCESS ? ca_sim_find_event(hEvent) : NULL;
    if (r == CUDA_SUCCESS && !e)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_sync_event(e);
    if (r == CUDA_SUCCESS && e->held_by) {
        ca_sim.n.not_ready++;
        r = CUDA_ERROR_NOT_READY;
    } else if (r == CUDA_SUCCESS && e->late_left) {
        e->late_left--;
        ca_sim.n.not_ready++;
        r = CUDA_ERROR_NOT_READY;
    }
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuEventSynchronize(CUevent hEvent)
{
    CA_SIM_FAIL("cuEventSynchronize");
    ca_sim_lock();
    CUresult r = ca_sim_check_init();
    struct CUevent_st *e = r == CUDA_SUCCESS ? ca_sim_find_event(hEvent) : NULL;
    if (r == CUDA_SUCCESS && !e)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_sync_event(e);
    if (r == CUDA_SUCCESS) {
        e->late_left = 0;
        ca_sim.n.held_waits += (unsigned)ca_sim_hold_run(e->held_by, e->seq); /* the work before it ends first */
        ca_sim.n.event_syncs++;
    }
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent)
{
    CA_SIM_FAIL("cuEventDestroy");
    ca_sim_lock();
    CUresult r = ca_sim_check_init();
    struct CUevent_st *e = r == CUDA_SUCCESS ? ca_sim_find_event(hEvent) : NULL;
    if (r == CUDA_SUCCESS && !e)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS) {
        HASH_DEL(ca_sim.events, e);
        free(e->deps);
        free(e);
    }
    ca_sim_unlock();
    return r;
}

/* Host time between the two records: a measure of the CPU work in between,
 * never of a GPU. */
CA_EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent hStart, CUevent hEnd)
{
    ca_sim_lock();
    CUresult r = ca_sim_check_init();
    struct CUevent_st *a = r == CUDA_SUCCESS ? ca_sim_find_event(hStart) : NULL;
    struct CUevent_st *b = r == CUDA_SUCCESS ? ca_sim_find_event(hEnd) : NULL;
    if (r == CUDA_SUCCESS && !ms)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && (!a || !b || !a->recorded || !b->recorded ||
                                   ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)))
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (r == CUDA_SUCCESS && (a->late_left || b->late_left || a->held_by || b->held_by))
        r = CUDA_ERROR_NOT_READY;
    if (r == CUDA_SUCCESS)
        *ms = (float)((double)((int64_t)(b->ns - a->ns)) / 1e6);
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuEventElapsedTime(float *ms, CUevent hStart, CUevent hEnd)
{
    return cuEventElapsedTime_v2(ms, hStart, hEnd);
}
