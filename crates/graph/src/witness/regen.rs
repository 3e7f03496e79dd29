//! Regeneration (paper 000 §4.1, Fig. 14) with a stack of active procedures (§4.2: "When the
//! algorithm encounters a call vertex, it pushes the current CFG name and pc value onto the
//! stack and starts executing the callee. When the algorithm encounters an EXIT vertex, it pops
//! the stack and resumes executing the caller.").
//!
//! Fig. 14 reads the next witness eagerly, after each witnessed edge; with several procedures
//! sharing one stream that would read the callee's records in the caller's place, so here a
//! witness is read only when it is needed: at a predicate (kept as the activation's *pending*
//! witness until its edge is traversed, exactly Fig. 14's `wit`) or when a witnessed edge is
//! traversed with nothing pending. The blocking property guarantees that nothing is pending at
//! a call vertex or at EXIT, which is checked. Calls of a block are followed in order before
//! its terminator; the records read at [`Callee::Unknown`] sites and between top-level
//! activations are the control records of the stream model (module doc of [`super`]).
//!
//! The record source is abstract ([`RecordSource`]): an iterator of [`Record`]s
//! ([`Records`]) or the bit-packed decoder of [`super::bits`], which needs to be told what it
//! is expected to read ([`Expect`]).

use super::place::choice_table;
use super::{Callee, FuncId, Record, Traced};
use crate::cfg::EdgeKind;
use crate::ids::{EdgeId, IdVec, NodeId};
use thiserror::Error;

/// One block of the regenerated execution.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct Step {
    /// The function of the activation.
    pub func: FuncId,
    /// The block entered.
    pub block: NodeId,
    /// The edge by which it was entered: `e0` at an activation's start, a normal edge, or the
    /// `Reentry` or unwind edge of a landing.
    pub via: EdgeId,
}

/// What regeneration expects to read next.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Expect {
    /// A witness of the current activation, of this width.
    Witness(u8),
    /// A control record (`Enter`, `Back`, `Unwind`, `End`).
    Control,
}

/// Why a trace cannot be regenerated.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RegenError {
    /// The stream ended (or `End` came) where a witness was needed: the thread stopped
    /// between a predicate and its witness (a crash, a trace cut short). Every block up to
    /// this point has been passed to the sink; the last ones, walked from the last record
    /// without reading, may include blocks after the point where the thread stopped.
    #[error("the trace ends inside {func} at {block}, where a witness is needed")]
    Truncated {
        /// The activation's function.
        func: FuncId,
        /// Its block.
        block: NodeId,
    },
    /// A record of the wrong kind.
    #[error("expected {expected:?}, found {found:?}")]
    Unexpected {
        /// What was expected.
        expected: Expect,
        /// What was read.
        found: Record,
    },
    /// No out-edge of the predicate has the witness value in its witness set.
    #[error("{func} {block}: no successor for witness value {value}")]
    NoChoice {
        /// The function.
        func: FuncId,
        /// The predicate.
        block: NodeId,
        /// The value read.
        value: u32,
    },
    /// A witnessed edge was traversed but the stream holds another value.
    #[error("{func} edge {edge}: witness {found} where {expected} was written")]
    WrongWitness {
        /// The function.
        func: FuncId,
        /// The edge.
        edge: EdgeId,
        /// Its value in the plan.
        expected: u32,
        /// The value read.
        found: u32,
    },
    /// A witness was pending at a call vertex or EXIT (the plan lacks the blocking property).
    #[error("{func} {block}: a witness is pending at a call or EXIT")]
    Pending {
        /// The function.
        func: FuncId,
        /// The block.
        block: NodeId,
    },
    /// A block with no normal successor finished its calls normally.
    #[error("{func} {block}: no normal successor")]
    NoSuccessor {
        /// The function.
        func: FuncId,
        /// The block.
        block: NodeId,
    },
    /// `Enter` or a direct call names a function that is not in the program.
    #[error("unknown function {0}")]
    NoFunction(FuncId),
    /// An `Unwind` discards more activations than there are, or lands on a block that is no
    /// landing target.
    #[error("bad landing: {abandoned} activations abandoned, landing at {to}")]
    BadLanding {
        /// Activations discarded.
        abandoned: u32,
        /// The landing block.
        to: NodeId,
    },
    /// Regeneration followed more steps than allowed without reading a record
    /// ([`Regenerator::with_max_quiet`]).
    #[error(
        "{func} {block}: too many steps without a record (a loop or recursion that writes nothing)"
    )]
    Quiet {
        /// The function of the current activation.
        func: FuncId,
        /// Its block.
        block: NodeId,
    },
    /// The bit-packed decoder failed.
    #[error("bad encoding: {0}")]
    Decode(String),
}

/// Where regeneration reads records from.
pub trait RecordSource {
    /// The next record, `None` at the end. `expect` says what regeneration expects; a source
    /// that stores record kinds may ignore it.
    fn read(&mut self, expect: Expect) -> Result<Option<Record>, RegenError>;
}

/// An iterator of records as a [`RecordSource`].
#[derive(Clone, Debug)]
pub struct Records<I>(pub I);

impl<I: Iterator<Item = Record>> RecordSource for Records<I> {
    fn read(&mut self, _: Expect) -> Result<Option<Record>, RegenError> {
        Ok(self.0.next())
    }
}

/// Regenerates the block sequence of a trace: [`Regenerator::run`] into a vector.
pub fn regenerate(
    funcs: &[Traced],
    records: impl IntoIterator<Item = Record>,
) -> Result<Vec<Step>, RegenError> {
    let mut out = Vec::new();
    Regenerator::new(funcs).run(&mut Records(records.into_iter()), |s| out.push(s))?;
    Ok(out)
}

struct Tables {
    succs: IdVec<NodeId, Vec<EdgeId>>,
    choice: IdVec<NodeId, Vec<(u32, EdgeId)>>,
}

/// A program's functions and plans with the tables regeneration looks up (each predicate's
/// choices by witness value), built once.
pub struct Regenerator<'a> {
    funcs: &'a [Traced],
    tables: Vec<Tables>,
    max_quiet: u64,
}

/// Default of [`Regenerator::with_max_quiet`].
pub const MAX_QUIET: u64 = 1 << 22;

/// A source that notes whether anything was read.
struct Noting<'s, S> {
    src: &'s mut S,
    read: bool,
}

impl<S: RecordSource> RecordSource for Noting<'_, S> {
    fn read(&mut self, expect: Expect) -> Result<Option<Record>, RegenError> {
        self.read = true;
        self.src.read(expect)
    }
}

struct Frame {
    func: FuncId,
    block: NodeId,
    site: usize,
    waiting: bool,
    pending: Option<u32>,
}

/// An activation as regeneration holds it between records: where a flight recorder's
/// synchronization point resumes ([`Regenerator::run_from`]) and what the stack is when
/// regeneration stops. Nothing is pending in such an activation (the blocking property: no
/// witness is pending at a call vertex).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct Activation {
    /// The function.
    pub func: FuncId,
    /// Its current block.
    pub block: NodeId,
    /// The next call site of the block to follow (a direct call at `site - 1` is running
    /// when this is not the top activation).
    pub site: usize,
    /// Whether the unknown call at `site` is running (its `Back` is the next record).
    pub waiting: bool,
}

impl<'a> Regenerator<'a> {
    /// Builds the choice tables of every function (the witness sets of §4.1, per value).
    pub fn new(funcs: &'a [Traced]) -> Self {
        let tables = funcs
            .iter()
            .map(|t| Tables {
                succs: IdVec::from_vec(
                    t.input
                        .cfg
                        .nodes()
                        .map(|v| t.input.normal_succs(v).collect())
                        .collect(),
                ),
                choice: choice_table(&t.input, &t.plan),
            })
            .collect();
        Regenerator {
            funcs,
            tables,
            max_quiet: MAX_QUIET,
        }
    }

    /// Sets how many steps (blocks entered, calls, returns) regeneration follows without
    /// reading a record before it gives up with [`RegenError::Quiet`] (default [`MAX_QUIET`]).
    /// Only a program stuck in a loop or a recursion that contains no predicate and no
    /// unknown call runs that long without writing (or a plan that fails [`super::check_plan`]);
    /// the limit keeps regeneration of such a trace finite.
    pub fn with_max_quiet(mut self, max_quiet: u64) -> Self {
        self.max_quiet = max_quiet;
        self
    }

    fn enter(&self, func: FuncId, sink: &mut impl FnMut(Step)) -> Result<Frame, RegenError> {
        let t = self
            .funcs
            .get(func.index())
            .ok_or(RegenError::NoFunction(func))?;
        let cfg = &t.input.cfg;
        sink(Step {
            func,
            block: cfg.entry(),
            via: cfg.entry_edge(),
        });
        Ok(Frame {
            func,
            block: cfg.entry(),
            site: 0,
            waiting: false,
            pending: None,
        })
    }

    /// Regenerates the execution recorded in `src`, calling `sink` with each block in order.
    /// Stops at `End` or at the end of the stream where a control record is expected (the
    /// thread ended there); the end of the stream where a witness is needed is
    /// [`RegenError::Truncated`], after every block up to that point has been passed to `sink`.
    pub fn run(
        &self,
        src: &mut impl RecordSource,
        sink: impl FnMut(Step),
    ) -> Result<(), RegenError> {
        self.run_with_returns(src, sink, |_, _| {})
    }

    /// [`Regenerator::run`], also calling `ret` with each `Return` edge taken (an activation
    /// returning normally: no block is entered, so no [`Step`] tells it).
    pub fn run_with_returns(
        &self,
        src: &mut impl RecordSource,
        sink: impl FnMut(Step),
        ret: impl FnMut(FuncId, EdgeId),
    ) -> Result<(), RegenError> {
        self.run_from(&mut Vec::new(), src, sink, ret)
    }

    /// [`Regenerator::run_with_returns`] from the activations in `stack` (bottom first; the
    /// state at a flight recorder's synchronization point) instead of an empty stack; when it
    /// returns, `stack` holds the activations active at that point (bottom first).
    pub fn run_from(
        &self,
        stack: &mut Vec<Activation>,
        src: &mut impl RecordSource,
        sink: impl FnMut(Step),
        ret: impl FnMut(FuncId, EdgeId),
    ) -> Result<(), RegenError> {
        for a in stack.iter() {
            let t = self
                .funcs
                .get(a.func.index())
                .ok_or(RegenError::NoFunction(a.func))?;
            if a.block.index() >= t.input.cfg.num_blocks()
                || a.site > t.input.calls[a.block].len()
                || (a.waiting && a.site == t.input.calls[a.block].len())
            {
                return Err(RegenError::Decode(format!(
                    "no call site {} in block {} of {}",
                    a.site, a.block, a.func
                )));
            }
        }
        let mut frames: Vec<Frame> = stack
            .iter()
            .map(|a| Frame {
                func: a.func,
                block: a.block,
                site: a.site,
                waiting: a.waiting,
                pending: None,
            })
            .collect();
        let r = self.run_frames(&mut frames, src, sink, ret);
        stack.clear();
        stack.extend(frames.iter().map(|f| Activation {
            func: f.func,
            block: f.block,
            site: f.site,
            waiting: f.waiting,
        }));
        r
    }

    fn run_frames(
        &self,
        stack: &mut Vec<Frame>,
        src: &mut impl RecordSource,
        mut sink: impl FnMut(Step),
        mut ret: impl FnMut(FuncId, EdgeId),
    ) -> Result<(), RegenError> {
        let src = &mut Noting { src, read: false };
        let mut quiet = 0u64;
        loop {
            if std::mem::take(&mut src.read) {
                quiet = 0;
            } else {
                quiet += 1;
                if quiet > self.max_quiet {
                    let (func, block) = stack
                        .last()
                        .map_or((FuncId(0), NodeId::new(0)), |f| (f.func, f.block));
                    return Err(RegenError::Quiet { func, block });
                }
            }
            let Some(top) = stack.last_mut() else {
                match src.read(Expect::Control)? {
                    None | Some(Record::End) => return Ok(()),
                    Some(Record::Enter(f)) => {
                        let frame = self.enter(f, &mut sink)?;
                        stack.push(frame);
                        continue;
                    }
                    Some(found) => {
                        return Err(RegenError::Unexpected {
                            expected: Expect::Control,
                            found,
                        })
                    }
                }
            };
            if top.waiting {
                match src.read(Expect::Control)? {
                    None | Some(Record::End) => return Ok(()),
                    Some(Record::Enter(g)) => {
                        let frame = self.enter(g, &mut sink)?;
                        stack.push(frame);
                    }
                    Some(Record::Back) => {
                        top.waiting = false;
                        top.site += 1;
                    }
                    Some(Record::Unwind { abandoned, to, how }) => {
                        let bad = RegenError::BadLanding { abandoned, to };
                        if abandoned as usize >= stack.len() {
                            return Err(bad);
                        }
                        stack.truncate(stack.len() - abandoned as usize);
                        let top = stack
                            .last_mut()
                            .ok_or(RegenError::BadLanding { abandoned, to })?;
                        let input = &self.funcs[top.func.index()].input;
                        if to.index() >= input.cfg.num_blocks() {
                            return Err(bad);
                        }
                        let via = input.landing_edge(top.block, to, how).ok_or(bad)?;
                        *top = Frame {
                            func: top.func,
                            block: to,
                            site: 0,
                            waiting: false,
                            pending: None,
                        };
                        sink(Step {
                            func: top.func,
                            block: to,
                            via,
                        });
                    }
                    Some(found) => {
                        return Err(RegenError::Unexpected {
                            expected: Expect::Control,
                            found,
                        })
                    }
                }
                continue;
            }
            let traced = &self.funcs[top.func.index()];
            let tables = &self.tables[top.func.index()];
            let sites = &traced.input.calls[top.block];
            if top.site < sites.len() {
                let callee = sites[top.site].callee;
                if callee != Callee::Opaque && top.pending.is_some() {
                    return Err(RegenError::Pending {
                        func: top.func,
                        block: top.block,
                    });
                }
                match callee {
                    Callee::Opaque => top.site += 1,
                    Callee::Unknown => top.waiting = true,
                    Callee::Direct(g) => {
                        top.site += 1;
                        let frame = self.enter(g, &mut sink)?;
                        stack.push(frame);
                    }
                }
                continue;
            }
            let (func, block) = (top.func, top.block);
            let outs = &tables.succs[block];
            let e = match outs.len() {
                0 => return Err(RegenError::NoSuccessor { func, block }),
                1 => outs[0],
                _ => {
                    let value = match top.pending {
                        Some(v) => v,
                        None => {
                            let v = read_witness(src, traced.plan.read_bits[block], func, block)?;
                            top.pending = Some(v);
                            v
                        }
                    };
                    let choices = &tables.choice[block];
                    match choices.binary_search_by_key(&value, |&(v, _)| v) {
                        Ok(i) => choices[i].1,
                        Err(_) => return Err(RegenError::NoChoice { func, block, value }),
                    }
                }
            };
            if let Some(w) = traced.plan.witness[e] {
                let found = match top.pending.take() {
                    Some(v) => v,
                    None => read_witness(src, w.bits, func, block)?,
                };
                if found != w.value {
                    return Err(RegenError::WrongWitness {
                        func,
                        edge: e,
                        expected: w.value,
                        found,
                    });
                }
            }
            let edge = traced.input.cfg.edge(e);
            if edge.kind == EdgeKind::Return {
                if top.pending.is_some() {
                    return Err(RegenError::Pending { func, block });
                }
                ret(func, e);
                stack.pop();
            } else {
                top.block = edge.dst;
                top.site = 0;
                sink(Step {
                    func,
                    block: edge.dst,
                    via: e,
                });
            }
        }
    }
}

fn read_witness(
    src: &mut impl RecordSource,
    bits: u8,
    func: FuncId,
    block: NodeId,
) -> Result<u32, RegenError> {
    // A witness of width 0 carries nothing and is not written (module doc of `super`).
    if bits == 0 {
        return Ok(0);
    }
    let expected = Expect::Witness(bits);
    match src.read(expected)? {
        Some(Record::Witness { value, bits: b }) if b == bits => Ok(value),
        None | Some(Record::End) => Err(RegenError::Truncated { func, block }),
        Some(found) => Err(RegenError::Unexpected { expected, found }),
    }
}
