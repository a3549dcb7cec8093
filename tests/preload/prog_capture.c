/* Stream capture under the preload: every call answers as CUDA answers it
 * without cudalloc. run.sh runs each mode twice, on the simulated device
 * alone and under the preload, and compares what they print (one line per
 * call: its name and the error name it returned), then each run checks what
 * must hold in both (the graph's memory never overlaps an eager tensor, a
 * replay writes only its own memory). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <string.h>

#include "tests/preload/check.h"

#define MIB ((size_t)1 << 20)

/* What a call answered, printed for the comparison. */
#define SAY(call)                                                      \
    ({                                                                 \
        cudaError_t e_ = (call);                                       \
        printf("%-44s %s\n", #call, cudaGetErrorName(e_));             \
        fflush(stdout);                                                \
        e_;                                                            \
    })

static cudaStream_t nonblocking(void) {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    return s;
}

static const char *status_name(cudaStream_t s) {
    enum cudaStreamCaptureStatus st;
    cudaError_t e = cudaStreamIsCapturing(s, &st);
    if (e != cudaSuccess) return cudaGetErrorName(e);
    return st == cudaStreamCaptureStatusNone ? "none" : st == cudaStreamCaptureStatusActive ? "active" : "invalidated";
}

/* cudaMalloc and cudaFree in a global capture: refused, and the capture is
 * invalidated (PyTorch's uncached allocator counts on the error). */
static int unsafe(void) {
    cudaStream_t s = nonblocking();
    void *p = NULL, *q = NULL;
    cudaGraph_t g;
    SAY(cudaMalloc(&p, 4 * MIB));
    SAY(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(SAY(cudaMalloc(&q, 4 * MIB)) == cudaErrorStreamCaptureUnsupported, "cudaMalloc refused");
    printf("capture: %s\n", status_name(s));
    SAY(cudaFree(p));
    SAY(cudaMemsetAsync(p, 1, 16, s));
    SAY(cudaStreamEndCapture(s, &g));
    printf("capture: %s\n", status_name(s));
    SAY(cudaFree(p)); /* allowed again */
    CHECK(SAY(cudaMalloc(&q, 4 * MIB)) == cudaSuccess, "cudaMalloc after the capture");
    SAY(cudaFree(q));
    CHECK_DONE("unsafe");
}

/* PyTorch's cudaMallocMaybeCapturing: the thread relaxes its mode around
 * cudaMalloc, and the capture goes on. */
static int relaxed(void) {
    cudaStream_t s = nonblocking();
    void *p = NULL;
    cudaGraph_t g;
    SAY(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    SAY(cudaThreadExchangeStreamCaptureMode(&m));
    CHECK(SAY(cudaMalloc(&p, 4 * MIB)) == cudaSuccess, "relaxed cudaMalloc");
    SAY(cudaThreadExchangeStreamCaptureMode(&m));
    SAY(cudaMemsetAsync(p, 3, 4 * MIB, s));
    printf("capture: %s\n", status_name(s));
    CHECK(SAY(cudaStreamEndCapture(s, &g)) == cudaSuccess, "capture kept");
    cudaGraphExec_t x;
    SAY(cudaGraphInstantiate(&x, g, 0));
    SAY(cudaGraphLaunch(x, s));
    SAY(cudaStreamSynchronize(s));
    CHECK(((unsigned char *)p)[4 * MIB - 1] == 3, "the launch wrote the memory");
    SAY(cudaGraphExecDestroy(x));
    SAY(cudaGraphDestroy(g));
    SAY(cudaFree(p));
    CHECK_DONE("relaxed");
}

struct other {
    void *p;
    cudaError_t alloc, free;
};

static void *other_thread(void *arg) {
    struct other *o = arg;
    void *q = NULL;
    o->alloc = cudaMalloc(&q, MIB);
    if (o->alloc == cudaSuccess) cudaFree(q);
    o->free = cudaFree(o->p);
    return NULL;
}

/* Another thread (global mode) under a global capture is refused; under a
 * thread-local one it is not. */
static int other_thread_modes(void) {
    cudaStream_t s = nonblocking();
    cudaGraph_t g;
    const enum cudaStreamCaptureMode modes[] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal};
    for (int i = 0; i < 2; i++) {
        struct other o = {NULL, cudaErrorUnknown, cudaErrorUnknown};
        SAY(cudaMalloc(&o.p, MIB));
        SAY(cudaStreamBeginCapture(s, modes[i]));
        pthread_t t;
        pthread_create(&t, NULL, other_thread, &o);
        pthread_join(t, NULL);
        printf("other thread: cudaMalloc %s, cudaFree %s\n", cudaGetErrorName(o.alloc), cudaGetErrorName(o.free));
        printf("capture: %s\n", status_name(s));
        SAY(cudaStreamEndCapture(s, &g));
        if (o.free != cudaSuccess) SAY(cudaFree(o.p));
        if (g) SAY(cudaGraphDestroy(g));
    }
    CHECK_DONE("other-thread");
}

static int all_bytes(const void *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)p)[i] != v) return 0;
    return 1;
}

/* The corruption: memory allocated and freed in a capture belongs
 * to the graph; tensors allocated after it must never share it, or every
 * replay writes into them. */
static int graph_alloc(void) {
    cudaStream_t s = nonblocking();
    void *tmp = NULL, *out = NULL, *eager[4];
    cudaGraph_t g;
    cudaGraphExec_t x;
    SAY(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    SAY(cudaMallocAsync(&tmp, MIB, s));
    SAY(cudaMemsetAsync(tmp, 0x11, MIB, s));
    SAY(cudaMallocAsync(&out, MIB, s));
    SAY(cudaMemcpyAsync(out, tmp, MIB, cudaMemcpyDeviceToDevice, s));
    SAY(cudaFreeAsync(tmp, s));
    CHECK(SAY(cudaStreamEndCapture(s, &g)) == cudaSuccess, "captured");
    SAY(cudaGraphInstantiate(&x, g, cudaGraphInstantiateFlagAutoFreeOnLaunch));
    for (int i = 0; i < 4; i++) { /* eager tensors on the same stream, after the capture */
        SAY(cudaMallocAsync(&eager[i], MIB, s));
        SAY(cudaMemsetAsync(eager[i], 0xEE, MIB, s));
        CHECK(eager[i] != tmp && eager[i] != out, "eager tensor %d shares the graph's memory", i);
    }
    for (int run = 0; run < 2; run++) {
        SAY(cudaGraphLaunch(x, s));
        SAY(cudaStreamSynchronize(s));
        CHECK(all_bytes(out, MIB, 0x11), "replay %d: the graph's output", run);
        for (int i = 0; i < 4; i++) CHECK(all_bytes(eager[i], MIB, 0xEE), "replay %d wrote into eager tensor %d", run, i);
    }
    SAY(cudaGraphExecDestroy(x));
    SAY(cudaGraphDestroy(g));
    SAY(cudaFreeAsync(out, s)); /* the graph's allocation, freed outside it */
    for (int i = 0; i < 4; i++) SAY(cudaFreeAsync(eager[i], s));
    SAY(cudaStreamSynchronize(s));
    CHECK_DONE("graph-alloc");
}

/* A plain free waiting for its fence, then a capture on a blocking stream:
 * allocations on another stream go on, and the capture stays valid (a fence
 * event on the legacy stream now would invalidate it). */
static int fences_blocking(void) {
    cudaStream_t b, n = nonblocking();
    void *p = NULL, *q = NULL;
    cudaGraph_t g;
    SAY(cudaStreamCreate(&b));
    SAY(cudaMallocAsync(&p, 4 * MIB, n));
    SAY(cudaFree(p));
    SAY(cudaStreamBeginCapture(b, cudaStreamCaptureModeGlobal));
    SAY(cudaMallocAsync(&q, 4 * MIB, n));
    SAY(cudaMemsetAsync(q, 1, 4 * MIB, n));
    SAY(cudaFreeAsync(q, n));
    printf("capture: %s\n", status_name(b));
    CHECK(SAY(cudaStreamEndCapture(b, &g)) == cudaSuccess, "the capture is intact");
    if (g) SAY(cudaGraphDestroy(g));
    SAY(cudaMallocAsync(&q, 4 * MIB, n));
    SAY(cudaFreeAsync(q, n));
    SAY(cudaStreamSynchronize(n));
    CHECK_DONE("fences-blocking");
}

/* A fence recorded before a global capture and asked about during it (an
 * event query, which the capture forbids): the capture stays valid, and the
 * block waits for the fence to be asked about after it. Run with
 * CUDALLOC_SIM_LATE_EVENTS=1 so the fence is not done at once. */
static int fences_query(void) {
    cudaStream_t s = nonblocking(), n = nonblocking();
    void *p = NULL, *q = NULL, *r = NULL;
    cudaGraph_t g;
    SAY(cudaMallocAsync(&p, 4 * MIB, n));
    SAY(cudaFree(p));
    SAY(cudaMallocAsync(&q, 4 * MIB, n));
    SAY(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    SAY(cudaMallocAsync(&r, 4 * MIB, n));
    SAY(cudaFreeAsync(r, n));
    SAY(cudaMemsetAsync(q, 2, 16, s));
    printf("capture: %s\n", status_name(s));
    CHECK(SAY(cudaStreamEndCapture(s, &g)) == cudaSuccess, "the capture is intact");
    if (g) SAY(cudaGraphDestroy(g));
    SAY(cudaFreeAsync(q, n));
    SAY(cudaStreamSynchronize(n));
    CHECK_DONE("fences-query");
}

/* Streams made and destroyed while a blocking stream captures: cudalloc's
 * bookkeeping (a new non-blocking stream starts behind earlier plain frees,
 * a destroyed one's work is waited for by the legacy stream) must not use
 * the legacy stream, which the capture makes unusable. */
static int streams_during_capture(void) {
    cudaStream_t b, n, m;
    void *p = NULL, *q = NULL;
    cudaGraph_t g;
    SAY(cudaMalloc(&p, 4 * MIB));
    SAY(cudaFree(p));
    SAY(cudaMalloc(&q, 4 * MIB)); /* a fence that is the legacy event alone */
    SAY(cudaStreamCreateWithFlags(&m, cudaStreamNonBlocking));
    SAY(cudaStreamCreate(&b));
    SAY(cudaStreamBeginCapture(b, cudaStreamCaptureModeGlobal));
    SAY(cudaStreamCreateWithFlags(&n, cudaStreamNonBlocking));
    SAY(cudaMemsetAsync(q, 1, 16, m));
    SAY(cudaStreamDestroy(m));
    printf("capture: %s\n", status_name(b));
    CHECK(SAY(cudaStreamEndCapture(b, &g)) == cudaSuccess, "the capture is intact");
    if (g) SAY(cudaGraphDestroy(g));
    SAY(cudaFree(q));
    SAY(cudaMalloc(&q, 4 * MIB));
    SAY(cudaFree(q));
    SAY(cudaStreamDestroy(n));
    SAY(cudaStreamDestroy(b));
    CHECK_DONE("streams");
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    void *warm;
    cudaMalloc(&warm, 512); /* context and allocator made before any capture */
    cudaFree(warm);
    if (!strcmp(mode, "unsafe")) return unsafe();
    if (!strcmp(mode, "relaxed")) return relaxed();
    if (!strcmp(mode, "other-thread")) return other_thread_modes();
    if (!strcmp(mode, "graph-alloc")) return graph_alloc();
    if (!strcmp(mode, "fences-blocking")) return fences_blocking();
    if (!strcmp(mode, "fences-query")) return fences_query();
    if (!strcmp(mode, "streams")) return streams_during_capture();
    fprintf(stderr, "prog_capture: unknown mode '%s' (unsafe, relaxed, other-thread, graph-alloc, fences-blocking, "
                    "fences-query, streams)\n", mode);
    return 2;
}
