#!/usr/bin/env bash
# Installs what tally needs on Debian 12 (bookworm) if it is missing: clang-19 and LLVM 19
# (libraries for building tally), make, cmake and binutils (tests), valgrind, gcc and llvm-profdata
# (benchmarks: bench/run), lcov (genhtml) and libxml2-utils (xmllint) for the export tests,
# chromium (headless) for the `tally html` test and screenshots, python3-venv for target/pyenv: a
# virtual environment with DuckDB from PyPI, which the dataset tests (`tally export`) query.
# Safe to run repeatedly; uses sudo when not root.
set -euo pipefail
pkgs=(clang-19 llvm-19 llvm-19-dev libpolly-19-dev libclang-rt-19-dev zlib1g-dev libzstd-dev
      libffi-dev libxml2-dev make cmake binutils gcc g++ valgrind python3 ca-certificates
      lcov libxml2-utils chromium python3-venv)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust (https://rustup.rs)" >&2; exit 1; }
# DuckDB for the dataset tests, pinned; the venv is rebuilt only when the pin changes.
duckdb_pin="duckdb==2.0.1"
venv="$(dirname "$0")/../target/pyenv"
if [ "$(cat "$venv/.pin" 2>/dev/null)" != "$duckdb_pin" ]; then
  echo "setup: installing $duckdb_pin in target/pyenv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "$duckdb_pin"
  echo "$duckdb_pin" > "$venv/.pin"
fi
