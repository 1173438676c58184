"""The LLVM module a translation fills, for the host CPU: triple, function attributes, intrinsics.

Function attributes give LLVM the host CPU (`"target-cpu"`,
`"target-features"` from `Machine`) and, with AVX-512,
`"prefer-vector-width"="512"`, without which the loop vectoriser stops at
256-bit vectors on this CPU. llvmlite has no string function attributes,
hence `FunctionAttributes`.
"""

from __future__ import annotations

from collections.abc import Iterable

from llvmlite import ir

from presk.target import Machine

__all__ = ["FunctionAttributes", "intrinsic", "new_module", "target_attributes"]


class FunctionAttributes(ir.FunctionAttributes):
    """llvmlite's function attributes plus `"key"="value"` string attributes."""

    def __init__(self, strings: dict[str, str], flags: Iterable[str] = ()) -> None:
        self.strings = dict(strings)
        super().__init__(flags)

    def __bool__(self) -> bool:
        return bool(self.strings) or super().__len__() > 0

    def _to_list(self, ret_type: ir.Type) -> list[str]:
        return [*super()._to_list(ret_type), *(f'"{k}"="{v}"' for k, v in self.strings.items())]


def target_attributes(machine: Machine) -> dict[str, str]:
    """The string function attributes that make LLVM generate code for `machine`."""
    attrs = {"target-cpu": machine.cpu_name, "target-features": machine.feature_string()}
    if machine.vector_bits >= 512:
        attrs["prefer-vector-width"] = "512"
    return attrs


def new_module(name: str, machine: Machine) -> ir.Module:
    module = ir.Module(name=name)
    module.triple = machine.triple
    return module


def intrinsic(module: ir.Module, name: str, ty: ir.Type, arity: int) -> ir.Function:
    """An overloaded float intrinsic (`llvm.fma.f32`), declared once; same naming as mathlib's."""
    suffix = f"v{ty.count}{ty.element.intrinsic_name}" if isinstance(ty, ir.VectorType) else ty.intrinsic_name
    full = f"{name}.{suffix}"
    existing = module.globals.get(full)
    if isinstance(existing, ir.Function):
        return existing
    return ir.Function(module, ir.FunctionType(ty, [ty] * arity), full)
