#!/usr/bin/env bash
# make demo: demo_trainer under cudalloc twice, clean and with the eval-grad leak
# (validation with grad recording on, val_total = val_total + val_loss), then both
# summaries and where the reports are. On the simulated device when there is no GPU.
#   usage: demo.sh [BUILD_DIR]
set -u
build=${1:-build}
out=$build/demo
mkdir -p "$out"
# A 4-layer model: about 6 s a run on two CPU cores; the leak holds ~18 MiB a step.
model=(--layers 4 --channels 128 --heads 4 --seq 64 --batch 8 --steps 30 --eval-every 1 --print-every 5)

run() { # name, extra trainer flags...
    local name=$1
    shift
    rm -f "$out/$name".*
    echo
    echo "=== demo: $name: cudalloc run --report $out/$name -- demo_trainer ${model[*]} $*"
    local t0=$SECONDS
    CUDALLOC_SIM_MEMORY=${CUDALLOC_SIM_MEMORY:-1GiB} \
        "$build/bin/cudalloc" run --report "$out/$name" -- "$build/bin/demo_trainer" "${model[@]}" "$@" \
        >"$out/$name.log" 2>&1
    local rc=$?
    cat "$out/$name.log"
    echo "=== demo: $name: exit $rc after $((SECONDS - t0)) s (output in $out/$name.log)"
    return $rc
}

status=0
run clean || status=1
run eval-grad --leak eval-grad || status=1

echo
echo "=== demo: summaries"
for name in clean eval-grad; do
    echo "--- $name"
    grep -E '^(summary:|leak |cudalloc:)' "$out/$name.log" | grep -v 'running on the simulated device'
    if [ -f "$out/$name.txt" ]; then
        echo "--- $name: cudalloc's diagnosis ($out/$name.txt)"
        grep -m1 '^VERDICT' "$out/$name.txt"
        # the leak section, up to the next section
        awk '/^== / { p = ($0 ~ /^== Leaks/) } p' "$out/$name.txt" | head -60
    fi
done
echo
echo "=== demo: reports"
found=0
for name in clean eval-grad; do
    for f in "$out/$name".*; do
        [ -e "$f" ] || continue
        case $f in *.log) continue ;; esac
        echo "  $f"
        found=1
    done
done
if [ $found = 0 ]; then
    echo "  none written: this libcudalloc.so writes no reports yet (the report writer is still being built);"
    echo "  the run logs are $out/clean.log and $out/eval-grad.log"
else
    for name in clean eval-grad; do
        [ -e "$out/$name.html" ] && echo "open $out/$name.html in a browser ($name)"
    done
fi
exit $status
