// RUN: presk-opt %s -p 'psk-egraph-opt{report=true}' 2>&1 >/dev/null | filecheck %s
// RUN: presk-opt %s -p 'psk-egraph-opt{iterations=2 report=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=ITER
// RUN: presk-opt %s -p 'psk-egraph-opt{nodes=40 report=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=NODES
// RUN: presk-opt %s -p 'psk-egraph-opt{iterations=2}' | filecheck %s --check-prefix=PARTIAL
// RUN: not presk-opt %s -p 'psk-egraph-opt{rules="algebr"}' 2>&1 | filecheck %s --check-prefix=BAD

// The report: one line a function (stop reason, iterations, nodes, lets and cost before and
// after, the time of saturation and of extraction), then a summary. A function stopped by a
// limit is still extracted: every node of a partial e-graph is an exact rewrite.
!X = !psk_core.tensor<[n: 8]>
!R = !psk_core.real

func.func @chain(%a: !X, %b: !X, %c: !X, %d: !X, %s: !R) -> !X {
  %0 = psk_core.mul %s, %a : !X
  %1 = psk_core.mul %s, %b : !X
  %2 = psk_core.add %0, %1 : !X
  %3 = psk_core.add %2, %c : !X
  %4 = psk_core.add %3, %d : !X
  func.return %4 : !X
}

func.func @small(%a: !X) -> !X {
  %0 = psk_core.neg %a : !X
  %1 = psk_core.neg %0 : !X
  func.return %1 : !X
}

// CHECK: @chain: saturated, {{[0-9]+}} iterations, {{[0-9]+}} nodes, lets 5 -> 4, cost 5.00 -> 4.00, saturation {{.*}} s, extraction {{.*}} s
// CHECK: @small: saturated, {{[0-9]+}} iterations, {{[0-9]+}} nodes, lets 2 -> 0, cost 2.00 -> 0.00
// CHECK: psk-egraph-opt: 2 of 2 functions changed, lets 7 -> 4, cost 7.00 -> 4.00, 0 stopped on a limit

// ITER: @chain: iteration limit, 2 iterations, {{[0-9]+}} nodes, lets 5 -> 4, cost 5.00 -> 4.00
// ITER: 1 stopped on a limit

// NODES: @chain: node limit, {{[0-9]+}} iterations
// NODES: stopped on a limit

// PARTIAL-LABEL: func.func @chain
// PARTIAL:       psk_core.mul
// PARTIAL-NOT:   psk_core.mul
// PARTIAL:       func.return

// BAD: E4001: pass 'psk-egraph-opt' failed: no rule family 'algebr' (families: all, algebra, reductions, structure, contraction)
