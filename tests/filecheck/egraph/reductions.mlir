// RUN: presk-opt %s -p psk-egraph-opt | filecheck %s

// A real factor, a real divisor and a negation move out of sum and mean: applied once to the
// reduced tensor instead of to every element of its operand.
!X = !psk_core.tensor<[batch: B, embed: 4]>
!V = !psk_core.tensor<[batch: B]>
!R = !psk_core.real

// CHECK-LABEL: func.func @scaled_sum(%x: !X, %s: !R) -> !V {
// CHECK-NEXT:    %[[S:.*]] = psk_core.sum %x [embed] : !V
// CHECK-NEXT:    %[[M:.*]] = psk_core.mul %{{.*}}, %{{.*}} : !V
// CHECK-NEXT:    func.return %[[M]] : !V
func.func @scaled_sum(%x: !X, %s: !R) -> !V {
  %0 = psk_core.mul %s, %x : !X
  %1 = psk_core.sum %0 [embed] : !V
  func.return %1 : !V
}

// CHECK-LABEL: func.func @negated_mean_over_a_divisor(%x: !X, %s: !R) -> !V {
// CHECK-NEXT:    %{{.*}} = psk_core.mean %x [embed] : !V
// CHECK-DAG:     psk_core.neg %{{.*}} : !V
// CHECK-DAG:     psk_core.div %{{.*}}, %s : !V
// CHECK-NOT:     : !X
// CHECK:         func.return
func.func @negated_mean_over_a_divisor(%x: !X, %s: !R) -> !V {
  %0 = psk_core.neg %x : !X
  %1 = psk_core.div %0, %s : !X
  %2 = psk_core.mean %1 [embed] : !V
  func.return %2 : !V
}

// A tensor factor does not move: it varies along the reduced axis.
// CHECK-LABEL: func.func @tensor_factor(%x: !X, %y: !X) -> !V {
// CHECK-NEXT:    %[[P:.*]] = psk_core.mul %{{x|y}}, %{{x|y}} : !X
// CHECK-NEXT:    %[[S:.*]] = psk_core.sum %[[P]] [embed] : !V
// CHECK-NEXT:    func.return %[[S]] : !V
func.func @tensor_factor(%x: !X, %y: !X) -> !V {
  %0 = psk_core.mul %x, %y : !X
  %1 = psk_core.sum %0 [embed] : !V
  func.return %1 : !V
}
