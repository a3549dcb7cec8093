#!/usr/bin/env bash
# Writes a synthetic training-loop trace (RMM CSV) to stdout:
#   gen_trace.sh ITERATIONS LEAK(0|1) MARKS(0|1) [OOM(0|1)]
# Weights first; each iteration 6 activations of varying size made and freed,
# an output tensor replaced, and with LEAK a 1 MiB tensor kept; with MARKS an
# `iteration` row after each; with OOM a failed 8 GiB allocation at the end.
set -eu
awk -v n="$1" -v leak="$2" -v marks="$3" -v oom="${4:-0}" 'BEGIN {
    print "Thread,Time,Action,Pointer,Size,Stream"
    t = 0; p = 1
    for (w = 0; w < 8; w++) printf "1,%d,allocate,0x%x,%d,0x0\n", t++, p++, 4194304 + w * 512
    out = 0
    for (i = 0; i < n; i++) {
        batch = 1 + (i * 7) % 5
        for (k = 0; k < 6; k++) { a[k] = p++; printf "1,%d,allocate,0x%x,%d,0x0\n", t++, a[k], batch * 262144 + k * 512 }
        for (k = 5; k >= 0; k--) printf "1,%d,free,0x%x,0,0x0\n", t++, a[k]
        if (out) printf "1,%d,free,0x%x,0,0x0\n", t++, out
        out = p++; printf "1,%d,allocate,0x%x,%d,0x0\n", t++, out, batch * 65536
        if (leak) printf "1,%d,allocate,0x%x,1048576,0x0\n", t++, p++
        if (marks) printf "1,%d,iteration,,%d,0x0\n", t++, i + 1
    }
    if (oom) printf "1,%d,allocate failure,0x0,8589934592,0x0\n", t++
}'
