/* Residual add (CPU twin of kernels/cuda/residual.cu). */
#include "kernels/cpu/common.h"

CPU_INLINE void residual_fwd(void *out, const void *inp1, const void *inp2, size_t N,
                             kernels_dtype dt) {
    for (size_t i = 0; i < N; i++)
        st(out, i, ld(inp1, i, dt) + ld(inp2, i, dt), dt);
}

void cpu_residual_forward(kernels_ctx *ctx,
                          void *out,          // (N) [dt]
                          const void *inp1,   // (N) [dt]
                          const void *inp2,   // (N) [dt]
                          size_t N, kernels_dtype dt) {
    CPU_DISPATCH(dt, residual_fwd, out, inp1, inp2, N);
}

CPU_INLINE void residual_bwd(void *dinp1, void *dinp2, const void *dout, size_t N,
                             kernels_dtype dt) {
    for (size_t i = 0; i < N; i++) {
        float d = ld(dout, i, dt);
        st(dinp1, i, ld(dinp1, i, dt) + d, dt);
        st(dinp2, i, ld(dinp2, i, dt) + d, dt);
    }
}

void cpu_residual_backward(kernels_ctx *ctx,
                           void *dinp1,        // (N) [dt] +=
                           void *dinp2,        // (N) [dt] +=
                           const void *dout,   // (N) [dt]
                           size_t N, kernels_dtype dt) {
    CPU_DISPATCH(dt, residual_bwd, dinp1, dinp2, dout, N);
}
