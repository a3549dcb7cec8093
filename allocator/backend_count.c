/* The count backend: addresses and accounting, no memory. Trace replay runs on
 * it, so every call is a few dozen instructions under an uncontended spin lock:
 * addresses come from a counter, handles index a table, nothing is mapped.
 * It checks what it can check cheaply (alignment, sizes, live handles, fixed
 * addresses it gave out) and nothing that would need a search (it does not
 * know which ranges are reserved or mapped). */
#include <stdlib.h>

/* Out of memory inside uthash must not exit the host program. */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(e) (hash_oom = 1)
#include "backend_common.h"
#include "lock.h"

/* Fake addresses start here (far from anything a test might dereference) and
 * each range is followed by an unused gap, so an overrun never lands in the
 * next range. */
#define COUNT_BASE 0x100000000000ull
#define COUNT_GAP (64ull << 20)

typedef struct count {
    ca_acct acct; /* first: ca_backend_used reads it */
    ca_lock lock;
    size_t granule;
    uint64_t next;  /* next fake address */
    ca_htable handles;
    ca_fixed *fixed; /* uthash by address */
} count;

/* A fresh granule-aligned range of `size` bytes; 0 when the 64-bit space ran out. */
static uint64_t take_addr(count *c, size_t size)
{
    uint64_t gap = ca_round_up(COUNT_GAP, c->granule);
    uint64_t b = c->next;
    if (b == 0 || size > UINT64_MAX - b || gap > UINT64_MAX - b - size) return 0;
    c->next = b + size + gap;
    return b;
}

static int c_reserve(void *self, size_t size, uintptr_t *base)
{
    count *c = self;
    if (!base || !ca_size_ok(size, c->granule)) return CA_ERR_INVALID;
    ca_lock_acquire(&c->lock);
    uint64_t b = take_addr(c, size);
    ca_lock_release(&c->lock);
    if (!b) return CA_ERR_OOM; /* as cuMemAddressReserve: out of address space */
    *base = (uintptr_t)b;
    return CA_OK;
}

static int c_unreserve(void *self, uintptr_t base, size_t size)
{
    count *c = self;
    return base && ca_is_aligned(base, c->granule) && ca_size_ok(size, c->granule)
               ? CA_OK
               : CA_ERR_INVALID;
}

static int c_create(void *self, size_t size, ca_handle *h)
{
    count *c = self;
    if (!h || !ca_size_ok(size, c->granule)) return CA_ERR_INVALID;
    int rc = CA_ERR_OOM;
    ca_lock_acquire(&c->lock);
    if (ca_acct_fits(&c->acct, size)) {
        rc = ca_htable_add(&c->handles, size, h) ? CA_OK : CA_ERR_BACKEND;
        if (rc == CA_OK) ca_acct_add(&c->acct, size);
    }
    ca_lock_release(&c->lock);
    return rc;
}

static int c_release(void *self, ca_handle h)
{
    count *c = self;
    int rc = CA_ERR_INVALID;
    ca_lock_acquire(&c->lock);
    ca_hslot *s = ca_htable_get(&c->handles, h);
    if (s) {
        ca_acct_sub(&c->acct, s->size);
        ca_htable_del(&c->handles, ca_htable_index(h));
        rc = CA_OK;
    }
    ca_lock_release(&c->lock);
    return rc;
}

static int c_map(void *self, uintptr_t addr, size_t size, ca_handle h)
{
    count *c = self;
    if (!addr || !ca_is_aligned(addr, c->granule) || !ca_size_ok(size, c->granule))
        return CA_ERR_INVALID;
    ca_lock_acquire(&c->lock);
    ca_hslot *s = ca_htable_get(&c->handles, h);
    int rc = s && size <= s->size ? CA_OK : CA_ERR_INVALID;
    ca_lock_release(&c->lock);
    return rc;
}

static int c_unmap(void *self, uintptr_t addr, size_t size)
{
    count *c = self;
    return addr && ca_is_aligned(addr, c->granule) && ca_size_ok(size, c->granule)
               ? CA_OK
               : CA_ERR_INVALID;
}

static int c_fixed_alloc(void *self, size_t size, uintptr_t *addr)
{
    count *c = self;
    if (!addr || size == 0 || size > SIZE_MAX - c->granule) return CA_ERR_INVALID;
    size_t charge = ca_round_up(size, c->granule);
    ca_fixed *f = malloc(sizeof *f);
    if (!f) return CA_ERR_BACKEND;
    int rc = CA_ERR_OOM;
    ca_lock_acquire(&c->lock);
    uint64_t b = ca_acct_fits(&c->acct, charge) ? take_addr(c, charge) : 0;
    if (b) {
        int hash_oom = 0;
        *f = (ca_fixed){.addr = (uintptr_t)b, .size = size, .charge = charge};
        HASH_ADD(hh, c->fixed, addr, sizeof f->addr, f);
        if (hash_oom) {
            rc = CA_ERR_BACKEND;
        } else {
            ca_acct_add(&c->acct, charge);
            *addr = (uintptr_t)b;
            f = NULL;
            rc = CA_OK;
        }
    }
    ca_lock_release(&c->lock);
    free(f);
    return rc;
}

static int c_fixed_free(void *self, uintptr_t addr, size_t size)
{
    count *c = self;
    ca_fixed *f;
    int rc = CA_ERR_INVALID;
    ca_lock_acquire(&c->lock);
    HASH_FIND(hh, c->fixed, &addr, sizeof addr, f);
    if (f && (size == f->size || size == f->charge)) {
        HASH_DEL(c->fixed, f);
        ca_acct_sub(&c->acct, f->charge);
        free(f);
        rc = CA_OK;
    }
    ca_lock_release(&c->lock);
    return rc;
}

static int c_mem_info(void *self, size_t *free_bytes, size_t *total_bytes)
{
    count *c = self;
    size_t used = ca_acct_used(&c->acct);
    if (free_bytes) *free_bytes = c->acct.capacity - used;
    if (total_bytes) *total_bytes = c->acct.capacity;
    return CA_OK;
}

static void c_destroy(ca_backend *be)
{
    if (!be) return;
    count *c = be->self;
    ca_fixed *f, *tmp;
    HASH_ITER(hh, c->fixed, f, tmp) {
        HASH_DEL(c->fixed, f);
        free(f);
    }
    ca_htable_fini(&c->handles);
    free(c);
    free(be);
}

ca_backend *ca_backend_count_new(size_t capacity, size_t granule)
{
    if (granule == 0 || (granule & (granule - 1))) return NULL;
    /* 0 means unlimited (replay measures the peak); else whole granules. */
    capacity = capacity ? capacity & ~(granule - 1) : SIZE_MAX;
    if (capacity == 0) return NULL;
    ca_backend *be = calloc(1, sizeof *be);
    count *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return NULL;
    }
    c->acct.capacity = capacity;
    atomic_init(&c->acct.used, 0);
    ca_lock_init(&c->lock);
    c->granule = granule;
    c->next = ca_round_up(COUNT_BASE, granule);
    *be = (ca_backend){
        .name = ca_backend_count_name,
        .self = c,
        .granule = granule,
        .reserve = c_reserve,
        .unreserve = c_unreserve,
        .create = c_create,
        .release = c_release,
        .map = c_map,
        .unmap = c_unmap,
        .fixed_alloc = c_fixed_alloc,
        .fixed_free = c_fixed_free,
        .mem_info = c_mem_info,
        .destroy = c_destroy,
    };
    return be;
}
