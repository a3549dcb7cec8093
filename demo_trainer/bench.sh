#!/usr/bin/env bash
# Step time of demo_trainer on the simulated device with the CPU kernels: without the
# preload, under cudalloc, and (when DT_BENCH_OFF_CONF is set, e.g. a CUDALLOC_CONF
# that turns tracking off) under cudalloc so configured. Runs alternate, REPS each;
# the median of each run's mean step time (steps 2..) is reported.
#   usage: bench.sh BUILD_DIR [REPS]
set -u
build=${1:?usage: bench.sh BUILD_DIR [REPS]}
reps=${2:-5}
bin=$build/bin/demo_trainer
model=(--layers 4 --channels 128 --heads 4 --seq 64 --batch 8 --steps 20 --print-every 20)
ms() { grep '^summary: ' | grep -o '[0-9.]* ms/step' | grep -o '^[0-9.]*'; }
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
modes=(native cudalloc)
[ -n "${DT_BENCH_OFF_CONF:-}" ] && modes+=(cudalloc-off)
declare -A runs
for ((i = 0; i < reps; i++)); do
    for mode in "${modes[@]}"; do
        case $mode in
        native) t=$(LD_LIBRARY_PATH="$build/sim" "$bin" "${model[@]}" 2>&1 | ms) ;;
        cudalloc) t=$("$build/bin/cudalloc" run -- "$bin" "${model[@]}" 2>&1 | ms) ;;
        cudalloc-off) t=$("$build/bin/cudalloc" run --conf "$DT_BENCH_OFF_CONF" -- "$bin" "${model[@]}" 2>&1 | ms) ;;
        esac
        runs[$mode]="${runs[$mode]:-} $t"
    done
done
echo "demo_trainer ${model[*]}, simulated device, CPU kernels, $reps runs each (median of per-run mean ms/step):"
base=$(tr ' ' '\n' <<<"${runs[native]}" | grep . | median)
for mode in "${modes[@]}"; do
    m=$(tr ' ' '\n' <<<"${runs[$mode]}" | grep . | median)
    printf '  %-14s %8.2f ms/step  (%+.1f%% vs no preload; runs:%s)\n' "$mode" "$m" \
        "$(awk -v a="$m" -v b="$base" 'BEGIN { print 100 * (a - b) / b }')" "${runs[$mode]}"
done
