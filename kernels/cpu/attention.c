/* Causal multi-head self-attention (CPU twin of kernels/cuda/attention.cu).
 *
 * qkv (B,T,3C): row (b,t) holds q, k, v, each NH heads of HS = C/NH. For head h:
 *   preatt[t,t2] = q_t . k_t2 / sqrt(HS)        for t2 <= t
 *   att[t,:]     = softmax(preatt[t,:t+1]), zero beyond t
 *   out_t        = sum_t2 att[t,t2] v_t2
 * The work is split by (b,h), so the CUDA twin's per-row kernels and this loop nest
 * produce the same sums. */
#include <math.h>

#include "kernels/cpu/common.h"

CPU_INLINE void attention_fwd(void *out, void *att, const void *qkv, int B, int T, int C,
                              int NH, kernels_dtype dt) {
    int HS = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / sqrtf((float)HS);
    CPU_PARALLEL_FOR
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        float *s = malloc((size_t)T * sizeof(float));
        float *acc = malloc((size_t)HS * sizeof(float));
        CPU_REQUIRE(s && acc);
        for (int t = 0; t < T; t++) {
            size_t q = ((size_t)b * T + t) * C3 + (size_t)h * HS;
            float mx = -INFINITY;
            for (int t2 = 0; t2 <= t; t2++) {
                size_t k = ((size_t)b * T + t2) * C3 + C + (size_t)h * HS;
                float dot = 0.0f;
                for (int d = 0; d < HS; d++)
                    dot += ld(qkv, q + d, dt) * ld(qkv, k + d, dt);
                s[t2] = dot * scale;
                mx = fmaxf(mx, s[t2]);
            }
            float sum = 0.0f;
            for (int t2 = 0; t2 <= t; t2++) {
                s[t2] = expf(s[t2] - mx);
                sum += s[t2];
            }
            float inv = 1.0f / sum;
            size_t arow = ((size_t)bh * T + t) * T;
            for (int t2 = 0; t2 < T; t2++) {
                float p = t2 <= t ? s[t2] * inv : 0.0f;
                if (t2 <= t)
                    s[t2] = p;
                st(att, arow + t2, p, dt);
            }
            for (int d = 0; d < HS; d++)
                acc[d] = 0.0f;
            for (int t2 = 0; t2 <= t; t2++) {
                size_t v = ((size_t)b * T + t2) * C3 + 2 * (size_t)C + (size_t)h * HS;
                for (int d = 0; d < HS; d++)
                    acc[d] += s[t2] * ld(qkv, v + d, dt);
            }
            size_t o = ((size_t)b * T + t) * C + (size_t)h * HS;
            for (int d = 0; d < HS; d++)
                st(out, o + d, acc[d], dt);
        }
        free(s);
        free(acc);
    }
}

void cpu_attention_forward(kernels_ctx *ctx,
                           void *out,          // (B,T,C) [dt]
                           void *att,          // (B,NH,T,T) [dt]
                           const void *qkv,    // (B,T,3C) [dt]
                           int B, int T, int C, int NH, kernels_dtype dt) {
    CPU_REQUIRE(NH > 0 && C > 0 && C % NH == 0);
    CPU_DISPATCH(dt, attention_fwd, out, att, qkv, B, T, C, NH);
}

/* With datt[t,t2] = dout_t . v_t2 and D_t = sum_t2 att*datt = dout_t . out_t:
 *   dpreatt = att * (datt - D_t)
 *   dq_t  += scale * sum_t2 dpreatt[t,t2] k_t2
 *   dk_t2 += scale * sum_t  dpreatt[t,t2] q_t
 *   dv_t2 +=         sum_t  att[t,t2] dout_t
 * dq, dk, dv of one (b,h) are summed in fp32 and added to dqkv once, so a bf16 dqkv
 * is rounded once per element. */
CPU_INLINE void attention_bwd(void *dqkv, const void *dout, const void *qkv, const void *att,
                              const void *out, int B, int T, int C, int NH, kernels_dtype dt) {
    int HS = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / sqrtf((float)HS);
    CPU_PARALLEL_FOR
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        float *dq = calloc((size_t)T * HS, sizeof(float));
        float *dk = calloc((size_t)T * HS, sizeof(float));
        float *dv = calloc((size_t)T * HS, sizeof(float));
        float *go = malloc((size_t)HS * sizeof(float));
        CPU_REQUIRE(dq && dk && dv && go);
        for (int t = 0; t < T; t++) {
            size_t o = ((size_t)b * T + t) * C + (size_t)h * HS;
            size_t q = ((size_t)b * T + t) * C3 + (size_t)h * HS;
            float D = 0.0f;
            for (int d = 0; d < HS; d++) {
                go[d] = ld(dout, o + d, dt);
                D += go[d] * ld(out, o + d, dt);
            }
            size_t arow = ((size_t)bh * T + t) * T;
            for (int t2 = 0; t2 <= t; t2++) {
                size_t k = ((size_t)b * T + t2) * C3 + C + (size_t)h * HS;
                size_t v = k + C;
                float datt = 0.0f;
                for (int d = 0; d < HS; d++)
                    datt += go[d] * ld(qkv, v + d, dt);
                float a = ld(att, arow + t2, dt);
                float dp = a * (datt - D);
                float *dqt = dq + (size_t)t * HS, *dkt = dk + (size_t)t2 * HS, *dvt = dv + (size_t)t2 * HS;
                for (int d = 0; d < HS; d++) {
                    dqt[d] += dp * ld(qkv, k + d, dt);
                    dkt[d] += dp * ld(qkv, q + d, dt);
                    dvt[d] += a * go[d];
                }
            }
        }
        for (int t = 0; t < T; t++) {
            size_t q = ((size_t)b * T + t) * C3 + (size_t)h * HS;
            for (int d = 0; d < HS; d++) {
                size_t i = (size_t)t * HS + d;
                st(dqkv, q + d, ld(dqkv, q + d, dt) + dq[i] * scale, dt);
                st(dqkv, q + C + d, ld(dqkv, q + C + d, dt) + dk[i] * scale, dt);
                st(dqkv, q + 2 * (size_t)C + d, ld(dqkv, q + 2 * (size_t)C + d, dt) + dv[i], dt);
            }
        }
        free(dq);
        free(dk);
        free(dv);
        free(go);
    }
}

void cpu_attention_backward(kernels_ctx *ctx,
                            void *dqkv,         // (B,T,3C) [dt] +=
                            const void *dout,   // (B,T,C) [dt]
                            const void *qkv,    // (B,T,3C) [dt]
                            const void *att,    // (B,NH,T,T) [dt]
                            const void *out,    // (B,T,C) [dt]
                            int B, int T, int C, int NH, kernels_dtype dt) {
    CPU_REQUIRE(NH > 0 && C > 0 && C % NH == 0);
    CPU_DISPATCH(dt, attention_bwd, dqkv, dout, qkv, att, out, B, T, C, NH);
}
