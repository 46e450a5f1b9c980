#!/usr/bin/env bash
# Renders a tandem-sim report in a real browser and checks that the page
# drew something: headless Chromium takes a full-width screenshot of
# REPORT_DIR/report.html, then python3 (standard library only) decodes the
# PNG and checks its size, that it is not one colour, that a fair part of
# it is ink (text, tables, plot lines) and that the ink reaches down the page.
#   deploy/check-report.sh REPORT_DIR [PNG]   (PNG: default REPORT_DIR/report.png)
# Chromium (Debian package `chromium`) is a tool of this check only, not a
# dependency of the project: install it with `apt-get install chromium` if
# it is missing. The browser gets no network (every host name resolves to
# nothing), so a page that needed one would show it.
# Exit status: 0 the page rendered, 1 the check failed, 2 usage or no browser.
set -euo pipefail
if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 REPORT_DIR [PNG]" >&2
  exit 2
fi
dir=$(cd "$1" && pwd)
page="$dir/report.html"
png=${2:-$dir/report.png}
[[ -f "$page" ]] || { echo "no $page" >&2; exit 2; }
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[[ -n "$browser" ]] || { echo "no chromium: apt-get install chromium" >&2; exit 2; }

profile=$(mktemp -d /tmp/check-report.XXXXXX)
trap 'rm -rf "$profile"' EXIT
rm -f "$png"
# --no-sandbox: CI and containers run as root. A tall window so that the
# tables and all four plots are in the one screenshot.
timeout 120 "$browser" --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
  --user-data-dir="$profile" --host-resolver-rules="MAP * ~NOTFOUND" \
  --window-size=1280,4000 --screenshot="$png" "file://$page" >"$profile/log" 2>&1 || {
  cat "$profile/log" >&2
  echo "chromium failed" >&2
  exit 1
}
[[ -s "$png" ]] || { cat "$profile/log" >&2; echo "no screenshot" >&2; exit 1; }

python3 - "$png" <<'EOF'
import struct, sys, zlib

path = sys.argv[1]
data = open(path, "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit(f"{path}: not a PNG")
pos, idat, width = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        width, height, depth, color = struct.unpack(">IIBB", body[:10])
        interlace = body[12]
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
if depth != 8 or color not in (2, 6) or interlace:
    sys.exit(f"{path}: unexpected PNG format (depth {depth}, colour type {color})")
bpp = 3 if color == 2 else 4
raw = zlib.decompress(idat)
stride = width * bpp
prev = bytearray(stride)
colors, ink, ink_rows = set(), 0, []
for y in range(height):
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
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    prev = line
    row_ink = 0
    for x in range(0, stride, bpp):
        px = bytes(line[x:x + 3])
        if len(colors) < 4096: colors.add(px)
        if min(px) < 200: row_ink += 1
    ink += row_ink
    if row_ink: ink_rows.append(y)
share = ink / (width * height)
span = (ink_rows[-1] - ink_rows[0] + 1) / height if ink_rows else 0
print(f"{path}: {len(data)} bytes, {width}x{height}, {len(colors)}{'+' if len(colors) >= 4096 else ''} "
      f"colours, {100 * share:.2f}% ink, ink over {100 * span:.0f}% of the height")
problems = []
if len(data) < 20000: problems.append("file under 20 kB")
if len(colors) < 16: problems.append("fewer than 16 colours")
if share < 0.01: problems.append("under 1% ink")
if span < 0.3: problems.append("ink on under 30% of the height")
if problems:
    sys.exit("the page did not render: " + ", ".join(problems))
EOF
echo "report renders: $png"
