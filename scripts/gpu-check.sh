#!/usr/bin/env bash
# On a machine with a GPU (an H200, sm_90): build, then check cudalloc against
# the real driver, and print one table of what it measured. Under 8 minutes;
# the first minute proves the build works there.
#   bash scripts/gpu-check.sh [OUT_DIR]
set -u
cd "$(dirname "$0")/.." || exit 1
out=${1:-build/gpu-check}
mkdir -p "$out"
cuda=${CUDA_HOME:-/usr/local/cuda}
export LD_LIBRARY_PATH="$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
t0=$(date +%s)
table=()
row() { table+=("$(printf '%-58s %s' "$1" "$2")"); echo "$1: $2"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
if ! make -j"$(nproc)" all > "$out/build.log" 2>&1; then
    tail -30 "$out/build.log"; echo "gpu-check: build failed"; exit 1
fi
row "build (sm_90)" "ok in $(( $(date +%s) - t0 )) s"

# 1. The whole-program tests, against the real driver and cudart.
bash tests/preload/run.sh build gpu > "$out/preload.log" 2>&1
row "whole-program tests on the real driver" "$(tail -1 "$out/preload.log")"

# Memory allocated past cudalloc (a pool used directly), seen through CUPTI.
LD_PRELOAD=build/lib/libcudalloc.so build/tests/preload/prog_runtime external > "$out/external.log" 2>&1
row "memory past cudalloc (CUPTI)" "$(grep -h 'outside cudalloc\|CUPTI' "$out/external.log" | head -1)"

# 2. A program built by plain nvcc: statically linked cudart (nvcc's default).
nvcc_prog="$out/nvcc_static"
cat > "$out/nvcc_static.cu" <<'CU'
#include <cstdio>
__global__ void fill(float *p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = i; }
int main() {
    float *p = nullptr, h = 0;
    if (cudaMalloc(&p, 1 << 24) != cudaSuccess) return 1;
    fill<<<(1 << 22) / 256, 256>>>(p, 1 << 22);
    if (cudaMemcpy(&h, p + 12345, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess || h != 12345.f) return 2;
    return cudaFree(p) == cudaSuccess ? 0 : 3;
}
CU
"$cuda/bin/nvcc" -arch=sm_90 -o "$nvcc_prog" "$out/nvcc_static.cu" &&
    LD_PRELOAD=build/lib/libcudalloc.so "$nvcc_prog" 2> "$out/nvcc_static.log"
rc=$?
grep -q "peak allocated 16.00 MiB" "$out/nvcc_static.log" && seen=yes || seen=no
row "nvcc static-cudart program under the preload" "exit $rc, allocation seen by cudalloc: $seen"
# The same program under an installed (staged) launcher: the real driver, not the simulated one.
make -s install DESTDIR="$out/stage" PREFIX=/opt/cudalloc > "$out/install.log" 2>&1 &&
    "$out/stage/opt/cudalloc/bin/cudalloc" run -- "$nvcc_prog" 2> "$out/installed.log"
rc=$?
row "installed launcher, nvcc program" "exit $rc, simulated: $(grep -c 'simulated device' "$out/installed.log"), $(grep -o 'peak allocated [0-9.]* MiB' "$out/installed.log")"

# 3. Latency per alloc+free pair: native, then under the preload.
build/tests/preload/bench_latency native > "$out/latency.txt" 2>&1
LD_PRELOAD=build/lib/libcudalloc.so CUDALLOC_CONF=summary:false build/tests/preload/bench_latency cudalloc >> "$out/latency.txt" 2>&1
while read -r label api size ns; do
    [ "$label" = cudalloc ] || continue
    native=$(awk -v a="$api" -v s="$size" '$1=="native" && $2==a && $3==s {print $4}' "$out/latency.txt")
    row "$api $size B: native / cudalloc (ns per pair)" \
        "$native / $ns ($(awk -v n="$native" -v c="$ns" 'BEGIN{printf "%.1fx", n/c}'))"
done < "$out/latency.txt"
# cudalloc's cached pair against cudaMallocAsync+cudaFreeAsync, same size
while read -r line; do row "${line%%:*}" "${line#*: }"; done < <(
    awk '$1=="native" && $2 ~ /Async/ {a[$3]=$4} $1=="cudalloc" && $2 ~ /^cudaMalloc\+/ {c[$3]=$4}
         END {for (s in c) printf "cached cudaMalloc+cudaFree %s B vs native async: %.1f vs %.1f ns\n", s, c[s], a[s]}' \
        "$out/latency.txt")

# What the driver charges per 2 MiB granule: created, moved (issue 11), given back.
build/tests/preload/bench_vmm 64 > "$out/vmm.txt" 2>&1
row "VMM per granule: create / move / give back (ns)" \
    "$(awk '$1=="vmm" && $2=="create" {c=$3} $2=="move" {m=$3} $2=="give-back" {g=$3} END {print c " / " m " / " g}' "$out/vmm.txt")"

# Stream capture (issue 22): each program answers under the preload what it answers alone.
pre=build/lib/libcudalloc.so
for mode in unsafe relaxed other-thread graph-alloc fences-blocking fences-query streams; do
    build/tests/preload/prog_capture $mode > "$out/capture_$mode.alone" 2>&1
    LD_PRELOAD=$pre CUDALLOC_CONF=summary:false build/tests/preload/prog_capture $mode > "$out/capture_$mode.preload" 2>&1
    cmp -s "$out/capture_$mode.alone" "$out/capture_$mode.preload" && same=yes || same=no
    row "capture $mode: same answers as the driver alone" "$same ($(tail -1 "$out/capture_$mode.preload"))"
done
# Plain cudaMalloc+cudaFree with 0, 8, 128 non-blocking streams: native, one
# cuCtxRecordEvent per fence, an event per stream.
build/tests/preload/bench_fences > "$out/fences_native.txt" 2>&1
LD_PRELOAD=$pre CUDALLOC_CONF=summary:false build/tests/preload/bench_fences > "$out/fences_ctx.txt" 2>&1
LD_PRELOAD=$pre CUDALLOC_CONF=summary:false,context_fences:false build/tests/preload/bench_fences \
    > "$out/fences_streams.txt" 2>&1
for n in 0 8 128; do
    ns() { awk -v n="streams=$n" '$2==n {sub("ns_per_pair=", "", $3); print $3}' "$1"; }
    row "pair with $n streams: native / ctx fence / per-stream (ns)" \
        "$(ns "$out/fences_native.txt") / $(ns "$out/fences_ctx.txt") / $(ns "$out/fences_streams.txt")"
done
# Streams on the real driver (issue 19): alive at once, and made over a run.
for m in "live-streams 2000" "stream-churn 5000 12" "shared-small 4000"; do
    LD_PRELOAD=build/lib/libcudalloc.so CUDALLOC_CONF=summary:false,tracking:false \
        build/tests/preload/prog_streams $m >> "$out/streams.log" 2>&1
done
row "streams: alive at once / made over a run" "$(grep -h '^live-streams\|^stream-churn\|^shared-small' "$out/streams.log" | tr '\n' ' ')"

# 4. PyTorch: a small training loop under the preload, then as pluggable allocator.
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 LD_PRELOAD=build/lib/libcudalloc.so \
        python3 tests/preload/torch_loop.py preload > "$out/torch_preload.log" 2>&1
    row "PyTorch under the preload" "exit $?, $(grep -h '^torch\|peak allocated' "$out/torch_preload.log" | tr '\n' ' ')"
    python3 tests/preload/torch_loop.py native > "$out/torch_native.log" 2>&1
    row "PyTorch native caching allocator" "exit $?, $(grep -h '^torch' "$out/torch_native.log")"
    python3 tests/preload/torch_loop.py pluggable "$PWD/build/lib/libcudalloc.so" > "$out/torch_pluggable.log" 2>&1
    row "PyTorch with CUDAPluggableAllocator" "exit $?, $(grep -h '^torch\|peak allocated' "$out/torch_pluggable.log" | tr '\n' ' ')"
    PYTHONPATH=python python3 tests/preload/torch_loop.py module > "$out/torch_module.log" 2>&1
    row "PyTorch with cudalloc.use_as_torch_allocator()" "exit $?, $(grep -h '^torch\|^cudalloc stats' "$out/torch_module.log" | tr '\n' ' ')"
    # CUDA graphs: refused alike with PyTorch's cache off, right under the pluggable allocator.
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 python3 tests/preload/torch_graph.py capture > "$out/graph_alone.log" 2>&1
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 LD_PRELOAD=$pre python3 tests/preload/torch_graph.py capture \
        > "$out/graph_preload.log" 2>&1
    grep -q "CUDA graph capture began" "$out/graph_preload.log" && hint=yes || hint=no
    row "torch.cuda.graph, cache off: alone / preload" \
        "$(grep -h '^torch' "$out/graph_alone.log") / $(grep -h '^torch' "$out/graph_preload.log") (hint: $hint)"
    python3 tests/preload/torch_graph.py replay "$PWD/$pre" > "$out/graph_pluggable.log" 2>&1
    row "torch.cuda.graph under the pluggable allocator" "exit $?, $(grep -h '^torch' "$out/graph_pluggable.log")"
    for n in 0 64; do
        PYTORCH_NO_CUDA_MEMORY_CACHING=1 LD_PRELOAD=$pre CUDALLOC_CONF=summary:false \
            python3 tests/preload/torch_graph.py streams $n > "$out/torch_streams_$n.log" 2>&1
        row "PyTorch tensor pair, $n side streams (preload)" "$(grep -h '^torch' "$out/torch_streams_$n.log")"
    done
    row "PyTorch pluggable: out of memory" "$(grep -h 'pluggable oom\|after oom' "$out/torch_pluggable.log" | tr '\n' ' ')"
    # Other tools and processes (issue 23): IPC of a tensor, torch.profiler, two GPUs.
    for check in ipc profiler peer; do
        PYTORCH_NO_CUDA_MEMORY_CACHING=1 LD_PRELOAD=build/lib/libcudalloc.so \
            timeout 300 python3 tests/preload/torch_multi.py $check > "$out/torch_$check.log" 2>&1
        row "PyTorch $check under cudalloc" "exit $?, $(grep -h '^torch\|steps aside' "$out/torch_$check.log" | tr '\n' ' ')"
    done
else
    row "PyTorch" "not installed here: skipped"
fi

# Several GPUs and processes, C programs (issue 23): peer access, CUDA IPC, last error.
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
row "peer access ($gpus GPU(s))" "$(build/tests/preload/prog_peer runtime 2>&1 | tail -1) / under cudalloc: $(LD_PRELOAD=build/lib/libcudalloc.so build/tests/preload/prog_peer runtime 2>&1 | grep -v '^cudalloc:' | tail -1)"
row "CUDA IPC of a block between two processes" "$(LD_PRELOAD=build/lib/libcudalloc.so timeout 120 build/tests/preload/prog_ipc runtime 2>&1 | grep -v '^cudalloc:' | tail -1), classic: $(CUDALLOC_CONF=expandable_segments:false LD_PRELOAD=build/lib/libcudalloc.so timeout 120 build/tests/preload/prog_ipc runtime 2>&1 | grep -v '^cudalloc:' | tail -1)"
# What NCCL and UCX ask before registering a buffer (issue 31, prog_registry.c):
# the real driver's answers for cudaMalloc memory (alone), cudalloc's (the same
# checks must pass), and raw cuMem memory's (which must differ as the test says).
for mode in queries async reuse export; do
    build/tests/preload/prog_registry $mode > "$out/registry_$mode.alone" 2>&1
    LD_PRELOAD=build/lib/libcudalloc.so CUDALLOC_CONF=summary:false timeout 120 \
        build/tests/preload/prog_registry $mode > "$out/registry_$mode.preload" 2>&1
    row "buffer queries '$mode' alone / under cudalloc" \
        "$(tail -1 "$out/registry_$mode.alone") / $(tail -1 "$out/registry_$mode.preload")"
done
row "buffer queries on raw cuMem memory (must differ)" "$(build/tests/preload/prog_registry vmm 2>&1 | tail -1)"
row "cuMemCreate etc. of half the GPU after cudalloc cached 80%" \
    "$(LD_PRELOAD=build/lib/libcudalloc.so CUDALLOC_CONF=summary:false timeout 300 build/tests/preload/prog_beside 2>&1 | tail -1)"
LD_PRELOAD=build/lib/libcudalloc.so build/tests/preload/prog_errors > "$out/errors.log" 2>&1
row "exit code at shutdown under cudalloc (prog_errors)" "exit $?, $(grep -v '^cudalloc:' "$out/errors.log" | tail -1)"

# 5. What later parts add (kernels, trainer) when their scripts are present.
for extra in scripts/gpu-check-*.sh; do
    [ -f "$extra" ] || continue
    while read -r line; do row "${line%%: *}" "${line#*: }"; done < <(bash "$extra" "$out")
done

echo
echo "gpu-check $(date -u +%Y-%m-%d) on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(( $(date +%s) - t0 )) s"
printf '%s\n' "${table[@]}" | tee "$out/table.txt"
