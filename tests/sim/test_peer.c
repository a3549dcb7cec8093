/* simgpu with two devices: peer access and its errors, per-device access on
 * VMM mappings, faults (sticky) when a device touches memory it may not,
 * contexts of their own (cuCtxCreate, cuCtxDestroy). */
#include <pthread.h>

#include <cuda_runtime_api.h>

#include "tests/sim/sim_test.h"

#define G (2 * MiB)
#define RW CU_MEM_ACCESS_FLAGS_PROT_READWRITE

/* cuInit with two devices, their primary contexts retained; device 0's current. */
static void two_devices(CUcontext ctx[2])
{
    setenv("CUDALLOC_SIM_DEVICES", "2", 1);
    CK(cuInit(0));
    CK(cuDevicePrimaryCtxRetain(&ctx[0], 0));
    CK(cuDevicePrimaryCtxRetain(&ctx[1], 1));
    CK(cuCtxSetCurrent(ctx[0]));
}

/* A 2 MiB mapping of device 0's memory, read-write for device 0 only. */
static CUdeviceptr mapping_of_device0(void)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUdeviceptr p;
    CUmemGenericAllocationHandle h;
    CK(cuMemAddressReserve(&p, G, 0, 0, 0));
    CK(cuMemCreate(&h, G, &prop, 0));
    CK(cuMemMap(p, G, 0, h, 0));
    CK(cuMemRelease(h));
    CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}, .flags = RW};
    CK(cuMemSetAccess(p, G, &d, 1));
    return p;
}

static unsigned long long access_of(CUdeviceptr p, int dev)
{
    unsigned long long f = 99;
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
    CK(cuMemGetAccess(&f, &loc, p));
    return f;
}

START_TEST(peer_access_errors)
{
    CUcontext ctx[2], other;
    int can = -1;
    two_devices(ctx);
    CK(cuDeviceCanAccessPeer(&can, 0, 1));
    ck_assert_int_eq(can, 1);
    CK(cuDeviceCanAccessPeer(&can, 1, 1));
    ck_assert_int_eq(can, 0);
    ck_assert_int_eq(cuDeviceCanAccessPeer(&can, 0, 2), CUDA_ERROR_INVALID_DEVICE);
    ck_assert_int_eq(cuCtxEnablePeerAccess(ctx[0], 0), CUDA_ERROR_INVALID_CONTEXT); /* itself */
    ck_assert_int_eq(cuCtxEnablePeerAccess(ctx[1], 1), CUDA_ERROR_INVALID_VALUE);   /* flags */
    ck_assert_int_eq(cuCtxDisablePeerAccess(ctx[1]), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    CK(cuCtxEnablePeerAccess(ctx[1], 0));
    ck_assert_int_eq(cuCtxEnablePeerAccess(ctx[1], 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    CK(cuCtxDisablePeerAccess(ctx[1]));
    ck_assert_int_eq(cuCtxDisablePeerAccess(ctx[1]), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    /* another context on the same device is no peer */
    CK(cuCtxCreate_v4(&other, NULL, 0, 0));
    ck_assert_int_eq(cuCtxEnablePeerAccess(ctx[0], 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    CK(cuCtxDestroy_v2(other));
    ck_assert_int_eq(cuCtxEnablePeerAccess(other, 0), CUDA_ERROR_INVALID_CONTEXT);
}
END_TEST

/* The runtime's codes: itself or a device it cannot reach is
 * cudaErrorInvalidDevice; twice is cudaErrorPeerAccessAlreadyEnabled. */
START_TEST(runtime_peer_access)
{
    setenv("CUDALLOC_SIM_DEVICES", "2", 1);
    int can = -1;
    ck_assert_int_eq(cudaDeviceCanAccessPeer(&can, 1, 0), cudaSuccess);
    ck_assert_int_eq(can, 1);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    ck_assert_int_eq(cudaDeviceEnablePeerAccess(0, 0), cudaErrorInvalidDevice);
    ck_assert_int_eq(cudaDeviceEnablePeerAccess(1, 1), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
    ck_assert_int_eq(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
    ck_assert_int_eq(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorPeerAccessAlreadyEnabled);
    ck_assert_int_eq(cudaDeviceDisablePeerAccess(1), cudaSuccess);
}
END_TEST

/* cuMemSetAccess sets the devices it names and leaves the others;
 * cuMemGetAccess answers per device; PROT_NONE takes access away. */
START_TEST(access_per_device)
{
    CUcontext ctx[2];
    two_devices(ctx);
    CUdeviceptr p = mapping_of_device0();
    ck_assert_uint_eq(access_of(p, 0), RW);
    ck_assert_uint_eq(access_of(p, 1), CU_MEM_ACCESS_FLAGS_PROT_NONE);
    CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1},
                         .flags = CU_MEM_ACCESS_FLAGS_PROT_READ};
    CK(cuMemSetAccess(p, G, &d, 1));
    ck_assert_uint_eq(access_of(p, 0), RW);
    ck_assert_uint_eq(access_of(p, 1), CU_MEM_ACCESS_FLAGS_PROT_READ);
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CK(cuMemSetAccess(p, G, &d, 1));
    ck_assert_uint_eq(access_of(p, 1), CU_MEM_ACCESS_FLAGS_PROT_NONE);
    ((char *)p)[0] = 1; /* the host still reaches it through device 0's access */
}
END_TEST

/* Device 1, with peer access to device 0, copies from device 0's mapping
 * directly: without access to the mapping it faults, and the fault sticks to
 * its context until it is reset. */
START_TEST(copy_by_device_without_access_faults)
{
    CUcontext ctx[2];
    two_devices(ctx);
    CUdeviceptr p = mapping_of_device0(), q;
    CK(cuCtxSetCurrent(ctx[1]));
    CK(cuMemAlloc_v2(&q, 4096));
    CK(cuMemcpyDtoD_v2(q, p, 4096)); /* no peer access: staged, device 0 reads its own memory */
    CK(cuCtxEnablePeerAccess(ctx[0], 0));
    ck_assert_int_eq(cuMemcpyDtoD_v2(q, p, 4096), CUDA_ERROR_ILLEGAL_ADDRESS);
    ck_assert_int_eq(cuMemAlloc_v2(&q, 4096), CUDA_ERROR_ILLEGAL_ADDRESS); /* sticky */
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    CK(cuCtxSetCurrent(ctx[0]));
    CK(cuMemsetD8_v2(p, 1, 4096)); /* device 0 is not poisoned */
    CK(cuDevicePrimaryCtxReset_v2(1));
    CK(cuCtxSetCurrent(ctx[1]));
    CK(cuMemAlloc_v2(&q, 4096)); /* the reset cleared it, and the peer access */
    CK(cuCtxEnablePeerAccess(ctx[0], 0));
    CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1}, .flags = RW};
    CK(cuMemSetAccess(p, G, &d, 1));
    CK(cuMemcpyDtoD_v2(q, p, 4096));  /* granted: fine */
    CK(cuMemsetD32_v2(p, 7, 1024));
}
END_TEST

/* A kernel (simgpu_kernel_access) needs peer access for another device's
 * linear memory and access for a mapping, whatever the peer access. */
START_TEST(kernel_access)
{
    CUcontext ctx[2];
    CUdeviceptr lin;
    two_devices(ctx);
    CK(cuMemAlloc_v2(&lin, 4096));
    CUdeviceptr map = mapping_of_device0();
    CK(simgpu_kernel_access((void *)lin, 4096, 1));
    CK(cuCtxSetCurrent(ctx[1]));
    CK(cuCtxEnablePeerAccess(ctx[0], 0));
    CK(simgpu_kernel_access((void *)lin, 4096, 1));
    ck_assert_int_eq(simgpu_kernel_access((void *)map, 16, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
    CK(cuDevicePrimaryCtxReset_v2(1));
    ck_assert_int_eq(simgpu_kernel_access((void *)lin, 16, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
    CK(cuDevicePrimaryCtxReset_v2(1));
    CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1},
                         .flags = CU_MEM_ACCESS_FLAGS_PROT_READ};
    CK(cuMemSetAccess(map, G, &d, 1));
    CK(simgpu_kernel_access((void *)map, 16, 0));
    ck_assert_int_eq(simgpu_kernel_access((void *)map, 16, 1), CUDA_ERROR_ILLEGAL_ADDRESS); /* read only */
}
END_TEST

static pthread_barrier_t current_here, destroyed;

/* Makes ctx current here, then uses it once the main thread destroyed it. */
static void *use_destroyed(void *arg)
{
    CUdeviceptr p;
    CUresult set = cuCtxSetCurrent(arg);
    pthread_barrier_wait(&current_here);
    pthread_barrier_wait(&destroyed);
    return (void *)(intptr_t)(set == CUDA_SUCCESS ? cuMemAlloc_v2(&p, 4096) : set);
}

/* A context of its own: current once made, its linear memory and streams go
 * with it, VMM memory stays; a destroyed handle is invalid. */
START_TEST(created_contexts)
{
    CUcontext ctx[2], mine, cur;
    CUdeviceptr p;
    CUstream s;
    two_devices(ctx);
    CK(cuCtxCreate_v4(&mine, NULL, 0, 1));
    CK(cuCtxGetCurrent(&cur));
    ck_assert_ptr_eq(cur, mine);
    CUdevice dev;
    CK(cuCtxGetDevice(&dev));
    ck_assert_int_eq(dev, 1);
    CK(cuMemAlloc_v2(&p, 4096));
    CK(cuStreamCreate(&s, 0));
    ck_assert_uint_eq(sim_counters().device_bytes_in_use[1], 4096);
    CUdeviceptr map = mapping_of_device0();
    CK(cuCtxDestroy_v2(mine));
    ck_assert_uint_eq(sim_counters().device_bytes_in_use[1], 0);
    ck_assert_uint_eq(sim_counters().device_bytes_in_use[0], G); /* VMM memory stays */
    CK(cuCtxGetCurrent(&cur));
    ck_assert_ptr_eq(cur, ctx[0]); /* popped */
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuCtxDestroy_v2(mine), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuCtxDestroy_v2(ctx[0]), CUDA_ERROR_INVALID_CONTEXT); /* primary: released, not destroyed */
    ck_assert_int_eq(cuCtxPushCurrent_v2(mine), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuMemsetD8_v2(map, 0, G));
    /* destroyed while current on another thread: that thread is told so */
    CUcontext again;
    pthread_t t;
    void *rc;
    CK(cuCtxCreate_v4(&again, NULL, 0, 0));
    pthread_barrier_init(&current_here, NULL, 2);
    pthread_barrier_init(&destroyed, NULL, 2);
    pthread_create(&t, NULL, use_destroyed, again);
    pthread_barrier_wait(&current_here);
    CK(cuCtxDestroy_v2(again));
    pthread_barrier_wait(&destroyed);
    pthread_join(t, &rc);
    ck_assert_int_eq((int)(intptr_t)rc, CUDA_ERROR_CONTEXT_IS_DESTROYED);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("simgpu peers");
    TCase *tc = tcase_create("peers");
    tcase_add_test(tc, peer_access_errors);
    tcase_add_test(tc, runtime_peer_access);
    tcase_add_test(tc, access_per_device);
    tcase_add_test(tc, copy_by_device_without_access_faults);
    tcase_add_test(tc, kernel_access);
    tcase_add_test(tc, created_contexts);
    suite_add_tcase(s, tc);
    return sim_run(s);
}
