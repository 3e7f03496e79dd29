//! Helpers for the runtime tests: a temp dir holding `libtally_rt.a` and `tally.h`, C modules
//! with hand-built `struct tally_module` descriptors, compiling with clang-19, running, and
//! reading the profile back with tally-format.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tally_format::profile::Profile;
use tally_format::{Mode, ModuleMeta};
use tally_graph::hash::fnv64;

pub const CC: &str = "clang-19";
pub const CXX: &str = "clang++-19";

pub struct Env {
    pub dir: tempfile::TempDir,
}

/// One hand-built module: its C declarations and what the profile should say about it.
pub struct Module {
    pub var: String,
    pub meta: ModuleMeta,
    pub blob: Vec<u8>,
    pub hash: u64,
    pub c: String,
}

/// Frame macros the way instrumented code maintains `struct tally_frame` records.
pub const FRAME_MACROS: &str = r#"
#define ENTER(rec, ctrs) struct tally_frame rec; uint64_t *rec##_ctrs = (ctrs); (void)rec##_ctrs; \
    rec.prev = __tally_top; rec.site = TALLY_NO_SITE; __tally_top = &rec
#define SITE(rec, s) (rec.site = rec##_ctrs + (s))
#define LEAVE(rec) (__tally_top = rec.prev)
#define NOINLINE __attribute__((noinline))
"#;

impl Module {
    /// A module `var` for source file `source` with `n` counters, registered by a constructor of
    /// priority `prio` (101..65535).
    pub fn new(var: &str, source: &str, n: u32, prio: u32) -> Module {
        Self::with_abi(var, source, n, prio, "TALLY_ABI_VERSION")
    }

    pub fn with_abi(var: &str, source: &str, n: u32, prio: u32, abi: &str) -> Module {
        let meta = ModuleMeta {
            source: source.into(),
            producer: "tally-runtime tests".into(),
            mode: Mode::Edge,
            num_counters: n,
            files: vec![source.into()],
            functions: vec![],
            source_fns: vec![],
            skipped: vec![],
            mode_meta: Default::default(),
            oracle_for: None,
            probe_descs: Vec::new(),
            probes_before_optimization: false,
        };
        Self::from_meta(var, meta, n, prio, abi)
    }

    /// A module `var` with this description (its `num_counters` is `n`).
    pub fn from_meta(var: &str, meta: ModuleMeta, n: u32, prio: u32, abi: &str) -> Module {
        let blob = meta.encode();
        let hash = fnv64(&blob);
        let bytes: Vec<String> = blob.iter().map(|b| format!("0x{b:02x}")).collect();
        let c = format!(
            r#"
uint64_t {var}_ctr[{n_arr}];
static const uint8_t {var}_meta[] = {{ {bytes} }};
struct tally_module {var}_mod = {{ {abi}, 0, 0x{hash:016x}ULL, {var}_meta, sizeof {var}_meta,
    {var}_ctr, {n}, 0, 0, 0 }};
__attribute__((constructor({prio}))) static void {var}_register(void) {{
    __tally_register(&{var}_mod);
}}
"#,
            n_arr = n.max(1),
            bytes = bytes.join(","),
        );
        Module {
            var: var.into(),
            meta,
            blob,
            hash,
            c,
        }
    }
}

/// The standard prelude of a test translation unit.
pub fn prelude() -> String {
    format!(
        "#ifndef _GNU_SOURCE\n#define _GNU_SOURCE\n#endif\n#include <tally.h>\n#include <stdint.h>\n#include <stdio.h>\n\
         #include <stdlib.h>\n#include <string.h>\n#include <setjmp.h>\n#include <unistd.h>\n\
         #include <errno.h>\n{FRAME_MACROS}"
    )
}

impl Env {
    pub fn new() -> Env {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(
            dir.path().join(tally_runtime::ARCHIVE_NAME),
            tally_runtime::ARCHIVE,
        )
        .unwrap();
        std::fs::write(dir.path().join("tally.h"), tally_runtime::HEADER).unwrap();
        Env { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Compiles and links `sources` (file name, contents) with the runtime into `name`.
    pub fn build_with(
        &self,
        compiler: &str,
        name: &str,
        sources: &[(&str, String)],
        extra: &[&str],
    ) -> PathBuf {
        let mut cmd = Command::new(compiler);
        cmd.current_dir(self.path())
            .args(["-O2", "-g", "-Wall", "-Werror", "-I."])
            .args(extra);
        for (file, text) in sources {
            std::fs::write(self.path().join(file), text).unwrap();
            cmd.arg(file);
        }
        cmd.arg(tally_runtime::ARCHIVE_NAME)
            .arg("-pthread")
            .arg("-o")
            .arg(name);
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
        assert!(
            out.status.success(),
            "{compiler} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.path().join(name)
    }

    pub fn build(&self, name: &str, sources: &[(&str, String)]) -> PathBuf {
        self.build_with(CC, name, sources, &[])
    }

    /// Runs `exe` in the temp dir with `args` and `env` (TALLY_PROFILE is cleared first).
    pub fn run(&self, exe: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(exe);
        cmd.current_dir(self.path())
            .args(args)
            .env_remove("TALLY_PROFILE");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// Runs and checks the exit code and that nothing was printed on stderr.
    pub fn run_ok(&self, exe: &Path, args: &[&str], env: &[(&str, &str)], code: i32) -> Output {
        let out = self.run(exe, args, env);
        assert_eq!(
            out.status.code(),
            Some(code),
            "status {:?}\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "",
            "unexpected stderr"
        );
        out
    }

    pub fn profile(&self, file: &str) -> Profile {
        Profile::read_file(self.path().join(file)).unwrap_or_else(|e| panic!("reading {file}: {e}"))
    }

    /// Names of the files in the temp dir ending in `suffix`.
    pub fn files_ending(&self, suffix: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(suffix) || n.contains(".tmp."))
            .collect();
        v.sort();
        v
    }
}

/// Checks that `p` holds exactly `mods`, written in ascending module hash (whatever the order
/// they registered in), returning their counters in the order of `mods`.
pub fn counters_of(p: &Profile, mods: &[&Module]) -> Vec<Vec<u64>> {
    assert_eq!(p.modules.len(), mods.len(), "module count");
    assert!(
        p.modules.windows(2).all(|w| w[0].hash <= w[1].hash),
        "modules in ascending hash"
    );
    mods.iter()
        .map(|m| {
            let pm = p
                .modules
                .iter()
                .find(|pm| pm.hash == m.hash)
                .unwrap_or_else(|| panic!("no module with the hash of {}", m.var));
            assert_eq!(pm.meta, m.meta, "meta of {}", m.var);
            assert_eq!(pm.meta_blob, m.blob, "blob of {}", m.var);
            pm.counters.clone()
        })
        .collect()
}
