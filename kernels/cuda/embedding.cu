/* Token + position embedding (CUDA twin of kernels/cpu/embedding.c). */
#include "kernels/cuda/common.cuh"

template <typename F>
__global__ void embedding_forward_kernel(F *out, const int *inp, const float *wte, const float *wpe,
                                         int BT, int T, int C) {
    size_t n = (size_t)BT * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / C;
        int c = (int)(i % C), t = (int)(bt % T);
        out[i] = stf<F>(wte[(size_t)inp[bt] * C + c] + wpe[(size_t)t * C + c]);
    }
}

template <typename F>
static void embedding_fwd(kernels_ctx *ctx, void *out, const int *inp, const float *wte, const float *wpe,
                          int B, int T, int C) {
    size_t n = (size_t)B * T * C;
    if (n == 0)
        return;
    embedding_forward_kernel<F><<<grid_for(n, 256), 256, 0, stream_of(ctx)>>>((F *)out, inp, wte, wpe, B * T, T, C);
    cudaCheckLaunch();
}

void cuda_embedding_forward(kernels_ctx *ctx,
                            void *out,          // (B,T,C) [dt]
                            const int *inp,     // (B,T)
                            const float *wte,   // (V,C)
                            const float *wpe,   // (maxT,C)
                            int B, int T, int C, kernels_dtype dt) {
    CUDA_DISPATCH(dt, embedding_fwd, ctx, out, inp, wte, wpe, B, T, C);
}

/* Rows with the same token add into the same dwte row: atomics. */
template <typename F>
__global__ void embedding_backward_wte_kernel(float *dwte, const F *dout, const int *inp, int BT, int C) {
    size_t n = (size_t)BT * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / C;
        int c = (int)(i % C);
        atomicAdd(&dwte[(size_t)inp[bt] * C + c], ldf(dout[i]));
    }
}

/* Position t gets one sum over the batch: one thread per (t,c), no atomics. */
template <typename F>
__global__ void embedding_backward_wpe_kernel(float *dwpe, const F *dout, int B, int T, int C) {
    size_t n = (size_t)T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int b = 0; b < B; b++)
            s += ldf(dout[(size_t)b * n + i]);
        dwpe[i] += s;
    }
}

template <typename F>
static void embedding_bwd(kernels_ctx *ctx, float *dwte, float *dwpe, const void *dout, const int *inp,
                          int B, int T, int C) {
    size_t n = (size_t)B * T * C;
    if (n == 0)
        return;
    embedding_backward_wte_kernel<F><<<grid_for(n, 256), 256, 0, stream_of(ctx)>>>(dwte, (const F *)dout, inp, B * T, C);
    cudaCheckLaunch();
    embedding_backward_wpe_kernel<F><<<grid_for((size_t)T * C, 256), 256, 0, stream_of(ctx)>>>(dwpe, (const F *)dout, B, T, C);
    cudaCheckLaunch();
}

void cuda_embedding_backward(kernels_ctx *ctx,
                             float *dwte,        // (V,C) +=
                             float *dwpe,        // (maxT,C) +=
                             const void *dout,   // (B,T,C) [dt]
                             const int *inp,     // (B,T)
                             int B, int T, int C, kernels_dtype dt) {
    CUDA_DISPATCH(dt, embedding_bwd, ctx, dwte, dwpe, dout, inp, B, T, C);
}
