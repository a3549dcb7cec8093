/* bf16 mode. The rule (kernels.h): bf16 is storage only, arithmetic is fp32, each
 * stored element is rounded once. So on data that is already bf16-representable, every
 * bf16 output must equal the fp32 output rounded to bf16, bit for bit, and every fp32
 * output (parameter gradients, mean/rstd, losses) must be identical. That is checked
 * for each op, forward and backward; then, on unrounded data, that bf16 mode stays
 * within bf16's precision of fp32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/kernels/kt.h"

enum { B = 2, T = 7, C = 16, NH = 2, OC = 20, V = 30, VP = 32 };

static kernels_ctx ctx;

/* Random fp32 data that bf16 represents exactly, and its bf16 copy. */
typedef struct pair {
    float *f;
    kernels_bf16 *h;
    size_t n;
} pair;

static pair mk(size_t n, float scale) {
    pair p = {kt_new(n, scale), NULL, n};
    kt_round_bf16(p.f, n);
    p.h = kt_bf16(p.f, n);
    return p;
}

static void drop(pair p) {
    free(p.f);
    free(p.h);
}

/* bf16 result == bf16(fp32 result), every element. */
static void same_rounded(const char *what, const kernels_bf16 *h, const float *f, size_t n) {
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(h[i] == kernels_f32_to_bf16(f[i]), "%s[%zu]: bf16 0x%04x, fp32 %.9g -> 0x%04x",
                      what, i, h[i], f[i], kernels_f32_to_bf16(f[i]));
}

static void same_f32(const char *what, const float *a, const float *b, size_t n) {
    ck_assert_msg(memcmp(a, b, n * sizeof(float)) == 0, "%s differs between fp32 and bf16 modes", what);
}

START_TEST(matmul) {
    kt_seed(21);
    size_t ni = (size_t)B * T * C, nw = (size_t)OC * C, no = (size_t)B * T * OC;
    pair inp = mk(ni, 1), w = mk(nw, 1), bias = mk(OC, 1), out = mk(no, 0), dout = mk(no, 1), dinp = mk(ni, 1);
    cpu_matmul_forward(&ctx, out.f, inp.f, w.f, bias.f, B, T, C, OC, KERNELS_F32);
    cpu_matmul_forward(&ctx, out.h, inp.h, w.h, bias.h, B, T, C, OC, KERNELS_BF16);
    same_rounded("matmul out", out.h, out.f, no);
    float *dw1 = kt_new(nw, 1), *dw2 = kt_copy(dw1, nw), *db1 = kt_new(OC, 1), *db2 = kt_copy(db1, OC);
    cpu_matmul_backward(&ctx, dinp.f, dw1, db1, dout.f, inp.f, w.f, B, T, C, OC, KERNELS_F32);
    cpu_matmul_backward(&ctx, dinp.h, dw2, db2, dout.h, inp.h, w.h, B, T, C, OC, KERNELS_BF16);
    same_rounded("matmul dinp", dinp.h, dinp.f, ni);
    same_f32("matmul dweight", dw1, dw2, nw);
    same_f32("matmul dbias", db1, db2, OC);
    drop(inp), drop(w), drop(bias), drop(out), drop(dout), drop(dinp);
    free(dw1), free(dw2), free(db1), free(db2);
}
END_TEST

START_TEST(layernorm) {
    kt_seed(22);
    size_t n = (size_t)B * T * C;
    pair inp = mk(n, 2), out = mk(n, 0), dout = mk(n, 1), dinp = mk(n, 1);
    float *w = kt_new(C, 1), *b = kt_new(C, 1);
    float *m1 = kt_new(B * T, 0), *m2 = kt_new(B * T, 0), *r1 = kt_new(B * T, 0), *r2 = kt_new(B * T, 0);
    cpu_layernorm_forward(&ctx, out.f, m1, r1, inp.f, w, b, B, T, C, KERNELS_F32);
    cpu_layernorm_forward(&ctx, out.h, m2, r2, inp.h, w, b, B, T, C, KERNELS_BF16);
    same_rounded("layernorm out", out.h, out.f, n);
    same_f32("layernorm mean", m1, m2, B * T);
    same_f32("layernorm rstd", r1, r2, B * T);
    float *dw1 = kt_new(C, 1), *dw2 = kt_copy(dw1, C), *db1 = kt_new(C, 1), *db2 = kt_copy(db1, C);
    cpu_layernorm_backward(&ctx, dinp.f, dw1, db1, dout.f, inp.f, w, m1, r1, B, T, C, KERNELS_F32);
    cpu_layernorm_backward(&ctx, dinp.h, dw2, db2, dout.h, inp.h, w, m2, r2, B, T, C, KERNELS_BF16);
    same_rounded("layernorm dinp", dinp.h, dinp.f, n);
    same_f32("layernorm dweight", dw1, dw2, C);
    same_f32("layernorm dbias", db1, db2, C);
    drop(inp), drop(out), drop(dout), drop(dinp);
    free(w), free(b), free(m1), free(m2), free(r1), free(r2), free(dw1), free(dw2), free(db1), free(db2);
}
END_TEST

START_TEST(attention) {
    kt_seed(23);
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    pair qkv = mk(nq, 1), out = mk(no, 0), att = mk(na, 0), dout = mk(no, 1), dqkv = mk(nq, 1);
    cpu_attention_forward(&ctx, out.f, att.f, qkv.f, B, T, C, NH, KERNELS_F32);
    cpu_attention_forward(&ctx, out.h, att.h, qkv.h, B, T, C, NH, KERNELS_BF16);
    same_rounded("attention out", out.h, out.f, no);
    same_rounded("attention att", att.h, att.f, na);
    /* Backward reads att and out as stored: give the fp32 run the stored bf16 values. */
    float *att_w = kt_from_bf16(att.h, na), *out_w = kt_from_bf16(out.h, no);
    cpu_attention_backward(&ctx, dqkv.f, dout.f, qkv.f, att_w, out_w, B, T, C, NH, KERNELS_F32);
    cpu_attention_backward(&ctx, dqkv.h, dout.h, qkv.h, att.h, out.h, B, T, C, NH, KERNELS_BF16);
    same_rounded("attention dqkv", dqkv.h, dqkv.f, nq);
    drop(qkv), drop(out), drop(att), drop(dout), drop(dqkv), free(att_w), free(out_w);
}
END_TEST

START_TEST(elementwise) {
    kt_seed(24);
    size_t n = 333;
    pair x = mk(n, 2), y = mk(n, 1), out = mk(n, 0), dout = mk(n, 1), d1 = mk(n, 1), d2 = mk(n, 1);
    cpu_gelu_forward(&ctx, out.f, x.f, n, KERNELS_F32);
    cpu_gelu_forward(&ctx, out.h, x.h, n, KERNELS_BF16);
    same_rounded("gelu out", out.h, out.f, n);
    cpu_gelu_backward(&ctx, d1.f, x.f, dout.f, n, KERNELS_F32);
    cpu_gelu_backward(&ctx, d1.h, x.h, dout.h, n, KERNELS_BF16);
    same_rounded("gelu dinp", d1.h, d1.f, n);
    drop(d1); /* start the residual's gradients from bf16 values again */
    d1 = mk(n, 1);
    cpu_residual_forward(&ctx, out.f, x.f, y.f, n, KERNELS_F32);
    cpu_residual_forward(&ctx, out.h, x.h, y.h, n, KERNELS_BF16);
    same_rounded("residual out", out.h, out.f, n);
    cpu_residual_backward(&ctx, d1.f, d2.f, dout.f, n, KERNELS_F32);
    cpu_residual_backward(&ctx, d1.h, d2.h, dout.h, n, KERNELS_BF16);
    same_rounded("residual dinp1", d1.h, d1.f, n);
    same_rounded("residual dinp2", d2.h, d2.f, n);
    drop(x), drop(y), drop(out), drop(dout), drop(d1), drop(d2);
}
END_TEST

START_TEST(embedding_and_crossentropy) {
    kt_seed(25);
    size_t ne = (size_t)B * T * C, nl = (size_t)B * T * VP;
    int tok[B * T];
    for (int i = 0; i < B * T; i++)
        tok[i] = (i * 3) % V;
    float *wte = kt_new((size_t)V * C, 1), *wpe = kt_new((size_t)T * C, 1);
    pair e = mk(ne, 0), de = mk(ne, 1);
    cpu_embedding_forward(&ctx, e.f, tok, wte, wpe, B, T, C, KERNELS_F32);
    cpu_embedding_forward(&ctx, e.h, tok, wte, wpe, B, T, C, KERNELS_BF16);
    same_rounded("embedding out", e.h, e.f, ne);
    float *dte1 = kt_new((size_t)V * C, 1), *dte2 = kt_copy(dte1, (size_t)V * C);
    float *dpe1 = kt_new((size_t)T * C, 1), *dpe2 = kt_copy(dpe1, (size_t)T * C);
    cpu_embedding_backward(&ctx, dte1, dpe1, de.f, tok, B, T, C, KERNELS_F32);
    cpu_embedding_backward(&ctx, dte2, dpe2, de.h, tok, B, T, C, KERNELS_BF16);
    same_f32("embedding dwte", dte1, dte2, (size_t)V * C);
    same_f32("embedding dwpe", dpe1, dpe2, (size_t)T * C);

    pair logits = mk(nl, 3), dl = mk(nl, 0);
    float *l1 = kt_new(B * T, 0), *l2 = kt_new(B * T, 0);
    cpu_crossentropy_forward(&ctx, l1, logits.f, tok, B, T, V, VP, KERNELS_F32);
    cpu_crossentropy_forward(&ctx, l2, logits.h, tok, B, T, V, VP, KERNELS_BF16);
    same_f32("crossentropy losses", l1, l2, B * T);
    cpu_crossentropy_backward(&ctx, dl.f, logits.f, tok, 0.25f, B, T, V, VP, KERNELS_F32);
    cpu_crossentropy_backward(&ctx, dl.h, logits.h, tok, 0.25f, B, T, V, VP, KERNELS_BF16);
    same_rounded("crossentropy dlogits", dl.h, dl.f, nl);
    /* in place in bf16 too */
    cpu_crossentropy_backward(&ctx, logits.h, logits.h, tok, 0.25f, B, T, V, VP, KERNELS_BF16);
    ck_assert_mem_eq(logits.h, dl.h, nl * sizeof(kernels_bf16));
    free(wte), free(wpe), drop(e), drop(de), free(dte1), free(dte2), free(dpe1), free(dpe2);
    drop(logits), drop(dl), free(l1), free(l2);
}
END_TEST

/* Unrounded data: bf16 mode differs from fp32 by about bf16's precision (2^-8
 * relative per rounding), not more. */
START_TEST(close_to_fp32) {
    kt_seed(26);
    const int Bb = 2, Tt = 16, Cc = 64, NHh = 4, OCc = 96;
    size_t ni = (size_t)Bb * Tt * Cc, nw = (size_t)OCc * Cc, no = (size_t)Bb * Tt * OCc;
    float *inp = kt_new(ni, 1), *w = kt_new(nw, 0.1f), *out = kt_new(no, 0);
    kernels_bf16 *inp_h = kt_bf16(inp, ni), *w_h = kt_bf16(w, nw), *out_h = kt_bf16(out, no);
    cpu_matmul_forward(&ctx, out, inp, w, NULL, Bb, Tt, Cc, OCc, KERNELS_F32);
    cpu_matmul_forward(&ctx, out_h, inp_h, w_h, NULL, Bb, Tt, Cc, OCc, KERNELS_BF16);
    float *out_w = kt_from_bf16(out_h, no);
    double e = kt_max_rel(out_w, out, no, 1e-3);
    ck_assert_msg(e < 2e-2 && e > 1e-5, "matmul bf16 vs fp32: %g", e); /* > 0: really rounded */

    size_t nq = ni * 3, na = (size_t)Bb * NHh * Tt * Tt;
    float *qkv = kt_new(nq, 1), *ao = kt_new(ni, 0), *att = kt_new(na, 0);
    kernels_bf16 *qkv_h = kt_bf16(qkv, nq), *ao_h = kt_bf16(ao, ni), *att_h = kt_bf16(att, na);
    cpu_attention_forward(&ctx, ao, att, qkv, Bb, Tt, Cc, NHh, KERNELS_F32);
    cpu_attention_forward(&ctx, ao_h, att_h, qkv_h, Bb, Tt, Cc, NHh, KERNELS_BF16);
    float *ao_w = kt_from_bf16(ao_h, ni);
    e = kt_max_rel(ao_w, ao, ni, 1e-3);
    ck_assert_msg(e < 3e-2 && e > 1e-5, "attention bf16 vs fp32: %g", e);
    free(inp), free(w), free(out), free(inp_h), free(w_h), free(out_h), free(out_w);
    free(qkv), free(ao), free(att), free(qkv_h), free(ao_h), free(att_h), free(ao_w);
}
END_TEST

Suite *kt_suite_mixed(void) {
    Suite *s = suite_create("bf16 mode");
    TCase *tc = tcase_create("rounded once");
    tcase_add_test(tc, matmul);
    tcase_add_test(tc, layernorm);
    tcase_add_test(tc, attention);
    tcase_add_test(tc, elementwise);
    tcase_add_test(tc, embedding_and_crossentropy);
    tcase_add_test(tc, close_to_fp32);
    suite_add_tcase(s, tc);
    return s;
}
