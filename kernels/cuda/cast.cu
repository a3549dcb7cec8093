/* fp32 <-> bf16 casts (CUDA twin of kernels/cpu/cast.c). */
#include "kernels/cuda/common.cuh"

__global__ void cast_f32_to_bf16_kernel(bf16 *out, const float *inp, size_t N) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(inp[i]);
}

__global__ void cast_bf16_to_f32_kernel(float *out, const bf16 *inp, size_t N) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __bfloat162float(inp[i]);
}

void cuda_cast_f32_to_bf16(kernels_ctx *ctx,
                           kernels_bf16 *out,      // (N)
                           const float *inp,       // (N)
                           size_t N) {
    if (N == 0)
        return;
    cast_f32_to_bf16_kernel<<<grid_for(N, 256), 256, 0, stream_of(ctx)>>>((bf16 *)out, inp, N);
    cudaCheckLaunch();
}

void cuda_cast_bf16_to_f32(kernels_ctx *ctx,
                           float *out,             // (N)
                           const kernels_bf16 *inp,// (N)
                           size_t N) {
    if (N == 0)
        return;
    cast_bf16_to_f32_kernel<<<grid_for(N, 256), 256, 0, stream_of(ctx)>>>(out, (const bf16 *)inp, N);
    cudaCheckLaunch();
}
