//! The layout's cost on graphs that used to blow it up, counted rather than timed.

use super::*;

/// A loop around `k` optional steps (`if (x & bit) step();`, 2^k paths), like a server's
/// per-iteration housekeeping: ENTRY 0, test `1 + 2i`, step `2 + 2i`, latch `1 + 2k`, EXIT.
fn steps(k: usize) -> (usize, Vec<(usize, usize)>) {
    let latch = 1 + 2 * k;
    let mut e = vec![(0, 1)];
    for i in 0..k {
        let (t, s, next) = (1 + 2 * i, 2 + 2 * i, 3 + 2 * i);
        e.extend([(t, s), (t, next), (s, next)]);
    }
    e.extend([(latch, 1), (latch, latch + 1)]);
    (latch + 2, e)
}

/// The calls of layout-rs 0.1.3's `DAG::is_reachable_inner` that `VisualGraph::to_valid_dag`
/// makes on edges added in `order` (its code, restated), up to `cap`: it asks whether each
/// edge closes a cycle and, when `validate`, checks every edge again after each one.
fn reach_calls(n: usize, order: &[(usize, usize)], validate: bool, cap: u64) -> u64 {
    fn inner(
        succ: &[Vec<usize>],
        from: usize,
        to: usize,
        seen: &mut [bool],
        c: &mut u64,
        cap: u64,
    ) -> bool {
        *c += 1;
        if from == to {
            return true;
        }
        if seen[from] || *c > cap {
            return false;
        }
        seen[from] = true;
        for &s in &succ[from] {
            if inner(succ, s, to, seen, c, cap) {
                return true;
            }
        }
        seen[from] = false;
        false
    }
    let reach = |succ: &[Vec<usize>], a: usize, b: usize, c: &mut u64| {
        a == b || inner(succ, a, b, &mut vec![false; n], c, cap)
    };
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut c = 0;
    for &(a, b) in order {
        if a == b {
            continue;
        }
        if reach(&succ, b, a, &mut c) {
            succ[b].push(a);
        } else {
            succ[a].push(b);
        }
        if validate {
            for v in 0..n {
                for d in succ[v].clone() {
                    reach(&succ, d, v, &mut c);
                }
            }
        }
        if c > cap {
            return c;
        }
    }
    c
}

fn shape(e: &[(usize, usize)]) -> Vec<(usize, usize, bool)> {
    e.iter().map(|&(a, b)| (a, b, true)).collect()
}

#[test]
fn reachability_is_one_call_per_edge_where_it_was_exponential() {
    let (n, e) = steps(29);
    // As the site used to call it: 2^29 paths behind the last check.
    assert!(reach_calls(n, &e, true, 10_000_000) > 10_000_000);
    let p = plan(n, &shape(&e), false);
    let fed: Vec<(usize, usize)> = p.order.iter().map(|&(a, b, _, _)| (a, b)).collect();
    assert_eq!(reach_calls(n, &fed, false, u64::MAX), e.len() as u64);
    // Only the loop's back edge is turned round.
    let rev: Vec<usize> = p.order.iter().filter(|o| o.2).map(|o| o.3).collect();
    assert_eq!(rev, [e.len() - 2]);
}

/// Small deterministic pseudo-random graphs: irreducible loops, parallel and self edges.
fn random(seed: u64) -> (usize, Vec<(usize, usize)>) {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = |m: usize| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((x >> 33) as usize) % m
    };
    let n = 2 + next(40);
    let e = (0..next(4 * n) + 1).map(|_| (next(n), next(n))).collect();
    (n, e)
}

#[test]
fn the_order_is_acyclic_complete_and_answers_each_question_at_once() {
    for seed in 0..300 {
        let (n, e) = random(seed);
        let p = plan(n, &shape(&e), true);
        assert_eq!(p, plan(n, &shape(&e), true), "deterministic");
        let mut ids: Vec<usize> = p.order.iter().map(|o| o.3).collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..e.len()).collect::<Vec<_>>(), "every edge once");
        for &(a, b, rev, i) in &p.order {
            assert_eq!(if rev { (b, a) } else { (a, b) }, e[i]);
        }
        let fed: Vec<(usize, usize)> = p.order.iter().map(|&(a, b, _, _)| (a, b)).collect();
        let loops = e.iter().filter(|(a, b)| a != b).count() as u64;
        assert_eq!(reach_calls(n, &fed, false, u64::MAX), loops, "seed {seed}");
    }
}

fn draw_all(n: usize, e: &[(usize, usize)], optimize: bool) -> (String, Plan) {
    let nodes: Vec<Node> = (0..n)
        .map(|i| Node {
            label: format!("n{i} ×1\nL{i}"),
            fill: "#ffffff",
            props: format!("data-block=\"{i}\""),
        })
        .collect();
    let edges: Vec<Edge> = e
        .iter()
        .enumerate()
        .map(|(i, &(from, to))| Edge {
            from,
            to,
            label: format!("{i}"),
            color: "#333333",
            width: 1 + i % 7,
            dashed: i % 5 == 0,
            props: format!("data-edge=\"{i}\""),
        })
        .collect();
    let (svg, p) = svg(&nodes, &edges, optimize);
    for i in 0..n {
        assert!(svg.contains(&format!("data-block=\"{i}\"")), "block {i}");
    }
    for i in 0..e.len() {
        assert!(svg.contains(&format!("data-edge=\"{i}\"")), "edge {i}");
    }
    (svg, p)
}

#[test]
fn a_chain_of_29_tests_is_drawn_whole() {
    // 59 blocks: minutes before the graph went in acyclic and unchecked.
    let (n, e) = steps(29);
    let (_, p) = draw_all(n, &e, false);
    assert!(p.place && !p.optimize && !p.plain);
}

/// 60 blocks, each jumping to the next `d` (a switch in a loop): long edges everywhere.
fn dense(d: usize) -> (usize, Vec<(usize, usize)>) {
    let n = 62;
    let e = (0..n - 1)
        .flat_map(|a| (1..=d).map(move |j| (a, (a + j * 5) % (n - 1) + 1)))
        .collect();
    (n, e)
}

#[test]
fn dense_graphs_are_drawn_whole_without_the_costly_passes() {
    let (n, e) = dense(3);
    let (_, p) = draw_all(n, &e, true);
    assert!(!p.optimize && !p.place && !p.plain, "{p:?}");
    // A computed goto in each of 60 blocks to each other block: 146 000 nodes once layered,
    // laid out in linear time.
    for d in [12, 60] {
        let (n, e) = dense(d);
        let (svg, p) = draw_all(n, &e, true);
        assert!(p.plain && p.lowered_nodes > 20_000, "{}", p.lowered_nodes);
        assert!(svg.starts_with("<svg") && svg.contains("<marker "));
    }
}

#[test]
fn plain_layout_escapes_labels_and_points_arrows_at_targets() {
    let nodes: Vec<Node> = ["a<b", "c&d"]
        .iter()
        .map(|l| Node {
            label: l.to_string(),
            fill: "#ffffff",
            props: String::new(),
        })
        .collect();
    let edge = |from, to| Edge {
        from,
        to,
        label: "<x>".into(),
        color: "#333333",
        width: 1,
        dashed: false,
        props: String::new(),
    };
    let edges = [edge(0, 1), edge(1, 0), edge(1, 1)];
    let p = plan(2, &shape(&[(0, 1), (1, 0), (1, 1)]), false);
    let svg = plain::svg(&nodes, &edges, &p.order);
    assert!(!svg.contains("a<b") && svg.contains("a&lt;b") && svg.contains("&lt;x&gt;"));
    assert_eq!(svg.matches("marker-start").count(), 1);
    assert_eq!(svg.matches("marker-end").count(), 2);
}

#[test]
fn a_graph_layout_rs_asserts_on_gets_the_plain_layout() {
    // The shape of SQLite's `editPage` at -O2 (30 blocks, ENTRY 0, one EXIT per return).
    let e = [
        (0, 1),
        (1, 2),
        (1, 5),
        (2, 3),
        (2, 4),
        (2, 31),
        (3, 30),
        (3, 32),
        (4, 5),
        (5, 6),
        (5, 7),
        (6, 7),
        (6, 33),
        (7, 23),
        (7, 8),
        (8, 23),
        (8, 9),
        (9, 10),
        (9, 11),
        (10, 11),
        (10, 23),
        (10, 34),
        (11, 21),
        (11, 12),
        (12, 13),
        (13, 14),
        (13, 20),
        (14, 15),
        (14, 16),
        (15, 16),
        (16, 17),
        (16, 18),
        (17, 18),
        (17, 35),
        (18, 19),
        (18, 23),
        (18, 36),
        (19, 20),
        (20, 13),
        (20, 21),
        (21, 22),
        (21, 23),
        (21, 37),
        (22, 30),
        (23, 24),
        (23, 25),
        (24, 30),
        (24, 38),
        (25, 26),
        (26, 27),
        (26, 28),
        (27, 28),
        (27, 39),
        (28, 26),
        (28, 29),
        (29, 30),
        (29, 40),
        (30, 41),
    ];
    // Labels of 1 to 3 digits: layout-rs 0.1.3 asserts in its edge fixer (`edge_fixer.rs:34`).
    let digits = |i: usize| 7usize.pow((i % 3) as u32);
    let nodes: Vec<Node> = (0..42)
        .map(|i| Node {
            label: format!("n{i} ×{}\nL{}", digits(i), 60000 + i * 7),
            fill: "#ffffff",
            props: format!("data-block=\"{i}\""),
        })
        .collect();
    let edges: Vec<Edge> = e
        .iter()
        .enumerate()
        .map(|(i, &(from, to))| Edge {
            from,
            to,
            label: 13usize.pow((i % 3) as u32).to_string(),
            color: "#333333",
            width: 1,
            dashed: false,
            props: format!("data-edge=\"{i}\""),
        })
        .collect();
    let (svg, p) = svg(&nodes, &edges, false);
    assert!(p.plain && p.lowered_nodes < LOWERED_BUDGET, "{p:?}");
    assert_eq!(svg.matches("data-block=").count(), 42);
    assert_eq!(svg.matches("data-edge=").count(), e.len());
}

#[test]
fn styles_are_sorted() {
    let svg = "<svg><style>\n.a15 { x }\n.a10 { y }\n</style><g/></svg>";
    assert_eq!(
        sort_styles(svg),
        "<svg><style>\n.a10 { y }\n.a15 { x }\n</style><g/></svg>"
    );
    assert_eq!(
        sort_styles("<svg></style><style>\n"),
        "<svg></style><style>\n"
    );
}
