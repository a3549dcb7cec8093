/* simgpu's injected errors (CUDALLOC_SIM_FAIL), sticky errors, an older
 * driver (CUDALLOC_SIM_DRIVER_VERSION) and cuCtxRecordEvent. */
#include "tests/sim/sim_test.h"

static CUevent event(void)
{
    CUevent e;
    CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    return e;
}

START_TEST(an_injected_error_after_and_times)
{
    setenv("CUDALLOC_SIM_FAIL", "cuEventQuery:CUDA_ERROR_INVALID_HANDLE:1:2", 1);
    sim_ctx();
    CUevent e = event();
    CK(cuEventQuery(e));
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
    CK(cuEventQuery(e));
    CK(cuEventRecord(e, NULL)); /* other calls untouched */
    ck_assert_uint_eq(sim_counters().injected, 2);
}
END_TEST

START_TEST(errors_by_number_and_forever)
{
    setenv("CUDALLOC_SIM_FAIL", "cuCtxSynchronize:999,cuMemUnmap:CUDA_ERROR_INVALID_VALUE", 1);
    sim_ctx();
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(cuCtxSynchronize(), CUDA_ERROR_UNKNOWN);
    ck_assert_int_eq(cuMemUnmap(0x200000, 0x200000), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(a_sticky_error_answers_every_later_call)
{
    setenv("CUDALLOC_SIM_FAIL", "cuEventQuery:CUDA_ERROR_ILLEGAL_ADDRESS", 1);
    sim_ctx();
    CUevent e = event();
    CUdeviceptr p;
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_ILLEGAL_ADDRESS);
    ck_assert_int_eq(cuMemAlloc(&p, 512), CUDA_ERROR_ILLEGAL_ADDRESS);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    ck_assert_int_eq(cuEventRecord(e, NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
    CUcontext c;
    ck_assert_int_eq(cuCtxGetCurrent(&c), CUDA_ERROR_ILLEGAL_ADDRESS);
}
END_TEST

static void init_only(void *unused)
{
    ck_assert_int_eq(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

START_TEST(a_bad_rule_says_what_is_wrong)
{
    const char *bad[] = {"cuEventQuery", "cuLaunchKernel:1", "cuEventQuery:CUDA_ERROR_NOPE", "cuEventQuery:1:x",
                         "cuEventQuery:0"};
    { /* one process per rule (the loop test): the environment is read once */
        int i = _i;
        setenv("CUDALLOC_SIM_FAIL", bad[i], 1);
        const char *err = sim_stderr_of(init_only, NULL);
        ck_assert_msg(strstr(err, "simgpu: CUDALLOC_SIM_FAIL=") && strstr(err, "NAME:ERROR[:AFTER[:TIMES]]"),
                      "%s: %s", bad[i], err);
        const char *nl = strchr(err, '\n');
        ck_assert_msg(nl && nl[1] == 0, "one line: %s", err);
    }
}
END_TEST

START_TEST(ctx_record_event_covers_every_stream)
{
    CUcontext ctx = sim_ctx();
    CUstream nb, b;
    CK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&b, CU_STREAM_DEFAULT));
    CUevent e = event();
    CK(cuCtxRecordEvent(ctx, e));
    CK(cuEventQuery(e));
    ck_assert_int_eq(simgpu_stream_hold(nb, 1), 0); /* a non-blocking stream's work, too */
    CK(cuCtxRecordEvent(ctx, e));
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    CK(cuStreamSynchronize(NULL)); /* the legacy stream does not cover it */
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    ck_assert_int_eq(simgpu_stream_hold(nb, 0), 0);
    CK(cuEventQuery(e));
    ck_assert_int_eq(simgpu_stream_hold(b, 1), 0);
    CK(cuCtxRecordEvent(ctx, e));
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    CK(cuCtxSynchronize()); /* the context's does */
    CK(cuEventQuery(e));
    ck_assert_int_eq(simgpu_stream_hold(b, 0), 0);
    simgpu_counters_t c = sim_counters();
    ck_assert_uint_eq(c.ctx_records, 3);
    ck_assert_uint_eq(c.event_records, 0);
    ck_assert_int_eq(cuCtxRecordEvent(NULL, e), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuCtxRecordEvent(ctx, (CUevent)&c), CUDA_ERROR_INVALID_HANDLE);
}
END_TEST

START_TEST(ctx_record_event_refused_while_capturing)
{
    CUcontext ctx = sim_ctx();
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUevent e = event();
    CUgraph g;
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    ck_assert_int_eq(cuCtxRecordEvent(ctx, e), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuCtxRecordEvent(ctx, e));
}
END_TEST

START_TEST(an_older_driver_has_no_ctx_record_event)
{
    setenv("CUDALLOC_SIM_DRIVER_VERSION", "12040", 1);
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    ck_assert_int_eq(cuGetProcAddress_v2("cuCtxRecordEvent", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CK(cuGetProcAddress_v2("cuEventRecord", &fn, 13000, 0, &st));
    int v;
    CK(cuDriverGetVersion(&v));
    ck_assert_int_eq(v, 12040);
    unsetenv("CUDALLOC_SIM_DRIVER_VERSION");
}
END_TEST

START_TEST(the_current_driver_has_it)
{
    void *fn = NULL;
    CK(cuGetProcAddress_v2("cuCtxRecordEvent", &fn, 12050, 0, NULL));
    ck_assert_ptr_eq(fn, (void *)cuCtxRecordEvent);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sim_faults");
    TCase *tc = tcase_create("faults");
    tcase_add_test(tc, an_injected_error_after_and_times);
    tcase_add_test(tc, errors_by_number_and_forever);
    tcase_add_test(tc, a_sticky_error_answers_every_later_call);
    tcase_add_loop_test(tc, a_bad_rule_says_what_is_wrong, 0, 5);
    tcase_add_test(tc, ctx_record_event_covers_every_stream);
    tcase_add_test(tc, ctx_record_event_refused_while_capturing);
    tcase_add_test(tc, an_older_driver_has_no_ctx_record_event);
    tcase_add_test(tc, the_current_driver_has_it);
    suite_add_tcase(s, tc);
    return sim_run(s);
}
