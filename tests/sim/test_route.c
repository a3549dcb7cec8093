/* The runtime reaches the driver only as the real libcudart does: dlopen
 * "libcuda.so.1", dlsym "cuGetProcAddress_v2", ask it for "cuGetProcAddress",
 * every other entry point through that, by base name at the version of the
 * variant wanted, flags 0 (and the per-thread flag for stream-taking ones) --
 * what libcudart 13.0 was seen to ask of a driver. Here libcuda.so.1 is the
 * route spy, which exports nothing else; the calls still land in the simulated
 * driver, through the pointers the spy handed out. */
#include <cuda_runtime_api.h>

#include "tests/sim/route_spy.h"
#include "tests/sim/sim_test.h"

static int asked(const char *symbol, int version, cuuint64_t flags)
{
    const struct spy_log *log = spy_log();
    for (int i = 0; i < log->n; i++)
        if (strcmp(log->lookups[i].symbol, symbol) == 0 && log->lookups[i].version == version &&
            log->lookups[i].flags == flags)
            return 1;
    return 0;
}

START_TEST(runtime_goes_through_cuGetProcAddress)
{
    void *p, *q;
    size_t free, total;
    ck_assert_int_eq(spy_log()->n, 0); /* nothing before the first runtime call */
    ck_assert_int_eq(cudaMalloc(&p, MiB), cudaSuccess);
    ck_assert_str_eq(spy_log()->lookups[0].symbol, "cuGetProcAddress");
    ck_assert_int_eq(spy_log()->lookups[0].version, 12000);
    /* Names without the _v2 suffix, at the version of the variant wanted. */
    static const struct {
        const char *symbol;
        int version;
    } wanted[] = {
        {"cuInit", 2000}, {"cuMemAlloc", 3020}, {"cuMemFree", 3020}, {"cuMemGetInfo", 3020},
        {"cuDevicePrimaryCtxRetain", 7000}, {"cuCtxSetCurrent", 4000}, {"cuCtxGetCurrent", 4000},
        {"cuCtxGetDevice", 13000}, {"cuMemAllocAsync", 11020},
    };
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++)
        ck_assert_msg(asked(wanted[i].symbol, wanted[i].version, 0), "runtime never asked for %s at %d",
                      wanted[i].symbol, wanted[i].version);
    /* Stream-taking entry points once more for the per-thread default stream. */
    ck_assert(asked("cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
    ck_assert(asked("cuStreamSynchronize", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
    ck_assert(!asked("cuMemAlloc_v2", 3020, 0));

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
