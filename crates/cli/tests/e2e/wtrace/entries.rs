//! Second entries of public functions (`-pg`, variadic functions, pointers and `qsort`).

use super::*;

/// Second entries (`split_entries` in tally-llvm's trace mode): `pub`, called directly in its
/// module, through a pointer and recursively, gets an internal body that the direct calls
/// enter without the direct flag, and keeps its public symbol; `sq`, static and only called
/// directly, needs no public entry; `vsum` (variable arguments) keeps one entry, and so does
/// every function of a `-pg` build. Block for block as `trace-naive`, with the public entries
/// entered from a pointer and from `qsort`; and the code of a file with several public entries
/// is the same in every build.
const SECOND_ENTRIES: &str = r#"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
static int __attribute__((noinline)) sq(int x) { return x > 5 ? x * x : x + 1; }
int __attribute__((noinline)) pub(int x) { return x <= 0 ? 0 : (x & 1 ? sq(x) : pub(x - 3)); }
int __attribute__((noinline)) vsum(int n, ...) {
    va_list ap; va_start(ap, n); int s = 0;
    for (int i = 0; i < n; i++) s += va_arg(ap, int);
    va_end(ap); return s;
}
int __attribute__((noinline)) cmp(const void *a, const void *b) {
    return pub(*(const int *)a) - pub(*(const int *)b);
}
int (*volatile fp)(int) = pub;
int main(void) {
    long s = 0;
    int a[64];
    for (int i = 0; i < 2000; i++) {
        s += pub(i % 50) + fp(i % 17) + vsum(3, i, sq(i % 9), 1);
        a[i % 64] = i * 7919 % 101;
    }
    qsort(a, 64, sizeof a[0], cmp);
    printf("%ld %d %d\n", s, a[0], a[63]);
    return 0;
}
"#;

#[test]
fn second_entries_regenerate_exactly() {
    let dir = scratch("wtrace-second-src");
    let src = dir.join("second.c");
    std::fs::write(&src, SECOND_ENTRIES).unwrap();
    let o = exact("second-entries", &single(&src, "-O2"), 0);
    assert!(o.oracle.len() > 10_000, "too little compared");
    let nm = std::process::Command::new("nm")
        .arg(o.dir.join("trace/prog"))
        .output()
        .unwrap();
    let syms = String::from_utf8(nm.stdout).unwrap();
    let has = |s: &str| syms.lines().any(|l| l.ends_with(s));
    assert!(has(" T pub") && has(" t pub.tally.body"), "{syms}");
    assert!(has(" t sq") && !has("sq.tally.body"), "{syms}");
    assert!(has(" T vsum") && !has("vsum.tally.body"), "{syms}");
    // With an entry hook (`-pg`'s `mcount`) every function keeps one entry: the hook runs
    // once a call.
    let asm = dir.join("second-pg.s");
    let st = std::process::Command::new(tally())
        .args(["cc", "--tally-mode=trace", "-O2", "-pg", "-S"])
        .arg(&src)
        .arg("-o")
        .arg(&asm)
        .status()
        .unwrap();
    assert!(st.success());
    let asm = std::fs::read_to_string(asm).unwrap();
    assert!(asm.contains("mcount") && !asm.contains(".tally.body"));
    // The same input gives the same code: Lua's `ldo.c`, whose public entries were once emitted
    // in a hash map's order, built three times.
    let lua = locate("lua");
    let built: Vec<String> = (0..3)
        .map(|i| {
            let out = dir.join(format!("ldo-{i}.s"));
            let st = std::process::Command::new(tally())
                .args([
                    "cc",
                    "--tally-mode=trace",
                    "-O2",
                    "-DLUA_USE_LINUX",
                    "-S",
                    "-I",
                ])
                .arg(&lua)
                .arg(lua.join("ldo.c"))
                .arg("-o")
                .arg(&out)
                .status()
                .unwrap();
            assert!(st.success());
            std::fs::read_to_string(out).unwrap()
        })
        .collect();
    assert!(
        built[0].matches(".tally.body:").count() >= 3,
        "too few second entries"
    );
    assert!(
        built[0] == built[1] && built[1] == built[2],
        "ldo.c's code differs between builds"
    );
}
