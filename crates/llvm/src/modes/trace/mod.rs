//! `trace` mode: witness tracing (Ball & Larus 1994 §4; `tally_graph::witness`). Each function is
//! lowered to a [`FunctionInput`] (its graph, the call sites of each block in order, its
//! unwind edges), given the cheaper of the witness and branch plans (`cheaper_plan`, checked
//! by `check_plan`), and instrumented to write exactly the records of
//! `tally_graph::witness::stream::records_of` through the runtime (`c/wtrace/`):
//!
//! - every witnessed edge of width > 0: its value appended inline at the top of the thread's
//!   one-word accumulator ([`put_fn`], [`append`]: `acc = acc >> bits | value << (64 - bits)`, up
//!   to 63 bits above a sentinel 1; `__tally_wtrace_spill` when the word's low `bits` bits are not
//!   all zero, i.e. it has no room) at the edge's site (the sites of
//!   [`crate::counters::plan::Plan::for_edges`], predecessor tags where an edge has none); the
//!   check of room shared by the appends up to the next call or loop head ([`Rec::hoist_checks`]);
//!   the word in a register within the function ([`local_fns`]), stored to the thread's after every
//!   append (written through), or with `--tally-trace-registers=on` only before calls and `ret`;
//! - the entry, inline ([`inline_fns`]: `tally.wtrace.enter`, the runtime's
//!   `__tally_wtrace_enter(&module, counters, index, self)` on its slow path), which writes `Enter`
//!   unless the caller was a traced `Direct` or `Extern` site, which said so by
//!   `__tally_wtrace_direct(callee, site)` just before the call (a per-thread flag naming the
//!   callee's address, so a stale flag can never silence another function's `Enter`; `site`
//!   numbers the function's calls over its blocks in order, as the metadata lists them).
//!   `self` is the function's own address ([`own_address`]: a private alias where another
//!   image may interpose its name), null for a weak or linkonce definition (another module's
//!   copy may replace it: always announced). A function likely to be entered announced
//!   ([`may_be_announced`]: its address is taken) gets
//!   `tally.wtrace.enter.again`, whose announced entry appends the 3-bit predicted `Enter`
//!   inline when it is the function the stream's `Enter` code predicts (`l_alloc` entered
//!   through Lua's `frealloc` pointer over and over, SQLite's `sqlite3Mem*` methods in turn);
//!   a function called directly in its module gets a second entry for those calls, which
//!   counts the depth and nothing else ([`split_entries`]);
//! - `Extern` sites ([`classify`]): a direct call that the linker resolves (a declaration, a
//!   weak or linkonce definition, an external definition of a shared object's code) announces
//!   the callee's address the same way, and writes `Back` after it as an `Unknown` call does
//!   (the caller cannot know whether the callee is traced). `module` (`struct
//!   tally_wtrace_module`, [`module_tables`]) gives the runtime the addresses of the module's
//!   external callees and of its own functions; the runtime resolves each external callee by
//!   address (exactly: interposition and two definitions of one name resolve as the linker
//!   did) and writes the resolution into the trace, where the reader takes a resolved site for
//!   a call of that traced function (`Callee::DirectBack`: no `Enter`, `Back` after it) and
//!   an unresolved one for an `Unknown` call;
//! - before every `Unknown` call: `__tally_wtrace_call(site)`; with `direct`, this keeps the
//!   flight recorder's shadow stack (`c/wring.c`: where each activation is calling);
//! - after every `Unknown` call that returns: a `Back` record (1 bit), inline the same way;
//!   after an `Extern` call, the same `Back` only when the callee was not traced (trace format
//!   4: every traced function's inline `ret` leaves its `self` in the thread's accumulator, and
//!   `tally.wtrace.back` compares it with the callee's address; see [`inline_fns`])
//!   (for an `invoke` at the start of its normal destination, on a block split onto that edge
//!   when the destination is shared);
//! - the second return of `setjmp`: `__tally_wtrace_reentry(ret, depth, block)`, an `Unwind`
//!   record with the number of traced activations the `longjmp` abandoned (the runtime keeps
//!   each thread's depth: `enter` adds one and returns it, `__tally_wtrace_ret()` before each
//!   `ret` takes one off; functions with `setjmp` or landing pads keep their depth in an
//!   alloca);
//! - first thing in a landing pad: `__tally_wtrace_unwind(depth, block)`, the same `Unwind`
//!   record for an exception (how 1: regeneration enters `block` by the unwind edge of the
//!   block whose call was running). A `resume` is an `Unknown` call site of its own block and
//!   its `Return` edge an unwind edge (no `ret` runs: the next landing counts the activation
//!   among the abandoned, and regeneration reports that `Return` edge then);
//! - the entry of a function that cannot be traced: a "lost" record (kind 2, how 2; inline),
//!   which makes the reader stop with "not exact past this point".
//!
//! Not exact with exceptions (not detected): an exception caught by code that is not traced
//! (an uninstrumented library, or a function trace mode could not instrument, which writes
//! "lost" only at its entry) after it unwound traced activations: no landing pad of a traced
//! function runs, so no `Unwind` says they were abandoned, and the runtime's depth stays too
//! high until the next traced landing; regeneration then goes wrong or stops with an error.
//! Exceptions that unwind only untraced frames, or that a traced landing pad catches, are
//! exact, as are `catch (...)`, rethrows and cleanups; `std::terminate` ends the stream.
//!
//! Limits of the resolution of `Extern` sites: it is written when the trace is (the end of
//! the process, a fatal signal, the flight recorder's dumps): a trace without it (a process
//! killed by SIGKILL, a file copied while the program ran) is refused by the reader. Two
//! functions the linker folded to one address (identical code folding) resolve to the first
//! module's. A module unloaded by `dlclose` keeps its tables (copied when it got its slot); one
//! loaded later at the same addresses may then resolve to the old one. Calls of weak or
//! linkonce definitions (C++ inline functions, templates) keep paying `Enter`.
//!
//! The metadata keeps the call sites (callees by name) and the plan ([`WtraceMeta`]), so the
//! reader regenerates with exactly the plan the code was built with.
//!
//! The files: [`plan`] (the plan of one function), [`callees`] (how calls are seen, the
//! module's tables), [`path_code`] (`--tally-trace=paths`), [`runtime`] (the runtime's entry
//! points and the helpers that append to the accumulator's word), [`inline`] (the inline
//! entry, return and call-site helpers), [`records`] (where a function's records go),
//! [`emit`] (a function's records), [`entries`] (second entries).
//!
//! [`FunctionInput`]: tally_graph::witness::FunctionInput
//! [`put_fn`]: runtime::put_fn
//! [`append`]: runtime::append
//! [`Rec::hoist_checks`]: records::Rec::hoist_checks
//! [`local_fns`]: runtime::local_fns
//! [`inline_fns`]: inline::inline_fns
//! [`own_address`]: callees::own_address
//! [`may_be_announced`]: callees::may_be_announced
//! [`classify`]: callees::classify
//! [`WtraceMeta`]: tally_format::WtraceMeta

mod callees;
mod emit;
mod entries;
mod inline;
mod path_code;
mod plan;
mod records;
mod runtime;

use super::{FnPlan, ModeImpl, PlanCx};
use crate::ir::lower::Lowered;
use crate::ir::Val;
use callees::module_tables;
use emit::Untraced;
use entries::split_entries;

pub(crate) struct Trace;

impl ModeImpl for Trace {
    fn plan(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String> {
        // A function that cannot be traced is still instrumented, to say so where it runs:
        // its callers' plans treat it as any other call.
        Ok(self
            .plan_traced(cx)
            .unwrap_or_else(|why| Box::new(Untraced(why))))
    }

    fn plan_module(
        &self,
        funcs: &[(Val, &Lowered)],
        _opts: &crate::options::Options,
    ) -> Option<super::ModulePlan> {
        module_tables(funcs);
        None
    }

    fn after_emit(&self, g: &crate::emit::Globals) {
        split_entries(g);
    }
}
