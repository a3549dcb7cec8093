/* simgpu stream capture and graphs: what is captured instead of run, the
 * calls capture forbids (per thread mode), the legacy stream while a blocking
 * stream captures, captured events, forks and joins, graph memory nodes, and
 * instantiate and launch running the captured work. */
#include <pthread.h>
#include <sys/mman.h>

#include <cuda_runtime_api.h>

#include "tests/sim/sim_test.h"

static CUstream stream(unsigned flags)
{
    CUstream s;
    CK(cuStreamCreate(&s, flags));
    return s;
}

static CUevent event(void)
{
    CUevent e;
    CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    return e;
}

static CUdeviceptr alloc(size_t n)
{
    CUdeviceptr p;
    CK(cuMemAlloc(&p, n));
    return p;
}

static CUstreamCaptureStatus status(CUstream s)
{
    CUstreamCaptureStatus st;
    CK(cuStreamIsCapturing(s, &st));
    return st;
}

static size_t node_count(CUgraph g)
{
    size_t n = 0;
    CK(cuGraphGetNodes(g, NULL, &n));
    return n;
}

static CUgraphNodeType node_type(CUgraph g, size_t i)
{
    CUgraphNode nodes[16];
    size_t n = 16;
    CK(cuGraphGetNodes(g, nodes, &n));
    ck_assert_uint_lt(i, n);
    CUgraphNodeType t;
    CK(cuGraphNodeGetType(nodes[i], &t));
    return t;
}

START_TEST(captured_work_runs_at_launch)
{
    sim_ctx();
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = alloc(4096);
    unsigned char host[4096];
    CK(cuMemsetD8(p, 1, 4096));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CK(cuMemsetD8Async(p, 7, 4096, s));
    CK(cuMemcpyDtoHAsync(host, p, 4096, s));
    ck_assert_uint_eq(((unsigned char *)p)[0], 1); /* captured, not run */
    CUgraph g;
    CK(cuStreamEndCapture(s, &g));
    ck_assert_int_eq(status(s), CU_STREAM_CAPTURE_STATUS_NONE);
    ck_assert_uint_eq(node_count(g), 2);
    ck_assert_int_eq(node_type(g, 0), CU_GRAPH_NODE_TYPE_MEMSET);
    ck_assert_int_eq(node_type(g, 1), CU_GRAPH_NODE_TYPE_MEMCPY);
    CUgraphExec x;
    CK(cuGraphInstantiate(&x, g, 0));
    host[100] = 0;
    CK(cuGraphLaunch(x, s));
    ck_assert_uint_eq(((unsigned char *)p)[4095], 7);
    ck_assert_uint_eq(host[100], 7);
    ck_assert_uint_eq(sim_counters().graph_launches, 1);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    ck_assert_int_eq(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(begin_and_end_errors)
{
    sim_ctx();
    CUstream s = stream(CU_STREAM_NON_BLOCKING), t = stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    ck_assert_int_eq(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL),
                     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(cuStreamBeginCapture(s, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
    /* t joins the capture, but the capture ends on s only */
    CUevent e = event();
    CK(cuEventRecord(e, s));
    CK(cuStreamWaitEvent(t, e, 0));
    ck_assert_int_eq(status(t), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    ck_assert_int_eq(cuStreamEndCapture(t, &g), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
    CK(cuStreamEndCapture(s, &g)); /* t did no work: nothing left unjoined */
    ck_assert_int_eq(status(t), CU_STREAM_CAPTURE_STATUS_NONE);
    CK(cuGraphDestroy(g));
    ck_assert_uint_eq(sim_counters().captures, 1);
}
END_TEST

START_TEST(cumemalloc_in_global_capture_invalidates_it)
{
    sim_ctx();
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p, q = alloc(4096);
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(cuMemAlloc(&p, 4096), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    ck_assert_int_eq(cuMemsetD8Async(q, 1, 16, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    ck_assert_int_eq(cuMemFree(q), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); /* still prohibited until the end */
    CUgraph g = (CUgraph)1;
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(status(s), CU_STREAM_CAPTURE_STATUS_NONE);
    CK(cuMemAlloc(&p, 4096)); /* allowed again */
    CK(cuMemFree(p));
    CK(cuMemFree(q));
    simgpu_counters_t c = sim_counters();
    ck_assert_uint_eq(c.captures_invalidated, 1);
    ck_assert_uint_ge(c.capture_refusals, 3);
}
END_TEST

/* Another thread's unsafe call, by its mode and the capture's. */
struct other {
    CUcontext ctx;
    CUstreamCaptureMode mode;
    CUresult alloc, query;
};

static void *other_thread(void *arg)
{
    struct other *o = arg;
    cuCtxSetCurrent(o->ctx);
    CUstreamCaptureMode m = o->mode;
    cuThreadExchangeStreamCaptureMode(&m);
    CUdeviceptr p;
    o->alloc = cuMemAlloc(&p, 512);
    if (o->alloc == CUDA_SUCCESS)
        cuMemFree(p);
    CUevent e;
    cuEventCreate(&e, 0);
    o->query = cuEventQuery(e);
    cuEventDestroy(e);
    return NULL;
}

static struct other from_other_thread(CUcontext ctx, CUstreamCaptureMode mode)
{
    struct other o = {ctx, mode, CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, other_thread, &o), 0);
    pthread_join(t, NULL);
    return o;
}

START_TEST(thread_modes)
{
    CUcontext ctx = sim_ctx();
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    /* a global capture prohibits global-mode threads everywhere */
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    struct other o = from_other_thread(ctx, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    ck_assert_int_eq(o.alloc, CUDA_SUCCESS);
    ck_assert_int_eq(o.query, CUDA_SUCCESS);
    o = from_other_thread(ctx, CU_STREAM_CAPTURE_MODE_RELAXED);
    ck_assert_int_eq(o.alloc, CUDA_SUCCESS);
    ck_assert_int_eq(status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    o = from_other_thread(ctx, CU_STREAM_CAPTURE_MODE_GLOBAL);
    ck_assert_int_eq(o.alloc, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(o.query, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); /* an event query is unsafe too */
    ck_assert_int_eq(status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* a thread-local capture prohibits its own thread only */
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    o = from_other_thread(ctx, CU_STREAM_CAPTURE_MODE_GLOBAL);
    ck_assert_int_eq(o.alloc, CUDA_SUCCESS);
    ck_assert_int_eq(status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    /* the capturing thread may relax itself: cudaMalloc then is allowed */
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    CK(cuThreadExchangeStreamCaptureMode(&m));
    ck_assert_int_eq(m, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 512));
    CK(cuThreadExchangeStreamCaptureMode(&m));
    ck_assert_int_eq(m, CU_STREAM_CAPTURE_MODE_RELAXED);
    ck_assert_int_eq(cuMemFree(p), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* a relaxed capture prohibits no one */
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuMemFree(p));
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphDestroy(g));
    m = (CUstreamCaptureMode)3;
    ck_assert_int_eq(cuThreadExchangeStreamCaptureMode(&m), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

static void *end_elsewhere(void *arg)
{
    CUgraph g;
    return (void *)(intptr_t)cuStreamEndCapture((CUstream)arg, &g);
}

START_TEST(end_from_another_thread)
{
    CUcontext ctx = sim_ctx();
    (void)ctx;
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    pthread_t t;
    void *r;
    pthread_create(&t, NULL, end_elsewhere, s);
    pthread_join(t, &r);
    ck_assert_int_eq((int)(intptr_t)r, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
    CUgraph g;
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphDestroy(g));
}
END_TEST

START_TEST(captured_events_and_syncs)
{
    CUcontext ctx = sim_ctx();
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    CUevent e = event(), before = event();
    CK(cuEventRecord(before, s));
    CUgraph g;
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuEventRecord(e, s));
    CK(cuEventQuery(before)); /* relaxed: an ordinary event may be queried */
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_CAPTURED_EVENT); /* in every mode */
    ck_assert_int_eq(status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    ck_assert_int_eq(cuEventSynchronize(e), CUDA_ERROR_CAPTURED_EVENT); /* until recorded again */
    CK(cuEventRecord(e, s));
    CK(cuEventQuery(e));
    /* a capturing stream and its context cannot be synchronized or queried */
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    ck_assert_int_eq(cuStreamQuery(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    (void)ctx;
}
END_TEST

START_TEST(legacy_stream_while_a_blocking_stream_captures)
{
    sim_ctx();
    CUstream b = stream(CU_STREAM_DEFAULT), n = stream(CU_STREAM_NON_BLOCKING);
    CUevent e = event();
    CUgraph g;
    CUstreamCaptureStatus st;
    /* a non-blocking capture leaves the legacy stream alone */
    CK(cuStreamBeginCapture(n, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuEventRecord(e, CU_STREAM_LEGACY));
    CK(cuStreamIsCapturing(NULL, &st));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CK(cuStreamEndCapture(n, &g));
    CK(cuGraphDestroy(g));
    /* a blocking one makes any use of it an implicit dependency */
    CK(cuStreamBeginCapture(b, CU_STREAM_CAPTURE_MODE_RELAXED));
    ck_assert_int_eq(cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    ck_assert_int_eq(status(b), CU_STREAM_CAPTURE_STATUS_ACTIVE); /* asking does not invalidate */
    ck_assert_int_eq(cuEventRecord(e, CU_STREAM_LEGACY), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    ck_assert_int_eq(status(b), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    ck_assert_int_eq(cuStreamEndCapture(b, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CUdeviceptr p = alloc(4096);
    unsigned char h[16];
    CK(cuStreamBeginCapture(b, CU_STREAM_CAPTURE_MODE_RELAXED));
    ck_assert_int_eq(cuMemcpyDtoH(h, p, 16), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT); /* synchronous: the legacy stream */
    ck_assert_int_eq(cuStreamEndCapture(b, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamBeginCapture(b, CU_STREAM_CAPTURE_MODE_RELAXED));
    ck_assert_int_eq(cuStreamWaitEvent(NULL, e, 0), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    ck_assert_int_eq(cuStreamEndCapture(b, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuMemcpyDtoH(h, p, 16)); /* usable again */
}
END_TEST

START_TEST(fork_and_join)
{
    sim_ctx();
    CUstream s = stream(CU_STREAM_NON_BLOCKING), t = stream(CU_STREAM_NON_BLOCKING);
    CUevent fork = event(), joinev = event(), outside = event();
    CUdeviceptr p = alloc(4096);
    CUgraph g;
    CK(cuEventRecord(outside, t));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuMemsetD8Async(p, 1, 1024, s));
    CK(cuEventRecord(fork, s));
    CK(cuStreamWaitEvent(t, fork, 0));
    CK(cuMemsetD8Async(p + 1024, 2, 1024, t));
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    ck_assert_int_eq(status(t), CU_STREAM_CAPTURE_STATUS_NONE);

    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuMemsetD8Async(p, 1, 1024, s));
    CK(cuEventRecord(fork, s));
    CK(cuStreamWaitEvent(t, fork, 0));
    CK(cuMemsetD8Async(p + 1024, 2, 1024, t));
    CK(cuEventRecord(joinev, t));
    CK(cuStreamWaitEvent(s, joinev, 0));
    CK(cuStreamEndCapture(s, &g));
    ck_assert_uint_eq(node_count(g), 2);
    CUgraphExec x;
    CK(cuGraphInstantiate(&x, g, 0));
    CK(cuGraphLaunch(x, NULL));
    ck_assert_uint_eq(((unsigned char *)p)[0], 1);
    ck_assert_uint_eq(((unsigned char *)p)[1024], 2);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));

    /* waiting in a capture on work from outside it crosses its boundary */
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(cuStreamWaitEvent(s, outside, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}
END_TEST

START_TEST(event_nodes)
{
    setenv("CUDALLOC_SIM_LATE_EVENTS", "1", 1);
    sim_ctx();
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    CUevent e = event(), w = event();
    CUgraph g;
    ck_assert_int_eq(cuEventRecordWithFlags(e, s, CU_EVENT_RECORD_EXTERNAL), CUDA_ERROR_INVALID_VALUE);
    CK(cuEventRecord(w, NULL));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuStreamWaitEvent(s, w, CU_EVENT_WAIT_EXTERNAL));
    CK(cuEventRecordWithFlags(e, s, CU_EVENT_RECORD_EXTERNAL));
    CK(cuStreamEndCapture(s, &g));
    ck_assert_int_eq(node_type(g, 0), CU_GRAPH_NODE_TYPE_WAIT_EVENT);
    ck_assert_int_eq(node_type(g, 1), CU_GRAPH_NODE_TYPE_EVENT_RECORD);
    CUgraphExec x;
    CK(cuGraphInstantiate(&x, g, 0));
    uint64_t records = sim_counters().event_records;
    CK(cuGraphLaunch(x, s));
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_NOT_READY); /* recorded by the launch: late once */
    CK(cuEventQuery(e));
    ck_assert_uint_eq(sim_counters().event_records, records);
    void *last = NULL;
    ck_assert_int_eq(simgpu_stream_last_wait(s, &last), 0);
    ck_assert_ptr_eq(last, w);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
}
END_TEST

START_TEST(graph_memory_nodes)
{
    setenv("CUDALLOC_SIM_MEMORY", "64MiB", 1);
    sim_ctx();
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p, q, eager = alloc(4096);
    CUgraph g;
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuMemAllocAsync(&p, 8 * MiB, s));
    CK(cuMemsetD8Async(p, 5, 8 * MiB, s));
    CK(cuMemAllocAsync(&q, MiB, s));
    CK(cuMemFreeAsync(q, s)); /* freed in the graph */
    CK(cuStreamEndCapture(s, &g));
    ck_assert_uint_eq(sim_counters().graph_allocs, 2);
    ck_assert_uint_eq(sim_counters().bytes_in_use, 4096);
    ck_assert_int_eq(cuMemsetD8(p, 1, 16), CUDA_ERROR_INVALID_VALUE); /* not allocated before a launch */
    ck_assert_ptr_nonnull(strstr(sim_maps_line((void *)p), " ---p ")); /* an address, no memory */
    CUgraphExec x, y;
    CK(cuGraphInstantiate(&x, g, 0));
    ck_assert_int_eq(cuGraphInstantiate(&y, g, 0), CUDA_ERROR_INVALID_VALUE); /* one at a time */
    CK(cuGraphLaunch(x, s));
    ck_assert_uint_eq(((unsigned char *)p)[8 * MiB - 1], 5);
    ck_assert_uint_eq(sim_counters().bytes_in_use, 4096 + 8 * MiB);
    ck_assert_int_eq(cuGraphLaunch(x, s), CUDA_ERROR_INVALID_VALUE); /* p is still allocated */
    CK(cuMemFreeAsync(p, s)); /* freed outside the graph */
    ck_assert_uint_eq(sim_counters().bytes_in_use, 4096);
    ck_assert_int_eq(cuMemFree(q), CUDA_ERROR_INVALID_VALUE); /* freed in its graph only */
    CK(cuGraphLaunch(x, s));
    CK(cuGraphExecDestroy(x));
    CK(cuGraphInstantiate(&y, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
    CK(cuGraphLaunch(y, s)); /* frees p first, same address */
    ck_assert_uint_eq(((unsigned char *)p)[0], 5);
    ck_assert_uint_eq(sim_counters().bytes_in_use, 4096 + 8 * MiB);
    CK(cuGraphExecDestroy(y));
    CK(cuGraphDestroy(g));
    ck_assert_uint_eq(((unsigned char *)p)[1], 5); /* the allocation outlives the graph */
    CK(cuMemFree(p));
    ck_assert_uint_eq(sim_counters().bytes_in_use, 4096);
    ck_assert_str_eq(sim_maps_line((void *)p), ""); /* and its address goes with it */

    /* a free node needs a graph allocation */
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(cuMemFreeAsync(eager, s), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuMemFree(eager));
}
END_TEST

START_TEST(a_destroyed_stream_leaves_its_capture)
{
    sim_ctx();
    CUstream s = stream(CU_STREAM_NON_BLOCKING), t = stream(CU_STREAM_NON_BLOCKING);
    CUevent e = event();
    CUgraph g;
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuEventRecord(e, s));
    CK(cuStreamWaitEvent(t, e, 0));
    CK(cuStreamDestroy(t));
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuStreamDestroy(s)); /* the origin: the capture ends with it */
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 512));
}
END_TEST

/* The _ptsz entry points, declared only in the driver's own build of cuda.h. */
CUresult cuStreamBeginCapture_v2_ptsz(CUstream, CUstreamCaptureMode);
CUresult cuStreamEndCapture_ptsz(CUstream, CUgraph *);
CUresult cuMemsetD8Async_ptsz(CUdeviceptr, unsigned char, size_t, CUstream);

START_TEST(per_thread_stream_captures)
{
    sim_ctx();
    CUdeviceptr p = alloc(4096);
    CUgraph g;
    CK(cuStreamBeginCapture_v2_ptsz(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(status(CU_STREAM_PER_THREAD), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CK(cuMemsetD8Async_ptsz(p, 3, 64, NULL));
    ck_assert_uint_eq(((unsigned char *)p)[0], 0);
    CUstreamCaptureStatus st;
    ck_assert_int_eq(cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT); /* it is blocking */
    CK(cuStreamEndCapture_ptsz(NULL, &g));
    ck_assert_uint_eq(node_count(g), 1);
    CK(cuGraphDestroy(g));
}
END_TEST

/* The runtime's calls reach the same rules: what PyTorch's uncached
 * allocator relies on (cudaMalloc failing in a global capture). */
START_TEST(runtime_capture)
{
    cudaStream_t s;
    void *p, *q;
    cudaGraph_t g;
    cudaGraphExec_t x;
    enum cudaStreamCaptureStatus st;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&q, 4096), cudaSuccess);
    ck_assert_int_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    ck_assert_int_eq(cudaStreamIsCapturing(s, &st), cudaSuccess);
    ck_assert_int_eq(st, cudaStreamCaptureStatusActive);
    ck_assert_int_eq(cudaMalloc(&p, 4096), cudaErrorStreamCaptureUnsupported);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorStreamCaptureUnsupported);
    ck_assert_int_eq(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    ck_assert_int_eq(cudaThreadExchangeStreamCaptureMode(&m), cudaSuccess);
    ck_assert_int_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&p, 4096), cudaSuccess); /* PyTorch's cudaMallocMaybeCapturing */
    ck_assert_int_eq(cudaMallocAsync(&p, 4096, s), cudaSuccess);
    ck_assert_int_eq(cudaMemsetAsync(p, 9, 4096, s), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(q, p, 4096, cudaMemcpyDeviceToDevice, s), cudaSuccess);
    ck_assert_int_eq(cudaFreeAsync(p, s), cudaSuccess);
    unsigned long long id = 0;
    size_t ndeps = 0;
    ck_assert_int_eq(cudaStreamGetCaptureInfo(s, &st, &id, NULL, NULL, NULL, &ndeps), cudaSuccess);
    ck_assert_uint_eq(id, 2);
    ck_assert_uint_eq(ndeps, 1);
    ck_assert_int_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
    ck_assert_int_eq(cudaGraphInstantiate(&x, g, cudaGraphInstantiateFlagAutoFreeOnLaunch), cudaSuccess);
    ck_assert_int_eq(cudaGraphLaunch(x, s), cudaSuccess);
    ck_assert_uint_eq(((unsigned char *)q)[4095], 9);
    ck_assert_int_eq(cudaGraphExecDestroy(x), cudaSuccess);
    ck_assert_int_eq(cudaGraphDestroy(g), cudaSuccess);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sim_capture");
    TCase *tc = tcase_create("capture");
    tcase_add_test(tc, captured_work_runs_at_launch);
    tcase_add_test(tc, begin_and_end_errors);
    tcase_add_test(tc, cumemalloc_in_global_capture_invalidates_it);
    tcase_add_test(tc, thread_modes);
    tcase_add_test(tc, end_from_another_thread);
    tcase_add_test(tc, captured_events_and_syncs);
    tcase_add_test(tc, legacy_stream_while_a_blocking_stream_captures);
    tcase_add_test(tc, fork_and_join);
    tcase_add_test(tc, event_nodes);
    tcase_add_test(tc, graph_memory_nodes);
    tcase_add_test(tc, a_destroyed_stream_leaves_its_capture);
    tcase_add_test(tc, per_thread_stream_captures);
    tcase_add_test(tc, runtime_capture);
    suite_add_tcase(s, tc);
    return sim_run(s);
}
