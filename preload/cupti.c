/* Device memory allocated past cudalloc: stream-ordered pools used directly,
 * CUDA graph memory, libraries that reach the driver by paths we do not hook.
 * On a GPU, when libcupti loads, its memory activity records (MEMORY2, memory
 * pools) say what was allocated; what is not ours is counted per device and
 * shown beside our own figures. Loaded at run time: the preload never needs
 * CUPTI to start. */
#include <cupti_activity.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
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
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*enable)(CUpti_ActivityKind);
    CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*flush_all)(uint32_t);
} cupti;
static bool active;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static external *live;                   /* allocations that are not ours */
static uint64_t bytes_out[MAX_DEVICES];  /* their sum, per device */
static uint64_t pool_bytes[MAX_DEVICES]; /* held by memory pools, per device */

static void CUPTIAPI request(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void on_memory(const CUpti_ActivityMemory4 *m) {
    if (m->memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE || m->deviceId >= MAX_DEVICES) return;
    external *e;
    HASH_FIND(hh, live, &m->address, sizeof m->address, e);
    if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
        if (!e) return;
        bytes_out[e->device] -= e->bytes;
        HASH_DEL(live, e);
        free(e);
        return;
    }
    /* our own granules and segments show up too: leave them out */
    ca_device *d = ca_device_by_ordinal((int)m->deviceId);
    if (e || (d && ca_contains(d->alloc, (const void *)(uintptr_t)m->address))) return;
    if (!(e = malloc(sizeof *e))) return;
    *e = (external){.addr = m->address, .bytes = m->bytes, .device = m->deviceId};
    HASH_ADD(hh, live, addr, sizeof e->addr, e);
    bytes_out[e->device] += e->bytes;
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

#define LOAD(field, name) (cupti.field = (__typeof__(cupti.field))ca_real_dlsym(h, name))

static void start(void) {
    if (ca_on_simulated_device()) return; /* no CUPTI there, and nothing past us to see */
    void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libcupti.so", RTLD_NOW | RTLD_LOCAL);
    if (!h || !LOAD(register_callbacks, "cuptiActivityRegisterCallbacks") || !LOAD(enable, "cuptiActivityEnable") ||
        !LOAD(next_record, "cuptiActivityGetNextRecord") || !LOAD(flush_all, "cuptiActivityFlushAll")) {
        ca_warn("CUPTI not found (libcupti.so): device memory allocated past cudalloc is not counted");
        return;
    }
    if (cupti.register_callbacks(request, complete) != CUPTI_SUCCESS ||
        cupti.enable(CUPTI_ACTIVITY_KIND_MEMORY2) != CUPTI_SUCCESS) {
        ca_warn("CUPTI is in use by another tool (a profiler?): device memory allocated past cudalloc is not "
                "counted");
        return;
    }
    cupti.enable(CUPTI_ACTIVITY_KIND_MEMORY_POOL); /* optional: older drivers lack it */
    active = true;
}

void ca_cupti_start(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, start);
}

bool ca_cupti_external(int device, uint64_t *allocations, uint64_t *pools) {
    if (!active || device < 0 || device >= MAX_DEVICES) return false;
    cupti.flush_all(0);
    pthread_mutex_lock(&lock);
    *allocations = bytes_out[device];
    *pools = pool_bytes[device];
    pthread_mutex_unlock(&lock);
    return true;
}
