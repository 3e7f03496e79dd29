//! `tally cc` / `tally c++`: a drop-in compiler driver.
//!
//! For every C/C++ source it runs `clang-19 <flags> -c -emit-llvm` (the user's -O level's full
//! optimization pipeline), instruments the optimized module in-process (tally-llvm), and has
//! clang generate code from the instrumented IR with the same flags but no further IR passes.
//! Link steps get the runtime archive appended. Everything else goes to clang unchanged.

use crate::args::{self, Action, CommandLine, Word};
use anyhow::{anyhow, bail, Context as _, Result};
use clap::builder::FalseyValueParser;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory as _, FromArgMatches as _, Parser};
use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Settings of one driver run: tally's own options (`--tally-*`, parsed by clap) and the clang
/// to run. `source` and `weights` of `opts` are not options: the driver fills them in.
#[derive(Parser, Debug)]
#[command(
    name = "tally cc",
    about = "Compile and link like clang, with tally's instrumentation",
    after_long_help = "Environment: TALLY_CLANG / TALLY_CLANGXX (the clang to run), \
        TALLY_RUNTIME (a runtime archive to link instead of the built-in one), \
        TALLY_KEEP_TEMPS (keep the intermediate bitcode), \
        TALLY_IR_CACHE=DIR (reuse the optimized bitcode of an earlier build of the same source \
        and flags, in any mode; DIR must be a directory only this user can change).",
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true
)]
struct Settings {
    #[command(flatten)]
    opts: tally_llvm::Options,
    /// Place counters by the edge counts of an earlier edge or edges-naive run of the same
    /// build instead of the static weighting (Ball & Larus 1994 §6.4, Exact-Max)
    #[arg(long = "tally-weights", value_name = "PROFILE")]
    weights: Option<PathBuf>,
    /// Compile for speed with the exact counts of PROFILE instead of instrumenting: clang's
    /// sample-profile PGO from a tally profile (or merged profiles) of a --tally-pgo build, or
    /// from the sample profile `tally report --export sample-profile` wrote (docs/pgo.md)
    #[arg(long = "tally-use", value_name = "PROFILE")]
    use_profile: Option<PathBuf>,
    /// With --tally-use of a .tally profile: a flat sample profile (one record per function,
    /// its inline instances summed) instead of a nested one; for measurements (docs/pgo.md)
    #[arg(long = "tally-use-flat", hide = true)]
    use_flat: bool,
    /// Print the commands run and instrumentation statistics per file
    #[arg(long = "tally-verbose", env = "TALLY_VERBOSE", value_parser = FalseyValueParser::new())]
    verbose: bool,
    /// The clang to run: $TALLY_CLANG / $TALLY_CLANGXX, else clang-19 / clang++-19 on PATH
    /// (other than tally itself, see `tally links`).
    #[arg(skip)]
    clang: PathBuf,
}

/// clang's option that gives every block a pseudo-probe.
const PROBES: &str = "-fpseudo-probe-for-profiling";
/// LLVM's option that keeps LICM from promoting memory to registers (`--tally-pgo`'s code
/// generation step).
const NO_PROMOTION: &str = "-disable-licm-promotion";

/// Old spellings of `--tally-*` options (without the prefix), and what they mean now.
const SPELLINGS: &[(&str, &str)] = &[("no-promote", "promote=off")];

fn find_clang(cxx: bool) -> PathBuf {
    let var = if cxx { "TALLY_CLANGXX" } else { "TALLY_CLANG" };
    if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let name = if cxx { "clang++-19" } else { "clang-19" };
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let cand = dir.join(name);
            // A `tally links` directory on PATH holds a clang-19 that is tally itself.
            if cand.is_file() && !crate::links::is_self(&cand) {
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

/// The parser of tally's options: every value is attached with `=` (`--tally-mode=edge`), as
/// the splitter only takes single words.
fn command(name: &'static str) -> clap::Command {
    Settings::command().name(name).mut_args(|a| {
        // An empty environment variable counts as unset, as it always has.
        let empty = a
            .get_env()
            .and_then(std::env::var_os)
            .is_some_and(|v| v.is_empty());
        let values = a.get_action().takes_values();
        let a = a.require_equals(values);
        if empty {
            a.env(None)
        } else {
            a
        }
    })
}

fn settings(cxx: bool, cl: &CommandLine) -> Result<Settings> {
    let words = cl.tally_opts.iter().map(|o| {
        let o = SPELLINGS
            .iter()
            .find(|(old, _)| old == o)
            .map_or(o.as_str(), |s| s.1);
        format!("--tally-{o}")
    });
    let mut s = command("tally cc")
        .try_get_matches_from(std::iter::once("tally cc".to_string()).chain(words))
        .and_then(|m| Settings::from_arg_matches(&m))
        .map_err(|e| anyhow!(one_line(&e, cl)))?;
    if let Some(path) = &s.weights {
        s.opts.weights = Some(std::sync::Arc::new(load_weights(path)?));
    }
    if let Some(dir) = s.opts.profile_dir.take() {
        s.opts.profile_dir = Some(absolute_profile_dir(dir)?);
    }
    // `--tally-NAME[=...]` was given.
    let given = |name: &str| {
        cl.tally_opts
            .iter()
            .any(|o| o.split('=').next() == Some(name))
    };
    // As gcc does for -fprofile-arcs: a -pthread command builds for threads, so its counters
    // are atomic unless --tally-atomic says otherwise. A non-atomic build that
    // runs threads anyway (glibc 2.34+ needs no -pthread) is flagged by the runtime.
    if pthread(cl) && !given("atomic") {
        s.opts.atomic = true;
    }
    // A training build is optimized after it is instrumented, and counters promoted before
    // optimization cost it more than they save (LLVM's LICM promotes what it can): off unless
    // asked for (docs/pgo.md: bzip2's training run x1.316 with, x1.093 without).
    if s.opts.pgo && !given("promote") && !given("no-promote") {
        s.opts.promote = false;
    }
    s.clang = find_clang(cxx);
    Ok(s)
}

/// `--tally-profile-dir=DIR` as baked in: a relative DIR is taken from the directory `tally cc`
/// runs in (a build directory), not from the program's directory at run time as clang's
/// `-fprofile-generate=DIR` does: the option is there so that the profile lands in one known
/// place whatever directory, and environment, the program is started with.
fn absolute_profile_dir(dir: String) -> Result<String> {
    if dir.starts_with('/') {
        return Ok(dir);
    }
    let cwd = std::env::current_dir().context("--tally-profile-dir: no current directory")?;
    let cwd = cwd
        .to_str()
        .ok_or_else(|| anyhow!("--tally-profile-dir: the current directory is not UTF-8"))?;
    Ok(format!("{}/{dir}", cwd.trim_end_matches('/')))
}

/// Whether the command builds for threads: its last `-pthread` / `-no-pthread` is `-pthread`.
fn pthread(cl: &CommandLine) -> bool {
    cl.words
        .iter()
        .rev()
        .find_map(|w| match w {
            Word::Opt(o) if o[0] == "-pthread" || o[0] == "--pthread" => Some(true),
            Word::Opt(o) if o[0] == "-no-pthread" => Some(false),
            _ => None,
        })
        .unwrap_or(false)
}

/// clap's error, on one line: which option (or environment variable) and value, what is wrong,
/// and the valid values where there is a list.
fn one_line(e: &clap::Error, cl: &CommandLine) -> String {
    let ctx = |k: ContextKind| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) => Some(v.join(", ")),
        _ => None,
    };
    // "--tally-mode=<MODE>", "--tally-promote[=<on|off>]": the option as clap shows it.
    let shown = ctx(ContextKind::InvalidArg).unwrap_or_default();
    let name: String = shown
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '-')
        .collect();
    let cmd = Settings::command();
    let arg = cmd.get_arguments().find(|a| {
        a.get_long()
            .is_some_and(|l| name.strip_prefix("--") == Some(l))
    });
    let valid = arg
        .map(|a| {
            let v: Vec<_> = a.get_possible_values().into_iter().collect();
            v.iter()
                .map(|v| v.get_name())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .filter(|v| !v.is_empty())
        .map(|v| format!(" (possible values: {v})"));
    match (e.kind(), ctx(ContextKind::InvalidValue)) {
        (ErrorKind::UnknownArgument, _) => match ctx(ContextKind::SuggestedArg) {
            Some(s) => format!("unknown option {name} (did you mean {s}?)"),
            None => format!("unknown option {name} (see tally cc --help)"),
        },
        (ErrorKind::NoEquals, _) => format!("{shown}: missing value{}", valid.unwrap_or_default()),
        (ErrorKind::InvalidValue | ErrorKind::ValueValidation, Some(value)) if arg.is_some() => {
            // Given as an option, or else taken from the environment.
            let given = cl
                .tally_opts
                .iter()
                .any(|o| name.strip_prefix("--tally-") == o.split('=').next());
            let whence = match arg.and_then(|a| a.get_env()) {
                Some(var) if !given => format!("{}={value}", var.to_string_lossy()),
                _ => format!("{name}={value}"),
            };
            let why = match (valid, std::error::Error::source(e)) {
                (Some(valid), _) => valid,
                (None, Some(why)) => format!(" ({why})"),
                (None, None) => String::new(),
            };
            format!("{whence}: invalid value '{value}'{why}")
        }
        // Anything else: clap's first line, which names the option.
        _ => e
            .render()
            .to_string()
            .lines()
            .next()
            .unwrap_or("bad --tally- option")
            .trim_start_matches("error: ")
            .to_string(),
    }
}

/// The command whose long help `tally cc --help` prints (and docs/usage.md shows), and the
/// clang whose help follows it.
pub(crate) fn help_command(cxx: bool) -> (clap::Command, &'static str) {
    let (name, clang) = if cxx {
        ("tally c++", "clang++-19")
    } else {
        ("tally cc", "clang-19")
    };
    let cmd = command(name).override_usage(format!(
        "{name} [--tally-OPTION]... [{clang} OPTION]... FILE..."
    ));
    (cmd, clang)
}

/// Prints the help of tally's own options, and a line saying that clang's help follows.
fn print_help(cxx: bool) -> Result<()> {
    let (mut cmd, clang) = help_command(cxx);
    let help = cmd.render_long_help();
    let mut out = std::io::stdout().lock();
    write!(
        out,
        "{help}\nAll other options go to {clang}; its help follows.\n\n"
    )
    .and_then(|()| out.flush())
    .context("cannot write to stdout")
}

/// Edge frequencies of every function of a profile, for `--tally-weights` (Ball & Larus 1994 §6.4,
/// Exact-Max placement). The profile must determine every edge count (edge or edges-naive).
fn load_weights(path: &Path) -> Result<tally_llvm::Weights> {
    let p = tally_format::profile::Profile::read_file(path)
        .with_context(|| format!("--tally-weights={}", path.display()))?;
    let r = tally_report::analyze(&p, &tally_report::Inputs::default())
        .with_context(|| format!("--tally-weights={}", path.display()))?;
    let mut w = tally_llvm::Weights::new();
    // Functions whose counts are inconsistent give no weights: they use the heuristic's.
    for f in r.functions.iter().filter(|f| f.inconsistent.is_none()) {
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
    run_clang(&s.clang, args, s.verbose)
}

/// Runs `clang` on `args` (printed first when `verbose`); its exit status.
pub(crate) fn run_clang(clang: &Path, args: &[OsString], verbose: bool) -> Result<i32> {
    if verbose {
        let line: Vec<_> = args.iter().map(|a| a.to_string_lossy()).collect();
        eprintln!("tally: {} {}", clang.display(), line.join(" "));
    }
    let status = Command::new(clang)
        .args(args)
        .status()
        .with_context(|| format!("cannot run {}", clang.display()))?;
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

/// The last option that sets the debug-information level asks for some (`-g`, `-g2`, `-gmlt`,
/// `-ggdb`, `-gdwarf-4`, ...; not `-g0`, nor `-gsplit-dwarf`, `-gno-...` and the like, which
/// only shape what another option asks for).
fn gives_debug_info(cl: &CommandLine) -> bool {
    let mut gives = false;
    for w in &cl.words {
        let Word::Opt(o) = w else { continue };
        match o[0].to_string_lossy().strip_prefix("-g") {
            Some("0" | "gdb0") => gives = false,
            Some(
                ""
                | "1"
                | "2"
                | "3"
                | "gdb"
                | "gdb1"
                | "gdb2"
                | "gdb3"
                | "lldb"
                | "sce"
                | "dbx"
                | "mlt"
                | "line-tables-only"
                | "line-directives-only"
                | "full"
                | "used"
                | "codeview"
                | "dwarf",
            ) => gives = true,
            Some(r) if r.starts_with("dwarf-") => gives = true,
            _ => {}
        }
    }
    gives
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

/// The value of the last `opt VALUE` / `optVALUE` option.
fn opt_value(cl: &CommandLine, opt: &str) -> Option<OsString> {
    cl.words.iter().rev().find_map(|w| match w {
        Word::Opt(o) if o[0] == opt => o.get(1).cloned(),
        _ => None,
    })
}

/// With `--coverage` / `-ftest-coverage` / `-fprofile-arcs`, the gcov notes (`.gcno`) and data
/// (`.gcda`) file names clang would give this source, as cc1 options for the first step.
/// clang derives them from the output it is asked for; the first step's output is tally's
/// temporary bitcode, so tally names them instead: next to the object with `-c`/`-S`
/// (`a.o` -> `a.gcno`), `<output>-<source stem>` when linking (`-o prog a.c` ->
/// `prog-a.gcno`), `<dumpdir><source stem>` with `-dumpdir`; absolute, as clang's.
fn coverage_files(cl: &CommandLine, job: &Job) -> Vec<OsString> {
    let last = |on: &str, off: &str| {
        cl.words.iter().rev().find_map(|w| match w {
            Word::Opt(o) if o[0] == on => Some(true),
            Word::Opt(o) if o[0] == off => Some(false),
            _ => None,
        }) == Some(true)
    };
    let all = has_opt(cl, |o| o == "--coverage" || o == "-coverage");
    let notes = all || last("-ftest-coverage", "-fno-test-coverage");
    // -fprofile-generate=DIR puts the data file elsewhere: clang's business.
    let data = (all || last("-fprofile-arcs", "-fno-profile-arcs"))
        && !has_opt(cl, |o| o.starts_with("-fprofile-generate"));
    if !notes && !data {
        return Vec::new();
    }
    let src_name = Path::new(job.src)
        .file_name()
        .map_or_else(|| OsString::from("-"), |n| n.to_owned());
    let dumpdir = opt_value(cl, "-dumpdir").or_else(|| {
        (cl.action == Action::Link).then(|| {
            let mut d = cl.output.clone().unwrap_or_else(|| "a".into());
            d.push("-");
            d
        })
    });
    let mut stem = match dumpdir {
        Some(mut d) => {
            d.push(&src_name);
            PathBuf::from(d)
        }
        None => job.out.clone(),
    };
    if stem.is_relative() {
        if let Ok(cwd) = std::env::current_dir() {
            stem = cwd.join(stem);
        }
    }
    let mut out = Vec::new();
    for (on, ext, opt) in [
        (notes, "gcno", "-coverage-notes-file="),
        (data, "gcda", "-coverage-data-file="),
    ] {
        if on {
            let mut v = OsString::from(opt);
            v.push(stem.with_extension(ext));
            out.extend(["-Xclang".into(), v]);
        }
    }
    out
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

    // 1. Optimize to bitcode with the user's flags (`--tally-pgo`: unoptimized, with the
    //    pseudo-probe options; the probes go in during instrumentation).
    let mut a = flags(cl, false);
    if s.opts.pgo {
        a.retain(|o| o.as_os_str() != PROBES);
        a.extend([
            PROBES.into(),
            "-Xclang".into(),
            "-disable-llvm-passes".into(),
        ]);
        // The rebuild tracks source locations even without `-g` (clang does for
        // `-fprofile-sample-use`), and the probe pass places a block's probe by them: without
        // locations it goes before the terminator, after a call to `exit`, where it never runs.
        // So the training build has line tables unless `-g` gives more.
        if !gives_debug_info(cl) {
            a.push("-gline-tables-only".into());
        }
    }
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
    a.extend(coverage_files(cl, job));
    if let Some(x) = x {
        a.extend(["-x".into(), OsString::from(x)]);
    }
    a.push(src.clone());
    a.push("-Wno-unused-command-line-argument".into());
    // `TALLY_IR_CACHE`: a step 1 that writes only the bitcode may come from an earlier build.
    let cache = (src != "-" && !wants_deps && coverage_files(cl, job).is_empty())
        .then(|| crate::ircache::entry(&s.clang, &a))
        .flatten();
    let input = match cache.as_ref().and_then(|c| c.get()) {
        Some(bytes) => {
            if std::env::var_os("TALLY_KEEP_TEMPS").is_some() {
                std::fs::write(&bc, &bytes)
                    .with_context(|| format!("cannot write {}", bc.display()))?;
            }
            bytes
        }
        None => {
            a.extend(["-o".into(), bc.clone().into_os_string()]);
            let code = run(s, &a)?;
            if code != 0 {
                return Ok(Some(code));
            }
            let bytes =
                std::fs::read(&bc).with_context(|| format!("cannot read {}", bc.display()))?;
            if let Some(c) = &cache {
                c.put(&bytes);
            }
            bytes
        }
    };

    // 2. Instrument.
    // A source on stdin (`-x c -`) was read by clang above; clang calls it `<stdin>`.
    let source = if src == "-" {
        PathBuf::from("<stdin>")
    } else {
        std::env::current_dir()
            .map(|d| d.join(src))
            .unwrap_or_else(|_| PathBuf::from(src))
    };
    let opts = tally_llvm::Options {
        source: source.to_string_lossy().into_owned(),
        ..s.opts.clone()
    };
    let t0 = std::time::Instant::now();
    let done = tally_llvm::instrument(&input, &opts)?;
    if let Some(w) = &s.opts.weights {
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
            "tally: {} [{}]: {} functions ({} skipped, {} with measured weights), {} blocks, {} edges, {} counters ({} tagged, {} on split edges), {} shadow frames, {} promoted counters in {} loops, {} SESE counters ({} trip counts, {} found by ScalarEvolution; {} candidates in {} loops, {} unprofitable), {:.0} ms",
            Path::new(src).display(),
            s.opts.mode.name(),
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
            st.sese_replaced,
            st.sese_trips,
            st.sese_scev,
            st.sese_candidates,
            st.loops,
            st.sese_unprofitable,
            t0.elapsed().as_secs_f64() * 1000.0
        );
        // Modes that profile paths say how each function's paths are kept.
        if !done.path_fallbacks.is_empty()
            || done.meta.functions.iter().any(|f| f.paths().is_some())
        {
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

    // 3. Generate code from the instrumented IR, without further IR passes (`--tally-pgo`:
    //    the user's optimization pipeline, less the probe pass that already ran).
    let mut a = flags(cl, true);
    a.push(if asm { "-S" } else { "-c" }.into());
    a.extend(["-x".into(), "ir".into(), inst.into_os_string()]);
    a.extend(["-o".into(), out.as_os_str().to_owned()]);
    if s.opts.pgo {
        a.retain(|o| o.as_os_str() != PROBES);
        // LICM keeps a loop's counter in a register across the loop when nothing else in it
        // may write the counter, and the register allocator then spills it in a loop that
        // lacks registers: off, the training run costs 0.458 of IR PGO's training run's
        // overhead instead of 0.494 on the PGO suite's geomean (docs/pgo.md, "Training cost";
        // bench/pgo_training.py). It changes what the training costs, never its counts.
        // Unless the command sets it (an option given twice is an error).
        if !a
            .iter()
            .any(|o| o.to_string_lossy().starts_with(NO_PROMOTION))
        {
            a.extend(["-mllvm".into(), NO_PROMOTION.into()]);
        }
    } else {
        a.extend(["-Xclang".into(), "-disable-llvm-passes".into()]);
    }
    a.push("-Wno-unused-command-line-argument".into());
    let code = run(s, &a)?;
    Ok((code != 0).then_some(code))
}

/// The runtime archive to link: `$TALLY_RUNTIME` if set, else a copy the driver wrote or
/// verified byte for byte (`rtcache`): in the user's private cache, or in `tmp`, this build's
/// private temporary directory. A shared object gets the archive with general-dynamic
/// thread-locals, which takes no static TLS (glibc grants `dlopen`ed objects only a small
/// surplus of it: about ten objects with the other archive's 168 bytes), unless the link is
/// in a trace mode (the trace's copies address one another's thread-locals at their fixed
/// offsets from the thread pointer; see `TALLY_TLS_MODEL` in `tally.h`).
fn runtime_archive(s: &Settings, cl: &CommandLine, tmp: &Path) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("TALLY_RUNTIME").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    crate::rtcache::archive(tmp, runtime_kind(s, cl))
}

/// Which runtime archive a link step needs (see `runtime_archive`).
fn runtime_kind(s: &Settings, cl: &CommandLine) -> crate::rtcache::Runtime {
    use tally_format::Mode;
    let shared = has_opt(cl, |o| o == "-shared" || o == "--shared");
    let traces = matches!(s.opts.mode, Mode::Trace | Mode::TraceNaive);
    if shared && !traces {
        crate::rtcache::Runtime::Dynamic
    } else {
        crate::rtcache::Runtime::Static
    }
}

/// Runs `tally cc` (`cxx == false`) or `tally c++` with the given arguments; returns the exit
/// code to use.
pub fn main(cxx: bool, argv: &[OsString]) -> Result<i32> {
    let cl = args::parse(argv);
    if has_opt(&cl, |o| o == "--help" || o == "-help") {
        // tally's options first, then clang's own help (a pass-through).
        print_help(cxx)?;
    }
    let s = settings(cxx, &cl)?;
    let passthrough_args = || crate::pgo::words(&cl);
    if let Some(profile) = &s.use_profile {
        // The optimized rebuild: no instrumentation, no runtime (so LTO is fine too).
        let tmp = tempdir()?;
        let compiles = cl.words.iter().any(|w| w.source_lang().is_some());
        let sample = match compiles {
            true => crate::pgo::sample_file(profile, tmp.path(), !s.use_flat)?,
            false => None,
        };
        return crate::pgo::run(&s.clang, passthrough_args(), sample.as_deref(), s.verbose);
    }
    if let (Some(lto), false) = (&cl.lto, cl.action == Action::PassThrough) {
        bail!("{lto} is not supported: tally instruments each file's optimized IR before linking");
    }
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
            a.push(runtime_archive(&s, &cl, tmp.path())?.into_os_string());
            a.push("-Wno-unused-command-line-argument".into());
            run(&s, &a)
        }
    }
}

/// A new private (0700) directory under the temporary directory, removed on drop.
pub(crate) fn tempdir() -> Result<TempDir> {
    let base = std::env::temp_dir();
    for n in 0..1000u32 {
        let p = base.join(format!("tally-{}-{}", std::process::id(), n));
        // Private (0700): the runtime archive may be written here.
        if std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&p)
            .is_ok()
        {
            return Ok(TempDir(p));
        }
    }
    bail!("cannot create a temporary directory in {}", base.display())
}

/// A directory removed on drop.
pub(crate) struct TempDir(PathBuf);
impl TempDir {
    pub(crate) fn path(&self) -> &Path {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `tally cc` with these `--tally-*` words (and clang's `-c a.c`).
    fn parse(tally: &[&str]) -> Result<Settings> {
        let argv: Vec<OsString> = tally.iter().chain(&["-c", "a.c"]).map(Into::into).collect();
        settings(false, &args::parse(&argv))
    }

    #[test]
    fn parser_is_well_formed() {
        command("tally cc").debug_assert();
    }

    #[test]
    fn defaults_are_those_of_the_library() {
        if std::env::var_os("TALLY_MODE").is_some() {
            return;
        }
        let s = parse(&[]).unwrap();
        assert_eq!(
            format!("{:?}", s.opts),
            format!("{:?}", tally_llvm::Options::default())
        );
    }

    #[test]
    fn every_spelling_of_promote() {
        for (word, on) in [
            ("--tally-promote", true),
            ("--tally-promote=on", true),
            ("--tally-promote=off", false),
            ("--tally-no-promote", false),
        ] {
            assert_eq!(parse(&[word]).unwrap().opts.promote, on, "{word}");
        }
        // The last word wins, as clang's own options do.
        let s = parse(&["--tally-no-promote", "--tally-promote"]).unwrap();
        assert!(s.opts.promote);
        // Off by default in a training build, unless asked for.
        assert!(!parse(&["--tally-pgo"]).unwrap().opts.promote);
        assert!(
            parse(&["--tally-pgo", "--tally-promote"])
                .unwrap()
                .opts
                .promote
        );
    }

    /// `-pthread` turns atomic increments on unless `--tally-atomic` says otherwise.
    #[test]
    fn pthread_means_atomic() {
        let with = |words: &[&str]| {
            let argv: Vec<OsString> = words.iter().chain(&["-c", "a.c"]).map(Into::into).collect();
            settings(false, &args::parse(&argv)).unwrap().opts.atomic
        };
        assert!(!with(&[]));
        assert!(with(&["-pthread"]));
        assert!(!with(&["-pthread", "-no-pthread"]));
        assert!(!with(&["-pthread", "--tally-atomic=off"]));
        assert!(!with(&["--tally-atomic=off", "-pthread"]));
        assert!(with(&["--tally-atomic"]));
        assert!(with(&["--tally-atomic=on"]));
    }

    #[test]
    fn a_relative_profile_dir_is_taken_from_the_build_directory() {
        let cwd = std::env::current_dir().unwrap();
        let s = parse(&["--tally-profile-dir=out/%p"]).unwrap();
        let want = format!("{}/out/%p", cwd.to_str().unwrap().trim_end_matches('/'));
        assert_eq!(s.opts.profile_dir.as_deref(), Some(want.as_str()));
        let s = parse(&["--tally-profile-dir=/abs"]).unwrap();
        assert_eq!(s.opts.profile_dir.as_deref(), Some("/abs"));
        assert!(parse(&["--tally-profile-dir="]).is_err());
    }

    #[test]
    fn options_reach_the_library_options() {
        let s = parse(&[
            "--tally-mode=path",
            "--tally-mode=vertex",
            "--tally-atomic",
            "--tally-atomic",
            "--tally-no-shadow",
            "--tally-weighting=estimate",
            "--tally-events=mem",
            "--tally-early-exits=derive",
            "--tally-jump-cost=1.5",
            "--tally-verbose",
        ])
        .unwrap();
        let o = &s.opts;
        assert_eq!(o.mode, tally_format::Mode::Vertex);
        assert!(o.atomic && !o.shadow && s.verbose);
        assert_eq!(o.weighting, tally_llvm::Weighting::Estimate);
        assert_eq!(o.events, tally_llvm::EventKind::Mem);
        assert_eq!(o.early_exits, tally_llvm::EarlyExits::Derive);
        assert_eq!(o.jump_cost, 1.5);
    }

    #[test]
    fn errors_are_one_line() {
        for (word, want) in [
            ("--tally-x", "unknown option --tally-x"),
            (
                "--tally-mode",
                "--tally-mode=<MODE>: missing value (possible values: edge,",
            ),
            (
                "--tally-weighting=x",
                "--tally-weighting=x: invalid value 'x' (possible values: estimate, loops)",
            ),
            (
                "--tally-jump-cost=inf",
                "--tally-jump-cost=inf: invalid value 'inf' (not a non-negative number)",
            ),
            (
                "--tally-atomic=1",
                "--tally-atomic=1: invalid value '1' (possible values: on, off)",
            ),
        ] {
            let e = parse(&[word]).unwrap_err().to_string();
            assert!(e.starts_with(want), "{word}: {e}");
            assert_eq!(e.lines().count(), 1, "{word}: {e}");
        }
    }
}
