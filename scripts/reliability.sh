#!/usr/bin/env bash
# Measures how each way of ending a process (return, exit, _exit, quick_exit, abort, fatal
# signals, SIGKILL, exec, fork, dlclose, threads running at exit) affects the profile written by
# tally, clang -fprofile-instr-generate / -fprofile-generate and gcc --coverage, and writes the
# table into docs/reliability.md between its markers. Not part of CI; about 10 s once tally is
# built. Programs and harness: testdata/reliability/ (rel.c, rellib.c, measure.py).
#
#   bash scripts/reliability.sh            # rewrite the table in docs/reliability.md
#   bash scripts/reliability.sh exit,fork  # only these cases, table printed, doc left alone
#
# Needs Debian 12 with gcc (gcov), clang-19, libclang-rt-19-dev (clang's profile runtime),
# llvm-19 (llvm-profdata-19, llvm-cov-19), python3 and cargo; installs the Debian packages
# with apt-get when running as root, otherwise says what is missing.
# Environment: REL_TALLY_OPT (default -O2) is the optimization level of the tally builds;
# RELIABILITY_WORK (default target/reliability) holds the builds and runs.
set -euo pipefail
cd "$(dirname "$0")/.."
export LLVM_SYS_191_PREFIX=${LLVM_SYS_191_PREFIX:-/usr/lib/llvm-19}

need=()
for p in gcc clang-19 libclang-rt-19-dev llvm-19 python3; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "reliability: installing ${need[*]}" >&2
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
  else
    echo "reliability: missing Debian packages: ${need[*]} (apt-get install them as root)" >&2
    exit 1
  fi
fi
for c in gcc gcov clang-19 llvm-profdata-19 llvm-cov-19 python3; do
  command -v "$c" >/dev/null || { echo "reliability: $c not found" >&2; exit 1; }
done

# The tally of this checkout, rebuilt if its sources changed (a no-op when up to date).
cargo build --release -q -p tally
tally=target/release/tally
[ -x "$tally" ] || { echo "reliability: $tally was not built" >&2; exit 1; }

work=${RELIABILITY_WORK:-target/reliability}
exec python3 testdata/reliability/measure.py "$tally" "$work" docs/reliability.md "$@"
