/* What a library asks the driver about a pointer (NCCL, UCX, Open MPI, RDMA
 * registration): a block answers as the cudaMalloc allocation it stands for,
 * not as the virtual memory it lives in. Its range is the block, its buffer
 * ID its own (a new one for each allocation at an address), its context the
 * allocator's, and it is legacy-IPC capable where ipc.c can export it. A block made
 * by cudaMallocAsync answers as stream-ordered pool memory: no context, not
 * legacy-IPC capable, the device's current pool. Addresses in our ranges that
 * no live block holds answer as freed cudaMalloc memory: not CUDA's. Memory
 * this process opened with cudaIpcOpenMemHandle (ipc.c maps it as granules of
 * its own) answers as such memory does: the block opened, in the opener's
 * context, not exported again. Everything else is the driver's to answer. */
#include <string.h>
#include <unistd.h>

#include "preload/preload.h"

/* Our buffer IDs: the allocator's, in a half of the 64-bit space the driver's
 * counters never reach, so that they cannot equal the ID of the driver's own
 * allocations (cudaMalloc memory that passed through us, host memory); what
 * this process opened with cudaIpcOpenMemHandle in a quarter of its own. */
#define OUR_IDS (1ull << 63)
#define IMPORT_IDS (OUR_IDS | 1ull << 62)

/* What an address is to us. */
typedef struct block {
    enum { NOT_OURS, FREE, LIVE, IMPORTED } kind; /* FREE: in our ranges, no block there */
    CUdeviceptr base;
    size_t size;
    CUcontext ctx;   /* LIVE: the allocator's (NULL for stream-ordered memory); IMPORTED: the opener's */
    uint64_t id;     /* its buffer ID */
    bool ordered;    /* LIVE: made by cudaMallocAsync */
    bool exportable; /* LIVE: ipc.c can export it (cuIpcGetMemHandle) */
    ca_device *d;    /* LIVE, FREE: whose */
} block;

/* The block holding p, or where p lies in memory of ours. */
static block lookup(CUdeviceptr p) {
    block b = {.kind = NOT_OURS};
    ca_allocation a;
    if (!p) return b;
    if ((b.d = ca_owner_used((const void *)p))) { /* in an allocator's ranges (read without its locks) */
        if (!ca_find_allocation(b.d->alloc, (const void *)p, &a)) b.kind = FREE;
        else
            b = (block){.kind = LIVE, .base = a.addr, .size = a.requested, .ctx = a.ordered ? NULL : b.d->ctx,
                        .id = OUR_IDS | a.id, .ordered = a.ordered, .d = b.d,
                        .exportable = !a.expandable || ca_backend_cuda_shareable(b.d->backend)};
        ca_device_done(b.d);
        return b;
    }
    if (ca_ipc_import_at(p, &b.base, &b.size, &b.ctx, &b.id)) b.kind = IMPORTED, b.id |= IMPORT_IDS;
    return b;
}

static CUresult no_driver(void) { return CUDA_ERROR_NOT_INITIALIZED; }

CA_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuMemGetAddressRange_v2) return no_driver();
    block b = lookup(dptr);
    if (b.kind == NOT_OURS) return drv->cuMemGetAddressRange_v2(pbase, psize, dptr);
    if (b.kind == FREE) return CUDA_ERROR_NOT_FOUND;
    if (pbase) *pbase = b.base;
    if (psize) *psize = b.size;
    return CUDA_SUCCESS;
}

/* The value of an attribute we answer for a live block or an import, into
 * data; false for the attributes the driver answers (DEVICE_ORDINAL of an
 * import; ACCESS_FLAGS: the current device's access, which peers.c keeps as
 * peer access gives it on cudaMalloc memory; IS_GPU_DIRECT_RDMA_CAPABLE,
 * P2P_TOKENS, SYNC_MEMOPS, IS_HW_DECOMPRESS_CAPABLE: what the driver says of
 * the memory itself; DEVICE_POINTER, HOST_POINTER: the address as it is). */
static bool ours(const block *b, CUpointer_attribute a, void *data) {
    const ca_driver *drv = ca_drv();
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = b->ctx;
        return true;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
        return true;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        if (!b->d) return false;
        *(int *)data = b->d->ordinal;
        return true;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: /* one allocation, one physical allocation */
        *(unsigned long long *)data = b->id;
        return true;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(bool *)data = false;
        return true;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: /* imported memory is not exported again */
        *(bool *)data = b->kind == LIVE && !b->ordered && b->exportable;
        return true;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = b->base;
        return true;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *(size_t *)data = b->size;
        return true;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        *(void **)data = (void *)b->base;
        return true;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(bool *)data = true;
        return true;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: /* cudaMalloc and default-pool memory: none */
        *(unsigned long long *)data = CU_MEM_HANDLE_TYPE_NONE;
        return true;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: {
        CUmemoryPool pool = NULL;
        if (b->ordered && drv->cuDeviceGetMemPool && drv->cuDeviceGetMemPool(&pool, b->d->ordinal) != CUDA_SUCCESS)
            pool = NULL;
        *(CUmemoryPool *)data = pool;
        return true;
    }
    default:
        return false;
    }
}

CA_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuPointerGetAttribute) return no_driver();
    block b = lookup(ptr);
    if (b.kind == NOT_OURS || !data) return drv->cuPointerGetAttribute(data, attribute, ptr);
    if (b.kind == FREE) return CUDA_ERROR_INVALID_VALUE; /* as at an address no allocation holds */
    return ours(&b, attribute, data) ? CUDA_SUCCESS : drv->cuPointerGetAttribute(data, attribute, ptr);
}

/* The size of each attribute's value, as cuPointerGetAttributes writes it. */
static size_t value_size(CUpointer_attribute a) {
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: return sizeof(CUcontext);
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: return sizeof(unsigned int);
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: return sizeof(CUdeviceptr);
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: return sizeof(void *);
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS: return sizeof(CUDA_POINTER_ATTRIBUTE_P2P_TOKENS);
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: return sizeof(unsigned long long);
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: return sizeof(int);
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: return sizeof(CUdeviceptr);
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: return sizeof(size_t);
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: return sizeof(void *);
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: return sizeof(CUmemoryPool);
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: return sizeof(unsigned int);
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE: return sizeof(bool);
    default: return 0;
    }
}

/* The driver checks the arguments and answers what is its to answer; then
 * ours go over its answers. An address we hold with no block there reads as
 * memory CUDA does not know: every value zero (MEMORY_TYPE 0). */
CA_EXPORT CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute *attributes, void **data,
                                          CUdeviceptr ptr) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuPointerGetAttributes) return no_driver();
    CUresult r = drv->cuPointerGetAttributes(count, attributes, data, ptr);
    if (r != CUDA_SUCCESS) return r;
    block b = lookup(ptr);
    for (unsigned i = 0; b.kind != NOT_OURS && i < count; i++) {
        if (b.kind == FREE) memset(data[i], 0, value_size(attributes[i]));
        else ours(&b, attributes[i], data[i]);
    }
    return r;
}

/* cudaMalloc memory has no VMM handle: libraries that find one take the
 * cuMem path (export the handle, or unmap and free the range themselves, as
 * some VMM allocators' frees do), which must never touch our segments. NCCL
 * and UCX then take their cudaMalloc path: legacy IPC, which ipc.c serves. */
CA_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuMemRetainAllocationHandle) return no_driver();
    if (lookup((CUdeviceptr)addr).kind != NOT_OURS)
        return CUDA_ERROR_INVALID_VALUE; /* what the driver answers for cudaMalloc memory, and memory opened by IPC */
    return drv->cuMemRetainAllocationHandle(handle, addr);
}

/* A dma-buf (RDMA registration) of a range in a block: the block's host
 * pages, as a cudaMalloc allocation's. A range that leaves them, or lies
 * where no block is, is refused as CUDA refuses a range past an allocation;
 * one that stays in them is the driver's to export (the block's granules are
 * mapped while it lives, so it is exported whole or not at all). */
CA_EXPORT CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
                                                 CUmemRangeHandleType handleType, unsigned long long flags) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuMemGetHandleForAddressRange) return no_driver();
    block b = lookup(dptr);
    if (b.kind != NOT_OURS) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        CUdeviceptr first = b.base & ~(CUdeviceptr)(page - 1);
        CUdeviceptr end = (b.base + b.size + page - 1) & ~(CUdeviceptr)(page - 1);
        if (b.kind == FREE || dptr < first || size > end - dptr) return CUDA_ERROR_INVALID_VALUE;
    }
    return drv->cuMemGetHandleForAddressRange(handle, dptr, size, handleType, flags);
}
