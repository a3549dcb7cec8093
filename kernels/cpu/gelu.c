/* GELU, tanh approximation (CPU twin of kernels/cuda/gelu.cu). */
#include <math.h>

#include "kernels/cpu/common.h"

#define GELU_K 0.7978845608028654f  /* sqrt(2/pi) */

CPU_INLINE void gelu_fwd(void *out, const void *inp, size_t N, kernels_dtype dt) {
    CPU_PARALLEL_FOR
    for (size_t i = 0; i < N; i++) {
        float x = ld(inp, i, dt);
        float u = GELU_K * (x + 0.044715f * x * x * x);
        st(out, i, 0.5f * x * (1.0f + tanhf(u)), dt);
    }
}

void cpu_gelu_forward(kernels_ctx *ctx,
                      void *out,          // (N) [dt]
                      const void *inp,    // (N) [dt]
                      size_t N, kernels_dtype dt) {
    CPU_DISPATCH(dt, gelu_fwd, out, inp, N);
}

/* d/dx 0.5 x (1 + tanh u) = 0.5 (1 + tanh u) + 0.5 x sech^2(u) du/dx,
 * du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2). */
CPU_INLINE void gelu_bwd(void *dinp, const void *inp, const void *dout, size_t N,
                         kernels_dtype dt) {
    CPU_PARALLEL_FOR
    for (size_t i = 0; i < N; i++) {
        float x = ld(inp, i, dt);
        float u = GELU_K * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float g = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        st(dinp, i, ld(dinp, i, dt) + g * ld(dout, i, dt), dt);
    }
}

void cpu_gelu_backward(kernels_ctx *ctx,
                       void *dinp,         // (N) [dt] +=
                       const void *inp,    // (N) [dt]
                       const void *dout,   // (N) [dt]
                       size_t N, kernels_dtype dt) {
    CPU_DISPATCH(dt, gelu_bwd, dinp, inp, dout, N);
}
