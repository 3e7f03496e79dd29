//! An interprocedural path of a module's set with its functions named and its blocks located,
//! as the report holds it ([`IpathPath`]).

use super::{IpathRow, IpathStep};
use crate::{demangle, loc_file, IpathCallStep, IpathPath, IpathPathStep};
use tally_format::ModuleMeta;

/// An interprocedural path with its functions named and its blocks located.
pub(super) fn ipath_text(meta: &ModuleMeta, potential: u128, r: &IpathRow) -> IpathPath {
    let name = |f: u32| meta.functions[f as usize].name.clone();
    let at = |function: u32, block: u32, site: u32, callee: Option<u32>| IpathCallStep {
        caller: name(function),
        block,
        site,
        callee: callee.map(name),
    };
    let steps = r
        .steps
        .iter()
        .map(|s| match *s {
            IpathStep::Block { function, block } => {
                let f = &meta.functions[function as usize];
                let l = f.blocks.get(block as usize);
                IpathPathStep::Block {
                    function: f.name.clone(),
                    demangled: demangle(&f.name),
                    block,
                    file: l.and_then(|l| loc_file(meta, l)),
                    line: l.map_or(0, |l| l.line),
                }
            }
            IpathStep::Call {
                function,
                block,
                site,
                callee,
                matched,
            } => IpathPathStep::Call {
                call: at(function, block, site, Some(callee)),
                matched,
            },
            IpathStep::Return {
                function,
                block,
                site,
                callee,
                matched,
            } => IpathPathStep::Return {
                call: at(function, block, site, Some(callee)),
                matched,
            },
            IpathStep::Summary {
                function,
                block,
                site,
                callee,
            } => IpathPathStep::Summary(at(function, block, site, callee)),
            IpathStep::Restart => IpathPathStep::Restart,
            IpathStep::Reentry => IpathPathStep::Reentry,
            IpathStep::Cut => IpathPathStep::Cut,
            IpathStep::EarlyExit => IpathPathStep::EarlyExit,
        })
        .collect();
    IpathPath {
        module: meta.source.clone(),
        mode: meta.mode,
        potential,
        number: r.number,
        count: r.count,
        start: r.start,
        end: r.end,
        context: r.context,
        steps,
    }
}
