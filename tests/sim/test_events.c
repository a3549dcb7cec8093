/* simgpu streams and events: late events (CUDALLOC_SIM_LATE_EVENTS), held
 * streams (simgpu_stream_hold) and what completes them, stream waits as the counters show them, elapsed time,
 * invalid handles, the per-thread default stream. */
#include <dlfcn.h>
#include <time.h>

#include "tests/sim/sim_test.h"

static CUevent event(void)
{
    CUevent e;
    CK(cuEventCreate(&e, CU_EVENT_DEFAULT));
    return e;
}

START_TEST(events_complete_at_once_by_default)
{
    sim_ctx();
    CUevent e = event();
    CK(cuEventQuery(e)); /* never recorded: complete */
    CK(cuEventRecord(e, NULL));
    CK(cuEventQuery(e));
    simgpu_counters_t c = sim_counters();
    ck_assert_uint_eq(c.event_records, 1);
    ck_assert_uint_eq(c.not_ready, 0);
}
END_TEST

START_TEST(late_events_answer_not_ready_n_times)
{
    setenv("CUDALLOC_SIM_LATE_EVENTS", "2", 1);
    sim_ctx();
    CUevent e = event();
    CK(cuEventRecord(e, NULL));
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    CK(cuEventQuery(e));
    CK(cuEventQuery(e));
    ck_assert_uint_eq(sim_counters().not_ready, 2);
    /* Recording again makes it late again. */
    CK(cuEventRecord(e, NULL));
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    ck_assert_uint_eq(sim_counters().event_records, 2);
}
END_TEST

START_TEST(event_synchronize_completes)
{
    setenv("CUDALLOC_SIM_LATE_EVENTS", "100", 1);
    sim_ctx();
    CUevent e = event();
    CK(cuEventRecord(e, NULL));
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    CK(cuEventSynchronize(e));
    CK(cuEventQuery(e));
    ck_assert_uint_eq(sim_counters().event_syncs, 1);
}
END_TEST

START_TEST(stream_synchronize_completes_its_events)
{
    CUstream a, b, nb;
    setenv("CUDALLOC_SIM_LATE_EVENTS", "100", 1);
    sim_ctx();
    CK(cuStreamCreate(&a, CU_STREAM_DEFAULT));
    CK(cuStreamCreate(&b, CU_STREAM_DEFAULT));
    CK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    CUevent ea = event(), eb = event(), enb = event(), e0 = event();
    CK(cuEventRecord(ea, a));
    CK(cuEventRecord(eb, b));
    CK(cuEventRecord(enb, nb));
    CK(cuEventRecord(e0, NULL));
    CK(cuStreamSynchronize(a));
    CK(cuEventQuery(ea));
    ck_assert_int_eq(cuEventQuery(eb), CUDA_ERROR_NOT_READY);
    /* The legacy stream waits for blocking streams, not for non-blocking ones. */
    CK(cuStreamSynchronize(NULL));
    CK(cuEventQuery(e0));
    CK(cuEventQuery(eb));
    ck_assert_int_eq(cuEventQuery(enb), CUDA_ERROR_NOT_READY);
    CK(cuStreamSynchronize(nb));
    CK(cuEventQuery(enb));
    ck_assert_uint_eq(sim_counters().stream_syncs, 3);
}
END_TEST

START_TEST(context_synchronize_completes_everything)
{
    CUstream s;
    setenv("CUDALLOC_SIM_LATE_EVENTS", "100", 1);
    sim_ctx();
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUevent a = event(), b = event();
    CK(cuEventRecord(a, s));
    CK(cuEventRecord(b, NULL));
    CK(cuCtxSynchronize());
    CK(cuEventQuery(a));
    CK(cuEventQuery(b));
    ck_assert_uint_eq(sim_counters().ctx_syncs, 1);
}
END_TEST

START_TEST(stream_query_while_late)
{
    CUstream s;
    setenv("CUDALLOC_SIM_LATE_EVENTS", "2", 1);
    sim_ctx();
    CK(cuStreamCreate(&s, 0));
    CK(cuStreamQuery(s));
    CUevent e = event();
    CK(cuEventRecord(e, s));
    /* A stream query counts as a query of each late event on it. */
    ck_assert_int_eq(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    CK(cuStreamQuery(s));
    CK(cuEventQuery(e));
}
END_TEST

START_TEST(stream_waits_are_recorded)
{
    CUstream a, b;
    void *last = (void *)1;
    sim_ctx();
    CK(cuStreamCreate(&a, 0));
    CK(cuStreamCreate(&b, 0));
    CUevent e1 = event(), e2 = event();
    CK(cuEventRecord(e1, b));
    ck_assert_int_eq(simgpu_stream_last_wait(a, &last), 0);
    ck_assert_ptr_null(last);
    CK(cuStreamWaitEvent(a, e1, 0));
    CK(cuStreamWaitEvent(a, e2, 0));
    CK(cuStreamWaitEvent(NULL, e1, 0));
    ck_assert_int_eq(simgpu_stream_last_wait(a, &last), 0);
    ck_assert_ptr_eq(last, e2);
    ck_assert_int_eq(simgpu_stream_last_wait(NULL, &last), 0);
    ck_assert_ptr_eq(last, e1);
    ck_assert_int_eq(simgpu_stream_last_wait(b, &last), 0);
    ck_assert_ptr_null(last);
    ck_assert_int_eq(simgpu_stream_last_wait((void *)&last, &last), -1);
    simgpu_counters_t c = sim_counters();
    ck_assert_uint_eq(c.stream_waits, 3);
    ck_assert_int_eq(c.wait_count, 2);
    int seen_a = 0, seen_legacy = 0;
    for (int i = 0; i < c.wait_count; i++) {
        seen_a += c.last_wait[i].stream == (void *)a && c.last_wait[i].event == (void *)e2;
        seen_legacy += c.last_wait[i].stream == NULL && c.last_wait[i].event == (void *)e1;
    }
    ck_assert_int_eq(seen_a, 1);
    ck_assert_int_eq(seen_legacy, 1);
    ck_assert_int_eq(cuStreamWaitEvent(a, (CUevent)&last, 0), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuStreamWaitEvent(a, e1, 4), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(elapsed_time)
{
    float ms = -1;
    sim_ctx();
    CUevent a = event(), b = event(), nt;
    CK(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
    ck_assert_int_eq(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE); /* not recorded */
    CK(cuEventRecord(a, NULL));
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    CK(cuEventRecord(b, NULL));
    CK(cuEventRecord(nt, NULL));
    CK(cuEventElapsedTime(&ms, a, b));
    ck_assert_float_ge(ms, 19.0f);
    ck_assert_float_lt(ms, 5000.0f);
    ck_assert_int_eq(cuEventElapsedTime(&ms, a, nt), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventCreate(&nt, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(elapsed_time_waits_for_late_events)
{
    float ms;
    setenv("CUDALLOC_SIM_LATE_EVENTS", "1", 1);
    sim_ctx();
    CUevent a = event(), b = event();
    CK(cuEventRecord(a, NULL));
    CK(cuEventRecord(b, NULL));
    ck_assert_int_eq(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_NOT_READY);
    CK(cuCtxSynchronize());
    CK(cuEventElapsedTime(&ms, a, b));
}
END_TEST

START_TEST(destroyed_handles_are_invalid)
{
    CUstream s;
    sim_ctx();
    CK(cuStreamCreate(&s, 0));
    CUevent e = event();
    CK(cuStreamDestroy(s));
    CK(cuEventDestroy(e));
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuStreamDestroy(NULL), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventRecord(e, NULL), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuStreamCreate(&s, 8), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuEventCreate(&e, 64), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* The _ptsz variants read the NULL stream as the thread's own stream. */
START_TEST(per_thread_default_stream)
{
    setenv("CUDALLOC_SIM_LATE_EVENTS", "100", 1);
    sim_ctx();
    CUresult (*record)(CUevent, CUstream) = (CUresult(*)(CUevent, CUstream))dlsym(RTLD_DEFAULT, "cuEventRecord_ptsz");
    CUresult (*sync)(CUstream) = (CUresult(*)(CUstream))dlsym(RTLD_DEFAULT, "cuStreamSynchronize_ptsz");
    ck_assert_ptr_nonnull(record);
    ck_assert_ptr_nonnull(sync);
    CUevent mine = event(), legacy = event();
    CK(record(mine, NULL));
    CK(cuEventRecord(legacy, NULL));
    CK(sync(NULL)); /* the per-thread stream only */
    CK(cuEventQuery(mine));
    ck_assert_int_eq(cuEventQuery(legacy), CUDA_ERROR_NOT_READY);
    CK(record(mine, NULL));
    CK(cuStreamSynchronize(CU_STREAM_LEGACY)); /* the legacy stream waits for it */
    CK(cuEventQuery(mine));
    CK(cuEventQuery(legacy));
}
END_TEST


/* A held stream's work has not run: its events, and the legacy stream's while
 * a blocking stream is held, are not ready until the hold ends. */
START_TEST(held_streams_hold_their_events)
{
    CUstream nb, blk;
    sim_ctx();
    CK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&blk, CU_STREAM_DEFAULT));
    ck_assert_int_eq(simgpu_stream_hold(nb, 1), 0);
    CUevent on_nb = event(), legacy = event(), on_blk = event();
    CK(cuEventRecord(on_nb, nb));
    CK(cuEventRecord(legacy, NULL));
    CK(cuEventRecord(on_blk, blk));
    ck_assert_int_eq(cuEventQuery(on_nb), CUDA_ERROR_NOT_READY);
    ck_assert_int_eq(cuEventQuery(on_nb), CUDA_ERROR_NOT_READY); /* not a count: held */
    ck_assert_int_eq(cuStreamQuery(nb), CUDA_ERROR_NOT_READY);
    CK(cuEventQuery(legacy)); /* the legacy stream does not wait for non-blocking streams */
    CK(cuEventQuery(on_blk));
    ck_assert_int_eq(simgpu_stream_hold(blk, 1), 0);
    CK(cuEventRecord(legacy, NULL));
    ck_assert_int_eq(cuEventQuery(legacy), CUDA_ERROR_NOT_READY); /* it waits for blocking ones */
    ck_assert_int_eq(simgpu_stream_hold(blk, 0), 0);
    CK(cuEventQuery(legacy));
    ck_assert_int_eq(cuEventQuery(on_nb), CUDA_ERROR_NOT_READY);
    ck_assert_int_eq(simgpu_stream_hold(nb, 0), 0);
    CK(cuEventQuery(on_nb));
    CK(cuStreamQuery(nb));
    ck_assert_int_eq(simgpu_stream_hold(nb, 0), -1); /* not held */
    ck_assert_int_eq(simgpu_stream_hold(NULL, 1), -1); /* only created streams */
}
END_TEST

/* A synchronize that covers an event runs the work before it; the hold stays
 * for work issued later. */
START_TEST(synchronize_runs_held_work)
{
    CUstream s;
    sim_ctx();
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    ck_assert_int_eq(simgpu_stream_hold(s, 1), 0);
    CUevent a = event(), b = event(), c = event();
    CK(cuEventRecord(a, s));
    CK(cuEventRecord(b, s));
    CK(cuEventSynchronize(a));
    CK(cuEventQuery(a));
    ck_assert_int_eq(cuEventQuery(b), CUDA_ERROR_NOT_READY);
    CK(cuStreamSynchronize(s));
    CK(cuEventQuery(b));
    CK(cuEventRecord(c, s));
    ck_assert_int_eq(cuEventQuery(c), CUDA_ERROR_NOT_READY);
    CK(cuCtxSynchronize());
    CK(cuEventQuery(c));
    ck_assert_uint_eq(sim_counters().held_waits, 3); /* each wait that ran held work is counted */
    ck_assert_int_eq(simgpu_stream_hold(s, 0), 0); /* (else said at exit: a wait that would not end) */
}
END_TEST

/* Waiting on an event behind a held stream puts the waiter behind it; a
 * destroyed held stream's work stays queued until released. */
START_TEST(waits_and_destroyed_streams_stay_behind_the_hold)
{
    CUstream s;
    sim_ctx();
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    ck_assert_int_eq(simgpu_stream_hold(s, 1), 0);
    CUevent tail = event(), later = event();
    CK(cuEventRecord(tail, s));
    CK(cuStreamWaitEvent(NULL, tail, 0));
    CK(cuStreamDestroy(s));
    CK(cuEventRecord(later, NULL));
    ck_assert_int_eq(cuEventQuery(tail), CUDA_ERROR_NOT_READY);
    ck_assert_int_eq(cuEventQuery(later), CUDA_ERROR_NOT_READY);
    ck_assert_int_eq(simgpu_stream_hold(s, 0), 0); /* the old handle releases it */
    CK(cuEventQuery(tail));
    CK(cuEventQuery(later));
}
END_TEST

/* Stream handles are never handed out twice: a destroyed one stays invalid
 * (cuStreamGetFlags, as any stream call, says so), a new stream is new. */
START_TEST(stream_handles_are_never_reused)
{
    sim_ctx();
    CUstream first, s;
    unsigned flags = 7;
    CK(cuStreamCreate(&first, CU_STREAM_NON_BLOCKING));
    CK(cuStreamGetFlags(first, &flags));
    ck_assert_uint_eq(flags, CU_STREAM_NON_BLOCKING);
    CK(cuStreamGetFlags(CU_STREAM_LEGACY, &flags));
    ck_assert_uint_eq(flags, 0);
    CK(cuStreamDestroy(first));
    ck_assert_int_eq(cuStreamGetFlags(first, &flags), CUDA_ERROR_INVALID_HANDLE);
    for (int i = 0; i < 1000; i++) {
        CK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
        ck_assert_ptr_ne(s, first);
        CK(cuStreamDestroy(s));
    }
    ck_assert_int_eq(cuStreamGetFlags((CUstream)(uintptr_t)0x5a5a5000, &flags), CUDA_ERROR_INVALID_HANDLE);
    /* and the counters keep each device's peak */
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 4 << 20));
    CK(cuMemFree(p));
    simgpu_counters_t c = sim_counters();
    ck_assert_uint_eq(c.device_bytes_in_use[0], 0);
    ck_assert_uint_ge(c.device_bytes_peak[0], 4 << 20);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("simgpu events");
    TCase *tc = tcase_create("events");
    tcase_add_test(tc, events_complete_at_once_by_default);
    tcase_add_test(tc, late_events_answer_not_ready_n_times);
    tcase_add_test(tc, event_synchronize_completes);
    tcase_add_test(tc, stream_synchronize_completes_its_events);
    tcase_add_test(tc, context_synchronize_completes_everything);
    tcase_add_test(tc, stream_query_while_late);
    tcase_add_test(tc, stream_waits_are_recorded);
    tcase_add_test(tc, elapsed_time);
    tcase_add_test(tc, elapsed_time_waits_for_late_events);
    tcase_add_test(tc, destroyed_handles_are_invalid);
    tcase_add_test(tc, per_thread_default_stream);
    tcase_add_test(tc, held_streams_hold_their_events);
    tcase_add_test(tc, synchronize_runs_held_work);
    tcase_add_test(tc, waits_and_destroyed_streams_stay_behind_the_hold);
    tcase_add_test(tc, stream_handles_are_never_reused);
    suite_add_tcase(s, tc);
    return sim_run(s);
}
