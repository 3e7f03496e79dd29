//! `tally trace --stats`: where a witness trace's bits go. Regenerates every thread as
//! [`super::regenerate`] does and charges each bit the reader consumes to the record it
//! belongs to: witnesses by width, each control record kind (`Enter`, `Back`, `Unwind`,
//! `End`), and what the file holds besides the thread streams (headers, module and resolution
//! chunks, padding). It also counts the executed blocks and conditional branches (executions
//! of a block with two or more `Flow` out-edges, as `bench/run` counts them from `tally report
//! --trace`) and names the functions whose witnesses take the most bits.

use super::program::program;
use super::stream::{Names, Stream};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use tally_format::profile::Profile;
use tally_format::trace::read_witness_trace;
use tally_graph::witness::regen::{Expect, RecordSource, Regenerator, Visit};
use tally_graph::witness::{Record, RegenError};
use tally_graph::EdgeKind;

/// Records of one kind and the bits they took.
#[derive(Clone, PartialEq, Eq, Debug, serde::Serialize)]
pub struct KindBits {
    /// `witness/N` (a witness of N bits), `Enter`, `Back`, `Unwind`, `End`, or `other` (the
    /// file's bits outside the thread streams' records; in a range-coded file, the streams'
    /// bits outside their records: padding).
    pub kind: String,
    /// How many records (0 for `other`).
    pub records: u64,
    /// Their bits.
    pub bits: u64,
}

/// A function's witnesses.
#[derive(Clone, PartialEq, Debug, serde::Serialize)]
pub struct FunctionBits {
    /// Its linkage name.
    pub function: String,
    /// Witnesses read while it was the current activation.
    pub witnesses: u64,
    /// Their bits.
    pub bits: u64,
    /// Conditional branches it executed.
    pub branches: u64,
    /// What an ideal code of its witnesses would take with each value's frequency in this
    /// trace, per width (order-0 entropy times the count, bits). Witnesses of one width but
    /// different predicates share a distribution here, so this is no lower bound where they
    /// mix; for a function whose wide witnesses all come from one `switch` it is that
    /// switch's.
    pub entropy0: f64,
    /// The same given the function's previous witness (order-1 conditional entropy): what
    /// codes that predict from the last outcome could reach, e.g. for an interpreter's next
    /// opcode.
    pub entropy1: f64,
}

/// Where the bits of a witness trace go.
#[derive(Clone, PartialEq, Debug, Default, serde::Serialize)]
pub struct TraceStats {
    /// The file's size in bits.
    pub file_bits: u64,
    /// The bits the records were charged against: the file's size, or for a range-coded file
    /// (trace format 6, `TALLY_TRACE_COMPRESS=1`) its thread streams' size once decoded.
    pub stream_bits: u64,
    /// Whether the file is range-coded.
    pub coded: bool,
    /// Blocks regenerated.
    pub blocks: u64,
    /// Conditional branches executed (see the module doc).
    pub branches: u64,
    /// Bits by record kind, [`TraceStats::stream_bits`] in all.
    pub kinds: Vec<KindBits>,
    /// The functions whose witnesses take the most bits, most first.
    pub functions: Vec<FunctionBits>,
    /// Threads whose regeneration stopped early, and why.
    pub stopped: Vec<(u32, String)>,
}

/// Counts of (previous witness symbol, symbol), a symbol being `width << 32 | value`.
type Pairs = HashMap<(u64, u64), u64>;

#[derive(Default)]
struct Tally {
    kinds: BTreeMap<String, (u64, u64)>,
    func: Vec<(u64, u64, u64)>,
    /// Per function: its previous witness symbol, and the counts of (previous, symbol).
    pairs: Vec<(u64, Pairs)>,
}

/// Order-0 and order-1 entropy (in bits, times the count) of the witness values counted in
/// `pairs` (keyed by the previous symbol and the symbol, a symbol being `width << 32 |
/// value`), each conditioned on its width, which the reader always knows.
fn entropies(pairs: &Pairs) -> (f64, f64) {
    let (mut sym, mut width, mut ctx) = (HashMap::new(), HashMap::new(), HashMap::new());
    for (&(p, x), &c) in pairs {
        *sym.entry(x).or_insert(0u64) += c;
        *width.entry(x >> 32).or_insert(0u64) += c;
        *ctx.entry((p, x >> 32)).or_insert(0u64) += c;
    }
    let bits = |n: u64, c: u64| c as f64 * (n as f64 / c as f64).log2();
    let h0 = sym.iter().map(|(&x, &c)| bits(width[&(x >> 32)], c)).sum();
    let h1 = pairs
        .iter()
        .map(|(&(p, x), &c)| bits(ctx[&(p, x >> 32)], c))
        .sum();
    (h0, h1)
}

/// A [`Stream`] that charges every read's bits to its record kind and to the current function.
struct Measured<'a, 's> {
    src: Stream<'a>,
    tally: &'s RefCell<Tally>,
    current: &'s Cell<usize>,
}

impl Measured<'_, '_> {
    fn charge_witness(&self, bits: u8, value: u32) {
        let mut t = self.tally.borrow_mut();
        let k = t.kinds.entry(format!("witness/{bits}")).or_default();
        k.0 += 1;
        k.1 += u64::from(bits);
        let i = self.current.get();
        if let Some(f) = t.func.get_mut(i) {
            f.0 += 1;
            f.1 += u64::from(bits);
        }
        if let Some((prev, pairs)) = t.pairs.get_mut(i) {
            let sym = u64::from(bits) << 32 | u64::from(value);
            *pairs.entry((*prev, sym)).or_insert(0) += 1;
            *prev = sym;
        }
    }
}

impl RecordSource for Measured<'_, '_> {
    fn try_witness(&mut self, bits: u8) -> Option<u32> {
        let v = self.src.try_witness(bits)?;
        self.charge_witness(bits, v);
        Some(v)
    }

    fn read(&mut self, expect: Expect) -> Result<Option<Record>, RegenError> {
        let before = self.src.pos();
        let r = self.src.read(expect)?;
        let used = self.src.pos() - before;
        match r {
            Some(Record::Witness { bits, value }) => self.charge_witness(bits, value),
            Some(r) => {
                let kind = match r {
                    Record::Enter(_) => "Enter",
                    Record::Back => "Back",
                    Record::Unwind { .. } => "Unwind",
                    _ => "End",
                };
                let mut t = self.tally.borrow_mut();
                let k = t.kinds.entry(kind.to_string()).or_default();
                k.0 += 1;
                k.1 += used;
            }
            None => {}
        }
        Ok(r)
    }
}

/// Where the bits of the witness trace `bytes` (written by a run whose profile is `profile`)
/// go; `top` functions are named (0: all that wrote a witness).
pub fn stats(bytes: &[u8], profile: &Profile, top: usize) -> Result<TraceStats, String> {
    if tally_format::trace::is_flight_recorder(bytes) {
        return Err(super::FLIGHT_RECORDER_NO_COUNTS.into());
    }
    let trace = read_witness_trace(bytes).map_err(|e| e.to_string())?;
    let p = program(profile, &trace)?;
    let names = Names::new(&trace, &p.ids);
    let regen = Regenerator::new(&p.funcs);
    // Per function, per edge: whether it leaves a conditional branch.
    let cond: Vec<Vec<bool>> = p
        .funcs
        .iter()
        .map(|t| {
            let cfg = &t.input.cfg;
            let flows = |v| {
                cfg.succs(v)
                    .iter()
                    .filter(|&&e| cfg.edge(e).kind == EdgeKind::Flow)
                    .count()
            };
            cfg.edges()
                .map(|(_, x)| x.kind == EdgeKind::Flow && flows(x.src) >= 2)
                .collect()
        })
        .collect();
    let tally = RefCell::new(Tally {
        kinds: BTreeMap::new(),
        func: vec![(0, 0, 0); p.funcs.len()],
        pairs: vec![(u64::MAX, HashMap::new()); p.funcs.len()],
    });
    let current = Cell::new(0usize);
    let (mut blocks, mut branches) = (0u64, 0u64);
    let mut stopped = Vec::new();
    for (thread, stream) in &trace.threads {
        let mut src = Measured {
            src: Stream::new(stream, stream.len() as u64 * 8, &names),
            tally: &tally,
            current: &current,
        };
        let r = regen.run_visits(&mut src, |v| {
            let Visit::Step(s) = v else { return };
            blocks += 1;
            current.set(s.func.index());
            if cond[s.func.index()][s.via.index()] {
                branches += 1;
                tally.borrow_mut().func[s.func.index()].2 += 1;
            }
        });
        if let Err(e) = r {
            stopped.push((*thread, e.to_string()));
        }
    }
    let t = tally.into_inner();
    let file_bits = bytes.len() as u64 * 8;
    let coded = trace.coded;
    let stream_bits = if coded {
        trace.threads.iter().map(|t| t.1.len() as u64 * 8).sum()
    } else {
        file_bits
    };
    let mut kinds: Vec<KindBits> = t
        .kinds
        .into_iter()
        .map(|(kind, (records, bits))| KindBits {
            kind,
            records,
            bits,
        })
        .collect();
    kinds.sort_by(|a, b| b.bits.cmp(&a.bits).then(a.kind.cmp(&b.kind)));
    let counted: u64 = kinds.iter().map(|k| k.bits).sum();
    kinds.push(KindBits {
        kind: "other".into(),
        records: 0,
        bits: stream_bits.saturating_sub(counted),
    });
    let mut functions: Vec<FunctionBits> = t
        .func
        .iter()
        .enumerate()
        .filter(|(_, f)| f.1 > 0)
        .map(|(i, f)| {
            let (entropy0, entropy1) = entropies(&t.pairs[i].1);
            FunctionBits {
                function: p.meta[i].0.name.clone(),
                witnesses: f.0,
                bits: f.1,
                branches: f.2,
                entropy0,
                entropy1,
            }
        })
        .collect();
    functions.sort_by(|a, b| b.bits.cmp(&a.bits).then(a.function.cmp(&b.function)));
    if top > 0 {
        functions.truncate(top);
    }
    Ok(TraceStats {
        file_bits,
        stream_bits,
        coded,
        blocks,
        branches,
        kinds,
        functions,
        stopped,
    })
}

/// [`stats`] as JSON.
pub fn json(s: &TraceStats) -> String {
    serde_json::to_string_pretty(s).expect("plain data serializes") + "\n"
}

/// [`stats`] as text: the totals, a line per record kind (records, bits, bits per conditional
/// branch, share of the file), then the functions.
pub fn render(s: &TraceStats) -> String {
    use std::fmt::Write;
    let per = |b: u64| {
        if s.branches == 0 {
            0.0
        } else {
            b as f64 / s.branches as f64
        }
    };
    let share = |b: u64| {
        if s.stream_bits == 0 {
            0.0
        } else {
            100.0 * b as f64 / s.stream_bits as f64
        }
    };
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} bits, {} blocks, {} conditional branches: {:.3} bits per branch",
        s.file_bits,
        s.blocks,
        s.branches,
        per(s.file_bits)
    );
    if s.coded {
        let _ = writeln!(
            o,
            "range-coded: the thread streams decode to {} bits ({:.3} per branch), charged below",
            s.stream_bits,
            per(s.stream_bits)
        );
    }
    let _ = writeln!(
        o,
        "\n{:<12} {:>14} {:>14} {:>12} {:>7}",
        "record", "records", "bits", "bits/branch", "share"
    );
    for k in &s.kinds {
        let _ = writeln!(
            o,
            "{:<12} {:>14} {:>14} {:>12.3} {:>6.1}%",
            k.kind,
            k.records,
            k.bits,
            per(k.bits),
            share(k.bits)
        );
    }
    let _ = writeln!(
        o,
        "\n{:>14} {:>14} {:>14} {:>12} {:>12}  function (witnesses while it was the current activation; \
         ideal codes: order-0, order-1 entropy)",
        "witness bits", "witnesses", "cond. branches", "entropy0", "entropy1"
    );
    for f in &s.functions {
        let _ = writeln!(
            o,
            "{:>14} {:>14} {:>14} {:>12.0} {:>12.0}  {}",
            f.bits, f.witnesses, f.branches, f.entropy0, f.entropy1, f.function
        );
    }
    for (t, why) in &s.stopped {
        let _ = writeln!(o, "thread {t} stopped early: {why}");
    }
    o
}
