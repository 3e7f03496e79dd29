#!/usr/bin/env bash
# Build every test program in testdata/ with plain (uninstrumented)
# clang-19 at -O0 and -O2 and check that:
#   * early/*: exit status matches early/EXPECTED, stdout identical at -O0
#     and -O2 and across two runs;
#   * lua, sqlite, demo: exit status 0, output identical across -O0/-O2
#     and two runs (lua also as C++ with clang++-19 -x c++).
# This is the reference for the build lines; it does not involve tally.
#
#   testdata/verify.sh [--quick]     (--quick: skip the SQLite -O2 build, ~30 s)
#
# Needs clang-19, clang++-19, cargo (for locate.sh), python3.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CC=${CC:-clang-19}
CXX=${CXX:-clang++-19}
quick=0
[ "${1:-}" = "--quick" ] && quick=1
out=$(mktemp -d "${TMPDIR:-/tmp}/tally-verify.XXXXXX")
trap 'rm -rf "$out"' EXIT
fail=0
note() { printf '%s\n' "$*"; }
bad() { printf 'FAIL: %s\n' "$*"; fail=1; }

# run BIN ARGS... ; sets $status, output in $out/last.txt
run() { "$@" >"$out/last.txt" 2>"$out/last.err"; status=$?; }

same_twice() { # label expected_status bin args...
  local label=$1 want=$2; shift 2
  run "$@"; cp "$out/last.txt" "$out/a.txt"; local s1=$status
  run "$@"; local s2=$status
  [ "$s1" = "$want" ] || bad "$label: exit status $s1, expected $want"
  [ "$s2" = "$s1" ] || bad "$label: exit status differs between runs"
  cmp -s "$out/a.txt" "$out/last.txt" || bad "$label: output differs between runs"
}

# ---- early/ ----------------------------------------------------------
while read -r file want; do
  [ -n "$file" ] || continue
  src="$here/early/$file"
  case "$file" in *.cpp) c=$CXX ;; *) c=$CC ;; esac
  for o in 0 2; do
    $c -O$o -o "$out/early$o" "$src" || { bad "build $file -O$o"; continue; }
    same_twice "$file -O$o" "$want" "$out/early$o"
    cp "$out/last.txt" "$out/early-$o.txt"
  done
  cmp -s "$out/early-0.txt" "$out/early-2.txt" || bad "$file: -O0 and -O2 outputs differ"
  note "early/$file: exit $want ok"
done <"$here/early/EXPECTED"

# ---- demo --------------------------------------------------------------
for o in 0 2; do
  $CC -O$o -o "$out/wordfreq$o" "$here/demo/wordfreq.c" || bad "build wordfreq -O$o"
  same_twice "wordfreq -O$o" 0 "$out/wordfreq$o" "$here/demo/input.txt"
  cp "$out/last.txt" "$out/wf-$o.txt"
done
cmp -s "$out/wf-0.txt" "$out/wf-2.txt" || bad "wordfreq: -O0 and -O2 outputs differ"
note "demo/wordfreq: $(head -n1 "$out/wf-2.txt")"

# ---- lua ---------------------------------------------------------------
L=$("$here/locate.sh" lua) || { bad "locate lua"; L=; }
if [ -n "$L" ]; then
  srcs=$(sed "s|^|$L/|" "$here/lua/SOURCES")
  LUADEFS=(-DLUA_USE_LINUX '-Dluai_makeseed(L)=0x5eedu' -I"$L")
  # shellcheck disable=SC2086
  $CC -O0 "${LUADEFS[@]}" -o "$out/lua0" "$here/lua/driver.c" $srcs -lm || bad "build lua -O0"
  # shellcheck disable=SC2086
  $CC -O2 "${LUADEFS[@]}" -o "$out/lua2" "$here/lua/driver.c" $srcs -lm || bad "build lua -O2"
  # shellcheck disable=SC2086
  $CXX -x c++ -O2 "${LUADEFS[@]}" -o "$out/luaxx" "$here/lua/driver.c" $srcs -lm 2>/dev/null \
    || bad "build lua C++ -O2"
  for size in 1 ""; do
    for b in lua0 lua2 luaxx; do
      # shellcheck disable=SC2086
      same_twice "lua $b size ${size:-default}" 0 "$out/$b" "$here/lua/workload.lua" $size
      cp "$out/last.txt" "$out/$b.txt"
    done
    cmp -s "$out/lua0.txt" "$out/lua2.txt" || bad "lua size ${size:-default}: -O0/-O2 differ"
    cmp -s "$out/lua0.txt" "$out/luaxx.txt" || bad "lua size ${size:-default}: C/C++ differ"
    note "lua: $(tail -n1 "$out/lua2.txt")"
  done
fi

# ---- sqlite --------------------------------------------------------------
S=$("$here/locate.sh" sqlite) || { bad "locate sqlite"; S=; }
if [ -n "$S" ]; then
  SQDEFS=(-DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION -I"$S")
  opts="0 2"
  [ $quick = 1 ] && opts=0
  for o in $opts; do
    $CC -O$o "${SQDEFS[@]}" -o "$out/sqlite$o" "$here/sqlite/driver.c" "$S/sqlite3.c" -lm \
      || bad "build sqlite -O$o"
  done
  for size in 1 ""; do
    for o in $opts; do
      # shellcheck disable=SC2086
      same_twice "sqlite -O$o size ${size:-default}" 0 "$out/sqlite$o" $size
      cp "$out/last.txt" "$out/sq$o.txt"
    done
    [ $quick = 1 ] || cmp -s "$out/sq0.txt" "$out/sq2.txt" || bad "sqlite size ${size:-default}: -O0/-O2 differ"
    note "sqlite: $(tail -n1 "$out/sq0.txt")"
  done
fi

if [ $fail = 0 ]; then note "verify.sh: all ok"; else note "verify.sh: FAILURES"; fi
exit $fail
