//! A part: the fact rows of runs of one build not yet written, and their totals
//! (`line_totals`, `function_totals`: the sums of the part's rows of `line_counts` and
//! `function_counts`, so that a question about all the runs of a build reads a few rows per
//! line, not one per run). A part's files are written together, named by the hash of its runs.

use super::schema::{self, TableSpec};
use super::table::{Table, Value};
use std::collections::HashMap;

/// The fact rows of runs not yet written.
pub(super) struct Part {
    pub(super) tables: Vec<Table>,
    /// The run ids, in the order they came.
    pub(super) runs: Vec<String>,
    /// `line_totals` so far: by line index, the count and the runs that ran it.
    lines: Vec<(u64, u32)>,
    /// `function_totals` so far: by `functions.function`.
    functions: Vec<FunctionTotal>,
    /// [`Part::overflows`]'s totals after the run, for the ids the run has (kept to reuse its
    /// memory from run to run).
    after: HashMap<u32, FunctionTotal>,
}

/// A function's row of `function_totals` being summed (SQL's `SUM`: NULLs left out).
#[derive(Clone, Copy, Default)]
struct FunctionTotal {
    entries: Option<u64>,
    executions: Option<u64>,
    runs: u32,
    /// A sum passed 64 bits: both are written NULL.
    wrapped: bool,
}

/// The index of `spec` in [`schema::FACTS`].
fn fact(spec: &TableSpec) -> usize {
    (schema::FACTS.iter().position(|t| t.name == spec.name)).expect("a fact table")
}

/// `total + x` as SQL's `SUM` adds (`None`: NULL); `Err` when it leaves 64 bits.
fn sum(total: Option<u64>, x: Option<u64>) -> Result<Option<u64>, ()> {
    match (total, x) {
        (Some(t), Some(x)) => t.checked_add(x).map(Some).ok_or(()),
        (t, None) => Ok(t),
        (None, x) => Ok(x),
    }
}

impl Part {
    /// An empty part of a build of `lines` lines and `functions` functions.
    pub(super) fn new(lines: usize, functions: usize) -> Part {
        Part {
            tables: schema::FACTS.iter().map(|t| Table::new(t)).collect(),
            runs: Vec::new(),
            lines: vec![(0, 0); lines],
            functions: vec![FunctionTotal::default(); functions],
            after: HashMap::new(),
        }
    }

    /// Would adding a run's line counts and function rows (`functions`: id, entries,
    /// executions) take a total past 64 bits? Then the part is written first: the totals of
    /// a new part start at zero, and one run's counts fit.
    pub(super) fn overflows(
        &mut self,
        lines: &[Option<u64>],
        mut functions: impl Iterator<Item = (u32, Option<u64>, Option<u64>)>,
    ) -> bool {
        let line = (self.lines.iter().zip(lines))
            .any(|(&(t, _), &c)| c.is_some_and(|c| t.checked_add(c).is_none()));
        // One id may come twice in a run (two modules built from one source file).
        let Part {
            after,
            functions: totals,
            ..
        } = self;
        after.clear();
        line || functions.any(|(id, e, x)| {
            let t = after.entry(id).or_insert(totals[id as usize]);
            match (sum(t.entries, e), sum(t.executions, x)) {
                (Ok(e), Ok(x)) => {
                    (t.entries, t.executions) = (e, x);
                    false
                }
                _ => true,
            }
        })
    }

    /// Adds a run's count of line `i` to its total (checked by [`Part::overflows`]).
    pub(super) fn count_line(&mut self, i: usize, count: u64) {
        let t = &mut self.lines[i];
        *t = (t.0 + count, t.1 + 1);
    }

    /// Adds a run's row of `function_counts` of function `id` to its totals (checked by
    /// [`Part::overflows`]).
    pub(super) fn count_function(
        &mut self,
        id: u32,
        entries: Option<u64>,
        executions: Option<u64>,
    ) {
        let t = &mut self.functions[id as usize];
        // Checked by `Part::overflows`, but for one run alone past 64 bits (an id twice in a
        // run): that total is NULL for the rest of the part, never a wrong number.
        t.wrapped |= sum(t.entries, entries).is_err() || sum(t.executions, executions).is_err();
        t.entries = sum(t.entries, entries).unwrap_or(None);
        t.executions = sum(t.executions, executions).unwrap_or(None);
        t.runs += 1;
    }

    /// Writes the totals into their tables (the part is named `part`) and clears them.
    pub(super) fn add_totals(&mut self, part: &str, names: &[(String, u32)]) {
        let part_v = Value::Str(Some(part));
        let Part {
            tables,
            lines,
            functions,
            ..
        } = self;
        let table = &mut tables[fact(&schema::LINE_TOTALS)];
        for (&(count, runs), (file, line)) in lines.iter().zip(names) {
            if runs > 0 {
                table.push(&[
                    part_v,
                    Value::Str(Some(file)),
                    Value::U32(Some(*line)),
                    Value::U64(Some(count)),
                    Value::U32(Some(runs)),
                ]);
            }
        }
        let table = &mut tables[fact(&schema::FUNCTION_TOTALS)];
        for (id, t) in functions.iter().enumerate() {
            if t.runs > 0 {
                table.push(&[
                    part_v,
                    Value::U32(Some(id as u32)),
                    Value::U64(t.entries.filter(|_| !t.wrapped)),
                    Value::U64(t.executions.filter(|_| !t.wrapped)),
                    Value::U32(Some(t.runs)),
                ]);
            }
        }
        lines.fill((0, 0));
        functions.fill(FunctionTotal::default());
    }

    pub(super) fn table(&mut self, spec: &TableSpec) -> &mut Table {
        &mut self.tables[fact(spec)]
    }

    pub(super) fn rows(&self) -> usize {
        self.tables.iter().map(Table::rows).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part whose totals would leave 64 bits is written before the run that would take them
    /// there; one run's counts always fit a new part.
    #[test]
    fn totals_never_wrap() {
        let mut part = Part::new(2, 2);
        part.lines[0] = (u64::MAX - 1, 1);
        part.functions[1] = FunctionTotal {
            entries: Some(u64::MAX),
            executions: None,
            runs: 1,
            wrapped: false,
        };
        assert!(!part.overflows(
            &[Some(1), Some(u64::MAX)],
            [(0, Some(u64::MAX), None)].into_iter()
        ));
        assert!(part.overflows(&[Some(2), None], std::iter::empty()));
        assert!(part.overflows(&[None, None], [(1, Some(1), None)].into_iter()));
        assert!(!part.overflows(&[None, None], [(1, None, Some(u64::MAX))].into_iter()));
        let twice = [(0, Some(u64::MAX), None), (0, Some(1), None)];
        assert!(part.overflows(&[None, None], twice.into_iter()));
        part.add_totals("p", &[("a.c".into(), 1), ("a.c".into(), 2)]);
        assert_eq!(part.table(&schema::LINE_TOTALS).rows(), 1);
        assert_eq!(part.table(&schema::FUNCTION_TOTALS).rows(), 1);
        assert!(!part.overflows(
            &[Some(u64::MAX), Some(u64::MAX)],
            [(1, Some(u64::MAX), None)].into_iter()
        ));
    }

    /// Past 64 bits within one run (an id twice), a total is NULL, never wrapped.
    #[test]
    fn a_total_past_64_bits_in_one_run_is_null() {
        let mut part = Part::new(0, 1);
        part.count_function(0, Some(u64::MAX), Some(1));
        part.count_function(0, Some(1), Some(1));
        assert!(part.functions[0].wrapped);
        assert_eq!(part.functions[0].runs, 2);
        part.add_totals("p", &[]);
        assert_eq!(part.table(&schema::FUNCTION_TOTALS).rows(), 1);
        assert!(!part.functions[0].wrapped, "a new part starts afresh");
    }

    #[test]
    fn sums_leave_nulls_out_as_sql_does() {
        assert_eq!(sum(None, None), Ok(None));
        assert_eq!(sum(Some(2), None), Ok(Some(2)));
        assert_eq!(sum(None, Some(3)), Ok(Some(3)));
        assert_eq!(sum(Some(2), Some(3)), Ok(Some(5)));
        assert_eq!(sum(Some(u64::MAX), Some(1)), Err(()));
    }
}
