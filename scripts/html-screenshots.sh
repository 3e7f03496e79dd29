#!/usr/bin/env bash
# Regenerates the screenshots of `tally html` in docs/html/ (README, "Using it"): the demo
# (testdata/demo) built at -O0 -g in path mode, run on its input, its site written and three of
# its pages captured by Debian's headless Chromium at 1280x900 (the file page 1280x1300): the index, the annotated
# source of wordfreq.c and the control-flow graph of count_words with its hottest path.
# Needs clang-19 and chromium (scripts/setup.sh); builds tally in release mode.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export LLVM_SYS_191_PREFIX=${LLVM_SYS_191_PREFIX:-/usr/lib/llvm-19}
cargo build --release -q -p tally --manifest-path "$root/Cargo.toml"
tally="$root/target/release/tally"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$root/testdata/demo/wordfreq.c" "$root/testdata/demo/input.txt" "$work/"
cd "$work"
"$tally" cc --tally-mode=path -O0 -g wordfreq.c -o wordfreq
TALLY_PROFILE=wordfreq.tally ./wordfreq input.txt >/dev/null
"$tally" html -o site wordfreq.tally
file_page=$(grep -l 'data-file="[^"]*/wordfreq.c"' site/f*.html | head -1)
cfg_page=$(grep -l '/ count_words</h1>' site/g*.html | head -1)
out="$root/docs/html"
mkdir -p "$out"
shot() {
  chromium --headless=new --disable-gpu --no-sandbox --hide-scrollbars --window-size="${3:-1280,900}" \
    --user-data-dir="$work/chromium" --screenshot="$out/$1" "file://$work/$2" 2>/dev/null
}
shot index.png site/index.html
# Taller, to reach past the file's opening comment to its first functions (headless Chromium
# captures a blank page when it scrolls to a #L anchor).
shot file.png "$file_page" 1280,1300
shot cfg.png "$cfg_page"
echo "wrote $out/index.png $out/file.png $out/cfg.png"
