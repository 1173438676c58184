"""Binding symbolic axis sizes: compile-time constants and run-time dimension variables.

A module declares constants with `psk_core.const_dim`; any other name in a
type is a dimension variable, bound by `--dim` (or `psk-bind`). This module
turns the declarations and the user's bindings into one environment
`name -> int`, refusing what cannot be bound with an E4001/E4002 error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute

from presk.diagnostics import PreskError
from presk.dialects.psk_core import ConstDimOp
from presk.dialects.psk_core_sizes import parse_size_expr
from presk.dialects.psk_core_types import MAX_SIZE, map_type, shown_size

SIZE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A size name: what `--dim NAME=N` and size expressions can refer to."""



def evaluate(tokens: list[str | int], env: Mapping[str, int], what: str) -> int:
    value = _operand(tokens[0], env, what)
    for op, operand in zip(tokens[1::2], tokens[2::2]):
        rhs = _operand(operand, env, what)
        if op == "*":
            value *= rhs
        elif value % rhs:
            raise PreskError("E4002", f"{what} = {value} / {rhs} does not divide exactly")
        else:
            value //= rhs
    return value


def _operand(token: str | int, env: Mapping[str, int], what: str) -> int:
    if isinstance(token, int):
        return token
    if token not in env:
        raise PreskError("E4002", f"{what} uses '{token}', which is not bound")
    return env[token]


def parse_bindings(items: Iterable[str], flag: str) -> dict[str, int]:
    """Parse `NAME=INT` items (from `--dim B=2` or `dims="B=2,T=8"`)."""
    out: dict[str, int] = {}
    for item in items:
        for part in filter(None, (p.strip() for p in item.split(","))):
            name, eq, value = part.partition("=")
            name, value = name.strip(), value.strip()
            if not eq or not SIZE_NAME.fullmatch(name) or not re.fullmatch(r"\d+", value):
                raise PreskError("E4001", f"{flag} '{part}': expected NAME=POSITIVE_INTEGER, e.g. {flag} B=2")
            if len(value.lstrip("0")) > len(str(MAX_SIZE)):  # before int(): Python reads at most 4300 digits
                raise PreskError("E4001", f"{flag} '{name}=...' ({len(value)} digits): sizes are at most 2^40 = {MAX_SIZE}")
            if int(value) <= 0:
                raise PreskError("E4001", f"{flag} '{part}': sizes are positive")
            if int(value) > MAX_SIZE:
                raise PreskError("E4001", f"{flag} '{name}={shown_size(int(value))}': sizes are at most 2^40 = {MAX_SIZE}")
            if name in out and out[name] != int(value):
                raise PreskError("E4001", f"{flag} {name} is bound twice, to {out[name]} and to {value}")
            out[name] = int(value)
    return out


def declared_constants(module: ModuleOp) -> dict[str, int | str]:
    return {op.sym_name.data: op.size for op in module.walk() if isinstance(op, ConstDimOp)}


def size_names(types: Iterable[Attribute]) -> set[str]:
    """Every symbolic size named in these types."""
    names: set[str] = set()

    def visit(size: int | str) -> int | str:
        if isinstance(size, str):
            names.add(size)
        return size

    for t in types:
        map_type(t, visit)
    return names


def resolve(
    module: ModuleOp,
    consts: Mapping[str, int] | None = None,
    dims: Mapping[str, int] | None = None,
    flags: tuple[str, str] = ("--const", "--dim"),
) -> dict[str, int]:
    """One environment for the whole module: constants (declared, overridden by `consts`) and dims.

    Refuses a `consts` entry that names no declared constant and a `dims`
    entry that names a declared constant, since either is a typo that would
    otherwise be silently ignored.
    """
    consts, dims = dict(consts or {}), dict(dims or {})
    const_flag, dim_flag = flags
    declared = declared_constants(module)
    for name in consts:
        if name not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise PreskError("E4001", f"{const_flag} {name}: no constant of that name is declared (declared: {known})")
    for name in dims:
        if name in declared:
            raise PreskError(
                "E4001", f"{dim_flag} {name}: '{name}' is a constant of the program; use {const_flag} {name}=..."
            )
    env: dict[str, int] = dict(dims)
    pending = dict(declared)
    for name, value in consts.items():
        env[name] = value
        pending.pop(name)
    for name, value in list(pending.items()):
        if isinstance(value, int):
            env[name] = value
            pending.pop(name)
    # Expressions may refer to each other in any order: evaluate until fixed.
    while pending:
        progressed = False
        for name, value in list(pending.items()):
            tokens = parse_size_expr(str(value))
            if all(isinstance(t, int) or t in env or t in "*/" for t in tokens):
                env[name] = evaluate(tokens, env, f"constant {name}")
                if env[name] > MAX_SIZE:
                    raise PreskError("E4002", f"constant {name} = {value} is {shown_size(env[name])}; sizes are at most "
                                              f"2^40 = {MAX_SIZE}")  # fmt: skip
                pending.pop(name)
                progressed = True
        if not progressed:
            raise PreskError("E4002", f"constants {', '.join(sorted(pending))} depend on unbound names or on each other")
    return env
