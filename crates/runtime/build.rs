//! Builds the C runtime (`c/*.c`, `c/wtrace/*.c`) into `$OUT_DIR/libtally_rt.a`. The archive is not linked into any Rust
//! binary: `tally` ships its bytes (see `src/lib.rs`) and links them into profiled programs.
//!
//! First it writes, from `tally_format::abi` (the one source of the runtime ABI):
//! - `$OUT_DIR/tally_abi_check.h`, `_Static_assert`s that every `#define` of `include/tally.h`
//!   and the `sizeof` / `offsetof` of every field of its shared structs have the values
//!   `tally_format::abi` gives them; `c/rt.h` includes it, so a `tally.h` (or an `abi.rs`)
//!   changed alone fails this build;
//! - `$OUT_DIR/tally_redirects.h`, every runtime wrapper of `tally_format::abi::REDIRECTS`
//!   declared with the type of the libc function it stands for;
//! - `$OUT_DIR/abi.rs`, the constants `src/lib.rs` re-exports, so that the crate itself needs
//!   no dependency.
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=c");
    println!("cargo:rerun-if-changed=include/tally.h");
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(
        out.join("tally_abi_check.h"),
        tally_format::abi::c_check_header(),
    )
    .expect("write tally_abi_check.h");
    std::fs::write(
        out.join("tally_redirects.h"),
        tally_format::abi::c_redirects_header(),
    )
    .expect("write tally_redirects.h");
    std::fs::write(
        out.join("abi.rs"),
        format!(
            "/// Version of the runtime ABI (`TALLY_ABI_VERSION` in `tally.h`; `abi_version` of \
             every\n/// `struct tally_module`): `tally_format::abi::ABI_VERSION`.\n\
             pub const ABI_VERSION: u32 = {};\n",
            tally_format::abi::ABI_VERSION
        ),
    )
    .expect("write abi.rs");
    // `c/*.c`, and the files of the jobs large enough for a folder of their own (`c/wtrace/`:
    // trace mode, its files sharing `c/wtrace/wtrace.h`).
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in ["c", "c/wtrace"] {
        files.extend(
            std::fs::read_dir(dir)
                .unwrap_or_else(|e| panic!("read crates/runtime/{dir}: {e}"))
                .map(|e| e.expect("read a directory entry").path())
                .filter(|p| p.extension().is_some_and(|x| x == "c")),
        );
    }
    files.sort();
    // Two archives from the same sources: `libtally_rt.a` (initial-exec thread-locals) for
    // executables and for shared objects with trace-mode code, and `libtally_rt_dyn.a`
    // (general-dynamic, `TALLY_DYNAMIC_TLS`) for every other shared object, which then takes
    // no static TLS (`TALLY_TLS_MODEL` in include/tally.h; the driver picks, cli/src/driver.rs).
    for (name, dir, dynamic) in [
        ("tally_rt", out.clone(), false),
        ("tally_rt_dyn", out.join("dyn"), true),
    ] {
        std::fs::create_dir_all(&dir).expect("create the archive's directory");
        let mut b = cc::Build::new();
        if dynamic {
            b.define("TALLY_DYNAMIC_TLS", None);
        }
        b.files(&files)
            .include("c")
            .include("include")
            .include(&out)
            .out_dir(&dir)
            .std("c11")
            .opt_level(2)
            .pic(true)
            // Every linked image (executable or shared object) carries its own copy of the
            // runtime, none exported: a tally-built library adds no symbol to its dynamic
            // symbol table and never captures another image's references.
            // The copies of one process find one another through their `.note.tally` (see
            // c/process.c).
            .flag("-fvisibility=hidden")
            .debug(false)
            .warnings(true)
            .extra_warnings(true)
            .warnings_into_errors(true)
            .cargo_metadata(false)
            .compile(name);
    }
}
