//! Shared libraries and dlopen: one profile per process holding every
//! tally-instrumented module loaded at any time -- the executable, a linked shared library, and
//! a `dlopen`ed one closed before exit -- each exact against the `edges-naive` oracle, whatever
//! the load order and RTLD_LOCAL / RTLD_GLOBAL; tally-built libraries link into any executable,
//! export none of the runtime's symbols, and mix with plain builds both ways.

use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Linked into the executable. `a_deep` may end the process from inside the library, under
/// frames of the executable and of the library that keep frame records.
const LIBA: &str = r#"
#include <stdio.h>
#include <stdlib.h>
int a_work(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        if (i % 3) s += i; else s -= 1;
    }
    return s;
}
static int a_leaf(int n) {
    if (n == 7) { fflush(stdout); exit(3); }
    return n + 1;
}
int a_deep(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += a_leaf(i) % 5 ? a_leaf(i + 1) : 1;
    return s;
}
"#;

/// Opened with dlopen, closed before exit (twice: the second opening adds to the first's counts).
const LIBB: &str = r#"
int b_work(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += (i & 1) ? i : 2;
    return s;
}
"#;

/// Opened with dlopen and kept open.
const LIBK: &str = r#"
int c_work(int n) { return n > 3 ? n * 3 : n - 1; }
"#;

/// argv: libb path, libk path, RTLD_LOCAL ("local") or RTLD_GLOBAL, order ("bc" or "cb"), and
/// whether to end through exit() deep in liba ("exit") or by returning.
const MAIN: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
int a_work(int);
int a_deep(int);
static int open_call(const char *path, const char *sym, int mode, int arg, int close) {
    void *h = dlopen(path, mode);
    if (!h) { printf("dlopen: %s\n", dlerror()); return -1000; }
    int (*f)(int) = (int (*)(int))dlsym(h, sym);
    int r = f ? f(arg) : -2000;
    if (close) dlclose(h);
    return r;
}
static int driver(int n, int deep) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += (i & 1) ? a_work(i) : a_deep(deep);
    return s;
}
int main(int argc, char **argv) {
    if (argc < 6) return 2;
    int mode = RTLD_NOW | (strcmp(argv[3], "local") == 0 ? RTLD_LOCAL : RTLD_GLOBAL);
    int s = a_work(10);
    for (int k = 0; k < 2; k++) {
        if (strcmp(argv[4], "bc") == 0) {
            s += open_call(argv[1], "b_work", mode, 7 + k, 1);
            s += open_call(argv[2], "c_work", mode, 5 + k, 0);
        } else {
            s += open_call(argv[2], "c_work", mode, 5 + k, 0);
            s += open_call(argv[1], "b_work", mode, 7 + k, 1);
        }
    }
    printf("%d\n", s);
    s += driver(5, strcmp(argv[5], "exit") == 0 ? 9 : 4);
    printf("%d\n", s);
    return 0;
}
"#;

struct Built {
    main: PathBuf,
    libb: PathBuf,
    libk: PathBuf,
}

/// Builds liba.so (linked), libb.so and libk.so (dlopened) and the executable, each with
/// `lib` or `exe` as the variant, into `dir`, from sources in `dir`'s parent's `src` (one
/// source path for every variant: reports name modules by it).
fn build_all(dir: &Path, lib: Variant, exe: Variant) -> Built {
    let src = dir.parent().unwrap().join("src");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::create_dir_all(&src).unwrap();
    for (name, text) in [
        ("liba.c", LIBA),
        ("libb.c", LIBB),
        ("libk.c", LIBK),
        ("main.c", MAIN),
    ] {
        std::fs::write(src.join(name), text).unwrap();
    }
    for name in ["a", "b", "k"] {
        build(
            lib,
            false,
            &["-O2", "-g", "-fPIC", "-shared", &format!("lib{name}.c")],
            &dir.join(format!("lib{name}.so")),
            &src,
        );
    }
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    let libdir = format!("-L{}", dir.display());
    let main = dir.join("main");
    build(
        exe,
        false,
        &["-O2", "-g", "main.c", &libdir, "-la", &rpath],
        &main,
        &src,
    );
    Built {
        main,
        libb: dir.join("libb.so"),
        libk: dir.join("libk.so"),
    }
}

/// Runs the program with one argument set; returns (status, stdout, the profile's report).
fn run_one(b: &Built, args: &[&str], dir: &Path, want_profile: bool) -> (i32, String, Value) {
    let profile = dir.join("run.tally");
    let mut all = vec![b.libb.to_str().unwrap(), b.libk.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = run(&b.main, &all, dir, &profile);
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(stderr.is_empty(), "{}: stderr {stderr}", b.main.display());
    let report = if want_profile {
        report_json(&profile)
    } else {
        assert!(!profile.exists(), "a profile without tally code");
        Value::Null
    };
    // No other profile: a library's copy of the runtime never writes one of its own.
    for e in std::fs::read_dir(dir).unwrap() {
        let n = e.unwrap().file_name().to_string_lossy().to_string();
        assert!(
            !n.ends_with(".tally") || n == "run.tally",
            "unexpected profile {n}"
        );
    }
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).to_string(),
        report,
    )
}

fn modules(report: &Value) -> Vec<String> {
    let mut names: Vec<String> = report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["module"].as_str().unwrap().to_string())
        .map(|m| {
            Path::new(&m)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .to_string()
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

const ARGSETS: [[&str; 3]; 4] = [
    ["local", "bc", "return"],
    ["global", "cb", "return"],
    ["local", "cb", "exit"],
    ["global", "bc", "exit"],
];

/// The executable and three libraries, all tally-built: one profile with every module (libb
/// closed before exit), every count equal to the `edges-naive` build's, with exit() deep in a
/// library charging the frames of both images; output and status as the plain build's.
#[test]
fn every_module_in_one_exact_profile() {
    let root = scratch("shlib-all");
    let plain = build_all(&root.join("plain"), Variant::Plain, Variant::Plain);
    let naive = build_all(
        &root.join("naive"),
        Variant::Tally("edges-naive"),
        Variant::Tally("edges-naive"),
    );
    for v in ["edge", "edge-record", "edge-derive"] {
        let dir = root.join(v);
        let b = build_all(&dir, Variant::Tally(v), Variant::Tally(v));
        for args in ARGSETS {
            let what = format!("{v} {args:?}");
            let (ps, pout, _) = run_one(&plain, &args, &root.join("plain"), false);
            let (ns, nout, nrep) = run_one(&naive, &args, &root.join("naive"), true);
            let (s, out, rep) = run_one(&b, &args, &dir, true);
            assert_eq!(
                (s, &out),
                (ps, &pout),
                "{what}: differs from the plain build"
            );
            assert_eq!((ns, &nout), (ps, &pout), "{what}: naive differs from plain");
            assert_eq!(
                modules(&rep),
                ["liba.c", "libb.c", "libk.c", "main.c"],
                "{what}: modules"
            );
            assert_eq!(
                rep["modules"].as_array().map(|a| a.len()),
                Some(4),
                "{what}"
            );
            let (fns, executed) =
                assert_same_counts(&what, v, &rep, "edges-naive", &nrep, Edges::All);
            assert!(
                fns >= 5 && executed > 10,
                "{what}: {fns} functions, {executed} blocks"
            );
        }
    }
}

/// A plain executable with tally-built libraries profiles the libraries (the first one loaded
/// owns the process registry); a tally-built executable with plain libraries profiles itself.
#[test]
fn plain_and_tally_builds_mix_both_ways() {
    let root = scratch("shlib-mix");
    let plain = build_all(&root.join("plain"), Variant::Plain, Variant::Plain);
    let naive = build_all(
        &root.join("naive"),
        Variant::Tally("edges-naive"),
        Variant::Plain,
    );
    let libs = build_all(&root.join("libs"), Variant::Tally("edge"), Variant::Plain);
    let exe = build_all(&root.join("exe"), Variant::Plain, Variant::Tally("edge"));
    let naive_exe = build_all(
        &root.join("naive-exe"),
        Variant::Plain,
        Variant::Tally("edges-naive"),
    );
    for args in ARGSETS {
        let what = format!("{args:?}");
        let (ps, pout, _) = run_one(&plain, &args, &root.join("plain"), false);
        let (ns, nout, nrep) = run_one(&naive, &args, &root.join("naive"), true);
        let (s, out, rep) = run_one(&libs, &args, &root.join("libs"), true);
        assert_eq!((s, &out), (ps, &pout), "{what}: tally libraries");
        assert_eq!((ns, &nout), (ps, &pout), "{what}");
        assert_eq!(modules(&rep), ["liba.c", "libb.c", "libk.c"], "{what}");
        assert_same_counts(&what, "edge", &rep, "edges-naive", &nrep, Edges::All);

        let (s, out, rep) = run_one(&exe, &args, &root.join("exe"), true);
        let (_, _, nrep) = run_one(&naive_exe, &args, &root.join("naive-exe"), true);
        assert_eq!((s, &out), (ps, &pout), "{what}: tally executable");
        assert_eq!(modules(&rep), ["main.c"], "{what}");
        assert_same_counts(&what, "edge", &rep, "edges-naive", &nrep, Edges::All);
    }
}

/// `nm -D` of a tally-built shared library shows none of the runtime's symbols, and its
/// instrumented code has no initial-exec or local-exec TLS relocation (it links into any
/// executable and can be dlopened).
#[test]
fn shared_library_exports_nothing_of_the_runtime() {
    let root = scratch("shlib-nm");
    for v in ["edge", "edges-naive", "path", "events"] {
        let dir = root.join(v);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("liba.c"), LIBA).unwrap();
        let so = dir.join("liba.so");
        build(
            Variant::Tally(v),
            false,
            &["-O2", "-g", "-fPIC", "-shared", "liba.c"],
            &so,
            &dir,
        );
        let o = Command::new("nm").arg("-D").arg(&so).output().unwrap();
        assert!(o.status.success());
        let nm = String::from_utf8_lossy(&o.stdout);
        let leaked: Vec<&str> = nm.lines().filter(|l| l.contains("tally")).collect();
        assert!(leaked.is_empty(), "{v}: exported {leaked:?}");
        assert!(nm.contains(" a_work"), "{v}: {nm}");
        // The instrumented object itself (compiled -fPIC, not PIE): general-dynamic TLS only.
        let obj = dir.join("liba.o");
        build(
            Variant::Tally(v),
            false,
            &["-O2", "-fPIC", "-c", "liba.c"],
            &obj,
            &dir,
        );
        let o = Command::new("readelf")
            .arg("-rW")
            .arg(&obj)
            .output()
            .unwrap();
        let relocs = String::from_utf8_lossy(&o.stdout);
        for bad in ["TPOFF", "GOTTPOFF"] {
            assert!(
                !relocs
                    .lines()
                    .any(|l| l.contains(bad) && l.contains("__tally")),
                "{v}: {bad} relocation in position-independent code:\n{relocs}"
            );
        }
    }
}

/// A plain executable that only dlopens tally-built libraries and closes each before exit,
/// twice: the first library loaded owns the registry (and stays mapped until exit); the other
/// one's counts survive both dlcloses and add up into one module record.
#[test]
fn dlopen_only_with_every_library_closed() {
    const PROG: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int s = 0;
    if (argc < 3) return 2;
    for (int k = 0; k < 2; k++) {
        for (int i = 1; i <= 2; i++) {
            void *h = dlopen(argv[i], RTLD_NOW | (k ? RTLD_GLOBAL : RTLD_LOCAL));
            if (!h) { printf("%s\n", dlerror()); return 1; }
            int (*f)(int) = (int (*)(int))dlsym(h, i == 1 ? "b_work" : "c_work");
            s += f(5 + k + i);
            dlclose(h);
        }
    }
    printf("%d\n", s);
    return 0;
}
"#;
    let root = scratch("shlib-dlopen");
    let mut reports = Vec::new();
    for v in ["edge", "edges-naive"] {
        let dir = root.join(v);
        // The libraries of build_all; the executable is replaced by a plain one.
        let b = build_all(&dir, Variant::Tally(v), Variant::Plain);
        let src = root.join("src");
        std::fs::write(src.join("dl.c"), PROG).unwrap();
        let bin = dir.join("dl");
        build(Variant::Plain, false, &["-O2", "dl.c"], &bin, &src);
        let profile = dir.join("dl.tally");
        let o = run(
            &bin,
            &[b.libb.to_str().unwrap(), b.libk.to_str().unwrap()],
            &dir,
            &profile,
        );
        assert!(o.status.success(), "{v}: {o:?}");
        assert!(o.stderr.is_empty(), "{v}: {o:?}");
        let rep = report_json(&profile);
        assert_eq!(modules(&rep), ["libb.c", "libk.c"], "{v}");
        assert_eq!(rep["modules"].as_array().map(|a| a.len()), Some(2), "{v}");
        let c = counts(&rep);
        for (k, f) in &c {
            assert_eq!(f.entry, 2, "{v}: {k:?} entered twice");
        }
        reports.push(rep);
    }
    assert_same_counts(
        "dlopen only",
        "edge",
        &reports[0],
        "edges-naive",
        &reports[1],
        Edges::All,
    );
}

/// Exceptions and longjmp that cross image boundaries: thrown in a library and caught in the
/// executable (and the other way round, through a callback), longjmp from a library to a
/// setjmp in the executable. The landing image's runtime cuts every other image's frame list,
/// so the library frames the unwinder or longjmp discarded are charged: counts equal
/// edges-naive in edge, edge-record and edge-derive, linked and dlopened.
#[test]
fn exceptions_and_longjmp_across_libraries() {
    const LIB: &str = r#"
#include <csetjmp>
#include <stdexcept>
extern "C" int ext(int);
static int depth(int n) {
    if (n == 0) throw std::runtime_error("x");
    return ext(n) + depth(n - 1) + 1;
}
int lib_throw(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += ext(i);
    return s + depth(n);
}
int lib_catch(int (*cb)(int), int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        try { s += cb(i); } catch (const std::exception &) { s -= 1; }
    }
    return s;
}
static int jdeep(std::jmp_buf *jb, int n) {
    if (n == 0) std::longjmp(*jb, 7);
    return ext(n) + jdeep(jb, n - 1);
}
extern "C" int lib_jump(std::jmp_buf *jb, int n) { return jdeep(jb, n) + 1; }
"#;
    const MAIN: &str = r#"
#include <csetjmp>
#include <cstdio>
#include <dlfcn.h>
#include <stdexcept>
int lib_throw(int);
int lib_catch(int (*)(int), int);
extern "C" int ext(int x) { return x * 2 + 1; }
static int thrower(int i) {
    if (i % 2) throw std::runtime_error("odd");
    return ext(i);
}
static int caller(int n) {
    int s = 0;
    try { s = lib_throw(n); } catch (const std::exception &) { s = -1; }
    return s;
}
static std::jmp_buf jb;
int main(int argc, char **argv) {
    int s = 0;
    for (int k = 0; k < 3; k++) s += caller(k + argc);
    s += lib_catch(thrower, 5);
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) { std::printf("%s\n", dlerror()); return 1; }
    auto jump = (int (*)(std::jmp_buf *, int))dlsym(h, "lib_jump");
    for (volatile int k = 0; k < 3; k++) {
        int r = setjmp(jb);
        if (r == 0) s += jump(&jb, k + 1);
        else s += r;
    }
    dlclose(h);
    std::printf("%d\n", s);
    return 0;
}
"#;
    let root = scratch("shlib-unwind");
    let src = root.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("lib.cpp"), LIB).unwrap();
    std::fs::write(src.join("main.cpp"), MAIN).unwrap();
    let mut reports = Vec::new();
    let mut outputs = Vec::new();
    for v in ["edges-naive", "edge", "edge-record", "edge-derive"] {
        let dir = root.join(v);
        std::fs::create_dir_all(&dir).unwrap();
        let so = dir.join("liblib.so");
        build(
            Variant::Tally(v),
            true,
            &["-O2", "-g", "-fPIC", "-shared", "lib.cpp"],
            &so,
            &src,
        );
        // The same library, dlopened under another name (the longjmp goes through it).
        let so2 = dir.join("libjump.so");
        std::fs::copy(&so, &so2).unwrap();
        let bin = dir.join("main");
        let libdir = format!("-L{}", dir.display());
        let rpath = format!("-Wl,-rpath,{}", dir.display());
        build(
            Variant::Tally(v),
            true,
            &["-O2", "-g", "main.cpp", &libdir, "-llib", &rpath],
            &bin,
            &src,
        );
        let profile = dir.join("run.tally");
        let o = run(&bin, &[so2.to_str().unwrap()], &dir, &profile);
        assert!(o.status.success() && o.stderr.is_empty(), "{v}: {o:?}");
        outputs.push(String::from_utf8_lossy(&o.stdout).to_string());
        reports.push((v, report_json(&profile)));
    }
    assert!(outputs.iter().all(|o| o == &outputs[0]), "{outputs:?}");
    let (_, naive) = &reports[0];
    for (v, rep) in &reports[1..] {
        let (fns, _) = assert_same_counts(v, v, rep, "edges-naive", naive, Edges::All);
        assert!(fns >= 5, "{v}: {fns} functions");
    }
}

/// A plugin: a loop, a `longjmp` back into it (a landing in a dlopened object's copy of the
/// runtime) and an `exit` under frames of its own.
const PLUGIN: &str = r#"
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
static jmp_buf jb;
static int leaf(int i) {
    if (i == 5) longjmp(jb, 1);
    return i * 2;
}
int plug(int n) {
    volatile int s = 0;
    for (volatile int i = 0; i < n; i++) {
        if (setjmp(jb) == 0) s += leaf(i); else s += 100;
    }
    return s;
}
static int inner(int k) {
    if (k <= 0) { fflush(stdout); exit(7); }
    return inner(k - 1) + k % 3;
}
int plug_exit(int k) { return inner(k) + 1; }
"#;

/// argv: how many plugins, their directory. Loads plug0.so .. plugN-1.so (separate files: each
/// is loaded on its own), calls each from the main thread and every tenth from a thread of its
/// own, then exits from inside the last one.
const PLUGIN_HOST: &str = r#"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
typedef int (*fn)(int);
static fn fns[1024];
static void *worker(void *arg) {
    long n = (long)arg, s = 0;
    for (long k = 0; k < n; k += 10) s += fns[k](3);
    return (void *)s;
}
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int n = atoi(argv[1]);
    long total = 0;
    void *h = 0;
    for (int k = 0; k < n && k < 1024; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/plug%d.so", argv[2], k);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) { printf("dlopen #%d: %s\n", k, dlerror()); return 1; }
        fns[k] = (fn)dlsym(h, "plug");
        total += fns[k](k % 9 + 1);
    }
    pthread_t t;
    void *r;
    if (pthread_create(&t, 0, worker, (void *)(long)n) || pthread_join(t, &r)) return 3;
    printf("%ld %ld\n", total, (long)r);
    fn e = (fn)dlsym(h, "plug_exit");
    return e(4);
}
"#;

/// Whether a shared object asks for static TLS (`DF_STATIC_TLS`: glibc then takes its
/// thread-locals from the small surplus it keeps for `dlopen`).
fn static_tls(so: &Path) -> bool {
    let o = Command::new("readelf").arg("-dW").arg(so).output().unwrap();
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .any(|l| l.contains("(FLAGS)") && l.contains("STATIC_TLS"))
}

/// Any number of tally-built shared objects can be `dlopen`ed, as plain ones can: 128 plugins, each
/// with a `longjmp` landing, called from two threads, the process ending by `exit` inside the last
/// one: same output and status as the plain build, and every count equal to the `edges-naive`
/// build's. Only a trace-mode library takes static TLS.
#[test]
fn any_number_of_plugins_load() {
    const N: usize = 128;
    let root = scratch("shlib-plugins");
    let src = root.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("plug.c"), PLUGIN).unwrap();
    std::fs::write(src.join("host.c"), PLUGIN_HOST).unwrap();
    let mut results = Vec::new();
    for v in [
        "plain",
        "edges-naive",
        "edge",
        "edge-record",
        "path",
        "events",
    ] {
        let variant = if v == "plain" {
            Variant::Plain
        } else {
            Variant::Tally(v)
        };
        let dir = root.join(v);
        std::fs::create_dir_all(&dir).unwrap();
        let first = dir.join("plug0.so");
        build(
            variant,
            false,
            &["-O2", "-g", "-pthread", "-fPIC", "-shared", "plug.c"],
            &first,
            &src,
        );
        assert!(!static_tls(&first), "{v}: the plugin takes static TLS");
        for k in 1..N {
            std::fs::copy(&first, dir.join(format!("plug{k}.so"))).unwrap();
        }
        // The host is plain: the first plugin loaded owns the process's registry.
        let host = dir.join("host");
        build(
            Variant::Plain,
            false,
            &["-O2", "-pthread", "host.c", "-ldl"],
            &host,
            &src,
        );
        let profile = dir.join("run.tally");
        let n = N.to_string();
        let o = run(&host, &[&n, dir.to_str().unwrap()], &dir, &profile);
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            "",
            "{v}: stderr (stdout {out})"
        );
        let report = (v != "plain").then(|| report_json(&profile));
        results.push((v, o.status.code(), out, report));
    }
    let (_, status, out, _) = &results[0];
    assert_eq!(*status, Some(7), "plain: {out}");
    let naive = results[1].3.clone().unwrap();
    for (v, s, o, report) in &results[1..] {
        assert_eq!((s, o), (status, out), "{v}: differs from the plain build");
        if *v == "events" {
            continue; // events, not block counts (its exactness: tests/events.rs)
        }
        let (fns, executed) = assert_same_counts(
            v,
            v,
            report.as_ref().unwrap(),
            "edges-naive",
            &naive,
            Edges::All,
        );
        assert!(
            fns >= 2 && executed > 8,
            "{v}: {fns} functions, {executed} blocks"
        );
    }
    // `plug` ran once per plugin from the main thread and once per tenth from the worker.
    let entries: u64 = naive["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["name"] == "plug")
        .map(|f| f["entry_count"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(entries as usize, N + N.div_ceil(10), "calls of plug");
    // A trace-mode library keeps the static TLS of its runtime (documented limit).
    let dir = root.join("trace");
    std::fs::create_dir_all(&dir).unwrap();
    let so = dir.join("plug.so");
    build(
        Variant::Tally("trace"),
        false,
        &["-O2", "-fPIC", "-shared", "plug.c"],
        &so,
        &src,
    );
    assert!(static_tls(&so), "trace mode: expected static TLS");
}
