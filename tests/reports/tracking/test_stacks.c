/* Stack capture and the stack table: the same call site gives the same id
 * (also through the per-thread cache), different call sites or depths give
 * different ids, explicit stacks are de-duplicated, and frames symbolize to
 * this file's functions. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>
#include <pthread.h>
#include <string.h>

#include "reports/capture/stacks.h"
#include "reports/capture/symbolize.h"

static ca_stacks *S;

static __attribute__((noinline)) uint32_t site_a(void) {
    uint32_t r = ca_stacks_capture(S);
    __asm__ volatile("" ::: "memory"); /* keep the call a call, not a tail jump */
    return r;
}
static __attribute__((noinline)) uint32_t site_b(void) {
    uint32_t r = ca_stacks_capture(S) + 0 * __LINE__;
    __asm__ volatile("nop"); /* unlike site_a: identical functions get folded into one */
    __asm__ volatile("" ::: "memory");
    return r;
}
static __attribute__((noinline)) uint32_t deep(int d, int which) {
    uint32_t r = d ? deep(d - 1, which) : which ? site_b() : site_a();
    __asm__ volatile("" ::: "memory");
    return r;
}

START_TEST(same_site_same_id) {
    S = ca_stacks_new(32);
    uint32_t a[2];
    for (volatile int i = 0; i < 2; i++) /* volatile: not unrolled into two calls */ a[i] = deep(10, 0); /* one call site, twice */
    uint32_t a1 = a[0], a2 = a[1], b = deep(10, 1);
    ck_assert_uint_ne(a1, CA_SITE_NONE);
    ck_assert_uint_eq(a1, a2);
    ck_assert_uint_ne(a1, b);
    /* Another depth is another stack. */
    uint32_t a3[2];
    for (volatile int i = 0; i < 2; i++) /* volatile: not unrolled into two calls */ a3[i] = deep(11, 0);
    ck_assert_uint_ne(a3[0], a1);
    ck_assert_uint_eq(a3[1], a3[0]);
    ck_assert_uint_eq(ca_stacks_count(S), 3);
    ca_stacks_free(S);
}
END_TEST

START_TEST(cache_hits_and_agrees) {
    S = ca_stacks_new(32);
    uint64_t h0, w0, h1, w1;
    ca_stacks_thread_counts(&h0, &w0);
    uint32_t ids[4];
    for (int rep = 0; rep < 101; rep++) {
        if (rep == 1) ca_stacks_thread_counts(&h1, &w1);
        for (volatile int d = 0; d < 4; d++) {
            uint32_t id = deep(5 + d, d & 1);
            if (!rep) ids[d] = id;
            else ck_assert_uint_eq(id, ids[d]);
        }
    }
    ck_assert_uint_eq(w1 - w0, 4);
    ca_stacks_thread_counts(&h0, &w0);
#if defined(__x86_64__)
    ck_assert_uint_eq(h0 - h1, 400); /* every repeat answered from the cache */
    ck_assert_uint_eq(w0, w1);
#endif
    ca_stacks_free(S);
}
END_TEST

/* Two sites at one depth share a cache set: a run of captures from either
 * checks the way that hit last first, so only a switch of site costs a
 * failed check (each failed check reads every frame). */
START_TEST(a_run_of_one_site_checks_one_way) {
    S = ca_stacks_new(32);
    uint32_t ids[2] = {0, 0};
    uint64_t before = 0;
    for (volatile int run = 0; run < 4; run++) { /* a, b (both cached now), a, b */
        if (run == 2) before = ca_stacks_thread_way_misses();
        for (volatile int i = 0; i < 50; i++) {
            int which = run & 1;
            uint32_t id = deep(10, which); /* one call site: the stacks differ in site_a/site_b only */
            if (run < 2 && !i) ids[which] = id;
            ck_assert_uint_eq(id, ids[which]);
        }
    }
    ck_assert_uint_ne(ids[0], ids[1]);
#if defined(__x86_64__)
    /* one failed check at each switch; 50 a run when the older way went first */
    ck_assert_uint_le(ca_stacks_thread_way_misses() - before, 2);
#endif
    ca_stacks_free(S);
}
END_TEST

/* Two callers of one path, alike but for a nop: the same frame sizes, so a
 * capture under either is at the same depth, and the stacks differ in the
 * caller's return address alone, twelve frames out. */
static __attribute__((noinline)) uint32_t outer_x(void) {
    uint32_t r = deep(10, 0);
    __asm__ volatile("" ::: "memory");
    return r;
}
static __attribute__((noinline)) uint32_t outer_y(void) {
    uint32_t r = deep(10, 0);
    __asm__ volatile("nop");
    __asm__ volatile("" ::: "memory");
    return r;
}
static uint32_t (*volatile outer[2])(void) = {outer_x, outer_y};

/* The cache compares every frame that makes the site: the callers' stacks,
 * both cached at one depth, never answer for each other. */
START_TEST(an_outer_frame_tells_cached_stacks_apart) {
    S = ca_stacks_new(32);
    uint32_t ids[2] = {0, 0};
    uint64_t h0, w0, h1, w1;
    for (volatile int i = 0; i < 40; i++) {
        if (i == 2) ca_stacks_thread_counts(&h0, &w0);
        uint32_t id = outer[i & 1](); /* one call site: the same depth under either */
        if (i < 2) ids[i] = id;
        ck_assert_uint_eq(id, ids[i & 1]);
    }
    ck_assert_uint_ne(ids[0], ids[1]);
    ck_assert_uint_eq(ca_stacks_count(S), 2);
#if defined(__x86_64__)
    ca_stacks_thread_counts(&h1, &w1);
    ck_assert_uint_eq(w1, w0);      /* both cached after their first capture */
    ck_assert_uint_eq(h1 - h0, 38); /* and each capture answered by its own entry */
#endif
    ca_stacks_free(S);
}
END_TEST

/* Frames past the site's last (max_frames) cannot change it: the cache does
 * not check them, so a stack that differs only there is a hit. */
START_TEST(frames_past_the_site_are_not_checked) {
    S = ca_stacks_new(4);
    uint32_t ids[2];
    uint64_t h0, w0, h1, w1;
    ca_stacks_thread_counts(&h0, &w0);
    for (volatile int i = 0; i < 2; i++) ids[i] = outer[i]();
    ca_stacks_thread_counts(&h1, &w1);
    ck_assert_uint_eq(ids[0], ids[1]); /* site_a, deep, deep, deep under either caller */
    const uintptr_t *ips;
    ck_assert_uint_eq(ca_stacks_get(S, ids[0], &ips), 4);
#if defined(__x86_64__)
    ck_assert_uint_eq(w1 - w0, 1); /* outer_y's capture: a hit on outer_x's entry */
    ck_assert_uint_eq(h1 - h0, 1);
#endif
    ca_stacks_free(S);
}
END_TEST

/* The same call site for the main thread and the other one. */
static __attribute__((noinline)) uint32_t thread_capture_one(void) {
    uint32_t r = deep(6, 0);
    __asm__ volatile("" ::: "memory");
    return r;
}

static void *thread_capture(void *arg) {
    uint32_t *out = arg;
    for (volatile int i = 0; i < 2; i++) /* volatile: not unrolled into two calls */ out[i] = thread_capture_one();
    return NULL;
}

START_TEST(threads_share_the_table) {
    /* The same code path on another thread: another stack bottom (the
     * thread's start), so another id, but stable on that thread. */
    S = ca_stacks_new(32);
    uint32_t main_id = thread_capture_one(), ids[2];
    pthread_t th;
    pthread_create(&th, NULL, thread_capture, ids);
    pthread_join(th, NULL);
    ck_assert_uint_eq(ids[0], ids[1]);
    ck_assert_uint_ne(ids[0], main_id);
    ca_stacks_free(S);
}
END_TEST

START_TEST(intern_dedups) {
    S = ca_stacks_new(4);
    uintptr_t a[] = {1, 2, 3}, b[] = {1, 2, 4}, c[] = {1, 2, 3, 9, 9, 9};
    uint32_t ia = ca_stacks_intern(S, a, 3), ib = ca_stacks_intern(S, b, 3);
    ck_assert_uint_ne(ia, ib);
    ck_assert_uint_eq(ca_stacks_intern(S, a, 3), ia);
    ck_assert_uint_ne(ca_stacks_intern(S, a, 2), ia);
    ck_assert_uint_ne(ca_stacks_intern(S, NULL, 0), CA_SITE_NONE);
    /* Truncated to max_frames (4). */
    uint32_t ic = ca_stacks_intern(S, c, 6);
    const uintptr_t *ips;
    ck_assert_uint_eq(ca_stacks_get(S, ic, &ips), 4);
    ck_assert_uint_eq(ips[3], 9);
    ck_assert_uint_eq(ca_stacks_get(S, 0, &ips), 0);
    ck_assert_uint_eq(ca_stacks_get(S, 999, &ips), 0);
    /* Many stacks: the index grows and every one is found again. */
    for (uintptr_t i = 0; i < 5000; i++) {
        uintptr_t st[2] = {i, i * 7};
        uint32_t id = ca_stacks_intern(S, st, 2);
        ck_assert_uint_eq(ca_stacks_intern(S, st, 2), id);
    }
    for (uintptr_t i = 0; i < 5000; i += 97) {
        uintptr_t st[2] = {i, i * 7};
        uint32_t id = ca_stacks_intern(S, st, 2);
        ck_assert_uint_eq(ca_stacks_get(S, id, &ips), 2);
        ck_assert_uint_eq(ips[0], i);
    }
    ca_stacks_free(S);
}
END_TEST

START_TEST(symbolized) {
    S = ca_stacks_new(32);
    uint32_t id = deep(3, 1);
    const uintptr_t *ips;
    unsigned n = ca_stacks_get(S, id, &ips);
    ck_assert_uint_ge(n, 5);
    ca_symtab *sym = ca_symtab_new();
    for (unsigned i = 0; i < n; i++) ca_symtab_add(sym, ips[i]);
    ck_assert_int_ge(ca_symtab_resolve(sym, 1, 10000), 1);
    /* Frame 0 is the caller of ca_stacks_capture: site_b, in this file. */
    const ca_frame *f = ca_symtab_get(sym, ips[0]);
    ck_assert_ptr_nonnull(f);
    ck_assert_str_eq(f->function, "site_b");
    ck_assert_ptr_nonnull(strstr(f->file, "test_stacks.c"));
    ck_assert_uint_gt(f->line, 0);
    ck_assert_str_eq(ca_symtab_get(sym, ips[1])->function, "deep");
    int seen_main = 0;
    for (unsigned i = 0; i < n; i++) seen_main |= !strcmp(ca_symtab_get(sym, ips[i])->function, "symbolized_fn");
    ck_assert_int_eq(seen_main, 1);
    /* Without addr2line: module and dladdr only, never NULL strings. */
    ca_symtab *bare = ca_symtab_new();
    ca_symtab_add(bare, ips[0]);
    ca_symtab_resolve(bare, 0, 0);
    ck_assert_ptr_nonnull(ca_symtab_get(bare, ips[0])->function);
    ck_assert_ptr_nonnull(strstr(ca_symtab_get(bare, ips[0])->module, "test_stacks"));
    ck_assert_ptr_null(ca_symtab_get(bare, 12345));
    ca_symtab_free(bare);
    ca_symtab_free(sym);
    ca_stacks_free(S);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("stacks");
    TCase *tc = tcase_create("stacks");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, same_site_same_id);
    tcase_add_test(tc, cache_hits_and_agrees);
    tcase_add_test(tc, a_run_of_one_site_checks_one_way);
    tcase_add_test(tc, an_outer_frame_tells_cached_stacks_apart);
    tcase_add_test(tc, frames_past_the_site_are_not_checked);
    tcase_add_test(tc, threads_share_the_table);
    tcase_add_test(tc, intern_dedups);
    tcase_add_test(tc, symbolized);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)
