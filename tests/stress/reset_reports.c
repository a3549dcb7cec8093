/* cudaDeviceReset in a loop while SIGUSR1 asks the preload for reports
 * (issue 19): the reset replaces the device's allocator, the preload's
 * reporter thread reads it; they must take turns (before: a use after free
 * under ASan, a crash in up to 2 of 3 plain runs). Run by tests/stress/run.sh
 * with CUDALLOC_REPORT set, under each build (plain, ASan+UBSan, TSan).
 *
 * One report is asked for at a time: the next signal goes once the last
 * report's text file was replaced (each write renames a new file over it),
 * so the reporter is busy for the whole run and nothing is left queued at
 * exit. One summary line; the exit status says whether every check passed.
 *
 * usage: reset_reports [SECONDS] */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "include/cudalloc.h"

static int failures;
#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond) && failures++ < 10) {                                  \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static _Atomic int done;
static char txt[4096];

static ino_t report_inode(void) {
    struct stat st;
    return stat(txt, &st) == 0 ? st.st_ino : 0;
}

static void *ask_reports(void *arg) {
    long *written = arg;
    while (!done) {
        ino_t before = report_inode();
        kill(getpid(), SIGUSR1);
        double t0 = now();
        while (report_inode() == before && now() - t0 < 5) usleep(200);
        if (report_inode() != before) ++*written;
    }
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1;
    const char *prefix = getenv("CUDALLOC_REPORT");
    if (!prefix || seconds <= 0) {
        fprintf(stderr, "usage: CUDALLOC_REPORT=PREFIX %s [SECONDS]\n", argv[0]);
        return 2;
    }
    snprintf(txt, sizeof txt, "%s.txt", prefix);
    void *p[3];
    /* a device in use: the preload's SIGUSR1 handler is there from now on */
    CHECK(cudaMalloc(&p[0], 1 << 20) == cudaSuccess && cudaFree(p[0]) == cudaSuccess, "first allocation");
    CHECK(CUDALLOC_CALL(cudalloc_report) == 0, "reports are on (run under the preload with CUDALLOC_REPORT)");
    long written = 0, resets = 0;
    pthread_t th;
    pthread_create(&th, NULL, ask_reports, &written);
    for (double end = now() + seconds; now() < end && !failures; resets++) {
        for (int i = 0; i < 3; i++) {
            CHECK(cudaMalloc(&p[i], ((size_t)i + 1) << 20) == cudaSuccess, "allocation %d after %ld resets", i, resets);
            CHECK(cudaMemset(p[i], i, ((size_t)i + 1) << 20) == cudaSuccess, "memset");
        }
        CHECK(cudaFree(p[0]) == cudaSuccess, "a free before the reset");
        CHECK(cudaDeviceReset() == cudaSuccess, "cudaDeviceReset %ld", resets);
    }
    done = 1;
    pthread_join(th, NULL);
    cudalloc_stats s;
    CHECK(CUDALLOC_CALL(cudalloc_get_stats, 0, &s) == 0 && s.allocation == 0, "nothing live after the last reset");
    printf("stress reset-reports: %ld resets while %ld reports were written; %d failures\n", resets, written, failures);
    CHECK(written > 0 && resets > 0, "both happened");
    return failures ? 1 : 0;
}
