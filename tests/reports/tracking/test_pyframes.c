/* Python frames among native ones: where each Python call's frames go (in
 * place of its eval-loop frame), what is folded away, the fallbacks when an
 * eval-loop frame is not recognized, the frame limit; and in a program with
 * no Python, nothing changes. (The walker itself runs against real Pythons
 * in tests/python.) */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>
#include <string.h>

#include "reports/capture/pyframes.h"
#include "reports/capture/stacks.h"

enum { N = CA_PY_NATIVE, E = CA_PY_EVAL, I = CA_PY_INTERNAL };

/* Native frames are 1..99, Python frames 100 and up. */
static unsigned run(const uintptr_t *c, const uint8_t *kind, unsigned nc, const uint8_t *ends, unsigned np,
                    uintptr_t *out, unsigned max) {
    uintptr_t py[64];
    for (unsigned i = 0; i < np; i++) py[i] = 100 + i;
    return ca_py_interleave(c, kind, nc, py, ends, np, out, max);
}

static void same(const uintptr_t *got, unsigned n, const uintptr_t *want, unsigned nw) {
    ck_assert_uint_eq(n, nw);
    for (unsigned i = 0; i < n; i++) ck_assert_msg(got[i] == want[i], "frame %u: %lu, want %lu", i, got[i], want[i]);
}

/* cudaMalloc <- libffi <- ctypes <- eval loop <- libpython <- main: one call. */
START_TEST(one_call) {
    uintptr_t c[] = {1, 2, 3, 4, 5, 6};
    uint8_t k[] = {N, I, I, E, I, N}, ends[] = {0, 0, 1};
    uintptr_t out[16], want[] = {1, 100, 101, 102, 6};
    same(out, run(c, k, 6, ends, 3, out, 16), want, 5);
}
END_TEST

/* Python -> C -> Python (a callback): each call's frames at its own eval
 * frame, the C frame between them kept. */
START_TEST(two_calls) {
    uintptr_t c[] = {1, 2, 3, 4, 5, 6, 7};
    uint8_t k[] = {N, I, E, I, N, I, E}, ends[] = {0, 1, 0, 1};
    uintptr_t out[16], want[] = {1, 100, 101, 5, 102, 103};
    same(out, run(c, k, 7, ends, 4, out, 16), want, 6);
}
END_TEST

/* The outer call's eval frame not recognized (its return address in a part
 * of the loop the symbol does not cover): its frames follow the last one
 * that was. */
START_TEST(unrecognized_eval_frame) {
    uintptr_t c[] = {1, 2, 3, 4, 5};
    uint8_t k[] = {N, E, N, I, N}, ends[] = {1, 0, 1};
    uintptr_t out[16], want[] = {1, 100, 101, 102, 3, 5};
    same(out, run(c, k, 5, ends, 3, out, 16), want, 6);
}
END_TEST

/* No eval frame at all: where the interpreter's frames start; no
 * interpreter frame either: at the end. */
START_TEST(no_eval_frame) {
    uintptr_t c[] = {1, 2, 3, 4};
    uint8_t k[] = {N, I, I, N}, ends[] = {0, 1};
    uintptr_t out[16], want[] = {1, 100, 101, 4};
    same(out, run(c, k, 4, ends, 2, out, 16), want, 4);
    uint8_t k2[] = {N, N, N, N};
    uintptr_t want2[] = {1, 2, 3, 4, 100, 101};
    same(out, run(c, k2, 4, ends, 2, out, 16), want2, 6);
}
END_TEST

/* More eval frames than Python calls (frames cut at the walk's limit): the
 * extra ones are folded; and the output limit holds. */
START_TEST(extra_eval_frames_and_limit) {
    uintptr_t c[] = {1, 2, 3, 4, 5};
    uint8_t k[] = {N, E, N, E, N}, ends[] = {0, 1};
    uintptr_t out[16], want[] = {1, 100, 101, 3, 5};
    same(out, run(c, k, 5, ends, 2, out, 16), want, 5);
    same(out, run(c, k, 5, ends, 2, out, 3), want, 3);
}
END_TEST

/* A deep native stack under the Python frames (a framework's dispatch): its
 * frames just above the Python ones make room, the 8 innermost stay. */
START_TEST(deep_native_stack) {
    uintptr_t c[80];
    uint8_t k[80], ends[16] = {0};
    for (unsigned i = 0; i < 80; i++) c[i] = 1 + i, k[i] = i < 70 ? N : i == 70 ? E : I;
    c[79] = 99, k[79] = N; /* main, say */
    ends[15] = 1;
    uintptr_t out[64];
    unsigned n = run(c, k, 80, ends, 16, out, 64);
    ck_assert_uint_eq(n, 64);
    /* 47 innermost native frames, the 16 Python frames, main */
    for (unsigned i = 0; i < 47; i++) ck_assert_uint_eq(out[i], 1 + i);
    for (unsigned i = 0; i < 16; i++) ck_assert_uint_eq(out[47 + i], 100 + i);
    ck_assert_uint_eq(out[63], 99);
    /* Python frames beyond room: 8 native stay, the outermost go. */
    uintptr_t c2[40];
    uint8_t k2[40], ends2[16] = {0};
    for (unsigned i = 0; i < 40; i++) c2[i] = 1 + i, k2[i] = i < 39 ? N : E;
    ends2[15] = 1;
    n = run(c2, k2, 40, ends2, 16, out, 20);
    ck_assert_uint_eq(n, 20);
    for (unsigned i = 0; i < 8; i++) ck_assert_uint_eq(out[i], 1 + i);
    for (unsigned i = 0; i < 12; i++) ck_assert_uint_eq(out[8 + i], 100 + i);
}
END_TEST

/* A program without Python: no Python frames, stacks as before. */
static __attribute__((noinline)) uint32_t capture_here(ca_stacks *s) {
    uint32_t r = ca_stacks_capture(s);
    __asm__ volatile("" ::: "memory");
    return r;
}

START_TEST(no_python_here) {
    const char *why = NULL;
    ck_assert_ptr_null(ca_py_version(&why));
    ck_assert_str_eq(why, "no Python in this process");
    ca_py_frame f[4];
    uint64_t h;
    ck_assert_uint_eq(ca_py_walk(f, 4, &h), 0);
    uint8_t kind[2] = {9, 9};
    uintptr_t ips[2] = {(uintptr_t)&capture_here + 1, 0x1001};
    ca_py_classify(ips, 2, kind);
    ck_assert(kind[0] == CA_PY_NATIVE && kind[1] == CA_PY_NATIVE);

    ca_stacks *on = ca_stacks_new(32), *off = ca_stacks_new(32);
    ca_stacks_set_python(off, 0);
    uint64_t h0, b0, h1, b1;
    ca_stacks_python_counts(&h0, &b0);
    uint32_t ids[2];
    for (volatile int i = 0; i < 2; i++) ids[i] = capture_here(i ? off : on); /* one call site */
    uint32_t a = ids[0], b = ids[1];
    ca_stacks_python_counts(&h1, &b1);
    ck_assert(h1 == h0 && b1 == b0);
    const uintptr_t *x, *y;
    unsigned nx = ca_stacks_get(on, a, &x), ny = ca_stacks_get(off, b, &y);
    ck_assert_uint_gt(nx, 0);
    ck_assert_uint_eq(nx, ny);
    for (unsigned i = 0; i < nx; i++) ck_assert(x[i] == y[i]);
    ca_stacks_free(on);
    ca_stacks_free(off);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("pyframes");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, one_call);
    tcase_add_test(tc, two_calls);
    tcase_add_test(tc, unrecognized_eval_frame);
    tcase_add_test(tc, no_eval_frame);
    tcase_add_test(tc, extra_eval_frames_and_limit);
    tcase_add_test(tc, deep_native_stack);
    tcase_add_test(tc, no_python_here);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)
