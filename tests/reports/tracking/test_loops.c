/* What a training loop's iterations are (track/loops.h): the judge on
 * synthetic levels (a loop, a leaking loop, a forward pass's layers, a
 * backward's, an optimizer's loop over parameters, blocks inside a module
 * call), candidates tried in order (period.h), frames by kind
 * (capture/frame_kind.h), the tracker refusing a forward pass's layers and
 * reporting them as blocks, and the peak's holders (diagnose/peak.h). */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>
#include <stdlib.h>

#include "reports/capture/frame_kind.h"
#include "reports/capture/named_frames.h"
#include "reports/diagnose/peak.h"
#include "reports/track/loops.h"
#include "reports/track/period.h"
#include "tests/reports/tracking/sim.h"

/* A window of allocations: per allocation its level before and after, its
 * site; boundaries where the caller puts them. */
typedef struct win {
    uint64_t level[4096], after[4096], now;
    uint32_t sites[4096];
    size_t n, at[256], nb;
} win;

static void w_alloc(win *w, uint64_t bytes, uint32_t site) {
    w->level[w->n] = w->now;
    w->now += bytes;
    w->after[w->n] = w->now;
    w->sites[w->n++] = site;
}
static void w_mark(win *w) { w->at[w->nb++] = w->n; }

static ca_loop_shape judge(win *w, uint32_t period, const ca_stacks *st, ca_loop_figures *fig) {
    ca_loop_input in = {w->level, w->after, w->n, st ? w->sites : NULL, st};
    return ca_loop_judge(&in, period, w->at, w->nb, fig);
}

/* A training step: activations made then freed, `kept` bytes left behind. */
static void step(win *w, uint64_t kept) {
    for (int k = 0; k < 4; k++) w_alloc(w, 8 * MIB, 1);
    w->now -= 32 * MIB;
    if (kept) w_alloc(w, kept, 2);
    else w_alloc(w, 4096, 2), w->now -= 4096;
}

START_TEST(a_loop_and_a_leaking_loop_are_iterations) {
    win *w = calloc(1, sizeof *w);
    w_alloc(w, 100 * MIB, 9); /* weights */
    for (int i = 0; i < 8; i++) w_mark(w), step(w, 0);
    ca_loop_figures f;
    ck_assert_int_eq(judge(w, 5, NULL, &f), CA_LOOP_ITERATIONS);
    ck_assert_uint_eq(f.swing, 32 * MIB);
    ck_assert_int_eq(f.rise, 0);
    free(w);
    w = calloc(1, sizeof *w);
    for (int i = 0; i < 8; i++) w_mark(w), step(w, 8 * MIB); /* keeps a fifth of its swing */
    ck_assert_int_eq(judge(w, 5, NULL, &f), CA_LOOP_ITERATIONS);
    ck_assert_int_eq(f.rise, 8 * MIB);
    free(w);
}
END_TEST

START_TEST(layers_of_one_pass_are_not) {
    /* Forward: each layer keeps 3 of its 4 allocations. */
    win *w = calloc(1, sizeof *w);
    for (int l = 0; l < 24; l++) {
        w_mark(w);
        for (int k = 0; k < 4; k++) w_alloc(w, 2 * MIB, 10 + k);
        w->now -= 2 * MIB;
    }
    ca_loop_figures f;
    ck_assert_int_eq(judge(w, 4, NULL, &f), CA_LOOP_CLIMBS);
    ck_assert_uint_eq(f.climbing, 23);
    /* Backward: each layer frees 6 MiB, allocating 1 MiB. */
    win *b = calloc(1, sizeof *b);
    b->now = 200 * MIB;
    for (int l = 0; l < 24; l++) {
        w_mark(b);
        w_alloc(b, MIB, 20);
        b->now -= 7 * MIB;
    }
    ck_assert_int_eq(judge(b, 1, NULL, &f), CA_LOOP_FALLS);
    free(w);
    free(b);
}
END_TEST

START_TEST(an_optimizer_loop_is_small) {
    /* Forward and backward make a 64 MiB swing; then 50 parameters, each a
     * 1 MiB temporary: a small share. */
    win *w = calloc(1, sizeof *w);
    w_alloc(w, 100 * MIB, 9);
    for (int k = 0; k < 8; k++) w_alloc(w, 8 * MIB, 1);
    w->now -= 64 * MIB;
    for (int p = 0; p < 50; p++) w_mark(w), w_alloc(w, MIB, 30 + p % 3), w->now -= MIB;
    ca_loop_figures f;
    ck_assert_int_eq(judge(w, 1, NULL, &f), CA_LOOP_SMALL);
    ck_assert_uint_ge(f.outside_swing, 56 * MIB); /* the forward's peak, less the period just before the loop */
    ck_assert_uint_eq(f.swing, MIB);
    free(w);
}
END_TEST

/* A stack of named frames, outermost last as stacks are kept. */
static uint32_t stack_of(ca_stacks *st, const char *const *fn, const char *const *file, unsigned n) {
    uintptr_t ips[16];
    for (unsigned i = 0; i < n; i++) ips[i] = ca_named_frame(fn[i], file[i], 10 + i, "snapshot");
    return ca_stacks_intern(st, ips, n);
}

START_TEST(frames_say_inside_a_module_call) {
    ca_stacks *st = ca_stacks_new(32);
    const char *fn[] = {"forward", "_call_impl", "forward", "_call_impl", "train", "<module>"};
    const char *fi[] = {"/w/model.py", "/v/lib/python3.12/site-packages/torch/nn/modules/module.py", "/w/model.py",
                        "/v/lib/python3.12/site-packages/torch/nn/modules/module.py", "/w/train.py", "/w/train.py"};
    uint32_t layer = stack_of(st, fn, fi, 6);
    /* Layers that return to their level (no_grad): memory alone calls them a loop. */
    win *w = calloc(1, sizeof *w);
    for (int l = 0; l < 24; l++) {
        w_mark(w);
        for (int k = 0; k < 3; k++) w_alloc(w, 2 * MIB, layer);
        w->now -= 6 * MIB;
    }
    ca_loop_figures f;
    ck_assert_int_eq(judge(w, 3, NULL, &f), CA_LOOP_ITERATIONS);
    ck_assert_int_eq(judge(w, 3, st, &f), CA_LOOP_INSIDE_PASS);
    ck_assert_int_eq(f.pass, CA_PASS_MODULE);
    /* A loop whose steps keep what their forward made (evaluation without
     * no_grad, the loss kept): its steps run the forward AND other lines of
     * train(): not inside one call, a loop (whose leak the leak rule sees),
     * climbing or not. */
    const char *fn2[] = {"train", "<module>"};
    const char *fi2[] = {"/w/train.py", "/w/train.py"};
    uint32_t batch = stack_of(st, fn2, fi2, 2);
    win *e = calloc(1, sizeof *e);
    for (int i = 0; i < 12; i++) {
        w_mark(e);
        w_alloc(e, MIB, batch);
        for (int k = 0; k < 4; k++) w_alloc(e, 2 * MIB, layer);
    }
    ck_assert_int_eq(judge(e, 5, NULL, &f), CA_LOOP_CLIMBS);
    ck_assert_int_eq(judge(e, 5, st, &f), CA_LOOP_ITERATIONS);
    ck_assert_int_eq(f.framed, 1);
    free(w);
    free(e);
    ca_stacks_free(st);
}
END_TEST

START_TEST(frame_kinds) {
    ck_assert_int_eq(ca_frame_kind_of("train", "/work/train.py", "snapshot"), CA_FRAME_PROGRAM);
    ck_assert_int_eq(ca_frame_kind_of("_call_impl", "/v/lib/python3.12/site-packages/torch/nn/modules/module.py", "python"),
                     CA_FRAME_LIBRARY);
    ck_assert_int_eq(ca_frame_kind_of("einsum", "D:\\venv\\Lib\\site-packages\\torch\\functional.py", "snapshot"),
                     CA_FRAME_LIBRARY);
    ck_assert_int_eq(ca_frame_kind_of("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int)",
                                      "??", "snapshot"),
                     CA_FRAME_RUNTIME);
    ck_assert_int_eq(ca_frame_kind_of("c10::impl::wrap_kernel_functor_unboxed_<at::Tensor (c10::ArrayRef<long>)>::call",
                                      "??", "snapshot"),
                     CA_FRAME_RUNTIME);
    ck_assert_int_eq(ca_frame_kind_of("void at::native::gemm<float>(int)", "??", "??"), CA_FRAME_RUNTIME);
    ck_assert_int_eq(ca_frame_kind_of("cudaMalloc", "??", "/usr/lib/libcudart.so.12"), CA_FRAME_PROGRAM);
    ck_assert_int_eq(ca_frame_kind_of("memcpy", "??", "/lib/x86_64-linux-gnu/libc.so.6"), CA_FRAME_RUNTIME);
    ck_assert_int_eq(ca_frame_kind_of("op_matmul", "demo_trainer/ops.c", "/w/demo_trainer"), CA_FRAME_PROGRAM);
    ck_assert_int_eq(ca_frame_kind_of("cuda_helper", "my.c", "/w/a.out"), CA_FRAME_PROGRAM);
    ck_assert_int_eq(ca_frame_pass("_wrapped_call_impl", "C:\\py\\Lib\\site-packages\\torch\\nn\\modules\\module.py"),
                     CA_PASS_MODULE);
    ck_assert_int_eq(ca_frame_pass("wrapper", "/x/site-packages/torch/optim/optimizer.py"), CA_PASS_OPTIMIZER);
    ck_assert_int_eq(ca_frame_pass("backward", "/x/site-packages/torch/_tensor.py"), CA_PASS_BACKWARD);
    ck_assert_int_eq(ca_frame_pass("torch::autograd::Engine::thread_main(std::shared_ptr<int> const&)", "??"),
                     CA_PASS_BACKWARD);
    ck_assert_int_eq(ca_frame_pass("forward", "/work/model.py"), CA_PASS_NONE);
    ck_assert_int_eq(ca_ip_pass(0x401000), CA_PASS_NONE); /* a native address: names unknown */
}
END_TEST

/* Refuses the first period it is offered, records what it saw. */
static int refuse_first(void *ctx, const ca_period *p, const size_t *at, size_t nb) {
    uint32_t *seen = ctx;
    if (!seen[0]) {
        seen[0] = p->period;
        return 0;
    }
    seen[1] = p->period;
    return 1;
}

START_TEST(candidates_in_order) {
    /* 5 iterations of an embedding, 30 identical layers of 3 allocations
     * and a loss: the loop (92) matches best and is offered first; when its
     * judge refuses it, the layers (3, matching 92% of the window) come next. */
    uint32_t s[460];
    uint64_t level[460];
    size_t n = 0;
    for (int i = 0; i < 5; i++) {
        s[n] = 1, level[n] = 0, n++;
        for (int l = 0; l < 30; l++)
            for (int k = 0; k < 3; k++) s[n] = 10 + k, level[n] = 100 + (uint64_t)l * 10 + k, n++;
        s[n] = 2, level[n] = 500, n++;
    }
    uint32_t seen[2] = {0, 0};
    ca_period p;
    ck_assert_int_eq(ca_period_find_if(s, level, n, refuse_first, seen, &p), 1);
    ck_assert_uint_eq(seen[0], 92);
    ck_assert_uint_eq(seen[1], 3);
    ck_assert_uint_eq(p.period, 3);
    ck_assert_int_eq(ca_period_find(s, level, n, &p), 1);
    ck_assert_uint_eq(p.period, 92);
}
END_TEST

/* A forward pass of 24 identical layers, with grad (each layer keeps its
 * activations), fed to a tracker with sites by size: detection refuses the
 * layers as iterations and reports them as blocks. */
START_TEST(tracker_refuses_layers_reports_blocks) {
    ca_tracker_options o;
    ca_tracker_options_default(&o);
    o.capture_stacks = 0;
    o.time_is_index = 1;
    ca_tracker *t = ca_tracker_new(&o);
    uintptr_t a = 0x10000000;
    for (int l = 0; l < 24; l++) {
        uintptr_t tmp = 0;
        for (int k = 0; k < 4; k++) {
            uint64_t bytes = (uint64_t)(k + 1) * MIB;
            ca_trace_event ev = {CA_EV_ALLOC, a, bytes, bytes, 0};
            ca_tracker_record(t, &ev, ca_tracker_size_site(t, bytes), 0, 0);
            if (k == 1) tmp = a;
            a += bytes;
        }
        ca_trace_event fr = {CA_EV_FREE, tmp, 2 * MIB, 2 * MIB, 0};
        ca_tracker_record(t, &fr, 0, 0, 0);
    }
    ca_track_snap s;
    ck_assert_int_eq(ca_tracker_snapshot(t, &s), 0);
    ck_assert_uint_eq(s.iteration, 0);
    ca_blocks b;
    ck_assert_int_eq(ca_tracker_blocks(t, &b), 1);
    ck_assert_uint_eq(b.allocations, 4);
    ck_assert_uint_ge(b.count, 22);
    ck_assert_uint_le(b.count, 24);
    ck_assert_int_eq(b.shape, CA_LOOP_CLIMBS);
    ck_assert_int_eq(b.rise, 8 * MIB);
    /* The peak: the last layer's, before its 2 MiB temporary was freed:
     * what every layer kept and that one temporary. */
    ca_peak pk;
    ck_assert_int_eq(ca_peak_find(&s, &pk), 0);
    ck_assert_uint_eq(pk.allocated, 24 * 8 * MIB + 2 * MIB);
    ck_assert_uint_eq(pk.n_sites, 4);
    ck_assert_uint_eq(pk.sites[0].bytes, 24 * 4 * MIB);
    ck_assert_uint_eq(pk.sites[3].bytes, 2 * MIB);
    ck_assert_uint_eq(pk.count, 73);
    ca_peak_free(&pk);
    ca_track_snap_free(&s);
    ca_tracker_destroy(t);
}
END_TEST

START_TEST(peak_holders_when_memory_falls_after) {
    sim s = {sim_tracker(0), 0, 1};
    uintptr_t a = sim_alloc(&s, 10 * MIB, 1), b = sim_alloc(&s, 20 * MIB, 2);
    sim_free(&s, a, 10 * MIB);              /* freed after the peak: held it */
    uintptr_t c = sim_alloc(&s, 5 * MIB, 3); /* made after the peak: did not */
    (void)b;
    (void)c;
    ca_track_snap snap;
    ck_assert_int_eq(ca_tracker_snapshot(s.t, &snap), 0);
    ca_peak pk;
    ck_assert_int_eq(ca_peak_find(&snap, &pk), 0);
    ck_assert_uint_eq(pk.allocated, 30 * MIB);
    ck_assert_uint_eq(pk.n_sites, 2);
    ck_assert_int_eq(sim_site_number(s.t, pk.sites[0].site), 2);
    ck_assert_int_eq(sim_site_number(s.t, pk.sites[1].site), 1);
    ck_assert_uint_eq(pk.seq, 1);
    ca_peak_free(&pk);
    ca_track_snap_free(&snap);
    ca_tracker_destroy(s.t);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("loops");
    TCase *tc = tcase_create("loops");
    tcase_add_test(tc, a_loop_and_a_leaking_loop_are_iterations);
    tcase_add_test(tc, layers_of_one_pass_are_not);
    tcase_add_test(tc, an_optimizer_loop_is_small);
    tcase_add_test(tc, frames_say_inside_a_module_call);
    tcase_add_test(tc, frame_kinds);
    tcase_add_test(tc, candidates_in_order);
    tcase_add_test(tc, tracker_refuses_layers_reports_blocks);
    tcase_add_test(tc, peak_holders_when_memory_falls_after);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)
