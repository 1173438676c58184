// RUN: presk-opt %s -p psk-mul-one | filecheck %s
// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-mul-one, dce)' | filecheck %s --check-prefix=DCE
//
// The pass of this package (installed with `pip install -e .`):
// x * 1.0 -> x, with the constant on either side.

!T = !psk_core.tensor<[batch: 4, embed: 8]>

// CHECK-LABEL: func.func @f(%x: !T) -> !T {
// CHECK-NEXT:    %c = psk_core.constant 1.0 : !psk_core.real
// CHECK-NEXT:    func.return %x : !T
// DCE-LABEL:   func.func @f(%x: !T) -> !T {
// DCE-NEXT:      func.return %x : !T
func.func @f(%x: !T) -> !T {
  %c = psk_core.constant 1.0 : !psk_core.real
  %y = psk_core.mul %x, %c : !T
  %z = psk_core.mul %c, %y : !T
  func.return %z : !T
}

// Other constants are left alone.
// CHECK-LABEL: func.func @two(%x: !T) -> !T {
// CHECK-NEXT:    %c = psk_core.constant 2.0 : !psk_core.real
// CHECK-NEXT:    %y = psk_core.mul %x, %c : !T
// CHECK-NEXT:    func.return %y : !T
func.func @two(%x: !T) -> !T {
  %c = psk_core.constant 2.0 : !psk_core.real
  %y = psk_core.mul %x, %c : !T
  func.return %y : !T
}

// Scalars fold too, and a fold can expose another one.
// CHECK-LABEL: func.func @scalar(%r: !psk_core.real, %x: !T) -> !T {
// CHECK-NEXT:    %c = psk_core.constant 1.0 : !psk_core.real
// CHECK-NEXT:    %z = psk_core.mul %r, %x : !T
// CHECK-NEXT:    func.return %z : !T
func.func @scalar(%r: !psk_core.real, %x: !T) -> !T {
  %c = psk_core.constant 1.0 : !psk_core.real
  %y = psk_core.mul %r, %c : !psk_core.real
  %z = psk_core.mul %y, %x : !T
  func.return %z : !T
}
