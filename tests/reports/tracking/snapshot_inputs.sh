#!/usr/bin/env bash
# Whole-program tests of cudalloc-report on what a PyTorch user hands it:
# snapshots whose classic segments touch in the address space (the report,
# the JSON, the HTML map and the --pickle export keep each segment and its
# pool as the file has them, checked against the file's own figures),
# a snapshot without a trace, a gzipped snapshot, a torch.save() file, an
# OOM on one of several devices (its device total inferred, and said so).
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

echo "snapshot_inputs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
