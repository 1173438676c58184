// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-fuse)' | filecheck %s
//
// pow n with n > 2 never joins a group: it expands to n - 1 products of its
// argument, which a fused expression would repeat. It is a group of one,
// and it cuts the chain on both sides. pow 1 and pow 2 join like any
// elementwise primitive.

!X = !psk_core.tensor<[rows: 4, cols: 3]>

func.func @powers(%x: !X) -> (!X, !X) {
  %a = psk_core.exp %x : !X
  %b = psk_core.pow %a, 3 : !X
  %c = psk_core.pow %b, 2 : !X
  %d = psk_core.pow %c, 1 : !X
  %e = psk_core.neg %d : !X
  %f = psk_core.pow %x, 4 : !X
  func.return %e, %f : !X, !X
}

// CHECK-LABEL: func.func @powers(%x: !X) -> (!X, !X) {
// CHECK-NEXT:    %a = psk_realize.group "powers/%a" : !X {
// CHECK-NEXT:      %a = psk_core.exp %x : !X
// CHECK-NEXT:      psk_realize.yield %a : !X
// CHECK-NEXT:    }
// CHECK-NEXT:    %b = psk_realize.group "powers/%b" : !X {
// CHECK-NEXT:      %b = psk_core.pow %a, 3 : !X
// CHECK-NEXT:      psk_realize.yield %b : !X
// CHECK-NEXT:    }
// CHECK-NEXT:    %e = psk_realize.group "powers/%e" : !X {
// CHECK-NEXT:      %c = psk_core.pow %b, 2 : !X
// CHECK-NEXT:      %d = psk_core.pow %c, 1 : !X
// CHECK-NEXT:      %e = psk_core.neg %d : !X
// CHECK-NEXT:      psk_realize.yield %e : !X
// CHECK-NEXT:    }
// CHECK-NEXT:    %f = psk_realize.group "powers/%f" : !X {
// CHECK-NEXT:      %f = psk_core.pow %x, 4 : !X
// CHECK-NEXT:      psk_realize.yield %f : !X
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %e, %f : !X, !X
