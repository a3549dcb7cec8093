/* Unit tests of the live table (allocator/livetable.h): blocks found by
 * address through growth, removal in any order and chains that share a
 * bucket; and through the allocator, many live blocks freed in random order. */
#include <check.h>
#include <stdlib.h>

#include "allocator/internal.h"
#include "tests/check_run.h"

#define N 20000

static ca_block blocks[N];

START_TEST(grows_and_finds_every_block) {
    ca_live_table t;
    ck_assert_int_eq(ca_live_init(&t), CA_OK);
    unsigned first_shift = t.shift;
    for (size_t i = 0; i < N; i++) {
        blocks[i].addr = 0x7f0000000000u + i * 4096 * 3; /* 512 B aligned, strided */
        ca_live_add(&t, &blocks[i]);
    }
    ck_assert_uint_eq(t.count, N);
    ck_assert_uint_lt(t.shift, first_shift); /* it grew: chains stay short */
    ck_assert_uint_ge((size_t)1 << (64 - t.shift), N);
    for (size_t i = 0; i < N; i++) ck_assert_ptr_eq(ca_live_find(&t, blocks[i].addr), &blocks[i]);
    ck_assert_ptr_null(ca_live_find(&t, blocks[N - 1].addr + 512));
    /* remove every other block, then check both halves */
    for (size_t i = 0; i < N; i += 2) ca_live_remove(&t, &blocks[i]);
    for (size_t i = 0; i < N; i++)
        ck_assert_ptr_eq(ca_live_find(&t, blocks[i].addr), i % 2 ? &blocks[i] : NULL);
    ck_assert_uint_eq(t.count, N / 2);
    ca_live_destroy(&t);
}
END_TEST

/* Eight addresses that share a bucket (searched for): a chain, removed
 * from its middle and its head. */
START_TEST(one_bucket_chain) {
    ca_live_table t;
    ck_assert_int_eq(ca_live_init(&t), CA_OK);
    size_t slot = ca_live_slot(&t, 512), n = 0;
    unsigned shift = t.shift;
    for (uintptr_t addr = 512; n < 8; addr += 512)
        if (ca_live_slot(&t, addr) == slot) blocks[n++].addr = addr;
    for (size_t i = 0; i < 8; i++) ca_live_add(&t, &blocks[i]);
    ck_assert_uint_eq(t.shift, shift); /* no growth: the chain is real */
    ca_live_remove(&t, &blocks[3]);
    ca_live_remove(&t, &blocks[7]); /* the head: added last */
    for (size_t i = 0; i < 8; i++)
        ck_assert_ptr_eq(ca_live_find(&t, blocks[i].addr), i == 3 || i == 7 ? NULL : &blocks[i]);
    ca_live_destroy(&t);
}
END_TEST

START_TEST(allocator_frees_in_random_order) {
    ca_backend *be = ca_backend_count_new(0, 2u << 20);
    ca_options o;
    ca_options_default(&o);
    ca_allocator *a;
    ck_assert_int_eq(ca_allocator_new(be, &o, &a), CA_OK);
    static void *p[N];
    for (size_t i = 0; i < N; i++) ck_assert_int_eq(ca_malloc(a, 512 + (i % 7) * 4096, 0, &p[i], NULL), CA_OK);
    srand(7);
    for (size_t i = N - 1; i > 0; i--) {
        size_t j = (size_t)rand() % (i + 1);
        void *x = p[i];
        p[i] = p[j];
        p[j] = x;
    }
    for (size_t i = 0; i < N; i++) {
        ck_assert_int_eq(ca_free(a, p[i], 0), CA_OK);
        ck_assert_int_eq(ca_free(a, p[i], 0), CA_ERR_INVALID); /* no longer live */
    }
    ca_stats s;
    ca_get_stats(a, &s);
    ck_assert_int_eq(s.allocation[CA_POOL_ALL].current, 0);
    ca_allocator_destroy(a);
}
END_TEST

int main(void) {
    Suite *s = suite_create("livetable");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, grows_and_finds_every_block);
    tcase_add_test(tc, one_bucket_chain);
    tcase_add_test(tc, allocator_frees_in_random_order);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
