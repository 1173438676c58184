// RUN: presk-opt %s -p psk-autodiff | filecheck %s
// RUN: presk-opt %s -p 'psk-autodiff{remat=recompute}' | filecheck %s --check-prefix=VJP
// RUN: presk-opt %s -p psk-autodiff | presk-opt | filecheck %s
// RUN: presk-opt %s -p psk-autodiff | presk run - --entry train --dim B=2 | filecheck %s --check-prefix=OUT
// RUN: presk-opt %s -p 'psk-autodiff{remat=recompute}' | presk run - --entry train --dim B=2 | filecheck %s --check-prefix=OUT

// A linear layer, tanh, and the mean of its square: the gradient with respect
// to the parameters. By default the forward function saves what the backward
// one reads; with remat=recompute one function recomputes it. The printed
// form parses back (third RUN line) and runs (the last two, same numbers).

!X = !psk_core.tensor<[batch: B, in: 3]>
!H = !psk_core.tensor<[batch: B, out: 2]>
!W = !psk_core.tensor<[in: 3, out: 2]>
!Bias = !psk_core.tensor<[out: 2]>
!P = !psk_core.record<w: !W, b: !Bias>
!R = !psk_core.real

func.func @loss(%p: !P, %x: !X {psk_core.init = "ones"}) -> !R {
  %w = psk_core.field %p["w"] : !W
  %b = psk_core.field %p["b"] : !Bias
  %0 = psk_core.dot %x, %w : !H
  %1 = psk_core.add %0, %b : !H
  %2 = psk_core.tanh %1 : !H
  %unused = psk_core.exp %2 : !H
  %3 = psk_core.pow %2, 2 : !H
  %4 = psk_core.mean %3 [batch, out] : !R
  func.return %4 : !R
}

func.func @train(%p: !P {psk_core.init = "ones"}, %x: !X {psk_core.init = "ones"}) -> !psk_core.tuple<!R, !P> {
  %0 = psk_core.value_and_grad @loss(%p, %x) wrt [0] : !psk_core.tuple<!R, !P>
  func.return %0 : !psk_core.tuple<!R, !P>
}

// CHECK-LABEL: func.func @train
// CHECK-NEXT:    %one = psk_core.constant 1.0 : !R
// CHECK-NEXT:    %[[V:.*]], %[[RES:.*]] = func.call @loss.fwd(%p, %x) : (!P, !X) -> (!R, !psk_core.tuple<!H, !X>)
// CHECK-NEXT:    %[[G:.*]] = func.call @loss.bwd(%[[RES]], %one) : (!psk_core.tuple<!H, !X>, !R) -> !P
// CHECK-NEXT:    %[[VG:.*]] = psk_core.tuple %[[V]], %[[G]] : !psk_core.tuple<!R, !P>
// CHECK-NEXT:    func.return %[[VG]]

// The forward pass saves tanh's value and x; the exp nothing reads is gone.
// CHECK-LABEL: func.func @loss.fwd(%p: !P, %x: !X) -> (!R, !psk_core.tuple<!H, !X>)
// CHECK-NOT:     psk_core.exp
// CHECK:         %2 = psk_core.tanh %1 : !H
// CHECK:         %res = psk_core.tuple %2, %x : !psk_core.tuple<!H, !X>
// CHECK-NEXT:    func.return %4, %res : !R, !psk_core.tuple<!H, !X>

// The backward pass: mean (ct / 2B, spread over the batch), pow, tanh from its
// saved value (1 - y * y, no tanh recomputed), the bias summed over the batch, dot.
// CHECK-LABEL: func.func @loss.bwd(%res: !psk_core.tuple<!H, !X>, %ct: !R) -> !P
// CHECK-NEXT:    %[[Y:.*]] = psk_core.proj %res[0] : !H
// CHECK-NEXT:    %x = psk_core.proj %res[1] : !X
// CHECK-NOT:     psk_core.tanh
// CHECK:         %[[N:.*]] = psk_core.mul %{{.*}}, %{{.*}} : !R
// CHECK-NEXT:    %[[S:.*]] = psk_core.broadcast_like %ct, %[[Y]] : !H
// CHECK-NEXT:    %{{.*}} = psk_core.div %[[S]], %[[N]] : !H
// CHECK:         %[[YY:.*]] = psk_core.mul %[[Y]], %[[Y]] : !H
// CHECK:         psk_core.sub %{{.*}}, %[[YY]] : !H
// CHECK:         %[[DB:.*]] = psk_core.sum %[[D:.*]] [batch] : !Bias
// CHECK-NEXT:    %[[DW:.*]] = psk_core.ein %x[batch, in], %[[D]][batch, out] : !W
// CHECK-NEXT:    %[[DP:.*]] = psk_core.record w = %[[DW]], b = %[[DB]] : !P
// CHECK-NEXT:    func.return %[[DP]] : !P

// VJP-LABEL: func.func @train
// VJP:         %{{.*}}, %{{.*}} = func.call @loss.vjp(%p, %x, %one) : (!P, !X, !R) -> (!R, !P)
// VJP-NOT:     @loss.fwd
// VJP-LABEL: func.func @loss.vjp(%p: !P, %x: !X, %ct: !R) -> (!R, !P)
// VJP:         %2 = psk_core.tanh %1 : !H
// VJP-NOT:     psk_core.exp
// VJP:         psk_core.ein %x[batch, in]
// VJP:         func.return %4, %{{.*}} : !R, !P


// With every parameter and input 1, each of the 2B outputs is y = tanh(4): the
// loss is y², and every partial derivative is y(1 − y²) = 0.00134005 (the mean's
// 1/(2B), the square's 2y, tanh's 1 − y², and B rows for each weight and bias).
// OUT:       @train (numpy f64):
// OUT-NEXT:    result 0: tuple(real, record{w: tensor[in: 3, out: 2], b: tensor[out: 2]})
// OUT-NEXT:      0: 0.9986590493169741
// OUT-NEXT:      1.w: shape (3, 2)  min 0.00134005  max 0.00134005
// OUT-NEXT:      1.b: shape (2,)  min 0.00134005  max 0.00134005
