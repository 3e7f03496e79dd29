#!/usr/bin/env bash
# Profile-guided optimization from tally's exact counts against clang's IR PGO, on Lua and
# SQLite (sources from the cargo registry: testdata/locate.sh), trained and tested on different
# inputs, every variant built and measured in this one run (docs/pgo.md has the results). Each
# program is built at -O2 and again at -O3 (rows "lua -O3", "sqlite -O3": every build of the row,
# training builds included, at -O3); "plain" is clang alone at the row's level.
#
#   training cost  instructions of the training builds on the test input (larger than the
#                  training input, whose runs are short): plain, clang -fprofile-generate,
#                  tally cc --tally-pgo, and tally's plain edge build for reference (-O2 only);
#   speedup        instructions of the test run: plain, -fprofile-use (IR PGO trained on the
#                  training input) and tally cc --tally-use (trained on the same input);
#   variants       instructions of the test run of two more builds from the same profiles:
#                  IR PGO without ICP (-fprofile-use -mllvm -disable-icp: what indirect-call
#                  promotion gives IR PGO, at most what call-target records could give tally's
#                  profile), and tally PGO without profi (clang-19 on the profile that tally
#                  report --export sample-profile writes, with the flags --tally-use passes but
#                  profi turned off: -mllvm -sample-profile-use-profi=false);
#   times          wall-clock seconds of the test run of every non-training build, in $rounds
#                  (11) interleaved rounds (each runs every build once, in an order rotated by one
#                  each round): the median per build and its ratio to plain's median. Times on
#                  this shared machine drift between runs; only ratios within one run mean
#                  anything.
#
# Instructions are counted by callgrind (Debian's valgrind reads DWARF 4, so -gdwarf-4), which
# is exact and repeatable where times are not. Every build of a row must print what the row's
# plain build prints, and the -O3 plain build what the -O2 one prints. Progress, the number of
# indirect calls IR PGO promoted (-Rpass=pgo-icall-prom) and --tally-use's checksum line go to
# stderr.
#
#   bench/pgo.sh [TALLY]      (default: target/release/tally)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tally=$(realpath "${1:-$root/target/release/tally}")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
lua=$("$root/testdata/locate.sh" lua)
sqlite=$("$root/testdata/locate.sh" sqlite)
rounds=11

# The sources and flags of each program (the -O level is added per row), and its training and
# test inputs.
lua_build=(-gdwarf-4 -DLUA_USE_LINUX '-Dluai_makeseed(L)=0x5eedu' "-I$lua"
           -include "$root/testdata/lua/deterministic.h" "$root/testdata/lua/driver.c")
while read -r s; do [ -n "$s" ] && lua_build+=("$lua/$s"); done < "$root/testdata/lua/SOURCES"
lua_build+=(-lm)
sqlite_build=(-gdwarf-4 -DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION "-I$sqlite"
              "$root/testdata/sqlite/driver.c" "$sqlite/sqlite3.c" -lm)
lua_train=("$root/testdata/lua/small.lua");    lua_test=("$root/testdata/lua/workload.lua")
sqlite_train=(20);                             sqlite_test=(60)

# The non-training builds, timed: the names of their binaries and of their columns.
final=(plain iruse irnoicp tuse tnoprofi)
names=("plain" "IR PGO" "IR PGO without ICP" "tally PGO" "tally PGO without profi")

log() { echo "$(date +%T) $*" >&2; }
# Instructions of one run (callgrind's total), the program's output discarded.
instructions() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
ratio() { python3 -c "print(f'{$1/$2:.3f}')"; }
# "N (×R)": instructions of build $1 and their ratio to plain's, from $d/$1.ir.
cell() { echo "$(<"$d/$1.ir") (×$(ratio "$(<"$d/$1.ir")" "$(<"$d/plain.ir")"))"; }

rows=()
for p in lua sqlite; do
  for o in -O2 -O3; do
    declare -n build="${p}_build" train="${p}_train" test="${p}_test"
    row=$p; [ "$o" = -O2 ] || row="$p $o"
    d="$work/$p$o"; mkdir -p "$d"; cd "$d"; rows+=("$d")
    echo "$row" > row; echo "$p" > program
    b=("$o" "${build[@]}")
    log "$row: builds"
    clang-19 "${b[@]}" -o plain
    clang-19 -fprofile-generate "${b[@]}" -o irgen
    "$tally" cc --tally-pgo "${b[@]}" -o tgen
    [ "$o" != -O2 ] || "$tally" cc "${b[@]}" -o tedge
    # Training runs: the profiles.
    LLVM_PROFILE_FILE="$d/ir.profraw" ./irgen "${train[@]}" >/dev/null
    llvm-profdata-19 merge -o ir.profdata ir.profraw
    TALLY_PROFILE="$d/t.tally" ./tgen "${train[@]}" >/dev/null
    clang-19 -fprofile-use=ir.profdata -Wno-backend-plugin -Rpass=pgo-icall-prom \
      "${b[@]}" -o iruse 2>icp.log
    clang-19 -fprofile-use=ir.profdata -Wno-backend-plugin -mllvm -disable-icp \
      -Rpass=pgo-icall-prom "${b[@]}" -o irnoicp 2>noicp.log
    log "$row: IR PGO promoted $(grep -c 'Rpass=pgo-icall-prom' icp.log || true) indirect calls," \
        "without ICP $(grep -c 'Rpass=pgo-icall-prom' noicp.log || true);" \
        "the two binaries are $(cmp -s iruse irnoicp && echo identical || echo different)"
    "$tally" cc --tally-use=t.tally "${b[@]}" -o tuse 2>tuse.log
    log "$row: $(grep -m1 'tally: --tally-use' tuse.log)"
    "$tally" report --export sample-profile -o t.prof t.tally >&2
    # LLVM 19's loader turns profi on for every probe-based profile unless told otherwise:
    # leaving out -fsample-profile-use-profi is not enough.
    clang-19 "${b[@]}" -fprofile-sample-use=t.prof -fpseudo-probe-for-profiling \
      -fprofile-sample-accurate -mllvm -sample-profile-use-profi=false -o tnoprofi
    # The same output from every build of the test input.
    ./plain "${test[@]}" > plain.out
    [ "$o" = -O2 ] || cmp -s plain.out "$work/$p-O2/plain.out" ||
      { echo "$row: plain prints otherwise than at -O2" >&2; exit 1; }
    for x in "${final[@]:1}"; do
      cmp -s plain.out <(./$x "${test[@]}") || { echo "$row: $x prints otherwise" >&2; exit 1; }
    done
    log "$row: callgrind"
    export TALLY_PROFILE="$d/x.tally" LLVM_PROFILE_FILE="$d/x.profraw"
    for x in "${final[@]}" irgen tgen $([ "$o" != -O2 ] || echo tedge); do
      instructions ./$x "${test[@]}" > $x.ir
    done
    unset TALLY_PROFILE LLVM_PROFILE_FILE
  done
done

# Times last, with nothing of this script's running beside them.
for d in "${rows[@]}"; do
  cd "$d"; declare -n test="$(<program)_test"
  log "$(<row): $rounds rounds of times"
  : > times
  n=${#final[@]}
  for ((r = 0; r < rounds; r++)); do
    for ((i = 0; i < n; i++)); do
      x=${final[(i + r) % n]}
      s=$EPOCHREALTIME; ./$x "${test[@]}" >/dev/null; e=$EPOCHREALTIME
      echo "$x $s $e" >> times
    done
  done
done

echo "Instructions (callgrind) of the test run; training builds run the test input too."
echo
echo "| program | plain | IR PGO training build | tally --tally-pgo training build | tally edge build | IR PGO | tally PGO |"
echo "|---|---|---|---|---|---|---|"
for d in "${rows[@]}"; do
  edge="—"; [ ! -e "$d/tedge.ir" ] || edge=$(cell tedge)
  echo "| $(<"$d/row") | $(<"$d/plain.ir") | $(cell irgen) | $(cell tgen) | $edge | $(cell iruse) | $(cell tuse) |"
done
echo
echo "Instructions of the test run of the builds from the same profiles, ratios to plain."
echo
echo "| program | plain | IR PGO | IR PGO without ICP | tally PGO | tally PGO without profi |"
echo "|---|---|---|---|---|---|"
for d in "${rows[@]}"; do
  echo "| $(<"$d/row") | $(<"$d/plain.ir") | $(cell iruse) | $(cell irnoicp) | $(cell tuse) | $(cell tnoprofi) |"
done
echo
echo "Wall-clock seconds of the test run, median of $rounds interleaved rounds, ratio to plain's median."
echo
printf '| program |'; printf ' %s |' "${names[@]}"; echo
echo "|---|---|---|---|---|---|"
for d in "${rows[@]}"; do
  python3 - "$(<"$d/row")" "$d/times" "${final[@]}" <<'PY'
import statistics, sys
row, path, builds = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = {b: [] for b in builds}
for line in open(path):
    b, s, e = line.split()
    runs[b].append(float(e) - float(s))
med = {b: statistics.median(t) for b, t in runs.items()}
print(f"| {row} | " + " | ".join(f"{med[b]:.3f} (×{med[b] / med['plain']:.3f})" for b in builds) + " |")
PY
done
