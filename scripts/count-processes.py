#!/usr/bin/env python3
"""Did every process write its profile? Compares the processes that ran a program, from an
strace log, with the profiles TALLY_PROFILE=DIR/%p.tally left in DIR.

  TALLY_PROFILE=DIR/%p.tally strace -f --seccomp-bpf -qq -e trace=execve,clone,clone3,fork,vfork \
      -o LOG <test command>
  scripts/count-processes.py LOG DIR redis-server

A process "ran the program" if it exec'd a path ending in the given name, or was forked
(not a thread) by one that did and exec'd nothing else. Prints how many, how many profiles,
and each process without a profile with how it ended (strace's "+++ killed by SIGKILL +++").
Used by hand for docs/real-projects.md; not run by the script or CI.
"""
import re, sys, os
log, pdir, exe = sys.argv[1], sys.argv[2], sys.argv[3]
ended = {}
pending = {}
calls = []  # (pid, text)
for line in open(log, errors="replace"):
    m = re.match(r"^(\d+)\s+(.*)$", line.rstrip("\n"))
    if not m: continue
    pid, rest = int(m.group(1)), m.group(2)
    if rest.startswith("+++ "):
        ended[pid] = rest.strip("+ ")
        continue
    if rest.endswith("<unfinished ...>"):
        pending[pid] = rest[: -len("<unfinished ...>")]
        continue
    r = re.match(r"^<\.\.\. \w+ resumed>(.*)$", rest)
    if r:
        rest = pending.pop(pid, "") + r.group(1)
    calls.append((pid, rest))
runs = set(); parent = {}
for pid, t in calls:
    if t.startswith("execve("):
        if re.search(r"= 0$", t):
            path = t.split('"')[1]
            if path.endswith(exe): runs.add(pid)
            else: runs.discard(pid)
    elif re.match(r"^(clone3?|fork|vfork)\(", t):
        m = re.search(r"= (\d+)$", t)
        if m and "CLONE_THREAD" not in t:
            child = int(m.group(1)); parent[child] = pid
            if pid in runs: runs.add(child)
# a forked child that exec'd something else was removed above only if its execve came later
profiles = {int(f.split(".")[0]) for f in os.listdir(pdir) if re.match(r"^\d+\.tally$", f)}
missing = sorted(runs - profiles)
print(f"processes that ran {exe}: {len(runs)}; profiles: {len(profiles & runs)}; "
      f"without a profile: {len(missing)}; profiles of other processes: {len(profiles - runs)}")
for p in missing:
    print(f"  {p}: {ended.get(p, 'end not in the log')}")
