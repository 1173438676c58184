// RUN: presk-opt %s -p psk-egraph-opt | filecheck %s

// The structural rules, on the shapes automatic differentiation produces.
!X = !psk_core.tensor<[batch: B, embed: 4]>
!V = !psk_core.tensor<[embed: 4]>
!R = !psk_core.real
!P = !psk_core.record<w: !X, b: !V>

// sum_to and broadcast_like to their operand's own type are the operand.
// CHECK-LABEL: func.func @identities(%x: !X, %t: !X) -> !X {
// CHECK-NEXT:    func.return %x : !X
func.func @identities(%x: !X, %t: !X) -> !X {
  %0 = psk_core.sum_to %x, %t : !X
  %1 = psk_core.broadcast_like %0, %t : !X
  %z = psk_core.zeros_like %t : !X
  %2 = psk_core.add %1, %z : !X
  func.return %2 : !X
}

// Not between different types: a real broadcast to a tensor stays a broadcast.
// CHECK-LABEL: func.func @widening(%s: !R, %t: !X) -> !X {
// CHECK-NEXT:    psk_core.broadcast_like %s, %t
func.func @widening(%s: !R, %t: !X) -> !X {
  %0 = psk_core.broadcast_like %s, %t : !X
  func.return %0 : !X
}

// sum_to of zeros is zeros of the template.
// CHECK-LABEL: func.func @sum_to_zeros(%x: !X, %b: !V) -> !V {
// CHECK-NEXT:    %[[Z:.*]] = psk_core.zeros_like %b : !V
// CHECK-NEXT:    func.return %[[Z]] : !V
func.func @sum_to_zeros(%x: !X, %b: !V) -> !V {
  %z = psk_core.zeros_like %x : !X
  %0 = psk_core.sum_to %z, %b : !V
  func.return %0 : !V
}

// field of set_field, of the same field or of another; proj of a tuple; field of a record.
// CHECK-LABEL: func.func @fields(%p: !P, %w: !X, %b: !V) -> !V {
// CHECK-NEXT:    %[[F:.*]] = psk_core.field %p["b"] : !V
// CHECK-NEXT:    %[[A:.*]] = psk_core.add %{{b|[0-9]+}}, %{{b|[0-9]+}} : !V
// CHECK-NEXT:    func.return %[[A]] : !V
func.func @fields(%p: !P, %w: !X, %b: !V) -> !V {
  %0 = psk_core.set_field %p["w"], %w : !P
  %1 = psk_core.field %0["b"] : !V
  %2 = psk_core.record w = %w, b = %b : !P
  %3 = psk_core.field %2["b"] : !V
  %4 = psk_core.tuple %1, %3 : !psk_core.tuple<!V, !V>
  %5 = psk_core.proj %4[1] : !V
  %6 = psk_core.add %1, %5 : !V
  func.return %6 : !V
}

// Two set_fields on zeros of one tree, summed: one record, no addition of zeros.
// CHECK-LABEL: func.func @adjoint_sweep(%p: !P, %gw: !X, %gb: !V) -> !P {
// CHECK-NEXT:    %[[R:.*]] = psk_core.record w = %gw, b = %gb : !P
// CHECK-NEXT:    func.return %[[R]] : !P
func.func @adjoint_sweep(%p: !P, %gw: !X, %gb: !V) -> !P {
  %z = psk_core.zeros_like %p : !P
  %0 = psk_core.set_field %z["w"], %gw : !P
  %1 = psk_core.set_field %z["b"], %gb : !P
  %2 = psk_core.add %0, %1 : !P
  func.return %2 : !P
}
