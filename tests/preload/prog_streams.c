/* Long-running programs under the preload (issue 19): streams and threads
 * that come and go, caps that hold, handles that are not streams. Run by
 * tests/preload/run.sh on the simulated device (its stream handles are never
 * handed out twice, its held streams stand for work still queued, its
 * counters show what reached the device); the churns, live-streams,
 * cap-threads and meminfo-cap also on a GPU (scripts/gpu-check.sh), without
 * the device's own figures. Each mode checks one thing:
 *
 *   stream-churn    1200 streams made, used and destroyed one after another
 *                   (some blocks outliving their stream): every allocation
 *                   succeeds, and their caches go back
 *   thread-churn    1100 threads (8 at a time, each on a stack of its own, so
 *                   each has a per-thread stream of its own) allocate on
 *                   cudaStreamPerThread and exit: the same
 *   live-streams    500 streams alive at once on a device as large as
 *                   CUDALLOC_SIM_MEMORY (run.sh: 141GiB) each allocate
 *   shared-small    4000 non-blocking streams that hold 4 KiB each share a
 *                   pool: they reserve what they hold in whole granules, not a
 *                   granule each; a block freed with its stream's work still
 *                   queued goes to no other stream, but to its own at once
 *                   (stream order); freed in another's order, to none
 *   queued-empty    a destroyed stream's freed block with work still queued
 *                   is not given back by cudalloc_empty_cache before a wait
 *   queued-oom      ... nor by an allocation short of memory (64 MiB device),
 *                   which waits and succeeds
 *   queued-sweep    ... nor by sweeps (release_after:50); once its work ran,
 *                   the cache goes back without empty_cache
 *   cap-threads     8 threads on streams of their own under max_reserved
 *                   (run.sh: 100MiB) never hold more, nor does the device
 *   meminfo-cap     cudaMemGetInfo under max_reserved:64MiB
 *   bad-stream      cudaMallocAsync/cudaFreeAsync (and the driver's) on
 *                   handles that are not live streams: what the driver
 *                   answers (run.sh runs it without the preload too) */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "tests/preload/simhooks.h"

#undef cuGetProcAddress
#define MIB ((size_t)1 << 20)

static int preloaded(void) { return CUDALLOC_CALL(cudalloc_empty_cache) == 0; }

static int64_t reserved(void) { return stats(0).reserved_bytes; }

/* The process's resident memory (host), in MiB: what a long run keeps. */
static double rss_mib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1) break;
    if (f) fclose(f);
    return (double)kib / 1024;
}
static int simulated; /* the simulated device's counters and held streams are there */

/* The calls that give memory back, and the waits, between two readings. */
typedef struct { int64_t unmap, release, mem_free, waits; } calls;
static calls since(simgpu_counters_t a) {
    simgpu_counters_t b = sim();
    return (calls){(int64_t)(b.mem_unmap - a.mem_unmap), (int64_t)(b.mem_release - a.mem_release),
                   (int64_t)(b.mem_free - a.mem_free),
                   (int64_t)(b.event_syncs + b.stream_syncs + b.ctx_syncs - a.event_syncs - a.stream_syncs -
                             a.ctx_syncs)};
}

/* ---- streams and threads that come and go ---- */

static int create_stream(cudaStream_t *s, int i) {
    switch (i % 3) {
    case 0: return cudaStreamCreate(s);
    case 1: return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
    default: return cuStreamCreate((CUstream *)s, CU_STREAM_DEFAULT);
    }
}

static int stream_churn(int n, long keep_mib) {
    cudaStream_t *seen = calloc((size_t)n, sizeof *seen);
    void *outliving[4] = {0};
    int distinct = 0, failed = 0;
    for (int i = 0; i < n && !failed; i++) {
        cudaStream_t s;
        void *p = NULL, *q = NULL;
        if (create_stream(&s, i) != 0) { CHECK(0, "stream %d", i); break; }
        int j = n <= 5000 ? 0 : distinct; /* (counted for small runs: quadratic) */
        while (j < distinct && seen[j] != s) j++;
        if (j == distinct) seen[distinct++] = s;
        failed = cudaMallocAsync(&p, MIB, s) != cudaSuccess || cudaMallocAsync(&q, 4096, s) != cudaSuccess ||
                 cudaMemsetAsync(p, 1, 4096, s) != cudaSuccess || cudaFreeAsync(q, s) != cudaSuccess;
        CHECK(!failed, "stream %d of %d: allocations on it", i, n);
        if (i % 3 == 0) { /* a block that outlives its stream, freed plainly a few streams later */
            cudaFree(outliving[i / 3 % 4]);
            outliving[i / 3 % 4] = p;
        } else if (!failed) {
            CHECK(cudaFreeAsync(p, s) == cudaSuccess, "free on stream %d", i);
        }
        CHECK(cudaStreamDestroy(s) == cudaSuccess, "destroy %d", i);
    }
    for (int k = 0; k < 4; k++) cudaFree(outliving[k]);
    if (simulated) /* a real driver may hand a destroyed stream's handle out again: also fine */
        CHECK(distinct == n, "the driver handed out %d distinct handles for %d streams: the test needs a new one each",
              distinct, n);
    void *p = NULL;
    CHECK(cudaMalloc(&p, MIB) == cudaSuccess, "cudaMalloc after %d streams", n);
    cudaFree(p);
    cudalloc_stats st = stats(0);
    CHECK(st.allocated_bytes == 0 && st.reserved_bytes <= keep_mib * (int64_t)MIB,
          "the destroyed streams' caches went back: %lld allocated, %lld reserved, at most %ld MiB kept",
          (long long)st.allocated_bytes, (long long)st.reserved_bytes, keep_mib);
    CHECK(st.num_ooms == 0, "no OOM: %lld", (long long)st.num_ooms);
    printf("stream-churn: %d streams, %d handles, peak reserved %lld, reserved after %lld, host memory %.1f MiB\n", n,
           distinct, (long long)st.reserved_bytes_peak, (long long)st.reserved_bytes, rss_mib());
    free(seen);
    all_back(0, "stream-churn");
    CHECK_DONE("stream-churn");
}

#define CHURN_STACK ((size_t)1 << 20) /* addresses only: what a sanitizer asks for too */
static __thread int tls_probe; /* its address tells the threads' TLS apart */

struct churn_arg {
    void *kept;  /* a block the thread leaves to main, or NULL */
    uintptr_t tls;
    int ok;
};

static void *churn_thread(void *arg) {
    struct churn_arg *a = arg;
    void *p = NULL, *q = NULL;
    a->tls = (uintptr_t)&tls_probe;
    a->ok = cudaMallocAsync(&p, 64 << 10, cudaStreamPerThread) == cudaSuccess &&
            cudaMallocAsync(&q, 2 * MIB, cudaStreamPerThread) == cudaSuccess &&
            cudaFreeAsync(p, cudaStreamPerThread) == cudaSuccess;
    if (a->tls % 5 == 0) a->kept = q; /* outlives the thread's stream */
    else a->ok = a->ok && cudaFreeAsync(q, cudaStreamPerThread) == cudaSuccess;
    return NULL;
}

static int thread_churn(int n, long keep_mib) {
    enum { AT_ONCE = 8 };
    /* Each thread on a stack of its own (never reused): its TLS, and with it
     * its per-thread stream's key, is new, as in a long run where exited
     * threads' stacks are not cached for the next ones. */
    char *stacks = mmap(NULL, (size_t)n * CHURN_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
    CHECK(stacks != MAP_FAILED, "stacks");
    uintptr_t *tls = calloc((size_t)n, sizeof *tls);
    int done = 0, ok = 0;
    while (done < n) {
        pthread_t th[AT_ONCE];
        struct churn_arg args[AT_ONCE];
        int k = 0;
        for (; k < AT_ONCE && done + k < n; k++) {
            pthread_attr_t attr;
            pthread_attr_init(&attr);
            pthread_attr_setstack(&attr, stacks + (size_t)(done + k) * CHURN_STACK, CHURN_STACK);
            args[k] = (struct churn_arg){0};
            int rc = pthread_create(&th[k], &attr, churn_thread, &args[k]);
            pthread_attr_destroy(&attr);
            CHECK(rc == 0, "thread %d: %s", done + k, strerror(rc));
            if (rc) return 1;
        }
        for (int i = 0; i < k; i++) {
            pthread_join(th[i], NULL);
            ok += args[i].ok;
            tls[done + i] = args[i].tls;
            if (args[i].kept) CHECK(cudaFree(args[i].kept) == cudaSuccess, "a block left by an exited thread");
        }
        done += k;
    }
    int distinct = 0;
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < i && tls[j] != tls[i]) j++;
        distinct += j == i;
    }
    CHECK(distinct == n, "%d distinct thread-local addresses for %d threads", distinct, n);
    CHECK(ok == n, "%d of %d threads allocated on their per-thread stream", ok, n);
    void *p = NULL;
    CHECK(cudaMalloc(&p, MIB) == cudaSuccess, "cudaMalloc after %d threads", n);
    cudaFree(p);
    cudalloc_stats st = stats(0);
    CHECK(st.allocated_bytes == 0 && st.reserved_bytes <= keep_mib * (int64_t)MIB,
          "the exited threads' caches went back: %lld allocated, %lld reserved, at most %ld MiB kept",
          (long long)st.allocated_bytes, (long long)st.reserved_bytes, keep_mib);
    printf("thread-churn: %d threads, peak reserved %lld, reserved after %lld, host memory %.1f MiB\n", n,
           (long long)st.reserved_bytes_peak, (long long)st.reserved_bytes, rss_mib());
    munmap(stacks, (size_t)n * CHURN_STACK);
    free(tls);
    all_back(0, "thread-churn");
    CHECK_DONE("thread-churn");
}

static int live_streams(int n) {
    cudaStream_t *s = calloc((size_t)n, sizeof *s);
    void **p = calloc((size_t)n, sizeof *p), **big = calloc((size_t)n, sizeof *big);
    int made = 0;
    for (; made < n; made++) {
        if (create_stream(&s[made], made) != 0) break;
        if (cudaMallocAsync(&p[made], 4096, s[made]) != cudaSuccess) {
            CHECK(0, "the first 4 KiB on live stream %d", made + 1);
            cudaStreamDestroy(s[made]);
            break;
        }
        if (made % 50 == 0 && made < 500) /* 10 GiB in all */
            CHECK(cudaMallocAsync(&big[made], (size_t)1 << 30, s[made]) == cudaSuccess, "1 GiB on %d", made);
    }
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    printf("live-streams: %d streams alive at once on a %.0f GiB device\n", made, (double)total / (1 << 30));
    CHECK(made == n, "%d of %d live streams allocated", made, n);
    for (int i = 0; i < made; i++) {
        cudaFreeAsync(p[i], s[i]);
        if (big[i]) cudaFreeAsync(big[i], s[i]);
        cudaStreamDestroy(s[i]);
    }
    free(s), free(p), free(big);
    all_back(0, "live-streams");
    CHECK_DONE("live-streams");
}

/* ---- streams that hold little share a pool (allocator/share.c) ---- */

static int shared_small(int n) {
    cudaStream_t *s = calloc((size_t)n, sizeof *s);
    void **p = calloc((size_t)n, sizeof *p);
    for (int i = 0; i < n; i++)
        CHECK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking) == cudaSuccess &&
                  cudaMallocAsync(&p[i], 4096, s[i]) == cudaSuccess,
              "stream %d and its 4 KiB", i);
    int64_t held = (int64_t)n * 4096, granules = (held + 2 * MIB - 1) / (2 * MIB);
    CHECK(reserved() <= granules * (int64_t)(2 * MIB), "%d streams of 4 KiB reserve %lld bytes, wanted %lld granules", n,
          (long long)reserved(), (long long)granules);
    printf("shared-small: %d streams hold %.2f MiB, reserve %.2f MiB\n", n, held / 1048576.0, reserved() / 1048576.0);
    if (simulated) { /* the block of a held stream, freed in its order */
        CHECK(hold(s[0], 1) == 0 && cudaMemsetAsync(p[0], 7, 4096, s[0]) == cudaSuccess, "work queued on stream 0");
        CHECK(cudaFreeAsync(p[0], s[0]) == cudaSuccess, "freed in its order");
        for (int k = 0; k < 300; k++) { /* four other streams, in their own orders */
            void *q = NULL;
            CHECK(cudaMallocAsync(&q, 4096, s[1 + k % 4]) == cudaSuccess && q != p[0],
                  "allocation %d took the block freed while its stream's work was queued", k);
            cudaFreeAsync(q, s[1 + k % 4]);
        }
        void *again = NULL; /* its own stream's next request is after that work: at once */
        CHECK(cudaMallocAsync(&again, 4096, s[0]) == cudaSuccess && again == p[0], "stream 0 takes its block back");
        /* freed in another stream's order: a fence (behind the held stream) first */
        CHECK(cudaFreeAsync(again, s[1]) == cudaSuccess, "freed in stream 1's order");
        for (int k = 0; k < 300; k++) {
            void *q = NULL;
            CHECK(cudaMallocAsync(&q, 4096, s[k % 5]) == cudaSuccess && q != p[0],
                  "allocation %d took the block freed in another stream's order while stream 0's work was queued", k);
            cudaFreeAsync(q, s[k % 5]);
        }
        CHECK(hold(s[0], 0) == 0, "the work runs");
    } else {
        cudaFreeAsync(p[0], s[0]);
    }
    for (int i = 1; i < n; i++) CHECK(cudaFreeAsync(p[i], s[i]) == cudaSuccess, "free %d", i);
    for (int i = 0; i < n; i++) cudaStreamDestroy(s[i]);
    free(s);
    free(p);
    all_back(0, "shared-small");
    CHECK_DONE("shared-small");
}

/* ---- a destroyed stream's queued work ---- */

/* size bytes allocated and written on a held stream, freed in its order, and
 * the stream destroyed while the work is still queued (CUDA returns at once;
 * the work runs later). Returns the stream's handle, still held. */
static cudaStream_t destroyed_with_work(size_t size) {
    cudaStream_t s;
    void *p = NULL;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    CHECK(cudaMallocAsync(&p, size, s) == cudaSuccess, "%zu bytes on it", size);
    CHECK(hold(s, 1) == 0 && cudaMemsetAsync(p, 7, size, s) == cudaSuccess, "work queued on it");
    CHECK(cudaFreeAsync(p, s) == cudaSuccess, "freed in its order");
    CHECK(cudaStreamDestroy(s) == cudaSuccess, "destroyed with the work queued");
    return s;
}

/* What gave memory back did so only after waiting for the device. */
static void only_after_a_wait(calls d, const char *what) {
    CHECK(d.unmap + d.mem_free == 0 || d.waits > 0,
          "%s gave memory with queued work back without waiting: %lld unmapped, %lld cuMemFree, %lld waits", what,
          (long long)d.unmap, (long long)d.mem_free, (long long)d.waits);
}

static int queued_empty(void) {
    cudaStream_t s = destroyed_with_work(8 * MIB);
    simgpu_counters_t t0 = sim();
    CHECK(CUDALLOC_CALL(cudalloc_empty_cache) == 0, "empty cache");
    calls d = since(t0);
    only_after_a_wait(d, "cudalloc_empty_cache");
    CHECK(reserved() == 0, "and it did give it back, having waited: %lld reserved", (long long)reserved());
    hold(s, 0);
    all_back(0, "queued-empty");
    CHECK_DONE("queued-empty");
}

static int queued_oom(void) {
    cudaStream_t s = destroyed_with_work(48 * MIB);
    simgpu_counters_t t0 = sim();
    void *q = NULL;
    CHECK(cudaMalloc(&q, 48 * MIB) == cudaSuccess, "48 MiB of 64 on the legacy stream: waits rather than fails");
    only_after_a_wait(since(t0), "an allocation short of memory");
    CHECK(stats(0).num_ooms == 0, "no OOM");
    hold(s, 0);
    cudaFree(q);
    all_back(0, "queued-oom");
    CHECK_DONE("queued-oom");
}

static int queued_sweep(void) {
    cudaStream_t s = destroyed_with_work(16 * MIB);
    simgpu_counters_t t0 = sim();
    for (int i = 0; i < 200; i++) { /* sweeps every 50 allocations */
        void *p;
        CHECK(cudaMalloc(&p, 64 << 10) == cudaSuccess && cudaFree(p) == cudaSuccess, "small %d", i);
    }
    calls d = since(t0);
    CHECK(d.unmap == 0, "sweeps unmapped %lld granules while the destroyed stream's work was queued", (long long)d.unmap);
    CHECK(reserved() >= (int64_t)(16 * MIB), "still held: %lld", (long long)reserved());
    CHECK(hold(s, 0) == 0, "the work runs (released with the old handle)");
    for (int i = 0; i < 200; i++) {
        void *p;
        CHECK(cudaMalloc(&p, 64 << 10) == cudaSuccess && cudaFree(p) == cudaSuccess, "small %d", i);
    }
    CHECK(reserved() <= (int64_t)(2 * MIB), "the destroyed stream's cache went back once its work ran: %lld reserved",
          (long long)reserved());
    all_back(0, "queued-sweep");
    CHECK_DONE("queued-sweep");
}

/* ---- the cap ---- */

struct cap_arg {
    uint64_t rng;
    long allocs, ooms;
    int ok;
};

static uint64_t next_rand(uint64_t *s) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *cap_thread(void *arg) {
    struct cap_arg *a = arg;
    cudaStream_t s;
    void *live[6] = {0};
    a->ok = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess;
    for (double end = now() + 0.5; a->ok && now() < end;) {
        int i = (int)(next_rand(&a->rng) % 6);
        if (live[i]) {
            a->ok = cudaFreeAsync(live[i], s) == cudaSuccess;
            live[i] = NULL;
            continue;
        }
        size_t size = (1 + next_rand(&a->rng) % 24) * MIB;
        cudaError_t e = cudaMallocAsync(&live[i], size, s);
        if (e == cudaErrorMemoryAllocation) a->ooms++, live[i] = NULL;
        else a->ok = e == cudaSuccess, a->allocs++;
    }
    for (int i = 0; i < 6; i++)
        if (live[i]) cudaFreeAsync(live[i], s);
    cudaStreamDestroy(s);
    return NULL;
}

static int cap_threads(size_t cap) {
    enum { THREADS = 8 };
    pthread_t th[THREADS];
    struct cap_arg a[THREADS];
    for (int i = 0; i < THREADS; i++) {
        a[i] = (struct cap_arg){.rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1)};
        pthread_create(&th[i], NULL, cap_thread, &a[i]);
    }
    long allocs = 0, ooms = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK(a[i].ok, "thread %d: a call failed other than out of memory", i);
        allocs += a[i].allocs, ooms += a[i].ooms;
    }
    cudalloc_stats st = stats(0);
    simgpu_counters_t c = {0};
    if (simulated) c = sim();
    printf("cap-threads: %d threads, %ld allocations, %ld OOMs; peak reserved %.1f MiB, device peak %.1f MiB, cap %.0f MiB\n",
           THREADS, allocs, ooms, (double)st.reserved_bytes_peak / MIB, (double)c.device_bytes_peak[0] / MIB,
           (double)cap / MIB);
    CHECK(st.reserved_bytes_peak <= (int64_t)cap, "peak reserved %lld over the cap %zu", (long long)st.reserved_bytes_peak,
          cap);
    CHECK(c.device_bytes_peak[0] <= cap, "the device held %llu, over the cap %zu", (unsigned long long)c.device_bytes_peak[0],
          cap);
    CHECK(ooms > 0, "the cap was reached (else this tests nothing)");
    all_back(0, "cap-threads");
    CHECK_DONE("cap-threads");
}

static int meminfo_cap(size_t cap) {
    size_t f = 0, t = 0;
    void *p = NULL, *q = NULL;
    CHECK(cudaMemGetInfo(&f, &t) == cudaSuccess && t == cap && f == cap, "under the cap: %zu free of %zu", f, t);
    CHECK(cudaMalloc(&p, 16 * MIB) == cudaSuccess, "16 MiB");
    CHECK(cudaMemGetInfo(&f, &t) == cudaSuccess && t == cap && f == cap - 16 * MIB, "%zu free of %zu", f, t);
    CHECK(cudaFree(p) == cudaSuccess && cudaMemGetInfo(&f, &t) == cudaSuccess && f == cap, "the cache is free: %zu", f);
    CHECK(cudaMalloc(&q, f) == cudaSuccess, "all that it said is free can be had");
    CHECK(cudaMemGetInfo(&f, &t) == cudaSuccess && f == 0, "then none: %zu", f);
    cudaFree(q);
    all_back(0, "meminfo-cap");
    CHECK_DONE("meminfo-cap");
}

/* ---- handles that are not streams ---- */

static int bad_stream(void) {
    void *p = NULL, *x = NULL;
    CUdeviceptr dp = 0;
    cudaStream_t never = (cudaStream_t)(uintptr_t)0x5a5a5000, s;
    CHECK(cudaMallocAsync(&p, 4096, never) == cudaErrorInvalidResourceHandle, "a handle that never was a stream");
    CHECK(cuMemAllocAsync(&dp, 4096, (CUstream)never) == CUDA_ERROR_INVALID_HANDLE, "the same through the driver");
    CHECK(cudaStreamCreate(&s) == cudaSuccess && cudaMallocAsync(&x, 4096, s) == cudaSuccess, "a stream, a block");
    CHECK(cudaStreamDestroy(s) == cudaSuccess, "destroyed");
    CHECK(cudaMallocAsync(&p, 4096, s) == cudaErrorInvalidResourceHandle, "allocation on the destroyed stream");
    CHECK(cuMemAllocAsync(&dp, 4096, (CUstream)s) == CUDA_ERROR_INVALID_HANDLE, "... through the driver");
    CHECK(cudaFreeAsync(x, s) == cudaErrorInvalidResourceHandle, "free in the destroyed stream's order");
    CHECK(cuMemFreeAsync((CUdeviceptr)x, (CUstream)s) == CUDA_ERROR_INVALID_HANDLE, "... through the driver");
    CHECK(cudaFreeAsync(x, never) == cudaErrorInvalidResourceHandle, "free in a non-stream's order");
    CHECK(cudaFree(x) == cudaSuccess, "the block was not freed by those: a plain free frees it");
    /* each bad handle is refused alone: none takes room that later streams need */
    int refused = 0;
    for (uintptr_t h = 0x70000000; h < 0x70000000 + 1100 * 0x1000; h += 0x1000)
        refused += cudaMallocAsync(&p, 4096, (cudaStream_t)h) == cudaErrorInvalidResourceHandle;
    CHECK(refused == 1100, "%d of 1100 bad handles refused", refused);
    CHECK(cudaStreamCreate(&s) == cudaSuccess && cudaMallocAsync(&x, 4096, s) == cudaSuccess &&
              cudaFreeAsync(x, s) == cudaSuccess && cudaStreamDestroy(s) == cudaSuccess,
          "a new stream after them allocates");
    if (preloaded()) all_back(0, "bad-stream");
    CHECK_DONE("bad-stream");
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    simulated = simhooks_init();
    if (!simulated && (!strncmp(mode, "queued-", 7) || !strcmp(mode, "bad-stream"))) {
        printf("%s: skipped (needs the simulated device's held streams and counters)\n", mode);
        return 0;
    }
    CHECK(cudaFree(NULL) == cudaSuccess, "cudart's start");
    if (!strcmp(mode, "bad-stream")) return bad_stream();
    if (!preloaded()) {
        printf("%s: needs the preload\n", mode);
        return 1;
    }
    long arg = argc > 2 ? strtol(argv[2], NULL, 0) : 0; /* a count, or the cap in MiB */
    size_t cap = arg > 0 ? (size_t)arg * MIB : 0;
    /* the MiB reserved after the churn may be: a pool's cache (the last
     * cudaMalloc's), or the shared pool's (allocator/share.c) */
    long keep_mib = argc > 3 ? strtol(argv[3], NULL, 0) : 2;
    if (!strcmp(mode, "stream-churn")) return stream_churn(arg > 0 ? (int)arg : 1200, keep_mib);
    if (!strcmp(mode, "thread-churn")) return thread_churn(arg > 0 ? (int)arg : 1100, keep_mib);
    if (!strcmp(mode, "live-streams")) return live_streams(arg > 0 ? (int)arg : 500);
    if (!strcmp(mode, "shared-small")) return shared_small(arg > 0 ? (int)arg : 4000);
    if (!strcmp(mode, "queued-empty")) return queued_empty();
    if (!strcmp(mode, "queued-oom")) return queued_oom();
    if (!strcmp(mode, "queued-sweep")) return queued_sweep();
    if (!strcmp(mode, "cap-threads") && cap) return cap_threads(cap);
    if (!strcmp(mode, "meminfo-cap") && cap) return meminfo_cap(cap);
    fprintf(stderr, "usage: %s stream-churn|thread-churn [COUNT [MIB kept]], live-streams|shared-small [COUNT], queued-empty|queued-oom|queued-sweep|"
                    "bad-stream, or cap-threads|meminfo-cap MIB (the max_reserved in force)\n", argv[0]);
    return 2;
}
