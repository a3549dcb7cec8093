/* cudaFree's promise under the preload: a block freed with a plain cudaFree
 * is not handed out again while work queued before the free may still use
 * it, on any stream of its device. Run by tests/preload/run.sh on the
 * simulated device, whose held streams (simgpu_stream_hold) stand for a
 * stream that still has work queued. Each mode checks one side of it. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "tests/preload/simhooks.h"

#undef cuGetProcAddress
#define MIB ((size_t)1 << 20)

/* The case on stream s: 4 MiB allocated, work queued on s (held),
 * cudaFree, cudaMalloc of 4 MiB again. */
static void not_reused_while_queued(cudaStream_t s, const char *route) {
    void *p = NULL, *q = NULL, *r = NULL;
    CHECK(cudaMalloc(&p, 4 * MIB) == cudaSuccess, "%s: cudaMalloc", route);
    CHECK(hold(s, 1) == 0, "%s: hold the stream", route);
    CHECK(cudaMemsetAsync(p, 1, 4 * MIB, s) == cudaSuccess, "%s: work on the stream", route);
    CHECK(cudaFree(p) == cudaSuccess, "%s: cudaFree", route);
    CHECK(cudaMalloc(&q, 4 * MIB) == cudaSuccess, "%s: cudaMalloc again", route);
    CHECK(q != p, "%s: the freed block came back while the stream still had work queued before the free", route);
    CHECK(hold(s, 0) == 0, "%s: let the stream run", route);
    CHECK(cudaMalloc(&r, 4 * MIB) == cudaSuccess && r == p, "%s: the block comes back once the stream passed: %p %p",
          route, r, p);
    cudaFree(q);
    cudaFree(r);
    all_back(0, route);
}

/* The scenario, with the figures while the block waits. */
static int side_stream(void) {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "side stream");
    void *p, *q;
    CHECK(cudaMalloc(&p, 4 * MIB) == cudaSuccess, "cudaMalloc");
    CHECK(hold(s, 1) == 0 && cudaMemsetAsync(p, 1, 4 * MIB, s) == cudaSuccess, "work queued on the side stream");
    simgpu_counters_t before = sim();
    CHECK(cudaFree(p) == cudaSuccess, "cudaFree");
    CHECK(sim().event_records == before.event_records, "the free itself records nothing");
    CHECK(cudaMalloc(&q, 4 * MIB) == cudaSuccess && q != p, "not reused while the side stream has work queued");
    simgpu_counters_t after = sim();
    /* one fence: one cuCtxRecordEvent for the whole device where the driver
     * has it (12.5+), else an event on the legacy stream and one on the side
     * stream (run.sh runs both) */
    int version = 0;
    cuDriverGetVersion(&version);
    unsigned long long events = after.event_records - before.event_records, ctx = after.ctx_records - before.ctx_records;
    if (version >= 12050) CHECK(ctx == 1 && events == 0, "cuCtxRecordEvent %llu, events %llu", ctx, events);
    else CHECK(ctx == 0 && events == 2, "cuCtxRecordEvent %llu, events %llu", ctx, events);
    CHECK(after.event_syncs == before.event_syncs && after.ctx_syncs == before.ctx_syncs,
          "memory was not short: nothing blocked");
    cudalloc_stats st = stats(0);
    CHECK(st.allocated_bytes == (int64_t)(4 * MIB), "allocated %lld", (long long)st.allocated_bytes);
    CHECK(st.active_bytes == (int64_t)(8 * MIB), "the waiting block is active: %lld", (long long)st.active_bytes);
    CHECK(st.reserved_bytes - st.allocated_bytes == (int64_t)(4 * MIB), "and cached: %lld",
          (long long)(st.reserved_bytes - st.allocated_bytes));
    /* cudaMemGetInfo counts cached memory as free, the waiting block too:
     * an allocation that needs it waits for the fence rather than failing */
    size_t f0, t;
    simgpu_counters_t dev = sim();
    CHECK(cudaMemGetInfo(&f0, &t) == cudaSuccess &&
              f0 == dev.capacity - dev.device_bytes_in_use[0] + (size_t)(st.reserved_bytes - st.allocated_bytes),
          "cudaMemGetInfo free %zu", f0);
    /* queries alone do not move the block; the stream passing the fence does */
    void *r;
    CHECK(cudaMalloc(&r, 4 * MIB) == cudaSuccess && r != p, "still waiting");
    cudaFree(r);
    CHECK(hold(s, 0) == 0, "release");
    CHECK(cudaMalloc(&r, 4 * MIB) == cudaSuccess && r == p, "back once the side stream passed: %p %p", r, p);
    st = stats(0);
    CHECK(st.active_bytes == st.allocated_bytes, "active %lld allocated %lld", (long long)st.active_bytes,
          (long long)st.allocated_bytes);
    cudaFree(q);
    cudaFree(r);
    all_back(0, "side-stream");
    CHECK(stats(0).num_ooms == 0, "no OOM");
    cudaStreamDestroy(s);
    CHECK_DONE("side-stream");
}

/* Without non-blocking streams the legacy stream orders everything: a
 * fence's legacy event alone puts every later use of the block after the
 * work before the free, so the block is reused at once. A non-blocking
 * stream made afterwards starts behind that event. */
static int ordered(void) {
    cudaStream_t b, n;
    cudaEvent_t e;
    void *p, *q;
    CHECK(cudaStreamCreate(&b) == cudaSuccess, "blocking stream");
    CHECK(cudaMalloc(&p, 4 * MIB) == cudaSuccess, "cudaMalloc");
    CHECK(hold(b, 1) == 0 && cudaMemsetAsync(p, 1, 4 * MIB, b) == cudaSuccess, "work queued on it");
    CHECK(cudaFree(p) == cudaSuccess, "cudaFree");
    uint64_t records = sim().event_records;
    CHECK(cudaMalloc(&q, 4 * MIB) == cudaSuccess && q == p, "reused at once, after the legacy event");
    CHECK(sim().event_records == records + 1, "one event: the legacy stream's");
    CHECK(cudaStreamCreateWithFlags(&n, cudaStreamNonBlocking) == cudaSuccess, "a non-blocking stream now");
    CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess && cudaEventRecord(e, n) == cudaSuccess,
          "work on it");
    CHECK(cudaEventQuery(e) == cudaErrorNotReady, "it starts after the work queued before the free");
    CHECK(hold(b, 0) == 0 && cudaEventQuery(e) == cudaSuccess, "and runs once that is done");
    cudaFree(q);
    all_back(0, "ordered");
    CHECK_DONE("ordered");
}

/* A loop's fences so far: events and context events recorded. */
static unsigned long long fences_recorded(void) {
    simgpu_counters_t c = sim();
    return c.event_records + c.ctx_records;
}

/* lazy's second half, b's work still held: with a non-blocking stream alive
 * the fences wait for its work, and are recorded when the memory is needed
 * all the same; until that work ran, the block freed after it is never
 * handed out again, and neither is any block freed since. (Figures are read
 * only after the fence counts: reading them collects, which fences.) */
static void lazy_nonblocking(cudaStream_t b) {
    cudaStream_t n;
    void *q, *r;
    CHECK(cudaStreamCreateWithFlags(&n, cudaStreamNonBlocking) == cudaSuccess, "non-blocking stream");
    CHECK(cudaMalloc(&q, 4096) == cudaSuccess, "cudaMalloc");
    cudalloc_stats st = stats(0);
    int64_t reserved = st.reserved_bytes, waiting = st.active_bytes - st.allocated_bytes; /* lazy's last, behind b */
    CHECK(hold(n, 1) == 0 && cudaMemsetAsync(q, 1, 4096, n) == cudaSuccess, "work queued on it");
    CHECK(cudaFree(q) == cudaSuccess, "cudaFree");
    void *freed[41] = {q};
    unsigned long long fences = fences_recorded();
    for (int i = 0; i < 40; i++) {
        CHECK(cudaMalloc(&r, 4096) == cudaSuccess, "cudaMalloc %d", i);
        for (int k = 0; k <= i; k++)
            CHECK(r != freed[k], "pair %d: a block came back while the non-blocking stream had work queued before its free",
                  i);
        CHECK(cudaFree(r) == cudaSuccess, "cudaFree %d", i);
        freed[i + 1] = r;
    }
    CHECK(fences_recorded() == fences, "non-blocking: the loop fits in free memory: %llu fences recorded",
          fences_recorded() - fences);
    /* one fence: the context's event (12.5+), else the legacy stream's and n's (run.sh runs both) */
    int version = 0;
    cuDriverGetVersion(&version);
    unsigned long long one = version >= 12050 ? 1 : 2;
    CHECK(cudaMalloc(&r, (size_t)reserved) == cudaSuccess && fences_recorded() == fences + one,
          "non-blocking: the memory needed: one fence (%llu events)", fences_recorded() - fences);
    for (int k = 0; k < 41; k++) CHECK(r != freed[k], "the fence waits: block %d handed out", k);
    st = stats(0);
    CHECK(st.active_bytes - st.allocated_bytes == waiting + 41 * 4096, "the 41 blocks still wait: %lld bytes",
          (long long)(st.active_bytes - st.allocated_bytes - waiting));
    CHECK(st.reserved_bytes > reserved, "more memory instead: reserved %lld", (long long)st.reserved_bytes);
    CHECK(hold(n, 0) == 0 && hold(b, 0) == 0, "the streams run");
    void *back;
    CHECK(cudaMalloc(&back, 4096) == cudaSuccess, "cudaMalloc");
    st = stats(0);
    CHECK(st.active_bytes == st.allocated_bytes, "free again once the work ran: active %lld allocated %lld",
          (long long)st.active_bytes, (long long)st.allocated_bytes);
    cudaFree(back);
    cudaFree(r);
    cudaStreamDestroy(n);
}

/* A non-blocking stream destroyed between a plain free and the fence that
 * covers it, its work still held: the fence, recorded when the memory is
 * needed, still waits for that work (its context's keeper), and the block
 * stays out until the work ran. */
static int lazy_destroyed(void) {
    cudaStream_t n;
    void *q, *r;
    CHECK(cudaStreamCreateWithFlags(&n, cudaStreamNonBlocking) == cudaSuccess, "non-blocking stream");
    CHECK(cudaMalloc(&q, 4096) == cudaSuccess, "cudaMalloc");
    int64_t reserved = stats(0).reserved_bytes;
    CHECK(hold(n, 1) == 0 && cudaMemsetAsync(q, 1, 4096, n) == cudaSuccess, "work queued on it");
    CHECK(cudaFree(q) == cudaSuccess, "cudaFree");
    CHECK(cudaStreamDestroy(n) == cudaSuccess, "destroyed with the work queued");
    unsigned long long fences = fences_recorded(); /* the keeper's event on n counted */
    for (int i = 0; i < 40; i++) {
        CHECK(cudaMalloc(&r, 4096) == cudaSuccess && r != q, "pair %d: the block came back", i);
        CHECK(cudaFree(r) == cudaSuccess, "cudaFree %d", i);
    }
    CHECK(fences_recorded() == fences, "no fence before the memory is needed: %llu", fences_recorded() - fences);
    CHECK(cudaMalloc(&r, (size_t)reserved) == cudaSuccess && fences_recorded() > fences, "the memory needed: fenced");
    void *s;
    CHECK(cudaMalloc(&s, 4096) == cudaSuccess && s != q, "the fence waits for the destroyed stream's work");
    cudalloc_stats st = stats(0);
    CHECK(st.active_bytes - st.allocated_bytes == 41 * 4096, "41 blocks wait: %lld bytes",
          (long long)(st.active_bytes - st.allocated_bytes));
    CHECK(hold(n, 0) == 0, "the destroyed stream's work runs");
    cudaFree(s);
    st = stats(0);
    CHECK(st.active_bytes == st.allocated_bytes, "free again once it ran: active %lld allocated %lld",
          (long long)st.active_bytes, (long long)st.allocated_bytes);
    cudaFree(r);
    all_back(0, "lazy-destroyed");
    CHECK_DONE("lazy-destroyed");
}

/* A malloc/free loop in free memory, blocking streams only: a plain free's
 * fence (the legacy stream's event) is recorded when an allocation needs the
 * memory, not after each free; until then the block is never handed out
 * again, though work queued before its free is still held. Then the same
 * with a non-blocking stream alive (lazy_nonblocking). */
static int lazy(void) {
    cudaStream_t b;
    void *p, *q, *r;
    CHECK(cudaStreamCreate(&b) == cudaSuccess, "blocking stream");
    CHECK(cudaMalloc(&p, 4096) == cudaSuccess && cudaFree(p) == cudaSuccess && cudaMalloc(&q, 4096) == cudaSuccess,
          "a pool with free memory");
    int64_t reserved = stats(0).reserved_bytes;
    CHECK(hold(b, 1) == 0 && cudaMemsetAsync(q, 1, 4096, b) == cudaSuccess, "work queued on the blocking stream");
    CHECK(cudaFree(q) == cudaSuccess, "cudaFree");
    uint64_t records = sim().event_records;
    for (int i = 0; i < 40; i++) {
        CHECK(cudaMalloc(&r, 4096) == cudaSuccess, "cudaMalloc %d", i);
        CHECK(r != q || sim().event_records > records, "pair %d: the block came back before a fence after its free", i);
        CHECK(cudaFree(r) == cudaSuccess, "cudaFree %d", i);
    }
    CHECK(sim().event_records == records, "the loop fits in free memory: %llu fences recorded",
          (unsigned long long)(sim().event_records - records));
    CHECK(stats(0).reserved_bytes == reserved, "and reserved nothing more: %lld, was %lld",
          (long long)stats(0).reserved_bytes, (long long)reserved);
    CHECK(cudaMalloc(&r, (size_t)reserved) == cudaSuccess && sim().event_records == records + 1,
          "the memory needed: one fence");
    CHECK(stats(0).reserved_bytes == reserved, "the freed blocks reused: reserved %lld", (long long)stats(0).reserved_bytes);
    cudaFree(r);
    lazy_nonblocking(b);
    all_back(0, "lazy");
    CHECK_DONE("lazy");
}

/* sync_free:true: cudaFree waits for the device that owns the pointer (the
 * second device here, while the first is current), then reuses at once. */
static int sync_free(void) {
    int n = 0;
    CHECK(cudaGetDeviceCount(&n) == cudaSuccess && n == 2, "run with CUDALLOC_SIM_DEVICES=2: %d", n);
    if (n != 2) CHECK_DONE("sync-free");
    CHECK(cudaSetDevice(1) == cudaSuccess, "device 1");
    cudaStream_t s;
    cudaEvent_t e;
    void *p, *q;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream on device 1");
    CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess, "event on device 1");
    CHECK(cudaMalloc(&p, 4 * MIB) == cudaSuccess, "cudaMalloc on device 1");
    CHECK(hold(s, 1) == 0 && cudaMemsetAsync(p, 1, 4 * MIB, s) == cudaSuccess, "work queued");
    CHECK(cudaEventRecord(e, s) == cudaSuccess && cudaEventQuery(e) == cudaErrorNotReady, "queued");
    CHECK(cudaSetDevice(0) == cudaSuccess, "device 0 current");
    CHECK(cudaFree(p) == cudaSuccess, "cudaFree of device 1's pointer");
    CHECK(cudaEventQuery(e) == cudaSuccess, "device 1 was synchronized by the free");
    CHECK(cudaSetDevice(1) == cudaSuccess, "device 1");
    CHECK(cudaMalloc(&q, 4 * MIB) == cudaSuccess && q == p, "then reused at once");
    hold(s, 0);
    cudaFree(q);
    all_back(1, "sync-free");
    CHECK_DONE("sync-free");
}

/* A device short of memory waits for the fence instead of failing. Run with
 * CUDALLOC_SIM_MEMORY=64MiB. */
static int memory_short(void) {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "side stream");
    void *p, *q;
    CHECK(cudaMalloc(&p, 48 * MIB) == cudaSuccess, "48 MiB of 64");
    CHECK(hold(s, 1) == 0 && cudaMemsetAsync(p, 1, 48 * MIB, s) == cudaSuccess, "work queued");
    CHECK(cudaFree(p) == cudaSuccess, "cudaFree");
    simgpu_counters_t before = sim();
    CHECK(cudaMalloc(&q, 48 * MIB) == cudaSuccess, "48 MiB again: waits for the fence rather than failing");
    CHECK(q == p, "the same memory");
    CHECK(sim().event_syncs > before.event_syncs, "waited on the fence's events");
    cudalloc_stats st = stats(0);
    CHECK(st.num_ooms == 0, "no OOM: %lld", (long long)st.num_ooms);
    hold(s, 0);
    cudaFree(q);
    all_back(0, "memory-short");
    CHECK_DONE("memory-short");
}

/* Memory freed after its stream was destroyed with work still held is needed
 * again on a short device: the free's fence depends on that work, and the
 * wait for it must run it, as time passing on a GPU would (issue 30: the
 * simulated wait returned at once and the memory was handed out again while
 * the work still counted as queued). The wait is reported in the counters,
 * and, when the hold is never released (held-wait-unreleased), at exit.
 * Run with CUDALLOC_SIM_MEMORY=64MiB, in both segment kinds, context fences on
 * and off. */
static int held_wait(int release) {
    cudaStream_t s;
    cudaEvent_t e;
    void *p, *q;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "side stream");
    CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess, "event");
    CHECK(cudaMallocAsync(&p, 48 * MIB, s) == cudaSuccess, "48 MiB of 64, in the side stream's order");
    CHECK(hold(s, 1) == 0 && cudaMemsetAsync(p, 1, 48 * MIB, s) == cudaSuccess, "work queued");
    CHECK(cudaEventRecord(e, s) == cudaSuccess && cudaEventQuery(e) == cudaErrorNotReady, "its end not reached");
    CHECK(cudaFreeAsync(p, s) == cudaSuccess && cudaStreamDestroy(s) == cudaSuccess, "freed, stream destroyed");
    simgpu_counters_t before = sim();
    CHECK(cudaMalloc(&q, 48 * MIB) == cudaSuccess, "48 MiB again: after the fence");
    CHECK(cudaEventQuery(e) == cudaSuccess, "the work the fence depended on ran before its memory was reused");
    CHECK(sim().held_waits > before.held_waits, "the wait on held work is reported");
    if (release) CHECK(hold(s, 0) == 0, "release with the old handle"); /* else simgpu says so at exit */
    cudaFree(q);
    all_back(0, "held-wait");
    CHECK_DONE("held-wait");
}

typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

/* Streams made and destroyed through each route are covered. */
static int stream_routes(void) {
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    getproc_fn getproc = (getproc_fn)dlsym(cuda, "cuGetProcAddress_v2");
    CUresult (*create_wp)(CUstream *, unsigned, int) = NULL, (*create)(CUstream *, unsigned) = NULL;
    CUresult (*destroy)(CUstream) = NULL;
    CHECK(getproc && getproc("cuStreamCreateWithPriority", (void **)&create_wp, 5050, 0, NULL) == CUDA_SUCCESS,
          "cuStreamCreateWithPriority through cuGetProcAddress");
    CHECK(getproc && getproc("cuStreamDestroy", (void **)&destroy, 4000, 0, NULL) == CUDA_SUCCESS,
          "cuStreamDestroy through cuGetProcAddress");
    create = (CUresult(*)(CUstream *, unsigned))dlsym(cuda, "cuStreamCreate");
    CHECK(create && create_wp && destroy, "entry points");
    if (!create || !create_wp || !destroy) CHECK_DONE("stream-routes");
    cudaStream_t s;
    CUstream cs;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "cudaStreamCreateWithFlags");
    not_reused_while_queued(s, "cudaStreamCreateWithFlags");
    CHECK(cudaStreamDestroy(s) == cudaSuccess, "cudaStreamDestroy");
    CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, -1) == cudaSuccess, "cudaStreamCreateWithPriority");
    not_reused_while_queued(s, "cudaStreamCreateWithPriority");
    CHECK(cuStreamDestroy(s) == CUDA_SUCCESS, "cuStreamDestroy");
    CHECK(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "cuStreamCreate");
    not_reused_while_queued(cs, "cuStreamCreate");
    CHECK(destroy(cs) == CUDA_SUCCESS, "cuStreamDestroy (cuGetProcAddress)");
    CHECK(create_wp(&cs, CU_STREAM_NON_BLOCKING, 0) == CUDA_SUCCESS, "cuStreamCreateWithPriority (cuGetProcAddress)");
    not_reused_while_queued(cs, "cuStreamCreateWithPriority (cuGetProcAddress)");
    CHECK(cuStreamDestroy(cs) == CUDA_SUCCESS, "destroy");
    CHECK(create(&cs, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "cuStreamCreate (dlsym)");
    not_reused_while_queued(cs, "cuStreamCreate (dlsym)");
    /* cs stays: with a non-blocking stream about, every block waits for its
     * fence to complete, which the checks below observe. */

    /* A blocking stream's work is behind the legacy stream: the fence's
     * legacy event covers it. */
    cudaStream_t b;
    CHECK(cudaStreamCreate(&b) == cudaSuccess, "blocking stream");
    not_reused_while_queued(b, "blocking stream");

    /* A stream destroyed with work queued: the work still runs, and a plain
     * free after the destroy waits for it (through each destroy route). */
    const char *routes[] = {"cudaStreamDestroy", "cuStreamDestroy", "cuStreamDestroy (cuGetProcAddress)"};
    for (int i = 0; i < 3; i++) {
        CUstream d;
        void *p, *q, *r;
        CHECK(cudaStreamCreateWithFlags((cudaStream_t *)&d, cudaStreamNonBlocking) == cudaSuccess, "stream");
        CHECK(cudaMalloc(&p, 4 * MIB) == cudaSuccess, "cudaMalloc");
        CHECK(hold(d, 1) == 0 && cudaMemsetAsync(p, 1, 4 * MIB, d) == cudaSuccess, "work queued");
        CUresult r0 = i == 0 ? (CUresult)cudaStreamDestroy(d) : i == 1 ? cuStreamDestroy(d) : destroy(d);
        CHECK(r0 == CUDA_SUCCESS, "%s", routes[i]);
        CHECK(cudaFree(p) == cudaSuccess, "cudaFree after %s", routes[i]);
        CHECK(cudaMalloc(&q, 4 * MIB) == cudaSuccess && q != p, "%s: not reused while its work is queued", routes[i]);
        CHECK(hold(d, 0) == 0, "its work runs");
        CHECK(cudaMalloc(&r, 4 * MIB) == cudaSuccess && r == p, "%s: then reused", routes[i]);
        cudaFree(q);
        cudaFree(r);
        all_back(0, routes[i]);
    }
    CHECK_DONE("stream-routes");
}

/* Per-thread default streams are different streams: a pool each. */
struct ptds_arg {
    void *p;
    pthread_barrier_t *step;
    int ok;
};

static void *ptds_first(void *arg) {
    struct ptds_arg *a = arg;
    a->ok = cudaMallocAsync(&a->p, 4 * MIB, cudaStreamPerThread) == cudaSuccess &&
            cudaFreeAsync(a->p, cudaStreamPerThread) == cudaSuccess;
    pthread_barrier_wait(a->step); /* freed in this thread's stream order */
    pthread_barrier_wait(a->step); /* the other thread allocated */
    void *again = NULL;
    a->ok = a->ok && cudaMallocAsync(&again, 4 * MIB, cudaStreamPerThread) == cudaSuccess && again == a->p;
    cudaFreeAsync(again, cudaStreamPerThread);
    return NULL;
}

static int ptds(void) {
    pthread_barrier_t step;
    pthread_barrier_init(&step, NULL, 2);
    struct ptds_arg a = {NULL, &step, 0};
    pthread_t t;
    pthread_create(&t, NULL, ptds_first, &a);
    pthread_barrier_wait(&step);
    void *q = NULL;
    CHECK(cudaMallocAsync(&q, 4 * MIB, cudaStreamPerThread) == cudaSuccess, "cudaMallocAsync on this thread's stream");
    CHECK(q != a.p, "another thread's per-thread stream freed %p, not this one's: not reused here", a.p);
    uint64_t syncs = sim().stream_syncs;
    pthread_barrier_wait(&step);
    pthread_join(t, NULL);
    CHECK(a.ok, "the first thread reuses its own block in its own stream order");
    /* its pool is retired at exit, without a wait, and ends once the device
     * is past its work (here at once): its cache goes back */
    CHECK(sim().stream_syncs == syncs && sim().ctx_syncs == 0, "a thread's exit waits for nothing");
    CHECK(stats(0).reserved_bytes == (int64_t)(4 * MIB), "the exited thread's cache went back: %lld reserved",
          (long long)stats(0).reserved_bytes);
    cudaFreeAsync(q, cudaStreamPerThread);
    pthread_barrier_destroy(&step);
    CHECK_DONE("ptds");
}

/* A plain free of device 1's pointer while device 0 is current orders device
 * 1's work, not device 0's. Run with CUDALLOC_SIM_DEVICES=2. */
static int cross_device(void) {
    int n = 0;
    CHECK(cudaGetDeviceCount(&n) == cudaSuccess && n == 2, "run with CUDALLOC_SIM_DEVICES=2: %d", n);
    if (n != 2) CHECK_DONE("cross-device");
    cudaStream_t s0, s1;
    void *p, *q, *r, *x, *y;
    CHECK(cudaSetDevice(0) == cudaSuccess && cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking) == cudaSuccess,
          "device 0 stream");
    CHECK(cudaMalloc(&x, MIB) == cudaSuccess && hold(s0, 1) == 0, "device 0 busy for good");
    CHECK(cudaSetDevice(1) == cudaSuccess && cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess,
          "device 1 stream");
    CHECK(cudaMalloc(&p, 4 * MIB) == cudaSuccess, "cudaMalloc on device 1");
    CHECK(hold(s1, 1) == 0 && cudaMemsetAsync(p, 1, 4 * MIB, s1) == cudaSuccess, "work queued on device 1");
    /* device 0 current, and the thread's last allocation there: the free is tried there first */
    CHECK(cudaSetDevice(0) == cudaSuccess && cudaMalloc(&y, MIB) == cudaSuccess && cudaFree(p) == cudaSuccess,
          "cudaFree with device 0 current");
    CHECK(cudaSetDevice(1) == cudaSuccess, "device 1");
    CHECK(cudaMalloc(&q, 4 * MIB) == cudaSuccess && q != p, "not reused while device 1's stream has work queued");
    CHECK(hold(s1, 0) == 0, "device 1's stream runs");
    CHECK(cudaMalloc(&r, 4 * MIB) == cudaSuccess && r == p, "reused: device 0's queued work does not matter");
    cudaFree(q);
    cudaFree(r);
    all_back(1, "cross-device");
    hold(s0, 0);
    CHECK(cudaSetDevice(0) == cudaSuccess && cudaFree(x) == cudaSuccess && cudaFree(y) == cudaSuccess, "device 0");
    CHECK_DONE("cross-device");
}

/* Reset with blocks still waiting: they are waited for, every allocation
 * goes with the context, nothing hangs. */
static int reset(void) {
    cudaStream_t s;
    void *p, *q;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "side stream");
    CHECK(cudaMalloc(&p, 4 * MIB) == cudaSuccess, "cudaMalloc");
    CHECK(hold(s, 1) == 0 && cudaMemsetAsync(p, 1, 4 * MIB, s) == cudaSuccess, "work queued");
    CHECK(cudaFree(p) == cudaSuccess && cudaMalloc(&q, 4 * MIB) == cudaSuccess && q != p, "waiting");
    CHECK(cudaDeviceReset() == cudaSuccess, "cudaDeviceReset");
    cudalloc_stats st = stats(0);
    CHECK(st.active_bytes == st.allocated_bytes, "nothing waits after the reset: active %lld allocated %lld",
          (long long)st.active_bytes, (long long)st.allocated_bytes);
    CHECK(st.allocated_bytes == 0, "the reset freed every allocation: %lld allocated", (long long)st.allocated_bytes);
    CHECK(cudaFree(q) == cudaErrorInvalidValue, "q went with the reset");
    void *r;
    CHECK(cudaMalloc(&r, 4 * MIB) == cudaSuccess, "allocates after the reset");
    cudaFree(r);
    CHECK(CUDALLOC_CALL(cudalloc_empty_cache) == 0, "empty cache after the reset");
    CHECK_DONE("reset");
}

/* The program ends while a block still waits behind work that never runs:
 * the exit must not wait for it. */
static int exit_pending(void) {
    cudaStream_t s;
    void *p, *q;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "side stream");
    CHECK(cudaMalloc(&p, 4 * MIB) == cudaSuccess && hold(s, 1) == 0, "held");
    CHECK(cudaFree(p) == cudaSuccess && cudaMalloc(&q, 4 * MIB) == cudaSuccess && q != p, "waiting");
    CHECK_DONE("exit-pending");
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!simhooks_init()) {
        printf("%s: skipped (needs the simulated device's held streams)\n", mode);
        return 0;
    }
    if (!strcmp(mode, "side-stream")) return side_stream();
    if (!strcmp(mode, "sync-free")) return sync_free();
    if (!strcmp(mode, "ordered")) return ordered();
    if (!strcmp(mode, "lazy")) return lazy();
    if (!strcmp(mode, "lazy-destroyed")) return lazy_destroyed();
    if (!strcmp(mode, "memory-short")) return memory_short();
    if (!strcmp(mode, "held-wait")) return held_wait(1);
    if (!strcmp(mode, "held-wait-unreleased")) return held_wait(0);
    if (!strcmp(mode, "stream-routes")) return stream_routes();
    if (!strcmp(mode, "ptds")) return ptds();
    if (!strcmp(mode, "cross-device")) return cross_device();
    if (!strcmp(mode, "reset")) return reset();
    if (!strcmp(mode, "exit-pending")) return exit_pending();
    fprintf(stderr, "usage: %s side-stream|ordered|lazy|lazy-destroyed|sync-free|memory-short|held-wait|held-wait-unreleased|stream-routes|ptds|cross-device|reset|exit-pending\n",
            argv[0]);
    return 2;
}
