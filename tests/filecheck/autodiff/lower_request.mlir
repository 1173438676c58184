// RUN: presk-opt %s --verify-diagnostics -p 'psk-fuse,psk-realize{realization=f64},psk-lower-kernel{entry=g}'
// RUN: presk-opt %s -p 'psk-autodiff,psk-fuse,psk-realize{realization=f64},psk-lower-kernel{entry=g}' | filecheck %s
//
// A gradient request that reaches the kernel lowering is refused where it
// stands, naming the pass that expands it (psk-fuse has nothing to do with
// it); once psk-autodiff has run, the same entry lowers to launches.

!V = !psk_core.tensor<[n: 3]>
!R = !psk_core.real

func.func @f(%a: !V) -> !R {
  %0 = psk_core.exp %a : !V
  %1 = psk_core.sum %0 [n] : !R
  func.return %1 : !R
}

func.func @g(%a: !V) -> !V {
  // expected-error @+1 {{E3003: psk-lower-kernel: psk_core.grad is a request for a gradient, which no kernel computes: run psk-autodiff first (after psk-bind, before psk-fuse)}}
  %0 = psk_core.grad @f(%a) wrt [0] : !V
  func.return %0 : !V
}

// CHECK: psk_kernel.host @g
// CHECK: psk_kernel.launch
