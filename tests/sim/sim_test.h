/* Helpers for the simgpu unit tests.
 *
 * Every test runs in its own forked process (Check's fork mode, forced by
 * sim_run), so each starts with a driver that has never seen cuInit and can set
 * the CUDALLOC_SIM_* variables first. */
#ifndef SIM_TEST_H
#define SIM_TEST_H

#include <check.h>
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "simgpu/simgpu.h"

#define CK(call) ck_assert_int_eq((int)(call), CUDA_SUCCESS)
#define MiB ((size_t)1 << 20)

/* cuInit, then the primary context of device 0 made current. */
static inline CUcontext sim_ctx(void)
{
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(cuCtxSetCurrent(ctx));
    return ctx;
}

static inline simgpu_counters_t sim_counters(void)
{
    simgpu_counters_t c;
    ck_assert_int_eq(simgpu_counters(&c), 0);
    return c;
}

/* Runs fn with stderr going to a buffer; returns what it wrote. */
static inline const char *sim_stderr_of(void (*fn)(void *), void *arg)
{
    static char buf[4096];
    FILE *tmp = tmpfile();
    ck_assert_ptr_nonnull(tmp);
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
    return buf;
}

/* The line of /proc/self/maps that holds addr, or "" if none. */
static inline const char *sim_maps_line(const void *addr)
{
    static char line[512];
    FILE *f = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (unsigned long)addr >= lo &&
            (unsigned long)addr < hi) {
            fclose(f);
            return line;
        }
    }
    fclose(f);
    return "";
}

static inline int sim_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
