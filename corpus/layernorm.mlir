// Layer normalization over the embedding axis:
//   LN(x) = (x - mu) / sqrt(var + eps) * g + b,  mu and var means over embed.
// x - mu (%2) is read twice, by the variance and by the division, so fusion
// cannot keep it in registers: the reductions and that value cut the chain.

!X  = !psk_core.tensor<[batch: B, seq: T, embed: D]>
!S  = !psk_core.tensor<[batch: B, seq: T]>
!E  = !psk_core.tensor<[embed: D]>
!LN = !psk_core.record<g: !E, b: !E>
!R  = !psk_core.real

psk_core.const_dim @D = 16

func.func @LayerNorm.apply(%p: !LN, %x: !X) -> !X {
  %0 = psk_core.constant 1.0e-05 : !R
  %1 = psk_core.mean %x [embed] : !S
  %2 = psk_core.sub %x, %1 : !X
  %3 = psk_core.pow %2, 2 : !X
  %4 = psk_core.mean %3 [embed] : !S
  %5 = psk_core.add %4, %0 : !S
  %6 = psk_core.sqrt %5 : !S
  %7 = psk_core.div %2, %6 : !X
  %8 = psk_core.field %p["g"] : !E
  %9 = psk_core.field %p["b"] : !E
  %10 = psk_core.mul %7, %8 : !X
  %11 = psk_core.add %10, %9 : !X
  func.return %11 : !X
}
