/* Green contexts (CUDA 12.4): a share of a device's SMs as a context of its
 * own, simulated as far as work ordering goes. cuGreenCtxCreate retains the
 * device's primary context (a retain no interposer sees) until
 * cuGreenCtxDestroy; its streams (cuGreenCtxStreamCreate) are always
 * non-blocking; cuCtxRecordEvent on the primary context covers them
 * (stream_hold.c). Resources are one SM group of the whole device, whatever
 * the descriptor says. cuCtxFromGreenCtx and cuGreenCtxRecordEvent are not
 * simulated. */
#include <stdlib.h>
#include <string.h>

#include "simgpu/sim.h"

#define SIM_SMS 132 /* an H100's */

struct CUgreenCtx_st {
    struct CUctx_st ctx;
};

struct CUdevResourceDesc_st {
    unsigned sms;
    struct CUdevResourceDesc_st *next; /* all of them, freed never: descriptors have no destroy */
};

static int valid_device(CUdevice dev)
{
    return dev >= 0 && dev < ca_sim.ndev;
}

CA_EXPORT CUresult cuDeviceGetDevResource(CUdevice device, CUdevResource *resource, CUdevResourceType type)
{
    CUresult r = ca_sim_check_init();
    if (r == CUDA_SUCCESS && (!resource || !valid_device(device) || type != CU_DEV_RESOURCE_TYPE_SM))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        memset(resource, 0, sizeof *resource);
        resource->type = CU_DEV_RESOURCE_TYPE_SM;
        resource->sm.smCount = SIM_SMS;
    }
    return r;
}

CA_EXPORT CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources,
                                             unsigned int nbResources)
{
    static struct CUdevResourceDesc_st *all;
    CUresult r = ca_sim_check_init();
    if (r == CUDA_SUCCESS && (!phDesc || !resources || nbResources != 1 ||
                              resources->type != CU_DEV_RESOURCE_TYPE_SM || !resources->sm.smCount))
        r = CUDA_ERROR_INVALID_VALUE;
    struct CUdevResourceDesc_st *d = r == CUDA_SUCCESS ? calloc(1, sizeof *d) : NULL;
    if (r == CUDA_SUCCESS && !d)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (d) {
        ca_sim_lock();
        d->sms = resources->sm.smCount;
        d->next = all;
        all = d;
        ca_sim_unlock();
        *phDesc = d;
    }
    return r;
}

CA_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags)
{
    CUresult r = ca_sim_check_init();
    if (r == CUDA_SUCCESS && (!phCtx || !desc || !valid_device(dev) || flags != CU_GREEN_CTX_DEFAULT_STREAM))
        r = CUDA_ERROR_INVALID_VALUE;
    struct CUgreenCtx_st *g = r == CUDA_SUCCESS ? calloc(1, sizeof *g) : NULL;
    if (r == CUDA_SUCCESS && !g)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (g) {
        CUcontext primary;
        cuDevicePrimaryCtxRetain(&primary, dev); /* the driver's own retain, until the destroy */
        g->ctx.device = dev;
        g->ctx.refcount = 1;
        g->ctx.green_of = primary;
        *phCtx = g;
    }
    return r;
}

CA_EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx hCtx)
{
    CUresult r = ca_sim_check_init();
    if (r == CUDA_SUCCESS && !hCtx)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS)
        return r;
    ca_sim_lock();
    ca_sim_streams_drop_ctx(&hCtx->ctx);
    ca_sim_events_drop_ctx(&hCtx->ctx);
    ca_sim_holds_drop_ctx(&hCtx->ctx);
    int dev = hCtx->ctx.device;
    ca_sim_unlock();
    free(hCtx);
    return cuDevicePrimaryCtxRelease_v2(dev);
}

CA_EXPORT CUresult cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx, unsigned int flags, int priority)
{
    CUresult r = ca_sim_check_init();
    if (r == CUDA_SUCCESS && (!phStream || !greenCtx || flags != CU_STREAM_NON_BLOCKING))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS)
        return r;
    ca_sim_lock();
    r = ca_sim_stream_new(&greenCtx->ctx, flags, phStream);
    ca_sim_unlock();
    return r;
}
