#!/usr/bin/env bash
# `make demo` itself, as a test: both runs succeed within the promised two
# minutes, the clean one is judged healthy, the leaking one is named with its
# call site, and the reports it points at exist.
set -u
build=${1:?usage: make_demo.sh BUILD_DIR}
start=$(date +%s)
out=$(bash demo_trainer/demo.sh "$build" 2>&1); rc=$?
secs=$(( $(date +%s) - start ))
pass=0 fail=0
check() { if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL make demo: $1"; fi; }
check "exit status $rc" '[ $rc -eq 0 ]'
check "took $secs s (limit 120)" '[ $secs -le 120 ]'
check "clean run judged healthy" 'grep -q "cudalloc: HEALTHY: no leak" <<<"$out"'
check "leak named as one finding rooted at evaluate" 'grep -q "cudalloc: LEAK: a forward pass run under evaluate (.*demo_trainer/train.c:[0-9]*) is kept alive (20 call sites)" <<<"$out"'
check "its largest call site named" 'grep -q "the largest of its 20 sites: .*op_[a-z]* (.*demo_trainer/ops.c:[0-9]*)" <<<"$out"'
for f in clean eval-grad; do
    check "$f.html reported and written" 'grep -q "$build/demo/$f.html" <<<"$out" && [ -s "$build/demo/$f.html" ]'
done
echo "make demo: $pass passed, $fail failed (${secs} s)"
[ $fail -eq 0 ] || { echo "$out" | tail -40; exit 1; }
