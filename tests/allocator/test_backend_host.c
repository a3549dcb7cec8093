/* The host backend maps real memory: these tests look at the process itself
 * (/proc/self/maps, /proc/self/fd, mincore, the memfd's blocks) to see that it
 * does what it says, not only that it returns CA_OK. */
#define _GNU_SOURCE
#include <check.h>

#include "tests/check_run.h"
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allocator/backend.h"

#define PAGE 4096u
#define MiB (1u << 20)

/* ---- looking at the process ---- */

/* Permissions ("rw-s", "---p") of the mapping holding addr; "" when none. */
static void perms_at(uintptr_t addr, char out[5])
{
    FILE *f = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    out[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char p[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, p) == 3 && addr >= lo && addr < hi) {
            memcpy(out, p, 5);
            break;
        }
    }
    fclose(f);
}

static int resident(uintptr_t addr)
{
    unsigned char v = 0;
    ck_assert_int_eq(mincore((void *)addr, PAGE, &v), 0);
    return v & 1;
}

static sigjmp_buf probe_jmp;
static void probe_handler(int sig) { siglongjmp(probe_jmp, 1); }

/* Can addr be read? A fault is caught and answers no. */
static int readable(uintptr_t addr)
{
    struct sigaction sa = {.sa_handler = probe_handler}, old_segv, old_bus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    volatile int ok = 0;
    if (sigsetjmp(probe_jmp, 1) == 0) {
        (void)*(volatile char *)addr;
        ok = 1;
    }
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    return ok;
}

/* Open fds, and how many of them are the backend's memfd. */
static int count_fds(int *memfds)
{
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int n = 0, m = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[300], target[300];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(path, target, sizeof target - 1);
        if (k < 0) continue;
        target[k] = '\0';
        n++;
        if (strstr(target, "memfd:cudalloc-host")) m++;
    }
    closedir(d);
    if (memfds) *memfds = m;
    return n - 1; /* the directory's own fd */
}

/* Bytes of memory the memfd really holds (its allocated blocks). */
static long long memfd_bytes(void)
{
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    long long bytes = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[300], target[300];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(path, target, sizeof target - 1);
        if (k < 0) continue;
        target[k] = '\0';
        struct stat st;
        if (strstr(target, "memfd:cudalloc-host") && stat(path, &st) == 0)
            bytes = (long long)st.st_blocks * 512;
    }
    closedir(d);
    ck_assert_int_ge(bytes, 0);
    return bytes;
}

static ca_backend *host(size_t capacity, size_t granule)
{
    ca_backend *be = ca_backend_host_new(capacity, granule);
    ck_assert_ptr_nonnull(be);
    return be;
}

/* ---- tests ---- */

START_TEST(new_validates)
{
    ck_assert_ptr_null(ca_backend_host_new(1 * MiB, 0));
    ck_assert_ptr_null(ca_backend_host_new(1 * MiB, 3 * PAGE));  /* not a power of two */
    ck_assert_ptr_null(ca_backend_host_new(1 * MiB, PAGE / 2)); /* below a page */
    ck_assert_ptr_null(ca_backend_host_new(0, PAGE));
    ck_assert_ptr_null(ca_backend_host_new(PAGE - 1, PAGE)); /* no whole granule */
    ca_backend *be = host(10 * PAGE + 5, PAGE);
    ck_assert_str_eq(be->name, "host");
    ck_assert_uint_eq(be->granule, PAGE);
    ck_assert_ptr_null(be->event_record);
    ck_assert_ptr_null(be->stream_wait);
    ck_assert_ptr_null(be->event_destroy);
    ck_assert_ptr_null(be->stream_sync);
    size_t fr = 1, tot = 1;
    ck_assert_int_eq(be->mem_info(be->self, &fr, &tot), CA_OK);
    ck_assert_uint_eq(tot, 10 * PAGE); /* rounded down to whole granules */
    ck_assert_uint_eq(fr, 10 * PAGE);
    ck_assert_int_eq(be->mem_info(be->self, NULL, NULL), CA_OK);
    be->destroy(be);
}
END_TEST

START_TEST(reserve_is_aligned_and_inaccessible)
{
    ca_backend *be = host(64 * MiB, 2 * MiB);
    uintptr_t b[4];
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(be->reserve(be->self, (size_t)(i + 1) * 2 * MiB, &b[i]), CA_OK);
        ck_assert_uint_eq(b[i] % (2 * MiB), 0);
        char p[5];
        perms_at(b[i], p);
        ck_assert_str_eq(p, "---p");
        perms_at(b[i] + (size_t)(i + 1) * 2 * MiB - 1, p);
        ck_assert_str_eq(p, "---p");
        ck_assert(!readable(b[i]));
    }
    /* A reservation costs no physical memory. */
    ck_assert_uint_eq(ca_backend_used(be), 0);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(be->unreserve(be->self, b[i], (size_t)(i + 1) * 2 * MiB), CA_OK);
        char p[5];
        perms_at(b[i], p);
        ck_assert_str_eq(p, ""); /* gone from the address space */
    }
    be->destroy(be);
}
END_TEST

START_TEST(map_write_read_unmap)
{
    ca_backend *be = host(16 * PAGE, PAGE);
    uintptr_t base;
    ca_handle h;
    ck_assert_int_eq(be->reserve(be->self, 8 * PAGE, &base), CA_OK);
    ck_assert_int_eq(be->create(be->self, 2 * PAGE, &h), CA_OK);
    ck_assert_uint_ne(h, 0);
    ck_assert_uint_eq(ca_backend_used(be), 2 * PAGE);
    ck_assert_int_eq(be->map(be->self, base + 3 * PAGE, 2 * PAGE, h), CA_OK);

    char p[5];
    perms_at(base + 3 * PAGE, p);
    ck_assert_str_eq(p, "rw-s");
    perms_at(base + 2 * PAGE, p);
    ck_assert_str_eq(p, "---p"); /* its neighbours are still reserved only */
    perms_at(base + 5 * PAGE, p);
    ck_assert_str_eq(p, "---p");

    memset((void *)(base + 3 * PAGE), 0xab, 2 * PAGE);
    ck_assert(resident(base + 3 * PAGE) && resident(base + 4 * PAGE));
    ck_assert_uint_eq(((unsigned char *)base)[5 * PAGE - 1], 0xab);
    ck_assert_int_eq(memfd_bytes(), 2 * PAGE);

    ck_assert_int_eq(be->unmap(be->self, base + 3 * PAGE, 2 * PAGE), CA_OK);
    perms_at(base + 3 * PAGE, p);
    ck_assert_str_eq(p, "---p"); /* the reservation stays */
    ck_assert(!readable(base + 3 * PAGE));
    ck_assert(!resident(base + 3 * PAGE));
    /* Unmapped but not released: the memory and its contents are kept. */
    ck_assert_uint_eq(ca_backend_used(be), 2 * PAGE);
    ck_assert_int_eq(memfd_bytes(), 2 * PAGE);
    ck_assert_int_eq(be->map(be->self, base, 2 * PAGE, h), CA_OK);
    ck_assert_uint_eq(((unsigned char *)base)[PAGE + 7], 0xab);
    ck_assert_int_eq(be->unmap(be->self, base, 2 * PAGE), CA_OK);
    ck_assert_int_eq(be->release(be->self, h), CA_OK);
    ck_assert_uint_eq(ca_backend_used(be), 0);
    ck_assert_int_eq(be->unreserve(be->self, base, 8 * PAGE), CA_OK);
    be->destroy(be);
}
END_TEST

/* Recycling granules relies on this: one handle, two addresses, one memory. */
START_TEST(second_mapping_sees_the_same_memory)
{
    ca_backend *be = host(64 * PAGE, PAGE);
    uintptr_t r1, r2;
    ca_handle h;
    ck_assert_int_eq(be->reserve(be->self, 8 * PAGE, &r1), CA_OK);
    ck_assert_int_eq(be->reserve(be->self, 8 * PAGE, &r2), CA_OK);
    ck_assert_int_eq(be->create(be->self, 3 * PAGE, &h), CA_OK);
    ck_assert_int_eq(be->map(be->self, r1 + PAGE, 3 * PAGE, h), CA_OK);
    ck_assert_int_eq(be->map(be->self, r2 + 4 * PAGE, 3 * PAGE, h), CA_OK);
    /* A third mapping in the same reservation, right after the first. */
    ck_assert_int_eq(be->map(be->self, r1 + 4 * PAGE, 3 * PAGE, h), CA_OK);
    for (size_t i = 0; i < 3 * PAGE / sizeof(int); i++) ((int *)(r1 + PAGE))[i] = (int)i * 7;
    for (size_t i = 0; i < 3 * PAGE / sizeof(int); i++) {
        ck_assert_int_eq(((int *)(r2 + 4 * PAGE))[i], (int)i * 7);
        ck_assert_int_eq(((int *)(r1 + 4 * PAGE))[i], (int)i * 7);
    }
    ((int *)(r2 + 4 * PAGE))[5] = -1;
    ck_assert_int_eq(((int *)(r1 + PAGE))[5], -1);
    ck_assert_uint_eq(ca_backend_used(be), 3 * PAGE); /* one handle, counted once */
    /* Adjacent mappings are separate: unmapping one leaves the other. */
    ck_assert_int_eq(be->unmap(be->self, r1 + PAGE, 3 * PAGE), CA_OK);
    ck_assert_int_eq(((int *)(r1 + 4 * PAGE))[5], -1);
    ck_assert_int_eq(be->unmap(be->self, r1 + 4 * PAGE, 3 * PAGE), CA_OK);
    ck_assert_int_eq(be->unmap(be->self, r2 + 4 * PAGE, 3 * PAGE), CA_OK);
    ck_assert_int_eq(be->release(be->self, h), CA_OK);
    be->destroy(be);
}
END_TEST

START_TEST(release_gives_pages_back)
{
    ca_backend *be = host(64 * PAGE, PAGE);
    uintptr_t base;
    ca_handle h;
    ck_assert_int_eq(be->reserve(be->self, 16 * PAGE, &base), CA_OK);
    ck_assert_int_eq(be->create(be->self, 8 * PAGE, &h), CA_OK);
    ck_assert_int_eq(be->map(be->self, base, 8 * PAGE, h), CA_OK);
    memset((void *)base, 0x5a, 8 * PAGE);
    ck_assert_int_eq(memfd_bytes(), 8 * PAGE);
    ck_assert_int_eq(be->unmap(be->self, base, 8 * PAGE), CA_OK);
    ck_assert_int_eq(be->release(be->self, h), CA_OK);
    ck_assert_int_eq(memfd_bytes(), 0); /* the pages went back to the OS */
    ck_assert_uint_eq(ca_backend_used(be), 0);

    /* The same offsets again (first fit): nothing resident, contents zero. */
    ck_assert_int_eq(be->create(be->self, 8 * PAGE, &h), CA_OK);
    ck_assert_int_eq(be->map(be->self, base + 8 * PAGE, 8 * PAGE, h), CA_OK);
    for (int i = 0; i < 8; i++) ck_assert(!resident(base + (8 + i) * PAGE));
    for (size_t i = 0; i < 8 * PAGE; i++) ck_assert_uint_eq(((unsigned char *)base)[8 * PAGE + i], 0);
    ck_assert_int_eq(be->unmap(be->self, base + 8 * PAGE, 8 * PAGE), CA_OK);
    ck_assert_int_eq(be->release(be->self, h), CA_OK);
    be->destroy(be);
}
END_TEST

/* As cuMemRelease: a handle released while mapped lives until its last unmap. */
START_TEST(release_while_mapped_waits_for_unmap)
{
    ca_backend *be = host(64 * PAGE, PAGE);
    uintptr_t base;
    ca_handle h;
    ck_assert_int_eq(be->reserve(be->self, 16 * PAGE, &base), CA_OK);
    ck_assert_int_eq(be->create(be->self, 2 * PAGE, &h), CA_OK);
    ck_assert_int_eq(be->map(be->self, base, 2 * PAGE, h), CA_OK);
    ck_assert_int_eq(be->map(be->self, base + 4 * PAGE, 2 * PAGE, h), CA_OK);
    memset((void *)base, 1, 2 * PAGE);
    ck_assert_int_eq(be->release(be->self, h), CA_OK);
    ck_assert_int_eq(be->release(be->self, h), CA_ERR_INVALID);   /* twice */
    ck_assert_int_eq(be->map(be->self, base + 8 * PAGE, 2 * PAGE, h), CA_ERR_INVALID);
    ck_assert_uint_eq(ca_backend_used(be), 2 * PAGE);
    ck_assert_uint_eq(((unsigned char *)base)[4 * PAGE + 1], 1); /* still there */
    ck_assert_int_eq(be->unmap(be->self, base, 2 * PAGE), CA_OK);
    ck_assert_uint_eq(ca_backend_used(be), 2 * PAGE);
    ck_assert_uint_eq(((unsigned char *)base)[4 * PAGE + 1], 1);
    ck_assert_int_eq(be->unmap(be->self, base + 4 * PAGE, 2 * PAGE), CA_OK);
    ck_assert_uint_eq(ca_backend_used(be), 0);
    ck_assert_int_eq(memfd_bytes(), 0);
    be->destroy(be);
}
END_TEST

START_TEST(capacity_exhaustion_is_oom)
{
    ca_backend *be = host(8 * PAGE, PAGE);
    ca_handle a, b, c, d;
    uintptr_t f;
    ck_assert_int_eq(be->create(be->self, 5 * PAGE, &a), CA_OK);
    ck_assert_int_eq(be->create(be->self, 4 * PAGE, &b), CA_ERR_OOM);
    ck_assert_int_eq(be->create(be->self, 3 * PAGE, &b), CA_OK);
    ck_assert_int_eq(be->create(be->self, PAGE, &c), CA_ERR_OOM);
    ck_assert_int_eq(be->fixed_alloc(be->self, 1, &f), CA_ERR_OOM);
    ck_assert_int_eq(be->create(be->self, (size_t)1 << 40, &c), CA_ERR_OOM);
    size_t fr, tot;
    ck_assert_int_eq(be->mem_info(be->self, &fr, &tot), CA_OK);
    ck_assert_uint_eq(fr, 0);
    ck_assert_uint_eq(tot, 8 * PAGE);
    ck_assert_int_eq(be->release(be->self, b), CA_OK);
    ck_assert_int_eq(be->fixed_alloc(be->self, PAGE + 1, &f), CA_OK); /* counts 2 granules */
    ck_assert_uint_eq(ca_backend_used(be), 7 * PAGE);
    ck_assert_int_eq(be->create(be->self, 2 * PAGE, &d), CA_ERR_OOM);
    ck_assert_int_eq(be->create(be->self, PAGE, &d), CA_OK);
    ck_assert_int_eq(be->mem_info(be->self, &fr, &tot), CA_OK);
    ck_assert_uint_eq(fr, 0);
    ck_assert_int_eq(be->fixed_free(be->self, f, PAGE + 1), CA_OK);
    ck_assert_int_eq(be->release(be->self, a), CA_OK);
    ck_assert_int_eq(be->release(be->self, d), CA_OK);
    ck_assert_uint_eq(ca_backend_used(be), 0);
    be->destroy(be);
}
END_TEST

/* Freed granules scattered through the memfd still make one handle: a
 * fragmented memfd must never turn into an OOM while capacity remains. */
START_TEST(fragmented_memfd_still_creates)
{
    ca_backend *be = host(8 * PAGE, PAGE);
    ca_handle g[8], big;
    for (int i = 0; i < 8; i++) ck_assert_int_eq(be->create(be->self, PAGE, &g[i]), CA_OK);
    for (int i = 0; i < 8; i += 2) ck_assert_int_eq(be->release(be->self, g[i]), CA_OK);
    ck_assert_int_eq(be->create(be->self, 4 * PAGE, &big), CA_OK);
    ck_assert_int_eq(be->create(be->self, PAGE, &g[0]), CA_ERR_OOM);

    uintptr_t r1, r2, r3;
    ck_assert_int_eq(be->reserve(be->self, 4 * PAGE, &r1), CA_OK);
    ck_assert_int_eq(be->reserve(be->self, 4 * PAGE, &r2), CA_OK);
    ck_assert_int_eq(be->reserve(be->self, 4 * PAGE, &r3), CA_OK);
    /* The granules still held keep their own memory: mark them first. */
    for (int i = 1; i < 8; i += 2) {
        ck_assert_int_eq(be->map(be->self, r3 + (size_t)(i / 2) * PAGE, PAGE, g[i]), CA_OK);
        memset((void *)(r3 + (size_t)(i / 2) * PAGE), 'A' + i, PAGE);
    }
    ck_assert_int_eq(be->map(be->self, r1, 4 * PAGE, big), CA_OK);
    ck_assert_int_eq(be->map(be->self, r2, 4 * PAGE, big), CA_OK);
    for (int i = 0; i < 4; i++) memset((void *)(r1 + (size_t)i * PAGE), 'a' + i, PAGE);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(((char *)r2)[(size_t)i * PAGE], 'a' + i);
        ck_assert_int_eq(((char *)r2)[(size_t)i * PAGE + PAGE - 1], 'a' + i);
    }
    for (int i = 1; i < 8; i += 2) {
        uintptr_t at = r3 + (size_t)(i / 2) * PAGE;
        ck_assert_int_eq(((char *)at)[0], 'A' + i);
        ck_assert_int_eq(((char *)at)[PAGE - 1], 'A' + i);
        ck_assert_int_eq(be->unmap(be->self, at, PAGE), CA_OK);
    }
    /* A partial map takes the handle's first pieces. */
    ck_assert_int_eq(be->unmap(be->self, r2, 4 * PAGE), CA_OK);
    ck_assert_int_eq(be->map(be->self, r2, 2 * PAGE, big), CA_OK);
    ck_assert_int_eq(((char *)r2)[PAGE], 'b');
    ck_assert_int_eq(be->unmap(be->self, r2, 2 * PAGE), CA_OK);
    ck_assert_int_eq(be->unmap(be->self, r1, 4 * PAGE), CA_OK);
    ck_assert_int_eq(be->release(be->self, big), CA_OK);
    ck_assert_int_eq(memfd_bytes(), 4 * PAGE); /* the marked granules */
    for (int i = 1; i < 8; i += 2) ck_assert_int_eq(be->release(be->self, g[i]), CA_OK);
    ck_assert_int_eq(memfd_bytes(), 0);
    ck_assert_uint_eq(ca_backend_used(be), 0);
    be->destroy(be);
}
END_TEST

START_TEST(one_memfd_whatever_the_granules)
{
    int memfds;
    int before = count_fds(&memfds);
    ck_assert_int_eq(memfds, 0);
    enum { N = 1500 };
    ca_backend *be = host(N * PAGE, PAGE);
    ck_assert_int_eq(count_fds(&memfds), before + 1);
    ck_assert_int_eq(memfds, 1);
    uintptr_t base;
    static ca_handle h[N];
    ck_assert_int_eq(be->reserve(be->self, (size_t)N * PAGE, &base), CA_OK);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(be->create(be->self, PAGE, &h[i]), CA_OK);
        /* Granules in a scrambled order (7 is coprime with N). */
        ck_assert_int_eq(be->map(be->self, base + (size_t)((i * 7) % N) * PAGE, PAGE, h[i]), CA_OK);
        ((int *)(base + (size_t)((i * 7) % N) * PAGE))[0] = i;
    }
    ck_assert_int_eq(count_fds(&memfds), before + 1);
    ck_assert_int_eq(memfds, 1);
    ck_assert_int_eq(memfd_bytes(), (long long)N * PAGE);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(((int *)(base + (size_t)((i * 7) % N) * PAGE))[0], i);
        ck_assert_int_eq(be->unmap(be->self, base + (size_t)((i * 7) % N) * PAGE, PAGE), CA_OK);
        ck_assert_int_eq(be->release(be->self, h[i]), CA_OK);
    }
    ck_assert_int_eq(memfd_bytes(), 0);
    be->destroy(be);
    ck_assert_int_eq(count_fds(&memfds), before);
    ck_assert_int_eq(memfds, 0);
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
    ca_backend *be = host(64 * PAGE, PAGE);
    void *s = be->self;
    uintptr_t base, other, f;
    ca_handle h, h2, x;
    /* reserve / create */
    ck_assert_int_eq(be->reserve(s, 0, &base), CA_ERR_INVALID);
    ck_assert_int_eq(be->reserve(s, PAGE + 1, &base), CA_ERR_INVALID);
    ck_assert_int_eq(be->reserve(s, PAGE, NULL), CA_ERR_INVALID);
    ck_assert_int_eq(be->reserve(s, SIZE_MAX - PAGE + 1, &base), CA_ERR_INVALID);
    ck_assert_int_eq(be->create(s, 0, &h), CA_ERR_INVALID);
    ck_assert_int_eq(be->create(s, PAGE / 2, &h), CA_ERR_INVALID);
    ck_assert_int_eq(be->create(s, PAGE, NULL), CA_ERR_INVALID);
    ck_assert_int_eq(be->reserve(s, 8 * PAGE, &base), CA_OK);
    ck_assert_int_eq(be->create(s, 2 * PAGE, &h), CA_OK);
    ck_assert_int_eq(be->create(s, PAGE, &h2), CA_OK);

    /* map */
    ck_assert_int_eq(be->map(s, base + 1, 2 * PAGE, h), CA_ERR_INVALID);        /* address */
    ck_assert_int_eq(be->map(s, base, 2 * PAGE - 1, h), CA_ERR_INVALID);        /* size */
    ck_assert_int_eq(be->map(s, base, 0, h), CA_ERR_INVALID);
    ck_assert_int_eq(be->map(s, base, 3 * PAGE, h), CA_ERR_INVALID);            /* > handle */
    ck_assert_int_eq(be->map(s, base, PAGE, 0), CA_ERR_INVALID);                /* no handle */
    ck_assert_int_eq(be->map(s, base, PAGE, h + 100), CA_ERR_INVALID);          /* made up */
    ck_assert_int_eq(be->map(s, base, PAGE, h ^ (1ull << 40)), CA_ERR_INVALID); /* wrong gen */
    ck_assert_int_eq(be->map(s, base + 7 * PAGE, 2 * PAGE, h), CA_ERR_INVALID); /* runs past */
    ck_assert_int_eq(be->map(s, base - 2 * PAGE, 2 * PAGE, h), CA_ERR_INVALID); /* before */
    static char not_reserved[4 * PAGE] __attribute__((aligned(PAGE)));
    ck_assert_int_eq(be->map(s, (uintptr_t)not_reserved, PAGE, h2), CA_ERR_INVALID);
    not_reserved[0] = 1; /* still ours, untouched */
    ck_assert_int_eq(be->map(s, base + 2 * PAGE, 2 * PAGE, h), CA_OK);
    ck_assert_int_eq(be->map(s, base + 3 * PAGE, PAGE, h2), CA_ERR_INVALID); /* overlaps */
    ck_assert_int_eq(be->map(s, base + PAGE, 2 * PAGE, h), CA_ERR_INVALID);
    ck_assert_int_eq(be->map(s, base + 4 * PAGE, PAGE, h2), CA_OK);

    /* unmap: whole mappings only */
    ck_assert_int_eq(be->unmap(s, base + 3 * PAGE, PAGE), CA_ERR_INVALID); /* tail of one */
    ck_assert_int_eq(be->unmap(s, base + 2 * PAGE, PAGE), CA_ERR_INVALID); /* head of one */
    ck_assert_int_eq(be->unmap(s, base + PAGE, 2 * PAGE), CA_ERR_INVALID); /* not mapped */
    ck_assert_int_eq(be->unmap(s, base + 2 * PAGE, 4 * PAGE), CA_ERR_INVALID); /* runs on */
    ck_assert_int_eq(be->unmap(s, base, PAGE), CA_ERR_INVALID);
    ck_assert_int_eq(be->unmap(s, base + 2 * PAGE + 8, 2 * PAGE), CA_ERR_INVALID);
    ck_assert_int_eq(be->unmap(s, base + 2 * PAGE, 0), CA_ERR_INVALID);
    ck_assert_int_eq(be->unmap(s, (uintptr_t)not_reserved, PAGE), CA_ERR_INVALID);
    ck_assert_int_eq(not_reserved[0], 1);
    ((char *)base)[3 * PAGE] = 9; /* a refused call changed nothing */
    ck_assert_int_eq(((char *)base)[3 * PAGE], 9);

    /* unreserve: the exact range, nothing mapped */
    ck_assert_int_eq(be->unreserve(s, base, 8 * PAGE), CA_ERR_INVALID); /* mapped */
    ck_assert_int_eq(be->reserve(s, 4 * PAGE, &other), CA_OK);
    ck_assert_int_eq(be->unreserve(s, other, 2 * PAGE), CA_ERR_INVALID);
    ck_assert_int_eq(be->unreserve(s, other + PAGE, 3 * PAGE), CA_ERR_INVALID);
    ck_assert_int_eq(be->unreserve(s, (uintptr_t)not_reserved, PAGE), CA_ERR_INVALID);
    ck_assert_int_eq(be->unreserve(s, other, 4 * PAGE), CA_OK);
    ck_assert_int_eq(be->unreserve(s, other, 4 * PAGE), CA_ERR_INVALID); /* twice */

    /* Several whole mappings in one call are fine. */
    ck_assert_int_eq(be->unmap(s, base + 2 * PAGE, 3 * PAGE), CA_OK);
    ck_assert_int_eq(be->unmap(s, base + 2 * PAGE, 3 * PAGE), CA_ERR_INVALID); /* twice */

    /* release */
    ck_assert_int_eq(be->release(s, 0), CA_ERR_INVALID);
    ck_assert_int_eq(be->release(s, 0xdeadbeef), CA_ERR_INVALID);
    ck_assert_int_eq(be->release(s, h), CA_OK);
    ck_assert_int_eq(be->release(s, h), CA_ERR_INVALID);
    ck_assert_int_eq(be->create(s, PAGE, &x), CA_OK); /* may reuse h's slot ... */
    ck_assert_uint_ne(x, h);                          /* ... never its handle */
    ck_assert_int_eq(be->map(s, base, PAGE, h), CA_ERR_INVALID);
    ck_assert_int_eq(be->release(s, x), CA_OK);
    ck_assert_int_eq(be->release(s, h2), CA_OK);

    /* fixed */
    ck_assert_int_eq(be->fixed_alloc(s, 0, &f), CA_ERR_INVALID);
    ck_assert_int_eq(be->fixed_alloc(s, PAGE, NULL), CA_ERR_INVALID);
    ck_assert_int_eq(be->fixed_alloc(s, SIZE_MAX, &f), CA_ERR_INVALID);
    ck_assert_int_eq(be->fixed_alloc(s, 100, &f), CA_OK);
    ck_assert_int_eq(be->fixed_free(s, f + 8, 100), CA_ERR_INVALID);
    ck_assert_int_eq(be->fixed_free(s, (uintptr_t)not_reserved, 100), CA_ERR_INVALID);
    ck_assert_int_eq(be->fixed_free(s, f, 5000), CA_ERR_INVALID); /* wrong size */
    ck_assert_int_eq(be->fixed_free(s, f, 100), CA_OK);
    ck_assert_int_eq(be->fixed_free(s, f, 100), CA_ERR_INVALID); /* twice */
    ck_assert_uint_eq(ca_backend_used(be), 0);
    ck_assert_int_eq(be->unreserve(s, base, 8 * PAGE), CA_OK);
    be->destroy(be);
}
END_TEST

START_TEST(fixed_alloc_is_real_memory)
{
    ca_backend *be = host(64 * PAGE, PAGE);
    uintptr_t a, b;
    ck_assert_int_eq(be->fixed_alloc(be->self, 100, &a), CA_OK);
    ck_assert_int_eq(be->fixed_alloc(be->self, 3 * PAGE, &b), CA_OK);
    ck_assert_uint_eq(ca_backend_used(be), 4 * PAGE); /* whole granules, as a device */
    memset((void *)a, 1, 100);
    memset((void *)b, 2, 3 * PAGE);
    ck_assert_int_eq(((char *)a)[99], 1);
    ck_assert_int_eq(((char *)b)[3 * PAGE - 1], 2);
    ck_assert_int_eq(be->fixed_free(be->self, a, PAGE), CA_OK); /* the rounded size works too */
    ck_assert_uint_eq(ca_backend_used(be), 3 * PAGE);
    be->destroy(be); /* frees b */
}
END_TEST

/* Everything left behind goes with destroy: nothing in the address space. */
START_TEST(destroy_cleans_up)
{
    ca_backend *be = host(64 * PAGE, PAGE);
    uintptr_t base;
    ca_handle h;
    ck_assert_int_eq(be->reserve(be->self, 4 * PAGE, &base), CA_OK);
    ck_assert_int_eq(be->create(be->self, PAGE, &h), CA_OK);
    ck_assert_int_eq(be->map(be->self, base, PAGE, h), CA_OK);
    be->destroy(be);
    char p[5];
    perms_at(base, p);
    ck_assert_str_eq(p, "");
}
END_TEST

typedef struct worker {
    ca_backend *be;
    int failures;
} worker;

static void *churn(void *arg)
{
    worker *w = arg;
    void *s = w->be->self;
    uintptr_t base;
    if (w->be->reserve(s, 8 * PAGE, &base) != CA_OK) {
        w->failures++;
        return NULL;
    }
    for (int i = 0; i < 2000; i++) {
        ca_handle h;
        size_t n = 1 + (size_t)i % 4;
        int rc = w->be->create(s, n * PAGE, &h);
        if (rc == CA_ERR_OOM) continue; /* the others hold it for now */
        if (rc != CA_OK || w->be->map(s, base, n * PAGE, h) != CA_OK) {
            w->failures++;
            continue;
        }
        ((volatile int *)base)[0] = i;
        if (((volatile int *)base)[0] != i) w->failures++;
        if (w->be->unmap(s, base, n * PAGE) != CA_OK || w->be->release(s, h) != CA_OK)
            w->failures++;
    }
    if (w->be->unreserve(s, base, 8 * PAGE) != CA_OK) w->failures++;
    return NULL;
}

START_TEST(threads_share_one_backend)
{
    ca_backend *be = host(12 * PAGE, PAGE);
    enum { T = 4 };
    pthread_t t[T];
    worker w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (worker){be, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn, &w[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(w[i].failures, 0);
    }
    ck_assert_uint_eq(ca_backend_used(be), 0);
    ck_assert_int_eq(memfd_bytes(), 0);
    be->destroy(be);
}
END_TEST

/* A backend that is neither host nor count: used is what its device says. */
static int fake_mem_info(void *self, size_t *f, size_t *t)
{
    *f = 30;
    *t = 100;
    return CA_OK;
}

START_TEST(used_of_other_backends)
{
    ca_backend other = {.name = "cuda", .mem_info = fake_mem_info};
    ck_assert_uint_eq(ca_backend_used(&other), 70);
    ca_backend none = {.name = "host"}; /* a name alone does not make it ours */
    ck_assert_uint_eq(ca_backend_used(&none), 0);
    ck_assert_uint_eq(ca_backend_used(NULL), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend_host");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, new_validates);
    tcase_add_test(tc, reserve_is_aligned_and_inaccessible);
    tcase_add_test(tc, map_write_read_unmap);
    tcase_add_test(tc, second_mapping_sees_the_same_memory);
    tcase_add_test(tc, release_gives_pages_back);
    tcase_add_test(tc, release_while_mapped_waits_for_unmap);
    tcase_add_test(tc, capacity_exhaustion_is_oom);
    tcase_add_test(tc, fragmented_memfd_still_creates);
    tcase_add_test(tc, one_memfd_whatever_the_granules);
    tcase_add_test(tc, bad_arguments_are_refused);
    tcase_add_test(tc, fixed_alloc_is_real_memory);
    tcase_add_test(tc, destroy_cleans_up);
    tcase_add_test(tc, threads_share_one_backend);
    tcase_add_test(tc, used_of_other_backends);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
