#!/usr/bin/env bash
# cudalloc-report on hostile files (make_hostile.py, at full size): each within
# a time and memory bound set by the file, the ones that are no snapshot
# refused in one line naming the place, and no control byte of the file's
# reaching the terminal or a report.
#   run.sh BIN_DIR
set -u
bin=${1:?usage: run.sh BIN_DIR}
here=$(cd "$(dirname "$0")" && pwd)
report=$bin/cudalloc-report
pass=0 fail=0
ok() { pass=$((pass + 1)); }
no() { echo "FAIL: $*"; fail=$((fail + 1)); }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 "$here/make_hostile.py" "$tmp" || { echo "FAIL: make_hostile.py"; exit 1; }

# The bound (REPORT.md, "Hostile files"): 10 s, and at most 64 MiB plus 32
# times the file's size resident, whatever the file claims.
bounded() { # file (in the cases' folder), expected exit status, text the one-line error must hold (or ""), and
    # the command (cudalloc-report FILE --txt OUT when none)
    local file=$1 f=$tmp/$1 size rc secs kb name=${1%%.*}
    local want=$2 text=$3; shift 3
    [ $# -gt 0 ] || set -- "$report" "$f" --txt "$tmp/$name.txt"
    size=$(stat -c %s "$f")
    /usr/bin/time -f '%e %M' -o "$tmp/time" timeout 60 "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    read -r secs kb < <(tail -1 "$tmp/time") # (a first line says a non-zero exit)
    echo "hostile $file ($(basename "$1")): $(numfmt --to=iec "$size")B, exit $rc, $secs s, $((kb / 1024)) MiB"
    [ "$rc" = "$want" ] && ok || no "$file: exit $rc, wanted $want: $(head -c 300 "$tmp/err")"
    awk -v s="$secs" 'BEGIN{exit !(s < 10)}' && ok || no "$file: $secs s (bound 10 s)"
    local most=$(( 65536 + 32 * size / 1024 )) bound="64 MiB + 32 x $size B"
    case $file in *.gz) # inflated to 32 x its size + 16 MiB at most (ca_gz_most), read into 8 x that at most
        most=$(( 65536 + 8 * (32 * size / 1024 + 16384) )) bound="64 MiB + 8 x (32 x $size B + 16 MiB)";;
    esac
    [ "$kb" -le $most ] && ok || no "$file: $kb KB resident (bound $bound)"
    if [ -n "$text" ]; then
        [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q -- "$text" "$tmp/err" && ok || no "$file: not one line with '$text': $(cat "$tmp/err")"
    fi
}
bounded shared_blocks.pickle 2 "segments' blocks: more segments, blocks, trace entries and annotations than the .* distinct dicts"
bounded shared_entry.pickle 2 "device_traces\[0\]: more segments, blocks, trace entries and annotations than the 4 distinct dicts"
bounded one_address.pickle 0 ""
bounded reverse_annotations.pickle 0 ""
bounded many_unmaps.pickle 0 ""
bounded unmap_pieces.pickle 0 ""
bounded overlapping_blocks.pickle 2 "segments\[0\].blocks\[1\]: the block \[0x7f0000100000, +2097152) overlaps the block before it"
bounded block_outside.pickle 2 "segments\[0\].blocks\[1\]: the block \[0x7f0000300000, +1048576) lies outside the bounds of segment"
# Sizes that name terabytes in a few rows (issue 30): time and memory follow
# the rows, in every tool that replays them, gzipped too.
gzip -k "$tmp/huge_sizes.csv" "$tmp/huge_sizes.pickle"
for f in huge_sizes.csv huge_sizes.pickle huge_sizes.csv.gz huge_sizes.pickle.gz; do
    bounded $f 0 ""
done
bounded huge_sizes.csv 0 "" "$bin/cudalloc-replay" --min-capacity --runs 2 "$tmp/huge_sizes.csv"
bounded huge_sizes.csv 0 "" "$report" "$tmp/huge_sizes.csv" --capacity 80GiB --json "$tmp/huge.json" --html "$tmp/huge.html" --pickle "$tmp/huge.out.pickle"
bounded huge_rank_0.json 0 "" "$report" "$tmp/huge_rank_0.json" "$tmp/huge_rank_1.json"

# Compressed bombs of every kind (issue 30): read as they inflate, refused at
# the first byte that cannot be the input, or past 32 times the file's size.
bounded zeros.pickle.gz 2 "gzip-compressed: offset 0: byte 0x00: not a pickle"
bounded pickle_then_zeros.pickle.gz 2 "gzip-compressed: offset 3: unknown opcode 0x00"
bounded long_string.pickle.gz 2 "offset 13: BINUNICODE8: 1073741824 bytes: longer than any string a snapshot holds"
bounded many_entries.pickle.gz 2 "gzip: it inflates past .* bytes, the most read from .* compressed (a bomb?)"
bounded zeros.csv.gz 2 "zeros.csv.gz: neither a CSV trace nor a PyTorch snapshot: binary content"
bounded blank.csv.gz 2 "blank.csv.gz: neither a CSV trace nor a PyTorch snapshot: text whose first line has no comma"
bounded zeros.json.gz 2 "zeros.json.gz:1: bad header"
bounded many_rows.csv.gz 2 "many_rows.csv.gz:0: gzip: it inflates past"
bounded many_rows.csv.gz 2 "many_rows.csv.gz:0: gzip: it inflates past" "$bin/cudalloc-replay" "$tmp/many_rows.csv.gz"
# the steps of reversed annotations are found all the same, in time order
grep -q "50000 boundaries from ProfilerStep annotations\|iterations *50000" "$tmp/reverse_annotations.txt" && ok ||
    no "reverse_annotations: 50000 steps not found: $(grep -m1 iterations "$tmp/reverse_annotations.txt")"

# Control bytes of the file's: escaped on the terminal and in every report.
"$report" "$tmp/escape_frames.pickle" --txt "$tmp/e.txt" --json "$tmp/e.json" --html "$tmp/e.html" >"$tmp/e.out" 2>&1
"$report" "$tmp/escape_frames.pickle" >>"$tmp/e.out" 2>&1
"$report" "$tmp/rank_escape_0.json" "$tmp/rank_escape_1.json" >"$tmp/r.out" 2>&1
for f in e.out e.txt e.json e.html r.out; do
    [ -s "$tmp/$f" ] && ! grep -q $'\x1b\|\x07' "$tmp/$f" && ok || no "$f is missing or holds a raw control byte of the file's"
done
grep -q 'step\\x1b' "$tmp/e.txt" && ok || no "escape_frames: the frame's name is not shown escaped in the text"
grep -q 'healthy\\x1b' "$tmp/r.out" && ok || no "ranks: the verdict code is not shown escaped"

echo "hostile: $pass passed, $fail failed"
[ $fail -eq 0 ]
