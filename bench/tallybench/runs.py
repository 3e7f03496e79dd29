"""Running a build: a scratch directory per run, where every profiling runtime writes."""
import os
import shutil
import subprocess
import tempfile
import time

from .common import WORK


def run_env(scratch, extra=None):
    env = dict(os.environ)
    for k in ("TALLY_MODE", "TALLY_VERBOSE", "TALLY_PROFILE", "TALLY_TRACE", "TALLY_TRACE_COMPRESS", "LLVM_PROFILE_FILE",
              "GCOV_PREFIX", "GCOV_PREFIX_STRIP"):
        env.pop(k, None)
    env.update(TALLY_PROFILE=os.path.join(scratch, "prof.tally"),
               TALLY_TRACE=os.path.join(scratch, "prof.trace"),
               LLVM_PROFILE_FILE=os.path.join(scratch, "prof.profraw"),
               GCOV_PREFIX=scratch, GCOV_PREFIX_STRIP="99")
    env.update(extra or {})
    return env


def run(cmd, timeout, keep=None, extra=None):
    """Run cmd in a fresh scratch directory where every profiling runtime writes its profile.
    Returns (wall seconds, user+sys seconds, exit status, stdout, stderr, scratch or None)."""
    scratch = tempfile.mkdtemp(prefix="run-", dir=os.path.join(WORK, "scratch"))
    out, err = os.path.join(scratch, ".stdout"), os.path.join(scratch, ".stderr")
    with open(out, "wb") as fo, open(err, "wb") as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, cwd=scratch, env=run_env(scratch, extra))
        try:
            _, status, ru = os.wait4(proc.pid, 0) if timeout is None else wait_timeout(proc, timeout)
        finally:
            proc.returncode = 0
        wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status) if status is not None else "timeout"
    with open(out, "rb") as f:
        stdout = f.read().decode(errors="replace")
    with open(err, "rb") as f:
        stderr = f.read().decode(errors="replace")
    cpu = ru.ru_utime + ru.ru_stime if ru else None
    if keep is None:
        shutil.rmtree(scratch, ignore_errors=True)
        scratch = None
    return wall, cpu, code, stdout, stderr, scratch


def wait_timeout(proc, timeout):
    deadline = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            return pid, status, ru
        if time.monotonic() > deadline:
            proc.kill()
            os.wait4(proc.pid, 0)
            return proc.pid, None, None
        time.sleep(0.002)
