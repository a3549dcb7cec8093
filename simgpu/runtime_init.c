/* How the runtime reaches the driver, and its lazy initialization.
 *
 * Once per process: dlopen("libcuda.so.1"), dlsym "cuGetProcAddress_v2", fetch
 * every entry point through it, cuInit. Once per thread, on the first call that
 * needs a device: if the thread has no current context, retain the primary
 * context of its device (once per process) and make it current, as cudart does.
 * A context the thread already has (set through the driver API) is used as is. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "simgpu/rt.h"

#define MAX_DEVICES 64

struct ca_rt_driver ca_rt;

static pthread_once_t load_once = PTHREAD_ONCE_INIT, init_once = PTHREAD_ONCE_INIT;
static cudaError_t load_error, init_error;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary[MAX_DEVICES]; /* retained by the runtime, guarded by lock */
static __thread int thread_device;

struct wanted {
    const char *name;
    size_t offset;
    cuuint64_t flags;
};

#define W(field, name) {name, offsetof(struct ca_rt_driver, field), CU_GET_PROC_ADDRESS_DEFAULT}
#define S(field, name)                                                                            \
    {name, offsetof(struct ca_rt_driver, legacy.field), CU_GET_PROC_ADDRESS_LEGACY_STREAM},       \
    {name, offsetof(struct ca_rt_driver, ptsz.field), CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}

static const struct wanted wanted[] = {
    W(Init, "cuInit"),
    W(DriverGetVersion, "cuDriverGetVersion"),
    W(DeviceGetCount, "cuDeviceGetCount"),
    W(DeviceGetName, "cuDeviceGetName"),
    W(DeviceTotalMem, "cuDeviceTotalMem"),
    W(DeviceGetAttribute, "cuDeviceGetAttribute"),
    W(DeviceGetUuid, "cuDeviceGetUuid"),
    W(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    W(DevicePrimaryCtxReset, "cuDevicePrimaryCtxReset"),
    W(CtxGetCurrent, "cuCtxGetCurrent"),
    W(CtxSetCurrent, "cuCtxSetCurrent"),
    W(CtxGetDevice, "cuCtxGetDevice"),
    W(CtxSynchronize, "cuCtxSynchronize"),
    W(MemAlloc, "cuMemAlloc"),
    W(MemFree, "cuMemFree"),
    W(MemGetInfo, "cuMemGetInfo"),
    W(MemHostAlloc, "cuMemHostAlloc"),
    W(MemFreeHost, "cuMemFreeHost"),
    W(PointerGetAttributes, "cuPointerGetAttributes"),
    W(StreamCreateWithPriority, "cuStreamCreateWithPriority"),
    W(StreamDestroy, "cuStreamDestroy"),
    W(EventCreate, "cuEventCreate"),
    W(EventQuery, "cuEventQuery"),
    W(EventSynchronize, "cuEventSynchronize"),
    W(EventDestroy, "cuEventDestroy"),
    W(EventElapsedTime, "cuEventElapsedTime"),
    S(Memcpy, "cuMemcpy"),
    S(MemcpyAsync, "cuMemcpyAsync"),
    S(MemcpyHtoD, "cuMemcpyHtoD"),
    S(MemcpyDtoH, "cuMemcpyDtoH"),
    S(MemcpyDtoD, "cuMemcpyDtoD"),
    S(MemcpyHtoDAsync, "cuMemcpyHtoDAsync"),
    S(MemcpyDtoHAsync, "cuMemcpyDtoHAsync"),
    S(MemcpyDtoDAsync, "cuMemcpyDtoDAsync"),
    S(MemsetD8, "cuMemsetD8"),
    S(MemsetD8Async, "cuMemsetD8Async"),
    S(MemAllocAsync, "cuMemAllocAsync"),
    S(MemFreeAsync, "cuMemFreeAsync"),
    S(StreamSynchronize, "cuStreamSynchronize"),
    S(StreamQuery, "cuStreamQuery"),
    S(StreamWaitEvent, "cuStreamWaitEvent"),
    S(EventRecord, "cuEventRecord"),
};

/* A symbol the driver does not give stays NULL: calls needing it answer
 * cudaErrorCallRequiresNewerDriver, the others still work. */
static void load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (h)
        ca_rt.GetProcAddress = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
    if (!ca_rt.GetProcAddress) {
        load_error = cudaErrorInsufficientDriver;
        return;
    }
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        void **slot = (void **)((char *)&ca_rt + wanted[i].offset);
        CUdriverProcAddressQueryResult status;
        if (ca_rt.GetProcAddress(wanted[i].name, slot, CUDART_VERSION, wanted[i].flags, &status) !=
            CUDA_SUCCESS)
            *slot = NULL;
    }
}

static void init(void)
{
    pthread_once(&load_once, load);
    init_error = load_error ? load_error : CA_RT_CALL(ca_rt.Init, 0);
}

cudaError_t ca_rt_load(void)
{
    pthread_once(&load_once, load);
    return load_error;
}

cudaError_t ca_rt_init(void)
{
    pthread_once(&init_once, init);
    return init_error;
}

int ca_rt_thread_device(void)
{
    return thread_device;
}

/* Makes the primary context of `device` current on this thread. */
cudaError_t ca_rt_bind_device(int device)
{
    int count = 0;
    cudaError_t e = CA_RT_CALL(ca_rt.DeviceGetCount, &count);
    if (e != cudaSuccess)
        return e;
    if (device < 0 || device >= count || device >= MAX_DEVICES)
        return cudaErrorInvalidDevice;
    pthread_mutex_lock(&lock);
    if (!primary[device])
        e = CA_RT_CALL(ca_rt.DevicePrimaryCtxRetain, &primary[device], device);
    CUcontext ctx = primary[device];
    pthread_mutex_unlock(&lock);
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.CtxSetCurrent, ctx);
    if (e == cudaSuccess)
        thread_device = device;
    return e;
}

cudaError_t ca_rt_enter(void)
{
    cudaError_t e = ca_rt_init();
    if (e != cudaSuccess)
        return e;
    CUcontext current = NULL;
    e = CA_RT_CALL(ca_rt.CtxGetCurrent, &current);
    if (e != cudaSuccess || current)
        return e;
    return ca_rt_bind_device(thread_device);
}

/* Never hold the lock across fork. */
static void before_fork(void)
{
    pthread_mutex_lock(&lock);
}

static void after_fork(void)
{
    pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void register_fork_handlers(void)
{
    pthread_atfork(before_fork, after_fork, after_fork);
}
