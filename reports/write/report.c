/* Everything a report says, computed once (snapshot, statistics,
 * fragmentation, leaks, symbols, verdict); writing the files; the exit
 * summary. The formats themselves are in report_*.c. */
#define _GNU_SOURCE
#include "reports/write/report.h"

#include <stdlib.h>
#include <string.h>

#include "reports/write/fileout.h"
#include "reports/write/fmt.h"
#include "reports/capture/named_frames.h"
#include "reports/diagnose/oom.h"
#include "reports/diagnose/suppress.h"
#include "reports/capture/pyframes.h"
#include "reports/write/report_internal.h"

#include "reports/diagnose/fixes_track.h"

/* No loop and fewer allocations than this: one line, nothing to judge. */
#define CA_SMALL_PROGRAM_ALLOCS 1000
/* A caching allocator on top asks for few segments: past this many
 * allocations the pattern is not looked for. */
#define CA_CACHING_MAX_ALLOCS 4096

void ca_report_options_default(ca_report_options *o) {
    memset(o, 0, sizeof *o);
    o->formats = CA_REPORT_ALL;
    o->csv_iterations = 1;
    o->symbolize = 1;
    o->symbolize_timeout_ms = 10000;
    o->expandable = -1;
    o->rank = -1;
}

const char *ca_report_bytes(double bytes, char *buf, size_t n) {
    ca_fmt_bytes(buf, n, bytes < 0 ? 0 : bytes);
    return buf;
}

const ca_oom_record *ca_report_ran_out(const ca_report_ctx *c) {
    const ca_track_snap *s = &c->snap;
    for (size_t i = s->n_ooms; i-- > 0;) {
        const ca_oom_record *r = &s->ooms[i];
        if (r->iteration + 1 < s->iteration) return NULL;
        /* asking for more than the whole device says nothing about running out */
        if (!(r->have_info && r->verdict == CA_OOM_BEYOND)) return r;
    }
    return NULL;
}

static int by_free(const void *a, const void *b) {
    const ca_frag_segment *x = *(const ca_frag_segment *const *)a, *y = *(const ca_frag_segment *const *)b;
    if (x->cached_free != y->cached_free) return x->cached_free < y->cached_free ? 1 : -1;
    return (x->addr > y->addr) - (x->addr < y->addr);
}
static int by_addr(const void *a, const void *b) {
    const ca_frag_segment *x = *(const ca_frag_segment *const *)a, *y = *(const ca_frag_segment *const *)b;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

size_t ca_report_segments_shown(const ca_report_ctx *c, size_t max, const ca_frag_segment ***out) {
    const ca_frag *fr = &c->frag;
    size_t n = fr->n_segs < max ? fr->n_segs : max;
    if (!n || !(*out = malloc(fr->n_segs * sizeof **out))) return *out = NULL, 0;
    for (size_t i = 0; i < fr->n_segs; i++) (*out)[i] = &fr->segs[i];
    if (fr->n_segs > n) qsort(*out, fr->n_segs, sizeof **out, by_free);
    qsort(*out, n, sizeof **out, by_addr);
    return n;
}

double ca_report_time(const ca_report_ctx *c, uint64_t ticks) {
    if (c->snap.time_is_index) return (double)ticks;
    return (double)ca_clock_since_start_ns(&c->snap.clock, ticks) / 1e9;
}

size_t ca_report_frames(const ca_report_ctx *c, uint32_t site, const ca_frame **out, size_t max) {
    if (c->snap.site_mode == CA_SITES_SIZE || !c->sym) return 0;
    const uintptr_t *ips;
    unsigned n = ca_stacks_get(c->snap.stacks, site, &ips);
    size_t k = 0;
    int leading = 1;
    for (unsigned i = 0; i < n && k < max; i++) {
        const ca_frame *f = ca_symtab_get(c->sym, ips[i]);
        if (!f) continue;
        if (leading && ca_frame_is_own(f)) continue;
        leading = 0;
        out[k++] = f;
    }
    return k;
}

/* Adds the frames of a site to the symbol table. */
static void want_site(ca_report_ctx *c, uint32_t site) {
    const uintptr_t *ips;
    unsigned n = ca_stacks_get(c->snap.stacks, site, &ips);
    for (unsigned i = 0; i < n; i++) ca_symtab_add(c->sym, ips[i]);
}

/* The sites holding the most live bytes now. */
static void find_live_sites(ca_report_ctx *c) {
    const ca_track_snap *s = &c->snap;
    for (size_t i = 0; i < s->n_sites; i++) {
        const ca_site_stat *st = &s->sites[i];
        if (!st->live_bytes) continue;
        size_t k = c->n_live_sites;
        while (k > 0 && c->live_sites[k - 1]->live_bytes < st->live_bytes) k--;
        if (k >= CA_LIVE_SITES_SHOWN) continue;
        size_t end = c->n_live_sites < CA_LIVE_SITES_SHOWN ? c->n_live_sites : CA_LIVE_SITES_SHOWN - 1;
        memmove(&c->live_sites[k + 1], &c->live_sites[k], (end - k) * sizeof c->live_sites[0]);
        c->live_sites[k] = st;
        if (c->n_live_sites < CA_LIVE_SITES_SHOWN) c->n_live_sites++;
    }
}

/* The growing sites, their findings, the rate of all leaks together and
 * when they fill the device; what is live by call site. Again after
 * suppressions took sites out. */
static void find_leaks(ca_report_ctx *c) {
    free(c->leaks), free(c->findings);
    c->leaks = NULL, c->findings = NULL;
    c->n_leaks = c->n_findings = c->n_leak_findings = c->n_live_sites = 0;
    c->leak_rate = 0;
    c->n_growing = ca_leaks_find(&c->snap, c->have_headroom, c->headroom, &c->leaks);
    c->n_findings = ca_findings_find(&c->snap, c->leaks, c->n_growing, c->have_headroom, c->headroom,
                                     &c->findings, &c->n_leaks);
    if (c->n_growing && !c->n_findings) c->n_leaks = c->n_growing; /* out of memory grouping: sites as they are */
    while (c->n_leak_findings < c->n_findings && !c->findings[c->n_leak_findings].note) c->n_leak_findings++;
    for (size_t i = 0; i < c->n_leak_findings; i++) c->leak_rate += c->findings[i].bytes_per_iteration;
    find_live_sites(c);
    c->leak_oom_iteration = c->have_headroom && c->snap.iteration
                                ? ca_leak_projection(c->snap.iteration - 1, c->headroom, c->leak_rate)
                                : -1;
    /* Written just after running out: what happened, not a projection. */
    if (ca_report_ran_out(c)) {
        c->leak_oom_iteration = -1;
        for (size_t i = 0; i < c->n_growing; i++) c->leaks[i].projected_oom_iteration = -1;
        for (size_t i = 0; i < c->n_findings; i++) c->findings[i].projected_oom_iteration = -1;
    }
}

/* Sites whose frames match a suppression: out of the leaks and of what is
 * live (their growth and live figures zeroed in the snapshot's copy),
 * counted in c->suppressed. Their frames must be resolved. 1 when any was. */
static int suppress(ca_report_ctx *c) {
    if (!c->opt.suppressions || !c->opt.suppressions->n || c->snap.site_mode != CA_SITES_STACK) return 0;
    for (size_t i = 0; i < c->snap.n_sites; i++) {
        ca_site_stat *st = &c->snap.sites[i];
        if (!st->live_bytes && !st->growths && !st->byte_streak) continue;
        const ca_frame *fr[CA_STACK_MAX_FRAMES];
        size_t n = ca_report_frames(c, st->site, fr, CA_STACK_MAX_FRAMES);
        if (!ca_suppressions_match(c->opt.suppressions, fr, n)) continue;
        c->suppressed.bytes += st->live_bytes, c->suppressed.count += st->live_count, c->suppressed.sites++;
        st->live_bytes = st->live_count = 0;
        st->growths = st->byte_streak = 0;
    }
    return c->suppressed.sites != 0;
}

static int copy_fixes(ca_fix_report *to, const ca_fix_report *from) {
    *to = *from;
    to->by_group = NULL, to->group_site = NULL, to->group_frame = NULL;
    uint32_t n = from->n_groups;
    if (from->by_group && !(to->by_group = malloc(n * sizeof *to->by_group))) return -1;
    if (from->group_site && !(to->group_site = malloc(n * sizeof *to->group_site))) return -1;
    if (from->group_frame && !(to->group_frame = malloc(n * sizeof *to->group_frame))) return -1;
    if (to->by_group) memcpy(to->by_group, from->by_group, n * sizeof *to->by_group);
    if (to->group_site) memcpy(to->group_site, from->group_site, n * sizeof *to->group_site);
    if (to->group_frame) memcpy(to->group_frame, from->group_frame, n * sizeof *to->group_frame);
    return 0;
}

/* The fixes' groups by name: "micro_step (train.c:27), calling gpt_forward",
 * the phase frame and the function it calls, cudalloc's own leading frames
 * left out (as ca_report_frames does). 0, or -1 out of memory. */
static int fix_frame_names(ca_report_ctx *c) {
    const ca_fix_report *r = &c->fixes;
    if (r->n_groups < 2 || !r->group_site) return 0;
    if (!(c->fix_frames = calloc(r->n_groups, sizeof *c->fix_frames))) return -1;
    for (uint32_t g = 1; g < r->n_groups; g++) {
        const uintptr_t *ips;
        const ca_frame *fr[CA_STACK_MAX_FRAMES];
        unsigned raw = ca_stacks_get(c->snap.stacks, r->group_site[g], &ips);
        size_t n = ca_report_frames(c, r->group_site[g], fr, CA_STACK_MAX_FRAMES);
        long k = (long)r->group_frame[g] - (long)(raw - n); /* raw index to the frames kept */
        if (!n || k >= (long)n) continue;
        if (k < 0) k = 0; /* the phase frame is cudalloc's own: the program's first instead */
        const ca_frame *f = fr[k], *callee = k ? fr[k - 1] : NULL;
        char buf[1024];
        int len = f->line ? snprintf(buf, sizeof buf, "%s (%s:%u)", f->function, f->file, f->line)
                          : snprintf(buf, sizeof buf, "%s (%s)", f->function, f->module);
        if (callee && len > 0 && (size_t)len < sizeof buf)
            snprintf(buf + len, sizeof buf - (size_t)len, ", calling %s", callee->function);
        if (!(c->fix_frames[g] = strdup(buf))) return -1;
    }
    return 0;
}

size_t ca_report_oom_advice(const ca_report_ctx *c, const ca_oom_record *r, char (*lines)[CA_FIX_LINE], size_t max) {
    size_t n = 0;
    const char *const *a = ca_oom_advice(r->verdict);
    if (r->have_info && r->verdict == CA_OOM_NOT_THERE) { /* the fixes named for this run, when predicted */
        n = ca_fixes_advice(&c->fixes, r->info.device_total, lines, max < CA_FIX_ADVICE_MAX ? max : CA_FIX_ADVICE_MAX);
        if (c->fixes.have) a = ca_oom_advice_general(r->verdict);
    }
    for (; *a && n < max; a++) snprintf(lines[n++], CA_FIX_LINE, "%s", *a);
    return n;
}

/* PyTorch's caching allocator under the preload: it asks for segments (2
 * MiB for small tensors, 20 MiB for medium ones, larger requests rounded up
 * to 2 MiB from 10 MiB on) and keeps them. */
#define SEG_UNIT ((uint64_t)2 << 20)
static int segment_sized(uint64_t b) {
    return b && b % SEG_UNIT == 0 && (b == SEG_UNIT || b == 10 * SEG_UNIT || b >= 5 * SEG_UNIT);
}

static void detect_caching(ca_report_ctx *c) {
    const ca_track_snap *s = &c->snap;
    c->caching_warning[0] = 0;
    /* Few allocations, almost none freed, nearly all live ones segment-sized,
     * at least one of the two fixed segment sizes. */
    if (s->n_allocs > CA_CACHING_MAX_ALLOCS || s->n_live < 2 || s->n_frees * 10 > s->n_allocs) return;
    size_t seg = 0, fixed = 0;
    for (size_t i = 0; i < s->n_live; i++) {
        uint64_t r = s->live[i].requested;
        seg += segment_sized(r);
        fixed += r == SEG_UNIT || r == 10 * SEG_UNIT;
    }
    if (!fixed || seg * 10 < s->n_live * 9) return;
    snprintf(c->caching_warning, sizeof c->caching_warning,
             "these allocations look like a caching allocator's segments (%llu allocations, %zu of the %zu live "
             "ones 2 MiB, 20 MiB or larger multiples of 2 MiB, %llu freed): cudalloc sees the cache, not the "
             "tensors in it. For PyTorch set PYTORCH_NO_CUDA_MEMORY_CACHING=1 (cudalloc run does for Python "
             "programs) or use cudalloc as its pluggable allocator.",
             (unsigned long long)s->n_allocs, seg, s->n_live, (unsigned long long)s->n_frees);
}

int ca_report_ctx_init(ca_report_ctx *c, ca_tracker *t, ca_allocator *a, const ca_report_options *o,
                       int full) {
    memset(c, 0, sizeof *c);
    if (o) c->opt = *o;
    else ca_report_options_default(&c->opt);
    /* The allocator's views first: they take its locks, which must never be
     * taken while the tracker's is held. */
    if (a) {
        ca_get_stats(a, &c->stats);
        c->have_stats = 1;
    }
    if (ca_tracker_snapshot(t, &c->snap) != 0) return -1;
    if (ca_frag_compute(&c->snap, a, &c->frag) != 0) goto fail;
    if (!a && c->opt.device_total) { /* offline: the device size given, the reserved memory recorded */
        c->frag.have_device = 1;
        c->frag.device_total = c->opt.device_total;
        c->frag.device_free = c->opt.device_total > c->frag.reserved ? c->opt.device_total - c->frag.reserved : 0;
    }
    if (c->opt.device_unknown) c->frag.have_device = 0;
    if (c->frag.have_device) {
        c->have_headroom = 1;
        c->headroom = ca_leak_headroom(&c->snap, c->frag.device_free + c->frag.cached_free);
    }
    c->working_set = ca_leak_working_set(&c->snap);
    find_leaks(c);
    c->small_program = !c->snap.iteration && !c->snap.n_ooms && c->snap.n_allocs < CA_SMALL_PROGRAM_ALLOCS &&
                       !c->snap.time_is_index; /* offline: a single pass says more */
    detect_caching(c);
    c->have_peak = ca_peak_find(&c->snap, &c->peak) == 0;
    /* Offline, fewer than two whole iterations: blocks repeated inside the
     * one pass say what the trace holds (a period search: not at every exit
     * summary of a live run). */
    if (c->snap.time_is_index && c->snap.iteration < 3) c->have_blocks = ca_tracker_blocks(t, &c->blocks);
    /* What would fit, against the device the run ran out on, else the device */
    uint64_t capacity = c->frag.have_device ? c->frag.device_total : 0;
    for (size_t i = c->snap.n_ooms; i-- > 0;)
        if (c->snap.ooms[i].have_info && c->snap.ooms[i].verdict != CA_OOM_BEYOND) {
            capacity = c->snap.ooms[i].info.device_total;
            break;
        }
    const ca_oom_record *out = ca_report_ran_out(c);
    uint64_t needed = out && out->have_info ? out->info.allocated + out->requested : 0;
    if (c->opt.fixes) { /* the caller's: a deep copy, so the context owns what it frees */
        if (copy_fixes(&c->fixes, c->opt.fixes) != 0) goto fail;
    } else if (ca_fixes_from_track(&c->snap, capacity, needed, &c->fixes) != 0) {
        goto fail;
    }
    if (c->snap.site_mode == CA_SITES_STACK) {
        if (!(c->sym = ca_symtab_new())) goto fail;
        for (uint32_t g = 1; g < c->fixes.n_groups && c->fixes.group_site; g++) want_site(c, c->fixes.group_site[g]);
        /* Every site with allocations for the snapshot; the failing calls of
         * OOMs (sites with no allocation of their own) always. */
        if (full) {
            for (size_t i = 0; i < c->snap.n_sites; i++) want_site(c, c->snap.sites[i].site);
            /* and the calls that mapped or unmapped memory (segment events) */
            for (size_t i = 0; i < c->snap.n_events; i++) {
                const ca_ev *e = &c->snap.events[i];
                ca_evk k = ca_ev_kind(e);
                if ((k == CA_EVK_MAP || k == CA_EVK_UNMAP) && e->site != CA_SITE_NONE) want_site(c, e->site);
            }
        }
        for (size_t i = 0; i < c->n_growing; i++) want_site(c, c->leaks[i].site);
        for (size_t i = 0; c->have_peak && i < c->peak.n_sites && i < CA_REPORT_PEAK_SITES; i++)
            want_site(c, c->peak.sites[i].site);
        for (size_t i = 0; i < c->n_live_sites; i++) want_site(c, c->live_sites[i]->site);
        /* suppressions are matched on the frames of every site that holds or grows */
        for (size_t i = 0; c->opt.suppressions && i < c->snap.n_sites; i++)
            if (c->snap.sites[i].live_bytes || c->snap.sites[i].growths || c->snap.sites[i].byte_streak)
                want_site(c, c->snap.sites[i].site);
        for (size_t i = 0; i < c->snap.n_ooms; i++) {
            want_site(c, c->snap.ooms[i].site);
            for (uint32_t k = 0; k < c->snap.ooms[i].n_top; k++) want_site(c, c->snap.ooms[i].top_site[k]);
        }
        ca_symtab_resolve(c->sym, c->opt.symbolize, c->opt.symbolize_timeout_ms);
        if (suppress(c)) find_leaks(c);
        if (fix_frame_names(c) != 0) goto fail;
    }
    ca_report_peak_holders(c);
    ca_report_decide_verdict(c);
    return 0;
fail:
    ca_report_ctx_free(c);
    return -1;
}

void ca_report_ctx_free(ca_report_ctx *c) {
    for (uint32_t g = 0; c->fix_frames && g < c->fixes.n_groups; g++) free(c->fix_frames[g]);
    free(c->fix_frames);
    ca_fix_report_free(&c->fixes);
    ca_track_snap_free(&c->snap);
    ca_frag_free(&c->frag);
    ca_peak_free(&c->peak);
    free(c->peak_labels);
    free(c->leaks);
    free(c->findings);
    ca_symtab_free(c->sym);
    memset(c, 0, sizeof *c);
}

typedef int (*writer_fn)(const ca_report_ctx *, FILE *);
static const struct {
    unsigned bit;
    const char *ext;
    writer_fn fn;
} writers[] = {
    {CA_REPORT_TXT, ".txt", ca_report_txt},       {CA_REPORT_JSON, ".json", ca_report_json},
    {CA_REPORT_PICKLE, ".pickle", ca_report_pickle}, {CA_REPORT_HTML, ".html", ca_report_html},
    {CA_REPORT_CSV, ".csv", ca_report_csv},       {CA_REPORT_FOLDED, ".folded", ca_report_folded},
};
#define N_WRITERS (sizeof writers / sizeof writers[0])

/* The formats that name every site (the others only those they show). */
#define CA_REPORT_FULL (CA_REPORT_PICKLE | CA_REPORT_HTML | CA_REPORT_FOLDED)

/* One file through ca_out: temporary name, then rename. */
static int write_one(const ca_report_ctx *c, writer_fn fn, const char *path, char *err, size_t errlen) {
    if (!strcmp(path, "-")) {
        int rc = fn(c, stdout);
        if (fflush(stdout) != 0 || rc != 0) {
            snprintf(err, errlen, "cannot write the report to stdout");
            return -1;
        }
        return 0;
    }
    ca_out *o = ca_out_open(path, err, errlen);
    if (!o) return -1;
    if (fn(c, ca_out_file(o)) != 0) {
        snprintf(err, errlen, "%s: writing failed", path);
        ca_out_abort(o);
        return -1;
    }
    return ca_out_commit(o, err, errlen);
}

int ca_report_write(ca_tracker *t, ca_allocator *a, const char *prefix, const ca_report_options *o) {
    ca_report_options opt;
    if (o) opt = *o;
    else ca_report_options_default(&opt);
    char err[CA_OUT_ERRLEN] = "";
    int failed = 0;
    char *base = ca_path_expand(prefix ? prefix : "", err, sizeof err);
    ca_report_ctx c;
    if (!base) {
        failed = 1;
    } else if (ca_report_ctx_init(&c, t, a, &opt, (opt.formats & CA_REPORT_FULL) != 0) != 0) {
        snprintf(err, sizeof err, "out of memory preparing the report");
        failed = 1;
    } else {
        size_t len = strlen(base);
        char *path = malloc(len + 16);
        for (size_t i = 0; path && i < N_WRITERS; i++) {
            if (!(opt.formats & writers[i].bit)) continue;
            memcpy(path, base, len);
            strcpy(path + len, writers[i].ext);
            char e[CA_OUT_ERRLEN];
            if (write_one(&c, writers[i].fn, path, e, sizeof e) != 0 && !failed++) memcpy(err, e, sizeof err);
        }
        if (!path) failed = 1, snprintf(err, sizeof err, "out of memory");
        free(path);
        ca_report_ctx_free(&c);
    }
    if (failed && ca_tracker_warn_once(t))
        fprintf(stderr, "cudalloc: warning: report %s not written (%s); going on\n", base ? base : prefix, err);
    free(base);
    return failed ? -1 : 0;
}

int ca_report_write_file(ca_tracker *t, ca_allocator *a, unsigned format, const char *path,
                         const ca_report_options *o, char *err, size_t errlen) {
    for (size_t i = 0; i < N_WRITERS; i++) {
        if (writers[i].bit != format) continue;
        ca_report_ctx c;
        if (ca_report_ctx_init(&c, t, a, o, (format & CA_REPORT_FULL) != 0) != 0) {
            snprintf(err, errlen, "out of memory preparing the report");
            return -1;
        }
        int rc = write_one(&c, writers[i].fn, path, err, errlen);
        ca_report_ctx_free(&c);
        return rc;
    }
    snprintf(err, errlen, "unknown report format %u", format);
    return -1;
}

void ca_report_suppressed_text(const ca_report_ctx *c, char *buf, size_t n) {
    char b[32];
    *buf = 0;
    if (!c->opt.suppressions) return;
    snprintf(buf, n, "suppressed (%s): %s in %llu allocation%s from %zu call site%s, not reported as leaks or live memory",
             c->opt.suppressions_name ? c->opt.suppressions_name : "suppressions",
             ca_report_bytes((double)c->suppressed.bytes, b, sizeof b), (unsigned long long)c->suppressed.count,
             c->suppressed.count == 1 ? "" : "s", c->suppressed.sites, c->suppressed.sites == 1 ? "" : "s");
}

void ca_report_live_summary(const ca_report_ctx *c, FILE *f, size_t sites, size_t frames) {
    char b1[32], label[1024];
    const ca_track_snap *s = &c->snap;
    uint64_t shown = 0;
    for (size_t i = 0; i < c->n_live_sites; i++) shown += c->live_sites[i]->live_bytes;
    fprintf(f, "cudalloc: still live: %s in %zu allocation%s, by call site, largest first:\n",
            ca_report_bytes((double)s->allocated - (double)c->suppressed.bytes, b1, sizeof b1),
            s->n_live - (size_t)c->suppressed.count, s->n_live - c->suppressed.count == 1 ? "" : "s");
    for (size_t i = 0; i < c->n_live_sites && i < sites; i++) {
        const ca_site_stat *st = c->live_sites[i];
        ca_report_site_label(c, st->site, label, sizeof label);
        fprintf(f, "cudalloc:   %s in %llu allocation%s: %s\n", ca_report_bytes((double)st->live_bytes, b1, sizeof b1),
                (unsigned long long)st->live_count, st->live_count == 1 ? "" : "s", label);
        const ca_frame *fr[16];
        size_t n = ca_report_frames(c, st->site, fr, frames < 16 ? frames : 16);
        for (size_t k = 1; k < n; k++) {
            ca_report_frame_text(fr[k], label, sizeof label);
            fprintf(f, "cudalloc:       from %s\n", label);
        }
    }
    size_t more = c->n_live_sites > sites ? c->n_live_sites - sites : 0;
    uint64_t rest = (uint64_t)((double)s->allocated - (double)c->suppressed.bytes) - shown;
    for (size_t i = sites; i < c->n_live_sites; i++) rest += c->live_sites[i]->live_bytes;
    if (more || rest) fprintf(f, "cudalloc:   and %s more elsewhere (every site in the report)\n",
                              ca_report_bytes((double)rest, b1, sizeof b1));
}

/* The summary's lines on what would fit: the peak's parts and the single
 * fixes' predicted peaks; after running out, what fits on that device. */
static void fix_summary(const ca_report_ctx *c, FILE *f) {
    const ca_fix_report *r = &c->fixes;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    if (!r->have) {
        if (c->snap.n_ooms) fprintf(f, "cudalloc:   what would fit: no prediction: %s\n", r->why);
        return;
    }
    fprintf(f, "cudalloc:   the peak of iteration %u, %s: activations %s, persistent %s, kept %s, temporaries %s\n",
            r->iteration, ca_report_bytes((double)r->peak, b1, sizeof b1),
            ca_report_bytes((double)r->total.activations, b2, sizeof b2),
            ca_report_bytes((double)r->total.persistent, b3, sizeof b3), ca_report_bytes((double)r->total.kept, b4, sizeof b4),
            ca_report_bytes((double)r->total.temporaries, b5, sizeof b5));
    char line[1024];
    size_t k = r->batch_scale > 1
                   ? (size_t)snprintf(line, sizeof line,
                                      "cudalloc:   predicted peak of the failing iteration (batch-scaled memory x%.2f) with",
                                      r->batch_scale)
                   : (size_t)snprintf(line, sizeof line, "cudalloc:   predicted peak with");
    unsigned seen = 0;
    for (size_t i = 0; i < r->n_fix && k < sizeof line; i++) {
        const ca_fix *x = &r->fix[i];
        if ((x->kinds & (x->kinds - 1)) || (seen & x->kinds) || (x->kinds == CA_FIX_ACCUM && x->factor != 4)) continue;
        seen |= x->kinds;
        char label[160], fig[128];
        ca_fix_label(x, label, sizeof label);
        ca_fix_figures(x, fig, sizeof fig);
        k += (size_t)snprintf(line + k, sizeof line - k, "%s %s: %s", seen == x->kinds ? "" : ";", label, fig);
    }
    if (seen) fprintf(f, "%s\n", line);
    if (r->checkpoint_why[0]) fprintf(f, "cudalloc:   checkpointing cannot be predicted: %s\n", r->checkpoint_why);
    if (c->snap.n_ooms && r->capacity) { /* what fits the device it ran out on: singles, else combinations */
        k = (size_t)snprintf(line, sizeof line, "cudalloc:   would fit in %s:",
                             ca_report_bytes((double)r->capacity, b1, sizeof b1));
        size_t found = 0;
        seen = 0;
        for (int pass = 0; pass < 2 && !found; pass++)
            for (size_t i = 0; i < r->n_fix && k < sizeof line; i++) {
                const ca_fix *x = &r->fix[i];
                int single = !(x->kinds & (x->kinds - 1));
                if (single != !pass || x->predicted > r->capacity || (single && (seen & x->kinds))) continue;
                seen |= x->kinds;
                char label[160];
                ca_fix_label(x, label, sizeof label);
                k += (size_t)snprintf(line + k, sizeof line - k, "%s %s (%s)", found++ ? "," : "", label,
                                      ca_report_bytes((double)x->predicted, b2, sizeof b2));
            }
        fprintf(f, "%s%s\n", line, found ? "" : " no fix predicted here");
    }
}

void ca_report_summary(ca_tracker *t, ca_allocator *a, const ca_report_options *given, FILE *f) {
    ca_report_options o;
    if (given) o = *given;
    else ca_report_options_default(&o);
    o.symbolize_timeout_ms = 2000;
    ca_report_ctx c;
    if (ca_report_ctx_init(&c, t, a, &o, 0) != 0) {
        fprintf(f, "cudalloc: (no summary: out of memory)\n");
        return;
    }
    const ca_track_snap *s = &c.snap;
    char b1[32], b2[32], b3[32], label[1024];
    fprintf(f, "cudalloc: %s\n", c.verdict_line);
    /* a program with no loop: what it never freed, as valgrind and heaptrack list it */
    if (!s->iteration && !s->time_is_index && s->n_live > c.suppressed.count) ca_report_live_summary(&c, f, 5, 4);
    ca_report_suppressed_text(&c, label, sizeof label);
    if (*label) fprintf(f, "cudalloc: %s\n", label);
    if (c.small_program) {
        if (*c.caching_warning) fprintf(f, "cudalloc: warning: %s\n", c.caching_warning);
        ca_report_ctx_free(&c);
        return;
    }
    fprintf(f, "cudalloc: %u iterations (%s); peak allocated %s, peak reserved %s; %llu allocations\n",
            s->iteration, ca_iter_source_name(s->source), ca_report_bytes((double)s->peak_allocated, b1, sizeof b1),
            ca_report_bytes((double)s->peak_reserved, b2, sizeof b2), (unsigned long long)s->n_allocs);
    for (size_t i = 0; i < c.n_leak_findings && i < 3; i++) {
        const ca_finding *fd = &c.findings[i];
        ca_report_finding_title(&c, i, label, sizeof label);
        fprintf(f, "cudalloc:   leak %zu: +%s/iteration since iteration %u: %s\n", i + 1,
                ca_report_bytes(fd->bytes_per_iteration, b1, sizeof b1), fd->growth_since, label);
        if (fd->n_sites > 1) {
            const ca_leak *l = &c.leaks[fd->first];
            ca_report_site_label(&c, l->site, label, sizeof label);
            fprintf(f, "cudalloc:     the largest of its %zu sites: +%s/iteration: %s\n", fd->n_sites,
                    ca_report_bytes(l->bytes_per_iteration, b1, sizeof b1), label);
        }
    }
    if (c.n_leak_findings > 3) fprintf(f, "cudalloc:   ... and %zu more leaks\n", c.n_leak_findings - 3);
    if (c.n_findings > c.n_leak_findings) {
        const ca_finding *fd = &c.findings[c.n_leak_findings];
        ca_report_finding_title(&c, c.n_leak_findings, label, sizeof label);
        fprintf(f, "cudalloc:   note: %s, not a leak: +%s/iteration (%.4f%% of the working set): %s%s\n",
                fd->handoff ? "hand-off" : "slow growth", ca_report_bytes(fd->bytes_per_iteration, b1, sizeof b1),
                fd->working_set_share * 100, label,
                c.n_findings - c.n_leak_findings > 1 ? "; and more in the report" : "");
    }
    for (size_t i = 0; i < s->n_ooms && i < 3; i++) {
        const ca_oom_record *r = &s->ooms[s->n_ooms - 1 - i];
        fprintf(f, "cudalloc:   OOM at iteration %u asking %s: %s\n", r->iteration,
                ca_report_bytes((double)r->requested, b1, sizeof b1),
                r->have_info ? ca_oom_verdict_name(r->verdict) : "unjudged");
    }
    fix_summary(&c, f);
    fprintf(f, "cudalloc: reserved %s, allocated %s, cached free %s (largest piece %s, fragmentation %.0f%%)\n",
            ca_report_bytes((double)c.frag.reserved, b1, sizeof b1), ca_report_bytes((double)c.frag.allocated, b2, sizeof b2),
            ca_report_bytes((double)c.frag.cached_free, b3, sizeof b3),
            ca_report_bytes((double)c.frag.largest_free, label, sizeof label), c.frag.fragmentation * 100);
    if (*c.caching_warning) fprintf(f, "cudalloc: warning: %s\n", c.caching_warning);
    ca_report_ctx_free(&c);
}
