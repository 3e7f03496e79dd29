//! `tally placements`: counter placements scored on a measured profile (Ball & Larus 1994 §6,
//! Graphs 2-4). The text is a snapshot; the orderings the theory guarantees are checked on the JSON
//! ([`check_placements`], also run on Lua and SQLite by `realcode.rs`).

use crate::support::*;

const PROG: &str = r#"#include <stdio.h>
__attribute__((noinline)) static int collatz_steps(unsigned n) {
    int steps = 0;
    while (n != 1) {
        if (n % 2 == 0)
            n /= 2;
        else
            n = 3 * n + 1;
        steps++;
    }
    return steps;
}
int main(void) {
    int best = 0;
    for (unsigned i = 1; i < 1000; i++) {
        int s = collatz_steps(i);
        if (s > best)
            best = s;
    }
    printf("best %d\n", best);
    return 0;
}
"#;

#[test]
fn placements_snapshot_orderings_and_refusal() {
    let dir = scratch("placements");
    std::fs::write(dir.join("collatz.c"), PROG).unwrap();
    for mode in ["edges-naive", "blocks-naive"] {
        build(
            Variant::Tally(mode),
            false,
            &["-O1", "-g", "collatz.c"],
            &dir.join(mode),
            &dir,
        );
        let out = run(
            &dir.join(mode),
            &[],
            &dir,
            &dir.join(format!("{mode}.tally")),
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "best 178\n");
    }
    let text = placements(&dir, "edges-naive.tally", false);
    assert!(text.status.success());
    // The program line names the scratch directory and the linker's build id: keep the shape.
    let text: String = String::from_utf8_lossy(&text.stdout)
        .lines()
        .map(|l| match l.strip_prefix("program: ") {
            Some(rest) => {
                assert!(rest.contains("/edges-naive (build id "), "{l}");
                "program: .../edges-naive (build id ...)\n".to_string()
            }
            None => format!("{l}\n"),
        })
        .collect();
    insta::assert_snapshot!("collatz_placements", text);
    check_placements("collatz", &dir.join("edges-naive.tally"));

    // A profile that does not determine the edge counts is refused with one line.
    let bad = placements(&dir, "blocks-naive.tally", false);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("edges-naive"), "{err}");
}
