/* Errors are what they say: with simgpu's injected errors (CUDALLOC_SIM_FAIL,
 * set by run.sh per mode), no block whose stream still has work queued is
 * handed out again and no granule is unmapped under it; a stream whose
 * event could not be recorded once is still covered by later fences; a
 * context push that failed pops nothing; a sticky error ends nothing badly.
 * Held streams (simgpu_stream_hold) stand for work still queued. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>

#include "tests/preload/simhooks.h"

#define MIB ((size_t)1 << 20)

/* Run with cuEventQuery failing (a handle error) its first queries: the
 * fence is not passed, the block waits, and comes back once a query says
 * the work is done. */
static int query_error(void) {
    cudaStream_t s;
    void *p, *q, *r = NULL;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    CHECK(cudaMalloc(&p, 4 * MIB) == cudaSuccess, "cudaMalloc");
    CHECK(hold(s, 1) == 0 && cudaMemsetAsync(p, 1, 4 * MIB, s) == cudaSuccess, "work queued");
    CHECK(cudaFree(p) == cudaSuccess, "cudaFree");
    CHECK(cudaMalloc(&q, 4 * MIB) == cudaSuccess && q != p, "not reused: a failed query is no answer");
    CHECK(sim().injected > 0, "the query failed");
    CHECK(hold(s, 0) == 0, "the stream runs");
    for (int i = 0; i < 8 && r != p; i++) { /* the failed queries run out; then the answer is "done" */
        CHECK(cudaMalloc(&r, 4 * MIB) == cudaSuccess, "cudaMalloc");
        if (r != p) cudaFree(r);
    }
    CHECK(r == p, "back once a query said done: %p %p", r, p);
    cudaFree(q);
    cudaFree(r);
    CHECK_DONE("query-error");
}

/* Run with the per-stream fences (an older driver), the side stream's event
 * record failing once and the fallback synchronize failing once: the block
 * stays pending, and the next fences still cover the stream. */
static int record_error(void) {
    cudaStream_t s;
    void *p, *q, *r, *t;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    CHECK(cudaMalloc(&p, 4 * MIB) == cudaSuccess, "cudaMalloc");
    CHECK(hold(s, 1) == 0 && cudaMemsetAsync(p, 1, 4 * MIB, s) == cudaSuccess, "work queued");
    CHECK(cudaFree(p) == cudaSuccess, "cudaFree");
    CHECK(cudaMalloc(&q, 4 * MIB) == cudaSuccess && q != p, "not reused: no fence could be recorded");
    CHECK(sim().injected == 2, "the record and the synchronize failed: %llu", (unsigned long long)sim().injected);
    CHECK(cudaMalloc(&r, 4 * MIB) == cudaSuccess && r != p, "not reused: the stream is still covered");
    CHECK(hold(s, 0) == 0, "the stream runs");
    CHECK(cudaMalloc(&t, 4 * MIB) == cudaSuccess && t == p, "back once it passed: %p %p", t, p);
    cudaFree(q);
    cudaFree(r);
    cudaFree(t);
    CHECK_DONE("record-error");
}

/* Run with every wait failing once (cuStreamSynchronize, cuEventSynchronize,
 * and cuCtxSynchronize, the fallback): giving memory back waits for the
 * device first, and unmaps nothing when it cannot. */
static int sync_error(void) {
    cudaStream_t s;
    void *p;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    CHECK(cudaMallocAsync(&p, 8 * MIB, s) == cudaSuccess, "cudaMallocAsync");
    CHECK(hold(s, 1) == 0 && cudaMemsetAsync(p, 1, 8 * MIB, s) == cudaSuccess, "work queued");
    CHECK(cudaFreeAsync(p, s) == cudaSuccess, "cudaFreeAsync");
    uint64_t unmaps = sim().mem_unmap;
    cudalloc_stats before = stats(0);
    CHECK(CUDALLOC_CALL(cudalloc_empty_cache) == 0, "empty cache");
    CHECK(sim().mem_unmap == unmaps, "nothing unmapped while the stream's work may run: %llu",
          (unsigned long long)(sim().mem_unmap - unmaps));
    CHECK(stats(0).reserved_bytes == before.reserved_bytes, "reserved %lld", (long long)stats(0).reserved_bytes);
    CHECK(CUDALLOC_CALL(cudalloc_empty_cache) == 0, "empty cache again"); /* the synchronize works now */
    CHECK(sim().mem_unmap > unmaps && stats(0).reserved_bytes == 0, "given back");
    hold(s, 0);
    CHECK_DONE("sync-error");
}

/* Run on two devices with cuCtxPushCurrent failing once: cudalloc's first
 * call in device 0's context (a fence, from device 1) fails, and the
 * caller's context stays current. */
static int push_error(void) {
    void *p, *q;
    CUcontext before = NULL, after = NULL;
    CHECK(cudaSetDevice(0) == cudaSuccess && cudaMalloc(&p, MIB) == cudaSuccess, "device 0");
    CHECK(cudaSetDevice(1) == cudaSuccess && cudaMalloc(&q, MIB) == cudaSuccess, "device 1");
    CHECK(cudaFree(p) == cudaSuccess, "free of device 0's pointer from device 1");
    cuCtxGetCurrent(&before);
    stats(0); /* collects device 0's plain frees: a fence, in its context */
    CHECK(sim().injected == 1, "the push failed");
    cuCtxGetCurrent(&after);
    CHECK(after == before && after, "the caller's context stays current: %p then %p", (void *)before, (void *)after);
    CHECK(cudaFree(q) == cudaSuccess, "device 1 still works");
    CHECK_DONE("push-error");
}

/* Run with a sticky error on the first event query: the device runs nothing
 * more, every later call says so, and the program ends normally. */
static int sticky(void) {
    cudaStream_t s;
    void *p, *q = NULL;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    CHECK(cudaMalloc(&p, 4 * MIB) == cudaSuccess, "cudaMalloc");
    CHECK(hold(s, 1) == 0 && cudaMemsetAsync(p, 1, 4 * MIB, s) == cudaSuccess, "work queued");
    CHECK(cudaFree(p) == cudaSuccess, "cudaFree");
    cudaError_t e = cudaMalloc(&q, 4 * MIB); /* the fence's query meets the error */
    CHECK(e == cudaSuccess || e == cudaErrorIllegalAddress, "cudaMalloc: %s", cudaGetErrorName(e));
    CHECK(cudaMalloc(&q, 4 * MIB) == cudaErrorIllegalAddress, "then the device is gone");
    CHECK(cudaStreamSynchronize(s) == cudaErrorIllegalAddress, "for everyone");
    CHECK_DONE("sticky");
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!simhooks_init()) {
        printf("%s: needs the simulated device (held streams, injected errors): skipped\n", mode);
        return 0;
    }
    if (!strcmp(mode, "query-error")) return query_error();
    if (!strcmp(mode, "record-error")) return record_error();
    if (!strcmp(mode, "sync-error")) return sync_error();
    if (!strcmp(mode, "push-error")) return push_error();
    if (!strcmp(mode, "sticky")) return sticky();
    fprintf(stderr, "prog_faults: unknown mode '%s' (query-error, record-error, sync-error, push-error, sticky)\n",
            mode);
    return 2;
}
