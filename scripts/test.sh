#!/usr/bin/env bash
# Runs every test of tally from a fresh Debian 12 machine with Rust: installs the
# prerequisites if missing, checks formatting and lints, then runs the whole test suite
# (unit, property, end-to-end on the early-termination programs, Lua and SQLite), printing
# each test binary's wall time as it ends, a summary sorted by time and the tests skipped
# (the `SKIPPED:` lines of tests that need root) at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export INSTA_UPDATE=no   # a missing or changed snapshot fails instead of being written
ulimit -f 4194304        # no file over 4 GiB: a runaway build or run must not fill the disk
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings

# Passes cargo test's output through, timing each test binary from cargo's "Running" (or
# "Doc-tests") line to its "test result:" line (or, for one that died, the next binary).
timed() {
    local name="" start="" line times=() skipped=()
    end_binary() {
        if [[ -n $name ]]; then
            local t
            t=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
            times+=("$t $name$1")
            echo "=== ${t}s: $name$1"
            name=""
        fi
    }
    while IFS= read -r line; do
        printf '%s\n' "$line"
        case $line in
            *"     Running "* | *"   Doc-tests "*)
                end_binary " (no test result)"
                name=${line#"${line%%[! ]*}"}
                start=$EPOCHREALTIME
                ;;
            "test result: "*) end_binary "" ;;
            *"SKIPPED: "*) skipped+=("SKIPPED: ${line#*SKIPPED: }") ;;
        esac
    done
    end_binary " (no test result)"
    echo
    echo "=== Wall time per test binary (seconds), slowest first:"
    if ((${#times[@]})); then
        printf '%s\n' "${times[@]}" | sort -rn | awk '{ t += $1; print } END { printf "%.1f total\n", t }'
    fi
    if ((${#skipped[@]})); then
        echo "=== ${#skipped[@]} skipped:"
        printf '%s\n' "${skipped[@]}"
    fi
}

status=0
cargo test --workspace --release "$@" 2>&1 | timed || status=$?
exit "$status"
