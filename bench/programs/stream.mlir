// A stream reference for AdamW's traffic: read four tensors of N values and
// write three (the bytes one fused AdamW step must move), one addition per
// output. psk-fuse makes three groups (each output is a result) and
// psk-fuse-launches merges their launches into one kernel (each shares an
// input with another), so the kernel moves exactly 4 reads and 3 writes.
!P = !psk_core.tensor<[n: N]>
!T = !psk_core.tuple<!P, !P, !P>

func.func @stream(%a: !P, %b: !P, %c: !P, %d: !P) -> !T {
  %0 = psk_core.add %a, %b : !P
  %1 = psk_core.add %c, %d : !P
  %2 = psk_core.add %a, %d : !P
  %3 = psk_core.tuple %0, %1, %2 : !T
  func.return %3 : !T
}
