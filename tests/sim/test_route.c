/* The runtime reaches the driver only as the real libcudart does: dlopen
 * "libcuda.so.1", dlsym "cuGetProcAddress_v2", every entry point through it.
 * Here libcuda.so.1 is the route spy, which exports nothing else; the calls
 * still land in the simulated driver, through the pointers the spy handed out. */
#include <cuda_runtime_api.h>

#include "tests/sim/route_spy.h"
#include "tests/sim/sim_test.h"

static const struct spy_lookup *find(const char *symbol, cuuint64_t flags)
{
    const struct spy_log *log = spy_log();
    for (int i = 0; i < log->n; i++)
        if (strcmp(log->lookups[i].symbol, symbol) == 0 && log->lookups[i].flags == flags)
            return &log->lookups[i];
    return NULL;
}

START_TEST(runtime_goes_through_cuGetProcAddress)
{
    void *p, *q;
    size_t free, total;
    ck_assert_int_eq(spy_log()->n, 0); /* nothing before the first runtime call */
    ck_assert_int_eq(cudaMalloc(&p, MiB), cudaSuccess);
    /* Names without the _v2 suffix, with the runtime's CUDA version. */
    const char *wanted[] = {"cuInit", "cuMemAlloc", "cuMemFree", "cuMemGetInfo",
                            "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuCtxGetCurrent"};
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        const struct spy_lookup *l = find(wanted[i], CU_GET_PROC_ADDRESS_DEFAULT);
        ck_assert_msg(l != NULL, "runtime never asked for %s", wanted[i]);
        ck_assert_int_eq(l->version, 13000);
    }
    /* Stream-taking entry points in both flavours. */
    ck_assert_ptr_nonnull(find("cuMemAllocAsync", CU_GET_PROC_ADDRESS_LEGACY_STREAM));
    ck_assert_ptr_nonnull(find("cuMemAllocAsync", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
    ck_assert_ptr_null(find("cuMemAlloc_v2", CU_GET_PROC_ADDRESS_DEFAULT));

    ck_assert_int_eq(spy_log()->mem_alloc, 1);
    ck_assert_int_eq(cudaFree(p), cudaSuccess);
    ck_assert_int_eq(spy_log()->mem_free, 1);
    ck_assert_int_eq(cudaMallocAsync(&q, MiB, NULL), cudaSuccess);
    ck_assert_int_eq(spy_log()->mem_alloc_async, 1);
    ck_assert_int_eq(cudaMemGetInfo(&free, &total), cudaSuccess);
    ck_assert_int_eq(spy_log()->mem_get_info, 1);
    ck_assert_uint_eq(total - free, MiB);
    /* Everything was fetched once, at initialization. */
    int lookups = spy_log()->n;
    ck_assert_int_eq(cudaFreeAsync(q, NULL), cudaSuccess);
    ck_assert_int_eq(spy_log()->n, lookups);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("simgpu runtime route");
    TCase *tc = tcase_create("route");
    tcase_add_test(tc, runtime_goes_through_cuGetProcAddress);
    suite_add_tcase(s, tc);
    return sim_run(s);
}
