"""Checks a `tally export` dataset with DuckDB against `tally merge` + `tally report`.

usage: dataset_check.py DATASET PROGRAM RUNS REPORT_JSON LABELS [PATHS_JSON]

DATASET is the dataset directory, PROGRAM the path of a program whose runs it holds (of one
build), RUNS the number of runs the dataset must hold of that build, LABELS the labels every
one of them must have (`k=v,...`, sorted by key), PATHS_JSON `tally paths --format json` of
the merged profile of a build in a path mode (`path`, `ipath`, `ipath-piecewise`), REPORT_JSON `tally report --format json --lines` of the merged
profile of exactly those runs. Every count the report gives (blocks, edges, entries, block
executions, lines, paths, inexact functions) must be the dataset's sum over the runs; the
totals tables must hold, part by part, the sums of their runs' rows; so must the answers of the two questions of docs/dataset.md ("lines never run", "hottest functions").
Prints one line with the build's key and the number of values compared; exits 1 naming the
first differences.
"""

import json
import os
import sys

import duckdb

dataset, program, runs, report_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
labels = sys.argv[5]
paths_report = json.load(open(sys.argv[6])) if len(sys.argv) > 6 else None
report = json.load(open(report_path))
con = duckdb.connect()

for table in os.listdir(dataset):
    glob = os.path.join(dataset, table, "*", "*.parquet")
    con.execute(
        f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{glob}', hive_partitioning=true)"
    )
tables = set(os.listdir(dataset))

errors = []
compared = 0


def same(what, expected, got):
    global compared
    compared += 1
    if expected != got and len(errors) < 20:
        errors.append(f"{what}: report {expected}, dataset {got}")


def rows(sql, *params):
    return con.execute(sql, list(params)).fetchall()


builds = rows("SELECT DISTINCT build FROM runs WHERE program = ?", program)
if len(builds) != 1:
    sys.exit(f"{program}: {len(builds)} builds in the dataset, not one")
build = builds[0][0]
same("runs", runs, rows("SELECT count(*) FROM runs WHERE build = ?", build)[0][0])
got_labels = {
    ",".join(f"{k}={v}" for k, v in sorted(m.items()))
    for (m,) in rows("SELECT labels FROM runs WHERE build = ?", build)
}
same("labels", {labels}, got_labels)

# Functions by (module, name, graph hash).
ids = {
    (m, n, h): i
    for i, m, n, h in rows(
        "SELECT function, module, name, cfg_hash FROM functions WHERE build = ?", build
    )
}
same("functions", len(report["functions"]), len(ids))


def sums(table, key):
    if table not in tables:
        return {}
    return {
        (f, k): c
        for f, k, c in rows(
            f"SELECT function, {key}, sum(count)::UBIGINT FROM {table} WHERE build = ? GROUP BY ALL",
            build,
        )
    }


blocks = sums("block_counts", "block")
edges = sums("edge_counts", "edge")
paths = sums("path_counts", "path")
calls = {
    f: (e, x, i, xe, lost)
    for f, e, x, i, xe, lost in rows(
        """SELECT function, sum(entries)::UBIGINT, sum(executions)::UBIGINT,
                  sum(inclusive_events)::UBIGINT, sum(exclusive_events)::UBIGINT,
                  sum(paths_lost)::UBIGINT
           FROM function_counts WHERE build = ? GROUP BY ALL""",
        build,
    )
}
inexact = {
    f
    for (f,) in rows(
        "SELECT DISTINCT function FROM inexact WHERE build = ?", build
    )
} if "inexact" in tables else set()

for f in report["functions"]:
    fid = ids.get((f["module"], f["name"], int(f["cfg_hash"], 16)))
    name = f["name"]
    if fid is None:
        errors.append(f"{name}: not in the dataset's functions")
        continue
    if f.get("inconsistent"):
        # The merged counts are unknown: some run (at least) had them unknown too.
        same(f"{name} inexact", True, fid in inexact)
        continue
    same(f"{name} inexact", False, fid in inexact)
    # A count the mode leaves undetermined (vertex mode's edges) has no rows in any run.
    for b in f["blocks"]:
        zero = None if b["count"] is None else 0
        same(f"{name} b{b['id']}", b["count"], blocks.get((fid, b["id"]), zero))
    for e in f["edges"]:
        zero = None if e["count"] is None else 0
        same(f"{name} e{e['id']}", e["count"], edges.get((fid, e["id"]), zero))
    # A function that did not run has no row; a count the mode leaves undetermined is NULL.
    zero = lambda c: None if c is None else 0
    ev = f.get("events") or {}
    e, x, i, xe, _ = calls.get(
        fid,
        (zero(f["entry_count"]), zero(f["block_executions"]), zero(ev.get("inclusive")),
         zero(ev.get("exclusive")), None),
    )
    same(f"{name} entries", f["entry_count"], e)
    same(f"{name} executions", f["block_executions"], x)
    same(f"{name} inclusive events", ev.get("inclusive"), i)
    same(f"{name} exclusive events", ev.get("exclusive"), xe)

if paths_report is not None:
    ipaths = {
        (m, mode, p): c
        for m, mode, p, c in rows(
            "SELECT module, mode, path, sum(count)::UBIGINT FROM ipath_counts WHERE build = ? GROUP BY ALL",
            build,
        )
    }
    for s in paths_report.get("interprocedural", []):
        mode = {"context": "ipath", "piecewise": "ipath-piecewise"}[s["mode"]]
        same(
            f"{s['module']} {mode} executed paths",
            s["executed_paths"],
            sum(1 for (m, md, _) in ipaths if (m, md) == (s["module"], mode)),
        )
        for p in s["paths"]:
            key = (s["module"], mode, p["number"])
            same(f"{s['module']} {mode} path {p['number']}", p["count"], ipaths.get(key, 0))
    # Each executed interprocedural path spelled out once per build, as `tally paths` spells it.
    if "ipaths" in tables:
        spelled = {}
        for row in rows(
            "SELECT module, mode, path, start, \"end\", context_steps, step_kinds, step_functions,"
            " step_blocks, step_callees, step_matched FROM ipaths WHERE build = ?",
            build,
        ):
            same(f"ipath {row[:3]} once", None, spelled.get(row[:3]))
            spelled[row[:3]] = tuple(list(x) if isinstance(x, list) else x for x in row[3:])
        listed = 0
        for s in paths_report.get("interprocedural", []):
            mode = {"context": "ipath", "piecewise": "ipath-piecewise"}[s["mode"]]
            for p in s["paths"]:
                listed += 1
                st = p["steps"]
                same(
                    f"{s['module']} {mode} path {p['number']} spelled",
                    (
                        p["start"],
                        p["end"],
                        p["context_steps"],
                        [x["kind"] for x in st],
                        [x.get("function", "") for x in st],
                        [x.get("block", 0) for x in st],
                        [x.get("callee") or "" for x in st],
                        [x.get("matched", False) for x in st],
                    ),
                    spelled.get((s["module"], mode, p["number"])),
                )
        same("ipaths spelled", listed, len(spelled))
    for f in paths_report["functions"]:
        fid = ids.get((f["module"], f["name"], int(f["cfg_hash"], 16)))
        name = f["name"]
        lost = (calls.get(fid) or (0,) * 5)[4] or 0
        same(f"{name} paths lost", f["lost"], lost)
        same(
            f"{name} executed paths",
            f["executed_paths"],
            sum(1 for (g, _) in paths if g == fid),
        )
        for p in f["paths"]:
            same(f"{name} path {p['number']}", p["count"], paths.get((fid, p["number"]), 0))
    # Each executed path spelled out once per build, as `tally paths` spells it.
    if "paths" in tables:
        spelled = {}
        for fid, number, blocks, start, end in rows(
            "SELECT function, path, blocks, start, \"end\" FROM paths WHERE build = ?", build
        ):
            same(f"path {number} of function {fid} once", None, spelled.get((fid, number)))
            spelled[(fid, number)] = (list(blocks), start, end)
        for f in paths_report["functions"]:
            fid = ids.get((f["module"], f["name"], int(f["cfg_hash"], 16)))
            for p in f["paths"]:
                same(
                    f"{f['name']} path {p['number']} spelled",
                    (p["blocks"], p["start"], p["end"]),
                    spelled.get((fid, p["number"])),
                )
        same("paths spelled", sum(len(f["paths"]) for f in paths_report["functions"]), len(spelled))

lines = {
    (fl, l): c
    for fl, l, c in rows(
        "SELECT file, line, sum(count)::UBIGINT FROM line_counts WHERE build = ? GROUP BY ALL",
        build,
    )
} if "line_counts" in tables else {}
code = set(rows("SELECT file, line FROM lines WHERE build = ?", build))
expected_code = set()
never = set()
for fl in report.get("files", []):
    for l in fl["lines"]:
        key = (fl["path"], l["line"])
        expected_code.add(key)
        if l["count"] is None:
            continue
        same(f"{key[0]}:{key[1]}", l["count"], lines.get(key, 0))
        if l["count"] == 0:
            never.add(key)
same("lines with code", len(expected_code), len(code))
same("lines with code, set", True, expected_code == code)



def per_part(table, key, sums):
    """Rows of `table` of the build summed per part (its file's name) over `key`, as
    {(part, *key): (sums..., rows)}."""
    glob = os.path.join(dataset, table, f"build={build}", "*.parquet")
    return {
        tuple(r[: len(key) + 1]): tuple(r[len(key) + 1 :])
        for r in rows(
            f"""SELECT regexp_extract(filename, 'part-([0-9a-f]+)[.]parquet$', 1), {", ".join(key)},
                       {", ".join(f"sum({x})::UBIGINT" for x in sums)}, count(*)::UINTEGER
                FROM read_parquet('{glob}', filename = true) GROUP BY ALL"""
        )
    }


def totals(table, key, sums):
    glob = os.path.join(dataset, table, f"build={build}", "*.parquet")
    cols = ", ".join(["part", *key, *sums, "runs"])
    got = rows(f"SELECT {cols} FROM read_parquet('{glob}')")
    out = {tuple(r[: len(key) + 1]): tuple(r[len(key) + 1 :]) for r in got}
    same(f"{table} rows, each (part, {', '.join(key)}) once", len(got), len(out))
    return out


# The totals tables hold, part by part, the sums of the rows of the part's runs.
for table, key, summed in (
    ("line", ["file", "line"], ["count"]),
    ("function", ["function"], ["entries", "executions"]),
):
    if f"{table}_counts" in tables:
        expected = per_part(f"{table}_counts", key, summed)
        got = totals(f"{table}_totals", key, summed)
        same(f"{table}_totals rows", len(expected), len(got))
        for k in sorted(expected.keys() | got.keys(), key=repr):
            same(f"{table}_totals {k}", expected.get(k), got.get(k))

# The questions of docs/dataset.md, as written there.
got_never = set(
    rows(
        """SELECT l.file, l.line FROM lines l
           LEFT JOIN (SELECT DISTINCT file, line FROM line_totals WHERE build = ?) c
             ON l.file = c.file AND l.line = c.line
           WHERE l.build = ? AND c.file IS NULL""",
        build,
        build,
    )
) if "line_counts" in tables else code
unknown = {
    (fl["path"], l["line"])
    for fl in report.get("files", [])
    for l in fl["lines"]
    if l["count"] is None
}
same("lines never run", sorted(never), sorted(got_never - unknown))

hottest = rows(
    """SELECT f.name, sum(t.executions)::UBIGINT AS executions
       FROM function_totals t JOIN functions f USING (build, function)
       WHERE t.build = ? AND t.executions > 0
       GROUP BY f.name, f.function ORDER BY executions DESC, f.name LIMIT 10""",
    build,
)
ran = [
    f
    for f in report["functions"]
    if (f["block_executions"] or 0) > 0 and not f.get("inconsistent")
]
ran.sort(key=lambda f: (-f["block_executions"], f["name"]))
same(
    "hottest functions",
    [(f["name"], f["block_executions"]) for f in ran[:10]],
    hottest,
)

if errors:
    print("\n".join(errors))
    sys.exit(1)
print(f"build {build}: {compared} values compared, all equal")
