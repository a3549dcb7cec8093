/* An ordinary CUDA runtime program, for the whole-program tests: built against
 * the toolkit's headers, linked with -lcudart (simgpu's, or the toolkit's real
 * one), run with LD_LIBRARY_PATH pointing at simgpu. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                                      \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

int main(void)
{
    int n = 0;
    struct cudaDeviceProp prop;
    char msg[] = "round trip", back[sizeof msg];
    void *d;
    CHECK(cudaGetDeviceCount(&n));
    CHECK(cudaGetDeviceProperties(&prop, 0));
    CHECK(cudaMalloc(&d, sizeof msg));
    CHECK(cudaMemcpy(d, msg, sizeof msg, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(back, d, sizeof msg, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(d));
    if (strcmp(back, msg) != 0 || n < 1)
        return 1;
    printf("%d device(s): %s, compute capability %d.%d, %zu MiB\n", n, prop.name, prop.major,
           prop.minor, prop.totalGlobalMem >> 20);
    return 0;
}
