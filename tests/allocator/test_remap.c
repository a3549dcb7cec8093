/* Unit tests of reserved memory that follows need (expandable.c): free
 * granules moved where a request needs them instead of new ones created,
 * granules the pool did not need given back, and neither done to memory the
 * device may still touch. Count and host backends, and a fake device with
 * events and fences (fake_device.h) whose progress the test sets and whose
 * unmaps it watches. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/internal.h"
#include "tests/allocator/fake_device.h"
#include "tests/allocator/helpers.h"
#include "tests/check_run.h"

enum { COUNT, HOST, DEVICE };

static ca_allocator *make(int kind, size_t capacity, uint64_t release_after) {
    ca_backend *be = kind == HOST ? ca_backend_host_new(capacity ? capacity : 256 * MIB, G)
                                  : ca_backend_count_new(capacity, G);
    fake_device(be, kind == DEVICE, kind == DEVICE);
    ca_options opt;
    ca_options_default(&opt);
    opt.release_after = release_after;
    return new_allocator(be, &opt);
}

static int64_t reserved(ca_allocator *a) { return stats(a).reserved_bytes[CA_POOL_ALL].current; }

/* Was any granule of [addr, addr + size) unmapped since the test began? */
static int unmapped_inside(const void *addr, size_t size) {
    for (int i = 0; i < fk.n_unmapped; i++)
        if (fk.unmapped[i] - (uintptr_t)addr < size) return 1;
    return 0;
}

/* What the allocator keeps must agree with itself and with the backend: the
 * statistics with the granules mapped and with the memory the backend made;
 * each free block's count of unmapped granules with its granules' handles;
 * the mapped bits with the handles; allocated blocks wholly mapped. */
static void check_consistent(ca_allocator *a) {
    size_t g = a->granule, mapped = 0;
    ca_pool *const *pools;
    size_t npools = ca_pools(a, &pools);
    for (size_t i = 0; i < npools; i++) {
        ca_pool *p = pools[i];
        for (int k = 0; k < p->nheaps; k++)
            for (ca_segment *seg = p->heap[k].segments; seg; seg = seg->next) {
                size_t n = 0;
                for (size_t j = 0; j < seg->span / g; j++) {
                    bool bit = seg->mapped_bits[j / 64] >> (j % 64) & 1;
                    ck_assert_int_eq(bit, seg->handles[j] != 0);
                    n += bit;
                }
                ck_assert_uint_eq(n * g, seg->mapped);
                mapped += seg->mapped;
                for (ca_block *b = seg->first; b; b = b->next) {
                    size_t lo = (b->addr - seg->base) / g, hi = (b->addr + b->size - seg->base + g - 1) / g;
                    size_t wlo = (b->addr - seg->base + g - 1) / g, whi = (b->addr + b->size - seg->base) / g;
                    size_t holes = 0;
                    for (size_t j = wlo; j < whi; j++) holes += !seg->handles[j];
                    if (b->allocated) {
                        for (size_t j = lo; j < hi; j++) ck_assert(seg->handles[j]);
                        if (!b->pending) ck_assert_uint_eq(b->unmapped, 0);
                    } else {
                        ck_assert_uint_eq(b->unmapped, holes);
                    }
                }
            }
    }
    ca_stats s = stats(a);
    ck_assert_int_eq(s.reserved_bytes[CA_POOL_ALL].current, (int64_t)mapped);
    ck_assert_uint_eq(ca_backend_used(ca_allocator_backend(a)), mapped);
    ck_assert_int_eq((s.num_device_alloc - s.num_device_free) * (int64_t)g, (int64_t)mapped);
}

/* ---- moving free granules instead of creating new ones ---- */

/* A hole of five granules, then a request that does not fit it: the hole's
 * granules are moved to the end of the range, two more are created. Before,
 * seven were created and the hole kept its five (34 MiB reserved). */
START_TEST(a_hole_s_granules_are_moved_not_created) {
    ca_allocator *a = make(COUNT, 0, 0);
    void *x = must_alloc(a, 10 * MIB, 0), *y = must_alloc(a, 10 * MIB, 0);
    ca_free(a, x, 0);
    void *z = must_alloc(a, 14 * MIB, 0);
    ca_stats s = stats(a);
    ck_assert_int_eq(s.reserved_bytes[CA_POOL_ALL].current, (int64_t)(24 * MIB));
    ck_assert_int_eq(s.reserved_bytes[CA_POOL_ALL].peak, (int64_t)(24 * MIB));
    ck_assert_int_eq(s.num_granules_moved, 5);
    ck_assert_int_eq(s.num_device_alloc, 12);
    ck_assert_int_eq(fk.n_unmapped, 5);
    ck_assert(unmapped_inside(x, 10 * MIB));
    ck_assert(!unmapped_inside(y, 10 * MIB) && !unmapped_inside(z, 14 * MIB));
    check_consistent(a);
    ca_allocator_destroy(a);
}
END_TEST

/* The observer sees each move as an unmap, then a map: its reserved figure
 * never counts a granule twice. */
struct seen {
    int64_t reserved, peak;
    int maps, unmaps;
};
static void watch(void *ctx, const ca_trace_event *ev) {
    struct seen *s = ctx;
    if (ev->kind == CA_EV_SEGMENT_MAP) s->reserved += (int64_t)ev->size, s->maps++;
    if (ev->kind == CA_EV_SEGMENT_UNMAP) s->reserved -= (int64_t)ev->size, s->unmaps++;
    if (s->reserved > s->peak) s->peak = s->reserved;
}

START_TEST(moves_are_reported_unmap_first) {
    ca_allocator *a = make(COUNT, 0, 0);
    struct seen seen = {0};
    ca_set_observer(a, watch, &seen);
    void *x = must_alloc(a, 10 * MIB, 0);
    must_alloc(a, 10 * MIB, 0);
    ca_free(a, x, 0);
    must_alloc(a, 14 * MIB, 0);
    ck_assert_int_eq(seen.reserved, reserved(a));
    ck_assert_int_eq(seen.peak, (int64_t)(24 * MIB));
    ck_assert_int_eq(seen.unmaps, 1); /* the hole's five granules: one run */
    ca_allocator_destroy(a);
}
END_TEST

/* Shapes that vary from iteration to iteration (a batch of 1 to 8): each
 * iteration's activations are made and freed interleaved, so holes of one
 * iteration's sizes meet the next one's requests. Reserved stays within two
 * granules of the most ever allocated at once (82 MiB for 81.1 MiB); the
 * policy before this one reached 98 MiB. */
START_TEST(varying_shapes_keep_reserved_near_the_peak) {
    ca_allocator *a = make(COUNT, 0, 0);
    unsigned rng = 1;
    for (int it = 0; it < 400; it++) {
        rng = rng * 1103515245u + 12345u;
        size_t batch = 1 + (rng >> 16) % 8;
        void *w = must_alloc(a, batch * 3 * MIB + 4096, 0);
        void *x = must_alloc(a, batch * 5 * MIB + 512, 0);
        ca_free(a, w, 0);
        void *y = must_alloc(a, batch * 4 * MIB + 77777, 0);
        void *z = must_alloc(a, (9 - batch) * MIB + 1000, 0);
        ca_free(a, x, 0);
        void *v = must_alloc(a, batch * 6 * MIB, 0);
        ca_free(a, y, 0);
        ca_free(a, z, 0);
        ca_free(a, v, 0);
    }
    ca_stats s = stats(a);
    ck_assert_int_le(s.reserved_bytes[CA_POOL_ALL].peak, s.allocated_bytes[CA_POOL_ALL].peak + (int64_t)(2 * G));
    ck_assert_int_gt(s.num_granules_moved, 0);
    check_consistent(a);
    ca_allocator_destroy(a);
}
END_TEST

/* Real memory: what live blocks hold survives every move around them. */
static void fill(void *p, size_t size, unsigned seed) {
    for (size_t off = 0; off + 8 <= size; off += 4096) *(uint64_t *)((char *)p + off) = seed * 0x9E3779B97F4A7C15ull + off;
    *((char *)p + size - 1) = (char)seed;
}
static int intact(const void *p, size_t size, unsigned seed) {
    for (size_t off = 0; off + 8 <= size; off += 4096)
        if (*(const uint64_t *)((const char *)p + off) != seed * 0x9E3779B97F4A7C15ull + off) return 0;
    return *((const char *)p + size - 1) == (char)seed;
}

START_TEST(live_data_survives_moves) {
    ca_allocator *a = make(HOST, 512 * MIB, 0);
    enum { N = 48 };
    void *p[N] = {0};
    size_t size[N];
    unsigned seed[N];
    for (int i = 0; i < N; i++) {
        size[i] = (size_t)(1 + i % 7) * MIB + (size_t)i * 4096 + 100;
        seed[i] = (unsigned)i + 1;
        fill(p[i] = must_alloc(a, size[i], 0), size[i], seed[i]);
    }
    for (int round = 0; round < 6; round++) {
        for (int i = round % 2; i < N; i += 2) { /* every other one goes, then comes back larger */
            ca_free(a, p[i], 0);
            size[i] = size[i] % (9 * MIB) + 3 * MIB + 8192;
            seed[i] += 1000;
            fill(p[i] = must_alloc(a, size[i], 0), size[i], seed[i]);
        }
        for (int i = 0; i < N; i++) ck_assert_msg(intact(p[i], size[i], seed[i]), "block %d lost its data in round %d", i, round);
        check_consistent(a);
    }
    ck_assert_int_gt(stats(a).num_granules_moved, 0);
    ca_allocator_destroy(a);
}
END_TEST

/* ---- only idle memory moves or goes back ---- */

/* Freed in stream order on a device that runs work after calls return: the
 * pool's stream may still use the block, so its granules stay where they
 * are (new ones are created) until a mark recorded after the free passes. */
START_TEST(busy_blocks_wait_for_a_mark) {
    ca_allocator *a = make(DEVICE, 0, 0);
    void *x = must_alloc(a, 10 * MIB, 0);
    must_alloc(a, 10 * MIB, 0);
    ca_free(a, x, 0);
    void *z = must_alloc(a, 14 * MIB, 0);
    ck_assert_int_eq(stats(a).num_granules_moved, 0);
    ck_assert_int_eq(fk.n_unmapped, 0);
    ck_assert_int_eq(reserved(a), (int64_t)(34 * MIB));
    ck_assert_int_eq(fk.done_records, 1); /* a mark, to know when x is idle */
    ca_free(a, z, 0);                     /* after the mark: busy until another */
    void *w = must_alloc(a, 20 * MIB, 0);    /* not there yet: still nothing moves */
    ck_assert_int_eq(fk.n_unmapped, 0);
    ca_free(a, w, 0);
    fk.passed = fk.recorded; /* the device caught up with the mark */
    /* z's and w's free region [20, 40) MiB grows to 36 MiB: eight granules
     * short. x's five, freed before the mark, move; the region's own, freed
     * after it, stay busy; three are created. */
    must_alloc(a, 36 * MIB, 0);
    ck_assert_int_eq(stats(a).num_granules_moved, 5);
    ck_assert_int_eq(stats(a).num_device_alloc, 10 + 7 + 3 + 3);
    for (int i = 0; i < fk.n_unmapped; i++) ck_assert(fk.unmapped[i] - (uintptr_t)x < 10 * MIB);
    check_consistent(a);
    ca_allocator_destroy(a);
}
END_TEST

/* cudaFree's block comes back when its fence passes. A fence that passed at
 * record (the legacy stream orders later work after it) makes the block
 * reusable, not idle: the device may still be running work that touches it. */
START_TEST(plain_frees_are_idle_only_when_the_device_is_done) {
    for (int ordered = 0; ordered <= 1; ordered++) {
        ca_allocator *a = make(DEVICE, 0, 0);
        fk.ordered = ordered;
        void *x = must_alloc(a, 10 * MIB, 0);
        must_alloc(a, 10 * MIB, 0);
        ca_free_device(a, x, 0);
        if (!ordered) {
            must_alloc(a, 512, 0); /* records the fence */
            fk.passed = fk.recorded;
        }
        must_alloc(a, 14 * MIB, 0);
        ck_assert_int_eq(stats(a).num_granules_moved, ordered ? 0 : 5);
        check_consistent(a);
        ca_allocator_destroy(a);
    }
    /* A synchronized device: idle at once. */
    ca_allocator *a = make(DEVICE, 0, 0);
    void *x = must_alloc(a, 10 * MIB, 0);
    must_alloc(a, 10 * MIB, 0);
    ca_free_device(a, x, 1);
    must_alloc(a, 14 * MIB, 0);
    ck_assert_int_eq(stats(a).num_granules_moved, 5);
    ca_allocator_destroy(a);
}
END_TEST

/* ---- giving back ---- */

/* After a peak of 40 MiB the pool needs 4 MiB for a long time: the granules
 * above go back to the device (and the live block's stay, its data intact). */
START_TEST(give_back_releases_what_was_not_needed) {
    ca_allocator *a = make(HOST, 256 * MIB, 100);
    void *keep = must_alloc(a, 3 * MIB, 0);
    fill(keep, 3 * MIB, 7);
    void *p[10];
    for (int i = 0; i < 10; i++) p[i] = must_alloc(a, 4 * MIB, 0);
    for (int i = 0; i < 10; i++) ca_free(a, p[i], 0);
    ck_assert_int_eq(reserved(a), (int64_t)(44 * MIB));
    for (int i = 0; i < 300; i++) ca_free(a, must_alloc(a, 1 * MIB, 0), 0);
    ca_stats s = stats(a);
    ck_assert_int_le(s.reserved_bytes[CA_POOL_ALL].current, (int64_t)(4 * MIB + 2 * G));
    ck_assert_int_ge(s.num_device_free, 18);
    ck_assert(intact(keep, 3 * MIB, 7));
    ck_assert(!unmapped_inside(keep, 3 * MIB));
    check_consistent(a);
    ca_allocator_destroy(a);
}
END_TEST

/* A loop whose every iteration comes back to the same peak keeps it mapped:
 * nothing is given back and created again. Without give-back (0), nothing
 * ever goes back. */
START_TEST(give_back_keeps_a_loop_s_peak) {
    for (int never = 0; never <= 1; never++) {
        ca_allocator *a = make(COUNT, 0, never ? 0 : 100);
        void *p[10];
        for (int it = 0; it < 200; it++) {
            for (int i = 0; i < 10; i++) p[i] = must_alloc(a, (size_t)(i + 1) * MIB, 0);
            for (int i = 0; i < 10; i++) ca_free(a, p[i], 0);
            for (int i = 0; i < 20; i++) ca_free(a, must_alloc(a, 4096, 0), 0);
        }
        ca_stats s = stats(a);
        ck_assert_int_eq(s.num_device_free, 0);
        ck_assert_int_eq(s.reserved_bytes[CA_POOL_ALL].current, s.reserved_bytes[CA_POOL_ALL].peak);
        ca_allocator_destroy(a);
    }
}
END_TEST

/* Busy free blocks are not given back until a mark says the device is done. */
START_TEST(give_back_waits_for_busy_blocks) {
    ca_allocator *a = make(DEVICE, 0, 50);
    void *x = must_alloc(a, 20 * MIB, 0);
    ca_free(a, x, 0);
    for (int i = 0; i < 200; i++) ca_free(a, must_alloc(a, 4096, 0), 0);
    ck_assert(!unmapped_inside(x, 20 * MIB));
    ck_assert_int_ge(fk.done_records, 1);
    fk.passed = fk.recorded;
    for (int i = 0; i < 200; i++) ca_free(a, must_alloc(a, 4096, 0), 0);
    ck_assert(unmapped_inside(x, 20 * MIB));
    ck_assert_int_le(reserved(a), (int64_t)(2 * G));
    check_consistent(a);
    ca_allocator_destroy(a);
}
END_TEST

/* Random churn of every kind: the books stay consistent throughout. */
START_TEST(books_stay_consistent_under_churn) {
    ca_allocator *a = make(COUNT, 0, 64);
    enum { N = 64 };
    void *p[N] = {0};
    unsigned rng = 7;
    for (int step = 0; step < 20000; step++) {
        rng = rng * 1103515245u + 12345u;
        int i = (int)((rng >> 8) % N);
        if (p[i]) {
            ca_free(a, p[i], 0);
            p[i] = NULL;
        } else {
            size_t size = (rng >> 20) % 4 == 0 ? ((rng >> 12) % 24 + 1) * MIB + (rng & 4095) : (rng >> 12) % 200000 + 1;
            p[i] = must_alloc(a, size, 0);
        }
        if (step % 97 == 0) check_consistent(a);
        if (step % 5000 == 4999) ca_release(a);
    }
    ck_assert_int_gt(stats(a).num_granules_moved, 0);
    ck_assert_int_gt(stats(a).num_device_free, 0);
    check_consistent(a);
    ca_allocator_destroy(a);
}
END_TEST

/* A full device: donors make room where the device has none, without the
 * out-of-memory retry (which would synchronize the stream). */
START_TEST(donors_serve_a_full_device) {
    ca_allocator *a = make(COUNT, 24 * MIB, 0);
    void *x = must_alloc(a, 10 * MIB, 0);
    must_alloc(a, 10 * MIB, 0);
    ca_free(a, x, 0);
    must_alloc(a, 14 * MIB, 0);
    ca_stats s = stats(a);
    ck_assert_int_eq(s.num_alloc_retries, 0);
    ck_assert_int_eq(s.num_ooms, 0);
    ck_assert_int_eq(s.reserved_bytes[CA_POOL_ALL].current, (int64_t)(24 * MIB));
    /* more than donors and the device hold together: fails, nothing moved */
    void *q;
    int64_t moved = s.num_granules_moved;
    ck_assert_int_eq(ca_malloc(a, 6 * MIB, 0, &q, NULL), CA_ERR_OOM);
    ck_assert_int_eq(stats(a).num_granules_moved, moved);
    check_consistent(a);
    ca_allocator_destroy(a);
}
END_TEST

int main(void) {
    Suite *s = suite_create("remap");
    TCase *tc = tcase_create("follows need");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_hole_s_granules_are_moved_not_created);
    tcase_add_test(tc, moves_are_reported_unmap_first);
    tcase_add_test(tc, varying_shapes_keep_reserved_near_the_peak);
    tcase_add_test(tc, live_data_survives_moves);
    tcase_add_test(tc, busy_blocks_wait_for_a_mark);
    tcase_add_test(tc, plain_frees_are_idle_only_when_the_device_is_done);
    tcase_add_test(tc, give_back_releases_what_was_not_needed);
    tcase_add_test(tc, give_back_keeps_a_loop_s_peak);
    tcase_add_test(tc, give_back_waits_for_busy_blocks);
    tcase_add_test(tc, books_stay_consistent_under_churn);
    tcase_add_test(tc, donors_serve_a_full_device);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
