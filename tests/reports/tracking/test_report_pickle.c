/* The snapshot pickle of a real run (count backend, real stacks) as
 * PyTorch's memory_viz reads it, checked through Python's pickle: every
 * segment in PyTorch's default pool (segment_pool_id (0, 0), so the viewer
 * does not say "pool_id unknown"), the allocator settings agreeing with the
 * configuration in force, and segment_map/segment_unmap events carrying the
 * stack of the call that mapped or unmapped. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>

#include "allocator/allocator.h"
#include "reports/write/report.h"
#include "tests/reports/tracking/sim.h"

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

static NOINLINE void *grow(ca_allocator *a, size_t n) {
    void *p = NULL;
    ca_malloc(a, n, 0, &p, NULL);
    KEEP();
    return p;
}

static NOINLINE void trim(ca_allocator *a) {
    ca_release(a);
    KEEP();
}

/* Maps memory from grow(), frees half of it and unmaps it from trim(). */
static void run(int expandable, ca_allocator **pa, ca_tracker **pt) {
    ca_allocator *a;
    ca_options ao = {.expandable = expandable};
    ck_assert_int_eq(ca_allocator_new(ca_backend_count_new(512 * MIB, 2 * MIB), &ao, &a), CA_OK);
    ca_tracker *t = ca_tracker_new(NULL);
    ca_tracker_attach(t, a);
    void *p[8];
    for (int i = 0; i < 8; i++) p[i] = grow(a, (size_t)(i + 1) * 3 * MIB);
    for (int i = 4; i < 8; i++) ca_free(a, p[i], 0);
    trim(a);
    *pa = a;
    *pt = t;
}

/* argv[1]: the pickle; EXPECT_* set by each test before this. */
static const char *const CHECK =
    "import pickle, sys\n"
    "s = pickle.load(open(sys.argv[1], 'rb'))\n"
    "segs, tr = s['segments'], s['device_traces'][0]\n"
    "assert segs and tr\n"
    "for g in segs:\n"
    "    assert g['segment_pool_id'] == (0, 0) and type(g['segment_pool_id']) is tuple, g.get('segment_pool_id')\n"
    "for e in tr:\n"
    "    if e['action'] != 'oom':\n"
    "        assert e.get('segment_pool_id') == (0, 0), e\n"
    "st = s['allocator_settings']\n"
    "assert st['expandable_segments'] is EXPECT_EXPANDABLE, st\n"
    "# PyTorch's keys and types, as its _snapshot() writes them (issue 34): the\n"
    "# user's own setting, 16 power-of-two divisions; cudalloc's in a dict of its own\n"
    "torch_keys = {'PYTORCH_CUDA_ALLOC_CONF': str, 'max_split_size': int, 'garbage_collection_threshold': float,\n"
    "              'expandable_segments': bool, 'pinned_num_register_threads': int,\n"
    "              'release_lock_on_cudamalloc': bool, 'pinned_use_cuda_host_register': bool,\n"
    "              'roundup_power2_divisions': dict}\n"
    "assert set(st) - {'cudalloc'} == set(torch_keys), set(st)\n"
    "assert all(type(st[k]) is t for k, t in torch_keys.items()), st\n"
    "assert st['roundup_power2_divisions'] == {str(1 << i): 0 for i in range(16)}, st['roundup_power2_divisions']\n"
    "assert st['PYTORCH_CUDA_ALLOC_CONF'] == EXPECT_USER_CONF, st['PYTORCH_CUDA_ALLOC_CONF']\n"
    "conf = st.get('cudalloc', {})\n"
    "for k, v in EXPECT_CONF.items():\n"
    "    assert conf.get(k) == v and type(conf.get(k)) is type(v), (k, conf)\n"
    "# Expandable segments are mapped; classic ones allocated whole, as PyTorch's.\n"
    "made, gone = ('segment_map', 'segment_unmap') if EXPECT_EXPANDABLE else ('segment_alloc', 'segment_free')\n"
    "maps = [e for e in tr if e['action'] == made]\n"
    "unmaps = [e for e in tr if e['action'] == gone]\n"
    "assert not [e for e in tr if e['action'] in ('segment_map', 'segment_unmap', 'segment_alloc', 'segment_free')\n"
    "            and e not in maps and e not in unmaps], [e['action'] for e in tr]\n"
    "assert maps and unmaps, [e['action'] for e in tr]\n"
    "# Linked statically, the allocator's static helpers (not ca_*) may come\n"
    "# first; in the preload its frames are skipped at capture (tests/preload).\n"
    "def caller(fr):\n"
    "    k = 0\n"
    "    while k < len(fr) and '/allocator/' in fr[k]['filename']: k += 1\n"
    "    assert k < len(fr), fr\n"
    "    return fr[k]\n"
    "for e in maps:\n"
    "    f = caller(e['frames'])\n"
    "    assert f['name'] == 'grow' and f['filename'].endswith('test_report_pickle.c'), e['frames'][:4]\n"
    "for e in unmaps:\n"
    "    assert caller(e['frames'])['name'] == 'trim', e['frames'][:4]\n"
    "print('OK')\n";

static void check(int expandable, const char *alloc_conf, const char *user_conf, const char *expect_py) {
    const char *dir = scratch();
    ca_allocator *a;
    ca_tracker *t;
    run(expandable != 0, &a, &t);
    char *prefix = path_in(dir, "run"), *pkl = path_in(dir, "run.pickle"), *script;
    ca_report_options o;
    ca_report_options_default(&o);
    o.formats = CA_REPORT_PICKLE;
    o.expandable = expandable;
    o.alloc_conf = alloc_conf;
    o.user_conf = user_conf;
    ck_assert_int_eq(ca_report_write(t, a, prefix, &o), 0);
    ck_assert(asprintf(&script, "%s\n%s", expect_py, CHECK) > 0);
    ck_python_ok(dir, script, pkl);
    free(script);
    free(prefix);
    free(pkl);
    tracked_done(a, t);
    scratch_cleanup();
}

/* The preload's case: the settings in force, and what the user wrote. */
START_TEST(settings_from_the_conf_in_force) {
    check(0, "expandable_segments:False,sync_free:False,max_reserved:100663296", "expandable_segments:0,max_reserved:96MiB",
          "EXPECT_EXPANDABLE = False\n"
          "EXPECT_CONF = {'max_reserved': 100663296, 'sync_free': False, 'expandable_segments': False}\n"
          "EXPECT_USER_CONF = 'expandable_segments:0,max_reserved:96MiB'\n");
}
END_TEST

/* No conf string given (offline, tests): PyTorch's keys alone, the user's
 * setting empty, expandable being cudalloc's default. */
START_TEST(settings_without_a_conf_string) {
    check(1, NULL, NULL,
          "EXPECT_EXPANDABLE = True\n"
          "EXPECT_CONF = {}\n"
          "EXPECT_USER_CONF = ''\n");
    check(-1, NULL, NULL,
          "EXPECT_EXPANDABLE = True\n"
          "EXPECT_CONF = {}\n"
          "EXPECT_USER_CONF = ''\n");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("report_pickle");
    TCase *tc = tcase_create("report_pickle");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, settings_from_the_conf_in_force);
    tcase_add_test(tc, settings_without_a_conf_string);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)
