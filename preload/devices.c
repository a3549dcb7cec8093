/* One allocator per device, made the first time a thread with that device's
 * context allocates. The device is the one the driver reports for the
 * calling thread's current context. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "allocator/lock.h"
#include "preload/preload.h"
#include "reports/named_frames.h"
#include "reports/pyframes.h"

#define MAX_DEVICES 64

static ca_device *devices[MAX_DEVICES]; /* by ordinal */
static ca_device *made[MAX_DEVICES];    /* in the order they were made, for walks */
static _Atomic int nmade;
static ca_lock devices_lock = CA_LOCK_INIT;
/* Bumped in a forked child, so thread caches made before the fork go stale. */
static unsigned generation = 1;

static __thread __attribute__((tls_model("initial-exec"))) CUcontext tl_ctx;
static __thread __attribute__((tls_model("initial-exec"))) ca_device *tl_dev;
static __thread __attribute__((tls_model("initial-exec"))) unsigned tl_generation;

/* One call-stack table for every device's tracker. */
static ca_stacks *stacks;

static ca_tracker *make_tracker(ca_device *d) {
    if (!stacks) {
        if (!(stacks = ca_stacks_new(32))) return NULL;
        ca_stacks_set_python(stacks, ca_conf.python_frames);
    }
    ca_tracker_options o;
    ca_tracker_options_default(&o);
    o.device = d->ordinal;
    o.stacks = stacks;
    ca_tracker *t = ca_tracker_new(&o);
    if (t) ca_tracker_attach(t, d->alloc);
    return t;
}

static ca_device *create(int ordinal, CUcontext ctx) {
    ca_backend *be = ca_backend_cuda_new(ordinal, ctx);
    if (!be) return NULL;
    ca_options opt;
    ca_options_default(&opt);
    opt.expandable = ca_conf.expandable;
    opt.max_reserved = ca_conf.max_reserved;
    ca_device *d = calloc(1, sizeof *d);
    if (!d || ca_allocator_new(be, &opt, &d->alloc) != CA_OK) {
        free(d);
        be->destroy(be);
        return NULL;
    }
    d->ordinal = ordinal;
    d->ctx = ctx;
    if (ca_conf.tracking && !(d->tracker = make_tracker(d))) ca_warn("no memory to track allocations on device %d", ordinal);
    const ca_driver *drv = ca_drv();
    if (drv->cuEventCreate && drv->cuEventCreate(&d->barrier, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        d->barrier = NULL;
    return d;
}

static ca_device *get(int ordinal, CUcontext ctx) {
    if (ordinal < 0 || ordinal >= MAX_DEVICES) return NULL;
    ca_device *d = __atomic_load_n(&devices[ordinal], __ATOMIC_ACQUIRE);
    if (d || !ctx) return d;
    ca_lock_acquire(&devices_lock);
    if (!(d = devices[ordinal]) && (d = create(ordinal, ctx))) {
        ca_cupti_start();
        ca_report_signal_start();
        made[nmade] = d;
        atomic_store_explicit(&nmade, nmade + 1, memory_order_release);
        __atomic_store_n(&devices[ordinal], d, __ATOMIC_RELEASE);
    }
    ca_lock_release(&devices_lock);
    return d;
}

ca_device *ca_current_device(CUresult *err) {
    const ca_driver *drv = ca_drv();
    if (!drv) {
        *err = CUDA_ERROR_NO_DEVICE;
        return NULL;
    }
    CUcontext ctx = NULL;
    CUresult r = drv->cuCtxGetCurrent(&ctx);
    if (r != CUDA_SUCCESS || !ctx) {
        *err = r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_CONTEXT;
        return NULL;
    }
    if (ctx == tl_ctx && tl_generation == generation) return tl_dev;
    CUdevice dev;
    if ((r = drv->cuCtxGetDevice(&dev)) != CUDA_SUCCESS) {
        *err = r;
        return NULL;
    }
    ca_device *d = get((int)dev, ctx);
    if (!d) {
        *err = CUDA_ERROR_OUT_OF_MEMORY; /* no allocator could be made: nothing can be allocated */
        return NULL;
    }
    tl_ctx = ctx;
    tl_dev = d;
    tl_generation = generation;
    return d;
}

ca_device *ca_device_by_ordinal(int ordinal) { return get(ordinal, NULL); }

void ca_devices_foreach(void (*fn)(ca_device *d, void *ctx), void *ctx) {
    int n = atomic_load_explicit(&nmade, memory_order_acquire);
    for (int i = 0; i < n; i++) fn(made[i], ctx);
}

/* The child of a fork starts with no allocator: its parent's device memory is
 * not its own, and CUDA in the child needs a fresh context anyway. The
 * parent's structures are left alone (another thread may have held a lock at
 * the fork), never touched again. */
static void after_fork_in_child(void) {
    for (int i = 0; i < MAX_DEVICES; i++) devices[i] = made[i] = NULL;
    nmade = 0;
    stacks = NULL;
    ca_report_after_fork();
    ca_named_frames_fork_child();
    ca_py_fork_child();
    ca_lock_init(&devices_lock);
    generation++;
}

static void fail_config(const char *msg) {
    fprintf(stderr, "cudalloc: %s\n", msg);
    exit(2);
}

__attribute__((constructor)) static void preload_init(void) {
    char err[512];
    if (ca_config_parse(getenv("CUDALLOC_CONF"), &ca_conf, err, sizeof err) != 0) fail_config(err);
    pthread_atfork(NULL, NULL, after_fork_in_child);
    atexit(ca_report_exit);
}
