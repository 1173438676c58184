// RUN: not presk-opt %s -p 'psk-bind{dims="B=two"}' 2>&1 | filecheck %s --check-prefix=BADDIM
// RUN: not presk-opt %s -p 'psk-bind{consts="Q=3"}' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not presk-opt %s -p 'psk-bind{dims="D=3"}' 2>&1 | filecheck %s --check-prefix=CONSTASDIM
// RUN: not presk-opt %s -p 'psk-bind{consts="D=63"}' 2>&1 | filecheck %s --check-prefix=INDIVISIBLE
// RUN: not presk-opt %s -p 'psk-bind{dims="B=2,B=3"}' 2>&1 | filecheck %s --check-prefix=TWICE
// RUN: not presk-opt %s -p 'psk-bind{consts="D=1099511627776"}' 2>&1 | filecheck %s --check-prefix=HUGE

psk_core.const_dim @D = 64
psk_core.const_dim @HD = "D / 2"
psk_core.const_dim @W = "D * HD"

func.func @f(%x: !psk_core.tensor<[batch: B, embed: D]>) -> !psk_core.tensor<[batch: B, embed: D]> {
  func.return %x : !psk_core.tensor<[batch: B, embed: D]>
}

// BADDIM: error: E4001: pass 'psk-bind' failed: dims 'B=two': expected NAME=POSITIVE_INTEGER
// UNKNOWN: error: E4001: pass 'psk-bind' failed: consts Q: no constant of that name is declared (declared: D, HD, W)
// CONSTASDIM: error: E4001: pass 'psk-bind' failed: dims D: 'D' is a constant of the program; use consts D=...
// INDIVISIBLE: error: E4002: pass 'psk-bind' failed: constant HD = 63 / 2 does not divide exactly
// TWICE: error: E4001: pass 'psk-bind' failed: dims B is bound twice, to 2 and to 3
// HUGE: error: E4002: pass 'psk-bind' failed: constant W = D * HD is 604462909807314587353088; sizes are at most 2^40 = 1099511627776
// BADDIM-NOT: Traceback
