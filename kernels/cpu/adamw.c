/* AdamW update, fp32 master weights and state (CPU twin of kernels/cuda/adamw.cu). */
#include <math.h>

#include "kernels/cpu/common.h"

void cpu_adamw_update(kernels_ctx *ctx,
                      float *params,        // (N)
                      const float *grads,   // (N)
                      float *m,             // (N)
                      float *v,             // (N)
                      size_t N, float lr, float beta1, float beta2, float eps,
                      float weight_decay, float grad_scale, int step) {
    CPU_REQUIRE(step >= 1);
    /* Bias corrections once, in double, as the CUDA twin does on the host. */
    float bc1 = (float)(1.0 - pow((double)beta1, (double)step));
    float bc2 = (float)(1.0 - pow((double)beta2, (double)step));
    CPU_PARALLEL_FOR
    for (size_t i = 0; i < N; i++) {
        float g = grads[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / bc1, vhat = vi / bc2;
        params[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * params[i]);
    }
}
