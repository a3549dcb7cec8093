/* Held streams (simgpu_stream_hold, for tests): work here runs when it is
 * issued, so "work still queued on a stream" exists only where a test asks for
 * it. An event remembers the held stream it is behind (held_by); releasing the
 * hold, or a synchronize that covers the event, completes it. What an event
 * is behind, by the stream it is recorded on:
 *   - a held stream: that stream;
 *   - the legacy stream: any held blocking stream of its context (it waits
 *     for blocking streams, as on a GPU);
 *   - any stream made to wait on an event behind a held stream: that stream,
 *     until a synchronize of the waiting stream or of the context.
 * One held stream per event is enough for the tests; a hold on the legacy or
 * per-thread stream is not offered. */
#include <stdio.h>

#include "simgpu/sim.h"

struct ca_sim_hold *ca_sim_find_hold(CUstream handle)
{
    for (int i = 0; i < ca_sim.nholds; i++)
        if (ca_sim.holds[i].handle == handle)
            return &ca_sim.holds[i];
    return NULL;
}

static CUstream still_held(CUstream s)
{
    return s && ca_sim_find_hold(s) ? s : NULL;
}

CUstream ca_sim_hold_for_record(const struct ca_sim_stream_ref *ref)
{
    if (!ca_sim.nholds)
        return NULL;
    if (ref->obj)
        return ca_sim_find_hold(ref->handle) ? ref->handle : still_held(ref->obj->behind);
    if (ref->handle == CU_STREAM_PER_THREAD)
        return still_held(ref->ctx->ptds_behind);
    for (int i = 0; i < ca_sim.nholds; i++) {
        const struct ca_sim_hold *h = &ca_sim.holds[i];
        if (h->ctx == ref->ctx && !(h->flags & CU_STREAM_NON_BLOCKING))
            return h->handle;
    }
    return still_held(ref->ctx->legacy_behind);
}

/* Work of the whole context (cuCtxRecordEvent) is behind any held stream of
 * it or of its green contexts, and behind what a stream of it waits behind. */
CUstream ca_sim_hold_for_context(struct CUctx_st *ctx)
{
    if (!ca_sim.nholds) /* nothing is behind a hold: no need to look through every stream */
        return NULL;
    for (int i = 0; i < ca_sim.nholds; i++)
        if (ca_sim.holds[i].ctx == ctx || ca_sim.holds[i].ctx->green_of == ctx)
            return ca_sim.holds[i].handle;
    struct CUstream_st *st, *tmp;
    HASH_ITER(hh, ca_sim.streams, st, tmp) {
        if (st->ctx == ctx && still_held(st->behind))
            return st->behind;
    }
    CUstream s = still_held(ctx->legacy_behind);
    return s ? s : still_held(ctx->ptds_behind);
}

static CUstream *behind_of(const struct ca_sim_stream_ref *ref)
{
    if (ref->obj)
        return &ref->obj->behind;
    return ref->handle == CU_STREAM_PER_THREAD ? &ref->ctx->ptds_behind : &ref->ctx->legacy_behind;
}

void ca_sim_hold_wait(const struct ca_sim_stream_ref *ref, CUstream held)
{
    if (held)
        *behind_of(ref) = held;
}

void ca_sim_hold_clear_stream(const struct ca_sim_stream_ref *ref)
{
    *behind_of(ref) = NULL;
}

static void remove_hold(struct ca_sim_hold *h)
{
    *h = ca_sim.holds[--ca_sim.nholds];
}

void ca_sim_holds_drop_ctx(struct CUctx_st *ctx)
{
    for (int i = ca_sim.nholds; i-- > 0;)
        if (ca_sim.holds[i].ctx == ctx)
            remove_hold(&ca_sim.holds[i]);
}

/* The work behind `handle` ran, up to the event recorded `upto`: those
 * events complete; with all of it, nothing waits behind it any more. */
static void run_behind(CUstream handle, unsigned long long upto)
{
    struct CUevent_st *e, *etmp;
    HASH_ITER(hh, ca_sim.events, e, etmp) {
        if (e->held_by == handle && e->seq <= upto)
            e->held_by = NULL;
    }
    if (upto != CA_SIM_ALL_WORK)
        return;
    struct CUstream_st *st, *stmp;
    HASH_ITER(hh, ca_sim.streams, st, stmp) {
        if (st->behind == handle)
            st->behind = NULL;
    }
    for (int d = 0; d < ca_sim.ndev; d++) {
        struct CUctx_st *c = &ca_sim.dev[d].primary;
        if (c->legacy_behind == handle)
            c->legacy_behind = NULL;
        if (c->ptds_behind == handle)
            c->ptds_behind = NULL;
    }
}

int ca_sim_hold_add(CUstream handle, struct CUctx_st *ctx, unsigned flags)
{
    if (ca_sim.nholds == SIMGPU_MAX_HOLDS)
        return -1;
    ca_sim.holds[ca_sim.nholds++] = (struct ca_sim_hold){handle, ctx, flags};
    return 0;
}

void ca_sim_hold_release(CUstream handle)
{
    struct ca_sim_hold *h = ca_sim_find_hold(handle);
    if (!h)
        return;
    remove_hold(h);
    run_behind(handle, CA_SIM_ALL_WORK);
}

/* A synchronize needs work issued behind `held`: on a GPU it waits until
 * that work ends, so here it runs now (the hold stays for later work).
 * Whether there was a hold: the caller counts its wait in held_waits, as a
 * hold nobody releases stands for work that might never end, which a test
 * must see rather than have it passed silently. */
int ca_sim_hold_run(CUstream held, unsigned long long upto)
{
    if (!held)
        return 0;
    run_behind(held, upto);
    struct ca_sim_hold *h = ca_sim_find_hold(held);
    if (h)
        h->waited = 1;
    return 1;
}

/* A hold whose work a wait ran and that nobody released: on a GPU that wait
 * would not have ended. Said once, at exit, so that no test passes it by. */
__attribute__((destructor)) static void report_unended_waits(void)
{
    ca_sim_lock();
    for (int i = 0; i < ca_sim.nholds; i++)
        if (ca_sim.holds[i].waited)
            fprintf(stderr, "simgpu: a synchronize waited for work held on stream %p (simgpu_stream_hold) that was "
                            "never released: on a GPU that wait would not have ended\n", ca_sim.holds[i].handle);
    ca_sim_unlock();
}

int ca_sim_holds_run_ctx(struct CUctx_st *ctx)
{
    int ran = 0;
    for (int i = 0; i < ca_sim.nholds; i++) /* a primary context's covers its green contexts' */
        if (ca_sim.holds[i].ctx == ctx || ca_sim.holds[i].ctx->green_of == ctx)
            ran |= ca_sim_hold_run(ca_sim.holds[i].handle, CA_SIM_ALL_WORK);
    return ran;
}

CA_EXPORT int simgpu_stream_hold(void *stream, int hold)
{
    int rc = 0;
    ca_sim_lock();
    struct ca_sim_hold *h = ca_sim_find_hold(stream);
    if (hold) {
        struct CUstream_st *st = ca_sim.initialized ? ca_sim_find_stream(stream) : NULL;
        if (!st || (!h && ca_sim_hold_add(stream, st->ctx, st->flags)))
            rc = -1;
    } else if (!h) {
        rc = -1;
    } else {
        ca_sim_hold_release(stream);
        ca_sim_memops_settle();
    }
    ca_sim_unlock();
    return rc;
}
