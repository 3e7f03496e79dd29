//! `tally html`: a static, self-contained site of a report that works from
//! `file://` — no network, no external assets, a little inline vanilla JavaScript.
//!
//! - `index.html` ([`index`]): totals, a directory tree and a flat sortable list of the files
//!   with line, branch and function coverage and execution counts, and the functions;
//! - `f<N>.html` per source file ([`file`]): the annotated source with the exact line and branch
//!   counts of the source-level model ([`crate::source`], the same counts as `tally show` and
//!   the LCOV export) on a heat scale; `n`/`p` jump to the next/previous hot line, `u`/`U` to
//!   the next/previous line that never ran;
//! - `g<N>.html` per instrumented function ([`cfg`]): its control-flow graph laid out by the
//!   `layout-rs` crate (a Sugiyama layout, rendered to SVG at generation time) with block and
//!   edge counts, edge width by count and, for path profiles, the hottest paths highlighted;
//!   large or never-run functions get tables instead of a drawing.
//!
//! Every piece of text from the profile or the sources goes through [`esc`]; pages carry a
//! Content-Security-Policy that forbids any network access. [`write_site`] writes the pages
//! without ever following a symbolic link.

mod cfg;
mod draw;
mod file;
mod index;

use crate::source::SourceModel;
use crate::Report;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Functions with more blocks than this get tables instead of a drawn graph: `layout-rs`
/// takes under half a second up to there on SQLite's functions, but from 75 blocks on some
/// graphs take seconds to minutes.
pub const MAX_GRAPH_BLOCKS: usize = 60;

/// Graphs drawn per site: the hottest functions' (a layout of a large graph takes a second).
pub const MAX_GRAPHS: usize = 100;

/// Why a site cannot be written.
#[derive(Debug, Error)]
pub enum HtmlError {
    /// An I/O error on a path.
    #[error("cannot write {}: {error}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error (in the message, not a `source`: error chains print it once).
        error: std::io::Error,
    },
    /// A page's name is taken by a symbolic link or something that is not a regular file.
    #[error("refusing to replace {}: it is a symbolic link or not a regular file", path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
    },
}

/// One page of the site: file name (no directory) and contents.
pub struct Page {
    /// File name inside the site directory.
    pub name: String,
    /// HTML.
    pub html: String,
}

/// Renders the whole site of a report and its source model; `title` names the profiles.
pub fn site(r: &Report, m: &SourceModel, title: &str) -> Vec<Page> {
    site_with_progress(r, m, title, &|| {})
}

/// How many pages [`site`] makes: the index, one per source file, one per function.
pub fn page_count(r: &Report, m: &SourceModel) -> usize {
    1 + m.files.len() + r.functions.len()
}

/// [`site`], calling `step` after each page is made (from several threads).
pub fn site_with_progress(
    r: &Report,
    m: &SourceModel,
    title: &str,
    step: &(dyn Fn() + Sync),
) -> Vec<Page> {
    let ctx = Ctx::new(r, m, title);
    let mut pages = vec![Page {
        name: "index.html".into(),
        html: index::render(&ctx),
    }];
    step();
    let mut text = crate::show::SourceText::default();
    for (i, path) in m.files.keys().enumerate() {
        pages.push(Page {
            name: ctx.file_page(i),
            html: file::render(&ctx, path, &mut text),
        });
        step();
    }
    // Graphs for the hottest drawable functions only; the layouts run on every core.
    let mut left = MAX_GRAPHS;
    let draw: Vec<bool> = r
        .functions
        .iter()
        .map(|f| {
            let d = left > 0 && cfg::drawable(f).is_ok();
            left -= usize::from(d);
            d
        })
        .collect();
    // `layout-rs` asserts on some graphs; `draw` catches the panic and draws its own layout,
    // so its message is kept off stderr (any other panic still reports as before).
    let prev: std::sync::Arc<dyn Fn(&std::panic::PanicHookInfo) + Send + Sync> =
        std::panic::take_hook().into();
    let report = prev.clone();
    std::panic::set_hook(Box::new(move |info| {
        if !info
            .location()
            .is_some_and(|l| l.file().contains("/layout-rs-"))
        {
            report(info);
        }
    }));
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8);
    let mut fn_pages: Vec<(usize, Page)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (ctx, draw) = (&ctx, &draw);
                s.spawn(move || {
                    let mut text = crate::show::SourceText::default();
                    (t..r.functions.len())
                        .step_by(threads)
                        .map(|i| {
                            let html = cfg::render(ctx, &r.functions[i], &mut text, draw[i]);
                            step();
                            (
                                i,
                                Page {
                                    name: ctx.fn_page(i),
                                    html,
                                },
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    std::panic::set_hook(Box::new(move |info| prev(info)));
    fn_pages.sort_by_key(|(i, _)| *i);
    pages.extend(fn_pages.into_iter().map(|(_, p)| p));
    pages
}

/// What every page needs: the report, the model, the title and the heat scale.
pub(crate) struct Ctx<'a> {
    pub r: &'a Report,
    pub m: &'a SourceModel,
    pub title: &'a str,
    /// The largest line count of the site (the top of the heat scale).
    pub max_line: u64,
}

impl<'a> Ctx<'a> {
    fn new(r: &'a Report, m: &'a SourceModel, title: &'a str) -> Ctx<'a> {
        let max_line = m
            .files
            .values()
            .flat_map(|f| f.lines.values())
            .filter_map(|l| l.count)
            .max()
            .unwrap_or(0);
        Ctx {
            r,
            m,
            title,
            max_line,
        }
    }

    pub fn file_page(&self, i: usize) -> String {
        format!("f{i}.html")
    }

    pub fn fn_page(&self, i: usize) -> String {
        format!("g{i}.html")
    }

    /// Where a function is defined, `file:line` linked to the line on its file's page; empty
    /// when unknown.
    pub fn defined_at(&self, f: &crate::FunctionReport) -> String {
        let Some(file) = &f.file else {
            return String::new();
        };
        let loc = esc(&format!("{file}:{}", f.line));
        match self.page_of_file(file) {
            Some(p) => format!("<a href=\"{p}#L{}\">{loc}</a>", f.line),
            None => loc,
        }
    }

    /// The page of a source file, by path.
    pub fn page_of_file(&self, path: &str) -> Option<String> {
        self.m
            .files
            .keys()
            .position(|p| p == path)
            .map(|i| self.file_page(i))
    }
}

/// HTML-escapes text for element content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A count for display: the number, or `?` when unknown.
pub(crate) fn count_text(c: Option<u64>) -> String {
    c.map_or_else(|| "?".into(), |c| c.to_string())
}

/// Heat level 1..=10 of a count on a logarithmic scale up to `max`; 0 for a count of zero or
/// unknown.
pub(crate) fn heat(c: Option<u64>, max: u64) -> u32 {
    match c {
        Some(0) | None => 0,
        Some(c) => {
            let (c, max) = ((c as f64).ln_1p(), (max.max(1) as f64).ln_1p());
            ((c / max * 10.0).ceil() as u32).clamp(1, 10)
        }
    }
}

/// The background colour of a heat level (pale yellow to red).
pub(crate) fn heat_color(level: u32) -> &'static str {
    const C: [&str; 11] = [
        "#ffffff", "#fff7d6", "#ffefb8", "#ffe39a", "#ffd37f", "#ffc069", "#ffaa57", "#ff914a",
        "#ff7541", "#f5563b", "#e43a35",
    ];
    C[level.min(10) as usize]
}

/// `hit/total (percent)`, with the numbers in data attributes for sorting.
pub(crate) fn ratio_cell(hit: usize, total: usize) -> String {
    let pct = if total == 0 {
        -1.0
    } else {
        hit as f64 * 100.0 / total as f64
    };
    format!(
        "<td class=\"num\" data-sort=\"{pct:.3}\">{hit}/{total} <span class=\"pct\">{}</span></td>",
        crate::source::percent(hit, total)
    )
}

const CSS: &str = r#"
body{font:14px/1.4 system-ui,sans-serif;margin:0 1.5em 2em;color:#222}
header{position:sticky;top:0;background:#fff;border-bottom:1px solid #ccc;padding:.4em 0;z-index:2}
h1{font-size:1.25em;margin:.2em 0}h2{font-size:1.1em;margin:1.2em 0 .4em}h2.inline{display:inline-block}summary{cursor:pointer}
a{color:#0645ad;text-decoration:none}a:hover{text-decoration:underline}
table{border-collapse:collapse}td,th{padding:1px 8px;text-align:left;vertical-align:top}
th{background:#eee;position:sticky;top:3.2em}
table.list tr:nth-child(even){background:#f7f7f7}
th.sort{cursor:pointer;user-select:none}th.sort:after{content:" \2195";color:#888}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.pct{color:#666}.muted{color:#777}.help{color:#555;font-size:.9em}
input#q{font-size:1em;padding:2px 6px;width:20em}
kbd{border:1px solid #aaa;border-radius:3px;padding:0 4px;background:#f4f4f4}
ul.tree{list-style:none;padding-left:1.2em;margin:0}ul.tree>li>details>summary{cursor:pointer}
table.src{font:13px/1.35 ui-monospace,monospace;width:100%}
table.src td{padding:0 6px;white-space:pre}
table.src td.n{color:#888;text-align:right;user-select:none}
table.src td.c{text-align:right;border-right:1px solid #ccc}
table.src tr.unrun td.c{background:#f8c9c9;color:#900;font-weight:bold}
table.src tr.unrun td.t{background:#fdecec}
table.src tr.cur td{outline:2px solid #06c;outline-offset:-2px}
table.src td.b{color:#555;font-size:.9em}
.br0{color:#b00;font-weight:bold}
span.h1,tr.h1 td.c{background:#fff7d6}span.h2,tr.h2 td.c{background:#ffefb8}span.h3,tr.h3 td.c{background:#ffe39a}span.h4,tr.h4 td.c{background:#ffd37f}
span.h5,tr.h5 td.c{background:#ffc069}span.h6,tr.h6 td.c{background:#ffaa57}span.h7,tr.h7 td.c{background:#ff914a}span.h8,tr.h8 td.c{background:#ff7541}
span.h9,tr.h9 td.c{background:#f5563b;color:#fff}span.h10,tr.h10 td.c{background:#e43a35;color:#fff}

.scale span{display:inline-block;padding:0 6px;font-size:.85em}
.graph{overflow:auto;border:1px solid #ddd;max-height:80vh;background:#fcfcfc}
.graph svg{max-width:100%;height:auto;cursor:zoom-in}.graph.full svg{max-width:none;cursor:zoom-out}
.graph svg text{font-family:ui-monospace,monospace}
g.edge.hot path{stroke:#c00080}g.edge.hl path{stroke:#0057d9}
g.blk.hot rect{stroke:#c00080;stroke-width:3}g.blk.hl rect{stroke:#0057d9;stroke-width:3}
tr.path{cursor:pointer}tr.path.sel{background:#dbe8ff!important}
.hidden{display:none}
"#;

const JS: &str = r##"
"use strict";
(function(){
var d=document;
var q=d.getElementById("q");
if(q){q.addEventListener("input",function(){
  var s=q.value.toLowerCase();
  d.querySelectorAll("[data-name]").forEach(function(e){
    e.classList.toggle("hidden",s!==""&&e.getAttribute("data-name").toLowerCase().indexOf(s)<0);
  });
});}
d.querySelectorAll("th.sort").forEach(function(th){
  th.addEventListener("click",function(){
    var tb=th.closest("table").tBodies[0];var i=th.cellIndex;
    var dir=th.getAttribute("data-dir")==="asc"?"desc":"asc";th.setAttribute("data-dir",dir);
    var rows=Array.prototype.slice.call(tb.rows);
    rows.sort(function(a,b){
      var x=a.cells[i].getAttribute("data-sort"),y=b.cells[i].getAttribute("data-sort");
      var r=(x!==null&&y!==null)?(parseFloat(x)-parseFloat(y)):a.cells[i].textContent.localeCompare(b.cells[i].textContent);
      return dir==="asc"?r:-r;
    });
    rows.forEach(function(r){tb.appendChild(r);});
  });
});
var src=d.querySelector("table.src");
if(src){
  var cur=-1;var rows=Array.prototype.slice.call(src.tBodies[0].rows);
  function jump(pred,step){
    for(var k=1;k<=rows.length;k++){
      var i=((cur<0?(step>0?-1:0):cur)+step*k+rows.length)%rows.length;
      if(pred(rows[i])){
        if(cur>=0)rows[cur].classList.remove("cur");
        cur=i;rows[i].classList.add("cur");
        rows[i].scrollIntoView({block:"center"});
        history.replaceState(null,"","#"+rows[i].id);return;
      }
    }
  }
  var hot=function(r){return r.hasAttribute("data-hot");};
  var unrun=function(r){return r.classList.contains("unrun");};
  d.addEventListener("keydown",function(e){
    if(e.target.tagName==="INPUT"||e.ctrlKey||e.metaKey||e.altKey)return;
    if(e.key==="n")jump(hot,1);else if(e.key==="p")jump(hot,-1);
    else if(e.key==="u")jump(unrun,1);else if(e.key==="U")jump(unrun,-1);
  });
  // `?keys` (the tests): press n u U p and record where each lands in <body data-keys>.
  if(location.search==="?keys"){
    var seen=[];
    ["n","u","U","p"].forEach(function(k){
      d.dispatchEvent(new KeyboardEvent("keydown",{key:k}));
      var c=src.querySelector("tr.cur");seen.push(c?c.id:"-");
    });
    d.body.setAttribute("data-keys",seen.join(" "));
  }
}
function highlight(row){
  d.querySelectorAll("tr.path.sel").forEach(function(r){r.classList.remove("sel");});
  d.querySelectorAll("g.hl").forEach(function(g){g.classList.remove("hl");});
  if(!row)return;row.classList.add("sel");
  row.getAttribute("data-edges").split(" ").forEach(function(id){
    var g=d.querySelector('g.edge[data-edge="'+id+'"]');if(g)g.classList.add("hl");
  });
  row.getAttribute("data-blocks").split(" ").forEach(function(id){
    var g=d.querySelector('g.blk[data-block="'+id+'"]');if(g)g.classList.add("hl");
  });
}
d.querySelectorAll("tr.path").forEach(function(r){
  r.addEventListener("click",function(){highlight(r.classList.contains("sel")?null:r);});
});
var gr=d.getElementById("graph");
if(gr){gr.addEventListener("click",function(e){if(e.target.closest("svg"))gr.classList.toggle("full");});}
d.body.setAttribute("data-ready","1");
})();
"##;

/// A whole page: head with the stylesheet and a Content-Security-Policy that allows nothing
/// but the inline style and script, the body, and the script.
pub(crate) fn page(title: &str, body: &str) -> String {
    let mut o = String::with_capacity(body.len() + CSS.len() + JS.len() + 512);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\
<meta name=\"viewport\" content=\"width=device-width\"><link rel=\"icon\" href=\"data:,\">\
<title>{}</title><style>{CSS}</style></head>\n<body>\n{body}\n<script>{JS}</script>\n</body></html>\n",
        esc(title)
    );
    o
}

/// The heat scale legend.
pub(crate) fn legend(max: u64) -> String {
    let mut o = String::from("<span class=\"scale\">heat (log scale up to ");
    let _ = write!(o, "{max}): ");
    for l in 1..=10 {
        let _ = write!(o, "<span class=\"h{l}\">{l}</span>");
    }
    o.push_str(" <span class=\"unrun-key\" style=\"background:#f8c9c9;color:#900\">never ran</span></span>");
    o
}

/// Writes the pages into `dir` (created if missing). Each page goes to a new temporary file
/// (`O_CREAT|O_EXCL`, which never follows a symbolic link) renamed over its name; a name taken
/// by a symbolic link or by anything but a regular file is refused.
pub fn write_site(dir: &Path, pages: &[Page]) -> Result<(), HtmlError> {
    use std::io::Write as _;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |error| HtmlError::Io { path, error }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    for p in pages {
        let target = dir.join(&p.name);
        match std::fs::symlink_metadata(&target) {
            Ok(md) if !md.file_type().is_file() => {
                return Err(HtmlError::NotRegular { path: target })
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&target)(e)),
        }
        let tmp = dir.join(format!(".{}.{}.tmp", p.name, std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io(&tmp))?;
        let written = f
            .write_all(p.html.as_bytes())
            .and_then(|()| f.flush())
            .map_err(io(&tmp))
            .and_then(|()| std::fs::rename(&tmp, &target).map_err(io(&target)));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("<script>a&'\"</script>"),
            "&lt;script&gt;a&amp;&#39;&quot;&lt;/script&gt;"
        );
    }

    #[test]
    fn heat_is_logarithmic_and_bounded() {
        assert_eq!(heat(Some(0), 100), 0);
        assert_eq!(heat(None, 100), 0);
        assert_eq!(heat(Some(100), 100), 10);
        assert_eq!(heat(Some(1), 1), 10);
        assert!(heat(Some(1), 1_000_000) >= 1);
        assert!(heat(Some(1000), 1_000_000) < heat(Some(100_000), 1_000_000));
    }

    #[test]
    fn write_site_refuses_symlinks() {
        let d = std::env::temp_dir().join(format!("tally-html-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let victim = d.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, d.join("index.html")).unwrap();
        let pages = [Page {
            name: "index.html".into(),
            html: "x".into(),
        }];
        assert!(matches!(
            write_site(&d, &pages),
            Err(HtmlError::NotRegular { .. })
        ));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        std::fs::remove_file(d.join("index.html")).unwrap();
        write_site(&d, &pages).unwrap();
        write_site(&d, &pages).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("index.html")).unwrap(), "x");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 2);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
