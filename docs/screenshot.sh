#!/usr/bin/env bash
# Screenshots of the built site in headless Chromium, to see that it renders.
#   docs/screenshot.sh [HTML_DIR] [OUT_DIR]   (defaults: docs/_build/html reports/docs)
# Writes OUT_DIR/home.png (the home page) and OUT_DIR/guide.png (a guide).
# Needs Debian's `chromium`; installs it with apt-get when missing and running as root.
set -euo pipefail

html_dir=${1:-docs/_build/html}
out_dir=${2:-reports/docs}

if [ ! -f "$html_dir/index.html" ]; then
    echo "docs-screenshot: expected a built site at $html_dir/index.html; run 'make docs' first" >&2
    exit 1
fi

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "docs-screenshot: chromium is missing; installing Debian's chromium package" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null \
            || { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null; }
        browser=$(command -v chromium)
    else
        echo "docs-screenshot: chromium is not installed; install it (apt-get install -y chromium) and rerun" >&2
        exit 1
    fi
fi

mkdir -p "$out_dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

shoot() {  # shoot PAGE PNG
    local page=$1 png=$2
    rm -f "$out_dir/$png"
    if ! "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
        --no-first-run --disable-component-update --disable-sync \
        --user-data-dir="$tmp/profile" --hide-scrollbars --window-size=1280,1400 \
        --virtual-time-budget=3000 --screenshot="$out_dir/$png" \
        "file://$(realpath "$html_dir/$page")" >"$tmp/chromium.log" 2>&1 \
        || [ ! -s "$out_dir/$png" ]; then
        cat "$tmp/chromium.log" >&2
        echo "docs-screenshot: chromium did not write $out_dir/$png" >&2
        exit 1
    fi
    echo "docs-screenshot: $html_dir/$page -> $out_dir/$png"
}

shoot index.html home.png
shoot guides/replay-buffers.html guide.png
