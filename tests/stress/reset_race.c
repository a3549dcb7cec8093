/* cudaDeviceReset while other threads allocate and free (issue 30): CUDA
 * calls it the caller's error, but under the preload it crashed the program
 * (the reset destroyed the allocator other threads were in: SIGSEGV, SIGBUS,
 * a hang, once one block handed to two threads). The other threads must get
 * CUDA's answers and go on; no block may be live twice. Each worker takes
 * one route: plain (cudaMalloc/cudaFree), stream-ordered on a stream of its
 * own, or on its per-thread default stream. Run by tests/stress/run.sh under
 * each build (plain, ASan+UBSan, TSan).
 *
 * What "live twice" means across resets: a reset frees every block, so a
 * block is checked against those allocated in the same interval between
 * resets (`epoch`: odd while a reset runs; a block counts only when the epoch
 * was the same even number before and after its cudaMalloc). A worker frees
 * only blocks of the current epoch; if a reset slipped in between its check
 * and its free, that free may have hit a newer block: overlaps in the epochs
 * it could have reached are not counted (`tainted`).
 *
 * usage: reset_race [RESETS] [THREADS]  (one summary line; exit status 1 on
 * any failed check) */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "include/cudalloc.h"

#define HELD 12          /* blocks a worker holds at most */
#define MAX_EPOCHS 4096  /* 2 per reset */
#define MAX_LIVE 1024

static int failures;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the bookkeeping below */
#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            pthread_mutex_lock(&lock);                                     \
            if (failures++ < 10) {                                         \
                fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
                fprintf(stderr, __VA_ARGS__);                              \
                fputc('\n', stderr);                                       \
            }                                                              \
            pthread_mutex_unlock(&lock);                                   \
        }                                                                  \
    } while (0)

static _Atomic unsigned epoch;
static _Atomic int done;

typedef struct { uintptr_t at; size_t size; unsigned epoch; int owner; } block;
static block live[MAX_LIVE]; /* blocks of a certain epoch, not yet freed */
static int nlive;
static unsigned overlap_epochs[64]; /* where two live blocks overlapped */
static int noverlaps;
static _Atomic(unsigned char) tainted[MAX_EPOCHS];

static void record(block b) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nlive; i++)
        if (live[i].epoch == b.epoch && live[i].at < b.at + b.size && b.at < live[i].at + live[i].size &&
            noverlaps < 64)
            overlap_epochs[noverlaps++] = b.epoch;
    if (nlive < MAX_LIVE) live[nlive++] = b;
    pthread_mutex_unlock(&lock);
}

static void unrecord(uintptr_t at, unsigned epoch_of, int owner) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nlive; i++)
        if (live[i].at == at && live[i].epoch == epoch_of && live[i].owner == owner) {
            live[i] = live[--nlive];
            break;
        }
    pthread_mutex_unlock(&lock);
}

enum route { PLAIN, STREAM, PER_THREAD };
static const char *route_name[] = {"plain", "stream-ordered", "per-thread default stream"};

typedef struct {
    int id;
    enum route route;
    long allocs, errors;
} worker;

/* CUDA's answers a racing call may get: anything but a crash or a hang. */
static cudaError_t allocate(worker *w, cudaStream_t s, void **p, size_t size) {
    return w->route == PLAIN ? cudaMalloc(p, size) : cudaMallocAsync(p, size, s);
}

static cudaError_t release(worker *w, cudaStream_t s, void *p) {
    return w->route == PLAIN ? cudaFree(p) : cudaFreeAsync(p, s);
}

static void *work(void *arg) {
    worker *w = arg;
    struct { void *p; unsigned epoch; } held[HELD];
    int n = 0;
    unsigned seed = (unsigned)w->id * 2654435761u;
    cudaStream_t own = NULL;
    unsigned own_epoch = ~0u;
    while (!done) {
        unsigned now = epoch;
        cudaStream_t s = w->route == PER_THREAD ? cudaStreamPerThread : own;
        if (w->route == STREAM && own_epoch != now) { /* a reset took the stream: a new one (the old is gone) */
            if (cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking) != cudaSuccess) {
                w->errors++;
                continue;
            }
            own_epoch = now, s = own;
        }
        seed = seed * 1103515245u + 12345u;
        if (n < HELD && (n == 0 || seed >> 16 & 1)) {
            size_t size = (seed >> 20 & 7) == 0 ? ((size_t)(seed >> 8 & 7) + 2) << 20   /* 2-9 MiB, 1 in 8 */
                                                : ((size_t)(seed >> 4 & 255) + 1) << 10; /* 1-256 KiB */
            void *p = NULL;
            unsigned before = epoch;
            cudaError_t r = allocate(w, s, &p, size);
            unsigned after = epoch;
            w->allocs++;
            if (r != cudaSuccess) {
                if (r == cudaErrorInvalidResourceHandle) own_epoch = ~0u; /* the stream went in a reset */
                w->errors++;
                cudaGetLastError();
                continue;
            }
            if (before != after || before & 1) continue; /* across a reset: forgotten, as the reset freed it */
            record((block){(uintptr_t)p, size, before, w->id});
            held[n].p = p, held[n++].epoch = before;
        } else {
            int i = (int)(seed >> 8) % n;
            void *p = held[i].p;
            unsigned e = held[i].epoch;
            held[i] = held[--n];
            unrecord((uintptr_t)p, e, w->id);
            if (epoch != e) continue; /* a reset freed it */
            if (release(w, s, p) != cudaSuccess) {
                w->errors++;
                cudaGetLastError();
            }
            unsigned after = epoch; /* a reset in between: that free may have hit a newer block */
            for (unsigned t = e + 2; after != e && t <= after + 1 && t < MAX_EPOCHS; t += 2) tainted[t] = 1;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int resets = argc > 1 ? atoi(argv[1]) : 100, nthreads = argc > 2 ? atoi(argv[2]) : 6;
    if (resets <= 0 || resets >= MAX_EPOCHS / 2 - 1 || nthreads <= 0 || nthreads > 64) {
        fprintf(stderr, "usage: %s [RESETS (1-2046)] [THREADS (1-64)]\n", argv[0]);
        return 2;
    }
    void *first;
    CHECK(cudaMalloc(&first, 1 << 20) == cudaSuccess && cudaFree(first) == cudaSuccess, "first allocation");
    worker w[64];
    pthread_t th[64];
    for (int i = 0; i < nthreads; i++) {
        w[i] = (worker){.id = i, .route = (enum route)(i % 3)};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < resets; i++) {
        usleep(2000); /* the workers allocate meanwhile */
        epoch++;
        CHECK(cudaDeviceReset() == cudaSuccess, "cudaDeviceReset %d", i);
        epoch++;
    }
    done = 1;
    long allocs[3] = {0}, errors = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        allocs[w[i].route] += w[i].allocs;
        errors += w[i].errors;
    }
    int counted = 0;
    for (int i = 0; i < noverlaps; i++)
        if (!tainted[overlap_epochs[i]]) counted++;
    CHECK(counted == 0, "%d overlaps of live blocks of one epoch (%d in all)", counted, noverlaps);
    for (int r = 0; r < 3 && r < nthreads; r++) CHECK(allocs[r] > 0, "no allocation by the %s route", route_name[r]);
    /* the device goes on: a last reset, then an allocation, and nothing is left */
    CHECK(cudaDeviceReset() == cudaSuccess, "last reset");
    void *p = NULL;
    CHECK(cudaMalloc(&p, 3 << 20) == cudaSuccess && cudaFree(p) == cudaSuccess, "allocation after the race");
    cudalloc_stats st;
    CHECK(CUDALLOC_CALL(cudalloc_get_stats, 0, &st) == 0 && st.allocation == 0, "nothing live at the end");
    printf("stress reset-race: %d resets while %d threads allocated (%ld plain, %ld stream-ordered, %ld per-thread "
           "stream; %ld CUDA errors); %d overlaps (%d in tainted epochs); %d failures\n",
           resets, nthreads, allocs[PLAIN], allocs[STREAM], allocs[PER_THREAD], errors, counted, noverlaps - counted,
           failures);
    return failures ? 1 : 0;
}
