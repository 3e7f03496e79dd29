//! `tally`: an exact profiler for C and C++.
//!
//! `tally cc` / `tally c++` are drop-in compilers; `tally report` turns the profile a run
//! wrote into exact counts. `main` is a thin shell: it parses the command line into options and
//! hands them to the library crates; errors print one line and exit with status 2.

mod args;
mod driver;
mod links;
mod progress;
mod rtcache;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::io::Write as _;
use std::path::PathBuf;
use tally_format::profile::{Profile, ProfileError};

#[derive(Parser)]
#[command(
    name = "tally",
    version,
    about = "An exact profiler for C and C++",
    long_about = long_about()
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

/// `tally --help`'s description; the modes come from their table.
fn long_about() -> String {
    let modes: Vec<_> = tally_format::Mode::all().map(|m| m.name()).collect();
    format!(
        "An exact profiler for C and C++.\n\n\
        Build with `tally cc` / `tally c++` in place of your compiler (they take clang's options; \
        `--tally-mode={}` or TALLY_MODE picks the instrumentation, `tally cc --help` lists \
        tally's options), run the program (it writes <program>.tally, or $TALLY_PROFILE with %p \
        for the pid), then `tally report <program>.tally`.",
        modes.join("|")
    )
}

#[derive(Subcommand)]
enum Cmd {
    /// Compile and link C like clang-19, with instrumentation (all arguments go to the driver;
    /// `tally cc --help` lists tally's options).
    Cc {
        /// clang arguments
        #[arg(allow_hyphen_values = true, trailing_var_arg = true)]
        args: Vec<OsString>,
    },
    /// Compile and link C++ like clang++-19, with instrumentation.
    #[command(name = "c++")]
    Cxx {
        /// clang++ arguments
        #[arg(allow_hyphen_values = true, trailing_var_arg = true)]
        args: Vec<OsString>,
    },
    /// Exact block and edge counts from one or more profiles of the same build.
    Report(ReportArgs),
    /// Annotated source: every line with how many times it ran (like `llvm-cov show`).
    Show(ShowArgs),
    /// The hottest acyclic paths of a path profile (built with --tally-mode=path).
    Paths(PathsArgs),
    /// The executed block sequence of each thread, regenerated from a witness trace
    /// (built with --tally-mode=trace) and the profile of the same run.
    Trace(TraceArgs),
    /// Score counter placements on a profile's measured counts (paper 000 §6, Graphs 2-4):
    /// every block, every edge, spanning-tree chords under heuristic, measured and worst
    /// weights, Vprof(Ecnt), Knuth-Stevenson Vprof(Vcnt). Needs an edge or edges-naive profile.
    Placements(ProfilesArgs),
    /// What changed between two profiles of the same build (or of builds whose functions match
    /// by graph hash): functions, blocks, source lines and paths whose counts differ, largest
    /// change first, and the paths run in one and not the other. Exit status 0 when every count
    /// is the same, 1 when not, 2 on error.
    Diff(DiffArgs),
    /// Compare the counts of a build made with --tally-oracle with the oracle's counts of the
    /// same run (every edge counted, in the same binary): per function equal, flagged by the
    /// mode, or different. Exit status 0 when no count differs, 1 when some does, 2 on error.
    Check(ProfilesArgs),
    /// A static HTML site of the counts (works from file://): directory tree and file list
    /// with coverage, annotated source with a heat scale, control-flow graphs.
    Html(HtmlArgs),
    /// Add profiles of the same build into one; with --by-program, a directory of profiles of
    /// many programs into one profile per program.
    Merge {
        /// Output file (with --by-program: output directory, created if missing).
        #[arg(short, long)]
        output: PathBuf,
        /// Group the inputs by the build that wrote them (program path, build id and module
        /// hashes) and write DIR/<program>-<build id>.tally per group; unreadable inputs are
        /// listed and make the exit status 2, the rest is still merged.
        #[arg(long)]
        by_program: bool,
        /// Profiles to add (with --by-program also directories: their *.tally files).
        #[arg(required = true)]
        profiles: Vec<PathBuf>,
    },
    /// Print the C header of the runtime API (tally_write_profile, ...).
    Header,
    /// Create compiler entry points named like clang in DIR (clang-19, clang++-19, cc, c++:
    /// symbolic links to this binary) for build systems that infer the toolchain from the
    /// compiler's name: `CC=DIR/clang-19` makes CMake pick the same llvm-ar-19, llvm-nm-19, ...
    /// as `CC=clang-19`; `PATH=DIR:$PATH` makes tally the default compiler.
    Links {
        /// Directory to create them in (created if missing).
        dir: PathBuf,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
}

#[derive(clap::Args)]
struct ReportArgs {
    /// Profiles (several are added; they must come from the same build).
    #[arg(required = true)]
    profiles: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Functions in the summary table (0 = all).
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Functions shown with their blocks and edges (0 = all).
    #[arg(long, default_value_t = 5)]
    detail: usize,
    /// Blocks and edges shown per detailed function (0 = all).
    #[arg(long, default_value_t = 10)]
    blocks: usize,
    /// Show everything: all functions, all blocks, functions that never ran.
    #[arg(long)]
    all: bool,
    /// Do not quote source lines next to blocks.
    #[arg(long)]
    no_source: bool,
    /// Source lines instead of blocks: line, branch and function coverage per file, the
    /// hottest lines, the source functions (inlined ones included). With --format json: adds
    /// `files` and `source_functions` to the report.
    #[arg(long)]
    lines: bool,
    /// Export the source-level counts in another format instead of the report: an LCOV
    /// tracefile or Cobertura XML.
    #[arg(long, value_enum, conflicts_with_all = ["format", "lines"])]
    export: Option<Export>,
    /// A witness trace (`--tally-mode=trace`) of the run that wrote the profile: the counts are
    /// those of its regenerated execution, as an `edge` profile would give them.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Export {
    Lcov,
    Cobertura,
}

#[derive(clap::Args)]
struct ShowArgs {
    /// The profile.
    #[arg(required = true)]
    profile: PathBuf,
    /// Source files to show (a path, or its last components); when none are given, every file
    /// but the system headers (under /usr/include and /usr/lib), which a closing note names.
    files: Vec<String>,
    /// Only the lines of source functions whose name (source, linkage or demangled) matches
    /// this regular expression.
    #[arg(long)]
    function: Option<String>,
    /// Show the counts of every branch outcome under its line.
    #[arg(long)]
    branches: bool,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

#[derive(clap::Args)]
struct PathsArgs {
    /// Profiles (several are added; they must come from the same build).
    #[arg(required = true)]
    profiles: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Paths listed per ranking (0 = all; default 10 in text; the JSON lists every path, or
    /// with --top the hottest interprocedural paths).
    #[arg(long)]
    top: Option<usize>,
    /// Only functions (path mode) or interprocedural paths through functions (ipath modes)
    /// whose name matches this regular expression (symbol or demangled).
    #[arg(long, value_name = "REGEX")]
    function: Option<String>,
    /// Do not quote source lines.
    #[arg(long)]
    no_source: bool,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

#[derive(clap::Args)]
struct HtmlArgs {
    /// Output directory (created if missing; pages already there are replaced).
    #[arg(short, long)]
    output: PathBuf,
    /// Profiles (several are added; they must come from the same build).
    #[arg(required = true)]
    profiles: Vec<PathBuf>,
    /// A witness trace (`--tally-mode=trace`) of the run that wrote the profile: the site
    /// shows the counts of its regenerated execution.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
}

#[derive(clap::Args)]
struct TraceArgs {
    /// The trace file (TALLY_TRACE, default <program>.trace).
    trace: PathBuf,
    /// The profile the same run wrote (default: the trace's path with `.tally` for `.trace`).
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Skip the first N shown blocks.
    #[arg(long, default_value_t = 0)]
    from: usize,
    /// Show at most N blocks (0 = all); regeneration stops after the last one shown. With
    /// --paths and --stats, how many rows per ranking (also as --top, as `tally paths` says).
    #[arg(long, alias = "top", default_value_t = 0)]
    limit: usize,
    /// Only blocks of functions whose name matches this regular expression.
    #[arg(long)]
    function: Option<String>,
    /// Cut the regenerated execution into Ball-Larus paths, numbered as `path` mode numbers
    /// them, and print them as `tally paths` does (--limit: paths per ranking, 0 = all;
    /// --function: only those functions).
    #[arg(long)]
    paths: bool,
    /// Instead of the blocks, where the trace's bits go: bits by record kind (witnesses by
    /// width, Enter, Back, Unwind, End, the rest of the file) per executed conditional branch,
    /// and the functions whose witnesses take the most bits (--limit: how many, 0 = all).
    #[arg(long, conflicts_with = "paths")]
    stats: bool,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

#[derive(clap::Args)]
struct DiffArgs {
    /// The first profile (A).
    a: PathBuf,
    /// The second profile (B).
    b: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Items listed per section in text output (0 = all); JSON lists everything.
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// The arguments of `placements` and `check`: profiles, a format, an output file.
#[derive(clap::Args)]
struct ProfilesArgs {
    /// Profiles (several are added; they must come from the same build).
    #[arg(required = true)]
    profiles: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// Exit status of `report`, `paths`, `placements`, `show` and `html` when the output is
/// complete except for functions whose counts are inconsistent (named on stderr).
const EXIT_INCONSISTENT: i32 = 3;

/// Exit status of `report`, `paths` and `placements` for an unfinished continuous-mode profile
/// (the program was killed): exact for every function that was not active at the kill; those
/// whose counts break the flow law are named on stderr as interrupted.
const EXIT_UNFINISHED: i32 = 4;

/// Exit status of `report`, `paths`, `placements`, `show` and `html` for a profile whose code
/// built without atomic increments ran in a multi-threaded process (header flag `raced`): any
/// of its counts may have lost updates, balanced or not.
const EXIT_RACED: i32 = 5;

/// Exit status of `report`, `paths`, `placements`, `show` and `html` for a profile written by
/// the fatal-signal handler: functions active at the signal (in any thread) may have inexact
/// counts, named as inconsistent when their flow does not balance. When several statuses
/// apply, the first of 4, 6, 5, 3 is given (each cause has its stderr line).
const EXIT_SIGNALED: i32 = 6;

/// Names every function whose counts could not be recovered, one stderr line each, then says
/// what usually causes it; returns the exit status.
fn warn_inconsistent(r: &tally_report::Report) -> i32 {
    let word = r.unrecovered_word();
    if r.unfinished {
        eprintln!(
            "tally: unfinished continuous-mode profile (the program was killed): functions that were not active at the kill are exact; those active at the kill have partial counts, named below as interrupted when their flow does not balance"
        );
    }
    for line in r.caveats() {
        eprintln!("tally: {line}");
    }
    let mut n = 0;
    for f in r.inconsistent() {
        n += 1;
        eprintln!(
            "tally: {word} counts in function {} ({}), shown as unknown: {}",
            f.demangled,
            f.module,
            f.inconsistent.as_deref().unwrap_or_default()
        );
    }
    if r.unfinished {
        return EXIT_UNFINISHED;
    }
    if r.signal.is_some() {
        return EXIT_SIGNALED;
    }
    if r.raced {
        return EXIT_RACED;
    }
    if n == 0 {
        return 0;
    }
    eprintln!(
        "tally: {n} function(s) with inconsistent counts; the rest is exact. Threads that run instrumented code need a build with --tally-atomic, and a process that ends in the middle of a function (a fault, a signal or another thread stopped between calls) leaves that function inconsistent"
    );
    EXIT_INCONSISTENT
}

/// How a report names its inputs: `a.tally + b.tally`.
fn title(profiles: &[PathBuf]) -> String {
    profiles
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" + ")
}

fn placements(a: ProfilesArgs) -> Result<i32> {
    let profile = read_for_report(&a.profiles)?;
    let title = title(&a.profiles);
    let r = tally_report::analyze(&profile, &tally_report::Inputs::default())?;
    let s = tally_report::placements::score(&r);
    if s.functions == 0 {
        anyhow::bail!(
            "{title}: no function has every edge count; use a profile of an edge or edges-naive build"
        );
    }
    let out = match a.format {
        Format::Json => tally_report::placements::json(&s, &title, &r.program),
        Format::Text => tally_report::placements::text(&s, &title, &r.program),
    };
    write_out(a.output.as_ref(), out.as_bytes())?;
    Ok(warn_inconsistent(&r))
}

/// `tally check`: 0 when no count differs from the same-run oracle's, 1 when some does.
fn check(a: ProfilesArgs) -> Result<i32> {
    let profile = read_profiles(&a.profiles)?;
    let c = tally_report::check::check(&profile)?;
    let title = title(&a.profiles);
    let out = match a.format {
        Format::Json => tally_report::check::json(&c, &title),
        Format::Text => tally_report::check::text(&c, &title),
    };
    write_out(a.output.as_ref(), out.as_bytes())?;
    Ok(i32::from(!c.passed()))
}

/// `tally diff A B`: 0 when every count is the same, 1 when not.
fn diff(a: DiffArgs) -> Result<i32> {
    let none = tally_report::Inputs::default();
    let ra = tally_report::analyze(&read_for_report(std::slice::from_ref(&a.a))?, &none)?;
    let rb = tally_report::analyze(&read_for_report(std::slice::from_ref(&a.b))?, &none)?;
    let (ma, mb) = (
        tally_report::source::model(&ra),
        tally_report::source::model(&rb),
    );
    let lines = (!ma.files.is_empty() && !mb.files.is_empty()).then_some((&ma, &mb));
    let d = tally_report::diff::diff(&ra, &rb, lines);
    let (na, nb) = (a.a.display().to_string(), a.b.display().to_string());
    let out = match a.format {
        Format::Json => tally_report::diff::json(&d, &na, &nb),
        Format::Text => tally_report::diff::text(&d, &na, &nb, a.top),
    };
    write_out(a.output.as_ref(), out.as_bytes())?;
    Ok(if d.equal() { 0 } else { 1 })
}

fn paths(a: PathsArgs) -> Result<i32> {
    let profile = read_for_report(&a.profiles)?;
    let title = title(&a.profiles);
    let mut r = tally_report::analyze(&profile, &tally_report::Inputs::default())?;
    let filter = match &a.function {
        Some(re) => Some(regex_lite::Regex::new(re).with_context(|| format!("--function {re}"))?),
        None => None,
    };
    let matches = |name: &str, demangled: &str| {
        filter
            .as_ref()
            .is_none_or(|f| f.is_match(name) || f.is_match(demangled))
    };
    if filter.is_some() {
        r.functions.retain(|f| matches(&f.name, &f.demangled));
    }
    let sel = tally_report::ipaths::Select {
        top: a.top.filter(|&n| n > 0),
        function: filter
            .is_some()
            .then_some(&matches as &dyn Fn(&str, &str) -> bool),
    };
    let out = match a.format {
        Format::Json => tally_report::render::paths_json_with(&r, &title, &sel),
        Format::Text => {
            let top = a.top.unwrap_or(10);
            let sel = tally_report::ipaths::Select {
                top: (top > 0).then_some(top),
                ..sel
            };
            tally_report::render::paths_text_with(&r, &title, top, !a.no_source, &sel)
        }
    };
    write_out(a.output.as_ref(), out.as_bytes())?;
    Ok(warn_inconsistent(&r))
}

fn trace(a: TraceArgs) -> Result<i32> {
    let profile_path = a
        .profile
        .clone()
        .unwrap_or_else(|| a.trace.with_extension("tally"));
    let profile = read_profile(&profile_path, None)?;
    let bytes = read_trace(&a.trace)?;
    let filter = match &a.function {
        Some(re) => Some(regex_lite::Regex::new(re).with_context(|| format!("--function {re}"))?),
        None => None,
    };
    if a.paths {
        return trace_paths(&a, &profile_path, &profile, &bytes, filter.as_ref());
    }
    if a.stats {
        let s = tally_report::wtrace::stats::stats(&bytes, &profile, a.limit)
            .map_err(|e| anyhow::anyhow!("{}: {e}", a.trace.display()))?;
        let out = match a.format {
            Format::Json => tally_report::wtrace::stats::json(&s),
            Format::Text => tally_report::wtrace::stats::render(&s),
        };
        write_out(a.output.as_ref(), out.as_bytes())?;
        return Ok(i32::from(!s.stopped.is_empty()));
    }
    // Written as regeneration goes: a long trace never sits in memory block by block.
    let file = match a.output.as_ref() {
        Some(p) => Some(
            std::fs::File::create(p).with_context(|| format!("cannot write {}", p.display()))?,
        ),
        None => None,
    };
    let mut w: std::io::BufWriter<Box<dyn std::io::Write>> = std::io::BufWriter::with_capacity(
        1 << 16,
        match file {
            Some(f) => Box::new(f),
            None => Box::new(std::io::stdout().lock()),
        },
    );
    let (stopped, err) = tally_report::wtrace::render_trace(
        &bytes,
        &profile,
        |name| filter.as_ref().is_none_or(|f| f.is_match(name)),
        a.from,
        a.limit,
        matches!(a.format, Format::Json),
        &mut w,
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", a.trace.display()))?;
    let err = err.map_or_else(|| w.flush().err(), Some);
    match (err, a.output.as_ref()) {
        (None, _) => {}
        (Some(e), None) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        (Some(e), Some(p)) => {
            return Err(e).with_context(|| format!("cannot write {}", p.display()))
        }
        (Some(e), None) => return Err(e).context("cannot write to stdout"),
    }
    Ok(i32::from(!stopped.is_empty()))
}

/// `tally trace --paths`: the regenerated execution cut into paths, rendered as `tally paths`
/// renders a path profile; threads that stopped early and uncounted paths are said on stderr
/// (exit status 1).
fn trace_paths(
    a: &TraceArgs,
    profile_path: &std::path::Path,
    profile: &Profile,
    bytes: &[u8],
    filter: Option<&regex_lite::Regex>,
) -> Result<i32> {
    let mut t = tally_report::tracepaths::trace_paths(bytes, profile)
        .map_err(|e| anyhow::anyhow!("{}: {e}", a.trace.display()))?;
    if let Some(f) = filter {
        t.report.functions.retain(|x| f.is_match(&x.name));
    }
    let title = format!("{} (trace {})", profile_path.display(), a.trace.display());
    let out = match a.format {
        Format::Json => tally_report::render::paths_json(&t.report, &title),
        Format::Text => tally_report::render::paths_text(&t.report, &title, a.limit, true),
    };
    write_out(a.output.as_ref(), out.as_bytes())?;
    for (thread, why) in &t.stopped {
        eprintln!("tally: thread {thread}: {why} (its paths are counted up to there)");
    }
    for n in &t.notes {
        eprintln!("tally: {n}");
    }
    Ok(i32::from(!t.stopped.is_empty() || !t.notes.is_empty()))
}

/// Reads a trace file (a regular file only).
fn read_trace(t: &std::path::Path) -> Result<Vec<u8>> {
    let meta = std::fs::metadata(t).with_context(|| format!("{}", t.display()))?;
    if !meta.is_file() {
        anyhow::bail!("{}: not a regular file", t.display());
    }
    std::fs::read(t).with_context(|| format!("{}", t.display()))
}

/// Reads one profile; errors name the file.
fn read_profile(p: &std::path::Path, bytes: Option<&[u8]>) -> Result<Profile> {
    let read = match bytes {
        Some(b) => Profile::read(b),
        None => Profile::read_file(p),
    };
    match read {
        Ok(prof) => Ok(prof),
        // That message names the file already.
        Err(
            e @ (ProfileError::Io { .. }
            | ProfileError::NotRegular { .. }
            | ProfileError::TooLarge { .. }),
        ) => Err(e.into()),
        Err(e) => Err(anyhow::Error::new(e).context(p.display().to_string())),
    }
}

/// [`read_profiles`] for the commands that show counts: without the same-run oracle's modules
/// (`--tally-oracle`, which only `tally check` and `tally merge` read).
fn read_for_report(paths: &[PathBuf]) -> Result<Profile> {
    let mut p = read_profiles(paths)?;
    p.take_oracles();
    Ok(p)
}

/// Reads profiles of one program and adds them up, one at a time (memory: the sum and one
/// file), modules matched by hash (`tally_report::Sum`). A profile whose modules are all in
/// the sum already is added without decoding its metadata.
fn read_profiles(paths: &[PathBuf]) -> Result<Profile> {
    let (first, rest) = paths.split_first().expect("clap requires one profile");
    let first_name = first.display().to_string();
    let progress = progress::Progress::new("reading", paths.len(), "profiles");
    let mut sum = tally_report::Sum::new(&first_name, read_profile(first, None)?);
    progress.step();
    for p in rest {
        let name = p.display().to_string();
        let bytes = Profile::file_bytes(p, tally_format::profile::MAX_PROFILE_BYTES)?;
        let added = sum
            .add_bytes(&name, &bytes)
            .map_err(|e| anyhow::Error::new(e).context(name.clone()))?;
        if !added {
            let other = read_profile(p, Some(&bytes))?;
            sum.add(&name, &other)?;
        }
        progress.step();
    }
    Ok(sum.finish()?)
}

fn merge_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for i in inputs {
        if std::fs::metadata(i).is_ok_and(|m| m.is_dir()) {
            let mut found: Vec<PathBuf> = std::fs::read_dir(i)
                .with_context(|| format!("cannot read directory {}", i.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "tally"))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(i.clone());
        }
    }
    Ok(files)
}

/// Which program a profile is of, for `merge --by-program`: its GNU build id when it has one,
/// else its path (build ids made of module hashes differ with the libraries a run loaded).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
enum ProgramKey {
    Gnu(Vec<u8>),
    Path(Vec<u8>),
}

fn program_key(p: &tally_format::profile::Program) -> ProgramKey {
    match &p.build_id {
        tally_format::profile::BuildId::Gnu(id) => ProgramKey::Gnu(id.clone()),
        _ => ProgramKey::Path(p.path.clone()),
    }
}

/// One file name per output: `<program>-<build id prefix>[-k].tally`, the program named by
/// `path` (the profile's own when it names one).
fn output_name(
    profile: &Profile,
    path: &[u8],
    taken: &mut std::collections::HashSet<String>,
) -> String {
    use tally_format::profile::BuildId;
    let program = &profile.program;
    let path = if program.path.is_empty() {
        path
    } else {
        &program.path
    };
    let base =
        std::path::Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path))
            .file_name()
            .map(|b| b.to_string_lossy().into_owned())
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| "unknown".into());
    let id = match &program.build_id {
        BuildId::None => format!("{:016x}", profile.modules_build_id()),
        b => b.hex(),
    };
    let stem = format!("{base}-{}", &id[..id.len().min(12)]);
    let mut name = format!("{stem}.tally");
    let mut k = 2;
    while !taken.insert(name.clone()) {
        name = format!("{stem}-{k}.tally");
        k += 1;
    }
    name
}

/// `tally merge --by-program -o DIR INPUTS...`: one merged profile per program.
fn merge_by_program(dir: &std::path::Path, inputs: &[PathBuf]) -> Result<i32> {
    use std::collections::BTreeMap;
    use tally_format::profile::Program;
    let files = merge_inputs(inputs)?;
    let progress = progress::Progress::new("merging", files.len(), "profiles");
    // Runs of one program with the same modules are summed first (program, module hashes) ->
    // (merged profile, inputs, first input); the sets of one program are summed at the end.
    type Key = (ProgramKey, Program, Vec<u64>);
    let mut groups: BTreeMap<Key, (Profile, usize, String)> = BTreeMap::new();
    // The group the last profile went to: runs of one program usually come together, and
    // adding to it needs no metadata decoding (`add_same_build`).
    let mut last: Option<Key> = None;
    let mut failed = 0usize;
    for f in &files {
        progress.step();
        let name = f.display().to_string();
        let refuse = |why: String| progress.println(&format!("tally: skipping {name}: {why}"));
        let unprefixed = |e: ProfileError| {
            let msg = e.to_string();
            msg.strip_prefix("cannot read profile ")
                .map_or(msg.clone(), |m| {
                    m.strip_prefix(&format!("{name}: "))
                        .unwrap_or(m)
                        .to_string()
                })
        };
        let bytes = match Profile::file_bytes(f, tally_format::profile::MAX_PROFILE_BYTES) {
            Ok(b) => b,
            Err(e) => {
                refuse(unprefixed(e));
                failed += 1;
                continue;
            }
        };
        if let Some((sum, n, _)) = last.as_ref().and_then(|k| groups.get_mut(k)) {
            // Same program record; its modules all in the group's (matched by hash).
            match sum.add_known_modules(&bytes, true) {
                Ok(Some(_)) => {
                    *n += 1;
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    refuse(unprefixed(e));
                    failed += 1;
                    continue;
                }
            }
        }
        let p = match Profile::read(&bytes) {
            Ok(p) => p,
            Err(e) => {
                refuse(unprefixed(e));
                failed += 1;
                continue;
            }
        };
        let mut hashes: Vec<u64> = p.modules.iter().map(|m| m.hash).collect();
        hashes.sort_unstable();
        let key = (program_key(&p.program), p.program.clone(), hashes);
        last = Some(key.clone());
        match groups.get_mut(&key) {
            None => {
                let mut p = p;
                p.pid = 0;
                groups.insert(key, (p, 1, name.clone()));
            }
            Some((sum, n, _)) => match tally_report::combine(("merged", sum), &[(&name, &p)]) {
                Ok(s) => {
                    *sum = s;
                    *n += 1;
                }
                Err(e) => {
                    refuse(e.to_string());
                    failed += 1;
                }
            },
        }
        progress.message(format!("{} programs", {
            let mut k: Vec<&ProgramKey> = groups.keys().map(|k| &k.0).collect();
            k.dedup();
            k.len()
        }));
    }
    drop(progress);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut taken = std::collections::HashSet::new();
    let mut write = |profile: &Profile, path: &[u8], n: usize| -> Result<()> {
        let out = dir.join(output_name(profile, path, &mut taken));
        profile
            .write_file(&out)
            .with_context(|| format!("cannot write {}", out.display()))?;
        let p = profile.program.path_lossy();
        println!(
            "{}: {n} profile(s) of {}",
            out.display(),
            if p.is_empty() {
                "an unknown program".to_string()
            } else {
                p
            }
        );
        Ok(())
    };
    // Per program: the sum of its sets of modules; when it cannot be made (a source file
    // built two ways that no run held together: a rebuild), one profile per set.
    let mut programs: BTreeMap<ProgramKey, Vec<(Profile, usize, String)>> = BTreeMap::new();
    for ((k, _, _), g) in groups {
        programs.entry(k).or_default().push(g);
    }
    for sets in programs.into_values() {
        let total: usize = sets.iter().map(|s| s.1).sum();
        let mut sum = tally_report::Sum::new(&sets[0].2, sets[0].0.clone());
        let mut res = Ok(());
        for (p, _, name) in &sets[1..] {
            res = sum.add(name, p);
            if res.is_err() {
                break;
            }
        }
        match res.and_then(|()| sum.finish()) {
            Ok(merged) => write(&merged, &sets[0].0.program.path, total)?,
            Err(e) => {
                eprintln!("tally: not merging the runs of {} into one profile: {e}; one profile per set of modules", {
                    let p = sets[0].0.program.path_lossy();
                    if p.is_empty() { "an unknown program".to_string() } else { p }
                });
                for (p, n, _) in &sets {
                    write(p, &p.program.path, *n)?;
                }
            }
        }
    }
    if failed > 0 {
        eprintln!(
            "tally: {failed} of {} profile(s) could not be merged (listed above); the rest is merged",
            files.len()
        );
        return Ok(2);
    }
    Ok(0)
}

fn show(a: ShowArgs) -> Result<i32> {
    let profile = read_for_report(std::slice::from_ref(&a.profile))?;
    let r = tally_report::analyze(&profile, &tally_report::Inputs::default())?;
    let m = tally_report::source::model(&r);
    let re = a
        .function
        .as_deref()
        .map(regex_lite::Regex::new)
        .transpose()
        .context("bad --function regular expression")?;
    let pred = |f: &tally_report::source::SourceFunction| {
        re.as_ref().is_some_and(|re| {
            re.is_match(&f.name) || re.is_match(&f.linkage_name) || re.is_match(&f.demangled)
        })
    };
    let o = tally_report::show::ShowOptions {
        function: re.as_ref().map(|_| &pred as &dyn Fn(&_) -> bool),
        files: a.files.clone(),
        branches: a.branches,
    };
    let out = tally_report::show::show(&m, &o);
    if out.is_empty() {
        anyhow::bail!(
            "{}: no source lines to show (build with -g; check the file names and --function)",
            a.profile.display()
        );
    }
    write_out(a.output.as_ref(), out.as_bytes())?;
    Ok(warn_inconsistent(&r))
}

/// `tally html -o DIR PROFILE...`: the site of `tally_report::html`.
fn html(a: HtmlArgs) -> Result<i32> {
    let mut title = title(&a.profiles);
    let (r, stopped) = analyze_maybe_traced(&a.profiles, a.trace.as_ref(), &mut title)?;
    let model = tally_report::source::model(&r);
    let pages = {
        let progress = progress::Progress::new(
            "making",
            tally_report::html::page_count(&r, &model),
            "pages",
        );
        tally_report::html::site_with_progress(&r, &model, &title, &|| progress.step())
    };
    tally_report::html::write_site(&a.output, &pages)?;
    println!(
        "{}: {} pages",
        a.output.join("index.html").display(),
        pages.len()
    );
    Ok(warn_stopped(&stopped, warn_inconsistent(&r)))
}

/// The report of `profiles`, or with `trace` the counts of the witness trace its one profile's
/// run wrote (`title` then names the trace too), and the threads whose regeneration stopped.
fn analyze_maybe_traced(
    profiles: &[PathBuf],
    trace: Option<&PathBuf>,
    title: &mut String,
) -> Result<(tally_report::Report, Vec<(u32, String)>)> {
    let profile = read_for_report(profiles)?;
    match trace {
        None => {
            let r = tally_report::analyze(&profile, &tally_report::Inputs::default())?;
            if r.modes.contains(&tally_format::Mode::Trace) {
                eprintln!("tally: a trace build counts nothing in its profile; pass the trace its run wrote: --trace PROG.trace {}", title);
            }
            Ok((r, Vec::new()))
        }
        Some(t) => {
            if profiles.len() != 1 {
                anyhow::bail!("--trace takes the one profile its run wrote");
            }
            let bytes = read_trace(t)?;
            let (r, s) = tally_report::wtrace::report(&bytes, &profile)
                .map_err(|e| anyhow::anyhow!("{}: {e}", t.display()))?;
            *title = format!("{} (trace {})", title, t.display());
            Ok((r, s))
        }
    }
}

/// Says which threads' regeneration stopped early; the exit status.
fn warn_stopped(stopped: &[(u32, String)], status: i32) -> i32 {
    for (thread, why) in stopped {
        eprintln!("tally: thread {thread}: regeneration stopped early: {why}");
    }
    if stopped.is_empty() {
        return status;
    }
    eprintln!(
        "tally: the counts cover the regenerated part of {} thread(s) only",
        stopped.len()
    );
    EXIT_INCONSISTENT
}

fn report(a: ReportArgs) -> Result<i32> {
    let mut title = title(&a.profiles);
    let (r, stopped) = analyze_maybe_traced(&a.profiles, a.trace.as_ref(), &mut title)?;
    let model = (a.lines || a.export.is_some()).then(|| tally_report::source::model(&r));
    let out = match (a.export, a.format, &model) {
        (Some(Export::Lcov), _, Some(m)) => tally_report::lcov::lcov(m, &title),
        (Some(Export::Cobertura), _, Some(m)) => tally_report::cobertura::cobertura(m),
        (_, Format::Json, Some(m)) => tally_report::render::json_with_lines(&r, &title, m),
        (_, Format::Text, Some(m)) => {
            let top = if a.all { 0 } else { a.top };
            tally_report::show::lines_text(m, &title, top, !a.no_source)
        }
        (_, Format::Json, None) => tally_report::render::json(&r, &title),
        (_, Format::Text, None) => {
            let mut o = tally_report::render::TextOptions {
                top: a.top,
                detail: a.detail,
                blocks: a.blocks,
                show_unexecuted: false,
                source: !a.no_source,
            };
            if a.all {
                o.top = 0;
                o.detail = 0;
                o.blocks = 0;
                o.show_unexecuted = true;
            }
            tally_report::render::text(&r, &title, &o)
        }
    };
    write_out(a.output.as_ref(), out.as_bytes())?;
    Ok(warn_stopped(&stopped, warn_inconsistent(&r)))
}

fn write_out(path: Option<&PathBuf>, bytes: &[u8]) -> Result<()> {
    match path {
        Some(p) => {
            std::fs::write(p, bytes).with_context(|| format!("cannot write {}", p.display()))
        }
        None => {
            let mut o = std::io::stdout().lock();
            match o.write_all(bytes) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.context("cannot write to stdout"),
            }
        }
    }
}

fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Cmd::Cc { args } => driver::main(false, &args),
        Cmd::Cxx { args } => driver::main(true, &args),
        Cmd::Report(a) => report(a),
        Cmd::Show(a) => show(a),
        Cmd::Paths(a) => paths(a),
        Cmd::Trace(a) => trace(a),
        Cmd::Diff(a) => diff(a),
        Cmd::Check(a) => check(a),
        Cmd::Html(a) => html(a),
        Cmd::Placements(a) => placements(a),
        Cmd::Merge {
            output,
            by_program: true,
            profiles,
        } => merge_by_program(&output, &profiles),
        Cmd::Merge {
            output, profiles, ..
        } => {
            let p = read_profiles(&profiles)?;
            if p.program.is_unknown() && profiles.len() > 1 {
                eprintln!(
                    "tally: note: the inputs do not all name the same program; the merged profile names none"
                );
            }
            write_out(Some(&output), &p.write()).map(|()| 0)
        }
        Cmd::Header => write_out(None, tally_runtime::HEADER.as_bytes()).map(|()| 0),
        Cmd::Links { dir } => links::create(&dir).map(|()| 0),
    }
}

fn main() {
    let argv: Vec<OsString> = std::env::args_os().collect();
    // The compiler drivers take clang's command line verbatim: bypass clap so that options
    // such as --help or -v reach clang.
    let code = match links::driver_of(argv.first()) {
        Some(cxx) => driver::main(cxx, &argv[1..]),
        None => match argv.get(1).and_then(|a| a.to_str()) {
            Some("cc") | Some("clang") => driver::main(false, &argv[2..]),
            Some("c++") | Some("clang++") => driver::main(true, &argv[2..]),
            _ => run(Cli::parse()),
        },
    };
    match code {
        Ok(c) => std::process::exit(c),
        Err(e) => {
            let _ = std::io::stdout().flush();
            eprintln!("tally: error: {e:#}");
            std::process::exit(2);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_about_names_every_mode() {
        let about = super::long_about();
        for m in tally_format::mode::MODES {
            assert!(about.contains(m.name), "{} missing from {about}", m.name);
        }
    }
}
