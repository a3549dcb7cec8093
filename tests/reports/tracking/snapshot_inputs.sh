#!/usr/bin/env bash
# Whole-program tests of cudalloc-report on what a PyTorch user hands it:
# snapshots whose classic segments touch in the address space (the report,
# the JSON, the HTML map and the --pickle export keep each segment and its
# pool as the file has them, checked against the file's own figures),
# a snapshot without a trace (said, and what is live by call site), a
# gzipped snapshot (read), a torch.save() file (refused as one), an OOM on
# one of several devices (its device total inferred, and said so).
#   snapshot_inputs.sh BIN_DIR
set -u
bin=${1:?usage: snapshot_inputs.sh BIN_DIR}
report=$bin/cudalloc-report
data=$(cd "$(dirname "$0")/../../data/snapshots" && pwd)
gen() { python3 "$data/make_snapshots.py" "$@"; }
fail=0 pass=0
ok() { pass=$((pass + 1)); }
no() { echo "FAIL: $*"; fail=$((fail + 1)); }
has() { grep -q -- "$2" <<<"$1" && ok || no "$3: lacks '$2'"; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# ---- segments as the file has them ----

# The report's segments, free blocks and fragmentation against the file's
# own (its segments; the largest free block is the largest inactive block
# of one segment), and the --pickle export against the file.
check_segments() { # snapshot, report json, exported pickle, html
    python3 - "$@" <<'PY'
import json, pickle, re, sys
snap = pickle.load(open(sys.argv[1], 'rb'))
rep = json.load(open(sys.argv[2]))
out = pickle.load(open(sys.argv[3], 'rb'))
html = open(sys.argv[4]).read()
segs = sorted(snap['segments'], key=lambda g: g['address'])
def free(g): return [b['size'] for b in g['blocks'] if b['state'] == 'inactive']
fr = rep['fragmentation']
assert len(fr['segments']) == len(segs), ('segments', len(fr['segments']), len(segs))
for got, g in zip(fr['segments'], segs):
    want = {'address': g['address'], 'reserved_bytes': g['total_size'], 'pool': g['segment_type'],
            'pool_id': list(g['segment_pool_id']), 'stream': g['stream'], 'expandable': g['is_expandable'],
            'largest_free_block': max(free(g), default=0), 'cached_free_bytes': sum(free(g))}
    have = {k: got[k] for k in want}
    assert have == want, (have, want)
every = [s for g in segs for s in free(g)]
assert fr['largest_free_block'] == max(every), (fr['largest_free_block'], max(every))
assert abs(fr['fragmentation'] - (1 - max(every) / sum(every))) < 1e-9, fr['fragmentation']
# the export: the same segments, pools, pool ids, streams, free blocks
mine = sorted(out['segments'], key=lambda g: g['address'])
key = lambda g: (g['address'], g['total_size'], g['segment_type'], tuple(g['segment_pool_id']), g['stream'],
                 g['is_expandable'], sorted(free(g)))
assert [key(g) for g in mine] == [key(g) for g in segs], 'exported segments differ'
actions = {e['action'] for t in out['device_traces'] for e in t}
if any(e['action'] == 'segment_alloc' for t in snap['device_traces'] for e in t):
    assert 'segment_alloc' in actions and 'segment_map' not in actions, actions
# the HTML map: a bar per segment, labelled with its pool
bars = re.findall(r'>0x[0-9a-f]+ (small|large) ', html)
assert len(bars) == min(len(segs), 256), (len(bars), len(segs))
assert bars.count('small') == sum(g['segment_type'] == 'small' for g in segs[:256]) or len(segs) > 256
PY
}

for name in segments segments_no_trace; do
    f=$data/$name.pickle
    "$report" "$f" --json "$tmp/$name.json" --pickle "$tmp/$name.out.pickle" --html "$tmp/$name.html" \
        || no "$name exited $?"
    check_segments "$f" "$tmp/$name.json" "$tmp/$name.out.pickle" "$tmp/$name.html" && ok || no "$name: segments"
done
out=$("$report" "$data/segments.pickle") || no "segments text exited $?"
has "$out" 'cached free 602 MiB in 197 segments' segments-text
has "$out" 'largest free block 38.0 MiB; fragmentation 93.7%' segments-text
has "$out" 'segments (the 20 of 197 holding the most free memory):' segments-text
# the three parameters dropped last: three free segments side by side, not one of 62 MiB
has "$out" '^  0x7f0034800000 large reserved 26.0 MiB   allocated 0 B        free 26.0 MiB   largest free 26.0 MiB' segments-text
has "$out" '^  0x7f0036200000 large reserved 14.0 MiB   allocated 0 B        free 14.0 MiB' segments-text
has "$out" '^  0x7f0037000000 large reserved 22.0 MiB   allocated 0 B        free 22.0 MiB' segments-text
# Other snapshots made the same way: the rule, not these files.
for args in "--params 90 --iterations 5 --max-entries 300" "--params 30 --iterations 12 --leak" \
            "--params 200 --iterations 3 --max-entries 40 --protocol 2"; do
    gen "$tmp/s.pickle" --segments $args
    "$report" "$tmp/s.pickle" --json "$tmp/s.json" --pickle "$tmp/s.out.pickle" --html "$tmp/s.html" || no "$args exited $?"
    check_segments "$tmp/s.pickle" "$tmp/s.json" "$tmp/s.out.pickle" "$tmp/s.html" && ok || no "segments $args"
done
# Expandable segments stay one per contiguous mapped range.
"$report" "$data/clean.pickle" --json "$tmp/c.json" --pickle "$tmp/c.out.pickle" --html "$tmp/c.html" || no "clean exited $?"
python3 - "$data/clean.pickle" "$tmp/c.json" "$tmp/c.out.pickle" <<'PY' && ok || no "expandable segments"
import json, pickle, sys
snap, rep, out = pickle.load(open(sys.argv[1], 'rb')), json.load(open(sys.argv[2])), pickle.load(open(sys.argv[3], 'rb'))
assert [(g['address'], g['reserved_bytes'], g['expandable']) for g in rep['fragmentation']['segments']] == \
       [(g['address'], g['total_size'], True) for g in snap['segments']]
actions = {e['action'] for t in out['device_traces'] for e in t}
assert 'segment_map' in actions and 'segment_alloc' not in actions, actions
PY
# Each segment event's frames (the call that mapped or unmapped) come back
# in the export, as memory_viz's Allocator State History shows them; they
# were dropped before (issue 34).
python3 - "$data/clean.pickle" "$tmp/framed.pickle" <<'PY'
import pickle, sys
snap = pickle.load(open(sys.argv[1], 'rb'))
for i, e in enumerate(e for t in snap['device_traces'] for e in t if e['action'].startswith('segment')):
    e['frames'] = [{'filename': '/work/grow.py', 'line': 10 + i, 'name': 'grow_%d' % i},
                   {'filename': '/work/train.py', 'line': 3, 'name': 'main'}]
pickle.dump(snap, open(sys.argv[2], 'wb'), protocol=4)
PY
"$report" "$tmp/framed.pickle" --pickle "$tmp/framed.out.pickle" >/dev/null || no "framed exited $?"
python3 - "$tmp/framed.pickle" "$tmp/framed.out.pickle" <<'PY' && ok || no "segment events' frames in the export"
import pickle, sys
def seg(f):
    return [(e['action'], e['addr'], e['size'], [(x['filename'], x['line'], x['name']) for x in e.get('frames', [])])
            for t in pickle.load(open(f, 'rb'))['device_traces'] for e in t if e['action'].startswith('segment')]
want, got = seg(sys.argv[1]), seg(sys.argv[2])
assert len(want) > 0 and got == want, (want[:2], got[:2])
PY

# ---- inputs named as what they are ----

# A snapshot without a trace: said, with how to record one; what is live,
# by call site, from its segments' blocks.
out=$("$report" "$data/segments_no_trace.pickle" --json "$tmp/nt.json" --html "$tmp/nt.html" --txt -) || no "no trace exited $?"
has "$(head -1 <<<"$out")" '^VERDICT: NO TRACE: the snapshot holds its segments but no trace (it was taken without torch.cuda.memory._record_memory_history()), so nothing over time can be judged, leaks included. Live now 1.21 GiB in 114 allocations, reserved 1.67 GiB; held most by __init__ (/work/model.py:10): 1.15 GiB in 87 allocations.$' no-trace
has "$out" 'torch.cuda.memory._record_memory_history(max_entries=100000) before the steps to look at,' no-trace
has "$out" '^== Live now, by call site$' no-trace
has "$out" '^2. 56.6 MiB in 25 allocations: forward (/work/model.py:31)$' no-trace
has "$out" '^    #1 train_step at /work/train.py:40$' no-trace
grep -q 'no boundary was marked' <<<"$out" && no "no trace: told to mark iterations" || ok
python3 - "$data/segments_no_trace.pickle" "$tmp/nt.json" <<'PY' && ok || no "no trace: JSON against the file"
import json, pickle, sys
from collections import Counter
snap, rep = pickle.load(open(sys.argv[1], 'rb')), json.load(open(sys.argv[2]))
assert rep['verdict']['code'] == 'no_trace', rep['verdict']
by = Counter()
for g in snap['segments']:
    for b in g['blocks']:
        if b['state'] != 'inactive':
            f = b['frames'][2]   # past the allocator's two C++ frames
            by[f"{f['name']} ({f['filename']}:{f['line']})"] += b['size']
want = [(site, n) for site, n in by.most_common()]
got = [(s['site'], s['live_bytes']) for s in rep['live_sites']]
assert got == want, (got, want)
PY
grep -q '<h2>Live now, by call site</h2>' "$tmp/nt.html" && grep -q '_record_memory_history' "$tmp/nt.html" && ok || no "no trace: html"

# A gzipped snapshot: read as the pickle it holds (the same report).
gen "$tmp/s.pickle" --segments --params 40 --iterations 4 --max-entries 200
gen "$tmp/s.pickle.gz" --segments --params 40 --iterations 4 --max-entries 200 --gzip
gzip -t "$tmp/s.pickle.gz" && ok || no "the generator's gzip is not gzip"
"$report" "$tmp/s.pickle" | grep -v '^trace: ' > "$tmp/plain.txt" || no "plain exited $?"
"$report" "$tmp/s.pickle.gz" | grep -v '^trace: ' > "$tmp/gz.txt" || no "gzip exited $?"
cmp -s "$tmp/plain.txt" "$tmp/gz.txt" && ok || no "gzip: another report than the plain pickle's"
cat "$tmp/s.pickle.gz" "$tmp/s.pickle.gz" > "$tmp/two.gz" # two members: the second is more pickle
bad_input() { # file, expected text
    msg=$("$report" "$1" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <<<"$msg")" -eq 1 ] && grep -q "^$1: $2" <<<"$msg"; then ok
    else no "$1: rc=$rc msg='$msg' (wanted '$2')"; fi
}
bad_input "$tmp/two.gz" 'gzip-compressed: offset [0-9]*: .*after STOP'
head -c 600 "$tmp/s.pickle.gz" > "$tmp/cut.gz"; bad_input "$tmp/cut.gz" 'gzip: the compressed data is cut short (truncated)$'
{ cat "$tmp/s.pickle.gz"; echo junk; } > "$tmp/trailing.gz"; bad_input "$tmp/trailing.gz" 'gzip: 5 bytes after the compressed data$'
# A gzipped CSV trace goes to the trace reader, not the snapshot's ('not a pickle' before).
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,0,allocate,0x10,512,0x0\n' | gzip > "$tmp/trace.csv.gz"
out=$("$report" "$tmp/trace.csv.gz" 2>&1); rc=$?
[ $rc = 0 ] && grep -q '^cudalloc report (offline)' <<<"$out" && ok || no "gzipped trace: rc=$rc $(head -2 <<<"$out")"
# A torch.save() file, zip or legacy: not a snapshot, and how to make one.
gen "$tmp/model.pt" --zip
bad_input "$tmp/model.pt" "a zip archive, as torch.save() writes (a model or tensors), not a memory snapshot: make one with torch.cuda.memory._record_memory_history() before the code to look at and torch.cuda.memory._dump_snapshot('snapshot.pickle') after it$"
cp "$tmp/model.pt" "$tmp/model.pickle"; bad_input "$tmp/model.pickle" 'a zip archive, as torch.save() writes'
python3 -c "import pickle, sys; f = open(sys.argv[1], 'wb'); [pickle.dump(x, f, protocol=2) for x in (0x1950a86a20f9469cfc6c, 1001, {'protocol_version': 1001})]" "$tmp/legacy.pt"
bad_input "$tmp/legacy.pt" 'a torch.save() file (its legacy format), not a memory snapshot: make one with'

# An OOM on one of three devices: only that device's report says so; the
# device total it is judged with is reserved + free, inferred, and said so.
out=$("$report" "$data/three_devices_oom_on_1.pickle") || no "three devices exited $?"
[ "$(grep -c '^VERDICT: OUT OF MEMORY' <<<"$out")" = 1 ] && ok || no "three devices: one OOM verdict"
has "$(sed -n '/^=== device 1 of/,/^=== device 2 of/p' <<<"$out")" '^VERDICT: OUT OF MEMORY (1 failed allocation), the last at iteration 3 asking 64.0 GiB: the memory is not there: live allocations' three-devices
has "$out" '^  device: 1.00 GiB free of 1.04 GiB (the total inferred: reserved + free; the snapshot does not record the device.s size, --capacity gives it)$' three-devices
"$report" "$data/three_devices_oom_on_1.pickle" --device 1 --json "$tmp/d1.json" --html "$tmp/d1.html" || no "--device 1 exited $?"
"$report" "$data/three_devices_oom_on_1.pickle" --device 1 --capacity 80GiB --json "$tmp/d1c.json" || no "--capacity exited $?"
python3 - "$data/three_devices_oom_on_1.pickle" "$tmp/d1.json" "$tmp/d1c.json" <<'PY' && ok || no "three devices: JSON"
import json, pickle, sys
snap = pickle.load(open(sys.argv[1], 'rb'))
oom = [e for e in snap['device_traces'][1] if e['action'] == 'oom'][0]
reserved = sum(g['total_size'] for g in snap['segments'] if g['device'] == 1)
o = json.load(open(sys.argv[2]))['ooms'][0]
assert o['device_total_inferred'] is True and o['device_free_bytes'] == oom['device_free'], o
assert o['device_total_bytes'] == oom['device_free'] + reserved and o['verdict'] == 'not_there', o
c = json.load(open(sys.argv[3]))['ooms'][0]
assert c['device_total_inferred'] is False and c['device_total_bytes'] == 80 << 30, c
PY
grep -q 'device total (inferred: reserved + free; not recorded)' "$tmp/d1.html" && ok || no "three devices: html"

echo "snapshot_inputs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
