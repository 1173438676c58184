// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-fuse)' | filecheck %s
//
// Reals are elementwise values too: a chain of reals is a group of type
// real (one loop nest of one point). A real read by a tensor op has another
// type than its reader, so it is a root; a real read by two groups is one.
// A reduction to a real is a nest like any other.

!X = !psk_core.tensor<[rows: 4, cols: 3]>
!R = !psk_core.real

func.func @scalars(%x: !X, %t: !R, %lr: !R) -> (!X, !R) {
  %one = psk_core.constant 1.0 : !R
  %a = psk_core.sub %one, %t : !R
  %b = psk_core.sqrt %a : !R
  %c = psk_core.div %lr, %b : !R
  %y = psk_core.mul %x, %c : !X
  %z = psk_core.exp %y : !X
  %s = psk_core.sum %z [rows, cols] : !R
  %u = psk_core.mul %s, %c : !R
  %v = psk_core.neg %u : !R
  func.return %z, %v : !X, !R
}

// CHECK-LABEL: func.func @scalars(%x: !X, %t: !R, %lr: !R) -> (!X, !R) {
// CHECK-NEXT:    %one = psk_core.constant 1.0 : !R
// CHECK-NEXT:    %c = psk_realize.group "scalars/%c" : !R {
// CHECK-NEXT:      %a = psk_core.sub %one, %t : !R
// CHECK-NEXT:      %b = psk_core.sqrt %a : !R
// CHECK-NEXT:      %c = psk_core.div %lr, %b : !R
// CHECK-NEXT:      psk_realize.yield %c : !R
// CHECK-NEXT:    }
// CHECK-NEXT:    %z = psk_realize.group "scalars/%z" : !X {
// CHECK-NEXT:      %y = psk_core.mul %x, %c : !X
// CHECK-NEXT:      %z = psk_core.exp %y : !X
// CHECK-NEXT:      psk_realize.yield %z : !X
// CHECK-NEXT:    }
// CHECK-NEXT:    %s = psk_realize.nest "scalars/%s" : !R {
// CHECK-NEXT:      %s = psk_core.sum %z [rows, cols] : !R
// CHECK-NEXT:      psk_realize.yield %s : !R
// CHECK-NEXT:    }
// CHECK-NEXT:    %v = psk_realize.group "scalars/%v" : !R {
// CHECK-NEXT:      %u = psk_core.mul %s, %c : !R
// CHECK-NEXT:      %v = psk_core.neg %u : !R
// CHECK-NEXT:      psk_realize.yield %v : !R
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %z, %v : !X, !R
