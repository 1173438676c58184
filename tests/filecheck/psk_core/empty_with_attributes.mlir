// RUN: presk-opt %s | presk-opt | filecheck %s

// An op with no operands written still takes extra attributes before its type.
func.func @empty() -> !psk_core.tuple<> {
  %0 = "psk_core.tuple"() {k = 1 : i64} : () -> !psk_core.tuple<>
  %1 = "psk_core.record"() {k = 2 : i64} : () -> !psk_core.record<>
  func.return %0 : !psk_core.tuple<>
}

// CHECK:      %0 = psk_core.tuple {k = 1 : i64} : !psk_core.tuple<>
// CHECK-NEXT: %1 = psk_core.record {k = 2 : i64} : !psk_core.record<>
