#!/usr/bin/env bash
# Finds the Debian packages cudalloc needs; installs the missing ones when run as
# root, otherwise prints the exact apt-get line and fails.
set -u
need=(g++ check uthash-dev libunwind-dev zlib1g-dev pkg-config libmimalloc-dev libjemalloc-dev python3 python3-dev chromium binutils clang libclang-rt-dev groff-base man-db python3-pip prometheus)
[ -n "${CUDALLOC_DEPS_EXTRA:-}" ] && need+=($CUDALLOC_DEPS_EXTRA)
missing=()
for p in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null && exit 0
    echo "deps: apt-get failed; run: apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
fi
echo "deps: missing ${missing[*]}; run as root: apt-get update && apt-get install -y ${missing[*]}" >&2
exit 1
