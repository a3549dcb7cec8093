/* Loads cuBLASLt at run time; see cublaslt.cuh for why. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cublaslt.cuh"

#ifndef KERNELS_CUDA_HOME
#define KERNELS_CUDA_HOME "/usr/local/cuda"
#endif

ca_lt_api ca_lt;

static pthread_once_t lt_once = PTHREAD_ONCE_INIT;
static int lt_status = -1;

template <typename P> static bool lt_sym(void *lib, const char *name, P *out) {
    *out = (P)dlsym(lib, name);
    if (!*out)
        fprintf(stderr, "kernels (cuda): libcublasLt.so.13 lacks %s\n", name);
    return *out != nullptr;
}

static void lt_load_once(void) {
    const char *paths[] = {"libcublasLt.so.13", KERNELS_CUDA_HOME "/lib64/libcublasLt.so.13"};
    void *lib = nullptr;
    for (const char *p : paths)
        if ((lib = dlopen(p, RTLD_NOW | RTLD_LOCAL)))
            break;
    if (!lib) {
        fprintf(stderr, "kernels (cuda): cannot load cuBLASLt (%s); add its directory to LD_LIBRARY_PATH\n", dlerror());
        return;
    }
    ca_lt_api a;
    bool ok = lt_sym(lib, "cublasLtCreate", &a.create) && lt_sym(lib, "cublasLtDestroy", &a.destroy) &&
              lt_sym(lib, "cublasLtGetStatusString", &a.status_string) &&
              lt_sym(lib, "cublasLtMatmulDescCreate", &a.desc_create) &&
              lt_sym(lib, "cublasLtMatmulDescDestroy", &a.desc_destroy) &&
              lt_sym(lib, "cublasLtMatmulDescSetAttribute", &a.desc_set) &&
              lt_sym(lib, "cublasLtMatrixLayoutCreate", &a.layout_create) &&
              lt_sym(lib, "cublasLtMatrixLayoutDestroy", &a.layout_destroy) &&
              lt_sym(lib, "cublasLtMatmulPreferenceCreate", &a.pref_create) &&
              lt_sym(lib, "cublasLtMatmulPreferenceDestroy", &a.pref_destroy) &&
              lt_sym(lib, "cublasLtMatmulPreferenceSetAttribute", &a.pref_set) &&
              lt_sym(lib, "cublasLtMatmulAlgoGetHeuristic", &a.heuristic) &&
              lt_sym(lib, "cublasLtMatmul", &a.matmul);
    if (!ok)
        return; /* the library stays loaded; harmless */
    ca_lt = a;
    lt_status = 0;
}

int ca_lt_load(void) {
    pthread_once(&lt_once, lt_load_once);
    return lt_status;
}
