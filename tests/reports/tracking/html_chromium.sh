#!/usr/bin/env bash
# The HTML report in headless Chromium at 1400 px, as someone with a leak
# opens it:
#   - an offline report renders with no console errors and the plot drawn (a
#     control page with a script error proves the console check can fail);
#   - the demo trainer's planted leak (one retained graph, 20 call sites): the
#     page stays under MAX_HEIGHT px, and hovering the event chart shows the
#     nearest event's time, allocated, reserved and call stack;
#   - the same leak run until the device runs out: the page says when it ran
#     out, the red out-of-memory marker is drawn;
#   - with MEMORY_VIZ_DIR (a directory holding PyTorch's torch/utils/viz
#     MemoryViz.js and, in versions that have it, process_alloc_data.js; not
#     part of this repository), the demo's snapshot read by the viewer's own
#     code: every allocation in pool (0, 0), the settings as written, stacks
#     on segment maps;
#   - with MEMORY_VIZ_D3 too (d3 v5's dist/d3.min.js, npm d3@5: the viewer
#     imports d3 from a CDN), the viewer run whole on the demo's snapshot and
#     on the same snapshot written again by cudalloc-report --pickle: every
#     view it offers opens with no script error, draws, and hovering shows
#     stacks, as many from the re-written file as from the preload's.
# Skips, saying so, what it lacks (chromium; the trainer; the viewer's code).
#   html_chromium.sh BIN_DIR [KEEP_DIR]   (KEEP_DIR: where to leave screenshots)
set -u
bin=${1:?usage: html_chromium.sh BIN_DIR [KEEP_DIR]}
keep=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
MAX_HEIGHT=3000 # px at 1400 px wide; the page with every site's advice repeated was 4800
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    echo "SKIP: html_chromium: chromium is not installed (Debian: apt-get install chromium)"
    exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0 checks=0
no() { echo "FAIL: html_chromium: $*"; fail=1; }
ok() { checks=$((checks + 1)); }
flags=(--headless=new --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$tmp/profile"
       --enable-logging=stderr --v=0)

# Renders $1 to $2.png at 1400 x ${3:-1400}; its console output in $2.log.
render() {
    timeout 120 "$browser" "${flags[@]}" --window-size=1400,"${3:-1400}" --screenshot="$2.png" "file://$1" \
        >"$2.log" 2>&1
}
# The DOM of $1 after its scripts ran, to $2.
dump() {
    timeout 120 "$browser" "${flags[@]}" --window-size=1400,1000 --dump-dom "file://$1" >"$2" 2>"$2.log"
}
console_clean() { # log, what
    if grep -q 'CONSOLE' "$1"; then no "$2: console messages: $(grep CONSOLE "$1" | head -3)"; else ok; fi
    if grep -qi 'net::ERR' "$1"; then no "$2: the page tried to load something: $(grep -i net::ERR "$1" | head -2)"; fi
}

# Pixel counts of the given colours in a PNG, with Python's zlib (no imaging
# library): png_colours FILE.png RRGGBB... prints "RRGGBB=count ... white=count of total".
png_colours() {
    python3 - "$@" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n'
want = {tuple(bytes.fromhex(c)): c for c in sys.argv[2:]}
pos, idat, w = 8, b'', 0
while pos < len(data):
    n, kind = struct.unpack('>I4s', data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b'IHDR':
        w, h, depth, ctype = struct.unpack('>IIBB', body[:10])
        assert depth == 8 and ctype in (2, 6), (depth, ctype)
        bpp = 3 if ctype == 2 else 4
    elif kind == b'IDAT':
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
stride = w * bpp
prev = bytearray(stride)
counts = {c: 0 for c in want.values()}
white = 0
for y in range(h):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for x in range(0, stride, bpp):
        px = tuple(line[x:x + 3])
        if px in want: counts[want[px]] += 1
        elif px == (255, 255, 255): white += 1
    prev = line
print(' '.join('%s=%d' % kv for kv in counts.items()), 'white=%d of %d' % (white, w * h))
PY
}

printf '<!DOCTYPE html><html><body><script>undefined_function()</script></body></html>' > "$tmp/control.html"
render "$tmp/control.html" "$tmp/control"
grep -q 'CONSOLE.*undefined_function' "$tmp/control.log" && ok || no "the console check does not see a script error (control page)"

# An offline report (sites by size): renders, its script runs clean, the plot is drawn.
bash "$here/gen_trace.sh" 12 1 1 1 > "$tmp/leak.csv"
"$bin/cudalloc-report" "$tmp/leak.csv" --capacity 512MiB --html "$tmp/report.html" || no "cudalloc-report --html failed"
render "$tmp/report.html" "$tmp/report"
[ -s "$tmp/report.png" ] || no "no screenshot: $(tail -3 "$tmp/report.log")"
console_clean "$tmp/report.log" "offline report"
# allocated #1f77b4 and reserved #ff7f0e
px=$(png_colours "$tmp/report.png" 1f77b4 ff7f0e)
echo "html_chromium: offline report: $px"
python3 -c "import sys; c = dict(kv.split('=') for kv in sys.argv[1].split()[:2]); sys.exit(min(map(int, c.values())) < 200)" "$px" \
    && ok || no "the screenshot does not show the plot ($px)"

# Appends a script that measures the page and hovers the event chart at
# fraction $2 of its width; the results land on <body> as data-* attributes.
probe() { # page, fraction
    cp "$1" "$1.probe.html"
    cat >>"$1.probe.html" <<EOF
<script>
(function () {
  var b = document.body, svg = document.getElementById('events');
  b.setAttribute('data-page-height', document.documentElement.scrollHeight);
  if (!svg) return;
  var r = svg.getBoundingClientRect(), L = +svg.getAttribute('data-l'), R = +svg.getAttribute('data-r'),
      k = r.width / +svg.getAttribute('width');
  svg.dispatchEvent(new MouseEvent('mousemove', {bubbles: true,
      clientX: r.left + (L + (R - L) * $2) * k, clientY: r.top + r.height / 2}));
  var tip = document.getElementById('events-tip');
  b.setAttribute('data-hover', tip && !tip.hidden ? tip.textContent : 'nothing shown');
})();
</script>
EOF
    dump "$1.probe.html" "$1.dom"
}
attr() { # dom file, attribute: its value, entities decoded
    python3 - "$1" "$2" <<'PY'
import html, re, sys
m = re.search(r'<body[^>]*\s%s="([^"]*)"' % re.escape(sys.argv[2]), open(sys.argv[1]).read())
print(html.unescape(m.group(1)) if m else '')
PY
}

# The demo's planted leak, under the launcher on the simulated device.
trainer=$bin/demo_trainer
model=(--layers 4 --channels 128 --heads 4 --seq 64 --batch 8 --eval-every 1 --print-every 100 --leak eval-grad)
if [ ! -x "$trainer" ] || [ ! -x "$bin/cudalloc" ]; then
    echo "SKIP: html_chromium: the demo's pages: no $trainer or $bin/cudalloc (make all)"
else
    CUDALLOC_SIM_MEMORY=1GiB "$bin/cudalloc" run --report "$tmp/leak" -- "$trainer" "${model[@]}" --steps 12 \
        >"$tmp/leak.log" 2>&1 || no "demo leak run failed: $(tail -3 "$tmp/leak.log")"
    grep -q 'cudalloc: LEAK: a forward pass run under evaluate (.*train.c:99) is kept alive (20 call sites)' "$tmp/leak.log" && ok || no "the demo leak: $(grep 'cudalloc: ' "$tmp/leak.log" | head -2)"
    probe "$tmp/leak.html" 0.5
    console_clean "$tmp/leak.html.dom.log" "demo leak page"
    height=$(attr "$tmp/leak.html.dom" data-page-height)
    echo "html_chromium: demo leak page: $height px tall at 1400 px (bound $MAX_HEIGHT)"
    [ -n "$height" ] && [ "$height" -le $MAX_HEIGHT ] && ok || no "the demo leak page is ${height:-?} px tall (bound $MAX_HEIGHT)"
    hover=$(attr "$tmp/leak.html.dom" data-hover)
    if grep -qE '^event [0-9]+ at [0-9.]+ s: (alloc|free|map|unmap) ' <<<"$hover" &&
        grep -qE '^allocated [0-9.]+ [KMG]?i?B, reserved [0-9.]+ [KMG]?i?B$' <<<"$hover" &&
        grep -qE '^#0 [a-z_]+ at .*demo_trainer/[a-z_]+\.c:[0-9]+$' <<<"$hover"; then ok
    else no "hovering the event chart shows: $(head -4 <<<"$hover")"; fi
    render "$tmp/leak.html" "$tmp/leak" 2400
    [ -n "$keep" ] && cp "$tmp/leak.png" "$keep/demo_leak.png"

    # Until the device runs out (about 18 MiB a step on 160 MiB).
    CUDALLOC_SIM_MEMORY=160MiB "$bin/cudalloc" run --report "$tmp/oom" -- "$trainer" "${model[@]}" --steps 30 \
        >"$tmp/oom.log" 2>&1
    grep -q 'cudalloc: OUT OF MEMORY' "$tmp/oom.log" && ok || no "the demo OOM run did not run out: $(tail -2 "$tmp/oom.log")"
    it=$(sed -n 's/^cudalloc: OUT OF MEMORY.*the last at iteration \([0-9]*\) .*/\1/p' "$tmp/oom.log")
    probe "$tmp/oom.html" 0.99
    console_clean "$tmp/oom.html.dom.log" "demo OOM page"
    grep -q "The device ran out of memory at iteration ${it:-?}\." "$tmp/oom.html" && ok ||
        no "the OOM page does not say the device ran out at iteration ${it:-?}"
    if grep -q 'runs out at iteration' "$tmp/oom.html"; then no "the OOM page still projects an OOM"; else ok; fi
    render "$tmp/oom.html" "$tmp/oom" 2400
    px=$(png_colours "$tmp/oom.png" d62728)
    echo "html_chromium: demo OOM page: $px"
    [ "$(sed 's/d62728=\([0-9]*\).*/\1/' <<<"$px")" -ge 200 ] && ok || no "no red out-of-memory marker drawn ($px)"
    [ -n "$keep" ] && cp "$tmp/oom.png" "$keep/demo_oom.png"

    # The snapshot in memory_viz's own code, when it is at hand.
    if [ -z "${MEMORY_VIZ_DIR:-}" ]; then
        echo "SKIP: html_chromium: the snapshot in memory_viz: set MEMORY_VIZ_DIR to a torch/utils/viz directory"
    elif [ ! -f "$MEMORY_VIZ_DIR/MemoryViz.js" ]; then
        no "MEMORY_VIZ_DIR=$MEMORY_VIZ_DIR holds no MemoryViz.js"
    elif [ ! -f "$MEMORY_VIZ_DIR/process_alloc_data.js" ]; then
        echo "SKIP: html_chromium: memory_viz's pool ids: this MemoryViz.js comes without process_alloc_data.js (older viewer)"
    else
        python3 "$here/memory_viz_page.py" "$MEMORY_VIZ_DIR" "$tmp/leak.pickle" >"$tmp/viz.html" ||
            no "memory_viz page: cannot build it"
        dump "$tmp/viz.html" "$tmp/viz.dom"
        console_clean "$tmp/viz.dom.log" "memory_viz page"
        viz=$(attr "$tmp/viz.dom" data-result)
        echo "html_chromium: memory_viz read the snapshot: $viz"
        python3 - "$viz" <<'PY' && ok || no "memory_viz: $viz"
import json, sys
r = json.loads(sys.argv[1])
assert not r.get('error'), r['error']
assert r['elements'] > 100 and r['pool_unknown'] == 0 and r['pool_00'] == r['elements'], r
s = r['settings']
assert s['expandable_segments'] is True and 'expandable_segments:True' in s['PYTORCH_CUDA_ALLOC_CONF'], s
assert r['segment_maps'] > 0 and r['segment_maps_with_frames'] == r['segment_maps'], r
PY
    fi
    # The viewer whole: every view, on the preload's pickle and on it written again.
    if [ -n "${MEMORY_VIZ_DIR:-}" ] && [ -f "$MEMORY_VIZ_DIR/MemoryViz.js" ]; then
        if [ -z "${MEMORY_VIZ_D3:-}" ] || [ ! -f "$MEMORY_VIZ_D3" ]; then
            echo "SKIP: html_chromium: memory_viz's views: set MEMORY_VIZ_D3 to d3 v5's dist/d3.min.js"
        else
            "$bin/cudalloc-report" "$tmp/leak.pickle" --pickle "$tmp/again.pickle" >/dev/null 2>&1 ||
                no "cudalloc-report --pickle of the demo's snapshot failed"
            for p in leak again; do
                python3 "$here/memory_viz_views.py" "$MEMORY_VIZ_DIR" "$MEMORY_VIZ_D3" "$tmp/$p.pickle" \
                    >"$tmp/views_$p.html" || no "memory_viz views page: cannot build it"
                timeout 120 "$browser" "${flags[@]}" --window-size=1400,1000 --virtual-time-budget=30000 \
                    --dump-dom "file://$tmp/views_$p.html" >"$tmp/views_$p.dom" 2>"$tmp/views_$p.log"
                attr "$tmp/views_$p.dom" data-result >"$tmp/views_$p.json"
            done
            python3 - "$tmp/views_leak.json" "$tmp/views_again.json" <<'PY' && ok || no "memory_viz's views"
import json, sys
runs = {name: json.load(open(f)) for name, f in zip(('preload', 'cudalloc-report --pickle'), sys.argv[1:])}
for name, r in runs.items():
    print('html_chromium: memory_viz views, %s pickle: script errors %s' % (name, r['errors'] or 'none'))
    for view in r['view_names']:
        v = r['views'][view]
        print('  %-32s %s' % (view, {k: x for k, x in v.items() if k != 'sample'}))
    assert not r['errors'] and len(r['view_names']) >= 3, r['errors']
    for view in r['view_names']:
        v = r['views'][view]
        assert not v.get('error') and v['shapes'] > 0, (name, view, v)
        # The segment timeline draws whole segments; the viewer gives those
        # from the snapshot no frames, and an expandable segment (the demo's)
        # has no segment_alloc event to take them from.
        if 'Segment' not in view:
            assert v['with_stack'] > 0, (name, view, v)
    assert r['views']['Active Memory Timeline']['with_stack'] == r['views']['Active Memory Timeline']['hovered'], r
a, b = runs.values()
for view in a['view_names']:  # written again, nothing shows fewer stacks
    assert b['views'][view]['with_stack'] == a['views'][view]['with_stack'], (view, a['views'][view], b['views'][view])
PY
            if [ -n "$keep" ]; then # what a user sees, each view
                for view in "Active Memory Timeline" "Allocator State History" "Active Cached Segment Timeline"; do
                    python3 "$here/memory_viz_views.py" "$MEMORY_VIZ_DIR" "$MEMORY_VIZ_D3" "$tmp/leak.pickle" "$view" \
                        >"$tmp/one.html" || continue
                    timeout 120 "$browser" "${flags[@]}" --window-size=1400,1000 --virtual-time-budget=10000 \
                        --screenshot="$keep/memory_viz_${view// /_}.png" "file://$tmp/one.html" >/dev/null 2>&1
                done
            fi
        fi
    fi
fi
[ $fail = 0 ] && echo "html_chromium: ok ($checks checks)"
exit $fail
