#!/usr/bin/env python3
"""Tables of docs/log/trace.md (the cost and size of witness traces) from a bench/run result file:

    bench/trace_doc.py target/bench/trace.json > target/bench/trace-tables.md

Ball & Larus 1994 Table 3's columns (Old = `trace-bits`, one bit per conditional branch as AE's old
scheme; New = `trace`, witness placement), the trace sizes per million blocks and per
conditional branch, the overheads next to `edge` and `path`, and the targets witness tracing
was set.
"""
import json
import math
import sys


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def f_int(x):
    return "" if x is None else f"{x:,.0f}"


def f_r(x, d=2):
    return "" if x is None else f"{x:.{d}f}"


def main(path):
    res = json.load(open(path))
    progs = {n: p for n, p in res["programs"].items() if "variants" in p}
    V = lambda p, v: p["variants"].get(v, {})
    out = []
    add = out.append
    m = res["meta"]
    add(f"Measured by `{m['command']}` on {m['date']} ({m['reps']} interleaved repetitions; "
        f"machine: {m['machine'].get('cpu')}, {m['machine'].get('cores')} cores, shared: load "
        f"{m['load_before']} before, {m.get('load_after', '?')} after; tally {m['machine'].get('tally')}).")
    add("")
    add("### Ball & Larus 1994 Table 3, for our suite")
    add("")
    add("Old = `trace-bits` (`--tally-mode=trace --tally-trace=bits`: every conditional branch "
        "writes its outcome, AE's original scheme); New = `trace` (witness placement, §4, with the "
        "cheaper plan per function). File = the trace file of one run on the default input (headers, "
        "witnesses and control records; tally records no data references, so the paper's File and "
        "Trace columns are the same figure here); Run = median wall time (seconds) on the default "
        "input. `trace-naive` (every edge, 24 bytes each) for scale, on the reduced input.")
    add("")
    add("Old coded = `trace-bits-rc`, the same build run with `TALLY_TRACE_COMPRESS=1` (each "
        "thread's stream range-coded as it is written, trace format 8; the other files are streams "
        "of whole words, trace format 9).")
    add("")
    add("| Program | Old File (bytes) | New File (bytes) | Old/New | Old coded File (bytes) | Old Run (s) | New Run (s) | Old/New | Old coded Run (s) | plain Run (s) |")
    add("|---|---|---|---|---|---|---|---|---|---|")
    for n, p in progs.items():
        ob, nb = V(p, "trace-bits").get("trace_bytes"), V(p, "trace").get("trace_bytes")
        ot, nt = V(p, "trace-bits").get("median"), V(p, "trace").get("median")
        cb, ct = V(p, "trace-bits-rc").get("trace_bytes"), V(p, "trace-bits-rc").get("median")
        add(f"| {n} | {f_int(ob)} | {f_int(nb)} | {f_r(ob / nb if ob and nb else None)} | {f_int(cb)} | {f_r(ot, 3)} | "
            f"{f_r(nt, 3)} | {f_r(ot / nt if ot and nt else None)} | {f_r(ct, 3)} | {f_r(V(p, 'clang').get('median'), 3)} |")
    add("")
    add("### Trace size per executed block and per conditional branch (reduced input)")
    add("")
    add("Blocks and conditional branches (blocks with two or more `flow` out-edges, counted per "
        "execution) of the reduced-input run, counted by `tally report --trace` regenerating the "
        "witness trace (exact: `crates/cli/tests/e2e/wtrace/`); regeneration = those blocks ÷ the median "
        "wall time of three runs of `tally report --trace` (the text report: the whole process, reading "
        "the profile and the trace, the plans, regeneration, counting and the summary; a lower bound).")
    add("")
    add("| program | blocks | cond. branches | regeneration (M blocks/s) | `trace` bytes/Mblock | `trace-bits` bytes/Mblock | `trace-bits-rc` bytes/Mblock | `trace-naive` bytes/Mblock | `trace` bits/branch | `trace-bits` bits/branch | `trace-bits-rc` bits/branch | `trace` ÷ `trace-naive` size |")
    add("|---|---|---|---|---|---|---|---|---|---|---|---|")
    cols = {k: [] for k in ("t", "b", "c", "nv", "tb", "bb", "cb", "ratio", "regen")}
    for n, p in progs.items():
        tc = p.get("trace_counts") or {}
        blocks, cond = tc.get("blocks"), tc.get("conditional_branches")
        regen = blocks / tc["regen_seconds"] / 1e6 if blocks and tc.get("regen_seconds") else None
        by = {v: V(p, v).get("reduced_trace_bytes") for v in ("trace", "trace-bits", "trace-bits-rc", "trace-naive")}
        pm = {v: (b / blocks * 1e6 if b and blocks else None) for v, b in by.items()}
        pb = {v: (8 * b / cond if b and cond else None) for v, b in by.items()}
        ratio = by["trace"] / by["trace-naive"] if by["trace"] and by["trace-naive"] else None
        for k, x in (("t", pm["trace"]), ("b", pm["trace-bits"]), ("c", pm["trace-bits-rc"]),
                     ("nv", pm["trace-naive"]), ("tb", pb["trace"]), ("bb", pb["trace-bits"]),
                     ("cb", pb["trace-bits-rc"]), ("ratio", ratio), ("regen", regen)):
            cols[k].append(x)
        add(f"| {n} | {f_int(blocks)} | {f_int(cond)} | {f_r(regen, 1)} | {f_int(pm['trace'])} | "
            f"{f_int(pm['trace-bits'])} | {f_int(pm['trace-bits-rc'])} | {f_int(pm['trace-naive'])} | "
            f"{f_r(pb['trace'], 3)} | {f_r(pb['trace-bits'], 3)} | {f_r(pb['trace-bits-rc'], 3)} | {f_r(ratio, 4)} |")
    g = {k: geomean(v) for k, v in cols.items()}
    add(f"| **geomean** | | | {f_r(g['regen'], 1)} | {f_int(g['t'])} | {f_int(g['b'])} | {f_int(g['c'])} | "
        f"{f_int(g['nv'])} | {f_r(g['tb'], 3)} | {f_r(g['bb'], 3)} | {f_r(g['cb'], 3)} | {f_r(g['ratio'], 4)} |")
    add("")
    add("### Where the bits go: bits per conditional branch by record kind (reduced input)")
    add("")
    add("`tally trace --stats` on each witness trace: the bits the reader consumes, charged to "
        "their record (witnesses grouped as 1-bit and wider, i.e. two-way branches and multi-way "
        "switches; `Enter`, `Back`, `Unwind`, `End`; other = the file's headers, module and "
        "resolution chunks, padding, and in a stream of words each word's sentinel and unused bits), "
        "divided by the run's executed conditional branches. "
        "For `trace-bits-rc` the records are those of the decoded streams (other = their padding) "
        "and total is the coded file's size.")
    add("")
    kinds = ["witness/1", "witness/2+", "Enter", "Back", "Unwind+End", "other"]
    add("| program | variant | " + " | ".join(f"{k}" for k in kinds) + " | total | function with the most witness bits (share of the file) |")
    add("|---|---|" + "---|" * (len(kinds) + 2))
    for n, p in progs.items():
        for v in ("trace", "trace-bits", "trace-bits-rc"):
            st = V(p, v).get("trace_stats")
            if not st or not st.get("branches"):
                continue
            by = dict.fromkeys(kinds, 0)
            for k in st["kinds"]:
                name = k["kind"]
                if name.startswith("witness/"):
                    name = "witness/1" if name == "witness/1" else "witness/2+"
                elif name in ("Unwind", "End"):
                    name = "Unwind+End"
                by[name] = by.get(name, 0) + k["bits"]
            b = st["branches"]
            top = (st.get("functions") or [None])[0]
            tops = (f"`{top['function']}` ({top['bits'] / st.get('stream_bits', st['file_bits']):.0%})"
                    if top else "")
            add(f"| {n} | `{v}` | " + " | ".join(f_r(by[k] / b, 3) for k in kinds)
                + f" | {f_r(st['file_bits'] / b, 3)} | {tops} |")
    add("")
    add("### Overheads next to `edge` and `path`")
    add("")
    add("Ratio to the plain `clang` build: instructions (callgrind, reduced input) and time (median, "
        "default input; `trace-naive`: reduced input against `clang` on the reduced input).")
    add("")
    vs = [v for v in ("edge", "path", "trace", "trace-regs", "trace-bits", "trace-bits-rc", "trace-naive")
          if any(V(p, v).get("status") == "ok" for p in progs.values())]
    add("| program | " + " | ".join(f"`{v}` instr." for v in vs) + " | " + " | ".join(f"`{v}` time" for v in vs) + " |")
    add("|---|" + "---|" * (2 * len(vs)))
    gi = {v: [] for v in vs}
    gt = {v: [] for v in vs}
    for n, p in progs.items():
        row = [n]
        for v in vs:
            gi[v].append(V(p, v).get("instr_ratio"))
            row.append(f_r(V(p, v).get("instr_ratio")))
        for v in vs:
            gt[v].append(V(p, v).get("ratio"))
            row.append(f_r(V(p, v).get("ratio")))
        add("| " + " | ".join(row) + " |")
    add("| **geomean** | " + " | ".join(f"**{f_r(geomean(gi[v]))}**" for v in vs) + " | "
        + " | ".join(f"**{f_r(geomean(gt[v]))}**" for v in vs) + " |")
    add("")
    add("### Issue 17's targets")
    add("")
    add("| target | measured | met |")
    add("|---|---|---|")
    ratios = [(n, r) for n, r in zip(progs, cols["ratio"]) if r is not None]
    if ratios:
        worst = max(ratios, key=lambda x: x[1])
        add(f"| witness trace size ≤ 0.5 × `trace-naive`'s on every program (reduced input) | worst "
            f"{worst[0]} {worst[1]:.4f} × | {'yes' if worst[1] <= 0.5 else '**no**'} |")
    enc = {"`trace`": g["tb"], "`trace-bits`": g["bb"], "`trace-bits-rc`": g["cb"]}
    enc = {k: x for k, x in enc.items() if x is not None}
    if enc:
        which, best = min(enc.items(), key=lambda kv: kv[1])
        add(f"| the smaller tally encoding ≤ 1 bit per executed conditional branch (geomean) | "
            f"{which} {best:.3f} (" + ", ".join(f"{k} {x:.3f}" for k, x in enc.items()) + ") | "
            f"{'yes' if best <= 1 else '**no**'} |")
    for what, gg in (("time", gt), ("instructions", gi)):
        tr = {v: geomean(gg[v]) for v in ("trace", "trace-regs", "trace-bits", "trace-bits-rc")
              if v in gg and geomean(gg[v])}
        path = geomean(gg["path"]) if "path" in gg else None
        if tr and path:
            v, x = min(tr.items(), key=lambda kv: kv[1])
            add(f"| overhead of the faster tally trace mode ≤ that of `path` (geomean, {what}) | "
                f"`{v}` {x - 1:+.1%} vs `path` {path - 1:+.1%} | {'yes' if x <= path else '**no**'} |")
    if g["regen"]:
        add(f"| regeneration ≥ 50 million blocks per second | {g['regen']:.1f} M/s (geomean, "
            f"`tally report --trace` wall time) | {'yes' if g['regen'] >= 50 else '**no**'} |")
    add("")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
