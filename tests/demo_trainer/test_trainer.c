/* demo_trainer's techniques and autograd, on the simulated device with the CPU kernels:
 *   - accumulation: N micro-batches of B/N give the gradients of one batch of B (fp32
 *     tolerance), and without the loss division they come out N times too large;
 *   - checkpointing: gradients bitwise identical to the run without it (fp32, bf16);
 *   - bf16: the loss stays within a stated tolerance of fp32 over the same steps;
 *   - the loss falls on the synthetic corpus;
 *   - the autograd frees every activation once backward is done, and refuses a second
 *     backward through a released graph;
 *   - the planted leaks, as the device sees them: eval-grad and keep-outputs grow each
 *     step, loss-tensor stays flat on the device while graph nodes pile up on the host. */
#include <check.h>

#include "tests/check_run.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo_trainer/train.h"

/* Tiny enough for a fraction of a second per step on one core. */
static const gpt_config tiny = {.V = 256, .maxT = 16, .L = 2, .NH = 2, .C = 32};
enum { TB = 8, TT = 16 };

static void quiet(void) {
    if (!freopen("/dev/null", "w", stdout)) abort();
}

static void open_device(kernels_dtype dt) {
    quiet();
    ck_assert_int_eq(dev_open("cpu", dt, NULL), 0);
    ck_assert_msg(dev.sim, "these tests run on the simulated device (RUNPATH to build/sim)");
}

/* A batch of the synthetic corpus. */
static void batch(int *inp, int *tgt, int B, int T, uint64_t seed) {
    dt_data d;
    data_synthetic(&d);
    dt_rng r;
    dt_rng_seed(&r, seed);
    data_batch(&d, SPLIT_TRAIN, &r, B, T, inp, tgt);
    data_free(&d);
}

/* Every parameter gradient, concatenated, on the host. */
static float *grads(const gpt *m) {
    float *g = malloc(m->num_parameters * sizeof *g), *at = g;
    for (int i = 0; i < m->nparams; i++) {
        dev_download(at, m->params[i]->grad, m->params[i]->numel * sizeof(float));
        at += m->params[i]->numel;
    }
    return g;
}

static double max_abs(const float *x, size_t n) {
    double a = 0;
    for (size_t i = 0; i < n; i++) a = fmax(a, fabs(x[i]));
    return a;
}

/* max |a - s*b| over max |a| */
static double rel_err(const float *a, const float *b, double s, size_t n) {
    double e = 0;
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - s * b[i]));
    return e / max_abs(a, n);
}

START_TEST(accum_matches_one_batch) {
    open_device(KERNELS_F32);
    gpt m;
    gpt_init(&m, tiny, 7);
    int inp[TB * TT], tgt[TB * TT];
    batch(inp, tgt, TB, TT, 11);
    size_t n = m.num_parameters;

    float l1 = train_grads(&m, inp, tgt, TB, TT, 1, 1);
    float *g1 = grads(&m);
    float l4 = train_grads(&m, inp, tgt, TB, TT, 4, 1); /* 4 micro-batches of 2, loss / 4 */
    float *g4 = grads(&m);
    float l4n = train_grads(&m, inp, tgt, TB, TT, 4, 0); /* the bug: no division */
    float *g4n = grads(&m);

    double with_div = rel_err(g1, g4, 1.0, n);
    double without = rel_err(g1, g4n, 1.0, n);
    double without_over_4 = rel_err(g1, g4n, 0.25, n);
    fprintf(stderr, "accum: one batch of %d vs 4 micro-batches of %d: max |g1-g4|/max|g1| = %.2e (divided), "
                    "%.2e (not divided), %.2e (not divided, /4); losses %.6f %.6f %.6f\n",
            TB, TB / 4, with_div, without, without_over_4, l1, l4, l4n);
    ck_assert_msg(with_div < 1e-5, "accumulated gradients differ from one batch's: %g", with_div);
    ck_assert_msg(without > 2.5, "without the division the gradients should be 4x too large: %g", without);
    ck_assert_msg(without_over_4 < 1e-5, "without the division the gradients are 4x, exactly: %g", without_over_4);
    ck_assert_float_eq_tol(l1, l4, 1e-5f);
    free(g1);
    free(g4);
    free(g4n);
    gpt_free(&m);
    dev_close();
}
END_TEST

static void checkpoint_bitwise(kernels_dtype dt) {
    open_device(dt);
    gpt m;
    gpt_init(&m, tiny, 3);
    int inp[TB * TT], tgt[TB * TT];
    batch(inp, tgt, TB, TT, 5);
    float la = train_grads(&m, inp, tgt, TB, TT, 2, 1);
    float *ga = grads(&m);
    size_t peak_plain = dev.transient_peak;
    dev.transient_peak = 0;
    m.checkpoint = 1;
    float lb = train_grads(&m, inp, tgt, TB, TT, 2, 1);
    float *gb = grads(&m);
    size_t peak_ckpt = dev.transient_peak;
    ck_assert_msg(memcmp(ga, gb, m.num_parameters * sizeof *ga) == 0, "checkpointed gradients differ");
    ck_assert_msg(la == lb, "losses %.9g %.9g", la, lb);
    ck_assert_msg(max_abs(ga, m.num_parameters) > 0, "all-zero gradients prove nothing");
    ck_assert_msg(peak_ckpt < peak_plain, "checkpointing should lower the activation peak: %zu vs %zu", peak_ckpt,
                  peak_plain);
    free(ga);
    free(gb);
    gpt_free(&m);
    ck_assert_int_eq((long)dev.total, 0);
    dev_close();
}

START_TEST(checkpoint_bitwise_fp32) { checkpoint_bitwise(KERNELS_F32); }
END_TEST
START_TEST(checkpoint_bitwise_bf16) { checkpoint_bitwise(KERNELS_BF16); }
END_TEST

/* Runs `steps` of training (the program's own loop) and records the losses. */
static dt_result run(dt_args *a, float *losses, size_t *held, long *nodes) {
    dt_data d;
    data_synthetic(&d);
    gpt m;
    gpt_config cfg = {.V = 256, .maxT = a->T, .L = a->L, .NH = a->NH, .C = a->C};
    gpt_init(&m, cfg, a->seed);
    m.checkpoint = a->checkpoint;
    dt_result r = {.loss_trace = losses, .held_trace = held, .nodes_trace = nodes};
    dt_leaks leaks;
    train_run(a, &d, &m, &r, &leaks);
    trainer_free_leaks(&leaks);
    gpt_free(&m);
    data_free(&d);
    ck_assert_int_eq((long)dev.total, 0); /* everything given back */
    ck_assert_int_eq(dt_live_tensors, 0);
    ck_assert_int_eq(ag_live_nodes, 0);
    return r;
}

static dt_args small_args(int steps) {
    dt_args a;
    char *argv[] = {"demo_trainer", NULL};
    ck_assert_int_eq(args_parse(&a, 1, argv), 0);
    a.L = 2;
    a.C = 32;
    a.NH = 2;
    a.T = 32;
    a.B = 8;
    a.steps = steps;
    a.print_every = 1000;
    return a;
}

/* bf16 against fp32, same init and batches: the stated tolerance is 0.05 nats at every
 * step (measured: about 0.01 at most over these 30 steps). */
#define BF16_LOSS_TOL 0.05f
START_TEST(bf16_loss_close_to_fp32) {
    enum { S = 30 };
    float l32[S], l16[S];
    dt_args a = small_args(S);
    open_device(KERNELS_F32);
    run(&a, l32, NULL, NULL);
    dev_close();
    a.dt = KERNELS_BF16;
    ck_assert_int_eq(dev_open("cpu", KERNELS_BF16, NULL), 0);
    run(&a, l16, NULL, NULL);
    float worst = 0;
    for (int s = 0; s < S; s++) worst = fmaxf(worst, fabsf(l32[s] - l16[s]));
    fprintf(stderr, "bf16: loss %.4f -> %.4f (fp32 %.4f -> %.4f), largest step difference %.4f (tolerance %.2f)\n",
            l16[0], l16[S - 1], l32[0], l32[S - 1], worst, BF16_LOSS_TOL);
    ck_assert_msg(worst <= BF16_LOSS_TOL, "bf16 loss off fp32 by %.4f", worst);
    ck_assert_msg(worst > 0, "bf16 identical to fp32: is it running bf16 at all?");
    ck_assert_msg(l16[S - 1] < l16[0] - 1.0f, "bf16 did not learn");
    dev_close();
}
END_TEST

START_TEST(loss_falls_on_synthetic_corpus) {
    enum { S = 40 };
    float l[S];
    dt_args a = small_args(S);
    open_device(KERNELS_F32);
    dt_result r = run(&a, l, NULL, NULL);
    fprintf(stderr, "synthetic corpus: loss %.4f -> %.4f over %d steps (ln 256 = %.4f)\n", l[0], l[S - 1], S,
            log(256.0));
    ck_assert_msg(fabsf(l[0] - logf(256.0f)) < 0.2f, "first loss %.4f is not about ln 256", l[0]);
    ck_assert_msg(l[S - 1] < 3.0f, "loss %.4f after %d steps", l[S - 1], S);
    ck_assert_float_eq(r.final_loss, l[S - 1]);
    dev_close();
}
END_TEST

/* Forward with recording keeps activations; backward frees every one of them; the
 * graph (host) goes with the last tensor; no_grad keeps nothing. */
START_TEST(backward_frees_activations) {
    open_device(KERNELS_F32);
    gpt m;
    gpt_init(&m, tiny, 1);
    size_t persistent = dev.total;
    int inp[TB * TT], tgt[TB * TT];
    batch(inp, tgt, TB, TT, 2);
    dt_storage *tok = STORAGE_NEW(sizeof inp, MEM_DATA), *tg = STORAGE_NEW(sizeof tgt, MEM_DATA);
    dev_upload(tok->ptr, inp, sizeof inp);
    dev_upload(tg->ptr, tgt, sizeof tgt);

    dt_tensor *logits = gpt_forward(&m, tok, TB, TT);
    dt_tensor *loss = op_cross_entropy(logits, tg);
    tensor_release(logits);
    size_t held_graph = dev.total - persistent;
    long nodes = ag_live_nodes;
    ck_assert_int_eq(nodes, 1 + 10 * tiny.L + 2 + 1); /* embedding, 10 per block, lnf, head, loss */
    ag_backward(loss, NULL);
    /* only the batch and the loss scalar remain */
    ck_assert_int_eq((long)(dev.total - persistent), (long)(tok->bytes + tg->bytes + loss->st->bytes));
    ck_assert_int_eq(ag_live_nodes, nodes);          /* nodes stay while loss holds them */
    tensor_release(loss);
    ck_assert_int_eq(ag_live_nodes, 0);

    int prev = ag_set_grad_enabled(0);
    logits = gpt_forward(&m, tok, TB, TT);
    ck_assert_int_eq(ag_live_nodes, 0);
    ck_assert_int_eq((long)(dev.total - persistent), (long)(tok->bytes + tg->bytes + tensor_bytes(logits)));
    ck_assert_msg(held_graph > 4 * tensor_bytes(logits), "the recorded graph should hold far more than logits");
    tensor_release(logits);
    ag_set_grad_enabled(prev);
    storage_release(tok);
    storage_release(tg);
    gpt_free(&m);
    ck_assert_int_eq((long)dev.total, 0);
    ck_assert_int_eq(dt_live_storages, 0);
    dev_close();
}
END_TEST

/* As PyTorch: "Trying to backward through the graph a second time" (exit 1). */
START_TEST(second_backward_is_an_error) {
    open_device(KERNELS_F32);
    gpt m;
    gpt_init(&m, tiny, 1);
    int inp[TB * TT], tgt[TB * TT];
    batch(inp, tgt, TB, TT, 2);
    dt_storage *tok = STORAGE_NEW(sizeof inp, MEM_DATA), *tg = STORAGE_NEW(sizeof tgt, MEM_DATA);
    dev_upload(tok->ptr, inp, sizeof inp);
    dev_upload(tg->ptr, tgt, sizeof tgt);
    dt_tensor *logits = gpt_forward(&m, tok, TB, TT);
    dt_tensor *loss = op_cross_entropy(logits, tg);
    ag_backward(loss, NULL);
    ag_backward(loss, NULL); /* exits */
}
END_TEST

enum { LS = 6 };

static void leak_run(dt_leak leak, size_t *held, long *nodes, dt_args *out) {
    dt_args a = small_args(LS);
    a.leak = leak;
    a.eval_every = leak == LEAK_EVAL_GRAD ? 1 : 0;
    open_device(KERNELS_F32);
    run(&a, NULL, held, nodes);
    dev_close();
    *out = a;
    fprintf(stderr, "leak %-12s device held after each step:", dt_leak_names[leak]);
    for (int s = 0; s < LS; s++) fprintf(stderr, " %zu", held[s]);
    fprintf(stderr, "; nodes:");
    for (int s = 0; s < LS; s++) fprintf(stderr, " %ld", nodes[s]);
    fprintf(stderr, "\n");
}

START_TEST(leak_none_is_flat) {
    size_t held[LS];
    long nodes[LS];
    dt_args a;
    leak_run(LEAK_NONE, held, nodes, &a);
    for (int s = 1; s < LS; s++) ck_assert_int_eq((long)held[s], (long)held[0]);
    for (int s = 0; s < LS; s++) ck_assert_int_eq(nodes[s], 0);
}
END_TEST

START_TEST(leak_eval_grad_grows_each_step) {
    size_t held[LS];
    long nodes[LS];
    dt_args a;
    leak_run(LEAK_EVAL_GRAD, held, nodes, &a);
    size_t per = held[1] - held[0];
    /* a validation graph holds every block's saved activations: far more than logits */
    size_t logits = (size_t)2 * a.B * (a.T / 2) * 256 * sizeof(float);
    ck_assert_msg(per > 2 * logits, "eval-grad grew only %zu per step", per);
    for (int s = 1; s < LS; s++) ck_assert_int_eq((long)(held[s] - held[s - 1]), (long)per);
    for (int s = 1; s < LS; s++) ck_assert_int_gt(nodes[s], nodes[s - 1]);
}
END_TEST

START_TEST(leak_keep_outputs_grows_by_the_logits) {
    size_t held[LS];
    long nodes[LS];
    dt_args a;
    leak_run(LEAK_KEEP_OUTPUTS, held, nodes, &a);
    for (int s = 1; s < LS; s++)
        ck_assert_int_eq((long)(held[s] - held[s - 1]), (long)a.B * a.T * 256 * (long)sizeof(float));
}
END_TEST

START_TEST(leak_loss_tensor_flat_on_device) {
    size_t held[LS];
    long nodes[LS];
    dt_args a;
    leak_run(LEAK_LOSS_TENSOR, held, nodes, &a);
    for (int s = 1; s < LS; s++) ck_assert_int_eq((long)held[s], (long)held[0]); /* flat on the device */
    long per = nodes[1] - nodes[0];
    ck_assert_int_gt(per, 10 * a.L);                                   /* a whole graph's nodes a step */
    for (int s = 1; s < LS; s++) ck_assert_int_eq(nodes[s] - nodes[s - 1], per); /* piling up on the host */
}
END_TEST

START_TEST(args_reject_bad_input) {
    quiet();
    dt_args a;
    char *bad1[] = {"demo_trainer", "--precision", "fp16", NULL};
    ck_assert_int_eq(args_parse(&a, 3, bad1), 2);
    char *bad2[] = {"demo_trainer", "--batch", "6", "--accum", "4", NULL};
    ck_assert_int_eq(args_parse(&a, 5, bad2), 2);
    char *bad3[] = {"demo_trainer", "--channels", "64", "--heads", "5", NULL};
    ck_assert_int_eq(args_parse(&a, 5, bad3), 2);
    char *bad4[] = {"demo_trainer", "--leak", "everything", NULL};
    ck_assert_int_eq(args_parse(&a, 3, bad4), 2);
    char *bad5[] = {"demo_trainer", "--layers", NULL};
    ck_assert_int_eq(args_parse(&a, 2, bad5), 2);
    char *ok[] = {"demo_trainer", "--leak", "eval-grad", "--capacity", "64MiB", "--sweep", NULL};
    ck_assert_int_eq(args_parse(&a, 6, ok), 0);
    ck_assert_int_eq(a.eval_every, 1); /* eval-grad validates every step unless told */
    ck_assert_uint_eq(a.capacity, 64u << 20);
}
END_TEST

int main(void) {
    Suite *s = suite_create("demo_trainer");
    TCase *tc = tcase_create("techniques");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, accum_matches_one_batch);
    tcase_add_test(tc, checkpoint_bitwise_fp32);
    tcase_add_test(tc, checkpoint_bitwise_bf16);
    tcase_add_test(tc, bf16_loss_close_to_fp32);
    tcase_add_test(tc, loss_falls_on_synthetic_corpus);
    suite_add_tcase(s, tc);
    tc = tcase_create("autograd");
    tcase_add_test(tc, backward_frees_activations);
    tcase_add_exit_test(tc, second_backward_is_an_error, 1);
    tcase_add_test(tc, args_reject_bad_input);
    suite_add_tcase(s, tc);
    tc = tcase_create("leaks");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, leak_none_is_flat);
    tcase_add_test(tc, leak_eval_grad_grows_each_step);
    tcase_add_test(tc, leak_keep_outputs_grows_by_the_logits);
    tcase_add_test(tc, leak_loss_tensor_flat_on_device);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
