/* Randomized stress against a shadow model: many seeds, both segment kinds,
 * several streams; then several threads at once. Live blocks never overlap,
 * every byte of a live block is ours to write (host backend), and after every
 * operation the statistics equal what the shadow model says. */
#include <check.h>

#include "tests/check_run.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"

#define MIB ((size_t)1 << 20)
#define G (2 * MIB)
#define MAX_LIVE 256

typedef struct {
    unsigned char *p;
    size_t size;
    ca_stream stream;
    unsigned char tag;
} live_t;

static uint64_t rng(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static size_t random_size(uint64_t *s) {
    switch (rng(s) % 8) {
    case 0: return 1 + rng(s) % 512;
    case 1: case 2: case 3: return 1 + rng(s) % (64 * 1024);
    case 4: case 5: return 1 + rng(s) % MIB;
    case 6: return MIB + rng(s) % (8 * MIB);
    default: return 1 + rng(s) % (40 * MIB);
    }
}

static int fill_ok(const live_t *l) {
    /* Checking the first, last and a middle page keeps big blocks cheap. */
    size_t idx[3] = {0, l->size / 2, l->size - 1};
    for (int i = 0; i < 3; i++)
        if (l->p[idx[i]] != l->tag) return 0;
    return 1;
}

static void fill(live_t *l) {
    memset(l->p, l->tag, l->size < 65536 ? l->size : 4096);
    memset(l->p + l->size / 2, l->tag, 1);
    if (l->size > 65536) memset(l->p + l->size - 4096, l->tag, 4096);
}

struct sums {
    int64_t allocated, count;
};
static void sum_blocks(void *ctx, const ca_segment_view *s, const ca_block_view *b) {
    struct sums *sm = ctx;
    if (b->state != CA_BLOCK_ALLOCATED) return;
    sm->allocated += (int64_t)b->size;
    sm->count++;
    ck_assert_uint_eq(b->mapped, b->size); /* allocated blocks are wholly mapped */
}

static void check_model(ca_allocator *a, live_t *live, int n, int expandable) {
    ca_stats s;
    ca_get_stats(a, &s);
    int64_t requested = 0, rounded = 0;
    for (int i = 0; i < n; i++) {
        requested += (int64_t)live[i].size;
        rounded += (int64_t)((live[i].size + 511) & ~(size_t)511);
    }
    ck_assert_int_eq(s.requested_bytes[CA_POOL_ALL].current, requested);
    ck_assert_int_eq(s.allocation[CA_POOL_ALL].current, n);
    ck_assert_int_eq(s.allocation[CA_POOL_SMALL].current + s.allocation[CA_POOL_LARGE].current, n);
    if (expandable) ck_assert_int_eq(s.allocated_bytes[CA_POOL_ALL].current, rounded);
    else ck_assert_int_ge(s.allocated_bytes[CA_POOL_ALL].current, rounded);
    struct sums sm = {0, 0};
    ca_visit(a, NULL, sum_blocks, &sm);
    ck_assert_int_eq(sm.allocated, s.allocated_bytes[CA_POOL_ALL].current);
    ck_assert_int_eq(sm.count, n);
    ck_assert_int_ge(s.reserved_bytes[CA_POOL_ALL].current, s.allocated_bytes[CA_POOL_ALL].current);
    ck_assert_uint_eq(ca_backend_used(ca_allocator_backend(a)), (size_t)s.reserved_bytes[CA_POOL_ALL].current);
}

static void run_seed(uint64_t seed, int expandable) {
    ca_backend *be = ca_backend_host_new(256 * MIB, G);
    ck_assert_ptr_nonnull(be);
    ca_options opt;
    ca_options_default(&opt);
    opt.expandable = expandable;
    ca_allocator *a;
    ck_assert_int_eq(ca_allocator_new(be, &opt, &a), CA_OK);
    live_t live[MAX_LIVE];
    int n = 0;
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int op = 0; op < 600; op++) {
        uint64_t r = rng(&s) % 100;
        if (r < 55 && n < MAX_LIVE) {
            live_t l = {NULL, random_size(&s), rng(&s) % 3, (unsigned char)(1 + rng(&s) % 255)};
            ca_stats before, after;
            ca_get_stats(a, &before);
            int rc = ca_malloc(a, l.size, l.stream, (void **)&l.p, NULL);
            if (rc == CA_ERR_OOM) {
                ca_get_stats(a, &after);
                ck_assert_int_eq(after.num_ooms, before.num_ooms + 1);
                ck_assert_int_eq(after.allocation[CA_POOL_ALL].current, n);
            } else {
                ck_assert_int_eq(rc, CA_OK);
                uintptr_t lo = (uintptr_t)l.p, hi = lo + l.size;
                for (int i = 0; i < n; i++) {
                    uintptr_t olo = (uintptr_t)live[i].p, ohi = olo + live[i].size;
                    ck_assert_msg(hi <= olo || lo >= ohi, "seed %llu: overlap", (unsigned long long)seed);
                }
                fill(&l);
                live[n++] = l;
            }
        } else if (r < 97 && n > 0) {
            int i = (int)(rng(&s) % (uint64_t)n);
            ck_assert_msg(fill_ok(&live[i]), "seed %llu: block contents changed", (unsigned long long)seed);
            /* Mostly freed on its own stream, sometimes on another. */
            ca_stream fs = rng(&s) % 4 ? live[i].stream : 9;
            ck_assert_int_eq(ca_free(a, live[i].p, fs), CA_OK);
            ck_assert_int_eq(ca_free(a, live[i].p, fs), CA_ERR_INVALID);
            live[i] = live[--n];
        } else {
            ca_release(a);
        }
        check_model(a, live, n, expandable);
    }
    for (int i = 0; i < n; i++) {
        ck_assert(fill_ok(&live[i]));
        ck_assert_int_eq(ca_free(a, live[i].p, live[i].stream), CA_OK);
    }
    check_model(a, live, 0, expandable);
    ca_release(a);
    ca_stats st;
    ca_get_stats(a, &st);
    if (expandable) ck_assert_int_eq(st.reserved_bytes[CA_POOL_ALL].current, 0);
    ca_allocator_destroy(a);
}

START_TEST(seeds_expandable) {
    for (uint64_t seed = 1; seed <= 40; seed++) run_seed(seed, 1);
}
END_TEST

START_TEST(seeds_classic) {
    for (uint64_t seed = 1; seed <= 40; seed++) run_seed(seed, 0);
}
END_TEST

struct worker {
    ca_allocator *a;
    uint64_t seed;
    ca_stream stream;
    int errors;
};

static void *work(void *arg) {
    struct worker *w = arg;
    live_t live[64];
    int n = 0;
    uint64_t s = w->seed;
    for (int op = 0; op < 20000; op++) {
        if ((rng(&s) % 2 || n == 0) && n < 64) {
            live_t l = {NULL, 1 + rng(&s) % (256 * 1024), w->stream, (unsigned char)(1 + rng(&s) % 255)};
            if (ca_malloc(w->a, l.size, l.stream, (void **)&l.p, NULL) != CA_OK) continue;
            fill(&l);
            live[n++] = l;
        } else {
            int i = (int)(rng(&s) % (uint64_t)n);
            if (!fill_ok(&live[i])) w->errors++;
            if (ca_free(w->a, live[i].p, live[i].stream) != CA_OK) w->errors++;
            live[i] = live[--n];
        }
    }
    for (int i = 0; i < n; i++) {
        if (!fill_ok(&live[i])) w->errors++;
        ca_free(w->a, live[i].p, live[i].stream);
    }
    return NULL;
}

START_TEST(threads_and_streams) {
    for (int exp = 0; exp <= 1; exp++) {
        ca_backend *be = ca_backend_host_new(512 * MIB, G);
        ca_options opt;
        ca_options_default(&opt);
        opt.expandable = exp;
        ca_allocator *a;
        ck_assert_int_eq(ca_allocator_new(be, &opt, &a), CA_OK);
        enum { T = 4 };
        pthread_t th[T];
        struct worker w[T];
        for (int i = 0; i < T; i++) {
            w[i] = (struct worker){a, 1000 + (uint64_t)i, (ca_stream)(i % 3), 0};
            pthread_create(&th[i], NULL, work, &w[i]);
        }
        for (int i = 0; i < T; i++) {
            pthread_join(th[i], NULL);
            ck_assert_int_eq(w[i].errors, 0);
        }
        ca_stats s;
        ca_get_stats(a, &s);
        ck_assert_int_eq(s.allocation[CA_POOL_ALL].current, 0);
        ck_assert_int_eq(s.allocated_bytes[CA_POOL_ALL].current, 0);
        ck_assert_int_eq(s.requested_bytes[CA_POOL_ALL].current, 0);
        ck_assert_int_eq(s.allocation[CA_POOL_ALL].allocated, s.allocation[CA_POOL_ALL].freed);
        ca_allocator_destroy(a);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("allocator-stress");
    TCase *tc = tcase_create("stress");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, seeds_expandable);
    tcase_add_test(tc, seeds_classic);
    tcase_add_test(tc, threads_and_streams);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
