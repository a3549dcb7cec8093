/* Named frames: interned (same strings, same ip; any field differing, another
 * ip), told apart from native addresses, read back, resolved by the symbol
 * table without addr2line, and interned consistently from several threads. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>
#include <pthread.h>
#include <string.h>

#include "reports/capture/named_frames.h"
#include "reports/capture/stacks.h"
#include "reports/capture/symbolize.h"

#define THREADS 4
#define FRAMES 500
static uintptr_t seen[THREADS][FRAMES];

static void *intern_many(void *arg) {
    uintptr_t *out = arg;
    char name[32];
    for (int i = 0; i < FRAMES; i++) {
        snprintf(name, sizeof name, "fn%d", i);
        out[i] = ca_named_frame(name, "threads.py", (unsigned)i, "python");
    }
    return NULL;
}

START_TEST(interned)
{
    uintptr_t a = ca_named_frame("keep_metric", "train.py", 12, "python");
    uintptr_t b = ca_named_frame("keep_metric", "train.py", 12, "python");
    ck_assert(a != 0 && ca_ip_is_named(a));
    ck_assert_uint_eq(a, b);
    ck_assert(ca_named_frame("keep_metric", "train.py", 13, "python") != a);
    ck_assert(ca_named_frame("keep_metric", "eval.py", 12, "python") != a);
    ck_assert(ca_named_frame("keep_metri", "train.py", 12, "python") != a);
    ck_assert(ca_named_frame("keep_metric", "train.py", 12, "snapshot") != a);
    /* The separators keep "ab"+"c" apart from "a"+"bc". */
    ck_assert(ca_named_frame("ab", "c", 1, "m") != ca_named_frame("a", "bc", 1, "m"));
    const char *fn, *file, *mod;
    unsigned line;
    ck_assert_int_eq(ca_named_frame_get(a, &fn, &file, &line, &mod), 1);
    ck_assert_str_eq(fn, "keep_metric");
    ck_assert_str_eq(file, "train.py");
    ck_assert_uint_eq(line, 12);
    ck_assert_str_eq(mod, "python");
    /* NULL and empty strings read back as "??". */
    uintptr_t u = ca_named_frame(NULL, "", 0, NULL);
    ck_assert_int_eq(ca_named_frame_get(u, &fn, &file, &line, &mod), 1);
    ck_assert_str_eq(fn, "??");
    ck_assert_str_eq(file, "??");
    ck_assert_str_eq(mod, "??");
    /* Native addresses and unknown indices are not named frames. */
    ck_assert_int_eq(ca_ip_is_named((uintptr_t)&intern_many), 0);
    ck_assert_int_eq(ca_named_frame_get((uintptr_t)&intern_many, &fn, NULL, NULL, NULL), 0);
    ck_assert_int_eq(ca_named_frame_get(CA_NAMED_FRAME_BIT | 0xffffff, &fn, NULL, NULL, NULL), 0);
    ck_assert_uint_ge(ca_named_frame_count(), 7);
    ck_assert_uint_gt(ca_named_frame_memory(), 0);
    /* A long name goes through the heap key path. */
    char longname[2000];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    uintptr_t l = ca_named_frame(longname, "f.py", 1, "python");
    ck_assert_uint_eq(l, ca_named_frame(longname, "f.py", 1, "python"));
    ck_assert_int_eq(ca_named_frame_get(l, &fn, NULL, NULL, NULL), 1);
    ck_assert_uint_eq(strlen(fn), sizeof longname - 1);
}
END_TEST

START_TEST(resolved_without_addr2line)
{
    uintptr_t py = ca_named_frame("evaluate", "train.py", 99, "python");
    uintptr_t ips[2] = {(uintptr_t)&intern_many + 1, py};
    ca_stacks *st = ca_stacks_new(8);
    uint32_t id = ca_stacks_intern(st, ips, 2);
    ck_assert_uint_eq(id, ca_stacks_intern(st, ips, 2));
    ca_symtab *sym = ca_symtab_new();
    const uintptr_t *got;
    unsigned n = ca_stacks_get(st, id, &got);
    ck_assert_uint_eq(n, 2);
    for (unsigned i = 0; i < n; i++) ca_symtab_add(sym, got[i]);
    ca_symtab_resolve(sym, 1, 5000);
    const ca_frame *f = ca_symtab_get(sym, py);
    ck_assert_ptr_nonnull(f);
    ck_assert_str_eq(f->function, "evaluate");
    ck_assert_str_eq(f->file, "train.py");
    ck_assert_uint_eq(f->line, 99);
    ck_assert_str_eq(f->module, "python");
    ck_assert_ptr_nonnull(strstr(ca_symtab_get(sym, ips[0])->module, "test_named_frames"));
    ca_symtab_free(sym);
    ca_stacks_free(st);
}
END_TEST

START_TEST(threads_agree)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, intern_many, seen[i]);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 1; i < THREADS; i++) ck_assert_int_eq(memcmp(seen[0], seen[i], sizeof seen[0]), 0);
    for (int i = 0; i < FRAMES; i++) {
        unsigned line;
        ck_assert_int_eq(ca_named_frame_get(seen[0][i], NULL, NULL, &line, NULL), 1);
        ck_assert_uint_eq(line, (unsigned)i);
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("named frames");
    TCase *tc = tcase_create("named frames");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, interned);
    tcase_add_test(tc, resolved_without_addr2line);
    tcase_add_test(tc, threads_agree);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)
