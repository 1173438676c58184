// RUN: presk launches %s --entry f | filecheck %s --check-prefix=BEFORE
// RUN: presk launches %s --entry f --pass-pipeline='builtin.module(psk-mul-one, dce)' | filecheck %s --check-prefix=AFTER
// RUN: presk run %s --entry f --pass-pipeline='builtin.module(psk-mul-one, dce)' | filecheck %s --check-prefix=VALUES
//
// `presk` runs the pass on the PSK-Core program before fusing and lowering it:
// the product by 1.0 is gone, so @f launches nothing and returns its argument.

// BEFORE: | f | 1 | 1 | 0 % |
// AFTER:  | f | 0 | 0 | 0 % |
// VALUES:      @f (numpy f64):
// VALUES-NEXT:   result 0: tensor[batch: 4, embed: 8]

!T = !psk_core.tensor<[batch: 4, embed: 8]>
func.func @f(%x: !T) -> !T {
  %c = psk_core.constant 1.0 : !psk_core.real
  %y = psk_core.mul %x, %c : !T
  func.return %y : !T
}
