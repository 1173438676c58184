// RUN: presk-opt %s -p 'psk-egraph-opt{profile="%S/Inputs/roofline.json" report=true}' 2>%t.report | filecheck %s
// RUN: filecheck %s --check-prefix=REPORT < %t.report
// RUN: presk-opt %s -p 'psk-egraph-opt{profile="%S/Inputs/roofline.json" fusion=false}' | filecheck %s
// RUN: presk-opt %s -p psk-egraph-opt | filecheck %s --check-prefix=COUNTS

// (Σ aᵢ bᵢ) / s = Σ (aᵢ / s) bᵢ, priced by a profile's roofline (Inputs/roofline.json: 1e10 operations/s,
// 20 GB/s, 1 µs a launch): the division goes to the smallest of the three tensors it can act on.
// Operation counts price the placements alike and keep the first found, an operand.
!Q = !psk_core.tensor<[b: 2, s: 16, d: 4]>
!K = !psk_core.tensor<[b: 2, t: 16, d: 4]>
!S = !psk_core.tensor<[b: 2, s: 16, t: 16]>
!Qw = !psk_core.tensor<[b: 2, s: 4, d: 16]>
!Kw = !psk_core.tensor<[b: 2, t: 4, d: 16]>
!Sw = !psk_core.tensor<[b: 2, s: 4, t: 4]>
!R = !psk_core.real

// 128 queries against 512 scores: an operand is divided.
// CHECK-LABEL: func.func @long(%q: !Q, %k: !K, %r: !R) -> !S {
// CHECK-NEXT:    %{{.*}} = psk_core.div %{{q|k}}, %r
// CHECK-NEXT:    %{{.*}} = psk_core.ein
// CHECK-NEXT:    func.return
// COUNTS-LABEL: func.func @long(
// COUNTS-NEXT:    psk_core.div %{{q|k}}, %r
func.func @long(%q: !Q, %k: !K, %r: !R) -> !S {
  %0 = psk_core.ein %q[b, s, d], %k[b, t, d] : !S
  %1 = psk_core.div %0, %r : !S
  func.return %1 : !S
}

// 128 queries against 32 scores: the scores stay divided, as written.
// CHECK-LABEL: func.func @wide(%q: !Qw, %k: !Kw, %r: !R) -> !Sw {
// CHECK-NEXT:    %[[E:.*]] = psk_core.ein %q[b, s, d], %k[b, t, d] : !Sw
// CHECK-NEXT:    %{{.*}} = psk_core.div %[[E]], %r : !Sw
// CHECK-NEXT:    func.return
// COUNTS-LABEL: func.func @wide(
// COUNTS-NEXT:    psk_core.div %{{q|k}}, %r
func.func @wide(%q: !Qw, %k: !Kw, %r: !R) -> !Sw {
  %0 = psk_core.ein %q[b, s, d], %k[b, t, d] : !Sw
  %1 = psk_core.div %0, %r : !Sw
  func.return %1 : !Sw
}

// REPORT: @long: saturated, {{[0-9]+}} iterations, {{[0-9]+}} nodes, lets 2 -> 2, predicted (fused) 1.{{[0-9]}} us -> 1.{{[0-9]}} us
// REPORT: @wide: saturated, {{[0-9]+}} iterations, {{[0-9]+}} nodes, lets 2 -> 2, predicted (fused) 1.{{[0-9]}} us -> 1.{{[0-9]}} us
// REPORT: psk-egraph-opt: 1 of 2 functions changed, lets 4 -> 4, predicted (fused) {{.*}} us -> {{.*}} us, 0 stopped on a limit
