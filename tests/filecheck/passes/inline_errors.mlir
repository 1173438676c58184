// RUN: presk-opt %s --split-input-file --verify-diagnostics -p psk-inline --disable-verify
//
// Without verification: the verifier refuses a recursive function first (psk_core/verify.mlir), so the
// pass's own refusal, which guards modules built in Python, is reached only so.

!R = !psk_core.real

func.func @forever(%x: !R) -> !R {
  // expected-error @+1 {{E3003: psk-inline: @forever is recursive and cannot be inlined}}
  %y = func.call @forever(%x) : (!R) -> !R
  func.return %y : !R
}

// -----

!R = !psk_core.real

func.func private @external(!R) -> !R

func.func @caller(%x: !R) -> !R {
  // expected-error @+1 {{E3003: psk-inline: @external has no body to inline}}
  %y = func.call @external(%x) : (!R) -> !R
  func.return %y : !R
}
