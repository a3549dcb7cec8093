/* Device memory allocated past cudalloc: stream-ordered pools used directly,
 * CUDA graph memory, libraries that reach the driver by paths we do not hook.
 * When libcupti loads, its memory activity records (MEMORY2, memory pools)
 * say what was allocated; what is not ours is counted per device and shown
 * beside our own figures. Loaded at run time: the preload never needs CUPTI.
 *
 * CUPTI has one subscriber per process and one pair of activity buffer
 * callbacks (cupti_callbacks.h: cuptiSubscribe, "only a single subscriber"),
 * and a profiler (torch.profiler's Kineto, Nsight) needs them. So cudalloc is
 * a polite subscriber: it subscribes as CUPTI asks every client to, stays out
 * when another one is there, and steps aside (one line) when a profiler comes
 * later: it sees the profiler's cuptiSubscribe / cuptiActivityRegisterCallbacks
 * first (the preload's names come first), flushes its records, disables its
 * kinds, unsubscribes, and passes the call on. Without the preload (cudalloc
 * as PyTorch's pluggable allocator) it cannot see them, so it does not start.
 *
 * Started outside every lock of ours (CUPTI's initialization may call the
 * driver, and so our hooks, back); its buffer callback takes no lock of the
 * allocator (it may run in a thread that holds one: records are sorted from
 * ours when read); flushed at exit before CUPTI and the runtime tear down. */
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "preload/log.h"
#include "preload/preload.h"

#define BUFFER_BYTES (1 << 20)
#define MAX_DEVICES 64

typedef struct external {
    uint64_t addr;
    uint64_t bytes;
    uint32_t device;
    UT_hash_handle hh;
} external;

static struct {
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*enable)(CUpti_ActivityKind);
    CUptiResult (*disable)(CUpti_ActivityKind);
    CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*flush_all)(uint32_t);
} cupti;

enum { IDLE, STARTING, WATCHING, ASIDE, OFF /* not started, for good */ };
static _Atomic int state = IDLE;
static CUpti_SubscriberHandle subscription;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the records below; nothing else is taken under it */
static external *live;                   /* allocations seen, ours among them until read */
static uint64_t pool_bytes[MAX_DEVICES]; /* held by memory pools, per device */
static bool at_exit;                     /* flushed at exit: CUPTI is not called any more */

static void CUPTIAPI request(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

/* Under lock. Whether it is ours is decided when read, not here. */
static void on_memory(const CUpti_ActivityMemory4 *m) {
    if (m->memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE || m->deviceId >= MAX_DEVICES) return;
    external *e;
    HASH_FIND(hh, live, &m->address, sizeof m->address, e);
    if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
        if (e) {
            HASH_DEL(live, e);
            free(e);
        }
        return;
    }
    if (e || !(e = malloc(sizeof *e))) return;
    *e = (external){.addr = m->address, .bytes = m->bytes, .device = m->deviceId};
    HASH_ADD(hh, live, addr, sizeof e->addr, e);
}

static void CUPTIAPI complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&lock);
    while (cupti.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_MEMORY2) {
            on_memory((const CUpti_ActivityMemory4 *)rec);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMORY_POOL) {
            const CUpti_ActivityMemoryPool3 *p = (const CUpti_ActivityMemoryPool3 *)rec;
            if (p->deviceId < MAX_DEVICES)
                pool_bytes[p->deviceId] =
                    p->memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED ? 0 : p->size;
        }
    }
    pthread_mutex_unlock(&lock);
    free(buffer);
}

static void CUPTIAPI no_callbacks(void *userdata, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data) {}

/* The last records in, at exit before CUPTI's own teardown (registered after
 * CUPTI loaded, so run before its handlers), and nothing asked of it after. */
static void flush_at_exit(void) {
    if (atomic_load(&state) == WATCHING) cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&lock);
    at_exit = true;
    pthread_mutex_unlock(&lock);
}

#define LOAD(field, name) (cupti.field = (__typeof__(cupti.field))ca_real_dlsym(h, name))

/* Whether the preload's CUPTI names are the ones the process calls. */
static bool interposing(void) {
    return ca_real_dlsym(RTLD_DEFAULT, "cuptiSubscribe") == (void *)cuptiSubscribe;
}

/* CUPTI of the driver in use: on the simulated device, its stand-in beside
 * the simulated libcuda.so.1 (never a toolkit's CUPTI, which would look for
 * a GPU). */
static void *open_cupti(void) {
    if (!ca_on_simulated_device()) {
        void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
        return h ? h : dlopen("libcupti.so", RTLD_NOW | RTLD_LOCAL);
    }
    Dl_info di;
    char path[4096];
    const char *slash;
    if (!dladdr((void *)ca_drv()->cuCtxGetCurrent, &di) || !di.dli_fname || !(slash = strrchr(di.dli_fname, '/')))
        return NULL;
    snprintf(path, sizeof path, "%.*s/libcupti.so.13", (int)(slash - di.dli_fname), di.dli_fname);
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static int start(void) {
    if (!interposing()) return OFF; /* a later profiler could not be seen: stay out */
    void *h = open_cupti();
    if (!h || !LOAD(subscribe, "cuptiSubscribe") || !LOAD(unsubscribe, "cuptiUnsubscribe") ||
        !LOAD(register_callbacks, "cuptiActivityRegisterCallbacks") || !LOAD(enable, "cuptiActivityEnable") ||
        !LOAD(disable, "cuptiActivityDisable") || !LOAD(next_record, "cuptiActivityGetNextRecord") ||
        !LOAD(flush_all, "cuptiActivityFlushAll")) {
        if (!ca_on_simulated_device())
            ca_warn("CUPTI not found (libcupti.so): device memory allocated past cudalloc is not counted");
        return OFF;
    }
    CUptiResult r = cupti.subscribe(&subscription, no_callbacks, NULL);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        ca_warn("CUPTI is in use by another tool (a profiler?): cudalloc leaves it alone; device memory allocated "
                "past cudalloc is not counted");
        return ASIDE;
    }
    if (r != CUPTI_SUCCESS) {
        ca_warn("CUPTI did not start (error %d): device memory allocated past cudalloc is not counted", (int)r);
        return OFF;
    }
    if (cupti.register_callbacks(request, complete) != CUPTI_SUCCESS ||
        cupti.enable(CUPTI_ACTIVITY_KIND_MEMORY2) != CUPTI_SUCCESS) {
        cupti.unsubscribe(subscription);
        return ASIDE;
    }
    cupti.enable(CUPTI_ACTIVITY_KIND_MEMORY_POOL); /* optional: older drivers lack it */
    atexit(flush_at_exit);
    return WATCHING;
}

/* Once, by the first thread to get here; a call that re-enters while CUPTI
 * starts (its initialization calling the driver) goes on without it. */
void ca_cupti_start(void) {
    int idle = IDLE;
    if (!atomic_compare_exchange_strong(&state, &idle, STARTING)) return;
    int s = start();
    int starting = STARTING;
    atomic_compare_exchange_strong(&state, &starting, s); /* a profiler may have come meanwhile */
}

/* A profiler takes CUPTI: our records flushed, our kinds off, our
 * subscription given up, before its call goes on. */
static void step_aside(void) {
    int watching = WATCHING;
    if (!atomic_compare_exchange_strong(&state, &watching, ASIDE)) return;
    cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    cupti.disable(CUPTI_ACTIVITY_KIND_MEMORY2);
    cupti.disable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
    cupti.unsubscribe(subscription);
    ca_warn("a profiler is using CUPTI: cudalloc steps aside (device memory allocated past cudalloc is no longer "
            "counted)");
}

static void *next(const char *name) { return ca_next_symbol((const void *)step_aside, name, NULL); }

CA_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                     void *userdata) {
    step_aside();
    CUptiResult (*real)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *) =
        (CUptiResult(*)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *))next("cuptiSubscribe");
    return real ? real(subscriber, callback, userdata) : CUPTI_ERROR_NOT_INITIALIZED;
}

CA_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                        void *userdata, CUpti_SubscriberParams *params) {
    step_aside();
    CUptiResult (*real)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *, CUpti_SubscriberParams *) =
        (CUptiResult(*)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *, CUpti_SubscriberParams *))next(
            "cuptiSubscribe_v2");
    return real ? real(subscriber, callback, userdata, params) : CUPTI_ERROR_NOT_INITIALIZED;
}

CA_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                     CUpti_BuffersCallbackCompleteFunc complete) {
    step_aside();
    CUptiResult (*real)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) =
        (CUptiResult(*)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc))next(
            "cuptiActivityRegisterCallbacks");
    return real ? real(request, complete) : CUPTI_ERROR_NOT_INITIALIZED;
}

bool ca_cupti_external(int device, uint64_t *allocations, uint64_t *pools) {
    if (atomic_load(&state) != WATCHING || device < 0 || device >= MAX_DEVICES) return false;
    pthread_mutex_lock(&lock);
    bool flush = !at_exit;
    pthread_mutex_unlock(&lock);
    if (flush) cupti.flush_all(0); /* outside our lock: it calls complete() */
    /* The device's records copied under our lock, then asked of the allocator
     * outside it: complete() takes our lock under a classic pool's lock (the
     * cuMemAlloc of a new segment fills a buffer), and ca_contains takes that
     * pool's lock (issue 30: two threads stuck in a reset race). */
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&lock);
    for (external *e = live; e; e = e->hh.next) cap += e->device == (uint32_t)device;
    uint64_t(*mine)[2] = cap ? malloc(cap * sizeof *mine) : NULL;
    for (external *e = live; mine && e; e = e->hh.next)
        if (e->device == (uint32_t)device) mine[n][0] = e->addr, mine[n++][1] = e->bytes;
    *pools = pool_bytes[device];
    pthread_mutex_unlock(&lock);
    if (cap && !mine) return false; /* out of host memory: not known */
    ca_device *d = ca_device_by_ordinal(device);
    uint64_t sum = 0;
    if (d) ca_device_use(d); /* a reset holding d replaces its allocator */
    for (size_t i = 0; i < n; i++)
        if (!(d && ca_contains(d->alloc, (const void *)(uintptr_t)mine[i][0]))) sum += mine[i][1];
    if (d) ca_device_done(d);
    free(mine);
    *allocations = sum;
    return true;
}
