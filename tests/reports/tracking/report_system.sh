#!/usr/bin/env bash
# Whole-program tests of cudalloc-report: synthetic loops (leaking or clean,
# with iteration rows or detected), the recorded PyTorch traces, bad input
# (FILE:LINE: message, exit 2), and the HTML in headless Chromium.
#   report_system.sh BIN_DIR TRACES_DIR [PROBE]
# PROBE: a program leaking through a shared object that holds the tracker.
set -u
bin=${1:?usage: report_system.sh BIN_DIR TRACES_DIR [PROBE]}
traces=${2:-}
probe=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
report=$bin/cudalloc-report
fail=0 pass=0
ok() { pass=$((pass + 1)); }
no() { echo "FAIL: $*"; fail=$((fail + 1)); }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
gen() { bash "$here/gen_trace.sh" "$@"; }

# A leak with iteration rows: flagged, rate and first iteration right.
gen 12 1 1 > "$tmp/leak.csv"
out=$("$report" "$tmp/leak.csv") || no "leak.csv exited $?"
head -1 <<<"$out" | grep -q '^VERDICT: LEAK: allocations of 1.00 MiB (1048576 B) are kept: +1.00 MiB every iteration' && ok || no "leak verdict: $(head -1 <<<"$out")"
grep -q 'source: explicit' <<<"$out" && ok || no "leak.csv: source not explicit"
grep -q 'allocations of 1.00 MiB (1048576 B)' <<<"$out" && ok || no "leak.csv: site by size missing"
grep -q 'projected out-of-memory iteration: unknown' <<<"$out" && ok || no "no capacity: projection should be unknown"

# The same without iteration rows: the loop is detected.
gen 12 1 0 > "$tmp/leak_nomarks.csv"
out=$("$report" "$tmp/leak_nomarks.csv") || no "leak_nomarks.csv exited $?"
head -1 <<<"$out" | grep -q '^VERDICT: LEAK' && ok || no "detected leak verdict: $(head -1 <<<"$out")"
grep -q 'source: detected, 8 allocations per iteration' <<<"$out" && ok || no "detection: $(grep source <<<"$out")"

# Clean loops, marked and detected: healthy.
gen 30 0 1 > "$tmp/clean.csv"
gen 30 0 0 > "$tmp/clean_nomarks.csv"
for f in clean clean_nomarks; do
    out=$("$report" "$tmp/$f.csv") || no "$f exited $?"
    head -1 <<<"$out" | grep -q '^VERDICT: HEALTHY' && ok || no "$f: $(head -1 <<<"$out")"
done

# --capacity: the projection and an OOM verdict; JSON for programs.
gen 12 1 1 1 > "$tmp/oom.csv"
"$report" "$tmp/oom.csv" --capacity 256MiB --json "$tmp/oom.json" --txt "$tmp/oom.txt" || no "oom.csv exited $?"
python3 - "$tmp/oom.json" <<'PY' && ok || no "oom.json content"
import json, sys
r = json.load(open(sys.argv[1]))
assert r['iterations'] == {**r['iterations'], 'count': 12, 'source': 'explicit'}, r['iterations']
l = r['leaks'][0]
assert l['bytes_per_iteration'] == 1 << 20 and l['count_per_iteration'] == 1 and l['first_iteration'] == 0, l
assert isinstance(l['projected_oom_iteration'], int) and l['projected_oom_iteration'] > 100, l
assert r['ooms'][0]['verdict'] == 'not_there' and r['ooms'][0]['requested_bytes'] == 8 << 30, r['ooms']
assert r['fragmentation']['device_total_bytes'] == 256 << 20
assert 'allocated_bytes.all.peak' in r['stats']
PY
grep -q 'at this rate alone the device runs out at iteration' "$tmp/oom.txt" && ok || no "oom.txt: no projection"

# Every trace of TRACES_DIR has a verdict, and a
# classic-mode replay.
for f in "$traces"/*.csv; do
    [ -f "$f" ] || continue
    out=$("$report" "$f") || { no "$f exited $?"; continue; }
    head -1 <<<"$out" | grep -q '^VERDICT: ' && ok || no "$f: no verdict"
    "$report" --mode classic "$f" --json "$tmp/t.json" && python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$tmp/t.json" && ok || no "$f: classic json"
done

# Real PyTorch traces (tests/data/torch, recorded on the CPU): only the kept
# validation graphs are leaks, with iteration rows and without (detected),
# with a device size and without; the varying shapes' caches are not.
torch=$here/../../data/torch
for f in fixed varying train_sum eval_kept eval_sum; do
    want=HEALTHY; case $f in eval_*) want=LEAK;; esac
    grep -v ',iteration,' "$torch/gpt_$f.csv" > "$tmp/nomarks.csv"
    for args in "$torch/gpt_$f.csv" "--capacity 16GiB $torch/gpt_$f.csv" "$tmp/nomarks.csv"; do
        out=$("$report" $args) || { no "$args exited $?"; continue; }
        head -1 <<<"$out" | grep -q "^VERDICT: $want: " && ok || no "gpt_$f ($args): $(head -1 <<<"$out")"
    done
done
"$report" "$torch/gpt_eval_kept.csv" --capacity 16GiB --json "$tmp/eval.json" >/dev/null || no "eval_kept json"
python3 - "$tmp/eval.json" <<'PY' && ok || no "eval_kept: one finding, its sites, the leaks per site"
import json, sys
r = json.load(open(sys.argv[1]))
f = r['findings']
assert len(f) == 1, f
f = f[0]
assert f['severity'] == 'leak' and f['kind'] == 'together' and f['retained_graph'] is True, f
assert f['title'].startswith('7 allocation sizes grow together'), f['title']
assert f['root'] is None and 'no_grad' in f['advice'], f
assert len(f['sites']) == 7 and abs(sum(s['bytes_per_iteration'] for s in f['sites']) - f['bytes_per_iteration']) < 1
assert 700 << 10 < f['bytes_per_iteration'] < 800 << 10, f['bytes_per_iteration']
assert isinstance(f['projected_oom_iteration'], int) and f['iterations_to_fill'] > 0
assert len(r['leaks']) == 7 and all(l['finding'] == 0 for l in r['leaks'])
assert r['leak_bytes_per_iteration'] == f['bytes_per_iteration'] and r['working_set_bytes'] > 4 << 20
assert r['warnings'] == []
PY

# A stream per row, 10,000 of them: linear in streams (issue 29: 25 s before,
# each of the allocator's segments looked through all of the report's, and
# each new stream through every pool; under a second now). 4 MiB each: more
# than a stream shares (allocator/share.c), so each has a pool of its own.
awk 'BEGIN { print "Thread,Time,Action,Pointer,Size,Stream"
    for (i = 0; i < 10000; i++) printf "1,%d,allocate,0x%x00000,4194304,0x%x\n", i, 4 * (i + 1), 4096 + 16 * i }' > "$tmp/streams.csv"
out=$(timeout 10 "$report" "$tmp/streams.csv") || no "streams.csv: exited $? (124: over 10 s)"
grep -q 'in 10000 segments' <<<"$out" && ok || no "streams.csv: $(grep segments <<<"$out" | head -1)"
# 4 KiB each: the streams share one pool, 40 MiB for 39.1 MiB (20,000 MiB
# before, a granule each).
awk 'BEGIN { print "Thread,Time,Action,Pointer,Size,Stream"
    for (i = 0; i < 10000; i++) printf "1,%d,allocate,0x%x,4096,0x%x\n", i, 65536 + 4096 * i, 4096 + 16 * i }' > "$tmp/streams.csv"
out=$(timeout 10 "$report" "$tmp/streams.csv") || no "streams.csv (4 KiB): exited $? (124: over 10 s)"
grep -q 'reserved now  *40.0 MiB' <<<"$out" && ok || no "streams.csv (4 KiB): $(grep 'reserved now' <<<"$out")"

# Bad input: FILE:LINE: message, exit 2, one line.
check_bad() { # name, content, expected text
    printf '%b' "$2" > "$tmp/$1.csv"
    msg=$("$report" "$tmp/$1.csv" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <<<"$msg")" -eq 1 ] && grep -q "^$tmp/$1.csv:[0-9]*: .*$3" <<<"$msg"; then ok
    else no "$1: rc=$rc msg='$msg' (wanted '$3')"; fi
}
H='Thread,Time,Action,Pointer,Size,Stream\n'
check_bad header 'Thread,Time\n1,0,allocate,0x1,10,0x0\n' 'header'
check_bad action "${H}1,0,allocate,0x1,10,0x0\n1,1,reallocate,0x1,10,0x0\n" 'action'
check_bad size "${H}1,0,allocate,0x1,ten,0x0\n" 'Size'
check_bad unknown "${H}1,0,free,0x5,10,0x0\n" 'not live'
check_bad empty "" 'empty'
# A file that is no CSV at all is named as what it is, in one line (not "bad header").
printf '\x00\x01\x02PNG\n' >"$tmp/binary.csv"
msg=$("$report" "$tmp/binary.csv" 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <<<"$msg")" -eq 1 ] && grep -q "binary.csv: neither a CSV trace nor a PyTorch snapshot: binary content" <<<"$msg" && ok ||
    no "binary: rc=$rc '$msg'"
printf '# Notes\n\nSome text.\n' >"$tmp/notes.md"
msg=$("$report" "$tmp/notes.md" 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <<<"$msg")" -eq 1 ] && grep -q "notes.md: neither a CSV trace nor a PyTorch snapshot: text whose first line has no comma" <<<"$msg" && ok ||
    no "markdown: rc=$rc '$msg'"
msg=$("$report" "$tmp/missing.csv" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "missing.csv:0: cannot open" <<<"$msg" && ok || no "missing file: rc=$rc '$msg'"
msg=$("$report" --capacity lots "$tmp/leak.csv" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "bad --capacity" <<<"$msg" && ok || no "bad --capacity: rc=$rc '$msg'"
msg=$("$report" 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <<<"$msg")" -eq 1 ] && grep -q "no input.*(see --help)" <<<"$msg" && ok || no "no file: rc=$rc '$msg'"
# A misspelled option: one line and a pointer to --help, not the whole usage.
msg=$("$report" --jsn out.json "$tmp/leak.csv" 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <<<"$msg")" -eq 1 ] && grep -q "unknown option '--jsn' (see --help)" <<<"$msg" && ok ||
    no "misspelled option: rc=$rc '$msg'"
msg=$("$report" "$tmp/leak.csv" --json "$tmp/no/such/dir/r.json" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "cudalloc-report: " <<<"$msg" && ok || no "unwritable output: rc=$rc '$msg'"

# A bad row in the middle stays an error, also when a cut last line follows.
check_bad middle "${H}1,0,allocate,0x1,10,0x0\n1,1,allocate,0x2\n1,2,free,0x1,10,0x0\n1,3,allo" 'expected 6 fields, found 4'

# A recorded failure without --capacity: judged on the request against what
# was free and cached, never against an unlimited device; with --capacity,
# against the device. A 5 GiB request after 2 MiB freed is not "in pieces".
printf "${H}1,0,allocate,0x1,2097152,0x0\n1,1,free,0x1,2097152,0x0\n1,2,allocate failure,0x0,5368709120,0x0\n" > "$tmp/fail.csv"
out=$("$report" "$tmp/fail.csv" --json "$tmp/fail.json" --html "$tmp/fail.html" --txt -) || no "fail.csv exited $?"
grep -q '^VERDICT: OUT OF MEMORY (1 failed allocation), the last at iteration 0 asking 5.00 GiB: the memory is not there' <<<"$out" \
    && ok || no "failure without capacity: $(head -1 <<<"$out")"
grep -q '  device: its size and free memory were not recorded (--capacity gives the size)' <<<"$out" && ok || no "device line: $out"
grep -q 'EiB' <<<"$out" && no "an unlimited device shown: $out" || ok
grep -q 'size and free memory not recorded' "$tmp/fail.html" && ok || no "html: device not recorded"
python3 - "$tmp/fail.json" <<'PY' && ok || no "failure without capacity: JSON"
import json, sys
o = json.load(open(sys.argv[1]))['ooms'][0]
assert o['device_total_bytes'] is None and o['device_free_bytes'] is None, o
assert o['verdict'] == 'not_there' and o['cached_free_bytes'] == 2 << 20 and not o['device_total_inferred'], o
PY
out=$("$report" "$tmp/fail.csv" --capacity 4GiB) || no "fail.csv --capacity exited $?"
grep -q '  device: 4.00 GiB free of 4.00 GiB' <<<"$out" || grep -q '  device: 3.99 GiB free of 4.00 GiB' <<<"$out" && ok || no "device with capacity: $(grep device: <<<"$out")"
# A request that the cache holds, in pieces: fragmented, known without the device.
printf "${H}1,0,allocate,0x1,1048576,0x0\n1,1,allocate,0x2,1048576,0x0\n1,2,allocate,0x3,1048576,0x0\n1,3,free,0x1,1048576,0x0\n1,4,free,0x3,1048576,0x0\n1,5,allocate failure,0x0,1572864,0x0\n" > "$tmp/pieces.csv"
out=$("$report" "$tmp/pieces.csv" --mode classic) || no "pieces.csv exited $?"
grep -q '  verdict: fragmented' <<<"$out" && ok || no "pieces: $(grep verdict: <<<"$out")"

# A log cut short by a killed writer: one warning naming its last line, the
# rows before it diagnosed (exit 0).
{ printf "$H"; for i in $(seq 1 30); do printf "1,%d,iteration,,%d,0x0\n1,%d,allocate,0x%x,1048576,0x0\n" $((3*i)) "$i" $((3*i+1)) "$i"; done
  printf '1,99,allocate,0x7f00,20'; } > "$tmp/cut.csv"
out=$("$report" "$tmp/cut.csv" 2>"$tmp/cut.err"); rc=$?
[ $rc = 0 ] && ok || no "cut log exited $rc"
[ "$(wc -l < "$tmp/cut.err")" = 1 ] && grep -q "^cudalloc-report: $tmp/cut.csv:62: warning: the last line is cut short .* (expected 6 fields, found 5): left out; the 60 rows before it are read$" "$tmp/cut.err" \
    && ok || no "cut log warning: $(cat "$tmp/cut.err")"
head -1 <<<"$out" | grep -q '^VERDICT: LEAK: allocations of 1.00 MiB (1048576 B) are kept: +1.00 MiB every iteration' && ok || no "cut log: $(head -1 <<<"$out")"

# A trace kept gzipped (trace.csv.gz) is read as the plain one: the same
# report; cut short, one line naming the file and what is wrong.
gzip -c "$tmp/cut.csv" > "$tmp/cut.csv.gz"
gz=$("$report" "$tmp/cut.csv.gz" 2>/dev/null | sed "s|cut.csv.gz|cut.csv|"); rc=${PIPESTATUS[0]}
[ $rc = 0 ] && [ "$gz" = "$out" ] && ok || no "gzipped trace: rc=$rc, $(diff <(echo "$out") <(echo "$gz") | head -3)"
head -c 200 "$tmp/cut.csv.gz" > "$tmp/short.csv.gz"
msg=$("$report" "$tmp/short.csv.gz" 2>&1); rc=$?
[ $rc = 2 ] && [ "$msg" = "$tmp/short.csv.gz:0: gzip: the compressed data is cut short (truncated)" ] && ok || no "cut gzip: rc=$rc '$msg'"

# Inside a shared object, the library's own frames are skipped at capture:
# the leak's first frame is the program's.
if [ -n "$probe" ]; then
    "$probe" "$tmp/probe" && ok || no "probe exited $?"
    python3 - "$tmp/probe.json" <<'PY' && ok || no "shared object: leak frames"
import json, sys
r = json.load(open(sys.argv[1]))
f = r['leaks'][0]['frames']
assert f[0]['function'] == 'user_code' and f[0]['file'].endswith('probe_main.c'), f[:3]
assert all('probe_lib' not in x['file'] and not x['function'].startswith('ca_') for x in f), f
PY
fi

bash "$here/html_chromium.sh" "$bin" && ok || no "html in chromium"

echo "report_system: $pass passed, $fail failed"
[ $fail -eq 0 ]
