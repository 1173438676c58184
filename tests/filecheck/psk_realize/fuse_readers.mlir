// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-fuse)' | filecheck %s
//
// A value read by a reduction and by an elementwise op reaches memory for
// the reduction, so it is a root, never interior: the group that makes it
// ends there, and the elementwise reader starts another. The same holds for
// a softmax and a dot, which launch by themselves.

!X = !psk_core.tensor<[rows: 4, cols: 3]>
!S = !psk_core.tensor<[rows: 4]>
!W = !psk_core.tensor<[cols: 3, out: 2]>
!O = !psk_core.tensor<[rows: 4, out: 2]>

func.func @readers(%x: !X, %w: !W) -> (!X, !O) {
  %a = psk_core.exp %x : !X
  %b = psk_core.mul %a, %a : !X
  %m = psk_core.mean %b [cols] : !S
  %c = psk_core.sub %b, %m : !X
  %d = psk_core.tanh %c : !X
  %s = psk_core.softmax %d [cols] : !X
  %e = psk_core.add %d, %s : !X
  %y = psk_core.dot %e, %w : !O
  %z = psk_core.neg %e : !X
  func.return %z, %y : !X, !O
}

// CHECK-LABEL: func.func @readers(%x: !X, %w: !W) -> (!X, !O) {
// exp is interior (read only by the mul, twice); the mul is read by the mean and the sub.
// CHECK-NEXT:    %b = psk_realize.group "readers/%b" : !X {
// CHECK-NEXT:      %a = psk_core.exp %x : !X
// CHECK-NEXT:      %b = psk_core.mul %a, %a : !X
// CHECK-NEXT:      psk_realize.yield %b : !X
// CHECK-NEXT:    }
// CHECK-NEXT:    %m = psk_realize.nest "readers/%m" : !S {
// CHECK-NEXT:      %m = psk_core.mean %b [cols] : !S
// CHECK-NEXT:      psk_realize.yield %m : !S
// CHECK-NEXT:    }
// tanh is read by the softmax and the add: a root.
// CHECK-NEXT:    %d = psk_realize.group "readers/%d" : !X {
// CHECK-NEXT:      %c = psk_core.sub %b, %m : !X
// CHECK-NEXT:      %d = psk_core.tanh %c : !X
// CHECK-NEXT:      psk_realize.yield %d : !X
// CHECK-NEXT:    }
// CHECK-NEXT:    %s = psk_realize.nest "readers/%s" : !X {
// CHECK-NEXT:      %s = psk_core.softmax %d [cols] : !X
// CHECK-NEXT:      psk_realize.yield %s : !X
// CHECK-NEXT:    }
// The add is read by the dot and the neg: a root.
// CHECK-NEXT:    %e = psk_realize.group "readers/%e" : !X {
// CHECK-NEXT:      %e = psk_core.add %d, %s : !X
// CHECK-NEXT:      psk_realize.yield %e : !X
// CHECK-NEXT:    }
// CHECK-NEXT:    %y = psk_realize.nest "readers/%y" : !O {
// CHECK-NEXT:      %y = psk_core.dot %e, %w : !O
// CHECK-NEXT:      psk_realize.yield %y : !O
// CHECK-NEXT:    }
// CHECK-NEXT:    %z = psk_realize.group "readers/%z" : !X {
// CHECK-NEXT:      %z = psk_core.neg %e : !X
// CHECK-NEXT:      psk_realize.yield %z : !X
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %z, %y : !X, !O
