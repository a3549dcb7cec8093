/* The model: a GPT-2 style decoder over bytes.
 *
 *   x = wte[tokens] + wpe[t]
 *   L times:  x = x + attn(ln1(x));  x = x + mlp(ln2(x))   (pre-LayerNorm blocks)
 *   logits = lnf(x) @ wte^T                                (LM head tied to wte)
 *
 * attn: qkv = h @ qkvw^T + qkvb, causal softmax attention over NH heads, then a
 * projection; mlp: h @ fcw^T + fcb, GELU, @ fcprojw^T + fcprojb. Every weight is its
 * own device allocation (as a framework's parameters are), and so is every
 * activation, through ops.h. */
#ifndef DT_MODEL_H
#define DT_MODEL_H

#include "demo_trainer/ops.h"

typedef struct gpt_config {
    int V;      /* vocabulary: 256 bytes */
    int maxT;   /* positions */
    int L;      /* layers */
    int NH;     /* heads */
    int C;      /* channels */
} gpt_config;

typedef struct gpt_block {
    dt_param ln1w;      // (C)
    dt_param ln1b;      // (C)
    dt_param qkvw;      // (3*C, C)
    dt_param qkvb;      // (3*C)
    dt_param attprojw;  // (C, C)
    dt_param attprojb;  // (C)
    dt_param ln2w;      // (C)
    dt_param ln2b;      // (C)
    dt_param fcw;       // (4*C, C)
    dt_param fcb;       // (4*C)
    dt_param fcprojw;   // (C, 4*C)
    dt_param fcprojb;   // (C)
} gpt_block;

typedef struct gpt {
    gpt_config cfg;
    dt_param wte;       // (V, C)
    dt_param wpe;       // (maxT, C)
    gpt_block *h;       // (L)
    dt_param lnfw;      // (C)
    dt_param lnfb;      // (C)
    dt_param **params;  /* every parameter, in a fixed order */
    int nparams;
    size_t num_parameters;
    int checkpoint;     /* recompute each block in backward (--checkpoint) */
} gpt;

/* Allocate and initialize (GPT-2's: N(0, 0.02), residual projections scaled by
 * 1/sqrt(2L), LayerNorms 1 and 0, biases 0) from seed. Gradients are allocated and
 * zeroed; AdamW state waits for the first step. In bf16 runs (dev.dt) the matmul
 * weights get bf16 copies. */
void gpt_init(gpt *m, gpt_config cfg, uint64_t seed);
void gpt_free(gpt *m);

/* logits (B,T,V) for tokens (B,T) on the device, T <= maxT. */
dt_tensor *gpt_forward(gpt *m, dt_storage *tokens, int B, int T);

/* One block, x (B,T,C) -> (B,T,C); an ag_block_fn for op_checkpoint. */
dt_tensor *gpt_block_forward(void *model, int layer, dt_tensor *x);

/* Refresh the bf16 copies from the fp32 weights (after each update). */
void gpt_refresh_copies(gpt *m);

#endif
