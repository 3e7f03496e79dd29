//! The per-loop profitability test of SESE counters: a loop gets one only when the increments
//! it saves are expected to cost more than the code it adds at the loop's exits.
//!
//! On the benchmark suite, SESE counters in every candidate loop cost more instructions than
//! they saved (docs/log/sese.md): a counted loop pays at every exit, once per activation, and a
//! loop left after a few iterations through one of many exits (bzip2's `mainGtU`) pays more
//! than its back edge's increments. The model, in instructions executed, all of it explicit
//! in [`CostModel`]:
//!
//! - **saved** = `freq(measured) · (increment + keep_penalty)`: the measured edge's counter
//!   would run one increment (`add $1, mem`, or `inc reg` when promoted: one instruction
//!   either way) each time the edge is taken; `keep_penalty` (negative) is charged per iteration
//!   when reading the variable at the exits may keep it alive where the back end would have
//!   replaced it (loop strength reduction: an integer index used only inside the loop);
//! - **paid** = `Σ_exits freq(exit) · cost(exit) + Σ_entries freq(entry) · setup`: an affine
//!   counter's exit computes `±(last - init) >> t · o⁻¹` and adds it to the counter
//!   ([`AffineExit`]: a subtraction, a negation for a negative step, a shift for an even
//!   step, a multiplication unless the odd part is 1, an extension below 64 bits, the add to
//!   the counter, a jump when the exit edge has to be split); a trip-count counter's exit only
//!   adds the count (and jumps when split), its entry computes the count ([`trip_count_setup`]).
//!
//! **Where a counter may go** ([`CostModel::allows`], measured on the suite with callgrind,
//! docs/log/sese.md "Third round"): the model above sees instructions at the exits, not what the
//! back end does to the loop. In a loop whose counters `promote` keeps in registers (innermost,
//! call-free), the increment SESE removes is an `inc` of a register, often folded by loop
//! strength reduction into an induction variable the loop has anyway (bzip2's `fallbackSort`:
//! no counter instruction left in the loop); reading the variable at the exits then makes
//! LSR keep a second induction variable (one to three instructions more per iteration). So an
//! affine counter is used there only where the loop's register pressure is high
//! ([`LoopShape::pressure`] ≥ [`CostModel::affine_min_pressure`]): one promoted counter less
//! then saves the register shuffles the allocator inserts (zstd's `FASTCOVER_buildDictionary`,
//! pressure 19: ten moves per iteration gone), and only with at most
//! [`CostModel::affine_max_exits`] exits (SQLite's `rebuildPage`, five exits: +5.7K). Outside
//! promoted loops (loops with calls,
//! outer loops) the variable and its entry value must survive the loop's calls or inner
//! loops, and the measured effect was a loss (Lua, SQLite, xz, zstd): no affine counter
//! there. Trip counts read no variable; they are allowed wherever the test below says they
//! pay, except in functions of more than [`CostModel::max_function_blocks`] blocks (SQLite's
//! `sqlite3VdbeExec`, 2047 blocks, pcre2's `internal_dfa_match`, 961, SQLite's
//! `sqlite3_str_vappendf`, 700): there one more value live across a loop moves the register
//! allocator's spills around it (+103K, +286K and +22.7K instructions for a few thousand
//! increments saved).
//!
//! Every counter also pays [`CostModel::per_call`] once per call of its function
//! ([`CostModel::per_call_entry`]): the value kept for the exits may take a callee-saved
//! register, pushed and popped on every call whether the loop runs or not, so a loop entered
//! in a fraction of the calls must save more than a few increments per call (SQLite's
//! `groupConcatStep`, 2.5 increments per call estimated: +2.0K).
//!
//! A counter pays when `saved > margin · paid`. The frequencies are per call of the function;
//! they come from LLVM's static estimate (BlockFrequencyInfo) or a measured profile
//! (`--tally-weights`), whichever the instrumenter has; only their ratios matter.

/// The instruction costs of the model (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    /// One counter increment (memory `add` or register `inc`).
    pub increment: f64,
    /// The jump of a block split onto an edge.
    pub jump: f64,
    /// Per iteration, when the variable is an integer used only inside the loop: the expected
    /// extra work of keeping it alive for the exits (an `inc` loop strength reduction would
    /// have removed, Lua's `traversestrongtable`), weighted by how often that happens.
    pub keep_penalty: f64,
    /// The saving must exceed `margin` times the cost (the estimate's uncertainty, and register
    /// pressure the model does not see).
    pub margin: f64,
    /// An affine counter is used only in a promoted loop with at least this register
    /// pressure ([`LoopShape`]).
    pub affine_min_pressure: usize,
    /// No counter in functions with more blocks than this (interpreters' dispatch functions).
    pub max_function_blocks: usize,
    /// An affine counter is used only in a loop with at most this many exits.
    pub affine_max_exits: usize,
    /// Paid once per call of the function, whether the loop runs or not: the push and pop of
    /// the callee-saved register the counter's value may take across the function.
    pub per_call: f64,
}

/// What the instrumenter knows of a loop beyond frequencies (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopShape {
    /// Counter promotion will keep the loop's counters in registers (innermost, call-free).
    pub promoted: bool,
    /// Values live throughout the loop: the header's phis, the values defined before the
    /// loop and used in it, and the loop's cyclomatic number (at most its counters).
    pub pressure: usize,
    /// Blocks of the whole function (its graph's vertices).
    pub function_blocks: usize,
    /// The loop's exit edges.
    pub exits: usize,
}

/// The kind of SESE counter [`CostModel::allows`] is asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterKind {
    /// An affine variable read at the exits.
    Affine,
    /// A trip count computed on entry.
    TripCount,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            increment: 1.0,
            jump: 1.0,
            keep_penalty: 0.5,
            margin: 1.5,
            affine_min_pressure: 15,
            max_function_blocks: 600,
            affine_max_exits: 2,
            per_call: 2.0,
        }
    }
}

/// The code an affine counter adds at one exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AffineExit {
    /// The step is negative: the difference is negated.
    pub negate: bool,
    /// The step is even: a shift right.
    pub shift: bool,
    /// The step's odd part is not 1: a multiplication by its inverse.
    pub multiply: bool,
    /// The variable is narrower than 64 bits: a zero extension.
    pub extend: bool,
    /// `init + step` is computed at the exit (the exit reads the back-edge value, `init` is not
    /// a constant).
    pub adjust: bool,
    /// The exit edge is split: its code sits in a new block (a jump).
    pub split: bool,
}

impl CostModel {
    /// Instructions of one affine exit: the subtraction, the optional steps, the add to the
    /// counter, the jump of a split block.
    pub fn affine_exit(&self, x: &AffineExit) -> f64 {
        let ops = 1
            + u8::from(x.negate)
            + u8::from(x.shift)
            + u8::from(x.multiply)
            + u8::from(x.extend)
            + u8::from(x.adjust);
        f64::from(ops) + self.increment + if x.split { self.jump } else { 0.0 }
    }

    /// Whether a counter of this kind may be used in a loop of this shape, before the
    /// frequencies are weighed (module doc).
    pub fn allows(&self, kind: CounterKind, shape: LoopShape) -> bool {
        if shape.function_blocks > self.max_function_blocks {
            return false;
        }
        match kind {
            CounterKind::Affine => {
                shape.promoted
                    && shape.pressure >= self.affine_min_pressure
                    && shape.exits <= self.affine_max_exits
            }
            CounterKind::TripCount => true,
        }
    }

    /// The per-call cost ([`CostModel::per_call`]) as one more `(frequency, instructions)`
    /// entry for [`Profit::new`]: `calls` is the frequency of the function's entry.
    pub fn per_call_entry(&self, calls: f64) -> (f64, f64) {
        (calls, self.per_call)
    }

    /// Instructions of one trip-count exit: the add to the counter, and the jump of a split
    /// block.
    pub fn trip_count_exit(&self, split: bool) -> f64 {
        self.increment + if split { self.jump } else { 0.0 }
    }
}

/// Instructions that compute a trip count on loop entry, from the expression's operation
/// count (as the front end expands it).
pub fn trip_count_setup(operations: u32) -> f64 {
    f64::from(operations)
}

/// The estimate for one loop (instructions per call of the function).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Profit {
    /// Increments saved (and the penalty of keeping the variable, subtracted).
    pub saved: f64,
    /// Code added at the exits and entries.
    pub paid: f64,
}

impl Profit {
    /// The estimate: `measured` is the frequency of the measured edge; `keep` whether the
    /// variable risks being kept alive only for the exits; `exits` and `entries` the
    /// frequency and instruction cost of each exit's and entry's code.
    pub fn new(
        model: &CostModel,
        measured: f64,
        keep: bool,
        exits: &[(f64, f64)],
        entries: &[(f64, f64)],
    ) -> Profit {
        let per_iteration = model.increment - if keep { model.keep_penalty } else { 0.0 };
        let paid = exits.iter().chain(entries).map(|&(f, c)| f * c).sum();
        Profit {
            saved: measured * per_iteration,
            paid,
        }
    }

    /// The counter is worth using: it saves more than `margin` times what it costs. Not for
    /// non-finite or negative estimates.
    pub fn pays(&self, model: &CostModel) -> bool {
        self.saved.is_finite()
            && self.paid.is_finite()
            && self.paid >= 0.0
            && self.saved > model.margin * self.paid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain_exit() -> AffineExit {
        AffineExit {
            negate: false,
            shift: false,
            multiply: false,
            extend: false,
            adjust: false,
            split: false,
        }
    }

    #[test]
    fn exit_costs_count_each_instruction() {
        let m = CostModel::default();
        // sub + add to the counter.
        assert_eq!(m.affine_exit(&plain_exit()), 2.0);
        let all = AffineExit {
            negate: true,
            shift: true,
            multiply: true,
            extend: true,
            adjust: true,
            split: true,
        };
        // sub, neg, shr, mul, zext, add (init + step), add to the counter, jump.
        assert_eq!(m.affine_exit(&all), 8.0);
        assert_eq!(m.trip_count_exit(false), 1.0);
        assert_eq!(m.trip_count_exit(true), 2.0);
        assert_eq!(trip_count_setup(3), 3.0);
    }

    /// A loop running 30 iterations per activation with one exit pays; bzip2's `mainGtU`
    /// shape (eight exits, a few iterations, each exit split) does not.
    #[test]
    fn long_loops_pay_and_many_exit_short_loops_do_not() {
        let m = CostModel::default();
        let exit = m.affine_exit(&plain_exit());
        assert!(Profit::new(&m, 30.0, false, &[(1.0, exit)], &[]).pays(&m));
        let split = m.affine_exit(&AffineExit {
            split: true,
            ..plain_exit()
        });
        let exits = vec![(1.0 / 8.0, split); 8];
        assert!(!Profit::new(&m, 3.0, false, &exits, &[]).pays(&m));
        // One iteration per activation never pays, whatever the exit code.
        assert!(!Profit::new(&m, 1.0, false, &[(1.0, exit)], &[]).pays(&m));
    }

    #[test]
    fn keeping_a_variable_alive_costs_per_iteration() {
        let m = CostModel::default();
        let exit = m.affine_exit(&plain_exit());
        // 4 iterations: 4 saved against 2 · 1.5 = 3 paid; kept alive, 2 saved.
        assert!(Profit::new(&m, 4.0, false, &[(1.0, exit)], &[]).pays(&m));
        assert!(!Profit::new(&m, 4.0, true, &[(1.0, exit)], &[]).pays(&m));
    }

    #[test]
    fn trip_counts_pay_for_their_setup_once_per_activation() {
        let m = CostModel::default();
        let setup = trip_count_setup(4);
        let exit = m.trip_count_exit(false);
        // 5 iterations: 5 < 1.5 · (4 + 1) = 7.5; 8 iterations pay.
        assert!(!Profit::new(&m, 5.0, false, &[(1.0, exit)], &[(1.0, setup)]).pays(&m));
        assert!(Profit::new(&m, 8.0, false, &[(1.0, exit)], &[(1.0, setup)]).pays(&m));
    }

    #[test]
    fn affine_counters_only_in_promoted_loops_under_pressure() {
        let m = CostModel::default();
        let shape = |promoted, pressure| LoopShape {
            promoted,
            pressure,
            function_blocks: 100,
            exits: 1,
        };
        assert!(m.allows(CounterKind::Affine, shape(true, 19)));
        assert!(!m.allows(CounterKind::Affine, shape(true, 7)));
        // The bench drivers' `bench_make_vocab` loop (pressure 14) cost +2.5K instructions in
        // every program of the suite (docs/log/sese.md, fourth round).
        assert!(!m.allows(CounterKind::Affine, shape(true, 14)));
        assert!(m.allows(CounterKind::Affine, shape(true, 15)));
        assert!(!m.allows(CounterKind::Affine, shape(false, 30)));
        assert!(m.allows(CounterKind::TripCount, shape(false, 3)));
        assert!(m.allows(CounterKind::TripCount, shape(true, 3)));
        // Nothing in an interpreter's dispatch function.
        let huge = LoopShape {
            function_blocks: 2047,
            ..shape(true, 19)
        };
        assert!(!m.allows(CounterKind::Affine, huge));
        assert!(!m.allows(CounterKind::TripCount, huge));
    }

    /// SQLite's `rebuildPage` (docs/log/sese.md, fourth round): an affine counter in a promoted
    /// loop under pressure 17 but with five exits cost +5.7K instructions; two exits are
    /// allowed, three are not.
    #[test]
    fn affine_counters_only_in_loops_with_few_exits() {
        let m = CostModel::default();
        let shape = |exits| LoopShape {
            promoted: true,
            pressure: 17,
            function_blocks: 17,
            exits,
        };
        assert!(m.allows(CounterKind::Affine, shape(1)));
        assert!(m.allows(CounterKind::Affine, shape(2)));
        assert!(!m.allows(CounterKind::Affine, shape(3)));
        assert!(!m.allows(CounterKind::Affine, shape(5)));
        // Trip counts read no variable at the exits: any number of exits.
        assert!(m.allows(CounterKind::TripCount, shape(5)));
    }

    /// SQLite's `sqlite3_str_vappendf` (700 blocks, 13 trip counts, +22.7K instructions) and
    /// `groupConcatStep` (+2.0K): loops entered a fraction of the function's calls, where the
    /// saving per call is a few increments, do not pay for a register saved and restored on
    /// every call; the function-size limit is 600 blocks.
    #[test]
    fn small_savings_per_call_do_not_pay_for_a_saved_register() {
        let m = CostModel::default();
        let exit = m.trip_count_exit(false);
        let setup = trip_count_setup(2);
        // groupConcatStep's first loop: 0.08 entries per call, 2.46 increments saved.
        let (entry, exit_f) = (0.08, 0.08);
        let without = [(entry, setup)];
        let with = [(entry, setup), m.per_call_entry(1.0)];
        assert!(Profit::new(&m, 2.46, false, &[(exit_f, exit)], &without).pays(&m));
        assert!(!Profit::new(&m, 2.46, false, &[(exit_f, exit)], &with).pays(&m));
        // zlib's fill_window loops (85 increments saved per call) still pay.
        let with = [(1.0, setup), m.per_call_entry(1.0)];
        assert!(Profit::new(&m, 85.0, false, &[(1.0, exit)], &with).pays(&m));
        // The per-call cost scales with a measured profile's call count.
        let with = [(100.0, setup), m.per_call_entry(100.0)];
        assert!(!Profit::new(&m, 246.0, false, &[(8.0, exit)], &with).pays(&m));
        let shape = |function_blocks| LoopShape {
            promoted: true,
            pressure: 5,
            function_blocks,
            exits: 1,
        };
        assert!(m.allows(CounterKind::TripCount, shape(600)));
        assert!(!m.allows(CounterKind::TripCount, shape(700)));
    }

    #[test]
    fn bad_estimates_never_pay() {
        let m = CostModel::default();
        assert!(!Profit::new(&m, f64::NAN, false, &[], &[]).pays(&m));
        assert!(!Profit::new(&m, f64::INFINITY, false, &[(f64::INFINITY, 1.0)], &[]).pays(&m));
        assert!(!Profit::new(&m, 0.0, false, &[], &[]).pays(&m));
    }
}
