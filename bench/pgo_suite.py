#!/usr/bin/env python3
"""Profile-guided optimization from tally's exact counts against clang's IR PGO on every
program of the benchmark suite (testdata/bench/*/BUILD), all in one run (docs/pgo.md has the
results; bench/pgo.sh measures more variants on Lua and SQLite alone).

Per program, at -O2, eleven builds: plain clang; IR PGO's training build (-fprofile-generate)
and its optimized build (-fprofile-use); tally's training build (tally cc --tally-pgo, call
targets counted), the same without pre-inlining (--tally-pgo-inline=off), and tally's
optimized build (tally cc --tally-use: the nested sample profile, the inliner's cost-benefit
analysis on), also from that profile without its `!Attributes: 2` lines (the loader then
inlines by its own rules instead of again where the training build did), both with the
loader's coverage check on (the records it did not apply are counted), with the probes
deleted once the loader has used them (-mllvm -sample-profile-remove-probe; they otherwise
stay in the optimized code), and with the cost-benefit analysis off (-mllvm
-inline-enable-cost-benefit-analysis=false, LLVM's default for sample profiles); tally's
training build without call targets (--tally-pgo-targets=off) and the optimized build from its
profile. The
training builds run the training input (the program's reduced size), and tally's first two
must give the same sample profile (a probe's count, or a call target's, does not depend on
which copies of it inlining made; the pre-inlined build may lack the targets of indirect
calls its inliner made direct); every build then runs the test input (twice that size: more
and different generated data) under callgrind, which counts instructions exactly where times
on this shared machine drift. Each optimized build must print what the plain build prints.

    python3 bench/pgo_suite.py [--programs lua,zlib] [--tally PATH] [--jobs 2] [--rounds 21]

Prints a Markdown table: instructions of the test run per build, ratios to plain -O2, the
training build's overhead as a fraction of IR PGO's, and tally's gain as a fraction of IR
PGO's (1.0: the same gain). Then a table of wall-clock times of the test run of plain, IR PGO
and tally PGO: after every build is done, --rounds interleaved rounds, one at a time, each
running every program's three builds once in an order rotated by one each round; the median per
build and its ratio to plain's median (only ratios within one run mean anything on a shared
machine).
"""
import argparse
import concurrent.futures
import math
import os
import re
import shutil
import subprocess
import sys
import statistics
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tallybench.common import ROOT, callgrind, log  # noqa: E402
from tallybench.programs import parse_build, program_args  # noqa: E402

PROGRAMS = ["lua", "sqlite", "zlib", "bzip2", "zstd", "xz", "mimalloc", "pcre2"]
# Debian's valgrind reads DWARF 4, not clang-19's default 5.
FLAGS = ["-O2", "-gdwarf-4"]
# The loader warns about each function whose profile records it did not all apply.
COVERAGE = ["-mllvm", "-sample-profile-check-record-coverage=100"]


def run(cmd, cwd, env=None, check=True):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))[:300]}: {r.stderr.decode()[-600:]}")
    return r


def build(p, tally, d, name, extra, compiler="clang"):
    """Compiles and links program `p` in `d` as `name`."""
    cc = [tally, "cc"] if compiler == "tally" else ["clang-19"]
    cmd = cc + extra + FLAGS + p["cflags"] + p["sources"] + p["ldflags"] + ["-o", name]
    r = run(cmd, d)
    with open(os.path.join(d, name + ".stderr"), "wb") as f:
        f.write(r.stderr)
    return os.path.join(d, name)


def unapplied(d, name):
    """The records of the sample profile that the loader did not apply in build `name`, and in
    how many functions, from its coverage check's warnings ("N of M available profile records
    (P%) were applied")."""
    with open(os.path.join(d, name + ".stderr"), "rb") as f:
        found = re.findall(rb"(\d+) of (\d+) available profile records", f.read())
    return sum(int(m) - int(n) for n, m in found), len(found)


def split_targets(text):
    """A flat text sample profile without its call-target lines, and those lines (each with its
    record's name)."""
    rest, targets, record = [], set(), None
    for line in text.decode().splitlines():
        if not line.startswith(" "):
            record = line.rsplit(":", 2)[0]
        elif len(line.split()) > 2 and not line.lstrip().startswith("!"):
            targets.add((record, line))
            continue
        rest.append(line)
    return rest, targets


def records(lines):
    """The records of a flat text sample profile: name -> (header line, {probe: line})."""
    out, name = {}, None
    for line in lines:
        if not line.startswith(" "):
            name = line.rsplit(":", 2)[0]
            out[name] = (line, {})
        else:
            out[name][1][line.split(":")[0].strip()] = line
    return out


def same_counts(pre_inlined, whole):
    """The two training builds' profiles agree: the same probes and counts, but for probes of
    0 in the whole build that the pre-inlined one lacks, and records of a function that never
    ran that it lacks altogether (the inliner left them out of the one copy of a local function
    it then deleted: `crates/llvm/src/module/pre_inline.rs`), and every call target line of
    the pre-inlined build is the whole build's. (The inliner turns some indirect calls into
    direct ones, where a caller's constant argument is the callee: those are counted in the
    whole build only.)"""
    (a, ta), (b, tb) = split_targets(pre_inlined), split_targets(whole)
    ra, rb = records(a), records(b)
    for name, (head, probes) in rb.items():
        if name not in ra:
            if head.endswith(":0:0") and all(
                    l.endswith(": 0") for k, l in probes.items() if not k.startswith("!")):
                continue
            return False
        head_a, probes_a = ra[name]
        dropped = {k for k in probes.keys() - probes_a.keys() if probes[k].endswith(": 0")}
        if head_a != head or probes_a != {k: v for k, v in probes.items() if k not in dropped}:
            return False
    return ra.keys() <= rb.keys() and ta <= tb


def measure(name, tally, work):
    """The builds of one program and the instructions of their test runs."""
    p = parse_build(name)
    d = os.path.join(work, name)
    os.makedirs(d)
    train = program_args(p, p["reduced"])
    test = program_args(p, 2 * p["reduced"])
    env = dict(os.environ, **p["env"])
    log(f"{name}: building")
    plain = build(p, tally, d, "plain", [])
    irgen = build(p, tally, d, "irgen", ["-fprofile-generate"])
    tgen = build(p, tally, d, "tgen", ["--tally-pgo"], "tally")
    whole = build(p, tally, d, "whole", ["--tally-pgo", "--tally-pgo-inline=off"], "tally")
    tgt = build(p, tally, d, "tgt", ["--tally-pgo", "--tally-pgo-targets=off"], "tally")
    run([tgt, *train], d, dict(env, TALLY_PROFILE=os.path.join(d, "g.tally")))
    run([irgen, *train], d, dict(env, LLVM_PROFILE_FILE=os.path.join(d, "ir.profraw")))
    run(["llvm-profdata-19", "merge", "-o", "ir.profdata", "ir.profraw"], d)
    # A program may take other paths from run to run (mimalloc seeds its randomness from the
    # OS): a difference is retried before it counts against pre-inlining.
    for attempt in range(3):
        run([tgen, *train], d, dict(env, TALLY_PROFILE=os.path.join(d, "t.tally")))
        run([whole, *train], d, dict(env, TALLY_PROFILE=os.path.join(d, "w.tally")))
        texts = [run([tally, "report", "--export", "sample-profile", "--flat", f], d).stdout
                 for f in ("t.tally", "w.tally")]
        if same_counts(*texts):
            break
        log(f"{name}: the two training runs' profiles differ (attempt {attempt + 1})")
    else:
        kept = os.path.join(ROOT, "target", "bench", f"pgo-suite-{name}")
        os.makedirs(kept, exist_ok=True)
        for f, text in zip(("pre-inlined.prof", "whole.prof"), texts):
            with open(os.path.join(kept, f), "wb") as out:
                out.write(text)
        raise RuntimeError(f"{name}: the sample profile depends on pre-inlining (both in {kept})")
    iruse = build(p, tally, d, "iruse", ["-fprofile-use=ir.profdata", "-Wno-backend-plugin"])
    tuse = build(p, tally, d, "tuse", ["--tally-use=t.tally", *COVERAGE], "tally")
    # The same profile without its `!Attributes: 2` lines (each nested record's "the training
    # build inlined this call"): the loader then inlines by its own rules.
    text = run([tally, "report", "--export", "sample-profile", "t.tally"], d).stdout
    with open(os.path.join(d, "own.prof"), "wb") as f:
        f.write(b"".join(l for l in text.splitlines(keepends=True)
                         if not l.lstrip().startswith(b"!Attributes:")))
    own = build(p, tally, d, "own", ["--tally-use=own.prof", *COVERAGE], "tally")
    # With the probes deleted once the loader has used them (they stay in the optimized code
    # otherwise, where they hold blocks apart that the optimizer would merge or fold).
    kept = build(p, tally, d, "kept", ["--tally-use=t.tally", "-mllvm",
                                       "-sample-profile-remove-probe"], "tally")
    guse = build(p, tally, d, "guse", ["--tally-use=g.tally"], "tally")
    nocb = build(p, tally, d, "nocb", ["--tally-use=t.tally", "-mllvm",
                                       "-inline-enable-cost-benefit-analysis=false"], "tally")
    want = run([plain, *test], d, env, check=False)
    for b in (iruse, tuse, own, kept, guse, nocb):
        got = run([b, *test], d, env, check=False)
        if (got.returncode, got.stdout) != (want.returncode, want.stdout):
            raise RuntimeError(f"{name}: {os.path.basename(b)} prints otherwise than plain")
    log(f"{name}: callgrind")
    menv = dict(env, TALLY_PROFILE=os.path.join(d, "x.tally"),
                LLVM_PROFILE_FILE=os.path.join(d, "x.profraw"))
    counts = {k: callgrind([b, *test], d, menv)
              for k, b in [("plain", plain), ("irgen", irgen), ("tgen", tgen), ("whole", whole),
                           ("tgt", tgt), ("iruse", iruse), ("tuse", tuse), ("own", own),
                           ("kept", kept), ("guse", guse), ("nocb", nocb)]}
    counts["unapplied"] = {k: unapplied(d, k) for k in ("tuse", "own")}
    return counts, {"plain": plain, "iruse": iruse, "tuse": tuse, "test": test, "env": env, "d": d}


def times(runs, rounds):
    """Wall-clock seconds of each final build's test run, `rounds` interleaved rounds."""
    jobs = [(n, k) for n in runs for k in ("plain", "iruse", "tuse")]
    out = {j: [] for j in jobs}
    for r in range(rounds):
        order = jobs[r % len(jobs):] + jobs[:r % len(jobs)]
        for n, k in order:
            x = runs[n]
            t = time.perf_counter()
            run([x[k], *x["test"]], x["d"], x["env"], check=False)
            out[(n, k)].append(time.perf_counter() - t)
    return {j: statistics.median(v) for j, v in out.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--tally", default=os.path.join(ROOT, "target", "release", "tally"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=21)
    a = ap.parse_args()
    tally = os.path.realpath(a.tally)
    work = tempfile.mkdtemp(prefix="tally-pgo-suite-")
    names = a.programs.split(",")
    try:
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
            done = dict(zip(names, ex.map(lambda n: measure(n, tally, work), names)))
        results = {n: c for n, (c, _) in done.items()}
        log(f"{a.rounds} rounds of times")
        secs = times({n: r for n, (_, r) in done.items()}, a.rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| program | -O2 | IR PGO training | tally --tally-pgo training | without pre-inlining "
          "| tally's training overhead / IR PGO's | IR PGO | tally PGO | tally's gain / IR PGO's "
          "| records not applied | loader's own inlining | its gain / IR PGO's | records not applied "
          "| probes deleted after the loader | its gain / IR PGO's "
          "| training without call targets | tally PGO without call targets | its gain / IR PGO's "
          "| without the cost-benefit analysis | its gain / IR PGO's |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    logs = {"ir": [], "t": [], "o": [], "k": [], "n": [], "irg": [], "tg": [], "ng": [], "c": []}
    for n in names:
        r = dict(results[n])
        left = {k: f"{x} in {f} functions" if x else "0" for k, (x, f) in r.pop("unapplied").items()}
        ratio = {k: r[k] / r["plain"] for k in r}
        ir_gain = 1 - ratio["iruse"]
        share, own_share, kept_share, g_share, c_share = (
            f"{(1 - ratio[k]) / ir_gain:.2f}" if ir_gain > 0 else "n/a (IR PGO gains nothing)"
            for k in ("tuse", "own", "kept", "guse", "nocb"))
        logs["ir"].append(math.log(ratio["iruse"]))
        logs["t"].append(math.log(ratio["tuse"]))
        logs["o"].append(math.log(ratio["own"]))
        logs["k"].append(math.log(ratio["kept"]))
        logs["n"].append(math.log(ratio["guse"]))
        logs["c"].append(math.log(ratio["nocb"]))
        for k, b in (("irg", "irgen"), ("tg", "tgen"), ("ng", "tgt")):
            logs[k].append(math.log(ratio[b]))
        cost = (ratio["tgen"] - 1) / (ratio["irgen"] - 1)
        print(f"| {n} | {r['plain']} | ×{ratio['irgen']:.3f} | ×{ratio['tgen']:.3f} "
              f"| ×{ratio['whole']:.3f} | {cost:.2f} "
              f"| ×{ratio['iruse']:.3f} | ×{ratio['tuse']:.3f} | {share} | {left['tuse']} "
              f"| ×{ratio['own']:.3f} | {own_share} | {left['own']} "
              f"| ×{ratio['kept']:.3f} | {kept_share} "
              f"| ×{ratio['tgt']:.3f} | ×{ratio['guse']:.3f} | {g_share} "
              f"| ×{ratio['nocb']:.3f} | {c_share} |")
    gm = {k: math.exp(sum(v) / len(v)) for k, v in logs.items()}
    print(f"| geomean | | ×{gm['irg']:.3f} | ×{gm['tg']:.3f} | | | ×{gm['ir']:.3f} "
          f"| ×{gm['t']:.3f} | | | ×{gm['o']:.3f} | | | ×{gm['k']:.3f} | | ×{gm['ng']:.3f} "
          f"| ×{gm['n']:.3f} | | ×{gm['c']:.3f} | |")
    print()
    print(f"Wall-clock seconds of the test run, median of {a.rounds} interleaved rounds, ratio to "
          "plain's median:")
    print()
    print("| program | -O2 | IR PGO | tally PGO | tally's gain / IR PGO's |")
    print("|---|---|---|---|---|")
    tlogs = {"ir": [], "t": []}
    for n in names:
        p = secs[(n, "plain")]
        ir, t = secs[(n, "iruse")] / p, secs[(n, "tuse")] / p
        tlogs["ir"].append(math.log(ir))
        tlogs["t"].append(math.log(t))
        share = f"{(1 - t) / (1 - ir):.2f}" if ir < 1 else "n/a (IR PGO gains nothing)"
        print(f"| {n} | {p:.3f} | {secs[(n, 'iruse')]:.3f} (×{ir:.3f}) "
              f"| {secs[(n, 'tuse')]:.3f} (×{t:.3f}) | {share} |")
    tg = {k: math.exp(sum(v) / len(v)) for k, v in tlogs.items()}
    print(f"| geomean | | ×{tg['ir']:.3f} | ×{tg['t']:.3f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
