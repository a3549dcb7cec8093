/* Linear allocations: cuMemAlloc, cuMemAllocPitch, the stream-ordered cuMemAllocAsync, pinned host
 * memory. Each is its own anonymous mapping, committed only when touched; its
 * address is an ordinary host address a CPU kernel may use directly. */
#include <sys/mman.h>
#include <unistd.h>

#include "simgpu/sim.h"
#include "util/checked.h"

static size_t page_round(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (n + page - 1) / page * page;
}

void ca_sim_linear_unmap(struct ca_sim_region *reg)
{
    munmap((void *)reg->base, page_round(reg->size));
    ca_sim_ipc_forget(reg);
    if (reg->charged)
        ca_sim_uncharge(reg->device, reg->charged);
}

static CUresult linear_alloc(enum ca_sim_kind kind, struct CUctx_st *ctx, size_t size,
                             uintptr_t *out)
{
    if (size > SIZE_MAX / 2) {
        ca_sim.n.out_of_memory++;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    size_t charged = kind == CA_SIM_HOST ? 0 : (size + CA_SIM_ROUND - 1) / CA_SIM_ROUND * CA_SIM_ROUND;
    if (charged && ca_sim_charge(ctx->device, charged) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = mmap(NULL, page_round(size), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    struct ca_sim_region reg = {
        .base = (uintptr_t)p, .size = size, .kind = kind, .device = ctx->device, .ctx = ctx,
        .id = ca_sim.next_id++, .charged = charged, .prot = PROT_READ | PROT_WRITE, .ipc_fd = -1,
    };
    if (p == MAP_FAILED || ca_sim_regions_insert(&ca_sim.mem, &reg) != 0) {
        if (p != MAP_FAILED)
            munmap(p, page_round(size));
        if (charged)
            ca_sim_uncharge(ctx->device, charged);
        ca_sim.n.out_of_memory++;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = reg.base;
    return CUDA_SUCCESS;
}

/* The allocation that starts at p and is of one of the two device kinds. */
static struct ca_sim_region *device_alloc_at(uintptr_t p)
{
    struct ca_sim_region *reg = ca_sim_regions_find(&ca_sim.mem, p);
    if (!reg || reg->base != p || (reg->kind != CA_SIM_LINEAR && reg->kind != CA_SIM_POOL))
        return NULL;
    return reg;
}

static void linear_free(struct ca_sim_region *reg)
{
    ca_sim_linear_unmap(reg);
    ca_sim_regions_remove(&ca_sim.mem, reg);
}

CA_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    CA_SIM_FAIL("cuMemAlloc");
    struct CUctx_st *ctx;
    uintptr_t p;
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_unsafe(); /* the example of cuThreadExchangeStreamCaptureMode */
    if (r == CUDA_SUCCESS && (!dptr || bytesize == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = linear_alloc(CA_SIM_LINEAR, ctx, bytesize, &p);
    if (r == CUDA_SUCCESS) {
        *dptr = p;
        ca_sim.n.mem_alloc++;
    }
    int dev = r == CUDA_SUCCESS ? ctx->device : -1;
    ca_sim_unlock();
    if (dev >= 0)
        ca_sim_activity(SIMGPU_ACT_ALLOC, dev, 0, p, bytesize);
    return r;
}

/* Pitched linear memory: Height rows of WidthInBytes rounded up to 512 bytes.
 * A pitch or a size past 2^64 - 1 is more than any device: out of memory, as
 * a size past the capacity is. */
CA_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                      unsigned int ElementSizeBytes)
{
    struct CUctx_st *ctx;
    uintptr_t p;
    size_t pitch = 0, bytes = 0;
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_unsafe();
    if (r == CUDA_SUCCESS && (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
                              (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && (!ca_size_round_up(WidthInBytes, CA_SIM_PITCH, &pitch) ||
                              !ca_size_mul(pitch, Height, &bytes))) {
        ca_sim.n.out_of_memory++;
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS)
        r = linear_alloc(CA_SIM_LINEAR, ctx, bytes, &p);
    if (r == CUDA_SUCCESS) {
        *dptr = p;
        *pPitch = pitch;
        ca_sim.n.mem_alloc++;
    }
    ca_sim_unlock();
    return r;
}

/* A release, for the CUPTI stand-in, once the lock is dropped. */
struct released {
    int device, pool;
    size_t size;
};

static struct released release_of(const struct ca_sim_region *reg)
{
    return (struct released){reg->device, reg->kind == CA_SIM_POOL, reg->size};
}

/* cuMemFree synchronizes: a potentially unsafe call during capture. A
 * graph allocation may be freed here too (graph_mem.c). */
CA_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    CA_SIM_FAIL("cuMemFree");
    struct CUctx_st *ctx;
    struct released rel = {-1, 0, 0};
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_unsafe();
    if (r == CUDA_SUCCESS && dptr && !ca_sim_gmem_free_at(dptr, &r)) {
        struct ca_sim_region *reg = device_alloc_at(dptr);
        if (reg) {
            rel = release_of(reg);
            linear_free(reg);
            ca_sim.n.mem_free++;
        } else {
            r = CUDA_ERROR_INVALID_VALUE;
        }
    }
    ca_sim_unlock();
    if (rel.device >= 0)
        ca_sim_activity(SIMGPU_ACT_RELEASE, rel.device, rel.pool, dptr, rel.size);
    return r;
}

/* Stream-ordered allocation: the work is already done, so it is immediate.
 * Pool memory belongs to no context (CU_POINTER_ATTRIBUTE_CONTEXT is NULL).
 * In a capture, an allocation node instead: an address fixed for the graph's
 * life, backed while a launch has it allocated (graph_mem.c). */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    struct ca_sim_stream_ref ref;
    struct ca_sim_cstate *cs = NULL;
    uintptr_t p;
    ca_sim_lock();
    CUresult r = ca_sim_stream_resolve(stream, &ref);
    if (r == CUDA_SUCCESS && (!dptr || bytesize == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_issue(&ref, &cs);
    if (r == CUDA_SUCCESS)
        r = cs ? ca_sim_gmem_reserve(cs, bytesize, &p) : linear_alloc(CA_SIM_POOL, ref.ctx, bytesize, &p);
    if (r == CUDA_SUCCESS) {
        *dptr = p;
        ca_sim.n.mem_alloc_async++;
    }
    int dev = r == CUDA_SUCCESS ? ref.ctx->device : -1;
    ca_sim_unlock();
    if (dev >= 0)
        ca_sim_activity(SIMGPU_ACT_ALLOC, dev, 1, p, bytesize);
    return r;
}

CA_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    CA_SIM_FAIL("cuMemAllocAsync");
    return alloc_async(dptr, bytesize, stream);
}

/* Pool allocations from the device's one pool (ca_sim_mempool), the pool of
 * the stream's device: cuMemAllocAsync's. Pools of other devices and pools
 * made with cuMemPoolCreate are not modelled (CUDA_ERROR_INVALID_VALUE). */
static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream)
{
    struct ca_sim_stream_ref ref;
    ca_sim_lock();
    CUresult r = ca_sim_stream_resolve(stream, &ref);
    int ours = r == CUDA_SUCCESS && pool == ca_sim_mempool(ref.ctx->device);
    ca_sim_unlock();
    if (r != CUDA_SUCCESS)
        return r;
    /* not through cuMemAllocAsync: a preload that stands in for it is not asked */
    return ours ? alloc_async(dptr, bytesize, stream) : CUDA_ERROR_INVALID_VALUE;
}

CA_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream)
{
    return alloc_from_pool(dptr, bytesize, pool, stream);
}

CA_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                CUstream stream)
{
    return alloc_from_pool(dptr, bytesize, pool, ca_sim_ptsz(stream));
}

/* Managed memory is linear memory of the current device, counted against it
 * like device memory (migration and oversubscription are not modelled), that
 * says so (CU_POINTER_ATTRIBUTE_IS_MANAGED); cuMemFree frees it. */
CA_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    CA_SIM_FAIL("cuMemAllocManaged");
    struct CUctx_st *ctx;
    uintptr_t p;
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    if (r == CUDA_SUCCESS &&
        (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_unsafe();
    if (r == CUDA_SUCCESS)
        r = linear_alloc(CA_SIM_LINEAR, ctx, bytesize, &p);
    if (r == CUDA_SUCCESS) {
        ca_sim_regions_find(&ca_sim.mem, p)->managed = 1;
        *dptr = p;
        ca_sim.n.mem_alloc++;
    }
    int dev = r == CUDA_SUCCESS ? ctx->device : -1;
    ca_sim_unlock();
    if (dev >= 0) /* cuMemFree tells its release */
        ca_sim_activity(SIMGPU_ACT_ALLOC, dev, 0, p, bytesize);
    return r;
}

/* In a capture, a free node, for a graph allocation only. */
CA_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
    CA_SIM_FAIL("cuMemFreeAsync");
    struct ca_sim_stream_ref ref;
    struct released rel = {-1, 0, 0};
    struct ca_sim_cstate *cs = NULL;
    ca_sim_lock();
    CUresult r = ca_sim_stream_resolve(stream, &ref);
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_issue(&ref, &cs);
    if (r == CUDA_SUCCESS && cs) {
        r = ca_sim_gmem_capture_free(cs, dptr);
    } else if (r == CUDA_SUCCESS && !ca_sim_gmem_free_at(dptr, &r)) {
        struct ca_sim_region *reg = device_alloc_at(dptr);
        if (reg) {
            rel = release_of(reg);
            linear_free(reg);
        } else {
            r = CUDA_ERROR_INVALID_VALUE;
        }
    }
    if (r == CUDA_SUCCESS)
        ca_sim.n.mem_free_async++;
    ca_sim_unlock();
    if (rel.device >= 0)
        ca_sim_activity(SIMGPU_ACT_RELEASE, rel.device, rel.pool, dptr, rel.size);
    return r;
}

CA_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    return cuMemAllocAsync(dptr, bytesize, ca_sim_ptsz(stream));
}

CA_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
    return cuMemFreeAsync(dptr, ca_sim_ptsz(stream));
}

CA_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    CA_SIM_FAIL("cuMemGetInfo");
    struct CUctx_st *ctx;
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    if (r == CUDA_SUCCESS && (!free || !total))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        *total = ca_sim.capacity;
        *free = ca_sim.capacity - ca_sim.dev[ctx->device].used;
    }
    ca_sim_unlock();
    return r;
}

/* Pinned host memory is host memory here too; it does not count against the
 * device's capacity. */
CA_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
    struct CUctx_st *ctx;
    uintptr_t p;
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_unsafe();
    if (r == CUDA_SUCCESS &&
        (!pp || bytesize == 0 ||
         (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                              CU_MEMHOSTALLOC_WRITECOMBINED))))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = linear_alloc(CA_SIM_HOST, ctx, bytesize, &p);
    if (r == CUDA_SUCCESS)
        *pp = (void *)p;
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    return cuMemHostAlloc(pp, bytesize, 0);
}

CA_EXPORT CUresult cuMemFreeHost(void *p)
{
    struct CUctx_st *ctx;
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_unsafe();
    if (r == CUDA_SUCCESS) {
        struct ca_sim_region *reg = ca_sim_regions_find(&ca_sim.mem, (uintptr_t)p);
        if (reg && reg->base == (uintptr_t)p && reg->kind == CA_SIM_HOST)
            linear_free(reg);
        else
            r = CUDA_ERROR_INVALID_VALUE;
    }
    ca_sim_unlock();
    return r;
}

/* A VMM address answers with the mapping that holds it (one cuMemMap), as
 * the driver documents under CU_POINTER_ATTRIBUTE_RANGE_SIZE ("to retrieve
 * the size of the mapped region, see cuMemGetAddressRange"); reserved space
 * with nothing mapped is no allocation. */
CA_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    struct CUctx_st *ctx;
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    struct ca_sim_region *reg = ca_sim_regions_find(&ca_sim.mem, dptr);
    if (r == CUDA_SUCCESS && (!reg || reg->kind == CA_SIM_HOST))
        r = CUDA_ERROR_NOT_FOUND;
    if (r == CUDA_SUCCESS) {
        if (pbase)
            *pbase = reg->base;
        if (psize)
            *psize = reg->size;
    }
    ca_sim_unlock();
    return r;
}

CUresult ca_sim_check_range(uintptr_t p, size_t n, int host_ok, int prot)
{
    if (n == 0)
        return CUDA_SUCCESS;
    if (p + n < p)
        return CUDA_ERROR_INVALID_VALUE;
    struct ca_sim_region *cur = ca_sim_regions_find(&ca_sim.mem, p);
    if (!cur)
        return host_ok && !ca_sim_regions_find(&ca_sim.resv, p) ? CUDA_SUCCESS
                                                                 : CUDA_ERROR_INVALID_VALUE;
    struct ca_sim_region *last = ca_sim.mem.v + ca_sim.mem.n;
    for (;;) {
        if ((cur->prot & prot) != prot)
            return CUDA_ERROR_INVALID_VALUE;
        if (p + n <= cur->base + cur->size)
            return CUDA_SUCCESS;
        /* Only VMM mappings may continue into the next range. */
        struct ca_sim_region *next = cur + 1;
        if (cur->kind != CA_SIM_MAPPING || next == last || next->kind != CA_SIM_MAPPING ||
            next->base != cur->base + cur->size)
            return CUDA_ERROR_INVALID_VALUE;
        cur = next;
    }
}
