/* Fused softmax + cross-entropy (CUDA twin of kernels/cpu/crossentropy.c).
 * One block per (b,t) row. The softmax is never stored: backward recomputes it from
 * the logits, which is what lets dlogits overwrite the logits in place. */
#include "kernels/cuda/common.cuh"

#define CE_THREADS 256

/* Merge two online-softmax states (max m, sum of exp(x - m)). */
__device__ __forceinline__ void ms_merge(float &m, float &s, float om, float os) {
    float M = fmaxf(m, om);
    if (M == -INFINITY)
        return; /* both empty */
    s = s * expf(m - M) + os * expf(om - M);
    m = M;
}

/* Max and sum of exp(x - max) over row[0..V), for the whole block. */
template <typename F>
__device__ void block_softmax_stats(const F *row, int V, float *max_out, float *sum_out) {
    __shared__ float wm[32], ws[32];
    float m = -INFINITY, s = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float x = ldf(row[i]);
        if (x > m) {
            s = s * expf(m - x) + 1.0f;
            m = x;
        } else {
            s += expf(x - m);
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float om = __shfl_xor_sync(0xffffffffu, m, o), os = __shfl_xor_sync(0xffffffffu, s, o);
        ms_merge(m, s, om, os);
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
    if (lane == 0) {
        wm[warp] = m;
        ws[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < nwarps ? wm[lane] : -INFINITY;
        s = lane < nwarps ? ws[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) {
            float om = __shfl_xor_sync(0xffffffffu, m, o), os = __shfl_xor_sync(0xffffffffu, s, o);
            ms_merge(m, s, om, os);
        }
        if (lane == 0) {
            wm[0] = m;
            ws[0] = s;
        }
    }
    __syncthreads();
    *max_out = wm[0];
    *sum_out = ws[0];
}

template <typename F>
__global__ void crossentropy_forward_kernel(float *losses, const F *logits, const int *targets, int V, int Vp) {
    const F *row = logits + (size_t)blockIdx.x * Vp;
    float mx, sum;
    block_softmax_stats(row, V, &mx, &sum);
    if (threadIdx.x == 0)
        losses[blockIdx.x] = logf(sum) + mx - ldf(row[targets[blockIdx.x]]);
}

template <typename F>
static void crossentropy_fwd(kernels_ctx *ctx, float *losses, const void *logits, const int *targets, int BT, int V,
                             int Vp) {
    if (BT == 0)
        return;
    crossentropy_forward_kernel<F><<<BT, CE_THREADS, 0, stream_of(ctx)>>>(losses, (const F *)logits, targets, V, Vp);
    cudaCheckLaunch();
}

void cuda_crossentropy_forward(kernels_ctx *ctx,
                               float *losses,        // (B,T)
                               const void *logits,   // (B,T,Vp) [dt]
                               const int *targets,   // (B,T)
                               int B, int T, int V, int Vp, kernels_dtype dt) {
    CUDA_REQUIRE(V > 0 && Vp >= V);
    CUDA_DISPATCH(dt, crossentropy_fwd, ctx, losses, logits, targets, B * T, V, Vp);
}

/* dlogits may alias logits: the stats read the row before the barrier inside
 * block_softmax_stats, then each element is read and written by one thread. */
template <typename F>
__global__ void crossentropy_backward_kernel(F *dlogits, const F *logits, const int *targets, float loss_scale,
                                             int V, int Vp) {
    size_t off = (size_t)blockIdx.x * Vp;
    float mx, sum;
    block_softmax_stats(logits + off, V, &mx, &sum);
    float inv = 1.0f / sum;
    int target = targets[blockIdx.x];
    for (int i = threadIdx.x; i < Vp; i += blockDim.x) {
        float d = 0.0f;
        if (i < V) {
            float p = expf(ldf(logits[off + i]) - mx) * inv;
            d = (p - (i == target ? 1.0f : 0.0f)) * loss_scale;
        }
        dlogits[off + i] = stf<F>(d);
    }
}

template <typename F>
static void crossentropy_bwd(kernels_ctx *ctx, void *dlogits, const void *logits, const int *targets,
                             float loss_scale, int BT, int V, int Vp) {
    if (BT == 0)
        return;
    crossentropy_backward_kernel<F><<<BT, CE_THREADS, 0, stream_of(ctx)>>>((F *)dlogits, (const F *)logits, targets,
                                                                            loss_scale, V, Vp);
    cudaCheckLaunch();
}

void cuda_crossentropy_backward(kernels_ctx *ctx,
                                void *dlogits,        // (B,T,Vp) [dt] written, may alias logits
                                const void *logits,   // (B,T,Vp) [dt]
                                const int *targets,   // (B,T)
                                float loss_scale,
                                int B, int T, int V, int Vp, kernels_dtype dt) {
    CUDA_REQUIRE(V > 0 && Vp >= V);
    CUDA_DISPATCH(dt, crossentropy_bwd, ctx, dlogits, logits, targets, loss_scale, B * T, V, Vp);
}
