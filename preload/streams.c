/* The streams a device fence must cover (cuda_backend.c), and the pool keys of
 * per-thread default streams.
 *
 * The legacy default stream orders itself against every blocking stream and
 * every per-thread default stream of its context: an operation on it starts
 * after their earlier work, and their later work starts after it. So one event
 * on it covers the work of all of those, including other threads' per-thread
 * streams, which cannot be named from here. Non-blocking streams
 * (cudaStreamNonBlocking, CU_STREAM_NON_BLOCKING) escape that order and need
 * an event each: this registry knows them, per context, as they are created
 * and destroyed through the runtime or the driver (hooks_runtime.c,
 * hooks_driver.c; the driver's entries also through cuGetProcAddress and
 * dlsym).
 *
 * While the process has no non-blocking stream, a fence is the legacy event
 * alone and the blocks behind it are handed out at once: whatever uses them
 * later is ordered after it (ca_fence_is_ordered). Two rules keep that true:
 *   - A non-blocking stream created after such a fence would not be ordered,
 *     so once one was recorded, each new non-blocking stream first waits for
 *     an event on the legacy stream.
 *   - cuStreamDestroy returns at once and the stream's work still runs. Before
 *     a stream goes, the legacy stream is made to wait for its last work, so
 *     later fences, and work issued later, still come after it.
 * The order of the atomic steps makes this hold without a lock: a fence
 * records its event, then reads the count; a stream is counted, then reads
 * whether a fence went first. The lock is held while a fence with events on
 * non-blocking streams is recorded and while streams come and go, so such a
 * fence sees each stream either alive or folded into the legacy stream. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(e) (hash_oom = 1)
#include <uthash.h>

#include "preload/log.h"
#include "preload/preload.h"

typedef struct entry {
    CUstream handle;
    CUcontext ctx;
    unsigned flags;
    UT_hash_handle hh;
} entry;

static entry *streams;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Events on streams destroyed during a capture, for the legacy stream to wait
 * on once no capture is under way (it may be unusable meanwhile). */
typedef struct deferred {
    CUevent event;
    CUcontext ctx;
    struct deferred *next;
} deferred;
static deferred *after_captures;
static _Atomic size_t nonblocking; /* non-blocking streams in the registry, all contexts */
static _Atomic bool ordered_fences; /* a fence was the legacy event alone */

void ca_streams_lock(void) { pthread_mutex_lock(&lock); }
void ca_streams_unlock(void) { pthread_mutex_unlock(&lock); }

size_t ca_streams_nonblocking(CUcontext ctx, CUstream *out, size_t cap) {
    size_t n = 0;
    for (entry *e = streams; e; e = e->hh.next)
        if (e->ctx == ctx && (e->flags & CU_STREAM_NON_BLOCKING)) {
            if (!out) return 1;
            if (n < cap) out[n] = e->handle;
            n++;
        }
    return n;
}

static void drop(entry *e) {
    HASH_DEL(streams, e);
    if (e->flags & CU_STREAM_NON_BLOCKING) atomic_fetch_sub(&nonblocking, 1);
    free(e);
}

bool ca_streams_known(CUstream s) {
    entry *e;
    ca_streams_lock();
    HASH_FIND_PTR(streams, &s, e);
    ca_streams_unlock();
    return e != NULL;
}

bool ca_streams_none_nonblocking(void) { return atomic_load_explicit(&nonblocking, memory_order_relaxed) == 0; }

bool ca_fence_is_ordered(void) {
    atomic_store(&ordered_fences, true);
    return atomic_load(&nonblocking) == 0;
}

void ca_streams_fenced_ordered(void) { atomic_store(&ordered_fences, true); }

/* `waiter` waits for the work queued so far on `s` (both of the current context). */
static void wait_for(CUstream waiter, CUstream s) {
    const ca_driver *d = ca_drv();
    CUevent ev;
    if (d->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        d->cuStreamSynchronize(s); /* no event: wait here instead */
        return;
    }
    if (d->cuEventRecord(ev, s) == CUDA_SUCCESS) d->cuStreamWaitEvent(waiter, ev, 0);
    else d->cuStreamSynchronize(s);
    d->cuEventDestroy_v2(ev);
}

/* A new non-blocking stream starts behind the plain frees that an ordered
 * fence handed out: behind the legacy stream, or, while a capture may make
 * that unusable, behind the last ordered fence's event. */
static void order_after_fences(CUstream s, CUcontext ctx) {
    if (!ca_capture_any()) {
        wait_for(s, CU_STREAM_LEGACY);
        return;
    }
    ca_device *d = ca_device_by_ctx(ctx);
    if (!d) return;
    ca_device_use(d);
    ca_backend_cuda_order_after_fences(d->backend, s);
    ca_device_done(d);
}

void ca_stream_created(CUstream s, unsigned flags) {
    const ca_driver *d = ca_drv();
    CUcontext ctx = NULL;
    if (!d || !s || d->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) return;
    ca_streams_lock();
    entry *e;
    HASH_FIND_PTR(streams, &s, e);
    if (!e && (e = calloc(1, sizeof *e))) {
        int hash_oom = 0;
        e->handle = s;
        HASH_ADD_PTR(streams, handle, e);
        if (hash_oom) {
            free(e);
            e = NULL;
        }
    }
    if (e) {
        bool was_nb = e->flags & CU_STREAM_NON_BLOCKING, nb = flags & CU_STREAM_NON_BLOCKING;
        e->ctx = ctx;
        e->flags = flags;
        if (nb && !was_nb) {
            atomic_fetch_add(&nonblocking, 1);
            if (atomic_load(&ordered_fences)) order_after_fences(s, ctx);
        } else if (was_nb && !nb) {
            atomic_fetch_sub(&nonblocking, 1);
        }
    } else if (flags & CU_STREAM_NON_BLOCKING) {
        /* unknown to fences: never hand a plain free's block out before the device is done */
        ca_warn("no memory to track stream %p: plain frees now wait for the device", (void *)s);
        ca_conf.sync_free = true;
    }
    ca_streams_unlock();
}

/* The legacy stream waits for a stream that goes (its work still runs), so
 * that later fences cover that work. While a capture is under way the wait
 * is kept for its end: no fence is recorded meanwhile, and the legacy stream
 * may be unusable. A stream that is itself capturing has no work to wait for
 * that a fence could see. */
static void legacy_waits_for(CUstream s) {
    const ca_driver *d = ca_drv();
    if (!ca_capture_any()) {
        wait_for(CU_STREAM_LEGACY, s);
        return;
    }
    if (ca_stream_capturing(s)) return;
    deferred *w = calloc(1, sizeof *w);
    CUcontext ctx = NULL;
    d->cuCtxGetCurrent(&ctx);
    if (w && d->cuEventCreate(&w->event, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS &&
        d->cuEventRecord(w->event, s) == CUDA_SUCCESS) {
        w->ctx = ctx;
        w->next = after_captures;
        after_captures = w;
        return;
    }
    if (w && w->event) d->cuEventDestroy_v2(w->event);
    free(w);
    ca_warn("could not record the last work of stream %p, destroyed during a stream capture: plain frees now wait "
            "for the device", (void *)s);
    ca_conf.sync_free = true;
}

void ca_streams_captures_over(void) {
    const ca_driver *d = ca_drv();
    ca_streams_lock();
    deferred *w = after_captures;
    after_captures = NULL;
    ca_streams_unlock();
    while (w) {
        deferred *next = w->next;
        CUcontext popped;
        bool pushed = d->cuCtxPushCurrent_v2 && d->cuCtxPushCurrent_v2(w->ctx) == CUDA_SUCCESS;
        if (pushed && d->cuStreamWaitEvent(CU_STREAM_LEGACY, w->event, 0) != CUDA_SUCCESS)
            d->cuEventSynchronize(w->event);
        if (pushed) d->cuCtxPopCurrent_v2(&popped);
        d->cuEventDestroy_v2(w->event);
        free(w);
        w = next;
    }
}

static void retire_on(ca_device *d, void *s) { ca_retire_stream(d->alloc, ca_stream_key((CUstream)s)); }

void ca_stream_destroying(CUstream s) {
    const ca_driver *d = ca_drv();
    if (!d || !s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return;
    ca_streams_lock();
    entry *e;
    HASH_FIND_PTR(streams, &s, e);
    if (e) {
        CUcontext cur = NULL, popped;
        d->cuCtxGetCurrent(&cur);
        bool push = cur != e->ctx && d->cuCtxPushCurrent_v2;
        bool pushed = push && d->cuCtxPushCurrent_v2(e->ctx) == CUDA_SUCCESS;
        if (!push || pushed) legacy_waits_for(s);
        if (pushed) d->cuCtxPopCurrent_v2(&popped);
        drop(e);
    }
    ca_streams_unlock();
    ca_capture_stream_destroyed(s);
    /* after the legacy stream took its work: the pools' fences cover it */
    ca_devices_foreach(retire_on, s);
}

CUcontext ca_stream_ctx(CUstream s) {
    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return NULL;
    ca_streams_lock();
    entry *e;
    HASH_FIND_PTR(streams, &s, e);
    CUcontext ctx = e ? e->ctx : NULL;
    ca_streams_unlock();
    return ctx;
}

void ca_streams_forget_ctx(CUcontext ctx) {
    ca_streams_lock();
    entry *e, *tmp;
    HASH_ITER(hh, streams, e, tmp) {
        if (e->ctx == ctx) drop(e);
    }
    for (deferred **w = &after_captures; *w;) { /* their events go with the context */
        deferred *gone = *w;
        if (gone->ctx == ctx) {
            *w = gone->next;
            free(gone);
        } else {
            w = &gone->next;
        }
    }
    ca_streams_unlock();
}

/* ---- per-thread default streams ---- */

__thread __attribute__((tls_model("initial-exec"))) uint64_t ca_tl_ptds_anchor;
static __thread __attribute__((tls_model("initial-exec"))) uint64_t tl_ptds_devices;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

/* A new thread may get a dead thread's key (its TLS address): the dead
 * thread's pools are retired, so that the new thread gets pools of its own,
 * and theirs end once the device is past the dead thread's work (the legacy
 * stream's events order themselves after every per-thread stream's). */
static void thread_exit(void *unused) {
    for (int i = 0; i < 64; i++) {
        if (!(tl_ptds_devices >> i & 1)) continue;
        ca_device *dev = ca_device_by_ordinal(i);
        if (!dev) continue;
        ca_device_use(dev);
        ca_retire_stream(dev->alloc, ca_ptds_key());
        ca_device_done(dev);
    }
    tl_ptds_devices = 0;
}

static void make_exit_key(void) { pthread_key_create(&exit_key, thread_exit); }

void ca_ptds_pool_used(const ca_device *d) {
    uint64_t bit = (uint64_t)1 << (d->ordinal & 63);
    if (tl_ptds_devices & bit) return;
    tl_ptds_devices |= bit;
    pthread_once(&exit_key_once, make_exit_key);
    pthread_setspecific(exit_key, (void *)1);
}

/* In a fork child: the parent's streams are not the child's. */
void ca_streams_after_fork(void) {
    pthread_mutex_init(&lock, NULL);
    streams = NULL;
    after_captures = NULL;
    atomic_store(&nonblocking, 0);
}
