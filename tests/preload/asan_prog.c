/* A program built with -fsanitize=address (the dynamic libasan): its runtime
 * refuses to start unless it comes first in LD_PRELOAD (the launcher puts it
 * there). It allocates device memory through the runtime so cudalloc is used. */
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void) {
    void *p = NULL;
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return 1;
    int rc = cudaFree(p) == cudaSuccess ? 0 : 2;
    printf("asan program: %s\n", rc ? "FAILED" : "ok");
    return rc;
}
