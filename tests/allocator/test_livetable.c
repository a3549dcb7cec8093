/* Unit tests of the live table (allocator/livetable.h): open addressing by
 * address, blocks found through growth; collisions that wrap around the
 * table's end, removed from a cluster's middle and head (backward shift);
 * random adds and removes against a plain array; and through the allocator,
 * many live blocks freed in random order. */
#include <check.h>
#include <stdlib.h>

#include "allocator/internal.h"
#include "tests/check_run.h"

#define N 20000

static ca_block blocks[N];

static void add(ca_live_table *t, ca_block *b) {
    ck_assert(ca_live_reserve(t));
    ck_assert_ptr_null(ca_live_find(t, b->addr));
    ca_live_add(t, b->addr, b);
}

START_TEST(grows_and_finds_every_block) {
    ca_live_table t;
    ck_assert_int_eq(ca_live_init(&t), CA_OK);
    unsigned first_shift = t.shift;
    for (size_t i = 0; i < N; i++) {
        blocks[i].addr = 0x7f0000000000u + i * 4096 * 3; /* 512 B aligned, strided */
        add(&t, &blocks[i]);
    }
    ck_assert_uint_eq(t.count, N);
    ck_assert_uint_lt(t.shift, first_shift); /* it grew */
    ck_assert_uint_ge(t.mask + 1, 2 * N);    /* at most half full */
    for (size_t i = 0; i < N; i++) ck_assert_ptr_eq(ca_live_find(&t, blocks[i].addr), &blocks[i]);
    ck_assert_ptr_null(ca_live_find(&t, blocks[N - 1].addr + 512));
    /* remove every other block, then check both halves */
    for (size_t i = 0; i < N; i += 2) ca_live_remove(&t, blocks[i].addr);
    for (size_t i = 0; i < N; i++)
        ck_assert_ptr_eq(ca_live_find(&t, blocks[i].addr), i % 2 ? &blocks[i] : NULL);
    ck_assert_uint_eq(t.count, N / 2);
    ca_live_destroy(&t);
}
END_TEST

/* Addresses whose home is the table's last slot (searched for), and two
 * homed at slots 0 and 1: one cluster that wraps around the end. Removing
 * from its middle and its head must leave every other one found (a removal
 * that only emptied its slot would cut the cluster). */
START_TEST(collisions_wrap_around_and_shift_back) {
    ca_live_table t;
    ck_assert_int_eq(ca_live_init(&t), CA_OK);
    while (t.mask + 1 < 1024) ck_assert(ca_live_grow(&t));
    ck_assert_uint_eq(t.mask, 1023);
    size_t n = 0;
    uintptr_t addr = 512;
    for (; n < 10; addr += 512)
        if (ca_live_slot_of(&t, addr) == t.mask) blocks[n++].addr = addr;
    for (int home = 0; home < 2; addr += 512)
        if (ca_live_slot_of(&t, addr) == (size_t)home) blocks[n++].addr = addr, home++;
    ck_assert_uint_eq(n, 12);
    for (size_t i = 0; i < n; i++) add(&t, &blocks[i]);
    ck_assert_uint_eq(t.mask, 1023); /* no growth: the collisions are real */
    ck_assert_uint_eq(t.slots[t.mask].addr, blocks[0].addr); /* the first at home, the rest wrapped */
    ck_assert_uint_eq(t.slots[0].addr, blocks[1].addr);
    size_t order[] = {4, 0, 10, 9, 1};
    bool gone[12] = {0};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        ca_live_remove(&t, blocks[order[k]].addr);
        gone[order[k]] = true;
        for (size_t i = 0; i < n; i++) ck_assert_ptr_eq(ca_live_find(&t, blocks[i].addr), gone[i] ? NULL : &blocks[i]);
        ck_assert_uint_eq(t.count, n - k - 1);
    }
    /* and back in */
    for (size_t i = 0; i < n; i++)
        if (gone[i]) add(&t, &blocks[i]);
    for (size_t i = 0; i < n; i++) ck_assert_ptr_eq(ca_live_find(&t, blocks[i].addr), &blocks[i]);
    ca_live_destroy(&t);
}
END_TEST

/* 200,000 random adds and removes over 3,000 addresses of a small range (so
 * that clusters form), each checked against a plain array; the removals
 * start from the last look-up's slot, or not (a stale one). */
START_TEST(random_adds_and_removes_match_an_array) {
    enum { ADDRS = 3000 };
    ca_live_table t;
    ck_assert_int_eq(ca_live_init(&t), CA_OK);
    static bool in[ADDRS];
    for (size_t i = 0; i < ADDRS; i++) blocks[i].addr = 0x10000 + i * 512;
    srand(11);
    size_t live = 0;
    for (int step = 0; step < 200000; step++) {
        size_t i = (size_t)rand() % ADDRS;
        if (!in[i]) {
            add(&t, &blocks[i]);
            in[i] = true, live++;
        } else {
            if (rand() % 2) ck_assert_ptr_eq(ca_live_find(&t, blocks[i].addr), &blocks[i]);
            ca_live_remove(&t, blocks[i].addr);
            in[i] = false, live--;
        }
        ck_assert_uint_eq(t.count, live);
        size_t j = (size_t)rand() % ADDRS;
        ck_assert_ptr_eq(ca_live_find(&t, blocks[j].addr), in[j] ? &blocks[j] : NULL);
    }
    for (size_t i = 0; i < ADDRS; i++) ck_assert_ptr_eq(ca_live_find(&t, blocks[i].addr), in[i] ? &blocks[i] : NULL);
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
    tcase_add_test(tc, collisions_wrap_around_and_shift_back);
    tcase_add_test(tc, random_adds_and_removes_match_an_array);
    tcase_add_test(tc, allocator_frees_in_random_order);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
