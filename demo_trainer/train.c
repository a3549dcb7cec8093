/* The training loop (see train.h). */
#include "demo_trainer/train.h"

#include <math.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#include "include/cudalloc.h"

/* A batch on the device: tokens and targets (B,T) int. */
DT_NOINLINE static dt_storage *load_batch(const int *host, int B, int T) {
    size_t bytes = (size_t)B * T * sizeof(int);
    dt_storage *s = STORAGE_NEW(bytes, MEM_DATA);
    dev_upload(s->ptr, host, bytes);
    return s;
}

/* One micro-batch: forward, the mean loss, backward of loss * scale. Returns the
 * loss (the caller's); *keep, when given, gets a reference to the logits. */
DT_NOINLINE static dt_tensor *micro_step(gpt *m, const int *inputs, const int *targets, int B, int T, float scale,
                             dt_tensor **keep) {
    dt_storage *tok = load_batch(inputs, B, T);
    dt_storage *tgt = load_batch(targets, B, T);
    dev.phase = "forward";
    dt_tensor *logits = gpt_forward(m, tok, B, T);          // (B,T,V)
    dt_tensor *loss = op_cross_entropy(logits, tgt);        // scalar
    if (keep) *keep = tensor_retain(logits);
    tensor_release(logits);
    storage_release(tok);
    storage_release(tgt);
    dev_sample_usage(); /* the peak of a step is about here */
    dev.phase = "backward";
    if (scale != 1.0f) {
        dt_tensor *scaled = op_scale(loss, scale);          // loss / accum
        ag_backward(scaled, NULL);
        tensor_release(scaled);
    } else {
        ag_backward(loss, NULL);
    }
    return loss;
}

float train_grads(gpt *m, const int *inputs, const int *targets, int B, int T, int accum, int divide) {
    adamw_zero_grad(m);
    int mb = B / accum;
    double sum = 0;
    for (int i = 0; i < accum; i++) {
        size_t off = (size_t)i * mb * T;
        dt_tensor *loss = micro_step(m, inputs + off, targets + off, mb, T, divide ? 1.0f / accum : 1.0f, NULL);
        sum += loss->item;
        tensor_release(loss);
    }
    return (float)(sum / accum);
}

double train_flops_per_token(const gpt *m, int T) {
    return 6.0 * (double)m->num_parameters + 6.0 * m->cfg.L * m->cfg.C * (double)T;
}

/* The dense peak of the device for the precision, from its name (TFLOP/s), or 0. */
static double known_peak_tflops(kernels_dtype dt) {
    if (strstr(dev.name, "H100") || strstr(dev.name, "H200") || strstr(dev.name, "H800") ||
        strstr(dev.name, "GH200"))
        return dt == KERNELS_BF16 ? 989.4 : 66.9; /* SXM: bf16 tensor cores; fp32 without TF32 */
    if (strstr(dev.name, "A100")) return dt == KERNELS_BF16 ? 312.0 : 19.5;
    return 0;
}

static void keep(dt_leaks *l, dt_tensor *t) {
    if (l->nkept == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->kept = realloc(l->kept, l->cap * sizeof *l->kept);
        if (!l->kept) DT_FATAL("out of host memory");
    }
    l->kept[l->nkept++] = t;
}

void trainer_free_leaks(dt_leaks *l) {
    for (size_t i = 0; i < l->nkept; i++) tensor_release(l->kept[i]);
    free(l->kept);
    tensor_release(l->running_loss);
    tensor_release(l->val_total);
    memset(l, 0, sizeof *l);
}

/* The validation pass, with another shape than training: batch 2*mb, sequence T/2.
 * Correct: under no_grad, the loss read as a number. eval-grad: recording stays on
 * and val_total = val_total + val_loss holds each pass's graph. */
DT_NOINLINE static float evaluate(const dt_args *a, const dt_data *d, gpt *m, dt_rng *rng, dt_leaks *leaks) {
    int B = 2 * (a->B / a->accum), T = a->T / 2 > 1 ? a->T / 2 : 2;
    int *inp = malloc((size_t)B * T * sizeof *inp), *tgt = malloc((size_t)B * T * sizeof *tgt);
    if (!inp || !tgt) DT_FATAL("out of host memory");
    data_batch(d, SPLIT_VAL, rng, B, T, inp, tgt);
    int bug = a->leak == LEAK_EVAL_GRAD;
    int prev = ag_set_grad_enabled(bug);
    dev.phase = "eval";
    dt_storage *tok = load_batch(inp, B, T), *tg = load_batch(tgt, B, T);
    dt_tensor *logits = gpt_forward(m, tok, B, T);
    dt_tensor *val_loss = op_cross_entropy(logits, tg);
    tensor_release(logits);
    storage_release(tok);
    storage_release(tg);
    float v = val_loss->item;
    dev_sample_usage();
    if (bug) {
        if (!leaks->val_total) leaks->val_total = op_scalar(0.0f);
        dt_tensor *sum = op_add(leaks->val_total, val_loss); /* val_total = val_total + val_loss */
        tensor_release(leaks->val_total);
        leaks->val_total = sum;
    }
    tensor_release(val_loss);
    ag_set_grad_enabled(prev);
    free(inp);
    free(tgt);
    return v;
}

static void print_step(const dt_args *a, int step, float loss, double ms, double tps, double mfu) {
    dev_mem_stats s;
    dev_stats(&s);
    printf("step %4d/%d | loss %.4f | %8.1f ms | %9.0f tok/s | peak alloc %s | peak reserved %s", step, a->steps,
           loss, ms, tps, SZ(s.allocated_peak), SZ(s.reserved_peak));
    if (mfu >= 0) printf(" | MFU %.1f%%", 100 * mfu);
    printf("\n");
    fflush(stdout);
}

static void print_leak(const dt_args *a, const dt_result *r) {
    int n = r->steps > 1 ? r->steps - 1 : 1;
    double grow = ((double)r->held_last - (double)r->held_first) / n;
    double nodes = (double)(r->nodes_last - r->nodes_first) / n;
    printf("leak %s: device memory held between steps %s after step 1, %s after step %d (%+.0f B per step); "
           "graph nodes alive %ld -> %ld (%+.1f per step, %s of host memory)\n",
           dt_leak_names[a->leak], SZ(r->held_first), SZ(r->held_last), r->steps, grow, r->nodes_first,
           r->nodes_last, nodes, SZ((size_t)r->nodes_last * AG_NODE_BYTES));
    switch (a->leak) {
    case LEAK_NONE:
        printf("leak none: nothing planted; memory held between steps should stay flat after step 1\n");
        break;
    case LEAK_EVAL_GRAD:
        printf("leak eval-grad: validation ran with grad recording on and val_total = val_total + val_loss holds "
               "every validation graph and the activations it saved: device memory grows by about %s per "
               "validation pass (every %d steps); an OOM is a matter of time\n",
               SZ((size_t)(grow > 0 ? grow * a->eval_every : 0)), a->eval_every);
        break;
    case LEAK_KEEP_OUTPUTS:
        printf("leak keep-outputs: each step's logits, (B,T,V) = %s a micro-batch, stay in a list: device "
               "memory grows by that every micro-batch; an OOM is a matter of time\n",
               SZ((size_t)(a->B / a->accum) * a->T * 256 * kernels_dtype_size(a->dt)));
        break;
    case LEAK_LOSS_TENSOR:
        printf("leak loss-tensor: running_loss = running_loss + loss keeps each step's graph nodes (host "
               "memory); backward had already freed what they saved, so device memory stays flat apart from "
               "the one scalar: this one never OOMs the device\n");
        break;
    }
}

void train_run(const dt_args *a, const dt_data *d, gpt *m, dt_result *r, dt_leaks *leaks) {
    float *loss_trace = r->loss_trace;
    size_t *held_trace = r->held_trace;
    long *nodes_trace = r->nodes_trace;
    memset(r, 0, sizeof *r);
    r->loss_trace = loss_trace;
    r->held_trace = held_trace;
    r->nodes_trace = nodes_trace;
    memset(leaks, 0, sizeof *leaks);
    r->val_loss = NAN;
    r->mfu = -1;
    adamw opt;
    adamw_init(&opt, a->lr);
    dt_rng rng, vrng, srng;
    dt_rng_seed(&rng, a->seed * 2 + 1);
    dt_rng_seed(&vrng, a->seed * 2 + 2);
    dt_rng_seed(&srng, a->seed * 2 + 3);
    int mb = a->B / a->accum;
    int *inp = malloc((size_t)a->B * a->T * sizeof *inp), *tgt = malloc((size_t)a->B * a->T * sizeof *tgt);
    if (!inp || !tgt) DT_FATAL("out of host memory");
    double peak_tflops = a->peak_tflops > 0 ? a->peak_tflops : known_peak_tflops(a->dt);
    int on_gpu = !strcmp(dev.k->name, "cuda");
    double time_sum = 0, tokens_sum = 0, val_sum = 0;
    int timed = 0, evals = 0;

    for (int step = 1; step <= a->steps; step++) {
        dev.step = step;
        nvtxRangePushA("step");
        double t0 = dt_now();
        int T = a->T;
        if (a->vary_seq) {
            int lo = a->T / 4 > 1 ? a->T / 4 : 2;
            T = lo + (int)(dt_rng_u32(&srng) % (uint32_t)(a->T - lo + 1));
        }
        adamw_zero_grad(m);
        double loss_sum = 0;
        for (int i = 0; i < a->accum; i++) {
            data_batch(d, SPLIT_TRAIN, &rng, mb, T, inp, tgt);
            dt_tensor *logits = NULL;
            dt_tensor *loss = micro_step(m, inp, tgt, mb, T, 1.0f / a->accum,
                                         a->leak == LEAK_KEEP_OUTPUTS ? &logits : NULL);
            loss_sum += loss->item;
            if (logits) keep(leaks, logits); /* outputs.append(logits) */
            if (a->leak == LEAK_LOSS_TENSOR) { /* running_loss += loss */
                if (!leaks->running_loss) leaks->running_loss = op_scalar(0.0f);
                dt_tensor *sum = op_add(leaks->running_loss, loss);
                tensor_release(leaks->running_loss);
                leaks->running_loss = sum;
            }
            tensor_release(loss);
        }
        dev.phase = "optimizer";
        adamw_step(&opt, m);
        dev_sync();
        dev_sample_usage();
        double ms = 1e3 * (dt_now() - t0);
        float loss = (float)(loss_sum / a->accum);
        if (step == 1) r->first_loss = loss;
        r->final_loss = loss;
        if (a->eval_every && step % a->eval_every == 0) {
            val_sum += evaluate(a, d, m, &vrng, leaks);
            evals++;
            dev.phase = "empty_cache";
            dev_empty_cache();
        }
        nvtxRangePop();
        CUDALLOC_CALL(cudalloc_step);

        double tokens = (double)a->B * T;
        if (step > 1 || a->steps == 1) {
            time_sum += ms;
            tokens_sum += tokens;
            timed++;
        }
        double mfu = on_gpu && peak_tflops > 0 ? train_flops_per_token(m, T) * tokens / (ms * 1e-3) / (peak_tflops * 1e12)
                                               : -1;
        if (loss_trace) loss_trace[step - 1] = loss;
        if (held_trace) held_trace[step - 1] = dev.total;
        if (nodes_trace) nodes_trace[step - 1] = ag_live_nodes;
        if (step == 1) {
            r->held_first = dev.total;
            r->nodes_first = ag_live_nodes;
        }
        if (step % a->print_every == 0 || step == a->steps || step == 1)
            print_step(a, step, loss, ms, tokens / (ms * 1e-3), mfu);
        r->steps = step;
    }
    free(inp);
    free(tgt);

    r->step_ms = timed ? time_sum / timed : 0;
    r->tokens_per_s = time_sum > 0 ? tokens_sum / (time_sum * 1e-3) : 0;
    if (on_gpu && peak_tflops > 0 && r->step_ms > 0)
        r->mfu = train_flops_per_token(m, a->T) * a->B * a->T / (r->step_ms * 1e-3) / (peak_tflops * 1e12);
    if (evals) r->val_loss = (float)(val_sum / evals);
    dev_mem_stats s;
    dev_stats(&s);
    r->peak_allocated = s.allocated_peak;
    r->peak_reserved = s.reserved_peak;
    r->from_cudalloc = s.from_cudalloc;
    r->peak_activations = dev.transient_peak;
    r->persistent = dev.bytes[MEM_PARAM] + dev.bytes[MEM_WCOPY] + dev.bytes[MEM_GRAD] + dev.bytes[MEM_OPTIM];
    r->held_last = dev.total;
    r->nodes_last = ag_live_nodes;

    printf("summary: %d steps, loss %.4f -> %.4f", r->steps, r->first_loss, r->final_loss);
    if (evals) printf(" (validation %.4f over %d passes)", r->val_loss, evals);
    printf(", %.1f ms/step, %.0f tok/s", r->step_ms, r->tokens_per_s);
    if (r->mfu >= 0) printf(", MFU %.1f%% of %.0f TFLOP/s", 100 * r->mfu, peak_tflops);
    printf("\nsummary: peak allocated %s, peak reserved %s (%s); activations peak %s; params+grads+optimizer %s\n",
           SZ(r->peak_allocated), SZ(r->peak_reserved), r->from_cudalloc ? "cudalloc" : "device",
           SZ(r->peak_activations), SZ(r->persistent));
    print_leak(a, r);
    fflush(stdout);
}
