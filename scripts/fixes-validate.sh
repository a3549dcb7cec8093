#!/bin/bash
# Each memory fix's predicted peak against the peak measured with the fix
# (issue 18; the figures in BENCHMARKS.md). Predictions come from
# `cudalloc-report --json` on the plain run; measurements from the runs with
# each fix:
#   torch  real PyTorch CPU runs (tests/data/torch/train_gpt.py fix-* cases,
#          recorded by record_alloc.so): plain, accumulation 2 and 4, bf16
#          autocast, checkpointing per block, for each MODEL
#   demo   demo_trainer: a plain run under cudalloc (its CSV trace, and its
#          live report with stacks) against what its own --sweep measures
#   models the four model families of tests/data/torch/models (issue 28;
#          `make record-torch-models` re-records them): predictions from the
#          plain run with Python frames and by sizes alone, and every
#          --capacity verdict between two measured peaks (scripts/fixes_compare.py)
# usage: scripts/fixes-validate.sh BUILD_DIR OUT_DIR [torch] [demo] [models]
#   MODELS="a b" SEEDS="0 1" DEMO_SHAPES="L:C:NH:T:B ..." narrow it down.
set -euo pipefail
BUILD=${1:?build dir}
OUT=${2:?output dir}
shift 2
WHAT=${*:-torch demo models}
MODELS=${MODELS:-a b c d e f g h}
SEEDS=${SEEDS:-0}
DEMO_SHAPES=${DEMO_SHAPES:-4:64:4:64:16 6:128:4:128:16 8:64:4:64:16 2:128:8:64:8 3:96:6:32:24 12:32:2:32:8}
PY=${TORCH_PYTHON:-/usr/bin/python3}
REPORT=$BUILD/bin/cudalloc-report
mkdir -p "$OUT"
here=$(cd "$(dirname "$0")/.." && pwd)

# compare.py PRED_JSON MEASURED... : one table row per fix
compare() {
    python3 - "$@" <<'PY'
import json, sys
pred = json.load(open(sys.argv[1]))
name, rows = sys.argv[2], sys.argv[3:]
fixes = pred.get("fixes") or []
bd = pred.get("peak_breakdown") or {}
def find(fix, factor):
    for f in fixes:
        if f["fix"] == fix and f.get("factor", 0) == factor:
            return f
for r in rows:
    label, fix, factor, measured, target = r.split("|")
    f = find(fix, int(factor))
    m = int(measured)
    if not f:
        print(f"| {name} | {label} | - | - | {m / 2**20:.2f} | - | no prediction: {pred.get('fixes_unavailable') or pred.get('checkpointing_unavailable')} |")
        continue
    p, lo, hi = f["predicted_peak_bytes"], f["low_bytes"], f["high_bytes"]
    err = 100.0 * (p - m) / m
    inside = lo <= m <= hi
    width = 100.0 * (hi - lo) / p
    if target == "range":
        ok = inside and width <= 50
        verdict = f"{'holds' if inside else 'misses'} it, {width:.0f}% wide"
    else:
        ok = abs(err) <= float(target)
        verdict = f"{err:+.1f}% (target {target}%)"
    print(f"| {name} | {label} | {p / 2**20:.2f} | {lo / 2**20:.2f} - {hi / 2**20:.2f} | {m / 2**20:.2f} | {verdict} | {'yes' if ok else 'NO'} |")
PY
}

# measured.py JSON: the highest peak allocated of a complete iteration after the first
measured() {
    python3 - "$1" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))["iterations"]["boundaries"]
print(max(x["peak_allocated_bytes"] for x in b[1:]) if len(b) > 1 else b[0]["peak_allocated_bytes"])
PY
}

header() {
    echo "| run | fix | predicted MiB | range MiB | measured MiB | error | within target |"
    echo "| --- | --- | ---: | --- | ---: | --- | --- |"
}

if [[ " $WHAT " == *" torch "* ]]; then
    make -s "$BUILD/record_alloc.so" >/dev/null
    echo "## PyTorch $($PY -c 'import torch; print(torch.__version__)') on the CPU: train_gpt.py fix-* cases"
    header
    for m in $MODELS; do for seed in $SEEDS; do
        d=$OUT/torch_${m}_$seed
        mkdir -p "$d"
        for c in plain accum2 accum4 bf16 checkpoint; do
            [ -s "$d/$c.csv" ] || MODEL=$m SEED=$seed RECORD_ALLOC_CSV=$d/$c.csv LD_PRELOAD=$(realpath "$BUILD/record_alloc.so") \
                "$PY" "$here/tests/data/torch/train_gpt.py" fix-$c >/dev/null 2>&1
            "$REPORT" --json "$d/$c.json" "$d/$c.csv" >/dev/null
        done
        compare "$d/plain.json" "model $m seed $seed" \
            "accumulation 2|accumulation|2|$(measured "$d/accum2.json")|10" \
            "accumulation 4|accumulation|4|$(measured "$d/accum4.json")|10" \
            "bf16 autocast|bf16|0|$(measured "$d/bf16.json")|range" \
            "checkpointing|checkpointing|0|$(measured "$d/checkpoint.json")|25"
    done; done
    echo
fi

if [[ " $WHAT " == *" demo "* ]]; then
    echo "## demo_trainer on the simulated device: a plain run against its own --sweep"
    header
    for s in $DEMO_SHAPES; do
        IFS=: read -r L C NH T B <<<"$s"
        d=$OUT/demo_L${L}C${C}NH${NH}T${T}B${B}
        mkdir -p "$d"
        args="--layers $L --channels $C --heads $NH --seq $T --batch $B --steps 4"
        [ -s "$d/plain.json" ] || "$BUILD/bin/cudalloc" run --report "$d/plain" -- "$BUILD/bin/demo_trainer" $args >/dev/null 2>&1
        for a in 4 2; do
            [ -s "$d/sweep$a.json" ] || "$BUILD/bin/cudalloc" run -- "$BUILD/bin/demo_trainer" --sweep --accum $a $args \
                --capacity 64GiB --json "$d/sweep$a.json" >/dev/null 2>&1
        done
        "$REPORT" --json "$d/plain_csv.json" "$d/plain.csv" >/dev/null
        row() { python3 -c "import json,sys; print(next(int(r['peak_allocated_bytes']) for r in json.load(open(sys.argv[1])) if r['config'] == sys.argv[2]))" "$@"; }
        for src in plain plain_csv; do
            [ $src = plain ] && tag="stacks" || tag="sizes"
            ck=$([ $src = plain ] && echo 20 || echo 25)
            compare "$d/$src.json" "L$L C$C NH$NH T$T B$B ($tag)" \
                "accumulation 2|accumulation|2|$(row "$d/sweep2.json" accum)|10" \
                "accumulation 4|accumulation|4|$(row "$d/sweep4.json" accum)|10" \
                "bf16|bf16|0|$(row "$d/sweep4.json" bf16)|range" \
                "checkpointing|checkpointing|0|$(row "$d/sweep4.json" checkpoint)|$ck" \
                "all three|accumulation+bf16+checkpointing|4|$(row "$d/sweep4.json" all)|25"
        done
    done
fi

if [[ " $WHAT " == *" models "* ]]; then
    runs="resnet_end resnet_start lstm_end lstm_start mlp_end mlp_start tx_end tx_start tx_inplace"
    for how in --frames ""; do
        label="by sizes alone"
        [ -n "$how" ] && label="with Python frames"
        echo "## Model families (tests/data/torch/models), predictions $label"
        header
        python3 "$here/scripts/fixes_compare.py" "$REPORT" "$here/tests/data/torch/models" $runs $how 2>&1
        echo
    done
fi
