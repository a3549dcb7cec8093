/* PREFIX.json: the report for programs; schema in REPORT.md. */
#include <string.h>

#include "reports/write/json.h"
#include "reports/diagnose/oom.h"
#include "reports/track/loops.h"
#include "reports/write/report_internal.h"

static void frames(const ca_report_ctx *c, ca_json *j, uint32_t site) {
    ca_json_key(j, "frames");
    ca_json_arr_begin(j);
    const ca_frame *fr[CA_STACK_MAX_FRAMES];
    size_t n = ca_report_frames(c, site, fr, CA_STACK_MAX_FRAMES);
    for (size_t i = 0; i < n; i++) {
        ca_json_obj_begin(j);
        ca_json_kv_str(j, "function", fr[i]->function);
        ca_json_kv_str(j, "file", fr[i]->file);
        ca_json_kv_uint(j, "line", fr[i]->line);
        ca_json_kv_str(j, "module", fr[i]->module);
        ca_json_obj_end(j);
    }
    ca_json_arr_end(j);
    char label[512];
    ca_report_site_label(c, site, label, sizeof label);
    ca_json_kv_str(j, "site", label);
}

/* What a growing site's entry says in "leaks" and in a finding's "sites". */
static void site_fields(const ca_report_ctx *c, ca_json *j, const ca_leak *l) {
    ca_json_kv_str(j, "kind", l->growing_buffer ? "growing_buffer" : "accumulating");
    ca_json_kv_double(j, "bytes_per_iteration", l->bytes_per_iteration);
    ca_json_kv_double(j, "count_per_iteration", l->count_per_iteration);
    ca_json_kv_uint(j, "live_bytes", l->live_bytes);
    ca_json_kv_uint(j, "live_count", l->live_count);
    frames(c, j, l->site);
}

static void kv_opt_uint(ca_json *j, const char *k, int have, uint64_t v) {
    if (have) ca_json_kv_uint(j, k, v);
    else {
        ca_json_key(j, k);
        ca_json_null(j);
    }
}

static void kv_opt_int(ca_json *j, const char *k, int have, int64_t v) {
    if (have) ca_json_kv_int(j, k, v);
    else {
        ca_json_key(j, k);
        ca_json_null(j);
    }
}

/* Statistics under the names torch.cuda.memory_stats() uses. */
static void stats(const ca_report_ctx *c, ca_json *j) {
    static const char *const pools[CA_POOL_KINDS] = {"all", "small_pool", "large_pool"};
    ca_json_key(j, "stats");
    ca_json_obj_begin(j);
    char key[96];
    if (c->have_stats) {
        const ca_stats *st = &c->stats;
        const struct {
            const char *name;
            const ca_stat *s;
        } groups[] = {
            {"allocation", st->allocation},         {"segment", st->segment},
            {"active", st->active},                 {"allocated_bytes", st->allocated_bytes},
            {"reserved_bytes", st->reserved_bytes}, {"active_bytes", st->active_bytes},
            {"requested_bytes", st->requested_bytes},
        };
        for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
            for (int p = 0; p < CA_POOL_KINDS; p++) {
                const ca_stat *s = &groups[g].s[p];
                const struct {
                    const char *f;
                    int64_t v;
                } fields[] = {{"current", s->current}, {"peak", s->peak}, {"allocated", s->allocated}, {"freed", s->freed}};
                for (size_t k = 0; k < 4; k++) {
                    snprintf(key, sizeof key, "%s.%s.%s", groups[g].name, pools[p], fields[k].f);
                    ca_json_kv_int(j, key, fields[k].v);
                }
            }
        ca_json_kv_int(j, "num_alloc_retries", st->num_alloc_retries);
        ca_json_kv_int(j, "num_ooms", st->num_ooms);
        ca_json_kv_int(j, "num_device_alloc", st->num_device_alloc);
        ca_json_kv_int(j, "num_device_free", st->num_device_free);
        ca_json_kv_int(j, "num_granules_moved", st->num_granules_moved);
    } else {
        /* Offline without an allocator: what the tracker counted itself. */
        const ca_track_snap *s = &c->snap;
        ca_json_kv_uint(j, "allocation.all.current", s->n_live);
        ca_json_kv_uint(j, "allocation.all.allocated", s->n_allocs);
        ca_json_kv_uint(j, "allocation.all.freed", s->n_frees);
        ca_json_kv_uint(j, "allocated_bytes.all.current", s->allocated);
        ca_json_kv_uint(j, "allocated_bytes.all.peak", s->peak_allocated);
        ca_json_kv_uint(j, "reserved_bytes.all.current", s->reserved);
        ca_json_kv_uint(j, "reserved_bytes.all.peak", s->peak_reserved);
        ca_json_kv_uint(j, "requested_bytes.all.current", s->requested);
        ca_json_kv_uint(j, "num_ooms", s->n_ooms_total);
    }
    ca_json_obj_end(j);
}

/* Offline: the run replayed under cudalloc's allocator. */
static void replay(const ca_report_ctx *c, ca_json *j) {
    const ca_report_replay *r = c->opt.replay;
    ca_json_key(j, "replay");
    ca_json_obj_begin(j);
    ca_json_kv_str(j, "allocator", r->expandable ? "expandable" : "classic");
    ca_json_kv_uint(j, "allocations", r->allocations);
    ca_json_kv_uint(j, "peak_requested_bytes", r->peak_requested);
    ca_json_kv_uint(j, "peak_reserved_bytes", r->peak_reserved);
    ca_json_kv_uint(j, "recorded_peak_reserved_bytes", c->snap.peak_reserved);
    ca_json_kv_uint(j, "min_capacity_bytes", r->min_capacity);
    kv_opt_uint(j, "capacity_bytes", r->capacity != 0, r->capacity);
    kv_opt_uint(j, "ooms_at_capacity", r->capacity != 0, r->ooms_at_capacity);
    kv_opt_uint(j, "missing_bytes", r->capacity != 0, c->missing);
    ca_json_obj_end(j);
}

/* Blocks repeated inside one pass (looked for with fewer than two whole
 * iterations): null when none. */
static void blocks(const ca_report_ctx *c, ca_json *j) {
    ca_json_key(j, "blocks");
    if (!c->have_blocks) {
        ca_json_null(j);
        return;
    }
    const ca_blocks *b = &c->blocks;
    ca_json_obj_begin(j);
    ca_json_kv_uint(j, "count", b->count);
    ca_json_kv_uint(j, "allocations_per_block", b->allocations);
    ca_json_kv_str(j, "shape", ca_loop_shape_name((ca_loop_shape)b->shape));
    ca_json_key(j, "inside");
    if (b->pass) ca_json_str(j, ca_pass_name((ca_pass_kind)b->pass));
    else ca_json_null(j);
    ca_json_kv_uint(j, "swing_bytes", b->swing);
    ca_json_kv_int(j, "kept_per_block_bytes", b->rise);
    ca_json_obj_end(j);
}

/* The peak and what held it, by the frame that names each call site. */
static void peak(const ca_report_ctx *c, ca_json *j) {
    ca_json_key(j, "peak");
    if (!c->have_peak) {
        ca_json_null(j);
        return;
    }
    ca_json_obj_begin(j);
    ca_json_kv_uint(j, "allocated_bytes", c->peak.allocated);
    ca_json_kv_uint(j, "event", c->peak.seq);
    ca_json_kv_uint(j, "iteration", c->peak.iteration);
    ca_json_kv_uint(j, "live_allocations", c->peak.count);
    ca_json_key(j, "holders");
    ca_json_arr_begin(j);
    for (size_t i = 0; i < c->n_holders; i++) {
        ca_json_obj_begin(j);
        ca_json_kv_str(j, "site", c->holders[i].label);
        ca_json_kv_uint(j, "bytes", c->holders[i].bytes);
        ca_json_kv_uint(j, "allocations", c->holders[i].count);
        ca_json_kv_uint(j, "call_sites", c->holders[i].sites);
        ca_json_obj_end(j);
    }
    ca_json_arr_end(j);
    ca_json_kv_uint(j, "elsewhere_bytes", c->others_bytes);
    ca_json_obj_end(j);
}

int ca_report_json(const ca_report_ctx *c, FILE *f) {
    const ca_track_snap *s = &c->snap;
    ca_json *j = ca_json_new_file(f, 1);
    if (!j) return -1;
    ca_json_obj_begin(j);
    ca_json_kv_int(j, "version", 1);
    ca_json_kv_str(j, "generator", "cudalloc");
    if (c->opt.source_name) ca_json_kv_str(j, "trace", c->opt.source_name);
    kv_opt_int(j, "rank", c->opt.rank >= 0, c->opt.rank);
    ca_json_kv_int(j, "device", s->device);
    ca_json_key(j, "verdict");
    ca_json_obj_begin(j);
    ca_json_kv_str(j, "code", ca_report_verdict_code(c->verdict));
    ca_json_kv_str(j, "text", c->verdict_line);
    if (c->verdict == CA_VERDICT_DOES_NOT_FIT) ca_json_kv_str(j, "besides", ca_report_verdict_code(c->base_verdict));
    ca_json_obj_end(j);

    ca_json_key(j, "iterations");
    ca_json_obj_begin(j);
    ca_json_kv_uint(j, "count", s->iteration);
    ca_json_kv_str(j, "source", ca_iter_source_name(s->source));
    ca_json_kv_uint(j, "warmup", s->warmup);
    kv_opt_int(j, "detected_period_allocations", s->source == CA_ITER_DETECTED, s->detect_period);
    ca_json_key(j, "explicit_marks");
    if (s->source == CA_ITER_EXPLICIT && c->opt.marks_name) ca_json_str(j, c->opt.marks_name);
    else ca_json_null(j);
    blocks(c, j);
    ca_json_key(j, "marks");
    ca_json_obj_begin(j);
    ca_json_kv_uint(j, "explicit", s->marks[CA_ITER_EXPLICIT]);
    ca_json_kv_uint(j, "nvtx", s->marks[CA_ITER_NVTX]);
    ca_json_kv_uint(j, "detected", s->marks[CA_ITER_DETECTED]);
    ca_json_obj_end(j);
    ca_json_key(j, "boundaries");
    ca_json_arr_begin(j);
    for (size_t i = 0; i < s->n_bounds; i++) {
        const ca_boundary *b = &s->bounds[i];
        ca_json_obj_begin(j);
        ca_json_kv_uint(j, "iteration", b->iteration);
        ca_json_kv_double(j, "time", ca_report_time(c, b->ticks));
        ca_json_kv_uint(j, "allocated_bytes", b->allocated);
        ca_json_kv_uint(j, "reserved_bytes", b->reserved);
        ca_json_kv_uint(j, "peak_allocated_bytes", b->peak_allocated);
        ca_json_kv_uint(j, "peak_reserved_bytes", b->peak_reserved);
        ca_json_kv_uint(j, "live_allocations", b->live_count);
        ca_json_obj_end(j);
    }
    ca_json_arr_end(j);
    ca_json_obj_end(j);

    ca_json_key(j, "summary");
    ca_json_obj_begin(j);
    ca_json_kv_uint(j, "allocated_bytes", s->allocated);
    ca_json_kv_uint(j, "requested_bytes", s->requested);
    ca_json_kv_uint(j, "reserved_bytes", s->reserved);
    ca_json_kv_uint(j, "peak_allocated_bytes", s->peak_allocated);
    ca_json_kv_uint(j, "peak_reserved_bytes", s->peak_reserved);
    ca_json_kv_uint(j, "live_allocations", s->n_live);
    ca_json_kv_uint(j, "allocations", s->n_allocs);
    ca_json_kv_uint(j, "frees", s->n_frees);
    ca_json_kv_uint(j, "events", s->seq);
    ca_json_kv_uint(j, "events_kept", s->n_events);
    ca_json_obj_end(j);
    peak(c, j);

    ca_json_key(j, "leaks");
    ca_json_arr_begin(j);
    for (size_t k = 0; k < c->n_findings && k < c->n_leak_findings; k++) {
        const ca_finding *fd = &c->findings[k];
        for (size_t i = fd->first; i < fd->first + fd->n_sites; i++) {
            const ca_leak *l = &c->leaks[i];
            ca_json_obj_begin(j);
            site_fields(c, j, l);
            ca_json_kv_uint(j, "first_iteration", l->first_iteration);
            ca_json_kv_uint(j, "growth_since_iteration", l->growth_since);
            ca_json_kv_uint(j, "leaked_bytes", l->leaked_bytes);
            kv_opt_int(j, "projected_oom_iteration", l->projected_oom_iteration >= 0, l->projected_oom_iteration);
            ca_json_kv_str(j, "advice", fd->advice);
            ca_json_kv_uint(j, "finding", k);
            ca_json_obj_end(j);
        }
    }
    ca_json_arr_end(j);
    ca_json_kv_double(j, "leak_bytes_per_iteration", c->leak_rate);
    kv_opt_int(j, "leak_projected_oom_iteration", c->leak_oom_iteration >= 0, c->leak_oom_iteration);
    const ca_oom_record *ran_out = ca_report_ran_out(c);
    kv_opt_int(j, "ran_out_iteration", ran_out != NULL, ran_out ? ran_out->iteration : 0);
    ca_json_kv_uint(j, "working_set_bytes", c->working_set);

    static const char *const kinds[] = {"site", "together", "buffer"};
    ca_json_key(j, "findings");
    ca_json_arr_begin(j);
    for (size_t k = 0; k < c->n_findings; k++) {
        const ca_finding *fd = &c->findings[k];
        char text[1024];
        ca_json_obj_begin(j);
        ca_json_kv_str(j, "severity", fd->note ? "note" : "leak");
        ca_json_kv_bool(j, "handoff", fd->handoff);
        ca_json_kv_str(j, "kind", kinds[fd->kind]);
        ca_json_kv_bool(j, "retained_graph", fd->retained_graph);
        ca_report_finding_title(c, k, text, sizeof text);
        ca_json_kv_str(j, "title", text);
        ca_json_key(j, "root");
        if (fd->has_root) {
            ca_report_finding_root(c, k, text, sizeof text);
            ca_json_str(j, text);
        } else {
            ca_json_null(j);
        }
        ca_json_kv_double(j, "bytes_per_iteration", fd->bytes_per_iteration);
        ca_json_kv_double(j, "count_per_iteration", fd->count_per_iteration);
        ca_json_kv_uint(j, "growth_since_iteration", fd->growth_since);
        ca_json_kv_uint(j, "first_iteration", fd->first_iteration);
        ca_json_kv_uint(j, "live_bytes", fd->live_bytes);
        ca_json_kv_uint(j, "live_count", fd->live_count);
        ca_json_kv_uint(j, "leaked_bytes", fd->leaked_bytes);
        ca_json_kv_double(j, "working_set_share", fd->working_set_share);
        kv_opt_int(j, "projected_oom_iteration", fd->projected_oom_iteration >= 0, fd->projected_oom_iteration);
        ca_json_key(j, "iterations_to_fill");
        if (fd->iterations_to_fill >= 0) ca_json_double(j, fd->iterations_to_fill);
        else ca_json_null(j);
        ca_json_kv_str(j, "advice", fd->advice);
        ca_json_key(j, "sites");
        ca_json_arr_begin(j);
        for (size_t i = fd->first; i < fd->first + fd->n_sites; i++) {
            ca_json_obj_begin(j);
            site_fields(c, j, &c->leaks[i]);
            ca_json_obj_end(j);
        }
        ca_json_arr_end(j);
        ca_json_obj_end(j);
    }
    ca_json_arr_end(j);
    ca_json_key(j, "warnings");
    ca_json_arr_begin(j);
    if (*c->caching_warning) ca_json_str(j, c->caching_warning);
    ca_json_arr_end(j);

    const ca_frag *fr = &c->frag;
    ca_json_key(j, "fragmentation");
    ca_json_obj_begin(j);
    ca_json_kv_uint(j, "reserved_bytes", fr->reserved);
    ca_json_kv_uint(j, "allocated_bytes", fr->allocated);
    ca_json_kv_uint(j, "cached_free_bytes", fr->cached_free);
    ca_json_kv_uint(j, "largest_free_block", fr->largest_free);
    ca_json_kv_double(j, "fragmentation", fr->fragmentation);
    ca_json_kv_uint(j, "largest_allocation_now", fr->largest_allocation_now);
    kv_opt_uint(j, "device_free_bytes", fr->have_device, fr->device_free);
    kv_opt_uint(j, "device_total_bytes", fr->have_device, fr->device_total);
    ca_json_key(j, "external");
    if (c->opt.external_known) {
        ca_json_obj_begin(j);
        ca_json_kv_uint(j, "allocation_bytes", c->opt.external_alloc_bytes);
        ca_json_kv_uint(j, "pool_bytes", c->opt.external_pool_bytes);
        ca_json_obj_end(j);
    } else {
        ca_json_null(j);
    }
    if (!c->opt.external_known && c->opt.external_note) ca_json_kv_str(j, "external_note", c->opt.external_note);
    ca_json_key(j, "free_block_histogram");
    ca_json_arr_begin(j);
    for (int b = 0; b < CA_FRAG_BINS; b++) {
        ca_json_obj_begin(j);
        ca_json_kv_uint(j, "min_bytes", ca_frag_bin_min(b));
        kv_opt_uint(j, "max_bytes", b + 1 < CA_FRAG_BINS, ca_frag_bin_min(b + 1));
        ca_json_kv_uint(j, "count", fr->hist_count[b]);
        ca_json_kv_uint(j, "bytes", fr->hist_bytes[b]);
        ca_json_obj_end(j);
    }
    ca_json_arr_end(j);
    ca_json_key(j, "segments");
    ca_json_arr_begin(j);
    for (size_t i = 0; i < fr->n_segs; i++) {
        const ca_frag_segment *g = &fr->segs[i];
        ca_json_obj_begin(j);
        ca_json_kv_uint(j, "address", g->addr);
        ca_json_kv_str(j, "pool", g->pool == 1 ? "small" : g->pool == 2 ? "large" : "unknown");
        ca_json_kv_uint(j, "stream", g->stream < s->n_streams ? s->streams[g->stream] : 0);
        ca_json_kv_uint(j, "reserved_bytes", g->reserved);
        ca_json_kv_uint(j, "allocated_bytes", g->allocated);
        ca_json_kv_uint(j, "cached_free_bytes", g->cached_free);
        ca_json_kv_uint(j, "largest_free_block", g->largest_free);
        ca_json_kv_double(j, "fragmentation", g->fragmentation);
        ca_json_kv_uint(j, "blocks", g->n_blocks);
        ca_json_kv_uint(j, "free_blocks", g->n_free);
        ca_json_obj_end(j);
    }
    ca_json_arr_end(j);
    ca_json_obj_end(j);

    ca_json_key(j, "ooms");
    ca_json_arr_begin(j);
    for (size_t i = 0; i < s->n_ooms; i++) {
        const ca_oom_record *r = &s->ooms[i];
        ca_json_obj_begin(j);
        ca_json_kv_uint(j, "iteration", r->iteration);
        ca_json_kv_double(j, "time", ca_report_time(c, r->ticks));
        ca_json_kv_uint(j, "requested_bytes", r->requested);
        ca_json_kv_uint(j, "stream", r->stream < s->n_streams ? s->streams[r->stream] : 0);
        if (r->have_info) {
            ca_json_kv_uint(j, "device_total_bytes", r->info.device_total);
            ca_json_kv_uint(j, "device_free_bytes", r->info.device_free);
            ca_json_kv_uint(j, "allocated_bytes", r->info.allocated);
            ca_json_kv_uint(j, "reserved_bytes", r->info.reserved);
            ca_json_kv_uint(j, "cached_free_bytes", r->info.free_cached);
            ca_json_kv_uint(j, "largest_free_block", r->info.largest_free);
            ca_json_kv_str(j, "verdict", ca_oom_verdict_name(r->verdict));
            ca_json_kv_str(j, "verdict_text", ca_oom_verdict_text(r->verdict));
            ca_json_kv_uint(j, "leaked_bytes", r->leaked_bytes);
            ca_json_key(j, "advice");
            ca_json_arr_begin(j);
            for (const char *const *a = ca_oom_advice(r->verdict); *a; a++) ca_json_str(j, *a);
            ca_json_arr_end(j);
        } else {
            ca_json_key(j, "verdict");
            ca_json_null(j);
        }
        frames(c, j, r->site);
        ca_json_key(j, "top_sites");
        ca_json_arr_begin(j);
        for (uint32_t k = 0; k < r->n_top; k++) {
            ca_json_obj_begin(j);
            ca_json_kv_uint(j, "live_bytes", r->top_bytes[k]);
            ca_json_kv_uint(j, "live_count", r->top_count[k]);
            frames(c, j, r->top_site[k]);
            ca_json_obj_end(j);
        }
        ca_json_arr_end(j);
        ca_json_obj_end(j);
    }
    ca_json_arr_end(j);
    ca_json_kv_uint(j, "ooms_total", s->n_ooms_total);

    if (c->opt.replay) replay(c, j);
    stats(c, j);
    ca_json_obj_end(j);
    int rc = ca_json_finish(j);
    ca_json_free(j);
    return rc ? -1 : 0;
}
