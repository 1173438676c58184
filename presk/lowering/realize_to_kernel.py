"""`psk-lower-kernel{entry=F}`: PSK-Realize to PSK-Kernel, one entry at bound shapes.

Each launch of the entry becomes a `psk_kernel.launch` of the kernel of its
site (a group over a parameter tree launches once per leaf), in the order
the program runs them: calls are followed into their callee, and a fold
into its callee once per layer, on a view of that layer of the stacked
tree. Records, tuples, fields and projections are resolved here, at the
host level, so kernels see only buffers; a split or merge is a view;
a constant is a literal inside the kernels that read it.

The host program receives the entry's arguments flattened to their leaves
(a record's fields in order, dotted paths kept in `argument_paths`) and
returns its results the same way. Buffers hold each value in the storage
type of the site that made it (the arguments, in the program's default);
kernels compute in their site's arithmetic type.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, FunctionType, MemRefType, ModuleOp, StringAttr
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass

from presk.diagnostics import PreskError
from presk.dialects import psk_core as core
from presk.dialects import psk_kernel as kernel
from presk.dialects.psk_core import unstack
from presk.dialects.psk_core_types import IndexTensorType, RealType, RecordType, TensorType, TupleType
from presk.dialects.psk_realize import GroupOp, NestOp, SiteOp, resolved_defaults
from presk.dialects.psk_realize_nests import contraction as contraction_of
from presk.interp.realized import argument_storage
from presk.interp.reference import find_entry
from presk.ir.locations import error_at
from presk.lowering import contraction, nests, softmax
from presk.lowering.kernel_builder import INDEX_ELEMENT, KernelBuilder, float_type


@dataclass(frozen=True)
class Leaf:
    """A leaf value at the host level: a buffer, or a literal real."""

    type: Attribute
    buffer: SSAValue | None = None
    constant: float | None = None


Tree = Any
"""A Leaf, or a dict (record) / tuple of trees."""


def buffer_type(t: Attribute, storage: str) -> MemRefType:
    """The buffer of one leaf: index tensors hold i64, reals and tensors the storage type."""
    if isinstance(t, IndexTensorType):
        return MemRefType(INDEX_ELEMENT, list(nests._sizes(t)))
    if isinstance(t, RealType):
        return MemRefType(float_type(storage), [])
    if isinstance(t, TensorType):
        return MemRefType(float_type(storage), list(nests._sizes(t)))
    raise PreskError("E3003", f"psk-lower-kernel: a buffer holds a real or tensor leaf, not {t}")


def leaves_of(tree: Tree, prefix: str = "") -> list[tuple[str, Leaf]]:
    if isinstance(tree, dict):
        return [item for k, v in tree.items() for item in leaves_of(v, f"{prefix}{k}.")]
    if isinstance(tree, tuple):
        return [item for i, v in enumerate(tree) for item in leaves_of(v, f"{prefix}{i}.")]
    return [(prefix.rstrip("."), tree)]


def leaf_at(tree: Tree, path: tuple[Any, ...]) -> Leaf:
    """The leaf of `tree` at `path`; a real (a single leaf) broadcasts into every leaf of a tree."""
    for step in path:
        if isinstance(tree, Leaf):
            return tree
        tree = tree[step]
    assert isinstance(tree, Leaf)
    return tree


def type_paths(t: Attribute) -> list[tuple[tuple[Any, ...], Attribute]]:
    if isinstance(t, RecordType):
        return [((n, *p), leaf) for n, ft in t.fields for p, leaf in type_paths(ft)]
    if isinstance(t, TupleType):
        return [((i, *p), leaf) for i, et in enumerate(t.element_types.data) for p, leaf in type_paths(et)]
    return [((), t)]


def build_tree(t: Attribute, make: Any, path: tuple[Any, ...] = ()) -> Tree:
    if isinstance(t, RecordType):
        return {n: build_tree(ft, make, (*path, n)) for n, ft in t.fields}
    if isinstance(t, TupleType):
        return tuple(build_tree(et, make, (*path, i)) for i, et in enumerate(t.element_types.data))
    return make(path, t)


class HostLowering:
    """Builds the kernels and the host program of one entry."""

    def __init__(self, module: ModuleOp, entry: str) -> None:
        self.module = module
        self.entry = find_entry(module, entry)
        self.default = argument_storage(module) or "f64"
        self.kernels: dict[tuple[Any, ...], kernel.KernelOp] = {}
        self.names: Counter[str] = Counter()
        self.host: kernel.HostOp | None = None
        self.ops: list[Operation] = []

    def lower(self) -> ModuleOp:
        ft = self.entry.function_type
        arg_paths: list[str] = []
        arg_types: list[MemRefType] = []
        for i, t in enumerate(ft.inputs.data):
            name = self.entry.args[i].name_hint or str(i)
            for path, leaf in type_paths(t):
                arg_paths.append(".".join([name, *map(str, path)]))
                arg_types.append(buffer_type(leaf, self.default))
        host = kernel.HostOp(self.entry.sym_name.data, arg_types, [], argument_paths=arg_paths)
        args = iter(host.body.block.args)
        trees = [build_tree(t, lambda p, leaf: Leaf(leaf, next(args))) for t in ft.inputs.data]
        results = self.run_function(self.entry, trees)
        out_values: list[SSAValue] = []
        out_paths: list[str] = []
        for i, tree in enumerate(results):
            for path, leaf in leaves_of(tree):
                out_values.append(self.materialize(leaf))
                out_paths.append(".".join(p for p in (str(i) if len(results) > 1 else "", path) if p))
        for op in self.ops:
            host.body.block.add_op(op)
        host.body.block.add_op(kernel.ReturnOp(out_values))
        host.function_type = FunctionType.from_lists(arg_types, [v.type for v in out_values])
        host.result_paths = ArrayAttr([StringAttr(p) for p in out_paths])
        return ModuleOp([*self.kernels.values(), host])

    # -- the host program ----------------------------------------------------------

    def emit(self, op: Operation) -> SSAValue | None:
        self.ops.append(op)
        return op.results[0] if op.results else None

    def materialize(self, leaf: Leaf) -> SSAValue:
        """A buffer holding `leaf` (a literal result gets a one-element fill kernel)."""
        if leaf.buffer is not None:
            return leaf.buffer
        out_type = buffer_type(leaf.type, self.default)
        out = self.emit(kernel.AllocOp(out_type))
        name = self.kernel_for(("constant", leaf.constant, out_type), "constant", "constant", [out_type],
                               lambda kb, bufs: nests.emit_fill(kb, leaf.constant, leaf.type, bufs[0], float_type(self.default)))  # fmt: skip
        self.emit(kernel.LaunchOp(name, [out], "constant"))
        return out  # type: ignore[return-value]

    def run_function(self, function: func.FuncOp, args: Sequence[Tree]) -> list[Tree]:
        env: dict[SSAValue, Tree] = dict(zip(function.args, args))
        for op in function.body.block.ops:
            if isinstance(op, func.ReturnOp):
                return [env[v] for v in op.arguments]
            for result, value in zip(op.results, self.run_op(op, env)):
                env[result] = value
        raise PreskError("E3003", f"@{function.sym_name.data} has no return")

    def run_op(self, op: Operation, env: dict[SSAValue, Tree]) -> list[Tree]:
        get = [env[v] for v in op.operands]
        if isinstance(op, SiteOp):
            return [self.launch(op, env)]
        if isinstance(op, core.ConstantOp):
            return [Leaf(op.result.type, constant=op.number)]
        if isinstance(op, core.FieldOp):
            return [get[0][op.field_name.data]]
        if isinstance(op, core.RecordOp):
            return [dict(zip((n for n, _ in op.result.type.fields), get))]
        if isinstance(op, core.SetFieldOp):
            return [{**get[0], op.field_name.data: get[1]}]
        if isinstance(op, core.TupleOp):
            return [tuple(get)]
        if isinstance(op, core.ProjOp):
            return [get[0][op.index.data]]
        if isinstance(op, core.SplitOp | core.MergeOp):
            (x,) = get
            return [Leaf(op.result.type, self.emit(kernel.ViewOp(x.buffer, buffer_type(op.result.type, _storage_of(x)))))]
        if isinstance(op, func.CallOp):
            callee = self.function(op.callee.string_value(), op)
            return self.run_function(callee, get)
        if isinstance(op, core.FoldOp):
            callee = self.function(op.callee.string_value(), op)
            stacked, state = get
            layers = op.layer_count()
            if not isinstance(layers, int):
                raise error_at(op, "E4002", f"fold over '{layers}' layers: bind it with --const")
            for layer in range(layers):
                (state,) = self.run_function(callee, [self.layer_of(stacked, unstack(op.stacked.type), layer), state])
            return [state]
        if isinstance(op, core.SizeOp):
            raise error_at(op, "E4002", f"size '{op.size.data}' is not bound; the kernel lowering needs every size")
        raise error_at(op, "E3003", f"psk-lower-kernel: {op.name} outside a group or nest (run psk-fuse first)")

    def function(self, name: str, at: Operation) -> func.FuncOp:
        found = next((f for f in self.module.walk() if isinstance(f, func.FuncOp) and f.sym_name.data == name), None)
        if found is None:
            raise error_at(at, "E2002", f"call to unknown function @{name}")
        return found

    def layer_of(self, stacked: Tree, t: Attribute, layer: int) -> Tree:
        def view(path: tuple[Any, ...], leaf_type: Attribute) -> Leaf:
            leaf = leaf_at(stacked, path)
            out_type = buffer_type(leaf_type, _storage_of(leaf))
            return Leaf(leaf_type, self.emit(kernel.ViewOp(leaf.buffer, out_type, layer)))  # type: ignore[arg-type]

        return build_tree(t, view)

    # -- launches ----------------------------------------------------------------------

    def launch(self, site: SiteOp, env: dict[SSAValue, Tree]) -> Tree:
        storage = site.realization.storage_name if site.realization is not None else self.default
        arith_type = float_type(site.realization.arith_name if site.realization is not None else self.default)
        members = site.members
        defined = {op.results[0] for op in members}
        inputs: list[SSAValue] = []
        for op in members:
            for v in op.operands:
                if v not in defined and v not in inputs:
                    inputs.append(v)

        def leaf_launch(path: tuple[Any, ...], result_type: Attribute) -> Leaf:
            operand_leaves = [(v, leaf_at(env[v], path) if _is_tree(v.type) else leaf_at(env[v], ())) for v in inputs]
            buffers = [leaf.buffer for _, leaf in operand_leaves if leaf.buffer is not None]
            out_type = buffer_type(result_type, storage)
            signature = [b.type for b in buffers] + [out_type]
            literals = tuple(leaf.constant for _, leaf in operand_leaves)
            key = (site.site_name, tuple(signature), literals)

            def body(kb: KernelBuilder, args: Sequence[SSAValue]) -> None:
                arg_iter = iter(args[:-1])
                operands = {
                    v: nests.Operand(leaf.type, buffer=next(arg_iter) if leaf.buffer is not None else None,
                                     constant=leaf.constant)  # fmt: skip
                    for v, leaf in operand_leaves
                }
                self.emit_site(kb, site, operands, result_type, args[-1], arith_type)

            name = self.kernel_for(key, self.kernel_name(site), site.site_name, signature, body)
            out = self.emit(kernel.AllocOp(out_type))
            self.emit(kernel.LaunchOp(name, [*buffers, out], site.site_name))  # type: ignore[list-item]
            return Leaf(result_type, out)

        return build_tree(site.result.type, leaf_launch)

    def kernel_name(self, site: SiteOp) -> str:
        """The seed's names: a group by its root's primitive, a nest by its primitive (`dot`, `mean`, ...)."""
        primitive = site.root.owner if isinstance(site, GroupOp) else site.members[0]
        return primitive.name.split(".", 1)[1]  # type: ignore[union-attr]

    def kernel_for(self, key: tuple[Any, ...], base: str, site: str, signature: Sequence[MemRefType], body: Any) -> str:
        if key not in self.kernels:
            count = self.names[base]
            self.names[base] += 1
            name = base if count == 0 else f"{base}_{count}"
            k = kernel.KernelOp(name, site, signature)
            body(KernelBuilder(k.body.block), list(k.body.block.args))
            self.kernels[key] = k
        return self.kernels[key].sym_name.data

    def emit_site(
        self, kb: KernelBuilder, site: SiteOp, operands: dict[SSAValue, nests.Operand], result_type: Attribute,
        out: SSAValue, arith_type: Attribute,
    ) -> None:  # fmt: skip
        if isinstance(site, GroupOp):
            nests.emit_group(kb, site.members, site.root, operands, result_type, out, arith_type)
            return
        assert isinstance(site, NestOp)
        op = site.primitive
        args = [operands.get(v) for v in op.operands]
        # Defaults resolved again here, at the bound shapes (psk-realize may have run before binding).
        layout = {**resolved_defaults(site), **(site.layout.stated if site.layout is not None else {})}
        if isinstance(op, core.ReductionOp):
            nests.emit_reduction(kb, op, args[0], out, arith_type)  # type: ignore[arg-type]
        elif isinstance(op, core.DotOp | core.EinOp):
            self.emit_product(kb, op, args, out, layout, arith_type)  # type: ignore[arg-type]
        elif isinstance(op, core.SoftmaxOp):
            softmax.emit_softmax(kb, op, args[0], args[1] if len(args) > 1 else None, out, arith_type)  # type: ignore[arg-type]
        elif isinstance(op, core.CrossEntropyOp):
            softmax.emit_cross_entropy(kb, op, args[0], args[1], out, arith_type)  # type: ignore[arg-type]
        elif isinstance(op, core.GatherOp):
            nests.emit_gather(kb, op, args[0], args[1], out, arith_type)  # type: ignore[arg-type]
        elif isinstance(op, core.BroadcastLikeOp):
            nests.emit_copy(kb, args[0], result_type, out, arith_type)  # type: ignore[arg-type]
        elif isinstance(op, core.SumToOp):
            x = args[0]
            summed = [n for n in x.names if n not in _names(result_type)]  # type: ignore[union-attr]
            nests.emit_copy(kb, x, result_type, out, arith_type, summed)  # type: ignore[arg-type]
        elif isinstance(op, core.ZerosLikeOp):
            nests.emit_fill(kb, 0.0, result_type, out, arith_type)
        elif isinstance(op, core.ArangeOp):
            nests.emit_arange(kb, op.result.type, out)
        elif isinstance(op, core.CausalMaskOp):
            nests.emit_causal_mask(kb, op.result.type, out)
        else:
            raise error_at(op, "E3003", f"psk-lower-kernel: no kernel for {op.name}")

    def emit_product(
        self, kb: KernelBuilder, op: core.DotOp | core.EinOp, args: Sequence[nests.Operand], out: SSAValue,
        layout: dict[str, Any], arith_type: Attribute,
    ) -> None:  # fmt: skip
        rt = op.result.type
        if isinstance(op, core.DotOp):
            x, w = (a.type for a in args)
            k = "__k"
            labels = [(*x.names[:-1], k), (k, *w.names[1:])]
            sizes = {**dict(zip(x.names, nests._sizes(x))), **dict(zip(w.names, nests._sizes(w))), k: nests._sizes(x)[-1]}
            summed: tuple[str, ...] = (k,)
        else:
            labels = list(op.operand_labels)
            sizes = {}
            for operand, ls in zip(args, labels):
                sizes.update(zip(ls, nests._sizes(operand.type)))
            summed = op.summed
        c = contraction_of(op)
        if c is not None:
            if isinstance(op, core.DotOp):
                c = replace(c, k=k)
            co = contraction.ContractionOperands(c, tuple(labels[0]), tuple(labels[1]), tuple(rt.names), sizes)
            contraction.emit_contraction(kb, co, args[0], args[1], out, layout, arith_type)
        else:
            nests.emit_product(kb, labels, args, rt, summed, sizes, out, arith_type)


def _is_tree(t: Attribute) -> bool:
    return isinstance(t, RecordType | TupleType)


def _names(t: Attribute) -> tuple[str, ...]:
    return t.names if isinstance(t, TensorType | IndexTensorType) else ()


def _storage_of(leaf: Leaf) -> str:
    assert leaf.buffer is not None and isinstance(leaf.buffer.type, MemRefType)
    element = leaf.buffer.type.element_type
    for name in ("f64", "f32", "bf16"):
        if element == float_type(name):
            return name
    return "f64"


@dataclass(frozen=True)
class LowerToKernel(ModulePass):
    """Lower one entry of a realized program to kernels and a host program."""

    name = "psk-lower-kernel"

    entry: str = ""
    """The entry function (required)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not self.entry:
            raise error_at(op, "E3002", "psk-lower-kernel needs entry=<function>")
        lowered = HostLowering(op, self.entry).lower()
        for child in list(op.body.block.ops):
            child.detach()
            child.erase()
        for child in list(lowered.body.block.ops):
            child.detach()
            op.body.block.add_op(child)
        op.attributes.pop("psk_realize.default", None)
