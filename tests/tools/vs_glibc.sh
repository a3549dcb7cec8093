#!/usr/bin/env bash
# Bookkeeping against glibc's malloc (issue 29): each trace through
# `cudalloc-replay --runs 9 --compare` on one core, then how many traces glibc
# replays faster and the median of glibc's time over cudalloc's (above 1:
# cudalloc is faster). Times move with the machine's load, so two builds are
# compared in one run: with --base OTHER, OTHER replays each trace just
# before REPLAY, and the summary gives both counts and the median of REPLAY's
# time over OTHER's.
#   vs_glibc.sh [--base OTHER_REPLAY] REPLAY TRACE...
set -u
usage="usage: vs_glibc.sh [--base OTHER_REPLAY] REPLAY TRACE..."
base=""
if [ "${1:-}" = --base ]; then base=${2:-}; shift 2 || { echo "$usage" >&2; exit 2; }; fi
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
replay=$1; shift
for r in "$replay" ${base:+"$base"}; do
    [ -x "$r" ] || { echo "vs_glibc.sh: '$r' is not an executable cudalloc-replay; $usage" >&2; exit 2; }
done
pin=""; command -v taskset > /dev/null && pin="taskset -c $(($(nproc) - 1))"

# "cudalloc-ns glibc-ns" of one replay of trace $2 by binary $1
replay_times() {
    local line
    line=$($pin "$1" --runs 9 --compare "$2" | grep '^  compare: ') ||
        { echo "vs_glibc.sh: $2: no compare line from $1" >&2; return 1; }
    sed -En "s/.*cudalloc ([0-9.]+) ns.*glibc ([0-9.]+) ns.*/\1 \2/p" <<<"$line" | grep . ||
        { echo "vs_glibc.sh: $2: glibc not timed: $line" >&2; return 1; }
}
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

rows=()
for t in "$@"; do
    if [ -n "$base" ]; then
        got=$(replay_times "$base" "$t") || exit 1
        read -r base_ns base_glibc <<<"$got"
    fi
    got=$(replay_times "$replay" "$t") || exit 1
    read -r ns glibc <<<"$got"
    line="$(basename "$t") cudalloc $ns ns glibc $glibc ns glibc/cudalloc $(ratio "$glibc" "$ns")"
    [ -n "$base" ] && line="$line base cudalloc $base_ns ns glibc $base_glibc ns glibc/cudalloc \
$(ratio "$base_glibc" "$base_ns") this/base $(ratio "$ns" "$base_ns")"
    echo "$line"; rows+=("$line")
done
printf '%s\n' "${rows[@]}" | awk '{ n++; if ($9 < 1) f++ } END { printf "glibc faster on %d of %d traces; ", f, n }'
echo "median glibc/cudalloc $(printf '%s\n' "${rows[@]}" | awk '{ print $9 }' | median)"
if [ -n "$base" ]; then
    printf '%s\n' "${rows[@]}" | awk '{ n++; if ($18 < 1) f++ } END { printf "base: glibc faster on %d of %d traces; ", f, n }'
    echo "median glibc/cudalloc $(printf '%s\n' "${rows[@]}" | awk '{ print $18 }' | median); median this/base $(printf '%s\n' "${rows[@]}" | awk '{ print $20 }' | median)"
fi
