#!/usr/bin/env bash
# Profile-guided optimization from tally's exact counts against clang's IR PGO, on Lua and
# SQLite (sources from the cargo registry: testdata/locate.sh), trained and tested on different
# inputs, every variant built and measured in this one run (docs/pgo.md has the results):
#
#   training cost  instructions of the training builds on the test input (larger than the
#                  training input, whose runs are short): -O2 alone, clang -fprofile-generate,
#                  tally cc --tally-pgo, and tally's plain edge build for reference;
#   speedup        instructions of the test run: -O2 alone, -fprofile-use (IR PGO trained on
#                  the training input) and tally cc --tally-use (trained on the same input).
#
# Instructions are counted by callgrind (Debian's valgrind reads DWARF 4, so -gdwarf-4), which
# is exact and repeatable where times on this shared machine are not.
#
#   bench/pgo.sh [TALLY]      (default: target/release/tally)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tally=$(realpath "${1:-$root/target/release/tally}")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
lua=$("$root/testdata/locate.sh" lua)
sqlite=$("$root/testdata/locate.sh" sqlite)

# The sources and flags of each program, and its training and test inputs.
lua_build=(-gdwarf-4 -O2 -DLUA_USE_LINUX '-Dluai_makeseed(L)=0x5eedu' "-I$lua"
           -include "$root/testdata/lua/deterministic.h" "$root/testdata/lua/driver.c")
while read -r s; do [ -n "$s" ] && lua_build+=("$lua/$s"); done < "$root/testdata/lua/SOURCES"
lua_build+=(-lm)
sqlite_build=(-gdwarf-4 -O2 -DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION "-I$sqlite"
              "$root/testdata/sqlite/driver.c" "$sqlite/sqlite3.c" -lm)
lua_train=("$root/testdata/lua/small.lua");    lua_test=("$root/testdata/lua/workload.lua")
sqlite_train=(20);                             sqlite_test=(60)

# Instructions of one run (callgrind's total), the program's output discarded.
instructions() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
ratio() { python3 -c "print(f'{$1/$2:.3f}')"; }

echo "| program | -O2 | IR PGO training build | tally --tally-pgo training build | tally edge build | IR PGO | tally PGO |"
echo "|---|---|---|---|---|---|---|"
for p in lua sqlite; do
  declare -n build="${p}_build" train="${p}_train" test="${p}_test"
  d="$work/$p"; mkdir -p "$d"; cd "$d"
  clang-19 "${build[@]}" -o plain
  clang-19 -fprofile-generate "${build[@]}" -o irgen
  "$tally" cc --tally-pgo "${build[@]}" -o tgen
  "$tally" cc "${build[@]}" -o tedge
  # Training runs: the profiles.
  LLVM_PROFILE_FILE="$d/ir.profraw" ./irgen "${train[@]}" >/dev/null
  llvm-profdata-19 merge -o ir.profdata ir.profraw
  TALLY_PROFILE="$d/t.tally" ./tgen "${train[@]}" >/dev/null
  clang-19 -fprofile-use=ir.profdata -Wno-backend-plugin "${build[@]}" -o iruse
  "$tally" cc --tally-use=t.tally "${build[@]}" -o tuse 2>/dev/null
  # The same output from every build of the test input.
  for b in iruse tuse; do
    cmp -s <(./plain "${test[@]}") <(./$b "${test[@]}") || { echo "$p: $b prints otherwise" >&2; exit 1; }
  done
  export TALLY_PROFILE="$d/x.tally" LLVM_PROFILE_FILE="$d/x.profraw"
  sp=$(instructions ./plain "${test[@]}"); si=$(instructions ./iruse "${test[@]}")
  tp=$sp; ti=$(instructions ./irgen "${test[@]}")
  tt=$(instructions ./tgen "${test[@]}"); te=$(instructions ./tedge "${test[@]}")
  st=$(instructions ./tuse "${test[@]}")
  unset TALLY_PROFILE LLVM_PROFILE_FILE
  echo "| $p | $sp | $ti (×$(ratio "$ti" "$tp")) | $tt (×$(ratio "$tt" "$tp")) | $te (×$(ratio "$te" "$tp")) | $si (×$(ratio "$si" "$sp")) | $st (×$(ratio "$st" "$sp")) |"
done
