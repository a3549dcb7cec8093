/* Peer access, and which device may touch which memory.
 *
 * cuCtxEnablePeerAccess gives the current context direct access to the linear
 * memory of a peer context (one way; up to CA_SIM_MAX_PEERS peers). VMM
 * mappings ignore it: each device reaches a mapping only with the access
 * cuMemSetAccess gave that device (driver_vmm.c). A device touching memory it
 * may not touch faults: CUDA_ERROR_ILLEGAL_ADDRESS, and the context is
 * poisoned (every later call in it answers the same) until it is reset or
 * destroyed. simgpu/README.md names where CUDA documents each rule. */
#include <sys/mman.h>

#include "simgpu/sim.h"

static int has_peer(const struct CUctx_st *ctx, const struct CUctx_st *peer)
{
    for (int i = 0; i < ctx->npeers; i++)
        if (ctx->peers[i] == peer)
            return 1;
    return 0;
}

/* Direct access from ctx to some context of device dev. */
static int reaches_device(const struct CUctx_st *ctx, int dev)
{
    for (int i = 0; i < ctx->npeers; i++)
        if (ctx->peers[i]->device == dev)
            return 1;
    return 0;
}

/* May the device of ctx touch reg as `kernel` says (sim.h)? */
static int may_touch(const struct CUctx_st *ctx, const struct ca_sim_region *reg, int prot, int kernel)
{
    if (reg->kind == CA_SIM_HOST || reg->kind == CA_SIM_RESERVED || reg->kind == CA_SIM_IMPORTED)
        return 1; /* imported memory: opened with lazy peer access for the importing context */
    int toucher = ctx->device;
    if (reg->device != ctx->device && !reaches_device(ctx, reg->device)) {
        if (kernel && reg->kind != CA_SIM_MAPPING)
            return 0;            /* a kernel cannot reach another device's memory without peer access */
        if (!kernel)
            toucher = reg->device; /* a staged copy: the owner's engine touches it */
    }
    if (reg->kind != CA_SIM_MAPPING)
        return 1;
    unsigned char have = reg->access[toucher];
    if (prot & PROT_WRITE)
        return have == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return have == CU_MEM_ACCESS_FLAGS_PROT_READ || have == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}

CUresult ca_sim_touch(struct CUctx_st *ctx, uintptr_t p, size_t n, int prot, int kernel)
{
    if (n == 0)
        return CUDA_SUCCESS;
    struct ca_sim_region *reg = ca_sim_regions_first_from(&ca_sim.mem, p);
    for (; reg && reg < ca_sim.mem.v + ca_sim.mem.n && reg->base < p + n; reg++) {
        if (!may_touch(ctx, reg, prot, kernel)) {
            ctx->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        }
    }
    return CUDA_SUCCESS;
}

void ca_sim_peers_drop_ctx(struct CUctx_st *ctx)
{
    ctx->npeers = 0;
    struct CUctx_st *all[SIMGPU_MAX_DEVICES + CA_SIM_MAX_CTXS];
    int n = 0;
    for (int d = 0; d < ca_sim.ndev; d++)
        all[n++] = &ca_sim.dev[d].primary;
    for (int i = 0; i < CA_SIM_MAX_CTXS; i++)
        if (ca_sim.ctxs[i])
            all[n++] = ca_sim.ctxs[i];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < all[i]->npeers; j++)
            if (all[i]->peers[j] == ctx) {
                all[i]->peers[j] = all[i]->peers[--all[i]->npeers];
                j--;
            }
}

/* Every pair of distinct simulated devices may reach each other; a device is
 * not its own peer. */
CA_EXPORT CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (dev < 0 || dev >= ca_sim.ndev || peerDev < 0 || peerDev >= ca_sim.ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    *canAccessPeer = dev != peerDev;
    return CUDA_SUCCESS;
}

CA_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    struct CUctx_st *ctx;
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    if (r == CUDA_SUCCESS && (!ca_sim_ctx_valid(peerContext) || peerContext->refcount == 0 || peerContext == ctx))
        r = CUDA_ERROR_INVALID_CONTEXT;
    else if (r == CUDA_SUCCESS && Flags)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && peerContext->device == ctx->device)
        r = CUDA_ERROR_PEER_ACCESS_UNSUPPORTED; /* cuDeviceCanAccessPeer says 0 */
    else if (r == CUDA_SUCCESS && has_peer(ctx, peerContext))
        r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    else if (r == CUDA_SUCCESS && ctx->npeers == CA_SIM_MAX_PEERS)
        r = CUDA_ERROR_TOO_MANY_PEERS;
    if (r == CUDA_SUCCESS)
        ctx->peers[ctx->npeers++] = peerContext;
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
    struct CUctx_st *ctx;
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    if (r == CUDA_SUCCESS && !ca_sim_ctx_valid(peerContext))
        r = CUDA_ERROR_INVALID_CONTEXT;
    else if (r == CUDA_SUCCESS && !has_peer(ctx, peerContext))
        r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    for (int i = 0; r == CUDA_SUCCESS && i < ctx->npeers; i++)
        if (ctx->peers[i] == peerContext) {
            ctx->peers[i] = ctx->peers[--ctx->npeers];
            break;
        }
    ca_sim_unlock();
    return r;
}

/* What a kernel on the current context's device reading (write 0) or writing
 * (write 1) [ptr, ptr+size) would meet: a test's stand-in for a launch. */
CA_EXPORT int simgpu_kernel_access(void *ptr, size_t size, int write)
{
    struct CUctx_st *ctx;
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    if (r == CUDA_SUCCESS)
        r = ca_sim_check_range((uintptr_t)ptr, size, 1, PROT_NONE);
    if (r == CUDA_SUCCESS)
        r = ca_sim_touch(ctx, (uintptr_t)ptr, size, write ? PROT_READ | PROT_WRITE : PROT_READ, 1);
    ca_sim_unlock();
    return (int)r;
}
