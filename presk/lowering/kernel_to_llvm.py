"""PSK-Kernel to LLVM IR (`llvmlite.ir`), one function per kernel, like mlir-translate.

The public entry point of the translation: every name the rest of presk
(the native runner, `psk-split`, the cost model, `presk dump --stage llvm`)
and the tests use, re-exported from the modules of `presk.lowering.llvm`,
where each part is documented with the reasons for the IR's shape:

- the kernel ABI, the split loop and a launch's iterations: `llvm.abi`;
- loops as guarded do-while loops, the split loop's bounds: `llvm.loops`;
- buffer accesses and their metadata: `llvm.memory`; alias scopes and when
  they are valid (`assume_disjoint`): `llvm.alias_scopes`;
- numerics of the scalar ops: `llvm.scalar_ops`, `llvm.math_calls`; bf16:
  `llvm.bf16`; target attributes: `llvm.target`;
- the two kinds of loop vectorised here rather than left to LLVM (only in
  the variant with disjoint buffers): running sums (`llvm.running_sums`)
  and streaming stores (`llvm.streaming_stores`).

Constants such as `STREAMING_BYTES` are read in the module that defines
them; patch them there, not here.
"""

from __future__ import annotations

from presk.lowering.llvm.abi import KERNEL_TYPE
from presk.lowering.llvm.bf16 import bf16_to_f32, f32_to_bf16, f64_to_f32_odd
from presk.lowering.llvm.irtypes import buffer_bytes
from presk.lowering.llvm.math_calls import emit_math
from presk.lowering.llvm.memory import PREFETCH_BYTES
from presk.lowering.llvm.running_sums import OrderedSums, ordered_sums, transpose
from presk.lowering.llvm.streaming_stores import STREAMING_BYTES, Streaming, streaming
from presk.lowering.llvm.target import target_attributes
from presk.lowering.llvm.translator import translate_kernel, translate_module

__all__ = [
    "KERNEL_TYPE",
    "PREFETCH_BYTES",
    "STREAMING_BYTES",
    "OrderedSums",
    "Streaming",
    "bf16_to_f32",
    "buffer_bytes",
    "emit_math",
    "f32_to_bf16",
    "f64_to_f32_odd",
    "ordered_sums",
    "streaming",
    "target_attributes",
    "translate_kernel",
    "translate_module",
    "transpose",
]
