// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-fuse{max-nodes=1})' | filecheck %s --check-prefix=ONE
// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-fuse{max-nodes=2})' | filecheck %s --check-prefix=TWO
// RUN: presk-opt %s -p 'psk-fuse{max-nodes=64}' | filecheck %s --check-prefix=ALL
// RUN: not presk-opt %s --pass-pipeline='builtin.module(psk-fuse{max-nodes=0})' 2>&1 | filecheck %s --check-prefix=ZERO
// RUN: not presk-opt %s -p 'psk-fuse{max-nodes=65}' 2>&1 | filecheck %s --check-prefix=OVER
//
// max-nodes caps a group's members: 1 launches every primitive by itself
// (the unfused program), 64 is the default and the largest; a group grows
// from its root backwards until the cap.

!X = !psk_core.tensor<[rows: 4, cols: 3]>

func.func @chain(%x: !X) -> !X {
  %a = psk_core.exp %x : !X
  %b = psk_core.neg %a : !X
  %c = psk_core.tanh %b : !X
  %d = psk_core.mul %c, %x : !X
  %e = psk_core.sqrt %d : !X
  func.return %e : !X
}

// ONE-LABEL: func.func @chain(%x: !X) -> !X {
// ONE-NEXT:    %a = psk_realize.group "chain/%a" : !X {
// ONE-NEXT:      %a = psk_core.exp %x : !X
// ONE-NEXT:      psk_realize.yield %a : !X
// ONE-NEXT:    }
// ONE-NEXT:    %b = psk_realize.group "chain/%b" : !X {
// ONE-NEXT:      %b = psk_core.neg %a : !X
// ONE-NEXT:      psk_realize.yield %b : !X
// ONE-NEXT:    }
// ONE-NEXT:    %c = psk_realize.group "chain/%c" : !X {
// ONE-NEXT:      %c = psk_core.tanh %b : !X
// ONE-NEXT:      psk_realize.yield %c : !X
// ONE-NEXT:    }
// ONE-NEXT:    %d = psk_realize.group "chain/%d" : !X {
// ONE-NEXT:      %d = psk_core.mul %c, %x : !X
// ONE-NEXT:      psk_realize.yield %d : !X
// ONE-NEXT:    }
// ONE-NEXT:    %e = psk_realize.group "chain/%e" : !X {
// ONE-NEXT:      %e = psk_core.sqrt %d : !X
// ONE-NEXT:      psk_realize.yield %e : !X
// ONE-NEXT:    }
// ONE-NEXT:    func.return %e : !X

// TWO-LABEL: func.func @chain(%x: !X) -> !X {
// TWO-NEXT:    %a = psk_realize.group "chain/%a" : !X {
// TWO-NEXT:      %a = psk_core.exp %x : !X
// TWO-NEXT:      psk_realize.yield %a : !X
// TWO-NEXT:    }
// TWO-NEXT:    %c = psk_realize.group "chain/%c" : !X {
// TWO-NEXT:      %b = psk_core.neg %a : !X
// TWO-NEXT:      %c = psk_core.tanh %b : !X
// TWO-NEXT:      psk_realize.yield %c : !X
// TWO-NEXT:    }
// TWO-NEXT:    %e = psk_realize.group "chain/%e" : !X {
// TWO-NEXT:      %d = psk_core.mul %c, %x : !X
// TWO-NEXT:      %e = psk_core.sqrt %d : !X
// TWO-NEXT:      psk_realize.yield %e : !X
// TWO-NEXT:    }
// TWO-NEXT:    func.return %e : !X

// ALL-LABEL: func.func @chain(%x: !X) -> !X {
// ALL-NEXT:    %e = psk_realize.group "chain/%e" : !X {
// ALL-NEXT:      %a = psk_core.exp %x : !X
// ALL-NEXT:      %b = psk_core.neg %a : !X
// ALL-NEXT:      %c = psk_core.tanh %b : !X
// ALL-NEXT:      %d = psk_core.mul %c, %x : !X
// ALL-NEXT:      %e = psk_core.sqrt %d : !X
// ALL-NEXT:      psk_realize.yield %e : !X
// ALL-NEXT:    }
// ALL-NEXT:    func.return %e : !X

// ZERO: error: E3002: pass 'psk-fuse' failed: max-nodes is between 1 and 64, not 0
// ZERO-NOT: Traceback
// OVER: error: E3002: pass 'psk-fuse' failed: max-nodes is between 1 and 64, not 65
// OVER-NOT: Traceback
