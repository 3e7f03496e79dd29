#!/usr/bin/env bash
# Real projects built by their own build systems, three times each from pristine Debian sources:
#   plain  CC=clang-19     CXX=clang++-19
#   edge   CC="tally cc"   CXX="tally c++"   TALLY_MODE=edge
#   naive  CC="tally cc"   CXX="tally c++"   TALLY_MODE=edges-naive
#   trace  CC="tally cc"   CXX="tally c++"   TALLY_MODE=trace   (projects with <p>_trace: expat, tinyxml2)
# except the projects with <p>_oracle (libuv, redis, CPython), whose runs differ from run to run (hash
# seeds, timing, threads), built twice:
#   plain  CC=clang-19     CXX=clang++-19
#   oracle CC="tally cc"   CXX="tally c++"   TALLY_MODE=edge TALLY_ORACLE=on (the same-run oracle)
# all with CFLAGS=CXXFLAGS="-O2 -g". For each project it checks
#   1. configure results identical to the plain build (config.status + config header, or CMakeCache.txt),
#   2. test-suite results identical to the plain build (every PASS/FAIL/SKIP/... line, or ctest's);
#      projects with <p>_rerun (libuv) run each test whose result differs again on its own, RERUNS
#      (20) times in each build: when its result varies from run to run in the plain build and the
#      other build gave no result the plain one did not, the difference is the test's own (reported
#      with the counts, e.g. a test that races a timer against a connection to 1.2.3.4),
#   3. edge == edges-naive over the whole test suite: every process writes TALLY_PROFILE=<dir>/%p.tally;
#      the profiles are grouped by the build that wrote them, each group merged with `tally merge`, and
#      every block and edge count of every function compared between the two modes,
#   4. (trace builds) trace == edges-naive: each run also writes TALLY_TRACE=<dir>/%p.trace, and the
#      counts `tally report --trace` makes of it, added up per build, are compared the same way.
#   3'. (oracle builds, instead of 3) the profiles merged per program (`tally merge --by-program`) and
#      every program's merged profile checked against the oracle counts of the same runs (`tally check`).
# A project that fails (build error, ...) is reported as failed with its reason; the others still run.
#
# Usage: scripts/real-projects.sh [--projects sed,expat,tinyxml2] [--jobs N]
#   also: --projects libuv,redis,cpython (not in the default list: an hour or more on 2 cores)
#   --meta shared: the tally builds' runs write TALLY_META=shared profiles (metadata once per build in
#   <dir>/*.tallymeta), so every comparison reads those.
#   --snapshots SECONDS: every process of the tally builds' test suites takes a snapshot every
#   SECONDS (TALLY_SNAPSHOT_INTERVAL); with oracle builds, every part (<pid>.sN.tally and the last,
#   <pid>.tally) is also checked against the same-run oracle on its own, besides the merged sums.
#   --reuse: keep the build trees of an earlier run whose build succeeded (target/real-projects/<p>/
#   <variant>.built), and only rerun their test suites (with fresh profile directories).
# Work directory: target/real-projects/ (sources, builds, logs, profiles, results.md).
# Needs Debian 12; installs what it lacks with apt (adds a deb-src entry mirroring the deb entries).
# Not run in CI: 9 minutes for sed alone, about 15 for all three with the trace builds, on 2 cores
# (see docs/real-projects.md).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$ROOT/target/real-projects
PROJECTS=sed,expat,tinyxml2
JOBS=2
FLAGS="-O2 -g"
REUSE=
META=
SNAPSHOTS=
while [ $# -gt 0 ]; do
  case $1 in
    --projects) PROJECTS=$2; shift 2 ;;
    --projects=*) PROJECTS=${1#*=}; shift ;;
    --jobs) JOBS=$2; shift 2 ;;
    --jobs=*) JOBS=${1#*=}; shift ;;
    --reuse) REUSE=1; shift ;;
    --meta) META=$2; shift 2 ;;
    --meta=*) META=${1#*=}; shift ;;
    --snapshots) SNAPSHOTS=$2; shift 2 ;;
    --snapshots=*) SNAPSHOTS=${1#*=}; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "real-projects.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

renice -n 10 -p $$ >/dev/null 2>&1 || true
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
log() { printf '[real-projects %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# ---------------------------------------------------------------- setup
setup() {
  local missing=()
  command -v clang-19 >/dev/null || missing+=(clang-19)
  command -v make >/dev/null || missing+=(make)
  command -v dpkg-source >/dev/null || missing+=(dpkg-dev)
  command -v cmake >/dev/null || missing+=(cmake)
  command -v python3 >/dev/null || missing+=(python3)
  command -v xz >/dev/null || missing+=(xz-utils)
  command -v autoreconf >/dev/null || missing+=(autoconf)
  command -v automake >/dev/null || missing+=(automake)
  command -v libtoolize >/dev/null || missing+=(libtool)
  # redis's runtest is Tcl; CPython's extension modules used by its tests need these headers.
  case ",$PROJECTS," in *,redis,*) command -v tclsh >/dev/null || missing+=(tcl) ;; esac
  case ",$PROJECTS," in *,cpython,*)
    local d
    for d in libffi-dev zlib1g-dev libssl-dev libbz2-dev liblzma-dev libsqlite3-dev libreadline-dev uuid-dev; do
      dpkg -s "$d" >/dev/null 2>&1 || missing+=("$d")
    done ;;
  esac
  if ! apt-cache showsrc sed 2>/dev/null | grep -q '^Package: sed'; then
    log "adding deb-src entries mirroring the deb entries"
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] || continue
      case $f in */tally-deb-src.sources) continue ;; esac
      grep -q '^Types:.*\bdeb\b' "$f" || continue
      sed 's/^Types:.*/Types: deb-src/' "$f"
      echo
    done | $SUDO tee /etc/apt/sources.list.d/tally-deb-src.sources >/dev/null
    if [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list; then
      grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' |
        $SUDO tee /etc/apt/sources.list.d/tally-deb-src.list >/dev/null
    fi
    $SUDO apt-get update -qq || { log "apt-get update failed"; exit 1; }
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
      { log "apt-get install failed"; exit 1; }
  fi
  log "building tally"
  (cd "$ROOT" && nice cargo build --release -p tally -q) || { log "cargo build failed"; exit 1; }
  export PATH="$ROOT/target/release:$PATH"
  mkdir -p "$WORK/src" "$WORK/results"
  cat >"$WORK/compare.py" <<'PY'
import concurrent.futures, hashlib, json, os, subprocess, sys
# compare.py OUT JOBS EDGE_PROFILES EDGE_BUILD NAIVE_PROFILES NAIVE_BUILD "EXCLUDE..."
# EXCLUDE: space-separated; "test:NAME" drops profiles named NAME.*.tally (written under the test NAME),
# "program:FILE" drops the group whose main() is in FILE.
out, jobs = sys.argv[1], int(sys.argv[2])
pdir = {"edge": sys.argv[3], "naive": sys.argv[5]}
bdir = {"edge": sys.argv[4], "naive": sys.argv[6]}
excl = sys.argv[7].split() if len(sys.argv) > 7 else []
excl_tests = [e[5:] for e in excl if e.startswith("test:")]
excl_programs = [e[8:] for e in excl if e.startswith("program:")]

def norm(path, mode):
    return path.replace(bdir[mode].rstrip("/") + "/", "")

def report(path):
    # A trace build's profile has no counts: they come from its run's witness trace, written
    # next to it (TALLY_TRACE=<dir>/%p.trace).
    trace = path[: -len(".tally")] + ".trace"
    extra = ["--trace", trace] if path.endswith(".tally") and os.path.exists(trace) else []
    r = subprocess.run(["tally", "report", "--format", "json"] + extra + [path], capture_output=True, text=True)
    if r.returncode != 0:
        return path, None, r.stderr.strip().splitlines()[:1]
    return path, json.loads(r.stdout), None

def key_of(doc, mode):
    # The build a profile came from, independent of the mode: its functions and their graphs.
    fs = sorted((norm(f["module"], mode), f["name"], f["cfg_hash"]) for f in doc["functions"])
    mains = [os.path.basename(norm(f["module"], mode)) for f in doc["functions"] if f["name"] == "main"]
    return hashlib.sha1(repr(fs).encode()).hexdigest()[:12], (mains[0] if mains else "?")

groups, labels, errors = {}, {}, []
# Every group's counts also added up here, as the profiles are read: the comparison still runs
# when `tally merge` refuses a group (its failure is reported all the same).
totals = {}

def add(total, doc, mode):
    for f in doc["functions"]:
        key = (f["name"], norm(f["module"], mode), f["cfg_hash"])
        c = [f["entry_count"]] + [b["count"] for b in f["blocks"]] + [e["count"] for e in f["edges"]]
        t = total.get(key)
        total[key] = c if t is None else [x + y for x, y in zip(t, c)]
for mode in ("edge", "naive"):
    d = pdir[mode]
    files = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".tally")
                   and f.split(".")[0] not in excl_tests)
    print(f"{mode}: {len(files)} profiles ({len([f for f in os.listdir(d) if f.endswith('.tally')]) - len(files)} excluded by test name)")
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        for path, doc, err in ex.map(report, files):
            if doc is None:
                errors.append(f"{mode}: {os.path.basename(path)}: tally report failed: {err}")
                continue
            k, label = key_of(doc, mode)
            labels[k] = label
            groups.setdefault(k, {"edge": [], "naive": []})[mode].append(path)
            add(totals.setdefault((mode, k), {}), doc, mode)

def summed(files):
    # The reports of `files` added in Python (trace builds: `tally merge` adds counters, and a
    # trace build's profile has none).
    total = None
    for path in files:
        doc = report(path)[1]
        if doc is None:
            return None, f"tally report failed on {path}"
        if total is None:
            total = doc
            continue
        at = {(f["name"], f["module"], f["cfg_hash"]): f for f in total["functions"]}
        for f in doc["functions"]:
            t = at.get((f["name"], f["module"], f["cfg_hash"]))
            if t is None:
                total["functions"].append(f)
                continue
            t["entry_count"] += f["entry_count"]
            for a, b in zip(t["blocks"] + t["edges"], f["blocks"] + f["edges"]):
                a["count"] += b["count"]
    return total, None

def merged(mode, k, files):
    if any(os.path.exists(f[: -len(".tally")] + ".trace") for f in files):
        return summed(files)
    dst = os.path.join(out, f"{mode}.merged", f"{labels[k]}-{k}.tally")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    r = subprocess.run(["tally", "merge", "-o", dst] + files, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return report(dst)[1], None

def counts(doc, mode):
    return {(f["name"], norm(f["module"], mode), f["cfg_hash"]):
            (f["entry_count"], [b["count"] for b in f["blocks"]], [e["count"] for e in f["edges"]])
            for f in doc["functions"]}

nfun = ncount = 0
bad = []
for k in sorted(groups, key=lambda k: labels[k]):
    g = groups[k]
    if labels[k] in excl_programs:
        print(f"{labels[k]} [{k}]: excluded")
        continue
    line = f"{labels[k]} [{k}]: {len(g['edge'])} edge / {len(g['naive'])} edges-naive profiles"
    if len(g["edge"]) != len(g["naive"]):
        bad.append(line + ": different numbers of runs")
        if not g["edge"] or not g["naive"]:
            continue
    e, err1 = merged("edge", k, g["edge"])
    n, err2 = merged("naive", k, g["naive"])
    if e is None or n is None:
        bad.append(line + f": tally merge failed: {(err1 or err2 or '').splitlines()[-1:]}")
        # Compared all the same, from the counts added up while reading.
        ce = {f: (c[0], c[1:], []) for f, c in totals[("edge", k)].items()}
        cn = {f: (c[0], c[1:], []) for f, c in totals[("naive", k)].items()}
        nmod = len({f[1] for f in ce})
    else:
        ce, cn = counts(e, "edge"), counts(n, "naive")
        nmod = len({f["module"] for f in e["functions"]})
    if set(ce) != set(cn):
        bad.append(line + f": different function sets ({len(set(ce) ^ set(cn))} differ)")
    diff = []
    for f in sorted(set(ce) & set(cn)):
        nfun += 1
        ncount += 1 + len(ce[f][1]) + len(ce[f][2])
        if ce[f] != cn[f]:
            diff.append(f[0])
    print(line + f": {nmod} modules, {len(ce)} functions" + (f", counts differ in: {' '.join(diff)}" if diff else ", equal"))
    if diff:
        bad.append(line + f": counts differ in {len(diff)} functions: {' '.join(diff[:20])}")
print(f"SUMMARY: {len(groups)} builds (programs, {len([k for k in groups if labels[k] in excl_programs])} excluded), {sum(len(g['edge']) for g in groups.values())} edge + "
      f"{sum(len(g['naive']) for g in groups.values())} edges-naive profiles, {nfun} functions, "
      f"{ncount} counts compared, {len(bad)} groups differ, {len(errors)} unreadable profiles")
for b in bad + errors:
    print("DIFFERS: " + b)
sys.exit(1 if bad or errors else 0)
PY
  # Names each profile of a test script after the test: TALLY_PROFILE=<dir>/<test>.%p.tally
  cat >"$WORK/test-wrapper" <<'SH'
#!/bin/sh
# SH_LOG_COMPILER for automake's harness: run the test script with the shell, profiles named after it.
for last; do :; done
name=$(basename "$last"); name=${name%.*}
[ -n "${TALLY_PROFILE:-}" ] && TALLY_PROFILE=${TALLY_PROFILE%/*}/$name.%p.tally && export TALLY_PROFILE
exec "$@"
SH
  chmod +x "$WORK/test-wrapper"
  # Fixed "random" bytes, preloaded into a test suite whose paths depend on them (expat's hash salt).
  cat >"$WORK/fixed-random.c" <<'C'
#include <stddef.h>
#include <sys/types.h>
void arc4random_buf(void *buf, size_t n) {
  unsigned char *p = buf;
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(0x5a + 7 * i);
}
unsigned int arc4random(void) { return 0x5a61686fu; }
ssize_t getrandom(void *buf, size_t n, unsigned int flags) { (void)flags; arc4random_buf(buf, n); return (ssize_t)n; }
C
  clang-19 -O2 -shared -fPIC -o "$WORK/fixed-random.so" "$WORK/fixed-random.c" || exit 1
}

# The unpacked Debian source of package $1 (apt-get source applies Debian's patches); never built in.
source_dir() {
  local pkg=$1 d
  d=$(ls -d "$WORK/src/$pkg"-[0-9]*/ 2>/dev/null | head -1)
  if [ -z "$d" ]; then
    # The newest version first; a mirror may list a version whose files it lacks (a 404 for a
    # fresh security update), so every other version the index lists is tried after it.
    local v ok=
    for v in "" $(apt-cache showsrc "$pkg" 2>/dev/null | sed -n 's/^Version: //p' | sort -rV); do
      if (cd "$WORK/src" && apt-get source -qq "$pkg${v:+=$v}" >>"$WORK/src/$pkg.apt-get-source.log" 2>&1); then
        ok=1; break
      fi
    done
    [ -n "$ok" ] || return 1
    d=$(ls -d "$WORK/src/$pkg"-[0-9]*/ 2>/dev/null | head -1)
  fi
  [ -n "$d" ] && echo "${d%/}"
}

# Environment of a variant: sets CCV, CXXV, FLAGSV and exports/unsets TALLY_MODE. FLAGSV is FLAGS,
# plus --tally-atomic in the tally builds of a project with <p>_atomic=yes (threads: libuv, redis).
variant_env() { # variant project
  unset TALLY_PROFILE
  FLAGSV=$FLAGS
  [ "$1" != plain ] && [ -n "$(eval echo "\${${2}_atomic:-}")" ] && FLAGSV="$FLAGS --tally-atomic"
  case $1 in
    plain) CCV=clang-19; CXXV=clang++-19; unset TALLY_MODE ;;
    edge) CCV="tally cc"; CXXV="tally c++"; export TALLY_MODE=edge ;;
    naive) CCV="tally cc"; CXXV="tally c++"; export TALLY_MODE=edges-naive ;;
    trace) CCV="tally cc"; CXXV="tally c++"; export TALLY_MODE=trace ;;
    oracle) CCV="tally cc"; CXXV="tally c++"; export TALLY_MODE=edge TALLY_ORACLE=on ;;
  esac
  [ "$1" = oracle ] || unset TALLY_ORACLE
}

# Normalize a configure result file: the build directory, the source directory, the compiler names.
# config.status splits long values over lines ("...\\ newline "..."): joined first.
normalize() { # file builddir srcdir
  sed -e ':a' -e '/"\\$/{N;s/"\\\n"//;ba' -e '}' "$1" |
  sed -e "s|$2|@BUILDDIR@|g" -e "s|$3|@SRCDIR@|g" -e "s|$WORK/bin/||g" -e 's/ --tally-atomic//g' \
      -e "s|--tally-profile-dir=[^ ']* ||g; s| --tally-profile-dir=[^ ']*||g" \
      -e 's/tally c++/@CXX@/g; s/clang++-19/@CXX@/g; s/tally cc/@CC@/g; s/clang-19/@CC@/g' \
      -e "s/'\\\\''CC=@CC@'\\\\''/CC=@CC@/g; s/'CC=@CC@'/CC=@CC@/g" \
      -e "s/'\\\\''CXX=@CXX@'\\\\''/CXX=@CXX@/g; s/'CXX=@CXX@'/CXX=@CXX@/g"
}
# CMakeCache.txt: compiler paths and their first argument normalized; comments dropped.
normalize_cmake() { # file builddir srcdir
  grep -v '^#\|^//\|^$' "$1" |
    sed -e "s|$2|@BUILDDIR@|g" -e "s|$3|@SRCDIR@|g" -e 's/ --tally-atomic//g' \
        -e 's|^\(CMAKE_C_COMPILER:[A-Z]*=\).*|\1@CC@|; s|^\(CMAKE_CXX_COMPILER:[A-Z]*=\).*|\1@CXX@|' |
    grep -v '^CMAKE_C_COMPILER_ARG1\|^CMAKE_CXX_COMPILER_ARG1' | sort
}

# Test results of an automake harness log or ctest output, one line per test, sorted.
test_lines() { # log
  grep -E '^(PASS|FAIL|SKIP|XFAIL|XPASS|ERROR): ' "$1" | sort
  grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: ' "$1" | sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: //; s/ +[0-9.]+ sec$//; s/ \.+/ /' | sort
}
test_summary() { # log -> "PASS 206 FAIL 4 SKIP 50 ..."
  test_lines "$1" | awk '
    /^(PASS|FAIL|SKIP|XFAIL|XPASS|ERROR): / { sub(":", "", $1); n[$1]++; next }
    / Passed$/ { n["PASS"]++; next } / Not Run/ { n["SKIP"]++; next } { n["FAIL"]++ }
    END { for (k in n) printf "%s %d ", k, n[k] }' | tr ' ' '\n' | paste - - | sort | tr '\n\t' '  '
}

# ---------------------------------------------------------------- projects
# Each project defines: <p>_pkg, <p>_system, <p>_configure, <p>_build, <p>_check, <p>_conffiles.
sed_pkg=sed; sed_system="autotools + gnulib"
sed_configure() { ./configure CC="$CCV" CFLAGS="$FLAGS"; }
sed_build() { make -j"$JOBS"; }
# -k: gnulib-tests run even when testsuite/ has failures. testsuite/*.sh run through test-wrapper (the
# project's own SH_LOG_COMPILER is $(SHELL)), so their profiles are named after the test.
sed_check() { make -k -j"$JOBS" check SH_LOG_COMPILER="$WORK/test-wrapper $(sed -n 's/^SHELL = //p' Makefile)"; }
# Nondeterministic inputs, excluded from edge == edges-naive (docs/real-projects.md):
#  dc.sh: `( echo 2002 ; cat easter.dc ) | sed ...`: how the pipe's data arrives (one read or two)
#         changes the path through getc() in test_eof; differs between two runs of one binary.
#  test-explicit_bzero: vma_iterate() parses /proc/self/maps, whose lines differ between two binaries.
sed_exclude="test:dc program:test-explicit_bzero.c"
sed_conffiles="config.status config.h"

expat_pkg=expat; expat_system="autotools + libtool (shared libexpat)"
expat_trace=yes # (its test programs also in trace mode: check 4)
# Debian's orig tarball is a git export without configure: buildconf.sh (autoreconf) first, as
# debian/rules does; --without-docbook since the manual page is not under test.
expat_configure() {
  cd expat && ./buildconf.sh &&
    ./configure --without-docbook CC="$CCV" CXX="$CXXV" CFLAGS="$FLAGS" CXXFLAGS="$FLAGS"
}
expat_build() { make -C expat -j"$JOBS"; }
# expat salts its hash tables from arc4random_buf/getrandom: the tests' paths through hash(),
# lookup(), the allocation-failure loops, ... depend on it. Fixed bytes in all three builds.
expat_check() { LD_PRELOAD="$WORK/fixed-random.so" make -C expat -k -j"$JOBS" check; }
expat_conffiles="expat/config.status expat/expat_config.h"

tinyxml2_pkg=tinyxml2; tinyxml2_system="CMake, C++ shared library"
# Also built in trace mode (witness tracing): the executable and the shared library write one
# trace (docs/design/processes.md, "One trace per process"), whose counts are compared with edges-naive's.
tinyxml2_trace=yes
# CMake infers the toolchain's binutils from the compiler's file name: with CC="tally cc" it would
# find the unversioned llvm-ar (LLVM 14 on Debian 12) where clang-19 finds llvm-ar-19, so tally
# builds go through `tally links`'s clang-19 / clang++-19 (README, "CMake").
tinyxml2_configure() {
  local cc=$CCV cxx=$CXXV
  if [ "$cc" = "tally cc" ]; then
    tally links "$WORK/bin" >/dev/null || return 1
    cc=$WORK/bin/clang-19; cxx=$WORK/bin/clang++-19
  fi
  CC="$cc" CXX="$cxx" cmake -S . -B build -DCMAKE_BUILD_TYPE=None -DBUILD_SHARED_LIBS=ON \
    -DCMAKE_C_FLAGS="$FLAGS" -DCMAKE_CXX_FLAGS="$FLAGS" -Dtinyxml2_BUILD_TESTING=ON
}
tinyxml2_build() { cmake --build build -j "$JOBS"; }
tinyxml2_check() { ctest --test-dir build -j "$JOBS" --output-on-failure; }
tinyxml2_conffiles="build/CMakeCache.txt"

# libuv, redis and CPython: larger projects, with threads (libuv, redis: their tally
# builds add --tally-atomic, <p>_atomic=yes) and, for CPython, extension modules loaded as shared
# objects. Each check prints its suite's own per-test results converted to PASS:/FAIL:/SKIP:/ERROR:
# lines (the automake form test_lines reads), after the suite's raw output.

# Sets cc, cxx: the variant's compilers, named clang-19/clang++-19 also in the tally builds (`tally
# links`). Build systems that look at the compiler's name (CMake's binutils, see tinyxml2; redis's
# `findstring clang,$(CC)` adding -Wno-c11-extensions; CPython's configure `case $CC in *clang*`
# setting its PGO variables) then decide as for clang-19.
named_compilers() {
  cc=$CCV; cxx=$CXXV
  if [ "$cc" = "tally cc" ]; then
    tally links "$WORK/bin" >/dev/null || return 1
    cc=$WORK/bin/clang-19; cxx=$WORK/bin/clang++-19
  fi
}
# CMake configure through `tally links` (see tinyxml2) with the variant's flags.
cmake_configure() { # extra cmake arguments...
  local cc cxx
  named_compilers || return 1
  CC="$cc" CXX="$cxx" cmake -S . -B build -DCMAKE_BUILD_TYPE=None \
    -DCMAKE_C_FLAGS="$FLAGSV" -DCMAKE_CXX_FLAGS="$FLAGSV" "$@"
}

libuv_pkg=libuv1; libuv_system="CMake, C shared library, threads"
libuv_atomic=yes
libuv_oracle=yes
libuv_configure() { cmake_configure -DLIBUV_BUILD_TESTS=ON -DBUILD_TESTING=ON; }
# uv_run_tests, linked against the (tally-built) libuv.so; uv_run_tests_a (static) is not built.
libuv_build() { cmake --build build -j "$JOBS" --target uv_run_tests; }
# The runner (from the source directory, as ctest runs it: test/fixtures) runs every test in a child
# process of its own (and many tests spawn helper processes of the same executable); TAP output.
libuv_check() {
  local rc
  # As debian/rules: no DNS requests, time-sensitive timeouts raised (4x: a loaded machine); and
  # UV_RUN_AS_ROOT, without which the runner refuses to run as root.
  RES_OPTIONS=attempts:0 UV_TEST_TIMEOUT_MULTIPLIER=4 UV_RUN_AS_ROOT=1 build/uv_run_tests >uv-tests.out 2>&1; rc=$?
  cat uv-tests.out
  sed -nE 's/^ok [0-9]+ - ([^ ]+) # SKIP.*/SKIP: \1/p; t
            s/^ok [0-9]+ - ([^ ]+).*/PASS: \1/p; s/^not ok [0-9]+ - ([^ ]+).*/FAIL: \1/p' uv-tests.out
  return $rc
}
libuv_conffiles="build/CMakeCache.txt"
# One test, for the reruns of a test whose result differs from the plain build's: its TAP line.
libuv_rerun() { # name
  RES_OPTIONS=attempts:0 UV_TEST_TIMEOUT_MULTIPLIER=4 UV_RUN_AS_ROOT=1 build/uv_run_tests "$1" 2>&1 |
    sed -nE 's/^ok [0-9]+ - ([^ ]+) # SKIP.*/SKIP: \1/p; t
              s/^ok [0-9]+ - ([^ ]+).*/PASS: \1/p; s/^not ok [0-9]+ - ([^ ]+).*/FAIL: \1/p'
}

redis_pkg=redis; redis_system="make (no configure), threads"
redis_atomic=yes
redis_oracle=yes
# Redis has no configure step: `make persist-settings` (which also builds deps/: hiredis, lua,
# linenoise, hdr_histogram) writes src/.make-settings, the flags of the build, compared instead.
# MALLOC=libc: the bundled jemalloc is not built (Debian builds against the system's).
redis_make() { local cc cxx; named_compilers || return 1; make -C src MALLOC=libc BUILD_TLS=no CC="$cc" CFLAGS="$FLAGSV" "$@"; }
redis_configure() { redis_make persist-settings; }
redis_build() { redis_make -j"$JOBS" all; }
# A subset of the suite (unit/...), run by `runtest` (tclsh) against the built redis-server, which
# it starts and stops (SIGTERM) for every group of tests; forked children (BGSAVE, ...) too.
redis_tests="unit/printver unit/keyspace unit/type/string unit/type/incr unit/type/list unit/type/hash
             unit/type/set unit/type/zset unit/expire unit/bitops unit/other unit/info-command"
redis_check() {
  local rc t args=()
  for t in $redis_tests; do args+=(--single "$t"); done
  TERM=dumb ./runtest --clients "$JOBS" --timeout 1200 "${args[@]}" >runtest.out 2>&1; rc=$?
  cat runtest.out
  sed -nE 's/^\[ok\]: (.*) \([0-9]+ ms\)$/PASS: \1/p; s/^\[err\]: (.*)$/FAIL: \1/p; s/^\[skip\]: (.*)$/SKIP: \1/p
            s/^\[ignore\]: (.*)$/SKIP: \1/p; s/^\[exception\]: (.*)$/ERROR: \1/p' runtest.out
  return $rc
}
redis_conffiles="src/.make-settings"

cpython_pkg=python3.11; cpython_system="autotools, extension modules as shared objects"
cpython_oracle=yes
# Its tally builds name a default profile directory (--tally-profile-dir): a test child started
# with an empty environment (test_subprocess's test_empty_env) writes its profile there, not into
# the test's working directory. TALLY_PROFILE (set for the suite) wins where it is inherited.
cpython_profile_dir=yes
# Plain configure (Debian's rules add much more); no ensurepip (nothing is installed).
cpython_configure() { local cc cxx; named_compilers || return 1; ./configure --without-ensurepip CC="$cc" CXX="$cxx" CFLAGS="$FLAGSV"; }
# Builds ./python, then its extension modules (setup.py, run by the just-built ./python) as
# build/lib.*/*.so, which ./python dlopens from the build directory.
cpython_build() { make -j"$JOBS"; }
# A subset of the test suite, in one worker process (-j1), verbose: unittest's line per test case
# ("name (module.Class.name) ... ok") converted, and regrtest's line per test module. (Not
# --junit-xml: regrtest reads it with xml.etree, whose pyexpat does not build from Debian's
# patched source outside Debian's own Setup: "this header requires Py_BUILD_CORE define".)
cpython_tests="test_subprocess test_threading test_signal test_ctypes test_json test_re test_zlib"
cpython_check() {
  local rc
  # SIGINT as a terminal would have it: a shell running this script in the background ignores it,
  # and its children inherit that (test_signal, test_threading expect the default handler).
  python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); os.execv(sys.argv[1], sys.argv[1:])' \
    ./python -m test -j1 -v $cpython_tests >regrtest.out 2>&1; rc=$?
  cat regrtest.out
  python3 - regrtest.out <<'PY'
import re, sys
res = {"ok": "PASS", "FAIL": "FAIL", "ERROR": "ERROR", "expected failure": "XFAIL", "unexpected success": "XPASS"}
prev = ""
for line in open(sys.argv[1], errors="replace"):
    line = line.rstrip("\n")
    m = re.match(r"^(.*) \.\.\. (ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)$", line)
    if m:
        name = m.group(1)
        # A test with a docstring: "name (class)" on one line, "docstring ... ok" on the next.
        if not re.match(r"^\S+ \(\S+\)", name) and re.match(r"^\S+ \(\S+\)$", prev):
            name = prev
        print(f"{res.get(m.group(2), 'SKIP')}: {name}")
    m = re.search(r"\] (test_\w+) (passed|failed|skipped|crashed|timed out|resource denied|interrupted)", line)
    if m:
        print(f"{'PASS' if m.group(2) == 'passed' else 'SKIP' if m.group(2) in ('skipped', 'resource denied') else 'FAIL'}: [module] {m.group(1)}")
    prev = line
PY
  return $rc
}
cpython_conffiles="config.status pyconfig.h"

# ---------------------------------------------------------------- one project
# 1. configure results of build $2 against plain; sets conf=NO on a difference.
compare_configure() { # p v out src det
  local p=$1 v=$2 out=$3 src=$4 det=$5 f d
  for f in $(eval echo "\$${p}_conffiles"); do
    d=$out/$v.$(basename "$f").diff
    if [ "$f" = build/CMakeCache.txt ]; then
      diff <(normalize_cmake "$out/plain/$f" "$out/plain" "$src") <(normalize_cmake "$out/$v/$f" "$out/$v" "$src") >"$d"
    else
      diff <(normalize "$out/plain/$f" "$out/plain" "$src") <(normalize "$out/$v/$f" "$out/$v" "$src") >"$d"
    fi
    if [ -s "$d" ]; then
      conf=NO
      { echo "configure: $f differs between plain and $v:"; head -20 "$d"; } >>"$det"
    fi
  done
}

# The variants project $1 is built in.
variants() {
  if [ -n "$(eval echo "\${${1}_oracle:-}")" ]; then echo plain oracle
  else echo plain edge naive $(eval echo "\${${1}_trace:+trace}"); fi
}

# 3'. `tally check` on every merged program of $1/oracle.merged; prints the verdict ("yes (...)" or
# "NO (...)"), details to $2.
check_programs() { # out det
  local out=$1 det=$2 f n=0 bad=0 fns=0 edges=0 flagged=0 rc
  for f in "$out"/oracle.merged/*.tally; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    tally check --format json "$f" >"$f.check.json" 2>"$f.check.err"; rc=$?
    read -r c e fl < <(python3 -c 'import json,sys
try: d = json.load(open(sys.argv[1])); print(d["compared"], d["edges"], len(d["flagged"]))
except Exception: print(0, 0, 0)' "$f.check.json")
    fns=$((fns + c)); edges=$((edges + e)); flagged=$((flagged + fl))
    if [ $rc != 0 ]; then
      bad=$((bad + 1))
      { echo "tally check $(basename "$f"): exit $rc"; head -3 "$f.check.err"; tally check "$f" 2>&1 | head -20; } >>"$det"
    elif [ "$fl" != 0 ]; then
      { echo "tally check $(basename "$f"): $fl function(s) flagged by the mode:"; tally check "$f" 2>&1 | grep '^flagged' | head -10; } >>"$det"
    fi
  done
  local what="$n programs, $fns functions and $edges edge counts compared, $flagged flagged"
  local parts_bad=0 line
  if [ -n "$SNAPSHOTS" ]; then
    line=$(check_parts "$out" "$det")
    parts_bad=$(echo "$line" | sed -E 's/.* ([0-9]+) differ$/\1/')
    what="$what; $line"
  fi
  if [ $n = 0 ]; then echo "NO (no merged profile)"; elif [ $bad = 0 ] && [ "$parts_bad" = 0 ]; then echo "yes ($what)"; else echo "NO ($bad programs differ; $what)"; fi
}

# --snapshots: `tally check` on every profile of $1/oracle.profiles, each part of a process on its
# own; prints "P parts of Q processes checked each on its own, B differ" (details to $2).
check_parts() { # out det
  local out=$1 det=$2 f parts=0 procs=0 bad=0
  for f in "$out"/oracle.profiles/*.tally; do
    [ -f "$f" ] || continue
    parts=$((parts + 1))
    case $f in *.s[0-9]*.tally) ;; *) procs=$((procs + 1)) ;; esac
    if ! tally check "$f" >"$f.check.txt" 2>&1; then
      bad=$((bad + 1))
      { echo "tally check $(basename "$f"):"; head -5 "$f.check.txt"; } >>"$det"
    fi
  done
  echo "$parts parts of $procs processes checked each on its own, $bad differ"
}

# Whether every test whose result differs between the plain build and variant $3 (in
# $2/$3.tests.diff) varies from run to run in the plain build itself, and gave nothing in the
# variant that the plain build did not: each is run again on its own (<p>_rerun NAME, RERUNS
# times in each build; details to $4), and then the difference is the test's, not the build's.
# Prints the tests with what each build gave, e.g.
# "tcp_close_while_connecting (plain: FAIL 3, PASS 3; oracle: FAIL 1, PASS 5)".
RERUNS=${RERUNS:-20}
flaky_only() { # project out variant det
  local p=$1 out=$2 v=$3 det=$4 name b i bad=0 list=""
  declare -F "${p}_rerun" >/dev/null || return 1
  for name in $(sed -nE 's/^[<>] [A-Z]+: (.*)/\1/p' "$out/$v.tests.diff" | sort -u); do
    local seen="" plain_kinds="" kinds
    for b in plain $v; do
      local got
      got=$(grep -h -E "^[A-Z]+: $name\$" "$out/$b.tests" | cut -d: -f1)
      for i in $(seq "$RERUNS"); do
        got="$got
$( (cd "$out/$b" && TALLY_PROFILE=off "${p}_rerun" "$name") | cut -d: -f1)"
      done
      got=$(echo "$got" | grep -v '^$' | sort)
      kinds=$(echo "$got" | uniq)
      seen="$seen${seen:+; }$b: $(echo "$got" | uniq -c | awk '{printf "%s%s %d", (NR > 1 ? ", " : ""), $2, $1}')"
      if [ $b = plain ]; then
        plain_kinds=$kinds
        [ "$(echo "$kinds" | wc -l)" -ge 2 ] || bad=1
      elif [ -n "$(comm -13 <(echo "$plain_kinds") <(echo "$kinds"))" ]; then
        bad=1
      fi
    done
    echo "rerun $RERUNS times on its own: $name ($seen)" >>"$det"
    list="$list${list:+, }$name ($seen)"
  done
  echo "$list"
  return $bad
}

# Writes $WORK/results/<p>.row (a markdown table row) and <p>.txt (details). Returns 0 if all checks pass.
run_project() {
  local p=$1 pkg sys src v dir rc t0 t1 status=ok reason="" conf="?" tests="?" eq="?"
  pkg=$(eval echo "\$${p}_pkg"); sys=$(eval echo "\$${p}_system")
  local out=$WORK/$p det=$WORK/results/$p.txt
  t0=$(date +%s)
  : >"$det"
  src=$(source_dir "$pkg") || { reason="apt-get source $pkg failed"; }
  if [ -z "$reason" ]; then
    [ -n "$REUSE" ] || rm -rf "$out"
    mkdir -p "$out"
    for v in $(variants "$p"); do
      dir=$out/$v
      variant_env $v "$p"
      # First in the flags: CPython's configure appends its warning flags to CFLAGS without a
      # space ("$CFLAGS-Wextra"), which an option taking a value would swallow.
      [ $v != plain ] && [ -n "$(eval echo "\${${p}_profile_dir:-}")" ] &&
        FLAGSV="--tally-profile-dir=$out/$v.profiles $FLAGSV"
      if [ -n "$REUSE" ] && [ -f "$out/$v.built" ]; then
        log "$p: $v: reusing the build, test"
        [ $v = plain ] && conf=yes || compare_configure "$p" $v "$out" "${src%/}" "$det"
      else
      log "$p: $v: copy, configure, build, test"
      rm -rf "$dir" "$out/$v.built"
      cp -a "$src" "$dir"
      (cd "$dir" && "${p}_configure") >"$out/$v.configure.log" 2>&1 ||
        { reason="${reason:+$reason; }$v: configure failed (see $out/$v.configure.log)"; break; }
      if [ $v = plain ]; then conf=yes; else compare_configure "$p" $v "$out" "${src%/}" "$det"; fi
      (cd "$dir" && "${p}_build") >"$out/$v.build.log" 2>&1 || {
        reason="${reason:+$reason; }$v: build failed: $( (grep -m1 -E 'ld(\.lld)?: .*(unresolvable|undefined|error)' "$out/$v.build.log" ||
                                   grep -m1 -E 'error' "$out/$v.build.log") | sed "s|$out/||g" | cut -c1-200)"
        echo "$v: build failed (see $out/$v.build.log)" >>"$det"
        if [ $v = plain ]; then break; else continue; fi; }
      touch "$out/$v.built"
      fi
      if [ $v != plain ]; then
        rm -rf "$out/$v.profiles" "$out/$v.merged"
        # World-writable (sticky, as /tmp): a test process that drops root's privileges
        # (CPython's test_subprocess test_user runs a child as another user) writes its profile too.
        mkdir -p "$out/$v.profiles" && chmod 1777 "$out/$v.profiles"
        export TALLY_PROFILE="$out/$v.profiles/%p.tally"
        [ -n "$META" ] && export TALLY_META=$META
        [ -n "$SNAPSHOTS" ] && export TALLY_SNAPSHOT_INTERVAL=$SNAPSHOTS
      fi
      [ $v = trace ] && export TALLY_TRACE="$out/$v.profiles/%p.trace"
      (cd "$dir" && "${p}_check") >"$out/$v.check.log" 2>&1
      rc=$?
      unset TALLY_PROFILE TALLY_TRACE TALLY_META TALLY_SNAPSHOT_INTERVAL
      echo "$v: test suite exit status $rc; $(test_summary "$out/$v.check.log")" >>"$det"
    done
    unset TALLY_MODE TALLY_ORACLE
  fi
  if [ -z "$reason" ]; then
    # 2. test results
    test_lines "$out/plain.check.log" >"$out/plain.tests"
    tests="yes ($(test_summary "$out/plain.check.log"))"
    [ -s "$out/plain.tests" ] || tests="NO (no test results found)"
    for v in $(variants "$p"); do
      [ $v = plain ] && continue
      test_lines "$out/$v.check.log" >"$out/$v.tests"
      if ! diff "$out/plain.tests" "$out/$v.tests" >"$out/$v.tests.diff"; then
        { echo "tests: $v differs from plain:"; cat "$out/$v.tests.diff"; } >>"$det"
        local flaky
        if flaky=$(flaky_only "$p" "$out" $v "$det"); then
          tests="yes, but for tests whose result varies from run to run in both builds: $flaky"
        else
          tests=NO
        fi
      fi
    done
    if [ -n "$(eval echo "\${${p}_oracle:-}")" ]; then
      # 3'. every program's counts == the same-run oracle's
      log "$p: merging per program, checking against the same-run oracle"
      rm -rf "$out/oracle.merged"
      if ! tally merge --by-program -o "$out/oracle.merged" "$out/oracle.profiles" >"$out/merge.txt" 2>&1; then
        eq="NO (tally merge --by-program failed)"; { echo "merge:"; head -20 "$out/merge.txt"; } >>"$det"
      else
        eq=$(check_programs "$out" "$det")
      fi
    else
    # 3. edge == edges-naive
    log "$p: comparing edge and edges-naive profiles"
    if python3 "$WORK/compare.py" "$out" "$JOBS" "$out/edge.profiles" "$out/edge" "$out/naive.profiles" "$out/naive" \
        "$(eval echo "\${${p}_exclude:-}")" >"$out/compare.txt" 2>&1
    then eq="yes ($(grep '^SUMMARY' "$out/compare.txt" | sed 's/^SUMMARY: //'))"
    else
      eq="NO ($(grep '^SUMMARY' "$out/compare.txt" | sed 's/^SUMMARY: //'))"
      { echo "edge vs edges-naive:"; grep -E '^DIFFERS|Traceback|Error' "$out/compare.txt" | head -30; } >>"$det"
    fi
    # 4. trace == edges-naive (projects with <p>_trace): every count that `tally report --trace`
    # makes of each run's witness trace, added up per program, equals edges-naive's.
    if [ -n "$(eval echo "\${${p}_trace:-}")" ]; then
      log "$p: comparing trace (tally report --trace) and edges-naive profiles"
      if python3 "$WORK/compare.py" "$out" "$JOBS" "$out/trace.profiles" "$out/trace" "$out/naive.profiles" "$out/naive" \
          "$(eval echo "\${${p}_exclude:-}")" >"$out/compare-trace.txt" 2>&1
      then eq="$eq; trace == edges-naive: yes ($(grep '^SUMMARY' "$out/compare-trace.txt" | sed 's/^SUMMARY: //; s/ edge + / trace + /'))"
      else
        eq="$eq; trace == edges-naive: NO ($(grep '^SUMMARY' "$out/compare-trace.txt" | sed 's/^SUMMARY: //'))"
        { echo "trace vs edges-naive:"; grep -E '^DIFFERS|Traceback|Error' "$out/compare-trace.txt" | head -30; } >>"$det"
      fi
    fi
    fi
  fi
  t1=$(date +%s)
  local mins; mins=$(( (t1 - t0 + 30) / 60 ))
  if [ -n "$reason" ]; then
    status=FAILED
    echo "FAILED: $reason" >>"$det"
    printf '| %s | %s | %s | FAILED: %s | FAILED | %d min |\n' "$p" "$sys" "$conf" "$reason" "$mins" >"$WORK/results/$p.row"
  else
    case "$conf$tests$eq" in *NO*) status=FAILED ;; esac
    printf '| %s | %s | %s | %s | %s | %d min |\n' "$p" "$sys" "$conf" "$tests" "$eq" "$mins" >"$WORK/results/$p.row"
  fi
  log "$p: $status"
  [ $status = ok ]
}

setup
failed=0
rows=()
for p in ${PROJECTS//,/ }; do
  if ! declare -F "${p}_configure" >/dev/null; then log "unknown project $p"; failed=1; continue; fi
  run_project "$p" || failed=1
  rows+=("$p")
done
{
  [ -n "$META" ] && echo "The tally builds' runs wrote TALLY_META=$META profiles." && echo
  [ -n "$SNAPSHOTS" ] && echo "Every process of the tally builds' test suites took a snapshot every $SNAPSHOTS s (TALLY_SNAPSHOT_INTERVAL)." && echo
  echo "| project | build system | configure identical? | test results identical? | edge == edges-naive over the suite (oracle builds: == the same-run oracle)? | time |"
  echo "|---|---|---|---|---|---|"
  for p in "${rows[@]}"; do cat "$WORK/results/$p.row"; done
  echo
  for p in "${rows[@]}"; do echo "### $p"; echo '```'; cat "$WORK/results/$p.txt"; echo '```'; done
} >"$WORK/results.md"
cat "$WORK/results.md"
exit $failed
