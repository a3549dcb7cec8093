#!/usr/bin/env bash
# Whole-program tests of cudalloc-replay: the shared traces replay with the
# figures the allocator promises, and malformed input gets one clear line and
# exit status 2.
set -u
replay=${1:?usage: replay_system.sh BIN_DIR TRACES_DIR}/cudalloc-replay
traces=${2:?}
fail=0 pass=0
ok() { pass=$((pass + 1)); }
no() { echo "FAIL: $*"; fail=$((fail + 1)); }
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$2"; }

for f in "$traces"/*.csv; do
    out=$("$replay" --runs 5 --min-capacity "$f") || { no "replay $f exited $?"; continue; }
    echo "$out"
    util=$(field utilization "$out"); ratio=$(field ratio "$out"); ooms=$(field ooms "$out")
    req=$(field peak_requested "$out"); res=$(field peak_reserved "$out")
    awk -v u="$util" 'BEGIN{exit !(u >= 0.97)}' && ok || no "$f: utilization $util < 0.97"
    awk -v r="$ratio" 'BEGIN{exit !(r <= 1.02)}' && ok || no "$f: min_capacity ratio $ratio > 1.02"
    [ "$ooms" = 0 ] && ok || no "$f: $ooms OOMs without a capacity"
    classic=$("$replay" --runs 3 --mode classic "$f") && echo "$classic" || no "classic replay of $f"
    # Host backend: real memory, same placement decisions.
    if [ "$req" -lt $((1 << 30)) ]; then
        host=$("$replay" --runs 1 --backend host "$f") || no "host replay of $f"
        [ "$(field peak_reserved "$host")" = "$res" ] && ok || no "$f: host and count backends disagree"
    fi
done

# A small trace: reserved stays within 4 MiB of requested whatever its size.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
{ echo "Thread,Time,Action,Pointer,Size,Stream"
  for i in $(seq 1 40); do echo "1,$i,allocate,0x$i,$((i * 1000 + 7)),0x0"; done
  for i in $(seq 1 2 40); do echo "1,$((40 + i)),free,0x$i,$((i * 1000 + 7)),0x0"; done
  echo "1,99,allocate,0x99,3000000,0x0"; } > "$tmp/small.csv"
out=$("$replay" --runs 1 "$tmp/small.csv")
echo "$out"
gap=$(( $(field peak_reserved "$out") - $(field peak_requested "$out") ))
[ "$gap" -le $((4 << 20)) ] && ok || no "small trace: reserved - requested = $gap > 4 MiB"

# --capacity: failed allocations count as OOMs and the replay goes on.
out=$("$replay" --runs 1 --capacity 2MiB "$tmp/small.csv")
[ "$(field ooms "$out")" = 1 ] && ok || no "capacity 2MiB should give exactly 1 OOM: $out"

# Malformed input: FILE:LINE: message, exit 2.
check_bad() { # name, content, expected text
    printf '%b' "$2" > "$tmp/$1.csv"
    msg=$("$replay" --runs 1 "$tmp/$1.csv" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <<<"$msg")" -eq 1 ] && grep -q "^$tmp/$1.csv:[0-9]*: .*$3" <<<"$msg"; then ok
    else no "$1: rc=$rc msg='$msg' (wanted '$3')"; fi
}
H='Thread,Time,Action,Pointer,Size,Stream\n'
check_bad header 'Thread,Time,Action\n1,0,allocate,0x1,10,0x0\n' 'header'
check_bad action "${H}1,0,allocat,0x1,10,0x0\n" 'action'
check_bad number "${H}1,0,allocate,0x1,1x0,0x0\n" 'Size'
check_bad unknown "${H}1,0,free,0x5,10,0x0\n" 'not live'
check_bad twice "${H}1,0,allocate,0x1,10,0x0\n1,1,allocate,0x1,10,0x0\n" 'allocated again'
msg=$("$replay" --mode fast "$tmp/small.csv" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "expandable, classic" <<<"$msg" && ok || no "bad --mode: rc=$rc '$msg'"
msg=$("$replay" "$tmp/missing.csv" 2>&1); rc=$?
[ $rc -eq 2 ] && ok || no "missing file: rc=$rc '$msg'"

echo "replay: $pass passed, $fail failed"
[ $fail -eq 0 ]
