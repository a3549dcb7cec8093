/* Virtual memory management on real virtual memory: a reservation is a
 * PROT_NONE mapping, cuMemMap maps a range of the memfd there (MAP_FIXED),
 * cuMemSetAccess is mprotect, cuMemUnmap puts PROT_NONE back (the reservation
 * stays), and the last release of a handle punches its pages out of the memfd.
 * Like the real driver's, these calls need cuInit but no current context. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "simgpu/sim.h"

#define G (ca_sim.granularity)

/* Every VMM call: cuInit done, the device has VMM (CUDALLOC_SIM_VMM=0: it
 * has not, as some vGPU setups), and after fork the child's memory its own. */
CUresult ca_sim_vmm_enter(void)
{
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ca_sim.vmm)
        return CUDA_ERROR_NOT_SUPPORTED;
    return ca_sim_phys_settle() == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

#define enter ca_sim_vmm_enter

static CUresult check_prop(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    return prop->location.id >= 0 && prop->location.id < ca_sim.ndev ? CUDA_SUCCESS
                                                                      : CUDA_ERROR_INVALID_DEVICE;
}

struct ca_sim_phys *ca_sim_find_phys(CUmemGenericAllocationHandle handle)
{
    struct ca_sim_phys *ph;
    unsigned long long key = handle;
    HASH_FIND(hh, ca_sim.phys, &key, sizeof key, ph);
    return ph;
}

/* A handle dies when released and unmapped everywhere. */
void ca_sim_phys_maybe_destroy(struct ca_sim_phys *ph)
{
    if (ph->refs || ph->maps)
        return;
    if (ph->own_fd >= 0)
        close(ph->own_fd); /* the memory lives on while another process holds it */
    else
        ca_sim_phys_free(ph->off, ph->size);
    if (!ph->imported)
        ca_sim_uncharge(ph->prop.location.id, ph->size);
    HASH_DEL(ca_sim.phys, ph);
    free(ph);
}

/* Turns a mapping back into reserved address space. */
static void drop_mapping(struct ca_sim_region *m)
{
    struct ca_sim_phys *ph = m->phys;
    mmap((void *)m->base, m->size, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    ca_sim_regions_remove(&ca_sim.mem, m);
    ph->maps--;
    ca_sim_phys_maybe_destroy(ph);
}

/* [ptr, ptr+size) must be made of whole mappings, back to back: gives the
 * index of the first and how many. */
static CUresult whole_mappings(uintptr_t ptr, size_t size, size_t *first, size_t *count)
{
    struct ca_sim_region *m = ca_sim_regions_find(&ca_sim.mem, ptr);
    if (!m || m->base != ptr || size == 0 || ptr + size < ptr)
        return CUDA_ERROR_INVALID_VALUE;
    *first = (size_t)(m - ca_sim.mem.v);
    uintptr_t at = ptr;
    for (size_t i = *first; i < ca_sim.mem.n; i++) {
        m = &ca_sim.mem.v[i];
        if (m->kind != CA_SIM_MAPPING || m->base != at)
            break;
        at += m->size;
        if (at == ptr + size) {
            *count = i - *first + 1;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

CA_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                                 CUmemAllocationGranularity_flags option)
{
    CUresult r = ca_sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ca_sim.vmm)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    r = check_prop(prop);
    if (r == CUDA_SUCCESS)
        *granularity = option == CU_MEM_ALLOC_GRANULARITY_MINIMUM ? G : ca_sim.granularity_recommended;
    return r;
}

/* addr is a hint, taken when it is free and aligned; the alignment is at least
 * the granularity so that the start of every reservation can be mapped. */
CA_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                       CUdeviceptr addr, unsigned long long flags)
{
    CA_SIM_FAIL("cuMemAddressReserve");
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const int anon = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    ca_sim_lock();
    CUresult r = enter();
    if (r == CUDA_SUCCESS && (!ptr || size == 0 || size % page || flags ||
                              (alignment & (alignment - 1)) || addr % page))
        r = CUDA_ERROR_INVALID_VALUE;
    size_t align = alignment > G ? alignment : G;
    if (r == CUDA_SUCCESS && size > SIZE_MAX - align)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS) {
        ca_sim_unlock();
        return r;
    }
    char *p = MAP_FAILED;
    if (addr && addr % align == 0) {
        p = mmap((void *)addr, size, PROT_NONE, anon | MAP_FIXED_NOREPLACE, -1, 0);
        if (p != MAP_FAILED && p != (char *)addr) {
            munmap(p, size);
            p = MAP_FAILED;
        }
    }
    if (p == MAP_FAILED) {
        /* with no alignment asked, the range is aligned to the granularity
         * and no more (an odd multiple of it): CUDA promises no more */
        size_t extra = alignment ? align : 2 * align;
        char *raw = mmap(NULL, size + extra, PROT_NONE, anon, -1, 0);
        if (raw != MAP_FAILED) {
            p = (char *)(((uintptr_t)raw + align - 1) / align * align);
            if (!alignment && (uintptr_t)p % (2 * align) == 0)
                p += align;
            if (p > raw)
                munmap(raw, (size_t)(p - raw));
            if (raw + size + extra > p + size)
                munmap(p + size, (size_t)(raw + size + extra - (p + size)));
        }
    }
    struct ca_sim_region reg = {.base = (uintptr_t)p, .size = size, .kind = CA_SIM_RESERVED, .ipc_fd = -1};
    if (p == MAP_FAILED || ca_sim_regions_insert(&ca_sim.resv, &reg) != 0) {
        if (p != MAP_FAILED)
            munmap(p, size);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        *ptr = (CUdeviceptr)p;
    }
    ca_sim_unlock();
    return r;
}

/* Mappings still inside the range go with it, as with the real driver. */
CA_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CA_SIM_FAIL("cuMemAddressFree");
    ca_sim_lock();
    CUresult r = enter();
    struct ca_sim_region *resv = ca_sim_regions_find(&ca_sim.resv, ptr);
    if (r == CUDA_SUCCESS && (!resv || resv->base != ptr || resv->size != size))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        struct ca_sim_region *m;
        while ((m = ca_sim_regions_first_from(&ca_sim.mem, ptr)) && m->base < ptr + size)
            drop_mapping(m);
        munmap((void *)ptr, size);
        ca_sim_regions_remove(&ca_sim.resv, resv);
    }
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags)
{
    CA_SIM_FAIL("cuMemCreate");
    ca_sim_lock();
    CUresult r = enter();
    if (r == CUDA_SUCCESS && (!handle || flags || size == 0 || size % G))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = check_prop(prop);
    if (r == CUDA_SUCCESS && (prop->requestedHandleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
                              (prop->requestedHandleTypes && ca_sim.vmm == CA_SIM_VMM_NO_FD)))
        r = CUDA_ERROR_NOT_SUPPORTED; /* Windows and fabric handles are not simulated */
    if (r == CUDA_SUCCESS && ca_sim_charge(prop->location.id, size) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        struct ca_sim_phys *ph = calloc(1, sizeof *ph);
        if (!ph || ca_sim_phys_alloc(size, &ph->off) != 0) {
            free(ph);
            ca_sim_uncharge(prop->location.id, size);
            ca_sim.n.out_of_memory++;
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            ph->handle = ca_sim.next_id++;
            ph->own_fd = -1;
            ph->size = size;
            ph->refs = 1;
            ph->prop = *prop;
            HASH_ADD(hh, ca_sim.phys, handle, sizeof ph->handle, ph);
            *handle = ph->handle;
            ca_sim.n.mem_create++;
        }
    }
    ca_sim_unlock();
    return r;
}

/* Released while mapped, the memory lives until its last mapping goes. */
CA_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CA_SIM_FAIL("cuMemRelease");
    ca_sim_lock();
    CUresult r = enter();
    struct ca_sim_phys *ph = ca_sim_find_phys(handle);
    if (r == CUDA_SUCCESS && (!ph || ph->refs == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        ph->refs--;
        ca_sim_phys_maybe_destroy(ph);
        ca_sim.n.mem_release++;
    }
    ca_sim_unlock();
    return r;
}

/* A new mapping has no access until cuMemSetAccess. */
CA_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    CA_SIM_FAIL("cuMemMap");
    ca_sim_lock();
    CUresult r = enter();
    struct ca_sim_phys *ph = ca_sim_find_phys(handle);
    struct ca_sim_region *resv = ca_sim_regions_find(&ca_sim.resv, ptr);
    if (r == CUDA_SUCCESS &&
        (flags || size == 0 || ptr % G || size % G || offset % G || !ph || ph->refs == 0 ||
         offset > ph->size || size > ph->size - offset || !resv ||
         size > resv->base + resv->size - ptr || ca_sim_regions_overlap(&ca_sim.mem, ptr, size)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        struct ca_sim_region m = {
            .base = ptr, .size = size, .kind = CA_SIM_MAPPING, .device = ph->prop.location.id,
            .id = ca_sim.next_id++, .phys = ph, .phys_off = offset, .prot = PROT_NONE, .ipc_fd = -1,
        };
        off_t at;
        int fd = ca_sim_phys_fd_of(ph, &at);
        void *p = mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, at + (off_t)offset);
        if (p == MAP_FAILED || ca_sim_regions_insert(&ca_sim.mem, &m) != 0) {
            if (p != MAP_FAILED)
                mmap(p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
                     -1, 0);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            ph->maps++;
            ca_sim.n.mem_map++;
        }
    }
    ca_sim_unlock();
    return r;
}

/* Whole mappings only: a sub-range of one cannot be unmapped. */
CA_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CA_SIM_FAIL("cuMemUnmap");
    size_t first, count;
    ca_sim_lock();
    CUresult r = enter();
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_unsafe(); /* synchronous (cuda.h's note): a capture may forbid it */
    if (r == CUDA_SUCCESS)
        r = whole_mappings(ptr, size, &first, &count);
    if (r == CUDA_SUCCESS) {
        for (size_t i = first + count; i-- > first;)
            drop_mapping(&ca_sim.mem.v[i]);
        ca_sim.n.mem_unmap++;
    }
    ca_sim_unlock();
    return r;
}

/* Access is per device: the descriptors set it for the devices they name and
 * leave the others' as they were (CU_MEM_ACCESS_FLAGS_PROT_NONE takes it
 * away). Every device is the host here, so the host's protection is the
 * union over the devices; who may touch what is checked by ca_sim_touch. */
CA_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    CA_SIM_FAIL("cuMemSetAccess");
    size_t first, n;
    ca_sim_lock();
    CUresult r = enter();
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_unsafe(); /* synchronous (cuda.h's note): a capture may forbid it */
    if (r == CUDA_SUCCESS && (!desc || count == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; r == CUDA_SUCCESS && i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            r = CUDA_ERROR_INVALID_VALUE;
        else if (desc[i].location.id < 0 || desc[i].location.id >= ca_sim.ndev)
            r = CUDA_ERROR_INVALID_DEVICE;
        else if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
                 desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE &&
                 desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE)
            r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS)
        r = whole_mappings(ptr, size, &first, &n);
    for (size_t m = first; r == CUDA_SUCCESS && m < first + n; m++) {
        struct ca_sim_region *reg = &ca_sim.mem.v[m];
        for (size_t i = 0; i < count; i++)
            reg->access[desc[i].location.id] = (unsigned char)desc[i].flags;
        int prot = PROT_NONE;
        for (int d = 0; d < ca_sim.ndev; d++)
            prot |= reg->access[d] == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
                  : reg->access[d] == CU_MEM_ACCESS_FLAGS_PROT_READ      ? PROT_READ
                                                                         : PROT_NONE;
        if (mprotect((void *)reg->base, reg->size, prot) != 0)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            reg->prot = prot;
    }
    if (r == CUDA_SUCCESS)
        ca_sim.n.mem_set_access++;
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    ca_sim_lock();
    CUresult r = enter();
    struct ca_sim_region *m = ca_sim_regions_find(&ca_sim.mem, ptr);
    if (r == CUDA_SUCCESS && (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE ||
                              !m || m->kind != CA_SIM_MAPPING))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && (location->id < 0 || location->id >= ca_sim.ndev))
        r = CUDA_ERROR_INVALID_DEVICE;
    if (r == CUDA_SUCCESS)
        *flags = m->access[location->id];
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                          CUmemGenericAllocationHandle handle)
{
    ca_sim_lock();
    CUresult r = enter();
    struct ca_sim_phys *ph = ca_sim_find_phys(handle);
    if (r == CUDA_SUCCESS && (!prop || !ph))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *prop = ph->prop;
    ca_sim_unlock();
    return r;
}

/* Each retained handle needs its own cuMemRelease. */
CA_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    ca_sim_lock();
    CUresult r = enter();
    struct ca_sim_region *m = ca_sim_regions_find(&ca_sim.mem, (uintptr_t)addr);
    if (r == CUDA_SUCCESS && (!handle || !m || m->kind != CA_SIM_MAPPING))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        m->phys->refs++;
        *handle = m->phys->handle;
    }
    ca_sim_unlock();
    return r;
}
