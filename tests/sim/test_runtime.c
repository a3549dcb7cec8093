/* simgpu runtime: lazy per-thread initialization, memory, errors and the last
 * error, properties, devices, events, registration and kernel launches. */
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "tests/sim/sim_test.h"

#define RT(call) ck_assert_int_eq((int)(call), cudaSuccess)

void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
void __cudaUnregisterFatBinary(void **handle);
/* What the headers declare for programs built with --default-stream per-thread. */
cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t stream);
cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream);
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t stream);

START_TEST(versions)
{
    int v = 0;
    RT(cudaRuntimeGetVersion(&v));
    ck_assert_int_eq(v, 13000);
    RT(cudaDriverGetVersion(&v));
    ck_assert_int_eq(v, 13000);
}
END_TEST

static void *current_context(void *out)
{
    cuCtxGetCurrent((CUcontext *)out);
    return NULL;
}

static void *malloc_then_context(void *out)
{
    void *p;
    if (cudaMalloc(&p, 100) == cudaSuccess)
        cuCtxGetCurrent((CUcontext *)out);
    return NULL;
}

/* The first runtime call on a thread makes the primary context current there. */
START_TEST(lazy_init_per_thread)
{
    CUcontext before = (CUcontext)1, after = NULL, primary, mine;
    RT(cudaFree(NULL));
    CK(cuCtxGetCurrent(&mine));
    ck_assert_ptr_nonnull(mine);
    CK(cuDevicePrimaryCtxRetain(&primary, 0));
    ck_assert_ptr_eq(mine, primary);
    pthread_t t;
    pthread_create(&t, NULL, current_context, &before);
    pthread_join(t, NULL);
    ck_assert_ptr_null(before);
    pthread_create(&t, NULL, malloc_then_context, &after);
    pthread_join(t, NULL);
    ck_assert_ptr_eq(after, primary);
    /* Retained once per process, not once per thread. */
    unsigned flags;
    int active;
    CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    ck_assert_int_eq(active, 1);
    CK(cuDevicePrimaryCtxRelease(0));
    CK(cuDevicePrimaryCtxRelease(0));
    ck_assert_int_eq(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
}
END_TEST

START_TEST(memory_goes_through_the_driver)
{
    char *d, *h;
    char msg[] = "hello, device";
    char back[sizeof msg];
    RT(cudaMalloc((void **)&d, sizeof msg));
    RT(cudaMemcpy(d, msg, sizeof msg, cudaMemcpyHostToDevice));
    RT(cudaMemcpy(back, d, sizeof msg, cudaMemcpyDeviceToHost));
    ck_assert_str_eq(back, msg);
    RT(cudaMemset(d, 'x', 5));
    RT(cudaMemcpyAsync(back, d, sizeof msg, cudaMemcpyDefault, NULL));
    ck_assert_str_eq(back, "xxxxx, device");
    RT(cudaMemsetAsync(d, 0, sizeof msg, NULL));
    ck_assert_int_eq(d[3], 0);
    RT(cudaMallocHost((void **)&h, 64));
    RT(cudaFreeHost(h));
    void *a;
    RT(cudaMallocAsync(&a, 1000, NULL));
    RT(cudaFreeAsync(a, NULL));
    RT(cudaFree(d));
    simgpu_counters_t c = sim_counters();
    ck_assert_uint_eq(c.mem_alloc, 1);
    ck_assert_uint_eq(c.mem_free, 1);
    ck_assert_uint_eq(c.mem_alloc_async, 1);
    ck_assert_uint_eq(c.mem_free_async, 1);
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_int_eq(cudaMemcpy(back, d, 1, (enum cudaMemcpyKind)9), cudaErrorInvalidMemcpyDirection);
}
END_TEST

START_TEST(zero_and_null)
{
    void *p = (void *)1;
    RT(cudaMalloc(&p, 0));
    ck_assert_ptr_null(p);
    RT(cudaFree(NULL));
    ck_assert_int_eq(cudaMalloc(NULL, 10), cudaErrorInvalidValue);
    ck_assert_uint_eq(sim_counters().mem_alloc, 0);
}
END_TEST

START_TEST(last_error)
{
    int local;
    RT(cudaGetLastError());
    ck_assert_int_eq(cudaFree(&local), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaPeekAtLastError(), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaPeekAtLastError(), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidValue);
    RT(cudaGetLastError());
}
END_TEST

START_TEST(out_of_memory)
{
    void *p, *q;
    size_t free, total;
    setenv("CUDALLOC_SIM_MEMORY", "3MiB", 1);
    RT(cudaMemGetInfo(&free, &total));
    ck_assert_uint_eq(total, 3 * MiB);
    ck_assert_uint_eq(free, 3 * MiB);
    RT(cudaMalloc(&p, 2 * MiB));
    RT(cudaMemGetInfo(&free, &total));
    ck_assert_uint_eq(free, MiB);
    cudaError_t e = cudaMalloc(&q, 2 * MiB);
    ck_assert_int_eq(e, cudaErrorMemoryAllocation);
    ck_assert_str_eq(cudaGetErrorName(e), "cudaErrorMemoryAllocation");
    ck_assert_str_eq(cudaGetErrorString(e), "out of memory");
    ck_assert_int_eq(cudaMallocAsync(&q, 2 * MiB, NULL), cudaErrorMemoryAllocation);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorMemoryAllocation);
}
END_TEST

static struct cudaExtent extent3(size_t w, size_t h, size_t d) { return (struct cudaExtent){w, h, d}; }

/* cudaMallocPitch and cudaMalloc3D: rows of 512 bytes; whatever does not
 * fit the device, or 2^64 - 1, is cudaErrorMemoryAllocation. */
START_TEST(pitched_memory)
{
    setenv("CUDALLOC_SIM_MEMORY", "64MiB", 1);
    void *p = (void *)1;
    size_t pitch = 1;
    RT(cudaMallocPitch(&p, &pitch, 100, 3));
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(pitch, 512);
    RT(cudaMemset((char *)p + 2 * 512 + 99, 7, 1));
    RT(cudaFree(p));
    struct cudaPitchedPtr pp;
    RT(cudaMalloc3D(&pp, extent3(600, 3, 2)));
    ck_assert_uint_eq(pp.pitch, 1024);
    ck_assert_uint_eq(pp.xsize, 600);
    ck_assert_uint_eq(pp.ysize, 3);
    RT(cudaMemset((char *)pp.ptr + 5 * 1024 + 599, 7, 1));
    RT(cudaFree(pp.ptr));
    RT(cudaMallocPitch(&p, &pitch, 64 * MiB, 1));
    RT(cudaFree(p));
    RT(cudaMallocPitch(&p, &pitch, 0, 5)); /* nothing to allocate */
    ck_assert_ptr_null(p);
    ck_assert_uint_eq(pitch, 0);
    ck_assert_int_eq(cudaMallocPitch(NULL, &pitch, 1, 1), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaMallocPitch(&p, NULL, 1, 1), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaMalloc3D(NULL, extent3(1, 1, 1)), cudaErrorInvalidValue);
    const size_t past[] = {64 * MiB + 1, (size_t)1 << 63, SIZE_MAX - 1000, SIZE_MAX - 511, SIZE_MAX};
    for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) {
        ck_assert_int_eq(cudaMalloc(&p, past[i]), cudaErrorMemoryAllocation);
        ck_assert_int_eq(cudaMallocAsync(&p, past[i], NULL), cudaErrorMemoryAllocation);
        ck_assert_int_eq(cudaMallocPitch(&p, &pitch, past[i], 1), cudaErrorMemoryAllocation);
        ck_assert_int_eq(cudaMallocPitch(&p, &pitch, 1, past[i]), cudaErrorMemoryAllocation);
        ck_assert_int_eq(cudaMalloc3D(&pp, extent3(past[i], 1, 1)), cudaErrorMemoryAllocation);
        ck_assert_int_eq(cudaMalloc3D(&pp, extent3(1, 1, past[i])), cudaErrorMemoryAllocation);
    }
    ck_assert_int_eq(cudaMalloc3D(&pp, extent3(1, SIZE_MAX / 2, 3)), cudaErrorMemoryAllocation);
    ck_assert_int_eq(cudaMallocPitch(&p, &pitch, 4096, SIZE_MAX / 1024), cudaErrorMemoryAllocation);
    ck_assert_uint_eq(sim_counters().bytes_in_use, 0);
}
END_TEST

START_TEST(error_strings)
{
    ck_assert_str_eq(cudaGetErrorString(cudaSuccess), "no error");
    ck_assert_str_eq(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue");
    ck_assert_str_eq(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
    ck_assert_str_eq(cudaGetErrorString(cudaErrorNotReady), "device not ready");
    ck_assert_str_eq(cudaGetErrorString(cudaErrorInvalidDevice), "invalid device ordinal");
    ck_assert_str_eq(cudaGetErrorName(cudaErrorNoKernelImageForDevice), "cudaErrorNoKernelImageForDevice");
    ck_assert_str_eq(cudaGetErrorString(cudaErrorNoKernelImageForDevice),
                     "no kernel image is available for execution on the device");
    ck_assert_str_eq(cudaGetErrorString(cudaErrorInsufficientDriver),
                     "CUDA driver version is insufficient for CUDA runtime version");
    ck_assert_str_eq(cudaGetErrorString((cudaError_t)12345), "unrecognized error code");
    ck_assert_str_eq(cudaGetErrorName((cudaError_t)12345), "unrecognized error code");
}
END_TEST

START_TEST(properties)
{
    struct cudaDeviceProp prop;
    int n = 0, v = 0;
    setenv("CUDALLOC_SIM_MEMORY", "8GiB", 1);
    RT(cudaGetDeviceCount(&n));
    ck_assert_int_eq(n, 1);
    RT(cudaGetDeviceProperties(&prop, 0));
    ck_assert_str_eq(prop.name, "simgpu (simulated CUDA device)");
    ck_assert_int_eq(prop.major, 9);
    ck_assert_int_eq(prop.minor, 0);
    ck_assert_int_eq(prop.multiProcessorCount, 132);
    ck_assert_int_eq(prop.warpSize, 32);
    ck_assert_int_eq(prop.maxThreadsPerBlock, 1024);
    ck_assert_int_eq(prop.maxGridSize[1], 65535);
    ck_assert_uint_eq(prop.totalGlobalMem, (size_t)8 << 30);
    ck_assert_uint_eq(prop.sharedMemPerBlock, 48 << 10);
    ck_assert_int_eq(prop.unifiedAddressing, 1);
    ck_assert_int_eq(memcmp(prop.uuid.bytes, "simgpu", 6), 0);
    RT(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0));
    ck_assert_int_eq(v, 9);
    ck_assert_int_eq(cudaGetDeviceProperties(&prop, 1), cudaErrorInvalidDevice);
}
END_TEST

START_TEST(set_device)
{
    int d = -1;
    void *p;
    struct cudaPointerAttributes attr;
    setenv("CUDALLOC_SIM_DEVICES", "2", 1);
    RT(cudaGetDevice(&d));
    ck_assert_int_eq(d, 0);
    ck_assert_int_eq(cudaSetDevice(2), cudaErrorInvalidDevice);
    RT(cudaSetDevice(1));
    RT(cudaGetDevice(&d));
    ck_assert_int_eq(d, 1);
    RT(cudaMalloc(&p, 4096));
    RT(cudaPointerGetAttributes(&attr, p));
    ck_assert_int_eq(attr.type, cudaMemoryTypeDevice);
    ck_assert_int_eq(attr.device, 1);
    ck_assert_ptr_eq(attr.devicePointer, p);
    ck_assert_ptr_null(attr.hostPointer);
    ck_assert_uint_eq(sim_counters().device_bytes_in_use[1], 4096);
    int local;
    RT(cudaPointerGetAttributes(&attr, &local));
    ck_assert_int_eq(attr.type, cudaMemoryTypeUnregistered);
    ck_assert_int_eq(attr.device, -2);
    ck_assert_ptr_eq(attr.hostPointer, &local);
}
END_TEST

START_TEST(events_and_late_mode)
{
    cudaStream_t s;
    cudaEvent_t a, b;
    float ms;
    setenv("CUDALLOC_SIM_LATE_EVENTS", "3", 1);
    RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    RT(cudaEventCreate(&a));
    RT(cudaEventCreateWithFlags(&b, cudaEventDisableTiming));
    RT(cudaEventRecord(a, s));
    RT(cudaEventRecord(b, NULL));
    ck_assert_int_eq(cudaEventQuery(a), cudaErrorNotReady);
    ck_assert_int_eq(cudaStreamQuery(s), cudaErrorNotReady);
    RT(cudaGetLastError()); /* not ready is an answer, not an error */
    RT(cudaStreamWaitEvent(NULL, a, 0));
    void *last;
    ck_assert_int_eq(simgpu_stream_last_wait(NULL, &last), 0);
    ck_assert_ptr_eq(last, a);
    RT(cudaDeviceSynchronize());
    RT(cudaEventQuery(a));
    RT(cudaEventQuery(b));
    RT(cudaEventElapsedTime(&ms, a, a));
    ck_assert_int_eq(cudaEventElapsedTime(&ms, a, b), cudaErrorInvalidResourceHandle);
    RT(cudaEventRecord(a, s));
    RT(cudaStreamSynchronize(s));
    RT(cudaEventQuery(a));
    RT(cudaEventDestroy(a));
    RT(cudaEventDestroy(b));
    RT(cudaStreamDestroy(s));
    ck_assert_int_eq(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
    simgpu_counters_t c = sim_counters();
    ck_assert_uint_eq(c.ctx_syncs, 1);
    ck_assert_uint_eq(c.stream_syncs, 1);
    ck_assert_uint_eq(c.stream_waits, 1);
}
END_TEST

START_TEST(per_thread_entry_points)
{
    cudaEvent_t e, legacy;
    setenv("CUDALLOC_SIM_LATE_EVENTS", "5", 1);
    RT(cudaEventCreate(&e));
    RT(cudaEventCreate(&legacy));
    RT(cudaEventRecord_ptsz(e, NULL));
    RT(cudaEventRecord(legacy, NULL));
    RT(cudaStreamSynchronize_ptsz(NULL));
    RT(cudaEventQuery(e));
    ck_assert_int_eq(cudaEventQuery(legacy), cudaErrorNotReady);
    void *p;
    RT(cudaMallocAsync_ptsz(&p, 64, NULL));
    RT(cudaMemsetAsync_ptsz(p, 1, 64, NULL));
    RT(cudaFreeAsync_ptsz(p, NULL));
}
END_TEST

START_TEST(device_reset)
{
    void *p;
    size_t free, total;
    RT(cudaMalloc(&p, MiB));
    RT(cudaDeviceReset());
    RT(cudaMemGetInfo(&free, &total));
    ck_assert_uint_eq(free, total);
    ck_assert_int_eq(cudaFree(p), cudaErrorInvalidValue);
    RT(cudaMalloc(&p, MiB));
}
END_TEST

static void count_into(void *result)
{
    int n = 7;
    *(cudaError_t *)result = cudaGetDeviceCount(&n);
    if (n != 0)
        *(cudaError_t *)result = cudaErrorUnknown;
}

START_TEST(malformed_env)
{
    cudaError_t e = cudaSuccess;
    void *p;
    setenv("CUDALLOC_SIM_MEMORY", "lots", 1);
    const char *err = sim_stderr_of(count_into, &e);
    ck_assert_int_eq(e, cudaErrorInvalidValue);
    ck_assert_ptr_nonnull(strstr(err, "CUDALLOC_SIM_MEMORY='lots'"));
    ck_assert_int_eq(cudaMalloc(&p, 10), cudaErrorInvalidValue);
}
END_TEST

static const char fake_kernel = 0; /* a host stub's address stands for the kernel */

static void launch_twice(void *result)
{
    dim3 grid = {1, 1, 1}, block = {32, 1, 1};
    cudaError_t *e = result;
    e[0] = cudaLaunchKernel(&fake_kernel, grid, block, NULL, 0, NULL);
    e[1] = cudaLaunchKernel(&fake_kernel, grid, block, NULL, 0, NULL);
}

START_TEST(registration_then_launch_fails)
{
    static char fatbin[16];
    dim3 grid = {1, 1, 1}, block = {32, 1, 1};
    ck_assert_int_eq(cudaLaunchKernel(&fake_kernel, grid, block, NULL, 0, NULL),
                     cudaErrorInvalidDeviceFunction);
    void **h = __cudaRegisterFatBinary(fatbin);
    ck_assert_ptr_nonnull(h);
    __cudaRegisterFunction(h, &fake_kernel, "k", "k", -1, NULL, NULL, NULL, NULL, NULL);
    __cudaRegisterFatBinaryEnd(h);
    cudaError_t e[2];
    const char *err = sim_stderr_of(launch_twice, e);
    ck_assert_int_eq(e[0], cudaErrorNoKernelImageForDevice);
    ck_assert_int_eq(e[1], cudaErrorNoKernelImageForDevice);
    ck_assert_str_eq(err, "simgpu: kernel launch needs a GPU; this is the simulated device\n");
    ck_assert_int_eq(cudaGetLastError(), cudaErrorNoKernelImageForDevice);
    __cudaUnregisterFatBinary(h);
    ck_assert_int_eq(cudaLaunchKernel(&fake_kernel, grid, block, NULL, 0, NULL),
                     cudaErrorInvalidDeviceFunction);
}
END_TEST

START_TEST(driver_entry_point)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    RT(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, cudaEnableDefault, &st));
    ck_assert_int_eq(st, cudaDriverEntryPointSuccess);
    ck_assert_ptr_eq(simgpu_proc_target(fn), (void *)cuMemAlloc_v2); /* a thunk to it */
    ck_assert_int_eq(cudaGetDriverEntryPointByVersion("cuNope", &fn, 12000, cudaEnableDefault, &st),
                     cudaErrorSymbolNotFound);
    ck_assert_int_eq(st, cudaDriverEntryPointSymbolNotFound);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("simgpu runtime");
    TCase *tc = tcase_create("runtime");
    tcase_add_test(tc, versions);
    tcase_add_test(tc, lazy_init_per_thread);
    tcase_add_test(tc, memory_goes_through_the_driver);
    tcase_add_test(tc, zero_and_null);
    tcase_add_test(tc, last_error);
    tcase_add_test(tc, out_of_memory);
    tcase_add_test(tc, pitched_memory);
    tcase_add_test(tc, error_strings);
    tcase_add_test(tc, properties);
    tcase_add_test(tc, set_device);
    tcase_add_test(tc, events_and_late_mode);
    tcase_add_test(tc, per_thread_entry_points);
    tcase_add_test(tc, device_reset);
    tcase_add_test(tc, malformed_env);
    tcase_add_test(tc, registration_then_launch_fails);
    tcase_add_test(tc, driver_entry_point);
    suite_add_tcase(s, tc);
    return sim_run(s);
}
