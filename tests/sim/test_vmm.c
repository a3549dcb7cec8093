/* simgpu VMM: reservations, physical handles from one memfd, real mappings
 * (checked in /proc/self/maps and with mincore), errors, capacity, fork. */
#include <dirent.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "tests/sim/sim_test.h"

#define G (2 * MiB)

static const CUmemAllocationProp prop = {
    .type = CU_MEM_ALLOCATION_TYPE_PINNED,
    .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
};

static void grant(CUdeviceptr p, size_t size, CUmemAccess_flags flags)
{
    CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}, .flags = flags};
    CK(cuMemSetAccess(p, size, &d, 1));
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

START_TEST(granularity)
{
    size_t g = 0;
    CK(cuInit(0));
    CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    ck_assert_uint_eq(g, G);
    CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    ck_assert_uint_eq(g, G);
    CUmemAllocationProp bad = prop;
    bad.location.id = 4;
    ck_assert_int_eq(cuMemGetAllocationGranularity(&g, &bad, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                     CUDA_ERROR_INVALID_DEVICE);
    bad = prop;
    bad.type = CU_MEM_ALLOCATION_TYPE_INVALID;
    ck_assert_int_eq(cuMemGetAllocationGranularity(&g, &bad, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                     CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* VMM needs cuInit but, as in the real driver, no current context. */
START_TEST(map_unmap_really_maps)
{
    CUdeviceptr base;
    CUmemGenericAllocationHandle h1, h2;
    CK(cuInit(0));
    CK(cuMemAddressReserve(&base, 64 * MiB, 0, 0, 0));
    ck_assert_uint_eq(base % G, 0);
    ck_assert_ptr_nonnull(strstr(sim_maps_line((void *)base), " ---p "));
    CK(cuMemCreate(&h1, G, &prop, 0));
    CK(cuMemCreate(&h2, 2 * G, &prop, 0));
    ck_assert_uint_eq(sim_counters().bytes_in_use, 3 * G);
    CK(cuMemMap(base, G, 0, h1, 0));
    CK(cuMemMap(base + G, 2 * G, 0, h2, 0));
    /* Mapped from the memfd, but no access until cuMemSetAccess. */
    const char *line = sim_maps_line((void *)base);
    ck_assert_ptr_nonnull(strstr(line, " ---s "));
    ck_assert_ptr_nonnull(strstr(line, "simgpu-vmm"));
    grant(base, 3 * G, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    ck_assert_ptr_nonnull(strstr(sim_maps_line((void *)base), " rw-s "));
    ck_assert_ptr_nonnull(strstr(sim_maps_line((void *)(base + 2 * G)), " rw-s "));
    unsigned long long flags = 0;
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    CK(cuMemGetAccess(&flags, &loc, base + G));
    ck_assert_uint_eq(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

    /* Written pages are resident, the others are not: memory comes when touched. */
    strcpy((char *)base, "granule one");
    strcpy((char *)(base + G + 5), "granule two");
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *vec = malloc(3 * G / page);
    ck_assert_int_eq(mincore((void *)base, 3 * G, vec), 0);
    ck_assert_int_eq(vec[0] & 1, 1);
    ck_assert_int_eq(vec[1] & 1, 0);
    ck_assert_int_eq(vec[G / page] & 1, 1);
    free(vec);

    /* Unmapping keeps the reservation; the handle keeps its data and maps again elsewhere. */
    CK(cuMemUnmap(base, G));
    line = sim_maps_line((void *)base);
    ck_assert_ptr_nonnull(strstr(line, " ---p "));
    ck_assert_ptr_null(strstr(line, "simgpu-vmm"));
    CK(cuMemMap(base + 10 * G, G, 0, h1, 0));
    grant(base + 10 * G, G, CU_MEM_ACCESS_FLAGS_PROT_READ);
    ck_assert_ptr_nonnull(strstr(sim_maps_line((void *)(base + 10 * G)), " r--s "));
    ck_assert_str_eq((char *)(base + 10 * G), "granule one");
    ck_assert_str_eq((char *)(base + G + 5), "granule two");
    simgpu_counters_t c = sim_counters();
    ck_assert_uint_eq(c.mem_map, 3);
    ck_assert_uint_eq(c.mem_unmap, 1);
    ck_assert_uint_eq(c.mem_create, 2);
}
END_TEST

START_TEST(copies_into_mappings)
{
    CUdeviceptr base;
    CUmemGenericAllocationHandle h1, h2;
    char buf[64];
    sim_ctx();
    CK(cuMemAddressReserve(&base, 8 * MiB, 0, 0, 0));
    CK(cuMemCreate(&h1, G, &prop, 0));
    CK(cuMemCreate(&h2, G, &prop, 0));
    CK(cuMemMap(base, G, 0, h1, 0));
    CK(cuMemMap(base + G, G, 0, h2, 0));
    /* No access yet: a copy is refused, not a crash. */
    ck_assert_int_eq(cuMemcpyHtoD(base, "x", 1), CUDA_ERROR_INVALID_VALUE);
    grant(base, 2 * G, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    /* One copy across two mappings that are back to back. */
    CK(cuMemcpyHtoD(base + G - 3, "abcdef", 7));
    CK(cuMemcpyDtoH(buf, base + G - 3, 7));
    ck_assert_str_eq(buf, "abcdef");
    ck_assert_int_eq(cuMemcpyHtoD(base + 2 * G - 3, "abcdef", 7), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemcpyHtoD(base + 3 * G, "a", 1), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(vmm_errors)
{
    CUdeviceptr base, p;
    CUmemGenericAllocationHandle h, h4;
    CK(cuInit(0));
    CK(cuMemAddressReserve(&base, 16 * MiB, 0, 0, 0));
    ck_assert_int_eq(cuMemAddressReserve(&p, 16 * MiB, 3 * MiB, 0, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressReserve(&p, 100, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressReserve(&p, G, 0, 0, 1), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemCreate(&h, G + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemCreate(&h, 0, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemCreate(&h, G, &prop, 0));
    CK(cuMemCreate(&h4, 2 * G, &prop, 0));
    ck_assert_int_eq(cuMemMap(base + 4096, G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemMap(base, G / 2, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemMap(base, 2 * G, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* larger than h */
    ck_assert_int_eq(cuMemMap(base, G, G, h, 0), CUDA_ERROR_INVALID_VALUE);     /* past its end */
    ck_assert_int_eq(cuMemMap(base + 7 * G, 2 * G, 0, h4, 0), CUDA_ERROR_INVALID_VALUE); /* past the reservation */
    ck_assert_int_eq(cuMemMap(base, G, 0, 987654, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemMap(base, G, 0, h, 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemMap(base, G, 0, h, 0));
    ck_assert_int_eq(cuMemMap(base, G, 0, h4, 0), CUDA_ERROR_INVALID_VALUE); /* already mapped */
    CK(cuMemMap(base + G, G, G, h4, 0)); /* the second half of h4 */
    /* Unmap and access take whole mappings, nothing unmapped in between. */
    ck_assert_int_eq(cuMemUnmap(base, G / 2), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemUnmap(base, 3 * G), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemUnmap(base + 4 * G, G), CUDA_ERROR_INVALID_VALUE);
    CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                         .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    ck_assert_int_eq(cuMemSetAccess(base + 2 * G, G, &d, 1), CUDA_ERROR_INVALID_VALUE);
    d.location.id = 3;
    ck_assert_int_eq(cuMemSetAccess(base, G, &d, 1), CUDA_ERROR_INVALID_DEVICE);
    d.location.id = 0;
    d.flags = (CUmemAccess_flags)7;
    ck_assert_int_eq(cuMemSetAccess(base, G, &d, 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemUnmap(base, 2 * G)); /* two mappings in one call */
    CK(cuMemRelease(h));
    ck_assert_int_eq(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressFree(base, 8 * MiB), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressFree(base + G, 14 * MiB), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemAddressFree(base, 16 * MiB));
    ck_assert_int_eq(cuMemMap(base, G, 0, h4, 0), CUDA_ERROR_INVALID_VALUE); /* no reservation */
}
END_TEST

START_TEST(reserve_alignment_and_hint)
{
    CUdeviceptr p, q;
    CK(cuInit(0));
    CK(cuMemAddressReserve(&p, 4 * G, (size_t)1 << 30, 0, 0));
    ck_assert_uint_eq(p % ((size_t)1 << 30), 0);
    CK(cuMemAddressFree(p, 4 * G));
    /* The hint is taken when free. */
    CK(cuMemAddressReserve(&q, 4 * G, 0, p, 0));
    ck_assert_uint_eq(q, p);
    CUdeviceptr r;
    CK(cuMemAddressReserve(&r, 4 * G, 0, p, 0)); /* taken: somewhere else */
    ck_assert_uint_ne(r, p);
}
END_TEST

START_TEST(release_while_mapped)
{
    CUdeviceptr base;
    CUmemGenericAllocationHandle h, h2;
    CK(cuInit(0));
    CK(cuMemAddressReserve(&base, 4 * G, 0, 0, 0));
    CK(cuMemCreate(&h, G, &prop, 0));
    CK(cuMemMap(base, G, 0, h, 0));
    grant(base, G, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    memset((void *)base, 0x5a, G);
    CK(cuMemRelease(h));
    /* Still mapped: the memory lives and still counts. */
    ck_assert_int_eq(((unsigned char *)base)[G - 1], 0x5a);
    ck_assert_uint_eq(sim_counters().bytes_in_use, G);
    CK(cuMemUnmap(base, G));
    ck_assert_uint_eq(sim_counters().bytes_in_use, 0);
    /* The pages were punched out: the same memfd range comes back zeroed. */
    CK(cuMemCreate(&h2, G, &prop, 0));
    CK(cuMemMap(base, G, 0, h2, 0));
    grant(base, G, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    ck_assert_int_eq(((unsigned char *)base)[0], 0);
    ck_assert_int_eq(((unsigned char *)base)[G - 1], 0);
    /* Freeing the reservation takes the mapping with it. */
    CK(cuMemRelease(h2));
    CK(cuMemAddressFree(base, 4 * G));
    ck_assert_uint_eq(sim_counters().bytes_in_use, 0);
    ck_assert_str_eq(sim_maps_line((void *)base), "");
}
END_TEST

START_TEST(retain_allocation_handle)
{
    CUdeviceptr base;
    CUmemGenericAllocationHandle h, again;
    CUmemAllocationProp got;
    CK(cuInit(0));
    CK(cuMemAddressReserve(&base, 2 * G, 0, 0, 0));
    CK(cuMemCreate(&h, G, &prop, 0));
    CK(cuMemMap(base, G, 0, h, 0));
    CK(cuMemRetainAllocationHandle(&again, (void *)(base + 100)));
    ck_assert_uint_eq(again, h);
    CK(cuMemGetAllocationPropertiesFromHandle(&got, h));
    ck_assert_int_eq(got.location.id, 0);
    ck_assert_int_eq(got.type, CU_MEM_ALLOCATION_TYPE_PINNED);
    CK(cuMemRelease(h));
    CK(cuMemUnmap(base, G));
    ck_assert_uint_eq(sim_counters().bytes_in_use, G); /* the retained reference */
    CK(cuMemRelease(again));
    ck_assert_uint_eq(sim_counters().bytes_in_use, 0);
}
END_TEST

START_TEST(capacity_in_granules)
{
    CUmemGenericAllocationHandle h[5];
    setenv("CUDALLOC_SIM_MEMORY", "8MiB", 1);
    CK(cuInit(0));
    for (int i = 0; i < 4; i++)
        CK(cuMemCreate(&h[i], G, &prop, 0));
    ck_assert_int_eq(cuMemCreate(&h[4], G, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemRelease(h[2]));
    CK(cuMemCreate(&h[4], G, &prop, 0));
    ck_assert_uint_eq(sim_counters().out_of_memory, 1);
}
END_TEST

START_TEST(one_memfd_for_all_handles)
{
    CUmemGenericAllocationHandle h[100];
    CK(cuInit(0));
    int before = open_fds();
    for (int i = 0; i < 100; i++)
        CK(cuMemCreate(&h[i], G, &prop, 0));
    ck_assert_int_le(open_fds(), before + 1);
    for (int i = 0; i < 100; i += 2)
        CK(cuMemRelease(h[i]));
    for (int i = 0; i < 100; i += 2)
        CK(cuMemCreate(&h[i], G, &prop, 0)); /* reuses the holes */
    ck_assert_int_le(open_fds(), before + 1);
}
END_TEST

START_TEST(pointer_attributes_of_mappings)
{
    CUdeviceptr base, start = 0;
    CUmemGenericAllocationHandle h;
    CUcontext ctx = (CUcontext)1;
    int ordinal = -1;
    size_t size = 0;
    unsigned char mapped = 9;
    CK(cuInit(0));
    CK(cuMemAddressReserve(&base, 4 * G, 0, 0, 0));
    CK(cuMemCreate(&h, G, &prop, 0));
    CK(cuMemMap(base + G, G, 0, h, 0));
    CK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, base + G + 10));
    ck_assert_int_eq(ordinal, 0);
    CK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, base + G));
    ck_assert_ptr_null(ctx);
    CK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, base + G));
    CK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, base + G));
    ck_assert_uint_eq(start, base);
    ck_assert_uint_eq(size, 4 * G);
    CK(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, base + G));
    ck_assert_int_eq(mapped, 1);
    CK(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, base));
    ck_assert_int_eq(mapped, 0);
    ck_assert_int_eq(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, base),
                     CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* What a library sees of VMM memory: the mapping is the allocation
 * (cuMemGetAddressRange, MAPPING_*, BUFFER_ID), not legacy-IPC capable, with
 * the handle types asked for and the access granted; a new mapping at the
 * same address is a new buffer. */
START_TEST(vmm_memory_to_pointer_queries)
{
    CUdeviceptr base, start = 0, mbase = 0;
    CUmemGenericAllocationHandle h;
    size_t size = 0, msize = 0;
    unsigned long long id1 = 0, id2 = 0, types = 9;
    unsigned char legacy = 9;
    unsigned access = 9;
    sim_ctx();
    CK(cuMemAddressReserve(&base, 4 * G, 0, 0, 0));
    CK(cuMemCreate(&h, 2 * G, &prop, 0));
    CK(cuMemMap(base + G, 2 * G, 0, h, 0));
    CK(cuMemGetAddressRange(&start, &size, base + 2 * G + 10));
    ck_assert_uint_eq(start, base + G);
    ck_assert_uint_eq(size, 2 * G);
    ck_assert_int_eq(cuMemGetAddressRange(&start, &size, base), CUDA_ERROR_NOT_FOUND);
    CK(cuPointerGetAttribute(&mbase, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, base + 2 * G));
    CK(cuPointerGetAttribute(&msize, CU_POINTER_ATTRIBUTE_MAPPING_SIZE, base + 2 * G));
    ck_assert_uint_eq(mbase, base + G);
    ck_assert_uint_eq(msize, 2 * G);
    CK(cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, base + G));
    ck_assert_int_eq(legacy, 0);
    CK(cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, base + G));
    ck_assert_uint_eq(types, CU_MEM_HANDLE_TYPE_NONE);
    CK(cuPointerGetAttribute(&access, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, base + G));
    ck_assert_uint_eq(access, CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE);
    grant(base + G, 2 * G, CU_MEM_ACCESS_FLAGS_PROT_READ);
    CK(cuPointerGetAttribute(&access, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, base + G));
    ck_assert_uint_eq(access, CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ);
    CK(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, base + G));
    CK(cuMemUnmap(base + G, 2 * G));
    CK(cuMemMap(base + G, 2 * G, 0, h, 0));
    CK(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, base + G));
    ck_assert_uint_ne(id1, id2);
    CK(cuMemUnmap(base + G, 2 * G));
    CK(cuMemRelease(h));
    CK(cuMemAddressFree(base, 4 * G));
}
END_TEST

/* The child gets memory of its own: what it creates, writes and releases
 * never reaches the parent's granules. */
START_TEST(fork_child_has_its_own_memory)
{
    CUdeviceptr base;
    CUmemGenericAllocationHandle h;
    CK(cuInit(0));
    CK(cuMemAddressReserve(&base, 8 * G, 0, 0, 0));
    CK(cuMemCreate(&h, G, &prop, 0));
    CK(cuMemMap(base, G, 0, h, 0));
    grant(base, G, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    strcpy((char *)base, "parent");
    pid_t pid = fork();
    if (pid == 0) {
        CUmemGenericAllocationHandle mine;
        int ok = strcmp((char *)base, "parent") == 0;
        ok = ok && cuMemCreate(&mine, G, &prop, 0) == CUDA_SUCCESS;
        ok = ok && cuMemMap(base + G, G, 0, mine, 0) == CUDA_SUCCESS;
        CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                             .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        ok = ok && cuMemSetAccess(base + G, G, &d, 1) == CUDA_SUCCESS;
        memset((void *)(base + G), 0x77, G);
        ok = ok && strcmp((char *)base, "parent") == 0;
        strcpy((char *)base, "child");
        ok = ok && cuMemUnmap(base, G) == CUDA_SUCCESS && cuMemRelease(h) == CUDA_SUCCESS;
        _exit(ok ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_str_eq((char *)base, "parent");
    CUmemGenericAllocationHandle next;
    CK(cuMemCreate(&next, G, &prop, 0));
    CK(cuMemMap(base + G, G, 0, next, 0));
    grant(base + G, G, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    ck_assert_int_eq(((unsigned char *)(base + G))[0], 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("simgpu vmm");
    TCase *tc = tcase_create("vmm");
    tcase_add_test(tc, granularity);
    tcase_add_test(tc, map_unmap_really_maps);
    tcase_add_test(tc, copies_into_mappings);
    tcase_add_test(tc, vmm_errors);
    tcase_add_test(tc, reserve_alignment_and_hint);
    tcase_add_test(tc, release_while_mapped);
    tcase_add_test(tc, retain_allocation_handle);
    tcase_add_test(tc, capacity_in_granules);
    tcase_add_test(tc, one_memfd_for_all_handles);
    tcase_add_test(tc, pointer_attributes_of_mappings);
    tcase_add_test(tc, vmm_memory_to_pointer_queries);
    tcase_add_test(tc, fork_child_has_its_own_memory);
    suite_add_tcase(s, tc);
    return sim_run(s);
}
