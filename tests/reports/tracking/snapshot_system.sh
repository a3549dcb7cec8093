#!/usr/bin/env bash
# Whole-program tests of cudalloc-report on PyTorch snapshots and on ranks'
# JSON reports: the committed fixtures (and that the generator still makes
# them), snapshots at protocols 2, 4 and 5, the replay under cudalloc with
# --capacity, several devices, the demo trainer's own snapshot (its leak as
# the live run named it), bad snapshots (FILE: message, exit 2), and the
# table of ranks from real runs of the demo trainer, one leaking faster, one
# running out of memory.
#   snapshot_system.sh BUILD_DIR
set -u
build=${1:?usage: snapshot_system.sh BUILD_DIR}
bin=$build/bin
report=$bin/cudalloc-report
data=$(cd "$(dirname "$0")/../../data/snapshots" && pwd)
gen() { python3 "$data/make_snapshots.py" "$@"; }
fail=0 pass=0
ok() { pass=$((pass + 1)); }
no() { echo "FAIL: $*"; fail=$((fail + 1)); }
has() { grep -q -- "$2" <<<"$1" && ok || no "$3: lacks '$2'"; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# The committed fixtures are what the generator makes.
mkdir "$tmp/fix" && gen --fixtures "$tmp/fix"
for f in "$data"/*.pickle; do
    cmp -s "$f" "$tmp/fix/$(basename "$f")" && ok || no "$f differs from what make_snapshots.py makes"
done

# The fixtures' diagnoses.
out=$("$report" "$data/leaky.pickle") || no "leaky.pickle exited $?"
has "$(head -1 <<<"$out")" '^VERDICT: LEAK: allocations from train_step (/work/train.py:42) called from main (/work/train.py:90) are kept: +1.00 MiB every iteration' leaky
has "$out" 'source: detected, 4 allocations per iteration' leaky
has "$out" '#0 train_step at /work/train.py:42' leaky
has "$out" '#1 main at /work/train.py:90' leaky
grep -q 'CUDACachingAllocator' <<<"$out" && no "leaky: C++ frames shown" || ok
out=$("$report" "$data/clean.pickle") || no "clean.pickle exited $?"
has "$(head -1 <<<"$out")" '^VERDICT: HEALTHY: no leak over' clean
out=$("$report" "$data/leaky_annotated_p5.pickle") || no "annotated exited $?"
has "$out" 'iterations          12 (source: explicit' annotated
has "$(head -1 <<<"$out")" '^VERDICT: LEAK' annotated
out=$("$report" "$data/two_devices_oom.pickle") || no "two devices exited $?"
has "$out" '^=== device 0 of ' two-devices
has "$out" '^=== device 1 of ' two-devices
[ "$(grep -c '^VERDICT: OUT OF MEMORY (1 failed allocation)' <<<"$out")" = 2 ] && ok || no "two devices: two OOM verdicts"
has "$out" '#0 evaluate at /work/train.py:70' two-devices

# One snapshot at protocols 2, 4 and 5: the same report.
for p in 2 4 5; do
    gen "$tmp/p$p.pickle" --leak --protocol "$p" --max-entries 80
    "$report" "$tmp/p$p.pickle" | grep -v '^trace: ' > "$tmp/p$p.txt" || no "protocol $p exited"
done
cmp -s "$tmp/p2.txt" "$tmp/p4.txt" && cmp -s "$tmp/p4.txt" "$tmp/p5.txt" && ok || no "protocols 2, 4, 5 give different reports"

# The replay under cudalloc: would the run fit?
out=$("$report" "$data/leaky.pickle" --capacity 100MiB) || no "capacity 100MiB exited $?"
has "$out" '^== Replay under cudalloc' replay
has "$out" 'on a 100 MiB device: fits, no allocation fails' replay
has "$out" 'at this rate alone the device runs out at iteration' replay
out=$("$report" "$data/leaky.pickle" --capacity 40MiB) || no "capacity 40MiB exited $?"
has "$out" 'on a 40.0 MiB device: does not fit, [0-9]* allocations fail' replay-small
"$report" "$data/leaky.pickle" --capacity 100MiB --json "$tmp/r.json" --pickle "$tmp/r.pickle" --html "$tmp/r.html" \
    || no "json/pickle/html exited $?"
python3 - "$tmp/r.json" "$tmp/r.pickle" <<'PY' && ok || no "replay JSON, pickle round trip"
import json, pickle, sys
r = json.load(open(sys.argv[1]))
rp = r['replay']
MiB = 1 << 20
assert rp['allocator'] == 'expandable' and rp['capacity_bytes'] == 100 * MiB and rp['ooms_at_capacity'] == 0, rp
assert rp['peak_requested_bytes'] == 55 * MiB + 100 + 4096, rp   # 4 weights, 12 leaks, act1 + act2 + grad, as generated
assert rp['recorded_peak_reserved_bytes'] == 56 * MiB, rp
assert rp['peak_requested_bytes'] <= rp['min_capacity_bytes'] <= rp['peak_reserved_bytes'] + MiB, rp
assert r['leaks'][0]['site'] == 'train_step (/work/train.py:42)', r['leaks'][0]['site']
assert r['leaks'][0]['frames'][0]['module'] == 'snapshot'
s = pickle.load(open(sys.argv[2], 'rb'))   # cudalloc's own snapshot of what it read
names = {f['name'] for seg in s['segments'] for b in seg['blocks'] for f in b['frames']}
assert 'train_step' in names and '__init__' in names, names
PY
[ -s "$tmp/r.html" ] && ok || no "html not written"

# Several devices: files need --device; an absent device is named.
msg=$("$report" "$data/two_devices_oom.pickle" --json "$tmp/x.json" 2>&1); rc=$?
[ $rc = 2 ] && grep -q 'devices 0, 1 in the snapshot: --json, --pickle and --folded are per device, pick one with --device' <<<"$msg" && ok || no "several devices: rc=$rc '$msg'"
"$report" "$data/two_devices_oom.pickle" --device 1 --json "$tmp/d1.json" && \
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['device'] == 1 and r['verdict']['code'] == 'oom'" "$tmp/d1.json" \
    && ok || no "--device 1"
msg=$("$report" "$data/leaky.pickle" --device 5 2>&1); rc=$?
[ $rc = 2 ] && grep -q 'no device 5 in the snapshot (devices with data: 0)' <<<"$msg" && ok || no "--device 5: rc=$rc '$msg'"

# Bad snapshots: FILE: message, one line, exit 2.
bad() { # name, expected text
    msg=$("$report" "$tmp/$1" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <<<"$msg")" -eq 1 ] && grep -q "^$tmp/$1: .*$2" <<<"$msg"; then ok
    else no "$1: rc=$rc msg='$msg' (wanted '$2')"; fi
}
: > "$tmp/empty.pickle"; bad empty.pickle 'empty: no pickle'
echo "hello" > "$tmp/text.pickle"; bad text.pickle 'offset 0: byte 0x68: not a pickle of protocol 2 or later'
head -c 3000 "$data/leaky.pickle" > "$tmp/cut.pickle"; bad cut.pickle 'truncated'
python3 -c "import pickle, datetime, sys; open(sys.argv[1], 'wb').write(pickle.dumps({'segments': [datetime.date(2024, 1, 1)]}, protocol=4))" "$tmp/object.pickle"
bad object.pickle 'STACK_GLOBAL: refused'
python3 -c "import pickle, sys; open(sys.argv[1], 'wb').write(pickle.dumps([1, 2]))" "$tmp/list.pickle"
bad list.pickle 'not a PyTorch memory snapshot: the pickle holds a list'
python3 -c "import pickle, sys; open(sys.argv[1], 'wb').write(pickle.dumps({'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': '0x1', 'size': 1}]]}))" "$tmp/entry.pickle"
bad entry.pickle "device_traces\[0\]\[0\]: 'addr' is a str, expected an int"
msg=$("$report" "$tmp/missing.pickle" 2>&1); rc=$?
[ $rc = 2 ] && grep -q "missing.pickle: cannot open" <<<"$msg" && ok || no "missing file: rc=$rc '$msg'"

# The demo trainer's own snapshot (PREFIX.pickle): the leak the live run named.
sim() { CUDALLOC_SIM_MEMORY=${MEM:-256MiB} "$bin/cudalloc" run --report "$1" -- "$bin/demo_trainer" \
        --layers 2 --channels 64 --heads 4 --seq 64 --batch 8 --print-every 100 "${@:2}" >"$1.log" 2>&1; }
sim "$tmp/demo_leak" --steps 12 --leak eval-grad || no "demo trainer (leak) exited $?"
sim "$tmp/demo_clean" --steps 12 || no "demo trainer (clean) exited $?"
"$report" "$tmp/demo_leak.pickle" --json "$tmp/from_pickle.json" || no "demo pickle exited $?"
python3 - "$tmp/demo_leak.json" "$tmp/from_pickle.json" <<'PY' && ok || no "demo pickle: the live run's leak"
import json, sys
live, snap = (json.load(open(p)) for p in sys.argv[1:])
assert snap['verdict']['code'] == 'leak', snap['verdict']
rl, rs = live['leak_bytes_per_iteration'], snap['leak_bytes_per_iteration']
assert abs(rs - rl) <= 0.05 * rl, (rl, rs)
sites = {l['site'].split(' (')[0] for l in snap['leaks']}
assert 'op_matmul' in sites, sites
assert any(f['file'].endswith('demo_trainer/ops.c') for l in snap['leaks'] for f in l['frames'])
PY
out=$("$report" "$tmp/demo_clean.pickle") || no "clean demo pickle exited $?"
has "$(head -1 <<<"$out")" '^VERDICT: HEALTHY' demo-clean

# Ranks: real runs, rank 0 leaking faster (eval-grad) than rank 1 (keep-outputs).
mkdir "$tmp/ranks"
RANK=0 sim "$tmp/ranks/run_%r" --steps 12 --leak eval-grad || no "rank 0 exited $?"
RANK=1 sim "$tmp/ranks/run_%r" --steps 12 --leak keep-outputs || no "rank 1 exited $?"
out=$("$report" "$tmp/ranks/run_1.json" "$tmp/ranks/run_0.json") || no "ranks exited $?"
has "$out" '^rank  iterations  *peak allocated' ranks
has "$(sed -n 2p <<<"$out")" '^0 .* leak .*iteration [0-9]* (projected)' ranks-row0
has "$(sed -n 3p <<<"$out")" '^1 .* leak .*iteration [0-9]* (projected)' ranks-row1
has "$out" '^rank 0 runs out of memory first: projected at iteration [0-9]*, leaking 5.[0-9]* MiB per iteration' ranks
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['rank'] == 1" "$tmp/ranks/run_1.json" && ok || no "JSON rank"
# rank 0 on a small device: it really runs out, and that comes first
mkdir "$tmp/oom"
RANK=0 MEM=64MiB sim "$tmp/oom/r%r" --steps 30 --leak eval-grad
RANK=1 MEM=64MiB sim "$tmp/oom/r%r" --steps 30 --leak keep-outputs || no "oom rank 1 exited $?"
out=$("$report" "$tmp"/oom/r*.json) || no "oom ranks exited $?"
has "$out" '^0 .* oom .*iteration [0-9]* (happened)' oom-row
has "$out" '^rank 0 runs out of memory first: it failed at iteration [0-9]*$' oom-ranks
# a report without "rank": the number ending its name
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); del r['rank']; json.dump(r, open(sys.argv[2], 'w'))" \
    "$tmp/ranks/run_1.json" "$tmp/ranks/node_7.json"
out=$("$report" "$tmp/ranks/run_0.json" "$tmp/ranks/node_7.json") || no "named rank exited $?"
has "$out" '^7 ' rank-from-name
has "$out" 'read from the number ending its file name' rank-from-name
# bad rank inputs: exit 2, the file named
badr() { # expected text, files...
    local want=$1; shift
    msg=$("$report" "$@" 2>&1 >/dev/null); rc=$?
    [ $rc = 2 ] && grep -q -- "$want" <<<"$msg" && ok || no "ranks $*: rc=$rc '$msg' (wanted '$want')"
}
echo '{"a": 1}' > "$tmp/other.json"; badr "other.json: not a cudalloc JSON report" "$tmp/ranks/run_0.json" "$tmp/other.json"
printf '{"generator": "cudalloc",' > "$tmp/cut.json"; badr "cut.json: not JSON: line 1, column 26" "$tmp/cut.json"
cp "$tmp/ranks/run_0.json" "$tmp/ranks/again.json"; badr "rank 0 again" "$tmp/ranks/run_0.json" "$tmp/ranks/again.json"
badr "leaky.pickle: not a JSON report" "$tmp/ranks/run_0.json" "$data/leaky.pickle"
badr "takes no options" "$tmp/ranks/run_0.json" --json "$tmp/t.json"

echo "snapshot_system: $pass passed, $fail failed"
[ $fail -eq 0 ]
