// The example of docs/reference.md §4.19 (`grad` and `value_and_grad`): it
// parses, verifies and prints back, and runs after psk-autodiff.
//
// RUN: presk-opt %s | filecheck %s
// RUN: presk-opt %s | presk-opt | filecheck %s
// RUN: presk run %s --entry gradients --pass-pipeline='builtin.module(psk-autodiff)' --inputs %S/Inputs/reference_example.npz --print-values | filecheck %s --check-prefix=VALUES
//
// CHECK:      %g = psk_core.grad @loss(%p, %x) wrt [0] : !P
// CHECK-NEXT: %vg = psk_core.value_and_grad @loss(%p, %x) wrt [0, 1] : !psk_core.tuple<!psk_core.real, !psk_core.tuple<!P, !psk_core.tensor<[n: 3]>>>
//
// With w = x = 1 and s = 2: the value 6, the gradient w: x·s = 2, s: Σ w·x = 3, x: w·s = 2.
// VALUES:      0: 6.0
// VALUES-NEXT: 1.0.w: shape (3,) {{.*}}
// VALUES-NEXT: [2. 2. 2.]
// VALUES-NEXT: 1.0.s: 3.0
// VALUES-NEXT: 1.1: shape (3,) {{.*}}
// VALUES-NEXT: [2. 2. 2.]

!P = !psk_core.record<w: !psk_core.tensor<[n: 3]>, s: !psk_core.real>
func.func @loss(%p: !P, %x: !psk_core.tensor<[n: 3]>) -> !psk_core.real {
  %w = psk_core.field %p["w"] : !psk_core.tensor<[n: 3]>
  %s = psk_core.field %p["s"] : !psk_core.real
  %0 = psk_core.mul %w, %x : !psk_core.tensor<[n: 3]>
  %1 = psk_core.sum %0 [n] : !psk_core.real
  %2 = psk_core.mul %1, %s : !psk_core.real
  func.return %2 : !psk_core.real
}
func.func @gradients(%p: !P, %x: !psk_core.tensor<[n: 3]>) -> !psk_core.tuple<!psk_core.real, !psk_core.tuple<!P, !psk_core.tensor<[n: 3]>>> {
  %g = psk_core.grad @loss(%p, %x) wrt [0] : !P
  %vg = psk_core.value_and_grad @loss(%p, %x) wrt [0, 1] : !psk_core.tuple<!psk_core.real, !psk_core.tuple<!P, !psk_core.tensor<[n: 3]>>>
  func.return %vg : !psk_core.tuple<!psk_core.real, !psk_core.tuple<!P, !psk_core.tensor<[n: 3]>>>
}
