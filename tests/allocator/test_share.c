/* Unit tests of the shared pool (allocator/share.c): streams that hold little
 * take small blocks from one pool, not a granule each; a stream that holds
 * more, or waits for the pool's lock, gets its own pool; a shared block is its
 * own stream's again at once when freed in that stream's order, any other's
 * only after a fence; each block's bytes come off the count of the stream
 * that asked. */
#include <check.h>
#include <pthread.h>

#include "allocator/allocator.h"
#include "allocator/internal.h"
#include "tests/allocator/fake_device.h"
#include "tests/allocator/helpers.h"
#include "tests/check_run.h"

#define KIB ((size_t)1 << 10)
/* A quarter MiB: share_bytes holds QUARTERS of them. */
#define QUARTER (256 * KIB)
#define QUARTERS ((int)(CA_SHARE_BYTES / QUARTER))

static ca_allocator *make(size_t share_bytes, int fences, int expandable) {
    ca_options opt;
    ca_options_default(&opt);
    opt.expandable = expandable;
    opt.share_bytes = share_bytes;
    return new_allocator(fake_device(ca_backend_count_new(0, G), fences, 0), &opt);
}

/* The stream of the segment that holds ptr: 0 for the shared pool's. */
struct find {
    uintptr_t addr;
    ca_stream stream;
    int found;
};
static void find_block(void *ctx, const ca_segment_view *seg, const ca_block_view *b) {
    struct find *f = ctx;
    if (b->addr == f->addr) f->stream = seg->stream, f->found++;
}
static ca_stream pool_stream(ca_allocator *a, void *ptr) {
    struct find f = {(uintptr_t)ptr, (ca_stream)-1, 0};
    ca_visit(a, NULL, find_block, &f);
    ck_assert_int_eq(f.found, 1);
    return f.stream;
}

static int pending(ca_allocator *a) {
    return (int)(stats(a).active[CA_POOL_ALL].current - stats(a).allocation[CA_POOL_ALL].current);
}

/* 1,000 streams that hold 4 KiB each: with sharing, two granules between
 * them; without, one each. Both modes, on a device with fences. */
START_TEST(streams_that_hold_little_share_a_pool) {
    enum { N = 1000 };
    static void *p[N + 1];
    for (int exp = 0; exp <= 1; exp++)
        for (int share = 0; share <= 1; share++) {
            ca_allocator *a = make(share ? CA_SHARE_BYTES : 0, 1, exp);
            for (int s = 1; s <= N; s++) p[s] = must_alloc(a, 4 * KIB, (ca_stream)s);
            ca_stats st = stats(a);
            ck_assert_int_eq(st.allocated_bytes[CA_POOL_ALL].current, (int64_t)(N * 4 * KIB));
            if (share) ck_assert_int_le(st.reserved_bytes[CA_POOL_ALL].current, (int64_t)(2 * G));
            else ck_assert_int_eq(st.reserved_bytes[CA_POOL_ALL].current, (int64_t)(N * G));
            for (int s = 1; s <= N; s++) ck_assert_int_eq(ca_free(a, p[s], (ca_stream)s), CA_OK);
            /* nothing lost: once the fences pass, all of it goes back */
            ca_release(a);
            st = stats(a);
            ck_assert_int_eq(st.active_bytes[CA_POOL_ALL].current, 0);
            ck_assert_int_eq(st.reserved_bytes[CA_POOL_ALL].current, 0);
            ca_allocator_destroy(a);
        }
}
END_TEST

/* Past share_bytes held in the shared pool, a stream's requests go to its own
 * pool, and keep going there until it holds no memory again. */
START_TEST(a_stream_that_holds_more_gets_its_own_pool) {
    for (int exp = 0; exp <= 1; exp++) {
        ca_allocator *a = make(CA_SHARE_BYTES, 0, exp);
        void *p[QUARTERS];
        for (int i = 0; i < QUARTERS; i++) {
            p[i] = must_alloc(a, QUARTER, 1);
            ck_assert_uint_eq(pool_stream(a, p[i]), 0);
        }
        void *own = must_alloc(a, QUARTER, 1), *small = must_alloc(a, 512, 1);
        ck_assert_uint_eq(pool_stream(a, own), 1);
        ck_assert_uint_eq(pool_stream(a, small), 1);
        /* a larger request is its own pool's however little the stream holds */
        void *big = must_alloc(a, CA_SHARE_BYTES + 512, 2);
        ck_assert_uint_eq(pool_stream(a, big), 2);
        ck_assert_uint_eq(pool_stream(a, must_alloc(a, 512, 2)), 2);
        /* its own pool empty and given back, the stream shares again */
        ca_free(a, own, 1);
        ca_free(a, small, 1);
        for (int i = 0; i < QUARTERS; i++) ca_free(a, p[i], 1);
        ca_release(a);
        ck_assert_uint_eq(pool_stream(a, must_alloc(a, 512, 1)), 0);
        ca_allocator_destroy(a);
    }
}
END_TEST

/* A shared block may next serve any stream: freed in the order of a stream
 * other than the one that asked for it, it waits for a fence. */
START_TEST(a_shared_block_waits_for_a_fence) {
    ca_allocator *a = make(CA_SHARE_BYTES, 1, 1);
    enum { N = 64 }; /* a fence every 64 frees (fence.c) */
    const ca_stream other = 999;
    void *p[N];
    for (int i = 0; i < N; i++) p[i] = must_alloc(a, 4 * KIB, (ca_stream)(i + 1));
    ck_assert_int_eq(ca_free(a, p[0], other), CA_OK);
    ck_assert_int_eq(pending(a), 1);
    void *q = must_alloc(a, 4 * KIB, 1), *r = must_alloc(a, 4 * KIB, 2);
    ck_assert_ptr_ne(q, p[0]);
    ck_assert_ptr_ne(r, p[0]);
    for (int i = 1; i < N; i++) ck_assert_int_eq(ca_free(a, p[i], other), CA_OK);
    ck_assert_int_eq(fk.records, 1);
    ck_assert_int_eq(pending(a), N);
    /* the fence has not passed: nothing of them is handed out */
    void *s = must_alloc(a, 4 * KIB, 3);
    for (int i = 0; i < N; i++) ck_assert_ptr_ne(s, p[i]);
    fk.passed = fk.recorded;
    ck_assert_ptr_eq(must_alloc(a, 4 * KIB, 3), p[0]); /* the lowest address, free again */
    ck_assert_int_eq(pending(a), 0);
    ca_allocator_destroy(a);
}
END_TEST

/* Freed in the order of the stream that asked for it, a shared block is that
 * stream's next request of its size at once (stream order), no other's; a
 * loop on one stream records no fence; the next fence takes what is kept. */
START_TEST(a_block_freed_in_its_stream_s_order_is_its_next_at_once) {
    ca_allocator *a = make(CA_SHARE_BYTES, 1, 1);
    void *p = must_alloc(a, 4 * KIB, 1);
    ck_assert_int_eq(ca_free(a, p, 1), CA_OK);
    ck_assert_int_eq(pending(a), 1);
    void *r = must_alloc(a, 4 * KIB, 2), *big = must_alloc(a, 8 * KIB, 1);
    ck_assert_ptr_ne(r, p);
    ck_assert_ptr_ne(big, p); /* another size */
    ck_assert_ptr_eq(must_alloc(a, 4 * KIB, 1), p);
    ck_assert_int_eq(pending(a), 0);
    ck_assert_int_eq(ca_free(a, p, 1), CA_OK);
    for (int i = 0; i < 1000; i++) {
        void *x = must_alloc(a, 4 * KIB, 1);
        ck_assert_ptr_eq(x, p);
        ck_assert_int_eq(ca_free(a, x, 1), CA_OK);
    }
    ck_assert_int_eq(fk.records, 0);
    ck_assert_int_eq(ca_free(a, r, 2), CA_OK);
    ck_assert_int_eq(ca_free(a, big, 1), CA_OK);
    ck_assert_int_eq(pending(a), 3);
    ca_release(a); /* a fence for the kept blocks, waited for: all free, all given back */
    ck_assert_int_eq(fk.records, 1);
    ck_assert_int_eq(pending(a), 0);
    ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_ALL].current, 0);
    ca_allocator_destroy(a);
}
END_TEST

/* The device-wide running totals of pending bytes (allocator/internal.h:
 * `several`; active is allocated plus these) take a kept block only when it
 * goes to a fence, and give it back when it is free: they end at zero, as
 * the pools' figures do. */
static int64_t total_pending_bytes(ca_allocator *a) {
    int64_t (*t)[CA_POOL_KINDS] = a->totals;
    size_t f = CA_FIELD(offsetof(ca_stats, active_bytes));
    return t[f][CA_POOL_SMALL] + t[f][CA_POOL_LARGE];
}
START_TEST(kept_blocks_leave_the_device_totals_as_they_came) {
    ca_allocator *a = make(CA_SHARE_BYTES, 1, 1);
    void *p[8];
    for (int i = 0; i < 8; i++) p[i] = must_alloc(a, 4 * KIB, (ca_stream)(1 + i % 2));
    for (int i = 0; i < 8; i++) ca_free(a, p[i], (ca_stream)(1 + i % 2)); /* kept: 4 a stream */
    ck_assert_int_eq(pending(a), 8);
    ck_assert_int_eq(total_pending_bytes(a), 0); /* kept: not in the totals */
    for (int i = 0; i < 3; i++) ca_free(a, must_alloc(a, 4 * KIB, 1), 1); /* taken and kept again */
    ca_release(a); /* a fence takes the kept blocks, waited for: all free */
    ck_assert_int_eq(pending(a), 0);
    ck_assert_int_eq(total_pending_bytes(a), 0);
    ca_allocator_destroy(a);
}
END_TEST

/* A block kept for a stream that is gone waits for a fence: a new stream may
 * get the pool struct, and after 4,096 starts of it the same owner number
 * (12 bits of start), with the old stream's work still queued. */
START_TEST(a_gone_stream_s_kept_blocks_wait_for_a_fence) {
    ca_allocator *a = make(CA_SHARE_BYTES, 1, 1);
    void *p = must_alloc(a, 4 * KIB, 1);
    ck_assert_int_eq(ca_free(a, p, 1), CA_OK); /* kept for stream 1 */
    ca_retire_stream(a, 1);
    for (int i = 0; i <= 4096; i++) { /* each stream takes the spare struct again */
        ca_stream s = (ca_stream)(100 + i);
        ck_assert_ptr_ne(must_alloc(a, 4 * KIB, s), p);
        ca_retire_stream(a, s);
    }
    ck_assert_int_eq(pending(a), 1);
    ca_allocator_destroy(a);
}
END_TEST

/* A block's bytes come off the count of the stream that asked for it,
 * whichever stream frees it, in its order or plainly. */
START_TEST(a_free_on_another_stream_counts_for_the_one_that_asked) {
    ca_allocator *a = make(CA_SHARE_BYTES, 0, 1);
    void *p[QUARTERS];
    for (int i = 0; i < QUARTERS; i++) p[i] = must_alloc(a, QUARTER, 1);
    for (int i = 0; i < QUARTERS - 1; i++) ck_assert_int_eq(ca_free(a, p[i], 2), CA_OK);
    ck_assert_int_eq(ca_free_device(a, p[QUARTERS - 1], 1), CA_OK);
    /* stream 1 holds nothing shared: share_bytes fits again */
    for (int i = 0; i < QUARTERS; i++) ck_assert_uint_eq(pool_stream(a, must_alloc(a, QUARTER, 1)), 0);
    /* and stream 2 still holds nothing */
    ck_assert_uint_eq(pool_stream(a, must_alloc(a, CA_SHARE_BYTES, 2)), 0);
    ca_allocator_destroy(a);
}
END_TEST

/* A stream's blocks waiting for their fence still count as its own: one that
 * frees faster than fences pass gets a pool of its own (reuse in stream
 * order); once the fence passed, they count no more. */
START_TEST(pending_frees_count_until_their_fence_passes) {
    for (int passes = 0; passes <= 1; passes++) {
        ca_allocator *a = make(CA_SHARE_BYTES, 1, 1);
        void *p[QUARTERS];
        for (int i = 0; i < QUARTERS; i++) p[i] = must_alloc(a, QUARTER, 1);
        for (int i = 0; i < QUARTERS; i++) ck_assert_int_eq(ca_free(a, p[i], 1), CA_OK);
        ck_assert_int_eq(pending(a), QUARTERS);
        /* another stream still shares; its request fences them */
        ck_assert_uint_eq(pool_stream(a, must_alloc(a, QUARTER, 2)), 0);
        ck_assert_int_eq(fk.records, 1);
        if (passes) {
            fk.passed = fk.recorded;
            ck_assert_uint_eq(pool_stream(a, must_alloc(a, 4 * KIB, 2)), 0); /* polls: they are free */
            ck_assert_int_eq(pending(a), 0);
        }
        ck_assert_uint_eq(pool_stream(a, must_alloc(a, QUARTER, 1)), passes ? 0 : 1);
        ca_allocator_destroy(a);
    }
}
END_TEST

/* A pool struct serves stream after stream: the blocks its last stream left
 * in the shared pool do not count for the next one, before or after. */
START_TEST(a_new_stream_on_an_old_pool_starts_from_nothing) {
    ca_allocator *a = make(CA_SHARE_BYTES, 0, 1);
    void *old = must_alloc(a, CA_SHARE_BYTES, 1);
    ck_assert_uint_eq(pool_stream(a, old), 0);
    ca_retire_stream(a, 1); /* its pool holds nothing itself: spare at once */
    void *p = must_alloc(a, 4 * KIB, 2); /* takes the spare pool */
    ck_assert_uint_eq(pool_stream(a, p), 0);
    ck_assert_int_eq(ca_free(a, old, 2), CA_OK); /* not off stream 2's count */
    ck_assert_uint_eq(pool_stream(a, must_alloc(a, CA_SHARE_BYTES - 4 * KIB, 2)), 0);
    ck_assert_uint_eq(pool_stream(a, must_alloc(a, 512, 2)), 2); /* now it holds share_bytes */
    ca_allocator_destroy(a);
}
END_TEST

/* Another thread holds the shared pool's lock until the request it stands
 * in the way of has counted its wait (share.c: the asker's `contended`). */
struct holder {
    ca_lock *lock;
    const uint32_t *contended;
    uint32_t until;
    _Atomic int held;
};
static void *hold_lock(void *arg) {
    struct holder *h = arg;
    ca_lock_acquire(h->lock);
    h->held = 1;
    while (__atomic_load_n(h->contended, __ATOMIC_RELAXED) < h->until) sched_yield();
    ca_lock_release(h->lock);
    return NULL;
}

/* A stream whose requests keep finding the shared pool's lock held by
 * another thread gets its own pool (and lock); one that never waits keeps
 * sharing however much it allocates. */
START_TEST(a_stream_that_waits_for_the_shared_lock_gets_its_own_pool) {
    ca_allocator *a = make(CA_SHARE_BYTES, 0, 1);
    for (int i = 0; i < 1000; i++) { /* no wait: shared throughout */
        void *p = must_alloc(a, 4 * KIB, 2);
        ck_assert_uint_eq(pool_stream(a, p), 0);
        ca_free(a, p, 2);
    }
    ca_pool *shared = a->shared;
    ck_assert_ptr_nonnull(shared);
    ca_free(a, must_alloc(a, 4 * KIB, 1), 1); /* stream 1's pool, uncontended */
    ca_pool *asker = ca_pooltab_find(a, 1);
    ck_assert_ptr_nonnull(asker);
    for (int i = 0; i < CA_SHARE_CONTENDED; i++) {
        struct holder h = {&shared->lock, &asker->contended, (uint32_t)i + 1, 0};
        pthread_t t;
        pthread_create(&t, NULL, hold_lock, &h);
        while (!h.held) sched_yield();
        void *p = must_alloc(a, 4 * KIB, 1); /* waits for the holder */
        pthread_join(t, NULL);
        ck_assert_uint_eq(pool_stream(a, p), 0); /* this one still shared */
        ca_free(a, p, 1);
    }
    ck_assert_uint_eq(pool_stream(a, must_alloc(a, 4 * KIB, 1)), 1);
    ck_assert_uint_eq(pool_stream(a, must_alloc(a, 4 * KIB, 2)), 0);
    ca_allocator_destroy(a);
}
END_TEST

static int refuse_odd(void *self, ca_stream s) { return s & 1 ? CA_ERR_STREAM : CA_OK; }

/* Freed in the order of something that is not a stream: refused, nothing freed. */
START_TEST(a_shared_block_freed_on_no_stream_is_refused) {
    ca_options opt;
    ca_options_default(&opt);
    ca_backend *be = ca_backend_count_new(0, G);
    be->stream_check = refuse_odd;
    ca_allocator *a = new_allocator(be, &opt);
    void *p = must_alloc(a, 4 * KIB, 2);
    ck_assert_uint_eq(pool_stream(a, p), 0);
    ck_assert_int_eq(ca_free(a, p, 3), CA_ERR_STREAM);
    ck_assert(ca_owns(a, p, NULL));
    ck_assert_int_eq(ca_free(a, p, 4), CA_OK); /* another stream's order is a stream's */
    ck_assert(!ca_owns(a, p, NULL));
    ca_allocator_destroy(a);
}
END_TEST

/* Off (share_bytes 0), or stream 0 (the legacy stream: its pool serves every
 * stream already): a pool of its own from the first request. */
START_TEST(stream_zero_and_share_off_never_share) {
    ca_allocator *a = make(CA_SHARE_BYTES, 0, 1);
    ck_assert_uint_eq(pool_stream(a, must_alloc(a, 512, 0)), 0);
    ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_ALL].current, (int64_t)G);
    ck_assert_uint_eq(pool_stream(a, must_alloc(a, 512, 5)), 0); /* shared: no new granule */
    ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_ALL].current, (int64_t)(2 * G));
    ca_allocator_destroy(a);
    a = make(0, 0, 1);
    ck_assert_uint_eq(pool_stream(a, must_alloc(a, 512, 5)), 5);
    ca_allocator_destroy(a);
}
END_TEST

int main(void) {
    Suite *s = suite_create("share");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, streams_that_hold_little_share_a_pool);
    tcase_add_test(tc, a_stream_that_holds_more_gets_its_own_pool);
    tcase_add_test(tc, a_shared_block_waits_for_a_fence);
    tcase_add_test(tc, a_block_freed_in_its_stream_s_order_is_its_next_at_once);
    tcase_add_test(tc, a_gone_stream_s_kept_blocks_wait_for_a_fence);
    tcase_add_test(tc, kept_blocks_leave_the_device_totals_as_they_came);
    tcase_add_test(tc, a_free_on_another_stream_counts_for_the_one_that_asked);
    tcase_add_test(tc, pending_frees_count_until_their_fence_passes);
    tcase_add_test(tc, a_new_stream_on_an_old_pool_starts_from_nothing);
    tcase_add_test(tc, a_shared_block_freed_on_no_stream_is_refused);
    tcase_add_test(tc, a_stream_that_waits_for_the_shared_lock_gets_its_own_pool);
    tcase_add_test(tc, stream_zero_and_share_off_never_share);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
