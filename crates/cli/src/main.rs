//! `tally`: an exact profiler for C and C++.
//!
//! `tally cc` / `tally c++` are drop-in compilers; `tally report` turns the profile a run
//! wrote into exact counts. `main` is a thin shell: it parses the command line into options and
//! hands them to the library crates (each report command's arguments and run are in `cmd/`);
//! errors print one line and exit with status 2 ([`Exit`]).

mod args;
mod cmd;
#[cfg(test)]
mod docs;
mod driver;
mod exit;
mod ircache;
mod links;
mod pgo;
mod progress;
mod rtcache;

use anyhow::Result;
use clap::{Parser, Subcommand};
use exit::Exit;
use std::ffi::OsString;
use std::io::Write as _;
use std::path::PathBuf;

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
    Report(cmd::report::Args),
    /// Annotated source: every line with how many times it ran (like `llvm-cov show`).
    Show(cmd::show::Args),
    /// The hottest acyclic paths of a path profile (built with --tally-mode=path).
    Paths(cmd::paths::Args),
    /// The executed block sequence of each thread, regenerated from a witness trace
    /// (built with --tally-mode=trace) and the profile of the same run.
    Trace(cmd::trace::Args),
    /// Score counter placements on a profile's measured counts (Ball & Larus 1994 §6, Graphs 2-4):
    /// every block, every edge, spanning-tree chords under heuristic, measured and worst
    /// weights, Vprof(Ecnt), Knuth-Stevenson Vprof(Vcnt). Needs an edge or edges-naive profile.
    Placements(cmd::common::ProfilesArgs),
    /// What changed between two profiles of the same build (or of builds whose functions match
    /// by graph hash): functions, blocks, source lines and paths whose counts differ, largest
    /// change first, and the paths run in one and not the other. Exit status 0 when every count
    /// is the same, 1 when not, 2 on error.
    Diff(cmd::diff::Args),
    /// Compare the counts of a build made with --tally-oracle with the oracle's counts of the
    /// same run (every edge counted, in the same binary): per function equal, flagged by the
    /// mode, interrupted (active when a signal ended the process or its profile was left
    /// unfinished, which the profile flags), different, unconfirmed (the oracle's own counts
    /// break the flow law) or missing on one side. Exit status 0 when none differs, is
    /// unconfirmed or missing, 1 otherwise, 2 on error.
    Check(cmd::common::ProfilesArgs),
    /// A static HTML site of the counts (works from file://): directory tree and file list
    /// with coverage, annotated source with a heat scale, control-flow graphs.
    Html(cmd::html::Args),
    /// Add profiles of the same build into one; with --by-program, a directory of profiles of
    /// many programs into one profile per program.
    Merge(cmd::merge::Args),
    /// Profiles of many runs and builds as an open Parquet dataset (Hive-partitioned by build)
    /// that DuckDB, Spark and other engines query; docs/dataset.md has the schema and the SQL.
    /// Exporting a profile already in the dataset adds nothing.
    Export(cmd::export::Args),
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

/// Runs a parsed command line; the exit status (of `cc` and `c++`: clang's).
fn run(cli: Cli) -> Result<i32> {
    let done = |()| Exit::Ok;
    let exit = match cli.command {
        Cmd::Cc { args } => return driver::main(false, &args),
        Cmd::Cxx { args } => return driver::main(true, &args),
        Cmd::Report(a) => cmd::report::run(a),
        Cmd::Show(a) => cmd::show::run(a),
        Cmd::Paths(a) => cmd::paths::run(a),
        Cmd::Trace(a) => cmd::trace::run(a),
        Cmd::Diff(a) => cmd::diff::run(a),
        Cmd::Check(a) => cmd::check::run(a),
        Cmd::Html(a) => cmd::html::run(a),
        Cmd::Placements(a) => cmd::placements::run(a),
        Cmd::Merge(a) => cmd::merge::run(a),
        Cmd::Export(a) => cmd::export::run(a),
        Cmd::Header => cmd::common::write_out(None, tally_runtime::HEADER.as_bytes()).map(done),
        Cmd::Links { dir } => links::create(&dir).map(done),
    };
    exit.map(Exit::code)
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
            std::process::exit(Exit::Error.code());
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
