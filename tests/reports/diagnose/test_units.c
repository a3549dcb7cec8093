/* Checkpointing's units from Python frames (reports/diagnose/units.h): the
 * forward passes of small models, written as the stacks PyTorch records
 * (innermost first, named frames). */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reports/capture/named_frames.h"
#include "reports/diagnose/units.h"

#define MAXN 256
#define DEPTH 8

typedef struct model {
    uintptr_t ips[MAXN][DEPTH];
    ca_unit_stack st[MAXN];
    size_t n;
    uint32_t call[MAXN]; /* what ca_units_find says */
    char name[CA_UNIT_NAME], why[200];
} model;

static long find(model *m) { return ca_units_find(m->st, m->n, m->call, m->name, sizeof m->name, m->why, sizeof m->why); }

static uintptr_t F(const char *fn, unsigned line) { return ca_named_frame(fn, "model.py", line, "python"); }

/* One allocation: frames given outermost first (as read), stored innermost first. */
static void alloc(model *m, uint64_t bytes, unsigned n, const uintptr_t *outer_first) {
    ck_assert_uint_lt(m->n, MAXN);
    for (unsigned k = 0; k < n; k++) m->ips[m->n][k] = outer_first[n - 1 - k];
    m->st[m->n] = (ca_unit_stack){m->ips[m->n], n, bytes};
    m->n++;
}

/* GPT.forward calls each Block from one line of a loop; a block allocates
 * from three lines, the middle one twice through Linear.forward. */
START_TEST(blocks_called_from_a_loop) {
    model m = {0};
    uintptr_t top[] = {F("main", 10), F("GPT.forward", 20)};
    alloc(&m, 100, 2, top); /* the embedding */
    for (int b = 0; b < 5; b++) {
        uintptr_t l1[] = {top[0], F("GPT.forward", 22), F("Block.forward", 40)};
        uintptr_t l2[] = {top[0], F("GPT.forward", 22), F("Block.forward", 41), F("Linear.forward", 114)};
        uintptr_t l3[] = {top[0], F("GPT.forward", 22), F("Block.forward", 42)};
        alloc(&m, 400, 3, l1);
        alloc(&m, 400, 4, l2);
        alloc(&m, 400, 4, l2);
        alloc(&m, 100, 3, l3);
    }
    uintptr_t head[] = {top[0], F("GPT.forward", 24), F("Linear.forward", 114)};
    alloc(&m, 800, 3, head);
    ck_assert_int_eq(find(&m), 5);
    ck_assert_str_eq(m.name, "Block.forward (model.py:40)");
    const uint32_t *call = m.call;
    ck_assert_uint_eq(call[0], 0);
    ck_assert_uint_eq(call[1], 1);
    ck_assert_uint_eq(call[4], 1);
    ck_assert_uint_eq(call[5], 2);
    ck_assert_uint_eq(call[20], 5);
    ck_assert_uint_eq(call[21], 0);
}
END_TEST

/* nn.LSTM: every timestep's allocations come from one line of one call (its
 * C++ loop): no unit, and the reason names that call. */
START_TEST(timesteps_inside_one_call_are_no_units) {
    model m = {0};
    uintptr_t emb[] = {F("main", 10), F("LM.forward", 30), F("Embedding.forward", 160)};
    alloc(&m, 100, 3, emb);
    uintptr_t step[] = {F("main", 10), F("LM.forward", 31), F("LSTM.forward", 774)};
    for (int t = 0; t < 40; t++) alloc(&m, 64, 3, step), alloc(&m, 64, 3, step);
    ck_assert_int_eq(find(&m), 0);
    ck_assert_ptr_nonnull(strstr(m.why, "no module's forward runs twice"));
    ck_assert_ptr_nonnull(strstr(m.why, "LSTM.forward (model.py:774)"));
}
END_TEST

/* Three nn.Sequential(Linear, ReLU) called from a helper's loop: Sequential
 * calls its modules from one line, so the module it calls coming back starts
 * its next call; the caller (one line, the same module below) is one call. */
START_TEST(sequential_from_a_helper) {
    model m = {0};
    for (int u = 0; u < 3; u++) {
        uintptr_t lin[] = {F("main", 10), F("MLP.forward", 50), F("run_units", 5), F("Sequential.forward", 204),
                           F("Linear.forward", 114)};
        uintptr_t relu[] = {F("main", 10), F("MLP.forward", 50), F("run_units", 5), F("Sequential.forward", 204),
                            F("ReLU.forward", 98)};
        alloc(&m, 300, 5, lin);
        alloc(&m, 300, 5, relu);
    }
    ck_assert_int_eq(find(&m), 3);
    ck_assert_str_eq(m.name, "Sequential.forward (model.py:204)");
    ck_assert_uint_eq(m.call[1], 1);
    ck_assert_uint_eq(m.call[2], 2);
    ck_assert_uint_eq(m.call[5], 3);
}
END_TEST

/* Native stacks (no named frame): -1, the caller looks for repeated blocks. */
START_TEST(native_stacks_have_no_units) {
    uintptr_t ips[2] = {0x401000, 0x402000};
    ca_unit_stack st[2] = {{ips, 2, 10}, {ips, 2, 10}};
    uint32_t call[2];
    char name[CA_UNIT_NAME], why[200];
    ck_assert_int_eq(ca_units_find(st, 2, call, name, sizeof name, why, sizeof why), -1);
}
END_TEST

/* The ops autocast keeps in fp32, by the frames' function names. */
START_TEST(autocast_fp32_ops) {
    uintptr_t loss[] = {F("cross_entropy", 3000), F("GPT.forward", 30), F("main", 10)};
    uintptr_t norm[] = {F("layer_norm", 2500), F("LayerNorm.forward", 190), F("main", 10)};
    uintptr_t mm[] = {F("Linear.forward", 114), F("GPT.forward", 30), F("main", 10)};
    uintptr_t native[] = {0x401000};
    ck_assert_int_eq(ca_frames_autocast_fp32(loss, 3), 1);
    ck_assert_int_eq(ca_frames_autocast_fp32(norm, 3), 1);
    ck_assert_int_eq(ca_frames_autocast_fp32(mm, 3), 0);
    ck_assert_int_eq(ca_frames_autocast_fp32(native, 1), 0);
}
END_TEST

/* 64 blocks of 64 allocations, 8 frames deep: well under a second. */
START_TEST(large_forward_is_fast) {
    enum { BLOCKS = 64, PER = 64, N = BLOCKS * PER };
    uintptr_t(*ips)[DEPTH] = malloc(N * sizeof *ips);
    ca_unit_stack *st = malloc(N * sizeof *st);
    uint32_t *call = malloc(N * sizeof *call);
    ck_assert(ips && st && call);
    for (size_t i = 0; i < N; i++) {
        uintptr_t outer[DEPTH] = {F("main", 10),      F("train", 20),       F("Model.forward", 30),
                                  F("Layer.forward", 40 + (unsigned)(i % PER) / 8),
                                  F("Linear.forward", 114), F("linear", 2000 + (unsigned)(i % 8)),
                                  F("helper", 5),          F("inner", 6)};
        for (unsigned k = 0; k < DEPTH; k++) ips[i][k] = outer[DEPTH - 1 - k];
        st[i] = (ca_unit_stack){ips[i], DEPTH, 1024};
    }
    char name[CA_UNIT_NAME], why[200];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(ca_units_find(st, N, call, name, sizeof name, why, sizeof why), BLOCKS);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    ck_assert_str_eq(name, "Layer.forward (model.py:40)");
    ck_assert_msg(sec < 1.0, "%.3f s", sec);
    free(ips);
    free(st);
    free(call);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("units");
    TCase *tc = tcase_create("units");
    tcase_add_test(tc, blocks_called_from_a_loop);
    tcase_add_test(tc, timesteps_inside_one_call_are_no_units);
    tcase_add_test(tc, sequential_from_a_helper);
    tcase_add_test(tc, native_stacks_have_no_units);
    tcase_add_test(tc, autocast_fp32_ops);
    tcase_add_test(tc, large_forward_is_fast);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)
