//! `tally cc --tally-use=PROFILE`: the rebuild of profile-guided optimization. The command is
//! compiled by clang as it stands, without instrumentation, plus clang's sample-profile flags
//! (`-fprofile-sample-use`, `-fpseudo-probe-for-profiling`, `-fprofile-sample-accurate`,
//! `-fsample-profile-use-profi`), the inliner's cost-benefit analysis, which LLVM otherwise
//! keeps for instrumentation profiles (`-mllvm -inline-enable-cost-benefit-analysis`), and a
//! sample profile made of tally's exact counts (tally-report's `sample_profile`: nested, each
//! inline instance of the training build a record of its own, unless `--tally-use-flat`).
//! PROFILE is a `.tally` profile (one run, or several merged by `tally merge`) of a `tally cc
//! --tally-pgo` build, or a sample profile `tally report --export sample-profile` wrote.
//!
//! A stale profile (other sources, other flags) never breaks the build: clang ignores every
//! function whose checksum differs, and tally says in one line how many matched, from the
//! loader's own count (`-mllvm -report-profile-staleness`).

use crate::args::{CommandLine, Word};
use anyhow::{anyhow, Context as _, Result};
use std::ffi::OsString;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The sample profile to hand clang: PROFILE itself when it is one, else the one made of the
/// `.tally` profile, written under `tmp`. `None` when it has no function (clang refuses an
/// empty profile; the build then goes on without one).
pub(crate) fn sample_file(profile: &Path, tmp: &Path, nested: bool) -> Result<Option<PathBuf>> {
    let shown = || format!("--tally-use={}", profile.display());
    let mut head = [0u8; 16];
    let n = std::fs::File::open(profile)
        .and_then(|mut f| f.read(&mut head))
        .with_context(shown)?;
    if !head[..n].starts_with(tally_format::profile::PROFILE_MAGIC) {
        return Ok(Some(profile.to_path_buf()));
    }
    let mut title = String::new();
    let (r, _) = crate::cmd::read::analyze_maybe_traced(&[profile.to_path_buf()], None, &mut title)
        .with_context(shown)?;
    let p = tally_report::sample_profile::sample_profile(&r).ok_or_else(|| {
        anyhow!(
            "{}: the profile has no pseudo-probes: build the program it came from with \
             `tally cc --tally-pgo`",
            shown()
        )
    })?;
    if p.functions == 0 {
        eprintln!(
            "tally: {}: no function has an exact count; building without a profile",
            shown()
        );
        return Ok(None);
    }
    let out = tmp.join("tally-use.prof");
    std::fs::write(&out, p.text(true, nested && p.nested)).with_context(shown)?;
    Ok(Some(out))
}

/// `p` in LLVM's extensible binary format, with a profile symbol list naming
/// every function of the build: the functions that never ran are in the list and have no
/// record, so the loader takes them as cold, and a function the list does not name (code added
/// since the training run) as new. `llvm-profdata merge --sample --extbinary
/// --prof-sym-list` writes it ($TALLY_LLVM_PROFDATA, else `llvm-profdata-19` on PATH).
pub(crate) fn extbinary(
    p: &tally_report::sample_profile::SampleProfile,
    nested: bool,
) -> Result<Vec<u8>> {
    let tool = std::env::var_os("TALLY_LLVM_PROFDATA").unwrap_or_else(|| "llvm-profdata-19".into());
    let dir = crate::driver::tempdir()?;
    let text = dir.path().join("profile.txt");
    let syms = dir.path().join("symbols.txt");
    let out = dir.path().join("profile.extbinary");
    std::fs::write(&text, p.text(false, nested)).context("cannot write a temporary file")?;
    std::fs::write(&syms, p.symbols()).context("cannot write a temporary file")?;
    let mut list = OsString::from("--prof-sym-list=");
    list.push(&syms);
    let o = Command::new(&tool)
        .args(["merge", "--sample", "--extbinary"])
        .arg(list)
        .arg(&text)
        .arg("-o")
        .arg(&out)
        .stdin(Stdio::null())
        .output()
        .with_context(|| {
            format!(
                "cannot run {} (set TALLY_LLVM_PROFDATA)",
                tool.to_string_lossy()
            )
        })?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        anyhow::bail!(
            "{} merge --extbinary failed: {}",
            tool.to_string_lossy(),
            err.lines().next().unwrap_or("")
        );
    }
    std::fs::read(&out).context("cannot read llvm-profdata's output")
}

/// The loader's staleness counts, summed over the files compiled: functions with a profile
/// whose checksum differs, functions with a profile, counts discarded, counts in all.
#[derive(Default, Debug, PartialEq)]
struct Staleness {
    invalid: u64,
    profiled: u64,
    discarded: u64,
    samples: u64,
}

impl Staleness {
    /// Adds a line of `-report-profile-staleness`; false when `line` is not one.
    fn add(&mut self, line: &str) -> bool {
        const FUNCS: &str = " of functions' profile are invalid and ";
        const TAIL: &str = " of samples are discarded due to function hash mismatch.";
        if line.contains(" of samples are discarded due to callsite location mismatch.")
            || line.contains(" of samples are recovered by stale profile matching.")
        {
            return true;
        }
        let Some((funcs, rest)) = line.split_once(FUNCS) else {
            return false;
        };
        let Some(samples) = rest.strip_suffix(TAIL) else {
            return false;
        };
        let pair = |s: &str| -> Option<(u64, u64)> {
            let (a, b) = s.strip_prefix('(')?.strip_suffix(')')?.split_once('/')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        };
        let (Some((fi, fp)), Some((sd, st))) = (pair(funcs), pair(samples)) else {
            return false;
        };
        self.invalid += fi;
        self.profiled += fp;
        self.discarded += sd;
        self.samples += st;
        true
    }
}

/// The inliner's option that turns its cost-benefit analysis on for any profile.
const COST_BENEFIT: &str = "-inline-enable-cost-benefit-analysis";

/// Runs clang on `args` with the sample profile `sample` (given when the command compiles
/// sources and the profile has functions), then says how many functions the profile matched.
pub(crate) fn run(
    clang: &Path,
    mut args: Vec<OsString>,
    sample: Option<&Path>,
    verbose: bool,
) -> Result<i32> {
    let Some(sample) = sample else {
        return crate::driver::run_clang(clang, &args, verbose);
    };
    let mut use_arg = OsString::from("-fprofile-sample-use=");
    use_arg.push(sample);
    args.extend([
        use_arg,
        "-fpseudo-probe-for-profiling".into(),
        "-fprofile-sample-accurate".into(),
        // profi, the loader's flow inference (LLVM 19 uses it for every probe-based profile
        // anyway): it gives each branch exactly its probes' counts; off, the suite's geomean
        // speedup measured slightly lower (docs/pgo.md, "Measurements").
        "-fsample-profile-use-profi".into(),
        "-mllvm".into(),
        "-report-profile-staleness".into(),
    ]);
    // The inliner's cost-benefit analysis, which LLVM runs only on instrumentation profiles
    // (exact counts, as tally's are): on the suite it is what brings SQLite's rebuild to IR
    // PGO's (docs/pgo.md, "Measurements"). Unless the command sets it (an option given twice is
    // an error).
    if !args
        .iter()
        .any(|a| a.to_string_lossy().starts_with(COST_BENEFIT))
    {
        args.extend(["-mllvm".into(), COST_BENEFIT.into()]);
    }
    if verbose {
        let line: Vec<_> = args.iter().map(|a| a.to_string_lossy()).collect();
        eprintln!("tally: {} {}", clang.display(), line.join(" "));
    }
    let out = Command::new(clang)
        .args(&args)
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("cannot run {}", clang.display()))?;
    let mut st = Staleness::default();
    let mut err = std::io::stderr().lock();
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        if !st.add(line) {
            let _ = writeln!(err, "{line}");
        }
    }
    if out.status.success() {
        let _ = writeln!(
            err,
            "tally: --tally-use: {} of {} functions with a profile matched it by checksum, {} \
             did not (their {} of {} counts were not used)",
            st.profiled - st.invalid.min(st.profiled),
            st.profiled,
            st.invalid,
            st.discarded,
            st.samples
        );
    }
    Ok(out.status.code().unwrap_or(1))
}

/// The words of the command line as clang takes them.
pub(crate) fn words(cl: &CommandLine) -> Vec<OsString> {
    let mut a = Vec::new();
    for w in &cl.words {
        match w {
            Word::Opt(o) => a.extend(o.iter().cloned()),
            Word::Source { path, .. } | Word::OtherInput(path) => a.push(path.clone()),
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::Staleness;

    #[test]
    fn the_loaders_staleness_lines_are_summed() {
        let mut s = Staleness::default();
        let lines = [
            "(1/3) of functions' profile are invalid and (39200/44206) of samples are discarded due to function hash mismatch.",
            "(0/0) of callsites' profile are invalid and (0/44206) of samples are discarded due to callsite location mismatch.",
            "(0/0) of callsites and (0/0) of samples are recovered by stale profile matching.",
            "(0/2) of functions' profile are invalid and (0/10) of samples are discarded due to function hash mismatch.",
        ];
        for l in lines {
            assert!(s.add(l), "{l}");
        }
        assert!(!s.add("a.c:1:2: warning: something else"));
        assert_eq!(
            s,
            Staleness {
                invalid: 1,
                profiled: 5,
                discarded: 39200,
                samples: 44216
            }
        );
    }
}
