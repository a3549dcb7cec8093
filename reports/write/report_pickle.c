/* PREFIX.pickle: a snapshot in PyTorch's _dump_snapshot format, as
 * reports/SNAPSHOT.md fixes it. Segments and blocks come from the tracker's
 * own state, copied under one lock with the event ring, so the two agree as
 * the viewer needs (it undoes the trace from the final state backwards). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/write/pickle.h"
#include "reports/write/report_internal.h"

static void frames(const ca_report_ctx *c, ca_pkl *p, uint32_t site) {
    ca_pkl_key(p, "frames");
    ca_pkl_list_begin(p);
    const ca_frame *fr[CA_STACK_MAX_FRAMES];
    size_t n = site ? ca_report_frames(c, site, fr, CA_STACK_MAX_FRAMES) : 0;
    for (size_t i = 0; i < n; i++) {
        ca_pkl_dict_begin(p);
        ca_pkl_kv_str(p, "filename", fr[i]->line ? fr[i]->file : fr[i]->module);
        ca_pkl_kv_uint(p, "line", fr[i]->line);
        ca_pkl_kv_str(p, "name", fr[i]->function);
        ca_pkl_dict_end(p);
    }
    ca_pkl_list_end(p);
}

/* cudalloc has one pool per device and stream, PyTorch's default pool:
 * (0, 0) as PyTorch writes it (MemoryViz prints "pool_id (0, 0)", and
 * "pool_id unknown" without it). A snapshot read back keeps its segments'
 * own (a CUDA graph's private pool). */
static void pool_id(ca_pkl *p, const int64_t id[2]) {
    ca_pkl_key(p, "segment_pool_id");
    ca_pkl_int_pair(p, id[0], id[1]);
}
static void default_pool(ca_pkl *p) { pool_id(p, (const int64_t[2]){0, 0}); }

static int64_t stream_of(const ca_track_snap *s, uint32_t idx) {
    return idx < s->n_streams ? (int64_t)s->streams[idx] : 0;
}

typedef struct seg_sums {
    uint64_t allocated, requested;
} seg_sums;

static void sum_block(void *ctx, uintptr_t addr, uint64_t size, const ca_live_view *live) {
    seg_sums *s = ctx;
    if (live) s->allocated += size, s->requested += live->requested;
}

typedef struct block_ctx {
    const ca_report_ctx *c;
    ca_pkl *p;
} block_ctx;

static void write_block(void *ctx, uintptr_t addr, uint64_t size, const ca_live_view *live) {
    block_ctx *b = ctx;
    ca_pkl *p = b->p;
    ca_pkl_dict_begin(p);
    ca_pkl_kv_uint(p, "address", addr);
    ca_pkl_kv_uint(p, "size", size);
    ca_pkl_kv_uint(p, "requested_size", live ? (live->requested < size ? live->requested : size) : 0);
    ca_pkl_kv_str(p, "state", live ? "active_allocated" : "inactive");
    frames(b->c, p, live ? live->site : 0);
    ca_pkl_dict_end(p);
}

static void trace_entry(const ca_report_ctx *c, ca_pkl *p, const char *action, const ca_ev *e, int oom) {
    const ca_track_snap *s = &c->snap;
    ca_pkl_dict_begin(p);
    ca_pkl_kv_str(p, "action", action);
    if (oom) {
        uint64_t dfree = 0, rec = ca_ev_oom_record(e);
        if (rec < s->n_ooms && s->ooms[rec].have_info) dfree = s->ooms[rec].info.device_free;
        /* An unlimited simulated device says SIZE_MAX; pickled ints stop at 2^63. */
        ca_pkl_kv_uint(p, "device_free", dfree > INT64_MAX ? (uint64_t)INT64_MAX : dfree);
    } else {
        ca_pkl_kv_uint(p, "addr", e->addr);
    }
    /* A failed request may ask 2^63 bytes or more (SIZE_MAX - 1000): pickled
     * ints stop at 2^63 - 1, the largest memory_viz reads. */
    uint64_t size = ca_ev_bytes(e);
    ca_pkl_kv_uint(p, "size", size > INT64_MAX ? (uint64_t)INT64_MAX : size);
    ca_pkl_kv_int(p, "stream", (int64_t)ca_ev_stream(s, e));
    ca_pkl_kv_int(p, "time_us", s->time_is_index ? (int64_t)e->ticks : ca_clock_epoch_us(&s->clock, e->ticks));
    if (!oom) default_pool(p);
    /* alloc/free: the allocation's stack; segment_map/unmap: the call that
     * mapped or unmapped (an allocation, a free); oom: the failing call */
    frames(c, p, e->site);
    ca_pkl_dict_end(p);
}

/* cudalloc's settings ("key:value,key:value", every key) as a dict, each
 * value typed: True/False a bool, digits an int, else the text. */
static void settings(ca_pkl *p, const char *conf) {
    ca_pkl_dict_begin(p);
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", conf);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *v = strchr(item, ':');
        if (!v) continue;
        *v++ = 0;
        size_t digits = strspn(v, "0123456789");
        if (!strcmp(v, "True") || !strcmp(v, "False")) ca_pkl_kv_bool(p, item, !strcmp(v, "True"));
        else if (*v && !v[digits] && digits < 19) ca_pkl_kv_int(p, item, strtoll(v, NULL, 10));
        else ca_pkl_kv_str(p, item, v);
    }
    ca_pkl_dict_end(p);
}

int ca_report_pickle(const ca_report_ctx *c, FILE *f) {
    const ca_track_snap *s = &c->snap;
    ca_pkl *p = ca_pkl_new_file(f);
    if (!p) return -1;
    int device = s->device >= 0 ? s->device : 0;
    ca_pkl_dict_begin(p);

    ca_pkl_key(p, "segments");
    ca_pkl_list_begin(p);
    for (size_t i = 0; i < c->frag.n_segs; i++) {
        const ca_frag_segment *g = &c->frag.segs[i];
        seg_sums sums = {0, 0};
        ca_frag_walk(s, g, sum_block, &sums);
        ca_pkl_dict_begin(p);
        ca_pkl_kv_int(p, "device", device);
        ca_pkl_kv_uint(p, "address", g->addr);
        ca_pkl_kv_uint(p, "total_size", g->reserved);
        ca_pkl_kv_int(p, "stream", stream_of(s, g->stream));
        ca_pkl_kv_str(p, "segment_type", g->pool == 1 ? "small" : "large");
        pool_id(p, g->pool_id);
        ca_pkl_kv_uint(p, "allocated_size", sums.allocated);
        ca_pkl_kv_uint(p, "active_size", sums.allocated);
        ca_pkl_kv_uint(p, "requested_size", sums.requested);
        int exp = g->expandable >= 0 ? g->expandable : c->opt.expandable != 0;
        ca_pkl_kv_bool(p, "is_expandable", exp);
        frames(c, p, 0);
        ca_pkl_key(p, "blocks");
        ca_pkl_list_begin(p);
        block_ctx bc = {c, p};
        ca_frag_walk(s, g, write_block, &bc);
        ca_pkl_list_end(p);
        ca_pkl_dict_end(p);
    }
    ca_pkl_list_end(p);

    ca_pkl_key(p, "device_traces");
    ca_pkl_list_begin(p);
    for (int d = 0; d < device; d++) {
        ca_pkl_list_begin(p);
        ca_pkl_list_end(p);
    }
    ca_pkl_list_begin(p);
    for (size_t i = 0; i < s->n_events; i++) {
        const ca_ev *e = &s->events[i];
        switch (ca_ev_kind(e)) {
        case CA_EVK_ALLOC: trace_entry(c, p, "alloc", e, 0); break;
        case CA_EVK_FREE:
            trace_entry(c, p, "free_requested", e, 0);
            trace_entry(c, p, "free_completed", e, 0);
            break;
        /* a whole segment (classic) is made and freed whole */
        case CA_EVK_MAP: trace_entry(c, p, ca_ev_whole(e) ? "segment_alloc" : "segment_map", e, 0); break;
        case CA_EVK_UNMAP: trace_entry(c, p, ca_ev_whole(e) ? "segment_free" : "segment_unmap", e, 0); break;
        case CA_EVK_OOM: trace_entry(c, p, "oom", e, 1); break;
        }
    }
    ca_pkl_list_end(p);
    ca_pkl_list_end(p);

    /* PyTorch's keys, as its _snapshot() writes them: PYTORCH_CUDA_ALLOC_CONF
     * is the user's own setting (CUDALLOC_CONF as set; offline, the
     * snapshot's), roundup_power2_divisions its 16 entries; memory_viz's
     * "Allocator Settings" view prints the dict as indented JSON, so
     * cudalloc's settings in force go in a dict of their own, one line each. */
    ca_pkl_key(p, "allocator_settings");
    ca_pkl_dict_begin(p);
    ca_pkl_kv_str(p, "PYTORCH_CUDA_ALLOC_CONF", c->opt.user_conf ? c->opt.user_conf : "");
    ca_pkl_kv_int(p, "max_split_size", -1);
    ca_pkl_kv_float(p, "garbage_collection_threshold", 0.0);
    ca_pkl_kv_bool(p, "expandable_segments", c->opt.expandable != 0);
    ca_pkl_kv_int(p, "pinned_num_register_threads", 1);
    ca_pkl_kv_bool(p, "release_lock_on_cudamalloc", 0);
    ca_pkl_kv_bool(p, "pinned_use_cuda_host_register", 0);
    ca_pkl_key(p, "roundup_power2_divisions");
    ca_pkl_dict_begin(p);
    for (unsigned k = 1; k <= 32768; k *= 2) { /* "1" .. "32768": 0, rounding off */
        char key[8];
        snprintf(key, sizeof key, "%u", k);
        ca_pkl_kv_int(p, key, 0);
    }
    ca_pkl_dict_end(p);
    if (c->opt.alloc_conf) {
        ca_pkl_key(p, "cudalloc");
        settings(p, c->opt.alloc_conf);
    }
    ca_pkl_dict_end(p);

    ca_pkl_dict_end(p);
    int rc = ca_pkl_finish(p);
    ca_pkl_free(p);
    return rc ? -1 : 0;
}
