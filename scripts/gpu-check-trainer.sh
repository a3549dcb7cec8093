#!/usr/bin/env bash
# The trainer's part of scripts/gpu-check.sh, on a machine with a GPU (an H200):
#   1. every CUDA kernel against its CPU twin (build/tests/kernels_gpu_compare);
#   2. the memory sweep of demo_trainer on the GPU under cudalloc (a 12-layer,
#      768-channel, 1024-token model; the baseline does not fit in 12 GiB);
#   3. bf16 MFU and tokens/s of that model;
#   4. step time under cudalloc against native cudaMalloc/cudaFree (same run, no
#      preload), per-tensor allocation as the trainer does it;
#   5. the eval-grad leak seen by cudalloc on the GPU;
#   6. what would fit: each fix's peak predicted from a plain run (its report)
#      against the sweep's measured peaks (2.).
# Expects `make all` done (gpu-check.sh does it). Prints "label: value" lines (the
# rows of gpu-check.sh's table); logs go to OUT_DIR. About 2 minutes.
#   usage: bash scripts/gpu-check-trainer.sh [OUT_DIR]
set -u
cd "$(dirname "$0")/.." || exit 1
out=${1:-build/gpu-check}
mkdir -p "$out"
cuda=${CUDA_HOME:-/usr/local/cuda}
export LD_LIBRARY_PATH="$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
trainer=build/bin/demo_trainer
launch=build/bin/cudalloc
gpt=(--device cuda --layers 12 --channels 768 --heads 12 --seq 1024)

# 1. CUDA kernels against the CPU kernels, random inputs, fp32 and bf16.
if [ -x build/tests/kernels_gpu_compare ]; then
    build/tests/kernels_gpu_compare > "$out/kernels_gpu_compare.log" 2>&1
    rc=$?
    echo "CUDA kernels vs CPU kernels: exit $rc, $(grep -c PASS "$out/kernels_gpu_compare.log") PASS, $(grep -c FAIL "$out/kernels_gpu_compare.log") FAIL"
else
    echo "CUDA kernels vs CPU kernels: build/tests/kernels_gpu_compare missing (built only with nvcc)"
fi

if [ ! -x "$trainer" ] || [ ! -x "$launch" ]; then
    echo "demo_trainer: $trainer or $launch missing: run make"
    exit 0
fi

# summary_field LOG PATTERN: the number after PATTERN on the trainer's summary line
summary_field() { grep '^summary:' "$1" | grep -o -- "$2" | head -1 | grep -o '[0-9.]*' | head -1; }

# 2. The sweep: baseline, accum 4, bf16, checkpoint, all, each a child under cudalloc
#    with max_reserved at the capacity. fp32 baseline ~21 GB > 12 GiB.
timeout 300 "$launch" run -- "$trainer" --sweep "${gpt[@]}" --batch 16 --steps 3 --capacity 12GiB \
    --json "$out/trainer_sweep.json" > "$out/trainer_sweep.log" 2>&1
rc=$?
echo "demo_trainer sweep at 12 GiB (L12 C768 T1024 B16): exit $rc, table in $out/trainer_sweep.log"
grep -E '^(baseline|accum|bf16|checkpoint|all)' "$out/trainer_sweep.log" | while read -r cfg rest; do
    echo "  sweep $cfg: $rest"
done
grep -E '^  (accum|bf16|checkpoint|all three|at )' "$out/trainer_sweep.log" | sed 's/^  /  sweep /'

# 6. What would fit: the plain run's predictions against what the sweep measured.
timeout 180 "$launch" run --report "$out/trainer_plain" -- "$trainer" "${gpt[@]}" --batch 16 --steps 3 \
    > "$out/trainer_plain.log" 2>&1
python3 - "$out/trainer_plain.json" "$out/trainer_sweep.json" <<'PY' || echo "what would fit: no report or sweep"
import json, sys
fixes = json.load(open(sys.argv[1]))["fixes"]
rows = {r["config"]: r for r in json.load(open(sys.argv[2]))}
for cfg, fix, factor in (("accum", "accumulation", 4), ("bf16", "bf16", 0), ("checkpoint", "checkpointing", 0),
                         ("all", "accumulation+bf16+checkpointing", 4)):
    f = next((f for f in fixes if f["fix"] == fix and f.get("factor", 0) == factor), None)
    m = rows.get(cfg + "-uncapped", rows.get(cfg, {})).get("peak_allocated_bytes")
    if f and m:
        p = f["predicted_peak_bytes"]
        print(f"what would fit, {fix}: predicted {p / 2**30:.2f} GiB ({f['low_bytes'] / 2**30:.2f} to "
              f"{f['high_bytes'] / 2**30:.2f}), measured {m / 2**30:.2f} GiB ({100 * (p - m) / m:+.1f}%)")
PY

# 3. bf16 training speed of the 12-layer model under cudalloc: MFU, tokens/s.
run_speed() { # name, launcher prefix..., -- trainer flags
    local name=$1
    shift
    timeout 240 "$@" > "$out/trainer_$name.log" 2>&1
    echo $?
}
rc=$(run_speed bf16_cudalloc "$launch" run -- "$trainer" "${gpt[@]}" --batch 16 --precision bf16 --steps 12 --print-every 4)
ms_c=$(summary_field "$out/trainer_bf16_cudalloc.log" '[0-9.]* ms/step')
tps=$(summary_field "$out/trainer_bf16_cudalloc.log" '[0-9.]* tok/s')
mfu=$(summary_field "$out/trainer_bf16_cudalloc.log" 'MFU [0-9.]*%')
echo "demo_trainer bf16 L12 C768 T1024 B16 under cudalloc: exit $rc, ${ms_c:-?} ms/step, ${tps:-?} tok/s, MFU ${mfu:-?}% (target >= 25%)"

# 4. The same run with native cudaMalloc/cudaFree (no preload): cudaFree waits for the
#    device each time, once per activation per step.
rc=$(run_speed bf16_native "$trainer" "${gpt[@]}" --batch 16 --precision bf16 --steps 12 --print-every 4)
ms_n=$(summary_field "$out/trainer_bf16_native.log" '[0-9.]* ms/step')
echo "demo_trainer step time native cudaMalloc/cudaFree vs cudalloc: exit $rc, ${ms_n:-?} vs ${ms_c:-?} ms/step ($(awk -v n="${ms_n:-0}" -v c="${ms_c:-0}" 'BEGIN { if (c > 0 && n > 0) printf "%.2fx", n / c; else printf "?" }'); target >= 5x)"
# fp32 too: more allocations per FLOP are not the point, but the fp32 baseline is what users run first
rc=$(run_speed fp32_cudalloc "$launch" run -- "$trainer" "${gpt[@]}" --batch 8 --steps 6 --print-every 3)
rc2=$(run_speed fp32_native "$trainer" "${gpt[@]}" --batch 8 --steps 6 --print-every 3)
echo "demo_trainer fp32 L12 C768 T1024 B8 native vs cudalloc: exit $rc2/$rc, $(summary_field "$out/trainer_fp32_native.log" '[0-9.]* ms/step') vs $(summary_field "$out/trainer_fp32_cudalloc.log" '[0-9.]* ms/step') ms/step, MFU (fp32, no TF32) $(summary_field "$out/trainer_fp32_cudalloc.log" 'MFU [0-9.]*%')%"

# 5. The planted leak, seen by cudalloc on the GPU (report, if this build writes them).
timeout 120 "$launch" run --report "$out/trainer_eval_grad" -- "$trainer" --device cuda --layers 4 --channels 256 \
    --heads 4 --seq 256 --batch 8 --steps 20 --leak eval-grad --print-every 10 > "$out/trainer_eval_grad.log" 2>&1
rc=$?
grow=$(grep -o '(+[0-9]* B per step)' "$out/trainer_eval_grad.log" | grep -o '[0-9]*')
if [ -f "$out/trainer_eval_grad.txt" ]; then
    site=$(grep -A3 'allocated at:' "$out/trainer_eval_grad.txt" | grep -o 'op_[a-z_]*' | head -1)
    seen="cudalloc: $(grep -c '^leak [0-9]*:' "$out/trainer_eval_grad.txt") leaking sites, first at ${site:-?}"
else
    seen="no cudalloc report written"
fi
echo "demo_trainer --leak eval-grad on the GPU: exit $rc, +${grow:-?} B per step; $seen"
