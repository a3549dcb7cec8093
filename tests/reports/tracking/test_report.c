/* The report files from a real run (allocator on the count backend, real
 * stacks): the text starts with the verdict and names the leaking function;
 * the JSON and the pickle load in Python with the documented schema (the
 * pickle also walked backwards as the viewer does); the CSV parses with
 * tools/trace.h and replays with cudalloc-replay; the HTML is self-contained;
 * the exit summary stays short; an unwritable prefix warns once. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>
#include <fcntl.h>

#include "allocator/allocator.h"
#include "reports/diagnose/oom.h"
#include "reports/write/report.h"
#include "tests/reports/tracking/sim.h"
#include "tools/trace.h"

#ifndef CA_BIN_DIR
#define CA_BIN_DIR "build/bin"
#endif

static __attribute__((noinline)) void *leaky_alloc(ca_allocator *a) {
    void *p = NULL;
    ca_malloc(a, 2 * MIB, 0, &p, NULL); /* kept: the leak */
    __asm__ volatile("" ::: "memory");
    return p;
}

static __attribute__((noinline)) void work_alloc(ca_allocator *a, int it) {
    void *act[6];
    for (int k = 0; k < 6; k++) ca_malloc(a, (size_t)(1 + (it + k) % 3) * MIB, 0, &act[k], NULL);
    for (int k = 6; k-- > 0;) ca_free(a, act[k], 0);
    __asm__ volatile("nop" ::: "memory");
}

/* A run: weights, 10 iterations leaking 2 MiB each, then an allocation too
 * large for the 96 MiB device. */
static void run(ca_allocator **pa, ca_tracker **pt, int marks) {
    ca_allocator *a;
    ck_assert_int_eq(ca_allocator_new(ca_backend_count_new(96 * MIB, 2 * MIB), NULL, &a), CA_OK);
    ca_tracker *t = ca_tracker_new(NULL);
    ca_tracker_attach(t, a);
    void *w[4];
    for (int i = 0; i < 4; i++) ca_malloc(a, 3 * MIB, 0, &w[i], NULL);
    for (volatile int it = 0; it < 10; it++) {
        work_alloc(a, it);
        leaky_alloc(a);
        if (marks) ca_tracker_step(t, CA_ITER_EXPLICIT);
    }
    void *big;
    ca_oom_info info;
    ck_assert_int_eq(ca_malloc(a, 80 * MIB, 0, &big, &info), CA_ERR_OOM);
    ca_oom_diagnose(t, &info);
    *pa = a;
    *pt = t;
}

static const char *JSON_CHECK =
    "import json, sys\n"
    "r = json.load(open(sys.argv[1]))\n"
    "it = r['iterations']\n"
    "assert it['count'] == 10 and it['source'] == 'explicit', it\n"
    "assert r['verdict']['code'] == 'oom', r['verdict']\n"
    "leaks = r['leaks']\n"
    "assert len(leaks) == 1, leaks\n"
    "l = leaks[0]\n"
    "for k in ('bytes_per_iteration','count_per_iteration','first_iteration','live_bytes',\n"
    "          'projected_oom_iteration','frames'):\n"
    "    assert k in l, k\n"
    "assert l['bytes_per_iteration'] == 2 * 1024 * 1024, l\n"
    "assert l['count_per_iteration'] == 1.0 and l['first_iteration'] == 0 and l['live_bytes'] == 20 << 20\n"
    "# written just after the OOM: what happened, not a projection\n"
    "assert l['projected_oom_iteration'] is None and isinstance(r['ran_out_iteration'], int), l\n"
    "f0 = l['frames'][0]\n"
    "assert set(('function','file','line')) <= set(f0), f0\n"
    "assert f0['function'] == 'leaky_alloc' and f0['file'].endswith('test_report.c') and f0['line'] > 0, f0\n"
    "assert l['finding'] == 0 and len(r['findings']) == 1, r['findings']\n"
    "fd = r['findings'][0]\n"
    "assert fd['severity'] == 'leak' and fd['kind'] == 'site' and fd['root'] is None, fd\n"
    "assert 'leaky_alloc' in fd['title'] and 'called from run' in fd['title'], fd['title']\n"
    "assert fd['bytes_per_iteration'] == l['bytes_per_iteration'] and fd['sites'][0]['frames'] == l['frames']\n"
    "assert 0 < fd['working_set_share'] < 1 and r['working_set_bytes'] > 0 and r['warnings'] == []\n"
    "fr = r['fragmentation']\n"
    "for k in ('reserved_bytes','allocated_bytes','largest_free_block','fragmentation'):\n"
    "    assert k in fr, k\n"
    "assert 0 <= fr['fragmentation'] <= 1 and fr['allocated_bytes'] == (12 + 20) << 20, fr\n"
    "assert fr['external'] == {'allocation_bytes': 3 << 20, 'pool_bytes': 64 << 20}, fr['external']\n"
    "o = r['ooms']\n"
    "assert len(o) == 1 and o[0]['requested_bytes'] == 80 << 20 and o[0]['verdict'] in ('not_there','leak'), o\n"
    "assert o[0]['frames'][0]['function'] == 'run', o[0]['frames']\n"
    "st = r['stats']\n"
    "for k in ('allocated_bytes.all.current','reserved_bytes.all.peak','allocation.all.current',\n"
    "          'requested_bytes.large_pool.current','num_ooms','num_alloc_retries','segment.all.current'):\n"
    "    assert k in st, k\n"
    "assert st['allocated_bytes.all.current'] == fr['allocated_bytes'] and st['num_ooms'] == 1\n"
    "print('OK')\n";

static const char *PICKLE_CHECK =
    "import pickle, pickletools, sys\n"
    "data = open(sys.argv[1], 'rb').read()\n"
    "ops = {op.name for op, arg, pos in pickletools.genops(data)}\n"
    "allowed = {'PROTO','EMPTY_DICT','EMPTY_LIST','MARK','SETITEMS','SETITEM','APPENDS','APPEND',\n"
    "           'SHORT_BINUNICODE','BINUNICODE','MEMOIZE','BINGET','LONG_BINGET','BININT1','BININT2',\n"
    "           'BININT','LONG1','BINFLOAT','NEWTRUE','NEWFALSE','NONE','TUPLE2','STOP'}\n"
    "assert ops <= allowed, ops - allowed\n"
    "s = pickle.loads(data)\n"
    "assert set(s) >= {'segments','device_traces','allocator_settings'}, set(s)\n"
    "segs = s['segments']\n"
    "assert segs, 'no segments'\n"
    "live = set()\n"
    "for g in segs:\n"
    "    for k, t in (('device',int),('address',int),('total_size',int),('stream',int),('segment_type',str),\n"
    "                 ('allocated_size',int),('active_size',int),('requested_size',int),('is_expandable',bool),\n"
    "                 ('frames',list),('blocks',list)):\n"
    "        assert isinstance(g[k], t), (k, g[k])\n"
    "    a = g['address']\n"
    "    for b in g['blocks']:\n"
    "        assert b['address'] == a, 'blocks must tile'\n"
    "        assert b['state'] in ('active_allocated','active_pending_free','inactive')\n"
    "        assert b['requested_size'] <= b['size']\n"
    "        if b['state'] == 'active_allocated':\n"
    "            live.add(b['address'])\n"
    "            assert b['frames'], 'live block without frames'\n"
    "        for f in b['frames']:\n"
    "            assert set(f) == {'filename','line','name'} and isinstance(f['line'], int), f\n"
    "        a += b['size']\n"
    "    assert a == g['address'] + g['total_size'], 'blocks must sum to the segment'\n"
    "    assert g['allocated_size'] == sum(b['size'] for b in g['blocks'] if b['state'] == 'active_allocated')\n"
    "names = {f['name'] for g in segs for b in g['blocks'] for f in b['frames']}\n"
    "assert 'leaky_alloc' in names, names\n"
    "tr = s['device_traces']\n"
    "assert isinstance(tr, list) and len(tr) == 1 and tr[0], 'one device with events'\n"
    "acts = set()\n"
    "for e in tr[0]:\n"
    "    acts.add(e['action'])\n"
    "    assert isinstance(e['size'], int) and isinstance(e['time_us'], int) and isinstance(e['frames'], list)\n"
    "    assert ('device_free' in e) if e['action'] == 'oom' else ('addr' in e), e\n"
    "assert acts <= {'alloc','free_requested','free_completed','segment_map','segment_unmap','oom'}, acts\n"
    "assert {'alloc','free_requested','free_completed','segment_map','oom'} <= acts, acts\n"
    "# Walk back from the final state as the viewer does.\n"
    "mapped = [(g['address'], g['address'] + g['total_size']) for g in segs]\n"
    "for e in reversed(tr[0]):\n"
    "    a = e.get('addr')\n"
    "    if e['action'] == 'alloc':\n"
    "        assert a in live, 'undoing an alloc of a block not live'\n"
    "        live.remove(a)\n"
    "    elif e['action'] == 'free_completed':\n"
    "        assert a not in live\n"
    "        live.add(a)\n"
    "        assert any(lo <= a < hi for lo, hi in mapped), 'block outside mapped memory'\n"
    "    elif e['action'] == 'segment_map':\n"
    "        lo, hi = a, a + e['size']\n"
    "        inside = [m for m in mapped if m[0] <= lo and hi <= m[1]]\n"
    "        assert inside, 'undoing a map that no segment holds'\n"
    "        m = inside[0]; mapped.remove(m)\n"
    "        mapped += [r for r in ((m[0], lo), (hi, m[1])) if r[0] < r[1]]\n"
    "    elif e['action'] == 'segment_unmap':\n"
    "        mapped.append((a, a + e['size']))\n"
    "st = s['allocator_settings']\n"
    "assert st['expandable_segments'] is True and 'PYTORCH_CUDA_ALLOC_CONF' in st\n"
    "print('OK')\n";

static char *prefix_in(const char *dir) { return path_in(dir, "run"); }

static char *file_of(const char *dir, const char *ext) {
    char *p;
    ck_assert(asprintf(&p, "%s/run%s", dir, ext) > 0);
    return p;
}

START_TEST(all_files) {
    const char *dir = scratch();
    ca_allocator *a;
    ca_tracker *t;
    run(&a, &t, 1);
    char *prefix = prefix_in(dir);
    ca_report_options o;
    ca_report_options_default(&o);
    o.expandable = 1;
    o.external_known = 1;
    o.external_alloc_bytes = 3 * MIB;
    o.external_pool_bytes = 64 * MIB;
    ck_assert_int_eq(ca_report_write(t, a, prefix, &o), 0);
    static const char *ext[] = {".txt", ".json", ".pickle", ".html", ".csv"};
    for (int i = 0; i < 5; i++) {
        char *p = file_of(dir, ext[i]);
        struct stat st;
        ck_assert_msg(stat(p, &st) == 0, "%s missing", p);
        ck_assert_int_eq(st.st_mode & 0777, 0600);
        free(p);
    }
    char *txt = file_of(dir, ".txt");
    char *body = read_file(txt, NULL);
    ck_assert_msg(!strncmp(body, "VERDICT: OUT OF MEMORY", 22), "%.200s", body);
    ck_assert_ptr_nonnull(strstr(body, "leaky_alloc at "));
    ck_assert_ptr_nonnull(strstr(body, "test_report.c:"));
    ck_assert_ptr_nonnull(strstr(body, "== Leaks"));
    ck_assert_ptr_nonnull(strstr(body, "== Fragmentation"));
    ck_assert_ptr_nonnull(strstr(body, "== Out of memory"));
    ck_assert_ptr_null(strstr(body, "ca_malloc")); /* our own frames are left out */
    ck_assert_ptr_nonnull(strstr(body, "outside cudalloc (CUPTI): 3.00 MiB in allocations, 64.0 MiB held by memory pools"));
    free(body);
    char *json = file_of(dir, ".json");
    ck_python_ok(dir, JSON_CHECK, json);
    char *pkl = file_of(dir, ".pickle");
    ck_python_ok(dir, PICKLE_CHECK, pkl);
    char *html = file_of(dir, ".html");
    body = read_file(html, NULL);
    ck_assert_ptr_nonnull(strstr(body, "<svg"));
    ck_assert_ptr_nonnull(strstr(body, "leaky_alloc"));
    ck_assert_ptr_null(strstr(body, "http://"));
    ck_assert_ptr_null(strstr(body, "https://"));
    ck_assert_ptr_null(strstr(body, "<script src"));
    ck_assert_ptr_null(strstr(body, "src="));
    free(body);
    free(txt);
    free(json);
    free(pkl);
    free(html);
    free(prefix);
    tracked_done(a, t);
    scratch_cleanup();
}
END_TEST

START_TEST(csv_parses_and_replays) {
    const char *dir = scratch();
    ca_allocator *a;
    ca_tracker *t;
    run(&a, &t, 1);
    char *prefix = prefix_in(dir);
    ca_report_options o;
    ca_report_options_default(&o);
    o.formats = CA_REPORT_CSV;
    ck_assert_int_eq(ca_report_write(t, a, prefix, &o), 0);
    char *csv = file_of(dir, ".csv"), err[512];
    ca_trace tr;
    ck_assert_msg(ca_trace_parse_file(csv, &tr, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(tr.count[CA_TRACE_ITERATION], 10);
    ck_assert_uint_eq(tr.count[CA_TRACE_ALLOC], 4 + 10 * 7);
    ck_assert_uint_eq(tr.count[CA_TRACE_FREE], 10 * 6);
    ck_assert_uint_eq(tr.count[CA_TRACE_ALLOC_FAIL], 1);
    ck_assert_uint_eq(tr.live_at_end, 14);
    /* Iteration rows number the iteration that begins: 1, 2, ... */
    uint64_t expect = 1;
    for (size_t i = 0; i < tr.n_ops; i++)
        if (tr.ops[i].kind == CA_TRACE_ITERATION) ck_assert_uint_eq(tr.ops[i].size, expect++);
    ca_trace_free(&tr);
    char *cmd;
    ck_assert(asprintf(&cmd, "%s/cudalloc-replay --runs 1 '%s' >/dev/null", CA_BIN_DIR, csv) > 0);
    ck_assert_int_eq(system(cmd), 0);
    free(cmd);
    /* Plain RMM: no iteration rows. */
    o.csv_iterations = 0;
    ck_assert_int_eq(ca_report_write(t, a, prefix, &o), 0);
    ck_assert_int_eq(ca_trace_parse_file(csv, &tr, err, sizeof err), 0);
    ck_assert_uint_eq(tr.count[CA_TRACE_ITERATION], 0);
    ca_trace_free(&tr);
    /* Offline, the same diagnosis from the trace. */
    ck_assert(asprintf(&cmd, "%s/cudalloc-report '%s' > '%s/offline.txt'", CA_BIN_DIR, csv, dir) > 0);
    o.csv_iterations = 1;
    ca_report_write(t, a, prefix, &o);
    ck_assert_int_eq(system(cmd), 0);
    free(cmd);
    char *off = path_in(dir, "offline.txt"), *body = read_file(off, NULL);
    ck_assert_msg(strstr(body, "leak 1: allocations of 2.00 MiB (2097152 B) are kept\n"
                               "  +2.00 MiB and 1.00 allocations per iteration from 1 call site"),
                  "%s", body);
    free(body);
    free(off);
    free(csv);
    free(prefix);
    tracked_done(a, t);
    scratch_cleanup();
}
END_TEST

START_TEST(ring_window_still_replays) {
    /* A ring smaller than the run: the CSV starts mid-run and leaves out the
     * frees of what was allocated before; it still parses. */
    const char *dir = scratch();
    ca_allocator *a;
    ck_assert_int_eq(ca_allocator_new(ca_backend_count_new(0, 2 * MIB), NULL, &a), CA_OK);
    ca_tracker_options to;
    ca_tracker_options_default(&to);
    to.trace_events = 50;
    ca_tracker *t = ca_tracker_new(&to);
    ca_tracker_attach(t, a);
    void *p[20] = {0};
    for (int i = 0; i < 400; i++) {
        if (p[i % 20]) ca_free(a, p[i % 20], 0);
        ca_malloc(a, 512 * (size_t)(1 + i % 5), 0, &p[i % 20], NULL);
        if (i % 40 == 39) ca_tracker_step(t, CA_ITER_EXPLICIT);
    }
    char *prefix = prefix_in(dir), *csv = file_of(dir, ".csv"), *pkl = file_of(dir, ".pickle"), err[512];
    ck_assert_int_eq(ca_report_write(t, a, prefix, NULL), 0);
    ca_trace tr;
    ck_assert_msg(ca_trace_parse_file(csv, &tr, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_le(tr.n_ops, 52);
    ca_trace_free(&tr);
    /* The snapshot's trace is a suffix too: the backwards walk must hold. */
    static const char *WALK =
        "import pickle, sys\n"
        "s = pickle.load(open(sys.argv[1], 'rb'))\n"
        "live = {b['address'] for g in s['segments'] for b in g['blocks'] if b['state'] == 'active_allocated'}\n"
        "for e in reversed(s['device_traces'][0]):\n"
        "    if e['action'] == 'alloc':\n"
        "        assert e['addr'] in live; live.remove(e['addr'])\n"
        "    elif e['action'] == 'free_completed':\n"
        "        assert e['addr'] not in live; live.add(e['addr'])\n"
        "assert len(s['device_traces'][0]) >= 50\n"
        "print('OK')\n";
    ck_python_ok(dir, WALK, pkl);
    free(prefix);
    free(csv);
    free(pkl);
    for (int i = 0; i < 20; i++) ca_free(a, p[i], 0);
    tracked_done(a, t);
    scratch_cleanup();
}
END_TEST

START_TEST(detected_source_in_json) {
    const char *dir = scratch();
    ca_allocator *a;
    ca_tracker *t;
    run(&a, &t, 0);
    char *prefix = prefix_in(dir);
    ca_report_options o;
    ca_report_options_default(&o);
    o.formats = CA_REPORT_JSON;
    ck_assert_int_eq(ca_report_write(t, a, prefix, &o), 0);
    char *json = file_of(dir, ".json");
    static const char *CHECK =
        "import json, sys\n"
        "r = json.load(open(sys.argv[1]))\n"
        "assert r['iterations']['source'] == 'detected', r['iterations']\n"
        "assert 8 <= r['iterations']['count'] <= 10, r['iterations']['count']\n"
        "assert r['iterations']['detected_period_allocations'] == 7\n"
        "assert len(r['leaks']) == 1 and r['leaks'][0]['frames'][0]['function'] == 'leaky_alloc'\n"
        "print('OK')\n";
    ck_python_ok(dir, CHECK, json);
    free(json);
    free(prefix);
    tracked_done(a, t);
    scratch_cleanup();
}
END_TEST

START_TEST(summary_is_short) {
    ca_allocator *a;
    ca_tracker *t;
    run(&a, &t, 1);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ca_report_summary(t, a, NULL, f);
    fclose(f);
    int lines = 0;
    for (char *l = buf; *l; l = strchr(l, '\n') + 1) {
        ck_assert_msg(!strncmp(l, "cudalloc: ", 10), "line '%.60s'", l);
        lines++;
        if (!strchr(l, '\n')) break;
    }
    ck_assert_int_le(lines, 15);
    ck_assert_int_ge(lines, 3);
    ck_assert_ptr_nonnull(strstr(buf, "leaky_alloc"));
    free(buf);
    tracked_done(a, t);
}
END_TEST

/* The summary of a program that made these allocations (MiB; negative:
 * made and freed), with no loop. */
static char *summary_of(const int *mib, size_t n) {
    ca_allocator *a;
    ck_assert_int_eq(ca_allocator_new(ca_backend_count_new(1024 * MIB, 2 * MIB), NULL, &a), CA_OK);
    ca_tracker *t = ca_tracker_new(NULL);
    ca_tracker_attach(t, a);
    for (size_t i = 0; i < n; i++) {
        void *p;
        ck_assert_int_eq(ca_malloc(a, (size_t)abs(mib[i]) * MIB, 0, &p, NULL), CA_OK);
        if (mib[i] < 0) ca_free(a, p, 0);
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ca_report_summary(t, a, NULL, f);
    fclose(f);
    tracked_done(a, t);
    return buf;
}

START_TEST(caching_allocator_pattern) {
    /* PyTorch's cache on top: 2 MiB and 20 MiB segments, a large request
     * rounded to 2 MiB, none freed. Warned, after the one-line summary. */
    const int torch[] = {2, 20, 20, 64};
    char *s = summary_of(torch, 4);
    ck_assert_msg(strstr(s, "cudalloc: NO ITERATIONS: a short program: 4 allocations (0 freed, 4 live), peak "
                            "allocated 106 MiB") != NULL, "%s", s);
    ck_assert_msg(strstr(s, "\ncudalloc: warning: these allocations look like a caching allocator's segments (4 "
                            "allocations, 4 of the 4 live ones") != NULL, "%s", s);
    free(s);
    /* A program's own large buffers (no 2 or 20 MiB segment), odd sizes, or
     * a cache that frees: no warning. */
    const int buffers[] = {64, 64, 128}, odd[] = {2, 20, 3, 5}, freeing[] = {2, -20, 20, -20, 20};
    const int *cases[] = {buffers, odd, freeing};
    size_t ns[] = {3, 4, 5};
    for (int k = 0; k < 3; k++) {
        s = summary_of(cases[k], ns[k]);
        ck_assert_msg(strstr(s, "caching allocator") == NULL, "case %d: %s", k, s);
        free(s);
    }
}
END_TEST

START_TEST(unwritable_warns_once) {
    const char *dir = scratch();
    ca_allocator *a;
    ca_tracker *t;
    run(&a, &t, 1);
    char *bad = path_in(dir, "no/such/dir/run"), *err = path_in(dir, "stderr.txt");
    fflush(stderr);
    int saved = dup(2), fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    ca_report_options o;
    ca_report_options_default(&o);
    o.symbolize = 0;
    ck_assert_int_eq(ca_report_write(t, a, bad, &o), -1);
    ck_assert_int_eq(ca_report_write(t, a, bad, &o), -1); /* no second warning */
    fflush(stderr);
    dup2(saved, 2);
    close(fd);
    close(saved);
    char *text = read_file(err, NULL);
    int lines = 0;
    for (char *c = text; *c; c++) lines += *c == '\n';
    ck_assert_msg(lines == 1, "stderr: '%s'", text);
    ck_assert_ptr_nonnull(strstr(text, "cudalloc: warning: report"));
    /* A template with a bad % sequence is refused the same way. */
    ck_assert_int_eq(ca_report_write(t, a, "x%q", &o), -1);
    free(text);
    free(bad);
    free(err);
    tracked_done(a, t);
    scratch_cleanup();
}
END_TEST

START_TEST(prefix_template_expands) {
    const char *dir = scratch();
    ca_allocator *a;
    ca_tracker *t;
    run(&a, &t, 1);
    char *tmpl, *want;
    ck_assert(asprintf(&tmpl, "%s/r%%p", dir) > 0);
    ck_assert(asprintf(&want, "%s/r%d.txt", dir, (int)getpid()) > 0);
    ca_report_options o;
    ca_report_options_default(&o);
    o.formats = CA_REPORT_TXT;
    ck_assert_int_eq(ca_report_write(t, a, tmpl, &o), 0);
    struct stat st;
    ck_assert_int_eq(stat(want, &st), 0);
    free(tmpl);
    free(want);
    tracked_done(a, t);
    scratch_cleanup();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("report");
    TCase *tc = tcase_create("report");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, all_files);
    tcase_add_test(tc, csv_parses_and_replays);
    tcase_add_test(tc, ring_window_still_replays);
    tcase_add_test(tc, detected_source_in_json);
    tcase_add_test(tc, summary_is_short);
    tcase_add_test(tc, caching_allocator_pattern);
    tcase_add_test(tc, unwritable_warns_once);
    tcase_add_test(tc, prefix_template_expands);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)
