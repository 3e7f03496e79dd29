"""What the stand-alone benchmark scripts (bench/dataset.py, profile_size.py, snapshot_cost.py)
share: logging, commands that must succeed, the tally binary measured, and one timed run.

    S = Script("bench/dataset", WORK)
    log, run, timed = S.log, S.run, S.timed
"""
import os
import subprocess
import sys
import time

from .common import ROOT


class Script:
    def __init__(self, name, work):
        self.name = name
        self.work = work

    @staticmethod
    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    def fail(self, msg):
        sys.exit(f"{self.name}: {msg}")

    def run(self, cmd, **kw):
        """cmd's result, output captured; the script stops with its stderr when it fails."""
        r = subprocess.run(cmd, capture_output=True, text=True, **kw)
        if r.returncode != 0:
            self.fail(f"{' '.join(cmd[:6])} failed ({r.returncode}):\n{r.stderr[-2000:]}")
        return r

    def tally_binary(self, keep=True):
        """$TALLY, or tally built in release mode; with keep, a hard link to it in the work
        directory, so that a rebuild while the script runs does not change what it measures."""
        if os.environ.get("TALLY"):
            return os.path.abspath(os.environ["TALLY"])
        self.log(f"{self.name}: cargo build --release -p tally")
        prefix = os.environ.get("LLVM_SYS_191_PREFIX", "/usr/lib/llvm-19")
        env = dict(os.environ, LLVM_SYS_191_PREFIX=prefix)
        if subprocess.run(["cargo", "build", "--release", "-p", "tally"], cwd=ROOT, env=env).returncode:
            self.fail("cargo build failed")
        built = os.path.join(ROOT, "target", "release", "tally")
        if not keep:
            return built
        os.makedirs(self.work, exist_ok=True)
        snap = os.path.join(self.work, "tally")
        if os.path.exists(snap):
            os.unlink(snap)
        os.link(built, snap)
        return snap

    def timed(self, cmd, cwd, ok=(0,)):
        """Wall seconds, CPU seconds (user + system) and peak RSS (MiB) of one run of cmd in
        cwd, its output discarded; the script stops when it exits with a status not in ok."""
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os.chdir(cwd)
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            try:
                os.execvp(cmd[0], cmd)
            finally:
                os._exit(127)
        _, status, ru = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        if code not in ok:
            self.fail(f"{' '.join(cmd[:4])} ... exited {code}")
        return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024
