// RUN: presk-opt %s --split-input-file --verify-diagnostics
//
// The epilogue's conditions in the plan's first check (the seed's "bias as
// an epilogue"): "epilogue": true only on a contraction nest whose value one
// add alone reads, that add launched by itself (a group of its own), adding
// a tensor that does not widen the product's output, realized in the
// product's storage type; and the product is not the function's result.
// Beyond the seed, a mul may take the add's place, its other operand a
// tensor or a real (attention's scores times their scale). First the
// accepted forms (dot, NT scores with a mask, NN values with a residual,
// either operand order, the muls), then one chunk per violated condition.
// The epilogue's value outside true/false is in verify_domains.mlir.

// accepted: a bias along J after a dot
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> (!O) {
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !O {
    %1 = psk_core.add %0, %b : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// accepted: a mul by a tensor along J after a dot
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> (!O) {
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !O {
    %1 = psk_core.mul %0, %b : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// accepted: a real times a dot (the real is no tensor, which only an add refuses)
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!R = !psk_core.real
func.func @f(%a: !A, %w: !W, %c: !R) -> (!O) {
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !O {
    %1 = psk_core.mul %c, %0 : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// accepted: the bias before the product (either order)
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> (!O) {
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !O {
    %1 = psk_core.add %b, %0 : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// accepted: a residual of the output's shape, both sites in bf16
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %r: !O) -> (!O) {
  %0 = psk_realize.nest "f/%0" realize <bf16, f32> layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" realize <bf16, f32> : !O {
    %1 = psk_core.add %0, %r : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// accepted: an operand carrying I alone, the add read further on
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
!Bi = !psk_core.tensor<[i: 4]>
func.func @f(%a: !A, %w: !W, %c: !Bi) -> (!O) {
  %0 = psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16], epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" realize <f32, f32> : !O {
    %1 = psk_core.add %c, %0 : !O
    psk_realize.yield %1 : !O
  }
  %2 = psk_realize.group "f/%2" : !O {
    %2 = psk_core.exp %1 : !O
    psk_realize.yield %2 : !O
  }
  func.return %2 : !O
}

// -----

// accepted: a mask carrying I and J after attention's scores (NT ein)
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!S = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
!M = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%q: !Q, %k: !K, %m: !M) -> (!S) {
  %0 = psk_realize.nest "f/%0" layout <pack = true, epilogue = true> : !S {
    %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !S
    psk_realize.yield %0 : !S
  }
  %1 = psk_realize.group "f/%1" : !S {
    %1 = psk_core.add %0, %m : !S
    psk_realize.yield %1 : !S
  }
  func.return %1 : !S
}

// -----

// accepted: a residual after attention's values (NN ein), and an operand carrying the outer axes alone
!P = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
!V = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!Bh = !psk_core.tensor<[b: 2, h: 2]>
func.func @f(%p: !P, %v: !V, %x: !Q, %o: !Bh) -> (!Q, !Q) {
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !Q {
    %0 = psk_core.ein %p[b, h, s, t], %v[b, h, t, d] : !Q
    psk_realize.yield %0 : !Q
  }
  %1 = psk_realize.group "f/%1" : !Q {
    %1 = psk_core.add %x, %0 : !Q
    psk_realize.yield %1 : !Q
  }
  %2 = psk_realize.nest "f/%2" layout <epilogue = true> : !Q {
    %2 = psk_core.ein %p[b, h, s, t], %v[b, h, t, d] : !Q
    psk_realize.yield %2 : !Q
  }
  %3 = psk_realize.group "f/%3" : !Q {
    %3 = psk_core.add %2, %o : !Q
    psk_realize.yield %3 : !Q
  }
  func.return %1, %3 : !Q, !Q
}

// -----

// accepted: epilogue = false states the default, whatever reads the product
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W) -> (!O, !O) {
  %0 = psk_realize.nest "f/%0" layout <epilogue = false> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !O {
    %1 = psk_core.mul %0, %0 : !O
    psk_realize.yield %1 : !O
  }
  func.return %0, %1 : !O, !O
}

// -----

// two readers: two adds
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> (!O, !O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the product's value has 2 readers; an epilogue needs one add or mul alone to read it}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !O {
    %1 = psk_core.add %0, %b : !O
    psk_realize.yield %1 : !O
  }
  %2 = psk_realize.group "f/%2" : !O {
    %2 = psk_core.add %b, %0 : !O
    psk_realize.yield %2 : !O
  }
  func.return %1, %2 : !O, !O
}

// -----

// two readers: an add reading the product twice
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W) -> (!O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the product's value has 2 readers; an epilogue needs one add or mul alone to read it}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !O {
    %1 = psk_core.add %0, %0 : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// three readers: an add and two more
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> (!O, !O, !O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the product's value has 3 readers; an epilogue needs one add or mul alone to read it}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !O {
    %1 = psk_core.add %0, %b : !O
    psk_realize.yield %1 : !O
  }
  %2 = psk_realize.group "f/%2" : !O {
    %2 = psk_core.exp %0 : !O
    psk_realize.yield %2 : !O
  }
  %3 = psk_realize.group "f/%3" : !O {
    %3 = psk_core.neg %0 : !O
    psk_realize.yield %3 : !O
  }
  func.return %1, %2, %3 : !O, !O, !O
}

// -----

// no reader at all
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> (!Bj) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the product's value has 0 readers; an epilogue needs one add or mul alone to read it}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %b : !Bj
}

// -----

// read by a div, neither an add nor a mul
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> (!O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the product's value is read by psk_core.div, not by an add or a mul}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !O {
    %1 = psk_core.div %0, %b : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// read by a sub, not an add
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> (!O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the product's value is read by psk_core.sub, not by an add or a mul}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !O {
    %1 = psk_core.sub %0, %b : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// read by a nest (a softmax), not an add
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W) -> (!O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the product's value is read by psk_core.softmax, not by an add or a mul}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.nest "f/%1" : !O {
    %1 = psk_core.softmax %0 [j] : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// read by a call, not an add
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W) -> (!O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the product's value is read by func.call, not by an add or a mul}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = func.call @g(%0) : (!O) -> !O
  func.return %1 : !O
}
func.func @g(%x: !O) -> !O {
  func.return %x : !O
}

// -----

// the add is fused with a reader into a bigger group
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> (!O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the add that reads the product is fused into group "f/%2" of 2 members, so it does not launch by itself}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %2 = psk_realize.group "f/%2" : !O {
    %1 = psk_core.add %0, %b : !O
    %2 = psk_core.exp %1 : !O
    psk_realize.yield %2 : !O
  }
  func.return %2 : !O
}

// -----

// the add is the root of a bigger group
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %x: !O, %y: !O) -> (!O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the add that reads the product is fused into group "f/%2" of 3 members, so it does not launch by itself}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %2 = psk_realize.group "f/%2" : !O {
    %1 = psk_core.mul %x, %y : !O
    %3 = psk_core.exp %1 : !O
    %2 = psk_core.add %0, %3 : !O
    psk_realize.yield %2 : !O
  }
  func.return %2 : !O
}

// -----

// the add adds a real (an argument), not a tensor
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
!R = !psk_core.real
func.func @f(%a: !A, %w: !W, %c: !R) -> (!O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the add's other operand is a real, not a tensor}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !O {
    %1 = psk_core.add %0, %c : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// the add adds a real (a constant), before the product
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W) -> (!O) {
  %c = psk_core.constant 1.0 : !psk_core.real
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the add's other operand is a real, not a tensor}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !O {
    %1 = psk_core.add %c, %0 : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// the add widens the output with an outer axis
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
!N = !psk_core.tensor<[n: 2, i: 4, j: 16]>
func.func @f(%a: !A, %w: !W, %x: !N) -> (!N) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the add's other operand widens the product's output (its result type is not the product's)}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !N {
    %1 = psk_core.add %0, %x : !N
    psk_realize.yield %1 : !N
  }
  func.return %1 : !N
}

// -----

// the add widens the output with an axis between I and J
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
!N = !psk_core.tensor<[i: 4, n: 2, j: 16]>
func.func @f(%a: !A, %w: !W, %x: !N) -> (!N) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the add's other operand widens the product's output (its result type is not the product's)}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !N {
    %1 = psk_core.add %x, %0 : !N
    psk_realize.yield %1 : !N
  }
  func.return %1 : !N
}

// -----

// the add is realized in f32, the product in bf16
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> (!O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the add's site "f/%1" is realized in f32, the product in bf16; one kernel computes both}}
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

// the add is realized in bf16, the product in f64
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> (!O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the add's site "f/%1" is realized in bf16, the product in f64; one kernel computes both}}
  %0 = psk_realize.nest "f/%0" realize <f64, f64> layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" realize <bf16, f32> : !O {
    %1 = psk_core.add %0, %b : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// the product is the function's result
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W) -> (!O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the product's value is the function's result, which its own kernel must store; an epilogue needs one add or mul alone to read it}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// the product is the function's result and read by an add
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> (!O, !O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": the product's value is the function's result, which its own kernel must store; an epilogue needs one add or mul alone to read it}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !O {
    %1 = psk_core.add %0, %b : !O
    psk_realize.yield %1 : !O
  }
  func.return %0, %1 : !O, !O
}

// -----

// an epilogue on a product that is no contraction nest (dot with a rank-3 right operand), read by one add
!A = !psk_core.tensor<[i: 4, k: 8]>
!W3 = !psk_core.tensor<[k: 8, j: 16, n: 2]>
!O = !psk_core.tensor<[i: 4, j: 16, n: 2]>
func.func @f(%a: !A, %w: !W3, %r: !O) -> (!O) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": "epilogue" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  %1 = psk_realize.group "f/%1" : !O {
    %1 = psk_core.add %0, %r : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}

// -----

// an epilogue on a softmax read by one add
!S = !psk_core.tensor<[s: 8, t: 8]>
func.func @f(%x: !S) -> (!S) {
  // expected-error @+1 {{E7002: nest "f/%0", decision "epilogue": "epilogue" is not a decision of this nest, which is a softmax}}
  %0 = psk_realize.nest "f/%0" layout <epilogue = true> : !S {
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }
  %1 = psk_realize.group "f/%1" : !S {
    %1 = psk_core.add %0, %x : !S
    psk_realize.yield %1 : !S
  }
  func.return %1 : !S
}

// -----

// an epilogue on the add's own group
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!Bj = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !Bj) -> (!O) {
  %0 = psk_realize.nest "f/%0" : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  // expected-error @+1 {{E7002: nest "f/%1", decision "epilogue": "epilogue" is not a decision of this nest, which is neither a contraction nor a softmax}}
  %1 = psk_realize.group "f/%1" layout <epilogue = true> : !O {
    %1 = psk_core.add %0, %b : !O
    psk_realize.yield %1 : !O
  }
  func.return %1 : !O
}
