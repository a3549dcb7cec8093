/* Streams. Work runs when it is issued, so a stream is mostly a name: events
 * remember which stream they were recorded on, and synchronizing a stream
 * completes those events (see driver_events.c). The handles NULL and
 * CU_STREAM_LEGACY are the legacy default stream, CU_STREAM_PER_THREAD the
 * calling thread's own; both belong to the current context. */
#include <stdlib.h>
#include <sys/mman.h>

#include "simgpu/sim.h"

/* Stream handles are addresses of a reserved range nothing is mapped at,
 * never handed out twice (a driver may or may not reuse a destroyed stream's
 * handle; this one does not): a destroyed stream's handle stays invalid, so
 * a program or interposer that keeps using it, or keys anything by it, is
 * caught. 256 MiB of address space a range (more would fail under valgrind):
 * 2^24 handles before the next. */
#define HANDLE_STRIDE 16
#define HANDLE_RANGE ((size_t)256 << 20)

static uintptr_t next, end;
#define MAX_RANGES 64
static uintptr_t ranges[MAX_RANGES]; /* the ranges handles were handed out from */
static int nranges;

static CUstream new_handle(void)
{
    if (next == end) {
        void *p = mmap(NULL, HANDLE_RANGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        next = (uintptr_t)p;
        end = next + HANDLE_RANGE;
        if (nranges < MAX_RANGES)
            ranges[nranges++] = next;
    }
    CUstream h = (CUstream)next;
    next += HANDLE_STRIDE;
    return h;
}

/* Was s handed out as a stream once? (Then it is a destroyed one when it is
 * not found: a real driver may have reused it, or may crash on it.) */
static int once_a_stream(CUstream s)
{
    uintptr_t h = (uintptr_t)s;
    for (int i = 0; i < nranges; i++)
        if (h >= ranges[i] && h < ranges[i] + HANDLE_RANGE && (h - ranges[i]) % HANDLE_STRIDE == 0 &&
            (ranges[i] + HANDLE_RANGE != end || h < next))
            return 1;
    return 0;
}

struct CUstream_st *ca_sim_find_stream(CUstream s)
{
    struct CUstream_st *st;
    HASH_FIND_PTR(ca_sim.streams, &s, st);
    return st;
}

CUresult ca_sim_stream_resolve(CUstream s, struct ca_sim_stream_ref *out)
{
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
        r = ca_sim_current(&out->ctx);
        out->handle = s == CU_STREAM_PER_THREAD ? s : NULL;
        out->obj = NULL;
        return r;
    }
    struct CUstream_st *st = ca_sim_find_stream(s);
    if (!st && once_a_stream(s))
        ca_sim.n.dead_stream_uses++; /* undefined on a GPU: the handle may name another stream now */
    if (!st)
        return CUDA_ERROR_INVALID_HANDLE;
    if (st->ctx->sticky)
        return st->ctx->sticky;
    out->ctx = st->ctx;
    out->handle = s;
    out->obj = st;
    return CUDA_SUCCESS;
}

void ca_sim_streams_drop_ctx(struct CUctx_st *ctx)
{
    struct CUstream_st *st, *tmp;
    HASH_ITER(hh, ca_sim.streams, st, tmp) {
        if (st->ctx == ctx) {
            ca_sim_capture_stream_gone(&st->cs);
            HASH_DEL(ca_sim.streams, st);
            free(st);
        }
    }
}

CUresult ca_sim_stream_new(struct CUctx_st *ctx, unsigned flags, CUstream *out)
{
    struct CUstream_st *st = calloc(1, sizeof *st);
    if (!st)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!(st->self = new_handle())) {
        free(st);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    st->ctx = ctx;
    st->flags = flags;
    st->cs.ctx = ctx;
    st->cs.handle = st;
    st->cs.blocking = !(flags & CU_STREAM_NON_BLOCKING);
    HASH_ADD_PTR(ca_sim.streams, self, st);
    *out = st->self;
    return CUDA_SUCCESS;
}

/* Priorities change nothing when work runs as it is issued. */
CA_EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    struct CUctx_st *ctx;
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    if (r == CUDA_SUCCESS && (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = ca_sim_stream_new(ctx, flags, phStream);
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    return cuStreamCreateWithPriority(phStream, flags, 0);
}

CA_EXPORT CUresult cuStreamDestroy_v2(CUstream s)
{
    ca_sim_lock();
    CUresult r = ca_sim_check_init();
    struct CUstream_st *st = r == CUDA_SUCCESS ? ca_sim_find_stream(s) : NULL;
    if (r == CUDA_SUCCESS && !st)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS) {
        ca_sim_capture_stream_gone(&st->cs); /* its capture is invalidated, or ends with it */
        HASH_DEL(ca_sim.streams, st);
        free(st);
    }
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuStreamSynchronize(CUstream s)
{
    CA_SIM_FAIL("cuStreamSynchronize");
    struct ca_sim_stream_ref ref;
    ca_sim_lock();
    CUresult r = ca_sim_stream_resolve(s, &ref);
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_sync_stream(&ref);
    if (r == CUDA_SUCCESS) {
        ca_sim_events_complete_stream(&ref);
        ca_sim.n.stream_syncs++;
    }
    ca_sim_unlock();
    return r;
}

/* Busy while an event recorded on it is late or held, or while it is held;
 * each query counts for all its late events. */
CA_EXPORT CUresult cuStreamQuery(CUstream s)
{
    CA_SIM_FAIL("cuStreamQuery");
    struct ca_sim_stream_ref ref;
    ca_sim_lock();
    CUresult r = ca_sim_stream_resolve(s, &ref);
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_sync_stream(&ref);
    if (r == CUDA_SUCCESS && ca_sim_events_pending_query(&ref)) {
        ca_sim.n.not_ready++;
        r = CUDA_ERROR_NOT_READY;
    }
    ca_sim_unlock();
    return r;
}

void ca_sim_stream_wait_now(const struct ca_sim_stream_ref *ref, struct CUevent_st *ev)
{
    if (ref->obj)
        ref->obj->last_wait = ev;
    else if (ref->handle == CU_STREAM_PER_THREAD)
        ref->ctx->ptds_wait = ev;
    else
        ref->ctx->legacy_wait = ev;
    ca_sim_hold_wait(ref, ev->held_by);
}

/* Nothing to wait for when work is done at once; the wait is recorded so that
 * tests can see which event each stream was made to wait on. Waiting on an
 * event behind a held stream puts the waiting stream behind it too. In a
 * capture, a wait joins streams and captures (capture.c). */
CA_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
    CA_SIM_FAIL("cuStreamWaitEvent");
    struct ca_sim_stream_ref ref;
    int done = 0;
    ca_sim_lock();
    CUresult r = ca_sim_stream_resolve(s, &ref);
    struct CUevent_st *ev = r == CUDA_SUCCESS ? ca_sim_find_event(e) : NULL;
    if (r == CUDA_SUCCESS && !ev)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS && (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_wait(&ref, ev, flags, &done);
    if (r == CUDA_SUCCESS && !done)
        ca_sim_stream_wait_now(&ref, ev);
    if (r == CUDA_SUCCESS)
        ca_sim.n.stream_waits++;
    ca_sim_unlock();
    return r;
}

/* The legacy and per-thread streams are blocking (flags 0). */
CA_EXPORT CUresult cuStreamGetFlags(CUstream s, unsigned int *flags)
{
    struct ca_sim_stream_ref ref;
    ca_sim_lock();
    CUresult r = ca_sim_stream_resolve(s, &ref);
    if (r == CUDA_SUCCESS && !flags)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *flags = ref.obj ? ref.obj->flags : 0;
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuStreamGetFlags_ptsz(CUstream s, unsigned int *flags)
{
    return cuStreamGetFlags(ca_sim_ptsz(s), flags);
}

CA_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s)
{
    return cuStreamSynchronize(ca_sim_ptsz(s));
}

CA_EXPORT CUresult cuStreamQuery_ptsz(CUstream s)
{
    return cuStreamQuery(ca_sim_ptsz(s));
}

CA_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags)
{
    return cuStreamWaitEvent(ca_sim_ptsz(s), e, flags);
}
