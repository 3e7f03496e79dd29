"""The whole run: the command line, the machine, the tally measured, and the phases in order."""
import argparse
import concurrent.futures
import datetime
import glob
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time

from .common import BENCH, CLANG, GCC, ROOT, WORK, loadavg, log, sh
from .variants import OPT_IN, VAR
from .programs import count_lines, parse_build, program_args
from .builds import Ctx, build, prune
from .runs import run
from .figures import compute
from .markdown import write_outputs
from .sections import fill_placements
from .measure import callgrind_runs, timed_runs


def machine_facts(rev=None):
    facts = {}
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        model = re.search(r"model name\s*:\s*(.*)", info)
        facts["cpu"] = model.group(1).strip() if model else platform.processor()
        mhz = re.findall(r"cpu MHz\s*:\s*([\d.]+)", info)
        facts["mhz"] = f"{float(mhz[0]):.0f}" if mhz else "?"
        cache = re.search(r"cache size\s*:\s*(.*)", info)
        facts["cache"] = cache.group(1).strip() if cache else "?"
    except OSError:
        facts["cpu"] = platform.processor()
    facts["cores"] = os.cpu_count()
    try:
        with open("/proc/meminfo") as f:
            facts["memory_gib"] = round(int(re.search(r"MemTotal:\s*(\d+)", f.read()).group(1)) / 2**20, 1)
    except OSError:
        pass
    facts["kernel"] = platform.release()
    try:
        with open("/etc/os-release") as f:
            facts["os"] = re.search(r'PRETTY_NAME="(.*)"', f.read()).group(1)
    except (OSError, AttributeError):
        facts["os"] = platform.platform()
    facts["clang"] = sh([CLANG, "--version"]).stdout.splitlines()[0]
    facts["gcc"] = sh([GCC, "--version"]).stdout.splitlines()[0]
    facts["valgrind"] = sh(["valgrind", "--version"]).stdout.strip()
    if rev:  # --tally-rev: a committed revision, built apart
        facts["tally"] = sh(["git", "-C", ROOT, "describe", "--always", rev]).stdout.strip() + " (committed)"
        facts["tally_changes"] = []
    else:
        facts["tally"] = sh(["git", "-C", ROOT, "describe", "--always", "--dirty"]).stdout.strip()
        facts["tally_changes"] = [l[3:] for l in sh(["git", "-C", ROOT, "status", "--porcelain", "--", "crates"])
                                  .stdout.splitlines()]
    return facts


def select(names, table, what):
    if not names:
        return list(table)
    out = [n.strip() for n in names.split(",") if n.strip()]
    for n in out:
        if n not in table:
            sys.exit(f"bench/run: unknown {what} '{n}' (known: {', '.join(table)})")
    return out


def tally_at_rev(rev):
    """tally built from a committed revision (git archive into target/bench/, cargo build with
    its own target directory, which is deleted afterwards): target/bench/tally-<commit>."""
    r = sh(["git", "-C", ROOT, "rev-parse", "--verify", rev + "^{commit}"])
    if r.returncode != 0:
        sys.exit(f"bench/run: unknown revision {rev}")
    commit = r.stdout.strip()
    exe = os.path.join(WORK, f"tally-{commit[:12]}")
    if os.path.exists(exe):
        log(f"bench: using tally of {rev} = {commit[:12]} ({exe})")
        return exe, commit
    src, tgt = os.path.join(WORK, f"src-{commit[:12]}"), os.path.join(WORK, f"cargo-{commit[:12]}")
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)
    log(f"bench: building tally of {rev} = {commit[:12]} (git archive, cargo build --release; a few minutes)")
    try:
        r = subprocess.run(f"git -C {shlex.quote(ROOT)} archive {commit} | tar -x -C {shlex.quote(src)}",
                           shell=True, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("bench/run: git archive failed:\n" + r.stderr)
        r = sh(["cargo", "build", "--release", "-q", "-p", "tally", "--target-dir", tgt], cwd=src)
        if r.returncode != 0:
            sys.exit("bench/run: cargo build failed:\n" + r.stderr)
        shutil.copy2(os.path.join(tgt, "release", "tally"), exe)
        for old in glob.glob(os.path.join(WORK, "tally-" + "[0-9a-f]" * 12)):
            if old != exe:
                os.unlink(old)  # 75 MB each
    finally:
        shutil.rmtree(src, ignore_errors=True)
        shutil.rmtree(tgt, ignore_errors=True)
    return exe, commit


def parse_args(description):
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", help="comma-separated (default: every directory of testdata/bench with a BUILD)")
    ap.add_argument("--variants", help="comma-separated (default: all); their baselines and training variants are added")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per variant (default 5; 0: only "
                    "check outputs and read increments)")
    ap.add_argument("--quick", action="store_true", help="reduced inputs everywhere, 1 repetition (smoke test)")
    ap.add_argument("--size", type=int, help="override the measured input size (all programs)")
    ap.add_argument("--no-callgrind", action="store_true", help="skip the instruction counts")
    ap.add_argument("--jobs", type=int, default=os.cpu_count(), help="parallel builds (default: cores)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per run")
    ap.add_argument("--out", help="Markdown report (default docs/benchmarks.md; with --quick "
                    "target/bench/quick.md); the chart goes next to it (.svg), the raw results to target/bench/<name>.json")
    ap.add_argument("--tally-rev", metavar="REV", help="benchmark tally as committed at git revision REV "
                    "(built apart, see bench/README.md) instead of the working tree")
    ap.add_argument("--render", metavar="JSON", help="only re-render the report from saved results")
    args = ap.parse_args()
    if args.out is None:
        args.out = os.path.join(WORK, "quick.md") if args.quick else os.path.join(ROOT, "docs", "benchmarks.md")
    return args


def render_saved(args):
    """--render: the report re-rendered from saved results, no runs."""
    with open(args.render) as f:
        results = json.load(f)
    fill_placements(results, os.environ.get("TALLY") or os.path.join(ROOT, "target", "release", "tally"))
    compute(results)
    write_outputs(results, args.out)
    return 0


def choose(args):
    """The programs, and the variants to build (those asked for, their baselines and training
    variants, and `clang`, in table order) and to measure."""
    all_progs = sorted(d for d in os.listdir(BENCH) if os.path.isfile(os.path.join(BENCH, d, "BUILD")))
    progs = select(args.programs, all_progs, "program")
    wanted = select(args.variants, VAR, "variant")
    if not args.variants:
        wanted = [v for v in wanted if v not in OPT_IN]
    # close over baselines and training dependencies, keep table order
    need = set(wanted)
    while True:
        more = {VAR[v]["base"] for v in need} | {m for v in need for m in re.findall(r"\{profile:([\w-]+)\}", VAR[v]["flags"])}
        if more <= need:
            break
        need |= more
    if "clang" not in need:
        need.add("clang")  # the output reference
    variants = [v for v in VAR if v in need]
    measured = [v for v in variants if v in wanted or v == VAR[v]["base"] or v == "clang"]
    return progs, variants, measured


def the_tally(args):
    """The context, with the tally every build of this run uses (TALLY, --tally-rev, or built
    from the working tree) as a snapshot."""
    ctx = Ctx(args)
    rev = None
    if os.environ.get("TALLY"):
        ctx.tally = os.path.abspath(os.environ["TALLY"])
        log(f"bench: using tally at {ctx.tally} (TALLY)")
    elif args.tally_rev:
        ctx.tally, rev = tally_at_rev(args.tally_rev)
    else:
        log("bench: building tally (cargo build --release -p tally)")
        r = sh(["cargo", "build", "--release", "-q", "-p", "tally"], cwd=ROOT)
        if r.returncode != 0:
            sys.exit("bench/run: cargo build failed:\n" + r.stderr)
    # A snapshot (hard link) of the binary: a `cargo build` elsewhere during the run replaces
    # target/release/tally, and every build of this run must use the same tally.
    snap = os.path.join(WORK, "tally")
    if not (os.path.exists(snap) and os.path.samefile(ctx.tally, snap)):
        if os.path.exists(snap):
            os.unlink(snap)
        try:
            os.link(ctx.tally, snap)
        except OSError:
            shutil.copy2(ctx.tally, snap)
    ctx.tally = snap
    ctx.rev = rev
    return ctx


def read_programs(args, progs, results):
    """Every program's BUILD and its entry in the results. Returns (specs, ok)."""
    ok = True
    specs = {}
    for name in progs:
        try:
            specs[name] = parse_build(name)
        except (RuntimeError, OSError, KeyError) as e:
            log(f"bench: {name}: cannot read its BUILD: {e}")
            results["programs"][name] = dict(error=str(e))
            ok = False
    for name, p in specs.items():
        size = args.size or (p["reduced"] if args.quick else p["size"])
        results["programs"][name] = dict(library=p["library"], src=p["src"], size=size, reduced=p["reduced"],
                                         args=program_args(p, size), variants={})
        try:
            results["programs"][name].update(count_lines(p))
        except (RuntimeError, OSError) as e:
            log(f"bench: {name}: cannot count lines: {e}")
    return specs, ok


def build_all(ctx, args, specs, variants, results):
    """1. builds: independent variants in parallel, then training runs, then the dependent ones.
    Returns the builds by (program, variant)."""
    builds = {}
    profiles = {name: {} for name in specs}

    def do_build(name, v):
        t0 = time.time()
        res = build(ctx, specs[name], VAR[v], profiles[name])
        tag = "cached" if res.get("cached") else f"{time.time() - t0:.0f} s"
        log(f"bench: build {name} {v}: {res['status']} ({tag}){' - ' + res['note'] if res.get('note') else ''}")
        return res

    def deps(v):
        return re.findall(r"\{profile:([\w-]+)\}", VAR[v]["flags"])
    pending = [(n, v) for n in specs for v in variants]
    while pending:
        ready = [(n, v) for n, v in pending if all(d in profiles[n] or
                                                   builds.get((n, d), {}).get("status") not in (None, "ok")
                                                   for d in deps(v))]
        if not ready:
            break
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futs = {}
            for n, v in ready:
                missing = [d for d in deps(v) if d not in profiles[n]]
                failed = [d for d in deps(v) if d in profiles[n] and profiles[n][d] is None]
                if failed:
                    builds[(n, v)] = dict(status="failed", note=f"the training run of {failed[0]} failed")
                    continue
                if missing:
                    st = builds.get((n, missing[0]), {}).get("status")
                    builds[(n, v)] = dict(status="unavailable" if st == "unavailable" else "failed",
                                          note=f"needs a profile of {missing[0]}, whose build is {st}")
                    continue
                futs[(n, v)] = pool.submit(do_build, n, v)
            for k, f in futs.items():
                builds[k] = f.result()
        pending = [x for x in pending if x not in ready]
        prune(ready, builds)
        train(args, specs, results, builds, profiles, pending, deps)
    return builds


def train(args, specs, results, builds, profiles, pending, deps):
    """The training runs wanted by what is still `pending`: each profile goes to `profiles`
    (`None`: the run failed)."""
    for n, v in pending:
        for d in deps(v):
            b = builds.get((n, d), {})
            if d in profiles[n] or b.get("status") != "ok":
                continue
            p, size = specs[n], results["programs"][n]["size"]
            path = os.path.join(b["dir"], f"train-{size}.tally")
            if not os.path.exists(path):
                log(f"bench: training run {n} {d} (size {size})")
                _, _, code, _, err, scratch = run([b["exe"]] + program_args(p, size), args.timeout, keep=True)
                if code != 0 or not os.path.exists(os.path.join(scratch, "prof.tally")):
                    log(f"bench: training run failed ({code}): {err.strip()[:200]}")
                    shutil.rmtree(scratch, ignore_errors=True)
                    profiles[n][d] = None
                    continue
                shutil.move(os.path.join(scratch, "prof.tally"), path)
                shutil.rmtree(scratch, ignore_errors=True)
            profiles[n][d] = path


def record_builds(builds, measured, results):
    """Each measured build's status in the results; whether none failed."""
    ok = True
    for n, v in builds:
        b = builds[(n, v)]
        if b["status"] == "failed":
            ok = False
        entry = dict(status=b["status"], note=b.get("note", ""), stats=b.get("stats", {}),
                     build_seconds=b.get("build_seconds"))
        if v in measured:
            results["programs"][n]["variants"][v] = entry
    return ok


def main(description):
    args = parse_args(description)
    if args.render:
        return render_saved(args)
    if args.quick:
        args.reps = 1

    progs, variants, measured = choose(args)
    os.makedirs(os.path.join(WORK, "scratch"), exist_ok=True)
    ctx = the_tally(args)
    started = datetime.datetime.now(datetime.timezone.utc)
    results = dict(meta=dict(date=started.strftime("%Y-%m-%d %H:%M UTC"), machine=machine_facts(ctx.rev),
                             load_before=loadavg(), reps=args.reps, quick=args.quick,
                             command="bench/run " + shlex.join(sys.argv[1:])),
                   variants=[VAR[v] for v in measured], programs={})
    specs, ok = read_programs(args, progs, results)
    builds = build_all(ctx, args, specs, variants, results)
    ok = record_builds(builds, measured, results) and ok
    fill_placements(results, ctx.tally)
    ok = timed_runs(ctx, args, specs, measured, builds, results) and ok
    if not args.no_callgrind:
        ok = callgrind_runs(ctx, args, specs, measured, builds, results) and ok

    results["meta"]["load_after"] = loadavg()
    results["meta"]["seconds"] = round((datetime.datetime.now(datetime.timezone.utc) - started).total_seconds())
    compute(results)
    write_outputs(results, args.out)
    log(f"bench: wrote {args.out} (+ .svg, target/bench/{os.path.splitext(os.path.basename(args.out))[0]}.json) "
        f"in {results['meta']['seconds']} s")
    return 0 if ok else 1
