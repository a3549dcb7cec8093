/* Unit tests of plain frees (ca_free_device): blocks wait for a fence before
 * they are handed out again. The device is a fake (fake_device.h): the count
 * backend with fence operations whose progress the test sets, counting what
 * the allocator asked. */
#include <check.h>
#include <string.h>

#include "allocator/allocator.h"
#include "tests/allocator/fake_device.h"
#include "tests/allocator/helpers.h"
#include "tests/check_run.h"

static ca_allocator *make(int fences, size_t capacity, int expandable) {
    ca_options opt;
    ca_options_default(&opt);
    opt.expandable = expandable;
    return new_allocator(fake_device(ca_backend_count_new(capacity, G), fences, 0), &opt);
}

/* Bytes of blocks in each state. */
struct states {
    size_t bytes[3];
    int count[3];
};
static void count_state(void *ctx, const ca_segment_view *s, const ca_block_view *b) {
    struct states *st = ctx;
    st->bytes[b->state] += b->size;
    st->count[b->state]++;
}
static struct states states(ca_allocator *a) {
    struct states st;
    memset(&st, 0, sizeof st);
    ca_visit(a, NULL, count_state, &st);
    return st;
}

START_TEST(without_fences_the_block_is_reused_at_once) {
    ca_allocator *a = make(0, 0, 1);
    void *p = must_alloc(a, 4 * MIB, 0);
    ck_assert_int_eq(ca_free_device(a, p, 0), CA_OK);
    ck_assert_ptr_eq(must_alloc(a, 4 * MIB, 0), p);
    ca_stats s = stats(a);
    ck_assert_int_eq(s.active_bytes[CA_POOL_ALL].current, s.allocated_bytes[CA_POOL_ALL].current);
    ca_allocator_destroy(a);
}
END_TEST

START_TEST(block_waits_for_its_fence) {
    for (int exp = 0; exp <= 1; exp++) {
        ca_allocator *a = make(1, 0, exp);
        void *p = must_alloc(a, 4 * MIB, 0);
        ck_assert_int_eq(ca_free_device(a, p, 0), CA_OK);
        ck_assert_int_eq(fk.records, 0); /* the free records nothing itself */
        struct states st = states(a);
        ck_assert_int_eq(st.count[CA_BLOCK_PENDING], 1);
        ck_assert_uint_eq(st.bytes[CA_BLOCK_PENDING], 4 * MIB);
        /* the next allocation fences it, finds the fence not passed, and
         * does not hand the block out */
        void *q = must_alloc(a, 4 * MIB, 0);
        ck_assert_ptr_ne(q, p);
        ck_assert_int_eq(fk.records, 1);
        ck_assert_int_ge(fk.queries, 1);
        ck_assert_int_eq(fk.waits, 0); /* memory was not short: nobody blocked */
        ck_assert_int_eq(states(a).count[CA_BLOCK_PENDING], 1);
        /* the device passes the fence: the block is free again */
        fk.passed = fk.recorded;
        ck_assert_ptr_eq(must_alloc(a, 4 * MIB, 0), p);
        ck_assert_int_eq(states(a).count[CA_BLOCK_PENDING], 0);
        ck_assert_int_eq(fk.destroys, 1);
        ca_allocator_destroy(a);
    }
}
END_TEST

START_TEST(pending_bytes_are_active_and_cached_not_allocated) {
    ca_allocator *a = make(1, 0, 1);
    void *p = must_alloc(a, 4 * MIB, 0), *q = must_alloc(a, 2 * MIB, 0);
    ca_free_device(a, p, 0);
    ca_stats s = stats(a);
    ck_assert_int_eq(s.allocated_bytes[CA_POOL_ALL].current, (int64_t)(2 * MIB));
    ck_assert_int_eq(s.active_bytes[CA_POOL_ALL].current, (int64_t)(6 * MIB));
    ck_assert_int_eq(s.active[CA_POOL_ALL].current, 2);
    ck_assert_int_eq(s.allocation[CA_POOL_ALL].current, 1);
    ck_assert_int_eq(s.reserved_bytes[CA_POOL_ALL].current, (int64_t)(6 * MIB));
    ck_assert_int_eq(s.active_bytes[CA_POOL_ALL].peak, (int64_t)(6 * MIB));
    /* nothing lost: once the fence passed, everything is free and released */
    ca_free_device(a, q, 0);
    ca_release(a);
    s = stats(a);
    ck_assert_int_eq(s.active_bytes[CA_POOL_ALL].current, 0);
    ck_assert_int_eq(s.active[CA_POOL_ALL].current, 0);
    ck_assert_int_eq(s.reserved_bytes[CA_POOL_ALL].current, 0);
    ck_assert_int_eq(s.active_bytes[CA_POOL_ALL].freed, s.active_bytes[CA_POOL_ALL].allocated);
    ck_assert_int_eq(fk.destroys, fk.records);
    ca_allocator_destroy(a);
}
END_TEST

START_TEST(one_fence_per_burst) {
    ca_allocator *a = make(1, 0, 1);
    void *p[10];
    for (int i = 0; i < 10; i++) p[i] = must_alloc(a, 2 * MIB, 0);
    for (int i = 0; i < 10; i++) ca_free_device(a, p[i], 0);
    must_alloc(a, 512, 0);
    ck_assert_int_eq(fk.records, 1);
    fk.passed = fk.recorded;
    /* the ten blocks come back merged into one run */
    ck_assert_ptr_eq(must_alloc(a, 20 * MIB, 0), p[0]);
    ck_assert_int_eq(fk.records, 1);
    ca_allocator_destroy(a);
}
END_TEST

START_TEST(long_runs_of_frees_are_fenced_without_an_allocation) {
    ca_allocator *a = make(1, 0, 1);
    void *p[200];
    for (int i = 0; i < 200; i++) p[i] = must_alloc(a, 4096, 0);
    for (int i = 0; i < 200; i++) ca_free_device(a, p[i], 0);
    ck_assert_int_eq(fk.records, 200 / 64);
    ca_allocator_destroy(a);
    ck_assert_int_eq(fk.destroys, fk.records); /* dropped with the allocator, unwaited */
    ck_assert_int_eq(fk.waits, 0);
}
END_TEST

START_TEST(short_memory_waits_instead_of_failing) {
    ca_allocator *a = make(1, 8 * MIB, 1);
    void *p = must_alloc(a, 6 * MIB, 0);
    ca_free_device(a, p, 0);
    void *q;
    ck_assert_int_eq(ca_malloc(a, 6 * MIB, 0, &q, NULL), CA_OK);
    ck_assert_ptr_eq(q, p);
    ck_assert_int_eq(fk.waits, 1);
    ca_stats s = stats(a);
    ck_assert_int_eq(s.num_ooms, 0);
    ck_assert_int_eq(s.num_alloc_retries, 0); /* the pool's own frees sufficed */
    ca_allocator_destroy(a);
}
END_TEST

START_TEST(short_memory_waits_for_other_pools_too) {
    ca_allocator *a = make(1, 8 * MIB, 1);
    void *p = must_alloc(a, 6 * MIB, 1);
    ca_free_device(a, p, 0); /* pending in stream 1's pool */
    void *q;
    ck_assert_int_eq(ca_malloc(a, 6 * MIB, 2, &q, NULL), CA_OK);
    ck_assert_int_eq(fk.waits, 1);
    ca_stats s = stats(a);
    ck_assert_int_eq(s.num_ooms, 0);
    ck_assert_int_eq(s.num_alloc_retries, 1); /* stream 1's cache was given back */
    ca_allocator_destroy(a);
}
END_TEST

START_TEST(ordered_fences_free_the_block_at_the_next_allocation) {
    ca_allocator *a = make(1, 0, 1);
    fk.ordered = 1;
    void *p = must_alloc(a, 4 * MIB, 0);
    ca_free_device(a, p, 0);
    ck_assert_int_eq(states(a).count[CA_BLOCK_PENDING], 1);
    ck_assert_ptr_eq(must_alloc(a, 4 * MIB, 0), p);
    ck_assert_int_eq(fk.records, 1);
    ck_assert_int_eq(fk.queries, 0);
    ck_assert_int_eq(fk.destroys, 0);
    ca_allocator_destroy(a);
}
END_TEST

/* While fences pass at record, a plain free's block waits unfenced until an
 * allocation cannot be served from the free memory without growing (or
 * CA_FENCE_BATCH frees): a malloc/free loop in free memory records one fence
 * per 64 frees, never hands out a block freed since the last fence, and
 * reserves nothing more. */
START_TEST(ordered_fences_are_recorded_when_the_memory_is_needed) {
    for (int exp = 0; exp <= 1; exp++) {
        ca_allocator *a = make(1, 0, exp);
        fk.ordered = 1;
        void *first = must_alloc(a, 4096, 0);
        ca_free_device(a, first, 0);
        void *kept = must_alloc(a, 4096, 0); /* the free memory serves it: no fence yet */
        ck_assert_int_eq(fk.records, 0);
        int64_t reserved = stats(a).reserved_bytes[CA_POOL_ALL].current;
        void *unfenced[64];
        int n = 0;
        for (int i = 0; i < 200; i++) {
            int records = fk.records;
            void *p = must_alloc(a, 4096, 0);
            if (fk.records != records) n = 0; /* fenced: the blocks freed before are free again */
            for (int k = 0; k < n; k++) ck_assert_ptr_ne(p, unfenced[k]);
            records = fk.records;
            ck_assert_int_eq(ca_free_device(a, p, 0), CA_OK);
            if (fk.records != records) n = 0; /* the free made a batch of 64 */
            else unfenced[n++] = p;
        }
        ck_assert_int_le(fk.records, 1 + 200 / 64 + 1);
        ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_ALL].current, reserved);
        /* all the mapped memory is needed (expandable: one heap for every
         * size): fenced now, and the blocks are reused rather than more
         * reserved */
        if (exp) {
            ca_free_device(a, kept, 0);
            int records = fk.records;
            ck_assert_ptr_nonnull(must_alloc(a, (size_t)reserved, 0));
            ck_assert_int_eq(fk.records, records + 1);
            ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_ALL].current, reserved);
        }
        ca_allocator_destroy(a);
    }
}
END_TEST

/* Fences that wait (a non-blocking stream alive) are recorded when the
 * memory is needed too, not at each allocation after a free: a malloc/free
 * loop in free memory records none in 40 pairs and never hands out a block
 * freed before it; an allocation that needs the memory fences them, finds
 * the fence not passed, and grows instead of reusing them; once the device
 * is past the fence they come back. */
START_TEST(fences_that_wait_are_recorded_when_the_memory_is_needed) {
    for (int exp = 0; exp <= 1; exp++) {
        ca_allocator *a = make(1, 0, exp);
        void *freed[41];
        int n = 0;
        freed[n++] = must_alloc(a, 4096, 0);
        int64_t reserved = stats(a).reserved_bytes[CA_POOL_ALL].current;
        ca_free_device(a, freed[0], 0);
        for (int i = 0; i < 40; i++) {
            void *p = must_alloc(a, 4096, 0);
            for (int k = 0; k < n; k++) ck_assert_ptr_ne(p, freed[k]);
            ck_assert_int_eq(ca_free_device(a, p, 0), CA_OK);
            freed[n++] = p;
        }
        ck_assert_int_eq(fk.records, 0);
        ck_assert_int_eq(fk.waits, 0);
        ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_ALL].current, reserved);
        ck_assert_int_eq(states(a).count[CA_BLOCK_PENDING], 41);
        /* as much as is mapped: the free memory cannot serve it, so the
         * blocks are fenced; the fence has not passed: more memory, and
         * nobody blocked */
        void *big = must_alloc(a, (size_t)reserved, 0);
        ck_assert_int_eq(fk.records, 1);
        ck_assert_int_eq(fk.waits, 0);
        ck_assert_int_gt(stats(a).reserved_bytes[CA_POOL_ALL].current, reserved);
        ck_assert_int_eq(states(a).count[CA_BLOCK_PENDING], 41);
        /* the device passes it: the blocks are free at the next allocation */
        fk.passed = fk.recorded;
        void *p = must_alloc(a, 4096, 0);
        ck_assert_int_eq(states(a).count[CA_BLOCK_PENDING], 0);
        ck_assert_ptr_eq(p, freed[0]);
        ck_assert_int_eq(fk.records, 1);
        ca_free_device(a, big, 0);
        ca_allocator_destroy(a);
    }
}
END_TEST

/* A batch's blocks leave the pending figures together, small and large
 * apart: the device-wide totals (several pools) that later peaks are taken
 * from hold exactly what is left. */
START_TEST(pending_blocks_leave_the_device_totals_by_kind) {
    ca_allocator *a = make(1, 0, 1);
    must_alloc(a, 512, 1); /* a second pool: device-wide totals kept */
    void *blocks[6];
    for (int i = 0; i < 6; i++) blocks[i] = must_alloc(a, i % 2 ? 4 * MIB : 8192, 0); /* interleaved kinds */
    for (int i = 0; i < 6; i++) ca_free_device(a, blocks[i], 0);
    ca_stats s = stats(a); /* collects: one fence for the six */
    ck_assert_int_eq(fk.records, 1);
    ck_assert_int_eq(s.active[CA_POOL_SMALL].current, 1 + 3);
    ck_assert_int_eq(s.active_bytes[CA_POOL_LARGE].current, (int64_t)(12 * MIB));
    fk.passed = fk.recorded;
    s = stats(a); /* polls: the batch is free */
    ck_assert_int_eq(s.active[CA_POOL_ALL].current, 1);
    ck_assert_int_eq(s.active_bytes[CA_POOL_SMALL].current, 512);
    ck_assert_int_eq(s.active_bytes[CA_POOL_LARGE].current, 0);
    /* new peaks of the other pool: from totals without the batch */
    must_alloc(a, 16 * MIB, 1);
    for (int i = 0; i < 64; i++) must_alloc(a, 4096, 1);
    s = stats(a);
    ck_assert_int_eq(s.active_bytes[CA_POOL_LARGE].peak, (int64_t)(16 * MIB));
    ck_assert_int_eq(s.active_bytes[CA_POOL_SMALL].peak, 512 + 64 * 4096);
    ck_assert_int_eq(s.active_bytes[CA_POOL_ALL].peak, (int64_t)(16 * MIB) + 512 + 64 * 4096);
    ck_assert_int_eq(s.active[CA_POOL_SMALL].peak, 1 + 64);
    ck_assert_int_eq(s.active[CA_POOL_LARGE].peak, 3);
    ca_allocator_destroy(a);
}
END_TEST

/* No fence now (a capture under way, a device that refused): the block
 * stays pending, never handed out, until a fence can be recorded. */
START_TEST(a_fence_that_cannot_be_recorded_leaves_the_block_pending) {
    for (int exp = 0; exp <= 1; exp++) {
        ca_allocator *a = make(1, 0, exp);
        fk.fail_record = 1;
        void *p = must_alloc(a, 4 * MIB, 0);
        ca_free_device(a, p, 0);
        ck_assert_ptr_ne(must_alloc(a, 4 * MIB, 0), p);
        ck_assert_int_eq(states(a).count[CA_BLOCK_PENDING], 1);
        ck_assert_int_eq(fk.records, 1);
        fk.fail_record = 0; /* recorded at the next allocation, passed later */
        ck_assert_ptr_ne(must_alloc(a, 4 * MIB, 0), p);
        ck_assert_int_eq(fk.records, 2);
        fk.passed = fk.recorded;
        ck_assert_ptr_eq(must_alloc(a, 4 * MIB, 0), p);
        ca_allocator_destroy(a);
    }
}
END_TEST

/* Memory short and the fence cannot be waited for: the allocation fails
 * rather than take memory the device may still use. */
START_TEST(a_wait_that_fails_leaves_the_memory_busy) {
    ca_allocator *a = make(1, 8 * MIB, 1);
    void *p = must_alloc(a, 6 * MIB, 0), *q;
    ca_free_device(a, p, 0);
    fk.fail_wait = 1;
    ck_assert_int_eq(ca_malloc(a, 6 * MIB, 0, &q, NULL), CA_ERR_OOM);
    ck_assert_int_eq(states(a).count[CA_BLOCK_PENDING], 1);
    ck_assert_int_ge(fk.waits, 1);
    fk.fail_wait = 0;
    ck_assert_int_eq(ca_malloc(a, 6 * MIB, 0, &q, NULL), CA_OK);
    ck_assert_ptr_eq(q, p);
    ca_allocator_destroy(a);
}
END_TEST

/* Giving memory back waits for the device first (a fence across every
 * stream, the pool's stream where there are no fences); when that wait
 * fails, nothing is unmapped. */
START_TEST(a_failed_sync_unmaps_nothing) {
    for (int exp = 0; exp <= 1; exp++) {
        ca_options opt;
        ca_options_default(&opt);
        opt.expandable = exp;
        ca_allocator *a = new_allocator(fake_device(ca_backend_count_new(0, G), 1, 1), &opt);
        void *p = must_alloc(a, 4 * MIB, 0);
        ck_assert_int_eq(ca_free(a, p, 0), CA_OK);
        int64_t reserved = stats(a).reserved_bytes[CA_POOL_ALL].current;
        fk.fail_sync = fk.fail_wait = 1;
        ca_release(a);
        ck_assert_int_eq(fk.n_unmapped, 0);
        ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_ALL].current, reserved);
        fk.fail_sync = fk.fail_wait = 0;
        ca_release(a);
        ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_ALL].current, 0);
        ca_allocator_destroy(a);
    }
}
END_TEST

START_TEST(a_synchronized_device_reuses_at_once) {
    ca_allocator *a = make(1, 0, 1);
    void *p = must_alloc(a, 4 * MIB, 0);
    ck_assert_int_eq(ca_free_device(a, p, 1), CA_OK);
    ck_assert_ptr_eq(must_alloc(a, 4 * MIB, 0), p);
    ck_assert_int_eq(fk.records, 0);
    ca_allocator_destroy(a);
}
END_TEST

START_TEST(pending_block_freed_again_is_a_double_free) {
    ca_allocator *a = make(1, 0, 1);
    void *p = must_alloc(a, 4096, 0);
    ck_assert_int_eq(ca_free_device(a, p, 0), CA_OK);
    ca_stats before = stats(a);
    ck_assert_int_eq(ca_free_device(a, p, 0), CA_ERR_INVALID);
    ck_assert_int_eq(ca_free(a, p, 0), CA_ERR_INVALID);
    ck_assert(!ca_owns(a, p, NULL) && ca_contains(a, p));
    ca_stats after = stats(a);
    ck_assert_mem_eq(&before, &after, sizeof before);
    ca_allocator_destroy(a);
}
END_TEST

START_TEST(release_waits_for_pending_frees) {
    ca_allocator *a = make(1, 0, 1);
    void *p = must_alloc(a, 4 * MIB, 0);
    must_alloc(a, 4 * MIB, 0);
    ca_free_device(a, p, 0);
    must_alloc(a, 512, 1); /* another pool: p's stays unfenced */
    int64_t reserved = stats(a).reserved_bytes[CA_POOL_ALL].current;
    /* releasing waits for the fence first: p is then free and given back */
    ca_release(a);
    ck_assert_int_eq(fk.waits, 1);
    ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_ALL].current, reserved - (int64_t)(4 * MIB));
    ca_allocator_destroy(a);
}
END_TEST

/* A stream-ordered free into a pool whose stream cannot be made to wait
 * (another thread's per-thread stream) waits for a fence instead. */
START_TEST(unnameable_pool_stream_falls_back_to_a_fence) {
    ca_options opt;
    ca_options_default(&opt);
    opt.share_bytes = 0; /* pools of their own (a shared block always waits: test_share) */
    ca_allocator *a = new_allocator(fake_device(ca_backend_count_new(0, G), 1, 0), &opt);
    void *p = must_alloc(a, 4096, UNNAMEABLE);
    ck_assert_int_eq(ca_free(a, p, 7), CA_OK);
    ck_assert_int_eq(fk.stream_waits, 1);
    ck_assert_ptr_ne(must_alloc(a, 4096, UNNAMEABLE), p);
    must_alloc(a, G - 2 * 4096, UNNAMEABLE); /* the rest of the granule */
    ck_assert_ptr_ne(must_alloc(a, 4096, UNNAMEABLE), p); /* the memory needed: fenced, not passed */
    ck_assert_int_eq(fk.records, 1);
    fk.passed = fk.recorded;
    ck_assert_ptr_eq(must_alloc(a, 4096, UNNAMEABLE), p);
    /* a nameable stream waits, and the block is reused at once */
    void *q = must_alloc(a, 4096, 3);
    ck_assert_int_eq(ca_free(a, q, 7), CA_OK);
    ck_assert_ptr_eq(must_alloc(a, 4096, 3), q);
    ca_allocator_destroy(a);
}
END_TEST

int main(void) {
    Suite *s = suite_create("fences");
    TCase *tc = tcase_create("plain frees");
    tcase_add_test(tc, without_fences_the_block_is_reused_at_once);
    tcase_add_test(tc, block_waits_for_its_fence);
    tcase_add_test(tc, pending_bytes_are_active_and_cached_not_allocated);
    tcase_add_test(tc, one_fence_per_burst);
    tcase_add_test(tc, long_runs_of_frees_are_fenced_without_an_allocation);
    tcase_add_test(tc, short_memory_waits_instead_of_failing);
    tcase_add_test(tc, short_memory_waits_for_other_pools_too);
    tcase_add_test(tc, ordered_fences_free_the_block_at_the_next_allocation);
    tcase_add_test(tc, ordered_fences_are_recorded_when_the_memory_is_needed);
    tcase_add_test(tc, fences_that_wait_are_recorded_when_the_memory_is_needed);
    tcase_add_test(tc, pending_blocks_leave_the_device_totals_by_kind);
    tcase_add_test(tc, a_fence_that_cannot_be_recorded_leaves_the_block_pending);
    tcase_add_test(tc, a_wait_that_fails_leaves_the_memory_busy);
    tcase_add_test(tc, a_failed_sync_unmaps_nothing);
    tcase_add_test(tc, a_synchronized_device_reuses_at_once);
    tcase_add_test(tc, pending_block_freed_again_is_a_double_free);
    tcase_add_test(tc, release_waits_for_pending_frees);
    tcase_add_test(tc, unnameable_pool_stream_falls_back_to_a_fence);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
