/* Helpers shared by the kernel tests: random data, the finite-difference gradient
 * check, double-precision reference forwards, bf16 copies. */
#ifndef KT_H
#define KT_H

#include <check.h>
#include <stddef.h>

#include "kernels/bf16.h"
#include "kernels/kernels.h"

/* Deterministic random numbers (splitmix64); each test seeds its own. */
void kt_seed(unsigned long long s);
float kt_uniform(void);                              /* [0,1) */
unsigned kt_bits32(void);                            /* 32 random bits */
float kt_randn(void);                                /* N(0,1) */
void kt_fill(float *x, size_t n, float scale);       /* N(0, scale^2) */
float *kt_new(size_t n, float scale);                /* malloc + kt_fill; scale 0: zeros */
float *kt_copy(const float *x, size_t n);
kernels_bf16 *kt_bf16(const float *x, size_t n);     /* rounded copy */
float *kt_from_bf16(const kernels_bf16 *x, size_t n);
void kt_round_bf16(float *x, size_t n);              /* in place: x = float(bf16(x)) */

/* sum_i out[i] * r[i], in double. */
double kt_dot(const float *out, const float *r, size_t n);

/* Central differences of a scalar loss (computed in double by `loss`, which runs the
 * forward with x as it is) against `analytic` = dloss/dx, for every element of x.
 * An element fails when |analytic - numeric| > atol + rtol * max(|analytic|, |numeric|). */
typedef double (*kt_loss_fn)(void *user);
typedef struct kt_gc {
    size_t checked, failed, worst;
    double worst_ratio;     /* largest |a-n| / (atol + rtol*max(|a|,|n|)): > 1 fails */
    double worst_a, worst_n;
} kt_gc;
kt_gc kt_gradcheck(float *x, size_t n, const float *analytic, kt_loss_fn loss, void *user,
                   float eps, double atol, double rtol);
/* ck_assert that gc passed, printing the worst element either way. */
void kt_assert_gc(const char *what, kt_gc gc);

/* max |a - b| / max(max |b|, floor), for comparing a twin against a reference. */
double kt_max_rel(const float *a, const float *b, size_t n, double floor);
double kt_max_rel_d(const float *a, const double *b, size_t n, double floor);

/* Double-precision references of the forwards (fp32 inputs). */
void kt_ref_matmul(double *out, const float *inp, const float *w, const float *bias, int BT, int C, int OC);
void kt_ref_layernorm(double *out, const float *inp, const float *w, const float *b, int BT, int C);
void kt_ref_attention(double *out, const float *qkv, int B, int T, int C, int NH);
void kt_ref_crossentropy(double *losses, const float *logits, const int *targets, int BT, int V, int Vp);
double kt_ref_gelu(double x);

Suite *kt_suite_bf16(void);
Suite *kt_suite_grad(void);
Suite *kt_suite_forward(void);
Suite *kt_suite_mixed(void);
Suite *kt_suite_attention(void);
Suite *kt_suite_adamw(void);

#endif
