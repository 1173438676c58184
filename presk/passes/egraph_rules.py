"""The rewrite rules of `psk-egraph-opt`, as data: one line a rule, grouped by family.

Every rule is exact over ℝ (docs/egraph.md states each, with its guard). The
terms are egglog-python expressions of one sort, `T`: a PSK-Core value (a let,
a parameter, a constant) or, for the argument lists of opaque operations,
records and tuples, a cons cell. The e-graph carries, per e-class,

* `ty(x)`: the PSK-Core type of the value, as an id into the function's type
  table (`egraph_terms.TypeTable`; id 0 is `!psk_core.real`);
* `is_zero(x)`, `is_one(x)`: the class holds a zero (a scalar 0 or -0, a
  `zeros_like`, a broadcast of a zero) or the scalar 1. The translation
  marks the constants, whose values stay in a Python table so that their
  bits never pass through text.

Types are computed for the nodes the rules create by the `TYPING` rules, from
tables the translation fills for the types of the function only:

* `bc(s, t)` is defined exactly when an elementwise operation on `s` and `t`
  broadcasts trivially: `s = t`, or one of them is real (a scalar against a
  tensor or a tree). It gives the result's type.
* `red(t, axes)`, `fty(t, i)`, `ety(h)`, `dty(s, t)`: the type of a reduction,
  of field or element `i`, of an `ein` (by its header) and of a `dot`.

The guard of every rule that builds a new elementwise operation is that
`bc` be defined on each pair of its operands (`compat`): then broadcasting is
trivial, the algebra of ℝ applies element by element, and the new node gets
a type. Mixed shapes (`[batch, embed]` with `[embed]`) never match: their
reassociation could change the alignment. A rule whose query needs a type
that is not known does not fire, so every node a rule creates is typed, and
what extraction writes back verifies.
"""

from __future__ import annotations

import functools

from egglog import (
    Expr,
    Fact,
    Ruleset,
    Unit,
    birewrite,
    eq,
    expr_fact,
    function,
    i64,
    i64Like,
    ne,
    rewrite,
    rule,
    ruleset,
    set_,
    vars_,
)


class T(Expr):
    """A PSK-Core value of one function body (or a cons cell of an argument list)."""

    def __init__(self, parameter: i64Like) -> None:
        """The function's parameter of that position: a leaf."""


# -- constructors: one per primitive the rules mention ----------------------------


@function
def Const(index: i64Like) -> T:
    """A `psk_core.constant`: its value is entry `index` of the function's constant table (exact bits)."""
@function
def Add(a: T, b: T) -> T: ...
@function
def Sub(a: T, b: T) -> T: ...
@function
def Mul(a: T, b: T) -> T: ...
@function
def Div(a: T, b: T) -> T: ...
@function
def Neg(a: T) -> T: ...
@function
def Exp(a: T) -> T: ...
@function
def Log(a: T) -> T: ...
@function
def Sqrt(a: T) -> T: ...
@function
def Pow(a: T, n: i64Like) -> T: ...
@function
def Sum(a: T, axes: i64Like) -> T: ...
@function
def Mean(a: T, axes: i64Like) -> T: ...
@function
def Dot(a: T, b: T) -> T: ...
@function
def Ein(header: i64Like, a: T, b: T) -> T: ...
@function
def SumTo(x: T, template: T) -> T: ...
@function
def BroadcastLike(x: T, template: T) -> T: ...
@function
def ZerosLike(template: T) -> T: ...
@function
def Field(record: T, index: i64Like) -> T: ...
@function
def SetField(record: T, index: i64Like, value: T) -> T: ...
@function
def Record(record_type: i64Like, fields: T) -> T: ...
@function
def Tuple(tuple_type: i64Like, elements: T) -> T: ...
@function
def Proj(t: T, index: i64Like) -> T: ...
@function
def Opaque(header: i64Like, args: T) -> T: ...
@function
def Res(index: i64Like, op: T) -> T: ...
@function
def Nil() -> T: ...
@function
def Cons(head: T, tail: T) -> T: ...
@function
def Mark(value: i64Like) -> T:
    """Marks the class of value `value` of the function (a parameter or a let's result)."""


@function
def Nth(items: T, index: i64Like) -> T: ...
@function
def Replace(items: T, index: i64Like, value: T) -> T: ...


CONSTRUCTORS = (
    T, Const, Add, Sub, Mul, Div, Neg, Exp, Log, Sqrt, Pow, Sum, Mean, Dot, Ein, SumTo, BroadcastLike,
    ZerosLike, Field, SetField, Record, Tuple, Proj, Opaque, Res, Nil, Cons, Nth, Replace,
)  # fmt: skip
"""Every node kind of the e-graph: their sizes are the node count the limits check."""

HELPERS = ("Nth", "Replace", "Mark")
"""Nodes the rules use to walk lists; extraction never picks them."""


# -- the analysis: types, zero and one --------------------------------------------


@function(merge=lambda old, new: old)
def ty(x: T) -> i64: ...
@function
def bc(s: i64Like, t: i64Like) -> i64: ...
@function
def red(t: i64Like, axes: i64Like) -> i64: ...
@function
def fty(t: i64Like, index: i64Like) -> i64: ...
@function
def ety(header: i64Like) -> i64: ...
@function
def dty(s: i64Like, t: i64Like) -> i64: ...
@function
def is_zero(x: T) -> Unit: ...
@function
def is_one(x: T) -> Unit: ...


REAL = 0
"""The type id of `!psk_core.real`."""

MAX_POW = 16
"""`pow-pow` fires on exponents below this."""

a, b, c, e, s, x, v, w, z, z2, o, tl, tmp = vars_("a b c e s x v w z z2 o tl tmp", T)
i, j, m, n, h, k = vars_("i j m n h k", i64)


def compat(p: T, q: T) -> Fact:
    """Operands `p` and `q` broadcast trivially: equal types, or one of them real."""
    return expr_fact(bc(ty(p), ty(q)))


def same(p: T, q: T) -> Fact:
    """`p` and `q` have one type, axis names included."""
    return eq(ty(p)).to(ty(q))


def real(p: T) -> Fact:
    """`p` is a real scalar."""
    return eq(ty(p)).to(i64(REAL))


def pairwise(*terms: T) -> list[Fact]:
    return [compat(p, q) for idx, p in enumerate(terms) for q in terms[idx + 1 :]]


# -- the typing rules: a type for every node the rules create ---------------------

TYPING: list = [
    *[rule(eq(e).to(op(a, b)), eq(k).to(bc(ty(a), ty(b)))).then(set_(ty(e)).to(k)) for op in (Add, Sub, Mul, Div)],
    *[rule(eq(e).to(op(a)), eq(k).to(ty(a))).then(set_(ty(e)).to(k)) for op in (Neg, Exp, Log, Sqrt, ZerosLike)],
    rule(eq(e).to(Pow(a, n)), eq(k).to(ty(a))).then(set_(ty(e)).to(k)),
    *[rule(eq(e).to(op(a, n)), eq(k).to(red(ty(a), n))).then(set_(ty(e)).to(k)) for op in (Sum, Mean)],
    rule(eq(e).to(Dot(a, b)), eq(k).to(dty(ty(a), ty(b)))).then(set_(ty(e)).to(k)),
    rule(eq(e).to(Ein(h, a, b)), eq(k).to(ety(h))).then(set_(ty(e)).to(k)),
    rule(eq(e).to(Field(a, n)), eq(k).to(fty(ty(a), n))).then(set_(ty(e)).to(k)),
    rule(eq(e).to(SetField(a, n, b)), eq(k).to(ty(a))).then(set_(ty(e)).to(k)),
    rule(eq(e).to(Record(h, tl))).then(set_(ty(e)).to(h)),
    rule(eq(e).to(Tuple(h, tl))).then(set_(ty(e)).to(h)),
    rule(eq(e).to(ZerosLike(a))).then(is_zero(e)),
    rule(eq(e).to(BroadcastLike(z, a)), is_zero(z)).then(is_zero(e)),
]


# -- the rules: (name, left-hand side, right-hand side, guards) ----------------------
# A `<->` rule (`birewrite`) is written once and applies in both directions.

ALGEBRA = [
    ("add-comm",        Add(a, b),                 Add(b, a),                 [compat(a, b)]),
    ("mul-comm",        Mul(a, b),                 Mul(b, a),                 [compat(a, b)]),
    ("add-assoc <->",   Add(Add(a, b), c),         Add(a, Add(b, c)),         pairwise(a, b, c)),
    ("mul-assoc <->",   Mul(Mul(a, b), c),         Mul(a, Mul(b, c)),         pairwise(a, b, c)),
    # the zero or one must not widen the result: x keeps the result's type
    ("add-zero",        Add(a, z),                 a,                         [is_zero(z), same(a, Add(a, z))]),
    ("sub-zero",        Sub(a, z),                 a,                         [is_zero(z), same(a, Sub(a, z))]),
    ("sub-self",        Sub(a, a),                 ZerosLike(a),              []),
    ("mul-one",         Mul(a, o),                 a,                         [is_one(o), same(a, Mul(a, o))]),
    ("mul-zero",        Mul(a, z),                 ZerosLike(a),              [is_zero(z), same(a, Mul(a, z))]),
    ("mul-zero-wide",   Mul(a, z),                 z,                         [is_zero(z), same(z, Mul(a, z))]),
    ("div-one",         Div(a, o),                 a,                         [is_one(o), same(a, Div(a, o))]),
    ("neg-neg",         Neg(Neg(a)),               a,                         []),
    ("sub-add <->",     Sub(a, b),                 Add(a, Neg(b)),            [compat(a, b)]),
    ("pow-one",         Pow(a, 1),                 a,                         []),
    ("mul-self",        Mul(a, a),                 Pow(a, 2),                 []),
    # bounded, so that a class holding both x and (√x)² cannot grow its exponents forever
    ("pow-pow",         Pow(Pow(a, n), m),         Pow(a, n * m),             [n < MAX_POW, m < MAX_POW]),
    ("log-exp",         Log(Exp(a)),               a,                         []),
    ("exp-add <->",     Mul(Exp(a), Exp(b)),       Exp(Add(a, b)),            [compat(a, b)]),
    # on the domain of the left-hand side (a >= 0, where the square root is real)
    ("sqrt-mul",        Mul(Sqrt(a), Sqrt(a)),     a,                         []),
    ("sqrt-pow",        Pow(Sqrt(a), 2),           a,                         []),
    ("distribute <->",  Mul(a, Add(b, c)),         Add(Mul(a, b), Mul(a, c)), pairwise(a, b, c)),
    ("distribute-sub <->", Mul(a, Sub(b, c)),      Sub(Mul(a, b), Mul(a, c)), pairwise(a, b, c)),
    ("mul-div <->",     Mul(a, Div(b, c)),         Div(Mul(a, b), c),         pairwise(a, b, c)),
    ("div-div <->",     Div(Div(a, b), c),         Div(a, Mul(b, c)),         pairwise(a, b, c)),
]  # fmt: skip

REDUCTIONS = [
    # a real scalar factor (or divisor) and a negation commute with sum and mean
    ("sum-scale <->",   Sum(Mul(s, x), n),         Mul(s, Sum(x, n)),         [real(s)]),
    ("mean-scale <->",  Mean(Mul(s, x), n),        Mul(s, Mean(x, n)),        [real(s)]),
    ("sum-div <->",     Sum(Div(x, s), n),         Div(Sum(x, n), s),         [real(s)]),
    ("mean-div <->",    Mean(Div(x, s), n),        Div(Mean(x, n), s),        [real(s)]),
    ("sum-neg <->",     Sum(Neg(x), n),            Neg(Sum(x, n)),            []),
    ("mean-neg <->",    Mean(Neg(x), n),           Neg(Mean(x, n)),           []),
]  # fmt: skip

STRUCTURE = [
    # only at equal static types, axis names included: sum_to's result carries the template's names
    ("sum_to-id",       SumTo(x, tmp),             x,                         [same(x, tmp)]),
    ("broadcast-id",    BroadcastLike(x, tmp),     x,                         [same(x, tmp)]),
    ("sum_to-zero",     SumTo(z, tmp),             ZerosLike(tmp),            [is_zero(z)]),
    ("field-set",       Field(SetField(a, n, v), n), v,                       []),
    ("field-set-other", Field(SetField(a, n, v), m), Field(a, m),             [ne(n).to(m)]),
    ("field-zeros",     Field(ZerosLike(a), n),    ZerosLike(Field(a, n)),    []),
    ("field-record",    Field(Record(h, tl), n),   Nth(tl, n),                []),
    ("proj-tuple",      Proj(Tuple(h, tl), n),     Nth(tl, n),                []),
    ("set-record",      SetField(Record(h, tl), n, v), Record(h, Replace(tl, n, v)), []),
    # two set_fields on zeros of one type, at different fields, summed: one record, no addition
    ("set-set-zeros",   Add(SetField(z, n, v), SetField(z2, m, w)), SetField(SetField(z, n, v), m, w),
                                                                              [is_zero(z), is_zero(z2), same(z, z2), ne(n).to(m)]),
    ("nth-head",        Nth(Cons(a, tl), 0),       a,                         []),
    ("nth-tail",        Nth(Cons(a, tl), n),       Nth(tl, n - 1),            [ne(n).to(i64(0))]),
    ("replace-head",    Replace(Cons(a, tl), 0, v), Cons(v, tl),              []),
    ("replace-tail",    Replace(Cons(a, tl), n, v), Cons(a, Replace(tl, n - 1, v)), [ne(n).to(i64(0))]),
]  # fmt: skip

CONTRACTION = [
    # (Σ aᵢ bᵢ) / s = Σ (aᵢ / s) bᵢ for a real s; the cost decides which operand is scaled
    ("ein-div-left <->",  Div(Ein(h, a, b), s),    Ein(h, Div(a, s), b),      [real(s)]),
    ("ein-div-right <->", Div(Ein(h, a, b), s),    Ein(h, a, Div(b, s)),      [real(s)]),
    ("ein-mul-left <->",  Mul(s, Ein(h, a, b)),    Ein(h, Mul(s, a), b),      [real(s)]),
    ("ein-mul-right <->", Mul(s, Ein(h, a, b)),    Ein(h, a, Mul(s, b)),      [real(s)]),
    ("dot-div-left <->",  Div(Dot(a, b), s),       Dot(Div(a, s), b),         [real(s)]),
    ("dot-div-right <->", Div(Dot(a, b), s),       Dot(a, Div(b, s)),         [real(s)]),
    ("dot-mul-left <->",  Mul(s, Dot(a, b)),       Dot(Mul(s, a), b),         [real(s)]),
    ("dot-mul-right <->", Mul(s, Dot(a, b)),       Dot(a, Mul(s, b)),         [real(s)]),
]  # fmt: skip

FAMILIES: dict[str, list] = {
    "algebra": ALGEBRA,
    "reductions": REDUCTIONS,
    "structure": STRUCTURE,
    "contraction": CONTRACTION,
}


SIMPLIFICATIONS = frozenset({
    "add-zero", "sub-zero", "sub-self", "mul-one", "mul-zero", "mul-zero-wide", "div-one", "neg-neg", "pow-one", "log-exp", "sqrt-mul", "sqrt-pow",
    "sum_to-id", "broadcast-id", "sum_to-zero", "field-set", "field-set-other", "field-record", "proj-tuple",
    "nth-head", "nth-tail", "replace-head", "replace-tail",
})  # fmt: skip
"""Rules whose right-hand side is a part of the left or strictly cheaper: the left-hand side is
subsumed (egglog's `subsume`) and never matched again. Without it, a class holding both x and
x + 0 feeds associativity and distributivity forever (x = x + 0 = (x + 0) + 0 ...). Extraction
still may pick a subsumed node (`egraph_terms.Serialized`): after merges it can be the same node
as one another class needs."""


def _compile(name: str, lhs: T, rhs: T, guards: list[Fact]) -> list:
    if name.endswith("<->"):
        return [birewrite(lhs).to(rhs, *guards)]
    return [rewrite(lhs, subsume=name in SIMPLIFICATIONS).to(rhs, *guards)]


def rule_names() -> list[str]:
    """Every rule's name, by family, as docs/egraph.md lists them."""
    return [name for rules in FAMILIES.values() for name, *_ in rules]


def build_ruleset(families: tuple[str, ...] | None = None) -> Ruleset:
    """The typing rules and the rewrite rules of `families` (all when None), as one egglog ruleset."""
    return ruleset(*TYPING, *_compiled(families))


@functools.cache
def _compiled(families: tuple[str, ...] | None) -> tuple:
    """The rewrite rules of `families`, built once: every function's e-graph runs the same ones (the
    caller's ruleset is new each time, since a function's own rules join it)."""
    chosen = FAMILIES if families is None else {f: FAMILIES[f] for f in families}
    return tuple(r for rules in chosen.values() for name, lhs, rhs, guards in rules for r in _compile(name, lhs, rhs, guards))


def zeros_record_rule(record_type: int, header_fields: int) -> list:
    """`zeros_like t` of a record type with known fields is the record of its fields' zeros.

    Generated per record type of the function (its arity is the type's), so that a
    `set_field` on it becomes a `record` through `set-record`.
    """
    items: T = Nil()
    for idx in reversed(range(header_fields)):
        items = Cons(ZerosLike(Field(a, idx)), items)
    return [rewrite(ZerosLike(a)).to(Record(record_type, items), eq(ty(a)).to(i64(record_type)))]
