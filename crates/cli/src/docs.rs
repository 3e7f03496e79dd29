//! Tests of the documentation: docs/usage.md's reference is the help tally prints, and every
//! relative link of the Markdown pages points at a file of the repository.

/// docs/usage.md's options reference is generated from the clap definitions: the long help of
/// `tally`, of each of its commands and of `tally cc` (tally's own options; clang's help, which
/// follows it, is left out). This test fails when they differ; `TALLY_BLESS_DOCS=1 cargo test
/// -p tally --bin tally usage_md` rewrites the generated part of the page.
mod usage_md {
    use clap::CommandFactory as _;

    const BEGIN: &str =
        "<!-- BEGIN GENERATED: `TALLY_BLESS_DOCS=1 cargo test -p tally --bin tally usage_md` -->\n";
    const END: &str = "<!-- END GENERATED -->\n";

    /// Environment values shown in help depend on the caller's environment; the page shows
    /// the variables' names only.
    fn render(cmd: clap::Command) -> String {
        let mut cmd = cmd.mut_args(|a| a.hide_env_values(true));
        let text = cmd.render_long_help().to_string();
        let lines: Vec<_> = text.lines().map(str::trim_end).collect();
        lines.join("\n").trim_end().to_string()
    }

    fn section(out: &mut String, title: &str, help: &str) {
        out.push_str(&format!("### `{title}`\n\n```text\n{help}\n```\n\n"));
    }

    fn reference() -> String {
        let mut out = String::new();
        let (cc, clang) = crate::driver::help_command(false);
        let cc_help = format!(
            "{}\n\nAll other options go to {clang}; its help follows.",
            render(cc)
        );
        section(&mut out, "tally cc --help", &cc_help);
        let mut cli = crate::Cli::command();
        cli.build();
        section(&mut out, "tally --help", &render(cli.clone()));
        for sub in cli.get_subcommands() {
            let name = sub.get_name();
            // `cc` and `c++` print the driver's help above; `help` is clap's.
            if matches!(name, "cc" | "c++" | "help") {
                continue;
            }
            section(
                &mut out,
                &format!("tally {name} --help"),
                &render(sub.clone()),
            );
        }
        out
    }

    #[test]
    fn usage_md_shows_the_help_of_every_command() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/usage.md");
        let page = std::fs::read_to_string(path).expect("docs/usage.md");
        let (Some(a), Some(b)) = (page.find(BEGIN), page.find(END)) else {
            panic!("docs/usage.md lacks the markers {BEGIN:?} and {END:?}");
        };
        let (head, generated, tail) = (
            &page[..a + BEGIN.len()],
            &page[a + BEGIN.len()..b],
            &page[b..],
        );
        let want = reference();
        if generated == want {
            return;
        }
        if std::env::var_os("TALLY_BLESS_DOCS").is_some_and(|v| v == "1") {
            std::fs::write(path, format!("{head}{want}{tail}")).expect("write docs/usage.md");
            return;
        }
        panic!(
            "docs/usage.md's options reference differs from the help tally prints; run \
             `TALLY_BLESS_DOCS=1 cargo test -p tally --bin tally usage_md` to regenerate it. It should read:\n{want}"
        );
    }
}

/// docs/dataset.md's schema section is generated from the dataset's table specs
/// (`tally_report::dataset::schema`); `TALLY_BLESS_DOCS=1 cargo test -p tally --bin tally
/// dataset_md` rewrites it.
#[test]
fn dataset_md_shows_the_schema() {
    const BEGIN: &str = "<!-- BEGIN GENERATED SCHEMA -->\n";
    const END: &str = "<!-- END GENERATED SCHEMA -->\n";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/dataset.md");
    let page = std::fs::read_to_string(path).expect("docs/dataset.md");
    let (Some(a), Some(b)) = (page.find(BEGIN), page.find(END)) else {
        panic!("docs/dataset.md lacks the markers {BEGIN:?} and {END:?}");
    };
    let want = tally_report::dataset::schema::markdown();
    if page[a + BEGIN.len()..b] == want {
        return;
    }
    if std::env::var_os("TALLY_BLESS_DOCS").is_some_and(|v| v == "1") {
        let page = format!("{}{want}{}", &page[..a + BEGIN.len()], &page[b..]);
        std::fs::write(path, page).expect("write docs/dataset.md");
        return;
    }
    panic!(
        "docs/dataset.md's schema differs from tally_report::dataset::schema; run \
         `TALLY_BLESS_DOCS=1 cargo test -p tally --bin tally dataset_md` to regenerate it"
    );
}

/// Every relative link (`[text](path)`, `[text](path#anchor)`) in README.md, ARCHITECTURE.md,
/// bench/README.md and docs/**/*.md names a file or directory that exists. Code spans and
/// fenced blocks are skipped; anchors are not checked.
#[test]
fn relative_links_name_existing_files() {
    use std::path::{Path, PathBuf};
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let mut pages: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "bench/README.md"]
        .iter()
        .map(|p| root.join(p))
        .collect();
    let mut dirs = vec![root.join("docs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("docs/").flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                pages.push(p);
            }
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("page");
        let mut fenced = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            if fenced {
                continue;
            }
            // Drop code spans: a `](` inside backticks is not a link.
            let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
            for (at, _) in prose.match_indices("](") {
                let rest = &prose[at + 2..];
                let Some(end) = rest.find(')') else { continue };
                let target = rest[..end].split('#').next().unwrap_or("");
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let dir = page.parent().expect("a page is in a directory");
                if !dir.join(target).exists() {
                    let page = page.strip_prefix(root).unwrap_or(page);
                    broken.push(format!("{}: {target}", page.display()));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to missing files:\n{}",
        broken.join("\n")
    );
}

/// ARCHITECTURE.md's "Adding a mode" table is held to the mode registries, as the tables of
/// modes are held to `tally_format::mode::MODES`: every file its "file" column names exists
/// (`<mode>` patterns for each registered home, `<algorithm>` and `*` patterns by their
/// folder); every mode of `MODES` has an arm in `tally-llvm`'s and `tally-report`'s
/// `modes::of`; each arm's file is `modes/<file>.rs` or `modes/<file>/mod.rs`, named after
/// one of its modes (the mode's name, or a word of it that all the arm's modes share); and no
/// other file or folder sits in those `modes/` folders, so a mode's code is where the table says.
#[test]
fn adding_a_mode_names_every_home() {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let section = doc
        .split("\n## Adding a mode\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("ARCHITECTURE.md has an \"Adding a mode\" section");
    // The file column of each row after the header.
    let files: Vec<String> = section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| what "))
        .filter_map(|l| l.split(" | ").nth(1))
        .flat_map(|cell| cell.split('`').skip(1).step_by(2).map(str::to_string))
        // Code spans that are paths (not names such as `MODES`).
        .filter(|t| t.contains('/') || t.contains('.'))
        .collect();
    assert!(files.len() >= 6, "too few files in the table: {files:?}");

    // Mode variant name -> its name on the command line.
    let modes: BTreeMap<String, &str> = tally_format::mode::MODES
        .iter()
        .map(|m| (format!("{:?}", m.mode), m.name))
        .collect();
    let mut problems = Vec::new();
    let mut homes: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for krate in ["llvm", "report"] {
        let dir = root.join(format!("crates/{krate}/src/modes"));
        let src = std::fs::read_to_string(dir.join("mod.rs")).expect("modes/mod.rs");
        let body = src
            .split("fn of(mode: Mode)")
            .nth(1)
            .and_then(|s| s.split("\n}\n").next())
            .unwrap_or_else(|| {
                panic!("crates/{krate}/src/modes/mod.rs has no `fn of(mode: Mode)`")
            });
        let mut seen = BTreeSet::new();
        for arm in body.lines().filter(|l| l.contains("=>")) {
            let (pat, code) = arm.split_once("=>").expect("an arm");
            let arm_modes: Vec<&str> = pat
                .split('|')
                .filter_map(|p| p.trim().strip_prefix("Mode::"))
                .collect();
            let file = code
                .trim()
                .trim_start_matches('&')
                .split("::")
                .next()
                .unwrap_or("");
            let names: Vec<&str> = arm_modes
                .iter()
                .filter_map(|m| modes.get(*m).copied())
                .collect();
            if names.len() != arm_modes.len() || names.is_empty() {
                problems.push(format!(
                    "{krate}: arm `{}` names no mode of MODES",
                    arm.trim()
                ));
                continue;
            }
            seen.extend(arm_modes.iter().map(|m| m.to_string()));
            let named_after = names.iter().any(|n| n.replace('-', "_") == file)
                || names.iter().all(|n| n.split('-').any(|w| w == file));
            if !named_after {
                problems.push(format!(
                    "{krate}: modes/{file} holds {names:?} but is not named after one of them"
                ));
            }
            if !dir.join(format!("{file}.rs")).is_file() && !dir.join(file).join("mod.rs").is_file()
            {
                problems.push(format!(
                    "{krate}: modes/{file}.rs (or modes/{file}/mod.rs) is missing"
                ));
            }
            homes.entry(krate).or_default().insert(file.to_string());
        }
        for m in modes.keys().filter(|m| !seen.contains(*m)) {
            problems.push(format!("{krate}: modes::of has no arm for Mode::{m}"));
        }
        for e in std::fs::read_dir(&dir).expect("modes/").flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let home = name.strip_suffix(".rs").unwrap_or(&name);
            if name != "mod.rs" && !homes[krate].contains(home) {
                problems.push(format!(
                    "{krate}: modes/{name} is no mode's home in modes::of"
                ));
            }
        }
    }
    for f in &files {
        if let Some(krate) = ["llvm", "report"]
            .into_iter()
            .find(|k| f.contains("<mode>") && f.starts_with(&format!("crates/{k}/")))
        {
            for home in &homes[krate] {
                let p = root.join(f.replace("<mode>", home));
                let folder = p.with_extension("").join("mod.rs");
                if !p.is_file() && !folder.is_file() {
                    problems.push(format!("`{f}` for `{home}`: {} is missing", p.display()));
                }
            }
        } else if f.contains('<') || f.contains('*') {
            let parent = Path::new(f).parent().expect("a folder");
            if !root.join(parent).is_dir() {
                problems.push(format!("the table's `{f}`: no folder {}", parent.display()));
            }
        } else if !root.join(f).exists() {
            problems.push(format!("the table names `{f}`, which does not exist"));
        }
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md, \"Adding a mode\":\n{}",
        problems.join("\n")
    );
}
