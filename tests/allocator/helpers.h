/* What the allocator's unit tests share: sizes, an allocator on a backend
 * (the test fails if it cannot start), an allocation that must succeed, the
 * figures now. */
#ifndef CA_TESTS_ALLOCATOR_HELPERS_H
#define CA_TESTS_ALLOCATOR_HELPERS_H
#include <check.h>

#include "allocator/allocator.h"

#define MIB ((size_t)1 << 20)
#define G (2 * MIB) /* the granule every test backend uses */

static inline ca_allocator *new_allocator(ca_backend *be, const ca_options *opt) {
    ck_assert_ptr_nonnull(be);
    ca_allocator *a = NULL;
    ck_assert_int_eq(ca_allocator_new(be, opt, &a), CA_OK);
    return a;
}

static inline void *must_alloc(ca_allocator *a, size_t size, ca_stream s) {
    void *p = NULL;
    ck_assert_int_eq(ca_malloc(a, size, s, &p, NULL), CA_OK);
    ck_assert_ptr_nonnull(p);
    return p;
}

static inline ca_stats stats(ca_allocator *a) {
    ca_stats s;
    ca_get_stats(a, &s);
    return s;
}
#endif
