/* PREFIX.html: one self-contained page (inline SVG from reports/svg.h, no
 * scripts, no network): memory over time with iteration marks, memory per
 * iteration, the segment map, the leak table, fragmentation and the OOM
 * verdicts. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "reports/oom.h"
#include "reports/report_internal.h"
#include "reports/svg.h"

#define MAX_SEGMENTS_DRAWN 64
#define MAX_FRAMES_SHOWN 12

static void td_bytes(FILE *f, double v) {
    char b[32];
    fprintf(f, "<td class=\"num\">%s</td>", ca_report_bytes(v, b, sizeof b));
}

static void row_bytes(FILE *f, const char *name, double v) {
    fputs("<tr><th>", f);
    ca_html_escape(f, name);
    fputs("</th>", f);
    td_bytes(f, v);
    fputs("</tr>\n", f);
}

static void frames_pre(const ca_report_ctx *c, FILE *f, uint32_t site) {
    char label[512];
    if (c->snap.site_mode == CA_SITES_SIZE) {
        ca_report_site_label(c, site, label, sizeof label);
        ca_html_escape(f, label);
        return;
    }
    const ca_frame *fr[MAX_FRAMES_SHOWN];
    size_t n = ca_report_frames(c, site, fr, MAX_FRAMES_SHOWN);
    ca_report_site_label(c, site, label, sizeof label);
    fputs("<details><summary>", f);
    ca_html_escape(f, label);
    fputs("</summary><pre>", f);
    for (size_t i = 0; i < n; i++) {
        char line[1024];
        if (fr[i]->line) snprintf(line, sizeof line, "#%zu %s at %s:%u\n", i, fr[i]->function, fr[i]->file, fr[i]->line);
        else snprintf(line, sizeof line, "#%zu %s in %s\n", i, fr[i]->function, fr[i]->module);
        ca_html_escape(f, line);
    }
    fputs("</pre></details>", f);
}

/* Allocated and reserved after each event of the ring. */
static void plot_time(const ca_report_ctx *c, FILE *f) {
    const ca_track_snap *s = &c->snap;
    size_t n = s->n_events;
    if (!n) {
        fputs("<p>No events kept.</p>\n", f);
        return;
    }
    double *x = malloc(n * sizeof *x), *ya = malloc(n * sizeof *ya), *yr = malloc(n * sizeof *yr);
    double *marks = s->n_bounds ? malloc(s->n_bounds * sizeof *marks) : NULL;
    if (!x || !ya || !yr || (s->n_bounds && !marks)) goto out;
    /* The window's start: the final figures minus what the window added. */
    int64_t a = (int64_t)s->allocated, r = (int64_t)s->reserved;
    for (size_t i = 0; i < n; i++) {
        const ca_ev *e = &s->events[i];
        switch (ca_ev_kind(e)) {
        case CA_EVK_ALLOC: a -= (int64_t)ca_ev_block(e); break;
        case CA_EVK_FREE: a += (int64_t)ca_ev_block(e); break;
        case CA_EVK_MAP: r -= (int64_t)ca_ev_bytes(e); break;
        case CA_EVK_UNMAP: r += (int64_t)ca_ev_bytes(e); break;
        default: break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const ca_ev *e = &s->events[i];
        switch (ca_ev_kind(e)) {
        case CA_EVK_ALLOC: a += (int64_t)ca_ev_block(e); break;
        case CA_EVK_FREE: a -= (int64_t)ca_ev_block(e); break;
        case CA_EVK_MAP: r += (int64_t)ca_ev_bytes(e); break;
        case CA_EVK_UNMAP: r -= (int64_t)ca_ev_bytes(e); break;
        default: break;
        }
        x[i] = (double)(s->first_seq + i);
        ya[i] = (double)a;
        yr[i] = (double)r;
    }
    size_t nm = 0;
    for (size_t i = 0; i < s->n_bounds; i++)
        if (s->bounds[i].seq >= s->first_seq) marks[nm++] = (double)s->bounds[i].seq;
    ca_svg_series ser[2] = {{"allocated", "#1f77b4", x, ya, n}, {"reserved", "#ff7f0e", x, yr, n}};
    ca_svg_plot_opts o = {0};
    /* Event numbers, not seconds: every allocation gets the same width, as
     * in PyTorch's memory viewer, whatever the program computed between. */
    o.title = "Allocated and reserved, event by event";
    o.x_label = "event (allocations, frees, maps, unmaps)";
    o.y_bytes = 1;
    o.marks = marks;
    o.n_marks = nm;
    o.mark_name = "iteration start";
    ca_svg_plot(f, &o, ser, 2);
    if (s->first_seq)
        fprintf(f, "<p>The latest %zu of %" PRIu64 " events (the ring's size).</p>\n", n, s->seq);
out:
    free(x);
    free(ya);
    free(yr);
    free(marks);
}

static void plot_iterations(const ca_report_ctx *c, FILE *f) {
    const ca_track_snap *s = &c->snap;
    size_t n = s->n_bounds;
    if (n < 2) return;
    double *x = malloc(n * sizeof *x), *ya = malloc(n * sizeof *ya), *yp = malloc(n * sizeof *yp),
           *yr = malloc(n * sizeof *yr);
    if (x && ya && yp && yr) {
        for (size_t i = 0; i < n; i++) {
            x[i] = s->bounds[i].iteration;
            ya[i] = (double)s->bounds[i].allocated;
            yp[i] = (double)s->bounds[i].peak_allocated;
            yr[i] = (double)s->bounds[i].reserved;
        }
        ca_svg_series ser[3] = {{"kept at the boundary", "#1f77b4", x, ya, n},
                                {"peak in the iteration", "#2ca02c", x, yp, n},
                                {"reserved", "#ff7f0e", x, yr, n}};
        ca_svg_plot_opts o = {0};
        o.title = "Memory per iteration (a leak is a rising 'kept' line)";
        o.x_label = "iteration";
        o.y_bytes = 1;
        ca_svg_plot(f, &o, ser, 3);
    }
    free(x);
    free(ya);
    free(yp);
    free(yr);
}

typedef struct blocks_acc {
    ca_svg_block *b;
    size_t n, cap;
    int failed;
} blocks_acc;

static void collect(void *ctx, uintptr_t addr, uint64_t size, const ca_live_view *live) {
    blocks_acc *a = ctx;
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 64;
        ca_svg_block *b = realloc(a->b, cap * sizeof *b);
        if (!b) {
            a->failed = 1;
            return;
        }
        a->b = b;
        a->cap = cap;
    }
    a->b[a->n++] = (ca_svg_block){addr, size, live ? CA_SVG_ALLOCATED : CA_SVG_INACTIVE, NULL};
}

static void segment_map(const ca_report_ctx *c, FILE *f) {
    const ca_frag *fr = &c->frag;
    size_t n = fr->n_segs < MAX_SEGMENTS_DRAWN ? fr->n_segs : MAX_SEGMENTS_DRAWN;
    if (!n) {
        fputs("<p>No mapped memory.</p>\n", f);
        return;
    }
    ca_svg_segment *segs = calloc(n, sizeof *segs);
    blocks_acc *acc = calloc(n, sizeof *acc);
    if (segs && acc) {
        for (size_t i = 0; i < n; i++) {
            ca_frag_walk(&c->snap, &fr->segs[i], collect, &acc[i]);
            segs[i] = (ca_svg_segment){fr->segs[i].addr, fr->segs[i].reserved, NULL, NULL, acc[i].b, acc[i].n};
        }
        ca_svg_segmap_opts o = {"Segments (blue: allocated, grey: free, cached)", 0, 1};
        ca_svg_segment_map(f, &o, segs, n);
        if (fr->n_segs > n) fprintf(f, "<p>%zu more segments not drawn.</p>\n", fr->n_segs - n);
    }
    for (size_t i = 0; acc && i < n; i++) free(acc[i].b);
    free(acc);
    free(segs);
}

int ca_report_html(const ca_report_ctx *c, FILE *f) {
    const ca_track_snap *s = &c->snap;
    char b1[32];
    const char *title = c->opt.title ? c->opt.title : "cudalloc report";
    ca_html_begin(f, title);
    fputs("<h1>", f);
    ca_html_escape(f, title);
    fputs("</h1>\n<p><strong>Verdict:</strong> ", f);
    ca_html_escape(f, c->verdict_line);
    fputs("</p>\n", f);
    if (c->opt.source_name) {
        fputs("<p>Trace: ", f);
        ca_html_escape(f, c->opt.source_name);
        fputs("</p>\n", f);
    }

    fputs("<h2>Summary</h2>\n<table>\n", f);
    fprintf(f, "<tr><th>iterations</th><td class=\"num\">%u</td></tr>\n<tr><th>iteration source</th><td>%s</td></tr>\n",
            s->iteration, ca_iter_source_name(s->source));
    row_bytes(f, "allocated now", (double)s->allocated);
    row_bytes(f, "reserved now", (double)s->reserved);
    row_bytes(f, "peak allocated", (double)s->peak_allocated);
    row_bytes(f, "peak reserved", (double)s->peak_reserved);
    fprintf(f, "<tr><th>allocations / frees</th><td class=\"num\">%" PRIu64 " / %" PRIu64 "</td></tr>\n", s->n_allocs,
            s->n_frees);
    if (c->frag.have_device) {
        row_bytes(f, "device free", (double)c->frag.device_free);
        row_bytes(f, "device total", (double)c->frag.device_total);
    }
    fputs("</table>\n<h2>Memory</h2>\n", f);
    plot_time(c, f);
    plot_iterations(c, f);

    fputs("<h2>Leaks</h2>\n", f);
    if (!c->n_leaks) {
        fputs(s->iteration ? "<p>No call site piles up allocations across iterations.</p>\n"
                           : "<p>No iteration boundaries: leaks cannot be judged.</p>\n",
              f);
    } else {
        fputs("<table>\n<tr><th>#</th><th>per iteration</th><th>allocations per iteration</th><th>since "
              "iteration</th><th>live now</th><th>device runs out at iteration</th><th>call site</th><th>what to "
              "do</th></tr>\n",
              f);
        for (size_t i = 0; i < c->n_leaks; i++) {
            const ca_leak *l = &c->leaks[i];
            fprintf(f, "<tr><td>%zu</td>", i + 1);
            td_bytes(f, l->bytes_per_iteration);
            fprintf(f, "<td class=\"num\">%.2f</td><td class=\"num\">%u</td>", l->count_per_iteration, l->first_iteration);
            td_bytes(f, (double)l->live_bytes);
            if (l->projected_oom_iteration >= 0) fprintf(f, "<td class=\"num\">%" PRId64 "</td>", l->projected_oom_iteration);
            else fputs("<td>unknown</td>", f);
            fputs("<td>", f);
            frames_pre(c, f, l->site);
            fputs("</td><td>", f);
            ca_html_escape(f, ca_leak_advice(c->leaks, c->n_leaks, i));
            fputs("</td></tr>\n", f);
        }
        fputs("</table>\n", f);
    }

    const ca_frag *fr = &c->frag;
    fputs("<h2>Fragmentation</h2>\n", f);
    segment_map(c, f);
    fputs("<table>\n", f);
    row_bytes(f, "reserved", (double)fr->reserved);
    row_bytes(f, "allocated", (double)fr->allocated);
    row_bytes(f, "cached free", (double)fr->cached_free);
    row_bytes(f, "largest free block", (double)fr->largest_free);
    row_bytes(f, "largest allocation possible now", (double)fr->largest_allocation_now);
    if (c->opt.external_known) {
        row_bytes(f, "outside cudalloc: allocations (CUPTI)", (double)c->opt.external_alloc_bytes);
        row_bytes(f, "outside cudalloc: memory pools (CUPTI)", (double)c->opt.external_pool_bytes);
    }
    fprintf(f, "<tr><th>fragmentation</th><td class=\"num\">%.1f%%</td></tr>\n</table>\n", fr->fragmentation * 100);
    if (!c->opt.external_known && c->opt.external_note) {
        fputs("<p>Memory allocated past cudalloc: not measured (", f);
        ca_html_escape(f, c->opt.external_note);
        fputs(").</p>\n", f);
    }
    fputs("<table>\n<tr><th>free blocks of at least</th><th>count</th><th>bytes</th></tr>\n", f);
    for (int b = 0; b < CA_FRAG_BINS; b++) {
        fprintf(f, "<tr><td>%s</td><td class=\"num\">%" PRIu64 "</td>",
                ca_report_bytes((double)ca_frag_bin_min(b), b1, sizeof b1), fr->hist_count[b]);
        td_bytes(f, (double)fr->hist_bytes[b]);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);

    fputs("<h2>Out of memory</h2>\n", f);
    if (!s->n_ooms) fputs("<p>No allocation failed.</p>\n", f);
    for (size_t i = 0; i < s->n_ooms; i++) {
        const ca_oom_record *r = &s->ooms[i];
        fprintf(f, "<h3>OOM %zu at iteration %u: %s requested</h3>\n", i + 1, r->iteration,
                ca_report_bytes((double)r->requested, b1, sizeof b1));
        if (r->have_info) {
            fputs("<p><strong>", f);
            ca_html_escape(f, ca_oom_verdict_name(r->verdict));
            fputs("</strong>: ", f);
            ca_html_escape(f, ca_oom_verdict_text(r->verdict));
            fputs(".</p>\n<table>\n", f);
            row_bytes(f, "device free", (double)r->info.device_free);
            row_bytes(f, "device total", (double)r->info.device_total);
            row_bytes(f, "allocated", (double)r->info.allocated);
            row_bytes(f, "reserved", (double)r->info.reserved);
            row_bytes(f, "cached", (double)r->info.free_cached);
            row_bytes(f, "largest free block", (double)r->info.largest_free);
            row_bytes(f, "held by leaks", (double)r->leaked_bytes);
            fputs("</table>\n<ul>\n", f);
            for (const char *const *a = ca_oom_advice(r->verdict); *a; a++) {
                fputs("<li>", f);
                ca_html_escape(f, *a);
                fputs("</li>\n", f);
            }
            fputs("</ul>\n", f);
        }
        fputs("<div>Failed call: ", f);
        frames_pre(c, f, r->site);
        fputs("</div>\n", f);
        if (r->n_top) fputs("<table>\n<tr><th>live at the failure</th><th>allocations</th><th>call site</th></tr>\n", f);
        for (uint32_t k = 0; k < r->n_top; k++) {
            fputs("<tr>", f);
            td_bytes(f, (double)r->top_bytes[k]);
            fprintf(f, "<td class=\"num\">%" PRIu64 "</td><td>", r->top_count[k]);
            frames_pre(c, f, r->top_site[k]);
            fputs("</td></tr>\n", f);
        }
        if (r->n_top) fputs("</table>\n", f);
    }
    ca_html_end(f);
    return ferror(f) ? -1 : 0;
}
