// AdamW over one flat parameter tensor of N values: the optimizer chain of
// corpus/nlp/gpt.mlir's adamw.step, on one leaf, for benchmarks.
!P = !psk_core.tensor<[n: N]>
!R = !psk_core.real
!Adam = !psk_core.tuple<!P, !P, !P>

func.func @adamw(%params: !P, %grads: !P, %m: !P, %v: !P {psk_core.init = "positive"},
                 %b1t: !R {psk_core.init = "zeros"}, %b2t: !R {psk_core.init = "zeros"}, %lr: !R) -> !Adam {
  %0 = psk_core.constant 1.0 : !R
  %1 = psk_core.constant 0.9 : !R
  %2 = psk_core.constant 0.999 : !R
  %3 = psk_core.constant 1.0e-08 : !R
  %4 = psk_core.constant 0.01 : !R
  %5 = psk_core.sub %0, %1 : !R
  %6 = psk_core.sub %0, %2 : !R
  %7 = psk_core.sub %0, %b1t : !R
  %8 = psk_core.sub %0, %b2t : !R
  %9 = psk_core.mul %m, %1 : !P
  %10 = psk_core.mul %grads, %5 : !P
  %11 = psk_core.add %9, %10 : !P
  %12 = psk_core.mul %v, %2 : !P
  %13 = psk_core.pow %grads, 2 : !P
  %14 = psk_core.mul %13, %6 : !P
  %15 = psk_core.add %12, %14 : !P
  %16 = psk_core.div %11, %7 : !P
  %17 = psk_core.div %15, %8 : !P
  %18 = psk_core.sqrt %17 : !P
  %19 = psk_core.add %18, %3 : !P
  %20 = psk_core.div %16, %19 : !P
  %21 = psk_core.mul %params, %4 : !P
  %22 = psk_core.add %20, %21 : !P
  %23 = psk_core.mul %22, %lr : !P
  %24 = psk_core.sub %params, %23 : !P
  %25 = psk_core.tuple %24, %11, %15 : !Adam
  func.return %25 : !Adam
}
