/* Peer access on expandable segments. cuCtxEnablePeerAccess opens memory from
 * cuMemAlloc to the peer, not VMM mappings: each device reaches a mapping only
 * with the access cuMemSetAccess gave it. So, as PyTorch's expandable segments
 * do, once a context of device A has peer access to device B, every mapping of
 * B's allocator is opened to A, and so is every later one; when the last such
 * access goes (cuCtxDisablePeerAccess, or a context reset or destroyed), A's
 * access is taken back.
 *
 * Per device: the mappings its backend made (cuda_backend.c reports each map
 * and unmap) and the devices granted on them. One mutex per device: grants
 * and maps of a device are serialized, so a mapping made while a peer is
 * being granted is opened to it either way. */
#include <pthread.h>
#include <stdlib.h>

#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(e) (hash_oom = 1)
#include <uthash.h>

#include "preload/log.h"
#include "preload/preload.h"

#define MAX_DEVICES 64
#define MAX_PAIRS 256

typedef struct mapping {
    uintptr_t addr;
    size_t size;
    UT_hash_handle hh;
} mapping;

static struct owner {
    pthread_mutex_t lock;
    uint64_t granted;  /* devices whose access this device's mappings carry */
    mapping *maps;
} owners[MAX_DEVICES];

/* Peer access enabled from a context to another context's device. */
static struct pair {
    CUcontext from_ctx, to_ctx;
    int from, to;
} pairs[MAX_PAIRS];
static int npairs;
static pthread_mutex_t pairs_lock = PTHREAD_MUTEX_INITIALIZER;

static __attribute__((constructor)) void init_locks(void) {
    for (int i = 0; i < MAX_DEVICES; i++) pthread_mutex_init(&owners[i].lock, NULL);
}

static CUmemAccessDesc desc_for(int dev, CUmemAccess_flags flags) {
    CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev}, .flags = flags};
    return d;
}

/* The granted devices' descriptors, the owner's first. */
static size_t descs(int owner, uint64_t granted, CUmemAccessDesc *out) {
    size_t n = 0;
    out[n++] = desc_for(owner, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    for (int d = 0; d < MAX_DEVICES; d++)
        if (d != owner && (granted >> d & 1)) out[n++] = desc_for(d, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    return n;
}

CUresult ca_peers_map(int owner, uintptr_t addr, size_t size) {
    const ca_driver *drv = ca_drv();
    if (owner < 0 || owner >= MAX_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
    struct owner *o = &owners[owner];
    CUmemAccessDesc d[MAX_DEVICES];
    mapping *m = malloc(sizeof *m);
    pthread_mutex_lock(&o->lock);
    CUresult r = drv->cuMemSetAccess((CUdeviceptr)addr, size, d, descs(owner, o->granted, d));
    int hash_oom = 0;
    if (r == CUDA_SUCCESS && m) {
        m->addr = addr;
        m->size = size;
        HASH_ADD(hh, o->maps, addr, sizeof m->addr, m);
    }
    if (r != CUDA_SUCCESS || !m || hash_oom) {
        free(m);
        /* unknown here, a peer granted later would not reach it: the mapping fails */
        if (r == CUDA_SUCCESS) r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&o->lock);
    return r;
}

void ca_peers_unmap(int owner, uintptr_t addr) {
    if (owner < 0 || owner >= MAX_DEVICES) return;
    struct owner *o = &owners[owner];
    mapping *m;
    pthread_mutex_lock(&o->lock);
    HASH_FIND(hh, o->maps, &addr, sizeof addr, m);
    if (m) HASH_DEL(o->maps, m);
    pthread_mutex_unlock(&o->lock);
    free(m);
}

static int by_addr(const mapping *a, const mapping *b) { return a->addr < b->addr ? -1 : a->addr > b->addr; }

/* Give `peer` access to every mapping of `owner` (or take it away): one
 * cuMemSetAccess per run of contiguous mappings (a block's granules are
 * mapped one by one, and each call costs the driver); a run the driver
 * refuses whole (it may span two reservations) is set mapping by mapping. */
static void set_peer(int owner, int peer, bool on) {
    const ca_driver *drv = ca_drv();
    struct owner *o = &owners[owner];
    CUmemAccessDesc d = desc_for(peer, on ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE);
    pthread_mutex_lock(&o->lock);
    if (on) o->granted |= (uint64_t)1 << peer;
    else o->granted &= ~((uint64_t)1 << peer);
    HASH_SORT(o->maps, by_addr);
    size_t failed = 0;
    for (mapping *first = o->maps, *m; first; first = m) {
        uintptr_t end = first->addr + first->size;
        for (m = first->hh.next; m && m->addr == end; m = m->hh.next) end += m->size;
        if (drv->cuMemSetAccess((CUdeviceptr)first->addr, end - first->addr, &d, 1) == CUDA_SUCCESS) continue;
        for (mapping *one = first; one != m; one = one->hh.next)
            if (drv->cuMemSetAccess((CUdeviceptr)one->addr, one->size, &d, 1) != CUDA_SUCCESS) failed++;
    }
    pthread_mutex_unlock(&o->lock);
    if (failed && on)
        ca_warn("device %d could not be given access to %zu of device %d's mappings: its kernels and copies "
                "would fault on them",
                peer, failed, owner);
}

/* Whether some enabled pair still goes from device `from` to device `to`. */
static bool still_paired(int from, int to) {
    for (int i = 0; i < npairs; i++)
        if (pairs[i].from == from && pairs[i].to == to) return true;
    return false;
}

static int device_of(CUcontext ctx) {
    const ca_driver *drv = ca_drv();
    CUdevice dev = -1;
    CUcontext popped;
    if (drv->cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS) return -1;
    if (drv->cuCtxGetDevice(&dev) != CUDA_SUCCESS) dev = -1;
    drv->cuCtxPopCurrent_v2(&popped);
    return dev >= 0 && dev < MAX_DEVICES ? dev : -1;
}

void ca_peers_enabled(CUcontext from_ctx, CUcontext to_ctx) {
    int from = device_of(from_ctx), to = device_of(to_ctx);
    if (from < 0 || to < 0) return;
    pthread_mutex_lock(&pairs_lock);
    bool first = !still_paired(from, to);
    if (npairs < MAX_PAIRS) pairs[npairs++] = (struct pair){from_ctx, to_ctx, from, to};
    else ca_warn("too many peer accesses to follow: device %d's later mappings stay closed to device %d", to, from);
    if (first) set_peer(to, from, true);
    pthread_mutex_unlock(&pairs_lock);
}

/* Drops the pairs that match (a NULL context matches any) and takes access
 * back where no pair is left. */
static void drop_pairs(CUcontext from_ctx, CUcontext to_ctx, CUcontext either) {
    pthread_mutex_lock(&pairs_lock);
    for (int i = 0; i < npairs; i++) {
        struct pair p = pairs[i];
        bool match = either ? (p.from_ctx == either || p.to_ctx == either)
                            : (p.from_ctx == from_ctx && p.to_ctx == to_ctx);
        if (!match) continue;
        pairs[i--] = pairs[--npairs];
        if (!still_paired(p.from, p.to)) set_peer(p.to, p.from, false);
    }
    pthread_mutex_unlock(&pairs_lock);
}

void ca_peers_disabled(CUcontext from_ctx, CUcontext to_ctx) { drop_pairs(from_ctx, to_ctx, NULL); }

void ca_peers_ctx_gone(CUcontext ctx) { drop_pairs(NULL, NULL, ctx); }

void ca_peers_after_fork(void) {
    for (int i = 0; i < MAX_DEVICES; i++) {
        pthread_mutex_init(&owners[i].lock, NULL);
        owners[i].granted = 0;
        owners[i].maps = NULL; /* the parent's mappings are not the child's (left, never freed) */
    }
    pthread_mutex_init(&pairs_lock, NULL);
    npairs = 0;
}

/* ---- the driver's peer calls (cudaDeviceEnablePeerAccess reaches them too) ---- */

CA_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuCtxEnablePeerAccess) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = drv->cuCtxEnablePeerAccess(peerContext, Flags);
    CUcontext cur = NULL;
    if (r == CUDA_SUCCESS && drv->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur) ca_peers_enabled(cur, peerContext);
    return r;
}

CA_EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peerContext) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuCtxDisablePeerAccess) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = drv->cuCtxDisablePeerAccess(peerContext);
    CUcontext cur = NULL;
    if (r == CUDA_SUCCESS && drv->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur) ca_peers_disabled(cur, peerContext);
    return r;
}

/* The primary context's handle, found without changing its count (it is
 * active, so retaining and releasing it creates and destroys nothing). */
void ca_peers_primary_reset(int ordinal) {
    const ca_driver *drv = ca_drv();
    CUcontext primary = NULL;
    unsigned flags;
    int active = 0;
    if (!drv->cuDevicePrimaryCtxGetState || drv->cuDevicePrimaryCtxGetState(ordinal, &flags, &active) != CUDA_SUCCESS ||
        !active || !drv->cuDevicePrimaryCtxRetain || !drv->cuDevicePrimaryCtxRelease_v2 ||
        drv->cuDevicePrimaryCtxRetain(&primary, ordinal) != CUDA_SUCCESS)
        return; /* inactive: no peer access reaches it */
    drv->cuDevicePrimaryCtxRelease_v2(ordinal);
    ca_peers_ctx_gone(primary);
}
