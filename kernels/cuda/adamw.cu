/* AdamW update, fp32 master weights and state (CUDA twin of kernels/cpu/adamw.c). */
#include "kernels/cuda/common.cuh"

__global__ void adamw_kernel(float *params, const float *grads, float *m, float *v, size_t N, float lr,
                             float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                             float bc1, float bc2) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x) {
        float g = grads[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / bc1, vhat = vi / bc2;
        params[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * params[i]);
    }
}

void cuda_adamw_update(kernels_ctx *ctx,
                       float *params,        // (N)
                       const float *grads,   // (N)
                       float *m,             // (N)
                       float *v,             // (N)
                       size_t N, float lr, float beta1, float beta2, float eps,
                       float weight_decay, float grad_scale, int step) {
    CUDA_REQUIRE(step >= 1);
    if (N == 0)
        return;
    /* Bias corrections once, in double, as the CPU twin does. */
    float bc1 = (float)(1.0 - pow((double)beta1, (double)step));
    float bc2 = (float)(1.0 - pow((double)beta2, (double)step));
    adamw_kernel<<<grid_for(N, 256), 256, 0, stream_of(ctx)>>>(params, grads, m, v, N, lr, beta1, beta2, eps,
                                                                  weight_decay, grad_scale, bc1, bc2);
    cudaCheckLaunch();
}
