#!/usr/bin/env python3
"""What one snapshot of a long-running process costs (TALLY_SNAPSHOT_SIGNAL; docs/design/
processes.md, "Snapshots"), on SQLite built with `tally cc` in edge mode: the program
(bench/snapshot/timed.c around testdata/sqlite/driver.c) runs SQLite's workload, then raises
the snapshot signal itself and times the raise, in which the handler stops the threads,
charges the waiting frames, writes the part, zeroes the counters and takes the charges back.
Variants, interleaved over --reps processes of --rounds snapshots each:

  ignored        no snapshots: the signal is ignored (what raise costs by itself)
  snapshot       a self-contained part per snapshot (the module's metadata in every part)
  shared         TALLY_META=shared: the part holds the non-zero counters only

and, under callgrind (a -gdwarf-4 build), the instructions of the handler per snapshot
(user space only: the kernel's part of writing the file is in the times).

    bench/snapshot_cost.py                      writes docs/snapshot-cost.md
    bench/snapshot_cost.py --reps 3 --out target/bench/snapshot-cost.md
    TALLY=/path/to/tally bench/snapshot_cost.py
"""
import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "target", "bench", "snapshot")
FLAGS = ["-O2", "-gdwarf-4", "-DSQLITE_THREADSAFE=0", "-DSQLITE_OMIT_LOAD_EXTENSION"]
VARIANTS = ["ignored", "snapshot", "shared"]

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tallybench.script import Script  # noqa: E402

S = Script("bench/snapshot_cost", WORK)
log, run = S.log, S.run


def build(tally):
    src = run([os.path.join(ROOT, "testdata", "locate.sh"), "sqlite"]).stdout.strip()
    objs = []
    for name, args in [
        ("sqlite3.o", [os.path.join(src, "sqlite3.c")]),
        ("driver.o", ["-Dmain=driver_main", os.path.join(ROOT, "testdata", "sqlite", "driver.c")]),
        ("timed.o", [os.path.join(ROOT, "bench", "snapshot", "timed.c")]),
    ]:
        out = os.path.join(WORK, name)
        run([tally, "cc", *FLAGS, f"-I{src}", "-c", *args, "-o", out])
        objs.append(out)
    exe = os.path.join(WORK, "timed")
    run([tally, "cc", *objs, "-lm", "-o", exe])
    return exe


def env_of(variant, d):
    env = dict(os.environ, TALLY_PROFILE=os.path.join(d, "p.tally"))
    for k in ("TALLY_SNAPSHOT_SIGNAL", "TALLY_SNAPSHOT_INTERVAL", "TALLY_META"):
        env.pop(k, None)
    if variant != "ignored":
        env["TALLY_SNAPSHOT_SIGNAL"] = "WINCH"
    if variant == "shared":
        env["TALLY_META"] = "shared"
    return env


def one(exe, variant, rounds, size):
    """Wall and CPU ns of each raise, and the parts' sizes (bytes, the metadata files aside)."""
    d = os.path.join(WORK, "out", variant)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    r = run([exe, str(rounds), str(size)], env=env_of(variant, d))
    times = [tuple(map(int, l.split()[1:])) for l in r.stderr.splitlines() if l.startswith("raise ")]
    if len(times) != rounds:
        sys.exit(f"bench/snapshot_cost: {variant}: {len(times)} raises of {rounds}:\n{r.stderr[-2000:]}")
    parts = [f for f in os.listdir(d) if ".s" in f and f.endswith(".tally")]
    want = 0 if variant == "ignored" else rounds
    if len(parts) != want:
        sys.exit(f"bench/snapshot_cost: {variant}: {len(parts)} parts, expected {want}:\n{r.stderr[-2000:]}")
    sizes = [os.path.getsize(os.path.join(d, f)) for f in parts]
    return times, sizes


def callgrind(exe, variant, rounds, size):
    """Instructions of the snapshot handler per snapshot."""
    d = os.path.join(WORK, "out", "callgrind-" + variant)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    out = os.path.join(d, "callgrind.out")
    run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", exe, str(rounds), str(size)],
        env=env_of(variant, d))
    # Inclusive cost of the handler (callgrind's --toggle-collect does not see a handler's entry).
    ann = run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out]).stdout
    total = None
    for line in ann.splitlines():
        if ":on_snapshot [" in line:
            total = int(line.split()[0].replace(",", ""))
    parts = [f for f in os.listdir(d) if ".s" in f and f.endswith(".tally")]
    if total is None or len(parts) != rounds:
        sys.exit(f"bench/snapshot_cost: callgrind: {total} instructions, {len(parts)} parts")
    return total / rounds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5, help="processes per variant, interleaved (default 5)")
    ap.add_argument("--rounds", type=int, default=20, help="snapshots per process (default 20)")
    ap.add_argument("--size", type=int, default=1, help="the driver's SIZE per round (default 1)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "snapshot-cost.md"))
    a = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    tally = S.tally_binary(keep=True)
    log("bench/snapshot_cost: building SQLite with tally cc (a minute)")
    exe = build(tally)
    times = {v: [] for v in VARIANTS}
    sizes = {v: [] for v in VARIANTS}
    for rep in range(a.reps):
        log(f"bench/snapshot_cost: repetition {rep + 1}/{a.reps}")
        for v in VARIANTS:
            t, s = one(exe, v, a.rounds, a.size)
            times[v] += t
            sizes[v] += s
    log("bench/snapshot_cost: callgrind")
    ir = {v: callgrind(exe, v, 3, a.size) for v in VARIANTS[1:]}
    full = os.path.getsize(os.path.join(WORK, "out", "snapshot", "p.tally"))

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    base_cpu = statistics.median(c for _, c in times["ignored"])
    lines = [
        "# The cost of one snapshot",
        "",
        f"Generated by `bench/snapshot_cost.py` on {datetime.date.today()}, tally at {commit}, "
        f"{platform.machine()} with {os.cpu_count()} cores (shared: wall times drift; the "
        f"instruction count does not). Load average at the end: {os.getloadavg()[0]:.1f}.",
        "",
        f"SQLite (the amalgamation and `testdata/sqlite/driver.c`, `tally cc -O2` edge mode, one "
        f"module; its profile at exit is {full / 1e6:.2f} MB) runs its workload (SIZE {a.size}) and then "
        f"raises the snapshot signal itself, {a.rounds} times per process, {a.reps} processes per "
        f"variant, interleaved; each figure is over all {a.rounds * a.reps} raises. The times are "
        f"those of the `raise` call: with snapshots on, the handler stops the threads (here the "
        f"only one), charges the waiting frames, writes the part, zeroes the counters and takes "
        f"the charges back.",
        "",
        "| variant | wall, median (ms) | wall, 90th pct (ms) | CPU, median (ms) | part size, median (kB) |",
        "|---|---|---|---|---|",
    ]
    for v in VARIANTS:
        ws = sorted(w for w, _ in times[v])
        cs = [c for _, c in times[v]]
        size = f"{statistics.median(sizes[v]) / 1e3:.0f}" if sizes[v] else "-"
        lines.append(f"| {v} | {statistics.median(ws) / 1e6:.3f} | {ws[int(0.9 * (len(ws) - 1))] / 1e6:.3f} | "
                     f"{statistics.median(cs) / 1e6:.3f} | {size} |")
    snap_cpu = statistics.median(c for _, c in times["snapshot"]) - base_cpu
    lines += [
        "",
        f"Instructions of the snapshot handler (`on_snapshot`, inclusive, user space) under callgrind, "
        f"mean of 3 snapshots: **{ir['snapshot'] / 1e6:.2f} million** per self-contained part, "
        f"{ir['shared'] / 1e6:.2f} million with `TALLY_META=shared`.",
        "",
        f"What that means for a server: one self-contained snapshot takes "
        f"{snap_cpu / 1e6:.1f} ms of CPU more than an ignored signal (baseline {base_cpu / 1e3:.0f} us); "
        f"with `TALLY_SNAPSHOT_INTERVAL=60` that is {100 * snap_cpu / 60e9:.4f}% of one core. "
        f"The threads are stopped for the whole handler, so the wall time is the pause a request "
        f"sees.",
        "",
        "Regenerate: `bench/snapshot_cost.py` (builds SQLite, about two minutes).",
    ]
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    log(f"bench/snapshot_cost: wrote {a.out}")


if __name__ == "__main__":
    main()
