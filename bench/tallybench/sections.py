"""The report's sections on placements, traces, SESE counters and path profiles."""
import glob
import json
import os

from .common import WORK, log, sh
from .variants import IPATHS, ORACLE, PATH, REDUCED_TIMED, SESE_BASE, TARGET_MODE, TRACES, VAR
from .figures import geomean
from .fmt import fmt_big, fmt_pct, fmt_ratio, fmt_s, fmt_sci


def fill_placements(results, tally):
    """Ball & Larus 1994 §6's Graphs 2-4 for every program: `tally placements` scores counter placements
    on the counts of the `edges-naive` training profile (kept in its build directory)."""
    for n, p in results["programs"].items():
        if "variants" not in p or p.get("placements"):
            continue
        found = sorted(glob.glob(os.path.join(WORK, "build", n, f"{ORACLE}-*", f"train-{p.get('size')}.tally")),
                       key=os.path.getmtime)
        if not found or not tally or not os.path.exists(tally):
            continue
        r = sh([tally, "placements", "--format", "json", found[-1]])
        if r.returncode == 0:
            p["placements"] = json.loads(r.stdout)
        else:
            log(f"bench: {n}: tally placements failed: {r.stderr.strip()[:200]}")


def render_placements(progs, add):
    """Placements scored on measured counts (Ball & Larus 1994 §6.1-6.4, Graphs 2-4)."""
    rows = [(n, p["placements"]) for n, p in progs.items() if p.get("placements")]
    if not rows:
        return
    names = ["eprof-heuristic", "eprof-exact", "eprof-min", "vprof-ecnt", "vprof-vcnt", "vprof-vcnt-exact"]
    add("## Counter placements scored on the measured counts (Ball & Larus 1994 §6, Graphs 2-4)")
    add("")
    add("`tally placements --format json` of the `edges-naive` training profile (default input): each "
        "placement is computed on every function's graph and charged the measured counts of what it "
        "counts, as the paper scores its placements (\"we used the profile information collected from "
        "a previous run to determine how many times each counter would have been incremented\"); no "
        "rebuild. Idealized: every edge may carry a counter. Dynamic increments ÷ those of a counter in "
        "every block (Graph 2's measure); static counters in parentheses, ÷ blocks. `eprof-heuristic` / "
        "`eprof-exact` / `eprof-min`: chords of the maximum spanning tree under the heuristic weights, "
        "the maximum and the minimum spanning tree under the measured counts (Graph 4's Heuristic-Max, "
        "Exact-Max and the worst tree); `vprof-ecnt`: Fig. 11's Vprof(Ecnt) heuristic; `vprof-vcnt`: "
        "Knuth and Stevenson's block counters (Graph 3), heuristic and measured block weights.")
    add("")
    add("| program | blocks: increments (counters) | " + " | ".join(f"`{x}`" for x in names)
        + " | heuristic ÷ exact |")
    add("|" + "---|" * (len(names) + 3))
    per = {x: [] for x in names}
    he = []
    for n, pl in rows:
        sc = {q["name"]: q for q in pl["placements"]}
        b = sc["blocks"]
        cells = []
        for x in names:
            r = sc[x]["increments"] / b["increments"] if b["increments"] else None
            per[x].append(r)
            c = sc[x]["counters"] / b["counters"] if b["counters"] else None
            cells.append("" if r is None else f"{r:.3f} ({c:.2f})")
        h = (sc["eprof-heuristic"]["increments"] / sc["eprof-exact"]["increments"]
             if sc["eprof-exact"]["increments"] else None)
        he.append(h)
        add(f"| {n} | {fmt_big(b['increments'])} ({b['counters']}) | " + " | ".join(cells)
            + f" | {'' if h is None else format(h, '.3f')} |")
    add("| **geomean** | | " + " | ".join(f"**{geomean(per[x]):.3f}**" if geomean(per[x]) else "" for x in names)
        + f" | **{geomean(he):.3f}** |" if geomean(he) else " | |")
    add("")


def render_traces(progs, add):
    """Tracing (issue 17 point 5): each tracing variant's trace on the reduced input, per million
    executed blocks and per executed conditional branch, with instruction and time overheads
    next to `edge` and `path` (Ball & Larus 1994 Table 3's columns are in docs/log/trace.md)."""
    tv = [v for v in TRACES if any(p["variants"].get(v, {}).get("status") == "ok" for p in progs.values())]
    if not tv:
        return
    others = [v for v in ("edge", "path") if any(p["variants"].get(v, {}).get("status") == "ok" for p in progs.values())]
    add("## Tracing (issue 17)")
    add("")
    add("Trace sizes on the reduced input (the callgrind run): bytes of the trace file (headers and "
        "every control record included) per million executed blocks, and bits per executed conditional "
        "branch (a block with two or more `flow` out-edges); the blocks and branches are counted by "
        "`tally report --trace` regenerating the witness trace; regeneration = those blocks ÷ the median "
        "wall time of three runs of that (text) report, the whole process. Instructions: reduced input; time: "
        "default input, except " + ", ".join(f"`{v}`" for v in sorted(REDUCED_TIMED)) +
        " (reduced input against `clang` on the reduced input: its trace of the default input would "
        "be tens of gigabytes). Overheads against `clang`.")
    add("")
    head = ["program", "blocks", "cond. branches", "regeneration"]
    for v in tv:
        head += [f"`{v}` bytes/Mblock", f"`{v}` bits/branch"]
    head += [f"`{v}` instr." for v in others + tv] + [f"`{v}` time" for v in others + tv]
    add("| " + " | ".join(head) + " |")
    add("|" + "---|" * len(head))
    per = {k: [] for k in head}
    for n, p in progs.items():
        tc = p.get("trace_counts") or {}
        blocks, cond = tc.get("blocks"), tc.get("conditional_branches")
        regen = (f"{blocks / tc['regen_seconds'] / 1e6:.1f} M blocks/s" if blocks and tc.get("regen_seconds") else "")
        row = [n, fmt_big(blocks), fmt_big(cond), regen]
        for v in tv:
            b = p["variants"].get(v, {}).get("reduced_trace_bytes")
            bpm = b / blocks * 1e6 if b and blocks else None
            bpb = 8 * b / cond if b and cond else None
            per[f"`{v}` bytes/Mblock"].append(bpm)
            per[f"`{v}` bits/branch"].append(bpb)
            row += ["" if bpm is None else f"{bpm:,.0f}", "" if bpb is None else f"{bpb:.3f}"]
        for v in others + tv:
            r = p["variants"].get(v, {}).get("instr_ratio")
            per[f"`{v}` instr."].append(r)
            row.append(fmt_ratio(r))
        for v in others + tv:
            r = p["variants"].get(v, {}).get("ratio")
            per[f"`{v}` time"].append(r)
            row.append(fmt_ratio(r))
        add("| " + " | ".join(row) + " |")
    geo = ["**geomean**", "", "", ""]
    for k in head[4:]:
        g = geomean(per[k])
        geo.append("" if g is None else f"**{g:,.0f}**" if "Mblock" in k else f"**{g:.3f}**" if "bits/branch" in k else f"**{g:.2f}**")
    add("| " + " | ".join(geo) + " |")
    add("")


def render_sese(progs, add):
    """SESE counters (Frenot & Pereira 2024) next to `edge` without them (`edge-nosese`): RQ2 (how common
    they are: loops, candidates, counters replaced, dynamic increments removed) and RQ3
    (overhead). `edge` has them by default; `sese`, `sese-all`, `sese-exact` are opt-in."""
    base = SESE_BASE
    ran = lambda v: any(p["variants"].get(v, {}).get("status") == "ok" for p in progs.values())
    sese = [v for v in (TARGET_MODE, "sese", "sese-all", "sese-exact") if v in VAR and ran(v)]
    if not sese or not ran(base):
        return
    for v in sese:
        add(f"## SESE counters (`{v}`) next to `{base}` (Frenot & Pereira 2024, RQ2 and RQ3)")
        add("")
        add("Loops: natural loops of the instrumented functions; candidates: loops with a counted "
            "variable (a header phi with constant increments) or a trip count ScalarEvolution knows on "
            "entry, no early exit inside; refused: candidates the per-loop cost test rejected; replaced: edge "
            "counters they made free (no increment in the loop, the count added at its exits); "
            "removed: dynamic increments those edges would have cost (their counts on the default "
            "input), against all increments of `" + base + "` on the same input; increments: "
            "the counters' sum, SESE values excluded. Instructions (reduced input) and time (default "
            "input) as overhead against `clang`.")
        add("")
        add(f"| program | loops | candidates | refused by the cost test | replaced | of which trip counts | "
            f"removed | removed ÷ `{base}` | "
            f"increments `{base}` | increments `{v}` | instructions `{base}` | "
            f"instructions `{v}` | time `{base}` | time `{v}` |")
        add("|" + "---|" * 14)
        ri, rt = {base: [], v: []}, {base: [], v: []}
        for n, p in progs.items():
            e, s = p["variants"].get(base, {}), p["variants"].get(v, {})
            st = s.get("stats") or {}
            rem = s.get("sese_removed")
            inc_s = s.get("increments") - rem if s.get("increments") is not None and rem is not None else None
            frac = f"{rem / e['increments']:.1%}" if rem is not None and e.get("increments") else ""
            pct = lambda x: "" if x is None else f"{x - 1:+.2%}"
            for var, d in ((base, e), (v, s)):
                if d.get("instr_ratio"):
                    ri[var].append(d["instr_ratio"])
                if d.get("ratio"):
                    rt[var].append(d["ratio"])
            add(f"| {n} | {st.get('natural loops', '')} | {st.get('SESE candidates', '')} | "
                f"{st.get('SESE unprofitable', '')} | "
                f"{st.get('SESE counters', '')} | {st.get('SESE trip counts', '')} | {fmt_big(rem)} | {frac} | {fmt_big(e.get('increments'))} | "
                f"{fmt_big(inc_s)} | {pct(e.get('instr_ratio'))} | {pct(s.get('instr_ratio'))} | "
                f"{pct(e.get('ratio'))} | {pct(s.get('ratio'))} |")
        g = lambda xs: f"**{geomean(xs) - 1:+.2%}**" if geomean(xs) else ""
        add(f"| **geomean** | | | | | | | | | | {g(ri[base])} | {g(ri[v])} | {g(rt[base])} | {g(rt[v])} |")
        add("")


def render_paths(res, progs, add):
    """Path profiling next to edge profiling: Ball & Larus 1996's Table 1 (overhead, increments, hashing)
    and Table 2 (executed and potential paths)."""
    rows = [(n, p) for n, p in progs.items() if p["variants"].get(PATH, {}).get("status") == "ok"]
    if not rows:
        return
    add(f"## Path profiling (`{PATH}`) next to `{TARGET_MODE}` (Ball & Larus 1996, Tables 1 and 2)")
    add("")
    add(f"Overheads against `clang` (time on the default input, instructions on the reduced one); "
        f"path ÷ edge = the ratio of the two overheads (Ball & Larus 1996's PP/QPT column; empty where the "
        f"`{TARGET_MODE}` overhead is not positive); path increments = executions of a path counter "
        f"(array slot or hash-table entry, default input); edge ÷ path = increments of `{TARGET_MODE}` "
        f"÷ path increments; hashed = fraction of the path increments that went to a hash table; "
        f"instructions per increment = plain instructions ÷ path increments, both on the reduced "
        f"input. `?`: `tally paths` refused the profile (see *Problems*).")
    add("")
    add("| program | base (s) | `path` time | `edge` time | path ÷ edge | `path` instr. | `edge` instr. | path ÷ edge | path increments | edge ÷ path | hashed | instr. per path increment |")
    add("|" + "---|" * 12)

    def ratio_of_ovh(a, b):
        return "" if a is None or b is None or b - 1 <= 0 else f"{(a - 1) / (b - 1):.2f}"

    def bold(x):
        return f"**{x}**" if x else ""
    for n, p in rows:
        P, E = p["variants"][PATH], p["variants"].get(TARGET_MODE, {})
        st, red = P.get("paths"), P.get("reduced_paths") or {}
        ipi = (p["variants"]["clang"].get("instructions") / red["path_increments"]
               if red.get("path_increments") and p["variants"]["clang"].get("instructions") else None)
        if st:
            er = E.get("increments") / st["path_increments"] if E.get("increments") and st["path_increments"] else None
            figs = [fmt_big(st["path_increments"]), "" if er is None else format(er, ".2f"),
                    "" if st["hash_fraction"] is None else format(100 * st["hash_fraction"], ".2f") + "%"]
        else:
            figs = ["?", "?", "?"]
        add(f"| {n} | {fmt_s(p['variants']['clang'].get('median'))} | {fmt_pct(P.get('ratio'))} | {fmt_pct(E.get('ratio'))} | "
            f"{ratio_of_ovh(P.get('ratio'), E.get('ratio'))} | {fmt_pct(P.get('instr_ratio'))} | {fmt_pct(E.get('instr_ratio'))} | "
            f"{ratio_of_ovh(P.get('instr_ratio'), E.get('instr_ratio'))} | " + " | ".join(figs) +
            f" | {'' if ipi is None else format(ipi, '.1f')} |")
    gp, ge = res["geomean"].get(PATH, {}), res["geomean"].get(TARGET_MODE, {})
    if gp.get("ratio") or gp.get("instr_ratio"):
        add(f"| **geomean** | | {bold(fmt_pct(gp.get('ratio')))} | {bold(fmt_pct(ge.get('ratio')))} | "
            f"{bold(ratio_of_ovh(gp.get('ratio'), ge.get('ratio')))} | "
            f"{bold(fmt_pct(gp.get('instr_ratio')))} | {bold(fmt_pct(ge.get('instr_ratio')))} | "
            f"{bold(ratio_of_ovh(gp.get('instr_ratio'), ge.get('instr_ratio')))} | | | | |")
    add("")
    add("Paths (`tally paths --format json` of the run on the default input): functions with a path "
        "profile (of them counting in a hash table; functions left on edge counters are not among "
        "them), functions that ran, potential paths (sum over functions of the Ball-Larus path "
        "count), executed paths (distinct paths with a non-zero count), path length in blocks "
        "(longest executed; average over path executions), increments the hash table lost.")
    add("")
    add("| program | functions | hashed | edge counters instead | executed functions | potential paths | executed paths | longest (blocks) | average (blocks) | lost |")
    add("|" + "---|" * 10)
    for n, p in rows:
        st = p["variants"][PATH].get("paths")
        s = p["variants"][PATH].get("stats") or {}
        if not st:
            add(f"| {n} | ? | {s.get('hash table', '')} | {s.get('edge counters', '')} | ? | ? | ? | ? | ? | ? |")
            continue
        add(f"| {n} | {st['functions']} | {st['hashed_functions']} | {s.get('edge counters', '')} | {st['executed_functions']} | "
            f"{fmt_sci(st['potential_paths'])} | {st['executed_paths']} | {st['longest']} | "
            f"{'' if st['avg_length'] is None else format(st['avg_length'], '.1f')} | {st['lost']} |")
    add("")


def render_ipaths(res, progs, add):
    """Interprocedural path profiling (Melski & Reps 1998) next to `path` (issue 18 point 6): overheads,
    the hashed fraction, potential and executed interprocedural paths, the set's size."""
    rows = [(n, p) for n, p in progs.items()
            if any(p["variants"].get(v, {}).get("status") == "ok" for v in IPATHS)]
    if not rows:
        return
    ips = [v for v in IPATHS if any(p["variants"].get(v, {}).get("status") == "ok" for _, p in rows)]
    vs = [PATH] + ips

    def ratio_of_ovh(a, b):
        return "" if a is None or b is None or b - 1 <= 0 else f"{(a - 1) / (b - 1):.2f}"

    def hashed(e):
        return f"{100 * e['hashed_entries'] / e['increments']:.1f}%" if e.get("increments") else ""
    add(f"## Interprocedural paths (`ipath`, `ipath-piecewise`) next to `{PATH}` (Melski & Reps 1998; docs/log/ipaths.md)")
    add("")
    add("Overheads against `clang`: instructions under callgrind on the reduced input (what counts on "
        "this loaded machine), time on the default input. ipath ÷ path = ratio of the two instruction "
        "overheads (issue 18's target: geomean ≤ 2). hashed = path-entry increments (the "
        "interprocedural sets count in hash tables) ÷ all increments, the rest being the edge counters "
        "of the functions outside the set (default input).")
    add("")
    add("| program | " + " | ".join(f"`{v}` instr." for v in vs) + " | "
        + " | ".join(f"`{v}` ÷ path" for v in ips) + " | "
        + " | ".join(f"`{v}` time" for v in vs) + " | " + " | ".join(f"hashed `{v}`" for v in ips) + " |")
    add("|" + "---|" * (1 + 2 * len(vs) + 2 * len(ips)))
    for n, p in rows:
        E = [p["variants"].get(v, {}) for v in vs]
        add(f"| {n} | " + " | ".join(fmt_pct(e.get("instr_ratio")) for e in E) + " | "
            + " | ".join(ratio_of_ovh(e.get("instr_ratio"), E[0].get("instr_ratio")) for e in E[1:]) + " | "
            + " | ".join(fmt_pct(e.get("ratio")) for e in E) + " | " + " | ".join(hashed(e) for e in E[1:]) + " |")
    G = [res["geomean"].get(v, {}) for v in vs]
    add("| **geomean** | " + " | ".join(f"**{fmt_pct(g.get('instr_ratio'))}**" for g in G) + " | "
        + " | ".join(f"**{ratio_of_ovh(g.get('instr_ratio'), G[0].get('instr_ratio'))}**" for g in G[1:]) + " | "
        + " | ".join(f"**{fmt_pct(g.get('ratio'))}**" for g in G) + " |" + " |" * len(ips))
    add("")
    add("The set and the paths (default input): functions = functions tally instrumented; in the set = "
        "those numbered interprocedurally (the others have a call or edge the mode cannot instrument, "
        "or are in a set whose numbering failed, and keep edge counters; `--tally-verbose`); "
        "potential = the sets' path totals (sum over files); executed = distinct paths that ran "
        "(`tally paths --top 0`); crossing = those with a call or return step, i.e. blocks of more than "
        "one function, and their share of the path runs; on paths = set functions some executed path "
        "goes through; widest = most functions in one path.")
    add("")
    add("| program | variant | functions | in the set | edge counters | potential paths | executed paths | "
        "crossing | runs on crossing paths | on paths | widest |")
    add("|" + "---|" * 11)
    for n, p in rows:
        for v in ips:
            e = p["variants"].get(v, {})
            s, st = e.get("stats") or {}, e.get("ipaths")
            if e.get("status") != "ok":
                continue
            funcs, edge = s.get("functions"), s.get("edge counters")
            inset = funcs - s.get("skipped", 0) - edge if funcs is not None and edge is not None else None
            if not st:
                add(f"| {n} | `{v}` | {funcs or ''} | {'' if inset is None else inset} | {edge or ''} | ? | ? | ? | ? | ? | ? |")
                continue
            share = f"{100 * st['crossing_runs'] / st['runs']:.1f}%" if st["runs"] else ""
            add(f"| {n} | `{v}` | {funcs or ''} | {'' if inset is None else inset} | {'' if edge is None else edge} | "
                f"{fmt_sci(st['potential_paths'])} | {st['executed_paths']} | {st['crossing_paths']} | {share} | "
                f"{st['functions_on_paths']} | {st['most_functions']} |")
    add("")
