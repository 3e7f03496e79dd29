#!/usr/bin/env bash
# Checks that two tally binaries instrument identically: every test program and the Lua and
# bzip2 sources are compiled (-c) with both, in every mode, and the disassembly of the objects'
# code, relocations included (objdump -d -r), must be identical. For refactors that must not
# change behaviour ("the instruction counts of unchanged modes do not move": identical code
# executes identical instructions). Data sections are not compared: the metadata blob
# carries its format version and hash, which a format change alters without changing any code.
#
#   bench/same_code.sh OLD_TALLY NEW_TALLY
#
# Exit status 0 when every file is identical, 1 otherwise (the differing files are named).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: bench/same_code.sh OLD_TALLY NEW_TALLY" >&2; exit 2; }
old=$(realpath "$1"); new=$(realpath "$2")
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# The modes, as the new tally lists them when given a bad one (one table: tally_format::mode).
modes=$("$new" cc --tally-mode=list -c /dev/null 2>&1 | sed -n 's/.*(\(possible values: \)\{0,1\}\([^)]*\)).*/\2/p' | tr -d ',' || true)
[ -n "$modes" ] || { echo "same_code: $new did not list its modes" >&2; exit 2; }
srcs=("$root"/testdata/early/*.c "$root"/testdata/early/*.cpp "$root"/testdata/shapes/*.c
      "$root"/testdata/events/*.c "$root"/testdata/threads/*.c)
lua=$("$root/testdata/locate.sh" lua)
bz=$("$root/testdata/locate.sh" bzip2)
srcs+=("$lua"/lvm.c "$lua"/lparser.c "$lua"/ldo.c "$lua"/lgc.c "$bz"/blocksort.c "$bz"/compress.c)
n=0; bad=0
for mode in $modes; do
  for src in "${srcs[@]}"; do
    for opt in -O0 -O2; do
      base=$(basename "$src"); drv=cc; case "$src" in *.cpp) drv=c++ ;; esac
      for t in old new; do
        bin=$old; [ $t = new ] && bin=$new
        "$bin" $drv --tally-mode=$mode $opt -g -I"$lua" -c "$src" -o "$work/$t.o" 2>"$work/err" ||
          { echo "same_code: $t tally failed on $mode $opt $src:" >&2; cat "$work/err" >&2; exit 1; }
        objdump -d -r "$work/$t.o" | tail -n +3 > "$work/$t.s"
      done
      n=$((n + 1))
      if ! cmp -s "$work/old.s" "$work/new.s"; then
        echo "differs: $mode $opt $base"; bad=$((bad + 1))
      fi
    done
  done
done
echo "same_code: $((n - bad)) of $n objects with identical code"
[ $bad -eq 0 ]
