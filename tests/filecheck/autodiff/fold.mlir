// RUN: presk-opt %s -p psk-bind,psk-autodiff | filecheck %s
// RUN: presk-opt %s -p 'psk-bind,psk-autodiff{remat=recompute}' | filecheck %s --check-prefix=VJP
// RUN: presk run %s --entry grad --pass-pipeline='builtin.module(psk-bind,psk-autodiff)' --print-values | filecheck %s --check-prefix=OUT
// RUN: presk run %s --entry grad --backend kernel --print-values | filecheck %s --check-prefix=OUT

// A fold over two stacked layers, x -> x + x·w·s. Its gradient runs the layers
// one by one: forward, each layer's parameters selected by a one-hot of its
// index and each layer's residuals saved; backward, the layers in reverse, each
// layer's parameter cotangent placed back at its layer.

!Blocks = !psk_core.record<w: !psk_core.tensor<[layer: L, embed: 2]>, s: !psk_core.tensor<[layer: L]>>
!Block = !psk_core.record<w: !psk_core.tensor<[embed: 2]>, s: !psk_core.real>
!X = !psk_core.tensor<[embed: 2]>
!R = !psk_core.real
psk_core.const_dim @L = 2
func.func @Block.apply(%p: !Block, %x: !X) -> !X {
  %w = psk_core.field %p["w"] : !X
  %s = psk_core.field %p["s"] : !R
  %0 = psk_core.mul %w, %s : !X
  %1 = psk_core.mul %x, %0 : !X
  %2 = psk_core.add %x, %1 : !X
  func.return %2 : !X
}
func.func @loss(%blocks: !Blocks, %x: !X) -> !R {
  %0 = psk_core.fold @Block.apply(%blocks, %x) : !X
  %1 = psk_core.sum %0 [embed] : !R
  func.return %1 : !R
}
func.func @grad(%blocks: !Blocks {psk_core.init = "ones"}, %x: !X {psk_core.init = "ones"}) -> !Blocks {
  %0 = psk_core.grad @loss(%blocks, %x) wrt [0] : !Blocks
  func.return %0 : !Blocks
}

// CHECK-LABEL: func.func @loss.fwd
// CHECK:         %[[P0:.*]] = psk_core.record w = %{{.*}}, s = %{{.*}} : !Block
// CHECK:         %[[P1:.*]] = psk_core.record w = %{{.*}}, s = %{{.*}} : !Block
// CHECK-NEXT:    %[[X1:.*]], %[[R0:.*]] = func.call @Block.apply.fwd(%[[P0]], %x) : (!Block, !X) -> (!X, !psk_core.tuple<!X, !R, !X>)
// CHECK-NEXT:    %[[X2:.*]], %[[R1:.*]] = func.call @Block.apply.fwd(%[[P1]], %[[X1]])
// CHECK:         %res = psk_core.tuple %[[R1]], %[[R0]], %[[X2]], %blocks

// CHECK-LABEL: func.func @loss.bwd
// CHECK:         %[[L1:.*]], %[[CT1:.*]] = func.call @Block.apply.bwd(%0, %{{.*}}) : (!psk_core.tuple<!X, !R, !X>, !X) -> (!Block, !X)
// CHECK:         %[[L0:.*]], %{{.*}} = func.call @Block.apply.bwd(%1, %[[CT1]])
// CHECK:         psk_core.add %{{.*}}, %{{.*}} : !psk_core.record<w: !psk_core.tensor<[layer: 2, embed: 2]>, s: !psk_core.tensor<[layer: 2]>>

// VJP-LABEL: func.func @loss.vjp
// VJP:         %[[X1:.*]] = func.call @Block.apply(%{{.*}}, %x) : (!Block, !X) -> !X
// VJP:         func.call @Block.apply.vjp(%{{.*}}, %[[X1]], %{{.*}}) : (!Block, !X, !X) -> (!X, !Block, !X)
// VJP:         func.call @Block.apply.vjp(%{{.*}}, %x, %{{.*}}) : (!Block, !X, !X) -> (!X, !Block, !X)

// With every input 1: x1 = 2, x2 = 4 per element, so ∂/∂w of either layer is
// 2 per element, and ∂/∂s is 4 for each layer (the sum over two elements).
// OUT:      w: shape (2, 2)
// OUT-NEXT: {{\[\[}}2. 2.]
// OUT-NEXT:  [2. 2.]]
// OUT-NEXT: s: shape (2,)
// OUT-NEXT: [4. 4.]
