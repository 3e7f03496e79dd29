#!/usr/bin/env python3
"""How fast `tally export` turns many profiles into the Parquet dataset, how small the dataset
is, and how fast DuckDB answers the issue's questions on it ("Profiles as data"). Targets:
export at >= 1,000 profiles/s with memory bounded independently of the number of profiles,
the dataset <= 20% of the `.tally` files' size, each DuckDB question < 1 s with the answer
equal to `tally merge` + `tally report`'s. Anchor: `llvm-profdata-19 merge` of as many
`.profraw` files of the same SQLite program built with clang's IR PGO instrumentation.

Input: SQLite (the amalgamation from the cargo registry with testdata/sqlite/driver.c,
`-O2 -g`) run --runs times (sizes 1..4), plus --other builds (the demo program compiled under
as many file names, so that each is another build) run --other-runs times each. Export is
measured on half the SQLite runs and on all of them (is the peak memory the same?), then on
everything; each timing is the median of --reps.

    bench/dataset.py                                writes docs/dataset-bench.md
    bench/dataset.py --runs 200 --reps 1 --out target/bench/dataset.md
    TALLY=/path/to/tally bench/dataset.py           that tally binary instead of building one
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "target", "bench", "dataset")
FLAGS = ["-O2", "-g", "-DSQLITE_THREADSAFE=0", "-DSQLITE_OMIT_LOAD_EXTENSION"]
PYTHON = os.path.join(ROOT, "target", "pyenv", "bin", "python3")
# Each question is asked at least this many times (they are quick; one time says little).
QUERY_REPS = 5

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tallybench.script import Script  # noqa: E402

S = Script("bench/dataset", WORK)
log, run, timed = S.log, S.run, S.timed


def size(paths):
    total = 0
    for p in paths:
        if os.path.isdir(p):
            for d, _, fs in os.walk(p):
                total += sum(os.path.getsize(os.path.join(d, f)) for f in fs)
        else:
            total += os.path.getsize(p)
    return total


QUERIES = {
    "lines never run": """
        SELECT l.file, l.line FROM lines l
        LEFT JOIN (SELECT DISTINCT file, line FROM line_totals WHERE build = $build) c
          ON l.file = c.file AND l.line = c.line
        WHERE l.build = $build AND c.file IS NULL
        ORDER BY l.file, l.line""",
    "hottest functions per build": """
        SELECT build, name, executions FROM (
          SELECT t.build, f.name, sum(t.executions) AS executions,
                 row_number() OVER (PARTITION BY t.build ORDER BY sum(t.executions) DESC, f.name) AS rank
          FROM function_totals t JOIN functions f USING (build, function)
          WHERE t.executions IS NOT NULL
          GROUP BY t.build, f.function, f.name)
        WHERE rank <= 10 ORDER BY build, rank""",
}

DUCK = r"""
import duckdb, json, os, sys, time
ds, build, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
queries = json.loads(sys.argv[4])
out = {}
for name, q in queries.items():
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        con = duckdb.connect()
        con.execute("SET enable_progress_bar = false")
        for table in os.listdir(ds):
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{ds}/{table}/*/*.parquet', hive_partitioning = true)")
        rows = con.execute(q, {"build": build} if "$build" in q else {}).fetchall()
        times.append(time.perf_counter() - t)
    out[name] = {"times": times, "rows": rows}
print(json.dumps(out))
"""


FLOOR = r"""
import duckdb, json, os, shutil, sys, time
ds, build, out, most = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
facts = ["function_counts", "block_counts", "edge_counts", "line_counts", "path_counts",
         "ipath_counts", "inexact", "counters", "path_entries", "runs"]
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
con = duckdb.connect()
con.execute("SET threads = 1")
con.execute("SET enable_progress_bar = false")
con.execute(f"CREATE TABLE sample AS SELECT run FROM read_parquet('{ds}/runs/build={build}/*.parquet') ORDER BY run LIMIT {most}")
rows, times = 0, []
for rep in range(3):
    total = 0.0
    for t in facts:
        src = f"{ds}/{t}/build={build}/*.parquet"
        con.execute(f"CREATE OR REPLACE TABLE m AS SELECT * FROM read_parquet('{src}') WHERE run IN (SELECT run FROM sample)")
        n = con.execute("SELECT count(*) FROM m").fetchall()[0][0]
        if rep == 0:
            rows += n
        start = time.perf_counter()
        con.execute(f"COPY m TO '{out}/{t}.parquet' (FORMAT parquet, COMPRESSION snappy)")
        total += time.perf_counter() - start
    times.append(total)
runs = con.execute("SELECT count(*) FROM sample").fetchall()[0][0]
print(json.dumps({"rows": rows, "runs": runs, "seconds": sorted(times)[1]}))
"""


def reusable(a):
    """Whether target/bench/dataset holds the builds and runs of these sizes."""
    def count(d, prefix=""):
        d = os.path.join(WORK, d)
        return len([f for f in os.listdir(d) if f.startswith(prefix)]) if os.path.isdir(d) else -1
    return (os.path.exists(os.path.join(WORK, "sqlite"))
            and count("runs", "sqlite-") == a.runs
            and count("runs", "other") == a.other * a.other_runs
            and count("runs-shared", "sqlite-") == a.runs
            and count("profraw") == a.runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000, help="SQLite runs (default 1000)")
    ap.add_argument("--other", type=int, default=10, help="other builds (default 10)")
    ap.add_argument("--other-runs", type=int, default=100, help="runs of each other build (default 100)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "dataset-bench.md"))
    ap.add_argument("--reuse-runs", action="store_true",
                    help="keep the builds and runs an earlier run of the same sizes left in target/bench/dataset")
    a = ap.parse_args()
    if not os.path.exists(PYTHON):
        sys.exit("bench/dataset: target/pyenv is missing: run scripts/setup.sh (it installs DuckDB)")
    os.makedirs(WORK, exist_ok=True)
    tally = S.tally_binary(keep=True)
    src = run([os.path.join(ROOT, "testdata", "locate.sh"), "sqlite"]).stdout.strip()
    driver = os.path.join(ROOT, "testdata", "sqlite", "driver.c")
    sqlite = os.path.join(WORK, "sqlite")
    pgo = os.path.join(WORK, "sqlite-irpgo")
    runs = os.path.join(WORK, "runs")
    shared = os.path.join(WORK, "runs-shared")
    raws = os.path.join(WORK, "profraw")
    if a.reuse_runs and reusable(a):
        log("bench/dataset: reusing the runs in target/bench/dataset")
    else:
        log("bench/dataset: building SQLite with tally cc and with clang -fprofile-generate (minutes)")
        run([tally, "cc", *FLAGS, f"-I{src}", os.path.join(src, "sqlite3.c"), driver, "-lm", "-o", sqlite])
        run(["clang-19", "-fprofile-generate", *FLAGS, f"-I{src}", os.path.join(src, "sqlite3.c"), driver,
             "-lm", "-o", pgo])
        others = os.path.join(WORK, "others")
        for d in (runs, shared, raws, others):
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
        log(f"bench/dataset: {a.runs} runs of each SQLite build")
        for i in range(a.runs):
            size_arg = str(1 + i % 4)
            run([sqlite, size_arg], env=dict(os.environ, TALLY_PROFILE=os.path.join(runs, f"sqlite-{i:05}.tally")))
            run([sqlite, size_arg], env=dict(os.environ, TALLY_META="shared",
                                             TALLY_PROFILE=os.path.join(shared, f"sqlite-{i:05}.tally")))
            run([pgo, size_arg], env=dict(os.environ, LLVM_PROFILE_FILE=os.path.join(raws, f"sqlite-{i:05}.profraw")))
        demo = os.path.join(ROOT, "testdata", "demo")
        for b in range(a.other):
            c = os.path.join(others, f"wordfreq{b}.c")
            shutil.copy(os.path.join(demo, "wordfreq.c"), c)
            exe = os.path.join(others, f"wordfreq{b}")
            run([tally, "cc", "-O2", "-g", c, "-o", exe])
            text = open(os.path.join(demo, "input.txt")).read().splitlines()
            for i in range(a.other_runs):
                inp = "\n".join(text[: 10 + (i * 7) % len(text)])
                subprocess.run([exe], input=inp, text=True, capture_output=True, check=True,
                               env=dict(os.environ, TALLY_PROFILE=os.path.join(runs, f"other{b}-{i:04}.tally")))
    sqlite_runs = sorted(os.path.join(runs, f) for f in os.listdir(runs) if f.startswith("sqlite-"))
    all_runs = sorted(os.path.join(runs, f) for f in os.listdir(runs))
    raw_files = sorted(os.path.join(raws, f) for f in os.listdir(raws))
    half = sqlite_runs[: len(sqlite_runs) // 2]
    shared_runs = sorted(os.path.join(shared, f) for f in os.listdir(shared) if f.endswith(".tally"))

    ds = os.path.join(WORK, "ds")
    merged = os.path.join(WORK, "anchor.profdata")
    cases = [
        (f"export {len(half)} SQLite profiles", [tally, "export", "-o", ds, *half], len(half)),
        (f"export {len(sqlite_runs)} SQLite profiles", [tally, "export", "-o", ds, *sqlite_runs], len(sqlite_runs)),
        (f"export {len(shared_runs)} SQLite profiles, TALLY_META=shared", [tally, "export", "-o", ds, *shared_runs],
         len(shared_runs)),
        (f"export all {len(all_runs)} profiles ({1 + a.other} builds)", [tally, "export", "-o", ds, runs], len(all_runs)),
        (f"tally merge {len(sqlite_runs)} SQLite profiles", [tally, "merge", "-o", os.path.join(WORK, "m.tally"), *sqlite_runs], len(sqlite_runs)),
        (f"llvm-profdata-19 merge {len(raw_files)} .profraw (anchor)", ["llvm-profdata-19", "merge", "-o", merged, *raw_files], len(raw_files)),
    ]
    results = {name: [] for name, _, _ in cases}
    for rep in range(a.reps):
        log(f"bench/dataset: repetition {rep + 1}/{a.reps}")
        for name, cmd, _ in cases:
            if cmd[1] == "export":
                shutil.rmtree(ds, ignore_errors=True)
            results[name].append(timed(cmd, WORK))
    # The dataset the queries read: everything (the last export case's).
    sizes = {"tally": size(all_runs), "dataset": size([ds]), "profraw": size(raw_files), "shared": size([shared]),
             "sqlite tally": size(sqlite_runs)}

    # The build of SQLite, and what tally merge + report say of it.
    m = os.path.join(WORK, "m.tally")
    run([tally, "merge", "-o", m, *sqlite_runs])
    report = json.loads(run([tally, "report", "--format", "json", "--lines", m]).stdout)
    duck = run([PYTHON, "-c", "import duckdb, sys; print(duckdb.connect().execute(\"SELECT DISTINCT build FROM read_parquet(?, hive_partitioning = true) WHERE program = ?\", [sys.argv[1], sys.argv[2]]).fetchall()[0][0])",
                os.path.join(ds, "runs", "*", "*.parquet"), os.path.realpath(sqlite)])
    build = duck.stdout.strip()
    floor = json.loads(run([PYTHON, "-c", FLOOR, ds, build, os.path.join(WORK, "floor"), "1000"]).stdout)
    query_reps = max(a.reps, QUERY_REPS)
    got = json.loads(run([PYTHON, "-c", DUCK, ds, build, str(query_reps), json.dumps(QUERIES)]).stdout)
    never = sorted([f["path"], l["line"]] for f in report["files"] for l in f["lines"] if l["count"] == 0)
    same_never = sorted(map(list, got["lines never run"]["rows"])) == never
    ran = [f for f in report["functions"] if (f["block_executions"] or 0) > 0]
    ran.sort(key=lambda f: (-f["block_executions"], f["name"]))
    hot = [(f["name"], f["block_executions"]) for f in ran[:10]]
    got_hot = [(n, x) for b, n, x in got["hottest functions per build"]["rows"] if b == build]
    same_hot = got_hot == hot
    builds = len({b for b, _, _ in got["hottest functions per build"]["rows"]})

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    lines = [
        "# Dataset export on SQLite",
        "",
        f"Generated by `bench/dataset.py` (reps {a.reps}) on {datetime.date.today()}, tally at {commit}, "
        f"{platform.machine()} with {os.cpu_count()} cores (shared: wall times drift; CPU time moves "
        f"least). Load average at the end: {os.getloadavg()[0]:.1f}.",
        "",
        f"Input: {len(sqlite_runs)} runs of SQLite (`testdata/sqlite/driver.c`, sizes 1..4, `tally cc -O2 -g`, "
        f"edge mode; {sizes['sqlite tally'] / len(sqlite_runs) / 1e6:.1f} MB per profile) and {a.other} other builds "
        f"(the demo program under {a.other} file names) of {a.other_runs} runs each. The anchor merges as many "
        f"`.profraw` files of the same SQLite built with `clang-19 -fprofile-generate`.",
        "",
        "| command | wall, median (s) | CPU, median (s) | profiles/s (wall) | profiles/s (CPU) | max RSS (MiB) |",
        "|---|---|---|---|---|---|",
    ]
    for name, _, n in cases:
        wall = statistics.median(w for w, _, _ in results[name])
        cpu = statistics.median(c for _, c, _ in results[name])
        rss = max(r for _, _, r in results[name])
        lines.append(f"| `{name}` | {wall:.2f} | {cpu:.2f} | {n / wall:.0f} | {n / cpu:.0f} | {rss:.0f} |")
    per_run = floor["rows"] / floor["runs"]
    lines += [
        "",
        f"The Parquet floor: {floor['runs']:,} of SQLite's runs hold {floor['rows']:,} fact rows ({per_run:,.0f} per run: "
        f"every non-zero counter, block, edge and line count). DuckDB, one thread, writes those rows "
        f"from memory as Parquet (snappy) in {floor['seconds']:.2f} s (median of 3): "
        f"**{floor['runs'] / floor['seconds']:.0f} runs per second** for the encoding alone, where "
        f"1,000 runs per second would take {per_run * 1000 / 1e6:.0f} million rows per second.",
    ]
    ratio = sizes["dataset"] / sizes["tally"]
    lines += [
        "",
        f"Sizes: the `.tally` files {sizes['tally'] / 1e6:.0f} MB, the dataset {sizes['dataset'] / 1e6:.1f} MB "
        f"(**{100 * ratio:.1f}%**; target <= 20%), the `.profraw` files {sizes['profraw'] / 1e6:.0f} MB; "
        f"the SQLite runs written with `TALLY_META=shared` {sizes['shared'] / 1e6:.1f} MB with their metadata files.",
        "",
        f"DuckDB {builds} builds, SQLite's build `{build}` (each time includes connecting and opening the views; "
        f"median of {query_reps}):",
        "",
        "| question | time, median (s) | worst (s) | rows | equal to `tally merge` + `report` |",
        "|---|---|---|---|---|",
    ]
    for name, same in (("lines never run", same_never), ("hottest functions per build", same_hot)):
        t = got[name]["times"]
        lines.append(f"| {name} | {statistics.median(t):.3f} | {max(t):.3f} | {len(got[name]['rows'])} | "
                     f"{'yes' if same else '**no**'} |")
    lines += [
        "",
        "Targets: export >= 1,000 profiles/s, memory independent of the number of profiles (compare the "
        "peak of half the runs with all of them), dataset <= 20% of the profiles, each question < 1 s.",
        "",
        "Regenerate: `bench/dataset.py` (builds SQLite twice, then the runs; `--reuse-runs` keeps those of an "
        "earlier run of the same sizes; about 15 minutes with the "
        "defaults).",
    ]
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    log(f"bench/dataset: wrote {a.out}")
    if not (same_never and same_hot):
        sys.exit("bench/dataset: DuckDB's answers differ from tally merge + report")


if __name__ == "__main__":
    main()
