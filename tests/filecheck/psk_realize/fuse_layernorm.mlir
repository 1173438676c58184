// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-fuse)' | filecheck %s
//
// A layer normalization, (x - mu) / sqrt(mean((x - mu)^2) + eps) * g + b:
// its chain is cut at each mean (a reduction ends a group: its loop nest is
// not its consumers'), and x - mu is read by the square and by the division,
// so it reaches memory and is a group of its own, never interior.

!X  = !psk_core.tensor<[batch: B, seq: T, embed: D]>
!S  = !psk_core.tensor<[batch: B, seq: T]>
!E  = !psk_core.tensor<[embed: D]>
!LN = !psk_core.record<g: !E, b: !E>
!R  = !psk_core.real

func.func @ln(%p: !LN, %x: !X) -> !X {
  %eps = psk_core.constant 1.0e-05 : !R
  %mu = psk_core.mean %x [embed] : !S
  %xc = psk_core.sub %x, %mu : !X
  %sq = psk_core.pow %xc, 2 : !X
  %var = psk_core.mean %sq [embed] : !S
  %ve = psk_core.add %var, %eps : !S
  %sd = psk_core.sqrt %ve : !S
  %n = psk_core.div %xc, %sd : !X
  %g = psk_core.field %p["g"] : !E
  %b = psk_core.field %p["b"] : !E
  %ng = psk_core.mul %n, %g : !X
  %y = psk_core.add %ng, %b : !X
  func.return %y : !X
}

// CHECK-LABEL: func.func @ln(%p: !LN, %x: !X) -> !X {
// CHECK-NEXT:    %eps = psk_core.constant 1.0e-05 : !R
// CHECK-NEXT:    %mu = psk_realize.nest "ln/%mu" : !S {
// CHECK-NEXT:      %mu = psk_core.mean %x [embed] : !S
// CHECK-NEXT:      psk_realize.yield %mu : !S
// CHECK-NEXT:    }
// x - mu: read twice, so a root.
// CHECK-NEXT:    %xc = psk_realize.group "ln/%xc" : !X {
// CHECK-NEXT:      %xc = psk_core.sub %x, %mu : !X
// CHECK-NEXT:      psk_realize.yield %xc : !X
// CHECK-NEXT:    }
// (x - mu)^2: its only reader is the mean, which launches by itself.
// CHECK-NEXT:    %sq = psk_realize.group "ln/%sq" : !X {
// CHECK-NEXT:      %sq = psk_core.pow %xc, 2 : !X
// CHECK-NEXT:      psk_realize.yield %sq : !X
// CHECK-NEXT:    }
// CHECK-NEXT:    %var = psk_realize.nest "ln/%var" : !S {
// CHECK-NEXT:      %var = psk_core.mean %sq [embed] : !S
// CHECK-NEXT:      psk_realize.yield %var : !S
// CHECK-NEXT:    }
// + eps and sqrt: one group of the statistics' type; %ve is interior.
// CHECK-NEXT:    %sd = psk_realize.group "ln/%sd" : !S {
// CHECK-NEXT:      %ve = psk_core.add %var, %eps : !S
// CHECK-NEXT:      %sd = psk_core.sqrt %ve : !S
// CHECK-NEXT:      psk_realize.yield %sd : !S
// CHECK-NEXT:    }
// CHECK-NEXT:    %g = psk_core.field %p["g"] : !E
// CHECK-NEXT:    %b = psk_core.field %p["b"] : !E
// The division, the scale and the shift: one group; g, b and sd are smaller and broadcast.
// CHECK-NEXT:    %y = psk_realize.group "ln/%y" : !X {
// CHECK-NEXT:      %n = psk_core.div %xc, %sd : !X
// CHECK-NEXT:      %ng = psk_core.mul %n, %g : !X
// CHECK-NEXT:      %y = psk_core.add %ng, %b : !X
// CHECK-NEXT:      psk_realize.yield %y : !X
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %y : !X
// CHECK-NEXT:  }
