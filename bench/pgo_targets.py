#!/usr/bin/env python3
"""Call targets of indirect calls (`tally cc --tally-pgo --tally-pgo-targets`, docs/pgo.md) on
SQLite, against clang's IR PGO, which learns the same by value profiling.

1. Fidelity: SQLite (testdata/sqlite/driver.c and the amalgamation of libsqlite3-sys) is
   trained on the same input with IR PGO (`-fprofile-generate`) and with tally. For every
   function tally's profile names as a call target, the calls it received through pointers,
   summed over every call site, are compared with the sum IR PGO's value profile gives it
   (`llvm-profdata show --ic-targets`); a target IR PGO's counts differ on is shown with its own
   entry count in tally's profile (a function called only through pointers: the calls it
   received), so that a difference can be told from an error.
2. What they gain: the rebuild from the same training profile with its call targets, without
   them (the lines' targets dropped), and with them but with promotion off (`-mllvm
   -disable-icp`), each also with the inliner's cost-benefit analysis off (`-mllvm
   -inline-enable-cost-benefit-analysis=false`: `tally cc --tally-use` turns it on), plus
   plain -O2 and IR PGO (with the analysis, its default, and without), each run on the test
   input under callgrind, and the promotions each makes (`-Rpass=pgo-icall-prom`).

    python3 bench/pgo_targets.py [--tally PATH]

Prints Markdown. The instruction counts are exact; the script stops if a rebuild prints
otherwise than plain.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tallybench.common import ROOT, callgrind, log  # noqa: E402
from tallybench.programs import parse_build, program_args  # noqa: E402

FLAGS = ["-O2", "-gdwarf-4"]


def run(cmd, cwd, env=None):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))[:300]}: {r.stderr.decode()[-600:]}")
    return r


def short(name):
    """A sample profile's name of a static function (`_ZL15memjrnlCloseP...`) as IR PGO's."""
    name = name.split(".__uniq.")[0]
    m = re.match(r"_ZL(\d+)", name)
    return name[len(m.group(0)):][:int(m.group(1))] if m else name


def tally_targets(text):
    """Target -> calls through pointers, and function -> head count, of a flat sample profile."""
    targets, heads = collections.Counter(), {}
    for line in text.splitlines():
        words = line.split()
        if not line.startswith(" "):
            name, _, head = line.rsplit(":", 2)
            heads[short(name)] = int(head)
        elif len(words) > 2 and words[1].isdigit():
            for t in words[2:]:
                name, c = t.rsplit(":", 1)
                targets[short(name)] += int(c)
    return targets, heads


def ir_targets(profdata, d):
    """Target -> calls through pointers in IR PGO's value profile."""
    text = run(["llvm-profdata-19", "show", "--ic-targets", "--all-functions", profdata],
               d).stdout.decode()
    out = collections.Counter()
    for m in re.finditer(r"^\s+\[\s*\d+, (\S+),\s+(\d+) \]", text, re.M):
        out[m.group(1).split(";")[-1]] += int(m.group(2))
    return out


def without_targets(text):
    """The profile with each call line's targets dropped."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if line.startswith(" ") and len(words) > 2 and words[1].isdigit():
            line = line[:len(line) - len(line.lstrip())] + " ".join(words[:2])
        out.append(line)
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tally", default=os.path.join(ROOT, "target", "release", "tally"))
    a = ap.parse_args()
    tally = os.path.realpath(a.tally)
    p = parse_build("sqlite")
    train, test = program_args(p, p["reduced"]), program_args(p, 2 * p["reduced"])
    d = tempfile.mkdtemp(prefix="tally-pgo-targets-")
    try:
        def build(name, extra, cc=("clang-19",)):
            run([*cc, *extra, *FLAGS, *p["cflags"], *p["sources"], *p["ldflags"], "-o", name], d)
            return os.path.join(d, name)

        log("training builds")
        irgen = build("irgen", ["-fprofile-generate"])
        tgen = build("tgen", ["--tally-pgo", "--tally-pgo-targets"], (tally, "cc"))
        run([irgen, *train], d, dict(os.environ, LLVM_PROFILE_FILE=os.path.join(d, "ir.profraw")))
        run(["llvm-profdata-19", "merge", "-o", "ir.profdata", "ir.profraw"], d)
        run([tgen, *train], d, dict(os.environ, TALLY_PROFILE=os.path.join(d, "t.tally")))
        flat = run([tally, "report", "--export", "sample-profile", "--flat", "t.tally"],
                   d).stdout.decode()
        ours, heads = tally_targets(flat)
        theirs = ir_targets("ir.profdata", d)
        same = sorted(n for n in ours if ours[n] == theirs.get(n))
        differ = sorted((n for n in ours if ours[n] != theirs.get(n)), key=lambda n: -ours[n])
        print(f"Call targets in tally's profile of the training run: {len(ours)}; the calls "
              f"through pointers of {len(same)} equal IR PGO's value profile, {len(differ)} "
              "differ:")
        print()
        print("| target | tally | IR PGO's value profile | its entry count (tally) |")
        print("|---|---|---|---|")
        for n in differ:
            print(f"| {n} | {ours[n]} | {theirs.get(n, 'none')} | {heads.get(n, 'no record')} |")
        print()

        log("rebuilds")
        run([tally, "report", "--export", "sample-profile", "-o", "t.prof", "t.tally"], d)
        with open(os.path.join(d, "t.prof")) as f:
            text = f.read()
        with open(os.path.join(d, "none.prof"), "w") as f:
            f.write(without_targets(text))
        cb_off = ["-mllvm", "-inline-enable-cost-benefit-analysis=false"]
        builds = {
            "plain -O2": (["clang-19"], []),
            "IR PGO": (["clang-19"], ["-fprofile-use=ir.profdata", "-Wno-backend-plugin"]),
            "IR PGO, cost-benefit analysis off": (["clang-19"], ["-fprofile-use=ir.profdata",
                                                                 "-Wno-backend-plugin", *cb_off]),
            "tally PGO without call targets": ([tally, "cc"], ["--tally-use=none.prof"]),
            "tally PGO with call targets": ([tally, "cc"], ["--tally-use=t.prof"]),
            "with call targets, promotion off": ([tally, "cc"], ["--tally-use=t.prof", "-mllvm",
                                                                 "-disable-icp"]),
            "without call targets, cost-benefit analysis off": (
                [tally, "cc"], ["--tally-use=none.prof", *cb_off]),
            "with call targets, cost-benefit analysis off": (
                [tally, "cc"], ["--tally-use=t.prof", *cb_off]),
        }
        rows = []
        want = None
        for i, (label, (cc, extra)) in enumerate(builds.items()):
            exe = f"b{i}"
            r = run([*cc, *extra, "-Rpass=pgo-icall-prom", *FLAGS, *p["cflags"], *p["sources"],
                     *p["ldflags"], "-o", exe], d)
            promoted = r.stderr.decode().count("remark: Promote indirect call")
            out = run([os.path.join(d, exe), *test], d).stdout
            want = want if want is not None else out
            if out != want:
                raise RuntimeError(f"{label} prints otherwise than plain")
            n = callgrind([os.path.join(d, exe), *test], d)
            size = os.path.getsize(os.path.join(d, exe))
            rows.append((label, n, promoted, size))
        base = rows[0][1]
        print("Instructions of the test run (callgrind), calls promoted, binary size:")
        print()
        print("| build | instructions | ratio to plain | calls promoted | bytes |")
        print("|---|---|---|---|---|")
        for label, n, promoted, size in rows:
            print(f"| {label} | {n} | ×{n / base:.3f} | {promoted} | {size} |")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
