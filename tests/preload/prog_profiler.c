/* A profiler (as torch.profiler's Kineto uses CUPTI) in a program under
 * cudalloc: it subscribes to CUPTI, registers its activity buffers and
 * enables the records it wants; it must get them, and only them, whether it
 * starts after cudalloc (which steps aside) or before (cudalloc stays out).
 * Linked with CUPTI (the simulated device's stand-in), as Kineto is.
 *   prog_profiler later|first     the profiler starts after / before cudalloc
 *   prog_profiler segments        many segments while cudalloc watches CUPTI */
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <stdlib.h>
#include <string.h>

#include "tests/preload/check.h"

#define MIB ((size_t)1 << 20)

static int memcpys, others;

static void CUPTIAPI request(uint8_t **buffer, size_t *size, size_t *max_records) {
    *size = 1 << 16;
    *buffer = aligned_alloc(8, *size);
    *max_records = 0;
}

static void CUPTIAPI complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) memcpys++;
        else others++;
    }
    free(buffer);
}

static void CUPTIAPI on_callback(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data) {}

static void profile(void) {
    CUpti_SubscriberHandle sub;
    CUptiResult r = cuptiSubscribe(&sub, on_callback, NULL);
    CHECK(r == CUPTI_SUCCESS, "the profiler subscribes: %d", (int)r);
    CHECK(cuptiActivityRegisterCallbacks(request, complete) == CUPTI_SUCCESS, "its buffers");
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_SUCCESS, "its records");
}

/* Copies the profiler must see, between allocations it must not. */
static void work(void) {
    char host[4096];
    for (int i = 0; i < 40; i++) {
        void *p = NULL;
        CHECK(cudaMalloc(&p, (size_t)(i % 4 + 1) * 12 * MIB) == cudaSuccess, "cudaMalloc");
        CHECK(cudaMemcpy(p, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess, "copy");
        cudaFree(p);
    }
    cuptiActivityFlushAll(0);
    CHECK(memcpys == 40, "the profiler got its %d copies: %d", 40, memcpys);
    CHECK(others == 0, "and no record it did not ask for: %d", others);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    void *p = NULL;
    if (!strcmp(mode, "later")) {
        CHECK(cudaMalloc(&p, MIB) == cudaSuccess, "cudalloc starts");
        profile();
        work();
        CHECK_DONE("profiler-later");
    }
    if (!strcmp(mode, "first")) {
        CHECK(cudaFree(0) == cudaSuccess, "the runtime starts");
        profile();
        work();
        CHECK_DONE("profiler-first");
    }
    if (!strcmp(mode, "segments")) { /* CUPTI's buffers fill inside the driver calls cudalloc makes */
        void *keep[64];
        for (int i = 0; i < 64; i++) CHECK(cudaMalloc(&keep[i], 11 * MIB) == cudaSuccess, "segment %d", i);
        for (int i = 0; i < 64; i++) cudaFree(keep[i]);
        CHECK_DONE("profiler-segments");
    }
    fprintf(stderr, "usage: prog_profiler later|first|segments\n");
    return 2;
}
