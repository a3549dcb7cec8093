/* The HTML report of a real run (allocator on the count backend, real
 * stacks), as someone with a leak reads it: each finding shown once with its
 * advice and its call sites folded beneath; "growing since" as the text
 * report says it; projections that say what they project (this site alone,
 * this finding, all leaks together) and none after the device ran out;
 * out-of-memory markers on the charts; hover data for exactly the drawn
 * points, with their stacks, bounded however long the run. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>

#include "allocator/allocator.h"
#include "reports/diagnose/oom.h"
#include "reports/write/report.h"
#include "tests/reports/tracking/sim.h"

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

/* One retained graph: three layers' activations kept by every evaluation. */
static NOINLINE void layer_a(ca_allocator *a) { void *p; ca_malloc(a, 1 * MIB, 0, &p, NULL); KEEP(); }
static NOINLINE void layer_b(ca_allocator *a) { void *p; ca_malloc(a, 512 * KIB, 0, &p, NULL); KEEP(); }
static NOINLINE void layer_c(ca_allocator *a) { void *p; ca_malloc(a, 256 * KIB, 0, &p, NULL); KEEP(); }
static NOINLINE void evaluate(ca_allocator *a) {
    layer_a(a);
    KEEP();
    layer_b(a);
    KEEP();
    layer_c(a);
    KEEP();
}
/* Another reason, from iteration 4 on: a scalar metric kept as a tensor. */
static NOINLINE void log_metric(ca_allocator *a) { void *p; ca_malloc(a, 64 * KIB, 0, &p, NULL); KEEP(); }
/* The healthy part of an iteration: a working set made and freed. */
static NOINLINE void train_step(ca_allocator *a, int it) {
    void *act[4];
    for (int k = 0; k < 4; k++) ca_malloc(a, (size_t)(1 + (it + k) % 3) * MIB, 0, &act[k], NULL);
    for (int k = 4; k-- > 0;) ca_free(a, act[k], 0);
    KEEP();
}

/* 12 iterations of that on a 256 MiB device; with oom, then an allocation
 * that does not fit, in iteration 12. */
static NOINLINE void run(ca_allocator **pa, ca_tracker **pt, int oom) {
    ca_allocator *a;
    ck_assert_int_eq(ca_allocator_new(ca_backend_count_new(256 * MIB, 2 * MIB), NULL, &a), CA_OK);
    ca_tracker *t = ca_tracker_new(NULL);
    ca_tracker_attach(t, a);
    void *w;
    ca_malloc(a, 8 * MIB, 0, &w, NULL);
    for (volatile int it = 0; it < 12; it++) {
        train_step(a, it);
        evaluate(a);
        if (it >= 4) log_metric(a);
        ca_tracker_step(t, CA_ITER_EXPLICIT);
    }
    if (oom) {
        void *big;
        ca_oom_info info;
        ck_assert_int_eq(ca_malloc(a, 240 * MIB, 0, &big, &info), CA_ERR_OOM);
        ca_oom_diagnose(t, &info);
    }
    *pa = a;
    *pt = t;
}

/* Writes run.html and run.json into dir. */
static void write_reports(const char *dir, ca_tracker *t, ca_allocator *a) {
    char *prefix = path_in(dir, "run");
    ca_report_options o;
    ca_report_options_default(&o);
    o.formats = CA_REPORT_HTML | CA_REPORT_JSON;
    o.expandable = 1;
    ck_assert_int_eq(ca_report_write(t, a, prefix, &o), 0);
    free(prefix);
}

/* Python: the page and its JSON twin, the visible text, the charts' SVG and
 * the hover data parsed. */
static const char *const PRELUDE =
    "import html, json, re, sys, xml.etree.ElementTree as ET\n"
    "page = open(sys.argv[1] + '/run.html', encoding='utf-8').read()\n"
    "rep = json.load(open(sys.argv[1] + '/run.json'))\n"
    "text = html.unescape(re.sub(r'<[^>]+>', '', page))\n"
    "for bad in ('src=', 'href=', 'http:', 'https:', '@import', '<link', 'url('):\n"
    "    assert bad not in page, 'external reference: %r' % bad\n"
    "svgs = {s.get('id') or s.get('class') + str(i): s for i, s in\n"
    "        enumerate(ET.fromstring(m) for m in re.findall(r'<svg\\b.*?</svg>', page, re.S))}\n"
    "ev = svgs['events']\n"
    "m = re.search(r'<script type=\"application/json\" id=\"events-data\">(.*?)</script>', page, re.S)\n"
    "assert m, 'no hover data'\n"
    "D = json.loads(m.group(1))\n"
    "assert re.search(r'<script>\\s*\\(function', page) and \"getElementById('events-data' + sfx)\" in page and \"('');\" in page, 'no hover script'\n";

static const char *const LEAK_CHECK =
    "assert rep['verdict']['code'] == 'leak', rep['verdict']\n"
    "leaks = rep['leaks']\n"
    "assert len(leaks) == 4, [l['site'] for l in leaks]\n"
    "# two findings: the graph (3 sites, one advice) and the metric (its own advice)\n"
    "assert page.count('class=\"finding\"') == 2, page.count('class=\"finding\"')\n"
    "advice = {l['advice'] for l in leaks}\n"
    "assert len(advice) == 2, advice\n"
    "for a in advice:\n"
    "    assert text.count(a) == 1, (text.count(a), a[:60])\n"
    "assert 'Finding 1: a forward pass run under run (' in text and 'is kept alive (3 call sites)' in text\n"
    "assert 'Finding 2: allocations from log_metric (' in text\n"
    "# 'growing since' is the growth's start, as the text report says it\n"
    "g = [l for l in leaks if l['site'].startswith('layer_a')][0]\n"
    "assert g['growth_since_iteration'] == 1 and g['first_iteration'] == 0, g\n"
    "assert 'growing since iteration 1;' in text and 'growing since iteration 4;' in text\n"
    "assert 'growing since iteration 0' not in text\n"
    "rows = re.findall(r'<tr><td>\\d+</td>(.*?)</tr>', page, re.S)\n"
    "assert len(rows) == 3, len(rows)\n"
    "for r in rows:\n"
    "    assert re.findall(r'<td class=\"num\">([^<]*)</td>', r)[2] == '1', r\n"
    "# the projections say whose they are and agree with the verdict line\n"
    "together = rep['leak_projected_oom_iteration']\n"
    "assert isinstance(together, int) and 'runs out at iteration %d' % together in rep['verdict']['text']\n"
    "assert '(this finding alone; all leaks together: iteration %d)' % together in text, together\n"
    "assert 'device runs out at iteration if only this site leaked' in text\n"
    "assert 'class=\"alert\"' not in page, 'an out-of-memory marker without a failure'\n";

static const char *const HOVER_CHECK =
    "n = len(D['x'])\n"
    "assert n and all(len(D[k]) == n for k in ('x', 't', 'a', 'r', 'k', 's', 'st')), {k: len(D[k]) for k in D}\n"
    "assert all(a < b for a, b in zip(D['x'], D['x'][1:])), 'x not increasing'\n"
    "assert all(r >= a for a, r in zip(D['a'], D['r'])), 'reserved below allocated'\n"
    "assert all(-1 <= s < len(D['stacks']) for s in D['st'])\n"
    "assert all(0 <= f < len(D['frames']) for st in D['stacks'] for f in st)\n"
    "assert len(set(D['frames'])) == len(D['frames']), 'a frame text twice'\n"
    "stacks = [' / '.join(D['frames'][f] for f in D['stacks'][s]) for s in D['st'] if s >= 0]\n"
    "assert any(s.startswith('layer_a at ') and 'evaluate at ' in s for s in stacks), stacks[:3]\n"
    "maps = [i for i in range(n) if D['kinds'][D['k'][i]] == 'map']\n"
    "assert maps and all(D['st'][i] >= 0 for i in maps), 'segment maps without the stack that made them'\n"
    "# exactly the drawn points: each one is a vertex of the allocated or reserved line\n"
    "g = {k: float(ev.get('data-' + k)) for k in ('x0', 'x1', 'l', 'r')}\n"
    "import bisect\n"
    "vx = sorted({float(q.split(',')[0]) for p in ev.iter('polyline') for q in p.get('points').split()})\n"
    "def drawn(x):\n"
    "    i = bisect.bisect_left(vx, x - 0.051)\n"
    "    return i < len(vx) and vx[i] <= x + 0.051\n"
    "px = [g['l'] + (x - g['x0']) / (g['x1'] - g['x0']) * (g['r'] - g['l']) for x in D['x']]\n"
    "off = [x for x in px if not drawn(x)]\n"
    "assert not off, (len(off), off[:5])\n"
    "assert n <= sum(len(p.get('points').split()) for p in ev.iter('polyline'))\n";

/* The run (ending in an OOM or not), its reports written, then Python's
 * checks on them after PRELUDE. */
static void check_reports(int oom, const char *checks, const char *more) {
    const char *dir = scratch();
    ca_allocator *a;
    ca_tracker *t;
    run(&a, &t, oom);
    write_reports(dir, t, a);
    char *script;
    ck_assert(asprintf(&script, "%s%s%sprint('OK')\n", PRELUDE, checks, more) > 0);
    ck_python_ok(dir, script, dir);
    free(script);
    tracked_done(a, t);
    scratch_cleanup();
}

START_TEST(leak_findings_once_with_advice) { check_reports(0, LEAK_CHECK, HOVER_CHECK); }
END_TEST

static const char *const OOM_CHECK =
    "assert rep['verdict']['code'] == 'oom' and rep['ooms'][0]['iteration'] == 12, rep['ooms']\n"
    "# the device ran out: said so, and nothing projects a later iteration\n"
    "assert text.count('The device ran out of memory at iteration 12.') == 2, text.count('ran out')\n"
    "assert 'runs out at iteration' not in text, re.findall(r'.{60}runs out at iteration.{20}', text)\n"
    "assert 'if only this site leaked' not in text\n"
    "# the failure marked on both charts, with what it asked\n"
    "tip = 'out of memory at iteration 12: 240 MiB requested'\n"
    "per_it = [v for k, v in svgs.items() if k != 'events' and v.get('class') == 'plot']\n"
    "assert len(per_it) == 1\n"
    "for s in (ev, per_it[0]):\n"
    "    al = [e for e in s.iter('line') if e.get('class') == 'alert']\n"
    "    assert len(al) == 1 and al[0].find('title').text == tip, [al[0].find('title').text]\n"
    "    assert float(al[0].get('x1')) <= float(s.get('width')) - 16, al[0].attrib\n"
    "oom = [i for i in range(len(D['x'])) if D['kinds'][D['k'][i]] == 'out of memory']\n"
    "assert len(oom) == 1 and D['s'][oom[0]] == 240 << 20, oom\n"
    "assert D['frames'][D['stacks'][D['st'][oom[0]]][0]].startswith('run at '), 'the failing call'\n";

START_TEST(after_oom_no_projection_and_markers) { check_reports(1, OOM_CHECK, ""); }
END_TEST

/* A long run: 400 000 events. The hover data holds the drawn points only
 * (at most 6 per pixel column of the plot) and the page stays small. */
START_TEST(long_run_stays_small) {
    const char *dir = scratch();
    ca_allocator *a;
    ck_assert_int_eq(ca_allocator_new(ca_backend_count_new(0, 2 * MIB), NULL, &a), CA_OK);
    ca_tracker *t = ca_tracker_new(NULL);
    ca_tracker_attach(t, a);
    void *p[16] = {0};
    unsigned seed = 1;
    for (int i = 0; i < 200000; i++) {
        if (p[i % 16]) ca_free(a, p[i % 16], 0);
        seed = seed * 1103515245u + 12345u;
        ca_malloc(a, 512 + (seed >> 8) % (4 * MIB), 0, &p[i % 16], NULL);
        if (i % 1000 == 999) ca_tracker_step(t, CA_ITER_EXPLICIT);
    }
    write_reports(dir, t, a);
    char *html = path_in(dir, "run.html");
    struct stat st;
    ck_assert_int_eq(stat(html, &st), 0);
    ck_assert_msg(st.st_size < 700 * 1024, "run.html is %lld bytes", (long long)st.st_size);
    char *script;
    ck_assert(asprintf(&script,
                       "%s"
                       "cols = float(ev.get('data-r')) - float(ev.get('data-l'))\n"
                       "assert 1000 < len(D['x']) <= 6 * cols, (len(D['x']), cols)\n"
                       "assert D['x'][-1] >= 399000, D['x'][-1]\n"
                       "print('OK', len(D['x']), len(page))\n",
                       PRELUDE) > 0);
    ck_python_ok(dir, script, dir);
    free(script);
    free(html);
    for (int i = 0; i < 16; i++) ca_free(a, p[i], 0);
    tracked_done(a, t);
    scratch_cleanup();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("report_html");
    TCase *tc = tcase_create("report_html");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, leak_findings_once_with_advice);
    tcase_add_test(tc, after_oom_no_projection_and_markers);
    tcase_add_test(tc, long_run_stays_small);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)
