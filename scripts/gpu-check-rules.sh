#!/usr/bin/env bash
# A real driver's rules (issue 32), on a GPU: run by scripts/gpu-check.sh after
# its build, one "name: value" line per check. Every program runs under a
# timeout: a dependency CUDA does not make shows as a hang.
#   bash scripts/gpu-check-rules.sh OUT_DIR
set -u
cd "$(dirname "$0")/.." || exit 1
out=${1:-build/gpu-check}
mkdir -p "$out"
cuda=${CUDA_HOME:-/usr/local/cuda}
pre=build/lib/libcudalloc.so
rules=build/tests/preload/prog_rules

# Runs prog_rules MODE under the preload; its last line, or what stopped it.
rule() {
    LD_PRELOAD=$pre CUDALLOC_CONF=summary:false timeout 60 "$rules" "$1" > "$out/rules_$1.log" 2>&1
    local rc=$?
    case $rc in
        0) tail -1 "$out/rules_$1.log" ;;
        124) echo "TIMED OUT after 60 s: a wait CUDA does not make (deadlock)" ;;
        *) echo "exit $rc: $(grep -m1 FAIL "$out/rules_$1.log")" ;;
    esac
}

# cuGetProcAddress answers cudalloc's function for every entry it serves, by
# name, version and flags (with and without the per-thread flag), whatever
# address the driver hands out.
echo "entry points swapped by name, version, flags: $(rule entry-points)"
# A second context's stream (cuCtxCreate) still using a freed block keeps it.
echo "plain free vs a second context's queued work: $(rule second-context)"
echo "plain free vs a green context's queued work: $(rule green-context)"
# Mapping new memory during a global capture (cuMemSetAccess is synchronous) leaves it valid.
echo "stream-ordered allocation during a global capture: $(rule vmm-capture)"
# No waits CUDA never makes: a destroyed stream waiting for a flag the legacy
# stream sets, a new non-blocking stream setting a flag a blocking one waits for.
echo "wait-value, destroyed stream then legacy write: $(rule wait-destroyed)"
echo "wait-value, new non-blocking stream writes: $(rule wait-created)"

# A program built by plain nvcc (cudart linked statically): cudalloc sees its
# non-blocking stream (a plain free while a kernel still uses the block is not
# reused) and its capture (a stream-ordered allocation inside it is a graph's).
cat > "$out/rules_static.cu" <<'CU'
#include <cstdio>
__global__ void hold(volatile unsigned *gate, float *p) { while (*gate == 0) {} p[threadIdx.x] = 1.f; }
int main() {
    unsigned *gate = nullptr, *dgate = nullptr;
    float *p = nullptr, *q = nullptr, *r = nullptr;
    cudaStream_t s;
    if (cudaHostAlloc(&gate, 4, cudaHostAllocMapped) != cudaSuccess) return 10;
    *(volatile unsigned *)gate = 0;
    cudaHostGetDevicePointer(&dgate, gate, 0);
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaMalloc(&p, 4 << 20);
    hold<<<1, 32, 0, s>>>(dgate, p);
    cudaFree(p);                 /* the kernel still runs on the block */
    cudaMalloc(&q, 4 << 20);
    bool stream_seen = q != p;
    *(volatile unsigned *)gate = 1;
    cudaStreamSynchronize(s);
    cudaFree(q);
    cudaGraph_t g;
    cudaGraphExec_t x;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    cudaMallocAsync((void **)&r, 1 << 20, s);
    cudaMemsetAsync(r, 0, 1 << 20, s);
    cudaFreeAsync(r, s);
    bool captured = cudaStreamEndCapture(s, &g) == cudaSuccess && cudaGraphInstantiate(&x, g, 0) == cudaSuccess &&
                    cudaGraphLaunch(x, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess;
    printf("static cudart: stream seen %s, capture %s\n", stream_seen ? "yes" : "NO", captured ? "ok" : "FAILED");
    return stream_seen && captured ? 0 : 1;
}
CU
if "$cuda/bin/nvcc" -arch=sm_90 -o "$out/rules_static" "$out/rules_static.cu" > "$out/rules_static.build" 2>&1; then
    LD_PRELOAD=$pre timeout 60 "$out/rules_static" > "$out/rules_static.log" 2>&1
    rc=$?
    echo "nvcc -cudart static, streams and captures seen: exit $rc, $(grep -h '^static cudart' "$out/rules_static.log")"
else
    echo "nvcc -cudart static, streams and captures seen: build failed ($(tail -1 "$out/rules_static.build"))"
fi
