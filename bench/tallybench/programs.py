"""The programs: testdata/bench/<name>/BUILD."""
import fnmatch
import glob
import json
import os
import shlex

from .common import BENCH, CLANG, ROOT, WORK, sh, sha


def parse_build(name):
    """BUILD: `key: value` lines (a key may repeat; values add up), `#` comments.
    Placeholders: {src} library directory (locate.sh), {root} repository, {bench} testdata/bench,
    {here} the program's directory, {size} the input size (args only)."""
    here = os.path.join(BENCH, name)
    spec = {}
    with open(os.path.join(here, "BUILD")) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, _, val = line.partition(":")
            spec.setdefault(key.strip(), []).append(val.strip())
    src = sh(["bash", os.path.join(ROOT, "testdata", "locate.sh"), spec["library"][0]])
    if src.returncode != 0:
        raise RuntimeError(src.stderr.strip() or "locate.sh failed")
    src = src.stdout.strip()

    def sub(s):
        return (s.replace("{src}", src).replace("{root}", ROOT).replace("{bench}", BENCH)
                .replace("{here}", here))

    def words(key):
        return [sub(w) for v in spec.get(key, []) for w in shlex.split(v)]

    sources, excluded = [], []
    for w in words("sources"):
        if w.startswith("!"):
            excluded.append(w[1:])
        elif w.startswith("@"):
            with open(w[1:]) as f:
                sources += [os.path.join(src, l.strip()) for l in f if l.strip() and not l.startswith("#")]
        else:
            p = w if os.path.isabs(w) else os.path.join(src, w)
            hits = sorted(glob.glob(p)) if any(c in w for c in "*?[") else [p]
            if not hits:
                raise RuntimeError(f"{name}: no file matches {w}")
            sources += hits
    sources = [s for s in sources
               if not any(fnmatch.fnmatch(os.path.relpath(s, src), e) for e in excluded)]
    for s in sources:
        if not os.path.isfile(s):
            raise RuntimeError(f"{name}: missing source {s}")
    driver = [d if os.path.isabs(d) else os.path.join(here, d) for d in words("driver")]
    return dict(name=name, here=here, src=src, library=spec["library"][0], cflags=words("cflags"),
                ldflags=words("ldflags"), sources=driver + sources, driver=driver,
                args=[sub(a) for v in spec.get("args", []) for a in shlex.split(v)],
                size=int(spec["size"][0]), reduced=int(spec["reduced"][0]),
                env=dict(w.split("=", 1) for w in words("env")))


def program_args(p, size):
    return [a.replace("{size}", str(size)) for a in p["args"]]


def count_lines(p):
    """Lines of the library's C sources and headers that the build reads (clang -MM),
    excluding system headers and this repository's files (the drivers are counted apart)."""
    key = sha(json.dumps([p["cflags"], p["sources"]]))[:16]
    cache = os.path.join(WORK, "lines", f"{p['name']}-{key}.json")
    if os.path.exists(cache):
        with open(cache) as f:
            return json.load(f)
    files = set()
    for s in p["sources"]:
        r = sh([CLANG, "-MM"] + p["cflags"] + [s])
        if r.returncode != 0:
            raise RuntimeError(f"clang -MM {s}: {r.stderr.strip()[:300]}")
        deps = r.stdout.replace("\\\n", " ").split(":", 1)[1].split()
        files.update(os.path.realpath(d) for d in deps)
    lib = [f for f in files if not f.startswith(ROOT + os.sep) and not f.startswith("/usr/")]
    own = [os.path.realpath(d) for d in p["driver"]]

    def n(fs):
        return sum(sum(1 for _ in open(f, "rb")) for f in fs)
    res = dict(lines=n(lib), files=len(lib), driver_lines=n(own))
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    with open(cache, "w") as f:
        json.dump(res, f)
    return res
