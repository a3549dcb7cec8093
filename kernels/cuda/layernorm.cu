/* LayerNorm over the last dimension (CUDA twin of kernels/cpu/layernorm.c).
 * One warp per row; the row's sums are warp reductions. */
#include "kernels/cuda/common.cuh"

#define LN_EPS 1e-5f
#define LN_WARPS 8

template <typename F>
__global__ void layernorm_forward_kernel(F *out, float *mean, float *rstd, const F *inp, const float *weight,
                                         const float *bias, int BT, int C) {
    int lane = threadIdx.x % 32;
    int r = blockIdx.x * LN_WARPS + threadIdx.x / 32;
    if (r >= BT)
        return;
    const F *x = inp + (size_t)r * C;
    /* Two passes (mean, then variance about it): no cancellation. */
    float m = 0.0f;
    for (int c = lane; c < C; c += 32)
        m += ldf(x[c]);
    m = warp_sum(m) / C;
    float var = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = ldf(x[c]) - m;
        var += d * d;
    }
    var = warp_sum(var) / C;
    float s = 1.0f / sqrtf(var + LN_EPS);
    F *o = out + (size_t)r * C;
    for (int c = lane; c < C; c += 32)
        o[c] = stf<F>((ldf(x[c]) - m) * s * weight[c] + bias[c]);
    if (lane == 0) {
        if (mean)
            mean[r] = m;
        if (rstd)
            rstd[r] = s;
    }
}

template <typename F>
static void layernorm_fwd(kernels_ctx *ctx, void *out, float *mean, float *rstd, const void *inp,
                          const float *weight, const float *bias, int BT, int C) {
    if (BT == 0)
        return;
    unsigned grid = (unsigned)((BT + LN_WARPS - 1) / LN_WARPS);
    layernorm_forward_kernel<F><<<grid, LN_WARPS * 32, 0, stream_of(ctx)>>>((F *)out, mean, rstd, (const F *)inp,
                                                                             weight, bias, BT, C);
    cudaCheckLaunch();
}

void cuda_layernorm_forward(kernels_ctx *ctx,
                            void *out,            // (B,T,C) [dt]
                            float *mean,          // (B,T) or NULL
                            float *rstd,          // (B,T) or NULL
                            const void *inp,      // (B,T,C) [dt]
                            const float *weight,  // (C)
                            const float *bias,    // (C)
                            int B, int T, int C, kernels_dtype dt) {
    CUDA_REQUIRE(C > 0);
    CUDA_DISPATCH(dt, layernorm_fwd, ctx, out, mean, rstd, inp, weight, bias, B * T, C);
}

/* With n = (x - mean) * rstd and g = dout * weight (the gradient reaching n):
 *   dx = rstd * (g - mean(g) - n * mean(g * n)),  dweight += dout * n,  dbias += dout.
 * Each block sums dweight and dbias over its rows in shared memory and adds them to
 * global memory once, so the atomics on the (C) vectors are few. */
template <typename F>
__global__ void layernorm_backward_kernel(F *dinp, float *dweight, float *dbias, const F *dout, const F *inp,
                                          const float *weight, const float *mean, const float *rstd, int BT,
                                          int C) {
    extern __shared__ float smem[];
    float *sdw = smem, *sdb = smem + C;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        sdw[c] = sdb[c] = 0.0f;
    __syncthreads();
    int lane = threadIdx.x % 32;
    for (int r = blockIdx.x * LN_WARPS + threadIdx.x / 32; r < BT; r += gridDim.x * LN_WARPS) {
        const F *x = inp + (size_t)r * C, *dy = dout + (size_t)r * C;
        F *dx = dinp + (size_t)r * C;
        float m = mean[r], s = rstd[r];
        float gmean = 0.0f, gnmean = 0.0f;
        for (int c = lane; c < C; c += 32) {
            float n = (ldf(x[c]) - m) * s;
            float g = ldf(dy[c]) * weight[c];
            gmean += g;
            gnmean += g * n;
        }
        gmean = warp_sum(gmean) / C;
        gnmean = warp_sum(gnmean) / C;
        for (int c = lane; c < C; c += 32) {
            float n = (ldf(x[c]) - m) * s;
            float d = ldf(dy[c]);
            float g = d * weight[c];
            atomicAdd(&sdb[c], d);
            atomicAdd(&sdw[c], n * d);
            dx[c] = stf<F>(ldf(dx[c]) + (g - gmean - n * gnmean) * s);
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        atomicAdd(&dbias[c], sdb[c]);
        atomicAdd(&dweight[c], sdw[c]);
    }
}

template <typename F>
static void layernorm_bwd(kernels_ctx *ctx, void *dinp, float *dweight, float *dbias, const void *dout,
                          const void *inp, const float *weight, const float *mean, const float *rstd, int BT,
                          int C) {
    if (BT == 0)
        return;
    size_t smem = 2 * (size_t)C * sizeof(float);
    unsigned grid = (unsigned)((BT + LN_WARPS - 1) / LN_WARPS);
    if (grid > 512)
        grid = 512; /* more rows per block, fewer atomics */
    allow_smem(layernorm_backward_kernel<F>, smem);
    layernorm_backward_kernel<F><<<grid, LN_WARPS * 32, smem, stream_of(ctx)>>>(
        (F *)dinp, dweight, dbias, (const F *)dout, (const F *)inp, weight, mean, rstd, BT, C);
    cudaCheckLaunch();
}

void cuda_layernorm_backward(kernels_ctx *ctx,
                             void *dinp,           // (B,T,C) [dt] +=
                             float *dweight,       // (C) +=
                             float *dbias,         // (C) +=
                             const void *dout,     // (B,T,C) [dt]
                             const void *inp,      // (B,T,C) [dt]
                             const float *weight,  // (C)
                             const float *mean,    // (B,T)
                             const float *rstd,    // (B,T)
                             int B, int T, int C, kernels_dtype dt) {
    CUDA_REQUIRE(C > 0);
    CUDA_DISPATCH(dt, layernorm_bwd, ctx, dinp, dweight, dbias, dout, inp, weight, mean, rstd, B * T, C);
}
