// Softmax along the last axis of a [rows: R, cols: C] matrix, for benchmarks.
!X = !psk_core.tensor<[rows: R, cols: C]>

func.func @softmax(%x: !X) -> !X {
  %0 = psk_core.softmax %x [cols] : !X
  func.return %0 : !X
}
