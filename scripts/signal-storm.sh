#!/usr/bin/env bash
# A signal storm on a loaded machine, for witness tracing's signal streams
# (docs/design/trace.md, "Signal handlers in witness traces", Locks): testdata/wtrace/signals.c
# built with `tally cc --tally-mode=trace`, its `storm` mode (SIGALRM every 20 us) run for N signals,
# range-coded (TALLY_TRACE_COMPRESS=1), COPIES processes at once. Each must exit 0 within 120 s,
# under 64 MB of memory (ulimit -v 2.5 GB as a guard), and `tally report --trace` of its trace
# must count as many entries of the handler as the program counted signals.
# The runtime of 2a9bda7 to 7ceccb8 failed it: its processes grew to 868 MB each and never
# finished (a handler's chunks owed at every interrupted write of the runtime, paid recursively);
# CI once saw its 3,000-signal test killed by the OOM killer at 22 GB.
#
# Usage: scripts/signal-storm.sh [N=100000] [COPIES=6]      (about 20 s on 2 cores)
# TALLY=path/to/tally runs another build of tally (no cargo build).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-100000}
COPIES=${2:-6}
WORK=$ROOT/target/signal-storm
if [ -z "${TALLY:-}" ]; then
  TALLY=$ROOT/target/release/tally
  (cd "$ROOT" && cargo build --release -p tally -q) || exit 1
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
"$TALLY" cc --tally-mode=trace -O2 -g "$ROOT/testdata/wtrace/signals.c" -o prog || exit 1
for k in $(seq 1 "$COPIES"); do
  (ulimit -v 2500000
   TALLY_TRACE=$k.trace TALLY_PROFILE=$k.tally TALLY_TRACE_COMPRESS=1 \
     timeout 120 /usr/bin/time -f "maxrss %M" -o "$k.time" ./prog storm "$N" >"$k.out" 2>"$k.err"
   echo $? >"$k.rc") &
done
wait
failed=0
for k in $(seq 1 "$COPIES"); do
  rc=$(cat "$k.rc"); rss=$(sed -n 's/^maxrss //p' "$k.time"); ticks=$(sed -n 's/.*ticks \([0-9]*\).*/\1/p' "$k.err")
  entries=$("$TALLY" report --format json --trace "$k.trace" "$k.tally" 2>/dev/null |
    python3 -c 'import json,sys; print(sum(f["entry_count"] for f in json.load(sys.stdin)["functions"] if f["name"] == "on_alarm"))' 2>/dev/null)
  ok=yes
  [ "$rc" = 0 ] && [ -n "$rss" ] && [ "$rss" -lt 65536 ] && [ -n "$ticks" ] && [ "$entries" = "$ticks" ] || ok=NO
  [ $ok = yes ] || failed=1
  echo "copy $k: exit $rc, max RSS ${rss:-?} KB, signals ${ticks:-?}, handler entries regenerated ${entries:-?}: $ok"
done
exit $failed
