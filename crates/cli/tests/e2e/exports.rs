//! The LCOV and Cobertura exports checked by their real consumers: Debian's
//! `genhtml` (package `lcov`) must accept the tracefile without any warning, and `xmllint
//! --dtdvalid` (package `libxml2-utils`) must find the Cobertura XML valid against
//! `testdata/cobertura/coverage-04.dtd` (the format's structure, written for this test;
//! nothing is fetched). Both exports must carry exactly the counts of `tally report --lines`.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds and runs the demo at -O2 in edge mode; returns the scratch dir and the profile.
fn demo(name: &str) -> (PathBuf, PathBuf) {
    let dir = scratch(name);
    let demo = repo().join("testdata/demo");
    std::fs::copy(demo.join("wordfreq.c"), dir.join("wordfreq.c")).unwrap();
    std::fs::copy(demo.join("input.txt"), dir.join("input.txt")).unwrap();
    build(
        Variant::Tally("edge"),
        false,
        &["-O2", "-g", "wordfreq.c"],
        &dir.join("wordfreq"),
        &dir,
    );
    let prof = dir.join("wordfreq.tally");
    let o = run(Path::new("./wordfreq"), &["input.txt"], &dir, &prof);
    assert!(o.status.success());
    (dir, prof)
}

/// (path, line) -> count, and (path, line) -> branch outcome counts, from the JSON report.
type Lines = BTreeMap<(String, u64), u64>;
type Branches = BTreeMap<(String, u64), Vec<Option<u64>>>;

fn model(dir: &Path) -> (Lines, Branches, Value) {
    let r: Value = serde_json::from_slice(&tally_ok(
        dir,
        &["report", "--format", "json", "--lines", "wordfreq.tally"],
    ))
    .unwrap();
    let mut lines = BTreeMap::new();
    let mut branches = BTreeMap::new();
    for f in r["files"].as_array().unwrap() {
        let path = f["path"].as_str().unwrap().to_string();
        for l in f["lines"].as_array().unwrap() {
            let n = l["line"].as_u64().unwrap();
            lines.insert((path.clone(), n), l["count"].as_u64().unwrap());
            if let Some(bs) = l["branches"].as_array() {
                let all: Vec<Option<u64>> = bs
                    .iter()
                    .flat_map(|b| b.as_array().unwrap().iter().map(Value::as_u64))
                    .collect();
                branches.insert((path.clone(), n), all);
            }
        }
    }
    (lines, branches, r["source_functions"].clone())
}

/// genhtml on a tracefile: success and not a word of warning.
fn genhtml(dir: &Path, info: &str) -> Result<(), String> {
    let o = Command::new("genhtml")
        .args(["--branch-coverage", "--function-coverage", "-o"])
        .arg(dir.join(format!("{info}-html")))
        .arg(info)
        .current_dir(dir)
        .output()
        .expect("genhtml (Debian package lcov) is installed");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    if !o.status.success() || all.to_lowercase().contains("warning") || !o.stderr.is_empty() {
        return Err(format!("genhtml {info}: {:?}\n{all}", o.status));
    }
    Ok(())
}

#[test]
fn lcov_tracefile_is_accepted_by_genhtml_and_carries_the_counts() {
    let (dir, _) = demo("export-lcov");
    let info = tally_ok(&dir, &["report", "--export", "lcov", "wordfreq.tally"]);
    std::fs::write(dir.join("demo.info"), &info).unwrap();
    genhtml(&dir, "demo.info").unwrap();
    assert!(dir.join("demo.info-html/index.html").exists());
    // The harness notices a failure: a tracefile naming a source that does not exist.
    std::fs::write(
        dir.join("bad.info"),
        "TN:x\nSF:/nonexistent/x.c\nDA:1,1\nLF:1\nLH:1\nend_of_record\n",
    )
    .unwrap();
    assert!(genhtml(&dir, "bad.info").is_err());

    // Every DA, BRDA and FNDA is the model's count.
    let (lines, branches, functions) = model(&dir);
    let text = String::from_utf8(info).unwrap();
    let (mut da, mut brda): (Lines, Branches) = Default::default();
    let mut fnda: BTreeMap<String, u64> = BTreeMap::new();
    let mut sf = String::new();
    for l in text.lines() {
        let (tag, rest) = l.split_once(':').unwrap_or((l, ""));
        let f: Vec<&str> = rest.split(',').collect();
        match tag {
            "SF" => sf = rest.to_string(),
            "DA" => {
                da.insert((sf.clone(), f[0].parse().unwrap()), f[1].parse().unwrap());
            }
            "BRDA" => brda
                .entry((sf.clone(), f[0].parse().unwrap()))
                .or_default()
                .push(f[3].parse().ok()),
            "FNDA" => {
                fnda.insert(f[1].to_string(), f[0].parse().unwrap());
            }
            _ => {}
        }
    }
    assert_eq!(da, lines);
    assert_eq!(brda, branches);
    for f in functions.as_array().unwrap() {
        let name = match f["linkage_name"].as_str().unwrap() {
            "" => f["name"].as_str().unwrap(),
            l => l,
        };
        assert_eq!(fnda.get(name), f["count"].as_u64().as_ref(), "{name}");
    }
    assert!(da.len() > 50 && brda.len() > 10 && fnda.len() > 5);
}

fn xmllint(dir: &Path, xml: &str) -> Result<(), String> {
    let o = Command::new("xmllint")
        .args(["--nonet", "--noout", "--dtdvalid"])
        .arg(repo().join("testdata/cobertura/coverage-04.dtd"))
        .arg(xml)
        .current_dir(dir)
        .output()
        .expect("xmllint (Debian package libxml2-utils) is installed");
    if !o.status.success() || !o.stderr.is_empty() {
        return Err(format!(
            "xmllint {xml}: {:?}\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(())
}

/// `name="value"` of an XML start tag.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    tag[at..].split('"').next()
}

#[test]
fn cobertura_xml_validates_against_the_dtd_and_carries_the_counts() {
    let (dir, _) = demo("export-cobertura");
    let xml = tally_ok(&dir, &["report", "--export", "cobertura", "wordfreq.tally"]);
    std::fs::write(dir.join("demo.xml"), &xml).unwrap();
    xmllint(&dir, "demo.xml").unwrap();
    // The harness notices an invalid document: a class without its required attributes.
    let text = String::from_utf8(xml).unwrap();
    std::fs::write(
        dir.join("bad.xml"),
        text.replacen(" complexity=\"0\"", "", 2),
    )
    .unwrap();
    assert!(xmllint(&dir, "bad.xml").is_err());

    // Every class line is the model's line count.
    let (lines, branches, _) = model(&dir);
    let mut seen: Lines = BTreeMap::new();
    let mut class = String::new();
    let mut in_methods = false;
    for tag in text.split('<').skip(1) {
        if tag.starts_with("class ") {
            class = attr(tag, "filename").unwrap().to_string();
        } else if tag.starts_with("methods") {
            in_methods = true;
        } else if tag.starts_with("/methods") {
            in_methods = false;
        } else if tag.starts_with("line ") && !in_methods {
            let n: u64 = attr(tag, "number").unwrap().parse().unwrap();
            let hits: u64 = attr(tag, "hits").unwrap().parse().unwrap();
            seen.insert((class.clone(), n), hits);
            let outcomes = branches.get(&(class.clone(), n));
            assert_eq!(attr(tag, "branch") == Some("true"), outcomes.is_some());
            if let Some(o) = outcomes {
                let taken = o.iter().filter(|c| c.is_some_and(|c| c > 0)).count();
                let cc = attr(tag, "condition-coverage").unwrap();
                assert!(cc.ends_with(&format!("({taken}/{})", o.len())), "{cc}");
            }
        }
    }
    assert_eq!(seen, lines);
    let total: u64 = lines.len() as u64;
    assert!(text.contains(&format!("lines-valid=\"{total}\"")));
}
