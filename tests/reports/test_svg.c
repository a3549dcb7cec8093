/* reports/svg: the SVG inside the HTML parses as XML, text is escaped,
 * nothing points outside the file, downsampling keeps peaks and bounds the
 * output, and the segment map stays small with many tiny blocks. */
#include "helpers.h"

#include <math.h>
#include <stdint.h>

#include "reports/write/fmt.h"
#include "reports/write/svg.h"

/* Python side: every <svg> element parses with xml.etree, and the page
 * holds no reference to anything outside itself. */
static const char *const SVG_PRELUDE =
    "import re, sys, xml.etree.ElementTree as ET\n"
    "html = open(sys.argv[1], encoding='utf-8', errors='strict').read()\n"
    "for bad in ('http:', 'https:', '//', 'src=', 'href', '<script', 'url(', '@import', '<link'):\n"
    "    if bad in html: sys.exit('external reference or script: %r' % bad)\n"
    "svgs = [ET.fromstring(m) for m in re.findall(r'<svg\\b.*?</svg>', html, re.S)]\n"
    "if not svgs: sys.exit('no svg')\n"
    "def titles(e): return [t.text or '' for t in e.iter('title')]\n"
    "def pts(poly): return [tuple(map(float, p.split(','))) for p in poly.get('points').split()]\n";

static void check_html(const char *html, size_t len, const char *checks_py)
{
    const char *dir = scratch();
    char *file = path_in(dir, "report.html");
    write_file(file, html, len);
    char *script;
    ck_assert(asprintf(&script, "%s%s\nprint('OK')\n", SVG_PRELUDE, checks_py) > 0);
    ck_python_ok(dir, script, file);
    free(script);
    free(file);
    scratch_cleanup();
}

START_TEST(downsample_keeps_extremes)
{
    enum { N = 100000, COLS = 800 };
    double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    double *ox = malloc(N * sizeof *ox), *oy = malloc(N * sizeof *oy);
    for (int i = 0; i < N; i++) {
        x[i] = i;
        y[i] = 1000 + (i % 17);
    }
    y[54321] = 1e9;    /* one-sample spike */
    y[12345] = -5;     /* one-sample dip */
    y[777] = NAN;      /* dropped, not drawn */
    size_t n = ca_svg_downsample(x, y, N, 0, N - 1, COLS, ox, oy);
    ck_assert_uint_le(n, 4 * COLS);
    ck_assert_uint_ge(n, 2 * COLS);
    int spike = 0, dip = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert(isfinite(oy[i]));
        if (i)
            ck_assert(ox[i] > ox[i - 1]);   /* order kept, no repeats */
        spike |= oy[i] == 1e9 && ox[i] == 54321;
        dip |= oy[i] == -5 && ox[i] == 12345;
    }
    ck_assert_msg(spike, "the maximum was dropped");
    ck_assert_msg(dip, "the minimum was dropped");
    ck_assert(ox[0] == 0 && ox[n - 1] == N - 1);   /* ends kept */

    /* fewer points than columns: all of them survive */
    ck_assert_uint_eq(ca_svg_downsample(x, y, 50, 0, 49, COLS, ox, oy), 50);
    /* a single column keeps first, min, max and last */
    ck_assert_uint_eq(ca_svg_downsample(x, y, N, 0, N - 1, 1, ox, oy), 4);
    ck_assert(oy[0] == y[0] && oy[3] == y[N - 1]);
    ck_assert_uint_eq(ca_svg_downsample(NULL, y, N, 0, 1, 10, ox, oy), 0);
    free(x), free(y), free(ox), free(oy);
}
END_TEST

START_TEST(byte_formatting)
{
    char b[48];
    ca_fmt_bytes(b, sizeof b, 0);
    ck_assert_str_eq(b, "0 B");
    ca_fmt_bytes(b, sizeof b, 512);
    ck_assert_str_eq(b, "512 B");
    ca_fmt_bytes(b, sizeof b, 1536);
    ck_assert_str_eq(b, "1.50 KiB");
    ca_fmt_bytes(b, sizeof b, 20.5 * 1048576);
    ck_assert_str_eq(b, "20.5 MiB");
    ca_fmt_bytes(b, sizeof b, 2.0 * 1073741824);
    ck_assert_str_eq(b, "2.00 GiB");
    ca_fmt_bytes(b, sizeof b, 640.0 * 1073741824);
    ck_assert_str_eq(b, "640 GiB");
    ca_fmt_bytes(b, sizeof b, 3.0 * 1099511627776.0);
    ck_assert_str_eq(b, "3.00 TiB");
    ca_fmt_fixed(b, sizeof b, -0.04, 1);
    ck_assert_str_eq(b, "0.0");
    ca_fmt_fixed(b, sizeof b, -1.25, 1);
    ck_assert_str_eq(b, "-1.3");
    ck_assert_int_eq(ca_fmt_fixed(b, sizeof b, NAN, 1), -1);
}
END_TEST

static char *render(void (*draw)(FILE *), size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    ck_assert(f);
    ck_assert_int_eq(ca_html_begin(f, "cudalloc <report> & \"more\""), 0);
    draw(f);
    ck_assert_int_eq(ca_html_end(f), 0);
    ck_assert_int_eq(fclose(f), 0);
    return buf;
}

enum { NPTS = 1000000 };
static double *px, *p_alloc, *p_res;

static void draw_plot(FILE *f)
{
    px = malloc(NPTS * sizeof *px);
    p_alloc = malloc(NPTS * sizeof *p_alloc);
    p_res = malloc(NPTS * sizeof *p_res);
    const double GiB = 1073741824.0;
    for (int i = 0; i < NPTS; i++) {
        px[i] = i * 0.001;   /* seconds */
        p_alloc[i] = GiB + (i % 1000) * 1024.0;
        p_res[i] = 2 * GiB;
    }
    p_alloc[765432] = 3 * GiB;   /* the peak that must survive */
    double marks[100];
    for (int k = 0; k < 100; k++)
        marks[k] = k * 10.0;
    ca_svg_series s[2] = {
        {.name = "reserved", .x = px, .y = p_res, .n = NPTS},
        {.name = "allocated <&> \"q\" 'a'", .color = "#123456", .x = px, .y = p_alloc, .n = NPTS},
    };
    ca_svg_plot_opts o = {.title = "memory <over> time", .x_label = "time (s)", .y_bytes = 1,
                          .width = 900, .height = 300, .marks = marks, .n_marks = 100,
                          .mark_name = "iteration"};
    ck_assert_int_eq(ca_svg_plot(f, &o, s, 2), 0);
    free(px), free(p_alloc), free(p_res);
}

START_TEST(plot_is_valid_small_and_keeps_the_peak)
{
    size_t len;
    char *html = render(draw_plot, &len);
    ck_assert_uint_lt(len, 200 * 1024);   /* a million points, a small file */
    check_html(html, len,
        "assert '<title>cudalloc &lt;report&gt; &amp; &quot;more&quot;</title>' in html\n"
        "svg = svgs[0]\n"
        "polys = list(svg.iter('polyline'))\n"
        "assert len(polys) == 2, len(polys)\n"
        "alloc = polys[1]\n"
        "assert titles(alloc)[0].startswith('allocated <&> \"q\" \\'a\\', peak 3.00 GiB'), titles(alloc)\n"
        "assert alloc.get('stroke') == '#123456'\n"
        "p = pts(alloc)\n"
        "assert len(p) <= 4 * 900, len(p)\n"
        "texts = [t.text for t in svg.iter('text')]\n"
        "assert 'memory <over> time' in texts, texts\n"
        "assert '3.0 GiB' in texts and '0.0 GiB' in texts and '0.5 GiB' in texts, texts\n"
        "assert 'time (s)' in texts\n"
        "# the peak (3 GiB, the top tick) is the highest point drawn\n"
        "top = min(y for x, y in p)\n"
        "tick3 = [t for t in svg.iter('text') if t.text == '3.0 GiB'][0]\n"
        "assert abs(top - (float(tick3.get('y')) - 4)) < 0.11, (top, tick3.get('y'))\n"
        "marks = [e for e in svg.iter('path') if e.get('stroke-dasharray')]\n"
        "assert len(marks) == 1 and marks[0].get('d').count('M') == 100, marks[0].get('d')[:80]\n"
        "assert any('iteration (100)' in (t.text or '') for t in svg.iter('text'))\n");
    free(html);
}
END_TEST

static void draw_edge_plots(FILE *f)
{
    /* no series at all, one point, all NaN, constant, negative values */
    ck_assert_int_eq(ca_svg_plot(f, NULL, NULL, 0), 0);
    double x1[] = {5}, y1[] = {7};
    ca_svg_series one = {.name = "one", .x = x1, .y = y1, .n = 1};
    ck_assert_int_eq(ca_svg_plot(f, NULL, &one, 1), 0);
    double xn[] = {NAN, 1, INFINITY}, yn[] = {1, NAN, 2};
    ca_svg_series nan = {.name = NULL, .x = xn, .y = yn, .n = 3};
    ck_assert_int_eq(ca_svg_plot(f, NULL, &nan, 1), 0);
    double xs[] = {0, 1, 2, 3}, ys[] = {-3e6, 5, -1, 2e6};
    ca_svg_series neg = {.name = "neg", .x = xs, .y = ys, .n = 4};
    ca_svg_plot_opts o = {.y_bytes = 1, .width = 10, .height = 10};
    ck_assert_int_eq(ca_svg_plot(f, &o, &neg, 1), 0);
    ca_svg_series empty = {.name = "empty"};
    ck_assert_int_eq(ca_svg_plot(f, &o, &empty, 1), 0);
    ck_assert_int_eq(ca_svg_plot(NULL, &o, &empty, 1), -1);
    ck_assert_int_eq(ca_svg_plot(f, &o, NULL, 1), -1);
}

START_TEST(plot_edge_cases_stay_valid)
{
    size_t len;
    char *html = render(draw_edge_plots, &len);
    check_html(html, len,
        "assert len(svgs) == 5, len(svgs)\n"
        "for s in svgs:\n"
        "    for poly in s.iter('polyline'):\n"
        "        for x, y in pts(poly) if poly.get('points').strip() else []:\n"
        "            assert 0 <= x <= float(s.get('width')) and 0 <= y <= float(s.get('height')), (x, y)\n"
        "    for e in s.iter():\n"
        "        for k, v in e.attrib.items():\n"
        "            assert 'nan' not in v.lower() and 'inf' not in v.lower(), (k, v)\n");
    free(html);
}
END_TEST

enum { TINY = 20000 };
static ca_svg_block *tiny;

static void draw_segments(FILE *f)
{
    const uint64_t MiB = 1 << 20, base = UINT64_C(0x7f0000000000);
    /* a 2 GiB segment made of 20000 tiny blocks of alternating state, then
     * one big block; a small segment with readable blocks and custom tips */
    tiny = malloc((TINY + 1) * sizeof *tiny);
    uint64_t a = base;
    for (int i = 0; i < TINY; i++, a += 4096)
        tiny[i] = (ca_svg_block){.addr = a, .size = 4096, .state = i % 3};
    tiny[TINY] = (ca_svg_block){.addr = a, .size = base + 2048 * MiB - a, .state = CA_SVG_INACTIVE};
    ca_svg_block small[] = {
        {.addr = base + 4096 * MiB, .size = MiB, .state = CA_SVG_ALLOCATED, .tip = "x = torch.empty(<1 MiB>) & \"y\""},
        {.addr = base + 4097 * MiB, .size = MiB, .state = CA_SVG_PENDING_FREE},
        {.addr = base + 4098 * MiB, .size = 2 * MiB, .state = CA_SVG_UNMAPPED},
        {.addr = base + 4094 * MiB, .size = 4 * MiB, .state = CA_SVG_ALLOCATED},  /* straddles the start: 2 MiB inside */
        {.addr = base, .size = MiB, .state = 99},                                 /* outside: skipped */
    };
    ca_svg_segment segs[] = {
        {.addr = base, .size = 2048 * MiB, .blocks = tiny, .n_blocks = TINY + 1},
        {.addr = base + 4096 * MiB, .size = 4 * MiB, .label = "seg <small>", .blocks = small, .n_blocks = 5},
        {.addr = base + 8192 * MiB, .size = 0},
    };
    ca_svg_segmap_opts o = {.title = "segments & blocks", .width = 1000, .shared_scale = 1};
    ck_assert_int_eq(ca_svg_segment_map(f, &o, segs, 3), 0);
    o.shared_scale = 0;   /* every row full width: the small segment's blocks show */
    ck_assert_int_eq(ca_svg_segment_map(f, &o, segs, 3), 0);
    ck_assert_int_eq(ca_svg_segment_map(f, NULL, NULL, 0), 0);
    ck_assert_int_eq(ca_svg_segment_map(f, NULL, NULL, 2), -1);
    free(tiny);
}

START_TEST(segment_map_valid_bounded_with_tooltips)
{
    size_t len;
    char *html = render(draw_segments, &len);
    ck_assert_uint_lt(len, 300 * 1024);
    check_html(html, len,
        "assert len(svgs) == 3\n"
        "W = float(svgs[0].get('width'))\n"
        "for s in svgs[:2]:\n"
        "    rects = list(s.iter('rect'))\n"
        "    assert len(rects) < 3 * 1000, len(rects)   # 20000 tiny blocks pooled per pixel\n"
        "    for r in rects:   # inside the picture, never empty\n"
        "        x, w = float(r.get('x')), float(r.get('width'))\n"
        "        assert w > 0 and x >= 0 and x + w <= W + 0.2, (x, w)\n"
        "    t = titles(s)\n"
        "    assert any('small blocks' in x and 'allocated' in x and 'inactive' in x for x in t)\n"
        "    assert any(x.startswith('inactive (cached) 1.92 GiB at 0x7f0004e20000') for x in t), t\n"
        "    assert any(x.startswith('segment 0x7f0000000000, 2.00 GiB') for x in t), t[:3]\n"
        "    texts = [e.text for e in s.iter('text')]\n"
        "    assert 'seg <small>' in texts and 'segments & blocks' in texts, texts\n"
        "    assert any(x and x.startswith('0x7f0200000000') for x in texts), texts\n"
        "t = titles(svgs[1])\n"
        "assert 'x = torch.empty(<1 MiB>) & \"y\"' in t, t[-8:]\n"
        "assert 'pending free 1.00 MiB at 0x7f0100100000' in t, t[-8:]\n"
        "assert 'unmapped 2.00 MiB at 0x7f0100200000' in t, t[-8:]\n"
        "assert 'allocated 4.00 MiB at 0x7f00ffe00000' in t, t[-8:]\n"
        "# the straddling block counts only its part inside the segment\n"
        "assert any(x.startswith('segment 0x7f0100000000, 4.00 MiB: 3.00 MiB allocated, 1.00 MiB pending') for x in t), t\n"
        "fills = {r.get('fill') for r in svgs[1].iter('rect')}\n"
        "assert {'#4e79a7', '#e15759', '#d9d9d9', '#ffffff'} <= fills, fills\n"
        "assert 'no segments' in [e.text for e in svgs[2].iter('text')]\n");
    free(html);
}
END_TEST

/* Styles, alerts, the hover geometry and the drawn points. The series
 * share x; a spike in one must be among the drawn points of both. */
enum { NSTY = 50000 };
static size_t drawn[NSTY], n_drawn;
static double sx[NSTY], sy1[NSTY], sy2[NSTY];

static void draw_styled(FILE *f)
{
    for (int i = 0; i < NSTY; i++) {
        sx[i] = 1000 + i;
        sy1[i] = 100 + i % 7;
        sy2[i] = 300;
    }
    sy1[31337] = 5000;
    double alerts[] = {1000 + 40000, 1000 + 60000}; /* the second past the data: the range grows */
    const char *tips[] = {"out of memory <at> 12", NULL};
    ca_svg_series s[2] = {
        {.name = "reserved", .color = "#ff7f0e", .x = sx, .y = sy2, .n = NSTY, .area = 1, .width = 1},
        {.name = "kept", .color = "#1f77b4", .x = sx, .y = sy1, .n = NSTY, .dash = "6,4", .width = 2.5},
    };
    ca_svg_plot_opts o = {.title = "styled", .id = "ev<1>", .alerts = alerts, .alert_tips = tips, .n_alerts = 2};
    ck_assert_int_eq(ca_svg_plot_drawn(f, &o, s, 2, drawn, &n_drawn), 0);
    size_t unused;
    ck_assert_int_eq(ca_svg_plot_drawn(f, &o, s, 2, NULL, &unused), -1);
    ck_assert_int_eq(ca_svg_plot_drawn(f, &o, s, 2, drawn, NULL), -1);
}

START_TEST(plot_styles_alerts_and_drawn_points)
{
    size_t len;
    char *html = render(draw_styled, &len);
    ck_assert_uint_gt(n_drawn, 1000);
    ck_assert_uint_le(n_drawn, 6 * 900);
    int spike = 0;
    for (size_t i = 0; i < n_drawn; i++) {
        if (i)
            ck_assert_uint_gt(drawn[i], drawn[i - 1]);
        spike |= drawn[i] == 31337;
    }
    ck_assert_msg(spike && drawn[0] == 0 && drawn[n_drawn - 1] == NSTY - 1, "spike or ends not drawn");
    char *py;
    ck_assert(asprintf(&py,
        "svg = svgs[0]\n"
        "assert svg.get('id') == 'ev<1>', svg.attrib\n"
        "g = {k: float(svg.get('data-' + k)) for k in ('x0', 'x1', 'y0', 'y1', 'l', 'r', 't', 'b')}\n"
        "assert g['x0'] == 1000 and g['x1'] == 61000 and g['y0'] == 0 and g['y1'] >= 5000, g\n"
        "poly = svg.findall('polygon')\n"
        "assert len(poly) == 1 and poly[0].get('fill') == '#ff7f0e' and poly[0].get('fill-opacity'), poly\n"
        "lines = svg.findall('polyline')\n"
        "assert [l.get('stroke') for l in lines] == ['#ff7f0e', '#1f77b4'], 'drawn in the order given'\n"
        "assert lines[1].get('stroke-dasharray') == '6,4' and lines[1].get('stroke-width') == '2.5'\n"
        "assert lines[0].get('stroke-width') == '1' and lines[0].get('stroke-dasharray') is None\n"
        "# the drawn points are the union of both lines' vertices\n"
        "nv = [len(l.get('points').split()) for l in lines]\n"
        "assert max(nv) <= %zu <= sum(nv), (nv, %zu)\n"
        "al = [e for e in svg.findall('line') if e.get('class') == 'alert']\n"
        "assert [a.find('title').text for a in al] == ['out of memory <at> 12', 'out of memory'], al\n"
        "assert float(al[1].get('x1')) == g['r'] and al[0].get('stroke') == '#d62728'\n"
        "assert any((t.text or '').startswith('out of memory (2)') for t in svg.iter('text'))\n"
        "hv = [e for e in svg.iter() if e.get('class') in ('hover-line', 'hover-dot')]\n"
        "assert len(hv) == 2 and all(e.get('visibility') == 'hidden' for e in hv)\n"
        "assert '<script' not in html\n",
        n_drawn, n_drawn) > 0);
    check_html(html, len, py);
    free(py);
    free(html);
}
END_TEST

START_TEST(html_escaping)
{
    char *buf = NULL;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    ca_html_escape(f, "<a href='x'>&amp;</a>\"");
    fputc('|', f);
    ca_html_escape(f, "ctl\x01\x08\x0b\x1f tab\tnl\n bad\xff\xc3 nbsp\xc2\xa0 nonchar\xef\xbf\xbf");
    fputc('|', f);
    ca_html_escape_n(f, "a\0b", 3);
    ca_html_escape(f, NULL);
    fclose(f);
    ck_assert_str_eq(buf, "&lt;a href=&#39;x&#39;&gt;&amp;amp;&lt;/a&gt;&quot;|"
                          "ctl\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD tab\tnl\n "
                          "bad\xEF\xBF\xBD\xEF\xBF\xBD nbsp\xc2\xa0 nonchar\xEF\xBF\xBD|"
                          "a\xEF\xBF\xBD" "b");
    free(buf);
    ck_assert_int_eq(ca_html_escape(NULL, "x"), -1);
}
END_TEST

static Suite *svg_suite(void)
{
    Suite *s = suite_create("svg");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, downsample_keeps_extremes);
    tcase_add_test(tc, byte_formatting);
    tcase_add_test(tc, plot_is_valid_small_and_keeps_the_peak);
    tcase_add_test(tc, plot_edge_cases_stay_valid);
    tcase_add_test(tc, segment_map_valid_bounded_with_tooltips);
    tcase_add_test(tc, html_escaping);
    tcase_add_test(tc, plot_styles_alerts_and_drawn_points);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(svg_suite)
