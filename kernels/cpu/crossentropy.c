/* Fused softmax + cross-entropy (CPU twin of kernels/cuda/crossentropy.cu).
 * The softmax is never stored: backward recomputes it from the logits, which is what
 * lets dlogits overwrite the logits in place. */
#include <math.h>

#include "kernels/cpu/common.h"

/* Max and sum of exp(x - max) over the first V logits of one row, in one pass
 * (online softmax: rescale the running sum whenever the max grows). */
CPU_INLINE void softmax_stats(const void *logits, size_t row, int V, float *max_out,
                              float *sum_out, kernels_dtype dt) {
    float mx = -INFINITY, sum = 0.0f;
    for (int i = 0; i < V; i++) {
        float x = ld(logits, row + i, dt);
        if (x > mx) {
            sum = sum * expf(mx - x) + 1.0f;
            mx = x;
        } else {
            sum += expf(x - mx);
        }
    }
    *max_out = mx;
    *sum_out = sum;
}

CPU_INLINE void crossentropy_fwd(float *losses, const void *logits, const int *targets, int BT,
                                 int V, int Vp, kernels_dtype dt) {
    CPU_PARALLEL_FOR
    for (int r = 0; r < BT; r++) {
        size_t row = (size_t)r * Vp;
        float mx, sum;
        softmax_stats(logits, row, V, &mx, &sum, dt);
        losses[r] = logf(sum) + mx - ld(logits, row + targets[r], dt);
    }
}

void cpu_crossentropy_forward(kernels_ctx *ctx,
                              float *losses,        // (B,T)
                              const void *logits,   // (B,T,Vp) [dt]
                              const int *targets,   // (B,T)
                              int B, int T, int V, int Vp, kernels_dtype dt) {
    CPU_REQUIRE(V > 0 && Vp >= V);
    CPU_DISPATCH(dt, crossentropy_fwd, losses, logits, targets, B * T, V, Vp);
}

/* dlogits may alias logits: each element is read before it is written. */
CPU_INLINE void crossentropy_bwd(void *dlogits, const void *logits, const int *targets,
                                 float loss_scale, int BT, int V, int Vp, kernels_dtype dt) {
    CPU_PARALLEL_FOR
    for (int r = 0; r < BT; r++) {
        size_t row = (size_t)r * Vp;
        float mx, sum;
        softmax_stats(logits, row, V, &mx, &sum, dt);
        float inv = 1.0f / sum;
        int target = targets[r];
        for (int i = 0; i < V; i++) {
            float p = expf(ld(logits, row + i, dt) - mx) * inv;
            st(dlogits, row + i, (p - (i == target ? 1.0f : 0.0f)) * loss_scale, dt);
        }
        for (int i = V; i < Vp; i++)
            st(dlogits, row + i, 0.0f, dt);
    }
}

void cpu_crossentropy_backward(kernels_ctx *ctx,
                               void *dlogits,        // (B,T,Vp) [dt] written, may alias logits
                               const void *logits,   // (B,T,Vp) [dt]
                               const int *targets,   // (B,T)
                               float loss_scale,
                               int B, int T, int V, int Vp, kernels_dtype dt) {
    CPU_REQUIRE(V > 0 && Vp >= V);
    CPU_DISPATCH(dt, crossentropy_bwd, dlogits, logits, targets, loss_scale, B * T, V, Vp);
}
