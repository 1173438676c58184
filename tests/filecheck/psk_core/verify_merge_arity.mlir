// RUN: presk-opt %s --split-input-file --verify-diagnostics
//
// psk_core.merge written in the generic form with a `merged` property that
// does not name exactly two axes.
//
// Dialect bug: `merged` is declared `prop_def(ArrayAttr[StringAttr])` with no
// length constraint, and MergeOp.expected_type (and into()/print) unpack it
// as `first, second = ...`; with one or three names that raises ValueError
// inside the verifier, so presk-opt reports "internal error: ValueError"
// (exit 70) instead of an E2001. When the verifier refuses it with a
// VerifyException this test passes unexpectedly (XPASS): delete the XFAIL
// line above (and, if wanted, make the expected text more precise).

func.func @merge_one_name(%x: !psk_core.tensor<[a: 2, b: 3]>) {
  // expected-error @+1 {{E2001: }}
  %0 = "psk_core.merge"(%x) <{merged = ["a"]}> : (!psk_core.tensor<[a: 2, b: 3]>) -> !psk_core.tensor<[c: 6]>
  func.return
}

// -----

func.func @merge_three_names(%x: !psk_core.tensor<[a: 2, b: 3, c: 4]>) {
  // expected-error @+1 {{E2001: }}
  %0 = "psk_core.merge"(%x) <{merged = ["a", "b", "c"]}> : (!psk_core.tensor<[a: 2, b: 3, c: 4]>) -> !psk_core.tensor<[m: 24]>
  func.return
}
