/* The primary context's last release destroys it (cuDevicePrimaryCtxRelease:
 * "when the count reaches zero the primary context will be destroyed"), and
 * with it what was allocated in it: the device's allocator must follow. The
 * count is the driver's alone: the driver and libraries retain the primary
 * context through routes no interposer sees (green contexts hold it), so the
 * retains seen say nothing about which release is the last. The driver is
 * asked after each release (cuDevicePrimaryCtxGetState) whether the context is
 * still active; when it is not, the allocator follows it (devices.c). */
#include <pthread.h>
#include <stdatomic.h>

#include "preload/log.h"
#include "preload/preload.h"

#define MAX_DEVICES 64

static CUcontext primaries[MAX_DEVICES];

/* Is the device's primary context, known to us, inactive now? */
static CUcontext inactive_primary(const ca_driver *drv, CUdevice dev) {
    CUcontext primary = dev >= 0 && dev < MAX_DEVICES ? __atomic_load_n(&primaries[dev], __ATOMIC_RELAXED) : NULL;
    unsigned flags;
    int active = 1;
    if (!primary || !drv->cuDevicePrimaryCtxGetState || drv->cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS)
        return NULL;
    return active ? NULL : primary;
}

/* The primary context went: its peer access and the allocator follow. */
static void follow(CUcontext gone) {
    if (!gone) return;
    ca_peers_ctx_gone(gone);
    ca_device_ctx_went(gone);
}

/* A context that went by a release no interposer saw (the driver's own) is
 * followed when the next retain finds it inactive. */
CA_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuDevicePrimaryCtxRetain) return CUDA_ERROR_NOT_INITIALIZED;
    follow(inactive_primary(drv, dev));
    CUresult r = drv->cuDevicePrimaryCtxRetain(pctx, dev);
    if (r == CUDA_SUCCESS && dev >= 0 && dev < MAX_DEVICES) __atomic_store_n(&primaries[dev], *pctx, __ATOMIC_RELAXED);
    return r;
}

CA_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuDevicePrimaryCtxRelease_v2) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = drv->cuDevicePrimaryCtxRelease_v2(dev);
    if (r == CUDA_SUCCESS) follow(inactive_primary(drv, dev));
    return r;
}

/* ---- contexts of their own (cuCtxCreate) and green contexts ----
 * The legacy stream of a context orders itself against the blocking streams
 * of that context only (CUDA's "stream synchronization behavior"): work on a
 * second context of the device is not behind the allocator's context's
 * legacy event, though it may use the allocator's blocks; a green context's
 * streams are all non-blocking and made past every hook
 * (cuGreenCtxStreamCreate), and only cuCtxRecordEvent on the primary context
 * covers them. Fences cover every context of the device (cuda_backend.c), so
 * the contexts made are known. */
#define MAX_MADE 64

static struct made {
    CUcontext ctx; /* or the green context */
    int device;
    bool green;
} made[MAX_MADE];
static size_t nmade;
static _Atomic size_t made_alive; /* read without the lock: are there any? */
static pthread_mutex_t made_lock = PTHREAD_MUTEX_INITIALIZER;

bool ca_contexts_none_made(void) { return atomic_load(&made_alive) == 0; }

size_t ca_contexts_others(int device, CUcontext mine, CUcontext *out, size_t cap) {
    size_t n = 0;
    pthread_mutex_lock(&made_lock);
    for (size_t i = 0; i < nmade; i++)
        if (made[i].device == device && made[i].ctx != mine && !made[i].green) {
            if (n < cap) out[n] = made[i].ctx;
            n++;
        }
    pthread_mutex_unlock(&made_lock);
    CUcontext primary = device >= 0 && device < MAX_DEVICES ? __atomic_load_n(&primaries[device], __ATOMIC_RELAXED) : NULL;
    unsigned flags;
    int active = 0;
    const ca_driver *drv = ca_drv();
    if (primary && primary != mine && drv->cuDevicePrimaryCtxGetState &&
        drv->cuDevicePrimaryCtxGetState(device, &flags, &active) == CUDA_SUCCESS && active) {
        if (n < cap) out[n] = primary;
        n++;
    }
    return n;
}

bool ca_contexts_green(int device) {
    bool any = false;
    pthread_mutex_lock(&made_lock);
    for (size_t i = 0; i < nmade; i++) any |= made[i].device == device && made[i].green;
    pthread_mutex_unlock(&made_lock);
    return any;
}

/* Counted before the program can use it; a context made after plain frees
 * were handed out behind the legacy event alone starts behind them. */
static void made_one(CUcontext ctx, int dev, bool green) {
    pthread_mutex_lock(&made_lock);
    bool kept = nmade < MAX_MADE;
    if (kept) made[nmade++] = (struct made){ctx, dev, green};
    pthread_mutex_unlock(&made_lock);
    if (!kept) {
        ca_warn("more than %d contexts of their own: plain frees now wait for the device", MAX_MADE);
        ca_conf.sync_free = true;
        return;
    }
    atomic_fetch_add(&made_alive, 1);
    ca_streams_context_made(dev);
}

void ca_contexts_destroyed(CUcontext ctx) {
    pthread_mutex_lock(&made_lock);
    for (size_t i = 0; i < nmade; i++)
        if (made[i].ctx == ctx) {
            made[i] = made[--nmade];
            atomic_fetch_sub(&made_alive, 1);
            break;
        }
    pthread_mutex_unlock(&made_lock);
}

CA_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuCtxCreate_v2) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = drv->cuCtxCreate_v2(pctx, flags, dev);
    if (r == CUDA_SUCCESS) made_one(*pctx, dev, false);
    return r;
}

CA_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n, unsigned int flags,
                                  CUdevice dev) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuCtxCreate_v3) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = drv->cuCtxCreate_v3(pctx, params, n, flags, dev);
    if (r == CUDA_SUCCESS) made_one(*pctx, dev, false);
    return r;
}

CA_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuCtxCreate_v4) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = drv->cuCtxCreate_v4(pctx, params, flags, dev);
    if (r == CUDA_SUCCESS) made_one(*pctx, dev, false);
    return r;
}

CA_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuGreenCtxCreate) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = drv->cuGreenCtxCreate(phCtx, desc, dev, flags);
    if (r == CUDA_SUCCESS) made_one((CUcontext)(void *)*phCtx, dev, true);
    return r;
}

CA_EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx hCtx) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuGreenCtxDestroy) return CUDA_ERROR_NOT_INITIALIZED;
    ca_contexts_destroyed((CUcontext)(void *)hCtx);
    return drv->cuGreenCtxDestroy(hCtx);
}

void ca_contexts_after_fork(void) {
    for (int i = 0; i < MAX_DEVICES; i++) primaries[i] = NULL; /* the child retains its own */
    pthread_mutex_init(&made_lock, NULL);
    nmade = 0;
    atomic_store(&made_alive, 0);
}
