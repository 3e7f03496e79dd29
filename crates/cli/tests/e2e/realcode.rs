//! Exactness on real code bases from crates.io packages that vendor C sources (located in the
//! cargo registry, never copied): Lua 5.4 (as C, where errors are longjmps, and as C++, where
//! they are exceptions) running `testdata/lua/workload.lua`, and the SQLite amalgamation running
//! `testdata/sqlite/driver.c`. Each is built plain and in `edge`, `edges-naive`, `blocks-naive`
//! and `vertex` mode; the instrumented programs must print exactly what the plain one prints and
//! exit with its status, and every block and edge count of every function must be equal across
//! the modes (for `vertex`: every block count, and the edge counts it determines). The Lua
//! builds whose frames end early (longjmp errors, C++ exceptions, a script error) are also built
//! with each early-exit strategy of `edge` forced (`--tally-early-exits=record|derive`).

use crate::support::*;
use std::path::Path;

/// Builds every variant, runs each with `run_args` in its own directory under the same program
/// name (so argv[0] is the same), and compares outputs and counts.
/// `extra` variants (after the [`MODES`]) are built and compared too.
fn check(
    name: &str,
    cxx: bool,
    build_args: &[String],
    run_args: &[&str],
    want_status: i32,
    extra: &[Variant],
) {
    let dir = scratch(name);
    let args: Vec<&str> = build_args.iter().map(String::as_str).collect();
    let mut outputs = Vec::new();
    let mut reports = Vec::new();
    let variants: Vec<Variant> = std::iter::once(Variant::Plain)
        .chain(MODES)
        .chain(extra.iter().copied())
        .collect();
    prebuild(&variants, cxx, build_args);
    for v in variants {
        let vdir = dir.join(v.name());
        std::fs::create_dir_all(&vdir).unwrap();
        let bin = vdir.join("prog");
        build(v, cxx, &args, &bin, &dir);
        let prof = vdir.join("prog.tally");
        let out = run(Path::new("./prog"), run_args, &vdir, &prof);
        assert_eq!(
            out.status.code(),
            Some(want_status),
            "{name} {}: exit status; stderr: {}",
            v.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.push((v.name(), out.stdout, out.stderr));
        if v != Variant::Plain {
            reports.push(report_json(&prof));
        }
    }
    for (vname, o, e) in &outputs[1..] {
        assert!(
            o == &outputs[0].1,
            "{name}: {vname} stdout differs from plain"
        );
        assert!(
            e == &outputs[0].2,
            "{name}: {vname} stderr differs from plain"
        );
    }
    let (nf, executed) = compare_modes(name, &reports);
    check_placements(name, &dir.join("edges-naive/prog.tally"));
    eprintln!("{name}: {nf} functions, {executed} executed blocks compared");
    assert!(nf > 100 && executed > 1000, "{name}: too little compared");
}

#[test]
fn lua_as_c_o2() {
    let script = repo().join("testdata/lua/workload.lua");
    check(
        "lua-c-O2",
        false,
        &lua_args(&["-O2"]),
        &[script.to_str().unwrap(), "1"],
        0,
        &EARLY_EXIT_VARIANTS,
    );
}

#[test]
fn lua_as_c_o0() {
    let script = repo().join("testdata/lua/workload.lua");
    check(
        "lua-c-O0",
        false,
        &lua_args(&["-O0"]),
        &[script.to_str().unwrap(), "1"],
        0,
        &[],
    );
}

#[test]
fn lua_as_cxx_o2() {
    // Compiled as C++, Lua raises errors with throw/catch instead of longjmp.
    let mut args = vec!["-x".to_string(), "c++".to_string()];
    args.extend(lua_args(&["-O2"]));
    // -lm must stay an input after the sources; "-x c++" applies to the sources only.
    let script = repo().join("testdata/lua/workload.lua");
    check(
        "lua-cxx-O2",
        true,
        &args,
        &[script.to_str().unwrap(), "1"],
        0,
        &EARLY_EXIT_VARIANTS,
    );
}

#[test]
fn lua_script_error_exit_status() {
    let dir = scratch("lua-err-script");
    let script = dir.join("fail.lua");
    std::fs::write(
        &script,
        "local function f(n) if n == 0 then error('boom') end return f(n - 1) + 1 end\nprint('start')\nprint(f(50))\n",
    )
    .unwrap();
    check(
        "lua-err",
        false,
        &lua_args(&["-O2"]),
        &[script.to_str().unwrap()],
        1,
        &EARLY_EXIT_VARIANTS,
    );
}

#[test]
fn sqlite_o2() {
    let args = sqlite_args(&[]);
    check("sqlite-O2", false, &args, &["1"], 0, &[]);
}
