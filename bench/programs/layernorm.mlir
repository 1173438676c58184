// Layer normalization over the last axis of [rows: R, embed: E], for benchmarks.
!X = !psk_core.tensor<[rows: R, embed: E]>
!S = !psk_core.tensor<[rows: R]>
!E = !psk_core.tensor<[embed: E]>
!R = !psk_core.real

func.func @layernorm(%x: !X, %g: !E {psk_core.init = "ones"}, %b: !E {psk_core.init = "zeros"}) -> !X {
  %0 = psk_core.constant 1.0e-05 : !R
  %1 = psk_core.mean %x [embed] : !S
  %2 = psk_core.sub %x, %1 : !X
  %3 = psk_core.pow %2, 2 : !X
  %4 = psk_core.mean %3 [embed] : !S
  %5 = psk_core.add %4, %0 : !S
  %6 = psk_core.sqrt %5 : !S
  %7 = psk_core.div %2, %6 : !X
  %8 = psk_core.mul %7, %g : !X
  %9 = psk_core.add %8, %b : !X
  func.return %9 : !X
}
