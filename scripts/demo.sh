#!/usr/bin/env bash
# One command from a fresh Debian 12 machine with Rust to a tally report: installs clang-19 /
# LLVM 19 if missing, builds tally, builds the bundled demo (testdata/demo/wordfreq.c) with
# `tally cc`, runs it, and prints `tally report` of the profile it wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release -q -p tally
TALLY="$PWD/target/release/tally"
out="$PWD/target/demo"
mkdir -p "$out"
echo "== $TALLY cc -O2 -g testdata/demo/wordfreq.c -o $out/wordfreq"
"$TALLY" cc -O2 -g testdata/demo/wordfreq.c -o "$out/wordfreq"
echo "== $out/wordfreq testdata/demo/input.txt"
(cd "$out" && ./wordfreq ../../testdata/demo/input.txt)
echo "== tally report $out/wordfreq.tally"
"$TALLY" report "$out/wordfreq.tally"
