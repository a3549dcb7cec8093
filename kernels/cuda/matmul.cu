/* Matmul with optional bias (CUDA twin of kernels/cpu/matmul.c), on cuBLASLt.
 *
 * cuBLASLt is column-major; a row-major (R,K) matrix is, to it, a column-major (K,R)
 * one with leading dimension K. So every product below is written for the transposes:
 *   forward  out^T (OC,BT)   = weight^T-view^T (OC,C) . inp^T (C,BT)     m=OC n=BT k=C
 *   dinp     dinp^T (C,BT)   = weight^T (C,OC) . dout^T (OC,BT)          m=C  n=BT k=OC
 *   dweight  dweight^T (C,OC) = inp^T (C,BT) . (dout^T)^T (BT,OC)        m=C  n=OC k=BT
 * Compute type is CUBLAS_COMPUTE_32F in both modes: fp32 accumulation, and for fp32
 * inputs no TF32 (that would be CUBLAS_COMPUTE_32F_FAST_TF32). The weight gradient
 * reads bf16 (or fp32) inputs and accumulates into fp32 (C = D = dweight, beta = 1).
 * The bias rides in cuBLASLt's epilogue, in the output's type, as kernels.h says. */
#include <stdio.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cublaslt.cuh"

/* D (m,n) = op(A) op(B) [+ bias] + beta * D. A is (m,k) after op, B (k,n) after op. */
static void lt_matmul(kernels_ctx *ctx, void *d, cudaDataType_t dtype_d, int ldd, const void *a, bool transa,
                      int lda, const void *b, bool transb, int ldb, cudaDataType_t dtype_ab, const void *bias,
                      int m, int n, int k, float beta) {
    cublasLtMatmulDesc_t desc;
    cublasCheck(ca_lt.desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(ca_lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    cublasCheck(ca_lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS; /* adds bias[row of D] */
        cublasCheck(ca_lt.desc_set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        cublasCheck(ca_lt.desc_set(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    cublasLtMatrixLayout_t la, lb, ld;
    cublasCheck(ca_lt.layout_create(&la, dtype_ab, transa ? k : m, transa ? m : k, lda));
    cublasCheck(ca_lt.layout_create(&lb, dtype_ab, transb ? n : k, transb ? k : n, ldb));
    cublasCheck(ca_lt.layout_create(&ld, dtype_d, m, n, ldd));
    cublasLtMatmulPreference_t pref;
    cublasCheck(ca_lt.pref_create(&pref));
    size_t ws = ctx->workspace_size;
    cublasCheck(ca_lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    cublasStatus_t st = ca_lt.heuristic((cublasLtHandle_t)ctx->lt, desc, la, lb, ld, ld, pref, 1, &heur, &found);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
        char what[160];
        snprintf(what, sizeof what, "cuBLASLt has no algorithm (%s) for m=%d n=%d k=%d A,B type %d, D type %d, bias %d",
                 ca_lt.status_string(st), m, n, k, (int)dtype_ab, (int)dtype_d, bias != nullptr);
        ca_kernels_cuda_fail(what, __FILE__, __LINE__);
    }
    const float alpha = 1.0f;
    cublasCheck(ca_lt.matmul((cublasLtHandle_t)ctx->lt, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heur.algo,
                             ctx->workspace, ctx->workspace_size, stream_of(ctx)));
    /* Descriptors are host objects; destroying them does not wait for the GPU. */
    cublasCheck(ca_lt.pref_destroy(pref));
    cublasCheck(ca_lt.layout_destroy(la));
    cublasCheck(ca_lt.layout_destroy(lb));
    cublasCheck(ca_lt.layout_destroy(ld));
    cublasCheck(ca_lt.desc_destroy(desc));
}

static cudaDataType_t cuda_type(kernels_dtype dt) { return dt == KERNELS_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

void cuda_matmul_forward(kernels_ctx *ctx,
                         void *out,            // (B,T,OC) [dt]
                         const void *inp,      // (B,T,C) [dt]
                         const void *weight,   // (OC,C) [dt]
                         const void *bias,     // (OC) [dt] or NULL
                         int B, int T, int C, int OC, kernels_dtype dt) {
    CUDA_REQUIRE(B >= 0 && T >= 0 && C > 0 && OC > 0);
    CUDA_REQUIRE(dt == KERNELS_F32 || dt == KERNELS_BF16);
    CUDA_REQUIRE(ctx->lt != NULL);
    int BT = B * T;
    if (BT == 0)
        return;
    cudaDataType_t t = cuda_type(dt);
    lt_matmul(ctx, out, t, OC, weight, true, C, inp, false, C, t, bias, OC, BT, C, 0.0f);
}

/* dbias[o] += sum over rows of dout[:,o]. Block (32, 8): x walks 32 adjacent columns
 * (coalesced), y and blockIdx.y split the rows; one atomic per column per block. */
template <typename F>
__global__ void matmul_backward_bias_kernel(float *dbias, const F *dout, int BT, int OC) {
    __shared__ float part[8][33];
    int o = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (o < OC)
        for (int r = blockIdx.y * 8 + threadIdx.y; r < BT; r += gridDim.y * 8)
            s += ldf(dout[(size_t)r * OC + o]);
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && o < OC) {
        for (int y = 1; y < 8; y++)
            s += part[y][threadIdx.x];
        atomicAdd(&dbias[o], s);
    }
}

template <typename F>
static void matmul_bwd_bias(kernels_ctx *ctx, float *dbias, const void *dout, int BT, int OC) {
    unsigned gy = (unsigned)((BT + 255) / 256);
    if (gy > 64)
        gy = 64;
    dim3 grid((unsigned)((OC + 31) / 32), gy), block(32, 8);
    matmul_backward_bias_kernel<F><<<grid, block, 0, stream_of(ctx)>>>(dbias, (const F *)dout, BT, OC);
    cudaCheckLaunch();
}

void cuda_matmul_backward(kernels_ctx *ctx,
                          void *dinp,           // (B,T,C) [dt] += or NULL
                          float *dweight,       // (OC,C) +=
                          float *dbias,         // (OC) += or NULL
                          const void *dout,     // (B,T,OC) [dt]
                          const void *inp,      // (B,T,C) [dt]
                          const void *weight,   // (OC,C) [dt]
                          int B, int T, int C, int OC, kernels_dtype dt) {
    CUDA_REQUIRE(B >= 0 && T >= 0 && C > 0 && OC > 0);
    CUDA_REQUIRE(dt == KERNELS_F32 || dt == KERNELS_BF16);
    CUDA_REQUIRE(ctx->lt != NULL);
    int BT = B * T;
    if (BT == 0)
        return;
    cudaDataType_t t = cuda_type(dt);
    if (dinp)
        lt_matmul(ctx, dinp, t, C, weight, false, C, dout, false, OC, t, nullptr, C, BT, OC, 1.0f);
    lt_matmul(ctx, dweight, CUDA_R_32F, C, inp, false, C, dout, true, OC, t, nullptr, C, OC, BT, 1.0f);
    if (dbias)
        CUDA_DISPATCH(dt, matmul_bwd_bias, ctx, dbias, dout, BT, OC);
}
