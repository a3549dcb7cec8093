/* Device management in the runtime: counts, the thread's device, properties,
 * synchronize and reset, versions, driver entry points. */
#include <stddef.h>
#include <string.h>

#include "simgpu/rt.h"

CA_EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return ca_rt_ret(cudaErrorInvalidValue);
    *count = 0;
    cudaError_t e = ca_rt_init();
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.DeviceGetCount, count);
    return ca_rt_ret(e);
}

CA_EXPORT cudaError_t cudaSetDevice(int device)
{
    cudaError_t e = ca_rt_init();
    if (e == cudaSuccess)
        e = ca_rt_bind_device(device);
    return ca_rt_ret(e);
}

/* The device of the thread's current context if it has one. */
CA_EXPORT cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return ca_rt_ret(cudaErrorInvalidValue);
    cudaError_t e = ca_rt_init();
    CUcontext current = NULL;
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.CtxGetCurrent, &current);
    if (e == cudaSuccess && current) {
        CUdevice d;
        e = CA_RT_CALL(ca_rt.CtxGetDevice, &d, NULL);
        if (e == cudaSuccess)
            *device = d;
    } else if (e == cudaSuccess) {
        *device = ca_rt_thread_device();
    }
    return ca_rt_ret(e);
}

CA_EXPORT cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (!value)
        return ca_rt_ret(cudaErrorInvalidValue);
    cudaError_t e = ca_rt_init();
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.DeviceGetAttribute, value, (CUdevice_attribute)attr, device);
    return ca_rt_ret(e);
}

/* cudaDeviceProp fields filled from one driver attribute each. */
static const struct {
    size_t offset, size;
    CUdevice_attribute attr;
} props[] = {
#define P(field, attr) \
    {offsetof(struct cudaDeviceProp, field), sizeof(((struct cudaDeviceProp *)0)->field), attr}
    P(sharedMemPerBlock, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
    P(regsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK),
    P(warpSize, CU_DEVICE_ATTRIBUTE_WARP_SIZE),
    P(memPitch, CU_DEVICE_ATTRIBUTE_MAX_PITCH),
    P(maxThreadsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
    P(maxThreadsDim[0], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X),
    P(maxThreadsDim[1], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
    P(maxThreadsDim[2], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z),
    P(maxGridSize[0], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X),
    P(maxGridSize[1], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
    P(maxGridSize[2], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z),
    P(totalConstMem, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY),
    P(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
    P(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
    P(textureAlignment, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT),
    P(texturePitchAlignment, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT),
    P(multiProcessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
    P(integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED),
    P(canMapHostMemory, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY),
    P(surfaceAlignment, CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT),
    P(concurrentKernels, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS),
    P(ECCEnabled, CU_DEVICE_ATTRIBUTE_ECC_ENABLED),
    P(pciBusID, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
    P(pciDeviceID, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID),
    P(pciDomainID, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
    P(tccDriver, CU_DEVICE_ATTRIBUTE_TCC_DRIVER),
    P(asyncEngineCount, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT),
    P(unifiedAddressing, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING),
    P(memoryBusWidth, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
    P(l2CacheSize, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
    P(persistingL2CacheMaxSize, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE),
    P(maxThreadsPerMultiProcessor, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR),
    P(streamPrioritiesSupported, CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED),
    P(globalL1CacheSupported, CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED),
    P(localL1CacheSupported, CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED),
    P(sharedMemPerMultiprocessor, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
    P(regsPerMultiprocessor, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR),
    P(managedMemory, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY),
    P(isMultiGpuBoard, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD),
    P(multiGpuBoardGroupID, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID),
    P(hostNativeAtomicSupported, CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED),
    P(pageableMemoryAccess, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS),
    P(concurrentManagedAccess, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS),
    P(computePreemptionSupported, CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED),
    P(canUseHostPointerForRegisteredMem, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM),
    P(cooperativeLaunch, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH),
    P(sharedMemPerBlockOptin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
    P(pageableMemoryAccessUsesHostPageTables, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES),
    P(directManagedMemAccessFromHost, CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST),
    P(maxBlocksPerMultiProcessor, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR),
    P(accessPolicyMaxWindowSize, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE),
    P(reservedSharedMemPerBlock, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK),
    P(hostRegisterSupported, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED),
    P(memoryPoolsSupported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED),
    P(clusterLaunch, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH),
    P(unifiedFunctionPointers, CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS),
    P(deviceNumaConfig, CU_DEVICE_ATTRIBUTE_NUMA_CONFIG),
    P(deviceNumaId, CU_DEVICE_ATTRIBUTE_NUMA_ID),
    P(mpsEnabled, CU_DEVICE_ATTRIBUTE_MPS_ENABLED),
    P(hostNumaId, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID),
#undef P
};

/* Like cudart, from the driver's name, UUID, memory size and attributes. */
CA_EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (!prop)
        return ca_rt_ret(cudaErrorInvalidValue);
    cudaError_t e = ca_rt_init();
    memset(prop, 0, sizeof *prop);
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.DeviceGetName, prop->name, (int)sizeof prop->name, device);
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.DeviceGetUuid, &prop->uuid, device);
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.DeviceTotalMem, &prop->totalGlobalMem, device);
    for (size_t i = 0; e == cudaSuccess && i < sizeof props / sizeof props[0]; i++) {
        int v = 0;
        e = CA_RT_CALL(ca_rt.DeviceGetAttribute, &v, props[i].attr, device);
        char *field = (char *)prop + props[i].offset;
        if (props[i].size == sizeof(size_t))
            *(size_t *)field = (size_t)(unsigned)v;
        else
            *(int *)field = v;
    }
    return ca_rt_ret(e);
}

CA_EXPORT cudaError_t cudaDeviceSynchronize(void)
{
    cudaError_t e = ca_rt_enter();
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.CtxSynchronize, NULL);
    return ca_rt_ret(e);
}

/* Frees everything the current device's primary context holds; the context
 * stays retained and current, ready for the next call. */
CA_EXPORT cudaError_t cudaDeviceReset(void)
{
    CUdevice d;
    cudaError_t e = ca_rt_enter();
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.CtxGetDevice, &d, NULL);
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.DevicePrimaryCtxReset, d);
    return ca_rt_ret(e);
}

/* 0 when there is no driver, as documented. */
CA_EXPORT cudaError_t cudaDriverGetVersion(int *version)
{
    if (!version)
        return ca_rt_ret(cudaErrorInvalidValue);
    *version = 0;
    if (ca_rt_load() != cudaSuccess)
        return cudaSuccess;
    return ca_rt_ret(CA_RT_CALL(ca_rt.DriverGetVersion, version));
}

CA_EXPORT cudaError_t cudaRuntimeGetVersion(int *version)
{
    if (!version)
        return ca_rt_ret(cudaErrorInvalidValue);
    *version = CUDART_VERSION;
    return cudaSuccess;
}

/* Straight through to the driver's cuGetProcAddress_v2: flags and the status
 * enum have the driver's values. */
CA_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                                       unsigned int cudaVersion, unsigned long long flags,
                                                       enum cudaDriverEntryPointQueryResult *driverStatus)
{
    cudaError_t e = ca_rt_load();
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.GetProcAddress, symbol, funcPtr, (int)cudaVersion, flags,
                       (CUdriverProcAddressQueryResult *)driverStatus);
    return ca_rt_ret(e);
}

CA_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                                              enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return cudaGetDriverEntryPointByVersion(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}

/* Built with per-thread default streams, "default" means the per-thread variants. */
static unsigned long long per_thread(unsigned long long flags)
{
    return flags & (cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream)
               ? flags : flags | cudaEnablePerThreadDefaultStream;
}

CA_EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                                                   enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return cudaGetDriverEntryPoint(symbol, funcPtr, per_thread(flags), driverStatus);
}

CA_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr,
                                                            unsigned int cudaVersion, unsigned long long flags,
                                                            enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return cudaGetDriverEntryPointByVersion(symbol, funcPtr, cudaVersion, per_thread(flags), driverStatus);
}
