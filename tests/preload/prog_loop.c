/* A training loop as a framework allocates it, run under the preload by
 * tests/preload/run.sh to check the leak verdicts on real call stacks:
 *
 *   prog_loop shapes        batch and sequence length drawn every step, with
 *                           per-shape caches (a mask per length, an index
 *                           table per batch and length) that grow by a few
 *                           KiB per step for a long time: healthy
 *   prog_loop shapes-leak   the same, and a 1 MiB tensor kept every step on
 *                           a working set of about 100 MiB: a leak
 *
 * Weights (40 MiB) and their gradients (40 MiB) stay; 8 activations of
 * B x T x 256 floats are made and freed each step; cudalloc_step() ends it. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "include/cudalloc.h"
#include "tests/preload/check.h"

#define MIB ((size_t)1 << 20)
#define STEPS 60
#define C 256

static void *dev_alloc(size_t n) {
    void *p = NULL;
    CHECK(cudaMalloc(&p, n) == cudaSuccess && p, "cudaMalloc %zu", n);
    return p;
}

/* A causal mask per sequence length, made once and kept. */
static __attribute__((noinline)) void *mask_for(int T) {
    static void *masks[129];
    if (!masks[T]) masks[T] = dev_alloc((size_t)T * T * 4);
    return masks[T];
}

/* Gather indices per (batch, length), made once and kept. */
static __attribute__((noinline)) void *indices_for(int B, int T) {
    static void *table[13][129];
    if (!table[B][T]) table[B][T] = dev_alloc((size_t)B * T * 8);
    return table[B][T];
}

/* The bug: a tensor kept every step (a history of outputs). */
static void *history[STEPS];
static __attribute__((noinline)) void keep_history(int s) {
    history[s] = dev_alloc(MIB);
    __asm__ volatile("" ::: "memory"); /* no tail call: keep this frame */
}

static __attribute__((noinline)) void step(int s, int B, int T, int leak) {
    void *act[8];
    mask_for(T);
    indices_for(B, T);
    for (int k = 0; k < 8; k++) act[k] = dev_alloc((size_t)B * T * C * 4);
    for (int k = 8; k-- > 0;) CHECK(cudaFree(act[k]) == cudaSuccess, "cudaFree");
    if (leak) keep_history(s);
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
    if (argc != 2 || (strcmp(argv[1], "shapes") && strcmp(argv[1], "shapes-leak"))) {
        fprintf(stderr, "usage: prog_loop shapes|shapes-leak\n");
        return 2;
    }
    int leak = !strcmp(argv[1], "shapes-leak");
    unsigned seed = 7;
    for (int w = 0; w < 10; w++) dev_alloc(4 * MIB);
    for (int s = 0; s < STEPS; s++) {
        int B = 4 + rand_r(&seed) % 9, T = 16 * (1 + rand_r(&seed) % 8);
        step(s, B, T, leak);
        if (s == 0)
            for (int g = 0; g < 10; g++) dev_alloc(4 * MIB);
        CHECK(CUDALLOC_CALL(cudalloc_step) >= 0, "cudalloc_step: is the preload loaded?");
    }
    CHECK_DONE(argv[1]);
}
