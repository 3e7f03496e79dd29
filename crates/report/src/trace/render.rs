//! `tally trace`'s text and JSON: the regenerated blocks, signal handlers' streams and a
//! flight recorder's ends.

use super::program::program;
use super::ring::RingEnd;
use super::{walk, walk_until, Block, Regenerated};
use tally_format::profile::Profile;
use tally_format::trace::read_witness_trace;
use tally_graph::witness::regen::Visit;

/// `tally trace`'s output: blocks `from..from + limit` (0: all) of those `keep` selects, as
/// text (one line per block: index, thread, function, block, file:line) or JSON; the threads
/// that stopped early are listed after them. (The same text as [`render_trace`], from a
/// sequence already in memory; where a limit was reached, `render_trace` stopped regenerating
/// there and lists only the threads it regenerated to their end, this lists all of
/// `r.stopped`.) A limit that is reached leaves the total unknown: the text's first line then
/// says which blocks are shown instead of how many there are, and JSON's `total_blocks` is
/// `null`.
pub fn render(
    r: &Regenerated,
    keep: impl Fn(&Block) -> bool,
    from: usize,
    limit: usize,
    json: bool,
) -> String {
    let mut out = Vec::new();
    let mut w = Shown::new(&mut out, from, limit, json, r.blocks.len(), r.trace_bytes);
    for (i, b) in r.blocks.iter().enumerate() {
        if keep(b) {
            w.block(i, b);
        }
    }
    w.finish(&r.stopped, &r.signals, &r.ring, r.blocks.len());
    String::from_utf8(out).unwrap_or_default()
}

/// What [`render_trace`] returns: the threads that stopped early (thread, why), and the first
/// error writing the output, if any.
pub type Rendered = (Vec<(u32, String)>, Option<std::io::Error>);

/// `tally trace FILE`: [`render`]'s output for the witness trace `bytes` (of the run whose
/// profile is `profile`), written to `out` as regeneration goes. Memory is the regenerator's
/// and the trace's, not the sequence's (which [`regenerate`](super::regenerate) keeps, about 40 bytes a block):
/// without a limit, the text's first line gives the number of blocks, so text takes two
/// passes, one counting; with one, regeneration stops at the last block shown (time bounded by
/// the blocks up to it, not by the trace).
/// `keep` selects blocks by function name. Returns the threads that stopped early and the
/// first error writing to `out`, if any (nothing more was written after it).
pub fn render_trace(
    bytes: &[u8],
    profile: &Profile,
    keep: impl Fn(&str) -> bool,
    from: usize,
    limit: usize,
    json: bool,
    out: &mut dyn std::io::Write,
) -> Result<Rendered, String> {
    let trace = read_witness_trace(bytes).map_err(|e| e.to_string())?;
    let p = program(profile, &trace)?;
    let mut total = 0usize;
    if !json && limit == 0 {
        walk(&trace, &p, |_, ev, _| {
            total += usize::from(matches!(ev, Visit::Step(_)))
        })?;
    }
    let mut w = Shown::new(out, from, limit, json, total, bytes.len());
    let mut index = 0usize;
    // With a limit, regeneration stops once the last block asked for is shown; and once the
    // output cannot be written (`tally trace ... | head`), nothing more can be shown.
    let stop = std::cell::Cell::new(false);
    let (stopped, ring) = walk_until(&trace, &p, &stop, |thread, ev, _| {
        if w.error.is_some() {
            stop.set(true);
            return;
        }
        let Visit::Step(s) = ev else { return };
        let f = p.meta[s.func.index()].0;
        index += 1;
        if !keep(&f.name) {
            return;
        }
        if !w.wants() {
            w.skip_one(true);
            return;
        }
        w.block(index - 1, &p.block(thread, s.func, s.block));
        if w.full() {
            stop.set(true);
        }
    })?;
    w.finish(&stopped, &trace.signals, &ring, index);
    Ok((stopped, w.error))
}

/// The writer of `tally trace`'s output, block by block: which of the selected blocks are
/// shown (`from`, `limit`), and the text or JSON around them (JSON as `serde_json` prints it
/// pretty, its keys in order: `blocks` first, so it streams too).
pub(super) struct Shown<'a> {
    out: &'a mut dyn std::io::Write,
    json: bool,
    /// Selected blocks to pass over, then to show.
    skip: usize,
    left: usize,
    shown: usize,
    trace_bytes: usize,
    error: Option<std::io::Error>,
}

impl<'a> Shown<'a> {
    fn new(
        out: &'a mut dyn std::io::Write,
        from: usize,
        limit: usize,
        json: bool,
        total: usize,
        trace_bytes: usize,
    ) -> Self {
        let mut w = Shown {
            out,
            json,
            skip: from,
            left: if limit == 0 { usize::MAX } else { limit },
            shown: 0,
            trace_bytes,
            error: None,
        };
        if json {
            w.put("{\n  \"blocks\": [");
        } else if limit == 0 {
            w.put(&format!(
                "{total} blocks regenerated from {trace_bytes} trace bytes\n"
            ));
        } else {
            let skip = match from {
                0 => String::new(),
                n => format!(" after the first {n}"),
            };
            w.put(&format!(
                "at most {limit} blocks{skip}, regenerated from {trace_bytes} trace bytes \
                 (regeneration stops after them; --limit 0 shows and counts all)\n"
            ));
        }
        w
    }

    /// Whether the limit is reached: every block asked for is shown.
    fn full(&self) -> bool {
        self.left == 0
    }

    fn put(&mut self, s: &str) {
        if self.error.is_none() {
            if let Err(e) = self.out.write_all(s.as_bytes()) {
                self.error = Some(e);
            }
        }
    }

    /// Whether the next selected block is shown.
    fn wants(&self) -> bool {
        self.skip == 0 && self.left > 0 && self.error.is_none()
    }

    /// A block not shown: passed over when `selected`.
    fn skip_one(&mut self, selected: bool) {
        if selected && self.skip > 0 {
            self.skip -= 1;
        }
    }

    /// Selected block `b`, the `i`th of the sequence.
    fn block(&mut self, i: usize, b: &Block) {
        if !self.wants() {
            self.skip_one(true);
            return;
        }
        self.left -= 1;
        self.shown += 1;
        if self.json {
            let v = serde_json::json!({
                "index": i, "thread": b.thread, "function": b.function,
                "block": b.block, "file": b.file, "line": b.line,
            });
            let text = serde_json::to_string_pretty(&v).unwrap_or_default();
            let sep = if self.shown == 1 { "\n" } else { ",\n" };
            let mut s = String::from(sep);
            for (k, line) in text.lines().enumerate() {
                if k > 0 {
                    s.push('\n');
                }
                s.push_str("    ");
                s.push_str(line);
            }
            self.put(&s);
            return;
        }
        let at = match &b.file {
            Some(f) => format!("{f}:{}", b.line),
            None => "?".into(),
        };
        self.put(&format!(
            "{i:>10}  t{}  {}  b{}  {at}\n",
            b.thread, b.function, b.block
        ));
    }

    fn finish(
        &mut self,
        stopped: &[(u32, String)],
        signals: &[tally_format::trace::SignalStream],
        ring: &[RingEnd],
        total: usize,
    ) {
        if !self.json {
            let mut s = String::new();
            for (t, why) in stopped {
                s.push_str(&format!("thread {t}: {why}\n"));
            }
            s.push_str(&render_signals(signals));
            s.push_str(&render_ring(ring));
            self.put(&s);
            return;
        }
        let stopped: Vec<serde_json::Value> = stopped
            .iter()
            .map(|(t, why)| serde_json::json!({"thread": t, "error": why}))
            .collect();
        // A limit that was reached stopped regeneration there: the total is not known.
        let total = (!self.full()).then_some(total);
        let mut v = serde_json::json!({
            "total_blocks": total,
            "trace_bytes": self.trace_bytes,
            "stopped": stopped,
        });
        if !signals.is_empty() {
            v["signal_handlers"] = signals
                .iter()
                .map(|h| {
                    serde_json::json!({
                        "thread": h.stream, "signal": h.signal, "interrupted": h.interrupted,
                    })
                })
                .collect();
        }
        if !ring.is_empty() {
            v["ring"] = serde_json::to_value(ring).unwrap_or_default();
        }
        // The rest of the object, after `blocks` (its first key): `{` and a newline dropped.
        let rest = serde_json::to_string_pretty(&v).unwrap_or_default();
        let rest = rest.strip_prefix("{\n").unwrap_or(&rest);
        let close = if self.shown == 0 { "],\n" } else { "\n  ],\n" };
        self.put(&format!("{close}{rest}\n"));
    }
}

/// Which threads of `tally trace`'s text are signal handlers' streams: one line for a few,
/// a summary per signal and interrupted thread for many.
pub(super) fn render_signals(signals: &[tally_format::trace::SignalStream]) -> String {
    let mut s = String::new();
    if signals.len() <= 8 {
        for h in signals {
            s.push_str(&format!(
                "thread {}: a handler of signal {} that interrupted thread {}\n",
                h.stream, h.signal, h.interrupted
            ));
        }
        return s;
    }
    let mut by: std::collections::BTreeMap<(u32, u32), (u32, u32, usize)> = Default::default();
    for h in signals {
        let e = by
            .entry((h.signal, h.interrupted))
            .or_insert((h.stream, h.stream, 0));
        e.0 = e.0.min(h.stream);
        e.1 = e.1.max(h.stream);
        e.2 += 1;
    }
    for ((signal, interrupted), (lo, hi, n)) in by {
        s.push_str(&format!(
            "threads {lo}-{hi}: {n} handlers of signal {signal} that interrupted thread {interrupted}\n"
        ));
    }
    s
}

/// The flight recorder's part of `tally trace`'s text: per thread, how much of its tail was
/// regenerated and its call stack at the dump, top first.
pub(super) fn render_ring(ends: &[RingEnd]) -> String {
    let mut s = String::new();
    for e in ends {
        s.push_str(&format!(
            "thread {}: flight recorder: its last {} blocks",
            e.thread, e.blocks
        ));
        if e.certain < e.blocks {
            s.push_str(&format!(
                " (the last {} walked past the last record: it may have stopped among them)",
                e.blocks - e.certain
            ));
        }
        s.push_str(&format!(
            "; call stack at the end ({} activations):\n",
            e.depth
        ));
        for (i, f) in e.stack.iter().enumerate() {
            let at = match &f.file {
                Some(file) => format!("{file}:{}", f.line),
                None => "?".into(),
            };
            let block = f.block.map_or("b?".into(), |b| format!("b{b}"));
            s.push_str(&format!("  #{i:<3} {}  {block}  {at}\n", f.function));
        }
        if (e.stack.len() as u64) < u64::from(e.depth) {
            s.push_str(&format!(
                "  ... {} deeper activations not recorded\n",
                u64::from(e.depth) - e.stack.len() as u64
            ));
        }
    }
    s
}
