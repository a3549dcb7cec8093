/* Stream memory operations: cuStreamWaitValue32 and cuStreamWriteValue32
 * (v1 and _v2, CUDA 8.0 and 11.7, and their _ptsz variants), so that a
 * dependency between streams that CUDA does not make shows as the deadlock it
 * would be on a GPU. Work runs when issued here, so:
 *   - a wait whose condition holds passes; one whose condition does not holds
 *     its stream (stream_hold.c) until a write satisfies it: events recorded
 *     on the stream, and streams made to wait on them, stay not ready;
 *   - a write on a stream that is behind a hold (held, or waiting on an event
 *     behind one) is queued and runs once that hold goes, which may end
 *     waits, which may run more writes.
 * A write that never runs because what it waits behind waits for it is a
 * deadlock: its stream answers NOT_READY for good, the value stays unwritten.
 * A wait on the legacy or per-thread stream, on a stream already held or
 * behind a hold, or in a capture, is not simulated (CUDA_ERROR_NOT_SUPPORTED). */
#include <stdlib.h>
#include <sys/mman.h>

#include "simgpu/sim.h"

struct queued_write {
    CUstream behind;
    uint32_t *addr;
    uint32_t value;
    struct queued_write *next;
};
static struct queued_write *queued; /* under the lock */

/* cuStreamWaitValue32's conditions (CUstreamWaitValue_flags). */
static int met(uint32_t have, uint32_t want, unsigned flags)
{
    switch (flags & 3u) {
    case CU_STREAM_WAIT_VALUE_GEQ:
        return (int32_t)(have - want) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
        return have == want;
    case CU_STREAM_WAIT_VALUE_AND:
        return (have & want) != 0;
    default:
        return ~(have | want) != 0;
    }
}

void ca_sim_memops_settle(void)
{
    for (int moved = 1; moved;) {
        moved = 0;
        for (int i = 0; i < ca_sim.nholds; i++) {
            struct ca_sim_hold *h = &ca_sim.holds[i];
            if (h->wait_addr && met(__atomic_load_n(h->wait_addr, __ATOMIC_ACQUIRE), h->wait_value, h->wait_flags)) {
                ca_sim_hold_release(h->handle);
                moved = 1;
                break;
            }
        }
        for (struct queued_write **w = &queued; *w && !moved;) {
            struct queued_write *q = *w;
            if (ca_sim_find_hold(q->behind)) {
                w = &q->next;
                continue;
            }
            __atomic_store_n(q->addr, q->value, __ATOMIC_RELEASE);
            *w = q->next;
            free(q);
            moved = 1;
        }
    }
}

/* The stream, and the 4 bytes at addr on its device. */
static CUresult enter(CUstream s, CUdeviceptr addr, int prot, struct ca_sim_stream_ref *ref)
{
    CUresult r = ca_sim_stream_resolve(s, ref);
    if (r == CUDA_SUCCESS && ref->obj && ref->obj->cs.cap)
        r = CUDA_ERROR_NOT_SUPPORTED; /* a memory-operation node: not simulated */
    if (r == CUDA_SUCCESS && (addr & 3))
        r = CUDA_ERROR_INVALID_VALUE; /* 32-bit operations need 4-byte alignment */
    if (r == CUDA_SUCCESS)
        r = ca_sim_check_range(addr, 4, 0, prot);
    if (r == CUDA_SUCCESS)
        r = ca_sim_touch(ref->ctx, addr, 4, prot, 0);
    return r;
}

static CUresult wait_value(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned flags)
{
    struct ca_sim_stream_ref ref;
    ca_sim_lock();
    CUresult r = enter(s, addr, PROT_READ, &ref);
    if (r == CUDA_SUCCESS && (flags & ~(3u | CU_STREAM_WAIT_VALUE_FLUSH)))
        r = CUDA_ERROR_INVALID_VALUE;
    const uint32_t *p = (const uint32_t *)(uintptr_t)addr;
    if (r == CUDA_SUCCESS && !met(__atomic_load_n(p, __ATOMIC_ACQUIRE), value, flags)) {
        if (!ref.obj || ca_sim_hold_for_record(&ref))
            r = CUDA_ERROR_NOT_SUPPORTED;
        else if (ca_sim_hold_add(ref.handle, ref.ctx, ref.obj->flags))
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else {
            struct ca_sim_hold *h = ca_sim_find_hold(ref.handle);
            h->wait_addr = p;
            h->wait_value = value;
            h->wait_flags = flags;
        }
    }
    ca_sim_unlock();
    return r;
}

static CUresult write_value(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned flags)
{
    struct ca_sim_stream_ref ref;
    ca_sim_lock();
    CUresult r = enter(s, addr, PROT_WRITE, &ref);
    if (r == CUDA_SUCCESS && (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER))
        r = CUDA_ERROR_INVALID_VALUE;
    CUstream behind = r == CUDA_SUCCESS ? ca_sim_hold_for_record(&ref) : NULL;
    if (r == CUDA_SUCCESS && behind) {
        struct queued_write *q = malloc(sizeof *q);
        if (!q) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            *q = (struct queued_write){behind, (uint32_t *)(uintptr_t)addr, value, queued};
            queued = q;
        }
    } else if (r == CUDA_SUCCESS) {
        __atomic_store_n((uint32_t *)(uintptr_t)addr, value, __ATOMIC_RELEASE);
        ca_sim_memops_settle();
    }
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuStreamWaitValue32(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    return wait_value(s, addr, value, flags);
}

CA_EXPORT CUresult cuStreamWaitValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    return wait_value(s, addr, value, flags);
}

CA_EXPORT CUresult cuStreamWaitValue32_ptsz(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    return wait_value(ca_sim_ptsz(s), addr, value, flags);
}

CA_EXPORT CUresult cuStreamWaitValue32_v2_ptsz(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    return wait_value(ca_sim_ptsz(s), addr, value, flags);
}

CA_EXPORT CUresult cuStreamWriteValue32(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    return write_value(s, addr, value, flags);
}

CA_EXPORT CUresult cuStreamWriteValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    return write_value(s, addr, value, flags);
}

CA_EXPORT CUresult cuStreamWriteValue32_ptsz(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    return write_value(ca_sim_ptsz(s), addr, value, flags);
}

CA_EXPORT CUresult cuStreamWriteValue32_v2_ptsz(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    return write_value(ca_sim_ptsz(s), addr, value, flags);
}
