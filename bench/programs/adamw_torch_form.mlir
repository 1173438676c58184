// AdamW over one flat tensor of N values in PyTorch's formulation
// (torch/optim/adamw.py, _single_tensor_adamw): the decay and the bias
// corrections are scalars computed once, so each element costs one square
// root and one division, as in torch's fused kernel:
//   p' = p (1 - lr wd) - (lr / (1 - b1t)) m' / (sqrt(v') / sqrt(1 - b2t) + eps)
// bench/programs/adamw.mlir is the corpus's formulation (three divisions).
!P = !psk_core.tensor<[n: N]>
!R = !psk_core.real
!Adam = !psk_core.tuple<!P, !P, !P>

func.func @adamw(%params: !P, %grads: !P, %m: !P, %v: !P {psk_core.init = "positive"},
                 %b1t: !R {psk_core.init = "zeros"}, %b2t: !R {psk_core.init = "zeros"}, %lr: !R) -> !Adam {
  %one = psk_core.constant 1.0 : !R
  %b1 = psk_core.constant 0.9 : !R
  %b2 = psk_core.constant 0.999 : !R
  %eps = psk_core.constant 1.0e-08 : !R
  %wd = psk_core.constant 0.01 : !R
  %c1 = psk_core.sub %one, %b1 : !R
  %c2 = psk_core.sub %one, %b2 : !R
  %bc1 = psk_core.sub %one, %b1t : !R
  %bc2 = psk_core.sub %one, %b2t : !R
  %step = psk_core.div %lr, %bc1 : !R
  %rbc2 = psk_core.sqrt %bc2 : !R
  %lrwd = psk_core.mul %lr, %wd : !R
  %decay = psk_core.sub %one, %lrwd : !R
  %0 = psk_core.mul %m, %b1 : !P
  %1 = psk_core.mul %grads, %c1 : !P
  %m2 = psk_core.add %0, %1 : !P
  %2 = psk_core.mul %v, %b2 : !P
  %3 = psk_core.mul %grads, %grads : !P
  %4 = psk_core.mul %3, %c2 : !P
  %v2 = psk_core.add %2, %4 : !P
  %5 = psk_core.sqrt %v2 : !P
  %6 = psk_core.div %5, %rbc2 : !P
  %denom = psk_core.add %6, %eps : !P
  %7 = psk_core.mul %params, %decay : !P
  %8 = psk_core.mul %m2, %step : !P
  %9 = psk_core.div %8, %denom : !P
  %p2 = psk_core.sub %7, %9 : !P
  %r = psk_core.tuple %p2, %m2, %v2 : !Adam
  func.return %r : !Adam
}
