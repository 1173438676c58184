"""The functions an entry reaches: what a command on one entry must transform, and nothing else.

Every op that runs another function names it in a `callee` property:
`func.call`, `psk_core.fold` and the gradient requests (`psk_core.grad`,
`value_and_grad`). So reachability is one walk over those, without a list
of op kinds to keep up to date.
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.dialects.builtin import ModuleOp, SymbolRefAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation

from presk.diagnostics import PreskError


def find_entry(module: ModuleOp, entry: str) -> FuncOp:
    """The function `@entry` of `module`, or E4004 naming the functions there are."""
    funcs = {op.sym_name.data: op for op in module.walk() if isinstance(op, FuncOp)}
    if entry not in funcs:
        known = ", ".join(sorted(funcs)) or "none"
        raise PreskError("E4004", f"no function @{entry} in the program (functions: {known})")
    return funcs[entry]


def callees(fn: Operation) -> set[str]:
    """The names of the functions the ops inside `fn` run."""
    return {c.string_value() for op in fn.walk() if isinstance(c := op.properties.get("callee"), SymbolRefAttr)}


def reachable_functions(module: ModuleOp, roots: Iterable[str]) -> set[str]:
    """The names of the functions of `module` that `roots` call, directly or not, `roots` included.

    A root the module does not define is left out (the caller reports
    unknown entries with its own error).
    """
    functions = {op.sym_name.data: op for op in module.body.block.ops if isinstance(op, FuncOp)}
    reached: set[str] = set()
    pending = [name for name in roots if name in functions]
    while pending:
        name = pending.pop()
        if name in reached:
            continue
        reached.add(name)
        pending.extend(callee for callee in callees(functions[name]) if callee in functions)
    return reached
