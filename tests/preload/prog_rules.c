/* A real driver's rules that a lenient simulator would let slip (issue 32),
 * each a mode run by tests/preload/run.sh under the preload on the simulated
 * device, and on a GPU by scripts/gpu-check.sh (work still queued is a
 * stream waiting for a flag, cuStreamWaitValue32, on both; "retained" needs
 * the simulator's unseen retains and says so on a GPU).
 *   prog_rules second-context|entry-points|wait-destroyed|wait-created|retained|no-spin|rdma-refused|granule|
 *              dead-stream|green-context|peer-ranges|fork-child|vmm-capture */
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#undef cuGetProcAddress

#include "tests/preload/simhooks.h"

#define MIB ((size_t)1 << 20)

static int on_sim;
static int (*simgpu_kernel_access_fn)(void *, size_t, int);

static CUdeviceptr flag_zero(void);

/* Green contexts' streams are non-blocking and made past every hook
 * (cuGreenCtxStreamCreate); cuCtxRecordEvent on the primary context covers
 * them, and a plain free's fence must use it: work queued on a green stream
 * on a block keeps the block from being handed out again. */
static int green_context(void) {
    CUdeviceptr gate = flag_zero(), p, q, r;
    CUdevResource sms;
    CUdevResourceDesc desc;
    CUgreenCtx green;
    CUstream s;
    CHECK(cuMemAlloc(&p, 4 * MIB) == CUDA_SUCCESS, "cuMemAlloc in the primary context");
    CHECK(cuDeviceGetDevResource(0, &sms, CU_DEV_RESOURCE_TYPE_SM) == CUDA_SUCCESS &&
              cuDevResourceGenerateDesc(&desc, &sms, 1) == CUDA_SUCCESS &&
              cuGreenCtxCreate(&green, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM) == CUDA_SUCCESS,
          "a green context on the device's SMs");
    CHECK(cuGreenCtxStreamCreate(&s, green, CU_STREAM_NON_BLOCKING, 0) == CUDA_SUCCESS, "a stream of it");
    CHECK(cuStreamWaitValue32(s, gate, 1, CU_STREAM_WAIT_VALUE_EQ) == CUDA_SUCCESS &&
              cuMemsetD8Async(p, 1, 4 * MIB, s) == CUDA_SUCCESS,
          "work on the block queued there, behind a gate");
    CHECK(cuMemFree(p) == CUDA_SUCCESS, "cuMemFree");
    CHECK(cuMemAlloc(&q, 4 * MIB) == CUDA_SUCCESS && q != p,
          "the block came back while the green context's stream still had work queued on it");
    CHECK(cuStreamWriteValue32(NULL, gate, 1, 0) == CUDA_SUCCESS && cuStreamSynchronize(s) == CUDA_SUCCESS,
          "the gate opens, the stream runs");
    CHECK(cuMemAlloc(&r, 4 * MIB) == CUDA_SUCCESS && r == p, "back once it ran");
    cuMemFree(q);
    cuMemFree(r);
    cuMemFree(gate);
    CHECK(cuStreamDestroy(s) == CUDA_SUCCESS && cuGreenCtxDestroy(green) == CUDA_SUCCESS, "they go");
    all_back(0, "green-context");
    CHECK_DONE("green-context");
}

/* A flag in device memory, 0, and the device's primary context current. */
static CUdeviceptr flag_zero(void) {
    CUcontext primary;
    CUdeviceptr flag = 0;
    CHECK(cuInit(0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS &&
              cuCtxSetCurrent(primary) == CUDA_SUCCESS,
          "the primary context");
    CHECK(cuMemAlloc(&flag, 4) == CUDA_SUCCESS && cuMemsetD32(flag, 0, 1) == CUDA_SUCCESS, "a flag, 0");
    return flag;
}

static unsigned flag_value(CUdeviceptr flag) {
    unsigned v = 0;
    CHECK(cuMemcpyDtoH(&v, flag, 4) == CUDA_SUCCESS, "read the flag");
    return v;
}

/* The legacy stream of a context orders only that context's blocking
 * streams: work queued on a second context's stream (cuCtxCreate) on a block
 * of the primary context's allocator keeps the block from being handed out
 * again after a plain free, as long as the work is queued. The work waits
 * behind a gate (cuStreamWaitValue32), so this runs on a GPU as here. */
static int second_context(void) {
    CUcontext primary = NULL, mine, popped;
    CUdeviceptr gate = flag_zero(), p, q, r;
    CUstream s;
    cuCtxGetCurrent(&primary);
    CHECK(cuMemAlloc(&p, 4 * MIB) == CUDA_SUCCESS, "cuMemAlloc in the primary context");
    CHECK(cuCtxCreate(&mine, NULL, 0, 0) == CUDA_SUCCESS, "cuCtxCreate: a second context, current");
    CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS, "a blocking stream in it");
    CHECK(cuStreamWaitValue32(s, gate, 1, CU_STREAM_WAIT_VALUE_EQ) == CUDA_SUCCESS &&
              cuMemsetD8Async(p, 1, 4 * MIB, s) == CUDA_SUCCESS,
          "work on the block queued there, behind a gate");
    CHECK(cuCtxPopCurrent(&popped) == CUDA_SUCCESS && popped == mine, "back to the primary context");
    CHECK(cuMemFree(p) == CUDA_SUCCESS, "cuMemFree");
    CHECK(cuMemAlloc(&q, 4 * MIB) == CUDA_SUCCESS && q != p,
          "the block came back while the second context's stream still had work queued on it: %#llx",
          (unsigned long long)q);
    CHECK(cuStreamWriteValue32(NULL, gate, 1, 0) == CUDA_SUCCESS && cuStreamSynchronize(s) == CUDA_SUCCESS,
          "the gate opens, the stream runs");
    CHECK(cuMemAlloc(&r, 4 * MIB) == CUDA_SUCCESS && r == p, "back once it ran: %#llx %#llx", (unsigned long long)r,
          (unsigned long long)p);
    cuMemFree(q);
    cuMemFree(r);
    cuMemFree(gate);
    CHECK(cuCtxPushCurrent(mine) == CUDA_SUCCESS && cuStreamDestroy(s) == CUDA_SUCCESS, "the stream goes");
    CHECK(cuCtxDestroy(mine) == CUDA_SUCCESS, "the second context goes");
    CHECK(cuCtxSetCurrent(primary) == CUDA_SUCCESS, "the primary context");
    all_back(0, "second-context");
    CHECK_DONE("second-context");
}

/* Plain frees first, and an allocation after each (which records the fence
 * of the frees before it): cudalloc's fences have then been handed out. */
static void plain_free(void) {
    CUdeviceptr p;
    for (int i = 0; i < 2; i++)
        CHECK(cuMemAlloc(&p, 4 * MIB) == CUDA_SUCCESS && cuMemFree(p) == CUDA_SUCCESS, "a plain free");
}

/* A non-blocking stream that ends waiting for a flag is destroyed; the
 * legacy stream then sets the flag. CUDA makes the legacy stream wait for no
 * destroyed stream, so the write runs and the wait ends. */
static int wait_destroyed(void) {
    CUdeviceptr flag = flag_zero();
    CUstream s;
    plain_free();
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "a non-blocking stream");
    CHECK(cuStreamWaitValue32(s, flag, 1, CU_STREAM_WAIT_VALUE_EQ) == CUDA_SUCCESS, "it waits for the flag");
    CHECK(cuStreamDestroy(s) == CUDA_SUCCESS, "and is destroyed, still waiting");
    CHECK(cuStreamWriteValue32(NULL, flag, 1, 0) == CUDA_SUCCESS, "the legacy stream sets the flag");
    CHECK(cuStreamQuery(NULL) == CUDA_SUCCESS, "the legacy stream is not stuck behind the destroyed stream");
    CHECK(flag_value(flag) == 1, "the flag was set");
    plain_free(); /* the destroyed stream's work is done: fences pass */
    CHECK(cuMemFree(flag) == CUDA_SUCCESS, "free the flag");
    all_back(0, "wait-destroyed");
    CHECK_DONE("wait-destroyed");
}

/* A blocking stream waits for a flag (the legacy stream waits for it, as CUDA
 * says); a non-blocking stream made then sets the flag. CUDA orders a new
 * non-blocking stream after nothing, so the write runs and the wait ends. */
static int wait_created(void) {
    CUdeviceptr flag = flag_zero();
    CUstream b, n;
    plain_free();
    CHECK(cuStreamCreate(&b, 0) == CUDA_SUCCESS, "a blocking stream");
    CHECK(cuStreamWaitValue32(b, flag, 1, CU_STREAM_WAIT_VALUE_EQ) == CUDA_SUCCESS, "it waits for the flag");
    CHECK(cuStreamCreate(&n, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "a non-blocking stream, made now");
    CHECK(cuStreamWriteValue32(n, flag, 1, 0) == CUDA_SUCCESS, "sets the flag");
    CHECK(cuStreamQuery(n) == CUDA_SUCCESS, "the new stream is not stuck behind the legacy stream");
    CHECK(cuStreamQuery(b) == CUDA_SUCCESS && flag_value(flag) == 1, "the wait ended");
    cuStreamDestroy(n);
    cuStreamDestroy(b);
    CHECK(cuMemFree(flag) == CUDA_SUCCESS, "free the flag");
    all_back(0, "wait-created");
    CHECK_DONE("wait-created");
}

/* The primary context lives while anyone retains it, the driver included
 * (green contexts, libraries through routes no interposer sees): the
 * program's last release of its own retains leaves its memory alone. */
static int retained(void) {
    int (*unseen)(int, int) = (int (*)(int, int))dlsym(RTLD_DEFAULT, "simgpu_primary_ctx_unseen");
    CUcontext primary;
    CUdeviceptr p;
    unsigned flags;
    int active = 0;
    CHECK(unseen != NULL, "simgpu_primary_ctx_unseen");
    if (!unseen) CHECK_DONE("retained");
    CHECK(cuInit(0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS &&
              cuCtxSetCurrent(primary) == CUDA_SUCCESS,
          "the program retains the primary context");
    CHECK(unseen(0, 1) == 0, "and so does the driver, unseen");
    CHECK(cuMemAlloc(&p, 4 * MIB) == CUDA_SUCCESS, "cuMemAlloc");
    CHECK(cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS, "the program's last release");
    CHECK(cuDevicePrimaryCtxGetState(0, &flags, &active) == CUDA_SUCCESS && active, "the context lives on");
    CHECK(stats(0).allocated_bytes == (int64_t)(4 * MIB), "the allocation too: %lld bytes allocated",
          (long long)stats(0).allocated_bytes);
    CHECK(cuMemsetD8(p, 1, 4 * MIB) == CUDA_SUCCESS, "and its memory is still there");
    CHECK(cuMemFree(p) == CUDA_SUCCESS, "freed by the program");
    CHECK(unseen(0, 0) == 0, "the driver's release");
    CHECK(cuDevicePrimaryCtxGetState(0, &flags, &active) == CUDA_SUCCESS && !active, "the context went");
    CHECK(cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS && cuCtxSetCurrent(primary) == CUDA_SUCCESS &&
              cuMemAlloc(&p, 4 * MIB) == CUDA_SUCCESS && cuMemsetD8(p, 1, 4 * MIB) == CUDA_SUCCESS &&
              cuMemFree(p) == CUDA_SUCCESS,
          "a new retain allocates");
    all_back(0, "retained");
    CHECK_DONE("retained");
}

/* An allocation short of memory waits for a fence: the host thread sleeps in
 * that wait, it does not spin a core (CUDA's default for an event's wait).
 * Run with CUDALLOC_SIM_MEMORY=64MiB. */
static int no_spin(void) {
    CUstream s;
    CUdeviceptr p, q;
    cuMemFree(flag_zero()); /* for its context */
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "a non-blocking stream");
    CHECK(cuMemAlloc(&p, 48 * MIB) == CUDA_SUCCESS, "48 MiB of 64");
    CHECK(hold(s, 1) == 0 && cuMemsetD8Async(p, 1, 48 * MIB, s) == CUDA_SUCCESS, "work queued on it");
    CHECK(cuMemFree(p) == CUDA_SUCCESS, "cuMemFree");
    simgpu_counters_t before = sim();
    CHECK(cuMemAlloc(&q, 48 * MIB) == CUDA_SUCCESS && q == p, "48 MiB again: after the fence");
    simgpu_counters_t after = sim();
    CHECK(after.event_syncs + after.stream_syncs + after.ctx_syncs >
              before.event_syncs + before.stream_syncs + before.ctx_syncs,
          "the host waited");
    CHECK(after.spin_waits == before.spin_waits, "and slept: %llu waits spun a core",
          (unsigned long long)(after.spin_waits - before.spin_waits));
    hold(s, 0);
    cuMemFree(q);
    cuStreamDestroy(s);
    all_back(0, "no-spin");
    CHECK_DONE("no-spin");
}

/* One cuMemCreate refused with CUDA_ERROR_INVALID_VALUE (run with
 * CUDALLOC_SIM_FAIL=cuMemCreate:CUDA_ERROR_INVALID_VALUE:0:1: as a driver
 * that takes no GPUDirect RDMA flag answers): the flag goes, the shareable
 * handles stay, so blocks can still be shared with another process. */
static int rdma_refused(void) {
    CUdeviceptr p;
    CUipcMemHandle h;
    cuMemFree(flag_zero()); /* for its context */
    CHECK(cuMemAlloc(&p, 4 * MIB) == CUDA_SUCCESS, "cuMemAlloc after the refusal");
    CHECK(cuIpcGetMemHandle(&h, p) == CUDA_SUCCESS, "its block can still be shared (IPC)");
    CHECK(cuMemFree(p) == CUDA_SUCCESS, "cuMemFree");
    all_back(0, "rdma-refused");
    CHECK_DONE("rdma-refused");
}

/* The recommended granularity is a hint (run with
 * CUDALLOC_SIM_GRANULARITY=4MiB,6MiB: a recommended size that is no multiple
 * of the minimum): cudalloc's granule is a multiple of the minimum all the
 * same (8 MiB), and allocations work. Its reservations ask for that
 * alignment: the driver promises none beyond the minimum granularity (the
 * simulator gives an odd multiple of it when none is asked), and a granule
 * mapped at an address aligned to its size is what large pages need. */
static int granule(void) {
    CUdeviceptr p, q, flag = flag_zero(); /* for its context; the reservation's first block */
    CHECK(flag % (8 * MIB) == 0, "the first block of a reservation starts granule-aligned: %#llx",
          (unsigned long long)flag);
    cuMemFree(flag);
    CHECK(cuMemAlloc(&p, 4 * MIB) == CUDA_SUCCESS && cuMemsetD8(p, 1, 4 * MIB) == CUDA_SUCCESS, "4 MiB");
    CHECK(cuMemAlloc(&q, 1000) == CUDA_SUCCESS && cuMemsetD8(q, 1, 1000) == CUDA_SUCCESS, "1000 B");
    cudalloc_stats s = stats(0);
    CHECK(s.reserved_bytes % (4 * MIB) == 0, "reserved %lld: whole minimum granules", (long long)s.reserved_bytes);
    cuMemFree(p);
    cuMemFree(q);
    all_back(0, "granule");
    CHECK_DONE("granule");
}

/* A destroyed stream's handle is not asked about (cuStreamGetFlags on it is
 * undefined: the driver may have handed it out again, or crash): cudalloc
 * answers CUDA_ERROR_INVALID_HANDLE itself for a stream it saw destroyed. */
static int dead_stream(void) {
    CUstream s;
    CUdeviceptr p = 0, x = 0;
    cuMemFree(flag_zero()); /* for its context */
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS && cuMemAllocAsync(&x, 4096, s) == CUDA_SUCCESS,
          "a stream, a block in its order");
    CHECK(cuStreamDestroy(s) == CUDA_SUCCESS, "destroyed");
    simgpu_counters_t before = sim();
    CHECK(cuMemAllocAsync(&p, 4096, s) == CUDA_ERROR_INVALID_HANDLE, "an allocation in its order is refused");
    CHECK(cuMemFreeAsync(x, s) == CUDA_ERROR_INVALID_HANDLE, "so is a free");
    CHECK(sim().dead_stream_uses == before.dead_stream_uses, "without asking the driver about the dead handle: %llu",
          (unsigned long long)(sim().dead_stream_uses - before.dead_stream_uses));
    CHECK(cuMemFree(x) == CUDA_SUCCESS, "a plain free frees the block");
    all_back(0, "dead-stream");
    CHECK_DONE("dead-stream");
}

/* Peer access is granted per range of contiguous mappings, not per 2 MiB
 * mapping: a 64 MiB block (32 granules) opened to device 1 by one
 * cuMemSetAccess, not 32. Run with CUDALLOC_SIM_DEVICES=2. */
static int peer_ranges(void) {
    CUcontext c0, c1;
    CUdeviceptr p;
    CHECK(cuInit(0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&c0, 0) == CUDA_SUCCESS &&
              cuDevicePrimaryCtxRetain(&c1, 1) == CUDA_SUCCESS && cuCtxSetCurrent(c0) == CUDA_SUCCESS,
          "two devices");
    CHECK(cuMemAlloc(&p, 64 * MIB) == CUDA_SUCCESS, "64 MiB on device 0");
    simgpu_counters_t before = sim();
    CHECK(cuCtxSetCurrent(c1) == CUDA_SUCCESS && cuCtxEnablePeerAccess(c0, 0) == CUDA_SUCCESS, "device 1 -> 0");
    unsigned long long calls = sim().mem_set_access - before.mem_set_access;
    CHECK(calls == 1, "granted in %llu cuMemSetAccess calls", calls);
    CHECK(simgpu_kernel_access_fn && simgpu_kernel_access_fn((void *)(p + 63 * MIB), MIB, 1) == 0,
          "a kernel on device 1 reaches the whole block");
    CHECK(cuCtxDisablePeerAccess(c0) == CUDA_SUCCESS && cuCtxSetCurrent(c0) == CUDA_SUCCESS, "disabled");
    cuMemFree(p);
    all_back(0, "peer-ranges");
    CHECK_DONE("peer-ranges");
}

/* CUDA cannot be used in a child forked after it was initialized: the
 * driver's own answer (CUDA_ERROR_NOT_INITIALIZED) is what the child gets,
 * from cudalloc's entry points too. On simgpu run with CUDALLOC_SIM_FORK=real. */
static int fork_child(void) {
    CUdeviceptr p;
    cuMemFree(flag_zero()); /* initialized, a context current */
    CHECK(cuMemAlloc(&p, MIB) == CUDA_SUCCESS, "the parent allocates");
    pid_t pid = fork();
    if (pid == 0) {
        CUdeviceptr c = 0;
        CUresult alloc = cuMemAlloc(&c, MIB), asynch = cuMemAllocAsync(&c, MIB, NULL);
        size_t f, t;
        CUresult info = cuMemGetInfo(&f, &t);
        int bad = (alloc != CUDA_ERROR_NOT_INITIALIZED) | (asynch != CUDA_ERROR_NOT_INITIALIZED) << 1 |
                  (info != CUDA_ERROR_NOT_INITIALIZED) << 2;
        if (bad) fprintf(stderr, "child: cuMemAlloc %d, cuMemAllocAsync %d, cuMemGetInfo %d\n", alloc, asynch, info);
        _exit(bad);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child got the driver's CUDA_ERROR_NOT_INITIALIZED from every call (status %#x)", status);
    CHECK(cuMemFree(p) == CUDA_SUCCESS, "the parent goes on");
    all_back(0, "fork-child");
    CHECK_DONE("fork-child");
}

/* cuMemSetAccess and cuMemUnmap are synchronous (cuda.h), which a global
 * capture forbids; cuMemAllocAsync is not. A stream-ordered allocation on
 * another stream during a capture, one that makes cudalloc map new memory,
 * and its free with the cache given back, leave the capture valid. */
static int vmm_capture(void) {
    CUstream s, t;
    CUdeviceptr p = 0;
    CUgraph g = NULL;
    cuMemFree(flag_zero()); /* for its context */
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
              cuStreamCreate(&t, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS,
          "two streams");
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS, "a global capture on one");
    CHECK(cuMemAllocAsync(&p, 64 * MIB, t) == CUDA_SUCCESS, "64 MiB in the other's order: new memory mapped");
    CHECK(cuMemFreeAsync(p, t) == CUDA_SUCCESS && CUDALLOC_CALL(cudalloc_empty_cache) == 0,
          "freed, the cache given back");
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CHECK(cuStreamIsCapturing(s, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE,
          "the capture is still valid (status %d)", st);
    CHECK(cuStreamEndCapture(s, &g) == CUDA_SUCCESS, "and ends");
    if (g) cuGraphDestroy(g);
    cuStreamDestroy(s);
    cuStreamDestroy(t);
    all_back(0, "vmm-capture");
    CHECK_DONE("vmm-capture");
}

/* Every entry cudalloc serves, asked of cuGetProcAddress by its base name
 * at each CUDA version that changed it, with and without the per-thread
 * flag: the answer is cudalloc's (found in libcudalloc), whatever address the
 * driver gave for it. */
static const struct {
    const char *symbol;
    int version;
    const char *entry, *per_thread; /* what each flag's answer stands for */
} served[] = {
    {"cuMemAlloc", 3020, "cuMemAlloc_v2", "cuMemAlloc_v2"},
    {"cuMemAllocPitch", 3020, "cuMemAllocPitch_v2", "cuMemAllocPitch_v2"},
    {"cuMemFree", 3020, "cuMemFree_v2", "cuMemFree_v2"},
    {"cuMemGetInfo", 3020, "cuMemGetInfo_v2", "cuMemGetInfo_v2"},
    {"cuMemAllocAsync", 11020, "cuMemAllocAsync", "cuMemAllocAsync_ptsz"},
    {"cuMemFreeAsync", 11020, "cuMemFreeAsync", "cuMemFreeAsync_ptsz"},
    {"cuStreamCreate", 2000, "cuStreamCreate", "cuStreamCreate"},
    {"cuStreamCreateWithPriority", 5050, "cuStreamCreateWithPriority", "cuStreamCreateWithPriority"},
    {"cuStreamDestroy", 4000, "cuStreamDestroy_v2", "cuStreamDestroy_v2"},
    {"cuDevicePrimaryCtxReset", 7000, "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset"},
    {"cuDevicePrimaryCtxReset", 11000, "cuDevicePrimaryCtxReset_v2", "cuDevicePrimaryCtxReset_v2"},
    {"cuDevicePrimaryCtxRetain", 7000, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain"},
    {"cuDevicePrimaryCtxRelease", 7000, "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease"},
    {"cuDevicePrimaryCtxRelease", 11000, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease_v2"},
    {"cuCtxDestroy", 4000, "cuCtxDestroy_v2", "cuCtxDestroy_v2"},
    {"cuCtxCreate", 3020, "cuCtxCreate_v2", "cuCtxCreate_v2"},
    {"cuCtxCreate", 12050, "cuCtxCreate_v4", "cuCtxCreate_v4"},
    {"cuStreamBeginCapture", 10000, "cuStreamBeginCapture", "cuStreamBeginCapture_ptsz"},
    {"cuStreamBeginCapture", 10010, "cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz"},
    {"cuStreamEndCapture", 10000, "cuStreamEndCapture", "cuStreamEndCapture_ptsz"},
    {"cuCtxEnablePeerAccess", 4000, "cuCtxEnablePeerAccess", "cuCtxEnablePeerAccess"},
    {"cuCtxDisablePeerAccess", 4000, "cuCtxDisablePeerAccess", "cuCtxDisablePeerAccess"},
    {"cuIpcGetMemHandle", 4010, "cuIpcGetMemHandle", "cuIpcGetMemHandle"},
    {"cuIpcOpenMemHandle", 11000, "cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle_v2"},
    {"cuIpcCloseMemHandle", 4010, "cuIpcCloseMemHandle", "cuIpcCloseMemHandle"},
    {"cuGetProcAddress", 12000, "cuGetProcAddress_v2", "cuGetProcAddress_v2"},
    {"cuCtxCreate", 11040, "cuCtxCreate_v3", "cuCtxCreate_v3"},
    {"cuGreenCtxCreate", 12040, "cuGreenCtxCreate", "cuGreenCtxCreate"},
    {"cuGreenCtxDestroy", 12040, "cuGreenCtxDestroy", "cuGreenCtxDestroy"},
    {"cuStreamBeginCaptureToGraph", 12030, "cuStreamBeginCaptureToGraph", "cuStreamBeginCaptureToGraph_ptsz"},
    {"cuMemGetAddressRange", 3020, "cuMemGetAddressRange_v2", "cuMemGetAddressRange_v2"},
    {"cuPointerGetAttribute", 4000, "cuPointerGetAttribute", "cuPointerGetAttribute"},
    {"cuPointerGetAttributes", 7000, "cuPointerGetAttributes", "cuPointerGetAttributes"},
    {"cuMemRetainAllocationHandle", 11000, "cuMemRetainAllocationHandle", "cuMemRetainAllocationHandle"},
    {"cuMemGetHandleForAddressRange", 11070, "cuMemGetHandleForAddressRange", "cuMemGetHandleForAddressRange"},
    {"cuMemCreate", 10020, "cuMemCreate", "cuMemCreate"},
    {"cuMemAllocManaged", 6000, "cuMemAllocManaged", "cuMemAllocManaged"},
    {"cuMemAllocFromPoolAsync", 11020, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz"},
};

static int is_cudallocs(void *fn) {
    Dl_info di;
    return fn && dladdr(fn, &di) && di.dli_fname && strstr(di.dli_fname, "libcudalloc");
}

typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static int entry_points(void) {
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    getproc_fn getproc = cuda ? (getproc_fn)dlsym(cuda, "cuGetProcAddress_v2") : NULL;
    CHECK(getproc && is_cudallocs((void *)getproc), "cuGetProcAddress_v2 through dlsym is cudalloc's");
    if (!getproc) CHECK_DONE("entry-points");
    int driver = 0;
    cuDriverGetVersion(&driver);
    for (size_t i = 0; i < sizeof served / sizeof served[0]; i++) {
        if (served[i].version > driver) continue;
        const cuuint64_t flags[] = {0, CU_GET_PROC_ADDRESS_LEGACY_STREAM, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM};
        for (int f = 0; f < 3; f++) {
            void *fn = NULL;
            const char *entry = f == 2 ? served[i].per_thread : served[i].entry;
            if (!dlsym(cuda, entry)) continue; /* a driver without that entry */
            CUresult r = getproc(served[i].symbol, &fn, served[i].version, flags[f], NULL);
            CHECK(r == CUDA_SUCCESS && is_cudallocs(fn), "%s at %d, flags %llu: cudalloc's %s, not the driver's",
                  served[i].symbol, served[i].version, (unsigned long long)flags[f], entry);
            CHECK(fn == dlsym(RTLD_DEFAULT, entry), "%s at %d, flags %llu: the same function as dlsym's %s",
                  served[i].symbol, served[i].version, (unsigned long long)flags[f], entry);
        }
    }
    CHECK_DONE("entry-points");
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    on_sim = simhooks_init();
    simgpu_kernel_access_fn = (int (*)(void *, size_t, int))dlsym(RTLD_DEFAULT, "simgpu_kernel_access");
    if (!strcmp(mode, "entry-points")) return entry_points();
    if (!strcmp(mode, "second-context")) return second_context();
    if (!strcmp(mode, "green-context")) return green_context();
    if (!strcmp(mode, "fork-child")) return fork_child();
    if (!strcmp(mode, "vmm-capture")) return vmm_capture();
    if (!strcmp(mode, "peer-ranges") && on_sim) return peer_ranges();
    if (!strcmp(mode, "wait-destroyed")) return wait_destroyed();
    if (!strcmp(mode, "wait-created")) return wait_created();
    if ((!strcmp(mode, "retained") || !strcmp(mode, "no-spin") || !strcmp(mode, "dead-stream") ||
         !strcmp(mode, "peer-ranges")) && !on_sim) {
        printf("%s: needs the simulated device: skipped\n", mode);
        return 0;
    }
    if (!strcmp(mode, "retained")) return retained();
    if (!strcmp(mode, "no-spin") && on_sim) return no_spin();
    if (!strcmp(mode, "rdma-refused")) return rdma_refused();
    if (!strcmp(mode, "granule")) return granule();
    if (!strcmp(mode, "dead-stream") && on_sim) return dead_stream();
    fprintf(stderr, "usage: prog_rules second-context|entry-points|wait-destroyed|wait-created|retained|no-spin|"
                    "rdma-refused|granule|dead-stream|green-context|peer-ranges|fork-child|vmm-capture\n");
    return 2;
}
