// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-fuse)' | filecheck %s
// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-fuse{max-nodes=1})' | filecheck %s --check-prefix=ONE
//
// A parameter tree: an elementwise chain over a record is one group of the
// record's type, mapped over the leaves (one launch per leaf for the whole
// chain). Reals broadcast into every leaf. A field read of the result is a
// view, not a launch, so it stays outside.

!W = !psk_core.tensor<[rows: 4, cols: 3]>
!E = !psk_core.tensor<[cols: 3]>
!P = !psk_core.record<w: !W, b: !E>
!R = !psk_core.real

func.func @sgd(%p: !P, %g: !P, %lr: !R) -> (!P, !W) {
  %a = psk_core.mul %g, %lr : !P
  %b = psk_core.tanh %a : !P
  %c = psk_core.sub %p, %b : !P
  %d = psk_core.max %c, %p : !P
  %w = psk_core.field %d["w"] : !W
  func.return %d, %w : !P, !W
}

// CHECK-LABEL: func.func @sgd(%p: !P, %g: !P, %lr: !R) -> (!P, !W) {
// CHECK-NEXT:    %d = psk_realize.group "sgd/%d" : !P {
// CHECK-NEXT:      %a = psk_core.mul %g, %lr : !P
// CHECK-NEXT:      %b = psk_core.tanh %a : !P
// CHECK-NEXT:      %c = psk_core.sub %p, %b : !P
// CHECK-NEXT:      %d = psk_core.max %c, %p : !P
// CHECK-NEXT:      psk_realize.yield %d : !P
// CHECK-NEXT:    }
// CHECK-NEXT:    %w = psk_core.field %d["w"] : !W
// CHECK-NEXT:    func.return %d, %w : !P, !W

// With max-nodes=1 every primitive launches by itself, each a group of one.
// ONE-LABEL: func.func @sgd(
// ONE-NEXT:    %a = psk_realize.group "sgd/%a" : !P {
// ONE-NEXT:      %a = psk_core.mul %g, %lr : !P
// ONE-NEXT:      psk_realize.yield %a : !P
// ONE-NEXT:    }
// ONE-NEXT:    %b = psk_realize.group "sgd/%b" : !P {
// ONE-NEXT:      %b = psk_core.tanh %a : !P
// ONE-NEXT:      psk_realize.yield %b : !P
// ONE-NEXT:    }
// ONE-NEXT:    %c = psk_realize.group "sgd/%c" : !P {
// ONE-NEXT:      %c = psk_core.sub %p, %b : !P
// ONE-NEXT:      psk_realize.yield %c : !P
// ONE-NEXT:    }
// ONE-NEXT:    %d = psk_realize.group "sgd/%d" : !P {
// ONE-NEXT:      %d = psk_core.max %c, %p : !P
// ONE-NEXT:      psk_realize.yield %d : !P
// ONE-NEXT:    }
