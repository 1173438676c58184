// RUN: presk-opt %s -p 'psk-fuse' -o %t.fused.mlir
// RUN: presk-opt %t.fused.mlir -o %t.fused2.mlir
// RUN: diff %t.fused.mlir %t.fused2.mlir
// RUN: presk-opt %s -p 'psk-fuse,psk-realize{realization=bf16}' -o %t.bf16.mlir
// RUN: presk-opt %t.bf16.mlir -o %t.bf16.2.mlir
// RUN: diff %t.bf16.mlir %t.bf16.2.mlir
// RUN: filecheck %s --input-file=%t.bf16.mlir --check-prefix=BF16
// RUN: echo '{"default": "f32", "ln/%%sd": "bf16"}' > %t.record.json
// RUN: presk-opt %s -p 'psk-fuse,psk-realize{realization="@%t.record.json"}' -o %t.mixed.mlir
// RUN: presk-opt %t.mixed.mlir -o %t.mixed.2.mlir
// RUN: diff %t.mixed.mlir %t.mixed.2.mlir
// RUN: filecheck %s --input-file=%t.mixed.mlir --check-prefix=MIXED
// RUN: presk-opt %t.fused.mlir -p 'psk-fuse' -o %t.again.mlir
// RUN: diff %t.fused.mlir %t.again.mlir
//
// The printed PSK-Realize IR reads back to itself: print, parse and print
// again give the same text, for the partition alone and with every site
// realized (uniformly, or by a realization record naming one site). A fused
// program has nothing left to fuse, so psk-fuse again changes nothing.

!X  = !psk_core.tensor<[batch: B, embed: 8]>
!S  = !psk_core.tensor<[batch: B]>
!E  = !psk_core.tensor<[embed: 8]>
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

// BF16:       builtin.module attributes {psk_realize.default = "bf16"} {
// BF16:         %mu = psk_realize.nest "ln/%mu" realize <bf16, f32> layout <default(split = "executor")> : !S {
// BF16:         %sd = psk_realize.group "ln/%sd" realize <bf16, f32> layout <default(split = "executor")> : !S {
// BF16-NEXT:      %ve = psk_core.add %var, %eps : !S
// BF16-NEXT:      %sd = psk_core.sqrt %ve : !S
// BF16-NEXT:      psk_realize.yield %sd : !S
// BF16:         %y = psk_realize.group "ln/%y" realize <bf16, f32>

// MIXED:      builtin.module attributes {psk_realize.default = "f32"} {
// MIXED:        %mu = psk_realize.nest "ln/%mu" realize <f32, f32>
// MIXED:        %xc = psk_realize.group "ln/%xc" realize <f32, f32>
// MIXED:        %sq = psk_realize.group "ln/%sq" realize <f32, f32>
// MIXED:        %var = psk_realize.nest "ln/%var" realize <f32, f32>
// MIXED:        %sd = psk_realize.group "ln/%sd" realize <bf16, f32>
// MIXED:        %y = psk_realize.group "ln/%y" realize <f32, f32>
