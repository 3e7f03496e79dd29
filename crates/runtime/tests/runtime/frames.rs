//! Frame records (exact early termination): `exit` from nested callees, `longjmp`, C++
//! exceptions, corrupt or stale frame lists, threads.

use super::*;

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
