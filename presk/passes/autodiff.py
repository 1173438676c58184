"""`psk-autodiff`: reverse-mode differentiation of PSK-Core, into ordinary PSK-Core functions.

Each `psk_core.grad @f(args) wrt [i, ...]` (and `value_and_grad`) becomes
calls to functions generated from `@f`:

* by default (`remat=save`), `f.fwd` computes f's value and the residuals
  its backward pass reads, `(value, tuple<residuals>)`, and `f.bwd` takes
  those residuals and the cotangent of the value and returns the cotangent
  of each argument named by `wrt`;
* with `{remat=recompute}`, one `f.vjp(args, ct) -> (value, cotangents)`
  recomputes the forward values where the backward part reads them, so
  nothing is kept between two calls.

A call inside `f` is differentiated callee by callee: `g.fwd`/`g.bwd` (or
`g.vjp`) are generated for the arguments of `g` the call varies, and `f`'s
residuals carry `g`'s as one tuple. A `fold @g` is run layer by layer in the
generated functions (each layer's parameters selected by a one-hot of its
index, `g.fwd` per layer, `g.bwd` in reverse), so its layer count must be
bound when the pass runs. The adjoint of each primitive is a row
of `autodiff_rules.RULES`; a primitive with no rule that a cotangent has to
cross is refused with `E3004` at its line, before the module is changed, so
a missing rule is never a silent zero. Only values that depend on a `wrt`
argument and reach the result get cotangents, and each generated function
goes through `cse` and `dce`: it keeps no forward value nothing reads, and
returns the cotangents of the `wrt` arguments only.

Generated functions are named `<f>.fwd`, `<f>.bwd`, `<f>.vjp`; a second
set of `wrt` positions for the same function gets `<f>.wrt<i>_<j>.fwd`, and
a name the module already uses gets a numeric suffix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import Pure
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import region_dce

from presk.diagnostics import PreskError
from presk.dialects import psk_core as core
from presk.dialects.psk_core_autodiff import GradientRequestOp, ValueAndGradOp
from presk.dialects.psk_core_types import IndexTensorType, RealType, TupleType
from presk.ir.calls import reachable_functions
from presk.ir.locations import error_at
from presk.passes.autodiff_rules import RULES, Ct, Emit, positions_of, why_not

REMAT_MODES = ("save", "recompute")

Key = tuple[str, tuple[int, ...]]
"""A function to differentiate and the positions of its arguments to differentiate with respect to."""


@dataclass
class Generated:
    """The functions generated for one `Key`."""

    fwd: func.FuncOp | None = None
    bwd: func.FuncOp | None = None
    vjp: func.FuncOp | None = None


@dataclass
class Activity:
    """Which values of a function carry a derivative: varied (depend on a wrt argument) and useful (reach the result)."""

    active: set[SSAValue] = field(default_factory=set)
    calls: dict[Operation, tuple[int, ...]] = field(default_factory=dict)
    """Each call (or fold) a cotangent crosses, with the positions of its callee to differentiate."""


def _differentiable(v: SSAValue) -> bool:
    return not isinstance(v.type, IndexTensorType)


def _recomputable(op: Operation) -> bool:
    """A pure op of no operands (`constant`, `size`, `arange`, `causal_mask`): cheaper to recompute than to save."""
    return not op.operands and not op.regions and op.has_trait(Pure)


class Differentiator:
    """Generates the functions of every requested derivative; changes nothing until all exist."""

    def __init__(self, module: ModuleOp, recompute: bool) -> None:
        self.module = module
        self.recompute = recompute
        self.functions = {f.sym_name.data: f for f in module.body.block.ops if isinstance(f, func.FuncOp)}
        self.taken = {n for op in module.body.block.ops if (n := _symbol(op)) is not None}
        self.done: dict[Key, Generated] = {}
        self.in_progress: list[str] = []
        self.created: list[func.FuncOp] = []
        self.first_wrt: dict[str, tuple[int, ...]] = {}

    # -- names ----------------------------------------------------------------------
    def _name(self, key: Key, kind: str) -> str:
        """`f.fwd` for the first `wrt` of `f` the module asks for, `f.wrt0_2.fwd` for another; unique."""
        fname, wrt = key
        first = self.first_wrt.setdefault(fname, wrt)
        stem = fname if first == wrt else f"{fname}.wrt{'_'.join(map(str, wrt))}"
        name, i = f"{stem}.{kind}", 0
        while name in self.taken:
            i += 1
            name = f"{stem}.{kind}.{i}"
        self.taken.add(name)
        return name

    # -- analysis -------------------------------------------------------------------
    def activity(self, f: func.FuncOp, wrt: Sequence[int]) -> Activity:
        """Varied and useful values of `f`; E3004 at the first op a cotangent must cross without a rule."""
        block = f.body.block
        varied: set[SSAValue] = {block.args[i] for i in wrt if _differentiable(block.args[i])}
        ops = list(block.ops)
        for op in ops:
            if isinstance(op, func.ReturnOp):
                continue
            flows = [op.operands[i] for i in self._positions(op)]
            if any(v in varied for v in flows):
                varied.update(r for r in op.results if _differentiable(r))
        ret = block.last_op
        assert isinstance(ret, func.ReturnOp)
        useful: set[SSAValue] = {v for v in ret.arguments if v in varied}
        result = Activity()
        for op in reversed(ops):
            if isinstance(op, func.ReturnOp) or not any(r in useful for r in op.results):
                continue
            self._check_rule(op)
            positions = self._positions(op)
            useful.update(op.operands[i] for i in positions if op.operands[i] in varied)
            if isinstance(op, func.CallOp):
                result.calls[op] = tuple(i for i in positions if op.operands[i] in varied)
            elif isinstance(op, core.FoldOp):
                # Every layer passes its state's cotangent on; its parameters' when the stack is varied.
                result.calls[op] = (0, 1) if op.stacked in varied else (1,)
        result.active = useful
        return result

    def _positions(self, op: Operation) -> tuple[int, ...]:
        if isinstance(op, func.CallOp | core.FoldOp):
            return tuple(i for i, v in enumerate(op.operands) if _differentiable(v))
        rule = RULES.get(type(op))
        if rule is None:  # no rule: anything may flow through it (refused if a cotangent must)
            return tuple(range(len(op.operands)))
        return positions_of(rule, op)

    def _check_rule(self, op: Operation) -> None:
        if isinstance(op, func.CallOp):
            if len(op.results) != 1:
                raise error_at(op, "E3004", f"no derivative for a call of @{op.callee.string_value()}, which returns "
                               f"{len(op.results)} values; psk-autodiff differentiates calls of one result")  # fmt: skip
            return
        if isinstance(op, core.FoldOp):
            layers = op.layer_count()
            if not isinstance(layers, int):
                raise error_at(op, "E3004", f"no derivative for psk_core.fold over '{layers}' layers: its gradient runs "
                               "the layers one by one, so bind the layer count first (psk-bind)")  # fmt: skip
            return
        why = why_not(op)
        if why is not None:
            raise error_at(op, "E3004", f"no derivative for {op.name}" + (f": {why}" if why else ""))

    @staticmethod
    def _callee(op: Operation) -> str:
        assert isinstance(op, func.CallOp | core.FoldOp)
        return op.callee.string_value()

    # -- generation -----------------------------------------------------------------
    def request(self, key: Key, at: Operation) -> Generated:
        """The functions for `key`, generated (with those of its callees) on first request."""
        if key in self.done:
            return self.done[key]
        fname, wrt = key
        f = self.functions.get(fname)
        if f is None or f.is_declaration:
            raise error_at(at, "E3003", f"psk-autodiff: @{fname} has no body to differentiate")
        if fname in self.in_progress:
            raise error_at(at, "E3003", f"psk-autodiff: @{fname} calls itself; a recursive function is not differentiated")
        if len(f.function_type.outputs.data) != 1:
            raise error_at(at, "E3004", f"no derivative for @{fname}, which returns "
                           f"{len(f.function_type.outputs.data)} values")  # fmt: skip
        self.in_progress.append(fname)
        try:
            activity = self.activity(f, wrt)
            for call, positions in reversed(activity.calls.items()):  # in program order, for stable names
                self.request((self._callee(call), positions), call)
            generated = Generated()
            if self.recompute:
                generated.vjp = self._vjp(key, f, activity)
            else:
                generated.fwd, generated.bwd = self._fwd_bwd(key, f, activity)
        finally:
            self.in_progress.pop()
        self.done[key] = generated
        return generated

    def _new_function(self, name: str, inputs: Sequence[Attribute]) -> tuple[func.FuncOp, Block]:
        block = Block(arg_types=list(inputs))
        f = func.FuncOp(name, (list(inputs), []), Region(block))
        self.created.append(f)
        return f, block

    def _unrolled(self, op: core.FoldOp, emit: Emit, stacked: SSAValue, init: SSAValue,
                  step: Callable[[SSAValue, SSAValue], SSAValue]) -> tuple[list[SSAValue], list[SSAValue]]:  # fmt: skip
        """A fold run layer by layer: each layer's parameters (selected by a one-hot) and the state it reads.

        `step(params, state)` emits one layer and returns the next state; the
        last state is the fold's value.
        """
        layers = op.layer_count()
        assert isinstance(layers, int)
        hots = emit.layer_one_hots(stacked, layers)
        params = [emit.select_layer(hot, stacked, op.stacked.type) for hot in hots]
        states = [init]
        for p in params:
            states.append(step(p, states[-1]))
        return params, states

    def _fwd_bwd(self, key: Key, f: func.FuncOp, activity: Activity) -> tuple[func.FuncOp, func.FuncOp]:
        """`f.fwd` clones `f`, calling the callees' `.fwd`s; `f.bwd` runs the rules backwards over residuals."""
        src = f.body.block
        result_type = f.function_type.outputs.data[0]
        fwd, fblock = self._new_function(self._name(key, "fwd"), f.function_type.inputs.data)
        _name_args(fblock, src)
        to_fwd: dict[SSAValue, SSAValue] = dict(zip(src.args, fblock.args))
        forward = Emit.at_end(fblock, lambda v: v)
        callee_residuals: dict[Operation, list[SSAValue]] = {}
        for op in src.ops:
            if isinstance(op, func.ReturnOp):
                break
            if op not in activity.calls:
                fblock.add_op(op.clone(value_mapper=to_fwd))
                continue
            callee = self.done[(self._callee(op), activity.calls[op])].fwd
            assert callee is not None
            outputs = callee.function_type.outputs.data

            def call(args: list[SSAValue], residuals: list[SSAValue]) -> SSAValue:
                result = forward.op(func.CallOp(callee.sym_name.data, args, outputs))
                residuals.append(result.owner.results[1])  # type: ignore[union-attr]
                return result

            saved: list[SSAValue] = []
            if isinstance(op, core.FoldOp):
                _, states = self._unrolled(op, forward, to_fwd[op.stacked], to_fwd[op.init],
                                           lambda p, s: call([p, s], saved))  # fmt: skip
                to_fwd[op.results[0]] = states[-1]
            else:
                to_fwd[op.results[0]] = call([to_fwd[v] for v in op.operands], saved)
            _hint(to_fwd[op.results[0]], op.results[0])
            callee_residuals[op] = saved
        (value,) = [to_fwd[v] for v in _returned(src)]

        bwd, bblock = self._new_function(self._name(key, "bwd"), [result_type])
        ct_in = bblock.args[0]
        ct_in.name_hint = "ct"
        residuals: dict[SSAValue, BlockArgument] = {}
        recomputed: dict[SSAValue, SSAValue] = {}

        def residual(v: SSAValue) -> SSAValue:
            """A value of `f.fwd`, as `f.bwd` reads it: passed along as a residual."""
            if v not in residuals:
                arg = bblock.insert_arg(v.type, len(bblock.args))
                _hint(arg, v)
                residuals[v] = arg
            return residuals[v]

        def primal(v: SSAValue) -> SSAValue:
            owner = v.owner
            if isinstance(owner, Operation) and _recomputable(owner):
                if v not in recomputed:  # a constant, size, arange or mask: recomputed, not saved
                    clone = owner.clone()
                    Rewriter.insert_op(clone, InsertPoint.at_start(bblock))
                    recomputed[v] = clone.results[0]
                return recomputed[v]
            return residual(to_fwd[v])

        placeholders: dict[Attribute, tuple[BlockArgument, SSAValue]] = {}

        def shaped(t: Attribute, fallback: SSAValue | Callable[[], SSAValue]) -> SSAValue:
            """A value of type t `f.bwd` has (the cotangent, a residual), so none is saved for its type alone.

            Residuals are found as the rules run, so a primal fallback is a
            placeholder until the end, when any residual of type t may stand in.
            """
            same = next((a for a in [ct_in, *residuals.values()] if a.type == t), None)
            if same is not None:
                return same
            if not isinstance(fallback, SSAValue):
                return fallback()
            if t not in placeholders:
                placeholders[t] = (bblock.insert_arg(t, len(bblock.args)), fallback)
            return placeholders[t][0]

        emit = Emit.at_end(bblock, primal, shaped)

        def callee_adjoint(op: Operation, ct: SSAValue) -> list[tuple[int, SSAValue]]:
            positions = activity.calls[op]
            callee = self.done[(self._callee(op), positions)].bwd
            assert callee is not None
            outputs = callee.function_type.outputs.data

            def call(res: SSAValue, ct: SSAValue) -> list[SSAValue]:
                return list(emit.op(func.CallOp(callee.sym_name.data, [residual(res), ct], outputs)).owner.results)  # type: ignore[union-attr]

            if isinstance(op, core.FoldOp):
                return self._fold_backward(op, emit, emit.like(op.stacked), ct, positions,
                                           [lambda ct, r=r: call(r, ct) for r in callee_residuals[op]])  # fmt: skip
            (res,) = callee_residuals[op]
            return list(zip(positions, call(res, ct)))

        grads = self._backward(f, activity, emit, ct_in, callee_adjoint, key[1])
        bblock.add_op(func.ReturnOp(*grads))
        for t, (placeholder, v) in placeholders.items():
            same = next((a for a in [ct_in, *residuals.values()] if a.type == t), None)
            placeholder.replace_all_uses_with(same if same is not None else primal(v))
            bblock.erase_arg(placeholder)
        _tidy(bwd)
        # Residuals nothing reads after dce are not saved.
        for v, arg in list(residuals.items()):
            if not arg.uses:
                bblock.erase_arg(arg)
                del residuals[v]
        _recompute_arithmetic(bblock, residuals)
        _derivatives_in_forward(fblock, bblock, residuals)
        saved = list(residuals)
        pack = TupleType([v.type for v in saved])
        tup = bblock.insert_arg(pack, 0)
        tup.name_hint = "res"
        projections = [core.ProjOp(tup, i, v.type) for i, v in enumerate(saved)]
        for proj, v in zip(projections, saved):
            _hint(proj.result, v)
            residuals[v].replace_all_uses_with(proj.result)
            bblock.erase_arg(residuals[v])
        if projections:
            Rewriter.insert_op(projections, InsertPoint.at_start(bblock))
        _set_type(bwd)

        packed = core.TupleOp(saved, pack)
        packed.result.name_hint = "res"
        fblock.add_ops([packed, func.ReturnOp(value, packed.result)])
        _tidy(fwd)
        _set_type(fwd)
        return fwd, bwd

    def _fold_backward(self, op: core.FoldOp, emit: Emit, stacked_like: SSAValue, ct: SSAValue,
                       positions: tuple[int, ...], layer_adjoints: list[Callable[[SSAValue], list[SSAValue]]],
                       ) -> list[tuple[int, SSAValue]]:  # fmt: skip
        """The layers in reverse: each layer's adjoint takes the state's cotangent and gives the earlier one's.

        With the stack varied, each layer's parameter cotangent is placed at
        its layer (a one-hot outer product) and the layers' are added.
        """
        layers = op.layer_count()
        assert isinstance(layers, int) and len(layer_adjoints) == layers
        hots = emit.layer_one_hots(stacked_like, layers) if 0 in positions else []
        ct_stacked: SSAValue | None = None
        for layer in reversed(range(layers)):
            outs = layer_adjoints[layer](ct)
            if 0 in positions:
                ct_params, ct = outs
                placed = emit.stack_layer(hots[layer], ct_params, op.stacked.type)
                ct_stacked = placed if ct_stacked is None else emit.add(ct_stacked, placed)
            else:
                (ct,) = outs
        contributions = [(1, ct)]
        if ct_stacked is not None:
            contributions.append((0, ct_stacked))
        return contributions

    def _vjp(self, key: Key, f: func.FuncOp, activity: Activity) -> func.FuncOp:
        """`f.vjp(args, ct) -> (value, cotangents)`: the forward pass, then the rules over its values."""
        src = f.body.block
        result_type = f.function_type.outputs.data[0]
        vjp, block = self._new_function(self._name(key, "vjp"), [*f.function_type.inputs.data, result_type])
        _name_args(block, src)
        ct_in = block.args[-1]
        ct_in.name_hint = "ct"
        mapping: dict[SSAValue, SSAValue] = dict(zip(src.args, block.args))
        emit = Emit.at_end(block, lambda v: mapping[v])
        layers_of: dict[Operation, tuple[list[SSAValue], list[SSAValue]]] = {}
        for op in src.ops:
            if isinstance(op, func.ReturnOp):
                break
            if isinstance(op, core.FoldOp) and op in activity.calls:
                # Run layer by layer, so each layer's state is there for its adjoint.
                callee = self.functions[self._callee(op)]
                outputs = callee.function_type.outputs.data

                def step(p: SSAValue, s: SSAValue) -> SSAValue:
                    return emit.op(func.CallOp(callee.sym_name.data, [p, s], outputs))

                layers_of[op] = self._unrolled(op, emit, mapping[op.stacked], mapping[op.init], step)
                mapping[op.results[0]] = layers_of[op][1][-1]
                continue
            block.add_op(op.clone(value_mapper=mapping))
        (value,) = [mapping[v] for v in _returned(src)]

        def callee_adjoint(op: Operation, ct: SSAValue) -> list[tuple[int, SSAValue]]:
            positions = activity.calls[op]
            callee = self.done[(self._callee(op), positions)].vjp
            assert callee is not None
            outputs = callee.function_type.outputs.data

            def call(args: list[SSAValue], ct: SSAValue) -> list[SSAValue]:
                return list(emit.op(func.CallOp(callee.sym_name.data, [*args, ct], outputs)).owner.results[1:])  # type: ignore[union-attr]

            if isinstance(op, core.FoldOp):
                params, states = layers_of[op]
                adjoints = [lambda ct, p=p, s=s: call([p, s], ct) for p, s in zip(params, states)]
                return self._fold_backward(op, emit, mapping[op.stacked], ct, positions, adjoints)
            return list(zip(positions, call([mapping[v] for v in op.operands], ct)))

        grads = self._backward(f, activity, emit, ct_in, callee_adjoint, key[1])
        block.add_op(func.ReturnOp(value, *grads))
        _tidy(vjp)
        _set_type(vjp)
        return vjp

    def _backward(self, f: func.FuncOp, activity: Activity, emit: Emit, ct_in: SSAValue,
                  callee_adjoint: Callable[[Operation, SSAValue], list[tuple[int, SSAValue]]],
                  wrt: Sequence[int]) -> list[SSAValue]:  # fmt: skip
        """Run the rules from the result back to the arguments; the cotangents of the `wrt` arguments."""
        src = f.body.block
        cts: dict[SSAValue, Ct] = {}
        (result,) = _returned(src)
        if result in activity.active:
            cts[result] = ct_in

        def accumulate(v: SSAValue, ct: Ct | None) -> None:
            if ct is None or v not in activity.active:
                return
            cts[v] = ct if v not in cts else emit.plus(cts[v], ct)

        for op in reversed(list(src.ops)):
            if isinstance(op, func.ReturnOp) or not op.results or op.results[0] not in cts:
                continue
            ct = cts[op.results[0]]
            if op in activity.calls:
                for i, g in callee_adjoint(op, emit.dense(ct)):
                    accumulate(op.operands[i], g)
                continue
            rule = RULES[type(op)]
            contributions = rule.adjoint(emit, op, ct if rule.sparse else emit.dense(ct))
            for i, g in zip(positions_of(rule, op), contributions):
                accumulate(op.operands[i], g)
        grads: list[SSAValue] = []
        for i in wrt:
            arg = src.args[i]
            if arg in cts:
                grads.append(emit.dense(cts[arg]))
            else:  # the result does not depend on it
                grads.append(emit.op(core.ZerosLikeOp(emit.like(arg))))
        return grads

    def generate_all(self, within: set[str] | None = None) -> dict[Key, Generated]:
        """Every function each derivative request needs, also those in generated functions.

        `within` (default: every function) limits the requests to those in
        the functions it names.
        """
        pending: list[Operation] = [
            op
            for f in self.functions.values()
            if within is None or f.sym_name.data in within
            for op in f.walk()
            if isinstance(op, GradientRequestOp)
        ]
        seen: set[int] = set()
        while pending:
            op = pending.pop(0)
            assert isinstance(op, GradientRequestOp)
            self.request((op.callee_name, op.positions), op)
            for f in self.created:
                if id(f) not in seen:
                    seen.add(id(f))
                    pending += [o for o in f.walk() if isinstance(o, GradientRequestOp)]
        return self.done


def _symbol(op: Operation) -> str | None:
    name = op.properties.get("sym_name")
    return getattr(name, "data", None)


def _returned(block: Block) -> list[SSAValue]:
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    return list(ret.arguments)


def _hint(new: SSAValue, old: SSAValue) -> None:
    if old.name_hint is not None and new.name_hint is None:
        new.name_hint = old.name_hint


def _name_args(block: Block, src: Block) -> None:
    for new, old in zip(block.args, src.args):
        _hint(new, old)


RECOMPUTED_ARITHMETIC = (core.AddOp, core.SubOp, core.MulOp, core.DivOp, core.NegOp)
"""The ops whose residual `f.bwd` recomputes from the other residuals (`_recompute_arithmetic`)."""


def _recompute_arithmetic(bblock: Block, residuals: dict[SSAValue, BlockArgument]) -> None:
    """Residuals one arithmetic op computes from other residuals are recomputed by `f.bwd`, not saved.

    LayerNorm's backward reads x − μ, σ and x̂ = (x − μ)/σ: saving x̂ costs
    a whole `[batch, seq, embed]` buffer written by the forward pass and
    read back by the backward one, where recomputing it costs one division
    per element inside a kernel that reads x − μ anyway. The op is applied
    to the same values, so the recomputed residual has the saved one's bits.
    Only residuals whose operands stay saved (or are constants, recomputed
    as `primal` recomputes them) qualify: a chain of recomputations would
    read residuals that are no longer saved.
    """
    recomputed: list[SSAValue] = []
    pinned: set[SSAValue] = set()  # operands of a recomputed residual: they stay saved
    for v in [v for v in residuals if isinstance(v.owner, RECOMPUTED_ARITHMETIC)]:
        op = v.owner
        assert isinstance(op, Operation)
        if v in pinned or not all(o in residuals and o not in recomputed or _recomputable_owner(o) for o in op.operands):
            continue
        recomputed.append(v)
        pinned.update(op.operands)
    for v in recomputed:
        op = v.owner
        assert isinstance(op, Operation)
        arg = residuals.pop(v)
        readers = [bblock.find_ancestor_op_in_block(use.operation) for use in arg.uses]
        first_use = min((r for r in readers if r is not None), key=bblock.get_operation_index)
        operands: list[SSAValue] = []
        for o in op.operands:
            if o in residuals:
                operands.append(residuals[o])
            else:
                constant = o.owner.clone()  # type: ignore[union-attr]
                Rewriter.insert_op(constant, InsertPoint.before(first_use))
                operands.append(constant.results[0])
        clone = op.clone(value_mapper=dict(zip(op.operands, operands)))
        Rewriter.insert_op(clone, InsertPoint.before(first_use))
        _hint(clone.results[0], v)
        arg.replace_all_uses_with(clone.results[0])
        bblock.erase_arg(arg)


TRANSCENDENTAL = (core.ExpOp, core.LogOp, core.TanhOp, core.ErfOp, core.GeluOp)
"""The elementwise ops whose cost `_derivatives_in_forward` moves into the forward pass."""


def _derivatives_in_forward(fblock: Block, bblock: Block, residuals: dict[SSAValue, BlockArgument]) -> None:
    """A residual `f.bwd` reads only through elementwise ops into one value of its type: `f.fwd` saves that value.

    GELU's backward reads its input x only to compute gelu'(x) = Φ(x) + x·φ(x),
    an erf and an exp per element, in a kernel that then multiplies by the
    cotangent. Computed in `f.fwd` instead, where x is at hand and the
    forward's own gelu(x) has the same erf, the saved buffer is gelu'(x) in
    place of x (the same size), and the backward's kernel is one product.
    The same ops run on the same values, so every bit stays. Only chains
    with a transcendental move (cheap arithmetic is better recomputed,
    `_recompute_arithmetic`), and only where nothing else in `f.bwd` reads
    the residual.
    """
    for v, arg in list(residuals.items()):
        chain = _elementwise_chain(bblock, arg)
        if chain is None:
            continue
        ops, out = chain
        mapping: dict[SSAValue, SSAValue] = {arg: v}
        for op in ops:
            for o in op.operands:
                if o not in mapping and isinstance(o.owner, Operation) and o.owner not in ops:
                    constant = o.owner.clone()  # a constant of f.bwd (`primal` recomputes them there)
                    Rewriter.insert_op(constant, InsertPoint.at_end(fblock))
                    mapping[o] = constant.results[0]
            clone = op.clone(value_mapper=mapping)
            Rewriter.insert_op(clone, InsertPoint.at_end(fblock))
            _hint(clone.results[0], op.results[0])
        moved = mapping[out]
        new_arg = bblock.insert_arg(out.type, len(bblock.args))
        _hint(new_arg, out)
        out.replace_all_uses_with(new_arg)
        for op in reversed(ops):
            Rewriter.erase_op(op)
        for o in mapping:
            if isinstance(o.owner, Operation) and not o.uses:
                Rewriter.erase_op(o.owner)  # a constant only the chain read
        bblock.erase_arg(arg)
        # The new residual takes the old one's place in the tuple.
        order = list(residuals.items())
        residuals.clear()
        residuals.update((moved, new_arg) if key is v else (key, a) for key, a in order)


def _elementwise_chain(bblock: Block, arg: BlockArgument) -> tuple[list[Operation], SSAValue] | None:
    """The elementwise ops of `f.bwd` computed from `arg` and constants alone, and the one value of arg's
    type that leaves them, or None: arg has another reader, several values leave, or nothing costly is in it."""
    inside: set[SSAValue] = {arg}
    ops: list[Operation] = []
    for op in bblock.ops:
        if not isinstance(op, core.ELEMENTWISE_OPS) or not any(o in inside for o in op.operands):
            continue
        if not all(o in inside or _recomputable_owner(o) for o in op.operands):
            continue
        ops.append(op)
        inside.update(op.results)
    if not ops or any(use.operation not in ops for use in arg.uses):
        return None
    leaving = {r for op in ops for r in op.results if any(use.operation not in ops for use in r.uses)}
    if len(leaving) != 1 or not any(isinstance(op, TRANSCENDENTAL) for op in ops):
        return None
    (out,) = leaving
    return (ops, out) if out.type == arg.type else None


def _recomputable_owner(v: SSAValue) -> bool:
    return isinstance(v.owner, Operation) and _recomputable(v.owner)


def _tidy(f: func.FuncOp) -> None:
    """cse then dce: no duplicate adjoint term, no forward value or cotangent nothing reads."""
    cse(f.body)
    region_dce(f.body)


def _set_type(f: func.FuncOp) -> None:
    block = f.body.block
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    f.function_type = FunctionType.from_lists([a.type for a in block.args], [v.type for v in ret.arguments])


class ReplaceRequest(RewritePattern):
    """A `grad`/`value_and_grad` becomes calls to its generated functions."""

    def __init__(self, generated: dict[Key, Generated], recompute: bool) -> None:
        self.generated = generated
        self.recompute = recompute

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: GradientRequestOp, rewriter: PatternRewriter) -> None:
        g = self.generated.get((op.callee_name, op.positions))
        if g is None:  # in a function the pass's `entries` do not reach
            return
        one = core.ConstantOp(1.0, RealType())
        one.result.name_hint = "one"
        new: list[Operation] = [one]
        if self.recompute:
            assert g.vjp is not None
            call = func.CallOp(g.vjp.sym_name.data, [*op.arguments, one.result], g.vjp.function_type.outputs.data)
            new.append(call)
            value, grads = call.results[0], list(call.results[1:])
        else:
            assert g.fwd is not None and g.bwd is not None
            fwd = func.CallOp(g.fwd.sym_name.data, list(op.arguments), g.fwd.function_type.outputs.data)
            bwd = func.CallOp(g.bwd.sym_name.data, [fwd.results[1], one.result], g.bwd.function_type.outputs.data)
            new += [fwd, bwd]
            value, grads = fwd.results[0], list(bwd.results)
        gradient: SSAValue = grads[0]
        if len(grads) > 1:
            packed = core.TupleOp(grads)
            new.append(packed)
            gradient = packed.result
        if isinstance(op, ValueAndGradOp):
            pair = core.TupleOp([value, gradient], op.result.type)
            new.append(pair)
            gradient = pair.result
        rewriter.replace(op, new, [gradient])


@dataclass(frozen=True)
class AutoDiff(ModulePass):
    """Replace every `psk_core.grad`/`value_and_grad` by calls to generated forward and backward functions."""

    name = "psk-autodiff"

    remat: str = "save"
    """`save`: `f.fwd` keeps the residuals `f.bwd` reads; `recompute`: one `f.vjp` recomputes them."""

    entries: str = ""
    """Comma-separated functions: only the requests they reach are expanded (default: every request).

    A command on one entry of a file that also asks for a gradient elsewhere
    (the course GPT's `loss` beside its `loss_grad`) then neither pays for
    nor sees that gradient."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.remat not in REMAT_MODES:
            raise PreskError("E3002", f"psk-autodiff: remat={self.remat!r}; expected one of {', '.join(REMAT_MODES)}")
        recompute = self.remat == "recompute"
        differentiator = Differentiator(op, recompute)
        roots = [name for name in self.entries.split(",") if name]
        generated = differentiator.generate_all(reachable_functions(op, roots) if roots else None)
        if not generated:
            return
        for f in differentiator.created:
            Rewriter.insert_op(f, InsertPoint.at_end(op.body.block))
        PatternRewriteWalker(ReplaceRequest(generated, recompute)).rewrite_module(op)
