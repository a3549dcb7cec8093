/* The primary context's last release destroys it (cuDevicePrimaryCtxRelease:
 * "when the count reaches zero the primary context will be destroyed"), and
 * with it what was allocated in it: the device's allocator must follow, before
 * the context goes. The count is the driver's; the preload sees every retain
 * and release made through the driver's entry points (cudart's too) and keeps
 * its own, so it knows which release is the last. */
#include "preload/preload.h"

#define MAX_DEVICES 64

static unsigned retains[MAX_DEVICES];
static CUcontext primaries[MAX_DEVICES];

CA_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuDevicePrimaryCtxRetain) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = drv->cuDevicePrimaryCtxRetain(pctx, dev);
    if (r == CUDA_SUCCESS && dev >= 0 && dev < MAX_DEVICES) {
        __atomic_store_n(&primaries[dev], *pctx, __ATOMIC_RELAXED);
        __atomic_fetch_add(&retains[dev], 1, __ATOMIC_RELAXED);
    }
    return r;
}

CA_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuDevicePrimaryCtxRelease_v2) return CUDA_ERROR_NOT_INITIALIZED;
    bool ours = dev >= 0 && dev < MAX_DEVICES;
    if (ours && __atomic_load_n(&retains[dev], __ATOMIC_RELAXED) == 1) { /* the last: it goes */
        CUcontext primary = __atomic_load_n(&primaries[dev], __ATOMIC_RELAXED);
        ca_peers_ctx_gone(primary);
        ca_device_ctx_gone(primary);
    }
    CUresult r = drv->cuDevicePrimaryCtxRelease_v2(dev);
    if (r == CUDA_SUCCESS && ours && __atomic_load_n(&retains[dev], __ATOMIC_RELAXED))
        __atomic_fetch_sub(&retains[dev], 1, __ATOMIC_RELAXED);
    return r;
}

void ca_contexts_after_fork(void) {
    for (int i = 0; i < MAX_DEVICES; i++) retains[i] = 0, primaries[i] = NULL; /* the child retains its own */
}
