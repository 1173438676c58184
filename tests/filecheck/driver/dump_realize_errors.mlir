// RUN: echo '{"realization": "f32", "layout": {"f/%1": {"passes": 2}}}' > %t.kind.json
// RUN: not presk dump %s --stage realize --plan @%t.kind.json 2>&1 | filecheck %s --check-prefix=KIND
// RUN: echo '{"realization": "f32", "layout": {"f/%5": {"split": "none"}}}' > %t.nowhere.json
// RUN: not presk dump %s --stage realize --plan @%t.nowhere.json 2>&1 | filecheck %s --check-prefix=NOWHERE
// RUN: not presk dump %s --stage realize --realize f16 2>&1 | filecheck %s --check-prefix=TYPE
// RUN: not presk dump %s --stage realize --realize f32 --plan @%t.kind.json 2>&1 | filecheck %s --check-prefix=BOTH
// RUN: not presk run %s --entry f --dim N=4 --plan @%t.kind.json 2>&1 | filecheck %s --check-prefix=KIND
//
// A plan is checked before anything runs; an ill-formed one is refused with
// E7002 at the nest it names (with the nest's source line), never ignored.

!V = !psk_core.tensor<[n: N]>

func.func @f(%x: !V) -> !psk_core.real {
  %0 = psk_core.exp %x : !V
  %1 = psk_core.sum %0 [n] : !psk_core.real
  func.return %1 : !psk_core.real
}

// KIND:      dump_realize_errors.mlir:16:3: error: E7002: {{.*}}.kind.json: nest "f/%1", decision "passes": "passes" is not a decision of this nest, which is neither a contraction nor a softmax, so its only decision is the split
// KIND-NEXT: {{^}}  %1 = psk_core.sum %0 [n] : !psk_core.real
// KIND-NEXT: {{^}}  ^
// KIND-NOT:  Traceback

// NOWHERE: error: E7002: {{.*}}.nowhere.json: nest "f/%5": @f has no nest there (a value inside a fusion group, a view or a structural value is none); its nests are f/%0, f/%1

// TYPE: presk: error: E7001: --realize: a realization is f64, f32, bf16 or @FILE, not "f16"
// BOTH: presk: error: E4001: --plan gives the realization too: pass --plan or --realize, not both
