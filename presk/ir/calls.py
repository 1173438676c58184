"""The functions an entry reaches: what a command on one entry must transform, and nothing else.

Every op that runs another function names it in a `callee` property:
`func.call`, `psk_core.fold` and the gradient requests (`psk_core.grad`,
`value_and_grad`). So reachability is one walk over those, without a list
of op kinds to keep up to date.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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


def _functions(module: ModuleOp) -> dict[str, FuncOp]:
    """The module's top-level functions by name: the ones a `callee` names."""
    return {op.sym_name.data: op for op in module.body.block.ops if isinstance(op, FuncOp)}


def callees(fn: Operation) -> set[str]:
    """The names of the functions the ops inside `fn` run."""
    return {name for name, _ in call_sites(fn)}


def reachable_functions(module: ModuleOp, roots: Iterable[str]) -> set[str]:
    """The names of the functions of `module` that `roots` call, directly or not, `roots` included.

    A root the module does not define is left out (the caller reports
    unknown entries with its own error).
    """
    functions = _functions(module)
    reached: set[str] = set()
    pending = [name for name in roots if name in functions]
    while pending:
        name = pending.pop()
        if name in reached:
            continue
        reached.add(name)
        pending.extend(callee for callee in callees(functions[name]) if callee in functions)
    return reached


def call_sites(fn: Operation) -> list[tuple[str, Operation]]:
    """Each op inside `fn` that runs another function, with that function's name, in `fn`'s order."""
    return [(c.string_value(), op) for op in fn.walk() if isinstance(c := op.properties.get("callee"), SymbolRefAttr)]


def recursive_call(module: ModuleOp) -> tuple[Operation, list[str]] | None:
    """The first call (in a depth-first walk from the functions in source order) that closes a cycle of calls,
    with the cycle's functions from the one it calls back to the caller; None when no function reaches itself.

    PSK-Core has no recursion: a loop is a `psk_core.fold`, and every lowering inlines calls. The walk keeps
    its own stack, so a chain of thousands of calls is no deeper on Python's."""
    functions = _functions(module)
    sites = {name: [(callee, op) for callee, op in call_sites(fn) if callee in functions] for name, fn in functions.items()}
    done: set[str] = set()
    for root in functions:
        if root in done:
            continue
        path: list[str] = [root]
        on_path = {root}
        cursors = [0]
        while path:
            name, i = path[-1], cursors[-1]
            if i == len(sites[name]):
                done.add(name)
                on_path.discard(path.pop())
                cursors.pop()
                continue
            cursors[-1] += 1
            callee, op = sites[name][i]
            if callee in on_path:
                return op, path[path.index(callee) :]
            if callee not in done:
                path.append(callee)
                on_path.add(callee)
                cursors.append(0)
    return None


def call_depth(module: ModuleOp, entry: str) -> int:
    """The most calls nested inside one another from `entry` (0: it calls nothing), in a module without recursion."""
    functions = _functions(module)
    calls = {name: [c for c in callees(fn) if c in functions] for name, fn in functions.items()}
    depth: dict[str, int] = {}
    for name in _callees_first(calls, entry):
        depth[name] = max((depth[c] + 1 for c in calls[name]), default=0)
    return depth.get(entry, 0)


def _callees_first(calls: Mapping[str, list[str]], entry: str) -> list[str]:
    """The functions `entry` reaches, each after every function it calls (without recursion on Python's stack)."""
    order: list[str] = []
    seen: set[str] = set()
    stack: list[tuple[str, bool]] = [(entry, False)] if entry in calls else []
    while stack:
        name, expanded = stack.pop()
        if expanded:
            order.append(name)
            continue
        if name in seen:
            continue
        seen.add(name)
        stack.append((name, True))
        stack.extend((c, False) for c in calls[name] if c not in seen)
    return order
