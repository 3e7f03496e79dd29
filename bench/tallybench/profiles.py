"""What a run leaves: increments, path and trace figures read from its profile."""
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

from .common import GCOV_DUMP, PROFDATA, ROOT, sh, short
from .variants import NAIVE, NO_INCREMENTS, ORACLE, WITNESS_TRACES
from .runs import run


def tally_profile_sum(tally, path):
    """(increments, counters, path-entry increments) of a tally profile, from `tally report
    --format json` (docs/report-json.md; the profile itself is read, and its checksums checked,
    by tally alone): the sum of every counter (inline increments and the early-exit counts the
    runtime adds at exit) plus the counts of the hashed path entries (path mode; the increments
    the runtime lost for lack of memory count too: they were executed)."""
    r = sh([tally, "report", "--format", "json", path])
    if r.returncode != 0:
        raise ValueError("tally report failed: " + short(r.stderr))
    doc = json.loads(r.stdout)
    total, hashed = doc["counter_sum"], doc["path_entry_sum"]
    return total + hashed, doc["counters"], hashed


def sese_removed(doc, edges_file):
    """The increments a SESE build's counted loops did not execute: the counts of the edges its
    SESE counters measure (their values were added once per loop exit instead), from the build's
    `TALLY_SESE_EDGES` log (`<source file>\t<function>\t<edge id>` lines) and the run's report."""
    if not edges_file:
        return 0
    want = {}
    with open(edges_file) as f:
        for line in f:
            mod, fn, edge = line.rstrip("\n").split("\t")
            want.setdefault((os.path.basename(mod), fn), set()).add(int(edge))
    total = 0
    for f in doc["functions"]:
        ids = want.get((os.path.basename(f.get("module") or ""), f["name"]))
        if ids and f.get("edges"):
            total += sum(x["count"] or 0 for x in f["edges"] if x["id"] in ids)
    return total


def llvm_profile_sum(path):
    r = sh([PROFDATA, "show", "--all-functions", "--counts", path])
    if r.returncode != 0:
        raise ValueError(r.stderr.strip()[:200])
    total = static = 0
    for line in r.stdout.splitlines():
        line = line.strip()
        m = re.match(r"(Function count|Block counts|Counters):\s*(.*)$", line)
        if not m or (m.group(1) != "Block counts" and not m.group(2).isdigit()):
            continue  # the "Counters:" heading, function names, hashes, summaries
        if m.group(1) == "Counters":
            static += int(m.group(2))
        else:
            total += sum(int(x) for x in re.findall(r"\d+", m.group(2)))
    return total, static


def gcov_profile_sum(scratch):
    total = static = 0
    for gcda in glob.glob(os.path.join(scratch, "**", "*.gcda"), recursive=True):
        r = sh([GCOV_DUMP, "-l", gcda])
        inside = False
        for line in r.stdout.splitlines():
            m = re.search(r"COUNTERS (\w+) (\d+) counts", line)
            if m:
                inside = m.group(1) == "arcs"
                static += int(m.group(2)) if inside else 0
                continue
            if inside:
                m = re.match(r"^\S+:\s+\d+:((?:\s+\d+)+)\s*$", line)
                if m:
                    total += sum(int(x) for x in m.group(1).split())
                else:
                    inside = False
    return total, static


def increments(tally, var, scratch):
    """What the profile a run left in scratch says: {increments, static_counters[, hashed]}
    (empty if the variant writes no profile); `tally` reads tally profiles."""
    if var["name"] in NO_INCREMENTS:
        return {}
    if var["compiler"] == "tally":
        path = os.path.join(scratch, "prof.tally")
        if not os.path.exists(path):
            return {}
        inc, static, hashed = tally_profile_sum(tally, path)
        return dict(increments=inc, static_counters=static, hashed_entries=hashed)
    if var["role"] == "anchor" and var["compiler"] == "clang":
        path = os.path.join(scratch, "prof.profraw")
        if not os.path.exists(path):
            return {}
        inc, static = llvm_profile_sum(path)
        return dict(increments=inc, static_counters=static)
    if var["role"] == "anchor" and var["compiler"] == "gcc":
        inc, static = gcov_profile_sum(scratch)
        return dict(increments=inc, static_counters=static)
    return {}


def oracle_repeatable(ctx, pr, builds, name, argv, timeout, env):
    """When the naive builds' increments disagree with the oracle's counts, run the oracle build's
    counting run again: if the same build counts differently twice, the program's control flow is
    not repeatable (mimalloc draws address hints and page choices from getrandom), and the report
    says so with the spread instead of blaming an instrumentation."""
    o, n = pr.get("oracle"), pr["variants"].get(NAIVE, {}).get("increments")
    if not o or n is None or n == o["block_executions"] or builds.get((name, ORACLE), {}).get("status") != "ok":
        return
    _, _, code, _, _, scratch = run(["setarch", "-R", builds[(name, ORACLE)]["exe"]] + argv, timeout,
                                    keep=True, extra=env)
    prof = os.path.join(scratch, "prof.tally")
    r = sh([ctx.tally, "report", "--format", "json", prof]) if code == 0 and os.path.exists(prof) else None
    shutil.rmtree(scratch, ignore_errors=True)
    if r is not None and r.returncode == 0:
        doc = json.loads(r.stdout)
        o["repeat_block_executions"] = sum(b["count"] for f in doc["functions"] for b in f["blocks"])


def path_stats(tally, profile):
    """Ball & Larus 1996's Tables 1-2 figures of a path-mode profile, from `tally paths --format json`:
    path increments (array and hashed), executed and potential paths, path lengths (blocks)."""
    r = sh([tally, "paths", "--format", "json", "--top", "0", "--no-source", profile])
    if r.returncode != 0:
        raise ValueError("tally paths failed: " + short(r.stderr))
    doc = json.loads(r.stdout)
    st = dict(functions=0, hashed_functions=0, path_increments=0, hashed_increments=0,
              executed_paths=0, potential_paths=0, lost=0, longest=0, weighted_length=0,
              executed_functions=0)
    for f in doc["functions"]:
        st["functions"] += 1
        hashed = f["storage"] == "hash"
        st["hashed_functions"] += hashed
        n = sum(p["count"] for p in f["paths"])
        st["path_increments"] += n
        st["hashed_increments"] += n if hashed else 0
        st["executed_paths"] += f["executed_paths"]
        st["executed_functions"] += 1 if n else 0
        st["potential_paths"] += int(f["potential_paths"])
        st["lost"] += f.get("lost", 0)
        for p in f["paths"]:
            st["longest"] = max(st["longest"], p["length"])
            st["weighted_length"] += p["count"] * p["length"]
    st["avg_length"] = st["weighted_length"] / st["path_increments"] if st["path_increments"] else None
    st["hash_fraction"] = st["hashed_increments"] / st["path_increments"] if st["path_increments"] else None
    return st


def ipath_stats(tally, profile):
    """Melski & Reps 1998's figures of an `ipath`/`ipath-piecewise` profile: potential paths (the sets'
    totals: `tally paths --format json` lists each module's path-table owner with them), and from
    the text listing (bench/ipaths_hot.py parses it) the executed paths, those that cross a call
    or return and their runs, the set functions the executed paths go through."""
    here = os.path.join(ROOT, "bench")
    if here not in sys.path:
        sys.path.insert(0, here)
    import ipaths_hot
    r = sh([tally, "paths", "--format", "json", "--top", "0", "--no-source", profile])
    if r.returncode != 0:
        raise ValueError("tally paths failed: " + short(r.stderr))
    owners = json.loads(r.stdout)["functions"]
    st = dict(potential_paths=sum(int(f["potential_paths"]) for f in owners), sets=len(owners))
    st.update(ipaths_hot.summary(ipaths_hot.parse(ipaths_hot.tally_paths(tally, profile))[0]))
    return st


def trace_stats(tally, pr, v, e, scratch):
    """A tracing variant's run on the reduced input (under callgrind) left its trace in scratch:
    its size; for a witness trace, unless the program has them already, the blocks and
    conditional branches the run executed, counted by `tally report --trace` (which regenerates
    the whole execution, exactly as `edges-naive` would count it: crates/cli/tests/e2e/wtrace/),
    and how long that regeneration took."""
    tr, prof = os.path.join(scratch, "prof.trace"), os.path.join(scratch, "prof.tally")
    e["reduced_trace_bytes"] = os.path.getsize(tr) if os.path.exists(tr) else None
    if v in WITNESS_TRACES and os.path.exists(tr) and os.path.exists(prof):
        # Where the bits go: bits by record kind, the functions whose witnesses take most.
        r = sh([tally, "trace", "--stats", "--format", "json", "--limit", "5", "--profile", prof, tr])
        if r.returncode == 0:
            e["trace_stats"] = json.loads(r.stdout)
        else:
            e["note"] = (e.get("note", "") + " tally trace --stats failed: " + short(r.stderr)).strip()
    if v not in WITNESS_TRACES or pr.get("trace_counts") or not os.path.exists(tr) or not os.path.exists(prof):
        return
    r = sh([tally, "report", "--format", "json", "--trace", tr, prof])
    if r.returncode != 0:
        e["note"] = (e.get("note", "") + " tally report --trace failed: " + short(r.stderr)).strip()
        return
    doc = json.loads(r.stdout)
    blocks = cond = 0
    for f in doc["functions"]:
        blocks += sum(b["count"] or 0 for b in f["blocks"])
        outs = {}
        for x in f["edges"]:
            if x["kind"] == "flow":
                outs.setdefault(x["from"], []).append(x["count"] or 0)
        cond += sum(sum(c) for c in outs.values() if len(c) >= 2)
    # Regeneration speed: the median wall time of three runs of the text report (the
    # command bench/regen times: the process, reading the profile and the trace, the plans,
    # regenerating and counting every block and edge, the summary; not the 23 MB of JSON
    # that SQLite's report is, which the counts above need).
    secs = []
    for _ in range(3):
        t0 = time.perf_counter()
        r = sh([tally, "report", "--trace", tr, prof], stdout=subprocess.DEVNULL)
        secs.append(time.perf_counter() - t0)
        if r.returncode != 0:
            e["note"] = (e.get("note", "") + " tally report --trace failed: " + short(r.stderr)).strip()
            return
    pr["trace_counts"] = dict(blocks=blocks, conditional_branches=cond, from_variant=v,
                              regen_seconds=round(statistics.median(secs), 3))
