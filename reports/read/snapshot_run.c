/* One device's run laid out from a snapshot (ca_snap_run_build): the ranges
 * mapped when its trace began and the allocations made before it (seeded),
 * then the trace, each allocation with a dense id. See snapshot_read.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "reports/read/snapshot_internal.h"
#include "reports/read/snapshot_read.h"

#define ROUND 512u
#define RUN_DROPPED ((ca_run_kind)99)

typedef struct addr_e {
    uint64_t addr;
    size_t op;   /* index of its ALLOC in the ops */
    uint32_t id;
    int state;   /* pass A: 1 live, 2 seeded then freed; pass C: live */
    UT_hash_handle hh;
} addr_e;

typedef struct ops_vec {
    ca_run_op *v;
    size_t n, cap;
} ops_vec;

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

static void clear(addr_e **h) {
    addr_e *e, *tmp;
    HASH_ITER(hh, *h, e, tmp) {
        HASH_DEL(*h, e);
        free(e);
    }
}

/* Mapped ranges: sorted, never overlapping. */
typedef struct rng {
    uint64_t lo, hi, stream;
} rng;
typedef struct rset {
    rng *v;
    size_t n, cap;
} rset;

static int rset_reserve(rset *s) {
    if (s->n + 2 <= s->cap) return 0;
    size_t cap = s->cap ? 2 * s->cap : 16;
    rng *v = realloc(s->v, cap * sizeof *v);
    if (!v) return -1;
    s->v = v;
    s->cap = cap;
    return 0;
}

static int rset_remove(rset *s, uint64_t lo, uint64_t hi) {
    if (rset_reserve(s)) return -1;
    for (size_t i = 0; i < s->n && lo < hi; i++) {
        rng *x = &s->v[i];
        if (x->hi <= lo || x->lo >= hi) continue;
        if (x->lo < lo && x->hi > hi) { /* the middle goes: split in two */
            rng right = {hi, x->hi, x->stream};
            x->hi = lo;
            memmove(&s->v[i + 2], &s->v[i + 1], (s->n - i - 1) * sizeof *x);
            s->v[i + 1] = right;
            s->n++;
            return 0;
        }
        if (x->lo < lo) x->hi = lo;
        else if (x->hi > hi) x->lo = hi;
        else { /* all of it */
            memmove(x, x + 1, (s->n - i - 1) * sizeof *x);
            s->n--;
            i--;
        }
    }
    return 0;
}

static int rset_add(rset *s, uint64_t lo, uint64_t hi, uint64_t stream) {
    if (lo >= hi) return 0;
    if (rset_remove(s, lo, hi) || rset_reserve(s)) return -1;
    size_t i = 0;
    while (i < s->n && s->v[i].lo < lo) i++;
    memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof *s->v);
    s->v[i] = (rng){lo, hi, stream};
    s->n++;
    /* join neighbours of one stream that touch */
    if (i + 1 < s->n && s->v[i].hi == s->v[i + 1].lo && s->v[i + 1].stream == stream) {
        s->v[i].hi = s->v[i + 1].hi;
        memmove(&s->v[i + 1], &s->v[i + 2], (s->n - i - 2) * sizeof *s->v);
        s->n--;
    }
    if (i > 0 && s->v[i - 1].hi == s->v[i].lo && s->v[i - 1].stream == stream) {
        s->v[i - 1].hi = s->v[i].hi;
        memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof *s->v);
        s->n--;
    }
    return 0;
}

static int is_free(ca_snap_action a, int frees_on) { return (int)a == frees_on; }
static int is_map(ca_snap_action a) { return a == CA_SNAP_SEGMENT_ALLOC || a == CA_SNAP_SEGMENT_MAP; }
static int is_unmap(ca_snap_action a) { return a == CA_SNAP_SEGMENT_FREE || a == CA_SNAP_SEGMENT_UNMAP; }

int ca_snap_run_build(const ca_torch_snapshot *s, int device, ca_snap_run *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->device = device;
    if (errlen) err[0] = '\0';
    const ca_snap_trace none = {0};
    const ca_snap_trace *tr = device >= 0 && (size_t)device < s->n_traces ? &s->traces[device] : &none;
    out->trace_entries = tr->n;
    out->frees_on = CA_SNAP_FREE_REQUESTED;
    for (size_t i = 0; i < tr->n; i++)
        if (tr->e[i].action == CA_SNAP_FREE_COMPLETED) out->frees_on = CA_SNAP_FREE_COMPLETED;

    ca_snap_sizes *sizes = NULL; /* sites by size for what was made before the trace */
    ops_vec trace = {0}, seed = {0};
    addr_e *live = NULL, *touched = NULL;
    rset ranges = {0};
    int nomem = 0;

    /* Pass A: the trace forward; frees of addresses it never allocated are
     * allocations made before it. */
    size_t next_step = 0;
    for (size_t i = 0; i < tr->n && !nomem; i++) {
        const ca_snap_entry *e = &tr->e[i];
        while (e->time_us >= 0 && next_step < s->n_steps && s->steps[next_step] <= e->time_us) {
            int dev = s->step_devices[next_step++];
            if (dev >= 0 && dev != device) continue;
            nomem |= add_op(&trace, (ca_run_op){.kind = CA_RUN_STEP});
            out->steps++;
        }
        ca_run_op op = {.addr = e->addr, .size = e->size, .stream = e->stream};
        addr_e *a;
        if (e->action == CA_SNAP_ALLOC) {
            op.kind = CA_RUN_ALLOC;
            op.site = e->site;
            op.requested = e->size;
            op.size = round_block(e->size);
            if (!(a = find(live, e->addr))) {
                if (!(a = calloc(1, sizeof *a))) { nomem = 1; break; }
                a->addr = e->addr;
                HASH_ADD(hh, live, addr, sizeof a->addr, a);
            }
            a->state = 1;
            if (!find(touched, e->addr)) {
                addr_e *t = calloc(1, sizeof *t);
                if (!t) { nomem = 1; break; }
                t->addr = e->addr;
                HASH_ADD(hh, touched, addr, sizeof t->addr, t);
            }
        } else if (is_free(e->action, out->frees_on)) {
            op.kind = CA_RUN_FREE;
            a = find(live, e->addr);
            if (a && a->state == 1) {
                a->state = 0;
            } else if (!a && !find(touched, e->addr)) { /* made before the trace */
                uint64_t block = round_block(e->size);
                nomem |= add_op(&seed, (ca_run_op){.kind = CA_RUN_ALLOC, .addr = e->addr, .size = block,
                                                   .requested = e->size, .stream = e->stream,
                                                   .site = ca_snap_size_site((ca_torch_snapshot *)s, &sizes, e->size)});
                if (!(a = calloc(1, sizeof *a))) { nomem = 1; break; }
                a->addr = e->addr;
                a->state = 2;
                HASH_ADD(hh, live, addr, sizeof a->addr, a);
            } else {
                out->unmatched_frees++;
                continue;
            }
        } else if (is_map(e->action)) {
            op.kind = CA_RUN_MAP;
        } else if (is_unmap(e->action)) {
            op.kind = CA_RUN_UNMAP;
        } else if (e->action == CA_SNAP_OOM) {
            op.kind = CA_RUN_OOM;
            op.site = e->site;
        } else {
            continue; /* the other free action */
        }
        nomem |= add_op(&trace, op);
    }
    /* Blocks still active that no alloc of the trace made: made before it. */
    for (size_t g = 0; g < s->n_segs && !nomem; g++) {
        const ca_snap_segment *sg = &s->segs[g];
        if (sg->device != device) continue;
        out->reserved_at_snapshot += sg->total_size;
        nomem |= rset_add(&ranges, sg->addr, sg->addr + sg->total_size, sg->stream);
        for (size_t k = 0; k < sg->n_blocks; k++) {
            const ca_snap_block *b = &s->blocks[sg->first_block + k];
            if (b->state == CA_SNAP_INACTIVE || find(live, b->addr) || find(touched, b->addr)) continue;
            nomem |= add_op(&seed, (ca_run_op){.kind = CA_RUN_ALLOC, .addr = b->addr, .size = b->size,
                                               .requested = b->requested, .stream = sg->stream, .site = b->site});
        }
    }
    /* Pass B: the ranges mapped when the trace began. */
    for (size_t i = trace.n; i-- > 0 && !nomem;) {
        const ca_run_op *o = &trace.v[i];
        if (o->kind == CA_RUN_MAP) nomem |= rset_remove(&ranges, o->addr, o->addr + o->size);
        else if (o->kind == CA_RUN_UNMAP) nomem |= rset_add(&ranges, o->addr, o->addr + o->size, o->stream);
    }
    clear(&live);
    clear(&touched);
    if (nomem) goto oom;

    /* The run: ranges, seeded allocations, the trace. */
    size_t n = ranges.n + seed.n + trace.n;
    if (!(out->ops = malloc((n ? n : 1) * sizeof *out->ops))) goto oom;
    for (size_t i = 0; i < ranges.n; i++)
        out->ops[out->n_ops++] = (ca_run_op){.kind = CA_RUN_MAP, .addr = ranges.v[i].lo,
                                             .size = ranges.v[i].hi - ranges.v[i].lo, .stream = ranges.v[i].stream};
    if (seed.n) memcpy(out->ops + out->n_ops, seed.v, seed.n * sizeof *seed.v);
    out->n_ops += seed.n;
    if (trace.n) memcpy(out->ops + out->n_ops, trace.v, trace.n * sizeof *trace.v);
    out->n_ops += trace.n;
    out->seeded_ranges = ranges.n;
    out->seeded_allocs = seed.n;
    for (size_t i = 0; i < seed.n; i++) out->seeded_bytes += seed.v[i].size;

    /* Pass C: dense ids, the sizes frees carry, and the size the segments
     * give each block still live at the end. */
    uint32_t *spare = malloc((n ? n : 1) * sizeof *spare), n_spare = 0;
    if (!spare) goto oom;
    for (size_t i = 0; i < out->n_ops; i++) {
        ca_run_op *o = &out->ops[i];
        addr_e *a;
        if (o->kind == CA_RUN_ALLOC) {
            if ((a = find(live, o->addr))) { /* a missed free: the old one is gone */
                spare[n_spare++] = a->id;
            } else if ((a = calloc(1, sizeof *a))) {
                a->addr = o->addr;
                HASH_ADD(hh, live, addr, sizeof a->addr, a);
            } else {
                nomem = 1;
                break;
            }
            a->op = i;
            a->id = n_spare ? spare[--n_spare] : out->n_ids++;
            o->id = a->id;
        } else if (o->kind == CA_RUN_FREE) {
            if (!(a = find(live, o->addr))) { /* cannot happen: pass A matched every free */
                o->kind = RUN_DROPPED;
                continue;
            }
            const ca_run_op *al = &out->ops[a->op];
            o->id = a->id;
            o->size = al->size;
            o->requested = al->requested;
            o->stream = al->stream;
            spare[n_spare++] = a->id;
            HASH_DEL(live, a);
            free(a);
        }
    }
    for (size_t g = 0; g < s->n_segs && !nomem; g++) {
        if (s->segs[g].device != device) continue;
        for (size_t k = 0; k < s->segs[g].n_blocks; k++) {
            const ca_snap_block *b = &s->blocks[s->segs[g].first_block + k];
            addr_e *a = b->state != CA_SNAP_INACTIVE ? find(live, b->addr) : NULL;
            if (a && b->size >= out->ops[a->op].requested) out->ops[a->op].size = b->size;
        }
    }
    free(spare);
    clear(&live);
    if (nomem) goto oom;
    /* drop what pass C found unmatched (never, but keep the run consistent) */
    size_t w = 0;
    for (size_t i = 0; i < out->n_ops; i++)
        if (out->ops[i].kind != RUN_DROPPED) out->ops[w++] = out->ops[i];
    out->n_ops = w;
    free(trace.v);
    free(seed.v);
    free(ranges.v);
    ca_snap_sizes_free(&sizes);
    return 0;
oom:
    clear(&live);
    clear(&touched);
    free(trace.v);
    free(seed.v);
    free(ranges.v);
    ca_snap_sizes_free(&sizes);
    ca_snap_run_free(out);
    snprintf(err, errlen, "out of memory laying out device %d's run", device);
    return -1;
}

void ca_snap_run_free(ca_snap_run *r) {
    free(r->ops);
    memset(r, 0, sizeof *r);
}
