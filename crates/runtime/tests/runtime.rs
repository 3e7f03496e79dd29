//! End-to-end tests of the C runtime (`c/*.c`): C (and C++) programs with hand-built module descriptors and
//! hand-maintained frame records, linked with `libtally_rt.a`, run, and their profiles read back
//! with tally-format.

mod common;

use common::{counters_of, prelude, Env, Module, CXX};

fn pid_of(out: &std::process::Output) -> u64 {
    let s = String::from_utf8_lossy(&out.stdout);
    s.lines()
        .find_map(|l| l.strip_prefix("pid "))
        .expect("the program prints its pid")
        .trim()
        .parse()
        .unwrap()
}

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

const NESTED_EXIT: &str = r#"
NOINLINE void popped(void) { ENTER(r, m_ctr); SITE(r, 5); LEAVE(r); }
NOINLINE void c3(int x) { ENTER(r, m_ctr); SITE(r, 3); if (x) exit(7); LEAVE(r); }
NOINLINE void plain(int x) { c3(x); asm volatile("" ::: "memory"); } /* not instrumented */
NOINLINE void nosite(int x) { ENTER(r, m_ctr); plain(x); LEAVE(r); }
NOINLINE void c2(int x) { ENTER(r, m_ctr); SITE(r, 2); nosite(x); LEAVE(r); }
NOINLINE void c1(int x) { ENTER(r, m_ctr); SITE(r, 1); c2(x); LEAVE(r); }
int main(int argc, char **argv) {
    (void)argv;
    ENTER(r, m_ctr);
    SITE(r, 4);
    popped();
    SITE(r, 0);
    c1(argc > 0);
    LEAVE(r);
    return 0;
}
"#;

#[test]
fn exit_from_nested_callee_charges_each_frame_once() {
    let env = Env::new();
    let m = Module::new("m", "nested.c", 8, 101);
    let exe = env.build(
        "nested",
        &[("nested.c", format!("{}{}{NESTED_EXIT}", prelude(), m.c))],
    );
    env.run_ok(&exe, &[], &[], 7);
    let p = env.profile("nested.tally");
    assert_eq!(counters_of(&p, &[&m]), vec![vec![1, 1, 1, 1, 0, 0, 0, 0]]);
}

#[test]
fn exit_from_nested_callee_gcc() {
    let env = Env::new();
    let m = Module::new("m", "nested.c", 8, 101);
    let exe = env.build_with(
        "gcc",
        "nested",
        &[("nested.c", format!("{}{}{NESTED_EXIT}", prelude(), m.c))],
        &[],
    );
    env.run_ok(&exe, &[], &[], 7);
    let p = env.profile("nested.tally");
    assert_eq!(counters_of(&p, &[&m]), vec![vec![1, 1, 1, 1, 0, 0, 0, 0]]);
}

#[test]
fn exit_from_deep_recursion() {
    let env = Env::new();
    let m = Module::new("m", "deep.c", 3, 101);
    let src = format!(
        "{}{}{}",
        prelude(),
        m.c,
        r#"
NOINLINE void rec(int d) {
    ENTER(r, m_ctr);
    SITE(r, 1);
    if (d == 0) { SITE(r, 2); exit(5); }
    rec(d - 1);
    LEAVE(r);
}
int main(int argc, char **argv) { (void)argc; rec(atoi(argv[1])); return 0; }
"#
    );
    let exe = env.build("deep", &[("deep.c", src)]);
    env.run_ok(&exe, &["50000"], &[], 5);
    let p = env.profile("deep.tally");
    assert_eq!(counters_of(&p, &[&m]), vec![vec![0, 50000, 1]]);
}

/// `landing` is the C statement run right after setjmp returns `v` in the frame owning `r`.
fn longjmp_program(m: &Module, landing: &str) -> String {
    format!(
        "{}{}{}",
        prelude(),
        m.c,
        r#"
static jmp_buf jb;
NOINLINE void thrower(void) { ENTER(r, m_ctr); SITE(r, 4); longjmp(jb, 1); LEAVE(r); }
NOINLINE void mid(int k) { ENTER(r, m_ctr); SITE(r, 3); if (k) thrower(); LEAVE(r); }
NOINLINE void plain(int k) { mid(k); asm volatile("" ::: "memory"); } /* not instrumented */
NOINLINE void rec(int d) {
    ENTER(r, m_ctr);
    SITE(r, 7);
    if (d == 0) plain(1); else rec(d - 1);
    LEAVE(r);
}
NOINLINE int catcher(int depth) {
    ENTER(r, m_ctr);
    volatile int n = 0;
    SITE(r, 2);
    int v = setjmp(jb);
    LANDING;
    if (n < 3) {
        n++;
        SITE(r, 5);
        if (depth) rec(depth - 1); else plain(1);
    }
    SITE(r, 6);
    LEAVE(r);
    return n;
}
int main(int argc, char **argv) {
    ENTER(r, m_ctr);
    SITE(r, 0);
    int n = catcher(argc > 1 ? atoi(argv[1]) : 0);
    LEAVE(r);
    printf("n=%d top=%s\n", n, __tally_top == NULL ? "null" : "set");
    return 0;
}
"#
    )
    .replace("LANDING", landing)
}

#[test]
fn longjmp_landed_charges_frames_above_and_the_setjmp_frame() {
    let env = Env::new();
    let m = Module::new("m", "lj.c", 8, 101);
    let exe = env.build(
        "lj",
        &[("lj.c", longjmp_program(&m, "__tally_longjmp_landed(v, &r)"))],
    );
    let out = env.run_ok(&exe, &[], &[], 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "n=3 top=null\n");
    let p = env.profile("lj.tally");
    assert_eq!(counters_of(&p, &[&m]), vec![vec![0, 0, 0, 3, 3, 3, 0, 0]]);
}

#[test]
fn longjmp_landed_from_deep_recursion() {
    let env = Env::new();
    let m = Module::new("m", "lj.c", 8, 101);
    let exe = env.build(
        "lj",
        &[("lj.c", longjmp_program(&m, "__tally_longjmp_landed(v, &r)"))],
    );
    let out = env.run_ok(&exe, &["20000"], &[], 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "n=3 top=null\n");
    let p = env.profile("lj.tally");
    // 3 longjmps, each abandoning 20000 recursion frames, mid, thrower and the setjmp frame.
    assert_eq!(
        counters_of(&p, &[&m]),
        vec![vec![0, 0, 0, 3, 3, 3, 0, 3 * 20000]]
    );
}

#[test]
fn unwound_charges_frames_above_only() {
    let env = Env::new();
    let m = Module::new("m", "uw.c", 8, 101);
    let exe = env.build(
        "uw",
        &[("uw.c", longjmp_program(&m, "if (v) __tally_unwound(&r)"))],
    );
    let out = env.run_ok(&exe, &["3"], &[], 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "n=3 top=null\n");
    let p = env.profile("uw.tally");
    assert_eq!(counters_of(&p, &[&m]), vec![vec![0, 0, 0, 3, 3, 0, 0, 9]]);
}

#[test]
fn longjmp_landed_zero_does_nothing() {
    let env = Env::new();
    let m = Module::new("m", "z.c", 2, 101);
    let src = format!(
        "{}{}{}",
        prelude(),
        m.c,
        r#"
int main(void) {
    ENTER(r, m_ctr);
    SITE(r, 1);
    struct tally_frame *before = __tally_top;
    __tally_longjmp_landed(0, &r);
    int same = __tally_top == before;
    LEAVE(r);
    printf("%d\n", same);
    return 0;
}
"#
    );
    let exe = env.build("z", &[("z.c", src)]);
    let out = env.run_ok(&exe, &[], &[], 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n");
    assert_eq!(
        counters_of(&env.profile("z.tally"), &[&m]),
        vec![vec![0, 0]]
    );
}

#[test]
fn cxx_exception_landing_pad() {
    let env = Env::new();
    let m = Module::new("m", "ex.cc", 8, 101);
    let src = format!(
        "{}{}{}",
        prelude(),
        m.c,
        r#"
struct Pad {
    tally_frame *f;
    bool armed;
    /* always_inline: the call must be the first thing in the landing pad, as in instrumented code */
    __attribute__((always_inline)) ~Pad() { if (armed) __tally_unwound(f); }
};
NOINLINE void thrower(int k) { ENTER(r, m_ctr); SITE(r, 4); if (k) throw 42; LEAVE(r); }
NOINLINE void mid(int k) { ENTER(r, m_ctr); SITE(r, 3); thrower(k); LEAVE(r); }
NOINLINE int catcher(int k) {
    ENTER(r, m_ctr);
    int caught = 0;
    try {
        Pad pad{&r, true};
        SITE(r, 2);
        mid(k);
        pad.armed = false;
    } catch (int) {
        caught = 1;
    }
    LEAVE(r);
    return caught;
}
int main() {
    ENTER(r, m_ctr);
    SITE(r, 0);
    int caught = 0;
    for (int i = 0; i < 5; i++) caught += catcher(i % 2 == 0);  /* throws 3 times */
    LEAVE(r);
    printf("caught=%d top=%s\n", caught, __tally_top == nullptr ? "null" : "set");
    return 0;
}
"#
    );
    let exe = env.build_with(CXX, "ex", &[("ex.cc", src)], &[]);
    let out = env.run_ok(&exe, &[], &[], 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "caught=3 top=null\n");
    let p = env.profile("ex.tally");
    assert_eq!(counters_of(&p, &[&m]), vec![vec![0, 0, 0, 3, 3, 0, 0, 0]]);
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

const CORRUPT: &str = r#"
#include <sys/mman.h>
#include <pthread.h>
static uint64_t stray[4];   /* not a registered counter array */

NOINLINE void inner(void) { ENTER(r, m_ctr); SITE(r, 1); exit(0); }
NOINLINE void bad_counters(void) { ENTER(r, stray); SITE(r, 0); inner(); LEAVE(r); }
NOINLINE void bad_site(void) { ENTER(r, m_ctr); SITE(r, 1000); inner(); LEAVE(r); }

/* A non-instrumented setjmp/longjmp across instrumented frames leaves __tally_top stale. */
static jmp_buf jb;
NOINLINE void lost(void) { ENTER(r, m_ctr); SITE(r, 3); longjmp(jb, 1); }
NOINLINE void scribble(void) {
    volatile uintptr_t junk[512];
    for (int i = 0; i < 512; i++) junk[i] = (i & 1) ? (uintptr_t)&junk[i] + 4096 * (uintptr_t)i : ~(uintptr_t)0 - i;
    for (int i = 0; i < 512; i++) junk[i] = junk[i] + 0;
}

/* A thread whose stack sits below two pages holding records whose `prev` leads to unreadable
 * memory. */
static char *region;
static size_t stack_size = 1 << 18, page = 4096;
static int mode_unmapped;
/* Waits until main sleeps in pthread_join (outside pthread_create's all-signals-blocked
 * window), so the runtime's stop signal at exit reaches it and it charges its record. */
static void main_sleeps(void) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)getpid());
    for (;;) {
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        if (!f || (p && p[1] == ' ' && p[2] == 'S')) return;
        usleep(1000);
    }
}
static void *thread_main(void *arg) {
    (void)arg;
    main_sleeps();
    struct tally_frame *rec = (struct tally_frame *)(region + stack_size);
    rec->site = m_ctr + 2;
    rec->prev = (struct tally_frame *)(region + stack_size + page + 64);
    if (mode_unmapped) munmap(region + stack_size + page, page);
    else mprotect(region + stack_size + page, page, PROT_NONE);
    __tally_top = rec;
    exit(0);
}

/* In a thread with a stack just above an unmapped hole, land with a list head in the hole. */
static void *landing_thread(void *arg) {
    (void)arg;
    ENTER(r, m_ctr);
    SITE(r, 2);
    __tally_top = (struct tally_frame *)(region + 64);          /* in the hole */
    __tally_unwound(&r);
    if (__tally_top != &r) abort();
    __tally_top = (struct tally_frame *)(region + 64);
    __tally_longjmp_landed(1, &r);                               /* charges r only */
    if (__tally_top != &r) abort();
    __tally_top = (struct tally_frame *)((char *)&r - 4 * 4096 + 3); /* misaligned */
    __tally_longjmp_landed(1, &r);
    __tally_top = (struct tally_frame *)((char *)&r - 8 * 4096);  /* stale garbage below */
    __tally_longjmp_landed(1, &r);
    LEAVE(r);
    return NULL;
}

static void run_thread(void *(*fn)(void *), size_t hole) {
    region = mmap(NULL, hole + stack_size + 2 * page, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) abort();
    memset(region, 0, hole + stack_size + 2 * page);
    if (hole) munmap(region, hole);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstack(&a, region + hole, stack_size);
    pthread_t t;
    if (pthread_create(&t, &a, fn, NULL)) abort();
    pthread_join(t, NULL);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *mode = argv[1];
    ENTER(r, m_ctr);
    SITE(r, 0);
    if (!strcmp(mode, "bad-counters")) bad_counters();
    if (!strcmp(mode, "bad-site")) bad_site();
    if (!strcmp(mode, "garbage-top")) { __tally_top = (struct tally_frame *)0x1235; exit(0); }
    if (!strcmp(mode, "high-garbage")) { __tally_top = (struct tally_frame *)~(uintptr_t)7; exit(0); }
    if (!strcmp(mode, "above-stack")) { r.prev = (struct tally_frame *)((char *)&r + ((uintptr_t)1 << 32)); exit(0); }
    if (!strcmp(mode, "cycle")) { r.prev = &r; exit(0); }
    if (!strcmp(mode, "stale")) {
        if (setjmp(jb) == 0) lost();
        scribble();
        exit(0);
    }
    if (!strcmp(mode, "unmapped")) { mode_unmapped = 1; run_thread(thread_main, 0); }
    if (!strcmp(mode, "protnone")) { mode_unmapped = 0; run_thread(thread_main, 0); }
    if (!strcmp(mode, "landing")) { run_thread(landing_thread, 4 * page); LEAVE(r); return 0; }
    return 1;
}
"#;

#[test]
fn corrupt_or_stale_frame_lists_do_not_crash() {
    let env = Env::new();
    let m = Module::new("m", "corrupt.c", 4, 101);
    let exe = env.build(
        "corrupt",
        &[("corrupt.c", format!("{}{}{CORRUPT}", prelude(), m.c))],
    );
    let cases: &[(&str, Vec<u64>)] = &[
        // A record whose site is not a registered counter is passed over, not charged; the
        // walk goes on to main's record (site 0).
        ("bad-counters", vec![1, 1, 0, 0]),
        ("bad-site", vec![1, 1, 0, 0]),
        ("garbage-top", vec![0, 0, 0, 0]),
        ("high-garbage", vec![0, 0, 0, 0]),
        // main's record is charged; its `prev` points 4 GiB above the stack.
        ("above-stack", vec![1, 0, 0, 0]),
        // r.prev = &r: charged once, then the walk stops.
        ("cycle", vec![1, 0, 0, 0]),
        // The stale head is below exit's frame: nothing of it is trusted; main's r is
        // unreachable through it, so what is charged depends on the stack; only no crash.
        ("stale", vec![]),
        // The record in the thread is charged; its `prev` is unreadable. main, blocked in
        // pthread_join when the thread calls exit, charges its own record (site 0) in the
        // runtime's stop signal (c/threads.c; the thread waits until main sleeps there).
        ("unmapped", vec![1, 0, 1, 0]),
        ("protnone", vec![1, 0, 1, 0]),
        // Three landed calls charge r's site 2; unwound charges nothing.
        ("landing", vec![0, 0, 3, 0]),
    ];
    for (mode, expected) in cases {
        let out = env.run(&exe, &[mode], &[]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "mode {mode}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "mode {mode}");
        let p = env.profile("corrupt.tally");
        let got = counters_of(&p, &[&m]).remove(0);
        if !expected.is_empty() {
            assert_eq!(&got, expected, "mode {mode}");
        }
        std::fs::remove_file(env.path().join("corrupt.tally")).unwrap();
    }
}

#[test]
fn threads_keep_separate_frame_lists() {
    let env = Env::new();
    let m = Module::new("m", "thr.c", 32, 101);
    let src = format!(
        "{}{}{}",
        prelude(),
        m.c,
        r#"
#include <pthread.h>
#define THREADS 4
#define ROUNDS 2000
static __thread jmp_buf jb;
NOINLINE void thrower(int base) { ENTER(r, m_ctr); SITE(r, base + 1); longjmp(jb, 1); }
NOINLINE void mid(int base) { ENTER(r, m_ctr); SITE(r, base + 2); thrower(base); LEAVE(r); }
static void *work(void *arg) {
    int base = (int)(intptr_t)arg * 4;
    ENTER(r, m_ctr);
    volatile int n = 0;
    int v = setjmp(jb);
    __tally_longjmp_landed(v, &r);
    if (n < ROUNDS) { n++; SITE(r, base + 3); mid(base); }
    LEAVE(r);
    return __tally_top == NULL ? (void *)1 : NULL;
}
int main(void) {
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, work, (void *)(intptr_t)(i + 1));
    int ok = 0;
    for (int i = 0; i < THREADS; i++) { void *res; pthread_join(t[i], &res); ok += res != NULL; }
    printf("ok=%d\n", ok);
    return 0;
}
"#
    );
    let exe = env.build("thr", &[("thr.c", src)]);
    let out = env.run_ok(&exe, &[], &[], 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok=4\n");
    let got = counters_of(&env.profile("thr.tally"), &[&m]).remove(0);
    let mut expected = vec![0u64; 32];
    for t in 1..=4 {
        for k in 1..=3 {
            expected[t * 4 + k] = 2000;
        }
    }
    assert_eq!(got, expected);
}

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

/// Hashed path counts (path mode) through the home tables and the overflow table, driven the
/// way instrumented code drives them: look the path up in its home slot, bump the count when
/// the key matches, call `__tally_path_count` otherwise. 3000 distinct paths (more than the
/// 1024 home slots, so home slots collide and paths overflow), a few of them hot so that they
/// take home slots from cold occupants, path 0 counted inline in its fresh slot without the
/// runtime, and a second table that never runs. The program prints what it counted; the
/// profile's entries for each path, added up, must say exactly that.
#[test]
fn hashed_path_counts_are_exact_through_home_and_overflow() {
    use tally_format::{BlockIdx as B, CounterIdx, FileIdx, FunctionMeta, Linkage, Loc};
    use tally_format::{PathMeta, PathStorage, StoredKind};
    let env = Env::new();
    let function = |name: &str, table: u32| FunctionMeta {
        name: name.into(),
        linkage: Linkage::External,
        loc: Loc {
            file: Some(FileIdx(0)),
            line: 1,
        },
        num_blocks: 1,
        edges: vec![(B(0), B(1), StoredKind::Return)],
        blocks: vec![Loc {
            file: Some(FileIdx(0)),
            line: 1,
        }],
        cfg_hash: 0,
        counter_base: CounterIdx(0),
        counters: vec![],
        mode_meta: tally_format::FunctionModeMeta::Path(PathMeta {
            cuts: vec![],
            num_paths: 1 << 40,
            storage: PathStorage::Hash { table },
            numbering: 0, // the profile is read, never reported
        }),
        source: Default::default(),
    };
    let f = |name: &str, table: u32| {
        let mut f = function(name, table);
        f.cfg_hash = f.cfg().unwrap().shape_hash();
        f
    };
    let mut m = Module::new("m", "paths.c", 0, 101);
    m.meta.mode = tally_format::Mode::Path;
    m.meta.functions = vec![f("busy", 0), f("idle", 1)];
    m.blob = m.meta.encode();
    m.hash = tally_graph::hash::fnv64(&m.blob);
    let bytes: Vec<String> = m.blob.iter().map(|b| format!("0x{b:02x}")).collect();
    let src = format!(
        r#"{prelude}
static const uint64_t empty_slot[2];
static uint64_t home[2][2 * TALLY_PATH_HOME_SLOTS];
static struct tally_path_table tables[2] = {{
    {{ .slots = (uint64_t *)empty_slot, .function = 0, .home = home[0] }},
    {{ .slots = (uint64_t *)empty_slot, .function = 1, .home = home[1] }},
}};
static const uint8_t m_meta[] = {{ {bytes} }};
struct tally_module m_mod = {{ TALLY_ABI_VERSION, 0, 0x{hash:016x}ULL, m_meta, sizeof m_meta,
    0, 0, tables, 2, 0 }};
__attribute__((constructor(101))) static void m_register(void) {{ __tally_register(&m_mod); }}

static void probe(struct tally_path_table *t, uint64_t p) {{
    uint64_t *slot = &t->home[2 * ((p * TALLY_PATH_HASH_MUL) >> (64 - TALLY_PATH_HOME_BITS))];
    if (slot[0] == p)
        slot[1]++;
    else
        __tally_path_count(t, p);
}}

#define N 3000
static uint64_t expect[N];
static uint64_t path_of(unsigned i) {{ return i ? (uint64_t)i * 0x5851F42D4C957F2Dull >> 24 : 0; }}

int main(void) {{
    uint64_t x = 1;
    for (int round = 0; round < 40; round++) {{
        for (unsigned i = 0; i < N; i++) {{ /* every path a few times */
            if ((i + round) % 7 == 0) {{ probe(&tables[0], path_of(i)); expect[i]++; }}
        }}
        for (int k = 0; k < 5000; k++) {{ /* a hot set, skewed */
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            unsigned i = (unsigned)((x >> 33) % 97) * (unsigned)((x >> 20) % 3 + 1) % N;
            probe(&tables[0], path_of(i));
            expect[i]++;
        }}
    }}
    for (unsigned i = 0; i < N; i++)
        if (expect[i])
            printf("%llu %llu\n", (unsigned long long)path_of(i), (unsigned long long)expect[i]);
    return 0;
}}
"#,
        prelude = prelude(),
        bytes = bytes.join(","),
        hash = m.hash,
    );
    let exe = env.build("prog", &[("prog.c", src)]);
    let out = env.run_ok(&exe, &[], &[], 0);
    let want: std::collections::BTreeMap<u64, u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (p, c) = l.split_once(' ').unwrap();
            (p.parse().unwrap(), c.parse().unwrap())
        })
        .collect();
    assert!(
        want.len() > 2000 && want.contains_key(&0),
        "the test counts paths"
    );
    let p = env.profile("prog.tally");
    assert_eq!(p.modules.len(), 1);
    let mut got = std::collections::BTreeMap::new();
    let mut entries = 0;
    for e in &p.modules[0].paths {
        match e.kind {
            tally_format::profile::PathEntryKind::Count => {
                assert_eq!(e.function, 0, "the idle function counted nothing");
                *got.entry(e.path).or_insert(0u64) += e.count;
                entries += 1;
            }
            tally_format::profile::PathEntryKind::Lost => assert_eq!(e.count, 0, "nothing lost"),
        }
    }
    assert_eq!(got, want, "path counts, home and overflow entries added");
    assert!(
        entries > want.len(),
        "some paths have both a home and an overflow entry (slots changed hands)"
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
