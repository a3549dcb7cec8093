/* Size arithmetic that says when it overflows instead of wrapping around.
 * Every size a program hands us (cudaMalloc(SIZE_MAX - 1000), a pitch times a
 * height, a trace's Size column) goes through these before it is rounded,
 * multiplied or added, so a request that does not fit in a size_t is refused
 * as too large, never turned into a small one. Each returns true and sets *out
 * when the exact result fits; false, leaving *out alone, when it does not. */
#ifndef CA_CHECKED_H
#define CA_CHECKED_H

#include <stdbool.h>
#include <stddef.h>

static inline bool ca_size_add(size_t a, size_t b, size_t *out) {
    size_t r;
    if (__builtin_add_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}

static inline bool ca_size_mul(size_t a, size_t b, size_t *out) {
    size_t r;
    if (__builtin_mul_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}

/* x rounded up to a multiple of align, a power of two. */
static inline bool ca_size_round_up(size_t x, size_t align, size_t *out) {
    size_t r;
    if (__builtin_add_overflow(x, align - 1, &r)) return false;
    *out = r & ~(align - 1);
    return true;
}

/* a + b, or SIZE_MAX when that does not fit: for figures that only compare. */
static inline size_t ca_size_add_sat(size_t a, size_t b) {
    size_t r;
    return __builtin_add_overflow(a, b, &r) ? (size_t)-1 : r;
}

#endif
