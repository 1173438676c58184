"""The layout a kernel still has to apply, shared by the layout passes.

`psk-lower-kernel` stamps each kernel of a nest that states decisions, and
each kernel holding a structured op, with its nest's layout
(`layout = #psk_realize.layout<...>`, stated decisions and resolved
defaults) and with the nest's source location. Each layout pass applies the
decisions it owns and removes them from the attribute (`consume`), so the
attribute always shows what is left to do, and disappears once every pass
has run: the kernels the executors see carry no layout, only its effect.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from presk.diagnostics import PreskError
from presk.dialects import psk_kernel as kernel
from presk.dialects.psk_realize import LayoutAttr, layout_error
from presk.ir.locations import error_at

Violation = tuple[int | None, str, str]
"""A broken launch condition: (the seed's condition, or None for the epilogue's own; the decision; why)."""

LAYOUT = "layout"
"""The kernel attribute holding the decisions not applied yet."""


def pending(k: kernel.KernelOp) -> LayoutAttr | None:
    found = k.attributes.get(LAYOUT)
    return found if isinstance(found, LayoutAttr) else None


def resolved(k: kernel.KernelOp) -> dict[str, Any]:
    """The kernel's pending decisions, stated over defaults."""
    layout = pending(k)
    return {**layout.defaults, **layout.stated} if layout is not None else {}


def stated(k: kernel.KernelOp) -> dict[str, Any]:
    layout = pending(k)
    return layout.stated if layout is not None else {}


def replace_decision(k: kernel.KernelOp, name: str, value: Any) -> None:
    """Restate one pending decision (a pass that moves a loop moves what later passes will find)."""
    layout = pending(k)
    assert layout is not None
    k.attributes[LAYOUT] = LayoutAttr({**layout.stated, name: value}, layout.defaults)


def consume(k: kernel.KernelOp, names: Iterable[str]) -> None:
    """The decisions `names` are applied: remove them (and the attribute once it is empty)."""
    layout = pending(k)
    if layout is None:
        return
    gone = set(names)
    left_stated = {n: v for n, v in layout.stated.items() if n not in gone}
    left_defaults = {n: v for n, v in layout.defaults.items() if n not in gone}
    if left_stated or left_defaults:
        k.attributes[LAYOUT] = LayoutAttr(left_stated, left_defaults)
    else:
        del k.attributes[LAYOUT]


def kernel_of(op: Operation) -> kernel.KernelOp:
    owner = op.parent_op()
    while owner is not None and not isinstance(owner, kernel.KernelOp):
        owner = owner.parent_op()
    assert owner is not None, f"{op.name} outside a kernel"
    return owner


def layout_refusal(at: Operation, nest: str, condition: int | None, decision: str, reason: str) -> PreskError:
    """E7002 naming the nest, the decision and the seed's condition, placed at `at`'s source line."""
    text = reason if condition is None else f"condition {condition}: {reason}"
    return error_at(at, "E7002", layout_error(nest, decision, text)[len("E7002: ") :])


def refuse(k: kernel.KernelOp, condition: int | None, decision: str, reason: str) -> PreskError:
    """`layout_refusal` of the kernel's nest, at the nest's line."""
    return layout_refusal(k, k.site.data, condition, decision, reason)


def kernels(module: ModuleOp) -> Iterator[kernel.KernelOp]:
    return (op for op in list(module.body.block.ops) if isinstance(op, kernel.KernelOp))


def launches_of(module: ModuleOp, name: str) -> list[kernel.LaunchOp]:
    return [
        op for op in module.walk() if isinstance(op, kernel.LaunchOp) and op.kernel.string_value() == name
    ]


def unique_name(base: str, taken: Iterable[str]) -> str:
    """`base`, or `base_1`, `base_2`, ... : the first name not in `taken`."""
    names = set(taken)
    if base not in names:
        return base
    count = 1
    while f"{base}_{count}" in names:
        count += 1
    return f"{base}_{count}"


def fresh_name(module: ModuleOp, base: str) -> str:
    """A kernel name no kernel of `module` has yet (`unique_name`)."""
    return unique_name(base, (k.sym_name.data for k in kernels(module)))
