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
 * cuStreamDestroy returns at once and the stream's work still runs: before a
 * stream goes, cudalloc's own non-blocking stream of its context (a keeper)
 * is made to wait for its last work, and fences record on the keeper too
 * while it may still be waiting (busy until a query finds it done). So a
 * fence recorded long after a free (fence.c records them when the memory is
 * needed) still covers the work of a stream destroyed in between. No stream
 * of the program waits for it (CUDA makes none wait for a destroyed stream: a
 * stream that ends waiting for a flag that the legacy stream sets later must
 * not hold the legacy stream).
 *
 * While the process has no non-blocking stream, no context of its own and no
 * busy keeper, a fence is the legacy event alone and the blocks behind it
 * are handed out at once: whatever uses them later is ordered after it
 * (ca_fence_is_ordered). A non-blocking stream created after such a fence
 * would not be ordered, so while the last one (the backend's barrier event,
 * cudalloc's own record) has not passed, a new non-blocking stream first
 * waits for it: for the work before the last plain free, which cudaFree
 * itself waits for, never for the legacy stream's later work.
 * The order of the atomic steps makes this hold without a lock: a fence
 * records its event, then reads the count; a stream is counted, then reads
 * whether a fence went first. The lock is held while a fence with events on
 * non-blocking streams is recorded and while streams come and go, so such a
 * fence sees each stream either alive or waited for by its keeper. */
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
/* Handles destroyed through our hooks and not made again: never given to the
 * driver (a destroyed handle is undefined there: it may name another stream
 * made past our hooks, or crash). At most MAX_GONE are kept. */
typedef struct gone {
    CUstream handle;
    UT_hash_handle hh;
} gone;
#define MAX_GONE 65536
static gone *gone_streams;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* A context's keeper: cudalloc's stream that waits for the last work of its
 * destroyed streams; busy until a query finds it done. */
typedef struct keeper {
    CUcontext ctx;
    CUstream stream;
    bool busy;
    struct keeper *next;
} keeper;
static keeper *keepers;
static _Atomic size_t busy_keepers;
static _Atomic size_t nonblocking; /* non-blocking streams in the registry, all contexts */
static _Atomic bool ordered_fences; /* a fence was the legacy event alone */

void ca_streams_lock(void) { pthread_mutex_lock(&lock); }
void ca_streams_unlock(void) { pthread_mutex_unlock(&lock); }

static keeper *keeper_of(CUcontext ctx) {
    keeper *k = keepers;
    while (k && k->ctx != ctx) k = k->next;
    return k;
}

/* Busy no more once its work is done (a query, while no capture forbids it). */
static bool still_busy(keeper *k) {
    if (!k || !k->busy) return false;
    if (ca_drv()->cuStreamQuery && ca_capture_guard_enter()) {
        CUresult r = ca_drv()->cuStreamQuery(k->stream);
        ca_capture_guard_leave();
        if (r == CUDA_SUCCESS) {
            k->busy = false;
            atomic_fetch_sub(&busy_keepers, 1);
        }
    }
    return k->busy;
}

size_t ca_streams_nonblocking(CUcontext ctx, CUstream *out, size_t cap) {
    size_t n = 0;
    for (entry *e = streams; e; e = e->hh.next)
        if (e->ctx == ctx && (e->flags & CU_STREAM_NON_BLOCKING)) {
            if (!out) return 1;
            if (n < cap) out[n] = e->handle;
            n++;
        }
    keeper *k = keeper_of(ctx);
    if (still_busy(k)) {
        if (n < cap) out[n] = k->stream;
        n++;
    }
    return n;
}

static void drop(entry *e) {
    HASH_DEL(streams, e);
    if (e->flags & CU_STREAM_NON_BLOCKING) atomic_fetch_sub(&nonblocking, 1);
    free(e);
}

static void forget_gone(CUstream s) {
    gone *g;
    HASH_FIND_PTR(gone_streams, &s, g);
    if (g) {
        HASH_DEL(gone_streams, g);
        free(g);
    }
}

static void remember_gone(CUstream s) {
    gone *g;
    HASH_FIND_PTR(gone_streams, &s, g);
    if (g || HASH_COUNT(gone_streams) >= MAX_GONE || !(g = calloc(1, sizeof *g))) return;
    int hash_oom = 0;
    g->handle = s;
    HASH_ADD_PTR(gone_streams, handle, g);
    if (hash_oom) free(g);
}

bool ca_streams_gone(CUstream s) {
    gone *g;
    ca_streams_lock();
    HASH_FIND_PTR(gone_streams, &s, g);
    ca_streams_unlock();
    return g != NULL;
}

bool ca_streams_known(CUstream s) {
    entry *e;
    ca_streams_lock();
    HASH_FIND_PTR(streams, &s, e);
    ca_streams_unlock();
    return e != NULL;
}

bool ca_fence_is_ordered(void) {
    atomic_store(&ordered_fences, true);
    return atomic_load(&nonblocking) == 0 && atomic_load(&busy_keepers) == 0 && ca_contexts_none_made();
}

void ca_streams_fenced_ordered(void) { atomic_store(&ordered_fences, true); }

bool ca_streams_ordered_fences_ok(void) {
    return atomic_load_explicit(&nonblocking, memory_order_relaxed) == 0 &&
           atomic_load_explicit(&busy_keepers, memory_order_relaxed) == 0 && ca_contexts_none_made();
}

/* A context made after ordered fences is not behind them: the host waits for
 * the last one (the point of the last plain free, which cudaFree itself would
 * have waited for) before the program can use the new context. */
void ca_streams_context_made(int device) {
    if (!atomic_load(&ordered_fences)) return;
    ca_device *d = ca_device_by_ordinal(device);
    if (!d) return;
    ca_device_use(d);
    bool waited = ca_backend_cuda_wait_ordered(d->backend);
    ca_device_done(d);
    if (!waited) {
        ca_warn("could not wait for the last plain free before a new context on device %d: plain frees now wait for "
                "the device", device);
        ca_conf.sync_free = true;
    }
}

/* A new non-blocking stream starts behind the plain frees that an ordered
 * fence handed out: behind the last ordered fence's event, if it has not
 * passed. */
static void order_after_fences(CUstream s, CUcontext ctx) {
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
    bool order = false;
    ca_streams_lock();
    forget_gone(s);
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
            order = atomic_load(&ordered_fences);
        } else if (was_nb && !nb) {
            atomic_fetch_sub(&nonblocking, 1);
        }
    } else if (flags & CU_STREAM_NON_BLOCKING) {
        /* unknown to fences: never hand a plain free's block out before the device is done */
        ca_warn("no memory to track stream %p: plain frees now wait for the device", (void *)s);
        ca_conf.sync_free = true;
    }
    ca_streams_unlock();
    /* outside the lock: a reset holds the device, then takes the lock */
    if (order) order_after_fences(s, ctx);
}

/* The context's keeper (ctx current), made on first use. */
static keeper *keeper_for(CUcontext ctx) {
    keeper *k = keeper_of(ctx);
    if (k) return k;
    if (!(k = calloc(1, sizeof *k))) return NULL;
    if (ca_drv()->cuStreamCreate(&k->stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        free(k);
        return NULL;
    }
    k->ctx = ctx;
    k->next = keepers;
    keepers = k;
    return k;
}

/* The keeper of s's context (current) waits for the work queued on s, which
 * still runs after the destroy; no stream of the program does. A stream that
 * is capturing has no work a fence could see. Under the lock. */
static void keep_last_work(CUstream s, CUcontext ctx) {
    const ca_driver *d = ca_drv();
    if (ca_capture_any() && ca_stream_capturing(s)) return;
    keeper *k = keeper_for(ctx);
    CUevent ev = NULL;
    bool kept = k && d->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS &&
                d->cuEventRecord(ev, s) == CUDA_SUCCESS && d->cuStreamWaitEvent(k->stream, ev, 0) == CUDA_SUCCESS;
    if (ev) d->cuEventDestroy_v2(ev);
    if (kept && !k->busy) {
        k->busy = true;
        atomic_fetch_add(&busy_keepers, 1);
    } else if (!kept) {
        ca_warn("could not keep the last work of stream %p, destroyed: plain frees now wait for the device", (void *)s);
        ca_conf.sync_free = true;
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
        if (!push || pushed) keep_last_work(s, e->ctx);
        if (pushed) d->cuCtxPopCurrent_v2(&popped);
        drop(e);
    }
    remember_gone(s);
    ca_streams_unlock();
    ca_capture_stream_destroyed(s);
    /* after its keeper took its work: the pools' fences cover it */
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
    for (keeper **k = &keepers; *k;) { /* its stream goes with the context */
        keeper *gone = *k;
        if (gone->ctx == ctx) {
            *k = gone->next;
            if (gone->busy) atomic_fetch_sub(&busy_keepers, 1);
            free(gone);
        } else {
            k = &gone->next;
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
    gone_streams = NULL;
    keepers = NULL;
    atomic_store(&busy_keepers, 0);
    atomic_store(&nonblocking, 0);
}
