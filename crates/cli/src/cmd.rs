//! The report commands, one file each: its clap arguments and its `run`; `common` and `read`
//! hold what they share.

pub mod check;
pub mod common;
pub mod diff;
pub mod export;
pub mod html;
pub mod merge;
pub mod paths;
pub mod placements;
pub mod read;
pub mod report;
pub mod show;
pub mod trace;
