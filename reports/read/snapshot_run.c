/* One device's run laid out from a snapshot (ca_snap_run_build): the ranges
 * mapped when its trace began and the allocations made before it (seeded),
 * then the trace, each allocation with a dense id. See snapshot_read.h.
 *
 * Three passes: the trace forward (what it allocates, frees and maps, and
 * the frees of what was made before it); the final segments (their blocks
 * still active that the trace did not make) and the trace's segment events
 * undone backwards (the ranges at its start); then the whole run forward,
 * giving allocations their dense ids and frees their sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Out of memory inside uthash: said, never exit (uthash's default). */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(e) (hash_oom = 1)
#include <uthash.h>

#include "reports/read/snapshot_internal.h"
#include "reports/read/snapshot_read.h"
#include "reports/track/ranges.h"

#define ROUND 512u
#define RUN_DROPPED ((ca_run_kind)99)

typedef struct addr_e {
    uint64_t addr;
    size_t op;   /* index of its ALLOC in the ops */
    uint32_t id;
    int state;   /* pass A: 1 live, 2 seeded then freed; pass C: live */
    UT_hash_handle hh;
} addr_e;

typedef struct kind_e { /* the run's kinds, by value */
    ca_range_kind key;
    uint32_t index;
    UT_hash_handle hh;
} kind_e;

typedef struct ops_vec {
    ca_run_op *v;
    size_t n, cap;
} ops_vec;

/* What the passes share. */
typedef struct builder {
    const ca_torch_snapshot *s;
    int device;
    const ca_snap_trace *tr;
    ca_snap_run *out;
    const ca_snap_segment **segs; /* the device's final segments, by address */
    size_t n_segs;
    ca_snap_sizes *sizes;         /* sites by size for what was made before the trace */
    ops_vec trace, seed;
    addr_e *live, *touched;
    ca_range_set ranges;
    kind_e *kinds;  /* out->kinds, by value */
    int expandable; /* what a segment that does not say is */
    int nomem;
} builder;

static int add_op(ops_vec *o, ca_run_op op) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 256;
        ca_run_op *v = realloc(o->v, cap * sizeof *v);
        if (!v) return -1;
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = op;
    return 0;
}

static uint64_t round_block(uint64_t req) {
    if (!req) return ROUND;
    return req > UINT64_MAX - ROUND ? req : (req + ROUND - 1) / ROUND * ROUND;
}

static addr_e *find(addr_e *h, uint64_t addr) {
    addr_e *e;
    HASH_FIND(hh, h, &addr, sizeof addr, e);
    return e;
}

/* A new entry for addr in *h (NULL: out of memory). */
static addr_e *add(addr_e **h, uint64_t addr) {
    addr_e *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->addr = addr;
    int hash_oom = 0;
    HASH_ADD(hh, *h, addr, sizeof e->addr, e);
    if (hash_oom) {
        free(e);
        return NULL;
    }
    return e;
}

static void clear(addr_e **h) {
    addr_e *e, *tmp;
    HASH_ITER(hh, *h, e, tmp) {
        HASH_DEL(*h, e);
        free(e);
    }
}

static int is_free(ca_snap_action a, int frees_on) { return (int)a == frees_on; }
static int is_map(ca_snap_action a) { return a == CA_SNAP_SEGMENT_ALLOC || a == CA_SNAP_SEGMENT_MAP; }
static int is_unmap(ca_snap_action a) { return a == CA_SNAP_SEGMENT_FREE || a == CA_SNAP_SEGMENT_UNMAP; }

/* ---- the kinds of ranges ---- */

static int by_address(const void *a, const void *b) {
    const ca_snap_segment *x = *(const ca_snap_segment *const *)a, *y = *(const ca_snap_segment *const *)b;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

/* A final segment is classic unless it says expandable; when it does not
 * say, as the settings say, else as the trace maps memory (segment_map or
 * segment_alloc), else classic: PyTorch's default. */
static int classic(const builder *b, const ca_snap_segment *g) {
    return g->expandable >= 0 ? !g->expandable : !b->expandable;
}

static int expandable_by_default(const ca_torch_snapshot *s, const ca_snap_trace *tr) {
    if (s->expandable_segments >= 0) return s->expandable_segments;
    for (size_t i = 0; i < tr->n; i++) {
        ca_snap_action a = tr->e[i].action;
        if (a == CA_SNAP_SEGMENT_MAP || a == CA_SNAP_SEGMENT_UNMAP) return 1;
        if (a == CA_SNAP_SEGMENT_ALLOC || a == CA_SNAP_SEGMENT_FREE) return 0;
    }
    return 0;
}

/* The final segment holding [addr, addr + size), or NULL. */
static const ca_snap_segment *segment_holding(const builder *b, uint64_t addr, uint64_t size) {
    size_t lo = 0, hi = b->n_segs;
    while (lo < hi) { /* the last segment starting at or before addr */
        size_t mid = (lo + hi) / 2;
        if (b->segs[mid]->addr <= addr) lo = mid + 1;
        else hi = mid;
    }
    const ca_snap_segment *g = lo ? b->segs[lo - 1] : NULL;
    return g && addr - g->addr < g->total_size && size <= g->total_size - (addr - g->addr) ? g : NULL;
}

/* k's index in the run's kinds (a handful in real snapshots; as many as
 * segments at worst: a table, not a scan); UINT32_MAX when memory ran out. */
static uint32_t intern_kind(builder *b, const ca_range_kind *k) {
    ca_range_kind key;
    memset(&key, 0, sizeof key); /* the padding too: the table hashes the bytes */
    key.whole = k->whole;
    key.pool = k->pool;
    key.expandable = k->expandable;
    key.pool_id[0] = k->pool_id[0];
    key.pool_id[1] = k->pool_id[1];
    kind_e *e;
    HASH_FIND(hh, b->kinds, &key, sizeof key, e);
    if (e) return e->index;
    ca_snap_run *r = b->out;
    if (!(r->n_kinds & (r->n_kinds - 1))) { /* 0, 1, 2, 4, ...: double */
        ca_range_kind *v = realloc(r->kinds, (r->n_kinds ? 2 * r->n_kinds : 1) * sizeof *v);
        if (!v) return UINT32_MAX;
        r->kinds = v;
    }
    if (!(e = malloc(sizeof *e))) return UINT32_MAX;
    e->key = key;
    e->index = (uint32_t)r->n_kinds;
    int hash_oom = 0;
    HASH_ADD(hh, b->kinds, key, sizeof e->key, e);
    if (hash_oom) {
        free(e);
        return UINT32_MAX;
    }
    r->kinds[r->n_kinds] = key;
    return (uint32_t)r->n_kinds++;
}

/* The kind of a range mapped or unmapped whole (`whole`: a classic
 * segment) or not at [addr, addr + size): pool and pool id from the final
 * segment there, when one still is. An index as intern_kind's. */
static uint32_t kind_index(builder *b, uint64_t addr, uint64_t size, int whole) {
    ca_range_kind k = ca_range_kind_default();
    k.whole = (uint8_t)whole;
    k.expandable = (int8_t)!whole;
    const ca_snap_segment *g = segment_holding(b, addr, size);
    if (g && classic(b, g) == whole) {
        k.pool = g->large < 0 ? 0 : g->large ? 2 : 1;
        memcpy(k.pool_id, g->pool_id, sizeof k.pool_id);
    }
    return intern_kind(b, &k);
}

static int device_segments(builder *b) {
    const ca_torch_snapshot *s = b->s;
    if (!(b->segs = malloc((s->n_segs ? s->n_segs : 1) * sizeof *b->segs))) return -1;
    for (size_t g = 0; g < s->n_segs; g++)
        if (s->segs[g].device == b->device) b->segs[b->n_segs++] = &s->segs[g];
    qsort(b->segs, b->n_segs, sizeof *b->segs, by_address);
    return 0;
}

/* ---- pass A: the trace forward ---- */

/* A free of an address the trace never allocated: made before it, seeded. */
static void seed_freed(builder *b, const ca_snap_entry *e) {
    uint32_t site = ca_snap_size_site((ca_torch_snapshot *)b->s, &b->sizes, e->size);
    b->nomem |= add_op(&b->seed, (ca_run_op){.kind = CA_RUN_ALLOC, .addr = e->addr, .size = round_block(e->size),
                                             .requested = e->size, .stream = e->stream, .site = site});
    addr_e *a = add(&b->live, e->addr);
    if (a) a->state = 2;
    else b->nomem = 1;
}

/* The run op of one entry; 0 when it makes none. */
static int trace_op(builder *b, const ca_snap_entry *e, ca_run_op *op) {
    *op = (ca_run_op){.addr = e->addr, .size = e->size, .stream = e->stream};
    addr_e *a;
    if (e->action == CA_SNAP_ALLOC) {
        op->kind = CA_RUN_ALLOC;
        op->site = e->site;
        op->requested = e->size;
        op->size = round_block(e->size);
        if (!(a = find(b->live, e->addr)) && !(a = add(&b->live, e->addr))) return b->nomem = 1, 0;
        a->state = 1;
        if (!find(b->touched, e->addr) && !add(&b->touched, e->addr)) return b->nomem = 1, 0;
    } else if (is_free(e->action, b->out->frees_on)) {
        op->kind = CA_RUN_FREE;
        a = find(b->live, e->addr);
        if (a && a->state == 1) {
            a->state = 0;
        } else if (!a && !find(b->touched, e->addr)) {
            seed_freed(b, e);
        } else {
            b->out->unmatched_frees++;
            return 0;
        }
    } else if (is_map(e->action) || is_unmap(e->action)) {
        op->kind = is_map(e->action) ? CA_RUN_MAP : CA_RUN_UNMAP;
        op->site = e->site;
        int whole = e->action == CA_SNAP_SEGMENT_ALLOC || e->action == CA_SNAP_SEGMENT_FREE;
        if ((op->range_kind = kind_index(b, e->addr, e->size, whole)) == UINT32_MAX) return b->nomem = 1, 0;
    } else if (e->action == CA_SNAP_OOM) {
        op->kind = CA_RUN_OOM;
        op->site = e->site;
    } else {
        return 0; /* the other free action */
    }
    return 1;
}

static void pass_trace(builder *b) {
    const ca_torch_snapshot *s = b->s;
    size_t next_step = 0;
    for (size_t i = 0; i < b->tr->n && !b->nomem; i++) {
        const ca_snap_entry *e = &b->tr->e[i];
        while (e->time_us >= 0 && next_step < s->n_steps && s->steps[next_step] <= e->time_us) {
            int dev = s->step_devices[next_step++];
            if (dev >= 0 && dev != b->device) continue;
            b->nomem |= add_op(&b->trace, (ca_run_op){.kind = CA_RUN_STEP});
            b->out->steps++;
        }
        ca_run_op op;
        if (trace_op(b, e, &op)) b->nomem |= add_op(&b->trace, op);
    }
}

/* ---- pass B: the final segments, and the ranges at the trace's start ---- */

/* Blocks still active that no alloc of the trace made: made before it. */
static void seed_blocks(builder *b) {
    for (size_t g = 0; g < b->n_segs && !b->nomem; g++) {
        const ca_snap_segment *sg = b->segs[g];
        b->out->reserved_at_snapshot += sg->total_size;
        for (size_t k = 0; k < sg->n_blocks; k++) {
            const ca_snap_block *bl = &b->s->blocks[sg->first_block + k];
            if (bl->state == CA_SNAP_INACTIVE || find(b->live, bl->addr) || find(b->touched, bl->addr)) continue;
            b->nomem |= add_op(&b->seed, (ca_run_op){.kind = CA_RUN_ALLOC, .addr = bl->addr, .size = bl->size,
                                                     .requested = bl->requested, .stream = sg->stream,
                                                     .site = bl->site});
        }
    }
}

/* The final segments, with the trace's segment events undone newest first. */
static void ranges_at_start(builder *b) {
    for (size_t g = 0; g < b->n_segs && !b->nomem; g++) {
        const ca_snap_segment *sg = b->segs[g];
        int whole = classic(b, sg);
        uint32_t k = kind_index(b, sg->addr, sg->total_size, whole);
        if (k == UINT32_MAX) b->nomem = 1;
        else b->nomem |= ca_ranges_map(&b->ranges, &(ca_range){sg->addr, sg->total_size, sg->stream, b->out->kinds[k]});
    }
    for (size_t i = b->trace.n; i-- > 0 && !b->nomem;) {
        const ca_run_op *o = &b->trace.v[i];
        if (o->kind != CA_RUN_MAP && o->kind != CA_RUN_UNMAP) continue;
        const ca_range_kind *k = &b->out->kinds[o->range_kind];
        if (o->kind == CA_RUN_MAP) b->nomem |= ca_ranges_unmap(&b->ranges, o->addr, o->size, k->whole);
        else b->nomem |= ca_ranges_map(&b->ranges, &(ca_range){o->addr, o->size, o->stream, *k});
    }
}

/* The run: the ranges at the start, the seeded allocations, the trace. */
static void assemble(builder *b) {
    ca_snap_run *out = b->out;
    size_t n = b->ranges.n + b->seed.n + b->trace.n;
    if (!(out->ops = malloc((n ? n : 1) * sizeof *out->ops))) {
        b->nomem = 1;
        return;
    }
    for (size_t i = 0; i < b->ranges.n && !b->nomem; i++) {
        const ca_range *r = &b->ranges.v[i];
        uint32_t k = intern_kind(b, &r->kind); /* as joined: what its pieces agreed on */
        b->nomem |= k == UINT32_MAX;
        out->ops[out->n_ops++] = (ca_run_op){.kind = CA_RUN_MAP, .addr = r->addr, .size = r->size,
                                             .stream = r->stream, .range_kind = k};
    }
    if (b->seed.n) memcpy(out->ops + out->n_ops, b->seed.v, b->seed.n * sizeof *b->seed.v);
    out->n_ops += b->seed.n;
    if (b->trace.n) memcpy(out->ops + out->n_ops, b->trace.v, b->trace.n * sizeof *b->trace.v);
    out->n_ops += b->trace.n;
    out->seeded_ranges = b->ranges.n;
    out->seeded_allocs = b->seed.n;
    for (size_t i = 0; i < b->seed.n; i++) out->seeded_bytes += b->seed.v[i].size;
}

/* ---- pass C: the run forward ---- */

/* Dense ids, the sizes frees carry, and the size the segments give each
 * block still live at the end. */
static void pass_ids(builder *b) {
    ca_snap_run *out = b->out;
    uint32_t *spare = malloc((out->n_ops ? out->n_ops : 1) * sizeof *spare), n_spare = 0;
    if (!spare) {
        b->nomem = 1;
        return;
    }
    for (size_t i = 0; i < out->n_ops && !b->nomem; i++) {
        ca_run_op *o = &out->ops[i];
        addr_e *a;
        if (o->kind == CA_RUN_ALLOC) {
            if ((a = find(b->live, o->addr))) spare[n_spare++] = a->id; /* a missed free: the old one is gone */
            else if (!(a = add(&b->live, o->addr))) b->nomem = 1;
            if (!a) break;
            a->op = i;
            a->id = n_spare ? spare[--n_spare] : out->n_ids++;
            o->id = a->id;
        } else if (o->kind == CA_RUN_FREE) {
            if (!(a = find(b->live, o->addr))) { /* cannot happen: pass A matched every free */
                o->kind = RUN_DROPPED;
                continue;
            }
            const ca_run_op *al = &out->ops[a->op];
            o->id = a->id;
            o->size = al->size;
            o->requested = al->requested;
            o->stream = al->stream;
            spare[n_spare++] = a->id;
            HASH_DEL(b->live, a);
            free(a);
        }
    }
    free(spare);
    for (size_t g = 0; g < b->n_segs && !b->nomem; g++) {
        const ca_snap_segment *sg = b->segs[g];
        for (size_t k = 0; k < sg->n_blocks; k++) {
            const ca_snap_block *bl = &b->s->blocks[sg->first_block + k];
            addr_e *a = bl->state != CA_SNAP_INACTIVE ? find(b->live, bl->addr) : NULL;
            if (a && bl->size >= out->ops[a->op].requested) out->ops[a->op].size = bl->size;
        }
    }
    /* drop what was found unmatched (never, but keep the run consistent) */
    size_t w = 0;
    for (size_t i = 0; i < out->n_ops; i++)
        if (out->ops[i].kind != RUN_DROPPED) out->ops[w++] = out->ops[i];
    out->n_ops = w;
}

int ca_snap_run_build(const ca_torch_snapshot *s, int device, ca_snap_run *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->device = device;
    if (errlen) err[0] = '\0';
    static const ca_snap_trace none = {0};
    builder b = {.s = s, .device = device, .out = out,
                 .tr = device >= 0 && (size_t)device < s->n_traces ? &s->traces[device] : &none};
    b.expandable = expandable_by_default(s, b.tr);
    out->trace_entries = b.tr->n;
    out->frees_on = CA_SNAP_FREE_REQUESTED;
    for (size_t i = 0; i < b.tr->n; i++)
        if (b.tr->e[i].action == CA_SNAP_FREE_COMPLETED) out->frees_on = CA_SNAP_FREE_COMPLETED;

    b.nomem = device_segments(&b);
    if (!b.nomem) pass_trace(&b);
    if (!b.nomem) seed_blocks(&b);
    if (!b.nomem) ranges_at_start(&b);
    clear(&b.live);
    clear(&b.touched);
    if (!b.nomem) assemble(&b);
    if (!b.nomem) pass_ids(&b);
    clear(&b.live);
    kind_e *ke, *kt;
    HASH_ITER(hh, b.kinds, ke, kt) {
        HASH_DEL(b.kinds, ke);
        free(ke);
    }
    free(b.trace.v);
    free(b.seed.v);
    free(b.segs);
    ca_ranges_free(&b.ranges);
    ca_snap_sizes_free(&b.sizes);
    if (!b.nomem) return 0;
    ca_snap_run_free(out);
    snprintf(err, errlen, "out of memory laying out device %d's run", device);
    return -1;
}

void ca_snap_run_free(ca_snap_run *r) {
    free(r->ops);
    free(r->kinds);
    memset(r, 0, sizeof *r);
}
