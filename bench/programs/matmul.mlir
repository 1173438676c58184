// C = A . B with three sizes of their own (M rows, K terms, J columns), for
// measuring one layout point at shapes the square gemm.mlir cannot give:
// operand 1's row stride (J) apart from the work (docs/cost.md §8.3, §8.4).
!A = !psk_core.tensor<[i: M, k: K]>
!B = !psk_core.tensor<[k2: K, j: J]>
!C = !psk_core.tensor<[i: M, j: J]>
func.func @matmul(%a: !A, %b: !B) -> !C {
  %0 = psk_core.dot %a, %b : !C
  func.return %0 : !C
}
