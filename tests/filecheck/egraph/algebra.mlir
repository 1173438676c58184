// RUN: presk-opt %s -p psk-egraph-opt | filecheck %s
// RUN: presk-opt %s -p 'psk-egraph-opt{rules="algebra"}' | filecheck %s

// The algebra family: each function is rewritten to the cheapest form its rules reach.
!X = !psk_core.tensor<[batch: B, embed: 4]>
!V = !psk_core.tensor<[embed: 4]>
!R = !psk_core.real

// CHECK-LABEL: func.func @identities(%x: !X) -> !X {
// CHECK-NEXT:    func.return %x : !X
func.func @identities(%x: !X) -> !X {
  %zero = psk_core.constant 0.0 : !R
  %one = psk_core.constant 1.0 : !R
  %0 = psk_core.add %x, %zero : !X
  %1 = psk_core.sub %0, %zero : !X
  %2 = psk_core.mul %1, %one : !X
  %3 = psk_core.div %2, %one : !X
  %4 = psk_core.neg %3 : !X
  %5 = psk_core.neg %4 : !X
  %6 = psk_core.exp %5 : !X
  %7 = psk_core.log %6 : !X
  %8 = psk_core.pow %7, 1 : !X
  func.return %8 : !X
}

// x − x and x · 0 are zeros of x's type (exact over ℝ; with an inf or nan in x they are not).
// CHECK-LABEL: func.func @zeros(%x: !X, %y: !X) -> !X {
// CHECK-NEXT:    %{{.*}} = psk_core.zeros_like %{{x|y}} : !X
// CHECK-NEXT:    func.return
func.func @zeros(%x: !X, %y: !X) -> !X {
  %zero = psk_core.constant 0.0 : !R
  %0 = psk_core.sub %x, %x : !X
  %1 = psk_core.mul %y, %zero : !X
  %2 = psk_core.add %0, %1 : !X
  func.return %2 : !X
}

// x · x is a power (0.9 against 1); powers of powers multiply their exponents.
// CHECK-LABEL: func.func @powers(%x: !X) -> !X {
// CHECK-NEXT:    %[[P:.*]] = psk_core.pow %x, 6 : !X
// CHECK-NEXT:    func.return %[[P]] : !X
func.func @powers(%x: !X) -> !X {
  %0 = psk_core.mul %x, %x : !X
  %1 = psk_core.pow %0, 3 : !X
  func.return %1 : !X
}

// exp a · exp b = exp (a + b); √x · √x = x on the square root's domain.
// CHECK-LABEL: func.func @transcendental(%a: !X, %b: !X) -> !X {
// CHECK-NEXT:    %[[S:.*]] = psk_core.add %{{a|b}}, %{{a|b}} : !X
// CHECK-NEXT:    %[[E:.*]] = psk_core.exp %[[S]] : !X
// CHECK-NEXT:    func.return %[[E]] : !X
func.func @transcendental(%a: !X, %b: !X) -> !X {
  %0 = psk_core.exp %a : !X
  %1 = psk_core.exp %b : !X
  %2 = psk_core.mul %0, %1 : !X
  %3 = psk_core.sqrt %2 : !X
  %4 = psk_core.mul %3, %3 : !X
  func.return %4 : !X
}

// Distributivity, also through sub, and a · (b / c) = (a · b) / c: one product instead of two.
// CHECK-LABEL: func.func @distribute(%a: !X, %b: !X, %c: !X, %s: !R) -> !X {
// CHECK-COUNT-1: psk_core.mul
// CHECK-NOT:     psk_core.mul
// CHECK:         func.return
func.func @distribute(%a: !X, %b: !X, %c: !X, %s: !R) -> !X {
  %0 = psk_core.mul %a, %b : !X
  %1 = psk_core.mul %a, %c : !X
  %2 = psk_core.sub %0, %1 : !X
  %3 = psk_core.div %2, %s : !X
  func.return %3 : !X
}

// The guard: operand types equal, or a real against a tensor. (x + b) − b with x : [batch, embed]
// and b : [embed] broadcasts, so it is left alone, although (x + b) − b = x over ℝ.
// CHECK-LABEL: func.func @mixed_shapes(%x: !X, %b: !V) -> !X {
// CHECK-NEXT:    %{{.*}} = psk_core.add %x, %b : !X
// CHECK-NEXT:    %{{.*}} = psk_core.sub %{{.*}}, %b : !X
// CHECK-NEXT:    func.return
func.func @mixed_shapes(%x: !X, %b: !V) -> !X {
  %0 = psk_core.add %x, %b : !X
  %1 = psk_core.sub %0, %b : !X
  func.return %1 : !X
}
