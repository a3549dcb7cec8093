/* The real functions behind the ones we interpose. dlsym and dlvsym are
 * interposed too, so the real ones are found by reading libc's dynamic symbol
 * table directly (GNU hash), the way the dynamic linker itself would. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

#include "preload/preload.h"

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);
static dlsym_fn real_dlsym;
static dlvsym_fn real_dlvsym;

static uint32_t gnu_hash(const char *s) {
    uint32_t h = 5381;
    for (; *s; s++) h = h * 33 + (unsigned char)*s;
    return h;
}

/* d_ptr values are relocated in place by glibc on most targets, not all. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) p) {
    return p < info->dlpi_addr ? info->dlpi_addr + p : p;
}

static void *lookup(const struct dl_phdr_info *info, const char *name) {
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn) return NULL;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *gh = NULL;
    const ElfW(Half) *versym = NULL;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        if (dyn->d_tag == DT_SYMTAB) symtab = (const ElfW(Sym) *)dyn_ptr(info, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_STRTAB) strtab = (const char *)dyn_ptr(info, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_GNU_HASH) gh = (const uint32_t *)dyn_ptr(info, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_VERSYM) versym = (const ElfW(Half) *)dyn_ptr(info, dyn->d_un.d_ptr);
    }
    if (!symtab || !strtab || !gh) return NULL;
    uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
    const ElfW(Addr) *bloom = (const ElfW(Addr) *)&gh[4];
    const uint32_t *buckets = (const uint32_t *)&bloom[bloom_size];
    const uint32_t *chain = &buckets[nbuckets];
    uint32_t h = gnu_hash(name);
    uint32_t idx = buckets[h % nbuckets];
    if (idx < symoffset) return NULL;
    for (;; idx++) {
        const ElfW(Sym) *sym = &symtab[idx];
        uint32_t h2 = chain[idx - symoffset];
        /* a defined symbol of that name in its default version, as dlsym finds */
        if ((h | 1) == (h2 | 1) && sym->st_shndx != SHN_UNDEF && !(versym && (versym[idx] & 0x8000)) &&
            !strcmp(name, strtab + sym->st_name))
            return (void *)(info->dlpi_addr + sym->st_value);
        if (h2 & 1) return NULL;
    }
}

static int find_cb(struct dl_phdr_info *info, size_t size, void *data) {
    const char *n = info->dlpi_name;
    if (!n || (!strstr(n, "/libc.so") && !strstr(n, "/libdl.so") && strncmp(n, "libc.so", 7))) return 0;
    void **out = data;
    if (!out[0]) out[0] = lookup(info, "dlsym");
    if (!out[1]) out[1] = lookup(info, "dlvsym");
    return out[0] && out[1];
}

static void find_real(void) {
    void *found[2] = {NULL, NULL};
    dl_iterate_phdr(find_cb, found);
    real_dlsym = (dlsym_fn)found[0];
    real_dlvsym = (dlvsym_fn)found[1];
}

static pthread_once_t real_once = PTHREAD_ONCE_INIT;

struct next_search {
    uintptr_t caller_base;
    const char *name;
    bool after_caller;
    void *found;
};

static int next_cb(struct dl_phdr_info *info, size_t size, void *data) {
    struct next_search *s = data;
    if (!s->after_caller) {
        s->after_caller = info->dlpi_addr == s->caller_base;
        return 0;
    }
    return (s->found = lookup(info, s->name)) != NULL;
}

/* The objects after the caller's, in load order: what RTLD_NEXT searches. */
void *ca_next_symbol(const void *caller, const char *name) {
    Dl_info di;
    if (!dladdr(caller, &di)) return NULL;
    struct next_search s = {0, name, false, NULL};
    /* dladdr gives the load address of a shared object; the main program of a
     * non-PIE build has base 0, as dl_iterate_phdr reports it */
    s.caller_base = (uintptr_t)di.dli_fbase;
    dl_iterate_phdr(next_cb, &s);
    if (!s.after_caller) { /* the main program reports its own base differently */
        s.caller_base = 0;
        dl_iterate_phdr(next_cb, &s);
    }
    return s.found;
}

void *ca_real_dlsym(void *handle, const char *name) {
    pthread_once(&real_once, find_real);
    return real_dlsym ? real_dlsym(handle, name) : NULL;
}

void *ca_real_dlvsym(void *handle, const char *name, const char *version) {
    pthread_once(&real_once, find_real);
    return real_dlvsym ? real_dlvsym(handle, name, version) : NULL;
}

/* ---- the driver ---- */

static ca_driver drv;
static bool simulated;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
/* Set while this thread loads the driver: libcuda's own start-up may call
 * dlsym, which asks ca_drv() again; that must not wait on itself. */
static __thread __attribute__((tls_model("initial-exec"))) bool loading;

#define LOAD(h, fn) (drv.fn = (__typeof__(drv.fn))ca_real_dlsym((h), #fn))

static void load_driver(void) {
    loading = true;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    loading = false;
    if (!h) return;
    simulated = ca_real_dlsym(h, "simgpu_counters") != NULL;
    LOAD(h, cuGetProcAddress_v2);
    LOAD(h, cuGetProcAddress);
    LOAD(h, cuCtxGetCurrent);
    LOAD(h, cuCtxGetDevice);
    LOAD(h, cuCtxPushCurrent_v2);
    LOAD(h, cuCtxPopCurrent_v2);
    LOAD(h, cuCtxSynchronize);
    LOAD(h, cuMemAlloc_v2);
    LOAD(h, cuMemAllocPitch_v2);
    LOAD(h, cuMemFree_v2);
    LOAD(h, cuMemAllocAsync);
    LOAD(h, cuMemFreeAsync);
    LOAD(h, cuMemAllocAsync_ptsz);
    LOAD(h, cuMemFreeAsync_ptsz);
    LOAD(h, cuMemGetInfo_v2);
    LOAD(h, cuMemAddressReserve);
    LOAD(h, cuMemAddressFree);
    LOAD(h, cuMemCreate);
    LOAD(h, cuMemRelease);
    LOAD(h, cuMemMap);
    LOAD(h, cuMemUnmap);
    LOAD(h, cuMemSetAccess);
    LOAD(h, cuMemGetAllocationGranularity);
    LOAD(h, cuEventCreate);
    LOAD(h, cuEventRecord);
    LOAD(h, cuEventQuery);
    LOAD(h, cuEventSynchronize);
    LOAD(h, cuEventDestroy_v2);
    LOAD(h, cuStreamWaitEvent);
    LOAD(h, cuStreamSynchronize);
    LOAD(h, cuStreamCreate);
    LOAD(h, cuStreamCreateWithPriority);
    LOAD(h, cuStreamDestroy_v2);
    drv.cuStreamDestroy_v1 = (__typeof__(drv.cuStreamDestroy_v1))ca_real_dlsym(h, "cuStreamDestroy");
    LOAD(h, cuDevicePrimaryCtxReset_v2);
    LOAD(h, cuCtxDestroy_v2);
    drv.loaded = drv.cuCtxGetCurrent && drv.cuCtxGetDevice && drv.cuMemAlloc_v2 && drv.cuMemFree_v2 &&
                 drv.cuMemGetInfo_v2 && drv.cuMemAddressReserve && drv.cuMemCreate && drv.cuMemMap &&
                 drv.cuMemSetAccess && drv.cuMemUnmap && drv.cuMemRelease && drv.cuMemAddressFree &&
                 drv.cuMemGetAllocationGranularity;
}

static bool drv_done; /* set once load_driver has run: the fast path skips pthread_once */

const ca_driver *ca_drv(void) {
    if (!__atomic_load_n(&drv_done, __ATOMIC_ACQUIRE)) {
        if (loading) return NULL;
        pthread_once(&drv_once, load_driver);
        __atomic_store_n(&drv_done, true, __ATOMIC_RELEASE);
    }
    return drv.loaded ? &drv : NULL;
}

bool ca_on_simulated_device(void) { return ca_drv() && simulated; }
