// RUN: presk-opt %s | presk-opt | filecheck %s
//
// Round trip of psk_core.zeros_like (kept apart from ops.mlir).
//
// Dialect bug: ZerosLikeOp reuses ElementwiseUnaryOp.print, which reads
// `self.operand`; ZerosLikeOp's operand is `template`, so printing raises
// AttributeError (presk-opt exits 70, "internal error"). Parsing and
// verifying work. When the printer is fixed this test passes unexpectedly
// (XPASS): delete the XFAIL line above.

!X = !psk_core.tensor<[batch: B, embed: D]>

func.func @zeros(%x: !X, %c: !psk_core.real, %p: !psk_core.record<w: !X, s: !psk_core.real>,
                 %t: !psk_core.tuple<!psk_core.real, !X>) -> !X {
  %0 = psk_core.zeros_like %x : !X
  %1 = psk_core.zeros_like %c : !psk_core.real
  %2 = psk_core.zeros_like %p : !psk_core.record<w: !X, s: !psk_core.real>
  %3 = psk_core.zeros_like %t : !psk_core.tuple<!psk_core.real, !X>
  func.return %0 : !X
}
// CHECK:      !X = !psk_core.tensor<[batch: B, embed: D]>
// CHECK-LABEL: func.func @zeros(
// CHECK-NEXT:    %0 = psk_core.zeros_like %x : !X
// CHECK-NEXT:    %1 = psk_core.zeros_like %c : !psk_core.real
// CHECK-NEXT:    %2 = psk_core.zeros_like %p : !psk_core.record<w: !X, s: !psk_core.real>
// CHECK-NEXT:    %3 = psk_core.zeros_like %t : !psk_core.tuple<!psk_core.real, !X>
// CHECK-NEXT:    func.return %0 : !X
