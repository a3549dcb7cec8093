/* OOM explanations while other threads grow classic segments (issue 30: a
 * hang in the classic reset race). A classic segment is a cuMemAlloc made
 * under its pool's lock; every 16th fills a CUPTI buffer, which CUPTI hands
 * over in that thread, and the preload takes its CUPTI lock to read it. An
 * OOM explanation took the CUPTI lock, then each pool's lock (to tell the
 * preload's memory from others'): the two threads waited on each other.
 * Here one thread asks for more than the device holds, over and over (each
 * answer explains itself, with what CUPTI saw), while the others allocate
 * and give their segments back (cudalloc_empty_cache), so that buffers fill
 * in threads that hold a pool's lock. Run classic, under timeout(1).
 *
 * usage: cupti_oom_race [ROUNDS] [THREADS]  (one line; exit status 1 on a
 * failed check) */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "include/cudalloc.h"

static int rounds;
static _Atomic int failures, grown;

static void *grow(void *arg) {
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return (void *)1;
    for (int i = 0; i < rounds; i++) {
        void *p = NULL;
        if (cudaMallocAsync(&p, (size_t)(1 + i % 3) << 20, s) != cudaSuccess) {
            failures++;
            continue;
        }
        cudaFreeAsync(p, s);
        cudaStreamSynchronize(s);
        CUDALLOC_CALL(cudalloc_empty_cache); /* the next one is a new segment: a cuMemAlloc */
        grown++;
    }
    cudaStreamDestroy(s);
    return NULL;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atoi(argv[1]) : 2000;
    int nthreads = argc > 2 ? atoi(argv[2]) : 3;
    if (rounds <= 0 || nthreads <= 0 || nthreads > 64) {
        fprintf(stderr, "usage: %s [ROUNDS (1-)] [THREADS (1-64)]\n", argv[0]);
        return 2;
    }
    void *first;
    if (cudaMalloc(&first, 1 << 20) != cudaSuccess || cudaFree(first) != cudaSuccess) return 1;
    pthread_t th[64];
    for (int i = 0; i < nthreads; i++) pthread_create(&th[i], NULL, grow, NULL);
    long ooms = 0;
    while (grown < rounds * nthreads - nthreads) { /* until the others are (nearly) done */
        void *p = NULL;
        if (cudaMalloc(&p, (size_t)1 << 40) == cudaErrorMemoryAllocation) ooms++; /* more than any device */
        else failures++;
        cudaGetLastError();
    }
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    printf("stress cupti-oom-race: %ld OOM explanations while %d threads grew %d segments; %d failures\n", ooms,
           nthreads, (int)grown, (int)failures);
    return failures || !ooms ? 1 : 0;
}
