/* The tracker's table of live allocations. By address: every entry found,
 * with what was put in it, after puts and takes in any order (a take shifts
 * later slots of a probe run back), growth keeps them all, a walk visits
 * each once, an address put again replaces its entry, and address 0 is an
 * address like any other. By tag: found by it alone, for its address while
 * in use, never one put by address. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>
#include <stdlib.h>

#include "reports/track/tracker_internal.h"

enum { N = 5000 };

static uintptr_t addr_of(int i) { return (uintptr_t)(i * 7919 % 4 + 1) << 40 | (uintptr_t)i << 9; }

static live *put(ca_livetab *t, uintptr_t addr, uint32_t site) {
    live old;
    bool had = true;
    live *l = ca_livetab_put(t, addr, &old, &had);
    ck_assert_ptr_nonnull(l);
    ck_assert(!had);
    ck_assert_uint_eq(l->addr, addr);
    l->site = site;
    l->size = addr / 512;
    return l;
}

/* Each entry in or out as `in` says, with its site, and a walk sees each in one once. */
static void check_all(ca_livetab *t, const char *in) {
    size_t n = 0;
    for (int i = 0; i < N; i++) {
        live *f = ca_livetab_find(t, addr_of(i));
        if (in[i]) {
            ck_assert_ptr_nonnull(f);
            ck_assert_uint_eq(f->site, (uint32_t)i);
            ck_assert_uint_eq(f->size, addr_of(i) / 512);
            n++;
        } else {
            ck_assert_ptr_null(f);
        }
    }
    ck_assert_uint_eq(t->n, n);
    size_t walked = 0, at = 0;
    for (live *l; (l = ca_livetab_next(t, &at));) {
        ck_assert_uint_lt(l->site, N);
        ck_assert(in[l->site]);
        walked++;
    }
    ck_assert_uint_eq(walked, n);
}

START_TEST(finds_what_is_in_after_any_takes) {
    ca_livetab t = {0};
    char *in = calloc(N, 1);
    live out;
    srand(29);
    ck_assert_ptr_null(ca_livetab_find(&t, addr_of(0))); /* empty, no slots yet */
    ck_assert(!ca_livetab_take(&t, addr_of(0), &out));
    size_t at = 0;
    ck_assert_ptr_null(ca_livetab_next(&t, &at));
    for (int i = 0; i < N; i++) { /* grows from 64 slots */
        put(&t, addr_of(i), (uint32_t)i);
        in[i] = 1;
    }
    ck_assert_uint_le(2 * t.n, t.mask + 1);
    check_all(&t, in);
    for (int round = 0; round < 4; round++) {
        for (int k = 0; k < N / 2; k++) {
            int i = rand() % N;
            if (in[i]) {
                ck_assert(ca_livetab_take(&t, addr_of(i), &out)); /* the free's way */
                ck_assert_uint_eq(out.addr, addr_of(i));
                ck_assert_uint_eq(out.site, (uint32_t)i);
            } else {
                ck_assert(!ca_livetab_take(&t, addr_of(i), &out));
                put(&t, addr_of(i), (uint32_t)i);
            }
            in[i] = !in[i];
        }
        check_all(&t, in);
    }
    ca_livetab_free(&t);
    ck_assert_ptr_null(t.slot);
    free(in);
}
END_TEST

/* Address 0 too: the slots mark an empty one otherwise. */
START_TEST(an_address_put_again_replaces_its_entry) {
    static const uintptr_t addrs[] = {512, 0};
    for (size_t k = 0; k < 2; k++) {
        ca_livetab t = {0};
        live old, out;
        bool had;
        put(&t, addrs[k], 7);
        put(&t, 1024, 4);
        live *l = ca_livetab_put(&t, addrs[k], &old, &had); /* its free was missed */
        ck_assert(had);
        ck_assert_uint_eq(old.site, 7);
        ck_assert_uint_eq(l->addr, addrs[k]);
        l->site = 8;
        ck_assert_uint_eq(t.n, 2);
        ck_assert_uint_eq(ca_livetab_find(&t, addrs[k])->site, 8);
        size_t walked = 0, at = 0;
        for (live *w; (w = ca_livetab_next(&t, &at));) walked++;
        ck_assert_uint_eq(walked, 2);
        ck_assert(ca_livetab_take(&t, addrs[k], &out));
        ck_assert_uint_eq(out.site, 8);
        ck_assert(!ca_livetab_take(&t, addrs[k], &out));
        ck_assert_ptr_null(ca_livetab_find(&t, addrs[k]));
        ck_assert_uint_eq(t.n, 1);
        ca_livetab_free(&t);
    }
}
END_TEST

/* Entries put by tag are found by it alone, and only for their address
 * while in use; the walk sees both kinds. */
START_TEST(tagged_entries_are_found_by_their_tag_alone) {
    ca_livetab t = {0};
    live out;
    enum { M = 3000 };
    uint32_t *tag = calloc(M, sizeof *tag);
    for (int i = 0; i < M; i++) { /* past two slabs */
        live *l = ca_livetab_put_tagged(&t, addr_of(i), UINT32_MAX, &tag[i]);
        ck_assert_ptr_nonnull(l);
        ck_assert_uint_ne(tag[i], 0);
        l->site = (uint32_t)i;
    }
    put(&t, 512, 7); /* one by address beside them */
    ck_assert_uint_eq(t.n, M + 1);
    ck_assert_ptr_null(ca_livetab_find(&t, addr_of(5))); /* not in the address table */
    ck_assert(!ca_livetab_take(&t, addr_of(5), &out));
    ck_assert(!ca_livetab_take_tagged(&t, tag[5], addr_of(6), &out)); /* another address */
    ck_assert(!ca_livetab_take_tagged(&t, 0, addr_of(5), &out));       /* none written */
    ck_assert(!ca_livetab_take_tagged(&t, UINT32_MAX, addr_of(5), &out)); /* past the slabs */
    size_t walked = 0, at = 0;
    for (live *l; (l = ca_livetab_next(&t, &at));) walked++;
    ck_assert_uint_eq(walked, M + 1);
    for (int i = 0; i < M; i += 2) {
        ck_assert(ca_livetab_take_tagged(&t, tag[i], addr_of(i), &out));
        ck_assert_uint_eq(out.site, (uint32_t)i);
        ck_assert(!ca_livetab_take_tagged(&t, tag[i], addr_of(i), &out)); /* freed: no longer */
    }
    ck_assert_uint_eq(t.n, M / 2 + 1);
    /* freed entries are reused, last first; a stale tag names no entry of its address */
    uint32_t again;
    ca_livetab_put_tagged(&t, addr_of(M), UINT32_MAX, &again)->site = M;
    ck_assert_uint_eq(again, tag[M - 2]);
    ck_assert(!ca_livetab_take_tagged(&t, tag[M - 2], addr_of(M - 2), &out));
    ck_assert(ca_livetab_take_tagged(&t, again, addr_of(M), &out));
    /* an entry put by address is never taken by tag, though its index be named */
    uint32_t by_addr;
    for (by_addr = 1; by_addr <= t.n_slabs * 1024; by_addr++) {
        ck_assert(!ca_livetab_take_tagged(&t, by_addr, 512, &out));
    }
    ck_assert(ca_livetab_take(&t, 512, &out));
    ck_assert_uint_eq(out.site, 7);
    /* past the largest tag asked for: none made */
    uint32_t big = 1;
    size_t n = t.n;
    ck_assert_ptr_null(ca_livetab_put_tagged(&t, addr_of(M + 1), 1, &big));
    ck_assert_uint_eq(big, 0);
    ck_assert_uint_eq(t.n, n);
    ca_livetab_free(&t);
    free(tag);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("livetab");
    TCase *tc = tcase_create("livetab");
    tcase_add_test(tc, finds_what_is_in_after_any_takes);
    tcase_add_test(tc, an_address_put_again_replaces_its_entry);
    tcase_add_test(tc, tagged_entries_are_found_by_their_tag_alone);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)
