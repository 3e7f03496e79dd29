//! LCOV tracefile export of the source-level model (`tally report --export lcov`), in the
//! format of `geninfo(1)`: per source file `SF`, its functions (`FN`, `FNDA`, `FNF`, `FNH`),
//! branches (`BRDA`, `BRF`, `BRH`) and lines (`DA`, `LF`, `LH`), then `end_of_record`.
//!
//! A branch is `BRDA:line,block,branch,taken`: `block` numbers the conditional branches and
//! switches of the line (in the model's order), `branch` the outcome in successor order,
//! `taken` its exact count (`-` when the count is undetermined). Lines whose count is
//! undetermined are left out (LCOV has no "unknown").

use crate::source::{SourceFunction, SourceModel};
use std::fmt::Write as _;

/// A test name LCOV accepts (letters, digits and `_`).
fn test_name(title: &str) -> String {
    let stem = title.rsplit('/').next().unwrap_or(title);
    let stem = stem.strip_suffix(".tally").unwrap_or(stem);
    let t: String = stem
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if t.is_empty() {
        "tally".into()
    } else {
        t
    }
}

/// A function name on one line without the separators LCOV uses.
fn fn_name(f: &SourceFunction) -> String {
    f.symbol()
        .chars()
        .map(|c| if c == ',' || c.is_control() { '_' } else { c })
        .collect()
}

/// The tracefile.
pub fn lcov(m: &SourceModel, title: &str) -> String {
    let mut out = String::new();
    let tn = test_name(title);
    for (path, file) in &m.files {
        if path.contains('\n') {
            continue;
        }
        let _ = writeln!(out, "TN:{tn}");
        let _ = writeln!(out, "SF:{path}");
        let funcs: Vec<&SourceFunction> = m.functions_in(path).filter(|f| f.line > 0).collect();
        for f in &funcs {
            let _ = writeln!(out, "FN:{},{}", f.line, fn_name(f));
        }
        let mut hit = 0;
        // A function whose count is undetermined gets no FNDA (LCOV has no "unknown").
        for f in &funcs {
            if let Some(c) = f.count {
                hit += usize::from(c > 0);
                let _ = writeln!(out, "FNDA:{c},{}", fn_name(f));
            }
        }
        let _ = writeln!(out, "FNF:{}", funcs.len());
        let _ = writeln!(out, "FNH:{hit}");
        let (mut brf, mut brh) = (0, 0);
        for (&n, l) in &file.lines {
            for (block, b) in l.branches.iter().enumerate() {
                for (branch, &o) in b.outcomes.iter().enumerate() {
                    brf += 1;
                    let taken = match o {
                        Some(c) => {
                            brh += usize::from(c > 0);
                            c.to_string()
                        }
                        None => "-".into(),
                    };
                    let _ = writeln!(out, "BRDA:{n},{block},{branch},{taken}");
                }
            }
        }
        let _ = writeln!(out, "BRF:{brf}");
        let _ = writeln!(out, "BRH:{brh}");
        let (mut lf, mut lh) = (0, 0);
        for (&n, l) in &file.lines {
            if let Some(c) = l.count {
                lf += 1;
                lh += usize::from(c > 0);
                let _ = writeln!(out, "DA:{n},{c}");
            }
        }
        let _ = writeln!(out, "LF:{lf}");
        let _ = writeln!(out, "LH:{lh}");
        out.push_str("end_of_record\n");
    }
    out
}
