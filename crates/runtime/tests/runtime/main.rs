//! End-to-end tests of the C runtime (`c/*.c`): C (and C++) programs with hand-built module descriptors and
//! hand-maintained frame records, linked with `libtally_rt.a`, run, and their profiles read back
//! with tally-format.
//!
//! One test binary (`--test runtime`), one submodule per group of tests.

#[path = "../common/mod.rs"]
mod common;

mod frames;
mod linking;
mod paths;
mod profile;
mod run_record;
mod shared;

use common::{counters_of, prelude, Env, Module, CXX};

fn pid_of(out: &std::process::Output) -> u64 {
    let s = String::from_utf8_lossy(&out.stdout);
    s.lines()
        .find_map(|l| l.strip_prefix("pid "))
        .expect("the program prints its pid")
        .trim()
        .parse()
        .unwrap()
}
