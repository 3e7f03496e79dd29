#!/usr/bin/env bash
# Runs every test of tally from a fresh Debian 12 machine with Rust: installs the
# prerequisites if missing, checks formatting and lints, then runs the whole test suite
# (unit, property, end-to-end on the early-termination programs, Lua and SQLite).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export INSTA_UPDATE=no   # a missing or changed snapshot fails instead of being written
ulimit -f 4194304        # no file over 4 GiB: a runaway build or run must not fill the disk
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings
cargo test --workspace --release "$@"
