/* The model: parameters, initialization, forward (see model.h). */
#include "demo_trainer/model.h"

#include <math.h>
#include <string.h>

/* Persistent memory: weights, gradients and bf16 copies, allocated once here. */
DT_NOINLINE static void param_alloc(dt_param *p, const char *name, int rows, int cols, int lowp) {
    memset(p, 0, sizeof *p);
    p->name = name;
    p->rows = rows;
    p->cols = cols;
    p->numel = (size_t)rows * cols;
    p->w = DEV_ALLOC(p->numel * sizeof(float), MEM_PARAM);
    p->grad = DEV_ALLOC(p->numel * sizeof(float), MEM_GRAD);
    dev_memset0(p->grad, p->numel * sizeof(float));
    if (lowp && dev.dt == KERNELS_BF16)
        p->lp = DEV_ALLOC(p->numel * sizeof(kernels_bf16), MEM_WCOPY);
}

static void param_fill(dt_param *p, dt_rng *rng, float std, float constant, float *host) {
    for (size_t i = 0; i < p->numel; i++) host[i] = std > 0 ? std * dt_rng_normal(rng) : constant;
    dev_upload(p->w, host, p->numel * sizeof(float));
}

static void param_free(dt_param *p) {
    dev_release(p->w, p->numel * sizeof(float), MEM_PARAM);
    dev_release(p->grad, p->numel * sizeof(float), MEM_GRAD);
    dev_release(p->m, p->numel * sizeof(float), MEM_OPTIM);
    dev_release(p->v, p->numel * sizeof(float), MEM_OPTIM);
    dev_release(p->lp, p->numel * sizeof(kernels_bf16), MEM_WCOPY);
}

void gpt_init(gpt *m, gpt_config cfg, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->cfg = cfg;
    int V = cfg.V, C = cfg.C, L = cfg.L;
    m->h = calloc((size_t)L, sizeof *m->h);
    m->params = calloc((size_t)(4 + 12 * L), sizeof *m->params);
    if (!m->h || !m->params) DT_FATAL("out of host memory");
#define ADD(p, name, rows, cols, lowp)            \
    do {                                          \
        param_alloc((p), (name), (rows), (cols), (lowp)); \
        m->params[m->nparams++] = (p);            \
        m->num_parameters += (p)->numel;          \
    } while (0)
    ADD(&m->wte, "wte", V, C, 1); /* also the LM head's weight */
    ADD(&m->wpe, "wpe", cfg.maxT, C, 0);
    for (int l = 0; l < L; l++) {
        gpt_block *b = &m->h[l];
        ADD(&b->ln1w, "ln1w", 1, C, 0);
        ADD(&b->ln1b, "ln1b", 1, C, 0);
        ADD(&b->qkvw, "qkvw", 3 * C, C, 1);
        ADD(&b->qkvb, "qkvb", 1, 3 * C, 1);
        ADD(&b->attprojw, "attprojw", C, C, 1);
        ADD(&b->attprojb, "attprojb", 1, C, 1);
        ADD(&b->ln2w, "ln2w", 1, C, 0);
        ADD(&b->ln2b, "ln2b", 1, C, 0);
        ADD(&b->fcw, "fcw", 4 * C, C, 1);
        ADD(&b->fcb, "fcb", 1, 4 * C, 1);
        ADD(&b->fcprojw, "fcprojw", C, 4 * C, 1);
        ADD(&b->fcprojb, "fcprojb", 1, C, 1);
    }
    ADD(&m->lnfw, "lnfw", 1, C, 0);
    ADD(&m->lnfb, "lnfb", 1, C, 0);
#undef ADD

    size_t most = 0;
    for (int i = 0; i < m->nparams; i++)
        if (m->params[i]->numel > most) most = m->params[i]->numel;
    float *host = malloc(most * sizeof *host);
    if (!host) DT_FATAL("out of host memory");
    dt_rng rng;
    dt_rng_seed(&rng, seed);
    float resid_std = 0.02f / sqrtf(2.0f * (float)L);
    param_fill(&m->wte, &rng, 0.02f, 0, host);
    param_fill(&m->wpe, &rng, 0.01f, 0, host);
    for (int l = 0; l < L; l++) {
        gpt_block *b = &m->h[l];
        param_fill(&b->ln1w, &rng, 0, 1, host);
        param_fill(&b->ln1b, &rng, 0, 0, host);
        param_fill(&b->qkvw, &rng, 0.02f, 0, host);
        param_fill(&b->qkvb, &rng, 0, 0, host);
        param_fill(&b->attprojw, &rng, resid_std, 0, host);
        param_fill(&b->attprojb, &rng, 0, 0, host);
        param_fill(&b->ln2w, &rng, 0, 1, host);
        param_fill(&b->ln2b, &rng, 0, 0, host);
        param_fill(&b->fcw, &rng, 0.02f, 0, host);
        param_fill(&b->fcb, &rng, 0, 0, host);
        param_fill(&b->fcprojw, &rng, resid_std, 0, host);
        param_fill(&b->fcprojb, &rng, 0, 0, host);
    }
    param_fill(&m->lnfw, &rng, 0, 1, host);
    param_fill(&m->lnfb, &rng, 0, 0, host);
    free(host);
    gpt_refresh_copies(m);
}

void gpt_free(gpt *m) {
    for (int i = 0; i < m->nparams; i++) param_free(m->params[i]);
    free(m->params);
    free(m->h);
    memset(m, 0, sizeof *m);
}

void gpt_refresh_copies(gpt *m) {
    for (int i = 0; i < m->nparams; i++) {
        dt_param *p = m->params[i];
        if (p->lp) dev.k->cast_f32_to_bf16(&dev.ctx, p->lp, p->w, p->numel);
    }
}

dt_tensor *gpt_block_forward(void *model, int layer, dt_tensor *x) {
    gpt *m = model;
    gpt_block *b = &m->h[layer];
    dt_tensor *h = op_layernorm(x, &b->ln1w, &b->ln1b);        // (B,T,C)
    dt_tensor *qkv = op_matmul(h, &b->qkvw, &b->qkvb);         // (B,T,3C)
    tensor_release(h);
    dt_tensor *atty = op_attention(qkv, m->cfg.NH);            // (B,T,C)
    tensor_release(qkv);
    dt_tensor *attproj = op_matmul(atty, &b->attprojw, &b->attprojb); // (B,T,C)
    tensor_release(atty);
    dt_tensor *x2 = op_residual(x, attproj);                   // (B,T,C)
    tensor_release(attproj);
    dt_tensor *h2 = op_layernorm(x2, &b->ln2w, &b->ln2b);      // (B,T,C)
    dt_tensor *fch = op_matmul(h2, &b->fcw, &b->fcb);          // (B,T,4C)
    tensor_release(h2);
    dt_tensor *fch_gelu = op_gelu(fch);                        // (B,T,4C)
    tensor_release(fch);
    dt_tensor *fcproj = op_matmul(fch_gelu, &b->fcprojw, &b->fcprojb); // (B,T,C)
    tensor_release(fch_gelu);
    dt_tensor *out = op_residual(x2, fcproj);                  // (B,T,C)
    tensor_release(x2);
    tensor_release(fcproj);
    return out;
}

dt_tensor *gpt_forward(gpt *m, dt_storage *tokens, int B, int T) {
    dt_tensor *x = op_embedding(tokens, B, T, &m->wte, &m->wpe); // (B,T,C)
    for (int l = 0; l < m->cfg.L; l++) {
        dt_tensor *y = m->checkpoint ? op_checkpoint(gpt_block_forward, m, l, x) : gpt_block_forward(m, l, x);
        tensor_release(x);
        x = y;
    }
    dt_tensor *xf = op_layernorm(x, &m->lnfw, &m->lnfb);       // (B,T,C)
    tensor_release(x);
    dt_tensor *logits = op_matmul(xf, &m->wte, NULL);          // (B,T,V)
    tensor_release(xf);
    return logits;
}
