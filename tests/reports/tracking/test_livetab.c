/* The tracker's table of live allocations: every entry found after adds
 * and removes in any order (removal, by entry or by address, shifts later
 * entries of a probe run back), growth keeps them all, the list keeps the
 * order of adding, and an address added again replaces its entry. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>
#include <stdlib.h>

#include "reports/track/tracker_internal.h"

enum { N = 5000 };

static void check_all(const ca_livetab *t, live *e, const char *in) {
    size_t n = 0;
    for (int i = 0; i < N; i++) {
        live *f = ca_livetab_find(t, e[i].addr);
        if (in[i]) {
            ck_assert_ptr_eq(f, &e[i]);
            n++;
        } else {
            ck_assert_ptr_null(f);
        }
    }
    ck_assert_uint_eq(t->n, n);
}

START_TEST(finds_what_is_in_after_any_removals) {
    ca_livetab t = {0};
    live *e = calloc(N, sizeof *e);
    char *in = calloc(N, 1);
    live *old;
    srand(29);
    for (int i = 0; i < N; i++) e[i].addr = (uintptr_t)(rand() % 4 + 1) << 40 | (uintptr_t)i << 9; /* 512-byte steps */
    ck_assert_ptr_null(ca_livetab_find(&t, e[0].addr)); /* empty, no slots yet */
    for (int i = 0; i < N; i++) { /* grows from 64 slots */
        ck_assert(ca_livetab_add(&t, &e[i], &old));
        ck_assert_ptr_null(old);
        in[i] = 1;
    }
    ck_assert_uint_le(2 * t.n, t.mask + 1);
    check_all(&t, e, in);
    for (int round = 0; round < 4; round++) {
        for (int k = 0; k < N / 2; k++) {
            int i = rand() % N;
            if (in[i] && round % 2) ca_livetab_remove(&t, &e[i]);
            else if (in[i]) ck_assert_ptr_eq(ca_livetab_take(&t, e[i].addr), &e[i]); /* the free's way */
            else {
                ck_assert_ptr_null(ca_livetab_take(&t, e[i].addr));
                ck_assert(ca_livetab_add(&t, &e[i], &old));
                ck_assert_ptr_null(old);
            }
            in[i] = !in[i];
        }
        check_all(&t, e, in);
    }
    /* the list: each entry once, in the order added */
    ca_livetab_free(&t);
    ck_assert_ptr_null(t.slot);
    live a = {.addr = 512}, b = {.addr = 1024}, c = {.addr = 1536};
    ca_livetab_add(&t, &a, &old), ca_livetab_add(&t, &b, &old), ca_livetab_add(&t, &c, &old);
    ca_livetab_remove(&t, &b);
    ck_assert_ptr_eq(t.head, &a);
    ck_assert_ptr_eq(a.next, &c);
    ck_assert_ptr_eq(t.tail, &c);
    ca_livetab_add(&t, &b, &old);
    ck_assert_ptr_eq(c.next, &b);
    ca_livetab_remove(&t, &a);
    ck_assert_ptr_eq(t.head, &c);
    ck_assert_ptr_null(c.prev);
    /* An address added again (its free was missed) takes the old entry's
     * place, in the table and at the list's end. */
    live d = {.addr = c.addr};
    ck_assert(ca_livetab_add(&t, &d, &old));
    ck_assert_ptr_eq(old, &c);
    ck_assert_uint_eq(t.n, 2);
    ck_assert_ptr_eq(ca_livetab_find(&t, c.addr), &d);
    ck_assert_ptr_eq(t.head, &b);
    ck_assert_ptr_eq(b.next, &d);
    ck_assert_ptr_eq(t.tail, &d);
    ca_livetab_free(&t);
    free(e);
    free(in);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("livetab");
    TCase *tc = tcase_create("livetab");
    tcase_add_test(tc, finds_what_is_in_after_any_removals);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)
