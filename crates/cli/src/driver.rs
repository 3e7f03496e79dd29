//! `tally cc` / `tally c++`: a drop-in compiler driver.
//!
//! For every C/C++ source it runs `clang-19 <flags> -c -emit-llvm` (the user's -O level's full
//! optimization pipeline), instruments the optimized module in-process (tally-llvm), and has
//! clang generate code from the instrumented IR with the same flags but no further IR passes.
//! Link steps get the runtime archive appended. Everything else goes to clang unchanged.

use crate::args::{self, Action, CommandLine, Word};
use anyhow::{bail, Context as _, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use tally_format::Mode;

/// Settings of one driver run.
struct Settings {
    mode: Mode,
    atomic: bool,
    shadow: bool,
    early_exits: tally_llvm::EarlyExits,
    jump_cost: f64,
    promote: bool,
    verbose: bool,
    weights: Option<std::sync::Arc<tally_llvm::Weights>>,
    weighting: tally_llvm::Weighting,
    events: tally_llvm::EventKind,
    clang: PathBuf,
}

fn find_clang(cxx: bool) -> PathBuf {
    let var = if cxx { "TALLY_CLANGXX" } else { "TALLY_CLANG" };
    if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let name = if cxx { "clang++-19" } else { "clang-19" };
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let cand = dir.join(name);
            if cand.is_file() {
                return cand;
            }
        }
    }
    PathBuf::from(if cxx {
        "/usr/lib/llvm-19/bin/clang++"
    } else {
        "/usr/lib/llvm-19/bin/clang"
    })
}

fn settings(cxx: bool, cl: &CommandLine) -> Result<Settings> {
    let mut mode = match std::env::var("TALLY_MODE") {
        Ok(m) if !m.is_empty() => Mode::from_name(&m)
            .with_context(|| format!("TALLY_MODE={m} is not a mode ({})", Mode::names()))?,
        _ => Mode::Edge,
    };
    let mut atomic = false;
    let mut shadow = true;
    let mut early_exits = tally_llvm::EarlyExits::Auto;
    let mut promote = true;
    let mut jump_cost = tally_llvm::DEFAULT_JUMP_COST;
    let mut weights = None;
    let mut weighting = tally_llvm::Weighting::default();
    let mut events = tally_llvm::EventKind::Insns;
    let mut verbose = std::env::var_os("TALLY_VERBOSE").is_some_and(|v| !v.is_empty() && v != "0");
    for o in &cl.tally_opts {
        if let Some(m) = o.strip_prefix("mode=") {
            mode = Mode::from_name(m)
                .with_context(|| format!("--tally-mode={m} is not a mode ({})", Mode::names()))?;
        } else if o == "atomic" {
            atomic = true;
        } else if let Some(path) = o.strip_prefix("weights=") {
            weights = Some(std::sync::Arc::new(load_weights(Path::new(path))?));
        } else if let Some(k) = o.strip_prefix("weighting=") {
            weighting = tally_llvm::Weighting::from_name(k).with_context(|| {
                format!(
                    "--tally-weighting={k} is not a weighting ({})",
                    tally_llvm::Weighting::NAMES
                )
            })?;
        } else if let Some(k) = o.strip_prefix("events=") {
            events = tally_llvm::EventKind::from_name(k).with_context(|| {
                format!(
                    "--tally-events={k} is not an event kind ({})",
                    tally_llvm::EventKind::NAMES
                )
            })?;
        } else if let Some(k) = o.strip_prefix("early-exits=") {
            early_exits = tally_llvm::EarlyExits::from_name(k).with_context(|| {
                format!(
                    "--tally-early-exits={k} is not a choice ({})",
                    tally_llvm::EarlyExits::NAMES
                )
            })?;
        } else if let Some(x) = o.strip_prefix("jump-cost=") {
            jump_cost = x
                .parse::<f64>()
                .ok()
                .filter(|c| c.is_finite() && *c >= 0.0)
                .with_context(|| format!("--tally-jump-cost={x} is not a non-negative number"))?;
        } else if o == "promote" || o == "promote=on" {
            promote = true;
        } else if o == "promote=off" || o == "no-promote" {
            promote = false;
        } else if let Some(x) = o.strip_prefix("promote=") {
            bail!("--tally-promote={x} is not a choice (on, off)");
        } else if o == "no-shadow" {
            // Benchmarks only: measures what the early-exit frame records cost.
            shadow = false;
        } else if o == "verbose" {
            verbose = true;
        } else {
            bail!("unknown option --tally-{o}");
        }
    }
    Ok(Settings {
        mode,
        atomic,
        shadow,
        early_exits,
        promote,
        jump_cost,
        verbose,
        weights,
        weighting,
        events,
        clang: find_clang(cxx),
    })
}

/// Edge frequencies of every function of a profile, for `--tally-weights` (paper 000 §6.4,
/// Exact-Max placement). The profile must determine every edge count (edge or edges-naive).
fn load_weights(path: &Path) -> Result<tally_llvm::Weights> {
    let p = tally_format::profile::Profile::read_file(path)
        .with_context(|| format!("--tally-weights={}", path.display()))?;
    let r =
        tally_report::analyze(&p).with_context(|| format!("--tally-weights={}", path.display()))?;
    let mut w = tally_llvm::Weights::new();
    for f in &r.functions {
        let counts: Option<Vec<u64>> = f.edges.iter().map(|e| e.count).collect();
        let Some(counts) = counts else {
            bail!(
                "--tally-weights={}: a {} profile does not give every edge count; use one from an edge or edges-naive build",
                path.display(),
                f.mode.name()
            );
        };
        w.insert((f.name.clone(), f.cfg_hash), counts);
    }
    Ok(w)
}

fn run(s: &Settings, args: &[OsString]) -> Result<i32> {
    if s.verbose {
        let line: Vec<_> = args.iter().map(|a| a.to_string_lossy()).collect();
        eprintln!("tally: {} {}", s.clang.display(), line.join(" "));
    }
    let status = Command::new(&s.clang)
        .args(args)
        .status()
        .with_context(|| format!("cannot run {}", s.clang.display()))?;
    Ok(status.code().unwrap_or(1))
}

/// The user's options without inputs, `-o`, `-c`/`-S`, and (for IR inputs) `-x` and
/// dependency-file options.
fn flags(cl: &CommandLine, for_ir: bool) -> Vec<OsString> {
    let mut out = Vec::new();
    for w in &cl.words {
        if let Word::Opt(o) = w {
            if args::is_output_opt(o) || args::is_action_opt(o) {
                continue;
            }
            if for_ir && (args::is_dep_opt(o) || args::is_lang_opt(o)) {
                continue;
            }
            out.extend(o.iter().cloned());
        }
    }
    out
}

fn has_opt(cl: &CommandLine, pred: impl Fn(&str) -> bool) -> bool {
    cl.words.iter().any(|w| match w {
        Word::Opt(o) => pred(&o[0].to_string_lossy()),
        _ => false,
    })
}

/// One source to compile.
struct Job<'a> {
    index: usize,
    src: &'a OsString,
    x: &'a Option<String>,
    out: PathBuf,
}

/// Compiles one source to an instrumented object (or assembly, `asm`) at `job.out`.
fn compile_one(
    s: &Settings,
    cl: &CommandLine,
    job: &Job,
    asm: bool,
    tmp: &Path,
) -> Result<Option<i32>> {
    let (src, x, out) = (job.src, job.x, job.out.as_path());
    let bc = tmp.join(format!("{}.bc", job.index));
    let inst = tmp.join(format!("{}.inst.bc", job.index));

    // 1. Optimize to bitcode with the user's flags.
    let mut a = flags(cl, false);
    let wants_deps = has_opt(cl, |o| o == "-MD" || o == "-MMD");
    if wants_deps {
        if !has_opt(cl, |o| o.starts_with("-MF")) {
            let mut d = out.to_path_buf();
            d.set_extension("d");
            a.push("-MF".into());
            a.push(d.into_os_string());
        }
        if !has_opt(cl, |o| o.starts_with("-MT") || o.starts_with("-MQ")) {
            a.push("-MT".into());
            a.push(out.as_os_str().to_owned());
        }
    }
    a.extend(["-c".into(), "-emit-llvm".into()]);
    if let Some(x) = x {
        a.extend(["-x".into(), OsString::from(x)]);
    }
    a.push(src.clone());
    a.extend(["-o".into(), bc.clone().into_os_string()]);
    a.push("-Wno-unused-command-line-argument".into());
    let code = run(s, &a)?;
    if code != 0 {
        return Ok(Some(code));
    }

    // 2. Instrument.
    let input = std::fs::read(&bc).with_context(|| format!("cannot read {}", bc.display()))?;
    let source = std::env::current_dir()
        .map(|d| d.join(src))
        .unwrap_or_else(|_| PathBuf::from(src));
    let opts = tally_llvm::Options {
        mode: s.mode,
        source: source.to_string_lossy().into_owned(),
        atomic: s.atomic,
        shadow: s.shadow,
        early_exits: s.early_exits,
        jump_cost: s.jump_cost,
        promote: s.promote,
        weights: s.weights.clone(),
        weighting: s.weighting,
        events: s.events,
    };
    let t0 = std::time::Instant::now();
    let done = tally_llvm::instrument(&input, &opts)?;
    if let Some(w) = &s.weights {
        let known = done
            .meta
            .functions
            .iter()
            .filter(|f| w.keys().any(|(n, _)| n == &f.name))
            .count();
        if done.stats.weighted < known {
            eprintln!(
                "tally: warning: --tally-weights: {} of {} functions of {} have a different graph in the profile (another source or other flags); they use the heuristic weighting",
                known - done.stats.weighted,
                known,
                Path::new(src).display()
            );
        }
    }
    if s.verbose {
        let st = &done.stats;
        eprintln!(
            "tally: {} [{}]: {} functions ({} skipped, {} with measured weights), {} blocks, {} edges, {} counters ({} tagged, {} on split edges), {} shadow frames, {} promoted counters in {} loops, {:.0} ms",
            Path::new(src).display(),
            s.mode.name(),
            st.functions,
            st.skipped,
            st.weighted,
            st.blocks,
            st.edges,
            st.counters,
            st.tagged,
            st.split,
            st.shadow_frames,
            st.promoted,
            st.promoted_loops,
            t0.elapsed().as_secs_f64() * 1000.0
        );
        if s.mode == Mode::Path {
            eprintln!(
                "tally: {}: {} functions count paths in a hash table, {} use edge counters instead",
                Path::new(src).display(),
                st.hashed_paths,
                st.path_fallbacks
            );
            for (name, why) in &done.path_fallbacks {
                eprintln!("tally: edge counters for {name}: {why}");
            }
        }
        for sk in &done.meta.skipped {
            eprintln!("tally: not instrumented: {}: {}", sk.name, sk.reason);
        }
    }
    std::fs::write(&inst, &done.bitcode)
        .with_context(|| format!("cannot write {}", inst.display()))?;

    // 3. Generate code from the instrumented IR, without further IR passes.
    let mut a = flags(cl, true);
    a.push(if asm { "-S" } else { "-c" }.into());
    a.extend(["-x".into(), "ir".into(), inst.into_os_string()]);
    a.extend(["-o".into(), out.as_os_str().to_owned()]);
    a.extend([
        "-Xclang".into(),
        "-disable-llvm-passes".into(),
        "-Wno-unused-command-line-argument".into(),
    ]);
    let code = run(s, &a)?;
    Ok((code != 0).then_some(code))
}

/// Writes the runtime archive to a cache directory (once per content hash) and returns its path.
fn runtime_archive() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("TALLY_RUNTIME").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let hash = tally_graph::hash::fnv64(tally_runtime::ARCHIVE);
    let name = format!("libtally_rt-{hash:016x}.a");
    let mut dirs = Vec::new();
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        dirs.push(PathBuf::from(x).join("tally"));
    }
    if let Some(h) = std::env::var_os("HOME").filter(|x| !x.is_empty()) {
        dirs.push(PathBuf::from(h).join(".cache").join("tally"));
    }
    dirs.push(std::env::temp_dir().join(format!("tally-{}", unsafe_uid())));
    for d in dirs {
        let p = d.join(&name);
        if p.is_file() {
            return Ok(p);
        }
        if std::fs::create_dir_all(&d).is_err() {
            continue;
        }
        let tmp = d.join(format!("{name}.{}", std::process::id()));
        if std::fs::write(&tmp, tally_runtime::ARCHIVE).is_ok() && std::fs::rename(&tmp, &p).is_ok()
        {
            return Ok(p);
        }
        let _ = std::fs::remove_file(&tmp);
    }
    bail!("cannot write the tally runtime archive to any cache directory")
}

fn unsafe_uid() -> String {
    std::env::var("USER").unwrap_or_else(|_| "user".into())
}

/// Runs `tally cc` (`cxx == false`) or `tally c++` with the given arguments; returns the exit
/// code to use.
pub fn main(cxx: bool, argv: &[OsString]) -> Result<i32> {
    let cl = args::parse(argv);
    let s = settings(cxx, &cl)?;
    let passthrough_args = || -> Vec<OsString> {
        let mut a = Vec::new();
        for w in &cl.words {
            match w {
                Word::Opt(o) => a.extend(o.iter().cloned()),
                Word::Source { path, .. } | Word::OtherInput(path) => a.push(path.clone()),
            }
        }
        a
    };
    match cl.action {
        Action::PassThrough => run(&s, &passthrough_args()),
        Action::Compile | Action::Assemble => {
            let asm = cl.action == Action::Assemble;
            let srcs: Vec<_> = cl
                .words
                .iter()
                .filter_map(|w| match w {
                    Word::Source { path, x } if w.source_lang().is_some() => Some((path, x)),
                    _ => None,
                })
                .collect();
            if srcs.len() > 1 && cl.output.is_some() {
                bail!("cannot specify -o when generating multiple output files");
            }
            let others: Vec<_> = cl
                .words
                .iter()
                .filter(|w| matches!(w, Word::OtherInput(_)))
                .collect();
            if !others.is_empty() {
                bail!("with -c/-S, tally compiles C/C++ sources only; compile other inputs separately");
            }
            let tmp = tempdir()?;
            let ext = if asm { "s" } else { "o" };
            let jobs: Vec<Job> = srcs
                .iter()
                .enumerate()
                .map(|(index, (src, x))| Job {
                    index,
                    src,
                    x,
                    out: match &cl.output {
                        Some(o) => PathBuf::from(o),
                        None => args::default_output(src, ext),
                    },
                })
                .collect();
            let results = run_parallel(&jobs, |j| compile_one(&s, &cl, j, asm, tmp.path()));
            for r in results {
                if let Some(code) = r? {
                    return Ok(code);
                }
            }
            Ok(0)
        }
        Action::Link => {
            let tmp = tempdir()?;
            let jobs: Vec<Job> = cl
                .words
                .iter()
                .filter_map(|w| match w {
                    Word::Source { path, x } if w.source_lang().is_some() => Some((path, x)),
                    _ => None,
                })
                .enumerate()
                .map(|(index, (src, x))| Job {
                    index,
                    src,
                    x,
                    out: tmp.path().join(format!("{index}.o")),
                })
                .collect();
            let results = run_parallel(&jobs, |j| compile_one(&s, &cl, j, false, tmp.path()));
            for r in results {
                if let Some(code) = r? {
                    return Ok(code);
                }
            }
            // Link: sources replaced by their objects, in place; runtime last.
            let mut a: Vec<OsString> = Vec::new();
            let mut next = 0;
            for w in &cl.words {
                match w {
                    Word::Opt(o) => {
                        if args::is_lang_opt(o) {
                            // Objects must not be read as sources: keep -x out of the link.
                            continue;
                        }
                        if args::is_dep_opt(o) {
                            continue;
                        }
                        a.extend(o.iter().cloned());
                    }
                    Word::Source { .. } if w.source_lang().is_some() => {
                        a.push(jobs[next].out.clone().into_os_string());
                        next += 1;
                    }
                    Word::Source { path, .. } | Word::OtherInput(path) => a.push(path.clone()),
                }
            }
            a.push(runtime_archive()?.into_os_string());
            a.push("-Wno-unused-command-line-argument".into());
            run(&s, &a)
        }
    }
}

fn tempdir() -> Result<TempDir> {
    let base = std::env::temp_dir();
    for n in 0..1000u32 {
        let p = base.join(format!("tally-{}-{}", std::process::id(), n));
        if std::fs::create_dir(&p).is_ok() {
            return Ok(TempDir(p));
        }
    }
    bail!("cannot create a temporary directory in {}", base.display())
}

/// A directory removed on drop.
struct TempDir(PathBuf);
impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("TALLY_KEEP_TEMPS").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Runs `f` on every job, two at a time at most per available core.
fn run_parallel<J: Sync, R: Send>(jobs: &[J], f: impl Fn(&J) -> R + Sync) -> Vec<R> {
    if jobs.len() <= 1 {
        return jobs.iter().map(f).collect();
    }
    let n = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(jobs.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<R>>> =
        jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|sc| {
        for _ in 0..n {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= jobs.len() {
                    break;
                }
                let r = f(&jobs[i]);
                *results[i].lock().expect("no poisoned results") = Some(r);
            });
        }
    });
    results
        .into_iter()
        .map(|m| {
            m.into_inner()
                .expect("no poisoned results")
                .expect("every job ran")
        })
        .collect()
}
