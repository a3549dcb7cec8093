/* simgpu across processes: legacy IPC handles for cuMemAlloc memory,
 * shareable (POSIX fd) handles for cuMemCreate memory, and a device without
 * VMM (CUDALLOC_SIM_VMM=0). */
#include <fcntl.h>
#include <sys/wait.h>

#include "tests/sim/sim_test.h"

#define G (2 * MiB)
#define LAZY CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS

/* Runs fn in a child process; its exit status. */
static int in_child(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(fn(arg));
    int status = -1;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

/* The importer: opens the handle, finds 0x5a, writes 0xa5; 0 when all went as CUDA says. */
static int importer(void *arg)
{
    const CUipcMemHandle *h = arg;
    CUdeviceptr p, again;
    if (cuIpcOpenMemHandle_v2(&p, *h, 0) != CUDA_ERROR_INVALID_VALUE)
        return 1; /* flags must be CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS */
    if (cuIpcOpenMemHandle_v2(&p, *h, LAZY) != CUDA_SUCCESS)
        return 2;
    if (((unsigned char *)p)[0] != 0x5a || ((unsigned char *)p)[MiB - 1] != 0x5a)
        return 3;
    if (cuMemsetD8_v2(p, 0xa5, MiB) != CUDA_SUCCESS)
        return 4;
    if (cuIpcOpenMemHandle_v2(&again, *h, LAZY) != CUDA_SUCCESS || again != p)
        return 5; /* opened again: the same pointer, counted */
    if (cuMemFree_v2(p) != CUDA_ERROR_INVALID_VALUE)
        return 6; /* imported memory is closed, not freed */
    if (cuIpcCloseMemHandle(p) != CUDA_SUCCESS || cuIpcCloseMemHandle(p) != CUDA_SUCCESS)
        return 7;
    if (cuIpcCloseMemHandle(p) != CUDA_ERROR_INVALID_VALUE)
        return 8;
    return 0;
}

static int open_fails(void *arg)
{
    CUdeviceptr p;
    return cuIpcOpenMemHandle_v2(&p, *(const CUipcMemHandle *)arg, LAZY) == CUDA_ERROR_INVALID_HANDLE ? 0 : 1;
}

START_TEST(legacy_ipc)
{
    CUdeviceptr p, inner = 0;
    CUipcMemHandle h, h2;
    sim_ctx();
    CK(cuMemAlloc_v2(&p, MiB));
    CK(cuMemsetD8_v2(p, 0x5a, MiB));
    ck_assert_int_eq(cuIpcGetMemHandle(&h, p + 512), CUDA_ERROR_INVALID_VALUE); /* not its base */
    CK(cuIpcGetMemHandle(&h, p));
    CK(cuIpcGetMemHandle(&h2, p));
    ck_assert_mem_eq(&h, &h2, sizeof h); /* the same allocation, the same handle */
    ck_assert_int_eq(cuIpcOpenMemHandle_v2(&inner, h, LAZY), CUDA_ERROR_INVALID_CONTEXT); /* its own */
    ck_assert_uint_eq(((unsigned char *)p)[7], 0x5a); /* moved to shared memory, bytes kept */
    ck_assert_int_eq(in_child(importer, &h), 0);
    ck_assert_uint_eq(((unsigned char *)p)[0], 0xa5); /* the importer's writes are ours */
    ck_assert_uint_eq(((unsigned char *)p)[MiB - 1], 0xa5);
    CK(cuMemFree_v2(p));
    ck_assert_int_eq(in_child(open_fails, &h), 0); /* freed: the handle opens nothing */
    CK(cuMemAlloc_v2(&p, MiB));
    CK(cuIpcGetMemHandle(&h2, p));
    ck_assert(memcmp(&h, &h2, sizeof h) != 0); /* new memory, a new handle */
    CUmemGenericAllocationHandle vh;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUdeviceptr v;
    CK(cuMemAddressReserve(&v, G, 0, 0, 0));
    CK(cuMemCreate(&vh, G, &prop, 0));
    CK(cuMemMap(v, G, 0, vh, 0));
    ck_assert_int_eq(cuIpcGetMemHandle(&h, v), CUDA_ERROR_INVALID_VALUE); /* VMM memory: no legacy IPC */
}
END_TEST

static CUdeviceptr map_rw(CUmemGenericAllocationHandle h)
{
    CUdeviceptr p;
    CK(cuMemAddressReserve(&p, G, 0, 0, 0));
    CK(cuMemMap(p, G, 0, h, 0));
    CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                         .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CK(cuMemSetAccess(p, G, &d, 1));
    return p;
}

/* A child imports the fd it inherited and writes through its own mapping. */
static int fd_importer(void *arg)
{
    CUmemGenericAllocationHandle h;
    if (cuMemImportFromShareableHandle(&h, arg, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != CUDA_SUCCESS)
        return 1;
    CUdeviceptr p;
    if (cuMemAddressReserve(&p, G, 0, 0, 0) != CUDA_SUCCESS || cuMemMap(p, G, 0, h, 0) != CUDA_SUCCESS)
        return 2;
    CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                         .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if (cuMemSetAccess(p, G, &d, 1) != CUDA_SUCCESS || ((char *)p)[100] != 'x')
        return 3;
    ((char *)p)[G - 1] = 'y';
    return 0;
}

START_TEST(shareable_handles)
{
    CUmemGenericAllocationHandle plain, shared, imported;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    int fd = -1, attr = 0;
    CK(cuInit(0));
    CK(cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0));
    ck_assert_int_eq(attr, 1);
    CK(cuMemCreate(&plain, G, &prop, 0));
    ck_assert_int_eq(cuMemExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                     CUDA_ERROR_INVALID_VALUE); /* not requested at creation */
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
    ck_assert_int_eq(cuMemCreate(&shared, G, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CK(cuMemCreate(&shared, G, &prop, 0));
    CUdeviceptr p = map_rw(shared);
    ((char *)p)[100] = 'x'; /* written before the export: kept when the memory moves */
    ck_assert_int_eq(cuMemExportToShareableHandle(&fd, shared, CU_MEM_HANDLE_TYPE_FABRIC, 0),
                     CUDA_ERROR_NOT_SUPPORTED);
    CK(cuMemExportToShareableHandle(&fd, shared, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(((char *)p)[100], 'x');
    ck_assert_int_eq(in_child(fd_importer, (void *)(intptr_t)fd), 0);
    ck_assert_int_eq(((char *)p)[G - 1], 'y'); /* the child's write */
    /* imported here too: another handle on the same memory, not counted again */
    uint64_t used = sim_counters().device_bytes_in_use[0];
    CK(cuMemImportFromShareableHandle(&imported, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    ck_assert_uint_eq(sim_counters().device_bytes_in_use[0], used);
    CUmemAllocationProp got;
    CK(cuMemGetAllocationPropertiesFromHandle(&got, imported));
    ck_assert_int_eq(got.location.id, 0);
    CUdeviceptr q = map_rw(imported);
    ck_assert_int_eq(((char *)q)[100], 'x');
    CK(cuMemUnmap(p, G));
    CK(cuMemRelease(shared));
    ck_assert_uint_eq(sim_counters().device_bytes_in_use[0], used - G); /* the exporter's memory went */
    ck_assert_int_eq(((char *)q)[G - 1], 'y');                         /* the importer's stays */
    close(fd);
    int junk = open("/dev/null", O_RDONLY);
    ck_assert_int_eq(cuMemImportFromShareableHandle(&imported, (void *)(intptr_t)junk,
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                     CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* CUDALLOC_SIM_VMM=0: a device without virtual memory management. */
START_TEST(no_vmm)
{
    setenv("CUDALLOC_SIM_VMM", "0", 1);
    int attr = -1;
    size_t g;
    CUdeviceptr p;
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    sim_ctx();
    CK(cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    ck_assert_int_eq(attr, 0);
    ck_assert_int_eq(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                     CUDA_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(cuMemAddressReserve(&p, G, 0, 0, 0), CUDA_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(cuMemCreate(&h, G, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
    CK(cuMemAlloc_v2(&p, G)); /* linear memory as ever */
    CK(cuMemFree_v2(p));
}
END_TEST

static void bad_vmm_env(void *unused)
{
    ck_assert_int_eq(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

START_TEST(bad_vmm_value)
{
    setenv("CUDALLOC_SIM_VMM", "no", 1);
    ck_assert_ptr_nonnull(strstr(sim_stderr_of(bad_vmm_env, NULL), "CUDALLOC_SIM_VMM='no' is not 0, 1 or nofd"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("simgpu ipc");
    TCase *tc = tcase_create("ipc");
    tcase_add_test(tc, legacy_ipc);
    tcase_add_test(tc, shareable_handles);
    tcase_add_test(tc, no_vmm);
    tcase_add_test(tc, bad_vmm_value);
    suite_add_tcase(s, tc);
    return sim_run(s);
}
