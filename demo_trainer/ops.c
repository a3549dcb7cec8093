/* The autograd ops (see ops.h): kernel calls, and the nodes that undo them. */
#include "demo_trainer/ops.h"

#include <string.h>

#define K dev.k
#define CTX (&dev.ctx)

/* The node for output `out` of an op, recorded only when grad recording is on. */
static ag_node *attach(dt_tensor *out, const char *name, ag_backward_fn *backward, dt_tensor *in0,
                       dt_tensor *in1) {
    ag_node *n = ag_node_new(name, backward, in0, in1);
    n->dt = out->dt;
    n->B = out->B;
    n->T = out->T;
    n->C = out->C;
    n->grad_bytes = tensor_bytes(out);
    out->grad_fn = n;
    return n;
}

/* The gradient buffer of input i of n, or, when that input needs none, a scratch
 * buffer of `bytes` that *tmp holds until the caller releases it. */
#define DINP(n, i, bytes, tmp) \
    ((n)->next[i] ? AG_GRAD((n)->next[i]) : ((*(tmp) = STORAGE_NEW((bytes), MEM_ACTGRAD)), (*(tmp))->ptr))

static size_t act_bytes(const ag_node *n, size_t elems) { return elems * kernels_dtype_size(n->dt); }

/* ---- embedding ---- */

static void embedding_backward(ag_node *n) {
    K->embedding_backward(CTX, n->p[0]->grad, n->p[1]->grad, n->grad->ptr, n->saved[0]->ptr, n->B, n->T, n->C,
                          n->dt);
}

dt_tensor *op_embedding(dt_storage *tokens, int B, int T, dt_param *wte, dt_param *wpe) {
    int C = wte->cols;
    if (T > wpe->rows) DT_FATAL("sequence of %d past the %d positions", T, wpe->rows);
    dt_tensor *out = TENSOR_NEW(dev.dt, B, T, C, MEM_ACT); // (B,T,C)
    K->embedding_forward(CTX, out->st->ptr, tokens->ptr, wte->w, wpe->w, B, T, C, dev.dt);
    if (ag_grad_enabled()) {
        ag_node *n = attach(out, "EmbeddingBackward", embedding_backward, NULL, NULL);
        ag_node_save(n, 0, tokens);
        n->p[0] = wte;
        n->p[1] = wpe;
    }
    return out;
}

/* ---- layernorm ---- */

static void layernorm_backward(ag_node *n) {
    dt_storage *tmp = NULL;
    void *dinp = DINP(n, 0, act_bytes(n, (size_t)n->B * n->T * n->C), &tmp);
    K->layernorm_backward(CTX, dinp, n->p[0]->grad, n->p[1]->grad, n->grad->ptr, n->saved[0]->ptr, n->p[0]->w,
                          n->saved[1]->ptr, n->saved[2]->ptr, n->B, n->T, n->C, n->dt);
    storage_release(tmp);
}

dt_tensor *op_layernorm(dt_tensor *x, dt_param *w, dt_param *b) {
    int B = x->B, T = x->T, C = x->C;
    dt_tensor *out = TENSOR_NEW(dev.dt, B, T, C, MEM_ACT); // (B,T,C)
    dt_storage *mean = NULL, *rstd = NULL;
    int record = ag_grad_enabled();
    if (record) {
        mean = STORAGE_NEW((size_t)B * T * sizeof(float), MEM_ACT); // (B,T)
        rstd = STORAGE_NEW((size_t)B * T * sizeof(float), MEM_ACT); // (B,T)
    }
    K->layernorm_forward(CTX, out->st->ptr, mean ? mean->ptr : NULL, rstd ? rstd->ptr : NULL, x->st->ptr, w->w,
                         b->w, B, T, C, dev.dt);
    if (record) {
        ag_node *n = attach(out, "LayerNormBackward", layernorm_backward, x, NULL);
        ag_node_save(n, 0, x->st);
        ag_node_save(n, 1, mean);
        ag_node_save(n, 2, rstd);
        n->p[0] = w;
        n->p[1] = b;
    }
    storage_release(mean);
    storage_release(rstd);
    return out;
}

/* ---- matmul ---- */

/* The weight as the kernels take it: the bf16 copy in bf16 runs. */
static const void *wptr(const dt_param *p) {
    if (!p) return NULL;
    return dev.dt == KERNELS_BF16 ? (const void *)p->lp : (const void *)p->w;
}

static void matmul_backward(ag_node *n) {
    void *dinp = n->next[0] ? AG_GRAD(n->next[0]) : NULL; /* NULL: the kernel skips it */
    K->matmul_backward(CTX, dinp, n->p[0]->grad, n->p[1] ? n->p[1]->grad : NULL, n->grad->ptr, n->saved[0]->ptr,
                       wptr(n->p[0]), n->B, n->T, n->C, n->OC, n->dt);
}

dt_tensor *op_matmul(dt_tensor *x, dt_param *w, dt_param *b) {
    int B = x->B, T = x->T, C = x->C, OC = w->rows;
    if (w->cols != C) DT_FATAL("matmul of %s: (%d,%d) weight for %d channels", w->name, w->rows, w->cols, C);
    dt_tensor *out = TENSOR_NEW(dev.dt, B, T, OC, MEM_ACT); // (B,T,OC)
    K->matmul_forward(CTX, out->st->ptr, x->st->ptr, wptr(w), wptr(b), B, T, C, OC, dev.dt);
    if (ag_grad_enabled()) {
        ag_node *n = attach(out, "MatmulBackward", matmul_backward, x, NULL);
        ag_node_save(n, 0, x->st);
        n->p[0] = w;
        n->p[1] = b;
        n->C = C; /* in */
        n->OC = OC;
    }
    return out;
}

/* ---- attention ---- */

static void attention_backward(ag_node *n) {
    dt_storage *tmp = NULL;
    void *dqkv = DINP(n, 0, act_bytes(n, (size_t)n->B * n->T * 3 * n->C), &tmp);
    K->attention_backward(CTX, dqkv, n->grad->ptr, n->saved[0]->ptr, n->saved[1]->ptr, n->saved[2]->ptr, n->B,
                          n->T, n->C, n->NH, n->dt);
    storage_release(tmp);
}

dt_tensor *op_attention(dt_tensor *qkv, int NH) {
    int B = qkv->B, T = qkv->T, C = qkv->C / 3;
    dt_tensor *out = TENSOR_NEW(dev.dt, B, T, C, MEM_ACT); // (B,T,C)
    dt_storage *att = STORAGE_NEW((size_t)B * NH * T * T * kernels_dtype_size(dev.dt), MEM_ACT); // (B,NH,T,T)
    K->attention_forward(CTX, out->st->ptr, att->ptr, qkv->st->ptr, B, T, C, NH, dev.dt);
    if (ag_grad_enabled() && qkv->grad_fn) {
        ag_node *n = attach(out, "AttentionBackward", attention_backward, qkv, NULL);
        ag_node_save(n, 0, qkv->st);
        ag_node_save(n, 1, att);
        ag_node_save(n, 2, out->st);
        n->NH = NH;
    }
    storage_release(att);
    return out;
}

/* ---- gelu ---- */

static void gelu_backward(ag_node *n) {
    size_t N = (size_t)n->B * n->T * n->C;
    dt_storage *tmp = NULL;
    void *dinp = DINP(n, 0, act_bytes(n, N), &tmp);
    K->gelu_backward(CTX, dinp, n->saved[0]->ptr, n->grad->ptr, N, n->dt);
    storage_release(tmp);
}

dt_tensor *op_gelu(dt_tensor *x) {
    dt_tensor *out = TENSOR_NEW(dev.dt, x->B, x->T, x->C, MEM_ACT); // (B,T,C)
    K->gelu_forward(CTX, out->st->ptr, x->st->ptr, out->numel, dev.dt);
    if (ag_grad_enabled() && x->grad_fn) {
        ag_node *n = attach(out, "GeluBackward", gelu_backward, x, NULL);
        ag_node_save(n, 0, x->st);
    }
    return out;
}

/* ---- residual ---- */

static void residual_backward(ag_node *n) {
    size_t N = (size_t)n->B * n->T * n->C;
    dt_storage *t0 = NULL, *t1 = NULL;
    void *d0 = DINP(n, 0, act_bytes(n, N), &t0);
    void *d1 = DINP(n, 1, act_bytes(n, N), &t1);
    K->residual_backward(CTX, d0, d1, n->grad->ptr, N, n->dt);
    storage_release(t0);
    storage_release(t1);
}

dt_tensor *op_residual(dt_tensor *a, dt_tensor *b) {
    if (a->numel != b->numel) DT_FATAL("residual of %zu and %zu elements", a->numel, b->numel);
    dt_tensor *out = TENSOR_NEW(dev.dt, a->B, a->T, a->C, MEM_ACT); // (B,T,C)
    K->residual_forward(CTX, out->st->ptr, a->st->ptr, b->st->ptr, out->numel, dev.dt);
    if (ag_grad_enabled() && (a->grad_fn || b->grad_fn)) attach(out, "AddBackward", residual_backward, a, b);
    return out;
}

/* ---- cross-entropy, mean over positions ---- */

/* A device scalar allocated where this is written, its value also on the host. */
#define SCALAR_NEW(v)                                                                      \
    ({                                                                                     \
        float sc_v_ = (v);                                                                 \
        dt_tensor *sc_t_ = tensor_wrap(STORAGE_NEW(sizeof(float), MEM_DATA), KERNELS_F32, 1, 1, 1); \
        sc_t_->item = sc_v_;                                                               \
        dev_upload(sc_t_->st->ptr, &sc_v_, sizeof sc_v_);                                  \
        sc_t_;                                                                             \
    })

static void cross_entropy_backward(ag_node *n) {
    ag_node *prev = n->next[0];
    dt_storage *logits = n->saved[0];
    float scale = n->gscalar / (float)(n->B * n->T); /* d mean / d losses[b,t], times d root / d mean */
    if (prev->grad) DT_FATAL("logits used twice: cross-entropy writes their gradient");
    if (logits->refs == 1) {
        /* Nothing else holds the logits: write dlogits over them, as llm.c does, and
         * hand the buffer on as the gradient. */
        K->crossentropy_backward(CTX, logits->ptr, logits->ptr, n->saved[1]->ptr, scale, n->B, n->T, n->V, n->V,
                                 n->dt);
        prev->grad = logits;
        n->saved[0] = NULL;
    } else {
        void *dlogits = AG_GRAD(prev); /* the logits are kept elsewhere */
        K->crossentropy_backward(CTX, dlogits, logits->ptr, n->saved[1]->ptr, scale, n->B, n->T, n->V, n->V,
                                 n->dt);
    }
}

dt_tensor *op_cross_entropy(dt_tensor *logits, dt_storage *targets) {
    int B = logits->B, T = logits->T, V = logits->C;
    size_t BT = (size_t)B * T;
    dt_storage *losses = STORAGE_NEW(BT * sizeof(float), MEM_ACT); // (B,T)
    K->crossentropy_forward(CTX, losses->ptr, logits->st->ptr, targets->ptr, B, T, V, V, dev.dt);
    float *h = malloc(BT * sizeof *h);
    if (!h) DT_FATAL("out of host memory");
    dev_download(h, losses->ptr, BT * sizeof *h);
    storage_release(losses);
    double sum = 0;
    for (size_t i = 0; i < BT; i++) sum += h[i];
    free(h);
    dt_tensor *out = SCALAR_NEW((float)(sum / (double)BT));
    if (ag_grad_enabled() && logits->grad_fn) {
        ag_node *n = attach(out, "CrossEntropyBackward", cross_entropy_backward, logits, NULL);
        n->scalar = 1;
        n->dt = logits->dt;
        n->B = B;
        n->T = T;
        n->V = V;
        ag_node_save(n, 0, logits->st);
        ag_node_save(n, 1, targets);
    }
    return out;
}

/* ---- scalars ---- */

dt_tensor *op_scalar(float v) { return SCALAR_NEW(v); }

static void add_backward(ag_node *n) {
    for (int i = 0; i < 2; i++)
        if (n->next[i]) {
            n->next[i]->gscalar += n->gscalar;
            n->next[i]->has_gscalar = 1;
        }
}

dt_tensor *op_add(dt_tensor *a, dt_tensor *b) {
    if (a->numel != 1 || b->numel != 1) DT_FATAL("op_add takes scalars");
    dt_tensor *out = SCALAR_NEW(a->item + b->item);
    if (ag_grad_enabled() && (a->grad_fn || b->grad_fn)) attach(out, "AddBackward0", add_backward, a, b)->scalar = 1;
    return out;
}

static void scale_backward(ag_node *n) {
    n->next[0]->gscalar += n->gscalar * n->f;
    n->next[0]->has_gscalar = 1;
}

dt_tensor *op_scale(dt_tensor *a, float s) {
    if (a->numel != 1) DT_FATAL("op_scale takes a scalar");
    dt_tensor *out = SCALAR_NEW(a->item * s);
    if (ag_grad_enabled() && a->grad_fn) {
        ag_node *n = attach(out, "MulBackward0", scale_backward, a, NULL);
        n->scalar = 1;
        n->f = s;
    }
    return out;
}

/* ---- activation checkpointing ---- */

static void checkpoint_backward(ag_node *n) {
    /* The block's input again, as a leaf whose gradient lands in the buffer the
     * input's own node reads, then the block again, recorded, and back through it. */
    dt_tensor *x = tensor_wrap(storage_retain(n->saved[0]), n->dt, n->B, n->T, n->C);
    if (n->next[0]) x->grad_fn = ag_sink_new(n->next[0]);
    int prev = ag_set_grad_enabled(1);
    dt_tensor *y = n->block(n->ctx, n->layer, x);
    ag_set_grad_enabled(prev);
    tensor_release(x);
    ag_backward(y, n->grad);
    tensor_release(y);
}

dt_tensor *op_checkpoint(ag_block_fn *block, void *ctx, int layer, dt_tensor *x) {
    int record = ag_set_grad_enabled(0);
    dt_tensor *y = block(ctx, layer, x);
    ag_set_grad_enabled(record);
    if (record) {
        if (y->numel != x->numel) DT_FATAL("a checkpointed block must keep its input's shape");
        ag_node *n = attach(y, "CheckpointBackward", checkpoint_backward, x, NULL);
        ag_node_save(n, 0, x->st);
        n->block = block;
        n->ctx = ctx;
        n->layer = layer;
    }
    return y;
}
