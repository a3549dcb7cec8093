/* The CPU twin's table (kernels_cpu()) and its trivial context. */
#include <string.h>

#include "kernels/cpu/common.h"

int cpu_init(kernels_ctx *ctx, void *stream) {
    memset(ctx, 0, sizeof *ctx);
    ctx->stream = stream;  /* unused: CPU ops finish before they return */
    return 0;
}

void cpu_destroy(kernels_ctx *ctx) { memset(ctx, 0, sizeof *ctx); }

static const kernels_ops cpu_ops = {
    .name = "cpu",
    .init = cpu_init,
    .destroy = cpu_destroy,
    .embedding_forward = cpu_embedding_forward,
    .embedding_backward = cpu_embedding_backward,
    .matmul_forward = cpu_matmul_forward,
    .matmul_backward = cpu_matmul_backward,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .residual_forward = cpu_residual_forward,
    .residual_backward = cpu_residual_backward,
    .crossentropy_forward = cpu_crossentropy_forward,
    .crossentropy_backward = cpu_crossentropy_backward,
    .adamw_update = cpu_adamw_update,
    .cast_f32_to_bf16 = cpu_cast_f32_to_bf16,
    .cast_bf16_to_f32 = cpu_cast_bf16_to_f32,
};

const kernels_ops *kernels_cpu(void) { return &cpu_ops; }
