/* kernels: the compute ops of a GPT-2 style decoder, forward and backward, as two
 * twins behind one interface:
 *
 *   kernels/cpu/<op>.c    cpu_<op>_forward / cpu_<op>_backward    (plain C, synchronous)
 *   kernels/cuda/<op>.cu  cuda_<op>_forward / cuda_<op>_backward  (queued on ctx->stream)
 *
 * Both twins take the same arguments, declared once below as function types, and a
 * table (kernels_ops) picks one set at run time, so one binary can run either:
 *
 *   const kernels_ops *k = use_gpu ? kernels_cuda() : kernels_cpu();
 *   kernels_ctx ctx;
 *   if (!k || k->init(&ctx, stream) != 0) ...;
 *   k->matmul_forward(&ctx, out, inp, w, bias, B, T, C, OC, KERNELS_BF16);
 *
 * Sizes: B batch, T sequence length, C channels, NH heads, HS = C/NH head size,
 * V vocabulary, Vp V padded (row stride of logits), OC output channels, L layers.
 *
 * Memory. Every pointer is device memory. On the simulated device (CPU machines) device
 * pointers are host addresses, which is why the CPU twin can dereference them. The
 * CUDA twin never allocates, frees or synchronizes inside an op: all its work goes to
 * ctx->stream in order, and it reports errors (bad launch, cuBLASLt failure) by
 * printing file:line and exiting, as llm.c's cudaCheck does. Both twins abort on
 * arguments that break an op's stated preconditions.
 *
 * Precision. `dt` is the type of activations and of their gradients: KERNELS_F32
 * (float) or KERNELS_BF16 (kernels_bf16). The rule, for both twins:
 *   - tensors marked [dt] below are float or bf16 as dt says: activations, activation
 *     gradients, and the matmul's weight and bias (in bf16 mode the caller's bf16 copy of
 *     the fp32 master weights, made with cast_f32_to_bf16);
 *   - every other parameter (embeddings, LayerNorm weight and bias), every parameter
 *     gradient, LayerNorm's mean/rstd, the losses and the AdamW state are always fp32;
 *   - arithmetic is fp32 throughout (bf16 is a storage format): bf16 values are widened
 *     on load and rounded to nearest-even once on store. The GPU matmul is cuBLASLt
 *     with bf16 inputs and fp32 accumulation, or fp32 inputs with CUBLAS_COMPUTE_32F
 *     (no TF32); the CPU matmul widens bf16 inputs and accumulates in fp32.
 *
 * Gradients. Every backward ADDS into its gradient outputs (grad += ...), parameter and
 * activation gradients alike, as llm.c's train_gpt2.c does: parameter gradients then
 * accumulate over micro-steps, and the caller zeroes activation gradients before use.
 * The one exception is crossentropy_backward, which WRITES dlogits (it is the first
 * gradient of the backward pass) and allows dlogits == logits to save the memory.
 *
 * Layouts (row-major, as llm.c): a (B,T,C) tensor is B*T rows of C. The attention
 * input qkv is (B,T,3C): each row holds q, then k, then v, each C = NH heads of HS.
 * att is (B,NH,T,T), the softmax probabilities, zero above the diagonal.
 *
 * Alignment: pointers 16-byte aligned (cuBLASLt's epilogue and vector loads want it);
 * cudaMalloc and cudalloc give 256 or 512.
 */
#ifndef KERNELS_H
#define KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KERNELS_F32 = 0, KERNELS_BF16 = 1 } kernels_dtype;

/* bfloat16 storage: the top 16 bits of an IEEE float. See kernels/bf16.h. */
typedef uint16_t kernels_bf16;

static inline size_t kernels_dtype_size(kernels_dtype dt) { return dt == KERNELS_BF16 ? 2 : 4; }

/* Per-stream state. The CPU twin only records the stream; the CUDA twin adds a cuBLASLt
 * handle and its workspace. Fields are void* so this header needs no CUDA header. */
typedef struct kernels_ctx {
    void *stream;          /* cudaStream_t (NULL: the legacy default stream) */
    void *lt;              /* cublasLtHandle_t, CUDA twin only */
    void *workspace;       /* cuBLASLt workspace, device memory, CUDA twin only */
    size_t workspace_size;
} kernels_ctx;

/* ---- the ops: one function type each, implemented as cpu_<op> and cuda_<op> ---- */

/* Set up ctx for `stream`. CUDA: loads cuBLASLt (dlopen, see kernels/cuda/cublaslt.cu),
 * creates its handle and cudaMallocs a 32 MiB workspace. 0 on success; -1 with a line
 * on stderr if that fails (no GPU, no cuBLASLt). */
typedef int kernels_init_fn(kernels_ctx *ctx, void *stream);
typedef void kernels_destroy_fn(kernels_ctx *ctx);

/* out[b,t,:] = wte[inp[b,t],:] + wpe[t,:] */
typedef void kernels_embedding_forward_fn(kernels_ctx *ctx,
    void *out,              // (B,T,C) [dt]
    const int *inp,         // (B,T) token ids in [0,V)
    const float *wte,       // (V,C)
    const float *wpe,       // (maxT,C), maxT >= T
    int B, int T, int C, kernels_dtype dt);
typedef void kernels_embedding_backward_fn(kernels_ctx *ctx,
    float *dwte,            // (V,C) +=
    float *dwpe,            // (maxT,C) +=
    const void *dout,       // (B,T,C) [dt]
    const int *inp,         // (B,T)
    int B, int T, int C, kernels_dtype dt);

/* out = inp @ weight^T + bias */
typedef void kernels_matmul_forward_fn(kernels_ctx *ctx,
    void *out,              // (B,T,OC) [dt]
    const void *inp,        // (B,T,C) [dt]
    const void *weight,     // (OC,C) [dt]
    const void *bias,       // (OC) [dt], or NULL
    int B, int T, int C, int OC, kernels_dtype dt);
typedef void kernels_matmul_backward_fn(kernels_ctx *ctx,
    void *dinp,             // (B,T,C) [dt] +=, or NULL to skip
    float *dweight,         // (OC,C) +=
    float *dbias,           // (OC) +=, or NULL
    const void *dout,       // (B,T,OC) [dt]
    const void *inp,        // (B,T,C) [dt]
    const void *weight,     // (OC,C) [dt]
    int B, int T, int C, int OC, kernels_dtype dt);

/* out = (inp - mean) * rstd * weight + bias, over C; eps 1e-5 */
typedef void kernels_layernorm_forward_fn(kernels_ctx *ctx,
    void *out,              // (B,T,C) [dt]
    float *mean,            // (B,T), kept for backward, or NULL
    float *rstd,            // (B,T), kept for backward, or NULL
    const void *inp,        // (B,T,C) [dt]
    const float *weight,    // (C)
    const float *bias,      // (C)
    int B, int T, int C, kernels_dtype dt);
typedef void kernels_layernorm_backward_fn(kernels_ctx *ctx,
    void *dinp,             // (B,T,C) [dt] +=
    float *dweight,         // (C) +=
    float *dbias,           // (C) +=
    const void *dout,       // (B,T,C) [dt]
    const void *inp,        // (B,T,C) [dt]
    const float *weight,    // (C)
    const float *mean,      // (B,T)
    const float *rstd,      // (B,T)
    int B, int T, int C, kernels_dtype dt);

/* Causal multi-head self-attention: for each head, out = softmax(q k^T / sqrt(HS),
 * masked to t2 <= t) v. HS = C/NH; the CUDA twin needs HS <= 128. Backward also takes
 * the forward's `out`: the softmax gradient's row term sum_t2 att*datt equals
 * dout.out (as FlashAttention computes it), which lets each GPU thread own one row of
 * dq, dk or dv without a (B,NH,T,T) scratch buffer or atomics. */
typedef void kernels_attention_forward_fn(kernels_ctx *ctx,
    void *out,              // (B,T,C) [dt]
    void *att,              // (B,NH,T,T) [dt] probabilities, kept for backward
    const void *qkv,        // (B,T,3C) [dt]
    int B, int T, int C, int NH, kernels_dtype dt);
typedef void kernels_attention_backward_fn(kernels_ctx *ctx,
    void *dqkv,             // (B,T,3C) [dt] +=
    const void *dout,       // (B,T,C) [dt]
    const void *qkv,        // (B,T,3C) [dt]
    const void *att,        // (B,NH,T,T) [dt]
    const void *out,        // (B,T,C) [dt] the forward's output
    int B, int T, int C, int NH, kernels_dtype dt);

/* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
typedef void kernels_gelu_forward_fn(kernels_ctx *ctx,
    void *out,              // (N) [dt], e.g. N = B*T*4C
    const void *inp,        // (N) [dt]
    size_t N, kernels_dtype dt);
typedef void kernels_gelu_backward_fn(kernels_ctx *ctx,
    void *dinp,             // (N) [dt] +=
    const void *inp,        // (N) [dt]
    const void *dout,       // (N) [dt]
    size_t N, kernels_dtype dt);

/* out = inp1 + inp2 */
typedef void kernels_residual_forward_fn(kernels_ctx *ctx,
    void *out,              // (N) [dt], e.g. N = B*T*C
    const void *inp1,       // (N) [dt]
    const void *inp2,       // (N) [dt]
    size_t N, kernels_dtype dt);
typedef void kernels_residual_backward_fn(kernels_ctx *ctx,
    void *dinp1,            // (N) [dt] +=
    void *dinp2,            // (N) [dt] +=
    const void *dout,       // (N) [dt]
    size_t N, kernels_dtype dt);

/* Fused softmax + cross-entropy over the first V of each row of Vp logits:
 * losses[b,t] = logsumexp(logits[b,t,:V]) - logits[b,t,targets[b,t]].
 * Backward: dlogits = loss_scale * (softmax(logits) - onehot(target)) in [0,V), 0 in
 * [V,Vp). loss_scale is d(total loss)/d(losses[b,t]), the same for every position:
 * 1/(B*T) for a mean, 1/(B*T*grad_accum_steps) under gradient accumulation.
 * WRITES dlogits (not +=); dlogits may be logits itself. */
typedef void kernels_crossentropy_forward_fn(kernels_ctx *ctx,
    float *losses,          // (B,T)
    const void *logits,     // (B,T,Vp) [dt]
    const int *targets,     // (B,T) in [0,V)
    int B, int T, int V, int Vp, kernels_dtype dt);
typedef void kernels_crossentropy_backward_fn(kernels_ctx *ctx,
    void *dlogits,          // (B,T,Vp) [dt] written; may alias logits
    const void *logits,     // (B,T,Vp) [dt]
    const int *targets,     // (B,T)
    float loss_scale,
    int B, int T, int V, int Vp, kernels_dtype dt);

/* AdamW, one step, decoupled weight decay (as torch.optim.AdamW), all fp32:
 *   g = grad_scale * grads; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
 *   params -= lr * ( (m / (1-b1^step)) / (sqrt(v / (1-b2^step)) + eps) + weight_decay * params )
 * step counts from 1. grad_scale is 1, or a clipping factor. */
typedef void kernels_adamw_update_fn(kernels_ctx *ctx,
    float *params,          // (N) master weights, updated
    const float *grads,     // (N)
    float *m,               // (N) first moment, updated
    float *v,               // (N) second moment, updated
    size_t N, float lr, float beta1, float beta2, float eps, float weight_decay,
    float grad_scale, int step);

/* fp32 <-> bf16, round to nearest even; NaN stays NaN (0x7fff, CUDA's canonical
 * NaN), overflow rounds to +-Inf. */
typedef void kernels_cast_f32_to_bf16_fn(kernels_ctx *ctx,
    kernels_bf16 *out,      // (N)
    const float *inp,       // (N)
    size_t N);
typedef void kernels_cast_bf16_to_f32_fn(kernels_ctx *ctx,
    float *out,             // (N)
    const kernels_bf16 *inp,// (N)
    size_t N);

/* ---- the table ---- */
typedef struct kernels_ops {
    const char *name;       /* "cpu" or "cuda" */
    kernels_init_fn *init;
    kernels_destroy_fn *destroy;
    kernels_embedding_forward_fn *embedding_forward;
    kernels_embedding_backward_fn *embedding_backward;
    kernels_matmul_forward_fn *matmul_forward;
    kernels_matmul_backward_fn *matmul_backward;
    kernels_layernorm_forward_fn *layernorm_forward;
    kernels_layernorm_backward_fn *layernorm_backward;
    kernels_attention_forward_fn *attention_forward;
    kernels_attention_backward_fn *attention_backward;
    kernels_gelu_forward_fn *gelu_forward;
    kernels_gelu_backward_fn *gelu_backward;
    kernels_residual_forward_fn *residual_forward;
    kernels_residual_backward_fn *residual_backward;
    kernels_crossentropy_forward_fn *crossentropy_forward;
    kernels_crossentropy_backward_fn *crossentropy_backward;
    kernels_adamw_update_fn *adamw_update;
    kernels_cast_f32_to_bf16_fn *cast_f32_to_bf16;
    kernels_cast_bf16_to_f32_fn *cast_bf16_to_f32;
} kernels_ops;

/* libkernels_cpu.a */
const kernels_ops *kernels_cpu(void);
/* libkernels_cuda.a; NULL when the build had no nvcc (the library is then a stub). */
const kernels_ops *kernels_cuda(void);

/* The twins, declared through the types above so the compiler holds them to one
 * signature (the .c and .cu files spell the parameters out again). */
#define KERNELS_DECLARE_TWIN(p)                                                      \
    kernels_init_fn p##_init;                                                        \
    kernels_destroy_fn p##_destroy;                                                  \
    kernels_embedding_forward_fn p##_embedding_forward;                              \
    kernels_embedding_backward_fn p##_embedding_backward;                            \
    kernels_matmul_forward_fn p##_matmul_forward;                                    \
    kernels_matmul_backward_fn p##_matmul_backward;                                  \
    kernels_layernorm_forward_fn p##_layernorm_forward;                              \
    kernels_layernorm_backward_fn p##_layernorm_backward;                            \
    kernels_attention_forward_fn p##_attention_forward;                              \
    kernels_attention_backward_fn p##_attention_backward;                            \
    kernels_gelu_forward_fn p##_gelu_forward;                                        \
    kernels_gelu_backward_fn p##_gelu_backward;                                      \
    kernels_residual_forward_fn p##_residual_forward;                                \
    kernels_residual_backward_fn p##_residual_backward;                              \
    kernels_crossentropy_forward_fn p##_crossentropy_forward;                        \
    kernels_crossentropy_backward_fn p##_crossentropy_backward;                      \
    kernels_adamw_update_fn p##_adamw_update;                                        \
    kernels_cast_f32_to_bf16_fn p##_cast_f32_to_bf16;                                \
    kernels_cast_bf16_to_f32_fn p##_cast_bf16_to_f32;

KERNELS_DECLARE_TWIN(cpu)
KERNELS_DECLARE_TWIN(cuda)

#ifdef __cplusplus
}
#endif

#endif /* KERNELS_H */
