/* Unit tests of the free index (allocator/freeindex.c): blocks of sizes on
 * both sides of 32 KiB (exact bins listed, the others in treaps), inserted
 * and removed in random order; every walk (largest down, best fit up, the
 * whole) sees each indexed block once, in order, and best fit is the
 * smallest that fits, the one freed last among equals under 32 KiB. */
#include <check.h>
#include <stdlib.h>

#include "allocator/internal.h"
#include "tests/check_run.h"

#define N 4000

static ca_block blocks[N];
static ca_segment no_edges; /* the blocks' segment: no bitmap of free edges */
static bool in[N];

static void count_cb(void *ctx, ca_block *b) {
    (void)b;
    (*(size_t *)ctx)++;
}

/* The index holds exactly the blocks marked in, in order both ways. */
static void check_walks(ca_free_index *fi) {
    size_t want = 0, seen = 0, walked = 0;
    for (int i = 0; i < N; i++) want += in[i];
    ck_assert_uint_eq(fi->count, want);
    ca_block *prev = NULL;
    for (ca_block *b = ca_free_index_largest(fi); b; b = ca_free_index_smaller(fi, b), seen++) {
        ck_assert(in[b - blocks]);
        if (prev) ck_assert_uint_le(b->size, prev->size);
        prev = b;
    }
    ck_assert_uint_eq(seen, want);
    seen = 0;
    prev = NULL;
    for (ca_block *b = ca_free_index_best_fit(fi, 1); b; b = ca_free_index_larger(fi, b), seen++) {
        if (prev) ck_assert_uint_ge(b->size, prev->size);
        prev = b;
    }
    ck_assert_uint_eq(seen, want);
    ca_free_index_walk(fi, count_cb, &walked);
    ck_assert_uint_eq(walked, want);
}

START_TEST(every_walk_sees_every_block_in_order) {
    static ca_free_index fi;
    srand(29);
    for (int i = 0; i < N; i++) {
        blocks[i].addr = 0x7f0000000000u + (uintptr_t)i * (1u << 20);
        blocks[i].seg = &no_edges;
        blocks[i].size = CA_ROUND * (1 + (size_t)rand() % (rand() % 2 ? 64 : 4096)); /* 512 B to 2 MiB */
    }
    for (int round = 0; round < 6; round++) {
        for (int k = 0; k < N; k++) {
            int i = rand() % N;
            if (in[i]) ca_free_index_remove(&fi, &blocks[i]);
            else ca_free_index_insert(&fi, &blocks[i]);
            in[i] = !in[i];
        }
        check_walks(&fi);
    }
    /* best fit: the smallest block that fits */
    for (int k = 0; k < 200; k++) {
        size_t size = CA_ROUND * (1 + (size_t)rand() % 4096), best = SIZE_MAX;
        for (int i = 0; i < N; i++)
            if (in[i] && blocks[i].size >= size && blocks[i].size < best) best = blocks[i].size;
        ca_block *b = ca_free_index_best_fit(&fi, size);
        if (best == SIZE_MAX) ck_assert_ptr_null(b);
        else ck_assert_uint_eq(b->size, best);
    }
    for (int i = 0; i < N; i++)
        if (in[i]) ca_free_index_remove(&fi, &blocks[i]), in[i] = false;
    check_walks(&fi);
}
END_TEST

START_TEST(equal_sizes_under_32_kib_come_newest_first) {
    static ca_free_index fi;
    ca_block b[3] = {{.addr = 0x1000, .size = 4096, .seg = &no_edges},
                     {.addr = 0x9000, .size = 4096, .seg = &no_edges},
                     {.addr = 0x5000, .size = 4096, .seg = &no_edges}};
    ca_block big[2] = {{.addr = 0x90000, .size = 65536, .seg = &no_edges},
                       {.addr = 0x10000, .size = 65536, .seg = &no_edges}};
    for (int i = 0; i < 3; i++) ca_free_index_insert(&fi, &b[i]);
    for (int i = 0; i < 2; i++) ca_free_index_insert(&fi, &big[i]);
    ck_assert_ptr_eq(ca_free_index_best_fit(&fi, 4096), &b[2]);
    ca_free_index_remove(&fi, &b[2]);
    ck_assert_ptr_eq(ca_free_index_best_fit(&fi, 4096), &b[1]);
    ca_free_index_remove(&fi, &b[1]);
    ck_assert_ptr_eq(ca_free_index_best_fit(&fi, 4096), &b[0]);
    ck_assert_ptr_eq(ca_free_index_best_fit(&fi, 40000), &big[1]); /* the lower address */
}
END_TEST

/* A list's tail (the index keeps it: a block's links stay in its first 64
 * bytes) follows removals at either end: the largest walk starts there. */
START_TEST(a_list_keeps_its_tail) {
    static ca_free_index fi;
    ca_block b[3] = {{.addr = 0x1000, .size = 4096, .seg = &no_edges},
                     {.addr = 0x9000, .size = 4096, .seg = &no_edges},
                     {.addr = 0x5000, .size = 4096, .seg = &no_edges}};
    for (int i = 0; i < 3; i++) ca_free_index_insert(&fi, &b[i]); /* listed b2, b1, b0 */
    ck_assert_ptr_eq(ca_free_index_largest(&fi), &b[0]);
    ca_free_index_remove(&fi, &b[0]); /* the tail */
    ck_assert_ptr_eq(ca_free_index_largest(&fi), &b[1]);
    ca_free_index_remove(&fi, &b[2]); /* the head */
    ck_assert_ptr_eq(ca_free_index_largest(&fi), &b[1]);
    ck_assert_ptr_null(ca_free_index_smaller(&fi, &b[1]));
    ca_free_index_remove(&fi, &b[1]);
    ck_assert_ptr_null(ca_free_index_largest(&fi));
    ca_free_index_insert(&fi, &b[2]);
    ck_assert_ptr_eq(ca_free_index_largest(&fi), &b[2]);
    ck_assert_ptr_eq(ca_free_index_best_fit(&fi, 4096), &b[2]);
}
END_TEST

int main(void) {
    Suite *s = suite_create("freeindex");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, every_walk_sees_every_block_in_order);
    tcase_add_test(tc, equal_sizes_under_32_kib_come_newest_first);
    tcase_add_test(tc, a_list_keeps_its_tail);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
