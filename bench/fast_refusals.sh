#!/usr/bin/env bash
# Counts, per program of the suite, the loops events mode versions and the refusals by reason
# (crates/llvm/src/modes/events/fast.rs, TALLY_DEBUG_FAST) under each `--tally-sese` choice
# given: compiles (-c) every source of testdata/bench/PROGRAM/BUILD as bench/run does.
#
#   bench/fast_refusals.sh TALLY "bzip2 zlib lua sqlite" "on all"
set -euo pipefail
tally=$(realpath "$1"); progs=$2; choices=${3:-on}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
for p in $progs; do
  build="$root/testdata/bench/$p/BUILD"
  lib=$(sed -n 's/^library: //p' "$build")
  src=$("$root/testdata/locate.sh" "$lib")
  cflags=$(sed -n 's/^cflags: //p' "$build" | tr '\n' ' ' |
    sed -e "s#{src}#$src#g" -e "s#{root}#$root#g" -e "s#{bench}#$root/testdata/bench#g")
  files=()
  for s in $(sed -n 's/^sources: //p' "$build"); do
    case "$s" in
      @*) f=$(echo "${s#@}" | sed -e "s#{root}#$root#g"); files+=($(cat "$f")) ;;
      *) files+=("$s") ;;
    esac
  done
  for choice in $choices; do
    : > "$work/log"
    for f in "${files[@]}"; do
      eval "TALLY_DEBUG_FAST=1 \"$tally\" cc --tally-mode=events --tally-sese=$choice --tally-verbose -O2 -g $cflags -c \"$src/$f\" -o \"$work/o.o\"" 2>>"$work/log" >/dev/null
    done
    v=$(grep -o '[0-9]* SESE counters' "$work/log" | awk '{s+=$1} END {print s+0}')
    l=$(grep -o 'candidates in [0-9]* loops' "$work/log" | awk '{s+=$3} END {print s+0}')
    r=$(grep -o 'refused [A-Za-z]*' "$work/log" | sort | uniq -c | sort -rn | awk '{printf "%s %s, ", $3, $1}')
    echo "$p $choice: $v of $l loops versioned; refused: ${r%, }"
  done
done
