// C = A . B, square, for the layout benchmarks.
!A = !psk_core.tensor<[i: N, k: N]>
!B = !psk_core.tensor<[k2: N, j: N]>
!C = !psk_core.tensor<[i: N, j: N]>
func.func @gemm(%a: !A, %b: !B) -> !C {
  %0 = psk_core.dot %a, %b : !C
  func.return %0 : !C
}
