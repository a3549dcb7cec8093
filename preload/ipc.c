/* CUDA IPC of cudalloc's blocks. cuIpcGetMemHandle of a block gives a handle
 * that opens that block in another process (which runs under cudalloc too:
 * children inherit LD_PRELOAD), not the segment around it:
 *   - expandable segments: the block's granules, exported as shareable
 *     handles (POSIX file descriptors; the backend creates every granule
 *     shareable where the driver can), are sent to the importer (ipc_share.c),
 *     which maps them at an address of its own;
 *   - classic segments: the driver's own handle of the segment, with the
 *     block's offset in it.
 * The 64 bytes of the handle name the exporter's process, the export and a
 * nonce; the rest travels on request. A block that cannot be exported gets
 * CUDA's error and one line saying what to do. cudaIpc* reach these through
 * cudart's driver calls. Pointers that are not cudalloc's, and handles that
 * are not, go to the driver. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>

#include <uthash.h>

#include "preload/ipc.h"
#include "preload/log.h"

#define MAGIC "cudalloc"

/* The handle's 64 bytes. Version 2 names the exporter's server (tag). */
#define VERSION 2
typedef struct ipc_handle {
    char magic[8];
    int32_t version, pid;
    uint64_t id, nonce, size, tag;
} ipc_handle;
_Static_assert(sizeof(ipc_handle) <= sizeof(CUipcMemHandle), "fits a CUipcMemHandle");

typedef struct export {
    uint64_t id;
    uintptr_t block;
    ipc_handle h;
    ca_ipc_export_desc desc;
    int *fds;
    UT_hash_handle by_id, by_block;
} export;

static export *by_id, *by_block;
static pthread_mutex_t exports_lock = PTHREAD_MUTEX_INITIALIZER;
_Atomic size_t ca_ipc_nexports; /* read without the lock on every free */
static uint64_t next_id = 1;

typedef struct import {
    struct import *next;
    CUdeviceptr ptr, base;
    size_t size;  /* the block's, as exported */
    uint64_t serial; /* this opening's, for pointer queries (never reused) */
    size_t span;
    int kind;
    int device;  /* CA_IPC_GRANULES: the device it is mapped for (peers.c knows it) */
    unsigned refs;
    int32_t pid;
    uint64_t id;
    CUcontext ctx;
} import;

static import *imports;
static pthread_mutex_t imports_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic size_t nimports; /* read without the lock by pointer queries */
static uint64_t last_serial;

/* ---- exporting ---- */

struct found {
    uintptr_t ptr, seg_base;
    bool found, expandable;
};

static void find_segment(void *ctx, const ca_segment_view *seg, const ca_block_view *b) {
    struct found *f = ctx;
    if (b->addr != f->ptr || b->state != CA_BLOCK_ALLOCATED) return;
    f->found = true;
    f->seg_base = seg->base;
    f->expandable = seg->expandable;
}

/* Many granules mean many descriptors: the soft limit up to the hard one. */
static void more_fds(void) {
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

static CUresult export_granules(ca_device *d, uintptr_t block, size_t size, export *e) {
    const ca_driver *drv = ca_drv();
    size_t g = d->backend->granule;
    uintptr_t first = block & ~(uintptr_t)(g - 1), end = (block + size + g - 1) & ~(uintptr_t)(g - 1);
    size_t n = (end - first) / g;
    if (!drv->cuMemRetainAllocationHandle || !drv->cuMemExportToShareableHandle) return CUDA_ERROR_NOT_SUPPORTED;
    if (!(e->fds = malloc(n * sizeof *e->fds))) return CUDA_ERROR_OUT_OF_MEMORY;
    more_fds();
    CUresult r = CUDA_SUCCESS;
    size_t i = 0;
    for (; r == CUDA_SUCCESS && i < n; i++) {
        CUmemGenericAllocationHandle h;
        int fd = -1;
        r = drv->cuMemRetainAllocationHandle(&h, (void *)(first + i * g));
        if (r != CUDA_SUCCESS) break;
        r = drv->cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        drv->cuMemRelease(h);
        if (r == CUDA_SUCCESS) e->fds[i] = fd;
    }
    if (r != CUDA_SUCCESS) {
        while (i--) close(e->fds[i]);
        free(e->fds);
        e->fds = NULL;
        return r;
    }
    e->desc = (ca_ipc_export_desc){.kind = CA_IPC_GRANULES, .device = d->ordinal, .nfds = (uint32_t)n,
                                   .offset = block - first, .granule = g};
    return CUDA_SUCCESS;
}

/* The driver's handle of the segment, in the device's context. */
static CUresult export_segment(ca_device *d, uintptr_t block, uintptr_t seg_base, export *e) {
    const ca_driver *drv = ca_drv();
    CUcontext popped;
    if (!drv->cuIpcGetMemHandle) return CUDA_ERROR_NOT_SUPPORTED;
    if (drv->cuCtxPushCurrent_v2(d->ctx) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
    CUresult r = drv->cuIpcGetMemHandle(&e->desc.segment, (CUdeviceptr)seg_base);
    drv->cuCtxPopCurrent_v2(&popped);
    e->desc.kind = CA_IPC_SEGMENT;
    e->desc.device = d->ordinal;
    e->desc.offset = block - seg_base;
    return r;
}

/* One line saying what to do, once per kind of failure. */
static void cannot_export(const void *ptr, int device, CUresult r) {
    static bool told_granules, told_other;
    bool *told = r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_VALUE ? &told_granules : &told_other;
    if (__atomic_exchange_n(told, true, __ATOMIC_RELAXED)) return;
    if (told == &told_granules)
        ca_warn("cudaIpcGetMemHandle(%p): device %d's driver cannot share its virtual memory with another process "
                "(no POSIX file descriptor handles); run with CUDALLOC_CONF=expandable_segments:false to share "
                "memory between processes",
                ptr, device);
    else
        ca_warn("cudaIpcGetMemHandle(%p): the block cannot be exported (error %d, or no server for importers: "
                "too many open files?)",
                ptr, (int)r);
}

static CUresult export_block(ca_device *d, CUipcMemHandle *pHandle, CUdeviceptr dptr) {
    size_t size = 0;
    if (!pHandle || !ca_owns(d->alloc, (const void *)dptr, &size)) return CUDA_ERROR_INVALID_VALUE; /* not a block's start */
    pthread_mutex_lock(&exports_lock);
    export *e;
    HASH_FIND(by_block, by_block, &dptr, sizeof(uintptr_t), e);
    if (e) { /* exported already: the same handle */
        memset(pHandle, 0, sizeof *pHandle);
        memcpy(pHandle, &e->h, sizeof e->h);
        pthread_mutex_unlock(&exports_lock);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&exports_lock);
    struct found f = {.ptr = dptr};
    ca_visit(d->alloc, NULL, find_segment, &f);
    e = calloc(1, sizeof *e);
    CUresult r = !f.found ? CUDA_ERROR_INVALID_VALUE : !e ? CUDA_ERROR_OUT_OF_MEMORY
                 : f.expandable ? export_granules(d, dptr, size, e)
                                : export_segment(d, dptr, f.seg_base, e);
    uint64_t tag = 0;
    if (r == CUDA_SUCCESS && ca_ipc_serve(&tag) != 0) r = CUDA_ERROR_OPERATING_SYSTEM;
    if (r != CUDA_SUCCESS) {
        if (e && e->fds)
            for (uint32_t i = 0; i < e->desc.nfds; i++) close(e->fds[i]);
        if (e) free(e->fds);
        free(e);
        cannot_export((const void *)dptr, d->ordinal, r);
        return r == CUDA_ERROR_NOT_SUPPORTED ? CUDA_ERROR_INVALID_VALUE : r;
    }
    memcpy(e->h.magic, MAGIC, sizeof e->h.magic);
    e->h.version = VERSION;
    e->h.pid = getpid();
    e->h.tag = tag;
    e->h.size = size;
    if (getrandom(&e->h.nonce, sizeof e->h.nonce, 0) != sizeof e->h.nonce) e->h.nonce ^= (uint64_t)(uintptr_t)e;
    e->block = dptr;
    pthread_mutex_lock(&exports_lock);
    e->id = e->h.id = next_id++;
    HASH_ADD(by_id, by_id, id, sizeof e->id, e);
    HASH_ADD(by_block, by_block, block, sizeof e->block, e);
    atomic_fetch_add(&ca_ipc_nexports, 1);
    memset(pHandle, 0, sizeof *pHandle);
    memcpy(pHandle, &e->h, sizeof e->h);
    pthread_mutex_unlock(&exports_lock);
    return CUDA_SUCCESS;
}

CA_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr) {
    const ca_driver *drv = ca_drv();
    if (!drv) return CUDA_ERROR_NOT_INITIALIZED;
    ca_device *d = ca_owner_used((const void *)dptr);
    if (!d) return drv->cuIpcGetMemHandle ? drv->cuIpcGetMemHandle(pHandle, dptr) : CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = export_block(d, pHandle, dptr);
    ca_device_done(d);
    return r;
}

static void drop(export *e) {
    HASH_DELETE(by_id, by_id, e);
    HASH_DELETE(by_block, by_block, e);
    atomic_fetch_sub(&ca_ipc_nexports, 1);
    for (uint32_t i = 0; e->fds && i < e->desc.nfds; i++) close(e->fds[i]);
    free(e->fds);
    free(e);
}

void ca_ipc_export_freed(const void *ptr) {
    uintptr_t p = (uintptr_t)ptr;
    export *e;
    pthread_mutex_lock(&exports_lock);
    HASH_FIND(by_block, by_block, &p, sizeof p, e);
    if (e) drop(e); /* importers keep what they opened; new opens of its handle fail */
    pthread_mutex_unlock(&exports_lock);
}

void ca_ipc_device_reset(int ordinal) {
    if (!atomic_load_explicit(&ca_ipc_nexports, memory_order_relaxed)) return;
    pthread_mutex_lock(&exports_lock);
    export *e, *tmp;
    HASH_ITER(by_id, by_id, e, tmp) {
        if (e->desc.device == ordinal) drop(e);
    }
    pthread_mutex_unlock(&exports_lock);
}

int *ca_ipc_export_lookup(uint64_t id, uint64_t nonce, ca_ipc_export_desc *desc) {
    export *e;
    int *fds = NULL;
    pthread_mutex_lock(&exports_lock);
    HASH_FIND(by_id, by_id, &id, sizeof id, e);
    if (!e || e->h.nonce != nonce) {
        desc->status = CUDA_ERROR_INVALID_HANDLE;
    } else {
        *desc = e->desc;
        desc->status = CUDA_SUCCESS;
        if (desc->nfds && !(fds = malloc(desc->nfds * sizeof *fds))) desc->status = CUDA_ERROR_OUT_OF_MEMORY;
        for (uint32_t i = 0; fds && i < desc->nfds; i++)
            if ((fds[i] = dup(e->fds[i])) < 0) {
                while (i--) close(fds[i]);
                free(fds);
                fds = NULL;
                desc->status = CUDA_ERROR_OUT_OF_MEMORY;
            }
    }
    if (desc->status != CUDA_SUCCESS) desc->nfds = 0;
    pthread_mutex_unlock(&exports_lock);
    return fds;
}

/* ---- importing ---- */

/* The granules mapped back to back at an address of our own, open to the
 * current device (*device) and its peers. Takes the fds. */
static CUresult map_granules(const ca_ipc_export_desc *desc, int *fds, CUdeviceptr *base, size_t *span, int *device) {
    const ca_driver *drv = ca_drv();
    size_t g = desc->granule, n = desc->nfds;
    CUdevice dev = 0;
    CUresult r = drv->cuMemImportFromShareableHandle ? drv->cuCtxGetDevice(&dev) : CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS) r = drv->cuMemAddressReserve(base, n * g, g, 0, 0);
    size_t mapped = 0;
    for (; r == CUDA_SUCCESS && mapped < n; mapped++) {
        CUmemGenericAllocationHandle h;
        r = drv->cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fds[mapped], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        if (r != CUDA_SUCCESS) break;
        r = drv->cuMemMap(*base + mapped * g, g, 0, h, 0);
        drv->cuMemRelease(h); /* the mapping holds it */
        if (r != CUDA_SUCCESS) break;
    }
    /* open to the device and to every device with peer access to it, now and
     * later, as cudaIpcMemLazyEnablePeerAccess promises (peers.c) */
    if (r == CUDA_SUCCESS) r = ca_peers_map((int)dev, *base, n * g);
    *device = (int)dev;
    for (size_t i = 0; i < n; i++) close(fds[i]);
    if (r != CUDA_SUCCESS && *base) {
        while (mapped--) drv->cuMemUnmap(*base + mapped * g, g);
        drv->cuMemAddressFree(*base, n * g);
    }
    *span = n * g;
    return r;
}

CA_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags) {
    const ca_driver *drv = ca_drv();
    if (!drv) return CUDA_ERROR_NOT_INITIALIZED;
    ipc_handle h;
    memcpy(&h, &handle, sizeof h);
    if (memcmp(h.magic, MAGIC, sizeof h.magic) != 0 || h.version != VERSION) /* the driver's own */
        return drv->cuIpcOpenMemHandle_v2 ? drv->cuIpcOpenMemHandle_v2(pdptr, handle, Flags) : CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx = NULL;
    CUresult r = drv->cuCtxGetCurrent(&ctx);
    if (r != CUDA_SUCCESS) return r;
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    if (!pdptr || Flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) return CUDA_ERROR_INVALID_VALUE;
    if (h.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT; /* as CUDA: not in the exporting process */
    pthread_mutex_lock(&imports_lock);
    for (import *im = imports; im; im = im->next)
        if (im->pid == h.pid && im->id == h.id && im->ctx == ctx) {
            im->refs++;
            *pdptr = im->ptr;
            pthread_mutex_unlock(&imports_lock);
            return CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&imports_lock);
    ca_ipc_export_desc desc;
    int *fds = ca_ipc_fetch(h.pid, h.tag, h.id, h.nonce, &desc);
    if (desc.status == CUDA_ERROR_NOT_PERMITTED)
        ca_warn("cudaIpcOpenMemHandle: process %d refused: it shares memory with processes of its own user only",
                (int)h.pid);
    else if (desc.status != CUDA_SUCCESS)
        ca_warn("cudaIpcOpenMemHandle: process %d does not export that block (freed, the process ended, or it did "
                "not answer)", (int)h.pid);
    if (desc.status != CUDA_SUCCESS) return desc.status;
    import *im = calloc(1, sizeof *im);
    if (!im) r = CUDA_ERROR_OUT_OF_MEMORY;
    else if (desc.kind == CA_IPC_GRANULES) r = map_granules(&desc, fds, &im->base, &im->span, &im->device);
    else r = drv->cuIpcOpenMemHandle_v2(&im->base, desc.segment, Flags);
    if (!im || desc.kind != CA_IPC_GRANULES)
        for (uint32_t i = 0; i < desc.nfds; i++) close(fds[i]);
    free(fds);
    if (r != CUDA_SUCCESS) {
        free(im);
        return r;
    }
    *im = (import){.ptr = im->base + desc.offset, .base = im->base, .size = h.size, .span = im->span, .kind = desc.kind,
                   .serial = __atomic_add_fetch(&last_serial, 1, __ATOMIC_RELAXED),
                   .device = im->device, .refs = 1, .pid = h.pid, .id = h.id, .ctx = ctx};
    *pdptr = im->ptr;
    pthread_mutex_lock(&imports_lock);
    im->next = imports;
    imports = im;
    atomic_fetch_add(&nimports, 1);
    pthread_mutex_unlock(&imports_lock);
    return CUDA_SUCCESS;
}

bool ca_ipc_import_at(CUdeviceptr p, CUdeviceptr *base, size_t *size, CUcontext *ctx, uint64_t *id) {
    if (!atomic_load_explicit(&nimports, memory_order_relaxed)) return false; /* the usual case: none */
    pthread_mutex_lock(&imports_lock);
    import *im = imports;
    while (im && p - im->ptr >= im->size) im = im->next;
    if (im) *base = im->ptr, *size = im->size, *ctx = im->ctx, *id = im->serial;
    pthread_mutex_unlock(&imports_lock);
    return im != NULL;
}

/* Programs built against headers older than CUDA 11 name the same call so. */
#undef cuIpcOpenMemHandle
CA_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags) {
    return cuIpcOpenMemHandle_v2(pdptr, handle, Flags);
}

CA_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
    const ca_driver *drv = ca_drv();
    if (!drv) return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&imports_lock);
    import **link = &imports;
    while (*link && (*link)->ptr != dptr) link = &(*link)->next;
    import *im = *link;
    bool last = im && --im->refs == 0;
    if (last) {
        *link = im->next;
        atomic_fetch_sub(&nimports, 1);
    }
    pthread_mutex_unlock(&imports_lock);
    if (!im) return drv->cuIpcCloseMemHandle ? drv->cuIpcCloseMemHandle(dptr) : CUDA_ERROR_INVALID_VALUE;
    if (!last) return CUDA_SUCCESS; /* opened more than once: one reference less */
    /* The importer's work queued on the mapping ends before it goes: the
     * driver does not always wait when memory is unmapped. */
    CUcontext popped;
    if (drv->cuCtxPushCurrent_v2(im->ctx) == CUDA_SUCCESS) {
        drv->cuCtxSynchronize();
        drv->cuCtxPopCurrent_v2(&popped);
    }
    CUresult r;
    if (im->kind == CA_IPC_GRANULES) {
        ca_peers_unmap(im->device, im->base);
        r = drv->cuMemUnmap(im->base, im->span);
        if (r == CUDA_SUCCESS) r = drv->cuMemAddressFree(im->base, im->span);
    } else {
        r = drv->cuIpcCloseMemHandle(im->base);
    }
    free(im);
    return r;
}

void ca_ipc_after_fork(void) {
    /* The child (a DataLoader worker) shares none of the parent's exports: the
     * descriptors it inherited would keep the parent's freed memory from
     * going back to the device while it lives. The table is read only if no
     * other thread of the parent held it at the fork. */
    if (pthread_mutex_trylock(&exports_lock) == 0) {
        for (export *e = by_id; e; e = e->by_id.next)
            for (uint32_t i = 0; e->fds && i < e->desc.nfds; i++) close(e->fds[i]);
        pthread_mutex_unlock(&exports_lock);
    }
    pthread_mutex_init(&exports_lock, NULL);
    pthread_mutex_init(&imports_lock, NULL);
    by_id = by_block = NULL; /* the parent's (left, never freed: another thread may have held the lock) */
    atomic_store(&ca_ipc_nexports, 0);
    imports = NULL;
    atomic_store(&nimports, 0);
    ca_ipc_share_after_fork();
}
