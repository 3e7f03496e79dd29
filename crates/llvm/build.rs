//! Builds `shim/freq.cpp`, `shim/scev.cpp`, `shim/globals.cpp` and `shim/debuginfo.cpp`, the
//! pieces of LLVM's C++ API tally uses (its static block and edge frequency estimate,
//! ScalarEvolution's trip counts, a global's `dso_local`, a location's discriminator: the C
//! API lacks them), against the headers of the LLVM that
//! llvm-sys links (`LLVM_SYS_191_PREFIX`).
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=shim/freq.cpp");
    println!("cargo:rerun-if-changed=shim/scev.cpp");
    println!("cargo:rerun-if-changed=shim/globals.cpp");
    println!("cargo:rerun-if-changed=shim/debuginfo.cpp");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LLVM_SYS_191_PREFIX");
    let config = std::env::var_os("LLVM_SYS_191_PREFIX")
        .map(|p| PathBuf::from(p).join("bin/llvm-config"))
        .unwrap_or_else(|| PathBuf::from("llvm-config-19"));
    let out = Command::new(&config)
        .arg("--includedir")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", config.display()));
    assert!(
        out.status.success(),
        "{} --includedir failed",
        config.display()
    );
    let include = String::from_utf8(out.stdout).expect("llvm-config prints UTF-8");
    cc::Build::new()
        .cpp(true)
        .file("shim/freq.cpp")
        .file("shim/scev.cpp")
        .file("shim/globals.cpp")
        .file("shim/debuginfo.cpp")
        .flag("-isystem")
        .flag(include.trim())
        .std("c++17")
        .flag("-fno-exceptions")
        .flag("-fno-rtti")
        .define("__STDC_CONSTANT_MACROS", None)
        .define("__STDC_FORMAT_MACROS", None)
        .define("__STDC_LIMIT_MACROS", None)
        .define("_GNU_SOURCE", None)
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("tally_llvm_shim");
}
