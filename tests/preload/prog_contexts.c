/* Contexts come and go under cudalloc as under CUDA: memory allocated in a
 * context goes with it (cuCtxDestroy, the primary context's last release),
 * allocations go on in the next context, and an event is recorded only on a
 * stream of its own context. Run under the preload (both segment kinds) and
 * on the simulated device alone: all must pass.
 *   prog_contexts destroy|release|streams */
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>

#include "include/cudalloc.h"
#include "tests/preload/check.h"

#define MIB ((size_t)1 << 20)

static int under_cudalloc(void) { return CUDALLOC_CALL(cudalloc_get_stats, 0, &(cudalloc_stats){0}) == 0; }

static long long allocated(void) {
    cudalloc_stats s = {0};
    return CUDALLOC_CALL(cudalloc_get_stats, 0, &s) == 0 ? (long long)s.allocated_bytes : 0;
}

/* Allocates, writes and reads back in the current context. */
static int usable(size_t size, const char *what) {
    CUdeviceptr p;
    unsigned char h = 0;
    int ok = cuMemAlloc(&p, size) == CUDA_SUCCESS && cuMemsetD8(p, 0x5a, size) == CUDA_SUCCESS &&
             cuMemcpyDtoH(&h, p + size - 1, 1) == CUDA_SUCCESS && h == 0x5a;
    CHECK(ok, "%s: memory allocated, written and read back", what);
    if (ok) cuMemFree(p);
    return ok;
}

/* A context of its own: what it allocated goes with it; the primary context
 * allocates after it. */
static int destroy(void) {
    CUcontext mine, primary;
    CUdeviceptr p;
    CHECK(cuInit(0) == CUDA_SUCCESS && cuCtxCreate(&mine, NULL, 0, 0) == CUDA_SUCCESS, "cuCtxCreate");
    CHECK(cuMemAlloc(&p, 4 * MIB) == CUDA_SUCCESS, "cuMemAlloc in it");
    CHECK(cuCtxDestroy(mine) == CUDA_SUCCESS, "cuCtxDestroy");
    CHECK(allocated() == 0, "its allocation went with it: %lld bytes left", allocated());
    CHECK(cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS && cuCtxSetCurrent(primary) == CUDA_SUCCESS,
          "the primary context");
    usable(4 * MIB, "after the destroy");
    CHECK(cuMemFree(p) == CUDA_ERROR_INVALID_VALUE, "its memory is gone: freeing it is an error");
    CHECK_DONE("contexts-destroy");
}

/* The primary context's last release destroys it; a new retain allocates. */
static int release(void) {
    CUcontext primary;
    CUdeviceptr p;
    CHECK(cuInit(0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS &&
              cuCtxSetCurrent(primary) == CUDA_SUCCESS,
          "retain");
    CHECK(cuMemAlloc(&p, 4 * MIB) == CUDA_SUCCESS, "cuMemAlloc");
    CHECK(cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS && cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS,
          "a retain and a release: not the last");
    CHECK(!under_cudalloc() || allocated() == 4 * MIB, "still allocated");
    CHECK(cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS, "the last release");
    CHECK(allocated() == 0, "the allocation went with the context: %lld bytes left", allocated());
    CHECK(cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS && cuCtxSetCurrent(primary) == CUDA_SUCCESS,
          "retained again");
    usable(4 * MIB, "after the last release");
    usable(64 * MIB, "a larger one");
    CHECK_DONE("contexts-release");
}

/* A block of the primary context's legacy stream freed in the order of a
 * stream of another context: the event goes on that stream (made in its
 * context), and the legacy stream waits on it. */
static int streams(void) {
    CUcontext primary, other;
    CUdeviceptr p;
    CUstream s;
    void *driver = dlopen("libcuda.so.1", RTLD_NOW);
    int (*last_wait)(void *, void **) = (int (*)(void *, void **))dlsym(driver, "simgpu_stream_last_wait");
    CHECK(cuInit(0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS &&
              cuCtxSetCurrent(primary) == CUDA_SUCCESS,
          "primary");
    CHECK(cuMemAllocAsync(&p, 4 * MIB, NULL) == CUDA_SUCCESS, "in the primary context's legacy stream order");
    CHECK(cuCtxCreate(&other, NULL, 0, 0) == CUDA_SUCCESS && cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS,
          "a stream of another context");
    CHECK(cuMemFreeAsync(p, s) == CUDA_SUCCESS, "freed in its order");
    CHECK(cuCtxSetCurrent(primary) == CUDA_SUCCESS, "back");
    void *ev = NULL;
    if (under_cudalloc() && last_wait) /* cudalloc's reuse waits on the other stream (simgpu alone frees at once) */
        CHECK(last_wait(NULL, &ev) == 0 && ev, "the legacy stream waits on an event of the other context's stream");
    usable(4 * MIB, "after");
    CHECK(cuCtxDestroy(other) == CUDA_SUCCESS, "destroy the other");
    usable(4 * MIB, "and after that");
    CHECK_DONE("contexts-streams");
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "destroy")) return destroy();
    if (!strcmp(mode, "release")) return release();
    if (!strcmp(mode, "streams")) return streams();
    fprintf(stderr, "usage: prog_contexts destroy|release|streams\n");
    return 2;
}
