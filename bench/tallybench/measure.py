"""Measuring the builds: the counting run and the timed runs of each, interleaved, and the
instructions under callgrind on the reduced input."""
import json
import os
import shutil
import statistics

from .common import callgrind_total, loadavg, log, sh, short
from .variants import IPATH_FLAG, ORACLE, REDUCED_TIMED, RUN_ENV, TRACES, VAR, WITNESS_TRACES
from .programs import program_args
from .runs import run
from .profiles import increments, ipath_stats, oracle_repeatable, path_stats, sese_removed, trace_stats


def timed_runs(ctx, args, specs, measured, builds, results):
    """2. timed runs, interleaved; the first (untimed) run of each variant checks the output and
    leaves the profile the increments are read from. Whether every output and profile was right."""
    ok = True
    for name, p in specs.items():
        ok = time_program(ctx, args, name, p, measured, builds, results["programs"][name]) and ok
    return ok


def time_program(ctx, args, name, p, measured, builds, pr):
    """The counting runs, the timed repetitions and the medians of program `name`."""
    args_full = program_args(p, pr["size"])
    runnable = [v for v in measured if builds.get((name, v), {}).get("status") == "ok"]
    if "clang" not in runnable:
        log(f"bench: {name}: no plain clang build, nothing to compare with")
        return False
    args_small = program_args(p, p["reduced"])
    small = [v for v in runnable if v in REDUCED_TIMED]
    if small:
        pr["reduced_timed"] = small

    def args_of(v):
        return args_small if v in REDUCED_TIMED else args_full
    log(f"bench: {name}: size {pr['size']}, {args.reps} repetition(s) of {len(runnable)} variants  [load {loadavg()}]")
    ok, refs = counting_runs(ctx, args, name, p, pr, runnable, builds, args_of, args_small, small)
    oracle_repeatable(ctx, pr, builds, name, args_full, args.timeout, p["env"])
    ok = timed_reps(args, name, pr, runnable, builds, args_of, args_small, small, refs) and ok
    for v in runnable:
        e = pr["variants"][v]
        if not e["times"]:
            continue  # --reps 0: outputs and increments only
        e["median"] = statistics.median(e["times"])
        e["cpu_median"] = statistics.median([c for c in e["cpu"] if c is not None] or [0])
        if e.get("times_reduced"):
            e["median_reduced"] = statistics.median(e["times_reduced"])
    return ok


def counting_runs(ctx, args, name, p, pr, runnable, builds, args_of, args_small, small):
    """The counting run of each build (plain clang first): its output checked against plain
    clang's, its profile read. Returns (ok, (ref, ref_small)): the reference outputs."""
    ok = True
    ref = ref_small = None
    for v in ["clang"] + [v for v in runnable if v != "clang"]:
        e = pr["variants"][v]
        # The counting run: its profile gives the increments and the oracle check, which compares
        # counts across builds, so it runs deterministically: address randomization off (setarch
        # -R) and the BUILD's `env` (mimalloc: no time-based purging).
        _, _, code, out, err, scratch = run(["setarch", "-R", builds[(name, v)]["exe"]] + args_of(v), args.timeout,
                                            keep=True, extra={**p["env"], **RUN_ENV.get(v, {})})
        if v == "clang":
            ref = (code, out)
            pr["reference_output"] = out.strip().splitlines()[-1] if out.strip() else ""
            if small:
                _, _, c2, o2, _, _ = run([builds[(name, v)]["exe"]] + args_small, args.timeout)
                ref_small = (c2, o2)
                e["times_reduced"] = []
        e["output_ok"] = ((code, out) == (ref_small if v in REDUCED_TIMED else ref)) and code == 0
        if v in WITNESS_TRACES + ["trace-naive"]:
            tr = os.path.join(scratch, "prof.trace")
            e["trace_bytes"] = os.path.getsize(tr) if os.path.exists(tr) else None
        if not e["output_ok"]:
            ok = False
            e["note"] = (e.get("note", "") + f" output differs from plain clang (exit {code}): "
                         + (err.strip().splitlines() or [""])[-1][:200]).strip()
            log(f"bench: {name} {v}: OUTPUT DIFFERS (exit {code})")
        ok = read_profile(ctx, name, pr, v, e, builds, scratch) and ok
        shutil.rmtree(scratch, ignore_errors=True)
        e["times"], e["cpu"] = [], []
    return ok, (ref, ref_small)


def read_profile(ctx, name, pr, v, e, builds, scratch):
    """What the counting run of `v` left in scratch: the profile checked by `tally report`, the
    oracle's counts, the increments and path figures. Whether the profile was right."""
    ok = True
    prof = os.path.join(scratch, "prof.tally")
    if VAR[v]["compiler"] == "tally" and os.path.exists(prof):
        # the profile must make sense: tally report checks flow conservation everywhere
        r = sh([ctx.tally, "report", "--format", "json", prof])
        if r.returncode != 0:
            ok = False
            e["note"] = (e.get("note", "") + " tally report failed: " + short(r.stderr)).strip()
            log(f"bench: {name} {v}: tally report failed: {short(r.stderr)}")
        elif v == ORACLE:
            # every block and edge count: what each naive mode must have incremented
            doc = json.loads(r.stdout)
            pr["oracle"] = dict(
                block_executions=sum(b["count"] for f in doc["functions"] for b in f["blocks"]),
                edge_traversals=sum(x["count"] for f in doc["functions"] for x in f["edges"]
                                    if x["kind"] != "early-exit"),
                early_exits=sum(x["count"] for f in doc["functions"] for x in f["edges"]
                                if x["kind"] == "early-exit"),
                calls=sum(f["entry_count"] for f in doc["functions"]))
        elif "sese_edges" in builds[(name, v)]:
            e["sese_removed"] = sese_removed(json.loads(r.stdout), builds[(name, v)]["sese_edges"])
        del r
    try:
        e.update(increments(ctx.tally, VAR[v], scratch))
        if (VAR[v]["compiler"] == "tally" and "--tally-mode=path" in VAR[v]["flags"] and os.path.exists(prof)
                and "tally report failed" not in e.get("note", "")):
            e["paths"] = path_stats(ctx.tally, prof)
        if IPATH_FLAG in VAR[v]["flags"] and os.path.exists(prof) and "tally report failed" not in e.get("note", ""):
            e["ipaths"] = ipath_stats(ctx.tally, prof)
    except (ValueError, OSError) as exc:
        ok = False
        e["note"] = (e.get("note", "") + f" profile unreadable: {exc}").strip()
    return ok


def timed_reps(args, name, pr, runnable, builds, args_of, args_small, small, refs):
    """The timed repetitions, interleaved (every other one in reverse order). Whether every
    output was the reference's."""
    ok = True
    ref, ref_small = refs
    for rep in range(args.reps):
        order = runnable if rep % 2 == 0 else runnable[::-1]
        for v in order:
            wall, cpu, code, out, err, _ = run([builds[(name, v)]["exe"]] + args_of(v), args.timeout,
                                               extra=RUN_ENV.get(v))
            e = pr["variants"][v]
            if v == "clang" and small:
                w2, _, _, _, _, _ = run([builds[(name, v)]["exe"]] + args_small, args.timeout,
                                        extra=RUN_ENV.get(v))
                e["times_reduced"].append(round(w2, 4))
            if (code, out) != (ref_small if v in REDUCED_TIMED else ref) and e["output_ok"]:
                e["output_ok"] = False
                ok = False
                e["note"] = (e.get("note", "") + f" output of timed run {rep + 1} differs (exit {code})").strip()
                log(f"bench: {name} {v}: OUTPUT DIFFERS in repetition {rep + 1} (exit {code})")
            e["times"].append(round(wall, 4))
            e["cpu"].append(round(cpu, 4) if cpu is not None else None)
        log(f"bench: {name}: repetition {rep + 1}/{args.reps} done")
    return ok


def callgrind_runs(ctx, args, specs, measured, builds, results):
    """3. instructions under callgrind on the reduced input. Whether every run was right."""
    ok = True
    for name, p in specs.items():
        pr = results["programs"][name]
        runnable = [v for v in measured if builds.get((name, v), {}).get("status") == "ok"]
        small = program_args(p, p["reduced"])
        ref = None
        for v in ["clang"] + [v for v in runnable if v != "clang"]:
            e = pr["variants"][v]
            cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", builds[(name, v)]["cg"]] + small
            _, _, code, out, err, scratch = run(cmd, args.timeout * 20, keep=True,
                                                extra={**p["env"], **RUN_ENV.get(v, {})})
            try:  # increments on the reduced input: instructions per increment
                red = increments(ctx.tally, VAR[v], scratch)
                if red.get("increments") is not None:
                    e["reduced_increments"] = red["increments"]
                prof = os.path.join(scratch, "prof.tally")
                if "--tally-mode=path" in VAR[v]["flags"] and os.path.exists(prof):
                    e["reduced_paths"] = path_stats(ctx.tally, prof)
                if IPATH_FLAG in VAR[v]["flags"] and os.path.exists(prof):
                    e["reduced_ipaths"] = ipath_stats(ctx.tally, prof)
            except (ValueError, OSError) as exc:
                log(f"bench: {name} {v}: profile of the callgrind run unreadable: {exc}")
            if v in TRACES:
                trace_stats(ctx.tally, pr, v, e, scratch)
            shutil.rmtree(scratch, ignore_errors=True)
            n = callgrind_total(err)
            if v == "clang":
                ref = (code, out)
            if n is not None and (code, out) == ref and code == 0:
                e["instructions"] = n
            else:
                ok = False
                why = ("output under callgrind differs from plain clang's" if n is not None and code == 0 else
                       f"callgrind failed (exit {code}): " + (err.strip().splitlines() or [""])[-1][:200])
                e["note"] = (e.get("note", "") + " " + why).strip()
                log(f"bench: {name} {v}: {why}")
        log(f"bench: callgrind {name}: done")
    return ok
