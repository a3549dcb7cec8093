#!/usr/bin/env bash
# While the job runs (preload/live.c), as its users meet it, on the simulated
# device: the planted leak of demo_trainer and a Python program warned of while
# they run (the iteration of the first warning), the near and stopped lines,
# on_leak:exit / on_oom:exit ending the run with their status after the reports,
# error_exitcode for CI, `cudalloc status` / `top` on a running trainer against
# its own figures and its exit summary, another user's process refused, and the
# metrics file as Prometheus text (promtool where installed, a parser here always).
#   usage: live.sh BUILD_DIR
set -u
build=${1:?usage: live.sh BUILD_DIR}
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$build" && pwd)
cudalloc=$build/bin/cudalloc trainer=$build/bin/demo_trainer
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/    /' <<<"$2" | head -60; }
has() { # name, text, pattern (grep -E)
    if grep -qE -- "$3" <<<"$2"; then ok; else bad "$1: lacks /$3/" "$2"; fi
}
count() { # name, text, pattern, expected count
    local n
    n=$(grep -cE -- "$3" <<<"$2")
    [ "$n" -eq "$4" ] && ok || bad "$1: /$3/ $n times, wanted $4" "$2"
}
model=(--device cpu --leak eval-grad --print-every 1)
title='a forward pass run under evaluate \(.*demo_trainer/train.c:[0-9]+\) is kept alive \(20 call sites\)'

# 1. The planted leak, said at iteration 4 (growth from iteration 1, sure after
# three growths), while the trainer runs: before its step 5 line; once more
# when the device is near its end; never a line per iteration.
out=$(CUDALLOC_SIM_MEMORY=256MiB "$cudalloc" run -- stdbuf -oL "$trainer" "${model[@]}" --steps 60 2>&1)
has "trainer: first warning" "$out" "^cudalloc: leak found at iteration 4 on device 0: \+5.27 MiB/iteration since iteration 1: $title; at this rate device 0 runs out at iteration 4[0-9], about [0-9:]+ [A-Z]+ \(in [0-9]+s\)$"
warn_line=$(grep -n '^cudalloc: leak found' <<<"$out" | cut -d: -f1 | head -1)
step5_line=$(grep -n '^step    5/60' <<<"$out" | cut -d: -f1)
[ -n "$warn_line" ] && [ -n "$step5_line" ] && [ "$warn_line" -lt "$step5_line" ] && ok ||
    bad "trainer: the warning came after step 5 (line $warn_line, step 5 at line $step5_line)" "$out"
count "trainer: one first warning" "$out" '^cudalloc: leak found' 1
count "trainer: one near warning" "$out" '^cudalloc: leak nearing out of memory at iteration 4[0-9] on device 0' 1
count "trainer: no other leak lines" "$out" '^cudalloc: leak (found|nearing|stopped)' 2
has "trainer: then it ran out" "$out" '^cudalloc: out of memory on device 0'
# on_leak:report: the reports at each warning (the first and the near one); warn with a
# report prefix: at the first only
out=$(CUDALLOC_SIM_MEMORY=256MiB "$cudalloc" run --conf on_leak:report --report "$tmp/each" -- "$trainer" "${model[@]}" --steps 60 2>&1)
count "on_leak:report: reports at each warning" "$out" "^cudalloc: reports written at iteration (4|4[0-9]) \\($tmp/each\\)$" 2
out=$(CUDALLOC_SIM_MEMORY=256MiB "$cudalloc" run --report "$tmp/first" -- "$trainer" "${model[@]}" --steps 60 2>&1)
count "on_leak:warn: reports at the first warning" "$out" "^cudalloc: reports written at iteration 4 \\($tmp/first\\)$" 1
count "on_leak:warn: reports at the first warning only" "$out" "^cudalloc: reports written at" 1

# 2. A Python program (ctypes on the simulated device): the warning at iteration
# 4 with Python frames, on_leak's dicts, the stop said once, memory_summary().
out=$(PYTHONPATH=$repo/python "$cudalloc" run --sim 256MiB -- python3 "$repo/tests/python/live_prog.py" 12 32 2>&1)
rc=$?
[ $rc -eq 0 ] && ok || bad "python: exit $rc" "$out"
has "python: warning" "$out" '^cudalloc: leak found at iteration 4 on device 0: \+1.00 MiB/iteration since iteration 1: allocations from alloc \(.*live_prog.py:[0-9]+\) called from keep_metric \(.*live_prog.py:[0-9]+\) are kept; at this rate device 0 runs out at iteration [0-9]+'
has "python: on_leak dict" "$out" '^event leak 4 allocations from alloc'
has "python: stopped, said" "$out" '^cudalloc: leak stopped growing at iteration 1[3-6] on device 0: allocations from alloc .* \([0-9.]+ MiB kept\)$'
count "python: stopped once" "$out" '^cudalloc: leak stopped' 1
has "python: stopped, on_leak" "$out" '^event stopped 1[3-6] '
has "python: summary" "$out" '^\| Allocated memory +\| +12.00 MiB \| +18.00 MiB \|$'
has "python: ok" "$out" '^live_prog: ok$'

# Without marks: iterations detected in the allocation pattern, judged by
# cudalloc's thread once a second; the leak is still told while the loop runs.
out=$(PYTHONPATH=$repo/python "$cudalloc" run --sim 256MiB -- python3 "$repo/tests/python/live_prog.py" 100 100 --detect 2>&1)
rc=$?
[ $rc -eq 0 ] && grep -q '^live_prog: ok (detected iterations)$' <<<"$out" && ok || bad "python, detected iterations: exit $rc" "$out"
has "python, detected: warning" "$out" '^cudalloc: leak found at iteration [0-9]+ on device 0: \+1.00 MiB/iteration since iteration [0-9]+: allocations from alloc \(.*live_prog.py'
has "python, detected: summary" "$out" '^cudalloc: [0-9]+ iterations \(detected\)'

# 3. on_leak:exit: the run ends at the first warning with exit_code's status,
# after the summary and the reports; the default status is 75 (EX_TEMPFAIL:
# a job runner restarts from the last checkpoint).
out=$(CUDALLOC_SIM_MEMORY=256MiB "$cudalloc" run --conf on_leak:exit --report "$tmp/exit" -- "$trainer" "${model[@]}" --steps 30 2>&1)
rc=$?
[ $rc -eq 75 ] && ok || bad "on_leak:exit: exit $rc, wanted 75" "$out"
has "on_leak:exit: said" "$out" '^cudalloc: on_leak:exit: writing the reports, then exit status 75$'
has "on_leak:exit: summary" "$out" '^cudalloc: 4 iterations \(explicit\)'
[ -s "$tmp/exit.txt" ] && [ -s "$tmp/exit.json" ] && grep -q '^VERDICT: LEAK' "$tmp/exit.txt" && ok ||
    bad "on_leak:exit: no reports" "$(ls "$tmp"; head -3 "$tmp/exit.txt" 2>&1)"
! grep -q '^step    5/30' <<<"$out" && ok || bad "on_leak:exit: the run went on" "$out"
out=$(CUDALLOC_SIM_MEMORY=256MiB "$cudalloc" run --conf on_leak:exit,exit_code:9,error_exitcode:5 --report "$tmp/nine" -- "$trainer" "${model[@]}" --steps 30 2>&1)
rc=$?
[ $rc -eq 9 ] && ok || bad "exit_code:9 (error_exitcode:5 does not override it): exit $rc" "$out"
# without a report prefix, exit writes them to cudalloc.PID.* in the working directory
out=$(cd "$tmp" && CUDALLOC_SIM_MEMORY=256MiB "$cudalloc" run --conf on_leak:exit -- "$trainer" "${model[@]}" --steps 30 2>&1)
ls "$tmp"/cudalloc.[0-9]*.txt >/dev/null 2>&1 && ok || bad "on_leak:exit without a prefix: no cudalloc.PID.txt" "$(ls "$tmp")"
# on_oom:exit: the OOM message and reports, then the status
out=$(CUDALLOC_SIM_MEMORY=64MiB "$cudalloc" run --conf on_oom:exit,exit_code:3 --report "$tmp/oom" -- "$trainer" "${model[@]}" --steps 30 2>&1)
rc=$?
[ $rc -eq 3 ] && ok || bad "on_oom:exit: exit $rc, wanted 3" "$out"
has "on_oom:exit: message first" "$out" '^cudalloc:   verdict: the memory is held by a leak'
grep -q '^VERDICT: OUT OF MEMORY' "$tmp/oom.txt" 2>/dev/null && ok || bad "on_oom:exit: no report" "$(head -3 "$tmp/oom.txt" 2>&1)"
# error_exitcode: a leak seen makes a run that ends well fail, as valgrind's --error-exitcode; a healthy one is left alone
CUDALLOC_SIM_MEMORY=256MiB "$cudalloc" run --conf error_exitcode:5,summary:false -- "$trainer" "${model[@]}" --steps 8 >/dev/null 2>&1
rc=$?
[ $rc -eq 5 ] && ok || bad "error_exitcode:5 on a leak: exit $rc"
CUDALLOC_SIM_MEMORY=256MiB "$cudalloc" run --conf error_exitcode:5,summary:false -- "$trainer" --device cpu --steps 8 >/dev/null 2>&1
rc=$?
[ $rc -eq 0 ] && ok || bad "error_exitcode:5 on a healthy run: exit $rc"
out=$(CUDALLOC_CONF=on_leak:stop "$cudalloc" run --sim 64MiB -- "$trainer" --device cpu --steps 1 2>&1)
rc=$?
[ $rc -eq 2 ] && grep -q "bad value 'stop' for on_leak: accepted: warn, report, exit" <<<"$out" && ok || bad "on_leak:stop refused: exit $rc" "$out"

# 4. cudalloc status and top on a running trainer (stopped with SIGSTOP so the
# figures hold still), against its own step line for the same iteration and,
# once it has ended, its exit summary; the reports were written at the first
# warning; the metrics file is there during the run.
# Its XDG_RUNTIME_DIR is one of ours: the file is there, and cudalloc status finds it
# by the process's own environment.
log=$tmp/run.log
mkdir -m 700 "$tmp/xdg"
XDG_RUNTIME_DIR=$tmp/xdg RANK=3 CUDALLOC_SIM_MEMORY=256MiB "$cudalloc" run --conf metrics:"$tmp/metrics.%r.prom",metrics_every:1 \
    --report "$tmp/live" -- "$trainer" "${model[@]}" --steps 30 >"$log" 2>&1 &
pid=$! # the launcher execs the trainer: the same process
json=
for _ in $(seq 100); do
    json=$("$cudalloc" status "$pid" --json 2>/dev/null) &&
        python3 -c 'import json,sys; sys.exit(json.loads(sys.argv[1])["devices"][0]["iteration"] < 8)' "$json" 2>/dev/null && break
    sleep 0.1
done
kill -STOP "$pid"
json=$("$cudalloc" status "$pid" --json 2>&1)
text=$("$cudalloc" status "$pid" 2>&1)
topout=$("$cudalloc" top -n 1 "$pid" 2>&1)
[ -s "$tmp/live.txt" ] && ok || bad "status: no reports written at the first warning (run stopped)" "$(ls "$tmp")"
[ "$(stat -c %a "$tmp/xdg/cudalloc" 2>&1) $(stat -c %a "$tmp/xdg/cudalloc/$pid.status" 2>&1)" = "700 600" ] && ok ||
    bad "status: not in \$XDG_RUNTIME_DIR/cudalloc/PID.status, 0700/0600" "$(ls -la "$tmp/xdg/cudalloc" 2>&1)"
[ -s "$tmp/metrics.3.prom" ] && ok || bad "metrics: no file during the run" "$(ls "$tmp")"
timeout 60 "$cudalloc" top "$pid" >"$tmp/top.out" 2>&1 & # until the trainer ends
top_pid=$!
kill -CONT "$pid"
wait $pid
rc=$?
[ $rc -eq 0 ] && ok || bad "status run: exit $rc" "$(cat "$log")"
wait $top_pid
rc=$?
[ $rc -eq 0 ] && [ "$(tail -1 "$tmp/top.out")" = "cudalloc top: process $pid has ended" ] && ok ||
    bad "top: did not end with the program (exit $rc)" "$(tail -5 "$tmp/top.out")"
has "status: text" "$text" '^device 0: iteration [0-9]+ \(explicit\)'
has "status: leak line" "$text" "^  leak 1: \+5.27 MiB/iteration since iteration 1: $title; runs out at iteration"
has "top: screen" "$topout" '^cudalloc top - [0-9:]+ - refreshed each second'
has "top: figures" "$topout" '^  reserved [0-9.]+ MiB, allocated'
python3 - "$json" "$log" <<'EOF' && ok || bad "status --json against the run's own figures" "$json"
import json, re, sys
s = json.loads(sys.argv[1])
log = open(sys.argv[2]).read()
d = s["devices"][0]
k = d["iteration"]
mib = lambda b: "%.2f MiB" % (b / 2**20)
step = re.search(r"^step +%d/30 .*\| peak alloc ([0-9.]+ MiB) \| peak reserved ([0-9.]+ MiB)" % k, log, re.M)
assert step, "no step %d line" % k
assert (mib(d["peak_allocated_bytes"]), mib(d["peak_reserved_bytes"])) == step.groups(), (d, step.groups())
assert d["reserved_bytes"] >= d["allocated_bytes"] and d["largest_free_block_bytes"] <= d["cached_free_bytes"], d
assert d["device_total_bytes"] == 256 << 20 and d["leaks"] == 1, d
f = d["findings"][0]
# the exit summary's finding: the same cause, rate and start
m = re.search(r"^cudalloc:   leak 1: \+([0-9.]+ MiB)/iteration since iteration ([0-9]+): (.*)$", log, re.M)
assert m, "no leak in the summary"
assert (mib(f["bytes_per_iteration"]), str(f["growth_since"]), f["title"]) == m.groups(), (f, m.groups())
# the trainer's own account of the leak: bytes per step
assert "+%d B per step" % f["bytes_per_iteration"] in log, f
# growth per iteration: the leak's, in a steady run
assert abs(d["growth_bytes_per_iteration"] - f["bytes_per_iteration"]) < 1, d
# and the projection the summary gives at the end, within an iteration of the live one
p = re.search(r"at this rate the device runs out at iteration ([0-9]+)", log)
assert p and abs(int(p.group(1)) - f["oom_iteration"]) <= 1, (p and p.group(1), f)
EOF
[ ! -e "$tmp/xdg/cudalloc/$pid.status" ] && ok || bad "status: the file outlived the program"
out=$("$cudalloc" status "$pid" 2>&1)
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && ok || bad "status of an ended process: exit $rc" "$out"

# A process of ours not under cudalloc, then one whose PID an earlier process's file names.
sleep 5 &
plain=$!
out=$("$cudalloc" status "$plain" 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q "^cudalloc: process $plain publishes no cudalloc figures" <<<"$out" && ok || bad "status of a plain process: exit $rc" "$out"
dir=$(tr '\0' '\n' </proc/$plain/environ | sed -n 's/^XDG_RUNTIME_DIR=//p') # where its preload would write
[ -n "$dir" ] && [ -d "$dir" ] && [ "$(stat -c %u "$dir")" = "$(id -u)" ] && dir=$dir/cudalloc || dir=/tmp/cudalloc-$(id -u)
mkdir -p -m 700 "$dir"
printf 'cudalloc-status 1\npid %s\nstart 1\nrank -1\ntime 0\nprogram old\ndevices 0\n' "$plain" >"$dir/$plain.status"
out=$("$cudalloc" status "$plain" 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q "was written by an earlier process $plain, not this one" <<<"$out" && ok || bad "status: a stale file taken: exit $rc" "$out"
rm -f "$dir/$plain.status"
kill $plain

# Another user's process: refused in one line.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    setpriv --reuid=65534 --regid=65534 --clear-groups sleep 5 &
    other=$!
    sleep 0.2
else
    other=1 other_is_init=1 # not root: init is another user's
fi
out=$("$cudalloc" status "$other" 2>&1)
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && grep -q "belongs to another user" <<<"$out" && ok ||
    bad "another user's process: exit $rc" "$out"
[ -z "${other_is_init:-}" ] && kill "$other" 2>/dev/null

# 5. The metrics file: Prometheus text, a sample per figure labelled device and rank.
prom=$tmp/metrics.3.prom
python3 - "$prom" <<'EOF' && ok || bad "metrics: not Prometheus text" "$(cat "$prom")"
import re, sys
name = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
sample = re.compile(r"^(%s)\{((?:%s=\"(?:[^\"\\\n]|\\.)*\",?)*)\} (\S+)$" % (name, name))
typed, helped, seen = {}, set(), {}
for line in open(sys.argv[1]).read().splitlines():
    if line.startswith("# HELP "):
        helped.add(line.split()[2])
    elif line.startswith("# TYPE "):
        _, _, n, t = line.split(" ", 3)
        assert t in ("counter", "gauge"), line
        assert n not in typed, "TYPE twice: " + line
        typed[n] = t
    else:
        m = sample.match(line)
        assert m, "not a sample: %r" % line
        assert m.group(1) in typed, "a sample before its TYPE: " + line
        float(m.group(3))
        labels = dict(re.findall(r'(%s)="([^"]*)"' % name, m.group(2)))
        assert labels == {"device": "0", "rank": "3"}, line
        seen[m.group(1)] = float(m.group(3))
assert set(typed) == helped == set(seen), (typed, helped, seen)
assert seen["cudalloc_reserved_bytes"] > 0 and seen["cudalloc_leaks"] == 1 and seen["cudalloc_iterations_total"] == 30, seen
assert seen["cudalloc_leak_bytes_per_iteration"] == 5529600, seen
EOF
if command -v promtool >/dev/null; then
    out=$(promtool check metrics <"$prom" 2>&1)
    [ $? -eq 0 ] && ok || bad "promtool check metrics" "$out"
fi

echo "live: $pass passed, $fail failed"
[ $fail -eq 0 ]
