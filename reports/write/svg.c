/* Line plots for the HTML report: scales, downsampling, the plot. See svg.h. */
#include "reports/write/svg.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reports/write/fmt.h"

static const char *const palette[] = {
    "#4e79a7", "#f28e2c", "#e15759", "#76b7b2", "#59a14f",
    "#edc949", "#af7aa1", "#ff9da7", "#9c755f", "#bab0ab",
};
#define PALETTE_N (sizeof palette / sizeof palette[0])

/* ---- numbers and scales ---- */

void ca_svg_coord(FILE *f, double v)
{
    char b[40];
    int n = ca_fmt_fixed(b, sizeof b, v, 1);
    if (n < 0) {
        fputc('0', f);
        return;
    }
    if (n >= 2 && b[n - 2] == '.' && b[n - 1] == '0')
        b[n - 2] = '\0';
    fputs(b, f);
}

/* 1, 2 or 5 times a power of ten, near raw. */
static double nice_step(double raw)
{
    if (!(raw > 0) || !isfinite(raw))
        return 1;
    double mag = pow(10, floor(log10(raw)));
    double norm = raw / mag;
    return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

static int decimals_for(double step)
{
    int d = 0;
    while (d < 9 && fabs(step - round(step)) > step * 1e-9) {
        step *= 10;
        d++;
    }
    return d;
}

static const char *const byte_units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

/* ---- downsampling ---- */

/* Each kept point is emitted as its index into x and y. */
typedef void (*emit_fn)(void *ctx, size_t i);

static void m4_flush(size_t idx[4], emit_fn emit, void *ctx)
{
    /* first, min, max, last -> ascending, without repeats */
    for (int a = 1; a < 4; a++)
        for (int b = a; b > 0 && idx[b] < idx[b - 1]; b--) {
            size_t t = idx[b];
            idx[b] = idx[b - 1];
            idx[b - 1] = t;
        }
    for (int a = 0; a < 4; a++)
        if (a == 0 || idx[a] != idx[a - 1])
            emit(ctx, idx[a]);
}

static void m4(const double *x, const double *y, size_t n, double x0, double x1, unsigned cols,
               emit_fn emit, void *ctx)
{
    if (cols == 0)
        cols = 1;
    double span = x1 - x0;
    double scale = span > 0 && isfinite(span) ? cols / span : 0;
    int have = 0;
    unsigned col = 0;
    size_t first = 0, last = 0, imin = 0, imax = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i]))
            continue;
        double d = floor((x[i] - x0) * scale);
        unsigned c = d <= 0 ? 0 : d >= cols - 1 ? cols - 1 : (unsigned)d;
        if (have && c == col) {
            last = i;
            if (y[i] < y[imin])
                imin = i;
            if (y[i] > y[imax])
                imax = i;
            continue;
        }
        if (have) {
            size_t idx[4] = {first, imin, imax, last};
            m4_flush(idx, emit, ctx);
        }
        have = 1;
        col = c;
        first = last = imin = imax = i;
    }
    if (have) {
        size_t idx[4] = {first, imin, imax, last};
        m4_flush(idx, emit, ctx);
    }
}

struct store {
    const double *x, *y;
    double *ox, *oy;
    size_t n;
};

static void store_point(void *ctx, size_t i)
{
    struct store *s = ctx;
    s->ox[s->n] = s->x[i];
    s->oy[s->n] = s->y[i];
    s->n++;
}

size_t ca_svg_downsample(const double *x, const double *y, size_t n, double x0, double x1,
                         unsigned cols, double *ox, double *oy)
{
    if (!x || !y || !ox || !oy)
        return 0;
    struct store s = {x, y, ox, oy, 0};
    m4(x, y, n, x0, x1, cols, store_point, &s);
    return s.n;
}

/* ---- line plot ---- */

struct plot_map {
    FILE *f;
    double x0, x1, y0, y1;   /* data ranges */
    double L, R, T, B;       /* pixel box */
    const double *x, *y;     /* the series being drawn */
    unsigned char *drawn;    /* per index: kept by some series (NULL: not asked) */
};

static double px_x(const struct plot_map *m, double x)
{
    return m->L + (x - m->x0) / (m->x1 - m->x0) * (m->R - m->L);
}

static double px_y(const struct plot_map *m, double y)
{
    return m->B - (y - m->y0) / (m->y1 - m->y0) * (m->B - m->T);
}

static void emit_polyline_point(void *ctx, size_t i)
{
    struct plot_map *m = ctx;
    fputc(' ', m->f);
    ca_svg_coord(m->f, px_x(m, m->x[i]));
    fputc(',', m->f);
    ca_svg_coord(m->f, px_y(m, m->y[i]));
    if (m->drawn)
        m->drawn[i] = 1;
}

static void y_label(FILE *f, double v, double unit, const char *uname, int dec)
{
    char b[48];
    if (ca_fmt_fixed(b, sizeof b, v / unit, dec) < 0)
        snprintf(b, sizeof b, "%g", v / unit);
    fputs(b, f);
    if (uname) {
        fputc(' ', f);
        fputs(uname, f);
    }
}

static const char *series_color(const ca_svg_series *s, size_t k)
{
    return s[k].color ? s[k].color : palette[k % PALETTE_N];
}

/* stroke-width and stroke-dasharray of a series (and its legend swatch). */
static void stroke_style(FILE *f, const ca_svg_series *s)
{
    fputs(" stroke-width=\"", f);
    ca_svg_coord(f, s->width > 0 && isfinite(s->width) ? s->width : 1.5);
    fputc('"', f);
    if (s->dash) {
        fputs(" stroke-dasharray=\"", f);
        ca_html_escape(f, s->dash);
        fputc('"', f);
    }
}

#define ALERT_COLOR "#d62728"

static int plot(FILE *f, const ca_svg_plot_opts *o, const ca_svg_series *s, size_t ns, size_t *drawn,
                size_t *n_drawn)
{
    static const ca_svg_plot_opts defaults;
    if (n_drawn)
        *n_drawn = 0;
    if (!f || (ns && !s) || (n_drawn && !drawn))
        return -1;
    if (!o)
        o = &defaults;
    int W = o->width > 0 ? o->width : 960, H = o->height > 0 ? o->height : 320;
    if (W < 240)
        W = 240;
    if (H < 140)
        H = 140;
    struct plot_map m = {.f = f, .L = 84, .R = W - 16, .T = 44, .B = H - 40};

    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (size_t k = 0; k < ns; k++)
        for (size_t i = 0; i < s[k].n && s[k].x && s[k].y; i++) {
            double x = s[k].x[i], y = s[k].y[i];
            if (!isfinite(x) || !isfinite(y))
                continue;
            x0 = fmin(x0, x), x1 = fmax(x1, x);
            y0 = fmin(y0, y), y1 = fmax(y1, y);
        }
    for (size_t i = 0; o->alerts && i < o->n_alerts; i++)
        if (isfinite(o->alerts[i]))
            x0 = fmin(x0, o->alerts[i]), x1 = fmax(x1, o->alerts[i]);
    if (!(x0 <= x1) && o->marks)   /* no data: let the markers set the range */
        for (size_t i = 0; i < o->n_marks; i++)
            if (isfinite(o->marks[i]))
                x0 = fmin(x0, o->marks[i]), x1 = fmax(x1, o->marks[i]);
    if (!(x0 <= x1))
        x0 = 0, x1 = 1;
    if (x0 == x1)
        x0 -= 0.5, x1 += 0.5;
    if (!(y0 <= y1))
        y0 = 0, y1 = 1;
    if (y0 > 0)
        y0 = 0;   /* memory plots read best from zero */
    if (y1 <= y0)
        y1 = y0 + 1;

    /* y axis: ticks at a 1-2-5 step in the unit that suits the largest value */
    double unit = 1;
    const char *uname = NULL;
    if (o->y_bytes) {
        double big = fmax(fabs(y0), fabs(y1));
        int u = 0;
        while (u < 6 && big >= 1024.0 * unit)
            unit *= 1024.0, u++;
        uname = byte_units[u];
    }
    double ystep = nice_step((y1 - y0) / unit / 5) * unit;
    if (o->y_bytes && ystep < 1)
        ystep = 1;
    y0 = floor(y0 / ystep) * ystep;
    y1 = ceil(y1 / ystep) * ystep;
    if (y1 <= y0)
        y1 = y0 + ystep;
    int ydec = decimals_for(ystep / unit);
    m.x0 = x0, m.x1 = x1, m.y0 = y0, m.y1 = y1;

    fprintf(f, "<svg class=\"plot\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"11\"", W, H, W, H);
    if (o->id) {
        fputs(" id=\"", f);
        ca_html_escape(f, o->id);
        fputc('"', f);
        const double v[8] = {x0, x1, y0, y1, m.L, m.R, m.T, m.B};
        static const char *const k[8] = {"x0", "x1", "y0", "y1", "l", "r", "t", "b"};
        for (int i = 0; i < 8; i++) {
            char num[40];
            if (ca_fmt_double(num, sizeof num, v[i]) < 0)
                strcpy(num, "0");
            fprintf(f, " data-%s=\"%s\"", k[i], num);
        }
    }
    fputs(">\n", f);
    if (o->title) {
        fprintf(f, "<text x=\"%g\" y=\"16\" font-size=\"13\" font-weight=\"bold\">", m.L);
        ca_html_escape(f, o->title);
        fputs("</text>\n", f);
    }

    /* legend: one swatch per series, then the markers */
    double lx = m.L;
    for (size_t k = 0; k < ns; k++) {
        const char *color = series_color(s, k);
        const char *name = s[k].name ? s[k].name : "series";
        if (s[k].area) {
            fprintf(f, "<rect x=\"%g\" y=\"26\" width=\"16\" height=\"10\" fill-opacity=\"0.18\" fill=\"", lx);
            ca_html_escape(f, color);
            fputs("\"/>", f);
        }
        fprintf(f, "<line x1=\"%g\" y1=\"31\" x2=\"%g\" y2=\"31\"", lx, lx + 16);
        ca_svg_series sw = s[k];
        if (!(sw.width > 3))
            sw.width = 3;   /* a swatch thick enough to see its colour */
        stroke_style(f, &sw);
        fputs(" stroke=\"", f);
        ca_html_escape(f, color);
        fprintf(f, "\"/><text x=\"%g\" y=\"35\">", lx + 20);
        ca_html_escape(f, name);
        fputs("</text>\n", f);
        lx += 36 + 6.5 * (double)strlen(name);
    }
    size_t shown_marks = 0;
    if (o->marks && o->n_marks) {
        fprintf(f, "<line x1=\"%g\" y1=\"26\" x2=\"%g\" y2=\"38\" stroke=\"#888\" stroke-dasharray=\"3,2\"/>"
                   "<text x=\"%g\" y=\"35\">", lx + 4, lx + 4, lx + 10);
        ca_html_escape(f, o->mark_name ? o->mark_name : "iteration");
        fprintf(f, " (%zu)</text>\n", o->n_marks);
        lx += 40 + 6.5 * (double)(strlen(o->mark_name ? o->mark_name : "iteration") + 6);
    }
    if (o->alerts && o->n_alerts) {
        fprintf(f, "<line x1=\"%g\" y1=\"26\" x2=\"%g\" y2=\"38\" stroke=\"" ALERT_COLOR "\" stroke-width=\"2\"/>"
                   "<text x=\"%g\" y=\"35\" fill=\"" ALERT_COLOR "\">", lx + 4, lx + 4, lx + 10);
        ca_html_escape(f, o->alert_name ? o->alert_name : "out of memory");
        fprintf(f, " (%zu)</text>\n", o->n_alerts);
    }

    /* grid and y tick labels */
    for (int i = 0; i <= 100; i++) {
        double v = y0 + i * ystep;
        if (v > y1 + ystep * 1e-6)
            break;
        double py = px_y(&m, v);
        fputs("<line stroke=\"#e4e4e4\" x1=\"", f);
        ca_svg_coord(f, m.L);
        fputs("\" x2=\"", f);
        ca_svg_coord(f, m.R);
        fputs("\" y1=\"", f);
        ca_svg_coord(f, py);
        fputs("\" y2=\"", f);
        ca_svg_coord(f, py);
        fputs("\"/><text text-anchor=\"end\" x=\"", f);
        ca_svg_coord(f, m.L - 6);
        fputs("\" y=\"", f);
        ca_svg_coord(f, py + 4);
        fputs("\">", f);
        y_label(f, v, unit, uname, ydec);
        fputs("</text>\n", f);
    }

    /* x ticks */
    double xstep = nice_step((x1 - x0) / 8);
    int xdec = decimals_for(xstep);
    double first = ceil(x0 / xstep - 1e-9) * xstep;
    for (int i = 0; i <= 100; i++) {
        double v = first + i * xstep;
        if (v > x1 + xstep * 1e-6)
            break;
        double px = px_x(&m, v);
        char b[48];
        if (ca_fmt_fixed(b, sizeof b, v, xdec) < 0)
            snprintf(b, sizeof b, "%g", v);
        fputs("<line stroke=\"#333\" x1=\"", f);
        ca_svg_coord(f, px);
        fputs("\" x2=\"", f);
        ca_svg_coord(f, px);
        fputs("\" y1=\"", f);
        ca_svg_coord(f, m.B);
        fputs("\" y2=\"", f);
        ca_svg_coord(f, m.B + 4);
        fputs("\"/><text text-anchor=\"middle\" x=\"", f);
        ca_svg_coord(f, px);
        fputs("\" y=\"", f);
        ca_svg_coord(f, m.B + 16);
        fprintf(f, "\">%s</text>\n", b);
    }

    /* iteration markers: one path, at most one line per pixel column */
    if (o->marks && o->n_marks) {
        fputs("<path fill=\"none\" stroke=\"#888\" stroke-width=\"0.8\" stroke-dasharray=\"3,2\" d=\"", f);
        long last_col = -1;
        for (size_t i = 0; i < o->n_marks; i++) {
            double v = o->marks[i];
            if (!isfinite(v) || v < x0 || v > x1)
                continue;
            double px = px_x(&m, v);
            long col = lround(px);
            if (col == last_col)
                continue;
            last_col = col;
            fputs(shown_marks++ ? " M" : "M", f);
            ca_svg_coord(f, px);
            fputc(' ', f);
            ca_svg_coord(f, m.T);
            fputs("V", f);
            ca_svg_coord(f, m.B);
        }
        if (!shown_marks)
            fputs("M0 0", f);
        fputs("\"/>\n", f);
    }

    /* series, in the order given */
    unsigned cols = (unsigned)(m.R - m.L);
    size_t maxn = 0;
    for (size_t k = 0; k < ns; k++)
        if (s[k].x && s[k].y && s[k].n > maxn)
            maxn = s[k].n;
    unsigned char *kept = n_drawn && maxn ? calloc(maxn, 1) : NULL;
    if (n_drawn && maxn && !kept)
        return -1;
    for (size_t k = 0; k < ns; k++) {
        if (!s[k].x || !s[k].y || !s[k].n)
            continue;
        const char *color = series_color(s, k);
        m.x = s[k].x;
        m.y = s[k].y;
        m.drawn = NULL;
        double peak = -INFINITY, first_x = NAN, last_x = NAN;
        for (size_t i = 0; i < s[k].n; i++)
            if (isfinite(s[k].x[i]) && isfinite(s[k].y[i])) {
                peak = fmax(peak, s[k].y[i]);
                if (isnan(first_x))
                    first_x = s[k].x[i];
                last_x = s[k].x[i];
            }
        if (s[k].area && isfinite(peak)) {
            /* the line's points, then down to the axis and back */
            fputs("<polygon stroke=\"none\" fill-opacity=\"0.18\" fill=\"", f);
            ca_html_escape(f, color);
            fputs("\" points=\"", f);
            m4(s[k].x, s[k].y, s[k].n, x0, x1, cols, emit_polyline_point, &m);
            fputc(' ', f);
            ca_svg_coord(f, px_x(&m, last_x));
            fputc(',', f);
            ca_svg_coord(f, m.B);
            fputc(' ', f);
            ca_svg_coord(f, px_x(&m, first_x));
            fputc(',', f);
            ca_svg_coord(f, m.B);
            fputs("\"/>\n", f);
        }
        m.drawn = kept;
        fputs("<polyline fill=\"none\" stroke-linejoin=\"round\"", f);
        stroke_style(f, &s[k]);
        fputs(" stroke=\"", f);
        ca_html_escape(f, color);
        fputs("\" points=\"", f);
        m4(s[k].x, s[k].y, s[k].n, x0, x1, cols, emit_polyline_point, &m);
        fputs("\"><title>", f);
        ca_html_escape(f, s[k].name ? s[k].name : "series");
        if (isfinite(peak)) {
            char b[48];
            if (o->y_bytes)
                ca_fmt_bytes(b, sizeof b, peak);
            else if (ca_fmt_double(b, sizeof b, peak) < 0)
                strcpy(b, "?");
            fprintf(f, ", peak %s", b);
        }
        fputs("</title></polyline>\n", f);
    }
    if (kept) {
        for (size_t i = 0; i < maxn; i++)
            if (kept[i])
                drawn[(*n_drawn)++] = i;
        free(kept);
    }

    /* alerts over the series */
    for (size_t i = 0; o->alerts && i < o->n_alerts; i++) {
        if (!isfinite(o->alerts[i]))
            continue;
        double px = px_x(&m, o->alerts[i]);
        fputs("<line class=\"alert\" stroke=\"" ALERT_COLOR "\" stroke-width=\"2\" x1=\"", f);
        ca_svg_coord(f, px);
        fputs("\" x2=\"", f);
        ca_svg_coord(f, px);
        fputs("\" y1=\"", f);
        ca_svg_coord(f, m.T - 4);
        fputs("\" y2=\"", f);
        ca_svg_coord(f, m.B);
        fputs("\"><title>", f);
        ca_html_escape(f, o->alert_tips && o->alert_tips[i] ? o->alert_tips[i]
                          : o->alert_name ? o->alert_name : "out of memory");
        fputs("</title></line>\n", f);
    }
    if (o->id)
        fprintf(f, "<line class=\"hover-line\" stroke=\"#555\" stroke-width=\"0.8\" x1=\"0\" x2=\"0\" "
                   "y1=\"%g\" y2=\"%g\" visibility=\"hidden\"/><circle class=\"hover-dot\" r=\"4\" cx=\"0\" "
                   "cy=\"0\" fill=\"none\" stroke=\"#111\" stroke-width=\"1.5\" visibility=\"hidden\"/>\n",
                m.T, m.B);

    /* axes on top */
    fputs("<path fill=\"none\" stroke=\"#333\" d=\"M", f);
    ca_svg_coord(f, m.L);
    fputc(' ', f);
    ca_svg_coord(f, m.T);
    fputs("V", f);
    ca_svg_coord(f, m.B);
    fputs("H", f);
    ca_svg_coord(f, m.R);
    fputs("\"/>\n", f);
    if (o->x_label) {
        fputs("<text text-anchor=\"middle\" x=\"", f);
        ca_svg_coord(f, (m.L + m.R) / 2);
        fprintf(f, "\" y=\"%d\">", H - 6);
        ca_html_escape(f, o->x_label);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
    return ferror(f) ? -1 : 0;
}

int ca_svg_plot(FILE *f, const ca_svg_plot_opts *o, const ca_svg_series *s, size_t ns)
{
    return plot(f, o, s, ns, NULL, NULL);
}

int ca_svg_plot_drawn(FILE *f, const ca_svg_plot_opts *o, const ca_svg_series *s, size_t ns, size_t *drawn,
                      size_t *n_drawn)
{
    if (!n_drawn)
        return -1;
    return plot(f, o, s, ns, drawn, n_drawn);
}
