#!/usr/bin/env python3
"""Fidelity of tally's PGO loop on the benchmark suite (testdata/bench): what clang's
sample-profile loader attaches from tally's exact profile, against clang's own IR PGO.

crates/cli/tests/e2e/pgo_fidelity.rs does this on small test programs; this script does it on
the 8 real programs of the suite (docs/pgo-fidelity.md has the results and how to read them).

Per program, both trained once on the same input (the program's `reduced` size):

  tally     `tally cc --tally-pgo -O2 -g` -> train.tally; `tally report --export
            sample-profile --flat` (name:total:head, probe counts) and `--format json` (early exits).
  IR PGO    at its most exact: `clang-19 -O2 -g -funique-internal-linkage-names -mllvm
            -disable-preinline -fprofile-generate -fprofile-update=atomic`, run with
            LLVM_PROFILE_FILE, `llvm-profdata-19 merge` -> ir.profdata.

Then every source is compiled (`-c -o /dev/null`) twice, and the IR dumps are parsed as they
stream (SQLite's are hundreds of MB):

  (a) `tally cc --tally-use=train.tally --tally-use-flat ... -mllvm -print-after=sample-profile`
      (the flat profile: the one whose records these checks read; the nested one, merged back
      by the loader, gives the same entry counts: crates/cli/tests/e2e/pgo_fidelity.rs)
  (b) `clang-19 ... -fprofile-use=ir.profdata -mllvm -print-after=pgo-instr-use`

1. Entry counts: the `!{!"function_entry_count", i64 N}` of each `define`. For every function
   IR PGO says ran (N > 0): equal (the loader's count is IR PGO's or that +1, the loader's +1 on
   a count), or differs; a differing function is either left early in the training run (an
   `early-exit` edge that ran, in tally's report) or unexplained: those are listed with tally's
   `name:total:head`, the loader's count and IR PGO's. Also counted: functions the loader gives
   a count and IR PGO does not, and the reverse.
2. Block weights, from dump (a): every two-way `br i1` whose two successors each have the branch
   as their only predecessor and hold a probe of the function (its first probe of the
   function's GUID); its `branch_weights` against the two probes' counts in the sample profile.

    python3 bench/pgo_fidelity.py [--programs lua,sqlite] [--tally PATH] [--work DIR] [-j N]

Exits non-zero when a program fails to build or run; differing counts are the measurement.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from tallybench.programs import parse_build, program_args  # noqa: E402

PROGRAMS = ["lua", "sqlite", "zlib", "bzip2", "zstd", "xz", "mimalloc", "pcre2"]
CLANG, PROFDATA = "clang-19", "llvm-profdata-19"
OPT = ["-O2", "-g"]
# IR PGO at its most exact: statics named as pseudo-probe builds name them, no pre-inliner
# (it would count a function inlined there as part of its caller), atomic counters (threads).
IR_COMMON = ["-funique-internal-linkage-names", "-mllvm", "-disable-preinline"]
IR_GEN = ["-fprofile-generate", "-fprofile-update=atomic"]


class Failure(Exception):
    """A program that did not build or run."""


def log(msg):
    print(f"[{time.time() - T0:6.0f}s] {msg}", file=sys.stderr, flush=True)


def run(cmd, cwd, env=None, what=None):
    """Runs cmd, raising Failure with its stderr's tail when it fails; its stdout."""
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        tail = "\n".join(r.stderr.strip().splitlines()[-8:])
        raise Failure(f"{what or cmd[0]} exited {r.returncode}: {tail}")
    return r.stdout


# --- tally's profile ---------------------------------------------------------------------

def sample_profile(text):
    """A text sample profile: {function: (record line `name:total:head`, {probe id: count})}."""
    out, cur = {}, None
    for line in text.splitlines():
        if line.startswith(" "):
            rest = line[1:]
            if cur is None or rest.startswith("!"):
                continue
            pid, sep, count = rest.partition(": ")
            if sep and pid.isdigit() and count.split()[0].isdigit():
                out[cur][1][int(pid)] = int(count.split()[0])
        elif line:
            cur = line.rsplit(":", 2)[0]
            out[cur] = (line, {})
    return out


def left_early(report):
    """Functions an early exit left (`early-exit` edges that ran), from the JSON report."""
    return {f["name"] for f in report["functions"]
            if any(e.get("kind") == "early-exit" and (e.get("count") or 0) > 0
                   for e in f.get("edges", []))}


# --- IR dumps, parsed as they stream ----------------------------------------------------------

LABEL = re.compile(r'^([-\w.$]+|"[^"]*"):')
DEFINE = re.compile(r'^define [^@]*@("[^"]*"|[^(\s]+)\(')
PROF = re.compile(r"!prof !(\d+)")
PROBE = re.compile(r"@llvm\.pseudoprobe\(i64 (-?\d+), i64 (\d+)")
TARGETS = re.compile(r"label %([-\w.$]+|\"[^\"]*\")")


class Dump:
    """What one `-print-after` dump of one module holds: each function's entry count and, with
    `probes` (a parsed sample profile), the two-way branches matched with their probes."""

    def __init__(self, probes=None):
        self.probes = probes
        self.entry = {}            # function -> entry count
        self.two_way = 0           # two-way branches, in every function
        self.weighted = 0          # of which with branch_weights
        self.matched = []          # (function, weights or None, expected, [count a, count b])
        self._reset()

    def _reset(self):
        self.md = {}               # metadata id -> text of function_entry_count/branch_weights
        self.defines = []          # (function, prof id)
        self.brs = []              # prof ids of every two-way branch
        self.pending = []          # (function, prof id or None, probe a, probe b)
        self.func = None

    def feed(self, line):
        if line.startswith("*** IR Dump After"):
            self.finish()
            return
        if self.func is not None:
            self._body(line)
            return
        c = line[:1]
        if c == "!":
            if "function_entry_count" in line or "branch_weights" in line:
                mid, _, rest = line.partition(" = ")
                self.md[mid[1:]] = rest
        elif c == "d" and line.startswith("define "):
            m = DEFINE.match(line)
            if not m:
                return
            name = m.group(1).strip('"')
            p = PROF.search(line.rsplit(")", 1)[-1])
            self.defines.append((name, p.group(1) if p else None))
            # The function's blocks: label -> [predecessors, its first own probe]; branches.
            self.func = name
            self.blocks = {}
            self.label = None
            self.guid = None
            self.fbrs = []

    def _body(self, line):
        if line == "}":
            self._end_function()
            return
        if not line.startswith(" "):
            m = LABEL.match(line)
            if m:
                self.label = m.group(1).strip('"')
                _, _, preds = line.partition("; preds = ")
                self.blocks[self.label] = [len(preds.split(",")) if preds else 0, None]
            return
        if "@llvm.pseudoprobe(" in line:
            m = PROBE.search(line)
            if m:
                if self.guid is None:
                    self.guid = m.group(1)
                if m.group(1) == self.guid:
                    b = self.blocks.setdefault(self.label, [0, None])
                    if b[1] is None:
                        b[1] = int(m.group(2))
            return
        s = line.lstrip()
        if s.startswith("br i1 "):
            t = [x.strip('"') for x in TARGETS.findall(s)]
            p = PROF.search(s)
            pid = p.group(1) if p else None
            self.brs.append(pid)
            if len(t) == 2:
                self.fbrs.append((t[0], t[1], pid))

    def _end_function(self):
        name, self.func = self.func, None
        if self.probes is None or name not in self.probes:
            return
        for a, b, pid in self.fbrs:
            ba, bb = self.blocks.get(a), self.blocks.get(b)
            if ba and bb and ba[0] == 1 and bb[0] == 1 and ba[1] and bb[1]:
                self.pending.append((name, pid, ba[1], bb[1]))

    def finish(self):
        """Resolves the module's metadata references (they follow the functions)."""
        for name, pid in self.defines:
            m = self.md.get(pid) if pid else None
            if m and "function_entry_count" in m:
                self.entry[name] = int(m.split("i64 ")[1].rstrip("}").split(",")[0])
        self.two_way += len(self.brs)
        self.weighted += sum(1 for pid in self.brs
                             if pid and "branch_weights" in self.md.get(pid, ""))
        for name, pid, pa, pb in self.pending:
            w = self.md.get(pid, "") if pid else ""
            weights = ([int(x) for x in re.findall(r"i32 (\d+)", w)]
                       if "branch_weights" in w else None)
            own = self.probes[name][1]
            self.matched.append((name, weights, '!"expected"' in w,
                                 [own.get(pa, 0), own.get(pb, 0)]))
        self._reset()


def dump_of(cmd, cwd, probes=None, what=None):
    """Runs a compile whose stderr is an IR dump, parsing it as it streams."""
    d = Dump(probes)
    tail = collections.deque(maxlen=8)
    with subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, errors="replace", bufsize=1 << 20) as p:
        for line in p.stderr:
            line = line.rstrip("\n")
            d.feed(line)
            if not line.startswith(("!", " ", "define", "declare", "attributes")):
                tail.append(line[:300])
    d.finish()
    if p.returncode != 0:
        raise Failure(f"{what or cmd[0]} exited {p.returncode}: " + "\n".join(tail))
    return d


# --- one program ------------------------------------------------------------------------------

def measure(name, tally, work, jobs):
    """Trains `name` both ways and compares what the two loaders attach; a dict of results."""
    p = parse_build(name)
    size = p["reduced"]
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    flags = OPT + p["cflags"]
    args = program_args(p, size)
    env = dict(os.environ, **p["env"])
    for k in ("TALLY_PROFILE", "LLVM_PROFILE_FILE", "TALLY_MODE"):
        env.pop(k, None)

    log(f"{name}: training builds ({len(p['sources'])} sources, size {size})")
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        builds = [
            pool.submit(run, [tally, "cc", "--tally-pgo"] + flags + p["sources"] + p["ldflags"]
                        + ["-o", "tgen"], d, None, f"{name}: tally cc --tally-pgo"),
            pool.submit(run, [CLANG] + flags + IR_COMMON + IR_GEN + p["sources"] + p["ldflags"]
                        + ["-o", "irgen"], d, None, f"{name}: clang -fprofile-generate"),
        ]
        for b in builds:
            b.result()
    train = os.path.join(d, "train.tally")
    raw = os.path.join(d, "ir.profraw")
    for f in (train, raw):
        if os.path.exists(f):
            os.remove(f)
    # Two runs take the same path only in a deterministic program: mimalloc places its
    # allocations at random (docs/pgo-fidelity.md), and may then count a few more or fewer.
    log(f"{name}: training runs ({' '.join(args)})")
    run([os.path.join(d, "tgen")] + args, d, dict(env, TALLY_PROFILE=train), f"{name}: tgen")
    run([os.path.join(d, "irgen")] + args, d, dict(env, LLVM_PROFILE_FILE=raw), f"{name}: irgen")
    if not os.path.exists(raw):
        raise Failure(f"{name}: the IR PGO training run wrote no profile")
    run([PROFDATA, "merge", "-o", "ir.profdata", raw], d, None, f"{name}: llvm-profdata merge")
    text = run([tally, "report", "--export", "sample-profile", "--flat", train], d, None,
               f"{name}: tally report --export")
    with open(os.path.join(d, "train.prof"), "w") as f:
        f.write(text)
    probes = sample_profile(text)
    early = left_early(json.loads(run([tally, "report", "--format", "json", train], d, None,
                                      f"{name}: tally report --format json")))

    log(f"{name}: the two loaders on each source")
    use = f"--tally-use={train}"

    def loader(src):
        return dump_of([tally, "cc", use, "--tally-use-flat"] + flags + ["-c", "-o", "/dev/null",
                        "-mllvm",
                        "-print-after=sample-profile", src], d, probes,
                       f"{name}: tally cc --tally-use {os.path.basename(src)}")

    def ir(src):
        return dump_of([CLANG] + flags + IR_COMMON + ["-fprofile-use=ir.profdata", "-c", "-o",
                        "/dev/null", "-mllvm", "-print-after=pgo-instr-use", src], d, None,
                       f"{name}: clang -fprofile-use {os.path.basename(src)}")

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        dumps = [(src, pool.submit(loader, src), pool.submit(ir, src)) for src in p["sources"]]
        dumps = [(src, a.result(), b.result()) for src, a, b in dumps]

    e = collections.Counter()
    unexplained, branches, one_sided = [], [], []
    for src, a, b in dumps:
        base = os.path.basename(src)
        for f, want in sorted(b.entry.items()):
            if want == 0:
                continue
            e["ran"] += 1
            got = a.entry.get(f)
            if got in (want, want + 1):
                e["equal"] += 1
            elif f in early:
                e["early"] += 1
            else:
                e["other"] += 1
                head = probes[f][0] if f in probes else "(no record)"
                unexplained.append((name, base, f, head, got, want))
        for f in a.entry.keys() - b.entry.keys():
            e["loader_only"] += 1
            e["loader_only_ran"] += a.entry[f] > 0
            if a.entry[f] > 0:
                one_sided.append((name, base, f, "loader", a.entry[f]))
        for f in b.entry.keys() - a.entry.keys():
            e["ir_only"] += 1
            e["ir_only_ran"] += b.entry[f] > 0
            if b.entry[f] > 0:
                one_sided.append((name, base, f, "IR PGO", b.entry[f]))
        e["weighted"] += a.weighted
        e["two_way"] += a.two_way
        branches += a.matched

    br = collections.Counter(weighted=e.pop("weighted"), two_way=e.pop("two_way"))
    differ = []
    for f, w, expected, counts in branches:
        br["matched"] += 1
        br["matched_weighted"] += w is not None
        if f in early:
            br["early"] += 1
        elif expected:
            br["expected"] += 1
        elif w is None and counts == [0, 0]:
            br["never_ran"] += 1
        elif w == counts:
            br["equal"] += 1
        else:
            br["differ"] += 1
            differ.append((name, f, w, counts))
    log(f"{name}: {e['equal']} of {e['ran']} entry counts equal; "
        f"{br['equal']} of {br['matched']} branches weighed with their probes' counts")
    res = dict(entry=e, branches=br, unexplained=unexplained, differ=differ, size=size,
               one_sided=one_sided)
    with open(os.path.join(d, "result.json"), "w") as f:
        json.dump(res, f, indent=1)
    return res


# --- the report -------------------------------------------------------------------------------

ENTRY_COLS = [("ran", "IR PGO: ran"), ("equal", "equal (IR or IR+1)"),
              ("early", "differ, left early"), ("other", "differ, other"),
              ("loader_only", "count from the loader only"), ("loader_only_ran", "of which > 0"),
              ("ir_only", "count from IR PGO only"), ("ir_only_ran", "of which > 0")]
BRANCH_COLS = [("two_way", "two-way branches"), ("weighted", "with weights"),
               ("matched", "matched with probes"), ("matched_weighted", "matched, with weights"),
               ("early", "in functions left early"),
               ("equal", "equal"), ("expected", "kept __builtin_expect"),
               ("never_ran", "never ran"), ("differ", "differ")]


def table(results, key, cols):
    lines = ["| program | " + " | ".join(c for _, c in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    total = collections.Counter()
    for name, r in results.items():
        total.update(r[key])
        lines.append(f"| {name} | " + " | ".join(str(r[key][k]) for k, _ in cols) + " |")
    lines.append("| **total** | " + " | ".join(f"**{total[k]}**" for k, _ in cols) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--tally", default=os.path.join(ROOT, "target", "release", "tally"))
    ap.add_argument("--work", default="/tmp/pgo-fidelity", help="builds and profiles (kept)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="compiles at once")
    ap.add_argument("--max-branches", type=int, default=20,
                    help="differing branches listed per program")
    o = ap.parse_args()
    tally = os.path.abspath(o.tally)
    results, failed = {}, []
    for name in o.programs.split(","):
        try:
            results[name] = measure(name, tally, os.path.abspath(o.work), o.jobs)
        except (Failure, RuntimeError, OSError) as err:
            log(f"FAILED {err}")
            failed.append(name)
    sizes = ", ".join(f"{n} {r['size']}" for n, r in results.items())
    print(f"Trained at size: {sizes}.\n")
    print("### Entry counts\n")
    print(table(results, "entry", ENTRY_COLS))
    print("\n### Block weights (two-way branches)\n")
    print(table(results, "branches", BRANCH_COLS))
    print("\n### Entry counts that differ, in functions not left early\n")
    print("| program | source | function | tally's `name:total:head` | loader | IR PGO |")
    print("|---|---|---|---|---:|---:|")
    for name, src, f, head, got, want in (u for r in results.values() for u in r["unexplained"]):
        print(f"| {name} | {src} | `{f}` | `{head}` | {got} | {want} |")
    print("\n### Functions only one side gives a count, and it is > 0\n")
    print("| program | source | function | only from | count |")
    print("|---|---|---|---|---:|")
    for row in (u for r in results.values() for u in r["one_sided"]):
        print("| {} | {} | `{}` | {} | {} |".format(*row))
    print("\n### Branch weights that differ, in functions not left early\n")
    print("| program | function | weights | probes' counts |")
    print("|---|---|---|---|")
    for r in results.values():
        for name, f, w, c in r["differ"][:o.max_branches]:
            print(f"| {name} | `{f}` | {w} | {c} |")
        if len(r["differ"]) > o.max_branches:
            print(f"| ... | {len(r['differ']) - o.max_branches} more | | |")
    log(f"done in {time.time() - T0:.0f}s" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


T0 = time.time()
if __name__ == "__main__":
    sys.exit(main())
