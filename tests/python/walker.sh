#!/usr/bin/env bash
# The Python frame walker with every Python 3 at hand (python3 on PATH,
# /usr/bin/python3, pyenv's versions): its layout table against that
# Python's headers (when they are installed), then walker.py (frames as
# Python has them). Supported versions must give Python frames; others
# native frames only and a reason. Needs at least one supported Python.
set -u
build=${1:?usage: walker.sh BUILD_DIR}
probe=$build/tests/python/libpyprobe.so
here=$(dirname "$0")
pass=0 fail=0 supported=0
declare -A seen
for py in python3 /usr/bin/python3 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/*/bin/python3; do
    exe=$(command -v "$py" 2>/dev/null) || continue
    real=$("$exe" -c 'import os, sys; print(os.path.realpath(sys.executable))' 2>/dev/null) || continue
    [ -n "${seen[$real]:-}" ] && continue
    seen[$real]=1
    ver=$("$exe" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    case $ver in 3.1[0-3]) supported=$((supported + 1)) ;; esac
    inc=$("$exe" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    if [ -f "$inc/Python.h" ]; then
        if cc -I. -I"$inc" -I"$inc/internal" -o "$build/tests/python/layout_check" "$here/layout_check.c" &&
            "$build/tests/python/layout_check"; then pass=$((pass + 1)); else
            fail=$((fail + 1)); echo "FAIL layout check with $real ($ver)"; fi
    else
        echo "(no headers for $real ($ver): layout not checked)"
    fi
    if out=$("$exe" "$here/walker.py" "$probe" 2>&1); then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL walker with $real ($ver)"; fi
    echo "$out" | tail -n 40
done
if [ $supported -eq 0 ]; then fail=$((fail + 1)); echo "FAIL: no Python 3.10 to 3.13 here to test with"; fi
echo "pyframes: $pass passed, $fail failed"
[ $fail -eq 0 ]
