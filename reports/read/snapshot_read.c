/* PyTorch snapshots read back: the document checked and what the diagnosis
 * needs kept (segments, traces, steps, sites); see snapshot_read.h. One
 * device's run is laid out in snapshot_run.c and fed in snapshot_feed.c. */
#define _GNU_SOURCE
#include "reports/read/snapshot_read.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "reports/write/fmt.h"
#include "reports/capture/named_frames.h"
#include "reports/read/pickle_read.h"
#include "reports/read/snapshot_internal.h"
#include "util/quote.h"

#define MAX_DEVICES 64

/* ---- reading the document ---- */

typedef struct ptr_site { /* a frames list (or frame dict) already seen, by address */
    const ca_val *key;
    uintptr_t value;
    UT_hash_handle hh;
} ptr_site;

struct ca_snap_sizes { /* the site of allocations without frames, by size */
    uint64_t key;
    uint32_t site;
    UT_hash_handle hh;
};

typedef struct sr {
    ca_torch_snapshot *s;
    ptr_site *lists;
    ca_snap_sizes *sizes;
    size_t budget; /* dicts still to visit: the document's distinct dicts (ca_doc_dicts) */
    char *err;
    size_t errlen;
    int failed;
} sr;

__attribute__((format(printf, 2, 3))) static int fail(sr *r, const char *fmt, ...) {
    if (r->failed) return -1;
    r->failed = 1;
    if (r->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, r->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* n more dicts to visit (segments, blocks, entries, annotations): refused
 * when the document does not hold that many distinct ones. */
static int spend(sr *r, size_t n, const char *what) {
    if (n <= r->budget) {
        r->budget -= n;
        return 0;
    }
    return fail(r, "%s: more segments, blocks, trace entries and annotations than the %zu distinct dicts the file "
                   "holds: the same objects named again and again (a pickle's memo), which no snapshot PyTorch "
                   "writes does; not read",
                what, r->budget);
}

/* "an int", "a list", "None": for "'addr' is a str, expected an int". */
static const char *kind_of(const ca_val *v) {
    switch (v->kind) {
    case CA_VAL_NONE: return "None";
    case CA_VAL_BOOL: return "a bool";
    case CA_VAL_INT: case CA_VAL_BIGINT: return "an int";
    case CA_VAL_FLOAT: return "a float";
    case CA_VAL_STR: return "a str";
    case CA_VAL_BYTES: return "a bytes";
    case CA_VAL_LIST: return "a list";
    case CA_VAL_TUPLE: return "a tuple";
    case CA_VAL_SET: return "a set";
    default: return "a dict";
    }
}

/* key of dict `d` at `where` as an integer >= lo; missing: *out = dflt, or
 * an error when dflt is NULL. */
static int get_int(sr *r, const ca_val *d, const char *key, const char *where, int64_t lo, const int64_t *dflt,
                   int64_t *out) {
    const ca_val *v = ca_val_get(d, key);
    if (!v || (v->kind == CA_VAL_NONE && dflt)) {
        if (dflt) {
            *out = *dflt;
            return 0;
        }
        return fail(r, "%s: no '%s'", where, key);
    }
    if (v->kind == CA_VAL_BIGINT) return fail(r, "%s: '%s' is an integer beyond 64 bits", where, key);
    if (v->kind != CA_VAL_INT) return fail(r, "%s: '%s' is %s, expected an int", where, key, kind_of(v));
    if (v->i < lo) return fail(r, "%s: '%s' is %lld, expected %lld or more", where, key, (long long)v->i, (long long)lo);
    *out = v->i;
    return 0;
}

static int get_u64(sr *r, const ca_val *d, const char *key, const char *where, const int64_t *dflt, uint64_t *out) {
    int64_t v;
    if (get_int(r, d, key, where, 0, dflt, &v)) return -1;
    *out = (uint64_t)v;
    return 0;
}

/* A stream: PyTorch writes int64(cudaStream_t), which is never negative on
 * Linux; a negative one is taken as its two's complement. */
static int get_stream(sr *r, const ca_val *d, const char *where, uint64_t *out) {
    static const int64_t zero = 0;
    int64_t v;
    if (get_int(r, d, "stream", where, INT64_MIN, &zero, &v)) return -1;
    *out = (uint64_t)v;
    return 0;
}

/* A str value, NULL when missing; an error when of another kind. */
static int get_str(sr *r, const ca_val *d, const char *key, const char *where, const char **out) {
    const ca_val *v = ca_val_get(d, key);
    *out = NULL;
    if (!v || v->kind == CA_VAL_NONE) return 0;
    if (v->kind != CA_VAL_STR) return fail(r, "%s: '%s' is %s, expected a str", where, key, kind_of(v));
    *out = v->s.p;
    return 0;
}

static int get_list(sr *r, const ca_val *d, const char *key, const char *where, int required, const ca_val **out) {
    const ca_val *v = ca_val_get(d, key);
    *out = NULL;
    if (!v) return required ? fail(r, "%s: no '%s'", where, key) : 0;
    if (!ca_val_is_seq(v)) return fail(r, "%s: '%s' is %s, expected a list", where, key, kind_of(v));
    *out = v;
    return 0;
}

/* "prefix[i]" or "prefix[i][j]" (j < SIZE_MAX) into buf: the place of a
 * value, for messages. Made for every entry of a trace, so without printf. */
static void place(char *buf, size_t n, const char *prefix, size_t i, size_t j) {
    size_t at = 0;
    for (const char *p = prefix; *p && at + 1 < n; p++) buf[at++] = *p;
    for (int k = 0; k < 2; k++) {
        size_t v = k ? j : i;
        if (k && j == SIZE_MAX) break;
        char digits[24];
        int nd = 0;
        do digits[nd++] = (char)('0' + v % 10); while ((v /= 10) && nd < 24);
        if (at + (size_t)nd + 3 > n) break;
        buf[at++] = '[';
        while (nd) buf[at++] = digits[--nd];
        buf[at++] = ']';
    }
    buf[at] = '\0';
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* Frames PyTorch's own tools leave out (torch/cuda/_memory_viz.py,
 * _frame_filter): unwinding, the traceback gatherer, the interpreter. */
static int hidden_frame(const char *name, const char *file) {
    static const char *const functions[] = {"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp",
                                            "_start", "__libc_start_main", "PyEval_", "PyObject_",
                                            "PyFunction_"};
    static const char *const files[] = {"core/boxing", "/Register", "/Redispatch", "pythonrun.c",
                                        "Modules/main.c", "Objects/call.c", "Objects/methodobject.c",
                                        "pycore_ceval.h", "ceval.c", "cpython/abstract.h"};
    for (size_t i = 0; i < sizeof functions / sizeof *functions; i++)
        if (strstr(name, functions[i])) return 1;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        if (strstr(file, files[i])) return 1;
    return 0;
}

/* s, or its copy in buf with control bytes escaped (util/quote.h) when it
 * has any; at most FRAME_TEXT bytes of it. */
#define FRAME_TEXT 1024
static const char *plain_text(const char *s, char *buf, size_t cap) {
    size_t n = strlen(s);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f) return ca_quote(s, n, FRAME_TEXT, buf, cap);
    return s;
}

typedef struct frame_in {
    const char *name, *file;
    unsigned line;
} frame_in;

/* The site of a frames list (innermost first); by `size` when no frame is
 * left to show. */
static int frames_site(sr *r, const ca_val *list, const char *where, uint64_t size, uint32_t *site) {
    ptr_site *hit;
    HASH_FIND_PTR(r->lists, &list, hit);
    if (hit) {
        *site = hit->value ? (uint32_t)hit->value : ca_snap_size_site(r->s, &r->sizes, size);
        return 0;
    }
    size_t n = ca_val_len(list);
    frame_in *in = calloc(n ? n : 1, sizeof *in);
    uintptr_t ips[CA_STACK_MAX_FRAMES];
    if (!in) return fail(r, "out of memory");
    size_t k = 0, py = 0;
    char at[160];
    for (size_t i = 0; i < n; i++) {
        const ca_val *f = ca_val_item(list, i);
        snprintf(at, sizeof at, "%s.frames[%zu]", where, i);
        if (f->kind != CA_VAL_DICT) {
            free(in);
            return fail(r, "%s: %s, expected a dict with filename, line, name", at, kind_of(f));
        }
        const char *name, *file;
        static const int64_t zero = 0;
        int64_t line;
        if (get_str(r, f, "name", at, &name) || get_str(r, f, "filename", at, &file) ||
            get_int(r, f, "line", at, INT64_MIN, &zero, &line)) {
            free(in);
            return -1;
        }
        name = name && *name ? name : "??";
        file = file && *file ? file : "??";
        if (hidden_frame(name, file)) continue;
        in[k++] = (frame_in){name, file, line < 0 ? 0u : line > UINT32_MAX ? UINT32_MAX : (unsigned)line};
        py += ends_with(file, ".py");
    }
    size_t m = 0;
    for (size_t i = 0; i < k && m < CA_STACK_MAX_FRAMES; i++) {
        if (py && !ends_with(in[i].file, ".py")) continue; /* the Python line, not the allocator's C++ */
        /* the file's bytes reach terminals and reports: control bytes escaped once, here */
        char name[CA_QUOTE_BUF(FRAME_TEXT)], file[CA_QUOTE_BUF(FRAME_TEXT)];
        uintptr_t ip = ca_named_frame(plain_text(in[i].name, name, sizeof name), plain_text(in[i].file, file, sizeof file),
                                      in[i].line, "snapshot");
        if (!ip) {
            free(in);
            return fail(r, "out of memory");
        }
        ips[m++] = ip;
    }
    free(in);
    uint32_t id = m ? ca_stacks_intern(r->s->stacks, ips, (unsigned)m) : CA_SITE_NONE;
    if ((hit = malloc(sizeof *hit))) {
        hit->key = list;
        hit->value = id;
        HASH_ADD_PTR(r->lists, key, hit);
    }
    *site = id ? id : ca_snap_size_site(r->s, &r->sizes, size);
    return 0;
}

/* The site of an allocation recorded without frames: its requested size. */
uint32_t ca_snap_size_site(ca_torch_snapshot *s, ca_snap_sizes **cache, uint64_t size) {
    ca_snap_sizes *hit;
    HASH_FIND(hh, *cache, &size, sizeof size, hit);
    if (hit) return hit->site;
    char b[32], name[96];
    ca_fmt_bytes(b, sizeof b, (double)size);
    snprintf(name, sizeof name, "allocations of %s (%llu B)", b, (unsigned long long)size);
    uintptr_t ip = ca_named_frame(name, "??", 0, "snapshot: no frames recorded");
    uint32_t site = ip ? ca_stacks_intern(s->stacks, &ip, 1) : CA_SITE_NONE;
    if ((hit = malloc(sizeof *hit))) {
        hit->key = size;
        hit->site = site;
        HASH_ADD(hh, *cache, key, sizeof hit->key, hit);
    }
    return site;
}

void ca_snap_sizes_free(ca_snap_sizes **cache) {
    ca_snap_sizes *q, *qt;
    HASH_ITER(hh, *cache, q, qt) {
        HASH_DEL(*cache, q);
        free(q);
    }
}

/* The site of a dict with optional "frames" (a block, a trace entry);
 * without frames, by `size`. */
static int site_of(sr *r, const ca_val *d, const char *where, uint64_t size, uint32_t *site) {
    const ca_val *fr;
    if (get_list(r, d, "frames", where, 0, &fr)) return -1;
    if (!fr) { /* the legacy format: frames in the block's history */
        const ca_val *h = ca_val_get(d, "history");
        const ca_val *h0 = ca_val_is_seq(h) ? ca_val_item(h, 0) : NULL;
        if (h0 && h0->kind == CA_VAL_DICT) {
            char at[160];
            snprintf(at, sizeof at, "%s.history[0]", where);
            if (get_list(r, h0, "frames", at, 0, &fr)) return -1;
            if (fr && ca_val_len(fr)) return frames_site(r, fr, at, size, site);
        }
    }
    if (fr && ca_val_len(fr)) return frames_site(r, fr, where, size, site);
    *site = ca_snap_size_site(r->s, &r->sizes, size);
    return 0;
}

static int dict_at(sr *r, const ca_val *v, const char *where) {
    if (v->kind != CA_VAL_DICT) return fail(r, "%s: %s, expected a dict", where, kind_of(v));
    return 0;
}

/* segment_pool_id: a pair of ints ((0, 0), PyTorch's default pool, when
 * missing or None; a CUDA graph's private pool otherwise). */
static int get_pool_id(sr *r, const ca_val *g, const char *where, int64_t out[2]) {
    const ca_val *v = ca_val_get(g, "segment_pool_id");
    out[0] = out[1] = 0;
    if (!v || v->kind == CA_VAL_NONE) return 0;
    const ca_val *a = ca_val_is_seq(v) && ca_val_len(v) == 2 ? ca_val_item(v, 0) : NULL;
    const ca_val *b = a ? ca_val_item(v, 1) : NULL;
    if (!a || a->kind != CA_VAL_INT || b->kind != CA_VAL_INT)
        return fail(r, "%s: 'segment_pool_id' is %s, expected a pair of ints", where,
                    ca_val_is_seq(v) ? "not a pair of ints" : kind_of(v));
    out[0] = a->i;
    out[1] = b->i;
    return 0;
}

static int by_place(const void *a, const void *b) {
    const ca_snap_segment *x = *(ca_snap_segment *const *)a, *y = *(ca_snap_segment *const *)b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

/* No two segments of a device share an address: each is one allocation of
 * the device's (cudaMalloc, or a range of virtual memory). */
static int segments_apart(sr *r) {
    ca_torch_snapshot *s = r->s;
    if (s->n_segs < 2) return 0;
    ca_snap_segment **order = malloc(s->n_segs * sizeof *order);
    if (!order) return fail(r, "out of memory");
    for (size_t i = 0; i < s->n_segs; i++) order[i] = &s->segs[i];
    qsort(order, s->n_segs, sizeof *order, by_place);
    int rc = 0;
    for (size_t i = 1; i < s->n_segs && !rc; i++) {
        const ca_snap_segment *a = order[i - 1], *b = order[i];
        if (a->device == b->device && b->addr - a->addr < a->total_size)
            rc = fail(r, "segments[%zu]: the segment [0x%llx, +%llu) overlaps segments[%zu] [0x%llx, +%llu) on device %d",
                      (size_t)(b - s->segs), (unsigned long long)b->addr, (unsigned long long)b->total_size,
                      (size_t)(a - s->segs), (unsigned long long)a->addr, (unsigned long long)a->total_size, b->device);
    }
    free(order);
    return rc;
}

static int read_segments(sr *r, const ca_val *segs) {
    ca_torch_snapshot *s = r->s;
    size_t n = ca_val_len(segs), nb = 0;
    if (spend(r, n, "segments")) return -1;
    for (size_t i = 0; i < n; i++) {
        nb += ca_val_len(ca_val_get(ca_val_item(segs, i), "blocks"));
        if (nb > r->budget) return spend(r, nb, "segments' blocks");
    }
    if (spend(r, nb, "segments' blocks")) return -1;
    s->segs = calloc(n ? n : 1, sizeof *s->segs);
    s->blocks = calloc(nb ? nb : 1, sizeof *s->blocks);
    if (!s->segs || !s->blocks) return fail(r, "out of memory");
    static const int64_t zero = 0;
    for (size_t i = 0; i < n; i++) {
        const ca_val *g = ca_val_item(segs, i);
        char where[64], at[160];
        place(where, sizeof where, "segments", i, SIZE_MAX);
        if (dict_at(r, g, where)) return -1;
        ca_snap_segment *sg = &s->segs[s->n_segs];
        int64_t dev;
        const char *type;
        int exp;
        if (get_int(r, g, "device", where, 0, &zero, &dev) || get_u64(r, g, "address", where, NULL, &sg->addr) ||
            get_u64(r, g, "total_size", where, NULL, &sg->total_size) || get_stream(r, g, where, &sg->stream) ||
            get_str(r, g, "segment_type", where, &type) || get_pool_id(r, g, where, sg->pool_id))
            return -1;
        if (dev >= MAX_DEVICES) return fail(r, "%s: device %lld: only devices 0 to %d are read", where, (long long)dev, MAX_DEVICES - 1);
        sg->device = (int)dev;
        sg->large = type ? !strcmp(type, "large") : -1;
        sg->expandable = ca_val_bool(ca_val_get(g, "is_expandable"), &exp) ? exp : -1;
        const ca_val *blocks;
        if (get_list(r, g, "blocks", where, 1, &blocks)) return -1;
        sg->first_block = s->n_blocks;
        uint64_t addr = sg->addr;
        for (size_t k = 0; k < ca_val_len(blocks) && s->n_blocks < nb; k++) {
            const ca_val *b = ca_val_item(blocks, k);
            snprintf(at, sizeof at, "%s.blocks[%zu]", where, k);
            if (dict_at(r, b, at)) return -1;
            ca_snap_block *bl = &s->blocks[s->n_blocks];
            const char *state;
            int64_t dflt_addr = (int64_t)(addr > INT64_MAX ? INT64_MAX : addr);
            if (get_u64(r, b, "size", at, NULL, &bl->size) || get_u64(r, b, "address", at, &dflt_addr, &bl->addr) ||
                get_str(r, b, "state", at, &state))
                return -1;
            int64_t dflt_req = (int64_t)(bl->size > INT64_MAX ? INT64_MAX : bl->size);
            if (get_u64(r, b, "requested_size", at, &dflt_req, &bl->requested)) return -1;
            if (!state) return fail(r, "%s: no 'state'", at);
            if (!strcmp(state, "active_allocated")) bl->state = CA_SNAP_ACTIVE_ALLOCATED;
            else if (!strcmp(state, "active_pending_free") || !strcmp(state, "active_awaiting_free"))
                bl->state = CA_SNAP_ACTIVE_PENDING_FREE;
            else if (!strcmp(state, "inactive")) bl->state = CA_SNAP_INACTIVE;
            else {
                char shown[CA_QUOTE_BUF(40)]; /* the file's bytes: a line break must not split the message */
                return fail(r, "%s: state '%s': accepted: active_allocated, active_pending_free, inactive", at,
                            ca_quote(state, strlen(state), 40, shown, sizeof shown));
            }
            if (bl->addr < addr || bl->addr - sg->addr > sg->total_size || bl->size > sg->total_size - (bl->addr - sg->addr))
                return fail(r, "%s: the block [0x%llx, +%llu) %s of segment [0x%llx, +%llu)", at,
                            (unsigned long long)bl->addr, (unsigned long long)bl->size,
                            bl->addr < addr && bl->addr >= sg->addr ? "overlaps the block before it, in the blocks"
                                                                    : "lies outside the bounds",
                            (unsigned long long)sg->addr, (unsigned long long)sg->total_size);
            if (bl->state != CA_SNAP_INACTIVE && site_of(r, b, at, bl->requested, &bl->site)) return -1;
            addr = bl->addr + bl->size;
            s->n_blocks++;
        }
        sg->n_blocks = s->n_blocks - sg->first_block;
        s->n_segs++;
    }
    return segments_apart(r);
}

static ca_snap_action action_of(const char *a) {
    static const struct {
        const char *name;
        ca_snap_action action;
    } known[] = {
        {"alloc", CA_SNAP_ALLOC},
        {"free_requested", CA_SNAP_FREE_REQUESTED},
        {"free_completed", CA_SNAP_FREE_COMPLETED},
        {"segment_alloc", CA_SNAP_SEGMENT_ALLOC},
        {"segment_free", CA_SNAP_SEGMENT_FREE},
        {"segment_map", CA_SNAP_SEGMENT_MAP},
        {"segment_unmap", CA_SNAP_SEGMENT_UNMAP},
        {"oom", CA_SNAP_OOM},
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(a, known[i].name)) return known[i].action;
    return CA_SNAP_OTHER;
}

static int read_entry(sr *r, const ca_val *e, const char *where, ca_snap_entry *out) {
    static const int64_t zero = 0, unknown = -1;
    if (dict_at(r, e, where)) return -1;
    const char *action;
    if (get_str(r, e, "action", where, &action)) return -1;
    if (!action) return fail(r, "%s: no 'action'", where);
    memset(out, 0, sizeof *out);
    out->action = action_of(action);
    if (out->action == CA_SNAP_OTHER) return 0;
    if (get_u64(r, e, "size", where, NULL, &out->size) || get_stream(r, e, where, &out->stream) ||
        get_int(r, e, "time_us", where, INT64_MIN, &unknown, &out->time_us))
        return -1;
    if (out->action == CA_SNAP_OOM) {
        if (get_u64(r, e, "device_free", where, &zero, &out->addr)) return -1;
    } else if (get_u64(r, e, "addr", where, NULL, &out->addr)) {
        return -1;
    }
    if (out->action == CA_SNAP_ALLOC || out->action == CA_SNAP_OOM) return site_of(r, e, where, out->size, &out->site);
    if (out->action == CA_SNAP_SEGMENT_ALLOC || out->action == CA_SNAP_SEGMENT_FREE ||
        out->action == CA_SNAP_SEGMENT_MAP || out->action == CA_SNAP_SEGMENT_UNMAP) {
        /* the call that mapped or unmapped, kept for --pickle; none when not recorded */
        const ca_val *fr;
        if (get_list(r, e, "frames", where, 0, &fr)) return -1;
        if (fr && ca_val_len(fr)) return frames_site(r, fr, where, out->size, &out->site);
    }
    return 0;
}

static int read_traces(sr *r, const ca_val *traces) {
    ca_torch_snapshot *s = r->s;
    size_t nd = ca_val_len(traces);
    if (nd > MAX_DEVICES) return fail(r, "device_traces: %zu devices: only %d are read", nd, MAX_DEVICES);
    if (!(s->traces = calloc(nd ? nd : 1, sizeof *s->traces))) return fail(r, "out of memory");
    s->n_traces = nd;
    for (size_t d = 0; d < nd; d++) {
        const ca_val *list = ca_val_item(traces, d);
        char where[64];
        place(where, sizeof where, "device_traces", d, SIZE_MAX);
        if (!ca_val_is_seq(list)) return fail(r, "%s: %s, expected a list of trace entries", where, kind_of(list));
        size_t n = ca_val_len(list);
        if (spend(r, n, where)) return -1;
        ca_snap_trace *t = &s->traces[d];
        if (!(t->e = malloc((n ? n : 1) * sizeof *t->e))) return fail(r, "out of memory");
        for (size_t i = 0; i < n; i++) {
            place(where, sizeof where, "device_traces", d, i);
            ca_snap_entry *e = &t->e[t->n];
            if (read_entry(r, ca_val_item(list, i), where, e)) return -1;
            if (e->action == CA_SNAP_OTHER) s->n_other++;
            else t->n++;
        }
    }
    return 0;
}

/* Is annotation a a step mark: 1 a step's START ("ProfilerStep#N" or
 * "step"), 2 the END of an optimizer step ("Optimizer.step#AdamW.step"), 0
 * neither. *t is its time_us, *dev its device (-1: any). */
static int step_mark(const ca_val *a, int64_t *t, int64_t *dev) {
    const char *name = ca_val_str(ca_val_get(a, "name")), *stage = ca_val_str(ca_val_get(a, "stage"));
    if (!name || !stage || !ca_val_int(ca_val_get(a, "time_us"), t)) return 0;
    if (!ca_val_int(ca_val_get(a, "device"), dev) || *dev < 0 || *dev >= MAX_DEVICES) *dev = -1;
    if (!strcmp(stage, "START") && (!strncmp(name, "ProfilerStep#", 13) || !strcmp(name, "step"))) return 1;
    if (!strcmp(stage, "END") && !strncmp(name, "Optimizer.step#", 15)) return 2;
    return 0;
}

/* external_annotations: [{"name", "stage": "START"|"END", "time_us", "device"}]
 * (torch.profiler's record_function ranges). A step starts at each START of
 * "ProfilerStep#N" or "step"; without those, one ends with each END of an
 * optimizer's step ("Optimizer.step#AdamW.step", which torch.optim records
 * when a profiler or the memory history runs): the boundary then goes after
 * the entries up to that END's time (the step's own), as 1 us later. Entries
 * of other shapes are skipped: these annotations are a hint, not the
 * snapshot's substance. They are sorted once, whatever order the file has. */
typedef struct step_at {
    int64_t t;
    int device;
} step_at;

static int by_time(const void *a, const void *b) {
    const step_at *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

static int read_steps(sr *r, const ca_val *ann) {
    ca_torch_snapshot *s = r->s;
    size_t n = ca_val_len(ann), starts = 0, k = 0;
    if (!n) return 0;
    if (spend(r, n, "external_annotations")) return -1;
    step_at *at = malloc(n * sizeof *at);
    s->steps = malloc(n * sizeof *s->steps);
    s->step_devices = malloc(n * sizeof *s->step_devices);
    if (!at || !s->steps || !s->step_devices) {
        free(at);
        return fail(r, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        int64_t t, dev;
        starts += step_mark(ca_val_item(ann, i), &t, &dev) == 1;
    }
    s->steps_from = starts ? CA_SNAP_STEPS_PROFILER : CA_SNAP_STEPS_OPTIMIZER;
    for (size_t i = 0; i < n; i++) {
        int64_t t, dev;
        int kind = step_mark(ca_val_item(ann, i), &t, &dev);
        if (!kind || (starts && kind != 1)) continue;
        if (kind == 2) t = t < INT64_MAX ? t + 1 : t;
        at[k++] = (step_at){t, (int)dev};
    }
    qsort(at, k, sizeof *at, by_time);
    for (size_t i = 0; i < k; i++) {
        s->steps[i] = at[i].t;
        s->step_devices[i] = at[i].device;
    }
    s->n_steps = k;
    free(at);
    if (!s->n_steps) s->steps_from = CA_SNAP_STEPS_NONE;
    return 0;
}

static void free_caches(sr *r) {
    ptr_site *p, *tmp;
    HASH_ITER(hh, r->lists, p, tmp) {
        HASH_DEL(r->lists, p);
        free(p);
    }
    ca_snap_sizes_free(&r->sizes);
}

int ca_torch_snapshot_from_doc(const ca_doc *doc, ca_torch_snapshot *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    s->expandable_segments = -1;
    const ca_val *root = ca_doc_root(doc);
    sr r = {.s = s, .budget = ca_doc_dicts(doc), .err = err, .errlen = errlen};
    if (errlen) err[0] = '\0';
    if (!root || root->kind != CA_VAL_DICT) {
        fail(&r, "not a PyTorch memory snapshot: the pickle holds %s, not a dict with 'segments' and "
                 "'device_traces' (torch.cuda.memory._dump_snapshot() writes one)",
             root ? kind_of(root) : "nothing");
        return -1;
    }
    const ca_val *segs, *traces, *ann;
    if (!ca_val_get(root, "segments") && !ca_val_get(root, "device_traces")) {
        fail(&r, "not a PyTorch memory snapshot: a dict without 'segments' and 'device_traces'");
        return -1;
    }
    if (!(s->stacks = ca_stacks_new(CA_STACK_MAX_FRAMES))) {
        fail(&r, "out of memory");
        return -1;
    }
    if (get_list(&r, root, "segments", "snapshot", 1, &segs) || get_list(&r, root, "device_traces", "snapshot", 1, &traces) ||
        get_list(&r, root, "external_annotations", "snapshot", 0, &ann) || read_segments(&r, segs) ||
        read_traces(&r, traces) || read_steps(&r, ann))
        goto fail;
    const ca_val *set = ca_val_get(root, "allocator_settings");
    int exp;
    if (ca_val_bool(ca_val_get(set, "expandable_segments"), &exp)) s->expandable_segments = exp;
    const char *conf = ca_val_str(ca_val_get(set, "PYTORCH_CUDA_ALLOC_CONF"));
    char shown[CA_QUOTE_BUF(FRAME_TEXT)];
    if (conf) snprintf(s->alloc_conf, sizeof s->alloc_conf, "%s", plain_text(conf, shown, sizeof shown));
    free_caches(&r);
    return 0;
fail:
    free_caches(&r);
    ca_torch_snapshot_free(s);
    return -1;
}

int ca_torch_snapshot_read(const void *buf, size_t len, ca_torch_snapshot *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    ca_doc *doc = ca_snapshot_unpickle(buf, len, CA_SNAPSHOT_MAX_INFLATED, err, errlen);
    if (!doc) return -1;
    int rc = ca_torch_snapshot_from_doc(doc, s, err, errlen);
    ca_doc_free(doc); /* frames live on as named frames; nothing else points into it */
    return rc;
}

void ca_torch_snapshot_free(ca_torch_snapshot *s) {
    ca_stacks_free(s->stacks);
    free(s->segs);
    free(s->blocks);
    for (size_t d = 0; s->traces && d < s->n_traces; d++) free(s->traces[d].e);
    free(s->traces);
    free(s->steps);
    free(s->step_devices);
    memset(s, 0, sizeof *s);
}

uint64_t ca_torch_snapshot_devices(const ca_torch_snapshot *s) {
    uint64_t m = 0;
    for (size_t d = 0; d < s->n_traces; d++)
        if (s->traces[d].n) m |= UINT64_C(1) << d;
    for (size_t i = 0; i < s->n_segs; i++) m |= UINT64_C(1) << s->segs[i].device;
    return m;
}
