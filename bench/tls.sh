#!/usr/bin/env bash
# What the runtime's thread-local model costs in a shared object.
#
# A tally-built shared object links libtally_rt_dyn.a, whose thread-locals are general-dynamic
# (no static TLS, so any number of such objects can be dlopen'ed); an executable links
# libtally_rt.a, whose initial-exec thread-locals the linker makes local-exec. Instrumented code
# is compiled the same either way (local-exec in executables, general-dynamic in -fPIC code,
# tally-llvm::module::runtime_tls_model), so only the runtime's own accesses can differ: they are
# on its slow paths, the landings of longjmp and C++ exceptions above all. This measures one
# landing (setjmp returning a second time into an instrumented frame, which charges the records
# above it) in the two places, under callgrind (instructions, not time), and prints a markdown
# table; docs/tls.md has the result.
#
# Usage: bench/tls.sh [TALLY]   (default: target/release/tally, built if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
TALLY=${1:-target/release/tally}
[ -x "$TALLY" ] || cargo build --release -p tally >&2
command -v valgrind >/dev/null || { echo "bench/tls.sh: needs valgrind" >&2; exit 1; }
W=target/bench/tls
rm -rf "$W" && mkdir -p "$W"
cat > "$W/land.c" <<'C'
#include <setjmp.h>
static jmp_buf jb;
static __attribute__((noinline)) void leaf(int i) {
    if (i >= 0) longjmp(jb, 1);
}
int land(int n) {
    volatile int s = 0;
    for (volatile int i = 0; i < n; i++)
        if (setjmp(jb) == 0) leaf(i); else s++;
    return s;
}
C
cat > "$W/main.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
int land(int);
int main(int argc, char **argv) { printf("%d\n", land(atoi(argv[1]))); return 0; }
C
# Executable: land.c inside it. Shared object: land.c in libland.so, the executable plain.
# -gdwarf-4: Debian's valgrind 3.19 does not read clang-19's DWARF 5.
"$TALLY" cc -O2 -gdwarf-4 "$W/main.c" "$W/land.c" -o "$W/exe"
"$TALLY" cc -O2 -gdwarf-4 -fPIC -shared "$W/land.c" -o "$W/libland.so"
clang-19 -O2 -gdwarf-4 "$W/main.c" -L"$W" -lland -Wl,-rpath,"$PWD/$W" -o "$W/host"
# The same without tally: what setjmp, longjmp and the loop cost in each place.
mkdir -p "$W/plain"
clang-19 -O2 -gdwarf-4 "$W/main.c" "$W/land.c" -o "$W/plain/exe"
clang-19 -O2 -gdwarf-4 -fPIC -shared "$W/land.c" -o "$W/plain/libland.so"
clang-19 -O2 -gdwarf-4 "$W/main.c" -L"$W/plain" -lland -Wl,-rpath,"$PWD/$W/plain" -o "$W/plain/host"
if readelf -dW "$W/libland.so" | grep -q STATIC_TLS; then
    echo "bench/tls.sh: libland.so takes static TLS" >&2; exit 1
fi
instr() { # instructions of one run: program, landings
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
N=100000
per() { # instructions per landing of a program
    local a b
    a=$(TALLY_PROFILE=off instr "$1" 0)
    b=$(TALLY_PROFILE=off instr "$1" $N)
    python3 -c "print(f'{($b - $a) / $N:.1f}')"
}
echo "| where the landing's code is | runtime archive | instructions per landing: plain | tally | the runtime's share |"
echo "|---|---|---|---|---|"
for which in exe host; do
    p=$(per "$W/plain/$which")
    t=$(per "$W/$which")
    d=$(python3 -c "print(f'{$t - $p:.1f}')")
    case $which in
        exe) echo "| executable | libtally_rt.a (initial-exec, made local-exec) | $p | $t | $d |" ;;
        host) echo "| shared object | libtally_rt_dyn.a (general-dynamic) | $p | $t | $d |" ;;
    esac
done
