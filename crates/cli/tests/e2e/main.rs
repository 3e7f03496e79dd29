//! tally's end-to-end tests: one test binary (`cargo test -p tally --test e2e`), one module per
//! subject, each module's documentation saying what it shows. They build programs with
//! `tally cc` (the test programs of `testdata/`, and Lua and SQLite from the cargo registry),
//! run them, and compare counts, outputs and exit statuses with an oracle: another mode, a
//! trace, or a plain build (`docs/design/tests.md`).
//!
//! One binary rather than one per file: the helpers in `support/` are compiled once, and
//! libtest keeps both cores busy across subjects instead of waiting for each file's slowest
//! test. A subject runs alone with a filter: `cargo test --release -p tally --test e2e
//! realcode::`.

mod crash_support;
mod support;

mod broken;
mod cache;
mod cmake;
mod compile;
mod continuous;
mod crash;
mod dataset;
mod diff;
mod driver;
mod early;
mod events;
mod exec;
mod exit_threads;
mod exports;
mod flags;
mod html;
mod ipath_exports;
mod ipath_json;
mod ipath_oracle;
mod ipath_threads;
mod ipaths;
mod long_running;
mod merge;
mod online_merge;
mod oracle;
mod paths;
mod pgo;
mod pgo_builds;
mod pgo_fidelity;
mod pgo_nested;
mod pgo_targets;
mod placements;
mod profile_dir;
mod realcode;
mod report_text;
mod safety;
mod sese_exits;
mod shapes;
mod shared_meta;
mod shlib;
mod snapshot_lifecycle;
mod source_lines;
mod stress;
mod threads;
mod tracepaths;
mod wring;
mod wtrace;
