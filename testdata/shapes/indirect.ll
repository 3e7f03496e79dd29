; indirect.ll - two indirectbr blocks sharing their targets, one with a duplicate destination.
; The four edges pick1->a, pick1->b, pick2->a, pick2->b (and the duplicate pick2->a) cannot be
; split and form a cycle, so no spanning tree can hold them all: edge mode must count one of
; them with predecessor tags. Compiled with -O0 so that the shape survives.
; Expected output: "interp 186 / 913 / 1428", exit status 0.

target triple = "x86_64-pc-linux-gnu"

@fmt = private unnamed_addr constant [21 x i8] c"interp %d / %d / %d\0A\00"

define internal i32 @interp(i32 %n) {
entry:
  br label %head
head:
  %i = phi i32 [0, %entry], [%ia, %a], [%ib, %b]
  %acc = phi i32 [0, %entry], [%acca, %a], [%accb, %b]
  %more = icmp slt i32 %i, %n
  br i1 %more, label %sel, label %done
sel:
  %m3 = urem i32 %i, 3
  %first = icmp eq i32 %m3, 0
  br i1 %first, label %pick1, label %pick2
pick1:
  %r1 = and i32 %i, 1
  %z1 = icmp eq i32 %r1, 0
  %t1 = select i1 %z1, ptr blockaddress(@interp, %a), ptr blockaddress(@interp, %b)
  indirectbr ptr %t1, [label %a, label %b]
pick2:
  %r2 = and i32 %i, 2
  %z2 = icmp eq i32 %r2, 0
  %t2 = select i1 %z2, ptr blockaddress(@interp, %b), ptr blockaddress(@interp, %a)
  indirectbr ptr %t2, [label %a, label %b, label %a]
a:
  %src.a = phi i32 [1, %pick1], [2, %pick2], [2, %pick2]
  %acca = add i32 %acc, %src.a
  %ia = add i32 %i, 1
  br label %head
b:
  %src.b = phi i32 [10, %pick1], [20, %pick2]
  %accb = add i32 %acc, %src.b
  %ib = add i32 %i, 1
  br label %head
done:
  ret i32 %acc
}

declare i32 @printf(ptr, ...)

define i32 @main() {
entry:
  %x = call i32 @interp(i32 20)
  %y = call i32 @interp(i32 100)
  %z = call i32 @interp(i32 155)
  %p = call i32 (ptr, ...) @printf(ptr @fmt, i32 %x, i32 %y, i32 %z)
  ret i32 0
}
