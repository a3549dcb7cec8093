/* AdamW over the model's parameters, fp32 master weights and fp32 state (m, v). The
 * state is allocated at the first step, as torch.optim does it. */
#ifndef DT_OPTIM_H
#define DT_OPTIM_H

#include "demo_trainer/model.h"

typedef struct adamw {
    float lr, beta1, beta2, eps, weight_decay;
    int t;              /* steps taken */
} adamw;

void adamw_init(adamw *o, float lr);
/* Gradients to zero (before the first micro-batch of a step). */
void adamw_zero_grad(gpt *m);
/* One update from the accumulated gradients; refreshes the bf16 copies. */
void adamw_step(adamw *o, gpt *m);

#endif
