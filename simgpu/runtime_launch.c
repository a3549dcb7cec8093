/* What nvcc-generated host code calls when built with -cudart shared: fat
 * binary and kernel registration (which succeed, so such programs start) and
 * kernel launches, which fail: there is no GPU to run device code on. A launch
 * answers cudaErrorNoKernelImageForDevice, the error a GPU without a matching
 * kernel image gives, and says once on stderr why. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "simgpu/rt.h"

/* Prototypes of crt/host_runtime.h, which is C++ only. */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaUnregisterFatBinary(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize);
void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress, const char *deviceName,
                       int ext, size_t size, int constant, int global);
void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant, int global);
char __cudaInitModule(void **fatCubinHandle);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                               size_t sharedMem, cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                    size_t sharedMem, cudaStream_t stream);

/* A registered kernel; its address is the cudaKernel_t handed out. */
struct kernel {
    const void *host_fun;
    void **module;
    struct kernel *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct kernel *kernels;

/* Launch configurations pushed by <<<...>>> and popped by the kernel stub. */
struct config {
    dim3 grid, block;
    size_t shared;
    cudaStream_t stream;
};
#define CONFIG_DEPTH 16
static __thread struct config configs[CONFIG_DEPTH];
static __thread int nconfigs;

static struct kernel *find_kernel(const void *host_fun)
{
    pthread_mutex_lock(&lock);
    struct kernel *k = kernels;
    while (k && k->host_fun != host_fun)
        k = k->next;
    pthread_mutex_unlock(&lock);
    return k;
}

CA_EXPORT void **__cudaRegisterFatBinary(void *fatCubin)
{
    void **handle = malloc(sizeof *handle);
    if (handle)
        *handle = fatCubin;
    return handle;
}

CA_EXPORT void __cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
}

CA_EXPORT void __cudaUnregisterFatBinary(void **fatCubinHandle)
{
    pthread_mutex_lock(&lock);
    for (struct kernel **k = &kernels; *k;) {
        if ((*k)->module == fatCubinHandle) {
            struct kernel *dead = *k;
            *k = dead->next;
            free(dead);
        } else {
            k = &(*k)->next;
        }
    }
    pthread_mutex_unlock(&lock);
    free(fatCubinHandle);
}

CA_EXPORT void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                      const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                                      dim3 *bDim, dim3 *gDim, int *wSize)
{
    struct kernel *k = malloc(sizeof *k);
    if (!k)
        return;
    k->host_fun = hostFun;
    k->module = fatCubinHandle;
    pthread_mutex_lock(&lock);
    k->next = kernels;
    kernels = k;
    pthread_mutex_unlock(&lock);
}

/* __device__ variables live in device code, which never runs here. */
CA_EXPORT void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                                 const char *deviceName, int ext, size_t size, int constant, int global)
{
}

/* Managed variables are reached from the host through a pointer the runtime
 * sets: give them zeroed host memory, which is what managed memory is here. */
CA_EXPORT void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
                                        const char *deviceName, int ext, size_t size, int constant,
                                        int global)
{
    *hostVarPtrAddress = calloc(1, size ? size : 1);
}

CA_EXPORT char __cudaInitModule(void **fatCubinHandle)
{
    return 1;
}

CA_EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                               struct CUstream_st *stream)
{
    if (nconfigs == CONFIG_DEPTH)
        return 1; /* nonzero: the generated code skips the launch */
    configs[nconfigs++] = (struct config){gridDim, blockDim, sharedMem, stream};
    return 0;
}

CA_EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream)
{
    if (nconfigs == 0)
        return ca_rt_ret(cudaErrorMissingConfiguration);
    struct config *c = &configs[--nconfigs];
    *gridDim = c->grid;
    *blockDim = c->block;
    *sharedMem = c->shared;
    *(cudaStream_t *)stream = c->stream;
    return cudaSuccess;
}

CA_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun)
{
    struct kernel *k = find_kernel(hostFun);
    if (!k)
        return ca_rt_ret(cudaErrorInvalidDeviceFunction);
    *kernel = (cudaKernel_t)k;
    return cudaSuccess;
}

static cudaError_t no_gpu(void)
{
    static int told;
    cudaError_t e = ca_rt_enter();
    if (e != cudaSuccess)
        return ca_rt_ret(e);
    if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
        fputs("simgpu: kernel launch needs a GPU; this is the simulated device\n", stderr);
    return ca_rt_ret(cudaErrorNoKernelImageForDevice);
}

CA_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                         size_t sharedMem, cudaStream_t stream)
{
    return kernel ? no_gpu() : ca_rt_ret(cudaErrorInvalidDeviceFunction);
}

CA_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                              size_t sharedMem, cudaStream_t stream)
{
    return __cudaLaunchKernel(kernel, gridDim, blockDim, args, sharedMem, stream);
}

CA_EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                       size_t sharedMem, cudaStream_t stream)
{
    return find_kernel(func) ? no_gpu() : ca_rt_ret(cudaErrorInvalidDeviceFunction);
}

CA_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                            size_t sharedMem, cudaStream_t stream)
{
    return cudaLaunchKernel(func, gridDim, blockDim, args, sharedMem, stream);
}
