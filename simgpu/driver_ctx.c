/* Contexts as the real driver has them: one primary context per device,
 * retained and released by count, contexts of their own made with cuCtxCreate
 * and gone with cuCtxDestroy, and a per-thread stack of current contexts.
 * A thread with no current context gets CUDA_ERROR_INVALID_CONTEXT from every
 * call that needs one; that is what makes cudart's lazy initialization matter.
 * A context poisoned by a fault (driver_peer.c) answers that fault to every
 * call until it is reset or destroyed. */
#include <stdlib.h>

#include "simgpu/sim.h"

static __thread struct CUctx_st *stack[CA_SIM_CTX_STACK];
static __thread int depth;

int ca_sim_ctx_valid(CUcontext ctx)
{
    if (!ctx)
        return 0;
    for (int d = 0; d < ca_sim.ndev; d++)
        if (ctx == &ca_sim.dev[d].primary)
            return 1;
    for (int i = 0; i < CA_SIM_MAX_CTXS; i++)
        if (ctx == ca_sim.ctxs[i])
            return 1;
    return 0;
}

static int valid_ctx(CUcontext ctx)
{
    return ca_sim_ctx_valid(ctx);
}

struct CUctx_st *ca_sim_current_or_null(void)
{
    return depth ? stack[depth - 1] : NULL;
}

CUresult ca_sim_current(struct CUctx_st **ctx)
{
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct CUctx_st *c = ca_sim_current_or_null();
    if (c && c->created && !valid_ctx(c))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED; /* destroyed while current here */
    if (!c || c->refcount == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (c->sticky)
        return c->sticky;
    *ctx = c;
    return CUDA_SUCCESS;
}

/* An explicit context argument, or the current one when it is NULL. */
static CUresult given_or_current(CUcontext given, struct CUctx_st **ctx)
{
    if (!given)
        return ca_sim_current(ctx);
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!valid_ctx(given) || given->refcount == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (given->sticky)
        return given->sticky;
    *ctx = given;
    return CUDA_SUCCESS;
}

/* Frees everything a context owns (reset, or release of the last reference). */
static void destroy_resources(struct CUctx_st *ctx)
{
    for (size_t i = ca_sim.mem.n; i-- > 0;) {
        struct ca_sim_region *reg = &ca_sim.mem.v[i];
        if (reg->kind != CA_SIM_MAPPING && reg->ctx == ctx) {
            ca_sim_linear_unmap(reg);
            ca_sim_regions_remove(&ca_sim.mem, reg);
        }
    }
    ca_sim_captures_drop_ctx(ctx);
    ca_sim_graphs_drop_ctx(ctx);
    ca_sim_gmem_drop_device(ctx->device);
    ca_sim_streams_drop_ctx(ctx);
    ca_sim_events_drop_ctx(ctx);
    ca_sim_holds_drop_ctx(ctx);
    ca_sim_peers_drop_ctx(ctx);
    ctx->sticky = CUDA_SUCCESS;
    ctx->legacy_wait = ctx->ptds_wait = NULL;
    ctx->legacy_behind = ctx->ptds_behind = NULL;
}

CA_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = ca_sim_current_or_null();
    return CUDA_SUCCESS;
}

/* Replaces the top of the stack; NULL pops it. */
CA_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ctx) {
        if (depth)
            depth--;
        return CUDA_SUCCESS;
    }
    if (!valid_ctx(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (depth == 0)
        depth = 1;
    stack[depth - 1] = ctx;
    return CUDA_SUCCESS;
}

CA_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    CA_SIM_FAIL("cuCtxPushCurrent");
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ctx(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (depth == CA_SIM_CTX_STACK)
        return CUDA_ERROR_OUT_OF_MEMORY;
    stack[depth++] = ctx;
    return CUDA_SUCCESS;
}

CA_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    CA_SIM_FAIL("cuCtxPopCurrent");
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    depth--;
    if (pctx)
        *pctx = stack[depth];
    return CUDA_SUCCESS;
}

/* A query: answered for a poisoned context too (cudaDeviceReset needs it to
 * find the device it resets). */
CA_EXPORT CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext given)
{
    struct CUctx_st *ctx;
    ca_sim_lock();
    CUresult r = given_or_current(given, &ctx);
    struct CUctx_st *c = given ? given : ca_sim_current_or_null();
    if (r != CUDA_SUCCESS && c && ca_sim_ctx_valid(c) && r == c->sticky) {
        ctx = c;
        r = CUDA_SUCCESS;
    }
    ca_sim_unlock();
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = ctx->device;
    return CUDA_SUCCESS;
}

CA_EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    return cuCtxGetDevice_v2(device, NULL);
}

/* Work is done when it is issued; synchronizing completes late events. */
CA_EXPORT CUresult cuCtxSynchronize_v2(CUcontext given)
{
    CA_SIM_FAIL("cuCtxSynchronize");
    struct CUctx_st *ctx;
    ca_sim_lock();
    CUresult r = given_or_current(given, &ctx);
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_sync_ctx(ctx);
    if (r == CUDA_SUCCESS) {
        ca_sim_events_complete_ctx(ctx);
        ca_sim.n.ctx_syncs++;
    }
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuCtxSynchronize(void)
{
    return cuCtxSynchronize_v2(NULL);
}

static CUresult check_dev(CUdevice dev)
{
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return dev >= 0 && dev < ca_sim.ndev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CA_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult r = check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    ca_sim_lock();
    ca_sim.dev[dev].primary.refcount++;
    *pctx = &ca_sim.dev[dev].primary;
    ca_sim_unlock();
    return CUDA_SUCCESS;
}

/* The last release resets the context: its memory, streams and events go. */
CA_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult r = check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    ca_sim_lock();
    struct CUctx_st *ctx = &ca_sim.dev[dev].primary;
    if (ctx->refcount == 0) {
        r = CUDA_ERROR_INVALID_CONTEXT;
    } else if (--ctx->refcount == 0) {
        destroy_resources(ctx);
    }
    ca_sim_unlock();
    return r;
}

/* Resetting frees what the context owns but does not release it. */
CA_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CUresult r = check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    ca_sim_lock();
    destroy_resources(&ca_sim.dev[dev].primary);
    ca_sim_unlock();
    return CUDA_SUCCESS;
}

/* For tests: a retain or release of the primary context that no interposer
 * sees (the driver's own, as green contexts and libraries with private entry
 * tables make): the driver's functions called from inside it. */
CA_EXPORT int simgpu_primary_ctx_unseen(int device, int retain)
{
    CUcontext ctx;
    CUresult r = retain ? cuDevicePrimaryCtxRetain(&ctx, device) : cuDevicePrimaryCtxRelease_v2(device);
    return r == CUDA_SUCCESS ? 0 : -1;
}

/* The CUDA 7.0 entries, still exported and still what cuGetProcAddress
 * answers for versions before 11.0 (cudaTypedefs.h: PFN_..._v7000). */
CA_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return cuDevicePrimaryCtxRelease_v2(dev);
}

CA_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    return cuDevicePrimaryCtxReset_v2(dev);
}

CA_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult r = check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    ca_sim_lock();
    *flags = ca_sim.dev[dev].primary.flags;
    *active = ca_sim.dev[dev].primary.refcount > 0;
    ca_sim_unlock();
    return CUDA_SUCCESS;
}

CA_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    CUresult r = check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (flags & ~(unsigned)(CU_CTX_SCHED_MASK | CU_CTX_LMEM_RESIZE_TO_MAX | CU_CTX_COREDUMP_ENABLE |
                            CU_CTX_USER_COREDUMP_ENABLE | CU_CTX_SYNC_MEMOPS))
        return CUDA_ERROR_INVALID_VALUE;
    ca_sim_lock();
    ca_sim.dev[dev].primary.flags = flags;
    ca_sim_unlock();
    return CUDA_SUCCESS;
}

/* A context of its own on dev, current on the calling thread (pushed). */
static CUresult create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUresult r = check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx || (flags & ~(unsigned)(CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX |
                                       CU_CTX_COREDUMP_ENABLE | CU_CTX_USER_COREDUMP_ENABLE | CU_CTX_SYNC_MEMOPS)))
        return CUDA_ERROR_INVALID_VALUE;
    if (depth == CA_SIM_CTX_STACK)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct CUctx_st *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ctx->device = dev;
    ctx->refcount = 1;
    ctx->flags = flags;
    ctx->created = 1;
    ca_sim_lock();
    int slot = -1;
    for (int i = 0; i < CA_SIM_MAX_CTXS && slot < 0; i++)
        if (!ca_sim.ctxs[i])
            slot = i;
    if (slot >= 0)
        ca_sim.ctxs[slot] = ctx;
    ca_sim_unlock();
    if (slot < 0) {
        free(ctx);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    stack[depth++] = ctx;
    *pctx = ctx;
    return CUDA_SUCCESS;
}

CA_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
    if (params && (params->execAffinityParams || params->numExecAffinityParams || params->cigParams))
        return CUDA_ERROR_NOT_SUPPORTED; /* green contexts and CIG are not simulated */
    return create(pctx, flags, dev);
}

CA_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return create(pctx, flags, dev);
}

/* Its memory, streams, events and peers go with it; VMM and pool memory stay
 * (they belong to no context). It is popped if current here; threads where it
 * is still current get CUDA_ERROR_CONTEXT_IS_DESTROYED. The handle is never
 * reused, so such a thread cannot reach another context through it. */
CA_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    ca_sim_lock();
    int slot = -1;
    for (int i = 0; i < CA_SIM_MAX_CTXS; i++)
        if (ctx && ca_sim.ctxs[i] == ctx)
            slot = i;
    if (slot < 0) {
        ca_sim_unlock();
        return CUDA_ERROR_INVALID_CONTEXT; /* primary contexts go with cuDevicePrimaryCtxRelease */
    }
    destroy_resources(ctx);
    ca_sim.ctxs[slot] = NULL;
    ctx->dead_next = ca_sim.dead_ctxs;
    ca_sim.dead_ctxs = ctx;
    ca_sim_unlock();
    if (depth && stack[depth - 1] == ctx)
        depth--;
    return CUDA_SUCCESS;
}
