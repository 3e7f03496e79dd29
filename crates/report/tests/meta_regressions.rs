//! Regressions of the metadata contract: profiles whose hashes check out but whose metadata is
//! wrong made `tally report` panic. Each case is written as JSON (the id newtypes serialize as bare
//! integers) so that the same source compiles against the metadata types before and after
//! they were typed; each must now give a one-line error from the reader.

use serde_json::json;
use tally_format::profile::{Profile, ProfileModule};
use tally_format::ModuleMeta;

/// A function `n0 -> n1 -> EXIT` with a call in n0, in an events module; `patch` edits the
/// function's JSON before the module is built.
fn events_module(patch: impl FnOnce(&mut serde_json::Value)) -> ModuleMeta {
    let mut f = json!({
        "name": "f",
        "linkage": "External",
        "loc": {"file": 0, "line": 1},
        "num_blocks": 2,
        "edges": [[0, 1, "Flow"], [1, 2, "Return"]],
        "blocks": [{"file": 0, "line": 1}, {"file": 0, "line": 2}],
        "cfg_hash": 0,
        "counter_base": 1,
        "counters": ["Events", "Events"],
        "zero_edges": [],
        "unknown_edges": [],
        "paths": null,
        "events": {
            "per_block": [3, 2],
            "inclusive": 0,
            "calls": [{"block": 0, "callee": "g", "counter": 1}],
        },
    });
    patch(&mut f);
    let mut m: ModuleMeta = serde_json::from_value(json!({
        "source": "r.c",
        "producer": "regression",
        "mode": "Events",
        "num_counters": 3,
        "files": ["r.c"],
        "functions": [f],
        "skipped": [],
        "event_kind": "insns",
    }))
    .expect("the JSON is a ModuleMeta");
    // The graph hash is right, so only the patched field is wrong.
    if let Ok(cfg) = m.functions[0].cfg() {
        m.functions[0].cfg_hash = cfg.shape_hash();
    }
    m
}

/// Writes `meta` with `counters` into a profile (hash correct) and reads it back; then reports
/// and renders it every way the CLI does. Returns the first error, as the CLI would print it.
fn report(meta: ModuleMeta, counters: Vec<u64>) -> Result<(), String> {
    let bytes = Profile {
        delta: false,
        pid: 1,
        program: Default::default(),
        modules: vec![ProfileModule::new(meta, counters)],
        unfinished: false,
        raced: false,
        signal: None,
        run: None,
    }
    .write();
    let p = Profile::read(&bytes).map_err(|e| e.to_string())?;
    let r =
        tally_report::analyze(&p, &tally_report::Inputs::default()).map_err(|e| e.to_string())?;
    let o = tally_report::render::TextOptions {
        source: false,
        ..Default::default()
    };
    tally_report::render::text(&r, "t", &o);
    tally_report::render::json(&r, "t");
    Ok(())
}

fn refused(meta: ModuleMeta, counters: Vec<u64>, want: &str) {
    let e = report(meta, counters).expect_err("the profile must be refused");
    assert!(!e.contains('\n'), "one line: {e}");
    assert!(
        e.contains("r.c") && e.contains(want),
        "{e:?} lacks r.c / {want:?}"
    );
}

#[test]
fn the_unpatched_module_reports() {
    report(events_module(|_| {}), vec![10, 10, 4]).unwrap();
}

/// (a) An edge endpoint of u32::MAX reached `NodeId::new`'s assert from `FunctionMeta::cfg`.
#[test]
fn edge_endpoint_u32_max_is_refused() {
    let m = events_module(|f| f["edges"][0][1] = json!(u32::MAX));
    refused(
        m,
        vec![10, 10, 4],
        "function f: edge e1 names vertex n4294967295",
    );
}

/// (b) A call site in a block the function does not have indexed past the blocks in
/// `render::text`.
#[test]
fn call_site_block_out_of_range_is_refused() {
    let m = events_module(|f| f["events"]["calls"][0]["block"] = json!(7));
    refused(
        m,
        vec![10, 10, 4],
        "function f: call site #0 is in block n7",
    );
}

/// (c) A `per_block` shorter than the blocks indexed past its end in `render::json`.
#[test]
fn short_per_block_is_refused() {
    let m = events_module(|f| f["events"]["per_block"] = json!([3]));
    refused(m, vec![10, 10, 4], "function f: its events list 1 blocks");
}
