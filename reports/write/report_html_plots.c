/* The drawings of PREFIX.html (report_html.c writes the page around them):
 * memory event by event, with the hover data its script reads; memory per
 * iteration; the segment map. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "reports/write/json.h"
#include "reports/write/report_internal.h"
#include "reports/write/svg.h"

#define MAX_SEGMENTS_DRAWN 256
#define MAX_HOVER_FRAMES 12

/* ---- memory event by event, with hover ---- */

/* Shows, for the drawn point nearest the pointer, what the plot's data
 * (#events-data, written below) holds about it. The ids end with the page's
 * suffix (one page of several devices: "-dev1"), the argument at its end. */
static const char HOVER_SCRIPT[] =
    "<script>\n"
    "(function (sfx) {\n"
    "  var svg = document.getElementById('events' + sfx), el = document.getElementById('events-data' + sfx),\n"
    "      tip = document.getElementById('events-tip' + sfx);\n"
    "  if (!svg || !el || !tip) return;\n"
    "  var D = JSON.parse(el.textContent), n = D.x.length;\n"
    "  if (!n) return;\n"
    "  function num(k) { return parseFloat(svg.getAttribute('data-' + k)); }\n"
    "  var x0 = num('x0'), x1 = num('x1'), y0 = num('y0'), y1 = num('y1'), L = num('l'), R = num('r'),\n"
    "      T = num('t'), B = num('b'), W = parseFloat(svg.getAttribute('width'));\n"
    "  var line = svg.querySelector('.hover-line'), dot = svg.querySelector('.hover-dot');\n"
    "  function px(x) { return L + (x - x0) / (x1 - x0) * (R - L); }\n"
    "  function py(y) { return B - (y - y0) / (y1 - y0) * (B - T); }\n"
    "  function bytes(v) {\n"
    "    var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'], i = 0;\n"
    "    while (Math.abs(v) >= 1024 && i < 5) { v /= 1024; i++; }\n"
    "    return (i ? v.toFixed(2) : v) + ' ' + u[i];\n"
    "  }\n"
    "  function text(i) {\n"
    "    var s = 'event ' + D.x[i] + (D.t ? ' at ' + (D.t[i] / 1e6).toFixed(3) + ' s' : '') + ': ' +\n"
    "        D.kinds[D.k[i]] + ' ' + bytes(D.s[i]) + '\\nallocated ' + bytes(D.a[i]) + ', reserved ' + bytes(D.r[i]);\n"
    "    var st = D.st[i] >= 0 ? D.stacks[D.st[i]] : [];\n"
    "    for (var j = 0; j < st.length; j++) s += '\\n#' + j + ' ' + D.frames[st[j]];\n"
    "    return st.length ? s : s + '\\n(no call stack)';\n"
    "  }\n"
    "  function hide() {\n"
    "    tip.hidden = true; line.setAttribute('visibility', 'hidden'); dot.setAttribute('visibility', 'hidden');\n"
    "  }\n"
    "  svg.addEventListener('mousemove', function (ev) {\n"
    "    var r = svg.getBoundingClientRect(), k = W / r.width;\n"
    "    var vx = (ev.clientX - r.left) * k, vy = (ev.clientY - r.top) * k;\n"
    "    if (vx < L - 8 || vx > R + 8) { hide(); return; }\n"
    "    var x = x0 + (vx - L) / (R - L) * (x1 - x0), lo = 0, hi = n - 1;\n"
    "    while (lo < hi) { var mid = (lo + hi) >> 1; if (D.x[mid] < x) lo = mid + 1; else hi = mid; }\n"
    "    var best = lo, bd = Infinity;\n"
    "    for (var i = Math.max(0, lo - 8); i < Math.min(n, lo + 8); i++) {\n"
    "      var dx = px(D.x[i]) - vx, dy = Math.min(Math.abs(py(D.a[i]) - vy), Math.abs(py(D.r[i]) - vy));\n"
    "      var d = dx * dx * 4 + dy * dy;\n"
    "      if (d < bd) { bd = d; best = i; }\n"
    "    }\n"
    "    var X = px(D.x[best]);\n"
    "    line.setAttribute('x1', X); line.setAttribute('x2', X); line.setAttribute('visibility', 'visible');\n"
    "    dot.setAttribute('cx', X); dot.setAttribute('cy', py(D.a[best])); dot.setAttribute('visibility', 'visible');\n"
    "    tip.textContent = text(best);\n"
    "    tip.hidden = false;\n"
    "    var left = X / k + 14, box = svg.parentNode.clientWidth;\n"
    "    if (left + tip.offsetWidth > box) left = Math.max(0, X / k - 14 - tip.offsetWidth);\n"
    "    tip.style.left = left + 'px';\n"
    "    tip.style.top = (vy / k + 14) + 'px';\n"
    "  });\n"
    "  svg.addEventListener('mouseleave', hide);\n"
    "})";

static const char *const KIND_NAMES[] = {"alloc", "free", "map", "unmap", "out of memory"};

/* Each frame's text once: the stacks refer to frames by index. */
typedef struct text_ix {
    char *text;
    UT_hash_handle hh;
    int ix;
} text_ix;

typedef struct frame_table {
    text_ix *by_text;
    char **texts; /* in index order */
    int n, cap;
} frame_table;

/* The index of a text in the table, adding it when new; -1 out of memory. */
static int frame_index(frame_table *t, const char *text) {
    text_ix *e;
    HASH_FIND_STR(t->by_text, text, e);
    if (e) return e->ix;
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        char **texts = realloc(t->texts, (size_t)cap * sizeof *texts);
        if (!texts) return -1;
        t->texts = texts;
        t->cap = cap;
    }
    if (!(e = malloc(sizeof *e)) || !(e->text = strdup(text))) {
        free(e);
        return -1;
    }
    e->ix = t->n;
    t->texts[t->n++] = e->text;
    HASH_ADD_KEYPTR(hh, t->by_text, e->text, strlen(e->text), e);
    return e->ix;
}

static void frame_table_free(frame_table *t) {
    text_ix *e, *tmp;
    HASH_ITER(hh, t->by_text, e, tmp) {
        HASH_DEL(t->by_text, e);
        free(e->text);
        free(e);
    }
    free(t->texts);
}

/* A site's stack as frame indices (sites by size: their label). */
static void write_stack(const ca_report_ctx *c, ca_json *j, frame_table *t, uint32_t site) {
    char text[1024];
    ca_json_arr_begin(j);
    if (c->snap.site_mode == CA_SITES_SIZE) {
        ca_report_site_label(c, site, text, sizeof text);
        ca_json_int(j, frame_index(t, text));
    } else {
        const ca_frame *fr[MAX_HOVER_FRAMES];
        size_t nf = ca_report_frames(c, site, fr, MAX_HOVER_FRAMES);
        for (size_t k = 0; k < nf; k++) {
            ca_report_frame_text(fr[k], text, sizeof text);
            ca_json_int(j, frame_index(t, text));
        }
    }
    ca_json_arr_end(j);
}

/* The page's data for the drawn points (pts: event indices): per point its
 * event number, time (microseconds since the start; absent offline),
 * allocated and reserved after it, kind, bytes and stack (an index into
 * stacks, -1 for none); each stack as indices into frames. Written inside
 * <script type="application/json"> with every '<' escaped, so no text in it
 * can end the element. */
static void hover_data(const ca_report_ctx *c, FILE *f, const size_t *pts, size_t np, const double *ya,
                       const double *yr) {
    const ca_track_snap *s = &c->snap;
    uint32_t max_site = 0;
    for (size_t i = 0; i < np; i++)
        if (s->events[pts[i]].site > max_site) max_site = s->events[pts[i]].site;
    int32_t *stack_of = malloc(((size_t)max_site + 1) * sizeof *stack_of);
    uint32_t *sites = malloc((np ? np : 1) * sizeof *sites); /* stack index -> site */
    ca_json *j = ca_json_new_buf(0);
    frame_table ft = {0};
    if (!stack_of || !sites || !j) goto out;
    memset(stack_of, 0xff, ((size_t)max_site + 1) * sizeof *stack_of);
    int32_t n_stacks = 0;
    for (size_t i = 0; i < np; i++) {
        uint32_t site = s->events[pts[i]].site;
        if (site != CA_SITE_NONE && stack_of[site] < 0) {
            sites[n_stacks] = site;
            stack_of[site] = n_stacks++;
        }
    }
    ca_json_obj_begin(j);
    ca_json_key(j, "kinds");
    ca_json_arr_begin(j);
    for (size_t k = 0; k < sizeof KIND_NAMES / sizeof KIND_NAMES[0]; k++) ca_json_str(j, KIND_NAMES[k]);
    ca_json_arr_end(j);
    static const char *const cols[] = {"x", "t", "a", "r", "k", "s", "st"};
    for (size_t col = 0; col < sizeof cols / sizeof cols[0]; col++) {
        if (col == 1 && s->time_is_index) continue; /* offline: event numbers are the only clock */
        ca_json_key(j, cols[col]);
        ca_json_arr_begin(j);
        for (size_t i = 0; i < np; i++) {
            const ca_ev *e = &s->events[pts[i]];
            ca_evk k = ca_ev_kind(e);
            switch (col) {
            case 0: ca_json_uint(j, s->first_seq + pts[i]); break;
            case 1: ca_json_uint(j, ca_clock_since_start_ns(&s->clock, e->ticks) / 1000); break;
            case 2: ca_json_uint(j, (uint64_t)ya[pts[i]]); break;
            case 3: ca_json_uint(j, (uint64_t)yr[pts[i]]); break;
            case 4: ca_json_int(j, k); break;
            case 5: ca_json_uint(j, k == CA_EVK_ALLOC || k == CA_EVK_FREE ? ca_ev_block(e) : ca_ev_bytes(e)); break;
            case 6: ca_json_int(j, e->site != CA_SITE_NONE ? stack_of[e->site] : -1); break;
            }
        }
        ca_json_arr_end(j);
    }
    ca_json_key(j, "stacks");
    ca_json_arr_begin(j);
    for (int32_t k = 0; k < n_stacks; k++) write_stack(c, j, &ft, sites[k]);
    ca_json_arr_end(j);
    ca_json_key(j, "frames");
    ca_json_arr_begin(j);
    for (int k = 0; k < ft.n; k++) ca_json_str(j, ft.texts[k]);
    ca_json_arr_end(j);
    ca_json_obj_end(j);
    size_t len;
    const char *d = ca_json_data(j, &len);
    if (ca_json_error(j) || !d) goto out;
    fprintf(f, "<script type=\"application/json\" id=\"events-data%s\">", c->id_suffix);
    for (size_t i = 0; i < len; i++) {
        if (d[i] == '<') fputs("\\u003c", f);
        else fputc(d[i], f);
    }
    fputs("</script>\n", f);
    fprintf(f, "%s('%s');\n</script>\n", HOVER_SCRIPT, c->id_suffix);
out:
    frame_table_free(&ft);
    ca_json_free(j);
    free(stack_of);
    free(sites);
}

/* Allocated and reserved after each event of the ring. */
void ca_report_html_time(const ca_report_ctx *c, FILE *f) {
    const ca_track_snap *s = &c->snap;
    size_t n = s->n_events;
    if (!n) {
        fputs("<p>No events kept.</p>\n", f);
        return;
    }
    double *x = malloc(n * sizeof *x), *ya = malloc(n * sizeof *ya), *yr = malloc(n * sizeof *yr);
    double *marks = s->n_bounds ? malloc(s->n_bounds * sizeof *marks) : NULL;
    size_t *drawn = malloc(n * sizeof *drawn);
    double alerts[CA_MAX_OOM_RECORDS];
    char tips[CA_MAX_OOM_RECORDS][160];
    const char *tipp[CA_MAX_OOM_RECORDS];
    size_t na = 0;
    if (!x || !ya || !yr || !drawn || (s->n_bounds && !marks)) goto out;
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
        case CA_EVK_OOM:
            if (na < CA_MAX_OOM_RECORDS) {
                char b[32];
                alerts[na] = (double)(s->first_seq + i);
                uint64_t rec = ca_ev_oom_record(e);
                if (rec < s->n_ooms)
                    snprintf(tips[na], sizeof tips[na], "out of memory at iteration %u: %s requested",
                             s->ooms[rec].iteration, ca_report_bytes((double)s->ooms[rec].requested, b, sizeof b));
                else
                    snprintf(tips[na], sizeof tips[na], "out of memory: %s requested",
                             ca_report_bytes((double)ca_ev_bytes(e), b, sizeof b));
                tipp[na] = tips[na];
                na++;
            }
            break;
        }
        x[i] = (double)(s->first_seq + i);
        ya[i] = (double)(a > 0 ? a : 0);
        yr[i] = (double)(r > 0 ? r : 0);
    }
    size_t nm = 0;
    for (size_t i = 0; i < s->n_bounds; i++)
        if (s->bounds[i].seq >= s->first_seq) marks[nm++] = (double)s->bounds[i].seq;
    ca_svg_series ser[2] = {{.name = "allocated", .color = "#1f77b4", .x = x, .y = ya, .n = n},
                            {.name = "reserved", .color = "#ff7f0e", .x = x, .y = yr, .n = n}};
    ca_svg_plot_opts o = {0};
    /* Event numbers, not seconds: every allocation gets the same width, as
     * in PyTorch's memory viewer, whatever the program computed between. */
    o.title = "Allocated and reserved, event by event";
    o.x_label = "event (allocations, frees, maps, unmaps)";
    o.y_bytes = 1;
    o.marks = marks;
    o.n_marks = nm;
    o.mark_name = "iteration start";
    o.alerts = alerts;
    o.alert_tips = tipp;
    o.n_alerts = na;
    char id[32];
    snprintf(id, sizeof id, "events%s", c->id_suffix);
    o.id = id;
    size_t nd = 0;
    fputs("<div class=\"chart\">\n", f);
    ca_svg_plot_drawn(f, &o, ser, 2, drawn, &nd);
    fprintf(f, "<pre class=\"hover-tip\" id=\"events-tip%s\" hidden></pre>\n</div>\n", c->id_suffix);
    fputs("<p class=\"note\">Hover over the chart for the nearest event: its time, allocated and reserved after it, "
          "and its call stack.",
          f);
    if (s->first_seq) fprintf(f, " The latest %zu of %" PRIu64 " events (the ring's size).", n, s->seq);
    fputs("</p>\n", f);
    hover_data(c, f, drawn, nd, ya, yr);
out:
    free(x);
    free(ya);
    free(yr);
    free(marks);
    free(drawn);
}

/* Per iteration: what stays allocated across the boundary (a leak makes it
 * rise), the peak inside the iteration, and what is reserved. Reserved sits
 * at or above the others, so it is a light area drawn first; the kept line
 * is wide and the peak dashed on top of it, so where they meet both show. */
void ca_report_html_iterations(const ca_report_ctx *c, FILE *f) {
    const ca_track_snap *s = &c->snap;
    size_t n = s->n_bounds;
    if (n < 2) return;
    double *x = malloc(n * sizeof *x), *ya = malloc(n * sizeof *ya), *yp = malloc(n * sizeof *yp),
           *yr = malloc(n * sizeof *yr);
    double alerts[CA_MAX_OOM_RECORDS];
    char tips[CA_MAX_OOM_RECORDS][160];
    const char *tipp[CA_MAX_OOM_RECORDS];
    if (x && ya && yp && yr) {
        for (size_t i = 0; i < n; i++) {
            x[i] = s->bounds[i].iteration;
            ya[i] = (double)s->bounds[i].allocated;
            yp[i] = (double)s->bounds[i].peak_allocated;
            yr[i] = (double)s->bounds[i].reserved;
        }
        size_t na = 0;
        for (size_t i = 0; i < s->n_ooms && na < CA_MAX_OOM_RECORDS; i++, na++) {
            char b[32];
            alerts[na] = s->ooms[i].iteration;
            snprintf(tips[na], sizeof tips[na], "out of memory at iteration %u: %s requested", s->ooms[i].iteration,
                     ca_report_bytes((double)s->ooms[i].requested, b, sizeof b));
            tipp[na] = tips[na];
        }
        ca_svg_series ser[3] = {
            {.name = "reserved (held from the device)", .color = "#ff7f0e", .x = x, .y = yr, .n = n, .area = 1, .width = 1},
            {.name = "kept at the boundary", .color = "#1f77b4", .x = x, .y = ya, .n = n, .width = 2.5},
            {.name = "peak in the iteration", .color = "#2ca02c", .x = x, .y = yp, .n = n, .dash = "6,4"},
        };
        ca_svg_plot_opts o = {0};
        o.title = "Memory per iteration (a leak is a rising 'kept' line)";
        o.x_label = "iteration (at its end)";
        o.y_bytes = 1;
        o.alerts = alerts;
        o.alert_tips = tipp;
        o.n_alerts = na;
        ca_svg_plot(f, &o, ser, 3);
        fputs("<p class=\"note\">Kept at the boundary: still allocated when the iteration ends (weights, gradients, "
              "optimizer state, and whatever leaks). Peak in the iteration: the most allocated during it. Reserved "
              "(the shaded area): what cudalloc holds from the device at the boundary, the allocated memory plus "
              "free blocks it keeps cached for reuse; it is never below what is kept.</p>\n",
              f);
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

/* Every segment, a bar each, as its allocator made it; past
 * MAX_SEGMENTS_DRAWN, those holding the most cached free memory, in address
 * order. */
void ca_report_html_segments(const ca_report_ctx *c, FILE *f) {
    const ca_frag *fr = &c->frag;
    if (!fr->n_segs) {
        fputs("<p>No mapped memory.</p>\n", f);
        return;
    }
    const ca_frag_segment **pick;
    size_t n = ca_report_segments_shown(c, MAX_SEGMENTS_DRAWN, &pick);
    ca_svg_segment *segs = calloc(n ? n : 1, sizeof *segs);
    blocks_acc *acc = calloc(n ? n : 1, sizeof *acc);
    char (*labels)[64] = calloc(n ? n : 1, sizeof *labels);
    if (n && segs && acc && labels) {
        for (size_t i = 0; i < n; i++) {
            const ca_frag_segment *g = pick[i];
            char sz[32];
            ca_report_bytes((double)g->reserved, sz, sizeof sz);
            snprintf(labels[i], sizeof labels[i], "0x%" PRIxPTR " %s%s%s", g->addr,
                     g->pool == 1 ? "small " : g->pool == 2 ? "large " : "", sz, g->expandable == 1 ? " exp." : "");
            ca_frag_walk(&c->snap, g, collect, &acc[i]);
            segs[i] = (ca_svg_segment){g->addr, g->reserved, labels[i], NULL, acc[i].b, acc[i].n};
        }
        ca_svg_segmap_opts o = {"Segments (blue: allocated, grey: free, cached)", 0, 1};
        ca_svg_segment_map(f, &o, segs, n);
        if (fr->n_segs > n)
            fprintf(f, "<p>%zu segments; the %zu holding the most free cached memory are drawn, %zu more are not.</p>\n",
                    fr->n_segs, n, fr->n_segs - n);
    }
    for (size_t i = 0; acc && i < n; i++) free(acc[i].b);
    free(acc);
    free(segs);
    free(labels);
    free(pick);
}
