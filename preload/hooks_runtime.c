/* The runtime API, for programs linked with the shared libcudart: answered
 * here without entering cudart, after cudart's lazy initialization has made
 * its primary context current on the calling thread. What is not ours goes
 * to the real cudart. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "preload/preload.h"

static cudaError_t runtime_code(CUresult r) {
    /* capture errors, sticky device errors and a few others have the runtime's numbers */
    if ((r >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && r <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) ||
        (r >= CUDA_ERROR_ILLEGAL_ADDRESS && r <= CUDA_ERROR_TENSOR_MEMORY_LEAK) || r == CUDA_ERROR_CONTAINED ||
        r == CUDA_ERROR_EXTERNAL_DEVICE || r == CUDA_ERROR_DEINITIALIZED || r == CUDA_ERROR_ILLEGAL_STATE ||
        r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_HANDLE)
        return (cudaError_t)r;
    switch (r) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUDA_ERROR_NO_DEVICE: return cudaErrorNoDevice;
    case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
    default: return cudaErrorUnknown;
    }
}

/* What we answer ourselves is also the thread's last error (last_error.c).
 * Success first: it is nearly every call, and has nothing to record. */
static inline cudaError_t runtime_error(CUresult r) {
    return r == CUDA_SUCCESS ? cudaSuccess : ca_rt_answered(runtime_code(r));
}

/* cudart initializes lazily on the first runtime call of a thread, making its
 * primary context current; cudaFree(0) is its documented way to force that.
 * Only needed when the driver says no context is current. */
static bool needs_runtime_init(CUresult r) { return r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_NOT_INITIALIZED; }

static bool init_runtime(void) {
    CA_REAL(cudaFree);
    return real_cudaFree && real_cudaFree(NULL) == cudaSuccess;
}

/* A failed allocation: again once cudart made its context current, if that
 * was what was missing; else the runtime's error. */
__attribute__((noinline, cold)) static cudaError_t malloc_failed(void **devPtr, size_t size, cudaStream_t stream,
                                                                 bool async, CUresult r) {
    CUdeviceptr p;
    if (needs_runtime_init(r) && init_runtime()) r = ca_do_malloc(&p, size, (CUstream)stream, async);
    if (r == CUDA_SUCCESS) *devPtr = (void *)p;
    return runtime_error(r);
}

static cudaError_t do_malloc(void **devPtr, size_t size, cudaStream_t stream, bool async) {
    if (!devPtr) return ca_rt_answered(cudaErrorInvalidValue);
    if (!size) {
        *devPtr = NULL; /* as cudart answers a zero-byte request */
        return cudaSuccess;
    }
    CUdeviceptr p;
    CUresult r = ca_do_malloc(&p, size, (CUstream)stream, async);
    if (__builtin_expect(r != CUDA_SUCCESS, 0)) return malloc_failed(devPtr, size, stream, async, r);
    *devPtr = (void *)p;
    return cudaSuccess;
}

/* The driver not loaded yet (ours once it loads), or not there (cudart's). */
__attribute__((noinline, cold)) static cudaError_t malloc_without_driver(void **devPtr, size_t size,
                                                                         cudaStream_t stream, bool async) {
    if (ca_drv()) return do_malloc(devPtr, size, stream, async);
    if (async) {
        CA_REAL(cudaMallocAsync);
        return real_cudaMallocAsync ? real_cudaMallocAsync(devPtr, size, stream) : cudaErrorInitializationError;
    }
    CA_REAL(cudaMalloc);
    return real_cudaMalloc ? real_cudaMalloc(devPtr, size) : cudaErrorInitializationError;
}

CA_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size) {
    if (ca_drv_ready()) return do_malloc(devPtr, size, NULL, false);
    return malloc_without_driver(devPtr, size, NULL, false);
}

/* cudaMallocPitch and cudaMalloc3D: ours when there is something to
 * allocate; a NULL pointer or a zero size goes to cudart, whose answer is the
 * right one. */
static cudaError_t do_malloc_pitch(void **devPtr, size_t *pitch, size_t width, size_t height, size_t depth) {
    CUdeviceptr p;
    size_t pp = 0;
    CUresult r = ca_do_malloc_pitch(&p, &pp, width, height, depth);
    if (needs_runtime_init(r) && init_runtime()) r = ca_do_malloc_pitch(&p, &pp, width, height, depth);
    if (r == CUDA_SUCCESS) *devPtr = (void *)p, *pitch = pp;
    return runtime_error(r);
}

CA_EXPORT cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height) {
    if (!ca_drv() || !devPtr || !pitch || !width || !height) {
        CA_REAL(cudaMallocPitch);
        return real_cudaMallocPitch ? real_cudaMallocPitch(devPtr, pitch, width, height) : cudaErrorInitializationError;
    }
    return do_malloc_pitch(devPtr, pitch, width, height, 1);
}

CA_EXPORT cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent) {
    if (!ca_drv() || !pitchedDevPtr || !extent.width || !extent.height || !extent.depth) {
        CA_REAL(cudaMalloc3D);
        return real_cudaMalloc3D ? real_cudaMalloc3D(pitchedDevPtr, extent) : cudaErrorInitializationError;
    }
    void *p;
    size_t pitch;
    cudaError_t e = do_malloc_pitch(&p, &pitch, extent.width, extent.height, extent.depth);
    if (e == cudaSuccess)
        *pitchedDevPtr = (struct cudaPitchedPtr){.ptr = p, .pitch = pitch, .xsize = extent.width, .ysize = extent.height};
    return e;
}

/* A free that is not ours (or no driver): cudart's, and a capture hears of it. */
__attribute__((noinline)) static cudaError_t free_elsewhere(void *devPtr, cudaStream_t stream, bool async) {
    cudaError_t e;
    if (async) {
        CA_REAL(cudaFreeAsync);
        e = real_cudaFreeAsync ? real_cudaFreeAsync(devPtr, stream) : cudaErrorInitializationError;
    } else {
        CA_REAL(cudaFree);
        e = real_cudaFree ? real_cudaFree(devPtr) : cudaErrorInitializationError;
    }
    if (e == cudaSuccess && devPtr && ca_drv()) ca_capture_freed((CUdeviceptr)devPtr, (CUstream)stream);
    return e;
}

static inline __attribute__((always_inline)) cudaError_t do_free(void *devPtr, cudaStream_t stream, bool async) {
    if (devPtr && (ca_drv_ready() || ca_drv())) {
        CUresult r = ca_do_free((CUdeviceptr)devPtr, (CUstream)stream, !async);
        if (r != CUDA_ERROR_NOT_FOUND) return runtime_error(r);
    }
    return free_elsewhere(devPtr, stream, async);
}

CA_EXPORT cudaError_t cudaFree(void *devPtr) { return do_free(devPtr, NULL, false); }

CA_EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream) {
    if (ca_drv_ready()) return do_malloc(devPtr, size, stream, true);
    return malloc_without_driver(devPtr, size, stream, true);
}

CA_EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream) { return do_free(devPtr, stream, true); }

/* --default-stream per-thread: stream 0 means the calling thread's stream. */
static cudaStream_t per_thread(cudaStream_t s) { return s ? s : (cudaStream_t)CU_STREAM_PER_THREAD; }

CA_EXPORT cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t stream) {
    return cudaMallocAsync(devPtr, size, per_thread(stream));
}

CA_EXPORT cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t stream) {
    return cudaFreeAsync(devPtr, per_thread(stream));
}

CA_EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    if (!ca_drv()) {
        CA_REAL(cudaMemGetInfo);
        return real_cudaMemGetInfo ? real_cudaMemGetInfo(free_bytes, total_bytes) : cudaErrorInitializationError;
    }
    CUresult r = ca_do_mem_info(free_bytes, total_bytes);
    if (needs_runtime_init(r) && init_runtime()) r = ca_do_mem_info(free_bytes, total_bytes);
    return runtime_error(r);
}

/* Streams: the preload keeps the device's streams for plain frees
 * (streams.c). cudart may reach the driver hooks as well; being told twice
 * changes nothing. */
CA_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority) {
    CA_REAL(cudaStreamCreateWithPriority);
    if (!real_cudaStreamCreateWithPriority) return cudaErrorInitializationError;
    cudaError_t e = real_cudaStreamCreateWithPriority(pStream, flags, priority);
    if (e == cudaSuccess && ca_drv()) ca_stream_created((CUstream)*pStream, flags);
    return e;
}

CA_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
    CA_REAL(cudaStreamCreateWithFlags);
    if (!real_cudaStreamCreateWithFlags) return cudaErrorInitializationError;
    cudaError_t e = real_cudaStreamCreateWithFlags(pStream, flags);
    if (e == cudaSuccess && ca_drv()) ca_stream_created((CUstream)*pStream, flags);
    return e;
}

CA_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *pStream) {
    CA_REAL(cudaStreamCreate);
    if (!real_cudaStreamCreate) return cudaErrorInitializationError;
    cudaError_t e = real_cudaStreamCreate(pStream);
    if (e == cudaSuccess && ca_drv()) ca_stream_created((CUstream)*pStream, cudaStreamDefault);
    return e;
}

CA_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    CA_REAL(cudaStreamDestroy);
    if (ca_drv()) ca_stream_destroying((CUstream)stream);
    return real_cudaStreamDestroy ? real_cudaStreamDestroy(stream) : cudaErrorInitializationError;
}

/* The current device's context goes: plain frees waited for first, the
 * device held meanwhile (ca_device_reset_begin holds it again inside). */
CA_EXPORT cudaError_t cudaDeviceReset(void) {
    CA_REAL(cudaDeviceReset);
    const ca_driver *drv = ca_drv();
    CUcontext ctx = NULL;
    ca_device *d = drv && drv->cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx ? ca_device_by_ctx(ctx) : NULL;
    if (d) {
        ca_device_hold(d);
        ca_device_quiesce(d);
    }
    cudaError_t e = real_cudaDeviceReset ? real_cudaDeviceReset() : cudaErrorInitializationError;
    if (d) ca_device_unhold(d);
    return e;
}
