#!/usr/bin/env bash
# --help, --version, the man pages and the docs (docs/settings.md, docs/reports.md) agree:
#  - every program answers --help (status 0) and --version: one line, one version;
#  - --help is complete: each option the source accepts is in it, and each option in
#    it is accepted (options marked "internal" in the source excepted);
#  - each man page renders without a warning; its SYNOPSIS is the help's usage lines,
#    its OPTIONS the help's options and notes, word for word; cudalloc(7) holds every
#    row of the docs' settings and report-file tables;
#  - docs/reports.md's cudalloc-report options table names the options of its --help.
#   tests/tools/help_man.sh BUILD_DIR
set -u
build=${1:?usage: help_man.sh BUILD_DIR}
repo=$(cd "$(dirname "$0")/../.." && pwd)
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/    /' <<<"$2" | head -30; }
words() { tr -s ' \t\n' '\n' | sed '/^$/d'; }
# A man page as text: ASCII hyphens and quotes, no line breaks inside words.
render() { groff -k -man -Tutf8 -rLL=250n -P-cbou "$1" 2>/dev/null | sed 's/\xe2\x80\x90/-/g; s/\xe2\x88\x92/-/g; s/\xe2\x80\x99/'"'"'/g; s/\xe2\x80\x98/'"'"'/g'; }
section() { awk -v s="$2" '/^[A-Z]/ { on = ($0 == s) ; next } on' <<<"$1"; }

declare -A src=([cudalloc]="tools/launcher.c" [cudalloc-report]="tools/report.c" [cudalloc-replay]="tools/replay.c"
                [demo_trainer]="demo_trainer/args.c")
version=$("$build/bin/cudalloc" --version | sed 's/^cudalloc //')
for prog in cudalloc cudalloc-report cudalloc-replay demo_trainer; do
    exe=$build/bin/$prog
    [ -x "$exe" ] || { echo "SKIP $prog: not built"; continue; }
    help=$("$exe" --help 2>&1) && [ -n "$help" ] && ok || bad "$prog --help: exit or empty" "$help"
    v=$("$exe" --version 2>&1)
    case $prog in cudalloc) want="cudalloc $version" ;; *) want="$prog (cudalloc) $version" ;; esac
    [ "$v" = "$want" ] && ok || bad "$prog --version: '$v', want '$want'"
    # The options in the help (the first words of option lines) and in the source
    # (getopt's table, string literals), both ways.
    in_help=$(grep -E '^  +-' <<<"$help" | sed -E 's/^ +//; s/   *.*//' | grep -oE -- '--[a-z][a-z-]*' | sort -u)
    in_src=$(grep -v internal "$repo/${src[$prog]}" | grep -oE -- '\{"[a-z][a-z-]*", *(no|required|optional)_argument|"--[a-z][a-z-]*"' |
        sed -E 's/^\{"([a-z-]*)".*/--\1/; s/"//g' | sort -u)
    missing=$(comm -13 <(echo "$in_help") <(echo "$in_src"))
    [ -z "$missing" ] && ok || bad "$prog --help does not name: $(echo $missing)"
    extra=$(comm -23 <(echo "$in_help") <(echo "$in_src"))
    [ -z "$extra" ] && ok || bad "$prog --help names what ${src[$prog]} does not accept: $(echo $extra)"
done

for page in cudalloc.1 cudalloc-report.1 cudalloc-replay.1 cudalloc.7; do
    f=$build/man/$page
    [ -s "$f" ] || { bad "$f: not built"; continue; }
    warn=$(groff -k -man -ww -z "$f" 2>&1)
    [ -z "$warn" ] && ok || bad "$page: groff warns" "$warn"
    text=$(render "$f")
    [ "$page" = cudalloc.7 ] && continue
    help=$("$build/bin/${page%.1}" --help)
    want=$(awk '/^usage: / { u = 1; sub(/^usage: /, ""); print; next } u && /^       / { print; next } { exit }' <<<"$help" | words)
    got=$(section "$text" SYNOPSIS | words)
    [ "$got" = "$want" ] && ok || bad "$page: SYNOPSIS is not the help's usage" "$(diff <(echo "$want") <(echo "$got"))"
    want=$(awk '/^  +-/ { on = 1 } on' <<<"$help" | words)
    got=$(section "$text" OPTIONS | words)
    [ "$got" = "$want" ] && ok || bad "$page: OPTIONS are not the help's" "$(diff <(echo "$want") <(echo "$got"))"
    want=$(awk '/^usage: / || /^       / { next } /^  +-/ { exit } { print }' <<<"$help" | words)
    got=$(section "$text" DESCRIPTION | words | head -n "$(echo "$want" | wc -l)")
    [ "$got" = "$want" ] && ok || bad "$page: DESCRIPTION does not open with the help's" "$(diff <(echo "$want") <(echo "$got"))"
done

# cudalloc(7): each docs' row, its key and its text, in the section it belongs to.
text=$(render "$build/man/cudalloc.7")
md_plain() { sed -E 's/\\\|/|/g; s/\[([^]]*)\]\([^)]*\)/\1/g; s/`//g; s/\*\*//g'; }
rows() { awk -v h="$1" '$0 ~ "^\\| " h " \\|" { on = 1; getline; next } on && /^\|/ { print; next } on { exit }' "$repo/docs/settings.md" "$repo/docs/reports.md"; }
check_row() { # section, row
    local key what flat
    key=$(cut -d'|' -f2 <<<"$2" | md_plain | sed -E 's/^ *(env )?//; s/ *$//')
    what=$(awk -F' \\| ' '{ print $NF }' <<<"$2" | sed 's/ |$//' | md_plain | words | tr '\n' ' ' | sed 's/ $//')
    flat=$(section "$text" "$1" | words | tr '\n' ' ')
    if grep -qF -- "$key" <<<"$flat" && grep -qF -- "$what" <<<"$flat"; then ok; else bad "cudalloc(7) $1 lacks the docs' row '$key': $what"; fi
}
n=0
while read -r row; do
    case $row in "| env "*) check_row ENVIRONMENT "$row" ;; *) check_row CUDALLOC_CONF "$row" ;; esac
    n=$((n + 1))
done < <(rows setting)
while read -r row; do check_row REPORTS "$row"; n=$((n + 1)); done < <(rows file)
[ $n -ge 15 ] && ok || bad "the docs' tables: only $n rows found"

# docs/reports.md's cudalloc-report options table names --help's options.
readme=$(rows option | cut -d'|' -f2 | grep -oE -- '--[a-z][a-z-]*' | sort -u)
helpopts=$("$build/bin/cudalloc-report" --help | grep -E '^  +-' | sed -E 's/^ +//; s/   *.*//' |
    grep -oE -- '--[a-z][a-z-]*' | grep -vx -- '--help\|--version' | sort -u)
[ -n "$readme" ] && [ "$readme" = "$helpopts" ] && ok ||
    bad "docs/reports.md's cudalloc-report options differ from --help" "$(diff <(echo "$helpopts") <(echo "$readme"))"

echo "help and man: $pass passed, $fail failed"
[ $fail -eq 0 ]
