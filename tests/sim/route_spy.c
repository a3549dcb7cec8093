/* A stand-in libcuda.so.1 that exports only cuGetProcAddress_v2: it logs every
 * lookup, forwards it to the simulated driver (opened by path), and counts the
 * calls made through a few of the pointers it hands out. Asked for
 * cuGetProcAddress itself, it answers with itself, as an interposer does. A
 * runtime that reached the driver any other way than dlopen + dlsym +
 * cuGetProcAddress would find nothing here. */
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <string.h>

#include "tests/sim/route_spy.h"
#include "util/export.h"

static struct spy_log log_;
static PFN_cuGetProcAddress_v12000 real_lookup;
static PFN_cuMemAlloc_v3020 real_alloc;
static PFN_cuMemFree_v3020 real_free;
static PFN_cuMemAllocAsync_v11020 real_alloc_async;
static PFN_cuMemGetInfo_v3020 real_info;

static CUresult spy_alloc(CUdeviceptr *p, size_t n)
{
    log_.mem_alloc++;
    return real_alloc(p, n);
}

static CUresult spy_free(CUdeviceptr p)
{
    log_.mem_free++;
    return real_free(p);
}

static CUresult spy_alloc_async(CUdeviceptr *p, size_t n, CUstream s)
{
    log_.mem_alloc_async++;
    return real_alloc_async(p, n, s);
}

static CUresult spy_info(size_t *free, size_t *total)
{
    log_.mem_get_info++;
    return real_info(free, total);
}

/* Replaces *pfn with the spy when symbol is `name` (legacy flavour only). */
#define WRAP(name, real, spy)                                                       \
    if (strcmp(symbol, name) == 0 && !(flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) { \
        real = (__typeof__(real))*pfn;                                              \
        *pfn = (void *)spy;                                                         \
    }

CA_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus)
{
    if (!real_lookup) {
        void *sim = dlopen(SIM_DRIVER, RTLD_NOW | RTLD_LOCAL);
        real_lookup = sim ? (PFN_cuGetProcAddress_v12000)dlsym(sim, "cuGetProcAddress_v2") : NULL;
        if (!real_lookup)
            return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (log_.n < SPY_MAX) {
        struct spy_lookup *l = &log_.lookups[log_.n++];
        strncpy(l->symbol, symbol, sizeof l->symbol - 1);
        l->version = cudaVersion;
        l->flags = flags;
    }
    CUresult r = real_lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && strcmp(symbol, "cuGetProcAddress") == 0 && cudaVersion >= 12000)
        *pfn = (void *)cuGetProcAddress_v2;
    if (r == CUDA_SUCCESS) {
        WRAP("cuMemAlloc", real_alloc, spy_alloc)
        WRAP("cuMemFree", real_free, spy_free)
        WRAP("cuMemAllocAsync", real_alloc_async, spy_alloc_async)
        WRAP("cuMemGetInfo", real_info, spy_info)
    }
    return r;
}

CA_EXPORT const struct spy_log *spy_log(void)
{
    return &log_;
}
