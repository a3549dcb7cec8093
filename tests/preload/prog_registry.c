/* A client that asks about its buffers as NCCL and UCX do before they
 * register them (for RDMA, IPC, NVLink): which allocation holds this pointer
 * and how big it is, is it still the buffer it was, does it have a cuMem
 * handle, can it go to another process (legacy IPC) or to a NIC (dma-buf).
 * Every answer must be what cudaMalloc memory gets from CUDA: run under the
 * preload and on the device alone, the same checks pass.
 *   prog_registry queries     range, attributes (one and batch), routes
 *   prog_registry async       cudaMallocAsync memory answers as pool memory
 *   prog_registry reuse       a registration cache misses after free + realloc
 *   prog_registry export      NCCL's and UCX's export: retain handle, IPC, dma-buf
 *   prog_registry vmm         (no preload) cuMem memory answers otherwise:
 *                             what cudalloc's answers hide
 *   prog_registry import HEX SIZE VALUE   the IPC importer */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/preload/check.h"

#define MIB ((size_t)1 << 20)

static const char *self;

static void *device_alloc(size_t size, int value) {
    void *p = NULL;
    CHECK(cudaMalloc(&p, size) == cudaSuccess, "cudaMalloc %zu", size);
    CHECK(cudaMemset(p, value, size) == cudaSuccess, "cudaMemset");
    return p;
}

static CUdeviceptr dp(const void *p, size_t off) { return (CUdeviceptr)p + off; }

/* The allocation holding p as cuMemGetAddressRange says. */
static void range_is(const char *what, CUdeviceptr p, CUdeviceptr base, size_t size) {
    CUdeviceptr b = 0;
    size_t s = 0;
    CUresult r = cuMemGetAddressRange(&b, &s, p);
    CHECK(r == CUDA_SUCCESS && b == base && s == size, "%s: cuMemGetAddressRange: %d, %#llx + %zu, wanted %#llx + %zu",
          what, r, (unsigned long long)b, s, (unsigned long long)base, size);
}

/* The attributes a library reads about a cudaMalloc buffer (base, size). */
static void attributes_are_cudamalloc(const char *what, CUdeviceptr p, CUdeviceptr base, size_t size) {
    CUcontext ctx = NULL, cur = NULL;
    CUdeviceptr start = 0;
    void *mbase = NULL;
    size_t rsize = 0, msize = 0;
    unsigned type = 0, access = 0;
    unsigned long long id = 0, types = 9;
    bool legacy = false, mapped = false, managed = true;
    CUmemoryPool pool = (CUmemoryPool)1;
    cuCtxGetCurrent(&cur);
    CHECK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p) == CUDA_SUCCESS && ctx && ctx == cur,
          "%s: CONTEXT is the allocating context (%p, current %p)", what, (void *)ctx, (void *)cur);
    CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) == CUDA_SUCCESS &&
              type == CU_MEMORYTYPE_DEVICE, "%s: MEMORY_TYPE device", what);
    CHECK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p) == CUDA_SUCCESS && start == base,
          "%s: RANGE_START_ADDR %#llx", what, (unsigned long long)start);
    CHECK(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p) == CUDA_SUCCESS && rsize == size,
          "%s: RANGE_SIZE %zu", what, rsize);
    CHECK(cuPointerGetAttribute(&mbase, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, p) == CUDA_SUCCESS &&
              (CUdeviceptr)mbase == base, "%s: MAPPING_BASE_ADDR %p", what, mbase);
    CHECK(cuPointerGetAttribute(&msize, CU_POINTER_ATTRIBUTE_MAPPING_SIZE, p) == CUDA_SUCCESS && msize == size,
          "%s: MAPPING_SIZE %zu", what, msize);
    CHECK(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p) == CUDA_SUCCESS && id,
          "%s: BUFFER_ID", what);
    CHECK(cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p) == CUDA_SUCCESS && legacy,
          "%s: IS_LEGACY_CUDA_IPC_CAPABLE", what);
    CHECK(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, p) == CUDA_SUCCESS && mapped,
          "%s: MAPPED", what);
    CHECK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p) == CUDA_SUCCESS && !managed,
          "%s: not IS_MANAGED", what);
    CHECK(cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, p) == CUDA_SUCCESS &&
              types == CU_MEM_HANDLE_TYPE_NONE, "%s: ALLOWED_HANDLE_TYPES %llu", what, types);
    CHECK(cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p) == CUDA_SUCCESS && !pool,
          "%s: no MEMPOOL_HANDLE", what);
    CHECK(cuPointerGetAttribute(&access, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, p) == CUDA_SUCCESS &&
              access == CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE, "%s: ACCESS_FLAGS %u", what, access);
    /* UCX's batch: the same answers */
    unsigned long long id2 = 0;
    CUcontext ctx2 = NULL;
    unsigned type2 = 0;
    int ordinal = -1;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_CONTEXT,
                                   CU_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR};
    CUdeviceptr start2 = 0;
    void *data[] = {&type2, &managed, &ordinal, &ctx2, &id2, &start2};
    CHECK(cuPointerGetAttributes(6, attrs, data, p) == CUDA_SUCCESS && type2 == CU_MEMORYTYPE_DEVICE && !managed &&
              ordinal == 0 && ctx2 == ctx && id2 == id && start2 == base,
          "%s: cuPointerGetAttributes answers as one by one", what);
}

/* ---- queries: a 3 MiB buffer between two others, asked from inside ---- */
static int queries(void) {
    void *before = device_alloc(1 * MIB, 1), *p = device_alloc(3 * MIB, 2), *after = device_alloc(5 * MIB, 3);
    range_is("3 MiB, 100 bytes in", dp(p, 100), dp(p, 0), 3 * MIB);
    range_is("3 MiB, last byte", dp(p, 3 * MIB - 1), dp(p, 0), 3 * MIB);
    range_is("1 MiB before it", dp(before, 0), dp(before, 0), 1 * MIB);
    range_is("5 MiB after it", dp(after, 4 * MIB), dp(after, 0), 5 * MIB);
    attributes_are_cudamalloc("3 MiB", dp(p, 100), dp(p, 0), 3 * MIB);
    unsigned long long a = 0, b = 0;
    cuPointerGetAttribute(&a, CU_POINTER_ATTRIBUTE_BUFFER_ID, dp(p, 0));
    cuPointerGetAttribute(&b, CU_POINTER_ATTRIBUTE_BUFFER_ID, dp(after, 0));
    CHECK(a && b && a != b, "two buffers, two buffer IDs");

    /* every route a program takes to the driver answers the same */
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    CUresult (*range_dl)(CUdeviceptr *, size_t *, CUdeviceptr) = dlsym(cuda, "cuMemGetAddressRange_v2");
    CUresult (*range_gpa)(CUdeviceptr *, size_t *, CUdeviceptr) = NULL;
    CUresult (*attr_gpa)(void *, CUpointer_attribute, CUdeviceptr) = NULL;
    CUdriverProcAddressQueryResult st;
    cuGetProcAddress("cuMemGetAddressRange", (void **)&range_gpa, 3020, CU_GET_PROC_ADDRESS_DEFAULT, &st);
    cuGetProcAddress("cuPointerGetAttribute", (void **)&attr_gpa, 4000, CU_GET_PROC_ADDRESS_DEFAULT, &st);
    CUdeviceptr base = 0;
    size_t size = 0;
    CHECK(range_dl && range_dl(&base, &size, dp(p, 7)) == CUDA_SUCCESS && base == dp(p, 0) && size == 3 * MIB,
          "dlsym(cuMemGetAddressRange_v2)");
    base = size = 0;
    CHECK(range_gpa && range_gpa(&base, &size, dp(p, 7)) == CUDA_SUCCESS && base == dp(p, 0) && size == 3 * MIB,
          "cuGetProcAddress(cuMemGetAddressRange)");
    CHECK(attr_gpa && attr_gpa(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, dp(p, 7)) == CUDA_SUCCESS && size == 3 * MIB,
          "cuGetProcAddress(cuPointerGetAttribute)");
    struct cudaPointerAttributes pa;
    CHECK(cudaPointerGetAttributes(&pa, (char *)p + 7) == cudaSuccess && pa.type == cudaMemoryTypeDevice &&
              pa.device == 0 && pa.devicePointer == (char *)p + 7, "cudaPointerGetAttributes");

    /* freed: no allocation there any more */
    cudaFree(p);
    CHECK(cuMemGetAddressRange(&base, &size, dp(p, 100)) == CUDA_ERROR_NOT_FOUND, "freed: not found");
    CHECK(cuPointerGetAttribute(&a, CU_POINTER_ATTRIBUTE_BUFFER_ID, dp(p, 0)) == CUDA_ERROR_INVALID_VALUE,
          "freed: no buffer ID");
    unsigned type = 9;
    CUpointer_attribute t = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    void *data[] = {&type};
    CHECK(cuPointerGetAttributes(1, &t, data, dp(p, 0)) == CUDA_SUCCESS && type == 0, "freed: memory type 0");
    CHECK(cudaPointerGetAttributes(&pa, p) == cudaSuccess && pa.type == cudaMemoryTypeUnregistered,
          "freed: cudaPointerGetAttributes says unregistered");
    cudaFree(before);
    cudaFree(after);
    CHECK_DONE("registry-queries");
}

/* ---- nofd: a driver that cannot share VMM memory (CUDALLOC_SIM_VMM=nofd):
 * a block of an expandable segment cannot be exported, and says so ---- */
static int nofd(void) {
    void *p = device_alloc(3 * MIB, 1);
    bool legacy = true;
    cudaIpcMemHandle_t h;
    CHECK(cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, dp(p, 0)) == CUDA_SUCCESS &&
              !legacy, "not legacy-IPC capable");
    CHECK(cudaIpcGetMemHandle(&h, p) != cudaSuccess, "and indeed cudaIpcGetMemHandle refuses it");
    cudaGetLastError();
    cudaFree(p);
    CHECK_DONE("registry-nofd");
}

/* ---- async: stream-ordered memory is pool memory ---- */
static int async(void) {
    void *p = NULL;
    CHECK(cudaMallocAsync(&p, 3 * MIB, 0) == cudaSuccess, "cudaMallocAsync");
    CUcontext ctx = (CUcontext)1;
    bool legacy = true;
    CUmemoryPool pool = NULL, devpool = NULL;
    CHECK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, dp(p, 0)) == CUDA_SUCCESS && !ctx,
          "pool memory has no context (UCX: stream-ordered memory)");
    CHECK(cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, dp(p, 0)) == CUDA_SUCCESS &&
              !legacy, "pool memory is not legacy-IPC capable");
    CHECK(cuDeviceGetMemPool(&devpool, 0) == CUDA_SUCCESS && devpool, "the device's pool");
    CHECK(cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, dp(p, 100)) == CUDA_SUCCESS &&
              pool == devpool, "MEMPOOL_HANDLE is the device's pool");
    range_is("pool memory", dp(p, 100), dp(p, 0), 3 * MIB);
    cudaFreeAsync(p, 0);
    cudaDeviceSynchronize();
    CHECK_DONE("registry-async");
}

/* ---- reuse: a registration cache keyed on range and buffer ID ---- */
typedef struct reg_entry {
    CUdeviceptr base;
    size_t size;
    unsigned long long id;
} reg_entry;

static reg_entry cache[8];
static int ncache;

/* Registered already? Else registers it. */
static bool registered(CUdeviceptr p) {
    reg_entry e = {0};
    cuMemGetAddressRange(&e.base, &e.size, p);
    cuPointerGetAttribute(&e.id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
    for (int i = 0; i < ncache; i++)
        if (cache[i].base == e.base && cache[i].size == e.size && cache[i].id == e.id) return true;
    if (ncache < 8) cache[ncache++] = e;
    return false;
}

static int reuse(void) {
    void *p = device_alloc(3 * MIB, 1);
    CHECK(!registered(dp(p, 0)), "first use: registered");
    CHECK(registered(dp(p, 4096)), "same buffer: found in the cache");
    unsigned long long old = 0, now = 0;
    cuPointerGetAttribute(&old, CU_POINTER_ATTRIBUTE_BUFFER_ID, dp(p, 0));
    cudaFree(p);
    cudaDeviceSynchronize();
    void *q = device_alloc(3 * MIB, 2);
    cuPointerGetAttribute(&now, CU_POINTER_ATTRIBUTE_BUFFER_ID, dp(q, 0));
    printf("reuse: %s address\n", q == p ? "the same" : "another");
    CHECK(now && now != old, "a new allocation, a new buffer ID (%llu, was %llu)", now, old);
    CHECK(!registered(dp(q, 0)), "the new buffer misses the cache");
    cudaFree(q);
    CHECK_DONE("registry-reuse");
}

/* ---- export: NCCL's and UCX's paths ---- */
static int run_importer(const cudaIpcMemHandle_t *h, size_t size, int value) {
    char hex[2 * sizeof *h + 1], sz[32], v[8];
    for (size_t i = 0; i < sizeof *h; i++) sprintf(hex + 2 * i, "%02x", (unsigned char)h->reserved[i]);
    snprintf(sz, sizeof sz, "%zu", size);
    snprintf(v, sizeof v, "%d", value);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "import", hex, sz, v, (char *)NULL);
        _exit(127);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

static int export(void) {
    void *keep = device_alloc(1 * MIB, 1), *p = device_alloc(3 * MIB, 0x5a);
    /* NCCL (p2p registration): the allocation around the user's buffer,
     * then its cuMem handle; none: the legacy IPC path */
    CUdeviceptr base = 0;
    size_t size = 0;
    CHECK(cuMemGetAddressRange(&base, &size, dp(p, 64)) == CUDA_SUCCESS && base == dp(p, 0), "NCCL: the base");
    CUmemGenericAllocationHandle h;
    CUresult r = cuMemRetainAllocationHandle(&h, (void *)base);
    CHECK(r == CUDA_ERROR_INVALID_VALUE, "cudaMalloc memory has no cuMem handle: %d", r);
    if (r == CUDA_SUCCESS) cuMemRelease(h);
    cudaIpcMemHandle_t ipc;
    CHECK(cudaIpcGetMemHandle(&ipc, (void *)base) == cudaSuccess, "NCCL: legacy IPC handle");
    CHECK(run_importer(&ipc, size, 0x5a) == 0, "another process opens it and reads it");
    /* UCX (cuda_copy md): whole-allocation range in host pages, as a dma-buf */
    CUresult (*get_handle)(void *, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long) = NULL;
    CUdriverProcAddressQueryResult st;
    cuGetProcAddress("cuMemGetHandleForAddressRange", (void **)&get_handle, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st);
    CHECK(get_handle != NULL, "cuMemGetHandleForAddressRange found");
    if (get_handle) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        CUdeviceptr first = base & ~(CUdeviceptr)(page - 1), end = (base + size + page - 1) & ~(CUdeviceptr)(page - 1);
        int fd = -1;
        r = get_handle(&fd, first, end - first, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
        CHECK(r == CUDA_SUCCESS && fd >= 0, "UCX: a dma-buf of the buffer's pages: %d", r);
        if (fd >= 0) close(fd);
        r = get_handle(&fd, first, end - first + 2 * MIB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
        CHECK(r == CUDA_ERROR_INVALID_VALUE, "a range past the buffer is refused whole: %d", r);
    }
    cudaFree(p);
    cudaFree(keep);
    CHECK_DONE("registry-export");
}

static int import(char **argv) {
    cudaIpcMemHandle_t h;
    for (size_t i = 0; i < sizeof h; i++) {
        unsigned v = 0;
        sscanf(argv[2] + 2 * i, "%2x", &v);
        h.reserved[i] = (char)v;
    }
    size_t size = strtoull(argv[3], NULL, 10);
    int value = atoi(argv[4]);
    void *p = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
    CHECK(e == cudaSuccess, "cudaIpcOpenMemHandle: %s", cudaGetErrorName(e));
    if (e != cudaSuccess) return 1;
    unsigned char *host = malloc(size);
    CHECK(cudaMemcpy(host, p, size, cudaMemcpyDeviceToHost) == cudaSuccess, "read");
    size_t bad = 0;
    for (size_t i = 0; i < size; i++) bad += host[i] != (unsigned char)value;
    CHECK(bad == 0, "%zu bytes differ", bad);
    free(host);
    /* what a library asks about memory opened by IPC: the block, in our context */
    CUdeviceptr base = 0;
    size_t got = 0;
    CUcontext ctx = NULL, cur = NULL;
    bool legacy = true;
    unsigned long long id = 0;
    CUmemGenericAllocationHandle mh;
    cuCtxGetCurrent(&cur);
    CHECK(cuMemGetAddressRange(&base, &got, dp(p, 100)) == CUDA_SUCCESS && base == dp(p, 0) && got == size,
          "imported: cuMemGetAddressRange %#llx + %zu", (unsigned long long)base, got);
    CHECK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, dp(p, 0)) == CUDA_SUCCESS && ctx == cur,
          "imported: the opening context");
    CHECK(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, dp(p, 0)) == CUDA_SUCCESS && id,
          "imported: a buffer ID");
    CHECK(cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, dp(p, 0)) == CUDA_SUCCESS &&
              !legacy, "imported: not exported again");
    CHECK(cuMemRetainAllocationHandle(&mh, p) == CUDA_ERROR_INVALID_VALUE, "imported: no cuMem handle");
    CHECK(cudaIpcCloseMemHandle(p) == cudaSuccess, "close");
    return check_failures ? 1 : 0;
}

/* ---- vmm: what the driver answers for cuMem memory laid out as cudalloc
 * lays out a block (3 MiB in a mapped 4 MiB of a 1 GiB reservation) ---- */
static int vmm(void) {
    cudaFree(0);
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUdeviceptr resv = 0;
    CUmemGenericAllocationHandle h;
    CHECK(cuMemAddressReserve(&resv, 1024 * MIB, 0, 0, 0) == CUDA_SUCCESS, "reserve");
    CHECK(cuMemCreate(&h, 4 * MIB, &prop, 0) == CUDA_SUCCESS, "create");
    CHECK(cuMemMap(resv, 4 * MIB, 0, h, 0) == CUDA_SUCCESS, "map");
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK(cuMemSetAccess(resv, 4 * MIB, &acc, 1) == CUDA_SUCCESS, "access");
    CUdeviceptr p = resv + 1 * MIB, base = 0, start = 0;
    size_t size = 0, rsize = 0;
    CUcontext ctx = (CUcontext)1;
    bool legacy = true;
    CHECK(cuMemGetAddressRange(&base, &size, p + 100) == CUDA_SUCCESS && base == resv && size == 4 * MIB,
          "cuMemGetAddressRange: the whole mapping, not the 3 MiB");
    CHECK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p) == CUDA_SUCCESS && start == resv &&
              cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p) == CUDA_SUCCESS &&
              rsize == 1024 * MIB, "RANGE_*: the whole 1 GiB reservation");
    CHECK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p) == CUDA_SUCCESS && !ctx, "no context");
    CHECK(cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p) == CUDA_SUCCESS &&
              !legacy, "not legacy-IPC capable");
    CUmemGenericAllocationHandle again;
    CHECK(cuMemRetainAllocationHandle(&again, (void *)p) == CUDA_SUCCESS, "a cuMem handle: NCCL's cuMem path");
    cuMemRelease(again);
    cuMemUnmap(resv, 4 * MIB);
    cuMemRelease(h);
    cuMemAddressFree(resv, 1024 * MIB);
    CHECK_DONE("registry-vmm");
}

/* ---- bench: what a query costs, for memory not ours (a host buffer, as UCX
 * asks about every buffer), a block's start, and 1 MiB inside its last block
 * among `n` live ones ---- */
static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static double ns_per_query(CUdeviceptr p, int reps) {
    unsigned long long id;
    double t0 = seconds();
    for (int i = 0; i < reps; i++) cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
    return (seconds() - t0) * 1e9 / reps;
}

/* kind: all three, or only "host", "start" or "inside" (for callgrind: ns_per_query's
 * instructions over `reps` calls) */
static int bench(int n, const char *kind, int reps) {
    void **p = calloc((size_t)n, sizeof *p);
    for (int i = 0; i < n; i++) cudaMalloc(&p[i], i == n - 1 ? 4 * MIB : 64 << 10);
    static char host[4096];
    if (!strcmp(kind, "host")) ns_per_query((CUdeviceptr)host, reps);
    else if (!strcmp(kind, "start")) ns_per_query(dp(p[n - 1], 0), reps);
    else if (!strcmp(kind, "inside")) ns_per_query(dp(p[n - 1], MIB), reps);
    else
        printf("bench %d blocks: host %.0f ns, block start %.0f ns, inside the last block %.0f ns\n", n,
               ns_per_query((CUdeviceptr)host, reps), ns_per_query(dp(p[n - 1], 0), reps),
               ns_per_query(dp(p[n - 1], MIB), reps / 10));
    for (int i = 0; i < n; i++) cudaFree(p[i]);
    free(p);
    return 0;
}

int main(int argc, char **argv) {
    self = argv[0];
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "queries")) return queries();
    if (!strcmp(mode, "async")) return async();
    if (!strcmp(mode, "nofd")) return nofd();
    if (!strcmp(mode, "reuse")) return reuse();
    if (!strcmp(mode, "export")) return export();
    if (!strcmp(mode, "vmm")) return vmm();
    if (!strcmp(mode, "import") && argc > 4) return import(argv);
    if (!strcmp(mode, "bench") && argc > 2)
        return bench(atoi(argv[2]), argc > 3 ? argv[3] : "all", argc > 4 ? atoi(argv[4]) : 200000);
    fprintf(stderr, "usage: prog_registry queries|async|reuse|export|vmm\n");
    return 2;
}
