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
    CHECK(cudaMallocAsync(&p, MIB, a) == cudaSuccess, "alloc on a");
    CHECK(cudaFreeAsync(p, b) == cudaSuccess, "free in b's order");
    void *waited = NULL;
    int (*last_wait)(void *, void **) =
        (int (*)(void *, void **))dlsym(dlopen("libcuda.so.1", RTLD_NOW), "simgpu_stream_last_wait");
    CHECK(last_wait && last_wait(a, &waited) == 0 && waited, "stream a waits on an event recorded in b");
    CHECK(cudaMallocAsync(&q, MIB, a) == cudaSuccess && q == p, "reused at once on a, after the wait");
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
        /* the child starts with no allocator and no parent blocks */
        cudalloc_stats s;
        int none = CUDALLOC_CALL(cudalloc_get_stats, 0, &s) != 0;
        void *c = NULL;
        cudaError_t e = cudaMalloc(&c, MIB);
        /* real CUDA cannot be used in a child forked after initialization: an
         * error code is the right answer there, a crash is not */
        int ok = sim_counters ? e == cudaSuccess && c && CUDALLOC_CALL(cudalloc_get_stats, 0, &s) == 0 &&
                                    s.allocation == 1
                              : 1;
        _exit(none && ok ? 0 : 3);
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
    while (access(txt, F_OK) != 0 && waited++ < 500) usleep(10000);
    CHECK(access(txt, F_OK) == 0, "SIGUSR1 wrote %s", txt);
    unlink(txt);
    CHECK(CUDALLOC_CALL(cudalloc_report) == 0 && access(txt, F_OK) == 0, "cudalloc_report() wrote it again");
    cudaFree(p);
    CHECK_DONE("reports");
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
    fprintf(stderr, "usage: %s basic|meminfo|oom|threads|late-events|fork\n", argv[0]);
    return 2;
}
