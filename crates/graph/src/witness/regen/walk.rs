//! The walks of an activation out of its calls (a witness plan's fast walk, a path-number
//! function's steps) and the reading and checking of witnesses and path numbers on the way
//! (Ball & Larus 1994 §4.1, Fig. 14).

use super::*;

impl Regenerator<'_> {
    /// A witness-plan activation out of its calls: its walk from block to block while the
    /// blocks entered have no call sites, the same steps as [`Regenerator::step_path`]'s (which
    /// serves path-number functions) with the activation's state in locals, without going back
    /// through the stack, the waiting flag and the call sites between two blocks. Whether the
    /// activation returned.
    #[inline(always)]
    pub(super) fn walk_plan<S: RecordSource>(
        &self,
        top: &mut Frame,
        tables: &Tables,
        src: &mut Noting<'_, S>,
        quiet: &mut u64,
        visit: &mut impl FnMut(Visit, usize),
    ) -> Result<bool, RegenError> {
        let func = top.func;
        let mut block = top.block;
        // The pending witness, `NONE` for none (a plain word: `Option<u32>` made the
        // compiler reassemble the value byte by byte after every read).
        const NONE: u64 = u64::MAX;
        let mut pending = top.pending.map_or(NONE, u64::from);
        let mut stepped = false;
        let mut w = tables.walk[block.index()];
        let r = loop {
            let hop = match w.kind {
                WalkKind::One => &tables.hops[w.start as usize],
                WalkKind::Dense | WalkKind::Sparse => {
                    let value = if pending != NONE {
                        pending as u32
                    } else {
                        match read_witness(src, w.bits, func, block) {
                            Ok(v) => {
                                pending = u64::from(v);
                                v
                            }
                            Err(err) => break Err(err),
                        }
                    };
                    match tables.pick(w, value) {
                        Some(h) => h,
                        None => break Err(RegenError::NoChoice { func, block, value }),
                    }
                }
                WalkKind::Other => match tables.blocks[block].leave {
                    // (`Tables::new` gives path predicates to path-number functions
                    // only.)
                    Leave::Path { .. } => {
                        break Err(RegenError::Decode(format!(
                            "{func} {block}: a path predicate in a witness-plan function"
                        )))
                    }
                    _ => break Err(RegenError::NoSuccessor { func, block }),
                },
            };
            if hop.flags & HOP_WITNESS != 0 {
                // (`check_witness`.)
                let found = if pending != NONE {
                    std::mem::replace(&mut pending, NONE) as u32
                } else {
                    match read_witness(src, hop.wbits, func, block) {
                        Ok(v) => v,
                        Err(err) => break Err(err),
                    }
                };
                if found != hop.wval {
                    break Err(RegenError::WrongWitness {
                        func,
                        edge: hop.edge,
                        expected: hop.wval,
                        found,
                    });
                }
            }
            if hop.flags & HOP_RET != 0 {
                if pending != NONE {
                    break Err(RegenError::Pending { func, block });
                }
                visit(Visit::Return(func, hop.edge), hop.slot as usize);
                break Ok(true);
            }
            block = hop.dst;
            w = hop.next;
            stepped = true;
            visit(
                Visit::Step(Step {
                    func,
                    block,
                    via: hop.edge,
                }),
                hop.slot as usize,
            );
            if hop.flags & HOP_STOP != 0 {
                break Ok(false);
            }
            // (What the general loop checks before each step.)
            if self.too_quiet(src, quiet) {
                break Err(RegenError::Quiet { func, block });
            }
        };
        if stepped {
            // The block's sites, still to follow where the walk stopped for them,
            // else passed (none, or opaque ones only).
            let sites = tables.blocks[block].sites.clone();
            top.block = block;
            top.sites = if matches!(r, Ok(false)) {
                sites
            } else {
                sites.end..sites.end
            };
        }
        top.pending = (pending != NONE).then_some(pending as u32);
        r
    }

    /// One step of a path-number activation out of its calls: the edge its block leaves by
    /// (by the current path's number at a path predicate), the path's number accounted for,
    /// the edge's witness checked; whether the activation returned.
    #[inline(always)]
    pub(super) fn step_path(
        &self,
        top: &mut Frame,
        tables: &Tables,
        src: &mut impl RecordSource,
        visit: &mut impl FnMut(Visit, usize),
    ) -> Result<bool, RegenError> {
        let (func, block) = (top.func, top.block);
        let (e, act) = match tables.blocks[block].leave {
            Leave::None => return Err(RegenError::NoSuccessor { func, block }),
            Leave::One(e, act) => (e, act),
            // (Witness-plan functions take the fast walk above; `Tables::new` gives
            // witness predicates to them only.)
            Leave::Choice => {
                return Err(RegenError::Decode(format!(
                    "{func} {block}: a witness predicate in a path-number function"
                )))
            }
            Leave::Path { start, len } => {
                let rest = match top.prest {
                    Some(r) => r,
                    None => {
                        let r = read_path(src, tables, top, func, block)?;
                        top.prest = Some(r);
                        r
                    }
                };
                let choices = &tables.choice[start as usize..(start + len) as usize];
                let e = choices
                    .iter()
                    .copied()
                    .find(|&e| {
                        let a = &tables.pacts[e];
                        a.pval <= rest && rest - a.pval < a.pnum
                    })
                    .ok_or(RegenError::NoChoice {
                        func,
                        block,
                        value: rest as u32,
                    })?;
                (e, tables.edges[e])
            }
        };
        if tables.paths.is_some() {
            follow_path(top, tables, src, e)?;
        }
        if let Some(w) = act.witness {
            check_witness(src, &mut top.pending, w, func, block, e)?;
        }
        if act.ret {
            if top.pending.is_some() {
                return Err(RegenError::Pending { func, block });
            }
            visit(Visit::Return(func, e), self.slot(func, e));
            Ok(true)
        } else {
            top.block = act.dst;
            top.sites = tables.blocks[act.dst].sites.clone();
            visit(
                Visit::Step(Step {
                    func,
                    block: act.dst,
                    via: e,
                }),
                self.slot(func, e),
            );
            Ok(false)
        }
    }
}

/// Edge `e` of a path-number activation `top` taken: the current path's number so far (or
/// what is left of it) accounted for, the number read and checked where a path without a
/// predicate ends.
#[inline(always)]
fn follow_path(
    top: &mut Frame,
    tables: &Tables,
    src: &mut impl RecordSource,
    e: EdgeId,
) -> Result<(), RegenError> {
    let (func, block) = (top.func, top.block);
    let act = tables.pacts[e];
    match top.prest {
        Some(rest) => {
            let left = rest.checked_sub(act.pval).filter(|&r| r < act.pnum);
            top.prest = left;
            if left.is_none() || (act.pend && left != Some(0)) {
                return Err(RegenError::WrongWitness {
                    func,
                    edge: e,
                    expected: act.pval as u32,
                    found: rest as u32,
                });
            }
        }
        None => top.pwalked += act.pval,
    }
    if act.pend {
        if top.prest.is_none() {
            // A path without a predicate: its number is read (and checked) here.
            let left = read_path(src, tables, top, func, block)?;
            if left != 0 {
                return Err(RegenError::WrongWitness {
                    func,
                    edge: e,
                    expected: top.pwalked as u32,
                    found: (top.pwalked + left) as u32,
                });
            }
        }
        top.prest = None;
        top.phead = None;
        top.pwalked = act.pnext;
    }
    Ok(())
}

/// Reads the number of the current path of `top` (a path-number function) and returns what
/// is left of it past the edges walked so far.
fn read_path(
    src: &mut impl RecordSource,
    tables: &Tables,
    top: &mut Frame,
    func: FuncId,
    block: NodeId,
) -> Result<u64, RegenError> {
    let (nd, bits, _) = tables.paths.as_ref().expect("a path-number function");
    let number = u64::from(read_witness(src, *bits, func, block)?);
    let bad = || RegenError::NoChoice {
        func,
        block,
        value: number as u32,
    };
    let base = match top.phead.take() {
        None => 0,
        // Resumed mid-path: the START edge into the head whose range holds the number.
        Some(head) => {
            let dag = nd.dag();
            let span = nd.num_paths(head) as u64;
            dag.succs(dag.start())
                .iter()
                .map(|&d| (dag.edge(d).dst, nd.val(d) as u64))
                .find(|&(dst, v)| dst == head && v <= number && number - v < span)
                .map(|(_, v)| v)
                .ok_or_else(bad)?
        }
    };
    number.checked_sub(base + top.pwalked).ok_or_else(bad)
}

/// The witness `(value, bits)` an edge's action expects: the pending one, else read from
/// `src`, and an error when it is another.
#[inline(always)]
fn check_witness(
    src: &mut impl RecordSource,
    pending: &mut Option<u32>,
    (value, bits): (u32, u8),
    func: FuncId,
    block: NodeId,
    edge: EdgeId,
) -> Result<(), RegenError> {
    let found = match pending.take() {
        Some(v) => v,
        None => read_witness(src, bits, func, block)?,
    };
    if found != value {
        return Err(RegenError::WrongWitness {
            func,
            edge,
            expected: value,
            found,
        });
    }
    Ok(())
}

#[inline]
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
    if let Some(v) = src.try_witness(bits) {
        return Ok(v);
    }
    let expected = Expect::Witness(bits);
    match src.read(expected)? {
        Some(Record::Witness { value, bits: b }) if b == bits => Ok(value),
        None | Some(Record::End) => Err(RegenError::Truncated { func, block }),
        Some(found) => Err(RegenError::Unexpected { expected, found }),
    }
}
