// RUN: env PRESK_THREADS=2 presk-opt %s --split-input-file --verify-diagnostics --disable-verify -p psk-verify-layout
//
// The epilogue's conditions at launch, refused. psk-verify-layout does not
// rely on the verifiers having run: it evaluates the first check's
// structural conditions again and the launch conditions on the program as
// it is. Every chunk here is IR the verifiers would refuse first (an add
// whose type does not follow from its operands', two readers), which is why
// it runs with --disable-verify: PSK-Core's broadcasting makes every
// verified add meet the launch conditions (launch_epilogue.mlir). The last
// chunk shows a value outside its domain, reported as the first check words it.

// the other operand carries an axis the output lacks, though the add claims the product's type
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!N = !psk_core.tensor<[n: 2, j: 16]>
func.func @f(%a: !A, %w: !W, %x: !N) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the epilogue's condition: the add's other operand carries n, which the product's output [i, j] lacks: it would widen the output; it broadcasts along J, I or the outer axes}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" realize <f32, f32> : !O {
    %1 = psk_core.add %0, %x : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// the other operand's J is longer than the output's
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 32]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the epilogue's condition: the add's other operand has j = 32 where the product's output has j = 16: it does not broadcast into the output without widening it}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" realize <f32, f32> : !O {
    %1 = psk_core.add %0, %b : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// accepted: a mask carrying J and I transposed, with one lane
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!T = !psk_core.tensor<[j: 16, i: 4]>
func.func @f(%a: !A, %w: !W, %m: !T) -> !O {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16], lanes = 1, epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" realize <f32, f32> : !O {
    %1 = psk_core.add %0, %m : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// the same mask with lanes: it carries J, but not innermost
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!T = !psk_core.tensor<[j: 16, i: 4]>
func.func @f(%a: !A, %w: !W, %m: !T) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the epilogue's condition: the tile has lanes = 8 along J (j), and the add's other operand [j, i] carries J but not as its innermost axis: with lanes it runs along J as its innermost axis or not at all}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16], lanes = 8, epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" realize <f32, f32> : !O {
    %1 = psk_core.add %0, %m : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// the first check's structural conditions, evaluated again: two readers
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> (!O, !O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the epilogue's condition: the product's value has 2 readers; an epilogue needs one add or mul alone to read it}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" realize <f32, f32> : !O {
    %1 = psk_core.add %0, %b : !O
    psk_realize.yield %1 : !O
  }
  %2 = psk_realize.group "f/%2" realize <f32, f32> : !O {
    %2 = psk_core.exp %0 : !O
    psk_realize.yield %2 : !O
  }
  func.return %1, %2 : !O, !O
}

// -----

// and the product in bf16, its add in f32
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the epilogue's condition: the add's site "f/%1" is realized in f32, the product in bf16; one kernel computes both}}
  %0 = psk_realize.nest "f/%0" realize <bf16, f32> layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" realize <f32, f32> : !O {
    %1 = psk_core.add %0, %b : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// not an epilogue, but unverified too: a value outside its domain is reported in the first check's words
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @f(%a: !A, %w: !W) -> !O {
  // expected-error @+1 {{E7002: nest "f/%0", decision "tile": a tile is [1, 1], or m_i in 1, 2, 4, 6, 8 and n_j in 4, 8, 16, 32; not [3, 3]}}
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [3, 3]> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}
