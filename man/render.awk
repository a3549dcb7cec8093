# Fills a man page template (man/*.in) from the sources that users also read,
# so that nothing is written twice:
#   @VERSION@              the version (-v version=...)
#   @SYNOPSIS@             the usage lines of the program's --help (-v help=FILE)
#   @DESCRIPTION@          --help's text between the usage lines and the options
#   @OPTIONS@              --help's options, one .TP each
#   @NOTES@                --help's text after the options
#   @TABLE setting conf@   rows of the docs' table whose header starts "| setting |"
#                          (-v readme=FILE: docs/settings.md and docs/reports.md); "conf": CUDALLOC_CONF keys, "env":
#                          the "env `VAR`" rows; a two-column table takes no filter
# Help format: "usage: " lines (continued by lines indented 8 or more, another form
# indented 7), prose at column 0, options indented 2 ("  --opt ARG  what"),
# continued by lines indented 3 or more.

function esc(s) { # text -> roff
    gsub(/\\/, "\\e", s)
    gsub(/-/, "\\-", s)
    return s
}
function line_out(s) { # a text line: a leading . or ' would be a request
    if (s ~ /^[.']/) s = "\\&" s
    print s
}
function md(s,    out, m) { # a README cell -> roff: `code`, **bold**, [text](link), \|
    gsub(/\\\|/, "|", s)
    while (match(s, /\[[^]]*\]\([^)]*\)/)) {
        m = substr(s, RSTART + 1, RLENGTH - 2)
        sub(/\]\(.*/, "", m)
        s = substr(s, 1, RSTART - 1) m substr(s, RSTART + RLENGTH)
    }
    s = esc(s)
    out = ""
    while (match(s, /`[^`]*`|\*\*[^*]*\*\*/)) {
        m = substr(s, RSTART, RLENGTH)
        gsub(/^(`|\*\*)|(`|\*\*)$/, "", m)
        out = out substr(s, 1, RSTART - 1) "\\fB" m "\\fR"
        s = substr(s, RSTART + RLENGTH)
    }
    return out s
}
function synopsis_line(s,    prog) { # program (and subcommand) bold, options bold, NAMES italic
    s = esc(s)
    match(s, /^[a-z][a-z_\\-]*( [a-z]+)?/)
    prog = substr(s, 1, RLENGTH)
    s = substr(s, RLENGTH + 1)
    gsub(/\\-(\\-)?[a-z][a-z0-9]*(\\-[a-z0-9]+)*/, "\\fB&\\fR", s)
    gsub(/[A-Z][A-Z0-9_]+(\.[a-z]+)?/, "\\fI&\\fR", s)
    return "\\fB" prog "\\fR" s
}
function term(s,    n, w, i, out) { # "--opt ARG" -> bold option, italic argument
    n = split(s, w, " ")
    out = ""
    for (i = 1; i <= n; i++)
        out = out (i > 1 ? " " : "") (w[i] ~ /^-/ ? "\\fB" esc(w[i]) "\\fR" : "\\fI" esc(w[i]) "\\fR")
    return out
}

function read_help(    line, state, n) {
    state = "start"
    while ((getline line < help) > 0) {
        if (line ~ /^usage: /) {
            syn[++nsyn] = substr(line, 8)
            state = "usage"
        } else if (state == "usage" && line ~ /^        +[^ ]/) {
            sub(/^ +/, "", line)
            syn[nsyn] = syn[nsyn] " " line
        } else if (state == "usage" && line ~ /^       [^ ]/) {
            syn[++nsyn] = substr(line, 8)
        } else if (line ~ /^  -/) {
            sub(/^ +/, "", line)
            n = match(line, /  +/)
            nopt++
            opt_term[nopt] = n ? substr(line, 1, RSTART - 1) : line
            opt_text[nopt] = n ? substr(line, RSTART + RLENGTH) : ""
            state = "options"
        } else if (state == "options" && line ~ /^   +[^ ]/) {
            sub(/^ +/, "", line)
            opt_text[nopt] = opt_text[nopt] " " line
        } else if (line ~ /^[^ ]/) {
            if (state == "options" || state == "notes") { notes[++nnotes] = line; state = "notes" }
            else { desc[++ndesc] = line; state = "description" }
        } else if (line != "") {
            printf "render.awk: %s: a help line of no known form: '%s'\n", help, line > "/dev/stderr"
            failed = 1
            exit 1
        }
    }
    if (!nsyn || !nopt) {
        printf "render.awk: %s: no usage line or no options\n", help > "/dev/stderr"
        failed = 1
        exit 1
    }
}

function cells(row, c,    n, i) { # "| a | b \| c |" -> c[1..n]
    gsub(/\\\|/, "\001", row)
    sub(/^\| */, "", row)
    sub(/ *\| *$/, "", row)
    n = split(row, c, / *\| */)
    for (i = 1; i <= n; i++) gsub(/\001/, "\\|", c[i])
    return n
}
function table(first, filter,    line, in_table, c, n, rows, key) {
    in_table = 0
    rows = 0
    while ((getline line < readme) > 0) {
        if (!in_table) {
            if (line ~ "^\\| " first " \\|") { in_table = 1; getline line < readme } # the --- row
            continue
        }
        if (line !~ /^\|/) break
        n = cells(line, c)
        key = c[1]
        if (filter == "env") { if (key !~ /^env /) continue; sub(/^env /, "", key) }
        else if (filter == "conf" && key ~ /^env /) continue
        print ".TP"
        if (n >= 4) line_out(md(key) " (" md(c[2]) "; default: " md(c[3]) ")")
        else line_out(md(key))
        line_out(md(c[n]))
        rows++
    }
    close(readme)
    if (!rows) {
        printf "render.awk: %s: no rows in the table '| %s |'%s\n", readme, first, filter ? " (" filter ")" : "" > "/dev/stderr"
        failed = 1
        exit 1
    }
}

BEGIN { if (help != "") read_help() }
/@VERSION@/ { gsub(/@VERSION@/, version) }
/^@SYNOPSIS@$/ { for (i = 1; i <= nsyn; i++) { if (i > 1) print ".br"; line_out(synopsis_line(syn[i])) } next }
/^@DESCRIPTION@$/ { for (i = 1; i <= ndesc; i++) line_out(esc(desc[i])); next }
/^@OPTIONS@$/ { for (i = 1; i <= nopt; i++) { print ".TP"; line_out(term(opt_term[i])); line_out(esc(opt_text[i])) } next }
/^@NOTES@$/ { if (nnotes) print ".PP"; for (i = 1; i <= nnotes; i++) line_out(esc(notes[i])); next }
/^@TABLE [^@]*@$/ { split(substr($0, 8, length($0) - 8), a, " "); table(a[1], a[2]); next }
/@[A-Z]+@/ { printf "render.awk: unknown placeholder in '%s'\n", $0 > "/dev/stderr"; failed = 1; exit 1 }
{ print }
END { if (failed) exit 1 }
