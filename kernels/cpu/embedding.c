/* Token + position embedding (CPU twin of kernels/cuda/embedding.cu). */
#include "kernels/cpu/common.h"

CPU_INLINE void embedding_fwd(void *out, const int *inp, const float *wte, const float *wpe,
                              int B, int T, int C, kernels_dtype dt) {
    CPU_PARALLEL_FOR
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T;
        const float *te = wte + (size_t)inp[bt] * C;
        const float *pe = wpe + (size_t)t * C;
        size_t o = (size_t)bt * C;
        for (int c = 0; c < C; c++)
            st(out, o + c, te[c] + pe[c], dt);
    }
}

void cpu_embedding_forward(kernels_ctx *ctx,
                           void *out,          // (B,T,C) [dt]
                           const int *inp,     // (B,T)
                           const float *wte,   // (V,C)
                           const float *wpe,   // (maxT,C)
                           int B, int T, int C, kernels_dtype dt) {
    CPU_DISPATCH(dt, embedding_fwd, out, inp, wte, wpe, B, T, C);
}

/* Serial on purpose: rows with the same token add into the same dwte row. */
CPU_INLINE void embedding_bwd(float *dwte, float *dwpe, const void *dout, const int *inp,
                              int B, int T, int C, kernels_dtype dt) {
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T;
        float *dte = dwte + (size_t)inp[bt] * C;
        float *dpe = dwpe + (size_t)t * C;
        size_t o = (size_t)bt * C;
        for (int c = 0; c < C; c++) {
            float d = ld(dout, o + c, dt);
            dte[c] += d;
            dpe[c] += d;
        }
    }
}

void cpu_embedding_backward(kernels_ctx *ctx,
                            float *dwte,        // (V,C) +=
                            float *dwpe,        // (maxT,C) +=
                            const void *dout,   // (B,T,C) [dt]
                            const int *inp,     // (B,T)
                            int B, int T, int C, kernels_dtype dt) {
    CPU_DISPATCH(dt, embedding_bwd, dwte, dwpe, dout, inp, B, T, C);
}
