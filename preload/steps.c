/* Iteration boundaries. The most trusted source seen wins: an explicit
 * cudalloc_step() beats an NVTX range, which beats detection; once a program
 * has shown a better source, marks from worse ones are ignored. */
#include <stdatomic.h>

#define CUDALLOC_IMPLEMENTATION
#include "include/cudalloc.h"
#include "preload/preload.h"

static _Atomic long iterations;
static _Atomic int best_source = CA_ITER_NONE;

void ca_iteration_mark(ca_iter_source source) {
    int best = atomic_load(&best_source);
    while ((int)source > best && !atomic_compare_exchange_weak(&best_source, &best, (int)source)) {
    }
    if ((int)source < atomic_load(&best_source)) return;
    atomic_fetch_add(&iterations, 1);
}

long ca_iterations(ca_iter_source *source) {
    if (source) *source = (ca_iter_source)atomic_load(&best_source);
    return atomic_load(&iterations);
}

CA_EXPORT int cudalloc_step(void) {
    ca_iteration_mark(CA_ITER_EXPLICIT);
    return 0;
}

CA_EXPORT long cudalloc_iteration(void) { return ca_iterations(NULL); }
