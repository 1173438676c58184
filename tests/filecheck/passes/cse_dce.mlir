// RUN: presk-opt %s -p cse,dce | filecheck %s
// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-inline,cse,dce)' | filecheck %s --check-prefix=INLINED

// xDSL's cse and dce work on PSK-Core: its primitives are Pure.
!X = !psk_core.tensor<[batch: B, embed: 4]>

func.func @twice(%x: !X) -> !X {
  %a = psk_core.exp %x : !X
  %b = psk_core.exp %x : !X
  %unused = psk_core.tanh %x : !X
  %s = psk_core.add %a, %b : !X
  func.return %s : !X
}

func.func @caller(%x: !X) -> !X {
  %y = func.call @twice(%x) : (!X) -> !X
  %z = func.call @twice(%x) : (!X) -> !X
  %w = psk_core.mul %y, %z : !X
  func.return %w : !X
}

// CHECK-LABEL: func.func @twice
// CHECK-NEXT:    %a = psk_core.exp %x : !X
// CHECK-NEXT:    %s = psk_core.add %a, %a : !X
// CHECK-NEXT:    func.return %s : !X

// After inlining, the two calls' bodies are one computation.
// INLINED-LABEL: func.func @caller
// INLINED-NEXT:    %a = psk_core.exp %x : !X
// INLINED-NEXT:    %s = psk_core.add %a, %a : !X
// INLINED-NEXT:    %w = psk_core.mul %s, %s : !X
// INLINED-NEXT:    func.return %w : !X
