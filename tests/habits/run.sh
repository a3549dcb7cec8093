#!/usr/bin/env bash
# The habits of valgrind, heaptrack and memory_viz users (issue 34), tested as
# those users would: a C program with no loop under the preload lists what it
# still holds by stack; --diff on the demo's clean and leaking runs names the
# leak and exits with its status; the folded stacks parse as flame graph tools
# read them; a suppression takes a planted leak out and the report counts it;
# a two-device OOM snapshot reads OOM first; the pickle's settings are
# PyTorch's.
#   usage: run.sh BUILD_DIR
set -u
build=${1:?usage: run.sh BUILD_DIR}
report=$build/bin/cudalloc-report
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $*"; }
has() { # file, extended regex, name
    grep -Eq -- "$2" "$1" && ok || { no "$3: $1 lacks /$2/"; sed 's/^/    /' "$1" | head -40; }
}
preload() { # the environment of a program under the preload on the simulated device
    env LD_LIBRARY_PATH="$build/sim" LD_PRELOAD="$build/lib/libcudalloc.so" CUDALLOC_SIM_MEMORY=1GiB "$@"
}

# 1. A program with no loop: what it still holds at exit, by stack, largest
# first, in the exit summary and in every report.
preload CUDALLOC_REPORT="$tmp/noloop" "$build/tests/habits/prog_no_loop" >"$tmp/noloop.out" 2>&1 ||
    no "prog_no_loop failed"
has "$tmp/noloop.out" 'NO ITERATIONS: .*no loop, so no leak to judge; still live at the end: 14.0 MiB, the most \(6.00 MiB' verdict
has "$tmp/noloop.out" '^cudalloc: still live: 14.0 MiB in 4 allocations, by call site, largest first:$' summary-head
# largest first, each with the program's frames under it
awk '/still live:/ { on = 1; next } on && /^cudalloc:   [0-9]/ { print $2, $3 }' "$tmp/noloop.out" >"$tmp/sizes"
[ "$(tr '\n' ' ' <"$tmp/sizes")" = "6.00 MiB 3.00 MiB 3.00 MiB 2.00 MiB " ] && ok || no "summary order: $(cat "$tmp/sizes")"
has "$tmp/noloop.out" '^cudalloc:       from load_embedding_table at .*prog_no_loop.c:[0-9]+$' summary-stack
has "$tmp/noloop.out" '^cudalloc:       from known_kernel_cache at ' summary-stack-cache
has "$tmp/noloop.txt" '^== Live now, by call site$' txt-section
has "$tmp/noloop.txt" '^1\. 6.00 MiB in 1 allocation: ' txt-first
has "$tmp/noloop.txt" '#1 load_embedding_table at .*prog_no_loop.c' txt-stack
has "$tmp/noloop.html" '<h2>Live now, by call site</h2>' html-section
has "$tmp/noloop.html" 'load_embedding_table at .*prog_no_loop.c' html-stack
python3 - "$tmp/noloop.json" <<'EOF' && ok || no "json live_sites"
import json, sys
d = json.load(open(sys.argv[1]))
sites = d["live_sites"]
assert [s["live_bytes"] for s in sites] == [6 << 20, 3 << 20, 3 << 20, 2 << 20], sites
assert any(f["function"] == "load_embedding_table" for f in sites[0]["frames"]), sites[0]
assert d["suppressed"] is None
EOF

# 4. Suppressions: the known cache is left out, and its bytes are counted.
printf '# a cache kept on purpose\nfun:known_kernel_*\n' >"$tmp/supp"
preload CUDALLOC_REPORT="$tmp/supp" CUDALLOC_CONF="suppressions:$tmp/supp" "$build/tests/habits/prog_no_loop" \
    >"$tmp/supp.out" 2>&1 || no "prog_no_loop with suppressions failed"
has "$tmp/supp.out" "^cudalloc: suppressed \($tmp/supp\): 2.00 MiB in 1 allocation from 1 call site" supp-summary
grep -q 'known_kernel_cache' "$tmp/supp.out" && no "suppressed site still listed" || ok
has "$tmp/supp.txt" '^12.0 MiB in 3 allocations; ' supp-txt
python3 - "$tmp/supp.json" <<'EOF' && ok || no "json suppressed"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["suppressed"]["live_bytes"] == 2 << 20 and d["suppressed"]["sites"] == 1, d["suppressed"]
assert all(f["function"] != "known_kernel_cache" for s in d["live_sites"] for f in s["frames"])
EOF
printf 'fun:no_such_function\n' >"$tmp/none"
preload CUDALLOC_CONF="suppressions:$tmp/none" "$build/tests/habits/prog_no_loop" >"$tmp/none.out" 2>&1
has "$tmp/none.out" 'suppressed .*: 0 B in 0 allocations from 0 call sites' supp-nothing
preload CUDALLOC_CONF="suppressions:$tmp/missing" "$build/tests/habits/prog_no_loop" >"$tmp/miss.out" 2>&1 &&
    ok || no "a missing suppressions file stopped the program"
has "$tmp/miss.out" "missing: cannot open the suppressions file: No such file or directory; reports suppress nothing" supp-missing

# The demo trainer, small: clean and with the eval-grad leak planted.
model=(--layers 2 --channels 64 --heads 2 --seq 32 --batch 4 --steps 8 --eval-every 1 --print-every 4)
for run in clean leak; do
    extra=()
    [ $run = leak ] && extra=(--leak eval-grad)
    CUDALLOC_SIM_MEMORY=1GiB "$build/bin/cudalloc" run --report "$tmp/$run" -- "$build/bin/demo_trainer" "${model[@]}" \
        "${extra[@]}" >"$tmp/$run.log" 2>&1 || no "demo $run failed"
done
has "$tmp/leak.txt" '^VERDICT: LEAK: .*evaluate' demo-leak

# 2. --diff: the leak's site is what grew, and the status holds a merge.
"$report" --diff "$tmp/clean.json" "$tmp/leak.json" --fail-over 5% >"$tmp/diff.out" 2>&1
rc=$?
[ $rc -eq 3 ] && ok || no "diff over 5%: exit $rc, wanted 3"
has "$tmp/diff.out" '^GREW: peak allocated \+[0-9.]+ MiB .*leaks \+[0-9.]+ MiB per iteration more: a forward pass run under evaluate \(.*train.c:[0-9]+\)' diff-first-line
has "$tmp/diff.out" '^  0 B +-> [0-9.]+ MiB +a forward pass run under evaluate .*\(new\)$' diff-leak
has "$tmp/diff.out" '^peak allocated +[0-9.]+ MiB +[0-9.]+ MiB +\+' diff-table
has "$tmp/diff.out" '^fragmentation ' diff-fragmentation
has "$tmp/diff.out" '^verdict +healthy +leak$' diff-verdicts
has "$tmp/diff.out" 'exit status 3$' diff-says-status
"$report" --diff "$tmp/leak.json" "$tmp/clean.json" --fail-over 5% >"$tmp/diff2.out" 2>&1
rc=$?
[ $rc -eq 0 ] && ok || no "diff that shrank: exit $rc, wanted 0"
has "$tmp/diff2.out" '^WITHIN: peak allocated -' diff-within
has "$tmp/diff2.out" '\(gone\)$' diff-gone
"$report" --diff "$tmp/clean.json" "$tmp/leak.json" --fail-over 1GiB >/dev/null 2>&1 && ok || no "diff under 1GiB: exit $?"
# two traces: each diagnosed first, then compared
"$report" --diff "$tmp/clean.csv" "$tmp/leak.csv" --fail-over 5% >"$tmp/diff3.out" 2>&1
rc=$?
[ $rc -eq 3 ] && ok || no "diff of traces: exit $rc"
has "$tmp/diff3.out" '^GREW: .*leaks \+' diff-traces
# two snapshots: the kept list's line is the new leak
"$report" --diff tests/data/snapshots/clean.pickle tests/data/snapshots/leaky.pickle --fail-over 10% >"$tmp/diff4.out" 2>&1
rc=$?
[ $rc -eq 3 ] && ok || no "diff of snapshots: exit $rc"
has "$tmp/diff4.out" '^GREW: .*leaks \+1.00 MiB per iteration more: allocations from train_step \(/work/train.py:42\)' diff-snapshots
for bad in "--fail-over lots" "--fail-over -5%"; do
    msg=$("$report" --diff "$tmp/clean.json" "$tmp/leak.json" $bad 2>&1); rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <<<"$msg")" -eq 1 ] && grep -q 'bad --fail-over' <<<"$msg" && ok || no "$bad: $rc '$msg'"
done
msg=$("$report" --diff "$tmp/clean.json" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q 'takes two inputs' <<<"$msg" && ok || no "diff of one: $rc '$msg'"

# 3. Folded stacks of the peak: the grammar flame graph tools read
# (flamegraph.pl: "frame;frame;... count"), and the same offline.
check_folded() { # file, name
    python3 - "$1" <<'EOF' && ok || no "$2: folded grammar"
import re, sys
lines = open(sys.argv[1]).read().split("\n")
assert lines[-1] == "" and len(lines) > 1, "no lines, or no final newline"
seen = set()
for line in lines[:-1]:
    m = re.fullmatch(r"([^;\n]+(?:;[^;\n]+)*) (\d+)", line)
    assert m, line
    assert m.group(1) not in seen, "a stack twice: " + line
    assert all(f and f == f.strip() for f in m.group(1).split(";")), line
    seen.add(m.group(1))
    assert int(m.group(2)) > 0, line
EOF
}
check_folded "$tmp/leak.folded" live-folded
# the bytes add up to the peak the JSON report gives
python3 - "$tmp/leak.folded" "$tmp/leak.json" <<'EOF' && ok || no "folded total"
import json, sys
total = sum(int(l.rsplit(" ", 1)[1]) for l in open(sys.argv[1]))
peak = json.load(open(sys.argv[2]))["peak"]["allocated_bytes"]
assert total <= peak and total > 0.9 * peak, (total, peak)
EOF
has "$tmp/leak.folded" '^_start \(demo_trainer\);.*main \(.*main.c:[0-9]+\);.*evaluate \(.*train.c:[0-9]+\);' folded-evaluate
"$report" "$tmp/leak.csv" --folded "$tmp/offline.folded" >/dev/null 2>&1 && ok || no "offline --folded"
check_folded "$tmp/offline.folded" offline-folded
has "$tmp/offline.folded" '^allocations of [0-9.]+ [KM]iB \([0-9]+ B\) [0-9]+$' offline-folded-sizes
"$report" tests/data/snapshots/steps_leak.pickle --folded "$tmp/snap.folded" >/dev/null 2>&1 && ok || no "snapshot --folded"
check_folded "$tmp/snap.folded" snapshot-folded
has "$tmp/snap.folded" '^<module> \(/work/train.py:100\);main \(/work/train.py:[0-9]+\);train_step \(/work/train.py:[0-9]+\)' snapshot-folded-frames
if command -v flamegraph.pl >/dev/null; then
    flamegraph.pl "$tmp/leak.folded" >"$tmp/leak.svg" 2>"$tmp/fg.err" && grep -q '<svg' "$tmp/leak.svg" && ok ||
        no "flamegraph.pl: $(cat "$tmp/fg.err")"
fi

# 4 (continued). A planted leak suppressed: no LEAK verdict, its bytes counted.
printf 'fun:evaluate\n' >"$tmp/eval.supp"
CUDALLOC_SIM_MEMORY=1GiB "$build/bin/cudalloc" run --report "$tmp/sleak" --conf "suppressions:$tmp/eval.supp" -- \
    "$build/bin/demo_trainer" "${model[@]}" --leak eval-grad >"$tmp/sleak.log" 2>&1 || no "demo with suppressions failed"
grep -q '^VERDICT: LEAK' "$tmp/sleak.txt" && no "suppressed leak still the verdict: $(head -1 "$tmp/sleak.txt")" || ok
has "$tmp/sleak.txt" "^suppressed \($tmp/eval.supp\): [0-9.]+ MiB in [0-9]+ allocations from [0-9]+ call sites" sleak-count
has "$tmp/sleak.log" "^cudalloc: suppressed \($tmp/eval.supp\): [0-9.]+ MiB" sleak-summary

# 5. A snapshot of two devices reads as one run: the table across the
# devices first, the device that ran out of memory (1) before device 0, in
# the text and in one HTML page that holds both.
two=tests/data/snapshots/two_devices_oom_on_1.pickle
"$report" "$two" >"$tmp/two.txt" 2>&1 || no "two devices: exit $?"
[ "$(head -1 "$tmp/two.txt")" = "DEVICES: OUT OF MEMORY on device 1 (of 2 devices). Each device's report follows, the devices that ran out of memory first." ] &&
    ok || no "two devices: first line: $(head -1 "$tmp/two.txt")"
[ "$(awk '$1 ~ /^[0-9]+$/ { print $1, $2 }' "$tmp/two.txt" | head -2 | tr '\n' ' ')" = "1 oom 0 healthy " ] && ok ||
    no "two devices: table order"
[ "$(grep '^=== device' "$tmp/two.txt" | cut -d' ' -f3 | tr '\n' ' ')" = "1 0 " ] && ok || no "two devices: report order"
# the OOM verdict within the first 10 lines (it was at line 60 of 200, after device 0's)
[ "$(grep -n 'OUT OF MEMORY (1 failed allocation)' "$tmp/two.txt" | head -1 | cut -d: -f1)" -le 10 ] && ok ||
    no "two devices: OOM verdict late"
"$report" "$two" --html "$tmp/two.html" --txt "$tmp/two2.txt" >"$tmp/two.out" 2>&1 || no "two devices --html: exit $?"
[ ! -s "$tmp/two.out" ] && cmp -s "$tmp/two.txt" "$tmp/two2.txt" && ok || no "two devices: --txt is stdout's text"
python3 - "$tmp/two.html" <<'EOF' && ok || no "two devices: one HTML page"
import re, sys
html = open(sys.argv[1]).read()
assert html.count("<html") == 1 and html.count("</html>") == 1
v = html.index('class="verdict bad"><strong>Verdict:</strong> OUT OF MEMORY on device 1 (of 2 devices)')
d1, d0 = html.index('<h1 id="report-dev1">device 1:'), html.index('<h1 id="report-dev0">device 0:')
assert v < d1 < d0, (v, d1, d0)
assert html.index('<a href="#report-dev1">device 1</a>') < html.index('<a href="#report-dev0">device 0</a>') < d1
for dev in ("dev0", "dev1"):  # each device's hover data, found by its own ids
    assert html.count('id="events-%s"' % dev) == 1 and html.count('id="events-data-%s"' % dev) == 1, dev
    assert "('-%s');" % dev in html
ids = re.findall(r' id="([^"]+)"', html)
assert len(set(ids)) == len(ids), "an id twice"
EOF
msg=$("$report" "$two" --json "$tmp/x.json" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q 'pick one with --device' <<<"$msg" && ok || no "two devices --json: $rc '$msg'"

# 6. The pickle cudalloc writes has PyTorch's fields, as torch/csrc/cuda/
# memory_snapshot.cpp writes them (the keys memory_viz reads), and its
# settings read as PyTorch's: the user's own PYTORCH_CUDA_ALLOC_CONF,
# 16 roundup divisions, cudalloc's settings in a dict of their own.
python3 - "$tmp/leak.pickle" <<'EOF' && ok || no "pickle: PyTorch's fields"
import pickle, sys
s = pickle.load(open(sys.argv[1], "rb"))
assert set(s) == {"segments", "device_traces", "allocator_settings"}, set(s)
seg_keys = {"device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
            "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"}
block_keys = {"address", "size", "requested_size", "state", "frames"}
frame_keys = {"filename", "line", "name"}
assert s["segments"]
for g in s["segments"]:
    assert seg_keys <= set(g), set(g) ^ seg_keys
    assert g["segment_type"] in ("small", "large") and type(g["segment_pool_id"]) is tuple
    for b in g["blocks"]:
        assert block_keys <= set(b) and b["state"] in ("active_allocated", "active_pending_free", "inactive"), b
        assert all(set(f) == frame_keys for f in b["frames"]), b["frames"][:1]
actions = {"alloc", "free_requested", "free_completed", "segment_map", "segment_unmap", "segment_alloc",
           "segment_free", "oom", "snapshot"}
trace = s["device_traces"][0]
assert trace and all(e["action"] in actions for e in trace), {e["action"] for e in trace} - actions
for e in trace:
    assert {"action", "addr", "size", "stream", "time_us", "frames"} <= set(e), e
    assert all(set(f) == frame_keys and type(f["line"]) is int for f in e["frames"]), e["frames"][:1]
assert any(f["name"] == "evaluate" for e in trace for f in e["frames"]), "no frame of the leak"
st = s["allocator_settings"]
torch = {"PYTORCH_CUDA_ALLOC_CONF": str, "max_split_size": int, "garbage_collection_threshold": float,
         "expandable_segments": bool, "pinned_num_register_threads": int, "release_lock_on_cudamalloc": bool,
         "pinned_use_cuda_host_register": bool, "roundup_power2_divisions": dict}
assert set(st) == set(torch) | {"cudalloc"}, set(st)
assert all(type(st[k]) is t for k, t in torch.items()), st
assert list(st["roundup_power2_divisions"]) == [str(1 << i) for i in range(16)], st["roundup_power2_divisions"]
assert st["PYTORCH_CUDA_ALLOC_CONF"] == "", st  # the demo ran with no CUDALLOC_CONF
assert st["cudalloc"]["expandable_segments"] is True and st["cudalloc"]["release_after"] == 10000, st["cudalloc"]
EOF
# with a setting of the user's own: it is PYTORCH_CUDA_ALLOC_CONF's value, as PyTorch keeps the user's
python3 - "$tmp/sleak.pickle" "suppressions:$tmp/eval.supp" <<'EOF' && ok || no "pickle: the user's setting"
import pickle, sys
st = pickle.load(open(sys.argv[1], "rb"))["allocator_settings"]
assert st["PYTORCH_CUDA_ALLOC_CONF"] == sys.argv[2], st["PYTORCH_CUDA_ALLOC_CONF"]
assert "CUDALLOC_CONF" not in st and "suppressions" not in st["cudalloc"], st
EOF
# a PyTorch snapshot written again by --pickle keeps its own setting
"$report" tests/data/snapshots/steps_leak.pickle --pickle "$tmp/again.pickle" >/dev/null 2>&1 || no "--pickle exit $?"
python3 - tests/data/snapshots/steps_leak.pickle "$tmp/again.pickle" <<'EOF' && ok || no "pickle: a snapshot's setting kept"
import pickle, sys
a, b = (pickle.load(open(p, "rb"))["allocator_settings"] for p in sys.argv[1:3])
assert b["PYTORCH_CUDA_ALLOC_CONF"] == a.get("PYTORCH_CUDA_ALLOC_CONF", ""), (a, b)
assert "cudalloc" not in b, b
EOF

# 7. The HTML page: the device's label on the fixes' chart is within the
# drawing (centred on the line near the right edge it was cut: "GiE"), and
# every abbreviation in its prose says what it stands for where it stands.
"$report" "$tmp/leak.csv" --capacity 12MiB --html "$tmp/cap.html" >/dev/null 2>&1 || no "--capacity --html: exit $?"
for page in "$tmp/cap.html" "$tmp/leak.html" "$tmp/two.html"; do
    python3 - "$page" <<'EOF' && ok || no "html: labels and abbreviations in $page"
import html, re, sys
t = open(sys.argv[1]).read()
for m in re.finditer(r'<svg class="fix-bars" width="(\d+)"(.*?)</svg>', t, flags=re.S):
    width = float(m.group(1))
    for x, anchor, text in re.findall(r'<text x="([\d.]+)"[^>]*text-anchor="(\w+)"[^>]*>([^<]*)</text>', m.group(2)):
        half = {"end": 0, "middle": 0.5, "start": 1}[anchor] * 7 * len(text)  # 12px text: ~7px a character
        assert float(x) + half <= width, (x, anchor, text, width)
prose = re.sub(r"<(script|style|svg|pre)\b.*?</\1>", " ", t, flags=re.S)
prose = re.sub(r"<abbr title=\"[^\"]+\">[^<]*</abbr>", " ", prose)
prose = html.unescape(re.sub(r"<[^>]+>", " ", prose))
left = set(re.findall(r"\b(?:OOM|CUPTI|NVTX|RMM|bf16|fp16|fp32)\b|\be\.g\.", prose))
assert not left, left
assert "Sizes are binary: 1 KiB = 1024 bytes" in t
EOF
done

echo "habits: $pass passed, $fail failed"
[ $fail -eq 0 ]
