#!/usr/bin/env python3
"""What variants of the `--tally-pgo` training build cost (docs/pgo.md, "Training cost").

Per program of the PGO suite (bench/pgo_suite.py's eight), at -O2: plain clang, IR PGO's
training build (-fprofile-generate) and each variant's training build, all run under callgrind
on the suite's test input (twice the training input, as pgo_suite.py measures every build;
`--input training` for the training input). A variant is `NAME=TALLY[ FLAG...]`: a tally
binary and extra flags for `tally cc --tally-pgo`. Prints a markdown table of instructions:
plain's, then each build's ratio to plain, and each variant's overhead as a fraction of IR
PGO's ((variant - 1) / (IR PGO - 1)), with geomeans. The variants' profiles of the training run
must give one sample profile (`tally report --export sample-profile`): how the training build is
compiled changes what the training costs, never its counts; the script fails otherwise.

    python3 bench/pgo_training.py --variant 'base=target/release/tally' \\
        --variant 'nopromo=target/release/tally -mllvm -disable-licm-promotion' [--programs zlib]
"""
import argparse
import math
import os
import shlex
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pgo_suite import FLAGS, PROGRAMS, build, run  # noqa: E402
from tallybench.common import callgrind, log  # noqa: E402
from tallybench.programs import parse_build, program_args  # noqa: E402


def measure(name, variants, work, scale):
    """Instructions of plain, IR PGO's training build and each variant's, on `scale` times the
    training input."""
    p = parse_build(name)
    d = os.path.join(work, name)
    os.makedirs(d)
    train = program_args(p, scale * p["reduced"])
    env = dict(os.environ, **p["env"])
    tally0 = variants[0][1]
    log(f"{name}: plain, IR PGO")
    out = {"plain": callgrind([build(p, tally0, d, "plain", []), *train], d, env),
           "ir": callgrind([build(p, tally0, d, "irgen", ["-fprofile-generate"]), *train], d,
                           dict(env, LLVM_PROFILE_FILE=os.path.join(d, "ir.profraw")))}
    exes = {}
    for v, tally, flags in variants:
        log(f"{name}: {v}")
        exes[v] = build(p, tally, d, f"t-{v}", ["--tally-pgo", *flags], "tally")
        out[v] = callgrind([exes[v], *train], d,
                          dict(env, TALLY_PROFILE=os.path.join(d, f"{v}.cg.tally")))
    # The same counts from every variant. A program may take other paths from run to run
    # (mimalloc seeds its randomness from the OS): a difference is retried before it counts.
    for attempt in range(5):
        profiles = set()
        for v, tally, _ in variants:
            prof = os.path.join(d, f"{v}.tally")
            run([exes[v], *train], d, dict(env, TALLY_PROFILE=prof))
            profiles.add(run([tally, "report", "--export", "sample-profile", prof], d).stdout)
        if len(profiles) == 1:
            return out
        log(f"{name}: the variants' sample profiles differ (attempt {attempt + 1})")
    raise RuntimeError(f"{name}: the variants' sample profiles differ")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", action="append", required=True,
                    help="NAME=TALLY [FLAG...]: a training build to measure")
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--input", choices=["test", "training"], default="test")
    a = ap.parse_args()
    scale = 2 if a.input == "test" else 1
    variants = []
    for spec in a.variant:
        name, _, rest = spec.partition("=")
        words = shlex.split(rest)
        if not name or not words:
            ap.error(f"--variant {spec!r}: expected NAME=TALLY [FLAG...]")
        variants.append((name, os.path.abspath(words[0]), words[1:]))
    names = [v for v, _, _ in variants]
    rows = {}
    with tempfile.TemporaryDirectory(prefix="tally-pgo-training-") as work:
        for prog in a.programs.split(","):
            rows[prog] = measure(prog, variants, work, scale)
    print(f"Instructions of a run of each build ({a.input} input, {' '.join(FLAGS)}); ratios to "
          "plain; a variant's overhead as a fraction of IR PGO's training build's.\n")
    print("| program | plain | IR PGO | " + " | ".join(f"{v} | {v} / IR PGO" for v in names) + " |")
    print("|---|---|---|" + "---|---|" * len(names))
    logs = {k: [] for k in ["ir", *names]}
    for prog, r in rows.items():
        cells = [prog, f"{r['plain']:,}", f"×{r['ir'] / r['plain']:.4f}"]
        for v in names:
            cells += [f"×{r[v] / r['plain']:.4f}",
                      f"{(r[v] / r['plain'] - 1) / (r['ir'] / r['plain'] - 1):.2f}"]
        for k in logs:
            logs[k].append(math.log(r[k] / r["plain"]))
        print("| " + " | ".join(cells) + " |")
    geo = {k: math.exp(sum(x) / len(x)) for k, x in logs.items()}
    cells = ["geomean", "", f"×{geo['ir']:.4f}"]
    for v in names:
        cells += [f"×{geo[v]:.4f}", f"{(geo[v] - 1) / (geo['ir'] - 1):.3f}"]
    print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
