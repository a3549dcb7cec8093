/* Residual add (CUDA twin of kernels/cpu/residual.c). */
#include "kernels/cuda/common.cuh"

template <typename F>
__global__ void residual_forward_kernel(F *out, const F *inp1, const F *inp2, size_t N) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x)
        out[i] = stf<F>(ldf(inp1[i]) + ldf(inp2[i]));
}

template <typename F>
static void residual_fwd(kernels_ctx *ctx, void *out, const void *inp1, const void *inp2, size_t N) {
    if (N == 0)
        return;
    residual_forward_kernel<F><<<grid_for(N, 256), 256, 0, stream_of(ctx)>>>((F *)out, (const F *)inp1, (const F *)inp2, N);
    cudaCheckLaunch();
}

void cuda_residual_forward(kernels_ctx *ctx,
                           void *out,          // (N) [dt]
                           const void *inp1,   // (N) [dt]
                           const void *inp2,   // (N) [dt]
                           size_t N, kernels_dtype dt) {
    CUDA_DISPATCH(dt, residual_fwd, ctx, out, inp1, inp2, N);
}

template <typename F>
__global__ void residual_backward_kernel(F *dinp1, F *dinp2, const F *dout, size_t N) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x) {
        float d = ldf(dout[i]);
        dinp1[i] = stf<F>(ldf(dinp1[i]) + d);
        dinp2[i] = stf<F>(ldf(dinp2[i]) + d);
    }
}

template <typename F>
static void residual_bwd(kernels_ctx *ctx, void *dinp1, void *dinp2, const void *dout, size_t N) {
    if (N == 0)
        return;
    residual_backward_kernel<F><<<grid_for(N, 256), 256, 0, stream_of(ctx)>>>((F *)dinp1, (F *)dinp2, (const F *)dout, N);
    cudaCheckLaunch();
}

void cuda_residual_backward(kernels_ctx *ctx,
                            void *dinp1,        // (N) [dt] +=
                            void *dinp2,        // (N) [dt] +=
                            const void *dout,   // (N) [dt]
                            size_t N, kernels_dtype dt) {
    CUDA_DISPATCH(dt, residual_bwd, ctx, dinp1, dinp2, dout, N);
}
