/* A CUDA program using the runtime API (shared libcudart), run under the
 * preload by tests/preload/run.sh. Each mode checks results, not only codes. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/cudalloc.h"
#include "simgpu/simgpu.h"
#include "tests/preload/check.h"

#define MIB ((size_t)1 << 20)

static cudalloc_stats stats(void) {
    cudalloc_stats s;
    memset(&s, 0, sizeof s);
    CHECK(CUDALLOC_CALL(cudalloc_get_stats, 0, &s) == 0, "cudalloc_get_stats: is the preload loaded?");
    return s;
}

/* The simulated device's counters; on a real GPU there are none (NULL). */
static int (*sim_counters)(simgpu_counters_t *);

static simgpu_counters_t sim(void) {
    simgpu_counters_t c;
    memset(&c, 0, sizeof c);
    if (sim_counters) sim_counters(&c);
    return c;
}

static int basic(void) {
    void *p = NULL;
    CHECK(cudaMalloc(&p, 3 * MIB + 5) == cudaSuccess && p, "cudaMalloc");
    cudalloc_stats s = stats();
    CHECK(s.allocation == 1 && s.requested_bytes == (int64_t)(3 * MIB + 5), "allocation %lld requested %lld",
          (long long)s.allocation, (long long)s.requested_bytes);
    /* the memory is usable: fill on the device, read back */
    CHECK(cudaMemset(p, 0x5a, 3 * MIB + 5) == cudaSuccess, "cudaMemset");
    unsigned char host[64];
    CHECK(cudaMemcpy(host, (char *)p + 3 * MIB + 5 - 64, 64, cudaMemcpyDeviceToHost) == cudaSuccess, "cudaMemcpy");
    CHECK(host[0] == 0x5a && host[63] == 0x5a, "contents %x %x", host[0], host[63]);
    /* never accounted twice: cudart's own driver calls would show in the sim */
    simgpu_counters_t c = sim();
    if (sim_counters)
        CHECK(c.mem_alloc == 0 && c.mem_create >= 2, "sim saw cuMemAlloc %llu cuMemCreate %llu",
              (unsigned long long)c.mem_alloc, (unsigned long long)c.mem_create);
    CHECK(cudaFree(p) == cudaSuccess, "cudaFree");
    CHECK(stats().allocation == 0, "freed");
    /* double free: an error code and a warning, the program goes on */
    CHECK(cudaFree(p) == cudaErrorInvalidValue, "double free");
    CHECK(cudaFree(NULL) == cudaSuccess, "cudaFree(NULL)");
    /* a pointer we did not allocate goes to the real cudaFree, which answers
     * (here: pinned host memory is not device memory) */
    void *pinned = NULL;
    CHECK(cudaMallocHost(&pinned, 4096) == cudaSuccess, "cudaMallocHost");
    CHECK(cudaFree(pinned) == cudaErrorInvalidValue, "passed through: %d", (int)cudaGetLastError());
    CHECK(cudaFreeHost(pinned) == cudaSuccess && stats().allocation == 0, "untouched by cudalloc");
    void *z = (void *)1;
    CHECK(cudaMalloc(&z, 0) == cudaSuccess && z == NULL, "zero bytes");
    CHECK(cudaMalloc(NULL, 16) == cudaErrorInvalidValue, "NULL devPtr");
    /* reuse: the cached block comes back without new device memory */
    int64_t device_allocs = stats().num_device_alloc;
    CHECK(cudaMalloc(&p, 3 * MIB) == cudaSuccess && stats().num_device_alloc == device_allocs, "cached reuse");
    cudaFree(p);
    printf("basic: simulated device checks %s\n", sim_counters ? "on" : "off (real driver)");
    CHECK_DONE("basic");
}

static int meminfo(void) {
    size_t f0, t0, f1, t1, f2, t2;
    CHECK(cudaMemGetInfo(&f0, &t0) == cudaSuccess, "cudaMemGetInfo");
    void *p;
    CHECK(cudaMalloc(&p, 1 * MIB) == cudaSuccess, "cudaMalloc");
    CHECK(cudaMemGetInfo(&f1, &t1) == cudaSuccess, "cudaMemGetInfo");
    /* 2 MiB granule mapped, 1 MiB of it cached: free drops by what is used */
    CHECK(t1 == t0 && f0 - f1 == 1 * MIB, "free %zu -> %zu", f0, f1);
    cudaFree(p);
    CHECK(cudaMemGetInfo(&f2, &t2) == cudaSuccess && f2 == f0, "cache counts as free: %zu vs %zu", f2, f0);
    CHECK(cudaMemGetInfo(NULL, NULL) == cudaSuccess, "NULL arguments");
    CHECK(cudaMemGetInfo(&f2, NULL) == cudaSuccess && f2 == f0, "NULL total");
    CHECK_DONE("meminfo");
}

/* Run with a small simulated device (CUDALLOC_SIM_MEMORY=64MiB). */
static int oom(void) {
    void *p[64];
    int n = 0;
    cudaError_t e = cudaSuccess;
    while (n < 64 && (e = cudaMalloc(&p[n], 8 * MIB)) == cudaSuccess) n++;
    CHECK(e == cudaErrorMemoryAllocation, "the error code: %d", (int)e);
    CHECK(n >= 6 && n <= 8, "%d blocks of 8 MiB in 64 MiB", n);
    CHECK(stats().num_ooms == 1, "num_ooms");
    CHECK(cudaFree(p[0]) == cudaSuccess, "free one");
    CHECK(cudaMalloc(&p[0], 8 * MIB) == cudaSuccess, "and the program goes on");
    for (int i = 0; i < n; i++) cudaFree(p[i]);
    CHECK_DONE("oom");
}

struct worker {
    cudaStream_t stream;
    int id, errors;
};

static void *work(void *arg) {
    struct worker *w = arg;
    unsigned seed = (unsigned)w->id * 7919u;
    void *live[16] = {0};
    unsigned char tag[16];
    for (int op = 0; op < 3000; op++) {
        int i = (int)((seed = seed * 1103515245u + 12345u) >> 16) % 16;
        if (live[i]) {
            unsigned char b = 0;
            if (cudaMemcpy(&b, live[i], 1, cudaMemcpyDeviceToHost) != cudaSuccess || b != tag[i]) w->errors++;
            if (cudaFreeAsync(live[i], w->stream) != cudaSuccess) w->errors++;
            live[i] = NULL;
        } else {
            size_t size = 512 + (seed % (2 * MIB));
            if (cudaMallocAsync(&live[i], size, w->stream) != cudaSuccess) {
                w->errors++;
                continue;
            }
            tag[i] = (unsigned char)(seed >> 8);
            cudaMemsetAsync(live[i], tag[i], size, w->stream);
            cudaStreamSynchronize(w->stream);
        }
    }
    for (int i = 0; i < 16; i++)
        if (live[i]) cudaFreeAsync(live[i], w->stream);
    return NULL;
}

static int threads(void) {
    enum { T = 4 };
    pthread_t th[T];
    struct worker w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (struct worker){NULL, i + 1, 0};
        CHECK(cudaStreamCreate(&w[i].stream) == cudaSuccess, "stream");
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].errors == 0, "thread %d: %d errors", i, w[i].errors);
    }
    cudalloc_stats s = stats();
    CHECK(s.allocation == 0 && s.allocated_bytes == 0, "all freed: %lld", (long long)s.allocation);
    CHECK_DONE("threads");
}

/* Run with CUDALLOC_SIM_LATE_EVENTS set: events complete late. */
static int late_events(void) {
    if (!sim_counters) {
        printf("late-events: skipped (needs the simulated device)\n");
        return 0;
    }
    cudaStream_t a, b;
    cudaStreamCreate(&a);
    cudaStreamCreate(&b);
    void *p, *q;
    /* more than a stream shares (allocator/share.c): a's own pool */
    CHECK(cudaMallocAsync(&p, 4 * MIB, a) == cudaSuccess, "alloc on a");
    CHECK(cudaFreeAsync(p, b) == cudaSuccess, "free in b's order");
    void *waited = NULL;
    int (*last_wait)(void *, void **) =
        (int (*)(void *, void **))dlsym(dlopen("libcuda.so.1", RTLD_NOW), "simgpu_stream_last_wait");
    CHECK(last_wait && last_wait(a, &waited) == 0 && waited, "stream a waits on an event recorded in b");
    CHECK(cudaMallocAsync(&q, 4 * MIB, a) == cudaSuccess && q == p, "reused at once on a, after the wait");
    cudaFreeAsync(q, a);
    /* a plain cudaFree is fenced by the next allocation: with no non-blocking
     * stream, by one event on the legacy stream, which orders every later use
     * of the block after the work before it; the block is reused at once,
     * late events or not */
    uint64_t records = sim().event_records;
    CHECK(cudaMalloc(&p, MIB) == cudaSuccess && cudaFree(p) == cudaSuccess, "malloc/free");
    CHECK(sim().event_records == records, "the free records nothing itself");
    CHECK(cudaMalloc(&q, MIB) == cudaSuccess && q == p, "reused at once");
    CHECK(sim().event_records == records + 1, "one legacy-stream event for the fence");
    cudaFree(q);
    CHECK_DONE("late-events");
}

static int forked(void) {
    void *p;
    CHECK(cudaMalloc(&p, MIB) == cudaSuccess, "parent alloc");
    pid_t pid = fork();
    if (pid == 0) {
        /* the child starts with no allocator and no parent blocks: a free of
         * the parent's block is not cudalloc's (its fast path tries the
         * thread's last device: not the parent's, whose locks another thread
         * may have held at the fork) */
        cudalloc_stats s;
        int theirs = cudaFree(p) != cudaSuccess;
        int none = CUDALLOC_CALL(cudalloc_get_stats, 0, &s) != 0;
        void *c = NULL;
        cudaError_t e = cudaMalloc(&c, MIB);
        /* real CUDA cannot be used in a child forked after initialization: an
         * error code is the right answer there, a crash is not */
        int ok = sim_counters ? e == cudaSuccess && c && CUDALLOC_CALL(cudalloc_get_stats, 0, &s) == 0 &&
                                    s.allocation == 1
                              : 1;
        _exit(none && ok ? (theirs ? 0 : 4) : 3);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    CHECK(stats().allocation == 1 && cudaFree(p) == cudaSuccess, "parent unchanged");
    CHECK_DONE("fork");
}

/* Memory past cudalloc (GPU only): a pool of the program's own, used directly.
 * The exit summary should show it, seen through CUPTI. */
static int external(void) {
    if (sim_counters) {
        printf("external: skipped (needs a GPU and CUPTI)\n");
        return 0;
    }
    void *ours, *theirs = NULL;
    CHECK(cudaMalloc(&ours, MIB) == cudaSuccess, "cudaMalloc");
    /* looked up, not linked: the simulated cudart has no memory pools */
    cudaError_t (*pool_create)(cudaMemPool_t *, const struct cudaMemPoolProps *) =
        (cudaError_t(*)(cudaMemPool_t *, const struct cudaMemPoolProps *))dlsym(RTLD_DEFAULT, "cudaMemPoolCreate");
    cudaError_t (*from_pool)(void **, size_t, cudaMemPool_t, cudaStream_t) =
        (cudaError_t(*)(void **, size_t, cudaMemPool_t, cudaStream_t))dlsym(RTLD_DEFAULT, "cudaMallocFromPoolAsync");
    CHECK(pool_create && from_pool, "the pool API");
    if (!pool_create || !from_pool) CHECK_DONE("external");
    cudaMemPool_t pool;
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaStream_t s;
    cudaStreamCreate(&s);
    CHECK(pool_create(&pool, &props) == cudaSuccess, "pool");
    CHECK(from_pool(&theirs, 64 * MIB, pool, s) == cudaSuccess, "from pool");
    cudaStreamSynchronize(s);
    CHECK(stats().allocation == 1, "the pool's allocation is not ours");
    CHECK_DONE("external"); /* theirs stays allocated: the summary at exit shows it */
}

/* Reports on demand: SIGUSR1 (written by the preload's own thread, not in the
 * handler) and cudalloc_report(). Run with CUDALLOC_REPORT set. */
static int reports(void) {
    const char *prefix = getenv("CUDALLOC_REPORT");
    CHECK(prefix != NULL, "CUDALLOC_REPORT");
    if (!prefix) CHECK_DONE("reports");
    char txt[4096];
    snprintf(txt, sizeof txt, "%s.txt", prefix);
    void *p;
    CHECK(cudaMalloc(&p, MIB) == cudaSuccess, "cudaMalloc");
    raise(SIGUSR1);
    int waited = 0;
    while (access(txt, F_OK) != 0 && waited++ < 3000) usleep(10000); /* up to 30 s on a loaded machine */
    CHECK(access(txt, F_OK) == 0, "SIGUSR1 wrote %s", txt);
    unlink(txt);
    CHECK(CUDALLOC_CALL(cudalloc_report) == 0 && access(txt, F_OK) == 0, "cudalloc_report() wrote it again");
    cudaFree(p);
    CHECK_DONE("reports");
}

/* SIGUSR1 before the first allocation (issue 20): the program lives on, and
 * the report asked for is written once there is a device to report. */
static int signal_first(void) {
    const char *prefix = getenv("CUDALLOC_REPORT");
    CHECK(prefix != NULL, "CUDALLOC_REPORT");
    if (!prefix) CHECK_DONE("signal-first");
    char txt[4096];
    snprintf(txt, sizeof txt, "%s.txt", prefix);
    raise(SIGUSR1);
    void *p;
    CHECK(cudaMalloc(&p, MIB) == cudaSuccess, "cudaMalloc after SIGUSR1");
    int waited = 0;
    while (access(txt, F_OK) != 0 && waited++ < 3000) usleep(10000); /* up to 30 s on a loaded machine */
    CHECK(access(txt, F_OK) == 0, "the early SIGUSR1 wrote %s", txt);
    cudaFree(p);
    CHECK_DONE("signal-first");
}

/* Every allocation fails (larger than the device): the exit summary still says so. */
static int all_fail(void) {
    void *p;
    for (int i = 0; i < 3; i++) CHECK(cudaMalloc(&p, (size_t)1 << 40) == cudaErrorMemoryAllocation, "1 TiB fails");
    CHECK_DONE("all-fail");
}

/* ---- sizes at their edges, through every entry point ---- */

static struct cudaExtent extent3(size_t w, size_t h, size_t d) { return (struct cudaExtent){w, h, d}; }

enum { VIA_MALLOC, VIA_ASYNC, VIA_PITCH_WIDTH, VIA_PITCH_ROWS, VIA_3D, VIA_TORCH, VIAS };
static const char *const via_name[VIAS] = {"cudaMalloc", "cudaMallocAsync", "cudaMallocPitch(size, 1)",
                                           "cudaMallocPitch(1, size)", "cudaMalloc3D(1, size, 1)",
                                           "cudalloc_torch_malloc"};
static cudaStream_t size_stream;

/* Bytes the request takes on the device: rows of 512 for the pitched ones;
 * 0 when that does not fit in 64 bits. */
static size_t bytes_of(int via, size_t size) {
    size_t pitch = 512, bytes;
    if (via == VIA_PITCH_WIDTH) return size > SIZE_MAX - 511 ? 0 : (size + 511) / 512 * 512;
    if (via == VIA_PITCH_ROWS || via == VIA_3D) return __builtin_mul_overflow(pitch, size, &bytes) ? 0 : bytes;
    return size;
}

/* Allocates `size` through `via`; *n: the bytes it says it gave (pitch x rows). */
static cudaError_t alloc_via(int via, size_t size, void **p, size_t *n) {
    size_t pitch = 0;
    cudaError_t e;
    struct cudaPitchedPtr pp = {0};
    *n = 0;
    switch (via) {
    case VIA_MALLOC: *n = size; return cudaMalloc(p, size);
    case VIA_ASYNC: *n = size; return cudaMallocAsync(p, size, size_stream);
    case VIA_PITCH_WIDTH:
        e = cudaMallocPitch(p, &pitch, size, 1);
        if (e == cudaSuccess) CHECK(pitch >= size && pitch % 512 == 0, "pitch %zu for width %zu", pitch, size);
        *n = pitch;
        return e;
    case VIA_PITCH_ROWS:
        e = cudaMallocPitch(p, &pitch, 1, size);
        if (e == cudaSuccess) CHECK(pitch >= 1 && !__builtin_mul_overflow(pitch, size, n), "pitch %zu", pitch);
        return e;
    case VIA_3D:
        e = cudaMalloc3D(&pp, extent3(1, size, 1));
        if (e == cudaSuccess) {
            CHECK(pp.pitch >= 1 && pp.xsize == 1 && pp.ysize == size && !__builtin_mul_overflow(pp.pitch, size, n),
                  "pitched pointer %zu %zu %zu", pp.pitch, pp.xsize, pp.ysize);
            *p = pp.ptr;
        }
        return e;
    default:
        *n = size;
        *p = cudalloc_torch_malloc(size, 0, size_stream);
        return *p ? cudaSuccess : cudaErrorMemoryAllocation;
    }
}

static void free_via(int via, void *p) {
    if (via == VIA_ASYNC) CHECK(cudaFreeAsync(p, size_stream) == cudaSuccess, "cudaFreeAsync");
    else if (via == VIA_TORCH) cudalloc_torch_free(p, 0, 0, size_stream);
    else CHECK(cudaFree(p) == cudaSuccess, "cudaFree");
}

/* Both ends of [p, p + n) are device memory that keeps what it is given. */
static int usable(void *p, size_t n, unsigned char v) {
    unsigned char a = ~v, b = ~v;
    return cudaMemset(p, v, 1) == cudaSuccess && cudaMemset((char *)p + n - 1, v, 1) == cudaSuccess &&
           cudaMemcpy(&a, p, 1, cudaMemcpyDeviceToHost) == cudaSuccess &&
           cudaMemcpy(&b, (char *)p + n - 1, 1, cudaMemcpyDeviceToHost) == cudaSuccess && a == v && b == v;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) {
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1Dull;
}

/* Run on a simulated device of 64 MiB (CUDALLOC_SIM_MEMORY=64MiB), with the
 * preload and without it (the baseline: what CUDA answers): what fits the
 * device succeeds and is whole, anything larger, to 2^64 - 1 and past it in
 * a pitch, fails with cudaErrorMemoryAllocation, and the program goes on. */
static int sizes(void) {
    size_t free0 = 0, cap = 0;
    CHECK(cudaMemGetInfo(&free0, &cap) == cudaSuccess, "cudaMemGetInfo");
    CHECK(cudaStreamCreate(&size_stream) == cudaSuccess, "stream");
    int preload = cudalloc_torch_malloc != NULL, vias = preload ? VIAS : VIA_TORCH;
    const size_t fits[] = {1, 511, 512, 513, 2 * MIB - 1, 2 * MIB, 2 * MIB + 1, cap - 1, cap};
    enum { PAST = 4 + 4097 };
    static size_t past[PAST];
    size_t n_past = 0;
    past[n_past++] = cap + 1;
    past[n_past++] = cap + 2 * MIB;
    past[n_past++] = (size_t)1 << 63;
    past[n_past++] = ((size_t)1 << 63) + 1;
    for (size_t k = 0; k <= 4096; k++) past[n_past++] = SIZE_MAX - k;
    long failures = 0, asked = 0;
    for (int via = 0; via < vias; via++) {
        for (size_t i = 0; i < sizeof fits / sizeof fits[0] + n_past; i++) {
            size_t size = i < sizeof fits / sizeof fits[0] ? fits[i] : past[i - sizeof fits / sizeof fits[0]];
            size_t want = bytes_of(via, size), n;
            void *p = NULL;
            cudaError_t e = alloc_via(via, size, &p, &n);
            if (want && want <= cap) {
                CHECK(e == cudaSuccess && p, "%s of %zu bytes: %d", via_name[via], size, (int)e);
                if (e != cudaSuccess) continue;
                CHECK(n >= size && usable(p, n, (unsigned char)(i + 1)), "%s of %zu: %zu usable bytes", via_name[via],
                      size, n);
                if (preload) /* answered by cudalloc, not passed through */
                    CHECK(stats().allocation == 1 && stats().requested_bytes == (int64_t)n, "%s of %zu: not cudalloc's",
                          via_name[via], size);
                free_via(via, p);
            } else {
                CHECK(e == cudaErrorMemoryAllocation, "%s of %zu bytes: %d, not cudaErrorMemoryAllocation",
                      via_name[via], size, (int)e);
                if (e == cudaSuccess) free_via(via, p);
                failures++;
                if (want) asked++; /* a size the allocator saw (a pitch past 2^64 it never does) */
            }
        }
    }
    /* rows that fit, products that do not */
    void *p;
    size_t pitch;
    struct cudaPitchedPtr pp;
    CHECK(cudaMallocPitch(&p, &pitch, 4096, SIZE_MAX / 1024) == cudaErrorMemoryAllocation, "pitch x rows overflow");
    CHECK(cudaMalloc3D(&pp, extent3(1, SIZE_MAX / 2, 3)) == cudaErrorMemoryAllocation, "height x depth overflow");
    CHECK(cudaMalloc3D(&pp, extent3(SIZE_MAX - 10, 1, 1)) == cudaErrorMemoryAllocation, "pitch overflow");

    /* The property: random sizes up to 2^64 through random entry points, up
     * to 12 live at once; each success is whole and overlaps no other (each
     * keeps its own tag at both ends until it is freed). */
    struct { void *p; size_t n; int via; unsigned char tag; } live[12];
    int n_live = 0, ok = 0;
    for (int op = 0; op < 3000; op++) {
        if (n_live && (n_live == 12 || next_random() % 3 == 0)) {
            int k = (int)(next_random() % (uint64_t)n_live);
            unsigned char a = 0, b = 0;
            cudaMemcpy(&a, live[k].p, 1, cudaMemcpyDeviceToHost);
            cudaMemcpy(&b, (char *)live[k].p + live[k].n - 1, 1, cudaMemcpyDeviceToHost);
            CHECK(a == live[k].tag && b == live[k].tag, "allocation %d overwritten: %x %x, tag %x", k, a, b,
                  live[k].tag);
            free_via(live[k].via, live[k].p);
            live[k] = live[--n_live];
            continue;
        }
        uint64_t r = next_random();
        unsigned bits = 1 + (unsigned)(r % 64);
        size_t size = bits == 64 ? (size_t)next_random() : (size_t)(next_random() & ((UINT64_C(1) << bits) - 1));
        if (r % 7 == 0) size = past[(r >> 8) % n_past];
        if (!size) size = 1;
        int via = (int)((r >> 16) % (uint64_t)vias);
        size_t n;
        void *q = NULL;
        cudaError_t e = alloc_via(via, size, &q, &n);
        if (e != cudaSuccess) {
            CHECK(e == cudaErrorMemoryAllocation, "%s of %zu: %d", via_name[via], size, (int)e);
            continue;
        }
        ok++;
        CHECK(bytes_of(via, size) && bytes_of(via, size) <= cap && n >= size, "%s of %zu succeeded (%zu bytes)",
              via_name[via], size, n);
        for (int k = 0; k < n_live; k++)
            CHECK((char *)q + n <= (char *)live[k].p || (char *)live[k].p + live[k].n <= (char *)q,
                  "%p+%zu overlaps %p+%zu", q, n, live[k].p, live[k].n);
        unsigned char tag = (unsigned char)(op % 250 + 1);
        CHECK(usable(q, n, tag), "%s of %zu: not usable", via_name[via], size);
        live[n_live++] = (typeof(live[0])){q, n, via, tag};
    }
    while (n_live) {
        n_live--;
        free_via(live[n_live].via, live[n_live].p);
    }
    CHECK(ok > 100, "%d successes", ok);
    cudaStreamSynchronize(size_stream);
    if (preload) {
        cudalloc_stats s = stats();
        CHECK(s.allocation == 0 && s.allocated_bytes == 0 && s.requested_bytes == 0, "all freed: %lld",
              (long long)s.allocation);
        CHECK(s.num_ooms >= asked, "num_ooms %lld, failed requests it saw %ld", (long long)s.num_ooms, asked);
        CHECK(s.reserved_bytes_peak <= (int64_t)cap, "peak reserved %lld", (long long)s.reserved_bytes_peak);
    }
    printf("sizes: %ld failures as CUDA's, %s\n", failures, preload ? "under cudalloc" : "without cudalloc");
    CHECK_DONE("sizes");
}

/* One request past the device with the OOM message on: run.sh reads it. */
static int oom_huge(void) {
    void *p = (void *)0x1;
    size_t pitch;
    CHECK(cudaMalloc(&p, SIZE_MAX - 1000) == cudaErrorMemoryAllocation, "cudaMalloc(SIZE_MAX - 1000)");
    CHECK(cudaMallocPitch(&p, &pitch, 4096, SIZE_MAX / 1024) == cudaErrorMemoryAllocation, "pitch x rows overflow");
    CHECK(cudaMalloc(&p, MIB) == cudaSuccess && cudaFree(p) == cudaSuccess, "and the program goes on");
    CHECK_DONE("oom-huge");
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    void *driver = dlopen("libcuda.so.1", RTLD_NOW); /* the simulated one, or a real one */
    sim_counters = driver ? (int (*)(simgpu_counters_t *))dlsym(driver, "simgpu_counters") : NULL;
    if (!strcmp(mode, "basic")) return basic();
    if (!strcmp(mode, "meminfo")) return meminfo();
    if (!strcmp(mode, "oom")) return oom();
    if (!strcmp(mode, "threads")) return threads();
    if (!strcmp(mode, "late-events")) return late_events();
    if (!strcmp(mode, "fork")) return forked();
    if (!strcmp(mode, "external")) return external();
    if (!strcmp(mode, "reports")) return reports();
    if (!strcmp(mode, "signal-first")) return signal_first();
    if (!strcmp(mode, "all-fail")) return all_fail();
    if (!strcmp(mode, "sizes")) return sizes();
    if (!strcmp(mode, "oom-huge")) return oom_huge();
    fprintf(stderr, "usage: %s basic|meminfo|oom|threads|late-events|fork|external|reports|signal-first|all-fail|sizes|oom-huge\n",
            argv[0]);
    return 2;
}
