/* A CUPTI stand-in (build/sim/libcupti.so.13) for the simulated device: the
 * part of the activity and callback APIs that cudalloc and profilers use,
 * with CUPTI's rules (simgpu/README.md names where each is documented):
 *   - one subscriber at a time: cuptiSubscribe(_v2) answers
 *     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED while another holds it;
 *   - one pair of buffer callbacks per process (cuptiActivityRegisterCallbacks):
 *     the latest registration gets every buffer, whoever enabled its records;
 *   - records of the enabled kinds (MEMORY2, MEMCPY, MEMSET; others are
 *     accepted and have none here: no kernel runs) are delivered in buffers
 *     from the client's request callback, when a buffer fills (from the thread
 *     whose call filled it) or on cuptiActivityFlushAll;
 *   - the first enable initializes CUPTI, which calls the driver back (here
 *     cuMemGetInfo, through the process's name for it, where an interposer
 *     sees it).
 * The driver reports what it does through simgpu_activity_sink. */
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "simgpu/simgpu.h"
#include "util/export.h"

#define PER_BUFFER 16 /* records a buffer holds before it is delivered */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_SubscriberHandle subscriber; /* the one */
static struct CUpti_Subscriber_st {
    int unused;
} the_subscriber;
static CUpti_BuffersCallbackRequestFunc on_request;
static CUpti_BuffersCallbackCompleteFunc on_complete;
static int enabled[CUPTI_ACTIVITY_KIND_COUNT];
static int initialized;

/* Records waiting for a buffer, in the layout they are delivered in. */
typedef union record {
    CUpti_Activity base;
    CUpti_ActivityMemory4 memory;
    CUpti_ActivityMemcpy6 memcpy;
    CUpti_ActivityMemset4 memset;
} record;
static record pending[PER_BUFFER];
static int npending;

static size_t record_size(CUpti_ActivityKind kind) {
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_MEMORY2: return sizeof(CUpti_ActivityMemory4);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    default: return 0;
    }
}

/* Hands the pending records to the client's buffer, outside the lock (its
 * callbacks may call CUDA). Records nobody asked a buffer for are dropped,
 * as CUPTI drops them. */
static void deliver(void) {
    record out[PER_BUFFER];
    pthread_mutex_lock(&lock);
    int n = npending;
    memcpy(out, pending, (size_t)n * sizeof out[0]);
    npending = 0;
    CUpti_BuffersCallbackRequestFunc req = on_request;
    CUpti_BuffersCallbackCompleteFunc done = on_complete;
    pthread_mutex_unlock(&lock);
    if (!n || !req || !done) return;
    uint8_t *buf = NULL;
    size_t size = 0, max_records = 0, used = 0;
    req(&buf, &size, &max_records);
    for (int i = 0; buf && i < n; i++) {
        size_t rs = record_size(out[i].base.kind);
        if (used + rs > size) break;
        memcpy(buf + used, &out[i], rs);
        used += rs;
    }
    if (buf) done(NULL, 0, buf, size, used);
}

static void sink(const simgpu_activity *a) {
    record r;
    memset(&r, 0, sizeof r);
    CUpti_ActivityKind kind;
    if (a->kind == SIMGPU_ACT_ALLOC || a->kind == SIMGPU_ACT_RELEASE) {
        kind = r.memory.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
        r.memory.memoryOperationType = a->kind == SIMGPU_ACT_ALLOC ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                                                   : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
        r.memory.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        r.memory.address = a->address;
        r.memory.bytes = a->bytes;
        r.memory.deviceId = (uint32_t)a->device;
        r.memory.memoryPoolConfig.memoryPoolType =
            a->pool ? CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL : CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
    } else if (a->kind == SIMGPU_ACT_MEMCPY) {
        kind = r.memcpy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
        r.memcpy.bytes = a->bytes;
        r.memcpy.deviceId = (uint32_t)a->device;
    } else {
        kind = r.memset.kind = CUPTI_ACTIVITY_KIND_MEMSET;
        r.memset.bytes = a->bytes;
        r.memset.deviceId = (uint32_t)a->device;
    }
    pthread_mutex_lock(&lock);
    int wanted = enabled[kind] && npending < PER_BUFFER;
    if (wanted) pending[npending++] = r;
    int full = npending == PER_BUFFER;
    pthread_mutex_unlock(&lock);
    if (full) deliver(); /* in this thread, as CUPTI may */
}

CA_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc callback, void *userdata) {
    if (!sub) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    CUptiResult r = subscriber ? CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED : CUPTI_SUCCESS;
    if (r == CUPTI_SUCCESS) *sub = subscriber = &the_subscriber;
    pthread_mutex_unlock(&lock);
    return r;
}

CA_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc callback, void *userdata,
                                        CUpti_SubscriberParams *params) {
    CUptiResult r = cuptiSubscribe(sub, callback, userdata);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && params && params->oldSubscriberName &&
        params->oldSubscriberSize)
        snprintf(params->oldSubscriberName, params->oldSubscriberSize, "CUPTI for another subscriber");
    return r;
}

CA_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub) {
    pthread_mutex_lock(&lock);
    CUptiResult r = sub && sub == subscriber ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
    if (r == CUPTI_SUCCESS) subscriber = NULL;
    pthread_mutex_unlock(&lock);
    return r;
}

CA_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                     CUpti_BuffersCallbackCompleteFunc complete) {
    if (!request || !complete) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    on_request = request;
    on_complete = complete;
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

/* CUPTI's initialization calls the driver back: here it asks the device's
 * memory figures, by the process's name for the call (an interposer's, if
 * there is one). */
static void initialize(void) {
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *f = dlsym(RTLD_DEFAULT, "cuMemGetInfo_v2");
    if (!f && driver) f = dlsym(driver, "cuMemGetInfo_v2");
    CUresult (*mem_info)(size_t *, size_t *) = (CUresult(*)(size_t *, size_t *))f;
    void (*set_sink)(void (*)(const simgpu_activity *)) =
        driver ? (void (*)(void (*)(const simgpu_activity *)))dlsym(driver, "simgpu_activity_sink") : NULL;
    size_t free_bytes, total;
    if (mem_info) mem_info(&free_bytes, &total);
    if (set_sink) set_sink(sink);
}

static CUptiResult set_kind(CUpti_ActivityKind kind, int on) {
    if ((int)kind <= 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT) return CUPTI_ERROR_INVALID_KIND;
    pthread_mutex_lock(&lock);
    int first = on && !initialized;
    initialized |= on;
    pthread_mutex_unlock(&lock);
    if (first) initialize(); /* outside the lock: the driver may come back here */
    pthread_mutex_lock(&lock);
    enabled[kind] = on;
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

CA_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) { return set_kind(kind, 1); }

CA_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) { return set_kind(kind, 0); }

CA_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
    deliver();
    return CUPTI_SUCCESS;
}

CA_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes, CUpti_Activity **record) {
    if (!buffer || !record) return CUPTI_ERROR_INVALID_PARAMETER;
    size_t at = 0;
    if (*record) at = (size_t)((uint8_t *)*record - buffer) + record_size((*record)->kind);
    if (at >= validBufferSizeBytes) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)(buffer + at);
    return CUPTI_SUCCESS;
}

CA_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char **str) {
    if (!str) return CUPTI_ERROR_INVALID_PARAMETER;
    *str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS"
           : result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
                                                                     : "CUPTI_ERROR_UNKNOWN";
    return CUPTI_SUCCESS;
}
