// RUN: presk dump %s --stage realize --realize bf16 | filecheck %s
// RUN: presk dump %s --stage sched --realize bf16 | filecheck %s
// RUN: presk dump %s --stage realize | filecheck %s --check-prefix=F64
// RUN: presk dump %s --stage realize --dim B=3 | filecheck %s --check-prefix=BOUND
// RUN: echo '{"realization": "f32", "layout": {"scaled/%5": {"tile": [2, 16], "lanes": 4}, "scaled/%7": {"split": "none"}}}' > %t.json
// RUN: presk dump %s --stage realize --plan @%t.json | filecheck %s --check-prefix=PLAN
// RUN: presk launches %s | filecheck %s --check-prefix=LAUNCHES
//
// `presk dump --stage realize` prints the program after psk-fuse and
// psk-realize: every launch is a group (elementwise members, root yielded)
// or a nest (one primitive), named "<function>/%<n>" after its root as
// `--stage core` numbers it, with its realization and its layout, whose
// defaults are resolved at the site's types inside `default(...)`.

!X = !psk_core.tensor<[batch: B, n: 16]>
!S = !psk_core.tensor<[batch: B]>
!W = !psk_core.tensor<[n: 16, m: 16]>
!Y = !psk_core.tensor<[batch: B, m: 16]>
!Y2 = !psk_core.tensor<[batch: B, m2: 2, m1: 8]>

func.func @scaled(%x: !X, %w: !W, %s: !psk_core.real) -> !Y2 {
  %0 = psk_core.mean %x [n] : !S
  %1 = psk_core.sub %x, %0 : !X
  %2 = psk_core.mul %1, %s : !X
  %3 = psk_core.exp %2 : !X
  %4 = psk_core.tanh %3 : !X
  %5 = psk_core.dot %4, %w : !Y
  %6 = psk_core.split %5 [m -> m2, m1] : !Y2
  %7 = psk_core.neg %6 : !Y2
  func.return %7 : !Y2
}

// CHECK:      !X = !psk_core.tensor<[batch: B, n: 16]>
// CHECK:      builtin.module attributes {psk_realize.default = "bf16"} {
// CHECK-NEXT:   func.func @scaled(%x: !X, %w: !W, %s: !psk_core.real) -> !Y2 {
// CHECK-NEXT:     %0 = psk_realize.nest "scaled/%0" realize <bf16, f32> layout <default(split = "executor")> : !S {
// CHECK-NEXT:       %0 = psk_core.mean %x [n] : !S
// CHECK-NEXT:       psk_realize.yield %0 : !S
// CHECK-NEXT:     }
// CHECK-NEXT:     %4 = psk_realize.group "scaled/%4" realize <bf16, f32> layout <default(split = "executor")> : !X {
// CHECK-NEXT:       %1 = psk_core.sub %x, %0 : !X
// CHECK-NEXT:       %2 = psk_core.mul %1, %s : !X
// CHECK-NEXT:       %3 = psk_core.exp %2 : !X
// CHECK-NEXT:       %4 = psk_core.tanh %3 : !X
// CHECK-NEXT:       psk_realize.yield %4 : !X
// CHECK-NEXT:     }
// CHECK-NEXT:     %5 = psk_realize.nest "scaled/%5" realize <bf16, f32> layout <default(form = "tiled", tile = [1, 8], kblock = "none", order = "IJ", lanes = 1, split = "executor", pack = false, epilogue = false)> : !Y {
// CHECK-NEXT:       %5 = psk_core.dot %4, %w : !Y
// CHECK-NEXT:       psk_realize.yield %5 : !Y
// CHECK-NEXT:     }
// CHECK-NEXT:     %6 = psk_core.split %5 [m -> m2, m1] : !Y2
// CHECK-NEXT:     %7 = psk_realize.group "scaled/%7" realize <bf16, f32> layout <default(split = "executor")> : !Y2 {
// CHECK-NEXT:       %7 = psk_core.neg %6 : !Y2
// CHECK-NEXT:       psk_realize.yield %7 : !Y2
// CHECK-NEXT:     }
// CHECK-NEXT:     func.return %7 : !Y2
// CHECK-NEXT:   }
// CHECK-NEXT: }

// In f64 and f32 a dot whose J is a multiple of eight takes the register's width ("widest").
// F64: builtin.module attributes {psk_realize.default = "f64"} {
// F64: "scaled/%5" realize <f64, f64> layout <default(form = "tiled", tile = [1, 8], kblock = "none", order = "IJ", lanes = "widest", split = "executor", pack = false, epilogue = false)> : !Y {

// BOUND: !X = !psk_core.tensor<[batch: 3, n: 16]>
// BOUND: %4 = psk_realize.group "scaled/%4" realize <f64, f64> layout <default(split = "executor")> : !X {

// PLAN: builtin.module attributes {psk_realize.default = "f32"} {
// PLAN: %5 = psk_realize.nest "scaled/%5" realize <f32, f32> layout <tile = [2, 16], lanes = 4, default(form = "tiled", kblock = "none", order = "IJ", split = "executor", pack = false, epilogue = false)> : !Y {
// PLAN: %7 = psk_realize.group "scaled/%7" realize <f32, f32> layout <split = "none"> : !Y2 {

// LAUNCHES:      | Entry | Launches without fusion | With | Removed |
// LAUNCHES-NEXT: |---|---|---|---|
// LAUNCHES-NEXT: | scaled | 7 | 4 | 43 % |
