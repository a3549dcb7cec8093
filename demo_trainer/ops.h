/* The autograd ops: each runs a kernel from kernels/ forward, and, when grad recording
 * is on, makes the node whose backward runs the kernel's backward twin. Each op
 * allocates its own outputs and saved buffers (so a leak report names the op), and
 * returns a tensor the caller owns. Shapes: B batch, T time, C channels, NH heads,
 * V vocabulary; activations are [dev.dt]. */
#ifndef DT_OPS_H
#define DT_OPS_H

#include "demo_trainer/autograd.h"

/* out (B,T,C) = wte[tokens] + wpe[t]; tokens (B,T) int on the device */
dt_tensor *op_embedding(dt_storage *tokens, int B, int T, dt_param *wte, dt_param *wpe);
/* out (B,T,C) = layernorm(x) * w + b; saves x, mean (B,T), rstd (B,T) */
dt_tensor *op_layernorm(dt_tensor *x, dt_param *w, dt_param *b);
/* out (B,T,OC) = x (B,T,C) @ w (OC,C)^T + b (OC); b may be NULL; saves x */
dt_tensor *op_matmul(dt_tensor *x, dt_param *w, dt_param *b);
/* out (B,T,C) = causal self-attention of qkv (B,T,3C) over NH heads; saves qkv,
 * att (B,NH,T,T) and out */
dt_tensor *op_attention(dt_tensor *qkv, int NH);
/* out = gelu(x); saves x */
dt_tensor *op_gelu(dt_tensor *x);
/* out = a + b; saves nothing */
dt_tensor *op_residual(dt_tensor *a, dt_tensor *b);
/* The mean over (B,T) of the cross-entropy of logits (B,T,V) against targets (B,T):
 * a scalar. Saves logits and targets. */
dt_tensor *op_cross_entropy(dt_tensor *logits, dt_storage *targets);
/* Scalars (device tensors of one float, value also in ->item). */
dt_tensor *op_scalar(float v);                  /* a constant, no grad_fn */
dt_tensor *op_add(dt_tensor *a, dt_tensor *b);  /* a + b */
dt_tensor *op_scale(dt_tensor *a, float s);     /* a * s */
/* y = block(ctx, layer, x), keeping only x: the forward runs with recording off, and
 * backward runs it again with recording on before going back through it
 * (torch.utils.checkpoint). */
dt_tensor *op_checkpoint(ag_block_fn *block, void *ctx, int layer, dt_tensor *x);

#endif
