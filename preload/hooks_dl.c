/* dlsym and dlvsym. A statically linked cudart (nvcc's default) and PyTorch
 * find the driver with dlopen("libcuda.so.1") and dlsym(handle,
 * "cuGetProcAddress_v2"), then every entry point through that: for the
 * driver's names (cu and a capital: cuMemAlloc_v2) we hand out ours.
 *
 * Every other name (malloc, a TLS variable, curl_*, cublas*, cupti*) is
 * glibc's own lookup, reached by a jump that leaves the caller's return
 * address in place: glibc reads it to know what RTLD_NEXT follows, so symbol
 * versions, TLS, both hash styles and dlerror() are answered exactly as
 * without us. Nothing here loads libcuda. */
#include <dlfcn.h>

#include "preload/preload.h"

/* Our stand-in for a driver function found by name, or what was found. */
CA_NO_SANITIZE static void *lookup(void *handle, const char *name, const char *version, const void *caller) {
    void *real = handle == RTLD_NEXT ? ca_next_symbol(caller, name, version)
                 : version           ? ca_real_dlvsym(handle, name, version)
                                     : ca_real_dlsym(handle, name);
    void *ours = real ? ca_hook_for_driver_name(name, real) : NULL;
    return ours ? ours : real;
}

/* Reached by a jump from dlsym/dlvsym below: the return address is the caller's. */
CA_NO_SANITIZE void *ca_dlsym_driver(void *handle, const char *name) {
    return lookup(handle, name, NULL, __builtin_return_address(0));
}

CA_NO_SANITIZE void *ca_dlvsym_driver(void *handle, const char *name, const char *version) {
    return lookup(handle, name, version, __builtin_return_address(0));
}

#if defined(__x86_64__)
/* dlsym(handle, name) in rdi, rsi (dlvsym's version in rdx): a driver name
 * goes to ca_dl(v)sym_driver, anything else to glibc's, found on first use
 * (the argument registers kept across that call). */
#define CA_DL_TRAMPOLINE(fn, glibc, driver)                                                     \
    __asm__(".text\n"                                                                           \
            ".globl " #fn "\n"                                                                  \
            ".type " #fn ", @function\n" #fn ":\n"                                              \
            "    endbr64\n"                                                                     \
            "    test %rsi, %rsi\n"                                                             \
            "    jz 1f\n"                                                                       \
            "    cmpb $0x63, (%rsi)\n" /* 'c' */                                                \
            "    jne 1f\n"                                                                      \
            "    cmpb $0x75, 1(%rsi)\n" /* 'u' */                                               \
            "    jne 1f\n"                                                                      \
            "    movzbl 2(%rsi), %eax\n"                                                        \
            "    sub $0x41, %eax\n" /* 'A' to 'Z' */                                            \
            "    cmp $25, %eax\n"                                                               \
            "    ja 1f\n"                                                                       \
            "    jmp " #driver "\n"                                                             \
            "1:  mov " #glibc "(%rip), %rax\n"                                                  \
            "    test %rax, %rax\n"                                                             \
            "    jz 2f\n"                                                                       \
            "    jmp *%rax\n"                                                                   \
            "2:  push %rdi\n"                                                                   \
            "    push %rsi\n"                                                                   \
            "    push %rdx\n" /* the stack is 16-byte aligned for the call */                   \
            "    call ca_find_real_dl\n"                                                        \
            "    pop %rdx\n"                                                                    \
            "    pop %rsi\n"                                                                    \
            "    pop %rdi\n"                                                                    \
            "    jmp 1b\n"                                                                      \
            ".size " #fn ", .-" #fn "\n")
CA_DL_TRAMPOLINE(dlsym, ca_glibc_dlsym, ca_dlsym_driver);
CA_DL_TRAMPOLINE(dlvsym, ca_glibc_dlvsym, ca_dlvsym_driver);
#else
/* Elsewhere every name takes the C path: RTLD_NEXT is then resolved by our
 * own walk of the loaded objects (real.c), which has no TLS symbols. */
CA_NO_SANITIZE CA_EXPORT void *dlsym(void *handle, const char *name) {
    return lookup(handle, name, NULL, __builtin_return_address(0));
}

CA_NO_SANITIZE CA_EXPORT void *dlvsym(void *handle, const char *name, const char *version) {
    return lookup(handle, name, version, __builtin_return_address(0));
}
#endif
