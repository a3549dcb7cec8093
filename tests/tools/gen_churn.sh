#!/usr/bin/env bash
# A synthetic trace of many live blocks under churn (issue 29): LIVE blocks of
# MIN to MAX bytes, then CHURN times: free a live block, allocate another.
# One stream, RMM's CSV on stdout.
#   gen_churn.sh LIVE MIN MAX CHURN [SEED [SIZES [ORDER]]]
# SIZES, how a size is drawn (default logu):
#   logu     log-uniform in [MIN, MAX]
#   unif     uniform in [MIN, MAX]
#   pow2     a power of two in [MIN, MAX], each power as likely
#   equal    MAX every time (KV-cache blocks)
#   bimodal  9 in 10 log-uniform in [MIN, 8*MIN], else in [MAX/4, MAX]
#   drift    log-uniform in a window half the range wide that moves from the
#            bottom of [MIN, MAX] to its top over the churn (growing sequences)
# ORDER, which live block is freed (default rand):
#   rand     any, each as likely
#   fifo     the oldest
#   recent   9 in 10 times one of the 64 newest allocations still live (a
#            temporary), else any
# The defaults give the same trace as before these options were added.
set -eu
usage="usage: gen_churn.sh LIVE MIN MAX CHURN [SEED [logu|unif|pow2|equal|bimodal|drift [rand|fifo|recent]]]"
[ $# -ge 4 ] && [ $# -le 7 ] || { echo "$usage" >&2; exit 2; }
for n in "$1" "$2" "$3" "$4" "${5:-1}"; do
    case $n in '' | *[!0-9]*) echo "gen_churn.sh: '$n' is not a whole number; $usage" >&2; exit 2 ;; esac
done
[ "$1" -ge 1 ] && [ "$2" -ge 1 ] && [ "$2" -le "$3" ] ||
    { echo "gen_churn.sh: need LIVE >= 1 and 1 <= MIN <= MAX; $usage" >&2; exit 2; }
sizes=${6:-logu} order=${7:-rand}
case $sizes in logu | unif | pow2 | equal | bimodal | drift) ;;
    *) echo "gen_churn.sh: unknown SIZES '$sizes'; $usage" >&2; exit 2 ;; esac
case $order in rand | fifo | recent) ;;
    *) echo "gen_churn.sh: unknown ORDER '$order'; $usage" >&2; exit 2 ;; esac
awk -v live="$1" -v lo="$2" -v hi="$3" -v churn="$4" -v seed="${5:-1}" -v sizes="$sizes" -v order="$order" '
function logu(a, b) { return int(exp(log(a) + rand() * (log(b) - log(a)))) }
function size(n,    f, p) {
    if (sizes == "logu") return logu(lo, hi)
    if (sizes == "unif") return lo + int(rand() * (hi - lo + 1))
    if (sizes == "pow2") {
        p = 1; while (p < lo) p *= 2
        f = 0; while (p * 2 ^ (f + 1) <= hi) f++
        return p * 2 ^ int(rand() * (f + 1))
    }
    if (sizes == "equal") return hi
    if (sizes == "bimodal")
        return rand() < 0.9 ? logu(lo, lo * 8 < hi ? lo * 8 : hi) : logu(hi / 4 > lo ? hi / 4 : lo, hi)
    f = churn ? n / churn : 0 # drift: the window [f/2, f/2 + 1/2] of the log range
    return int(exp(log(lo) + (f / 2 + rand() / 2) * (log(hi) - log(lo))))
}
BEGIN {
    srand(seed); t = 0; next_ptr = 65536; oldest = 0
    print "Thread,Time,Action,Pointer,Size,Stream"
    for (i = 0; i < live; i++) {
        ptr[i] = next_ptr; sz[i] = size(0); next_ptr += 256
        printf "1,%d,allocate,0x%x,%d,0x0\n", t++, ptr[i], sz[i]
    }
    for (n = 0; n < churn; n++) {
        if (order == "rand") i = int(rand() * live)
        else if (order == "fifo") { i = oldest; oldest = (oldest + 1) % live }
        else {
            i = -1
            if (rand() < 0.9) { # a recent one, unless its slot was reused since
                r = int(rand() * 64)
                if (r in recent_slot && gen[recent_slot[r]] == recent_gen[r]) i = recent_slot[r]
            }
            if (i < 0) i = int(rand() * live)
        }
        printf "1,%d,free,0x%x,%d,0x0\n", t++, ptr[i], sz[i]
        ptr[i] = next_ptr; sz[i] = size(n); next_ptr += 256; gen[i] = n + 1
        recent_slot[n % 64] = i; recent_gen[n % 64] = n + 1
        printf "1,%d,allocate,0x%x,%d,0x0\n", t++, ptr[i], sz[i]
    }
}'
