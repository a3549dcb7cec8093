#!/usr/bin/env bash
# The HTML report in headless Chromium: it renders with no console errors and
# the screenshot shows the plot (the series' colours are there). A control
# page with a script error proves the console check can fail. Skips, saying
# so, when chromium is not installed.
#   html_chromium.sh BIN_DIR [KEEP_DIR]   (KEEP_DIR: where to leave the screenshot)
set -u
bin=${1:?usage: html_chromium.sh BIN_DIR [KEEP_DIR]}
here=$(cd "$(dirname "$0")" && pwd)
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    echo "SKIP: html_chromium: chromium is not installed (Debian: apt-get install chromium)"
    exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
no() { echo "FAIL: html_chromium: $*"; fail=1; }

# Renders $1 to $2.png; its console output in $2.log.
render() {
    timeout 120 "$browser" --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
        --user-data-dir="$tmp/profile" --window-size=1200,1400 --enable-logging=stderr --v=0 \
        --screenshot="$2.png" "file://$1" >"$2.log" 2>&1
}

printf '<!DOCTYPE html><html><body><script>undefined_function()</script></body></html>' > "$tmp/control.html"
render "$tmp/control.html" "$tmp/control"
grep -q 'CONSOLE.*undefined_function' "$tmp/control.log" || no "the console check does not see a script error (control page)"

bash "$here/gen_trace.sh" 12 1 1 1 > "$tmp/leak.csv"
"$bin/cudalloc-report" "$tmp/leak.csv" --capacity 512MiB --html "$tmp/report.html" || no "cudalloc-report --html failed"
render "$tmp/report.html" "$tmp/report"
[ -s "$tmp/report.png" ] || no "no screenshot: $(tail -3 "$tmp/report.log")"
if grep -q 'CONSOLE' "$tmp/report.log"; then no "console messages: $(grep CONSOLE "$tmp/report.log" | head -3)"; fi
if grep -qi 'net::ERR' "$tmp/report.log"; then no "the page tried to load something: $(grep -i net::ERR "$tmp/report.log" | head -2)"; fi

# The plot: pixels of both series' colours (allocated #1f77b4, reserved
# #ff7f0e) in the screenshot, read with Python's zlib (no imaging library).
python3 - "$tmp/report.png" <<'PY' || no "the screenshot does not show the plot"
import struct, sys, zlib
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n'
pos, idat, w = 8, b'', 0
while pos < len(data):
    n, kind = struct.unpack('>I4s', data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b'IHDR':
        w, h, depth, ctype = struct.unpack('>IIBB', body[:10])
        assert depth == 8 and ctype in (2, 6), (depth, ctype)
        bpp = 3 if ctype == 2 else 4
    elif kind == b'IDAT':
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
stride = w * bpp
prev = bytearray(stride)
counts = {(31, 119, 180): 0, (255, 127, 14): 0}
white = 0
for y in range(h):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for x in range(0, stride, bpp):
        px = tuple(line[x:x + 3])
        if px in counts: counts[px] += 1
        elif px == (255, 255, 255): white += 1
    prev = line
print('plot pixels', counts, 'white', white, 'of', w * h)
assert all(v >= 200 for v in counts.values()), counts
assert white < w * h, 'blank page'
PY
[ -n "${2:-}" ] && cp "$tmp/report.png" "$2/report_screenshot.png"
[ $fail = 0 ] && echo "html_chromium: ok (renders, no console errors, plot drawn)"
exit $fail
