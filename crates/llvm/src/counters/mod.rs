//! Counters of edges and blocks, on the emission toolkit ([`crate::emit`]): which edges a
//! function measures ([`place`]: the maximum spanning tree's chords, Ball & Larus 1994 §3.2,
//! §5, §6.3), the plan that gives each counter its site ([`plan`]) and its application
//! ([`apply`]), SESE counters that make some chords free (Frenot & Pereira 2024, [`sese`]),
//! and counters kept in registers across call-free loops ([`promote`]). The modes
//! (`crate::modes`) build on these; nothing here knows a mode.

pub(crate) mod apply;
pub(crate) mod place;
pub(crate) mod plan;
pub(crate) mod promote;
pub(crate) mod sese;
