/* A real driver's rules that a lenient simulator would let slip (issue 32),
 * each a mode run by tests/preload/run.sh under the preload on the simulated
 * device, and by scripts/gpu-check.sh on a GPU (without the held streams,
 * which only the simulator has: those modes say so and pass).
 *   prog_rules second-context */
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>

#include "tests/preload/simhooks.h"

#define MIB ((size_t)1 << 20)

static int on_sim;

/* The legacy stream of a context orders only that context's blocking
 * streams: work queued on a second context's stream (cuCtxCreate) on a block
 * of the primary context's allocator keeps the block from being handed out
 * again after a plain free, as long as the work is queued. */
static int second_context(void) {
    CUcontext primary, mine, popped;
    CUdeviceptr p, q, r;
    CUstream s;
    CHECK(cuInit(0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS &&
              cuCtxSetCurrent(primary) == CUDA_SUCCESS,
          "the primary context");
    CHECK(cuMemAlloc(&p, 4 * MIB) == CUDA_SUCCESS, "cuMemAlloc in the primary context");
    CHECK(cuCtxCreate(&mine, NULL, 0, 0) == CUDA_SUCCESS, "cuCtxCreate: a second context, current");
    CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS, "a blocking stream in it");
    CHECK(hold(s, 1) == 0 && cuMemsetD8Async(p, 1, 4 * MIB, s) == CUDA_SUCCESS, "work on the block queued there");
    CHECK(cuCtxPopCurrent(&popped) == CUDA_SUCCESS && popped == mine, "back to the primary context");
    CHECK(cuMemFree(p) == CUDA_SUCCESS, "cuMemFree");
    CHECK(cuMemAlloc(&q, 4 * MIB) == CUDA_SUCCESS && q != p,
          "the block came back while the second context's stream still had work queued on it: %#llx",
          (unsigned long long)q);
    CHECK(hold(s, 0) == 0, "the stream runs");
    CHECK(cuMemAlloc(&r, 4 * MIB) == CUDA_SUCCESS && r == p, "back once it ran: %#llx %#llx", (unsigned long long)r,
          (unsigned long long)p);
    cuMemFree(q);
    cuMemFree(r);
    CHECK(cuCtxPushCurrent(mine) == CUDA_SUCCESS && cuStreamDestroy(s) == CUDA_SUCCESS, "the stream goes");
    CHECK(cuCtxDestroy(mine) == CUDA_SUCCESS, "the second context goes");
    CHECK(cuCtxSetCurrent(primary) == CUDA_SUCCESS, "the primary context");
    all_back(0, "second-context");
    CHECK_DONE("second-context");
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    on_sim = simhooks_init();
    if (!on_sim) {
        printf("%s: needs the simulated device's held streams: skipped\n", mode);
        return 0;
    }
    if (!strcmp(mode, "second-context")) return second_context();
    fprintf(stderr, "usage: prog_rules second-context\n");
    return 2;
}
