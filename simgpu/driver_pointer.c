/* cuPointerGetAttribute(s) for memory the driver knows. As with the real
 * driver, VMM mappings and pool (cuMemAllocAsync) memory belong to no context:
 * their CU_POINTER_ATTRIBUTE_CONTEXT is NULL, their device ordinal is real.
 * A VMM address answers for the VMM objects it is made of (cuda.h): its range
 * is the cuMemAddressReserve range, its mapping and buffer ID those of the
 * cuMemMap that holds it, its block ID the physical allocation's, its handle
 * types what cuMemCreate asked for; it is not legacy-IPC capable. */
#include <stdbool.h>
#include <string.h>

#include "simgpu/sim.h"

/* What one address resolves to. */
struct view {
    struct ca_sim_region *reg;  /* allocation or mapping, NULL if none */
    struct ca_sim_region *resv; /* cuMemAddressReserve range, NULL if none */
};

/* Booleans are written as one byte: right for bool, and for a zeroed int. */
static void put_bool(void *data, int v)
{
    *(bool *)data = v != 0;
}

/* The access the current context's device has (CU_POINTER_ATTRIBUTE_ACCESS_FLAGS):
 * a mapping's is what cuMemSetAccess gave that device; other memory is its
 * device's own, and reached from another device with peer access. */
static CUresult access_flags(const struct ca_sim_region *reg, unsigned int *out)
{
    struct CUctx_st *ctx = ca_sim_current_or_null();
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (reg->kind == CA_SIM_MAPPING) {
        unsigned char a = reg->access[ctx->device];
        *out = a == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
             : a == CU_MEM_ACCESS_FLAGS_PROT_READ      ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ
                                                       : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE;
        return CUDA_SUCCESS;
    }
    int reach = reg->kind == CA_SIM_HOST || reg->kind == CA_SIM_IMPORTED || reg->device == ctx->device;
    for (int i = 0; !reach && i < ctx->npeers; i++)
        reach = ctx->peers[i]->device == reg->device;
    *out = reach ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE;
    return CUDA_SUCCESS;
}

/* CUDA_ERROR_INVALID_VALUE where the attribute has no answer for this address,
 * CUDA_ERROR_NOT_SUPPORTED for attributes simgpu does not model. */
static CUresult answer(CUpointer_attribute a, const struct view *v, CUdeviceptr ptr, void *data)
{
    const struct ca_sim_region *reg = v->reg;
    const struct ca_sim_region *range = reg && reg->kind != CA_SIM_MAPPING ? reg : v->resv;
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        if (!reg)
            return CUDA_ERROR_INVALID_VALUE;
        *(CUcontext *)data = reg->kind == CA_SIM_LINEAR || reg->kind == CA_SIM_HOST || reg->kind == CA_SIM_IMPORTED
                                  ? reg->ctx
                                  : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        if (!reg)
            return CUDA_ERROR_INVALID_VALUE;
        *(unsigned int *)data = reg->kind == CA_SIM_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        if (!reg)
            return CUDA_ERROR_INVALID_VALUE;
        *(CUdeviceptr *)data = ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (!reg || reg->kind != CA_SIM_HOST)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        if (!reg)
            return CUDA_ERROR_INVALID_VALUE;
        *(unsigned long long *)data = reg->id;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        if (!reg)
            return CUDA_ERROR_INVALID_VALUE;
        *(unsigned long long *)data = reg->phys ? reg->phys->handle : reg->id;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        if (!reg)
            return CUDA_ERROR_INVALID_VALUE;
        put_bool(data, reg->managed);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        if (!reg)
            return CUDA_ERROR_INVALID_VALUE;
        put_bool(data, 0);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        if (!reg)
            return CUDA_ERROR_INVALID_VALUE;
        put_bool(data, reg->kind == CA_SIM_LINEAR);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        if (!reg)
            return CUDA_ERROR_INVALID_VALUE;
        *(int *)data = reg->device;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        if (!range)
            return CUDA_ERROR_INVALID_VALUE;
        if (a == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
            *(CUdeviceptr *)data = range->base;
        else
            *(size_t *)data = range->size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        if (!reg && !v->resv)
            return CUDA_ERROR_INVALID_VALUE;
        put_bool(data, reg != NULL);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        if (!reg)
            return CUDA_ERROR_INVALID_VALUE;
        if (a == CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR)
            *(void **)data = (void *)reg->base;
        else
            *(size_t *)data = reg->size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        if (!reg)
            return CUDA_ERROR_INVALID_VALUE;
        *(unsigned long long *)data = reg->phys ? reg->phys->prop.requestedHandleTypes : CU_MEM_HANDLE_TYPE_NONE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        if (!reg)
            return CUDA_ERROR_INVALID_VALUE;
        return access_flags(reg, data);
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        if (!reg)
            return CUDA_ERROR_INVALID_VALUE;
        *(CUmemoryPool *)data = reg->kind == CA_SIM_POOL ? ca_sim_mempool(reg->device) : NULL;
        return CUDA_SUCCESS;
    default:
        return a >= 1 && a <= CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE
                   ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
    }
}

static struct view lookup(CUdeviceptr ptr)
{
    struct view v = {
        .reg = ca_sim_regions_find(&ca_sim.mem, ptr),
        .resv = ca_sim_regions_find(&ca_sim.resv, ptr),
    };
    return v;
}

CA_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    ca_sim_lock();
    struct view v = lookup(ptr);
    r = answer(attribute, &v, ptr, data);
    ca_sim_unlock();
    return r;
}

/* The batch form answers every address: attributes that have no value for it
 * read as zero (MEMORY_TYPE 0 says "not CUDA memory"). */
CA_EXPORT CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute *attributes,
                                          void **data, CUdeviceptr ptr)
{
    static const size_t sizes[] = {
        [CU_POINTER_ATTRIBUTE_CONTEXT] = sizeof(CUcontext),
        [CU_POINTER_ATTRIBUTE_MEMORY_TYPE] = sizeof(unsigned int),
        [CU_POINTER_ATTRIBUTE_DEVICE_POINTER] = sizeof(CUdeviceptr),
        [CU_POINTER_ATTRIBUTE_HOST_POINTER] = sizeof(void *),
        [CU_POINTER_ATTRIBUTE_BUFFER_ID] = sizeof(unsigned long long),
        [CU_POINTER_ATTRIBUTE_IS_MANAGED] = sizeof(bool),
        [CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL] = sizeof(int),
        [CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE] = sizeof(bool),
        [CU_POINTER_ATTRIBUTE_RANGE_START_ADDR] = sizeof(CUdeviceptr),
        [CU_POINTER_ATTRIBUTE_RANGE_SIZE] = sizeof(size_t),
        [CU_POINTER_ATTRIBUTE_MAPPED] = sizeof(bool),
        [CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE] = sizeof(bool),
        [CU_POINTER_ATTRIBUTE_MAPPING_SIZE] = sizeof(size_t),
        [CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR] = sizeof(void *),
        [CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID] = sizeof(unsigned long long),
        [CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE] = sizeof(bool),
        [CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES] = sizeof(unsigned long long),
        [CU_POINTER_ATTRIBUTE_ACCESS_FLAGS] = sizeof(unsigned int),
        [CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE] = sizeof(CUmemoryPool),
    };
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (count == 0 || !attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    ca_sim_lock();
    struct view v = lookup(ptr);
    for (unsigned i = 0; i < count && r == CUDA_SUCCESS; i++) {
        CUpointer_attribute a = attributes[i];
        if (!data[i] || a < 1 || (size_t)a >= sizeof sizes / sizeof sizes[0] || !sizes[a]) {
            r = a >= 1 && a <= CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE && data[i]
                    ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
            break;
        }
        if (answer(a, &v, ptr, data[i]) != CUDA_SUCCESS)
            memset(data[i], 0, sizes[a]);
    }
    ca_sim_unlock();
    return r;
}
