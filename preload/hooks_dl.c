/* dlsym and dlvsym: a statically linked cudart (nvcc's default) and PyTorch
 * find the driver with dlopen("libcuda.so.1") and dlsym(handle,
 * "cuGetProcAddress_v2"), then every entry point through that. We hand out
 * our cuGetProcAddress (and our memory functions to anyone asking for them by
 * name) in place of the driver's. */
#include <dlfcn.h>

#include "preload/preload.h"

CA_NO_SANITIZE static void *lookup(void *handle, const char *name, const char *version, const void *caller) {
    void *real = handle == RTLD_NEXT ? ca_next_symbol(caller, name)
                 : version           ? ca_real_dlvsym(handle, name, version)
                                     : ca_real_dlsym(handle, name);
    /* Only cu* names can be ours; the driver must be loaded to compare. */
    if (real && name && name[0] == 'c' && name[1] == 'u' && name[2] != 'd') {
        void *ours = ca_hook_for_real(real);
        if (ours) return ours;
    }
    return real;
}

CA_NO_SANITIZE CA_EXPORT void *dlsym(void *handle, const char *name) {
    return lookup(handle, name, NULL, __builtin_return_address(0));
}

CA_NO_SANITIZE CA_EXPORT void *dlvsym(void *handle, const char *name, const char *version) {
    return lookup(handle, name, version, __builtin_return_address(0));
}
