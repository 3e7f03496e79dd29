#!/usr/bin/env python3
"""Whether a context-sensitive sample profile (CSSPGO's `[caller:probe @ callee]` contexts)
beats the nested one `tally cc --tally-use` writes (issue #46, point 5; docs/pgo.md, "Calling
contexts").

The calling contexts a `--tally-pgo` profile knows are the inline instances of its training
build's pre-inlining; the nested profile writes each under its call site (` probe:
callee:total`, `!Attributes: 2`). This script writes the same instances as contexts of LLVM's
CS flat text layout (`[main:2 @ foo]:total:head`, head the instance's entry probe), checks
that `llvm-profdata merge --sample --convert-sample-profile-layout=nest` turns them back into
the nested profile's records and probe counts (the loader's own reading of the layout), and
rebuilds from each.

Per program of the PGO suite (bench/pgo_suite.py's eight), at -O2: plain clang, tally's
training build run on the training input, then rebuilds from the nested profile, from the CS
profile, and from the CS profile with the loader's prioritized inliner off (`-mllvm
-sample-profile-prioritized-inline=false`, on by default for CS profiles), each run under
callgrind on the test input. Prints a markdown table of instructions (plain's, then ratios).

    python3 bench/pgo_contexts.py [--programs zstd,lua] [--tally PATH]
"""
import argparse
import math
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pgo_suite import COVERAGE, PROGRAMS, build, run  # noqa: E402
from tallybench.common import ROOT, callgrind, log  # noqa: E402
from tallybench.programs import parse_build, program_args  # noqa: E402

REBUILDS = [
    ("nested", "t.prof", []),
    ("cs", "cs.prof", []),
    ("cs-noprio", "cs.prof", ["-mllvm", "-sample-profile-prioritized-inline=false"]),
]


def parse_nested(text):
    """The records of a nested text sample profile: dicts of name, total, head (None for an
    inline instance), body lines, metadata lines and children [(call-site probe, record)]."""
    recs, stack = [], []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        depth = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        if depth == 0:
            name, total, head = line.rsplit(":", 2)
            r = dict(name=name, total=int(total), head=int(head), body=[], meta=[], children=[])
            recs.append(r)
            stack = [r]
            continue
        del stack[depth:]
        parent = stack[-1]
        if line.startswith("!"):
            parent["meta"].append(line)
            continue
        probe, rest = line.split(": ", 1)
        if re.fullmatch(r"\d+", rest.split()[0]):
            parent["body"].append((probe, line))
        else:
            name, total = rest.rsplit(":", 1)
            r = dict(name=name, total=int(total), head=None, body=[], meta=[], children=[])
            parent["children"].append((probe, r))
            stack.append(r)
    return recs


def contexts(recs):
    """The CS flat text layout of nested records: each inline instance a record of its own
    under its context, its head the count of its entry probe."""
    out = []

    def emit(r, ctx):
        head = r["head"]
        if head is None:
            head = next((int(l.split()[1]) for p, l in r["body"] if p == "1"), 0)
        out.append(f"[{ctx}]:{r['total']}:{head}")
        out.extend(" " + l for _, l in r["body"])
        out.extend(" " + m for m in r["meta"])
        for probe, c in r["children"]:
            emit(c, f"{ctx}:{probe} @ {c['name']}")

    for r in recs:
        emit(r, r["name"])
    return "\n".join(out) + "\n"


def probe_counts(recs):
    """Every probe line, attribute and checksum of nested records, keyed by its chain of call
    sites: what a round trip through the CS layout must keep (totals aside, which llvm-profdata
    sums its own way)."""
    out = set()

    def walk(r, ctx):
        out.update((ctx, l) for _, l in r["body"])
        out.update((ctx, m) for m in r["meta"])
        for probe, c in r["children"]:
            walk(c, f"{ctx}:{probe} @ {c['name']}")

    for r in recs:
        walk(r, r["name"])
    return out


def measure(name, tally, work):
    p = parse_build(name)
    d = os.path.join(work, name)
    os.makedirs(d)
    env = dict(os.environ, **p["env"])
    log(f"{name}: training")
    plain = build(p, tally, d, "plain", [])
    tgen = build(p, tally, d, "tgen", ["--tally-pgo"], "tally")
    run([tgen, *program_args(p, p["reduced"])], d, dict(env, TALLY_PROFILE=os.path.join(d, "t.tally")))
    nested = run([tally, "report", "--export", "sample-profile", "t.tally"], d).stdout.decode()
    recs = parse_nested(nested)
    with open(os.path.join(d, "t.prof"), "w") as f:
        f.write(nested)
    with open(os.path.join(d, "cs.prof"), "w") as f:
        f.write(contexts(recs))
    run(["llvm-profdata-19", "merge", "--sample", "--text",
         "--convert-sample-profile-layout=nest", "cs.prof", "-o", "back.prof"], d)
    with open(os.path.join(d, "back.prof")) as f:
        back = parse_nested(f.read())
    if probe_counts(back) != probe_counts(recs):
        raise RuntimeError(f"{name}: llvm-profdata reads the CS profile otherwise than the nested one")
    test = program_args(p, 2 * p["reduced"])
    want = run([plain, *test], d, env, check=False)
    counts = {"plain": callgrind([plain, *test], d, env)}
    for k, prof, extra in REBUILDS:
        log(f"{name}: {k}")
        b = build(p, tally, d, k, [f"--tally-use={prof}", *COVERAGE, *extra], "tally")
        got = run([b, *test], d, env, check=False)
        if (got.returncode, got.stdout) != (want.returncode, want.stdout):
            raise RuntimeError(f"{name}: {k} prints otherwise than plain")
        counts[k] = callgrind([b, *test], d, env)
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--tally", default=os.path.join(ROOT, "target", "release", "tally"))
    a = ap.parse_args()
    tally = os.path.realpath(a.tally)
    work = tempfile.mkdtemp(prefix="tally-pgo-contexts-")
    names = a.programs.split(",")
    try:
        results = {n: measure(n, tally, work) for n in names}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    keys = [k for k, _, _ in REBUILDS]
    print("| program | -O2 | " + " | ".join(keys) + " |")
    print("|---|---|" + "---|" * len(keys))
    logs = {k: [] for k in keys}
    for n in names:
        r = results[n]
        cells = []
        for k in keys:
            ratio = r[k] / r["plain"]
            logs[k].append(math.log(ratio))
            cells.append(f"×{ratio:.4f}")
        print(f"| {n} | {r['plain']:,} | " + " | ".join(cells) + " |")
    print("| geomean | | " + " | ".join(
        f"×{math.exp(sum(v) / len(v)):.4f}" for v in logs.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
