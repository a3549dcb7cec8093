/* AdamW: one step and a second against numbers worked by hand, decoupled weight decay,
 * grad_scale, and a vector against a double-precision reference. */
#include <math.h>
#include <stdlib.h>

#include "tests/kernels/kt.h"

/* lr 0.1, betas (0.9, 0.999), eps 1e-8, weight decay 0.01; p = 1, g = 0.5 then -0.25.
 * Step 1: m = 0.1*0.5 = 0.05, v = 0.001*0.25 = 0.00025,
 *         mhat = 0.05/0.1 = 0.5, vhat = 0.00025/0.001 = 0.25, sqrt = 0.5,
 *         p = 1 - 0.1*(0.5/(0.5+1e-8) + 0.01*1) = 0.899000002.
 * Step 2: m = 0.9*0.05 + 0.1*(-0.25) = 0.02, v = 0.999*0.00025 + 0.001*0.0625 = 0.00031225,
 *         mhat = 0.02/0.19, vhat = 0.00031225/0.001999,
 *         p = 0.899 - 0.1*(mhat/(sqrt(vhat)+1e-8) + 0.01*0.899) = 0.87146730. */
START_TEST(two_steps_by_hand) {
    kernels_ctx ctx;
    const kernels_ops *k = kernels_cpu();
    k->init(&ctx, NULL);
    float p = 1.0f, g = 0.5f, m = 0.0f, v = 0.0f;
    k->adamw_update(&ctx, &p, &g, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1.0f, 1);
    ck_assert_float_eq_tol(m, 0.05f, 1e-7f); /* (1 - 0.9f) is 0.1 + 2.4e-8 in fp32 */
    ck_assert_float_eq_tol(v, 0.00025f, 1e-8f); /* (1 - 0.999f) is 1.3e-8 off */
    ck_assert_float_eq_tol(p, 0.899000002f, 2e-7f);
    g = -0.25f;
    k->adamw_update(&ctx, &p, &g, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1.0f, 2);
    ck_assert_float_eq_tol(m, 0.02f, 1e-7f);
    ck_assert_float_eq_tol(v, 0.00031225f, 1e-8f);
    ck_assert_float_eq_tol(p, 0.87146730f, 2e-7f);
    k->destroy(&ctx);
}
END_TEST

/* With a zero gradient only the decay acts, directly on the weights (AdamW), not through
 * the moments (Adam with L2 would make m nonzero): p = 2 * (1 - lr*wd). */
START_TEST(decay_is_decoupled) {
    kernels_ctx ctx;
    kernels_cpu()->init(&ctx, NULL);
    float p = 2.0f, g = 0.0f, m = 0.0f, v = 0.0f;
    cpu_adamw_update(&ctx, &p, &g, &m, &v, 1, 0.01f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1);
    ck_assert_float_eq(m, 0.0f);
    ck_assert_float_eq(v, 0.0f);
    ck_assert_float_eq_tol(p, 1.998f, 1e-7f);
}
END_TEST

/* grad_scale multiplies the gradient before anything else: scale 0.5 on g equals g/2. */
START_TEST(grad_scale) {
    kernels_ctx ctx;
    kernels_cpu()->init(&ctx, NULL);
    float p1 = 0.3f, g1 = 0.8f, m1 = 0.01f, v1 = 0.002f;
    float p2 = 0.3f, g2 = 0.4f, m2 = 0.01f, v2 = 0.002f;
    cpu_adamw_update(&ctx, &p1, &g1, &m1, &v1, 1, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3);
    cpu_adamw_update(&ctx, &p2, &g2, &m2, &v2, 1, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 3);
    ck_assert_float_eq(p1, p2);
    ck_assert_float_eq(m1, m2);
    ck_assert_float_eq(v1, v2);
}
END_TEST

START_TEST(vector_against_double) {
    enum { N = 1003, STEPS = 5 };
    kt_seed(11);
    float *p = kt_new(N, 1.0f), *m = kt_new(N, 0.0f), *v = kt_new(N, 0.0f), *g = kt_new(N, 1.0f);
    double *pd = malloc(N * sizeof(double)), *md = calloc(N, sizeof(double)), *vd = calloc(N, sizeof(double));
    for (int i = 0; i < N; i++)
        pd[i] = p[i];
    kernels_ctx ctx;
    kernels_cpu()->init(&ctx, NULL);
    const double lr = 3e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    for (int step = 1; step <= STEPS; step++) {
        kt_fill(g, N, 1.0f);
        cpu_adamw_update(&ctx, p, g, m, v, N, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, 1.0f, step);
        for (int i = 0; i < N; i++) {
            md[i] = b1 * md[i] + (1 - b1) * g[i];
            vd[i] = b2 * vd[i] + (1 - b2) * (double)g[i] * g[i];
            double mh = md[i] / (1 - pow(b1, step)), vh = vd[i] / (1 - pow(b2, step));
            pd[i] -= lr * (mh / (sqrt(vh) + eps) + wd * pd[i]);
        }
    }
    for (int i = 0; i < N; i++) {
        ck_assert_msg(fabs(p[i] - pd[i]) <= 1e-6 * fmax(1.0, fabs(pd[i])), "p[%d] %g vs %g", i, p[i], pd[i]);
        ck_assert_msg(fabs(m[i] - md[i]) <= 1e-6, "m[%d]", i);
        ck_assert_msg(fabs(v[i] - vd[i]) <= 1e-6 * fmax(1e-3, vd[i]), "v[%d]", i);
    }
    free(p), free(m), free(v), free(g), free(pd), free(md), free(vd);
}
END_TEST

Suite *kt_suite_adamw(void) {
    Suite *s = suite_create("adamw");
    TCase *tc = tcase_create("update");
    tcase_add_test(tc, two_steps_by_hand);
    tcase_add_test(tc, decay_is_decoupled);
    tcase_add_test(tc, grad_scale);
    tcase_add_test(tc, vector_against_double);
    suite_add_tcase(s, tc);
    return s;
}
