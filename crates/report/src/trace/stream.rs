//! The runtime's bit stream of one thread (`crates/runtime/c/wtrace/`), as regeneration asks
//! for it: the one decoder of the witness record code (`tally_graph::witness::code::Decoder`,
//! whose constants `tally_format::abi::witness` re-exports), with the names of the profile's
//! functions for its `Enter`s.

use std::collections::HashMap;
use tally_format::trace::WitnessTrace;
pub(super) use tally_graph::witness::code::records_end;
use tally_graph::witness::code::{Decoder, EnterNames};
use tally_graph::witness::FuncId;

/// The runtime's bit stream of one thread, as regeneration asks for it.
pub(super) type Stream<'a> = Decoder<'a, Names>;

/// The functions an `Enter` record can name, by module slot and function index: looked up
/// once per `Enter`, so by index where the slots are small (the runtime numbers them from 1).
pub(super) struct Names {
    /// Slot -> index in `modules`, for slots below [`Names::DENSE`].
    dense: Vec<Option<usize>>,
    /// The same for larger slots.
    sparse: HashMap<u32, usize>,
    /// Per named module: function index -> FuncId.
    modules: Vec<Vec<Option<FuncId>>>,
}

impl Names {
    const DENSE: u32 = 1 << 16;

    pub(super) fn new(trace: &WitnessTrace, ids: &HashMap<(u64, u32), FuncId>) -> Names {
        let mut n = Names {
            dense: Vec::new(),
            sparse: HashMap::new(),
            modules: Vec::new(),
        };
        let mut by_hash: HashMap<u64, usize> = HashMap::new();
        for (&(hash, i), &f) in ids {
            let at = *by_hash.entry(hash).or_insert_with(|| {
                n.modules.push(Vec::new());
                n.modules.len() - 1
            });
            let funcs = &mut n.modules[at];
            let i = i as usize;
            if funcs.len() <= i {
                funcs.resize(i + 1, None);
            }
            funcs[i] = Some(f);
        }
        for &(slot, hash) in &trace.modules {
            let Some(&at) = by_hash.get(&hash) else {
                continue;
            };
            if slot < Self::DENSE {
                if n.dense.len() <= slot as usize {
                    n.dense.resize(slot as usize + 1, None);
                }
                n.dense[slot as usize] = Some(at);
            } else {
                n.sparse.insert(slot, at);
            }
        }
        n
    }

    fn get(&self, slot: u32, index: u32) -> Option<FuncId> {
        let m = if slot < Self::DENSE {
            *self.dense.get(slot as usize)?
        } else {
            self.sparse.get(&slot).copied()
        }?;
        *self.modules[m].get(index as usize)?
    }
}

impl EnterNames for Names {
    fn name(&self, slot: u32, index: u32) -> Option<FuncId> {
        self.get(slot, index)
    }
}
