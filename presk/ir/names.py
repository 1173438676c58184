"""The names `presk dump --stage core` prints for a function's values: sites are named by them.

A site is `"<function>/%<n>"` with the binding exactly as printed. xDSL keeps
only non-numeric names as hints (`%x`), and numbers the others in printing
order, per function; asking xDSL's own printer for its names is the only way
to agree with it in every case (hints used twice, unnamed values).
"""

from __future__ import annotations

import io

from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, SSAValue
from xdsl.printer import Printer


class _NamingPrinter(Printer):
    """xDSL's printer without its attributes and types.

    Names are given as values are printed, and no attribute or type defines a
    value, so leaving them out gives the same names; they are most of the
    printing's time (a fused program's sites are named for every function).
    """

    def print_attribute(self, attribute: Attribute) -> None:
        pass


def binding_names(func: FuncOp) -> dict[SSAValue, str]:
    """Every value of `func` with the name the printer gives it (without the `%`)."""
    printer = _NamingPrinter(stream=io.StringIO())
    printer.print_op(func)
    return dict(printer._ssa_values)  # noqa: SLF001 (the printer's own table; no public accessor)


def site_name(func: FuncOp, name: str) -> str:
    return f"{func.sym_name.data}/%{name}"
