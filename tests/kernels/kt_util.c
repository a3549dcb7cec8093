/* See kt.h. */
#include "tests/kernels/kt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long kt_state = 1;

void kt_seed(unsigned long long s) { kt_state = s; }

static unsigned long long kt_next(void) {
    unsigned long long z = (kt_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

unsigned kt_bits32(void) { return (unsigned)(kt_next() >> 32); }

float kt_uniform(void) { return (float)((kt_next() >> 40) * (1.0 / 16777216.0)); }

float kt_randn(void) {
    double u1 = ((kt_next() >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (kt_next() >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void kt_fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++)
        x[i] = scale * kt_randn();
}

float *kt_new(size_t n, float scale) {
    float *x = calloc(n ? n : 1, sizeof(float));
    ck_assert_ptr_nonnull(x);
    if (scale != 0.0f)
        kt_fill(x, n, scale);
    return x;
}

float *kt_copy(const float *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(y);
    memcpy(y, x, n * sizeof(float));
    return y;
}

kernels_bf16 *kt_bf16(const float *x, size_t n) {
    kernels_bf16 *y = malloc((n ? n : 1) * sizeof(kernels_bf16));
    ck_assert_ptr_nonnull(y);
    for (size_t i = 0; i < n; i++)
        y[i] = kernels_f32_to_bf16(x[i]);
    return y;
}

float *kt_from_bf16(const kernels_bf16 *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(y);
    for (size_t i = 0; i < n; i++)
        y[i] = kernels_bf16_to_f32(x[i]);
    return y;
}

void kt_round_bf16(float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        x[i] = kernels_bf16_to_f32(kernels_f32_to_bf16(x[i]));
}

double kt_dot(const float *out, const float *r, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)out[i] * (double)r[i];
    return s;
}

kt_gc kt_gradcheck(float *x, size_t n, const float *analytic, kt_loss_fn loss, void *user,
                   float eps, double atol, double rtol) {
    kt_gc gc = {0};
    for (size_t i = 0; i < n; i++) {
        float x0 = x[i];
        x[i] = x0 + eps;
        double xp = x[i], lp = loss(user);
        x[i] = x0 - eps;
        double xm = x[i], lm = loss(user);
        x[i] = x0;
        /* Divide by the step actually taken: x0 +- eps is rounded to float. */
        double num = (lp - lm) / (xp - xm);
        double a = analytic[i];
        double ratio = fabs(a - num) / (atol + rtol * fmax(fabs(a), fabs(num)));
        gc.checked++;
        if (ratio > 1.0)
            gc.failed++;
        if (ratio > gc.worst_ratio || gc.checked == 1) {
            gc.worst_ratio = ratio;
            gc.worst = i;
            gc.worst_a = a;
            gc.worst_n = num;
        }
    }
    return gc;
}

void kt_assert_gc(const char *what, kt_gc gc) {
    if (getenv("KT_VERBOSE") || gc.failed)
        fprintf(stderr, "gradcheck %-28s %4zu checked, %zu failed, worst [%zu] analytic %.6g numeric %.6g (%.2f of tolerance)\n",
                what, gc.checked, gc.failed, gc.worst, gc.worst_a, gc.worst_n, gc.worst_ratio);
    ck_assert_msg(gc.checked > 0, "%s: nothing checked", what);
    ck_assert_msg(gc.failed == 0, "%s: %zu of %zu gradients off, worst [%zu] analytic %g numeric %g",
                  what, gc.failed, gc.checked, gc.worst, gc.worst_a, gc.worst_n);
}

double kt_max_rel(const float *a, const float *b, size_t n, double floor) {
    double err = 0.0, mag = floor;
    for (size_t i = 0; i < n; i++) {
        err = fmax(err, fabs((double)a[i] - (double)b[i]));
        mag = fmax(mag, fabs((double)b[i]));
        if (isnan(a[i]) != isnan(b[i]))
            return INFINITY;
    }
    return err / mag;
}

double kt_max_rel_d(const float *a, const double *b, size_t n, double floor) {
    double err = 0.0, mag = floor;
    for (size_t i = 0; i < n; i++) {
        err = fmax(err, fabs((double)a[i] - b[i]));
        mag = fmax(mag, fabs(b[i]));
        if (isnan(a[i]))
            return INFINITY;
    }
    return err / mag;
}

void kt_ref_matmul(double *out, const float *inp, const float *w, const float *bias, int BT, int C, int OC) {
    for (int r = 0; r < BT; r++)
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0;
            for (int c = 0; c < C; c++)
                s += (double)inp[(size_t)r * C + c] * w[(size_t)o * C + c];
            out[(size_t)r * OC + o] = s;
        }
}

void kt_ref_layernorm(double *out, const float *inp, const float *w, const float *b, int BT, int C) {
    for (int r = 0; r < BT; r++) {
        const float *x = inp + (size_t)r * C;
        double m = 0.0, v = 0.0;
        for (int c = 0; c < C; c++)
            m += x[c];
        m /= C;
        for (int c = 0; c < C; c++)
            v += (x[c] - m) * (x[c] - m);
        v /= C;
        double s = 1.0 / sqrt(v + 1e-5);
        for (int c = 0; c < C; c++)
            out[(size_t)r * C + c] = (x[c] - m) * s * w[c] + b[c];
    }
}

void kt_ref_attention(double *out, const float *qkv, int B, int T, int C, int NH) {
    int HS = C / NH;
    double *s = malloc((size_t)T * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * HS;
                double mx = -INFINITY, sum = 0.0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * HS;
                    double d = 0.0;
                    for (int i = 0; i < HS; i++)
                        d += (double)q[i] * k[i];
                    s[t2] = d / sqrt((double)HS);
                    mx = fmax(mx, s[t2]);
                }
                for (int t2 = 0; t2 <= t; t2++)
                    sum += (s[t2] = exp(s[t2] - mx));
                for (int i = 0; i < HS; i++) {
                    double o = 0.0;
                    for (int t2 = 0; t2 <= t; t2++)
                        o += s[t2] / sum * qkv[((size_t)b * T + t2) * 3 * C + 2 * C + h * HS + i];
                    out[((size_t)b * T + t) * C + h * HS + i] = o;
                }
            }
    free(s);
}

void kt_ref_crossentropy(double *losses, const float *logits, const int *targets, int BT, int V, int Vp) {
    for (int r = 0; r < BT; r++) {
        const float *l = logits + (size_t)r * Vp;
        double mx = -INFINITY, sum = 0.0;
        for (int i = 0; i < V; i++)
            mx = fmax(mx, l[i]);
        for (int i = 0; i < V; i++)
            sum += exp(l[i] - mx);
        losses[r] = log(sum) + mx - l[targets[r]];
    }
}

double kt_ref_gelu(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
