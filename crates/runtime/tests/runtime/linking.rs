//! The runtime in a linked program: a module in a `dlopen`ed library, and the archive's
//! symbols (prefixed, or the program's own names could clash).

use super::*;

#[test]
fn module_in_a_dlopened_library() {
    let env = Env::new();
    let main_m = Module::new("main", "main.c", 2, 101);
    let lib_m = Module::new("lib", "lib.c", 3, 101);
    // The library carries its own hidden copy of the runtime, as every image tally links does;
    // the two copies share one process registry. It registers from its constructor and
    // unregisters from its destructor.
    let lib_src = format!(
        "{}{}{}",
        prelude(),
        lib_m.c,
        r#"
__attribute__((destructor)) static void lib_unregister(void) { __tally_unregister(&lib_mod); }
NOINLINE void lib_work(int x) {
    ENTER(r, lib_ctr);
    lib_ctr[0] += 1;
    SITE(r, 2);
    if (x) exit(9);
    LEAVE(r);
}
"#
    );
    std::fs::write(env.path().join("lib.c"), lib_src).unwrap();
    let out = std::process::Command::new(common::CC)
        .current_dir(env.path())
        .args(["-O2", "-fPIC", "-shared", "-I.", "lib.c", "-o", "liblib.so"])
        .arg(tally_runtime::ARCHIVE_NAME)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let main_src = format!(
        "{}{}{}",
        prelude(),
        main_m.c,
        r#"
#include <dlfcn.h>
int main(int argc, char **argv) {
    (void)argc;
    ENTER(r, main_ctr);
    void *h = dlopen("./liblib.so", RTLD_NOW);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    void (*work)(int) = (void (*)(int))dlsym(h, "lib_work");
    main_ctr[0] = 1;
    work(0);
    SITE(r, 1);
    if (!strcmp(argv[1], "exit")) work(1);
    dlclose(h);
    LEAVE(r);
    return 0;
}
"#
    );
    let exe = env.build_with(common::CC, "dl", &[("dl.c", main_src)], &["-ldl"]);
    env.run_ok(&exe, &["exit"], &[], 9);
    let p = env.profile("dl.tally");
    assert_eq!(
        counters_of(&p, &[&main_m, &lib_m]),
        vec![vec![1, 1], vec![2, 0, 1]]
    );
    // dlclose keeps the library's counts.
    env.run_ok(&exe, &["close"], &[], 0);
    let p = env.profile("dl.tally");
    assert_eq!(
        counters_of(&p, &[&main_m, &lib_m]),
        vec![vec![1, 0], vec![1, 0, 0]]
    );
}

/// The runtime is split into several files (`c/*.c`) that share names; every global symbol the
/// archive defines must carry a tally prefix, or linking it into a program that has its own
/// `walk` or `env` would fail (or, worse, bind one to the other). And it defines every wrapper
/// of a redirected libc call.
#[test]
fn archive_defines_only_prefixed_symbols() {
    let env = Env::new();
    let out = std::process::Command::new("nm")
        .args(["--defined-only", "--extern-only", "--format=posix"])
        .arg(env.path().join(tally_runtime::ARCHIVE_NAME))
        .output()
        .expect("run nm");
    assert!(out.status.success(), "nm failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut names = Vec::new();
    for line in text.lines() {
        // "name type value size"; member headers look like "libtally_rt.a[x.o]:".
        let mut f = line.split_whitespace();
        let (Some(name), Some(kind)) = (f.next(), f.next()) else {
            continue;
        };
        if name.ends_with(':') {
            continue;
        }
        names.push(name.to_string());
        assert!(
            name.starts_with("tally_")
                || name.starts_with("__tally_")
                || name.starts_with("tally__"),
            "the runtime archive defines the unprefixed global `{name}` ({kind})"
        );
    }
    for expected in [
        "__tally_register",
        "__tally_top",
        "tally__self",
        "tally_write_profile",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from nm output"
        );
    }
}
