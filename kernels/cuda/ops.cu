/* The CUDA twin's table (kernels_cuda()), its context, and its error exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cublaslt.cuh"

#define KERNELS_LT_WORKSPACE (32u << 20) /* cuBLASLt's advice for Hopper */

void ca_kernels_cuda_fail(const char *what, const char *file, int line) {
    fprintf(stderr, "kernels (cuda): %s:%d: %s\n", file, line, what);
    exit(EXIT_FAILURE);
}

int cuda_init(kernels_ctx *ctx, void *stream) {
    memset(ctx, 0, sizeof *ctx);
    ctx->stream = stream;
    if (ca_lt_load() != 0)
        return -1;
    cublasLtHandle_t lt;
    cublasStatus_t st = ca_lt.create(&lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "kernels (cuda): cublasLtCreate: %s\n", ca_lt.status_string(st));
        return -1;
    }
    cudaError_t err = cudaMalloc(&ctx->workspace, KERNELS_LT_WORKSPACE);
    if (err != cudaSuccess) {
        fprintf(stderr, "kernels (cuda): cudaMalloc of the cuBLASLt workspace: %s\n", cudaGetErrorString(err));
        ca_lt.destroy(lt);
        ctx->workspace = NULL;
        return -1;
    }
    ctx->lt = lt;
    ctx->workspace_size = KERNELS_LT_WORKSPACE;
    return 0;
}

/* cudaFree waits for the device: call at teardown, not in a step. */
void cuda_destroy(kernels_ctx *ctx) {
    if (ctx->workspace)
        cudaCheck(cudaFree(ctx->workspace));
    if (ctx->lt)
        cublasCheck(ca_lt.destroy((cublasLtHandle_t)ctx->lt));
    memset(ctx, 0, sizeof *ctx);
}

static kernels_ops make_ops(void) {
    kernels_ops k;
    memset(&k, 0, sizeof k);
    k.name = "cuda";
    k.init = cuda_init;
    k.destroy = cuda_destroy;
    k.embedding_forward = cuda_embedding_forward;
    k.embedding_backward = cuda_embedding_backward;
    k.matmul_forward = cuda_matmul_forward;
    k.matmul_backward = cuda_matmul_backward;
    k.layernorm_forward = cuda_layernorm_forward;
    k.layernorm_backward = cuda_layernorm_backward;
    k.attention_forward = cuda_attention_forward;
    k.attention_backward = cuda_attention_backward;
    k.gelu_forward = cuda_gelu_forward;
    k.gelu_backward = cuda_gelu_backward;
    k.residual_forward = cuda_residual_forward;
    k.residual_backward = cuda_residual_backward;
    k.crossentropy_forward = cuda_crossentropy_forward;
    k.crossentropy_backward = cuda_crossentropy_backward;
    k.adamw_update = cuda_adamw_update;
    k.cast_f32_to_bf16 = cuda_cast_f32_to_bf16;
    k.cast_bf16_to_f32 = cuda_cast_bf16_to_f32;
    return k;
}

const kernels_ops *kernels_cuda(void) {
    static const kernels_ops ops = make_ops(); /* initialized once, thread-safe */
    return &ops;
}
