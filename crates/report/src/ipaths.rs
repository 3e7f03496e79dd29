//! `tally paths` on an interprocedural path profile (modes `ipath`, `ipath-piecewise`; Melski
//! & Reps 1998): the executed paths, hottest first, each as its block sequence across
//! functions with the calls and returns marked — as text, and as the `interprocedural` part of
//! the `tally-paths/1` JSON (docs/paths-json.md). Both list the same paths: those visiting a
//! function the [`Select`] accepts, the `top` hottest of them.

use crate::{demangle, IpathCallStep, IpathPath, IpathPathStep, Report};
use serde::Serialize;
use std::fmt::Write as _;

/// Accepts a function by its symbol and demangled name.
pub type FunctionFilter<'a> = &'a dyn Fn(&str, &str) -> bool;

/// Which interprocedural paths are listed.
#[derive(Default)]
pub struct Select<'a> {
    /// At most this many, hottest first (`None`: all).
    pub top: Option<usize>,
    /// Only paths with a block of a function this accepts (given the symbol and the demangled
    /// name); `None`: all.
    pub function: Option<FunctionFilter<'a>>,
}

impl Select<'_> {
    fn accepts(&self, p: &IpathPath) -> bool {
        let Some(f) = self.function else { return true };
        p.steps.iter().any(|s| match s {
            IpathPathStep::Block {
                function,
                demangled,
                ..
            } => f(function, demangled),
            _ => false,
        })
    }
}

/// The paths `sel` lists, hottest first (then by module and number), and how many it accepts
/// before `top` cuts.
fn selected<'r>(r: &'r Report, sel: &Select) -> (Vec<&'r IpathPath>, usize) {
    let mut all: Vec<&IpathPath> = r.ipaths.iter().filter(|p| sel.accepts(p)).collect();
    all.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then(a.module.cmp(&b.module))
            .then(a.number.cmp(&b.number))
    });
    let n = all.len();
    if let Some(top) = sel.top {
        all.truncate(top);
    }
    (all, n)
}

/// Renders interprocedural paths, hottest first: each as its blocks across functions
/// (`function:bN (file:line)`) with calls, returns (unmatched ones said), summary calls,
/// restarts after back or cut edges and path ends at them marked.
pub fn text(r: &Report, title: &str, sel: &Select) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "tally paths: {title}\n{}{} interprocedural paths executed",
        crate::program_line(&r.program),
        r.ipaths.len()
    );
    let (listed, accepted) = selected(r, sel);
    if sel.function.is_some() {
        let _ = writeln!(s, "{accepted} of them through the functions selected");
    }
    let _ = writeln!(s, "\nHottest interprocedural paths:");
    for (i, p) in listed.iter().enumerate() {
        let _ = writeln!(
            s,
            "{:>4}. {:>12} runs  path {} of {}",
            i + 1,
            p.count,
            p.number,
            p.module
        );
        // A context path's leading steps are its calling context: they ran (and were counted)
        // on earlier paths, so they are set apart from the steps this path counts.
        let (context, own) = p.steps.split_at(p.context.min(p.steps.len()));
        let indent = if context.is_empty() {
            "        "
        } else {
            let _ = writeln!(s, "        calling context (counted on earlier paths):");
            for step in context {
                let _ = writeln!(s, "          {step}");
            }
            let _ = writeln!(s, "        this path:");
            "          "
        };
        for step in own {
            let _ = writeln!(s, "{indent}{step}");
        }
    }
    if accepted > listed.len() {
        let _ = writeln!(
            s,
            "  ... {} more (--top 0 shows all)",
            accepted - listed.len()
        );
    }
    s
}

/// One module's interprocedural set in the JSON.
#[derive(Serialize)]
pub(crate) struct JsonSet<'a> {
    module: &'a str,
    mode: &'static str,
    potential_paths: String,
    executed_paths: usize,
    paths: Vec<JsonIpath<'a>>,
}

#[derive(Serialize)]
struct JsonIpath<'a> {
    number: String,
    count: u64,
    length: usize,
    start: &'static str,
    end: &'static str,
    context_steps: usize,
    steps: Vec<JsonStep<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
enum JsonStep<'a> {
    Block {
        function: &'a str,
        demangled: &'a str,
        block: u32,
        file: Option<&'a str>,
        line: u32,
    },
    Call {
        #[serde(flatten)]
        site: JsonSite<'a>,
        matched: bool,
    },
    Return {
        #[serde(flatten)]
        site: JsonSite<'a>,
        matched: bool,
    },
    Summary {
        #[serde(flatten)]
        site: JsonSite<'a>,
    },
    Restart,
    Reentry,
    Cut,
    EarlyExit,
}

#[derive(Serialize)]
struct JsonSite<'a> {
    function: &'a str,
    demangled: String,
    block: u32,
    site: u32,
    callee: Option<&'a str>,
}

fn site(c: &IpathCallStep) -> JsonSite<'_> {
    JsonSite {
        function: &c.caller,
        demangled: demangle(&c.caller),
        block: c.block,
        site: c.site,
        callee: c.callee.as_deref(),
    }
}

fn step(s: &IpathPathStep) -> JsonStep<'_> {
    match s {
        IpathPathStep::Block {
            function,
            demangled,
            block,
            file,
            line,
        } => JsonStep::Block {
            function,
            demangled,
            block: *block,
            file: file.as_deref(),
            line: *line,
        },
        IpathPathStep::Call { call, matched } => JsonStep::Call {
            site: site(call),
            matched: *matched,
        },
        IpathPathStep::Return { call, matched } => JsonStep::Return {
            site: site(call),
            matched: *matched,
        },
        IpathPathStep::Summary(call) => JsonStep::Summary { site: site(call) },
        IpathPathStep::Restart => JsonStep::Restart,
        IpathPathStep::Reentry => JsonStep::Reentry,
        IpathPathStep::Cut => JsonStep::Cut,
        IpathPathStep::EarlyExit => JsonStep::EarlyExit,
    }
}

/// The `interprocedural` member of the `tally-paths/1` JSON: per module with a set (in the
/// profile's order), its mode, potential and executed paths, and the paths `sel` lists.
pub(crate) fn json<'r>(r: &'r Report, sel: &Select) -> Vec<JsonSet<'r>> {
    let (listed, _) = selected(r, sel);
    let mut sets: Vec<JsonSet> = Vec::new();
    for p in &r.ipaths {
        if !sets.iter().any(|s| s.module == p.module) {
            sets.push(JsonSet {
                module: &p.module,
                mode: match p.mode {
                    tally_format::Mode::IpathPiecewise => "piecewise",
                    _ => "context",
                },
                potential_paths: p.potential.to_string(),
                executed_paths: 0,
                paths: Vec::new(),
            });
        }
        let s = sets
            .iter_mut()
            .find(|s| s.module == p.module)
            .expect("added");
        s.executed_paths += 1;
    }
    for p in listed {
        let s = sets
            .iter_mut()
            .find(|s| s.module == p.module)
            .expect("added");
        s.paths.push(JsonIpath {
            number: p.number.to_string(),
            count: p.count,
            length: p
                .steps
                .iter()
                .filter(|s| matches!(s, IpathPathStep::Block { .. }))
                .count(),
            start: p.start,
            end: p.end,
            context_steps: p.context,
            steps: p.steps.iter().map(step).collect(),
        });
    }
    sets
}
