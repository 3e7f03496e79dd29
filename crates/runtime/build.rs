//! Builds `runtime.c` into `$OUT_DIR/libtally_rt.a`. The archive is not linked into any Rust
//! binary: `tally` ships its bytes (see `src/lib.rs`) and links them into profiled programs.
fn main() {
    println!("cargo:rerun-if-changed=runtime.c");
    println!("cargo:rerun-if-changed=include/tally.h");
    println!("cargo:rerun-if-changed=build.rs");
    cc::Build::new()
        .file("runtime.c")
        .include("include")
        .std("c11")
        .opt_level(2)
        .pic(true)
        .debug(false)
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .cargo_metadata(false)
        .compile("tally_rt");
}
