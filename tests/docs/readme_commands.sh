#!/usr/bin/env bash
# The README's commands run as written (issue 34): every line of its ```sh blocks,
# in order, in a scratch directory that holds the build (build -> BUILD_DIR), as a
# newcomer would type them after cloning and building. `make` lines are checked
# as make would start them (make -n: the target exists and its recipe expands;
# nothing long runs again); every other line runs, and exits 0, or 3 where it
# asks for --fail-over and says so. Then every link of the README and docs/
# leads to a file and heading that exist. About 5 s.
#   usage: readme_commands.sh BUILD_DIR
set -u
build=$(cd "${1:?usage: readme_commands.sh BUILD_DIR}" && pwd)
repo=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$build" "$tmp/build"
pass=0 fail=0
awk '/^```sh$/ { on = 1; next } /^```/ { on = 0 } on && NF' README.md >"$tmp/commands"
n=$(wc -l <"$tmp/commands")
[ "$n" -ge 4 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: README: only $n commands in sh blocks"; }
while IFS= read -r line; do
    cmd=${line%%#*}
    case $cmd in
    make*)
        if make -C "$repo" -n ${cmd#make} BUILD="$build" >"$tmp/out" 2>&1; then pass=$((pass + 1)); else
            fail=$((fail + 1)); echo "FAIL: README: '$line': make -n fails"; sed 's/^/    /' "$tmp/out" | tail -5; fi ;;
    *)
        want=0
        case $line in *--fail-over*"exit status 3"*) want=3 ;; esac
        (cd "$tmp" && bash -c "$cmd") </dev/null >"$tmp/out" 2>&1
        rc=$?
        if [ $rc -eq $want ]; then pass=$((pass + 1)); else
            fail=$((fail + 1)); echo "FAIL: README: '$line' exited $rc, wanted $want"; sed 's/^/    /' "$tmp/out" | tail -8; fi ;;
    esac
done <"$tmp/commands"
# Every link of the README and docs/ leads somewhere: a file of the tree, a
# heading of it (GitHub's anchors).
python3 - README.md docs/*.md <<'EOF' && pass=$((pass + 1)) || fail=$((fail + 1))
import os, re, sys
def anchors(path):
    text, fence, out = open(path).read(), False, set()
    for line in text.split("\n"):
        fence ^= line.startswith("```")
        m = None if fence else re.match(r"#+ (.*)", line)
        if m:
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out
bad = []
for doc in sys.argv[1:]:
    for target in re.findall(r"\]\(([^)\s]+)\)", open(doc).read()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        path = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
        if not os.path.exists(path) or (anchor and path.endswith(".md") and anchor not in anchors(path)):
            bad.append("%s: %s" % (doc, target))
if bad:
    print("FAIL: links lead nowhere:\n  " + "\n  ".join(bad))
sys.exit(1 if bad else 0)
EOF
echo "readme commands: $pass passed, $fail failed"
[ $fail -eq 0 ]
