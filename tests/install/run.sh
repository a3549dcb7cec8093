#!/usr/bin/env bash
# make install into a temporary DESTDIR, then the installed tree used from outside
# the source tree, as its users use it: the launcher on the simulated device (the
# README's demo, reports, cudalloc-report and cudalloc-replay on them), the man
# pages, pkg-config and the header, the Python module; the same tree copied
# elsewhere with the original gone, and reached through a symbolic link; make
# uninstall leaves nothing; a tree without .git builds and says its version.
#   tests/install/run.sh BUILD_DIR      (MAKE: the make to run, default make)
set -u
build_arg=${1:?usage: run.sh BUILD_DIR} # as make names it: its targets must keep their names
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$build_arg" && pwd)
make=${MAKE:-make}
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/    /' <<<"$2" | head -40; }
has() { grep -qF -- "$2" <<<"$3" && ok || bad "$1: no '$2'" "$3"; }

prefix=/opt/cudalloc
dest=$tmp/dest
P=$dest$prefix
release=$(sed -n 1p "$repo/VERSION")
site=$(python3 "$repo/scripts/python_site.py" "$prefix")
cd "$tmp" || exit 1 # nothing below may lean on the source tree being the current folder

out=$("$make" -s --no-print-directory -C "$repo" BUILD="$build_arg" install DESTDIR="$dest" PREFIX="$prefix" 2>&1) ||
    { bad "make install" "$out"; echo "install: $pass passed, $fail failed"; exit 1; }
version=$("$build/bin/cudalloc" --version | sed 's/^cudalloc //') # as make install left the build

# 1. Exactly the GNU layout.
want=$(sort <<EOF
$prefix/bin/cudalloc
$prefix/bin/cudalloc-replay
$prefix/bin/cudalloc-report
$prefix/bin/demo_trainer
$prefix/include/cudalloc.h
$prefix/lib/cudalloc/sim/libcuda.so -> libcuda.so.1
$prefix/lib/cudalloc/sim/libcuda.so.1
$prefix/lib/cudalloc/sim/libcudart.so -> libcudart.so.13
$prefix/lib/cudalloc/sim/libcudart.so.13
$prefix/lib/libcudalloc.so -> libcudalloc.so.0
$prefix/lib/libcudalloc.so.0 -> libcudalloc.so.$release
$prefix/lib/libcudalloc.so.$release
$prefix/lib/pkgconfig/cudalloc.pc
$prefix/share/man/man1/cudalloc-replay.1
$prefix/share/man/man1/cudalloc-report.1
$prefix/share/man/man1/cudalloc.1
$prefix/share/man/man7/cudalloc.7
$site/cudalloc/__init__.py
$site/cudalloc/__main__.py
$site/cudalloc/_build.py
$site/cudalloc/_native.py
EOF
)
got=$(cd "$dest" && find . \( -type f -o -type l \) | sed 's|^\.||' | sort | while read -r f; do
    if [ -L "$dest$f" ]; then echo "$f -> $(readlink "$dest$f")"; else echo "$f"; fi; done)
[ "$got" = "$want" ] && ok || bad "installed files" "$(diff <(echo "$want") <(echo "$got"))"
[ "$(readelf -d "$P/lib/libcudalloc.so.$release" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')" = libcudalloc.so.0 ] &&
    ok || bad "soname of libcudalloc.so.$release is not libcudalloc.so.0"
# Nothing installed points back into the build or the source tree.
for f in "$P"/bin/* "$P"/lib/libcudalloc.so.$release "$P"/lib/cudalloc/sim/*.so.*; do
    rp=$(readelf -d "$f" | grep -E 'R(UN)?PATH' || true)
    case "$rp" in *"$repo"*) bad "$f: RUNPATH into the source tree: $rp" ;; *) ok ;; esac
done
grep -rlF "$repo" "$P/lib/pkgconfig" "$dest$site" && bad "an installed text file names the source tree" || ok

# 2. The installed launcher, from elsewhere: its own library, the README's demo.
L=$P/bin/cudalloc
[ "$("$L" --version)" = "cudalloc $version" ] && ok || bad "installed --version: $("$L" --version)"
maps() { "$1" run --sim 256MiB -- sh -c 'grep -o "/[^ ]*libcudalloc[^ ]*\|/[^ ]*sim/libcuda[^ ]*" /proc/$$/maps | sort -u; echo "$LD_LIBRARY_PATH"' 2>/dev/null; }
out=$(maps "$L")
want=$(printf '%s\n%s\n' "$P/lib/libcudalloc.so.$release" "$P/lib/cudalloc/sim")
[ "$out" = "$want" ] && ok || bad "the installed launcher loads its own library and simulated device" "$out"
out=$("$L" run --sim 512MiB --report "$tmp/run" -- "$P/bin/demo_trainer" --device cpu --steps 6 --leak eval-grad 2>&1)
rc=$?
[ $rc -eq 0 ] && ok || bad "installed demo_trainer under the installed launcher: exit $rc" "$out"
has "the installed run" "cudalloc: LEAK: a forward pass run under evaluate" "$out"
for ext in txt json html pickle csv; do [ -s "$tmp/run.$ext" ] && ok || bad "no report $tmp/run.$ext"; done
gen=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["generator"])' "$tmp/run.json")
[ "$gen" = "cudalloc $version" ] && ok || bad "the JSON report's generator is '$gen', want 'cudalloc $version'"
out=$("$P/bin/cudalloc-report" "$tmp/run.csv" 2>&1)
has "installed cudalloc-report on the run's trace" "VERDICT: LEAK" "$out"
out=$("$P/bin/cudalloc-report" "$tmp/run.json" 2>&1)
has "installed cudalloc-report on the run's JSON" "runs out of memory first" "$out"
# ranks' reports of an older cudalloc ("generator": "cudalloc") still read; another generator's not
for g in "cudalloc" "cudallocator 1.0"; do
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); r["generator"] = sys.argv[3]; json.dump(r, open(sys.argv[2], "w"))' \
        "$tmp/run.json" "$tmp/gen.json" "$g"
    out=$("$P/bin/cudalloc-report" "$tmp/gen.json" 2>&1)
    rc=$?
    case "$g:$rc" in cudalloc:0 | "cudallocator 1.0:2") ok ;; *) bad "cudalloc-report, generator '$g': exit $rc" "$out" ;; esac
done
out=$("$P/bin/cudalloc-replay" --runs 1 --min-capacity "$tmp/run.csv" 2>&1)
has "installed cudalloc-replay on the run's trace" "min_capacity=" "$out"

# 3. man finds the pages; the header and pkg-config serve a program.
for page in "1 cudalloc" "1 cudalloc-report" "1 cudalloc-replay" "7 cudalloc"; do
    out=$(MANWIDTH=100 MANPAGER=cat PAGER=cat man -M "$P/share/man" $page 2>&1)
    has "man $page" "SYNOPSIS" "$out"
done
has "man 7 cudalloc" "max_reserved" "$(MANPAGER=cat man -M "$P/share/man" 7 cudalloc 2>&1)"
export PKG_CONFIG_PATH=$P/lib/pkgconfig
[ "$(pkg-config --modversion cudalloc)" = "$release" ] && ok || bad "pkg-config --modversion: $(pkg-config --modversion cudalloc)"
[ "$(pkg-config --variable=prefix cudalloc)" = "$prefix" ] && ok || bad "pkg-config prefix: $(pkg-config --variable=prefix cudalloc)"
cat > "$tmp/uses_header.c" <<'EOF'
#include <cudalloc.h>
#include <stdio.h>
int main(void) {
    printf("%s %d\n", cudalloc_version ? cudalloc_version() : "without", CUDALLOC_CALL(cudalloc_step));
    return 0;
}
EOF
flags=$(pkg-config --define-variable=prefix="$P" --cflags --libs cudalloc)
has "pkg-config --cflags --libs" "-I$P/include" "$flags"
if cc -o "$tmp/weak" "$tmp/uses_header.c" $(pkg-config --define-variable=prefix="$P" --cflags cudalloc) 2>&1; then
    [ "$("$tmp/weak")" = "without -1" ] && ok || bad "the header's weak calls without the preload: $("$tmp/weak")"
    [ "$("$L" run --sim 64MiB -- "$tmp/weak" 2>/dev/null)" = "$version 0" ] && ok ||
        bad "the header's calls under the launcher: $("$L" run --sim 64MiB -- "$tmp/weak" 2>&1)"
else bad "cc with pkg-config --cflags"; fi
if cc -o "$tmp/linked" "$tmp/uses_header.c" -Wl,--no-as-needed $flags 2>&1; then
    has "linked with pkg-config --libs" "libcudalloc.so.0" "$(readelf -d "$tmp/linked" | grep NEEDED)"
    [ "$(LD_LIBRARY_PATH="$P/lib" "$tmp/linked" 2>/dev/null)" = "$version 0" ] && ok ||
        bad "linked with pkg-config --libs: $(LD_LIBRARY_PATH="$P/lib" "$tmp/linked" 2>&1)"
else bad "cc with pkg-config --cflags --libs"; fi

# 4. The Python module, installed: python -m cudalloc run, from elsewhere.
cat > "$tmp/train.py" <<'EOF'
import ctypes, os, cudalloc
cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
p = ctypes.c_void_p()
for _ in range(5):
    with cudalloc.iteration():
        assert cudart.cudaMalloc(ctypes.byref(p), 1 << 20) == 0
print(cudalloc.available(), cudalloc.iterations(), cudalloc.stats()["allocated_bytes.all.current"],
      os.path.dirname(cudalloc.__file__), cudalloc.library_path())
EOF
out=$(PYTHONPATH="$dest$site" python3 -m cudalloc run --sim 256MiB -- "$tmp/train.py" 2>/dev/null)
want="True 5 5242880 $dest$site/cudalloc $P/lib/libcudalloc.so.$release"
[ "$out" = "$want" ] && ok || bad "installed python -m cudalloc run: got '$out', want '$want'"

# 5. The tree copied elsewhere, then make uninstall: the copy works alone.
mkdir -p "$tmp/copy" && cp -a "$P" "$tmp/copy/"
C=$tmp/copy/cudalloc
out=$("$make" -s --no-print-directory -C "$repo" BUILD="$build_arg" uninstall DESTDIR="$dest" PREFIX="$prefix" 2>&1) ||
    bad "make uninstall" "$out"
left=$(find "$dest" \( -type f -o -type l \))
[ -z "$left" ] && ok || bad "make uninstall left files" "$left"
out=$(maps "$C/bin/cudalloc")
want=$(printf '%s\n%s\n' "$C/lib/libcudalloc.so.$release" "$C/lib/cudalloc/sim")
[ "$out" = "$want" ] && ok || bad "the copied tree's launcher loads the copy's library" "$out"
mkdir -p "$tmp/links" && ln -s "$C/bin/cudalloc" "$tmp/links/cudalloc"
out=$(maps "$tmp/links/cudalloc")
[ "$out" = "$want" ] && ok || bad "the launcher through a symbolic link finds its tree" "$out"
out=$("$tmp/links/cudalloc" run --sim 512MiB -- "$C/bin/demo_trainer" --device cpu --steps 3 2>&1)
[ $? -eq 0 ] && ok || bad "the copied tree runs the demo" "$out"
has "the copied tree's summary" "3 iterations (explicit)" "$out"
out=$(PYTHONPATH="$tmp/copy/cudalloc${site#"$prefix"}" python3 -m cudalloc run --sim 256MiB -- "$tmp/train.py" 2>/dev/null)
want="True 5 5242880 $tmp/copy/cudalloc${site#"$prefix"}/cudalloc $C/lib/libcudalloc.so.$release"
[ "$out" = "$want" ] && ok || bad "the copied Python module: got '$out', want '$want'"

# 6. A tree without .git (a release tarball) builds and says its version; with the
# commit git archive writes into VERSION, it says that too.
mkdir -p "$tmp/src"
if (cd "$repo" && git ls-files -co --exclude-standard -z 2>/dev/null | xargs -0 tar -cf - 2>/dev/null) | tar -xf - -C "$tmp/src" &&
    [ -f "$tmp/src/Makefile" ]; then
    if out=$("$make" -s --no-print-directory -C "$tmp/src" build/bin/cudalloc 2>&1); then
        [ "$("$tmp/src/build/bin/cudalloc" --version)" = "cudalloc $release" ] && ok ||
            bad "a tree without .git: --version says '$("$tmp/src/build/bin/cudalloc" --version)'"
        printf '%s\n1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d\n' "$release" > "$tmp/src/VERSION"
        "$make" -s --no-print-directory -C "$tmp/src" build/bin/cudalloc >/dev/null 2>&1
        [ "$("$tmp/src/build/bin/cudalloc" --version)" = "cudalloc $release (git 1a2b3c4d5e6f)" ] && ok ||
            bad "a tarball's commit: --version says '$("$tmp/src/build/bin/cudalloc" --version)'"
    else
        bad "a tree without .git does not build" "$out"
    fi
else
    echo "SKIP a tree without .git: this is no git checkout"
fi
if git -C "$repo" rev-parse HEAD >/dev/null 2>&1; then
    out=$("$make" -s --no-print-directory -C "$repo" BUILD="$tmp/dist" dist 2>&1)
    line2=$(tar -xzOf "$tmp/dist/cudalloc-$release.tar.gz" "cudalloc-$release/VERSION" 2>/dev/null | sed -n 2p)
    [ "$line2" = "$(git -C "$repo" rev-parse HEAD)" ] && ok || bad "make dist: VERSION's commit line is '$line2'" "$out"
fi

echo "install: $pass passed, $fail failed"
[ $fail -eq 0 ]
