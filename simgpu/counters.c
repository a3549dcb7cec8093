/* What tests and tools read back: simgpu_counters, simgpu_stream_last_wait,
 * and the activity sink of the CUPTI stand-in. */

#include "simgpu/sim.h"

static void add_wait(simgpu_counters_t *out, void *stream, void *event)
{
    if (!event || out->wait_count == SIMGPU_MAX_WAITS)
        return;
    out->last_wait[out->wait_count].stream = stream;
    out->last_wait[out->wait_count].event = event;
    out->wait_count++;
}

CA_EXPORT int simgpu_counters(simgpu_counters_t *out)
{
    if (!out)
        return -1;
    ca_sim_lock();
    *out = ca_sim.n;
    out->proc_lookups = __atomic_load_n(&ca_sim.n.proc_lookups, __ATOMIC_RELAXED);
    out->device_count = ca_sim.ndev;
    out->capacity = ca_sim.capacity * (uint64_t)ca_sim.ndev;
    out->bytes_in_use = 0;
    out->wait_count = 0;
    for (int d = 0; d < ca_sim.ndev; d++) {
        out->device_bytes_in_use[d] = ca_sim.dev[d].used;
        out->device_bytes_peak[d] = ca_sim.dev[d].peak;
        out->bytes_in_use += ca_sim.dev[d].used;
        add_wait(out, NULL, ca_sim.dev[d].primary.legacy_wait);
        add_wait(out, CU_STREAM_PER_THREAD, ca_sim.dev[d].primary.ptds_wait);
    }
    struct CUstream_st *st, *tmp;
    HASH_ITER(hh, ca_sim.streams, st, tmp) {
        add_wait(out, st->self, st->last_wait);
    }
    ca_sim_unlock();
    return 0;
}

CA_EXPORT int simgpu_stream_last_wait(void *stream, void **event)
{
    int rc = 0;
    if (!event)
        return -1;
    ca_sim_lock();
    if (stream == NULL || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) {
        struct CUctx_st *ctx = ca_sim_current_or_null();
        if (!ctx)
            rc = -1;
        else
            *event = stream == CU_STREAM_PER_THREAD ? ctx->ptds_wait : ctx->legacy_wait;
    } else {
        struct CUstream_st *st = ca_sim_find_stream(stream);
        if (st)
            *event = st->last_wait;
        else
            rc = -1;
    }
    ca_sim_unlock();
    return rc;
}

static void (*activity_sink)(const simgpu_activity *);

CA_EXPORT void simgpu_activity_sink(void (*sink)(const simgpu_activity *))
{
    __atomic_store_n(&activity_sink, sink, __ATOMIC_RELEASE);
}

void ca_sim_activity(int kind, int device, int pool, uintptr_t address, size_t bytes)
{
    void (*sink)(const simgpu_activity *) = __atomic_load_n(&activity_sink, __ATOMIC_ACQUIRE);
    if (!sink)
        return;
    simgpu_activity a = {.kind = kind, .device = device, .pool = pool, .address = address, .bytes = bytes};
    sink(&a);
}
