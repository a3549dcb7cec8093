/* What whole-program tests under the preload read from the simulated device
 * (held streams, call counters) and from cudalloc (its figures). Call
 * simhooks_init() first: 0 when the simulated device is not there. */
#ifndef PRELOAD_SIMHOOKS_H
#define PRELOAD_SIMHOOKS_H
#include <dlfcn.h>
#include <string.h>

#include "include/cudalloc.h"
#include "simgpu/simgpu.h"
#include "tests/preload/check.h"

static int (*hold_fn)(void *, int);
static int (*counters_fn)(simgpu_counters_t *);

static inline int simhooks_init(void) {
    void *driver = dlopen("libcuda.so.1", RTLD_NOW);
    hold_fn = driver ? (int (*)(void *, int))dlsym(driver, "simgpu_stream_hold") : NULL;
    counters_fn = driver ? (int (*)(simgpu_counters_t *))dlsym(driver, "simgpu_counters") : NULL;
    return hold_fn && counters_fn;
}

static inline int hold(void *s, int on) { return hold_fn(s, on); }

static inline simgpu_counters_t sim(void) {
    simgpu_counters_t c;
    memset(&c, 0, sizeof c);
    counters_fn(&c);
    return c;
}

static inline cudalloc_stats stats(int device) {
    cudalloc_stats s;
    memset(&s, 0, sizeof s);
    CHECK(CUDALLOC_CALL(cudalloc_get_stats, device, &s) == 0, "cudalloc_get_stats(%d)", device);
    return s;
}

/* Everything freed comes back and is given back: nothing is lost. */
static inline void all_back(int device, const char *what) {
    CHECK(CUDALLOC_CALL(cudalloc_empty_cache) == 0, "empty cache");
    cudalloc_stats s = stats(device);
    CHECK(s.allocated_bytes == 0 && s.active_bytes == 0 && s.reserved_bytes == 0,
          "%s: allocated %lld active %lld reserved %lld after freeing everything", what, (long long)s.allocated_bytes,
          (long long)s.active_bytes, (long long)s.reserved_bytes);
}
#endif
