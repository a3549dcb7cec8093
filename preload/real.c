/* The real functions behind the ones we interpose. dlsym and dlvsym are
 * interposed too (hooks_dl.c), so the real ones are found by reading libc's
 * dynamic symbol table directly, the way the dynamic linker itself would. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <sys/auxv.h>

#include "preload/preload.h"

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);
static dlsym_fn real_dlsym;
static dlvsym_fn real_dlvsym;
/* What hooks_dl.c's dlsym and dlvsym jump to: glibc's, once found. */
void *ca_glibc_dlsym, *ca_glibc_dlvsym;

/* strcmp without libc: a sanitizer's strcmp interceptor is not ready yet
 * when its runtime asks our dlsym for the real functions. */
CA_NO_SANITIZE static bool same_name(const char *a, const char *b) {
    while (*a && *a == *b) a++, b++;
    return *a == *b;
}

CA_NO_SANITIZE static uint32_t gnu_hash(const char *s) {
    uint32_t h = 5381;
    for (; *s; s++) h = h * 33 + (unsigned char)*s;
    return h;
}

/* The loaded objects are walked through the dynamic linker's link_map list
 * (the order RTLD_NEXT follows), not dl_iterate_phdr: sanitizer runtimes wrap
 * that, and cannot serve it while they start and ask our dlsym for the real
 * functions. */

/* d_ptr values are relocated in place by glibc on most targets, not all. */
CA_NO_SANITIZE static uintptr_t dyn_ptr(const struct link_map *m, ElfW(Addr) p) {
    return p < m->l_addr ? m->l_addr + p : p;
}

CA_NO_SANITIZE static uint32_t sysv_hash(const char *s) {
    uint32_t h = 0;
    for (; *s; s++) {
        h = (h << 4) + (unsigned char)*s;
        h ^= (h >> 24) & 0xf0;
    }
    return h & 0x0fffffff;
}

/* One object's dynamic tables. */
typedef struct {
    const struct link_map *m;
    const ElfW(Sym) *symtab;
    const char *strtab;
    const uint32_t *gnu, *sysv;
    const ElfW(Half) *versym;
    const ElfW(Verdef) *verdef;
} dyn_tables;

CA_NO_SANITIZE static bool tables_of(const struct link_map *m, dyn_tables *t) {
    *t = (dyn_tables){.m = m};
    for (const ElfW(Dyn) *dyn = m->l_ld; dyn && dyn->d_tag != DT_NULL; dyn++) {
        uintptr_t p = dyn_ptr(m, dyn->d_un.d_ptr);
        switch (dyn->d_tag) {
        case DT_SYMTAB: t->symtab = (const ElfW(Sym) *)p; break;
        case DT_STRTAB: t->strtab = (const char *)p; break;
        case DT_GNU_HASH: t->gnu = (const uint32_t *)p; break;
        case DT_HASH: t->sysv = (const uint32_t *)p; break;
        case DT_VERSYM: t->versym = (const ElfW(Half) *)p; break;
        case DT_VERDEF: t->verdef = (const ElfW(Verdef) *)p; break;
        }
    }
    return t->symtab && t->strtab && (t->gnu || t->sysv);
}

/* Does symbol idx carry this version (dlvsym), or is it the default one (dlsym)?
 * An object without versions answers every version, as glibc's lookup does. */
CA_NO_SANITIZE static bool version_ok(const dyn_tables *t, uint32_t idx, const char *version) {
    if (!t->versym) return true;
    ElfW(Half) v = t->versym[idx];
    if (!version) return !(v & 0x8000); /* a hidden (non-default) version is not dlsym's */
    v &= 0x7fff;
    if (v < 2) return true; /* local or global base: no version of its own */
    for (const ElfW(Verdef) *d = t->verdef; d;
         d = d->vd_next ? (const ElfW(Verdef) *)((const char *)d + d->vd_next) : NULL)
        if (d->vd_ndx == v) {
            const ElfW(Verdaux) *a = (const ElfW(Verdaux) *)((const char *)d + d->vd_aux);
            return same_name(version, t->strtab + a->vda_name);
        }
    return false;
}

CA_NO_SANITIZE static void *found(const dyn_tables *t, uint32_t idx, const char *name, const char *version) {
    const ElfW(Sym) *sym = &t->symtab[idx];
    if (sym->st_shndx == SHN_UNDEF || !same_name(name, t->strtab + sym->st_name) || !version_ok(t, idx, version))
        return NULL;
    unsigned type = sym->st_info & 0xf; /* ELF32_ST_TYPE = ELF64_ST_TYPE */
    if (type == STT_TLS) return NULL; /* a thread's copy: glibc's to answer (hooks_dl.c) */
    void *addr = (void *)(t->m->l_addr + sym->st_value);
    /* An IFUNC (glibc's memcmp, strlen, memcpy...) is its resolver: call it
     * for the implementation, as dlsym does (x86-64 resolvers take no
     * argument, others take AT_HWCAP). */
    if (type == STT_GNU_IFUNC) addr = ((void *(*)(unsigned long))addr)(getauxval(AT_HWCAP));
    return addr;
}

/* name (in that version; NULL: the default one) defined by object m. */
CA_NO_SANITIZE static void *lookup(const struct link_map *m, const char *name, const char *version) {
    dyn_tables t;
    if (!tables_of(m, &t)) return NULL;
    if (t.gnu) {
        const uint32_t *gh = t.gnu;
        uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
        const ElfW(Addr) *bloom = (const ElfW(Addr) *)&gh[4];
        const uint32_t *buckets = (const uint32_t *)&bloom[bloom_size];
        const uint32_t *chain = &buckets[nbuckets];
        uint32_t h = gnu_hash(name);
        uint32_t idx = buckets[h % nbuckets];
        if (idx < symoffset) return NULL;
        for (;; idx++) {
            uint32_t h2 = chain[idx - symoffset];
            void *addr = (h | 1) == (h2 | 1) ? found(&t, idx, name, version) : NULL;
            if (addr) return addr;
            if (h2 & 1) return NULL;
        }
    }
    /* --hash-style=sysv: nbucket, nchain, buckets, chains */
    uint32_t nbucket = t.sysv[0];
    const uint32_t *bucket = &t.sysv[2], *chain = &bucket[nbucket];
    for (uint32_t idx = bucket[sysv_hash(name) % nbucket]; idx != STN_UNDEF; idx = chain[idx]) {
        void *addr = found(&t, idx, name, version);
        if (addr) return addr;
    }
    return NULL;
}

/* The link_map of the object holding addr. */
CA_NO_SANITIZE static struct link_map *object_of(const void *addr) {
    Dl_info di;
    struct link_map *m = NULL;
    return dladdr1(addr, &di, (void **)&m, RTLD_DL_LINKMAP) ? m : NULL;
}

CA_NO_SANITIZE static bool has_part(const char *s, const char *part) {
    for (; *s; s++) {
        size_t i = 0;
        while (part[i] && s[i] == part[i]) i++;
        if (!part[i]) return true;
    }
    return false;
}

/* Found on first use, without pthread_once (sanitizer runtimes wrap it too):
 * two threads racing here find the same two addresses. */
CA_NO_SANITIZE static void find_real(void) {
    dlsym_fn ds = NULL;
    dlvsym_fn dvs = NULL;
    struct link_map *m = object_of((const void *)find_real);
    while (m && m->l_prev) m = m->l_prev;
    for (; m && !(ds && dvs); m = m->l_next) {
        const char *n = m->l_name;
        if (!n || !(has_part(n, "/libc.so") || has_part(n, "/libdl.so") || (n[0] == 'l' && has_part(n, "libc.so"))))
            continue;
        if (!ds) ds = (dlsym_fn)lookup(m, "dlsym", NULL);
        if (!dvs) dvs = (dlvsym_fn)lookup(m, "dlvsym", NULL);
    }
    __atomic_store_n(&real_dlvsym, dvs, __ATOMIC_RELEASE);
    __atomic_store_n(&real_dlsym, ds, __ATOMIC_RELEASE);
}

/* For hooks_dl.c's trampolines; without glibc's (never seen), its C path. */
CA_NO_SANITIZE void ca_find_real_dl(void) {
    if (!__atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE)) find_real();
    void *ds = (void *)real_dlsym, *dvs = (void *)real_dlvsym;
    __atomic_store_n(&ca_glibc_dlvsym, dvs ? dvs : (void *)ca_dlvsym_driver, __ATOMIC_RELEASE);
    __atomic_store_n(&ca_glibc_dlsym, ds ? ds : (void *)ca_dlsym_driver, __ATOMIC_RELEASE);
}

/* The objects after the caller's, in load order: what RTLD_NEXT searches.
 * Not found: glibc's own RTLD_NEXT lookup from here (an object after the
 * caller's) fails too, and leaves its message for dlerror(). */
CA_NO_SANITIZE void *ca_next_symbol(const void *caller, const char *name, const char *version) {
    struct link_map *m = object_of(caller);
    for (m = m ? m->l_next : NULL; m; m = m->l_next) {
        void *addr = lookup(m, name, version);
        if (addr) return addr;
    }
    (void)(version ? ca_real_dlvsym(RTLD_NEXT, name, version) : ca_real_dlsym(RTLD_NEXT, name));
    return NULL;
}

void *ca_real_symbol(const char *name) {
    void *f = ca_real_dlsym(RTLD_NEXT, name);
    return f ? f : ca_next_symbol((const void *)ca_real_symbol, name, NULL);
}

CA_NO_SANITIZE void *ca_real_dlsym(void *handle, const char *name) {
    if (!__atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE)) find_real();
    dlsym_fn f = __atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE);
    return f ? f(handle, name) : NULL;
}

CA_NO_SANITIZE void *ca_real_dlvsym(void *handle, const char *name, const char *version) {
    if (!__atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE)) find_real();
    dlvsym_fn f = __atomic_load_n(&real_dlvsym, __ATOMIC_ACQUIRE);
    return f ? f(handle, name, version) : NULL;
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
    LOAD(h, cuStreamQuery);
    LOAD(h, cuStreamCreate);
    LOAD(h, cuStreamCreateWithPriority);
    LOAD(h, cuStreamDestroy_v2);
    drv.cuStreamDestroy_v1 = (__typeof__(drv.cuStreamDestroy_v1))ca_real_dlsym(h, "cuStreamDestroy");
    LOAD(h, cuStreamGetFlags);
    LOAD(h, cuDevicePrimaryCtxReset_v2);
    drv.cuDevicePrimaryCtxReset_v1 = (__typeof__(drv.cuDevicePrimaryCtxReset_v1))ca_real_dlsym(h, "cuDevicePrimaryCtxReset");
    LOAD(h, cuDriverGetVersion);
    LOAD(h, cuCtxDestroy_v2);
    LOAD(h, cuCtxCreate_v2);
    LOAD(h, cuCtxCreate_v3);
    LOAD(h, cuCtxCreate_v4);
    LOAD(h, cuGreenCtxCreate);
    LOAD(h, cuGreenCtxDestroy);
    LOAD(h, cuDevicePrimaryCtxRetain);
    LOAD(h, cuDevicePrimaryCtxRelease_v2);
    LOAD(h, cuDevicePrimaryCtxGetState);
    drv.cuDevicePrimaryCtxRelease_v1 = (__typeof__(drv.cuDevicePrimaryCtxRelease_v1))ca_real_dlsym(h, "cuDevicePrimaryCtxRelease");
    LOAD(h, cuDeviceGetAttribute);
    LOAD(h, cuCtxEnablePeerAccess);
    LOAD(h, cuCtxDisablePeerAccess);
    LOAD(h, cuMemRetainAllocationHandle);
    LOAD(h, cuMemExportToShareableHandle);
    LOAD(h, cuMemImportFromShareableHandle);
    LOAD(h, cuIpcGetMemHandle);
    LOAD(h, cuIpcOpenMemHandle_v2);
    drv.cuIpcOpenMemHandle_v1 = (__typeof__(drv.cuIpcOpenMemHandle_v1))ca_real_dlsym(h, "cuIpcOpenMemHandle");
    LOAD(h, cuIpcCloseMemHandle);
    LOAD(h, cuStreamBeginCapture_v2);
    LOAD(h, cuStreamBeginCapture_v2_ptsz);
    drv.cuStreamBeginCapture_v1 = (__typeof__(drv.cuStreamBeginCapture_v1))ca_real_dlsym(h, "cuStreamBeginCapture");
    drv.cuStreamBeginCapture_v1_ptsz =
        (__typeof__(drv.cuStreamBeginCapture_v1_ptsz))ca_real_dlsym(h, "cuStreamBeginCapture_ptsz");
    LOAD(h, cuStreamBeginCaptureToGraph);
    LOAD(h, cuStreamBeginCaptureToGraph_ptsz);
    LOAD(h, cuStreamEndCapture);
    LOAD(h, cuStreamEndCapture_ptsz);
    LOAD(h, cuStreamIsCapturing);
    LOAD(h, cuThreadExchangeStreamCaptureMode);
    /* Asked through cuGetProcAddress, as CUDA recommends for entry points of a
     * given version: a driver older than 12.5 has none. */
    if (drv.cuGetProcAddress_v2 &&
        drv.cuGetProcAddress_v2("cuCtxRecordEvent", (void **)&drv.cuCtxRecordEvent, 12050, 0, NULL) != CUDA_SUCCESS)
        drv.cuCtxRecordEvent = NULL;
    LOAD(h, cuMemGetAddressRange_v2);
    LOAD(h, cuPointerGetAttribute);
    LOAD(h, cuPointerGetAttributes);
    LOAD(h, cuDeviceGetMemPool);
    LOAD(h, cuMemGetHandleForAddressRange);
    LOAD(h, cuMemAllocManaged);
    LOAD(h, cuMemAllocFromPoolAsync);
    LOAD(h, cuMemAllocFromPoolAsync_ptsz);
    drv.loaded = drv.cuCtxGetCurrent && drv.cuCtxGetDevice && drv.cuMemAlloc_v2 && drv.cuMemFree_v2 &&
                 drv.cuMemGetInfo_v2 && drv.cuMemAddressReserve && drv.cuMemCreate && drv.cuMemMap &&
                 drv.cuMemSetAccess && drv.cuMemUnmap && drv.cuMemRelease && drv.cuMemAddressFree &&
                 drv.cuMemGetAllocationGranularity;
}

static bool drv_done; /* set once load_driver has run: later calls skip pthread_once */
const ca_driver *ca_drv_loaded; /* &drv once it loaded: ca_drv's fast path */

const ca_driver *ca_drv_load(void) {
    if (!__atomic_load_n(&drv_done, __ATOMIC_ACQUIRE)) {
        if (loading) return NULL;
        pthread_once(&drv_once, load_driver);
        if (drv.loaded) __atomic_store_n(&ca_drv_loaded, &drv, __ATOMIC_RELEASE);
        __atomic_store_n(&drv_done, true, __ATOMIC_RELEASE);
    }
    return drv.loaded ? &drv : NULL;
}

bool ca_on_simulated_device(void) { return ca_drv() && simulated; }
