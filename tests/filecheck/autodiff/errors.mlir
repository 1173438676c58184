// RUN: presk-opt %s --split-input-file --verify-diagnostics -p psk-autodiff
//
// A derivative that cannot be taken is refused where it occurs (E3004),
// never given a zero; the typing rule of `grad` and `value_and_grad` (E2001, E2002).

!R = !psk_core.real

func.func @f(%a: !R, %b: !R) -> !R {
  // expected-error @+1 {{E3004: no derivative for psk_core.max: max gives real, not a tensor, and its cotangent is routed by psk_core.compare, whose masks are tensors}}
  %0 = psk_core.max %a, %b : !R
  func.return %0 : !R
}

func.func @g(%a: !R, %b: !R) -> !R {
  %0 = psk_core.grad @f(%a, %b) wrt [0] : !R
  func.return %0 : !R
}

// -----

// A real max that does not depend on %a: the gradient with respect to %a
// needs no rule for it, the one with respect to %b does.
!V = !psk_core.tensor<[n: 3]>
!R = !psk_core.real

func.func @f(%a: !V, %b: !R) -> !R {
  // expected-error @+1 {{E3004: no derivative for psk_core.max}}
  %0 = psk_core.max %b, %b : !R
  %1 = psk_core.mul %a, %0 : !V
  %2 = psk_core.sum %1 [n] : !R
  func.return %2 : !R
}

func.func @g(%a: !V, %b: !R) -> !R {
  %0 = psk_core.grad @f(%a, %b) wrt [0] : !V
  %1 = psk_core.grad @f(%a, %b) wrt [1] : !R
  func.return %1 : !R
}

// -----

!V = !psk_core.tensor<[n: 3]>
!R = !psk_core.real

func.func @f(%a: !V, %b: !V) -> !R {
  %0 = psk_core.max %b, %b : !V
  %1 = psk_core.mul %0, %a : !V
  %2 = psk_core.sum %1 [n] : !R
  func.return %2 : !R
}

func.func @g(%a: !V, %b: !V) -> !V {
  %0 = psk_core.grad @f(%a, %b) wrt [0] : !V
  func.return %0 : !V
}

// -----

// A fold's gradient runs its layers one by one: their count must be bound.
!Blocks = !psk_core.record<w: !psk_core.tensor<[layer: L, embed: 2]>>
!Block = !psk_core.record<w: !psk_core.tensor<[embed: 2]>>
!X = !psk_core.tensor<[embed: 2]>
!R = !psk_core.real

func.func @Block.apply(%p: !Block, %x: !X) -> !X {
  %w = psk_core.field %p["w"] : !X
  %0 = psk_core.mul %w, %x : !X
  func.return %0 : !X
}

func.func @f(%blocks: !Blocks, %x: !X) -> !R {
  // expected-error @+1 {{E3004: no derivative for psk_core.fold over 'L' layers: its gradient runs the layers one by one, so bind the layer count first (psk-bind)}}
  %0 = psk_core.fold @Block.apply(%blocks, %x) : !X
  %1 = psk_core.sum %0 [embed] : !R
  func.return %1 : !R
}

func.func @g(%blocks: !Blocks, %x: !X) -> !Blocks {
  %0 = psk_core.grad @f(%blocks, %x) wrt [0] : !Blocks
  func.return %0 : !Blocks
}

// -----

!V = !psk_core.tensor<[n: 3]>
!R = !psk_core.real

func.func @two(%a: !V) -> (!V, !R) {
  %0 = psk_core.sum %a [n] : !R
  func.return %a, %0 : !V, !R
}

func.func @f(%a: !V) -> !R {
  // expected-error @+1 {{E3004: no derivative for a call of @two, which returns 2 values; psk-autodiff differentiates calls of one result}}
  %0, %1 = func.call @two(%a) : (!V) -> (!V, !R)
  func.return %1 : !R
}

func.func @g(%a: !V) -> !V {
  %0 = psk_core.grad @f(%a) wrt [0] : !V
  func.return %0 : !V
}

// -----

!R = !psk_core.real

// The verifier refuses recursion before the pass runs; recursive_unverified.mlir shows the pass's own refusal.
func.func @forever(%x: !R) -> !R {
  // expected-error @+1 {{E2001: @forever calls itself: PSK-Core functions do not recurse (a loop is a psk_core.fold)}}
  %y = func.call @forever(%x) : (!R) -> !R
  func.return %y : !R
}

func.func @g(%x: !R) -> !R {
  %0 = psk_core.grad @forever(%x) wrt [0] : !R
  func.return %0 : !R
}

// -----

// The typing rule of grad.
!V = !psk_core.tensor<[n: 3]>
!R = !psk_core.real

func.func @f(%a: !V) -> !R {
  %0 = psk_core.sum %a [n] : !R
  func.return %0 : !R
}

func.func @g(%a: !V) -> !R {
  // expected-error @+1 {{E2001: result type is real, but the typing rule gives tensor[n: 3]}}
  %0 = psk_core.grad @f(%a) wrt [0] : !R
  func.return %0 : !R
}

// -----

!V = !psk_core.tensor<[n: 3]>
!R = !psk_core.real

func.func @f(%a: !V) -> !R {
  %0 = psk_core.sum %a [n] : !R
  func.return %0 : !R
}

func.func @g(%a: !V) -> !V {
  // expected-error @+1 {{E2001: 'grad' wrt 1, but @f is given 1 arguments}}
  %0 = psk_core.grad @f(%a) wrt [1] : !V
  func.return %0 : !V
}

// -----

!V = !psk_core.tensor<[n: 3]>
!R = !psk_core.real

func.func @f(%a: !V, %b: !V) -> !R {
  %0 = psk_core.sum %a [n] : !R
  func.return %0 : !R
}

func.func @g(%a: !V) -> !psk_core.tuple<!V, !V> {
  // expected-error @+1 {{E2001: 'grad' names an argument twice: wrt [0, 0]}}
  %0 = psk_core.grad @f(%a, %a) wrt [0, 0] : !psk_core.tuple<!V, !V>
  func.return %0 : !psk_core.tuple<!V, !V>
}

// -----

!V = !psk_core.tensor<[n: 3]>
!R = !psk_core.real

func.func @f(%a: !V) -> !R {
  %0 = psk_core.sum %a [n] : !R
  func.return %0 : !R
}

func.func @g(%a: !V) -> !V {
  // expected-error @+1 {{E2001: 'grad' needs at least one argument to differentiate with respect to}}
  %0 = psk_core.grad @f(%a) wrt [] : !V
  func.return %0 : !V
}

// -----

!I = !psk_core.index<[n: 3], 5>
!R = !psk_core.real

func.func @f(%i: !I, %x: !R) -> !R {
  func.return %x : !R
}

func.func @g(%i: !I, %x: !R) -> !I {
  // expected-error @+1 {{E2001: 'value_and_grad' wrt 0, an index tensor (index[n: 3] < 5), which has no derivative}}
  %0 = psk_core.value_and_grad @f(%i, %x) wrt [0] : !I
  func.return %0 : !I
}

// -----

!P = !psk_core.record<w: !psk_core.tensor<[n: 3]>, ids: !psk_core.tuple<!psk_core.index<[n: 3], 5>>>
!R = !psk_core.real

func.func @f(%p: !P) -> !R {
  %w = psk_core.field %p["w"] : !psk_core.tensor<[n: 3]>
  %0 = psk_core.sum %w [n] : !R
  func.return %0 : !R
}

func.func @g(%p: !P) -> !P {
  // expected-error @+1 {{E2001: 'grad' wrt 0, whose leaf ids.0 is an index tensor, which has no derivative}}
  %0 = psk_core.grad @f(%p) wrt [0] : !P
  func.return %0 : !P
}

// -----

!V = !psk_core.tensor<[n: 3]>

func.func @f(%a: !V) -> !V {
  func.return %a : !V
}

func.func @g(%a: !V) -> !V {
  // expected-error @+1 {{E2001: 'grad' differentiates a function returning one real; @f returns (tensor[n: 3])}}
  %0 = psk_core.grad @f(%a) wrt [0] : !V
  func.return %0 : !V
}

// -----

!V = !psk_core.tensor<[n: 3]>
!W = !psk_core.tensor<[n: 4]>
!R = !psk_core.real

func.func @f(%a: !V) -> !R {
  %0 = psk_core.sum %a [n] : !R
  func.return %0 : !R
}

func.func @g(%a: !W) -> !W {
  // expected-error @+1 {{E2001: 'grad' calls @f with (tensor[n: 4]), but it takes (tensor[n: 3])}}
  %0 = psk_core.grad @f(%a) wrt [0] : !W
  func.return %0 : !W
}

// -----

!V = !psk_core.tensor<[n: 3]>

func.func @g(%a: !V) -> !V {
  // expected-error @+1 {{E2002: call to unknown function @nowhere}}
  %0 = psk_core.grad @nowhere(%a) wrt [0] : !V
  func.return %0 : !V
}
