/* CPU forwards (fp32) against double-precision references, at sizes that cross the
 * matmul's tile and block edges (rows not a multiple of 4 or 64, C not of 8). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/kernels/kt.h"

static kernels_ctx ctx;

START_TEST(matmul) {
    /* BT = 69 rows: one full 64-row block, a partial one, a short 4-row tile. */
    const int B = 3, T = 23, C = 37, OC = 70;
    size_t BT = (size_t)B * T;
    kt_seed(1);
    float *inp = kt_new(BT * C, 1), *w = kt_new((size_t)OC * C, 1), *bias = kt_new(OC, 1);
    float *out = kt_new(BT * OC, 0);
    double *ref = malloc(BT * OC * sizeof(double));
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        cpu_matmul_forward(&ctx, out, inp, w, with_bias ? bias : NULL, B, T, C, OC, KERNELS_F32);
        kt_ref_matmul(ref, inp, w, with_bias ? bias : NULL, (int)BT, C, OC);
        ck_assert_double_lt(kt_max_rel_d(out, ref, BT * OC, 1.0), 1e-6);
    }
    free(inp), free(w), free(bias), free(out), free(ref);
}
END_TEST

/* Backward products against double references built from the same definitions. */
START_TEST(matmul_backward_values) {
    const int B = 2, T = 35, C = 19, OC = 67;
    size_t BT = (size_t)B * T;
    kt_seed(2);
    float *inp = kt_new(BT * C, 1), *w = kt_new((size_t)OC * C, 1), *dout = kt_new(BT * OC, 1);
    float *dinp = kt_new(BT * C, 0), *dw = kt_new((size_t)OC * C, 0), *db = kt_new(OC, 0);
    cpu_matmul_backward(&ctx, dinp, dw, db, dout, inp, w, B, T, C, OC, KERNELS_F32);
    double *ri = calloc(BT * C, sizeof(double)), *rw = calloc((size_t)OC * C, sizeof(double)), *rb = calloc(OC, sizeof(double));
    for (size_t r = 0; r < BT; r++)
        for (int o = 0; o < OC; o++) {
            double d = dout[r * OC + o];
            rb[o] += d;
            for (int c = 0; c < C; c++) {
                ri[r * C + c] += d * w[(size_t)o * C + c];
                rw[(size_t)o * C + c] += d * inp[r * C + c];
            }
        }
    ck_assert_double_lt(kt_max_rel_d(dinp, ri, BT * C, 1.0), 1e-6);
    ck_assert_double_lt(kt_max_rel_d(dw, rw, (size_t)OC * C, 1.0), 1e-6);
    ck_assert_double_lt(kt_max_rel_d(db, rb, OC, 1.0), 1e-6);
    free(inp), free(w), free(dout), free(dinp), free(dw), free(db), free(ri), free(rw), free(rb);
}
END_TEST

START_TEST(layernorm) {
    const int B = 2, T = 3, C = 50;
    size_t n = (size_t)B * T * C;
    kt_seed(3);
    float *inp = kt_new(n, 3), *w = kt_new(C, 1), *b = kt_new(C, 1), *out = kt_new(n, 0);
    float *mean = kt_new(B * T, 0), *rstd = kt_new(B * T, 0);
    for (size_t i = 0; i < n; i++)
        inp[i] += 10.0f; /* a large mean: the two-pass variance must not cancel */
    double *ref = malloc(n * sizeof(double));
    cpu_layernorm_forward(&ctx, out, mean, rstd, inp, w, b, B, T, C, KERNELS_F32);
    kt_ref_layernorm(ref, inp, w, b, B * T, C);
    ck_assert_double_lt(kt_max_rel_d(out, ref, n, 1.0), 2e-6);
    for (int r = 0; r < B * T; r++) {
        double m = 0.0;
        for (int c = 0; c < C; c++)
            m += inp[(size_t)r * C + c];
        ck_assert_double_lt(fabs(mean[r] - m / C), 1e-5);
        ck_assert(rstd[r] > 0.2f && rstd[r] < 1.0f); /* std of N(0,9) is about 3 */
    }
    /* mean and rstd are optional. */
    cpu_layernorm_forward(&ctx, out, NULL, NULL, inp, w, b, B, T, C, KERNELS_F32);
    ck_assert_double_lt(kt_max_rel_d(out, ref, n, 1.0), 2e-6);
    free(inp), free(w), free(b), free(out), free(mean), free(rstd), free(ref);
}
END_TEST

START_TEST(attention) {
    const int B = 2, T = 9, C = 24, NH = 3;
    kt_seed(4);
    size_t no = (size_t)B * T * C;
    float *qkv = kt_new(no * 3, 1), *out = kt_new(no, 0), *att = kt_new((size_t)B * NH * T * T, 0);
    double *ref = malloc(no * sizeof(double));
    cpu_attention_forward(&ctx, out, att, qkv, B, T, C, NH, KERNELS_F32);
    kt_ref_attention(ref, qkv, B, T, C, NH);
    ck_assert_double_lt(kt_max_rel_d(out, ref, no, 1.0), 1e-6);
    for (int row = 0; row < B * NH * T; row++) {
        int t = row % T;
        double sum = 0.0;
        for (int t2 = 0; t2 < T; t2++) {
            float a = att[(size_t)row * T + t2];
            if (t2 > t)
                ck_assert_float_eq(a, 0.0f);
            else
                ck_assert(a > 0.0f);
            sum += a;
        }
        ck_assert_double_lt(fabs(sum - 1.0), 1e-6);
    }
    free(qkv), free(out), free(att), free(ref);
}
END_TEST

START_TEST(crossentropy) {
    const int B = 2, T = 3, V = 100, Vp = 104;
    kt_seed(5);
    size_t n = (size_t)B * T * Vp;
    float *logits = kt_new(n, 4), *losses = kt_new(B * T, 0);
    int targets[6] = {0, 99, 17, 50, 3, 98};
    for (int r = 0; r < B * T; r++)
        for (int i = V; i < Vp; i++)
            logits[(size_t)r * Vp + i] = 1e30f; /* padding must be ignored */
    logits[7] = 80.0f; /* a dominant logit: the max shift keeps exp finite */
    double ref[6];
    cpu_crossentropy_forward(&ctx, losses, logits, targets, B, T, V, Vp, KERNELS_F32);
    for (int r = 0; r < B * T; r++)
        for (int i = V; i < Vp; i++)
            logits[(size_t)r * Vp + i] = 0.0f;
    kt_ref_crossentropy(ref, logits, targets, B * T, V, Vp);
    for (int r = 0; r < B * T; r++)
        ck_assert_msg(fabs(losses[r] - ref[r]) <= 1e-5 * fmax(1.0, ref[r]), "row %d: %g vs %g", r, losses[r], ref[r]);
    free(logits), free(losses);
}
END_TEST

START_TEST(gelu_embedding_residual) {
    kt_seed(6);
    size_t n = 301;
    float *x = kt_new(n, 3), *y = kt_new(n, 1), *out = kt_new(n, 0);
    cpu_gelu_forward(&ctx, out, x, n, KERNELS_F32);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(out[i] - kt_ref_gelu(x[i])) <= 1e-6 * fmax(1.0, fabs(x[i])), "gelu(%g)", x[i]);
    ck_assert_float_eq_tol(kt_ref_gelu(1.0), 0.8411920f, 1e-6f); /* the tanh form's known value */
    cpu_residual_forward(&ctx, out, x, y, n, KERNELS_F32);
    for (size_t i = 0; i < n; i++)
        ck_assert_float_eq(out[i], x[i] + y[i]);
    /* embedding: exact sums of two table rows */
    const int B = 2, T = 3, C = 5, V = 7;
    int tok[6] = {6, 0, 3, 3, 1, 6};
    float *wte = kt_new((size_t)V * C, 1), *wpe = kt_new((size_t)T * C, 1), *e = kt_new((size_t)B * T * C, 0);
    cpu_embedding_forward(&ctx, e, tok, wte, wpe, B, T, C, KERNELS_F32);
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++)
            ck_assert_float_eq(e[bt * C + c], wte[tok[bt] * C + c] + wpe[(bt % T) * C + c]);
    free(x), free(y), free(out), free(wte), free(wpe), free(e);
}
END_TEST

/* The table hands out the cpu_ functions. */
START_TEST(ops_table) {
    const kernels_ops *k = kernels_cpu();
    ck_assert_str_eq(k->name, "cpu");
    ck_assert_ptr_eq(k->matmul_forward, cpu_matmul_forward);
    ck_assert_ptr_eq(k->attention_backward, cpu_attention_backward);
    ck_assert_ptr_eq(k->cast_bf16_to_f32, cpu_cast_bf16_to_f32);
    /* No entry left out: every pointer-sized word after the name is set. */
    const unsigned char *bytes = (const unsigned char *)k;
    for (size_t off = offsetof(kernels_ops, init); off < sizeof *k; off += sizeof(uintptr_t)) {
        uintptr_t word;
        memcpy(&word, bytes + off, sizeof word);
        ck_assert_msg(word != 0, "table entry at offset %zu is NULL", off);
    }
}
END_TEST

Suite *kt_suite_forward(void) {
    Suite *s = suite_create("forward");
    TCase *tc = tcase_create("fp32 vs double");
    tcase_add_test(tc, matmul);
    tcase_add_test(tc, matmul_backward_values);
    tcase_add_test(tc, layernorm);
    tcase_add_test(tc, attention);
    tcase_add_test(tc, crossentropy);
    tcase_add_test(tc, gelu_embedding_residual);
    tcase_add_test(tc, ops_table);
    suite_add_tcase(s, tc);
    return s;
}
