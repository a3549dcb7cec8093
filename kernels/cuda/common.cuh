/* Shared by the CUDA twin: error checks, typed loads and stores, the dtype dispatch,
 * warp reductions.
 *
 * Each op is a kernel templated on its storage type F (float or __nv_bfloat16) that
 * widens with ldf() and rounds with stf<F>(); a host launcher template queues it on
 * ctx->stream, and the public cuda_<op> picks the launcher with CUDA_DISPATCH: the
 * counterpart of the CPU twin's ld()/st() and CPU_DISPATCH. The cuda_<op> definitions
 * get C linkage from their declarations in kernels.h. */
#ifndef KERNELS_CUDA_COMMON_CUH
#define KERNELS_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>

#include "kernels/kernels.h"

typedef __nv_bfloat16 bf16;

/* Prints "kernels (cuda): file:line: what" and exits: a failed launch or a cuBLASLt
 * error leaves the stream in an unknown state, and the caller has no way to recover. */
[[noreturn]] void ca_kernels_cuda_fail(const char *what, const char *file, int line);

#define cudaCheck(call)                                                              \
    do {                                                                             \
        cudaError_t err_ = (call);                                                   \
        if (err_ != cudaSuccess)                                                     \
            ca_kernels_cuda_fail(cudaGetErrorString(err_), __FILE__, __LINE__);      \
    } while (0)

/* After a launch: catches bad configurations without waiting for the kernel. */
#define cudaCheckLaunch() cudaCheck(cudaGetLastError())

#define CUDA_REQUIRE(cond)                                                           \
    do {                                                                             \
        if (!(cond))                                                                 \
            ca_kernels_cuda_fail("requirement failed: " #cond, __FILE__, __LINE__);  \
    } while (0)

/* Call launcher<F>(args...) with F the storage type of dt. */
#define CUDA_DISPATCH(dt, launcher, ...)                                             \
    do {                                                                             \
        if ((dt) == KERNELS_BF16)                                                    \
            launcher<bf16>(__VA_ARGS__);                                             \
        else if ((dt) == KERNELS_F32)                                                \
            launcher<float>(__VA_ARGS__);                                            \
        else                                                                         \
            ca_kernels_cuda_fail("unknown kernels_dtype", __FILE__, __LINE__);       \
    } while (0)

static inline cudaStream_t stream_of(const kernels_ctx *ctx) { return (cudaStream_t)ctx->stream; }

/* Widen to float. */
__device__ __forceinline__ float ldf(float x) { return x; }
__device__ __forceinline__ float ldf(bf16 x) { return __bfloat162float(x); }

/* Round a float to the storage type (nearest even, as kernels_f32_to_bf16). */
template <typename F> __device__ __forceinline__ F stf(float x);
template <> __device__ __forceinline__ float stf<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 stf<bf16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Blocks for a grid-stride loop over n elements: enough to fill any GPU, capped so
 * huge n does not launch millions of blocks. */
static inline unsigned grid_for(size_t n, unsigned block) {
    size_t g = (n + block - 1) / block;
    return g > 8192 ? 8192u : (unsigned)g;
}

/* Opt in to more than 48 KiB of dynamic shared memory when a launch needs it. */
template <typename K> static inline void allow_smem(K kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

#endif /* KERNELS_CUDA_COMMON_CUH */
