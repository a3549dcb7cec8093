/* AdamW (see optim.h). */
#include "demo_trainer/optim.h"

void adamw_init(adamw *o, float lr) {
    *o = (adamw){.lr = lr, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f, .t = 0};
}

void adamw_zero_grad(gpt *m) {
    for (int i = 0; i < m->nparams; i++) dev_memset0(m->params[i]->grad, m->params[i]->numel * sizeof(float));
}

/* m and v of one parameter, made at the first step and zeroed. */
DT_NOINLINE static void adamw_state(dt_param *p) {
    size_t bytes = p->numel * sizeof(float);
    p->m = DEV_ALLOC(bytes, MEM_OPTIM);
    p->v = DEV_ALLOC(bytes, MEM_OPTIM);
    dev_memset0(p->m, bytes);
    dev_memset0(p->v, bytes);
}

void adamw_step(adamw *o, gpt *m) {
    o->t++;
    for (int i = 0; i < m->nparams; i++) {
        dt_param *p = m->params[i];
        if (!p->m) adamw_state(p);
        dev.k->adamw_update(&dev.ctx, p->w, p->grad, p->m, p->v, p->numel, o->lr, o->beta1, o->beta2, o->eps,
                            o->weight_decay, 1.0f, o->t);
    }
    gpt_refresh_copies(m);
}
