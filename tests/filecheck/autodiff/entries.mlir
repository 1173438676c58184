// RUN: presk-opt %s -p 'psk-autodiff{entries=train}' | filecheck %s
// RUN: presk-opt %s -p psk-autodiff | filecheck %s --check-prefix=ALL
// RUN: presk dump %s --entry train | filecheck %s
// RUN: presk run %s --entry train | filecheck %s --check-prefix=OUT

// Two requests: `train` reaches one through a call, `other` holds the other.
// With entries=train only the first is expanded (loss.fwd, loss.bwd) and
// `other` keeps its request; without entries both are. `presk dump` and
// `presk run` on `--entry train` differentiate the same way, so `other`
// costs them nothing.

!X = !psk_core.tensor<[n: 3]>
!R = !psk_core.real

func.func @loss(%x: !X {psk_core.init = "ones"}) -> !R {
  %0 = psk_core.mul %x, %x : !X
  %1 = psk_core.sum %0 [n] : !R
  func.return %1 : !R
}

func.func @square(%x: !X) -> !R {
  %0 = psk_core.pow %x, 3 : !X
  %1 = psk_core.sum %0 [n] : !R
  func.return %1 : !R
}

func.func @gradient(%x: !X) -> !X {
  %0 = psk_core.grad @loss(%x) wrt [0] : !X
  func.return %0 : !X
}

func.func @train(%x: !X {psk_core.init = "ones"}) -> !X {
  %0 = func.call @gradient(%x) : (!X) -> !X
  func.return %0 : !X
}

func.func @other(%x: !X) -> !X {
  %0 = psk_core.grad @square(%x) wrt [0] : !X
  func.return %0 : !X
}

// CHECK:      func.func @other(
// CHECK-NEXT:   psk_core.grad @square(
// CHECK:      func.func @loss.fwd(
// CHECK:      func.func @loss.bwd(
// CHECK-NOT:  @square.fwd

// ALL:        func.func @loss.fwd(
// ALL:        func.func @square.fwd(

// OUT:      @train (numpy f64):
// OUT-NEXT:   result 0: tensor[n: 3]
// OUT-NEXT:     shape (3,)  min 2  max 2  mean 2
