// The layout passes one at a time, on attention's masked scores (an NT ein
// whose product one add reads) under tests/plan/epilogue.json: tile [4, 16],
// 8 lanes, pack, epilogue.
//
// RUN: presk-opt %S/../../plan/epilogue.mlir -p 'psk-bind{dims="B=2,T=16"},psk-fuse,psk-realize{plan="%S/../../plan/epilogue.json"},psk-lower-kernel{entry=masked_scores}' | filecheck %s --check-prefix=LOWERED
// RUN: presk-opt %S/../../plan/epilogue.mlir -p 'psk-bind{dims="B=2,T=16"},psk-fuse,psk-realize{plan="%S/../../plan/epilogue.json"},psk-lower-kernel{entry=masked_scores},psk-epilogue' | filecheck %s --check-prefix=EPILOGUE
// RUN: presk-opt %S/../../plan/epilogue.mlir -p 'psk-bind{dims="B=2,T=16"},psk-fuse,psk-realize{plan="%S/../../plan/epilogue.json"},psk-lower-kernel{entry=masked_scores},psk-epilogue,psk-pack' | filecheck %s --check-prefix=PACKED
// RUN: presk-opt %S/../../plan/epilogue.mlir -p 'psk-bind{dims="B=2,T=16"},psk-fuse,psk-realize{plan="%S/../../plan/epilogue.json"},psk-lower-kernel{entry=masked_scores},psk-epilogue,psk-pack,psk-tile,psk-softmax-passes,psk-split' | filecheck %s --check-prefix=TILED
// RUN: presk-opt %S/../../plan/two_dots.mlir -p 'psk-bind{dims="B=4"},psk-fuse,psk-realize{plan="%S/../../plan/two_dots.json"},psk-lower-kernel{entry=attend}' | filecheck %s --check-prefix=SOFTMAX
// RUN: presk-opt %S/../../plan/two_dots.mlir -p 'psk-bind{dims="B=4"},psk-fuse,psk-realize{plan="%S/../../plan/two_dots.json"},psk-lower-kernel{entry=attend},psk-softmax-passes' | filecheck %s --check-prefix=PASSES

// A softmax is one structured op until psk-softmax-passes writes its passes (three here: stated, and the default).
// SOFTMAX:      psk_kernel.kernel @softmax({{.*}}) "attend/%1" attributes {layout = #psk_realize.layout<default(split = "executor", passes = 3)>} {
// SOFTMAX-NEXT:   psk_kernel.softmax %0 -> %1 {axis = {{.*}}, arith_type = f32, x_type = !psk_core.tensor<
// PASSES:       psk_kernel.contract
// PASSES-NOT:   psk_kernel.softmax
// PASSES:       psk_kernel.kernel @softmax({{.*}}) "attend/%1" attributes {layout = #psk_realize.layout<default(split = "executor")>} {
// PASSES-NOT:   psk_kernel.softmax
// PASSES:       math.exp
// PASSES-NOT:   psk_kernel.softmax
// RUN: not presk-opt %S/../../plan/epilogue.mlir -p 'psk-bind{dims="B=2,T=16"},psk-fuse,psk-realize{plan="%S/../../plan/epilogue.json"},psk-lower-kernel{entry=masked_scores},psk-tile' 2>&1 | filecheck %s --check-prefix=ORDER-EPILOGUE
// RUN: not presk-opt %S/../../plan/epilogue.mlir -p 'psk-bind{dims="B=2,T=16"},psk-fuse,psk-realize{plan="%S/../../plan/epilogue.json"},psk-lower-kernel{entry=masked_scores},psk-epilogue,psk-tile' 2>&1 | filecheck %s --check-prefix=ORDER-PACK
// RUN: not presk-opt %S/../../plan/epilogue.mlir -p 'psk-bind{dims="B=2,T=16"},psk-fuse,psk-realize{plan="%S/../../plan/epilogue.json"},psk-lower-kernel{entry=masked_scores},psk-split' 2>&1 | filecheck %s --check-prefix=ORDER-SPLIT
// RUN: not presk-opt %S/../../plan/epilogue.mlir -p 'psk-bind{dims="B=2,T=16"},psk-fuse,psk-realize{plan="%S/../../plan/epilogue.json"},psk-lower-kernel{entry=masked_scores},psk-vectorize' 2>&1 | filecheck %s --check-prefix=ORDER-LANES

// A pass run before the one it needs refuses, at the nest's line, rather than leave a decision unapplied.
// ORDER-EPILOGUE: epilogue.mlir:60:3: error: E7002: nest "masked_scores/%0", decision "epilogue": the layout's epilogue is not applied yet: run psk-epilogue before psk-tile
// ORDER-PACK: epilogue.mlir:60:3: error: E7002: nest "masked_scores/%0", decision "pack": the layout's pack is not applied yet: run psk-pack before psk-tile
// ORDER-LANES: epilogue.mlir:60:3: error: E7002: nest "masked_scores/%0", decision "lanes": the layout's lanes are not on a loop yet: run psk-tile before psk-vectorize
// ORDER-SPLIT: epilogue.mlir:60:3: error: E7002: nest "masked_scores/%0", decision "split": the kernel still holds a structured op: run psk-tile and psk-softmax-passes first

// psk-lower-kernel: the product is one structured contract, its layout pending; the add is its own kernel.
// LOWERED:      psk_kernel.kernel @ein(%0: memref<2x2x16x16xf32>, %1: memref<2x2x16x16xf32>, %2: memref<2x2x16x16xf32>) "masked_scores/%0" attributes {layout = #psk_realize.layout<tile = [4, 16], lanes = 8, pack = true, epilogue = true, default(form = "tiled", kblock = "none", order = "IJ", split = "executor")>} {
// LOWERED-NEXT:   psk_kernel.contract %0, %1 -> %2 {outer = ["batch", "heads"], i = "seq", j = "seq2", k = "hd", lhs_axes = ["batch", "heads", "seq", "hd"], rhs_axes = ["batch", "heads", "seq2", "hd"], out_axes = ["batch", "heads", "seq", "seq2"], arith_type = f32, nt}
// LOWERED:      psk_kernel.kernel @add(
// LOWERED:        psk_kernel.launch @ein(%0, %1, %3)
// LOWERED-NEXT:   %4 = psk_kernel.alloc
// LOWERED-NEXT:   psk_kernel.launch @add(%3, %2, %4)

// psk-epilogue: one launch of ein+add; the mask, read at [seq, seq2], is the contract's addend.
// EPILOGUE-NOT:  psk_kernel.kernel @add(
// EPILOGUE:      psk_kernel.kernel @"ein+add"(%0: memref<2x2x16x16xf32>, %1: memref<2x2x16x16xf32>, %2: memref<16x16xf32>, %3: memref<2x2x16x16xf32>) "masked_scores/%0" attributes {layout = #psk_realize.layout<tile = [4, 16], lanes = 8, pack = true, default(
// EPILOGUE-NEXT:   psk_kernel.contract %0, %1 plus %2 : memref<16x16xf32> -> %3 {{.*}} addend_type = !psk_core.tensor<[seq: 16, seq2: 16]>, product_first}
// EPILOGUE-NOT:  psk_kernel.kernel @add(
// EPILOGUE:      %3 = psk_kernel.alloc
// EPILOGUE-NEXT: psk_kernel.launch @"ein+add"(%0, %1, %2, %3)
// EPILOGUE-NEXT: psk_kernel.return %3

// psk-pack: a copy kernel writes k transposed into the blocked panel [batch, heads, seq2 / 16, hd, 16] of
// the tile's 16 columns, launched first; the contract reads it as an NN contraction reads its packed panel.
// The copy goes by 16 x 16 blocks: 16 rows of k loaded along hd, transposed by 4 rounds of 16 shuffles,
// 16 rows stored along the block's columns.
// PACKED:      psk_kernel.kernel @pack(%0: memref<2x2x16x16xf32>, %1: memref<2x2x1x16x16xf32>) "masked_scores/%0" {
// PACKED-COUNT-16: vector.load %0[{{.*}}] : memref<2x2x16x16xf32>, vector<16xf32>
// PACKED-COUNT-64: vector.shuffle
// PACKED-COUNT-16: vector.store %{{[0-9]+}}, %1[{{.*}}] : memref<2x2x1x16x16xf32>, vector<16xf32>
// PACKED-NOT:  memref.load
// PACKED:      layout = #psk_realize.layout<tile = [4, 16], lanes = 8, default(
// PACKED-NEXT:   psk_kernel.contract %0, %1 plus %2 {{.*}} rhs_axes = ["batch", "heads", "hd", "seq2"], {{.*}} arith_type = f32, addend_type = {{.*}}, rhs_block = 16 : i64}
// PACKED:        %4 = psk_kernel.alloc : memref<2x2x1x16x16xf32>
// PACKED-NEXT:   psk_kernel.launch @pack(%1, %4)
// PACKED-NEXT:   psk_kernel.launch @"ein+add"(%0, %4, %2, %3)

// psk-tile: loops, 4 x 16 sums per tile, the mask added to each; nothing left pending.
// TILED-NOT:   layout =
// TILED:       psk_kernel.kernel @"ein+add"
// TILED-NOT:   psk_kernel.contract
// TILED-COUNT-64: math.fma
// TILED:       } {psk_kernel.parallel, psk_kernel.lanes = 8 : i64}
