"""PSK-Kernel: explicit loop nests over buffers, and the host program that launches them.

The lowest dialect of presk. A `psk_kernel.kernel` is one loop nest over
typed buffers (builtin `memref`s: static shape, element type, row-major),
written with upstream ops where they fit: `scf.for` loops (a loop whose
iterations are independent carries the unit attribute `psk_kernel.parallel`,
and, when a layout splits it, `psk_kernel.workers = p`), `memref.load` and
`memref.store`, `arith` for arithmetic and conversions (`arith.truncf` to
bf16 rounds to nearest even), `math` for `fma`, `sqrt` and the
transcendentals, which mean presk's own polynomials (`presk.lowering.mathlib`)
on both executors, so that they give the same bits everywhere.

A `psk_kernel.host` is the launch program of one entry: it receives the
entry's arguments as buffers (a parameter tree flattened to its leaves),
allocates the others, launches kernels in order, and returns buffers:

    psk_kernel.host @loss(%0: memref<92x64xf32>, ...) -> memref<f32> {
      %5 = psk_kernel.alloc : memref<2x8x64xf32>
      psk_kernel.launch @gather(%0, %1, %5) {site = "GPT.apply/%5"}
      %9 = psk_kernel.view %2[1] : memref<2x64x64xf32> to memref<64x64xf32>
      psk_kernel.return %30 : memref<f32>
    }

Views (a layer of a stacked tree, a split or merged axis) move no data: a
row-major buffer reshaped, or one index of its leading axis, is a buffer.

A kernel may also hold buffers of its own, `psk_kernel.scratch`: values one
iteration of its outer loops writes and reads back, that nothing outside
the kernel sees (`psk-promote-to-scratch`). Native code keeps one block of
rows of them on the worker's stack, so they stay in the core's caches and
never travel to memory.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    FunctionType,
    IntAttr,
    IntegerAttr,
    MemRefType,
    NoneAttr,
    StringAttr,
    SymbolRefAttr,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsolatedFromAbove, IsTerminator, NoTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

PARALLEL = "psk_kernel.parallel"
"""Unit attribute of an `scf.for` whose iterations are independent (may be vectorised or split)."""
WORKERS = "psk_kernel.workers"
"""Integer attribute of a parallel `scf.for` divided among that many workers."""
PREFETCH_AHEAD = "psk_kernel.prefetch_ahead"
"""Integer attribute of a `memref.load`: native code also asks for the cache line that many bytes past
the load's address, a hint that changes no value (the kernel interpreter ignores it)."""
SUBNORMAL_NUMERATOR = "psk_kernel.subnormal_numerator"
"""Unit attribute of an `arith.divf` whose numerator is often subnormal (a softmax's exponentials):
native code divides those lanes by integer and normal arithmetic, with the same bits (`mathlib_spec.divide`)."""


def _buffer(t: Attribute, what: str) -> MemRefType:
    if not isinstance(t, MemRefType):
        raise VerifyException(f"{what} is a buffer (memref), not {t}")
    return t


def _parse_signature(parser: Parser) -> tuple[str, list[Parser.Argument]]:
    name = parser.parse_symbol_name().data
    args = parser.parse_comma_separated_list(parser.Delimiter.PAREN, lambda: parser.parse_argument())
    return name, args


def _print_arguments(printer: Printer, block: Block) -> None:
    printer.print_string("(")
    printer.print_list(block.args, printer.print_block_argument)
    printer.print_string(")")


@irdl_op_definition
class KernelOp(IRDLOperation):
    """One loop nest over buffers: `psk_kernel.kernel @dot "Linear.apply/%2" (%x: memref<..>, ...) { ... }`.

    Buffers are in the kernel's order: its inputs, then its output. The
    site names the launch it implements; one kernel serves every launch of
    the same site at the same shapes (the layers of a fold).
    """

    name = "psk_kernel.kernel"
    sym_name = prop_def(StringAttr)
    site = prop_def(StringAttr)
    body = region_def("single_block")
    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove(), NoTerminator())

    def __init__(self, name: str, site: str, buffers: Sequence[MemRefType], body: Sequence[Operation] = ()) -> None:
        block = Block(list(body), arg_types=list(buffers))
        super().__init__(properties={"sym_name": StringAttr(name), "site": StringAttr(site)}, regions=[Region(block)])

    @property
    def buffers(self) -> tuple[MemRefType, ...]:
        return tuple(_buffer(a.type, "a kernel argument") for a in self.body.block.args)

    def verify_(self) -> None:
        for arg in self.body.block.args:
            _buffer(arg.type, f"argument {arg.index} of kernel @{self.sym_name.data}")

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name, args = _parse_signature(parser)
        site = parser.parse_str_literal(" (the kernel's site)")
        attrs = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region(args)
        op = cls.create(
            properties={"sym_name": StringAttr(name), "site": StringAttr(site)},
            attributes=attrs.data if attrs else {},
            regions=[region],
        )
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        _print_arguments(printer, self.body.block)
        printer.print_string(" ")
        printer.print_string_literal(self.site.data)
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)


@irdl_op_definition
class HostOp(IRDLOperation):
    """The launch program of one entry: buffers in, kernels launched in order, buffers out."""

    name = "psk_kernel.host"
    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    result_paths = opt_prop_def(ArrayAttr[StringAttr])
    """The dotted path of each result leaf in the entry's result tree ("" for a lone tensor)."""
    argument_paths = opt_prop_def(ArrayAttr[StringAttr])
    body = region_def("single_block")
    traits = lazy_traits_def(lambda: (SymbolOpInterface(), IsolatedFromAbove()))

    def __init__(
        self,
        name: str,
        inputs: Sequence[MemRefType],
        outputs: Sequence[MemRefType],
        body: Sequence[Operation] = (),
        argument_paths: Sequence[str] = (),
        result_paths: Sequence[str] = (),
    ) -> None:
        block = Block(list(body), arg_types=list(inputs))
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "function_type": FunctionType.from_lists(list(inputs), list(outputs)),
                "argument_paths": ArrayAttr([StringAttr(p) for p in argument_paths]),
                "result_paths": ArrayAttr([StringAttr(p) for p in result_paths]),
            },
            regions=[Region(block)],
        )

    @classmethod
    def parse(cls, parser: Parser) -> HostOp:
        name, args = _parse_signature(parser)
        parser.parse_punctuation("->")
        outputs = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region(args)
        properties: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "function_type": FunctionType.from_lists([a.type for a in args], outputs),
        }
        extra = dict(attrs.data) if attrs else {}
        for key in ("argument_paths", "result_paths"):
            if key in extra:
                properties[key] = extra.pop(key)
        return cls.create(properties=properties, attributes=extra, regions=[region])

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        _print_arguments(printer, self.body.block)
        printer.print_string(" -> (")
        printer.print_list(self.function_type.outputs.data, printer.print_attribute)
        printer.print_string(")")
        extra: dict[str, Attribute] = dict(self.attributes)
        for key in ("argument_paths", "result_paths"):
            value = self.properties.get(key)
            if value is not None:
                extra[key] = value
        printer.print_op_attributes(extra, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)


@irdl_op_definition
class AllocOp(IRDLOperation):
    """A buffer the host allocates: `%b = psk_kernel.alloc : memref<2x8xf32>`."""

    name = "psk_kernel.alloc"
    result = result_def(MemRefType)
    traits = traits_def(HasParent(HostOp))
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, t: MemRefType) -> None:
        super().__init__(result_types=[t])


def folded_shape(t: MemRefType, rows: Sequence[int]) -> tuple[int, ...]:
    """The shape native code holds of a scratch of type `t` folded onto `rows` of its leading axes."""
    return (*rows, *t.get_shape()[len(rows) :])


@irdl_op_definition
class ScratchOp(IRDLOperation):
    """A buffer private to one call of its kernel, folded onto one block of rows of its leading axes.

    `%s = psk_kernel.scratch rows [1, 8] : memref<8x256x384xf32>` reads and
    writes like a buffer of its type: element `[i0, i1, k]` is itself, and
    the kernel interpreter holds all of it. Native code keeps only
    `memref<1x8x384xf32>` on the worker's stack and puts `[i0, i1, k]` at
    `[i0 mod 1, i1 mod 8, k]`. That is the same buffer as long as every
    access along leading axis `j` is `rows[j]·t_j + e`, `t_j` the counter of
    the kernel's `j`-th outer loop and `0 <= e < rows[j]`: each iteration of
    those loops then touches only its own block, which no other iteration
    touches, and a worker runs its iterations one after the other
    (`psk-promote-to-scratch` places a scratch only there). It is
    uninitialised: a kernel writes it before it reads it.
    """

    name = "psk_kernel.scratch"
    rows = prop_def(ArrayAttr[IntegerAttr])
    result = result_def(MemRefType)
    traits = traits_def(HasParent(KernelOp))

    def __init__(self, t: MemRefType, rows: Sequence[int]) -> None:
        super().__init__(result_types=[t], properties={"rows": ArrayAttr([IntegerAttr(r, 64) for r in rows])})

    @property
    def folded_rows(self) -> tuple[int, ...]:
        return tuple(r.value.data for r in self.rows.data)

    @classmethod
    def parse(cls, parser: Parser) -> ScratchOp:
        parser.parse_keyword("rows")
        rows = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False, allow_negative=False)
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        op = cls.create(
            result_types=[t], properties={"rows": ArrayAttr([IntegerAttr(r, 64) for r in rows])}, attributes=attrs
        )
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" rows [{', '.join(str(r) for r in self.folded_rows)}]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @property
    def stored_shape(self) -> tuple[int, ...]:
        """The shape native code allocates: one block of rows of the leading axes, the others whole."""
        return folded_shape(_buffer(self.result.type, "a scratch"), self.folded_rows)

    def verify_(self) -> None:
        t = _buffer(self.result.type, "a scratch")
        shape, rows = t.get_shape(), self.folded_rows
        if any(n < 0 for n in shape) or not isinstance(t.layout, NoneAttr):
            raise VerifyException(f"a scratch has a static shape and the row-major layout, not {t}")
        if len(rows) > len(shape):
            raise VerifyException(f"a scratch of {t} folds {len(rows)} leading axes: it has {len(shape)}")
        for axis, (r, n) in enumerate(zip(rows, shape)):
            if not 1 <= r <= n:
                raise VerifyException(f"a scratch keeps 1 to {n} rows of axis {axis} of {t}, not {r}")


@irdl_op_definition
class ViewOp(IRDLOperation):
    """The same data seen with another shape, or one index of its leading axis: no copy.

    `psk_kernel.view %b[1] : memref<2x64xf32> to memref<64xf32>` (a layer),
    `psk_kernel.view %b : memref<2x8x64xf32> to memref<2x8x2x32xf32>` (a split axis).
    """

    name = "psk_kernel.view"
    source = operand_def(MemRefType)
    index = opt_prop_def(IntAttr)
    result = result_def(MemRefType)
    traits = traits_def(HasParent(HostOp))

    def __init__(self, source: SSAValue, t: MemRefType, index: int | None = None) -> None:
        super().__init__(
            operands=[source], result_types=[t], properties={"index": IntAttr(index)} if index is not None else {}
        )

    def verify_(self) -> None:
        src, dst = _buffer(self.source.type, "a view's source"), _buffer(self.result.type, "a view")
        if src.element_type != dst.element_type:
            raise VerifyException("a view keeps its buffer's element type")
        shape = src.get_shape()
        if self.index is not None:
            if not shape or not 0 <= self.index.data < shape[0]:
                raise VerifyException(f"view index {self.index.data} is outside the leading axis of {src}")
            shape = shape[1:]
        count = 1
        for n in shape:
            count *= n
        out = 1
        for n in dst.get_shape():
            out *= n
        if count != out:
            raise VerifyException(f"a view of {count} elements cannot be {dst}")

    @classmethod
    def parse(cls, parser: Parser) -> ViewOp:
        unresolved = parser.parse_unresolved_operand()
        index = None
        if parser.parse_optional_punctuation("[") is not None:
            index = parser.parse_integer(allow_boolean=False, allow_negative=False)
            parser.parse_punctuation("]")
        parser.parse_punctuation(":")
        source = parser.resolve_operand(unresolved, parser.parse_type())
        parser.parse_keyword("to")
        t = parser.parse_type()
        assert isinstance(t, MemRefType)
        return cls(source, t, index)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.source)
        if self.index is not None:
            printer.print_string(f"[{self.index.data}]")
        printer.print_string(" : ")
        printer.print_attribute(self.source.type)
        printer.print_string(" to ")
        printer.print_attribute(self.result.type)


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """Run a kernel on buffers: `psk_kernel.launch @dot(%x, %w, %out) {site = "Linear.apply/%2"}`."""

    name = "psk_kernel.launch"
    kernel = prop_def(SymbolRefAttr)
    buffers = var_operand_def(MemRefType)
    traits = traits_def(HasParent(HostOp))
    assembly_format = "$kernel `(` $buffers `)` attr-dict `:` type($buffers)"

    def __init__(self, kernel: str, buffers: Sequence[SSAValue], site: str) -> None:
        super().__init__(
            operands=[list(buffers)],
            properties={"kernel": SymbolRefAttr(kernel)},
            attributes={"site": StringAttr(site)},
        )


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """The host program's results."""

    name = "psk_kernel.return"
    values = var_operand_def(MemRefType)
    traits = traits_def(IsTerminator(), HasParent(HostOp))
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, values: Sequence[SSAValue]) -> None:
        super().__init__(operands=[list(values)])


from presk.dialects.psk_kernel_structured import ContractOp, SoftmaxOp  # noqa: E402  (they need nothing above)

PSKKernel = Dialect(
    "psk_kernel",
    [KernelOp, HostOp, AllocOp, ScratchOp, ViewOp, LaunchOp, ReturnOp, ContractOp, SoftmaxOp],
    [],
)
