/* Drawing for the self-contained HTML report (html.c: the page; svg.c: line
 * plots; svg_segmap.c: the segment map): inline SVG, no external
 * references of any kind (not even an xmlns URI: HTML's parser puts <svg> in
 * the SVG namespace by itself). The SVG itself has no script; a plot can
 * describe its own geometry (data-* attributes) and say which points it drew,
 * for a page script that shows those points on hover.
 *
 * Everything writes to a FILE*. Drawing is tolerant of odd data: non-finite
 * points are skipped, blocks are clipped to their segment; the functions
 * return -1 only for NULL arguments or when the stream reports an error. */
#ifndef CA_SVG_H
#define CA_SVG_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- HTML ---- */

/* Escapes text for element content and quoted attributes alike (& < > " '),
 * replacing invalid UTF-8 and characters XML forbids (controls other than
 * tab/newline/CR, U+FFFE, U+FFFF) with U+FFFD. NULL writes nothing. */
int ca_html_escape(FILE *f, const char *s);
int ca_html_escape_n(FILE *f, const char *s, size_t n);

/* Element content of prose: escaped, and each abbreviation the reports use
 * (OOM, CUPTI, NVTX, bf16, e.g., ...) in <abbr title="what it stands
 * for">, so a reader learns it where it stands. Not for attributes or SVG. */
int ca_html_text(FILE *f, const char *s);

/* Doctype, <head> with charset, escaped <title> and the report's inline
 * CSS, then <body>. ca_html_end() closes body and html. */
int ca_html_begin(FILE *f, const char *title);
int ca_html_end(FILE *f);

/* A coordinate with at most one decimal: enough at screen resolution. For
 * the drawings (svg.c, svg_segmap.c) and any other inline SVG. */
void ca_svg_coord(FILE *f, double v);

/* ---- time-series line plot ---- */

typedef struct {
    const char *name;    /* legend and tooltip text */
    const char *color;   /* CSS colour; NULL picks from a fixed palette */
    const double *x, *y; /* n points, x non-decreasing for best results */
    size_t n;
    /* How it is drawn (zero: a solid 1.5 px line). Series are drawn in
     * order, so a wide or filled one goes first and the lines it would hide
     * stay on top of it. */
    double width;        /* stroke width in px; 0: 1.5 */
    const char *dash;    /* stroke-dasharray, e.g. "6,4"; NULL: solid */
    int area;            /* 1: the area under the line is filled, lightly */
} ca_svg_series;

typedef struct {
    const char *title;     /* drawn above the plot; may be NULL */
    const char *x_label;   /* e.g. "time (s)"; may be NULL */
    int y_bytes;           /* y values are bytes: ticks in B/KiB/MiB/GiB... */
    int width, height;     /* SVG size in px; 0 means 960 x 320 */
    const double *marks;   /* x of vertical markers (iteration starts) */
    size_t n_marks;
    const char *mark_name; /* legend text for markers; NULL: "iteration" */
    /* Alerts (out-of-memory failures): red vertical lines over the series,
     * each with its tooltip, and a legend entry. The x range covers them. */
    const double *alerts;
    const char *const *alert_tips; /* n_alerts texts; NULL: alert_name */
    size_t n_alerts;
    const char *alert_name;        /* NULL: "out of memory" */
    /* With an id, the <svg> gets it and data-x0/x1/y0/y1 (data ranges) and
     * data-l/r/t/b (the plot box in SVG units), and holds a hidden
     * <line class="hover-line"> and <circle class="hover-dot"> for a script
     * to move. */
    const char *id;
} ca_svg_plot_opts;

/* Draws the series as polylines over shared axes, downsampled to the plot's
 * pixel columns with ca_svg_downsample() so the file stays small however
 * long the series are. */
int ca_svg_plot(FILE *f, const ca_svg_plot_opts *o, const ca_svg_series *s, size_t ns);

/* ca_svg_plot(), also saying which points it drew: the indices kept by the
 * downsampling of any series, ascending, each once, in drawn[] (room for
 * the longest series' n), their number in *n_drawn. Meant for series that
 * share one x array, so an index names one moment in all of them. */
int ca_svg_plot_drawn(FILE *f, const ca_svg_plot_opts *o, const ca_svg_series *s, size_t ns, size_t *drawn,
                      size_t *n_drawn);

/* Downsampling used by ca_svg_plot(): maps x in [x0, x1] onto `cols` pixel
 * columns and, for each run of consecutive points in one column, keeps the
 * first, last, lowest and highest (in their original order), so every peak
 * and trough survives and the polyline looks the same at that width.
 * Non-finite points are dropped. ox and oy need room for n points (the
 * result never has more); returns the number kept. */
size_t ca_svg_downsample(const double *x, const double *y, size_t n, double x0, double x1,
                         unsigned cols, double *ox, double *oy);

/* ---- segment map ---- */

enum { CA_SVG_ALLOCATED, CA_SVG_PENDING_FREE, CA_SVG_INACTIVE, CA_SVG_UNMAPPED };

typedef struct {
    uint64_t addr, size;
    int state;           /* CA_SVG_* */
    const char *tip;     /* tooltip; NULL: state, size and address */
} ca_svg_block;

typedef struct {
    uint64_t addr, size;
    const char *label;   /* left of the row; NULL: address and size */
    const char *tip;     /* tooltip of the segment outline; NULL: a summary */
    const ca_svg_block *blocks; /* in address order */
    size_t n_blocks;
} ca_svg_segment;

typedef struct {
    const char *title;
    int width;           /* px; 0 means 960 */
    int shared_scale;    /* 1: bar length proportional to segment size;
                            0: every segment spans the full width */
} ca_svg_segmap_opts;

/* One row per segment, its blocks as rectangles coloured by state, each
 * with a <title> tooltip. Blocks narrower than a pixel are pooled per pixel
 * column into one rectangle (coloured by the state holding most bytes,
 * tooltip with the counts), so the output stays within a few rectangles
 * per pixel of width. */
int ca_svg_segment_map(FILE *f, const ca_svg_segmap_opts *o, const ca_svg_segment *segs, size_t n);

#endif
