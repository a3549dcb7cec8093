#!/usr/bin/env bash
# Bookkeeping against glibc's malloc (issue 29): each trace through
# `cudalloc-replay --runs 9 --compare` on one core, then how many traces glibc
# replays faster and the median of glibc's time over cudalloc's (above 1:
# cudalloc is faster). Times move with the machine's load: compare two builds
# by running this for each in turn, not against a figure from another day.
#   vs_glibc.sh REPLAY TRACE...
set -u
usage="usage: vs_glibc.sh REPLAY TRACE..."
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
replay=$1; shift
[ -x "$replay" ] || { echo "vs_glibc.sh: '$replay' is not an executable cudalloc-replay; $usage" >&2; exit 2; }
pin=""; command -v taskset > /dev/null && pin="taskset -c $(($(nproc) - 1))"
ratios=() faster=0 n=0
for t in "$@"; do
    line=$($pin "$replay" --runs 9 --compare "$t" | grep '^  compare: ') ||
        { echo "vs_glibc.sh: $t: no compare line from $replay" >&2; exit 1; }
    mine=$(sed -En 's/.*cudalloc ([0-9.]+) ns.*/\1/p' <<<"$line")
    glibc=$(sed -En 's/.*glibc ([0-9.]+) ns.*/\1/p' <<<"$line")
    [ -n "$glibc" ] || { echo "vs_glibc.sh: $t: glibc not timed: $line" >&2; exit 1; }
    r=$(awk -v g="$glibc" -v c="$mine" 'BEGIN { printf "%.3f", g / c }')
    printf '%s cudalloc %s ns glibc %s ns glibc/cudalloc %s\n' "$(basename "$t")" "$mine" "$glibc" "$r"
    ratios+=("$r"); n=$((n + 1))
    awk -v r="$r" 'BEGIN { exit !(r < 1) }' && faster=$((faster + 1))
done
median=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
echo "glibc faster on $faster of $n traces; median glibc/cudalloc $median"
