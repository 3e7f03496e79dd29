#!/usr/bin/env python3
"""How small `TALLY_META=shared` makes a run's profile, and what reading, merging and exporting
such profiles cost next to self-contained ones ("Profiles as data", point 4: a CPython test
process's profile <= 1 MB, reading and merging no slower).

SQLite (the amalgamation from the cargo registry with testdata/sqlite/driver.c, `-O2 -g`, edge
mode) runs --runs times (sizes 1..4), each run twice: once writing a self-contained profile,
once with TALLY_META=shared into another directory. Measured, each the median of --reps
interleaved repetitions: bytes per run; `tally merge` of all the runs, `tally report` of one,
`tally export` of all; the instructions the program's exit spends writing its profile
(callgrind, a size-1 run, the whole program's count minus a TALLY_PROFILE=off run's). With
--cpython DIR (a CPython tree built with `CC="tally cc"`, e.g. by scripts/real-projects.sh), the
same for the processes of `./python -m test -j1 test_json test_re`.

    bench/profile_size.py                          writes docs/profile-size.md
    bench/profile_size.py --runs 50 --reps 1 --out target/bench/profile-size.md
    TALLY=/path/to/tally bench/profile_size.py --cpython /tmp/cpy/python3.11-3.11.2
"""
import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "target", "bench", "profile-size")
FLAGS = ["-O2", "-g", "-DSQLITE_THREADSAFE=0", "-DSQLITE_OMIT_LOAD_EXTENSION"]

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tallybench.common import callgrind  # noqa: E402
from tallybench.script import Script  # noqa: E402

S = Script("bench/profile_size", WORK)
log, run, timed = S.log, S.run, S.timed


def files(d, suffix):
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(suffix))


def total(paths):
    return sum(os.path.getsize(p) for p in paths)


def instructions(exe, args, env, ok=(0,)):
    """Instructions callgrind counts for one run (which must exit with a status in ok)."""
    try:
        return callgrind([exe, *args], env=dict(os.environ, **env), ok=ok)
    except RuntimeError as e:
        sys.exit(f"bench/profile_size: {e}")


def compare(tally, name, inline_dir, shared_dir, reps, merge_args, report_set):
    """Rows comparing inline and shared profiles of the same runs. `report_set(files)` picks the
    runs `tally report` reads one by one: the same runs must be picked from both sets (SQLite:
    the first run, written both ways; CPython: every process, since the two runs of the suite
    have different pids and the largest profile of one need not be the same process as the
    largest of the other)."""
    inline, shared = files(inline_dir, ".tally"), files(shared_dir, ".tally")
    metas = files(shared_dir, ".tallymeta")
    n = len(inline)
    rows = [
        f"| {name}: bytes per run, mean | {total(inline) / n:,.0f} | {total(shared) / len(shared):,.0f} |",
        f"| {name}: bytes per run, largest | {max(map(os.path.getsize, inline)):,} | "
        f"{max(map(os.path.getsize, shared)):,} |",
        f"| {name}: all {n} runs, with the `.tallymeta` files ({len(metas)}) | {total(inline):,} | "
        f"{total(shared) + total(metas):,} |",
    ]
    sets = [(inline_dir, inline), (shared_dir, shared)]
    picked = [report_set(fs) for _, fs in sets]
    what = "one run" if len(picked[0]) == 1 else f"each of the {len(picked[0])} runs, summed"
    # `tally report` exits 3 to 6 when it flags counts (a CPython process is raced).
    reported = (0, 3, 4, 5, 6)
    cases = {
        f"`tally merge` of the {n} runs (s)": lambda i, d, fs: [[tally, "merge", *merge_args(d, fs)]],
        f"`tally report` of {what} (s)": lambda i, d, fs: [[tally, "report", f] for f in picked[i]],
        f"`tally export` of the {n} runs (s)": lambda i, d, fs: [[tally, "export", "-o",
                                                                 os.path.join(WORK, "ds"), *fs]],
    }
    times = {k: ([], []) for k in cases}
    # The reports are short: three times the repetitions, for a median that says more.
    for rep in range(3 * reps):
        for k, cmds in cases.items():
            if rep >= reps and not k.startswith("`tally report`"):
                continue
            for i, (d, fs) in enumerate(sets):
                shutil.rmtree(os.path.join(WORK, "ds"), ignore_errors=True)
                times[k][i].append(sum(timed(c, WORK, ok=reported)[1] for c in cmds(i, d, fs)))
    for k, (a, b) in times.items():
        rows.append(f"| {name}: {k} | {statistics.median(a):.3f} | {statistics.median(b):.3f} |")
    # The same reports' instructions (callgrind): what the times above say, without the noise.
    counts = [sum(instructions(tally, ["report", f], {}, ok=reported) for f in fs) for fs in picked]
    rows.append(f"| {name}: `tally report` of {what} (instructions, callgrind) | {counts[0]:,} | {counts[1]:,} |")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cpython", help="a CPython build tree made with tally cc")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "profile-size.md"))
    a = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    # Taken first: the tree the measured binary was built from (when it was built here).
    commit = run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT).stdout.strip()
    if run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT).stdout.strip():
        commit += " with uncommitted changes"
    tally = S.tally_binary(keep=False)
    src = run([os.path.join(ROOT, "testdata", "locate.sh"), "sqlite"]).stdout.strip()
    sqlite = os.path.join(WORK, "sqlite")
    log("bench/profile_size: building SQLite with tally cc (a minute)")
    run([tally, "cc", *FLAGS, f"-I{src}", os.path.join(src, "sqlite3.c"),
         os.path.join(ROOT, "testdata", "sqlite", "driver.c"), "-lm", "-o", sqlite])
    dirs = {k: os.path.join(WORK, k) for k in ("inline", "shared")}
    for d in dirs.values():
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    log(f"bench/profile_size: {a.runs} SQLite runs, inline and shared")
    for i in range(a.runs):
        size = str(1 + i % 4)
        run([sqlite, size], env=dict(os.environ, TALLY_PROFILE=os.path.join(dirs["inline"], f"r{i:05}.tally")))
        run([sqlite, size], env=dict(os.environ, TALLY_META="shared",
                                     TALLY_PROFILE=os.path.join(dirs["shared"], f"r{i:05}.tally")))
    rows = compare(tally, "SQLite", dirs["inline"], dirs["shared"], a.reps,
                   lambda d, fs: ["-o", os.path.join(WORK, "m.tally"), *fs], lambda fs: fs[:1])
    # Writing at exit: the whole run's instructions, minus a run that writes nothing (a copy
    # built with -gdwarf-4: Debian's valgrind 3.19 cannot read clang-19's DWARF 5).
    cg = os.path.join(WORK, "sqlite-cg")
    run([tally, "cc", *[f if f != "-g" else "-gdwarf-4" for f in FLAGS], f"-I{src}",
         os.path.join(src, "sqlite3.c"), os.path.join(ROOT, "testdata", "sqlite", "driver.c"), "-lm", "-o", cg])
    cg_dir = os.path.join(WORK, "cg")
    shutil.rmtree(cg_dir, ignore_errors=True)
    os.makedirs(cg_dir)
    run([cg, "1"], env=dict(os.environ, TALLY_META="shared", TALLY_PROFILE=os.path.join(cg_dir, "first.tally")))
    off = instructions(cg, ["1"], {"TALLY_PROFILE": "off"})
    inl = instructions(cg, ["1"], {"TALLY_PROFILE": os.path.join(cg_dir, "inline.tally")})
    # Its .tallymeta files exist: what every run after the first pays.
    sh = instructions(cg, ["1"], {"TALLY_META": "shared", "TALLY_PROFILE": os.path.join(cg_dir, "cg.tally")})
    rows.append(f"| SQLite: instructions writing the profile at exit (callgrind) | {inl - off:,} | {sh - off:,} |")
    if a.cpython:
        tree = os.path.abspath(a.cpython)
        cdirs = {k: os.path.join(WORK, f"cpython-{k}") for k in ("inline", "shared")}
        for k, d in cdirs.items():
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            log(f"bench/profile_size: CPython's test_json and test_re, {k}")
            env = dict(os.environ, TALLY_PROFILE=os.path.join(d, "%p.tally"))
            if k == "shared":
                env["TALLY_META"] = "shared"
            subprocess.run(["./python", "-m", "test", "-j1", "test_json", "test_re"], cwd=tree, env=env,
                           capture_output=True, check=True)
        rows += compare(tally, "CPython", cdirs["inline"], cdirs["shared"], a.reps,
                        lambda d, fs: ["--by-program", "-o", os.path.join(WORK, "m"), d],
                        lambda fs: fs)
    lines = [
        "# Profile size: self-contained and `TALLY_META=shared`",
        "",
        f"Generated by `bench/profile_size.py` (runs {a.runs}, reps {a.reps}) on {datetime.date.today()}, "
        f"tally at {commit}, {platform.machine()} with {os.cpu_count()} cores (shared: times are CPU "
        "seconds, the median of interleaved repetitions, three times as many for `tally report`).",
        "",
        "The same runs, each written twice: self-contained (the default) and with `TALLY_META=shared`, "
        "where each module's metadata is written once per build into `<hash>.tallymeta` next to the "
        "profiles and a run's profile holds only its non-zero counters "
        "([design/profile.md](design/profile.md)). SQLite: `testdata/sqlite/driver.c`, sizes 1..4, "
        "`tally cc -O2 -g`, edge mode."
        + (" CPython: every process of `./python -m test -j1 test_json test_re` in a tree built with "
           "`CC=\"tally cc\"` (edge mode), merged with `tally merge --by-program`; the inline and shared "
           "runs are two runs of the suite, not the same processes." if a.cpython else ""),
        "",
        "| measure | self-contained | `TALLY_META=shared` |",
        "|---|---|---|",
        *rows,
        "",
        "Every report on a shared profile is the report on the self-contained one of the same run: "
        "`cargo test --release -p tally --test e2e -- shared_meta` merges the same runs written both ways "
        "(the demo program in the 9 counting modes, and SQLite) into the same bytes, and the dataset "
        "`tally export` makes of the shared ones reads back as those bytes too.",
        "",
        "Reading the times: they are CPU seconds on a shared machine, where the same command's time "
        "moves by several percent from one repetition to the next; a difference of that size between "
        "the columns is not a difference in work. The callgrind rows count the instructions of the "
        "same reports (user space; the kernel's share, opening the `.tallymeta` files and faulting "
        "in memory, is in the times only).",
        "",
    ]
    with open(a.out, "w") as f:
        f.write("\n".join(lines))
    log(f"bench/profile_size: wrote {a.out}")


if __name__ == "__main__":
    main()
