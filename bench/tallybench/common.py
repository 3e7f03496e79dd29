"""Paths, tools and the helpers every part uses: logging, subprocesses, hashes."""
import hashlib
import os
import re
import subprocess
import sys
import time


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "testdata", "bench")
WORK = os.path.join(ROOT, "target", "bench")
CLANG, GCC = "clang-19", "gcc"
PROFDATA, GCOV_DUMP = "llvm-profdata-19", "gcov-dump"
OPT = ["-O2", "-g"]


T0 = time.time()


def log(msg):
    t = int(time.time() - T0)
    print(f"[{t // 60:3d}:{t % 60:02d}] {msg}", file=sys.stderr, flush=True)


def sh(cmd, **kw):
    if "stdout" in kw:
        return subprocess.run(cmd, stderr=subprocess.PIPE, text=True, **kw)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def callgrind_total(stderr):
    """The instructions callgrind's summary line ("Collected : N") reports in a run's stderr
    (text or bytes), or None."""
    if isinstance(stderr, bytes):
        stderr = stderr.decode(errors="replace")
    m = re.search(r"Collected : (\d+)", stderr)
    return int(m.group(1)) if m else None


def callgrind(cmd, cwd=None, env=None, ok=(0,)):
    """Instructions callgrind counts in one run of cmd, its output discarded. RuntimeError when
    the run exits with a status not in ok or callgrind reports no total."""
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
                       cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    n = callgrind_total(r.stderr)
    if n is None or r.returncode not in ok:
        tail = r.stderr.decode(errors="replace")[-1500:]
        raise RuntimeError(f"callgrind {' '.join(map(str, cmd))[:200]} (exit {r.returncode}):\n{tail}")
    return n


def short(msg, n=400):
    """An error message for the report: one line, registry and repository prefixes dropped."""
    msg = re.sub(r"/\S*?/registry/src/[^/]+/", "", " ".join(msg.split())).replace(ROOT + "/", "")
    return msg if len(msg) <= n else msg[:n] + "…"


def sha(data):
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()


def file_sha(path, cache={}):
    st = os.stat(path)
    k = (path, st.st_size, st.st_mtime_ns)
    if k not in cache:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        cache[k] = h.hexdigest()
    return cache[k]


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"
