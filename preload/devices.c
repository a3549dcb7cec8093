/* One allocator per device, made the first time a thread with that device's
 * context allocates. The device is the one the driver reports for the
 * calling thread's current context. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "allocator/lock.h"
#include "preload/log.h"
#include "preload/preload.h"
#include "reports/capture/named_frames.h"
#include "reports/capture/stacks.h"
#include "reports/capture/pyframes.h"

#define MAX_DEVICES CA_MAX_DEVICES

static ca_device *devices[MAX_DEVICES]; /* by ordinal */
static ca_device *made[MAX_DEVICES];    /* in the order they were made, for walks */
static _Atomic int nmade;
static ca_lock devices_lock = CA_LOCK_INIT;
/* Bumped in a forked child (and when a context ends), so thread caches made
 * before go stale. */
unsigned ca_devices_generation = 1;

__thread __attribute__((tls_model("initial-exec"))) ca_thread_device ca_tl_device;

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

/* A fresh allocator over a fresh backend for the device's context; the
 * allocator owns the backend, which *backend names for the device. */
static ca_allocator *new_allocator(int ordinal, CUcontext ctx, ca_backend **backend) {
    static uint64_t told; /* devices already said to have no VMM */
    bool vmm = true;
    ca_backend *be = ca_backend_cuda_new(ordinal, ctx, &vmm);
    if (!be) return NULL;
    ca_options opt;
    ca_options_default(&opt);
    opt.expandable = ca_conf.expandable && vmm;
    if (ca_conf.expandable && !vmm && !(__atomic_fetch_or(&told, (uint64_t)1 << (ordinal & 63), __ATOMIC_RELAXED) >> (ordinal & 63) & 1))
        ca_warn("device %d has no virtual memory management (as some vGPUs): classic segments there, as with "
                "expandable_segments:false",
                ordinal);
    opt.max_reserved = ca_conf.max_reserved;
    opt.release_after = ca_conf.release_after;
    opt.share_bytes = ca_conf.share_bytes;
    ca_allocator *a = NULL;
    if (ca_allocator_new(be, &opt, &a) != CA_OK) {
        be->destroy(be);
        return NULL;
    }
    *backend = be;
    return a;
}

static ca_device *create(int ordinal, CUcontext ctx) {
    ca_device *d = calloc(1, sizeof *d);
    if (!d || !(d->alloc = new_allocator(ordinal, ctx, &d->backend))) {
        free(d);
        return NULL;
    }
    d->ordinal = ordinal;
    d->bit = (uint64_t)1 << ordinal;
    d->ctx = ctx;
    pthread_mutexattr_t recursive;
    pthread_mutexattr_init(&recursive);
    pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&d->hold_lock, &recursive);
    pthread_mutexattr_destroy(&recursive);
    if (ca_conf.tracking && !(d->tracker = make_tracker(d))) ca_warn("no memory to track allocations on device %d", ordinal);
    return d;
}

static ca_device *get(int ordinal, CUcontext ctx) {
    if (ordinal < 0 || ordinal >= MAX_DEVICES) return NULL;
    ca_device *d = __atomic_load_n(&devices[ordinal], __ATOMIC_ACQUIRE);
    if (d || !ctx) return d;
    bool made_one = false;
    ca_lock_acquire(&devices_lock);
    if (!(d = devices[ordinal]) && (d = create(ordinal, ctx))) {
        made[nmade] = d;
        atomic_store_explicit(&nmade, nmade + 1, memory_order_release);
        __atomic_store_n(&devices[ordinal], d, __ATOMIC_RELEASE);
        made_one = true;
        /* after the device is there to report: a SIGUSR1 that came before is answered now */
        ca_report_signal_start();
    }
    ca_lock_release(&devices_lock);
    if (made_one) {
        ca_cupti_start(); /* outside the lock: CUPTI's start may call our hooks back */
        ca_live_device_made();
    }
    return d;
}

static void rebind(ca_device *d, CUcontext ctx);

/* The context's device, looked up and remembered by the thread. */
ca_device *ca_current_device_bind(const ca_driver *drv, CUresult r, CUcontext ctx, CUresult *err) {
    if (!drv) {
        *err = CUDA_ERROR_NO_DEVICE;
        return NULL;
    }
    if (r != CUDA_SUCCESS || !ctx) {
        *err = r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_CONTEXT;
        return NULL;
    }
    CUdevice dev;
    if ((r = drv->cuCtxGetDevice(&dev)) != CUDA_SUCCESS) {
        *err = r;
        return NULL;
    }
    unsigned gen = __atomic_load_n(&ca_devices_generation, __ATOMIC_ACQUIRE);
    ca_device *d = get((int)dev, ctx);
    if (d && __atomic_load_n(&d->unbound, __ATOMIC_ACQUIRE)) rebind(d, ctx);
    if (!d) {
        *err = CUDA_ERROR_OUT_OF_MEMORY; /* no allocator could be made: nothing can be allocated */
        return NULL;
    }
    ca_tl_device = (ca_thread_device){.ctx = ctx, .dev = d, .generation = gen};
    return d;
}

ca_device *ca_device_by_ordinal(int ordinal) { return get(ordinal, NULL); }

ca_device *ca_device_by_ctx(CUcontext ctx) {
    int n = atomic_load_explicit(&nmade, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (__atomic_load_n(&made[i]->ctx, __ATOMIC_ACQUIRE) == ctx) return made[i]; /* a reset may be replacing it */
    return NULL;
}

ca_device *ca_owner_used(const void *ptr) {
    int n = atomic_load_explicit(&nmade, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        ca_device_use(made[i]);
        if (ca_contains(made[i]->alloc, ptr)) return made[i];
        ca_device_done(made[i]);
    }
    return NULL;
}

ca_device *ca_owner(const void *ptr) {
    ca_device *d = ca_owner_used(ptr);
    if (d) ca_device_done(d);
    return d;
}

void ca_device_quiesce(ca_device *d) {
    ca_wait_pending(d->alloc);
    ca_backend_cuda_drop_events(d->backend);
    ca_streams_forget_ctx(d->ctx);
}

void ca_devices_foreach(void (*fn)(ca_device *d, void *ctx), void *ctx) {
    int n = atomic_load_explicit(&nmade, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        ca_device_use(made[i]);
        fn(made[i], ctx);
        ca_device_done(made[i]);
    }
}

ca_device *const *ca_devices_made(int *n) {
    *n = atomic_load_explicit(&nmade, memory_order_acquire);
    return made;
}

/* ---- reset of the device's primary context ---- */

typedef struct live_blocks {
    uintptr_t *addr;
    ca_stream *stream;
    size_t n, cap;
} live_blocks;

static void collect_live(void *ctx, const ca_segment_view *seg, const ca_block_view *b) {
    live_blocks *l = ctx;
    if (b->state != CA_BLOCK_ALLOCATED) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        uintptr_t *a = realloc(l->addr, cap * sizeof *a);
        if (a) l->addr = a;
        ca_stream *s = a ? realloc(l->stream, cap * sizeof *s) : NULL;
        if (s) l->stream = s;
        if (!a || !s) return; /* out of host memory: that block stays (the old allocator still goes) */
        l->cap = cap;
    }
    l->addr[l->n] = b->addr;
    l->stream[l->n++] = seg->stream;
}

/* Every allocation of d freed (the tracker and the statistics see the frees
 * it is), and its memory given back while the context can still take it (or,
 * when it went already, what did not go with it). */
static void empty_device(ca_device *d, bool alive) {
    const ca_driver *drv = ca_drv();
    CUcontext popped;
    if (alive && drv->cuCtxPushCurrent_v2(d->ctx) == CUDA_SUCCESS) { /* work queued on it ends first */
        drv->cuCtxSynchronize();
        drv->cuCtxPopCurrent_v2(&popped);
    }
    ca_device_quiesce(d); /* plain frees come back; our events go before the context does */
    ca_ipc_device_reset(d->ordinal);
    /* each live block freed in its own stream's order */
    live_blocks l = {0};
    ca_visit(d->alloc, NULL, collect_live, &l);
    for (size_t i = 0; i < l.n; i++) /* a destroyed stream's blocks as plain frees: the device is idle */
        if (ca_free(d->alloc, (void *)l.addr[i], l.stream[i]) == CA_ERR_STREAM) ca_free_device(d->alloc, (void *)l.addr[i], 1);
    free(l.addr);
    free(l.stream);
    ca_release(d->alloc);
}

/* A fresh allocator for ctx takes over from d's (empty) one. */
static void replace_allocator(ca_device *d, CUcontext ctx) {
    ca_backend *be;
    ca_allocator *fresh = new_allocator(d->ordinal, ctx, &be);
    if (!fresh) return;
    ca_allocator *old = d->alloc;
    ca_set_observer(old, NULL, NULL);
    if (d->tracker) ca_tracker_attach(d->tracker, fresh);
    __atomic_store_n(&d->backend, be, __ATOMIC_RELEASE);
    __atomic_store_n(&d->alloc, fresh, __ATOMIC_RELEASE);
    __atomic_store_n(&d->ctx, ctx, __ATOMIC_RELEASE);
    ca_allocator_destroy(old); /* and the address ranges */
}

/* Held until the driver's reset is done: another thread (the SIGUSR1
 * reporter, or a program's thread against CUDA's rule) may be in the
 * allocator this destroys, and memory a fresh one got before the driver's
 * reset would go with it. */
ca_device *ca_device_reset_begin(int ordinal) {
    ca_device *d = get(ordinal, NULL);
    if (!d || !ca_drv()) return NULL;
    ca_device_hold(d);
    empty_device(d, true);
    replace_allocator(d, d->ctx);
    return d;
}

void ca_device_reset_end(ca_device *d) {
    if (d) ca_device_unhold(d);
}

/* The allocator's context goes (cuCtxDestroy, the primary context's last
 * release): what was allocated in it goes with it, as cuMemAlloc memory does,
 * and the device's next allocation binds a fresh allocator to the context
 * current then. */
static void ctx_ends(CUcontext ctx, bool alive) {
    ca_device *d = ca_device_by_ctx(ctx);
    if (!d || __atomic_load_n(&d->unbound, __ATOMIC_ACQUIRE)) {
        ca_streams_forget_ctx(ctx);
        return;
    }
    ca_device_hold(d);
    if (!alive) ca_backend_cuda_context_went(d->backend);
    empty_device(d, alive);
    __atomic_store_n(&d->unbound, true, __ATOMIC_RELEASE);
    __atomic_fetch_add(&ca_devices_generation, 1, __ATOMIC_RELEASE); /* threads' cached contexts are stale */
    ca_device_unhold(d);
}

void ca_device_ctx_gone(CUcontext ctx) { ctx_ends(ctx, true); }

void ca_device_ctx_went(CUcontext ctx) { ctx_ends(ctx, false); }

/* Under no lock: d's allocator bound to ctx, if its context went. */
static void rebind(ca_device *d, CUcontext ctx) {
    ca_device_hold(d);
    if (__atomic_load_n(&d->unbound, __ATOMIC_ACQUIRE)) {
        replace_allocator(d, ctx);
        __atomic_store_n(&d->unbound, false, __ATOMIC_RELEASE);
    }
    ca_device_unhold(d);
}

/* The child of a fork starts with no allocator: its parent's device memory is
 * not its own, and CUDA in the child needs a fresh context anyway. The
 * parent's structures are left alone (another thread may have held a lock at
 * the fork), never touched again. */
static ca_device *parents_made[MAX_DEVICES]; /* kept only so the parent's copy stays reachable */
static ca_stacks *parents_stacks;              /* (not leaked: deliberately let be) */

static void after_fork_in_child(void) {
    for (int i = 0; i < MAX_DEVICES; i++) {
        parents_made[i] = made[i];
        devices[i] = made[i] = NULL;
    }
    nmade = 0;
    parents_stacks = stacks;
    stacks = NULL;
    ca_stacks_thread_caches_fork_child();
    ca_report_after_fork();
    ca_live_after_fork();
    ca_streams_after_fork();
    ca_peers_after_fork();
    ca_ipc_after_fork();
    ca_torch_after_fork();
    ca_contexts_after_fork();
    ca_capture_after_fork();
    ca_users_after_fork();
    ca_named_frames_fork_child();
    ca_py_fork_child();
    ca_lock_init(&devices_lock);
    __atomic_fetch_add(&ca_devices_generation, 1, __ATOMIC_RELEASE);
    ca_tl_device = (ca_thread_device){0}; /* the free's fast path tries it: not the parent's device */
}

static void fail_config(const char *msg) {
    ca_warn("%s", msg);
    exit(2);
}

__attribute__((constructor)) static void preload_init(void) {
    char err[512];
    if (ca_config_parse(getenv("CUDALLOC_CONF"), &ca_conf, err, sizeof err) != 0) fail_config(err);
    ca_users_init();
    pthread_atfork(NULL, NULL, after_fork_in_child);
    ca_report_signal_init();
    atexit(ca_report_exit);
    if (ca_conf.tracking) ca_stacks_init_unwinder();
}
