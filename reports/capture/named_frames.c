/* The process's table of named frames; see named_frames.h. */
#define _GNU_SOURCE
#include "reports/capture/named_frames.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

typedef struct named {
    const char *function, *file, *module; /* point into key */
    unsigned line;
    uint32_t index;
    UT_hash_handle hh;
    char key[];   /* "function\0file\0module\0" followed by the line as text */
} named;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static named *by_key;      /* uthash on key */
static named **by_index;   /* index -> entry; grows, never shrinks */
static _Atomic uint32_t count;
static uint32_t cap;
static uint64_t memory;

static const char *or_unknown(const char *s) { return s && *s ? s : "??"; }

uintptr_t ca_named_frame(const char *function, const char *file, unsigned line, const char *module) {
    function = or_unknown(function);
    file = or_unknown(file);
    module = or_unknown(module);
    size_t lf = strlen(function) + 1, lfi = strlen(file) + 1, lm = strlen(module) + 1;
    size_t len = lf + lfi + lm + sizeof line;
    char stackbuf[512], *key = len <= sizeof stackbuf ? stackbuf : malloc(len);
    if (!key) return 0;
    memcpy(key, function, lf);
    memcpy(key + lf, file, lfi);
    memcpy(key + lf + lfi, module, lm);
    memcpy(key + lf + lfi + lm, &line, sizeof line);

    uintptr_t ip = 0;
    pthread_mutex_lock(&lock);
    named *e;
    HASH_FIND(hh, by_key, key, len, e);
    if (!e && (e = malloc(sizeof *e + len))) {
        uint32_t n = count;
        if (n == cap) {
            uint32_t ncap = cap ? 2 * cap : 256;
            named **grown = realloc(by_index, ncap * sizeof *grown);
            if (!grown) {
                free(e);
                e = NULL;
                goto out;
            }
            by_index = grown;
            memory += (uint64_t)(ncap - cap) * sizeof *grown;
            cap = ncap;
        }
        memcpy(e->key, key, len);
        e->function = e->key;
        e->file = e->key + lf;
        e->module = e->key + lf + lfi;
        e->line = line;
        e->index = n;
        HASH_ADD(hh, by_key, key, len, e);
        by_index[n] = e;
        memory += sizeof *e + len;
        atomic_store_explicit(&count, n + 1, memory_order_release);
    }
out:
    if (e) ip = CA_NAMED_FRAME_BIT | e->index;
    pthread_mutex_unlock(&lock);
    if (key != stackbuf) free(key);
    return ip;
}

int ca_named_frame_get(uintptr_t ip, const char **function, const char **file, unsigned *line,
                       const char **module) {
    if (!ca_ip_is_named(ip)) return 0;
    uintptr_t i = ip & ~CA_NAMED_FRAME_BIT;
    pthread_mutex_lock(&lock); /* by_index may be moved by a concurrent insert */
    named *e = i < count ? by_index[i] : NULL;
    pthread_mutex_unlock(&lock);
    if (!e) return 0;
    if (function) *function = e->function;
    if (file) *file = e->file;
    if (line) *line = e->line;
    if (module) *module = e->module;
    return 1;
}

uint32_t ca_named_frame_count(void) { return atomic_load_explicit(&count, memory_order_acquire); }

uint64_t ca_named_frame_memory(void) {
    pthread_mutex_lock(&lock);
    uint64_t m = memory + HASH_OVERHEAD(hh, by_key);
    pthread_mutex_unlock(&lock);
    return m;
}

void ca_named_frames_fork_child(void) { pthread_mutex_init(&lock, NULL); }
