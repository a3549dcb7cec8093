/* simgpu cuGetProcAddress: base names resolve to the versioned and per-thread
 * entry points the library exports, by CUDA version and flags, each handed out
 * as a thunk of its own (simgpu_proc_target says where it goes). */
#include <dlfcn.h>

#include "tests/sim/sim_test.h"

#define LEGACY CU_GET_PROC_ADDRESS_LEGACY_STREAM
#define PTDS CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

/* What each base name must give at CUDA 13.0: the exported symbol, with
 * default flags and with the per-thread flag. */
static const struct {
    const char *name, *legacy, *per_thread;
} expected[] = {
    {"cuInit", "cuInit", "cuInit"},
    {"cuDriverGetVersion", "cuDriverGetVersion", "cuDriverGetVersion"},
    {"cuGetErrorString", "cuGetErrorString", "cuGetErrorString"},
    {"cuGetErrorName", "cuGetErrorName", "cuGetErrorName"},
    {"cuGetProcAddress", "cuGetProcAddress_v2", "cuGetProcAddress_v2"},
    {"cuDeviceGet", "cuDeviceGet", "cuDeviceGet"},
    {"cuDeviceGetCount", "cuDeviceGetCount", "cuDeviceGetCount"},
    {"cuDeviceGetName", "cuDeviceGetName", "cuDeviceGetName"},
    {"cuDeviceTotalMem", "cuDeviceTotalMem_v2", "cuDeviceTotalMem_v2"},
    {"cuDeviceGetAttribute", "cuDeviceGetAttribute", "cuDeviceGetAttribute"},
    {"cuDeviceGetUuid", "cuDeviceGetUuid_v2", "cuDeviceGetUuid_v2"},
    {"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain"},
    {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease_v2"},
    {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2", "cuDevicePrimaryCtxReset_v2"},
    {"cuDevicePrimaryCtxGetState", "cuDevicePrimaryCtxGetState", "cuDevicePrimaryCtxGetState"},
    {"cuDevicePrimaryCtxSetFlags", "cuDevicePrimaryCtxSetFlags_v2", "cuDevicePrimaryCtxSetFlags_v2"},
    {"cuCtxGetCurrent", "cuCtxGetCurrent", "cuCtxGetCurrent"},
    {"cuCtxSetCurrent", "cuCtxSetCurrent", "cuCtxSetCurrent"},
    {"cuCtxPushCurrent", "cuCtxPushCurrent_v2", "cuCtxPushCurrent_v2"},
    {"cuCtxPopCurrent", "cuCtxPopCurrent_v2", "cuCtxPopCurrent_v2"},
    {"cuCtxGetDevice", "cuCtxGetDevice_v2", "cuCtxGetDevice_v2"},
    {"cuCtxSynchronize", "cuCtxSynchronize_v2", "cuCtxSynchronize_v2"},
    {"cuMemAlloc", "cuMemAlloc_v2", "cuMemAlloc_v2"},
    {"cuMemFree", "cuMemFree_v2", "cuMemFree_v2"},
    {"cuMemGetInfo", "cuMemGetInfo_v2", "cuMemGetInfo_v2"},
    {"cuMemAllocHost", "cuMemAllocHost_v2", "cuMemAllocHost_v2"},
    {"cuMemHostAlloc", "cuMemHostAlloc", "cuMemHostAlloc"},
    {"cuMemFreeHost", "cuMemFreeHost", "cuMemFreeHost"},
    {"cuMemGetAddressRange", "cuMemGetAddressRange_v2", "cuMemGetAddressRange_v2"},
    {"cuMemAllocAsync", "cuMemAllocAsync", "cuMemAllocAsync_ptsz"},
    {"cuMemFreeAsync", "cuMemFreeAsync", "cuMemFreeAsync_ptsz"},
    {"cuPointerGetAttribute", "cuPointerGetAttribute", "cuPointerGetAttribute"},
    {"cuPointerGetAttributes", "cuPointerGetAttributes", "cuPointerGetAttributes"},
    {"cuMemcpy", "cuMemcpy", "cuMemcpy_ptds"},
    {"cuMemcpyAsync", "cuMemcpyAsync", "cuMemcpyAsync_ptsz"},
    {"cuMemcpyHtoD", "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds"},
    {"cuMemcpyDtoH", "cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds"},
    {"cuMemcpyDtoD", "cuMemcpyDtoD_v2", "cuMemcpyDtoD_v2_ptds"},
    {"cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz"},
    {"cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync_v2_ptsz"},
    {"cuMemcpyDtoDAsync", "cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync_v2_ptsz"},
    {"cuMemsetD8", "cuMemsetD8_v2", "cuMemsetD8_v2_ptds"},
    {"cuMemsetD16", "cuMemsetD16_v2", "cuMemsetD16_v2_ptds"},
    {"cuMemsetD32", "cuMemsetD32_v2", "cuMemsetD32_v2_ptds"},
    {"cuMemsetD8Async", "cuMemsetD8Async", "cuMemsetD8Async_ptsz"},
    {"cuMemsetD16Async", "cuMemsetD16Async", "cuMemsetD16Async_ptsz"},
    {"cuMemsetD32Async", "cuMemsetD32Async", "cuMemsetD32Async_ptsz"},
    {"cuMemAddressReserve", "cuMemAddressReserve", "cuMemAddressReserve"},
    {"cuMemAddressFree", "cuMemAddressFree", "cuMemAddressFree"},
    {"cuMemCreate", "cuMemCreate", "cuMemCreate"},
    {"cuMemRelease", "cuMemRelease", "cuMemRelease"},
    {"cuMemMap", "cuMemMap", "cuMemMap"},
    {"cuMemUnmap", "cuMemUnmap", "cuMemUnmap"},
    {"cuMemSetAccess", "cuMemSetAccess", "cuMemSetAccess"},
    {"cuMemGetAccess", "cuMemGetAccess", "cuMemGetAccess"},
    {"cuMemGetAllocationGranularity", "cuMemGetAllocationGranularity", "cuMemGetAllocationGranularity"},
    {"cuMemGetAllocationPropertiesFromHandle", "cuMemGetAllocationPropertiesFromHandle",
     "cuMemGetAllocationPropertiesFromHandle"},
    {"cuMemRetainAllocationHandle", "cuMemRetainAllocationHandle", "cuMemRetainAllocationHandle"},
    {"cuStreamCreate", "cuStreamCreate", "cuStreamCreate"},
    {"cuStreamCreateWithPriority", "cuStreamCreateWithPriority", "cuStreamCreateWithPriority"},
    {"cuStreamDestroy", "cuStreamDestroy_v2", "cuStreamDestroy_v2"},
    {"cuStreamSynchronize", "cuStreamSynchronize", "cuStreamSynchronize_ptsz"},
    {"cuStreamQuery", "cuStreamQuery", "cuStreamQuery_ptsz"},
    {"cuStreamWaitEvent", "cuStreamWaitEvent", "cuStreamWaitEvent_ptsz"},
    {"cuEventCreate", "cuEventCreate", "cuEventCreate"},
    {"cuEventRecord", "cuEventRecord", "cuEventRecord_ptsz"},
    {"cuEventQuery", "cuEventQuery", "cuEventQuery"},
    {"cuEventSynchronize", "cuEventSynchronize", "cuEventSynchronize"},
    {"cuEventDestroy", "cuEventDestroy_v2", "cuEventDestroy_v2"},
    {"cuEventElapsedTime", "cuEventElapsedTime_v2", "cuEventElapsedTime_v2"},
};

/* Every answer goes to an exported symbol, so an interposer can find the
 * same by name; on x86-64 it is not that symbol's address (a thunk). */
START_TEST(every_name_resolves_to_its_export)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    ck_assert_ptr_nonnull(lib);
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        void *fn = NULL, *pt = NULL;
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CK(cuGetProcAddress(expected[i].name, &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
        ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
        ck_assert_msg(simgpu_proc_target(fn) == dlsym(lib, expected[i].legacy), "%s -> %s", expected[i].name,
                      expected[i].legacy);
#if defined(__x86_64__)
        ck_assert_msg(fn != dlsym(lib, expected[i].legacy), "%s: a thunk, not the export", expected[i].name);
#endif
        CK(cuGetProcAddress(expected[i].name, &pt, 13000, PTDS, &st));
        ck_assert_msg(simgpu_proc_target(pt) == dlsym(lib, expected[i].per_thread), "%s -> %s", expected[i].name,
                      expected[i].per_thread);
        CK(cuGetProcAddress(expected[i].name, &fn, 13000, LEGACY, NULL));
        ck_assert_ptr_eq(simgpu_proc_target(fn), dlsym(lib, expected[i].legacy));
    }
}
END_TEST

START_TEST(v2_for_cuda_12_and_null_status)
{
    void *fn = NULL;
    /* Asked before cuInit, as cudart does to get cuInit itself. */
    CK(cuGetProcAddress("cuMemAlloc", &fn, 12000, 0, NULL));
    ck_assert_ptr_eq(simgpu_proc_target(fn), (void *)cuMemAlloc_v2);
    CK(cuGetProcAddress("cuInit", &fn, 12000, 0, NULL));
    ck_assert_ptr_eq(simgpu_proc_target(fn), (void *)cuInit);
    CK(((CUresult(*)(unsigned))fn)(0));
}
END_TEST

START_TEST(newest_variant_not_newer_than_asked)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    CK(cuGetProcAddress("cuCtxGetDevice", &fn, 12080, 0, &st));
    ck_assert_ptr_eq(simgpu_proc_target(fn), (void *)cuCtxGetDevice);
    CK(cuGetProcAddress("cuCtxGetDevice", &fn, 13000, 0, &st));
    ck_assert_ptr_eq(simgpu_proc_target(fn), (void *)cuCtxGetDevice_v2);
    CK(cuGetProcAddress("cuGetProcAddress", &fn, 11080, 0, &st));
    ck_assert_ptr_eq(simgpu_proc_target(fn), dlsym(RTLD_DEFAULT, "cuGetProcAddress"));
    CK(cuGetProcAddress("cuEventElapsedTime", &fn, 12000, 0, &st));
    ck_assert_ptr_eq(simgpu_proc_target(fn), dlsym(RTLD_DEFAULT, "cuEventElapsedTime"));
    /* The CUDA 7.0 primary-context entries before 11.0, not their _v2 */
    CK(cuGetProcAddress("cuDevicePrimaryCtxReset", &fn, 10020, 0, &st));
    ck_assert_ptr_eq(simgpu_proc_target(fn), dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxReset"));
    ck_assert_ptr_ne(simgpu_proc_target(fn), dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxReset_v2"));
    CK(cuGetProcAddress("cuDevicePrimaryCtxRelease", &fn, 10020, 0, &st));
    ck_assert_ptr_eq(simgpu_proc_target(fn), dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxRelease"));
    /* Per-thread variants came with CUDA 7.0: before that, the legacy one. */
    CK(cuGetProcAddress("cuMemcpyHtoD", &fn, 6050, PTDS, &st));
    ck_assert_ptr_eq(simgpu_proc_target(fn), (void *)cuMemcpyHtoD_v2);
}
END_TEST

START_TEST(unknown_symbol)
{
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    ck_assert_int_eq(cuGetProcAddress("cuNoSuchFunction", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    ck_assert_ptr_null(fn);
    fn = (void *)1;
    ck_assert_int_eq(cuGetProcAddress("cuMemAlloc_v2", &fn, 13000, 0, NULL), CUDA_ERROR_NOT_FOUND);
    ck_assert_ptr_null(fn);
}
END_TEST

START_TEST(version_not_sufficient)
{
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    ck_assert_int_eq(cuGetProcAddress("cuMemCreate", &fn, 10010, 0, &st), CUDA_ERROR_NOT_FOUND);
    ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    ck_assert_ptr_null(fn);
}
END_TEST

START_TEST(bad_arguments)
{
    void *fn;
    ck_assert_int_eq(cuGetProcAddress("cuInit", NULL, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuGetProcAddress(NULL, &fn, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuGetProcAddress("cuInit", &fn, 13000, 4, NULL), CUDA_ERROR_INVALID_VALUE);
    /* Newer than the driver. */
    ck_assert_int_eq(cuGetProcAddress("cuInit", &fn, 99000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(lookups_are_counted)
{
    void *fn;
    uint64_t before = sim_counters().proc_lookups;
    CK(cuGetProcAddress("cuInit", &fn, 13000, 0, NULL));
    ck_assert_int_eq(cuGetProcAddress("nothing", &fn, 13000, 0, NULL), CUDA_ERROR_NOT_FOUND);
    ck_assert_uint_eq(sim_counters().proc_lookups, before + 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("simgpu cuGetProcAddress");
    TCase *tc = tcase_create("proc");
    tcase_add_test(tc, every_name_resolves_to_its_export);
    tcase_add_test(tc, v2_for_cuda_12_and_null_status);
    tcase_add_test(tc, newest_variant_not_newer_than_asked);
    tcase_add_test(tc, unknown_symbol);
    tcase_add_test(tc, version_not_sufficient);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, lookups_are_counted);
    suite_add_tcase(s, tc);
    return sim_run(s);
}
