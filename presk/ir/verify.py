"""Verifying a module and reporting the first failure at the failing operation.

`ModuleOp.verify()` stops at the first failing operation but only says where
by printing the whole module with a marker. presk walks the operations in
source order itself, verifying each one without its nested operations, so it
knows which operation failed and can report the verifier's own message at
that operation's line as an E2001 (or E2002 for a call to a missing
function). A verifier whose message starts with its own code (`E7002: ...`,
as PSK-Realize's do) is reported under that code instead.
"""

from __future__ import annotations

import re

from xdsl.dialects.builtin import ModuleOp, SymbolRefAttr
from xdsl.ir import Operation
from xdsl.traits import NoTerminator, SymbolTable
from xdsl.utils.exceptions import DiagnosticException

from presk.diagnostics import ERROR_CODES, PreskError
from presk.ir.calls import recursive_call
from presk.ir.locations import error_at

_CODED = re.compile(r"^(E\d{4}): ")
"""A verifier message that names its own error code: `E7002: nest "f/%0", ...`."""

_MISSING_SYMBOL = "could not be found in symbol table"
"""xDSL 0.74's message when `func.call`'s callee is missing (xdsl/dialects/func.py)."""


def verify_module(module: ModuleOp, filename: str, text: str, line_offset: int = 0) -> None:
    """Verify every operation of `module` in source order.

    Raises a `PreskError` located at the first failing operation (or its
    nearest located ancestor), with the source line taken from `text`, which
    starts at file line `line_offset + 1`.
    """
    for op in module.walk():
        try:
            _verify_one(op)
        except PreskError as error:
            raise error.located(filename).with_source(text, line_offset) from None
    if (found := recursive_call(module)) is not None:
        op, cycle = found
        through = f" through {', '.join('@' + name for name in cycle[1:])}" if len(cycle) > 1 else ""
        error = error_at(op, "E2001", f"@{cycle[0]} calls itself{through}: PSK-Core functions do not recurse "
                                      "(a loop is a psk_core.fold)")  # fmt: skip
        raise error.located(filename).with_source(text, line_offset) from None


def _verify_one(op: Operation) -> None:
    if (callee := _missing_callee(op)) is not None:
        raise error_at(op, "E2002", f"call to unknown function {callee}")
    try:
        op.verify(verify_nested_ops=False)
        _verify_blocks_not_empty(op)
    except DiagnosticException as error:
        code, message = coded_message(exception_message(error), "E2001")
        if code == "E2001" and _MISSING_SYMBOL in message:
            code = "E2002"
        raise error_at(op, code, message) from None


def coded_message(message: str, default: str) -> tuple[str, str]:
    """The code a message starts with (`E7002: ...`) and the rest; else `default` and the message.

    Only codes presk has (`ERROR_CODES`) count, so prose that happens to
    start like a code is not misfiled.
    """
    if (match := _CODED.match(message)) is not None and match.group(1) in ERROR_CODES:
        return match.group(1), message[match.end() :]
    return default, message


def _missing_callee(op: Operation) -> str | None:
    """`@name` if `op` calls (through a `callee` symbol) a function the module lacks.

    Checked before the verifier so the error is E2002 whatever the calling
    operation's verifier would say.
    """
    callee = op.properties.get("callee", op.attributes.get("callee"))
    if not isinstance(callee, SymbolRefAttr):
        return None
    try:
        found = SymbolTable.lookup_symbol(op, callee)
    except ValueError:  # no symbol table above the call
        return None
    return None if found is not None else str(callee)


def _verify_blocks_not_empty(op: Operation) -> None:
    """The one check `Block.verify` adds; done here so blocks need not be re-walked."""
    if op.has_trait(NoTerminator):
        return
    for region in op.regions:
        if len(region.blocks) == 1 and region.block.first_op is None:
            raise error_at(
                op,
                "E2001",
                f"Operation {op.name} contains empty block in single-block region that expects at least a terminator",
            )


def exception_message(error: BaseException) -> str:
    """The verifier's own message on one line.

    `str(error)` leaves out the printed-IR dump xDSL attaches as a note;
    multi-line constraint messages are joined so `expected-error` can match them.
    """
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return " ".join(lines) if lines else type(error).__name__
