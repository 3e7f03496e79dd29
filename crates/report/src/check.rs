//! `tally check`: a profile's counts against the same-run oracle.
//!
//! A build with `--tally-oracle` carries, besides its mode's instrumentation, a counter on every
//! edge of every instrumented function (`edges-naive`'s plan) in a module record of its own
//! ([`tally_format::ModuleMeta::oracle_for`] names the mode's module). One run thus writes both
//! profiles, from the same inputs, timing, memory layout and hash seeds, so that programs whose
//! runs differ (hashes seeded from `urandom`, timing-dependent tests, threads) can still be
//! checked: two separate builds cannot be compared function by function there.
//!
//! Both sides go through the same reader ([`crate::analyze`]): the mode's modules with their
//! own recovery (spanning-tree solution, path regeneration, event counters), the oracle's as
//! `edges-naive` modules. Functions are matched by (module, linkage name, graph hash) and every
//! edge and block count the mode determines is compared with the oracle's. The verdicts:
//! - *equal*: every determined edge and block count is the oracle's;
//! - *flagged*: the mode shows the function as inconsistent or interrupted (the oracle too, or
//!   not): no count of it is printed as exact, which is what tally promises;
//! - *differs*: some edge count the mode prints as exact is not the oracle's;
//! - *interrupted*: the profile was written at a fatal signal or is an unfinished continuous
//!   profile, which the profile itself flags (the report exits 6 or 4), and the oracle's counts
//!   of the function break the flow law: it was active at that moment, and the mode's counts of
//!   it are covered by the flag;
//! - *unconfirmed*: in a profile without such a flag, the mode prints counts but the oracle's
//!   own counts of the function break
//!   the flow law, so nothing confirms them;
//! - *missing*: a function on one side only.
//!
//! The check passes when nothing differs, is unconfirmed or is missing.

use crate::{analyze, FunctionReport, Inputs, ReportError};
use serde::Serialize;
use std::collections::BTreeMap;
use tally_format::profile::Profile;

/// The outcome of [`check`].
#[derive(Clone, Debug, Default, Serialize)]
pub struct Check {
    /// Functions compared (present on both sides).
    pub compared: usize,
    /// Functions whose every determined edge count is the oracle's.
    pub equal: usize,
    /// Edge counts compared, over all equal or differing functions.
    pub edges: usize,
    /// Block counts compared, over all equal or differing functions.
    pub blocks: usize,
    /// Functions the mode flags (inconsistent or interrupted), with whether the oracle's
    /// counts of them balance.
    pub flagged: Vec<Flagged>,
    /// Functions with an edge count that differs from the oracle's.
    pub differ: Vec<Difference>,
    /// Functions whose counts the mode prints while the oracle's break the flow law.
    pub unconfirmed: Vec<String>,
    /// Functions the oracle shows active at the fatal signal or kill the profile is flagged
    /// with (`interrupted` above).
    pub interrupted: Vec<String>,
    /// Functions on one side only.
    pub missing: Vec<String>,
    /// What the profile itself says about its counts ([`crate::Report::caveats`]: written at a
    /// fatal signal, raced): differences are then expected where the caveat applies.
    pub caveats: Vec<String>,
}

/// A function the mode flags.
#[derive(Clone, Debug, Serialize)]
pub struct Flagged {
    /// `name (module)`.
    pub function: String,
    /// Why the mode's counts could not be recovered.
    pub why: String,
    /// The oracle's counts of the function balance (the mode's flag then hides exact counts
    /// it could not recover; a racing or interrupted run usually breaks both).
    pub oracle_exact: bool,
}

/// A function whose counts differ from the oracle's: its first differing edge or block.
#[derive(Clone, Debug, Serialize)]
pub struct Difference {
    /// `name (module)`.
    pub function: String,
    /// The first count that differs: `edge eN` or `block nN`.
    pub at: String,
    /// The mode's count.
    pub mode: u64,
    /// The oracle's count.
    pub oracle: u64,
    /// Edge and block counts of the function that differ.
    pub differing: usize,
}

impl Check {
    /// Nothing differs, is unconfirmed or is missing.
    pub fn passed(&self) -> bool {
        self.differ.is_empty() && self.unconfirmed.is_empty() && self.missing.is_empty()
    }
}

/// Why a profile cannot be checked.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// No module of the profile carries the oracle.
    #[error("the profile has no same-run oracle (build with `tally cc --tally-oracle` or TALLY_ORACLE=on)")]
    NoOracle,
    /// A side cannot be read.
    #[error(transparent)]
    Report(#[from] ReportError),
}

type Key = (String, String, u64);

fn by_key(fs: &[FunctionReport]) -> BTreeMap<Key, Vec<&FunctionReport>> {
    let mut m: BTreeMap<Key, Vec<&FunctionReport>> = BTreeMap::new();
    for f in fs {
        m.entry((f.module.clone(), f.name.clone(), f.cfg_hash))
            .or_default()
            .push(f);
    }
    m
}

fn label(f: &FunctionReport) -> String {
    format!("{} ({})", f.demangled, f.module)
}

/// Compares the counts of every function of `profile` built with the oracle with the oracle's.
/// Modules built without it are not looked at.
pub fn check(profile: &Profile) -> Result<Check, CheckError> {
    let mut mode = profile.clone();
    let oracles = mode.take_oracles();
    if oracles.is_empty() {
        return Err(CheckError::NoOracle);
    }
    mode.modules
        .retain(|m| oracles.iter().any(|o| o.meta.oracle_for == Some(m.hash)));
    let oracle = Profile {
        modules: oracles,
        ..mode.clone()
    };
    let none = Inputs::default();
    let (rm, ro) = (analyze(&mode, &none)?, analyze(&oracle, &none)?);
    let (fm, fo) = (by_key(&rm.functions), by_key(&ro.functions));
    let mut c = Check {
        caveats: rm.caveats(),
        ..Check::default()
    };
    for (key, ms) in &fm {
        let os = fo.get(key).map_or(&[][..], |v| &v[..]);
        for (i, m) in ms.iter().enumerate() {
            let Some(o) = os.get(i) else {
                c.missing.push(format!("{} (no oracle counts)", label(m)));
                continue;
            };
            c.compared += 1;
            if let Some(why) = &m.inconsistent {
                c.flagged.push(Flagged {
                    function: label(m),
                    why: why.clone(),
                    oracle_exact: o.inconsistent.is_none(),
                });
                continue;
            }
            if o.inconsistent.is_some() {
                if rm.signal.is_some() || rm.unfinished {
                    c.interrupted.push(label(m));
                } else {
                    c.unconfirmed.push(label(m));
                }
                continue;
            }
            let mut first = None;
            let mut n = 0;
            for (em, eo) in m.edges.iter().zip(&o.edges) {
                let (Some(a), Some(b)) = (em.count, eo.count) else {
                    continue;
                };
                c.edges += 1;
                if a != b {
                    n += 1;
                    first.get_or_insert((format!("edge e{}", em.id), a, b));
                }
            }
            // Vertex mode determines every block count, not every edge count.
            for (bm, bo) in m.blocks.iter().zip(&o.blocks) {
                let (Some(a), Some(b)) = (bm.count, bo.count) else {
                    continue;
                };
                c.blocks += 1;
                if a != b {
                    n += 1;
                    first.get_or_insert((format!("block n{}", bm.id), a, b));
                }
            }
            if m.edges.len() != o.edges.len() || m.blocks.len() != o.blocks.len() {
                c.missing.push(format!("{} (graphs differ)", label(m)));
            } else if let Some((at, mode, oracle)) = first {
                c.differ.push(Difference {
                    function: label(m),
                    at,
                    mode,
                    oracle,
                    differing: n,
                });
            } else {
                c.equal += 1;
            }
        }
        for o in os.iter().skip(ms.len()) {
            c.missing.push(format!("{} (no mode counts)", label(o)));
        }
    }
    for (key, os) in &fo {
        if !fm.contains_key(key) {
            for o in os {
                c.missing.push(format!("{} (no mode counts)", label(o)));
            }
        }
    }
    Ok(c)
}

/// The text `tally check` prints: one summary line, then a line per function that differs,
/// is unconfirmed or missing, and per flagged function.
pub fn text(c: &Check, title: &str) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let flagged_exact = c.flagged.iter().filter(|f| f.oracle_exact).count();
    let _ = writeln!(
        s,
        "{title}: {} functions compared with the same-run oracle ({} edge and {} block counts): {} equal, {} flagged by the mode ({} of them exact in the oracle), {} interrupted, {} differ, {} unconfirmed, {} missing",
        c.compared,
        c.edges,
        c.blocks,
        c.equal,
        c.flagged.len(),
        flagged_exact,
        c.interrupted.len(),
        c.differ.len(),
        c.unconfirmed.len(),
        c.missing.len()
    );
    for caveat in &c.caveats {
        let _ = writeln!(s, "note: {caveat}");
    }
    for d in &c.differ {
        let _ = writeln!(
            s,
            "differs: {}: {}: {} (oracle {}), {} count(s) differ",
            d.function, d.at, d.mode, d.oracle, d.differing
        );
    }
    for u in &c.unconfirmed {
        let _ = writeln!(
            s,
            "unconfirmed: {u}: counts shown as exact, the oracle's break the flow law"
        );
    }
    for i in &c.interrupted {
        let _ = writeln!(
            s,
            "interrupted: {i}: active at the signal or kill the profile is flagged with (the oracle's counts break the flow law)"
        );
    }
    for m in &c.missing {
        let _ = writeln!(s, "missing: {m}");
    }
    for f in &c.flagged {
        let _ = writeln!(
            s,
            "flagged: {}: {}{}",
            f.function,
            f.why,
            if f.oracle_exact {
                " (the oracle's counts balance)"
            } else {
                ""
            }
        );
    }
    s
}

/// The JSON `tally check --format json` prints: `{"title": ..., "passed": ..., ...}` with the
/// fields of [`Check`].
pub fn json(c: &Check, title: &str) -> String {
    #[derive(Serialize)]
    struct Out<'a> {
        title: &'a str,
        passed: bool,
        #[serde(flatten)]
        check: &'a Check,
    }
    let out = Out {
        title,
        passed: c.passed(),
        check: c,
    };
    serde_json::to_string_pretty(&out).expect("a check serializes") + "\n"
}
