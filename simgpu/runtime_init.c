/* How the runtime reaches the driver, and its lazy initialization.
 *
 * Once per process, as the real libcudart 13.0 does: dlopen("libcuda.so.1"),
 * dlsym "cuGetProcAddress_v2", ask it for "cuGetProcAddress" itself and fetch
 * every entry point through the answer, each by base name at the version of the
 * variant wanted (cudaTypedefs.h: PFN_cuMemAlloc_v3020 is "cuMemAlloc" at 3020),
 * with flags 0, and once more with the per-thread flag for the stream-taking
 * ones; then cuInit. Once per thread, on the first call that needs a device: if
 * the thread has no current context, retain the primary context of its device
 * (once per process) and make it current. A context the thread already has
 * (set through the driver API) is used as is. */
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
    int version;
    cuuint64_t flags;
    size_t offset;
};

#define W(field, name, version) {name, version, 0, offsetof(struct ca_rt_driver, field)}
#define S(field, name, version, pt_version)                                        \
    {name, version, 0, offsetof(struct ca_rt_driver, legacy.field)},                \
    {name, pt_version, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,               \
     offsetof(struct ca_rt_driver, ptsz.field)}

static const struct wanted wanted[] = {
    W(Init, "cuInit", 2000),
    W(DriverGetVersion, "cuDriverGetVersion", 2020),
    W(DeviceGetCount, "cuDeviceGetCount", 2000),
    W(DeviceGetName, "cuDeviceGetName", 2000),
    W(DeviceTotalMem, "cuDeviceTotalMem", 3020),
    W(DeviceGetAttribute, "cuDeviceGetAttribute", 2000),
    W(DeviceGetUuid, "cuDeviceGetUuid", 11040),
    W(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000),
    W(DevicePrimaryCtxReset, "cuDevicePrimaryCtxReset", 11000),
    W(DeviceCanAccessPeer, "cuDeviceCanAccessPeer", 4000),
    W(CtxEnablePeerAccess, "cuCtxEnablePeerAccess", 4000),
    W(CtxDisablePeerAccess, "cuCtxDisablePeerAccess", 4000),
    W(IpcGetMemHandle, "cuIpcGetMemHandle", 4010),
    W(IpcOpenMemHandle, "cuIpcOpenMemHandle", 11000),
    W(IpcCloseMemHandle, "cuIpcCloseMemHandle", 4010),
    W(CtxGetCurrent, "cuCtxGetCurrent", 4000),
    W(CtxSetCurrent, "cuCtxSetCurrent", 4000),
    W(CtxGetDevice, "cuCtxGetDevice", 13000),
    W(CtxSynchronize, "cuCtxSynchronize", 13000),
    W(MemAlloc, "cuMemAlloc", 3020),
    W(MemAllocPitch, "cuMemAllocPitch", 3020),
    W(MemFree, "cuMemFree", 3020),
    W(MemGetInfo, "cuMemGetInfo", 3020),
    W(MemHostAlloc, "cuMemHostAlloc", 2020),
    W(MemFreeHost, "cuMemFreeHost", 2000),
    W(PointerGetAttributes, "cuPointerGetAttributes", 7000),
    W(StreamCreateWithPriority, "cuStreamCreateWithPriority", 5050),
    W(StreamDestroy, "cuStreamDestroy", 4000),
    W(EventCreate, "cuEventCreate", 2000),
    W(EventQuery, "cuEventQuery", 2000),
    W(EventSynchronize, "cuEventSynchronize", 2000),
    W(EventDestroy, "cuEventDestroy", 4000),
    W(EventElapsedTime, "cuEventElapsedTime", 12080),
    W(ThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", 10010),
    W(GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 11040),
    W(GraphExecDestroy, "cuGraphExecDestroy", 10000),
    W(GraphDestroy, "cuGraphDestroy", 10000),
    W(GraphGetNodes, "cuGraphGetNodes", 10000),
    W(GraphNodeGetType, "cuGraphNodeGetType", 10000),
    S(Memcpy, "cuMemcpy", 4000, 7000),
    S(MemcpyAsync, "cuMemcpyAsync", 4000, 7000),
    S(MemcpyHtoD, "cuMemcpyHtoD", 3020, 7000),
    S(MemcpyDtoH, "cuMemcpyDtoH", 3020, 7000),
    S(MemcpyDtoD, "cuMemcpyDtoD", 3020, 7000),
    S(MemcpyHtoDAsync, "cuMemcpyHtoDAsync", 3020, 7000),
    S(MemcpyDtoHAsync, "cuMemcpyDtoHAsync", 3020, 7000),
    S(MemcpyDtoDAsync, "cuMemcpyDtoDAsync", 3020, 7000),
    S(MemsetD8, "cuMemsetD8", 3020, 7000),
    S(MemsetD8Async, "cuMemsetD8Async", 3020, 7000),
    S(MemAllocAsync, "cuMemAllocAsync", 11020, 11020),
    S(MemFreeAsync, "cuMemFreeAsync", 11020, 11020),
    S(StreamSynchronize, "cuStreamSynchronize", 2000, 7000),
    S(StreamQuery, "cuStreamQuery", 2000, 7000),
    S(StreamWaitEvent, "cuStreamWaitEvent", 3020, 7000),
    S(EventRecord, "cuEventRecord", 2000, 7000),
    S(EventRecordWithFlags, "cuEventRecordWithFlags", 11010, 11010),
    S(StreamBeginCapture, "cuStreamBeginCapture", 10010, 10010),
    S(StreamEndCapture, "cuStreamEndCapture", 10000, 10000),
    S(StreamIsCapturing, "cuStreamIsCapturing", 10000, 10000),
    S(StreamGetCaptureInfo, "cuStreamGetCaptureInfo", 12030, 12030),
    S(GraphLaunch, "cuGraphLaunch", 10000, 10000),
};

/* A symbol the driver does not give stays NULL: calls needing it answer
 * cudaErrorCallRequiresNewerDriver, the others still work. */
static void load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    PFN_cuGetProcAddress_v12000 first = h ? (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (!first) {
        load_error = cudaErrorInsufficientDriver;
        return;
    }
    CUdriverProcAddressQueryResult status;
    void *again = NULL;
    first("cuGetProcAddress", &again, 12000, 0, &status);
    ca_rt.GetProcAddress = again ? (PFN_cuGetProcAddress_v12000)again : first;
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        void **slot = (void **)((char *)&ca_rt + wanted[i].offset);
        if (ca_rt.GetProcAddress(wanted[i].name, slot, wanted[i].version, wanted[i].flags, &status) !=
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

cudaError_t ca_rt_primary(int device, CUcontext *ctx)
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
    *ctx = primary[device];
    pthread_mutex_unlock(&lock);
    return e;
}

/* Makes the primary context of `device` current on this thread. */
cudaError_t ca_rt_bind_device(int device)
{
    CUcontext ctx = NULL;
    cudaError_t e = ca_rt_primary(device, &ctx);
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
