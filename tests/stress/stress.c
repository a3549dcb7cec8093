/* A whole-program stress test of libcudalloc.so, run under the preload on the
 * simulated device (tests/stress/run.sh) with a device small enough that
 * allocations fail:
 *
 *   mix        THREADS threads x STREAMS streams of their own (half of them
 *              non-blocking, each replaced by a new one now and then while
 *              blocks allocated on it are still live, and short-lived helper
 *              threads allocating on their per-thread streams, leaving blocks
 *              behind) allocate sizes from 1 B to MAX (log-uniform)
 *              through cudaMalloc, cudaMallocAsync, cuMemAlloc and
 *              cuMemAllocAsync, write a pattern into every block through the
 *              device's copies and memsets, verify it before every free, and
 *              free through cudaFree, cudaFreeAsync, cuMemFree and
 *              cuMemFreeAsync. Checked: no two live blocks overlap (an interval
 *              set, and the patterns), out of memory is cudaErrorMemoryAllocation
 *              or CUDA_ERROR_OUT_OF_MEMORY and the program goes on, every other
 *              call succeeds, and at the end the allocator's statistics are back
 *              to zero and, with the cache emptied, so is the device.
 *   bad-frees  double, interior, foreign (host, and device memory the driver
 *              mapped for us directly) frees, and frees after cudaDeviceReset
 *              and cuDevicePrimaryCtxReset: the error codes CUDA returns, and
 *              the program and its other blocks go on unharmed.
 *   fork       forks while other threads allocate: each child allocates, checks
 *              and frees, and exits; none hangs.
 *
 * One summary line on stdout; the exit status says whether every check passed. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "include/cudalloc.h"
#include "simgpu/simgpu.h"

#define MIB ((size_t)1 << 20)
#define CHUNK MIB /* copies go through a host buffer of this size */

/* ---- checks: counted, the first few printed ---- */

static _Atomic long failures;
#define FAIL(...)                                                                          \
    do {                                                                                   \
        if (failures++ < 20) {                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                           \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
        }                                                                                  \
    } while (0)
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) FAIL(#cond ": " __VA_ARGS__);                                         \
    } while (0)

static int (*sim_counters)(simgpu_counters_t *);

static cudalloc_stats stats(void) {
    cudalloc_stats s;
    memset(&s, 0, sizeof s);
    if (CUDALLOC_CALL(cudalloc_get_stats, 0, &s) != 0) FAIL("cudalloc_get_stats: is the preload loaded?");
    return s;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* xorshift64*: each thread its own sequence */
static uint64_t next(uint64_t *s) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}
static double uniform(uint64_t *s) { return (double)(next(s) >> 11) / 9007199254740992.0; }

/* ---- live blocks: an interval set shared by all threads ---- */

typedef struct span {
    uintptr_t lo, hi;
    int thread;
} span;
static pthread_mutex_t spans_lock = PTHREAD_MUTEX_INITIALIZER;
static span *spans;
static size_t n_spans, cap_spans;
static _Atomic long overlaps;

static void spans_add(uintptr_t p, size_t size, int thread) {
    pthread_mutex_lock(&spans_lock);
    for (size_t i = 0; i < n_spans; i++)
        if (p < spans[i].hi && spans[i].lo < p + size) {
            overlaps++;
            FAIL("block [%#lx, +%zu) of thread %d overlaps live [%#lx, %#lx) of thread %d", (unsigned long)p, size,
                 thread, (unsigned long)spans[i].lo, (unsigned long)spans[i].hi, spans[i].thread);
        }
    if (n_spans == cap_spans) {
        cap_spans = cap_spans ? 2 * cap_spans : 256;
        spans = realloc(spans, cap_spans * sizeof *spans);
        if (!spans) abort();
    }
    spans[n_spans++] = (span){p, p + size, thread};
    pthread_mutex_unlock(&spans_lock);
}

/* Before the free: once freed, the range may be handed out again at once. */
static void spans_remove(uintptr_t p) {
    pthread_mutex_lock(&spans_lock);
    size_t i = 0;
    while (i < n_spans && spans[i].lo != p) i++;
    if (i < n_spans) spans[i] = spans[--n_spans];
    else FAIL("block %#lx not in the live set", (unsigned long)p);
    pthread_mutex_unlock(&spans_lock);
}

/* ---- patterns, written and read through the device's copies ---- */

enum api { RT_SYNC, RT_ASYNC, DRV_SYNC, DRV_ASYNC, N_API };
static const char *const api_name[N_API] = {"cudaMalloc", "cudaMallocAsync", "cuMemAlloc", "cuMemAllocAsync"};

typedef struct block {
    uintptr_t p;
    size_t size;
    uint64_t tag;
    enum api api;
    cudaStream_t stream; /* where an async block was allocated */
    int fill;            /* 0: a position pattern copied in; 1: one byte value set */
} block;

/* The pattern's 8 bytes at word index w (offset 8w) of a block with this tag:
 * position-dependent, so a block aliased or shifted shows. */
static uint64_t word_at(uint64_t tag, size_t w) { return (tag ^ (uint64_t)w) * 0x9E3779B97F4A7C15ull + tag; }

static void pattern(uint64_t tag, size_t off, unsigned char *buf, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = word_at(tag, (off + i) / 8);
        memcpy(buf + i, &v, n - i < 8 ? n - i : 8);
    }
}

static unsigned char fill_byte(uint64_t tag) { return (unsigned char)(tag >> 56 | 1); }

typedef struct worker {
    int id;
    uint64_t rng;
    cudaStream_t streams[8];
    int n_streams;
    unsigned char *host; /* CHUNK bytes */
    unsigned char *want; /* CHUNK bytes */
    block *live;
    int n_live, max_live;
    double until;
    /* results */
    long ops, allocs, frees, ooms_rt, ooms_drv, checked_bytes;
    long by_api[N_API];
    int thread_stream_allocs;
    long streams_replaced, helpers;
    int in_helper; /* a helper thread runs on this worker's behalf: its own stream */
} worker;

/* Any stream a block may go on: the thread's own, the legacy default stream,
 * the per-thread default stream. */
static cudaStream_t pick_stream(worker *w) {
    if (w->in_helper) return cudaStreamPerThread;
    uint64_t r = next(&w->rng) % 10;
    if (r == 0) return NULL;
    if (r == 1) {
        w->thread_stream_allocs++;
        return cudaStreamPerThread;
    }
    return w->streams[next(&w->rng) % (uint64_t)w->n_streams];
}

/* Host <-> device for one chunk, through one of the runtime's or the driver's
 * copies (sync, or async then a stream sync). */
static int to_device(worker *w, uintptr_t dst, const void *src, size_t n, cudaStream_t s) {
    switch (next(&w->rng) % 4) {
    case 0: return cudaMemcpy((void *)dst, src, n, cudaMemcpyHostToDevice) == cudaSuccess;
    case 1:
        return cudaMemcpyAsync((void *)dst, src, n, cudaMemcpyHostToDevice, s) == cudaSuccess &&
               cudaStreamSynchronize(s) == cudaSuccess;
    case 2: return cuMemcpyHtoD((CUdeviceptr)dst, src, n) == CUDA_SUCCESS;
    default:
        return cuMemcpyHtoDAsync((CUdeviceptr)dst, src, n, (CUstream)s) == CUDA_SUCCESS &&
               cuStreamSynchronize((CUstream)s) == CUDA_SUCCESS;
    }
}

static int to_host(worker *w, void *dst, uintptr_t src, size_t n, cudaStream_t s) {
    switch (next(&w->rng) % 4) {
    case 0: return cudaMemcpy(dst, (const void *)src, n, cudaMemcpyDeviceToHost) == cudaSuccess;
    case 1:
        return cudaMemcpyAsync(dst, (const void *)src, n, cudaMemcpyDeviceToHost, s) == cudaSuccess &&
               cudaStreamSynchronize(s) == cudaSuccess;
    case 2: return cuMemcpyDtoH(dst, (CUdeviceptr)src, n) == CUDA_SUCCESS;
    default:
        return cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, n, (CUstream)s) == CUDA_SUCCESS &&
               cuStreamSynchronize((CUstream)s) == CUDA_SUCCESS;
    }
}

static void write_block(worker *w, const block *b) {
    cudaStream_t s = b->stream;
    if (b->fill) {
        unsigned char v = fill_byte(b->tag);
        int ok;
        switch (next(&w->rng) % 4) {
        case 0: ok = cudaMemset((void *)b->p, v, b->size) == cudaSuccess; break;
        case 1:
            ok = cudaMemsetAsync((void *)b->p, v, b->size, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess;
            break;
        case 2: ok = cuMemsetD8((CUdeviceptr)b->p, v, b->size) == CUDA_SUCCESS; break;
        default: /* 32-bit words where the size allows */
            ok = b->size % 4 == 0 ? cuMemsetD32((CUdeviceptr)b->p, v * 0x01010101u, b->size / 4) == CUDA_SUCCESS
                                  : cuMemsetD8Async((CUdeviceptr)b->p, v, b->size, (CUstream)s) == CUDA_SUCCESS &&
                                        cuStreamSynchronize((CUstream)s) == CUDA_SUCCESS;
        }
        CHECK(ok, "memset of %zu bytes at %#lx", b->size, (unsigned long)b->p);
        return;
    }
    for (size_t off = 0; off < b->size; off += CHUNK) {
        size_t n = b->size - off < CHUNK ? b->size - off : CHUNK;
        pattern(b->tag, off, w->host, n);
        if (!to_device(w, b->p + off, w->host, n, s)) {
            FAIL("copy of %zu bytes to %#lx (%s block of %zu)", n, (unsigned long)(b->p + off), api_name[b->api],
                 b->size);
            return;
        }
    }
}

static void verify_block(worker *w, const block *b) {
    for (size_t off = 0; off < b->size; off += CHUNK) {
        size_t n = b->size - off < CHUNK ? b->size - off : CHUNK;
        if (!to_host(w, w->host, b->p + off, n, b->stream)) {
            FAIL("copy of %zu bytes from %#lx", n, (unsigned long)(b->p + off));
            return;
        }
        if (b->fill) memset(w->want, fill_byte(b->tag), n);
        else pattern(b->tag, off, w->want, n);
        if (memcmp(w->host, w->want, n) != 0) {
            size_t i = 0;
            while (w->host[i] == w->want[i]) i++;
            FAIL("thread %d: %s block [%#lx, +%zu) changed at offset %zu: %#x, wrote %#x", w->id, api_name[b->api],
                 (unsigned long)b->p, b->size, off + i, w->host[i], w->want[i]);
            return;
        }
        w->checked_bytes += (long)n;
    }
}

/* 1 B .. max, log-uniform: as many blocks under 1 KiB as between 1 and 64 MiB
 * per decade, the way real programs mix scalars, activations and weights. */
static size_t max_size = 64 * MIB;
static size_t pick_size(worker *w) {
    size_t s = (size_t)exp(uniform(&w->rng) * log((double)max_size + 1));
    return s < 1 ? 1 : s > max_size ? max_size : s;
}

static int is_oom(enum api a, int rc) {
    return a == RT_SYNC || a == RT_ASYNC ? rc == cudaErrorMemoryAllocation : rc == CUDA_ERROR_OUT_OF_MEMORY;
}

static void free_block(worker *w, int i) {
    block b = w->live[i];
    verify_block(w, &b);
    spans_remove(b.p);
    w->live[i] = w->live[--w->n_live];
    int rc;
    const char *how;
    /* any free fits any allocation of the device: pointers are unified */
    switch (next(&w->rng) % 4) {
    case 0: rc = cudaFree((void *)b.p), how = "cudaFree"; break;
    case 1: rc = cuMemFree((CUdeviceptr)b.p), how = "cuMemFree"; break;
    case 2: /* in the order of the block's stream, or of another of ours */
        rc = cudaFreeAsync((void *)b.p, b.api == RT_ASYNC || b.api == DRV_ASYNC ? b.stream : pick_stream(w));
        how = "cudaFreeAsync";
        break;
    default:
        rc = cuMemFreeAsync((CUdeviceptr)b.p, (CUstream)(b.api == RT_ASYNC || b.api == DRV_ASYNC ? b.stream
                                                                                                  : pick_stream(w)));
        how = "cuMemFreeAsync";
    }
    CHECK(rc == 0, "%s of a live %s block [%#lx, +%zu): %d", how, api_name[b.api], (unsigned long)b.p, b.size, rc);
    w->frees++;
}

static void alloc_block(worker *w) {
    block b = {.size = pick_size(w), .tag = next(&w->rng), .api = (enum api)(next(&w->rng) % N_API)};
    b.fill = next(&w->rng) % 3 == 0;
    b.stream = pick_stream(w);
    void *p = NULL;
    CUdeviceptr dp = 0;
    int rc;
    switch (b.api) {
    case RT_SYNC: rc = cudaMalloc(&p, b.size); break;
    case RT_ASYNC: rc = cudaMallocAsync(&p, b.size, b.stream); break;
    case DRV_SYNC: rc = cuMemAlloc(&dp, b.size), p = (void *)dp; break;
    default: rc = cuMemAllocAsync(&dp, b.size, (CUstream)b.stream), p = (void *)dp; break;
    }
    if (rc != 0) {
        if (!is_oom(b.api, rc)) {
            FAIL("%s(%zu): %d, not out of memory", api_name[b.api], b.size, rc);
        } else {
            if (b.api == RT_SYNC || b.api == RT_ASYNC) w->ooms_rt++;
            else w->ooms_drv++;
            if (w->n_live) free_block(w, (int)(next(&w->rng) % (uint64_t)w->n_live)); /* make room, go on */
        }
        return;
    }
    CHECK(p != NULL, "%s(%zu) gave NULL", api_name[b.api], b.size);
    b.p = (uintptr_t)p;
    spans_add(b.p, b.size, w->id);
    /* what NCCL or UCX would ask, from anywhere inside it, while other
     * threads allocate and free around it (issue 31) */
    CUdeviceptr base = 0;
    size_t got = 0, off = (size_t)(next(&w->rng) % b.size);
    rc = cuMemGetAddressRange(&base, &got, (CUdeviceptr)b.p + off);
    CHECK(rc == CUDA_SUCCESS && base == b.p && got == b.size, "%s block [%#lx, +%zu), asked at +%zu: %d, %#lx + %zu",
          api_name[b.api], (unsigned long)b.p, b.size, off, rc, (unsigned long)base, got);
    write_block(w, &b);
    w->live[w->n_live++] = b;
    w->allocs++;
    w->by_api[b.api]++;
}

static void create_stream(worker *w, int i) {
    int rc = i % 4 == 0   ? cudaStreamCreate(&w->streams[i])
             : i % 4 == 1 ? cudaStreamCreateWithFlags(&w->streams[i], cudaStreamNonBlocking)
             : i % 4 == 2 ? cuStreamCreate((CUstream *)&w->streams[i], CU_STREAM_DEFAULT)
                          : cuStreamCreate((CUstream *)&w->streams[i], CU_STREAM_NON_BLOCKING);
    CHECK(rc == 0, "stream %d: %d", i, rc);
}

/* Streams come and go: one is destroyed with its blocks still live (they
 * are freed later, in the new stream's order or plainly) and a new one
 * takes its place. */
static void replace_stream(worker *w) {
    int i = (int)(next(&w->rng) % (uint64_t)w->n_streams);
    cudaStream_t old = w->streams[i];
    CHECK(cudaStreamDestroy(old) == cudaSuccess, "stream %d destroy", i);
    create_stream(w, i);
    for (int k = 0; k < w->n_live; k++)
        if (w->live[k].stream == old) w->live[k].stream = w->streams[i];
    w->streams_replaced++;
}

/* Threads come and go: a helper allocates on its per-thread stream for the
 * worker (which waits), writes, and exits; its blocks stay in the worker's
 * live set, to be freed in another stream's order or plainly. */
static void *helper(void *arg) {
    worker *w = arg;
    CHECK(cudaFree(NULL) == cudaSuccess, "helper start");
    w->in_helper = 1;
    for (int k = 0; k < 4 && w->n_live < w->max_live; k++) alloc_block(w);
    if (w->n_live && next(&w->rng) % 2) free_block(w, w->n_live - 1);
    w->in_helper = 0;
    return NULL;
}

static void *mix_thread(void *arg) {
    worker *w = arg;
    /* cudart's lazy start on this thread, so the driver calls find a context */
    CHECK(cudaFree(NULL) == cudaSuccess, "cudaFree(NULL)");
    for (int i = 0; i < w->n_streams; i++) create_stream(w, i);
    while (now() < w->until) {
        for (int k = 0; k < 16; k++, w->ops++) {
            if (w->n_live < w->max_live && (w->n_live == 0 || next(&w->rng) % 100 < 55)) alloc_block(w);
            else free_block(w, (int)(next(&w->rng) % (uint64_t)w->n_live));
        }
        if (w->ops % 32 == 0) replace_stream(w);
        if (w->ops % 64 == 0) {
            pthread_t th;
            CHECK(pthread_create(&th, NULL, helper, w) == 0, "helper thread");
            pthread_join(th, NULL);
            w->helpers++;
        }
    }
    while (w->n_live) free_block(w, w->n_live - 1);
    for (int i = 0; i < w->n_streams; i++)
        CHECK(cudaStreamDestroy(w->streams[i]) == cudaSuccess, "stream %d destroy", i);
    return NULL;
}

static int mix(int threads, int streams, double seconds, int max_live) {
    worker *w = calloc((size_t)threads, sizeof *w);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    if (!w || !th) abort();
    double t0 = now();
    for (int i = 0; i < threads; i++) {
        w[i] = (worker){.id = i, .rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1) ^ (uint64_t)getpid(),
                        .n_streams = streams, .max_live = max_live, .until = t0 + seconds};
        w[i].host = malloc(CHUNK);
        w[i].want = malloc(CHUNK);
        w[i].live = calloc((size_t)max_live, sizeof *w[i].live);
        if (!w[i].host || !w[i].want || !w[i].live) abort();
        CHECK(pthread_create(&th[i], NULL, mix_thread, &w[i]) == 0, "thread %d", i);
    }
    worker sum = {0};
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        sum.ops += w[i].ops, sum.allocs += w[i].allocs, sum.frees += w[i].frees;
        sum.ooms_rt += w[i].ooms_rt, sum.ooms_drv += w[i].ooms_drv, sum.checked_bytes += w[i].checked_bytes;
        sum.streams_replaced += w[i].streams_replaced, sum.helpers += w[i].helpers;
        for (int a = 0; a < N_API; a++) sum.by_api[a] += w[i].by_api[a];
        free(w[i].host), free(w[i].want), free(w[i].live);
    }
    double secs = now() - t0;
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceSynchronize");

    /* No lost byte: nothing allocated is left, and with the cache emptied the
     * allocator holds nothing and neither does the device. */
    cudalloc_stats s = stats();
    long long lost = (long long)s.allocated_bytes;
    CHECK(s.allocation == 0 && s.allocated_bytes == 0 && s.active_bytes == 0 && s.requested_bytes == 0,
          "after every free: %lld allocations, %lld allocated, %lld active, %lld requested", (long long)s.allocation,
          (long long)s.allocated_bytes, (long long)s.active_bytes, (long long)s.requested_bytes);
    CHECK(s.num_ooms == sum.ooms_rt + sum.ooms_drv, "the allocator counted %lld OOMs, the program saw %ld",
          (long long)s.num_ooms, sum.ooms_rt + sum.ooms_drv);
    CHECK(n_spans == 0, "%zu blocks still in the live set", n_spans);
    CHECK(CUDALLOC_CALL(cudalloc_empty_cache) == 0, "cudalloc_empty_cache");
    s = stats();
    /* (expandable segments keep their virtual ranges: only reserved bytes count) */
    CHECK(s.reserved_bytes == 0, "after empty_cache: %lld bytes reserved", (long long)s.reserved_bytes);
    if (sim_counters) {
        simgpu_counters_t c;
        sim_counters(&c);
        CHECK(c.bytes_in_use == 0, "the simulated device still has %llu bytes in use",
              (unsigned long long)c.bytes_in_use);
        lost += (long long)c.bytes_in_use;
    }
    printf("stress mix: %ld operations (%ld allocations: %ld cudaMalloc, %ld cudaMallocAsync, %ld cuMemAlloc, "
           "%ld cuMemAllocAsync; %ld frees) by %d threads x %d streams in %.1f s (%.0f ops/s); %ld streams replaced "
           "with blocks live, %ld helper threads came and went; %ld OOMs survived (%ld runtime, %ld driver); %.1f GiB "
           "of patterns verified; %ld overlaps; %lld bytes lost; %ld failures\n",
           sum.ops, sum.allocs, sum.by_api[RT_SYNC], sum.by_api[RT_ASYNC], sum.by_api[DRV_SYNC], sum.by_api[DRV_ASYNC],
           sum.frees, threads, streams, secs, (double)sum.ops / secs, sum.streams_replaced, sum.helpers,
           sum.ooms_rt + sum.ooms_drv, sum.ooms_rt, sum.ooms_drv, (double)sum.checked_bytes / (1 << 30),
           (long)overlaps, lost, (long)failures);
    CHECK(sum.allocs > 0 && sum.frees == sum.allocs, "%ld allocations, %ld frees", sum.allocs, sum.frees);
    free(w), free(th);
    return failures ? 1 : 0;
}

/* ---- bad frees ---- */

static void fill_and_check(void *p, size_t n, unsigned char v, const char *what) {
    unsigned char *h = malloc(n);
    CHECK(cudaMemset(p, v, n) == cudaSuccess, "%s: memset", what);
    CHECK(cudaMemcpy(h, p, n, cudaMemcpyDeviceToHost) == cudaSuccess, "%s: copy back", what);
    size_t i = 0;
    while (i < n && h[i] == v) i++;
    CHECK(i == n, "%s: byte %zu is %#x, not %#x", what, i, i < n ? h[i] : 0, v);
    free(h);
}

static int check_intact(void *p, size_t n, unsigned char v) {
    unsigned char *h = malloc(n);
    int ok = cudaMemcpy(h, p, n, cudaMemcpyDeviceToHost) == cudaSuccess;
    for (size_t i = 0; ok && i < n; i++) ok = h[i] == v;
    free(h);
    return ok;
}

/* Device memory the driver mapped for us through its VMM calls: a real device
 * address that cudalloc never handed out. */
static CUdeviceptr driver_mapping(size_t *size, CUmemGenericAllocationHandle *h) {
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    size_t g = 0;
    CUdeviceptr va = 0;
    CHECK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && g, "granule");
    CHECK(cuMemAddressReserve(&va, g, 0, 0, 0) == CUDA_SUCCESS, "reserve");
    CHECK(cuMemCreate(h, g, &prop, 0) == CUDA_SUCCESS, "create");
    CHECK(cuMemMap(va, g, 0, *h, 0) == CUDA_SUCCESS, "map");
    CUmemAccessDesc access = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK(cuMemSetAccess(va, g, &access, 1) == CUDA_SUCCESS, "access");
    *size = g;
    return va;
}

static int bad_frees(void) {
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s) == cudaSuccess, "stream");
    void *keep, *p;
    CUdeviceptr d;
    /* a bystander: every bad free below must leave it alone */
    CHECK(cudaMalloc(&keep, 3 * MIB) == cudaSuccess, "bystander");
    fill_and_check(keep, 3 * MIB, 0x3c, "bystander");

    /* double frees, each family */
    CHECK(cudaMalloc(&p, MIB) == cudaSuccess && cudaFree(p) == cudaSuccess, "cudaMalloc/cudaFree");
    CHECK(cudaFree(p) == cudaErrorInvalidValue, "cudaFree twice");
    CHECK(cuMemAlloc(&d, MIB) == CUDA_SUCCESS && cuMemFree(d) == CUDA_SUCCESS, "cuMemAlloc/cuMemFree");
    CHECK(cuMemFree(d) == CUDA_ERROR_INVALID_VALUE, "cuMemFree twice");
    CHECK(cudaMallocAsync(&p, MIB, s) == cudaSuccess && cudaFreeAsync(p, s) == cudaSuccess, "async pair");
    CHECK(cudaFreeAsync(p, s) == cudaErrorInvalidValue, "cudaFreeAsync twice");
    CHECK(cuMemAllocAsync(&d, 100, (CUstream)s) == CUDA_SUCCESS && cuMemFreeAsync(d, (CUstream)s) == CUDA_SUCCESS,
          "driver async pair");
    CHECK(cuMemFreeAsync(d, (CUstream)s) == CUDA_ERROR_INVALID_VALUE, "cuMemFreeAsync twice");

    /* interior pointers: refused, the block stays live and whole */
    CHECK(cudaMalloc(&p, MIB) == cudaSuccess, "interior target");
    fill_and_check(p, MIB, 0xa5, "interior target");
    CHECK(cudaFree((char *)p + 512) == cudaErrorInvalidValue, "cudaFree inside a block");
    CHECK(cudaFree((char *)p + 1) == cudaErrorInvalidValue, "cudaFree at +1");
    CHECK(cuMemFree((CUdeviceptr)p + MIB - 1) == CUDA_ERROR_INVALID_VALUE, "cuMemFree at the last byte");
    CHECK(cudaFreeAsync((char *)p + 4096, s) == cudaErrorInvalidValue, "cudaFreeAsync inside a block");
    CHECK(stats().allocation == 2 && check_intact(p, MIB, 0xa5), "the block is still live and intact");
    CHECK(cudaFree(p) == cudaSuccess, "and frees normally");

    /* foreign pointers: host memory, and device memory cudalloc did not give */
    char on_stack[64];
    void *heap = malloc(4096);
    CHECK(cudaFree(heap) == cudaErrorInvalidValue, "cudaFree(malloc'd)");
    CHECK(cudaFree(on_stack) == cudaErrorInvalidValue, "cudaFree(stack)");
    CHECK(cuMemFree((CUdeviceptr)heap) == CUDA_ERROR_INVALID_VALUE, "cuMemFree(malloc'd)");
    CHECK(cudaFreeAsync(heap, s) == cudaErrorInvalidValue, "cudaFreeAsync(malloc'd)");
    free(heap);
    size_t gsize = 0;
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = driver_mapping(&gsize, &h);
    CHECK(cudaFree((void *)va) == cudaErrorInvalidValue, "cudaFree(driver VMM mapping)");
    CHECK(cuMemFree(va) == CUDA_ERROR_INVALID_VALUE, "cuMemFree(driver VMM mapping)");
    CHECK(cuMemsetD8(va, 7, gsize) == CUDA_SUCCESS, "the mapping is still usable");
    CHECK(cuMemUnmap(va, gsize) == CUDA_SUCCESS && cuMemRelease(h) == CUDA_SUCCESS &&
              cuMemAddressFree(va, gsize) == CUDA_SUCCESS,
          "the driver takes it back");
    void *pinned;
    CHECK(cudaMallocHost(&pinned, 4096) == cudaSuccess, "pinned");
    CHECK(cudaFree(pinned) == cudaErrorInvalidValue && cudaFreeHost(pinned) == cudaSuccess, "pinned host memory");

    CHECK(check_intact(keep, 3 * MIB, 0x3c), "the bystander survived every bad free");
    CHECK(stats().allocation == 1, "only the bystander is live: %lld", (long long)stats().allocation);

    /* cudaDeviceReset frees every allocation: a free afterwards is of memory
     * that no longer exists, as CUDA says, and the program goes on. */
    CUdeviceptr dd;
    CHECK(cudaMallocAsync(&p, 2 * MIB, s) == cudaSuccess && cuMemAlloc(&dd, 5000) == CUDA_SUCCESS, "before reset");
    CHECK(cudaDeviceReset() == cudaSuccess, "cudaDeviceReset");
    cudalloc_stats st = stats();
    CHECK(st.allocation == 0 && st.allocated_bytes == 0, "reset freed everything: %lld live",
          (long long)st.allocation);
    CHECK(cudaFree(keep) == cudaErrorInvalidValue, "cudaFree after reset");
    CHECK(cudaFree(p) == cudaErrorInvalidValue, "cudaFree of an async block after reset");
    CHECK(cuMemFree(dd) == CUDA_ERROR_INVALID_VALUE, "cuMemFree after reset");
    CHECK(cudaMalloc(&p, 3 * MIB) == cudaSuccess, "allocating after reset");
    fill_and_check(p, 3 * MIB, 0x77, "after reset");
    CHECK(stats().allocation == 1, "one live");
    /* the driver's reset of the primary context too */
    CUdevice dev;
    CHECK(cuCtxGetDevice(&dev) == CUDA_SUCCESS && cuDevicePrimaryCtxReset(dev) == CUDA_SUCCESS,
          "cuDevicePrimaryCtxReset");
    CHECK(stats().allocation == 0, "the driver's reset freed it");
    CHECK(cuMemFree((CUdeviceptr)p) == CUDA_ERROR_INVALID_VALUE, "cuMemFree after the driver's reset");
    CHECK(cudaFree(NULL) == cudaSuccess && cudaMalloc(&p, MIB) == cudaSuccess, "allocating again");
    fill_and_check(p, MIB, 0x11, "after the driver's reset");
    CHECK(cudaFree(p) == cudaSuccess, "free");
    CHECK(stats().allocation == 0 && stats().allocated_bytes == 0, "nothing left");
    printf("stress bad-frees: %s (double, interior, host, stack, pinned, driver-mapped, after cudaDeviceReset, "
           "after cuDevicePrimaryCtxReset)\n",
           failures ? "FAILED" : "every bad free refused with CUDA's error code; the program went on");
    return failures ? 1 : 0;
}

/* ---- fork while other threads allocate ---- */

static _Atomic int forking_done;

static void *churn(void *arg) {
    uint64_t rng = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
    cudaFree(NULL);
    void *live[8] = {0};
    long n = 0;
    while (!forking_done) {
        int i = (int)(next(&rng) % 8);
        if (live[i]) {
            CHECK(cudaFree(live[i]) == cudaSuccess, "churn free");
            live[i] = NULL;
        } else {
            cudaError_t e = cudaMalloc(&live[i], 1 + next(&rng) % (4 * MIB));
            CHECK(e == cudaSuccess || e == cudaErrorMemoryAllocation, "churn alloc: %d", (int)e);
            if (e != cudaSuccess) live[i] = NULL;
        }
        n++;
    }
    for (int i = 0; i < 8; i++)
        if (live[i]) cudaFree(live[i]);
    return (void *)n;
}

/* In the child: a fresh allocator; allocate, use, free, exit. */
static int child_work(void) {
    cudalloc_stats s;
    if (CUDALLOC_CALL(cudalloc_get_stats, 0, &s) == 0) return 10; /* inherited the parent's allocator */
    void *p[4];
    for (int i = 0; i < 4; i++) {
        if (cudaMalloc(&p[i], (size_t)(i + 1) * 300000) != cudaSuccess) return 11;
        if (cudaMemset(p[i], 0x40 + i, (size_t)(i + 1) * 300000) != cudaSuccess) return 12;
    }
    for (int i = 0; i < 4; i++) {
        if (!check_intact(p[i], (size_t)(i + 1) * 300000, (unsigned char)(0x40 + i))) return 13;
        if (cudaFree(p[i]) != cudaSuccess) return 14;
    }
    if (CUDALLOC_CALL(cudalloc_get_stats, 0, &s) != 0 || s.allocation != 0 || s.allocated_bytes != 0) return 15;
    return 0;
}

static int forks(int threads, int n_forks) {
    pthread_t th[64];
    if (threads > 64) threads = 64;
    cudaFree(NULL);
    for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, churn, (void *)(uintptr_t)(i + 1));
    int hung = 0, bad = 0;
    double t0 = now(), slowest = 0;
    for (int k = 0; k < n_forks; k++) {
        usleep(2000 + (unsigned)(k % 7) * 1000); /* land at different points of the others' work */
        double f0 = now();
        pid_t pid = fork();
        if (pid == 0) {
            alarm(30); /* a hung child dies; the parent reports it */
            exit(child_work());
        }
        CHECK(pid > 0, "fork: %s", strerror(errno));
        int status = 0;
        pid_t r;
        while ((r = waitpid(pid, &status, WNOHANG)) == 0 && now() - f0 < 20) usleep(1000);
        if (r == 0) {
            hung++;
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            FAIL("child %d hung (deadlock after fork?)", k);
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            bad++;
            FAIL("child %d: %s %d", k, WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        }
        if (now() - f0 > slowest) slowest = now() - f0;
    }
    forking_done = 1;
    long ops = 0;
    for (int i = 0; i < threads; i++) {
        void *n;
        pthread_join(th[i], &n);
        ops += (long)n;
    }
    cudalloc_stats s = stats();
    CHECK(s.allocation == 0 && s.allocated_bytes == 0, "parent: %lld still live", (long long)s.allocation);
    printf("stress fork: %d forks while %d threads allocated (%ld operations) in %.1f s; %d hung, %d failed; "
           "slowest child %.0f ms\n",
           n_forks, threads, ops, now() - t0, hung, bad, slowest * 1e3);
    return failures ? 1 : 0;
}

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s mix [-t THREADS] [-s STREAMS] [-d SECONDS] [-l LIVE_PER_THREAD] [-m MAX_SIZE_MIB]\n"
            "       %s bad-frees\n"
            "       %s fork [-t THREADS] [-n FORKS]\n",
            argv0, argv0, argv0);
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 2) usage(argv[0]);
    const char *mode = argv[1];
    int threads = 16, streams = 4, live = 6, n_forks = 20;
    double seconds = 3;
    int opt;
    optind = 2;
    while ((opt = getopt(argc, argv, "t:s:d:l:m:n:")) != -1) {
        switch (opt) {
        case 't': threads = atoi(optarg); break;
        case 's': streams = atoi(optarg); break;
        case 'd': seconds = atof(optarg); break;
        case 'l': live = atoi(optarg); break;
        case 'm': max_size = (size_t)atol(optarg) * MIB; break;
        case 'n': n_forks = atoi(optarg); break;
        default: usage(argv[0]);
        }
    }
    if (threads < 1 || streams < 1 || streams > 8 || live < 1 || !max_size || seconds <= 0) usage(argv[0]);
    void *driver = dlopen("libcuda.so.1", RTLD_NOW);
    sim_counters = driver ? (int (*)(simgpu_counters_t *))dlsym(driver, "simgpu_counters") : NULL;
    if (!strcmp(mode, "mix")) return mix(threads, streams, seconds, live);
    if (!strcmp(mode, "bad-frees")) return bad_frees();
    if (!strcmp(mode, "fork")) return forks(threads > 8 ? 8 : threads, n_forks);
    usage(argv[0]);
}
