/* record_alloc.so: records PyTorch's CPU tensor allocations as an RMM trace.
 *
 * PyTorch 1.13's CPU allocator (c10::alloc_cpu in libc10.so) takes every
 * tensor's memory from posix_memalign and gives it back with free. Preloaded,
 * this library interposes both: a posix_memalign called from libc10 is a
 * tensor allocation (anything else is passed through unrecorded), and a free
 * is recorded only for a pointer it handed out (kept in an open-addressing
 * table). A program marks iteration boundaries by calling the exported
 * record_alloc_step() (Python: ctypes.CDLL(None).record_alloc_step()).
 *
 *   RECORD_ALLOC_CSV=out.csv LD_PRELOAD=./record_alloc.so python3 train.py
 *
 * The file is RMM's CSV (Thread,Time,Action,Pointer,Size,Stream) with
 * cudalloc's `iteration` rows (reports/REPORT.md): Thread the OS thread id,
 * Time nanoseconds since the library was loaded, Stream 0x0. Nothing here
 * may call malloc or free while it holds its lock: rows are formatted into a
 * static buffer and written with write(2).
 *
 * With RECORD_ALLOC_FRAMES=frames.txt as well, each allocation's Python
 * frames are taken too (reports/capture/pyframes.h: read from the thread's
 * own frames, no GIL), and its row gets a seventh column, the id of its
 * stack; frames.txt has one line per stack, `id<TAB>function|file|line;...`,
 * innermost first. (Such a CSV is for to_snapshot.py, which turns it into a
 * PyTorch snapshot with frames; cudalloc-report reads six columns.) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "reports/capture/named_frames.h"
#include "reports/capture/pyframes.h"

#define EXPORT __attribute__((visibility("default")))

static int (*real_memalign)(void **, size_t, size_t);
/* glibc's own free: safe before the constructor has run. */
extern void __libc_free(void *);
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int fd = -1;
static uint64_t t0, iteration;

/* Output buffer, flushed when nearly full and at exit. */
static char buf[1 << 20];
static size_t buf_used;

static void flush_locked(void) {
    size_t off = 0;
    while (fd >= 0 && off < buf_used) {
        ssize_t w = write(fd, buf + off, buf_used - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    buf_used = 0;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* stack: the allocation's stack id with frames on (0: none), else -1. */
static void row_locked(const char *action, uintptr_t ptr, uint64_t size, long stack) {
    if (fd < 0) return;
    if (buf_used + 128 > sizeof buf) flush_locked();
    long tid = strcmp(action, "iteration") ? syscall(SYS_gettid) : 0;
    int n;
    if (ptr && stack >= 0)
        n = snprintf(buf + buf_used, 128, "%ld,%llu,%s,0x%llx,%llu,0x0,%ld\n", tid,
                     (unsigned long long)(now_ns() - t0), action, (unsigned long long)ptr,
                     (unsigned long long)size, stack);
    else if (ptr)
        n = snprintf(buf + buf_used, 128, "%ld,%llu,%s,0x%llx,%llu,0x0\n", tid,
                     (unsigned long long)(now_ns() - t0), action, (unsigned long long)ptr,
                     (unsigned long long)size);
    else
        n = snprintf(buf + buf_used, 128, "%ld,%llu,%s,,%llu,0x0\n", tid,
                     (unsigned long long)(now_ns() - t0), action, (unsigned long long)size);
    if (n > 0 && n < 128) buf_used += (size_t)n;
}

/* ---- Python frames (RECORD_ALLOC_FRAMES) ---- */

static FILE *frames_out;
#define STACKS (1u << 16)
static uint64_t *stack_hash; /* open addressing: a stack's hash, its id the slot's index + 1 */

/* The calling thread's Python stack as an id (new ones written to
 * frames_out), 0 when it has none, -1 when frames are off. Called without
 * the lock: naming a frame mallocs. */
static long python_stack(void) {
    static __thread int busy;
    if (!frames_out || busy) return -1;
    busy = 1;
    ca_py_frame fr[CA_PY_MAX_FRAMES];
    uint64_t h = 0;
    unsigned n = ca_py_walk(fr, CA_PY_MAX_FRAMES, &h);
    uintptr_t ips[CA_PY_MAX_FRAMES];
    for (unsigned i = 0; i < n; i++) ips[i] = ca_py_frame_ip(&fr[i]);
    h = 1469598103934665603ull;
    for (unsigned i = 0; i < n; i++) h = (h ^ ips[i]) * 1099511628211ull;
    long id = 0;
    if (n) {
        pthread_mutex_lock(&lock);
        size_t i = (size_t)(h >> 20) & (STACKS - 1);
        while (stack_hash[i] && stack_hash[i] != h) i = (i + 1) & (STACKS - 1);
        int fresh = !stack_hash[i];
        stack_hash[i] = h;
        id = (long)i + 1;
        pthread_mutex_unlock(&lock);
        if (fresh) {
            flockfile(frames_out);
            fprintf(frames_out, "%ld\t", id);
            for (unsigned k = 0; k < n; k++) {
                const char *fn = "??", *file = "??", *mod;
                unsigned line = 0;
                ca_named_frame_get(ips[k], &fn, &file, &line, &mod);
                fprintf(frames_out, "%s%s|%s|%u", k ? ";" : "", fn, file, line);
            }
            fputc('\n', frames_out);
            funlockfile(frames_out);
        }
    }
    busy = 0;
    return id;
}

/* Live recorded pointers -> size: linear probing, deletion by backward
 * shift, mmap'd once (no malloc inside free). */
#define SLOTS (1u << 20)
typedef struct {
    uintptr_t ptr;
    uint64_t size;
} slot;
static slot *table;

static size_t hash(uintptr_t p) { return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull >> 44) & (SLOTS - 1); }

static void put(uintptr_t p, uint64_t size) {
    for (size_t i = hash(p);; i = (i + 1) & (SLOTS - 1))
        if (!table[i].ptr) {
            table[i] = (slot){p, size};
            return;
        }
}

/* Removes p; its size in *size. 0 when p was not recorded. */
static int take(uintptr_t p, uint64_t *size) {
    size_t i = hash(p);
    for (; table[i].ptr != p; i = (i + 1) & (SLOTS - 1))
        if (!table[i].ptr) return 0;
    *size = table[i].size;
    /* Backward shift: move later entries of the cluster into the hole. */
    for (size_t j = (i + 1) & (SLOTS - 1); table[j].ptr; j = (j + 1) & (SLOTS - 1)) {
        size_t h = hash(table[j].ptr);
        if (((j - h) & (SLOTS - 1)) >= ((j - i) & (SLOTS - 1))) {
            table[i] = table[j];
            i = j;
        }
    }
    table[i].ptr = 0;
    return 1;
}

__attribute__((constructor)) static void init(void) {
    real_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    t0 = now_ns();
    void *m = mmap(NULL, SLOTS * sizeof(slot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    const char *path = getenv("RECORD_ALLOC_CSV");
    if (m == MAP_FAILED || !path || !*path) {
        fprintf(stderr, "record_alloc: %s; recording nothing\n",
                m == MAP_FAILED ? "no memory for the table" : "RECORD_ALLOC_CSV is not set");
        return;
    }
    table = m;
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "record_alloc: cannot write %s: %s\n", path, strerror(errno));
        return;
    }
    const char *fpath = getenv("RECORD_ALLOC_FRAMES");
    if (fpath && *fpath) {
        void *hm = mmap(NULL, STACKS * sizeof *stack_hash, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (hm != MAP_FAILED && (frames_out = fopen(fpath, "w"))) stack_hash = hm;
        else fprintf(stderr, "record_alloc: cannot write %s: recording no frames\n", fpath);
    }
    static const char header[] = "Thread,Time,Action,Pointer,Size,Stream\n";
    memcpy(buf, header, sizeof header - 1);
    buf_used = sizeof header - 1;
}

__attribute__((destructor)) static void fini(void) {
    pthread_mutex_lock(&lock);
    flush_locked();
    if (frames_out) fflush(frames_out);
    if (fd >= 0) close(fd);
    fd = -1;
    pthread_mutex_unlock(&lock);
}

/* Is the caller libc10 (the tensor allocator)? Decided once per call site. */
static int from_c10(void *ret) {
    static struct {
        void *ip;
        int yes;
    } seen[32];
    static int n_seen;
    for (int i = 0; i < n_seen; i++)
        if (seen[i].ip == ret) return seen[i].yes;
    Dl_info info;
    int yes = dladdr(ret, &info) && info.dli_fname && strstr(info.dli_fname, "libc10.so");
    if (n_seen < 32) seen[n_seen++].ip = ret, seen[n_seen - 1].yes = yes;
    return yes;
}

EXPORT int posix_memalign(void **out, size_t align, size_t size) {
    if (!real_memalign) real_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    int rc = real_memalign(out, align, size);
    if (rc || !table || !size) return rc;
    void *ret = __builtin_return_address(0);
    pthread_mutex_lock(&lock);
    int c10 = from_c10(ret);
    pthread_mutex_unlock(&lock);
    if (!c10) return rc;
    long stack = python_stack();
    pthread_mutex_lock(&lock);
    put((uintptr_t)*out, size);
    row_locked("allocate", (uintptr_t)*out, size, stack);
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT void free(void *p) {
    if (p && table) {
        uint64_t size;
        pthread_mutex_lock(&lock);
        if (take((uintptr_t)p, &size)) row_locked("free", (uintptr_t)p, size, -1);
        pthread_mutex_unlock(&lock);
    }
    __libc_free(p);
}

/* An iteration boundary: iteration N (1, 2, ...) begins here. */
EXPORT void record_alloc_step(void) {
    pthread_mutex_lock(&lock);
    row_locked("iteration", 0, ++iteration, -1);
    pthread_mutex_unlock(&lock);
}
