/* Unit tests of the allocator core over the count and host backends. */
#include <check.h>

#include "tests/check_run.h"
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "tests/allocator/helpers.h"


static ca_allocator *make(int expandable, size_t capacity, int host) {
    ca_options opt;
    ca_options_default(&opt);
    opt.expandable = expandable;
    return new_allocator(host ? ca_backend_host_new(capacity, G) : ca_backend_count_new(capacity, G), &opt);
}

START_TEST(rounds_and_counts) {
    ca_allocator *a = make(1, 0, 0);
    void *p = must_alloc(a, 1000, 0);
    ck_assert_uint_eq((uintptr_t)p % 512, 0);
    ca_stats s = stats(a);
    ck_assert_int_eq(s.allocated_bytes[CA_POOL_ALL].current, 1024);
    ck_assert_int_eq(s.requested_bytes[CA_POOL_ALL].current, 1000);
    ck_assert_int_eq(s.allocation[CA_POOL_SMALL].current, 1);
    ck_assert_int_eq(s.allocation[CA_POOL_LARGE].current, 0);
    ck_assert_int_eq(s.reserved_bytes[CA_POOL_ALL].current, (int64_t)G);
    size_t req = 0;
    ck_assert(ca_owns(a, p, &req));
    ck_assert_uint_eq(req, 1000);
    ck_assert_int_eq(ca_free(a, p, 0), CA_OK);
    s = stats(a);
    ck_assert_int_eq(s.allocated_bytes[CA_POOL_ALL].current, 0);
    ck_assert_int_eq(s.allocated_bytes[CA_POOL_ALL].peak, 1024);
    ck_assert_int_eq(s.allocated_bytes[CA_POOL_ALL].allocated, 1024);
    ck_assert_int_eq(s.allocated_bytes[CA_POOL_ALL].freed, 1024);
    ck_assert_int_eq(s.reserved_bytes[CA_POOL_ALL].current, (int64_t)G); /* cached */
    ck_assert(!ca_owns(a, p, NULL));
    ca_allocator_destroy(a);
}
END_TEST

START_TEST(zero_and_huge_sizes) {
    ca_allocator *a = make(1, 64 * MIB, 0);
    void *p = (void *)1;
    ck_assert_int_eq(ca_malloc(a, 0, 0, &p, NULL), CA_ERR_INVALID);
    ck_assert_int_eq(ca_malloc(a, SIZE_MAX, 0, &p, NULL), CA_ERR_OOM);
    ck_assert_int_eq(ca_malloc(a, SIZE_MAX / 2, 0, &p, NULL), CA_ERR_OOM);
    ca_allocator_destroy(a);
}
END_TEST

START_TEST(double_free_changes_nothing) {
    for (int exp = 0; exp <= 1; exp++) {
        ca_allocator *a = make(exp, 0, 0);
        void *p = must_alloc(a, 4096, 0), *q = must_alloc(a, 3 * MIB, 0);
        ck_assert_int_eq(ca_free(a, p, 0), CA_OK);
        ca_stats before = stats(a);
        ck_assert_int_eq(ca_free(a, p, 0), CA_ERR_INVALID);
        ck_assert_int_eq(ca_free(a, (char *)q + 512, 0), CA_ERR_INVALID);
        ck_assert_int_eq(ca_free(a, (void *)0x1234, 0), CA_ERR_INVALID);
        ck_assert(ca_contains(a, p) && ca_contains(a, (char *)q + 512));
        ck_assert(!ca_contains(a, (void *)0x1234));
        ca_stats after = stats(a);
        ck_assert_mem_eq(&before, &after, sizeof before);
        ck_assert_int_eq(ca_free(a, q, 0), CA_OK);
        ca_allocator_destroy(a);
    }
}
END_TEST

/* Best fit; between blocks of one size under 32 KiB, the one freed last
 * (its lines in the caches: issue 29), above it the lowest address. */
START_TEST(best_fit_ties_by_address) {
    ca_allocator *a = make(1, 0, 0);
    /* Holes of 3, 2, 2 and 4 KiB, each between live blocks. */
    size_t sizes[] = {3072, 512, 2048, 512, 2048, 512, 4096, 512};
    void *p[8];
    for (int i = 0; i < 8; i++) p[i] = must_alloc(a, sizes[i], 0);
    for (int i = 0; i < 8; i += 2) ca_free(a, p[i], 0);
    /* 2 KiB: both 2 KiB holes fit exactly; the one freed last wins. */
    ck_assert_ptr_eq(must_alloc(a, 2000, 0), p[4]);
    ck_assert_ptr_eq(must_alloc(a, 2048, 0), p[2]);
    /* 2.5 KiB: the 3 KiB hole is the best fit, not the 4 KiB one. */
    ck_assert_ptr_eq(must_alloc(a, 2560, 0), p[0]);
    ck_assert_ptr_eq(must_alloc(a, 4000, 0), p[6]);
    ca_allocator_destroy(a);
}
END_TEST

struct walk {
    int segments, blocks, free_blocks;
    size_t free_bytes, mapped;
};
static void on_seg(void *ctx, const ca_segment_view *s) {
    struct walk *w = ctx;
    w->segments++;
    w->mapped += s->mapped;
}
static void on_blk(void *ctx, const ca_segment_view *s, const ca_block_view *b) {
    struct walk *w = ctx;
    w->blocks++;
    if (b->state == CA_BLOCK_FREE) {
        w->free_blocks++;
        w->free_bytes += b->size;
    }
    ck_assert(b->addr >= s->base && b->addr + b->size <= s->base + s->size);
}

START_TEST(neighbours_merge) {
    for (int exp = 0; exp <= 1; exp++) {
        ca_allocator *a = make(exp, 0, 0);
        void *p[5];
        for (int i = 0; i < 5; i++) p[i] = must_alloc(a, 2 * MIB + 4096, 0);
        int order[] = {1, 3, 2, 0, 4};
        for (int i = 0; i < 5; i++) ck_assert_int_eq(ca_free(a, p[order[i]], 0), CA_OK);
        struct walk w = {0};
        ca_visit(a, on_seg, on_blk, &w);
        ck_assert_int_eq(w.free_blocks, w.segments); /* one free block per segment */
        ck_assert_int_eq(w.blocks, w.segments);
        ca_allocator_destroy(a);
    }
}
END_TEST

START_TEST(granules_mapped_on_demand_and_released_anywhere) {
    ca_allocator *a = make(1, 0, 0);
    void *x = must_alloc(a, 5 * MIB, 0);
    ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_ALL].current, (int64_t)(6 * MIB));
    void *y = must_alloc(a, 8 * MIB, 0), *z = must_alloc(a, 2 * MIB, 0);
    int64_t before = stats(a).reserved_bytes[CA_POOL_ALL].current;
    ck_assert_int_eq(ca_free(a, y, 0), CA_OK); /* a hole in the middle */
    ca_release(a);
    int64_t after = stats(a).reserved_bytes[CA_POOL_ALL].current;
    /* y spanned [5, 13) MiB: granules [6,12) MiB lie wholly inside the hole. */
    ck_assert_int_eq(before - after, (int64_t)(6 * MIB));
    ck_assert(ca_owns(a, x, NULL) && ca_owns(a, z, NULL));
    /* The hole is served again, its granules mapped back. */
    ck_assert_ptr_eq(must_alloc(a, 8 * MIB, 0), y);
    ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_ALL].current, before);
    ca_allocator_destroy(a);
}
END_TEST

/* Capacity 64 MiB filled with 4 MiB blocks; every other one freed (the
 * holes hold at least 28 MiB); then one 16 MiB request. Expandable segments
 * move the holes' granules where the request needs them, at once; classic
 * ones give their free segments back and retry (and fail). */
static int fragmented_then_large(int expandable, ca_oom_info *oom) {
    ca_allocator *a = make(expandable, 64 * MIB, 0);
    void *p[16];
    int n = 0;
    while (n < 16 && ca_malloc(a, 4 * MIB, 0, &p[n], NULL) == CA_OK) n++;
    ck_assert_int_ge(n, 15);
    for (int i = 0; i < n; i += 2) ca_free(a, p[i], 0);
    ca_stats before = stats(a), after;
    void *big;
    int rc = ca_malloc(a, 16 * MIB, 0, &big, oom);
    after = stats(a);
    ck_assert_int_eq(after.num_alloc_retries - before.num_alloc_retries, !expandable);
    ck_assert_int_eq(after.num_granules_moved - before.num_granules_moved, expandable ? 8 : 0);
    ck_assert_int_eq(after.num_device_alloc, before.num_device_alloc);
    ck_assert_int_eq(after.num_ooms - before.num_ooms, rc == CA_OK ? 0 : 1);
    ca_allocator_destroy(a);
    return rc;
}

START_TEST(fragmentation_is_no_reason_to_fail) {
    ca_oom_info oom;
    ck_assert_int_eq(fragmented_then_large(1, &oom), CA_OK);
    memset(&oom, 0, sizeof oom);
    /* Classic segments (20 MiB each) cannot move memory: the request fails
     * although the free bytes exceed it, and the figures say so. */
    ck_assert_int_eq(fragmented_then_large(0, &oom), CA_ERR_OOM);
    ck_assert_uint_eq(oom.requested, 16 * MIB);
    ck_assert_uint_eq(oom.device_total, 64 * MIB);
    ck_assert_uint_lt(oom.largest_free, 16 * MIB);
    ck_assert_uint_ge(oom.free_cached + oom.device_free, 16 * MIB);
}
END_TEST

START_TEST(oom_then_goes_on) {
    ca_allocator *a = make(1, 32 * MIB, 1);
    void *p = must_alloc(a, 20 * MIB, 0), *q;
    ca_oom_info oom;
    ck_assert_int_eq(ca_malloc(a, 16 * MIB, 0, &q, &oom), CA_ERR_OOM);
    ck_assert_uint_eq(oom.requested, 16 * MIB);
    ck_assert_uint_eq(oom.allocated, 20 * MIB);
    ck_assert_uint_eq(oom.reserved, 20 * MIB);
    ck_assert_uint_eq(oom.device_free, 12 * MIB);
    ca_stats s = stats(a);
    ck_assert_int_eq(s.num_ooms, 1);
    ck_assert_int_eq(s.num_alloc_retries, 1);
    ck_assert_int_eq(s.allocated_bytes[CA_POOL_ALL].current, (int64_t)(20 * MIB));
    memset(p, 0xab, 20 * MIB); /* still ours and usable */
    ck_assert_int_eq(ca_free(a, p, 0), CA_OK);
    q = must_alloc(a, 30 * MIB, 0);
    memset(q, 0xcd, 30 * MIB);
    ca_allocator_destroy(a);
}
END_TEST

START_TEST(max_reserved_caps) {
    ca_backend *be = ca_backend_count_new(0, G);
    ca_options opt;
    ca_options_default(&opt);
    opt.max_reserved = 8 * MIB;
    ca_allocator *a;
    ck_assert_int_eq(ca_allocator_new(be, &opt, &a), CA_OK);
    void *p = must_alloc(a, 6 * MIB, 0), *q;
    ca_oom_info oom;
    ck_assert_int_eq(ca_malloc(a, 3 * MIB, 0, &q, &oom), CA_ERR_OOM);
    ck_assert_uint_eq(oom.device_total, 8 * MIB); /* the cap is the device */
    ck_assert_uint_eq(oom.device_free, 2 * MIB);
    q = must_alloc(a, 2 * MIB, 0);
    ck_assert_int_le(stats(a).reserved_bytes[CA_POOL_ALL].peak, (int64_t)(8 * MIB));
    ca_free(a, p, 0);
    ca_free(a, q, 0);
    ca_allocator_destroy(a);
}
END_TEST

START_TEST(classic_segment_sizes) {
    ca_allocator *a = make(0, 0, 0);
    must_alloc(a, 1000, 0);
    ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_SMALL].current, (int64_t)(2 * MIB));
    must_alloc(a, 3 * MIB, 0);
    ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_LARGE].current, (int64_t)(20 * MIB));
    must_alloc(a, 11 * MIB, 0); /* fits in the first 20 MiB segment */
    ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_LARGE].current, (int64_t)(20 * MIB));
    must_alloc(a, 17 * MIB, 0); /* does not: a segment of its own, 2 MiB rounded */
    ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_LARGE].current, (int64_t)(38 * MIB));
    ck_assert_int_eq(stats(a).segment[CA_POOL_ALL].current, 3);
    ck_assert_int_eq(stats(a).num_device_alloc, 3);
    ca_allocator_destroy(a);
}
END_TEST

START_TEST(classic_release_frees_empty_segments) {
    ca_allocator *a = make(0, 0, 0);
    void *p = must_alloc(a, 3 * MIB, 0), *q = must_alloc(a, 18 * MIB, 0);
    ca_free(a, p, 0);
    ca_release(a);
    ca_stats s = stats(a);
    ck_assert_int_eq(s.reserved_bytes[CA_POOL_ALL].current, (int64_t)(18 * MIB));
    ck_assert_int_eq(s.num_device_free, 1);
    ca_free(a, q, 0);
    ca_allocator_destroy(a);
}
END_TEST

/* (Streams that hold little share a pool instead: test_share.) */
START_TEST(streams_have_their_own_pools) {
    ca_allocator *a = make(1, 0, 0);
    void *p = must_alloc(a, 4 * MIB, 1);
    ca_free(a, p, 1);
    void *q = must_alloc(a, 4 * MIB, 2);
    ck_assert_ptr_ne(p, q);
    ck_assert_ptr_eq(must_alloc(a, 4 * MIB, 1), p);
    ca_allocator_destroy(a);
}
END_TEST

struct events {
    ca_trace_event ev[32];
    int n;
};
static void observe(void *ctx, const ca_trace_event *ev) {
    struct events *e = ctx;
    if (e->n < 32) e->ev[e->n++] = *ev;
}

START_TEST(observer_sees_every_event) {
    ca_allocator *a = make(1, 8 * MIB, 0);
    struct events e = {.n = 0};
    ca_set_observer(a, observe, &e);
    void *p = must_alloc(a, 3 * MIB, 7), *q;
    ca_free(a, p, 7);
    ca_release(a);
    ck_assert_int_eq(ca_malloc(a, 9 * MIB, 7, &q, NULL), CA_ERR_OOM);
    ca_event_kind want[] = {CA_EV_SEGMENT_MAP, CA_EV_ALLOC, CA_EV_FREE, CA_EV_SEGMENT_UNMAP, CA_EV_OOM};
    ck_assert_int_eq(e.n, 5);
    for (int i = 0; i < 5; i++) ck_assert_int_eq(e.ev[i].kind, want[i]);
    ck_assert_uint_eq(e.ev[0].size, 4 * MIB);
    ck_assert_uint_eq(e.ev[1].requested, 3 * MIB);
    ck_assert_uint_eq(e.ev[1].addr, (uintptr_t)p);
    ck_assert_uint_eq(e.ev[3].size, 4 * MIB);
    ck_assert_uint_eq(e.ev[4].size, 9 * MIB);
    ck_assert_uint_eq(e.ev[4].stream, 7);
    ca_allocator_destroy(a);
}
END_TEST

/* Pointer queries (preload/pointer_query.c): the allocation around any byte
 * of it, its own id, a new id for a new allocation at the same address. */
START_TEST(allocations_found_from_inside) {
    for (int exp = 0; exp <= 1; exp++) {
        ca_allocator *a = make(exp, 0, 0);
        void *p = must_alloc(a, 1000, 0), *q = must_alloc(a, 3 * MIB, 0), *r = NULL;
        ca_allocation al = {0}, al2 = {0};
        ck_assert(ca_find_allocation(a, (char *)q + 100, &al));
        ck_assert_uint_eq(al.addr, (uintptr_t)q);
        ck_assert_uint_eq(al.requested, 3 * MIB);
        ck_assert(!al.ordered && al.id);
        ck_assert(ca_find_allocation(a, (char *)q + 3 * MIB - 1, &al2));
        ck_assert_uint_eq(al2.id, al.id); /* the same allocation, the same id */
        ck_assert(!ca_find_allocation(a, (char *)p + 1000, &al2)); /* past what was asked */
        ck_assert(ca_find_allocation(a, p, &al2));
        ck_assert_uint_ne(al2.id, al.id);
        ck_assert_int_eq(ca_free(a, q, 0), CA_OK);
        ck_assert(!ca_find_allocation(a, (char *)q + 100, &al2)); /* freed */
        ck_assert_int_eq(ca_malloc_ordered(a, 3 * MIB, 0, &r, NULL), CA_OK);
        ck_assert_ptr_eq(r, q); /* the address again... */
        ck_assert(ca_find_allocation(a, (char *)r + 100, &al2));
        ck_assert_uint_ne(al2.id, al.id); /* ...another allocation */
        ck_assert(al2.ordered);
        /* a small one too: its block struct is listed while free, and keeps
         * what its id was (ca_block: the id shares bytes with a treap's parent) */
        ck_assert(ca_find_allocation(a, p, &al));
        ck_assert_int_eq(ca_free(a, p, 0), CA_OK);
        void *p2 = must_alloc(a, 1000, 0);
        ck_assert_ptr_eq(p2, p);
        ck_assert(ca_find_allocation(a, p2, &al2));
        ck_assert_uint_ne(al2.id, al.id);
        ca_allocator_destroy(a);
    }
}
END_TEST

/* The index of block starts follows every split, merge, growth and trim:
 * random sizes (small to several granules), frees in random order, cache
 * given back now and then; every live allocation is found from any byte of
 * it, a freed one from none. */
START_TEST(allocations_found_after_random_churn) {
    enum { N = 400 };
    ca_allocator *a = make(1, 0, 0);
    void *p[N] = {0};
    size_t sz[N] = {0};
    uint64_t id[N] = {0};
    unsigned seed = 12345;
    for (int step = 0; step < 6000; step++) {
        int i = (int)(rand_r(&seed) % N);
        ca_allocation al;
        if (p[i]) {
            size_t off = (size_t)rand_r(&seed) % sz[i];
            ck_assert(ca_find_allocation(a, (char *)p[i] + off, &al));
            ck_assert_ptr_eq((void *)al.addr, p[i]);
            ck_assert_uint_eq(al.id, id[i]);
            ck_assert_int_eq(ca_free(a, p[i], 0), CA_OK);
            ck_assert(!ca_find_allocation(a, (char *)p[i] + off, &al) || al.addr != (uintptr_t)p[i]);
            p[i] = NULL;
        } else {
            unsigned r = (unsigned)rand_r(&seed);
            sz[i] = r % 8 == 0 ? 1 + r % (7 * MIB) : 1 + r % (64 << 10);
            p[i] = must_alloc(a, sz[i], 0);
            ck_assert(ca_find_allocation(a, (char *)p[i] + sz[i] - 1, &al));
            ck_assert_ptr_eq((void *)al.addr, p[i]);
            id[i] = al.id;
        }
        if (step % 1000 == 999) ca_release(a);
    }
    ca_allocator_destroy(a);
}
END_TEST

START_TEST(largest_free_counts_mapped_memory_only) {
    ca_allocator *a = make(1, 0, 0);
    void *p = must_alloc(a, 6 * MIB, 0);
    must_alloc(a, 512 * 1024 * 3, 0); /* [6, 7.5) MiB: its granule's tail stays free */
    ca_free(a, p, 0);
    ck_assert_uint_eq(ca_largest_free(a), 6 * MIB);
    ca_release(a); /* [0, 6) unmapped; [7.5, 8) shares a granule with a live block */
    ck_assert_uint_eq(ca_largest_free(a), 512 * 1024);
    ca_allocator_destroy(a);
}
END_TEST

int main(void) {
    Suite *s = suite_create("allocator");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, rounds_and_counts);
    tcase_add_test(tc, allocations_found_from_inside);
    tcase_add_test(tc, allocations_found_after_random_churn);
    tcase_add_test(tc, zero_and_huge_sizes);
    tcase_add_test(tc, double_free_changes_nothing);
    tcase_add_test(tc, best_fit_ties_by_address);
    tcase_add_test(tc, neighbours_merge);
    tcase_add_test(tc, granules_mapped_on_demand_and_released_anywhere);
    tcase_add_test(tc, fragmentation_is_no_reason_to_fail);
    tcase_add_test(tc, oom_then_goes_on);
    tcase_add_test(tc, max_reserved_caps);
    tcase_add_test(tc, classic_segment_sizes);
    tcase_add_test(tc, classic_release_frees_empty_segments);
    tcase_add_test(tc, streams_have_their_own_pools);
    tcase_add_test(tc, observer_sees_every_event);
    tcase_add_test(tc, largest_free_counts_mapped_memory_only);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
