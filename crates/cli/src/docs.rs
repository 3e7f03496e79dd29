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
