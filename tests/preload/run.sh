#!/usr/bin/env bash
# Whole-program tests of libcudalloc.so on the simulated device: real
# programs, built against the toolkit's headers, run under the preload.
set -u
build=${1:?usage: run.sh BUILD_DIR [gpu]}
# "gpu": the same programs against the real driver and cudart (scripts/gpu-check.sh)
on_gpu=$([ "${2:-}" = gpu ] && echo 1 || echo 0)
libpath=$([ $on_gpu = 1 ] && echo "${CUDA_HOME:-/usr/local/cuda}/lib64" || echo "$build/sim")
lib=$build/lib/libcudalloc.so
bin=$build/tests/preload
pass=0 fail=0
run() { # name, expected status, env assignments..., -- program args
    local name=$1 want=$2; shift 2
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
    out=$(env LD_LIBRARY_PATH="$libpath" LD_PRELOAD="$lib" "${envs[@]}" "$@" 2>&1); rc=$?
    if [ $rc -eq "$want" ]; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL $name: exit $rc, wanted $want"; echo "$out" | sed 's/^/    /'; fi
}
expect() { # name, text that the last output must contain
    if grep -q -- "$2" <<<"$out"; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL $1: output lacks '$2'"; echo "$out" | sed 's/^/    /'; fi
}

run basic 0 -- "$bin/prog_runtime" basic
expect basic-on-sim "simulated device checks on"
expect double-free-warning "double free of device pointer 0x"
expect exit-summary "iterations (none); peak allocated 3.00 MiB, peak reserved 4.00 MiB"
run meminfo 0 -- "$bin/prog_runtime" meminfo
run oom 0 CUDALLOC_CONF=max_reserved:64MiB -- "$bin/prog_runtime" oom
expect oom-message "out of memory on device 0: requested 8.00 MiB"
expect oom-verdict "verdict: the memory is not there"
expect oom-advice "Gradient accumulation: run smaller micro-batches"
if [ $on_gpu = 0 ]; then # a full simulated device, without a cap
    run oom-device 0 CUDALLOC_SIM_MEMORY=64MiB -- "$bin/prog_runtime" oom
    expect oom-device-total "device total 64.00 MiB"
fi
run threads 0 -- "$bin/prog_runtime" threads
run late-events 0 CUDALLOC_SIM_LATE_EVENTS=4 -- "$bin/prog_runtime" late-events
run fork 0 -- "$bin/prog_runtime" fork
run classic 0 CUDALLOC_CONF=expandable_segments:false -- "$bin/prog_runtime" threads
run driver-direct 0 -- "$bin/prog_driver" direct
run static-route 0 -- "$bin/prog_driver" static-route

run nvtx 0 NVTX_INJECTION64_PATH="$lib" -- "$bin/prog_nvtx"
run nvtx-other-name 1 NVTX_INJECTION64_PATH="$lib" CUDALLOC_CONF=nvtx_range:iteration -- "$bin/prog_nvtx"

# Reports: at exit (every file, mode 0600, JSON with its keys), on SIGUSR1 and
# on cudalloc_report(); an unwritable path is one warning and the program goes on.
rdir=$(mktemp -d); trap 'rm -rf "$rdir"' EXIT
run reports-exit 0 CUDALLOC_REPORT="$rdir/exit" -- "$bin/prog_runtime" basic
for ext in txt json html pickle csv; do
    if [ "$(stat -c %a "$rdir/exit.$ext" 2>/dev/null)" = 600 ]; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL reports-exit: $rdir/exit.$ext missing or not mode 600"; fi
done
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [d[k] for k in ("iterations","leaks","fragmentation","ooms","stats")]' "$rdir/exit.json"; then
    pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL reports-exit: JSON keys"; fi
# The trace keeps `iteration` rows unless asked for plain RMM CSV; both replay.
trainer=("$build/bin/demo_trainer" --layers 1 --channels 32 --heads 2 --seq 16 --batch 2 --steps 3 --device cpu)
if [ $on_gpu = 0 ] && [ -x "${trainer[0]}" ]; then
    run reports-csv-rows 0 CUDALLOC_REPORT="$rdir/rows" -- "${trainer[@]}"
    run reports-plain-csv 0 CUDALLOC_REPORT="$rdir/plain" CUDALLOC_CONF=trace_iterations:false -- "${trainer[@]}"
    if grep -q ',iteration,' "$rdir/rows.csv" && ! grep -q ',iteration,' "$rdir/plain.csv" &&
        "$build/bin/cudalloc-replay" --runs 1 "$rdir/rows.csv" "$rdir/plain.csv" >/dev/null; then
        pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL trace_iterations: rows present/absent, both replay"; fi
fi
# The snapshot's settings are the ones in force, the segment maps carry the
# program's stack (libcudalloc.so's own frames are skipped at capture), every
# segment is in PyTorch's default pool (0, 0).
snapshot_check() { # name, pickle, mapping function, expandable (True|False), conf keys that must be there...
    local name=$1 pkl=$2 fn=$3 exp=$4; shift 4
    if python3 - "$pkl" "$fn" "$exp" "$@" <<'PY'; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $name"; fi
import pickle, sys
s = pickle.load(open(sys.argv[1], 'rb'))
st, exp = s['allocator_settings'], sys.argv[3] == 'True'
conf = dict(kv.split(':', 1) for kv in st['PYTORCH_CUDA_ALLOC_CONF'].split(','))
assert st['expandable_segments'] is exp and conf['expandable_segments'] == sys.argv[3], st
for kv in sys.argv[4:]:
    k, v = kv.split(':', 1)
    assert conf.get(k) == v, (kv, conf)
assert all(g['segment_pool_id'] == (0, 0) for g in s['segments']), s['segments'][:1]
maps = [e for e in s['device_traces'][0] if e['action'] == 'segment_map']
assert maps and all(e['frames'] and e['frames'][0]['name'] == sys.argv[2] for e in maps), [e['frames'][:2] for e in maps]
PY
}
snapshot_check snapshot-default "$rdir/exit.pickle" basic True
run reports-conf 0 CUDALLOC_REPORT="$rdir/conf" CUDALLOC_CONF=expandable_segments:false,max_reserved:1GiB,sync_free:true -- "$bin/prog_runtime" threads
snapshot_check snapshot-conf "$rdir/conf.pickle" work False max_reserved:1073741824 sync_free:True
run reports-on-demand 0 CUDALLOC_REPORT="$rdir/demand" -- "$bin/prog_runtime" reports
run reports-unwritable 0 CUDALLOC_REPORT=/nonexistent/dir/r -- "$bin/prog_runtime" basic
expect reports-unwritable-warning "cannot write report"

# A typo in the configuration stops the program at start, naming the key.
run bad-key 2 CUDALLOC_CONF=expandable_segment:true -- "$bin/prog_runtime" basic
expect bad-key-message "unknown key 'expandable_segment': accepted: expandable_segments"
run bad-value 2 CUDALLOC_CONF=max_reserved:lots -- "$bin/prog_runtime" basic
expect bad-value-message "bad value 'lots' for max_reserved"

# The launcher: preloads, picks the simulated device, passes the exit status.
if [ $on_gpu = 0 ]; then
    out=$("$build/bin/cudalloc" run --sim 1GiB -- "$bin/prog_runtime" basic 2>&1); rc=$?
    [ $rc -eq 0 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL launcher: $rc"; echo "$out"; }
    expect launcher-sim "running on the simulated device (1GiB)"
fi
out=$("$build/bin/cudalloc" run -- sh -c 'exit 7' 2>&1); rc=$?
[ $rc -eq 7 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL launcher exit status: $rc"; }

echo "preload: $pass passed, $fail failed"
[ $fail -eq 0 ]
