/* CUDA programs that use the driver API: directly (linked with libcuda), and
 * the way a statically linked cudart or PyTorch reaches it: dlopen, dlsym of
 * cuGetProcAddress_v2, then every entry point through that. */
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>

#include "include/cudalloc.h"
#include "simgpu/simgpu.h"
#include "tests/preload/check.h"

#undef cuGetProcAddress
#define MIB ((size_t)1 << 20)

typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static int64_t live_allocations(void) {
    cudalloc_stats s;
    return CUDALLOC_CALL(cudalloc_get_stats, 0, &s) == 0 ? s.allocation : -1;
}

static int direct(void) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc(&p, MIB) == CUDA_ERROR_NOT_INITIALIZED, "before cuInit, as the driver says");
    CHECK(cuInit(0) == CUDA_SUCCESS, "cuInit");
    CHECK(cuMemAlloc(&p, MIB) == CUDA_ERROR_INVALID_CONTEXT, "no context yet");
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuDeviceGet(&dev, 0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS, "ctx");
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS, "set current");
    CHECK(cuMemAlloc(&p, MIB) == CUDA_SUCCESS && p, "cuMemAlloc");
    CHECK(live_allocations() == 1, "ours: %lld", (long long)live_allocations());
    CHECK(cuMemsetD8(p, 7, MIB) == CUDA_SUCCESS, "usable");
    CHECK(cuMemAlloc(&p, 0) == CUDA_ERROR_INVALID_VALUE, "zero bytes, as the driver says");
    CUstream s;
    cuStreamCreate(&s, 0);
    CUdeviceptr q = 0;
    CHECK(cuMemAllocAsync(&q, 5 * MIB, s) == CUDA_SUCCESS && live_allocations() == 2, "cuMemAllocAsync");
    CHECK(cuMemFreeAsync(q, s) == CUDA_SUCCESS && live_allocations() == 1, "cuMemFreeAsync");
    size_t f = 0, t = 0;
    CHECK(cuMemGetInfo(&f, &t) == CUDA_SUCCESS && f && t >= f, "cuMemGetInfo");
    CHECK(cuMemFree(p) == CUDA_SUCCESS && live_allocations() == 0, "cuMemFree");
    CHECK(cuMemFree(p) == CUDA_ERROR_INVALID_VALUE, "double free");
    CHECK_DONE("driver-direct");
}

static int static_route(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "dlopen libcuda.so.1: %s", dlerror());
    getproc_fn getproc = (getproc_fn)dlsym(h, "cuGetProcAddress_v2");
    CHECK(getproc != NULL, "cuGetProcAddress_v2");
    if (!getproc) CHECK_DONE("static-route");
    CUresult (*init)(unsigned) = NULL;
    CUresult (*devget)(CUdevice *, int) = NULL;
    CUresult (*retain)(CUcontext *, CUdevice) = NULL;
    CUresult (*setcur)(CUcontext) = NULL;
    CUresult (*alloc)(CUdeviceptr *, size_t) = NULL;
    CUresult (*mfree)(CUdeviceptr) = NULL;
    getproc_fn again = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CHECK(getproc("cuInit", (void **)&init, 12000, 0, &st) == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS,
          "cuInit");
    CHECK(getproc("cuDeviceGet", (void **)&devget, 12000, 0, NULL) == CUDA_SUCCESS, "NULL symbolStatus");
    getproc("cuDevicePrimaryCtxRetain", (void **)&retain, 12000, 0, NULL);
    getproc("cuCtxSetCurrent", (void **)&setcur, 12000, 0, NULL);
    CHECK(getproc("cuMemAlloc", (void **)&alloc, 12000, 0, NULL) == CUDA_SUCCESS && alloc, "cuMemAlloc");
    CHECK(getproc("cuMemFree", (void **)&mfree, 12000, 0, NULL) == CUDA_SUCCESS && mfree, "cuMemFree");
    CHECK(getproc("cuGetProcAddress", (void **)&again, 12000, 0, NULL) == CUDA_SUCCESS && again == getproc,
          "asking for cuGetProcAddress gives the same wrapper");
    CHECK(getproc("cuNoSuchThing", (void **)&again, 12000, 0, &st) != CUDA_SUCCESS &&
              st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
          "unknown symbol");
    if (!init || !devget || !retain || !setcur || !alloc || !mfree) CHECK_DONE("static-route");
    CUdevice dev;
    CUcontext ctx;
    init(0);
    devget(&dev, 0);
    retain(&ctx, dev);
    setcur(ctx);
    CUdeviceptr p = 0;
    CHECK(alloc(&p, 3 * MIB) == CUDA_SUCCESS && p, "allocate through the table");
    CHECK(live_allocations() == 1, "answered by cudalloc: %lld", (long long)live_allocations());
    int (*counters)(simgpu_counters_t *) = (int (*)(simgpu_counters_t *))dlsym(h, "simgpu_counters");
    if (counters) {
        simgpu_counters_t c;
        counters(&c);
        CHECK(c.mem_alloc == 0, "the driver's cuMemAlloc was not called: %llu", (unsigned long long)c.mem_alloc);
    }
    CHECK(mfree(p) == CUDA_SUCCESS && live_allocations() == 0, "free through the table");
    CHECK_DONE("static-route");
}

/* Run on a 64 MiB simulated device, with the preload and without: sizes at
 * their edges through cuMemAlloc, cuMemAllocAsync and cuMemAllocPitch, direct
 * and through cuGetProcAddress (the way a static cudart reaches them): what
 * fits succeeds and is whole, anything larger is CUDA_ERROR_OUT_OF_MEMORY. */
static int sizes(void) {
    CHECK(cuInit(0) == CUDA_SUCCESS, "cuInit");
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuDeviceGet(&dev, 0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS, "ctx");
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS, "set current");
    size_t free0 = 0, cap = 0;
    CHECK(cuMemGetInfo(&free0, &cap) == CUDA_SUCCESS, "cuMemGetInfo");
    CUresult (*pitch_fn)(CUdeviceptr *, size_t *, size_t, size_t, unsigned) = NULL;
    getproc_fn getproc = (getproc_fn)dlsym(dlopen("libcuda.so.1", RTLD_NOW), "cuGetProcAddress_v2");
    CHECK(getproc && getproc("cuMemAllocPitch", (void **)&pitch_fn, 12000, 0, NULL) == CUDA_SUCCESS && pitch_fn,
          "cuMemAllocPitch through cuGetProcAddress");
    if (!pitch_fn) CHECK_DONE("driver-sizes");
    int preload = cudalloc_get_stats != NULL;
    CUstream s;
    cuStreamCreate(&s, 0);
    const size_t sizes[] = {1, 511, 512, 513, 2 * MIB - 1, 2 * MIB, 2 * MIB + 1, cap - 1, cap, cap + 1, cap + 2 * MIB,
                            (size_t)1 << 63, ((size_t)1 << 63) + 1};
    size_t n = sizeof sizes / sizeof sizes[0];
    for (size_t i = 0; i < n + 4097; i++) {
        size_t size = i < n ? sizes[i] : SIZE_MAX - (i - n);
        int fits = size <= cap, pitch_fits = size <= SIZE_MAX - 511 && (size + 511) / 512 * 512 <= cap;
        CUdeviceptr p = 0;
        size_t pitch = 0;
        CUresult want = fits ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = cuMemAlloc(&p, size);
        CHECK(r == want, "cuMemAlloc(%zu): %d", size, (int)r);
        if (r == CUDA_SUCCESS) {
            CHECK(cuMemsetD8(p + size - 1, 1, 1) == CUDA_SUCCESS, "last byte of %zu", size);
            cuMemFree(p);
        }
        r = cuMemAllocAsync(&p, size, s);
        CHECK(r == want, "cuMemAllocAsync(%zu): %d", size, (int)r);
        if (r == CUDA_SUCCESS) cuMemFreeAsync(p, s);
        r = cuMemAllocPitch(&p, &pitch, size, 1, 4);
        CHECK(r == (pitch_fits ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY), "cuMemAllocPitch(%zu, 1): %d", size, (int)r);
        if (r == CUDA_SUCCESS) {
            CHECK(pitch >= size && pitch % 512 == 0, "pitch %zu for %zu", pitch, size);
            CHECK(cuMemsetD8(p + pitch - 1, 1, 1) == CUDA_SUCCESS, "last byte of pitch %zu", pitch);
            cuMemFree(p);
        }
        r = pitch_fn(&p, &pitch, 1, size, 16);
        CHECK(r == (size <= cap / 512 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY), "cuMemAllocPitch(1, %zu): %d", size,
              (int)r);
        if (r == CUDA_SUCCESS) {
            CHECK(cuMemsetD8(p + pitch * size - 1, 1, 1) == CUDA_SUCCESS, "last row of %zu", size);
            cuMemFree(p);
        }
    }
    CUdeviceptr p;
    size_t pitch;
    CHECK(cuMemAllocPitch(&p, &pitch, 4096, SIZE_MAX / 1024, 4) == CUDA_ERROR_OUT_OF_MEMORY, "pitch x rows overflow");
    CHECK(cuMemAllocPitch(&p, &pitch, 1, 1, 3) == CUDA_ERROR_INVALID_VALUE, "element size 3, as the driver says");
    CHECK(cuMemAllocPitch(&p, &pitch, 0, 1, 4) == CUDA_ERROR_INVALID_VALUE, "width 0, as the driver says");
    cuStreamSynchronize(s);
    if (preload) {
        cudalloc_stats st;
        /* cuMemAlloc and cuMemAllocAsync of SIZE_MAX - k reach the allocator;
         * a pitch or pitch x rows past 2^64 - 1 does not */
        CHECK(cudalloc_get_stats(0, &st) == 0 && st.allocation == 0 && st.num_ooms > 2 * 4097, "all freed, %lld OOMs",
              (long long)st.num_ooms);
        CHECK(st.reserved_bytes_peak <= (int64_t)cap, "peak reserved %lld", (long long)st.reserved_bytes_peak);
    }
    printf("driver-sizes: %s\n", preload ? "under cudalloc" : "without cudalloc");
    CHECK_DONE("driver-sizes");
}

/* dlsym(RTLD_NEXT, ...) passes through our dlsym: what it finds must be the
 * function, also for glibc's IFUNCs (memcmp, strlen), whose symbol is a
 * resolver. Sanitizer runtimes find every libc function they wrap this way. */
static int dlsym_next(void) {
    typedef int (*memcmp_fn)(const void *, const void *, size_t);
    typedef size_t (*strlen_fn)(const char *);
    memcmp_fn mc = (memcmp_fn)dlsym(RTLD_NEXT, "memcmp");
    strlen_fn sl = (strlen_fn)dlsym(RTLD_NEXT, "strlen");
    char a[] = "cudalloc", b[] = "cudalloc";
    CHECK(mc && mc(a, b, sizeof a) == 0 && mc(a, "cudallo!", 8) > 0, "memcmp through dlsym(RTLD_NEXT)");
    CHECK(sl && sl(a) == 8, "strlen through dlsym(RTLD_NEXT)");
    CHECK(dlsym(RTLD_NEXT, "getpid") == dlsym(RTLD_DEFAULT, "getpid"), "a plain function is itself");
    CHECK_DONE("dlsym-next");
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "direct")) return direct();
    if (!strcmp(mode, "static-route")) return static_route();
    if (!strcmp(mode, "sizes")) return sizes();
    if (!strcmp(mode, "dlsym-next")) return dlsym_next();
    fprintf(stderr, "usage: %s direct|static-route|sizes|dlsym-next\n", argv[0]);
    return 2;
}
