// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-fuse)' | filecheck %s
//
// An AdamW step over a parameter tree: one long elementwise chain, fused
// with every intermediate it does not return. m' and v' are returned (and
// read again by the update), so they reach memory: each is the root of a
// group, and the chain is cut exactly there. The step's scalars (1 - beta^t)
// are reals, so they are groups of their own type, apart from the tree's.

!W = !psk_core.tensor<[rows: 4, cols: 3]>
!E = !psk_core.tensor<[cols: 3]>
!P = !psk_core.record<w: !W, b: !E>
!R = !psk_core.real
!A = !psk_core.tuple<!P, !P, !P>

func.func @adamw(%p: !P, %g: !P, %m: !P, %v: !P, %b1t: !R, %b2t: !R, %lr: !R) -> !A {
  %one = psk_core.constant 1.0 : !R
  %b1 = psk_core.constant 0.9 : !R
  %b2 = psk_core.constant 0.999 : !R
  %eps = psk_core.constant 1.0e-08 : !R
  %wd = psk_core.constant 0.01 : !R
  %c1 = psk_core.sub %one, %b1 : !R
  %c2 = psk_core.sub %one, %b2 : !R
  %bc1 = psk_core.sub %one, %b1t : !R
  %bc2 = psk_core.sub %one, %b2t : !R
  %m1 = psk_core.mul %m, %b1 : !P
  %m2 = psk_core.mul %g, %c1 : !P
  %mn = psk_core.add %m1, %m2 : !P
  %v1 = psk_core.mul %v, %b2 : !P
  %gg = psk_core.pow %g, 2 : !P
  %v2 = psk_core.mul %gg, %c2 : !P
  %vn = psk_core.add %v1, %v2 : !P
  %mh = psk_core.div %mn, %bc1 : !P
  %vh = psk_core.div %vn, %bc2 : !P
  %sv = psk_core.sqrt %vh : !P
  %den = psk_core.add %sv, %eps : !P
  %upd = psk_core.div %mh, %den : !P
  %dec = psk_core.mul %p, %wd : !P
  %step = psk_core.add %upd, %dec : !P
  %lrs = psk_core.mul %step, %lr : !P
  %pn = psk_core.sub %p, %lrs : !P
  %out = psk_core.tuple %pn, %mn, %vn : !A
  func.return %out : !A
}

// CHECK-LABEL: func.func @adamw(
// The scalars: one group each (a real is not the tree's type; each is read by a tree group).
// CHECK:         %c1 = psk_realize.group "adamw/%c1" : !R {
// CHECK-NEXT:      %c1 = psk_core.sub %one, %b1 : !R
// CHECK-NEXT:      psk_realize.yield %c1 : !R
// CHECK-NEXT:    }
// CHECK-NEXT:    %c2 = psk_realize.group "adamw/%c2" : !R {
// CHECK:         %bc1 = psk_realize.group "adamw/%bc1" : !R {
// CHECK:         %bc2 = psk_realize.group "adamw/%bc2" : !R {
// CHECK-NEXT:      %bc2 = psk_core.sub %one, %b2t : !R
// CHECK-NEXT:      psk_realize.yield %bc2 : !R
// CHECK-NEXT:    }
// m' = b1 m + (1 - b1) g: returned, so a root.
// CHECK-NEXT:    %mn = psk_realize.group "adamw/%mn" : !P {
// CHECK-NEXT:      %m1 = psk_core.mul %m, %b1 : !P
// CHECK-NEXT:      %m2 = psk_core.mul %g, %c1 : !P
// CHECK-NEXT:      %mn = psk_core.add %m1, %m2 : !P
// CHECK-NEXT:      psk_realize.yield %mn : !P
// CHECK-NEXT:    }
// v' = b2 v + (1 - b2) g^2: pow 2 joins; returned, so a root.
// CHECK-NEXT:    %vn = psk_realize.group "adamw/%vn" : !P {
// CHECK-NEXT:      %v1 = psk_core.mul %v, %b2 : !P
// CHECK-NEXT:      %gg = psk_core.pow %g, 2 : !P
// CHECK-NEXT:      %v2 = psk_core.mul %gg, %c2 : !P
// CHECK-NEXT:      %vn = psk_core.add %v1, %v2 : !P
// CHECK-NEXT:      psk_realize.yield %vn : !P
// CHECK-NEXT:    }
// The update and the new parameters: nine steps, every intermediate interior.
// CHECK-NEXT:    %pn = psk_realize.group "adamw/%pn" : !P {
// CHECK-NEXT:      %mh = psk_core.div %mn, %bc1 : !P
// CHECK-NEXT:      %vh = psk_core.div %vn, %bc2 : !P
// CHECK-NEXT:      %sv = psk_core.sqrt %vh : !P
// CHECK-NEXT:      %den = psk_core.add %sv, %eps : !P
// CHECK-NEXT:      %upd = psk_core.div %mh, %den : !P
// CHECK-NEXT:      %dec = psk_core.mul %p, %wd : !P
// CHECK-NEXT:      %step = psk_core.add %upd, %dec : !P
// CHECK-NEXT:      %lrs = psk_core.mul %step, %lr : !P
// CHECK-NEXT:      %pn = psk_core.sub %p, %lrs : !P
// CHECK-NEXT:      psk_realize.yield %pn : !P
// CHECK-NEXT:    }
// CHECK-NEXT:    %out = psk_core.tuple %pn, %mn, %vn : !A
// CHECK-NEXT:    func.return %out : !A
// CHECK-NOT:     psk_realize.group
