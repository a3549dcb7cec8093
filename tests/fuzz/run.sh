#!/usr/bin/env bash
# Runs each libFuzzer harness for a set time: the committed seeds first (any
# crash among them fails at once), then new inputs. One line per harness with
# what it did; fails if any harness found a crash, UB, a leak or a broken
# invariant (the input is kept in BIN/artifacts/ and the log in BIN/NAME.log).
set -u
bin=${1:?usage: run.sh BIN SECONDS NAME...}; secs=${2:?}; shift 2
here=$(dirname "$0")
mkdir -p "$bin/artifacts"
status=0
for t in "$@"; do
    work=$bin/corpus/$t
    mkdir -p "$work"
    log=$bin/$t.log
    # -max_len: room for a few dozen trace rows; -timeout (s) and -rss_limit_mb: a hang
    # or a blow-up of memory is a finding (the hostile seeds are held to them).
    dict=(); [ -f "$here/$t.dict" ] && dict=(-dict="$here/$t.dict")
    "$bin/fuzz_$t" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 "${dict[@]}" \
        -artifact_prefix="$bin/artifacts/$t-" "$work" "$here/corpus/$t" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    seeds=$(find "$here/corpus/$t" -type f | wc -l)
    if [ $rc -eq 0 ]; then
        echo "fuzz $t: ${execs:-?} executions in ${secs}s (${rate:-?}/s), $cov, $seeds seeds, corpus now $(find "$work" -type f | wc -l); no findings"
    else
        status=1
        echo "fuzz $t: FOUND A PROBLEM (exit $rc) after ${execs:-?} executions; log $log:"
        grep -E 'ERROR|invariant broken|runtime error|SUMMARY|Test unit written' "$log" | head -8 | sed 's/^/    /'
    fi
done
exit $status
