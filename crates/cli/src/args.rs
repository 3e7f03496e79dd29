//! Classifying a clang/gcc-style command line: which words are inputs, which are options and
//! their values, what the invocation produces. Only what the driver needs to re-plan the
//! compilation; everything else is passed to clang untouched.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Options that, written as a word of their own, take the next word as their value.
const SEPARATE_VALUE: &[&str] = &[
    "-o",
    "-x",
    "-I",
    "-D",
    "-U",
    "-include",
    "-imacros",
    "-isystem",
    "-iquote",
    "-idirafter",
    "-iprefix",
    "-iwithprefix",
    "-iwithprefixbefore",
    "-isysroot",
    "-imultilib",
    "-MF",
    "-MT",
    "-MQ",
    "-MJ",
    "-L",
    "-l",
    "-Xlinker",
    "-Xclang",
    "-Xassembler",
    "-Xpreprocessor",
    "-Xarch_host",
    "-Xopenmp-target",
    "-target",
    "-arch",
    "-T",
    "-u",
    "-e",
    "-z",
    "-aux-info",
    "--param",
    "-mllvm",
    "-F",
    "-framework",
    "-iframework",
    "-include-pch",
    "-rpath",
    "-dependency-file",
    "-ivfsoverlay",
    "-B",
    "-G",
    "-A",
    "-gcc-toolchain",
    "-resource-dir",
    "-std-default",
    "--serialize-diagnostics",
    "-Xcuda-fatbinary",
    "-Xcuda-ptxas",
    "-Xoffload-linker",
    "-fmodule-file",
    "-fprebuilt-module-path",
    "-working-directory",
    "--sysroot",
    "--target",
    "-cxx-isystem",
    "-idirafter",
    "-Xanalyzer",
    "-init",
    "-install_name",
    "-seg1addr",
    "-exported_symbols_list",
    "--output",
    "--language",
    "-dumpdir",
];

/// The language of a source input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// C (or preprocessed C).
    C,
    /// C++ (or preprocessed C++).
    Cxx,
    /// Objective-C / Objective-C++.
    ObjC,
    /// LLVM IR (`.ll` text or `.bc` bitcode): optimized at the -O level, then instrumented.
    Ir,
}

/// One word of the command line, classified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Word {
    /// A source file tally compiles and instruments, with the `-x` language in effect
    /// (`None` = decided by extension).
    Source {
        /// The path as written.
        path: OsString,
        /// The `-x` value in effect, if any.
        x: Option<String>,
    },
    /// Any other input (object, archive, shared library, assembly, ...).
    OtherInput(OsString),
    /// An option, possibly followed by its separate value (kept together).
    Opt(Vec<OsString>),
}

/// What the invocation produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `-c`: objects.
    Compile,
    /// `-S`: assembly.
    Assemble,
    /// Link an executable or shared library (compiling sources first).
    Link,
    /// Anything tally does not take part in (`-E`, `-M`, `--version`, `-fsyntax-only`, ...).
    PassThrough,
}

/// A parsed command line.
#[derive(Clone, Debug)]
pub struct CommandLine {
    /// The words in order, with tally's own options removed.
    pub words: Vec<Word>,
    /// The `-o` value, if any.
    pub output: Option<OsString>,
    /// What to do.
    pub action: Action,
    /// `--tally-*` options, without the `--tally-` prefix (e.g. `mode=edge`).
    pub tally_opts: Vec<String>,
    /// The `-flto` / `-flto=KIND` in effect (the last of them, unless `-fno-lto` follows).
    pub lto: Option<String>,
}

fn lang_of_x(x: &str) -> Option<Lang> {
    match x {
        "c" | "cpp-output" | "c-cpp-output" => Some(Lang::C),
        "c++" | "c++-cpp-output" => Some(Lang::Cxx),
        "objective-c" | "objective-c++" | "objc-cpp-output" | "objective-c-cpp-output" => {
            Some(Lang::ObjC)
        }
        "ir" => Some(Lang::Ir),
        _ => None,
    }
}

fn lang_of_ext(path: &Path) -> Option<Lang> {
    let ext = path.extension()?.to_str()?;
    match ext {
        "c" | "i" => Some(Lang::C),
        "cc" | "cp" | "cxx" | "cpp" | "CPP" | "c++" | "C" | "ii" => Some(Lang::Cxx),
        "m" | "mm" | "mi" | "mii" => Some(Lang::ObjC),
        "ll" | "bc" => Some(Lang::Ir),
        _ => None,
    }
}

impl Word {
    /// The language tally compiles this source as, if it is one.
    pub fn source_lang(&self) -> Option<Lang> {
        match self {
            Word::Source { path, x } => match x {
                Some(x) => lang_of_x(x),
                None => lang_of_ext(Path::new(path)),
            },
            _ => None,
        }
    }
}

fn starts(w: &str, p: &str) -> bool {
    w.starts_with(p)
}

/// Parses the arguments that follow `tally cc` / `tally c++`.
pub fn parse(args: &[OsString]) -> CommandLine {
    let mut words = Vec::new();
    let mut output = None;
    let mut x: Option<String> = None;
    let mut compile = false;
    let mut assemble = false;
    let mut passthrough = false;
    let mut tally_opts = Vec::new();
    let mut i = 0;
    let mut any_input = false;
    let mut lto = None;
    while i < args.len() {
        let a = &args[i];
        let s = a.to_string_lossy().into_owned();
        i += 1;
        if let Some(rest) = s.strip_prefix("--tally-") {
            tally_opts.push(rest.to_string());
            continue;
        }
        if s == "-" || !s.starts_with('-') {
            any_input = true;
            let p = Path::new(a);
            let is_src = match &x {
                Some(xv) if xv != "none" => lang_of_x(xv).is_some(),
                _ => lang_of_ext(p).is_some(),
            };
            // A source on stdin (`-x c -`) is one like any other: clang reads it in the
            // first step. Without a source `-x`, clang decides what `-` is (and refuses it).
            if is_src && (s != "-" || x.as_deref().is_some_and(|v| v != "none")) {
                words.push(Word::Source {
                    path: a.clone(),
                    x: x.clone().filter(|v| v != "none"),
                });
            } else {
                if s == "-" {
                    passthrough = true;
                }
                words.push(Word::OtherInput(a.clone()));
            }
            continue;
        }
        let mut opt = vec![a.clone()];
        if SEPARATE_VALUE.contains(&s.as_str()) && i < args.len() {
            opt.push(args[i].clone());
            i += 1;
        }
        let val = opt.get(1).map(|v| v.to_string_lossy().into_owned());
        match s.as_str() {
            "-o" | "--output" => output = opt.get(1).cloned(),
            "-x" | "--language" => x = val.clone(),
            "-c" => compile = true,
            "-fno-lto" => lto = None,
            "-S" => assemble = true,
            "-E" | "-M" | "-MM" | "-fsyntax-only" | "-###" | "--version" | "-dumpversion"
            | "-dumpmachine" | "-dumpspecs" | "--help" | "-help" | "-emit-llvm" | "-emit-ast"
            | "-P" | "--precompile" => passthrough = true,
            _ => {
                if starts(&s, "-o") && s.len() > 2 && !starts(&s, "-objc") {
                    output = Some(OsString::from(&s[2..]));
                } else if let Some(v) = s.strip_prefix("-x") {
                    if !v.is_empty() && !starts(&s, "-xc-") {
                        x = Some(v.to_string());
                    }
                } else if let Some(v) = s.strip_prefix("--language=") {
                    x = Some(v.to_string());
                } else if s == "-flto" || starts(&s, "-flto=") {
                    lto = Some(s.clone());
                } else if starts(&s, "-print-") || starts(&s, "--print-") {
                    passthrough = true;
                }
            }
        }
        words.push(Word::Opt(opt));
    }
    let has_sources = words.iter().any(|w| matches!(w, Word::Source { .. }));
    let action = if passthrough || !any_input {
        Action::PassThrough
    } else if compile {
        if has_sources {
            Action::Compile
        } else {
            Action::PassThrough
        }
    } else if assemble {
        if has_sources {
            Action::Assemble
        } else {
            Action::PassThrough
        }
    } else {
        Action::Link
    };
    CommandLine {
        words,
        output,
        action,
        tally_opts,
        lto,
    }
}

/// True for options that only matter when producing dependency files.
pub fn is_dep_opt(opt: &[OsString]) -> bool {
    let s = opt[0].to_string_lossy();
    matches!(
        s.as_ref(),
        "-MD" | "-MMD" | "-MF" | "-MT" | "-MQ" | "-MP" | "-MG" | "-MV" | "-MJ"
    ) || s.starts_with("-MF")
        || s.starts_with("-MT")
        || s.starts_with("-MQ")
        || s.starts_with("-MJ")
        || s.starts_with("-Wp,-MD")
        || s.starts_with("-Wp,-MMD")
}

/// True for `-x` options (dropped when compiling IR).
pub fn is_lang_opt(opt: &[OsString]) -> bool {
    let s = opt[0].to_string_lossy();
    s == "-x"
        || s == "--language"
        || s.starts_with("--language=")
        || (s.starts_with("-x") && !s.starts_with("-xc-"))
}

/// True for `-o`.
pub fn is_output_opt(opt: &[OsString]) -> bool {
    let s = opt[0].to_string_lossy();
    s == "-o" || s == "--output" || (s.starts_with("-o") && !s.starts_with("-objc"))
}

/// True for `-c` / `-S`.
pub fn is_action_opt(opt: &[OsString]) -> bool {
    let s = opt[0].to_string_lossy();
    s == "-c" || s == "-S"
}

/// The default object/assembly name clang would use for `src`: its stem plus `ext`, in the
/// current directory.
pub fn default_output(src: &OsString, ext: &str) -> PathBuf {
    let p = Path::new(src);
    let stem = p.file_stem().unwrap_or(p.as_os_str());
    let mut out = PathBuf::from(stem);
    out.set_extension(ext);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn compile_only() {
        let c = parse(&v(
            "-O2 -g -c -I inc -DX=1 a.c -o a.o --tally-mode=edges-naive",
        ));
        assert_eq!(c.action, Action::Compile);
        assert_eq!(c.output, Some(OsString::from("a.o")));
        assert_eq!(c.tally_opts, vec!["mode=edges-naive".to_string()]);
        let srcs: Vec<_> = c
            .words
            .iter()
            .filter(|w| w.source_lang().is_some())
            .collect();
        assert_eq!(srcs.len(), 1);
        // "-I inc" kept together, "inc" not taken for an input
        assert!(c.words.contains(&Word::Opt(v("-I inc"))));
    }

    #[test]
    fn link_with_objects_and_libs() {
        let c = parse(&v("main.c util.o libx.a -lm -L /opt/lib -o prog"));
        assert_eq!(c.action, Action::Link);
        assert!(c.words.contains(&Word::OtherInput("util.o".into())));
        assert!(c.words.contains(&Word::OtherInput("libx.a".into())));
        assert_eq!(
            c.words.iter().filter(|w| w.source_lang().is_some()).count(),
            1
        );
    }

    #[test]
    fn x_language_applies_to_following_inputs() {
        let c = parse(&v("-x c++ a.inc -x none b.c -c"));
        let langs: Vec<_> = c.words.iter().filter_map(|w| w.source_lang()).collect();
        assert_eq!(langs, vec![Lang::Cxx, Lang::C]);
    }

    #[test]
    fn passthrough_cases() {
        for line in [
            "--version",
            "-E a.c",
            "-M a.c",
            "-fsyntax-only a.c",
            "-print-search-dirs",
            "-v",
            "-c -emit-llvm a.c",
        ] {
            assert_eq!(parse(&v(line)).action, Action::PassThrough, "{line}");
        }
        assert_eq!(parse(&v("-c a.s")).action, Action::PassThrough);
        assert_eq!(parse(&v("-c a.ll")).action, Action::Compile);
    }

    #[test]
    fn stdin_is_a_source_with_a_source_language() {
        let c = parse(&v("-x c - -c -o a.o"));
        assert_eq!(c.action, Action::Compile);
        assert_eq!(
            c.words
                .iter()
                .filter_map(|w| w.source_lang())
                .collect::<Vec<_>>(),
            vec![Lang::C]
        );
        // Without -x (clang's error), or as assembly: clang's business.
        assert_eq!(parse(&v("-c -")).action, Action::PassThrough);
        assert_eq!(parse(&v("-x assembler -c -")).action, Action::PassThrough);
    }

    #[test]
    fn lto_the_last_word_wins() {
        assert_eq!(parse(&v("-flto -c a.c")).lto.as_deref(), Some("-flto"));
        assert_eq!(
            parse(&v("-flto=full -flto=thin a.c")).lto.as_deref(),
            Some("-flto=thin")
        );
        assert_eq!(parse(&v("-flto -fno-lto -c a.c")).lto, None);
        assert_eq!(parse(&v("-flto-jobs=4 -c a.c")).lto, None);
    }

    #[test]
    fn joined_output() {
        let c = parse(&v("-c a.c -oa.o"));
        assert_eq!(c.output, Some(OsString::from("a.o")));
    }
}
