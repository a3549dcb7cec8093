#!/usr/bin/env bash
# hang_guard.sh SECONDS COMMAND...: timeout(1) that, before killing a command
# still running after SECONDS, prints every thread's stack (gdb, where it is
# installed) on stdout, so a rare deadlock leaves its trace in the test's log.
# The guard (bash, and gdb) runs without the preload: a sanitizer runtime in
# LD_PRELOAD would report bash's own leaks at its exit as the test's.
if [ -n "${LD_PRELOAD:-}" ] && [ -z "${HANG_GUARD_PRELOAD+x}" ]; then
    exec env -u LD_PRELOAD HANG_GUARD_PRELOAD="$LD_PRELOAD" bash "$0" "$@"
fi
secs=$1; shift
if [ -n "${HANG_GUARD_PRELOAD:-}" ]; then LD_PRELOAD=$HANG_GUARD_PRELOAD "$@" & else "$@" & fi
pid=$!
for ((i = 0; i < secs * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid"; exit $?; }
    sleep 0.1
done
echo "HANG: $* still running after ${secs} s; its threads:"
command -v gdb >/dev/null && gdb -p "$pid" -batch -ex 'thread apply all bt 30' 2>&1 | grep -E '^(Thread|#)'
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
exit 124
