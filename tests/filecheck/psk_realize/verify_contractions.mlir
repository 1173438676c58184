// RUN: presk-opt %s --split-input-file --verify-diagnostics
// RUN: presk-opt %s --split-input-file | filecheck %s
// RUN: presk-opt %s --split-input-file | presk-opt --split-input-file | filecheck %s
//
// The contraction nests of the seed: a dot whose right operand has rank two,
// and an ein whose output is the outer axes, then I, then J, summed over one
// K, with operand 1 NN ((..., K, J): attention's values) or NT ((..., J, K):
// attention's scores), or TN: both operands carry the summed axes, one or
// several, before I and J (a dot's right derivative, xᵀ · ct). Each accepts every contraction decision at once, in
// its domain (a tile or a pack with the row-wise form is a
// condition of the launch, not of the first check), and prints and reads
// back what it states.

// dot, a rank-2 right operand
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @c0(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "c0/%0" layout <form = "tiled", tile = [4, 16], kblock = 32, order = "JIK", lanes = 4, split = {depth = 1, workers = 2}, pack = true, epilogue = false> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// dot, a rank-2 right operand
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @c1(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "c1/%0" layout <form = "row-wise", tile = [1, 1], kblock = "none", order = "IJ", lanes = 1, split = "none", pack = false> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// dot, a rank-2 right operand
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @c2(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "c2/%0" layout <tile = [2, 4], kblock = 128, order = "KJI", lanes = 2, split = {depth = 2, workers = 16}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// dot with outer axes on the left
!A = !psk_core.tensor<[b: 2, s: 8, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[b: 2, s: 8, j: 16]>
func.func @c3(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "c3/%0" layout <form = "tiled", tile = [4, 16], kblock = 32, order = "JIK", lanes = 4, split = {depth = 1, workers = 2}, pack = true, epilogue = false> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// dot with outer axes on the left
!A = !psk_core.tensor<[b: 2, s: 8, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[b: 2, s: 8, j: 16]>
func.func @c4(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "c4/%0" layout <form = "row-wise", tile = [1, 1], kblock = "none", order = "IJ", lanes = 1, split = "none", pack = false> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// dot with outer axes on the left
!A = !psk_core.tensor<[b: 2, s: 8, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[b: 2, s: 8, j: 16]>
func.func @c5(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "c5/%0" layout <tile = [2, 4], kblock = 128, order = "KJI", lanes = 2, split = {depth = 2, workers = 16}> : !O {
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// NN ein, attention's values
!P = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
!V = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
func.func @c6(%p: !P, %v: !V) -> !O {
  %0 = psk_realize.nest "c6/%0" layout <form = "tiled", tile = [4, 16], kblock = 32, order = "JIK", lanes = 4, split = {depth = 1, workers = 2}, pack = true, epilogue = false> : !O {
    %0 = psk_core.ein %p[b, h, s, t], %v[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// NN ein, attention's values
!P = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
!V = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
func.func @c7(%p: !P, %v: !V) -> !O {
  %0 = psk_realize.nest "c7/%0" layout <form = "row-wise", tile = [1, 1], kblock = "none", order = "IJ", lanes = 1, split = "none", pack = false> : !O {
    %0 = psk_core.ein %p[b, h, s, t], %v[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// NN ein, attention's values
!P = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
!V = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
func.func @c8(%p: !P, %v: !V) -> !O {
  %0 = psk_realize.nest "c8/%0" layout <tile = [2, 4], kblock = 128, order = "KJI", lanes = 2, split = {depth = 2, workers = 16}> : !O {
    %0 = psk_core.ein %p[b, h, s, t], %v[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// NT ein, attention's scores
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
func.func @c9(%q: !Q, %k: !K) -> !O {
  %0 = psk_realize.nest "c9/%0" layout <form = "tiled", tile = [4, 16], kblock = 32, order = "JIK", lanes = 4, split = {depth = 1, workers = 2}, pack = true, epilogue = false> : !O {
    %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// NT ein, attention's scores
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
func.func @c10(%q: !Q, %k: !K) -> !O {
  %0 = psk_realize.nest "c10/%0" layout <form = "row-wise", tile = [1, 1], kblock = "none", order = "IJ", lanes = 1, split = "none", pack = false> : !O {
    %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// NT ein, attention's scores
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!O = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
func.func @c11(%q: !Q, %k: !K) -> !O {
  %0 = psk_realize.nest "c11/%0" layout <tile = [2, 4], kblock = 128, order = "KJI", lanes = 2, split = {depth = 2, workers = 16}> : !O {
    %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// NN ein whose right operand carries no outer axis
!A = !psk_core.tensor<[b: 2, i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[b: 2, i: 4, j: 16]>
func.func @c12(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "c12/%0" layout <form = "tiled", tile = [4, 16], kblock = 32, order = "JIK", lanes = 4, split = {depth = 1, workers = 2}, pack = true, epilogue = false> : !O {
    %0 = psk_core.ein %a[b, i, k], %w[k, j] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// NN ein whose right operand carries no outer axis
!A = !psk_core.tensor<[b: 2, i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[b: 2, i: 4, j: 16]>
func.func @c13(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "c13/%0" layout <form = "row-wise", tile = [1, 1], kblock = "none", order = "IJ", lanes = 1, split = "none", pack = false> : !O {
    %0 = psk_core.ein %a[b, i, k], %w[k, j] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// NN ein whose right operand carries no outer axis
!A = !psk_core.tensor<[b: 2, i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[b: 2, i: 4, j: 16]>
func.func @c14(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "c14/%0" layout <tile = [2, 4], kblock = 128, order = "KJI", lanes = 2, split = {depth = 2, workers = 16}> : !O {
    %0 = psk_core.ein %a[b, i, k], %w[k, j] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// NT ein of rank 2
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[j: 16, k: 8]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @c15(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "c15/%0" layout <form = "tiled", tile = [4, 16], kblock = 32, order = "JIK", lanes = 4, split = {depth = 1, workers = 2}, pack = true, epilogue = false> : !O {
    %0 = psk_core.ein %a[i, k], %w[j, k] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// NT ein of rank 2
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[j: 16, k: 8]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @c16(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "c16/%0" layout <form = "row-wise", tile = [1, 1], kblock = "none", order = "IJ", lanes = 1, split = "none", pack = false> : !O {
    %0 = psk_core.ein %a[i, k], %w[j, k] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// NT ein of rank 2
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[j: 16, k: 8]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @c17(%a: !A, %w: !W) -> !O {
  %0 = psk_realize.nest "c17/%0" layout <tile = [2, 4], kblock = 128, order = "KJI", lanes = 2, split = {depth = 2, workers = 16}> : !O {
    %0 = psk_core.ein %a[i, k], %w[j, k] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// TN ein, a dot's right derivative xᵀ · ct: both operands carry the summed axes (b, s) before I and J
!X = !psk_core.tensor<[b: 2, s: 8, i: 4]>
!C = !psk_core.tensor<[b: 2, s: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @c18(%x: !X, %ct: !C) -> !O {
  %0 = psk_realize.nest "c18/%0" layout <form = "tiled", tile = [4, 16], kblock = 32, order = "JIK", lanes = 4, split = {depth = 1, workers = 2}, pack = true, epilogue = false> : !O {
    %0 = psk_core.ein %x[b, s, i], %ct[b, s, j] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// TN ein, a dot's right derivative xᵀ · ct: both operands carry the summed axes (b, s) before I and J
!X = !psk_core.tensor<[b: 2, s: 8, i: 4]>
!C = !psk_core.tensor<[b: 2, s: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @c19(%x: !X, %ct: !C) -> !O {
  %0 = psk_realize.nest "c19/%0" layout <form = "row-wise", tile = [1, 1], kblock = "none", order = "IJ", lanes = 1, split = "none", pack = false> : !O {
    %0 = psk_core.ein %x[b, s, i], %ct[b, s, j] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// -----

// TN ein, a dot's right derivative xᵀ · ct: both operands carry the summed axes (b, s) before I and J
!X = !psk_core.tensor<[b: 2, s: 8, i: 4]>
!C = !psk_core.tensor<[b: 2, s: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
func.func @c20(%x: !X, %ct: !C) -> !O {
  %0 = psk_realize.nest "c20/%0" layout <tile = [2, 4], kblock = 128, order = "KJI", lanes = 2, split = {depth = 2, workers = 16}> : !O {
    %0 = psk_core.ein %x[b, s, i], %ct[b, s, j] : !O
    psk_realize.yield %0 : !O
  }
  func.return %0 : !O
}

// CHECK-LABEL: func.func @c0(
// CHECK-NEXT:    %0 = psk_realize.nest "c0/%0" layout <form = "tiled", tile = [4, 16], kblock = 32, order = "JIK", lanes = 4, split = {depth = 1, workers = 2}, pack = true, epilogue = false> : !O {

// CHECK-LABEL: func.func @c1(
// CHECK-NEXT:    %0 = psk_realize.nest "c1/%0" layout <form = "row-wise", tile = [1, 1], kblock = "none", order = "IJ", lanes = 1, split = "none", pack = false> : !O {

// CHECK-LABEL: func.func @c2(
// CHECK-NEXT:    %0 = psk_realize.nest "c2/%0" layout <tile = [2, 4], kblock = 128, order = "KJI", lanes = 2, split = {depth = 2, workers = 16}> : !O {

// CHECK-LABEL: func.func @c3(
// CHECK-NEXT:    %0 = psk_realize.nest "c3/%0" layout <form = "tiled", tile = [4, 16], kblock = 32, order = "JIK", lanes = 4, split = {depth = 1, workers = 2}, pack = true, epilogue = false> : !O {

// CHECK-LABEL: func.func @c4(
// CHECK-NEXT:    %0 = psk_realize.nest "c4/%0" layout <form = "row-wise", tile = [1, 1], kblock = "none", order = "IJ", lanes = 1, split = "none", pack = false> : !O {

// CHECK-LABEL: func.func @c5(
// CHECK-NEXT:    %0 = psk_realize.nest "c5/%0" layout <tile = [2, 4], kblock = 128, order = "KJI", lanes = 2, split = {depth = 2, workers = 16}> : !O {

// CHECK-LABEL: func.func @c6(
// CHECK-NEXT:    %0 = psk_realize.nest "c6/%0" layout <form = "tiled", tile = [4, 16], kblock = 32, order = "JIK", lanes = 4, split = {depth = 1, workers = 2}, pack = true, epilogue = false> : !O {

// CHECK-LABEL: func.func @c7(
// CHECK-NEXT:    %0 = psk_realize.nest "c7/%0" layout <form = "row-wise", tile = [1, 1], kblock = "none", order = "IJ", lanes = 1, split = "none", pack = false> : !O {

// CHECK-LABEL: func.func @c8(
// CHECK-NEXT:    %0 = psk_realize.nest "c8/%0" layout <tile = [2, 4], kblock = 128, order = "KJI", lanes = 2, split = {depth = 2, workers = 16}> : !O {

// CHECK-LABEL: func.func @c9(
// CHECK-NEXT:    %0 = psk_realize.nest "c9/%0" layout <form = "tiled", tile = [4, 16], kblock = 32, order = "JIK", lanes = 4, split = {depth = 1, workers = 2}, pack = true, epilogue = false> : !O {

// CHECK-LABEL: func.func @c10(
// CHECK-NEXT:    %0 = psk_realize.nest "c10/%0" layout <form = "row-wise", tile = [1, 1], kblock = "none", order = "IJ", lanes = 1, split = "none", pack = false> : !O {

// CHECK-LABEL: func.func @c11(
// CHECK-NEXT:    %0 = psk_realize.nest "c11/%0" layout <tile = [2, 4], kblock = 128, order = "KJI", lanes = 2, split = {depth = 2, workers = 16}> : !O {

// CHECK-LABEL: func.func @c12(
// CHECK-NEXT:    %0 = psk_realize.nest "c12/%0" layout <form = "tiled", tile = [4, 16], kblock = 32, order = "JIK", lanes = 4, split = {depth = 1, workers = 2}, pack = true, epilogue = false> : !O {

// CHECK-LABEL: func.func @c13(
// CHECK-NEXT:    %0 = psk_realize.nest "c13/%0" layout <form = "row-wise", tile = [1, 1], kblock = "none", order = "IJ", lanes = 1, split = "none", pack = false> : !O {

// CHECK-LABEL: func.func @c14(
// CHECK-NEXT:    %0 = psk_realize.nest "c14/%0" layout <tile = [2, 4], kblock = 128, order = "KJI", lanes = 2, split = {depth = 2, workers = 16}> : !O {

// CHECK-LABEL: func.func @c15(
// CHECK-NEXT:    %0 = psk_realize.nest "c15/%0" layout <form = "tiled", tile = [4, 16], kblock = 32, order = "JIK", lanes = 4, split = {depth = 1, workers = 2}, pack = true, epilogue = false> : !O {

// CHECK-LABEL: func.func @c16(
// CHECK-NEXT:    %0 = psk_realize.nest "c16/%0" layout <form = "row-wise", tile = [1, 1], kblock = "none", order = "IJ", lanes = 1, split = "none", pack = false> : !O {

// CHECK-LABEL: func.func @c17(
// CHECK-NEXT:    %0 = psk_realize.nest "c17/%0" layout <tile = [2, 4], kblock = 128, order = "KJI", lanes = 2, split = {depth = 2, workers = 16}> : !O {

// CHECK-LABEL: func.func @c18(
// CHECK-NEXT:    %0 = psk_realize.nest "c18/%0" layout <form = "tiled", tile = [4, 16], kblock = 32, order = "JIK", lanes = 4, split = {depth = 1, workers = 2}, pack = true, epilogue = false> : !O {

// CHECK-LABEL: func.func @c19(
// CHECK-NEXT:    %0 = psk_realize.nest "c19/%0" layout <form = "row-wise", tile = [1, 1], kblock = "none", order = "IJ", lanes = 1, split = "none", pack = false> : !O {

// CHECK-LABEL: func.func @c20(
// CHECK-NEXT:    %0 = psk_realize.nest "c20/%0" layout <tile = [2, 4], kblock = 128, order = "KJI", lanes = 2, split = {depth = 2, workers = 16}> : !O {
