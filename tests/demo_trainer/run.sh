#!/usr/bin/env bash
# Whole-program tests of demo_trainer: the real binary on the simulated device, under
# cudalloc (`cudalloc run`) and without it. About 30 s on two cores.
#   usage: run.sh BUILD_DIR
set -u
build=${1:?usage: run.sh BUILD_DIR}
bin=$build/bin/demo_trainer
launch=$build/bin/cudalloc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0 skip=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL $1"; [ -n "${out:-}" ] && echo "$out" | tail -25 | sed 's/^/    /'; }
# run NAME WANTED_STATUS CMD...: runs, keeps the output in $out
run() {
    local name=$1 want=$2
    shift 2
    out=$("$@" 2>&1)
    local rc=$?
    if [ $rc -eq "$want" ]; then ok; else no "$name: exit $rc, wanted $want"; fi
}
expect() { if grep -q -- "$2" <<<"$out"; then ok; else no "$1: output lacks '$2'"; fi; }
# num TEXT PATTERN: the first number after PATTERN in TEXT
num() { grep -o -- "$2[^0-9-]*-\?[0-9.]*" <<<"$1" | head -1 | grep -o -- '-\?[0-9.]*$'; }
# cmp NAME EXPR: awk condition on numbers
check() { if awk "BEGIN { exit !($2) }"; then ok; else no "$1: $2"; fi; }

small=(--layers 2 --channels 64 --heads 4 --seq 64 --batch 8)
sim() { "$launch" run --sim 1GiB "$@"; }

# Bad input: one line, exit 2.
run bad-precision 2 "$bin" --precision fp16
expect bad-precision-line "bad --precision 'fp16': accepted: fp32, bf16"
run bad-flag 2 "$bin" --layer 2
expect bad-flag-line "unknown option '--layer'"
run bad-accum 2 "$bin" --batch 6 --accum 4
run bad-capacity 2 "$bin" --sweep --capacity lots
run help 0 "$bin" --help
expect help-lists-leaks "eval-grad|keep-outputs|loss-tensor"
run cuda-on-sim 2 sim -- "$bin" --device cuda --steps 1
expect cuda-on-sim-line "the simulated device cannot run CUDA kernels"

# Learning, under cudalloc: the loss falls from ln 256 in a few dozen steps.
run learn 0 sim --report "$tmp/clean" -- "$bin" "${small[@]}" --steps 40 --eval-every 10 --print-every 10
first=$(num "$out" "loss"); last=$(grep '^summary: 40 steps' <<<"$out" | grep -o -- '-> [0-9.]*' | grep -o '[0-9.]*$')
check "loss-falls ($first -> $last)" "$first > 5.3 && $last < 3.0"
expect learn-stats-from-cudalloc "(cudalloc)"
expect learn-flat "leak none: device memory held between steps .* (+0 B per step)"
expect learn-exit-summary "cudalloc: HEALTHY: no leak over 40 iterations (explicit)"

# Without the preload: the same program on the simulated device, figures from the device.
run no-preload 0 env LD_LIBRARY_PATH="$build/sim" "$bin" "${small[@]}" --steps 3
expect no-preload-figures "(device)"

# --data FILE
run data-file 0 sim -- "$bin" "${small[@]}" --steps 2 --data kernels/README.md
expect data-file-named "data kernels/README.md"
run data-too-short 2 "$bin" --data /dev/null

# The techniques and the fragmentation-heavy pattern run (the equalities are unit tests).
run techniques 0 sim -- "$bin" "${small[@]}" --steps 3 --accum 2 --precision bf16 --checkpoint --vary-seq --eval-every 1

# The leak modes, as the trainer measures them.
run eval-grad 0 sim --report "$tmp/eval-grad" -- "$bin" "${small[@]}" --steps 12 --leak eval-grad --print-every 12
grow=$(grep -o '(+[0-9]* B per step)' <<<"$out" | grep -o '[0-9]*')
check "eval-grad grows (${grow:-?} B/step)" "${grow:-0} > 1000000"
run keep-outputs 0 sim --report "$tmp/keep-outputs" -- "$bin" "${small[@]}" --steps 12 --leak keep-outputs --print-every 12
grow=$(grep -o '(+[0-9]* B per step)' <<<"$out" | grep -o '[0-9]*')
check "keep-outputs grows by the logits (${grow:-?} B/step)" "${grow:-0} == 8 * 64 * 256 * 4"
run loss-tensor 0 sim --report "$tmp/loss-tensor" -- "$bin" "${small[@]}" --steps 12 --leak loss-tensor --print-every 12
expect loss-tensor-flat "(+0 B per step); graph nodes alive 25 -> 300"

# cudalloc's diagnosis of the same runs, when this libcudalloc.so writes reports.
if [ -e "$tmp/eval-grad.txt" ]; then
    if grep -q '^leak 1:' "$tmp/eval-grad.txt" && grep -q 'op_' "$tmp/eval-grad.txt"; then ok; else
        no "cudalloc names no leak (with an op_ site) in the eval-grad run"; sed 's/^/    /' "$tmp/eval-grad.txt" | head -60; fi
    if grep -q '^leak 1:' "$tmp/keep-outputs.txt"; then ok; else no "cudalloc sees no leak in keep-outputs"; fi
    for n in clean loss-tensor; do
        if grep -q '^None:' "$tmp/$n.txt"; then ok; else
            no "cudalloc reports a leak in the $n run"; sed 's/^/    /' "$tmp/$n.txt" | head -60; fi
    done
else
    skip=$((skip + 1))
    echo "SKIP cudalloc's leak diagnosis: this libcudalloc.so wrote no report ($tmp/eval-grad.txt)"
fi

# The sweep: baseline OOMs at 24 MiB, the techniques fit, ratios as expected.
run sweep 0 sim -- "$bin" --sweep --layers 8 --channels 64 --heads 4 --seq 64 --batch 16 --steps 2 \
    --capacity 24MiB --json "$tmp/sweep.json"
rows=$(grep -c '"config"' "$tmp/sweep.json" 2>/dev/null || echo 0)
check "sweep rows ($rows)" "$rows >= 5"
expect sweep-baseline-oom "at 24.00 MiB the baseline does not fit (OOM at op_"
expect sweep-fits-with "it fits with: accum checkpoint all"
acc=$(grep -o 'accum 4: .*(x[0-9.]* smaller)$' <<<"$out" | grep -o 'x[0-9.]* smaller)$' | grep -o '[0-9.]*')
bf=$(grep -o 'bf16: activations .*' <<<"$out" | grep -o 'x[0-9.]*' | head -1 | tr -d x)
ck=$(grep -o 'checkpoint: activations .*' <<<"$out" | grep -o 'x[0-9.]*' | head -1 | tr -d x)
check "sweep accum ratio ${acc:-?} ~ 4" "${acc:-0} > 3.5 && ${acc:-0} < 4.5"
check "sweep bf16 ratio ${bf:-?} ~ 2" "${bf:-0} > 1.8 && ${bf:-0} < 2.1"
check "sweep checkpoint ratio ${ck:-?} with 8 layers" "${ck:-0} > 4"
if python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert {'config','micro_batch','accum','peak_allocated_bytes','peak_reserved_bytes','step_ms','tokens_per_s','final_loss','fits'} <= set(r[0])" \
    "$tmp/sweep.json"; then ok; else no "sweep JSON fields"; fi

echo "demo_trainer system tests: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
