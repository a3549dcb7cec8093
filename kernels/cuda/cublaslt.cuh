/* cuBLASLt, loaded with dlopen at cuda_init rather than linked, so a binary carrying
 * the CUDA twin starts on machines without cuBLASLt (or without a GPU) and runs the
 * CPU twin there. The function pointers take their types from cublasLt.h, so a
 * mismatch with the header is a compile error. */
#ifndef KERNELS_CUDA_CUBLASLT_CUH
#define KERNELS_CUDA_CUBLASLT_CUH

#include <cublasLt.h>

struct ca_lt_api {
    decltype(&cublasLtCreate) create;
    decltype(&cublasLtDestroy) destroy;
    decltype(&cublasLtGetStatusString) status_string;
    decltype(&cublasLtMatmulDescCreate) desc_create;
    decltype(&cublasLtMatmulDescDestroy) desc_destroy;
    decltype(&cublasLtMatmulDescSetAttribute) desc_set;
    decltype(&cublasLtMatrixLayoutCreate) layout_create;
    decltype(&cublasLtMatrixLayoutDestroy) layout_destroy;
    decltype(&cublasLtMatmulPreferenceCreate) pref_create;
    decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy;
    decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set;
    decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
    decltype(&cublasLtMatmul) matmul;
};

/* Filled by ca_lt_load(); valid once it has returned 0. */
extern ca_lt_api ca_lt;

/* Loads libcublasLt.so.13 once (thread-safe): first by name (LD_LIBRARY_PATH, the
 * program's RUNPATH, ld.so.conf), then from the toolkit this was built with. 0 on
 * success; -1 with the reason on stderr. */
int ca_lt_load(void);

#define cublasCheck(call)                                                            \
    do {                                                                             \
        cublasStatus_t st_ = (call);                                                 \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                            \
            ca_kernels_cuda_fail(ca_lt.status_string ? ca_lt.status_string(st_)      \
                                                     : "cuBLASLt error",             \
                                 __FILE__, __LINE__);                                \
    } while (0)

#endif /* KERNELS_CUDA_CUBLASLT_CUH */
