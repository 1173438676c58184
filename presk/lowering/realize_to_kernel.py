"""`psk-lower-kernel{entry=F}`: PSK-Realize to PSK-Kernel, one entry at bound shapes.

Each launch of the entry becomes a `psk_kernel.launch` of the kernel of its
site (a group over a parameter tree launches once per leaf), in the order
the program runs them: calls are followed into their callee, and a fold
into its callee once per layer, on a view of that layer of the stacked
tree. Records, tuples, fields and projections are resolved here, at the
host level, so kernels see only buffers; a split or merge is a view;
a constant is a literal inside the kernels that read it.

Layouts (the seed's table, `presk.dialects.psk_realize_layout`) are not
applied here but by the layout passes that follow (`psk-epilogue`, `psk-pack`, `psk-tile`,
`psk-softmax-passes`, `psk-split`, `psk-vectorize`): a contraction nest's
kernel holds one structured `psk_kernel.contract`, a softmax's one
`psk_kernel.softmax` (`presk.dialects.psk_kernel_structured`), and each
nest's kernel carries its location and the decisions left to apply
(`layout = #psk_realize.layout<...>`, `presk.passes.kernel_layout`).

Before a nest is lowered, its layout is checked against its shapes,
types and this machine by the plan's second check (`psk-verify-layout`,
`presk.passes.verify_layout.layout_violation`), then by this lowering's own
guard of what the passes rely on (`contraction_violation`). Both refuse
with E7002, naming the nest, the decision and the seed's condition: 3 (the
tile, the k-block and the J-block fit their axes; a row-wise
contraction states none of the tiled form's tile, k-block, J-block, order
or pack but their neutral values), 4
(lanes are 1 or a width of this machine's registers for the storage type,
divide the tile's columns, and on an NT contraction need the pack; the
row-wise form has one lane), 7 (the row-wise form, a k-block loop enclosing
the I or J block loop, and two softmax passes need the storage type to be
the arithmetic type: none on bf16), and the epilogue's (the seed's 9, a
pack only on an NT contraction, is lifted: an NN contraction's pack is a
blocked panel, `presk.passes.pack`). `psk-split` checks a split against 8
and 5 on the kernel's actual loops.

The epilogue. A contraction nest whose layout states `"epilogue": true`
is lowered as any other, and the add that reads it too: `psk-epilogue`
folds the two launches into one of `<name>+add` afterwards.

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
from xdsl.dialects.builtin import (
    ArrayAttr,
    FunctionType,
    MemRefType,
    ModuleOp,
    StringAttr,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass

from presk import sizes as size_env
from presk.target import Machine, target_machine
from presk.diagnostics import PreskError
from presk.dialects import psk_core as core
from presk.dialects import psk_kernel as kernel
from presk.dialects.psk_core import unstack
from presk.dialects.psk_core_types import (
    IndexTensorType,
    RealType,
    RecordType,
    TensorType,
    TupleType,
    leaves,
)
from presk.dialects.psk_kernel_structured import STRUCTURED_OPS, ContractOp
from presk.dialects.psk_kernel_structured import SoftmaxOp as StructuredSoftmaxOp
from presk.dialects.psk_realize import (
    GroupOp,
    LayoutAttr,
    NestOp,
    SiteOp,
    resolved_defaults,
)
from presk.dialects.psk_realize_layout import BOTH_PACKS, packs_operand_1
from presk.dialects.psk_realize_nests import contraction as contraction_of
from presk.interp.realized import argument_storage
from presk.interp.values import leaf_items
from presk.ir.calls import find_entry
from presk.ir.locations import error_at
from presk.lowering import contraction, nests, softmax, softmax_two_pass
from presk.lowering.softmax import causal_axes
from presk.lowering.kernel_builder import INDEX_ELEMENT, KernelBuilder, float_type
from presk.passes.kernel_layout import LAYOUT, Violation, layout_refusal
from presk.passes.verify_layout import layout_violation as launch_violation


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
        return MemRefType(INDEX_ELEMENT, list(nests.static_sizes(t)))
    if isinstance(t, RealType):
        return MemRefType(float_type(storage), [])
    if isinstance(t, TensorType):
        return MemRefType(float_type(storage), list(nests.static_sizes(t)))
    raise PreskError("E3003", f"psk-lower-kernel: a buffer holds a real or tensor leaf, not {t}")


def leaf_at(tree: Tree, path: tuple[Any, ...]) -> Leaf:
    """The leaf of `tree` at `path`; a real (a single leaf) broadcasts into every leaf of a tree."""
    for step in path:
        if isinstance(tree, Leaf):
            return tree
        tree = tree[step]
    assert isinstance(tree, Leaf)
    return tree


def build_tree(t: Attribute, make: Any, path: tuple[Any, ...] = ()) -> Tree:
    if isinstance(t, RecordType):
        return {n: build_tree(ft, make, (*path, n)) for n, ft in t.fields}
    if isinstance(t, TupleType):
        return tuple(build_tree(et, make, (*path, i)) for i, et in enumerate(t.element_types.data))
    return make(path, t)


class HostLowering:
    """Builds the kernels and the host program of one entry."""

    def __init__(self, module: ModuleOp, entry: str, machine: Machine | None = None) -> None:
        self._machine = machine
        self.module = module
        self.env = size_env.resolve(module)
        self.checked: set[int] = set()
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
            for path, leaf in leaves(t):
                arg_paths.append(".".join([name, *map(str, path)]))
                arg_types.append(buffer_type(leaf, self.default))
        host = kernel.HostOp(self.entry.sym_name.data, arg_types, [], argument_paths=arg_paths)
        args = iter(host.body.block.args)
        trees = [build_tree(t, lambda p, leaf: Leaf(leaf, next(args))) for t in ft.inputs.data]
        results = self.run_function(self.entry, trees)
        out_values: list[SSAValue] = []
        out_paths: list[str] = []
        for i, tree in enumerate(results):
            for path, leaf in leaf_items(tree):
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
        if isinstance(op, core.GradOp | core.ValueAndGradOp):
            # No kernel computes a derivative: psk-autodiff turns the request into calls that lower like any other.
            raise error_at(op, "E3003", f"psk-lower-kernel: {op.name} is a request for a gradient, which no kernel "
                           "computes: run psk-autodiff first (after psk-bind, before psk-fuse)")  # fmt: skip
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

    def layout_of(self, site: SiteOp) -> tuple[dict[str, Any], dict[str, Any]]:
        """(resolved, stated): the site's decisions over their defaults at the bound shapes, and those stated."""
        stated = site.layout.stated if site.layout is not None else {}
        # Defaults resolved again here, at the bound shapes (psk-realize may have run before binding).
        return {**resolved_defaults(site), **stated}, stated

    @property
    def machine(self) -> Machine:
        """The machine the layout is checked against (lane widths, workers): the host, unless given."""
        if self._machine is None:
            self._machine = target_machine()
        return self._machine

    def refuse(self, site: SiteOp, violation: Violation) -> PreskError:
        return layout_refusal(site, site.site_name, *violation)

    def check(self, site: SiteOp) -> None:
        """The plan's second check (`psk-verify-layout`), once per site: E7002 before the nest is lowered."""
        if id(site) in self.checked:
            return
        if (found := launch_violation(site, self.env, self.machine)) is not None:
            raise error_at(site, "E7002", found.message(site.site_name)[len("E7002: ") :])
        self.checked.add(id(site))

    def launch(self, site: SiteOp, env: dict[SSAValue, Tree]) -> Tree:
        storage = site.realization.storage_name if site.realization is not None else self.default
        arith_name = site.realization.arith_name if site.realization is not None else self.default
        arith_type = float_type(arith_name)
        layout, _ = self.layout_of(site)
        self.check(site)
        if isinstance(site, NestOp) and contraction_of(site.primitive) is not None:
            operands = tuple(leaf_at(env[v], ()) for v in site.primitive.operands)
            return self.launch_product(site, operands, storage, arith_name)
        if isinstance(site, NestOp) and isinstance(site.primitive, core.SoftmaxOp) and layout.get("passes") == 2:
            if storage != arith_name:
                raise self.refuse(site, (7, "passes", softmax_two_pass.REFUSAL.format(storage=storage, arith=arith_name)))
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

            name = self.kernel_for(key, self.kernel_name(site), site.site_name, signature, body, site)
            out = self.emit(kernel.AllocOp(out_type))
            self.emit(kernel.LaunchOp(name, [*buffers, out], site.site_name))  # type: ignore[list-item]
            return Leaf(result_type, out)

        return build_tree(site.result.type, leaf_launch)

    def launch_product(self, site: NestOp, operands: Sequence[Leaf], storage: str, arith_name: str) -> Leaf:
        """A contraction nest: checked at its shapes, then one structured `contract` for the layout passes."""
        op = site.primitive
        layout, stated = self.layout_of(site)
        co = self.contraction_operands(op, [leaf.type for leaf in operands])
        if (violation := contraction_violation(co, layout, stated, storage, arith_name, self.machine)) is not None:
            raise self.refuse(site, violation)
        # Buffers in the order of their first reader, one per value.
        entries: dict[SSAValue, Leaf] = {}
        for value, leaf in zip(op.operands, operands):
            entries.setdefault(value, leaf)
        buffers = [leaf.buffer for leaf in entries.values()]
        rt = op.result.type
        out_type = buffer_type(rt, storage)
        signature = [b.type for b in buffers] + [out_type]  # type: ignore[union-attr]
        c = co.c

        def body(kb: KernelBuilder, args: Sequence[SSAValue]) -> None:
            read = dict(zip(entries, args[:-1]))
            kb.add(ContractOp(
                read[op.operands[0]], read[op.operands[1]], args[-1], c.outer, (c.i, c.j, c.k),
                (co.a_labels, co.b_labels, co.out_labels), c.nt, float_type(arith_name), k_outer=c.k_outer,
            ))  # fmt: skip

        name = self.kernel_for((site.site_name, tuple(signature)), self.kernel_name(site), site.site_name, signature, body, site)
        out = self.emit(kernel.AllocOp(out_type))
        self.emit(kernel.LaunchOp(name, [*buffers, out], site.site_name))  # type: ignore[list-item]
        return Leaf(rt, out)

    def contraction_operands(self, op: core.DotOp | core.EinOp, types: Sequence[Attribute]) -> contraction.ContractionOperands:
        """The axis labels and sizes of a contraction nest (a dot's summed axis is named `DOT_K`)."""
        rt = op.result.type
        c = contraction_of(op)
        assert c is not None
        labels, sizes = product_axes(op, types)
        if isinstance(op, core.DotOp):
            c = replace(c, k=DOT_K)
        return contraction.ContractionOperands(c, tuple(labels[0]), tuple(labels[1]), tuple(rt.names), sizes)

    def kernel_name(self, site: SiteOp) -> str:
        """The seed's names: a group by its root's primitive, a nest by its primitive (`dot`, `mean`, ...)."""
        primitive = site.root.owner if isinstance(site, GroupOp) else site.members[0]
        return primitive.name.split(".", 1)[1]  # type: ignore[union-attr]

    def kernel_for(
        self, key: tuple[Any, ...], base: str, site: str, signature: Sequence[MemRefType], body: Any,
        owner: SiteOp | None = None,
    ) -> str:  # fmt: skip
        """The kernel of `key`, built once; a nest's kernel carries its nest's location and pending layout."""
        if key not in self.kernels:
            k = kernel.KernelOp(base, site, signature)
            body(KernelBuilder(k.body.block), list(k.body.block.args))
            if owner is not None:
                k.location = owner.location
                if (layout := self.pending_layout(owner, k)) is not None:
                    k.attributes[LAYOUT] = layout
            count = self.names[base]
            self.names[base] += 1
            k.sym_name = StringAttr(base if count == 0 else f"{base}_{count}")
            self.kernels[key] = k
        return self.kernels[key].sym_name.data

    def pending_layout(self, site: SiteOp, k: kernel.KernelOp) -> LayoutAttr | None:
        """The decisions the layout passes will apply to `k`: those stated away from their default, and
        (for a kernel holding a structured op, which needs them all) the defaults."""
        defaults = resolved_defaults(site)
        said = site.layout.stated if site.layout is not None else {}
        stated = {n: v for n, v in said.items() if defaults.get(n) != v}
        structured = any(isinstance(op, STRUCTURED_OPS) for op in k.body.block.ops)
        if not stated and not structured:
            return None
        return LayoutAttr(stated, defaults if structured else {})

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
        if isinstance(op, core.ReductionOp):
            nests.emit_reduction(kb, op, args[0], out, arith_type)  # type: ignore[arg-type]
        elif isinstance(op, core.DotOp | core.EinOp):
            self.emit_product(kb, op, args, out, arith_type)  # type: ignore[arg-type]
        elif isinstance(op, core.SoftmaxOp):
            x, mask = args[0], args[1] if len(args) > 1 else None
            causal = causal_axes(op.operands[1]) if mask is not None else None
            if causal is not None:
                mask = None
            kb.add(StructuredSoftmaxOp(
                x.buffer, mask.buffer if mask is not None else None, out, op.axis.data, arith_type,  # type: ignore[union-attr, arg-type]
                x.type, mask.type if mask is not None else None, causal,  # type: ignore[union-attr]
            ))  # fmt: skip
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
        elif isinstance(op, core.CompareOp):
            nests.emit_compare(kb, op, args[0], args[1], out)  # type: ignore[arg-type]
        else:
            raise error_at(op, "E3003", f"psk-lower-kernel: no kernel for {op.name}")

    def emit_product(
        self, kb: KernelBuilder, op: core.DotOp | core.EinOp, args: Sequence[nests.Operand], out: SSAValue,
        arith_type: Attribute,
    ) -> None:  # fmt: skip
        """A product that is no contraction nest (those go through `launch_product`)."""
        labels, sizes = product_axes(op, [a.type for a in args])
        summed = (DOT_K,) if isinstance(op, core.DotOp) else op.summed
        nests.emit_product(kb, labels, args, op.result.type, summed, sizes, out, arith_type)


DOT_K = "__k"
"""The name a dot's summed axis takes in its kernel (a dot's operands name it differently)."""


def product_axes(op: core.DotOp | core.EinOp, types: Sequence[Attribute]) -> tuple[list[tuple[str, ...]], dict[str, int]]:
    """The axis labels of a product's two operands (a dot's summed axis named `DOT_K`), and every axis's size."""
    if isinstance(op, core.DotOp):
        x, w = types
        labels = [(*x.names[:-1], DOT_K), (DOT_K, *w.names[1:])]  # type: ignore[attr-defined]
        sizes = {**dict(zip(x.names, nests.static_sizes(x))), **dict(zip(w.names, nests.static_sizes(w)))}  # type: ignore[attr-defined]
        return labels, {**sizes, DOT_K: nests.static_sizes(x)[-1]}
    labels = [tuple(ls) for ls in op.operand_labels]
    sizes: dict[str, int] = {}
    for t, ls in zip(types, labels):
        sizes.update(zip(ls, nests.static_sizes(t)))
    return labels, sizes



def contraction_violation(
    co: contraction.ContractionOperands, layout: dict[str, Any], stated: dict[str, Any], storage: str, arith: str,
    machine: Machine,
) -> Violation | None:  # fmt: skip
    """The first launch condition a contraction nest's layout breaks at its shapes and types, or None.

    A guard behind `psk-verify-layout` (`presk.passes.verify_layout`, which
    `HostLowering.check` runs first), restating what this lowering relies
    on: conditions 3, 4 and 7 of the seed (the split's 5 and 8 are
    checked on the kernel by `psk-split`; the epilogue's by `psk-epilogue`).
    """
    c, sizes = co.c, co.sizes
    n_i, n_j, n_k = sizes[c.i], sizes[c.j], sizes[c.k]
    if layout.get("form") == "row-wise":
        for name, neutral in (("tile", [1, 1]), ("kblock", "none"), ("jblock", "none"), ("order", "IJ"), ("pack", False)):
            if name in stated and stated[name] != neutral:
                return 3, name, f"a row-wise contraction has no tile, k-block, J-block, order or pack, and this one states \"{name}\""
        if storage != arith:
            return 7, "form", (
                f"the row-wise form keeps the running sums in the output buffer, which needs the storage type to be "
                f"the accumulation type, and {storage} stores what {arith} accumulates"
            )
        columns, what = n_j, f"the row's {n_j} columns (J = {c.j})"
    else:
        tl = contraction.tiled_layout(layout)
        if tl.m > n_i:
            return 3, "tile", f"the tile's {tl.m} rows exceed I = {c.i} of {n_i}"
        if tl.n > n_j:
            return 3, "tile", f"the tile's {tl.n} columns exceed J = {c.j} of {n_j}"
        # A shifted last tile would add a block of K twice to sums that wait in the output (rows clamp instead).
        if "J" in tl.enclosed and n_j % tl.n:
            return 3, "tile", (
                f"the tile's {tl.n} columns do not divide J = {c.j} of {n_j}, and the k-block loop encloses the J block loop"
            )
        if tl.jblock is not None and tl.jblock > n_j:
            return 3, "jblock", f"a J-block of {tl.jblock} exceeds J = {c.j} of {n_j}"
        if tl.kblock is not None and tl.kblock > n_k:
            return 3, "kblock", f"a k-block of {tl.kblock} exceeds K = {c.k} of {n_k}"
        if layout.get("pack") == BOTH_PACKS and tl.m == 1:
            return 3, "pack", "the pack \"both\" copies operand 0 to a panel of the tile's rows, and the tile has one row"
        if layout.get("pack") == BOTH_PACKS and tl.clamps_rows(n_i):
            return 3, "pack", (
                f"operand 0's panel holds whole blocks of the tile's {tl.m} rows, which do not divide I = {c.i} of {n_i}, "
                "and the k-block loop encloses the I block loop, whose last tile clamps its rows"
            )
        if tl.sums_in_output and storage != arith:
            return 7, "order" if "order" in stated else "kblock", (
                f"in the order \"{tl.order}\" the k-block loop encloses the I or J block loop, so the running sums wait in "
                f"the output buffer between blocks, which needs the storage type to be the accumulation type, and "
                f"{storage} stores what {arith} accumulates"
            )
        columns, what = tl.n, f"the tile's {tl.n} columns"
    pack = packs_operand_1(layout.get("pack"))
    lanes = stated.get("lanes")
    if isinstance(lanes, int) and lanes != 1:
        if layout.get("form") == "row-wise":
            return 4, "lanes", "lanes run across a tile's columns, and a row-wise contraction has no tile: its lanes are 1"
        widths = machine.lane_widths(storage)
        if lanes not in widths:
            held = ", ".join(map(str, widths)) if widths else "none: it computes one element at a time"
            return 4, "lanes", f"lanes are 1 or the width of one of this machine's registers in {storage} ({held}), not {lanes}"
        if columns % lanes:
            return 4, "lanes", f"{lanes} lanes do not divide {what}"
        if c.nt and not pack:
            return 4, "lanes", "operand 1 of an NT contraction runs along K, not J: lanes across J need the pack"
    return None


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
