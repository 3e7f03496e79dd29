#!/usr/bin/env python3
"""Measures how each way of ending a process affects the profile of tally, clang
(-fprofile-instr-generate with coverage mapping, and -fprofile-generate) and gcc --coverage,
and writes the table into docs/reliability.md between its markers (scripts/reliability.sh).

Ground truth: rel.c's `T();` lines count their own executions in a MAP_SHARED file mapping
(rel_truth.h). A tool's profile is *exact* when its count of every marked line equals that
count (gcc: gcov line counts, no negative counts; clang: llvm-cov line counts); for tally,
when `tally report --format json` of the `edge` build equals the `edges-naive` oracle build's
for every block and edge of every function, and the oracle agrees with the marked lines.

Usage: measure.py TALLY WORKDIR DOC
"""
import glob
import json
import os
import platform
import re
import shutil
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "rel.c")
LIB_SRC = os.path.join(HERE, "rellib.c")
EXEC_SRC = os.path.join(HERE, "exec_target.c")
TALLY_OPT = os.environ.get("REL_TALLY_OPT", "-O2")

# (case argument, row label)
CASES = [
    ("return", "return from `main`"),
    ("exit", "`exit(3)`"),
    ("_exit", "`_exit(3)`"),
    ("quick_exit", "`quick_exit(3)`"),
    ("abort", "`abort()`, no handler"),
    ("abort-handler", "`abort()`, SIGABRT handler calls `exit(4)`"),
    ("segv", "SIGSEGV (store through NULL)"),
    ("fpe", "SIGFPE (integer division by zero)"),
    ("term-blocked", "SIGTERM while blocked in `pause()` (sent by the harness)"),
    ("term-computing", "SIGTERM while computing (`kill(getpid(), SIGTERM)` inside the loops)"),
    ("kill", "SIGKILL (`kill(getpid(), SIGKILL)` inside the loops)"),
    ("kill-continuous", "SIGKILL, continuous mode (tally `TALLY_CONTINUOUS=1`; clang `%c` in `LLVM_PROFILE_FILE`, built with `-mllvm -runtime-counter-relocation`)"),
    ("exec", "`execl` of another (uninstrumented) program: pre-exec counts saved?"),
    ("fork", "`fork`: child works on and calls `exit(0)`; parent waits, works on, returns"),
    ("dlclose", "`dlclose` of an instrumented library before exit: its counts kept?"),
    ("threads", "`exit(0)` while one thread waits in `pthread_cond_wait` and one spins"),
]

TRUTH_HDR, TRUTH_FILES, TRUTH_LINES, TRUTH_ROLES = 64, 2, 512, 3


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def must(cmd, **kw):
    r = sh(cmd, **kw)
    if r.returncode != 0:
        sys.exit(f"reliability: {' '.join(cmd)} failed:\n{r.stderr}")
    return r


def marked_lines(path):
    """Line numbers (1-based) of the lines that count themselves with `T();`."""
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if "T();" in line and "`T();`" not in line and "#define" not in line:
                out.append(n)
    return out


MARKS = {SRC: marked_lines(SRC), LIB_SRC: marked_lines(LIB_SRC)}
FILE_INDEX = {SRC: 0, LIB_SRC: 1}


def read_truth(path):
    data = open(path, "rb").read()
    w = struct.unpack(f"{len(data) // 8}Q", data)
    pids = {role: w[1 + role] for role in range(TRUTH_ROLES)}

    def count(roles, src, line):
        f = FILE_INDEX[src]
        return sum(w[TRUTH_HDR + (r * TRUTH_FILES + f) * TRUTH_LINES + line] for r in roles)

    return pids, count


# ---------------------------------------------------------------- builds


def build_all(tally, work):
    b = os.path.join(work, "build")
    shutil.rmtree(b, ignore_errors=True)
    os.makedirs(b)
    inc = ["-I", HERE]
    must(["gcc", "-O0", EXEC_SRC, "-o", os.path.join(b, "exec_target")])
    # "cont": clang's continuous mode (`%c`) needs runtime counter relocation on Linux
    for tool, flags in (("clang", ["-fprofile-instr-generate", "-fcoverage-mapping"]), ("irpgo", ["-fprofile-generate"])):
        d = os.path.join(b, tool, "cont")
        os.makedirs(d)
        fl = ["-O0", "-g", "-pthread", "-mllvm", "-runtime-counter-relocation"] + flags
        must(["clang-19"] + fl + inc + [SRC, "-o", os.path.join(d, "rel"), "-ldl"])
        must(["clang-19"] + fl + inc + ["-fPIC", "-shared", LIB_SRC, "-o", os.path.join(d, "librel.so")])
    for var, atomic in (("std", False), ("atomic", True)):
        # gcc --coverage: objects compiled separately so the .gcno/.gcda sit next to them
        d = os.path.join(b, "gcc", var)
        os.makedirs(d)
        fl = ["-O0", "-g", "--coverage", "-pthread"] + (["-fprofile-update=atomic"] if atomic else [])
        must(["gcc"] + fl + inc + ["-c", SRC, "-o", os.path.join(d, "rel.o")])
        must(["gcc", "--coverage", "-pthread", os.path.join(d, "rel.o"), "-o", os.path.join(d, "rel"), "-ldl"])
        must(["gcc"] + fl + inc + ["-fPIC", "-c", LIB_SRC, "-o", os.path.join(d, "rellib.o")])
        must(["gcc", "--coverage", "-shared", os.path.join(d, "rellib.o"), "-o", os.path.join(d, "librel.so")])
        for tool, flags in (("clang", ["-fprofile-instr-generate", "-fcoverage-mapping"]), ("irpgo", ["-fprofile-generate"])):
            d = os.path.join(b, tool, var)
            os.makedirs(d, exist_ok=True)
            fl = ["-O0", "-g", "-pthread"] + flags + (["-fprofile-update=atomic"] if atomic else [])
            must(["clang-19"] + fl + inc + [SRC, "-o", os.path.join(d, "rel"), "-ldl"])
            must(["clang-19"] + fl + inc + ["-fPIC", "-shared", LIB_SRC, "-o", os.path.join(d, "librel.so")])
        for mode in ("edge", "edges-naive"):
            d = os.path.join(b, mode, var)
            os.makedirs(d)
            fl = [f"--tally-mode={mode}", TALLY_OPT, "-g", "-pthread"] + (["--tally-atomic"] if atomic else [])
            env = dict(os.environ)
            env.pop("TALLY_MODE", None)
            must([tally, "cc"] + fl + inc + [SRC, "-o", os.path.join(d, "rel"), "-ldl"], env=env)
            must([tally, "cc"] + fl + inc + ["-fPIC", "-shared", LIB_SRC, "-o", os.path.join(d, "librel.so")], env=env)
    return b


# ---------------------------------------------------------------- running


def run_case(bdir, tool, case, work, extra_env):
    """Runs one case of one build in a fresh directory; returns (run dir, exit status text)."""
    var = "atomic" if case == "threads" else "std"
    if case == "kill-continuous" and tool in ("clang", "irpgo"):
        var = "cont"
    d = os.path.join(bdir, tool, var)
    rd = os.path.join(work, "run", tool, case)
    shutil.rmtree(rd, ignore_errors=True)
    os.makedirs(rd)
    if tool == "gcc":
        for g in glob.glob(os.path.join(d, "*.gcda")):
            os.unlink(g)
    env = dict(os.environ)
    for k in ("TALLY_PROFILE", "TALLY_CONTINUOUS", "LLVM_PROFILE_FILE", "GCOV_PREFIX", "GCOV_PREFIX_STRIP"):
        env.pop(k, None)
    env["REL_TRUTH"] = os.path.join(rd, "truth")
    env.update(extra_env(rd))
    arg = "kill" if case == "kill-continuous" else case
    p = subprocess.Popen(
        [os.path.join(d, "rel"), arg, os.path.join(d, "librel.so"), os.path.join(bdir, "exec_target")],
        cwd=rd, env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(rd, "stderr"), "w"),
        start_new_session=True,
    )
    try:
        if case == "term-blocked":
            deadline = time.time() + 20
            while time.time() < deadline:
                try:
                    with open(env["REL_TRUTH"], "rb") as f:
                        f.seek(8 * 8)
                        if struct.unpack("Q", f.read(8) or b"\0" * 8)[0]:
                            break
                except (FileNotFoundError, struct.error):
                    pass
                time.sleep(0.01)
            p.send_signal(signal.SIGTERM)
        st = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        st = "timeout"
    if isinstance(st, int):
        st = f"signal {signal.Signals(-st).name}" if st < 0 else f"status {st}"
    return rd, st, d


# ---------------------------------------------------------------- per-tool evaluation


def lines_wrong(got, truth_of, roles):
    """[(file, line, got, truth)] for marked lines whose count differs."""
    bad = []
    for src, lines in MARKS.items():
        for ln in lines:
            t = truth_of(roles, src, ln)
            g = got.get((src, ln), 0)
            if g != t:
                bad.append((os.path.basename(src), ln, g, t))
    return bad


# What a fork profile can hold: sums of the ground truth of the roles (0 = before the fork,
# 1 = the parent after it, 2 = the child), a role listed twice counted twice.
FORK_SUMS = [
    ((0, 1), "pre-fork + parent"),
    ((0, 2), "pre-fork + child"),
    ((2,), "the child's own counts"),
    ((1,), "the parent's counts after the fork"),
    ((0, 1, 2), "pre-fork + parent + child (the whole run)"),
    ((0, 1, 0, 2), "pre-fork twice + parent + child"),
]


def closest_sum(n_wrong):
    """Names the FORK_SUMS entry with the fewest wrong marked lines (n_wrong(roles))."""
    best = min(FORK_SUMS, key=lambda rs: n_wrong(rs[0]))
    k = n_wrong(best[0])
    return best[1] + ("" if k == 0 else f" (closest; {k} marked lines differ)")


def nmarks():
    return sum(len(v) for v in MARKS.values())


def describe_wrong(bad):
    ex = ", ".join(f"{f}:{ln} says {g}, truth {t}" for f, ln, g, t in bad[:3])
    return f"{len(bad)} of {nmarks()} marked lines wrong ({ex}{', ...' if len(bad) > 3 else ''})"


def eval_gcc(case, rd, st, d, notes):
    gcda = os.path.join(d, "rel.gcda")
    libgcda = os.path.join(d, "rellib.gcda")
    if not os.path.exists(gcda):
        return "not written"
    got, neg = {}, []
    for src, obj in ((SRC, "rel.o"), (LIB_SRC, "rellib.o")):
        r = sh(["gcov", "-t", "-o", os.path.join(d, obj), src], cwd=d)
        cur = None
        for line in r.stdout.splitlines():
            m = re.match(r"\s*([^:]+):\s*(\d+):(.*)", line)
            if not m:
                continue
            cnt, ln, text = m.group(1).strip().rstrip("*"), int(m.group(2)), m.group(3)
            if ln == 0:
                if text.startswith("Source:"):
                    cur = text[len("Source:"):]
                continue
            if cur is None or os.path.basename(cur) != os.path.basename(src):
                continue
            if cnt in ("#####", "====="):
                got[(src, ln)] = 0
            elif re.fullmatch(r"-?\d+", cnt):
                v = int(cnt)
                got[(src, ln)] = v
                if v < 0 or v >= 1 << 62:
                    neg.append(ln)
        for w in r.stderr.splitlines():
            if re.search(r"negative|corrupt|overflow|mismatch", w, re.I):
                neg.append(w.strip())
    pids, truth = read_truth(os.path.join(rd, "truth"))
    bad = lines_wrong(got, truth, range(TRUTH_ROLES))
    extra = ""
    if case == "dlclose":
        extra = "; library's .gcda " + ("written" if os.path.exists(libgcda) else "NOT written")
    if case == "fork":
        notes.append("gcc: parent and child merge into one .gcda (libgcov's fork wrapper resets the "
                     "child's counters); compared with the sum over both processes")
    if neg:
        notes.append(f"gcc: gcov reports inconsistent counts: {neg[:3]}")
    if not bad and not neg:
        return "written, exact" + extra
    how = describe_wrong(bad) if bad else "gcov reports negative/inconsistent counts"
    return f"written, not exact ({how}){extra}"


def llvm_line_counts(profiles, d, case, out):
    pd = out + ".profdata"
    r = sh(["llvm-profdata-19", "merge", "-o", pd] + profiles)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "merge failed"
    cmd = ["llvm-cov-19", "export", "-format=lcov", "-instr-profile", pd, os.path.join(d, "rel")]
    if case == "dlclose":
        cmd += ["-object", os.path.join(d, "librel.so")]
    r = sh(cmd)
    if r.returncode != 0:
        return None, r.stderr.strip()
    got, cur = {}, None
    for line in r.stdout.splitlines():
        if line.startswith("SF:"):
            cur = os.path.realpath(line[3:])
        elif line.startswith("DA:") and cur in MARKS:
            ln, c = line[3:].split(",")[:2]
            got[(cur, int(ln))] = got.get((cur, int(ln)), 0) + int(c)
    return got, None


def process_profiles(rd, ext):
    """{pid: [files]} of the profiles a run left (named %p...)."""
    by = {}
    for f in sorted(glob.glob(os.path.join(rd, "*" + ext))):
        if os.path.getsize(f) == 0:
            continue
        m = re.match(r"(\d+)", os.path.basename(f))
        by.setdefault(int(m.group(1)) if m else -1, []).append(f)
    return by


def role_of(pids, pid):
    """0 = the only process, 1 = the parent of a fork (same pid as 0), 2 = the fork child."""
    if pids.get(2) and pid == pids[2]:
        return 2
    if pids.get(1) and pid == pids[1]:
        return 1
    return 0 if pid == pids[0] else None


def eval_clang(case, rd, st, d, notes):
    by = process_profiles(rd, ".profraw")
    if not by:
        return "not written"
    pids, truth = read_truth(os.path.join(rd, "truth"))
    allp = [f for fs in by.values() for f in fs]
    got, err = llvm_line_counts(allp, d, case, os.path.join(rd, "all"))
    if got is None:
        return f"written, unreadable ({err})"
    bad = lines_wrong(got, truth, range(TRUTH_ROLES))
    extra = ""
    if case == "dlclose":
        libp = [f for f in allp if sh(["llvm-profdata-19", "show", "--all-functions", f]).stdout.find("rel_lib_work") >= 0]
        extra = "; library's counts " + ("written" if libp else "NOT written")
    if case == "fork":
        detail = []
        for pid, fs in sorted(by.items(), key=lambda kv: role_of(pids, kv[0]) or 0):
            role = role_of(pids, pid)
            g, _ = llvm_line_counts(fs, d, case, os.path.join(rd, f"p{pid}"))
            if g is not None:
                name = {1: "the parent's pid", 2: "the child's pid"}.get(role, f"pid {pid}")
                detail.append(f"the file named with {name} holds "
                              + closest_sum(lambda roles: len(lines_wrong(g, truth, roles))))
        notes.append(f"clang, `LLVM_PROFILE_FILE=%p-%m.profraw`: {len(by)} file(s); " + "; ".join(detail)
                     + "; the table cell compares the merge of all files with the whole run")
    if not bad:
        return "written, exact" + extra
    return f"written, not exact ({describe_wrong(bad)}){extra}"


def eval_irpgo(case, rd, st, d, notes):
    by = process_profiles(rd, ".profraw")
    if not by:
        return "not written"
    allp = [f for fs in by.values() for f in fs]
    r = sh(["llvm-profdata-19", "merge", "-o", os.path.join(rd, "all.profdata")] + allp)
    if r.returncode != 0:
        why = r.stderr.strip().splitlines()[0] if r.stderr.strip() else f"status {r.returncode}"
        return f"written, unreadable (`llvm-profdata merge`: {os.path.basename(why).replace('`', chr(39))})"
    what = "written"
    if case == "fork":
        what += f" ({len(by)} file(s) for the 2 processes)"
    if case == "dlclose":
        has = sh(["llvm-profdata-19", "show", "--all-functions", os.path.join(rd, "all.profdata")]).stdout.find("rel_lib_work") >= 0
        what += "; library's counts " + ("written" if has else "NOT written")
    return what


def tally_report(tally, profile):
    r = sh([tally, "report", "--format", "json", profile])
    try:
        j = json.loads(r.stdout)
    except json.JSONDecodeError:
        j = None
    return r.returncode, j, r.stderr.strip()


def fn_counts(rep):
    m = {}
    for f in rep["functions"]:
        key = (f["module"], f["name"], f["cfg_hash"])
        m[key] = (
            f.get("inconsistent"),
            [b["count"] for b in f["blocks"]],
            [(e["from"], e["to"], e["kind"], e["count"]) for e in f["edges"]],
        )
    return m


# Per case: how many marked lines the oracle's blocks locate (for the summary under the table).
LOCATED = {}

# Functions whose counts differ from run to run by design (the thread spinning at exit).
NONDETERMINISTIC = {"threads": {"spin_forever"}}


def compare_tally(case, edge, naive):
    """Returns (interrupted names, differing names, compared functions), as crates/cli/tests/e2e/
    support/mod.rs assert_same_counts compares: every block and edge count of every function."""
    ce, cn = fn_counts(edge), fn_counts(naive)
    skip = NONDETERMINISTIC.get(case, set())
    interrupted, differ, n = [], [], 0
    for key in sorted(set(ce) | set(cn)):
        name = key[1]
        if name in skip:
            continue
        if key in ce and ce[key][0]:
            interrupted.append(name)
            continue
        n += 1
        if key not in ce or key not in cn or ce[key][1:] != cn[key][1:]:
            differ.append(name)
    return interrupted, differ, n


def oracle_vs_truth(naive, truth, roles):
    """Marked lines located in the oracle's blocks (block line == marked line) whose greatest
    count differs from the hand counter: (located, [wrong])."""
    by_line = {}
    for f in naive["functions"]:
        for b in f["blocks"]:
            if b.get("file") and b["count"] is not None:
                k = (os.path.realpath(b["file"]), b["line"])
                by_line[k] = max(by_line.get(k, 0), b["count"])
    located, wrong = 0, []
    for src, lines in MARKS.items():
        for ln in lines:
            if (src, ln) in by_line:
                located += 1
                t = truth(roles, src, ln)
                if by_line[(src, ln)] != t:
                    wrong.append(f"{os.path.basename(src)}:{ln} oracle {by_line[(src, ln)]}, truth {t}")
    return located, wrong


def eval_tally(tally, case, runs, notes):
    (rde, ste, _), (rdn, stn, _) = runs
    pe, pn = process_profiles(rde, ".tally"), process_profiles(rdn, ".tally")
    if not pe:
        return "not written"
    pids_e, truth_e = read_truth(os.path.join(rde, "truth"))
    pids_n, truth_n = read_truth(os.path.join(rdn, "truth"))
    roles_of_profile = {0: (0,), 1: (0, 1), 2: (0, 2)}
    parts, exact_all = [], True
    for pid, fs in sorted(pe.items(), key=lambda kv: role_of(pids_e, kv[0]) or 0):
        role = role_of(pids_e, pid)
        who = {0: "", 1: "parent: ", 2: "child: "}.get(role, f"pid {pid}: ")
        npid = [p for p in pn if role_of(pids_n, p) == role]
        rc, rep, err = tally_report(tally, fs[0])
        if rep is None:
            parts.append(f"{who}written, unreadable ({err.splitlines()[-1] if err else rc})")
            exact_all = False
            continue
        if not npid:
            parts.append(f"{who}written; the edges-naive oracle wrote no profile, not compared")
            exact_all = False
            continue
        nrc, nrep, nerr = tally_report(tally, pn[npid[0]][0])
        if nrep is None:
            parts.append(f"{who}written; oracle profile unreadable ({nerr})")
            exact_all = False
            continue
        interrupted, differ, n = compare_tally(case, rep, nrep)
        roles = roles_of_profile.get(role, (0,))
        if case == "fork":
            roles = FORK_SUMS[0][0] if role != 2 else FORK_SUMS[1][0]
        located, wrong = oracle_vs_truth(nrep, truth_n, roles)
        LOCATED[case] = max(LOCATED.get(case, 0), located)
        if wrong:
            notes.append(f"tally {who.strip(': ') or 'profile'}: the edges-naive oracle disagrees with the hand counters: "
                         + "; ".join(wrong[:3]))
        if case == "fork":
            notes.append(f"tally: the {'child' if role == 2 else 'parent'}'s profile (`%p`) holds "
                         + closest_sum(lambda rs: len(oracle_vs_truth(nrep, truth_n, rs)[1]))
                         + " (marked lines of the oracle's profile)")
        if case in NONDETERMINISTIC:
            notes.append("tally: " + ", ".join(sorted(NONDETERMINISTIC[case]))
                         + " (the spinning loop, whose counts differ from run to run) is not compared with the oracle")
        bad_oracle = [f["name"] for f in nrep["functions"] if f.get("inconsistent")]
        nrc_note = f"; the oracle's report exits {nrc}" if nrc != 0 else ""
        if bad_oracle and not differ:
            nrc_note += " (inconsistent: " + ", ".join(bad_oracle) + ")"
        if rc != 0:
            # The profile-level flags (fatal signal 6, raced 5, unfinished 4) or inconsistent
            # functions (3): the edge report does not show its counts as exact.
            nrc_note += f"; edge's report exits {rc}"
        if differ:
            exact_all = False
            unflagged = ("edge reports counts without flagging it" if rc == 0 else
                         "edge's counts for it balance, but its report flags the profile")
            named = [f"{d} (edges-naive finds it inconsistent, {unflagged})"
                     if d in bad_oracle else d for d in differ]
            parts.append(f"{who}written, not exact ({len(differ)} of {n} functions differ from edges-naive: "
                         + ", ".join(named[:4]) + (", ..." if len(differ) > 4 else "") + ")" + nrc_note)
        elif interrupted:
            exact_all = False
            parts.append(f"{who}written, exact except {len(interrupted)} interrupted function(s) ("
                         + ", ".join(interrupted) + ")" + nrc_note)
        elif wrong:
            exact_all = False
            parts.append(f"{who}written, equal to edges-naive, but {len(wrong)} of {located} located marked lines disagree with the truth")
        else:
            parts.append(f"{who}written, exact{nrc_note}")
        if located == 0:
            notes.append(f"tally {who.strip(': ') or 'profile'}: no marked line is the first line of a block; only the oracle comparison applies")
    if case == "fork":
        got_roles = {role_of(pids_e, p) for p in pe}
        for role, name in ((1, "parent"), (2, "child")):
            if role not in got_roles:
                parts.append(f"{name}: not written")
    if case == "dlclose" and pe:
        rc, rep, _ = tally_report(tally, list(pe.values())[0][0])
        has = rep is not None and any(f["name"] == "rel_lib_work" for f in rep["functions"])
        parts.append("library's counts " + ("written" if has else "NOT written"))
    del exact_all
    return "; ".join(parts)


# ---------------------------------------------------------------- table


def versions(tally):
    def first(cmd):
        r = sh(cmd)
        return (r.stdout or r.stderr).strip().splitlines()[0] if r.returncode == 0 else "?"

    def pkg(p):
        r = sh(["dpkg-query", "-W", "-f=${Version}", p])
        return r.stdout.strip() if r.returncode == 0 else "?"

    osr = "?"
    if os.path.exists("/etc/os-release"):
        for line in open("/etc/os-release"):
            if line.startswith("PRETTY_NAME="):
                osr = line.split("=", 1)[1].strip().strip('"')
    libc = first(["ldd", "--version"])
    git = sh(["git", "-C", HERE, "rev-parse", "--short", "HEAD"]).stdout.strip() or "?"
    return [
        f"{osr}, kernel {platform.release()}, {platform.machine()}, {os.cpu_count()} CPUs; {libc}",
        f"{first([tally, '--version'])} (commit {git}, `tally cc {TALLY_OPT} -g`); "
        f"{first(['clang-19', '--version'])}; {first(['gcc', '--version'])}",
        f"packages: clang-19 {pkg('clang-19')}, libclang-rt-19-dev {pkg('libclang-rt-19-dev')}, "
        f"llvm-19 {pkg('llvm-19')}, gcc-12 {pkg('gcc-12')}",
    ]


def main():
    tally, work, doc = sys.argv[1:4]
    tally = os.path.abspath(tally)
    work = os.path.abspath(work)
    only = sys.argv[4].split(",") if len(sys.argv) > 4 else None
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    bdir = build_all(tally, work)
    rows = []
    footnotes = []
    for case, label in CASES:
        if only and case not in only:
            continue
        notes = []
        cont = case == "kill-continuous"
        tally_env = lambda rd: dict(TALLY_PROFILE=os.path.join(rd, "%p.tally"), **({"TALLY_CONTINUOUS": "1"} if cont else {}))
        llvm_env = lambda rd: dict(LLVM_PROFILE_FILE=os.path.join(rd, ("%c" if cont else "") + "%p-%m.profraw"))
        te = run_case(bdir, "edge", case, work, tally_env)
        tn = run_case(bdir, "edges-naive", case, work, tally_env)
        cells = [eval_tally(tally, case, (te, tn), notes)]
        ce = run_case(bdir, "clang", case, work, llvm_env)
        cells.append(eval_clang(case, *ce, notes))
        ie = run_case(bdir, "irpgo", case, work, llvm_env)
        cells.append(eval_irpgo(case, *ie, notes))
        if cont:
            cells.append("n/a (no continuous mode)")
        else:
            ge = run_case(bdir, "gcc", case, work, lambda rd: {})
            cells.append(eval_gcc(case, *ge, notes))
        sts = {te[1], tn[1], ce[1], ie[1]} | ({ge[1]} if not cont else set())
        status = ", ".join(sorted(sts))
        for stderr_dir in (te[0], ce[0]):
            err = open(os.path.join(stderr_dir, "stderr")).read().strip()
            if err:
                notes.append(f"stderr of the {'tally' if stderr_dir == te[0] else 'clang'} build: `"
                             + err.splitlines()[0][:160].replace("`", "'") + "`")
        marks = []
        for n in dict.fromkeys(notes):
            footnotes.append(n)
            marks.append(f"[^{len(footnotes)}]")
        rows.append(f"| {label} {''.join(marks)} | {status} | " + " | ".join(cells) + " |")
        print(f"reliability: {case}: " + " | ".join(cells), file=sys.stderr)
    out = [
        "| how the process ends | exit | tally (`edge` vs `edges-naive`) | clang `-fprofile-instr-generate -fcoverage-mapping` | clang `-fprofile-generate` (written only) | gcc `--coverage` |",
        "|---|---|---|---|---|---|",
    ] + rows + [""]
    out += [f"[^{i}]: {n}" for i, n in enumerate(footnotes, 1)]
    out += ["", f"{nmarks()} marked lines: " + ", ".join(f"{len(v)} in `{os.path.basename(k)}`" for k, v in MARKS.items()) + "."]
    if LOCATED:
        out[-1] += (" The tally oracle's blocks start at (and so check) "
                    + ", ".join(f"{n} in `{c}`" for c, n in LOCATED.items()) + " of them.")
    out += ["", f"Measured on {time.strftime('%Y-%m-%d')} in {time.time() - t0:.0f} s:", ""]
    out += [f"- {v}" for v in versions(tally)]
    table = "\n".join(out)
    begin, end = "<!-- reliability:begin -->", "<!-- reliability:end -->"
    text = open(doc).read() if os.path.exists(doc) else f"{begin}\n{end}\n"
    if begin not in text or end not in text:
        sys.exit(f"reliability: {doc} lacks the markers {begin} / {end}")
    i, j = text.index(begin) + len(begin), text.index(end)
    if only:
        print(table)
        return
    with open(doc, "w") as f:
        f.write(text[:i] + "\n" + table + "\n" + text[j:])
    print(f"reliability: wrote {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
