//! Pseudo-probes in the metadata: what a profile needs to become one of LLVM's probe-based
//! sample profiles (`tally report --export sample-profile`, tally-report's `sample_profile`).
//!
//! A build with clang's `-fpseudo-probe-for-profiling` gives every block of each function's
//! pre-optimization graph a probe, an `llvm.pseudoprobe(GUID, id, type, factor)` call that
//! optimization keeps in the blocks that replace it: copies made by unrolling, tail
//! duplication or inlining keep the id, and `!llvm.pseudo_probe_desc` names each function's
//! GUID and the checksum of its pre-optimization graph. tally instruments the optimized IR,
//! so an original block's exact execution count is the sum, over every probe call carrying
//! its id, of the exact count of the optimized block holding the call: this module records
//! which probe calls each optimized block holds ([`SourceMeta::probes`](super::SourceMeta))
//! and the module's descriptors ([`ProbeDesc`]).
//!
//! A `--tally-pgo` training build also counts where its indirect calls go ([`CallTargets`]):
//! what clang's IR PGO learns by value profiling (`__llvm_profile_instrument_target`) and its
//! indirect-call promotion uses. The sample profile gives them as the call-site probe's targets
//! (` id: count name:count ...`). Its direct calls ([`DirectCall`]) go there too, as LLVM's
//! own profile generator writes a sampled call that was not inlined: ` id: count callee:count`.

use serde::{Deserialize, Serialize};

/// A function's pseudo-probe descriptor (one operand of `!llvm.pseudo_probe_desc`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ProbeDesc {
    /// The GUID the function's probes carry (the MD5 of its name, as LLVM computes it).
    pub guid: u64,
    /// The checksum of the function's pre-optimization graph, which the sample-profile loader
    /// compares with the one it computes before it trusts a profile.
    pub checksum: u64,
    /// The function's name as the sample profile names it (empty when the module has a probe
    /// of this GUID but no descriptor).
    pub name: String,
}

/// One `llvm.pseudoprobe` call of a block: probe `id` (from 1) of the function whose descriptor
/// is entry `desc` of [`ModuleMeta::probe_descs`](super::ModuleMeta), in inline scope `scope`.
/// A block holds one per call, so an unrolled body lists the same probe as often as it was
/// copied. The scope tells the copies of an inlined function apart, so that the reader can
/// see a probe that optimization removed from one copy (SimplifyCFG drops the probe of a
/// block it folds into a `select`): the probe's sum is then not exact.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct ProbeAt {
    /// Index of the owner's descriptor in the module's table.
    pub desc: u32,
    /// The probe's id in its owner's pre-optimization graph.
    pub id: u32,
    /// The inline scope of the call's location (`s0` without debug info).
    pub scope: super::ScopeIdx,
}

/// An indirect call of a `--tally-pgo` training build and the functions of its module it may
/// call: those whose address is taken and whose type is the call's. Counter `counter + i` of
/// the module counts the calls that went to `targets[i]`, exactly; a call to any other function
/// (one of another module, or called through a pointer of another type) is in no counter, and
/// the call's block count less the targets' sum is how many went elsewhere.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct CallTargets {
    /// The block holding the call: its count is the number of calls.
    pub block: u32,
    /// The call's own pseudo-probe id (an indirect-call probe of the function of `scope`).
    pub probe: u32,
    /// The inline scope of the call's location (`s0` without debug info).
    pub scope: super::ScopeIdx,
    /// The module counter counting the calls of `targets[0]`; the others follow.
    pub counter: super::CounterIdx,
    /// The candidate functions, by name (at least one).
    pub targets: Vec<String>,
}

/// A direct call with a call-site probe in a `--tally-pgo` training build, which its
/// pre-inlining left a call. Every entry of its block makes the call (a call that may end the
/// frame ends a block: `META_VERSION` 13), so the block's count is the callee's count there.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct DirectCall {
    /// The block holding the call.
    pub block: u32,
    /// The call's own pseudo-probe id (a direct-call probe of the function of `scope`).
    pub probe: u32,
    /// The inline scope of the call's location (`s0` without debug info).
    pub scope: super::ScopeIdx,
    /// The callee's name, as the sample profile names functions.
    pub callee: String,
}
