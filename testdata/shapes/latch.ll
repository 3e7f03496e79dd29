; latch.ll - a loop latch whose only instruction is its branch, laid out before the blocks that
; reach it (as clang lays out zstd's HUF_decompress4X2_usingDTable_internal_fast_c_loop). The
; latch is both the single successor-side target of the inner loop's exit edge and the source
; of the outer back edge, so path mode's actions for both edges go before the same
; instruction; the exit edge's must come first whatever the edge ids say.
; Expected output: "nest 925 / 777", exit status 0.

target triple = "x86_64-pc-linux-gnu"

@fmt = private unnamed_addr constant [16 x i8] c"nest %ld / %ld\0A\00"

define internal i64 @nest(i64 %n) {
entry:
  br label %head
latch:
  br label %head
head:
  %i = phi i64 [ %n, %entry ], [ %i2, %latch ]
  %acc = phi i64 [ 0, %entry ], [ %acc2, %latch ]
  %go = icmp sgt i64 %i, 8
  br i1 %go, label %inner, label %done
inner:
  %k = phi i64 [ %i, %head ], [ %k2, %inner ]
  %a = phi i64 [ %acc, %head ], [ %acc2, %inner ]
  %m = and i64 %k, 5
  %acc2 = add i64 %a, %m
  %k2 = sub i64 %k, 3
  %i2 = sub i64 %i, 4
  %c = icmp sgt i64 %k2, %i2
  br i1 %c, label %inner, label %latch
done:
  ret i64 %acc
}

declare i32 @printf(ptr, ...)

define i32 @main() {
entry:
  br label %loop
loop:
  %j = phi i64 [ 0, %entry ], [ %j2, %loop ]
  %s = phi i64 [ 0, %entry ], [ %s2, %loop ]
  %t = phi i64 [ 0, %entry ], [ %t2, %loop ]
  %n = mul i64 %j, 37
  %r = call i64 @nest(i64 %n)
  %s2 = add i64 %s, %r
  %t2 = add i64 %t, %n
  %j2 = add i64 %j, 1
  %more = icmp slt i64 %j2, 7
  br i1 %more, label %loop, label %out
out:
  %p = call i32 (ptr, ...) @printf(ptr @fmt, i64 %s2, i64 %t2)
  ret i32 0
}
