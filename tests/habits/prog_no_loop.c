/* A CUDA program with no loop, as a script or an inference test is: it loads
 * a table and weights, uses a scratch buffer, keeps a cache on purpose and
 * exits without freeing. tests/habits/run.sh checks that the exit summary
 * and the reports list what it still holds by call site, largest first, and
 * that a suppression takes the cache out. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define MIB ((size_t)1 << 20)

__attribute__((noinline)) static void *must_alloc(size_t n) {
    void *p = NULL;
    if (cudaMalloc(&p, n) != cudaSuccess || !p) {
        fprintf(stderr, "prog_no_loop: cudaMalloc(%zu) failed\n", n);
        exit(1);
    }
    return p;
}

/* The barrier after each call keeps its frame: no tail call. */
#define KEEP_FRAME(x) ({ void *p_ = (x); __asm__ volatile("" : : "r"(p_) : "memory"); p_; })
__attribute__((noinline)) void *load_embedding_table(void) { return KEEP_FRAME(must_alloc(6 * MIB)); }
__attribute__((noinline)) void *load_weights(void) { return KEEP_FRAME(must_alloc(3 * MIB)); }
__attribute__((noinline)) void *known_kernel_cache(void) { return KEEP_FRAME(must_alloc(2 * MIB)); }

__attribute__((noinline)) static void run_once(void) {
    void *scratch = must_alloc(8 * MIB); /* freed: not live at the end */
    cudaFree(scratch);
}

int main(void) {
    void *table = load_embedding_table();
    void *w1 = load_weights(), *w2 = load_weights();
    void *cache = known_kernel_cache();
    run_once();
    printf("prog_no_loop: done (%p %p %p %p kept)\n", table, w1, w2, cache);
    return 0;
}
