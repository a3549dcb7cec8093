/* Reserved memory that follows need, under the preload on the simulated
 * device: free granules are moved (cuMemUnmap + cuMemMap, no cuMemCreate)
 * where a request needs them, never while work queued on a stream may still
 * touch them, and granules not needed go back to the device after
 * release_after allocations. Run by tests/preload/run.sh; the simulated
 * device's counters say which driver calls were made, its held streams stand
 * for a stream with work still queued. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "tests/preload/simhooks.h"

#define MIB ((size_t)1 << 20)

static unsigned char host[16 * MIB];

static void fill(void *p, size_t n, int byte, const char *what) {
    CHECK(cudaMemset(p, byte, n) == cudaSuccess, "memset %s", what);
}

/* Every byte of p's n is `byte`. */
static void expect_bytes(const void *p, size_t n, int byte, const char *what) {
    CHECK(n <= sizeof host && cudaMemcpy(host, p, n, cudaMemcpyDeviceToHost) == cudaSuccess, "copy %s", what);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += host[i] != (unsigned char)byte;
    CHECK(bad == 0, "%s: %zu of %zu bytes are not 0x%02x", what, bad, n, byte);
}

/* The driver calls between two counter readings. */
typedef struct { int64_t create, release, map, unmap; } calls;
static calls since(simgpu_counters_t a) {
    simgpu_counters_t b = sim();
    return (calls){(int64_t)(b.mem_create - a.mem_create), (int64_t)(b.mem_release - a.mem_release),
                   (int64_t)(b.mem_map - a.mem_map), (int64_t)(b.mem_unmap - a.mem_unmap)};
}

/* A hole of four idle granules (A, freed in front of a live B) and a request
 * that needs four more than the free tail has: the hole's granules move to
 * the end, none is created. Granules freed with cudaFree become idle once a
 * fence recorded after the free has passed (the free itself only ordered
 * later work after the queued work): the first request that finds them asks
 * for that fence and creates, the next one moves. Data stays put. */
static int moves(void) {
    void *a, *b, *c1, *c2;
    CHECK(cudaMalloc(&a, 8 * MIB) == cudaSuccess && cudaMalloc(&b, 2 * MIB) == cudaSuccess, "A and B");
    fill(b, 2 * MIB, 0x5b, "B");
    CHECK(cudaFree(a) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess, "free A, device done");
    simgpu_counters_t t0 = sim();
    CHECK(cudaMalloc(&c1, 10 * MIB) == cudaSuccess, "C1: 10 MiB, more than A's hole");
    calls d = since(t0);
    CHECK(d.create == 5 && d.unmap == 0, "C1 creates its five granules (A's wait for a fence): %lld created, "
          "%lld unmapped", (long long)d.create, (long long)d.unmap);
    CHECK(cudaFree(c1) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess, "free C1, device done");
    t0 = sim();
    CHECK(cudaMalloc(&c2, 18 * MIB) == cudaSuccess, "C2: 18 MiB, C1's free tail and four granules more");
    d = since(t0);
    CHECK(d.create == 0 && d.release == 0 && d.unmap == 4 && d.map == 4,
          "A's four granules moved: %lld created, %lld released, %lld unmapped, %lld mapped", (long long)d.create,
          (long long)d.release, (long long)d.unmap, (long long)d.map);
    CHECK(c2 == (char *)c1, "C2 starts where C1 did: %p %p", c2, c1);
    cudalloc_stats s = stats(0);
    CHECK(s.reserved_bytes == (int64_t)(20 * MIB), "reserved %lld for 20 MiB allocated", (long long)s.reserved_bytes);
    fill(c2, 16 * MIB, 0xc3, "C2");
    expect_bytes(c2, 16 * MIB, 0xc3, "C2 after the moves");
    expect_bytes(b, 2 * MIB, 0x5b, "B, whose neighbours moved");
    cudaFree(b);
    cudaFree(c2);
    all_back(0, "moves");
    CHECK_DONE("moves");
}

/* Work queued on a stream (held) before a free in stream order may still
 * write the block: its granules are not moved while the stream holds it.
 * Once the stream has run, they are. */
static int busy(void) {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "side stream");
    void *a, *b, *c;
    CHECK(cudaMalloc(&a, 8 * MIB) == cudaSuccess && cudaMalloc(&b, 2 * MIB) == cudaSuccess, "A and B");
    CHECK(hold(s, 1) == 0 && cudaMemsetAsync(a, 0x11, 8 * MIB, s) == cudaSuccess, "work on A queued, held");
    CHECK(cudaFreeAsync(a, s) == cudaSuccess, "cudaFreeAsync(A, s)");
    simgpu_counters_t t0 = sim();
    CHECK(cudaMalloc(&c, 10 * MIB) == cudaSuccess, "C: 10 MiB while A's work is queued");
    calls d = since(t0);
    CHECK(d.unmap == 0 && d.create == 5, "A's granules stay where the queued work writes: %lld unmapped, %lld created",
          (long long)d.unmap, (long long)d.create);
    fill(c, 10 * MIB, 0xc3, "C");
    CHECK(hold(s, 0) == 0 && cudaStreamSynchronize(s) == cudaSuccess, "the queued work runs");
    expect_bytes(c, 10 * MIB, 0xc3, "C after A's queued memset ran");
    /* now idle: a request that needs granules takes A's (after one mark) */
    CHECK(cudaFree(c) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess, "C freed");
    int64_t moved = 0;
    for (int i = 0; i < 3 && !moved; i++) {
        void *big;
        simgpu_counters_t t1 = sim();
        CHECK(cudaMalloc(&big, 24 * MIB) == cudaSuccess, "24 MiB");
        moved = since(t1).unmap;
        CHECK(cudaFree(big) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess, "freed");
    }
    CHECK(moved > 0, "idle granules were moved once the stream had run");
    cudaFree(b);
    all_back(0, "busy");
    cudaStreamDestroy(s);
    CHECK_DONE("busy");
}

/* release_after (CUDALLOC_CONF, run.sh sets 100): a 64 MiB peak, then small
 * work only: the granules go back to the device on their own, no
 * cudalloc_empty_cache. With release_after:0 they stay. */
static int give_back(int expect_back) {
    void *big;
    CHECK(cudaMalloc(&big, 64 * MIB) == cudaSuccess && cudaFree(big) == cudaSuccess, "a 64 MiB peak");
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "device done");
    simgpu_counters_t t0 = sim();
    for (int i = 0; i < 600; i++) {
        void *p;
        CHECK(cudaMalloc(&p, 64 * 1024) == cudaSuccess && cudaFree(p) == cudaSuccess, "small %d", i);
        if (i % 50 == 0) cudaDeviceSynchronize();
    }
    calls d = since(t0);
    cudalloc_stats s = stats(0);
    size_t free_bytes, total;
    CHECK(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess, "cudaMemGetInfo");
    simgpu_counters_t dev = sim();
    if (expect_back) {
        CHECK(s.reserved_bytes <= (int64_t)(4 * MIB), "reserved %lld after the peak's memory went unused",
              (long long)s.reserved_bytes);
        CHECK(d.release >= 30 && dev.device_bytes_in_use[0] <= 4 * MIB,
              "given back to the device: %lld released, %llu bytes in use", (long long)d.release,
              (unsigned long long)dev.device_bytes_in_use[0]);
    } else {
        CHECK(s.reserved_bytes == (int64_t)(64 * MIB) && d.release == 0, "kept: reserved %lld, %lld released",
              (long long)s.reserved_bytes, (long long)d.release);
    }
    all_back(0, "give-back");
    CHECK_DONE(expect_back ? "give-back" : "keep");
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!simhooks_init()) {
        printf("%s: skipped (needs the simulated device's counters and held streams)\n", mode);
        return 0;
    }
    if (!strcmp(mode, "moves")) return moves();
    if (!strcmp(mode, "busy")) return busy();
    if (!strcmp(mode, "give-back")) return give_back(1);
    if (!strcmp(mode, "keep")) return give_back(0);
    fprintf(stderr, "usage: %s moves|busy|give-back|keep\n", argv[0]);
    return 2;
}
