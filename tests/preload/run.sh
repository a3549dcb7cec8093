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
expect double-free-warning "bad free of device pointer 0x[0-9a-f]*: not the start of a live allocation"
# A handful of allocations and no loop: one line of summary, with the figures.
expect exit-summary "cudalloc: NO ITERATIONS: a short program: 2 allocations (2 freed, 0 live), peak allocated 3.00 MiB, peak reserved 4.00 MiB; no loop, so no leak to judge."
lines=$(grep -c '^cudalloc: ' <<<"$out")
[ "$lines" -eq 2 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL short summary: $lines lines"; echo "$out"; }
! grep -q 'caching allocator' <<<"$out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL basic: caching warning"; }
run meminfo 0 -- "$bin/prog_runtime" meminfo
run oom 0 CUDALLOC_CONF=max_reserved:64MiB -- "$bin/prog_runtime" oom
expect oom-message "out of memory on device 0: requested 8.00 MiB"
expect oom-verdict "verdict: the memory is not there"
expect oom-advice "Gradient accumulation: run smaller micro-batches"
if [ $on_gpu = 0 ]; then # a full simulated device, without a cap
    run oom-device 0 CUDALLOC_SIM_MEMORY=64MiB -- "$bin/prog_runtime" oom
    expect oom-device-total "device total 64.00 MiB"
fi
if [ $on_gpu = 0 ]; then # sizes at their edges on a 64 MiB device: as CUDA (simgpu alone) answers
    for pre in "$lib" ""; do
        tag=$([ -n "$pre" ] && echo preload || echo baseline)
        run "sizes-runtime-$tag" 0 CUDALLOC_SIM_MEMORY=64MiB CUDALLOC_CONF=oom_message:false LD_PRELOAD="$pre" -- \
            "$bin/prog_runtime" sizes
        run "sizes-driver-$tag" 0 CUDALLOC_SIM_MEMORY=64MiB CUDALLOC_CONF=oom_message:false LD_PRELOAD="$pre" -- \
            "$bin/prog_driver" sizes
    done
    run sizes-classic 0 CUDALLOC_SIM_MEMORY=64MiB CUDALLOC_CONF=oom_message:false,expandable_segments:false -- \
        "$bin/prog_runtime" sizes
    run oom-huge 0 CUDALLOC_SIM_MEMORY=64MiB -- "$bin/prog_runtime" oom-huge
    expect oom-huge-figures "requested 16.00 EiB"
    expect oom-huge-device "device total 64.00 MiB, device free 64.00 MiB; allocated 0 B, reserved 0 B"
    expect oom-huge-verdict "verdict: the memory is not there: the request is larger than the device"
    expect oom-huge-pitch "4096 x 18014398509481983 x 1 bytes (rows of 4096 rounded up to 512) is more than 2^64 - 1"
    expect oom-huge-summary "peak allocated 1.00 MiB, peak reserved 2.00 MiB"
fi
run threads 0 -- "$bin/prog_runtime" threads
run late-events 0 CUDALLOC_SIM_LATE_EVENTS=4 -- "$bin/prog_runtime" late-events
run fork 0 -- "$bin/prog_runtime" fork
run classic 0 CUDALLOC_CONF=expandable_segments:false -- "$bin/prog_runtime" threads
run driver-direct 0 -- "$bin/prog_driver" direct
run static-route 0 -- "$bin/prog_driver" static-route
run dlsym-next 0 -- "$bin/prog_driver" dlsym-next
# dlsym/dlvsym answer as glibc's (TLS, versions, SysV hash, dlerror): the same
# program with the preload and without.
run dl-preload 0 -- "$bin/prog_dl"
run dl-baseline 0 LD_PRELOAD= -- "$bin/prog_dl"

# Plain frees keep cudaFree's promise without its device-wide wait (prog_free.c).
run free-side-stream 0 -- "$bin/prog_free" side-stream
[ $on_gpu = 0 ] && run free-side-stream-per-stream 0 CUDALLOC_SIM_DRIVER_VERSION=12040 -- "$bin/prog_free" side-stream
run free-ordered 0 -- "$bin/prog_free" ordered
run free-lazy 0 -- "$bin/prog_free" lazy
[ $on_gpu = 0 ] && run free-lazy-per-stream 0 CUDALLOC_SIM_DRIVER_VERSION=12040 -- "$bin/prog_free" lazy
run free-lazy-destroyed 0 -- "$bin/prog_free" lazy-destroyed
[ $on_gpu = 0 ] && run free-lazy-destroyed-per-stream 0 CUDALLOC_SIM_DRIVER_VERSION=12040 -- "$bin/prog_free" lazy-destroyed
run free-sync 0 CUDALLOC_CONF=sync_free:true CUDALLOC_SIM_DEVICES=2 -- "$bin/prog_free" sync-free
run free-memory-short 0 CUDALLOC_SIM_MEMORY=64MiB -- "$bin/prog_free" memory-short
for kind in true false; do for fences in true false; do
    [ $on_gpu = 0 ] && run free-held-wait-$kind-$fences 0 CUDALLOC_SIM_MEMORY=64MiB \
        CUDALLOC_CONF=expandable_segments:$kind,context_fences:$fences -- "$bin/prog_free" held-wait
done; done
if [ $on_gpu = 0 ]; then # a wait that ran held work nobody released: said at exit
    run free-held-wait-unreleased 0 CUDALLOC_SIM_MEMORY=64MiB -- "$bin/prog_free" held-wait-unreleased
    expect free-held-wait-unreleased "simgpu: a synchronize waited for work held on stream .* never released"
    run free-held-wait-released 0 CUDALLOC_SIM_MEMORY=64MiB -- "$bin/prog_free" held-wait
    ! grep -q "never released" <<<"$out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL free-held-wait-released: $out"; }
fi
if grep -q "out of memory" <<<"$out"; then fail=$((fail + 1)); echo "FAIL free-memory-short: an OOM"; else pass=$((pass + 1)); fi
run free-stream-routes 0 -- "$bin/prog_free" stream-routes
run free-ptds 0 -- "$bin/prog_free" ptds
run free-cross-device 0 CUDALLOC_SIM_DEVICES=2 -- "$bin/prog_free" cross-device
run free-reset 0 -- "$bin/prog_free" reset
run free-exit-pending 0 -- timeout 20 "$bin/prog_free" exit-pending
# A real driver's rules (prog_rules.c, issue 32): fences cover a second context's streams.
# (on a GPU too: scripts/gpu-check-rules.sh; a timeout turns a wait CUDA does not make into a failure)
run rules-second-context 0 -- timeout 60 "$bin/prog_rules" second-context
[ $on_gpu = 0 ] && run rules-second-context-per-stream 0 CUDALLOC_SIM_DRIVER_VERSION=12040 -- "$bin/prog_rules" second-context
run rules-green-context 0 -- timeout 60 "$bin/prog_rules" green-context
# cuGetProcAddress's answers are swapped by symbol, version and flags: simgpu hands out thunks.
run rules-entry-points 0 -- "$bin/prog_rules" entry-points
# No waits CUDA does not make: a destroyed stream waiting for a flag, a new stream setting one.
run rules-wait-destroyed 0 -- timeout 60 "$bin/prog_rules" wait-destroyed
run rules-wait-created 0 -- timeout 60 "$bin/prog_rules" wait-created
# The primary context is gone when the driver says so, not when the retains seen are released.
run rules-retained 0 -- "$bin/prog_rules" retained
run rules-retained-classic 0 CUDALLOC_CONF=expandable_segments:false -- "$bin/prog_rules" retained
# A wait for a fence sleeps: no core spun (events made with CU_EVENT_BLOCKING_SYNC).
run rules-no-spin 0 CUDALLOC_SIM_MEMORY=64MiB -- "$bin/prog_rules" no-spin
# One refusal of the GPUDirect RDMA flag drops that flag, not IPC.
[ $on_gpu = 0 ] && run rules-rdma-refused 0 CUDALLOC_SIM_FAIL=cuMemCreate:CUDA_ERROR_INVALID_VALUE:0:1 -- \
    "$bin/prog_rules" rdma-refused
# The recommended granularity is a hint: the granule is a multiple of the minimum.
[ $on_gpu = 0 ] && run rules-granule 0 CUDALLOC_SIM_GRANULARITY=4MiB,6MiB -- "$bin/prog_rules" granule
# A destroyed stream's handle is never given to the driver by cudalloc.
run rules-dead-stream 0 -- "$bin/prog_rules" dead-stream
# Peer access granted per range of contiguous mappings.
[ $on_gpu = 0 ] && run rules-peer-ranges 0 CUDALLOC_SIM_DEVICES=2 -- "$bin/prog_rules" peer-ranges
# A child forked after CUDA's initialization gets the driver's own error (CUDALLOC_SIM_FORK=real: as a GPU does).
[ $on_gpu = 0 ] && run rules-fork-child 0 CUDALLOC_SIM_FORK=real -- "$bin/prog_rules" fork-child
# Mapping and unmapping during a global capture (synchronous calls) leave the capture valid.
run rules-vmm-capture 0 -- "$bin/prog_rules" vmm-capture
run rules-no-spin-per-stream 0 CUDALLOC_SIM_MEMORY=64MiB CUDALLOC_SIM_DRIVER_VERSION=12040 -- "$bin/prog_rules" no-spin
# Stream capture (prog_capture.c): each program prints what every call answered;
# under the preload it must print what it prints without it (on the simulated
# device alone, or the real driver alone on a GPU).
for mode in unsafe relaxed other-thread graph-alloc fences-blocking fences-query streams; do
    base=$(env LD_LIBRARY_PATH="$libpath" CUDALLOC_SIM_LATE_EVENTS=1 "$bin/prog_capture" $mode 2>&1)
    run "capture-$mode" 0 CUDALLOC_SIM_LATE_EVENTS=1 CUDALLOC_CONF=summary:false -- "$bin/prog_capture" $mode
    if [ "$out" = "$base" ]; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL capture-$mode: answers differ from the device alone (< alone, > preload)"
        diff <(echo "$base") <(echo "$out") | sed 's/^/    /'; fi
done
# The graph's allocations are the driver's, and the reports still count them (2 graph + 4 eager).
cdir=$(mktemp -d)
run capture-reports 0 CUDALLOC_REPORT="$cdir/r" CUDALLOC_CONF=summary:false -- "$bin/prog_capture" graph-alloc
if [ "$(grep -c ',allocate,.*,1048576,' "$cdir/r.csv")" = 6 ] && [ "$(grep -c ',free,.*,1048576,' "$cdir/r.csv")" = 6 ]; then
    pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL capture-reports: graph allocations not in the trace"; fi
rm -rf "$cdir"
run capture-torch-hint 0 PYTORCH_NO_CUDA_MEMORY_CACHING=1 CUDALLOC_CONF=summary:false -- "$bin/prog_capture" unsafe
expect capture-torch-hint "cudalloc: a CUDA graph capture began, and PYTORCH_NO_CUDA_MEMORY_CACHING=1 makes PyTorch allocate"
# Errors are what they say (prog_faults.c), with simgpu's injected errors.
if [ $on_gpu = 0 ]; then
    run faults-query 0 CUDALLOC_SIM_FAIL=cuEventQuery:CUDA_ERROR_INVALID_HANDLE:0:6 -- "$bin/prog_faults" query-error
    run faults-record 0 CUDALLOC_SIM_DRIVER_VERSION=12040 \
        CUDALLOC_SIM_FAIL=cuEventRecord:CUDA_ERROR_INVALID_HANDLE:1:1,cuCtxSynchronize:CUDA_ERROR_UNKNOWN:0:1 -- \
        "$bin/prog_faults" record-error
    run faults-sync 0 CUDALLOC_SIM_FAIL=cuStreamSynchronize:CUDA_ERROR_UNKNOWN:0:1,cuEventSynchronize:CUDA_ERROR_UNKNOWN:0:1,cuCtxSynchronize:CUDA_ERROR_UNKNOWN:0:1 \
        -- "$bin/prog_faults" sync-error
    run faults-push 0 CUDALLOC_SIM_DEVICES=2 CUDALLOC_SIM_FAIL=cuCtxPushCurrent:CUDA_ERROR_INVALID_CONTEXT:0:1 -- \
        "$bin/prog_faults" push-error
    run faults-sticky 0 CUDALLOC_SIM_FAIL=cuEventQuery:CUDA_ERROR_ILLEGAL_ADDRESS -- timeout 20 "$bin/prog_faults" sticky
fi
# Reserved memory that follows need (prog_remap.c): moves, busy granules, give-back.
run remap-moves 0 -- "$bin/prog_remap" moves
run remap-busy 0 -- "$bin/prog_remap" busy
run remap-give-back 0 CUDALLOC_CONF=release_after:100 -- "$bin/prog_remap" give-back
run remap-keep 0 CUDALLOC_CONF=release_after:0 -- "$bin/prog_remap" keep
# Long-running programs (prog_streams.c): streams and threads that come and go,
# a destroyed stream's queued work, caps under concurrency, non-streams.
# Pools of their own (share_bytes:0) end and give all back; with the shared
# pool (allocator/share.c) its cache stays, as much at 1,200 streams as at 300.
for n in 300 1200; do
    run "streams-churn-$n" 0 -- "$bin/prog_streams" stream-churn $n 12
    if grep -q "out of memory" <<<"$out"; then fail=$((fail + 1)); echo "FAIL streams-churn: an OOM"; else pass=$((pass + 1)); fi
done
run streams-churn-own 0 CUDALLOC_CONF=share_bytes:0 -- "$bin/prog_streams" stream-churn
run threads-churn 0 -- "$bin/prog_streams" thread-churn 1100 6
run threads-churn-own 0 CUDALLOC_CONF=share_bytes:0 -- "$bin/prog_streams" thread-churn
run streams-live 0 CUDALLOC_SIM_MEMORY=141GiB -- "$bin/prog_streams" live-streams # on a GPU: its own size
run streams-shared-small 0 -- "$bin/prog_streams" shared-small
run streams-own-small 1 CUDALLOC_CONF=share_bytes:0 CUDALLOC_SIM_MEMORY=64GiB -- "$bin/prog_streams" shared-small
expect streams-own-small-reserve "4000 streams of 4 KiB reserve 8388608000 bytes, wanted 8 granules"
for conf in expandable_segments:true expandable_segments:false; do
    run "streams-cap-$conf" 0 CUDALLOC_CONF=max_reserved:100MiB,oom_message:false,$conf -- "$bin/prog_streams" cap-threads 100
done
run streams-meminfo-cap 0 CUDALLOC_CONF=max_reserved:64MiB -- "$bin/prog_streams" meminfo-cap 64
if [ $on_gpu = 0 ]; then # held streams stand for queued work; bad handles are safe to pass only here
    for conf in expandable_segments:true expandable_segments:false; do
        run "streams-queued-empty-$conf" 0 CUDALLOC_CONF=$conf -- "$bin/prog_streams" queued-empty
        run "streams-queued-oom-$conf" 0 CUDALLOC_SIM_MEMORY=64MiB CUDALLOC_CONF=$conf -- "$bin/prog_streams" queued-oom
    done
    run streams-queued-sweep 0 CUDALLOC_CONF=release_after:50 -- "$bin/prog_streams" queued-sweep
    run streams-bad-handle 0 -- "$bin/prog_streams" bad-stream
    run streams-bad-handle-baseline 0 LD_PRELOAD= -- "$bin/prog_streams" bad-stream # what the driver alone answers
fi
run vmm-bench 0 -- "$bin/bench_vmm" 4 # what gpu-check.sh's VMM row runs: it runs
expect vmm-bench-move "vmm move [0-9]"
if command -v python3 >/dev/null; then # a PyTorch run's allocations, from Python (on a GPU too)
    run remap-torch 0 -- python3 tests/preload/replay_torch.py tests/data/torch/gpt_varying_big.csv
    expect remap-torch-figures "replay_torch: peak requested 126278964, peak reserved"
fi

# Several devices (prog_peer.c): peer access reaches cudalloc's mappings as it
# reaches cudaMalloc memory; the same program on the device alone passes too.
for mode in runtime driver reset; do
    run "peer-$mode" 0 CUDALLOC_SIM_DEVICES=2 -- "$bin/prog_peer" "$mode"
    [ $on_gpu = 1 ] || run "peer-$mode-baseline" 0 CUDALLOC_SIM_DEVICES=2 LD_PRELOAD= -- "$bin/prog_peer" "$mode"
done

# Several processes (prog_ipc.c): a block exported with cudaIpcGetMemHandle
# opens in another process as that block, in both segment kinds; the same
# program on the device alone passes too.
for mode in runtime driver; do
    run "ipc-$mode" 0 -- timeout 60 "$bin/prog_ipc" "$mode"
    run "ipc-$mode-classic" 0 CUDALLOC_CONF=expandable_segments:false -- timeout 60 "$bin/prog_ipc" "$mode"
    [ $on_gpu = 1 ] || run "ipc-$mode-baseline" 0 LD_PRELOAD= -- timeout 60 "$bin/prog_ipc" "$mode"
done
if [ $on_gpu = 0 ]; then
    # no shareable handles: CUDA's error and one line saying what to do
    run ipc-no-export 0 CUDALLOC_SIM_VMM=nofd -- "$bin/prog_ipc" no-export
    expect ipc-no-export-line "cudaIpcGetMemHandle(0x[0-9a-f]*): device 0's driver cannot share its virtual memory with another process (no POSIX file descriptor handles); run with CUDALLOC_CONF=expandable_segments:false"
    # no VMM at all: classic segments, said once; IPC works there too
    run no-vmm 0 CUDALLOC_SIM_VMM=0 -- timeout 60 "$bin/prog_ipc" runtime
    expect no-vmm-line "device 0 has no virtual memory management (as some vGPUs): classic segments there"
    run no-vmm-threads 0 CUDALLOC_SIM_VMM=0 -- "$bin/prog_runtime" threads
fi
# A stuck or hostile peer cannot hang or fool either side; forks, closes and
# peers (issue 31).
run ipc-hostile 0 -- timeout 60 "$bin/prog_ipc" hostile
expect ipc-hostile-said "did not answer within 5 s"
expect ipc-impostor-said "is held by another process or user: not used"
for mode in stuck-client other-user; do
    run "ipc-$mode" 0 -- timeout 60 "$bin/prog_ipc" "$mode"
done
if [ $on_gpu = 0 ]; then
    run ipc-fork-export 0 -- timeout 60 "$bin/prog_ipc" fork-export
    run ipc-close-held 0 -- timeout 60 "$bin/prog_ipc" close-held
    run ipc-peer-import 0 CUDALLOC_SIM_DEVICES=2 -- timeout 60 "$bin/prog_ipc" peer-import
fi

# A profiler and cudalloc share CUPTI (prog_profiler.c, the simulated
# device's CUPTI stand-in): the profiler gets its records and only them,
# cudalloc steps aside or stays out with one line; nothing deadlocks when
# CUPTI calls the driver back or fills a buffer inside cudalloc's own calls.
if [ $on_gpu = 0 ]; then
    for conf in expandable_segments:true expandable_segments:false; do
        run "profiler-later-$conf" 0 CUDALLOC_CONF=$conf -- timeout 30 "$bin/prog_profiler" later
        expect "profiler-steps-aside-$conf" "cudalloc: a profiler is using CUPTI: cudalloc steps aside"
        run "profiler-first-$conf" 0 CUDALLOC_CONF=$conf -- timeout 30 "$bin/prog_profiler" first
        expect "profiler-stays-out-$conf" "cudalloc: CUPTI is in use by another tool (a profiler?): cudalloc leaves it alone"
        run "profiler-segments-$conf" 0 CUDALLOC_CONF=$conf -- timeout 30 "$bin/prog_profiler" segments
    done
fi

# Contexts come and go (prog_contexts.c): what was allocated in a context
# goes with it, the next context allocates, events stay in their context.
for mode in destroy release streams; do
    run "contexts-$mode" 0 -- "$bin/prog_contexts" "$mode"
    run "contexts-$mode-classic" 0 CUDALLOC_CONF=expandable_segments:false -- "$bin/prog_contexts" "$mode"
    [ $on_gpu = 1 ] || run "contexts-$mode-baseline" 0 LD_PRELOAD= -- "$bin/prog_contexts" "$mode"
done

# A block is cudaMalloc memory to what NCCL and UCX ask before registering it
# (prog_registry.c): the same checks pass under the preload and without it;
# raw cuMem memory, as cudalloc lays it out, answers otherwise.
for mode in queries async reuse export; do
    run "registry-$mode" 0 -- timeout 60 "$bin/prog_registry" "$mode"
    run "registry-$mode-classic" 0 CUDALLOC_CONF=expandable_segments:false -- timeout 60 "$bin/prog_registry" "$mode"
    [ $on_gpu = 1 ] || run "registry-$mode-baseline" 0 LD_PRELOAD= -- timeout 60 "$bin/prog_registry" "$mode"
done
run registry-reuse-same-address 0 -- "$bin/prog_registry" reuse
expect registry-reuse-same-address-said "reuse: the same address"
run registry-vmm-differs 0 LD_PRELOAD= -- "$bin/prog_registry" vmm
[ $on_gpu = 1 ] || run registry-nofd 0 CUDALLOC_SIM_VMM=nofd CUDALLOC_CONF=oom_message:false -- "$bin/prog_registry" nofd
# Allocators beside cudalloc get its cache when the driver has too little (prog_beside.c).
if [ $on_gpu = 0 ]; then
    run beside 0 CUDALLOC_SIM_MEMORY=1GiB -- "$bin/prog_beside"
    expect beside-said "ran out of memory: cudalloc gave its cache back"
    run beside-baseline 0 CUDALLOC_SIM_MEMORY=1GiB LD_PRELOAD= -- "$bin/prog_beside"
fi

# cudaGetLastError sees the errors cudalloc answers itself (prog_errors.c).
if [ $on_gpu = 0 ]; then
    run last-error 0 CUDALLOC_SIM_MEMORY=64MiB CUDALLOC_CONF=oom_message:false -- "$bin/prog_errors"
    run last-error-baseline 0 CUDALLOC_SIM_MEMORY=64MiB LD_PRELOAD= -- "$bin/prog_errors"
fi

# PyTorch's pluggable-allocator contract (torch_contract.cc, PyTorch's side
# stood in for): out of memory raises torch.OutOfMemoryError, also from a
# worker thread; record_stream orders the free; empty_cache gives memory back.
if [ $on_gpu = 0 ] && [ -x "$bin/torch_contract" ]; then
    for mode in oom threads no-torch streams; do
        run "torch-$mode" 0 CUDALLOC_SIM_MEMORY=64MiB CUDALLOC_CONF=summary:false,oom_message:false LD_PRELOAD= -- \
            "$bin/torch_contract" "$lib" "$mode"
    done
fi

run nvtx 0 NVTX_INJECTION64_PATH="$lib" -- "$bin/prog_nvtx"
run nvtx-other-name 1 NVTX_INJECTION64_PATH="$lib" CUDALLOC_CONF=nvtx_range:iteration -- "$bin/prog_nvtx"

# Reports: at exit (every file, mode 0600, JSON with its keys), on SIGUSR1 and
# on cudalloc_report(); an unwritable path is one warning and the program goes on.
rdir=$(mktemp -d); trap 'umount "$rdir/full" 2>/dev/null; rm -rf "$rdir"' EXIT
run reports-exit 0 CUDALLOC_REPORT="$rdir/exit" -- "$bin/prog_runtime" basic
for ext in txt json html pickle csv; do
    if [ "$(stat -c %a "$rdir/exit.$ext" 2>/dev/null)" = 600 ]; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL reports-exit: $rdir/exit.$ext missing or not mode 600"; fi
done
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [d[k] for k in ("iterations","leaks","fragmentation","ooms","stats")]' "$rdir/exit.json"; then
    pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL reports-exit: JSON keys"; fi
# Classic segments (expandable_segments:false) are each one cudaMalloc of the
# driver's: the reports keep them apart however the driver placed them (a 20
# MiB large-pool segment ending where a small one began was joined with it).
if [ $on_gpu = 0 ]; then
    run classic-apart 0 CUDALLOC_REPORT="$rdir/classic" CUDALLOC_CONF=expandable_segments:false -- python3 -c '
import ctypes
rt = ctypes.CDLL("libcudart.so.13")
for n in (1 << 20, 1 << 20, 1 << 20, 3 << 20):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) == 0'
    if python3 -c '
import json, pickle, sys
segs = json.load(open(sys.argv[1] + ".json"))["fragmentation"]["segments"]
kinds = sorted((s["pool"], s["reserved_bytes"]) for s in segs)
viz = sorted((s["segment_type"], s["total_size"]) for s in pickle.load(open(sys.argv[1] + ".pickle", "rb"))["segments"])
assert kinds == [("large", 20 << 20), ("small", 2 << 20), ("small", 2 << 20)], kinds
assert viz == [("large", 20 << 20), ("small", 2 << 20), ("small", 2 << 20)], viz' "$rdir/classic"; then
        pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL classic-apart: segments joined or mislabelled"; fi
fi
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
conf = st['cudalloc']  # cudalloc's settings in force; PYTORCH_CUDA_ALLOC_CONF is CUDALLOC_CONF as set
assert st['expandable_segments'] is exp and conf['expandable_segments'] is exp, st
for kv in sys.argv[4:]:
    k, v = kv.split(':', 1)
    assert str(conf.get(k)) == v, (kv, conf)
assert all(g['segment_pool_id'] == (0, 0) for g in s['segments']), s['segments'][:1]
# PyTorch's actions: expandable segments are mapped, classic ones allocated whole.
act = 'segment_map' if exp else 'segment_alloc'
maps = [e for e in s['device_traces'][0] if e['action'] == act]
assert maps and all(e['frames'] and e['frames'][0]['name'] == sys.argv[2] for e in maps), [e['frames'][:2] for e in maps]
PY
}
snapshot_check snapshot-default "$rdir/exit.pickle" basic True
run reports-conf 0 CUDALLOC_REPORT="$rdir/conf" CUDALLOC_CONF=expandable_segments:false,max_reserved:1GiB,sync_free:true -- "$bin/prog_runtime" threads
snapshot_check snapshot-conf "$rdir/conf.pickle" work False max_reserved:1073741824 sync_free:True
run reports-on-demand 0 CUDALLOC_REPORT="$rdir/demand" -- "$bin/prog_runtime" reports
# A SIGUSR1 before the first allocation does not kill the program (issue 20).
run reports-signal-first 0 CUDALLOC_REPORT="$rdir/early" -- "$bin/prog_runtime" signal-first
# Every allocation failed: the summary says so all the same.
run all-fail 0 CUDALLOC_CONF=oom_message:false -- "$bin/prog_runtime" all-fail
expect all-fail-summary "cudalloc: .*3 allocations* failed\|cudalloc: OUT OF MEMORY"
run reports-unwritable 0 CUDALLOC_REPORT=/nonexistent/dir/r -- "$bin/prog_runtime" basic
expect reports-unwritable-warning "cannot write report"
# A symlink at a report's name is replaced, never followed; 0600 even under umask 000.
echo precious >"$rdir/victim"
ln -s "$rdir/victim" "$rdir/sym.txt"
old_umask=$(umask); umask 000
run reports-symlink 0 CUDALLOC_REPORT="$rdir/sym" -- "$bin/prog_runtime" basic
umask "$old_umask"
if [ "$(cat "$rdir/victim")" = precious ] && [ ! -L "$rdir/sym.txt" ] && [ "$(stat -c %a "$rdir/sym.txt")" = 600 ] &&
    [ "$(stat -c %a "$rdir/sym.json")" = 600 ]; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL reports-symlink: victim changed, link followed, or not 0600"; fi
# A full disk (a small tmpfs, when we may mount one) loses the reports, not the
# program and not the previous reports: one warning, exit 0, no temporary left.
full=$rdir/full; mkdir "$full"
if [ $on_gpu = 0 ] && mount -t tmpfs -o size=128k tmpfs "$full" 2>/dev/null; then
    run full-disk-before 0 CUDALLOC_REPORT="$full/r" -- "$bin/prog_runtime" basic
    before=$(cd "$full" && md5sum r.*)
    head -c 1M /dev/zero >"$full/filler" 2>/dev/null
    run full-disk 0 CUDALLOC_REPORT="$full/r" -- "$bin/prog_runtime" basic
    expect full-disk-warning "warning: report $full/r not written (cannot write report '$full/r.txt': the file system of '$full' is full"
    if [ "$(grep -c 'not written' <<<"$out")" = 1 ] && [ "$(cd "$full" && md5sum r.*)" = "$before" ] &&
        [ -z "$(find "$full" -name '*.tmp')" ]; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL full-disk: not one warning, previous reports changed, or a temporary left"; fi
    umount "$full"
else
    echo "preload: full-disk check skipped (cannot mount a tmpfs here; tests/reports/test_fileout covers ulimit -f)"
fi

# A typo in the configuration stops the program at start, naming the key.
run bad-key 2 CUDALLOC_CONF=expandable_segment:true -- "$bin/prog_runtime" basic
expect bad-key-message "unknown key 'expandable_segment': accepted: expandable_segments"
run bad-value 2 CUDALLOC_CONF=max_reserved:lots -- "$bin/prog_runtime" basic
expect bad-value-message "bad value 'lots' for max_reserved"

# Leak verdicts on real call stacks: varying shapes with per-shape caches are
# healthy (their growth a note), a 1 MiB tensor kept per step on a 100 MiB
# working set is a leak named with its caller, and the cache is still a note.
run shapes 0 -- "$bin/prog_loop" shapes
expect shapes-healthy "cudalloc: HEALTHY: no leak over 60 iterations (explicit);.* Note: slow growth of +[0-9.]* KiB per iteration"
expect shapes-note "note: slow growth, not a leak: .* called from indices_for"
run shapes-leak 0 -- "$bin/prog_loop" shapes-leak
expect shapes-leak "cudalloc: LEAK: allocations from dev_alloc (.*prog_loop.c:[0-9]*) called from keep_history (.*prog_loop.c:[0-9]*) are kept: +1.00 MiB every iteration"
expect shapes-leak-note "note: slow growth, not a leak: .* called from indices_for"

# The launcher: preloads, picks the simulated device, passes the exit status.
if [ $on_gpu = 0 ]; then
    out=$("$build/bin/cudalloc" run --sim 1GiB -- "$bin/prog_runtime" basic 2>&1); rc=$?
    [ $rc -eq 0 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL launcher: $rc"; echo "$out"; }
    expect launcher-sim "running on the simulated device (1GiB)"
fi
out=$("$build/bin/cudalloc" run -- sh -c 'exit 7' 2>&1); rc=$?
[ $rc -eq 7 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL launcher exit status: $rc"; }

# Python programs get PYTORCH_NO_CUDA_MEMORY_CACHING=1 (one line says so)
# unless it is set; others are left alone.
launch() { out=$("$build/bin/cudalloc" run "$@" 2>&1); }
py_line="cudalloc: a Python program: PYTORCH_NO_CUDA_MEMORY_CACHING=1"
if command -v python3 >/dev/null; then
    launch -- python3 -c 'import os; print("caching=" + os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "unset"))'
    expect launcher-python "caching=1"
    expect launcher-python-line "$py_line"
    out=$(PYTORCH_NO_CUDA_MEMORY_CACHING=0 "$build/bin/cudalloc" run -- python3 -c 'import os; print("caching=" + os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"])' 2>&1)
    expect launcher-user-choice "caching=0"
    ! grep -q "$py_line" <<<"$out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL launcher: line despite the user's setting"; }
    printf '#!/usr/bin/env python3\nimport os\nprint("caching=" + os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "unset"))\n' > "$rdir/torchrun_like"
    chmod +x "$rdir/torchrun_like"
    launch -- "$rdir/torchrun_like"
    expect launcher-shebang "caching=1"
    if [ $on_gpu = 0 ]; then
        # A caching allocator on top (ctypes, allocating as PyTorch's does): warned.
        launch -- python3 tests/preload/caching_like_torch.py
        expect caching-segments "segments: 6 PYTORCH_NO_CUDA_MEMORY_CACHING=1"
        expect caching-warning "cudalloc: warning: these allocations look like a caching allocator's segments (6 allocations"
    fi
fi
launch -- sh -c 'echo "caching=${PYTORCH_NO_CUDA_MEMORY_CACHING:-unset}"'
expect launcher-not-python "caching=unset"
! grep -q "$py_line" <<<"$out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL launcher: python line for sh"; }

# The launcher's edges (issue 20): options checked at start; a tree under a
# directory with a blank still preloads; a sanitizer runtime goes first; an
# existing NVTX injection (Nsight's) is kept, and said so.
for bad in "--sim 1" "--sim=1" "--report $rdir/dir/" "--report $rdir/r%q" "--sim 1GiB --sim=2GiB"; do
    out=$("$build/bin/cudalloc" run $bad -- true 2>&1); rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <<<"$out")" = 1 ] && pass=$((pass + 1)) ||
        { fail=$((fail + 1)); echo "FAIL launcher refuses '$bad' in one line: rc=$rc $out"; }
done
if [ $on_gpu = 0 ]; then
    launch --sim=64MiB -- "$bin/prog_runtime" basic
    expect launcher-sim-equals "running on the simulated device (64MiB)"
    spaced="$rdir/a dir with blanks"
    mkdir -p "$spaced/bin" "$spaced/lib/cudalloc"
    cp "$build/bin/cudalloc" "$spaced/bin/" && cp -L "$build/lib/libcudalloc.so.0" "$spaced/lib/" &&
        cp -rL "$build/sim" "$spaced/lib/cudalloc/sim"
    out=$("$spaced/bin/cudalloc" run -- "$bin/prog_runtime" basic 2>&1); rc=$?
    [ $rc -eq 0 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL launcher under blanks: $rc"; }
    expect launcher-blanks-preloaded "cudalloc: NO ITERATIONS: a short program"
    ! grep -q "cannot be preloaded" <<<"$out" && pass=$((pass + 1)) ||
        { fail=$((fail + 1)); echo "FAIL launcher under blanks: ld.so split the path"; echo "$out"; }
    launch -- "$bin/asan_prog"
    expect launcher-asan "asan program: ok"
    expect launcher-asan-line "links libasan.so"
fi
out=$(NVTX_INJECTION64_PATH=/opt/nsight/libToolsInjection64.so "$build/bin/cudalloc" run -- \
      sh -c 'echo "nvtx=$NVTX_INJECTION64_PATH"' 2>&1)
expect launcher-nvtx-kept "nvtx=/opt/nsight/libToolsInjection64.so"
expect launcher-nvtx-said "NVTX_INJECTION64_PATH=/opt/nsight/libToolsInjection64.so is kept"

echo "preload: $pass passed, $fail failed"
[ $fail -eq 0 ]
