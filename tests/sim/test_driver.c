/* simgpu driver: initialization, contexts, devices, capacity, linear memory,
 * copies, pointer attributes, error strings, threads. */
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "tests/sim/sim_test.h"

START_TEST(before_init_not_initialized)
{
    CUdeviceptr p;
    CUcontext ctx;
    int n, v;
    const char *s;
    ck_assert_int_eq(cuMemAlloc(&p, 1), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(cuCtxGetCurrent(&ctx), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_ERROR_NOT_INITIALIZED);
    /* These need no cuInit, as with the real driver. */
    CK(cuDriverGetVersion(&v));
    ck_assert_int_eq(v, CUDA_VERSION);
    CK(cuGetErrorString(CUDA_ERROR_NOT_INITIALIZED, &s));
    ck_assert_str_eq(s, "initialization error");
    ck_assert_int_eq(cuInit(1), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

static void *alloc_on_new_thread(void *arg)
{
    CUdeviceptr p;
    *(CUresult *)arg = cuMemAlloc(&p, 4096);
    return NULL;
}

START_TEST(no_current_context_is_invalid_context)
{
    CUdeviceptr p;
    CUcontext ctx = (CUcontext)1;
    CUdevice dev;
    CUstream s;
    CUevent e;
    size_t free, total;
    CK(cuInit(0));
    CK(cuCtxGetCurrent(&ctx));
    ck_assert_ptr_null(ctx);
    ck_assert_int_eq(cuMemAlloc(&p, 4096), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuMemFree(0), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuMemGetInfo(&free, &total), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuEventCreate(&e, 0), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuMemAllocAsync(&p, 4096, NULL), CUDA_ERROR_INVALID_CONTEXT);

    /* Retaining alone makes nothing current; setting it does, on this thread only. */
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    ck_assert_int_eq(cuMemAlloc(&p, 4096), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuCtxSetCurrent(ctx));
    CK(cuMemAlloc(&p, 4096));
    CK(cuCtxGetDevice(&dev));
    ck_assert_int_eq(dev, 0);
    pthread_t t;
    CUresult other = CUDA_SUCCESS;
    pthread_create(&t, NULL, alloc_on_new_thread, &other);
    pthread_join(t, NULL);
    ck_assert_int_eq(other, CUDA_ERROR_INVALID_CONTEXT);
}
END_TEST

START_TEST(context_stack)
{
    CUcontext ctx, got;
    CK(cuInit(0));
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    ck_assert_int_eq(cuCtxPopCurrent(&got), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuCtxSetCurrent((CUcontext)&got), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuCtxPushCurrent(ctx));
    CK(cuCtxPushCurrent(ctx));
    CK(cuCtxPopCurrent(&got));
    ck_assert_ptr_eq(got, ctx);
    CK(cuCtxGetCurrent(&got));
    ck_assert_ptr_eq(got, ctx);
    CK(cuCtxSetCurrent(NULL)); /* pops the top */
    CK(cuCtxGetCurrent(&got));
    ck_assert_ptr_null(got);
    CK(cuCtxSetCurrent(NULL)); /* empty stack: nothing to do */
}
END_TEST

START_TEST(primary_release_resets)
{
    CUcontext a, b;
    CUdeviceptr p;
    unsigned flags;
    int active;
    CK(cuInit(0));
    CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    ck_assert_int_eq(active, 0);
    CK(cuDevicePrimaryCtxRetain(&a, 0));
    CK(cuDevicePrimaryCtxRetain(&b, 0));
    ck_assert_ptr_eq(a, b);
    CK(cuCtxSetCurrent(a));
    CK(cuMemAlloc(&p, MiB));
    CK(cuDevicePrimaryCtxRelease(0));
    ck_assert_uint_eq(sim_counters().bytes_in_use, MiB);
    CK(cuDevicePrimaryCtxRelease(0));
    ck_assert_uint_eq(sim_counters().bytes_in_use, 0);
    CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    ck_assert_int_eq(active, 0);
    ck_assert_int_eq(cuMemAlloc(&p, MiB), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuDevicePrimaryCtxRelease(1), CUDA_ERROR_INVALID_DEVICE);
}
END_TEST

START_TEST(primary_reset_frees_but_keeps_context)
{
    CUdeviceptr p, q;
    CUstream s;
    sim_ctx();
    CK(cuMemAlloc(&p, MiB));
    CK(cuStreamCreate(&s, 0));
    CK(cuDevicePrimaryCtxReset(0));
    ck_assert_uint_eq(sim_counters().bytes_in_use, 0);
    ck_assert_int_eq(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
    CK(cuMemAlloc(&q, MiB));
}
END_TEST

START_TEST(device_queries)
{
    int n, v;
    char name[64];
    size_t total;
    CUdevice d;
    CUuuid uuid;
    CK(cuInit(0));
    CK(cuDeviceGetCount(&n));
    ck_assert_int_eq(n, 1);
    CK(cuDeviceGet(&d, 0));
    ck_assert_int_eq(cuDeviceGet(&d, 1), CUDA_ERROR_INVALID_DEVICE);
    CK(cuDeviceGetName(name, sizeof name, 0));
    ck_assert_str_eq(name, "simgpu (simulated CUDA device)");
    CK(cuDeviceGetName(name, 7, 0));
    ck_assert_str_eq(name, "simgpu");
    CK(cuDeviceTotalMem(&total, 0));
    ck_assert_uint_eq(total, (size_t)16 << 30);
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    ck_assert_int_eq(v, 9);
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0));
    ck_assert_int_eq(v, 0);
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    ck_assert_int_eq(v, 132);
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));
    ck_assert_int_eq(v, 32);
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    ck_assert_int_eq(v, 1);
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH, 0));
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 3), CUDA_ERROR_INVALID_DEVICE);
    CK(cuDeviceGetUuid(&uuid, 0));
    ck_assert_int_eq(memcmp(uuid.bytes, "simgpu", 6), 0);
}
END_TEST

START_TEST(several_devices)
{
    int n;
    CUcontext c0, c1;
    CUdeviceptr p;
    int ordinal = -1;
    setenv("CUDALLOC_SIM_DEVICES", "2", 1);
    setenv("CUDALLOC_SIM_MEMORY", "64MiB", 1);
    CK(cuInit(0));
    CK(cuDeviceGetCount(&n));
    ck_assert_int_eq(n, 2);
    CK(cuDevicePrimaryCtxRetain(&c0, 0));
    CK(cuDevicePrimaryCtxRetain(&c1, 1));
    ck_assert_ptr_ne(c0, c1);
    CK(cuCtxSetCurrent(c1));
    CK(cuMemAlloc(&p, 48 * MiB));
    CK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
    ck_assert_int_eq(ordinal, 1);
    /* Each device has its own capacity. */
    ck_assert_int_eq(cuMemAlloc(&p, 32 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuCtxSetCurrent(c0));
    CK(cuMemAlloc(&p, 32 * MiB));
    simgpu_counters_t c = sim_counters();
    ck_assert_int_eq(c.device_count, 2);
    ck_assert_uint_eq(c.capacity, 128 * MiB);
    ck_assert_uint_eq(c.device_bytes_in_use[0], 32 * MiB);
    ck_assert_uint_eq(c.device_bytes_in_use[1], 48 * MiB);
}
END_TEST

/* CUDALLOC_SIM_MEMORY spellings and the capacity they give. */
static const struct {
    const char *value;
    size_t bytes;
} sizes[] = {
    {"8GiB", (size_t)8 << 30}, {"512MiB", 512 * MiB},   {"1073741824", (size_t)1 << 30},
    {"3KiB", 3072},            {"2KB", 2048},           {"5MB", 5 * MiB},
    {"1GB", (size_t)1 << 30},  {"4gib", (size_t)4 << 30}, {"", (size_t)16 << 30},
    {"1.5GiB", (size_t)3 << 29},
};

START_TEST(memory_env_spellings)
{
    size_t total, free;
    setenv("CUDALLOC_SIM_MEMORY", sizes[_i].value, 1);
    sim_ctx();
    CK(cuDeviceTotalMem(&total, 0));
    ck_assert_uint_eq(total, sizes[_i].bytes);
    CK(cuMemGetInfo(&free, &total));
    ck_assert_uint_eq(total, sizes[_i].bytes);
    ck_assert_uint_eq(free, sizes[_i].bytes);
}
END_TEST

static void init_into(void *result)
{
    *(CUresult *)result = cuInit(0);
}

static const struct {
    const char *var, *value;
} bad_env[] = {
    {"CUDALLOC_SIM_MEMORY", "12XB"}, {"CUDALLOC_SIM_MEMORY", "0"},
    {"CUDALLOC_SIM_MEMORY", "-1GiB"}, {"CUDALLOC_SIM_MEMORY", "1.5"},
    {"CUDALLOC_SIM_MEMORY", "99999999999999GiB"}, {"CUDALLOC_SIM_LATE_EVENTS", "two"},
    {"CUDALLOC_SIM_DEVICES", "9"},
};

START_TEST(malformed_env_fails_init)
{
    CUresult r = CUDA_SUCCESS;
    int n;
    setenv(bad_env[_i].var, bad_env[_i].value, 1);
    const char *err = sim_stderr_of(init_into, &r);
    ck_assert_int_eq(r, CUDA_ERROR_INVALID_VALUE);
    ck_assert_ptr_nonnull(strstr(err, bad_env[_i].var));
    ck_assert_ptr_nonnull(strstr(err, bad_env[_i].value));
    ck_assert_ptr_nonnull(strchr(err, '\n'));
    ck_assert_ptr_eq(strchr(err, '\n'), err + strlen(err) - 1); /* one line */
    /* Every later cuInit fails too, silently; nothing else works. */
    err = sim_stderr_of(init_into, &r);
    ck_assert_int_eq(r, CUDA_ERROR_INVALID_VALUE);
    ck_assert_str_eq(err, "");
    ck_assert_int_eq(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
}
END_TEST

START_TEST(capacity_counts_every_path)
{
    CUdeviceptr a, b, c, d;
    size_t free, total;
    setenv("CUDALLOC_SIM_MEMORY", "8MiB", 1);
    sim_ctx();
    CK(cuMemAlloc(&a, 4 * MiB));
    CK(cuMemAllocAsync(&b, 2 * MiB, NULL));
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle h, h2;
    CK(cuMemCreate(&h, 2 * MiB, &prop, 0));
    CK(cuMemGetInfo(&free, &total));
    ck_assert_uint_eq(free, 0);
    ck_assert_uint_eq(total, 8 * MiB);
    /* Full: every path answers out of memory. */
    ck_assert_int_eq(cuMemAlloc(&c, 1), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(cuMemAllocAsync(&c, 1, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(cuMemCreate(&h2, 2 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    simgpu_counters_t n = sim_counters();
    ck_assert_uint_eq(n.out_of_memory, 3);
    ck_assert_uint_eq(n.bytes_in_use, 8 * MiB);
    ck_assert_uint_eq(n.capacity, 8 * MiB);
    /* What one path frees, another can take. */
    CK(cuMemRelease(h));
    CK(cuMemAlloc(&c, 2 * MiB - 512));
    /* Linear allocations count in units of 512 bytes: 513 takes 1024. */
    ck_assert_int_eq(cuMemAlloc(&d, 513), CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemFreeAsync(b, NULL));
    CK(cuMemAlloc(&d, 1));
    ck_assert_uint_eq(sim_counters().bytes_in_use, 6 * MiB);
    n = sim_counters();
    ck_assert_uint_eq(n.mem_alloc, 3);
    ck_assert_uint_eq(n.mem_alloc_async, 1);
    ck_assert_uint_eq(n.mem_free_async, 1);
    ck_assert_uint_eq(n.mem_create, 1);
    ck_assert_uint_eq(n.mem_release, 1);
}
END_TEST

/* Sizes at their edges on a 64 MiB device, through every allocation path:
 * up to the capacity they succeed, past it (to 2^64 - 1, a pitch or a
 * product that does not fit) they are out of memory, never a small block. */
START_TEST(sizes_at_their_edges)
{
    setenv("CUDALLOC_SIM_MEMORY", "64MiB", 1);
    sim_ctx();
    const size_t cap = 64 * MiB;
    const size_t fits[] = {1, 511, 512, 513, 2 * MiB - 1, 2 * MiB, 2 * MiB + 1, cap - 1, cap};
    for (size_t i = 0; i < sizeof fits / sizeof fits[0]; i++) {
        CUdeviceptr p = 0;
        size_t pitch = 0;
        CK(cuMemAlloc(&p, fits[i]));
        CK(cuMemsetD8(p + fits[i] - 1, 1, 1));
        CK(cuMemFree(p));
        CK(cuMemAllocAsync(&p, fits[i], NULL));
        CK(cuMemFreeAsync(p, NULL));
        CK(cuMemAllocPitch(&p, &pitch, fits[i], 1, 4));
        ck_assert_uint_eq(pitch, (fits[i] + 511) / 512 * 512);
        CK(cuMemsetD8(p + pitch - 1, 1, 1));
        CK(cuMemFree(p));
    }
    CUdeviceptr p = 0;
    size_t pitch = 0;
    CK(cuMemAllocPitch(&p, &pitch, 100, 4, 16)); /* rows of 512 */
    ck_assert_uint_eq(pitch, 512);
    CK(cuMemsetD8(p + 3 * 512 + 99, 1, 1));
    CK(cuMemFree(p));
    uint64_t ooms = sim_counters().out_of_memory;
    size_t past[4 + 4097];
    size_t n = 0;
    past[n++] = cap + 1;
    past[n++] = (size_t)1 << 62;
    past[n++] = (size_t)1 << 63;
    past[n++] = ((size_t)1 << 63) + 1;
    for (size_t k = 0; k <= 4096; k++) past[n++] = SIZE_MAX - k;
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(cuMemAlloc(&p, past[i]), CUDA_ERROR_OUT_OF_MEMORY);
        ck_assert_int_eq(cuMemAllocAsync(&p, past[i], NULL), CUDA_ERROR_OUT_OF_MEMORY);
        ck_assert_int_eq(cuMemAllocPitch(&p, &pitch, past[i], 1, 4), CUDA_ERROR_OUT_OF_MEMORY);
        ck_assert_int_eq(cuMemAllocPitch(&p, &pitch, 1, past[i], 4), CUDA_ERROR_OUT_OF_MEMORY);
    }
    /* rows that fit, a product that does not */
    ck_assert_int_eq(cuMemAllocPitch(&p, &pitch, 4096, SIZE_MAX / 1024, 4), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(sim_counters().out_of_memory, ooms + 4 * n + 1);
    ck_assert_uint_eq(sim_counters().bytes_in_use, 0);
    /* wrong arguments are wrong, whatever the size */
    ck_assert_int_eq(cuMemAllocPitch(&p, &pitch, 0, 1, 4), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAllocPitch(&p, &pitch, 1, 0, 4), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAllocPitch(&p, &pitch, 1, 1, 2), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAllocPitch(&p, NULL, 1, 1, 4), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAllocPitch(NULL, &pitch, 1, 1, 4), CUDA_ERROR_INVALID_VALUE);
    /* physical memory and address ranges past anything there is */
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle h;
    ck_assert_int_eq(cuMemCreate(&h, cap + 2 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(cuMemCreate(&h, SIZE_MAX - 2 * MiB + 1, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemCreate(&h, cap, &prop, 0));
    CK(cuMemRelease(h));
    CUdeviceptr r;
    ck_assert_int_eq(cuMemAddressReserve(&r, SIZE_MAX - 2 * MiB + 1, 0, 0, 0), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(cuMemAddressReserve(&r, (size_t)1 << 63, 0, 0, 0), CUDA_ERROR_OUT_OF_MEMORY);
}
END_TEST

START_TEST(linear_memory_and_copies)
{
    CUdeviceptr a, b;
    unsigned char host[256], back[256];
    for (int i = 0; i < 256; i++)
        host[i] = (unsigned char)i;
    sim_ctx();
    CK(cuMemAlloc(&a, 256));
    CK(cuMemAlloc(&b, 256));
    ck_assert_uint_eq(a % 256, 0);
    CK(cuMemcpyHtoD(a, host, 256));
    CK(cuMemcpyDtoD(b, a, 256));
    memset(back, 0, sizeof back);
    CK(cuMemcpyDtoH(back, b, 256));
    ck_assert_int_eq(memcmp(back, host, 256), 0);
    /* Device pointers are host addresses: a CPU kernel reads and writes them. */
    ck_assert_int_eq(((unsigned char *)b)[200], 200);
    ((unsigned char *)b)[0] = 77;
    CK(cuMemcpyDtoH(back, b, 1));
    ck_assert_int_eq(back[0], 77);
    CK(cuMemsetD32(a, 0xdeadbeef, 64));
    ck_assert_uint_eq(((unsigned *)a)[63], 0xdeadbeef);
    CK(cuMemsetD16Async(a, 0x1234, 128, NULL));
    ck_assert_uint_eq(((unsigned short *)a)[127], 0x1234);
    CK(cuMemsetD8(a, 9, 256));
    ck_assert_uint_eq(((unsigned char *)a)[255], 9);
    CK(cuMemcpyAsync(b, a, 256, NULL));
    ck_assert_uint_eq(((unsigned char *)b)[100], 9);
    /* Past the end, misaligned, unknown, twice freed: all invalid values. */
    ck_assert_int_eq(cuMemcpyHtoD(a, host, 257), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemcpyDtoH(back, a + 200, 57), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemsetD32(a + 2, 0, 1), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemcpyHtoD((CUdeviceptr)back, host, 1), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemFree(a + 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFree(a));
    ck_assert_int_eq(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAlloc(&a, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFree(0));
}
END_TEST

START_TEST(memory_committed_when_touched)
{
    CUdeviceptr p;
    const size_t len = 256 * MiB;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *vec = malloc(len / page);
    sim_ctx();
    CK(cuMemAlloc(&p, len));
    ck_assert_int_eq(mincore((void *)p, len, vec), 0);
    size_t resident = 0;
    for (size_t i = 0; i < len / page; i++)
        resident += vec[i] & 1;
    ck_assert_uint_eq(resident, 0);
    ((char *)p)[5 * page] = 1;
    ck_assert_int_eq(mincore((void *)p, len, vec), 0);
    ck_assert_int_eq(vec[5] & 1, 1);
    ck_assert_int_eq(vec[6] & 1, 0);
    free(vec);
}
END_TEST

START_TEST(host_memory)
{
    void *h;
    unsigned type = 0;
    CUcontext ctx = sim_ctx(), owner = NULL;
    CK(cuMemAllocHost(&h, 1000));
    memset(h, 1, 1000);
    ck_assert_uint_eq(sim_counters().bytes_in_use, 0);
    CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)h));
    ck_assert_uint_eq(type, CU_MEMORYTYPE_HOST);
    CK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)h));
    ck_assert_ptr_eq(owner, ctx);
    ck_assert_int_eq(cuMemFree((CUdeviceptr)h), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFreeHost(h));
    ck_assert_int_eq(cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemHostAlloc(&h, 10, 0x80), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(pointer_attributes)
{
    CUcontext ctx = sim_ctx(), got = (CUcontext)1;
    CUdeviceptr p, a, start = 0, dp = 0;
    size_t size = 0;
    int ordinal = -1;
    unsigned type = 0;
    unsigned long long id1 = 0, id2 = 0;
    void *host;
    CK(cuMemAlloc(&p, 3000));
    CK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_CONTEXT, p + 100));
    ck_assert_ptr_eq(got, ctx);
    CK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p + 100));
    ck_assert_int_eq(ordinal, 0);
    CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p));
    ck_assert_uint_eq(type, CU_MEMORYTYPE_DEVICE);
    CK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p + 7));
    ck_assert_uint_eq(dp, p + 7);
    CK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + 2999));
    CK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p + 2999));
    ck_assert_uint_eq(start, p);
    ck_assert_uint_eq(size, 3000);
    ck_assert_int_eq(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, p),
                     CUDA_ERROR_INVALID_VALUE);
    CK(cuMemGetAddressRange(&start, &size, p + 5));
    ck_assert_uint_eq(start, p);
    ck_assert_uint_eq(size, 3000);
    ck_assert_int_eq(cuMemGetAddressRange(&start, NULL, p + 3000), CUDA_ERROR_NOT_FOUND);
    /* Pool memory has a device but no context. */
    CK(cuMemAllocAsync(&a, 100, NULL));
    CK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_CONTEXT, a));
    ck_assert_ptr_null(got);
    CK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a));
    ck_assert_int_eq(ordinal, 0);
    CK(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, p));
    CK(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, a));
    ck_assert_uint_ne(id1, id2);
    /* cudaMalloc memory: legacy IPC, no pool; pool memory: its device's pool. */
    CUmemoryPool pool = (CUmemoryPool)1, devpool = NULL;
    unsigned char legacy = 9;
    unsigned long long types = 9;
    unsigned access = 9;
    CK(cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
    ck_assert_ptr_null(pool);
    CK(cuDeviceGetMemPool(&devpool, 0));
    ck_assert_ptr_nonnull(devpool);
    CK(cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a));
    ck_assert_ptr_eq(pool, devpool);
    CK(cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p));
    ck_assert_int_eq(legacy, 1);
    CK(cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, a));
    ck_assert_int_eq(legacy, 0);
    CK(cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, p));
    ck_assert_uint_eq(types, CU_MEM_HANDLE_TYPE_NONE);
    CK(cuPointerGetAttribute(&access, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, p));
    ck_assert_uint_eq(access, CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE);
    /* managed memory says so; the device's pool gives pool memory, no other pool */
    CUdeviceptr m = 0, q = 0;
    unsigned char managed = 0;
    CK(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL));
    CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m));
    ck_assert_int_eq(managed, 1);
    CK(cuMemFree(m));
    ck_assert_int_eq(cuMemAllocManaged(&m, 4096, 7), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemAllocFromPoolAsync(&q, 4096, devpool, NULL));
    CK(cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, q));
    ck_assert_ptr_eq(pool, devpool);
    CK(cuMemFreeAsync(q, NULL));
    ck_assert_int_eq(cuMemAllocFromPoolAsync(&q, 4096, (CUmemoryPool)&managed, NULL), CUDA_ERROR_INVALID_VALUE);
    /* Unknown memory: an error alone, zeros in a batch. */
    int local;
    ck_assert_int_eq(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                           (CUdeviceptr)&local), CUDA_ERROR_INVALID_VALUE);
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT};
    type = 7;
    void *data[] = {&type, &got};
    CK(cuPointerGetAttributes(2, attrs, data, (CUdeviceptr)&local));
    ck_assert_uint_eq(type, 0);
    ck_assert_ptr_null(got);
    CK(cuPointerGetAttributes(2, attrs, data, p));
    ck_assert_uint_eq(type, CU_MEMORYTYPE_DEVICE);
    ck_assert_ptr_eq(got, ctx);
}
END_TEST

START_TEST(error_strings)
{
    static const struct {
        CUresult code;
        const char *name, *text;
    } known[] = {
        {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
        {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
        {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
        {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
        {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
        {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
        {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
        {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
        {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
        {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
        {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU",
         "no kernel image is available for execution on the device"},
    };
    const char *s;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        CK(cuGetErrorName(known[i].code, &s));
        ck_assert_str_eq(s, known[i].name);
        CK(cuGetErrorString(known[i].code, &s));
        ck_assert_str_eq(s, known[i].text);
    }
    s = "x";
    ck_assert_int_eq(cuGetErrorString((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    ck_assert_ptr_null(s);
    s = "x";
    ck_assert_int_eq(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, NULL), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

static void *churn(void *ctx)
{
    if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return (void *)1;
    for (int i = 0; i < 300; i++) {
        CUdeviceptr p;
        if (cuMemAlloc(&p, 4096 + (size_t)i) != CUDA_SUCCESS)
            return (void *)1;
        memset((void *)p, i, 4096);
        if (cuMemFree(p) != CUDA_SUCCESS)
            return (void *)1;
    }
    return NULL;
}

START_TEST(threads_share_the_device)
{
    CUcontext ctx = sim_ctx();
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, churn, ctx);
    for (int i = 0; i < 8; i++) {
        void *ret;
        pthread_join(t[i], &ret);
        ck_assert_ptr_null(ret);
    }
    simgpu_counters_t c = sim_counters();
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_uint_eq(c.mem_alloc, 2400);
    ck_assert_uint_eq(c.mem_free, 2400);
}
END_TEST

START_TEST(forked_child_keeps_working)
{
    CUdeviceptr p;
    sim_ctx();
    CK(cuMemAlloc(&p, 4096));
    strcpy((char *)p, "parent");
    pid_t pid = fork();
    if (pid == 0) {
        CUdeviceptr q;
        int ok = cuMemAlloc(&q, 4096) == CUDA_SUCCESS && strcmp((char *)p, "parent") == 0;
        strcpy((char *)p, "child");
        ok = ok && cuMemFree(p) == CUDA_SUCCESS && cuMemFree(q) == CUDA_SUCCESS;
        _exit(ok ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_str_eq((char *)p, "parent");
    CK(cuMemFree(p));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("simgpu driver");
    TCase *tc = tcase_create("driver");
    tcase_add_test(tc, before_init_not_initialized);
    tcase_add_test(tc, no_current_context_is_invalid_context);
    tcase_add_test(tc, context_stack);
    tcase_add_test(tc, primary_release_resets);
    tcase_add_test(tc, primary_reset_frees_but_keeps_context);
    tcase_add_test(tc, device_queries);
    tcase_add_test(tc, several_devices);
    tcase_add_loop_test(tc, memory_env_spellings, 0, sizeof sizes / sizeof sizes[0]);
    tcase_add_loop_test(tc, malformed_env_fails_init, 0, sizeof bad_env / sizeof bad_env[0]);
    tcase_add_test(tc, capacity_counts_every_path);
    tcase_add_test(tc, sizes_at_their_edges);
    tcase_add_test(tc, linear_memory_and_copies);
    tcase_add_test(tc, memory_committed_when_touched);
    tcase_add_test(tc, host_memory);
    tcase_add_test(tc, pointer_attributes);
    tcase_add_test(tc, error_strings);
    tcase_add_test(tc, threads_share_the_device);
    tcase_add_test(tc, forked_child_keeps_working);
    suite_add_tcase(s, tc);
    return sim_run(s);
}
