"""The reference interpreter of PSK-Core: the oracle of every backend and rewrite.

Built on xDSL's interpreter framework: one `@impl` per primitive, with
`func` calls and returns from `presk.interp.func_calls`. It computes in numpy
f64, or in mpmath at any precision (`bits`), with one implementation: the
arrays hold floats or `mpf`s. Sizes come from an environment that binds
every constant and dimension variable (`presk.sizes.resolve`).
"""

from __future__ import annotations

import string
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import Interpreter, InterpreterFunctions, impl, register_impls
from xdsl.ir import Attribute

from presk.diagnostics import PreskError
from presk.dialects import psk_core as core
from presk.dialects.psk_core_types import IndexTensorType, RealType, RecordType, Size, TensorType, TupleType
from presk.interp.func_calls import FuncCalls
from presk.interp.numerics import F64, Numerics, mp_numerics
from presk.interp.realized import PSKRealizeFunctions, argument_storage, to_storage
from presk.interp.values import align, tree_map
from presk.ir.calls import call_depth, find_entry


def scalar_if_0d(value: Any) -> Any:
    """A real is a Python number at run time, so a reduction to nothing unwraps its 0-d array."""
    return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value


def _names(t: Attribute) -> tuple[str, ...]:
    return t.names if isinstance(t, TensorType | IndexTensorType) else ()


@register_impls
class PSKCoreFunctions(InterpreterFunctions):
    """Implementations of the PSK-Core primitives over one number system and size environment."""

    def __init__(self, numerics: Numerics, env: Mapping[str, int]) -> None:
        self.num = numerics
        self.env = env

    def size(self, size: Size, where: str) -> int:
        if isinstance(size, int):
            return size
        if size not in self.env:
            raise PreskError("E4002", f"{where}: size '{size}' is not bound; pass --dim {size}=N or --const {size}=N")
        return self.env[size]

    # -- elementwise -------------------------------------------------------

    def _elementwise(self, op: Any, args: Sequence[Any], leaf) -> Any:  # type: ignore[no-untyped-def]
        def apply(types: Sequence[Attribute], values: Sequence[Any], result_type: Attribute) -> Any:
            target = _names(result_type)
            return leaf(*(align(v, t, target) for v, t in zip(values, types)))

        return (tree_map(apply, [o.type for o in op.operands], args, op.results[0].type),)

    @impl(core.AddOp)
    def run_add(self, interp: Interpreter, op: core.AddOp, args: tuple[Any, ...]):
        return self._elementwise(op, args, lambda a, b: a + b)

    @impl(core.SubOp)
    def run_sub(self, interp: Interpreter, op: core.SubOp, args: tuple[Any, ...]):
        return self._elementwise(op, args, lambda a, b: a - b)

    @impl(core.MulOp)
    def run_mul(self, interp: Interpreter, op: core.MulOp, args: tuple[Any, ...]):
        return self._elementwise(op, args, lambda a, b: a * b)

    @impl(core.DivOp)
    def run_div(self, interp: Interpreter, op: core.DivOp, args: tuple[Any, ...]):
        return self._elementwise(op, args, lambda a, b: a / b)

    @impl(core.MaxOp)
    def run_max(self, interp: Interpreter, op: core.MaxOp, args: tuple[Any, ...]):
        return self._elementwise(op, args, lambda a, b: np.maximum(a, b) if np.ndim(a) or np.ndim(b) else max(a, b))

    @impl(core.NegOp)
    def run_neg(self, interp: Interpreter, op: core.NegOp, args: tuple[Any, ...]):
        return self._elementwise(op, args, lambda a: -a)

    @impl(core.ExpOp)
    def run_exp(self, interp: Interpreter, op: core.ExpOp, args: tuple[Any, ...]):
        return self._elementwise(op, args, self.num.exp)

    @impl(core.LogOp)
    def run_log(self, interp: Interpreter, op: core.LogOp, args: tuple[Any, ...]):
        return self._elementwise(op, args, self.num.log)

    @impl(core.SqrtOp)
    def run_sqrt(self, interp: Interpreter, op: core.SqrtOp, args: tuple[Any, ...]):
        return self._elementwise(op, args, self.num.sqrt)

    @impl(core.TanhOp)
    def run_tanh(self, interp: Interpreter, op: core.TanhOp, args: tuple[Any, ...]):
        return self._elementwise(op, args, self.num.tanh)

    @impl(core.ErfOp)
    def run_erf(self, interp: Interpreter, op: core.ErfOp, args: tuple[Any, ...]):
        return self._elementwise(op, args, self.num.erf)

    @impl(core.GeluOp)
    def run_gelu(self, interp: Interpreter, op: core.GeluOp, args: tuple[Any, ...]):
        half, rsqrt2 = self.num.const(0.5), 1 / self.num.sqrt(self.num.const(2.0))
        return self._elementwise(op, args, lambda x: x * half * (1 + self.num.erf(x * rsqrt2)))

    @impl(core.PowOp)
    def run_pow(self, interp: Interpreter, op: core.PowOp, args: tuple[Any, ...]):
        def power(x: Any) -> Any:
            # n − 1 products, left to right: what the kernels compute.
            result = x
            for _ in range(op.n - 1):
                result = result * x
            return result

        return self._elementwise(op, args, power)

    @impl(core.CompareOp)
    def run_compare(self, interp: Interpreter, op: core.CompareOp, args: tuple[Any, ...]):
        a, b = (np.asarray(x) for x in args)
        holds = COMPARE[op.predicate.data](a, b)
        return (np.asarray(holds, dtype=bool).astype(np.int64),)

    @impl(core.WhereOp)
    def run_where(self, interp: Interpreter, op: core.WhereOp, args: tuple[Any, ...]):
        cond, a, b = args
        target = _names(op.result.type)
        picked = np.where(
            align(cond, op.cond.type, target) != 0,
            align(a, op.on_true.type, target),
            align(b, op.on_false.type, target),
        )
        return (picked if target else picked[()],)

    # -- reductions --------------------------------------------------------

    def _reduce(self, op: core.ReductionOp, x: np.ndarray, how: str) -> Any:
        t = op.operand.type
        axes = tuple(t.names.index(a) for a in op.axes)
        if how == "max":
            out = np.max(x, axis=axes)
        else:
            out = np.sum(x, axis=axes)
            if how == "mean":
                count = int(np.prod([x.shape[i] for i in axes]))
                out = out / self.num.const(float(count))
        return scalar_if_0d(out)

    @impl(core.SumOp)
    def run_sum(self, interp: Interpreter, op: core.SumOp, args: tuple[Any, ...]):
        return (self._reduce(op, args[0], "sum"),)

    @impl(core.MeanOp)
    def run_mean(self, interp: Interpreter, op: core.MeanOp, args: tuple[Any, ...]):
        return (self._reduce(op, args[0], "mean"),)

    @impl(core.ReduceMaxOp)
    def run_reduce_max(self, interp: Interpreter, op: core.ReduceMaxOp, args: tuple[Any, ...]):
        return (self._reduce(op, args[0], "max"),)

    # -- contractions and friends -----------------------------------------

    @impl(core.DotOp)
    def run_dot(self, interp: Interpreter, op: core.DotOp, args: tuple[Any, ...]):
        x, w = args
        out = np.tensordot(x, w, axes=([x.ndim - 1], [0]))
        return (scalar_if_0d(out),)

    @impl(core.EinOp)
    def run_ein(self, interp: Interpreter, op: core.EinOp, args: tuple[Any, ...]):
        letters: dict[str, str] = {}
        for label in (n for ls in op.operand_labels for n in ls):
            letters.setdefault(label, string.ascii_letters[len(letters)])
        spec = ",".join("".join(letters[n] for n in ls) for ls in op.operand_labels)
        spec += "->" + "".join(letters[n] for n in op.result.type.names)
        return (np.einsum(spec, *args),)

    @impl(core.SoftmaxOp)
    def run_softmax(self, interp: Interpreter, op: core.SoftmaxOp, args: tuple[Any, ...]):
        x = args[0]
        t = op.operand.type
        axis = t.names.index(op.axis.data)
        if op.mask is None:
            allowed = np.ones(x.shape, dtype=bool)
        else:
            allowed = np.broadcast_to(align(args[1], op.mask.type, t.names) != 0, x.shape)
        # The maximum and the sum run over allowed positions; refused ones get 0.
        m = np.max(np.where(allowed, x, self.num.neg_inf), axis=axis, keepdims=True)
        m = np.where(m == self.num.neg_inf, self.num.const(0.0), m)
        with np.errstate(over="ignore"):  # exp of refused positions overflows, and is discarded
            e = np.where(allowed, self.num.exp(x - m), self.num.const(0.0))
        s = np.sum(e, axis=axis, keepdims=True)
        safe = np.where(s == 0, self.num.const(1.0), s)
        return (np.where(s == 0, self.num.const(0.0), e / safe),)

    @impl(core.CrossEntropyOp)
    def run_cross_entropy(self, interp: Interpreter, op: core.CrossEntropyOp, args: tuple[Any, ...]):
        logits, targets = args
        axis = op.logits.type.names.index(op.axis.data)
        x = np.moveaxis(logits, axis, -1)
        m = np.max(x, axis=-1, keepdims=True)
        lse = m[..., 0] + self.num.log(np.sum(self.num.exp(x - m), axis=-1))
        picked = np.take_along_axis(x, targets[..., None], axis=-1)[..., 0]
        nll = lse - picked
        return (np.sum(nll) / self.num.const(float(nll.size)),)

    @impl(core.GatherOp)
    def run_gather(self, interp: Interpreter, op: core.GatherOp, args: tuple[Any, ...]):
        table, ids = args
        return (table[ids],)

    # -- structure ---------------------------------------------------------

    @impl(core.BroadcastLikeOp)
    def run_broadcast_like(self, interp: Interpreter, op: core.BroadcastLikeOp, args: tuple[Any, ...]):
        def leaf(types: Sequence[Attribute], values: Sequence[Any], rt: Attribute) -> Any:
            (xt, _), (x, tmpl) = types, values
            if not isinstance(rt, TensorType):
                return x
            return np.broadcast_to(align(x, xt, rt.names), np.shape(tmpl)).copy()

        return (tree_map(leaf, [op.operand.type, op.template.type], args, op.result.type),)

    @impl(core.SumToOp)
    def run_sum_to(self, interp: Interpreter, op: core.SumToOp, args: tuple[Any, ...]):
        def leaf(types: Sequence[Attribute], values: Sequence[Any], rt: Attribute) -> Any:
            xt, x = types[0], values[0]
            if not isinstance(xt, TensorType):
                return x
            keep = _names(rt)
            summed = tuple(i for i, n in enumerate(xt.names) if n not in keep)
            out = np.sum(x, axis=summed) if summed else x
            return scalar_if_0d(out)

        return (tree_map(leaf, [op.operand.type, op.template.type], args, op.result.type),)

    @impl(core.ZerosLikeOp)
    def run_zeros_like(self, interp: Interpreter, op: core.ZerosLikeOp, args: tuple[Any, ...]):
        def leaf(types: Sequence[Attribute], values: Sequence[Any], rt: Attribute) -> Any:
            return self.num.zeros(np.shape(values[0]))

        return (tree_map(leaf, [op.template.type], args, op.result.type),)

    @impl(core.SplitOp)
    def run_split(self, interp: Interpreter, op: core.SplitOp, args: tuple[Any, ...]):
        x = args[0]
        i = op.operand.type.names.index(op.axis.data)
        (a, sa), (b, sb) = op.parts()
        na, nb = self.size(sa, f"split into '{a}'"), self.size(sb, f"split into '{b}'")
        if na * nb != x.shape[i]:
            raise PreskError("E4002", f"split of axis '{op.axis.data}' ({x.shape[i]}) into {a}: {na} × {b}: {nb}")
        return (x.reshape(x.shape[:i] + (na, nb) + x.shape[i + 1 :]),)

    @impl(core.MergeOp)
    def run_merge(self, interp: Interpreter, op: core.MergeOp, args: tuple[Any, ...]):
        x = args[0]
        i = op.operand.type.names.index(op.names()[0])
        into, size = op.into()
        merged = x.shape[i] * x.shape[i + 1]
        if merged != self.size(size, f"merge into '{into}'"):
            raise PreskError("E4002", f"merge into '{into}': {x.shape[i]} × {x.shape[i + 1]} is not {size} = {self.size(size, 'merge')}")
        return (x.reshape(x.shape[:i] + (merged,) + x.shape[i + 2 :]),)

    @impl(core.ArangeOp)
    def run_arange(self, interp: Interpreter, op: core.ArangeOp, args: tuple[Any, ...]):
        t = op.result.type
        n, bound = self.size(t.sizes[0], "arange"), self.size(t.range, "arange")
        if n > bound:
            raise PreskError("E4002", f"arange of {n} indices does not fit its range {bound} ({t.sizes[0]} > {t.range})")
        return (np.arange(n, dtype=np.int64),)

    @impl(core.CausalMaskOp)
    def run_causal_mask(self, interp: Interpreter, op: core.CausalMaskOp, args: tuple[Any, ...]):
        n = self.size(op.result.type.sizes[0], "causal_mask")
        return (np.tril(np.ones((n, n), dtype=np.int64)),)

    @impl(core.ConstantOp)
    def run_constant(self, interp: Interpreter, op: core.ConstantOp, args: tuple[Any, ...]):
        return (self.num.const(op.number),)

    @impl(core.SizeOp)
    def run_size(self, interp: Interpreter, op: core.SizeOp, args: tuple[Any, ...]):
        return (self.num.const(float(self.size(op.size.data, "size"))),)

    @impl(core.RecordOp)
    def run_record(self, interp: Interpreter, op: core.RecordOp, args: tuple[Any, ...]):
        return (dict(zip((n for n, _ in op.result.type.fields), args)),)

    @impl(core.FieldOp)
    def run_field(self, interp: Interpreter, op: core.FieldOp, args: tuple[Any, ...]):
        return (args[0][op.field_name.data],)

    @impl(core.SetFieldOp)
    def run_set_field(self, interp: Interpreter, op: core.SetFieldOp, args: tuple[Any, ...]):
        record, value = args
        return ({**record, op.field_name.data: value},)

    @impl(core.TupleOp)
    def run_tuple(self, interp: Interpreter, op: core.TupleOp, args: tuple[Any, ...]):
        return (tuple(args),)

    @impl(core.ProjOp)
    def run_proj(self, interp: Interpreter, op: core.ProjOp, args: tuple[Any, ...]):
        return (args[0][op.index.data],)

    @impl(core.FoldOp)
    def run_fold(self, interp: Interpreter, op: core.FoldOp, args: tuple[Any, ...]):
        stacked, state = args
        layers = self.size(op.layer_count(), "fold")
        for layer in range(layers):
            (state,) = interp.call_op(op.callee, (_slice_tree(stacked, layer), state))
        return (state,)


def _slice_tree(value: Any, layer: int) -> Any:
    if isinstance(value, dict):
        return {k: _slice_tree(v, layer) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_slice_tree(v, layer) for v in value)
    out = value[layer]
    return scalar_if_0d(out)


COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}  # fmt: skip
"""numpy's comparisons are IEEE's, on f64 and on mpmath's numbers (object arrays) alike."""


def run_entry(
    module: ModuleOp, entry: str, inputs: Sequence[Any], env: Mapping[str, int], bits: int | None = None
) -> list[Any]:
    """Run `@entry` on `inputs` (f64 data; converted exactly to mpmath when `bits` is given).

    A realized program (after `psk-realize`) rounds its arguments to its
    default storage type and each site's value to the site's.
    """
    func = find_entry(module, entry)
    numerics = F64 if bits is None else mp_numerics(bits)
    storage = argument_storage(module)
    if storage is not None and bits is not None:
        raise PreskError("E4001", "--bits runs the reference interpreter in mpmath; a realized program runs in its machine types")
    with numerics.context or nullcontext(), _stack_for_calls(call_depth(module, entry)):
        args = [convert(v, t, numerics) for v, t in zip(inputs, func.function_type.inputs.data)]
        if storage is not None:
            args = [to_storage(a, storage) for a in args]
        interpreter = Interpreter(module)
        interpreter.register_implementations(FuncCalls())
        interpreter.register_implementations(PSKCoreFunctions(numerics, env))
        interpreter.register_implementations(PSKRealizeFunctions())
        return list(interpreter.call_op(entry, tuple(args)))


FRAMES_PER_CALL = 16
"""Python frames xDSL's interpreter stacks for one `func.call` inside another (about 9 measured: a chain of
400 calls ran under a recursion limit of 4 000 and not 3 000), with room to spare."""


@contextmanager
def _stack_for_calls(depth: int) -> Iterator[None]:
    """Python's recursion limit raised, for the run, to what `depth` nested calls take: the interpreter runs a
    call inside its caller's frames, and a chain of some 300 calls exceeded the default 1 000."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, 1000 + FRAMES_PER_CALL * depth))
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


def convert(value: Any, t: Attribute, numerics: Numerics) -> Any:
    """Bring f64 input data into the interpreter's number system, following the type."""
    if isinstance(t, RecordType):
        return {n: convert(value[n], ft, numerics) for n, ft in t.fields}
    if isinstance(t, TupleType):
        return tuple(convert(v, et, numerics) for v, et in zip(value, t.element_types.data))
    if isinstance(t, IndexTensorType):
        return np.asarray(value, dtype=np.int64)
    if isinstance(t, RealType):
        return numerics.const(float(value))
    return numerics.array(value)
