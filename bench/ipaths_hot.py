#!/usr/bin/env python3
"""The hottest interprocedural paths of an `ipath` or `ipath-piecewise` profile (Melski & Reps 1998,
Melski & Reps 1998) that cross a call, with their source lines: the listings of docs/log/ipaths.md.

    bench/ipaths_hot.py [--tally target/release/tally] [--top 5] [--root DIR] [--title T]
                        [--function NAME]... PROFILE.tally

Reads `tally paths --top 0 PROFILE` (an interprocedural profile's paths are printed as steps:
`function:bN (file:line)` blocks and `call`, `return`, `(summary call)`, `(restart)`,
`(back/cut edge)` markers; `tally paths --format json` does not carry them yet), keeps the paths
with a `call` or `return` step (they span more than one function), and prints, hottest first,
each path's steps with the source line of each block (consecutive blocks on the same line are
shown once). bench/run uses `parse` and `summary` for its interprocedural table.
"""
import argparse
import os
import re
import subprocess
import sys

HEAD = re.compile(r"^\s*\d+\.\s+(\d+) runs\s+path (\d+) of (.*)$")
BLOCK = re.compile(r"^(.*):b(\d+)(?: \((.*):(\d+)\))?$")
CROSS = ("call", "return")


def parse(text):
    """The paths of `tally paths` text output of an interprocedural profile: a list of dicts
    {count, number, module, steps}; a step is ("block", function, block, file, line) or a marker
    string. Returns (paths, executed) where executed is the number the header states."""
    paths, executed = [], None
    for line in text.splitlines():
        m = re.match(r"^(\d+) interprocedural paths executed", line)
        if m:
            executed = int(m.group(1))
            continue
        m = HEAD.match(line)
        if m:
            paths.append(dict(count=int(m.group(1)), number=m.group(2), module=m.group(3), steps=[]))
            continue
        if paths and line.startswith("        "):
            s = line.strip()
            b = BLOCK.match(s)
            if b and s not in CROSS:
                paths[-1]["steps"].append(("block", b.group(1), int(b.group(2)), b.group(3),
                                           int(b.group(4)) if b.group(4) else None))
            else:
                paths[-1]["steps"].append(s)
    return paths, executed


def functions(p):
    return {s[1] for s in p["steps"] if isinstance(s, tuple)}


def crosses(p):
    """A path that takes a call or return edge: its blocks lie in more than one function."""
    return any(s in CROSS for s in p["steps"])


def summary(paths):
    """Executed paths, those that cross a call, their share of the path runs, the set functions
    the executed paths go through, the most functions one path spans."""
    runs = sum(p["count"] for p in paths)
    cross = [p for p in paths if crosses(p)]
    return dict(executed_paths=len(paths), crossing_paths=len(cross), runs=runs,
                crossing_runs=sum(p["count"] for p in cross),
                functions_on_paths=len(set().union(*[functions(p) for p in paths])) if paths else 0,
                most_functions=max((len(functions(p)) for p in paths), default=0))


def tally_paths(tally, profile):
    r = subprocess.run([tally, "paths", "--top", "0", profile], capture_output=True, text=True)
    if r.returncode != 0:
        raise ValueError("tally paths failed: " + r.stderr.strip()[:300])
    return r.stdout


def source_line(file, line, cache={}):
    if file not in cache:
        try:
            with open(file, errors="replace") as f:
                cache[file] = f.read().splitlines()
        except OSError:
            cache[file] = []
    lines = cache[file]
    return lines[line - 1].strip() if line and 0 < line <= len(lines) else ""


def listing(p, root):
    """A path's steps, one a line: markers as they are, blocks as `function:bN file:line  text`,
    consecutive blocks on the same source line merged."""
    groups = []  # [(fn, [blocks], file, line)] or marker strings
    for s in p["steps"]:
        if not isinstance(s, tuple):
            groups.append(s)
            continue
        _, fn, b, file, line = s
        g = groups[-1] if groups else None
        if isinstance(g, tuple) and (g[0], g[2], g[3]) == (fn, file, line):
            g[1].append(b)
        else:
            groups.append((fn, [b], file, line))
    out = []
    for g in groups:
        if not isinstance(g, tuple):
            out.append(f"    -- {g}")
            continue
        fn, bs, file, line = g
        name = fn + ":" + ",".join(f"b{b}" for b in bs)
        where = f"{os.path.relpath(file, root) if file.startswith(root) else file}:{line}" if file else "?"
        out.append(f"    {name:<28} {where:<34} {source_line(file, line)}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--tally", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                    "target", "release", "tally"))
    ap.add_argument("--top", type=int, default=5, help="crossing paths listed (default 5; 0: all)")
    ap.add_argument("--root", default=None, help="file names are shown relative to this directory")
    ap.add_argument("--title", default=None)
    ap.add_argument("--function", action="append", default=[],
                    help="only paths through this function (repeatable: through any of them)")
    a = ap.parse_args()
    try:
        paths, _ = parse(tally_paths(a.tally, a.profile))
    except (ValueError, OSError) as e:
        print(f"ipaths_hot: {e}", file=sys.stderr)
        return 1
    root = (a.root or os.getcwd()).rstrip("/") + "/"
    s = summary(paths)
    print(f"### {a.title or a.profile}")
    print()
    share = 100 * s["crossing_runs"] / s["runs"] if s["runs"] else 0
    print(f"{s['executed_paths']} interprocedural paths executed ({s['runs']} path runs); "
          f"{s['crossing_paths']} of them cross a call or return ({share:.1f}% of the runs); "
          f"they go through {s['functions_on_paths']} functions, at most {s['most_functions']} in one path.")
    print()
    hot = sorted((p for p in paths if crosses(p) and (not a.function or functions(p) & set(a.function))),
                 key=lambda p: -p["count"])[:a.top or None]
    if a.function:
        print(f"Crossing paths through {', '.join(a.function)}:")
        print()
    for i, p in enumerate(hot, 1):
        print(f"{i}. path {p['number']} of {os.path.relpath(p['module'], root) if p['module'].startswith(root) else p['module']}: "
              f"**{p['count']} runs**, functions {', '.join(sorted(functions(p)))}")
        print()
        print("```")
        print("\n".join(listing(p, root)))
        print("```")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
