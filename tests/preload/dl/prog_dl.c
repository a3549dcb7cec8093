/* dlsym and dlvsym answer as glibc's, with or without the preload: TLS
 * variables, symbol versions, libraries with only a SysV hash table,
 * dlerror() after a failed lookup; and looking up other libraries' names
 * (curl_*, a cu* name outside the driver) never loads libcuda.
 *   prog_dl    (linked with libpeer.so, which comes after it in load order) */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "tests/preload/check.h"

int *peer_tls_addr(void);

static void *tls_of_thread(void *arg) {
    int *(*addr)(void) = arg;
    int *mine = dlsym(RTLD_NEXT, "peer_tls");
    return (void *)(long)(mine && mine == addr() && *mine == 42);
}

int main(void) {
    /* A TLS variable: this thread's copy, and another thread's its own. */
    int *tls = dlsym(RTLD_NEXT, "peer_tls");
    CHECK(tls == peer_tls_addr() && *tls == 42, "dlsym(RTLD_NEXT) of a TLS variable is this thread's copy");
    *tls = 5;
    pthread_t t;
    void *ok = NULL;
    CHECK(pthread_create(&t, NULL, tls_of_thread, (void *)peer_tls_addr) == 0 && pthread_join(t, &ok) == 0 && ok,
          "another thread's dlsym of the TLS variable is that thread's copy");

    /* Versions: each exactly, the default without one, none that does not exist. */
    int (*v1)(void) = dlvsym(RTLD_NEXT, "peer_fn", "PEER_1");
    int (*v2)(void) = dlvsym(RTLD_NEXT, "peer_fn", "PEER_2");
    int (*dflt)(void) = dlsym(RTLD_NEXT, "peer_fn");
    CHECK(v1 && v2 && dflt && v1() == 1 && v2() == 2 && dflt() == 2, "dlvsym takes the version asked for");
    dlerror();
    CHECK(!dlvsym(RTLD_NEXT, "peer_fn", "PEER_9") && dlerror(), "a version that does not exist: NULL and dlerror()");
#if defined(__x86_64__)
    /* glibc's two memcpy: the old one is memmove's. */
    void *old = dlvsym(RTLD_NEXT, "memcpy", "GLIBC_2.2.5"), *cur = dlvsym(RTLD_NEXT, "memcpy", "GLIBC_2.14");
    CHECK(old && cur && old != cur && cur == dlsym(RTLD_NEXT, "memcpy"), "memcpy@GLIBC_2.2.5 is not memcpy@GLIBC_2.14");
    dlerror();
    CHECK(!dlvsym(RTLD_NEXT, "memcpy", "GLIBC_9.99") && dlerror(), "memcpy in a version glibc lacks: NULL");
#endif

    /* A library with only a SysV hash table. */
    int (*plain)(void) = dlsym(RTLD_NEXT, "peer_plain");
    CHECK(plain && plain() == 7, "dlsym(RTLD_NEXT) in a --hash-style=sysv library");

    /* Failed lookups say why, a driver-style name included. */
    dlerror();
    CHECK(!dlsym(RTLD_NEXT, "peer_no_such_symbol") && dlerror(), "a missing name: NULL and dlerror()");
    dlerror();
    CHECK(!dlsym(RTLD_NEXT, "cuNoSuchDriverCall") && dlerror(), "a missing cu* name: NULL and dlerror()");

    /* Other libraries' names never load the driver. */
    int (*curl)(void) = dlsym(RTLD_NEXT, "curl_peer_version");
    int (*cu)(void) = dlsym(RTLD_DEFAULT, "cuPeerNotTheDriver");
    CHECK(curl && curl() == 8 && cu && cu() == 9, "curl_* and cu* names of another library are found");
    dlsym(RTLD_DEFAULT, "cublasCreate_v2");
    dlsym(RTLD_DEFAULT, "cuptiSubscribe");
    CHECK(!dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), "no lookup loaded libcuda");
    CHECK_DONE("dl");
}
