/* Matmul with optional bias (CPU twin of kernels/cuda/matmul.cu, which calls cuBLASLt).
 *
 * out (B*T,OC) = inp (B*T,C) @ weight (OC,C)^T + bias. bf16 inputs are widened as
 * they are loaded and every sum is fp32; the result is rounded once when stored.
 *
 * Loop shapes, for speed without -ffast-math: every product is written as axpy loops
 * (y[:] += a * x[:]) rather than dot products, because gcc vectorizes an axpy but may
 * not reorder the sum of a dot product. For the forward that means reading the weight
 * transposed: each thread copies a panel of MM_PANEL output channels into [c][o] order
 * (widening bf16 once) and keeps it in cache while all rows go through it. Rows come in
 * tiles of MM_ROWS so each weight element loaded feeds several rows, and the backward
 * works in blocks of MM_BLOCK rows and channels so the operands stay in cache. */
#include "kernels/cpu/common.h"

#define MM_ROWS 4
#define MM_PANEL 128
#define MM_BLOCK 64

static inline int imin(int a, int b) { return a < b ? a : b; }

CPU_INLINE void matmul_fwd(void *out, const void *inp, const void *weight, const void *bias,
                           int BT, int C, int OC, kernels_dtype dt) {
    CPU_PARALLEL_FOR
    for (int ob = 0; ob < OC; ob += MM_PANEL) {
        int ow = imin(MM_PANEL, OC - ob);
        /* panel[c][o] = weight[ob+o][c], widened to fp32. */
        float *panel = malloc((size_t)C * MM_PANEL * sizeof(float));
        CPU_REQUIRE(panel != NULL);
        for (int o = 0; o < ow; o++)
            for (int c = 0; c < C; c++)
                panel[(size_t)c * MM_PANEL + o] = ld(weight, (size_t)(ob + o) * C + c, dt);
        for (int r0 = 0; r0 < BT; r0 += MM_ROWS) {
            int nr = imin(MM_ROWS, BT - r0);
            /* A short last tile repeats its last row; those sums are not stored. */
            size_t row[MM_ROWS];
            for (int r = 0; r < MM_ROWS; r++)
                row[r] = (size_t)(r0 + imin(r, nr - 1)) * C;
            float acc[MM_ROWS][MM_PANEL];
            for (int o = 0; o < ow; o++) {
                float b = bias ? ld(bias, (size_t)ob + o, dt) : 0.0f;
                for (int r = 0; r < MM_ROWS; r++)
                    acc[r][o] = b;
            }
            for (int c = 0; c < C; c++) {
                float x0 = ld(inp, row[0] + c, dt), x1 = ld(inp, row[1] + c, dt);
                float x2 = ld(inp, row[2] + c, dt), x3 = ld(inp, row[3] + c, dt);
                const float *restrict w = panel + (size_t)c * MM_PANEL;
                for (int o = 0; o < ow; o++) {
                    acc[0][o] += x0 * w[o];
                    acc[1][o] += x1 * w[o];
                    acc[2][o] += x2 * w[o];
                    acc[3][o] += x3 * w[o];
                }
            }
            for (int r = 0; r < nr; r++)
                for (int o = 0; o < ow; o++)
                    st(out, (size_t)(r0 + r) * OC + ob + o, acc[r][o], dt);
        }
        free(panel);
    }
}

void cpu_matmul_forward(kernels_ctx *ctx,
                        void *out,            // (B,T,OC) [dt]
                        const void *inp,      // (B,T,C) [dt]
                        const void *weight,   // (OC,C) [dt]
                        const void *bias,     // (OC) [dt] or NULL
                        int B, int T, int C, int OC, kernels_dtype dt) {
    CPU_REQUIRE(B >= 0 && T >= 0 && C > 0 && OC > 0);
    CPU_DISPATCH(dt, matmul_fwd, out, inp, weight, bias, B * T, C, OC);
}

/* dinp (BT,C) += dout (BT,OC) @ weight (OC,C): per row, a sum over o of dout[o] times
 * weight row o. Sums go to an fp32 buffer so a bf16 dinp is rounded once, at the end. */
CPU_INLINE void matmul_bwd_inp(void *dinp, const void *dout, const void *weight,
                               int BT, int C, int OC, kernels_dtype dt) {
    CPU_PARALLEL_FOR
    for (int rb = 0; rb < BT; rb += MM_BLOCK) {
        int rend = imin(rb + MM_BLOCK, BT);
        float *acc = calloc((size_t)(rend - rb) * C, sizeof(float));
        CPU_REQUIRE(acc != NULL);
        for (int ob = 0; ob < OC; ob += MM_BLOCK) {
            int oend = imin(ob + MM_BLOCK, OC);
            for (int r0 = rb; r0 < rend; r0 += MM_ROWS) {
                int nr = imin(MM_ROWS, rend - r0);
                float *a[MM_ROWS];
                for (int r = 0; r < MM_ROWS; r++)
                    a[r] = acc + (size_t)(r0 - rb + imin(r, nr - 1)) * C;
                for (int o = ob; o < oend; o++) {
                    float d[MM_ROWS];
                    for (int r = 0; r < MM_ROWS; r++)
                        d[r] = r < nr ? ld(dout, (size_t)(r0 + r) * OC + o, dt) : 0.0f;
                    size_t wrow = (size_t)o * C;
                    if (nr == MM_ROWS) {
                        float *restrict a0 = a[0], *restrict a1 = a[1];
                        float *restrict a2 = a[2], *restrict a3 = a[3];
                        for (int c = 0; c < C; c++) {
                            float w = ld(weight, wrow + c, dt);
                            a0[c] += d[0] * w;
                            a1[c] += d[1] * w;
                            a2[c] += d[2] * w;
                            a3[c] += d[3] * w;
                        }
                    } else {
                        for (int r = 0; r < nr; r++) {
                            float *restrict ar = a[r];
                            for (int c = 0; c < C; c++)
                                ar[c] += d[r] * ld(weight, wrow + c, dt);
                        }
                    }
                }
            }
        }
        for (int r = rb; r < rend; r++)
            for (int c = 0; c < C; c++) {
                size_t i = (size_t)r * C + c;
                st(dinp, i, ld(dinp, i, dt) + acc[(size_t)(r - rb) * C + c], dt);
            }
        free(acc);
    }
}

/* dweight (OC,C) += dout^T (OC,BT) @ inp (BT,C): weight row o gets a sum over rows of
 * dout[r,o] times inp row r. dbias[o] += the sum over rows of dout[r,o]. */
CPU_INLINE void matmul_bwd_weight(float *dweight, float *dbias, const void *dout,
                                  const void *inp, int BT, int C, int OC, kernels_dtype dt) {
    CPU_PARALLEL_FOR
    for (int ob = 0; ob < OC; ob += MM_BLOCK) {
        int oend = imin(ob + MM_BLOCK, OC);
        for (int r0 = 0; r0 < BT; r0 += MM_ROWS) {
            int nr = imin(MM_ROWS, BT - r0);
            size_t x[MM_ROWS];
            for (int r = 0; r < MM_ROWS; r++)
                x[r] = (size_t)(r0 + imin(r, nr - 1)) * C;
            for (int o = ob; o < oend; o++) {
                float d[MM_ROWS];
                for (int r = 0; r < MM_ROWS; r++)
                    d[r] = r < nr ? ld(dout, (size_t)(r0 + r) * OC + o, dt) : 0.0f;
                float *restrict dw = dweight + (size_t)o * C;
                for (int c = 0; c < C; c++)
                    dw[c] += d[0] * ld(inp, x[0] + c, dt) + d[1] * ld(inp, x[1] + c, dt) +
                             d[2] * ld(inp, x[2] + c, dt) + d[3] * ld(inp, x[3] + c, dt);
            }
        }
        if (dbias)
            for (int o = ob; o < oend; o++) {
                float sum = 0.0f;
                for (int r = 0; r < BT; r++)
                    sum += ld(dout, (size_t)r * OC + o, dt);
                dbias[o] += sum;
            }
    }
}

CPU_INLINE void matmul_bwd(void *dinp, float *dweight, float *dbias, const void *dout,
                           const void *inp, const void *weight, int BT, int C, int OC,
                           kernels_dtype dt) {
    if (dinp)
        matmul_bwd_inp(dinp, dout, weight, BT, C, OC, dt);
    matmul_bwd_weight(dweight, dbias, dout, inp, BT, C, OC, dt);
}

void cpu_matmul_backward(kernels_ctx *ctx,
                         void *dinp,           // (B,T,C) [dt] += or NULL
                         float *dweight,       // (OC,C) +=
                         float *dbias,         // (OC) += or NULL
                         const void *dout,     // (B,T,OC) [dt]
                         const void *inp,      // (B,T,C) [dt]
                         const void *weight,   // (OC,C) [dt]
                         int B, int T, int C, int OC, kernels_dtype dt) {
    CPU_REQUIRE(B >= 0 && T >= 0 && C > 0 && OC > 0);
    CPU_DISPATCH(dt, matmul_bwd, dinp, dweight, dbias, dout, inp, weight, B * T, C, OC);
}
