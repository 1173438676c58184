"""Helpers of the tests of passes that rewrite host programs: their launches, a kernel by name, results as bytes."""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from presk.dialects import psk_kernel as pk
from presk.interp.kernel import KernelInterpreter
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.jit.executor import HostProgram


def launches(module: ModuleOp) -> list[pk.LaunchOp]:
    return [op for op in module.walk() if isinstance(op, pk.LaunchOp)]


def kernel(module: ModuleOp, name: str) -> pk.KernelOp:
    return next(op for op in module.walk() if isinstance(op, pk.KernelOp) and op.sym_name.data == name)


def run_bytes(module: ModuleOp, runner: Any, leaves: list[np.ndarray]) -> list[tuple[str, bytes]]:
    """Each result's dtype and bytes."""
    return [(str(a.dtype), np.ascontiguousarray(a).tobytes()) for a in HostProgram(module, runner)(leaves)]


def same_results(module: ModuleOp, after: ModuleOp, native: Any) -> None:
    """`after` computes `module`'s bytes on the kernel interpreter and natively, on inputs that are not round."""
    shapes = HostProgram(module, KernelInterpreter().runner).inputs
    leaves = [(np.arange(int(np.prod(shape))) * 0.37 - 1.1).reshape(shape).astype(dtype) for shape, dtype in shapes]
    reference = run_bytes(module, KernelInterpreter().runner, leaves)
    assert run_bytes(after, KernelInterpreter().runner, leaves) == reference
    assert run_bytes(after, native, leaves) == reference


def parse_host_module(kernels: str, body: str, args: str, results: str) -> ModuleOp:
    """A verified module of `kernels` (their text) and a host program `@f(args) -> (results)` whose body is `body`."""
    text = f"""builtin.module {{
{kernels}
  psk_kernel.host @f({args}) -> ({results}) {{
{body}
  }}
}}"""
    module = parse_module(presk_context(), text, "<test>").module
    module.verify()
    return module
