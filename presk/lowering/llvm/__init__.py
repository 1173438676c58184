"""PSK-Kernel to LLVM IR (`llvmlite.ir`), one function per kernel, like mlir-translate.

The public entry point is `presk.lowering.kernel_to_llvm`; this package holds
its parts, one concept a module, each documenting how its IR is shaped and why:

- `abi`: the kernel ABI (`define void @name(ptr %args, i64 %lo, i64 %hi)`),
  the split loop, the iterations of a launch, the buffers a kernel writes.
- `translator`: `translate_kernel`/`translate_module`, the op dispatcher and
  the choice of how to translate each loop.
- `base`: the state of one kernel's translation and its SSA value map.
- `scalar_ops`: `arith` and `math` ops, the numerics policy.
- `bf16`: conversions to and from bf16 (i16 bit patterns), f64 → f32 to odd.
- `math_calls`: exp/log/tanh/erf/sqrt (presk's inline polynomials).
- `memory`: base pointers, addresses, loads, stores, prefetches.
- `alias_scopes`: per-buffer scoped noalias metadata, and when it is valid.
- `vector_ops`: the `vector` ops of `psk-vectorize`.
- `loops`: `scf.for` as guarded do-while loops; the split loop's bounds.
- `vector_body`: whether a loop body runs as vectors along its loop.
- `running_sums`: loops of ordered sums, `lanes` iterations at a time.
- `streaming_stores`: non-temporal stores in kernels beyond the last-level cache.
- `irtypes`, `target`, `queries`, `errors`: LLVM types and element sizes; the
  module, target attributes and intrinsics; reading ops; E5001.

Importing this package imports none of its modules: import them by name.
"""
