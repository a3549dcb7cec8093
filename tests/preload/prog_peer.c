/* Two devices and peer access: once device 1 may reach device 0's memory
 * (cudaDeviceEnablePeerAccess, cuCtxEnablePeerAccess), its copies and kernels
 * reach every allocation of device 0, earlier and later ones, as they reach
 * cudaMalloc memory without the preload; when the access goes (disable,
 * reset) they no longer do. Run with CUDALLOC_SIM_DEVICES=2, under the preload
 * and on the simulated device alone: both must pass. With fewer than two
 * devices (a one-GPU machine) it says so and passes. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <string.h>

#include "tests/preload/check.h"

#define MIB ((size_t)1 << 20)

/* simgpu's stand-in for a kernel launch; on a real driver, absent. */
static int (*kernel_fn)(void *, size_t, int);

/* A kernel on the current device reading n bytes at p: 0, or the error. */
static int kernel_reads(void *p, size_t n) {
    return kernel_fn ? kernel_fn(p, n, 0) : 0;
}

static int two_devices(void) {
    void *drv = dlopen("libcuda.so.1", RTLD_NOW);
    kernel_fn = drv ? (int (*)(void *, size_t, int))dlsym(drv, "simgpu_kernel_access") : NULL;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
        printf("peer: %d device(s): nothing to check\n", n);
        return 0;
    }
    return 1;
}

/* Device 1 copies size bytes from src on device 0, then reads them back. */
static void copy_on_device1(void *src, size_t size, const char *what) {
    void *dst = NULL;
    char *host = malloc(size);
    CHECK(cudaSetDevice(1) == cudaSuccess, "%s: device 1", what);
    CHECK(cudaMalloc(&dst, size) == cudaSuccess, "%s: cudaMalloc on device 1", what);
    cudaError_t e = cudaMemcpy(dst, src, size, cudaMemcpyDeviceToDevice);
    CHECK(e == cudaSuccess, "%s: device 1 copies device 0's memory: %s", what, cudaGetErrorName(e));
    CHECK(cudaMemcpy(host, dst, size, cudaMemcpyDeviceToHost) == cudaSuccess && host[0] == 7 &&
              host[size - 1] == 7,
          "%s: the bytes arrived", what);
    CHECK(kernel_reads(src, size) == 0, "%s: a kernel on device 1 reads device 0's memory", what);
    cudaFree(dst);
    free(host);
}

static void *filled_on_device0(size_t size) {
    void *p = NULL;
    CHECK(cudaSetDevice(0) == cudaSuccess && cudaMalloc(&p, size) == cudaSuccess, "cudaMalloc on device 0");
    CHECK(cudaMemset(p, 7, size) == cudaSuccess, "cudaMemset on device 0");
    return p;
}

/* The runtime's route: memory from before and after the enable reachable;
 * after the disable, a kernel on device 1 faults on it again. */
static int runtime(void) {
    if (!two_devices()) CHECK_DONE("peer-runtime");
    void *before = filled_on_device0(8 * MIB);
    CHECK(cudaSetDevice(1) == cudaSuccess && cudaDeviceEnablePeerAccess(0, 0) == cudaSuccess, "enable 1 -> 0");
    copy_on_device1(before, 8 * MIB, "allocated before");
    void *after = filled_on_device0(64 * MIB); /* new granules, mapped after the enable */
    copy_on_device1(after, 64 * MIB, "allocated after");
    void *small = filled_on_device0(4096);
    copy_on_device1(small, 4096, "small");
    CHECK(cudaSetDevice(1) == cudaSuccess && cudaDeviceDisablePeerAccess(0) == cudaSuccess, "disable 1 -> 0");
    if (kernel_fn) {
        CHECK(kernel_reads(before, 4096) == CUDA_ERROR_ILLEGAL_ADDRESS, "no access once disabled");
        CHECK(cudaDeviceReset() == cudaSuccess, "reset device 1 (the fault is sticky)");
    }
    cudaSetDevice(0);
    cudaFree(before);
    cudaFree(after);
    cudaFree(small);
    CHECK_DONE("peer-runtime");
}

/* The driver's route: cuCtxEnablePeerAccess between primary contexts. */
static int driver(void) {
    if (!two_devices()) CHECK_DONE("peer-driver");
    CUcontext ctx[2];
    CUdeviceptr p;
    CHECK(cuInit(0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&ctx[0], 0) == CUDA_SUCCESS &&
              cuDevicePrimaryCtxRetain(&ctx[1], 1) == CUDA_SUCCESS,
          "primary contexts");
    CHECK(cuCtxSetCurrent(ctx[0]) == CUDA_SUCCESS && cuMemAlloc(&p, 8 * MIB) == CUDA_SUCCESS, "cuMemAlloc on 0");
    CHECK(cuMemsetD8(p, 7, 8 * MIB) == CUDA_SUCCESS, "cuMemsetD8");
    CHECK(cuCtxSetCurrent(ctx[1]) == CUDA_SUCCESS && cuCtxEnablePeerAccess(ctx[0], 0) == CUDA_SUCCESS,
          "cuCtxEnablePeerAccess 1 -> 0");
    CUdeviceptr q;
    CHECK(cuMemAlloc(&q, 8 * MIB) == CUDA_SUCCESS, "cuMemAlloc on 1");
    CUresult r = cuMemcpyDtoD(q, p, 8 * MIB);
    CHECK(r == CUDA_SUCCESS, "device 1 copies device 0's memory: %d", r);
    CHECK(kernel_reads((void *)p, 8 * MIB) == 0, "a kernel on device 1 reads it");
    CHECK(cuCtxDisablePeerAccess(ctx[0]) == CUDA_SUCCESS, "cuCtxDisablePeerAccess");
    if (kernel_fn) CHECK(kernel_reads((void *)p, 4096) == CUDA_ERROR_ILLEGAL_ADDRESS, "no access once disabled");
    CHECK_DONE("peer-driver");
}

/* A reset of device 1 takes its peer access with it. */
static int reset(void) {
    if (!two_devices()) CHECK_DONE("peer-reset");
    void *p = filled_on_device0(8 * MIB);
    CHECK(cudaSetDevice(1) == cudaSuccess && cudaDeviceEnablePeerAccess(0, 0) == cudaSuccess, "enable 1 -> 0");
    CHECK(kernel_reads(p, 8 * MIB) == 0, "reachable");
    CHECK(cudaDeviceReset() == cudaSuccess, "reset device 1");
    if (kernel_fn) CHECK(kernel_reads(p, 4096) == CUDA_ERROR_ILLEGAL_ADDRESS, "not after the reset");
    CHECK(cudaDeviceReset() == cudaSuccess && cudaDeviceEnablePeerAccess(0, 0) == cudaSuccess, "enable again");
    copy_on_device1(p, 8 * MIB, "enabled again");
    CHECK_DONE("peer-reset");
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "runtime")) return runtime();
    if (!strcmp(mode, "driver")) return driver();
    if (!strcmp(mode, "reset")) return reset();
    fprintf(stderr, "usage: prog_peer runtime|driver|reset\n");
    return 2;
}
