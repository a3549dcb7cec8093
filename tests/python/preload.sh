#!/usr/bin/env bash
# Python programs under cudalloc (the launcher, the simulated device), with
# every supported Python at hand (python3 on PATH and /usr/bin/python3 at
# least): the leak is named by its Python function and line, iterations are
# found without marks, and the reports carry the Python frames. An
# unsupported Python runs as before, with native frames and a note.
set -u
build=${1:?usage: preload.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
prog=$here/train_loop.py
line=$(grep -n "the leak: kept for ever" "$prog" | cut -d: -f1)
want="keep_metric ($prog:$line)"
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() { # name, python, [--conf CONF] [--report PREFIX], program arguments...
    name=$1 py=$2
    shift 2
    local opts=()
    while [ $# -gt 0 ] && { [ "$1" = --conf ] || [ "$1" = --report ]; }; do opts+=("$1" "$2"); shift 2; done
    out=$("$build/bin/cudalloc" run --sim 1GiB "${opts[@]}" -- "$py" "$prog" "$@" 2>&1)
    local rc=$?
    if [ $rc -eq 0 ]; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL $name: exit $rc"; echo "$out" | sed 's/^/    /'; fi
}
expect() { # name, text the last output must contain
    if grep -qF -- "$2" <<<"$out"; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL $1: output lacks '$2'"; echo "$out" | sed 's/^/    /'; fi
}
refuse() { # name, text the last output must not contain
    if ! grep -qF -- "$2" <<<"$out"; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL $1: output has '$2'"; echo "$out" | sed 's/^/    /'; fi
}
detected() { # name: iterations found by detection, at least 30 of the 40 steps
    local n
    n=$(sed -n 's/^cudalloc: \([0-9]*\) iterations (detected).*/\1/p' <<<"$out")
    if [ -n "$n" ] && [ "$n" -ge 30 ]; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL $1: iterations not detected (${n:-none})"; echo "$out" | sed 's/^/    /'; fi
}

# The reports of a marked run: the leak's frames in .json, the snapshot's
# frames ({filename, line, name}, as memory_viz reads them) in .pickle.
check_files() { # name, python, prefix
    if "$2" - "$3" "$prog" "$line" <<'EOF'; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $1: report files"; fi
import json, pickle, sys
prefix, path, line = sys.argv[1], sys.argv[2], int(sys.argv[3])
leak = json.load(open(prefix + ".json"))["leaks"][0]
assert leak["site"] == "keep_metric (%s:%d)" % (path, line), leak["site"]
py = [f for f in leak["frames"] if f["module"] == "python"]
assert [f["function"] for f in py] == ["keep_metric", "train_step", "train", "<module>"], py
assert (py[0]["file"], py[0]["line"]) == (path, line), py[0]
assert leak["frames"][0]["function"] == "cudaMalloc", leak["frames"][0]
inner = [f["module"] for f in leak["frames"] if any(k in f["module"] for k in ("libpython", "libffi", "_ctypes"))]
assert not inner, inner
snap = pickle.load(open(prefix + ".pickle", "rb"))
frame = {"filename": path, "line": line, "name": "keep_metric"}
blocks = [f for s in snap["segments"] for b in s["blocks"] for f in b["frames"]]
trace = [f for t in snap["device_traces"] for e in t for f in e["frames"]]
assert frame in blocks, "no keep_metric frame in the segments' blocks"
assert frame in trace, "no keep_metric frame in the trace"
EOF
    if grep -qF "keep_metric at $prog:$line" "$3.txt" && grep -qF "$want" "$3.html"; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL $1: keep_metric missing from $3.txt or $3.html"; fi
}

declare -A seen
supported=()
unsupported=()
for py in python3 /usr/bin/python3 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/*/bin/python3; do
    exe=$(command -v "$py" 2>/dev/null) || continue
    real=$("$exe" -c 'import os, sys; print(os.path.realpath(sys.executable))' 2>/dev/null) || continue
    [ -n "${seen[$real]:-}" ] && continue
    seen[$real]=1
    case $("$exe" -c 'import sys; print("%d.%d" % sys.version_info[:2])') in
    3.1[0-3]) supported+=("$real") ;;
    3.[6-9]) unsupported+=("$real") ;;
    esac
done
[ ${#supported[@]} -gt 0 ] || { echo "FAIL: no Python 3.10 to 3.13 here"; echo "python: 0 passed, 1 failed"; exit 1; }

for py in "${supported[@]}"; do
    v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    run "$v no marks" "$py"
    expect "$v no marks: the leak named by its Python line" "since iteration 1: allocations from $want"
    detected "$v no marks"
    run "$v marks" "$py" --marks
    expect "$v marks: explicit" "40 iterations (explicit)"
    expect "$v marks: the leak named by its Python line" "allocations from $want"
    run "$v healthy" "$py" --healthy
    expect "$v healthy: no leak" "HEALTHY: no leak over"
    detected "$v healthy"
    run "$v GIL held" "$py" --gil
    expect "$v GIL held: the leak named by its Python line" "allocations from $want"
    run "$v thread" "$py" --thread
    expect "$v thread: the leak named by its Python line" "allocations from $want"
    detected "$v thread"
    run "$v python_frames:false" "$py" --conf python_frames:false --marks
    expect "$v python_frames:false: native frames name it" "since iteration 1: allocations from cudaMalloc ("
    refuse "$v python_frames:false: no Python frames" "keep_metric"
    run "$v reports" "$py" --report "$tmp/r" --marks
    check_files "$v reports" "$py" "$tmp/r"
    # Loaded late: a C program allocates, then dlopens this Python's library.
    libpy=$("$py" -c 'import os, sysconfig as s; p = os.path.join(s.get_config_var("LIBDIR"), s.get_config_var("INSTSONAME") or ""); print(p if os.path.isfile(p) else "")')
    if [ -n "$libpy" ]; then
        out=$(PYTHONHOME=$("$py" -c 'import sys; print(sys.prefix)') "$build/bin/cudalloc" run --sim 1GiB -- \
            "$build/tests/preload/embed_python" "$libpy" "$prog" 2>&1)
        expect "$v loaded with dlopen: the leak named by its Python line" "since iteration 1: allocations from $want"
        detected "$v loaded with dlopen"
    else
        echo "($v: no shared libpython: the dlopen case not run)"
    fi
done
# A library between the program and cudaMalloc (PyTorch's Python layers are
# one): the leak is named by the program's line, not the library's.
mkdir -p "$tmp/site-packages"
printf 'import ctypes\ncudart = ctypes.CDLL("libcudart.so.13")\n\ndef malloc(pp, n):\n    return cudart.cudaMalloc(pp, ctypes.c_size_t(n))\n' \
    >"$tmp/site-packages/devlib.py"
run "library frames" "${supported[0]}" --marks --lib "$tmp/site-packages"
expect "library frames: the program's line names the leak" "since iteration 1: allocations from $want"

for py in "${unsupported[@]}"; do
    v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    run "$v (unsupported)" "$py" --marks
    expect "$v (unsupported): says so" "Python $v is not supported"
    expect "$v (unsupported): native frames" "since iteration 1: allocations from cudaMalloc ("
done
echo "python: $pass passed, $fail failed"
[ $fail -eq 0 ]
