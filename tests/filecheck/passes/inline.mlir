// RUN: presk-opt %s -p psk-inline | filecheck %s
// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-inline)' | filecheck %s

!X = !psk_core.tensor<[batch: B, embed: 4]>

func.func @double(%x: !X) -> !X {
  %y = psk_core.add %x, %x : !X
  func.return %y : !X
}

func.func @quad(%x: !X) -> !X {
  %a = func.call @double(%x) : (!X) -> !X
  %b = func.call @double(%a) : (!X) -> !X
  func.return %b : !X
}

// The callee stays; every call is replaced by its body, calls within inlined
// bodies too.
// CHECK:      func.func @double(%x: !X) -> !X {
// CHECK:      func.func @quad(%x: !X) -> !X {
// CHECK-NEXT:   %{{.*}} = psk_core.add %x, %x : !X
// CHECK-NEXT:   %[[B:.*]] = psk_core.add %{{.*}}, %{{.*}} : !X
// CHECK-NEXT:   func.return %[[B]] : !X
// CHECK-NOT:  func.call
