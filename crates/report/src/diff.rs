//! `tally diff A B`: what changed between two profiles of the same build,
//! or of builds whose functions match by graph hash.
//!
//! Functions are matched by (module, linkage name, graph hash); those left over by (linkage
//! name, graph hash), so that a rebuilt program whose unchanged functions kept their graphs
//! still matches. Functions without a partner are listed as only in A or only in B. For every
//! matched pair the diff lists its entry counts and block executions, the blocks whose counts
//! differ (matched by block id: equal graph hashes mean equal graphs), and for path profiles the
//! paths whose counts differ, by path number (only when both numberings have the same
//! potential paths and cut edges), with the *path spectra* of Melski & Reps 1998 §1: the paths run
//! in one profile and not the other. Interprocedural paths (modes `ipath`, `ipath-piecewise`,
//! Melski & Reps 1998) are compared the same way, by module and path number, for the modules whose
//! sets have the same mode and potential paths in both, and listed with their steps across
//! functions. Source lines whose counts differ come from the source-level
//! model ([`crate::source::model`]) of each side, for lines present in both.
//!
//! Every section is sorted by absolute change, largest first (ties: by name, then id). A
//! function whose counts could not be recovered in either profile (inconsistent or
//! interrupted) cannot be compared: it is listed as unknown and makes the diff non-equal.
//!
//! [`diff`] is pure (two [`Report`]s in, a [`Diff`] out); [`text`] and [`json`] render it.

use crate::names::{short_name, SHORT_NAME_MAX};
use crate::{FunctionReport, Report};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// A function, as the diff names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FnId {
    /// Linkage name.
    pub name: String,
    /// Demangled name.
    pub demangled: String,
    /// The module it came from.
    pub module: String,
    /// Graph hash, 16 hex digits.
    pub cfg_hash: String,
}

impl FnId {
    fn of(f: &FunctionReport) -> FnId {
        FnId {
            name: f.name.clone(),
            demangled: f.demangled.clone(),
            module: f.module.clone(),
            cfg_hash: format!("{:016x}", f.cfg_hash),
        }
    }
}

/// A count in A and in B.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    /// The count in A.
    pub a: u64,
    /// The count in B.
    pub b: u64,
}

impl Change {
    /// B minus A.
    pub fn delta(&self) -> i128 {
        i128::from(self.b) - i128::from(self.a)
    }
    /// |B - A|.
    pub fn magnitude(&self) -> u64 {
        self.a.abs_diff(self.b)
    }
}

/// A matched function whose counts differ.
#[derive(Clone, Debug, Serialize)]
pub struct FunctionChange {
    /// The function (as A names it).
    pub function: FnId,
    /// Calls.
    pub entry_count: Change,
    /// Sum of its block counts.
    pub block_executions: Change,
    /// Blocks whose counts differ.
    pub blocks_changed: usize,
}

/// A block whose count differs.
#[derive(Clone, Debug, Serialize)]
pub struct BlockChange {
    /// Its function.
    pub function: String,
    /// Block id.
    pub id: u32,
    /// Source file of the block, if known.
    pub file: Option<String>,
    /// Source line (0 = unknown).
    pub line: u32,
    /// The counts.
    #[serde(flatten)]
    pub change: Change,
}

/// A source line whose count differs.
#[derive(Clone, Debug, Serialize)]
pub struct LineChange {
    /// File.
    pub file: String,
    /// Line.
    pub line: u32,
    /// The counts.
    #[serde(flatten)]
    pub change: Change,
}

/// A path whose count differs (0 = not run in that profile).
#[derive(Clone, Debug, Serialize)]
pub struct PathChange {
    /// Its function; for an interprocedural path (modes `ipath`, `ipath-piecewise`), its
    /// module (the source file whose set numbers it).
    pub function: String,
    /// Path number (a decimal string in JSON: it can exceed 2^53).
    #[serde(serialize_with = "as_string")]
    pub number: u128,
    /// Its blocks, in order (from whichever profile ran it); empty for an interprocedural
    /// path, whose blocks are in `steps`.
    pub blocks: Vec<u32>,
    /// An interprocedural path's steps, as `tally paths` prints them but without source
    /// locations (`function:bN`, `call`, `return`, markers); absent for other paths.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
    /// The counts.
    #[serde(flatten)]
    pub change: Change,
}

fn as_string<S: serde::Serializer>(n: &u128, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&n.to_string())
}

/// What differs between two profiles.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Diff {
    /// Functions in both profiles.
    pub matched: usize,
    /// Functions only in A.
    pub only_in_a: Vec<FnId>,
    /// Functions only in B.
    pub only_in_b: Vec<FnId>,
    /// Matched functions whose counts cannot be compared (unrecovered in A or B).
    pub unknown: Vec<FnId>,
    /// Matched functions whose counts differ, by |change of block executions|, then of entries.
    pub functions: Vec<FunctionChange>,
    /// Blocks whose counts differ.
    pub blocks: Vec<BlockChange>,
    /// Source lines whose counts differ.
    pub lines: Vec<LineChange>,
    /// Paths whose counts differ (path profiles), spectra included.
    pub paths: Vec<PathChange>,
    /// Path spectra: paths run in A and not in B, by count in A.
    pub paths_only_in_a: Vec<PathChange>,
    /// Path spectra: paths run in B and not in A, by count in B.
    pub paths_only_in_b: Vec<PathChange>,
}

impl Diff {
    /// Lists a path whose count differs, and in the spectra when it ran in one profile only.
    fn push_path(&mut self, p: PathChange) {
        if p.change.b == 0 {
            self.paths_only_in_a.push(p.clone());
        } else if p.change.a == 0 {
            self.paths_only_in_b.push(p.clone());
        }
        self.paths.push(p);
    }

    /// Whether the profiles have the same functions and every count is the same.
    pub fn equal(&self) -> bool {
        self.only_in_a.is_empty()
            && self.only_in_b.is_empty()
            && self.unknown.is_empty()
            && self.functions.is_empty()
            && self.lines.is_empty()
            && self.paths.is_empty()
    }
}

/// Largest change first; ties broken by `key` for a stable order.
fn sort_by_change<T, K: Ord>(v: &mut [T], change: impl Fn(&T) -> u64, key: impl Fn(&T) -> K) {
    v.sort_by(|x, y| change(y).cmp(&change(x)).then_with(|| key(x).cmp(&key(y))));
}

/// Pairs the functions of A and B: by (module, name, graph hash), then by (name, graph hash).
fn pair<'a>(
    a: &'a Report,
    b: &'a Report,
) -> (
    Vec<(&'a FunctionReport, &'a FunctionReport)>,
    Vec<&'a FunctionReport>,
    Vec<&'a FunctionReport>,
) {
    let mut exact: HashMap<(&str, &str, u64), usize> = HashMap::new();
    let mut loose: HashMap<(&str, u64), Vec<usize>> = HashMap::new();
    for (i, f) in b.functions.iter().enumerate() {
        exact.insert((&f.module, &f.name, f.cfg_hash), i);
        loose.entry((&f.name, f.cfg_hash)).or_default().push(i);
    }
    let mut taken = vec![false; b.functions.len()];
    let mut pairs = Vec::new();
    let mut rest = Vec::new();
    for f in &a.functions {
        match exact.get(&(f.module.as_str(), f.name.as_str(), f.cfg_hash)) {
            Some(&i) if !taken[i] => {
                taken[i] = true;
                pairs.push((f, &b.functions[i]));
            }
            _ => rest.push(f),
        }
    }
    let mut only_a = Vec::new();
    for f in rest {
        let cand = loose
            .get(&(f.name.as_str(), f.cfg_hash))
            .and_then(|v| v.iter().copied().find(|&i| !taken[i]));
        match cand {
            Some(i) => {
                taken[i] = true;
                pairs.push((f, &b.functions[i]));
            }
            None => only_a.push(f),
        }
    }
    let only_b = b
        .functions
        .iter()
        .zip(&taken)
        .filter(|(_, t)| !**t)
        .map(|(f, _)| f)
        .collect();
    (pairs, only_a, only_b)
}

/// Compares two reports; `lines` are their source-level models when both have line info.
pub fn diff(
    a: &Report,
    b: &Report,
    lines: Option<(&crate::source::SourceModel, &crate::source::SourceModel)>,
) -> Diff {
    let (pairs, only_a, only_b) = pair(a, b);
    let mut d = Diff {
        matched: pairs.len(),
        only_in_a: only_a.into_iter().map(FnId::of).collect(),
        only_in_b: only_b.into_iter().map(FnId::of).collect(),
        ..Default::default()
    };
    for (fa, fb) in pairs {
        if fa.inconsistent.is_some() || fb.inconsistent.is_some() {
            d.unknown.push(FnId::of(fa));
            continue;
        }
        let mut blocks_changed = 0;
        for (ba, bb) in fa.blocks.iter().zip(&fb.blocks) {
            if let (Some(ca), Some(cb)) = (ba.count, bb.count) {
                if ca != cb {
                    blocks_changed += 1;
                    d.blocks.push(BlockChange {
                        function: fa.demangled.clone(),
                        id: ba.id,
                        file: ba.file.clone(),
                        line: ba.line,
                        change: Change { a: ca, b: cb },
                    });
                }
            }
        }
        let mut paths_changed = false;
        if let (Some(pa), Some(pb)) = (&fa.paths, &fb.paths) {
            if pa.potential == pb.potential && pa.cuts == pb.cuts {
                let mut all: BTreeMap<u128, (Change, &[u32])> = BTreeMap::new();
                for r in &pa.rows {
                    all.insert(r.number, (Change { a: r.count, b: 0 }, &r.blocks));
                }
                for r in &pb.rows {
                    all.entry(r.number)
                        .or_insert((Change { a: 0, b: 0 }, &r.blocks))
                        .0
                        .b = r.count;
                }
                for (number, (change, blocks)) in all {
                    if change.a == change.b {
                        continue;
                    }
                    paths_changed = true;
                    d.push_path(PathChange {
                        function: fa.demangled.clone(),
                        number,
                        blocks: blocks.to_vec(),
                        steps: Vec::new(),
                        change,
                    });
                }
            }
        }
        let entry = Change {
            a: fa.entry_count,
            b: fb.entry_count,
        };
        let execs = Change {
            a: fa.block_executions,
            b: fb.block_executions,
        };
        if blocks_changed > 0 || paths_changed || entry.a != entry.b || execs.a != execs.b {
            d.functions.push(FunctionChange {
                function: FnId::of(fa),
                entry_count: entry,
                block_executions: execs,
                blocks_changed,
            });
        }
    }
    if let Some((ma, mb)) = lines {
        for (file, fa) in &ma.files {
            let Some(fb) = mb.files.get(file) else {
                continue;
            };
            for (&line, la) in &fa.lines {
                let Some(lb) = fb.lines.get(&line) else {
                    continue;
                };
                if let (Some(ca), Some(cb)) = (la.count, lb.count) {
                    if ca != cb {
                        d.lines.push(LineChange {
                            file: file.clone(),
                            line,
                            change: Change { a: ca, b: cb },
                        });
                    }
                }
            }
        }
    }
    let by_name = |f: &FnId| (f.module.clone(), f.name.clone());
    d.only_in_a.sort_by_key(by_name);
    d.only_in_b.sort_by_key(by_name);
    d.unknown.sort_by_key(by_name);
    d.functions.sort_by(|x, y| {
        y.block_executions
            .magnitude()
            .cmp(&x.block_executions.magnitude())
            .then(y.entry_count.magnitude().cmp(&x.entry_count.magnitude()))
            .then_with(|| by_name(&x.function).cmp(&by_name(&y.function)))
    });
    sort_by_change(
        &mut d.blocks,
        |c| c.change.magnitude(),
        |c| (c.function.clone(), c.id),
    );
    sort_by_change(
        &mut d.lines,
        |c| c.change.magnitude(),
        |c| (c.file.clone(), c.line),
    );
    ipath_changes(a, b, &mut d);
    for v in [&mut d.paths, &mut d.paths_only_in_a, &mut d.paths_only_in_b] {
        sort_by_change(
            v,
            |c| c.change.magnitude(),
            |c| (c.function.clone(), c.number),
        );
    }
    d
}

/// Interprocedural paths (modes `ipath`, `ipath-piecewise`) whose counts differ, by module
/// and path number, for the modules whose sets are numbered alike in both profiles (same mode
/// and potential paths; the numbering is rebuilt from the build's call sites, so equal builds
/// number equally): they go to the same lists as path mode's paths, with their steps.
fn ipath_changes(a: &Report, b: &Report, d: &mut Diff) {
    use std::collections::BTreeMap;
    let sets = |r: &Report| -> BTreeMap<String, (tally_format::Mode, u128)> {
        r.ipaths
            .iter()
            .map(|p| (p.module.clone(), (p.mode, p.potential)))
            .collect()
    };
    let (sa, sb) = (sets(a), sets(b));
    let mut all: BTreeMap<(&str, u128), (Change, &crate::IpathPath)> = BTreeMap::new();
    for p in &a.ipaths {
        if sb.get(&p.module) == sa.get(&p.module) {
            all.insert((&p.module, p.number), (Change { a: p.count, b: 0 }, p));
        }
    }
    for p in &b.ipaths {
        if sa.get(&p.module) == sb.get(&p.module) {
            all.entry((&p.module, p.number))
                .or_insert((Change { a: 0, b: 0 }, p))
                .0
                .b = p.count;
        }
    }
    for ((module, number), (change, p)) in all {
        if change.a == change.b {
            continue;
        }
        let steps = p
            .steps
            .iter()
            .map(|s| match s {
                crate::IpathPathStep::Block {
                    demangled, block, ..
                } => format!("{demangled}:b{block}"),
                other => other.to_string(),
            })
            .collect();
        d.push_path(PathChange {
            function: module.to_string(),
            number,
            blocks: Vec::new(),
            steps,
            change,
        });
    }
}

/// The first `top` items (all when `top` is 0).
fn first<T>(v: &[T], top: usize) -> &[T] {
    if top == 0 {
        v
    } else {
        &v[..v.len().min(top)]
    }
}

fn signed(d: i128) -> String {
    if d > 0 {
        format!("+{d}")
    } else {
        d.to_string()
    }
}

fn more(out: &mut String, shown: usize, total: usize) {
    if shown < total {
        out.push_str(&format!(
            "  ... {} more (--top 0 shows all)\n",
            total - shown
        ));
    }
}

/// Blocks of a path spelled out in text output (JSON has them all).
const PATH_BLOCKS: usize = 16;

/// Renders the diff as text; `top` items per section (0 = all).
pub fn text(d: &Diff, a: &str, b: &str, top: usize) -> String {
    use std::fmt::Write as _;
    let mut out = format!("tally diff: A = {a}, B = {b}\n");
    if d.equal() {
        let _ = writeln!(out, "equal: {} functions, every count the same", d.matched);
        return out;
    }
    let _ = writeln!(
        out,
        "different: {} of {} matched functions changed, {} only in A, {} only in B, {} unknown; {} blocks, {} lines, {} paths differ ({} run only in A, {} only in B)",
        d.functions.len(),
        d.matched,
        d.only_in_a.len(),
        d.only_in_b.len(),
        d.unknown.len(),
        d.blocks.len(),
        d.lines.len(),
        d.paths.len(),
        d.paths_only_in_a.len(),
        d.paths_only_in_b.len()
    );
    for (title, v) in [
        ("functions only in A", &d.only_in_a),
        ("functions only in B", &d.only_in_b),
        (
            "functions whose counts are unknown in A or B (not compared)",
            &d.unknown,
        ),
    ] {
        if v.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n{title}:");
        for f in first(v, top) {
            let _ = writeln!(
                out,
                "  {} ({})",
                short_name(&f.demangled, SHORT_NAME_MAX),
                f.module
            );
        }
        more(&mut out, first(v, top).len(), v.len());
    }
    if !d.functions.is_empty() {
        let _ = writeln!(
            out,
            "\nfunctions (by change of block executions):\n{:>14} {:>14} {:>14} {:>12} {:>12}  function",
            "executions A", "executions B", "change", "calls A", "calls B"
        );
        for f in first(&d.functions, top) {
            let _ = writeln!(
                out,
                "{:>14} {:>14} {:>14} {:>12} {:>12}  {}",
                f.block_executions.a,
                f.block_executions.b,
                signed(f.block_executions.delta()),
                f.entry_count.a,
                f.entry_count.b,
                short_name(&f.function.demangled, SHORT_NAME_MAX)
            );
        }
        more(&mut out, first(&d.functions, top).len(), d.functions.len());
    }
    let header = |out: &mut String, title: &str, what: &str| {
        let _ = writeln!(
            out,
            "\n{title}:\n{:>14} {:>14} {:>14}  {what}",
            "A", "B", "change"
        );
    };
    let row = |out: &mut String, c: &Change, what: String| {
        let _ = writeln!(
            out,
            "{:>14} {:>14} {:>14}  {what}",
            c.a,
            c.b,
            signed(c.delta())
        );
    };
    if !d.blocks.is_empty() {
        header(&mut out, "blocks", "block  function  location");
        for c in first(&d.blocks, top) {
            let loc = match (&c.file, c.line) {
                (Some(f), l) if l > 0 => format!("{f}:{l}"),
                (Some(f), _) => f.clone(),
                _ => "?".into(),
            };
            row(
                &mut out,
                &c.change,
                format!("b{}  {}  {loc}", c.id, c.function),
            );
        }
        more(&mut out, first(&d.blocks, top).len(), d.blocks.len());
    }
    if !d.lines.is_empty() {
        header(&mut out, "lines", "file:line");
        for c in first(&d.lines, top) {
            row(&mut out, &c.change, format!("{}:{}", c.file, c.line));
        }
        more(&mut out, first(&d.lines, top).len(), d.lines.len());
    }
    for (title, v) in [
        ("paths", &d.paths),
        ("paths run only in A (path spectra)", &d.paths_only_in_a),
        ("paths run only in B (path spectra)", &d.paths_only_in_b),
    ] {
        if v.is_empty() {
            continue;
        }
        header(&mut out, title, "path  function  blocks");
        for c in first(v, top) {
            let mut blocks: Vec<String> = if c.steps.is_empty() {
                c.blocks
                    .iter()
                    .take(PATH_BLOCKS)
                    .map(|b| format!("b{b}"))
                    .collect()
            } else {
                c.steps.iter().take(PATH_BLOCKS).cloned().collect()
            };
            if c.blocks.len() > PATH_BLOCKS {
                blocks.push(format!("... ({} blocks)", c.blocks.len()));
            } else if c.steps.len() > PATH_BLOCKS {
                blocks.push(format!("... ({} steps)", c.steps.len()));
            }
            row(
                &mut out,
                &c.change,
                format!("#{}  {}  {}", c.number, c.function, blocks.join(" ")),
            );
        }
        more(&mut out, first(v, top).len(), v.len());
    }
    out
}

#[derive(Serialize)]
struct JsonDiff<'a> {
    schema: &'static str,
    a: &'a str,
    b: &'a str,
    equal: bool,
    #[serde(flatten)]
    diff: &'a Diff,
}

/// Renders the diff as JSON (schema `tally-diff/1`); every section complete.
pub fn json(d: &Diff, a: &str, b: &str) -> String {
    let doc = JsonDiff {
        schema: "tally-diff/1",
        a,
        b,
        equal: d.equal(),
        diff: d,
    };
    let mut out = serde_json::to_string_pretty(&doc).expect("diff serializes");
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(line: u32, a: u64, b: u64) -> LineChange {
        LineChange {
            file: "x.c".into(),
            line,
            change: Change { a, b },
        }
    }

    #[test]
    fn equal_only_without_any_difference() {
        let mut d = Diff {
            matched: 2,
            ..Default::default()
        };
        assert!(d.equal());
        assert!(text(&d, "a", "b", 20).contains("\nequal: 2 functions"));
        d.lines.push(line(3, 1, 2));
        assert!(!d.equal());
        assert!(text(&d, "a", "b", 20).contains("\ndifferent: "));
    }

    #[test]
    fn sections_are_cut_at_top_and_say_how_many_more() {
        let mut v = vec![line(1, 5, 4), line(2, 0, 9), line(3, 7, 0), line(4, 2, 4)];
        sort_by_change(&mut v, |c| c.change.magnitude(), |c| c.line);
        assert_eq!(v.iter().map(|c| c.line).collect::<Vec<_>>(), [2, 3, 4, 1]);
        let d = Diff {
            lines: v,
            ..Default::default()
        };
        let t = text(&d, "a", "b", 2);
        assert!(
            t.contains("             0              9             +9  x.c:2\n"),
            "{t}"
        );
        assert!(
            t.contains("             7              0             -7  x.c:3\n"),
            "{t}"
        );
        assert!(!t.contains("x.c:4"), "{t}");
        assert!(t.contains("  ... 2 more (--top 0 shows all)"), "{t}");
        assert!(text(&d, "a", "b", 0).contains("x.c:1\n"));
        let j: serde_json::Value = serde_json::from_str(&json(&d, "a", "b")).unwrap();
        assert_eq!(j["schema"], "tally-diff/1");
        assert_eq!(j["equal"], false);
        assert_eq!(j["lines"].as_array().unwrap().len(), 4);
        assert_eq!(j["lines"][0]["b"], 9);
    }

    #[test]
    fn long_paths_are_cut_in_text() {
        let p = PathChange {
            function: "f".into(),
            number: 1 << 70,
            blocks: (0..40).collect(),
            steps: Vec::new(),
            change: Change { a: 0, b: 2 },
        };
        let d = Diff {
            paths: vec![p.clone()],
            paths_only_in_b: vec![p],
            ..Default::default()
        };
        let t = text(&d, "a", "b", 0);
        assert!(t.contains(" b15 ... (40 blocks)\n"), "{t}");
        assert!(!t.contains("b16"), "{t}");
        assert!(t.contains(&format!("#{}  f", 1u128 << 70)), "{t}");
        let j: serde_json::Value = serde_json::from_str(&json(&d, "a", "b")).unwrap();
        assert_eq!(j["paths"][0]["number"], (1u128 << 70).to_string());
        assert_eq!(
            j["paths_only_in_b"][0]["blocks"].as_array().unwrap().len(),
            40
        );
    }
}
