/* Every CPU backward against central differences of its forward.
 *
 * The scalar loss is L = sum(out * r) for fixed random r, accumulated in double, so
 * dL/dout = r is what each backward receives; every input and weight element is
 * perturbed by +-EPS and (L+ - L-) / (2 EPS) is compared with the analytic gradient.
 * Gradient buffers start from random values, not zero, so the check also proves the
 * backward adds (+=) rather than overwrites. The last test corrupts one gradient by a
 * few percent and requires the check to catch exactly that element: the tolerance
 * is tight enough to fail. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/kernels/kt.h"

#define EPS 1e-2f
#define ATOL 1e-4
#define RTOL 1e-3

enum { B = 2, T = 5, C = 8, NH = 2, OC = 12, V = 11, VP = 16, MAXT = 7 };

static kernels_ctx ctx;

/* analytic = after - before, freeing nothing. */
static float *delta(const float *after, const float *before, size_t n) {
    float *d = kt_new(n, 0.0f);
    for (size_t i = 0; i < n; i++)
        d[i] = after[i] - before[i];
    return d;
}

/* ---- matmul ---- */
typedef struct mm_case {
    float *inp, *w, *bias, *out, *r;
    int use_bias;
} mm_case;

static double mm_loss(void *u) {
    mm_case *c = u;
    cpu_matmul_forward(&ctx, c->out, c->inp, c->w, c->use_bias ? c->bias : NULL, B, T, C, OC, KERNELS_F32);
    return kt_dot(c->out, c->r, (size_t)B * T * OC);
}

static void check_matmul(int use_bias, int want_dinp) {
    kt_seed(100 + use_bias);
    size_t ni = (size_t)B * T * C, nw = (size_t)OC * C, no = (size_t)B * T * OC;
    mm_case c = {kt_new(ni, 1), kt_new(nw, 1), kt_new(OC, 1), kt_new(no, 0), kt_new(no, 1), use_bias};
    float *dinp0 = kt_new(ni, 1), *dw0 = kt_new(nw, 1), *db0 = kt_new(OC, 1);
    float *dinp = kt_copy(dinp0, ni), *dw = kt_copy(dw0, nw), *db = kt_copy(db0, OC);
    cpu_matmul_backward(&ctx, want_dinp ? dinp : NULL, dw, use_bias ? db : NULL, c.r, c.inp, c.w, B, T, C, OC, KERNELS_F32);
    float *gi = delta(dinp, dinp0, ni), *gw = delta(dw, dw0, nw), *gb = delta(db, db0, OC);
    if (want_dinp)
        kt_assert_gc("matmul dinp", kt_gradcheck(c.inp, ni, gi, mm_loss, &c, EPS, ATOL, RTOL));
    else
        ck_assert_mem_eq(dinp, dinp0, ni * sizeof(float)); /* NULL dinp: nothing written */
    kt_assert_gc("matmul dweight", kt_gradcheck(c.w, nw, gw, mm_loss, &c, EPS, ATOL, RTOL));
    if (use_bias)
        kt_assert_gc("matmul dbias", kt_gradcheck(c.bias, OC, gb, mm_loss, &c, EPS, ATOL, RTOL));
    else
        ck_assert_mem_eq(db, db0, OC * sizeof(float));
    free(c.inp), free(c.w), free(c.bias), free(c.out), free(c.r);
    free(dinp0), free(dw0), free(db0), free(dinp), free(dw), free(db), free(gi), free(gw), free(gb);
}

START_TEST(matmul_with_bias) { check_matmul(1, 1); }
END_TEST
START_TEST(matmul_no_bias_no_dinp) { check_matmul(0, 0); }
END_TEST

/* ---- embedding ---- */
typedef struct emb_case {
    int inp[B * T];
    float *wte, *wpe, *out, *r;
} emb_case;

static double emb_loss(void *u) {
    emb_case *c = u;
    cpu_embedding_forward(&ctx, c->out, c->inp, c->wte, c->wpe, B, T, C, KERNELS_F32);
    return kt_dot(c->out, c->r, (size_t)B * T * C);
}

START_TEST(embedding) {
    kt_seed(200);
    emb_case c;
    for (int i = 0; i < B * T; i++)
        c.inp[i] = (i * 7) % 4; /* tokens repeat: their gradients must add up */
    c.wte = kt_new((size_t)V * C, 1), c.wpe = kt_new((size_t)MAXT * C, 1);
    c.out = kt_new((size_t)B * T * C, 0), c.r = kt_new((size_t)B * T * C, 1);
    float *dte0 = kt_new((size_t)V * C, 1), *dpe0 = kt_new((size_t)MAXT * C, 1);
    float *dte = kt_copy(dte0, (size_t)V * C), *dpe = kt_copy(dpe0, (size_t)MAXT * C);
    cpu_embedding_backward(&ctx, dte, dpe, c.r, c.inp, B, T, C, KERNELS_F32);
    float *gte = delta(dte, dte0, (size_t)V * C), *gpe = delta(dpe, dpe0, (size_t)MAXT * C);
    kt_assert_gc("embedding dwte", kt_gradcheck(c.wte, (size_t)V * C, gte, emb_loss, &c, EPS, ATOL, RTOL));
    kt_assert_gc("embedding dwpe", kt_gradcheck(c.wpe, (size_t)MAXT * C, gpe, emb_loss, &c, EPS, ATOL, RTOL));
    free(c.wte), free(c.wpe), free(c.out), free(c.r), free(dte0), free(dpe0), free(dte), free(dpe), free(gte), free(gpe);
}
END_TEST

/* ---- layernorm ---- */
typedef struct ln_case {
    float *inp, *w, *b, *out, *mean, *rstd, *r;
} ln_case;

static double ln_loss(void *u) {
    ln_case *c = u;
    cpu_layernorm_forward(&ctx, c->out, c->mean, c->rstd, c->inp, c->w, c->b, B, T, C, KERNELS_F32);
    return kt_dot(c->out, c->r, (size_t)B * T * C);
}

START_TEST(layernorm) {
    kt_seed(300);
    size_t n = (size_t)B * T * C;
    ln_case c = {kt_new(n, 1), kt_new(C, 1), kt_new(C, 1), kt_new(n, 0), kt_new(B * T, 0), kt_new(B * T, 0), kt_new(n, 1)};
    for (size_t i = 0; i < n; i++)
        c.inp[i] += 0.5f; /* a nonzero mean to remove */
    ln_loss(&c);
    float *di0 = kt_new(n, 1), *dw0 = kt_new(C, 1), *db0 = kt_new(C, 1);
    float *di = kt_copy(di0, n), *dw = kt_copy(dw0, C), *db = kt_copy(db0, C);
    cpu_layernorm_backward(&ctx, di, dw, db, c.r, c.inp, c.w, c.mean, c.rstd, B, T, C, KERNELS_F32);
    float *gi = delta(di, di0, n), *gw = delta(dw, dw0, C), *gb = delta(db, db0, C);
    kt_assert_gc("layernorm dinp", kt_gradcheck(c.inp, n, gi, ln_loss, &c, EPS, ATOL, RTOL));
    kt_assert_gc("layernorm dweight", kt_gradcheck(c.w, C, gw, ln_loss, &c, EPS, ATOL, RTOL));
    kt_assert_gc("layernorm dbias", kt_gradcheck(c.b, C, gb, ln_loss, &c, EPS, ATOL, RTOL));
    free(c.inp), free(c.w), free(c.b), free(c.out), free(c.mean), free(c.rstd), free(c.r);
    free(di0), free(dw0), free(db0), free(di), free(dw), free(db), free(gi), free(gw), free(gb);
}
END_TEST

/* ---- attention ---- */
typedef struct att_case {
    float *qkv, *out, *att, *r;
} att_case;

static double att_loss(void *u) {
    att_case *c = u;
    cpu_attention_forward(&ctx, c->out, c->att, c->qkv, B, T, C, NH, KERNELS_F32);
    return kt_dot(c->out, c->r, (size_t)B * T * C);
}

START_TEST(attention) {
    kt_seed(400);
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
    att_case c = {kt_new(nq, 1), kt_new(no, 0), kt_new((size_t)B * NH * T * T, 0), kt_new(no, 1)};
    att_loss(&c);
    float *d0 = kt_new(nq, 1), *d = kt_copy(d0, nq);
    cpu_attention_backward(&ctx, d, c.r, c.qkv, c.att, c.out, B, T, C, NH, KERNELS_F32);
    float *g = delta(d, d0, nq);
    kt_assert_gc("attention dqkv", kt_gradcheck(c.qkv, nq, g, att_loss, &c, EPS, ATOL, RTOL));
    free(c.qkv), free(c.out), free(c.att), free(c.r), free(d0), free(d), free(g);
}
END_TEST

/* ---- gelu ---- */
typedef struct ew_case {
    float *a, *b, *out, *r;
    size_t n;
} ew_case;

static double gelu_loss(void *u) {
    ew_case *c = u;
    cpu_gelu_forward(&ctx, c->out, c->a, c->n, KERNELS_F32);
    return kt_dot(c->out, c->r, c->n);
}

START_TEST(gelu) {
    kt_seed(500);
    size_t n = 200;
    ew_case c = {kt_new(n, 2), NULL, kt_new(n, 0), kt_new(n, 1), n};
    float *d0 = kt_new(n, 1), *d = kt_copy(d0, n);
    cpu_gelu_backward(&ctx, d, c.a, c.r, n, KERNELS_F32);
    float *g = delta(d, d0, n);
    kt_assert_gc("gelu dinp", kt_gradcheck(c.a, n, g, gelu_loss, &c, EPS, ATOL, RTOL));
    free(c.a), free(c.out), free(c.r), free(d0), free(d), free(g);
}
END_TEST

/* ---- residual ---- */
static double residual_loss(void *u) {
    ew_case *c = u;
    cpu_residual_forward(&ctx, c->out, c->a, c->b, c->n, KERNELS_F32);
    return kt_dot(c->out, c->r, c->n);
}

START_TEST(residual) {
    kt_seed(600);
    size_t n = 64;
    ew_case c = {kt_new(n, 1), kt_new(n, 1), kt_new(n, 0), kt_new(n, 1), n};
    float *d10 = kt_new(n, 1), *d20 = kt_new(n, 1), *d1 = kt_copy(d10, n), *d2 = kt_copy(d20, n);
    cpu_residual_backward(&ctx, d1, d2, c.r, n, KERNELS_F32);
    float *g1 = delta(d1, d10, n), *g2 = delta(d2, d20, n);
    kt_assert_gc("residual dinp1", kt_gradcheck(c.a, n, g1, residual_loss, &c, EPS, ATOL, RTOL));
    kt_assert_gc("residual dinp2", kt_gradcheck(c.b, n, g2, residual_loss, &c, EPS, ATOL, RTOL));
    free(c.a), free(c.b), free(c.out), free(c.r), free(d10), free(d20), free(d1), free(d2), free(g1), free(g2);
}
END_TEST

/* ---- crossentropy: L = loss_scale * sum(losses) ---- */
typedef struct ce_case {
    float *logits, *losses;
    int targets[B * T];
    float scale;
} ce_case;

static double ce_loss(void *u) {
    ce_case *c = u;
    cpu_crossentropy_forward(&ctx, c->losses, c->logits, c->targets, B, T, V, VP, KERNELS_F32);
    double s = 0.0;
    for (int i = 0; i < B * T; i++)
        s += c->losses[i];
    return s * c->scale;
}

START_TEST(crossentropy) {
    kt_seed(700);
    size_t n = (size_t)B * T * VP;
    ce_case c = {kt_new(n, 2), kt_new(B * T, 0), {0}, 0.37f};
    for (int i = 0; i < B * T; i++)
        c.targets[i] = (i * 5 + 3) % V;
    float *dl = kt_new(n, 5); /* garbage: backward must overwrite all of it */
    cpu_crossentropy_backward(&ctx, dl, c.logits, c.targets, c.scale, B, T, V, VP, KERNELS_F32);
    for (int r = 0; r < B * T; r++)
        for (int i = V; i < VP; i++)
            ck_assert_float_eq(dl[(size_t)r * VP + i], 0.0f);
    /* The padding does not reach the loss: its numeric gradient is 0 too. */
    kt_assert_gc("crossentropy dlogits", kt_gradcheck(c.logits, n, dl, ce_loss, &c, EPS, ATOL, RTOL));
    /* In place: dlogits == logits gives the same numbers. */
    float *inplace = kt_copy(c.logits, n);
    cpu_crossentropy_backward(&ctx, inplace, inplace, c.targets, c.scale, B, T, V, VP, KERNELS_F32);
    ck_assert_mem_eq(inplace, dl, n * sizeof(float));
    free(c.logits), free(c.losses), free(dl), free(inplace);
}
END_TEST

/* ---- the check can fail ---- */
START_TEST(gradcheck_catches_small_errors) {
    kt_seed(100);
    size_t ni = (size_t)B * T * C, nw = (size_t)OC * C, no = (size_t)B * T * OC;
    mm_case c = {kt_new(ni, 1), kt_new(nw, 1), kt_new(OC, 1), kt_new(no, 0), kt_new(no, 1), 1};
    float *dw = kt_new(nw, 0);
    cpu_matmul_backward(&ctx, NULL, dw, NULL, c.r, c.inp, c.w, B, T, C, OC, KERNELS_F32);
    kt_gc ok = kt_gradcheck(c.w, nw, dw, mm_loss, &c, EPS, ATOL, RTOL);
    ck_assert_uint_eq(ok.failed, 0);
    /* Off by 1% in one element (one with |g| > 0.5, so the error is not under atol). */
    size_t bad = 0;
    while (fabsf(dw[bad]) < 0.5f)
        bad++;
    dw[bad] *= 1.01f;
    kt_gc gc = kt_gradcheck(c.w, nw, dw, mm_loss, &c, EPS, ATOL, RTOL);
    ck_assert_uint_eq(gc.failed, 1);
    ck_assert_uint_eq(gc.worst, bad);
    /* A gradient that is right but for a stray term of about 1% of its size, as a
     * slightly wrong constant or a dropped small term would leave. */
    dw[bad] /= 1.01f;
    for (size_t i = 0; i < nw; i++)
        dw[i] += 0.01f * dw[(i + 1) % nw];
    gc = kt_gradcheck(c.w, nw, dw, mm_loss, &c, EPS, ATOL, RTOL);
    ck_assert_uint_gt(gc.failed, nw / 4);
    free(c.inp), free(c.w), free(c.bias), free(c.out), free(c.r), free(dw);
}
END_TEST

Suite *kt_suite_grad(void) {
    Suite *s = suite_create("gradcheck");
    TCase *tc = tcase_create("backward vs finite differences");
    tcase_add_test(tc, matmul_with_bias);
    tcase_add_test(tc, matmul_no_bias_no_dinp);
    tcase_add_test(tc, embedding);
    tcase_add_test(tc, layernorm);
    tcase_add_test(tc, attention);
    tcase_add_test(tc, gelu);
    tcase_add_test(tc, residual);
    tcase_add_test(tc, crossentropy);
    tcase_add_test(tc, gradcheck_catches_small_errors);
    suite_add_tcase(s, tc);
    return s;
}
