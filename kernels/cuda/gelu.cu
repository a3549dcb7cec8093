/* GELU, tanh approximation (CUDA twin of kernels/cpu/gelu.c). */
#include "kernels/cuda/common.cuh"

#define GELU_K 0.7978845608028654f  /* sqrt(2/pi) */

template <typename F>
__global__ void gelu_forward_kernel(F *out, const F *inp, size_t N) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x) {
        float x = ldf(inp[i]);
        float u = GELU_K * (x + 0.044715f * x * x * x);
        out[i] = stf<F>(0.5f * x * (1.0f + tanhf(u)));
    }
}

template <typename F>
static void gelu_fwd(kernels_ctx *ctx, void *out, const void *inp, size_t N) {
    if (N == 0)
        return;
    gelu_forward_kernel<F><<<grid_for(N, 256), 256, 0, stream_of(ctx)>>>((F *)out, (const F *)inp, N);
    cudaCheckLaunch();
}

void cuda_gelu_forward(kernels_ctx *ctx,
                       void *out,          // (N) [dt]
                       const void *inp,    // (N) [dt]
                       size_t N, kernels_dtype dt) {
    CUDA_DISPATCH(dt, gelu_fwd, ctx, out, inp, N);
}

/* d/dx 0.5 x (1 + tanh u) = 0.5 (1 + tanh u) + 0.5 x sech^2(u) du/dx,
 * du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2). */
template <typename F>
__global__ void gelu_backward_kernel(F *dinp, const F *inp, const F *dout, size_t N) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x) {
        float x = ldf(inp[i]);
        float u = GELU_K * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float g = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = stf<F>(ldf(dinp[i]) + g * ldf(dout[i]));
    }
}

template <typename F>
static void gelu_bwd(kernels_ctx *ctx, void *dinp, const void *inp, const void *dout, size_t N) {
    if (N == 0)
        return;
    gelu_backward_kernel<F><<<grid_for(N, 256), 256, 0, stream_of(ctx)>>>((F *)dinp, (const F *)inp, (const F *)dout, N);
    cudaCheckLaunch();
}

void cuda_gelu_backward(kernels_ctx *ctx,
                        void *dinp,         // (N) [dt] +=
                        const void *inp,    // (N) [dt]
                        const void *dout,   // (N) [dt]
                        size_t N, kernels_dtype dt) {
    CUDA_DISPATCH(dt, gelu_bwd, ctx, dinp, inp, dout, N);
}
