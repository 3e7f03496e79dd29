"""Building one program with one variant (cached under target/bench/build/)."""
import glob
import json
import os
import re
import shlex
import shutil
import time

from .common import BENCH, CLANG, GCC, OPT, ROOT, WORK, file_sha, sh, sha, short
from .variants import UNAVAILABLE


class Ctx:
    def __init__(self, args):
        self.args = args
        self.tally = os.path.join(ROOT, "target", "release", "tally")
        self.tool_ids = {}

    def tool_id(self, compiler):
        if compiler not in self.tool_ids:
            if compiler == "tally":
                ident = "tally " + file_sha(self.tally) + " " + sh([CLANG, "--version"]).stdout
            else:
                ident = sh([CLANG if compiler == "clang" else GCC, "--version"]).stdout
            self.tool_ids[compiler] = ident
        return self.tool_ids[compiler]


def prune(done, builds):
    """Delete the build directories of earlier keys of the (program, variant) pairs just built:
    only the current build of each is kept (disk space)."""
    for n, v in done:
        cur = builds.get((n, v), {}).get("dir")
        if not cur:
            continue
        pat = re.compile(re.escape(v) + r"-[0-9a-f]{16}$")
        parent = os.path.join(WORK, "build", n)
        for d in os.listdir(parent):
            if pat.match(d) and os.path.join(parent, d) != cur:
                shutil.rmtree(os.path.join(parent, d), ignore_errors=True)


def variant_flags(var, profiles):
    out = []
    for w in shlex.split(var["flags"]):
        for m in re.findall(r"\{profile:([\w-]+)\}", w):
            w = w.replace("{profile:%s}" % m, profiles[m])
        out.append(w)
    return out


def compiler_cmd(ctx, var):
    if var["compiler"] == "tally":
        return [ctx.tally, "cc", "--tally-verbose"]
    return [CLANG if var["compiler"] == "clang" else GCC]


STAT_RE = re.compile(r"(\d+) (functions|skipped|with measured weights|blocks|edges|counters|tagged|on split edges|shadow frames|promoted counters|loops)")
# path mode adds: "<file>: H functions count paths in a hash table, F use edge counters instead"
PATH_STAT_RE = re.compile(r": (\d+) functions count paths in a hash table, (\d+) use edge counters instead")
# --tally-sese=on adds: "N SESE counters (T trip counts, S found by ScalarEvolution; C candidates
# in L loops, U unprofitable)"
SESE_STAT_RE = re.compile(r"(\d+) SESE counters \((\d+) trip counts, (\d+) found by ScalarEvolution; "
                          r"(\d+) candidates in (\d+) loops, (\d+) unprofitable\)")


def build(ctx, p, var, profiles):
    """Build program p with variant var; cached under target/bench/build/ by a hash of the
    compiler (tally's binary), flags and source contents. Returns a result dict."""
    flags = variant_flags(var, profiles)
    key_parts = [ctx.tool_id(var["compiler"]), var["compiler"], flags, OPT, p["cflags"], p["ldflags"],
                 [(s, file_sha(s)) for s in p["sources"]],
                 [(f, file_sha(f)) for f in sorted(glob.glob(os.path.join(BENCH, "common", "*")))
                  if any(os.path.join(BENCH, "common") in c for c in p["cflags"])],
                 file_sha(os.path.join(p["here"], "BUILD")),
                 [file_sha(profiles[m]) for m in re.findall(r"\{profile:([\w-]+)\}", var["flags"])]]
    key = sha(json.dumps(key_parts))[:16]
    out = os.path.join(WORK, "build", p["name"], f"{var['name']}-{key}")
    exe, cg, meta = os.path.join(out, p["name"]), os.path.join(out, p["name"] + ".cg"), os.path.join(out, "build.json")
    if os.path.exists(meta):
        with open(meta) as f:
            res = json.load(f)
        if res["status"] == "unavailable" or (res["status"] == "ok" and os.path.exists(exe)):
            res["cached"] = True
            return res  # (a failed build is tried again)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cc = compiler_cmd(ctx, var)
    stats, logs, objs, warnings = {}, [], [], []
    # SESE builds log the edges their counters measure (crates/llvm/src/counters/sese.rs), so that the
    # increments they removed can be read off the profile's report.
    sese_edges = os.path.join(out, "sese-edges.tsv")
    # (edge mode has them by default: every edge build but --tally-sese=off)
    sese = "--tally-mode=edge" in flags and "--tally-sese=off" not in flags
    env = dict(os.environ, TALLY_SESE_EDGES=sese_edges) if sese else None
    t0 = time.time()

    def fail(status, r, what):
        first = next((l for l in r.stderr.splitlines() if "error" in l.lower()), r.stderr.strip()[:300])
        res = dict(status=status, note=short(f"{what}: {first.strip()}"), key=key, dir=out)
        with open(os.path.join(out, "build.log"), "w") as f:
            f.write("\n".join(logs) + "\n" + r.stderr)
        with open(meta, "w") as f:
            json.dump(res, f)
        return res

    for i, s in enumerate(p["sources"]):
        obj = os.path.join(out, f"{i:03d}-{os.path.splitext(os.path.basename(s))[0]}.o")
        cmd = cc + flags + OPT + p["cflags"] + ["-c", s, "-o", obj]
        r = sh(cmd, cwd=out, env=env)
        logs.append(shlex.join(cmd))
        if r.returncode != 0:
            unavailable = var["compiler"] == "tally" and UNAVAILABLE.search(r.stderr)
            return fail("unavailable" if unavailable else "failed", r, "compile " + os.path.basename(s))
        for line in r.stderr.splitlines():
            if var["compiler"] == "tally" and line.startswith("tally: warning"):
                warnings.append(line[len("tally: "):].strip()[:300])
            if var["compiler"] == "tally" and re.search(r"\]: \d+ functions", line):
                m = SESE_STAT_RE.search(line)
                if m:
                    for n, what in zip(m.groups(), ("SESE counters", "SESE trip counts", "SESE by SCEV",
                                             "SESE candidates", "natural loops", "SESE unprofitable")):
                        stats[what] = stats.get(what, 0) + int(n)
                    line = line[:m.start()] + line[m.end():]
                for n, what in STAT_RE.findall(line.split("]:", 1)[1]):
                    stats[what] = stats.get(what, 0) + int(n)
            m = PATH_STAT_RE.search(line) if var["compiler"] == "tally" else None
            if m:
                stats["hash table"] = stats.get("hash table", 0) + int(m.group(1))
                stats["edge counters"] = stats.get("edge counters", 0) + int(m.group(2))
        objs.append(obj)
    cmd = cc + flags + OPT + objs + ["-o", exe] + p["ldflags"]
    r = sh(cmd, cwd=out)
    logs.append(shlex.join(cmd))
    if r.returncode != 0:
        return fail("failed", r, "link")
    # The copy run under valgrind: valgrind 3.19 cannot read clang-19's DWARF 5 and trips over
    # coverage-mapping sections, neither of which changes a single instruction, so drop them.
    r = sh(["objcopy", "--strip-debug", "--remove-section=__llvm_covfun",
            "--remove-section=__llvm_covmap", exe, cg])
    if r.returncode != 0:
        return fail("failed", r, "objcopy")
    res = dict(status="ok", key=key, dir=out, exe=exe, cg=cg, stats=stats,
               build_seconds=round(time.time() - t0, 1), flags=flags)
    if env is not None:
        res["sese_edges"] = sese_edges if os.path.exists(sese_edges) else None
    if warnings:
        res["note"] = f"{len(warnings)} tally warning(s), first: {warnings[0]}"
    with open(os.path.join(out, "build.log"), "w") as f:
        f.write("\n".join(logs) + "\n")
    with open(meta, "w") as f:
        json.dump(res, f)
    return res
