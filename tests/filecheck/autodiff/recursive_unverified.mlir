// RUN: presk-opt %s --verify-diagnostics -p psk-autodiff --disable-verify
//
// Without verification, which refuses a recursive function first (psk_core/verify.mlir): psk-autodiff's own
// refusal, which guards modules built in Python.

!R = !psk_core.real

func.func @forever(%x: !R) -> !R {
  // expected-error @+1 {{E3003: psk-autodiff: @forever calls itself; a recursive function is not differentiated}}
  %y = func.call @forever(%x) : (!R) -> !R
  func.return %y : !R
}

func.func @g(%x: !R) -> !R {
  %0 = psk_core.grad @forever(%x) wrt [0] : !R
  func.return %0 : !R
}
