; Induction variables only ScalarEvolution finds (`--tally-sese`, crates/llvm/src/sese.rs): an
; i64 variable advanced through a 32-bit `add nsw` and a sign extension (a widened variable: no
; chain of constant additions, no no-wrap flag on the recurrence, but its values are bounded by
; its incoming values' ranges). Refused, no counter: the same counting down by 3 from a
; sign-extended start with two exits (ScalarEvolution does not see a recurrence there), and a
; variable advanced in both arms of a diamond and merged by a phi (nor there). Each loop runs
; zero, one and many times. Every count must equal edges-naive's.
target triple = "x86_64-pc-linux-gnu"

@data = global [64 x i32] zeroinitializer

define internal i64 @widened(i32 %n) noinline {
entry:
  %g = icmp sgt i32 %n, 0
  br i1 %g, label %loop, label %done
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %s = phi i64 [ 0, %entry ], [ %s2, %loop ]
  %t = trunc i64 %i to i32
  %t2 = add nsw i32 %t, 2
  %next = sext i32 %t2 to i64
  %m = and i64 %i, 63
  %p = getelementptr inbounds [64 x i32], ptr @data, i64 0, i64 %m
  %v = load i32, ptr %p
  %vv = sext i32 %v to i64
  %s2 = add i64 %s, %vv
  %more = icmp slt i32 %t2, %n
  br i1 %more, label %loop, label %done
done:
  %r = phi i64 [ 0, %entry ], [ %s2, %loop ]
  ret i64 %r
}

define internal i64 @widened_down(i32 %n) noinline {
entry:
  %g = icmp sgt i32 %n, 0
  %start = sext i32 %n to i64
  br i1 %g, label %loop, label %done
loop:
  %i = phi i64 [ %start, %entry ], [ %next, %body ]
  %s = phi i64 [ 1, %entry ], [ %s2, %body ]
  %m = and i64 %i, 63
  %p = getelementptr inbounds [64 x i32], ptr @data, i64 0, i64 %m
  %v = load i32, ptr %p
  %odd = and i32 %v, 1
  %c = icmp eq i32 %odd, 0
  br i1 %c, label %body, label %done
body:
  %t = trunc i64 %i to i32
  %t2 = add nsw i32 %t, -3
  %next = sext i32 %t2 to i64
  %vv = sext i32 %v to i64
  %s2 = mul i64 %s, %vv
  %more = icmp sgt i32 %t2, 0
  br i1 %more, label %loop, label %done
done:
  %r = phi i64 [ 0, %entry ], [ %s, %loop ], [ %s2, %body ]
  ret i64 %r
}

define internal i64 @diamond(i64 %n) noinline {
entry:
  %g = icmp sgt i64 %n, 0
  br i1 %g, label %loop, label %done
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %join ]
  %s = phi i64 [ 0, %entry ], [ %s2, %join ]
  %m = and i64 %i, 63
  %p = getelementptr inbounds [64 x i32], ptr @data, i64 0, i64 %m
  %v = load i32, ptr %p
  %c = icmp sgt i32 %v, 2
  br i1 %c, label %a, label %b
a:
  %ia = add nsw i64 %i, 3
  %sa = add i64 %s, 1
  br label %join
b:
  %ib = add nsw i64 %i, 3
  %sb = sub i64 %s, 1
  br label %join
join:
  %next = phi i64 [ %ia, %a ], [ %ib, %b ]
  %s2 = phi i64 [ %sa, %a ], [ %sb, %b ]
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  %r = phi i64 [ 0, %entry ], [ %s2, %join ]
  ret i64 %r
}

define i32 @main() {
entry:
  br label %fill
fill:
  %k = phi i64 [ 0, %entry ], [ %k2, %fill ]
  %p = getelementptr inbounds [64 x i32], ptr @data, i64 0, i64 %k
  %k32 = trunc i64 %k to i32
  %x = mul i32 %k32, 7
  %y = urem i32 %x, 5
  store i32 %y, ptr %p
  %k2 = add nuw nsw i64 %k, 1
  %kd = icmp eq i64 %k2, 64
  br i1 %kd, label %rounds, label %fill
rounds:
  %r = phi i32 [ 0, %fill ], [ %r2, %rounds ]
  %acc = phi i64 [ 0, %fill ], [ %acc4, %rounds ]
  %n = mul i32 %r, 13
  %a1 = call i64 @widened(i32 %n)
  %a2 = call i64 @widened_down(i32 %n)
  %n64 = sext i32 %n to i64
  %a3 = call i64 @diamond(i64 %n64)
  %acc1 = add i64 %acc, %a1
  %acc2 = add i64 %acc1, %a2
  %acc4 = add i64 %acc2, %a3
  %r2 = add nuw nsw i32 %r, 1
  %rd = icmp eq i32 %r2, 12
  br i1 %rd, label %out, label %rounds
out:
  %lo = trunc i64 %acc4 to i32
  %z = and i32 %lo, 0
  ret i32 %z
}
