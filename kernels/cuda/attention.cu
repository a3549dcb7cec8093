/* Causal multi-head self-attention (CUDA twin of kernels/cpu/attention.c).
 *
 * qkv (B,T,3C): row (b,t) holds q, k, v, each NH heads of HS = C/NH. For head h:
 *   preatt[t,t2] = q_t . k_t2 / sqrt(HS)        for t2 <= t
 *   att[t,:]     = softmax(preatt[t,:t+1]), zero beyond t
 *   out_t        = sum_t2 att[t,t2] v_t2
 *
 * One warp owns one row (b,h,t) and writes only that row's outputs, so there are no
 * atomics and no (B,NH,T,T) scratch buffer. Two patterns alternate: a lane per key
 * (each lane runs a whole HS-long dot product for its t2) for the scores, and a lane
 * per channel (lane d of the head, HS <= 128 so at most 4 each) for the weighted sums,
 * with 32 scores at a time passed between them through shared memory. Not
 * FlashAttention: plain fp32 CUDA cores, T*T*HS work per head, fine for the demo's
 * sizes; the (B,NH,T,T) att the interface keeps is what the trainer's memory story
 * wants to show anyway. */
#include "kernels/cuda/common.cuh"

#define ATT_WARPS 4          /* rows per block */
#define ATT_MAX_HS 128
#define ATT_PER_LANE (ATT_MAX_HS / 32)

/* (b,h,t) of warp row r, in the order of att's (B,NH,T) leading dimensions. */
__device__ __forceinline__ void att_row(size_t r, int T, int NH, int *b, int *h, int *t) {
    *t = (int)(r % T);
    *h = (int)((r / T) % NH);
    *b = (int)(r / ((size_t)T * NH));
}

template <typename F>
__global__ void attention_forward_kernel(F *out, F *att, const F *qkv, int B, int T, int C, int NH) {
    extern __shared__ float smem[];
    int HS = C / NH, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    size_t r = (size_t)blockIdx.x * ATT_WARPS + warp;
    if (r >= (size_t)B * NH * T)
        return;
    int b, h, t;
    att_row(r, T, NH, &b, &h, &t);
    size_t C3 = 3 * (size_t)C;
    float *q = smem + (size_t)warp * (HS + T); /* q_t, widened */
    float *s = q + HS;                          /* scores, then probabilities */
    const F *qrow = qkv + ((size_t)b * T + t) * C3 + (size_t)h * HS;
    for (int d = lane; d < HS; d += 32)
        q[d] = ldf(qrow[d]);
    __syncwarp();
    float scale = 1.0f / sqrtf((float)HS);
    float mx = -INFINITY;
    for (int t2 = lane; t2 <= t; t2 += 32) {
        const F *k = qkv + ((size_t)b * T + t2) * C3 + C + (size_t)h * HS;
        float dot = 0.0f;
        for (int d = 0; d < HS; d++)
            dot += q[d] * ldf(k[d]);
        s[t2] = dot * scale;
        mx = fmaxf(mx, s[t2]);
    }
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int t2 = lane; t2 <= t; t2 += 32) {
        s[t2] = expf(s[t2] - mx);
        sum += s[t2];
    }
    float inv = 1.0f / warp_sum(sum);
    F *arow = att + r * T;
    for (int t2 = lane; t2 < T; t2 += 32) {
        float p = 0.0f;
        if (t2 <= t) {
            p = s[t2] * inv;
            s[t2] = p;
        }
        arow[t2] = stf<F>(p);
    }
    __syncwarp();
    float acc[ATT_PER_LANE] = {};
    for (int t2 = 0; t2 <= t; t2++) {
        float p = s[t2];
        const F *v = qkv + ((size_t)b * T + t2) * C3 + 2 * (size_t)C + (size_t)h * HS;
#pragma unroll
        for (int i = 0; i < ATT_PER_LANE; i++) {
            int d = lane + 32 * i;
            if (d < HS)
                acc[i] += p * ldf(v[d]);
        }
    }
    F *orow = out + ((size_t)b * T + t) * C + (size_t)h * HS;
#pragma unroll
    for (int i = 0; i < ATT_PER_LANE; i++) {
        int d = lane + 32 * i;
        if (d < HS)
            orow[d] = stf<F>(acc[i]);
    }
}

static unsigned att_grid(int B, int T, int NH) {
    return (unsigned)(((size_t)B * NH * T + ATT_WARPS - 1) / ATT_WARPS);
}

template <typename F>
static void attention_fwd(kernels_ctx *ctx, void *out, void *att, const void *qkv, int B, int T, int C, int NH) {
    if ((size_t)B * T == 0)
        return;
    int HS = C / NH;
    size_t smem = ATT_WARPS * (size_t)(HS + T) * sizeof(float);
    allow_smem(attention_forward_kernel<F>, smem);
    attention_forward_kernel<F><<<att_grid(B, T, NH), ATT_WARPS * 32, smem, stream_of(ctx)>>>(
        (F *)out, (F *)att, (const F *)qkv, B, T, C, NH);
    cudaCheckLaunch();
}

void cuda_attention_forward(kernels_ctx *ctx,
                            void *out,          // (B,T,C) [dt]
                            void *att,          // (B,NH,T,T) [dt]
                            const void *qkv,    // (B,T,3C) [dt]
                            int B, int T, int C, int NH, kernels_dtype dt) {
    CUDA_REQUIRE(NH > 0 && C > 0 && C % NH == 0 && C / NH <= ATT_MAX_HS);
    CUDA_DISPATCH(dt, attention_fwd, ctx, out, att, qkv, B, T, C, NH);
}

/* Backward. With datt[t,t2] = dout_t . v_t2 and D_t = sum_t2 att*datt = dout_t . out_t:
 *   dpreatt = att * (datt - D_t)
 *   dq_t  += scale * sum_t2 dpreatt[t,t2] k_t2     (kernel 1: a warp per query row t)
 *   dk_t2 += scale * sum_t  dpreatt[t,t2] q_t      (kernel 2: a warp per key row t2)
 *   dv_t2 +=         sum_t  att[t,t2] dout_t
 * Kernel 2 recomputes datt and D_t rather than storing them: a (B,NH,T,T) buffer saved
 * against 2 HS-long dot products per (t,t2). */
template <typename F>
__global__ void attention_backward_dq_kernel(F *dqkv, const F *dout, const F *qkv, const F *att, const F *out,
                                             int B, int T, int C, int NH) {
    extern __shared__ float smem[];
    int HS = C / NH, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    size_t r = (size_t)blockIdx.x * ATT_WARPS + warp;
    if (r >= (size_t)B * NH * T)
        return;
    int b, h, t;
    att_row(r, T, NH, &b, &h, &t);
    size_t C3 = 3 * (size_t)C;
    float *go = smem + (size_t)warp * (HS + 32); /* dout_t, widened */
    float *sdp = go + HS;                         /* 32 dpreatt values */
    const F *dorow = dout + ((size_t)b * T + t) * C + (size_t)h * HS;
    const F *orow = out + ((size_t)b * T + t) * C + (size_t)h * HS;
    float D = 0.0f;
    for (int d = lane; d < HS; d += 32) {
        go[d] = ldf(dorow[d]);
        D += go[d] * ldf(orow[d]);
    }
    D = warp_sum(D);
    __syncwarp();
    const F *arow = att + r * T;
    float acc[ATT_PER_LANE] = {};
    for (int base = 0; base <= t; base += 32) {
        int t2 = base + lane;
        float dp = 0.0f;
        if (t2 <= t) {
            const F *v = qkv + ((size_t)b * T + t2) * C3 + 2 * (size_t)C + (size_t)h * HS;
            float datt = 0.0f;
            for (int d = 0; d < HS; d++)
                datt += go[d] * ldf(v[d]);
            dp = ldf(arow[t2]) * (datt - D);
        }
        sdp[lane] = dp;
        __syncwarp();
        int n = min(32, t - base + 1);
        for (int j = 0; j < n; j++) {
            float p = sdp[j];
            const F *k = qkv + ((size_t)b * T + base + j) * C3 + C + (size_t)h * HS;
#pragma unroll
            for (int i = 0; i < ATT_PER_LANE; i++) {
                int d = lane + 32 * i;
                if (d < HS)
                    acc[i] += p * ldf(k[d]);
            }
        }
        __syncwarp();
    }
    float scale = 1.0f / sqrtf((float)HS);
    F *dq = dqkv + ((size_t)b * T + t) * C3 + (size_t)h * HS;
#pragma unroll
    for (int i = 0; i < ATT_PER_LANE; i++) {
        int d = lane + 32 * i;
        if (d < HS)
            dq[d] = stf<F>(ldf(dq[d]) + acc[i] * scale);
    }
}

template <typename F>
__global__ void attention_backward_dkdv_kernel(F *dqkv, const F *dout, const F *qkv, const F *att, const F *out,
                                               int B, int T, int C, int NH) {
    extern __shared__ float smem[];
    int HS = C / NH, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    size_t r = (size_t)blockIdx.x * ATT_WARPS + warp;
    if (r >= (size_t)B * NH * T)
        return;
    int b, h, t2;
    att_row(r, T, NH, &b, &h, &t2);
    size_t C3 = 3 * (size_t)C;
    float *vv = smem + (size_t)warp * (HS + 64); /* v_t2, widened */
    float *sdp = vv + HS;                         /* 32 dpreatt values */
    float *sa = sdp + 32;                         /* 32 att values */
    const F *vrow = qkv + ((size_t)b * T + t2) * C3 + 2 * (size_t)C + (size_t)h * HS;
    for (int d = lane; d < HS; d += 32)
        vv[d] = ldf(vrow[d]);
    __syncwarp();
    const F *acol = att + ((size_t)b * NH + h) * T * T + t2; /* att[b,h,:,t2], stride T */
    float ak[ATT_PER_LANE] = {}, av[ATT_PER_LANE] = {};
    for (int base = t2; base < T; base += 32) {
        int t = base + lane;
        float dp = 0.0f, a = 0.0f;
        if (t < T) {
            const F *dorow = dout + ((size_t)b * T + t) * C + (size_t)h * HS;
            const F *orow = out + ((size_t)b * T + t) * C + (size_t)h * HS;
            float datt = 0.0f, D = 0.0f;
            for (int d = 0; d < HS; d++) {
                float g = ldf(dorow[d]);
                datt += g * vv[d];
                D += g * ldf(orow[d]);
            }
            a = ldf(acol[(size_t)t * T]);
            dp = a * (datt - D);
        }
        sdp[lane] = dp;
        sa[lane] = a;
        __syncwarp();
        int n = min(32, T - base);
        for (int j = 0; j < n; j++) {
            const F *q = qkv + ((size_t)b * T + base + j) * C3 + (size_t)h * HS;
            const F *dorow = dout + ((size_t)b * T + base + j) * C + (size_t)h * HS;
            float p = sdp[j], aj = sa[j];
#pragma unroll
            for (int i = 0; i < ATT_PER_LANE; i++) {
                int d = lane + 32 * i;
                if (d < HS) {
                    ak[i] += p * ldf(q[d]);
                    av[i] += aj * ldf(dorow[d]);
                }
            }
        }
        __syncwarp();
    }
    float scale = 1.0f / sqrtf((float)HS);
    F *dk = dqkv + ((size_t)b * T + t2) * C3 + C + (size_t)h * HS;
    F *dv = dk + C;
#pragma unroll
    for (int i = 0; i < ATT_PER_LANE; i++) {
        int d = lane + 32 * i;
        if (d < HS) {
            dk[d] = stf<F>(ldf(dk[d]) + ak[i] * scale);
            dv[d] = stf<F>(ldf(dv[d]) + av[i]);
        }
    }
}

template <typename F>
static void attention_bwd(kernels_ctx *ctx, void *dqkv, const void *dout, const void *qkv, const void *att,
                          const void *out, int B, int T, int C, int NH) {
    if ((size_t)B * T == 0)
        return;
    int HS = C / NH;
    unsigned grid = att_grid(B, T, NH);
    attention_backward_dq_kernel<F><<<grid, ATT_WARPS * 32, ATT_WARPS * (HS + 32) * sizeof(float), stream_of(ctx)>>>(
        (F *)dqkv, (const F *)dout, (const F *)qkv, (const F *)att, (const F *)out, B, T, C, NH);
    cudaCheckLaunch();
    attention_backward_dkdv_kernel<F><<<grid, ATT_WARPS * 32, ATT_WARPS * (HS + 64) * sizeof(float), stream_of(ctx)>>>(
        (F *)dqkv, (const F *)dout, (const F *)qkv, (const F *)att, (const F *)out, B, T, C, NH);
    cudaCheckLaunch();
}

void cuda_attention_backward(kernels_ctx *ctx,
                             void *dqkv,         // (B,T,3C) [dt] +=
                             const void *dout,   // (B,T,C) [dt]
                             const void *qkv,    // (B,T,3C) [dt]
                             const void *att,    // (B,NH,T,T) [dt]
                             const void *out,    // (B,T,C) [dt]
                             int B, int T, int C, int NH, kernels_dtype dt) {
    CUDA_REQUIRE(NH > 0 && C > 0 && C % NH == 0 && C / NH <= ATT_MAX_HS);
    CUDA_DISPATCH(dt, attention_bwd, ctx, dqkv, dout, qkv, att, out, B, T, C, NH);
}
