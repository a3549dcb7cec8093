/* Expandable segments: a virtual range per pool (a larger one once it
 * outgrows it: ranges.c), physical granules mapped on demand. Free blocks may have unmapped granules inside them; an
 * allocated block always has all of its granules mapped. Because any request
 * can be placed at the end of the range, physical memory given back from free
 * blocks anywhere serves it: fragmentation costs at most the partly used
 * granules at the edges of live blocks.
 *
 * Reserved memory follows need. A request that lands on unmapped granules
 * first takes idle mapped granules lying wholly inside free blocks of its
 * pool, unmaps them there and maps their handles where it needs them (the
 * range is virtual: a granule's physical memory can sit anywhere); only the
 * rest is created (unless the pool holds no more than it needed lately:
 * within_need). And every release_after allocations, the granules the pool
 * did not need over that time go back to the device (ca_exp_sweep). Only idle
 * granules are moved or given back (granule_idle): memory that queued device
 * work may still touch is never unmapped without a sync, and nothing on the
 * allocation path syncs. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "util/checked.h"

/* Room in seg's bitmap of free edges for `cap` granules: a bit per CA_ROUND
 * bytes, in whole words. */
static int grow_edges(ca_segment *seg, size_t cap) {
    size_t words = ((cap << seg->gshift) / CA_ROUND + 63) / 64, old = seg->free_edges_words;
    if (words <= old) return CA_OK;
    uint64_t *edges = realloc(seg->free_edges, words * sizeof *edges);
    if (!edges) return CA_ERR_OOM;
    memset(edges + old, 0, (words - old) * sizeof *edges);
    seg->free_edges = edges;
    seg->free_edges_words = words;
    return CA_OK;
}

/* From now on the heap's ranges keep bitmaps of free edges (ca_segment):
 * each is made and filled from the blocks in the index. Left off when that
 * memory cannot be had: the merges then read the neighbours, as before. */
void ca_exp_edges_start(ca_heap *h) {
    h->edge_bits = true;
    h->edges_from = SIZE_MAX;
    for (ca_segment *seg = h->segments; seg; seg = seg->next) {
        if (grow_edges(seg, seg->handles_cap) != CA_OK) {
            ca_exp_edges_stop(h);
            return;
        }
        for (ca_block *b = seg->first; b; b = b->next)
            if (b->bin >= 0) ca_edges_mark(seg, b, true);
    }
}

void ca_exp_edges_stop(ca_heap *h) {
    h->edge_bits = false;
    /* not again before the pool holds twice as much: a start walks every block */
    size_t live = h->pool->live.count;
    h->edges_from = live < CA_EDGES_FROM ? 2 * CA_EDGES_FROM : 2 * live;
    for (ca_segment *seg = h->segments; seg; seg = seg->next) {
        free(seg->free_edges);
        seg->free_edges = NULL;
        seg->free_edges_words = 0;
    }
}

/* Room for new_n granule handles (and their bits); the arrays grow
 * geometrically. new_n is at most the reserve's granules, so neither doubling
 * nor the byte count wraps. */
static int grow_handles(ca_allocator *a, ca_segment *seg, size_t new_n) {
    if (new_n <= seg->handles_cap) return CA_OK;
    size_t cap = seg->handles_cap ? seg->handles_cap : 64; /* a multiple of 64 */
    while (cap < new_n) cap *= 2;
    size_t bytes;
    if (!ca_size_mul(cap, sizeof(ca_handle), &bytes)) return CA_ERR_OOM;
    ca_handle *h = realloc(seg->handles, bytes);
    if (!h) return CA_ERR_OOM;
    memset(h + seg->handles_cap, 0, (cap - seg->handles_cap) * sizeof *h);
    seg->handles = h;
    uint64_t *bits = realloc(seg->mapped_bits, cap / 64 * sizeof *bits);
    if (!bits) return CA_ERR_OOM; /* handles grew, cap did not: harmless */
    memset(bits + seg->handles_cap / 64, 0, (cap - seg->handles_cap) / 64 * sizeof *bits);
    seg->mapped_bits = bits;
    ca_block **starts = realloc(seg->first_start, cap * sizeof *starts);
    if (!starts) return CA_ERR_OOM;
    memset(starts + seg->handles_cap, 0, (cap - seg->handles_cap) * sizeof *starts);
    seg->first_start = starts;
    if (seg->heap->edge_bits && grow_edges(seg, cap) != CA_OK) ca_exp_edges_stop(seg->heap);
    if (a->async) {
        uint64_t *busy = realloc(seg->busy, cap * sizeof *busy);
        if (!busy) return CA_ERR_OOM;
        memset(busy + seg->handles_cap, 0, (cap - seg->handles_cap) * sizeof *busy);
        seg->busy = busy;
    }
    seg->handles_cap = cap;
    return CA_OK;
}

/* ---- which granules are mapped: 64 at a time ---- */

/* The first granule in [from, to) whose mapped bit equals `want`; `to` if none.
 * *words counts the words read (the search's cost). */
static size_t find_bit(const ca_segment *seg, size_t from, size_t to, bool want, size_t *words) {
    while (from < to) {
        uint64_t w = seg->mapped_bits[from / 64];
        if (!want) w = ~w;
        w &= ~0ull << (from % 64);
        (*words)++;
        if (w) {
            size_t i = from / 64 * 64 + (size_t)__builtin_ctzll(w);
            return i < to ? i : to;
        }
        from = from / 64 * 64 + 64;
    }
    return to;
}

static size_t next_mapped(const ca_segment *seg, size_t from, size_t to) {
    size_t words = 0;
    return find_bit(seg, from, to, true, &words);
}

static size_t next_unmapped(const ca_segment *seg, size_t from, size_t to) {
    size_t words = 0;
    return find_bit(seg, from, to, false, &words);
}

static size_t count_mapped(const ca_segment *seg, size_t from, size_t to) {
    size_t n = 0;
    for (size_t w = from / 64; w * 64 < to; w++) {
        uint64_t bits = seg->mapped_bits[w];
        if (w == from / 64) bits &= ~0ull << (from % 64);
        if ((w + 1) * 64 > to) bits &= ~0ull >> (64 - to % 64);
        n += (size_t)__builtin_popcountll(bits);
    }
    return n;
}

/* The granules wholly inside b: [*first, *end), empty when b holds none. */
static void whole_granules(const ca_allocator *a, const ca_block *b, size_t *first, size_t *end) {
    size_t g = a->granule, base = b->seg->base;
    *first = (b->addr - base + g - 1) / g;
    *end = (b->addr + b->size - base) / g;
    if (*end < *first) *end = *first;
}

/* ---- a granule's physical memory: attached, detached, created, released ---- */

static void attach(ca_allocator *a, ca_segment *seg, size_t i, ca_handle h) {
    seg->handles[i] = h;
    seg->mapped_bits[i / 64] |= 1ull << (i % 64);
    seg->mapped += a->granule;
    ca_reserved_add(a, seg->heap, (int64_t)a->granule);
}

static ca_handle detach(ca_allocator *a, ca_segment *seg, size_t i) {
    ca_handle h = seg->handles[i];
    seg->handles[i] = 0;
    seg->mapped_bits[i / 64] &= ~(1ull << (i % 64));
    seg->mapped -= a->granule;
    ca_reserved_add(a, seg->heap, -(int64_t)a->granule);
    return h;
}

/* Granule i's physical memory comes (back) from the device, within the cap. */
static int map_granule(ca_allocator *a, ca_segment *seg, size_t i) {
    size_t g = a->granule;
    ca_handle h;
    if (!ca_hold(a, g)) return CA_ERR_OOM;
    int rc = a->be->create(a->be->self, g, &h);
    if (rc != CA_OK) {
        ca_unhold(a, g);
        return rc;
    }
    rc = a->be->map(a->be->self, seg->base + i * g, g, h);
    if (rc != CA_OK) {
        a->be->release(a->be->self, h);
        ca_unhold(a, g);
        return rc == CA_ERR_OOM ? CA_ERR_OOM : CA_ERR_BACKEND;
    }
    attach(a, seg, i, h);
    seg->heap->pool->st.num_device_alloc++;
    return CA_OK;
}

static void unmap_granule(ca_allocator *a, ca_segment *seg, size_t i) {
    size_t g = a->granule;
    a->be->unmap(a->be->self, seg->base + i * g, g);
    a->be->release(a->be->self, detach(a, seg, i));
    ca_unhold(a, g);
    seg->heap->pool->st.num_device_free++;
}

size_t ca_exp_unmap_granules(ca_allocator *a, ca_segment *seg, size_t first, size_t end) {
    size_t g = a->granule, n = 0;
    for (size_t i = next_mapped(seg, first, end); i < end;) {
        size_t run_end = next_unmapped(seg, i, end);
        for (size_t k = i; k < run_end; k++) unmap_granule(a, seg, k);
        ca_emit(a, CA_EV_SEGMENT_UNMAP, seg->base + i * g, (run_end - i) * g, 0, seg->heap->pool->stream);
        n += run_end - i;
        i = next_mapped(seg, run_end, end);
    }
    return n;
}

/* Can the device, and the cap, give `bytes` more physical memory? (A plan:
 * map_granule's ca_hold is what keeps to the cap.) */
static bool room_for(ca_allocator *a, size_t bytes) {
    size_t free_bytes = 0, total = 0;
    if (a->be->mem_info(a->be->self, &free_bytes, &total) == CA_OK && free_bytes < bytes) return false;
    return !a->cap || __atomic_load_n(&a->held, __ATOMIC_RELAXED) + bytes <= a->cap; /* both <= CA_MAX_BYTES */
}

/* ---- busy granules, and the marks that make them idle ---- */

/* A granule that a free with device work behind it covered (a free in stream
 * order, or a plain free whose fence only ordered later work after it: both
 * only on devices that run work after calls return) is busy: unmapping it
 * could fault work still queued. It is idle again once a mark recorded after
 * the free has passed. The label is per granule, not per block, because
 * blocks merge: a block freed a moment ago must not make the long-free block
 * it joins look busy, nor the other way round. */
static inline bool granule_idle(const ca_pool *p, const ca_segment *seg, size_t i) {
    return !seg->busy || seg->busy[i] < p->idle_epoch;
}

void ca_exp_busy(ca_allocator *a, ca_pool *p, const ca_block *b) {
    ca_segment *seg = b->seg;
    size_t g = a->granule;
    for (size_t i = (b->addr - seg->base) / g; i * g < b->addr + b->size - seg->base; i++) seg->busy[i] = p->epoch;
}

/* A passed mark makes every granule labelled before it idle. */
static void check_mark(ca_allocator *a, ca_pool *p) {
    if (!p->mark || !a->be->fence_query(a->be->self, p->mark)) return;
    a->be->fence_destroy(a->be->self, p->mark);
    p->mark = 0;
    p->idle_epoch = p->epoch;
}

/* Busy granules were in the way: a mark, so that they are idle once the work
 * queued now is done (no wait: a later search or sweep asks). Granules
 * labelled from now on carry the next epoch. */
static void set_mark(ca_allocator *a, ca_pool *p) {
    if (p->mark || !a->be->fence_record_done) return;
    ca_fence f = 0;
    if (a->be->fence_record_done(a->be->self, &f) != CA_OK) return;
    p->epoch++;
    if (f) p->mark = f;
    else p->idle_epoch = p->epoch; /* the device was synchronized */
}

void ca_exp_drop_mark(ca_allocator *a, ca_pool *p) {
    if (p->mark) a->be->fence_destroy(a->be->self, p->mark);
    p->mark = 0;
}

/* ---- donors: granules a request may take instead of creating new ones ---- */

/* Idle mapped granules lying wholly inside free blocks of the request's heap
 * (in expandable mode, the pool's only one): first the rest of the block
 * being allocated, then the free blocks, largest first (blocks smaller than a
 * granule hold none). The walk changes nothing but its own fields, so a copy
 * can count what the original would take. */
typedef struct donors {
    ca_allocator *a;
    ca_pool *p;
    ca_heap *heap;
    bool done;              /* the index walked to its end */
    ca_block *cursor;       /* the walk's last block in the index */
    const ca_block *skip;   /* a block of the index that the request will use */
    ca_block *blk;          /* the block whose granules [at, end) are looked at */
    size_t at, end;
    long budget;            /* units of work left (CA_REMAP_BUDGET) */
    size_t busy_granules;   /* mapped granules passed over as busy */
    ca_segment *run_seg;    /* granules taken and unmapped, not reported yet */
    size_t run_at, run_len;
    bool took_older;        /* a granule came from a range older than the newest */
} donors;

/* own: the block being allocated (out of the index), its granules from
 * own_from on free to give; skip: see donors. */
static void donors_init(donors *d, ca_allocator *a, ca_heap *h, ca_block *own, size_t own_from, const ca_block *skip,
                        size_t need) {
    ca_pool *p = h->pool;
    *d = (donors){.a = a, .p = p, .heap = h, .skip = skip};
    d->budget = CA_REMAP_BUDGET + (need < LONG_MAX / 4 ? 2 * (long)need : LONG_MAX / 2);
    check_mark(a, p);
    if (own) {
        size_t first, end;
        whole_granules(a, own, &first, &end);
        d->blk = own;
        d->at = own_from > first ? own_from : first;
        d->end = end;
    }
}

/* The next donor granule: *seg's granule *i. False when none is left or the
 * budget is spent. */
static bool next_donor(donors *d, ca_segment **seg, size_t *i) {
    for (;;) {
        while (d->blk) {
            size_t words = 0, at = find_bit(d->blk->seg, d->at, d->end, true, &words);
            d->budget -= (long)words;
            if (at == d->end) {
                d->blk = NULL;
                break;
            }
            d->at = at + 1;
            if (!granule_idle(d->p, d->blk->seg, at)) {
                d->busy_granules++;
                continue;
            }
            *seg = d->blk->seg;
            *i = at;
            return true;
        }
        if (d->done || d->budget <= 0) return false;
        ca_free_index *fi = &d->heap->free;
        ca_block *b = d->cursor ? ca_free_index_smaller(fi, d->cursor) : ca_free_index_largest(fi);
        if (!b || b->size < d->a->granule) {
            d->done = true;
            return false;
        }
        d->cursor = b;
        d->budget--;
        if (b == d->skip) continue;
        size_t first, end;
        whole_granules(d->a, b, &first, &end);
        if (end - first == b->unmapped) continue; /* nothing mapped to give */
        d->blk = b;
        d->at = first;
        d->end = end;
    }
}

/* Report the donor granules unmapped so far (before any mapping is reported,
 * so that the tracker's reserved never counts a granule twice). */
static void donors_flush(donors *d) {
    if (!d->run_len) return;
    size_t g = d->a->granule;
    ca_emit(d->a, CA_EV_SEGMENT_UNMAP, d->run_seg->base + d->run_at * g, d->run_len * g, 0, d->p->stream);
    d->run_len = 0;
}

static void donors_done(donors *d) {
    donors_flush(d);
    if (d->busy_granules) set_mark(d->a, d->p);
    if (d->took_older) ca_ranges_drop_empty(d->a, d->heap);
}

/* Move the donor at (from, j) to granule i of `to`: unmapped there, mapped
 * here, no memory created or released. False, with the donor left alone or
 * given back to the device, when the backend refuses. */
static bool move_granule(donors *d, ca_segment *from, size_t j, ca_segment *to, size_t i) {
    ca_allocator *a = d->a;
    size_t g = a->granule;
    ca_handle h = from->handles[j];
    if (a->be->unmap(a->be->self, from->base + j * g, g) != CA_OK) return false;
    detach(a, from, j);
    d->blk->unmapped++;
    if (d->run_len && (d->run_seg != from || d->run_at + d->run_len != j)) donors_flush(d);
    if (!d->run_len) d->run_seg = from, d->run_at = j;
    d->run_len++;
    d->took_older = d->took_older || from != from->heap->segments;
    if (a->be->map(a->be->self, to->base + i * g, g, h) != CA_OK) {
        /* mapped nowhere now: give it back rather than lose it */
        a->be->release(a->be->self, h);
        ca_unhold(a, g);
        from->heap->pool->st.num_device_free++;
        return false;
    }
    attach(a, to, i, h);
    d->p->st.num_granules_moved++;
    return true;
}

/* The pool grew with no donor left (the walk went through every free block):
 * the granules it holds now, less what is active with this request and the
 * busy free granules, are its edges (see ca_exp_sweep). */
static void set_edges(ca_allocator *a, ca_pool *p, size_t size, const donors *d) {
    if (!d->done) return; /* stopped by its budget: the figure would count donors */
    int64_t waste = p->st.reserved_bytes[CA_POOL_ALL].current - ca_pool_active_bytes(p) -
                    (int64_t)size - (int64_t)(d->busy_granules * a->granule);
    p->edges = waste > 0 ? (size_t)waste : 0;
}

/* How many donors the walk can give, up to `want`. */
static size_t donors_count(const donors *d, size_t want) {
    donors c = *d;
    ca_segment *seg;
    size_t i, n = 0;
    while (n < want && next_donor(&c, &seg, &i)) n++;
    return n;
}

/* Would the pool, with `missing` more granules for a request of `size`,
 * hold at most 1/64 more than it needed lately (its allocated peak over the
 * last release_after to 2 x release_after allocations, or now, plus its
 * edges, as ca_exp_sweep counts it)? Then it creates them instead of moving
 * granules: a move costs backend calls each time a pattern comes back (a
 * training iteration that needs a granule in two places at two times), a
 * creation once. Measured (BENCHMARKS.md, issue 11): albert moved 1041
 * granules every replay of its iteration when it always moved, none with the
 * 1/64; pools under 128 MiB get no slack (it is less than a granule). */
static bool within_need(ca_allocator *a, ca_pool *p, size_t size, size_t missing) {
    int64_t need = p->win_peak > p->win_peak_prev ? p->win_peak : p->win_peak_prev;
    int64_t now = ca_pool_active_bytes(p) + (int64_t)size;
    if (now > need) need = now;
    need += (int64_t)p->edges;
    int64_t g = (int64_t)a->granule, slack = (need / 64) / g * g;
    return p->st.reserved_bytes[CA_POOL_ALL].current + (int64_t)missing * g <= need + slack;
}

/* Map every granule under [b->addr, b->addr + size), moving donors before
 * creating; reports runs to the observer. When the device is short, asks
 * first whether donors and the device together have the memory, so a request
 * that cannot fit changes nothing. */
static int map_range(ca_allocator *a, ca_segment *seg, ca_block *b, size_t size) {
    size_t g = a->granule;
    size_t first = (b->addr - seg->base) / g, end = (b->addr + size - seg->base + g - 1) / g;
    size_t missing = end - first - count_mapped(seg, first, end);
    if (!missing) return CA_OK; /* what is unmapped lies in the rest of b */
    donors d;
    bool skipped = false;
    donors_init(&d, a, seg->heap, b, end, NULL, missing);
    if (!room_for(a, missing * g)) {
        size_t have = donors_count(&d, missing);
        if (have < missing && !room_for(a, (missing - have) * g)) {
            donors_done(&d);
            return CA_ERR_OOM;
        }
    } else if (within_need(a, seg->heap->pool, size, missing)) {
        d.done = skipped = true; /* create: see within_need */
        d.blk = NULL;
    }
    int rc = CA_OK;
    bool created = false;
    for (size_t i = next_unmapped(seg, first, end); i < end && rc == CA_OK;) {
        size_t run_end = next_mapped(seg, i, end), k;
        for (k = i; k < run_end; k++) {
            ca_segment *from;
            size_t j;
            bool moved = false;
            while (!moved && next_donor(&d, &from, &j)) moved = move_granule(&d, from, j, seg, k);
            if (!moved) {
                if ((rc = map_granule(a, seg, k)) != CA_OK) break;
                created = true;
            }
            b->unmapped--; /* every missing granule lies wholly inside b */
        }
        donors_flush(&d);
        if (k > i) ca_emit(a, CA_EV_SEGMENT_MAP, seg->base + i * g, (k - i) * g, 0, seg->heap->pool->stream);
        i = next_unmapped(seg, run_end, end);
    }
    donors_done(&d);
    if (created && !skipped) /* nothing was left to move: what the pool holds is what it needs */
        set_edges(a, seg->heap->pool, size, &d);
    return rc;
}

#define NO_RANGE_ROOM (-1) /* extend: the range has no room for the block */

/* Extend the range so that a block of `size` fits at its end; *out is that
 * free block, taken out of the index. NO_RANGE_ROOM, or CA_ERR_OOM when the
 * device and the pool's donors together have no room for the granules it
 * adds, with nothing changed: a request that cannot fit costs no per-granule
 * work, whatever its size. */
static int extend(ca_allocator *a, ca_segment *seg, size_t size, ca_block **out) {
    size_t g = a->granule;
    ca_block *tail = seg->last;
    bool tail_free = tail && !tail->allocated;
    uintptr_t start = tail_free ? tail->addr : seg->base + seg->span;
    size_t new_span;
    if (!ca_size_add(start - seg->base, size, &new_span) || !ca_size_round_up(new_span, g, &new_span) ||
        new_span > seg->reserve_size)
        return NO_RANGE_ROOM;
    size_t added = new_span - seg->span; /* none of it mapped */
    if (!room_for(a, added)) {
        donors d;
        donors_init(&d, a, seg->heap, NULL, 0, tail_free ? tail : NULL, added / g);
        size_t have = donors_count(&d, added / g);
        donors_done(&d);
        if (!room_for(a, added - have * g)) return CA_ERR_OOM;
    }
    if (grow_handles(a, seg, new_span / g) != CA_OK) return CA_ERR_OOM;
    ca_block *b;
    if (tail_free) {
        ca_free_index_remove(&seg->heap->free, tail);
        tail->size += added;
        tail->unmapped += added / g;
        b = tail;
    } else {
        if (!(b = ca_block_new(seg->heap->pool))) return CA_ERR_OOM;
        b->addr = seg->base + seg->span;
        b->size = added;
        b->unmapped = added / g;
        b->seg = seg;
        b->prev = tail;
        if (tail) tail->next = b;
        else seg->first = b;
        seg->last = b;
        ca_starts_begin(seg, b);
    }
    seg->span = new_span;
    *out = b;
    return CA_OK;
}

/* A free block of `size` at the end of the heap's range, or of a new one
 * when it has no room (ranges.c). */
static int grow(ca_allocator *a, ca_heap *h, size_t size, ca_block **out) {
    int rc = h->segments ? extend(a, h->segments, size, out) : NO_RANGE_ROOM;
    if (rc != NO_RANGE_ROOM) return rc;
    ca_segment *seg = ca_range_new(a, h, size);
    if (!seg) return CA_ERR_OOM;
    rc = extend(a, seg, size, out);
    return rc == CA_OK ? CA_OK : CA_ERR_OOM;
}

int ca_exp_alloc(ca_allocator *a, ca_heap *h, size_t size, ca_block *b, bool may_grow, ca_block **out) {
    if (!may_grow && (!b || b->unmapped)) return CA_ERR_OOM; /* it would map memory */
    int rc;
    if (b) ca_free_index_remove(&h->free, b);
    else if ((rc = grow(a, h, size, &b)) != CA_OK) return rc;
    /* The hot path's whole share of remapping: one test. */
    rc = b->unmapped ? map_range(a, b->seg, b, size) : CA_OK;
    if (rc != CA_OK) {
        ca_free_index_insert(&b->seg->heap->free, b);
        return rc;
    }
    *out = b;
    return CA_OK;
}

/* Trim the unmapped end of a free tail off the range. The granule where the
 * tail starts is mapped if an allocated block shares it, so the cut never
 * reaches into the block before the tail. A free tail out of the index is
 * being allocated (map_range's donors drop the older ranges' ends meanwhile:
 * it may be one's tail) and is left whole. */
void ca_exp_trim_tail(ca_allocator *a, ca_segment *seg) {
    size_t g = a->granule;
    ca_block *tail = seg->last;
    if (!tail || tail->allocated || tail->bin < 0) return;
    size_t end = seg->span / g, lo = (tail->addr - seg->base) / g;
    while (end > lo && !seg->handles[end - 1]) end--;
    if (end * g >= seg->span) return;
    uintptr_t new_end = seg->base + end * g;
    ca_free_index_remove(&seg->heap->free, tail);
    if (new_end > tail->addr) {
        tail->size = new_end - tail->addr;
        tail->unmapped -= seg->span / g - end;
        ca_free_index_insert(&seg->heap->free, tail);
    } else {
        ca_starts_end(seg, tail);
        seg->last = tail->prev;
        if (seg->last) seg->last->next = NULL;
        else seg->first = NULL;
        ca_block_put(seg->heap->pool, tail);
    }
    seg->span = end * g;
}

/* Unmap the idle granules lying wholly inside free blocks of p; returns
 * how many mapped ones it left because they are busy. */
static size_t release_idle(ca_allocator *a, ca_pool *p) {
    size_t busy = 0;
    for (int k = 0; k < p->nheaps; k++)
        for (ca_segment *seg = p->heap[k].segments; seg; seg = seg->next)
            for (ca_block *b = seg->first; b; b = b->next) {
                if (b->allocated) continue;
                size_t first, end;
                whole_granules(a, b, &first, &end);
                if (end - first == b->unmapped) continue;
                for (size_t i = next_mapped(seg, first, end); i < end; i = next_mapped(seg, i, end)) {
                    size_t j = i;
                    while (j < end && seg->handles[j] && granule_idle(p, seg, j)) j++;
                    if (j > i) b->unmapped += ca_exp_unmap_granules(a, seg, i, j);
                    else busy++, j++;
                    i = j;
                }
            }
    return busy;
}

void ca_exp_release(ca_allocator *a, ca_pool *p) {
    check_mark(a, p);
    if (release_idle(a, p) && ca_device_wait(a, p)) {
        /* Device work may still touch some: wait for what is queued now
         * (every stream's, destroyed ones' too: streams.c folds their work
         * into the legacy stream), then they are idle; a wait that failed
         * leaves them mapped. */
        ca_exp_drop_mark(a, p);
        p->idle_epoch = ++p->epoch;
        release_idle(a, p);
    }
    for (int k = 0; k < p->nheaps; k++) {
        for (ca_segment *seg = p->heap[k].segments; seg; seg = seg->next) ca_exp_trim_tail(a, seg);
        ca_ranges_drop_empty(a, &p->heap[k]);
    }
}

/* Giving back: the granules the pool did not need over the last
 * release_after (K) to 2K allocations. Because any free granule can be moved
 * where a request needs it, which granules stay free does not matter, only
 * how many the pool needed at once: its allocated peak over that window plus
 * the granule edges it needed when it last had to grow (an estimate that only
 * errs high when the last growth found busy or unsearched donors). What lies
 * above goes back, from idle free blocks, largest first.
 *
 * Why not the age of each free block: blocks are stamped when they become
 * free and a merge keeps the latest stamp, so in a training loop, where an
 * iteration's frees merge its whole working area back into one free block,
 * every granule looks freed a moment ago and nothing ever went back (measured
 * on tests/data/torch/gpt_varying_big.csv: reserved stayed at the run's peak).
 *
 * Why K is 10000 by default: the window must span more than an iteration, so
 * that each iteration's peak stays mapped instead of being given back and
 * created again every time (a cuMemRelease, then a cuMemCreate + cuMemMap +
 * cuMemSetAccess per granule, on a GPU): a few hundred allocations an
 * iteration for the small models of tests/data/torch, ~2000 for albert,
 * thousands for large models. BENCHMARKS.md (issue 11) has the timelines. */
void ca_exp_sweep(ca_allocator *a, ca_pool *p) {
    size_t g = a->granule;
    int64_t peak = p->win_peak > p->win_peak_prev ? p->win_peak : p->win_peak_prev;
    p->win_peak_prev = p->win_peak;
    p->win_peak = ca_pool_needed_bytes(p);
    int64_t reserved = p->st.reserved_bytes[CA_POOL_ALL].current, need = peak + (int64_t)p->edges;
    if (reserved - need < (int64_t)g) return;
    size_t excess = (size_t)(reserved - need) / g;
    check_mark(a, p);
    bool busy = false;
    for (int k = 0; k < p->nheaps && excess; k++) {
        ca_heap *h = &p->heap[k];
        ca_free_index *fi = &h->free;
        for (ca_block *b = ca_free_index_largest(fi); b && b->size >= g && excess; b = ca_free_index_smaller(fi, b)) {
            ca_segment *seg = b->seg;
            size_t first, end;
            whole_granules(a, b, &first, &end);
            if (end - first == b->unmapped) continue;
            /* the highest granules of the block first: its low end is where
             * the next request goes */
            for (size_t i = end; i > first && excess;) {
                if (!seg->handles[i - 1] || !granule_idle(p, seg, i - 1)) {
                    busy = busy || seg->handles[i - 1];
                    i--;
                    continue;
                }
                size_t lo = i - 1; /* [lo, i): an idle mapped run, at most `excess` long */
                while (lo > first && seg->handles[lo - 1] && granule_idle(p, seg, lo - 1) && i - lo < excess) lo--;
                b->unmapped += ca_exp_unmap_granules(a, seg, lo, i);
                excess -= i - lo;
                i = lo;
            }
        }
        for (ca_segment *seg = h->segments; seg; seg = seg->next) ca_exp_trim_tail(a, seg);
        ca_ranges_drop_empty(a, h);
    }
    if (busy) set_mark(a, p);
}

void ca_exp_end(ca_allocator *a, ca_segment *seg) {
    ca_exp_unmap_granules(a, seg, 0, seg->span / a->granule);
    seg->span = 0; /* nothing mapped: ca_exp_destroy only gives the range back */
    ca_exp_destroy(a, seg);
}

void ca_exp_destroy(ca_allocator *a, ca_segment *seg) {
    size_t g = a->granule;
    for (size_t i = 0; i < seg->span / g; i++)
        if (seg->handles[i]) unmap_granule(a, seg, i);
    ca_addr_index_remove(&a->addrs, seg->base);
    a->be->unreserve(a->be->self, seg->base, seg->reserve_size);
    CA_STAT(a, seg->heap, segment, -1);
    free(seg->handles);
    free(seg->mapped_bits);
    free(seg->free_edges);
    free(seg->first_start);
    free(seg->busy);
    free(seg);
}

/* Bytes of b with physical memory behind them. */
size_t ca_exp_block_mapped(const ca_allocator *a, const ca_block *b) {
    const ca_segment *seg = b->seg;
    size_t g = a->granule, mapped = 0;
    for (size_t i = (b->addr - seg->base) / g; i * g < b->addr + b->size - seg->base; i++) {
        if (!seg->handles[i]) continue;
        uintptr_t lo = seg->base + i * g, hi = lo + g;
        if (lo < b->addr) lo = b->addr;
        if (hi > b->addr + b->size) hi = b->addr + b->size;
        mapped += hi - lo;
    }
    return mapped;
}

/* The longest stretch of b that is mapped: what b can serve without growing. */
size_t ca_exp_mapped_run(const ca_allocator *a, const ca_block *b) {
    const ca_segment *seg = b->seg;
    size_t g = a->granule, best = 0, cur = 0;
    for (size_t i = (b->addr - seg->base) / g; i * g < b->addr + b->size - seg->base; i++) {
        uintptr_t lo = seg->base + i * g, hi = lo + g;
        if (lo < b->addr) lo = b->addr;
        if (hi > b->addr + b->size) hi = b->addr + b->size;
        cur = seg->handles[i] ? cur + (hi - lo) : 0;
        if (cur > best) best = cur;
    }
    return best;
}
