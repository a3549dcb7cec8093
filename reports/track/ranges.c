/* The mapped-range table: segments as their allocator made them. See
 * ranges.h. */
#include "reports/track/ranges.h"

#include <stdlib.h>
#include <string.h>

ca_range_kind ca_range_kind_default(void) { return (ca_range_kind){.expandable = -1}; }

/* Room for `extra` more ranges. */
static int reserve(ca_range_set *s, size_t extra) {
    if (s->n + extra <= s->cap) return 0;
    size_t cap = s->cap ? s->cap : 16;
    while (cap < s->n + extra) cap *= 2;
    ca_range *v = realloc(s->v, cap * sizeof *v);
    if (!v) return -1;
    s->v = v;
    s->cap = cap;
    return 0;
}

/* The first range that ends after addr. */
static size_t first_ending_after(const ca_range_set *s, uintptr_t addr) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->v[mid].addr + s->v[mid].size <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void remove_at(ca_range_set *s, size_t i) {
    memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof *s->v);
    s->n--;
}

/* Cuts [lo, hi) out; needs room for one more range (a split). */
static void cut(ca_range_set *s, uintptr_t lo, uintptr_t hi) {
    for (size_t i = first_ending_after(s, lo); i < s->n && s->v[i].addr < hi;) {
        ca_range *r = &s->v[i];
        uintptr_t end = r->addr + r->size;
        if (r->addr < lo && end > hi) { /* the middle goes: split in two */
            memmove(r + 2, r + 1, (s->n - i - 1) * sizeof *r);
            r[1] = *r;
            r[1].addr = hi;
            r[1].size = end - hi;
            r->size = lo - r->addr;
            s->n++;
            return;
        }
        if (r->addr < lo) {
            r->size = lo - r->addr;
            i++;
        } else if (end > hi) {
            r->size = end - hi;
            r->addr = hi;
            return;
        } else {
            remove_at(s, i);
        }
    }
}

static int pools_agree(const ca_range_kind *a, const ca_range_kind *b) {
    return (a->pool == b->pool || !a->pool || !b->pool) &&
           (a->expandable == b->expandable || a->expandable < 0 || b->expandable < 0) &&
           a->pool_id[0] == b->pool_id[0] && a->pool_id[1] == b->pool_id[1];
}

/* Joins s->v[i + 1] into s->v[i] when they may be one range. */
static void join_next(ca_range_set *s, size_t i) {
    if (i + 1 >= s->n) return;
    ca_range *a = &s->v[i], *b = &s->v[i + 1];
    if (a->kind.whole || b->kind.whole || a->stream != b->stream || a->addr + a->size != b->addr ||
        !pools_agree(&a->kind, &b->kind))
        return;
    a->size += b->size;
    if (!a->kind.pool) a->kind.pool = b->kind.pool;
    if (a->kind.expandable < 0) a->kind.expandable = b->kind.expandable;
    remove_at(s, i + 1);
}

/* Bytes from addr that stay below the top of the address space. */
static uint64_t clamp(uintptr_t addr, uint64_t size) { return size > UINTPTR_MAX - addr ? UINTPTR_MAX - addr : size; }

int ca_ranges_map(ca_range_set *s, const ca_range *r) {
    ca_range add = *r;
    add.size = clamp(add.addr, add.size);
    if (!add.size) return 0;
    if (reserve(s, 2)) return -1;
    cut(s, add.addr, add.addr + add.size);
    size_t i = first_ending_after(s, add.addr);
    memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof *s->v);
    s->v[i] = add;
    s->n++;
    join_next(s, i);
    if (i > 0) join_next(s, i - 1);
    return 0;
}

int ca_ranges_unmap(ca_range_set *s, uintptr_t addr, uint64_t size, int whole) {
    size_t i = first_ending_after(s, addr);
    if (whole && i < s->n && s->v[i].addr == addr && s->v[i].kind.whole) {
        remove_at(s, i);
        return 0;
    }
    size = clamp(addr, size);
    if (!size) return 0;
    if (reserve(s, 1)) return -1;
    cut(s, addr, addr + size);
    return 0;
}

void ca_ranges_free(ca_range_set *s) {
    free(s->v);
    memset(s, 0, sizeof *s);
}
