/* The live figures (live.h): the leak rule and the findings of the exit
 * summary on the tracker's state without its ring, and the two files they
 * are written to. */
#include "reports/write/live.h"

#include <stdlib.h>
#include <string.h>

#include "reports/write/json.h"
#include "reports/write/report_internal.h"

#define RECENT 8 /* iterations the rates are measured over */

static void recent_rates(const ca_track_snap *s, ca_live_figures *g) {
    if (s->n_bounds < 2) return;
    size_t last = s->n_bounds - 1, k = last < RECENT ? last : RECENT;
    const ca_boundary *a = &s->bounds[last - k], *b = &s->bounds[last];
    g->growth_per_iteration = ((double)b->allocated - (double)a->allocated) / (double)k;
    if (!s->time_is_index)
        g->seconds_per_iteration = (double)(ca_clock_since_start_ns(&s->clock, b->ticks) -
                                            ca_clock_since_start_ns(&s->clock, a->ticks)) / 1e9 / (double)k;
}

/* The sites' frames, then the titles, as the reports name findings. */
static void name_findings(ca_report_ctx *c, ca_live_figures *g) {
    if (c->snap.site_mode == CA_SITES_STACK) {
        if (!(c->sym = ca_symtab_new())) return;
        for (size_t i = 0; i < c->n_leaks; i++) {
            const uintptr_t *ips;
            unsigned n = ca_stacks_get(c->snap.stacks, c->leaks[i].site, &ips);
            for (unsigned k = 0; k < n; k++) ca_symtab_add(c->sym, ips[k]);
        }
        ca_symtab_resolve(c->sym, 1, 2000);
    }
    for (uint32_t i = 0; i < g->n_findings && i < CA_LIVE_FINDINGS; i++)
        ca_report_finding_title(c, i, g->findings[i].title, sizeof g->findings[i].title);
}

int ca_live_judge(ca_tracker *t, ca_allocator *a, int titles, ca_live_figures *g) {
    memset(g, 0, sizeof *g);
    ca_report_ctx c;
    memset(&c, 0, sizeof c);
    ca_report_options_default(&c.opt);
    /* the allocator's views first: never its locks under the tracker's */
    ca_stats st;
    if (a) ca_get_stats(a, &st);
    if (ca_tracker_snapshot_light(t, &c.snap) != 0) return -1;
    const ca_track_snap *s = &c.snap;
    if (ca_frag_compute(s, a, &c.frag) != 0) {
        ca_track_snap_free(&c.snap);
        return -1;
    }
    g->device = s->device;
    g->iteration = s->iteration;
    g->source = s->source;
    g->seconds = (double)ca_clock_since_start_ns(&s->clock, ca_ticks()) / 1e9;
    g->allocated = c.frag.allocated;
    g->reserved = c.frag.reserved;
    g->peak_allocated = s->peak_allocated;
    g->peak_reserved = a ? (uint64_t)st.reserved_bytes[CA_POOL_ALL].peak : s->peak_reserved;
    g->cached_free = c.frag.cached_free;
    g->largest_free = c.frag.largest_free;
    g->fragmentation = c.frag.fragmentation;
    g->have_device = c.frag.have_device;
    g->device_total = c.frag.device_total;
    g->device_free = c.frag.device_free;
    g->allocations = s->n_allocs;
    g->ooms = s->n_ooms_total;
    recent_rates(s, g);
    /* the findings, as ca_report_ctx_init finds them */
    if (c.frag.have_device) c.have_headroom = 1, c.headroom = ca_leak_headroom(s, c.frag.device_free + c.frag.cached_free);
    c.n_growing = ca_leaks_find(s, c.have_headroom, c.headroom, &c.leaks);
    c.n_findings = ca_findings_find(s, c.leaks, c.n_growing, c.have_headroom, c.headroom, &c.findings, &c.n_leaks);
    while (c.n_leak_findings < c.n_findings && !c.findings[c.n_leak_findings].note) c.n_leak_findings++;
    int ran_out = ca_report_ran_out(&c) != NULL; /* it happened: no projection */
    g->n_findings = (uint32_t)c.n_leak_findings;
    for (size_t i = 0; i < c.n_leak_findings && i < CA_LIVE_FINDINGS; i++) {
        const ca_finding *f = &c.findings[i];
        g->findings[i] = (ca_live_finding){
            .site = c.leaks[f->first].site, .root_ip = f->has_root ? f->root_ip : 0,
            .bytes_per_iteration = f->bytes_per_iteration, .growth_since = f->growth_since,
            .leaked_bytes = f->leaked_bytes, .n_sites = (uint32_t)f->n_sites,
            .oom_iteration = ran_out ? -1 : f->projected_oom_iteration};
    }
    if (titles) name_findings(&c, g);
    ca_report_ctx_free(&c);
    return 0;
}

double ca_live_oom_time(const ca_live_figures *g, const ca_live_finding *f, double unix_time) {
    if (f->oom_iteration < 0 || !(g->seconds_per_iteration > 0)) return -1;
    double left = (double)f->oom_iteration - (double)g->iteration;
    return unix_time + (left > 0 ? left : 0) * g->seconds_per_iteration;
}

char *ca_live_finding_json(const char *event, const ca_live_figures *g, const ca_live_finding *f, double unix_time) {
    ca_json *j = ca_json_new_buf(0);
    if (!j) return NULL;
    double at = ca_live_oom_time(g, f, unix_time);
    ca_json_obj_begin(j);
    ca_json_kv_str(j, "event", event);
    ca_json_kv_int(j, "device", g->device);
    ca_json_kv_uint(j, "iteration", g->iteration);
    ca_json_kv_double(j, "bytes_per_iteration", f->bytes_per_iteration);
    ca_json_kv_uint(j, "growth_since", f->growth_since);
    ca_json_kv_uint(j, "leaked_bytes", f->leaked_bytes);
    ca_json_kv_uint(j, "n_sites", f->n_sites);
    ca_json_key(j, "oom_iteration");
    f->oom_iteration >= 0 ? ca_json_int(j, f->oom_iteration) : ca_json_null(j);
    ca_json_key(j, "oom_time");
    at >= 0 ? ca_json_double(j, at) : ca_json_null(j);
    ca_json_kv_str(j, "title", f->title);
    ca_json_obj_end(j);
    char *out = NULL;
    if (ca_json_finish(j) == 0) {
        size_t n;
        const char *d = ca_json_data(j, &n);
        if ((out = malloc(n + 1))) memcpy(out, d, n + 1);
    }
    ca_json_free(j);
    return out;
}

/* A title on one line: a newline in a file or function name would end it. */
static void one_line(const char *in, char *out, size_t n) {
    size_t k = 0;
    for (; *in && k + 1 < n; in++) out[k++] = (*in == '\n' || *in == '\r') ? ' ' : *in;
    out[k] = 0;
}

void ca_live_write_status(FILE *f, const ca_live_process *p, const ca_live_figures *figs, size_t n) {
    char program[256];
    one_line(p->program ? p->program : "", program, sizeof program);
    fprintf(f, "cudalloc-status 1\npid %ld\nstart %llu\nrank %d\ntime %.3f\nprogram %s\ndevices %zu\n", p->pid,
            p->start_ticks, p->rank, p->unix_time, program, n);
    for (size_t d = 0; d < n; d++) {
        const ca_live_figures *g = &figs[d];
        fprintf(f,
                "device %d\niteration %u\nsource %s\nseconds %.3f\nseconds_per_iteration %.6f\n"
                "reserved %llu\nallocated %llu\npeak_allocated %llu\npeak_reserved %llu\ncached_free %llu\n"
                "largest_free %llu\nfragmentation %.6f\ndevice_total %llu\ndevice_free %llu\n"
                "growth_per_iteration %.1f\nallocations %llu\nooms %llu\nleaks %u\n",
                g->device, g->iteration, ca_iter_source_name(g->source), g->seconds, g->seconds_per_iteration,
                (unsigned long long)g->reserved, (unsigned long long)g->allocated,
                (unsigned long long)g->peak_allocated, (unsigned long long)g->peak_reserved,
                (unsigned long long)g->cached_free, (unsigned long long)g->largest_free, g->fragmentation,
                (unsigned long long)(g->have_device ? g->device_total : 0),
                (unsigned long long)(g->have_device ? g->device_free : 0), g->growth_per_iteration,
                (unsigned long long)g->allocations, (unsigned long long)g->ooms, g->n_findings);
        for (uint32_t i = 0; i < g->n_findings && i < CA_LIVE_FINDINGS; i++) {
            const ca_live_finding *x = &g->findings[i];
            char title[CA_LIVE_TITLE];
            one_line(x->title, title, sizeof title);
            fprintf(f, "finding %.1f %u %lld %.0f %u %s\n", x->bytes_per_iteration, x->growth_since,
                    (long long)x->oom_iteration, ca_live_oom_time(g, x, p->unix_time), x->n_sites,
                    *title ? title : "(not named yet)");
        }
    }
}

/* One metric family: its help, its type, a sample per device. */
typedef struct metric {
    const char *name, *type, *help;
    double (*value)(const ca_live_figures *g);
} metric;

#define FIG(field)                                                                    \
    static double field##_of(const ca_live_figures *g) { return (double)g->field; }
FIG(reserved)
FIG(allocated)
FIG(peak_allocated)
FIG(peak_reserved)
FIG(cached_free)
FIG(largest_free)
FIG(fragmentation)
FIG(iteration)
FIG(growth_per_iteration)
FIG(allocations)
FIG(ooms)
static double total_of(const ca_live_figures *g) { return g->have_device ? (double)g->device_total : 0; }
static double leaks_of(const ca_live_figures *g) { return (double)g->n_findings; }
static double leak_rate_of(const ca_live_figures *g) {
    double r = 0;
    for (uint32_t i = 0; i < g->n_findings && i < CA_LIVE_FINDINGS; i++) r += g->findings[i].bytes_per_iteration;
    return r;
}
/* The earliest projected out-of-memory iteration; -1 none. */
static double oom_iteration_of(const ca_live_figures *g) {
    int64_t first = -1;
    for (uint32_t i = 0; i < g->n_findings && i < CA_LIVE_FINDINGS; i++) {
        int64_t at = g->findings[i].oom_iteration;
        if (at >= 0 && (first < 0 || at < first)) first = at;
    }
    return (double)first;
}

static const metric metrics[] = {
    {"cudalloc_reserved_bytes", "gauge", "Device memory held by cudalloc.", reserved_of},
    {"cudalloc_allocated_bytes", "gauge", "Device memory in live allocations.", allocated_of},
    {"cudalloc_peak_allocated_bytes", "gauge", "The most allocated at once so far.", peak_allocated_of},
    {"cudalloc_peak_reserved_bytes", "gauge", "The most reserved at once so far.", peak_reserved_of},
    {"cudalloc_cached_free_bytes", "gauge", "Reserved memory free for reuse.", cached_free_of},
    {"cudalloc_largest_free_block_bytes", "gauge", "The largest free block in the cache.", largest_free_of},
    {"cudalloc_fragmentation_ratio", "gauge", "1 - largest free block / cached free.", fragmentation_of},
    {"cudalloc_device_total_bytes", "gauge", "The device's memory (0: unknown).", total_of},
    {"cudalloc_iterations_total", "counter", "Training iterations ended.", iteration_of},
    {"cudalloc_growth_bytes_per_iteration", "gauge", "Allocated memory's change per iteration, recent.",
     growth_per_iteration_of},
    {"cudalloc_allocations_total", "counter", "Allocations made.", allocations_of},
    {"cudalloc_ooms_total", "counter", "Allocations that failed for want of memory.", ooms_of},
    {"cudalloc_leaks", "gauge", "Leak findings (the exit summary's rule).", leaks_of},
    {"cudalloc_leak_bytes_per_iteration", "gauge", "What the leaks add per iteration, together.", leak_rate_of},
    {"cudalloc_projected_oom_iteration", "gauge", "The iteration a leak runs the device out at (-1: none).",
     oom_iteration_of},
};

void ca_live_write_metrics(FILE *f, const ca_live_process *p, const ca_live_figures *figs, size_t n) {
    char rank[16] = "";
    if (p->rank >= 0) snprintf(rank, sizeof rank, "%d", p->rank);
    for (size_t m = 0; m < sizeof metrics / sizeof metrics[0]; m++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", metrics[m].name, metrics[m].help, metrics[m].name,
                metrics[m].type);
        for (size_t d = 0; d < n; d++)
            fprintf(f, "%s{device=\"%d\",rank=\"%s\"} %.17g\n", metrics[m].name, figs[d].device, rank,
                    metrics[m].value(&figs[d]));
    }
}
