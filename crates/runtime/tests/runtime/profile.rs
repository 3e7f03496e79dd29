//! Where the profile goes and what it holds: counters of every width, `TALLY_PROFILE` and its
//! `%p`, unwritable paths, `tally_write_profile`, preserved `errno` and exit status, bad or
//! unregistered descriptors.

use super::*;

#[test]
fn counters_written_at_normal_exit() {
    let env = Env::new();
    let m = Module::new("m", "one.c", 4, 101);
    let src = format!(
        "{}{}\nint main(void) {{\n  printf(\"pid %d\\n\", (int)getpid());\n  \
         m_ctr[0] = 1; m_ctr[1] = 0x0123456789abcdefULL; m_ctr[3] = UINT64_MAX;\n  return 0;\n}}\n",
        prelude(),
        m.c
    );
    let exe = env.build("prog", &[("prog.c", src)]);
    let out = env.run_ok(&exe, &[], &[], 0);
    let p = env.profile("prog.tally");
    assert_eq!(p.pid, pid_of(&out));
    assert_eq!(
        counters_of(&p, &[&m]),
        vec![vec![1, 0x0123_4567_89ab_cdef, 0, u64::MAX]]
    );
    // No temporary file left behind.
    assert_eq!(env.files_ending(".tally"), vec!["prog.tally".to_string()]);
    // The Rust writer produces the very same bytes.
    let bytes = std::fs::read(env.path().join("prog.tally")).unwrap();
    assert_eq!(p.write(), bytes);
}

/// The writer's two shortcuts (write.c, `out_bytes`): a module description larger than the
/// write buffer goes to the file without the copy, and the checksum skips the zero bytes at the
/// top of each counter (one multiplication by a power of the FNV prime). Counters with every
/// number of significant bytes (0 to 8), at every position of the buffer: the profile must read
/// back (its checksum verified) with those values and be byte for byte what the Rust writer
/// produces.
#[test]
fn large_descriptions_and_counters_of_every_width() {
    let env = Env::new();
    let n = 5000u32;
    let mut meta = Module::new("m", "wide.c", n, 101).meta;
    meta.files = (0..3000)
        .map(|i| format!("src/dir{}/file_{i:05}.c", i % 7))
        .collect();
    let m = Module::from_meta("m", meta, n, 101, "TALLY_ABI_VERSION");
    assert!(
        m.blob.len() > 2 * 16384,
        "a description larger than the write buffer"
    );
    let src = format!(
        "{}{}\nint main(void) {{\n  for (unsigned i = 0; i < {n}; i++) {{\n    \
         unsigned w = (i * 7u) % 9u; /* significant bytes, 0..8 */\n    \
         m_ctr[i] = w == 0 ? 0 : w == 8 ? ~(uint64_t)i : \
         ((uint64_t)1 << (8 * w - 1)) | (uint64_t)(i & 0xff);\n  }}\n  return 0;\n}}\n",
        prelude(),
        m.c
    );
    let exe = env.build("prog", &[("prog.c", src)]);
    env.run_ok(&exe, &[], &[], 0);
    let p = env.profile("prog.tally");
    let want: Vec<u64> = (0..u64::from(n))
        .map(|i| match (i * 7) % 9 {
            0 => 0,
            8 => !i,
            w => (1u64 << (8 * w - 1)) | (i & 0xff),
        })
        .collect();
    assert_eq!(counters_of(&p, &[&m]), vec![want]);
    let bytes = std::fs::read(env.path().join("prog.tally")).unwrap();
    assert_eq!(p.write(), bytes);
}

#[test]
fn profile_path_from_env_with_pid() {
    let env = Env::new();
    let m = Module::new("m", "p.c", 1, 101);
    let src = format!(
        "{}{}int main(void) {{ printf(\"pid %d\\n\", (int)getpid()); m_ctr[0] = 42; return 0; }}\n",
        prelude(),
        m.c
    );
    let exe = env.build("p", &[("p.c", src)]);
    let out = env.run_ok(&exe, &[], &[("TALLY_PROFILE", "out.%p.%%.%x.tally")], 0);
    let pid = pid_of(&out);
    let name = format!("out.{pid}.%.%x.tally");
    assert_eq!(env.files_ending(".tally"), vec![name.clone()]);
    let p = env.profile(&name);
    assert_eq!(p.pid, pid);
    assert_eq!(counters_of(&p, &[&m]), vec![vec![42]]);
}

#[test]
fn unwritable_path_prints_one_line_and_keeps_exit_status() {
    let env = Env::new();
    let m = Module::new("m", "u.c", 1, 101);
    let src = format!(
        "{}{}int main(void) {{ m_ctr[0] = 1; exit(3); }}\n",
        prelude(),
        m.c
    );
    let exe = env.build("u", &[("u.c", src)]);
    let out = env.run(
        &exe,
        &[],
        &[("TALLY_PROFILE", "/nonexistent-tally-dir/x.tally")],
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "tally: cannot write profile /nonexistent-tally-dir/x.tally: No such file or directory\n"
    );
    // A directory in the way of the rename.
    std::fs::create_dir(env.path().join("adir")).unwrap();
    let out = env.run(&exe, &[], &[("TALLY_PROFILE", "adir")]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "tally: cannot write profile adir: Is a directory\n"
    );
    assert_eq!(env.files_ending(".tally"), Vec::<String>::new());
}

#[test]
fn profile_off_writes_nothing() {
    let env = Env::new();
    let m = Module::new("m", "o.c", 1, 101);
    let src = format!(
        "{}{}int main(void) {{ m_ctr[0] = 1; return 0; }}\n",
        prelude(),
        m.c
    );
    let exe = env.build("o", &[("o.c", src)]);
    env.run_ok(&exe, &[], &[("TALLY_PROFILE", "off")], 0);
    assert_eq!(env.files_ending(".tally"), Vec::<String>::new());
    // An empty TALLY_PROFILE means the default path.
    env.run_ok(&exe, &[], &[("TALLY_PROFILE", "")], 0);
    assert_eq!(env.files_ending(".tally"), vec!["o.tally".to_string()]);
}

#[test]
fn two_translation_units() {
    let env = Env::new();
    let a = Module::new("a", "a.c", 3, 101);
    let b = Module::new("b", "b.c", 2, 102);
    let a_src = format!(
        "{}{}{}",
        prelude(),
        a.c,
        r#"
void b_work(int);
int main(void) {
    ENTER(r, a_ctr);
    a_ctr[0] = 10;
    SITE(r, 2);
    b_work(1);
    LEAVE(r);
    return 0;
}
"#
    );
    let b_src = format!(
        "{}{}{}",
        prelude(),
        b.c,
        r#"
NOINLINE void b_work(int x) {
    ENTER(r, b_ctr);
    b_ctr[0] = 20;
    SITE(r, 1);
    if (x) exit(0);
    LEAVE(r);
}
"#
    );
    let exe = env.build("two", &[("a.c", a_src), ("b.c", b_src)]);
    env.run_ok(&exe, &[], &[], 0);
    let p = env.profile("two.tally");
    assert_eq!(
        counters_of(&p, &[&a, &b]),
        vec![vec![10, 0, 1], vec![20, 1]]
    );
}

#[test]
fn write_profile_and_reset_counters() {
    let env = Env::new();
    let m = Module::new("m", "w.c", 3, 101);
    let src = format!(
        "{}{}{}",
        prelude(),
        m.c,
        r#"
int main(void) {
    ENTER(r, m_ctr);
    SITE(r, 2);
    m_ctr[0] = 5;
    tally_write_profile();           /* does not charge the frame list */
    if (rename("w.tally", "first.tally") != 0) return 1;
    tally_reset_counters();
    m_ctr[1] = 9;
    tally_write_profile();
    m_ctr[1] = 10;
    _exit(0);                        /* no exit handler: the second snapshot stays */
}
"#
    );
    let exe = env.build("w", &[("w.c", src)]);
    env.run_ok(&exe, &[], &[], 0);
    assert_eq!(
        counters_of(&env.profile("first.tally"), &[&m]),
        vec![vec![5, 0, 0]]
    );
    assert_eq!(
        counters_of(&env.profile("w.tally"), &[&m]),
        vec![vec![0, 9, 0]]
    );
}

#[test]
fn errno_and_exit_status_are_preserved() {
    let env = Env::new();
    let m = Module::new("m", "e.c", 1, 102);
    let src = format!(
        "{}{}{}",
        prelude(),
        m.c,
        r#"
static void after_tally(void) {       /* registered first, so it runs after tally's handler */
    printf("errno=%d\n", errno);
    fflush(stdout);
}
__attribute__((constructor(101))) static void early(void) { atexit(after_tally); }
int main(int argc, char **argv) {
    (void)argv;
    m_ctr[0] = 1;
    errno = 1234;
    return 40 + argc;
}
"#
    );
    let exe = env.build("e", &[("e.c", src)]);
    for profile in ["e.tally", "/nonexistent-tally-dir/e.tally"] {
        let out = env.run(&exe, &[], &[("TALLY_PROFILE", profile)]);
        assert_eq!(out.status.code(), Some(41));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "errno=1234\n");
    }
    assert_eq!(counters_of(&env.profile("e.tally"), &[&m]), vec![vec![1]]);
}

#[test]
fn bad_descriptors_are_ignored_with_a_warning() {
    let env = Env::new();
    let other = (tally_runtime::ABI_VERSION + 1).to_string();
    let bad = Module::with_abi("bad", "bad.c", 1, 101, &other);
    let good = Module::new("good", "good.c", 1, 102);
    let src = format!(
        "{}{}{}{}",
        prelude(),
        bad.c,
        good.c,
        r#"
__attribute__((constructor(103))) static void null_reg(void) { __tally_register(NULL); }
__attribute__((constructor(104))) static void twice(void) { __tally_register(&good_mod); }
int main(void) { good_ctr[0] = 3; bad_ctr[0] = 4; return 0; }
"#
    );
    let exe = env.build("bad", &[("bad.c", src)]);
    let out = env.run(&exe, &[], &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "tally: ignoring a module descriptor with ABI version {other} (this runtime implements version {})\n\
             tally: ignoring a null module descriptor\n",
            tally_runtime::ABI_VERSION
        )
    );
    assert_eq!(
        counters_of(&env.profile("bad.tally"), &[&good]),
        vec![vec![3]]
    );
}

#[test]
fn unregistered_module_is_still_written() {
    let env = Env::new();
    let a = Module::new("a", "a.c", 1, 101);
    let b = Module::new("b", "b.c", 1, 102);
    let c = Module::new("c", "c.c", 1, 103);
    let src = format!(
        "{}{}{}{}int main(void) {{ __tally_unregister(&b_mod); __tally_unregister(&c_mod); \
         __tally_register(&c_mod); return 0; }}\n",
        prelude(),
        a.c,
        b.c,
        c.c
    );
    let exe = env.build("unreg", &[("unreg.c", src)]);
    env.run_ok(&exe, &[], &[], 0);
    // __tally_unregister is a module destructor: its object is going away (dlclose), and the
    // module's counts are kept for the profile (written with the live ones, in ascending hash:
    // `counters_of` checks the order); registering again
    // (dlopen again) takes them back into the module.
    let p = env.profile("unreg.tally");
    assert_eq!(
        counters_of(&p, &[&a, &c, &b]),
        vec![vec![0], vec![0], vec![0]]
    );
}
