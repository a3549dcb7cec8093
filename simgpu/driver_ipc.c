/* Memory shared between processes, both of CUDA's ways.
 *
 * Legacy IPC (cuIpcGetMemHandle, cuIpcOpenMemHandle, cuIpcCloseMemHandle) for
 * cuMemAlloc memory: the first export moves the allocation to a memfd of its
 * own (its bytes copied, the same address); the handle names the exporter's
 * pid, that fd and the allocation; the importer opens /proc/PID/fd/FD (a memfd
 * opened there is the same file) and maps it.
 *
 * Shareable handles (cuMemExportToShareableHandle, cuMemImportFromShareableHandle)
 * for cuMemCreate memory requested with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR:
 * the first export moves the handle's memory to a memfd of its own (its
 * mappings follow) and every export returns a new fd of it; the importer
 * passes the fd (got through a unix socket, pidfd_getfd, ...) and gets a
 * handle to map. Imported memory counts against no capacity here: the
 * exporter's process holds it. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "simgpu/sim.h"

#define IPC_MAGIC "simgpuIP"

/* What a CUipcMemHandle holds here (64 bytes). */
struct ipc_handle {
    char magic[8];
    int32_t pid, fd, device, pad;
    uint64_t size, id;
};
_Static_assert(sizeof(struct ipc_handle) <= sizeof(CUipcMemHandle), "a handle fits CUipcMemHandle");

static size_t page_round(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (n + page - 1) / page * page;
}

/* A memfd named after what it holds (the importer checks the name), with
 * `size` bytes copied from `from`; -1 on failure. */
static int memfd_with(const char *name, const void *from, size_t size)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, (off_t)size) != 0 || pwrite(fd, from, size, 0) != (ssize_t)size) {
        close(fd);
        return -1;
    }
    return fd;
}

int ca_sim_phys_fd_of(const struct ca_sim_phys *ph, off_t *off)
{
    *off = ph->own_fd >= 0 ? 0 : ph->off;
    return ph->own_fd >= 0 ? ph->own_fd : ca_sim_phys_fd();
}

void ca_sim_ipc_forget(struct ca_sim_region *reg)
{
    if (reg->ipc_fd >= 0)
        close(reg->ipc_fd);
    reg->ipc_fd = -1;
}

/* ---- legacy IPC ---- */

/* The allocation moves to a memfd of its own, at the same address. */
static CUresult make_shareable(struct ca_sim_region *reg)
{
    if (reg->ipc_fd >= 0)
        return CUDA_SUCCESS;
    char name[64];
    snprintf(name, sizeof name, "simgpu-ipc-%llu", reg->id);
    size_t len = page_round(reg->size);
    int fd = memfd_with(name, (const void *)reg->base, len);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (mmap((void *)reg->base, len, reg->prot, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
        close(fd);
        return CUDA_ERROR_MAP_FAILED;
    }
    reg->ipc_fd = fd;
    return CUDA_SUCCESS;
}

CA_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    struct CUctx_st *ctx;
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    struct ca_sim_region *reg = ca_sim_regions_find(&ca_sim.mem, dptr);
    /* the base of a cuMemAlloc allocation: not inside one, not VMM or pool memory */
    if (r == CUDA_SUCCESS && (!pHandle || !reg || reg->base != dptr || reg->kind != CA_SIM_LINEAR))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = make_shareable(reg);
    if (r == CUDA_SUCCESS) {
        struct ipc_handle h = {.pid = getpid(), .fd = reg->ipc_fd, .device = reg->device,
                               .size = reg->size, .id = reg->id};
        memcpy(h.magic, IPC_MAGIC, sizeof h.magic);
        memset(pHandle, 0, sizeof *pHandle);
        memcpy(pHandle, &h, sizeof h);
    }
    ca_sim_unlock();
    return r;
}

/* The exporter's memfd, checked by its name to be that allocation's (an fd
 * number is reused once the allocation is freed). */
static int open_exported(const struct ipc_handle *h)
{
    char path[64], link[128], want[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", h->pid, h->fd);
    snprintf(want, sizeof want, "/memfd:simgpu-ipc-%llu ", (unsigned long long)h->id);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0)
        return -1;
    link[n] = 0;
    if (strncmp(link, want, strlen(want)) != 0)
        return -1;
    return open(path, O_RDWR | O_CLOEXEC);
}

CA_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    struct CUctx_st *ctx;
    struct ipc_handle h;
    memcpy(&h, &handle, sizeof h);
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    if (r == CUDA_SUCCESS && (!pdptr || Flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && memcmp(h.magic, IPC_MAGIC, sizeof h.magic) != 0)
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (r == CUDA_SUCCESS && h.pid == getpid())
        r = CUDA_ERROR_INVALID_CONTEXT; /* a process cannot open its own handles */
    /* opened already by this context: the same pointer, one more reference */
    for (size_t i = 0; r == CUDA_SUCCESS && i < ca_sim.mem.n; i++) {
        struct ca_sim_region *reg = &ca_sim.mem.v[i];
        if (reg->kind == CA_SIM_IMPORTED && reg->ctx == ctx && reg->ipc_pid == h.pid && reg->ipc_id == h.id) {
            reg->ipc_refs++;
            *pdptr = reg->base;
            ca_sim_unlock();
            return CUDA_SUCCESS;
        }
    }
    int fd = r == CUDA_SUCCESS ? open_exported(&h) : -1;
    if (r == CUDA_SUCCESS && fd < 0)
        r = CUDA_ERROR_INVALID_HANDLE; /* the exporter or its allocation is gone */
    void *p = r == CUDA_SUCCESS ? mmap(NULL, page_round(h.size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                                : MAP_FAILED;
    if (r == CUDA_SUCCESS && p == MAP_FAILED)
        r = CUDA_ERROR_MAP_FAILED;
    struct ca_sim_region reg = {
        .base = (uintptr_t)p, .size = h.size, .kind = CA_SIM_IMPORTED, .device = h.device, .ctx = ctx,
        .id = ca_sim.next_id++, .prot = PROT_READ | PROT_WRITE, .ipc_fd = fd, .ipc_refs = 1,
        .ipc_pid = h.pid, .ipc_id = h.id,
    };
    if (r == CUDA_SUCCESS && ca_sim_regions_insert(&ca_sim.mem, &reg) != 0) {
        munmap(p, page_round(h.size));
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS)
        *pdptr = reg.base;
    else if (fd >= 0)
        close(fd);
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    struct CUctx_st *ctx;
    ca_sim_lock();
    CUresult r = ca_sim_current(&ctx);
    struct ca_sim_region *reg = ca_sim_regions_find(&ca_sim.mem, dptr);
    if (r == CUDA_SUCCESS && (!reg || reg->base != dptr || reg->kind != CA_SIM_IMPORTED))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && --reg->ipc_refs == 0) {
        ca_sim_linear_unmap(reg);
        ca_sim_regions_remove(&ca_sim.mem, reg);
    }
    ca_sim_unlock();
    return r;
}

/* ---- shareable handles ---- */

/* The handle's memory moves to a memfd of its own; its mappings follow. */
static CUresult own_memfd(struct ca_sim_phys *ph)
{
    if (ph->own_fd >= 0)
        return CUDA_SUCCESS;
    char name[64], *bytes = malloc(ph->size);
    snprintf(name, sizeof name, "simgpu-vmm-dev%d", ph->prop.location.id);
    if (!bytes || pread(ca_sim_phys_fd(), bytes, ph->size, ph->off) != (ssize_t)ph->size) {
        free(bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    int fd = memfd_with(name, bytes, ph->size);
    free(bytes);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < ca_sim.mem.n; i++) {
        struct ca_sim_region *m = &ca_sim.mem.v[i];
        if (m->kind == CA_SIM_MAPPING && m->phys == ph)
            mmap((void *)m->base, m->size, m->prot, MAP_SHARED | MAP_FIXED, fd, (off_t)m->phys_off);
    }
    ca_sim_phys_free(ph->off, ph->size);
    ph->own_fd = fd;
    return CUDA_SUCCESS;
}

CA_EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                                CUmemAllocationHandleType handleType, unsigned long long flags)
{
    ca_sim_lock();
    CUresult r = ca_sim_vmm_enter();
    struct ca_sim_phys *ph = r == CUDA_SUCCESS ? ca_sim_find_phys(handle) : NULL;
    if (r == CUDA_SUCCESS && (!shareableHandle || flags || !ph || ph->refs == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        r = CUDA_ERROR_NOT_SUPPORTED;
    else if (r == CUDA_SUCCESS && !(ph->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        r = CUDA_ERROR_INVALID_VALUE; /* not requested at cuMemCreate */
    if (r == CUDA_SUCCESS)
        r = own_memfd(ph);
    int fd = r == CUDA_SUCCESS ? fcntl(ph->own_fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (r == CUDA_SUCCESS && fd < 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS)
        *(int *)shareableHandle = fd;
    ca_sim_unlock();
    return r;
}

/* One of simgpu's exported memfds: its device, from its name; -1 if not. */
static int exported_device(int fd)
{
    char path[64], link[128];
    int dev = -1;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0)
        return -1;
    link[n] = 0;
    if (sscanf(link, "/memfd:simgpu-vmm-dev%d", &dev) != 1)
        return -1;
    return dev;
}

CA_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                  CUmemAllocationHandleType shHandleType)
{
    int fd = (int)(intptr_t)osHandle;
    struct stat st;
    ca_sim_lock();
    CUresult r = ca_sim_vmm_enter();
    if (r == CUDA_SUCCESS && shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        r = CUDA_ERROR_NOT_SUPPORTED;
    int dev = r == CUDA_SUCCESS ? exported_device(fd) : -1;
    if (r == CUDA_SUCCESS && (!handle || dev < 0 || dev >= ca_sim.ndev || fstat(fd, &st) != 0 ||
                              st.st_size <= 0 || st.st_size % ca_sim.granularity))
        r = CUDA_ERROR_INVALID_VALUE;
    struct ca_sim_phys *ph = r == CUDA_SUCCESS ? calloc(1, sizeof *ph) : NULL;
    if (r == CUDA_SUCCESS && (!ph || (ph->own_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)) {
        free(ph);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        ph->handle = ca_sim.next_id++;
        ph->imported = 1;
        ph->size = (size_t)st.st_size;
        ph->refs = 1;
        ph->prop = (CUmemAllocationProp){
            .type = CU_MEM_ALLOCATION_TYPE_PINNED,
            .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev},
        };
        HASH_ADD(hh, ca_sim.phys, handle, sizeof ph->handle, ph);
        *handle = ph->handle;
    }
    ca_sim_unlock();
    return r;
}
