/* The fixes on the HTML page (see fixes_out.h): one bar per fix, its range
 * drawn light and the prediction as a mark, against the device's line; the
 * peak's breakdown as one stacked bar beside them. Inline SVG, no script. */
#include <stdio.h>
#include <string.h>

#include "reports/write/fixes_out.h"
#include "reports/write/fixes_text.h"
#include "reports/write/fmt.h"
#include "reports/write/svg.h"

enum { LABEL_W = 330, BAR_W = 420, ROW_H = 24, TOP = 24 };

static const char *sz(double bytes, char *buf) {
    ca_fmt_bytes(buf, 32, bytes);
    return buf;
}

/* The bar's label, short: "accumulation x4 + bf16 + checkpointing" (the
 * title, on hover, has the long one). */
static void short_label(const ca_fix *f, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    if (f->kinds & CA_FIX_ACCUM) k += (size_t)snprintf(buf + k, n - k, "accumulation x%u", f->factor);
    if ((f->kinds & CA_FIX_BF16) && k < n) k += (size_t)snprintf(buf + k, n - k, "%sbf16 autocast", k ? " + " : "");
    if ((f->kinds & CA_FIX_CHECKPOINT) && k < n)
        snprintf(buf + k, n - k, "%scheckpointing%s", k ? " + " : "", f->kinds == CA_FIX_CHECKPOINT ? " of the blocks" : "");
}

static double px(uint64_t bytes, double scale) { return LABEL_W + (double)bytes * scale; }

static const char *colour(int fits, uint64_t capacity) {
    if (!capacity) return "#6b8fc7";
    return fits == 1 ? "#4c9a5b" : fits == 0 ? "#c8553d" : "#d9a03f";
}

static void bar(FILE *f, int row, const char *label, uint64_t lo, uint64_t p, uint64_t hi, const char *fill,
                double scale, const char *title) {
    double y = TOP + row * ROW_H;
    fprintf(f, "<g><title>");
    ca_html_escape(f, title);
    fprintf(f, "</title><text x=\"%d\" y=\"%.0f\" text-anchor=\"end\" font-size=\"12\">", LABEL_W - 8, y + 15);
    ca_html_escape(f, label);
    fprintf(f, "</text>");
    fprintf(f, "<rect x=\"%d\" y=\"%.0f\" width=\"%.1f\" height=\"16\" fill=\"%s\"/>", LABEL_W, y + 3,
            px(lo, scale) - LABEL_W, fill);
    if (hi > lo)
        fprintf(f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"16\" fill=\"%s\" fill-opacity=\"0.35\"/>",
                px(lo, scale), y + 3, px(hi, scale) - px(lo, scale), fill);
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"#222\" stroke-width=\"2\"/></g>\n",
            px(p, scale), px(p, scale), y + 1, y + 21);
}

/* The stacked breakdown of the peak, bottom up. */
static void stack(FILE *f, const ca_fix_report *r) {
    static const char *const names[] = {"persistent", "kept", "activations", "temporaries"};
    static const char *const fills[] = {"#7a7a7a", "#9c6fb0", "#6b8fc7", "#e0b44c"};
    uint64_t v[] = {r->total.persistent, r->total.kept, r->total.activations, r->total.temporaries};
    const double h = 200, w = 60;
    fprintf(f, "<svg class=\"fix-breakdown\" width=\"230\" height=\"%.0f\" role=\"img\" "
               "aria-label=\"the peak broken down\">\n", h + 40);
    double y = h + 10;
    char b[32];
    for (int i = 0; i < 4; i++) {
        double hh = r->peak ? h * (double)v[i] / (double)r->peak : 0;
        y -= hh;
        fprintf(f, "<rect x=\"10\" y=\"%.1f\" width=\"%.0f\" height=\"%.1f\" fill=\"%s\"><title>%s %s</title></rect>",
                y, w, hh, fills[i], names[i], sz((double)v[i], b));
        fprintf(f, "<rect x=\"85\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                   "<text x=\"100\" y=\"%d\" font-size=\"12\">%s %s</text>\n",
                20 + 18 * (3 - i), fills[i], 29 + 18 * (3 - i), names[i], sz((double)v[i], b));
    }
    fprintf(f, "<text x=\"10\" y=\"%.0f\" font-size=\"12\">peak %s</text></svg>\n", h + 30, sz((double)r->peak, b));
}

/* Lines as a list of class cls (nothing when there is none). */
static void list(FILE *f, const char *cls, char (*lines)[CA_FIX_LINE], size_t n) {
    if (!n) return;
    fprintf(f, "<ul class=\"%s\">\n", cls);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "<li>");
        ca_html_text(f, lines[i]);
        fprintf(f, "</li>\n");
    }
    fprintf(f, "</ul>\n");
}

int ca_fixes_html(FILE *f, const ca_fix_report *r, const char *const *names, const char *id_suffix) {
    char a[32], b[160], c[320];
    fprintf(f, "<h2 id=\"fixes%s\">What would fit</h2>\n", id_suffix ? id_suffix : "");
    if (!r->have) {
        fprintf(f, "<p>No fix can be predicted for this run: ");
        ca_html_text(f, r->why);
        fprintf(f, ".</p>\n");
        return ferror(f) ? -1 : 0;
    }
    fprintf(f, "<p>The peak of iteration %u, %s, and each fix's peak predicted for this run: the mark is the "
               "prediction, the light part its range%s.</p>\n",
            r->iteration, sz((double)r->peak, a),
            r->capacity ? "; green fits the device, red does not, amber may" : "");
    uint64_t top = r->peak > r->capacity ? r->peak : r->capacity;
    for (size_t i = 0; i < r->n_fix; i++)
        if (r->fix[i].high > top) top = r->fix[i].high;
    double scale = top ? BAR_W / ((double)top * 1.05) : 0;
    int rows = (int)r->n_fix + 1;
    fprintf(f, "<div style=\"display:flex;gap:1em;align-items:flex-start\">\n"
               "<svg class=\"fix-bars\" width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"each fix's predicted "
               "peak\">\n", LABEL_W + BAR_W + 20, TOP + rows * ROW_H + 10);
    snprintf(c, sizeof c, "as it runs: %s", sz((double)r->peak, a));
    bar(f, 0, "as it runs", r->peak, r->peak, r->peak, "#7a7a7a", scale, c);
    for (size_t i = 0; i < r->n_fix; i++) {
        const ca_fix *x = &r->fix[i];
        char fig[128], shrt[96];
        ca_fix_label(x, b, sizeof b);
        ca_fix_figures(x, fig, sizeof fig);
        short_label(x, shrt, sizeof shrt);
        snprintf(c, sizeof c, "%s: %s", b, fig);
        bar(f, (int)i + 1, shrt, x->low, x->predicted, x->high, colour(x->fits, r->capacity), scale, c);
    }
    if (r->capacity) { /* its label ends at the line: near the right edge, centred, it was cut ("GiE") */
        double x = px(r->capacity, scale);
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#c00\" stroke-dasharray=\"5,3\"/>"
                   "<text x=\"%.1f\" y=\"14\" font-size=\"12\" fill=\"#c00\" text-anchor=\"end\">device %s</text>\n",
                x, x, TOP - 4, TOP + rows * ROW_H, x, sz((double)r->capacity, a));
    }
    fprintf(f, "</svg>\n");
    stack(f, r);
    fprintf(f, "</div>\n");
    char lines[CA_FIX_ADVICE_MAX][CA_FIX_LINE];
    list(f, "fix-advice", lines, ca_fixes_advice(r, r->capacity, lines, CA_FIX_ADVICE_MAX));
    /* folded: one line until opened (a long page stays as long) */
    fprintf(f, "<details class=\"fix-assumed\"><summary>What was assumed (weights, gradients, optimizer state, "
               "activations)</summary>\n");
    list(f, "fix-assumptions", lines, ca_fixes_assumptions(r, lines, CA_FIX_ADVICE_MAX));
    fprintf(f, "</details>\n");
    int any = 0;
    for (uint32_t g = 1; g < r->n_groups; g++) {
        const ca_breakdown *x = &r->by_group[g];
        if (!x->persistent && !x->kept && !x->activations && !x->temporaries) continue;
        if (!any++)
            fprintf(f, "<table class=\"fix-frames\"><tr><th>frame</th><th>persistent</th><th>kept</th>"
                       "<th>activations</th><th>temporaries</th></tr>\n");
        fprintf(f, "<tr><td>");
        ca_html_escape(f, names && names[g] ? names[g] : "unknown frame");
        char p1[32], p2[32], p3[32], p4[32];
        fprintf(f, "</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", sz((double)x->persistent, p1),
                sz((double)x->kept, p2), sz((double)x->activations, p3), sz((double)x->temporaries, p4));
    }
    if (any) fprintf(f, "</table>\n");
    return ferror(f) ? -1 : 0;
}
