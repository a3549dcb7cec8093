/* The segment map for the HTML report: each segment a bar, its blocks
 * coloured by state. See svg.h. */
#include "reports/write/svg.h"

#include <inttypes.h>
#include <string.h>

#include "reports/write/fmt.h"

static const struct {
    const char *name, *fill;
} state_style[] = {
    [CA_SVG_ALLOCATED] = {"allocated", "#4e79a7"},
    [CA_SVG_PENDING_FREE] = {"pending free", "#e15759"},
    [CA_SVG_INACTIVE] = {"inactive (cached)", "#d9d9d9"},
    [CA_SVG_UNMAPPED] = {"unmapped", "#ffffff"},
};
#define N_STATES 4

#define SEG_LABEL_W 200
#define SEG_ROW_H 18
#define SEG_BAR_H 12
#define SEG_TOP 46

static void rect_open(FILE *f, double x, double y, double w, const char *fill)
{
    fputs("<rect x=\"", f);
    ca_svg_coord(f, x);
    fputs("\" y=\"", f);
    ca_svg_coord(f, y);
    fputs("\" width=\"", f);
    ca_svg_coord(f, w);
    fprintf(f, "\" height=\"%d\" fill=\"%s\"", SEG_BAR_H, fill);
}

static int valid_state(int st) { return st >= 0 && st < N_STATES; }

/* The part of a block inside its segment, as [*lo, *hi); 0 if none. */
static int clip(const ca_svg_segment *sg, const ca_svg_block *bl, uint64_t *lo, uint64_t *hi)
{
    uint64_t seg_end = sg->addr + sg->size < sg->addr ? UINT64_MAX : sg->addr + sg->size;
    uint64_t end = bl->addr + bl->size < bl->addr ? UINT64_MAX : bl->addr + bl->size;
    *lo = bl->addr > sg->addr ? bl->addr : sg->addr;
    *hi = end < seg_end ? end : seg_end;
    return *lo < *hi;
}

/* Blocks under a pixel wide, pooled until the pool spans a pixel. */
struct pool {
    int active;
    double x0, x1;
    uint64_t bytes[N_STATES];
    size_t count[N_STATES];
};

static void pool_flush(FILE *f, struct pool *p, double bar_x, double y)
{
    if (!p->active)
        return;
    int best = 0;
    size_t total = 0;
    uint64_t total_bytes = 0;
    for (int st = 0; st < N_STATES; st++) {
        if (p->bytes[st] > p->bytes[best])
            best = st;
        total += p->count[st];
        total_bytes += p->bytes[st];
    }
    double w = p->x1 - p->x0 < 1 ? 1 : p->x1 - p->x0;
    rect_open(f, bar_x + p->x0, y, w, state_style[best].fill);
    char b[48];
    ca_fmt_bytes(b, sizeof b, (double)total_bytes);
    fprintf(f, "><title>%zu small blocks, %s:", total, b);
    const char *sep = " ";
    for (int st = 0; st < N_STATES; st++) {
        if (!p->count[st])
            continue;
        ca_fmt_bytes(b, sizeof b, (double)p->bytes[st]);
        fprintf(f, "%s%zu %s (%s)", sep, p->count[st], state_style[st].name, b);
        sep = ", ";
    }
    fputs("</title></rect>\n", f);
    memset(p, 0, sizeof *p);
}

static void draw_segment(FILE *f, const ca_svg_segment *sg, double y, double seg_w)
{
    char sz[48], b[48];
    ca_fmt_bytes(sz, sizeof sz, (double)sg->size);

    fputs("<text text-anchor=\"end\" x=\"", f);
    ca_svg_coord(f, SEG_LABEL_W - 8);
    fputs("\" y=\"", f);
    ca_svg_coord(f, y + SEG_BAR_H - 2);
    fputs("\">", f);
    if (sg->label)
        ca_html_escape(f, sg->label);
    else
        fprintf(f, "0x%" PRIx64 " %s", sg->addr, sz);
    fputs("</text>\n", f);

    rect_open(f, SEG_LABEL_W, y, seg_w, "#ffffff");
    fputs(" stroke=\"#555\" stroke-width=\"0.6\"><title>", f);
    if (sg->tip) {
        ca_html_escape(f, sg->tip);
    } else {
        uint64_t by_state[N_STATES] = {0}, lo, hi;
        for (size_t i = 0; i < sg->n_blocks && sg->blocks; i++)
            if (valid_state(sg->blocks[i].state) && clip(sg, &sg->blocks[i], &lo, &hi))
                by_state[sg->blocks[i].state] += hi - lo;
        fprintf(f, "segment 0x%" PRIx64 ", %s: ", sg->addr, sz);
        ca_fmt_bytes(b, sizeof b, (double)by_state[CA_SVG_ALLOCATED]);
        fprintf(f, "%s allocated, ", b);
        ca_fmt_bytes(b, sizeof b, (double)by_state[CA_SVG_PENDING_FREE]);
        fprintf(f, "%s pending free, ", b);
        ca_fmt_bytes(b, sizeof b, (double)by_state[CA_SVG_INACTIVE]);
        fprintf(f, "%s inactive, in %zu blocks", b, sg->n_blocks);
    }
    fputs("</title></rect>\n", f);

    if (!sg->size || !sg->blocks)
        return;
    double ppb = seg_w / (double)sg->size;
    struct pool pool = {0};
    for (size_t i = 0; i < sg->n_blocks; i++) {
        const ca_svg_block *bl = &sg->blocks[i];
        int st = valid_state(bl->state) ? bl->state : CA_SVG_INACTIVE;
        uint64_t lo, hi;
        if (!clip(sg, bl, &lo, &hi))
            continue;   /* outside its segment: nothing to draw */
        double bx0 = (double)(lo - sg->addr) * ppb, bx1 = (double)(hi - sg->addr) * ppb;
        if (bx1 - bx0 < 1.0) {
            if (pool.active && !(bx0 >= pool.x0 - 0.5 && bx0 < pool.x0 + 1.0))
                pool_flush(f, &pool, SEG_LABEL_W, y);
            if (!pool.active) {
                pool.active = 1;
                pool.x0 = bx0;
                pool.x1 = bx1;
            }
            pool.x1 = bx1 > pool.x1 ? bx1 : pool.x1;
            pool.bytes[st] += hi - lo;
            pool.count[st]++;
            continue;
        }
        pool_flush(f, &pool, SEG_LABEL_W, y);
        rect_open(f, SEG_LABEL_W + bx0, y, bx1 - bx0, state_style[st].fill);
        fputs("><title>", f);
        if (bl->tip) {
            ca_html_escape(f, bl->tip);
        } else {
            ca_fmt_bytes(b, sizeof b, (double)bl->size);
            fprintf(f, "%s %s at 0x%" PRIx64, state_style[st].name, b, bl->addr);
        }
        fputs("</title></rect>\n", f);
    }
    pool_flush(f, &pool, SEG_LABEL_W, y);
}

int ca_svg_segment_map(FILE *f, const ca_svg_segmap_opts *o, const ca_svg_segment *segs, size_t n)
{
    static const ca_svg_segmap_opts defaults;
    if (!f || (n && !segs))
        return -1;
    if (!o)
        o = &defaults;
    int W = o->width > 0 ? o->width : 960;
    if (W < SEG_LABEL_W + 100)
        W = SEG_LABEL_W + 100;
    double bar_w = W - SEG_LABEL_W - 10;
    int H = SEG_TOP + (int)(n ? n : 1) * SEG_ROW_H + 6;
    uint64_t max_size = 1;
    for (size_t i = 0; i < n; i++)
        if (segs[i].size > max_size)
            max_size = segs[i].size;

    fprintf(f, "<svg class=\"segments\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n", W, H, W, H);
    if (o->title) {
        fputs("<text x=\"0\" y=\"16\" font-size=\"13\" font-weight=\"bold\">", f);
        ca_html_escape(f, o->title);
        fputs("</text>\n", f);
    }
    double lx = SEG_LABEL_W;
    for (int st = 0; st < N_STATES; st++) {
        fprintf(f, "<rect x=\"%g\" y=\"24\" width=\"12\" height=\"12\" fill=\"%s\" stroke=\"#555\" "
                   "stroke-width=\"0.6\"/><text x=\"%g\" y=\"34\">%s</text>\n",
                lx, state_style[st].fill, lx + 16, state_style[st].name);
        lx += 30 + 6.5 * (double)strlen(state_style[st].name);
    }
    if (!n)
        fprintf(f, "<text x=\"%d\" y=\"%d\">no segments</text>\n", SEG_LABEL_W, SEG_TOP + SEG_BAR_H - 2);
    for (size_t i = 0; i < n; i++) {
        double w = o->shared_scale ? bar_w * ((double)segs[i].size / (double)max_size) : bar_w;
        if (w < 1)
            w = 1;
        draw_segment(f, &segs[i], SEG_TOP + (double)i * SEG_ROW_H, w);
    }
    fputs("</svg>\n", f);
    return ferror(f) ? -1 : 0;
}
