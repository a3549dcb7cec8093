/* kernels_gpu_compare: every CUDA kernel against its CPU twin, on the same random
 * inputs, in fp32 and in bf16 mode, at two shapes (one with T, V and row counts that
 * are not multiples of 32, and HS = 128, the CUDA twin's limit). Prints, per op and
 * output, the largest absolute difference and that difference relative to the largest
 * CPU value, then PASS or FAIL. Backward ops get the same (CPU forward) inputs on both
 * sides, so each op is judged alone. Needs a GPU; exit status 0 when all pass.
 *
 *   build/tests/kernels_gpu_compare        (run by scripts/gpu-check.sh) */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bf16.h"
#include "kernels/kernels.h"

#define CHECK(call)                                                                          \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(2);                                                                         \
        }                                                                                    \
    } while (0)

static const kernels_ops *K_CPU, *K_GPU;
static kernels_ctx ctx_cpu, ctx_gpu;
static int failures, checks;

/* ---- random numbers ---- */
static unsigned long long rng = 12345;
static float randn(void) {
    double u[2];
    for (int i = 0; i < 2; i++) {
        unsigned long long z = (rng += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        u[i] = ((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
    }
    return (float)(sqrt(-2.0 * log(u[0] + 1e-300)) * cos(6.283185307179586 * u[1]));
}

/* ---- a tensor held twice: host bytes for the CPU twin, device bytes for CUDA ---- */
typedef struct tensor {
    size_t n;
    kernels_dtype dt;
    void *h, *d;
} tensor;

static size_t bytes_of(const tensor *t) { return t->n * kernels_dtype_size(t->dt); }

static void put(tensor *t, size_t i, float v) {
    if (t->dt == KERNELS_BF16)
        ((kernels_bf16 *)t->h)[i] = kernels_f32_to_bf16(v);
    else
        ((float *)t->h)[i] = v;
}

static float get(const void *p, kernels_dtype dt, size_t i) {
    return dt == KERNELS_BF16 ? kernels_bf16_to_f32(((const kernels_bf16 *)p)[i]) : ((const float *)p)[i];
}

/* Host contents to the device (so both twins start from the same bytes). */
static void upload(tensor *t) { CHECK(cudaMemcpy(t->d, t->h, bytes_of(t), cudaMemcpyHostToDevice)); }

static tensor mk(size_t n, kernels_dtype dt, float scale) {
    tensor t = {n, dt, calloc(n ? n : 1, kernels_dtype_size(dt)), NULL};
    CHECK(cudaMalloc(&t.d, bytes_of(&t) ? bytes_of(&t) : 1));
    if (scale != 0.0f)
        for (size_t i = 0; i < n; i++)
            put(&t, i, scale * randn());
    upload(&t);
    return t;
}

static void drop(tensor *t) {
    free(t->h);
    CHECK(cudaFree(t->d));
    memset(t, 0, sizeof *t);
}

static int *mk_tokens(size_t n, int V, int **dev) {
    int *h = malloc(n * sizeof(int));
    for (size_t i = 0; i < n; i++)
        h[i] = (int)((i * 2654435761u) % (unsigned)V);
    CHECK(cudaMalloc((void **)dev, n * sizeof(int)));
    CHECK(cudaMemcpy(*dev, h, n * sizeof(int), cudaMemcpyHostToDevice));
    return h;
}

static const char *dt_name(kernels_dtype dt) { return dt == KERNELS_BF16 ? "bf16" : "fp32"; }

/* Compare the GPU's copy of t with the CPU's. tol is on max_abs / max|cpu|. */
static void compare(const char *op, const char *what, kernels_dtype mode, const tensor *t, double tol) {
    CHECK(cudaStreamSynchronize((cudaStream_t)ctx_gpu.stream));
    void *g = malloc(bytes_of(t) ? bytes_of(t) : 1);
    CHECK(cudaMemcpy(g, t->d, bytes_of(t), cudaMemcpyDeviceToHost));
    double max_abs = 0.0, max_ref = 0.0;
    int bad = 0;
    for (size_t i = 0; i < t->n; i++) {
        double c = get(t->h, t->dt, i), d = get(g, t->dt, i);
        if (isnan(c) != isnan(d) || isinf(c) != isinf(d))
            bad = 1;
        if (!isfinite(c) || !isfinite(d))
            continue;
        max_abs = fmax(max_abs, fabs(c - d));
        max_ref = fmax(max_ref, fabs(c));
    }
    double rel = max_ref > 0 ? max_abs / max_ref : max_abs;
    int pass = !bad && rel <= tol;
    checks++;
    failures += !pass;
    printf("%-22s %-5s %-9s max_abs %-10.3g max_rel %-10.3g tol %-8.0e %s\n", op, dt_name(mode), what, max_abs, rel,
           tol, pass ? "PASS" : "FAIL");
    free(g);
}

/* Outputs stored in bf16 may differ by a rounding step; fp32 ones by summation order. */
static double tol_for(const tensor *t, kernels_dtype mode) {
    if (t->dt == KERNELS_BF16)
        return 1e-2;
    return mode == KERNELS_BF16 ? 1e-3 : 1e-4;
}

#define CMP(op, what, mode, t) compare(op, what, mode, &(t), tol_for(&(t), mode))

/* ---- the ops ---- */
typedef struct shape {
    int B, T, C, NH, V, Vp;
} shape;

static void run_shape(shape s, kernels_dtype dt) {
    int B = s.B, T = s.T, C = s.C, NH = s.NH, V = s.V, Vp = s.Vp, OC = 4 * C;
    size_t BT = (size_t)B * T;
    const kernels_dtype F = KERNELS_F32;
    printf("-- B=%d T=%d C=%d NH=%d (HS=%d) V=%d Vp=%d, %s\n", B, T, C, NH, C / NH, V, Vp, dt_name(dt));

    /* embedding */
    int *tok_d, *tok = mk_tokens(BT, V, &tok_d);
    {
        tensor wte = mk((size_t)V * C, F, 0.5f), wpe = mk((size_t)T * C, F, 0.5f), out = mk(BT * C, dt, 0);
        K_CPU->embedding_forward(&ctx_cpu, out.h, tok, wte.h, wpe.h, B, T, C, dt);
        K_GPU->embedding_forward(&ctx_gpu, out.d, tok_d, wte.d, wpe.d, B, T, C, dt);
        CMP("embedding_forward", "out", dt, out);
        tensor dout = mk(BT * C, dt, 1), dwte = mk((size_t)V * C, F, 1), dwpe = mk((size_t)T * C, F, 1);
        K_CPU->embedding_backward(&ctx_cpu, dwte.h, dwpe.h, dout.h, tok, B, T, C, dt);
        K_GPU->embedding_backward(&ctx_gpu, dwte.d, dwpe.d, dout.d, tok_d, B, T, C, dt);
        CMP("embedding_backward", "dwte", dt, dwte);
        CMP("embedding_backward", "dwpe", dt, dwpe);
        drop(&wte), drop(&wpe), drop(&out), drop(&dout), drop(&dwte), drop(&dwpe);
    }
    /* matmul, with bias and dinp, then without */
    for (int with_bias = 1; with_bias >= 0; with_bias--) {
        const char *fw = with_bias ? "matmul_forward" : "matmul_forward/nobias";
        const char *bw = with_bias ? "matmul_backward" : "matmul_backward/nobias";
        tensor inp = mk(BT * C, dt, 1), w = mk((size_t)OC * C, dt, 0.05f), bias = mk(OC, dt, 0.5f), out = mk(BT * OC, dt, 0);
        K_CPU->matmul_forward(&ctx_cpu, out.h, inp.h, w.h, with_bias ? bias.h : NULL, B, T, C, OC, dt);
        K_GPU->matmul_forward(&ctx_gpu, out.d, inp.d, w.d, with_bias ? bias.d : NULL, B, T, C, OC, dt);
        CMP(fw, "out", dt, out);
        tensor dout = mk(BT * OC, dt, 1), dinp = mk(BT * C, dt, 1), dw = mk((size_t)OC * C, F, 1), db = mk(OC, F, 1);
        K_CPU->matmul_backward(&ctx_cpu, with_bias ? dinp.h : NULL, dw.h, with_bias ? db.h : NULL, dout.h, inp.h, w.h, B, T, C, OC, dt);
        K_GPU->matmul_backward(&ctx_gpu, with_bias ? dinp.d : NULL, dw.d, with_bias ? db.d : NULL, dout.d, inp.d, w.d, B, T, C, OC, dt);
        CMP(bw, "dinp", dt, dinp);
        CMP(bw, "dweight", dt, dw);
        CMP(bw, "dbias", dt, db);
        drop(&inp), drop(&w), drop(&bias), drop(&out), drop(&dout), drop(&dinp), drop(&dw), drop(&db);
    }
    /* layernorm */
    {
        tensor inp = mk(BT * C, dt, 2), w = mk(C, F, 1), b = mk(C, F, 1), out = mk(BT * C, dt, 0);
        tensor mean = mk(BT, F, 0), rstd = mk(BT, F, 0);
        K_CPU->layernorm_forward(&ctx_cpu, out.h, mean.h, rstd.h, inp.h, w.h, b.h, B, T, C, dt);
        K_GPU->layernorm_forward(&ctx_gpu, out.d, mean.d, rstd.d, inp.d, w.d, b.d, B, T, C, dt);
        CMP("layernorm_forward", "out", dt, out);
        CMP("layernorm_forward", "mean", dt, mean);
        CMP("layernorm_forward", "rstd", dt, rstd);
        upload(&mean), upload(&rstd);
        tensor dout = mk(BT * C, dt, 1), dinp = mk(BT * C, dt, 1), dw = mk(C, F, 1), db = mk(C, F, 1);
        K_CPU->layernorm_backward(&ctx_cpu, dinp.h, dw.h, db.h, dout.h, inp.h, w.h, mean.h, rstd.h, B, T, C, dt);
        K_GPU->layernorm_backward(&ctx_gpu, dinp.d, dw.d, db.d, dout.d, inp.d, w.d, mean.d, rstd.d, B, T, C, dt);
        CMP("layernorm_backward", "dinp", dt, dinp);
        CMP("layernorm_backward", "dweight", dt, dw);
        CMP("layernorm_backward", "dbias", dt, db);
        drop(&inp), drop(&w), drop(&b), drop(&out), drop(&mean), drop(&rstd), drop(&dout), drop(&dinp), drop(&dw), drop(&db);
    }
    /* attention */
    {
        size_t na = (size_t)B * NH * T * T;
        tensor qkv = mk(BT * 3 * C, dt, 1), out = mk(BT * C, dt, 0), att = mk(na, dt, 0);
        K_CPU->attention_forward(&ctx_cpu, out.h, att.h, qkv.h, B, T, C, NH, dt);
        K_GPU->attention_forward(&ctx_gpu, out.d, att.d, qkv.d, B, T, C, NH, dt);
        CMP("attention_forward", "out", dt, out);
        CMP("attention_forward", "att", dt, att);
        upload(&out), upload(&att);
        tensor dout = mk(BT * C, dt, 1), dqkv = mk(BT * 3 * C, dt, 1);
        K_CPU->attention_backward(&ctx_cpu, dqkv.h, dout.h, qkv.h, att.h, out.h, B, T, C, NH, dt);
        K_GPU->attention_backward(&ctx_gpu, dqkv.d, dout.d, qkv.d, att.d, out.d, B, T, C, NH, dt);
        CMP("attention_backward", "dqkv", dt, dqkv);
        drop(&qkv), drop(&out), drop(&att), drop(&dout), drop(&dqkv);
    }
    /* gelu, residual */
    {
        size_t n = BT * OC;
        tensor x = mk(n, dt, 2), y = mk(n, dt, 1), out = mk(n, dt, 0), dout = mk(n, dt, 1), d1 = mk(n, dt, 1), d2 = mk(n, dt, 1);
        K_CPU->gelu_forward(&ctx_cpu, out.h, x.h, n, dt);
        K_GPU->gelu_forward(&ctx_gpu, out.d, x.d, n, dt);
        CMP("gelu_forward", "out", dt, out);
        K_CPU->gelu_backward(&ctx_cpu, d1.h, x.h, dout.h, n, dt);
        K_GPU->gelu_backward(&ctx_gpu, d1.d, x.d, dout.d, n, dt);
        CMP("gelu_backward", "dinp", dt, d1);
        K_CPU->residual_forward(&ctx_cpu, out.h, x.h, y.h, n, dt);
        K_GPU->residual_forward(&ctx_gpu, out.d, x.d, y.d, n, dt);
        CMP("residual_forward", "out", dt, out);
        upload(&d1);
        K_CPU->residual_backward(&ctx_cpu, d1.h, d2.h, dout.h, n, dt);
        K_GPU->residual_backward(&ctx_gpu, d1.d, d2.d, dout.d, n, dt);
        CMP("residual_backward", "dinp1", dt, d1);
        CMP("residual_backward", "dinp2", dt, d2);
        drop(&x), drop(&y), drop(&out), drop(&dout), drop(&d1), drop(&d2);
    }
    /* crossentropy, then in place */
    {
        tensor logits = mk(BT * Vp, dt, 3), losses = mk(BT, F, 0), dl = mk(BT * Vp, dt, 7);
        K_CPU->crossentropy_forward(&ctx_cpu, losses.h, logits.h, tok, B, T, V, Vp, dt);
        K_GPU->crossentropy_forward(&ctx_gpu, losses.d, logits.d, tok_d, B, T, V, Vp, dt);
        CMP("crossentropy_forward", "losses", dt, losses);
        float scale = 1.0f / (float)(BT * 4);
        K_CPU->crossentropy_backward(&ctx_cpu, dl.h, logits.h, tok, scale, B, T, V, Vp, dt);
        K_GPU->crossentropy_backward(&ctx_gpu, dl.d, logits.d, tok_d, scale, B, T, V, Vp, dt);
        CMP("crossentropy_backward", "dlogits", dt, dl);
        K_CPU->crossentropy_backward(&ctx_cpu, logits.h, logits.h, tok, scale, B, T, V, Vp, dt);
        K_GPU->crossentropy_backward(&ctx_gpu, logits.d, logits.d, tok_d, scale, B, T, V, Vp, dt);
        CMP("crossentropy_bwd/inplace", "dlogits", dt, logits);
        drop(&logits), drop(&losses), drop(&dl);
    }
    free(tok);
    CHECK(cudaFree(tok_d));
}

static void run_fp32_only(void) {
    const kernels_dtype F = KERNELS_F32;
    printf("-- adamw and casts\n");
    size_t n = 100003;
    tensor p = mk(n, F, 1), g = mk(n, F, 1), m = mk(n, F, 0), v = mk(n, F, 0);
    for (int step = 1; step <= 3; step++) {
        K_CPU->adamw_update(&ctx_cpu, p.h, g.h, m.h, v.h, n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, step);
        K_GPU->adamw_update(&ctx_gpu, p.d, g.d, m.d, v.d, n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, step);
    }
    compare("adamw_update", "params", F, &p, 1e-5);
    compare("adamw_update", "m", F, &m, 1e-5);
    compare("adamw_update", "v", F, &v, 1e-5);
    /* casts: bit for bit, ties, NaN, Inf and overflow included */
    tensor f = mk(n, F, 100), h = mk(n, KERNELS_BF16, 0), back = mk(n, F, 0);
    float special[] = {NAN, INFINITY, -INFINITY, 3.4e38f, -0.0f, 1.00390625f, 1.01171875f, 1e-40f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        ((float *)f.h)[i] = special[i];
    upload(&f);
    K_CPU->cast_f32_to_bf16(&ctx_cpu, h.h, f.h, n);
    K_GPU->cast_f32_to_bf16(&ctx_gpu, h.d, f.d, n);
    compare("cast_f32_to_bf16", "out", KERNELS_BF16, &h, 0.0);
    CHECK(cudaStreamSynchronize((cudaStream_t)ctx_gpu.stream));
    kernels_bf16 *hg = malloc(n * sizeof *hg);
    CHECK(cudaMemcpy(hg, h.d, n * sizeof *hg, cudaMemcpyDeviceToHost));
    int same_bits = memcmp(hg, h.h, n * sizeof *hg) == 0; /* NaN payloads too */
    checks++;
    failures += !same_bits;
    printf("%-22s %-5s %-9s %s\n", "cast_f32_to_bf16", "bits", "identical", same_bits ? "PASS" : "FAIL");
    free(hg);
    K_CPU->cast_bf16_to_f32(&ctx_cpu, back.h, h.h, n);
    K_GPU->cast_bf16_to_f32(&ctx_gpu, back.d, h.d, n);
    compare("cast_bf16_to_f32", "out", F, &back, 0.0);
    drop(&p), drop(&g), drop(&m), drop(&v), drop(&f), drop(&h), drop(&back);
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "kernels_gpu_compare: no CUDA device\n");
        return 2;
    }
    struct cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    K_CPU = kernels_cpu();
    K_GPU = kernels_cuda();
    if (!K_GPU) {
        fprintf(stderr, "kernels_gpu_compare: built without the CUDA twin\n");
        return 2;
    }
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream)); /* not the default stream: the ops must use ctx's */
    if (K_CPU->init(&ctx_cpu, NULL) != 0 || K_GPU->init(&ctx_gpu, stream) != 0) {
        fprintf(stderr, "kernels_gpu_compare: init failed\n");
        return 2;
    }
    shape shapes[] = {
        {4, 64, 256, 4, 1000, 1024},   /* HS 64 */
        {3, 67, 384, 3, 515, 520},     /* HS 128, odd T and V */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        run_shape(shapes[i], KERNELS_F32);
        run_shape(shapes[i], KERNELS_BF16);
    }
    run_fp32_only();
    CHECK(cudaStreamSynchronize(stream));
    K_GPU->destroy(&ctx_gpu);
    K_CPU->destroy(&ctx_cpu);
    CHECK(cudaStreamDestroy(stream));
    printf("%d of %d checks passed: %s\n", checks - failures, checks, failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
