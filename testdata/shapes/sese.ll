; sese.ll - loops for SESE counters (--tally-sese=on) in shapes clang does not emit from C at
; -O2: a header entered from two blocks with different start values (the count needs a new
; header phi carrying the entry value), increments split over two blocks around a diamond, an
; i16 variable counting down with `sub nsw`, an exit taken before the increments (the phi is
; live there) and one after, a pointer walking down, and a variable that may wrap (no nsw/nuw:
; refused).
; Expected output: "sese 62 54 33 59 36", exit status 0.

target triple = "x86_64-pc-linux-gnu"

@fmt = private unnamed_addr constant [21 x i8] c"sese %d %d %d %d %d\0A\00"

declare i32 @printf(ptr, ...)

; Two entries: i starts at %x or at 2 * %x.
define internal i32 @entries(i32 %x, i32 %n, i1 %c) {
entry:
  br i1 %c, label %a, label %b
a:
  br label %head
b:
  %x2 = shl nsw i32 %x, 1
  br label %head
head:
  %i = phi i32 [ %x, %a ], [ %x2, %b ], [ %i2, %head ]
  %s = phi i32 [ 0, %a ], [ 1, %b ], [ %s2, %head ]
  %s2 = add i32 %s, 1
  %i2 = add nsw i32 %i, 3
  %go = icmp slt i32 %i2, %n
  br i1 %go, label %head, label %out
out:
  ret i32 %s2
}

; i += 1 before a diamond, i += 2 after it; the loop is also left from the header.
define internal i32 @diamond(i32 %n, i32 %m) {
entry:
  br label %head
head:
  %i = phi i32 [ 0, %entry ], [ %i3, %latch ]
  %s = phi i32 [ 0, %entry ], [ %s3, %latch ]
  %early = icmp sge i32 %i, %m
  br i1 %early, label %out, label %body
body:
  %i1 = add nsw i32 %i, 1
  %odd = and i32 %i1, 1
  %t = icmp eq i32 %odd, 0
  br i1 %t, label %even, label %oddb
even:
  %se = add i32 %s, 2
  br label %join
oddb:
  %so = add i32 %s, 1
  br label %join
join:
  %s3 = phi i32 [ %se, %even ], [ %so, %oddb ]
  %i3 = add nsw i32 %i1, 2
  br label %latch
latch:
  %go = icmp slt i32 %i3, %n
  br i1 %go, label %head, label %out
out:
  %r = phi i32 [ %s, %head ], [ %s3, %latch ]
  ret i32 %r
}

; An i16 counting down by 3.
define internal i32 @down(i16 %from) {
entry:
  br label %head
head:
  %k = phi i16 [ %from, %entry ], [ %k2, %head ]
  %c = phi i32 [ 0, %entry ], [ %c2, %head ]
  %c2 = add i32 %c, 1
  %k2 = sub nsw i16 %k, 3
  %go = icmp sgt i16 %k2, 0
  br i1 %go, label %head, label %out
out:
  ret i32 %c2
}

; No wrap flags: refused, counted as usual.
define internal i32 @wraps(i32 %from, i32 %to) {
entry:
  br label %head
head:
  %u = phi i32 [ %from, %entry ], [ %u2, %head ]
  %c = phi i32 [ 0, %entry ], [ %c2, %head ]
  %c2 = add i32 %c, 1
  %u2 = add i32 %u, 5
  %go = icmp ne i32 %u2, %to
  br i1 %go, label %head, label %out
out:
  ret i32 %c2
}

@buf = internal global [64 x i64] zeroinitializer

; A pointer walking down by 16 bytes (getelementptr inbounds i8 with a negative offset).
define internal i32 @walk(i64 %n) {
entry:
  %end = getelementptr inbounds i64, ptr @buf, i64 %n
  br label %head
head:
  %p = phi ptr [ %end, %entry ], [ %p2, %head ]
  %c = phi i32 [ 0, %entry ], [ %c2, %head ]
  store i64 1, ptr %p
  %c2 = add i32 %c, 1
  %p2 = getelementptr inbounds i8, ptr %p, i64 -16
  %go = icmp ugt ptr %p2, @buf
  br i1 %go, label %head, label %out
out:
  ret i32 %c2
}

define i32 @main() {
entry:
  %e1 = call i32 @entries(i32 1, i32 100, i1 true)
  %e2 = call i32 @entries(i32 10, i32 100, i1 false)
  %e3 = call i32 @entries(i32 200, i32 100, i1 true)
  %e12 = add i32 %e1, %e2
  %e = add i32 %e12, %e3
  %d1 = call i32 @diamond(i32 100, i32 1000)
  %d2 = call i32 @diamond(i32 1000, i32 6)
  %d = add i32 %d1, %d2
  %k = call i32 @down(i16 100)
  %k2 = call i32 @down(i16 -7)
  %kk = sub i32 %k, %k2
  %w = call i32 @wraps(i32 -100, i32 95)
  %w2 = call i32 @wraps(i32 0, i32 100)
  %ww = add i32 %w, %w2
  %p1 = call i32 @walk(i64 63)
  %p2 = call i32 @walk(i64 8)
  %pp = add i32 %p1, %p2
  call i32 (ptr, ...) @printf(ptr @fmt, i32 %e, i32 %d, i32 %kk, i32 %ww, i32 %pp)
  ret i32 0
}
