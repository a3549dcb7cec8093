#!/bin/bash
# reports/'s rooms: a file includes only its own room and rooms before it in
# the order given (reports/module.mk's REPORTS_ROOMS, lowest first), and a
# room's *_internal.h only from that room. Usage: rooms.sh ROOM...
set -u
rank() { local i=0; for r in "${rooms[@]}"; do [ "$r" = "$1" ] && { echo $i; return; }; i=$((i + 1)); done; echo -1; }
rooms=("$@")
bad=0 n=0
for room in "${rooms[@]}"; do
    own=$(rank "$room")
    for f in reports/"$room"/*.[ch]; do
        n=$((n + 1))
        while read -r inc; do
            other=${inc#reports/}; other=${other%%/*}
            r=$(rank "$other")
            if [ "$r" -lt 0 ] || [ "$r" -gt "$own" ]; then
                echo "rooms: $f includes $inc: $room may include only ${rooms[*]:0:$((own + 1))}"; bad=$((bad + 1))
            elif [ "$other" != "$room" ] && [[ "$inc" == *_internal.h ]]; then
                echo "rooms: $f includes $inc, private to $other/"; bad=$((bad + 1))
            fi
        done < <(sed -n 's/^#include "\(reports\/[^"]*\)".*/\1/p' "$f")
    done
done
stray=$(ls reports/*.[ch] 2>/dev/null)
[ -n "$stray" ] && { echo "rooms: outside any room: $stray"; bad=$((bad + 1)); }
echo "rooms: $n files in ${#rooms[@]} rooms, $bad wrong includes"
[ "$bad" -eq 0 ]
