/* Attention is causal: position t sees only positions <= t, forward and backward. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/kernels/kt.h"

enum { B = 2, T = 8, C = 12, NH = 3 };

static kernels_ctx ctx;

/* Changing q, k and v of a future token leaves every earlier output untouched, in both
 * dtypes; later outputs do change (so the test can tell). */
static void check_future_change(kernels_dtype dt) {
    kt_seed(31);
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    size_t es = kernels_dtype_size(dt);
    float *qkv_f = kt_new(nq, 1);
    void *qkv = malloc(nq * es), *out1 = calloc(no, es), *out2 = calloc(no, es);
    void *att1 = calloc(na, es), *att2 = calloc(na, es);
    for (int tf = 0; tf < T; tf++) {
        for (int changed = 0; changed < 2; changed++) {
            float *x = kt_copy(qkv_f, nq);
            if (changed)
                for (int i = 0; i < 3 * C; i++) /* batch 1, token tf */
                    x[((size_t)1 * T + tf) * 3 * C + i] += 1.0f + kt_uniform();
            if (dt == KERNELS_BF16) {
                kernels_bf16 *h = kt_bf16(x, nq);
                memcpy(qkv, h, nq * es);
                free(h);
            } else {
                memcpy(qkv, x, nq * es);
            }
            free(x);
            cpu_attention_forward(&ctx, changed ? out2 : out1, changed ? att2 : att1, qkv, B, T, C, NH, dt);
        }
        size_t row = (size_t)C * es; /* bytes of one (b,t) output row */
        /* batch 0 is untouched; batch 1 equal before tf, different from tf on */
        ck_assert_mem_eq(out1, out2, (size_t)T * row);
        ck_assert_mem_eq((char *)out1 + (size_t)T * row, (char *)out2 + (size_t)T * row, (size_t)tf * row);
        for (int t = tf; t < T; t++)
            ck_assert_msg(memcmp((char *)out1 + ((size_t)T + t) * row, (char *)out2 + ((size_t)T + t) * row, row) != 0,
                          "changing token %d did not change output %d", tf, t);
    }
    free(qkv_f), free(qkv), free(out1), free(out2), free(att1), free(att2);
}

START_TEST(future_tokens_do_not_change_the_past_fp32) { check_future_change(KERNELS_F32); }
END_TEST
START_TEST(future_tokens_do_not_change_the_past_bf16) { check_future_change(KERNELS_BF16); }
END_TEST

/* A gradient arriving only at output t reaches q of t alone and k, v of positions <= t. */
START_TEST(gradient_flows_only_backwards_in_time) {
    kt_seed(32);
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *qkv = kt_new(nq, 1), *out = kt_new(no, 0), *att = kt_new(na, 0);
    cpu_attention_forward(&ctx, out, att, qkv, B, T, C, NH, KERNELS_F32);
    for (int t = 0; t < T; t++) {
        float *dout = kt_new(no, 0), *dqkv = kt_new(nq, 0);
        for (int c = 0; c < C; c++)
            dout[((size_t)0 * T + t) * C + c] = kt_randn();
        cpu_attention_backward(&ctx, dqkv, dout, qkv, att, out, B, T, C, NH, KERNELS_F32);
        for (int b = 0; b < B; b++)
            for (int t2 = 0; t2 < T; t2++) {
                const float *g = dqkv + ((size_t)b * T + t2) * 3 * C;
                double q = 0, kv = 0;
                for (int c = 0; c < C; c++) {
                    q += fabs(g[c]);
                    kv += fabs(g[C + c]) + fabs(g[2 * C + c]);
                }
                int q_expected = b == 0 && t2 == t, kv_expected = b == 0 && t2 <= t;
                ck_assert_msg((q > 0) == q_expected || (q_expected && t == 0),
                              "dq at b%d t%d from dout at t%d: %g", b, t2, t, q);
                ck_assert_msg((kv > 0) == kv_expected, "dk,dv at b%d t%d from dout at t%d: %g", b, t2, t, kv);
            }
        free(dout), free(dqkv);
    }
    free(qkv), free(out), free(att);
}
END_TEST

/* T = 1: the only key is itself, so out = v exactly and att = 1. */
START_TEST(single_position) {
    kt_seed(33);
    const int Bb = 3, Tt = 1;
    size_t no = (size_t)Bb * Tt * C;
    float *qkv = kt_new(no * 3, 1), *out = kt_new(no, 0), *att = kt_new((size_t)Bb * NH, 0);
    cpu_attention_forward(&ctx, out, att, qkv, Bb, Tt, C, NH, KERNELS_F32);
    for (int b = 0; b < Bb; b++)
        for (int c = 0; c < C; c++)
            ck_assert_float_eq(out[b * C + c], qkv[(size_t)b * 3 * C + 2 * C + c]);
    for (int i = 0; i < Bb * NH; i++)
        ck_assert_float_eq(att[i], 1.0f);
    free(qkv), free(out), free(att);
}
END_TEST

Suite *kt_suite_attention(void) {
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("causal");
    tcase_add_test(tc, future_tokens_do_not_change_the_past_fp32);
    tcase_add_test(tc, future_tokens_do_not_change_the_past_bf16);
    tcase_add_test(tc, gradient_flows_only_backwards_in_time);
    tcase_add_test(tc, single_position);
    suite_add_tcase(s, tc);
    return s;
}
