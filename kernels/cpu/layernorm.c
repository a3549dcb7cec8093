/* LayerNorm over the last dimension (CPU twin of kernels/cuda/layernorm.cu). */
#include <math.h>

#include "kernels/cpu/common.h"

#define LN_EPS 1e-5f

CPU_INLINE void layernorm_fwd(void *out, float *mean, float *rstd, const void *inp,
                              const float *weight, const float *bias, int BT, int C,
                              kernels_dtype dt) {
    CPU_PARALLEL_FOR
    for (int r = 0; r < BT; r++) {
        size_t o = (size_t)r * C;
        /* Two passes (mean, then variance about it): no cancellation. */
        float m = 0.0f;
        for (int c = 0; c < C; c++)
            m += ld(inp, o + c, dt);
        m /= C;
        float var = 0.0f;
        for (int c = 0; c < C; c++) {
            float x = ld(inp, o + c, dt) - m;
            var += x * x;
        }
        var /= C;
        float s = 1.0f / sqrtf(var + LN_EPS);
        for (int c = 0; c < C; c++) {
            float n = (ld(inp, o + c, dt) - m) * s;
            st(out, o + c, n * weight[c] + bias[c], dt);
        }
        if (mean)
            mean[r] = m;
        if (rstd)
            rstd[r] = s;
    }
}

void cpu_layernorm_forward(kernels_ctx *ctx,
                           void *out,            // (B,T,C) [dt]
                           float *mean,          // (B,T) or NULL
                           float *rstd,          // (B,T) or NULL
                           const void *inp,      // (B,T,C) [dt]
                           const float *weight,  // (C)
                           const float *bias,    // (C)
                           int B, int T, int C, kernels_dtype dt) {
    CPU_REQUIRE(C > 0);
    CPU_DISPATCH(dt, layernorm_fwd, out, mean, rstd, inp, weight, bias, B * T, C);
}

/* With n = (x - mean) * rstd and g = dout * weight (the gradient reaching n):
 *   dx = rstd * (g - mean(g) - n * mean(g * n)),  dweight += dout * n,  dbias += dout.
 * Serial over rows: every row adds into the same dweight and dbias. */
CPU_INLINE void layernorm_bwd(void *dinp, float *dweight, float *dbias, const void *dout,
                              const void *inp, const float *weight, const float *mean,
                              const float *rstd, int BT, int C, kernels_dtype dt) {
    for (int r = 0; r < BT; r++) {
        size_t o = (size_t)r * C;
        float m = mean[r], s = rstd[r];
        float gmean = 0.0f, gnmean = 0.0f;
        for (int c = 0; c < C; c++) {
            float n = (ld(inp, o + c, dt) - m) * s;
            float g = ld(dout, o + c, dt) * weight[c];
            gmean += g;
            gnmean += g * n;
        }
        gmean /= C;
        gnmean /= C;
        for (int c = 0; c < C; c++) {
            float n = (ld(inp, o + c, dt) - m) * s;
            float d = ld(dout, o + c, dt);
            float g = d * weight[c];
            dbias[c] += d;
            dweight[c] += n * d;
            st(dinp, o + c, ld(dinp, o + c, dt) + (g - gmean - n * gnmean) * s, dt);
        }
    }
}

void cpu_layernorm_backward(kernels_ctx *ctx,
                            void *dinp,           // (B,T,C) [dt] +=
                            float *dweight,       // (C) +=
                            float *dbias,         // (C) +=
                            const void *dout,     // (B,T,C) [dt]
                            const void *inp,      // (B,T,C) [dt]
                            const float *weight,  // (C)
                            const float *mean,    // (B,T)
                            const float *rstd,    // (B,T)
                            int B, int T, int C, kernels_dtype dt) {
    CPU_REQUIRE(C > 0);
    CPU_DISPATCH(dt, layernorm_bwd, dinp, dweight, dbias, dout, inp, weight, mean, rstd, B * T, C);
}
