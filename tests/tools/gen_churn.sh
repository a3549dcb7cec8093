#!/usr/bin/env bash
# A synthetic trace of many live blocks under churn (issue 29): LIVE blocks of
# MIN to MAX bytes (log-uniform), then CHURN times: free a random live block,
# allocate another. One stream, RMM's CSV on stdout.
#   gen_churn.sh LIVE MIN MAX CHURN [SEED]
set -eu
[ $# -ge 4 ] || { echo "usage: gen_churn.sh LIVE MIN MAX CHURN [SEED]" >&2; exit 2; }
awk -v live="$1" -v lo="$2" -v hi="$3" -v churn="$4" -v seed="${5:-1}" '
function size() { return int(exp(llo + rand() * (lhi - llo))) }
BEGIN {
    srand(seed); llo = log(lo); lhi = log(hi); t = 0; next_ptr = 65536
    print "Thread,Time,Action,Pointer,Size,Stream"
    for (i = 0; i < live; i++) {
        ptr[i] = next_ptr; sz[i] = size(); next_ptr += 256
        printf "1,%d,allocate,0x%x,%d,0x0\n", t++, ptr[i], sz[i]
    }
    for (n = 0; n < churn; n++) {
        i = int(rand() * live)
        printf "1,%d,free,0x%x,%d,0x0\n", t++, ptr[i], sz[i]
        ptr[i] = next_ptr; sz[i] = size(); next_ptr += 256
        printf "1,%d,allocate,0x%x,%d,0x0\n", t++, ptr[i], sz[i]
    }
}'
