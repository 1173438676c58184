// RUN: presk-opt %s -p 'psk-egraph-opt{report=true}' 2>&1 | filecheck %s --check-prefix=DAG
// RUN: presk-opt %s -p 'psk-egraph-opt{extraction=tree report=true}' 2>&1 | filecheck %s --check-prefix=TREE

// DAG-aware extraction pays a shared subterm once. exp a and exp b are results themselves, so
// their product costs one more operation; tree extraction prices exp a · exp b at 5 against
// exp (a + b) at 3 and recomputes an exponential: 7 for the program, against 5. The pass then
// keeps the original, which costs less, and says so.
!X = !psk_core.tensor<[n: 8]>

func.func @shared(%a: !X, %b: !X) -> (!X, !X, !X) {
  %0 = psk_core.exp %a : !X
  %1 = psk_core.exp %b : !X
  %2 = psk_core.mul %0, %1 : !X
  func.return %2, %0, %1 : !X, !X, !X
}

// The report (stderr) comes before the program.
// DAG:      @shared: saturated, {{[0-9]+}} iterations, {{[0-9]+}} nodes, lets 3 -> 3, cost 5.00 -> 5.00
// DAG:      psk_core.exp %a
// DAG:      psk_core.exp %b
// DAG:      psk_core.mul
// DAG-NOT:  psk_core.add

// TREE-NOT: psk_core.add
// TREE:     @shared: saturated; left as it was: the extracted term costs more (7.00), {{[0-9]+}} iterations, {{[0-9]+}} nodes, lets 3 -> 3, cost 5.00 -> 5.00
