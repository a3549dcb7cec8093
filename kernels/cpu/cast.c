/* fp32 <-> bf16 casts (CPU twin of kernels/cuda/cast.cu). */
#include "kernels/cpu/common.h"

void cpu_cast_f32_to_bf16(kernels_ctx *ctx,
                          kernels_bf16 *out,      // (N)
                          const float *inp,       // (N)
                          size_t N) {
    for (size_t i = 0; i < N; i++)
        out[i] = kernels_f32_to_bf16(inp[i]);
}

void cpu_cast_bf16_to_f32(kernels_ctx *ctx,
                          float *out,             // (N)
                          const kernels_bf16 *inp,// (N)
                          size_t N) {
    for (size_t i = 0; i < N; i++)
        out[i] = kernels_bf16_to_f32(inp[i]);
}
