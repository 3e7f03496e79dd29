//! Shared helpers for the end-to-end tests: build programs with plain clang-19 and with
//! `tally cc` in each mode, run them, and compare the exact counts of two profiles.
#![allow(dead_code)]

pub mod ipath_cut;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `tally` binary under test.
pub fn tally() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tally"))
}

/// True if the tests run as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// True if the tests run as root; otherwise [`skipped`]: `what` (a test, or part of one) needs
/// root to `why`.
pub fn root_or_skip(what: &str, why: &str) -> bool {
    if is_root() {
        return true;
    }
    skipped(what, &format!("needs root to {why}"));
    false
}

/// Says that `what` is skipped, loudly: straight to the terminal's standard error, past
/// libtest's capture of a passing test's output, as a `SKIPPED:` line `scripts/test.sh`
/// collects.
pub fn skipped(what: &str, why: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {what}: {why}");
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The early-termination programs (`testdata/early/EXPECTED`: file and exit status), as paths.
pub fn early_programs() -> Vec<(PathBuf, i32)> {
    std::fs::read_to_string(repo().join("testdata/early/EXPECTED"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            (
                repo().join("testdata/early").join(it.next().unwrap()),
                it.next().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// [`early_programs`] and the shapes of `testdata/shapes` (exit status 0): the programs the
/// path-like modes are checked on.
pub fn early_and_shapes() -> Vec<(PathBuf, i32)> {
    early_programs()
        .into_iter()
        .chain(
            ["shapes.c", "manypaths.c", "indirect.ll", "latch.ll"]
                .iter()
                .map(|f| (repo().join("testdata/shapes").join(f), 0)),
        )
        .collect()
}

/// Where [`scratch`] puts `name`: under cargo's target tmpdir, in a directory of the running
/// test's module (the first part of the name libtest gives the test's thread), so that tests of
/// two modules, running at the same time in the one test binary, never share a directory.
pub fn scratch_path(name: &str) -> PathBuf {
    let thread = std::thread::current();
    let module = thread
        .name()
        .and_then(|n| n.split("::").next())
        .unwrap_or("unnamed");
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(module)
        .join(name)
}

/// A fresh scratch directory (kept for inspection on failure): [`scratch_path`].
pub fn scratch(name: &str) -> PathBuf {
    let d = scratch_path(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

/// The command line (after `tally cc`) that builds the Lua interpreter of
/// `testdata/lua/driver.c` from the registry's sources, deterministic (fixed hash seed,
/// `testdata/lua/deterministic.h`); `extra` (an `-O` level, `-D`s, `-include`s) comes after
/// that header (which includes Lua's `llimits.h`) and before the sources; `-g` is always there.
pub fn lua_args(extra: &[&str]) -> Vec<String> {
    let l = locate("lua");
    let mut a: Vec<String> = vec![
        "-g".into(),
        "-DLUA_USE_LINUX".into(),
        "-Dluai_makeseed(L)=0x5eedu".into(),
        format!("-I{}", l.display()),
        "-include".into(),
        repo()
            .join("testdata/lua/deterministic.h")
            .display()
            .to_string(),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    a.push(repo().join("testdata/lua/driver.c").display().to_string());
    let list = std::fs::read_to_string(repo().join("testdata/lua/SOURCES")).unwrap();
    a.extend(
        list.lines()
            .filter(|s| !s.trim().is_empty())
            .map(|s| l.join(s.trim()).display().to_string()),
    );
    a.push("-lm".into());
    a
}

/// The command line that builds the SQLite amalgamation with `testdata/sqlite/driver.c`
/// (single-threaded, no extension loading, as in every test), `-O2 -g` and `extra`.
pub fn sqlite_args(extra: &[&str]) -> Vec<String> {
    let s = locate("sqlite");
    let mut a: Vec<String> = vec!["-O2".into(), "-g".into()];
    a.extend(extra.iter().map(|s| s.to_string()));
    a.extend([
        "-DSQLITE_THREADSAFE=0".into(),
        "-DSQLITE_OMIT_LOAD_EXTENSION".into(),
        format!("-I{}", s.display()),
        repo()
            .join("testdata/sqlite/driver.c")
            .display()
            .to_string(),
        s.join("sqlite3.c").display().to_string(),
        "-lm".into(),
    ]);
    a
}

/// Locates a vendored C code base in the cargo registry: `cargo metadata` on
/// `testdata/vendor/Cargo.toml` (downloading the crates if needed) gives each package's
/// directory; the C sources are in a fixed subdirectory of it.
pub fn locate(what: &str) -> PathBuf {
    let (package, sub) = match what {
        "lua" => ("lua-src", "lua-5.4"),
        "sqlite" => ("libsqlite3-sys", "sqlite3"),
        "zlib" => ("libz-sys", "src/zlib"),
        "bzip2" => ("bzip2-sys", "bzip2-1.0.8"),
        "zstd" => ("zstd-sys", "zstd/lib"),
        other => panic!("unknown code base {other}"),
    };
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--manifest-path",
        ])
        .arg(repo().join("testdata/vendor/Cargo.toml"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata JSON");
    let manifest = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == package)
        .unwrap_or_else(|| panic!("{package} not in testdata/vendor"))["manifest_path"]
        .as_str()
        .unwrap()
        .to_string();
    let root = Path::new(&manifest).parent().unwrap().to_path_buf();
    if sub == "lua-5.4" {
        // the newest lua-5.4.x directory
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("lua-5.4"))
            })
            .collect();
        dirs.sort();
        return dirs.pop().expect("lua-5.4.x sources in lua-src");
    }
    root.join(sub)
}

/// How to build: plain clang, or tally in a mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Plain,
    Tally(&'static str),
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Plain => "plain",
            Variant::Tally(m) => m,
        }
    }
}

pub const MODES: [Variant; 5] = [
    Variant::Tally("edge"),
    Variant::Tally("edges-naive"),
    Variant::Tally("blocks-naive"),
    Variant::Tally("vertex"),
    Variant::Tally("path"),
];

/// `edge` mode with each way of making early exits exact forced (the default, `auto`, mixes
/// them per function), without counters promoted to registers in call-free loops
/// (`--tally-promote=off`; the default promotes them), and under LLVM's static frequency
/// estimate instead of Ball & Larus 1994 §5's loop weighting (`--tally-weighting=estimate`), and
/// with without the SESE counters of Frenot & Pereira 2024 (`--tally-sese=off`; `edge` has them by
/// default): compared like `edge`, against the `edges-naive` oracle. Last, `vertex` without SESE
/// counters (`vertex-nosese`; `vertex` has them by default), compared like `vertex`.
pub const EARLY_EXIT_VARIANTS: [Variant; 6] = [
    Variant::Tally("edge-record"),
    Variant::Tally("edge-derive"),
    Variant::Tally("edge-nopromote"),
    Variant::Tally("edge-estimate"),
    Variant::Tally("edge-nosese"),
    Variant::Tally("vertex-nosese"),
];

/// Which edges two reports must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edges {
    /// Every edge, and every edge must be determined in both.
    All,
    /// The edges the first report determines (vertex mode leaves some unknown).
    DeterminedInFirst,
    /// Blocks only.
    None,
}

/// Builds `out` from `args` (sources and flags) as clang would, in `cwd`.
///
/// Builds of Lua and SQLite (from [`lua_args`] and [`sqlite_args`]: absolute paths only) are
/// shared: about ten test binaries build the same ones. The first build of a (variant, C++,
/// arguments) goes to [`BUILD_CACHE`] and every build copies the program from there; those
/// builds run in the cache's directory of their `tally` and share the optimized bitcode of
/// their sources through [`ir_cache`].
pub fn build(v: Variant, cxx: bool, args: &[&str], out: &Path, cwd: &Path) {
    match build_key(v, cxx, args) {
        // In one directory, whichever test builds first: the build is the same for all.
        Some(key) => build_cached(&key, Some(out), |prog| {
            let cwd = prog.parent().and_then(Path::parent).expect("cache entry");
            build_uncached_with(v, cxx, args, prog, cwd, Some(&ir_cache()))
        }),
        None => build_uncached(v, cxx, args, out, cwd),
    }
}

/// Makes the shared builds ([`build`]) of `args` in each of `variants` several at a time, as
/// many as there are cores, so that the test's own [`build`]s copy them: a test that builds Lua
/// or SQLite in many modes (one compile of the SQLite amalgamation takes one core for most of
/// a minute) then waits for the slowest build, not for their sum. Builds that are not shared
/// are left to the test.
pub fn prebuild(variants: &[Variant], cxx: bool, args: &[String]) {
    let builds: Vec<_> = variants.iter().map(|&v| (v, args.to_vec())).collect();
    prebuild_each(&builds, cxx);
}

/// [`prebuild`] of builds that differ in their arguments too.
pub fn prebuild_each(builds: &[(Variant, Vec<String>)], cxx: bool) {
    let keys: Vec<_> = builds
        .iter()
        .filter_map(|(v, args)| {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            build_key(*v, cxx, &args).map(|k| (*v, args, k))
        })
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|sc| {
        for _ in 0..cores.min(keys.len()) {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((v, args, key)) = keys.get(i) else {
                    break;
                };
                build_cached(key, None, |prog| {
                    let cwd = prog.parent().and_then(Path::parent).expect("cache entry");
                    build_uncached_with(*v, cxx, args, prog, cwd, Some(&ir_cache()))
                });
            });
        }
    });
}

/// The `TALLY_IR_CACHE` of the builds [`build`] shares: their modes start from the same
/// optimized bitcode, so each mode after the first costs instrumentation and code generation
/// only.
fn ir_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("ir-cache")
}

/// Where [`build`] keeps the Lua and SQLite programs it built, under cargo's target tmpdir:
/// `<tally>/<key>/prog`, `<tally>` naming the `tally` binary that built them (`plain` for
/// clang alone), `<key>` the rest of the build.
pub const BUILD_CACHE: &str = "build-cache";

/// The cache key of a build of Lua or SQLite, `None` for any other build (which may have
/// relative paths or inputs written by the test) or with `TALLY_NO_BUILD_CACHE` set. It covers
/// the `tally` binary (path, size, modification time; the runtime is embedded in it), the
/// variant, the language, every argument, the contents of every argument that is a file
/// (sources, `-include`d headers; the headers of the registry's sources never change) and the
/// `TALLY_*` environment the compiler sees. The compiler itself is not in it.
fn build_key(v: Variant, cxx: bool, args: &[&str]) -> Option<(String, String)> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let shared = args
        .iter()
        .any(|a| a.ends_with("testdata/lua/driver.c") || a.ends_with("testdata/sqlite/driver.c"));
    if !shared || std::env::var_os("TALLY_NO_BUILD_CACHE").is_some() {
        return None;
    }
    let compiler = match v {
        Variant::Plain => "plain".to_string(),
        Variant::Tally(_) => {
            let meta = std::fs::metadata(tally()).expect("tally binary");
            let mut h = DefaultHasher::new();
            tally().hash(&mut h);
            meta.len().hash(&mut h);
            meta.modified().expect("mtime").hash(&mut h);
            format!("tally-{:016x}", h.finish())
        }
    };
    let mut h = DefaultHasher::new();
    (v.name(), cxx, args).hash(&mut h);
    for a in args {
        let path = Path::new(a);
        if path.is_absolute() && path.is_file() {
            std::fs::read(path).expect("read build input").hash(&mut h);
        }
    }
    let mut env: Vec<_> = std::env::vars_os()
        .filter(|(k, _)| k.to_string_lossy().starts_with("TALLY_") && k != "TALLY_MODE")
        .collect();
    env.sort();
    env.hash(&mut h);
    Some((compiler, format!("{}-{:016x}", v.name(), h.finish())))
}

/// Copies the cached program of `key` to `out` (if given), building it first with `make`
/// (given the path to write) if no test has. A lock file per key makes concurrent tests wait for one build; a
/// build is made in a temporary directory renamed into place, so the cache never holds a
/// partial program. Programs of other `tally` binaries are deleted when a new one appears.
fn build_cached(key: &(String, String), out: Option<&Path>, make: impl FnOnce(&Path)) {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(BUILD_CACHE);
    let dir = root.join(&key.0);
    let entry = dir.join(&key.1);
    let prog = entry.join("prog");
    if !prog.is_file() {
        if !dir.is_dir() && key.0 != "plain" {
            // A new tally binary: the programs of the previous ones are stale.
            for old in std::fs::read_dir(&root).into_iter().flatten().flatten() {
                let name = old.file_name();
                if name != "plain" && old.path() != dir {
                    let _ = std::fs::remove_dir_all(old.path());
                }
            }
        }
        std::fs::create_dir_all(&dir).expect("create build cache");
        let lock = std::fs::File::create(dir.join(format!("{}.lock", key.1))).expect("lock file");
        lock.lock().expect("lock build cache entry");
        if !prog.is_file() {
            let tmp = dir.join(format!("{}.tmp", key.1));
            let _ = std::fs::remove_dir_all(&tmp);
            std::fs::create_dir_all(&tmp).expect("create build dir");
            make(&tmp.join("prog"));
            std::fs::rename(&tmp, &entry).expect("publish cached build");
        }
        drop(lock);
    }
    if let Some(out) = out {
        // `cp`, not `std::fs::copy`: a writable descriptor of the copy opened in this process
        // would be inherited by a program another test thread forks at that moment, and
        // executing the copy would then fail with ETXTBSY ("Text file busy").
        let _ = std::fs::remove_file(out);
        let st = Command::new("cp")
            .arg(&prog)
            .arg(out)
            .status()
            .expect("run cp");
        assert!(st.success(), "copy cached build to {}", out.display());
    }
}

/// [`build`] without the cache.
fn build_uncached(v: Variant, cxx: bool, args: &[&str], out: &Path, cwd: &Path) {
    build_uncached_with(v, cxx, args, out, cwd, None)
}

/// [`build_uncached`], with `TALLY_IR_CACHE=ir_cache` if given.
fn build_uncached_with(
    v: Variant,
    cxx: bool,
    args: &[&str],
    out: &Path,
    cwd: &Path,
    ir_cache: Option<&Path>,
) {
    let mut cmd = match v {
        Variant::Plain => Command::new(if cxx { "clang++-19" } else { "clang-19" }),
        Variant::Tally(mode) => {
            let mut c = Command::new(tally());
            c.arg(if cxx { "c++" } else { "cc" });
            // `vertex-<sese choice>`: vertex mode with that `--tally-sese`.
            if let Some(choice) = mode.strip_prefix("vertex-") {
                let choice = match choice {
                    "nosese" => "off",
                    "sese" => "on",
                    other => other.strip_prefix("sese-").unwrap_or(other),
                };
                c.args(["--tally-mode=vertex", &format!("--tally-sese={choice}")]);
            }
            match mode.strip_prefix("edge-") {
                Some(how @ ("record" | "derive")) => {
                    c.arg("--tally-mode=edge");
                    c.arg(format!("--tally-early-exits={how}"));
                }
                Some("nopromote") => {
                    c.args(["--tally-mode=edge", "--tally-promote=off"]);
                }
                Some("estimate") => {
                    c.args(["--tally-mode=edge", "--tally-weighting=estimate"]);
                }
                Some("sese") => {
                    c.args(["--tally-mode=edge", "--tally-sese=on"]);
                }
                Some("nosese") => {
                    c.args(["--tally-mode=edge", "--tally-sese=off"]);
                }
                // SESE counters in every candidate loop (hidden `all` / `trips` choices).
                Some(choice @ ("sese-all" | "sese-trips")) => {
                    c.arg("--tally-mode=edge");
                    c.arg(format!("--tally-sese={}", &choice["sese-".len()..]));
                }
                _ if mode.starts_with("vertex-") => {}
                _ => {
                    c.arg(format!("--tally-mode={mode}"));
                }
            }
            c
        }
    };
    cmd.args(args).arg("-o").arg(out).current_dir(cwd);
    cmd.env_remove("TALLY_MODE");
    if let Some(dir) = ir_cache {
        cmd.env("TALLY_IR_CACHE", dir);
    }
    let o = cmd.output().expect("run compiler");
    assert!(
        o.status.success(),
        "{} build of {} failed:\n{}",
        v.name(),
        out.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Runs `tally ARGS` in `dir`, which must succeed, and returns its standard output.
pub fn tally_ok(dir: &Path, args: &[&str]) -> Vec<u8> {
    let o = Command::new(tally())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "tally {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// Runs a program with its profile going to `profile`.
pub fn run(bin: &Path, args: &[&str], cwd: &Path, profile: &Path) -> Output {
    let _ = std::fs::remove_file(profile);
    Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .env("TALLY_PROFILE", profile)
        .output()
        .expect("run program")
}

/// `tally report --format json` of a profile, parsed.
pub fn report_json(profile: &Path) -> Value {
    let o = Command::new(tally())
        .args(["report", "--format", "json"])
        .arg(profile)
        .output()
        .expect("run tally report");
    assert!(
        o.status.success(),
        "tally report {} failed: {}",
        profile.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("report JSON parses")
}

/// An edge as listed in the report: from, to, kind, count.
pub type EdgeRow = (Option<u64>, Option<u64>, String, Option<u64>);

/// Counts of one function, by block and edge id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FnCounts {
    pub entry: u64,
    pub blocks: Vec<Option<u64>>,
    pub edges: Vec<EdgeRow>,
}

/// Functions of a report keyed by (module, name, cfg hash).
pub fn counts(report: &Value) -> BTreeMap<(String, String, String), FnCounts> {
    let mut m = BTreeMap::new();
    for f in report["functions"].as_array().expect("functions[]") {
        let key = (
            f["module"].as_str().unwrap().to_string(),
            f["name"].as_str().unwrap().to_string(),
            f["cfg_hash"].as_str().unwrap().to_string(),
        );
        let blocks = f["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["count"].as_u64())
            .collect();
        let edges = f["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["from"].as_u64(),
                    e["to"].as_u64(),
                    e["kind"].as_str().unwrap().to_string(),
                    e["count"].as_u64(),
                )
            })
            .collect();
        let c = FnCounts {
            entry: f["entry_count"].as_u64().unwrap(),
            blocks,
            edges,
        };
        assert!(
            m.insert(key.clone(), c).is_none(),
            "function {key:?} listed twice"
        );
    }
    m
}

/// Asserts that two profiles of builds of the same sources have equal counts: every block of
/// every function, and the edges `edges` says. Returns the number of functions compared and the
/// number of executed blocks seen.
pub fn assert_same_counts(
    what: &str,
    a_name: &str,
    a: &Value,
    b_name: &str,
    b: &Value,
    edges: impl Into<Edges>,
) -> (usize, usize) {
    let edges: Edges = edges.into();
    let ca = counts(a);
    let cb = counts(b);
    assert_eq!(
        ca.keys().collect::<Vec<_>>(),
        cb.keys().collect::<Vec<_>>(),
        "{what}: {a_name} and {b_name} list different functions or graphs"
    );
    let mut executed = 0;
    for (k, fa) in &ca {
        let fb = &cb[k];
        assert_eq!(fa.blocks.len(), fb.blocks.len(), "{what}: {k:?}");
        for (i, (x, y)) in fa.blocks.iter().zip(&fb.blocks).enumerate() {
            assert!(
                x.is_some() && y.is_some(),
                "{what}: {k:?} block n{i} undetermined ({a_name} {x:?}, {b_name} {y:?})"
            );
            assert_eq!(
                x, y,
                "{what}: {k:?} block n{i}: {a_name} says {x:?}, {b_name} says {y:?}"
            );
            if x.unwrap_or(0) > 0 {
                executed += 1;
            }
        }
        if edges != Edges::None {
            assert_eq!(fa.edges.len(), fb.edges.len(), "{what}: {k:?}");
            for (i, (x, y)) in fa.edges.iter().zip(&fb.edges).enumerate() {
                assert_eq!(x.0, y.0, "{what}: {k:?} e{i} endpoints");
                assert_eq!(x.1, y.1, "{what}: {k:?} e{i} endpoints");
                if edges == Edges::DeterminedInFirst && x.3.is_none() {
                    continue;
                }
                assert!(
                    x.3.is_some() && y.3.is_some(),
                    "{what}: {k:?} edge e{i} undetermined"
                );
                assert_eq!(
                    x.3, y.3,
                    "{what}: {k:?} edge e{i} ({:?} -> {:?}, {}): {a_name} says {:?}, {b_name} says {:?}",
                    x.0, x.1, x.2, x.3, y.3
                );
            }
        }
    }
    (ca.len(), executed)
}

/// Builds one source file plain and in every mode with `opt -g`, runs each build, and checks
/// the exit status, that every build prints what the plain one prints, and that `edge` counts
/// equal the `edges-naive` oracle (blocks and edges) and the `blocks-naive` oracle (blocks).
pub fn check_program(src: &Path, status: i32, opt: &str) {
    let file = src.file_name().unwrap().to_str().unwrap();
    let cxx = file.ends_with(".cpp");
    let stem = file.split('.').next().unwrap();
    let dir = scratch(&format!("prog-{stem}{opt}"));
    let src_s = src.to_str().unwrap();
    let mut outputs = Vec::new();
    let mut reports = Vec::new();
    for v in std::iter::once(Variant::Plain)
        .chain(MODES)
        .chain(EARLY_EXIT_VARIANTS)
    {
        let bin = dir.join(format!("{stem}-{}", v.name()));
        build(v, cxx, &[opt, "-g", src_s], &bin, &dir);
        let prof = dir.join(format!("{stem}-{}.tally", v.name()));
        let out = run(&bin, &[], &dir, &prof);
        assert_eq!(
            out.status.code(),
            Some(status),
            "{file} {opt} {}: exit status (stderr: {})",
            v.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.push((v.name(), out.stdout));
        if v != Variant::Plain {
            assert!(
                prof.is_file(),
                "{file} {opt} {}: no profile written",
                v.name()
            );
            reports.push((v.name(), report_json(&prof)));
        }
    }
    for (name, o) in &outputs[1..] {
        assert_eq!(
            String::from_utf8_lossy(o),
            String::from_utf8_lossy(&outputs[0].1),
            "{file} {opt}: {name} output differs from plain"
        );
    }
    let what = format!("{file} {opt}");
    let reports: Vec<Value> = reports.into_iter().map(|(_, r)| r).collect();
    let (nf, executed) = compare_modes(&what, &reports);
    assert!(
        nf >= 2 && executed >= 8,
        "{what}: too little was compared ({nf} functions, {executed} blocks)"
    );
}

impl From<bool> for Edges {
    fn from(all: bool) -> Edges {
        if all {
            Edges::All
        } else {
            Edges::None
        }
    }
}

/// Compares the reports of the modes (in [`MODES`] order) of one program: `edge` against the
/// `edges-naive` oracle (blocks and edges) and the `blocks-naive` oracle (blocks); `vertex`
/// against `blocks-naive` (blocks) and `edges-naive` (the edges it determines); the block and
/// edge counts derived from the `path` profile against `edges-naive`; reports past those five
/// are the [`EARLY_EXIT_VARIANTS`], each compared against `edges-naive` like `edge` (or, for
/// `vertex-*`, like `vertex`).
pub fn compare_modes(what: &str, reports: &[Value]) -> (usize, usize) {
    for (v, r) in EARLY_EXIT_VARIANTS.iter().zip(reports.iter().skip(5)) {
        let edges = if v.name().starts_with("vertex") {
            assert_same_counts(what, v.name(), r, "blocks-naive", &reports[2], Edges::None);
            Edges::DeterminedInFirst
        } else {
            Edges::All
        };
        assert_same_counts(what, v.name(), r, "edges-naive", &reports[1], edges);
    }
    let (edge, naive, blocks, vertex, path) = (
        &reports[0],
        &reports[1],
        &reports[2],
        &reports[3],
        &reports[4],
    );
    assert_same_counts(what, "path", path, "edges-naive", naive, Edges::All);
    let r = assert_same_counts(what, "edge", edge, "edges-naive", naive, Edges::All);
    assert_same_counts(what, "edge", edge, "blocks-naive", blocks, Edges::None);
    assert_same_counts(what, "vertex", vertex, "blocks-naive", blocks, Edges::None);
    assert_same_counts(
        what,
        "vertex",
        vertex,
        "edges-naive",
        naive,
        Edges::DeterminedInFirst,
    );
    r
}

pub fn placements(dir: &Path, profile: &str, json: bool) -> std::process::Output {
    let mut args = vec!["placements", profile];
    if json {
        args.push("--format=json");
    }
    std::process::Command::new(tally())
        .args(&args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn check_orderings(what: &str, v: &Value, block_sum: u64) {
    let get = |name: &str| {
        let p = v["placements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{what}: no placement {name}"));
        (
            p["counters"].as_u64().unwrap(),
            p["increments"].as_u64().unwrap(),
        )
    };
    let (heur, exact, min) = (get("eprof-heuristic"), get("eprof-exact"), get("eprof-min"));
    assert!(
        exact.1 <= heur.1 && heur.1 <= min.1,
        "{what}: {exact:?} {heur:?} {min:?}"
    );
    assert!(
        exact.0 == heur.0 && heur.0 == min.0,
        "{what}: chord counts differ"
    );
    let (ks, ks_exact) = (get("vprof-vcnt"), get("vprof-vcnt-exact"));
    assert!(ks_exact.1 <= ks.1, "{what}: {ks_exact:?} {ks:?}");
    assert_eq!(ks.0, ks_exact.0, "{what}: Vcnt sizes differ");
    let blocks = get("blocks");
    assert_eq!(blocks.1, block_sum, "{what}: blocks increments");
    assert!(
        ks.0 < blocks.0 && get("vprof-ecnt").0 <= heur.0,
        "{what}: counter counts"
    );
    assert!(v["functions"].as_u64().unwrap() > 0);
}

fn block_sum(profile: &Path) -> u64 {
    let r = report_json(profile);
    r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["blocks"].as_array().unwrap().iter())
        .map(|b| b["count"].as_u64().unwrap())
        .sum()
}

/// `tally placements --format=json` of an edge or edges-naive profile, checked against what
/// the theory guarantees: the maximum spanning tree under the measured weights is the cheapest
/// tree and the minimum one the dearest, all trees have the same number of chords,
/// Knuth-Stevenson under the measured weights is the cheapest Vprof(Vcnt) and needs fewer
/// counters than there are blocks, Vprof(Ecnt) needs no more counters than Eprof(Ecnt), and
/// `blocks` is the sum of the block counts of `tally report`.
pub fn check_placements(what: &str, profile: &Path) {
    let dir = profile.parent().unwrap();
    let name = profile.file_name().unwrap().to_str().unwrap();
    let out = placements(dir, name, true);
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_orderings(what, &v, block_sum(profile));
}

/// The counting modes (every mode whose profile holds counts).
pub const COUNTING: [&str; 9] = [
    "edge",
    "edges-naive",
    "blocks-naive",
    "vertex",
    "path",
    "events",
    "events-naive",
    "ipath",
    "ipath-piecewise",
];

/// Two inputs of the demo program (`testdata/demo/wordfreq.c`) written into `dir`: its whole
/// bundled text, and its first 25 lines.
pub fn demo_inputs(dir: &Path) -> [PathBuf; 2] {
    let text = std::fs::read_to_string(repo().join("testdata/demo/input.txt")).unwrap();
    let inputs = [dir.join("whole.txt"), dir.join("part.txt")];
    std::fs::write(&inputs[0], &text).unwrap();
    std::fs::write(
        &inputs[1],
        text.lines().take(25).collect::<Vec<_>>().join("\n"),
    )
    .unwrap();
    inputs
}
