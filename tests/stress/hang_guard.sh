#!/usr/bin/env bash
# hang_guard.sh SECONDS COMMAND...: timeout(1) that, before killing a command
# still running after SECONDS, prints every thread's stack (gdb, where it is
# installed) on stdout, so a rare deadlock leaves its trace in the test's log.
secs=$1; shift
"$@" &
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
