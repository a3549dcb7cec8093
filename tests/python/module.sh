#!/usr/bin/env bash
# The cudalloc Python module (python/cudalloc), with each Python at hand (python3 on
# PATH and Debian's /usr/bin/python3): without the preload (every call a no-op),
# under it on the simulated device (marks, PyTorch-named stats, reports), as
# PyTorch's pluggable allocator through a stand-in torch, `python -m cudalloc run`,
# its ctypes struct against include/cudalloc.h, and `pip install` where pip,
# setuptools and wheel are there.
set -u
build=${1:?usage: module.sh BUILD_DIR}
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$build" && pwd)
prog=$repo/tests/python/module_prog.py
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/    /' <<<"$2"; }
check() { # name, command...: exit 0
    local name=$1 out
    shift
    if out=$("$@" 2>&1); then ok; else bad "$name (exit $?)" "$out"; fi
}

version=$("$build/bin/cudalloc" --version | sed 's/^cudalloc //')
release=$(sed -n 1p "$repo/VERSION")
lib=$build/lib/libcudalloc.so.0

# Field for field, the ctypes struct is the C one.
check "Stats fields match include/cudalloc.h" python3 - "$repo" <<'EOF2'
import re, sys
sys.path.insert(0, sys.argv[1] + "/python")
from cudalloc import _native
header = open(sys.argv[1] + "/include/cudalloc.h").read()
body = re.search(r"typedef struct cudalloc_stats \{(.*?)\} cudalloc_stats;", header, re.S).group(1)
body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
fields = [n for decl in re.findall(r"int64_t ([^;]*);", body) for n in re.split(r"\s*,\s*", decl.strip())]
mine = [f[0] for f in _native.Stats._fields_]
assert fields == mine, (fields, mine)
EOF2

declare -A seen
for py in python3 /usr/bin/python3; do
    exe=$(command -v "$py" 2>/dev/null) || continue
    real=$("$exe" -c 'import os, sys; print(os.path.realpath(sys.executable))' 2>/dev/null) || continue
    [ -n "${seen[$real]:-}" ] && continue
    seen[$real]=1
    echo "== $real"
    export PYTHONPATH=$repo/python
    check "$real: no preload" "$real" "$prog" bare "$release"
    out=$("$build/bin/cudalloc" run --sim 256MiB --report "$tmp/p" -- "$real" "$prog" preload "$version" "$tmp/p" 2>&1)
    if [ $? -eq 0 ] && grep -q "^cudalloc: 10 iterations (explicit)" <<<"$out"; then ok; else bad "$real: under the preload" "$out"; fi
    check "$real: pluggable allocator" env LD_LIBRARY_PATH="$build/sim" PYTHONPATH="$repo/python:$repo/tests/python/fake_torch" \
        "$real" "$prog" pluggable "$lib"
    # A server with a stream per request (server_streams.py), libcudart through ctypes
    # (loaded RTLD_LOCAL: the preload's stream hooks find the real calls all the same):
    # the requests' small blocks share a pool; each stream a granule is past the bound.
    srv=$repo/tests/python/server_streams.py
    out=$("$build/bin/cudalloc" run --sim 1GiB -- "$real" "$srv" 2000 64 2>&1)
    if [ $? -eq 0 ] && grep -q "server_streams: ok" <<<"$out"; then ok; else bad "$real: server_streams" "$out"; fi
    out=$("$build/bin/cudalloc" run --sim 1GiB --conf share_bytes:0 -- "$real" "$srv" 2000 64 2>&1)
    if [ $? -eq 1 ] && grep -q "FAILED: 0 errors" <<<"$out"; then ok; else
        bad "$real: server_streams with share_bytes:0 (a granule a stream) should pass the bound" "$out"; fi
    # python -m cudalloc run: a .py program runs with this Python; the status comes back
    out=$(cd "$tmp" && "$real" -m cudalloc run --sim 256MiB --report "$tmp/m" -- "$prog" preload "$version" "$tmp/m" 2>&1)
    if [ $? -eq 0 ] && grep -q "module_prog preload: ok" <<<"$out"; then ok; else bad "$real: python -m cudalloc run" "$out"; fi
    (cd "$tmp" && "$real" -m cudalloc run --sim 256MiB "$prog" exit 7 >/dev/null 2>&1)
    rc=$?
    [ $rc -eq 7 ] && ok || bad "$real: python -m cudalloc run: exit status 7 came back as $rc"
    out=$("$real" -m cudalloc --version)
    if [ "$out" = "$(printf 'python -m cudalloc (cudalloc) %s\ncudalloc %s' "$release" "$version")" ]; then ok; else
        bad "$real: python -m cudalloc --version" "$out"; fi
    out=$("$real" -m cudalloc frobnicate 2>&1)
    [ $? -eq 2 ] && grep -q "unknown command 'frobnicate': accepted: run" <<<"$out" && ok || bad "$real: unknown command" "$out"
    unset PYTHONPATH

    # pip install --no-build-isolation python/ (a copy: the build writes next to its sources)
    if "$real" -c 'import setuptools, wheel, pip' 2>/dev/null; then
        mkdir -p "$tmp/src" && cp -r "$repo/python" "$repo/VERSION" "$tmp/src/" && rm -rf "$tmp/target"
        if out=$("$real" -m pip install -q --no-build-isolation --no-deps --no-index --target "$tmp/target" "$tmp/src/python" 2>&1); then
            out=$(cd "$tmp" && PATH="$build/bin:$PATH" PYTHONPATH="$tmp/target" "$real" -c \
                'import cudalloc, os; print(cudalloc.__version__, os.path.dirname(cudalloc.__file__), cudalloc.library_path())')
            want="$release $tmp/target/cudalloc $lib"
            [ "$out" = "$want" ] && ok || bad "$real: pip-installed module: got '$out', want '$want'"
        else
            bad "$real: pip install --no-build-isolation python/" "$out"
        fi
        rm -rf "$tmp/src"
    else
        echo "SKIP $real: pip install (no pip, setuptools or wheel)"
    fi
done
echo "python module: $pass passed, $fail failed"
[ $fail -eq 0 ]
