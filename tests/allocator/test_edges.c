/* Unit tests of the bitmaps of free edges (ca_segment.free_edges, issue 29):
 * a pool starts them at CA_EDGES_FROM live blocks; from then on, through
 * churn, plain frees waiting for fences, releases and new ranges, a unit's
 * bit is set exactly where a block in the free index begins or ends; and the
 * blocks land where they land without the bitmaps (the merges read the
 * neighbours then), address for address; a pool taken again keeps them right;
 * a stop puts the next start off. */
#include <check.h>
#include <stdlib.h>

#include "allocator/internal.h"
#include "tests/allocator/fake_device.h"
#include "tests/allocator/helpers.h"
#include "tests/check_run.h"

#define LIVE (CA_EDGES_FROM + 4000) /* past CA_EDGES_FROM */
#define OPS (LIVE + 28000)

_Static_assert(LIVE > CA_EDGES_FROM, "the tests must start the bitmaps");

static uint64_t rng(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* 512 B to 64 KiB mostly, up to 4 MiB one time in ten */
static size_t random_size(uint64_t *s) {
    return rng(s) % 10 ? 1 + rng(s) % 65536 : 1 + rng(s) % (4 * MIB);
}

static ca_heap *heap_of(ca_allocator *a, ca_stream stream) {
    ca_pool *const *arr;
    size_t n = ca_pools(a, &arr);
    for (size_t i = 0; i < n; i++)
        if (arr[i]->state == CA_POOL_LIVE && arr[i]->stream == stream) return &arr[i]->heap[0];
    return NULL;
}

/* Every range of h: its bitmap is the one its blocks call for. Returns the
 * ranges checked. */
static int check_edges(ca_heap *h) {
    int ranges = 0;
    for (ca_segment *seg = h->segments; seg; seg = seg->next, ranges++) {
        ck_assert_ptr_nonnull(seg->free_edges);
        size_t words = seg->free_edges_words;
        ck_assert_uint_ge(words * 64, seg->span / CA_ROUND);
        uint64_t *want = calloc(words, sizeof *want);
        ck_assert_ptr_nonnull(want);
        /* (plain tests, ck_abort on failure: each passing ck_assert writes to Check's log) */
        for (ca_block *b = seg->first; b; b = b->next) {
            if (!b->allocated && b->bin < 0) ck_abort_msg("a free block out of the index");
            if (b->bin < 0) continue;
            size_t first = ca_unit_of(seg, b->addr), last = first + b->size / CA_ROUND - 1;
            want[first / 64] |= 1ull << (first % 64);
            want[last / 64] |= 1ull << (last % 64);
        }
        for (size_t w = 0; w < words; w++)
            if (seg->free_edges[w] != want[w])
                ck_abort_msg("range %d, word %zu: %#llx, want %#llx", ranges, w,
                             (unsigned long long)seg->free_edges[w], (unsigned long long)want[w]);
        free(want);
    }
    return ranges;
}

typedef struct {
    void *p;
    ca_stream stream;
    bool plain; /* to be freed by ca_free_device */
} live_t;

/* Churn on the fake device: allocations on stream 0 (a few on stream 7),
 * frees by ca_free and ca_free_device, fences passing now and then, a
 * release every 3000 operations. `each` runs after every operation. */
typedef void (*after_op)(ca_allocator *a, int op, void *ptr);
static void churn(ca_allocator *a, uint64_t seed, after_op each) {
    static live_t live[LIVE];
    int n = 0;
    uint64_t s = seed;
    for (int op = 0; op < OPS; op++) {
        if (op % 3000 == 2999) {
            fk.passed = fk.recorded;
            ca_release(a);
            each(a, op, NULL);
            continue;
        }
        if (op % 200 == 0) fk.passed = fk.recorded;
        bool grow = n < LIVE && (op < LIVE || rng(&s) % 2);
        if (grow) {
            void *p = NULL;
            ca_stream st = rng(&s) % 50 ? 0 : 7;
            ck_assert_int_eq(ca_malloc(a, random_size(&s), st, &p, NULL), CA_OK);
            live[n++] = (live_t){p, st, st == 0 && rng(&s) % 4 == 0};
            each(a, op, p);
        } else {
            int i = (int)(rng(&s) % (uint64_t)n);
            if (live[i].plain) ck_assert_int_eq(ca_free_device(a, live[i].p, 0), CA_OK);
            else ck_assert_int_eq(ca_free(a, live[i].p, live[i].stream), CA_OK);
            live[i] = live[--n];
            each(a, op, NULL);
        }
    }
    for (int i = 0; i < n; i++) ck_assert_int_eq(ca_free(a, live[i].p, live[i].stream), CA_OK);
}

static ca_allocator *on_fake_device(void) {
    ca_backend *be = fake_device(ca_backend_count_new(64 * 1024 * MIB, G), 1, 1);
    return new_allocator(be, NULL);
}

static int checks;
static void check_now_and_then(ca_allocator *a, int op, void *ptr) {
    ca_heap *h = heap_of(a, 0);
    if (!h || !h->edge_bits) {
        ck_assert_msg(op < LIVE, "no bitmaps at operation %d", op);
        return;
    }
    if (op % 1000 == 0 || op % 3000 == 2999) {
        ck_assert_int_ge(check_edges(h), 1);
        checks++;
    }
}

START_TEST(bitmaps_follow_the_index) {
    ca_allocator *a = on_fake_device();
    checks = 0;
    churn(a, 0x5eed, check_now_and_then);
    ck_assert_int_ge(checks, 25);
    ca_heap *h = heap_of(a, 0);
    ck_assert(h->edge_bits);
    check_edges(h);
    ca_heap *other = heap_of(a, 7); /* a pool with few blocks never starts them */
    ck_assert_ptr_nonnull(other);
    ck_assert(!other->edge_bits);
    ca_allocator_destroy(a);
}
END_TEST

/* The same operations on two allocators: one keeps bitmaps from its first
 * block on, the other never (stopped after every operation). */
static void *with[OPS], *without[OPS];
static void record_with(ca_allocator *a, int op, void *ptr) {
    ca_heap *h = heap_of(a, 0);
    if (h && !h->edge_bits) ca_exp_edges_start(h);
    with[op] = ptr;
}
static void record_without(ca_allocator *a, int op, void *ptr) {
    ca_heap *h = heap_of(a, 0);
    if (h && h->edge_bits) ca_exp_edges_stop(h);
    without[op] = ptr;
}

START_TEST(blocks_land_where_they_did_without_bitmaps) {
    ca_allocator *a = on_fake_device();
    churn(a, 0xb10c5, record_with);
    ck_assert(heap_of(a, 0)->edge_bits);
    check_edges(heap_of(a, 0));
    ca_stats sa = stats(a);
    ca_allocator_destroy(a);
    ca_allocator *b = on_fake_device();
    churn(b, 0xb10c5, record_without);
    ck_assert(!heap_of(b, 0)->edge_bits);
    ca_stats sb = stats(b);
    ca_allocator_destroy(b);
    for (int op = 0; op < OPS; op++)
        if (with[op] != without[op]) ck_abort_msg("operation %d differs", op);
    ck_assert_int_eq(sa.reserved_bytes[CA_POOL_ALL].peak, sb.reserved_bytes[CA_POOL_ALL].peak);
}
END_TEST

/* A pool that ended keeps its heap's choice: the stream that takes it next
 * starts with bitmaps, made for its first range as that range grows, and
 * right from its first block. */
START_TEST(a_reused_pool_keeps_them_right) {
    ca_backend *be = fake_device(ca_backend_count_new(64 * 1024 * MIB, G), 1, 1);
    ca_options o;
    ca_options_default(&o);
    o.share_bytes = 0; /* every block in its stream's pool */
    ca_allocator *a = new_allocator(be, &o);
    static void *p[CA_EDGES_FROM + 100];
    int n = CA_EDGES_FROM + 100;
    for (int i = 0; i < n; i++) p[i] = must_alloc(a, 4096 + (size_t)(i % 5) * 512, 5);
    ca_heap *h = heap_of(a, 5);
    ck_assert(h->edge_bits);
    for (int i = 0; i < n; i++) ck_assert_int_eq(ca_free(a, p[i], 5), CA_OK);
    ca_retire_stream(a, 5);
    fk.passed = fk.recorded = fk.recorded + 1;
    ck_assert_int_eq(stats(a).reserved_bytes[CA_POOL_ALL].current, 0); /* it ended */
    uint64_t s = 7;
    for (int i = 0; i < 300; i++) p[i] = must_alloc(a, 1 + rng(&s) % 65536, 6);
    ck_assert_ptr_eq(heap_of(a, 6), h); /* the same pool, taken again */
    ck_assert(h->edge_bits);
    for (int i = 0; i < 300; i += 2) ck_assert_int_eq(ca_free(a, p[i], 6), CA_OK);
    ck_assert_int_eq(check_edges(h), 1);
    for (int i = 1; i < 300; i += 2) ck_assert_int_eq(ca_free(a, p[i], 6), CA_OK);
    check_edges(h);
    ca_allocator_destroy(a);
}
END_TEST

/* Bitmaps stopped (as when their memory could not be had) are not started
 * again at the next allocation, which would walk every block each time, but
 * once the pool holds twice as many blocks. */
START_TEST(a_stop_puts_the_next_start_off) {
    ca_allocator *a = on_fake_device();
    static void *p[2 * CA_EDGES_FROM];
    int n = 0;
    while (n < CA_EDGES_FROM) p[n++] = must_alloc(a, 4096, 0);
    ca_heap *h = heap_of(a, 0);
    ck_assert(h->edge_bits);
    ca_exp_edges_stop(h);
    p[n++] = must_alloc(a, 4096, 0);
    ck_assert(!h->edge_bits);
    while (n < 2 * CA_EDGES_FROM - 1) p[n++] = must_alloc(a, 4096, 0);
    ck_assert(!h->edge_bits);
    p[n++] = must_alloc(a, 4096, 0); /* twice the blocks it held at the stop */
    ck_assert(h->edge_bits);
    for (int i = 0; i < n; i += 2) ck_assert_int_eq(ca_free(a, p[i], 0), CA_OK);
    check_edges(h);
    for (int i = 1; i < n; i += 2) ck_assert_int_eq(ca_free(a, p[i], 0), CA_OK);
    ca_allocator_destroy(a);
}
END_TEST

int main(void) {
    Suite *s = suite_create("edges");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bitmaps_follow_the_index);
    tcase_add_test(tc, blocks_land_where_they_did_without_bitmaps);
    tcase_add_test(tc, a_reused_pool_keeps_them_right);
    tcase_add_test(tc, a_stop_puts_the_next_start_off);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
