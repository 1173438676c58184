"""What one node of `psk-egraph-opt`'s e-graph costs: operation counts, or seconds a profile's roofline predicts.

Extraction adds these prices over the classes a program uses (each once), so
a price is a property of one node at the types of its class and its
operands' classes. Three pricings:

* `counts` (the default, the seed's): structural 0.01, elementwise 1, powers
  0.9, transcendental 2, reductions 1, contractions and loops 8. It cannot
  see sizes: scaling the queries or the scores of an attention costs the same.
* `roofline` (`profile=P.json`, `fusion=false`): every node priced as a
  kernel of its own, λ + max(W/π, Q/β) with the profile's fitted roofline
  (`docs/cost.md` §2): W the weighted work (arithmetic 1, transcendental 8,
  a contraction 2 per multiply-add), Q the bytes of its operands and result.
* `fused` (`profile=P.json`, the default with a profile): what `psk-fuse`
  makes of the program. An elementwise node that joins fusion groups moves
  no bytes of its own and launches nothing, its operands and result staying
  in registers inside the group's loop: W/π. Every other node that computes
  (reductions, contractions, softmax, broadcasts, compares, ...) is a launch
  that reads its operands and writes its result, so the traffic a candidate
  pays is that of the boundaries of its fusion partition. This prices the
  groups' reads at their consumers and not at a group's own write, and takes
  every elementwise node as fusable whatever its neighbours' types: the
  model of `psk-fuse`'s partition, not the partition itself.

Sizes must be bound (`psk-bind`, or the sizes a command binds): a size
the pricing cannot evaluate leaves the function as it was, saying which.
Records, tuples, fields, constants, sizes, `split`/`merge` (views), calls and
folds (their callees' nests launch, the same in every candidate) cost a
token amount, so that of two programs of equal time the one with fewer
lets is chosen.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from xdsl.ir import Attribute, Operation

from presk import sizes
from presk.dialects import psk_core as core
from presk.dialects.psk_core_sizes import parse_size_expr
from presk.dialects.psk_core_types import IndexTensorType, RealType, TensorType, leaves
from presk.cost.profile import load_profile
from presk.cost.quantities import TRANSCENDENTAL_WEIGHT
from presk.diagnostics import PreskError
from presk.dialects.psk_realize import STORAGE_BYTES
from presk.dialects.psk_realize_nests import LAUNCHING_OPS

STRUCTURAL = 0.01
COUNTS: dict[str, float] = {
    "T": 0.0, "Nil": 0.0, "Cons": 0.0, "Res": 0.0,
    "Const": STRUCTURAL, "ZerosLike": STRUCTURAL, "Field": STRUCTURAL, "SetField": STRUCTURAL,
    "Record": STRUCTURAL, "Tuple": STRUCTURAL, "Proj": STRUCTURAL,
    "Add": 1.0, "Sub": 1.0, "Mul": 1.0, "Div": 1.0, "Neg": 1.0, "BroadcastLike": 1.0,
    "Pow": 0.9, "Exp": 2.0, "Log": 2.0, "Sqrt": 2.0,
    "Sum": 1.0, "Mean": 1.0, "SumTo": 1.0,
    "Dot": 8.0, "Ein": 8.0,
}  # fmt: skip
"""The seed's operation counts: structural 0.01, elementwise 1, powers 0.9, transcendental 2,
reductions 1, contractions and loops 8 (a term's cost is its nodes', each shared node once)."""

OPAQUE_COUNTS: dict[str, float] = {
    "func.call": 8.0, "psk_core.fold": 8.0, "psk_core.grad": 8.0, "psk_core.value_and_grad": 8.0,
    "psk_core.ein": 8.0, "psk_core.softmax": 2.0, "psk_core.cross_entropy": 2.0, "psk_core.tanh": 2.0,
    "psk_core.gelu": 2.0, "psk_core.erf": 2.0, "psk_core.size": STRUCTURAL, "psk_core.arange": STRUCTURAL,
    "psk_core.causal_mask": STRUCTURAL, "psk_core.split": STRUCTURAL, "psk_core.merge": STRUCTURAL,
}  # fmt: skip
"""Opaque operations by name; any other (max, where, gather, reduce_max, ...) costs 1."""

KINDS: dict[str, type[Operation]] = {
    "Add": core.AddOp, "Sub": core.SubOp, "Mul": core.MulOp, "Div": core.DivOp, "Neg": core.NegOp,
    "Exp": core.ExpOp, "Log": core.LogOp, "Sqrt": core.SqrtOp, "Pow": core.PowOp,
    "Sum": core.SumOp, "Mean": core.MeanOp, "Dot": core.DotOp, "Ein": core.EinOp,
    "SumTo": core.SumToOp, "BroadcastLike": core.BroadcastLikeOp, "ZerosLike": core.ZerosLikeOp,
}  # fmt: skip
"""The operation each constructor of the e-graph stands for (the others are structural)."""

TRANSCENDENTAL: tuple[type[Operation], ...] = (
    core.ExpOp, core.LogOp, core.SqrtOp, core.TanhOp, core.ErfOp, core.GeluOp, core.SoftmaxOp, core.CrossEntropyOp,
)  # fmt: skip
"""Priced at `TRANSCENDENTAL_WEIGHT` per element, the kernel quantities' weight (their kernels call the
math library; a square root is one instruction but of a dozen cycles' latency)."""

TOKEN_SECONDS = 1e-12
"""What a node that moves no data costs under a profile: enough to prefer fewer lets, never a kernel's worth."""


@dataclass(frozen=True)
class NodeFacts:
    """One node (or one original let) as the pricing sees it."""

    kind: str
    """The constructor's name (`Add`, `Dot`, `Opaque`, ...)."""
    op: type[Operation] | None
    """The operation it stands for, None for a structural node."""
    result: Attribute | None
    operands: Sequence[Attribute | None]
    exponent: int | None = None
    """A `pow`'s n."""
    labels: tuple[tuple[str, ...], ...] | None = None
    """An `ein`'s operand labels."""
    opaque_name: str = ""


class Prices:
    """Operation counts (the seed's), the pricing without a profile."""

    name = "counts"

    def __call__(self, facts: NodeFacts) -> float:
        if facts.kind == "Opaque":
            return OPAQUE_COUNTS.get(facts.opaque_name, 1.0)
        return COUNTS[facts.kind]


class UnboundSize(Exception):
    """A size a profile's pricing needs and cannot evaluate."""


@dataclass
class RooflinePrices(Prices):
    """Seconds from a profile's roofline at bound sizes (`fused`: elementwise nodes in registers)."""

    launch: float
    """λ, seconds a kernel costs however small."""
    pi: float
    """Weighted work per second, at the widest lanes the profile measured for the realization."""
    beta: float
    """Bytes per second."""
    element_bytes: int
    env: Mapping[str, int] = field(default_factory=dict)
    fused: bool = True
    _counted: dict[int, tuple[Attribute, int]] = field(default_factory=dict, repr=False, compare=False)
    """Elements per type object (kept alive, so that its id is not reused): a parameter tree is counted once,
    and not hashed at every node either (hashing a record type walks it)."""

    @property
    def name(self) -> str:  # type: ignore[override]
        return "fused" if self.fused else "roofline"

    def __call__(self, facts: NodeFacts) -> float:
        op = facts.op
        if COUNTS.get(facts.kind) == 0.0:
            return 0.0  # parameters, list cells and results of a node: nothing of their own
        if op is None or not (issubclass(op, core.ELEMENTWISE_OPS) or issubclass(op, LAUNCHING_OPS)):
            return TOKEN_SECONDS
        out = self._elements(facts.result)
        ins = [self._elements(t) for t in facts.operands]
        moved = (sum(ins) + out) * self.element_bytes
        if issubclass(op, core.ELEMENTWISE_OPS):
            expanded = op is core.PowOp and (facts.exponent or 0) > 2
            weight = TRANSCENDENTAL_WEIGHT if issubclass(op, TRANSCENDENTAL) else 1
            work = out * ((facts.exponent or 1) - 1 if expanded else weight)
            if self.fused and not expanded:
                return work / self.pi
            return self.launch + max(work / self.pi, moved / self.beta)
        work = self._work(facts, op, out, ins)
        return self.launch + max(work / self.pi, moved / self.beta)

    def _work(self, facts: NodeFacts, op: type[Operation], out: int, ins: list[int]) -> float:
        if op is core.DotOp and len(ins) == 2 and out:
            # out[..., J] = Σ_K lhs[..., K] · rhs[K, J]: lhs · rhs / out = K².
            return 2.0 * out * math.sqrt(ins[0] * ins[1] / out)
        if op is core.EinOp and facts.labels is not None:
            extents: dict[str, int] = {}
            for labels, t in zip(facts.labels, facts.operands):
                if isinstance(t, TensorType):
                    extents.update(zip(labels, (self._size(s) for s in t.sizes)))
            return 2.0 * math.prod(extents.values())
        if issubclass(op, TRANSCENDENTAL):
            return float(TRANSCENDENTAL_WEIGHT * max(ins, default=out))
        if op in (core.BroadcastLikeOp, core.ZerosLikeOp, core.ArangeOp, core.CausalMaskOp, core.GatherOp):
            return 0.0
        return float(max([out, *ins]))

    def _elements(self, t: Attribute | None) -> int:
        if t is None:
            return 0
        known = self._counted.get(id(t))
        if known is not None:
            return known[1]
        total = 0
        for _, leaf in leaves(t):
            if isinstance(leaf, RealType):
                total += 1
            elif isinstance(leaf, TensorType | IndexTensorType):
                total += math.prod(self._size(s) for s in leaf.sizes)
        self._counted[id(t)] = (t, total)
        return total

    def _size(self, size: int | str) -> int:
        if isinstance(size, int):
            return size
        try:
            return sizes.evaluate(parse_size_expr(size), self.env, "an axis size")
        except (PreskError, ValueError) as error:  # E4002 (unbound) or a malformed expression: said in the report
            why = f"the profile's prices need bound sizes, and '{size}' is not bound (psk-bind first)"
            raise UnboundSize(why) from error


def profile_prices(path: str, realize: str = "f64", env: Mapping[str, int] | None = None,
                   fused: bool = True) -> RooflinePrices:  # fmt: skip
    """The roofline of the profile at `path` for the realization `realize` (its widest measured lanes)."""
    if realize not in STORAGE_BYTES:
        raise PreskError("E4001", f"no realization '{realize}' (f64, f32 or bf16)")
    roofline = load_profile(path).roofline
    if roofline is None:
        raise PreskError("E8001", f"{path}: the profile has no fitted roofline to price the e-graph with")
    measured = {
        int(name[name.index("/l") + 2 : -1]): value
        for name, value in roofline.values.items()
        if name.startswith(f"pi[{realize}/l") and name not in roofline.unidentified and math.isfinite(value)
    }  # fmt: skip
    if not measured:
        raise PreskError("E8001", f"{path}: the profile's roofline measured no {realize} kernel")
    return RooflinePrices(
        launch=roofline.value("lambda"), pi=measured[max(measured)], beta=roofline.value("beta"),
        element_bytes=STORAGE_BYTES[realize], env=dict(env or {}), fused=fused,
    )  # fmt: skip
