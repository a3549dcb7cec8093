/* The host backend: real memory that behaves like CUDA's virtual memory API.
 *
 * - reserve: mmap(PROT_NONE, MAP_NORESERVE), aligned to the granule.
 * - create: granules of ONE memfd (ftruncate'd to the capacity), handed out as
 *   offsets; a bitmap over its granules says which are taken. A handle is one
 *   contiguous piece when first fit finds one, else several pieces (so a
 *   fragmented memfd never makes create fail while capacity remains).
 * - map: mmap(MAP_SHARED|MAP_FIXED) of the handle's pieces into a reservation;
 *   unmap puts PROT_NONE anonymous memory back, so the reservation stays.
 * - release: fallocate(PUNCH_HOLE) gives the pages back to the OS. As with
 *   cuMemRelease, a handle released while still mapped is freed at its last
 *   unmap.
 * - fixed_alloc: plain anonymous mmap, counted against the same capacity.
 *
 * CUDA's rules are enforced so allocator bugs show up here rather than on a
 * GPU: map only into a reserved, unmapped range; unmap only whole mappings
 * (cuMemUnmap cannot unmap part of one); unreserve only a whole, unmapped
 * reservation. Every refusal is CA_ERR_INVALID with nothing changed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Out of memory inside uthash must not exit the host program. */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(e) (hash_oom = 1)
#include "backend_common.h"

#define MAP_START 0x80000000u /* in resv.gran: this granule begins a mapping */

/* A reservation and, per granule, what is mapped there: 0 nothing, else the
 * handle table index + 1, with MAP_START on a mapping's first granule. */
typedef struct resv {
    uintptr_t base;
    size_t size;
    uint32_t *gran;
} resv;

typedef struct host {
    ca_acct acct; /* first: ca_backend_used reads it */
    pthread_mutex_t lock;
    size_t granule;
    int fd;            /* the one memfd */
    size_t n_gran;     /* granules in the memfd */
    uint64_t *taken;   /* bitmap over them */
    ca_htable handles;
    resv *resv;
    size_t n_resv, cap_resv;
    ca_fixed *fixed;   /* uthash by address */
} host;

/* ---- the memfd's granule bitmap ---- */

static int bit_get(const uint64_t *b, size_t i) { return (b[i >> 6] >> (i & 63)) & 1; }

static void bits_set(uint64_t *b, size_t i, size_t n, int on)
{
    for (size_t k = i; k < i + n; k++) {
        if (on) b[k >> 6] |= 1ull << (k & 63);
        else b[k >> 6] &= ~(1ull << (k & 63));
    }
}

/* First fit from granule `from`: the first run of `want` free granules, or the
 * longest run seen when none is long enough (*len says how long). O(granules),
 * 64 at a time over full or empty words. Returns the run's start, or SIZE_MAX
 * when every granule from `from` on is taken. */
static size_t find_run(const uint64_t *b, size_t from, size_t n, size_t want, size_t *len)
{
    size_t run = 0, start = 0, best = SIZE_MAX, best_len = 0;
    for (size_t i = from; i < n;) {
        if ((i & 63) == 0 && i + 64 <= n && (b[i >> 6] == ~0ull || b[i >> 6] == 0)) {
            if (b[i >> 6]) {
                run = 0;
            } else {
                if (!run) start = i;
                run += 64;
            }
            i += 64;
        } else {
            if (bit_get(b, i)) {
                run = 0;
            } else {
                if (!run) start = i;
                run++;
            }
            i++;
        }
        if (run > best_len) best = start, best_len = run;
        if (run >= want) break;
    }
    *len = best_len < want ? best_len : want;
    return best;
}

/* Take `size` bytes of the memfd for slot s: one piece if possible, else as
 * many first-fit pieces as it takes (the caller checked the capacity). */
static int take_pieces(host *h, ca_hslot *s, size_t size)
{
    size_t want = size / h->granule, len;
    size_t at = find_run(h->taken, 0, h->n_gran, want, &len);
    if (at != SIZE_MAX && len == want) {
        bits_set(h->taken, at, want, 1);
        s->one = (ca_extent){at * h->granule, size};
        s->n_ext = 1;
        return CA_OK;
    }
    /* No run is long enough: gather pieces in one pass over the bitmap. */
    size_t cap = 8, n = 0, from = 0;
    ca_extent *ext = malloc(cap * sizeof *ext);
    if (!ext) return CA_ERR_BACKEND;
    while (want) {
        at = find_run(h->taken, from, h->n_gran, 1, &len);
        if (at == SIZE_MAX) break; /* cannot happen: the capacity was checked */
        while (at + len < h->n_gran && len < want && !bit_get(h->taken, at + len)) len++;
        if (n == cap) {
            ca_extent *e = realloc(ext, 2 * cap * sizeof *ext);
            if (!e) break;
            ext = e, cap *= 2;
        }
        bits_set(h->taken, at, len, 1);
        ext[n++] = (ca_extent){at * h->granule, len * h->granule};
        want -= len;
        from = at + len;
    }
    if (want) {
        for (size_t k = 0; k < n; k++)
            bits_set(h->taken, ext[k].off / h->granule, ext[k].len / h->granule, 0);
        free(ext);
        return CA_ERR_BACKEND;
    }
    s->ext = ext;
    s->n_ext = (uint32_t)n;
    return CA_OK;
}

static const ca_extent *pieces(const ca_hslot *s) { return s->n_ext == 1 ? &s->one : s->ext; }

/* Punch the pages out and give the offsets back; the slot is forgotten. */
static void free_slot(host *h, uint32_t idx)
{
    ca_hslot *s = &h->handles.slot[idx];
    const ca_extent *e = pieces(s);
    for (uint32_t k = 0; k < s->n_ext; k++) {
        /* Cannot fail on a memfd; if it did, the pages would merely stay. */
        (void)fallocate(h->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)e[k].off,
                        (off_t)e[k].len);
        bits_set(h->taken, e[k].off / h->granule, e[k].len / h->granule, 0);
    }
    ca_acct_sub(&h->acct, s->size);
    ca_htable_del(&h->handles, idx);
}

/* ---- reservations ---- */

/* The reservation that holds [addr, addr + size) entirely, or NULL. */
static resv *find_resv(host *h, uintptr_t addr, size_t size)
{
    for (size_t i = 0; i < h->n_resv; i++) {
        resv *r = &h->resv[i];
        if (addr >= r->base && addr - r->base <= r->size && size <= r->size - (addr - r->base))
            return r;
    }
    return NULL;
}

static int guard_none(void *addr, size_t size)
{
    void *p = mmap(addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? CA_ERR_BACKEND : CA_OK;
}

static int h_reserve(void *self, size_t size, uintptr_t *base)
{
    host *h = self;
    if (!base || !ca_size_ok(size, h->granule) || size > SIZE_MAX - h->granule)
        return CA_ERR_INVALID;
    /* Over-reserve by a granule and trim, so the base is granule-aligned. */
    size_t span = size + h->granule;
    char *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return errno == ENOMEM ? CA_ERR_OOM : CA_ERR_BACKEND;
    uintptr_t b = ca_round_up((uintptr_t)p, h->granule);
    if (b > (uintptr_t)p) munmap(p, b - (uintptr_t)p);
    if ((uintptr_t)p + span > b + size) munmap((void *)(b + size), (uintptr_t)p + span - b - size);

    uint32_t *gran = calloc(size / h->granule, sizeof *gran);
    pthread_mutex_lock(&h->lock);
    if (gran && h->n_resv == h->cap_resv) {
        size_t cap = h->cap_resv ? 2 * h->cap_resv : 16;
        resv *r = realloc(h->resv, cap * sizeof *r);
        if (r) h->resv = r, h->cap_resv = cap;
    }
    if (!gran || h->n_resv == h->cap_resv) {
        pthread_mutex_unlock(&h->lock);
        free(gran);
        munmap((void *)b, size);
        return CA_ERR_BACKEND;
    }
    h->resv[h->n_resv++] = (resv){b, size, gran};
    pthread_mutex_unlock(&h->lock);
    *base = b;
    return CA_OK;
}

static int h_unreserve(void *self, uintptr_t base, size_t size)
{
    host *h = self;
    int rc = CA_ERR_INVALID;
    pthread_mutex_lock(&h->lock);
    resv *r = find_resv(h, base, size);
    if (r && r->base == base && r->size == size) {
        size_t n = size / h->granule, i = 0;
        while (i < n && !r->gran[i]) i++;
        if (i == n) { /* nothing mapped: CUDA wants mappings gone first */
            munmap((void *)base, size);
            free(r->gran);
            *r = h->resv[--h->n_resv];
            rc = CA_OK;
        }
    }
    pthread_mutex_unlock(&h->lock);
    return rc;
}

/* ---- physical memory ---- */

static int h_create(void *self, size_t size, ca_handle *hd)
{
    host *h = self;
    if (!hd || !ca_size_ok(size, h->granule)) return CA_ERR_INVALID;
    pthread_mutex_lock(&h->lock);
    int rc = CA_ERR_OOM;
    if (ca_acct_fits(&h->acct, size)) {
        ca_handle id;
        ca_hslot *s = ca_htable_add(&h->handles, size, &id);
        rc = CA_ERR_BACKEND;
        if (s && (rc = take_pieces(h, s, size)) == CA_OK) {
            ca_acct_add(&h->acct, size);
            *hd = id;
        } else if (s) {
            ca_htable_del(&h->handles, ca_htable_index(id));
        }
    }
    pthread_mutex_unlock(&h->lock);
    return rc;
}

static int h_release(void *self, ca_handle hd)
{
    host *h = self;
    int rc = CA_ERR_INVALID;
    pthread_mutex_lock(&h->lock);
    ca_hslot *s = ca_htable_get(&h->handles, hd);
    if (s && !s->released) {
        if (s->maps) s->released = 1; /* freed at its last unmap */
        else free_slot(h, ca_htable_index(hd));
        rc = CA_OK;
    }
    pthread_mutex_unlock(&h->lock);
    return rc;
}

static int h_map(void *self, uintptr_t addr, size_t size, ca_handle hd)
{
    host *h = self;
    if (!ca_size_ok(size, h->granule) || !ca_is_aligned(addr, h->granule)) return CA_ERR_INVALID;
    int rc = CA_ERR_INVALID;
    pthread_mutex_lock(&h->lock);
    ca_hslot *s = ca_htable_get(&h->handles, hd);
    resv *r = find_resv(h, addr, size);
    if (!s || s->released || size > s->size || !r) goto out;
    size_t g0 = (addr - r->base) / h->granule, ng = size / h->granule;
    for (size_t i = 0; i < ng; i++)
        if (r->gran[g0 + i]) goto out; /* already mapped: cuMemMap refuses too */

    /* The handle's pieces, in order, until `size` bytes are mapped. */
    const ca_extent *e = pieces(s);
    size_t done = 0;
    for (uint32_t k = 0; k < s->n_ext && done < size; k++) {
        size_t len = e[k].len < size - done ? e[k].len : size - done;
        void *p = mmap((void *)(addr + done), len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                       h->fd, (off_t)e[k].off);
        if (p == MAP_FAILED) {
            /* A failed MAP_FIXED may leave a hole: restore the whole range. */
            guard_none((void *)addr, size);
            rc = CA_ERR_BACKEND;
            goto out;
        }
        done += len;
    }
    uint32_t idx = ca_htable_index(hd) + 1;
    r->gran[g0] = idx | MAP_START;
    for (size_t i = 1; i < ng; i++) r->gran[g0 + i] = idx;
    s->maps++;
    rc = CA_OK;
out:
    pthread_mutex_unlock(&h->lock);
    return rc;
}

static int h_unmap(void *self, uintptr_t addr, size_t size)
{
    host *h = self;
    if (!ca_size_ok(size, h->granule) || !ca_is_aligned(addr, h->granule)) return CA_ERR_INVALID;
    int rc = CA_ERR_INVALID;
    pthread_mutex_lock(&h->lock);
    resv *r = find_resv(h, addr, size);
    if (!r) goto out;
    size_t g0 = (addr - r->base) / h->granule, ng = size / h->granule, nr = r->size / h->granule;
    /* Whole mappings only: starts at a mapping's start, everything inside is
     * mapped, and the granule after the range does not continue a mapping. */
    if (!(r->gran[g0] & MAP_START)) goto out;
    for (size_t i = 1; i < ng; i++)
        if (!r->gran[g0 + i]) goto out;
    if (g0 + ng < nr && r->gran[g0 + ng] && !(r->gran[g0 + ng] & MAP_START)) goto out;

    if ((rc = guard_none((void *)addr, size)) != CA_OK) goto out;
    for (size_t i = 0; i < ng; i++) {
        uint32_t v = r->gran[g0 + i];
        r->gran[g0 + i] = 0;
        if (!(v & MAP_START)) continue;
        uint32_t idx = (v & ~MAP_START) - 1;
        ca_hslot *s = &h->handles.slot[idx];
        if (--s->maps == 0 && s->released) free_slot(h, idx);
    }
out:
    pthread_mutex_unlock(&h->lock);
    return rc;
}

/* ---- classic segments ---- */

static int h_fixed_alloc(void *self, size_t size, uintptr_t *addr)
{
    host *h = self;
    if (!addr || size == 0 || size > SIZE_MAX - h->granule) return CA_ERR_INVALID;
    size_t charge = ca_round_up(size, h->granule); /* devices hand out whole granules */
    ca_fixed *f = malloc(sizeof *f);
    if (!f) return CA_ERR_BACKEND;
    pthread_mutex_lock(&h->lock);
    int rc = CA_ERR_OOM;
    if (ca_acct_fits(&h->acct, charge)) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        rc = p == MAP_FAILED ? CA_ERR_OOM : CA_OK;
        if (rc == CA_OK) {
            int hash_oom = 0;
            *f = (ca_fixed){.addr = (uintptr_t)p, .size = size, .charge = charge};
            HASH_ADD(hh, h->fixed, addr, sizeof f->addr, f);
            if (hash_oom) {
                munmap(p, size);
                rc = CA_ERR_BACKEND;
            } else {
                ca_acct_add(&h->acct, charge);
                *addr = (uintptr_t)p;
                f = NULL;
            }
        }
    }
    pthread_mutex_unlock(&h->lock);
    free(f);
    return rc;
}

static int h_fixed_free(void *self, uintptr_t addr, size_t size)
{
    host *h = self;
    ca_fixed *f;
    int rc = CA_ERR_INVALID;
    pthread_mutex_lock(&h->lock);
    HASH_FIND(hh, h->fixed, &addr, sizeof addr, f);
    /* The size as asked or as rounded: either names the same allocation. */
    if (f && (size == f->size || size == f->charge)) {
        HASH_DEL(h->fixed, f);
        munmap((void *)f->addr, f->size);
        ca_acct_sub(&h->acct, f->charge);
        free(f);
        rc = CA_OK;
    }
    pthread_mutex_unlock(&h->lock);
    return rc;
}

static int h_mem_info(void *self, size_t *free_bytes, size_t *total_bytes)
{
    host *h = self;
    size_t used = ca_acct_used(&h->acct);
    if (free_bytes) *free_bytes = h->acct.capacity - used;
    if (total_bytes) *total_bytes = h->acct.capacity;
    return CA_OK;
}

static void h_destroy(ca_backend *be)
{
    if (!be) return;
    host *h = be->self;
    for (size_t i = 0; i < h->n_resv; i++) {
        munmap((void *)h->resv[i].base, h->resv[i].size);
        free(h->resv[i].gran);
    }
    ca_fixed *f, *tmp;
    HASH_ITER(hh, h->fixed, f, tmp) {
        HASH_DEL(h->fixed, f);
        munmap((void *)f->addr, f->size);
        free(f);
    }
    close(h->fd);
    ca_htable_fini(&h->handles);
    free(h->resv);
    free(h->taken);
    pthread_mutex_destroy(&h->lock);
    free(h);
    free(be);
}

ca_backend *ca_backend_host_new(size_t capacity, size_t granule)
{
    long page = sysconf(_SC_PAGESIZE);
    /* mmap offsets need whole pages; a granule is a power of two. */
    if (granule == 0 || (granule & (granule - 1)) || granule % (size_t)page) return NULL;
    capacity &= ~(granule - 1);
    if (capacity == 0 || capacity > (size_t)INT64_MAX) return NULL;

    ca_backend *be = calloc(1, sizeof *be);
    host *h = calloc(1, sizeof *h);
    size_t n_gran = capacity / granule;
    uint64_t *taken = calloc((n_gran + 63) / 64, sizeof *taken);
    int fd = memfd_create("cudalloc-host", MFD_CLOEXEC);
    if (!be || !h || !taken || fd < 0 || ftruncate(fd, (off_t)capacity) != 0) {
        if (fd >= 0) close(fd);
        free(taken);
        free(h);
        free(be);
        return NULL;
    }
    h->acct.capacity = capacity;
    atomic_init(&h->acct.used, 0);
    pthread_mutex_init(&h->lock, NULL);
    h->granule = granule;
    h->fd = fd;
    h->n_gran = n_gran;
    h->taken = taken;

    *be = (ca_backend){
        .name = ca_backend_host_name,
        .self = h,
        .granule = granule,
        .reserve = h_reserve,
        .unreserve = h_unreserve,
        .create = h_create,
        .release = h_release,
        .map = h_map,
        .unmap = h_unmap,
        .fixed_alloc = h_fixed_alloc,
        .fixed_free = h_fixed_free,
        .mem_info = h_mem_info,
        .destroy = h_destroy,
    };
    return be;
}
