/* The training loop: micro-batches, accumulation, the optimizer step, the validation
 * pass, the planted retention bugs, iteration marks, and the measurements. */
#ifndef DT_TRAIN_H
#define DT_TRAIN_H

#include "demo_trainer/args.h"
#include "demo_trainer/data.h"
#include "demo_trainer/optim.h"

typedef struct dt_result {
    int steps;
    double step_ms;             /* mean over steps 2.. (step 1 alone when there is one) */
    double tokens_per_s;
    float first_loss, final_loss;
    float val_loss;             /* mean of the validation passes; NAN without any */
    size_t peak_allocated, peak_reserved;
    int from_cudalloc;          /* the two peaks are cudalloc's */
    size_t peak_activations;    /* the trainer's own count: activations, their grads, batches */
    size_t persistent;          /* params, bf16 copies, grads, AdamW state at the end */
    size_t held_first, held_last;   /* device bytes held between steps: after step 1, at the end */
    long nodes_first, nodes_last;   /* graph nodes alive (host) at the same points */
    double mfu;                 /* model FLOPs utilization, 0..1; < 0 when not on a GPU */
    /* Optional, set by the caller before train_run (kept): per step s (from 1), the
     * loss, the device bytes held after the step, and the graph nodes alive. */
    float *loss_trace;
    size_t *held_trace;
    long *nodes_trace;
} dt_result;

/* What the planted bugs keep alive, released by trainer_free_leaks (the program
 * itself exits with them, as a Python process would). */
typedef struct dt_leaks {
    dt_tensor **kept;           /* keep-outputs: every step's logits */
    size_t nkept, cap;
    dt_tensor *running_loss;    /* loss-tensor */
    dt_tensor *val_total;       /* eval-grad */
} dt_leaks;

/* Train m on d as a says, printing a line each print_every steps and a summary.
 * r's loss_trace, held_trace and nodes_trace are read first: each NULL or an
 * array of a->steps to fill; the rest of *r is written. */
void train_run(const dt_args *a, const dt_data *d, gpt *m, dt_result *r, dt_leaks *leaks);
void trainer_free_leaks(dt_leaks *leaks);

/* The gradients of one optimizer step on inputs/targets (B,T) (host arrays): zeroed,
 * then accum micro-batches of B/accum rows, each loss multiplied by 1/accum when
 * divide is set (the right way) or by 1 (the bug). Returns the mean loss. */
float train_grads(gpt *m, const int *inputs, const int *targets, int B, int T, int accum, int divide);

/* Model FLOPs per token, as llm.c counts them: 6 N + 6 L C T. */
double train_flops_per_token(const gpt *m, int T);

#endif
