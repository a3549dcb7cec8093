/* The count backend: unique aligned fake addresses, exact accounting, argument
 * checks, and cheap enough for a replay of millions of operations. */
#define _GNU_SOURCE
#include <check.h>

#include "tests/check_run.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "allocator/backend.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define G2 (2 * MiB)

static ca_backend *count(size_t capacity, size_t granule)
{
    ca_backend *be = ca_backend_count_new(capacity, granule);
    ck_assert_ptr_nonnull(be);
    return be;
}

START_TEST(new_validates)
{
    ck_assert_ptr_null(ca_backend_count_new(GiB, 0));
    ck_assert_ptr_null(ca_backend_count_new(GiB, 3 * MiB));
    ck_assert_ptr_null(ca_backend_count_new(MiB, G2)); /* not one whole granule */
    ca_backend *be = count(5 * MiB, G2);
    ck_assert_str_eq(be->name, "count");
    ck_assert_uint_eq(be->granule, G2);
    ck_assert_ptr_null(be->event_record);
    ck_assert_ptr_null(be->stream_wait);
    ck_assert_ptr_null(be->event_destroy);
    ck_assert_ptr_null(be->stream_sync);
    size_t fr, tot;
    ck_assert_int_eq(be->mem_info(be->self, &fr, &tot), CA_OK);
    ck_assert_uint_eq(tot, 4 * MiB); /* whole granules */
    ck_assert_uint_eq(fr, 4 * MiB);
    be->destroy(be);
}
END_TEST

typedef struct range {
    uintptr_t base;
    size_t size;
} range;

static int by_base(const void *a, const void *b)
{
    const range *x = a, *y = b;
    return x->base < y->base ? -1 : x->base > y->base;
}

START_TEST(addresses_are_unique_aligned_and_apart)
{
    ca_backend *be = count(0, G2);
    enum { N = 3000 };
    static range r[N];
    for (int i = 0; i < N; i++) {
        r[i].size = (size_t)(1 + i % 7) * G2;
        if (i % 3 == 2) {
            r[i].size = (size_t)(1 + i % 5) * 12345; /* any size for a fixed allocation */
            ck_assert_int_eq(be->fixed_alloc(be->self, r[i].size, &r[i].base), CA_OK);
        } else {
            ck_assert_int_eq(be->reserve(be->self, r[i].size, &r[i].base), CA_OK);
        }
        ck_assert_uint_eq(r[i].base % G2, 0);
        ck_assert_uint_ge(r[i].base, 0x100000000000ull);
    }
    qsort(r, N, sizeof r[0], by_base);
    for (int i = 1; i < N; i++) /* no overlap, and a gap between neighbours */
        ck_assert_uint_gt(r[i].base, r[i - 1].base + r[i - 1].size);
    /* Unreserving does not make an address come back. */
    uintptr_t again;
    ck_assert_int_eq(be->unreserve(be->self, r[0].base, r[0].size), CA_OK);
    ck_assert_int_eq(be->reserve(be->self, G2, &again), CA_OK);
    ck_assert_uint_gt(again, r[N - 1].base);
    be->destroy(be);
}
END_TEST

START_TEST(capacity_accounting)
{
    ca_backend *be = count(10 * G2, G2);
    void *s = be->self;
    ca_handle a, b, c, d;
    uintptr_t f;
    size_t fr, tot;
    ck_assert_int_eq(be->create(s, 6 * G2, &a), CA_OK);
    ck_assert_int_eq(be->create(s, 3 * G2, &b), CA_OK);
    ck_assert_uint_ne(a, b);
    ck_assert_uint_ne(a, 0);
    ck_assert_uint_eq(ca_backend_used(be), 9 * G2);
    ck_assert_int_eq(be->create(s, 2 * G2, &c), CA_ERR_OOM);
    ck_assert_int_eq(be->fixed_alloc(s, G2 + 1, &f), CA_ERR_OOM); /* counts 2 granules */
    ck_assert_int_eq(be->fixed_alloc(s, 1, &f), CA_OK);
    ck_assert_int_eq(be->mem_info(s, &fr, &tot), CA_OK);
    ck_assert_uint_eq(fr, 0);
    ck_assert_uint_eq(tot, 10 * G2);
    ck_assert_int_eq(be->create(s, G2, &c), CA_ERR_OOM);
    ck_assert_int_eq(be->create(s, SIZE_MAX & ~(G2 - 1), &c), CA_ERR_OOM);
    ck_assert_int_eq(be->release(s, a), CA_OK);
    ck_assert_uint_eq(ca_backend_used(be), 4 * G2);
    ck_assert_int_eq(be->create(s, 6 * G2, &c), CA_OK);
    ck_assert_uint_ne(c, a); /* a released handle never comes back */
    ck_assert_int_eq(be->release(s, a), CA_ERR_INVALID);
    ck_assert_int_eq(be->fixed_free(s, f, 1), CA_OK);
    ck_assert_int_eq(be->create(s, G2, &d), CA_OK);
    ck_assert_int_eq(be->release(s, b), CA_OK);
    ck_assert_int_eq(be->release(s, c), CA_OK);
    ck_assert_int_eq(be->release(s, d), CA_OK);
    ck_assert_uint_eq(ca_backend_used(be), 0);
    ck_assert_int_eq(be->mem_info(s, &fr, NULL), CA_OK);
    ck_assert_uint_eq(fr, 10 * G2);
    be->destroy(be);
}
END_TEST

START_TEST(unlimited_measures_any_size)
{
    ca_backend *be = count(0, G2);
    size_t fr, tot;
    ck_assert_int_eq(be->mem_info(be->self, &fr, &tot), CA_OK);
    ck_assert_uint_eq(tot, SIZE_MAX);
    ca_handle h[3];
    uintptr_t base;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(be->create(be->self, (size_t)1 << 50, &h[i]), CA_OK); /* 1 PiB */
    ck_assert_uint_eq(ca_backend_used(be), (size_t)3 << 50);
    ck_assert_int_eq(be->reserve(be->self, (size_t)4 << 50, &base), CA_OK);
    ck_assert_int_eq(be->map(be->self, base, (size_t)1 << 50, h[1]), CA_OK);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(be->release(be->self, h[i]), CA_OK);
    ck_assert_uint_eq(ca_backend_used(be), 0);
    /* The fake address space runs out one day: an error, not a wrap-around. */
    int rc = CA_OK;
    for (int i = 0; i < 100 && rc == CA_OK; i++) rc = be->reserve(be->self, (size_t)1 << 62, &base);
    ck_assert_int_eq(rc, CA_ERR_OOM);
    be->destroy(be);
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
    ca_backend *be = count(0, G2);
    void *s = be->self;
    uintptr_t base, f;
    ca_handle h, h2;
    ck_assert_int_eq(be->reserve(s, 0, &base), CA_ERR_INVALID);
    ck_assert_int_eq(be->reserve(s, MiB, &base), CA_ERR_INVALID);
    ck_assert_int_eq(be->reserve(s, G2, NULL), CA_ERR_INVALID);
    ck_assert_int_eq(be->create(s, 0, &h), CA_ERR_INVALID);
    ck_assert_int_eq(be->create(s, G2 + 512, &h), CA_ERR_INVALID);
    ck_assert_int_eq(be->create(s, G2, NULL), CA_ERR_INVALID);
    ck_assert_int_eq(be->reserve(s, 4 * G2, &base), CA_OK);
    ck_assert_int_eq(be->create(s, 2 * G2, &h), CA_OK);

    ck_assert_int_eq(be->map(s, base + 4096, 2 * G2, h), CA_ERR_INVALID);
    ck_assert_int_eq(be->map(s, base, G2 + 4096, h), CA_ERR_INVALID);
    ck_assert_int_eq(be->map(s, base, 0, h), CA_ERR_INVALID);
    ck_assert_int_eq(be->map(s, 0, G2, h), CA_ERR_INVALID);
    ck_assert_int_eq(be->map(s, base, 3 * G2, h), CA_ERR_INVALID); /* more than the handle */
    ck_assert_int_eq(be->map(s, base, G2, 0), CA_ERR_INVALID);
    ck_assert_int_eq(be->map(s, base, G2, h + 1), CA_ERR_INVALID);
    ck_assert_int_eq(be->map(s, base, G2, h ^ (1ull << 33)), CA_ERR_INVALID);
    ck_assert_int_eq(be->map(s, base, 2 * G2, h), CA_OK);
    ck_assert_int_eq(be->map(s, base + 2 * G2, G2, h), CA_OK); /* part of it, elsewhere */
    ck_assert_int_eq(be->unmap(s, base + 1, G2), CA_ERR_INVALID);
    ck_assert_int_eq(be->unmap(s, base, G2 - 1), CA_ERR_INVALID);
    ck_assert_int_eq(be->unmap(s, base, 0), CA_ERR_INVALID);
    ck_assert_int_eq(be->unmap(s, base, 2 * G2), CA_OK);
    ck_assert_int_eq(be->unreserve(s, base + 4096, 4 * G2), CA_ERR_INVALID);
    ck_assert_int_eq(be->unreserve(s, base, 4 * G2 - 1), CA_ERR_INVALID);
    ck_assert_int_eq(be->unreserve(s, base, 4 * G2), CA_OK);

    ck_assert_int_eq(be->release(s, 0), CA_ERR_INVALID);
    ck_assert_int_eq(be->release(s, 77), CA_ERR_INVALID);
    ck_assert_int_eq(be->release(s, h), CA_OK);
    ck_assert_int_eq(be->release(s, h), CA_ERR_INVALID);
    ck_assert_int_eq(be->map(s, base, G2, h), CA_ERR_INVALID); /* released */
    ck_assert_int_eq(be->create(s, G2, &h2), CA_OK);
    ck_assert_uint_ne(h2, h);
    ck_assert_int_eq(be->release(s, h), CA_ERR_INVALID); /* stale, though its slot is reused */
    ck_assert_int_eq(be->release(s, h2), CA_OK);

    ck_assert_int_eq(be->fixed_alloc(s, 0, &f), CA_ERR_INVALID);
    ck_assert_int_eq(be->fixed_alloc(s, 10, NULL), CA_ERR_INVALID);
    ck_assert_int_eq(be->fixed_alloc(s, SIZE_MAX, &f), CA_ERR_INVALID);
    ck_assert_int_eq(be->fixed_alloc(s, 1000, &f), CA_OK);
    ck_assert_int_eq(be->fixed_free(s, f + G2, 1000), CA_ERR_INVALID);
    ck_assert_int_eq(be->fixed_free(s, f, 999), CA_ERR_INVALID);
    ck_assert_int_eq(be->fixed_free(s, f, G2), CA_OK); /* the rounded size names it too */
    ck_assert_int_eq(be->fixed_free(s, f, 1000), CA_ERR_INVALID);
    ck_assert_uint_eq(ca_backend_used(be), 0);
    be->destroy(be);
}
END_TEST

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* On the replay path: create + map + unmap + release must cost next to nothing.
 * The bound is loose (sanitizer builds run it too); the figure is printed. */
START_TEST(cheap_enough_for_replay)
{
    ca_backend *be = count(0, G2);
    void *s = be->self;
    uintptr_t base;
    ck_assert_int_eq(be->reserve(s, 64 * G2, &base), CA_OK);
    enum { N = 1000000, LIVE = 64 };
    ca_handle h[LIVE] = {0};
    double t0 = now();
    int bad = 0;
    for (int i = 0; i < N; i++) {
        int k = i % LIVE;
        uintptr_t at = base + (size_t)k * G2;
        if (h[k]) bad |= be->unmap(s, at, G2) | be->release(s, h[k]);
        bad |= be->create(s, G2, &h[k]) | be->map(s, at, G2, h[k]);
    }
    double dt = now() - t0;
    ck_assert_int_eq(bad, 0);
    ck_assert_uint_eq(ca_backend_used(be), LIVE * G2);
    printf("count backend: %.1f ns per create+map+unmap+release\n", dt / N * 1e9);
    ck_assert(dt < 2.0);
    be->destroy(be);
}
END_TEST

static void *churn(void *arg)
{
    ca_backend *be = arg;
    long bad = 0;
    for (int i = 0; i < 100000; i++) {
        ca_handle h;
        uintptr_t a;
        if (be->create(be->self, G2, &h) != CA_OK) bad++;
        if (be->reserve(be->self, G2, &a) != CA_OK) bad++;
        if (be->release(be->self, h) != CA_OK) bad++;
    }
    return (void *)bad;
}

START_TEST(threads_share_one_backend)
{
    ca_backend *be = count(0, G2);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, churn, be), 0);
    for (int i = 0; i < 4; i++) {
        void *bad;
        pthread_join(t[i], &bad);
        ck_assert_ptr_null(bad);
    }
    ck_assert_uint_eq(ca_backend_used(be), 0);
    be->destroy(be);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend_count");
    TCase *tc = tcase_create("count");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, new_validates);
    tcase_add_test(tc, addresses_are_unique_aligned_and_apart);
    tcase_add_test(tc, capacity_accounting);
    tcase_add_test(tc, unlimited_measures_any_size);
    tcase_add_test(tc, bad_arguments_are_refused);
    tcase_add_test(tc, cheap_enough_for_replay);
    tcase_add_test(tc, threads_share_one_backend);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
