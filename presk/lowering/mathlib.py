"""LLVM IR for presk's transcendentals (exp, log, tanh, erf; sqrt), scalar or vector.

Why not `llvm.exp` and friends: on vectors LLVM scalarises them into libm calls
(slow), and libm's bits cannot be reproduced by the kernel interpreter. presk
emits its own branch-free polynomial code instead; the algorithm and constants
live in `mathlib_spec` / `mathlib_coefficients`, shared with the numpy twin
`presk.interp.mathlib`, which gives the same bits.

Each `emit_*` writes straight-line code at the builder's position (no blocks,
no calls except the `llvm.fma`/`llvm.fabs`/`llvm.copysign`/`llvm.sqrt`
intrinsics, declared in the builder's module on first use) and returns the
result value. `x` may be `float`, `double`, or `<N x float>` / `<N x double>`
for any N; a vector lane computes exactly what the scalar code computes.
Nothing here carries fast-math flags, and fmul/fadd are never contracted.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from llvmlite import ir

from presk.lowering import mathlib_spec as spec

__all__ = [
    "EMITTERS",
    "IROps",
    "TargetAttributes",
    "branch_to_exact",
    "define_map_kernel",
    "emit_divide",
    "emit_erf",
    "emit_exp",
    "emit_log",
    "emit_sqrt",
    "emit_tanh",
    "instructions",
]

Emitter = Callable[[ir.IRBuilder, ir.Value], ir.Value]


def _intrinsic(module: ir.Module, name: str, ty: ir.Type, arity: int) -> ir.Function:
    """Declare (once) an overloaded float intrinsic such as llvm.fma.v16f32."""
    if isinstance(ty, ir.VectorType):
        suffix = f"v{ty.count}{ty.element.intrinsic_name}"
    else:
        suffix = ty.intrinsic_name
    full = f"{name}.{suffix}"
    existing = module.globals.get(full)
    if isinstance(existing, ir.Function):
        return existing
    return ir.Function(module, ir.FunctionType(ty, [ty] * arity), full)


def _target_features(builder: ir.IRBuilder) -> set[str]:
    """The `"target-features"` of the function being built (`presk.lowering.kernel_to_llvm` sets them)."""
    try:
        attributes = builder.function.attributes
    except AttributeError:
        return set()
    strings = getattr(attributes, "strings", None)
    if not isinstance(strings, dict):
        return set()
    return {f for f in str(strings.get("target-features", "")).split(",") if f.startswith("+")}


def _scalef_intrinsic(builder: ir.IRBuilder, ty: ir.Type) -> tuple[ir.Function, ir.IntType, bool] | None:
    """`llvm.x86.avx512.mask.scalef.{ps,pd}.{128,256,512}` for the vector type `ty`, when the target has it."""
    if not isinstance(ty, ir.VectorType):
        return None
    element = ty.element
    bits = 32 if isinstance(element, ir.FloatType) else 64 if isinstance(element, ir.DoubleType) else 0
    width = bits * ty.count
    if width not in (128, 256, 512):
        return None
    features = _target_features(builder)
    if "+avx512f" not in features or (width < 512 and "+avx512vl" not in features):
        return None
    kind = "ps" if bits == 32 else "pd"
    name = f"llvm.x86.avx512.mask.scalef.{kind}.{width}"
    mask_type = ir.IntType(max(8, ty.count))
    rounding = width == 512
    existing = builder.module.globals.get(name)
    if isinstance(existing, ir.Function):
        return existing, mask_type, rounding
    params: list[ir.Type] = [ty, ty, ty, mask_type] + ([ir.IntType(32)] if rounding else [])
    return ir.Function(builder.module, ir.FunctionType(ty, params), name), mask_type, rounding


class IROps:
    """`mathlib_spec.Ops` that emits instructions with an IRBuilder, for one
    float type (scalar or vector); integers are the same-width ints, masks i1."""

    def __init__(self, builder: ir.IRBuilder, ty: ir.Type) -> None:
        element = ty.element if isinstance(ty, ir.VectorType) else ty
        if isinstance(element, ir.FloatType):
            self.fmt = spec.F32
        elif isinstance(element, ir.DoubleType):
            self.fmt = spec.F64
        else:
            raise TypeError(f"presk's math functions take float or double (vectors of), not {ty}")
        self.b = builder
        self.fty = ty
        self.lanes = ty.count if isinstance(ty, ir.VectorType) else None
        int_element = ir.IntType(self.fmt.width)
        self.ity = int_element if self.lanes is None else ir.VectorType(int_element, self.lanes)
        self._scalef = _scalef_intrinsic(builder, ty)

    def scale_by_pow2(self, y: ir.Value, kf: ir.Value) -> ir.Value | None:
        """y * 2**kf (kf an integer value) rounded once, in one AVX-512 `vscalef`, or None without one.

        `mathlib_spec.exp` multiplies by two exact powers of two instead
        (eight integer and float instructions): the same IEEE product, the
        same bits (VSCALEFPS/PD: DEST = SRC1 * 2**floor(SRC2), rounded in the
        current mode; no flush to zero, presk never sets FTZ/DAZ). Only for
        vectors of a function compiled with AVX-512 (`"target-features"`
        holds `+avx512f`, and `+avx512vl` below 512 bits).
        """
        if self._scalef is None:
            return None
        fn, mask_type, rounding = self._scalef
        args = [y, kf, y, ir.Constant(mask_type, -1)]
        if rounding:
            args.append(ir.Constant(ir.IntType(32), 4))  # _MM_FROUND_CUR_DIRECTION
        return self.b.call(fn, args)

    def _splat(self, ty: ir.Type, v: float) -> ir.Constant:
        return ir.Constant(ty, v if self.lanes is None else [v] * self.lanes)

    def _call(self, name: str, *args: ir.Value) -> ir.Value:
        return self.b.call(_intrinsic(self.b.module, name, self.fty, len(args)), list(args))

    def const(self, v: float) -> ir.Value:
        return self._splat(self.fty, v)

    def iconst(self, v: int) -> ir.Value:
        return self._splat(self.ity, v)

    def add(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fadd(a, b)

    def sub(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fsub(a, b)

    def mul(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fmul(a, b)

    def div(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fdiv(a, b)

    def fma(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        return self._call("llvm.fma", a, b, c)

    def fabs(self, a: ir.Value) -> ir.Value:
        return self._call("llvm.fabs", a)

    def copysign(self, magnitude: ir.Value, sign: ir.Value) -> ir.Value:
        return self._call("llvm.copysign", magnitude, sign)

    def lt(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered("<", a, b)

    def gt(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered(">", a, b)

    def eq(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered("==", a, b)

    def isnan(self, a: ir.Value) -> ir.Value:
        return self.b.fcmp_unordered("uno", a, a)

    def select(self, m: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.select(m, a, b)

    def iselect(self, m: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.select(m, a, b)

    def mand(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.and_(a, b)

    def bits(self, a: ir.Value) -> ir.Value:
        return self.b.bitcast(a, self.ity)

    def from_bits(self, i: ir.Value) -> ir.Value:
        return self.b.bitcast(i, self.fty)

    def iadd(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.add(a, b)  # no nsw: wraps like numpy

    def isub(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.sub(a, b)

    def iand(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.and_(a, b)

    def shl(self, a: ir.Value, n: int) -> ir.Value:
        return self.b.shl(a, self.iconst(n))

    def ashr(self, a: ir.Value, n: int) -> ir.Value:
        return self.b.ashr(a, self.iconst(n))

    def to_float(self, i: ir.Value) -> ir.Value:
        return self.b.sitofp(i, self.fty)


def emit_divide(builder: ir.IRBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    """a / b, with no subnormal arithmetic where a is subnormal and 1 <= b < 2**p (`mathlib_spec.divide`)."""
    return spec.divide(IROps(builder, a.type), a, b)


def emit_exp(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """e**x (overflow to +inf, underflow through subnormals to +0).

    A vector whose every lane lies in [`exp_normal_from`, `exp_normal_to`],
    or below the format's `exp_lo`, takes `exp_in_normal_range` (no clamps,
    no NaN, no subnormal path, one scaling product: a softmax's
    exponentials) with +0 in the lanes below `exp_lo`; a vector with a lane
    between `exp_lo` and the normal range, above it, or NaN, calls the whole
    method, out of line. The bits are the same either way: the whole method
    clamps a lane below `exp_lo` to `exp_lo`, whose exponential it rounds to
    +0 (`tests/unit/test_mathlib.py`), and the normal range's are
    `exp_in_normal_range`'s. Out of line (`noinline`, `cold`), its constants
    stay out of the caller's registers.

    The lanes below `exp_lo` take the quick form for a softmax of a wide row
    (scores of a large spread, as a model at its initial weights has): most
    of its exponentials lie far below the maximum and round to 0, and a
    vector holding one of them went to the whole method.
    """
    if not isinstance(x.type, ir.VectorType):
        return spec.exp(IROps(builder, x.type), x)
    fmt = spec.F32 if isinstance(x.type.element, ir.FloatType) else spec.F64

    def splat(value: float) -> ir.Constant:
        return ir.Constant(x.type, [value] * x.type.count)

    zero_lanes = builder.fcmp_ordered("<", x, splat(fmt.exp_lo))
    below = builder.and_(builder.fcmp_unordered("<", x, splat(spec.exp_normal_from(fmt))), builder.not_(zero_lanes))
    above = builder.fcmp_unordered(">", x, splat(spec.exp_normal_to(fmt)))

    def quick(b: ir.IRBuilder) -> ir.Value:
        inside = b.select(zero_lanes, splat(0.0), x)  # a lane of the normal range, whose result is discarded
        return b.select(zero_lanes, splat(0.0), spec.exp_in_normal_range(IROps(b, x.type), inside))

    return branch_to_exact(builder, builder.or_(below, above), quick,
                           "presk.exp.exact", [x], lambda b, a: spec.exp(IROps(b, a[0].type), a[0]))  # fmt: skip


def branch_to_exact(
    builder: ir.IRBuilder,
    lanes: ir.Value,
    fast: Callable[[ir.IRBuilder], ir.Value],
    name: str,
    args: list[ir.Value],
    exact: Callable[[ir.IRBuilder, list[ir.Value]], ir.Value],
) -> ir.Value:
    """`fast()`, emitted where no lane of the mask `lanes` is set; else `exact(args)`, a function of the
    module (`name.<type>`, defined once, `noinline` and `cold`, with the calling function's target
    attributes). The fast form is not computed for a vector that takes the exact one: on a lane
    the check sets, it would be the microcode's slow instruction the branch is there to avoid."""
    vty = args[0].type
    flags = lanes.type
    reduce_or = _declared(builder.module, f"llvm.vector.reduce.or.v{flags.count}i1", ir.FunctionType(ir.IntType(1), [flags]))
    any_lane = builder.call(reduce_or, [lanes])
    full = f"{name}.v{vty.count}{vty.element.intrinsic_name}"
    fn = builder.module.globals.get(full)
    if not isinstance(fn, ir.Function):
        fn = ir.Function(builder.module, ir.FunctionType(vty, [a.type for a in args]), full)
        fn.linkage = "internal"
        strings = getattr(builder.function.attributes, "strings", {})  # the caller's target
        fn.attributes = TargetAttributes(strings, ("nounwind", "noinline", "cold"))
        inner = ir.IRBuilder(fn.append_basic_block("entry"))
        inner.ret(exact(inner, list(fn.args)))
    before = builder.block
    slow = builder.append_basic_block(f"{before.name}.exact")
    quick = builder.append_basic_block(f"{before.name}.fast")
    join = builder.append_basic_block(f"{before.name}.joined")
    builder.cbranch(any_lane, slow, quick)
    builder.position_at_end(slow)
    result = builder.call(fn, args)
    builder.branch(join)
    builder.position_at_end(quick)
    value = fast(builder)
    quick_end = builder.block
    builder.branch(join)
    builder.position_at_end(join)
    merged = builder.phi(vty)
    merged.add_incoming(value, quick_end)
    merged.add_incoming(result, slow)
    return merged


def _declared(module: ir.Module, name: str, signature: ir.FunctionType) -> ir.Function:
    existing = module.globals.get(name)
    return existing if isinstance(existing, ir.Function) else ir.Function(module, signature, name)


def emit_log(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Natural logarithm: log(+-0) = -inf, log(x < 0) = nan, log(inf) = inf."""
    return spec.log(IROps(builder, x.type), x)


def emit_tanh(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """tanh, odd (tanh(-0) = -0), exactly +-1 from where it rounds to 1."""
    return spec.tanh(IROps(builder, x.type), x)


def emit_erf(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """erf, odd, exactly +-1 from where it rounds to 1 (gelu builds on it)."""
    return spec.erf(IROps(builder, x.type), x)


def emit_sqrt(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """`llvm.sqrt`: IEEE correctly rounded, so numpy.sqrt gives the same bits."""
    IROps(builder, x.type)  # type check only
    return builder.call(_intrinsic(builder.module, "llvm.sqrt", x.type, 1), [x])


EMITTERS: dict[str, Emitter] = {
    "exp": emit_exp,
    "log": emit_log,
    "tanh": emit_tanh,
    "erf": emit_erf,
    "sqrt": emit_sqrt,
}


class TargetAttributes(ir.FunctionAttributes):
    """Function attributes with `"key"="value"` strings (`"target-features"`, what `IROps` reads to use AVX-512's vscalef)."""

    def __init__(self, strings: dict[str, str], flags: tuple[str, ...] = ("nounwind",)) -> None:
        self.strings = dict(strings)
        super().__init__(list(flags))

    def _to_list(self, ret_type: ir.Type) -> list[str]:
        return [*super()._to_list(ret_type), *(f'"{k}"="{v}"' for k, v in self.strings.items())]


def define_map_kernel(module: ir.Module, name: str, emit: Emitter, element: ir.Type,
                      lanes: int = 1, target_features: str | None = None) -> ir.Function:
    """`void name(T* x, T* y, i64 n)`: y[i] = f(x[i]) for i < n.

    A main loop over whole `<lanes x T>` vectors (unaligned loads/stores), then a
    scalar loop for the n % lanes rest; lanes = 1 gives the scalar kernel. For
    tests and benchmarks: real kernels come from psk-to-llvm. `target_features`
    (LLVM's `+avx512f,...`) lets the vector code use the target's instructions,
    as a kernel's does (`IROps.scale_by_pow2`).
    """
    i64 = ir.IntType(64)
    ptr = element.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, i64]), name)
    if target_features is not None:
        fn.attributes = TargetAttributes({"target-features": target_features})
    fn.args[0].add_attribute("noalias")
    fn.args[1].add_attribute("noalias")
    src, dst, n = fn.args
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    whole = b.mul(b.sdiv(n, i64(lanes)), i64(lanes)) if lanes > 1 else i64(0)
    start_rest = entry
    if lanes > 1:
        vty = ir.VectorType(element, lanes)
        vptr = vty.as_pointer()
        vhead, vbody, vdone = (fn.append_basic_block(s) for s in ("vhead", "vbody", "vdone"))
        b.branch(vhead)
        b.position_at_end(vhead)
        i = b.phi(i64, "i")
        i.add_incoming(i64(0), entry)
        b.cbranch(b.icmp_signed("<", i, whole), vbody, vdone)
        b.position_at_end(vbody)
        v = b.load(b.bitcast(b.gep(src, [i]), vptr), align=_element_size(element))
        b.store(emit(b, v), b.bitcast(b.gep(dst, [i]), vptr), align=_element_size(element))
        i.add_incoming(b.add(i, i64(lanes)), b.block)  # an emitter may branch
        b.branch(vhead)
        b.position_at_end(vdone)
        start_rest = vdone
    head, body, done = (fn.append_basic_block(s) for s in ("head", "body", "done"))
    b.branch(head)
    b.position_at_end(head)
    j = b.phi(i64, "j")
    j.add_incoming(whole, start_rest)
    b.cbranch(b.icmp_signed("<", j, n), body, done)
    b.position_at_end(body)
    b.store(emit(b, b.load(b.gep(src, [j]))), b.gep(dst, [j]))
    j.add_incoming(b.add(j, i64(1)), body)
    b.branch(head)
    b.position_at_end(done)
    b.ret_void()
    return fn


def _element_size(element: ir.Type) -> int:
    """Bytes of a float or double."""
    return 4 if isinstance(element, ir.FloatType) else 8


@functools.cache
def instructions(name: str, width: int, lanes: int) -> int:
    """The instructions presk's `math.<name>` emits for one value of `lanes` floats of `width` bits.

    What the cost model weighs one evaluation by (`presk.cost.quantities`):
    the function's own instructions, as `emit_math` writes them (float,
    integer and mask operations and intrinsic calls; no block's branch or
    phi); for `exp` on vectors, its quick form for lanes in the normal
    range and the test that chooses it, not the whole method out of line.
    """
    element: ir.Type = ir.FloatType() if width == 32 else ir.DoubleType()
    ty = element if lanes == 1 else ir.VectorType(element, lanes)
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ty, [ty]), "f")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    builder.ret(EMITTERS[name](builder, fn.args[0]))
    skipped = ("br", "phi", "ret")
    return sum(1 for block in fn.blocks for inst in block.instructions if inst.opname not in skipped)
