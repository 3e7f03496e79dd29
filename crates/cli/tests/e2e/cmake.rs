//! CMake drops tally in like clang-19 ("configure results identical to a plain clang-19
//! build" for a CMake C++ shared library). CMake infers the toolchain's binutils from
//! the compiler's file name; through `tally links DIR`'s `DIR/clang-19` / `DIR/clang++-19` it
//! finds the same `llvm-ar-19`, `llvm-nm-19`, ... as for `clang-19`, so the CMake cache equals
//! the plain build's once the compiler paths are set aside. The project (a shared library and a
//! program linked against it) then builds, runs, and writes one profile holding both.

use crate::support::*;
use std::path::Path;
use std::process::Command;

const LISTS: &str = r#"cmake_minimum_required(VERSION 3.13)
project(demo C CXX)
add_library(shapes SHARED shapes.cpp)
add_executable(demo main.c)
target_link_libraries(demo shapes)
"#;

const SHAPES: &str = r#"extern "C" int area(int w, int h) {
    int a = 0;
    for (int i = 0; i < h; i++)
        a += w;
    return a;
}
"#;

const MAIN: &str = r#"#include <stdio.h>
int area(int w, int h);
int main(void) {
    int s = 0;
    for (int i = 1; i <= 10; i++)
        s += area(i, i % 3 ? i : 2);
    printf("%d\n", s);
    return 0;
}
"#;

/// CMakeCache.txt without comments, with the build directory and the compiler paths (and
/// `CMAKE_*_COMPILER_ARG1`) set aside.
fn cache(build: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(build.join("CMakeCache.txt")).unwrap();
    let dir = build.display().to_string();
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("//"))
        .filter(|l| {
            !l.starts_with("CMAKE_C_COMPILER:")
                && !l.starts_with("CMAKE_CXX_COMPILER:")
                && !l.starts_with("CMAKE_C_COMPILER_ARG1:")
                && !l.starts_with("CMAKE_CXX_COMPILER_ARG1:")
        })
        .map(|l| l.replace(&dir, "@BUILD@"))
        .collect();
    lines.sort();
    lines
}

fn configure(src: &Path, build: &Path, cc: &Path, cxx: &Path) {
    let out = Command::new("cmake")
        .arg("-S")
        .arg(src)
        .arg("-B")
        .arg(build)
        .arg("-DCMAKE_BUILD_TYPE=None")
        .env("CC", cc)
        .env("CXX", cxx)
        .output()
        .expect("run cmake (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "cmake with {}: {}",
        cc.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn cmake_finds_the_same_toolchain_as_for_clang_19() {
    let dir = scratch("cmake");
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("CMakeLists.txt"), LISTS).unwrap();
    std::fs::write(src.join("shapes.cpp"), SHAPES).unwrap();
    std::fs::write(src.join("main.c"), MAIN).unwrap();

    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let links = Command::new(tally())
        .arg("links")
        .arg(&bin)
        .output()
        .unwrap();
    assert!(
        links.status.success(),
        "{}",
        String::from_utf8_lossy(&links.stderr)
    );
    // Again: existing links are replaced, not an error.
    assert!(Command::new(tally())
        .arg("links")
        .arg(&bin)
        .status()
        .unwrap()
        .success());

    let plain = dir.join("plain");
    configure(
        &src,
        &plain,
        Path::new("/usr/bin/clang-19"),
        Path::new("/usr/bin/clang++-19"),
    );
    let tallied = dir.join("tally");
    configure(
        &src,
        &tallied,
        &bin.join("clang-19"),
        &bin.join("clang++-19"),
    );
    let (a, b) = (cache(&plain), cache(&tallied));
    let differ: Vec<_> = a
        .iter()
        .filter(|l| !b.contains(l))
        .chain(b.iter().filter(|l| !a.contains(l)))
        .collect();
    assert!(differ.is_empty(), "CMake caches differ:\n{differ:#?}");
    assert!(
        a.iter()
            .any(|l| l.starts_with("CMAKE_AR:") && l.ends_with("llvm-ar-19")),
        "plain build's CMAKE_AR is not llvm-ar-19: {:?}",
        a.iter().find(|l| l.starts_with("CMAKE_AR:"))
    );

    // It builds, runs, and writes one profile with the library and the program.
    let build = Command::new("cmake")
        .arg("--build")
        .arg(&tallied)
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "{}",
        String::from_utf8_lossy(&build.stdout)
    );
    let prof = dir.join("demo.tally");
    let out = Command::new(tallied.join("demo"))
        .env("TALLY_PROFILE", &prof)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "295\n");
    let report = report_json(&prof);
    let functions: Vec<&str> = report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(
        functions.contains(&"main") && functions.contains(&"area"),
        "{functions:?}"
    );
    let area = report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "area")
        .unwrap();
    assert_eq!(area["entry_count"], 10);
}
