/* cuMemGetHandleForAddressRange: a dma-buf file descriptor for device memory
 * (RDMA registration: ibv_reg_dmabuf_mr). The rules are cuda.h's: the range
 * is host-page aligned; it lies in one cuMemAlloc allocation, or in a
 * cuMemAddressReserve range fully mapped by physical allocations of one
 * device with identical properties. No NIC is simulated: the descriptor is a
 * memfd of its own, a token that tells a test an export happened. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "simgpu/sim.h"

static int same_kind(const struct ca_sim_phys *a, const struct ca_sim_phys *b)
{
    return a->prop.type == b->prop.type && a->prop.location.type == b->prop.location.type &&
           a->prop.location.id == b->prop.location.id &&
           a->prop.requestedHandleTypes == b->prop.requestedHandleTypes;
}

/* Is [p, p+n) exportable as one dma-buf? */
static CUresult exportable(uintptr_t p, size_t n)
{
    struct ca_sim_region *reg = ca_sim_regions_find(&ca_sim.mem, p);
    if (!reg)
        return CUDA_ERROR_INVALID_VALUE;
    if (reg->kind == CA_SIM_LINEAR) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t span = (reg->size + page - 1) / page * page; /* its pages, as mapped */
        return n <= span - (p - reg->base) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    if (reg->kind != CA_SIM_MAPPING)
        return CUDA_ERROR_INVALID_VALUE;
    const struct ca_sim_phys *first = reg->phys;
    struct ca_sim_region *end = ca_sim.mem.v + ca_sim.mem.n;
    for (uintptr_t at = reg->base;; reg++) {
        if (reg == end || reg->kind != CA_SIM_MAPPING || reg->base != at || !same_kind(reg->phys, first))
            return CUDA_ERROR_INVALID_VALUE; /* a hole, or memory of another kind */
        at += reg->size;
        if (at >= p + n)
            return CUDA_SUCCESS;
    }
}

CA_EXPORT CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
                                                 CUmemRangeHandleType handleType, unsigned long long flags)
{
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (!handle || handleType != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || !size || dptr % page || size % page ||
        dptr + size < dptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags == CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE)
        return CUDA_ERROR_NOT_SUPPORTED; /* no BAR1 mapping on a simulated device */
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    ca_sim_lock();
    r = exportable(dptr, size);
    ca_sim_unlock();
    if (r != CUDA_SUCCESS)
        return r;
    int fd = memfd_create("simgpu-dmabuf", MFD_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *(int *)handle = fd;
    return CUDA_SUCCESS;
}
